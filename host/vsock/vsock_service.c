// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vsock_service.c - the thread that serves every VM's vhost-user-vsock device (see
 * vsock_service.h for who listens, endpoints and claims).
 *
 * One round of the thread's loop:
 *   1. poll: the stop/wake eventfd, the directory's inotify fd, and per endpoint its
 *      vhost-user socket, its two kick eventfds and its agent stream (the service's end of
 *      the socketpair: POLLOUT while guest bytes wait for the host, POLLIN while the guest
 *      has room for more);
 *   2. under the mutex: rescan the directory when inotify said so (or every 2 s), connect
 *      endpoints that are due, then per endpoint: read QEMU's messages (at most 64), drain
 *      the kicks, move packets (vsock_dev_process), move the agent's bytes between the
 *      device and the socketpair, and move packets again so what the host wrote goes out.
 * Each round is bounded: 64 messages and 4 x 64 chains per endpoint, 16 KiB per read.
 *
 * Data: the endpoint table is an array of at most MTD_VSOCK_MAX_EPS pointers; each endpoint
 * holds its session (vu_session), its device (vsock_dev, ~130 KiB) and its stream fds.
 * Claims are a list by name.  All of it is guarded by v->lock.
 */
#include "vsock/vsock_service.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mtd.h"
#include "base/qemu_dir.h"
#include "vsock/vhost_int.h"

#define MSGS_PER_ROUND   64
#define CHAINS_PER_CALL  64
#define PROCESS_CALLS    4
#define STREAM_READ_MAX  16384
#define SOCK_TIMEOUT_SEC 2 /* a message QEMU began must arrive whole within this */

struct ep {
	char name[MTD_NAME_MAX];
	char path[108];
	bool discovered; /* found in the directory (removed when its socket goes) */
	bool seen;       /* rescan mark */
	int sock;        /* -1: not connected */
	uint64_t next_try_ms;
	bool said_down; /* "cannot connect" logged once per outage */
	uint64_t session;
	struct vu_session *s;
	struct vsock_dev *dev;
	int qemu_pid;
	uint64_t err_seq; /* the session's last error we logged */
	uint64_t errors;  /* refused messages logged (rate: 1st, 2nd, 4th...) */
	int sp;           /* our end of the agent stream's socketpair */
	uint64_t sp_gen;  /* the device connection it belongs to */
	int pending;      /* the VM's end, until it takes it */
	bool more;        /* the device has work left: poll without waiting */
	uint64_t out_us;  /* when the host's last bytes went to the guest, not yet answered */
};

struct mtd_vsock_claim {
	struct mtd_vsock *v;
	char name[MTD_NAME_MAX];
	int wake_fd;
	struct mtd_vsock_claim *next;
};

