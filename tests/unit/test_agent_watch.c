// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_watch.c - the agent's growth watch (guest-agent/agent_watch.c).
 *
 * Drives agent_watch_step with MemTotal/MemAvailable series: fast growth of the memory in
 * use that would run out within the horizon sends one need of the projected growth, then the
 * watch is quiet for a horizon unless the guest outgrows that need; a slow drift, growth that plenty of memory absorbs, a rise,
 * or the balloon inflating (MemTotal and MemAvailable fall together) sends nothing, and neither
 * does a dip of MemAvailable that what the processes hold does not share (free page
 * reporting's).  The reader
 * is checked on a real /proc/meminfo of this machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"

#define MiB (1ULL << 20)
#define T   (4096 * MiB) /* MemTotal, unchanged unless a test says */

static struct agent_config cfg;

/* A step with MemTotal and MemAvailable, the processes holding what is in use (held moves
 * with used: a growth of the guest's own), unless held is given (step_held). */
static uint64_t step_held(struct agent_watch *w, uint64_t now, uint64_t total, uint64_t avail,
			  uint64_t held)
{
	struct proto_stats st = {
	    .mem_total_bytes = total, .mem_available_bytes = avail, .anon_bytes = held};
	return agent_watch_step(w, &cfg, now, &st);
}

static uint64_t step(struct agent_watch *w, uint64_t now, uint64_t total, uint64_t avail)
{
	return step_held(w, now, total, avail, total > avail ? total - avail : 1);
}

static void defaults(void)
{
	agent_config_defaults(&cfg);
	assert_int_equal(cfg.watch_interval_ms, 100);
	assert_int_equal(cfg.watch_horizon_ms, 2000);
}

/* 200 MiB/s of allocation with 128 MiB available: the guest runs out in well under 2 s. */
static void test_fast_fall_sends_one_need_then_quiet(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(step(&w, 1000, T, 128 * MiB), 0); /* primes */
	uint64_t need = step(&w, 1250, T, 78 * MiB);       /* -50 MiB in 250 ms */
	assert_int_equal(need, 400 * MiB);                 /* 200 MiB/s over 2 s */
	/* Still falling, but the need covers the horizon: quiet until 3250. */
	assert_int_equal(step(&w, 1500, T, 40 * MiB), 0);
	assert_int_equal(step(&w, 3000, T, 10 * MiB), 0);
	/* After the horizon, a fall that continues asks again. */
	assert_int_equal(step(&w, 3250, T, 2 * MiB), 64 * MiB);
}

/* Two reads 2 ms apart (the watch beside a reclaim request reads at once, often just after
 * the loop's own read): half a MiB of noise is not 250 MiB/s.  The close read is skipped
 * whole, and a real growth over the next period is still seen from the earlier base. */
static void test_close_reads_are_not_a_rate(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(step(&w, 1000, T, 300 * MiB), 0);
	assert_int_equal(step(&w, 1002, T, 300 * MiB - MiB / 2), 0);
	assert_int_equal(step(&w, 1049, T, 299 * MiB), 0);
	/* 100 ms after the base, 50 MiB more in use: 500 MiB/s, a need */
	assert_int_equal(step(&w, 1100, T, 250 * MiB), 1000 * MiB);
}

/* Scenario 3's shape under TCG: 128 MiB available, then 500 MiB/s of first touches.  At the
 * default period the need goes at the first read after the growth starts, 100 ms in, with
 * 78 MiB still available; a 250 ms period (the default until 6 Dec 2026) would read the
 * growth only once the guest had nothing left. */
static void test_default_period_sees_a_fast_growth_in_time(void **state)
{
	struct agent_watch w = {0};
	uint64_t avail = 128 * MiB, t = 0;
	(void)state;
	defaults();

	assert_int_equal(step(&w, t, T, avail), 0); /* primes, before growth */
	t += cfg.watch_interval_ms;
	avail -= 500 * MiB * cfg.watch_interval_ms / 1000; /* what 500 MiB/s took meanwhile */
	uint64_t need = step(&w, t, T, avail);
	assert_int_equal(need, 1000 * MiB); /* 500 MiB/s over the 2 s horizon */
	assert_true(avail >= 64 * MiB);     /* still above the agent's floor when it goes */
}

/* A growth that starts slowly and speeds up: the first need, projected from the first 100 ms,
 * is small; once the guest has used more than it asked for, the watch asks again at once
 * instead of waiting out the horizon (scenario 3: 74 MiB asked for a 300 MiB growth). */
static void test_outgrown_need_asks_again(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(step(&w, 0, T, 60 * MiB), 0); /* primes */
	/* 4 MiB in 100 ms: 40 MiB/s, 80 MiB over the horizon, more than the 56 left. */
	assert_int_equal(step(&w, 100, T, 56 * MiB), 80 * MiB);
	/* 50 MiB more: within the 80 asked for, quiet. */
	assert_int_equal(step(&w, 200, T, 6 * MiB), 0);
	/* The host gave 200 MiB (MemTotal net of the balloon and MemAvailable rise together),
	 * and the guest took 60 MiB more in 100 ms: 110 MiB since the need, past the 80 it
	 * asked for: a new need, for 600 MiB/s over the horizon. */
	assert_int_equal(step(&w, 300, T + 200 * MiB, 146 * MiB), 1200 * MiB);
	/* Quiet again within that one. */
	assert_int_equal(step(&w, 400, T + 200 * MiB, 100 * MiB), 0);
}

static void test_slow_drift_and_plenty_send_nothing(void **state)
{
	struct agent_watch w = {0};
	uint64_t avail = 100 * MiB, t = 0;
	(void)state;
	defaults();

	/* 3 MiB per 250 ms = 12 MiB/s: under watch_min_rate, even close to empty. */
	for (int i = 0; i < 30; i++, t += 250, avail -= 3 * MiB)
		assert_int_equal(step(&w, t, T, avail), 0);
	/* 400 MiB/s but 3 GiB available: 800 MiB over the horizon fits. */
	memset(&w, 0, sizeof(w));
	assert_int_equal(step(&w, 0, T, 3072 * MiB), 0);
	assert_int_equal(step(&w, 250, T, 2972 * MiB), 0);
	/* A rise (the balloon deflated) and an unchanged clock send nothing. */
	assert_int_equal(step(&w, 500, T, 3000 * MiB), 0);
	assert_int_equal(step(&w, 500, T, 100 * MiB), 0);
}

static void test_min_rate_and_horizon_are_honoured(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();
	cfg.watch_min_rate_bytes = 0;
	cfg.watch_horizon_ms = 10000;

	/* 12 MiB/s with 100 MiB left: over 10 s that is 120 MiB > 100, so a need now. */
	assert_int_equal(step(&w, 0, T, 103 * MiB), 0);
	assert_int_equal(step(&w, 250, T, 100 * MiB), 120 * MiB);
}

/* The host inflates the balloon by 256 MiB in 250 ms: MemTotal and MemAvailable fall
 * together, the memory in use does not move, no need.  The same fall of MemAvailable alone
 * (the guest allocating) sends one. */
static void test_balloon_inflation_is_not_growth(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(step(&w, 0, 1024 * MiB, 300 * MiB), 0);
	assert_int_equal(step(&w, 250, 768 * MiB, 44 * MiB), 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(step(&w, 0, 1024 * MiB, 300 * MiB), 0);
	assert_int_equal(step(&w, 250, 1024 * MiB, 44 * MiB), 2048 * MiB);
}

/* Free page reporting takes up to 64 MiB of free pages off the free lists while the host
 * discards them (compaction isolates some too): MemAvailable dips and comes back with nothing
 * in the guest growing.  On the KVM host stand the host's answer was slow enough for the
 * watch to read such dips as 18-33 MiB of growth in 100 ms, and it sent needs.  What the
 * guest's processes hold did not move: no need.  The same dip with the processes' memory
 * rising as much is a growth, and sends one. */
static void test_free_page_reporting_dip_is_not_growth(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(step_held(&w, 1000, T, 330 * MiB, 900 * MiB), 0);
	assert_int_equal(step_held(&w, 1100, T, 266 * MiB, 900 * MiB), 0); /* 64 MiB away */
	assert_int_equal(step_held(&w, 1200, T, 330 * MiB, 900 * MiB), 0); /* back */
	assert_int_equal(step_held(&w, 1300, T, 266 * MiB, 901 * MiB), 0); /* +1 MiB: a drift */
	memset(&w, 0, sizeof(w));
	assert_int_equal(step_held(&w, 1000, T, 330 * MiB, 900 * MiB), 0);
	assert_int_equal(step_held(&w, 1100, T, 266 * MiB, 964 * MiB), 1280 * MiB);
	/* A kernel that shows neither AnonPages nor Shmem: MemAvailable alone, as before. */
	memset(&w, 0, sizeof(w));
	assert_int_equal(step_held(&w, 1000, T, 330 * MiB, 0), 0);
	assert_int_equal(step_held(&w, 1100, T, 266 * MiB, 0), 1280 * MiB);
}

static void test_reads_real_meminfo(void **state)
{
	struct proto_stats st;
	(void)state;
	defaults();

	assert_int_equal(agent_watch_read(&cfg, &st), 0);
	assert_true(st.mem_available_bytes > 0 && st.mem_total_bytes >= st.mem_available_bytes);
	assert_true(agent_use_of(&st).held > 0); /* AnonPages: this process has some */
	snprintf(cfg.sys_root, sizeof(cfg.sys_root), "/nonexistent-root");
	assert_true(agent_watch_read(&cfg, &st) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fast_fall_sends_one_need_then_quiet),
	    cmocka_unit_test(test_close_reads_are_not_a_rate),
	    cmocka_unit_test(test_outgrown_need_asks_again),
	    cmocka_unit_test(test_default_period_sees_a_fast_growth_in_time),
	    cmocka_unit_test(test_slow_drift_and_plenty_send_nothing),
	    cmocka_unit_test(test_min_rate_and_horizon_are_honoured),
	    cmocka_unit_test(test_balloon_inflation_is_not_growth),
	    cmocka_unit_test(test_free_page_reporting_dip_is_not_growth),
	    cmocka_unit_test(test_reads_real_meminfo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
