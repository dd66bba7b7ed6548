/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * guest_priv.h - one guest's page state, shared by the files of Parts 4-7 of libvmm.
 *
 * Private to vmm/: guest.c (lifetime, layout lookup, stats, invariants), generations.c
 * (the aging hand and hints), age.c (the aging hand driven by page tables), evict.c (the
 * eviction hand), refault.c, tier_protect.c and wss.c.  docs/design.md, Part 4, tells the
 * story; this header holds the one encoding everything else reads.
 *
 * Memory layout of one guest (64 GiB guest: 16 Mi pages):
 *
 *   struct vmm_guest          ~1.5 KiB: seqs, per-generation counts and births, the label
 *                             table, tier control
 *   ranges[nr_ram]            copy of the RAM layout + where each range starts in pages[]
 *   pages[ram_pages]          ONE BYTE PER 4 KiB PAGE (16 MiB), encoding below
 *   chunks[nr_chunks][16]     per 2 MiB piece of a range, pages per generation slot, u16
 *                             (32 bytes per 512 pages = 0.0625 B/page, 1 MiB)
 *   free_map                  one bit per page (vmm_hint_free)
 *   bloom                     the walker's filter, 8 KiB with the defaults
 *
 * Total ~1.07 bytes per page (vmm_guest_stats.metadata_bytes; the goal is <= 1.5).
 *
 * The page byte.  Bit 7 says which of two states the page is in; the other 7 bits mean
 * different things in each:
 *
 *     7   6 5   4 3 2 1 0
 *   +---+-----+-----------+
 *   | 0 | tier|   label   |   resident: in the generation label_slot[label] names (below);
 *   +---+-----+-----------+   tier 0..3
 *   | 1 | tier| evseq % 32|   evicted: evseq = max_seq when it was evicted, for the
 *   +---+-----+-----------+   refault distance; tier = its tier when it was evicted
 *
 * Generations and slots.  Every aging round opens a generation whose seq is the round's
 * number (max_seq, which counts rounds), so the live generations' seqs increase from the
 * oldest to the youngest but need not be consecutive: generations merge (generations.c,
 * "The layout").  A live generation occupies one of VMM_MAX_NR_GENS slots; order[] lists
 * the slots from the oldest to the youngest, and a slot holds the generation's seq, birth,
 * page count, its position in order[] and its canonical label.  The per-2 MiB counts are
 * per slot too.
 *
 * Labels.  A resident page byte names its generation by a 5-bit label, and label_slot[]
 * maps each of the 32 labels to a slot (or LABEL_FREE).  A new generation takes a free
 * label as its canonical one; every page the library writes gets the canonical label of
 * its slot.  When generation A merges into the next younger B, only the counts move
 * (O(nr_chunks)) and every label that named A now names B: the pages keep their bytes
 * and read as B at once.  A's canonical label is retired: it stays an alias of B's slot
 * until the sweep has visited every page byte (SWEEP_ROUNDS rounds), then it is free.  A
 * generation dropped because it is empty frees its labels at once: no byte names it.
 * Why 32 labels for at most 16 generations: one generation merges per round at most, so at
 * most SWEEP_ROUNDS labels wait to be freed; 16 + 8 = 24 <= 32, and a new round always
 * finds a free label.
 *
 * The sweep.  Every aging round (vmm_age_begin) visits the next ram_pages / 8 bytes of
 * pages[] (a cursor, wrapping), so each page is visited at least once every 8 rounds.  It
 * rewrites a resident byte's label to its slot's canonical label, and clamps an evicted
 * page's distance to at most 16 (re-stamping evseq = max_seq - 16).  So an evicted label
 * is at most 16 + 8 = 24 rounds old, below 32, and the modular difference is exact:
 * refault distances 0..14 are exact; 15 means "15 or more" (VMM_REFAULT_DIST_CAP), the last
 * bucket of the histogram.  Both rules are one table of 256 bytes, rebuilt each round, so
 * the sweep is a lookup per byte (generations.c: sweep).
 *
 * Counts (exact, checked by vmm_check_invariants): gen_pages[slot] for every live slot, and
 * per chunk cnt[slot]; slots not in order[] are zero.  resident_pages + evicted_pages ==
 * ram_pages.
 */
#ifndef MEMTIDE_VMM_GUEST_PRIV_H
#define MEMTIDE_VMM_GUEST_PRIV_H

#include "vmm.h"

