// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_vhost_session.c - the vhost-user session (host/vsock/vu_session.c, vu_wire.c) driven
 * by a scripted front end over a socketpair, the way QEMU 7.2's vhost-user-vsock-pci drives
 * it (the message sequence below was recorded from QEMU 7.2 in this project's e2e guest),
 * with the guest's RAM in a memfd that the test maps as the "guest" (vhost_fake_guest.h).
 *
 * Checked: the start-up sequence (features, protocol features, queue count, config = the
 * guest CID, memory table with REPLY_ACK, ring setup with eventfds) makes a working device:
 * a guest REQUEST on the tx ring is answered with a RESPONSE on the rx ring and a signal on
 * the call eventfd.  A restarted session (QEMU's stop/cont after memtided came back: no
 * GET_FEATURES, a GET_VRING_BASE we cannot know) answers 0 and resumes the rings from the
 * used index in guest memory.  Hostile messages are refused before any state changes,
 * with a failure reply where QEMU waits for one and their fds closed (the process's open
 * fd count is the same before and after): wrong version and oversized payloads end the
 * session (-EPROTO); a memory table on a too-short file, fds on a request that takes none,
 * missing fds, ring indexes past the device, unknown requests, features never offered,
 * config windows outside the config space and writes to the read-only config are refused.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "vhost_fake_guest.h"

#define NUM 64

struct fq {
	int qemu, backend; /* the socketpair: QEMU's end, ours */
	int memfd;
	uint8_t *ram; /* the "guest's" mapping of memfd */
	struct fake_guest g;
	struct vsock_dev *dev;
	struct vu_session *s;
	int call[2], kick[2];
};

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void fq_send(struct fq *f, uint32_t req, uint32_t flags, const void *payload, uint32_t size,
		    const int *fds, unsigned nfds)
{
	struct {
		struct vu_hdr h;
		uint8_t p[512];
	} __attribute__((packed)) m;
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m.h) + size};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	assert_true(size <= sizeof(m.p));
	m.h.request = req;
	m.h.flags = flags;
	m.h.size = size;
	if (size)
		memcpy(m.p, payload, size);
	if (nfds) {
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	assert_int_equal(sendmsg(f->qemu, &mh, 0), (ssize_t)(sizeof(m.h) + size));
}

/* Send, let the back end handle it, return vu_session_read's result. */
static int fq_do(struct fq *f, uint32_t req, uint32_t flags, const void *payload, uint32_t size,
		 const int *fds, unsigned nfds)
{
	fq_send(f, req, flags, payload, size, fds, nfds);
	return vu_session_read(f->s, f->backend);
}

/* Read the reply to req: its payload size, payload into out. */
static uint32_t fq_reply(struct fq *f, uint32_t req, void *out, size_t cap)
{
	struct vu_hdr h;

	assert_int_equal(recv(f->qemu, &h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h));
	assert_int_equal(h.request, req);
	assert_int_equal(h.flags, VU_VERSION | VU_FLAG_REPLY);
	assert_true(h.size <= cap);
	if (h.size)
		assert_int_equal(recv(f->qemu, out, h.size, MSG_WAITALL), (ssize_t)h.size);
	return h.size;
}

