// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtidectl.c - the operator's CLI for memtided.
 *
 * Every command but domxml-patch is one request on memtided's control socket (one JSON
 * line each way, docs/control-socket.md); this program only formats the reply.  --json
 * prints the reply as it came, for scripts.  domxml-patch talks to libvirt directly: it
 * edits a domain's definition, which memtided never does.
 *
 * Exit codes: 0 done; 1 memtided answered with an error (the message says what to do);
 * 2 usage; 3 memtided cannot be reached; 4 libvirt failed (domxml-patch).
 *
 * One file of about 1,500 lines, on purpose: a program of small commands, each one request
 * and the printing of its reply, all sharing the control-socket client and the reply
 * readers at the top; read top to bottom it is the manual page in code.  What does not talk
 * to memtided lives apart already: the domain XML transforms (domxml.c, domxml_ept.c) and
 * the ept table commands (ept_cli.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>

#include "access/ept_file.h"
#include "base/clock.h"
#include "base/mtd.h"
#include "daemon/history.h"
#include "front/domxml.h"
#include "front/ept_cli.h"
#include "vsock/kvsock.h"
#include "vsock/vsock_service.h"

#define VERSION        MTD_VERSION
#define DEFAULT_SOCKET "/run/memtide/memtided.sock"
#define MiB            (1024.0 * 1024.0)

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3, EXIT_LIBVIRT = 4 };

static const char *sock_path = DEFAULT_SOCKET;
static bool json_out;
static int timeout_ms = 10000;
static volatile sig_atomic_t interrupted;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: memtidectl [--socket PATH] [--json] [--timeout DUR] COMMAND [ARGS]\n"
	    "Watch and steer memtided, the memtide host daemon.\n\n"
	    "Commands:\n"
	    "  status                        one line per VM: state, balloon target and actual,\n"
	    "                                working set, memory returned, refault rate\n"
	    "  vm show DOMAIN                one VM in detail: generations, working set by idle\n"
	    "                                age, controller, agent capabilities, last actions\n"
	    "  vm history DOMAIN [--last N] [--state-dir DIR]\n"
	    "                                every change memtided made to the VM, from its\n"
	    "                                history file (works with memtided stopped)\n"
	    "  top [--interval S] [--count N]  status and generations, refreshed (q or Ctrl-C)\n"
	    "  policy get DOMAIN             the domain's memtide policy\n"
	    "  policy set DOMAIN KEY=VALUE...  change it (stored in the domain's libvirt\n"
	    "                                metadata); keys: enabled min max priority\n"
	    "                                target_refault_per_min headroom return source\n"
	    "                                ept_window observe cold_age\n"
	    "  attach DOMAIN | detach DOMAIN start or stop managing a domain (detach leaves\n"
	    "                                it at the size it has)\n"
	    "  release DOMAIN|--all [--wait] give VMs their full memory back, at a pace the\n"
	    "                                host can take ([host] release_rate, never below its\n"
	    "                                low mark of MemAvailable); they are not inflated\n"
	    "                                again until resumed.  --wait follows the climb.\n"
	    "  resume DOMAIN|--all           let memtided take memory from released VMs again\n"
	    "  hook DOMAIN OP SUBOP          for libvirt's hook: tell memtided, never fail\n"
	    "  ept-plugin NAME --memory SIZE [--machine pc|q35] [--dir DIR]\n"
	    "                                the -plugin argument for a TCG guest (ept source)\n"
	    "  ept-status TABLE              the ept plugin's table file: windows, cost\n"
	    "  ept-mode TABLE off|always|window TIME  (TIME: 200ms, 1s; a bare number is seconds)\n"
	    "                                switch its instrumentation by hand\n"
	    "  domxml-patch DOMAIN [--yes] [--uri URI] [--vsock [--vsock-dir DIR]]\n"
	    "               [--ept [--ept-dir DIR] [--plugin SO]]\n"
	    "                                add what memtide needs to a domain's definition\n"
	    "                                (balloon with free page reporting and stats, agent\n"
	    "                                channel), after showing the diff; --vsock adds the\n"
	    "                                agent's vsock: the kernel's <vsock> where the host\n"
	    "                                has /dev/vhost-vsock, else vhost-user-vsock served\n"
	    "                                by memtided (shared memfd guest RAM; the domain then\n"
	    "                                starts only while memtided runs); --ept: the ept\n"
	    "                                plugin for a TCG guest\n"
	    "  version                       memtidectl's and memtided's versions\n\n"
	    "Options (before or after the command):\n"
	    "  --socket PATH   memtided's control socket (default: $MEMTIDE_SOCKET, else\n"
	    "                  " DEFAULT_SOCKET ")\n"
	    "  --json          print memtided's reply as JSON\n"
	    "  --timeout DUR   give up on memtided after this long (default 10s; hook: 2s at\n"
	    "                  most), e.g. 3s or 500ms\n"
	    "  --help, -h      print this and exit (also after a command)\n"
	    "  --version, -V   print the version and exit\n\n"
	    "Exit codes: 0 ok, 1 memtided refused (see the message), 2 usage,\n"
	    "3 memtided unreachable, 4 libvirt error.\n");
}

/* ---- the control socket ------------------------------------------------------------------- */

/*
 * Waiting out a busy memtided: exponential backoff from 10 ms to 250 ms, each wait drawn at
 * random between half and all of its step so that a burst of clients turned away together
 * (libvirtd's restart runs the hook for every domain at once) does not come back together,
 * and never past the deadline.  False when the deadline has come.
 */
