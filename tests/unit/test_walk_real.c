// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_walk_real.c - the walker on the shapes real tables have (vmm/walk.c, vmm/pt_format.c):
 * KVM's MMIO SPTEs in an EPT, arm64 stage-2 walks that start at level 1 with concatenated
 * root tables, 5-level EPT, the EPTP / VTCR_EL2 decoders, and non-leaf accessed bits.
 *
 * Trees are built by hand in an arena of 4 KiB tables (table i at PA ARENA_PA + i * 4 KiB),
 * from the formats' own encoders, so every case is a tree a hypervisor could hand us.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vmm.h"

#define ARENA_PA     0x100000000ULL
#define ARENA_TABLES 64

struct arena {
	uint64_t (*t)[512];
	unsigned used;
};

static uint64_t *arena_table(void *ctx, uint64_t pa)
{
	struct arena *a = ctx;

	if (pa < ARENA_PA || (pa & 0xfff) || (pa - ARENA_PA) / 4096 >= a->used)
		return NULL;
	return a->t[(pa - ARENA_PA) / 4096];
}

/* n consecutive tables; returns the PA of the first */
static uint64_t arena_alloc(struct arena *a, unsigned n)
{
	uint64_t pa = ARENA_PA + (uint64_t)a->used * 4096;

	assert_true(a->used + n <= ARENA_TABLES);
	a->used += n;
	return pa;
}

static uint64_t *at(struct arena *a, uint64_t pa)
{
	return arena_table(a, pa);
}

struct seen {
	uint64_t gpa[64];
	uint8_t flags[64];
	size_t n;
};

static void seen_fn(void *arg, const struct vmm_young *b, size_t n)
{
	struct seen *s = arg;

	for (size_t i = 0; i < n && s->n < 64; i++) {
		s->gpa[s->n] = b[i].gpa;
		s->flags[s->n++] = b[i].flags;
	}
}

/* Map one 4 KiB page at gpa in a tree whose root (at start level, nroot tables) is root. */
static uint64_t *map_page(struct arena *a, const struct vmm_pt_format *f, uint64_t root, int start,
			  unsigned nroot, uint64_t gpa)
{
	uint64_t pa = root + (gpa >> (39 - 9 * start + 9)) % nroot * 4096;

	for (int level = start; level < 3; level++) {
		uint64_t *t = at(a, pa);
		unsigned i = (unsigned)((gpa >> (39 - 9 * level)) & 511);

		if (!f->present(t[i], level))
			t[i] = f->make_table(arena_alloc(a, 1));
		pa = f->addr(t[i]);
	}
	uint64_t *leaf = &at(a, pa)[(gpa >> 12) & 511];
	*leaf = f->make_leaf(0x5000000000ULL + gpa, 3, true);
	return leaf;
}

/* KVM's MMIO SPTEs (W|X, no R, generation in bits 3-10) are never reported nor written. */
static void test_ept_mmio_spte(void **state)
{
	struct arena a = {.t = calloc(ARENA_TABLES, 4096)};
	const struct vmm_pt_format *f = vmm_pt_format_get(VMM_PT_EPT);
	uint64_t root = arena_alloc(&a, 1);
	struct vmm_pt pt = {.fmt = f, .root_pa = root, .table = arena_table, .mem_ctx = &a};
	struct seen s = {0};
	uint64_t *leaf = map_page(&a, f, root, 0, 1, 0x200000);
	uint64_t *table = leaf - 0; /* entry 0 of the 2 MiB table at 0x200000 */
	struct vmm_walk_opts o = {.gpa_start = 0x200000,
				  .gpa_end = 0x400000,
				  .clear_dirty = true,
				  .fn = seen_fn,
				  .arg = &s};
	struct vmm_walk_stats st;

	(void)state;
	*leaf |= f->hw_access_bits(*leaf, true); /* page 0: young and dirty */
	/* entries 1..40: MMIO SPTEs with every generation value's bits, A/D positions set */
	for (unsigned i = 1; i <= 40; i++)
		table[i] = 0x6 | ((uint64_t)(i * 37 % 256) << 3) | 0x300;
	uint64_t before[41];
	memcpy(before, table, sizeof(before));
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.gpa[0], 0x200000);
	assert_int_equal(st.leaves, 1); /* the SSE2 first pass does not count them either */
	assert_memory_equal(&before[1], &table[1], 40 * sizeof(uint64_t));
	/* look-around over the same window does not touch them either */
	*leaf |= f->hw_access_bits(*leaf, false);
	s.n = 0;
	assert_int_equal(vmm_lookaround(&pt, 0x200000 + 20 * 4096, 63, seen_fn, &s), 1);
	assert_memory_equal(&before[1], &table[1], 40 * sizeof(uint64_t));
	free(a.t);
}

