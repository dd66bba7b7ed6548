// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_sim_policy.c - the replay model and every policy against small traces built here,
 * whose right answers can be worked out by hand:
 *   - the core: what counts as a refault, a fill, residency;
 *   - none keeps everything; fpr-only returns only wholly free 2 MiB blocks, after the delay;
 *   - mom never moves the balloon by more than 5% of RAM a round, only every 10 s, and keeps
 *     the guest >= 20% free (so it never forces live pages out);
 *   - lru2 holds its limit and keeps a hot set through a cold flood;
 *   - damon reclaims an idle region only once it has been idle for min_age;
 *   - idle's per-page rules keep or drop a reused page by its own history, and a page
 *     freed and allocated again has none;
 *   - memtide reclaims cold pages and, with a floor longer than the trace, nothing live; it
 *     evicts by vmm_decide's answer, as memtided's host pageout does (watching for the cold
 *     age first, then at most a step a round);
 *   - a page the guest's own reclaim swapped out refaults when touched, its frame on the
 *     host or not; memtided's other actuators (sim/actuators.c): the agent's reclaim takes
 *     cold pages down to the hot set plus headroom and free page reporting returns their
 *     blocks; the balloon takes free memory that reporting cannot reach;
 *   - the oracle is a lower bound: no policy, at any setting, has less mean resident memory
 *     for the refaults it took, and the oracle replays to exactly its bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim.h"

/* Build a trace of `epochs` 1 s epochs over ram_pages from a callback. */
typedef void (*fill_fn)(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf);

static void build(struct sim_trace *t, uint64_t ram_pages, uint64_t epochs, fill_fn fn)
{
	struct vmm_range ram = {0, ram_pages * SIM_PAGE_SIZE};
	uint32_t *acc = malloc(ram_pages * sizeof(*acc)), *fr = malloc(ram_pages * sizeof(*fr));

	assert_non_null(acc);
	assert_non_null(fr);
	assert_int_equal(sim_trace_init(t, &ram, 1), 0);
	for (uint64_t e = 0; e < epochs; e++) {
		size_t n = 0, nf = 0;
		fn(e, acc, &n, fr, &nf);
		assert_int_equal(sim_trace_add_epoch(t, e * 1000, acc, n, fr, nf), 0);
	}
	assert_int_equal(sim_trace_finish(t, epochs * 1000), 0);
	free(acc);
	free(fr);
}

static void run(const struct sim_trace *t, const char *pol, const struct sim_params *p,
		struct sim_result *r)
{
	const struct sim_policy *pp = sim_policy_get(pol);
	assert_non_null(pp);
	assert_int_equal(sim_replay(t, pp, p, true, r), 0);
}

/* ---- the core --------------------------------------------------------------------------- */

static int evict_all_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	(void)state;
	(void)e;
	for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
		sim_evict(ctx, (uint32_t)p);
	return 0;
}

static const struct sim_policy evict_all = {
    .name = "evict-all", .fpr = SIM_FPR_OFF, .knob = "", .epoch = evict_all_epoch};

/* Pages 0-9 written in epoch 0; 0-4 read again in epoch 2; 5-9 freed in epoch 2 and
 * touched again in epoch 4; 600 first touched in epoch 4. */
static void core_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	if (e == 0)
		for (uint32_t p = 0; p < 10; p++)
			acc[(*n)++] = p | SIM_ACC_WRITE;
	if (e == 2) {
		for (uint32_t p = 0; p < 5; p++)
			acc[(*n)++] = p;
		for (uint32_t p = 5; p < 10; p++)
			fr[(*nf)++] = p;
	}
	if (e == 4) {
		for (uint32_t p = 5; p < 10; p++)
			acc[(*n)++] = p;
		acc[(*n)++] = 600;
	}
}

static void test_core_model(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;

	(void)state;
	sim_params_default(&p);
	build(&t, 1024, 6, core_fill);
	assert_int_equal(sim_replay(&t, &evict_all, &p, true, &r), 0);
	/* Epoch 0: all of RAM resident (nothing evicted yet); then only what is touched. */
	assert_int_equal(r.resident_per_epoch[0], 1024);
	assert_int_equal(r.resident_per_epoch[1], 0);
	assert_int_equal(r.resident_per_epoch[2], 5);
	assert_int_equal(r.resident_per_epoch[4], 6);
	/* 0-4 held data when evicted: refaults.  5-9 were freed while out: fills, as is 600
	 * (never touched). */
	assert_int_equal(r.refaults, 5);
	assert_int_equal(r.refaults_per_epoch[2], 5);
	assert_int_equal(r.fills, 6);
	assert_int_equal(r.peak_resident_pages, 1024);
	assert_true(r.mean_resident_pages > 1024.0 / 6 && r.mean_resident_pages < 1040.0 / 6);
	/* Rate: 5 refaults in 0.1 min over the mean resident pages. */
	assert_true(r.refault_rate > 5 / 0.1 / r.mean_resident_pages * 0.999);
	assert_true(r.refault_rate < 5 / 0.1 / r.mean_resident_pages * 1.001);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* ---- none and fpr-only ------------------------------------------------------------------ */

/* 4 blocks: block 0 written whole in epoch 0 and freed whole at epoch 3; block 1 holds one
 * live page; blocks 2 and 3 are never touched. */
static void fpr_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	if (e == 0) {
		for (uint32_t p = 0; p < 512; p++)
			acc[(*n)++] = p | SIM_ACC_WRITE;
		acc[(*n)++] = 700 | SIM_ACC_WRITE;
	}
	if (e == 3)
		for (uint32_t p = 0; p < 512; p++)
			fr[(*nf)++] = p;
}

