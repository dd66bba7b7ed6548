// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * walk.c - the aging walker and look-around (Part 1 of libvmm).
 *
 * vmm_walk visits a GPA range of an EPT or stage-2 tree, top-down and in ascending GPA
 * order, and for every present leaf tests and clears its accessed bit; young (and dirty)
 * leaves go to the caller in batches of up to VMM_WALK_BATCH.  This is the aging hand's
 * eye: libvmm's generations (Part 4) turn the reports into page ages.
 *
 * Why an atomic test-and-clear: the MMU sets A (and D) in the same 8-byte word with a
 * locked read-modify-write at any moment, from another CPU.  A plain load + store of
 * "e & ~A" would overwrite an A or D the MMU set between the two: a page the guest just
 * used (or wrote!) would look idle, and a lost D could let a dirty page be dropped.  So the
 * walker loads the entry (a plain relaxed load: cheap, no bus lock), and only when A is
 * set does it clear it with __atomic_fetch_and, reporting what the *returned old value*
 * says.  Whatever the MMU sets after that RMW stays in the entry for the next walk.  The
 * race it resolves is only with the MMU (or vmm_simhw_access) on the same word; relaxed
 * order is enough because no other memory is published through the bit.  (On real
 * hardware the TLB may keep a translation with A already set, so an access right after the
 * clear can go unnoticed until the TLB entry is evicted; Linux's MGLRU accepts the same
 * imprecision instead of flushing on every clear.)
 *
 * Dirty cleaning (opts->clear_dirty) rides in the same RMW.  EPT: clear D (bit 9).
 * Stage-2: clear S2AP[1], but only on a DBM leaf, where S2AP[1] *is* the dirty state; on a
 * leaf without DBM it is a write permission that the walker must never take away.  The
 * generic test for "may clean" is fmt->dirty(e | dirty_clear_mask): a leaf that would read
 * as dirty with the dirty bits set has hardware dirty state.
 *
 * The inner loop: 511 of 512 entries a walk reads are in leaf tables, so their loop is the
 * cost of a walk.  Measured on this machine (2.1 GHz EPYC, 16 GiB EPT guest, 4 KiB pages,
 * 10% young at random; best of 5), each step kept because it paid:
 *
 *   one branchy loop; the clear a fetch_and whose whole old value     2.4 ns/page
 *     is used, which GCC turns into a lock cmpxchg retry loop
 *   + a first pass that builds a bitmap of maybe-young entries (no
 *     branch per entry: 10% random young mispredicts), a second pass
 *     over the bitmap, and the clear written as fetch_and(~A) & A,
 *     which GCC emits as one `lock btr` (the two measured together)  1.7-2.1
 *   + the first pass unrolled by 8 by hand (-O2 does not unroll)       1.2
 *   + the first pass in SSE2, four entries' low halves per compare    0.83 (stage-2: 0.89,
 *     (scan64_sse2; x86-64 only, the scalar pass elsewhere)                 was 1.27)
 *   the same code through the ops table (a caller-defined format)     5.3
 *
 * so the built-in formats test bits inline (pt_format.h) and any other format goes through
 * the function pointers.  Before the SSE2 pass the `lock btr` was ~40% of the time (perf
 * annotate): an atomic per young leaf is the floor this design keeps on purpose.  A plain
 * sequential read of the same number of words takes 0.3 ns each here (vmm-bench age_dense:
 * ratio_vs_seqread 0.36-0.37 EPT, 0.35 stage-2, against 0.26-0.28 and 0.23-0.25 before).
 *
 * Bloom filter (Part 3): at level 2, a child leaf table the filter does not hold for seq is
 * skipped without mapping it (when vmm_bloom_filtering says the walk may skip); a leaf
 * table read with young * admit_young_x >= entries read goes into the filter for seq + 1.
 *
 * Budget: each load counts; when budget_entries runs out the walk stops at an entry
 * boundary and stats->next_gpa says where to resume.  The recursion is 4 levels deep.
 */
#include <errno.h>
#include <string.h>