/* ---- the page byte ---------------------------------------------------------------------- */
#define PB_EVICTED     0x80u /* bit 7: evicted (else resident) */
#define PB_TIER_SHIFT  5     /* bits 6:5: tier */
#define PB_TIER_MASK   0x60u
#define PB_LABEL_MASK  0x1fu /* bits 4:0: seq (resident) or evseq (evicted), mod 32 */
#define PB_LABELS      32u
#define SWEEP_ROUNDS   8u    /* every page swept at least once per this many aging rounds */
#define LABEL_FREE     0xffu /* label_slot[] of a label no byte carries */
#define EVICT_DIST_MAX 16u   /* the sweep clamps an evicted page's distance to this */

/* Distances reported: 0..VMM_REFAULT_DIST_CAP, the cap meaning "that many or more". */
#define VMM_REFAULT_DIST_CAP (VMM_MAX_NR_GENS - 1)

#define CHUNK_SHIFT 9 /* 512 pages: 2 MiB */
#define CHUNK_PAGES (1u << CHUNK_SHIFT)

static inline uint8_t pb_resident(unsigned label, unsigned tier)
{
	return (uint8_t)((tier << PB_TIER_SHIFT) | (label & PB_LABEL_MASK));
}

static inline uint8_t pb_evicted(uint64_t evseq, unsigned tier)
{
	return (uint8_t)(PB_EVICTED | (tier << PB_TIER_SHIFT) | (evseq & PB_LABEL_MASK));
}

static inline unsigned pb_tier(uint8_t b)
{
	return (b & PB_TIER_MASK) >> PB_TIER_SHIFT;
}

/* ---- Part 6a: tier protection (tier_protect.c) ------------------------------------------- */

/* One tier's control position: refaults against pages that left it (evicted or protected). */
struct tier_ctrl {
	uint64_t avg_refaulted;   /* carried over per generation: (avg + this window) / 2 */
	uint64_t avg_total;       /* same, of evicted + protected */
	uint64_t refaulted;       /* this window: refaults of pages evicted from this tier */
	uint64_t evicted;         /* this window: pages evicted from this tier */
	uint64_t protected_pages; /* this window: pages this tier's protection kept */
};

struct tier_protect {
	unsigned nr_tiers;
	struct tier_ctrl t[VMM_MAX_NR_TIERS];
};

void vmm_tp_init(struct tier_protect *tp, unsigned nr_tiers);
/* The lowest protected tier (tiers at and above it are kept back), nr_tiers for none. */
unsigned vmm_tp_protected_from(const struct tier_protect *tp);
/* min_seq advanced: fold this window into the averages with a factor of 1/2. */
void vmm_tp_carry_over(struct tier_protect *tp);

/* ---- one guest ---------------------------------------------------------------------------- */

struct guest_range {
	uint64_t start_pfn, end_pfn; /* [start, end) in 4 KiB pages */
	uint64_t first_page;         /* index of start_pfn in pages[] */
	uint64_t first_chunk;        /* index of the chunk holding start_pfn in chunks[] */
};

struct chunk_counts {
	uint16_t cnt[VMM_MAX_NR_GENS]; /* resident pages of the chunk per slot */
};

/* One live generation (a slot in order[]). */
struct gen_slot {
	uint64_t seq;         /* the round that opened it */
	uint64_t birth_ms;    /* when that round began; a merge keeps the younger one's */
	uint64_t pages;       /* resident pages in it */
	uint8_t pos;          /* its index in order[] */
	uint8_t label;        /* its canonical label */
	uint8_t reuse_bucket; /* this round: the idle-age bucket of its pages (reuse.c) */
};

struct vmm_guest {
	unsigned nr_gens;                     /* config: at most this many generations at once */
	unsigned nr_tiers;                    /* config: 1..VMM_MAX_NR_TIERS */
	unsigned lookaround_max;              /* config: look-around window on eviction */
	bool use_nonleaf_accessed;            /* config: see vmm_guest_config */
	bool dirty_ages_up;                   /* config: see vmm_guest_config */
	bool lookaround_feeds_bloom;          /* config: see vmm_guest_config */
	bool unseen_is_unused;                /* config: see vmm_guest_config */
	bool gens_widen;                      /* config: see vmm_guest_config */
	bool reuse_raises_tier;               /* config: see vmm_guest_config */
	bool refault_raises_tier;             /* config: see vmm_guest_config */
	uint64_t min_seq;                     /* oldest generation's seq */
	uint64_t max_seq;                     /* youngest generation's seq: rounds so far */
	unsigned nr_live;                     /* generations in order[], 1..nr_gens */
	uint8_t order[VMM_MAX_NR_GENS];       /* live slots, oldest first */
	struct gen_slot gen[VMM_MAX_NR_GENS]; /* by slot; valid for the slots in order[] */
	uint8_t label_slot[PB_LABELS];        /* the slot a label names, or LABEL_FREE */
	uint64_t label_free_round[PB_LABELS]; /* a retired label: free from this round on */
	uint64_t ram_pages;                   /* pages in the layout */
	uint64_t evicted_pages;               /* pages in the evicted state */
	uint64_t sweep_cursor;                /* next index of pages[] the sweep visits */

