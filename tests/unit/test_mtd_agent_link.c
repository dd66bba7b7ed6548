// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_agent_link.c - the host side of the agent protocol (host/act/agent_link.c) against a
 * scripted peer playing the guest agent over a real unix socket.
 *
 * The peer speaks through proto's own encoder (valid frames) or writes raw bytes (hostile
 * frames).  Checked: the handshake (our hello and config arrive, the agent's hello makes the
 * link ready), stats and need reach the link, a reclaim request goes out once at a time,
 * garbage frames disconnect the peer within the error budget, an oversized length prefix
 * disconnects at once, and the link reconnects after its backoff.  Streams from an fd
 * source (the vsock back end's socketpairs) replace a virtio-serial session and each other;
 * a link with no socket waits for its source with no deadline; pings go out once per
 * interval, one at a time, and their pongs give round-trip percentiles.  An agent that says
 * more than its VM can have has its figures clamped on arrival and is marked untrusted, for
 * its session.  No sleeps: the link
 * is non-blocking and unix-socket bytes are readable as soon as the peer's write returns.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "access/source.h"
#include "act/agent_bounds.h"
#include "act/agent_link.h"
#include "agent.h"
#include "vmm.h"

static char sock_path[108];
static int listen_fd = -1;

static void make_listener(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sock_path, sizeof(sock_path), "/tmp/mtd-agent-link-%d.sock", (int)getpid());
	unlink(sock_path);
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(listen_fd >= 0);
	assert_int_equal(bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(listen_fd, 4), 0);
}

static int accept_peer(void)
{
	struct pollfd p = {.fd = listen_fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 2000), 1);
	int fd = accept(listen_fd, NULL, NULL);
	assert_true(fd >= 0);
	return fd;
}

/* Read one frame from the host (blocking, bounded by a poll timeout). */
static void peer_read(int fd, struct proto_msg *m)
{
	uint8_t hdr[4];
	static char buf[PROTO_FRAME_MAX_BYTES];
	struct proto_error e;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(recv(fd, hdr, 4, MSG_WAITALL), 4);
	uint32_t len =
	    ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) | ((uint32_t)hdr[2] << 8) | hdr[3];
	assert_true(len > 0 && len <= sizeof(buf));
	assert_int_equal(recv(fd, buf, len, MSG_WAITALL), (ssize_t)len);
	assert_int_equal(proto_decode(buf, len, m, &e), PROTO_OK);
}

static void peer_send(int fd, struct proto_msg *m)
{
	static uint8_t buf[PROTO_ENCODE_MAX_BYTES];
	static uint32_t id;
	size_t n;
	struct proto_error e;

	m->id = ++id;
	assert_int_equal(proto_encode(m, buf, sizeof(buf), &n, &e), PROTO_OK);
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* A bare stats report: the agent is there. */
static void peer_send_stats(int fd)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.u.stats.mem_total_bytes = 512u << 20;
	peer_send(fd, &m);
}

static void peer_raw(int fd, const char *json)
{
	uint32_t len = htonl((uint32_t)strlen(json));
	assert_int_equal(send(fd, &len, 4, MSG_NOSIGNAL), 4);
	assert_int_equal(send(fd, json, strlen(json), MSG_NOSIGNAL), (ssize_t)strlen(json));
}

static void agent_hello(int fd)
{
	struct proto_msg m;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.u.hello.role = PROTO_ROLE_AGENT;
	m.u.hello.version_min = 1;
	m.u.hello.version_max = 1;
	snprintf(m.u.hello.software, sizeof(m.u.hello.software), "test-agent 1");
	snprintf(m.u.hello.kernel, sizeof(m.u.hello.kernel), "6.1.0-test");
	m.u.hello.page_size_bytes = 4096;
	m.u.hello.caps = PROTO_CAP_STATS | PROTO_CAP_WSS | PROTO_CAP_HINT;
	peer_send(fd, &m);
}

/* Connect the link and finish the handshake; returns the peer's fd. */
static int handshake(struct mtd_agent_link *l, uint64_t *now)
{
	struct proto_msg m;

	mtd_agent_link_service(l, *now);
	int fd = accept_peer();
	mtd_agent_link_service(l, *now); /* flush */
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_HELLO);
	assert_int_equal(m.u.hello.role, PROTO_ROLE_HOST);
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_CONFIG);
	assert_int_equal(m.u.config.report_interval_ms, 1000);
	assert_int_equal(m.u.config.wss_bins_ms[0], 0);
	assert_int_equal(m.u.config.wss_bins_ms[1], 500);
	assert_int_equal(m.u.config.wss_bins_ms[2], 1500);
	assert_false(mtd_agent_link_ready(l));
	agent_hello(fd);
	mtd_agent_link_service(l, *now);
	assert_true(mtd_agent_link_ready(l));
	return fd;
}