struct mtd_vsock {
	struct mtd_vsock_config cfg;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	int wake_fd;
	int ino_fd;
	atomic_bool stop;
	bool rescan_due;
	uint64_t next_rescan_ms;
	struct ep *eps[MTD_VSOCK_MAX_EPS];
	unsigned n;
	struct mtd_vsock_claim *claims;
};

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void signal_fd(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* an eventfd at its maximum is signalled already */
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static bool say_nth(uint64_t n)
{
	return n && !(n & (n - 1));
}

/* ---- endpoints ----------------------------------------------------------------------- */

static struct ep *find_ep(struct mtd_vsock *v, const char *name)
{
	for (unsigned i = 0; i < v->n; i++)
		if (!strcmp(v->eps[i]->name, name))
			return v->eps[i];
	return NULL;
}

static struct mtd_vsock_claim *find_claim(struct mtd_vsock *v, const char *name)
{
	for (struct mtd_vsock_claim *c = v->claims; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

static void wake_claim(struct mtd_vsock *v, const char *name)
{
	struct mtd_vsock_claim *c = find_claim(v, name);

	if (c)
		signal_fd(c->wake_fd);
}

static int add_ep(struct mtd_vsock *v, const char *name, const char *path, bool discovered)
{
	struct ep *e;

	if (strlen(name) >= sizeof(e->name) || strlen(path) >= sizeof(e->path))
		return -ENAMETOOLONG;
	if (find_ep(v, name))
		return -EEXIST;
	if (v->n == MTD_VSOCK_MAX_EPS)
		return -ENOSPC;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->path, sizeof(e->path), "%s", path);
	e->discovered = discovered;
	e->seen = true;
	e->sock = e->sp = e->pending = -1;
	v->eps[v->n++] = e;
	return 0;
}

static void close_stream(struct ep *e)
{
	close_fd(&e->sp);
	close_fd(&e->pending);
}

/* The session ended (QEMU closed, a broken envelope, or we stop). */
static void disconnect(struct mtd_vsock *v, struct ep *e, const char *why)
{
	if (e->sock < 0)
		return;
	mtd_notice("%s: vsock: vhost-user session with QEMU (pid %d) ended: %s", e->name,
		   e->qemu_pid, why);
	close_stream(e);
	vu_session_free(e->s);
	vsock_dev_free(e->dev);
	e->s = NULL;
	e->dev = NULL;
	close_fd(&e->sock);
	e->qemu_pid = 0;
	e->more = false;
	e->next_try_ms = mtd_mono_ms() + MTD_VSOCK_RETRY_MS;
	wake_claim(v, e->name);
}

static void remove_ep(struct mtd_vsock *v, unsigned i, const char *why)
{
	struct ep *e = v->eps[i];

	disconnect(v, e, why);
	free(e);
	v->eps[i] = v->eps[--v->n];
}

static void dev_log(void *ctx, enum vsock_log_level level, const char *msg)
{
	static const enum mtd_log_level map[] = {
	    [VSOCK_LOG_ERR] = MTD_LOG_ERR,
	    [VSOCK_LOG_WARN] = MTD_LOG_WARNING,
	    [VSOCK_LOG_NOTICE] = MTD_LOG_NOTICE,
	    [VSOCK_LOG_INFO] = MTD_LOG_INFO,
	};
	const struct ep *e = ctx;

	mtd_log(map[level], "%s: %s", e->name, msg);
}

/* Step 2a: connect a due endpoint (a unix connect completes or fails at once). */
static void try_connect(struct mtd_vsock *v, struct ep *e, uint64_t now)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct vsock_dev_config dc = {
	    .guest_cid = v->cfg.guest_cid, .port = v->cfg.port, .log = dev_log, .log_ctx = e};
	struct timeval tv = {.tv_sec = SOCK_TIMEOUT_SEC};
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int fd, rc;

	e->next_try_ms = now + MTD_VSOCK_RETRY_MS;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memcpy(sa.sun_path, e->path, strlen(e->path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (!e->said_down)
			mtd_info("%s: vsock: QEMU's socket %s: %s (retrying every %d ms)", e->name,
				 e->path, strerror(errno), MTD_VSOCK_RETRY_MS);
		e->said_down = true;
		close(fd);
		return;
	}
	/* Blocking from here, with timeouts: a message QEMU began arrives whole. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		close(fd);
		return;
	}
	rc = vsock_dev_new(&dc, &e->dev);
	if (rc == 0)
		rc = vu_session_new(&vsock_dev_ops, e->dev, &e->s);
	if (rc < 0) {
		vsock_dev_free(e->dev);
		e->dev = NULL;
		close(fd);
		mtd_err("%s: vsock: cannot set up the device: %s", e->name, strerror(-rc));
		return;
	}
	e->sock = fd;
	e->session++;
	e->said_down = false;
	e->err_seq = 0;
	e->sp_gen = 0;
	e->qemu_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 ? cred.pid : 0;
	mtd_notice("%s: vsock: connected to QEMU (pid %d) at %s; guest cid %llu, agent port %u",
		   e->name, e->qemu_pid, e->path, (unsigned long long)v->cfg.guest_cid,
		   v->cfg.port);
	wake_claim(v, e->name);
}

/* ---- the directory (libvirt mode) ---------------------------------------------------- */

static void rescan(struct mtd_vsock *v)
{
	DIR *d = opendir(v->cfg.dir);
	struct dirent *de;

	if (!d)
		return;
	for (unsigned i = 0; i < v->n; i++)
		v->eps[i]->seen = !v->eps[i]->discovered;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char name[MTD_NAME_MAX], path[108];
		struct stat st;
		struct ep *e;

		if (len <= 5 || strcmp(de->d_name + len - 5, ".sock") != 0 ||
		    len - 5 >= sizeof(name))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", v->cfg.dir, de->d_name) >=
			(int)sizeof(path) ||
		    stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		memcpy(name, de->d_name, len - 5);
		name[len - 5] = '\0';
		e = find_ep(v, name);
		if (e) {
			e->seen = true;
			continue;
		}
		if (add_ep(v, name, path, true) == 0)
			mtd_info("%s: vsock: found QEMU's socket %s", name, path);
	}
	closedir(d);
	/* A socket that went away with no session on it: its QEMU is gone. */
	for (unsigned i = 0; i < v->n;) {
		if (!v->eps[i]->seen && v->eps[i]->sock < 0)
			remove_ep(v, i, "its socket is gone");
		else
			i++;
	}
}

/* ---- the agent stream ---------------------------------------------------------------- */

/* Step 2c: between the device's connection and the socketpair the VM's link reads. */
static void sync_stream(struct mtd_vsock *v, struct ep *e)
{
	struct mtd_vsock_claim *c = find_claim(v, e->name);
	struct vsock_conn_view cv;
	uint8_t buf[STREAM_READ_MAX];

	vsock_dev_set_accepting(e->dev, c != NULL);
	vsock_dev_conn(e->dev, &cv);
	if (cv.open && !cv.guest_done && cv.gen != e->sp_gen) {
		int sv[2];

		/* A new connection from the agent: a new stream for the VM's link. */
		close_stream(e);
		e->sp_gen = cv.gen;
		if (!c ||
		    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
			vsock_dev_host_close(e->dev);
			return;
		}
		e->sp = sv[0];
		e->pending = sv[1];
		signal_fd(c->wake_fd);
	}
	if (e->sp < 0)
		return;
	/* The guest's bytes to the host, as far as the socket takes them. */
	if (cv.open && cv.gen == e->sp_gen) {
		const uint8_t *p;
		size_t n;

		while ((n = vsock_dev_in_peek(e->dev, &p)) > 0) {
			ssize_t w = send(e->sp, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (w <= 0) {
				vsock_dev_host_close(e->dev);
				close_stream(e);
				return;
			}
			vsock_dev_in_consume(e->dev, (size_t)w);
			/* A diagnostic of where a round trip's time goes: from the host's bytes
			 * (a ping) handed to the device to the guest's next bytes (its pong), the
			 * guest's share; memtided's own is the rest of the link's round trip. */
			if (e->out_us) {
				mtd_debug("%s: vsock: the guest answered in %" PRIu64 " us",
					  e->name, mono_us() - e->out_us);
				e->out_us = 0;
			}
		}
		vsock_dev_conn(e->dev, &cv);
	}
	/* The guest side ended (its bytes delivered) or a newer connection took over. */
	if (!cv.open || cv.gen != e->sp_gen) {
		close_stream(e);
		return;
	}
	/* The host's bytes to the guest, as far as the device has room. */
	while (cv.out_room > 0) {
		size_t want = cv.out_room < sizeof(buf) ? cv.out_room : sizeof(buf);
		ssize_t r = recv(e->sp, buf, want, MSG_DONTWAIT);

		if (r > 0) {
			(void)vsock_dev_out_push(e->dev, buf, (size_t)r);
			if (!e->out_us)
				e->out_us = mono_us();
			vsock_dev_conn(e->dev, &cv);
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			/* The link closed its end: what it wrote goes first, then the close. */
			vsock_dev_host_close(e->dev);
			close_stream(e);
		}
		break;
	}
}

static void process(struct ep *e)
{
	e->more = false;
	for (int i = 0; i < PROCESS_CALLS; i++) {
		e->more =
		    vsock_dev_process(e->dev, vu_session_ring(e->s, 0), vu_session_ring(e->s, 1),
				      vu_session_mem(e->s), CHAINS_PER_CALL);
		if (!e->more)
			break;
	}
}

/* ---- the thread ---------------------------------------------------------------------- */

enum slot_kind { SLOT_SOCK, SLOT_KICK0, SLOT_KICK1, SLOT_STREAM };

struct slot {
	struct ep *e;
	enum slot_kind kind;
};

/* Step 2b: one endpoint's events. */
static void serve(struct mtd_vsock *v, struct ep *e, const short *rev)
{
	bool changed = false;

	if (rev[SLOT_SOCK]) {
		for (int i = 0; i < MSGS_PER_ROUND; i++) {
			bool was_started = vu_session_started(e->s);
			int rc = vu_session_read(e->s, e->sock);

			if (vu_session_error_seq(e->s) != e->err_seq) {
				e->err_seq = vu_session_error_seq(e->s);
				if (say_nth(++e->errors))
					mtd_warn(
					    "%s: vsock: refused a message from QEMU: %s (#%llu)",
					    e->name, vu_session_error(e->s),
					    (unsigned long long)e->errors);
			}
			if (rc == -EAGAIN)
				break;
			if (rc < 0) {
				disconnect(v, e,
					   rc == -EPIPE ? "QEMU closed the connection"
							: vu_session_error(e->s));
				return;
			}
			changed |= was_started != vu_session_started(e->s);
		}
	}
	if (rev[SLOT_KICK0])
		vu_session_kicked(e->s, 0);
	if (rev[SLOT_KICK1])
		vu_session_kicked(e->s, 1);
	process(e);
	sync_stream(v, e);
	process(e);
	if (changed)
		wake_claim(v, e->name);
}

static int add_fd(struct pollfd *p, struct slot *s, unsigned *n, int fd, short ev, struct ep *e,
		  enum slot_kind k)
{
	if (fd < 0 || !ev)
		return 0;
	p[*n] = (struct pollfd){.fd = fd, .events = ev};
	s[*n] = (struct slot){.e = e, .kind = k};
	(*n)++;
	return 1;
}

static void *thread_main(void *arg)
{
	struct mtd_vsock *v = arg;
	static const unsigned max = 2 + 4 * MTD_VSOCK_MAX_EPS;
	struct pollfd *p = calloc(max, sizeof(*p));
	struct slot *sl = calloc(max, sizeof(*sl));

	if (!p || !sl) {
		mtd_err("vsock: out of memory; the vsock service is not running");
		free(p);
		free(sl);
		return NULL;
	}
	while (!atomic_load(&v->stop)) {
		unsigned n = 0;
		uint64_t now = mtd_mono_ms(), deadline = now + 1000;

		/* Step 1: what to wait for. */
		pthread_mutex_lock(&v->lock);
		add_fd(p, sl, &n, v->wake_fd, POLLIN, NULL, SLOT_SOCK);
		add_fd(p, sl, &n, v->ino_fd, POLLIN, NULL, SLOT_SOCK);
		if (v->cfg.dir[0] && v->next_rescan_ms < deadline)
			deadline = v->next_rescan_ms;
		for (unsigned i = 0; i < v->n; i++) {
			struct ep *e = v->eps[i];
			struct vsock_conn_view cv;

			if (e->sock < 0) {
				if (e->next_try_ms < deadline)
					deadline = e->next_try_ms;
				continue;
			}
			if (e->more)
				deadline = now;
			add_fd(p, sl, &n, e->sock, POLLIN, e, SLOT_SOCK);
			add_fd(p, sl, &n, vu_session_kick_fd(e->s, 0), POLLIN, e, SLOT_KICK0);
			add_fd(p, sl, &n, vu_session_kick_fd(e->s, 1), POLLIN, e, SLOT_KICK1);
			vsock_dev_conn(e->dev, &cv);
			add_fd(p, sl, &n, e->sp,
			       (short)((cv.out_room ? POLLIN : 0) | (cv.in_bytes ? POLLOUT : 0)), e,
			       SLOT_STREAM);
		}
		pthread_mutex_unlock(&v->lock);
		int timeout = deadline > now ? (int)(deadline - now) : 0;
		if (poll(p, n, timeout) < 0 && errno != EINTR)
			break;

		/* Step 2: handle it. */
		pthread_mutex_lock(&v->lock);
		now = mtd_mono_ms();
		for (unsigned i = 0; i < n; i++) {
			if (sl[i].e || !(p[i].revents & POLLIN))
				continue;
			if (p[i].fd == v->wake_fd) {
				uint64_t x;
				if (read(v->wake_fd, &x, sizeof(x)) < 0) {
					/* drained already */
				}
			} else {
				char evbuf[4096];
				while (read(v->ino_fd, evbuf, sizeof(evbuf)) > 0)
					;
				v->rescan_due = true;
			}
		}
		if (v->cfg.dir[0] && (v->rescan_due || now >= v->next_rescan_ms)) {
			v->rescan_due = false;
			v->next_rescan_ms = now + MTD_VSOCK_RESCAN_MS;
			rescan(v);
		}
		for (unsigned i = 0; i < v->n; i++)
			if (v->eps[i]->sock < 0 && now >= v->eps[i]->next_try_ms)
				try_connect(v, v->eps[i], now);
		/* Every connected endpoint gets a round: its events, or just its pending work.
		 * The slots were taken before this round's rescan, so match them by pointer. */
		for (unsigned i = 0; i < v->n; i++) {
			struct ep *e = v->eps[i];
			short rev[4] = {0};

			if (e->sock < 0)
				continue;
			for (unsigned k = 0; k < n; k++)
				if (sl[k].e == e && p[k].revents)
					rev[sl[k].kind] = p[k].revents;
			serve(v, e, rev);
		}
		pthread_mutex_unlock(&v->lock);
	}
	free(p);
	free(sl);
	return NULL;
}

/* ---- API ----------------------------------------------------------------------------- */

int mtd_vsock_start(const struct mtd_vsock_config *cfg, struct mtd_vsock **out)
{
	struct mtd_vsock *v = calloc(1, sizeof(*v));
	int rc;

	if (!v)
		return -ENOMEM;
	v->cfg = *cfg;
	v->ino_fd = -1;
	pthread_mutex_init(&v->lock, NULL);
	v->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (cfg->dir[0]) {
		/* QEMU (as libvirt's qemu user, group kvm) creates its sockets here. */
		rc = mtd_qemu_dir_make(cfg->dir, 0770);
		if (rc < 0) {
			mtd_err("vsock: cannot create %s: %s", cfg->dir, strerror(-rc));
			goto fail;
		}
		v->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (v->ino_fd < 0 || inotify_add_watch(v->ino_fd, cfg->dir,
						       IN_CREATE | IN_DELETE | IN_MOVED_TO) < 0) {
			rc = -errno;
			mtd_err("vsock: cannot watch %s: %s", cfg->dir, strerror(errno));
			goto fail;
		}
		v->rescan_due = true;
	}
	rc = pthread_create(&v->thread, NULL, thread_main, v);
	if (rc) {
		rc = -rc;
		goto fail;
	}
	v->thread_started = true;
	*out = v;
	return 0;
fail:
	close_fd(&v->wake_fd);
	close_fd(&v->ino_fd);
	pthread_mutex_destroy(&v->lock);
	free(v);
	return rc;
}

void mtd_vsock_stop(struct mtd_vsock *v)
{
	if (!v)
		return;
	atomic_store(&v->stop, true);
	signal_fd(v->wake_fd);
	if (v->thread_started)
		pthread_join(v->thread, NULL);
	/* The guest's agent hears of it now rather than at its next write. */
	for (unsigned i = 0; i < v->n; i++) {
		struct ep *e = v->eps[i];

		if (e->sock < 0)
			continue;
		vsock_dev_host_close(e->dev);
		process(e);
	}
	while (v->n)
		remove_ep(v, v->n - 1, "memtided stops");
	while (v->claims) {
		struct mtd_vsock_claim *c = v->claims;
		v->claims = c->next;
		free(c);
	}
	close_fd(&v->wake_fd);
	close_fd(&v->ino_fd);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

int mtd_vsock_add_endpoint(struct mtd_vsock *v, const char *name, const char *path)
{
	pthread_mutex_lock(&v->lock);
	int rc = add_ep(v, name, path, false);
	pthread_mutex_unlock(&v->lock);
	signal_fd(v->wake_fd);
	return rc;
}

bool mtd_vsock_has_endpoint(struct mtd_vsock *v, const char *name)
{
	pthread_mutex_lock(&v->lock);
	bool has = find_ep(v, name) != NULL;
	pthread_mutex_unlock(&v->lock);
	return has;
}

int mtd_vsock_claim(struct mtd_vsock *v, const char *name, int wake_fd,
		    struct mtd_vsock_claim **out)
{
	struct mtd_vsock_claim *c;

	if (strlen(name) >= sizeof(c->name))
		return -ENAMETOOLONG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->v = v;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->wake_fd = wake_fd;
	pthread_mutex_lock(&v->lock);
	if (find_claim(v, name)) {
		pthread_mutex_unlock(&v->lock);
		free(c);
		return -EEXIST;
	}
	c->next = v->claims;
	v->claims = c;
	pthread_mutex_unlock(&v->lock);
	signal_fd(v->wake_fd); /* requests are accepted from now on */
	*out = c;
	return 0;
}

void mtd_vsock_release(struct mtd_vsock_claim *c)
{
	struct mtd_vsock *v;

	if (!c)
		return;
	v = c->v;
	pthread_mutex_lock(&v->lock);
	for (struct mtd_vsock_claim **pp = &v->claims; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	struct ep *e = find_ep(v, c->name);
	if (e)
		close_fd(&e->pending);
	pthread_mutex_unlock(&v->lock);
	signal_fd(v->wake_fd);
	free(c);
}

int mtd_vsock_take_fd(void *claim)
{
	struct mtd_vsock_claim *c = claim;
	struct mtd_vsock *v = c->v;
	int fd = -EAGAIN;

	pthread_mutex_lock(&v->lock);
	struct ep *e = find_ep(v, c->name);
	if (e && e->pending >= 0) {
		fd = e->pending;
		e->pending = -1;
	}
	pthread_mutex_unlock(&v->lock);
	return fd;
}

void mtd_vsock_state(struct mtd_vsock_claim *c, struct mtd_vsock_state *out)
{
	struct mtd_vsock *v = c->v;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&v->lock);
	struct ep *e = find_ep(v, c->name);
	if (e) {
		out->endpoint = true;
		out->session = e->session;
	}
	if (e && e->sock >= 0) {
		struct vu_session_counters sc;

		out->connected = true;
		out->initialised = vu_session_initialised(e->s);
		out->started = vu_session_started(e->s);
		out->qemu_pid = e->qemu_pid;
		out->nr_regions = vu_session_layout(e->s, out->regions, 8, &out->layout_gen);
		vsock_dev_counters(e->dev, &out->dev);
		vu_session_counters(e->s, &sc);
		out->refused_messages = sc.refused;
		out->ring_broken =
		    vu_session_ring(e->s, 0)->broken || vu_session_ring(e->s, 1)->broken;
	}
	pthread_mutex_unlock(&v->lock);
}
