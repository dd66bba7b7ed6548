// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qmp.c - QMP client over a unix socket (see qmp.h).
 *
 * Framing: QEMU writes one JSON object per line.  Bytes are read into a buffer that grows to
 * at most MTD_QMP_MAX_MSG_BYTES; each complete line goes to mtd_qmp_parse_line().  A line longer than
 * the buffer, or one that is not a JSON object, breaks the connection (-EPROTO): QMP never
 * sends either.  Every read waits with poll() up to the command's deadline (CLOCK_MONOTONIC).
 * Everything QEMU says is read through the checked accessors of qmp_parse.c.
 *
 * A frozen QEMU (SIGSTOP, a stuck main loop) must cost its own VM's loop no more than the
 * deadline: the connect is non-blocking (a QMP socket whose backlog is full, which is what a
 * QEMU that stopped accepting leaves behind, fails at once with -EAGAIN instead of blocking
 * in connect()), sends carry a send timeout, and every wait polls in slices of at most
 * HURRY_SLICE_MS so that a "hurry" flag (the VM's stop: detach or daemon exit) cuts the
 * deadline to HURRY_MS from the moment it is seen.  A daemon stop then takes at most
 * HURRY_MS per call left, not the full timeout.
 */
#include "act/qmp.h"
#include "act/balloon.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

#define CMD_TIMEOUT_MS 5000
/* QMP replies memtided asks for are under 1 KiB (qom-list ~200 B, guest-stats ~600 B): the
 * buffer starts small and doubles only for a longer line, up to the 1 MiB bound. */
#define QMP_BUF_START  4096
#define HURRY_MS       1000 /* once the VM is stopping, a call gets at most this long */
#define HURRY_SLICE_MS 100  /* how often a wait looks at the hurry flag */

struct mtd_qmp {
	int fd;                   /* connected stream socket, -1 once broken */
	int timeout_ms;           /* per command */
	const atomic_bool *hurry; /* the VM is stopping: cut waits to HURRY_MS (may be NULL) */
	uint64_t hurry_until_ms;  /* set when hurry was first seen */
	char *buf;                /* unparsed bytes, [0, len) of cap */
	size_t len, cap; /* cap grows by doubling from QMP_BUF_START to MTD_QMP_MAX_MSG_BYTES */
	uint64_t last_balloon_event; /* BALLOON_CHANGE actual, bytes */
};

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The deadline, cut to HURRY_MS after the hurry flag was first seen. */
static uint64_t effective_deadline(struct mtd_qmp *q, uint64_t deadline_ms, uint64_t now)
{
	if (q->hurry && atomic_load(q->hurry)) {
		if (!q->hurry_until_ms)
			q->hurry_until_ms = now + HURRY_MS;
		if (q->hurry_until_ms < deadline_ms)
			return q->hurry_until_ms;
	}
	return deadline_ms;
}

/* Next complete JSON object from the socket, by deadline.  Caller puts it. */
static int read_msg(struct mtd_qmp *q, uint64_t deadline_ms, struct json_object **out)
{
	for (;;) {
		char *nl = q->len ? memchr(q->buf, '\n', q->len) : NULL;
		if (nl) {
			size_t line = (size_t)(nl - q->buf) + 1;
			struct json_object *o = NULL;
			int rc = mtd_qmp_parse_line(q->buf, line, &o);
			memmove(q->buf, q->buf + line, q->len - line);
			q->len -= line;
			if (rc == 1)
				continue; /* blank line ("\r\n") */
			if (rc < 0)
				return rc;
			*out = o;
			return 0;
		}
		if (q->len == q->cap) {
			char *nb;

			if (q->cap >= MTD_QMP_MAX_MSG_BYTES)
				return -EPROTO;
			nb = realloc(q->buf, q->cap ? q->cap * 2 : QMP_BUF_START);
			if (!nb)
				return -ENOMEM;
			q->buf = nb;
			q->cap = q->cap ? q->cap * 2 : QMP_BUF_START;
		}
		uint64_t now = mtd_mono_ms();
		uint64_t until = effective_deadline(q, deadline_ms, now);
		if (now >= until)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = q->fd, .events = POLLIN};
		uint64_t slice = until - now < HURRY_SLICE_MS ? until - now : HURRY_SLICE_MS;
		int r = poll(&p, 1, (int)slice);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			continue; /* the deadline is checked at the top */
		ssize_t n = recv(q->fd, q->buf + q->len, q->cap - q->len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		q->len += (size_t)n;
	}
}

int mtd_qmp_execute(struct mtd_qmp *q, const char *cmd, struct json_object *args,
		    struct json_object **ret, char *err, size_t errlen)
{
	struct json_object *req;
	uint64_t deadline;
	int rc;

	if (ret)
		*ret = NULL;
	if (!q || q->fd < 0) {
		snprintf(err, errlen, "QMP connection is closed");
		return -EIO;
	}
	req = json_object_new_object();
	deadline = mtd_mono_ms() + (uint64_t)q->timeout_ms;
	json_object_object_add(req, "execute", json_object_new_string(cmd));
	if (args)
		json_object_object_add(req, "arguments", json_object_get(args));
	const char *s = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	rc = send_all(q->fd, s, strlen(s));
	if (rc == 0)
		rc = send_all(q->fd, "\n", 1);
	json_object_put(req);
	while (rc == 0) {
		struct json_object *msg = NULL;
		rc = read_msg(q, deadline, &msg);
		if (rc < 0)
			break;
		if (mtd_qmp_is_event(msg)) {
			uint64_t actual;
			if (mtd_qmp_balloon_event(msg, &actual))
				q->last_balloon_event = actual;
			json_object_put(msg);
			continue;
		}
		rc = mtd_qmp_reply_result(msg, ret, err, errlen);
		json_object_put(msg);
		return rc;
	}
	snprintf(err, errlen, "QMP %s: %s", cmd, strerror(-rc));
	close(q->fd);
	q->fd = -1;
	return rc;
}

/* Connect without blocking: an AF_UNIX connect either completes at once or, when the
 * listener's backlog is full (a QEMU that stopped accepting), fails with EAGAIN. */
static int connect_now(int fd, const struct sockaddr_un *sa, int timeout_ms)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return errno == EINPROGRESS ? -EAGAIN : -errno;
	if (fcntl(fd, F_SETFL, fl) < 0)
		return -errno;
	/* Sends block at most the command timeout (a QEMU that stopped reading). */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

int mtd_qmp_connect(const char *path, int timeout_ms, const atomic_bool *hurry,
		    struct mtd_qmp **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect_now(fd, &sa, timeout_ms > 0 ? timeout_ms : CMD_TIMEOUT_MS);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return mtd_qmp_connect_fd(fd, timeout_ms, hurry, out);
}

int mtd_qmp_connect_fd(int fd, int timeout_ms, const atomic_bool *hurry, struct mtd_qmp **out)
{
	struct mtd_qmp *q;
	struct json_object *greet = NULL;
	char err[128];
	int rc;

	q = calloc(1, sizeof(*q));
	if (!q) {
		close(fd);
		return -ENOMEM;
	}
	q->fd = fd;
	q->buf = malloc(QMP_BUF_START);
	q->cap = QMP_BUF_START;
	q->timeout_ms = timeout_ms > 0 ? timeout_ms : CMD_TIMEOUT_MS;
	q->hurry = hurry;
	if (!q->buf) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = read_msg(q, mtd_mono_ms() + (uint64_t)q->timeout_ms, &greet);
	if (rc < 0)
		goto fail;
	if (!json_object_object_get_ex(greet, "QMP", NULL)) {
		json_object_put(greet);
		rc = -EPROTO;
		goto fail;
	}
	json_object_put(greet);
	rc = mtd_qmp_execute(q, "qmp_capabilities", NULL, NULL, err, sizeof(err));
	if (rc < 0)
		goto fail;
	*out = q;
	return 0;
fail:
	mtd_qmp_close(q);
	return rc;
}

void mtd_qmp_close(struct mtd_qmp *q)
{
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q->buf);
	free(q);
}