static void test_handshake_stats_need_reclaim(void **state)
{
	struct mtd_agent_link *l;
	struct proto_msg m;
	uint64_t now = 1000, seq;
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	int fd = handshake(l, &now);
	assert_string_equal(mtd_agent_link_hello(l)->kernel, "6.1.0-test");

	/* Messages before the handshake would be refused; after it, stats land. */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.u.stats.mem_total_bytes = 512u << 20;
	m.u.stats.mem_free_bytes = 100u << 20;
	m.u.stats.mem_available_bytes = 300u << 20;
	m.u.stats.has_psi = true;
	m.u.stats.psi.some_avg10 = 12.5;
	peer_send(fd, &m);
	now += 10;
	mtd_agent_link_service(l, now);
	const struct proto_stats *st = mtd_agent_link_stats(l, &seq);
	assert_non_null(st);
	assert_int_equal(seq, 1);
	assert_int_equal(st->mem_available_bytes, 300u << 20);
	assert_int_equal(mtd_agent_link_last_heard(l), now);

	/* Two needs add up; taking them clears the sum. */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HINT;
	m.u.hint.kind = PROTO_HINT_NEED;
	m.u.hint.pid = 1;
	m.u.hint.need_bytes = 64u << 20;
	peer_send(fd, &m);
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	assert_int_equal(mtd_agent_link_take_need(l), 128u << 20);
	assert_int_equal(mtd_agent_link_take_need(l), 0);

	/* One reclaim in flight at a time; the reply closes it. */
	assert_int_equal(mtd_agent_link_reclaim(l, 32u << 20, true, 1000, now), 0);
	assert_int_equal(mtd_agent_link_reclaim(l, 32u << 20, true, 1000, now), -EBUSY);
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_RECLAIM);
	assert_int_equal(m.u.reclaim.bytes, 32u << 20);
	uint32_t rid = m.id;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM_REPLY;
	m.u.reclaim_reply.re = rid;
	m.u.reclaim_reply.result = PROTO_RECLAIM_PARTIAL;
	m.u.reclaim_reply.requested_bytes = 32u << 20;
	m.u.reclaim_reply.freed_bytes = 20u << 20;
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	const struct proto_reclaim_reply *rr = mtd_agent_link_reclaim_reply(l, &seq);
	assert_non_null(rr);
	assert_int_equal(rr->freed_bytes, 20u << 20);
	/* the reply comes with the deadline its request was given (a slow guest's partial
	 * answer is told from a futile one by it: decide/steady.h) */
	assert_int_equal(mtd_agent_link_reply_deadline(l), 1000);
	assert_int_equal(mtd_agent_link_reclaim(l, 1u << 20, false, 1700, now), 0);
	/* a request in flight does not change the deadline of the reply in hand */
	assert_int_equal(mtd_agent_link_reply_deadline(l), 1000);

	/* A reply after the deadline (+5 s grace) was given up on is still taken: the guest's
	 * measured answer, late; a second copy answers nothing and changes nothing. */
	peer_read(fd, &m);
	rid = m.id;
	now += 1700 + 5001;
	mtd_agent_link_service(l, now);
	/* nothing heard from the agent since the late request: it is stuck or gone, and is
	 * not asked again (asking would keep it "reclaiming", its silence unsaid); a stats
	 * report says it is there */
	assert_int_equal(mtd_agent_link_reclaim(l, 1u << 20, false, 1000, now), -EBUSY);
	peer_send_stats(fd);
	now += 1;
	mtd_agent_link_service(l, now);
	assert_int_equal(mtd_agent_link_reclaim(l, 1u << 20, false, 1000, now), 0);
	peer_read(fd, &m);
	uint32_t rid3 = m.id;
	/* a newer request went out while the agent was still busy with the late one (its
	 * ticker's report let memtided ask again): the late one's reply is still taken, with
	 * its own deadline, not refused as a protocol error (on the KVM host stand a slow
	 * guest's honest answers were), and the newer request stays open */
	struct mtd_agent_link_counters c0, c1;
	mtd_agent_link_counters(l, &c0);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM_REPLY;
	m.u.reclaim_reply.re = rid;
	m.u.reclaim_reply.result = PROTO_RECLAIM_PARTIAL;
	m.u.reclaim_reply.requested_bytes = 1u << 20;
	m.u.reclaim_reply.freed_bytes = 1u << 19;
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	rr = mtd_agent_link_reclaim_reply(l, &seq);
	assert_int_equal(seq, 2);
	assert_int_equal(rr->freed_bytes, 1u << 19);
	assert_int_equal(mtd_agent_link_reply_deadline(l), 1700);
	mtd_agent_link_counters(l, &c1);
	assert_int_equal(c1.rejected, c0.rejected);
	assert_int_equal(mtd_agent_link_reclaim(l, 1u << 20, false, 1000, now), -EBUSY);
	/* a second copy answers nothing now: refused */
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	(void)mtd_agent_link_reclaim_reply(l, &seq);
	assert_int_equal(seq, 2);
	mtd_agent_link_counters(l, &c1);
	assert_int_equal(c1.rejected, c0.rejected + 1);
	m.u.reclaim_reply.result = PROTO_RECLAIM_DONE;
	m.u.reclaim_reply.freed_bytes = 1u << 20;
	/* the newer one times out, then its reply comes: taken; until then the agent counts as
	 * busy reclaiming for us (not silent) until the caller's silence after its deadline
	 * (1000 ms) has passed */
	now += 1000 + 5001;
	mtd_agent_link_service(l, now);
	assert_true(mtd_agent_link_reclaiming(l, now, 60000));
	assert_true(mtd_agent_link_reclaiming(l, now, 5001));
	assert_false(mtd_agent_link_reclaiming(l, now, 5000));
	m.u.reclaim_reply.re = rid3;
	m.u.reclaim_reply.freed_bytes = 3u << 20;
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	rr = mtd_agent_link_reclaim_reply(l, &seq);
	assert_int_equal(seq, 3);
	assert_int_equal(rr->freed_bytes, 3u << 20);
	assert_int_equal(mtd_agent_link_reply_deadline(l), 1000); /* late: its own deadline */
	assert_false(mtd_agent_link_reclaiming(l, now, 60000));
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	(void)mtd_agent_link_reclaim_reply(l, &seq);
	assert_int_equal(seq, 3);

	/* An agent last heard 14 s before a request (killed, not busy): the request excuses its
	 * deadline and the 5 s before a reply is late, on top of the silence it already had,
	 * not a whole silence after the deadline (CI, scenario 5: called silent 45 s after the
	 * kill, the request having gone 14 s after it). */
	peer_send_stats(fd);
	now += 1;
	mtd_agent_link_service(l, now);
	uint64_t heard = mtd_agent_link_last_heard(l);
	assert_int_equal(heard, now);
	now += 14000;
	assert_int_equal(mtd_agent_link_reclaim(l, 1u << 20, false, 1000, now), 0);
	assert_true(mtd_agent_link_reclaiming(l, heard + 30000 + 1000 + 5000, 30000));
	assert_false(mtd_agent_link_reclaiming(l, heard + 30000 + 1000 + 5001, 30000));

	close(fd);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

