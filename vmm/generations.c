// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * generations.c - the aging hand and access hints (Part 4 of libvmm, generations).
 *
 * Every resident guest page is in one generation, named by a sequence number in
 * [min_seq, max_seq]; a bigger seq is younger.  An aging round (vmm_age_begin) opens a new
 * youngest generation, max_seq + 1, stamped with the round's start time; then every page
 * found accessed since the previous round moves into it.  Pages nobody touched stay where
 * they are and so grow older relative to max_seq: the generation a page is in says, to
 * within one aging interval, how long ago it was last seen used.  That is all the working-
 * set estimate (Part 7) and the eviction hand (evict.c) need.
 *
 * The rules (those of Linux's multi-gen LRU):
 *   young (accessed bit, or reported young)   -> youngest generation, tier unchanged
 *   dirty but not young (written, A cleared
 *     since by look-around)                   -> up one generation (never past max_seq)
 *   hint access (agent: the guest used it)     -> up one generation, tier + 1
 *   hint cold   (agent: the guest freed it)    -> oldest generation, tier 0
 *   evicted page seen young                    -> a refault (refault.c), then youngest
 *
 * Why a hint moves a page only one generation: a hint is a second-hand report (the guest's
 * own LRU, or a file access the host cannot see as a page-table bit), so it counts as
 * weaker evidence than an accessed bit - and raises the tier, which is what tier protection
 * (Part 6a) watches: pages used through hints that refault more than plain pages get
 * protected from eviction.
 *
 * At most nr_gens generations exist.  When all are in use, a new round first folds the
 * oldest into the next (counts only: guest_priv.h, "stale labels"), so the oldest
 * generation then holds everything idle for nr_gens - 1 rounds or more.  Every round also
 * runs the sweep (guest_priv.h) over 1/8 of the page bytes.
 *
 * Cost: vmm_age_begin is O(nr_chunks + ram_pages / 8): 0.4 ms for a 16 GiB guest, 0.9 ms
 * for 64 GiB.  The per-page operations are O(1) per page plus O(ranges crossed) to check
 * the span, so O(npages) per call; the aging walk's per-young-page loop (vmm_gen_young)
 * costs about 3 ns a page.  A whole vmm_age_walk of a 64 GiB guest with 10% of its pages
 * young takes 27-30 ms against 19-21 ms for the bare vmm_walk (1.4x).
 */
#include <errno.h>
#include <string.h>

#include "guest_priv.h"

/* ======================================================================================
 * Part 4: generations - moving pages
 * ====================================================================================== */

void vmm_gen_move(struct vmm_guest *g, uint64_t idx, uint64_t ci, uint64_t seq, unsigned tier)
{
	unsigned from = SLOT(guest_page_seq(g, g->pages[idx]));
	unsigned to = SLOT(seq);

	g->gen_pages[from]--;
	g->chunks[ci].cnt[from]--;
	g->gen_pages[to]++;
	g->chunks[ci].cnt[to]++;
	g->pages[idx] = pb_resident(seq, tier);
}

void vmm_gen_insert(struct vmm_guest *g, uint64_t idx, uint64_t ci, unsigned tier)
{
	unsigned to = SLOT(g->max_seq);

	g->evicted_pages--;
	g->gen_pages[to]++;
	g->chunks[ci].cnt[to]++;
	g->pages[idx] = pb_resident(g->max_seq, tier);
}

void vmm_gen_remove(struct vmm_guest *g, uint64_t idx, uint64_t ci)
{
	uint8_t b = g->pages[idx];
	unsigned from = SLOT(guest_page_seq(g, b));

	g->gen_pages[from]--;
	g->chunks[ci].cnt[from]--;
	g->evicted_pages++;
	g->evicted_total++;
	guest_unfree(g, idx); /* out of the generations: nothing left to mark */
	/* The eviction stamp is max_seq, so the refault distance counts aging rounds. */
	g->pages[idx] = pb_evicted(g->max_seq, pb_tier(b));
}

void vmm_gen_trim(struct vmm_guest *g)
{
	/* At most nr_gens - 1 steps: the loop stops at max_seq. */
	while (g->min_seq < g->max_seq && g->gen_pages[SLOT(g->min_seq)] == 0) {
		g->min_seq++;
		vmm_tp_carry_over(&g->tp);
	}
}

/* Fold min_seq into min_seq + 1: counts only, O(nr_chunks).  The folded pages keep their
 * labels, which now read as min_seq (stale) until the sweep rewrites them. */
static void fold_oldest(struct vmm_guest *g)
{
	unsigned from = SLOT(g->min_seq), to = SLOT(g->min_seq + 1);

	g->gen_pages[to] += g->gen_pages[from];
	g->gen_pages[from] = 0;
	for (uint64_t ci = 0; ci < g->nr_chunks; ci++) {
		g->chunks[ci].cnt[to] += g->chunks[ci].cnt[from];
		g->chunks[ci].cnt[from] = 0;
	}
	g->min_seq++;
	vmm_tp_carry_over(&g->tp);
}

/* The sweep's rule for one page byte. */
static uint8_t sweep_byte(const struct vmm_guest *g, uint8_t b)
{
	if (b & PB_EVICTED)
		return guest_evicted_distance(g, b) > EVICT_DIST_MAX
			   ? pb_evicted(g->max_seq - EVICT_DIST_MAX, pb_tier(b))
			   : b;
	if ((((b & PB_LABEL_MASK) - g->min_seq) & PB_LABEL_MASK) > g->max_seq - g->min_seq)
		return pb_resident(g->min_seq, pb_tier(b)); /* stale */
	return b;
}

/*
 * The same rule on eight page bytes at once (SWAR), branch-free:
 *   a    = (max_seq - label) mod 32 per byte: (0x80 | max % 32) - label cannot borrow from
 *          the next byte; & 0x1f reduces it.  A resident byte is stale exactly when
 *          a > span (live labels are 0..span behind max_seq, stale ones further, and every
 *          label is less than 32 behind: the invariant this sweep keeps).
 *   need = a > threshold, threshold 16 for evicted bytes, span for resident ones:
 *          a + (0x7f - threshold) sets bit 7 exactly then, without carrying out (<= 158).
 *   the label of each byte in need becomes max - 16 (evicted) or min_seq (resident).
 */
static uint64_t sweep_word(const struct vmm_guest *g, uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ULL, lab = PB_LABEL_MASK * ones;
	uint64_t span = g->max_seq - g->min_seq;
	uint64_t ev = ((w >> 7) & ones) * 0xff; /* 0xff in each evicted byte */
	uint64_t a = (((g->max_seq & PB_LABEL_MASK) | 0x80) * ones - (w & lab)) & lab;
	uint64_t thr = ((EVICT_DIST_MAX * ones) & ev) | ((span * ones) & ~ev);
	uint64_t need = (((a + 0x7f * ones - thr) >> 7) & ones) * 0xff;
	uint64_t newlab = ((((g->max_seq - EVICT_DIST_MAX) & PB_LABEL_MASK) * ones) & ev) |
			  (((g->min_seq & PB_LABEL_MASK) * ones) & ~ev);

	return (w & ~(lab & need)) | (newlab & need);
}

/* Visit the next ceil(ram_pages / SWEEP_ROUNDS) page bytes: rewrite stale resident labels
 * to min_seq, and clamp evicted distances to EVICT_DIST_MAX.  Neither changes a count.
 * Measured on a 64 GiB guest whose pages are mostly idle (2 Mi bytes a round, most of them
 * stale): 4.4 ms a round byte by byte, 0.6 ms eight bytes at a time. */
static void sweep(struct vmm_guest *g)
{
	uint64_t quota = (g->ram_pages + SWEEP_ROUNDS - 1) / SWEEP_ROUNDS;

	for (uint64_t k = 0; k < quota;) {
		uint64_t idx = g->sweep_cursor;

		if (idx % 8 == 0 && quota - k >= 8 && g->ram_pages - idx >= 8) {
			uint64_t w;
			memcpy(&w, &g->pages[idx], sizeof(w));
			w = sweep_word(g, w);
			memcpy(&g->pages[idx], &w, sizeof(w));
			k += 8;
			g->sweep_cursor = idx + 8 == g->ram_pages ? 0 : idx + 8;
			continue;
		}
		g->pages[idx] = sweep_byte(g, g->pages[idx]);
		k++;
		if (++g->sweep_cursor == g->ram_pages)
			g->sweep_cursor = 0;
	}
}

/* ======================================================================================
 * Part 4: generations - the aging hand
 * ====================================================================================== */

/*
 * Start an aging round.  Steps:
 *   0. the first round only: generation 0, which holds every page not seen yet, is born
 *      now.  libvmm has watched nothing before this round, so it knows no page to be older;
 *      a birth of 0 would make every unseen page as old as the caller's clock (memtided's
 *      CLOCK_MONOTONIC: the host's uptime), evictable at once and a reuse of days when seen
 *      (a sim guest attached on a host up 10 days had 90% of its pages evicted 5 s later).
 *      Not when the caller said unseen pages are unused (cfg.unseen_is_unused);
 *   1. drop empty generations at the old end (their tier control carries over);
 *   2. when all nr_gens generations are in use, fold the oldest into the next;
 *   3. open max_seq + 1, born now_ms;
 *   4. sweep 1/8 of the page bytes.
 */
int vmm_age_begin(struct vmm_guest *g, uint64_t now_ms)
{
	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	if (now_ms < g->gen_birth_ms[SLOT(g->max_seq)])
		return -EINVAL; /* time must not run backwards: ages would go negative */
	/* Step 0 */
	if (g->max_seq == 0 && !g->unseen_is_unused)
		g->gen_birth_ms[SLOT(0)] = now_ms;
	/* Step 1 */
	vmm_gen_trim(g);
	/* Step 2 */
	if (g->max_seq - g->min_seq + 1 >= g->nr_gens)
		fold_oldest(g);
	/* Step 3 */
	g->max_seq++;
	g->gen_pages[SLOT(g->max_seq)] = 0; /* already 0: a slot outside the window is empty */
	g->gen_birth_ms[SLOT(g->max_seq)] = now_ms;
	vmm_reuse_new_round(g);
	/* Step 4 */
	sweep(g);
	return 0;
}

void vmm_gen_young(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
		   bool accessed, bool dirty)
{
	const unsigned to = SLOT(g->max_seq);

	/* The aging walk's hot loop (one iteration per young page): the move is written out
	 * here rather than through vmm_gen_move so the page's seq is decoded once. */
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		uint64_t ci = guest_chunk_of(r, pfn);
		uint8_t b = g->pages[idx];

		if (b & PB_EVICTED) {
			/* Present again although we evicted it: the host mapped it back on a
			 * fault we were not told about.  A refault. */
			if (accessed) {
				vmm_refault_record(g, b);
				vmm_gen_insert(g, idx, ci, pb_tier(b));
			}
			continue;
		}
		uint64_t seq = guest_page_seq(g, b);
		if (accessed) {
			unsigned from = SLOT(seq);
			/* Used again after an idle age: what a threshold at or below that age
			 * would have made a refault (reuse.c).  Not a page the guest had freed:
			 * it fills fresh memory (vmm_hint_free). */
			if (!guest_unfree(g, idx) && from != to)
				g->reuse_hist[g->reuse_bucket[from]]++;
			g->gen_pages[from]--;
			g->chunks[ci].cnt[from]--;
			g->gen_pages[to]++;
			g->chunks[ci].cnt[to]++;
			g->pages[idx] = pb_resident(g->max_seq, pb_tier(b));
		} else if (dirty && g->dirty_ages_up && seq < g->max_seq) {
			vmm_gen_move(g, idx, ci, seq + 1, pb_tier(b));
		}
	}
}

