// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kvsock.c - memtided's AF_VSOCK listener on a KVM host and the CID -> VM claims
 * (kvsock.h says why and what is refused).
 *
 * Data: claims are a list by CID (a host runs tens of VMs, not thousands); each holds the fd
 * of the newest connection its VM has not taken yet.  Refusals remember the last few CIDs
 * they logged, so a guest that reconnects in a loop costs one line every MTD_KVSOCK_SAY_MS.
 * Everything is guarded by k->lock; the thread holds it only to hand over one connection.
 */
#include "vsock/kvsock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mtd.h"

#define SAID_SLOTS 16 /* CIDs whose refusal was logged recently */

struct mtd_kvsock_claim {
	struct mtd_kvsock *k;
	char name[MTD_NAME_MAX];
	uint32_t cid;
	int wake_fd;
	int pending; /* -1: none */
	struct mtd_kvsock_claim *next;
};

struct mtd_kvsock {
	uint32_t port;
	int listen_fd;
	int stop_fd;
	pthread_t thread;
	bool thread_started;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct mtd_kvsock_claim *claims;
	struct {
		uint32_t cid;
		uint64_t at_ms;
	} said[SAID_SLOTS];
	unsigned said_next;
	struct mtd_kvsock_counters ctr;
};

static void signal_fd(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* an eventfd at its maximum is signalled already */
	}
}

int mtd_kvsock_new(uint32_t port, struct mtd_kvsock **out)
{
	struct mtd_kvsock *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	k->port = port;
	k->listen_fd = -1;
	k->stop_fd = -1;
	pthread_mutex_init(&k->lock, NULL);
	*out = k;
	return 0;
}

static struct mtd_kvsock_claim *find_cid(struct mtd_kvsock *k, uint32_t cid)
{
	for (struct mtd_kvsock_claim *c = k->claims; c; c = c->next)
		if (c->cid == cid)
			return c;
	return NULL;
}

/* Log a refusal of cid unless one was logged within MTD_KVSOCK_SAY_MS (lock held). */
static bool say_refusal(struct mtd_kvsock *k, uint32_t cid, uint64_t now_ms)
{
	for (unsigned i = 0; i < SAID_SLOTS; i++) {
		if (k->said[i].cid != cid || !k->said[i].at_ms)
			continue;
		if (now_ms - k->said[i].at_ms < MTD_KVSOCK_SAY_MS)
			return false;
		k->said[i].at_ms = now_ms;
		return true;
	}
	k->said[k->said_next].cid = cid;
	k->said[k->said_next].at_ms = now_ms ? now_ms : 1;
	k->said_next = (k->said_next + 1) % SAID_SLOTS;
	return true;
}

int mtd_kvsock_offer(struct mtd_kvsock *k, int fd, uint32_t cid, uint32_t port, uint64_t now_ms)
{
	int rc = 0;

	pthread_mutex_lock(&k->lock);
	k->ctr.accepted++;
	struct mtd_kvsock_claim *c = find_cid(k, cid);
	if (!c) {
		k->ctr.refused_cid++;
		if (say_refusal(k, cid, now_ms))
			mtd_warn("vsock: refused a connection from CID %u (port %u): no VM "
				 "memtided manages has that CID",
				 cid, port);
		rc = -ENOENT;
	} else if (port >= MTD_KVSOCK_PRIV) {
		k->ctr.refused_port++;
		if (say_refusal(k, cid, now_ms))
			mtd_warn("%s: vsock: refused a connection from CID %u port %u: the agent "
				 "connects from a port below %u (root's); another guest process "
				 "must not pose as it",
				 c->name, cid, port, MTD_KVSOCK_PRIV);
		rc = -EPERM;
	} else {
		if (c->pending >= 0)
			close(c->pending); /* never taken: the agent has connected again since */
		c->pending = fd;
		k->ctr.handed++;
		signal_fd(c->wake_fd);
	}
	pthread_mutex_unlock(&k->lock);
	if (rc < 0)
		close(fd);
	return rc;
}