#include "pt_format.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define SCAN_SSE2 1
#else
#define SCAN_SSE2 0
#endif

/* Reports on their way to the caller. */
struct batch {
	vmm_young_fn fn;
	void *arg;
	size_t n;
	struct vmm_young b[VMM_WALK_BATCH];
};

static void batch_flush(struct batch *bt)
{
	if (bt->n && bt->fn)
		bt->fn(bt->arg, bt->b, bt->n);
	bt->n = 0;
}

static void batch_push(struct batch *bt, uint64_t gpa, uint64_t npages, uint8_t flags)
{
	struct vmm_young *y = &bt->b[bt->n++];

	y->gpa = gpa;
	y->npages = (uint32_t)npages;
	y->flags = flags;
	if (bt->n == VMM_WALK_BATCH)
		batch_flush(bt);
}

struct walker {
	const struct vmm_pt *pt;
	const struct vmm_pt_format *fmt;
	const struct vmm_walk_opts *o;
	struct vmm_walk_stats *st;
	uint64_t budget_left; /* loads still allowed; UINT64_MAX when unlimited */
	bool stopped;         /* the budget ran out; st->next_gpa is set */
	bool filtering;       /* skip leaf tables the bloom filter does not hold */
	bool nonleaf;         /* use and clear upper entries' accessed bits (EPT, exact tree) */
	bool partial;         /* some table below the current subtree was not read whole */
	struct batch bt;
};

/* ---- format-specialised leaf tests ---------------------------------------------------------
 * `kind` is a compile-time constant at every call site, so each always-inline helper folds to
 * the one format's bit test. */
enum fmt_kind { KIND_GENERIC, KIND_EPT, KIND_S2 };

static inline __attribute__((always_inline)) bool k_leaf3(const struct vmm_pt_format *f,
							  enum fmt_kind kind, uint64_t e)
{
	switch (kind) {
	case KIND_EPT:
		return ept_present(e); /* every present PT entry maps 4 KiB */
	case KIND_S2:
		return s2_is_leaf(e, PT_LAST_LEVEL); /* 0b11 */
	case KIND_GENERIC:
		break;
	}
	return f->present(e, PT_LAST_LEVEL) && f->is_leaf(e, PT_LAST_LEVEL);
}

static inline __attribute__((always_inline)) bool k_dirty(const struct vmm_pt_format *f,
							  enum fmt_kind kind, uint64_t e)
{
	switch (kind) {
	case KIND_EPT:
		return (e & EPT_D) != 0;
	case KIND_S2:
		return s2_dirty(e);
	case KIND_GENERIC:
		break;
	}
	return f->dirty(e);
}

/* Quick reject: can this leaf be young or dirty at all?  EPT: A or D; stage-2: AF or
 * S2AP[1] (dirty needs S2AP[1]); generic: the full tests. */
static inline __attribute__((always_inline)) bool k_maybe(const struct vmm_pt_format *f,
							  enum fmt_kind kind, uint64_t e)
{
	switch (kind) {
	case KIND_EPT:
		return (e & (EPT_A | EPT_D)) != 0;
	case KIND_S2:
		return (e & (S2_AF | S2AP_W)) != 0;
	case KIND_GENERIC:
		break;
	}
	return (e & f->accessed_mask) || f->dirty(e);
}

/* Has the leaf hardware dirty state, so that clearing dirty_clear_mask cleans it (and
 * takes no permission away)?  EPT: always; stage-2: only with DBM (bit 51). */
static inline __attribute__((always_inline)) bool k_cleanable(const struct vmm_pt_format *f,
							      enum fmt_kind kind, uint64_t e)
{
	switch (kind) {
	case KIND_EPT:
		return true;
	case KIND_S2:
		return (e & S2_DBM) != 0;
	case KIND_GENERIC:
		break;
	}
	return f->dirty(e | f->dirty_clear_mask);
}

/* The accessed bit as a compile-time constant where the format is known, so that
 * "fetch_and(~A) & A" compiles to one `lock btr` instead of a compare-and-swap loop. */
