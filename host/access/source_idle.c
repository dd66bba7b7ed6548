// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_idle.c - the idle access-bit source: Linux idle page tracking over the host frames
 * that back a guest's RAM (Documentation/admin-guide/mm/idle_page_tracking.rst).
 *
 * /sys/kernel/mm/page_idle/bitmap holds one bit per host page frame: writing 1 marks the
 * frame idle (the kernel clears the accessed bits of every mapping of it, through the MMU
 * notifiers on a KVM host: the guest's EPT/stage-2 accessed bits too); reading gives 1 for
 * frames still idle, 0 for frames accessed since.  Words are 64 bits, read and written at
 * 8-byte-aligned offsets (PFN / 64 * 8).  Only pages on the kernel's LRU are tracked: any
 * other frame reads 0 ("accessed") for ever, whatever was written.  So guest RAM on
 * hugetlbfs is refused (guest_ram.c), and pages on the shared zero page are left out.  The
 * frames come from QEMU's pagemap (bits 0-54, present bit 63; root only: others read PFN 0)
 * over QEMU's checked map of guest RAM (guest_ram.h), the one host-side eviction uses.
 *
 * One round (age): 1. re-read the pagemap (frames move: compaction, THP collapse, swap) and
 * read each present page's idle bit; 2. only then vmm_age_begin (a round that could not be
 * read leaves libvmm untouched: source.h), report the pages that are not idle young
 * (vmm_mark_young, in GPA runs) and the zero page's as free; 3. mark every tracked frame
 * idle again.  The first round has nothing to compare with, so the constructor marks all
 * frames idle once.  When step 3 fails, the next round's bits would read "accessed" for
 * every frame it missed: that round fails instead, and marks them again.
 *
 * Cost per round: the pagemap read (8 bytes a page; the kernel walks QEMU's page tables)
 * and, for reads and writes of the bitmap, one rmap walk per frame in the kernel; about
 * 64 bytes of I/O per 4 KiB page in all.  A huge page is one folio: its idle state is shared
 * by its 512 frames, so a 2 MiB-backed guest is aged in 2 MiB units.
 *
 * This machine's kernel lacks CONFIG_IDLE_PAGE_TRACKING: the source says so and is not
 * chosen; tests/unit/test_access_sources.c runs it over a stand-in bitmap that behaves as
 * the kernel's does (tests/unit/kernel_fs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/guest_ram.h"
#include "access/source.h"

struct idle_src {
	struct mtd_guest_ram ram;
	int bitmap_fd;
	uint64_t *pfn;     /* per page: frame + 1, or 0 when not present (or the zero page) */
	uint8_t *zero;     /* per page: on the shared zero page */
	uint8_t *young;    /* per page: not idle, this round */
	uint64_t *sorted;  /* scratch: the frames in ascending order */
	uint64_t nr_young; /* last round */
	bool unmarked;     /* the last re-marking failed: the bits are not this round's */
	char last_err[120];
};

/* Step 3: write 1 for every tracked frame, each 64-frame word once with all its bits (the
 * kernel ignores 0 bits, but a word written twice must not depend on that).  The frames
 * are sorted first: guest pages and frames are in different orders.  O(n log n). */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int mark_idle(struct idle_src *s)
{
	uint64_t n = 0, cur = UINT64_MAX, bits = 0;

	for (uint64_t p = 0; p < s->ram.pages; p++)
		if (s->pfn[p])
			s->sorted[n++] = s->pfn[p] - 1;
	qsort(s->sorted, n, sizeof(*s->sorted), cmp_u64);
	for (uint64_t i = 0; i <= n; i++) {
		uint64_t w = i < n ? s->sorted[i] / 64 : UINT64_MAX;
		if (w != cur && cur != UINT64_MAX) {
			ssize_t put = pwrite(s->bitmap_fd, &bits, 8, (off_t)(cur * 8));
			if (put != 8)
				return put < 0 ? -errno : -EIO;
		}
		if (w != cur)
			bits = 0;
		cur = w;
		if (i < n)
			bits |= 1ULL << (s->sorted[i] % 64);
	}
	return 0;
}

/* Step 1: every present page's idle bit, into s->young. */
static int read_bits(struct idle_src *s)
{
	uint64_t word_no = UINT64_MAX, word = 0;
	int rc = mtd_guest_ram_frames(&s->ram, s->pfn, s->zero);

	if (rc < 0)
		return rc;
	for (uint64_t p = 0; p < s->ram.pages; p++) {
		s->young[p] = 0;
		if (!s->pfn[p])
			continue;
		uint64_t f = s->pfn[p] - 1;
		if (f / 64 != word_no) {
			word_no = f / 64;
			ssize_t got = pread(s->bitmap_fd, &word, 8, (off_t)(word_no * 8));
			if (got != 8)
				return got < 0 ? -errno : -EIO; /* past the bitmap's end */
		}
		s->young[p] = !(word & (1ULL << (f % 64)));
	}
	return 0;
}

static int idle_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct idle_src *s = ctx;
	uint64_t run = 0;
	int rc;

	/* Step 1: the frames missed by the last marking read "accessed": no reading this round */
	if (s->unmarked) {
		rc = mark_idle(s);
		if (rc == 0)
			s->unmarked = false;
		snprintf(s->last_err, sizeof(s->last_err),
			 "the page_idle bitmap was not re-marked last round: this round is void");
		return rc < 0 ? rc : -ESTALE;
	}
	rc = read_bits(s);
	if (rc < 0) {
		snprintf(s->last_err, sizeof(s->last_err), "reading the page_idle bitmap: %s",
			 strerror(-rc));
		return rc;
	}
	/* Step 2 */
	rc = vmm_age_begin(g, now_ms);
	if (rc < 0)
		return rc;
	s->nr_young = 0;
	s->last_err[0] = '\0';
	for (uint64_t p = 0; p <= s->ram.pages; p++) {
		bool young = p < s->ram.pages && s->young[p];
		/* runs never cross a region: the GPA jumps there */
		bool cont = young && run && !mtd_guest_ram_region_start(&s->ram, p);
		if (!cont && run) {
			(void)vmm_mark_young(g, mtd_guest_ram_gpa(&s->ram, p - run), run, false);
			s->nr_young += run;
			run = 0;
		}
		if (young)
			run++;
	}
	mtd_guest_ram_hint_zero(&s->ram, s->zero, g);
	/* Step 3 */
	if (mark_idle(s) < 0)
		s->unmarked = true;
	return 0;
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
	mtd_guest_ram_close(&s->ram);
	if (s->bitmap_fd >= 0)
		close(s->bitmap_fd);
	free(s->pfn);
	free(s->zero);
	free(s->young);
	free(s->sorted);
	free(s);
}