static void test_none_and_fpr(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;

	(void)state;
	sim_params_default(&p);
	build(&t, 2048, 12, fpr_fill);
	run(&t, "none", &p, &r);
	for (size_t e = 0; e < t.nr_epochs; e++)
		assert_int_equal(r.resident_per_epoch[e], 2048);
	assert_int_equal(r.saved, 0);
	sim_result_free(&r);

	run(&t, "fpr-only", &p, &r);
	/* Blocks 2 and 3 have been free since t = 0: reported at the end of the epoch that
	 * ends at >= 2 s (epoch 1). */
	assert_int_equal(r.resident_per_epoch[0], 2048);
	assert_int_equal(r.resident_per_epoch[1], 2048);
	assert_int_equal(r.resident_per_epoch[2], 1024);
	/* Block 0 freed at the end of epoch 3 (t = 4 s): reported at t >= 6 s. */
	assert_int_equal(r.resident_per_epoch[5], 1024);
	assert_int_equal(r.resident_per_epoch[6], 512);
	/* Block 1 is never reported: one live page pins it. */
	assert_int_equal(r.resident_per_epoch[11], 512);
	assert_int_equal(r.refaults, 0);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* ---- mom ---------------------------------------------------------------------------------- */

/* 30% of RAM written in epoch 0, 5% of RAM hot every epoch. */
static void mom_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	for (uint32_t p = 0; p < (e == 0 ? 4915u : 819u); p++)
		acc[(*n)++] = p | (e == 0 ? SIM_ACC_WRITE : 0);
}

static void test_mom(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;
	const double ram = 16384;

	(void)state;
	sim_params_default(&p);
	p.fpr = false; /* the balloon alone */
	build(&t, 16384, 400, mom_fill);
	run(&t, "mom", &p, &r);
	for (size_t e = 1; e < t.nr_epochs; e++) {
		double drop = (double)r.resident_per_epoch[e - 1] - (double)r.resident_per_epoch[e];
		if (drop == 0)
			continue;
		/* Only shrinks (nothing faults), at most 5% of RAM, right after a 10 s tick. */
		assert_true(drop > 0);
		assert_true(drop <= 0.05 * ram + 1);
		assert_int_equal(e % 10, 0);
	}
	/* It shrank all the way to used / (1 - 0.2) (live 4915 pages) and never below. */
	uint32_t last = r.resident_per_epoch[t.nr_epochs - 1];
	assert_in_range(last, 4915 / 0.8 - 1, 4915 / 0.8 + 0.05 * ram);
	/* 20% free is kept: the guest never had to push live pages out. */
	assert_int_equal(r.refaults, 0);
	assert_int_equal(r.evicted_live, 0);
	sim_result_free(&r);

	/* A smaller step limit is obeyed too. */
	p.mom_max_step = 0.01;
	run(&t, "mom", &p, &r);
	for (size_t e = 1; e < t.nr_epochs; e++)
		assert_true((double)r.resident_per_epoch[e - 1] - (double)r.resident_per_epoch[e] <=
			    0.01 * ram + 1);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* ---- lru2 --------------------------------------------------------------------------------- */

/* Hot: pages 0..999 every epoch.  Cold flood: 1000 new pages every epoch, never reused. */
static void lru_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	for (uint32_t p = 0; p < 1000; p++)
		acc[(*n)++] = p;
	for (uint32_t p = 0; p < 1000; p++)
		acc[(*n)++] = (uint32_t)(1000 + e * 1000 + p);
}

