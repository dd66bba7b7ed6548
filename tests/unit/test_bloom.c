// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bloom.c - the bloom filter over leaf tables (vmm/bloom.c).
 *
 * False positives are measured against the textbook rate (1 - e^(-k n / m))^k for the
 * filter's own size; alternation by seq, the empty and every-K rules, and admission.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

/* A distinct 4 KiB-aligned "table address" for each i (distinct because odd multipliers
 * are bijective mod 2^64; shifted up past bit 12). */
static uint64_t table_pa(uint64_t i)
{
	return ((i * 0x9E3779B97F4A7C15ULL) >> 20) << 12;
}

static void test_defaults_and_config(void **state)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *b = NULL;

	(void)state;
	vmm_bloom_config_default(&cfg);
	assert_int_equal(cfg.bits_shift, 15);
	assert_int_equal(cfg.nr_hashes, 2);
	assert_int_equal(cfg.admit_young_x, 8);
	assert_true(cfg.full_walk_every >= 1);
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);
	vmm_bloom_free(b);

	assert_int_equal(vmm_bloom_new(NULL, &b), -EINVAL);
	cfg.bits_shift = 4;
	assert_int_equal(vmm_bloom_new(&cfg, &b), -EINVAL);
	cfg.bits_shift = 40;
	assert_int_equal(vmm_bloom_new(&cfg, &b), -EINVAL);
	vmm_bloom_config_default(&cfg);
	cfg.nr_hashes = 0;
	assert_int_equal(vmm_bloom_new(&cfg, &b), -EINVAL);
	vmm_bloom_config_default(&cfg);
	cfg.full_walk_every = 0;
	assert_int_equal(vmm_bloom_new(&cfg, &b), -EINVAL);
	vmm_bloom_config_default(&cfg);
	cfg.admit_young_x = 0;
	assert_int_equal(vmm_bloom_new(&cfg, &b), -EINVAL);
}

/*
 * Add n tables, then ask about 200000 never-added ones.  No false negatives ever; the
 * false-positive share within 5 binomial standard deviations plus 10% of the textbook
 * rate (double hashing is known to run a little above the ideal).
 */
static void check_fp(unsigned bits_shift, unsigned k, uint64_t n)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *b;
	const uint64_t probes = 200000;
	uint64_t fp = 0;
	double m = (double)(1ULL << bits_shift), p, sd, got;

	vmm_bloom_config_default(&cfg);
	cfg.bits_shift = bits_shift;
	cfg.nr_hashes = k;
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);
	for (uint64_t i = 0; i < n; i++)
		vmm_bloom_add(b, 5, table_pa(i));
	for (uint64_t i = 0; i < n; i++)
		assert_true(vmm_bloom_test(b, 5, table_pa(i)));
	for (uint64_t i = 0; i < probes; i++)
		fp += vmm_bloom_test(b, 5, table_pa(n + 1000 + i));
	p = pow(1.0 - exp(-(double)k * (double)n / m), (double)k);
	sd = sqrt(p * (1 - p) / (double)probes);
	got = (double)fp / (double)probes;
	print_message("# bloom m=2^%u k=%u n=%llu: fp %.5f, predicted %.5f\n", bits_shift, k,
		      (unsigned long long)n, got, p);
	assert_true(fabs(got - p) <= 5 * sd + 0.1 * p);
	vmm_bloom_free(b);
}

static void test_false_positive_rate(void **state)
{
	(void)state;
	check_fp(15, 2, 1638);  /* 5% of a 64 GiB guest's 32768 leaf tables: ~0.9% */
	check_fp(15, 2, 8192);  /* a quarter of them: ~15% */
	check_fp(15, 2, 32768); /* all of them: the filter saturates, ~75% */
	check_fp(12, 3, 400);
	check_fp(20, 4, 100000);
}

/*
 * Two filters alternate: the walk for seq reads seq's filter and fills seq + 1's.  A
 * filter holding an older seq is emptied by the first add for the new one.
 */
static void test_alternation(void **state)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *b;
	uint64_t a = table_pa(1), c = table_pa(2), d = table_pa(3);

	(void)state;
	vmm_bloom_config_default(&cfg);
	cfg.full_walk_every = 1000;
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);

	/* walk 1: nothing known yet: full walk; admits a for seq 2 */
	assert_false(vmm_bloom_filtering(b, 1));
	vmm_bloom_add(b, 2, a);
	assert_true(vmm_bloom_test(b, 2, a));
	assert_false(vmm_bloom_test(b, 1, a)); /* the other filter */
	assert_false(vmm_bloom_filtering(b, 1));
	assert_true(vmm_bloom_filtering(b, 2));

	/* walk 2: reads seq 2's filter, fills seq 3's (the other one, emptied first) */
	vmm_bloom_add(b, 3, c);
	assert_true(vmm_bloom_test(b, 2, a)); /* still readable during walk 2 */
	assert_true(vmm_bloom_test(b, 3, c));
	assert_false(vmm_bloom_test(b, 3, a));

	/* walk 3: fills seq 4's filter, which held seq 2: emptied by the first add */
	vmm_bloom_add(b, 4, d);
	assert_true(vmm_bloom_test(b, 4, d));
	assert_false(vmm_bloom_test(b, 4, a));
	assert_false(vmm_bloom_test(b, 2, a)); /* seq 2 is gone */
	assert_true(vmm_bloom_test(b, 3, c));

	/* a skipped seq: walk 6 finds seq 6's filter holding seq 4: full walk */
	assert_false(vmm_bloom_filtering(b, 6));
	assert_true(vmm_bloom_filtering(b, 4));

	/* explicit reset empties one filter only */
	vmm_bloom_reset(b, 4);
	assert_false(vmm_bloom_test(b, 4, d));
	assert_false(vmm_bloom_filtering(b, 4));
	assert_true(vmm_bloom_test(b, 3, c));
	vmm_bloom_free(b);
}

/* Every K-th seq is a full walk even with a filled filter. */
static void test_full_walk_every_k(void **state)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *b;

	(void)state;
	vmm_bloom_config_default(&cfg);
	cfg.full_walk_every = 4;
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);
	for (uint64_t seq = 1; seq <= 12; seq++) {
		vmm_bloom_add(b, seq, table_pa(seq)); /* a filled filter for every seq */
		assert_int_equal(vmm_bloom_filtering(b, seq), seq % 4 != 0);
		vmm_bloom_add(b, seq + 1, table_pa(seq + 1));
	}
	vmm_bloom_free(b);

	cfg.full_walk_every = 1; /* always full */
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);
	vmm_bloom_add(b, 3, table_pa(9));
	assert_false(vmm_bloom_filtering(b, 3));
	vmm_bloom_free(b);
}

/* Linux's suitable_to_scan: young * 8 >= total. */
static void test_admit(void **state)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *b;

	(void)state;
	vmm_bloom_config_default(&cfg);
	assert_int_equal(vmm_bloom_new(&cfg, &b), 0);
	assert_true(vmm_bloom_admit(b, 64, 512));
	assert_false(vmm_bloom_admit(b, 63, 512));
	assert_true(vmm_bloom_admit(b, 512, 512));
	assert_true(vmm_bloom_admit(b, 1, 8));
	assert_false(vmm_bloom_admit(b, 0, 0)); /* nothing young: never */
	assert_false(vmm_bloom_admit(b, 0, 512));
	vmm_bloom_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_and_config),
	    cmocka_unit_test(test_false_positive_rate),
	    cmocka_unit_test(test_alternation),
	    cmocka_unit_test(test_full_walk_every_k),
	    cmocka_unit_test(test_admit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
