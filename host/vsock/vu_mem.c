// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vu_mem.c - the guest memory table of a vhost-user session (vhost_int.h).
 *
 * Layout of one mapping: QEMU sends (gpa, size, uva, mmap_offset, fd) per region.  mmap
 * offsets must be page aligned while mmap_offset need not be, so, as QEMU's libvhost-user
 * does, we map the fd from offset 0 for mmap_offset + size bytes and point host at
 * map_base + mmap_offset:
 *
 *     fd:        0 ........ mmap_offset ................ mmap_offset + size
 *     map_base:  [------------------ map_len --------------------------------]
 *     host:                 ^ guest-physical gpa
 *
 * MAP_SHARED, so our writes (rx packets, used rings) are the guest's memory, and
 * MAP_NORESERVE: nothing is populated until touched.  We only ever touch the rings and the
 * packet buffers the guest hands us, so the guest's RAM is not mapped (page-table wise) in
 * memtided beyond a few pages; host-side pageout of the rest is unaffected (a page mapped
 * by two processes is skipped by MADV_PAGEOUT, shared/README.md).
 *
 * Translations are linear scans of at most VU_MAX_REGIONS regions: a descriptor costs at
 * most 8 comparisons, which is nothing beside the copy it guards.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "vsock/vhost_int.h"

/* [a, a + alen) and [b, b + blen) overlap (lengths non-zero, no overflow: checked first). */
static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* Step 1 of a new table: the regions' numbers alone, before any fd is touched. */
static int check_regions(const struct vu_memory_wire *w, char *why, size_t whylen)
{
	for (uint32_t i = 0; i < w->nregions; i++) {
		const struct vu_region_wire *r = &w->r[i];

		if (r->size == 0 || r->gpa + r->size < r->gpa || r->uva + r->size < r->uva ||
		    r->mmap_offset + r->size < r->mmap_offset ||
		    r->mmap_offset + r->size > SIZE_MAX) {
			snprintf(why, whylen,
				 "region %u: size 0x%llx at gpa 0x%llx, uva 0x%llx, offset 0x%llx "
				 "(empty or wrapping)",
				 i, (unsigned long long)r->size, (unsigned long long)r->gpa,
				 (unsigned long long)r->uva, (unsigned long long)r->mmap_offset);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++) {
			const struct vu_region_wire *q = &w->r[j];

			if (overlap(r->gpa, r->size, q->gpa, q->size) ||
			    overlap(r->uva, r->size, q->uva, q->size)) {
				snprintf(why, whylen, "regions %u and %u overlap", j, i);
				return -EINVAL;
			}
		}
	}
	return 0;
}

static void unmap_all(struct vu_mem *m)
{
	for (unsigned i = 0; i < m->n; i++)
		if (m->r[i].map_base)
			munmap(m->r[i].map_base, m->r[i].map_len);
	m->n = 0;
}

static void install(struct vu_mem *m, const struct vu_mem *next)
{
	uint64_t gen = m->generation;

	unmap_all(m);
	*m = *next;
	m->generation = gen + 1;
}

