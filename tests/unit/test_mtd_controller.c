// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_controller.c - memtided's per-VM target math and safety rules (host/decide/controller.c).
 *
 * Each test drives mtd_ctl_step with measured inputs and checks one rule: slow, bounded
 * inflation; deflation at once on pressure, need, silence, exit; the floor and the ceiling;
 * the post-deflate hold and its backoff when the guest keeps refusing steps; the arbiter's
 * squeeze; return=reclaim (the balloon a cap, the agent asked to reclaim down to the
 * target) and its fallbacks.  A randomized run checks the
 * invariants over many steps with arbitrary inputs, in both return modes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decide/controller.h"
#include "decide/tick_decide.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static struct mtd_ctl_config cfg;
static struct mtd_policy pol;

static void setup_defaults(void)
{
	mtd_ctl_config_default(&cfg);
	pol = (struct mtd_policy){
	    .enabled = true,
	    .min_bytes = 256 * MiB,
	    .max_bytes = 0,
	    .priority = 100,
	    .target_refault_per_min = 0.002,
	    .headroom_bytes = 128 * MiB,
	};
}

static struct mtd_ctl_input calm(uint64_t now_ms, uint64_t actual, uint64_t wss)
{
	return (struct mtd_ctl_input){
	    .now_ms = now_ms,
	    .domain_bytes = 2 * GiB,
	    .actual_bytes = actual,
	    .wss_valid = true,
	    .wss_bytes = wss,
	    .inputs_fresh = true,
	    .avail_known = true,
	    .guest_avail_bytes = 1 * GiB,
	    .psi_known = true,
	    .psi_some_avg10 = 0.0,
	};
}

/* calm(), from a guest whose agent can reclaim and that has avail bytes available. */
static struct mtd_ctl_input reclaiming(uint64_t now_ms, uint64_t actual, uint64_t wss,
				       uint64_t avail)
{
	struct mtd_ctl_input in = calm(now_ms, actual, wss);

	in.can_reclaim = true;
	in.guest_avail_bytes = avail;
	return in;
}

static void test_inflate_is_slow_and_stops_at_wss_plus_headroom(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000, target = 2 * GiB;
	(void)state;
	setup_defaults();

	for (int i = 0; i < 40; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, target, 512 * MiB);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.target_bytes <= target);
		assert_true(target - out.target_bytes <= cfg.max_inflate_step_bytes);
		if (out.target_bytes < target) {
			assert_int_equal(out.reason, MTD_CTL_INFLATE);
			assert_int_equal(out.reclaim_bytes, target - out.target_bytes);
			assert_true(out.changed);
		}
		target = out.target_bytes;
	}
	/* 2 GiB -> 640 MiB in 128 MiB steps: eleven steps, then steady at wss + headroom. */
	assert_int_equal(target, 512 * MiB + 128 * MiB);
	assert_int_equal(out.reason, MTD_CTL_STEADY);
	assert_int_equal(out.reclaim_bytes, 0);
}

static void test_never_below_floor(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000, target = 1 * GiB;
	(void)state;
	setup_defaults();
	pol.min_bytes = 700 * MiB;

	for (int i = 0; i < 20; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, target, 4 * MiB);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.target_bytes >= 700 * MiB);
		target = out.target_bytes;
	}
	assert_int_equal(target, 700 * MiB);
	assert_int_equal(out.floor_bytes, 700 * MiB);
}

static void test_pressure_deflates_at_once_then_holds(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 640 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(100000, 640 * MiB, 512 * MiB);
	in.psi_some_avg10 = cfg.psi_some_avg10_high + 1.0;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.state, MTD_VM_DEFLATING);
	assert_int_equal(out.target_bytes, 640 * MiB + cfg.deflate_min_bytes);
	assert_true(out.changed);

	/* Calm again, estimate still low: no inflation while the hold lasts. */
	uint64_t t = 100000 + cfg.interval_ms;
	for (; t < 100000 + cfg.hold_after_deflate_ms; t += cfg.interval_ms) {
		in = calm(t, out.target_bytes, 512 * MiB);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.target_bytes, 640 * MiB + cfg.deflate_min_bytes);
		assert_int_equal(out.reason, MTD_CTL_HOLD_COOLDOWN);
	}
	in = calm(t, out.target_bytes, 512 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_int_equal(out.target_bytes, 640 * MiB + cfg.deflate_min_bytes - 128 * MiB);
}

/* One report, one answer: the same figures again (a dead agent's last report stays fresh
 * for agent_silence) are not pressure a second time; a new report showing it is. */
static void test_pressure_answered_once_per_report(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 262 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(100000, 262 * MiB, 137 * MiB);
	in.psi_some_avg10 = cfg.psi_some_avg10_high + 5.0;
	in.guest_avail_bytes = cfg.mem_available_low_bytes - 1;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.target_bytes, 518 * MiB);
	for (int i = 1; i <= 3; i++) {
		in.now_ms += cfg.interval_ms;
		in.actual_bytes = out.balloon_bytes;
		in.pressure_answered = true;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_not_equal(out.reason, MTD_CTL_PRESSURE);
		assert_int_equal(out.target_bytes, 518 * MiB);
	}
	in.now_ms += cfg.interval_ms;
	in.pressure_answered = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.target_bytes, 774 * MiB);
}

static void test_low_mem_available_deflates(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 1 * GiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(5000, 1 * GiB, 900 * MiB);
	in.psi_known = false;
	in.guest_avail_bytes = cfg.mem_available_low_bytes - 1;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.target_bytes, 1 * GiB + cfg.deflate_min_bytes);

	/* The same figure exactly at the mark is not pressure. */
	struct mtd_ctl_state st2 = {.primed = true, .target_bytes = 1 * GiB};
	in.guest_avail_bytes = cfg.mem_available_low_bytes;
	mtd_ctl_step(&cfg, &pol, &in, &st2, &out);
	assert_int_not_equal(out.reason, MTD_CTL_PRESSURE);
}

static void test_need_gives_need_plus_headroom(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 600 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(5000, 600 * MiB, 400 * MiB);
	in.need_bytes = 300 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_NEED);
	assert_int_equal(out.target_bytes, 600 * MiB + 300 * MiB + 128 * MiB);

	/* A need beyond the domain is capped at the ceiling. */
	in.need_bytes = 64 * GiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 2 * GiB);
}

