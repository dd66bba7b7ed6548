// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_loop.c - memtide-agent's event loop: one thread, one poll() (and a growth watch
 * beside a reclaim request while it runs).
 *
 * fds polled: the stop pipe, the host connection (when up), the hint socket and its clients.
 * Timers (CLOCK_MONOTONIC ms) become the poll timeout: next reconnect, next stats, next wss,
 * handshake timeout.
 *
 * Connection states:
 *
 *   DOWN --open ok--> HELLO (our hello queued) --host hello, versions agree--> READY
 *     ^                 |                                                     |
 *     +----- EOF, error, garbage over budget, handshake timeout, write error -+
 *             (close, reset reader/writer, wait proto_backoff_next(), retry)
 *
 * The host going away is never fatal: the agent keeps retrying with backoff forever
 * (backoff_min_ms doubling to backoff_max_ms, jittered).  A virtio-serial port with no host
 * attached reads as EOF, so it is the same path.
 *
 * What comes in (READY): config -> config_reply, reclaim -> reclaim_reply (the request runs
 * here, synchronously, bounded by its deadline, with the growth watch on a thread of its
 * own meanwhile: on_reclaim), ping -> pong, error -> logged.  Anything
 * else, or anything malformed, is answered with an error naming the field and charged to
 * the peer's error budget (proto_guard); over budget the connection is closed.
 *
 * What goes out: stats every report interval, wss every wss interval (when the guest has
 * MGLRU and the host consumes it), hints as applications send them, and a need hint when the
 * growth watch (agent_watch.c) sees the guest about to run out - all through one token
 * bucket (send_rate) and the bounded writer; when either is full the report is dropped and
 * counted, never queued without bound.  Memory is bounded whatever the host sends: reader
 * <= 1 MiB + 4, writer 256 KiB, hint clients max_hint_clients x 256 bytes.
 *
 * Hint socket clients (any user in the guest): one request line per connection, due within
 * AGENT_HINT_LINE_MS; slots and rates per user are agent_hint_guard.c's, what a user may
 * describe is agent_hint.c's.  The growth watch has a token bucket of its own, so no caller
 * can crowd out the need it sends before the guest runs out.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define HANDSHAKE_TIMEOUT_MS 10000
#define SEND_BURST           40.0
#define WATCH_RATE           1.0 /* growth-watch needs/s (it sends one per horizon at most) */
#define WATCH_BURST          2.0
#define MAX_POLL_FDS         (3 + 64)

enum conn_state { ST_DOWN, ST_HELLO, ST_READY };

struct hint_client {
	int fd;    /* -1: free slot */
	pid_t pid; /* SO_PEERCRED of the connecting process */
	uid_t uid;
	uint64_t deadline_ms; /* its line must be in by then (AGENT_HINT_LINE_MS) */
	size_t len;
	char buf[AGENT_HINT_LINE_MAX];
};

struct agent {
	struct agent_config cfg;
	int stop_pipe[2];

	/* host connection */
	int conn;
	enum conn_state state;
	struct proto_reader rd;
	struct proto_writer wr;
	struct proto_guard guard;
	struct proto_backoff backoff;
	uint64_t next_connect_ms;
	uint64_t hello_sent_ms;
	uint32_t next_id;                /* our request ids, 1.. */
	uint32_t host_caps;              /* from the host's hello */
	uint32_t version;                /* negotiated */
	struct agent_transport_state ts; /* which transport, and how the last one went */
	const char *why;                 /* reason on_frame() gave for closing */

	/* what we report, and when */
	uint32_t caps;           /* ours, sent in hello */
	struct proto_config run; /* in force: defaults, then the host's config */
	uint64_t next_stats_ms;
	uint64_t next_wss_ms;
	uint64_t next_watch_ms;
	struct agent_watch watch;
	struct proto_rate send_rate;
	struct agent_hint_guard hints; /* the hint socket's rates and slots per user */
	struct proto_rate watch_rate;  /* the growth watch's needs: no caller can spend it */

	/* hint socket */
	int hint_fd;
	struct hint_client *clients; /* cfg.max_hint_clients slots */

	pthread_mutex_t lock; /* protects ctr only (read by other threads) */
	struct agent_counters ctr;
};

static uint64_t min_u64(uint64_t x, uint64_t y)
{
	return x < y ? x : y;
}