static inline __attribute__((always_inline)) uint64_t k_amask(const struct vmm_pt_format *f,
							      enum fmt_kind kind)
{
	switch (kind) {
	case KIND_EPT:
		return EPT_A;
	case KIND_S2:
		return S2_AF;
	case KIND_GENERIC:
		break;
	}
	return f->accessed_mask;
}

/*
 * One present leaf whose loaded value e may be young or dirty.  Returns the VMM_YOUNG_*
 * flags it was reported with (0: neither, not reported); the caller counts pages.  Steps:
 *  1. The common case, no dirty state to clean: if A was set in e, clear it with one
 *     atomic bit-test-and-reset (only the walker clears A, so the old A is 1); if A was
 *     clear, no write at all: an A the MMU sets after our load stays for the next walk.
 *     The dirty flag comes from e; a D set after the load stays set and is reported then.
 *  2. Cleaning a dirty leaf (clear_dirty, and e showed hardware dirty state): one atomic
 *     fetch_and of A and the dirty bits; young is read from the old value it returns.
 *     Only the walker clears these bits, so the old value is still dirty.
 */
static inline __attribute__((always_inline)) uint8_t leaf_young(struct walker *w,
								enum fmt_kind kind, uint64_t *slot,
								uint64_t e, uint64_t gpa,
								uint64_t npages)
{
	const struct vmm_pt_format *f = w->fmt;
	uint64_t amask = k_amask(f, kind);
	bool dirty = k_dirty(f, kind, e), young = false;
	uint8_t flags;

	if (!(w->o->clear_dirty && dirty && k_cleanable(f, kind, e))) {
		/* Step 1 */
		if (e & amask)
			young = (__atomic_fetch_and(slot, ~amask, __ATOMIC_RELAXED) & amask) != 0;
	} else {
		/* Step 2 */
		uint64_t old =
		    __atomic_fetch_and(slot, ~(amask | f->dirty_clear_mask), __ATOMIC_RELAXED);

		young = (old & amask) != 0;
	}
	flags = (young ? VMM_YOUNG_ACCESSED : 0) | (dirty ? VMM_YOUNG_DIRTY : 0);
	if (flags)
		batch_push(&w->bt, gpa, npages, flags);
	return flags;
}

/* Eight entries: bit j of the result says entry j may be young or dirty; *leaves counts
 * the present ones.  Straight-line code: unrolled by hand because -O2 does not unroll. */
static inline __attribute__((always_inline)) uint64_t
scan8(const struct vmm_pt_format *f, enum fmt_kind kind, uint64_t *p, uint64_t *leaves)
{
	uint64_t m = 0, n = 0;

#define SCAN1(j)                                                                                   \
	do {                                                                                       \
		uint64_t e_ = __atomic_load_n(&p[j], __ATOMIC_RELAXED);                            \
		n += k_leaf3(f, kind, e_);                                                         \
		m |= (uint64_t)k_maybe(f, kind, e_) << (j);                                        \
	} while (0)
	SCAN1(0);
	SCAN1(1);
	SCAN1(2);
	SCAN1(3);
	SCAN1(4);
	SCAN1(5);
	SCAN1(6);
	SCAN1(7);
#undef SCAN1
	*leaves += n;
	return m;
}

#if defined(__SSE2__)
/*
 * The first pass over 64 entries with SSE2 (every x86-64 CPU has it), for the two built-in
 * formats: every bit either test needs is in an entry's low 32 bits (EPT: R/W/X 0-2, A 8,
 * D 9; stage-2: valid/table 0-1, S2AP[1] 7, AF 10), so four entries' low halves are gathered
 * into one register and tested together.  Returns the maybe-young bitmap; *leaves counts the
 * present leaves.
 *
 * These are plain vector loads, not C11 atomics: this pass only says which entries to look
 * at.  Every decision is taken in the second pass, on an atomic reload of the entry and an
 * atomic clear.  An A bit the MMU sets after this pass is left in the entry for the next
 * walk, as with the scalar pass; nothing can be lost or cleared on a stale value.
 */
