// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_decide.c - one round of the per-VM decision (vmm_decide, vmm/decide.c), the call
 * memtided and memtide-sim's memtide both make, and the limits both fit the controller to
 * (vmm_reclaim_config_fit).
 *
 * Checked: nothing goes while the guest was watched for less than the cold age, nor while
 * the controller is learning; then every resident page past the floor may go, at most a
 * step; an operator's fixed age is not held and is bounded by the longest age; a host
 * squeeze takes through a hold; reuses the caller calls an echo of the guest's own reclaim
 * do not floor the threshold where the same reuses observed do; where pages idle past the
 * longest age come back, the pages that never did go and the others stay, or a measured
 * part goes (the weighing, with a sampled hot set beside data written once); the reason is
 * one line; bad arguments are refused.
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

#define MiB     (1ULL << 20)
#define RAM     (16 * MiB)
#define PAGES   (RAM >> VMM_PAGE_SHIFT) /* 4096 */
#define STEP_MS 5000

struct rig {
	struct vmm_range ram;
	struct vmm_guest *g;
	struct vmm_reclaim_ctl ctl;
};

/* A 16 MiB guest aged from 0 with memtided's generations, and a controller at libvmm's defaults but starting at its
 * 10 s minimum (as memtide-sim starts). */
static void rig_init(struct rig *r)
{
	struct vmm_guest_config gc;
	struct vmm_reclaim_config rc;

	r->ram = (struct vmm_range){0, RAM};
	vmm_guest_config_default(&gc);
	gc.ram = &r->ram;
	gc.nr_ram = 1;
	gc.nr_gens = VMM_MAX_NR_GENS; /* memtided's: ages past an hour at 5 s rounds */
	assert_int_equal(vmm_guest_new(&gc, &r->g), 0);
	assert_int_equal(vmm_age_begin(r->g, 0), 0);
	vmm_reclaim_config_default(&rc);
	rc.initial_age_ms = rc.min_age_ms;
	assert_int_equal(vmm_reclaim_init(&r->ctl, &rc), 0);
}

static void rig_fini(struct rig *r)
{
	vmm_guest_free(r->g);
}

/* One round at now_ms, with nothing refaulting and the given extras. */
static struct vmm_decision round_at(struct rig *r, uint64_t now_ms, struct vmm_decide_in in)
{
	struct vmm_decision d;

	in.dt_ms = STEP_MS;
	in.resident_pages = PAGES;
	in.watched_ms = now_ms;
	assert_int_equal(vmm_age_begin(r->g, now_ms), 0);
	assert_int_equal(vmm_decide(r->g, &r->ctl, &in, &d), 0);
	return d;
}

static void test_watch_learn_take(void **state)
{
	struct rig r;
	struct vmm_decision d;
	struct vmm_decide_in none = {0};
	uint64_t t = 0;

	(void)state;
	rig_init(&r);
	/* 5 s in: no page is known idle for the 10 s cold age yet. */
	d = round_at(&r, t += STEP_MS, none);
	assert_int_equal(d.gate, VMM_DECIDE_WATCHING);
	assert_int_equal(d.take_pages, 0);
	assert_int_equal(d.cold_age_ms, 10000);
	/* Watched for the cold age but not four times as long: the controller is learning. */
	d = round_at(&r, t += STEP_MS, none);
	assert_int_equal(d.gate, VMM_DECIDE_HOLD);
	assert_int_equal(r.ctl.hold_why, VMM_HOLD_LEARNING);
	assert_int_equal(d.take_pages, 0);
	assert_false(d.holds_all_takers); /* learning holds host pageout, not the balloon */
	/* A guest that reused nothing has told nothing yet: the controller learns for its
	 * reuse window (5 min), then every resident page may go (a step is 1 GiB). */
	while (t < r.ctl.cfg.reuse_tau_ms) {
		assert_int_equal(d.gate, VMM_DECIDE_HOLD);
		d = round_at(&r, t += STEP_MS, none);
	}
	assert_int_equal(d.gate, VMM_DECIDE_TAKE);
	assert_int_equal(d.take_pages, PAGES);
	/* Down to the floor, at most a step. */
	struct vmm_decide_in lim = {.floor_pages = PAGES - 100};
	d = round_at(&r, t += STEP_MS, lim);
	assert_int_equal(d.gate, VMM_DECIDE_TAKE);
	assert_int_equal(d.take_pages, 100);
	lim.max_step_pages = 30;
	d = round_at(&r, t += STEP_MS, lim);
	assert_int_equal(d.take_pages, 30);
	lim.floor_pages = PAGES;
	d = round_at(&r, t + STEP_MS, lim);
	assert_int_equal(d.gate, VMM_DECIDE_FLOOR);
	assert_int_equal(d.take_pages, 0);
	assert_string_equal(vmm_decide_gate_name(d.gate), "floor");
	rig_fini(&r);
}

