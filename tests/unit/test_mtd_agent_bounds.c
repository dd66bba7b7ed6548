// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_agent_bounds.c - a guest agent's figures bounded by its VM
 * (host/act/agent_bounds.c), on the lies proto's validator lets through and on honest
 * figures at their limits.
 *
 * Checked: "uses 4 PiB" of a 1 GiB VM is clamped to the VM and said in one sentence; every
 * meminfo figure is held under MemTotal; refault counters that jump by 2^50 grow by the rate
 * bound at most, however often the peer reports; a thrashing guest's honest counters (1 M
 * pages a second) pass untouched, counted from the link's start; a restart or a new
 * session's first report adds nothing; working-set reports over the VM are
 * scaled down together; a reclaim reply's figures are held to the VM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "act/agent_bounds.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static struct proto_stats honest(void)
{
	struct proto_stats s = {.mem_total_bytes = 1000 * MiB,
				.mem_free_bytes = 200 * MiB,
				.mem_available_bytes = 500 * MiB,
				.cached_bytes = 300 * MiB,
				.anon_bytes = 400 * MiB,
				.shmem_bytes = 10 * MiB};
	return s;
}

static void test_sizes_beyond_the_vm(void **state)
{
	struct mtd_agent_counter_state cs = {0};
	struct proto_stats s = honest();
	char why[200] = "";
	(void)state;

	/* An honest report passes as it is. */
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, 1000, why, sizeof(why)), 0);
	assert_int_equal(s.mem_total_bytes, 1000 * MiB);
	assert_string_equal(why, "");
	/* "uses 4294967296 MiB": MemTotal 2^52 bytes, nothing free, on a 1 GiB VM. */
	s.mem_total_bytes = 1ULL << 52;
	s.mem_free_bytes = 0;
	s.mem_available_bytes = 1ULL << 51;
	s.cached_bytes = 1ULL << 50;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, 2000, why, sizeof(why)), 3);
	print_message("said: %s\n", why);
	assert_int_equal(s.mem_total_bytes, 1 * GiB);
	assert_int_equal(s.mem_available_bytes, 1 * GiB);
	assert_int_equal(s.cached_bytes, 1 * GiB);
	assert_non_null(strstr(why, "MemTotal 4294967296 MiB, over the VM's RAM (1024 MiB)"));
	/* What the guest uses, MemTotal - MemFree, is the VM at most. */
	assert_true(s.mem_total_bytes - s.mem_free_bytes <= 1 * GiB);
	/* Within MemTotal but over it: AnonPages over a true MemTotal. */
	s = honest();
	s.anon_bytes = 2000 * MiB;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, 3000, why, sizeof(why)), 1);
	assert_int_equal(s.anon_bytes, 1000 * MiB);
	/* The VM's size not known yet: sizes are not judged. */
	s = honest();
	s.mem_total_bytes = 1ULL << 52;
	assert_int_equal(mtd_agent_bound_stats(&s, 0, &cs, 4000, NULL, 0), 0);
}

