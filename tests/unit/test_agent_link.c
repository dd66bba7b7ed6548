// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_link.c - memtide-agent against a test host, over a socketpair and a unix socket.
 *
 * The agent runs its real loop (agent_run) in a thread, reading this machine's real /proc;
 * the test thread plays memtided with proto's codec.  Every wait is a poll() on a socket
 * with a generous bound that only matters when the test fails - nothing sleeps.
 *
 * Covered: handshake both ways, stats arriving, ping/pong, config/config_reply, a reclaim
 * answered at the floor, errors naming the field, wrong-direction messages, a host that
 * disconnects in the middle of a frame and comes back (the agent reconnects and resumes), a
 * host that sends garbage until the agent gives up on it, an oversize length prefix, a
 * version mismatch, hints through the local hint socket (pagemap translation of this
 * process's own memory; needs root for pfns, skipped otherwise), and a growth that begins
 * while a reclaim request runs (a scratch sys_root: the need goes before the reply).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

#define WAIT_MS 10000 /* failure bound for any single wait */

struct host {
	int fd;
	struct proto_reader rd;
};

struct run {
	struct agent *a;
	pthread_t th;
};

static void *agent_thread(void *arg)
{
	struct run *r = arg;

	agent_run(r->a, NULL);
	return NULL;
}

static void start_agent(struct run *r, const struct agent_config *cfg)
{
	assert_int_equal(agent_new(cfg, &r->a), 0);
	assert_int_equal(pthread_create(&r->th, NULL, agent_thread, r), 0);
}

static void stop_agent(struct run *r, struct agent_counters *c)
{
	agent_stop(r->a);
	pthread_join(r->th, NULL);
	if (c)
		agent_get_counters(r->a, c);
	agent_free(r->a);
}

static void base_config(struct agent_config *c, const char *tag)
{
	agent_config_defaults(c);
	c->report_interval_ms = 100;
	c->backoff_min_ms = 5;
	c->backoff_max_ms = 40;
	c->send_rate_per_s = 200;
	c->log_level = AGENT_WARN;
	snprintf(c->hint_socket, sizeof(c->hint_socket), "/tmp/memtide-test-hint-%d-%s.sock",
		 (int)getpid(), tag);
}

static void send_raw(struct host *h, const void *p, size_t n)
{
	assert_int_equal(send(h->fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_msg(struct host *h, struct proto_msg *m)
{
	uint8_t buf[PROTO_ENCODE_MAX_BYTES];
	size_t n;

	assert_int_equal(proto_encode(m, buf, sizeof(buf), &n, NULL), PROTO_OK);
	send_raw(h, buf, n);
}

/* Next message from the agent: 0, or -EPIPE at EOF, -ETIMEDOUT. */
static int recv_msg(struct host *h, struct proto_msg *m)
{
	memset(m, 0, sizeof(*m));
	for (;;) {
		struct pollfd p = {h->fd, POLLIN, 0};
		struct proto_error err;
		const char *json;
		size_t len;
		long n;
		int rc = proto_reader_next(&h->rd, &json, &len, &err);

		if (rc == 1) {
			enum proto_status s = proto_decode(json, len, m, &err);

			if (s != PROTO_OK)
				fail_msg("agent sent an invalid %s: %s", proto_status_name(s),
					 err.message);
			return 0;
		}
		assert_int_equal(rc, 0);
		if (poll(&p, 1, WAIT_MS) != 1)
			return -ETIMEDOUT;
		n = proto_reader_read_fd(&h->rd, h->fd);
		if (n == 0 || n == -ECONNRESET)
			return -EPIPE;
		assert_true(n > 0);
	}
}

/* Skip reports until a message of this type arrives. */
static void expect(struct host *h, enum proto_msg_type t, struct proto_msg *m)
{
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(recv_msg(h, m), 0);
		if (m->type == t)
			return;
		if (m->type != PROTO_MSG_STATS && m->type != PROTO_MSG_WSS)
			fail_msg("expected %s, got %s", proto_msg_type_name(t),
				 proto_msg_type_name(m->type));
	}
	fail_msg("no %s", proto_msg_type_name(t));
}

/* Read until the agent closes; the last message before EOF is returned in *last. */
static void expect_close(struct host *h, struct proto_msg *last)
{
	struct proto_msg m;
	int rc;

	last->type = 0;
	while ((rc = recv_msg(h, &m)) == 0)
		*last = m;
	assert_int_equal(rc, -EPIPE);
}

static void host_hello(struct host *h, uint32_t vmin, uint32_t vmax)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.id = 1;
	m.u.hello.role = PROTO_ROLE_HOST;
	m.u.hello.version_min = vmin;
	m.u.hello.version_max = vmax;
	strcpy(m.u.hello.software, "test-host");
	m.u.hello.caps = PROTO_CAP_HOST_RECLAIM | PROTO_CAP_HOST_HINT | PROTO_CAP_HOST_WSS;
	send_msg(h, &m);
}

/* Agent's hello, checked against this machine. */
static void handshake(struct host *h)
{
	struct proto_msg m;
	struct utsname u;

	memset(&u, 0, sizeof(u));
	assert_int_equal(recv_msg(h, &m), 0);
	assert_int_equal(m.type, PROTO_MSG_HELLO);
	assert_int_equal(m.u.hello.role, PROTO_ROLE_AGENT);
	assert_int_equal(uname(&u), 0);
	assert_string_equal(m.u.hello.kernel, u.release);
	assert_int_equal(m.u.hello.page_size_bytes, (uint32_t)sysconf(_SC_PAGESIZE));
	assert_true(m.u.hello.caps & PROTO_CAP_STATS);
	host_hello(h, 1, 1);
	/* stats start at once after the handshake */
	expect(h, PROTO_MSG_STATS, &m);
	assert_true(m.u.stats.mem_total_bytes > 0);
	assert_true(m.u.stats.mem_free_bytes <= m.u.stats.mem_total_bytes);
}

static void test_socketpair_session(void **state)
{
	struct agent_config cfg;
	struct agent_counters c;
	struct proto_msg m;
	struct host h;
	struct run r;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	base_config(&cfg, "sp");
	cfg.transport = AGENT_TR_FD;
	cfg.fd = (uint32_t)sv[1];
	cfg.floor_bytes = PROTO_BYTES_MAX; /* every reclaim stops at the floor: nothing freed */
	h.fd = sv[0];
	proto_reader_init(&h.rd);
	start_agent(&r, &cfg);
	handshake(&h);

	/* ping -> pong naming it */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	m.id = 42;
	m.u.ping.mono_ms = 1;
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_PONG, &m);
	assert_int_equal(m.u.pong.re, 42);

	/* config -> config_reply with the configuration in force */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_CONFIG;
	m.id = 43;
	m.u.config = (struct proto_config){250, 5000, PROTO_COLLECT_STATS, 2, {0, 1000}};
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_CONFIG_REPLY, &m);
	assert_int_equal(m.u.config_reply.re, 43);
	assert_int_equal(m.u.config_reply.config.report_interval_ms, 250);
	assert_int_equal(m.u.config_reply.config.collectors, PROTO_COLLECT_STATS);

	/* reclaim -> refused at the floor, honestly: nothing freed, no method run */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM;
	m.id = 44;
	m.u.reclaim = (struct proto_reclaim){16 << 20, PROTO_SCOPE_FILE, 1000, true};
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_RECLAIM_REPLY, &m);
	assert_int_equal(m.u.reclaim_reply.re, 44);
	assert_int_equal(m.u.reclaim_reply.result, PROTO_RECLAIM_FLOOR);
	assert_int_equal(m.u.reclaim_reply.nr_steps, 0);
	assert_int_equal(m.u.reclaim_reply.requested_bytes, 16 << 20);
	assert_int_equal(m.u.reclaim_reply.floor_bytes, PROTO_BYTES_MAX);
	assert_non_null(strstr(m.u.reclaim_reply.message, "floor"));

	/* an unknown field -> error naming it and the message id */
	{
		const char *bad = "{\"type\":\"ping\",\"id\":45,\"mono_ms\":1,\"evil\":true}";
		uint8_t f[128];
		uint32_t n = (uint32_t)strlen(bad);

		f[0] = 0, f[1] = 0, f[2] = (uint8_t)(n >> 8), f[3] = (uint8_t)n;
		memcpy(f + 4, bad, n);
		send_raw(&h, f, 4 + n);
	}
	expect(&h, PROTO_MSG_ERROR, &m);
	assert_int_equal(m.u.error.code, PROTO_E_UNKNOWN_FIELD);
	assert_string_equal(m.u.error.field, "evil");
	assert_int_equal(m.u.error.re, 45);
	assert_false(m.u.error.fatal);

	/* a message that goes the other way -> state error */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.id = 46;
	m.u.stats.mem_total_bytes = 1;
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_ERROR, &m);
	assert_int_equal(m.u.error.code, PROTO_E_STATE);
	assert_int_equal(m.u.error.re, 46);

	/* the session still works */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	m.id = 47;
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_PONG, &m);
	assert_int_equal(m.u.pong.re, 47);

	close(h.fd);
	proto_reader_free(&h.rd);
	stop_agent(&r, &c);
	assert_int_equal(c.connects, 1);
	assert_int_equal(c.rejected, 2);
	assert_int_equal(c.reclaims, 1);
	assert_true(c.stats_sent >= 1);
}

