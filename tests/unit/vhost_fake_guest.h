/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost_fake_guest.h - a guest driver in a test's own memory, for the vhost back end's unit
 * tests: 1 MiB of "guest RAM" at guest-physical 0x100000 (QEMU's address 0x7f0000100000),
 * a split virtqueue per ring as the Linux driver lays them out, and helpers that post
 * chains and read the used ring the way a driver would - or break every rule a hostile
 * driver can break, by writing the ring memory directly.
 *
 * Header-only (static functions) so each test program stays one file.  Ring q lives at
 * RAM offset q * 0x4000 (descriptors), + 0x1000 (available ring), + 0x2000 (used ring);
 * packet buffers come from a bump allocator above 0x10000.
 */
#ifndef MEMTIDE_TESTS_VHOST_FAKE_GUEST_H
#define MEMTIDE_TESTS_VHOST_FAKE_GUEST_H

#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_ring.h>

#include "vsock/vhost.h"
#include "vsock/vhost_int.h"

#define G_GPA       0x100000ull
#define G_BYTES     (1u << 20)
#define G_UVA       0x7f0000100000ull
#define G_BUF_START 0x10000u
#define G_CID       3u
#define G_QUEUES    2

struct gdesc {
	uint64_t gpa;
	uint32_t len;
	bool write;
};

struct fake_guest {
	uint8_t *ram;
	bool own_ram;
	struct vu_mem mem;
	struct vq vq[G_QUEUES];
	uint16_t num;
	uint16_t avail_idx[G_QUEUES];
	uint16_t next_desc[G_QUEUES];
	uint16_t used_seen[G_QUEUES];
	uint64_t head_gpa[G_QUEUES][256]; /* first buffer of the chain at each head */
	uint32_t buf_next;
};

static inline uint8_t *g_ptr(struct fake_guest *g, uint64_t gpa)
{
	return g->ram + (gpa - G_GPA);
}

static inline uint64_t g_ring_off(unsigned q, unsigned part)
{
	return (uint64_t)q * 0x4000 + part * 0x1000;
}

/* The guest's view of ram (G_BYTES at G_GPA), e.g. a memfd mapping a session also maps. */
static inline void g_init_ram(struct fake_guest *g, uint16_t num, uint8_t *ram)
{
	struct vu_memory_wire w = {.nregions = 1};
	char why[160];

	memset(g, 0, sizeof(*g));
	g->ram = ram;
	g->num = num;
	g->buf_next = G_BUF_START;
	w.r[0] = (struct vu_region_wire){.gpa = G_GPA, .size = G_BYTES, .uva = G_UVA};
	uint8_t *host[1] = {g->ram};
	if (vu_mem_set_raw(&g->mem, &w, host, why, sizeof(why)) != 0)
		abort();
	for (unsigned q = 0; q < G_QUEUES; q++) {
		struct vq *vr = &g->vq[q];

		vq_init(vr);
		vr->num = num;
		vr->desc_uva = G_UVA + g_ring_off(q, 0);
		vr->avail_uva = G_UVA + g_ring_off(q, 1);
		vr->used_uva = G_UVA + g_ring_off(q, 2);
		if (vq_translate(vr, &g->mem) != 0)
			abort();
		vr->started = vr->enabled = true;
	}
}

static inline void g_init(struct fake_guest *g, uint16_t num)
{
	uint8_t *ram = aligned_alloc(4096, G_BYTES);

	memset(ram, 0, G_BYTES);
	g_init_ram(g, num, ram);
	g->own_ram = true;
}

static inline void g_free(struct fake_guest *g)
{
	vu_mem_clear(&g->mem);
	if (g->own_ram)
		free(g->ram);
}

static inline uint64_t g_alloc(struct fake_guest *g, uint32_t len)
{
	if (g->buf_next + len > G_BYTES)
		g->buf_next = G_BUF_START;
	uint64_t gpa = G_GPA + g->buf_next;
	g->buf_next += (len + 63) & ~63u;
	return gpa;
}

/* Raw ring writes (what a hostile driver can do at will). */
static inline void g_set_avail_idx(struct fake_guest *g, unsigned q, uint16_t idx)
{
	uint16_t v = htole16(idx);
	memcpy(g->ram + g_ring_off(q, 1) + 2, &v, 2);
}

static inline void g_set_avail_ring(struct fake_guest *g, unsigned q, uint16_t slot, uint16_t head)
{
	uint16_t v = htole16(head);
	memcpy(g->ram + g_ring_off(q, 1) + 4 + 2 * (size_t)(slot % g->num), &v, 2);
}

static inline void g_set_desc(struct fake_guest *g, unsigned q, uint16_t i, uint64_t gpa,
			      uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *d = g->ram + g_ring_off(q, 0) + 16 * (size_t)i;
	uint64_t a = htole64(gpa);
	uint32_t l = htole32(len);
	uint16_t f = htole16(flags), n = htole16(next);

	memcpy(d, &a, 8);
	memcpy(d + 8, &l, 4);
	memcpy(d + 12, &f, 2);
	memcpy(d + 14, &n, 2);
}

static inline void g_set_avail_flags(struct fake_guest *g, unsigned q, uint16_t flags)
{
	uint16_t v = htole16(flags);
	memcpy(g->ram + g_ring_off(q, 1), &v, 2);
}

/* Post a well-formed chain of n descriptors; returns its head. */
static inline uint16_t g_add_chain(struct fake_guest *g, unsigned q, const struct gdesc *d,
				   unsigned n)
{
	uint16_t head = g->next_desc[q];

	for (unsigned i = 0; i < n; i++) {
		uint16_t idx = (uint16_t)((head + i) % g->num);
		uint16_t nxt = (uint16_t)((head + i + 1) % g->num);
		uint16_t fl = (uint16_t)((d[i].write ? VRING_DESC_F_WRITE : 0) |
					 (i + 1 < n ? VRING_DESC_F_NEXT : 0));

		g_set_desc(g, q, idx, d[i].gpa, d[i].len, fl, nxt);
	}
	g->next_desc[q] = (uint16_t)((head + n) % g->num);
	g->head_gpa[q][head % 256] = d[0].gpa;
	g_set_avail_ring(g, q, g->avail_idx[q], head);
	g->avail_idx[q]++;
	g_set_avail_idx(g, q, g->avail_idx[q]);
	return head;
}

static inline uint16_t g_used_idx(struct fake_guest *g, unsigned q)
{
	uint16_t v;
	memcpy(&v, g->ram + g_ring_off(q, 2) + 2, 2);
	return le16toh(v);
}

/* The next used element the device returned: true and {id, len}, or false. */
static inline bool g_take_used(struct fake_guest *g, unsigned q, uint32_t *id, uint32_t *len)
{
	*id = *len = 0;
	if (g_used_idx(g, q) == g->used_seen[q])
		return false;
	const uint8_t *e = g->ram + g_ring_off(q, 2) + 4 + 8 * (size_t)(g->used_seen[q] % g->num);
	uint32_t a, b;
	memcpy(&a, e, 4);
	memcpy(&b, e + 4, 4);
	*id = le32toh(a);
	*len = le32toh(b);
	g->used_seen[q]++;
	return true;
}

/* ---- vsock packets, as the Linux driver sends and receives them ---- */

static inline void g_hdr(struct vsock_hdr *h, uint16_t op, uint32_t src_port, uint32_t dst_port,
			 uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = G_CID;
	h->dst_cid = VSOCK_HOST_CID;
	h->src_port = src_port;
	h->dst_port = dst_port;
	h->len = len;
	h->type = VIRTIO_VSOCK_TYPE_STREAM;
	h->op = op;
	h->buf_alloc = 256 * 1024;
}

/* A packet on the tx ring: header in one descriptor, payload in a second (as Linux does). */
static inline uint16_t g_send(struct fake_guest *g, const struct vsock_hdr *h, const void *payload,
			      uint32_t len)
{
	struct gdesc d[2];
	struct virtio_vsock_hdr w;
	unsigned n = 1;

	vsock_hdr_encode(h, &w);
	d[0].gpa = g_alloc(g, sizeof(w));
	d[0].len = sizeof(w);
	d[0].write = false;
	memcpy(g_ptr(g, d[0].gpa), &w, sizeof(w));
	if (len) {
		d[1].gpa = g_alloc(g, len);
		d[1].len = len;
		d[1].write = false;
		memcpy(g_ptr(g, d[1].gpa), payload, len);
		n = 2;
	}
	return g_add_chain(g, 1, d, n);
}

/* A receive buffer on the rx ring: one writable descriptor of size bytes. */
static inline uint16_t g_post_rx(struct fake_guest *g, uint32_t size)
{
	struct gdesc d = {.gpa = g_alloc(g, size), .len = size, .write = true};

	return g_add_chain(g, 0, &d, 1);
}

/* The next packet the device wrote on the rx ring: true with its header and payload. */
static inline bool g_recv(struct fake_guest *g, struct vsock_hdr *h, void *payload, size_t cap)
{
	uint32_t id, len;
	struct virtio_vsock_hdr w;

	memset(h, 0, sizeof(*h));
	if (!g_take_used(g, 0, &id, &len))
		return false;
	if (len < sizeof(w))
		abort();
	uint8_t *p = g_ptr(g, g->head_gpa[0][id % 256]);
	memcpy(&w, p, sizeof(w));
	vsock_hdr_decode(&w, h);
	if (h->len != len - sizeof(w) || h->len > cap)
		abort();
	memcpy(payload, p + sizeof(w), h->len);
	return true;
}

#endif /* MEMTIDE_TESTS_VHOST_FAKE_GUEST_H */