/* Letting go keeps sizes: stale inputs (agent silent) or enabled=false leave the target and
 * the balloon where they are (handing every VM its maximum is what overcommits a host), but
 * a need or pressure the guest shows is still answered, by what it calls for. */
static void test_silence_and_disabled_keep_size(void **state)
{
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();
	pol.max_bytes = 1536 * MiB; /* the ceiling is the policy max, below the domain */

	struct mtd_ctl_state st = {
	    .primed = true, .target_bytes = 700 * MiB, .balloon_bytes = 700 * MiB};
	struct mtd_ctl_input in = calm(5000, 700 * MiB, 400 * MiB);
	in.inputs_fresh = false;
	in.avail_known = in.psi_known = false; /* nothing is known about the guest */
	for (int i = 0; i < 10; i++, in.now_ms += cfg.interval_ms) {
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_SILENT);
		assert_int_equal(out.state, MTD_VM_AGENT_SILENT);
		assert_int_equal(out.target_bytes, 700 * MiB);
		assert_int_equal(out.balloon_bytes, 700 * MiB);
		assert_false(out.changed);
		assert_int_equal(out.reclaim_bytes, 0);
	}
	/* A need while silent (the agent spoke once more) is answered. */
	in.need_bytes = 100 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_NEED);
	assert_int_equal(out.target_bytes, 700 * MiB + 100 * MiB + 128 * MiB);
	assert_int_equal(out.balloon_bytes, out.target_bytes);

	/* enabled=false: kept, never inflated, pressure still answered. */
	st = (struct mtd_ctl_state){
	    .primed = true, .target_bytes = 700 * MiB, .balloon_bytes = 700 * MiB};
	pol.enabled = false;
	in = calm(5000, 700 * MiB, 100 * MiB);
	for (int i = 0; i < 10; i++, in.now_ms += cfg.interval_ms) {
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_DISABLED);
		assert_int_equal(out.state, MTD_VM_DISABLED);
		assert_int_equal(out.target_bytes, 700 * MiB);
		assert_int_equal(out.balloon_bytes, 700 * MiB);
		assert_int_equal(out.reclaim_bytes, 0);
	}
	in.psi_some_avg10 = 50.0;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.target_bytes, 700 * MiB + cfg.deflate_min_bytes);
	assert_int_equal(mtd_ctl_safe_bytes(&pol, 2 * GiB), 1536 * MiB);
}

/* return=reclaim with the balloon below the ceiling (a squeeze ended, or a restarted
 * memtided found it there): the cap does not rise by itself, only with the target (need,
 * growth); and while the agent is silent it does not come down either. */
static void test_reclaim_mode_cap_rises_only_with_need(void **state)
{
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_RECLAIM;

	struct mtd_ctl_state st = {
	    .primed = true, .target_bytes = 640 * MiB, .balloon_bytes = 1 * GiB};
	struct mtd_ctl_input in = reclaiming(1000, 1 * GiB, 512 * MiB, 1 * GiB);
	in.used_known = true;
	in.guest_used_bytes = 600 * MiB;
	for (int i = 0; i < 10; i++, in.now_ms += cfg.interval_ms) {
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.soft);
		assert_int_equal(out.balloon_bytes, 1 * GiB);
	}
	in.need_bytes = 512 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_NEED);
	assert_int_equal(out.target_bytes, 1 * GiB + 512 * MiB + 128 * MiB);
	assert_int_equal(out.balloon_bytes, out.target_bytes);

	/* Silent at the ceiling with a target far below: the balloon stays at the ceiling. */
	st = (struct mtd_ctl_state){
	    .primed = true, .target_bytes = 640 * MiB, .balloon_bytes = 2 * GiB};
	in = calm(1000, 2 * GiB, 512 * MiB);
	in.inputs_fresh = false;
	in.avail_known = in.psi_known = false;
	for (int i = 0; i < 10; i++, in.now_ms += cfg.interval_ms) {
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.balloon_bytes, 2 * GiB);
		assert_int_equal(out.reclaim_bytes, 0);
	}
}

/* A balloon still inflating when the agent goes silent stops where it is: the target it was
 * heading for was decided on reports now stale, and a slow balloon (4-15 MiB/s on a nested
 * KVM guest) went on squeezing the guest toward it for a minute after its agent died
 * (scenario 5 on the KVM stand: 977 MiB at the kill, 847 at the silence, on to 636).  The
 * balloon and the target rise to the balloon's actual size, once, and hold there; a guest
 * silent since the start (or since a resume) has nothing in flight of our doing: untouched. */
static void test_silence_stops_an_inflation_in_flight(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000;
	(void)state;
	setup_defaults();

	/* Fresh: stepping down from 2 GiB, the balloon (actual) lagging one step behind. */
	uint64_t actual = 2 * GiB;
	for (int i = 0; i < 3; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, actual, 256 * MiB);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_INFLATE);
		assert_int_equal(out.stopped_from_bytes, 0);
	}
	uint64_t heading = out.balloon_bytes; /* 2 GiB - 3 steps */
	assert_int_equal(heading, 2 * GiB - 3 * cfg.max_inflate_step_bytes);
	actual = heading + 200 * MiB; /* still on its way */

	struct mtd_ctl_input in = calm(now, actual, 256 * MiB);
	in.inputs_fresh = false;
	in.avail_known = in.psi_known = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_SILENT);
	assert_int_equal(out.stopped_from_bytes, heading);
	assert_int_equal(out.balloon_bytes, actual);
	assert_int_equal(out.target_bytes, actual);
	assert_true(out.changed); /* sent at once */
	assert_int_equal(out.reclaim_bytes, 0);
	assert_int_equal(st.hold_until_ms, 0); /* not a refusal by the guest: no hold armed */

	/* Held there while the silence lasts, said once; the balloon's actual settling a page
	 * or two around it (a stop lands between two of the driver's batches) moves nothing. */
	for (int i = 0; i < 10; i++) {
		in.now_ms += cfg.interval_ms;
		in.actual_bytes = actual - (uint64_t)(i % 2) * 4096;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_SILENT);
		assert_int_equal(out.stopped_from_bytes, 0);
		assert_int_equal(out.balloon_bytes, actual);
		assert_false(out.changed);
	}
	/* The agent back: stepping down again from where the balloon stopped, one step. */
	in = calm(in.now_ms + cfg.interval_ms, actual, 256 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_int_equal(out.balloon_bytes, actual - cfg.max_inflate_step_bytes);

	/* Within min_change of the target the balloon has arrived: nothing to stop. */
	st = (struct mtd_ctl_state){.primed = true,
				    .target_bytes = 700 * MiB,
				    .balloon_bytes = 700 * MiB,
				    .was_fresh = true};
	in = calm(now, 700 * MiB + cfg.min_change_bytes - 4096, 256 * MiB);
	in.inputs_fresh = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.stopped_from_bytes, 0);
	assert_int_equal(out.balloon_bytes, 700 * MiB);

	/* Silent since a resume (was_fresh false): the resumed target stands. */
	st = (struct mtd_ctl_state){
	    .primed = true, .target_bytes = 700 * MiB, .balloon_bytes = 700 * MiB};
	in = calm(now, 900 * MiB, 256 * MiB);
	in.inputs_fresh = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.stopped_from_bytes, 0);
	assert_int_equal(out.balloon_bytes, 700 * MiB);

	/* Never above the ceiling: an operator's lowered max still cuts. */
	pol.max_bytes = 800 * MiB;
	st = (struct mtd_ctl_state){.primed = true,
				    .target_bytes = 600 * MiB,
				    .balloon_bytes = 600 * MiB,
				    .was_fresh = true};
	in = calm(now, 1000 * MiB, 256 * MiB);
	in.inputs_fresh = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.stopped_from_bytes, 600 * MiB);
	assert_int_equal(out.balloon_bytes, 800 * MiB);
}