/* A listening unix socket for the agent to connect to. */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	unlink(path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void accept_host(int lfd, struct host *h)
{
	struct pollfd p = {lfd, POLLIN, 0};

	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	h->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(h->fd >= 0);
	proto_reader_init(&h->rd);
}

static void drop_host(struct host *h)
{
	close(h->fd);
	proto_reader_free(&h->rd);
}

static void unix_config(struct agent_config *cfg, char *path, size_t cap, const char *tag)
{
	base_config(cfg, tag);
	snprintf(path, cap, "/tmp/memtide-test-host-%d-%s.sock", (int)getpid(), tag);
	cfg->transport = AGENT_TR_UNIX;
	snprintf(cfg->unix_path, sizeof(cfg->unix_path), "%s", path);
}

static void test_unix_reconnect_midframe(void **state)
{
	struct agent_config cfg;
	struct agent_counters c;
	struct proto_msg m;
	struct host h;
	struct run r;
	char path[108];
	int lfd;

	(void)state;
	unix_config(&cfg, path, sizeof(path), "mid");
	lfd = listen_unix(path);
	start_agent(&r, &cfg);

	accept_host(lfd, &h);
	handshake(&h);
	/* half a frame - the length says 200, 20 bytes follow - then the host goes away */
	{
		uint8_t part[24] = {0, 0, 0, 200, '{', '"', 't', 'y', 'p', 'e', '"', ':'};

		send_raw(&h, part, sizeof(part));
	}
	drop_host(&h);

	/* the agent comes back by itself, greets again and resumes its reports */
	accept_host(lfd, &h);
	handshake(&h);
	expect(&h, PROTO_MSG_STATS, &m);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	m.id = 9;
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_PONG, &m);
	assert_int_equal(m.u.pong.re, 9);

	/* and once more, this time the host leaves in the middle of its own hello */
	drop_host(&h);
	accept_host(lfd, &h);
	assert_int_equal(recv_msg(&h, &m), 0);
	assert_int_equal(m.type, PROTO_MSG_HELLO);
	{
		uint8_t part[6] = {0, 0, 0, 90, '{', '"'};

		send_raw(&h, part, sizeof(part));
	}
	drop_host(&h);
	accept_host(lfd, &h);
	handshake(&h);
	drop_host(&h);

	stop_agent(&r, &c);
	close(lfd);
	unlink(path);
	assert_int_equal(c.connects, 3);
	assert_true(c.disconnects >= 3);
}