/* A guest that stays busy with one request past several deadlines: its ticker reports, so
 * memtided asks again each time the last request is given up on, and the agent, answering in
 * order, replies to all of them late.  Every reply is taken, once, with none refused as a
 * protocol error (on the KVM host stand three requests went late in a row and the older
 * replies were refused, against the agent's error budget). */
static void test_late_replies_in_a_chain(void **state)
{
	struct mtd_agent_link *l;
	struct mtd_agent_link_counters c0, c1;
	struct proto_msg m;
	uint64_t now = 1000, seq;
	uint32_t id[3];
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	int fd = handshake(l, &now);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(mtd_agent_link_reclaim(l, 8u << 20, true, 2000, now), 0);
		peer_read(fd, &m);
		id[i] = m.id;
		now += 2000 + 5001;
		mtd_agent_link_service(l, now); /* given up on */
		assert_true(mtd_agent_link_reclaiming(l, now, 30000));
		peer_send_stats(fd); /* the busy agent's ticker */
		now += 1;
		mtd_agent_link_service(l, now);
	}
	mtd_agent_link_counters(l, &c0);
	for (int i = 0; i < 3; i++) {
		memset(&m, 0, sizeof(m));
		m.type = PROTO_MSG_RECLAIM_REPLY;
		m.u.reclaim_reply.re = id[i];
		m.u.reclaim_reply.result = PROTO_RECLAIM_PARTIAL;
		m.u.reclaim_reply.requested_bytes = 8u << 20;
		m.u.reclaim_reply.freed_bytes = (uint64_t)(i + 1) << 20;
		m.u.reclaim_reply.elapsed_ms = 7000;
		peer_send(fd, &m);
		mtd_agent_link_service(l, now);
		const struct proto_reclaim_reply *rr = mtd_agent_link_reclaim_reply(l, &seq);
		assert_int_equal(seq, i + 1);
		assert_int_equal(rr->freed_bytes, (uint64_t)(i + 1) << 20);
		assert_int_equal(mtd_agent_link_reply_deadline(l), 2000);
	}
	mtd_agent_link_counters(l, &c1);
	assert_int_equal(c1.rejected, c0.rejected);
	assert_false(mtd_agent_link_reclaiming(l, now, 30000));
	/* the last again: answers nothing now */
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	(void)mtd_agent_link_reclaim_reply(l, &seq);
	assert_int_equal(seq, 3);
	mtd_agent_link_counters(l, &c1);
	assert_int_equal(c1.rejected, c0.rejected + 1);
	close(fd);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

