// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_wss.c - the working-set estimate (vmm/wss.c, Part 7).
 *
 * A constructed history with known answers: rounds at 5 s, 10 s and 40 s mark disjoint
 * sets of 1000, 200 and 50 pages young (plus 10 pages of the 5 s set again at 40 s), so
 * at 41 s the bytes touched within each idle age are known exactly.  A guest first aged at
 * 10 days of host uptime is idle only for as long as it was watched.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE

static void test_constructed_history(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 8;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_int_equal(vmm_age_begin(g, 0), 0); /* watching starts: seq 0 born at 0 */
	assert_int_equal(vmm_age_begin(g, 5000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 1000, false), 0);
	assert_int_equal(vmm_age_begin(g, 10000), 0);
	assert_int_equal(vmm_mark_young(g, 1000 * PAGE, 200, false), 0);
	assert_int_equal(vmm_age_begin(g, 40000), 0);
	assert_int_equal(vmm_mark_young(g, 1200 * PAGE, 50, false), 0);
	assert_int_equal(vmm_mark_young(g, 0, 10, false), 0); /* used again: counted once */

	/* At 41 s: seq 4 is 1 s old (60 pages), seq 3 31 s (200), seq 2 36 s (990), seqs 0
	 * and 1 41 s (the other 2846). */
	const uint64_t ages_ms[] = {500, 1000, 30000, 31000, 36000, 40999, 41000, 3600000};
	const uint64_t pages[] = {0, 60, 60, 260, 1250, 1250, 4096, 4096};
	uint64_t bytes[8];
	assert_int_equal(vmm_wss(g, 41000, ages_ms, 8, bytes), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(bytes[i], pages[i] * PAGE);

	/* Evicted pages are not part of the working set, whatever the age. */
	struct vmm_run runs[8] = {{0}};
	struct vmm_evict_result res;
	struct vmm_evict_req req = {.max_pages = 96, .now_ms = 41000, .runs = runs, .max_runs = 8};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 96);
	assert_int_equal(vmm_wss(g, 41000, ages_ms, 8, bytes), 0);
	assert_int_equal(bytes[7], (4096 - 96) * PAGE);
	assert_int_equal(bytes[3], 260 * PAGE); /* the oldest went, the young stay */

	assert_int_equal(vmm_wss(NULL, 0, ages_ms, 1, bytes), -EINVAL);
	assert_int_equal(vmm_wss(g, 0, NULL, 1, bytes), -EINVAL);
	assert_int_equal(vmm_wss(g, 0, NULL, 0, NULL), 0);
	vmm_guest_free(g);
}

/* The clock bug: memtided's clock is CLOCK_MONOTONIC, the host's uptime.  A guest first
 * aged 10 days into it must not look 10 days idle: pages are idle for at most as long as
 * libvmm has watched them, so nothing is cold before a whole cold age of watching. */
static void test_late_start(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	const uint64_t t0 = 10ULL * 24 * 3600 * 1000;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 16;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	for (uint64_t t = t0; t <= t0 + 30000; t += 5000) {
		assert_int_equal(vmm_age_begin(g, t), 0);
		assert_int_equal(vmm_mark_young(g, 0, 100, false), 0);
	}
	uint64_t now = t0 + 31000, bytes[3];
	const uint64_t ages_ms[] = {2000, 20000, 60000};
	assert_int_equal(vmm_wss(g, now, ages_ms, 3, bytes), 0);
	assert_int_equal(bytes[0], 100 * PAGE);  /* touched in the last round */
	assert_int_equal(bytes[1], 100 * PAGE);  /* the rest idle 31 s since watching began */
	assert_int_equal(bytes[2], 4096 * PAGE); /* but not vouched idle for a minute */

	struct vmm_run runs[8] = {{0}};
	struct vmm_evict_result res;
	struct vmm_evict_req req = {
	    .max_pages = 4096, .min_age_ms = 60000, .now_ms = now, .runs = runs, .max_runs = 8};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 0);
	/* Once watched for a minute, the untouched pages are cold. */
	for (uint64_t t = t0 + 35000; t <= t0 + 65000; t += 5000) {
		assert_int_equal(vmm_age_begin(g, t), 0);
		assert_int_equal(vmm_mark_young(g, 0, 100, false), 0);
	}
	req.now_ms = t0 + 66000;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 4096 - 100);
	vmm_guest_free(g);

	/* A caller whose unseen pages are unused by its own word (memtided's agent source: the
	 * amounts its guest reports) keeps them as old as can be from the first round. */
	cfg.unseen_is_unused = true;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_int_equal(vmm_age_begin(g, t0), 0);
	assert_int_equal(vmm_mark_young(g, 0, 100, false), 0);
	assert_int_equal(vmm_age_begin(g, t0 + 5000), 0);
	assert_int_equal(vmm_wss(g, t0 + 6000, &ages_ms[2], 1, bytes), 0);
	assert_int_equal(bytes[0], 100 * PAGE);
	vmm_guest_free(g);
}

