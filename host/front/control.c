// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * control.c - the control socket's server: accept, check the peer, read request lines,
 * answer each (control.h says what it is for; docs/control-socket.md is the protocol).
 *
 * Why one thread with poll rather than a thread per client: requests are small and answered
 * from RCU snapshots in microseconds; the only slow calls (attach, policy-set: libvirt
 * round trips) are rare operator actions.  A bounded number of clients, a bounded request
 * line and a send timeout mean no peer can make the daemon use unbounded memory or hang it.
 *
 * Everything a peer sends is untrusted: a line that is not a JSON object, a missing or
 * mistyped field, a NUL or control character in a name, an unknown command or an over-long
 * line gets an error reply that names the problem, and the daemon carries on.  The request
 * parser is control_req.c (pure, fuzzed); this file dispatches and owns the connections.
 */
#include "front/control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <urcu.h>

#include "base/clock.h"
#include "base/log.h"
#include "decide/controller.h"
#include "front/status_json.h"

struct client {
	int fd;
	size_t len;
	char *buf; /* MTD_CONTROL_MAX_REQUEST + 1 bytes while connected */
	char *out; /* the reply being sent, [out_off, out_len) still to go */
	size_t out_len, out_off;
	uint64_t active_ms; /* accepted, or last answered: the idle clock */
	uint64_t heard_ms;  /* accepted, or bytes last came in */
	bool busy;          /* its request runs on a slow-request thread */
	bool answered;      /* a reply has gone out on it */
	unsigned gen;       /* bumped at each close: a late slow reply finds its connection */
};

struct slow_job;

struct mtd_control {
	struct mtd_daemon *d;
	const char *version;
	char path[108];
	int listen_fd;
	int stop_fd; /* eventfd: wakes the thread to leave */
	int done_fd; /* eventfd: a slow request finished */
	pthread_t thread;
	struct client clients[MTD_CONTROL_MAX_CLIENTS];
	pthread_mutex_t slow_lock; /* guards slow_done, slow_running */
	pthread_cond_t slow_cond;  /* slow_running went down */
	struct slow_job *slow_done;
	int slow_running;
};

/* ---- replies ------------------------------------------------------------------------------ */

static char *reply_text(struct json_object *o)
{
	char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));

	json_object_put(o);
	return s;
}

static char *reply_error_v(bool retry, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static char *reply_error_v(bool retry, const char *fmt, va_list ap)
{
	struct json_object *o = json_object_new_object();
	char msg[300];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", json_object_new_string(msg));
	if (retry)
		json_object_object_add(o, "retry", json_object_new_boolean(1));
	return reply_text(o);
}

static char *reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *reply_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *s = reply_error_v(false, fmt, ap);
	va_end(ap);
	return s;
}

/* An error that says the request was not carried out, for load alone: the client may send
 * it again, unchanged ("retry": true; memtidectl does, with backoff, within its timeout). */