/* No sampling window: each round reads every frame's idle bit, so every access since the
 * last round is seen (but for what the TLB hides: docs/design.md, Part 0), and there is no
 * window to widen (vmm/sample.c is for the ept source). */
static int idle_describe(void *ctx, char *buf, size_t len)
{
	const struct idle_src *s = ctx;

	snprintf(buf, len, "every host page's idle bit each round; no sampling window%s%s",
		 s->last_err[0] ? "; " : "", s->last_err);
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

int mtd_source_idle_new(const struct mtd_host_source_env *env, struct mtd_source *out, char *why,
			size_t whylen)
{
	struct idle_src *s;
	int rc;

	if (access(env->idle_bitmap, F_OK) != 0) {
		snprintf(why, whylen,
			 "this kernel has no idle page tracking (%s missing: "
			 "CONFIG_IDLE_PAGE_TRACKING)",
			 env->idle_bitmap);
		return -ENOENT;
	}
	if (env->qemu_pid <= 0) {
		snprintf(why, whylen, "QEMU's pid is not known");
		return -ESRCH;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->bitmap_fd = -1;
	rc = mtd_guest_ram_open(env->qmp, env->qmp_ctx, env->qemu_pid, env->proc_dir,
				"idle page tracking", &s->ram, why, whylen);
	if (rc < 0)
		goto fail;
	s->bitmap_fd = open(env->idle_bitmap, O_RDWR | O_CLOEXEC);
	s->pfn = calloc(s->ram.pages, sizeof(*s->pfn));
	s->zero = calloc(s->ram.pages, 1);
	s->young = calloc(s->ram.pages, 1);
	s->sorted = calloc(s->ram.pages, sizeof(*s->sorted));
	if (s->bitmap_fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s: %s", env->idle_bitmap, strerror(errno));
		goto fail;
	}
	if (!s->pfn || !s->zero || !s->young || !s->sorted) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	rc = mtd_guest_ram_frames(&s->ram, s->pfn, s->zero);
	if (rc == 0) {
		bool any = false;
		for (uint64_t p = 0; p < s->ram.pages && !any; p++)
			any = s->pfn[p] != 0;
		if (!any) {
			rc = -EPERM;
			snprintf(why, whylen,
				 "QEMU's pagemap shows no frames (memtided needs CAP_SYS_ADMIN to "
				 "read them)");
		}
	}
	/* What the kernel needs of the bitmap: 8-byte words at 8-byte offsets (probed by the
	 * first marking: a kernel that refuses it refuses the source). */
	if (rc == 0 && (rc = mark_idle(s)) < 0)
		snprintf(why, whylen, "the page_idle bitmap refused the first marking: %s",
			 strerror(-rc));
	if (rc < 0) {
		if (!why[0])
			snprintf(why, whylen, "%s", strerror(-rc));
		goto fail;
	}
	*out = (struct mtd_source){
	    .ops = &idle_ops, .ctx = s, .ram = s->ram.ranges, .nr_ram = s->ram.nr_ranges};
	return 0;
fail:
	idle_destroy(s);
	return rc;
}