/* Silence at the safe size (start-up, before the agent speaks) gives nothing back, so it
 * must not hold inflation back once the agent is heard. */
static void test_silence_at_ceiling_does_not_hold(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(1000, 2 * GiB, 512 * MiB);
	in.inputs_fresh = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_SILENT);
	assert_int_equal(out.target_bytes, 2 * GiB);
	in = calm(1000 + cfg.interval_ms, 2 * GiB, 512 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_int_equal(out.target_bytes, 2 * GiB - cfg.max_inflate_step_bytes);
}

static void test_growth_is_given_back_at_once(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 600 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(5000, 600 * MiB, 1 * GiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(out.target_bytes, 1 * GiB + 128 * MiB);

	/* An estimate that drifts up by less than min_change is noise: no deflate, no hold, no
	 * refusal counted (scenario 5 saw 0.3 MiB a tick from a quiet agent's stale figures). */
	struct mtd_ctl_state st2 = {.primed = true,
				    .target_bytes = 600 * MiB + 128 * MiB,
				    .balloon_bytes = 600 * MiB + 128 * MiB,
				    .last_take_ms = 4000};
	in = calm(5000, 600 * MiB + 128 * MiB, 600 * MiB + cfg.min_change_bytes - 1);
	mtd_ctl_step(&cfg, &pol, &in, &st2, &out);
	assert_int_not_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(out.target_bytes, 600 * MiB + 128 * MiB);
	assert_int_equal(st2.refusals, 0);
	assert_int_equal(st2.hold_until_ms, 0);
	in.wss_bytes = 600 * MiB + cfg.min_change_bytes;
	mtd_ctl_step(&cfg, &pol, &in, &st2, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(out.target_bytes, 600 * MiB + 128 * MiB + cfg.min_change_bytes);
}

/* The balloon sizes the guest's RAM; the working set and headroom are in MemTotal's terms.
 * Under return=balloon the RAM the guest's kernel holds outside MemTotal comes on top of the
 * target; under return=reclaim, whose target is compared with the guest's use, it does not. */
static void test_balloon_target_adds_the_kernels_ram(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 600 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	pol.return_via = MTD_RETURN_BALLOON;
	struct mtd_ctl_input in = calm(5000, 600 * MiB, 1 * GiB);
	in.guest_reserved_bytes = 36 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(out.target_bytes, 1 * GiB + 128 * MiB + 36 * MiB);

	struct mtd_ctl_state st2 = {.primed = true, .target_bytes = 600 * MiB};
	pol.return_via = MTD_RETURN_RECLAIM;
	mtd_ctl_step(&cfg, &pol, &in, &st2, &out);
	assert_int_equal(out.target_bytes, 1 * GiB + 128 * MiB);

	/* The reading: actual less MemTotal, the least kept, nothing over a quarter of RAM */
	assert_int_equal(mtd_ctl_reserved_note(0, 262 * MiB, 226 * MiB, 1 * GiB), 36 * MiB);
	assert_int_equal(mtd_ctl_reserved_note(36 * MiB, 400 * MiB, 300 * MiB, 1 * GiB), 36 * MiB);
	assert_int_equal(mtd_ctl_reserved_note(36 * MiB, 300 * MiB, 270 * MiB, 1 * GiB), 30 * MiB);
	assert_int_equal(mtd_ctl_reserved_note(0, 1 * GiB, 500 * MiB, 1 * GiB), 0);
	assert_int_equal(mtd_ctl_reserved_note(30 * MiB, 200 * MiB, 300 * MiB, 1 * GiB), 30 * MiB);
}

static void test_no_estimate_keeps_target(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(5000, 1 * GiB, 0);
	in.wss_valid = false;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_NO_ESTIMATE);
	assert_int_equal(out.target_bytes, 1 * GiB); /* primed from actual */
}

static void test_squeeze_takes_headroom_and_doubles_step(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 2 * GiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	struct mtd_ctl_input in = calm(5000, 2 * GiB, 512 * MiB);
	in.squeeze = 1.0;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 2 * GiB - 2 * cfg.max_inflate_step_bytes);
	for (int i = 0; i < 20; i++) {
		in = calm(5000 + (uint64_t)(i + 1) * cfg.interval_ms, out.target_bytes, 512 * MiB);
		in.squeeze = 1.0;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	}
	assert_int_equal(out.target_bytes, 512 * MiB); /* no headroom left */
}

static void test_config_validation(void **state)
{
	char err[160];
	(void)state;
	setup_defaults();
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), 0);
	cfg.interval_ms = 10;
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "interval"));
	setup_defaults();
	cfg.agent_silence_ms = cfg.interval_ms - 1;
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	setup_defaults();
	cfg.psi_some_avg10_high = 0.0;
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	setup_defaults();
	cfg.hold_max_ms = 25ULL * 3600 * 1000;
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "hold_max"));
	/* hold_max under hold_after_deflate is valid: it turns the backoff off. */
	setup_defaults();
	cfg.hold_max_ms = cfg.hold_after_deflate_ms / 2;
	assert_int_equal(mtd_ctl_config_validate(&cfg, err, sizeof(err)), 0);
}