static char *reply_retry(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *reply_retry(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *s = reply_error_v(true, fmt, ap);
	va_end(ap);
	return s;
}

static struct json_object *reply_ok(void)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

static char *errno_reply(int rc, const char *name)
{
	switch (rc) {
	case -ENOENT:
		return reply_error("no domain named '%s' is known (memtidectl status lists the "
				   "managed ones)",
				   name);
	case -EBUSY:
		return reply_error("'%s' is already managed", name);
	case -ENODEV:
		return reply_error("'%s' has no virtio memballoon (memtidectl domxml-patch %s adds "
				   "one)",
				   name, name);
	case -EOPNOTSUPP:
		return reply_error("not possible in plain-QEMU mode (memtided --qmp manages one "
				   "VM, given on its command line)");
	case -EAGAIN:
		return reply_error("memtided is not connected to libvirt yet; try again shortly");
	case -EPERM:
		return reply_error("'%s' is not among the domains memtided manages ([daemon] "
				   "domains)",
				   name);
	case -EALREADY:
		return reply_error("'%s' is already being detached (memtidectl vm show %s says "
				   "how far)",
				   name, name);
	default:
		return reply_error("%s: %s", name, strerror(-rc));
	}
}

/* ---- commands ----------------------------------------------------------------------------- */

static void add_vm_summary(void *arg, const struct mtd_vm_status *st)
{
	json_object_array_add(arg, mtd_json_vm(st, false));
}

static char *cmd_status(struct mtd_daemon *d)
{
	struct json_object *o = reply_ok(), *vms = json_object_new_array();
	struct mtd_host_status h;

	mtd_daemon_host_status(d, &h);
	json_object_object_add(o, "host", mtd_json_host(&h));
	mtd_daemon_foreach_vm(d, add_vm_summary, vms);
	json_object_object_add(o, "vms", vms);
	return reply_text(o);
}

static char *cmd_vm(struct mtd_daemon *d, const char *name)
{
	struct mtd_vm_status *st = malloc(sizeof(*st));
	int rc;

	if (!st)
		return reply_error("out of memory");
	rc = mtd_daemon_get_vm(d, name, st);
	if (rc < 0) {
		free(st);
		return errno_reply(rc, name);
	}
	struct json_object *o = reply_ok();
	json_object_object_add(o, "vm", mtd_json_vm(st, true));
	free(st);
	return reply_text(o);
}

static char *cmd_attach(struct mtd_daemon *d, const char *name, bool attach)
{
	int rc = attach ? mtd_daemon_attach(d, name) : mtd_daemon_detach(d, name);

	if (rc < 0)
		return errno_reply(rc, name);
	mtd_notice("%s: %s on request from the control socket", name,
		   attach ? "attached" : "detach asked");
	struct json_object *o = reply_ok();
	/* A detach is asynchronous: the VM shows "detaching" until its loop has left it. */
	if (!attach)
		json_object_object_add(o, "detaching", json_object_new_boolean(1));
	return reply_text(o);
}

static char *cmd_policy_get(struct mtd_daemon *d, const char *name)
{
	struct mtd_policy p;
	int rc = mtd_daemon_policy_get(d, name, &p);

	if (rc < 0)
		return errno_reply(rc, name);
	struct json_object *o = reply_ok();
	json_object_object_add(o, "policy", mtd_json_policy(&p));
	return reply_text(o);
}

static char *cmd_policy_set(struct mtd_daemon *d, const struct mtd_control_req *req)
{
	char msg[240] = "";
	int rc =
	    mtd_daemon_policy_set_many(d, req->name, req->pairs, req->npairs, msg, sizeof(msg));

	if (rc < 0)
		return msg[0] ? reply_error("%s", msg) : errno_reply(rc, req->name);
	return reply_text(reply_ok());
}

static char *cmd_hook(struct mtd_daemon *d, const struct mtd_control_req *req)
{
	if (mtd_daemon_hook_event(d, req->name, req->op, req->subop) < 0)
		return reply_error("cannot queue the hook's event for '%s'", req->name);
	return reply_text(reply_ok());
}

static void add_release_entry(void *arg, const struct mtd_vm_status *st)
{
	struct json_object *v = json_object_new_object();

	json_object_object_add(v, "name", json_object_new_string(st->name));
	/* sizes well under INT64_MAX: status snapshots come from the loop's checked figures */
	json_object_object_add(v, "actual_bytes",
			       json_object_new_int64((int64_t)st->balloon_actual_bytes));
	json_object_object_add(
	    v, "ceiling_bytes",
	    json_object_new_int64((int64_t)mtd_ctl_safe_bytes(&st->policy, st->max_bytes)));
	json_object_object_add(v, "released", json_object_new_boolean(st->released));
	json_object_array_add(arg, v);
}

/* release / resume: {"name": NAME} or {"all": true}.  The reply lists each VM with its size
 * now and its ceiling, and the host figures that bound the release's pace. */
static char *cmd_release(struct mtd_daemon *d, const struct mtd_control_req *req, bool release)
{
	struct json_object *vms = json_object_new_array(), *o;
	const char *name = req->all ? NULL : req->name;
	int rc;

	rc = mtd_daemon_release(d, name, release, add_release_entry, vms);
	if (rc < 0) {
		json_object_put(vms);
		return errno_reply(rc, name ? name : "");
	}
	struct mtd_host_status h;
	mtd_daemon_host_status(d, &h);
	o = reply_ok();
	json_object_object_add(o, "vms", vms);
	json_object_object_add(o, "host", mtd_json_host(&h));
	return reply_text(o);
}

static char *cmd_version(const char *version)
{
	struct json_object *o = reply_ok();

	json_object_object_add(o, "version", json_object_new_string(version));
	json_object_object_add(o, "protocol", json_object_new_int(1));
	return reply_text(o);
}

char *mtd_control_handle(struct mtd_daemon *d, const char *version, const char *line, size_t len)
{
	struct mtd_control_req req;
	char err[300];

	if (mtd_control_parse(line, len, &req, err, sizeof(err)) < 0)
		return reply_error("%s", err);
	switch (req.cmd) {
	case MTD_CTL_STATUS:
		return cmd_status(d);
	case MTD_CTL_VM:
		return cmd_vm(d, req.name);
	case MTD_CTL_ATTACH:
		return cmd_attach(d, req.name, true);
	case MTD_CTL_DETACH:
		return cmd_attach(d, req.name, false);
	case MTD_CTL_POLICY_GET:
		return cmd_policy_get(d, req.name);
	case MTD_CTL_POLICY_SET:
		return cmd_policy_set(d, &req);
	case MTD_CTL_HOOK:
		return cmd_hook(d, &req);
	case MTD_CTL_VERSION:
		return cmd_version(version);
	case MTD_CTL_RELEASE_VMS:
		return cmd_release(d, &req, true);
	case MTD_CTL_RESUME_VMS:
		return cmd_release(d, &req, false);
	case MTD_CTL_NONE:
		break;
	}
	return reply_error("internal error: request %d has no handler", (int)req.cmd);
}

/* ---- the connection ----------------------------------------------------------------------- */

/*
 * Fairness and bounds.  All sockets are non-blocking and the thread never waits on one
 * peer: a reply that does not fit the socket stays in the client's out buffer and goes out
 * as the peer reads (POLLOUT).  A client has at most one request in hand: while its reply is
 * unsent, or its request is running on a worker, its socket is not read, so a client that
 * pipelines requests and reads slowly is held back by its own socket buffer, not by us.
 * Each round answers at most one request per client.  The slow commands (attach, detach,
 * policy-set: libvirt round trips that a stuck libvirtd can stretch to its 30 s job timeout)
 * run on a thread of their own, at most MTD_CONTROL_MAX_SLOW at once, and their reply is
 * handed back through done_fd.  A connection with no complete request for
 * MTD_CONTROL_IDLE_MS, or whose reply has not drained within as long, is closed.
 *
 * A request fully sent is answered.  When every slot is taken, only a connection with no
 * request in hand may make room (make_room): first one already answered and silent since,
 * then one silent for MTD_CONTROL_GRACE_MS, so idle clients cannot lock out the libvirt hook
 * for longer than that.  A connection just accepted is never closed for room: its request is
 * on its way or waits unread in its socket.  When no connection may make room, nothing more
 * is accepted: new clients wait in the listen queue (MTD_CONTROL_BACKLOG), their requests in
 * their sockets, until a slot frees.
 */

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c->out);
	c->fd = -1;
	c->buf = NULL;
	c->out = NULL;
	c->len = c->out_len = c->out_off = 0;
	c->busy = false;
	c->answered = false;
	c->gen++; /* a slow reply still on its way is for nobody now */
}