	/* refault statistics (Part 5) */
	uint64_t refaults_total;
	uint64_t evicted_total;
	uint64_t refaults_by_tier[VMM_MAX_NR_TIERS];
	uint64_t refault_distance_hist[VMM_MAX_NR_GENS];

	/* reuses by idle age (Part 8, reuse.c): all of them, and those of pages never seen
	 * reused before (tier 0 with reuse_raises_tier) */
	uint64_t reuse_hist[VMM_REUSE_BUCKETS];
	uint64_t reuse_first_hist[VMM_REUSE_BUCKETS];
	/* This round's reuses, both counts in one word (all in the low 32 bits, first
	 * comebacks in the high 32), folded into the two histograms at the next round: the
	 * aging walk's hot loop then does one memory increment per reuse, not two (each is a
	 * store-to-load chain when pages come from the same generation; two cost the walk 15%
	 * in vmm-bench's gens_layout).  A round moves far fewer than 2^32 pages. */
	uint64_t reuse_round[VMM_REUSE_BUCKETS];
	/* vmm_guest_stats.young_prev, young_again: the last round's catch (sample.c) */
	uint64_t young_prev, young_again;

	struct tier_protect tp; /* Part 6a */

	size_t nr_ranges;
	struct guest_range *ranges;
	uint8_t *pages;      /* one byte per RAM page, see above */
	uint64_t *free_map;  /* one bit per RAM page: resident, and the guest holds nothing in it
			      * (vmm_hint_free); cleared when it is used or evicted */
	uint64_t free_pages; /* bits set in free_map */
	uint64_t nr_chunks;
	struct chunk_counts *chunks;
	struct vmm_bloom *bloom;
	uint64_t metadata_bytes;
};

/*
 * The cheap invariant, O(nr_gens), checked on entry to every mutating function (the full
 * O(pages) check is vmm_check_invariants): the window fits nr_gens, and the live
 * generations' counts plus the evicted pages add up to the RAM pages.  A failure means a
 * bug in libvmm, never bad input; the function then returns -EUCLEAN and changes nothing,
 * so the caller can drop the guest's state instead of acting on corrupt ages.
 */
static inline bool guest_counts_ok(const struct vmm_guest *g)
{
	uint64_t sum = g->evicted_pages;

	if (g->nr_live < 1 || g->nr_live > g->nr_gens)
		return false;
	for (unsigned i = 0; i < g->nr_live; i++)
		sum += g->gen[g->order[i] & (VMM_MAX_NR_GENS - 1)].pages;
	return sum == g->ram_pages;
}

/* ---- layout (guest.c) --------------------------------------------------------------------- */

/* The range holding pfn, or NULL (a hole).  O(log nr_ranges). */
const struct guest_range *vmm_guest_range_of(const struct vmm_guest *g, uint64_t pfn);
/* Is every page of [gpa, gpa + npages * 4 KiB) guest RAM?  0, -EINVAL (overflow, unaligned,
 * npages 0) or -ERANGE. */
int vmm_guest_check_span(const struct vmm_guest *g, uint64_t gpa, uint64_t npages);

static inline uint64_t guest_chunk_of(const struct guest_range *r, uint64_t pfn)
{
	return r->first_chunk + (pfn >> CHUNK_SHIFT) - (r->start_pfn >> CHUNK_SHIFT);
}

/* ---- generations (generations.c) ------------------------------------------------------- */

/* The slot of the generation a resident page byte is in (the sweep keeps every resident
 * label named in label_slot[]). */
static inline unsigned guest_page_slot(const struct vmm_guest *g, uint8_t b)
{
	return g->label_slot[b & PB_LABEL_MASK];
}

/* The oldest and the youngest generation's slots, and the next younger one's (the
 * youngest for the youngest). */
static inline unsigned guest_oldest(const struct vmm_guest *g)
{
	return g->order[0];
}

static inline unsigned guest_youngest(const struct vmm_guest *g)
{
	return g->order[g->nr_live - 1];
}

