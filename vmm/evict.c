// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * evict.c - the eviction hand (Part 4 of libvmm, generations).
 *
 * The eviction hand answers "which pages should the guest give back?" with the pages that
 * have gone longest without being seen used: the oldest generation first, then the next,
 * as long as a generation is at least min_age_ms old (the cold age threshold the reclaim
 * controller sets, Part 6b; a generation's age is its birth's, and every page in it has
 * been idle at least that long) and never the youngest generation (its pages were seen
 * used in the last aging round).  Pages that came back before (tier 1 and up under
 * reuse_raises_tier) go only from generations at least reused_min_age_ms old (UINT64_MAX:
 * never), and the hand goes on to the next generation when only they are left (the reclaim
 * controller's weighing, reclaim_ctl.c).  Within one generation every page has
 * the same known age, so the hand is free to choose by shape: it takes whole 2 MiB-aligned
 * pieces first (free page reporting and the balloon return memory best in 2 MiB blocks,
 * and THP backing stays intact), then the rest in ascending GPA order, coalesced into runs.
 *
 * Per 2 MiB piece (one leaf page table), the steps are:
 *   1. look-around (when the caller passes page tables): test-and-clear the accessed bits
 *      around each candidate (vmm_lookaround, lookaround_max neighbours) and move the
 *      young pages to the youngest generation instead of evicting them: they were used
 *      since the last aging walk, which the generations do not know yet;
 *   2. tier protection (Part 6a): a page whose tier is protected moves up one generation
 *      and drops one tier instead of being evicted;
 *   3. every other page of the generation leaves it (evicted state, stamped with max_seq
 *      for the refault distance) and joins the current run, or starts a new one.
 * When the oldest generation is empty, min_seq advances (vmm_gen_trim); the hand goes on
 * with the next one, if old enough.  A caller that may put pages back (run_seq) keeps the
 * emptied generations until the next aging round, so that they can take them.  The runs of one generation are sorted and coalesced at
 * the end, so runs[] is ascending within a generation.
 *
 * Cost: O(nr_chunks) per generation visited to find its pieces (per-piece counts make an
 * empty piece one load), plus O(512) per piece that holds pages of it, plus one look-around
 * (3 + lookaround_max + 1 loads) per lookaround_max + 1 candidate pages.  At most nr_gens
 * generations per call; output bounded by max_pages and max_runs.
 */
#include <errno.h>
#include <stdlib.h>

#include "guest_priv.h"

/* ======================================================================================
 * Part 4: generations - the eviction hand
 * ====================================================================================== */

struct evictor {
	struct vmm_guest *g;
	const struct vmm_evict_req *req;
	struct vmm_evict_result *res;
	unsigned protect_from; /* lowest protected tier (Part 6a) */
	unsigned slot;         /* the generation being evicted */
	bool take_reused;      /* its pages that came back may go too */
	bool stop;             /* max_pages or max_runs reached */
	size_t gen_first_run;  /* its first run (with run_seq, no run spans two generations) */
};

static void lookaround_young(void *arg, const struct vmm_young *batch, size_t n)
{
	struct evictor *ev = arg;

	for (size_t i = 0; i < n; i++) {
		if (!(batch[i].flags & VMM_YOUNG_ACCESSED))
			continue;
		ev->res->young_pages += batch[i].npages;
		vmm_gen_young_span(ev->g, batch[i].gpa, batch[i].npages, true, false);
	}
}

/*
 * Linux's rule (lru_gen_look_around -> update_bloom_filter): a window dense with young
 * entries (the filter's own admission test, one young entry per 64-byte line of entries)
 * puts its leaf table into the filter the next aging walk reads (max_seq + 1), so that walk
 * visits it although the last one found the table too sparse to admit.  Only into a filter
 * the next walk will use (vmm_bloom_filtering): adding to an empty one would turn that
 * walk's full read into a read of this one table.  Measured in docs/design.md ("Rules that
 * differ from Linux's MGLRU").
 */
static void feed_bloom(struct vmm_guest *g, const struct vmm_lookaround_window *win, unsigned young)
{
	if (!g->lookaround_feeds_bloom || !win->table_pa || !young)
		return;
	if (vmm_bloom_filtering(g->bloom, g->max_seq + 1) &&
	    vmm_bloom_admit(g->bloom, young, win->entries))
		vmm_bloom_add(g->bloom, g->max_seq + 1, win->table_pa);
}

/* Step 1 for pages [c0, c1) of one piece (one leaf table): windows of lookaround_max + 1
 * entries starting at each candidate not yet covered. */
static void look_around(struct evictor *ev, const struct guest_range *r, uint64_t c0, uint64_t c1)
{
	struct vmm_guest *g = ev->g;
	uint64_t covered = c0;
	uint64_t table_last = ((c0 >> CHUNK_SHIFT) << CHUNK_SHIFT) + CHUNK_PAGES - 1;

	for (uint64_t pfn = c0; pfn < c1; pfn++) {
		uint8_t b = g->pages[r->first_page + pfn - r->start_pfn];
		if (pfn < covered || (b & PB_EVICTED) || guest_page_slot(g, b) != ev->slot)
			continue;
		/* vmm_lookaround's window starts max/2 before its centre: centre it so the
		 * window starts at pfn (clamped to the table, it then ends at the table's end). */
		uint64_t centre = pfn + g->lookaround_max / 2;
		if (centre > table_last)
			centre = table_last;
		struct vmm_lookaround_window win;
		int rc = vmm_lookaround_ex(ev->req->pt, centre << VMM_PAGE_SHIFT, g->lookaround_max,
					   lookaround_young, ev, &win);
		if (rc < 0)
			return; /* tables not mappable: evict by age alone */
		feed_bloom(g, &win, (unsigned)rc);
		covered = pfn + g->lookaround_max + 1;
	}
}

/* Add page pfn to the runs: extend the last one or open another. */
static bool run_add(struct evictor *ev, uint64_t pfn)
{
	struct vmm_evict_result *res = ev->res;
	uint64_t gpa = pfn << VMM_PAGE_SHIFT;

	if (res->nr_runs && (!ev->req->run_seq || res->nr_runs > ev->gen_first_run)) {
		struct vmm_run *last = &ev->req->runs[res->nr_runs - 1];
		if (last->gpa + (last->npages << VMM_PAGE_SHIFT) == gpa) {
			last->npages++;
			return true;
		}
	}
	if (res->nr_runs == ev->req->max_runs)
		return false;
	ev->req->runs[res->nr_runs++] = (struct vmm_run){.gpa = gpa, .npages = 1};
	return true;
}

/* Steps 1-3 on the pages [c0, c1) of range r, one piece. */
static void evict_piece(struct evictor *ev, const struct guest_range *r, uint64_t c0, uint64_t c1)
{
	struct vmm_guest *g = ev->g;
	uint64_t ci = guest_chunk_of(r, c0);

	/* Step 1 */
	if (ev->req->pt)
		look_around(ev, r, c0, c1);
	for (uint64_t pfn = c0; pfn < c1 && !ev->stop; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		uint8_t b = g->pages[idx];
		if ((b & PB_EVICTED) || guest_page_slot(g, b) != ev->slot)
			continue;
		unsigned tier = pb_tier(b);
		if (tier && !ev->take_reused)
			continue; /* came back before: the weighing keeps it */
		/* Step 2 */
		if (tier >= ev->protect_from) {
			vmm_gen_move(g, idx, ci, guest_younger(g, ev->slot), tier - 1);
			g->tp.t[tier].protected_pages++;
			ev->res->protected_pages++;
			continue;
		}
		/* Step 3 */
		if (ev->res->evicted_pages == ev->req->max_pages || !run_add(ev, pfn)) {
			ev->stop = true;
			break;
		}
		vmm_gen_remove(g, idx, ci);
		g->tp.t[tier].evicted++;
		ev->res->evicted_pages++;
	}
	if (ev->res->evicted_pages == ev->req->max_pages)
		ev->stop = true;
}

/* One pass over every piece holding pages of ev->slot; whole_only: only pieces that are
 * 512 pages of it (whole 2 MiB-aligned runs). */
static void evict_pass(struct evictor *ev, bool whole_only)
{
	struct vmm_guest *g = ev->g;
	unsigned slot = ev->slot;

	for (size_t i = 0; i < g->nr_ranges && !ev->stop; i++) {
		const struct guest_range *r = &g->ranges[i];
		for (uint64_t c0 = r->start_pfn; c0 < r->end_pfn && !ev->stop;) {
			uint64_t c1 = ((c0 >> CHUNK_SHIFT) + 1) << CHUNK_SHIFT;
			if (c1 > r->end_pfn)
				c1 = r->end_pfn;
			unsigned n = g->chunks[guest_chunk_of(r, c0)].cnt[slot];
			if (whole_only ? n == CHUNK_PAGES : n > 0)
				evict_piece(ev, r, c0, c1);
			c0 = c1;
		}
	}
}

static int run_cmp(const void *a, const void *b)
{
	const struct vmm_run *x = a, *y = b;

	return x->gpa < y->gpa ? -1 : x->gpa > y->gpa;
}

/* Sort the runs [first, nr_runs) of one generation and merge the adjacent ones. */
static void runs_sort_merge(struct evictor *ev, size_t first)
{
	struct vmm_run *runs = ev->req->runs;
	size_t n = ev->res->nr_runs, out = first;

	if (n - first < 2)
		return;
	qsort(runs + first, n - first, sizeof(*runs), run_cmp);
	for (size_t i = first + 1; i < n; i++) {
		struct vmm_run *last = &runs[out];
		if (last->gpa + (last->npages << VMM_PAGE_SHIFT) == runs[i].gpa)
			last->npages += runs[i].npages;
		else
			runs[++out] = runs[i];
	}
	ev->res->nr_runs = out + 1;
}

/* May the generation in slot be evicted from at now_ms? */
static bool gen_eligible(const struct vmm_guest *g, unsigned slot, const struct vmm_evict_req *req)
{
	uint64_t birth = g->gen[slot].birth_ms;

	if (slot == guest_youngest(g))
		return false; /* seen used in the last round */
	return req->now_ms >= birth && req->now_ms - birth >= req->min_age_ms;
}

int vmm_evict(struct vmm_guest *g, const struct vmm_evict_req *req, struct vmm_evict_result *res)
{
	if (!g || !req || !res || (req->max_runs && !req->runs))
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	*res = (struct vmm_evict_result){0};
	struct evictor ev = {.g = g, .req = req, .res = res};
	ev.protect_from = vmm_tp_protected_from(&g->tp);
	ev.stop = req->max_pages == 0 || req->max_runs == 0;

	/* One generation per iteration, oldest first: at most nr_gens.  Emptied generations a
	 * caller may put pages back into (run_seq) stay until the next aging round, also
	 * across the calls of one round. */
	if (!req->run_seq)
		vmm_gen_trim(g);
	for (unsigned pos = 0;
	     !ev.stop && pos < g->nr_live && gen_eligible(g, g->order[pos], req);) {
		size_t first_run = res->nr_runs;
		uint64_t birth = g->gen[g->order[pos]].birth_ms;
		ev.slot = g->order[pos];
		ev.gen_first_run = first_run;
		ev.take_reused =
		    !req->reused_min_age_ms || (req->reused_min_age_ms != UINT64_MAX &&
						req->now_ms - birth >= req->reused_min_age_ms);
		if (req->max_pages - res->evicted_pages >= CHUNK_PAGES)
			evict_pass(&ev, true);
		evict_pass(&ev, false);
		runs_sort_merge(&ev, first_run);
		for (size_t i = first_run; req->run_seq && i < res->nr_runs; i++)
			req->run_seq[i] = g->gen[ev.slot].seq;
		if (ev.stop)
			break; /* stopped inside it */
		/* An emptied oldest generation goes at once, unless the caller may put pages back
		 * into it (run_seq): then it stays until the next aging round trims it. */
		if (pos == 0 && g->gen[ev.slot].pages == 0 && !req->run_seq)
			vmm_gen_trim(g); /* the next one is the oldest now */
		else
			pos++; /* only pages the weighing keeps are left, or none */
	}
	return 0;
}