/* Queue s plus a newline as the client's reply (takes s).  -1 on no memory. */
static int client_reply(struct client *c, char *s)
{
	if (!s)
		return -1; /* no memory for the reply: the connection goes */
	size_t n = strlen(s);
	char *o = realloc(s, n + 2);

	if (!o) {
		free(s);
		return -1;
	}
	o[n] = '\n';
	o[n + 1] = '\0';
	c->out = o;
	c->out_len = n + 1;
	c->out_off = 0;
	return 0;
}

/* Send what the socket takes.  -1 closes the connection. */
static int client_flush(struct client *c, uint64_t now)
{
	while (c->out && c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (w <= 0)
			return -1;
		c->out_off += (size_t)w;
	}
	if (c->out) {
		free(c->out);
		c->out = NULL;
		c->out_len = c->out_off = 0;
		c->active_ms = now; /* answered: the idle clock starts again */
		c->answered = true;
	}
	return 0;
}

/* Is the request one of the slow commands that run off the control thread?  Read by the
 * same parser that answers it (control_req.c): a request it refuses is answered at once. */
static bool line_is_slow(const char *line, size_t len)
{
	struct mtd_control_req req;
	char err[300];

	if (mtd_control_parse(line, len, &req, err, sizeof(err)) < 0)
		return false;
	return req.cmd == MTD_CTL_ATTACH || req.cmd == MTD_CTL_DETACH ||
	       req.cmd == MTD_CTL_POLICY_SET;
}

