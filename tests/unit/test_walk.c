// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_walk.c - the walker (vmm/walk.c) on simulated and hand-built tables.
 *
 *  - it visits exactly the mapped pages, holes and huge leaves included, for EPT, stage-2,
 *    and a caller-defined format (the generic path through the ops table);
 *  - a huge leaf is one report of its size, even when the range cuts it;
 *  - dirty state is reported, cleaned only on request, and never taken from a stage-2 leaf
 *    whose S2AP[1] is a permission (no DBM);
 *  - budget-limited walks resume where they stopped and together cover everything once;
 *  - look-around harvests exactly the young entries of its window;
 *  - the bloom filter skips cold tables without losing their accessed bits;
 *  - stress: another thread sets accessed/dirty bits during walks, and every access is
 *    reported by a walk that ran after it (nothing lost); see stress_run for the rule.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "vmm.h"

/* ---- helpers ------------------------------------------------------------------------------ */

struct collect {
	struct vmm_young *v;
	size_t n, cap;
	size_t batches;
};

static void collect_fn(void *arg, const struct vmm_young *batch, size_t n)
{
	struct collect *c = arg;

	assert_true(n >= 1 && n <= VMM_WALK_BATCH);
	c->batches++;
	for (size_t i = 0; i < n; i++) {
		if (c->n == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 1024;
			c->v = realloc(c->v, c->cap * sizeof(*c->v));
			assert_non_null(c->v);
		}
		c->v[c->n++] = batch[i];
	}
}

static void collect_reset(struct collect *c)
{
	c->n = 0;
	c->batches = 0;
}

static struct vmm_simhw *make(enum vmm_pt_format_id fmt, uint64_t bytes, unsigned holes, double s2m,
			      double s1g)
{
	struct vmm_simhw_config cfg = {.fmt = fmt,
				       .guest_bytes = bytes,
				       .nr_holes = holes,
				       .hole_bytes = 64ULL << 20,
				       .huge_2m_share = s2m,
				       .huge_1g_share = s1g,
				       .seed = 1234};
	struct vmm_simhw *hw = NULL;

	assert_int_equal(vmm_simhw_new(&cfg, &hw), 0);
	return hw;
}

static uint64_t ram_end(const struct vmm_simhw *hw)
{
	const struct vmm_range *r;
	size_t n = vmm_simhw_ram(hw, &r);

	return r[n - 1].end;
}

static void touch_all(struct vmm_simhw *hw, bool write)
{
	const struct vmm_range *r;
	size_t n = vmm_simhw_ram(hw, &r);

	for (size_t i = 0; i < n; i++)
		for (uint64_t gpa = r[i].start; gpa < r[i].end; gpa += 4096)
			assert_int_equal(vmm_simhw_access(hw, gpa, write), 0);
}

/* Reports are ascending and disjoint, each aligned to its size; merged, they are exactly
 * the RAM ranges. */
static void check_covers_ram(const struct collect *c, const struct vmm_simhw *hw)
{
	const struct vmm_range *r;
	size_t nr = vmm_simhw_ram(hw, &r), ri = 0;
	uint64_t run_start = 0, run_end = 0;

	for (size_t i = 0; i <= c->n; i++) {
		if (i < c->n) {
			const struct vmm_young *y = &c->v[i];
			uint64_t bytes = (uint64_t)y->npages << 12;

			assert_true(y->npages == 1 || y->npages == 512 || y->npages == 262144);
			assert_int_equal(y->gpa % bytes, 0);
			assert_true(i == 0 || y->gpa >= run_end);
			if (i > 0 && y->gpa == run_end) {
				run_end += bytes;
				continue;
			}
		}
		if (i > 0) {
			assert_true(ri < nr);
			assert_int_equal(run_start, r[ri].start);
			assert_int_equal(run_end, r[ri].end);
			ri++;
		}
		if (i < c->n) {
			run_start = c->v[i].gpa;
			run_end = run_start + ((uint64_t)c->v[i].npages << 12);
		}
	}
	assert_int_equal(ri, nr);
}

/* ---- exact coverage ------------------------------------------------------------------------ */

