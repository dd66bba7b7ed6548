// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_simhw.c - the simulated hardware (vmm/simhw.c): layout, huge-leaf shares, MMU
 * accesses, unmap with huge-leaf splitting, refaults (also from two threads at once).
 *
 * Entries are read back through the format's own decoders from the tables the walker
 * would read (vmm_simhw_pt), so what is checked is what vmm_walk will see.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "vmm.h"

static const enum vmm_pt_format_id fmt_ids[] = {VMM_PT_EPT, VMM_PT_S2};

/* The leaf mapping gpa (level in *level), or NULL when absent. */
static uint64_t *leaf_of(const struct vmm_pt *pt, uint64_t gpa, int *level)
{
	uint64_t pa = pt->root_pa;

	for (int l = 0; l <= 3; l++) {
		uint64_t *t = pt->table(pt->mem_ctx, pa);
		uint64_t *slot = &t[(gpa >> (39 - 9 * l)) & 511];

		if (!pt->fmt->present(*slot, l))
			return NULL;
		if (pt->fmt->is_leaf(*slot, l)) {
			*level = l;
			return slot;
		}
		pa = pt->fmt->addr(*slot);
	}
	return NULL;
}

static struct vmm_simhw *make(enum vmm_pt_format_id fmt, uint64_t bytes, unsigned holes, double s2m,
			      double s1g, uint64_t seed)
{
	struct vmm_simhw_config cfg = {.fmt = fmt,
				       .guest_bytes = bytes,
				       .nr_holes = holes,
				       .hole_bytes = 64ULL << 20,
				       .huge_2m_share = s2m,
				       .huge_1g_share = s1g,
				       .seed = seed};
	struct vmm_simhw *hw = NULL;

	assert_int_equal(vmm_simhw_new(&cfg, &hw), 0);
	return hw;
}

static void test_layout(void **state)
{
	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct vmm_simhw *hw = make(fmt_ids[k], 3ULL << 30, 5, 0, 0, 7), *hw2;
		const struct vmm_range *r, *r2;
		struct vmm_simhw_counts c;
		size_t n = vmm_simhw_ram(hw, &r);
		uint64_t total = 0;

		assert_int_equal(n, 6);
		assert_int_equal(r[0].start, 0);
		for (size_t i = 0; i < n; i++) {
			assert_true(r[i].end > r[i].start);
			assert_int_equal(r[i].start % VMM_SIZE_2M, 0);
			assert_int_equal(r[i].end % VMM_SIZE_2M, 0);
			if (i)
				assert_int_equal(r[i].start - r[i - 1].end, 64ULL << 20);
			total += r[i].end - r[i].start;
		}
		assert_int_equal(total, 3ULL << 30);
		vmm_simhw_get_counts(hw, &c);
		assert_int_equal(c.mapped_pages, total >> 12);
		assert_int_equal(c.leaves_4k, total >> 12);
		assert_true(vmm_simhw_table_bytes(hw) >= c.tables * 4096);

		/* every RAM page is mapped with a 4 KiB leaf to HPA base + gpa; holes are not */
		for (size_t i = 0; i < n; i++) {
			int level;

			assert_non_null(leaf_of(vmm_simhw_pt(hw), r[i].start, &level));
			assert_non_null(leaf_of(vmm_simhw_pt(hw), r[i].end - 4096, &level));
			assert_int_equal(level, 3);
			if (i + 1 < n) {
				assert_null(leaf_of(vmm_simhw_pt(hw), r[i].end, &level));
				assert_int_equal(vmm_simhw_access(hw, r[i].end, false), -ERANGE);
			}
		}
		assert_int_equal(vmm_simhw_access(hw, r[n - 1].end, false), -ERANGE);

		/* same seed, same layout; another seed moves the holes */
		hw2 = make(fmt_ids[k], 3ULL << 30, 5, 0, 0, 7);
		vmm_simhw_ram(hw2, &r2);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(r2[i].end, r[i].end);
		vmm_simhw_free(hw2);
		hw2 = make(fmt_ids[k], 3ULL << 30, 5, 0, 0, 8);
		vmm_simhw_ram(hw2, &r2);
		{
			bool differ = false;

			for (size_t i = 0; i < n; i++)
				differ |= r2[i].end != r[i].end;
			assert_true(differ);
		}
		vmm_simhw_free(hw2);
		vmm_simhw_free(hw);
	}
}