static bool fq_no_reply(struct fq *f)
{
	char c;
	return recv(f->qemu, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

static uint64_t fq_ack(struct fq *f, uint32_t req)
{
	uint64_t v = 99;
	assert_int_equal(fq_reply(f, req, &v, sizeof(v)), 8);
	return v;
}

static void fq_open(struct fq *f)
{
	int sv[2];
	struct vsock_dev_config cfg = {.guest_cid = G_CID, .port = 5253};

	memset(f, 0, sizeof(*f));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->qemu = sv[0];
	f->backend = sv[1];
	assert_int_equal(vsock_dev_new(&cfg, &f->dev), 0);
	vsock_dev_set_accepting(f->dev, true);
	assert_int_equal(vu_session_new(&vsock_dev_ops, f->dev, &f->s), 0);
	for (int i = 0; i < 2; i++) {
		f->call[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		f->kick[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
}

static void fq_close(struct fq *f)
{
	vu_session_free(f->s);
	vsock_dev_free(f->dev);
	close(f->qemu);
	close(f->backend);
	for (int i = 0; i < 2; i++) {
		close(f->call[i]);
		close(f->kick[i]);
	}
}

static void make_ram(struct fq *f)
{
	f->memfd = memfd_create("guest-ram", MFD_CLOEXEC);
	assert_true(f->memfd >= 0);
	assert_int_equal(ftruncate(f->memfd, G_BYTES), 0);
	f->ram = mmap(NULL, G_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
	assert_true(f->ram != MAP_FAILED);
	g_init_ram(&f->g, NUM, f->ram);
}

static void free_ram(struct fq *f)
{
	g_free(&f->g);
	munmap(f->ram, G_BYTES);
	close(f->memfd);
}

/* QEMU's vhost_dev_start part: features, memory table, rings, enable. */
static void start_device(struct fq *f, uint32_t base)
{
	uint64_t feat = (1ull << VU_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES);
	struct vu_memory_wire mem = {.nregions = 1};

	assert_int_equal(fq_do(f, VU_SET_FEATURES, VU_VERSION, &feat, 8, NULL, 0), 0);
	mem.r[0] = (struct vu_region_wire){.gpa = G_GPA, .size = G_BYTES, .uva = G_UVA};
	assert_int_equal(fq_do(f, VU_SET_MEM_TABLE, VU_VERSION | VU_FLAG_NEED_REPLY, &mem,
			       8 + sizeof(mem.r[0]), &f->memfd, 1),
			 0);
	assert_int_equal(fq_ack(f, VU_SET_MEM_TABLE), 0);
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state num = {q, NUM}, b = {q, base};
		struct vu_vring_addr a = {.index = q,
					  .desc_uva = G_UVA + g_ring_off(q, 0),
					  .used_uva = G_UVA + g_ring_off(q, 2),
					  .avail_uva = G_UVA + g_ring_off(q, 1)};
		uint64_t idx = q;

		assert_int_equal(fq_do(f, VU_SET_VRING_NUM, VU_VERSION, &num, 8, NULL, 0), 0);
		assert_int_equal(fq_do(f, VU_SET_VRING_BASE, VU_VERSION, &b, 8, NULL, 0), 0);
		assert_int_equal(fq_do(f, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0),
				 0);
		assert_int_equal(fq_do(f, VU_SET_VRING_KICK, VU_VERSION, &idx, 8, &f->kick[q], 1),
				 0);
	}
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state en = {q, 1};
		uint64_t idx = q;
		assert_int_equal(fq_do(f, VU_SET_VRING_ENABLE, VU_VERSION, &en, 8, NULL, 0), 0);
		assert_int_equal(fq_do(f, VU_SET_VRING_CALL, VU_VERSION, &idx, 8, &f->call[q], 1),
				 0);
	}
	assert_true(fq_no_reply(f));
}

/* QEMU's vhost_dev_init part: negotiation, owner, call/err fds, config. */
static void init_device(struct fq *f)
{
	uint64_t v = 0;
	uint64_t pf = (1ull << VU_PF_MQ) | (1ull << VU_PF_REPLY_ACK) | (1ull << VU_PF_CONFIG);
	struct vu_config_wire cfg = {.offset = 0, .size = 8};

	assert_int_equal(fq_do(f, VU_GET_FEATURES, VU_VERSION, NULL, 0, NULL, 0), 0);
	assert_int_equal(fq_reply(f, VU_GET_FEATURES, &v, 8), 8);
	assert_int_equal(v, (1ull << VU_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES));
	assert_int_equal(fq_do(f, VU_GET_PROTOCOL_FEATURES, VU_VERSION, NULL, 0, NULL, 0), 0);
	assert_int_equal(fq_reply(f, VU_GET_PROTOCOL_FEATURES, &v, 8), 8);
	assert_int_equal(v, pf);
	assert_int_equal(fq_do(f, VU_SET_PROTOCOL_FEATURES, VU_VERSION, &pf, 8, NULL, 0), 0);
	assert_int_equal(fq_do(f, VU_GET_QUEUE_NUM, VU_VERSION, NULL, 0, NULL, 0), 0);
	assert_int_equal(fq_reply(f, VU_GET_QUEUE_NUM, &v, 8), 8);
	assert_int_equal(v, 2);
	assert_int_equal(fq_do(f, VU_SET_OWNER, VU_VERSION, NULL, 0, NULL, 0), 0);
	assert_true(vu_session_initialised(f->s));
	assert_int_equal(fq_do(f, VU_GET_CONFIG, VU_VERSION, &cfg, 12 + 8, NULL, 0), 0);
	struct vu_config_wire back;
	assert_int_equal(fq_reply(f, VU_GET_CONFIG, &back, sizeof(back)), 20);
	uint64_t cid;
	memcpy(&cid, back.payload, 8);
	assert_int_equal(le64toh(cid), G_CID);
}

static void process(struct fq *f)
{
	while (vsock_dev_process(f->dev, vu_session_ring(f->s, 0), vu_session_ring(f->s, 1),
				 vu_session_mem(f->s), 16))
		;
}

static void test_qemu_sequence_makes_a_device(void **state)
{
	struct fq f;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	uint64_t v;
	(void)state;

	fq_open(&f);
	make_ram(&f);
	init_device(&f);
	start_device(&f, 0);
	assert_true(vu_session_started(f.s));
	assert_true(vq_ready(vu_session_ring(f.s, 0)));
	assert_true(vq_ready(vu_session_ring(f.s, 1)));

	/* The layout memtided publishes is QEMU's table. */
	struct vu_layout_region lr[4];
	uint64_t gen;
	assert_int_equal(vu_session_layout(f.s, lr, 4, &gen), 1);
	assert_int_equal(lr[0].gpa, G_GPA);
	assert_int_equal(lr[0].bytes, G_BYTES);
	assert_int_equal(lr[0].qemu_va, G_UVA);

	/* The guest connects: through the shared memfd, the rings, and the eventfds. */
	g_post_rx(&f.g, 4096);
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1023, 5253, 0);
	g_send(&f.g, &h, NULL, 0);
	v = 1;
	assert_int_equal(write(f.kick[1], &v, 8), 8);
	vu_session_kicked(f.s, 1);
	process(&f);
	assert_true(g_recv(&f.g, &h, buf, sizeof(buf)));
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	assert_int_equal(read(f.call[0], &v, 8), 8); /* the guest was interrupted */
	struct vu_session_counters c;
	vu_session_counters(f.s, &c);
	assert_int_equal(c.refused, 0);
	assert_int_equal(c.kicks, 1);
	free_ram(&f);
	fq_close(&f);
}

static void test_restarted_session_resumes(void **state)
{
	struct fq f;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	(void)state;

	/* The first back end served five packets, then died. */
	fq_open(&f);
	make_ram(&f);
	init_device(&f);
	start_device(&f, 0);
	g_post_rx(&f.g, 4096);
	for (int i = 0; i < 5; i++) {
		g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 3000 + (uint32_t)i, 5253, 0); /* unprivileged */
		g_send(&f.g, &h, NULL, 0);
	}
	process(&f);
	assert_int_equal(g_used_idx(&f.g, 1), 5);
	vu_session_free(f.s);
	vsock_dev_free(f.dev);
	close(f.backend);
	close(f.qemu);

	/* memtided came back; QEMU restarts the device with no GET_FEATURES first. */
	int sv[2];
	struct vsock_dev_config cfg = {.guest_cid = G_CID, .port = 5253};
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f.qemu = sv[0];
	f.backend = sv[1];
	assert_int_equal(vsock_dev_new(&cfg, &f.dev), 0);
	vsock_dev_set_accepting(f.dev, true);
	assert_int_equal(vu_session_new(&vsock_dev_ops, f.dev, &f.s), 0);
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state st = {q, 0};
		assert_int_equal(fq_do(&f, VU_SET_VRING_ENABLE, VU_VERSION, &st, 8, NULL, 0), 0);
	}
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state st = {q, 0}, back;
		assert_int_equal(fq_do(&f, VU_GET_VRING_BASE, VU_VERSION, &st, 8, NULL, 0), 0);
		assert_int_equal(fq_reply(&f, VU_GET_VRING_BASE, &back, sizeof(back)), 8);
		assert_int_equal(back.num, 0); /* unknown: a guess, marked as such */
	}
	assert_false(vu_session_initialised(f.s));
	start_device(&f, 0); /* QEMU hands our 0 back */
	/* The guest's sixth packet is served, not the first five again. */
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1023, 5253, 0);
	g_send(&f.g, &h, NULL, 0);
	g_post_rx(&f.g, 4096);
	process(&f);
	assert_int_equal(g_used_idx(&f.g, 1), 6);
	int responses = 0;
	while (g_recv(&f.g, &h, buf, sizeof(buf)))
		if (h.op == VIRTIO_VSOCK_OP_RESPONSE && h.dst_port == 1023)
			responses++;
	assert_int_equal(responses, 1);
	free_ram(&f);
	fq_close(&f);
}

