// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vring.c - the device side of a split virtqueue over a guest's memory (vhost_int.h).
 *
 * The guest is hostile.  What that means here, in the order vq_pop meets it:
 *   1. avail->idx is read once (acquire); if it runs more than num entries ahead of what
 *      we took, the ring is broken: nothing sane can be taken from it any more.
 *   2. the head index is read once and must be < num, else the ring is broken (we could
 *      not even name the chain in the used ring).
 *   3. each descriptor is read once, field by field, into locals; the locals are checked:
 *      next < num, no INDIRECT (never negotiated), no readable descriptor after a writable
 *      one, at most min(num, VQ_MAX_CHAIN) descriptors (a loop ends there), every
 *      buffer inside the memory table (vu_mem_iov), at most VQ_MAX_IOV pieces and at
 *      most 1 GiB in all.  A chain that breaks any of these is given back as used with
 *      length 0 and counted: the guest loses that buffer, nothing else happens.
 * No allocation anywhere: a chain lives in a caller's struct vq_chain (fixed size),
 * whatever num or the descriptors say.  Cost: one pass over at most VQ_MAX_CHAIN
 * descriptors and VQ_MAX_IOV region lookups per chain.
 *
 * Ordering (virtio 1.2, 2.7.13): read avail->idx with acquire before the ring entry it
 * covers; write the used element before used->idx (release); a full barrier between
 * publishing used->idx and reading avail->flags to decide whether to interrupt.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <linux/virtio_ring.h>

#include "vsock/vhost_int.h"

#define CHAIN_MAX_BYTES (1u << 30)

static uint16_t ld16(const uint8_t *p)
{
	return __atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_RELAXED);
}

static uint32_t ld32(const uint8_t *p)
{
	return __atomic_load_n((const uint32_t *)(const void *)p, __ATOMIC_RELAXED);
}

static uint64_t ld64(const uint8_t *p)
{
	return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_RELAXED);
}

void vq_init(struct vq *vr)
{
	memset(vr, 0, sizeof(*vr));
	vr->kick_fd = vr->call_fd = vr->err_fd = -1;
}

int vq_translate(struct vq *vr, const struct vu_mem *m)
{
	uint64_t num = vr->num;
	uint8_t *d, *a, *u;

	vr->desc = vr->avail = vr->used = NULL;
	if (!num)
		return -EINVAL;
	d = vu_mem_uva(m, vr->desc_uva, 16 * num);
	a = vu_mem_uva(m, vr->avail_uva, 4 + 2 * num);
	u = vu_mem_uva(m, vr->used_uva, 4 + 8 * num);
	if (!d || !a || !u)
		return -EFAULT;
	/* Atomic 16/32/64-bit accesses need natural alignment of our pointers. */
	if (((uintptr_t)d & 15) || ((uintptr_t)a & 1) || ((uintptr_t)u & 3))
		return -EINVAL;
	vr->desc = d;
	vr->avail = a;
	vr->used = u;
	vr->mem_generation = m->generation;
	return 0;
}

bool vq_ready(const struct vq *vr)
{
	return vr->num && vr->desc && vr->started && vr->enabled && !vr->broken;
}

uint16_t vq_used_idx_mem(const struct vq *vr)
{
	return vr->used ? __atomic_load_n((const uint16_t *)(const void *)(vr->used + 2),
					  __ATOMIC_ACQUIRE)
			: 0;
}

/* First access after a start: our used index is what the guest's memory says; and when a
 * restart left us without the base, the available index resumes there too (every chain we
 * ever took was returned at once, so nothing was in flight). */
static void sync_indexes(struct vq *vr)
{
	if (vr->synced)
		return;
	vr->used_idx = vq_used_idx_mem(vr);
	if (vr->base_unknown) {
		vr->last_avail = vr->used_idx;
		vr->base_unknown = false;
	}
	vr->synced = true;
}

uint16_t vq_avail_pending(const struct vq *vr)
{
	if (!vq_ready(vr))
		return 0;
	uint16_t idx =
	    __atomic_load_n((const uint16_t *)(const void *)(vr->avail + 2), __ATOMIC_ACQUIRE);
	uint16_t n = (uint16_t)(idx - vr->last_avail);

	return n > vr->num ? 0 : n;
}