static void count(struct agent *a, uint64_t *field)
{
	pthread_mutex_lock(&a->lock);
	(*field)++;
	pthread_mutex_unlock(&a->lock);
}

void agent_get_counters(struct agent *a, struct agent_counters *out)
{
	pthread_mutex_lock(&a->lock);
	*out = a->ctr;
	pthread_mutex_unlock(&a->lock);
}

void agent_stop(struct agent *a)
{
	char c = 1;

	/* the pipe is non-blocking; a full pipe already says "stop" */
	if (write(a->stop_pipe[1], &c, 1) < 0) {
		/* nothing to do: EAGAIN means a stop is pending */
	}
}

static uint32_t rnd32(void)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)agent_now_ms() * 2654435761u;
	return r;
}

/* ======================================================================================
 * Sending
 * ====================================================================================== */

/* Queue m with a fresh id.  report: subject to the send rate (dropped when over). */
static int send_msg(struct agent *a, struct proto_msg *m, uint64_t now_ms)
{
	struct proto_error err;
	enum proto_status s;

	if (a->conn < 0)
		return -ENOTCONN;
	if (m->type != PROTO_MSG_HELLO && !proto_rate_take(&a->send_rate, now_ms)) {
		count(a, &a->ctr.rate_dropped);
		return -EAGAIN;
	}
	m->id = a->next_id;
	a->next_id = a->next_id == PROTO_ID_MAX ? 1 : a->next_id + 1;
	s = proto_writer_send(&a->wr, m, &err);
	if (s != PROTO_OK) {
		agent_log(AGENT_WARN, "not sending %s: %s (%s)", proto_msg_type_name(m->type),
			  proto_status_name(s), err.message);
		count(a, &a->ctr.rate_dropped);
		return -ENOSPC;
	}
	count(a, &a->ctr.frames_out);
	return 0;
}

static void send_error(struct agent *a, const struct proto_error *e, bool fatal, uint64_t now_ms)
{
	struct proto_msg m;

	proto_error_to_msg(e, 0, fatal, &m);
	send_msg(a, &m, now_ms);
}

/* ======================================================================================
 * Connection
 * ====================================================================================== */

static void disconnect(struct agent *a, const char *why, uint64_t now_ms)
{
	uint32_t delay;

	if (a->conn >= 0) {
		/* best effort: a fatal error reply may still be queued */
		proto_writer_flush(&a->wr, a->conn);
		close(a->conn);
		a->conn = -1;
		count(a, &a->ctr.disconnects);
	}
	proto_reader_reset(&a->rd);
	proto_writer_reset(&a->wr);
	delay = proto_backoff_next(&a->backoff, rnd32());
	a->next_connect_ms = now_ms + delay;
	/* a virtio-serial port with no host reads EOF at every retry: that is debug news, a
	 * session that was up going down is not */
	agent_log(a->state == ST_READY ? AGENT_INFO : AGENT_DEBUG,
		  "disconnected (%s); retrying in %u ms", why, delay);
	agent_transport_result(&a->cfg, &a->ts, a->state == ST_READY);
	a->state = ST_DOWN;
}

static void try_connect(struct agent *a, uint64_t now_ms)
{
	struct proto_msg m;
	int fd = agent_transport_open(&a->cfg, &a->ts);

	if (fd < 0) {
		uint32_t delay = proto_backoff_next(&a->backoff, rnd32());

		a->next_connect_ms = now_ms + delay;
		agent_log(AGENT_DEBUG, "transport not ready (%s); retrying in %u ms", strerror(-fd),
			  delay);
		return;
	}
	a->conn = fd;
	a->state = ST_HELLO;
	a->hello_sent_ms = now_ms;
	proto_guard_init(&a->guard);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	agent_collect_hello(&a->cfg, &m.u.hello);
	if (a->cfg.hint_socket[0] && a->hint_fd >= 0)
		m.u.hello.caps |= PROTO_CAP_HINT;
	a->caps = m.u.hello.caps;
	send_msg(a, &m, now_ms);
	agent_log(AGENT_DEBUG, "transport %s open, hello queued (caps 0x%x)",
		  a->ts.used == AGENT_TR_VSOCK    ? "vsock"
		  : a->ts.used == AGENT_TR_VIRTIO ? "virtio-serial"
						  : "stream",
		  a->caps);
}