void vmm_gen_young_span(struct vmm_guest *g, uint64_t gpa, uint64_t npages, bool accessed,
			bool dirty)
{
	uint64_t pfn = gpa >> VMM_PAGE_SHIFT;
	uint64_t end = npages > UINT64_MAX - pfn ? UINT64_MAX : pfn + npages;

	/* Each step either finishes a range piece or jumps a hole: O(ranges crossed). */
	while (pfn < end) {
		const struct guest_range *r = vmm_guest_range_of(g, pfn);
		if (!r) {
			/* A hole: skip to the next range starting after pfn, if any. */
			const struct guest_range *next = NULL;
			for (size_t i = 0; i < g->nr_ranges && !next; i++)
				if (g->ranges[i].start_pfn > pfn)
					next = &g->ranges[i];
			if (!next)
				return;
			pfn = next->start_pfn;
			continue;
		}
		uint64_t stop = r->end_pfn < end ? r->end_pfn : end;
		vmm_gen_young(g, r, pfn, stop - pfn, accessed, dirty);
		pfn = stop;
	}
}

/* Call fn for each range piece of a span already checked to be RAM.  O(ranges crossed). */
typedef void (*piece_fn)(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
			 void *arg);

static void each_piece(struct vmm_guest *g, uint64_t gpa, uint64_t npages, piece_fn fn, void *arg)
{
	uint64_t pfn = gpa >> VMM_PAGE_SHIFT, end = pfn + npages;

	while (pfn < end) {
		const struct guest_range *r = vmm_guest_range_of(g, pfn);
		uint64_t stop = r->end_pfn < end ? r->end_pfn : end;
		fn(g, r, pfn, stop - pfn, arg);
		pfn = stop;
	}
}