static void test_hostile_messages(void **state)
{
	struct fq f;
	uint64_t v;
	(void)state;

	int before = count_fds();
	fq_open(&f);
	make_ram(&f);
	init_device(&f);
	start_device(&f, 0);
	int baseline = count_fds();
	uint64_t gen0;
	struct vu_layout_region lr[2];
	vu_session_layout(f.s, lr, 2, &gen0);

	/* A memory table on a file too short: refused (ack 1), the old table stays. */
	int small = memfd_create("small", MFD_CLOEXEC);
	assert_int_equal(ftruncate(small, 4096), 0);
	struct vu_memory_wire mem = {.nregions = 1};
	mem.r[0] = (struct vu_region_wire){.gpa = 0, .size = G_BYTES, .uva = 0x1000};
	assert_int_equal(fq_do(&f, VU_SET_MEM_TABLE, VU_VERSION | VU_FLAG_NEED_REPLY, &mem,
			       8 + sizeof(mem.r[0]), &small, 1),
			 0);
	assert_int_equal(fq_ack(&f, VU_SET_MEM_TABLE), 1);
	uint64_t gen1;
	vu_session_layout(f.s, lr, 2, &gen1);
	assert_int_equal(gen1, gen0);
	assert_int_equal(lr[0].gpa, G_GPA);
	/* ...with a region count that disagrees with the fds */
	mem.nregions = 2;
	mem.r[1] = (struct vu_region_wire){.gpa = 1ull << 32, .size = 4096, .uva = 1ull << 40};
	assert_int_equal(fq_do(&f, VU_SET_MEM_TABLE, VU_VERSION | VU_FLAG_NEED_REPLY, &mem,
			       8 + 2 * sizeof(mem.r[0]), &small, 1),
			 0);
	assert_int_equal(fq_ack(&f, VU_SET_MEM_TABLE), 1);
	/* fds on a request that takes none; a kick without its fd */
	uint64_t feat = 1ull << VU_F_VERSION_1;
	assert_int_equal(
	    fq_do(&f, VU_SET_FEATURES, VU_VERSION | VU_FLAG_NEED_REPLY, &feat, 8, &small, 1), 0);
	assert_int_equal(fq_ack(&f, VU_SET_FEATURES), 1);
	v = 0;
	assert_int_equal(
	    fq_do(&f, VU_SET_VRING_KICK, VU_VERSION | VU_FLAG_NEED_REPLY, &v, 8, NULL, 0), 0);
	assert_int_equal(fq_ack(&f, VU_SET_VRING_KICK), 1);
	/* a ring the device does not have; reserved bits */
	v = 5;
	assert_int_equal(
	    fq_do(&f, VU_SET_VRING_CALL, VU_VERSION | VU_FLAG_NEED_REPLY, &v, 8, &small, 1), 0);
	assert_int_equal(fq_ack(&f, VU_SET_VRING_CALL), 1);
	v = 1ull << 20;
	assert_int_equal(
	    fq_do(&f, VU_SET_VRING_CALL, VU_VERSION | VU_FLAG_NEED_REPLY, &v, 8, &small, 1), 0);
	assert_int_equal(fq_ack(&f, VU_SET_VRING_CALL), 1);
	struct vu_vring_state st = {7, 0};
	assert_int_equal(fq_do(&f, VU_GET_VRING_BASE, VU_VERSION, &st, 8, NULL, 0), 0);
	assert_int_equal(fq_reply(&f, VU_GET_VRING_BASE, &st, sizeof(st)), 0); /* empty: error */
	st = (struct vu_vring_state){0, 100}; /* not a power of two */
	assert_int_equal(
	    fq_do(&f, VU_SET_VRING_NUM, VU_VERSION | VU_FLAG_NEED_REPLY, &st, 8, NULL, 0), 0);
	assert_int_equal(fq_ack(&f, VU_SET_VRING_NUM), 1);
	/* ring addresses outside the table */
	struct vu_vring_addr a = {.index = 0, .desc_uva = 16, .used_uva = 4096, .avail_uva = 8192};
	assert_int_equal(
	    fq_do(&f, VU_SET_VRING_ADDR, VU_VERSION | VU_FLAG_NEED_REPLY, &a, sizeof(a), NULL, 0),
	    0);
	assert_int_equal(fq_ack(&f, VU_SET_VRING_ADDR), 1);
	assert_true(vq_ready(vu_session_ring(f.s, 0))); /* the ring is as it was */
	/* features never offered; a feature request never offered; unknown requests */
	feat = 1ull << 28; /* INDIRECT_DESC */
	assert_int_equal(
	    fq_do(&f, VU_SET_FEATURES, VU_VERSION | VU_FLAG_NEED_REPLY, &feat, 8, NULL, 0), 0);
	assert_int_equal(fq_ack(&f, VU_SET_FEATURES), 1);
	assert_int_equal(
	    fq_do(&f, VU_SET_LOG_BASE, VU_VERSION | VU_FLAG_NEED_REPLY, &feat, 8, &small, 1), 0);
	assert_int_equal(fq_ack(&f, VU_SET_LOG_BASE), 1);
	assert_int_equal(fq_do(&f, 30, VU_VERSION | VU_FLAG_NEED_REPLY, NULL, 0, NULL, 0), 0);
	assert_int_equal(fq_ack(&f, 30), 1);
	assert_int_equal(fq_do(&f, 1000, VU_VERSION, NULL, 0, NULL, 0), 0);
	assert_true(fq_no_reply(&f));
	/* config: outside the space; writes to it */
	struct vu_config_wire cfg = {.offset = 4, .size = 8};
	assert_int_equal(fq_do(&f, VU_GET_CONFIG, VU_VERSION, &cfg, 20, NULL, 0), 0);
	assert_int_equal(fq_reply(&f, VU_GET_CONFIG, &cfg, sizeof(cfg)), 0);
	cfg = (struct vu_config_wire){.offset = 250, .size = 8};
	assert_int_equal(fq_do(&f, VU_GET_CONFIG, VU_VERSION, &cfg, 20, NULL, 0), 0);
	assert_int_equal(fq_reply(&f, VU_GET_CONFIG, &cfg, sizeof(cfg)), 0);
	cfg = (struct vu_config_wire){.offset = 0, .size = 8};
	assert_int_equal(
	    fq_do(&f, VU_SET_CONFIG, VU_VERSION | VU_FLAG_NEED_REPLY, &cfg, 20, NULL, 0), 0);
	assert_int_equal(fq_ack(&f, VU_SET_CONFIG), 1);
	assert_non_null(strstr(vu_session_error(f.s), "read-only"));

	/* Nothing leaked: every fd QEMU sent with a refused message was closed. */
	close(small);
	assert_int_equal(count_fds(), baseline);
	struct vu_session_counters c;
	vu_session_counters(f.s, &c);
	assert_int_equal(c.refused, 16);

	/* Broken envelopes end the session. */
	assert_int_equal(fq_do(&f, VU_GET_FEATURES, 2, NULL, 0, NULL, 0), -EPROTO);
	struct vu_hdr big = {VU_SET_FEATURES, VU_VERSION, 4096};
	assert_int_equal(send(f.qemu, &big, sizeof(big), 0), (ssize_t)sizeof(big));
	assert_int_equal(vu_session_read(f.s, f.backend), -EPROTO);
	assert_int_equal(vu_session_read(f.s, f.backend), -EAGAIN);
	close(f.qemu);
	assert_int_equal(vu_session_read(f.s, f.backend), -EPIPE);
	f.qemu = -1;
	free_ram(&f);
	vu_session_free(f.s);
	vsock_dev_free(f.dev);
	close(f.backend);
	for (int i = 0; i < 2; i++) {
		close(f.call[i]);
		close(f.kick[i]);
	}
	assert_int_equal(count_fds(), before);
}

