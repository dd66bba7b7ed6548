// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_pt_format.c - the EPT and stage-2 bit layouts against hand-written encodings.
 *
 * Every expected value below was written by hand from the bit positions in the specs, not
 * produced by the encoder under test:
 *   EPT (Intel SDM vol. 3C, "EPT Translation Mechanism" tables): R=bit 0, W=1, X=2,
 *     memory type bits 5:3 (WB = 6 -> 0x30), PS=bit 7 (0x80) on PDPTE/PDE leaves,
 *     A=bit 8 (0x100), D=bit 9 (0x200), PA bits 51:12 (mask 0x000FFFFFFFFFF000).
 *   Stage-2 (Arm ARM, "VMSAv8-64 translation table format descriptors"): valid=bit 0,
 *     table/page=bit 1, MemAttr bits 5:2 (0b1111 -> 0x3C), S2AP bits 7:6 (read 0x40,
 *     write 0x80), SH bits 9:8 (inner = 0x300), AF=bit 10 (0x400), DBM=bit 51
 *     (0x0008000000000000), OA bits 47:12 (mask 0x0000FFFFFFFFF000).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

/* ---- encoders --------------------------------------------------------------------------- */

struct enc_case { // NOLINT(clang-analyzer-optin.performance.Padding): a test table
	enum vmm_pt_format_id fmt;
	const char *what;
	int kind; /* 0 = make_leaf, 1 = make_table */
	uint64_t pa;
	int level;
	bool writable;
	uint64_t expect;
};

static const struct enc_case enc_cases[] = {
    /* EPT: 0x7 = R|W|X, 0x5 = R|X, 0x30 = WB, 0x80 = PS */
    {VMM_PT_EPT, "4K leaf rw", 0, 0x123456000, 3, true, 0x0000000123456037ULL},
    {VMM_PT_EPT, "4K leaf ro", 0, 0x123456000, 3, false, 0x0000000123456035ULL},
    {VMM_PT_EPT, "2M leaf rw", 0, 0x40200000, 2, true, 0x00000000402000B7ULL},
    {VMM_PT_EPT, "1G leaf ro", 0, 0x80000000, 1, false, 0x00000000800000B5ULL},
    {VMM_PT_EPT, "table", 1, 0xABC000, 0, false, 0x0000000000ABC007ULL},
    {VMM_PT_EPT, "top PA bit 51", 0, 0x000FFFFFFFFFF000ULL, 3, true, 0x000FFFFFFFFFF037ULL},
    {VMM_PT_EPT, "bits above 51 dropped", 0, 0xFFF0000000001000ULL, 3, true, 0x0000000000001037ULL},
    /* Stage-2: 0x37F = V|T|MemAttr WB|S2AP R|SH inner, 0x37D the same without T (block);
	 * writable = DBM (bit 51) with S2AP[1] clear (writable-clean) */
    {VMM_PT_S2, "4K page rw", 0, 0x123456000, 3, true, 0x000800012345637FULL},
    {VMM_PT_S2, "4K page ro", 0, 0x123456000, 3, false, 0x000000012345637FULL},
    {VMM_PT_S2, "2M block rw", 0, 0x40200000, 2, true, 0x000800004020037DULL},
    {VMM_PT_S2, "1G block ro", 0, 0x80000000, 1, false, 0x000000008000037DULL},
    {VMM_PT_S2, "table", 1, 0xABC000, 0, false, 0x0000000000ABC003ULL},
    {VMM_PT_S2, "top OA bit 47", 0, 0x0000FFFFFFFFF000ULL, 3, false, 0x0000FFFFFFFFF37FULL},
    {VMM_PT_S2, "bits above 47 dropped", 0, 0x0001000000001000ULL, 3, false, 0x000000000000137FULL},
};