static void test_counters_at_the_rate_bound(void **state)
{
	struct mtd_agent_counter_state cs = {0};
	struct proto_stats s = honest();
	char why[200] = "";
	uint64_t t = 1000;
	(void)state;

	/* Since the guest booted: any value, and it adds nothing (counts start at the link's
	 * start). */
	s.refault_anon = 5000000;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, why, sizeof(why)), 0);
	assert_int_equal(s.refault_anon, 0);
	/* A thrashing guest, honestly: 1 M pages a second for a minute, reported each second. */
	for (int i = 0; i < 60; i++) {
		s = honest();
		s.refault_anon = 5000000 + (uint64_t)(i + 1) * 1000000;
		t += 1000;
		assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, why, sizeof(why)), 0);
		assert_int_equal(s.refault_anon, (uint64_t)(i + 1) * 1000000);
	}
	/* A lie: up 2^50 in a second.  Clamped to the bound; the sequence stays monotonic. */
	uint64_t before = s.refault_anon;
	s = honest();
	s.refault_anon = before + (1ULL << 50);
	t += 1000;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, why, sizeof(why)), 1);
	print_message("said: %s\n", why);
	assert_non_null(strstr(why, "workingset_refault_anon up"));
	assert_true(s.refault_anon > before);
	assert_true(s.refault_anon - before <=
		    MTD_AGENT_PAGES_PER_S_MAX * MTD_AGENT_COUNTER_GRACE_MS / 1000);
	/* The same lie a thousand times a second for a second: the bound holds over the
	 * second, not per report. */
	uint64_t raw = before + (1ULL << 50), start = s.refault_anon;
	for (int i = 0; i < 1000; i++) {
		s = honest();
		raw += 1ULL << 40;
		s.refault_anon = raw;
		t += 1;
		(void)mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, NULL, 0);
	}
	assert_true(s.refault_anon - start <=
		    MTD_AGENT_PAGES_PER_S_MAX + MTD_AGENT_PAGES_PER_S_MAX / 100);
	/* A restarted count (lower) adds nothing, and counting goes on from it. */
	uint64_t was = s.refault_anon;
	s = honest();
	s.refault_anon = 7;
	t += 1000;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, NULL, 0), 0);
	assert_int_equal(s.refault_anon, was);
	s = honest();
	s.refault_anon = 107;
	t += 1000;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, NULL, 0), 0);
	assert_int_equal(s.refault_anon, was + 100);
	/* A new session whose first report lies: a baseline, nothing added. */
	cs.set = false;
	s = honest();
	s.refault_anon = 1ULL << 52;
	t += 1000;
	assert_int_equal(mtd_agent_bound_stats(&s, 1 * GiB, &cs, t, NULL, 0), 0);
	assert_int_equal(s.refault_anon, was + 100);
}

static void test_wss_and_reply(void **state)
{
	struct proto_wss w = {0};
	struct proto_reclaim_reply r = {0};
	char why[200] = "";
	(void)state;

	w.nr_bins = 2;
	w.bins[0].anon_bytes = 300 * MiB;
	w.bins[1].file_bytes = 200 * MiB;
	w.nr_gens = 1;
	w.gens[0].anon_pages = 1000;
	assert_int_equal(mtd_agent_bound_wss(&w, 1 * GiB, 4096, why, sizeof(why)), 0);
	assert_int_equal(w.bins[0].anon_bytes, 300 * MiB);
	/* 3 PiB in the bins, 2^40 pages in a generation, of a 1 GiB VM */
	w.bins[0].anon_bytes = 1ULL << 51;
	w.bins[1].file_bytes = 1ULL << 50;
	w.gens[0].anon_pages = 1ULL << 40;
	assert_int_equal(mtd_agent_bound_wss(&w, 1 * GiB, 4096, why, sizeof(why)), 2);
	print_message("said: %s\n", why);
	assert_true(w.bins[0].anon_bytes + w.bins[1].file_bytes <= 1 * GiB);
	assert_true(w.bins[0].anon_bytes > w.bins[1].file_bytes); /* scaled together */
	assert_true(w.gens[0].anon_pages * 4096 <= 1 * GiB);

	r.freed_bytes = 1ULL << 52;
	r.mem_available_bytes = 100 * MiB;
	r.nr_steps = 1;
	r.steps[0].freed_bytes = 1ULL << 52;
	assert_int_equal(mtd_agent_bound_reply(&r, 1 * GiB, why, sizeof(why)), 2);
	assert_int_equal(r.freed_bytes, 1 * GiB);
	assert_int_equal(r.steps[0].freed_bytes, 1 * GiB);
	assert_int_equal(r.mem_available_bytes, 100 * MiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes_beyond_the_vm),
	    cmocka_unit_test(test_counters_at_the_rate_bound),
	    cmocka_unit_test(test_wss_and_reply),
	};
	return cmocka_run_group_tests_name("mtd_agent_bounds", tests, NULL, NULL);
}