static void walk_exact(enum vmm_pt_format_id id, bool generic)
{
	struct vmm_simhw *hw = make(id, 8ULL << 30, 3, 0.3, 0.5);
	struct vmm_pt_format custom = *vmm_pt_format_get(id);
	struct vmm_pt pt = *vmm_simhw_pt(hw);
	struct collect c = {0};
	struct vmm_walk_stats st;
	struct vmm_simhw_counts cnt;
	struct vmm_walk_opts o = {
	    .gpa_end = ram_end(hw) + (1ULL << 30), .fn = collect_fn, .arg = &c};
	size_t n4k = 0, n2m = 0, n1g = 0;

	if (generic)
		pt.fmt = &custom; /* not one of the built-in objects: the ops-table path */
	vmm_simhw_get_counts(hw, &cnt);
	assert_true(cnt.leaves_1g > 0 && cnt.leaves_2m > 0 && cnt.leaves_4k > 0);
	touch_all(hw, false);
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	check_covers_ram(&c, hw);
	for (size_t i = 0; i < c.n; i++) {
		assert_int_equal(c.v[i].flags, VMM_YOUNG_ACCESSED);
		n4k += c.v[i].npages == 1;
		n2m += c.v[i].npages == 512;
		n1g += c.v[i].npages == 262144;
	}
	assert_int_equal(n4k, cnt.leaves_4k);
	assert_int_equal(n2m, cnt.leaves_2m);
	assert_int_equal(n1g, cnt.leaves_1g);
	assert_int_equal(st.young_pages, cnt.mapped_pages);
	assert_int_equal(st.leaves, cnt.leaves_4k + cnt.leaves_2m + cnt.leaves_1g);
	assert_int_equal(st.dirty_pages, 0);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.next_gpa, o.gpa_end);
	assert_int_equal(st.tables_visited * 512, st.leaf_entries_read);
	assert_true(c.batches >= (c.n + VMM_WALK_BATCH - 1) / VMM_WALK_BATCH);

	/* all cleared: the next walk finds nothing young but the same leaves */
	collect_reset(&c);
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(st.young_pages, 0);
	assert_int_equal(st.leaves, cnt.leaves_4k + cnt.leaves_2m + cnt.leaves_1g);
	free(c.v);
	vmm_simhw_free(hw);
}

static void test_walk_exact_ept(void **state)
{
	(void)state;
	walk_exact(VMM_PT_EPT, false);
}

static void test_walk_exact_s2(void **state)
{
	(void)state;
	walk_exact(VMM_PT_S2, false);
}

static void test_walk_exact_generic(void **state)
{
	(void)state;
	walk_exact(VMM_PT_EPT, true);
	walk_exact(VMM_PT_S2, true);
}

/* Unmapped runs (evicted pages), some inside huge leaves that had to be split, leave holes
 * inside leaf tables: the walk reports every mapped page once and none of the holes. */
static void test_walk_after_unmap(void **state)
{
	static const struct {
		uint64_t page, npages;
	} runs[] = {{0, 1}, {7, 3}, {511, 2}, {1000, 600}, {4096 + 5, 1}, {20000, 512}, {65535, 1}};
	struct vmm_simhw *hw = make(VMM_PT_S2, 256ULL << 20, 0, 0.5, 0);
	const uint64_t npages = (256ULL << 20) >> 12;
	unsigned char *want = malloc(npages), *got = calloc(npages, 1);
	struct collect c = {0};
	struct vmm_walk_opts o = {.gpa_end = 256ULL << 20, .fn = collect_fn, .arg = &c};
	struct vmm_walk_stats st;
	struct vmm_simhw_counts cnt;

	(void)state;
	assert_true(want && got);
	memset(want, 1, npages);
	touch_all(hw, false);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		assert_int_equal(vmm_simhw_unmap(hw, runs[i].page << 12, runs[i].npages), 0);
		memset(want + runs[i].page, 0, runs[i].npages);
	}
	assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
	for (size_t i = 0; i < c.n; i++)
		for (uint64_t p = 0; p < c.v[i].npages; p++) {
			assert_int_equal(got[(c.v[i].gpa >> 12) + p], 0); /* once */
			got[(c.v[i].gpa >> 12) + p] = 1;
		}
	assert_memory_equal(got, want, npages);
	vmm_simhw_get_counts(hw, &cnt);
	assert_int_equal(st.young_pages, cnt.mapped_pages);
	assert_int_equal(cnt.mapped_pages, npages - (1 + 3 + 2 + 600 + 1 + 512 + 1));
	assert_int_equal(st.leaves, cnt.leaves_4k + cnt.leaves_2m);
	free(want);
	free(got);
	free(c.v);
	vmm_simhw_free(hw);
}

/* A range that cuts a 1 GiB leaf reports the whole leaf once; a range over 4 KiB leaves
 * reports only inside the range. */
static void test_walk_partial_range(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_S2, 2ULL << 30, 0, 0, 1.0);
	struct collect c = {0};
	struct vmm_walk_opts o = {.gpa_start = (1ULL << 30) + (4ULL << 20),
				  .gpa_end = (1ULL << 30) + (8ULL << 20),
				  .fn = collect_fn,
				  .arg = &c};
	struct vmm_walk_stats st;

	(void)state;
	assert_int_equal(vmm_simhw_access(hw, (1ULL << 30) + (100ULL << 20), false), 0);
	assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.v[0].gpa, 1ULL << 30);
	assert_int_equal(c.v[0].npages, 262144);
	assert_int_equal(st.young_pages, 262144);
	vmm_simhw_free(hw);

	hw = make(VMM_PT_EPT, 64ULL << 20, 0, 0, 0);
	touch_all(hw, false);
	collect_reset(&c);
	o.gpa_start = 4096 * 500; /* crosses the first leaf table's end */
	o.gpa_end = 4096 * 530;
	assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
	assert_int_equal(c.n, 30);
	for (size_t i = 0; i < c.n; i++)
		assert_int_equal(c.v[i].gpa, 4096 * (500 + i));
	assert_int_equal(st.leaf_entries_read, 30);
	assert_int_equal(st.tables_visited, 2);
	free(c.v);
	vmm_simhw_free(hw);
}

