// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_steady.c - the steady-guest rules (host/decide/steady.c) and how the controller keeps
 * them (host/decide/controller.c).
 *
 * growing: a guest loading its data at tens of MiB a second is growing after a few
 * readings, and stops being so within a few intervals of settling; a steady trickle never
 * is; a reading with no figures forgets the history.  futile: an answer that freed nothing
 * holds until the guest's use or working set moves, or hold_max passes; an answer that
 * freed most of what was asked is not futile.  The controller then takes no step while the
 * guest grows, asks nothing after a futile answer (return=reclaim takes no step either; the
 * balloon still does), and never asks for more than the estimate calls cold, a lowered
 * ceiling excepted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "decide/controller.h"
#include "decide/steady.h"
#include "vmm.h"

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
	};
}

static void test_growing_follows_the_load(void **state)
{
	struct mtd_steady s = {0};
	uint64_t now = 1000, used = 300 * MiB;
	int first = -1, settled = -1;
	(void)state;
	setup_defaults();

	/* Loading: 100 MiB per 5 s interval (20 MiB/s). */
	for (int i = 0; i < 8; i++, now += cfg.interval_ms, used += 100 * MiB)
		if (mtd_steady_growing(&s, &cfg, true, used, now) && first < 0)
			first = i;
	assert_true(first >= 1 && first <= 2); /* the second reading already shows it */
	/* Loaded: the use holds still; growth fades within a few intervals. */
	for (int i = 0; i < 10; i++, now += cfg.interval_ms)
		if (!mtd_steady_growing(&s, &cfg, true, used, now) && settled < 0)
			settled = i;
	assert_true(settled >= 1 && settled <= 5);

	/* A trickle of 2 MiB an interval (0.4 MiB/s) is never growth. */
	struct mtd_steady t = {0};
	for (int i = 0; i < 30; i++, now += cfg.interval_ms, used += 2 * MiB)
		assert_false(mtd_steady_growing(&t, &cfg, true, used, now));
	/* Falls (reclaim, frees) are not growth either. */
	for (int i = 0; i < 10; i++, now += cfg.interval_ms, used -= 50 * MiB)
		assert_false(mtd_steady_growing(&t, &cfg, true, used, now));

	/* No figures: the history is forgotten, and the next reading starts over. */
	for (int i = 0; i < 3; i++, now += cfg.interval_ms, used += 100 * MiB)
		(void)mtd_steady_growing(&s, &cfg, true, used, now);
	assert_true(mtd_steady_growing(&s, &cfg, true, used + 100 * MiB, now + cfg.interval_ms));
	assert_false(mtd_steady_growing(&s, &cfg, false, 0, now + 2 * cfg.interval_ms));
	assert_false(mtd_steady_growing(&s, &cfg, true, used + 4 * GiB, now + 3 * cfg.interval_ms));
}

static void test_futile_until_something_changes(void **state)
{
	struct mtd_steady s = {0};
	uint64_t now = 1000;
	char why[200];
	(void)state;
	setup_defaults();

	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	mtd_steady_reply(&s, &cfg, 128 * MiB, 0, PROTO_RECLAIM_PARTIAL, 300, 5000);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	mtd_steady_why(&s, &cfg, MTD_CTL_FUTILE, why, sizeof(why));
	assert_non_null(strstr(why, "freed 0 of 128 MiB"));
	assert_non_null(strstr(why, "partial"));
	/* Small drifts are not a change. */
	assert_true(mtd_steady_futile(&s, &cfg, 902 * MiB, 401 * MiB, now + 5000));
	/* The guest's use moved by min_change: asked again. */
	assert_false(
	    mtd_steady_futile(&s, &cfg, 900 * MiB + cfg.min_change_bytes, 400 * MiB, now + 10000));

	/* The working set moved. */
	mtd_steady_reply(&s, &cfg, 64 * MiB, 1 * MiB, PROTO_RECLAIM_DONE, 300, 5000);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 300 * MiB, now + 5000));

	/* Time alone: hold_max. */
	mtd_steady_reply(&s, &cfg, 64 * MiB, 0, PROTO_RECLAIM_FAILED, 10, 5000);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now + cfg.hold_max_ms - 1));
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now + cfg.hold_max_ms));

	/* Freed most of it, or asked for less than min_change and got half: not futile. */
	mtd_steady_reply(&s, &cfg, 128 * MiB, 100 * MiB, PROTO_RECLAIM_PARTIAL, 5000, 5000);
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	mtd_steady_reply(&s, &cfg, 2 * MiB, 1 * MiB, PROTO_RECLAIM_PARTIAL, 300, 5000);
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	mtd_steady_why(&s, &cfg, MTD_CTL_INFLATE, why, sizeof(why));
	assert_string_equal(why, "");
}