struct slow_job {
	struct mtd_control *ctl;
	unsigned slot, gen;
	char *line;
	size_t len;
	char *out;
	struct slow_job *next;
};

static void *slow_main(void *arg)
{
	struct slow_job *j = arg;
	struct mtd_control *ctl = j->ctl;
	uint64_t one = 1;

	rcu_register_thread();
	j->out = mtd_control_handle(ctl->d, ctl->version, j->line, j->len);
	rcu_unregister_thread();
	free(j->line);
	j->line = NULL;
	/* The wake-up is written under the lock: once a stopping mtd_control_stop has taken
	 * it and seen this job, nothing here touches ctl again. */
	pthread_mutex_lock(&ctl->slow_lock);
	j->next = ctl->slow_done;
	ctl->slow_done = j;
	if (write(ctl->done_fd, &one, sizeof(one)) < 0) {
		/* counter already set: the thread wakes anyway */
	}
	pthread_cond_broadcast(&ctl->slow_cond);
	pthread_mutex_unlock(&ctl->slow_lock);
	return NULL;
}

/* Hand a slow request to a thread of its own.  0, or -1 with the reply queued (busy). */
static int start_slow(struct mtd_control *ctl, struct client *c, const char *line, size_t len)
{
	struct slow_job *j;
	pthread_attr_t a;
	pthread_t t;

	pthread_mutex_lock(&ctl->slow_lock);
	bool full = ctl->slow_running >= MTD_CONTROL_MAX_SLOW;
	if (!full)
		ctl->slow_running++;
	pthread_mutex_unlock(&ctl->slow_lock);
	if (full)
		return client_reply(c, reply_retry("memtided is busy with %d attach, detach or "
						   "policy requests; try again",
						   MTD_CONTROL_MAX_SLOW));
	j = calloc(1, sizeof(*j));
	if (j)
		j->line = strndup(line, len);
	if (j && j->line) {
		j->ctl = ctl;
		j->slot = (unsigned)(c - ctl->clients);
		j->gen = c->gen;
		j->len = len;
		/* Not the control thread's real-time policy: these make libvirt calls and
		 * attach VMs, whose loop threads would inherit it. */
		struct sched_param sp = {.sched_priority = 0};
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&a, SCHED_OTHER);
		pthread_attr_setschedparam(&a, &sp);
		int rc = pthread_create(&t, &a, slow_main, j);
		pthread_attr_destroy(&a);
		if (rc == 0) {
			c->busy = true;
			return 0;
		}
		free(j->line);
	}
	free(j);
	pthread_mutex_lock(&ctl->slow_lock);
	ctl->slow_running--;
	pthread_mutex_unlock(&ctl->slow_lock);
	return client_reply(c, reply_retry("out of memory or threads; try again"));
}