static void test_garbage_disconnects_then_reconnects(void **state)
{
	struct mtd_agent_link *l;
	struct mtd_agent_link_counters c;
	uint64_t now = 1000;
	char b;
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	int fd = handshake(l, &now);

	/* Frame-level garbage: answered with errors until the budget runs out. */
	int sent = 0;
	while (mtd_agent_link_ready(l) && sent < 50) {
		peer_raw(fd, sent % 2 ? "{\"type\":\"stats\",\"id\":1,\"mem_total_bytes\":-5}"
				      : "this is not json");
		sent++;
		mtd_agent_link_service(l, now);
	}
	assert_false(mtd_agent_link_ready(l));
	assert_true(sent <= PROTO_BUDGET_POINTS + 2);
	assert_int_equal(mtd_agent_link_fd(l), -1);
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.disconnects, 1);
	assert_true(c.rejected >= PROTO_BUDGET_POINTS);
	/* The peer sees the close (after the error frames). */
	for (;;) {
		ssize_t n = recv(fd, &b, 1, 0);
		if (n <= 0)
			break;
	}
	close(fd);

	/* Not before the backoff deadline; then it connects again. */
	uint64_t due = mtd_agent_link_deadline(l);
	assert_true(due > now && due <= now + 1000);
	mtd_agent_link_service(l, due - 1);
	assert_int_equal(mtd_agent_link_fd(l), -1);
	now = due;
	fd = handshake(l, &now);

	/* A length prefix over the bound breaks the stream at once. */
	uint32_t huge = htonl(PROTO_FRAME_MAX_BYTES + 1);
	assert_int_equal(send(fd, &huge, 4, MSG_NOSIGNAL), 4);
	mtd_agent_link_service(l, now);
	assert_false(mtd_agent_link_ready(l));
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.connects, 2);
	assert_int_equal(c.disconnects, 2);
	close(fd);

	/* A host-to-agent message from the agent is refused, the link stays up. */
	now = mtd_agent_link_deadline(l);
	fd = handshake(l, &now);
	peer_raw(fd, "{\"type\":\"reclaim\",\"id\":9,\"bytes\":4096,\"scope\":\"file\","
		     "\"deadline_ms\":10,\"compact\":false}");
	mtd_agent_link_service(l, now);
	assert_true(mtd_agent_link_ready(l));
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.disconnects, 2);

	close(fd);
	mtd_agent_link_service(l, now + 1); /* sees EOF */
	assert_false(mtd_agent_link_ready(l));
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

/* A restarted agent on virtio-serial: the host end of the port never closed, so the new
 * agent's hello arrives on the connection the old one used.  The link answers with its hello
 * and config again and stays ready; the old agent's reclaim in flight is forgotten.  Many
 * restarts in a row cost no error budget (53 rejections in 12 minutes were seen before). */