/* Stage 2 from level 1 with two concatenated root tables (KVM's default 40-bit IPA): pages
 * in both halves of the IPA space are found, through the VTCR decoder. */
static void test_s2_level1_concatenated(void **state)
{
	struct arena a = {.t = calloc(ARENA_TABLES, 4096)};
	const struct vmm_pt_format *f = vmm_pt_format_get(VMM_PT_S2);
	uint64_t root = arena_alloc(&a, 2); /* 2 tables, 8 KiB aligned: ARENA_PA is */
	struct vmm_pt pt;
	uint64_t gpas[] = {0x1000, 0x40201000, 0x8000000000ULL + 0x3000, 0xFFFFFFF000ULL};
	/* T0SZ 24 (40-bit IPA), SL0 1 (level 1), TG0 0, HA; VTTBR with VMID 5 in 63:48 */
	uint64_t vtcr = 24 | (1ULL << 6) | (1ULL << 21), vttbr = root | (5ULL << 48);
	struct seen s = {0};

	(void)state;
	assert_int_equal(vmm_pt_from_vtcr(&pt, vttbr, vtcr, arena_table, &a), 0);
	assert_int_equal(pt.levels, 3);
	assert_int_equal(pt.root_tables, 2);
	assert_int_equal(pt.root_pa, root);
	for (size_t i = 0; i < 4; i++) {
		uint64_t *l = map_page(&a, f, root, 1, 2, gpas[i]);
		*l |= f->hw_access_bits(*l, false);
	}
	struct vmm_walk_opts o = {.gpa_start = 0, .gpa_end = 1ULL << 40, .fn = seen_fn, .arg = &s};
	assert_int_equal(vmm_walk(&pt, &o, NULL), 0);
	assert_int_equal(s.n, 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(s.gpa[i], gpas[i]);
	/* beyond what two tables resolve: refused */
	o.gpa_end = (1ULL << 40) + 4096;
	assert_int_equal(vmm_walk(&pt, &o, NULL), -EINVAL);
	/* look-around finds a page in the second root table */
	uint64_t *l = map_page(&a, f, root, 1, 2, gpas[2]);
	*l |= f->hw_access_bits(*l, false);
	s.n = 0;
	assert_int_equal(vmm_lookaround(&pt, gpas[2], 7, seen_fn, &s), 1);
	assert_int_equal(s.gpa[0], gpas[2]);
	free(a.t);
}

/* What the decoders refuse, each for a reason a reader of the header can check. */
static void test_decoders_refuse(void **state)
{
	struct vmm_pt pt;
	int dummy;

	(void)state;
	/* EPTP: 4-level WB with A/D */
	assert_int_equal(
	    vmm_pt_from_eptp(&pt, 0x12345000 | 6 | (3 << 3) | (1 << 6), arena_table, &dummy), 0);
	assert_int_equal(pt.levels, 4);
	assert_int_equal(pt.root_pa, 0x12345000);
	/* 5-level */
	assert_int_equal(
	    vmm_pt_from_eptp(&pt, 0x12345000 | 6 | (4 << 3) | (1 << 6), arena_table, &dummy), 0);
	assert_int_equal(pt.levels, 5);
	/* A/D off: nothing to age */
	assert_int_equal(vmm_pt_from_eptp(&pt, 0x12345000 | 6 | (3 << 3), arena_table, &dummy),
			 -EOPNOTSUPP);
	/* walk length 3 or 6, reserved bits */
	assert_int_equal(vmm_pt_from_eptp(&pt, 6 | (2 << 3) | (1 << 6), arena_table, &dummy),
			 -EINVAL);
	assert_int_equal(vmm_pt_from_eptp(&pt, 6 | (5 << 3) | (1 << 6), arena_table, &dummy),
			 -EINVAL);
	assert_int_equal(
	    vmm_pt_from_eptp(&pt, 6 | (3 << 3) | (1 << 6) | (1 << 9), arena_table, &dummy),
	    -EINVAL);
	/* VTCR: 64 KiB granule, SL0 3, DS (LPA2), too many concatenated tables, misaligned */
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0, 24 | (1 << 6) | (1 << 14), arena_table, &dummy),
			 -EINVAL);
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0, 24 | (3 << 6), arena_table, &dummy), -EINVAL);
	assert_int_equal(
	    vmm_pt_from_vtcr(&pt, 0, 24 | (1 << 6) | (1ULL << 32), arena_table, &dummy), -EINVAL);
	/* 44-bit IPA from level 1: 2^(44-39) = 32 tables */
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0, 20 | (1 << 6), arena_table, &dummy), -EINVAL);
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0x1000, 24 | (1 << 6), arena_table, &dummy),
			 -EINVAL);
	/* 48-bit from level 0: one table; 36-bit from level 1: one table, partly used */
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0x2000, 16 | (2 << 6), arena_table, &dummy), 0);
	assert_int_equal(pt.levels, 4);
	assert_int_equal(pt.root_tables, 1);
	assert_int_equal(vmm_pt_from_vtcr(&pt, 0x2000, 28 | (1 << 6), arena_table, &dummy), 0);
	assert_int_equal(pt.root_tables, 1);
	/* a hand-built tree the format does not have */
	struct vmm_pt bad = {
	    .fmt = vmm_pt_format_get(VMM_PT_EPT), .table = arena_table, .levels = 3};
	struct vmm_walk_opts o = {.gpa_end = 4096};
	assert_int_equal(vmm_walk(&bad, &o, NULL), -EINVAL);
	bad.levels = 4;
	bad.root_tables = 2; /* concatenation is stage 2's */
	assert_int_equal(vmm_walk(&bad, &o, NULL), -EINVAL);
}