/* ---- dirty state ---------------------------------------------------------------------------- */

static void test_walk_dirty(void **state)
{
	static const enum vmm_pt_format_id ids[] = {VMM_PT_EPT, VMM_PT_S2};

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct vmm_simhw *hw = make(ids[k], 64ULL << 20, 0, 0.5, 0);
		struct collect c = {0};
		struct vmm_walk_opts o = {.gpa_end = 64ULL << 20, .fn = collect_fn, .arg = &c};
		struct vmm_walk_stats st;

		touch_all(hw, true);
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_int_equal(st.young_pages, 16384);
		assert_int_equal(st.dirty_pages, 16384);
		for (size_t i = 0; i < c.n; i++)
			assert_int_equal(c.v[i].flags, VMM_YOUNG_ACCESSED | VMM_YOUNG_DIRTY);
		/* not young any more, still dirty: reported dirty alone */
		collect_reset(&c);
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_int_equal(st.young_pages, 0);
		assert_int_equal(st.dirty_pages, 16384);
		for (size_t i = 0; i < c.n; i++)
			assert_int_equal(c.v[i].flags, VMM_YOUNG_DIRTY);
		/* cleaned: reported once more, then never */
		o.clear_dirty = true;
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_int_equal(st.dirty_pages, 16384);
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_int_equal(st.dirty_pages, 0);
		/* and a new write dirties again (EPT: D; stage-2: DBM turns S2AP[1] back on) */
		assert_int_equal(vmm_simhw_access(hw, 8192, true), 0);
		collect_reset(&c);
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_int_equal(c.n, 1);
		assert_int_equal(c.v[0].flags, VMM_YOUNG_ACCESSED | VMM_YOUNG_DIRTY);
		free(c.v);
		vmm_simhw_free(hw);
	}
}

/* A hand-built stage-2 tree: root (PA 0x1000) -> L1 (0x2000) -> L2 (0x3000) -> L3 (0x4000);
 * PA 0x5000 is a table the callback cannot map. */
struct tiny {
	uint64_t t[4][512];
};

static uint64_t *tiny_table(void *ctx, uint64_t pa)
{
	struct tiny *m = ctx;

	if (pa >= 0x1000 && pa <= 0x4000 && !(pa & 0xfff))
		return m->t[pa / 0x1000 - 1];
	return NULL;
}

static void test_walk_s2_permission_kept(void **state)
{
	static struct tiny m;
	struct vmm_pt pt = {.fmt = vmm_pt_format_get(VMM_PT_S2),
			    .root_pa = 0x1000,
			    .table = tiny_table,
			    .mem_ctx = &m};
	struct collect c = {0};
	struct vmm_walk_opts o = {
	    .gpa_end = 4ULL << 20, .clear_dirty = true, .fn = collect_fn, .arg = &c};
	struct vmm_walk_stats st;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.t[0][0] = 0x2003; /* table descriptors: V|T + next table */
	m.t[1][0] = 0x3003;
	m.t[2][0] = 0x4003;
	m.t[2][1] = 0x5003; /* GPA 2 MiB..4 MiB: a table the callback cannot map */
	/* page 0: V|T, MemAttr, S2AP read+write (0xC0), SH, AF: writable by permission, no DBM */
	m.t[3][0] = 0x00000000800007FFULL;
	/* page 1: the same with DBM: dirty */
	m.t[3][1] = 0x00080000800017FFULL;
	assert_int_equal(vmm_walk(&pt, &o, &st), -EFAULT);
	assert_int_equal(st.errors, 1);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.v[0].flags, VMM_YOUNG_ACCESSED); /* no DBM: never dirty */
	assert_int_equal(c.v[1].flags, VMM_YOUNG_ACCESSED | VMM_YOUNG_DIRTY);
	assert_int_equal(m.t[3][0], 0x00000000800003FFULL); /* AF cleared, S2AP[1] kept */
	assert_int_equal(m.t[3][1], 0x000800008000137FULL); /* AF and S2AP[1] cleared */
	free(c.v);
}

/* ---- budget ------------------------------------------------------------------------------- */