static void test_new_hello_rehandshakes(void **state)
{
	struct mtd_agent_link *l;
	struct mtd_agent_link_counters c;
	struct proto_msg m;
	uint64_t now = 1000;
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	int fd = handshake(l, &now);
	assert_int_equal(mtd_agent_link_reclaim(l, 32u << 20, true, 1000, now), 0);
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_RECLAIM);

	for (int round = 0; round < 3 * PROTO_BUDGET_POINTS; round++) {
		now += 100;
		agent_hello(fd); /* the new agent's first words */
		mtd_agent_link_service(l, now);
		assert_true(mtd_agent_link_ready(l));
		peer_read(fd, &m);
		assert_int_equal(m.type, PROTO_MSG_HELLO);
		assert_int_equal(m.u.hello.role, PROTO_ROLE_HOST);
		peer_read(fd, &m);
		assert_int_equal(m.type, PROTO_MSG_CONFIG);
		/* the old agent's reclaim will never be answered: a new one may go out */
		assert_int_equal(mtd_agent_link_reclaim(l, 16u << 20, true, 1000, now), 0);
		peer_read(fd, &m);
		assert_int_equal(m.type, PROTO_MSG_RECLAIM);
	}
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.rejected, 0);
	assert_int_equal(c.disconnects, 0);
	assert_true(c.rehellos >= 3 * PROTO_BUDGET_POINTS);

	/* A hello from the host's side (a peer that is not an agent) is still refused. */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.u.hello.role = PROTO_ROLE_HOST;
	m.u.hello.version_min = 1;
	m.u.hello.version_max = 1;
	snprintf(m.u.hello.software, sizeof(m.u.hello.software), "not-an-agent 1");
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.rejected, 1);

	close(fd);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

static void test_no_listener_backs_off(void **state)
{
	struct mtd_agent_link *l;
	(void)state;
	assert_int_equal(mtd_agent_link_new("/tmp/mtd-no-such-agent.sock", 1000, &l), 0);
	mtd_agent_link_service(l, 1000);
	assert_false(mtd_agent_link_ready(l));
	uint64_t d1 = mtd_agent_link_deadline(l);
	mtd_agent_link_service(l, d1);
	uint64_t d2 = mtd_agent_link_deadline(l);
	assert_true(d2 - d1 > d1 - 1000); /* the delay grows (jitter takes at most 25%) */
	assert_int_equal(mtd_agent_link_reclaim(l, 4096, false, 10, d1), -ENOTCONN);
	mtd_agent_link_free(l);
	char longpath[200];
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(mtd_agent_link_new(longpath, 1000, &l), -ENAMETOOLONG);
}

static int pending_fd = -1;

static int take_pending(void *ctx)
{
	int fd = pending_fd;

	assert_ptr_equal(ctx, &pending_fd);
	pending_fd = -1;
	return fd >= 0 ? fd : -EAGAIN;
}

/* The host side's hello and config on a fresh stream, then the agent's hello. */
static void stream_handshake(struct mtd_agent_link *l, int fd, uint64_t now)
{
	struct proto_msg m;

	mtd_agent_link_service(l, now);
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_HELLO);
	peer_read(fd, &m);
	assert_int_equal(m.type, PROTO_MSG_CONFIG);
	agent_hello(fd);
	mtd_agent_link_service(l, now);
	assert_true(mtd_agent_link_ready(l));
}

