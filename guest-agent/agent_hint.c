// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_hint.c - application hints: the local socket's request language, the pagemap
 * translation from a caller's virtual memory to guest-physical ranges, and the client that
 * `memtide-agent hint` uses.
 *
 * Trust (docs/protocol.md, "The local hint socket"): the socket is mode 0666, so every user
 * in the guest can connect.  The caller is identified by SO_PEERCRED (agent_loop.c), never
 * by what it says.  What a caller other than root may do:
 *   - hot/cold about a process whose /proc/PID it owns (itself by default), and only about
 *     the pages mapped by that process alone (pagemap's "exclusively mapped" bit): a page
 *     shared with other processes (page cache, shared libraries, shared memory) may belong
 *     to someone else, and a user must not steer the host's reclaim of it;
 *   - need only when the guest's admin allows it (hint_user_need): a need makes the host
 *     give the VM memory at once, which is the guest admin's call, not any user's.
 * The ownership check and the pagemap read go through one fd of /proc/PID, so a PID that
 * exits and is reused between the two cannot be read as someone else's.  Rates and
 * connection slots per user are agent_hint_guard.c's.  A request names at most
 * HINT_MAX_BYTES of address space, so one request reads at most 1 Mi pagemap entries
 * (8 MiB, a few ms) however large the range it names.
 *
 * pagemap entry (Documentation/admin-guide/mm/pagemap.rst): bit 63 present, bits 0-54 the
 * page frame number.  Without CAP_SYS_ADMIN the kernel reports pfn 0: the agent runs as
 * root in production; a pfn of 0 on a present page is taken as "no permission".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"

#define PM_PRESENT     (1ULL << 63)
#define PM_EXCLUSIVE   (1ULL << 56) /* page mapped by this process only (Linux 4.2+) */
#define PM_PFN_MASK    ((1ULL << 55) - 1)
#define PM_CHUNK       512
#define HINT_MAX_BYTES (4ULL << 30)
#define CLIENT_WAIT_MS 5000

static int by_start(const void *x, const void *y)
{
	const struct proto_range *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* Sort and merge touching or overlapping ranges in place; returns the new count. */
static uint32_t merge(struct proto_range *r, uint32_t n)
{
	uint32_t out = 0;

	qsort(r, n, sizeof(*r), by_start);
	for (uint32_t i = 0; i < n; i++) {
		if (out && r[i].start <= r[out - 1].start + r[out - 1].bytes) {
			uint64_t end = r[i].start + r[i].bytes;

			if (end > r[out - 1].start + r[out - 1].bytes)
				r[out - 1].bytes = end - r[out - 1].start;
		} else {
			r[out++] = r[i];
		}
	}
	return out;
}

int agent_pagemap_open(const struct agent_config *c, pid_t pid, uid_t uid)
{
	char path[AGENT_PATH_MAX + 32];
	struct stat st;
	int dir, fd, e;

	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/proc/%d", c->sys_root, (int)pid);
	dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	if (uid != 0 && (fstat(dir, &st) < 0 || st.st_uid != uid)) {
		close(dir);
		return -EPERM;
	}
	fd = openat(dir, "pagemap", O_RDONLY | O_CLOEXEC);
	e = errno;
	close(dir);
	return fd < 0 ? -e : fd;
}

int agent_pagemap_read(int fd, uint64_t vaddr, uint64_t len, bool exclusive_only,
		       struct proto_range *r, uint32_t max, bool *truncated)
{
	uint64_t ent[PM_CHUNK];
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t page = ps > 0 ? (uint64_t)ps : 4096, first, npages, done = 0;
	uint32_t n = 0;
	bool zero_pfn = false, shared = false;

	*truncated = false;
	if (len == 0 || len > HINT_MAX_BYTES || vaddr + len < vaddr)
		return -EINVAL;
	first = vaddr / page;
	npages = (vaddr + len + page - 1) / page - first;
	while (done < npages) {
		size_t want = (size_t)(npages - done < PM_CHUNK ? npages - done : PM_CHUNK);
		ssize_t got = pread(fd, ent, want * 8, (off_t)((first + done) * 8));

		if (got < 0)
			return -errno;
		if (got < 8)
			break;
		for (size_t i = 0; i < (size_t)got / 8; i++) {
			uint64_t pfn = ent[i] & PM_PFN_MASK;

			if (!(ent[i] & PM_PRESENT))
				continue;
			if (exclusive_only && !(ent[i] & PM_EXCLUSIVE)) {
				shared = true;
				continue;
			}
			if (pfn == 0) {
				zero_pfn = true;
				continue;
			}
			if (pfn >= PROTO_PHYS_ADDR_MAX / page)
				continue; /* beyond any machine: pfn * page would wrap */
			/* extend the last run when this frame follows it */
			if (n && r[n - 1].start + r[n - 1].bytes == pfn * page) {
				r[n - 1].bytes += page;
			} else if (n < max) {
				r[n++] = (struct proto_range){pfn * page, page};
			} else {
				/* full: merge what we have, maybe that makes room */
				n = merge(r, n);
				if (n < max)
					r[n++] = (struct proto_range){pfn * page, page};
				else
					*truncated = true;
			}
		}
		done += (uint64_t)got / 8;
	}
	n = merge(r, n);
	if (n == 0 && zero_pfn)
		return -EPERM;
	if (n == 0 && shared)
		return -EACCES;
	return (int)n;
}

int agent_pagemap_ranges(const struct agent_config *c, pid_t pid, uint64_t vaddr, uint64_t len,
			 struct proto_range *r, uint32_t max, bool *truncated)
{
	int fd = agent_pagemap_open(c, pid, 0), n;

	*truncated = false;
	if (fd < 0)
		return fd;
	n = agent_pagemap_read(fd, vaddr, len, false, r, max, truncated);
	close(fd);
	return n;
}

/* Unsigned number, decimal or 0x hex, whole token. */
static bool num(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno == 0 && *end == '\0';
}

int agent_hint_parse(const struct agent_config *c, const char *line, pid_t pid, uid_t uid,
		     struct agent_hint_req *req, char *err, size_t errlen)
{
	struct proto_hint *h = &req->head;
	char buf[AGENT_HINT_LINE_MAX], *save = NULL, *verb, *a1, *a2, *a3, *extra;
	uint64_t x, y, target;
	int n, fd;

	snprintf(buf, sizeof(buf), "%s", line);
	verb = strtok_r(buf, " \t\r\n", &save);
	a1 = strtok_r(NULL, " \t\r\n", &save);
	a2 = strtok_r(NULL, " \t\r\n", &save);
	a3 = strtok_r(NULL, " \t\r\n", &save);
	extra = strtok_r(NULL, " \t\r\n", &save);
	memset(req, 0, sizeof(*req));
	h->pid = (uint32_t)pid;
	if (!verb || !num(a1, &x) || !num(a2, &y) || extra) {
		snprintf(err, errlen, "usage: hot|cold ADDR LEN [PID], or need BYTES WITHIN_MS");
		return -EINVAL;
	}
	if (strcmp(verb, "need") == 0) {
		if (a3) {
			snprintf(err, errlen, "need takes BYTES WITHIN_MS");
			return -EINVAL;
		}
		if (x == 0 || x > PROTO_BYTES_MAX || y > PROTO_WITHIN_MAX_MS) {
			snprintf(err, errlen, "need: BYTES 1..2^52, WITHIN_MS 0..%u",
				 PROTO_WITHIN_MAX_MS);
			return -EINVAL;
		}
		if (uid != 0 && !c->hint_user_need) {
			snprintf(err, errlen,
				 "need is for root (the guest's admin allows every user with "
				 "hint_user_need=true)");
			return -EPERM;
		}
		h->kind = PROTO_HINT_NEED;
		h->need_bytes = x;
		h->within_ms = y;
		return 0;
	}
	if (strcmp(verb, "hot") == 0)
		h->kind = PROTO_HINT_HOT;
	else if (strcmp(verb, "cold") == 0)
		h->kind = PROTO_HINT_COLD;
	else {
		snprintf(err, errlen, "unknown request '%s'", verb);
		return -EINVAL;
	}
	if (a3) {
		if (!num(a3, &target) || target == 0 || target > (1u << 22)) {
			snprintf(err, errlen, "bad PID '%s'", a3);
			return -EINVAL;
		}
		pid = (pid_t)target;
		h->pid = (uint32_t)target;
	}
	/* root may describe any process's pages; anyone else a process of its own, and
	 * only the pages that process alone maps */
	fd = agent_pagemap_open(c, pid, uid);
	if (fd < 0) {
		if (fd == -EPERM)
			snprintf(err, errlen, "pid %d is not yours", (int)pid);
		else
			snprintf(err, errlen, "pid %d: %s", (int)pid, strerror(-fd));
		return fd;
	}
	req->ranges = calloc(AGENT_HINT_MAX_RANGES, sizeof(*req->ranges));
	if (!req->ranges) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n = agent_pagemap_read(fd, x, y, uid != 0, req->ranges, AGENT_HINT_MAX_RANGES,
			       &req->truncated);
	close(fd);
	if (n <= 0) {
		if (n == -EACCES)
			snprintf(err, errlen,
				 "no pages of your own in 0x%" PRIx64 "+0x%" PRIx64
				 " (pages shared with other processes are for root to describe)",
				 x, y);
		else if (n < 0)
			snprintf(err, errlen, "pagemap: %s", strerror(-n));
		else
			snprintf(err, errlen, "no resident pages in 0x%" PRIx64 "+0x%" PRIx64, x,
				 y);
		free(req->ranges);
		req->ranges = NULL;
		return n < 0 ? n : -ENOENT;
	}
	req->nr_ranges = (uint32_t)n;
	return 0;
}

int agent_hint_listen(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path) || !path[0])
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* a minimal guest (busybox initramfs) may have no /run: create the one parent level */
	{
		char dir[sizeof(sa.sun_path)];
		char *slash;

		memcpy(dir, path, strlen(path) + 1);
		slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0755) < 0 && errno != EEXIST)
				return -errno;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a socket left by an agent that died: only a socket is replaced, never a file */
	{
		struct stat st;

		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* any local process may connect; what it may then do is agent_hint_parse's rule (its
	 * own pages only, need for root) and agent_hint_guard.c's (rate and slots per user) */
	chmod(path, 0666);
	return fd;
}

int agent_hint_client(const char *sock_path, const char *line, char *reply, size_t cap)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char req[AGENT_HINT_LINE_MAX + 2];
	size_t got = 0;
	int fd, n;

	if (strlen(sock_path) >= sizeof(sa.sun_path) || cap < 2)
		return -ENAMETOOLONG;
	n = snprintf(req, sizeof(req), "%s\n", line);
	if (n < 0 || (size_t)n >= sizeof(req))
		return -E2BIG;
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, (size_t)n) != n) {
		int e = errno;

		close(fd);
		return -e;
	}
	while (got + 1 < cap) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t k;

		if (poll(&p, 1, CLIENT_WAIT_MS) <= 0) {
			close(fd);
			return -ETIMEDOUT;
		}
		k = read(fd, reply + got, cap - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		if (memchr(reply, '\n', got))
			break;
	}
	close(fd);
	reply[got] = '\0';
	if (got && reply[got - 1] == '\n')
		reply[got - 1] = '\0';
	return strncmp(reply, "ok", 2) == 0 ? 0 : 1;
}