/* 2 MiB share 0.25 over 2048 regions: 512 expected, sd ~19.6; 1 GiB share 1.0: all. */
static void test_huge_shares(void **state)
{
	struct vmm_simhw *hw;
	struct vmm_simhw_counts c;

	(void)state;
	hw = make(VMM_PT_EPT, 4ULL << 30, 0, 0.25, 0, 3);
	vmm_simhw_get_counts(hw, &c);
	assert_true(c.leaves_2m >= 512 - 100 && c.leaves_2m <= 512 + 100);
	assert_int_equal(c.leaves_1g, 0);
	assert_int_equal(c.mapped_pages, c.leaves_4k + 512 * c.leaves_2m);
	assert_int_equal(c.mapped_pages, (4ULL << 30) >> 12);
	vmm_simhw_free(hw);

	hw = make(VMM_PT_S2, 4ULL << 30, 0, 0, 1.0, 3);
	vmm_simhw_get_counts(hw, &c);
	assert_int_equal(c.leaves_1g, 4);
	assert_int_equal(c.leaves_4k + c.leaves_2m, 0);
	assert_int_equal(c.tables, 2); /* level-0 root and one level-1 table */
	vmm_simhw_free(hw);
}

/* A read sets A; a write sets A and the dirty state; nothing else changes. */
static void test_access_bits(void **state)
{
	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct vmm_simhw *hw = make(fmt_ids[k], 64ULL << 20, 0, 0.5, 0, 11);
		const struct vmm_pt *pt = vmm_simhw_pt(hw);
		const struct vmm_pt_format *f = pt->fmt;

		for (uint64_t gpa = 0; gpa < (64ULL << 20); gpa += VMM_SIZE_2M) {
			int level = -1;
			uint64_t *slot = leaf_of(pt, gpa, &level), before;

			assert_non_null(slot);
			before = *slot;
			assert_int_equal(before & f->accessed_mask, 0);
			assert_false(f->dirty(before));
			assert_int_equal(vmm_simhw_access(hw, gpa, false), 0);
			assert_int_equal(*slot, before | f->accessed_mask);
			assert_int_equal(vmm_simhw_access(hw, gpa + 4096, true), 0);
			assert_true(f->dirty(*slot) || level == 3);
			assert_int_equal(f->addr(*slot), f->addr(before));
			if (level == 3) {
				uint64_t *next = leaf_of(pt, gpa + 4096, &level);

				assert_non_null(next);

				assert_true(f->dirty(*next));
				assert_false(f->dirty(*slot)); /* the read did not dirty */
			}
		}
		vmm_simhw_free(hw);
	}
}

/* Unmap inside a 1 GiB leaf: split to 2 MiB, then 4 KiB, state copied; refault maps again. */
static void test_unmap_split_refault(void **state)
{
	(void)state;
	for (size_t k = 0; k < 2; k++) {
		struct vmm_simhw *hw = make(fmt_ids[k], 2ULL << 30, 0, 0, 1.0, 5);
		const struct vmm_pt *pt = vmm_simhw_pt(hw);
		const struct vmm_pt_format *f = pt->fmt;
		struct vmm_simhw_counts c;
		uint64_t gpa = (1ULL << 30) + 3 * VMM_SIZE_2M + 10 * 4096;
		int level = -1;

		assert_int_equal(vmm_simhw_access(hw, gpa, true), 0); /* A+D on the 1G leaf */
		assert_int_equal(vmm_simhw_unmap(hw, gpa, 3), 0);
		vmm_simhw_get_counts(hw, &c);
		assert_int_equal(c.leaves_1g, 1);
		assert_int_equal(c.leaves_2m, 511);
		assert_int_equal(c.leaves_4k, 509);
		assert_int_equal(c.mapped_pages, ((2ULL << 30) >> 12) - 3);
		/* the children kept the parent's accessed and dirty state */
		{
			uint64_t *s = leaf_of(pt, (1ULL << 30), &level);

			assert_non_null(s);
			assert_int_equal(level, 2);
			assert_true(*s & f->accessed_mask);
			assert_true(f->dirty(*s));
			s = leaf_of(pt, gpa - 4096, &level);
			assert_non_null(s);
			assert_int_equal(level, 3);
			assert_true((*s & f->accessed_mask) && f->dirty(*s));
			assert_non_null(leaf_of(pt, 0, &level));
			assert_int_equal(f->addr(*s) - f->addr(*leaf_of(pt, 0, &level)),
					 gpa - 4096);
		}
		for (int i = 0; i < 3; i++)
			assert_null(leaf_of(pt, gpa + i * 4096ULL, &level));
		assert_non_null(leaf_of(pt, gpa + 3 * 4096, &level));
		/* refault: 1, mapped young; a second access is a plain hit */
		assert_int_equal(vmm_simhw_access(hw, gpa + 4096, false), 1);
		assert_int_equal(vmm_simhw_access(hw, gpa + 4096, true), 0);
		{
			uint64_t *s = leaf_of(pt, gpa + 4096, &level);

			assert_non_null(s);
			assert_true((*s & f->accessed_mask) && f->dirty(*s));
		}
		vmm_simhw_get_counts(hw, &c);
		assert_int_equal(c.mapped_pages, ((2ULL << 30) >> 12) - 2);
		/* unmapping what is already unmapped is fine; bad ranges are not */
		assert_int_equal(vmm_simhw_unmap(hw, gpa, 1), 0);
		assert_int_equal(vmm_simhw_unmap(hw, gpa + 1, 1), -EINVAL);
		assert_int_equal(vmm_simhw_unmap(hw, gpa, 0), -EINVAL);
		assert_int_equal(vmm_simhw_unmap(hw, (2ULL << 30) - 4096, 2), -ERANGE);
		vmm_simhw_free(hw);
	}
}