static void test_garbage_budget(void **state)
{
	struct agent_config cfg;
	struct agent_counters c;
	struct proto_msg m;
	struct host h;
	struct run r;
	char path[108];
	int lfd, errors = 0;
	const char *junk = "{\"type\":\"nonsense\",\"id\":1}";
	uint8_t f[64];
	uint32_t n = (uint32_t)strlen(junk);

	(void)state;
	unix_config(&cfg, path, sizeof(path), "junk");
	lfd = listen_unix(path);
	start_agent(&r, &cfg);
	accept_host(lfd, &h);
	handshake(&h);

	f[0] = 0, f[1] = 0, f[2] = 0, f[3] = (uint8_t)n;
	memcpy(f + 4, junk, n);
	for (int i = 0; i < PROTO_BUDGET_POINTS + 1; i++)
		send_raw(&h, f, 4 + n);
	/* ten errors answered, the eleventh fatal, then the agent hangs up */
	for (;;) {
		int rc = recv_msg(&h, &m);

		if (rc == -EPIPE)
			break;
		assert_int_equal(rc, 0);
		if (m.type != PROTO_MSG_ERROR)
			continue;
		assert_int_equal(m.u.error.code, PROTO_E_UNKNOWN_TYPE);
		assert_string_equal(m.u.error.field, "type");
		errors++;
		assert_int_equal(m.u.error.fatal, errors == PROTO_BUDGET_POINTS + 1);
	}
	assert_int_equal(errors, PROTO_BUDGET_POINTS + 1);
	drop_host(&h);

	/* it reconnects: an oversize length prefix is fatal at once */
	accept_host(lfd, &h);
	handshake(&h);
	{
		uint8_t big[4] = {0xff, 0xff, 0xff, 0xff};

		send_raw(&h, big, 4);
	}
	expect_close(&h, &m);
	assert_int_equal(m.type, PROTO_MSG_ERROR);
	assert_int_equal(m.u.error.code, PROTO_E_FRAME_TOO_LARGE);
	assert_true(m.u.error.fatal);
	drop_host(&h);

	/* and again: a host that speaks no common version is told so and left */
	accept_host(lfd, &h);
	assert_int_equal(recv_msg(&h, &m), 0);
	assert_int_equal(m.type, PROTO_MSG_HELLO);
	host_hello(&h, 7, 9);
	expect_close(&h, &m);
	assert_int_equal(m.type, PROTO_MSG_ERROR);
	assert_int_equal(m.u.error.code, PROTO_E_VERSION);
	assert_true(m.u.error.fatal);
	drop_host(&h);

	/* still alive */
	accept_host(lfd, &h);
	handshake(&h);
	drop_host(&h);
	stop_agent(&r, &c);
	close(lfd);
	unlink(path);
	assert_int_equal(c.connects, 3);
}