static void test_walk_budget(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_EPT, 1ULL << 30, 1, 0.2, 0);
	struct collect c = {0};
	struct vmm_walk_opts o = {
	    .gpa_end = ram_end(hw), .fn = collect_fn, .arg = &c, .budget_entries = 1000};
	struct vmm_walk_stats st;
	uint64_t calls = 0, entries = 0, young = 0;

	(void)state;
	touch_all(hw, false);
	do {
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		assert_true(st.entries_read <= 1000);
		assert_true(st.next_gpa > o.gpa_start); /* progress */
		assert_int_equal(st.next_gpa % 4096, 0);
		entries += st.entries_read;
		young += st.young_pages;
		o.gpa_start = st.next_gpa;
		calls++;
	} while (st.next_gpa < o.gpa_end);
	check_covers_ram(&c, hw); /* every page once, none twice */
	{
		struct vmm_simhw_counts cnt;

		vmm_simhw_get_counts(hw, &cnt);
		assert_int_equal(young, cnt.mapped_pages);
	}
	assert_true(calls >= entries / 1000);
	assert_true(calls > 100);
	free(c.v);
	vmm_simhw_free(hw);
}

/* ---- look-around -------------------------------------------------------------------------- */

static void test_lookaround(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_EPT, 64ULL << 20, 0, 0, 0);
	uint64_t table = 3 * VMM_SIZE_2M;
	struct collect c = {0};
	struct vmm_walk_opts o = {
	    .gpa_start = table, .gpa_end = table + VMM_SIZE_2M, .fn = collect_fn, .arg = &c};

	(void)state;
	for (uint64_t i = 100; i <= 140; i++)
		vmm_simhw_access(hw, table + i * 4096, i == 130);
	vmm_simhw_access(hw, table + 300 * 4096, false);
	/* window: 64 entries centred on 120: 89..152 */
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table + 120 * 4096, 63, collect_fn, &c),
			 41);
	for (size_t i = 0; i < c.n; i++) {
		assert_int_equal(c.v[i].gpa, table + (100 + i) * 4096);
		assert_int_equal(c.v[i].flags,
				 VMM_YOUNG_ACCESSED | (100 + i == 130 ? VMM_YOUNG_DIRTY : 0));
	}
	/* those are clear now; page 300, outside the window, is still young */
	collect_reset(&c);
	assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, NULL), 0);
	assert_int_equal(c.n, 2); /* 300 young, 130 still dirty (look-around leaves D) */
	assert_int_equal(c.v[0].gpa, table + 130 * 4096);
	assert_int_equal(c.v[0].flags, VMM_YOUNG_DIRTY);
	assert_int_equal(c.v[1].gpa, table + 300 * 4096);

	/* at the table's start the window is clamped: 0..63; max above 511 is the table */
	vmm_simhw_access(hw, table + 0 * 4096, false);
	vmm_simhw_access(hw, table + 63 * 4096, false);
	vmm_simhw_access(hw, table + 64 * 4096, false);
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table + 2 * 4096, 63, NULL, NULL), 2);
	vmm_simhw_access(hw, table + 511 * 4096, false);
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table, 100000, NULL, NULL), 2);
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table, 100000, NULL, NULL), 0);
	/* outside RAM: nothing */
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), 1ULL << 40, 63, NULL, NULL), 0);
	vmm_simhw_free(hw);

	/* a huge leaf: the leaf itself */
	hw = make(VMM_PT_S2, 64ULL << 20, 0, 1.0, 0);
	collect_reset(&c);
	vmm_simhw_access(hw, table + 5 * 4096, false);
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table + 9 * 4096, 63, collect_fn, &c), 1);
	assert_int_equal(c.v[0].gpa, table);
	assert_int_equal(c.v[0].npages, 512);
	assert_int_equal(vmm_lookaround(vmm_simhw_pt(hw), table + 9 * 4096, 63, NULL, NULL), 0);
	free(c.v);
	vmm_simhw_free(hw);
}

/* ---- bloom filter -------------------------------------------------------------------------- */

/* 256 MiB = 128 leaf tables.  Tables 0..9 dense (every page), 10..19 sparse (one page). */
static void test_walk_bloom(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_EPT, 256ULL << 20, 0, 0, 0);
	struct vmm_bloom_config bc;
	struct vmm_bloom *bloom;
	struct vmm_walk_opts o = {.gpa_end = 256ULL << 20};
	struct vmm_walk_stats st;

	(void)state;
	vmm_bloom_config_default(&bc);
	bc.full_walk_every = 100;
	assert_int_equal(vmm_bloom_new(&bc, &bloom), 0);
	o.bloom = bloom;
	for (int round = 1; round <= 3; round++) {
		for (uint64_t t = 0; t < 10; t++)
			for (uint64_t i = 0; i < 512; i++)
				vmm_simhw_access(hw, t * VMM_SIZE_2M + i * 4096, false);
		for (uint64_t t = 10; t < 20; t++)
			vmm_simhw_access(hw, t * VMM_SIZE_2M + 7 * 4096, false);
		o.seq = (uint64_t)round;
		assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
		if (round == 1) { /* empty filter: full walk, dense tables admitted */
			assert_int_equal(st.tables_visited, 128);
			assert_int_equal(st.tables_skipped, 0);
			assert_int_equal(st.young_pages, 10 * 512 + 10);
		} else { /* only the dense tables (a false positive or two allowed) */
			assert_true(st.tables_visited >= 10 && st.tables_visited <= 12);
			assert_int_equal(st.tables_visited + st.tables_skipped, 128);
			assert_int_equal(st.leaf_entries_read, st.tables_visited * 512);
			assert_true(st.young_pages >= 10 * 512);
		}
	}
	/* the skipped sparse tables kept their accessed bits: a full walk reports them */
	o.bloom = NULL;
	assert_int_equal(vmm_walk(vmm_simhw_pt(hw), &o, &st), 0);
	assert_int_equal(st.young_pages, 10);
	vmm_bloom_free(bloom);
	vmm_simhw_free(hw);
}