uint64_t mtd_qmp_last_balloon_event(const struct mtd_qmp *q)
{
	return q->last_balloon_event;
}

int mtd_qmp_balloon(struct mtd_qmp *q, uint64_t target_bytes)
{
	struct json_object *args = json_object_new_object();
	char err[160];
	int rc;

	json_object_object_add(args, "value", json_object_new_int64((int64_t)target_bytes));
	rc = mtd_qmp_execute(q, "balloon", args, NULL, err, sizeof(err));
	json_object_put(args);
	return rc;
}

int mtd_qmp_query_balloon(struct mtd_qmp *q, uint64_t *actual_bytes)
{
	struct json_object *ret = NULL;
	char err[160];
	int rc = mtd_qmp_execute(q, "query-balloon", NULL, &ret, err, sizeof(err));

	if (rc == 0)
		rc = mtd_qmp_get_u64(ret, "actual", MTD_QMP_BYTES_MAX, actual_bytes);
	json_object_put(ret);
	return rc;
}

static int qom_list_find(struct mtd_qmp *q, const char *dir, char *path, size_t len)
{
	struct json_object *args = json_object_new_object(), *ret = NULL;
	char err[160];
	int rc;

	json_object_object_add(args, "path", json_object_new_string(dir));
	rc = mtd_qmp_execute(q, "qom-list", args, &ret, err, sizeof(err));
	json_object_put(args);
	if (rc < 0)
		return rc;
	rc = mtd_qmp_find_balloon_entry(ret, dir, path, len);
	json_object_put(ret);
	return rc;
}

