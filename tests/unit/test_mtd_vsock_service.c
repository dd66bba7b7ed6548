// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_vsock_service.c - memtided's vsock service (host/vsock/vsock_service.c) with its own
 * thread, against a scripted QEMU listening on a unix socket in a watched directory (as
 * libvirt's QEMU does with the socket domxml-patch names) and a fake guest driver on a
 * shared memfd (vhost_fake_guest.h).
 *
 * Checked: the service finds the socket in its directory and connects; QEMU's start-up makes
 * a device whose memory table the state reports; with a claim, the guest's connection to
 * the agent port becomes a stream the claimant takes (woken through its eventfd), and bytes
 * go both ways between the stream and the guest's rings; a new connection from QEMU with no
 * set-up on it (what memtided sees after its own restart) reads as connected but neither
 * initialised nor started, and its GET_VRING_BASE is answered; without a claim the guest's
 * request is reset.  Waits are poll()s on the eventfds and sockets the service signals,
 * bounded by 5 s; no sleeps.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "vhost_fake_guest.h"
#include "vsock/vsock_service.h"

#define NUM 64

static char dir[64];
static char path[128];

static bool wait_fd(int fd, short ev)
{
	struct pollfd p = {.fd = fd, .events = ev};
	return poll(&p, 1, 5000) == 1;
}

static void drain(int efd)
{
	uint64_t v;
	if (read(efd, &v, sizeof(v)) < 0) {
		/* nothing */
	}
}

static void qsend(int fd, uint32_t req, uint32_t flags, const void *p, uint32_t size,
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

	m.h = (struct vu_hdr){req, flags, size};
	if (size)
		memcpy(m.p, p, size);
	if (nfds) {
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	assert_int_equal(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t)(sizeof(m.h) + size));
}

static uint32_t qreply(int fd, uint32_t req, void *out, size_t cap)
{
	struct vu_hdr h;

	assert_true(wait_fd(fd, POLLIN));
	assert_int_equal(recv(fd, &h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h));
	assert_int_equal(h.request, req);
	assert_true(h.size <= cap);
	if (h.size)
		assert_int_equal(recv(fd, out, h.size, MSG_WAITALL), (ssize_t)h.size);
	return h.size;
}

static int accept_qemu(int lfd)
{
	assert_true(wait_fd(lfd, POLLIN));
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* QEMU 7.2's realize and device start, as recorded (see test_vhost_session.c). */
static void qemu_setup(int fd, int memfd, const int kick[2], const int call[2])
{
	uint64_t v = 0,
		 pf = (1ull << VU_PF_MQ) | (1ull << VU_PF_REPLY_ACK) | (1ull << VU_PF_CONFIG);
	uint64_t feat = (1ull << VU_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES);
	struct vu_config_wire cfg = {.offset = 0, .size = 8};
	struct vu_memory_wire mem = {.nregions = 1};

	qsend(fd, VU_GET_FEATURES, VU_VERSION, NULL, 0, NULL, 0);
	assert_int_equal(qreply(fd, VU_GET_FEATURES, &v, 8), 8);
	qsend(fd, VU_SET_PROTOCOL_FEATURES, VU_VERSION, &pf, 8, NULL, 0);
	qsend(fd, VU_SET_OWNER, VU_VERSION, NULL, 0, NULL, 0);
	qsend(fd, VU_GET_CONFIG, VU_VERSION, &cfg, 20, NULL, 0);
	assert_int_equal(qreply(fd, VU_GET_CONFIG, &cfg, sizeof(cfg)), 20);
	qsend(fd, VU_SET_FEATURES, VU_VERSION, &feat, 8, NULL, 0);
	mem.r[0] = (struct vu_region_wire){.gpa = G_GPA, .size = G_BYTES, .uva = G_UVA};
	qsend(fd, VU_SET_MEM_TABLE, VU_VERSION | VU_FLAG_NEED_REPLY, &mem, 8 + 32, &memfd, 1);
	assert_int_equal(qreply(fd, VU_SET_MEM_TABLE, &v, 8), 8);
	assert_int_equal(v, 0);
	for (uint32_t q = 0; q < 2; q++) {
		struct vu_vring_state num = {q, NUM}, base = {q, 0}, en = {q, 1};
		struct vu_vring_addr a = {.index = q,
					  .desc_uva = G_UVA + g_ring_off(q, 0),
					  .used_uva = G_UVA + g_ring_off(q, 2),
					  .avail_uva = G_UVA + g_ring_off(q, 1)};
		uint64_t idx = q;

		qsend(fd, VU_SET_VRING_NUM, VU_VERSION, &num, 8, NULL, 0);
		qsend(fd, VU_SET_VRING_BASE, VU_VERSION, &base, 8, NULL, 0);
		qsend(fd, VU_SET_VRING_ADDR, VU_VERSION, &a, sizeof(a), NULL, 0);
		qsend(fd, VU_SET_VRING_KICK, VU_VERSION, &idx, 8, &kick[q], 1);
		qsend(fd, VU_SET_VRING_CALL, VU_VERSION, &idx, 8, &call[q], 1);
		qsend(fd, VU_SET_VRING_ENABLE, VU_VERSION, &en, 8, NULL, 0);
	}
	/* REPLY_ACK once more: everything before it has been handled when it comes back. */
	qsend(fd, VU_SET_FEATURES, VU_VERSION | VU_FLAG_NEED_REPLY, &feat, 8, NULL, 0);
	assert_int_equal(qreply(fd, VU_SET_FEATURES, &v, 8), 8);
}

static void kick(int efd)
{
	uint64_t one = 1;
	assert_int_equal(write(efd, &one, 8), 8);
}

/* The next packet on the guest's rx ring, waiting for the call eventfd. */
static void guest_recv(struct fake_guest *g, int call0, struct vsock_hdr *h, void *buf)
{
	for (int i = 0; i < 10; i++) {
		if (g_recv(g, h, buf, 65536))
			return;
		assert_true(wait_fd(call0, POLLIN));
		drain(call0);
	}
	fail_msg("no packet from the device");
}

static void test_service_end_to_end(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct mtd_vsock_config cfg = {.guest_cid = G_CID, .port = 5253};
	struct mtd_vsock *v;
	struct mtd_vsock_claim *claim;
	struct mtd_vsock_state st;
	struct fake_guest g;
	struct vsock_hdr h;
	static uint8_t buf[65536];
	int kickfd[2], call[2];
	(void)state;

	snprintf(dir, sizeof(dir), "/tmp/mtd-vsock-svc-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vm1.sock", dir);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	int memfd = memfd_create("guest", MFD_CLOEXEC);
	assert_int_equal(ftruncate(memfd, G_BYTES), 0);
	uint8_t *ram = mmap(NULL, G_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	assert_true(ram != MAP_FAILED);
	g_init_ram(&g, NUM, ram);
	for (int i = 0; i < 2; i++) {
		kickfd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		call[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
	int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	/* The service finds the socket in its directory and connects. */
	snprintf(cfg.dir, sizeof(cfg.dir), "%s", dir);
	assert_int_equal(mtd_vsock_start(&cfg, &v), 0);
	assert_int_equal(mtd_vsock_claim(v, "vm1", wake, &claim), 0);
	assert_int_equal(mtd_vsock_claim(v, "vm1", wake, &claim), -EEXIST);
	int q = accept_qemu(lfd);
	qemu_setup(q, memfd, kickfd, call);
	assert_true(mtd_vsock_has_endpoint(v, "vm1"));
	mtd_vsock_state(claim, &st);
	assert_true(st.connected && st.initialised && st.started);
	assert_int_equal(st.qemu_pid, getpid());
	assert_int_equal(st.nr_regions, 1);
	assert_int_equal(st.regions[0].qemu_va, G_UVA);

	/* The agent connects: a stream for the claimant. */
	for (int i = 0; i < 8; i++)
		g_post_rx(&g, 4096 + 44);
	drain(wake);
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1000, 5253, 0);
	g_send(&g, &h, NULL, 0);
	kick(kickfd[1]);
	guest_recv(&g, call[0], &h, buf);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	int s = -EAGAIN;
	for (int i = 0; i < 10 && s < 0; i++) {
		s = mtd_vsock_take_fd(claim);
		if (s < 0)
			assert_true(wait_fd(wake, POLLIN));
		drain(wake);
	}
	assert_true(s >= 0);
	assert_int_equal(mtd_vsock_take_fd(claim), -EAGAIN); /* taken once */

	/* Bytes both ways. */
	g_hdr(&h, VIRTIO_VSOCK_OP_RW, 1000, 5253, 4);
	g_send(&g, &h, "ping", 4);
	kick(kickfd[1]);
	assert_true(wait_fd(s, POLLIN));
	assert_int_equal(recv(s, buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(send(s, "pong!", 5, MSG_NOSIGNAL), 5);
	guest_recv(&g, call[0], &h, buf);
	assert_int_equal(h.op, VIRTIO_VSOCK_OP_RW);
	assert_int_equal(h.len, 5);
	assert_memory_equal(buf, "pong!", 5);
	mtd_vsock_state(claim, &st);
	assert_int_equal(st.dev.connects, 1);
	assert_int_equal(st.dev.rx_bytes, 4);
	assert_int_equal(st.dev.tx_bytes, 5);

	/* QEMU's end drops; the service comes back on a new connection with no set-up on it:
	 * memtided's state after a restart of its own.  The stream ends with the session. */
	uint64_t session = st.session;
	close(q);
	q = accept_qemu(lfd);
	assert_true(wait_fd(s, POLLIN));
	assert_int_equal(recv(s, buf, 1, 0), 0);
	close(s);
	mtd_vsock_state(claim, &st);
	assert_true(st.connected);
	assert_false(st.initialised);
	assert_false(st.started);
	assert_true(st.session > session);
	struct vu_vring_state gb = {1, 0};
	qsend(q, VU_GET_VRING_BASE, VU_VERSION, &gb, 8, NULL, 0);
	assert_int_equal(qreply(q, VU_GET_VRING_BASE, &gb, sizeof(gb)), 8);
	assert_int_equal(gb.num, 0);

	/* Set up again (QEMU's start after stop/cont); released, requests are reset. */
	qemu_setup(q, memfd, kickfd, call);
	mtd_vsock_release(claim);
	g_hdr(&h, VIRTIO_VSOCK_OP_REQUEST, 1001, 5253, 0);
	g_send(&g, &h, NULL, 0);
	kick(kickfd[1]);
	guest_recv(&g, call[0], &h, buf);
	while (h.op != VIRTIO_VSOCK_OP_RST || h.dst_port != 1001)
		guest_recv(&g, call[0], &h, buf);

	mtd_vsock_stop(v);
	close(q);
	close(lfd);
	unlink(path);
	rmdir(dir);
	g_free(&g);
	munmap(ram, G_BYTES);
	close(memfd);
	for (int i = 0; i < 2; i++) {
		close(kickfd[i]);
		close(call[i]);
	}
	close(wake);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_service_end_to_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