static void test_wire_rules(void **state)
{
	struct vu_msg m;
	char why[200];
	(void)state;

	memset(&m, 0, sizeof(m));
	m.hdr = (struct vu_hdr){VU_GET_FEATURES, VU_VERSION, 0};
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), 0);
	m.hdr.flags = VU_VERSION | VU_FLAG_REPLY;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EPROTO);
	m.hdr = (struct vu_hdr){VU_GET_FEATURES, VU_VERSION, 8};
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.hdr = (struct vu_hdr){VU_SET_MEM_TABLE, VU_VERSION, 8 + 32};
	m.p.mem.nregions = 1;
	m.nr_fds = 1;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), 0);
	m.p.mem.nregions = 9;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.p.mem.nregions = 0;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.hdr = (struct vu_hdr){VU_SET_VRING_NUM, VU_VERSION, 8};
	m.nr_fds = 0;
	m.p.state = (struct vu_vring_state){1, 32768};
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), 0);
	m.p.state.num = 65536;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.p.state = (struct vu_vring_state){2, 64};
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.hdr = (struct vu_hdr){VU_SET_VRING_CALL, VU_VERSION, 8};
	m.p.u64 = 1 | VU_VRING_NOFD_MASK;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), 0);
	m.nr_fds = 1;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.hdr = (struct vu_hdr){VU_GET_CONFIG, VU_VERSION, 12 + 256};
	m.nr_fds = 0;
	m.p.config.offset = 0;
	m.p.config.size = 256;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), 0);
	m.p.config.offset = 1;
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	m.p.config.offset = UINT32_MAX; /* offset + size wraps */
	assert_int_equal(vu_msg_check(&m, 2, why, sizeof(why)), -EINVAL);
	assert_string_equal(vu_request_name(VU_SET_VRING_KICK), "VHOST_USER_SET_VRING_KICK");
	assert_string_equal(vu_request_name(28), "unknown");
	assert_string_equal(vu_request_name(UINT32_MAX), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire_rules),
	    cmocka_unit_test(test_qemu_sequence_makes_a_device),
	    cmocka_unit_test(test_restarted_session_resumes),
	    cmocka_unit_test(test_hostile_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