static void test_hints(void **state)
{
	struct agent_config cfg;
	struct agent_counters c;
	struct proto_msg m;
	struct host h;
	struct run r;
	char path[108], line[128], reply[AGENT_HINT_LINE_MAX];
	size_t len = 2 << 20;
	uint8_t *buf;
	int lfd, rc;
	bool trunc;

	(void)state;
	unix_config(&cfg, path, sizeof(path), "hint");
	lfd = listen_unix(path);
	start_agent(&r, &cfg);
	accept_host(lfd, &h);
	handshake(&h);

	/* a need from root (this test runs as root where hot/cold can run at all) */
	rc = agent_hint_client(cfg.hint_socket, "need 1048576 3000", reply, sizeof(reply));
	assert_int_equal(rc, 0);
	assert_string_equal(reply, "ok 0");
	expect(&h, PROTO_MSG_HINT, &m);
	assert_int_equal(m.u.hint.kind, PROTO_HINT_NEED);
	assert_int_equal(m.u.hint.need_bytes, 1048576);
	assert_int_equal(m.u.hint.within_ms, 3000);
	assert_int_equal(m.u.hint.pid, (uint32_t)getpid());

	/* a bad request is answered, not forwarded */
	rc = agent_hint_client(cfg.hint_socket, "lukewarm 1 2", reply, sizeof(reply));
	assert_int_equal(rc, 1);
	assert_non_null(strstr(reply, "unknown request"));

	/* cold: 2 MiB of this process's memory, touched so that it is resident */
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	memset(buf, 0x5a, len);
	{
		struct proto_range probe[4];

		if (agent_pagemap_ranges(&cfg, getpid(), (uintptr_t)buf, 4096, probe, 4, &trunc) ==
		    -EPERM) {
			printf("# SKIP hot/cold hints: pagemap pfns read as 0 (not root)\n");
			goto out;
		}
	}
	snprintf(line, sizeof(line), "cold 0x%lx %zu", (unsigned long)(uintptr_t)buf, len);
	rc = agent_hint_client(cfg.hint_socket, line, reply, sizeof(reply));
	assert_int_equal(rc, 0);
	{
		/* every resident page, once, in as many hint messages as it takes (256 ranges
		 * each); the reply counts them */
		uint64_t total = 0;
		uint32_t ranges = 0, msgs = 0;
		char want[32];

		while (total < len) {
			expect(&h, PROTO_MSG_HINT, &m);
			assert_int_equal(m.u.hint.kind, PROTO_HINT_COLD);
			assert_int_equal(m.u.hint.pid, (uint32_t)getpid());
			assert_false(m.u.hint.truncated);
			for (uint32_t i = 0; i < m.u.hint.nr_ranges; i++)
				total += m.u.hint.ranges[i].bytes;
			ranges += m.u.hint.nr_ranges;
			msgs++;
		}
		assert_int_equal(total, len);
		snprintf(want, sizeof(want), "ok %u", ranges);
		assert_string_equal(reply, want);
		printf("# 2 MiB cold hint -> %u guest-physical range(s) in %u message(s)\n", ranges,
		       msgs);
	}
out:
	munmap(buf, len);
	drop_host(&h);
	stop_agent(&r, &c);
	close(lfd);
	unlink(path);
	assert_true(c.hints_sent >= 1);
}