static void young_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
			void *arg)
{
	vmm_gen_young(g, r, pfn, n, true, *(const bool *)arg);
}

int vmm_mark_young(struct vmm_guest *g, uint64_t gpa, uint64_t npages, bool dirty)
{
	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	int rc = vmm_guest_check_span(g, gpa, npages);
	if (rc < 0)
		return rc;
	each_piece(g, gpa, npages, young_piece, &dirty);
	return 0;
}

/* ======================================================================================
 * Part 4: generations - hints and restores
 * ====================================================================================== */

static void hint_access_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			      uint64_t n, void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		uint8_t b = g->pages[idx];
		if (b & PB_EVICTED)
			continue; /* not resident: a touch of it is a refault, reported apart */
		uint64_t seq = guest_page_seq(g, b);
		unsigned tier = pb_tier(b);
		guest_unfree(g, idx); /* in use again */
		if (seq < g->max_seq)
			seq++;
		if (tier + 1 < g->nr_tiers)
			tier++;
		vmm_gen_move(g, idx, guest_chunk_of(r, pfn), seq, tier);
	}
}

static void hint_cold_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			    uint64_t n, void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		if (!(g->pages[idx] & PB_EVICTED))
			vmm_gen_move(g, idx, guest_chunk_of(r, pfn), g->min_seq, 0);
	}
}