static void test_encoders(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(enc_cases) / sizeof(enc_cases[0]); i++) {
		const struct enc_case *c = &enc_cases[i];
		const struct vmm_pt_format *f = vmm_pt_format_get(c->fmt);
		uint64_t got =
		    c->kind ? f->make_table(c->pa) : f->make_leaf(c->pa, c->level, c->writable);

		if (got != c->expect)
			fail_msg("%s %s: got %#018llx, want %#018llx", f->name, c->what,
				 (unsigned long long)got, (unsigned long long)c->expect);
	}
}

/* ---- decoders --------------------------------------------------------------------------- */

struct dec_case {
	enum vmm_pt_format_id fmt;
	uint64_t e;
	int level;
	bool present, leaf, dirty;
	uint64_t addr;
};

static const struct dec_case dec_cases[] = {
    /* EPT */
    {VMM_PT_EPT, 0x0000000123456037ULL, 3, true, true, false, 0x123456000},
    {VMM_PT_EPT, 0x0000000123456337ULL, 3, true, true, true, 0x123456000},  /* A|D */
    {VMM_PT_EPT, 0x0000000123456137ULL, 3, true, true, false, 0x123456000}, /* A only */
    /* X only (execute-only) and W|X with bits 3-10 set (KVM's MMIO SPTE, the generation
     * number in 3-10): no R, so not an entry the walker may use (pt_format.h) */
    {VMM_PT_EPT, 0x0000000000000004ULL, 3, false, false, false, 0},
    {VMM_PT_EPT, 0x00000000000007FEULL, 3, false, false, false, 0},
    {VMM_PT_EPT, 0x0000000000000080ULL, 3, false, false, false, 0}, /* no R/W/X */
    {VMM_PT_EPT, 0x0000000123456000ULL, 3, false, false, false, 0x123456000},
    {VMM_PT_EPT, 0x00000000402000B7ULL, 2, true, true, false, 0x40200000},   /* PS: 2M */
    {VMM_PT_EPT, 0x00000000800000B5ULL, 1, true, true, false, 0x80000000},   /* PS: 1G */
    {VMM_PT_EPT, 0x00000000402000B7ULL, 0, true, false, false, 0x40200000},  /* PML4: no PS */
    {VMM_PT_EPT, 0x0000000000ABC007ULL, 2, true, false, false, 0xABC000},    /* table */
    {VMM_PT_EPT, 0xFFF0000123456007ULL, 1, true, false, false, 0x123456000}, /* 63:52 ign. */
    /* Stage-2 */
    {VMM_PT_S2, 0x000800012345677FULL, 3, true, true, false, 0x123456000},   /* AF, clean */
    {VMM_PT_S2, 0x00080001234567FFULL, 3, true, true, true, 0x123456000},    /* DBM+S2AP[1] */
    {VMM_PT_S2, 0x00000001234567FFULL, 3, true, true, false, 0x123456000},   /* no DBM */
    {VMM_PT_S2, 0x0000000123456001ULL, 3, false, false, false, 0x123456000}, /* 0b01 @3 */
    {VMM_PT_S2, 0x0000000000ABC001ULL, 0, false, false, false, 0xABC000},    /* L0 block */
    {VMM_PT_S2, 0x0000000000ABC003ULL, 0, true, false, false, 0xABC000},     /* L0 table */
    {VMM_PT_S2, 0x000000004020037DULL, 2, true, true, false, 0x40200000},    /* 2M block */
    {VMM_PT_S2, 0x000000008000037DULL, 1, true, true, false, 0x80000000},    /* 1G block */
    {VMM_PT_S2, 0x0000000040200003ULL, 2, true, false, false, 0x40200000},   /* table */
    {VMM_PT_S2, 0x000000004020037CULL, 2, false, false, false, 0x40200000},  /* invalid */
    {VMM_PT_S2, 0xFFF0000123456003ULL, 1, true, false, false, 0x123456000},  /* 63:48 */
};