/*
 * A guest whose working set the estimate misses: it says it needs memory (the agent's
 * need) whenever its target falls under `real`, while the estimate keeps saying `wss`.
 * Runs `seconds` of 1 s intervals from *now and records when each refused step was taken
 * (the step down that a need followed) and the longest hold reported.
 */
struct refusing_guest {
	uint64_t real, wss;
	uint64_t took_ms[64];
	unsigned nr_took;
	uint64_t max_backoff_ms;
};

static void run_refusing_guest(struct refusing_guest *g, struct mtd_ctl_state *st, uint64_t *now,
			       uint64_t seconds)
{
	struct mtd_ctl_output out = {0};
	uint64_t target = st->target_bytes;

	for (uint64_t i = 0; i < seconds; i++, *now += 1000) {
		struct mtd_ctl_input in = calm(*now, target, g->wss);
		if (target < g->real)
			in.need_bytes = g->real - target;
		mtd_ctl_step(&cfg, &pol, &in, st, &out);
		if (out.reason == MTD_CTL_INFLATE && out.target_bytes < g->real && g->nr_took < 64)
			g->took_ms[g->nr_took++] = *now;
		if (out.backoff_hold_ms > g->max_backoff_ms)
			g->max_backoff_ms = out.backoff_hold_ms;
		target = out.target_bytes;
	}
}

/* Each step the guest gives back at once doubles the hold, up to hold_max: probed every few
 * minutes, not squeezed every 30 s. */
static void test_refused_steps_back_off(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 768 * MiB};
	struct refusing_guest g = {.real = 700 * MiB, .wss = 487 * MiB};
	uint64_t now = 1000;
	(void)state;
	setup_defaults();
	cfg.interval_ms = 1000;

	run_refusing_guest(&g, &st, &now, 1800);
	/* Without the backoff: one refused step per 31 s, 58 in 30 min.  With it: the gaps
	 * after the first are 60, 120, 240, 480, 480, ... s (plus the interval the need takes). */
	assert_in_range(g.nr_took, 5, 8);
	for (unsigned i = 1; i + 1 < g.nr_took; i++) {
		uint64_t gap = g.took_ms[i + 1] - g.took_ms[i];
		uint64_t want = cfg.hold_after_deflate_ms << (i + 1 < 5 ? i + 1 : 4);
		if (want > cfg.hold_max_ms)
			want = cfg.hold_max_ms;
		assert_in_range(gap, want, want + 2000);
	}
	assert_int_equal(g.max_backoff_ms, cfg.hold_max_ms);
	assert_true(st.refusals >= 4);
}

/* A step that stands a whole hold ends the run of refusals: the next refusal holds 60 s, not
 * 8 min.  A deflate long after the last step (the guest grew by itself) starts over too. */
static void test_accepted_step_or_late_growth_ends_backoff(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 768 * MiB};
	struct refusing_guest g = {.real = 700 * MiB, .wss = 487 * MiB};
	struct mtd_ctl_output out;
	uint64_t now = 1000;
	(void)state;
	setup_defaults();
	cfg.interval_ms = 1000;

	run_refusing_guest(&g, &st, &now, 600);
	assert_true(st.refusals >= 3);
	/* The guest's real need falls under the estimate: the next step stands. */
	g.real = 400 * MiB;
	g.nr_took = 0;
	run_refusing_guest(&g, &st, &now, 900);
	assert_int_equal(st.target_bytes, 487 * MiB + 128 * MiB);
	/* Now the real need is back above: one refusal after an accepted step holds 60 s. */
	g.real = 700 * MiB;
	g.wss = 300 * MiB;
	g.max_backoff_ms = 0;
	run_refusing_guest(&g, &st, &now, 40);
	assert_int_equal(st.refusals, 1);
	assert_int_equal(g.max_backoff_ms, 2 * cfg.hold_after_deflate_ms);

	/* Growth long after the last step: not a refusal, the run starts over. */
	now += cfg.hold_after_deflate_ms * 20;
	struct mtd_ctl_input in = calm(now, st.target_bytes, 1 * GiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(st.refusals, 0);
	assert_int_equal(out.backoff_hold_ms, 0);
	assert_int_equal(st.hold_until_ms, now + cfg.hold_after_deflate_ms);
}

/* A need and then pressure after the same step are one refusal; hold_max under the base hold
 * turns the backoff off. */
static void test_one_refusal_per_step_and_backoff_off(void **state)
{
	struct mtd_ctl_state st = {.primed = true, .target_bytes = 768 * MiB};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();
	cfg.interval_ms = 1000;

	struct mtd_ctl_input in = calm(1000, 768 * MiB, 487 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	in = calm(2000, out.target_bytes, 487 * MiB);
	in.need_bytes = 64 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(st.refusals, 1);
	in = calm(3000, out.target_bytes, 487 * MiB);
	in.guest_avail_bytes = cfg.mem_available_low_bytes - 1;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(st.refusals, 1);
	assert_int_equal(out.backoff_hold_ms, 0); /* said once, with the need */
	assert_int_equal(st.hold_until_ms, 3000 + 2 * cfg.hold_after_deflate_ms);

	struct mtd_ctl_state st2 = {.primed = true, .target_bytes = 768 * MiB};
	struct refusing_guest g = {.real = 700 * MiB, .wss = 487 * MiB};
	uint64_t now = 1000;
	cfg.hold_max_ms = 0;
	run_refusing_guest(&g, &st2, &now, 600);
	assert_int_equal(g.max_backoff_ms, 0);
	assert_in_range(g.nr_took, 18, 20); /* one per 31 s */
}

/* Arbitrary inputs, many steps: the invariants hold every time. */
/* An operator lowers max below the current target: the balloon goes there in this step, in
 * one move (a cap, not a suggestion), and the agent is asked to free the cut first.  Lifting
 * the cap takes nothing by itself; the guest's pressure then gets memory back at once. */
static void test_lowered_max_cuts_now_with_reclaim(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	struct mtd_ctl_input in = calm(1000, 2 * GiB, 2 * GiB);
	(void)state;
	setup_defaults();

	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 2 * GiB); /* the working set fills the domain */
	pol.max_bytes = 768 * MiB;
	in.now_ms += cfg.interval_ms;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 768 * MiB);
	assert_true(out.changed);
	assert_int_equal(out.reclaim_bytes, 2 * GiB - 768 * MiB);

	/* Capped, under pressure: the cap holds, nothing more is asked. */
	in = calm(in.now_ms + cfg.interval_ms, 768 * MiB, 2 * GiB);
	in.psi_some_avg10 = 40.0;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 768 * MiB);
	assert_int_equal(out.reclaim_bytes, 0);
	/* The cap lifted, still under pressure: memory back now. */
	pol.max_bytes = 0;
	in.now_ms += cfg.interval_ms;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_PRESSURE);
	assert_int_equal(out.target_bytes, 768 * MiB + cfg.deflate_min_bytes);
	assert_true(out.changed);
	assert_int_equal(out.reclaim_bytes, 0);
}