static void free_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
		       void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		if (g->pages[idx] & PB_EVICTED)
			continue; /* out already: its return is a refault or a fill, told apart */
		vmm_gen_move(g, idx, guest_chunk_of(r, pfn), g->min_seq, 0);
		guest_mark_free(g, idx);
	}
}

static void restore_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			  uint64_t n, void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		if (g->pages[idx] & PB_EVICTED)
			vmm_gen_insert(g, idx, guest_chunk_of(r, pfn), 0);
	}
}

/* Handed back, not used: resident again in the oldest generation, marked free (vmm.h). */
static void give_back_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			    uint64_t n, void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		uint64_t ci = guest_chunk_of(r, pfn);
		if (!(g->pages[idx] & PB_EVICTED))
			continue; /* resident all along: what the source saw of it stands */
		vmm_gen_insert(g, idx, ci, 0);
		vmm_gen_move(g, idx, ci, g->min_seq, 0);
		guest_mark_free(g, idx);
	}
}

static int apply(struct vmm_guest *g, uint64_t gpa, uint64_t npages, piece_fn fn)
{
	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	int rc = vmm_guest_check_span(g, gpa, npages);
	if (rc < 0)
		return rc;
	each_piece(g, gpa, npages, fn, NULL);
	return 0;
}

int vmm_hint_access(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, hint_access_piece);
}

int vmm_hint_cold(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, hint_cold_piece);
}

int vmm_hint_free(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, free_piece);
}

int vmm_restore(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, restore_piece);
}

int vmm_give_back(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, give_back_piece);
}

int vmm_young_runs(const struct vmm_guest *g, unsigned ngens, vmm_run_fn fn, void *arg)
{
	uint64_t from;

	if (!g || !fn || ngens == 0)
		return -EINVAL;
	from = g->max_seq + 1 >= ngens && g->max_seq + 1 - ngens > g->min_seq
		   ? g->max_seq + 1 - ngens
		   : g->min_seq;
	for (size_t r = 0; r < g->nr_ranges; r++) {
		const struct guest_range *gr = &g->ranges[r];
		uint64_t run = 0, start = 0;

		for (uint64_t pfn = gr->start_pfn; pfn <= gr->end_pfn; pfn++) {
			bool young = false;
			if (pfn < gr->end_pfn) {
				uint8_t b = g->pages[gr->first_page + pfn - gr->start_pfn];
				young = !(b & PB_EVICTED) && guest_page_seq(g, b) >= from;
			}
			if (young) {
				if (!run)
					start = pfn;
				run++;
			} else if (run) {
				fn(arg, start << VMM_PAGE_SHIFT, run);
				run = 0;
			}
		}
	}
	return 0;
}
