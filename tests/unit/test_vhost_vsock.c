// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_vhost_vsock.c - the virtio-vsock device (host/vsock/vsock_dev.c, vsock_pkt.c) against
 * a fake guest driver (vhost_fake_guest.h) that speaks the Linux driver's packets, fair and
 * hostile.
 *
 * Checked: the header rules (type, op, lengths, flags, addresses); a request to the agent
 * port from a privileged port is answered RESPONSE and bytes flow both ways; requests from
 * an unprivileged port, to another port, or while nobody reads are reset; a second agent
 * connection replaces the first; the guest's data beyond its credit resets the connection
 * instead of growing a buffer; our data to the guest stays within its credit and a stalled
 * credit is asked for (CREDIT_REQUEST), answered, and resumes; credit comes back to the
 * guest as the host consumes; a guest close reaches the host as EOF after its data; a host
 * close reaches the guest as SHUTDOWN then RST; a reset is never answered with a reset;
 * packets from another CID are dropped without a word; a flood of junk keeps the control
 * queue bounded.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "vhost_fake_guest.h"

#define PORT 5253

struct env {
	struct fake_guest g;
	struct vsock_dev *d;
};

static struct env *env_new(void)
{
	struct env *e = calloc(1, sizeof(*e));
	struct vsock_dev_config cfg = {.guest_cid = G_CID, .port = PORT};

	g_init(&e->g, 64);
	assert_int_equal(vsock_dev_new(&cfg, &e->d), 0);
	vsock_dev_set_accepting(e->d, true);
	return e;
}

static void env_free(struct env *e)
{
	vsock_dev_free(e->d);
	g_free(&e->g);
	free(e);
}

static void run(struct env *e)
{
	while (vsock_dev_process(e->d, &e->g.vq[0], &e->g.vq[1], &e->g.mem, 8))
		;
}

/* Send one packet and run the device; rx buffers are posted as needed. */
static void send_pkt(struct env *e, uint16_t op, uint32_t src_port, uint32_t dst_port,
		     const void *payload, uint32_t len)
{
	struct vsock_hdr h;

	g_hdr(&h, op, src_port, dst_port, len);
	g_send(&e->g, &h, payload, len);
	run(e);
}

static void post_rx(struct env *e, int n)
{
	for (int i = 0; i < n; i++)
		g_post_rx(&e->g, 4096 + 44);
	run(e);
}

static bool recv_pkt(struct env *e, struct vsock_hdr *h, uint8_t *buf)
{
	return g_recv(&e->g, h, buf, 65536);
}

static void expect_op(struct env *e, uint16_t op, uint32_t guest_port)
{
	struct vsock_hdr h;
	static uint8_t buf[65536];

	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, op);
	assert_int_equal(h.dst_port, guest_port);
	assert_int_equal(h.src_port, PORT);
	assert_int_equal(h.src_cid, VSOCK_HOST_CID);
	assert_int_equal(h.dst_cid, G_CID);
}

static void connect_agent(struct env *e, uint32_t port)
{
	post_rx(e, 8);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, port, PORT, NULL, 0);
	expect_op(e, VIRTIO_VSOCK_OP_RESPONSE, port);
}

static void test_header_rules(void **state)
{
	struct vsock_hdr h;
	char why[160];
	(void)state;

	g_hdr(&h, VIRTIO_VSOCK_OP_RW, 1000, PORT, 10);
	assert_int_equal(vsock_hdr_check(&h, G_CID, 10, why, sizeof(why)), 0);
	assert_int_equal(vsock_hdr_check(&h, G_CID, 9, why, sizeof(why)), -EINVAL); /* short */
	h.len = VSOCK_MAX_PAYLOAD + 1;
	assert_int_equal(vsock_hdr_check(&h, G_CID, UINT32_MAX, why, sizeof(why)), -EINVAL);
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, 4);
	assert_int_equal(vsock_hdr_check(&h, G_CID, 4, why, sizeof(why)), -EINVAL);
	g_hdr(&h, 8, 1000, PORT, 0);
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EINVAL);
	g_hdr(&h, VIRTIO_VSOCK_OP_INVALID, 1000, PORT, 0);
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EINVAL);
	g_hdr(&h, VIRTIO_VSOCK_OP_RW, 1000, PORT, 0);
	h.type = VIRTIO_VSOCK_TYPE_SEQPACKET;
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EINVAL);
	g_hdr(&h, VIRTIO_VSOCK_OP_SHUTDOWN, 1000, PORT, 0);
	h.flags = 4;
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EINVAL);
	g_hdr(&h, VIRTIO_VSOCK_OP_RW, 1000, PORT, 0);
	h.src_cid = 4; /* another guest's address */
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EPERM);
	h.src_cid = G_CID;
	h.dst_cid = 7;
	assert_int_equal(vsock_hdr_check(&h, G_CID, 0, why, sizeof(why)), -EPERM);

	/* encode and decode are inverse, and the wire is little-endian */
	struct virtio_vsock_hdr w;
	struct vsock_hdr back;
	g_hdr(&h, VIRTIO_VSOCK_OP_RW, 0x01020304, PORT, 0x0a0b);
	vsock_hdr_encode(&h, &w);
	assert_int_equal(((uint8_t *)&w)[16], 0x04);
	memset(&back, 0, sizeof(back)); /* padding: g_hdr zeroed h's too */
	vsock_hdr_decode(&w, &back);
	assert_memory_equal(&h, &back, sizeof(h));
}