/* return=reclaim: the target steps down as with the balloon, but the balloon stays at the
 * ceiling and the agent is asked for what the guest uses beyond the target, a step at most. */
static void test_reclaim_mode_keeps_balloon_at_ceiling(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000, target = 2 * GiB;
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_RECLAIM;

	for (int i = 0; i < 40; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, 2 * GiB, 512 * MiB);
		in.can_reclaim = true;
		in.used_known = true;
		in.guest_used_bytes = 1536 * MiB; /* the guest never frees anything */
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.soft);
		assert_int_equal(out.balloon_bytes, 2 * GiB);
		assert_false(out.changed);
		assert_true(target - out.target_bytes <= cfg.max_inflate_step_bytes);
		/* the step the target took, or the excess use if more, one step at most */
		uint64_t over = in.guest_used_bytes > out.target_bytes + cfg.min_change_bytes
				    ? in.guest_used_bytes - out.target_bytes
				    : 0;
		uint64_t cut = target - out.target_bytes, ask = over > cut ? over : cut;
		assert_int_equal(out.reclaim_bytes, ask < cfg.max_inflate_step_bytes
							? ask
							: cfg.max_inflate_step_bytes);
		target = out.target_bytes;
	}
	assert_int_equal(target, 640 * MiB);

	/* The guest got under its target: nothing more to ask. */
	struct mtd_ctl_input in = reclaiming(now, 2 * GiB, 512 * MiB, 1 * GiB);
	in.used_known = true;
	in.guest_used_bytes = 600 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reclaim_bytes, 0);

	/* A need: the target rises, nothing is reclaimed while giving back, nor in the hold. */
	in.now_ms += cfg.interval_ms;
	in.guest_used_bytes = 1536 * MiB;
	in.need_bytes = 256 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_NEED);
	assert_int_equal(out.reclaim_bytes, 0);
	assert_int_equal(out.balloon_bytes, 2 * GiB);
	in.need_bytes = 0;
	in.now_ms += cfg.interval_ms;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_HOLD_COOLDOWN);
	assert_int_equal(out.reclaim_bytes, 0);
}

/* A report outlives the balloon steps taken on it: an agent killed in the guest leaves its
 * last MemAvailable standing for agent_silence.  Read through mtd_ctl_avail_since_report, as
 * memtided reads it, the balloon takes the room that report shows once and waits for the
 * next; read raw, it took it again at every step (scenario 5: 448 -> 267 MiB on one stale
 * report, and the guest met pressure). */
static void test_stale_report_is_room_once(void **state)
{
	struct mtd_ctl_state st = {0}, raw = {0};
	struct mtd_ctl_output out, out_raw;
	struct mtd_ctl_input in = calm(1000, 1 * GiB, 64 * MiB);
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_BALLOON;
	in.can_reclaim = true;
	uint64_t balloon = 1 * GiB;

	for (int i = 0; i < 20; i++, in.now_ms += cfg.interval_ms) {
		struct mtd_ctl_input in_raw = in;
		in_raw.guest_avail_bytes = 400 * MiB;
		mtd_ctl_step(&cfg, &pol, &in_raw, &raw, &out_raw);
		in.guest_avail_bytes = mtd_ctl_avail_since_report(400 * MiB, 1 * GiB, balloon);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		balloon = out.balloon_bytes;
	}
	/* 400 MiB available, twice the 64 MiB mark kept: 272 MiB taken, then nothing */
	assert_int_equal(out.target_bytes, 256 * MiB);
	assert_int_equal(balloon, 1 * GiB - 272 * MiB);
	assert_int_equal(out_raw.balloon_bytes, 256 * MiB);
	/* the next report shows what the guest freed meanwhile: the balloon goes on */
	in.guest_avail_bytes = mtd_ctl_avail_since_report(300 * MiB, balloon, balloon);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.balloon_bytes < balloon);
	/* nothing taken since the report, or the balloon grew: the report stands as it is */
	assert_int_equal(mtd_ctl_avail_since_report(300 * MiB, 600 * MiB, 700 * MiB), 300 * MiB);
	assert_int_equal(mtd_ctl_avail_since_report(100 * MiB, 900 * MiB, 600 * MiB), 0);
}

/* The balloon is the cap: host pressure (squeeze) or a guest that cannot reclaim brings it
 * down from the ceiling, one step per interval, to the target; a lowered max at once. */
static void test_reclaim_mode_falls_back_to_balloon(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	struct mtd_ctl_input in = calm(1000, 2 * GiB, 512 * MiB);
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_RECLAIM;
	in.can_reclaim = true;
	in.used_known = true;
	in.guest_used_bytes = 700 * MiB;

	for (int i = 0; i < 20; i++, in.now_ms += cfg.interval_ms)
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.target_bytes, 640 * MiB);
	assert_int_equal(out.balloon_bytes, 2 * GiB);

	/* The agent loses its reclaim (or free page reporting goes off): the balloon steps. */
	in.can_reclaim = false;
	uint64_t balloon = 2 * GiB;
	for (int i = 0; i < 20; i++, in.now_ms += cfg.interval_ms) {
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_false(out.soft);
		assert_true(out.balloon_bytes >= out.target_bytes);
		assert_true(balloon - out.balloon_bytes <= cfg.max_inflate_step_bytes);
		/* what the balloon takes is asked of the guest first, as in balloon mode */
		assert_int_equal(out.reclaim_bytes, balloon - out.balloon_bytes);
		balloon = out.balloon_bytes;
	}
	assert_int_equal(balloon, 640 * MiB);

	/* Reclaim back: the balloon, now a cap again, stays where it is (raising it would let
	 * the guest fill memory nobody asked it to have); the guest's growth raises it. */
	in.can_reclaim = true;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.soft);
	assert_int_equal(out.balloon_bytes, 640 * MiB);
	assert_false(out.changed);
	in.now_ms += cfg.interval_ms;
	in.wss_bytes = 1 * GiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_int_equal(out.balloon_bytes, 1 * GiB + 128 * MiB);
	assert_true(out.changed);
	in.wss_bytes = 512 * MiB;

	/* Host pressure: squeezed VMs are capped by the balloon even when they could reclaim. */
	in.now_ms += cfg.interval_ms;
	in.squeeze = 0.5;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_false(out.soft);
	assert_true(out.balloon_bytes <= 1 * GiB + 128 * MiB);

	/* A lowered max cuts the balloon at once, in soft mode too. */
	in.squeeze = 0.0;
	in.now_ms += cfg.interval_ms;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.soft);
	assert_int_equal(out.balloon_bytes, 1 * GiB + 128 * MiB);
	pol.max_bytes = 1 * GiB;
	in.now_ms += cfg.interval_ms;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.soft);
	assert_int_equal(out.balloon_bytes, 1 * GiB);
	assert_true(out.changed);
}