static void test_lru2(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;
	uint64_t late = 0;

	(void)state;
	sim_params_default(&p);
	p.lru2_limit = 0.0625; /* 4096 pages */
	build(&t, 65536, 40, lru_fill);
	run(&t, "lru2", &p, &r);
	/* Resident after faults = at most the limit after the last reclaim + this epoch's
	 * faults (the 1000 new pages, and whatever hot pages it lost). */
	for (size_t e = 1; e < t.nr_epochs; e++)
		assert_true(r.resident_per_epoch[e] <= 4096 + 1000 + r.refaults_per_epoch[e]);
	/* Flood pages are never reused, so every refault is a hot page.  Linux's two lists
	 * activate a once-touched anon page (its PTE was young), so a flood pushes some hot
	 * pages out - the weakness MGLRU fixed - but the active list keeps the hot set
	 * mostly: after warm-up, fewer than 3% of hot accesses refault. */
	for (size_t e = 5; e < t.nr_epochs; e++)
		late += r.refaults_per_epoch[e];
	assert_true(late < 35 * 1000 * 3 / 100);
	assert_true(r.saved > 0.85);
	sim_result_free(&r);
	sim_trace_free(&t);
}

static void lru_fill_none(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)e, (void)acc, (void)n, (void)fr, (void)nf;
}

/* ---- damon -------------------------------------------------------------------------------- */

/* Pages 0..4095 written in epoch 0 then idle; 4096..8191 read every epoch. */
static void damon_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	for (uint32_t p = (e == 0 ? 0 : 4096); p < 8192; p++)
		acc[(*n)++] = p | (e == 0 ? SIM_ACC_WRITE : 0);
}

static void test_damon(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;

	(void)state;
	sim_params_default(&p);
	p.fpr = false;
	p.damon_min_age_ms = 20000;
	build(&t, 8192, 80, damon_fill);
	run(&t, "damon", &p, &r);
	/* Nothing is reclaimed before the idle half has been idle for 20 s. */
	for (size_t e = 0; e < 20; e++)
		assert_int_equal(r.resident_per_epoch[e], 8192);
	/* By 60 s at least 90% of the idle half is gone... */
	assert_true(r.resident_per_epoch[60] < 8192 - 4096 * 9 / 10);
	/* ...and never a hot page: no refaults at all. */
	assert_int_equal(r.refaults, 0);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* ---- idle and its per-page rules -------------------------------------------------------- */

/* All 400 pages written in epoch 0.  0-99 come back at 30 s and again at 90 s; 100-199 come
 * back at 30 s only; 200-299 never; 300-399 are freed at 5 s and written again at 30 s (an
 * allocation, not a reuse). */
static void rules_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	if (e == 0)
		for (uint32_t p = 0; p < 400; p++)
			acc[(*n)++] = p | SIM_ACC_WRITE;
	if (e == 5)
		for (uint32_t p = 300; p < 400; p++)
			fr[(*nf)++] = p;
	if (e == 30) {
		for (uint32_t p = 0; p < 200; p++)
			acc[(*n)++] = p;
		for (uint32_t p = 300; p < 400; p++)
			acc[(*n)++] = p | SIM_ACC_WRITE;
	}
	if (e == 90)
		for (uint32_t p = 0; p < 100; p++)
			acc[(*n)++] = p;
}

static void idle_rules_case(const struct sim_trace *t, double reused_x, double gap_x,
			    uint64_t want_refaults, uint32_t want_resident_at_80)
{
	struct sim_params p;
	struct sim_result r;

	sim_params_default(&p);
	p.fpr = false;
	p.idle_age_ms = 40000;
	p.idle_reused_x = reused_x;
	p.idle_gap_x = gap_x;
	run(t, "idle", &p, &r);
	assert_int_equal(r.refaults, want_refaults);
	assert_int_equal(r.resident_per_epoch[80], want_resident_at_80);
	/* Before anything has been idle for 40 s, only the freed pages are gone. */
	assert_int_equal(r.resident_per_epoch[38], 400);
	sim_result_free(&r);
}

static void test_idle_rules(void **state)
{
	struct sim_trace t;

	(void)state;
	build(&t, 512, 120, rules_fill); /* 112 pages never used: gone at once */
	/* The single threshold: everything idle for 40 s goes at 71 s, so 0-99 refault at 90 s.
	 * 300-399 were allocated again at 30 s, and go with the rest. */
	idle_rules_case(&t, 1, 0, 100, 0);
	/* Reused pages (0-199, idle 29 s before their reuse) kept for 80 s: no refault, and
	 * 0-199 still resident at 80 s.  300-399 are not reused pages: they go at 71 s, as
	 * they would if allocation counted as nothing. */
	idle_rules_case(&t, 2, 0, 0, 200);
	/* Reused pages kept while idle under 2.5 x their 29 s gap (72.5 s): the same. */
	idle_rules_case(&t, 1, 2.5, 0, 200);
	/* Reused pages dropped sooner (20 s, from 51 s): 0-99 refault at 90 s. */
	idle_rules_case(&t, 0.5, 0, 100, 0);
	sim_trace_free(&t);
}

/* ---- memtide ------------------------------------------------------------------------------ */