static void test_connect_and_exchange(void **state)
{
	struct env *e = env_new();
	struct vsock_conn_view v;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	const uint8_t *p;
	(void)state;

	connect_agent(e, 1023);
	vsock_dev_conn(e->d, &v);
	assert_true(v.open);
	assert_int_equal(v.gen, 1);
	assert_int_equal(v.guest_port, 1023);

	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1023, PORT, "hello", 5);
	size_t n = vsock_dev_in_peek(e->d, &p);
	assert_int_equal(n, 5);
	assert_memory_equal(p, "hello", 5);
	vsock_dev_in_consume(e->d, 5);

	assert_int_equal(vsock_dev_out_push(e->d, "world!", 6), 6);
	run(e);
	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(h.len, 6);
	assert_memory_equal(buf, "world!", 6);
	/* our header carries our credit: the 5 bytes the host took */
	assert_int_equal(h.buf_alloc, VSOCK_CONN_BUF);
	assert_int_equal(h.fwd_cnt, 5);

	struct vsock_dev_counters c;
	vsock_dev_counters(e->d, &c);
	assert_int_equal(c.connects, 1);
	assert_int_equal(c.rx_bytes, 5);
	assert_int_equal(c.tx_bytes, 6);
	env_free(e);
}

static void test_refusals(void **state)
{
	struct env *e = env_new();
	struct vsock_conn_view v;
	(void)state;

	post_rx(e, 8);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, 40000, PORT, NULL, 0); /* unprivileged */
	expect_op(e, VIRTIO_VSOCK_OP_RST, 40000);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, 1000, 22, NULL, 0); /* another port */
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000);
	vsock_dev_set_accepting(e->d, false);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, NULL, 0); /* nobody reads */
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000);
	/* data for a connection that does not exist */
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1000, PORT, "x", 1);
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000);
	/* a reset is never answered */
	struct vsock_hdr h;
	static uint8_t buf[65536];
	send_pkt(e, VIRTIO_VSOCK_OP_RST, 1000, PORT, NULL, 0);
	assert_false(recv_pkt(e, &h, buf));
	vsock_dev_conn(e->d, &v);
	assert_false(v.open);
	env_free(e);
}

static void test_other_cid_dropped_silently(void **state)
{
	struct env *e = env_new();
	struct vsock_hdr h;
	static uint8_t buf[65536];
	(void)state;

	post_rx(e, 4);
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, 0);
	h.src_cid = 99;
	g_send(&e->g, &h, NULL, 0);
	run(e);
	assert_false(recv_pkt(e, &h, buf));
	struct vsock_conn_view v;
	vsock_dev_conn(e->d, &v);
	assert_false(v.open);
	env_free(e);
}

static void test_replacement(void **state)
{
	struct env *e = env_new();
	struct vsock_conn_view v;
	(void)state;

	connect_agent(e, 1023);
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1023, PORT, "old", 3);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, 1022, PORT, NULL, 0);
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1023);
	expect_op(e, VIRTIO_VSOCK_OP_RESPONSE, 1022);
	vsock_dev_conn(e->d, &v);
	assert_int_equal(v.gen, 2);
	assert_int_equal(v.guest_port, 1022);
	assert_int_equal(v.in_bytes, 0); /* the old connection's bytes are not the new one's */
	env_free(e);
}