static inline __attribute__((always_inline)) uint64_t
scan64_sse2(enum fmt_kind kind, const uint64_t *p, uint64_t *leaves)
{
	const __m128i zero = _mm_setzero_si128();
	/* EPT: present = R (bit 0) set, so a W|X misconfiguration is not counted; stage-2:
	 * (e & 3) == 3. */
	const __m128i lmask = _mm_set1_epi32(kind == KIND_EPT ? 0x1 : 0x3);
	const __m128i lval = lmask;
	const __m128i ymask =
	    _mm_set1_epi32(kind == KIND_EPT ? (int)(EPT_A | EPT_D) : (int)(S2_AF | S2AP_W));
	__m128i cnt = zero;
	uint64_t quiet = 0; /* bit j: entry j can be neither young nor dirty */

	for (unsigned j = 0; j < 64; j += 8) {
		__m128 a = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(p + j)));
		__m128 b = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(p + j + 2)));
		__m128 c = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(p + j + 4)));
		__m128 d = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(p + j + 6)));
		/* low dwords of entries j..j+3 and j+4..j+7 */
		__m128i lo0 = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
		__m128i lo1 = _mm_castps_si128(_mm_shuffle_ps(c, d, _MM_SHUFFLE(2, 0, 2, 0)));

		cnt = _mm_sub_epi32(cnt, _mm_cmpeq_epi32(_mm_and_si128(lo0, lmask), lval));
		cnt = _mm_sub_epi32(cnt, _mm_cmpeq_epi32(_mm_and_si128(lo1, lmask), lval));
		unsigned q0 = (unsigned)_mm_movemask_ps(
		    _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(lo0, ymask), zero)));
		unsigned q1 = (unsigned)_mm_movemask_ps(
		    _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(lo1, ymask), zero)));
		quiet |= (uint64_t)(q0 | q1 << 4) << j;
	}
	/* horizontal sum of the four lane counts */
	cnt = _mm_add_epi32(cnt, _mm_shuffle_epi32(cnt, _MM_SHUFFLE(1, 0, 3, 2)));
	cnt = _mm_add_epi32(cnt, _mm_shuffle_epi32(cnt, _MM_SHUFFLE(2, 3, 0, 1)));
	*leaves += (uint64_t)(uint32_t)_mm_cvtsi128_si32(cnt);
	return ~quiet;
}
#endif

/*
 * Read entries [lo, hi) of a leaf table whose entry 0 maps table_gpa.  Returns the number
 * of young leaves.  Two passes per group of 64 entries: the first loads every entry and
 * builds a bitmap of leaves that may be young or dirty without a data-dependent branch
 * (10% young at random would mispredict about one entry in five); the second visits only
 * the set bits.  Measured on the 16 GiB age_dense run: see the file comment.
 * Cost: one relaxed load per entry, a reload and an atomic per young leaf.
 */
static inline __attribute__((always_inline)) uint64_t scan_leaf(struct walker *w,
								enum fmt_kind kind, uint64_t *t,
								unsigned lo, unsigned hi,
								uint64_t table_gpa)
{
	const struct vmm_pt_format *f = w->fmt;
	uint64_t young = 0, dirty = 0, leaves = 0;

	for (unsigned g = lo; g < hi; g += 64) {
		unsigned n = hi - g < 64 ? hi - g : 64;
		uint64_t maybe = 0;

		if (n == 64 && kind != KIND_GENERIC && SCAN_SSE2) {
#if defined(__SSE2__)
			maybe = scan64_sse2(kind, &t[g], &leaves);
#endif
		} else if (n == 64) {
			/* The whole-group case: eight entries per step, constant shifts. */
			for (unsigned j = 0; j < 64; j += 8)
				maybe |= scan8(f, kind, &t[g + j], &leaves) << j;
		} else {
			for (unsigned j = 0; j < n; j++) {
				uint64_t e = __atomic_load_n(&t[g + j], __ATOMIC_RELAXED);

				leaves += k_leaf3(f, kind, e);
				maybe |= (uint64_t)k_maybe(f, kind, e) << j;
			}
		}
		while (maybe) {
			unsigned i = g + (unsigned)__builtin_ctzll(maybe);
			uint64_t e = __atomic_load_n(&t[i], __ATOMIC_RELAXED);
			uint8_t flags;

			maybe &= maybe - 1;
			if (!k_leaf3(f, kind, e))
				continue; /* A or D bits in an entry that maps nothing */
			flags = leaf_young(w, kind, &t[i], e,
					   table_gpa + ((uint64_t)i << VMM_PAGE_SHIFT), 1);
			young += (flags & VMM_YOUNG_ACCESSED) != 0;
			dirty += (flags & VMM_YOUNG_DIRTY) != 0;
		}
	}
	w->st->leaves += leaves;
	w->st->young_pages += young;
	w->st->dirty_pages += dirty;
	return young;
}