/* libvmm's refault controller holds (no cold age vouched for): neither the balloon nor the
 * agent takes anything, mid-descent included; growth and pressure are still answered, a
 * host squeeze overrides the hold, and the steps resume once it ends. */
static void test_refault_hold_stops_every_taker(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000;
	(void)state;
	setup_defaults();

	/* Two steps down, then the hold: the balloon stays where it is, nothing is asked. */
	for (int i = 0; i < 2; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, 2 * GiB, 512 * MiB);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_INFLATE);
	}
	uint64_t held = out.balloon_bytes;
	assert_int_equal(held, 2 * GiB - 2 * cfg.max_inflate_step_bytes);
	for (int i = 0; i < 5; i++, now += cfg.interval_ms) {
		struct mtd_ctl_input in = calm(now, held, 512 * MiB);
		in.refault_hold = true;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_REFAULT_HOLD);
		assert_int_equal(out.balloon_bytes, held);
		assert_int_equal(out.target_bytes, held);
		assert_int_equal(out.reclaim_bytes, 0);
	}
	/* A balloon still stepping toward an older, lower target stops too. */
	struct mtd_ctl_state mid = {
	    .primed = true, .target_bytes = 1 * GiB, .balloon_bytes = 1536 * MiB};
	struct mtd_ctl_input in = calm(now, 1536 * MiB, 512 * MiB);
	in.refault_hold = true;
	mtd_ctl_step(&cfg, &pol, &in, &mid, &out);
	assert_int_equal(out.balloon_bytes, 1536 * MiB);
	assert_int_equal(out.reclaim_bytes, 0);
	/* With the agent's reclaim (return=reclaim): nothing is asked of the guest either. */
	pol.return_via = MTD_RETURN_RECLAIM;
	struct mtd_ctl_state soft = {0};
	in = calm(now, 2 * GiB, 512 * MiB);
	in.can_reclaim = in.used_known = true;
	in.guest_used_bytes = 1536 * MiB;
	in.refault_hold = true;
	mtd_ctl_step(&cfg, &pol, &in, &soft, &out);
	assert_int_equal(out.reason, MTD_CTL_REFAULT_HOLD);
	assert_int_equal(out.reclaim_bytes, 0);
	assert_int_equal(out.target_bytes, 2 * GiB);
	in.refault_hold = false;
	mtd_ctl_step(&cfg, &pol, &in, &soft, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_true(out.reclaim_bytes > 0);
	pol.return_via = MTD_RETURN_BALLOON;

	/* Growth is still given back at once under the hold. */
	in = calm(now, held, held);
	in.refault_hold = true;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_GROW);
	assert_true(out.balloon_bytes > held);
	/* A host squeeze comes first: the VM steps down again. */
	struct mtd_ctl_state sq = {
	    .primed = true, .target_bytes = 2 * GiB, .balloon_bytes = 2 * GiB};
	in = calm(now, 2 * GiB, 512 * MiB);
	in.refault_hold = true;
	in.squeeze = 0.5;
	mtd_ctl_step(&cfg, &pol, &in, &sq, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_true(out.balloon_bytes < 2 * GiB);
}

