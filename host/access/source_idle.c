// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_idle.c - the idle access-bit source: Linux idle page tracking over the host frames
 * that back a guest's RAM (Documentation/admin-guide/mm/idle_page_tracking.rst).
 *
 * /sys/kernel/mm/page_idle/bitmap holds one bit per host page frame: writing 1 marks the
 * frame idle (the kernel clears the accessed bits of every mapping of it, through the MMU
 * notifiers on a KVM host: the guest's EPT/stage-2 accessed bits too); reading gives 1 for
 * frames still idle, 0 for frames accessed since.  Words are 64 bits, read and written at
 * 8-byte-aligned offsets (PFN / 64 * 8).  The frames come from QEMU's pagemap (bits 0-54,
 * present bit 63; root only: others read PFN 0) over its guest-RAM mapping.
 *
 * One round (age): 1. vmm_age_begin; 2. re-read the pagemap (frames move: compaction,
 * THP collapse, swap); 3. for each present page read its idle bit, and report the pages
 * that are not idle young (vmm_mark_young, in GPA runs); 4. mark every tracked frame idle
 * again.  The first round has nothing to compare with, so the constructor marks all frames
 * idle once.
 *
 * Cost per round: the pagemap read (8 bytes a page; the kernel walks QEMU's page tables)
 * and, for reads and writes of the bitmap, one rmap walk per frame in the kernel; about
 * 64 bytes of I/O per 4 KiB page in all.  A huge page is one folio: its idle state is shared
 * by its 512 frames, so a 2 MiB-backed guest is aged in 2 MiB units.
 *
 * This machine's kernel lacks CONFIG_IDLE_PAGE_TRACKING: the source says so and is not
 * chosen; tests/unit/test_access_idle.c runs it on a recorded pagemap and a bitmap file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/guest_layout.h"
#include "access/source.h"

#define PM_PFN_MASK ((1ULL << 55) - 1)
#define PM_PRESENT  (1ULL << 63)
#define CHUNK_PAGES 4096 /* pagemap entries read per pread */

struct idle_src {
	int pagemap_fd, bitmap_fd;
	uint64_t hva;         /* QEMU's mapping of the RAM block */
	uint64_t ram, lowmem; /* layout (guest_layout.c) */
	struct vmm_range ram_ranges[2];
	size_t nr_ram;
	uint64_t pages;    /* RAM pages (RAM-block offsets 0..pages-1) */
	uint64_t *pfn;     /* per RAM-block page: frame + 1, or 0 when not present */
	uint64_t *pm;      /* pagemap chunk */
	uint64_t *sorted;  /* scratch: the frames in ascending order */
	uint64_t nr_young; /* last round */
};

static int read_pagemap(struct idle_src *s)
{
	for (uint64_t p = 0; p < s->pages; p += CHUNK_PAGES) {
		uint64_t n = s->pages - p < CHUNK_PAGES ? s->pages - p : CHUNK_PAGES;
		off_t off = (off_t)(((s->hva >> VMM_PAGE_SHIFT) + p) * 8);
		ssize_t got = pread(s->pagemap_fd, s->pm, n * 8, off);

		if (got < 0)
			return -errno;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t e = (uint64_t)i * 8 < (uint64_t)got ? s->pm[i] : 0;
			s->pfn[p + i] =
			    (e & PM_PRESENT) && (e & PM_PFN_MASK) ? (e & PM_PFN_MASK) + 1 : 0;
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Step 4: write 1 for every tracked frame, each 64-frame word once with all its bits (the
 * kernel ignores 0 bits, but a word written twice must not depend on that).  The frames
 * are sorted first: guest pages and frames are in different orders.  O(n log n). */
static int mark_idle(struct idle_src *s)
{
	uint64_t n = 0, cur = UINT64_MAX, bits = 0;

	for (uint64_t p = 0; p < s->pages; p++)
		if (s->pfn[p])
			s->sorted[n++] = s->pfn[p] - 1;
	qsort(s->sorted, n, sizeof(*s->sorted), cmp_u64);
	for (uint64_t i = 0; i <= n; i++) {
		uint64_t w = i < n ? s->sorted[i] / 64 : UINT64_MAX;
		if (w != cur && cur != UINT64_MAX &&
		    pwrite(s->bitmap_fd, &bits, 8, (off_t)(cur * 8)) != 8)
			return -EIO;
		if (w != cur)
			bits = 0;
		cur = w;
		if (i < n)
			bits |= 1ULL << (s->sorted[i] % 64);
	}
	return 0;
}

static uint64_t gpa_of(const struct idle_src *s, uint64_t off)
{
	return s->lowmem && off >= s->lowmem ? off - s->lowmem + (1ULL << 32) : off;
}

static int idle_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct idle_src *s = ctx;
	uint64_t word_no = UINT64_MAX, word = 0, run = 0, run_start = 0;
	int rc;

	/* Step 1 */
	rc = vmm_age_begin(g, now_ms);
	if (rc < 0)
		return rc;
	/* Step 2 */
	rc = read_pagemap(s);
	if (rc < 0)
		return rc;
	/* Step 3 */
	s->nr_young = 0;
	for (uint64_t p = 0; p <= s->pages; p++) {
		bool young = false;
		if (p < s->pages && s->pfn[p]) {
			uint64_t f = s->pfn[p] - 1;
			if (f / 64 != word_no) {
				word_no = f / 64;
				if (pread(s->bitmap_fd, &word, 8, (off_t)(word_no * 8)) != 8)
					return -EIO;
			}
			young = !(word & (1ULL << (f % 64)));
		}
		/* runs never cross lowmem: the GPA jumps there */
		bool cont = young && run && p != s->lowmem >> VMM_PAGE_SHIFT;
		if (!cont && run) {
			(void)vmm_mark_young(g, gpa_of(s, run_start), run, false);
			s->nr_young += run;
			run = 0;
		}
		if (young) {
			if (!run)
				run_start = p << VMM_PAGE_SHIFT;
			run++;
		}
	}
	/* Step 4 */
	return mark_idle(s);
}

static bool idle_fresh(void *ctx, uint64_t now_ms)
{
	(void)ctx;
	(void)now_ms;
	return true;
}

static void idle_destroy(void *ctx)
{
	struct idle_src *s = ctx;

	if (!s)
		return;
	if (s->pagemap_fd >= 0)
		close(s->pagemap_fd);
	if (s->bitmap_fd >= 0)
		close(s->bitmap_fd);
	free(s->pfn);
	free(s->pm);
	free(s->sorted);
	free(s);
}

/* No sampling window: each round reads every frame's idle bit, so every access since the
 * last round is seen (but for what the TLB hides: docs/design.md, Part 0), and there is no
 * window to widen (vmm/sample.c is for the ept source). */
static int idle_describe(void *ctx, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "every host page's idle bit each round; no sampling window");
	return 0;
}

static const struct mtd_source_ops idle_ops = {
    .name = "idle",
    .per_page = true,
    .age = idle_age,
    .evicted = NULL, /* the guest picks what the balloon takes (see source_ept.c) */
    .fresh = idle_fresh,
    .describe = idle_describe,
    .destroy = idle_destroy,
};

int mtd_source_idle_new(const char *proc_dir, const char *bitmap, int qemu_pid,
			uint64_t guest_bytes, struct mtd_source *out, char *why, size_t whylen)
{
	struct idle_src *s;
	char path[160];
	int rc;

	if (access(bitmap, F_OK) != 0) {
		snprintf(why, whylen,
			 "this kernel has no idle page tracking (%s missing: "
			 "CONFIG_IDLE_PAGE_TRACKING)",
			 bitmap);
		return -ENOENT;
	}
	if (qemu_pid <= 0) {
		snprintf(why, whylen, "QEMU's pid is not known");
		return -ESRCH;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pagemap_fd = s->bitmap_fd = -1;
	rc = mtd_guest_layout(proc_dir, qemu_pid, guest_bytes, s->ram_ranges, &s->lowmem);
	if (rc < 0) {
		snprintf(why, whylen, "guest RAM of %llu bytes has no layout",
			 (unsigned long long)guest_bytes);
		goto fail;
	}
	s->nr_ram = (size_t)rc;
	s->ram = guest_bytes & ~(VMM_SIZE_2M - 1);
	s->pages = s->ram >> VMM_PAGE_SHIFT;
	rc = mtd_guest_ram_hva(proc_dir, qemu_pid, s->ram, &s->hva);
	if (rc < 0) {
		snprintf(why, whylen, "no mapping of guest RAM in QEMU's maps (%s)", strerror(-rc));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%d/pagemap", proc_dir, qemu_pid);
	s->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	s->bitmap_fd = open(bitmap, O_RDWR | O_CLOEXEC);
	s->pfn = calloc(s->pages, sizeof(*s->pfn));
	s->pm = calloc(CHUNK_PAGES, sizeof(*s->pm));
	s->sorted = calloc(s->pages, sizeof(*s->sorted));
	if (s->pagemap_fd < 0 || s->bitmap_fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s: %s", s->pagemap_fd < 0 ? path : bitmap,
			 strerror(errno));
		goto fail;
	}
	if (!s->pfn || !s->pm || !s->sorted) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	rc = read_pagemap(s);
	if (rc == 0) {
		bool any = false;
		for (uint64_t p = 0; p < s->pages && !any; p++)
			any = s->pfn[p] != 0;
		if (!any) {
			rc = -EPERM;
			snprintf(why, whylen,
				 "QEMU's pagemap shows no frames (memtided needs CAP_SYS_ADMIN to "
				 "read them)");
		}
	}
	if (rc == 0)
		rc = mark_idle(s);
	if (rc < 0) {
		if (!why[0])
			snprintf(why, whylen, "%s", strerror(-rc));
		goto fail;
	}
	*out = (struct mtd_source){
	    .ops = &idle_ops, .ctx = s, .ram = s->ram_ranges, .nr_ram = s->nr_ram};
	return 0;
fail:
	idle_destroy(s);
	return rc;
}