/* A guest that reclaims slowly (a KVM guest whose every swapped-out page costs a TLB
 * shootdown: 3-35 MiB per 2 s request on the KVM host stand) answers "partial" when its
 * deadline runs out.  That is slow, not futile: it is asked again at once.  A short partial
 * answer, or one that freed next to nothing in its whole deadline, is still futile. */
static void test_slow_is_not_futile(void **state)
{
	struct mtd_steady s = {0};
	uint64_t now = 1000;
	(void)state;
	setup_defaults();

	/* 3 of 128 MiB, 2.4 s into a 2 s deadline (the agent stops between chunks) */
	mtd_steady_reply(&s, &cfg, 128 * MiB, 3 * MiB, PROTO_RECLAIM_PARTIAL, 2400, 2000);
	assert_true(s.slow);
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	/* exactly at the deadline, one smallest chunk freed */
	mtd_steady_reply(&s, &cfg, 128 * MiB, MTD_STEADY_SLOW_MIN, PROTO_RECLAIM_PARTIAL, 2000,
			 2000);
	assert_false(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	assert_int_equal(s.slow_replies, 2);
	/* the same figures, but the kernel gave up before the deadline: futile */
	mtd_steady_reply(&s, &cfg, 128 * MiB, 3 * MiB, PROTO_RECLAIM_PARTIAL, 1999, 2000);
	assert_false(s.slow);
	assert_int_equal(s.slow_replies, 0);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	/* the whole deadline for less than one chunk: scanning for nothing, futile */
	mtd_steady_reply(&s, &cfg, 128 * MiB, MTD_STEADY_SLOW_MIN - 4096, PROTO_RECLAIM_PARTIAL,
			 2000, 2000);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	/* only a partial answer can be slow: a floor or a failure that took as long is not */
	mtd_steady_reply(&s, &cfg, 128 * MiB, 3 * MiB, PROTO_RECLAIM_FLOOR, 2000, 2000);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));
	/* no deadline known (0): never slow */
	mtd_steady_reply(&s, &cfg, 128 * MiB, 3 * MiB, PROTO_RECLAIM_PARTIAL, 2000, 0);
	assert_true(mtd_steady_futile(&s, &cfg, 900 * MiB, 400 * MiB, now));

	/* And the controller keeps asking a slow guest, interval after interval. */
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	pol.return_via = MTD_RETURN_RECLAIM;
	struct mtd_ctl_input in = calm(now, 2 * GiB, 512 * MiB);
	in.can_reclaim = true;
	in.used_known = true;
	in.guest_used_bytes = 1536 * MiB;
	unsigned asked = 0;
	for (int i = 0; i < 10; i++, in.now_ms += cfg.interval_ms) {
		in.reclaim_futile =
		    mtd_steady_futile(&s, &cfg, in.guest_used_bytes, in.wss_bytes, in.now_ms);
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		if (out.reclaim_bytes) {
			asked++;
			uint64_t got = 3 * MiB;
			mtd_steady_reply(&s, &cfg, out.reclaim_bytes, got, PROTO_RECLAIM_PARTIAL,
					 (uint32_t)cfg.interval_ms + 400,
					 (uint32_t)cfg.interval_ms);
			in.guest_used_bytes -= got;
		}
	}
	assert_true(asked >= 8);
}

/* While the guest grows, no step: in balloon mode and in reclaim mode, and no reclaim asked
 * for a steady target either.  Memory still goes back at once when the estimate rises. */