/* ---- the hint socket seen from an unprivileged user ----------------------------------------
 * A child process drops to uid 65534 (nobody) and uses the socket the way any user in the
 * guest can; it writes one line per step to a pipe ("step rc reply").  Needs root to drop
 * privileges (skipped otherwise, saying so). */

static void child_say(int out, const char *step, int rc, const char *reply)
{
	char line[AGENT_HINT_LINE_MAX + 64];
	int n = snprintf(line, sizeof(line), "%s %d %s\n", step, rc, reply);

	if (write(out, line, (size_t)n) != n)
		_exit(3);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		_exit(4);
	return fd;
}

/* Read one reply line from a raw connection (the agent answers, then closes). */
static void raw_reply(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	struct pollfd p = {fd, POLLIN, 0};

	while (got + 1 < cap && poll(&p, 1, WAIT_MS) == 1) {
		ssize_t k = read(fd, buf + got, cap - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		if (memchr(buf, '\n', got))
			break;
	}
	buf[got] = '\0';
	if (got && buf[got - 1] == '\n')
		buf[got - 1] = '\0';
}

static void nobody_child(const char *sock, int out, uint8_t *shared, size_t shared_len)
{
	char reply[AGENT_HINT_LINE_MAX], line[128];
	size_t len = 16 * 4096;
	uint8_t *own;
	int rc, c1, c2, c3;

	if (setgid(65534) < 0 || setuid(65534) < 0)
		_exit(2);
	/* 1: need is root's */
	rc = agent_hint_client(sock, "need 1048576 1000", reply, sizeof(reply));
	child_say(out, "need", rc, reply);
	/* 2: its own memory, allocated after fork, so mapped by it alone */
	own = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (own == MAP_FAILED)
		_exit(5);
	memset(own, 1, len);
	snprintf(line, sizeof(line), "cold %p %zu", (void *)own, len);
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	child_say(out, "own", rc, reply);
	/* 3: memory it shares with its parent: not its alone (fork does not copy a shared
	 * mapping's page tables: read each page so that it is mapped here too) */
	{
		volatile uint8_t sum = 0;

		for (size_t i = 0; i < shared_len; i += 4096)
			sum += shared[i];
		(void)sum;
	}
	snprintf(line, sizeof(line), "cold %p %zu", (void *)shared, shared_len);
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	child_say(out, "shared", rc, reply);
	/* 4: another user's process */
	rc = agent_hint_client(sock, "hot 0x1000 4096 1", reply, sizeof(reply));
	child_say(out, "pid1", rc, reply);
	/* 5-7: its rate (0.1/s in this test, burst 3: one spent in step 2) */
	snprintf(line, sizeof(line), "hot %p %zu", (void *)own, len);
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	child_say(out, "rate1", rc, reply);
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	child_say(out, "rate2", rc, reply);
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	child_say(out, "rate3", rc, reply);
	/* 8: two idle connections are its share; a third is refused at once */
	c1 = raw_connect(sock);
	c2 = raw_connect(sock);
	c3 = raw_connect(sock);
	raw_reply(c3, reply, sizeof(reply));
	child_say(out, "third", 0, reply);
	/* 9: an idle connection is closed when its line is overdue */
	raw_reply(c1, reply, sizeof(reply));
	child_say(out, "idle", 0, reply);
	close(c1);
	close(c2);
	close(c3);
	_exit(0);
}

static void test_hint_socket_users(void **state)
{
	struct agent_config cfg;
	struct agent_counters c;
	struct proto_msg m;
	struct host h;
	struct run r;
	char path[108], results[4096], reply[AGENT_HINT_LINE_MAX];
	size_t shared_len = 8 * 4096, got = 0;
	uint8_t *shared;
	int lfd, pfd[2], status;
	pid_t child;

	(void)state;
	if (geteuid() != 0) {
		printf("# not root: cannot play an unprivileged user (test_agent_hint covers the "
		       "rules without sockets)\n");
		return;
	}
	unix_config(&cfg, path, sizeof(path), "users");
	cfg.hint_user_rate_per_s = 0.1;
	lfd = listen_unix(path);
	start_agent(&r, &cfg);
	accept_host(lfd, &h);
	handshake(&h);
	{
		/* the socket is for every user, and only its rules say what they may do */
		struct stat st;
		assert_int_equal(stat(cfg.hint_socket, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0666);
	}
	shared = mmap(NULL, shared_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shared != MAP_FAILED);
	memset(shared, 7, shared_len);
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(pfd[0]);
		nobody_child(cfg.hint_socket, pfd[1], shared, shared_len);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		ssize_t k;

		assert_int_equal(poll(&p, 1, 3 * WAIT_MS), 1);
		k = read(pfd[0], results + got, sizeof(results) - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	results[got] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(child, &status, 0), child);
	printf("%s", results);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	assert_non_null(strstr(results, "need 1 error need is for root"));
	assert_non_null(strstr(results, "own 0 ok "));
	assert_non_null(strstr(results, "shared 1 error no pages of your own"));
	assert_non_null(strstr(results, "pid1 1 error pid 1 is not yours"));
	assert_non_null(strstr(results, "rate1 0 ok"));
	assert_non_null(strstr(results, "rate2 0 ok"));
	assert_non_null(strstr(results, "rate3 1 error rate limit"));
	assert_non_null(strstr(results, "third 0 error busy: too many connections of this user"));
	assert_non_null(strstr(results, "idle 0 error no request line within 2000 ms"));

	/* what reached the host: the user's three hints, each about its own pid */
	for (int i = 0; i < 3; i++) {
		expect(&h, PROTO_MSG_HINT, &m);
		assert_int_equal(m.u.hint.pid, (uint32_t)child);
		assert_true(m.u.hint.nr_ranges >= 1);
	}
	/* and root, right after the user ran out, is still heard */
	assert_int_equal(
	    agent_hint_client(cfg.hint_socket, "need 1048576 1000", reply, sizeof(reply)), 0);
	expect(&h, PROTO_MSG_HINT, &m);
	assert_int_equal(m.u.hint.kind, PROTO_HINT_NEED);
	assert_int_equal(m.u.hint.pid, (uint32_t)getpid());

	munmap(shared, shared_len);
	drop_host(&h);
	stop_agent(&r, &c);
	close(lfd);
	unlink(path);
}

/* The real program: the memtide-agent binary (static, as a guest runs it) started as a
 * child process, connecting to this test host over a unix socket. */
static void test_binary_over_unix(void **state)
{
	const char *bin = getenv("MEMTIDE_BIN");
	char exe[512], path[108], arg_path[160];
	struct proto_msg m;
	struct host h;
	pid_t pid;
	int lfd, status;

	(void)state;
	snprintf(exe, sizeof(exe), "%s/memtide-agent", bin ? bin : "build/bin");
	if (access(exe, X_OK) != 0)
		fail_msg("%s not built", exe);
	snprintf(path, sizeof(path), "/tmp/memtide-test-host-%d-bin.sock", (int)getpid());
	snprintf(arg_path, sizeof(arg_path), "--unix-path=%s", path);
	lfd = listen_unix(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(exe, exe, "--transport=unix", arg_path,
		      "--hint-socket=", "--report-interval-ms=100", "--log-level=1", (char *)NULL);
		_exit(127);
	}
	accept_host(lfd, &h);
	handshake(&h);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	m.id = 77;
	send_msg(&h, &m);
	expect(&h, PROTO_MSG_PONG, &m);
	assert_int_equal(m.u.pong.re, 77);
	/* a second report interval brings a second stats */
	expect(&h, PROTO_MSG_STATS, &m);
	assert_true(m.u.stats.mem_total_bytes > 0);
	/* SIGTERM: it leaves cleanly (exit 0) */
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	drop_host(&h);
	close(lfd);
	unlink(path);
}

/* A scratch guest's files for the agent's sys_root. */
static void put_file(const char *dir, const char *rel, const char *text)
{
	char path[256], tmp[270];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", dir, rel);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0); /* whole, as /proc is read */
}

static void put_meminfo(const char *dir, unsigned free_mib, unsigned avail_mib)
{
	char text[256];

	snprintf(text, sizeof(text),
		 "MemTotal:        1048576 kB\nMemFree:          %u kB\n"
		 "MemAvailable:     %u kB\nBuffers:            1024 kB\n",
		 free_mib * 1024, avail_mib * 1024);
	put_file(dir, "/proc/meminfo", text);
}

/* While a reclaim request runs, the guest starts to grow: the need must reach the host
 * before the request ends, not after it (agent_loop.c, on_reclaim).  The guest is a scratch
 * sys_root whose memory.reclaim is a FIFO kept full, so the agent's first write to it
 * blocks, as a write into a guest that reclaims slowly does, until this test drains it;
 * inotify says when the agent has opened it (it is then inside the request).  The growth,
 * 10 MiB in a guest with 60 MiB available, is fast enough for a need and under the growth
 * guard's 16 MiB stop (agent_reclaim_guard.c), so only the watcher can answer it.  With the
 * growth watch on the loop's thread alone, the need would come after the reply. */
static void test_need_while_reclaiming(void **state)
{
	char dir[64], fifo[128], cmd[160], buf[65536];
	struct agent_config cfg;
	struct proto_msg m;
	struct host h;
	struct run r;
	int sv[2], rfd, wfd, ino;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memtide-link-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/proc %s/sys/fs/cgroup", dir, dir);
	assert_int_equal(system(cmd), 0);
	put_meminfo(dir, 40, 60);
	put_file(dir, "/proc/vmstat", "nr_free_pages 10240\npgmajfault 12\n");
	put_file(dir, "/proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
	snprintf(fifo, sizeof(fifo), "%s/sys/fs/cgroup/memory.reclaim", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(rfd >= 0);
	wfd = open(fifo, O_WRONLY | O_NONBLOCK);
	assert_true(wfd >= 0);
	memset(buf, 'x', sizeof(buf));
	while (write(wfd, buf, sizeof(buf)) > 0 || errno != EAGAIN)
		;
	close(wfd);
	ino = inotify_init1(IN_CLOEXEC);
	assert_true(ino >= 0);
	assert_true(inotify_add_watch(ino, fifo, IN_OPEN) >= 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	base_config(&cfg, "rw");
	cfg.transport = AGENT_TR_FD;
	cfg.fd = (uint32_t)sv[1];
	snprintf(cfg.sys_root, sizeof(cfg.sys_root), "%s", dir);
	cfg.floor_bytes = 1 << 20;
	cfg.floor_percent = 0;
	h.fd = sv[0];
	proto_reader_init(&h.rd);
	start_agent(&r, &cfg);
	handshake(&h);

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM;
	m.id = 50;
	m.u.reclaim = (struct proto_reclaim){32 << 20, PROTO_SCOPE_ANY, 20000, false};
	send_msg(&h, &m);
	struct pollfd p = {ino, POLLIN, 0};
	assert_int_equal(poll(&p, 1, WAIT_MS), 1); /* the agent opened memory.reclaim */
	put_meminfo(dir, 30, 50);                  /* 10 MiB more in use */

	expect(&h, PROTO_MSG_HINT, &m);
	assert_int_equal(m.u.hint.kind, PROTO_HINT_NEED);
	assert_true(m.u.hint.need_bytes > 50ULL << 20);

	/* let the request finish: later writes go to a plain file, the guest frees 40 MiB,
	 * and the blocked write ends as the FIFO drains */
	assert_int_equal(unlink(fifo), 0);
	put_file(dir, "/sys/fs/cgroup/memory.reclaim", "");
	put_meminfo(dir, 80, 100);
	while (read(rfd, buf, sizeof(buf)) > 0)
		;
	expect(&h, PROTO_MSG_RECLAIM_REPLY, &m);
	assert_int_equal(m.u.reclaim_reply.re, 50);
	assert_int_equal(m.u.reclaim_reply.result, PROTO_RECLAIM_DONE);

	stop_agent(&r, NULL);
	close(sv[0]);
	proto_reader_free(&h.rd);
	close(rfd);
	close(ino);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_socketpair_session),
	    cmocka_unit_test(test_unix_reconnect_midframe),
	    cmocka_unit_test(test_garbage_budget),
	    cmocka_unit_test(test_hints),
	    cmocka_unit_test(test_hint_socket_users),
	    cmocka_unit_test(test_binary_over_unix),
	    cmocka_unit_test(test_need_while_reclaiming),
	};

	agent_log_init(AGENT_WARN, "memtide-agent(test)");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