static void test_fd_source_replaces_and_pings(void **state)
{
	struct mtd_agent_link *l;
	struct mtd_agent_link_counters c;
	struct proto_msg m;
	uint64_t now = 1000, p50, p99;
	unsigned n;
	int sv[2];
	char b;
	(void)state;

	/* Up over virtio-serial first. */
	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	mtd_agent_link_set_fd_source(l, take_pending, &pending_fd, "vsock:test");
	int serial = handshake(l, &now);
	assert_string_equal(mtd_agent_link_transport(l), "virtio-serial");

	/* A vsock stream arrives: it replaces the serial session. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	pending_fd = sv[1];
	stream_handshake(l, sv[0], now);
	assert_string_equal(mtd_agent_link_transport(l), "vsock");
	assert_int_equal(recv(serial, &b, 1, MSG_DONTWAIT), 0); /* EOF on the old one */
	close(serial);

	/* Pings: one per interval, one at a time; pongs make round trips. */
	mtd_agent_link_set_ping(l, 100);
	assert_int_equal(mtd_agent_link_ping_due_back(l), 0);
	mtd_agent_link_service(l, now);
	peer_read(sv[0], &m);
	assert_int_equal(m.type, PROTO_MSG_PING);
	assert_int_equal(mtd_agent_link_ping_due_back(l), now + 50); /* the loop's tick waits */
	uint32_t pid = m.id;
	mtd_agent_link_service(l, now + 200); /* no second ping while one is out */
	struct pollfd pf = {.fd = sv[0], .events = POLLIN};
	assert_int_equal(poll(&pf, 1, 0), 0);
	assert_true(mtd_agent_link_deadline(l) <= now + 10000);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PONG;
	m.u.pong.re = pid + 1000; /* answers no ping: ignored */
	peer_send(sv[0], &m);
	m.u.pong.re = pid;
	peer_send(sv[0], &m);
	mtd_agent_link_service(l, now + 200);
	mtd_agent_link_rtt(l, &p50, &p99, &n);
	assert_int_equal(n, 1);
	assert_true(p50 > 0 && p50 == p99);
	/* The answer came later than one interval: the next ping goes at once. */
	peer_read(sv[0], &m);
	assert_int_equal(m.type, PROTO_MSG_PING);
	assert_int_equal(mtd_agent_link_deadline(l), now + 200 + 10000); /* its loss */
	mtd_agent_link_counters(l, &c);
	assert_int_equal(c.pings, 2);
	assert_int_equal(c.pongs, 1);

	/* A second vsock stream (the agent restarted) replaces the first. */
	int sv2[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv2), 0);
	pending_fd = sv2[1];
	stream_handshake(l, sv2[0], now + 400);
	assert_int_equal(recv(sv[0], &b, 1, MSG_DONTWAIT), 0);
	close(sv[0]);
	close(sv2[0]);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);

	/* A link with no socket: nothing to connect to, no deadline while down. */
	assert_int_equal(mtd_agent_link_new("", 1000, &l), 0);
	mtd_agent_link_set_fd_source(l, take_pending, &pending_fd, "vsock:x");
	mtd_agent_link_service(l, now);
	assert_int_equal(mtd_agent_link_fd(l), -1);
	assert_int_equal(mtd_agent_link_deadline(l), UINT64_MAX);
	assert_string_equal(mtd_agent_link_transport(l), "");
	mtd_agent_link_free(l);
}

/* The agent's MGLRU generations fall on whole intervals give or take the timer's jitter
 * (its idle ages read 3,980 and 4,036 ms on a real guest at 2 s).  With the edges memtided
 * asks for, the young bytes do not depend on which side of the interval a generation
 * lands; with edges on whole intervals (the old ones) they flipped, and 337 MiB of cold
 * data read young every other round. */
static void test_wss_edges_ignore_jitter(void **state)
{
	const uint64_t iv = 2000, hot = 51293, cold = 86301;
	uint64_t edges[PROTO_MAX_WSS_BINS], old_edges[6] = {0, 2000, 4000, 8000, 16000, 32000};
	unsigned n = mtd_agent_wss_edges(iv, edges);

	(void)state;
	assert_int_equal(n, 6);
	assert_int_equal(edges[0], 0);
	for (unsigned i = 1; i < n; i++)
		assert_true(edges[i] > edges[i - 1] && edges[i] % iv != 0);
	for (int j = -40; j <= 40; j += 20) {
		/* born now (empty), one interval ago (the hot set), two (a few pages), three
		 * (the cold data) */
		struct agent_gen g[4] = {
		    {1, 0, 15, 0, 0, 0},
		    {1, 0, 14, (uint64_t)((int64_t)iv + j), hot, 0},
		    {1, 0, 13, (uint64_t)((int64_t)(2 * iv) + j), 2, 0},
		    {1, 0, 12, (uint64_t)((int64_t)(3 * iv) + j), cold, 0},
		};
		struct proto_wss w;

		agent_wss_fold(g, 4, true, edges, n, 4096, &w);
		assert_int_equal(mtd_agent_young_bytes(&w, iv), (hot + 2) * 4096);
		/* the old edges, read up to two intervals: the cold data turns on the jitter */
		agent_wss_fold(g, 4, true, old_edges, 6, 4096, &w);
		uint64_t young = 0;
		for (unsigned b = 0; b < 2; b++)
			young += w.bins[b].anon_bytes + w.bins[b].file_bytes;
		assert_int_equal(young, (hot + 2 + (j < 0 ? cold : 0)) * 4096);
	}
}

/* The guest's use outside its LRU (kernel, slab, a zram pool) is MemTotal - MemFree less every
 * page in the MGLRU's bins, young or old: a balloon target without it squeezes the guest. */
