// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_vhost_vring.c - libFuzzer target for memtided's vhost-user-vsock back end
 * (host/vsock/): everything a guest or QEMU can put in front of it.
 *
 * The first byte picks what the rest of the input is:
 *   even: guest memory.  Eight knob bytes (ring sizes up to 16, budgets, what the host
 *         side does), then the image of 64 KiB of "guest RAM" (two adjacent regions split
 *         at 2 KiB, so buffers can straddle them) holding both rings at its start -
 *         descriptor tables, available rings, indexes and flags - and packet headers and
 *         payloads wherever the descriptors point; the vsock device runs over it for a few
 *         rounds, the host side taking and queueing bytes as the knobs direct.  Nothing may read or write outside
 *         the 64 KiB (ASan), loop without bound, or grow: every chain the device takes
 *         goes back used, and nothing else does (its used index moves by exactly what its
 *         available index took).  The check reads the device's own indexes, not guest
 *         memory: a guest may point a receive buffer at its own rings, and the device then
 *         writes packet bytes over used->idx or avail->idx, as the guest asked (found by
 *         a 4.7M-execution run: the used index in memory "moved" by a packet header).
 *   odd:  a stream of vhost-user messages from QEMU, written into a socketpair and read by
 *         a session (no fds: every request that needs one must be refused, never crash).
 *         Whatever the session answers must be a well-formed reply.
 * Seeds in tests/fuzz/corpus/vhost_vring/: a fair REQUEST + RW exchange in guest memory,
 * and QEMU's recorded start-up sequence.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vsock/vhost.h"
#include "vsock/vhost_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RAM_BYTES (64u * 1024)
#define UVA_BASE  0x7f0000000000ull
#define SPLIT     2048u /* region 0 holds both rings: [0, 0x400) and [0x400, 0x800) */

static uint8_t ram[RAM_BYTES] __attribute__((aligned(4096)));

/* The device's used index: its shadow once it has read the ring, before that what it will
 * start from (guest memory, which only this ring's own writes can change before then). */
static uint16_t used_idx(const struct vq *vr)
{
	if (vr->synced)
		return vr->used_idx;
	return vr->used ? vq_used_idx_mem(vr) : 0;
}

static void guest_memory(const uint8_t *data, size_t size)
{
	struct vu_memory_wire w = {.nregions = 2};
	uint8_t *host[2] = {ram, ram + SPLIT};
	struct vu_mem m = {0};
	struct vsock_dev *d;
	struct vsock_dev_config cfg = {.guest_cid = 3, .port = 5253};
	struct vq rings[2];
	char why[200];
	uint8_t knobs[8] = {0};

	memcpy(knobs, data, size < 8 ? size : 8);
	data += size < 8 ? size : 8;
	size -= size < 8 ? size : 8;
	memset(ram, 0, RAM_BYTES);
	memcpy(ram, data, size < RAM_BYTES ? size : RAM_BYTES);
	w.r[0] = (struct vu_region_wire){.gpa = 0, .size = SPLIT, .uva = UVA_BASE};
	w.r[1] = (struct vu_region_wire){
	    .gpa = SPLIT, .size = RAM_BYTES - SPLIT, .uva = UVA_BASE + SPLIT};
	if (vu_mem_set_raw(&m, &w, host, why, sizeof(why)) != 0)
		__builtin_trap();
	if (vsock_dev_new(&cfg, &d) != 0)
		abort();
	vsock_dev_set_accepting(d, (knobs[0] & 1) != 0);
	/* Ring sizes from the input (powers of two up to 16); ring q at q * 0x400: descriptors
	 * at +0 (256 bytes), available ring at +0x100, used ring at +0x180 (132 bytes). */
	for (unsigned q = 0; q < 2; q++) {
		vq_init(&rings[q]);
		rings[q].num = (uint16_t)(1u << (knobs[1 + q] % 5));
		rings[q].desc_uva = UVA_BASE + q * 0x400;
		rings[q].avail_uva = UVA_BASE + q * 0x400 + 0x100;
		rings[q].used_uva = UVA_BASE + q * 0x400 + 0x180;
		rings[q].base_unknown = knobs[3] & (1u << q);
		rings[q].started = rings[q].enabled = true;
		if (vq_translate(&rings[q], &m) != 0)
			__builtin_trap(); /* the fixed layout always fits */
	}
	for (int round = 0; round < 4; round++) {
		uint16_t before[2] = {used_idx(&rings[0]), used_idx(&rings[1])};
		uint16_t took[2] = {rings[0].last_avail, rings[1].last_avail};

		(void)vsock_dev_process(d, &rings[0], &rings[1], &m, 1u + knobs[4] % 64);
		for (unsigned q = 0; q < 2; q++) {
			uint16_t moved = (uint16_t)(used_idx(&rings[q]) - before[q]);

			took[q] = (uint16_t)(rings[q].last_avail - took[q]);
			/* every chain taken is returned, and nothing else (a resync may jump
			 * both indexes once: only when base_unknown was set) */
			if (!(knobs[3] & (1u << q)) && !rings[q].broken && rings[q].synced &&
			    moved != took[q])
				__builtin_trap();
		}
		/* The host side: take some of the guest's bytes, queue some of its own. */
		const uint8_t *p;
		size_t n = vsock_dev_in_peek(d, &p);
		if (n > VSOCK_CONN_BUF)
			__builtin_trap();
		if (n)
			vsock_dev_in_consume(d, n / (1u + knobs[5] % 4));
		if (knobs[6] & 1)
			(void)vsock_dev_out_push(d, ram, knobs[6] * 97u);
		if (knobs[7] & (1u << round))
			vsock_dev_host_close(d);
		struct vsock_conn_view v;
		vsock_dev_conn(d, &v);
		if (v.in_bytes > VSOCK_CONN_BUF || v.out_room > VSOCK_CONN_BUF)
			__builtin_trap();
	}
	vsock_dev_free(d);
	vu_mem_clear(&m);
}

static void qemu_messages(const uint8_t *data, size_t size)
{
	struct vsock_dev_config cfg = {.guest_cid = 3, .port = 5253};
	struct vsock_dev *d;
	struct vu_session *s;
	int sv[2];
	uint8_t reply[512];

	if (size > 4096 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	if (vsock_dev_new(&cfg, &d) != 0 || vu_session_new(&vsock_dev_ops, d, &s) != 0)
		abort();
	if (size && write(sv[0], data, size) != (ssize_t)size)
		abort();
	shutdown(sv[0], SHUT_WR); /* EOF after the input: reads end instead of blocking */
	for (int i = 0; i < 64; i++) {
		int rc = vu_session_read(s, sv[1]);

		if (rc == -EPROTO || rc == -EPIPE || rc == -EAGAIN)
			break;
		if (rc != 0)
			break;
	}
	/* Every reply is a header with the reply flag and at most a payload's size. */
	for (;;) {
		struct vu_hdr h;
		ssize_t n = recv(sv[0], &h, sizeof(h), MSG_DONTWAIT);

		if (n <= 0)
			break;
		if (n != sizeof(h) || h.flags != (VU_VERSION | VU_FLAG_REPLY) ||
		    h.size > VU_PAYLOAD_MAX)
			__builtin_trap();
		if (h.size && recv(sv[0], reply, h.size, MSG_DONTWAIT) != (ssize_t)h.size)
			__builtin_trap();
	}
	vu_session_free(s);
	vsock_dev_free(d);
	close(sv[0]);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		qemu_messages(data + 1, size - 1);
	else
		guest_memory(data + 1, size - 1);
	return 0;
}