static void test_decoders(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(dec_cases) / sizeof(dec_cases[0]); i++) {
		const struct dec_case *c = &dec_cases[i];
		const struct vmm_pt_format *f = vmm_pt_format_get(c->fmt);
		bool p = f->present(c->e, c->level), l = f->is_leaf(c->e, c->level);

		if (p != c->present || l != c->leaf || f->addr(c->e) != c->addr ||
		    (c->leaf && f->dirty(c->e) != c->dirty))
			fail_msg("%s case %zu (%#018llx at level %d): present %d/%d leaf %d/%d "
				 "addr %#llx/%#llx",
				 f->name, i, (unsigned long long)c->e, c->level, p, c->present, l,
				 c->leaf, (unsigned long long)f->addr(c->e),
				 (unsigned long long)c->addr);
	}
}

/* The masks the walker uses, and what the MMU sets. */
static void test_masks_and_hw_bits(void **state)
{
	const struct vmm_pt_format *ept = vmm_pt_format_get(VMM_PT_EPT);
	const struct vmm_pt_format *s2 = vmm_pt_format_get(VMM_PT_S2);

	(void)state;
	assert_int_equal(ept->accessed_mask, 0x100);
	assert_int_equal(ept->dirty_clear_mask, 0x200);
	assert_int_equal(s2->accessed_mask, 0x400);
	assert_int_equal(s2->dirty_clear_mask, 0x80);
	/* EPT: read -> A; write to a W leaf -> A|D; write to a read-only leaf -> A only */
	assert_int_equal(ept->hw_access_bits(0x0000000123456037ULL, false), 0x100);
	assert_int_equal(ept->hw_access_bits(0x0000000123456037ULL, true), 0x300);
	assert_int_equal(ept->hw_access_bits(0x0000000123456035ULL, true), 0x100);
	/* Stage-2: read -> AF; write to a DBM leaf -> AF|S2AP[1]; without DBM -> AF only */
	assert_int_equal(s2->hw_access_bits(0x000800012345637FULL, false), 0x400);
	assert_int_equal(s2->hw_access_bits(0x000800012345637FULL, true), 0x480);
	assert_int_equal(s2->hw_access_bits(0x000000012345637FULL, true), 0x400);
	/* After the MMU's bits, the decoders see a dirty leaf */
	assert_true(ept->dirty(0x0000000123456037ULL | 0x300));
	assert_true(s2->dirty(0x000800012345637FULL | 0x480));
}

/* Whatever an encoder makes, the decoder at the same level reads back. */
static void test_round_trip(void **state)
{
	static const enum vmm_pt_format_id ids[] = {VMM_PT_EPT, VMM_PT_S2};
	uint64_t x = 0x2545F4914F6CDD1DULL;

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		const struct vmm_pt_format *f = vmm_pt_format_get(ids[k]);

		assert_int_equal(f->id, ids[k]);
		for (int i = 0; i < 3000; i++) {
			int level = 1 + i % 3;
			uint64_t align = 1ULL << (39 - 9 * level);
			uint64_t pa, e;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			pa = x & 0x0000FFFFFFFFF000ULL & ~(align - 1);
			e = f->make_leaf(pa, level, i & 1);
			assert_true(f->present(e, level));
			assert_true(f->is_leaf(e, level));
			assert_false(f->dirty(e));
			assert_int_equal(f->addr(e), pa);
			assert_int_equal(e & f->accessed_mask, 0);
			e = f->make_table(pa & ~0xFFFULL);
			assert_true(f->present(e, level - 1));
			assert_false(f->is_leaf(e, level - 1));
			assert_int_equal(f->addr(e), pa & ~0xFFFULL);
		}
	}
}

static void test_lookup(void **state)
{
	(void)state;
	assert_string_equal(vmm_pt_format_get(VMM_PT_EPT)->name, "ept");
	assert_string_equal(vmm_pt_format_get(VMM_PT_S2)->name, "stage2");
	assert_null(vmm_pt_format_get((enum vmm_pt_format_id)0));
	assert_null(vmm_pt_format_get((enum vmm_pt_format_id)99));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_encoders),
	    cmocka_unit_test(test_decoders),
	    cmocka_unit_test(test_masks_and_hw_bits),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_lookup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