static uint64_t scan_leaf_ept(struct walker *w, uint64_t *t, unsigned lo, unsigned hi,
			      uint64_t table_gpa)
{
	return scan_leaf(w, KIND_EPT, t, lo, hi, table_gpa);
}

static uint64_t scan_leaf_s2(struct walker *w, uint64_t *t, unsigned lo, unsigned hi,
			     uint64_t table_gpa)
{
	return scan_leaf(w, KIND_S2, t, lo, hi, table_gpa);
}

static uint64_t scan_leaf_generic(struct walker *w, uint64_t *t, unsigned lo, unsigned hi,
				  uint64_t table_gpa)
{
	return scan_leaf(w, KIND_GENERIC, t, lo, hi, table_gpa);
}

static void walk_stop(struct walker *w, uint64_t gpa)
{
	w->stopped = true;
	w->st->next_gpa = gpa;
}

/* Index of gpa's entry in a table at `level`. */
static unsigned pt_index(uint64_t gpa, int level)
{
	return (unsigned)((gpa >> PT_LEVEL_SHIFT(level)) & (PT_ENTRIES - 1));
}

/* The leaf table at table_pa, maps [start, end) (within one 2 MiB region). */
static void walk_leaf_table(struct walker *w, uint64_t table_pa, uint64_t start, uint64_t end)
{
	uint64_t *t = w->pt->table(w->pt->mem_ctx, table_pa);
	uint64_t table_gpa = start & ~(VMM_SIZE_2M - 1);
	unsigned lo = pt_index(start, PT_LAST_LEVEL);
	unsigned hi = pt_index(end - 1, PT_LAST_LEVEL) + 1;
	uint64_t young;

	if (!t) {
		w->st->errors++;
		return;
	}
	if (w->budget_left < hi - lo) {
		hi = lo + (unsigned)w->budget_left;
		walk_stop(w, table_gpa + ((uint64_t)hi << VMM_PAGE_SHIFT));
	}
	if (w->fmt == &vmm_pt_format_ept)
		young = scan_leaf_ept(w, t, lo, hi, table_gpa);
	else if (w->fmt == &vmm_pt_format_s2)
		young = scan_leaf_s2(w, t, lo, hi, table_gpa);
	else
		young = scan_leaf_generic(w, t, lo, hi, table_gpa);
	if (w->budget_left != UINT64_MAX)
		w->budget_left -= hi - lo;
	w->st->entries_read += hi - lo;
	w->st->leaf_entries_read += hi - lo;
	if (hi == lo)
		return; /* the budget ran out right before this table */
	w->st->tables_visited++;
	if (w->o->bloom && vmm_bloom_admit(w->o->bloom, young, hi - lo))
		vmm_bloom_add(w->o->bloom, w->o->seq + 1, table_pa);
}

/*
 * The subtree under upper entry *slot (value e), with non-leaf accessed bits in use.
 * Steps: 1. A clear: nothing below was used since its A was last cleared (the tree sets A
 * on the way down whenever it sets a leaf's): skip it.  2. Clear A *before* reading the
 * subtree, so an access racing with the walk either finds its leaf's A already cleared
 * (and sets both again) or is reported by this walk.  3. If some table below was not read
 * whole (bloom filter, budget), set A again: a leaf left young there must stay reachable.
 * Returns false when the subtree was skipped.
 */