static void test_outside_lru(void **state)
{
	struct proto_stats st = {.mem_total_bytes = 1024ULL << 20, .mem_free_bytes = 300ULL << 20};
	struct proto_wss w = {.nr_bins = 3};

	(void)state;
	w.bins[0] = (struct proto_wss_bin){0, 100ULL << 20, 50ULL << 20};
	w.bins[1] = (struct proto_wss_bin){3000, 0, 50ULL << 20};
	w.bins[2] = (struct proto_wss_bin){5000, 250ULL << 20, 50ULL << 20};
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, &w), 224ULL << 20);
	/* the reports are taken apart in time: an LRU larger than the use is no use outside */
	st.mem_free_bytes = 600ULL << 20;
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, &w), 0);
	/* one report missing, or nonsense: nothing */
	assert_int_equal(mtd_agent_outside_lru_bytes(NULL, &w), 0);
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, NULL), 0);
	st.mem_free_bytes = st.mem_total_bytes + 1;
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, &w), 0);
	/* taken over a second apart: no reading */
	st.mem_free_bytes = 300ULL << 20;
	w.mono_ms = 5000;
	st.mono_ms = 5000 + MTD_OUTSIDE_APART_MS + 1;
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, &w), UINT64_MAX);
	st.mono_ms = 5000 - MTD_OUTSIDE_APART_MS;
	assert_int_equal(mtd_agent_outside_lru_bytes(&st, &w), 224ULL << 20);

	/* one reading out of line (the lists read mid-reclaim) moves nothing; a rise that
	 * lasts shows in three; no reading keeps the figure */
	struct mtd_outside_filter f = {0};
	const uint64_t M = 1ULL << 20;
	assert_int_equal(mtd_agent_outside_note(&f, UINT64_MAX), 0);
	assert_int_equal(mtd_agent_outside_note(&f, 37 * M), 37 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 38 * M), 37 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 480 * M), 37 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 39 * M), 38 * M);
	assert_int_equal(mtd_agent_outside_note(&f, UINT64_MAX), 38 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 90 * M), 39 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 91 * M), 39 * M);
	assert_int_equal(mtd_agent_outside_note(&f, 92 * M), 90 * M);
}

static void send_gens(int fd, const struct agent_gen *g, int n, uint64_t iv, uint64_t *young)
{
	uint64_t edges[PROTO_MAX_WSS_BINS];
	unsigned ne = mtd_agent_wss_edges(iv, edges);
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_WSS;
	agent_wss_fold(g, n, true, edges, ne, 4096, &m.u.wss);
	*young = mtd_agent_young_bytes(&m.u.wss, iv);
	peer_send(fd, &m);
}

/* The agent's first two reports of a session carry no idle history: every page the guest
 * holds sits in generations whose next younger one was born at the agent's first aging, so
 * they read young.  The source does not lay them (the estimate waits); the third, with two
 * agings behind it, is read.  Without that, 10,000 pages read young where the guest uses
 * 2,000, and stay in the working set for a cold age. */
static void test_first_reports_not_read(void **state)
{
	const uint64_t iv = 1000, P = 4096;
	struct mtd_agent_link *l;
	struct mtd_source src;
	struct vmm_guest_config gc;
	struct vmm_guest *g;
	uint64_t now = 1000, young, wss, age = 1500; /* under the history: vmm_wss */
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, iv, &l), 0);
	int fd = handshake(l, &now);
	assert_int_equal(mtd_source_agent_new(l, 64ULL << 20, iv, 30000, &src), 0);
	vmm_guest_config_default(&gc);
	gc.ram = src.ram;
	gc.nr_ram = src.nr_ram;
	gc.nr_gens = VMM_MAX_NR_GENS;
	gc.unseen_is_unused = true;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);

	/* first aging: the guest's 10,000 pages in the generation made when MGLRU came on */
	const struct agent_gen r1[] = {{1, 0, 4, 0, 0, 0}, {1, 0, 3, 50000, 10000, 0}};
	/* second: the 2,000 used pages moved up; the rest's younger neighbour is 1 s old */
	const struct agent_gen r2[] = {
	    {1, 0, 5, 0, 0, 0}, {1, 0, 4, 1000, 2000, 0}, {1, 0, 3, 51000, 8000, 0}};
	/* third: now the 8,000 have been idle two agings */
	const struct agent_gen r3[] = {{1, 0, 6, 0, 0, 0},
				       {1, 0, 5, 1000, 2000, 0},
				       {1, 0, 4, 2000, 0, 0},
				       {1, 0, 3, 52000, 8000, 0}};
	send_gens(fd, r1, 2, iv, &young);
	assert_int_equal(young, 10000 * P);
	mtd_agent_link_service(l, now);
	assert_int_equal(src.ops->age(src.ctx, g, now), -EAGAIN);
	now += iv;
	send_gens(fd, r2, 3, iv, &young);
	assert_int_equal(young, 10000 * P);
	mtd_agent_link_service(l, now);
	assert_int_equal(src.ops->age(src.ctx, g, now), -EAGAIN);
	now += iv;
	send_gens(fd, r3, 4, iv, &young);
	assert_int_equal(young, 2000 * P);
	mtd_agent_link_service(l, now);
	assert_int_equal(src.ops->age(src.ctx, g, now), 0);
	assert_int_equal(vmm_wss(g, now + 1, &age, 1, &wss), 0);
	assert_int_equal(wss, 2000 * P);
	/* no new report: the last amount is laid again */
	now += iv;
	assert_int_equal(src.ops->age(src.ctx, g, now), 0);
	assert_int_equal(vmm_wss(g, now + 1, &age, 1, &wss), 0);
	assert_int_equal(wss, 2000 * P);

	vmm_guest_free(g);
	src.ops->destroy(src.ctx);
	close(fd);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

