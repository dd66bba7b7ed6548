// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_sample.c - Part 0 of libvmm: a sampled source's window (vmm/sample.c) and the catch
 * the generations count for it (vmm_guest_stats.young_prev, young_again).
 *
 * Checked: the aging hand counts the pages the last round saw that this one saw again; the
 * window starts at its longest (a fifth of the interval); a set used in every window brings
 * it down to the base; a hot set touched once a second, which a 200 ms window of every 5 s
 * catches one round in five, widens it again (doubling) until more than half are caught; an
 * idle guest changes nothing; bad settings are refused.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB (1ULL << 20)

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static void test_catch_counted(void **state)
{
	struct vmm_range ram = {0, 16 * MiB};
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_guest_stats st;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = VMM_MAX_NR_GENS;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_int_equal(vmm_age_begin(g, 5000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 1000, false), 0);
	assert_int_equal(vmm_age_begin(g, 10000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 500, false), 0);              /* half again */
	assert_int_equal(vmm_mark_young(g, 2000 * 4096ULL, 300, false), 0); /* and new ones */
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.young_prev, 1000);
	assert_int_equal(st.young_again, 500);
	assert_int_equal(vmm_age_begin(g, 15000), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.young_prev, 800);
	assert_int_equal(st.young_again, 0);
	vmm_guest_free(g);
}

/* One round of a hot set of n pages touched `rate` times a second at random moments, seen
 * by a window of window_ms: each page is caught with probability 1 - exp(-rate x window). */
static uint64_t round_seen(uint64_t *rng, uint64_t n, double rate, uint64_t window_ms,
			   uint8_t *seen)
{
	double p = 1.0 - exp(-rate * (double)window_ms / 1000.0);
	uint64_t again = 0;

	for (uint64_t i = 0; i < n; i++) {
		bool now = (double)(rnd(rng) >> 11) / 9007199254740992.0 < p;
		again += now && seen[i];
		seen[i] = now;
	}
	return again;
}

static void test_window_follows_the_catch(void **state)
{
	struct vmm_sample_config cfg;
	struct vmm_sample s;
	uint8_t seen[2000] = {0};
	uint64_t rng = 7, before = 0;

	(void)state;
	vmm_sample_config_default(&cfg, 200, 5000);
	assert_int_equal(cfg.max_ms, 1000);
	assert_int_equal(vmm_sample_init(&s, &cfg), 0);
	assert_int_equal(s.window_ms, 1000); /* the first rounds are the ones learned from */
	/* Touched 20 times a second: every window catches it; down to the base. */
	for (int r = 0; r < 6; r++) {
		uint64_t again = round_seen(&rng, 2000, 20.0, s.window_ms, seen);
		vmm_sample_update(&s, before, again);
		before = 0;
		for (int i = 0; i < 2000; i++)
			before += seen[i];
	}
	assert_int_equal(s.window_ms, 200);
	/* Touched once a second: 18% caught at 200 ms, 33% at 400; at 800 ms, 55%: enough. */
	for (int r = 0; r < 12; r++) {
		uint64_t again = round_seen(&rng, 2000, 1.0, s.window_ms, seen);
		vmm_sample_update(&s, before, again);
		before = 0;
		for (int i = 0; i < 2000; i++)
			before += seen[i];
	}
	assert_int_equal(s.window_ms, 800);
	assert_true(s.caught > 0.5 && s.caught < 0.85); /* 1 - e^-0.8 = 0.55: stays */
	/* An idle guest (few pages seen) says nothing. */
	s.window_ms = 400;
	assert_int_equal(vmm_sample_update(&s, 100, 0), 400);
	assert_int_equal(vmm_sample_update(&s, 1000, 1001), 400); /* impossible: ignored */
}

static void test_bad_config(void **state)
{
	struct vmm_sample_config cfg;
	struct vmm_sample s;

	(void)state;
	vmm_sample_config_default(&cfg, 2000, 5000); /* a base past a fifth: the cap is it */
	assert_int_equal(cfg.max_ms, 2000);
	assert_int_equal(vmm_sample_init(&s, &cfg), 0);
	cfg.base_ms = 0;
	assert_int_equal(vmm_sample_init(&s, &cfg), -EINVAL);
	vmm_sample_config_default(&cfg, 200, 5000);
	cfg.low = 0.9;
	assert_int_equal(vmm_sample_init(&s, &cfg), -EINVAL);
	assert_int_equal(vmm_sample_init(NULL, &cfg), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_catch_counted),
	    cmocka_unit_test(test_window_follows_the_catch),
	    cmocka_unit_test(test_bad_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