int mtd_qmp_find_balloon(struct mtd_qmp *q, char *path, size_t len)
{
	int rc = qom_list_find(q, "/machine/peripheral", path, len);

	if (rc == -ENODEV || rc == -EREMOTEIO)
		rc = qom_list_find(q, "/machine/peripheral-anon", path, len);
	return rc == -EREMOTEIO ? -ENODEV : rc;
}

static int qom_get(struct mtd_qmp *q, const char *path, const char *prop, struct json_object **ret)
{
	struct json_object *args = json_object_new_object();
	char err[160];
	int rc;

	json_object_object_add(args, "path", json_object_new_string(path));
	json_object_object_add(args, "property", json_object_new_string(prop));
	rc = mtd_qmp_execute(q, "qom-get", args, ret, err, sizeof(err));
	json_object_put(args);
	return rc;
}

int mtd_qmp_set_stats_period(struct mtd_qmp *q, const char *path, unsigned seconds)
{
	struct json_object *args = json_object_new_object();
	char err[160];
	int rc;

	json_object_object_add(args, "path", json_object_new_string(path));
	json_object_object_add(args, "property",
			       json_object_new_string("guest-stats-polling-interval"));
	json_object_object_add(args, "value", json_object_new_int((int)seconds));
	rc = mtd_qmp_execute(q, "qom-set", args, NULL, err, sizeof(err));
	json_object_put(args);
	return rc;
}

int mtd_qmp_guest_stats(struct mtd_qmp *q, const char *path, struct mtd_balloon_stats *out)
{
	struct json_object *ret = NULL;
	int rc = qom_get(q, path, "guest-stats", &ret);

	if (rc == 0)
		rc = mtd_qmp_parse_guest_stats(ret, out);
	json_object_put(ret);
	return rc;
}

int mtd_qmp_fpr(struct mtd_qmp *q, const char *path, bool *on)
{
	struct json_object *ret = NULL;
	int rc = qom_get(q, path, "free-page-reporting", &ret);

	if (rc == 0)
		rc = mtd_qmp_parse_bool(ret, on);
	json_object_put(ret);
	return rc;
}

/* ---- the balloon actuator for plain-QEMU mode ------------------------------------------- */

struct qmp_balloon {
	char path[108]; /* QMP socket */
	unsigned stats_period_s;
	int timeout_ms;           /* per command */
	const atomic_bool *hurry; /* the VM is stopping (may be NULL) */
	struct mtd_qmp *q;        /* NULL while disconnected: the next call reconnects */
	char dev[128];            /* the balloon's QOM path */
	unsigned connects; /* connections made (the loop re-sends its target when it moves) */
};

void *mtd_qmp_balloon_new(const char *path, unsigned stats_period_s, int timeout_ms,
			  const atomic_bool *hurry)
{
	struct qmp_balloon *b;

	if (strlen(path) >= sizeof(b->path))
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	memcpy(b->path, path, strlen(path) + 1);
	b->stats_period_s = stats_period_s;
	b->timeout_ms = timeout_ms > 0 ? timeout_ms : CMD_TIMEOUT_MS;
	b->hurry = hurry;
	return b;
}

/* Connect and find the balloon; keeps b->q only when both worked. */
static int qb_connect(struct qmp_balloon *b, char *err, size_t errlen)
{
	int rc;

	if (b->q)
		return 0;
	rc = mtd_qmp_connect(b->path, b->timeout_ms, b->hurry, &b->q);
	if (rc < 0) {
		snprintf(err, errlen, "QMP %s: %s", b->path,
			 rc == -EAGAIN ? "QEMU is not accepting connections (backlog full)"
				       : strerror(-rc));
		return rc;
	}
	rc = mtd_qmp_find_balloon(b->q, b->dev, sizeof(b->dev));
	if (rc < 0) {
		snprintf(err, errlen, "QMP %s: no virtio-balloon device (%s)", b->path,
			 strerror(-rc));
		mtd_qmp_close(b->q);
		b->q = NULL;
		return rc;
	}
	(void)mtd_qmp_set_stats_period(b->q, b->dev, b->stats_period_s);
	b->connects++;
	return 0;
}

/* A command failed: drop a broken connection so the next call reconnects. */
static int qb_check(struct qmp_balloon *b, int rc)
{
	if (rc < 0 && rc != -EREMOTEIO && b->q) {
		mtd_qmp_close(b->q);
		b->q = NULL;
	}
	return rc;
}