/* A fixed age is the operator's word: the controller's learning does not hold it, and one
 * older than the generations tell apart is bounded and said so.  A host squeeze takes
 * through the controller's hold. */
static void test_fixed_age_and_squeeze(void **state)
{
	struct rig r;
	struct vmm_decision d;
	struct vmm_decide_in fixed = {.fixed_age_ms = 15000};
	struct vmm_decide_in squeeze = {.hold_overridden = true};

	(void)state;
	rig_init(&r);
	d = round_at(&r, 10000, fixed);
	assert_int_equal(d.gate, VMM_DECIDE_WATCHING); /* 10 s watched, 15 s asked */
	assert_int_equal(d.cold_age_ms, 15000);
	d = round_at(&r, 15000, fixed);
	assert_true(r.ctl.hold);
	assert_int_equal(d.gate, VMM_DECIDE_TAKE);
	assert_false(d.fixed_age_capped);
	fixed.fixed_age_ms = 100 * r.ctl.cfg.max_age_ms;
	d = round_at(&r, 20000, fixed);
	assert_true(d.fixed_age_capped);
	assert_int_equal(d.cold_age_ms, r.ctl.cfg.max_age_ms);
	assert_int_equal(d.gate, VMM_DECIDE_WATCHING);
	d = round_at(&r, 25000, squeeze);
	assert_true(r.ctl.hold);
	assert_int_equal(d.gate, VMM_DECIDE_TAKE);
	assert_int_equal(d.take_pages, PAGES);
	rig_fini(&r);
}

/* Refaults past the budget even at the longest age: a hold for every taker (the balloon and
 * the agent too), unless the operator fixed the age. */
static void test_hold_for_all_takers(void **state)
{
	struct rig r;
	struct vmm_reclaim_config rc;
	struct vmm_decision d = {0};
	struct vmm_decide_in hot = {0}, fixed = {.fixed_age_ms = 20000};
	uint64_t t = 0;

	(void)state;
	rig_init(&r);
	vmm_reclaim_config_default(&rc);
	rc.reuse_tau_ms = 0; /* no reuse floor: the refaults alone decide */
	vmm_reclaim_config_fit(&rc, VMM_MAX_NR_GENS, STEP_MS);
	assert_int_equal(vmm_reclaim_init(&r.ctl, &rc), 0);
	for (int i = 0; i < 2000 && !(d.gate == VMM_DECIDE_HOLD); i++) {
		hot.refaults = PAGES / 5; /* a fifth of the guest every 5 s: far past the budget */
		d = round_at(&r, t += STEP_MS, hot);
	}
	assert_int_equal(d.gate, VMM_DECIDE_HOLD);
	assert_int_equal(r.ctl.hold_why, VMM_HOLD_REFAULTS);
	assert_true(d.holds_all_takers);
	fixed.refaults = PAGES / 5;
	d = round_at(&r, t + STEP_MS, fixed);
	assert_true(r.ctl.hold);
	assert_false(d.holds_all_takers);
	rig_fini(&r);
}

/* Half the guest is used again 30 s after the first round: observed, those reuses floor
 * the threshold above 30 s; called an echo (the guest's own reclaim reading its pages on
 * the way to swap), they do not. */
static void test_echo_is_not_reuse(void **state)
{
	struct rig seen, echo;
	struct vmm_decide_in obs = {0}, skip = {.reuse_is_echo = true};

	(void)state;
	rig_init(&seen);
	rig_init(&echo);
	for (uint64_t t = STEP_MS; t <= 30000; t += STEP_MS) {
		(void)round_at(&seen, t, obs);
		(void)round_at(&echo, t, obs);
	}
	assert_int_equal(vmm_mark_young(seen.g, 0, PAGES / 2, false), 0);
	assert_int_equal(vmm_mark_young(echo.g, 0, PAGES / 2, false), 0);
	(void)round_at(&seen, 35000, obs);
	(void)round_at(&echo, 35000, skip);
	assert_true(seen.ctl.floor_ms > 30000);
	assert_true(seen.ctl.age_ms >= seen.ctl.floor_ms);
	assert_int_equal(echo.ctl.floor_ms, 0);
	rig_fini(&seen);
	rig_fini(&echo);
}