struct refault_arg {
	struct vmm_simhw *hw;
	uint64_t npages;
	uint64_t refaults; /* accesses that returned 1 */
	int errors;
};

static void *refault_thread(void *p)
{
	struct refault_arg *a = p;

	for (uint64_t i = 0; i < a->npages; i++) {
		int rc = vmm_simhw_access(a->hw, i << 12, i & 1);

		if (rc == 1)
			a->refaults++;
		else if (rc)
			a->errors++;
	}
	return NULL;
}

/* Two threads touch every unmapped page: each page refaults exactly once in total. */
static void test_concurrent_refaults(void **state)
{
	struct vmm_simhw *hw = make(VMM_PT_EPT, 256ULL << 20, 0, 0, 0, 9);
	uint64_t npages = (256ULL << 20) >> 12;
	struct refault_arg a = {.hw = hw, .npages = npages}, b = a;
	struct vmm_simhw_counts c;
	pthread_t ta, tb;

	(void)state;
	assert_int_equal(vmm_simhw_unmap(hw, 0, npages), 0);
	vmm_simhw_get_counts(hw, &c);
	assert_int_equal(c.mapped_pages, 0);
	assert_int_equal(pthread_create(&ta, NULL, refault_thread, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, refault_thread, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(a.errors + b.errors, 0);
	assert_int_equal(a.refaults + b.refaults, npages);
	vmm_simhw_get_counts(hw, &c);
	assert_int_equal(c.mapped_pages, npages);
	assert_int_equal(c.leaves_4k, npages);
	vmm_simhw_free(hw);
}

static void test_bad_config(void **state)
{
	struct vmm_simhw_config cfg = {.fmt = VMM_PT_EPT, .guest_bytes = 64ULL << 20};
	struct vmm_simhw *hw = NULL;

	(void)state;
	assert_int_equal(vmm_simhw_new(NULL, &hw), -EINVAL);
	cfg.guest_bytes = (64ULL << 20) + 4096; /* not 2 MiB multiple */
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.guest_bytes = 0;
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.guest_bytes = 64ULL << 20;
	cfg.fmt = (enum vmm_pt_format_id)7;
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.fmt = VMM_PT_S2;
	cfg.nr_holes = 2; /* holes of size 0 */
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.hole_bytes = 4096; /* not 2 MiB */
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.hole_bytes = VMM_SIZE_2M;
	cfg.nr_holes = 32; /* more holes than pieces of 2 MiB */
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.nr_holes = 2;
	cfg.huge_2m_share = 1.5;
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	cfg.huge_2m_share = 0.5;
	cfg.guest_bytes = 1ULL << 50;
	assert_int_equal(vmm_simhw_new(&cfg, &hw), -EINVAL);
	assert_null(hw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_huge_shares),
	    cmocka_unit_test(test_access_bits),
	    cmocka_unit_test(test_unmap_split_refault),
	    cmocka_unit_test(test_concurrent_refaults),
	    cmocka_unit_test(test_bad_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
