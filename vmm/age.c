// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * age.c - the aging hand driven by page tables (Part 4 of libvmm; joins Parts 1-3 to 4).
 *
 * One aging round over a guest whose second-stage page tables we can read: open a new
 * youngest generation (vmm_age_begin), then walk every RAM range with the walker (Part 1)
 * and the guest's bloom filter (Part 3), and hand each reported leaf to the generations:
 *
 *   accessed            -> youngest generation (an evicted page: a refault first)
 *   dirty, not accessed -> nothing, as in Linux's MGLRU; with dirty_ages_up, up one
 *                          generation (docs/design.md: measured, and off by default)
 *
 * The walk cleans the dirty leaves it reports (clear_dirty), so "dirty" means "written
 * since the last walk" and the up-one-generation rule, when on, fires once per write, not
 * on every round for a page written once long ago.  That is safe for the data: the walker only
 * cleans hardware dirty state (EPT D; stage-2 S2AP[1] only under DBM), never a write
 * permission.  A host that uses the same D bits for its own dirty logging (migration)
 * must not run this on that VM meanwhile.
 *
 * The walk's sequence number is the new max_seq: the filter for max_seq was filled by the
 * previous round's walk, and this walk fills the one for max_seq + 1.
 *
 * Cost: that of vmm_walk over the guest's RAM ranges (one load per entry read; the bloom
 * filter skips cold leaf tables), plus O(1) per young page, plus vmm_age_begin's
 * O(nr_chunks + ram_pages / 8).
 */
#include <errno.h>
#include <string.h>

#include "guest_priv.h"

/* ======================================================================================
 * Part 4: generations - the aging walk
 * ====================================================================================== */

struct age_ctx {
	struct vmm_guest *g;
	const struct guest_range *r; /* the range being walked: every leaf inside it skips
				      * the range lookup */
};

static void age_young(void *arg, const struct vmm_young *batch, size_t n)
{
	struct age_ctx *a = arg;

	vmm_gen_young_batch(a->g, a->r, batch, n);
}

static void stats_add(struct vmm_walk_stats *sum, const struct vmm_walk_stats *s)
{
	sum->entries_read += s->entries_read;
	sum->tables_visited += s->tables_visited;
	sum->tables_skipped += s->tables_skipped;
	sum->leaf_entries_read += s->leaf_entries_read;
	sum->leaves += s->leaves;
	sum->young_pages += s->young_pages;
	sum->dirty_pages += s->dirty_pages;
	sum->next_gpa = s->next_gpa;
	sum->errors += s->errors;
	sum->subtrees_skipped_nonleaf += s->subtrees_skipped_nonleaf;
}

int vmm_age_walk(struct vmm_guest *g, const struct vmm_pt *pt, uint64_t now_ms,
		 struct vmm_walk_stats *stats)
{
	struct vmm_walk_stats sum;
	int rc, err = 0;

	if (!g || !pt)
		return -EINVAL;
	/* A tree that vouches for its upper A bits is walked by them alone: exact, and on the
	 * emulated EPT as cheap as the filter or cheaper (walk-bench, docs/walker.md). */
	bool nonleaf = g->use_nonleaf_accessed && (pt->flags & VMM_PT_NONLEAF_ACCESSED) &&
		       pt->fmt == vmm_pt_format_get(VMM_PT_EPT);
	memset(&sum, 0, sizeof(sum));
	rc = vmm_age_begin(g, now_ms);
	if (rc < 0)
		return rc;
	/* One walk per RAM range (holes are not walked), all with the same seq. */
	for (size_t i = 0; i < g->nr_ranges; i++) {
		struct age_ctx a = {.g = g, .r = &g->ranges[i]};
		struct vmm_walk_opts o = {
		    .gpa_start = g->ranges[i].start_pfn << VMM_PAGE_SHIFT,
		    .gpa_end = g->ranges[i].end_pfn << VMM_PAGE_SHIFT,
		    .bloom = nonleaf ? NULL : g->bloom,
		    .seq = g->max_seq,
		    .clear_dirty = true,
		    .use_nonleaf_accessed = nonleaf,
		    .fn = age_young,
		    .arg = &a,
		};
		struct vmm_walk_stats s;
		rc = vmm_walk(pt, &o, &s);
		if (rc == -EINVAL)
			return rc; /* a bad tree: nothing was walked */
		if (rc < 0)
			err = rc; /* -EFAULT: a table could not be mapped, the rest was walked */
		stats_add(&sum, &s);
	}
	if (stats)
		*stats = sum;
	return err;
}