static void test_random_invariants(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 0, prev = 0;
	bool in_step = true; /* the balloon was at the target after the last step */
	(void)state;
	setup_defaults();
	srandom(42);

	for (int i = 0; i < 200000; i++) {
		now += (uint64_t)(random() % 10000);
		pol.min_bytes = (uint64_t)(random() % 4) * 256 * MiB;
		pol.max_bytes = random() % 3 ? 0 : (uint64_t)(1 + random() % 3) * GiB;
		pol.enabled = random() % 50 != 0;
		pol.return_via = random() % 2 ? MTD_RETURN_RECLAIM : MTD_RETURN_BALLOON;
		struct mtd_ctl_input in = {
		    .now_ms = now,
		    .domain_bytes = (uint64_t)(1 + random() % 4) * GiB,
		    .actual_bytes = (uint64_t)(random() % 4096) * MiB,
		    .wss_valid = random() % 10 != 0,
		    .wss_bytes = (uint64_t)(random() % 8192) * MiB,
		    .inputs_fresh = random() % 20 != 0,
		    .avail_known = random() % 2,
		    .guest_avail_bytes = (uint64_t)(random() % 1024) * MiB,
		    .psi_known = random() % 2,
		    .psi_some_avg10 = (double)(random() % 2000) / 100.0,
		    .need_bytes = random() % 30 ? 0 : (uint64_t)(random() % 1024) * MiB,
		    .squeeze = (double)(random() % 1500) / 1000.0 - 0.25,
		    .faults_known = random() % 3 == 0,
		    .major_faults_per_s = (double)(random() % 3000),
		    .released = random() % 50 == 0,
		    .release_grant_bytes = (uint64_t)(random() % 512) * MiB,
		    .used_known = random() % 4 != 0,
		    .guest_used_bytes = (uint64_t)(random() % 4096) * MiB,
		    .can_reclaim = random() % 4 != 0,
		    .refault_hold = random() % 8 == 0,
		};
		bool pressure =
		    (in.psi_known && in.psi_some_avg10 > cfg.psi_some_avg10_high) ||
		    (in.avail_known && in.guest_avail_bytes < cfg.mem_available_low_bytes) ||
		    (!in.psi_known && in.faults_known &&
		     in.major_faults_per_s > cfg.major_faults_high_per_s);
		bool age_held = in.refault_hold && in.squeeze <= 0.0;
		bool may_take = pol.enabled && in.inputs_fresh && !in.released && !age_held;
		uint64_t balloon_before = st.balloon_bytes;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.target_bytes >= out.floor_bytes);
		assert_true(out.target_bytes <= out.ceiling_bytes);
		uint64_t ceiling = mtd_ctl_safe_bytes(&pol, in.domain_bytes);
		assert_int_equal(out.ceiling_bytes, ceiling);
		uint64_t p = prev < out.floor_bytes     ? out.floor_bytes
			     : prev > out.ceiling_bytes ? out.ceiling_bytes
							: prev;
		/* Taken per step: at most twice the step (squeeze 1), never on pressure, never
		 * while disabled, silent or released. */
		if (i > 0 && out.target_bytes < p) {
			assert_true(p - out.target_bytes <= 2 * cfg.max_inflate_step_bytes);
			assert_false(pressure);
			assert_false(in.need_bytes);
			assert_true(may_take);
		}
		/* Letting go keeps the size: no need, no pressure, no release: nothing given. */
		/* (a refault hold still gives back what the estimate grew by: the size never
		 * shrinks under it) */
		bool kept = pol.enabled && in.inputs_fresh && !in.released;
		if (i > 0 && !may_take && kept && age_held)
			assert_true(out.target_bytes >= p);
		else if (i > 0 && out.stopped_from_bytes)
			/* (a silence stopping an inflation in flight: up to the balloon's actual) */
			assert_true(out.target_bytes >= p && out.balloon_bytes == out.target_bytes);
		else if (i > 0 && !may_take && !pressure && !in.need_bytes && !in.released)
			assert_int_equal(out.target_bytes, p);
		/* A release gives at most its grant (above what the balloon held). */
		uint64_t b = balloon_before < out.floor_bytes     ? out.floor_bytes
			     : balloon_before > out.ceiling_bytes ? out.ceiling_bytes
								  : balloon_before;
		if (i > 0 && in.released && !pressure && !in.need_bytes)
			assert_true(out.target_bytes <= (b > p ? b : p) + in.release_grant_bytes);
		/* The balloon: within the bounds, never under the target, the ceiling when
		 * soft, the target itself in balloon mode; the reclaim asked, a step at most. */
		assert_true(out.balloon_bytes >= out.target_bytes);
		assert_true(out.balloon_bytes <= out.ceiling_bytes);
		/* Never lowered while the controller may not take, nor by itself when soft (the
		 * cap); only a lowered ceiling (b, clamped) cuts it. */
		if (i > 0 && (!may_take || out.soft))
			assert_true(out.balloon_bytes >= b);
		/* (after a switch from reclaim the balloon steps down to the target) */
		/* (unless the guest had no room for it: then the balloon follows its reclaim) */
		bool room_bound = in.avail_known && in.can_reclaim && !(in.squeeze > 0.0);
		if (pol.return_via == MTD_RETURN_BALLOON && in_step && !room_bound)
			assert_int_equal(out.balloon_bytes, out.target_bytes);
		in_step = !out.soft && out.balloon_bytes == out.target_bytes;
		/* (or what a lowered ceiling cut from the balloon at once) */
		uint64_t cut =
		    balloon_before > out.balloon_bytes ? balloon_before - out.balloon_bytes : 0;
		if (out.soft)
			assert_true(out.reclaim_bytes <= 2 * cfg.max_inflate_step_bytes ||
				    out.reclaim_bytes == cut);
		prev = out.target_bytes;
	}
}

/* A long interval raises agent_silence before the checks (--interval 60s used to be refused:
 * the 30 s default silence was checked against it first); a bad interval is still refused. */
static void test_any_interval_accepted(void **state)
{
	struct mtd_ctl_config c;
	char err[160];

	(void)state;
	mtd_ctl_config_default(&c);
	c.interval_ms = 60000;
	assert_int_equal(mtd_ctl_config_validate(&c, err, sizeof(err)),
			 -EINVAL); /* the old order */
	assert_int_equal(mtd_ctl_config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.agent_silence_ms, 120000);
	c.interval_ms = 3600 * 1000;
	assert_int_equal(mtd_ctl_config_finish(&c, err, sizeof(err)), 0);
	mtd_ctl_config_default(&c);
	c.interval_ms = 1000; /* short intervals keep the configured silence */
	assert_int_equal(mtd_ctl_config_finish(&c, err, sizeof(err)), 0);
	assert_int_equal(c.agent_silence_ms, 30000);
	c.interval_ms = 50;
	assert_int_equal(mtd_ctl_config_finish(&c, err, sizeof(err)), -EINVAL);
	c.interval_ms = 3601 * 1000;
	assert_int_equal(mtd_ctl_config_finish(&c, err, sizeof(err)), -EINVAL);
}

/* Balloon mode with a guest that can reclaim: the balloon takes only what the guest has room
 * for (MemAvailable above twice its mark), the guest is asked to free the whole step, and the
 * balloon follows once it has.  Under a host squeeze the balloon takes its step. */