/* A lying agent: "uses 4 PiB" of a 1 GiB VM, refaults up 2^50 in a second, a need of
 * 4 PiB.  What the link hands on is within the VM; the peer is marked untrusted with the
 * first lie; a new session starts trusted again, the count since the link was made stays. */
static void test_lying_agent_is_clamped_and_marked(void **state)
{
	struct mtd_agent_link *l;
	struct proto_msg m;
	uint64_t now = 1000, seq, clamped = 0;
	(void)state;

	make_listener();
	assert_int_equal(mtd_agent_link_new(sock_path, 1000, &l), 0);
	mtd_agent_link_set_ram(l, 1ULL << 30);
	int fd = handshake(l, &now);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.u.stats.mem_total_bytes = 1000u << 20;
	m.u.stats.mem_free_bytes = 100u << 20;
	m.u.stats.refault_file = 1000;
	peer_send(fd, &m);
	mtd_agent_link_service(l, now);
	assert_string_equal(mtd_agent_link_untrusted(l, &clamped), "");
	assert_int_equal(clamped, 0);

	m.u.stats.mem_total_bytes = 1ULL << 52;
	m.u.stats.mem_free_bytes = 0;
	m.u.stats.refault_file = 1000 + (1ULL << 50);
	peer_send(fd, &m);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HINT;
	m.u.hint.kind = PROTO_HINT_NEED;
	m.u.hint.pid = 1;
	m.u.hint.need_bytes = 1ULL << 52;
	peer_send(fd, &m);
	now += 1000;
	mtd_agent_link_service(l, now);
	const struct proto_stats *st = mtd_agent_link_stats(l, &seq);
	assert_int_equal(seq, 2);
	assert_int_equal(st->mem_total_bytes, 1ULL << 30);
	assert_true(st->refault_file <=
		    MTD_AGENT_PAGES_PER_S_MAX * MTD_AGENT_COUNTER_GRACE_MS / 1000);
	assert_int_equal(mtd_agent_link_take_need(l), 1ULL << 30);
	const char *why = mtd_agent_link_untrusted(l, &clamped);
	print_message("untrusted: %s (%llu clamped)\n", why, (unsigned long long)clamped);
	assert_non_null(strstr(why, "MemTotal 4294967296 MiB"));
	assert_int_equal(clamped, 2);

	/* A restarted agent (new hello on the channel): a new session, trusted until it lies. */
	agent_hello(fd);
	mtd_agent_link_service(l, now);
	assert_true(mtd_agent_link_ready(l));
	assert_string_equal(mtd_agent_link_untrusted(l, &clamped), "");
	assert_int_equal(clamped, 2);
	close(fd);
	mtd_agent_link_free(l);
	close(listen_fd);
	unlink(sock_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handshake_stats_need_reclaim),
	    cmocka_unit_test(test_late_replies_in_a_chain),
	    cmocka_unit_test(test_garbage_disconnects_then_reconnects),
	    cmocka_unit_test(test_new_hello_rehandshakes),
	    cmocka_unit_test(test_no_listener_backs_off),
	    cmocka_unit_test(test_fd_source_replaces_and_pings),
	    cmocka_unit_test(test_wss_edges_ignore_jitter),
	    cmocka_unit_test(test_outside_lru),
	    cmocka_unit_test(test_first_reports_not_read),
	    cmocka_unit_test(test_lying_agent_is_clamped_and_marked),
	};
	return cmocka_run_group_tests_name("mtd_agent_link", tests, NULL, NULL);
}