static void test_controller_waits_while_growing(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	for (int mode = 0; mode < 2; mode++) {
		st = (struct mtd_ctl_state){0};
		pol.return_via = mode ? MTD_RETURN_RECLAIM : MTD_RETURN_BALLOON;
		struct mtd_ctl_input in = calm(1000, 2 * GiB, 512 * MiB);
		in.can_reclaim = true;
		in.used_known = true;
		in.guest_used_bytes = 1536 * MiB;
		in.growing = true;
		for (int i = 0; i < 5; i++, in.now_ms += cfg.interval_ms) {
			mtd_ctl_step(&cfg, &pol, &in, &st, &out);
			assert_int_equal(out.reason, MTD_CTL_GROWING);
			assert_int_equal(out.target_bytes, 2 * GiB);
			assert_int_equal(out.balloon_bytes, 2 * GiB);
			assert_int_equal(out.reclaim_bytes, 0);
		}
		in.growing = false;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_INFLATE);
		assert_int_equal(out.target_bytes, 2 * GiB - cfg.max_inflate_step_bytes);
		assert_int_equal(out.reclaim_bytes, cfg.max_inflate_step_bytes);
		/* Growth past the target is still given back at once while growing. */
		in.now_ms += cfg.interval_ms;
		in.growing = true;
		in.wss_bytes = 2 * GiB;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_GROW);
		assert_int_equal(out.target_bytes, 2 * GiB);
	}

	/* Reclaim mode at a steady target with the guest's use above it: not asked while
	 * growing (the steady path's request). */
	st = (struct mtd_ctl_state){
	    .primed = true, .target_bytes = 640 * MiB, .balloon_bytes = 2 * GiB};
	pol.return_via = MTD_RETURN_RECLAIM;
	struct mtd_ctl_input in = calm(100000, 2 * GiB, 512 * MiB);
	in.can_reclaim = true;
	in.used_known = true;
	in.guest_used_bytes = 900 * MiB;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reason, MTD_CTL_STEADY);
	assert_int_equal(out.reclaim_bytes, cfg.max_inflate_step_bytes);
	in.now_ms += cfg.interval_ms;
	in.growing = true;
	mtd_ctl_step(&cfg, &pol, &in, &st, &out);
	assert_int_equal(out.reclaim_bytes, 0);
}

/* After a futile answer: return=reclaim takes no step and asks nothing; the balloon still
 * steps (it takes free memory) without a reclaim request; auto keeps stepping (host pageout
 * takes the rest) without asking the guest. */
static void test_controller_after_a_futile_answer(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	for (int mode = 0; mode < 3; mode++) {
		enum mtd_return_via via[] = {MTD_RETURN_RECLAIM, MTD_RETURN_BALLOON,
					     MTD_RETURN_AUTO};
		st = (struct mtd_ctl_state){0};
		pol.return_via = via[mode];
		struct mtd_ctl_input in = calm(1000, 2 * GiB, 512 * MiB);
		in.can_reclaim = true;
		in.used_known = true;
		in.guest_used_bytes = 1536 * MiB;
		in.reclaim_futile = true;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reclaim_bytes, 0);
		if (pol.return_via == MTD_RETURN_RECLAIM) {
			assert_int_equal(out.reason, MTD_CTL_FUTILE);
			assert_int_equal(out.target_bytes, 2 * GiB);
		} else {
			assert_int_equal(out.reason, MTD_CTL_INFLATE);
			assert_int_equal(out.target_bytes, 2 * GiB - cfg.max_inflate_step_bytes);
		}
		if (pol.return_via == MTD_RETURN_BALLOON)
			assert_int_equal(out.balloon_bytes, 2 * GiB - cfg.max_inflate_step_bytes);
		/* Something changed: asked again. */
		in.reclaim_futile = false;
		in.now_ms += cfg.interval_ms;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_INFLATE);
		assert_true(out.reclaim_bytes > 0);
	}
}