static int qb_open(void *ctx, uint64_t *domain_bytes, char *err, size_t errlen)
{
	struct qmp_balloon *b = ctx;
	struct json_object *ret = NULL;
	int rc = qb_connect(b, err, errlen);

	if (rc < 0)
		return rc;
	rc = mtd_qmp_execute(b->q, "query-memory-size-summary", NULL, &ret, err, errlen);
	if (rc == 0)
		rc = mtd_qmp_get_u64(ret, "base-memory", MTD_QMP_BYTES_MAX, domain_bytes);
	json_object_put(ret);
	if (rc == -EPROTO)
		snprintf(err, errlen, "QMP query-memory-size-summary: no base-memory");
	return qb_check(b, rc);
}

static int qb_set_target(void *ctx, uint64_t target_bytes, char *err, size_t errlen)
{
	struct qmp_balloon *b = ctx;
	int rc = qb_connect(b, err, errlen);

	if (rc < 0)
		return rc;
	rc = mtd_qmp_balloon(b->q, target_bytes);
	if (rc < 0)
		snprintf(err, errlen, "QMP balloon: %s", strerror(-rc));
	return qb_check(b, rc);
}

static int qb_read(void *ctx, uint64_t *actual_bytes, struct mtd_balloon_stats *st)
{
	struct qmp_balloon *b = ctx;
	char err[160];
	int rc = qb_connect(b, err, sizeof(err));

	memset(st, 0, sizeof(*st));
	if (rc < 0)
		return rc;
	rc = qb_check(b, mtd_qmp_query_balloon(b->q, actual_bytes));
	if (rc < 0)
		return rc;
	if (qb_check(b, mtd_qmp_guest_stats(b->q, b->dev, st)) < 0)
		memset(st, 0, sizeof(*st)); /* stats are optional; actual is what counts */
	return 0;
}

static int qb_fpr(void *ctx, bool *on)
{
	struct qmp_balloon *b = ctx;
	char err[160];
	int rc = qb_connect(b, err, sizeof(err));

	return rc < 0 ? rc : qb_check(b, mtd_qmp_fpr(b->q, b->dev, on));
}

static int qb_qemu_pid(void *ctx, int *pid)
{
	struct qmp_balloon *b = ctx;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	/* The peer of the QMP socket is QEMU itself. */
	if (!b->q || b->q->fd < 0 ||
	    getsockopt(b->q->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
		return -ENOTSUP;
	*pid = cred.pid;
	return 0;
}

static int qb_qmp(void *ctx, const char *cmd, struct json_object *args, struct json_object **ret,
		  char *err, size_t errlen)
{
	struct qmp_balloon *b = ctx;
	int rc = qb_connect(b, err, errlen);

	if (rc < 0)
		return rc;
	return qb_check(b, mtd_qmp_execute(b->q, cmd, args, ret, err, errlen));
}

/* One query for mtd_qmp_parse_memjob: an error answer (a QEMU without the command) is no
 * answer; a monitor that does not answer is the caller's error. */
static int memjob_query(void *ctx, const char *cmd, struct json_object **ret)
{
	char err[160];
	int rc = qb_qmp(ctx, cmd, NULL, ret, err, sizeof(err));

	if (rc == -EREMOTEIO) {
		*ret = NULL;
		return 0;
	}
	return rc;
}

static int qb_memjob(void *ctx, struct mtd_memjob *out)
{
	struct json_object *m = NULL, *d = NULL, *j = NULL;
	int rc = memjob_query(ctx, "query-migrate", &m);

	if (rc == 0)
		rc = memjob_query(ctx, "query-dump", &d);
	if (rc == 0)
		rc = memjob_query(ctx, "query-jobs", &j);
	if (rc == 0)
		mtd_qmp_parse_memjob(m, d, j, out);
	json_object_put(m);
	json_object_put(d);
	json_object_put(j);
	return rc;
}

static unsigned qb_connects(void *ctx)
{
	const struct qmp_balloon *b = ctx;

	return b->connects;
}

static void qb_destroy(void *ctx)
{
	struct qmp_balloon *b = ctx;

	if (!b)
		return;
	mtd_qmp_close(b->q);
	free(b);
}

const struct mtd_balloon_ops mtd_qmp_balloon_ops = {
    .name = "qmp",
    .open = qb_open,
    .set_target = qb_set_target,
    .read = qb_read,
    .fpr = qb_fpr,
    .qemu_pid = qb_qemu_pid,
    .qmp = qb_qmp,
    .memjob = qb_memjob,
    .connects = qb_connects,
    .destroy = qb_destroy,
};