static inline unsigned guest_younger(const struct vmm_guest *g, unsigned slot)
{
	unsigned pos = g->gen[slot].pos;

	return pos + 1 < g->nr_live ? g->order[pos + 1] : slot;
}

/* Generations since an evicted page byte was stamped (exact: see the sweep above). */
static inline uint64_t guest_evicted_distance(const struct vmm_guest *g, uint8_t b)
{
	return (g->max_seq - (b & PB_LABEL_MASK)) & PB_LABEL_MASK;
}

/* The free mark of pages[idx] (vmm_hint_free): test, set, and clear (true if it was set). */
static inline bool guest_page_free(const struct vmm_guest *g, uint64_t idx)
{
	return (g->free_map[idx >> 6] >> (idx & 63)) & 1;
}

static inline void guest_mark_free(struct vmm_guest *g, uint64_t idx)
{
	if (guest_page_free(g, idx))
		return;
	g->free_map[idx >> 6] |= (uint64_t)1 << (idx & 63);
	g->free_pages++;
}

static inline bool guest_unfree(struct vmm_guest *g, uint64_t idx)
{
	if (!guest_page_free(g, idx))
		return false;
	g->free_map[idx >> 6] &= ~((uint64_t)1 << (idx & 63));
	g->free_pages--;
	return true;
}

/* Move the resident page at pages[idx] (chunk ci) from its generation to slot with tier. */
void vmm_gen_move(struct vmm_guest *g, uint64_t idx, uint64_t ci, unsigned slot, unsigned tier);
/* Make the evicted page at pages[idx] resident in the youngest generation with tier. */
void vmm_gen_insert(struct vmm_guest *g, uint64_t idx, uint64_t ci, unsigned tier);
/* Take the resident page at pages[idx] out of the generations, stamped with max_seq. */
void vmm_gen_remove(struct vmm_guest *g, uint64_t idx, uint64_t ci);
/* Drop empty generations at the old end (never the youngest); carries tier control over. */
void vmm_gen_trim(struct vmm_guest *g);
/* Apply one young (or dirty-only) report to pages [pfn, pfn + n) of range r. */
void vmm_gen_young(struct vmm_guest *g, const struct guest_range *r, uint64_t pfn, uint64_t n,
		   bool accessed, bool dirty);
/* The same for a batch the walker reported over range r (leaves past it go through
 * vmm_gen_young_span): the per-call setup once per batch. */
void vmm_gen_young_batch(struct vmm_guest *g, const struct guest_range *r,
			 const struct vmm_young *batch, size_t n);
/* The same for a leaf the walker reported, [gpa, gpa + npages * 4 KiB): the parts in holes
 * are skipped (a huge leaf may map MMIO too).  O(npages + ranges crossed). */
void vmm_gen_young_span(struct vmm_guest *g, uint64_t gpa, uint64_t npages, bool accessed,
			bool dirty);

/* ---- refaults (refault.c) -------------------------------------------------------------- */

/* Record the refault of the evicted page byte b: distance, tier, tier control.  Returns
 * the distance reported (capped).  Does not change the page. */
uint64_t vmm_refault_record(struct vmm_guest *g, uint8_t b);
/* The tier the evicted page byte b comes back in: its own, one up with refault_raises_tier. */
unsigned vmm_refault_tier(const struct vmm_guest *g, uint8_t b);

/* ---- reuses (reuse.c) -------------------------------------------------------------------- */

/* A new aging round began (max_seq born): the idle-age bucket of every live generation;
 * last round's reuses folded into the histograms. */
void vmm_reuse_new_round(struct vmm_guest *g);
/* One reuse from a page in bucket k; first: the page was in tier 0. */
static inline void guest_count_reuse(struct vmm_guest *g, unsigned k, bool first)
{
	g->reuse_round[k] += 1 | (uint64_t)first << 32;
}
/* The histograms with this round's reuses in (all, or first comebacks). */
void vmm_reuse_hists(const struct vmm_guest *g, uint64_t *all, uint64_t *first);

/* ---- the layout (generations.c) ---------------------------------------------------------- */

/* Which generation a new round merges into its younger neighbour when all nr_gens are in
 * use, from the births (oldest first, n >= 2) and page counts of the live generations at
 * now_ms: the index i of the older one (0 folds the oldest into the next).  Pure; shared by
 * the guest and vmm_gens_reach_ms's table test.  O(n). */
unsigned vmm_gens_pick_merge(const uint64_t *birth_ms, const uint64_t *pages, unsigned n,
			     uint64_t now_ms);

#endif /* MEMTIDE_VMM_GUEST_PRIV_H */