static void test_memtide(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r, f;

	(void)state;
	sim_params_default(&p);
	build(&t, 8192, 300, damon_fill);
	run(&t, "fpr-only", &p, &f);
	run(&t, "memtide", &p, &r);
	/* The idle half is reclaimed (the threshold starts at 2 min and only falls: no page of
	 * the idle half is ever used again) and the hot half never is. */
	assert_true(r.resident_per_epoch[299] <= 4096 + 64);
	assert_int_equal(r.refaults, 0);
	assert_true(r.saved > f.saved + 0.2);
	sim_result_free(&r);
	/* A floor longer than the trace: memtide takes nothing live. */
	p.mt_min_age_ms = 600000;
	run(&t, "memtide", &p, &r);
	assert_int_equal(r.evicted_live, 0);
	assert_true(r.saved > f.saved - 1e-9 && r.saved < f.saved + 1e-9);
	sim_result_free(&r);
	/* Settings libvmm rejects come back as errors, not crashes. */
	p.mt_nr_gens = 3;
	p.mt_aging_div = 2;
	struct sim_result bad;
	assert_int_equal(sim_replay(&t, sim_policy_get("memtide"), &p, false, &bad), -EINVAL);
	sim_result_free(&f);
	sim_trace_free(&t);
}

/* The lab evicts as memtided's host pageout does, by vmm_decide's answer: nothing while
 * the guest was watched for less than the cold age (memtided's generations: the threshold
 * starts at their 70 s reach and never falls under the 10 s minimum), then at most a step a
 * round.  Free memory and free page reporting are off and the reuse floor with them, so
 * every page that goes went by the decision. */
static void test_memtide_decides_as_memtided(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;
	const uint64_t step = 64;

	(void)state;
	sim_params_default(&p);
	sim_params_memtided_layout(&p);
	p.fpr = false;
	p.mt_take_free = false;
	p.mt_reuse_tau_ms = 0;
	p.mt_max_step_pages = step;
	build(&t, 8192, 300, damon_fill);
	run(&t, "memtide", &p, &r);
	uint64_t first = 0;
	for (uint64_t e = 1; e < 300; e++) {
		uint64_t drop = r.resident_per_epoch[e - 1] > r.resident_per_epoch[e]
				    ? r.resident_per_epoch[e - 1] - r.resident_per_epoch[e]
				    : 0;
		assert_true(drop <= step);
		if (drop && !first)
			first = e;
	}
	/* Watched for the cold age first (at least the 10 s minimum: 1 s epochs). */
	assert_true(first >= 10);
	/* Not vacuous: the idle half goes, a step at a time, and nothing hot. */
	assert_true(r.resident_per_epoch[299] < 8192 - 20 * step);
	assert_true(r.resident_per_epoch[299] >= 4096);
	assert_int_equal(r.refaults, 0);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* ---- memtided's actuators: the guest's own swap, the balloon, the agent's reclaim -------- */

/* The guest's reclaim swaps out block 0 (pages 0-511) and page 512 at the end of epoch 0;
 * page 513 stays live. */
static int swap_some_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	(void)state;
	if (e == 0)
		for (uint32_t p = 0; p <= 512; p++)
			assert_int_equal(sim_guest_swapout(ctx, p), 1);
	return 0;
}

static const struct sim_policy swap_some = {
    .name = "swap-some", .fpr = SIM_FPR_ON, .knob = "", .epoch = swap_some_epoch};

/* Pages 0-513 written in epoch 0; 512 read in epoch 1, 0 in epoch 5. */
static void swap_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	if (e == 0)
		for (uint32_t p = 0; p < 514; p++)
			acc[(*n)++] = p | SIM_ACC_WRITE;
	if (e == 1)
		acc[(*n)++] = 512;
	if (e == 5)
		acc[(*n)++] = 0;
}

/* A page the guest swapped out refaults when touched, whether its frame is still on the
 * host (page 512: its block holds live page 513, so free page reporting never takes it) or
 * went back (page 0: its whole block did, 2 s after the swap). */
/* The kv trace (a store written once, a hot tenth read once a second at random) through the
 * ept source's windows, with memtided's generations: as memtided was before 7 Dec (the
 * oldest folding, the controller holding, a fixed 200 ms window right after each round) only
 * the guest's free memory goes, the failure a user met; now the store goes too, within the
 * budget. */