static void test_guest_credit_violation(void **state)
{
	struct env *e = env_new();
	static uint8_t blob[60000];
	struct vsock_conn_view v;
	struct vsock_dev_counters c;
	(void)state;

	connect_agent(e, 1000);
	/* 60000 bytes fit our 64 KiB; the host reads none; 60000 more do not. */
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1000, PORT, blob, sizeof(blob));
	vsock_dev_conn(e->d, &v);
	assert_int_equal(v.in_bytes, sizeof(blob));
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1000, PORT, blob, sizeof(blob));
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000);
	vsock_dev_counters(e->d, &c);
	assert_int_equal(c.credit_violations, 1);
	/* What arrived within credit still reaches the host, then EOF. */
	vsock_dev_conn(e->d, &v);
	assert_true(v.open);
	assert_true(v.guest_done);
	assert_int_equal(v.in_bytes, sizeof(blob));
	const uint8_t *p;
	size_t n;
	while ((n = vsock_dev_in_peek(e->d, &p)) > 0)
		vsock_dev_in_consume(e->d, n);
	vsock_dev_conn(e->d, &v);
	assert_false(v.open);
	env_free(e);
}

static void test_credit_returned_to_guest(void **state)
{
	struct env *e = env_new();
	static uint8_t blob[40000];
	struct vsock_hdr h;
	static uint8_t buf[65536];
	(void)state;

	connect_agent(e, 1000);
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1000, PORT, blob, sizeof(blob));
	assert_false(recv_pkt(e, &h, buf));
	/* The guest now sees less than half of 64 KiB free: consuming it sends an update. */
	vsock_dev_in_consume(e->d, 30000);
	run(e);
	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	assert_int_equal(h.fwd_cnt, 30000);
	assert_int_equal(h.buf_alloc, VSOCK_CONN_BUF);
	/* the guest asks, we answer */
	send_pkt(e, VIRTIO_VSOCK_OP_CREDIT_REQUEST, 1000, PORT, NULL, 0);
	expect_op(e, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1000);
	env_free(e);
}

static void test_host_respects_guest_credit(void **state)
{
	struct env *e = env_new();
	static uint8_t blob[20000], buf[65536];
	struct vsock_hdr h;
	uint32_t got = 0;
	(void)state;

	post_rx(e, 16);
	/* The guest's receive buffer is 5000 bytes. */
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, 0);
	h.buf_alloc = 5000;
	g_send(&e->g, &h, NULL, 0);
	run(e);
	expect_op(e, VIRTIO_VSOCK_OP_RESPONSE, 1000);
	for (unsigned i = 0; i < sizeof(blob); i++)
		blob[i] = (uint8_t)i;
	assert_int_equal(vsock_dev_out_push(e->d, blob, sizeof(blob)), sizeof(blob));
	run(e);
	while (recv_pkt(e, &h, buf)) {
		if (h.op == VIRTIO_VSOCK_OP_RW) {
			assert_true(h.len <= 4096);
			assert_memory_equal(buf, blob + got, h.len);
			got += h.len;
		} else {
			assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_REQUEST);
		}
	}
	assert_int_equal(got, 5000);
	/* The guest read it all and says so: the rest flows. */
	post_rx(e, 16);
	g_hdr(&h, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1000, PORT, 0);
	h.buf_alloc = 64 * 1024;
	h.fwd_cnt = 5000;
	g_send(&e->g, &h, NULL, 0);
	run(e);
	while (recv_pkt(e, &h, buf)) {
		assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
		assert_memory_equal(buf, blob + got, h.len);
		got += h.len;
	}
	assert_int_equal(got, sizeof(blob));
	env_free(e);
}

static void test_lying_fwd_cnt_stalls_only_that_guest(void **state)
{
	struct env *e = env_new();
	struct vsock_hdr h;
	static uint8_t buf[65536];
	(void)state;

	connect_agent(e, 1000);
	/* fwd_cnt ahead of what we ever sent: reads as no credit, never as a huge one */
	g_hdr(&h, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1000, PORT, 0);
	h.buf_alloc = 4096;
	h.fwd_cnt = 0x80000000u;
	g_send(&e->g, &h, NULL, 0);
	run(e);
	assert_int_equal(vsock_dev_out_push(e->d, "abc", 3), 3);
	post_rx(e, 4);
	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_CREDIT_REQUEST);
	assert_false(recv_pkt(e, &h, buf));
	env_free(e);
}