/* memtided's limits: a 5 s interval and 16 generations reach past the hour, so libvmm's
 * own 10 s .. 1 h from 2 min stand; fewer generations or shorter rounds cut them. */
static void test_config_fit(void **state)
{
	struct vmm_reclaim_config c;

	(void)state;
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, VMM_MAX_NR_GENS, 5000);
	assert_true(vmm_gens_reach_ms(VMM_MAX_NR_GENS, 5000) > 3600 * 1000);
	assert_int_equal(c.max_age_ms, 3600 * 1000);
	assert_int_equal(c.initial_age_ms, 120 * 1000);
	assert_int_equal(c.min_age_ms, 10000);
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, 4, 5000); /* 3 rounds: 15 s */
	assert_int_equal(c.max_age_ms, vmm_gens_reach_ms(4, 5000));
	assert_int_equal(c.max_age_ms, 15000);
	assert_int_equal(c.initial_age_ms, c.max_age_ms); /* 2 min is past it: the longest */
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, 2, 5000); /* 5 s: under the 10 s minimum */
	assert_int_equal(c.min_age_ms, c.max_age_ms);
}

/* The weighing's guest: 16 MiB, 5 s rounds, thresholds 10..60 s (a longest age of a
 * minute keeps the test short; memtided's is an hour).  Pages [0, 1024) are a hot set a
 * sampled source sees one round in five (each is back after 25 s on average, and 7% of
 * the gaps run past 60 s: 170 reuses a minute past the longest age, 20x the 0.2% budget);
 * the rest is written in the first round and, with `reread`, read back once each at a
 * random round after 2 min (77 first comebacks a minute, most past 60 s). */
static void weigh_rig(struct rig *r, bool weigh)
{
	struct vmm_guest_config gc;
	struct vmm_reclaim_config rc;

	r->ram = (struct vmm_range){0, RAM};
	vmm_guest_config_default(&gc);
	gc.ram = &r->ram;
	gc.nr_ram = 1;
	gc.nr_gens = VMM_MAX_NR_GENS;
	gc.reuse_raises_tier = true;
	assert_int_equal(vmm_guest_new(&gc, &r->g), 0);
	assert_int_equal(vmm_age_begin(r->g, 0), 0);
	vmm_reclaim_config_default(&rc);
	rc.max_age_ms = 60000;
	rc.initial_age_ms = 60000;
	rc.weigh = weigh;
	assert_int_equal(vmm_reclaim_init(&r->ctl, &rc), 0);
}

#define HOT 1024u

static struct vmm_decision weigh_round(struct rig *r, uint64_t now_ms, uint64_t *rng, bool reread,
				       uint32_t *reread_at)
{
	struct vmm_decide_in in = {.now_ms = now_ms};
	uint64_t round = now_ms / STEP_MS;

	struct vmm_guest_stats gs;
	vmm_guest_get_stats(r->g, &gs);
	uint64_t refaults_before = gs.refaults_total;
	assert_int_equal(vmm_age_begin(r->g, now_ms), 0);
	for (uint64_t p = 0; p < PAGES; p++) {
		bool seen;
		*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
		if (p < HOT)
			seen = (*rng >> 33) % 5 == 0;
		else
			seen = round == 1 || (reread && reread_at[p] == round);
		if (seen)
			assert_int_equal(vmm_mark_young(r->g, p << VMM_PAGE_SHIFT, 1, false), 0);
	}
	vmm_guest_get_stats(r->g, &gs);
	in.refaults = gs.refaults_total - refaults_before; /* evicted pages seen again */
	in.dt_ms = STEP_MS;
	in.resident_pages = gs.resident_pages;
	in.watched_ms = now_ms;
	struct vmm_decision d;
	assert_int_equal(vmm_decide(r->g, &r->ctl, &in, &d), 0);
	return d;
}

