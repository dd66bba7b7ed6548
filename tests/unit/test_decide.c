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
 * do not floor the threshold where the same reuses observed do; bad arguments are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
	gc.nr_gens = VMM_MAX_NR_GENS; /* memtided's: ages to 70 s at 5 s rounds */
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
	for (int i = 0; i < 200 && !(d.gate == VMM_DECIDE_HOLD); i++) {
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

/* memtided's limits: a 5 s interval and 16 generations tell 70 s apart, no more. */
static void test_config_fit(void **state)
{
	struct vmm_reclaim_config c;

	(void)state;
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, VMM_MAX_NR_GENS, 5000);
	assert_int_equal(c.max_age_ms, vmm_gens_reach_ms(VMM_MAX_NR_GENS, 5000));
	assert_int_equal(c.initial_age_ms, c.max_age_ms); /* 2 min is past it: the longest */
	assert_int_equal(c.min_age_ms, 10000);
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, VMM_MAX_NR_GENS, 500); /* 7 s: under the 10 s minimum */
	assert_int_equal(c.min_age_ms, c.max_age_ms);
	vmm_reclaim_config_default(&c);
	vmm_reclaim_config_fit(&c, VMM_MAX_NR_GENS, 60000); /* room for the 2 min start */
	assert_int_equal(c.initial_age_ms, 120000);
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
	    cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