void vq_push(struct vq *vr, uint16_t head, uint32_t len)
{
	uint8_t *e;

	if (!vr->used)
		return;
	sync_indexes(vr);
	e = vr->used + 4 + 8 * (size_t)(vr->used_idx % vr->num);
	__atomic_store_n((uint32_t *)(void *)e, (uint32_t)head, __ATOMIC_RELAXED);
	__atomic_store_n((uint32_t *)(void *)(e + 4), len, __ATOMIC_RELAXED);
	vr->used_idx++;
	__atomic_store_n((uint16_t *)(void *)(vr->used + 2), vr->used_idx, __ATOMIC_RELEASE);
	vr->signal_due = true;
}

bool vq_notify(struct vq *vr)
{
	uint64_t one = 1;

	if (!vr->signal_due || vr->call_fd < 0 || !vr->avail)
		return false;
	vr->signal_due = false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (ld16(vr->avail) & VRING_AVAIL_F_NO_INTERRUPT)
		return false;
	/* An eventfd write fails only when its counter would overflow: it is signalled then. */
	return write(vr->call_fd, &one, sizeof(one)) == sizeof(one);
}

/* A chain that broke a rule goes back unused: the guest gets its buffer back, empty. */
static int drop_chain(struct vq *vr, uint16_t head)
{
	vq_push(vr, head, 0);
	vr->dropped_chains++;
	return -EFAULT;
}

int vq_pop(struct vq *vr, const struct vu_mem *m, struct vq_chain *c)
{
	uint16_t avail_idx, head, idx, limit;
	uint64_t bytes = 0;

	if (!vq_ready(vr))
		return 0;
	if (vr->mem_generation != m->generation && vq_translate(vr, m) < 0) {
		vr->broken = true;
		return -EIO;
	}
	sync_indexes(vr);
	/* Step 1: how far the guest has gone. */
	avail_idx =
	    __atomic_load_n((const uint16_t *)(const void *)(vr->avail + 2), __ATOMIC_ACQUIRE);
	if (avail_idx == vr->last_avail)
		return 0;
	if ((uint16_t)(avail_idx - vr->last_avail) > vr->num) {
		vr->broken = true;
		return -EIO;
	}
	/* Step 2: the head. */
	head = ld16(vr->avail + 4 + 2 * (size_t)(vr->last_avail % vr->num));
	vr->last_avail++;
	if (head >= vr->num) {
		vr->broken = true;
		return -EIO;
	}
	/* Step 3: the chain. */
	memset(c, 0, offsetof(struct vq_chain, iov));
	c->head = head;
	limit = vr->num < VQ_MAX_CHAIN ? vr->num : VQ_MAX_CHAIN;
	idx = head;
	for (uint16_t count = 0;; count++) {
		const uint8_t *d = vr->desc + 16 * (size_t)idx;
		uint64_t addr = ld64(d);
		uint32_t len = ld32(d + 8);
		uint16_t flags = ld16(d + 12), next = ld16(d + 14);
		unsigned n = c->nr_read + c->nr_write;

		if (count >= limit || (flags & VRING_DESC_F_INDIRECT))
			return drop_chain(vr, head);
		if (!(flags & VRING_DESC_F_WRITE) && c->nr_write)
			return drop_chain(vr, head);
		if (vu_mem_iov(m, addr, len, c->iov, &n, VQ_MAX_IOV) < 0)
			return drop_chain(vr, head);
		bytes += len;
		if (bytes > CHAIN_MAX_BYTES)
			return drop_chain(vr, head);
		if (flags & VRING_DESC_F_WRITE) {
			c->nr_write = n - c->nr_read;
			c->write_bytes += len;
		} else {
			c->nr_read = n;
			c->read_bytes += len;
		}
		if (!(flags & VRING_DESC_F_NEXT))
			break;
		if (next >= vr->num)
			return drop_chain(vr, head);
		idx = next;
	}
	return 1;
}

size_t vq_chain_read(const struct vq_chain *c, size_t off, void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = 0; i < c->nr_read && done < len; i++) {
		size_t l = c->iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		size_t n = l - off < len - done ? l - off : len - done;
		memcpy((uint8_t *)buf + done, (const uint8_t *)c->iov[i].iov_base + off, n);
		done += n;
		off = 0;
	}
	return done;
}

size_t vq_chain_write(const struct vq_chain *c, size_t off, const void *buf, size_t len)
{
	size_t done = 0;

	for (unsigned i = c->nr_read; i < c->nr_read + c->nr_write && done < len; i++) {
		size_t l = c->iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		size_t n = l - off < len - done ? l - off : len - done;
		memcpy((uint8_t *)c->iov[i].iov_base + off, (const uint8_t *)buf + done, n);
		done += n;
		off = 0;
	}
	return done;
}