/* Memory handed back to the guest (a balloon's deflation, the target rising under
 * return=reclaim) is not memory it used.  memtided's agent source lays the guest's young
 * amount over low RAM and libvmm follows the target by evicting and giving back pages above
 * it; with the pages given back counted young (vmm_restore), the working set rose by what
 * was given back, the target by that again at the next interval, up to the ceiling
 * (scenario 2 by hand: 256 -> 1024 MiB in 108 MiB steps, the guest's use steady).  Here the
 * same loop, the target = working set + headroom, must settle. */
static void test_given_back_is_not_used(void **state)
{
	struct vmm_range ram = {0, 64 * MiB}; /* 16384 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	const uint64_t young = 4096, headroom = 1024, age_ms = 28000;
	struct vmm_run runs[64] = {{0}};
	struct vmm_evict_result res;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 16;
	cfg.unseen_is_unused = true; /* as memtided's agent source */
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	uint64_t now = 0;
	for (int i = 0; i < 20; i++, now += 2000) { /* the guest uses its 16 MiB steadily */
		assert_int_equal(vmm_age_begin(g, now), 0);
		assert_int_equal(vmm_mark_young(g, 0, young, false), 0);
	}
	/* The target came down to the young set + headroom: the rest is taken. */
	uint64_t target = young + headroom;
	struct vmm_evict_req req = {.max_pages = 16384 - target,
				    .min_age_ms = age_ms,
				    .now_ms = now,
				    .runs = runs,
				    .max_runs = 64};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 16384 - target);
	/* One step given back (the guest's refaults raised the target by 512 pages): the
	 * newest pages taken come back. */
	uint64_t back = 512, gpa = runs[res.nr_runs - 1].gpa +
				   ((runs[res.nr_runs - 1].npages - back) << VMM_PAGE_SHIFT);
	assert_true(runs[res.nr_runs - 1].npages >= back);
	assert_int_equal(vmm_give_back(g, gpa, back), 0);
	target += back;
	/* The guest goes on using its 16 MiB: the working set stays 16 MiB, so the target
	 * (working set + headroom) stays where the step left it. */
	for (int i = 0; i < 20; i++, now += 2000) {
		uint64_t wss;
		assert_int_equal(vmm_age_begin(g, now), 0);
		assert_int_equal(vmm_mark_young(g, 0, young, false), 0);
		assert_int_equal(vmm_wss(g, now, &age_ms, 1, &wss), 0);
		assert_int_equal(wss, young * PAGE);
		assert_true(wss / PAGE + headroom <= target);
	}
	struct vmm_guest_stats st;
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.resident_pages, target);
	assert_int_equal(st.free_pages, back); /* free in the guest until it uses them */
	/* The next step down takes the pages given back first: they are the oldest. */
	req.max_pages = back;
	req.now_ms = now;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, back);
	assert_int_equal(res.nr_runs, 1);
	assert_int_equal(runs[0].gpa, gpa);
	/* Given back again and then used: a fill, not a reuse of a page idle for minutes. */
	assert_int_equal(vmm_give_back(g, gpa, back), 0);
	vmm_guest_get_stats(g, &st);
	uint64_t reuses = 0;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
		reuses += st.reuse_hist[k];
	assert_int_equal(vmm_age_begin(g, now + 2000), 0);
	assert_int_equal(vmm_mark_young(g, gpa, back, false), 0);
	assert_int_equal(vmm_age_begin(g, now + 4000), 0);
	vmm_guest_get_stats(g, &st);
	uint64_t after = 0;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
		after += st.reuse_hist[k];
	assert_int_equal(after, reuses);
	assert_int_equal(st.free_pages, 0);
	assert_int_equal(vmm_give_back(NULL, 0, 1), -EINVAL);
	assert_int_equal(vmm_give_back(g, 64 * MiB, 1), -ERANGE);
	vmm_guest_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_constructed_history),
	    cmocka_unit_test(test_given_back_is_not_used),
	    cmocka_unit_test(test_late_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
