// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_release_pace.c - memtidectl release's pace (host/decide/release_pace.c) on a clock
 * of the test's own, with model balloons.
 *
 * A model balloon follows its target as a guest's does, in one of three ways: at once, at a
 * steady speed, or not at all for a while and then all at once (a guest that lagged, then
 * caught up: the case that gave 296 MiB in one second against 128 MiB/s when the steps
 * started from the target).  Each VM steps four times a second, as the daemon's release
 * tick does, and sets its target to what the pace allows (or keeps a higher one).  The
 * balloons' actual sizes are recorded every millisecond and checked over every window:
 * in any second at most release_rate given across all VMs, and within any settle window no
 * more than the host had room for above its low mark.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decide/release_pace.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

enum follow { AT_ONCE, STEADY, LAG_THEN_ALL };

struct model {
	uint64_t actual, target, ceiling;
	enum follow how;
	uint64_t speed_per_ms;  /* STEADY */
	uint64_t frozen_until;  /* LAG_THEN_ALL: holds still until then */
	uint64_t phase_ms;      /* its steps fall at phase + k * 250 ms */
	uint64_t steps_from_ms; /* released from then on */
};

static void follow(struct model *m, uint64_t now)
{
	if (m->target <= m->actual)
		return;
	uint64_t gap = m->target - m->actual;
	switch (m->how) {
	case AT_ONCE:
		m->actual = m->target;
		break;
	case STEADY:
		m->actual += gap < m->speed_per_ms ? gap : m->speed_per_ms;
		break;
	case LAG_THEN_ALL:
		if (now >= m->frozen_until)
			m->actual = m->target;
		break;
	}
}

struct run {
	uint64_t ms;        /* how long */
	uint64_t avail;     /* the host's MemAvailable (the guests leave what they get alone) */
	uint64_t *total;    /* [ms]: the balloons' actual sizes, summed */
	uint64_t done_ms;   /* when every balloon reached its ceiling (0: never) */
	bool ever_short;    /* the pace said the host had no room */
	bool never_lowered; /* no step lowered a target or put it under the actual size */
};

static const uint64_t total_mem = 16 * GiB;

static void run(const struct mtd_arbiter_config *cfg, struct model *m, unsigned n, struct run *r)
{
	struct mtd_release_budget *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	r->total = calloc(r->ms + 1, sizeof(uint64_t));
	assert_non_null(r->total);
	r->never_lowered = true;
	for (uint64_t t = 1; t <= r->ms; t++) {
		bool all_there = true;
		for (unsigned i = 0; i < n; i++) {
			struct model *v = &m[i];
			if (t >= v->steps_from_ms && (t - v->phase_ms) % 250 == 0 &&
			    v->target < v->ceiling) {
				bool sh;
				uint64_t up =
				    mtd_release_pace_step(cfg, b, i + 1, t, total_mem, r->avail,
							  v->actual, v->target, v->ceiling, &sh);
				if (up < v->target || up < v->actual)
					r->never_lowered = false;
				if (up > v->target)
					v->target = up;
				r->ever_short |= sh;
			}
			follow(v, t);
			r->total[t] += v->actual;
			all_there &= v->actual >= v->ceiling;
		}
		if (all_there && !r->done_ms)
			r->done_ms = t;
	}
	free(b);
}

/* The most given within any window of w ms. */
static uint64_t most_in(const struct run *r, uint64_t w)
{
	uint64_t most = 0;

	for (uint64_t t = 1; t <= r->ms; t++) {
		uint64_t before = t > w ? r->total[t - w] : r->total[1];
		if (r->total[t] > before && r->total[t] - before > most)
			most = r->total[t] - before;
	}
	return most;
}

static const struct mtd_arbiter_config cfg = {
    .low_mark_bytes = 1 * GiB, .settle_ms = 10000, .release_rate_bytes_per_s = 128 * MiB};

