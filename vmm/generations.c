// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * generations.c - the aging hand, the generations' layout and access hints (Part 4 of
 * libvmm, generations).
 *
 * Every resident guest page is in one generation; a generation is named by the seq of the
 * aging round that opened it, and a bigger seq is younger.  An aging round (vmm_age_begin)
 * opens a new youngest generation, stamped with the round's start time; then every page
 * found accessed since the previous round moves into it.  Pages nobody touched stay where
 * they are and so grow older: the generation a page is in says how long ago it was last
 * seen used.  That is all the working-set estimate (Part 7) and the eviction hand
 * (evict.c) need.
 *
 * The rules (those of Linux's multi-gen LRU):
 *   young (accessed bit, or reported young)   -> youngest generation, tier unchanged
 *                                                (reuse_raises_tier: + 1 if it had aged)
 *   dirty but not young (written, A cleared
 *     since by look-around)                   -> stays (dirty_ages_up: up one generation)
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
 * The layout: generations that widen with age.  At most nr_gens generations exist.  Linux
 * makes a generation when it needs one and keeps each one's birth; memtide used to fold
 * the two oldest together whenever all were in use, so 16 generations a round apart told
 * idle ages apart up to 14 rounds (70 s at memtided's 5 s) and everything older read as
 * 70 s.  A guest whose pages come back after minutes could then not be told from one whose
 * data was written once an hour ago (docs/design.md, Part 4, has the story).  Now, when all
 * nr_gens are in use, a new round first merges one generation into its younger neighbour
 * (vmm_gens_pick_merge):
 *   1. an empty one, if any: nothing is lost;
 *   2. else the pair whose merged generation spans the narrowest range of idle ages, as
 *      long as its oldest page is at most GENS_RATIO (11/5 = 2.2) times as idle as its
 *      youngest: a page then never reads as less than 1/2.2 of its idle time, the
 *      generation's birth being the younger one's;
 *   3. else the oldest folds into the next (the only choice with two generations, and the
 *      old rule).
 * Young generations stay one round wide and older ones widen, each about twice the one
 * before, so 16 of them tell apart idle ages from one round to 766 rounds or more (64 min
 * at 5 s: vmm_gens_reach_ms, whose table tests/unit/test_generations.c checks by running
 * the rule).  cfg.gens_widen off keeps the old rule (rule 3 alone) for comparison.
 * A merge moves only counts (O(nr_chunks), as the fold did); the merged pages keep their
 * labels, which now name the younger generation (guest_priv.h, "Labels").  Every round
 * also runs the sweep (guest_priv.h) over 1/8 of the page bytes.
 *
 * Cost: vmm_age_begin is O(nr_gens + nr_chunks + ram_pages / 8): the sweep, a table lookup
 * per byte, and one merge's chunk counts (bench/vmm-bench.c, "gens_layout", measures it).
 * The per-page operations are O(1) per page plus O(ranges crossed) to check the span, so
 * O(npages) per call; the aging walk's per-young-page loop (vmm_gen_young) costs about 3 ns
 * a page.
 */
#include <errno.h>
#include <string.h>

#include "guest_priv.h"

/* The widest a merged generation may be: its oldest page at most this many times as idle
 * as its youngest (GENS_RATIO_NUM / GENS_RATIO_DEN = 2.2).  2.0 reached 307 rounds at
 * worst with 16 generations (26 min at 5 s), 2.2 reaches 766 (64 min), 2.5 and more no
 * further at worst but coarser (measured by running the rule for 200,000 rounds). */
#define GENS_RATIO_NUM 11u
#define GENS_RATIO_DEN 5u

/* ======================================================================================
 * Part 4: generations - moving pages
 * ====================================================================================== */

void vmm_gen_move(struct vmm_guest *g, uint64_t idx, uint64_t ci, unsigned slot, unsigned tier)
{
	unsigned from = guest_page_slot(g, g->pages[idx]);

	g->gen[from].pages--;
	g->chunks[ci].cnt[from]--;
	g->gen[slot].pages++;
	g->chunks[ci].cnt[slot]++;
	g->pages[idx] = pb_resident(g->gen[slot].label, tier);
}

void vmm_gen_insert(struct vmm_guest *g, uint64_t idx, uint64_t ci, unsigned tier)
{
	unsigned to = guest_youngest(g);

	g->evicted_pages--;
	g->gen[to].pages++;
	g->chunks[ci].cnt[to]++;
	g->pages[idx] = pb_resident(g->gen[to].label, tier);
}

void vmm_gen_remove(struct vmm_guest *g, uint64_t idx, uint64_t ci)
{
	uint8_t b = g->pages[idx];
	unsigned from = guest_page_slot(g, b);

	g->gen[from].pages--;
	g->chunks[ci].cnt[from]--;
	g->evicted_pages++;
	g->evicted_total++;
	guest_unfree(g, idx); /* out of the generations: nothing left to mark */
	/* The eviction stamp is max_seq, so the refault distance counts aging rounds. */
	g->pages[idx] = pb_evicted(g->max_seq, pb_tier(b));
}

/* ======================================================================================
 * Part 4: generations - the layout
 * ====================================================================================== */

/* Take the generation at order[pos] out of order[]. */
static void unlink_gen(struct vmm_guest *g, unsigned pos)
{
	for (unsigned i = pos; i + 1 < g->nr_live; i++) {
		g->order[i] = g->order[i + 1];
		g->gen[g->order[i]].pos = (uint8_t)i;
	}
	g->nr_live--;
	g->min_seq = g->gen[g->order[0]].seq;
}

/* Drop the empty oldest generation: no byte names it, so its labels are free at once. */
static void drop_oldest(struct vmm_guest *g)
{
	unsigned s = g->order[0];

	for (unsigned l = 0; l < PB_LABELS; l++)
		if (g->label_slot[l] == s)
			g->label_slot[l] = LABEL_FREE;
	unlink_gen(g, 0);
	vmm_tp_carry_over(&g->tp);
}

void vmm_gen_trim(struct vmm_guest *g)
{
	/* At most nr_gens - 1 steps: the youngest stays. */
	while (g->nr_live > 1 && g->gen[g->order[0]].pages == 0)
		drop_oldest(g);
}

/* Merge the generation at order[pos] into order[pos + 1] (guest_priv.h, "Labels"): counts
 * only, O(nr_chunks); the younger keeps its seq and birth.  round: the round being opened,
 * from which the sweep starts to rewrite the merged generation's labels. */
static void merge_gen(struct vmm_guest *g, unsigned pos, uint64_t round)
{
	unsigned a = g->order[pos], b = g->order[pos + 1];
	bool empty = g->gen[a].pages == 0;

	if (!empty) {
		g->gen[b].pages += g->gen[a].pages;
		g->gen[a].pages = 0;
		for (uint64_t ci = 0; ci < g->nr_chunks; ci++) {
			g->chunks[ci].cnt[b] += g->chunks[ci].cnt[a];
			g->chunks[ci].cnt[a] = 0;
		}
	}
	for (unsigned l = 0; l < PB_LABELS; l++) {
		if (g->label_slot[l] != a)
			continue;
		if (empty) {
			g->label_slot[l] = LABEL_FREE; /* no byte carries it */
			continue;
		}
		g->label_slot[l] = (uint8_t)b; /* the bytes read as b at once */
		if (l == g->gen[a].label)      /* retired: free once the sweep went round */
			g->label_free_round[l] = round + SWEEP_ROUNDS;
	}
	unlink_gen(g, pos);
	if (pos == 0)
		vmm_tp_carry_over(&g->tp); /* the oldest is done with, as when it empties */
}

unsigned vmm_gens_pick_merge(const uint64_t *birth_ms, const uint64_t *pages, unsigned n,
			     uint64_t now_ms)
{
	unsigned best = 0;
	uint64_t best_old = 0, best_young = 0;

	/* Merging i into i + 1 makes a generation of the pages last seen between birth[i - 1]
	 * and birth[i + 1]: idle from now - birth[i + 1] to now - birth[i - 1]. */
	for (unsigned i = 1; i + 1 < n; i++) {
		if (pages && pages[i] == 0)
			return i; /* rule 1: nothing is lost */
		uint64_t older = now_ms - birth_ms[i - 1], young = now_ms - birth_ms[i + 1];
		if (young == 0 || (double)older * GENS_RATIO_DEN > (double)young * GENS_RATIO_NUM)
			continue; /* rule 2's bound */
		if (!best ||
		    (double)older * (double)best_young < (double)best_old * (double)young) {
			best = i;
			best_old = older;
			best_young = young;
		}
	}
	return best; /* 0: rule 3, the oldest folds */
}

/* Steps 1-2 of a round when all nr_gens are in use: one merge (the file comment). */
static void make_room(struct vmm_guest *g, uint64_t now_ms)
{
	uint64_t birth[VMM_MAX_NR_GENS], pages[VMM_MAX_NR_GENS];
	unsigned pos = 0;

	if (g->gens_widen) {
		for (unsigned i = 0; i < g->nr_live; i++) {
			birth[i] = g->gen[g->order[i]].birth_ms;
			pages[i] = g->gen[g->order[i]].pages;
		}
		pos = vmm_gens_pick_merge(birth, pages, g->nr_live, now_ms);
	}
	merge_gen(g, pos, g->max_seq + 1);
}

/* Step 3: open generation max_seq + 1 in a free slot, with a free label.  Retired labels
 * whose sweep has gone round are freed first; at most SWEEP_ROUNDS of them wait, so with
 * at most 15 live generations here a label is always free (guest_priv.h).  Returns false
 * only on a broken invariant. */
static bool open_gen(struct vmm_guest *g, uint64_t now_ms)
{
	uint64_t round = g->max_seq + 1;
	unsigned used = 0, slot = 0, label = PB_LABELS;

	for (unsigned i = 0; i < g->nr_live; i++)
		used |= 1u << g->order[i];
	while (slot < VMM_MAX_NR_GENS && (used >> slot) & 1)
		slot++;
	for (unsigned l = 0; l < PB_LABELS; l++) {
		unsigned s = g->label_slot[l];
		if (s != LABEL_FREE && g->gen[s].label != l && g->label_free_round[l] <= round)
			g->label_slot[l] = LABEL_FREE;
		if (g->label_slot[l] == LABEL_FREE && label == PB_LABELS)
			label = l;
	}
	if (slot == VMM_MAX_NR_GENS || label == PB_LABELS)
		return false;
	g->young_prev = g->gen[guest_youngest(g)].pages; /* what the last round found used */
	g->young_again = 0;
	g->max_seq = round;
	g->gen[slot] = (struct gen_slot){
	    .seq = round, .birth_ms = now_ms, .pos = (uint8_t)g->nr_live, .label = (uint8_t)label};
	g->label_slot[label] = (uint8_t)slot;
	g->order[g->nr_live++] = (uint8_t)slot;
	return true;
}

/* The sweep's rule for every byte value, for this round: a resident byte gets its slot's
 * canonical label, an evicted one's distance is clamped to EVICT_DIST_MAX. */
static void sweep_table(const struct vmm_guest *g, uint8_t *t)
{
	for (unsigned b = 0; b < 256; b++) {
		uint8_t v = (uint8_t)b;
		if (b & PB_EVICTED) {
			if (guest_evicted_distance(g, v) > EVICT_DIST_MAX)
				v = pb_evicted(g->max_seq - EVICT_DIST_MAX, pb_tier(v));
		} else {
			unsigned s = g->label_slot[b & PB_LABEL_MASK];
			if (s != LABEL_FREE)
				v = pb_resident(g->gen[s].label, pb_tier(v));
		}
		t[b] = v;
	}
}

/* Visit the next ceil(ram_pages / SWEEP_ROUNDS) page bytes through the table.  Neither rule
 * changes a count.  A lookup per byte: bench/vmm-bench.c's gens_layout has the cost. */
static void sweep(struct vmm_guest *g)
{
	uint8_t t[256];
	uint64_t quota = (g->ram_pages + SWEEP_ROUNDS - 1) / SWEEP_ROUNDS;

	sweep_table(g, t);
	while (quota) {
		uint64_t from = g->sweep_cursor, n = g->ram_pages - from;
		uint8_t *p = g->pages + from;
		if (n > quota)
			n = quota;
		for (uint64_t i = 0; i < n; i++)
			p[i] = t[p[i]];
		quota -= n;
		g->sweep_cursor = from + n == g->ram_pages ? 0 : from + n;
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
 *   2. when all nr_gens generations are in use, merge one into its younger neighbour (the
 *      file comment, "The layout");
 *   3. open max_seq + 1, born now_ms;
 *   4. sweep 1/8 of the page bytes.
 */
int vmm_age_begin(struct vmm_guest *g, uint64_t now_ms)
{
	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	if (now_ms < g->gen[guest_youngest(g)].birth_ms)
		return -EINVAL; /* time must not run backwards: ages would go negative */
	/* Step 0 */
	if (g->max_seq == 0 && !g->unseen_is_unused)
		g->gen[guest_oldest(g)].birth_ms = now_ms;
	/* Step 1 */
	vmm_gen_trim(g);
	/* Step 2 */
	if (g->nr_live >= g->nr_gens)
		make_room(g, now_ms);
	/* Step 3 */
	if (!open_gen(g, now_ms))
		return -EUCLEAN;
	vmm_reuse_new_round(g);
	/* Step 4 */
	sweep(g);
	return 0;
}

/* What every young page of one call shares, worked out once per call. */
struct young_ctx {
	unsigned to, to_label;
	unsigned prev;  /* the previous round's generation (VMM_MAX_NR_GENS: none) */
	uint64_t again; /* pages of it found used again in this call */
	/* Does a reuse lift the page's tier (reclaim_ctl.c, "Weighing")?  Not at a page's
	 * first sighting from generation 0 (gen0), which holds the pages never seen since the
	 * watch began: that is the first use known. */
	unsigned gen0, climbs;
};

static inline void young_ctx_init(const struct vmm_guest *g, struct young_ctx *c)
{
	c->to = guest_youngest(g);
	c->to_label = g->gen[c->to].label;
	c->prev = g->nr_live > 1 ? g->order[g->nr_live - 2] : VMM_MAX_NR_GENS;
	c->again = 0;
	c->gen0 = g->min_seq == 0 ? guest_oldest(g) : VMM_MAX_NR_GENS;
	c->climbs = g->reuse_raises_tier;
}

/* The aging walk's hot loop body (one call per young page): the move is written out here
 * rather than through vmm_gen_move so the page's slot is decoded once; the tier's climb is
 * branch-free (a branch per page on it mispredicted about half the time), and the reuse is
 * one memory increment (guest_count_reuse): vmm-bench's gens_layout measures the loop. */
static inline void young_page(struct vmm_guest *g, struct young_ctx *c, const struct guest_range *r,
			      uint64_t pfn, bool accessed, bool dirty)
{
	uint64_t idx = r->first_page + pfn - r->start_pfn;
	uint64_t ci = guest_chunk_of(r, pfn);
	uint8_t b = g->pages[idx];

	if (b & PB_EVICTED) {
		/* Present again although we evicted it: the host mapped it back on a fault we
		 * were not told about.  A refault. */
		if (accessed) {
			vmm_refault_record(g, b);
			vmm_gen_insert(g, idx, ci, vmm_refault_tier(g, b));
		}
		return;
	}
	unsigned from = guest_page_slot(g, b);
	if (accessed) {
		unsigned tier = pb_tier(b);
		c->again += from == c->prev;
		/* Used again after an idle age: what a threshold at or below that age would
		 * have made a refault (reuse.c).  Not a page the guest had freed: it fills fresh
		 * memory (vmm_hint_free).  A page in tier 0 comes back for the first time. */
		if (!guest_unfree(g, idx) && from != c->to) {
			guest_count_reuse(g, g->gen[from].reuse_bucket, tier == 0);
			tier += c->climbs & (from != c->gen0) & (tier + 1 < g->nr_tiers);
		}
		g->gen[from].pages--;
		g->chunks[ci].cnt[from]--;
		g->gen[c->to].pages++;
		g->chunks[ci].cnt[c->to]++;
		g->pages[idx] = pb_resident(c->to_label, tier);
	} else if (dirty && g->dirty_ages_up && from != c->to) {
		vmm_gen_move(g, idx, ci, guest_younger(g, from), pb_tier(b));
	}
}

void vmm_gen_young(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
		   bool accessed, bool dirty)
{
	struct young_ctx c;

	young_ctx_init(g, &c);
	for (uint64_t end = pfn + n; pfn < end; pfn++)
		young_page(g, &c, r, pfn, accessed, dirty);
	g->young_again += c.again;
}

void vmm_gen_young_batch(struct vmm_guest *g, const struct guest_range *r,
			 const struct vmm_young *batch, size_t n)
{
	struct young_ctx c;

	young_ctx_init(g, &c);
	for (size_t i = 0; i < n; i++) {
		uint64_t pfn = batch[i].gpa >> VMM_PAGE_SHIFT;
		bool accessed = batch[i].flags & VMM_YOUNG_ACCESSED;
		bool dirty = batch[i].flags & VMM_YOUNG_DIRTY;
		if (pfn >= r->start_pfn && pfn + batch[i].npages <= r->end_pfn)
			for (uint64_t p = pfn; p < pfn + batch[i].npages; p++)
				young_page(g, &c, r, p, accessed, dirty);
		else /* a huge leaf reaching past the range */
			vmm_gen_young_span(g, batch[i].gpa, batch[i].npages, accessed, dirty);
	}
	g->young_again += c.again;
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
		unsigned tier = pb_tier(b);
		guest_unfree(g, idx); /* in use again */
		if (tier + 1 < g->nr_tiers)
			tier++;
		vmm_gen_move(g, idx, guest_chunk_of(r, pfn),
			     guest_younger(g, guest_page_slot(g, b)), tier);
	}
}

static void hint_cold_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			    uint64_t n, void *arg)
{
	(void)arg;
	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		if (!(g->pages[idx] & PB_EVICTED))
			vmm_gen_move(g, idx, guest_chunk_of(r, pfn), guest_oldest(g), 0);
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
		vmm_gen_move(g, idx, guest_chunk_of(r, pfn), guest_oldest(g), 0);
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

/* Not evicted after all: back into slot *arg with the tier the page left with, its eviction
 * uncounted (vmm.h). */
static void put_back_piece(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn,
			   uint64_t n, void *arg)
{
	unsigned slot = *(const unsigned *)arg;

	for (uint64_t end = pfn + n; pfn < end; pfn++) {
		uint64_t idx = r->first_page + pfn - r->start_pfn;
		uint64_t ci = guest_chunk_of(r, pfn);
		uint8_t b = g->pages[idx];
		if (!(b & PB_EVICTED))
			continue;
		unsigned tier = pb_tier(b);
		g->evicted_pages--;
		g->gen[slot].pages++;
		g->chunks[ci].cnt[slot]++;
		g->pages[idx] = pb_resident(g->gen[slot].label, tier);
		if (g->evicted_total)
			g->evicted_total--;
		if (g->tp.t[tier].evicted)
			g->tp.t[tier].evicted--;
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
		vmm_gen_move(g, idx, ci, guest_oldest(g), 0);
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

int vmm_put_back(struct vmm_guest *g, uint64_t gpa, uint64_t npages, uint64_t seq)
{
	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	int rc = vmm_guest_check_span(g, gpa, npages);
	if (rc < 0)
		return rc;
	/* Generations only merge into the next younger one (which keeps its seq) or drop off
	 * the old end empty: the first live seq at or after seq holds what seq held. */
	unsigned slot = guest_youngest(g);
	for (unsigned i = 0; i < g->nr_live; i++)
		if (g->gen[g->order[i]].seq >= seq) {
			slot = g->order[i];
			break;
		}
	each_piece(g, gpa, npages, put_back_piece, &slot);
	return 0;
}

int vmm_give_back(struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	return apply(g, gpa, npages, give_back_piece);
}

int vmm_young_runs(const struct vmm_guest *g, unsigned ngens, vmm_run_fn fn, void *arg)
{
	unsigned young = 0; /* the slots of the ngens youngest generations */

	if (!g || !fn || ngens == 0)
		return -EINVAL;
	for (unsigned i = ngens < g->nr_live ? g->nr_live - ngens : 0; i < g->nr_live; i++)
		young |= 1u << g->order[i];
	for (size_t r = 0; r < g->nr_ranges; r++) {
		const struct guest_range *gr = &g->ranges[r];
		uint64_t run = 0, start = 0;

		for (uint64_t pfn = gr->start_pfn; pfn <= gr->end_pfn; pfn++) {
			bool is_young = false;
			if (pfn < gr->end_pfn) {
				uint8_t b = g->pages[gr->first_page + pfn - gr->start_pfn];
				is_young =
				    !(b & PB_EVICTED) && (young >> guest_page_slot(g, b)) & 1;
			}
			if (is_young) {
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