/* ======================================================================================
 * Reports
 * ====================================================================================== */

static void send_stats(struct agent *a, uint64_t now_ms)
{
	struct proto_msg m;
	uint32_t caps;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	if (agent_collect_stats(&a->cfg, &m.u.stats, &caps) < 0) {
		agent_log(AGENT_WARN, "cannot read /proc/meminfo");
		return;
	}
	if (send_msg(a, &m, now_ms) == 0)
		count(a, &a->ctr.stats_sent);
}

static void send_wss(struct agent *a, uint64_t now_ms)
{
	struct proto_msg m;
	int rc;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_WSS;
	rc = agent_mglru_wss(&a->cfg, a->run.wss_bins_ms, a->run.nr_wss_bins, &m.u.wss);
	if (rc < 0) {
		agent_log(AGENT_DEBUG, "wss: %s", strerror(-rc));
		return;
	}
	if (send_msg(a, &m, now_ms) == 0)
		count(a, &a->ctr.wss_sent);
}

/* Which collectors can run here: wss needs MGLRU and a host that reads it, hints a socket
 * and a host that reads them. */
static uint32_t usable_collectors(const struct agent *a, uint32_t want)
{
	uint32_t ok = PROTO_COLLECT_STATS;

	if ((a->caps & PROTO_CAP_WSS) && (a->host_caps & PROTO_CAP_HOST_WSS))
		ok |= PROTO_COLLECT_WSS;
	if ((a->caps & PROTO_CAP_HINT) && (a->host_caps & PROTO_CAP_HOST_HINT))
		ok |= PROTO_COLLECT_HINT;
	return want & ok;
}

/* ======================================================================================
 * Incoming messages (one handler per type)
 * ====================================================================================== */

static enum proto_status state_err(struct proto_error *e, const char *field, const char *msg)
{
	e->code = PROTO_E_STATE;
	snprintf(e->field, sizeof(e->field), "%s", field);
	snprintf(e->message, sizeof(e->message), "%s", msg);
	return PROTO_E_STATE;
}

static enum proto_status on_hello(struct agent *a, const struct proto_msg *m, uint64_t now_ms,
				  struct proto_error *e)
{
	const struct proto_hello *h = &m->u.hello;

	if (a->state != ST_HELLO || h->role != PROTO_ROLE_HOST)
		return state_err(e, "hello", "unexpected hello");
	if (proto_version_negotiate(PROTO_VERSION_MIN, PROTO_VERSION_MAX, h->version_min,
				    h->version_max, &a->version) != PROTO_OK) {
		e->code = PROTO_E_VERSION;
		snprintf(e->field, sizeof(e->field), "version_min");
		snprintf(e->message, sizeof(e->message),
			 "no common version: agent %d..%d, host %u..%u", PROTO_VERSION_MIN,
			 PROTO_VERSION_MAX, h->version_min, h->version_max);
		return PROTO_E_VERSION;
	}
	a->host_caps = h->caps;
	a->state = ST_READY;
	a->run.collectors =
	    usable_collectors(a, PROTO_COLLECT_STATS | PROTO_COLLECT_WSS | PROTO_COLLECT_HINT);
	a->next_stats_ms = now_ms;
	a->next_wss_ms = now_ms + a->run.wss_interval_ms;
	proto_backoff_reset(&a->backoff);
	count(a, &a->ctr.connects);
	agent_log(AGENT_INFO, "connected to %s over %s (protocol %u, host caps 0x%x)", h->software,
		  a->ts.used == AGENT_TR_VSOCK    ? "vsock"
		  : a->ts.used == AGENT_TR_VIRTIO ? "virtio-serial"
						  : "a stream",
		  a->version, h->caps);
	return PROTO_OK;
}

static enum proto_status on_config(struct agent *a, const struct proto_msg *m, uint64_t now_ms)
{
	struct proto_msg r;

	a->run = m->u.config;
	a->run.collectors = usable_collectors(a, m->u.config.collectors);
	a->next_stats_ms = now_ms + a->run.report_interval_ms;
	a->next_wss_ms = now_ms + a->run.wss_interval_ms;
	memset(&r, 0, sizeof(r));
	r.type = PROTO_MSG_CONFIG_REPLY;
	r.u.config_reply.re = m->id;
	r.u.config_reply.config = a->run;
	send_msg(a, &r, now_ms);
	return PROTO_OK;
}