/* Evict what the decision allows; returns the pages taken, and counts hot ones. */
static uint64_t weigh_evict(struct rig *r, const struct vmm_decision *d, uint64_t now_ms,
			    uint64_t *hot_taken)
{
	struct vmm_run runs[256] = {{0}};
	struct vmm_evict_req req = {.max_pages = d->take_pages,
				    .min_age_ms = d->cold_age_ms,
				    .now_ms = now_ms,
				    .runs = runs,
				    .max_runs = 256,
				    .reused_min_age_ms = d->reused_age_ms};
	struct vmm_evict_result res;

	if (d->gate != VMM_DECIDE_TAKE)
		return 0;
	assert_int_equal(vmm_evict(r->g, &req, &res), 0);
	for (size_t i = 0; i < res.nr_runs; i++)
		for (uint64_t k = 0; k < runs[i].npages; k++)
			*hot_taken += (runs[i].gpa >> VMM_PAGE_SHIFT) + k < HOT;
	return res.evicted_pages;
}

static void test_weighing(void **state)
{
	struct rig on, off;
	uint64_t rng_on = 7, rng_off = 7, hot_on = 0, hot_off = 0, taken_on = 0, taken_off = 0;
	struct vmm_decision d_on = {0}, d_off = {0};
	char why[256];

	(void)state;
	weigh_rig(&on, true);
	weigh_rig(&off, false);
	uint64_t hot_late = 0;
	for (uint64_t t = STEP_MS; t <= 20 * 60000; t += STEP_MS) {
		d_on = weigh_round(&on, t, &rng_on, false, NULL);
		d_off = weigh_round(&off, t, &rng_off, false, NULL);
		uint64_t hot_was = hot_on, n = weigh_evict(&on, &d_on, t, &hot_on);
		taken_on += n;
		taken_off += weigh_evict(&off, &d_off, t, &hot_off);
		if (t > 10 * 60000) { /* the second ten minutes */
			hot_late += hot_on - hot_was;
		}
	}
	/* Without weighing: reused past the longest age, nothing goes. */
	assert_int_equal(d_off.gate, VMM_DECIDE_HOLD);
	assert_int_equal(off.ctl.hold_why, VMM_HOLD_TOO_OLD);
	assert_int_equal(taken_off, 0);
	/* With it: every page written once went, and no hot page. */
	print_message("weighing: took %llu (%llu hot), mode %s, gate %s, floor %llu\n",
		      (unsigned long long)taken_on, (unsigned long long)hot_on,
		      vmm_reclaim_mode_name(on.ctl.mode), vmm_decide_gate_name(d_on.gate),
		      (unsigned long long)on.ctl.floor_ms);
	assert_int_equal(on.ctl.mode, VMM_TAKE_UNREUSED);
	assert_int_equal(d_on.gate, VMM_DECIDE_TAKE);
	assert_int_equal(d_on.reused_age_ms, UINT64_MAX); /* the hot pages stay */
	assert_true(d_on.holds_all_takers); /* the balloon cannot leave the hot pages */
	/* In the first minutes the reuses vouch for short ages and hot pages go too (each
	 * refaults at its next sighting, and the controller hears of it); once the gaps past
	 * the longest age show, only what never came back goes: no hot page in the second
	 * ten minutes.  Every page written once went. */
	struct vmm_guest_stats gs;
	vmm_guest_get_stats(on.g, &gs);
	assert_int_equal(hot_late, 0);
	assert_int_equal(taken_on - hot_on, PAGES - HOT);
	assert_true(gs.resident_pages >= HOT - HOT / 50); /* the hot set is back */
	vmm_decision_explain(&on.ctl, &d_on, why, sizeof(why));
	print_message("weighing: %s\n", why);
	assert_non_null(strstr(why, "never came back"));
	vmm_decision_explain(&off.ctl, &d_off, why, sizeof(why));
	assert_non_null(strstr(why, "come back faster than the refault target"));
	rig_fini(&on);
	rig_fini(&off);
}

/* The data written once is read back once each, at random after 2 min: first comebacks
 * past the longest age run at ~9x the budget, so no age keeps them all: a step.  It takes
 * a part, as many as their return rate lets the budget carry, and those already out count
 * against it. */