/* 5-level EPT: a page above 2^48 (only a PML5 reaches it) and one below are found. */
static void test_ept_5level(void **state)
{
	struct arena a = {.t = calloc(ARENA_TABLES, 4096)};
	const struct vmm_pt_format *f = vmm_pt_format_get(VMM_PT_EPT);
	uint64_t root = arena_alloc(&a, 1);
	struct vmm_pt pt;
	uint64_t gpas[] = {0x7000, (3ULL << 48) + 0x40000000ULL + 0x5000};
	struct seen s = {0};

	(void)state;
	assert_int_equal(vmm_pt_from_eptp(&pt, root | 6 | (4 << 3) | (1 << 6), arena_table, &a), 0);
	for (size_t i = 0; i < 2; i++) {
		uint64_t *l = map_page(&a, f, root, -1, 1, gpas[i]);
		*l |= f->hw_access_bits(*l, true);
	}
	struct vmm_walk_opts o = {.gpa_start = 0, .gpa_end = 1ULL << 57, .fn = seen_fn, .arg = &s};
	assert_int_equal(vmm_walk(&pt, &o, NULL), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.gpa[0], gpas[0]);
	assert_int_equal(s.gpa[1], gpas[1]);
	assert_int_equal(s.flags[1], VMM_YOUNG_ACCESSED | VMM_YOUNG_DIRTY);
	/* the 4-level reading of the same root cannot reach past 2^48 */
	pt.levels = 4;
	o.gpa_end = (1ULL << 48) + 4096;
	assert_int_equal(vmm_walk(&pt, &o, NULL), -EINVAL);
	free(a.t);
}