static void run_watch(struct agent *a, uint64_t now_ms);

/* The growth watch while a reclaim request runs.  The request runs on this loop's thread
 * for up to its deadline (seconds), and one write to memory.reclaim cannot be cut short: a
 * guest under a growth reclaims slowly, and such a write took 386 ms in scenario 3 (by
 * hand, 7 Dec), so a need from this loop went 440 ms after the growth began.  So a second
 * thread runs the watch, every watch period, until the request ends, and sends the need at
 * once; the request stops by itself at its next check (agent_reclaim.c, "Growth").
 * Why this is safe without a lock on the connection: while the request runs, this loop's
 * thread is inside agent_reclaim_run and touches nothing of the agent's but its read-only
 * configuration; the watcher is joined before the loop goes on.  It keeps the agent's
 * ordinary priority: it starts before the request lowers the loop thread's (nice is per
 * thread on Linux). */
static void watch_tick(void *arg)
{
	struct agent *a = arg;

	run_watch(a, agent_now_ms());
	/* a flush error is the loop's to act on: it flushes again after the request */
	if (a->conn >= 0 && proto_writer_pending(&a->wr))
		(void)proto_writer_flush(&a->wr, a->conn);
}

/* Start the watch (agent_ticker.c); false when there is nothing to watch for or no thread
 * could start. */
static bool watcher_start(struct agent_ticker *t, struct agent *a)
{
	int rc;

	if (!a->cfg.watch_interval_ms || !(a->host_caps & PROTO_CAP_HOST_HINT))
		return false;
	rc = agent_ticker_start(t, a->cfg.watch_interval_ms, watch_tick, a);
	if (rc == 0)
		return true;
	agent_log(AGENT_WARN, "reclaim: no growth watch while it runs (%s)", strerror(-rc));
	return false;
}

static enum proto_status on_reclaim(struct agent *a, const struct proto_msg *m)
{
	struct agent_ticker w;
	struct proto_msg r;

	memset(&r, 0, sizeof(r));
	r.type = PROTO_MSG_RECLAIM_REPLY;
	agent_log(AGENT_INFO, "reclaim %llu bytes (%s) within %u ms",
		  (unsigned long long)m->u.reclaim.bytes,
		  proto_reclaim_scope_name(m->u.reclaim.scope), m->u.reclaim.deadline_ms);
	bool watching = watcher_start(&w, a);
	agent_reclaim_run(&a->cfg, &m->u.reclaim, &r.u.reclaim_reply);
	if (watching)
		agent_ticker_stop(&w);
	r.u.reclaim_reply.re = m->id;
	agent_log(AGENT_INFO, "reclaim: %s, freed %llu bytes in %u ms%s%s",
		  proto_reclaim_result_name(r.u.reclaim_reply.result),
		  (unsigned long long)r.u.reclaim_reply.freed_bytes, r.u.reclaim_reply.elapsed_ms,
		  r.u.reclaim_reply.message[0] ? ": " : "", r.u.reclaim_reply.message);
	count(a, &a->ctr.reclaims);
	/* the reply was earned; send it even after a long reclaim (time moved on) */
	send_msg(a, &r, agent_now_ms());
	return PROTO_OK;
}

static enum proto_status handle(struct agent *a, const struct proto_msg *m, uint64_t now_ms,
				struct proto_error *e)
{
	if (m->type == PROTO_MSG_HELLO)
		return on_hello(a, m, now_ms, e);
	if (a->state != ST_READY)
		return state_err(e, "type", "hello first");
	switch (m->type) {
	case PROTO_MSG_CONFIG:
		return on_config(a, m, now_ms);
	case PROTO_MSG_RECLAIM:
		return on_reclaim(a, m);
	case PROTO_MSG_PING: {
		struct proto_msg r;

		memset(&r, 0, sizeof(r));
		r.type = PROTO_MSG_PONG;
		r.u.pong.re = m->id;
		r.u.pong.mono_ms = now_ms;
		send_msg(a, &r, now_ms);
		return PROTO_OK;
	}
	case PROTO_MSG_PONG:
		return PROTO_OK;
	case PROTO_MSG_ERROR:
		agent_log(AGENT_WARN, "host rejected message %u: %s at '%s': %s", m->u.error.re,
			  proto_status_name(m->u.error.code), m->u.error.field, m->u.error.message);
		return PROTO_OK;
	default:
		/* stats, wss, hint, replies: agent-to-host messages */
		return state_err(e, "type", "message goes the other way");
	}
}