static void test_weighing_step(void **state)
{
	struct rig r;
	uint64_t rng = 11, hot = 0, taken = 0, most = 0;
	uint32_t *at = calloc(PAGES, sizeof(*at));
	struct vmm_decision d = {0};
	char why[256];
	bool stepped = false;

	(void)state;
	assert_non_null(at);
	for (uint64_t p = HOT; p < PAGES; p++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		at[p] = (uint32_t)(24 + (rng >> 33) % (40 * 12)); /* rounds 24 .. 504 */
	}
	weigh_rig(&r, true);
	for (uint64_t t = STEP_MS; t <= 40 * 60000; t += STEP_MS) {
		d = weigh_round(&r, t, &rng, true, at);
		if (d.mode == VMM_TAKE_STEP && d.gate == VMM_DECIDE_TAKE) {
			struct vmm_guest_stats gs;
			vmm_guest_get_stats(r.g, &gs);
			stepped = true;
			assert_int_equal(d.reused_age_ms, UINT64_MAX);
			assert_true(d.step_pages < d.step_idle_pages); /* a part, not all */
			assert_true(d.take_pages == 0 ||
				    gs.evicted_pages + d.take_pages <= d.step_pages);
			if (d.step_pages > most)
				most = d.step_pages;
			if (d.take_pages) /* the explanation names what it takes */
				vmm_decision_explain(&r.ctl, &d, why, sizeof(why));
		}
		taken += weigh_evict(&r, &d, t, &hot);
	}
	assert_true(stepped);
	assert_true(taken > 0);
	print_message("weighing, step: %llu pages taken, at most %llu carried: %s\n",
		      (unsigned long long)taken, (unsigned long long)most, why);
	assert_non_null(strstr(why, "never came back"));
	free(at);
	rig_fini(&r);
}

/* A key-value server's guest as memtided meets it (scenario 19, in small): 64 MiB, 5 s
 * rounds, memtided's 16 generations and limits.  The server's own 256 pages are used every
 * round; a store of 6144 pages is written in order over the first 40 s, its hot tenth
 * first, and afterwards only the hot tenth is read, each page about once a second, which a
 * sampled source catches in 65% of the rounds (the ept plugin's 1 s window: the rate
 * scenario 19 read); during the load it catches a write one round in five, and the rest
 * of RAM is never touched.  The hot pages' first reads after the load come back from
 * the ages they were written at, about the load's length: a burst of first comebacks,
 * once, after which no page that never came back comes back.  Counted over the 5 min reuse
 * window, that burst kept the floor at 45-64 s, which counts after watching four times as
 * long; counted over the last minute (first_window_ms), it is gone a minute after it
 * ended.  Eviction starts 25 s after the load, as memtided's host pageout waits while the
 * guest's RAM grows. */
#define KV_PAGES  16384u
#define KV_SERVER 256u
#define KV_STORE  6144u
#define KV_HOT    (KV_STORE / 10)
#define KV_LOAD   8u /* rounds: 40 s */

struct kv_run {
	uint64_t first_return_ms; /* after the load, to a fifth of the store gone (0: never) */
	uint64_t hot_taken, cold_taken, refaults;
};

static void kv_run(uint64_t first_window_ms, struct kv_run *out)
{
	struct vmm_range ram = {0, (uint64_t)KV_PAGES << VMM_PAGE_SHIFT};
	struct vmm_guest_config gc;
	struct vmm_reclaim_config rc;
	struct vmm_guest *g;
	struct vmm_reclaim_ctl ctl;
	struct vmm_run runs[256];
	uint64_t rng = 3, load_end = KV_LOAD * STEP_MS;

	memset(out, 0, sizeof(*out));
	vmm_guest_config_default(&gc);
	gc.ram = &ram;
	gc.nr_ram = 1;
	gc.nr_gens = VMM_MAX_NR_GENS;
	gc.reuse_raises_tier = true;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);
	vmm_reclaim_config_default(&rc);
	vmm_reclaim_config_fit(&rc, VMM_MAX_NR_GENS, STEP_MS);
	rc.first_window_ms = first_window_ms;
	assert_int_equal(vmm_reclaim_init(&ctl, &rc), 0);
	assert_int_equal(vmm_age_begin(g, 0), 0);
	for (uint64_t round = 1; round <= 120; round++) {
		uint64_t now = round * STEP_MS;
		struct vmm_guest_stats gs;
		vmm_guest_get_stats(g, &gs);
		uint64_t refaults_before = gs.refaults_total;
		assert_int_equal(vmm_age_begin(g, now), 0);
		assert_int_equal(vmm_mark_young(g, 0, KV_SERVER, false), 0);
		for (uint64_t i = 0; i < KV_STORE; i++) {
			bool seen;
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			if (round <= KV_LOAD) /* written in this round, caught one round in five */
				seen =
				    i / (KV_STORE / KV_LOAD) == round - 1 && (rng >> 33) % 5 == 0;
			else
				seen = i < KV_HOT && (rng >> 33) % 100 < 65;
			if (seen)
				assert_int_equal(
				    vmm_mark_young(g, (KV_SERVER + i) << VMM_PAGE_SHIFT, 1, true),
				    0);
		}
		vmm_guest_get_stats(g, &gs);
		struct vmm_decide_in in = {.dt_ms = STEP_MS,
					   .refaults = gs.refaults_total - refaults_before,
					   .resident_pages = gs.resident_pages,
					   .watched_ms = now,
					   .now_ms = now};
		struct vmm_decision d;
		out->refaults += in.refaults;
		assert_int_equal(vmm_decide(g, &ctl, &in, &d), 0);
		if (d.gate != VMM_DECIDE_TAKE || now < load_end + 25000)
			continue;
		struct vmm_evict_req req = {.max_pages = d.take_pages,
					    .min_age_ms = d.cold_age_ms,
					    .now_ms = now,
					    .runs = runs,
					    .max_runs = 256,
					    .reused_min_age_ms = d.reused_age_ms};
		struct vmm_evict_result res;
		do {
			assert_int_equal(vmm_evict(g, &req, &res), 0);
			for (size_t r = 0; r < res.nr_runs; r++)
				for (uint64_t k = 0; k < runs[r].npages; k++) {
					uint64_t p = (runs[r].gpa >> VMM_PAGE_SHIFT) + k;
					if (p >= KV_SERVER && p < KV_SERVER + KV_HOT)
						out->hot_taken++;
					else if (p >= KV_SERVER + KV_HOT &&
						 p < KV_SERVER + KV_STORE)
						out->cold_taken++;
				}
			req.max_pages -=
			    res.evicted_pages < req.max_pages ? res.evicted_pages : req.max_pages;
		} while (res.nr_runs == 256 && req.max_pages);
		if (!out->first_return_ms && out->cold_taken >= KV_STORE / 5)
			out->first_return_ms = now - load_end;
	}
	vmm_guest_free(g);
}