static bool backoff(int *step_ms, int64_t deadline_ms)
{
	static unsigned seed;
	int64_t left = deadline_ms - (int64_t)mtd_mono_ms();

	if (left <= 0)
		return false;
	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)mtd_mono_ms();
	int wait = *step_ms / 2 + (int)(rand_r(&seed) % (unsigned)(*step_ms / 2 + 1));
	if (wait > left)
		wait = (int)left;
	struct timespec ts = {.tv_sec = wait / 1000, .tv_nsec = (long)(wait % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	if (*step_ms < 250)
		*step_ms = *step_ms * 2 > 250 ? 250 : *step_ms * 2;
	return true;
}

/* The hook retries a socket nobody listens on (ECONNREFUSED: memtided restarting) within its
 * timeout; interactive commands say at once that memtided is down. */
static bool retry_refused;

/*
 * Connect by deadline_ms.  An AF_UNIX connect to a listener whose backlog is full blocks in
 * the kernel until a slot frees, with no limit of its own (four `memtidectl hook`s hung for
 * 30 s that way): connect without blocking, and retry EAGAIN (the listen queue is full) with
 * backoff until the deadline.
 */
static int ctl_connect(int64_t deadline_ms, char *err, size_t errlen)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd, rc, step = 10;

	if (strlen(sock_path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", sock_path);
		return -1;
	}
	memcpy(addr.sun_path, sock_path, strlen(sock_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	while ((rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr))) < 0) {
		int e = errno;
		if (e != EINTR && !((e == EAGAIN || (e == ECONNREFUSED && retry_refused)) &&
				    backoff(&step, deadline_ms))) {
			errno = e;
			break;
		}
	}
	if (rc < 0) {
		if (errno == EACCES)
			snprintf(err, errlen,
				 "permission denied on %s: memtided's control socket is for root "
				 "(run memtidectl with sudo)",
				 sock_path);
		else if (errno == EAGAIN)
			snprintf(err, errlen,
				 "memtided at %s does not accept connections (its backlog is "
				 "full) within %d ms",
				 sock_path, timeout_ms);
		else
			snprintf(err, errlen,
				 "cannot reach memtided at %s: %s (is it running? systemctl "
				 "status memtided)",
				 sock_path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* One attempt: connect, send, read the reply line.  NULL with err set when there is none;
 * *unsent tells that the request did not go out whole (so memtided cannot have acted on it). */
static struct json_object *ctl_call_once(const char *line, int64_t deadline, bool *unsent,
					 char *err, size_t errlen)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = NULL;
	struct json_object *rep = NULL;
	int fd = ctl_connect(deadline, err, errlen);

	*unsent = false;
	if (fd < 0)
		return NULL;
	/* A request line is small: it fits an empty socket buffer, so a non-blocking send
	 * takes it whole or the peer is gone. */
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0) {
		/* A refused peer is told why before the close: read that first. */
		*unsent = true;
	}
	buf = malloc(cap);
	while (buf) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - (int64_t)mtd_mono_ms();
		int r = left > 0 ? poll(&p, 1, (int)left) : 0;
		ssize_t n;

		if (r == 0) {
			snprintf(err, errlen, "memtided at %s did not answer within %d ms",
				 sock_path, timeout_ms);
			break;
		}
		if (r < 0 && errno == EINTR)
			continue;
		n = r < 0 ? -1 : recv(fd, buf + len, cap - len - 1, 0);
		if (n <= 0) {
			snprintf(err, errlen,
				 "memtided at %s closed the connection without an answer",
				 sock_path);
			break;
		}
		len += (size_t)n;
		buf[len] = '\0';
		if (memchr(buf, '\n', len)) {
			rep = json_tokener_parse(buf);
			if (!rep)
				snprintf(err, errlen, "memtided sent an answer that is not JSON");
			break;
		}
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	if (!buf)
		snprintf(err, errlen, "out of memory");
	free(buf);
	close(fd);
	return rep;
}

/* Did memtided turn the request away for load alone ("retry": true), not act on it? */
static bool reply_says_retry(struct json_object *rep)
{
	struct json_object *r;

	return json_object_object_get_ex(rep, "retry", &r) &&
	       json_object_is_type(r, json_type_boolean) && json_object_get_boolean(r);
}

/* One request, one reply line.  NULL with err set when memtided cannot be reached or does
 * not answer within timeout_ms, all told (connect, send, reply, and the retries).  A request
 * memtided turned away for load, or that did not go out whole, is sent again with backoff;
 * at the deadline the last answer counts. */
static struct json_object *ctl_call(struct json_object *req, char *err, size_t errlen)
{
	const char *line = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	int64_t deadline = (int64_t)mtd_mono_ms() + timeout_ms;
	int step = 10;

	for (;;) {
		bool unsent;
		struct json_object *rep = ctl_call_once(line, deadline, &unsent, err, errlen);

		if (rep ? !reply_says_retry(rep) : !unsent)
			return rep;
		if ((int64_t)mtd_mono_ms() >=
		    deadline) /* backoff() would not wait: keep what we have */
			return rep;
		json_object_put(rep);
		if (!backoff(&step, deadline))
			return NULL; /* err says what the last attempt met */
	}
}

static struct json_object *req_new(const char *cmd)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "cmd", json_object_new_string(cmd));
	return o;
}

static void req_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

/* Call and check ok.  Returns the reply (caller puts) or NULL with *rc set. */
static struct json_object *call_checked(struct json_object *req, int *rc)
{
	char err[400];
	struct json_object *rep = ctl_call(req, err, sizeof(err)), *ok, *e;

	json_object_put(req);
	if (!rep) {
		fprintf(stderr, "memtidectl: %s\n", err);
		*rc = EXIT_UNREACHABLE;
		return NULL;
	}
	if (!json_object_object_get_ex(rep, "ok", &ok) || !json_object_get_boolean(ok)) {
		if (json_out)
			printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
		else
			fprintf(stderr, "memtidectl: %s\n",
				json_object_object_get_ex(rep, "error", &e) &&
					json_object_is_type(e, json_type_string)
				    ? json_object_get_string(e)
				    : "memtided refused the request");
		json_object_put(rep);
		*rc = EXIT_DAEMON;
		return NULL;
	}
	*rc = EXIT_OK;
	return rep;
}

/* ---- reading replies ---------------------------------------------------------------------- */

static void print_health(struct json_object *v, const char *indent);

static int64_t get_i(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static double get_d(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0.0;
}

static const char *get_s(struct json_object *o, const char *k)
{
	struct json_object *v;

	/* memtided's replies are trusted more than a guest, but a null or non-string member
	 * must not reach printf("%s") as NULL */
	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string))
		return "";
	return json_object_get_string(v);
}

/* Length of an array member; 0 for null or anything else (json-c asserts on a non-array,
 * and a reply with "vms": null must not abort memtidectl). */