/* One VM, from 256 MiB to 1280 MiB, its balloon following in each of the three ways. */
static void one_vm(enum follow how, uint64_t *most_1s, uint64_t *done_ms)
{
	struct model m = {.actual = 256 * MiB,
			  .target = 256 * MiB,
			  .ceiling = 1280 * MiB,
			  .how = how,
			  .speed_per_ms = 64 * MiB / 1000,
			  .frozen_until = 3000};
	struct run r = {.ms = 20000, .avail = 12 * GiB};

	run(&cfg, &m, 1, &r);
	*most_1s = most_in(&r, 1000);
	*done_ms = r.done_ms;
	print_message("%-13s most in a second %3llu MiB, at the ceiling after %5.2f s\n",
		      how == AT_ONCE  ? "at once:"
		      : how == STEADY ? "64 MiB/s:"
				      : "lag, then all:",
		      (unsigned long long)(*most_1s / MiB), (double)*done_ms / 1000);
	assert_true(r.never_lowered);
	assert_false(r.ever_short);
	free(r.total);
}

static void test_rate_holds_in_every_second(void **state)
{
	uint64_t most, done;
	(void)state;

	/* A balloon that gives at once: never over the rate, and at least 80% of it (the
	 * bound looks a second back: 1024 MiB at 128 MiB/s is 8 s, so at most 10 s). */
	one_vm(AT_ONCE, &most, &done);
	assert_true(most <= 128 * MiB);
	assert_true(done > 0 && done <= 10000 + 250);
	/* A balloon slower than the rate: it sets the pace, nothing piles up. */
	one_vm(STEADY, &most, &done);
	assert_true(most <= 128 * MiB);
	/* A balloon that holds still 3 s, then gives all it was asked: a second's worth at
	 * most, however long it lagged. */
	one_vm(LAG_THEN_ALL, &most, &done);
	assert_true(most <= 128 * MiB);
	assert_true(done > 0);
}

/* Three VMs released together, stepping out of phase, one lagging: the rate is the host's,
 * shared, in every second. */
static void test_rate_is_shared(void **state)
{
	struct model m[3] = {
	    {.actual = 256 * MiB, .target = 256 * MiB, .ceiling = 768 * MiB, .how = AT_ONCE},
	    {.actual = 512 * MiB,
	     .target = 512 * MiB,
	     .ceiling = 1024 * MiB,
	     .how = LAG_THEN_ALL,
	     .frozen_until = 4000,
	     .phase_ms = 80},
	    {.actual = 128 * MiB,
	     .target = 128 * MiB,
	     .ceiling = 640 * MiB,
	     .how = STEADY,
	     .speed_per_ms = 100 * MiB / 1000,
	     .phase_ms = 170},
	};
	struct run r = {.ms = 30000, .avail = 12 * GiB};
	(void)state;

	run(&cfg, m, 3, &r);
	uint64_t most = most_in(&r, 1000);
	print_message("3 VMs: most in a second %llu MiB, all at their ceilings after %.2f s\n",
		      (unsigned long long)(most / MiB), (double)r.done_ms / 1000);
	assert_true(most <= 128 * MiB);
	assert_true(r.done_ms > 0); /* 1536 MiB at <= 128 MiB/s: 12 s at least, 30 s at most */
	assert_true(r.done_ms >= 11000);
	assert_true(r.never_lowered);
	free(r.total);
}

/* 300 MiB of room above the low mark, guests that leave what they get untouched (so
 * MemAvailable never shows it): within any settle window, 300 MiB at most, even from a
 * balloon that lagged into the next window. */
