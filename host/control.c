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
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>
#include <urcu.h>

#include "log.h"
#include "status_json.h"

struct client {
	int fd;
	size_t len;
	char *buf; /* MTD_CONTROL_MAX_REQUEST + 1 bytes while connected */
};

struct mtd_control {
	struct mtd_daemon *d;
	const char *version;
	char path[108];
	int listen_fd;
	int stop_fd; /* eventfd: wakes the thread to leave */
	pthread_t thread;
	struct client clients[MTD_CONTROL_MAX_CLIENTS];
};

/* ---- replies ------------------------------------------------------------------------------ */

static char *reply_text(struct json_object *o)
{
	char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));

	json_object_put(o);
	return s;
}

static char *reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *reply_error(const char *fmt, ...)
{
	struct json_object *o = json_object_new_object();
	char msg[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", json_object_new_string(msg));
	return reply_text(o);
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
		   attach ? "attached" : "detached");
	return reply_text(reply_ok());
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
	int rc = mtd_daemon_policy_set(d, req->name, req->key, req->value, msg, sizeof(msg));

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
	case MTD_CTL_NONE:
		break;
	}
	return reply_error("internal error: request %d has no handler", (int)req.cmd);
}

/* ---- the connection ----------------------------------------------------------------------- */

/* Send all of s and a newline; the socket has a send timeout, so a peer that stops reading
 * costs at most that long.  0 or -1. */
static int send_line(int fd, const char *s)
{
	size_t len = strlen(s), off = 0;

	while (off <= len) {
		const char *p = off < len ? s + off : "\n";
		size_t n = off < len ? len - off : 1;
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
		if (off == len + 1)
			break;
	}
	return 0;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
	c->len = 0;
}

/* Answer every complete line in the buffer.  -1 closes the connection. */
static int client_lines(struct mtd_control *ctl, struct client *c)
{
	char *nl;

	while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
		size_t n = (size_t)(nl - c->buf);
		char *out;
		int rc;

		if (n && c->buf[n - 1] == '\r')
			n--; /* socat and friends may send CRLF */
		if (n == 0) {
			out = NULL; /* an empty line is not a request */
		} else {
			out = mtd_control_handle(ctl->d, ctl->version, c->buf, n);
		}
		rc = out ? send_line(c->fd, out) : 0;
		free(out);
		c->len -= (size_t)(nl - c->buf) + 1;
		memmove(c->buf, nl + 1, c->len);
		if (rc < 0)
			return -1;
	}
	if (c->len >= MTD_CONTROL_MAX_REQUEST) {
		char *out = reply_error("request longer than %d bytes", MTD_CONTROL_MAX_REQUEST);

		(void)send_line(c->fd, out);
		free(out);
		return -1;
	}
	return 0;
}

static void client_read(struct mtd_control *ctl, struct client *c)
{
	ssize_t r = recv(c->fd, c->buf + c->len, MTD_CONTROL_MAX_REQUEST - c->len, 0);

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		client_close(c);
		return;
	}
	c->len += (size_t)r;
	if (client_lines(ctl, c) < 0)
		client_close(c);
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

static void accept_one(struct mtd_control *ctl)
{
	struct timeval tv = {.tv_sec = 1};
	struct client *slot = NULL;
	uid_t uid = (uid_t)-1;
	int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (!peer_allowed(fd, &uid)) {
		char *out = reply_error("permission denied: memtided's control socket is for root "
					"only (run memtidectl with sudo)");

		(void)send_line(fd, out);
		free(out);
		close(fd);
		mtd_info("control socket: refused a peer with uid %d", (int)uid);
		return;
	}
	for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS && !slot; i++)
		if (ctl->clients[i].fd < 0)
			slot = &ctl->clients[i];
	if (slot)
		slot->buf = malloc(MTD_CONTROL_MAX_REQUEST + 1);
	if (!slot || !slot->buf) {
		char *out = reply_error("too many control connections (%d); try again",
					MTD_CONTROL_MAX_CLIENTS);

		(void)send_line(fd, out);
		free(out);
		close(fd);
		return;
	}
	/* Reads are non-blocking (poll says when); writes block for at most a second. */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	slot->fd = fd;
	slot->len = 0;
}

static void *control_thread(void *arg)
{
	struct mtd_control *ctl = arg;
	struct pollfd pfd[2 + MTD_CONTROL_MAX_CLIENTS];
	struct client *who[2 + MTD_CONTROL_MAX_CLIENTS];

	rcu_register_thread();
	for (;;) {
		nfds_t n = 0;

		pfd[n++] = (struct pollfd){.fd = ctl->stop_fd, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = ctl->listen_fd, .events = POLLIN};
		for (unsigned i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
			if (ctl->clients[i].fd < 0)
				continue;
			who[n] = &ctl->clients[i];
			pfd[n++] = (struct pollfd){.fd = ctl->clients[i].fd, .events = POLLIN};
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			mtd_err("control socket: poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		for (nfds_t i = 2; i < n; i++)
			if (pfd[i].revents)
				client_read(ctl, who[i]);
		if (pfd[1].revents & POLLIN)
			accept_one(ctl);
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
	ctl->stop_fd = eventfd(0, EFD_CLOEXEC);
	ctl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ctl->stop_fd < 0 || ctl->listen_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "control socket: %s", strerror(errno));
		goto fail;
	}
	/* Create it 0600 from the start: no window in which another user could connect. */
	mode_t old = umask(0177);
	rc = bind(ctl->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	if (rc < 0 || listen(ctl->listen_fd, 16) < 0) {
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
	close(c->stop_fd);
	unlink(c->path);
	free(c);
}