static void test_guest_close_and_host_close(void **state)
{
	struct env *e = env_new();
	struct vsock_conn_view v;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	(void)state;

	/* The guest closes after sending: its bytes first, then EOF for the host. */
	connect_agent(e, 1000);
	send_pkt(e, VIRTIO_VSOCK_OP_RW, 1000, PORT, "bye", 3);
	g_hdr(&h, VIRTIO_VSOCK_OP_SHUTDOWN, 1000, PORT, 0);
	h.flags = VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND;
	g_send(&e->g, &h, NULL, 0);
	run(e);
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000); /* completes the guest's close */
	vsock_dev_conn(e->d, &v);
	assert_true(v.open && v.guest_done);
	assert_int_equal(v.in_bytes, 3);
	vsock_dev_in_consume(e->d, 3);
	vsock_dev_conn(e->d, &v);
	assert_false(v.open);

	/* The host closes with bytes queued: they go, then SHUTDOWN, then RST. */
	connect_agent(e, 999);
	assert_int_equal(vsock_dev_out_push(e->d, "last", 4), 4);
	vsock_dev_host_close(e->d);
	run(e);
	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_memory_equal(buf, "last", 4);
	assert_true(recv_pkt(e, &h, buf));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
	expect_op(e, VIRTIO_VSOCK_OP_RST, 999);
	vsock_dev_conn(e->d, &v);
	assert_false(v.open);
	env_free(e);
}

static void test_junk_flood_bounded(void **state)
{
	struct env *e = env_new();
	struct vsock_dev_counters c;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	int resets = 0;
	(void)state;

	/* 200 requests to a closed port with no rx buffers: the control queue holds 32. */
	for (int i = 0; i < 200; i++) {
		g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 2000 + (uint32_t)i, 80, 0);
		g_send(&e->g, &h, NULL, 0);
		run(e);
	}
	vsock_dev_counters(e->d, &c);
	assert_int_equal(c.refused, 200);
	assert_int_equal(c.ctrl_dropped, 200 - VSOCK_CTRL_QUEUE);
	for (int round = 0; round < 8; round++) {
		post_rx(e, 8);
		while (recv_pkt(e, &h, buf))
			resets++;
	}
	assert_int_equal(resets, VSOCK_CTRL_QUEUE);
	/* Short and garbage packets: counted, the device stays usable. */
	struct gdesc d = {g_alloc(&e->g, 10), 10, false};
	g_add_chain(&e->g, 1, &d, 1);
	run(e);
	vsock_dev_counters(e->d, &c);
	assert_int_equal(c.bad_packets, 1);
	connect_agent(e, 1000);
	env_free(e);
}

static void test_bad_rx_buffers_given_back(void **state)
{
	struct env *e = env_new();
	uint32_t id, len;
	(void)state;

	/* A receive buffer shorter than a header, and a read-only one: both given back empty,
	 * the next good buffer carries the packet. */
	struct gdesc small = {g_alloc(&e->g, 20), 20, true};
	struct gdesc ro = {g_alloc(&e->g, 4096), 4096, false};
	g_add_chain(&e->g, 0, &small, 1);
	g_add_chain(&e->g, 0, &ro, 1);
	send_pkt(e, VIRTIO_VSOCK_OP_REQUEST, 1000, 80, NULL, 0);
	assert_true(g_take_used(&e->g, 0, &id, &len));
	assert_int_equal(len, 0);
	assert_true(g_take_used(&e->g, 0, &id, &len));
	assert_int_equal(len, 0);
	g_post_rx(&e->g, 4096);
	run(e);
	expect_op(e, VIRTIO_VSOCK_OP_RST, 1000);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_rules),
	    cmocka_unit_test(test_connect_and_exchange),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_other_cid_dropped_silently),
	    cmocka_unit_test(test_replacement),
	    cmocka_unit_test(test_guest_credit_violation),
	    cmocka_unit_test(test_credit_returned_to_guest),
	    cmocka_unit_test(test_host_respects_guest_credit),
	    cmocka_unit_test(test_lying_fwd_cnt_stalls_only_that_guest),
	    cmocka_unit_test(test_guest_close_and_host_close),
	    cmocka_unit_test(test_junk_flood_bounded),
	    cmocka_unit_test(test_bad_rx_buffers_given_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