static size_t arr_len(struct json_object *a)
{
	return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

static bool get_b(struct json_object *o, const char *k)
{
	struct json_object *v;

	return json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}

/* Sizes as an operator reads them: MiB up to 10 GiB, then GiB with one decimal. */
static const char *size_str(int64_t bytes, char *buf, size_t len)
{
	if (bytes >= 10LL << 30)
		snprintf(buf, len, "%.1fG", (double)bytes / (1LL << 30));
	else
		snprintf(buf, len, "%.0fM", (double)bytes / MiB);
	return buf;
}

static const char *age_str(int64_t ms, char *buf, size_t len)
{
	if (ms < 10000)
		snprintf(buf, len, "%.1fs", (double)ms / 1000);
	else if (ms < 600000)
		snprintf(buf, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(buf, len, "%lldm", (long long)(ms / 60000) % 100000000);
	return buf;
}

/* A size exactly, in the words policy set takes: 2G, 512M, 4K, or bytes. */
static const char *bytes_exact(int64_t bytes, char *buf, size_t len)
{
	static const char unit[] = "GMK";

	for (int i = 0; i < 3; i++) {
		int64_t u = 1LL << (10 * (3 - i));

		if (bytes && bytes % u == 0) {
			snprintf(buf, len, "%lld%c", (long long)(bytes / u), unit[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%lld", (long long)bytes);
	return buf;
}

/* A duration exactly, in the words policy set takes: 60s, 200ms. */
static const char *ms_str(int64_t ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(buf, len, "%lldms", (long long)ms);
	return buf;
}

/* ---- status / vm show / top --------------------------------------------------------------- */

/* The agent's round trips, memtided's vsock device and the guest RAM layout it gives. */
static void print_channel(struct json_object *vm)
{
	struct json_object *rtt, *dev, *lay, *regs, *m;

	if (json_object_object_get_ex(vm, "agent_rtt", &rtt) && get_i(rtt, "samples") > 0)
		printf("  agent round trip: median %.2f ms, p99 %.2f ms (last %" PRId64 " pings)\n",
		       (double)get_i(rtt, "p50_us") / 1000.0, (double)get_i(rtt, "p99_us") / 1000.0,
		       get_i(rtt, "samples"));
	if (json_object_object_get_ex(vm, "vsock_device", &dev))
		printf("  vsock: memtided's vhost-user device %s; %" PRId64
		       " restart(s) asked of QEMU\n",
		       get_b(dev, "connected") ? "connected to QEMU" : "NOT connected to QEMU",
		       get_i(dev, "restarts"));
	if (get_i(vm, "vsock_cid") > 0)
		printf("  vsock: the kernel's, guest CID %" PRId64
		       " (memtided listens on AF_VSOCK and takes this CID's connections)\n",
		       get_i(vm, "vsock_cid"));
	if (!json_object_object_get_ex(vm, "ram_layout", &lay))
		return;
	json_object_object_get_ex(lay, "regions", &regs);
	printf("  guest RAM layout (vhost-user memory table): %zu region(s);",
	       regs ? json_object_array_length(regs) : 0);
	if (!json_object_object_get_ex(lay, "matches_qmp", &m) || !m)
		printf(" not checked yet\n");
	else
		printf(" %s QMP: %s\n", json_object_get_boolean(m) ? "matches" : "DOES NOT match",
		       get_s(lay, "detail"));
	for (size_t i = 0; regs && i < json_object_array_length(regs); i++) {
		struct json_object *r = json_object_array_get_idx(regs, i);
		char a[32];

		printf("    gpa 0x%09" PRIx64 " %9s at QEMU 0x%" PRIx64 "\n", get_i(r, "gpa"),
		       size_str(get_i(r, "bytes"), a, sizeof(a)), get_i(r, "qemu_va"));
	}
}

static void print_status(struct json_object *rep)
{
	struct json_object *host = NULL, *vms;
	char a[16], b[16], c[16], e[16], f[16];

	if (json_object_object_get_ex(rep, "host", &host))
		printf("host: %s available of %s, low mark %s%s; %lld VMs, %s returned by "
		       "memtide%s\n",
		       size_str(get_i(host, "mem_available_bytes"), a, sizeof(a)),
		       size_str(get_i(host, "mem_total_bytes"), b, sizeof(b)),
		       size_str(get_i(host, "low_mark_bytes"), c, sizeof(c)),
		       get_b(host, "under_pressure") ? " (UNDER PRESSURE)" : "",
		       (long long)get_i(host, "nr_vms"),
		       size_str(get_i(host, "saved_bytes"), e, sizeof(e)),
		       get_b(host, "observe_only") ? "; OBSERVE-ONLY: no VM is changed" : "");
	if (host && get_i(host, "swap_total_bytes") > 0)
		printf("host swap: %s free of %s; compressed pools hold %s of RAM\n",
		       size_str(get_i(host, "swap_free_bytes"), a, sizeof(a)),
		       size_str(get_i(host, "swap_total_bytes"), b, sizeof(b)),
		       size_str(get_i(host, "swap_pool_bytes"), c, sizeof(c)));
	if (!json_object_object_get_ex(rep, "vms", &vms) || arr_len(vms) == 0) {
		printf("no VMs managed\n");
		return;
	}
	printf("%-24s %-16s %8s %8s %8s %8s %8s %9s %10s %s\n", "DOMAIN", "STATE", "MAX", "TARGET",
	       "ACTUAL", "WSS", "RETURNED", "UNTOUCHED", "REFAULT/m", "AGENT");
	for (size_t i = 0; i < arr_len(vms); i++) {
		struct json_object *v = json_object_array_get_idx(vms, i);
		char m[16], u[16], state[40];

		/* An observed VM says so in its state: nothing in its row was done. */
		snprintf(state, sizeof(state), "%s%s", get_b(v, "observe") ? "observe:" : "",
			 get_s(v, "state"));
		printf("%-24.24s %-16s %8s %8s %8s %8s %8s %9s %9.3f%% %s\n", get_s(v, "name"),
		       state, size_str(get_i(v, "max_bytes"), m, sizeof(m)),
		       size_str(get_i(v, "target_bytes"), a, sizeof(a)),
		       size_str(get_i(v, "balloon_actual_bytes"), b, sizeof(b)),
		       size_str(get_i(v, "working_set_bytes"), c, sizeof(c)),
		       size_str(get_i(v, "returned_bytes"), f, sizeof(f)),
		       get_i(v, "host_rss_bytes")
			   ? size_str(get_i(v, "untouched_bytes"), u, sizeof(u))
			   : "?",
		       100.0 * get_d(v, "refault_rate_per_min"),
		       get_b(v, "agent_connected") ? "yes" : "no");
		if (*get_s(v, "last_error"))
			printf("  ! %s\n", get_s(v, "last_error"));
		print_health(v, "  ! ");
	}
}

/* What the loop says about its peer and its timing, when something is off. */
static void print_health(struct json_object *v, const char *indent)
{
	int64_t since = get_i(v, "peer_unresponsive_since_ms");

	if (since)
		printf("%s%s unresponsive for %" PRId64 " s (%s timed out); figures are as of "
		       "then, nothing is actuated\n",
		       indent, "QMP/libvirt", ((int64_t)mtd_mono_ms() - since) / 1000,
		       get_s(v, "peer_call"));
	if (get_b(v, "behind"))
		printf("%sfalling behind its interval: last tick gap %" PRId64 " ms, %" PRId64
		       " late ticks\n",
		       indent, get_i(v, "tick_gap_ms"), get_i(v, "ticks_late"));
	if (get_b(v, "detaching"))
		printf("%sdetaching\n", indent);
	if (*get_s(v, "agent_untrusted"))
		printf("%sagent figures UNTRUSTED: it said %s; %" PRId64
		       " figures clamped to what the VM can hold since attach\n",
		       indent, get_s(v, "agent_untrusted"), get_i(v, "agent_figures_clamped"));
}

static void bar(double share, int width)
{
	int n = (int)(share * width + 0.5);

	for (int i = 0; i < width; i++)
		fputs(i < n ? "#" : ".", stdout);
}

static void print_gens(struct json_object *vm)
{
	struct json_object *gens;
	int64_t total = 0, maxp = 1;
	char a[16], b[16];

	if (!json_object_object_get_ex(vm, "generations", &gens) || arr_len(gens) == 0) {
		printf("  generations: none yet (the first aging round has not run)\n");
		return;
	}
	for (size_t i = 0; i < arr_len(gens); i++) {
		int64_t p = get_i(json_object_array_get_idx(gens, i), "pages");

		total += p;
		if (p > maxp)
			maxp = p;
	}
	printf("  generations (oldest first; %s resident in them):\n",
	       size_str(total * 4096, a, sizeof(a)));
	for (size_t i = 0; i < arr_len(gens); i++) {
		struct json_object *g = json_object_array_get_idx(gens, i);
		int64_t p = get_i(g, "pages");

		printf("    age %7s %8s |", age_str(get_i(g, "age_ms"), b, sizeof(b)),
		       size_str(p * 4096, a, sizeof(a)));
		bar((double)p / (double)maxp, 40);
		printf("|\n");
	}
}

/* A policy as the KEY=VALUE pairs `policy set` takes (every key of `policy get --json`, in
 * the words and units set accepts), separated by sep.  max=0 means the domain's own maximum;
 * cold_age=0, the refault controller's choice. */
static void print_policy(struct json_object *p, const char *sep)
{
	char a[32], b[32], c[32], w[32], o[32];
	int64_t cold = get_i(p, "cold_age_ms");

	printf("enabled=%s%smin=%s%smax=%s%spriority=%lld%starget_refault_per_min=%g%sheadroom=%s%s"
	       "return=%s%ssource=%s%sept_window=%s%sobserve=%s%scold_age=%s\n",
	       get_b(p, "enabled") ? "yes" : "no", sep,
	       bytes_exact(get_i(p, "min_bytes"), a, sizeof(a)), sep,
	       bytes_exact(get_i(p, "max_bytes"), b, sizeof(b)), sep,
	       (long long)get_i(p, "priority"), sep, get_d(p, "target_refault_per_min"), sep,
	       bytes_exact(get_i(p, "headroom_bytes"), c, sizeof(c)), sep, get_s(p, "return"), sep,
	       get_s(p, "source"), sep, ms_str(get_i(p, "ept_window_ms"), w, sizeof(w)), sep,
	       get_b(p, "observe") ? "yes" : "no", sep, cold ? ms_str(cold, o, sizeof(o)) : "0");
}

/* Which access-bit source, and why not each other one (host/access/choose.c). */
static void print_source(struct json_object *vm)
{
	struct json_object *nt;

	printf("  access source: %s%s%s\n", get_s(vm, "source"),
	       *get_s(vm, "source_detail") ? ": " : "", get_s(vm, "source_detail"));
	if (!json_object_object_get_ex(vm, "source_not_taken", &nt) ||
	    !json_object_is_type(nt, json_type_array))
		return;
	for (size_t i = 0; i < arr_len(nt); i++) {
		struct json_object *x = json_object_array_get_idx(nt, i);
		printf("    not %s: %s\n", get_s(x, "source"), get_s(x, "why"));
	}
}

/* How memory goes back, in words, for each `return_in_force`. */
static const char *return_how(const char *r)
{
	if (strcmp(r, "reclaim") == 0)
		return " (the agent's reclaim + free page reporting; the balloon is a cap)";
	if (strcmp(r, "pageout") == 0)
		return " (memtided pages cold memory out to host swap; the balloon is a cap)";
	if (strcmp(r, "auto") == 0)
		return " (the agent's reclaim first, host pageout for the rest; the balloon is a "
		       "cap)";
	return " (the balloon)";
}

/* Host-side eviction: its state and why, the RSS it freed, the pool's share, swap-ins. */
static void print_pageout(struct json_object *vm)
{
	struct json_object *p;
	char a[16], b[16], c[16], d[16], e[16], f[16];

	if (!json_object_object_get_ex(vm, "pageout", &p))
		return;
	if (strcmp(get_s(p, "state"), "off") == 0 && get_i(p, "swapped_bytes") == 0)
		return;
	printf("  host pageout %s%s%s\n", get_s(p, "state"), *get_s(p, "why") ? ": " : "",
	       get_s(p, "why"));
	printf("    in host swap %s (resident drop) - compressed pool %s = %s saved; %s sent out "
	       "in all, %s evictable; swap-ins %.1f pages/s, %" PRId64 " refaults in all; "
	       "%s free in the guest (holding nothing on the host)\n",
	       size_str(get_i(p, "swapped_bytes"), a, sizeof(a)),
	       size_str(get_i(p, "pool_bytes"), b, sizeof(b)),
	       size_str(get_i(p, "net_bytes"), c, sizeof(c)),
	       size_str(get_i(p, "out_total_bytes"), d, sizeof(d)),
	       size_str(get_i(p, "evictable_bytes"), e, sizeof(e)), get_d(p, "swapin_pages_per_s"),
	       get_i(p, "refaults_total"), size_str(get_i(p, "free_bytes"), f, sizeof(f)));
}

/* Host-side reclaim through the VM's cgroup: how, what the kernel's aging sees, where the
 * working set comes from, and the stall and pool rules. */
static void print_memcg(struct json_object *vm)
{
	struct json_object *m;
	char a[16], b[16], c[16], d[16];

	if (!json_object_object_get_ex(vm, "memcg", &m))
		return;
	printf("  cgroup %s%s%s%s: %s; the kernel's aging %s\n", get_s(m, "cgroup"),
	       *get_s(m, "moved_from") ? " (memtided moved QEMU here from " : "",
	       get_s(m, "moved_from"), *get_s(m, "moved_from") ? ")" : "",
	       strcmp(get_s(m, "mechanism"), "mglru") == 0
		   ? "MGLRU eviction by generation (lru_gen '-')"
	       : strcmp(get_s(m, "mechanism"), "classic") == 0
		   ? "classic LRU through memory.reclaim (MGLRU off: no ages; it takes only while "
		     "refaults stay within budget)"
		   : "not read yet",
	       strcmp(get_s(m, "aging"), "blind") == 0
		   ? "does NOT see this guest's accesses (tested): a generation says when eviction "
		     "last found a page used"
	       : strcmp(get_s(m, "aging"), "sees") == 0 ? "sees this guest's accesses (tested)"
							: "is not tested yet");
	printf("    working set from %s: %s used within the cold age; %s kept by eviction in "
	       "all; charged %s, in swap %s\n",
	       get_s(m, "working_set_from"), size_str(get_i(m, "young_bytes"), a, sizeof(a)),
	       size_str(get_i(m, "kept_total_bytes"), b, sizeof(b)),
	       size_str(get_i(m, "current_bytes"), c, sizeof(c)),
	       size_str(get_i(m, "swap_bytes"), d, sizeof(d)));
	printf("    stall (PSI some) %.2f%% of the last interval, budget %.2f%%, %.1f s in all; "
	       "refaults counted %s; ",
	       get_d(m, "stall_pct"), get_d(m, "stall_budget_pct"),
	       (double)get_i(m, "stall_total_ms") / 1000.0,
	       get_b(m, "refaults_exact") ? "page by page" : "from major faults (approximate)");
	if (get_d(m, "pool_saving_pct") < 0)
		printf("the pool's saving not measured yet\n");
	else
		printf("the compressed pool saves %.0f%% of what eviction takes%s\n",
		       get_d(m, "pool_saving_pct"),
		       get_b(m, "incompressible") ? " - INCOMPRESSIBLE: eviction held" : "");
	if (*get_s(m, "access_history"))
		printf("    the guest's access history: %s\n", get_s(m, "access_history"));
}

static void print_vm(struct json_object *vm)
{
	struct json_object *pol, *wss, *acts, *caps;
	char a[16], b[16], c[16], d[16], e[16];

	printf("%s%s%s%s  state %s\n", get_s(vm, "name"), *get_s(vm, "uuid") ? " (" : "",
	       get_s(vm, "uuid"), *get_s(vm, "uuid") ? ")" : "", get_s(vm, "state"));
	if (get_b(vm, "observe"))
		printf(
		    "  OBSERVE-ONLY: memtided computes what it would do (the targets and \"would\" "
		    "actions below) and changes nothing\n");
	printf("  balloon: target %s, actual %s of %s; guest RAM resident on the host %s\n",
	       size_str(get_i(vm, "balloon_target_bytes"), a, sizeof(a)),
	       size_str(get_i(vm, "balloon_actual_bytes"), b, sizeof(b)),
	       size_str(get_i(vm, "max_bytes"), c, sizeof(c)),
	       get_i(vm, "host_rss_bytes") ? size_str(get_i(vm, "host_rss_bytes"), d, sizeof(d))
					   : "unknown");
	printf("  returned to the host by memtide %s; not resident without memtide's doing "
	       "(never touched, or freed by the guest itself) %s\n",
	       size_str(get_i(vm, "returned_bytes"), e, sizeof(e)),
	       get_i(vm, "host_rss_bytes") ? size_str(get_i(vm, "untouched_bytes"), d, sizeof(d))
					   : "unknown (no resident size)");
	printf("  target %s, returned by %s%s; guest uses %s (MemTotal - MemFree)\n",
	       size_str(get_i(vm, "target_bytes"), a, sizeof(a)), get_s(vm, "return_in_force"),
	       return_how(get_s(vm, "return_in_force")),
	       get_i(vm, "guest_used_bytes") ? size_str(get_i(vm, "guest_used_bytes"), b, sizeof(b))
					     : "unknown");
	print_pageout(vm);
	print_memcg(vm);
	printf("  agent %s%s%s; free page reporting %s; guest MemAvailable %s, PSI some avg10 "
	       "%.1f%%\n",
	       get_b(vm, "agent_connected") ? "connected" : "NOT connected",
	       *get_s(vm, "agent_transport") ? " over " : "", get_s(vm, "agent_transport"),
	       get_b(vm, "fpr_on") ? "on" : "OFF or unknown",
	       size_str(get_i(vm, "guest_mem_available_bytes"), a, sizeof(a)),
	       get_d(vm, "guest_psi_some_avg10"));
	print_source(vm);
	if (json_object_object_get_ex(vm, "agent_caps", &caps)) {
		printf("  agent can:");
		for (size_t i = 0; i < arr_len(caps); i++) {
			struct json_object *cap = json_object_array_get_idx(caps, i);

			if (json_object_is_type(cap, json_type_string))
				printf(" %s", json_object_get_string(cap));
		}
		printf("\n    so: %s\n", get_s(vm, "agent_caps_consequence"));
	} else if (!get_b(vm, "agent_connected")) {
		printf("  agent capabilities unknown: no agent has said hello on this attach\n");
	}
	print_health(vm, "  ");
	struct json_object *fixed_pol = NULL;
	bool fixed = json_object_object_get_ex(vm, "policy", &fixed_pol) &&
		     get_i(fixed_pol, "cold_age_ms") > 0;
	printf("  controller: cold age threshold %s%s (reuse floor %s), working set at it %s, "
	       "refaults %.3f%% of resident pages per minute, output %.3f\n",
	       age_str(get_i(vm, "cold_age_ms"), a, sizeof(a)),
	       fixed ? " (fixed by policy cold_age)" : "",
	       get_i(vm, "reuse_floor_ms") > 0 ? age_str(get_i(vm, "reuse_floor_ms"), c, sizeof(c))
					       : "none",
	       size_str(get_i(vm, "working_set_bytes"), b, sizeof(b)),
	       100.0 * get_d(vm, "refault_rate_per_min"), get_d(vm, "controller_output"));
	if (*get_s(vm, "eviction"))
		printf("  eviction by age: %s\n", get_s(vm, "eviction"));
	else if (*get_s(vm, "reclaim_hold"))
		printf("  eviction by age held: %s (the controller takes nothing by age until "
		       "the guest's reuses vouch for a threshold)\n",
		       get_s(vm, "reclaim_hold"));
	printf("  working set from: %s; decision: %s%s%s\n",
	       *get_s(vm, "wss_source") ? get_s(vm, "wss_source") : "-",
	       *get_s(vm, "decision") ? get_s(vm, "decision") : "-",
	       *get_s(vm, "decision_detail") ? ": " : "", get_s(vm, "decision_detail"));
	print_channel(vm);
	if (get_b(vm, "released"))
		printf("  released: %s\n",
		       get_i(vm, "release_left_bytes") == 0
			   ? "at its full size; not inflated until memtidectl resume"
		       : get_b(vm, "release_waiting")
			   ? "waiting: the host has nothing to spare above its low mark"
			   : "climbing back to its full size at the host's pace");
	if (get_b(vm, "resumed"))
		printf("  resumed from the state a previous memtided saved\n");
	if (get_i(vm, "hold_left_ms") > 0)
		printf("  backing-off: no inflation for another %s (%" PRId64
		       " steps in a row given back at once; each doubles the hold)\n",
		       age_str(get_i(vm, "hold_left_ms"), a, sizeof(a)),
		       get_i(vm, "refused_steps"));
	if (json_object_object_get_ex(vm, "policy", &pol)) {
		printf("  policy: ");
		print_policy(pol, " ");
	}
	if (json_object_object_get_ex(vm, "working_set", &wss)) {
		printf("  working set by idle age:");
		for (size_t i = 0; i < arr_len(wss); i++) {
			struct json_object *w = json_object_array_get_idx(wss, i);

			printf("  <=%s: %s", age_str(get_i(w, "idle_age_ms"), a, sizeof(a)),
			       size_str(get_i(w, "bytes"), b, sizeof(b)));
		}
		printf("\n");
	}
	print_gens(vm);
	if (json_object_object_get_ex(vm, "actions", &acts) && arr_len(acts)) {
		int64_t now = get_i(vm, "updated_ms");

		printf("  last actions:\n");
		for (size_t i = 0; i < arr_len(acts); i++) {
			struct json_object *x = json_object_array_get_idx(acts, i);
			int64_t at = get_i(x, "at_ms");

			printf("    %8s ago  %s\n", age_str(now > at ? now - at : 0, a, sizeof(a)),
			       get_s(x, "what"));
		}
	}
	if (*get_s(vm, "last_error"))
		printf("  last error: %s\n", get_s(vm, "last_error"));
}

static int cmd_status(void)
{
	int rc;
	struct json_object *rep = call_checked(req_new("status"), &rc);

	if (!rep)
		return rc;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
	else
		print_status(rep);
	json_object_put(rep);
	return EXIT_OK;
}

static int cmd_vm_show(const char *name)
{
	struct json_object *req = req_new("vm"), *rep, *vm;
	int rc;

	req_str(req, "name", name);
	rep = call_checked(req, &rc);
	if (!rep)
		return rc;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
	else if (json_object_object_get_ex(rep, "vm", &vm))
		print_vm(vm);
	json_object_put(rep);
	return EXIT_OK;
}

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* One frame of top: the status table, then each VM's generations. */
static int top_frame(bool tty)
{
	int rc;
	struct json_object *rep = call_checked(req_new("status"), &rc), *vms;
	time_t now = time(NULL);
	char when[32];

	if (!rep)
		return rc;
	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	if (tty)
		fputs("\033[H\033[2J", stdout);
	if (json_out) {
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
		json_object_put(rep);
		return EXIT_OK;
	}
	printf("memtidectl top  %s  (q or Ctrl-C to quit)\n", when);
	print_status(rep);
	if (json_object_object_get_ex(rep, "vms", &vms)) {
		for (size_t i = 0; i < arr_len(vms); i++) {
			struct json_object *req = req_new("vm"), *one, *vm;

			req_str(req, "name", get_s(json_object_array_get_idx(vms, i), "name"));
			one = call_checked(req, &rc);
			if (one && json_object_object_get_ex(one, "vm", &vm)) {
				printf("\n%s:\n", get_s(vm, "name"));
				print_gens(vm);
				print_memcg(vm);
			}
			json_object_put(one);
		}
	}
	printf("\n");
	fflush(stdout);
	json_object_put(rep);
	return EXIT_OK;
}

/* ---- vm history: the audit trail, read from memtided's state directory ---------------- */

#define HISTORY_MAX_LAST 10000

static void print_history_line(const char *line)
{
	struct json_object *e = json_tokener_parse(line);
	char a[16], b[16];

	if (!e) {
		printf("(unreadable line) %s\n", line);
		return;
	}
	printf("%-24s %-10s %8s -> %-8s %-12s %s%s\n", get_s(e, "time"), get_s(e, "what"),
	       size_str(get_i(e, "before_bytes"), a, sizeof(a)),
	       size_str(get_i(e, "after_bytes"), b, sizeof(b)), get_s(e, "reason"),
	       get_s(e, "source"), get_b(e, "observe") ? " (observe-only: not done)" : "");
	json_object_put(e);
}

/* Keep the last `last` lines of a file in ring (lines are malloc'd). */
static void history_read(const char *path, char **ring, size_t last, size_t *n)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (!f)
		return;
	while ((len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[len - 1] = '\0';
		free(ring[*n % last]);
		ring[*n % last] = strdup(line);
		(*n)++;
	}
	free(line);
	fclose(f);
}

static int cmd_vm_history(int argc, char **argv)
{
	const char *name = NULL, *dir = "/var/lib/memtide";
	size_t last = 50, n = 0;
	char path[600], older[610];

	for (int i = 0; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "--last") && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end || v == 0 || v > HISTORY_MAX_LAST) {
				fprintf(stderr, "memtidectl: --last must be 1..%d\n",
					HISTORY_MAX_LAST);
				return EXIT_USAGE;
			}
			last = v;
		} else if (!strcmp(argv[i], "--state-dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			fprintf(stderr, "usage: memtidectl vm history DOMAIN [--last N] "
					"[--state-dir DIR]\n");
			return EXIT_USAGE;
		}
	}
	if (!name || mtd_history_path(dir, name, path, sizeof(path)) < 0) {
		fprintf(stderr,
			"usage: memtidectl vm history DOMAIN [--last N] [--state-dir DIR]\n");
		return EXIT_USAGE;
	}
	snprintf(older, sizeof(older), "%s.1", path);
	if (access(path, R_OK) != 0 && access(older, R_OK) != 0) {
		fprintf(stderr,
			"memtidectl: no history for '%s' in %s: memtided has changed nothing on it "
			"(or [daemon] state_dir is elsewhere: --state-dir DIR)\n",
			name, path);
		return EXIT_DAEMON;
	}
	char **ring = calloc(last, sizeof(*ring));
	if (!ring)
		return EXIT_DAEMON;
	history_read(older, ring, last, &n);
	history_read(path, ring, last, &n);
	size_t first = n > last ? n - last : 0;
	if (!json_out)
		printf("%-24s %-10s %8s    %-8s %-12s %s\n", "TIME (UTC)", "WHAT", "BEFORE",
		       "AFTER", "REASON", "SOURCE");
	for (size_t i = first; i < n; i++) {
		if (json_out)
			printf("%s\n", ring[i % last]);
		else
			print_history_line(ring[i % last]);
	}
	for (size_t i = 0; i < last; i++)
		free(ring[i]);
	free(ring);
	return EXIT_OK;
}

static int cmd_top(int argc, char **argv)
{
	double interval = 2.0;
	long count = -1;
	bool tty = isatty(STDOUT_FILENO), keys = isatty(STDIN_FILENO);
	struct termios saved, raw;
	int rc = EXIT_OK;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
			interval = strtod(argv[++i], NULL);
		} else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			count = strtol(argv[++i], NULL, 10);
		} else {
			fprintf(stderr,
				"memtidectl top: unknown argument '%s' (--interval S, "
				"--count N)\n",
				argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!(interval >= 0.1 && interval <= 3600) || count == 0 || count < -1) {
		fprintf(stderr,
			"memtidectl top: --interval must be 0.1..3600 s and --count >= 1\n");
		return EXIT_USAGE;
	}
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		keys = false;
	}
	for (long n = 0; !interrupted && (count < 0 || n < count); n++) {
		rc = top_frame(tty);
		if (rc != EXIT_OK || (count > 0 && n + 1 == count))
			break;
		/* Wait for the next frame, or a key. */
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		if (poll(&p, keys ? 1 : 0, (int)(interval * 1000)) > 0) {
			char c = 0;

			if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
				break;
		}
	}
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	return rc;
}

/* ---- policy, attach, detach, hook, version ------------------------------------------------ */

static int cmd_policy(int argc, char **argv)
{
	int rc = EXIT_OK;

	if (argc >= 2 && !strcmp(argv[0], "get") && argc == 2) {
		struct json_object *req = req_new("policy-get"), *rep, *p;

		req_str(req, "name", argv[1]);
		rep = call_checked(req, &rc);
		if (!rep)
			return rc;
		if (json_out) {
			printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
		} else if (json_object_object_get_ex(rep, "policy", &p)) {
			print_policy(p, "\n");
		}
		json_object_put(rep);
		return EXIT_OK;
	}
	if (argc >= 3 && !strcmp(argv[0], "set")) {
		/* Check every pair first, so a typo in the last one changes nothing. */
		for (int i = 2; i < argc; i++) {
			const char *eq = strchr(argv[i], '=');

			if (!eq || eq == argv[i] || !eq[1]) {
				fprintf(stderr, "memtidectl policy set: '%s' is not KEY=VALUE\n",
					argv[i]);
				return EXIT_USAGE;
			}
		}
		/* One request with every pair: memtided applies all of them or none. */
		struct json_object *req = req_new("policy-set"), *set = json_object_new_object(),
				   *rep;

		req_str(req, "name", argv[1]);
		for (int i = 2; i < argc; i++) {
			char key[64];
			const char *eq = strchr(argv[i], '=');

			snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
			if (json_object_object_get_ex(set, key, NULL)) {
				fprintf(stderr, "memtidectl policy set: %s is given twice\n", key);
				json_object_put(set);
				json_object_put(req);
				return EXIT_USAGE;
			}
			json_object_object_add(set, key, json_object_new_string(eq + 1));
		}
		json_object_object_add(req, "set", set);
		rep = call_checked(req, &rc);
		if (!rep)
			return rc;
		if (json_out)
			printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
		json_object_put(rep);
		return EXIT_OK;
	}
	fprintf(stderr, "usage: memtidectl policy get DOMAIN | policy set DOMAIN KEY=VALUE...\n");
	return EXIT_USAGE;
}

static int cmd_simple(const char *cmd, const char *name)
{
	struct json_object *req = req_new(cmd), *rep;
	int rc;

	req_str(req, "name", name);
	rep = call_checked(req, &rc);
	if (!rep)
		return rc;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
	else if (!strcmp(cmd, "detach"))
		printf("%s: detached (left at the size it has; `memtidectl release %s` first gives "
		       "it its memory back)\n",
		       name, name);
	else
		printf("%s: %sed\n", name, cmd);
	json_object_put(rep);
	return EXIT_OK;
}

/* ---- release / resume ---------------------------------------------------------------------- */

/* Follow a release until every VM named in rep is at its ceiling (or Ctrl-C). */
static int release_wait(struct json_object *rep)
{
	struct json_object *vms;
	time_t t0 = time(NULL);
	char a[16], b[16];
	bool said_waiting = false;

	if (!json_object_object_get_ex(rep, "vms", &vms))
		return EXIT_OK;
	signal(SIGINT, on_sigint);
	while (!interrupted) {
		int rc;
		struct json_object *st = call_checked(req_new("status"), &rc), *all;
		size_t left = 0;
		bool waiting = false;

		if (!st)
			return rc;
		if (!json_object_object_get_ex(st, "vms", &all)) {
			json_object_put(st);
			break;
		}
		for (size_t i = 0; i < json_object_array_length(all); i++) {
			struct json_object *v = json_object_array_get_idx(all, i);
			bool mine = false;

			for (size_t j = 0; j < json_object_array_length(vms); j++)
				mine = mine ||
				       !strcmp(get_s(json_object_array_get_idx(vms, j), "name"),
					       get_s(v, "name"));
			/* Not yet marked released: memtided's loop has not taken the ask yet. */
			if (!mine || (get_b(v, "released") && get_i(v, "release_left_bytes") == 0))
				continue;
			left++;
			waiting = waiting || get_b(v, "release_waiting");
			printf("  %-24.24s %8s of %s\n", get_s(v, "name"),
			       size_str(get_i(v, "balloon_actual_bytes"), a, sizeof(a)),
			       size_str(get_i(v, "max_bytes"), b, sizeof(b)));
		}
		json_object_put(st);
		if (!left) {
			printf("done: every VM released is at its full size (%lld s)\n",
			       (long long)(time(NULL) - t0));
			return EXIT_OK;
		}
		if (waiting && !said_waiting)
			printf("  waiting: the host has nothing to spare above its low mark\n");
		said_waiting = waiting;
		fflush(stdout);
		struct pollfd p = {.fd = -1};
		(void)poll(&p, 0, 1000);
	}
	printf("stopped waiting; the release goes on (memtidectl status)\n");
	return EXIT_OK;
}

static int cmd_release(int argc, char **argv, bool release)
{
	const char *name = NULL, *cmd = release ? "release" : "resume";
	bool all = false, wait = false, bad = false;
	struct json_object *req, *rep, *vms, *host;
	char a[16], b[16], c[16];
	int rc;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--all"))
			all = true;
		else if (release && !strcmp(argv[i], "--wait"))
			wait = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			bad = true;
	}
	if (bad || !!name == all) {
		fprintf(stderr, "usage: memtidectl %s DOMAIN|--all%s\n", cmd,
			release ? " [--wait]" : "");
		return EXIT_USAGE;
	}
	req = req_new(cmd);
	if (all)
		json_object_object_add(req, "all", json_object_new_boolean(1));
	else
		req_str(req, "name", name);
	rep = call_checked(req, &rc);
	if (!rep)
		return rc;
	if (json_out) {
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
		json_object_put(rep);
		return EXIT_OK;
	}
	if (!json_object_object_get_ex(rep, "vms", &vms) || !json_object_array_length(vms)) {
		printf("no VMs managed: nothing to %s\n", cmd);
		json_object_put(rep);
		return EXIT_OK;
	}
	if (release && json_object_object_get_ex(rep, "host", &host))
		printf("releasing %zu VM%s to full size, at most %s/s across the host and never "
		       "below its low mark of MemAvailable (%s; %s available now):\n",
		       json_object_array_length(vms), json_object_array_length(vms) == 1 ? "" : "s",
		       size_str(get_i(host, "release_rate_bytes_per_s"), a, sizeof(a)),
		       size_str(get_i(host, "low_mark_bytes"), b, sizeof(b)),
		       size_str(get_i(host, "mem_available_bytes"), c, sizeof(c)));
	for (size_t i = 0; i < json_object_array_length(vms); i++) {
		struct json_object *v = json_object_array_get_idx(vms, i);
		int64_t now = get_i(v, "actual_bytes"), to = get_i(v, "ceiling_bytes");

		if (!release)
			printf("%s: resumed: memtided may take memory from it again (after a "
			       "hold)\n",
			       get_s(v, "name"));
		else if (now >= to)
			printf("  %-24.24s %8s (already at its full size)\n", get_s(v, "name"),
			       size_str(to, a, sizeof(a)));
		else
			printf("  %-24.24s %8s -> %s\n", get_s(v, "name"),
			       size_str(now, a, sizeof(a)), size_str(to, b, sizeof(b)));
	}
	if (release)
		printf("released VMs are not inflated again until `memtidectl resume`; "
		       "`memtidectl status` shows the progress\n");
	rc = release && wait ? release_wait(rep) : EXIT_OK;
	json_object_put(rep);
	return rc;
}