int vu_mem_set(struct vu_mem *m, const struct vu_memory_wire *w, const int *fds, char *why,
	       size_t whylen)
{
	struct vu_mem next;
	int rc;

	if (w->nregions == 0 || w->nregions > VU_MAX_REGIONS) {
		snprintf(why, whylen, "%u regions (1 to %d)", w->nregions, VU_MAX_REGIONS);
		return -EINVAL;
	}
	rc = check_regions(w, why, whylen);
	if (rc < 0)
		return rc;
	memset(&next, 0, sizeof(next));
	/* Step 2: map each region, after checking that its file is long enough. */
	for (uint32_t i = 0; i < w->nregions; i++) {
		const struct vu_region_wire *r = &w->r[i];
		struct vu_region *d = &next.r[i];
		struct stat st;

		if (fstat(fds[i], &st) < 0) {
			rc = -errno;
			snprintf(why, whylen, "region %u: fstat: %s", i, strerror(errno));
			goto fail;
		}
		if (st.st_size < 0 || (uint64_t)st.st_size < r->mmap_offset + r->size) {
			snprintf(why, whylen,
				 "region %u: its file holds %lld bytes, the region needs %llu", i,
				 (long long)st.st_size,
				 (unsigned long long)r->mmap_offset + r->size);
			rc = -EINVAL;
			goto fail;
		}
		d->map_len = (size_t)(r->mmap_offset + r->size);
		d->map_base = mmap(NULL, d->map_len, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_NORESERVE, fds[i], 0);
		if (d->map_base == MAP_FAILED) {
			rc = -errno;
			d->map_base = NULL;
			snprintf(why, whylen, "region %u: mmap of %zu bytes: %s", i, d->map_len,
				 strerror(errno));
			goto fail;
		}
		/* Never in a core dump: it is the guest's memory, not ours. */
		(void)madvise(d->map_base, d->map_len, MADV_DONTDUMP);
		d->gpa = r->gpa;
		d->size = r->size;
		d->uva = r->uva;
		d->mmap_offset = r->mmap_offset;
		d->host = (uint8_t *)d->map_base + r->mmap_offset;
		next.n = i + 1;
	}
	install(m, &next);
	return 0;
fail:
	unmap_all(&next);
	return rc;
}

int vu_mem_set_raw(struct vu_mem *m, const struct vu_memory_wire *w, uint8_t *const *host,
		   char *why, size_t whylen)
{
	struct vu_mem next;
	int rc;

	if (w->nregions == 0 || w->nregions > VU_MAX_REGIONS) {
		snprintf(why, whylen, "%u regions (1 to %d)", w->nregions, VU_MAX_REGIONS);
		return -EINVAL;
	}
	rc = check_regions(w, why, whylen);
	if (rc < 0)
		return rc;
	memset(&next, 0, sizeof(next));
	for (uint32_t i = 0; i < w->nregions; i++) {
		next.r[i].gpa = w->r[i].gpa;
		next.r[i].size = w->r[i].size;
		next.r[i].uva = w->r[i].uva;
		next.r[i].mmap_offset = w->r[i].mmap_offset;
		next.r[i].host = host[i];
	}
	next.n = w->nregions;
	install(m, &next);
	return 0;
}

void vu_mem_clear(struct vu_mem *m)
{
	unmap_all(m);
	m->generation++;
}

void *vu_mem_gpa(const struct vu_mem *m, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct vu_region *r = &m->r[i];

		if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa))
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

void *vu_mem_uva(const struct vu_mem *m, uint64_t uva, uint64_t len)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct vu_region *r = &m->r[i];

		if (uva >= r->uva && uva - r->uva <= r->size && len <= r->size - (uva - r->uva))
			return r->host + (uva - r->uva);
	}
	return NULL;
}

int vu_mem_iov(const struct vu_mem *m, uint64_t gpa, uint32_t len, struct iovec *iov, unsigned *n,
	       unsigned max)
{
	/* Each round moves gpa into the next region or ends: at most VU_MAX_REGIONS rounds,
	 * since the regions do not overlap. */
	for (unsigned round = 0; len > 0; round++) {
		const struct vu_region *hit = NULL;

		if (round >= VU_MAX_REGIONS)
			return -EFAULT;
		for (unsigned i = 0; i < m->n; i++) {
			const struct vu_region *r = &m->r[i];

			if (gpa >= r->gpa && gpa - r->gpa < r->size) {
				hit = r;
				break;
			}
		}
		if (!hit)
			return -EFAULT;
		if (*n >= max)
			return -E2BIG;
		uint64_t room = hit->size - (gpa - hit->gpa);
		uint32_t piece = room < len ? (uint32_t)room : len;

		iov[*n].iov_base = hit->host + (gpa - hit->gpa);
		iov[*n].iov_len = piece;
		(*n)++;
		gpa += piece;
		len -= piece;
	}
	return 0;
}
