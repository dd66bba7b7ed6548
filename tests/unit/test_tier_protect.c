// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_tier_protect.c - MGLRU's tier protection (vmm/tier_protect.c), through the eviction
 * hand (vmm/evict.c) and refaults (vmm/refault.c).
 *
 * A guest whose hinted pages (tier 1) come back after eviction far more often than its
 * plain pages (tier 0) must get tier 1 protected: the eviction hand then keeps tier-1
 * pages back (protected_pages) instead of evicting them.  When tier 1 refaults no more
 * than tier 0, nothing is protected.  When tier 1 stops refaulting, the averages decay
 * (1/2 per generation) and the protection lifts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE

/* Every 4th page is hinted (tier 1): mixed with plain pages in every piece the eviction
 * hand takes, so both tiers are evicted from the start (tier 0 is the setpoint: with no
 * tier-0 evictions yet, any tier with 64 refaults would look worse than it). */
static bool is_hot(uint64_t gpa)
{
	return (gpa / PAGE) % 4 == 0;
}

struct outcome {
	int first_protected_round; /* -1: never */
	uint64_t protected_pages;  /* summed over the rounds */
};

/* rounds of: age, evict 256, refault every evicted tier-1 page with 1 in hot_every and
 * every tier-0 page with 1 in cold_every. */
static void play(struct vmm_guest *g, uint64_t *now_ms, int rounds, unsigned hot_every,
		 unsigned cold_every, struct outcome *o)
{
	struct vmm_run runs[256] = {{0}};
	unsigned n = 0;

	*o = (struct outcome){.first_protected_round = -1};
	for (int r = 0; r < rounds; r++) {
		struct vmm_evict_result res;
		struct vmm_guest_stats st;
		*now_ms += 1000;
		assert_int_equal(vmm_age_begin(g, *now_ms), 0);
		struct vmm_evict_req req = {
		    .max_pages = 256, .now_ms = *now_ms, .runs = runs, .max_runs = 256};
		assert_int_equal(vmm_evict(g, &req, &res), 0);
		o->protected_pages += res.protected_pages;
		vmm_guest_get_stats(g, &st);
		bool on = st.tier_protected[1];
		if (on && o->first_protected_round < 0)
			o->first_protected_round = r;
		for (size_t i = 0; i < res.nr_runs; i++) {
			for (uint64_t k = 0; k < runs[i].npages; k++) {
				uint64_t gpa = runs[i].gpa + k * PAGE;
				bool hot = is_hot(gpa);
				struct vmm_refault rf;
				if (++n % (hot ? hot_every : cold_every))
					continue;
				assert_int_equal(vmm_refault(g, gpa, &rf), 0);
				assert_true(rf.was_evicted);
			}
		}
		assert_int_equal(vmm_check_invariants(g), 0);
	}
}

static struct vmm_guest *setup(void)
{
	struct vmm_range ram = {0, 16 * MiB};
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_tiers = 2;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	for (uint64_t gpa = 0; gpa < 16 * MiB; gpa += PAGE)
		if (is_hot(gpa))
			assert_int_equal(vmm_hint_access(g, gpa, 1), 0); /* tier 1 */
	return g;
}

static void test_protects_tier_that_refaults_more(void **state)
{
	struct vmm_guest *g = setup();
	struct vmm_guest_stats st;
	struct outcome o;
	uint64_t now_ms = 0;

	(void)state;
	/* Tier 1: every evicted page comes back; tier 0: one in 10. */
	play(g, &now_ms, 60, 1, 10, &o);
	assert_true(o.first_protected_round >= 0);
	assert_true(o.protected_pages > 0);
	vmm_guest_get_stats(g, &st);
	assert_false(st.tier_protected[0]); /* the base tier is the setpoint, never protected */
	assert_true(st.refaults_by_tier[1] >= 64);
	print_message("tier protection: on at round %d, %llu pages kept back\n",
		      o.first_protected_round, (unsigned long long)o.protected_pages);

	/* Tier 1 stops refaulting: the averages decay and the protection lifts. */
	play(g, &now_ms, 60, 1000000, 10, &o);
	vmm_guest_get_stats(g, &st);
	assert_false(st.tier_protected[1]);
	vmm_guest_free(g);
}

static void test_no_protection_when_equal(void **state)
{
	struct vmm_guest *g = setup();
	struct outcome o;
	uint64_t now_ms = 0;

	(void)state;
	/* Both tiers: one in 3 comes back. */
	play(g, &now_ms, 60, 3, 3, &o);
	assert_int_equal(o.first_protected_round, -1);
	assert_int_equal(o.protected_pages, 0);
	vmm_guest_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_protects_tier_that_refaults_more),
	    cmocka_unit_test(test_no_protection_when_equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