static void test_sampled_kv(void **state)
{
	struct sim_gen_opts go;
	struct sim_trace t;
	struct sim_params p;
	struct sim_result before, after;

	(void)state;
	sim_gen_opts_default(&go, SIM_GEN_KV);
	go.epochs = 12000; /* 20 minutes, 128 MiB */
	assert_int_equal(sim_gen(&go, &t), 0);
	sim_params_default(&p);
	sim_params_memtided_layout(&p);
	p.mt_sample_ms = 200;
	p.mt_gens_widen = p.mt_weigh = p.mt_reuse_tiers = false;
	p.mt_sample_adapt = p.mt_sample_phase = false;
	run(&t, "memtide", &p, &before);
	sim_params_default(&p);
	sim_params_memtided_layout(&p);
	p.mt_sample_ms = 200;
	run(&t, "memtide", &p, &after);
	print_message("kv through 200 ms windows: before %.3f saved (%llu refaults), after %.3f "
		      "(%llu)\n",
		      before.saved, (unsigned long long)before.refaults, after.saved,
		      (unsigned long long)after.refaults);
	/* free memory is 58% of RAM; the cold store 36% more */
	assert_true(before.saved < 0.62);
	assert_true(after.saved > before.saved + 0.15);
	assert_true(after.refault_rate <= 1.25 * p.budget);
	sim_result_free(&before);
	sim_result_free(&after);
	sim_trace_free(&t);
}

static void test_guest_swap(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;

	(void)state;
	sim_params_default(&p);
	build(&t, 2048, 8, swap_fill);
	assert_int_equal(sim_replay(&t, &swap_some, &p, true, &r), 0);
	assert_int_equal(r.evicted_live, 513);
	/* Blocks 2-3 (never used) go at 2 s, block 0 at 3 s (swapped at 1 s), block 1 never. */
	assert_int_equal(r.resident_per_epoch[1], 2048);
	assert_int_equal(r.resident_per_epoch[2], 1024);
	assert_int_equal(r.resident_per_epoch[3], 512);
	assert_int_equal(r.refaults_per_epoch[1], 1);   /* page 512, still resident */
	assert_int_equal(r.resident_per_epoch[5], 513); /* page 0 read back */
	assert_int_equal(r.refaults_per_epoch[5], 1);
	assert_int_equal(r.refaults, 2);
	assert_int_equal(r.fills, 0);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* Pages 0-3583 written in epoch 0 then idle, 3584-7167 read every epoch, 7168-8191 (two
 * blocks) never used: the guest keeps some memory free, as Linux does (MemAvailable at 0
 * is pressure to memtided, which then gives memory back and takes none). */
static void idle_hot_free_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	for (uint32_t p = (e == 0 ? 0 : 3584); p < 7168; p++)
		acc[(*n)++] = p | (e == 0 ? SIM_ACC_WRITE : 0);
}

/* memtide with memtided's generations and `return` (sim/actuators.c); 8192 pages stand for a
 * 1 GiB guest, so memtided's floor is 2048 pages, its headroom and its step 1024. */
static void run_return(const struct sim_trace *t, enum sim_return mode, struct sim_result *r)
{
	struct sim_params p;

	sim_params_default(&p);
	sim_params_memtided_layout(&p);
	p.mt_return = mode;
	run(t, "memtide", &p, r);
}

/* The agent's reclaim: the guest keeps its hot 3584 pages plus at most the headroom, a step
 * an interval at most, never before it was watched for the 10 s shortest cold age, and
 * nothing hot leaves; the guest swaps the idle pages out, and free page reporting returns
 * their whole blocks.  (The balloon on this guest waits for free room that never comes, as
 * memtided's does: docs/results.md, sim_actuators.) */
static void test_memtide_reclaim(void **state)
{
	struct sim_trace t;

	(void)state;
	build(&t, 8192, 200, idle_hot_free_fill);
	struct sim_result r;
	run_return(&t, SIM_RETURN_RECLAIM, &r);
	/* Free page reporting takes the two free blocks at 2 s. */
	for (size_t e = 2; e <= 10; e++)
		assert_int_equal(r.resident_per_epoch[e], 7168);
	for (size_t e = 1; e < 200; e++)
		assert_true(r.resident_per_epoch[e - 1] <= r.resident_per_epoch[e] + 1024);
	assert_true(r.resident_per_epoch[199] >= 3584);
	assert_true(r.resident_per_epoch[199] <= 3584 + 1024);
	assert_int_equal(r.refaults, 0);
	assert_true(r.evicted_live >= 2560); /* swapped out by the guest, not dropped */
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* Even pages used every epoch, odd pages never: free memory scattered through every 2 MiB
 * block. */
static void even_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	(void)fr;
	(void)nf;
	for (uint32_t p = 0; p < 8192; p += 2)
		acc[(*n)++] = p | (e == 0 ? SIM_ACC_WRITE : 0);
}

/* Free memory that free page reporting cannot return (no block is ever wholly free): the
 * balloon takes it, 4 KiB at a time, down to the hot half plus the headroom, a step an
 * interval; the agent's reclaim does not (nothing is cold to reclaim, and what is free stays
 * in the guest's partly used blocks). */