/*
 * Non-leaf accessed bits (VMM_PT_NONLEAF_ACCESSED): a subtree whose upper A is clear is
 * skipped without reading it; a subtree read whole gets its A cleared; one the bloom filter
 * or the budget cut short keeps (or gets back) its A, so no young leaf becomes unreachable.
 */
static void test_nonleaf_accessed(void **state)
{
	struct arena a = {.t = calloc(ARENA_TABLES, 4096)};
	const struct vmm_pt_format *f = vmm_pt_format_get(VMM_PT_EPT);
	uint64_t root = arena_alloc(&a, 1);
	struct vmm_pt pt = {.fmt = f,
			    .root_pa = root,
			    .table = arena_table,
			    .mem_ctx = &a,
			    .flags = VMM_PT_NONLEAF_ACCESSED};
	uint64_t g1 = 0x200000, g2 = 0x40000000ULL + 0x600000; /* different GiBs */
	uint64_t *l1 = map_page(&a, f, root, 0, 1, g1), *l2 = map_page(&a, f, root, 0, 1, g2);
	uint64_t *pml4 = at(&a, root);
	uint64_t *pdpt = at(&a, f->addr(pml4[0]));
	uint64_t *pd0 = at(&a, f->addr(pdpt[0])), *pd1 = at(&a, f->addr(pdpt[1]));
	const uint64_t A = f->accessed_mask;
	struct seen s = {0};
	struct vmm_walk_stats st;
	struct vmm_walk_opts o = {.gpa_start = 0,
				  .gpa_end = 2ULL << 30,
				  .fn = seen_fn,
				  .arg = &s,
				  .use_nonleaf_accessed = true};

	(void)state;
	/* Only g1 is touched, as the plugin does it: leaf and every upper entry get A. */
	*l1 |= A;
	pml4[0] |= A;
	pdpt[0] |= A;
	pd0[1] |= A;
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.gpa[0], g1);
	assert_int_equal(st.subtrees_skipped_nonleaf, 1); /* GiB 1: PDPTE A clear */
	assert_int_equal(st.tables_visited, 1);
	assert_false(pml4[0] & A);
	assert_false(pdpt[0] & A);
	assert_false(pd0[1] & A);
	/* Nothing touched: the walk reads the root entry only. */
	s.n = 0;
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(st.entries_read, 1);
	/* A leaf young under an upper entry whose A is clear is not seen: the contract is that
	 * the tree sets them together (that is why only exact trees set the flag) ... */
	*l2 |= A;
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(s.n, 0);
	/* ... and without the option the same walk finds it. */
	o.use_nonleaf_accessed = false;
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_int_equal(s.n, 1);
	/* Budget: a walk cut inside a subtree gives its upper entries their A back. */
	o.use_nonleaf_accessed = true;
	*l1 |= A;
	pml4[0] |= A;
	pdpt[0] |= A;
	pd0[1] |= A;
	*l2 |= A;
	pdpt[1] |= A;
	pd1[3] |= A;
	s.n = 0;
	o.budget_entries = 6; /* PML4E 0, PDPTE 0, PDEs 0-1, 2 leaf entries: cut in GiB 0 */
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	assert_true(st.next_gpa < g2);
	assert_true(pml4[0] & A);
	assert_true(pdpt[0] & A);
	o.budget_entries = 0;
	o.gpa_start = st.next_gpa;
	assert_int_equal(vmm_walk(&pt, &o, &st), 0);
	bool found2 = false;
	for (size_t i = 0; i < s.n; i++)
		found2 = found2 || s.gpa[i] == g2;
	assert_true(found2);
	/* a subtree with MMIO-like upper entries (no R) is not descended */
	(void)l2;
	free(a.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ept_mmio_spte),    cmocka_unit_test(test_s2_level1_concatenated),
	    cmocka_unit_test(test_decoders_refuse),  cmocka_unit_test(test_ept_5level),
	    cmocka_unit_test(test_nonleaf_accessed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