/* libvirt's hook: tell memtided within 2 s in all (connect and answer).  An event memtided
 * did not take exits non-zero with the reason on stderr: the hook script logs it and still
 * exits 0, so libvirt never fails a domain over us (contrib/libvirt/hooks/qemu.d/memtide). */
static int cmd_hook(const char *dom, const char *op, const char *subop)
{
	struct json_object *req = req_new("hook"), *rep, *ok, *e;
	char err[400];
	int rc = EXIT_OK;

	if (timeout_ms > 2000)
		timeout_ms = 2000;
	retry_refused = true;
	req_str(req, "domain", dom);
	req_str(req, "op", op);
	req_str(req, "subop", subop);
	rep = ctl_call(req, err, sizeof(err));
	json_object_put(req);
	if (!rep) {
		fprintf(stderr, "memtidectl hook: %s %s not delivered: %s\n", dom, op, err);
		rc = EXIT_UNREACHABLE;
	} else if (!json_object_object_get_ex(rep, "ok", &ok) || !json_object_get_boolean(ok)) {
		fprintf(stderr, "memtidectl hook: %s %s refused: %s\n", dom, op,
			json_object_object_get_ex(rep, "error", &e) &&
				json_object_is_type(e, json_type_string)
			    ? json_object_get_string(e)
			    : "no reason given");
		rc = EXIT_DAEMON;
	}
	json_object_put(rep);
	return rc;
}