/* Replies of finished slow requests go to their clients (if still the same connection). */
static void collect_slow(struct mtd_control *ctl, uint64_t now)
{
	uint64_t v;
	struct slow_job *j;

	if (read(ctl->done_fd, &v, sizeof(v)) < 0) {
		/* drained already */
	}
	pthread_mutex_lock(&ctl->slow_lock);
	j = ctl->slow_done;
	ctl->slow_done = NULL;
	pthread_mutex_unlock(&ctl->slow_lock);
	while (j) {
		struct slow_job *next = j->next;
		struct client *c = &ctl->clients[j->slot];

		pthread_mutex_lock(&ctl->slow_lock);
		ctl->slow_running--;
		pthread_cond_broadcast(&ctl->slow_cond);
		pthread_mutex_unlock(&ctl->slow_lock);
		if (c->fd >= 0 && c->gen == j->gen && c->busy) {
			c->busy = false;
			if (!j->out || client_reply(c, j->out) < 0 || client_flush(c, now) < 0)
				client_close(c);
		} else {
			free(j->out);
		}
		free(j);
		j = next;
	}
}

/* Answer the next complete line in the buffer, if any.  -1 closes the connection. */
static int client_line(struct mtd_control *ctl, struct client *c, uint64_t now)
{
	char *nl = memchr(c->buf, '\n', c->len);
	int rc = 0;

	if (!nl) {
		if (c->len >= MTD_CONTROL_MAX_REQUEST) {
			(void)client_reply(c, reply_error("request longer than %d bytes",
							  MTD_CONTROL_MAX_REQUEST));
			(void)client_flush(c, now);
			return -1;
		}
		return 0;
	}
	size_t n = (size_t)(nl - c->buf);
	if (n && c->buf[n - 1] == '\r')
		n--; /* socat and friends may send CRLF */
	if (n == 0)
		c->active_ms = now; /* an empty line is not a request, but it is not idling */
	else if (line_is_slow(c->buf, n))
		rc = start_slow(ctl, c, c->buf, n);
	else
		rc = client_reply(c, mtd_control_handle(ctl->d, ctl->version, c->buf, n));
	c->len -= (size_t)(nl - c->buf) + 1;
	memmove(c->buf, nl + 1, c->len);
	if (rc < 0)
		return -1;
	return client_flush(c, now);
}

/* May the client's next request be taken now? */
static bool client_ready(const struct client *c)
{
	return c->fd >= 0 && !c->busy && !c->out;
}

static void client_read(struct client *c, uint64_t now)
{
	if (c->len >= MTD_CONTROL_MAX_REQUEST)
		return; /* client_line answers an over-long line and closes */
	ssize_t r = recv(c->fd, c->buf + c->len, MTD_CONTROL_MAX_REQUEST - c->len, MSG_DONTWAIT);

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	c->len += (size_t)r;
	c->heard_ms = now;
}

/* Root and memtided's own user only: the socket can change any VM's memory. */
static bool peer_allowed(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	*uid = cr.uid;
	return cr.uid == 0 || cr.uid == geteuid();
}