static void test_balloon_follows_the_guests_reclaim(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000;
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_BALLOON;

	/* settle at 2 GiB first */
	struct mtd_ctl_input in = reclaiming(now, 2 * GiB, 2 * GiB, 1 * GiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	now += cfg.interval_ms;
	/* the working set is 512 MiB; the guest has 150 MiB available: room for 22 */
	in = reclaiming(now, 2 * GiB, 512 * MiB, 150 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_int_equal(out.target_bytes, 2 * GiB - cfg.max_inflate_step_bytes);
	assert_int_equal(out.balloon_bytes,
			 2 * GiB - (150 * MiB - 2 * cfg.mem_available_low_bytes));
	assert_int_equal(out.reclaim_bytes, cfg.max_inflate_step_bytes);
	/* the guest freed it: the balloon takes a whole step again, and reaches the target
	 * (which took its own next step) an interval later */
	uint64_t before = out.balloon_bytes;
	now += cfg.interval_ms;
	in = reclaiming(now, before, 512 * MiB, 1 * GiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.balloon_bytes, before - cfg.max_inflate_step_bytes);
	assert_true(out.target_bytes < out.balloon_bytes);
	now += cfg.interval_ms;
	in = reclaiming(now, out.balloon_bytes, 512 * MiB, 1 * GiB);
	pol.min_bytes = out.target_bytes; /* no further step: the balloon meets the target */
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.balloon_bytes, out.target_bytes);
	pol.min_bytes = 256 * MiB;
	/* no room at all: the balloon stays, the guest is asked to free the step */
	uint64_t at = out.balloon_bytes;
	now += cfg.interval_ms;
	in = reclaiming(now, at, 512 * MiB, 100 * MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.balloon_bytes, at);
	assert_true(out.target_bytes < at);
	assert_int_equal(out.reclaim_bytes, at - out.target_bytes);
	/* under a host squeeze the balloon takes its step, room or not */
	now += cfg.interval_ms;
	in = reclaiming(now, at, 512 * MiB, 100 * MiB);
	in.squeeze = 0.5;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.balloon_bytes < at);
	/* MemAvailable in KiB (as /proc/meminfo gives it): the step is whole MiB, so the
	 * balloon's target stays on a MiB from a MiB (QEMU and the log then read one figure) */
	at = out.balloon_bytes;
	assert_int_equal(at % MiB, 0);
	now += cfg.interval_ms;
	in = reclaiming(now, at, 512 * MiB, 150 * MiB + 3 * 1024);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_true(out.balloon_bytes < at);
	assert_int_equal(out.balloon_bytes % MiB, 0);
	assert_int_equal(out.balloon_bytes, at - (150 * MiB - 2 * cfg.mem_available_low_bytes));
}

/* Balloon mode, and the guest's last reclaim freed nothing (futile): the balloon still takes
 * only what the guest has room for.  Taking the whole step anyway left a slowly reclaiming
 * guest (KVM) with 31 MiB available within 2 s, and the pressure answer gave everything back. */
static void test_balloon_room_holds_after_a_futile_reclaim(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	uint64_t now = 1000;
	(void)state;
	setup_defaults();
	pol.return_via = MTD_RETURN_BALLOON;

	struct mtd_ctl_input in = reclaiming(now, 2 * GiB, 2 * GiB, 1 * GiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	now += cfg.interval_ms;
	in = reclaiming(now, 2 * GiB, 512 * MiB, 150 * MiB);
	in.reclaim_futile = true;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_INFLATE);
	assert_true(out.target_bytes < 2 * GiB);
	assert_int_equal(out.balloon_bytes,
			 2 * GiB - (150 * MiB - 2 * cfg.mem_available_low_bytes));
	/* not asked again: the guest could not free the last request */
	assert_int_equal(out.reclaim_bytes, 0);
	/* room for less than min_change: no step (it would not be sent to QEMU, and the
	 * controller would hold a balloon the guest does not have) */
	uint64_t at = out.balloon_bytes;
	now += cfg.interval_ms;
	in = reclaiming(now, at, 512 * MiB,
			2 * cfg.mem_available_low_bytes + cfg.min_change_bytes - MiB);
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.balloon_bytes, at);
	assert_false(out.changed);
	/* no room: the balloon stays */
	now += cfg.interval_ms;
	in = reclaiming(now, at, 512 * MiB, 2 * cfg.mem_available_low_bytes);
	in.reclaim_futile = true;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.balloon_bytes, at);
}

/* The "silent" line says how long the agent has really been silent, and that its link went
 * down when it did; never the configured agent_silence.  On a KVM host a QEMU that exited
 * closed the agent's stream and the VM went silent in the same tick: the line said "for 30
 * s" of an agent heard 0.6 s before. */
static void test_silence_said_as_it_is(void **state)
{
	struct mtd_tick t = {.now_ms = 100000, .agent_up = false, .agent_heard_ms = 99400};
	char buf[96];
	(void)state;

	mtd_decide_silence_why(&t, buf, sizeof(buf));
	assert_string_equal(buf, "for 0 s (its agent disconnected)");
	t.agent_up = true;
	t.agent_heard_ms = 100000 - 31500;
	mtd_decide_silence_why(&t, buf, sizeof(buf));
	assert_string_equal(buf, "for 31 s");
	t.agent_heard_ms = 0;
	mtd_decide_silence_why(&t, buf, sizeof(buf));
	assert_string_equal(buf, "(its agent never spoke)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inflate_is_slow_and_stops_at_wss_plus_headroom),
	    cmocka_unit_test(test_never_below_floor),
	    cmocka_unit_test(test_pressure_deflates_at_once_then_holds),
	    cmocka_unit_test(test_low_mem_available_deflates),
	    cmocka_unit_test(test_need_gives_need_plus_headroom),
	    cmocka_unit_test(test_silence_and_disabled_keep_size),
	    cmocka_unit_test(test_silence_said_as_it_is),
	    cmocka_unit_test(test_reclaim_mode_cap_rises_only_with_need),
	    cmocka_unit_test(test_silence_at_ceiling_does_not_hold),
	    cmocka_unit_test(test_silence_stops_an_inflation_in_flight),
	    cmocka_unit_test(test_growth_is_given_back_at_once),
	    cmocka_unit_test(test_balloon_target_adds_the_kernels_ram),
	    cmocka_unit_test(test_no_estimate_keeps_target),
	    cmocka_unit_test(test_squeeze_takes_headroom_and_doubles_step),
	    cmocka_unit_test(test_balloon_room_holds_after_a_futile_reclaim),
	    cmocka_unit_test(test_config_validation),
	    cmocka_unit_test(test_refused_steps_back_off),
	    cmocka_unit_test(test_accepted_step_or_late_growth_ends_backoff),
	    cmocka_unit_test(test_one_refusal_per_step_and_backoff_off),
	    cmocka_unit_test(test_lowered_max_cuts_now_with_reclaim),
	    cmocka_unit_test(test_reclaim_mode_keeps_balloon_at_ceiling),
	    cmocka_unit_test(test_reclaim_mode_falls_back_to_balloon),
	    cmocka_unit_test(test_stale_report_is_room_once),
	    cmocka_unit_test(test_pressure_answered_once_per_report),
	    cmocka_unit_test(test_random_invariants),
	    cmocka_unit_test(test_any_interval_accepted),
	    cmocka_unit_test(test_balloon_follows_the_guests_reclaim),
	    cmocka_unit_test(test_refault_hold_stops_every_taker),
	};
	return cmocka_run_group_tests_name("mtd_controller", tests, NULL, NULL);
}