/* detach: memtided answers at once and the VM's loop leaves on its own time; follow it
 * until the VM is gone, saying what holds it, up to the timeout. */
static int cmd_detach(const char *name)
{
	struct json_object *req = req_new("detach"), *rep;
	int rc;
	int64_t deadline;
	bool said = false;

	req_str(req, "name", name);
	rep = call_checked(req, &rc);
	if (!rep)
		return rc;
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PLAIN));
	json_object_put(rep);
	deadline = (int64_t)mtd_mono_ms() + timeout_ms;
	for (;;) {
		struct json_object *q = req_new("vm"), *r, *ok, *vm;
		char err[400];

		req_str(q, "name", name);
		r = ctl_call(q, err, sizeof(err));
		json_object_put(q);
		if (!r) {
			fprintf(stderr, "memtidectl: %s\n", err);
			return EXIT_UNREACHABLE;
		}
		bool gone =
		    !json_object_object_get_ex(r, "ok", &ok) || !json_object_get_boolean(ok);
		if (gone) {
			json_object_put(r);
			if (!json_out)
				printf("%s: detached\n", name);
			return EXIT_OK;
		}
		if (!said && !json_out && json_object_object_get_ex(r, "vm", &vm)) {
			printf("%s: detaching", name);
			if (get_i(vm, "peer_unresponsive_since_ms"))
				printf(" (its QMP/libvirt peer has not answered for %" PRId64
				       " s: the loop leaves once its call is cut, within a few "
				       "seconds)",
				       ((int64_t)mtd_mono_ms() -
					get_i(vm, "peer_unresponsive_since_ms")) /
					   1000);
			printf("...\n");
			fflush(stdout);
			said = true;
		}
		json_object_put(r);
		if ((int64_t)mtd_mono_ms() >= deadline) {
			fprintf(stderr,
				"memtidectl: %s is still detaching after %d ms (memtidectl vm show "
				"%s)\n",
				name, timeout_ms, name);
			return EXIT_DAEMON;
		}
		struct timespec ts = {.tv_nsec = 100 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int cmd_version(void)
{
	char err[400];
	struct json_object *req = req_new("version");
	struct json_object *rep = ctl_call(req, err, sizeof(err));

	json_object_put(req);
	if (json_out) {
		/* {"memtidectl": V, "memtided": V|null, "protocol": N|null, "error": S|null} */
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "memtidectl", json_object_new_string(VERSION));
		json_object_object_add(o, "memtided",
				       rep ? json_object_new_string(get_s(rep, "version")) : NULL);
		json_object_object_add(o, "protocol",
				       rep ? json_object_new_int64(get_i(rep, "protocol")) : NULL);
		json_object_object_add(o, "error", rep ? NULL : json_object_new_string(err));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
		json_object_put(rep);
		return EXIT_OK;
	}
	printf("memtidectl %s\n", VERSION);
	if (rep)
		printf("memtided %s (control protocol %lld)\n", get_s(rep, "version"),
		       (long long)get_i(rep, "protocol"));
	else
		printf("memtided: %s\n", err);
	json_object_put(rep);
	return EXIT_OK;
}

/* ---- domxml-patch ------------------------------------------------------------------------- */

static int write_tmp(const char *text, char *path, size_t len)
{
	snprintf(path, len, "/tmp/memtidectl-domxml.XXXXXX");
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n;

	close(fd);
	return ok ? 0 : -1;
}

/* Show the changes as a unified diff (diff(1) from diffutils, in every Debian). */
static void show_diff(const char *name, const char *before, const char *after)
{
	char a[64], b[64];

	if (write_tmp(before, a, sizeof(a)) == 0 && write_tmp(after, b, sizeof(b)) == 0) {
		pid_t pid = fork();

		if (pid == 0) {
			char la[160], lb[160];

			snprintf(la, sizeof(la), "%s (now)", name);
			snprintf(lb, sizeof(lb), "%s (patched)", name);
			execlp("diff", "diff", "-u", "--label", la, "--label", lb, a, b,
			       (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	unlink(a);
	unlink(b);
}

static void quiet_libvirt(void *arg, virErrorPtr e)
{
	(void)arg;
	(void)e;
}

/* --ept: the plugin's step (host/front/ept_cli.h) on the patched text; its changes are
 * added to the others.  Returns the total number of changes or -errno with err. */
static int ept_step(char **after, char **changes, int n, const char *plugin, const char *dir,
		    char *err, size_t errlen)
{
	char *a2 = NULL, *c2 = NULL, *all;
	int n2 = mtd_ept_domxml_step(*after, plugin, dir, &a2, &c2, err, errlen);

	if (n2 < 0)
		return n2;
	all = malloc(strlen(*changes) + strlen(c2) + 1);
	if (!all) {
		free(a2);
		free(c2);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	strcpy(all, *changes);
	strcat(all, c2);
	free(*after);
	free(*changes);
	free(c2);
	*after = a2;
	*changes = all;
	return n + n2;
}

static int cmd_domxml_patch(int argc, char **argv)
{
	/* Like virsh: LIBVIRT_DEFAULT_URI when set, else the system QEMU driver. */
	const char *name = NULL, *uri = getenv("LIBVIRT_DEFAULT_URI");
	struct mtd_domxml_opts opts = {.vsock = false, .vsock_dir = MTD_VSOCK_DIR};
	const char *ept_dir = MTD_EPT_DIR_DEFAULT, *plugin = NULL;
	bool yes = false, ept = false;
	char err[300];
	int rc = EXIT_OK;

	if (!uri || !*uri)
		uri = "qemu:///system";
	/* The kernel's vsock where the host has it, memtided's vhost-user one elsewhere */
	opts.kernel_vsock = access(MTD_KVSOCK_DEV, F_OK) == 0;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--yes") || !strcmp(argv[i], "-y"))
			yes = true;
		else if (!strcmp(argv[i], "--vsock"))
			opts.vsock = true;
		else if (!strcmp(argv[i], "--vsock-dir") && i + 1 < argc && argv[i + 1][0] == '/')
			opts.vsock_dir = argv[++i];
		else if (!strcmp(argv[i], "--uri") && i + 1 < argc)
			uri = argv[++i];
		else if (!strcmp(argv[i], "--ept"))
			ept = true;
		else if (!strcmp(argv[i], "--ept-dir") && i + 1 < argc)
			ept_dir = argv[++i];
		else if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
			plugin = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else {
			fprintf(stderr, "memtidectl domxml-patch: unexpected '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!name) {
		fprintf(stderr,
			"usage: memtidectl domxml-patch DOMAIN [--yes] [--uri URI] [--vsock "
			"[--vsock-dir DIR]] [--ept [--ept-dir DIR] [--plugin SO]]\n");
		return EXIT_USAGE;
	}
	virSetErrorFunc(NULL, quiet_libvirt); /* we print libvirt's message once, ourselves */
	virConnectPtr conn = virConnectOpen(uri);
	if (!conn) {
		fprintf(stderr, "memtidectl: cannot connect to libvirt at %s: %s\n", uri,
			virGetLastErrorMessage());
		return EXIT_LIBVIRT;
	}
	virDomainPtr dom = virDomainLookupByName(conn, name);
	char *xml = NULL, *before = NULL, *after = NULL, *changes = NULL;
	if (!dom) {
		fprintf(stderr, "memtidectl: no domain '%s' at %s (virsh list --all)\n", name, uri);
		rc = EXIT_LIBVIRT;
		goto out;
	}
	if (virDomainIsPersistent(dom) != 1) {
		fprintf(stderr,
			"memtidectl: '%s' is transient: there is no definition to patch; "
			"add the balloon and channel where it is created\n",
			name);
		rc = EXIT_LIBVIRT;
		goto out;
	}
	xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
	if (!xml) {
		fprintf(stderr, "memtidectl: cannot read '%s': %s\n", name,
			virGetLastErrorMessage());
		rc = EXIT_LIBVIRT;
		goto out;
	}
	int n = mtd_domxml_patch_opts(xml, &opts, &before, &after, &changes, err, sizeof(err));
	if (n >= 0 && ept)
		n = ept_step(&after, &changes, n, plugin, ept_dir, err, sizeof(err));
	else if (n >= 0 && strstr(xml, "<domain type='qemu'"))
		printf("hint: %s is a TCG guest: --ept adds memtide's ept plugin, which lets "
		       "memtided see its page accesses\n",
		       name);
	if (n < 0) {
		fprintf(stderr, "memtidectl: %s: %s\n", name, err);
		rc = EXIT_LIBVIRT;
		goto out;
	}
	if (n == 0) {
		printf("%s%s: nothing to change: it already has what memtide needs\n", changes,
		       name);
		goto out;
	}
	show_diff(name, before, after);
	printf("\n%s", changes);
	if (!yes) {
		char line[16] = "";

		if (!isatty(STDIN_FILENO)) {
			printf("not changed: pass --yes to apply without asking\n");
			goto out;
		}
		printf("apply to %s? [y/N] ", name);
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin) || (line[0] != 'y' && line[0] != 'Y')) {
			printf("not changed\n");
			goto out;
		}
	}
	virDomainPtr nd = virDomainDefineXML(conn, after);
	if (!nd) {
		fprintf(stderr, "memtidectl: libvirt refused the patched definition: %s\n",
			virGetLastErrorMessage());
		rc = EXIT_LIBVIRT;
		goto out;
	}
	virDomainFree(nd);
	printf("%s: definition updated; device changes take effect when the domain next "
	       "starts\n",
	       name);
out:
	free(xml);
	free(before);
	free(after);
	free(changes);
	if (dom)
		virDomainFree(dom);
	virConnectClose(conn);
	return rc;
}

/* ---- main --------------------------------------------------------------------------------- */

/*
 * memtidectl's own options may come before the command or after it, as virsh takes them
 * (`memtidectl status --json`): they are taken out of argv wherever they stand, up to a
 * "--", and the command sees only its own words.  No command has a flag of these names.
 * --help (-h) anywhere prints the usage and exits 0.
 */
static int take_global_opts(int *argc, char **argv, bool *help, bool *version)
{
	int out = 1, i = 1;

	for (; i < *argc; i++) {
		const char *a = argv[i], *val = NULL;
		size_t n;

		if (!strcmp(a, "--"))
			break;
		if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
			json_out = true;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			*help = true;
			continue;
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			*version = true;
			continue;
		}
		n = !strncmp(a, "--socket", 8) ? 8 : !strncmp(a, "--timeout", 9) ? 9 : 0;
		if (n && (a[n] == '=' || a[n] == '\0')) {
			if (a[n] == '=') {
				val = a + n + 1;
			} else if (i + 1 < *argc) {
				val = argv[++i];
			} else {
				fprintf(stderr, "memtidectl: %s needs a value\n", a);
				return EXIT_USAGE;
			}
			if (n == 8) {
				sock_path = val;
			} else {
				char *end;
				double v = strtod(val, &end);
				if (end == val || v <= 0 || v > 3600 ||
				    (*end && strcmp(end, "s") != 0 && strcmp(end, "ms") != 0)) {
					fprintf(stderr,
						"memtidectl: --timeout takes a duration such "
						"as 10s or 500ms\n");
					return EXIT_USAGE;
				}
				timeout_ms = (int)(strcmp(end, "ms") != 0 ? v * 1000 : v);
				if (timeout_ms < 1)
					timeout_ms = 1;
			}
			continue;
		}
		if (out == 1 && a[0] == '-' && a[1]) {
			/* Before the command, only memtidectl's own options are known. */
			fprintf(stderr, "memtidectl: unknown option '%s' (memtidectl --help)\n", a);
			return EXIT_USAGE;
		}
		argv[out++] = argv[i];
	}
	/* A "--" is dropped; what follows it is the command's, as it stands. */
	for (i = i + 1; i < *argc; i++)
		argv[out++] = argv[i];
	argv[out] = NULL;
	*argc = out;
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	bool help = false, version = false;
	int rc;

	/* As the libvirt hook does: MEMTIDE_SOCKET names the socket unless --socket does. */
	const char *env_sock = getenv("MEMTIDE_SOCKET");
	if (env_sock && *env_sock)
		sock_path = env_sock;
	rc = take_global_opts(&argc, argv, &help, &version);
	if (rc != EXIT_OK) {
		usage(stderr);
		return rc;
	}
	if (help) {
		usage(stdout);
		return EXIT_OK;
	}
	if (version) {
		printf("memtidectl %s\n%s", VERSION, MTD_LICENSE);
		return EXIT_OK;
	}
	argc -= 1;
	argv += 1;
	if (argc < 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	const char *cmd = argv[0];
	if (!strcmp(cmd, "status") && argc == 1)
		return cmd_status();
	if (!strcmp(cmd, "vm") && argc == 3 && !strcmp(argv[1], "show"))
		return cmd_vm_show(argv[2]);
	if (!strcmp(cmd, "vm") && argc >= 3 && !strcmp(argv[1], "history"))
		return cmd_vm_history(argc - 2, argv + 2);
	if (!strcmp(cmd, "top"))
		return cmd_top(argc - 1, argv + 1);
	if (!strcmp(cmd, "policy"))
		return cmd_policy(argc - 1, argv + 1);
	if (!strcmp(cmd, "attach") && argc == 2)
		return cmd_simple(cmd, argv[1]);
	if (!strcmp(cmd, "release") || !strcmp(cmd, "resume"))
		return cmd_release(argc - 1, argv + 1, !strcmp(cmd, "release"));
	if (!strcmp(cmd, "detach") && argc == 2)
		return cmd_detach(argv[1]);
	if (!strcmp(cmd, "hook") && argc >= 3)
		return cmd_hook(argv[1], argv[2], argc >= 4 ? argv[3] : "-");
	if (!strcmp(cmd, "domxml-patch")) {
		xmlInitParser();
		rc = cmd_domxml_patch(argc - 1, argv + 1);
		xmlCleanupParser();
		return rc;
	}
	if (!strncmp(cmd, "ept-", 4))
		return mtd_ept_cli(argc, argv, json_out);
	if (!strcmp(cmd, "version") && argc == 1)
		return cmd_version();
	if (!strcmp(cmd, "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	fprintf(stderr,
		"memtidectl: unknown command or wrong arguments: '%s' (memtidectl --help)\n", cmd);
	return EXIT_USAGE;
}