static void test_room_holds_per_settle_window(void **state)
{
	struct model m[2] = {
	    {.actual = 256 * MiB,
	     .target = 256 * MiB,
	     .ceiling = 2 * GiB,
	     .how = LAG_THEN_ALL,
	     .frozen_until = 9000},
	    {.actual = 256 * MiB,
	     .target = 256 * MiB,
	     .ceiling = 2 * GiB,
	     .how = AT_ONCE,
	     .phase_ms = 125},
	};
	struct run r = {.ms = 40000, .avail = 1 * GiB + 300 * MiB};
	(void)state;

	run(&cfg, m, 2, &r);
	uint64_t most = most_in(&r, cfg.settle_ms);
	print_message("room 300 MiB: most in a settle window %llu MiB, most in a second %llu MiB\n",
		      (unsigned long long)(most / MiB),
		      (unsigned long long)(most_in(&r, 1000) / MiB));
	assert_true(most <= 300 * MiB);
	assert_true(most >= 200 * MiB); /* it does use the room */
	assert_true(most_in(&r, 1000) <= 128 * MiB);
	assert_true(r.ever_short);
	free(r.total);
}

/* Under the low mark: nothing is given and the host is short; a target is never lowered
 * nor left under the balloon's size (one still inflating when released stops there). */
static void test_nothing_under_the_low_mark(void **state)
{
	struct mtd_release_budget *b = calloc(1, sizeof(*b));
	bool sh = false;
	(void)state;

	assert_non_null(b);
	assert_int_equal(mtd_release_pace_step(&cfg, b, 1, 1000, total_mem, 900 * MiB, 512 * MiB,
					       512 * MiB, 1 * GiB, &sh),
			 512 * MiB);
	assert_true(sh);
	/* inflating when released: target 384 MiB, the balloon still at 448 MiB */
	assert_int_equal(mtd_release_pace_step(&cfg, b, 2, 1000, total_mem, 900 * MiB, 448 * MiB,
					       384 * MiB, 1 * GiB, &sh),
			 448 * MiB);
	/* with room again: from the balloon's size, a second's rate at most */
	uint64_t up = mtd_release_pace_step(&cfg, b, 2, 1250, total_mem, 8 * GiB, 448 * MiB,
					    448 * MiB, 1 * GiB, &sh);
	assert_false(sh);
	assert_true(up > 448 * MiB && up <= 448 * MiB + 128 * MiB);
	free(b);
}

/* A VM that stops stepping (resumed, detached) leaves the budget: the others get the whole
 * rate once its last step is RELEASE_PACE_EXPIRE_MS old, not before. */
static void test_a_vm_that_left_frees_the_rate(void **state)
{
	struct mtd_release_budget *b = calloc(1, sizeof(*b));
	bool sh;
	(void)state;

	assert_non_null(b);
	assert_int_equal(mtd_release_pace_step(&cfg, b, 1, 1000, total_mem, 8 * GiB, 1 * GiB,
					       1 * GiB, 4 * GiB, &sh),
			 1 * GiB + 128 * MiB);
	/* VM 2, with VM 1's second still running: nothing left of the rate */
	assert_int_equal(mtd_release_pace_step(&cfg, b, 2, 1500, total_mem, 8 * GiB, 1 * GiB,
					       1 * GiB, 4 * GiB, &sh),
			 1 * GiB);
	assert_int_equal(mtd_release_pace_step(&cfg, b, 2, 1000 + RELEASE_PACE_EXPIRE_MS, total_mem,
					       8 * GiB, 1 * GiB, 1 * GiB, 4 * GiB, &sh),
			 1 * GiB);
	assert_int_equal(mtd_release_pace_step(&cfg, b, 2, 1001 + RELEASE_PACE_EXPIRE_MS, total_mem,
					       8 * GiB, 1 * GiB, 1 * GiB, 4 * GiB, &sh),
			 1 * GiB + 128 * MiB);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rate_holds_in_every_second),
	    cmocka_unit_test(test_rate_is_shared),
	    cmocka_unit_test(test_room_holds_per_settle_window),
	    cmocka_unit_test(test_nothing_under_the_low_mark),
	    cmocka_unit_test(test_a_vm_that_left_frees_the_rate),
	};
	return cmocka_run_group_tests_name("release_pace", tests, NULL, NULL);
}