/* One payload from the host.  Returns false when the connection must close. */
static bool on_frame(struct agent *a, const char *json, size_t len, uint64_t now_ms)
{
	struct proto_msg m; /* ~4 KiB on the stack */
	struct proto_error e;
	enum proto_status s;
	enum proto_verdict v;

	count(a, &a->ctr.frames_in);
	v = proto_guard_frame(&a->guard, now_ms);
	if (v == PROTO_VERDICT_DROP)
		return true;
	if (v == PROTO_VERDICT_DISCONNECT) {
		a->why = "peer over its message rate";
		return false;
	}
	memset(&e, 0, sizeof(e));
	s = proto_decode(json, len, &m, &e);
	if (s == PROTO_OK) {
		e.re = m.id;
		s = handle(a, &m, now_ms, &e);
		/* an error message is never answered with an error */
		if (s == PROTO_OK || m.type == PROTO_MSG_ERROR)
			return true;
	}
	count(a, &a->ctr.rejected);
	agent_log(AGENT_WARN, "rejected frame: %s at '%s': %s", proto_status_name(s), e.field,
		  e.message);
	v = proto_guard_error(&a->guard, s, now_ms);
	send_error(a, &e, v == PROTO_VERDICT_DISCONNECT, now_ms);
	a->why = s == PROTO_E_VERSION ? "no common protocol version" : "peer over its error budget";
	return v != PROTO_VERDICT_DISCONNECT;
}

/* The connection is readable: read once, handle every complete frame. */
static void on_readable(struct agent *a, uint64_t now_ms)
{
	struct proto_error e;
	const char *json;
	size_t len;
	long n = proto_reader_read_fd(&a->rd, a->conn);
	int rc = 0;

	if (n == -EAGAIN || n == -EINTR)
		return;
	while (n != 0 && (rc = proto_reader_next(&a->rd, &json, &len, &e)) == 1) {
		if (!on_frame(a, json, len, now_ms)) {
			disconnect(a, a->why, now_ms);
			return;
		}
		if (a->conn < 0)
			return;
	}
	if (n > 0 && rc < 0) {
		send_error(a, &e, true, now_ms);
		disconnect(a, proto_status_name(e.code), now_ms);
		return;
	}
	if (n == 0)
		disconnect(a, proto_reader_pending(&a->rd) ? "EOF inside a frame" : "EOF", now_ms);
	else if (n < 0 && n != -ENOBUFS)
		disconnect(a, strerror((int)-n), now_ms);
}

/* ======================================================================================
 * Hint socket
 * ====================================================================================== */

static void client_close(struct hint_client *cl)
{
	close(cl->fd);
	cl->fd = -1;
	cl->len = 0;
}

