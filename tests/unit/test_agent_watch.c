// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_watch.c - the agent's growth watch (guest-agent/agent_watch.c).
 *
 * Drives agent_watch_step with MemTotal/MemAvailable series: fast growth of the memory in
 * use that would run out within the horizon sends one need of the projected growth, then the
 * watch is quiet for a horizon unless the guest outgrows that need; a slow drift, growth that plenty of memory absorbs, a rise,
 * or the balloon inflating (MemTotal and MemAvailable fall together) sends nothing.  The reader
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

	assert_int_equal(agent_watch_step(&w, &cfg, 1000, T, 128 * MiB), 0); /* primes */
	uint64_t need = agent_watch_step(&w, &cfg, 1250, T, 78 * MiB);       /* -50 MiB in 250 ms */
	assert_int_equal(need, 400 * MiB); /* 200 MiB/s over 2 s */
	/* Still falling, but the need covers the horizon: quiet until 3250. */
	assert_int_equal(agent_watch_step(&w, &cfg, 1500, T, 40 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 3000, T, 10 * MiB), 0);
	/* After the horizon, a fall that continues asks again. */
	assert_int_equal(agent_watch_step(&w, &cfg, 3250, T, 2 * MiB), 64 * MiB);
}

/* Two reads 2 ms apart (the watch beside a reclaim request reads at once, often just after
 * the loop's own read): half a MiB of noise is not 250 MiB/s.  The close read is skipped
 * whole, and a real growth over the next period is still seen from the earlier base. */
static void test_close_reads_are_not_a_rate(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(agent_watch_step(&w, &cfg, 1000, T, 300 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 1002, T, 300 * MiB - MiB / 2), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 1049, T, 299 * MiB), 0);
	/* 100 ms after the base, 50 MiB more in use: 500 MiB/s, a need */
	assert_int_equal(agent_watch_step(&w, &cfg, 1100, T, 250 * MiB), 1000 * MiB);
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

	assert_int_equal(agent_watch_step(&w, &cfg, t, T, avail), 0); /* primes, before growth */
	t += cfg.watch_interval_ms;
	avail -= 500 * MiB * cfg.watch_interval_ms / 1000; /* what 500 MiB/s took meanwhile */
	uint64_t need = agent_watch_step(&w, &cfg, t, T, avail);
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

	assert_int_equal(agent_watch_step(&w, &cfg, 0, T, 60 * MiB), 0); /* primes */
	/* 4 MiB in 100 ms: 40 MiB/s, 80 MiB over the horizon, more than the 56 left. */
	assert_int_equal(agent_watch_step(&w, &cfg, 100, T, 56 * MiB), 80 * MiB);
	/* 50 MiB more: within the 80 asked for, quiet. */
	assert_int_equal(agent_watch_step(&w, &cfg, 200, T, 6 * MiB), 0);
	/* The host gave 200 MiB (MemTotal net of the balloon and MemAvailable rise together),
	 * and the guest took 60 MiB more in 100 ms: 110 MiB since the need, past the 80 it
	 * asked for: a new need, for 600 MiB/s over the horizon. */
	assert_int_equal(agent_watch_step(&w, &cfg, 300, T + 200 * MiB, 146 * MiB), 1200 * MiB);
	/* Quiet again within that one. */
	assert_int_equal(agent_watch_step(&w, &cfg, 400, T + 200 * MiB, 100 * MiB), 0);
}

static void test_slow_drift_and_plenty_send_nothing(void **state)
{
	struct agent_watch w = {0};
	uint64_t avail = 100 * MiB, t = 0;
	(void)state;
	defaults();

	/* 3 MiB per 250 ms = 12 MiB/s: under watch_min_rate, even close to empty. */
	for (int i = 0; i < 30; i++, t += 250, avail -= 3 * MiB)
		assert_int_equal(agent_watch_step(&w, &cfg, t, T, avail), 0);
	/* 400 MiB/s but 3 GiB available: 800 MiB over the horizon fits. */
	memset(&w, 0, sizeof(w));
	assert_int_equal(agent_watch_step(&w, &cfg, 0, T, 3072 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 250, T, 2972 * MiB), 0);
	/* A rise (the balloon deflated) and an unchanged clock send nothing. */
	assert_int_equal(agent_watch_step(&w, &cfg, 500, T, 3000 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 500, T, 100 * MiB), 0);
}

static void test_min_rate_and_horizon_are_honoured(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();
	cfg.watch_min_rate_bytes = 0;
	cfg.watch_horizon_ms = 10000;

	/* 12 MiB/s with 100 MiB left: over 10 s that is 120 MiB > 100, so a need now. */
	assert_int_equal(agent_watch_step(&w, &cfg, 0, T, 103 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 250, T, 100 * MiB), 120 * MiB);
}

/* The host inflates the balloon by 256 MiB in 250 ms: MemTotal and MemAvailable fall
 * together, the memory in use does not move, no need.  The same fall of MemAvailable alone
 * (the guest allocating) sends one. */
static void test_balloon_inflation_is_not_growth(void **state)
{
	struct agent_watch w = {0};
	(void)state;
	defaults();

	assert_int_equal(agent_watch_step(&w, &cfg, 0, 1024 * MiB, 300 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 250, 768 * MiB, 44 * MiB), 0);
	memset(&w, 0, sizeof(w));
	assert_int_equal(agent_watch_step(&w, &cfg, 0, 1024 * MiB, 300 * MiB), 0);
	assert_int_equal(agent_watch_step(&w, &cfg, 250, 1024 * MiB, 44 * MiB), 2048 * MiB);
}

static void test_reads_real_meminfo(void **state)
{
	uint64_t total = 0, avail = 0;
	(void)state;
	defaults();

	assert_int_equal(agent_watch_read(&cfg, &total, &avail), 0);
	assert_true(avail > 0 && total >= avail);
	snprintf(cfg.sys_root, sizeof(cfg.sys_root), "/nonexistent-root");
	assert_true(agent_watch_read(&cfg, &total, &avail) < 0);
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
	    cmocka_unit_test(test_reads_real_meminfo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
