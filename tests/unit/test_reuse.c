// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_reuse.c - the reuse histogram (vmm/reuse.c) and the reuse floor it gives the reclaim
 * controller (vmm/reclaim_ctl.c).
 *
 * Checked: the half-octave bucket scale is consistent both ways; the aging hand counts a
 * page used again under the idle age it had (to the generation's resolution), and counts
 * nothing for a page used twice within one round; the controller keeps its threshold above
 * the ages a guest keeps reusing, which without the floor it walks straight through, lets
 * it go once the reuses stop, and raises it at once past a threshold that let pages go
 * which then refaulted; memory the guest freed and the host took is no reuse when the guest
 * fills it again.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE

static void test_bucket_scale(void **state)
{
	(void)state;
	assert_int_equal(vmm_reuse_bucket_of(0), 0);
	assert_int_equal(vmm_reuse_bucket_of(1413), 0);
	assert_int_equal(vmm_reuse_bucket_ms(0), 0);
	for (unsigned k = 1; k < VMM_REUSE_BUCKETS; k++) {
		uint64_t lo = vmm_reuse_bucket_ms(k);
		assert_true(lo > vmm_reuse_bucket_ms(k - 1));
		assert_int_equal(vmm_reuse_bucket_of(lo), k);
		assert_int_equal(vmm_reuse_bucket_of(lo - 1), k - 1);
	}
	/* Half-octaves from 1 s: 32 s starts bucket 10, 45.25 s bucket 11. */
	assert_int_equal(vmm_reuse_bucket_ms(10), 32000);
	assert_int_equal(vmm_reuse_bucket_ms(11), 45255);
	assert_int_equal(vmm_reuse_bucket_of(UINT64_MAX), VMM_REUSE_BUCKETS - 1);
	assert_int_equal(vmm_reuse_bucket_ms(1000), vmm_reuse_bucket_ms(VMM_REUSE_BUCKETS - 1));
}

/* A page the guest freed (vmm_hint_free) and later fills again is no reuse; the same page
 * only hinted cold reads as a reuse at its idle age, which made memtide-sim's reuse floor
 * climb with every page sqlite3 allocated.  The mark is bookkeeping only: the page stays
 * resident, in the oldest generation, and goes when the page is used or evicted. */
static void test_freed_pages_are_not_reused(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_guest_stats st;
	unsigned at = vmm_reuse_bucket_of(90000);

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 16;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_int_equal(vmm_age_begin(g, 10000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 300, true), 0); /* 0..299 in use */
	assert_int_equal(vmm_age_begin(g, 20000), 0);
	/* The guest frees 0..99 and 200..299; 100..199 only go cold. */
	assert_int_equal(vmm_hint_free(g, 0, 100), 0);
	assert_int_equal(vmm_hint_cold(g, 100 * PAGE, 100), 0);
	assert_int_equal(vmm_hint_free(g, 200 * PAGE, 100), 0);
	assert_int_equal(vmm_hint_free(g, 0, 100), 0); /* again: no change */
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.free_pages, 200);
	assert_int_equal(st.resident_pages, 4096);
	assert_int_equal(st.gen[0].pages, 4096); /* all in the oldest generation */
	assert_int_equal(vmm_check_invariants(g), 0);
	/* 90 s later the guest allocates 0..199 again: only the cold ones are reuses. */
	assert_int_equal(vmm_age_begin(g, 100000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 200, true), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.reuse_hist[at], 100);
	assert_int_equal(st.free_pages, 100);
	/* A hint of use clears the mark too, with no reuse counted. */
	assert_int_equal(vmm_hint_access(g, 200 * PAGE, 50), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.free_pages, 50);
	assert_int_equal(st.reuse_hist[at], 100);
	assert_int_equal(st.refaults_total, 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	/* The eviction hand takes the oldest generation, 250..299 with it: the mark goes. */
	struct vmm_run runs[64];
	struct vmm_evict_req req = {
	    .max_pages = 4096, .min_age_ms = 50000, .now_ms = 100000, .runs = runs, .max_runs = 64};
	struct vmm_evict_result res;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	vmm_guest_get_stats(g, &st);
	assert_true(res.evicted_pages >= 50);
	assert_int_equal(st.free_pages, 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	assert_int_equal(vmm_hint_free(NULL, 0, 1), -EINVAL);
	assert_int_equal(vmm_hint_free(g, 16 * MiB, 1), -ERANGE);
	vmm_guest_free(g);
}

static void test_aging_counts_reuses(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_guest_stats st;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 16;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	/* Rounds every 10 s.  Pages 0..99 are used in every round; page 500 once at 10 s and
	 * again at 100 s; page 600 twice within the round at 20 s. */
	for (uint64_t t = 10000; t <= 100000; t += 10000) {
		assert_int_equal(vmm_age_begin(g, t), 0);
		assert_int_equal(vmm_mark_young(g, 0, 100, false), 0);
		if (t == 10000 || t == 100000)
			assert_int_equal(vmm_mark_young(g, 500 * PAGE, 1, false), 0);
		if (t == 20000) {
			assert_int_equal(vmm_mark_young(g, 600 * PAGE, 1, true), 0);
			assert_int_equal(vmm_mark_young(g, 600 * PAGE, 1, false), 0);
		}
	}
	vmm_guest_get_stats(g, &st);
	uint64_t total = 0;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
		total += st.reuse_hist[k];
	/* Every page is born in the initial generation at the first round (10 s): libvmm
	 * vouches for no idleness before it watched.  Pages 0..99: first seen in that round,
	 * idle 0 s, then every 10 s: nine reuses at 10 s each.  Page 500: at 10 s (idle 0 s),
	 * then 90 s.  Page 600: 20 s, idle 10 s since the first round (its second touch in the
	 * round is no reuse).  Before the first round was a birth, these 101 first touches read
	 * as reuses at 10 s, and on a host up for days as reuses of days. */
	assert_int_equal(st.reuse_hist[vmm_reuse_bucket_of(0)], 100 + 1);
	assert_int_equal(st.reuse_hist[vmm_reuse_bucket_of(10000)], 100 * 9 + 1);
	assert_int_equal(st.reuse_hist[vmm_reuse_bucket_of(90000)], 1);
	assert_int_equal(total, 100 * 10 + 3);
	vmm_guest_free(g);
}

/* A guest of 10000 resident pages of which `cohort` are reused every period_ms, fed to the
 * controller for `seconds` in 5 s intervals with no refaults; returns the last threshold. */
static uint64_t drive(struct vmm_reclaim_ctl *ctl, uint64_t *hist, uint64_t cohort,
		      uint64_t period_ms, unsigned seconds)
{
	uint64_t age = ctl->age_ms;

	for (unsigned t = 5; t <= seconds; t += 5) {
		/* The cohort's reuses this interval, at its idle age. */
		hist[vmm_reuse_bucket_of(period_ms)] += cohort * 5000 / period_ms;
		vmm_reclaim_observe_reuse(ctl, hist);
		age = vmm_reclaim_update(ctl, 0, 10000, 5000);
	}
	return age;
}

static void test_floor_holds_reused_ages(void **state)
{
	struct vmm_reclaim_config cfg;
	struct vmm_reclaim_ctl with, without;
	uint64_t hist_a[VMM_REUSE_BUCKETS] = {0}, hist_b[VMM_REUSE_BUCKETS] = {0};

	(void)state;
	vmm_reclaim_config_default(&cfg);
	cfg.min_age_ms = 5000;
	cfg.initial_age_ms = 120000;
	assert_int_equal(vmm_reclaim_init(&with, &cfg), 0);
	cfg.reuse_tau_ms = 0;
	assert_int_equal(vmm_reclaim_init(&without, &cfg), 0);

	/* 1000 pages reused every 40 s: 1500 reuses a minute against an allowance of 20
	 * (0.2% of 10000): any threshold at or under 40 s would refault them all. */
	uint64_t a = drive(&with, hist_a, 1000, 40000, 600);
	uint64_t b = drive(&without, hist_b, 1000, 40000, 600);
	assert_true(a >= vmm_reuse_bucket_ms(vmm_reuse_bucket_of(40000) + 1));
	assert_int_equal(with.floor_ms, vmm_reuse_bucket_ms(vmm_reuse_bucket_of(40000) + 1));
	assert_true(b < 2 * cfg.min_age_ms); /* no refaults yet: the PID alone walks on down */
	/* Tracking anti-windup: the PID sits at the floor, not beyond it. */
	assert_true(with.pid.integral <=
		    log2((double)cfg.max_age_ms / (double)with.floor_ms) + 1e-9);

	/* The cohort goes idle: its reuses leave the window (about 22 min for 7500 reuses
	 * to decay under the allowance) and the threshold comes down to the PID's own
	 * (5.1 s: its conditional integration stops a hair short of the limit). */
	uint64_t later = drive(&with, hist_a, 0, 40000, 3600);
	assert_int_equal(with.floor_ms, 0);
	assert_true(later < 2 * cfg.min_age_ms);
}

static void test_refaults_lift_the_floor(void **state)
{
	struct vmm_reclaim_config cfg;
	struct vmm_reclaim_ctl ctl;
	uint64_t hist[VMM_REUSE_BUCKETS] = {0};

	(void)state;
	vmm_reclaim_config_default(&cfg);
	cfg.min_age_ms = 5000;
	cfg.initial_age_ms = 20000;
	assert_int_equal(vmm_reclaim_init(&ctl, &cfg), 0);
	vmm_reclaim_observe_reuse(&ctl, hist);
	/* 500 refaults in one interval at a 20 s threshold: the floor goes above 20 s's
	 * bucket in that same update, and the threshold with it. */
	uint64_t age = vmm_reclaim_update(&ctl, 500, 10000, 5000);
	assert_true(ctl.floor_ms > 20000);
	assert_true(age >= ctl.floor_ms);
	/* A histogram that went backwards (a new guest state) restarts the count rather
	 * than reading as a huge reuse. */
	hist[3] = 100;
	vmm_reclaim_observe_reuse(&ctl, hist);
	hist[3] = 5;
	vmm_reclaim_observe_reuse(&ctl, hist);
	double before = ctl.reuse_win[3];
	(void)vmm_reclaim_update(&ctl, 0, 10000, 5000);
	assert_true(ctl.reuse_win[3] <= before + 5.0 + 1e-9);
	vmm_reclaim_observe_reuse(NULL, hist); /* no crash on NULL */
	vmm_reclaim_observe_reuse(&ctl, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bucket_scale),
	    cmocka_unit_test(test_aging_counts_reuses),
	    cmocka_unit_test(test_freed_pages_are_not_reused),
	    cmocka_unit_test(test_floor_holds_reused_ages),
	    cmocka_unit_test(test_refaults_lift_the_floor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