/* A short message to a peer we are about to close; whatever the socket takes now. */
static void tell_and_close(int fd, char *msg)
{
	if (msg) {
		(void)send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(msg);
	close(fd);
}

/*
 * May c be closed to make room, and how gladly?  -1 no: it has a request in hand (running,
 * its reply going out, or a whole line waiting).  0: answered, and nothing since (its peer has
 * what it came for; most such are hanging up).  1: nothing, or part of a line, for
 * MTD_CONTROL_GRACE_MS.  What its socket holds unread is not seen here: make_room reads it.
 */
static int idle_rank(const struct client *c, uint64_t now)
{
	if (c->fd < 0 || c->busy || c->out || memchr(c->buf, '\n', c->len))
		return -1;
	if (c->answered && c->len == 0)
		return 0;
	uint64_t last = c->heard_ms > c->active_ms ? c->heard_ms : c->active_ms;
	return now >= last + MTD_CONTROL_GRACE_MS ? 1 : -1;
}

/* Ms until a connection may make room (0: one may now or a slot is free; -1: none will by
 * time alone, only by an event the thread polls for). */
static int room_in(const struct mtd_control *ctl, uint64_t now)
{
	int next = -1;

	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
		const struct client *c = &ctl->clients[i];
		if (c->fd < 0 || idle_rank(c, now) >= 0)
			return 0;
		if (c->busy || c->out || memchr(c->buf, '\n', c->len))
			continue;
		uint64_t last = c->heard_ms > c->active_ms ? c->heard_ms : c->active_ms;
		int due = (int)(last + MTD_CONTROL_GRACE_MS - now);
		if (next < 0 || due < next)
			next = due;
	}
	return next;
}

static struct client *free_slot(struct mtd_control *ctl)
{
	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++)
		if (ctl->clients[i].fd < 0)
			return &ctl->clients[i];
	return NULL;
}

/* Every slot taken: the connection that may best make room (idle_rank), after reading what
 * its peer sent since the last poll (a request there keeps it).  It is still open (fd >= 0)
 * unless its peer had hung up; NULL when none may go. */
static struct client *make_room(struct mtd_control *ctl, uint64_t now)
{
	for (;;) {
		struct client *v = NULL;
		int vr = 2;

		for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
			struct client *c = &ctl->clients[i];
			int r = idle_rank(c, now);
			if (r >= 0 && (!v || r < vr || (r == vr && c->active_ms < v->active_ms))) {
				v = c;
				vr = r;
			}
		}
		if (!v)
			return NULL;
		size_t had = v->len;
		client_read(v, now);
		if (v->fd < 0 || v->len == had)
			return v;
		/* it spoke: heard_ms is now, so it is not idle; look again */
	}
}

static void evict(struct client *v)
{
	mtd_info("control socket: every slot taken; closing a connection with no request in "
		 "hand");
	int fd = v->fd;
	v->fd = -1;
	client_close(v);
	tell_and_close(fd, reply_retry("closed to make room: %d control connections are the "
				       "most, and this one had no request in hand",
				       MTD_CONTROL_MAX_CLIENTS));
}

/* Accept what is waiting, as long as there is room (a bounded number per round). */
static void accept_some(struct mtd_control *ctl, uint64_t now)
{
	for (unsigned k = 0; k < MTD_CONTROL_MAX_CLIENTS; k++) {
		struct client *slot = free_slot(ctl), *victim = NULL;
		uid_t uid = (uid_t)-1;

		if (!slot) {
			victim = make_room(ctl, now);
			if (!victim)
				return; /* the rest wait in the listen queue */
			if (victim->fd < 0) {
				slot = victim;
				victim = NULL;
			}
		}
		int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		if (!peer_allowed(fd, &uid)) {
			tell_and_close(fd, reply_error("permission denied: memtided's control "
						       "socket is for root only (run memtidectl "
						       "with sudo)"));
			mtd_info("control socket: refused a peer with uid %d", (int)uid);
			continue;
		}
		if (victim) {
			evict(victim);
			slot = victim;
		}
		slot->buf = malloc(MTD_CONTROL_MAX_REQUEST + 1);
		if (!slot->buf) {
			tell_and_close(fd, reply_retry("out of memory for a control connection; "
						       "try again"));
			continue;
		}
		slot->fd = fd;
		slot->len = 0;
		slot->active_ms = slot->heard_ms = now;
	}
}

/* Close connections idle (no request, or a reply not drained) for MTD_CONTROL_IDLE_MS;
 * returns the ms until the next such deadline (-1: none). */