static void test_memtide_balloon(void **state)
{
	struct sim_trace t;
	struct sim_result b, rc;

	(void)state;
	build(&t, 8192, 200, even_fill);
	run_return(&t, SIM_RETURN_BALLOON, &b);
	run_return(&t, SIM_RETURN_RECLAIM, &rc);
	for (size_t e = 1; e < 200; e++)
		assert_true(b.resident_per_epoch[e - 1] <= b.resident_per_epoch[e] + 1024);
	assert_int_equal(b.resident_per_epoch[199], 4096 + 1024);
	assert_int_equal(b.refaults, 0);
	assert_int_equal(b.evicted_live, 0);
	assert_int_equal(rc.resident_per_epoch[199], 8192);
	assert_int_equal(rc.refaults, 0);
	sim_result_free(&b);
	sim_result_free(&rc);
	sim_trace_free(&t);
}

/* One hot page per 2 MiB block (the sparse generator): the agent's reclaim swaps the idle
 * pages out for the balloon's steps, and the balloon takes their frames, not the hot pages
 * (a swapped frame the LRU forgot left the balloon nothing but the hot pages to squeeze:
 * 34,580 refaults in 600 s). */
static void test_memtide_balloon_takes_swapped(void **state)
{
	struct sim_gen_opts go;
	struct sim_trace t;
	struct sim_result r;

	(void)state;
	sim_gen_opts_default(&go, SIM_GEN_SPARSE);
	go.epochs = 200;
	assert_int_equal(sim_gen(&go, &t), 0);
	run_return(&t, SIM_RETURN_BALLOON, &r);
	printf("# sparse under the balloon: %.1f%% saved, %llu refaults\n", 100 * r.saved,
	       (unsigned long long)r.refaults);
	assert_true(r.saved > 0.4);
	assert_true(r.refaults < 64);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* Every other page of the first 2048 written at epoch 0, the even pages of [512, 2048) used
 * every epoch, the even pages of [0, 510) freed at epoch 5 (page 510 stays, so the first
 * 2 MiB block never empties): memory never used and memory freed lie scattered between
 * used pages, where free page reporting's 2 MiB blocks cannot reach them. */
static void scattered_fill(uint64_t e, uint32_t *acc, size_t *n, uint32_t *fr, size_t *nf)
{
	for (uint32_t p = e == 0 ? 0 : 512; p < 2048; p += 2)
		acc[(*n)++] = e == 0 ? (p | SIM_ACC_WRITE) : p;
	if (e == 5)
		for (uint32_t p = 0; p < 510; p += 2)
			fr[(*nf)++] = p;
}

/* memtide with mt-take-free (the default) gives the host memory never used after the first
 * epoch and freed memory at the end of the epoch that freed it, as a balloon takes free
 * memory first; without it, only free page reporting's whole blocks go back and the rest
 * waits for the eviction hand (here never: the floor is longer than the trace). */
static void test_memtide_takes_free(void **state)
{
	struct sim_trace t;
	struct sim_params p;
	struct sim_result with, without;

	(void)state;
	sim_params_default(&p);
	p.mt_min_age_ms = 600000;
	p.mt_initial_age_ms = 600000;
	build(&t, 4096, 30, scattered_fill);
	run(&t, "memtide", &p, &with);
	p.mt_take_free = false;
	run(&t, "memtide", &p, &without);
	/* After epoch 0: the 1024 written pages only, against 2048 (the upper half goes back
	 * through free page reporting as whole blocks, after its 2 s delay). */
	assert_int_equal(with.resident_per_epoch[1], 1024);
	assert_int_equal(without.resident_per_epoch[10], 2048);
	/* The 255 pages freed at epoch 5 leave at once, and nothing live ever did. */
	assert_int_equal(with.resident_per_epoch[6], 1024 - 255);
	assert_int_equal(without.resident_per_epoch[6], 2048);
	assert_int_equal(with.evicted_live, 0);
	assert_int_equal(with.refaults, 0);
	assert_true(with.saved > without.saved + 0.2);
	sim_result_free(&with);
	sim_result_free(&without);
	sim_trace_free(&t);
}

/* After a step growth, memtide (its defaults: libvmm averages the refault rate) stops
 * refaulting within two control intervals: the only refaults are the step's own (the grown
 * set had been reclaimed).  Fed each interval raw (--mt-smooth 0) it keeps refaulting. */
static void test_memtide_react(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r;

	(void)state;
	sim_gen_opts_default(&o, SIM_GEN_STEP);
	o.ram_pages = 8192;
	o.epochs = 400;
	assert_int_equal(sim_gen(&o, &t), 0);
	sim_params_default(&p);
	assert_true(p.mt_smooth);
	p.budget = p.mt_target = 0.002;
	run(&t, "memtide", &p, &r);
	uint64_t grown = 8192 * 2 / 5;
	assert_int_equal(r.refaults_per_epoch[200], grown); /* the step itself */
	assert_int_equal(r.refaults, grown);
	uint64_t react = sim_react_ms(&t, &r, o.step_at_ms, p.mt_interval_ms, p.budget);
	assert_true(react > 0 && react <= 2 * p.mt_interval_ms);
	sim_result_free(&r);
	p.mt_smooth = false;
	run(&t, "memtide", &p, &r);
	assert_true(r.refaults > grown);
	assert_true(sim_react_ms(&t, &r, o.step_at_ms, p.mt_interval_ms, p.budget) >
		    2 * p.mt_interval_ms);
	sim_result_free(&r);
	sim_trace_free(&t);
}

/* memtide at its defaults, told only the budget, on the zipf trace (every live page reused
 * within about 5 minutes, so no threshold under that is safe at 0.2% a minute): the reuses
 * never vouch for a threshold the budget allows, so it holds (vmm/reclaim_ctl.c) and stays
 * within the budget.  Before the hold it evicted at its 10 s floor and refaulted at 43x
 * the budget (4668 refaults here). */
static void test_memtide_holds_budget(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	struct sim_params p;
	struct sim_result r, f;

	(void)state;
	sim_gen_opts_default(&o, SIM_GEN_ZIPF);
	o.ram_pages = 8192;
	assert_int_equal(sim_gen(&o, &t), 0);
	sim_params_default(&p);
	p.budget = p.mt_target = 0.002;
	run(&t, "memtide", &p, &r);
	run(&t, "fpr-only", &p, &f);
	assert_true(r.refault_rate <= 1.25 * p.budget);
	assert_true(r.saved >= f.saved); /* free memory still goes back */
	sim_result_free(&r);
	sim_result_free(&f);
	sim_trace_free(&t);
}

/* sim_react_ms on a hand-made series: over budget in the windows ending 10 s and 20 s after
 * the step, under it afterwards, so 20 s. */
static void test_react_metric(void **state)
{
	struct sim_trace t;
	struct sim_result r = {0};
	uint32_t refaults[40] = {0}, resident[40];

	(void)state;
	build(&t, 512, 40, lru_fill_none);
	for (int e = 0; e < 40; e++)
		resident[e] = 500;
	refaults[10] = 50; /* window [10,15): 50 / (5/60 min) / 500 = 1.2/min */
	refaults[22] = 50; /* window [20,25) */
	refaults[30] = 1;  /* window [30,35): 0.024/min */
	r.refaults_per_epoch = refaults;
	r.resident_per_epoch = resident;
	assert_int_equal(sim_react_ms(&t, &r, 10000, 5000, 0.5), 15000);
	assert_int_equal(sim_react_ms(&t, &r, 10000, 5000, 0.01), 25000);
	assert_int_equal(sim_react_ms(&t, &r, 10000, 5000, 2.0), 0);
	sim_trace_free(&t);
}

/* ---- the oracle --------------------------------------------------------------------------- */

static void test_oracle_is_lower_bound(void **state)
{
	static const enum sim_gen_kind kinds[] = {SIM_GEN_ZIPF, SIM_GEN_PHASES, SIM_GEN_SCAN,
						  SIM_GEN_GROW};
	struct sim_params p;

	(void)state;
	sim_params_default(&p);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++) {
		struct sim_gen_opts o;
		struct sim_trace t;
		sim_gen_opts_default(&o, kinds[k]);
		o.ram_pages = 4096;
		o.epochs = 200;
		assert_int_equal(sim_gen(&o, &t), 0);
		for (size_t i = 0; sim_policies[i]; i++) {
			const struct sim_policy *pol = sim_policies[i];
			double vals[32];
			size_t n = sim_default_knob_values(pol, vals, 32);
			if (!strcmp(pol->name, "oracle"))
				continue;
			for (size_t v = 0; v < n; v++) {
				struct sim_params pv = p;
				struct sim_result r;
				char buf[64];
				double bound;
				if (pol->knob[0]) {
					snprintf(buf, sizeof(buf), "%.17g", vals[v]);
					assert_int_equal(sim_params_set(&pv, pol->knob, buf), 0);
				}
				assert_int_equal(sim_replay(&t, pol, &pv, false, &r), 0);
				assert_int_equal(sim_oracle_bound(&t, r.refaults, &bound), 0);
				if (r.mean_resident_pages < bound - 1e-6)
					fail_msg("%s %s=%g on %s: %.1f pages with %llu refaults, "
						 "below the oracle's %.1f",
						 pol->name, pol->knob, vals[v], t.source,
						 r.mean_resident_pages,
						 (unsigned long long)r.refaults, bound);
			}
		}
		/* The oracle itself replays to its own bound, within the budget. */
		for (int b = 0; b < 4; b++) {
			double budget = 0.001 * (1 << (2 * b)); /* 0.1% .. 6.4% per minute */
			struct sim_params po = p;
			struct sim_result r;
			double bound;
			po.budget = budget;
			assert_int_equal(sim_replay(&t, &sim_policy_oracle, &po, false, &r), 0);
			assert_true(r.refault_rate <= budget + 1e-12);
			assert_int_equal(sim_oracle_bound(&t, r.refaults, &bound), 0);
			assert_true(r.mean_resident_pages < bound + 1e-6);
			assert_true(r.mean_resident_pages > bound - 1e-6);
		}
		sim_trace_free(&t);
	}
}