static bool nonleaf_enter(struct walker *w, uint64_t *slot, uint64_t e)
{
	if (!(e & EPT_A)) {
		w->st->subtrees_skipped_nonleaf++;
		return false;
	}
	/* The clear, then a full fence before the subtree's loads: the tree stores a leaf's
	 * A and then loads this entry, this walk stores the clear and then loads the leaf (the
	 * store-buffering pattern), so without a fence on each side both may read the other's
	 * old value on a weakly ordered host, leaving a young leaf under a clear A
	 * (host/access/ept_table.h, mtd_ept_mark_leaf, has the tree's side).  Once per subtree
	 * entered. */
	__atomic_fetch_and(slot, ~EPT_A, __ATOMIC_ACQUIRE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return true;
}

static void nonleaf_leave(struct walker *w, uint64_t *slot, bool partial_before)
{
	if (w->partial || w->stopped)
		__atomic_fetch_or(slot, EPT_A, __ATOMIC_RELAXED);
	w->partial = w->partial || partial_before;
}

/* A table at level start_level..2 mapping [start, end) (within its own span). */
static void walk_table(struct walker *w, uint64_t table_pa, int level, uint64_t start, uint64_t end)
{
	const struct vmm_pt_format *f = w->fmt;
	uint64_t *t = w->pt->table(w->pt->mem_ctx, table_pa);
	uint64_t size = 1ULL << PT_LEVEL_SHIFT(level);
	uint64_t table_gpa = start & ~(size * PT_ENTRIES - 1);
	unsigned lo = pt_index(start, level), hi = pt_index(end - 1, level);

	if (!t) {
		w->st->errors++;
		w->partial = true;
		return;
	}
	for (unsigned i = lo; i <= hi && !w->stopped; i++) {
		uint64_t egpa = table_gpa + i * size;
		uint64_t s = egpa > start ? egpa : start;
		uint64_t en = egpa + size < end ? egpa + size : end;
		uint64_t e;

		if (w->budget_left == 0) {
			walk_stop(w, s);
			break;
		}
		e = __atomic_load_n(&t[i], __ATOMIC_RELAXED);
		if (w->budget_left != UINT64_MAX)
			w->budget_left--;
		w->st->entries_read++;
		if (!f->present(e, level))
			continue;
		if (f->is_leaf(e, level)) {
			/* A 1 GiB / 2 MiB leaf: one entry of its size, reported at its own base. */
			w->st->leaves++;
			if ((e & f->accessed_mask) || f->dirty(e)) {
				uint64_t npages = size >> VMM_PAGE_SHIFT;
				uint8_t flags = leaf_young(w, KIND_GENERIC, &t[i], e, egpa, npages);

				if (flags & VMM_YOUNG_ACCESSED)
					w->st->young_pages += npages;
				if (flags & VMM_YOUNG_DIRTY)
					w->st->dirty_pages += npages;
			}
			continue;
		}
		if (level + 1 < PT_LAST_LEVEL) {
			if (!w->nonleaf) {
				walk_table(w, f->addr(e), level + 1, s, en);
				continue;
			}
			bool partial_before = w->partial;
			if (!nonleaf_enter(w, &t[i], e))
				continue;
			w->partial = false;
			walk_table(w, f->addr(e), level + 1, s, en);
			nonleaf_leave(w, &t[i], partial_before);
			continue;
		}
		if (w->filtering && !vmm_bloom_test(w->o->bloom, w->o->seq, f->addr(e))) {
			w->st->tables_skipped++;
			w->partial = true; /* its leaves keep their bits: the entry keeps A too */
			continue;
		}
		if (!w->nonleaf) {
			walk_leaf_table(w, f->addr(e), s, en);
			continue;
		}
		bool partial_before = w->partial;
		if (!nonleaf_enter(w, &t[i], e))
			continue;
		w->partial = false;
		walk_leaf_table(w, f->addr(e), s, en);
		nonleaf_leave(w, &t[i], partial_before);
	}
}

/* Where the tree's root sits: its level and how much GPA it resolves.  0 or -EINVAL. */
static int pt_root_geometry(const struct vmm_pt *pt, int *start_level, unsigned *root_tables,
			    uint64_t *gpa_limit)
{
	int levels = pt->levels ? pt->levels : 4;
	unsigned n = pt->root_tables ? pt->root_tables : 1;
	bool s2 = pt->fmt == &vmm_pt_format_s2;

	/* EPT: 4 or 5 levels, one root table.  Stage 2 (4 KiB granule): 2..4 levels (start at
	 * level 2, 1 or 0), up to 16 concatenated root tables (Arm ARM, "Concatenated
	 * translation tables").  Other formats: the 4-level shape only. */
	if (pt->fmt == &vmm_pt_format_ept ? (levels != 4 && levels != 5) || n != 1
	    : s2                          ? levels < 2 || levels > 4 || n > 16 || (n & (n - 1))
					  : levels != 4 || n != 1)
		return -EINVAL;
	*start_level = PT_LAST_LEVEL + 1 - levels;
	*root_tables = n;
	*gpa_limit = (1ULL << (PT_LEVEL_SHIFT(*start_level) + 9)) * n;
	return 0;
}

/* The root: root_tables tables at consecutive addresses, table k resolving the k-th slice
 * of the GPA space. */
static void walk_root(struct walker *w, int level, unsigned nroot, uint64_t start, uint64_t end)
{
	uint64_t slice = 1ULL << (PT_LEVEL_SHIFT(level) + 9);

	for (unsigned k = start / slice; k < nroot && !w->stopped; k++) {
		uint64_t s = k * slice > start ? k * slice : start;
		uint64_t e = (k + 1) * slice < end ? (k + 1) * slice : end;

		if (s >= e)
			break;
		walk_table(w, w->pt->root_pa + (uint64_t)k * VMM_PAGE_SIZE, level, s, e);
	}
}

static bool pt_valid(const struct vmm_pt *pt)
{
	return pt && pt->fmt && pt->table && pt->fmt->present && pt->fmt->is_leaf &&
	       pt->fmt->addr && pt->fmt->dirty;
}

int vmm_walk(const struct vmm_pt *pt, const struct vmm_walk_opts *opts,
	     struct vmm_walk_stats *stats)
{
	struct vmm_walk_stats local;
	struct walker w;

	if (!stats)
		stats = &local;
	memset(stats, 0, sizeof(*stats));
	int start_level;
	unsigned nroot;
	uint64_t gpa_limit;

	if (!pt_valid(pt) || !opts || pt_root_geometry(pt, &start_level, &nroot, &gpa_limit) < 0)
		return -EINVAL;
	if (opts->gpa_start > opts->gpa_end || opts->gpa_end > gpa_limit ||
	    (opts->gpa_start | opts->gpa_end) & (VMM_PAGE_SIZE - 1))
		return -EINVAL;
	stats->next_gpa = opts->gpa_end;
	if (opts->gpa_start == opts->gpa_end)
		return 0;
	w = (struct walker){
	    .pt = pt,
	    .fmt = pt->fmt,
	    .o = opts,
	    .st = stats,
	    .budget_left = opts->budget_entries ? opts->budget_entries : UINT64_MAX,
	    .filtering = opts->bloom && vmm_bloom_filtering(opts->bloom, opts->seq),
	    .nonleaf = opts->use_nonleaf_accessed && (pt->flags & VMM_PT_NONLEAF_ACCESSED) &&
		       pt->fmt == &vmm_pt_format_ept,
	    .bt = {.fn = opts->fn, .arg = opts->arg},
	};
	walk_root(&w, start_level, nroot, opts->gpa_start, opts->gpa_end);
	batch_flush(&w.bt);
	return stats->errors ? -EFAULT : 0;
}

/* ---- look-around ---------------------------------------------------------------------------- */

/* Test-and-clear A of one present leaf; report it when it was young.  Returns 1 or 0. */
static int lookaround_leaf(const struct vmm_pt_format *f, struct batch *bt, uint64_t *slot,
			   uint64_t e, uint64_t gpa, uint64_t npages)
{
	if (!(e & f->accessed_mask))
		return 0; /* not young now; if the MMU sets A after our load it stays set */
	e = __atomic_fetch_and(slot, ~f->accessed_mask, __ATOMIC_RELAXED);
	if (!(e & f->accessed_mask))
		return 0;
	batch_push(bt, gpa, npages, VMM_YOUNG_ACCESSED | (f->dirty(e) ? VMM_YOUNG_DIRTY : 0));
	return 1;
}

int vmm_lookaround(const struct vmm_pt *pt, uint64_t gpa, unsigned max, vmm_young_fn fn, void *arg)
{
	return vmm_lookaround_ex(pt, gpa, max, fn, arg, NULL);
}

int vmm_lookaround_ex(const struct vmm_pt *pt, uint64_t gpa, unsigned max, vmm_young_fn fn,
		      void *arg, struct vmm_lookaround_window *win)
{
	struct vmm_lookaround_window none;
	struct batch bt = {.fn = fn, .arg = arg};
	const struct vmm_pt_format *f;
	uint64_t table_pa, *t;
	unsigned idx, lo, hi;
	int young = 0;

	int start_level;
	unsigned nroot;
	uint64_t gpa_limit;

	if (!win)
		win = &none;
	*win = (struct vmm_lookaround_window){0};
	if (!pt_valid(pt) || pt_root_geometry(pt, &start_level, &nroot, &gpa_limit) < 0 ||
	    gpa >= gpa_limit)
		return -EINVAL;
	f = pt->fmt;
	gpa &= ~(VMM_PAGE_SIZE - 1);
	/* the root table of gpa's slice, when the root is concatenated */
	table_pa = pt->root_pa + (gpa >> (PT_LEVEL_SHIFT(start_level) + 9)) * VMM_PAGE_SIZE;
	/* Steps 1-3: descend to the leaf table, or stop at a huge leaf or a hole. */
	for (int level = start_level; level < PT_LAST_LEVEL; level++) {
		uint64_t size = 1ULL << PT_LEVEL_SHIFT(level);
		uint64_t e;

		t = pt->table(pt->mem_ctx, table_pa);
		if (!t)
			return -EFAULT;
		e = __atomic_load_n(&t[pt_index(gpa, level)], __ATOMIC_RELAXED);
		if (!f->present(e, level))
			return 0;
		if (f->is_leaf(e, level)) {
			young = lookaround_leaf(f, &bt, &t[pt_index(gpa, level)], e,
						gpa & ~(size - 1), size >> VMM_PAGE_SHIFT);
			batch_flush(&bt);
			return young;
		}
		table_pa = f->addr(e);
	}
	t = pt->table(pt->mem_ctx, table_pa);
	if (!t)
		return -EFAULT;
	/* Step 4: a window of max + 1 entries around gpa's, clamped to the table. */
	if (max > PT_ENTRIES - 1)
		max = PT_ENTRIES - 1;
	idx = pt_index(gpa, PT_LAST_LEVEL);
	lo = idx > max / 2 ? idx - max / 2 : 0;
	if (lo + max > PT_ENTRIES - 1)
		lo = PT_ENTRIES - 1 - max;
	hi = lo + max;
	win->table_pa = table_pa;
	win->entries = hi - lo + 1;
	for (unsigned i = lo; i <= hi; i++) {
		uint64_t e = __atomic_load_n(&t[i], __ATOMIC_RELAXED);

		if (f->present(e, PT_LAST_LEVEL) && f->is_leaf(e, PT_LAST_LEVEL))
			young += lookaround_leaf(
			    f, &bt, &t[i], e,
			    (gpa & ~(VMM_SIZE_2M - 1)) + ((uint64_t)i << VMM_PAGE_SHIFT), 1);
	}
	batch_flush(&bt);
	return young;
}