/* ---- concurrent stress ---------------------------------------------------------------------- */

/*
 * The accessor hammers 1024 pages (two leaf tables) while the walker walks them over and
 * over, so that accesses land between the walker's load of an entry and its clear.
 *
 * What "nothing lost" means, precisely.  The accessor reads walks_done = B before an access
 * and walks_done = A after it (with a seq_cst fence between the access and that read; the
 * walker has one between publishing walks_done and its next walk).  So the access happened
 * after walk B completed and before walk A + 2 began: its accessed bit (set by it, or
 * already set and merged with it) is cleared by a walk in [B + 1, A + 2], and that walk
 * must report the page young.  A write must likewise be reported dirty by a walk in that
 * window.  Every access and every report is logged and each access is checked, so a
 * walker that wrote back a stale entry (dropping a D set between its load and its store)
 * or cleared a bit it had not seen set is caught.  Without clear_dirty, in addition, a page
 * once written must be reported dirty by every walk from then on.
 */
#define STRESS_PAGES    1024
#define STRESS_ACCESSES 300000
/* The accessor never runs more than this many accesses ahead of the walks completed, so
 * however the two threads are scheduled (a loaded machine may run the accessor for a
 * whole time slice while the walker waits for a CPU) the accesses spread over at least
 * STRESS_ACCESSES / STRESS_AHEAD walks; the walker waits for at least one access between
 * two walks, so neither runs far ahead of the other.  With the non-leaf order reversed (the
 * upper A before the leaf's) this caught lost accesses in 2 of 3 runs on this machine. */
#define STRESS_AHEAD    1000
/* Each thread's wait for the other (the accessor for a walk, the walker for an access) gives
 * up after this many seconds without it, and the test fails with both counters instead of
 * spinning until something kills it: a draft of the throttle above without its "+ 1" (no
 * access allowed before a walk that completed after the accessor started) deadlocked whenever
 * the walker's first walk finished before the accessor read walks_done, both threads in
 * sched_yield loops, and one manual run spun for 1 h 44 min.  The current throttle cannot
 * deadlock (each block of AHEAD accesses changes the progress the walker waits for, and the
 * walk that follows releases the next block); 40 runs (10 on one CPU, 10 two at a time)
 * passed in 1-2 s each. */
#define STRESS_STUCK_S  30

struct stress_ev {
	uint32_t page, lo, hi; /* the access happened between walks lo - 1 and hi */
	bool write;
};

struct stress_rep {
	uint32_t page, walk;
	uint8_t flags;
};

struct stress {
	struct vmm_simhw *hw;
	struct stress_ev *ev;   /* accessor's log, STRESS_ACCESSES entries */
	struct stress_rep *rep; /* walker's log, in walk order */
	size_t nr_rep, cap_rep;
	uint64_t walk;       /* the walk running now (walker thread only) */
	uint64_t walks_done; /* atomic: walks completed */
	uint64_t progress;   /* atomic: accesses made so far */
	int stuck;           /* atomic: a thread waited STRESS_STUCK_S for the other; both stop */
};

static uint64_t stress_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

/* One turn of a wait for the other thread: false once it has lasted STRESS_STUCK_S (and
 * then tells the other thread to stop too) or the other thread gave up. *since is 0 before
 * the wait's first turn. */
static bool stress_wait_turn(struct stress *s, uint64_t *since)
{
	if (__atomic_load_n(&s->stuck, __ATOMIC_ACQUIRE))
		return false;
	if (!*since) {
		*since = stress_now_s();
	} else if (stress_now_s() - *since > STRESS_STUCK_S) {
		__atomic_store_n(&s->stuck, 1, __ATOMIC_RELEASE);
		return false;
	}
	sched_yield();
	return true;
}