static int expire_idle(struct mtd_control *ctl, uint64_t now)
{
	int next = -1;

	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
		struct client *c = &ctl->clients[i];
		if (c->fd < 0 || c->busy)
			continue;
		uint64_t due = c->active_ms + MTD_CONTROL_IDLE_MS;
		if (now >= due) {
			mtd_info("control socket: closing a connection idle for %d s",
				 MTD_CONTROL_IDLE_MS / 1000);
			client_close(c);
			continue;
		}
		if (next < 0 || due - now < (uint64_t)next)
			next = (int)(due - now);
	}
	return next;
}

/*
 * The control thread answers ahead of everything else on the host.  Measured
 * (bench/daemon_scale.py, 256 simulated VMs at 1 s on 2 busy cores): at nice 0 the thread
 * waited 5.9 s in the run queue over 10 s for 34 wake-ups (~170 ms each; status p50 808 ms),
 * because the loops and every other process of its scheduling group, and the other groups
 * on the host, all had their turn first; nice only orders threads within one group.  A
 * real-time policy at the lowest priority (SCHED_FIFO 1) runs it as soon as it wakes, ahead
 * of any normal thread.  What it does per wake-up is bounded (one request per client, a
 * status of 256 VMs takes ~2 ms to render), it sleeps in poll() otherwise, and the kernel's
 * real-time throttling (95% by default) bounds it even if that were ever wrong.  Without the
 * privilege (not root, a cgroup without real-time time, or a unit with RestrictRealtime=yes:
 * memtided.service allows it for this reason), nice -10, else as it is.
 */
static void control_priority(void)
{
	struct sched_param sp = {.sched_priority = 1};

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10) == 0)
		return;
	mtd_info("control socket: cannot raise its thread's priority (%s); under CPU load its "
		 "answers may wait",
		 strerror(errno));
}

static void *control_thread(void *arg)
{
	struct mtd_control *ctl = arg;
	struct pollfd pfd[3 + MTD_CONTROL_MAX_CLIENTS];
	struct client *who[3 + MTD_CONTROL_MAX_CLIENTS];
	bool more = false; /* a client has another complete request waiting */

	(void)pthread_setname_np(pthread_self(), "memtide-ctl"); /* top -H, perf */
	control_priority();
	rcu_register_thread();
	for (;;) {
		nfds_t n = 0;
		uint64_t now = mtd_mono_ms();
		int timeout = expire_idle(ctl, now), room = room_in(ctl, now);

		/* No room: leave new clients in the listen queue (a negative fd is not polled),
		 * and look again when a silent connection's grace ends. */
		if (room > 0 && (timeout < 0 || room < timeout))
			timeout = room;
		pfd[n++] = (struct pollfd){.fd = ctl->stop_fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = room == 0 ? ctl->listen_fd : -1, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = ctl->done_fd, .events = POLLIN};
		for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
			struct client *c = &ctl->clients[i];
			if (c->fd < 0)
				continue;
			who[n] = c;
			/* Read only a client that may send its next request: bounded work. */
			pfd[n++] = (struct pollfd){.fd = c->fd,
						   .events = (short)(c->out            ? POLLOUT
								     : client_ready(c) ? POLLIN
										       : 0)};
		}
		if (more)
			timeout = 0;
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			mtd_err("control socket: poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		now = mtd_mono_ms();
		if (pfd[2].revents & POLLIN)
			collect_slow(ctl, now);
		for (nfds_t i = 3; i < n; i++) {
			struct client *c = who[i];
			if (c->fd < 0)
				continue;
			if (pfd[i].revents & POLLOUT) {
				if (client_flush(c, now) < 0)
					client_close(c);
			} else if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				client_read(c, now);
			}
		}
		/* One request per client per round, so one busy client cannot starve others. */
		more = false;
		for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
			struct client *c = &ctl->clients[i];
			if (!client_ready(c) || !c->len)
				continue;
			if (client_line(ctl, c, now) < 0) {
				client_close(c);
				continue;
			}
			if (client_ready(c) && memchr(c->buf, '\n', c->len))
				more = true;
		}
		if (pfd[1].revents & POLLIN)
			accept_some(ctl, now);
	}
	rcu_unregister_thread();
	return NULL;
}