static void client_reply(struct hint_client *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void client_reply(struct hint_client *cl, const char *fmt, ...)
{
	char line[AGENT_HINT_LINE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* one short line into an empty socket buffer: MSG_DONTWAIT cannot short-write it */
	if (send(cl->fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* the client left; nothing to tell it */
	}
}

/*
 * One request from the hint socket.  A hot/cold request becomes ceil(n / 256) hint messages
 * (same kind and pid), as many as the hint rate allows now; the last one sent carries
 * truncated when ranges were left out, by the pagemap bound or by the rate.
 */
static void on_hint_line(struct agent *a, struct hint_client *cl, uint64_t now_ms)
{
	struct agent_hint_req req;
	struct proto_msg m;
	uint32_t want, granted = 0, sent_ranges = 0;
	char err[160];
	int rc;

	rc = agent_hint_parse(&a->cfg, cl->buf, cl->pid, cl->uid, &req, err, sizeof(err));
	if (rc < 0) {
		client_reply(cl, "error %s", err);
		return;
	}
	if (a->state != ST_READY || !(a->run.collectors & PROTO_COLLECT_HINT)) {
		client_reply(cl, "error host not connected or not taking hints");
		goto out;
	}
	want = req.head.kind == PROTO_HINT_NEED
		   ? 1
		   : (req.nr_ranges + PROTO_MAX_HINT_RANGES - 1) / PROTO_MAX_HINT_RANGES;
	granted = agent_hint_guard_take(&a->hints, cl->uid, want, now_ms);
	if (granted == 0) {
		count(a, &a->ctr.rate_dropped);
		client_reply(cl, "error rate limit, try later");
		goto out;
	}
	for (uint32_t k = 0; k < granted; k++) {
		memset(&m, 0, sizeof(m));
		m.type = PROTO_MSG_HINT;
		m.u.hint = req.head;
		if (req.head.kind != PROTO_HINT_NEED) {
			uint32_t off = k * PROTO_MAX_HINT_RANGES, n = req.nr_ranges - off;

			if (n > PROTO_MAX_HINT_RANGES)
				n = PROTO_MAX_HINT_RANGES;
			memcpy(m.u.hint.ranges, req.ranges + off, n * sizeof(*req.ranges));
			m.u.hint.nr_ranges = n;
			m.u.hint.truncated = k + 1 == granted && (req.truncated || granted < want);
		}
		if (send_msg(a, &m, now_ms) < 0) {
			client_reply(cl, "error host not reading");
			goto out;
		}
		sent_ranges += m.u.hint.nr_ranges;
		count(a, &a->ctr.hints_sent);
	}
	client_reply(cl, "ok %u%s", sent_ranges,
		     req.truncated || granted < want ? " truncated" : "");
out:
	free(req.ranges);
}

static void on_hint_client(struct agent *a, struct hint_client *cl, uint64_t now_ms)
{
	ssize_t n = read(cl->fd, cl->buf + cl->len, sizeof(cl->buf) - 1 - cl->len);
	char *nl;

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		client_close(cl);
		return;
	}
	cl->len += (size_t)n;
	cl->buf[cl->len] = '\0';
	nl = strchr(cl->buf, '\n');
	if (!nl) {
		if (cl->len == sizeof(cl->buf) - 1) {
			client_reply(cl, "error line too long");
			client_close(cl);
		}
		return;
	}
	*nl = '\0';
	on_hint_line(a, cl, now_ms);
	/* one request per connection keeps the state trivial */
	client_close(cl);
}

static void refuse(int fd, const char *why)
{
	char line[AGENT_HINT_LINE_MAX];
	int n = snprintf(line, sizeof(line), "error %s\n", why);

	if (send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* gone already */
	}
	close(fd);
}

static void on_hint_accept(struct agent *a, uint64_t now_ms)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(a->hint_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct hint_client *slot = NULL;
	uint32_t open_total = 0, open_by_uid = 0;
	int rc;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0) {
		refuse(fd, "busy");
		return;
	}
	for (uint32_t i = 0; i < a->cfg.max_hint_clients; i++) {
		if (a->clients[i].fd < 0) {
			if (!slot)
				slot = &a->clients[i];
			continue;
		}
		open_total++;
		open_by_uid += a->clients[i].uid == cred.uid;
	}
	rc = agent_hint_guard_admit(&a->hints, cred.uid, open_total, open_by_uid);
	if (rc < 0 || !slot) {
		refuse(fd,
		       rc == -EUSERS ? "busy: too many connections of this user at once" : "busy");
		agent_log(AGENT_DEBUG, "hint socket: refused a connection of uid %u (%s)",
			  (unsigned)cred.uid, rc == -EUSERS ? "its share is taken" : "no slot");
		return;
	}
	slot->fd = fd;
	slot->pid = cred.pid;
	slot->uid = cred.uid;
	slot->len = 0;
	slot->deadline_ms = now_ms + AGENT_HINT_LINE_MS;
}

/* Close every client that has not sent its line in time; return the next deadline. */
static uint64_t expire_hint_clients(struct agent *a, uint64_t now_ms, uint64_t next)
{
	for (uint32_t i = 0; i < a->cfg.max_hint_clients; i++) {
		struct hint_client *cl = &a->clients[i];

		if (cl->fd < 0)
			continue;
		if (now_ms >= cl->deadline_ms) {
			client_reply(cl, "error no request line within %u ms",
				     (unsigned)AGENT_HINT_LINE_MS);
			client_close(cl);
			continue;
		}
		next = min_u64(next, cl->deadline_ms);
	}
	return next;
}

/* ======================================================================================
 * The loop
 * ====================================================================================== */

int agent_new(const struct agent_config *cfg, struct agent **out)
{
	struct agent *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->cfg = *cfg;
	a->clients = calloc(cfg->max_hint_clients ? cfg->max_hint_clients : 1, sizeof(*a->clients));
	if (!a->clients || pipe2(a->stop_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
		free(a->clients);
		free(a);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cfg->max_hint_clients; i++)
		a->clients[i].fd = -1;
	pthread_mutex_init(&a->lock, NULL);
	a->conn = -1;
	a->hint_fd = -1;
	a->next_id = 1;
	proto_reader_init(&a->rd);
	proto_writer_init(&a->wr, 0);
	proto_backoff_init(&a->backoff, cfg->backoff_min_ms, cfg->backoff_max_ms);
	proto_rate_init(&a->send_rate, cfg->send_rate_per_s, SEND_BURST);
	agent_hint_guard_init(&a->hints, cfg);
	proto_rate_init(&a->watch_rate, WATCH_RATE, WATCH_BURST);
	/* defaults until the host sends config */
	a->run.report_interval_ms = cfg->report_interval_ms;
	a->run.wss_interval_ms = cfg->wss_interval_ms;
	a->run.nr_wss_bins = 4;
	a->run.wss_bins_ms[0] = 0;
	a->run.wss_bins_ms[1] = 5000;
	a->run.wss_bins_ms[2] = 30000;
	a->run.wss_bins_ms[3] = 120000;
	*out = a;
	return 0;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	if (a->conn >= 0)
		close(a->conn);
	if (a->hint_fd >= 0) {
		close(a->hint_fd);
		unlink(a->cfg.hint_socket);
	}
	for (uint32_t i = 0; i < a->cfg.max_hint_clients; i++)
		if (a->clients[i].fd >= 0)
			close(a->clients[i].fd);
	close(a->stop_pipe[0]);
	close(a->stop_pipe[1]);
	proto_reader_free(&a->rd);
	proto_writer_free(&a->wr);
	pthread_mutex_destroy(&a->lock);
	free(a->clients);
	free(a);
}

/* The growth watch (agent_watch.c): read MemTotal and MemAvailable; when memory in use grows
 * fast enough to run out within the horizon, send the host a need for the projected growth. */
static void run_watch(struct agent *a, uint64_t now_ms)
{
	struct proto_stats st;
	uint64_t avail, need;
	struct proto_msg m;

	if (agent_watch_read(&a->cfg, &st) < 0)
		return;
	avail = st.mem_available_bytes;
	need = agent_watch_step(&a->watch, &a->cfg, now_ms, &st);
	if (!need || !(a->host_caps & PROTO_CAP_HOST_HINT))
		return;
	if (!proto_rate_take(&a->watch_rate, now_ms)) {
		count(a, &a->ctr.rate_dropped);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HINT;
	m.u.hint.kind = PROTO_HINT_NEED;
	m.u.hint.pid = (uint32_t)getpid();
	m.u.hint.need_bytes = need;
	m.u.hint.within_ms = a->cfg.watch_horizon_ms;
	if (send_msg(a, &m, now_ms) < 0)
		return;
	count(a, &a->ctr.watch_needs);
	agent_log(AGENT_INFO, "growth watch: %llu MiB available and going fast; need %llu MiB sent",
		  (unsigned long long)(avail >> 20), (unsigned long long)(need >> 20));
}

/* Run the timers that are due; return the next deadline. */
static uint64_t run_timers(struct agent *a, uint64_t now_ms)
{
	uint64_t next = now_ms + 60000;

	if (a->state == ST_DOWN) {
		if (now_ms >= a->next_connect_ms)
			try_connect(a, now_ms);
		if (a->state == ST_DOWN)
			return a->next_connect_ms;
	}
	if (a->state == ST_HELLO) {
		if (now_ms >= a->hello_sent_ms + HANDSHAKE_TIMEOUT_MS) {
			disconnect(a, "no hello from the host", now_ms);
			return a->next_connect_ms;
		}
		return a->hello_sent_ms + HANDSHAKE_TIMEOUT_MS;
	}
	if ((a->run.collectors & PROTO_COLLECT_STATS)) {
		if (now_ms >= a->next_stats_ms) {
			send_stats(a, now_ms);
			a->next_stats_ms = now_ms + a->run.report_interval_ms;
		}
		next = min_u64(next, a->next_stats_ms);
	}
	if (a->cfg.watch_interval_ms) {
		if (now_ms >= a->next_watch_ms) {
			run_watch(a, now_ms);
			a->next_watch_ms = now_ms + a->cfg.watch_interval_ms;
		}
		next = min_u64(next, a->next_watch_ms);
	}
	if ((a->run.collectors & PROTO_COLLECT_WSS)) {
		if (now_ms >= a->next_wss_ms) {
			send_wss(a, now_ms);
			a->next_wss_ms = now_ms + a->run.wss_interval_ms;
		}
		next = min_u64(next, a->next_wss_ms);
	}
	return next;
}

int agent_run(struct agent *a, volatile sig_atomic_t *stop)
{
	struct pollfd pfd[MAX_POLL_FDS];

	if (a->cfg.hint_socket[0]) {
		a->hint_fd = agent_hint_listen(a->cfg.hint_socket);
		if (a->hint_fd < 0)
			agent_log(AGENT_WARN, "hint socket %s: %s (hints disabled)",
				  a->cfg.hint_socket, strerror(-a->hint_fd));
	}
	if (a->cfg.enable_mglru) {
		int rc = agent_mglru_enable(&a->cfg);

		if (rc == 1)
			agent_log(AGENT_INFO,
				  "turned the kernel's MGLRU on (lru_gen/enabled was 0; "
				  "enable_mglru=false leaves it off)");
		else if (rc < 0)
			agent_log(AGENT_WARN, "cannot turn MGLRU on: %s (no working set by age)",
				  strerror(-rc));
	}
	a->next_connect_ms = agent_now_ms();
	while (!(stop && *stop)) {
		uint64_t now = agent_now_ms(), next = run_timers(a, now);

		next = expire_hint_clients(a, now, next);
		int nfds = 0, conn_i = -1, hint_i = -1, cl_base, timeout, rc;

		pfd[nfds++] = (struct pollfd){a->stop_pipe[0], POLLIN, 0};
		if (a->conn >= 0) {
			conn_i = nfds;
			pfd[nfds++] = (struct pollfd){
			    a->conn, (short)(POLLIN | (proto_writer_pending(&a->wr) ? POLLOUT : 0)),
			    0};
		}
		if (a->hint_fd >= 0) {
			hint_i = nfds;
			pfd[nfds++] = (struct pollfd){a->hint_fd, POLLIN, 0};
		}
		cl_base = nfds;
		for (uint32_t i = 0; i < a->cfg.max_hint_clients && nfds < MAX_POLL_FDS; i++)
			pfd[nfds++] = (struct pollfd){a->clients[i].fd, POLLIN, 0};
		now = agent_now_ms();
		timeout = next > now ? (int)min_u64(next - now, 60000) : 0;
		rc = poll(pfd, (nfds_t)nfds, timeout);
		if (rc < 0 && errno != EINTR) {
			agent_log(AGENT_ERR, "poll: %s", strerror(errno));
			return -errno;
		}
		if (rc <= 0)
			continue;
		now = agent_now_ms();
		if (pfd[0].revents)
			break;
		if (conn_i >= 0 && a->conn >= 0 && (pfd[conn_i].revents & POLLOUT)) {
			int f = proto_writer_flush(&a->wr, a->conn);

			if (f < 0)
				disconnect(a, strerror(-f), now);
		}
		if (conn_i >= 0 && a->conn >= 0 &&
		    (pfd[conn_i].revents & (POLLIN | POLLHUP | POLLERR)))
			on_readable(a, now);
		if (a->conn >= 0 && proto_writer_pending(&a->wr)) {
			/* try at once: most writes complete without waiting for POLLOUT */
			int f = proto_writer_flush(&a->wr, a->conn);

			if (f < 0)
				disconnect(a, strerror(-f), now);
		}
		if (hint_i >= 0 && (pfd[hint_i].revents & POLLIN))
			on_hint_accept(a, now);
		for (int i = cl_base; i < nfds; i++) {
			struct hint_client *cl = &a->clients[i - cl_base];

			if (cl->fd >= 0 && pfd[i].fd == cl->fd && pfd[i].revents)
				on_hint_client(a, cl, now);
		}
	}
	if (a->conn >= 0)
		proto_writer_flush(&a->wr, a->conn);
	return 0;
}