/* No request beyond what the estimate calls cold; a lowered ceiling is asked in full. */
static void test_reclaim_capped_at_cold(void **state)
{
	struct mtd_ctl_state st = {0};
	struct mtd_ctl_output out;
	(void)state;
	setup_defaults();

	for (int mode = 0; mode < 2; mode++) {
		st = (struct mtd_ctl_state){0};
		pol.return_via = mode ? MTD_RETURN_RECLAIM : MTD_RETURN_BALLOON;
		pol.max_bytes = 0;
		struct mtd_ctl_input in = calm(1000, 2 * GiB, 512 * MiB);
		in.can_reclaim = true;
		in.used_known = true;
		in.guest_used_bytes = 560 * MiB;
		in.cold_known = true;
		in.cold_bytes = 48 * MiB;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reason, MTD_CTL_INFLATE);
		assert_int_equal(out.reclaim_bytes, 48 * MiB);
		/* Not known (the estimate follows the guest's use): the whole step. */
		in.now_ms += cfg.interval_ms;
		in.cold_known = false;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_int_equal(out.reclaim_bytes, cfg.max_inflate_step_bytes);
		/* The operator lowers max by 512 MiB: the cut is asked in full. */
		in.now_ms += cfg.interval_ms;
		in.cold_known = true;
		pol.max_bytes = st.balloon_bytes - 512 * MiB;
		mtd_ctl_step(&cfg, &pol, &in, &st, &out);
		assert_true(out.reclaim_bytes >= 512 * MiB - cfg.max_inflate_step_bytes);
	}
}

/* Scenario 9's DAMON readings, one every 5 s with a 70 s cold age: the controller sees the
 * highest of the last 70 s, so a low reading takes nothing until it has lasted that long,
 * and a rise is seen at once. */
static void test_peak_holds_a_cold_age(void **state)
{
	static const uint64_t read_mib[] = {336, 294, 232, 204, 204, 208, 160};
	struct mtd_steady s;
	(void)state;

	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < sizeof(read_mib) / sizeof(*read_mib); i++)
		assert_int_equal(
		    mtd_steady_peak(&s, read_mib[i] * MiB, 5000 * (uint64_t)i, 70000, true),
		    336 * MiB);
	/* 336 was read at 0 s: at 70 s it still counts, at 75 s it is gone. */
	assert_int_equal(mtd_steady_peak(&s, 150 * MiB, 70000, 70000, true), 336 * MiB);
	assert_int_equal(mtd_steady_peak(&s, 150 * MiB, 75000, 70000, true), 294 * MiB);
	/* Growth is taken at once. */
	assert_int_equal(mtd_steady_peak(&s, 400 * MiB, 80000, 70000, true), 400 * MiB);
	/* After a cold age of low readings, the low one stands. */
	for (uint64_t t = 85000; t <= 155000; t += 5000)
		(void)mtd_steady_peak(&s, 150 * MiB, t, 70000, true);
	assert_int_equal(mtd_steady_peak(&s, 150 * MiB, 160000, 70000, true), 150 * MiB);
	/* At 1 s intervals the list holds its last MTD_STEADY_WSS_MAX readings: a high one
	 * older than that is forgotten early, never one inside it. */
	memset(&s, 0, sizeof(s));
	(void)mtd_steady_peak(&s, 500 * MiB, 0, 70000, true);
	for (uint64_t t = 1000; t < 1000 * MTD_STEADY_WSS_MAX; t += 1000)
		assert_int_equal(mtd_steady_peak(&s, 100 * MiB, t, 70000, true), 500 * MiB);
	assert_int_equal(mtd_steady_peak(&s, 100 * MiB, 1000 * MTD_STEADY_WSS_MAX, 70000, true),
			 100 * MiB);
	assert_int_equal(s.nr_wss, MTD_STEADY_WSS_MAX);
}

/* Generations born every 5 s, 100 pages each, the newest at now_ms. */
static void gens_every_5s(struct vmm_guest_stats *gs, uint64_t now_ms, unsigned n)
{
	memset(gs, 0, sizeof(*gs));
	gs->nr_gens = n;
	for (unsigned i = 0; i < n; i++) {
		gs->gen[i].birth_ms = now_ms - 5000 * (uint64_t)(n - 1 - i);
		gs->gen[i].pages = 100;
	}
}

/* The pages the guest's reclaim read are left out once a younger generation exists; while
 * the youngest holds them, the reading is not taken; windows no generation can fall in are
 * forgotten; a window with no answer ends one interval past the deadline. */
