/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * guest_ram.h - the guest RAM the host-side sources (idle, damon) watch, page by page, and
 * the host frames behind it (guest_ram.c).
 *
 * Both sources see host frames, which they reach through QEMU's mappings of its RAM blocks
 * (pagemap); libvmm ages guest-physical addresses.  The map between the two is QEMU's own,
 * checked (act/ram_layout.h: the monitor's flat view, gpa2hva, the memory devices and
 * QEMU's mappings, cross-checked): the one host-side eviction uses, so a page the source
 * calls cold is the page pageout would take.  A map that is not sure is refused, and so is
 * RAM the kernel's accessed-bit tracking cannot see (hugetlbfs: its pages are not on the
 * LRU).  Pages mapped to the kernel's shared zero page (guest RAM read but never written)
 * hold nothing of the guest's and no accessed bit of their own: they are left out of the
 * frames (mtd_guest_ram_frames) and marked free in libvmm each round.
 */
#ifndef MEMTIDE_HOST_ACCESS_GUEST_RAM_H
#define MEMTIDE_HOST_ACCESS_GUEST_RAM_H

#include <stddef.h>
#include <stdint.h>

#include "act/ram_layout.h"
#include "vmm.h"

struct mtd_guest_ram {
	struct mtd_ram_layout *layout;                /* checked; owned */
	struct vmm_range ranges[MTD_RAM_MAX_REGIONS]; /* libvmm's layout: the regions */
	size_t nr_ranges;
	uint64_t first_page[MTD_RAM_MAX_REGIONS + 1]; /* page index of each region */
	uint64_t pages;                               /* all regions' pages */
	int pagemap_fd;
	uint64_t zero_pfn;      /* the shared zero page's frame (0: not known) */
	uint64_t huge_zero_pfn; /* the first of THP's huge zero page's 512 (0: not known) */
	uint64_t *pm;           /* a pagemap chunk */
	uint64_t zero_pages;    /* pages on the zero page at the last mtd_guest_ram_frames */
};

/*
 * Ask QEMU (qmp, its monitor) for the checked map of process pid's guest RAM and open its
 * pagemap under proc_dir.  source names the caller in the refusals ("idle page tracking",
 * "DAMON").  0, or -errno with one sentence in why: -ENOTSUP (no monitor), -EPROTO (the map
 * could not be checked), -EOPNOTSUPP (hugetlbfs RAM), -ENOENT, -ENOMEM.
 */
int mtd_guest_ram_open(mtd_qmp_fn qmp, void *qmp_ctx, int pid, const char *proc_dir,
		       const char *source, struct mtd_guest_ram *r, char *why, size_t whylen);
void mtd_guest_ram_close(struct mtd_guest_ram *r);

/* The guest-physical address of page index page (0 .. r->pages - 1). */
uint64_t mtd_guest_ram_gpa(const struct mtd_guest_ram *r, uint64_t page);
/* Does page index page start a region (a run of pages must not cross one)? */
int mtd_guest_ram_region_start(const struct mtd_guest_ram *r, uint64_t page);

/* Read the frame of every page: pfn1[page] = frame + 1, or 0 when the page is not present
 * or on a shared zero page (then zero[page] = 1; zero may be NULL).  0 or -errno. */
int mtd_guest_ram_frames(struct mtd_guest_ram *r, uint64_t *pfn1, uint8_t *zero);

/* Mark the pages zero flags (from mtd_guest_ram_frames) free in libvmm: they hold nothing of
 * the guest's (vmm_hint_free), so neither the working set nor the eviction hand counts
 * them, and the guest's first write to one is fresh memory, no reuse. */
void mtd_guest_ram_hint_zero(const struct mtd_guest_ram *r, const uint8_t *zero,
			     struct vmm_guest *g);

#endif /* MEMTIDE_HOST_ACCESS_GUEST_RAM_H */