static void *accessor(void *p)
{
	struct stress *s = p;
	uint64_t x = 88172645463325252ULL;

	/* the walks done before this thread got a CPU do not count as spreading */
	uint64_t first = __atomic_load_n(&s->walks_done, __ATOMIC_ACQUIRE);

	for (uint64_t n = 0; n < STRESS_ACCESSES; n++) {
		struct stress_ev *e = &s->ev[n];
		uint64_t before, since = 0;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		e->page = (uint32_t)(x % STRESS_PAGES);
		e->write = (x >> 40) & 1;
		before = __atomic_load_n(&s->walks_done, __ATOMIC_ACQUIRE);
		/* let the walker catch up; AHEAD accesses are allowed before the first walk after
		 * this thread started, so that the walker (which waits for an access between
		 * two walks) always has one to wait for */
		while (n >= (before - first + 1) * STRESS_AHEAD) {
			if (!stress_wait_turn(s, &since))
				return NULL;
			before = __atomic_load_n(&s->walks_done, __ATOMIC_ACQUIRE);
		}
		if (vmm_simhw_access(s->hw, (uint64_t)e->page << 12, e->write) != 0)
			abort(); /* cannot happen: every page is mapped */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		e->lo = (uint32_t)before + 1;
		e->hi = (uint32_t)__atomic_load_n(&s->walks_done, __ATOMIC_ACQUIRE) + 2;
		__atomic_store_n(&s->progress, n + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void stress_record(void *arg, const struct vmm_young *b, size_t n)
{
	struct stress *s = arg;

	for (size_t i = 0; i < n; i++) {
		if (s->nr_rep == s->cap_rep) {
			s->cap_rep = s->cap_rep ? 2 * s->cap_rep : 65536;
			s->rep = realloc(s->rep, s->cap_rep * sizeof(*s->rep));
			if (!s->rep)
				abort();
		}
		s->rep[s->nr_rep++] = (struct stress_rep){.page = (uint32_t)(b[i].gpa >> 12),
							  .walk = (uint32_t)s->walk,
							  .flags = b[i].flags};
	}
}

/* Is there a report of `page` with `flag` in a walk within [lo, hi]?  by_page holds the
 * report indexes grouped by page (first[page] .. first[page + 1]), in walk order. */
static bool reported_within(const struct stress *s, const uint32_t *by_page, const size_t *first,
			    uint32_t page, uint32_t lo, uint32_t hi, uint8_t flag)
{
	size_t a = first[page], b = first[page + 1];

	while (a < b) { /* first report with walk >= lo */
		size_t mid = a + (b - a) / 2;

		if (s->rep[by_page[mid]].walk < lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < first[page + 1] && s->rep[by_page[a]].walk <= hi; a++)
		if (s->rep[by_page[a]].flags & flag)
			return true;
	return false;
}

/* nonleaf: the tree keeps upper A bits (as the emulated EPT does) and the walker skips
 * subtrees whose upper A is clear; the same "nothing lost" rule must hold (the leaf is
 * written before its upper A, and the walker clears an upper A before reading below it). */
static void stress_run_opts(enum vmm_pt_format_id id, bool clear_dirty, bool nonleaf)
{
	struct vmm_simhw_config cfg = {
	    .fmt = id, .guest_bytes = 8ULL << 20, .seed = 1234, .nonleaf_accessed = nonleaf};
	struct stress s = {0};
	struct vmm_walk_opts o = {.gpa_end = 8ULL << 20,
				  .clear_dirty = clear_dirty,
				  .fn = stress_record,
				  .arg = &s,
				  .use_nonleaf_accessed = nonleaf};
	uint64_t lost = 0, lost_dirty = 0, walks, distinct_lo = 0;
	size_t first[STRESS_PAGES + 1] = {0}, fill[STRESS_PAGES];
	uint32_t *by_page;
	pthread_t t;

	assert_int_equal(vmm_simhw_new(&cfg, &s.hw), 0);
	s.ev = calloc(STRESS_ACCESSES, sizeof(*s.ev));
	assert_non_null(s.ev);
	assert_int_equal(pthread_create(&t, NULL, accessor, &s), 0);
	/* walk while the accessor runs; its progress counter is the event awaited.  The
	 * accessor waits for one walk to complete before its first access. */
	uint64_t seen = 0, now, since = 0;
	while ((now = __atomic_load_n(&s.progress, __ATOMIC_ACQUIRE)) < STRESS_ACCESSES) {
		/* at least one access between two walks: on a loaded machine the walker would
		 * otherwise run thousands of walks while the accessor waits for a CPU, and the
		 * two would seldom overlap */
		if (now == seen && s.walk > 0) {
			if (!stress_wait_turn(&s, &since))
				break;
			continue;
		}
		seen = now;
		since = 0;
		s.walk++;
		assert_int_equal(vmm_walk(vmm_simhw_pt(s.hw), &o, NULL), 0);
		__atomic_store_n(&s.walks_done, s.walk, __ATOMIC_RELEASE);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	pthread_join(t, NULL);
	if (s.stuck)
		fail_msg("stress: the threads waited %d s for each other: %llu of %d accesses, "
			 "%llu walks",
			 STRESS_STUCK_S, (unsigned long long)s.progress, STRESS_ACCESSES,
			 (unsigned long long)s.walks_done);
	/* two more walks with the accessor stopped: every window [lo, hi] ends by now */
	for (int i = 0; i < 2; i++) {
		s.walk++;
		assert_int_equal(vmm_walk(vmm_simhw_pt(s.hw), &o, NULL), 0);
	}
	walks = s.walk;

	/* group the reports by page, keeping walk order */
	by_page = malloc((s.nr_rep + 1) * sizeof(*by_page));
	assert_non_null(by_page);
	for (size_t i = 0; i < s.nr_rep; i++)
		first[s.rep[i].page + 1]++;
	for (size_t p = 0; p < STRESS_PAGES; p++) {
		first[p + 1] += first[p];
		fill[p] = first[p];
	}
	for (size_t i = 0; i < s.nr_rep; i++)
		by_page[fill[s.rep[i].page]++] = (uint32_t)i;

	for (size_t n = 0; n < STRESS_ACCESSES; n++) {
		const struct stress_ev *e = &s.ev[n];

		distinct_lo += n == 0 || e->lo != s.ev[n - 1].lo;

		if (!reported_within(&s, by_page, first, e->page, e->lo, e->hi, VMM_YOUNG_ACCESSED))
			lost++;
		if (e->write &&
		    !reported_within(&s, by_page, first, e->page, e->lo, e->hi, VMM_YOUNG_DIRTY))
			lost_dirty++;
	}
	if (!clear_dirty) {
		/* dirty state is never cleared: from a page's first write window on, every
		 * walk reports it dirty */
		uint32_t from[STRESS_PAGES] = {0};
		uint64_t dirty_walks[STRESS_PAGES] = {0};

		for (size_t n = STRESS_ACCESSES; n-- > 0;)
			if (s.ev[n].write)
				from[s.ev[n].page] = s.ev[n].hi;
		for (size_t i = 0; i < s.nr_rep; i++)
			if ((s.rep[i].flags & VMM_YOUNG_DIRTY) && from[s.rep[i].page] &&
			    s.rep[i].walk >= from[s.rep[i].page])
				dirty_walks[s.rep[i].page]++;
		for (size_t p = 0; p < STRESS_PAGES; p++)
			if (from[p] && dirty_walks[p] != walks + 1 - from[p])
				lost_dirty++;
	}
	print_message("# stress %s clear_dirty=%d nonleaf=%d: %d accesses after %llu different "
		      "walks, %llu walks, %zu reports, lost %llu, lost dirty %llu\n",
		      vmm_pt_format_get(id)->name, clear_dirty, nonleaf, STRESS_ACCESSES,
		      (unsigned long long)distinct_lo, (unsigned long long)walks, s.nr_rep,
		      (unsigned long long)lost, (unsigned long long)lost_dirty);
	/* guaranteed by the accessor's throttle; how evenly the accesses spread over the walks
	 * (distinct_lo) depends on the scheduler, so it is printed, not asserted */
	assert_true(walks >= STRESS_ACCESSES / STRESS_AHEAD);
	assert_int_equal(lost, 0);
	assert_int_equal(lost_dirty, 0);
	free(by_page);
	free(s.rep);
	free(s.ev);
	vmm_simhw_free(s.hw);
}

static void stress_run(enum vmm_pt_format_id id, bool clear_dirty)
{
	stress_run_opts(id, clear_dirty, false);
}

static void test_walk_concurrent_stress(void **state)
{
	(void)state;
	stress_run_opts(VMM_PT_EPT, true, true);
	stress_run(VMM_PT_EPT, false);
	stress_run(VMM_PT_EPT, true);
	stress_run(VMM_PT_S2, false);
	stress_run(VMM_PT_S2, true);
}

/* ---- garbage in a leaf table ------------------------------------------------------------------
 * A hand-built tree (root, level 1, level 2, one leaf table) whose leaf table holds random
 * 64-bit words: present and not, stage-2's reserved 0b01 at level 3, A/D/AF/S2AP/DBM bits in
 * entries that map nothing.  The walker (its first pass is vectorised for the built-in
 * formats) must agree with the format's own ops on every entry: leaves, young, dirty, the
 * exact pages reported, and it may change nothing but the accessed bit of a young leaf. */
struct handtree {
	uint64_t t[4][512] __attribute__((aligned(4096)));
};

static uint64_t *handtree_table(void *ctx, uint64_t pa)
{
	struct handtree *h = ctx;

	return pa % 4096 == 0 && pa / 4096 >= 1 && pa / 4096 <= 4 ? h->t[pa / 4096 - 1] : NULL;
}

struct seen {
	uint8_t flags[512];
	unsigned n;
};

static void seen_fn(void *arg, const struct vmm_young *b, size_t n)
{
	struct seen *s = arg;

	for (size_t i = 0; i < n; i++) {
		assert_int_equal(b[i].npages, 1);
		assert_true(b[i].gpa < 512 * 4096);
		s->flags[b[i].gpa / 4096] = b[i].flags;
		s->n++;
	}
}

static void garbage_run(enum vmm_pt_format_id id, unsigned seed, uint64_t lo, uint64_t hi)
{
	const struct vmm_pt_format *f = vmm_pt_format_get(id);
	static struct handtree h;
	uint64_t orig[512], want_leaves = 0, want_young = 0, want_dirty = 0;
	struct seen seen = {0};
	struct vmm_walk_stats st;
	struct vmm_pt pt = {.fmt = f, .root_pa = 4096, .table = handtree_table, .mem_ctx = &h};
	struct vmm_walk_opts o = {
	    .gpa_start = lo * 4096, .gpa_end = hi * 4096, .fn = seen_fn, .arg = &seen};

	memset(&h, 0, sizeof(h));
	h.t[0][0] = f->make_table(2 * 4096);
	h.t[1][0] = f->make_table(3 * 4096);
	h.t[2][0] = f->make_table(4 * 4096);
	srandom(seed);
	for (unsigned i = 0; i < 512; i++) {
		uint64_t e =
		    (uint64_t)random() << 33 ^ (uint64_t)random() << 11 ^ (uint64_t)random();
		/* half of them real leaves with random A/D, the rest raw garbage */
		if (random() % 2)
			e = f->make_leaf((uint64_t)i << 12, 3, random() % 2) |
			    (random() % 2 ? f->hw_access_bits(0, random() % 2) : 0);
		h.t[3][i] = orig[i] = e;
	}
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	for (unsigned i = 0; i < 512; i++) {
		uint64_t e = orig[i];
		bool in = i >= lo && i < hi;
		bool leaf = in && f->present(e, 3) && f->is_leaf(e, 3);
		bool young = leaf && (e & f->accessed_mask);
		bool dirty = leaf && f->dirty(e);
		uint8_t want = (young ? VMM_YOUNG_ACCESSED : 0) | (dirty ? VMM_YOUNG_DIRTY : 0);

		want_leaves += leaf;
		want_young += young;
		want_dirty += dirty;
		assert_int_equal(seen.flags[i], want);
		assert_int_equal(h.t[3][i], young ? e & ~f->accessed_mask : e);
	}
	assert_int_equal(st.leaves, want_leaves);
	assert_int_equal(st.young_pages, want_young);
	assert_int_equal(st.dirty_pages, want_dirty);
	assert_true(want_leaves > 100 && want_young > 20); /* the table was a real test */
}

static void test_walk_garbage_leaf_table(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 20; seed++) {
		garbage_run(VMM_PT_EPT, seed, 0, 512);
		garbage_run(VMM_PT_S2, seed, 0, 512);
	}
	/* ranges that start and end inside 64-entry groups take the scalar path there */
	garbage_run(VMM_PT_EPT, 77, 3, 509);
	garbage_run(VMM_PT_S2, 78, 61, 450);
}

/* ---- arguments ------------------------------------------------------------------------------ */

static void test_walk_invalid(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_EPT, 64ULL << 20, 0, 0, 0);
	const struct vmm_pt *pt = vmm_simhw_pt(hw);
	struct vmm_walk_opts o = {.gpa_end = 64ULL << 20};
	struct vmm_walk_stats st;

	(void)state;
	assert_int_equal(vmm_walk(NULL, &o, &st), -EINVAL);
	assert_int_equal(vmm_walk(pt, NULL, &st), -EINVAL);
	o.gpa_start = 8192;
	o.gpa_end = 4096;
	assert_int_equal(vmm_walk(pt, &o, &st), -EINVAL);
	o.gpa_start = 100;
	o.gpa_end = 8192;
	assert_int_equal(vmm_walk(pt, &o, &st), -EINVAL);
	o.gpa_start = 0;
	o.gpa_end = (1ULL << 48) + 4096;
	assert_int_equal(vmm_walk(pt, &o, &st), -EINVAL);
	o.gpa_end = 1ULL << 48; /* the whole 4-level space is fine */
	assert_int_equal(vmm_walk(pt, &o, &st), 0);
	assert_int_equal(st.leaves, 16384);
	o.gpa_start = o.gpa_end = 4096;
	assert_int_equal(vmm_walk(pt, &o, &st), 0);
	assert_int_equal(st.entries_read, 0);
	assert_int_equal(vmm_lookaround(NULL, 0, 63, NULL, NULL), -EINVAL);
	vmm_simhw_free(hw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_walk_exact_ept),
	    cmocka_unit_test(test_walk_exact_s2),
	    cmocka_unit_test(test_walk_exact_generic),
	    cmocka_unit_test(test_walk_after_unmap),
	    cmocka_unit_test(test_walk_partial_range),
	    cmocka_unit_test(test_walk_dirty),
	    cmocka_unit_test(test_walk_s2_permission_kept),
	    cmocka_unit_test(test_walk_budget),
	    cmocka_unit_test(test_lookaround),
	    cmocka_unit_test(test_walk_bloom),
	    cmocka_unit_test(test_walk_concurrent_stress),
	    cmocka_unit_test(test_walk_garbage_leaf_table),
	    cmocka_unit_test(test_walk_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