/* ---- start and stop ----------------------------------------------------------------------- */

static int make_dir_of(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Does a live server answer at addr?  (Then the socket is not stale.) */
static bool someone_answers(const struct sockaddr_un *addr)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool yes;

	if (fd < 0)
		return false;
	yes = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0;
	close(fd);
	return yes;
}

int mtd_control_start(struct mtd_daemon *d, const char *path, const char *version,
		      struct mtd_control **out, char *err, size_t errlen)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct mtd_control *ctl;
	int rc;

	*out = NULL;
	if (!path || !*path || strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "control socket path must be 1..%zu characters",
			 sizeof(addr.sun_path) - 1);
		return -EINVAL;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);
	rc = make_dir_of(path);
	if (rc < 0) {
		snprintf(err, errlen, "cannot create the directory of %s: %s", path, strerror(-rc));
		return rc;
	}
	if (someone_answers(&addr)) {
		snprintf(err, errlen,
			 "another memtided answers on %s; stop it first (or pass "
			 "--socket)",
			 path);
		return -EADDRINUSE;
	}
	(void)unlink(path); /* stale */
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ctl->d = d;
	ctl->version = version;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++)
		ctl->clients[i].fd = -1;
	pthread_mutex_init(&ctl->slow_lock, NULL);
	pthread_cond_init(&ctl->slow_cond, NULL);
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC);
	ctl->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ctl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ctl->stop_fd < 0 || ctl->done_fd < 0 || ctl->listen_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "control socket: %s", strerror(errno));
		goto fail;
	}
	/* Create it 0600 from the start: no window in which another user could connect. */
	mode_t old = umask(0177);
	rc = bind(ctl->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	if (rc < 0 || listen(ctl->listen_fd, MTD_CONTROL_BACKLOG) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		goto fail;
	}
	rc = -pthread_create(&ctl->thread, NULL, control_thread, ctl);
	if (rc < 0) {
		snprintf(err, errlen, "cannot start the control thread: %s", strerror(-rc));
		unlink(path);
		goto fail;
	}
	*out = ctl;
	return 0;
fail:
	if (ctl->listen_fd >= 0)
		close(ctl->listen_fd);
	if (ctl->stop_fd >= 0)
		close(ctl->stop_fd);
	if (ctl->done_fd >= 0)
		close(ctl->done_fd);
	free(ctl);
	return rc;
}

void mtd_control_stop(struct mtd_control *c)
{
	uint64_t one = 1;

	if (!c)
		return;
	if (write(c->stop_fd, &one, sizeof(one)) != sizeof(one))
		mtd_warn("control socket: cannot wake its thread: %s", strerror(errno));
	pthread_join(c->thread, NULL);
	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++)
		client_close(&c->clients[i]);
	close(c->listen_fd);
	unlink(c->path);
	/* Slow requests still running hold c: wait for them a little, else leave c to them
	 * (the process is ending). */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&c->slow_lock);
	for (;;) {
		struct slow_job *j = c->slow_done;
		c->slow_done = NULL;
		while (j) { /* finished: count them out */
			struct slow_job *next = j->next;
			c->slow_running--;
			free(j->out);
			free(j);
			j = next;
		}
		if (c->slow_running == 0)
			break;
		if (pthread_cond_timedwait(&c->slow_cond, &c->slow_lock, &until) == ETIMEDOUT &&
		    !c->slow_done)
			break;
	}
	int left = c->slow_running;
	pthread_mutex_unlock(&c->slow_lock);
	if (left) {
		mtd_warn("control socket: %d request(s) still running at exit", left);
		return;
	}
	close(c->stop_fd);
	close(c->done_fd);
	pthread_mutex_destroy(&c->slow_lock);
	pthread_cond_destroy(&c->slow_cond);
	free(c);
}