static void test_echo_of_the_guests_reclaim(void **state)
{
	struct vmm_guest_stats gs;
	struct mtd_steady s;
	bool youngest;
	(void)state;

	memset(&s, 0, sizeof(s));
	/* Asked at 40 s, answered at 44 s: the generation born at 45 s holds the reads. */
	mtd_steady_reclaim_sent(&s, 40000, 5000, 5000);
	mtd_steady_reclaim_answered(&s, 44000, 5000);
	gens_every_5s(&gs, 70000, 15);
	assert_int_equal(mtd_steady_echo(&s, &gs, 70000, 70000, &youngest), 100 * 4096);
	assert_false(youngest);
	/* Asked at 68 s, no answer yet: the youngest (70 s) holds the reads. */
	mtd_steady_reclaim_sent(&s, 68000, 5000, 5000);
	assert_int_equal(mtd_steady_echo(&s, &gs, 70000, 70000, &youngest), 100 * 4096);
	assert_true(youngest);
	/* Unanswered, the window ends at 78 s: the generation born at 80 s is not in it. */
	gens_every_5s(&gs, 80000, 16);
	assert_int_equal(mtd_steady_echo(&s, &gs, 80000, 70000, &youngest), 300 * 4096);
	assert_false(youngest);
	/* Much later, no generation within the cold age was born in either: both forgotten. */
	gens_every_5s(&gs, 200000, 15);
	assert_int_equal(mtd_steady_echo(&s, &gs, 200000, 70000, &youngest), 0);
	assert_int_equal(s.nr_reclaims, 0);
	/* Only within the cold age: at 20 s, the generation born at 45 s is older, and its
	 * window is forgotten with it. */
	mtd_steady_reclaim_sent(&s, 40000, 5000, 5000);
	mtd_steady_reclaim_answered(&s, 44000, 5000);
	gens_every_5s(&gs, 70000, 15);
	assert_int_equal(mtd_steady_echo(&s, &gs, 70000, 20000, &youngest), 0);
	assert_int_equal(s.nr_reclaims, 0);
	/* A reading the youngest spoils is not recorded: the earlier peak stands. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(mtd_steady_peak(&s, 200 * MiB, 0, 70000, true), 200 * MiB);
	assert_int_equal(mtd_steady_peak(&s, 600 * MiB, 5000, 70000, false), 200 * MiB);
	assert_int_equal(s.nr_wss, 1);
}

/* The bound: the least of the reading, the guest RAM the host holds (0: unknown) and the
 * guest's own use when it is known. */
static void test_bound(void **state)
{
	(void)state;
	assert_int_equal(mtd_steady_bound(300 * MiB, 0, false, 0), 300 * MiB);
	assert_int_equal(mtd_steady_bound(300 * MiB, 200 * MiB, false, 100 * MiB), 200 * MiB);
	assert_int_equal(mtd_steady_bound(300 * MiB, 200 * MiB, true, 150 * MiB), 150 * MiB);
	assert_int_equal(mtd_steady_bound(300 * MiB, 0, true, 250 * MiB), 250 * MiB);
	assert_int_equal(mtd_steady_bound(100 * MiB, 200 * MiB, true, 150 * MiB), 100 * MiB);
	assert_int_equal(mtd_steady_bound(100 * MiB, 200 * MiB, true, 0), 0);
}

/* The reclaim window the reuse floor skips (mtd_steady_in_reclaim): from just after the
 * request to one interval past the answer, or past the deadline while unanswered. */
static void test_in_reclaim_window(void **state)
{
	struct mtd_steady s;
	(void)state;

	memset(&s, 0, sizeof(s));
	assert_false(mtd_steady_in_reclaim(&s, 1000));
	mtd_steady_reclaim_sent(&s, 1000, 10000, 2000);
	assert_false(mtd_steady_in_reclaim(&s, 1000)); /* the round that sent it read before */
	assert_true(mtd_steady_in_reclaim(&s, 3000));
	assert_true(mtd_steady_in_reclaim(&s, 13000)); /* unanswered: to the deadline + 1 */
	mtd_steady_reclaim_answered(&s, 4000, 2000);
	assert_true(mtd_steady_in_reclaim(&s, 6000)); /* the round after the answer */
	assert_false(mtd_steady_in_reclaim(&s, 6001));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_growing_follows_the_load),
	    cmocka_unit_test(test_futile_until_something_changes),
	    cmocka_unit_test(test_slow_is_not_futile),
	    cmocka_unit_test(test_controller_waits_while_growing),
	    cmocka_unit_test(test_controller_after_a_futile_answer),
	    cmocka_unit_test(test_reclaim_capped_at_cold),
	    cmocka_unit_test(test_peak_holds_a_cold_age),
	    cmocka_unit_test(test_echo_of_the_guests_reclaim),
	    cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_in_reclaim_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