static void test_first_comebacks_once(void **state)
{
	struct kv_run now, before;

	(void)state;
	kv_run(60000, &now);
	kv_run(0, &before);
	print_message("kv: first comebacks over the last minute: first return %llu s after the "
		      "load, %llu cold and %llu hot pages taken, %llu refaults; over the reuse "
		      "window: %llu s, %llu, %llu, %llu\n",
		      (unsigned long long)now.first_return_ms / 1000,
		      (unsigned long long)now.cold_taken, (unsigned long long)now.hot_taken,
		      (unsigned long long)now.refaults,
		      (unsigned long long)before.first_return_ms / 1000,
		      (unsigned long long)before.cold_taken, (unsigned long long)before.hot_taken,
		      (unsigned long long)before.refaults);
	/* The store goes within two minutes of the load, all of its cold part by the end, and
	 * the hot pages stay: what they refault is within the budget (0.2% of the guest a
	 * minute: 33 pages a minute here, 300 over the nine minutes after the load). */
	assert_true(now.first_return_ms > 0 && now.first_return_ms <= 120000);
	assert_int_equal(now.cold_taken, KV_STORE - KV_HOT);
	assert_true(now.hot_taken <= KV_HOT / 20);
	assert_true(now.refaults <= 300);
	/* Counted over the reuse window, the first comebacks of the hot pages' first reads
	 * held it past two minutes. */
	assert_true(before.first_return_ms == 0 || before.first_return_ms > 120000);
}

static void test_bad_args(void **state)
{
	struct rig r;
	struct vmm_decide_in in = {0};
	struct vmm_decision d;

	(void)state;
	rig_init(&r);
	assert_int_equal(vmm_decide(NULL, &r.ctl, &in, &d), -EINVAL);
	assert_int_equal(vmm_decide(r.g, NULL, &in, &d), -EINVAL);
	assert_int_equal(vmm_decide(r.g, &r.ctl, NULL, &d), -EINVAL);
	assert_int_equal(vmm_decide(r.g, &r.ctl, &in, NULL), -EINVAL);
	assert_string_equal(vmm_decide_gate_name((enum vmm_decide_gate)99), "?");
	rig_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_watch_learn_take),
	    cmocka_unit_test(test_fixed_age_and_squeeze),
	    cmocka_unit_test(test_echo_is_not_reuse),
	    cmocka_unit_test(test_config_fit),
	    cmocka_unit_test(test_hold_for_all_takers),
	    cmocka_unit_test(test_weighing),
	    cmocka_unit_test(test_weighing_step),
	    cmocka_unit_test(test_first_comebacks_once),
	    cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