static void *accept_thread(void *arg)
{
	struct mtd_kvsock *k = arg;

	while (!atomic_load(&k->stop)) {
		struct pollfd p[2] = {{.fd = k->listen_fd, .events = POLLIN},
				      {.fd = k->stop_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			mtd_err("vsock: poll on the AF_VSOCK listener: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		struct sockaddr_vm peer = {0};
		socklen_t len = sizeof(peer);
		int fd = accept4(k->listen_fd, (struct sockaddr *)&peer, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			/* EAGAIN: the peer gave up before we got to it; ECONNABORTED likewise;
			 * EMFILE and the like are the host's trouble: say it, try on */
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				mtd_warn("vsock: accept: %s", strerror(errno));
			continue;
		}
		if (len < sizeof(peer) || peer.svm_family != AF_VSOCK) {
			close(fd);
			continue;
		}
		(void)mtd_kvsock_offer(k, fd, peer.svm_cid, peer.svm_port, mtd_mono_ms());
	}
	return NULL;
}

int mtd_kvsock_listen(struct mtd_kvsock *k)
{
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = k->port};
	int rc;

	k->listen_fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->listen_fd < 0)
		return -errno;
	if (bind(k->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(k->listen_fd, 16) < 0)
		goto fail;
	k->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (k->stop_fd < 0)
		goto fail;
	rc = pthread_create(&k->thread, NULL, accept_thread, k);
	if (rc) {
		errno = rc;
		goto fail;
	}
	k->thread_started = true;
	return 0;
fail:
	rc = -errno;
	close(k->listen_fd);
	k->listen_fd = -1;
	if (k->stop_fd >= 0)
		close(k->stop_fd);
	k->stop_fd = -1;
	return rc;
}

void mtd_kvsock_free(struct mtd_kvsock *k)
{
	if (!k)
		return;
	if (k->thread_started) {
		atomic_store(&k->stop, true);
		signal_fd(k->stop_fd);
		pthread_join(k->thread, NULL);
	}
	if (k->listen_fd >= 0)
		close(k->listen_fd);
	if (k->stop_fd >= 0)
		close(k->stop_fd);
	while (k->claims) { /* a caller that did not release: not leaked all the same */
		struct mtd_kvsock_claim *c = k->claims;
		k->claims = c->next;
		if (c->pending >= 0)
			close(c->pending);
		free(c);
	}
	pthread_mutex_destroy(&k->lock);
	free(k);
}

int mtd_kvsock_claim(struct mtd_kvsock *k, const char *name, uint32_t cid, int wake_fd,
		     struct mtd_kvsock_claim **out)
{
	struct mtd_kvsock_claim *c;

	if (cid < MTD_KVSOCK_MIN_CID || cid == VMADDR_CID_ANY)
		return -EINVAL;
	if (strlen(name) >= sizeof(c->name))
		return -ENAMETOOLONG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->k = k;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->cid = cid;
	c->wake_fd = wake_fd;
	c->pending = -1;
	pthread_mutex_lock(&k->lock);
	struct mtd_kvsock_claim *other = find_cid(k, cid);
	if (other) {
		mtd_err("%s: vsock: CID %u is %s's already: connections from it cannot be told "
			"apart, so %s gets none (give each VM its own guest CID)",
			name, cid, other->name, name);
		pthread_mutex_unlock(&k->lock);
		free(c);
		return -EEXIST;
	}
	c->next = k->claims;
	k->claims = c;
	pthread_mutex_unlock(&k->lock);
	*out = c;
	return 0;
}

void mtd_kvsock_release(struct mtd_kvsock_claim *c)
{
	if (!c)
		return;
	struct mtd_kvsock *k = c->k;
	pthread_mutex_lock(&k->lock);
	for (struct mtd_kvsock_claim **p = &k->claims; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&k->lock);
	if (c->pending >= 0)
		close(c->pending);
	free(c);
}

int mtd_kvsock_take_fd(void *claim)
{
	struct mtd_kvsock_claim *c = claim;
	int fd;

	pthread_mutex_lock(&c->k->lock);
	fd = c->pending >= 0 ? c->pending : -EAGAIN;
	c->pending = -1;
	pthread_mutex_unlock(&c->k->lock);
	return fd;
}

uint32_t mtd_kvsock_claim_cid(const struct mtd_kvsock_claim *c)
{
	return c ? c->cid : 0;
}

void mtd_kvsock_counters(struct mtd_kvsock *k, struct mtd_kvsock_counters *out)
{
	pthread_mutex_lock(&k->lock);
	*out = k->ctr;
	pthread_mutex_unlock(&k->lock);
}