static void test_best_under_budget(void **state)
{
	struct sim_point pts[3] = {
	    {.knob = 1, .saved = 0.1, .refault_rate = 0.0},
	    {.knob = 2, .saved = 0.3, .refault_rate = 0.005},
	    {.knob = 3, .saved = 0.5, .refault_rate = 0.05},
	};
	double saved;

	(void)state;
	assert_int_equal(sim_best_under_budget(pts, 3, 0.002, &saved), 0);
	assert_true(saved == 0.1);
	assert_int_equal(sim_best_under_budget(pts, 3, 0.01, &saved), 1);
	assert_true(saved == 0.3);
	assert_int_equal(sim_best_under_budget(pts + 2, 1, 0.01, &saved), -1);
	assert_true(saved == 0);
}

static void test_params(void **state)
{
	struct sim_params p;
	int err;

	(void)state;
	sim_params_default(&p);
	assert_int_equal(sim_params_set(&p, "mom-max-step", "0.1"), 0);
	assert_true(sim_params_get(&p, "mom-max-step", &err) == 0.1);
	assert_int_equal(err, 0);
	assert_int_equal(sim_params_set(&p, "mom-max-step", "2"), -ERANGE);
	double lo, hi;
	assert_int_equal(sim_params_range("mom-max-step", &lo, &hi), 0);
	assert_true(lo == 0 && hi == 1);
	assert_int_equal(sim_params_set(&p, "budget", "2"), 0); /* budgets above 1/min */
	char why[200];
	assert_int_equal(sim_params_check(&p, why, sizeof(why)), 0);
	assert_int_equal(sim_params_set(&p, "mt-max-age-ms", "10000"), 0);
	assert_int_equal(sim_params_set(&p, "mt-min-age-ms", "20000"), 0);
	assert_int_equal(sim_params_check(&p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "mt-min-age-ms (20000) is above --mt-max-age-ms (10000)"));
	assert_int_equal(sim_params_set(&p, "mom-max-step", "x"), -EINVAL);
	assert_int_equal(sim_params_set(&p, "mt-nr-gens", "4.5"), -EINVAL);
	assert_int_equal(sim_params_set(&p, "no-such", "1"), -ENOENT);
	/* memtided's names for `return`, or their numbers; nothing else. */
	assert_int_equal(p.mt_return, SIM_RETURN_PAGEOUT);
	assert_int_equal(sim_params_set(&p, "mt-return", "reclaim"), 0);
	assert_int_equal(p.mt_return, SIM_RETURN_RECLAIM);
	assert_int_equal(sim_params_set(&p, "mt-return", "1"), 0);
	assert_int_equal(p.mt_return, SIM_RETURN_BALLOON);
	assert_int_equal(sim_params_set(&p, "mt-return", "auto"), -EINVAL);
	assert_int_equal(sim_params_set(&p, "mt-return", "3"), -ERANGE);
	assert_int_equal(sim_params_set(&p, "mt-interval-ms", "50"), 0);
	assert_int_equal(sim_params_set(&p, "mt-max-age-ms", "3600000"), 0);
	assert_int_equal(sim_params_check(&p, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "--mt-interval-ms (50) is under 100 ms"));
	sim_params_get(&p, "no-such", &err);
	assert_int_equal(err, -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_core_model),
	    cmocka_unit_test(test_none_and_fpr),
	    cmocka_unit_test(test_mom),
	    cmocka_unit_test(test_lru2),
	    cmocka_unit_test(test_damon),
	    cmocka_unit_test(test_idle_rules),
	    cmocka_unit_test(test_memtide),
	    cmocka_unit_test(test_memtide_takes_free),
	    cmocka_unit_test(test_memtide_decides_as_memtided),
	    cmocka_unit_test(test_sampled_kv),
	    cmocka_unit_test(test_guest_swap),
	    cmocka_unit_test(test_memtide_reclaim),
	    cmocka_unit_test(test_memtide_balloon),
	    cmocka_unit_test(test_memtide_balloon_takes_swapped),
	    cmocka_unit_test(test_oracle_is_lower_bound),
	    cmocka_unit_test(test_memtide_react),
	    cmocka_unit_test(test_memtide_holds_budget),
	    cmocka_unit_test(test_react_metric),
	    cmocka_unit_test(test_best_under_budget),
	    cmocka_unit_test(test_params),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
