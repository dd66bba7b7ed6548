// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_memcg_rules.c - the rules host-side reclaim through a VM's cgroup follows, each pure:
 * the kernel's generations as /sys/kernel/debug/lru_gen prints them and which of them
 * eviction may name (act/lru_gen.c), whether the kernel's aging sees a KVM guest
 * (decide/aging_sight.c), the stall budget on PSI (decide/stall_budget.c), the duty cycle
 * (decide/duty.c) and the compressed pool's verdict on incompressible memory
 * (decide/pool_worth.c).
 *
 * The lru_gen text is the layout Documentation/admin-guide/mm/multigen_lru.rst gives and the
 * KVM stand's 6.1 prints; this machine's kernel has no MGLRU, so the switch and the command
 * file are ordinary files in a temporary directory here.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/lru_gen.h"
#include "decide/aging_sight.h"
#include "decide/duty.h"
#include "decide/pool_worth.h"
#include "decide/stall_budget.h"

#define MiB   ((uint64_t)1 << 20)
#define SCOPE "/machine.slice/machine-qemu\\x2d1\\x2dvm.scope"

/* Three memcgs: the root, the VM's scope with its emulator group on two nodes, and a
 * neighbour whose name starts like the VM's. */
static const char LRU_GEN[] = "memcg     1 /\n"
			      "  node     0\n"
			      "          5      90000      100      2000\n"
			      "          6      50000        0        10\n"
			      "          7      20000        0         0\n"
			      "          8       1000        3         4\n"
			      "memcg     7 " SCOPE "\n"
			      "  node     0\n"
			      "         10     700000     1000         0\n"
			      "         11     400000     2000         0\n"
			      "         12      60000     3000         0\n"
			      "         13       5000     4000         5\n"
			      "memcg     8 " SCOPE "/libvirt/emulator\n"
			      "  node     0\n"
			      "          2      30000       10         0\n"
			      "          3      10000       20         0\n"
			      "  node     1\n"
			      "          2      30000        1         0\n"
			      "          3      10000        2         0\n"
			      "memcg     9 " SCOPE "x\n"
			      "  node     0\n"
			      "          0      99999   777777         0\n";

static void test_lru_gen_parse(void **state)
{
	struct mtd_lru_view v;

	(void)state;
	assert_int_equal(mtd_lru_gen_parse(LRU_GEN, SCOPE, &v), 0);
	/* The scope and the group under it, both nodes; not the root, not "...scopex". */
	assert_int_equal(v.nr, 3);
	assert_false(v.truncated);
	assert_int_equal(v.v[0].memcg_id, 7);
	assert_int_equal(v.v[0].nr, 4);
	assert_int_equal(v.v[1].memcg_id, 8);
	assert_int_equal(v.v[1].node, 0);
	assert_int_equal(v.v[2].node, 1);
	assert_int_equal(mtd_lru_vec_min_seq(&v.v[0]), 10);
	assert_int_equal(mtd_lru_vec_max_seq(&v.v[0]), 13);
	assert_int_equal(mtd_lru_vec_anon(&v.v[0]), 10000);
	assert_int_equal(v.v[0].g[0].age_ms, 700000);

	/* "/" takes every memcg. */
	assert_int_equal(mtd_lru_gen_parse(LRU_GEN, "/", &v), 0);
	assert_int_equal(v.nr, 5);
	/* A generation line before any memcg is not the kernel's text. */
	assert_int_equal(mtd_lru_gen_parse("  1 2 3 4\n", SCOPE, &v), -EPROTO);
	assert_int_equal(mtd_lru_gen_parse("  node 0\n", SCOPE, &v), -EPROTO);
	/* An empty file: nothing, not an error (no memcg has pages yet). */
	assert_int_equal(mtd_lru_gen_parse("", SCOPE, &v), 0);
	assert_int_equal(v.nr, 0);
}

/* More lruvecs than a view holds: the first are kept and the cut said. */
static void test_lru_gen_truncated(void **state)
{
	char text[8192];
	size_t o = 0;
	struct mtd_lru_view v;

	(void)state;
	o += (size_t)snprintf(text + o, sizeof(text) - o, "memcg 3 /vm\n");
	for (int n = 0; n < MTD_LRU_VECS + 3; n++)
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      " node %d\n  1 10 5 0\n  2 5 5 0\n", n);
	assert_int_equal(mtd_lru_gen_parse(text, "/vm", &v), 0);
	assert_int_equal(v.nr, MTD_LRU_VECS);
	assert_true(v.truncated);
}

/* Which generation eviction may name for pages idle min_age: the kernel keeps the youngest
 * two (MIN_NR_GENS), and a generation's pages were last put there no later than its
 * successor's birth. */
static void test_lru_gen_ages(void **state)
{
	struct mtd_lru_view v;
	uint64_t seq = 0;

	(void)state;
	assert_int_equal(mtd_lru_gen_parse(LRU_GEN, SCOPE, &v), 0);
	const struct mtd_lru_vec *vm = &v.v[0]; /* 10..13, successors born 400 s, 60 s, 5 s ago */
	assert_true(mtd_lru_vec_evictable_seq(vm, 30000, &seq));
	assert_int_equal(seq, 11); /* 12 and 13 are the youngest two */
	assert_true(mtd_lru_vec_evictable_seq(vm, 300000, &seq));
	assert_int_equal(seq, 10);
	assert_false(mtd_lru_vec_evictable_seq(vm, 500000, &seq));
	assert_int_equal(mtd_lru_vec_anon_through(vm, 11), 3000);
	/* Put there within 100 s: gen 11 (successor 60 s), 12 (5 s), 13 (the youngest). */
	assert_int_equal(mtd_lru_vec_anon_within(vm, 100000), 9000);
	assert_int_equal(mtd_lru_vec_anon_within(vm, 1000), 4000);
	/* Two generations only: nothing may go. */
	assert_false(mtd_lru_vec_evictable_seq(&v.v[1], 0, &seq));
}

static void test_lru_gen_files(void **state)
{
	char dir[] = "/tmp/memtide-lrugen.XXXXXX", path[128], buf[128];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kernel/mm/lru_gen", dir);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
	assert_int_equal(system(cmd), 0);
	/* No MGLRU in the kernel. */
	assert_int_equal(mtd_lru_gen_enabled(dir), -ENOENT);
	const char *vals[] = {"0x0007\n", "0x0000\n", "y\n", "n\n", "0x0006\n", "junk\n"};
	const int want[] = {1, 0, 1, 0, 0, -EPROTO};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(path, sizeof(path), "%s/kernel/mm/lru_gen/enabled", dir);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(vals[i], f);
		fclose(f);
		assert_int_equal(mtd_lru_gen_enabled(dir), want[i]);
	}

	/* The commands as the admin guide spells them. */
	snprintf(path, sizeof(path), "%s/lru_gen", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(mtd_lru_gen_cmd(path, '-', 7, 0, 11, 200, 2048), 0);
	f = fopen(path, "r");
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "- 7 0 11 200 2048\n");
	assert_int_equal(mtd_lru_gen_cmd(path, '+', 7, 0, 13, 1, 0), 0);
	f = fopen(path, "r");
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "+ 7 0 13 1 0\n");
	assert_int_equal(mtd_lru_gen_cmd(path, '?', 7, 0, 13, 1, 0), -EINVAL);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Blind when eviction right after an aging still finds a quarter or more of what it looked
 * at used (the aging should have moved those pages out of the old generations). */
static void test_aging_sight(void **state)
{
	(void)state;
	assert_int_equal(mtd_aging_verdict(MTD_AGING_TEST_PAGES - 1, MTD_AGING_TEST_PAGES - 1),
			 MTD_AGING_UNTESTED);
	/* The stand's 6.1: 756 MiB kept of 797 MiB looked at. */
	assert_int_equal(mtd_aging_verdict(797 * 256, 756 * 256), MTD_AGING_BLIND);
	assert_int_equal(mtd_aging_verdict(8192, 2048), MTD_AGING_BLIND);
	assert_int_equal(mtd_aging_verdict(8192, 2047), MTD_AGING_SEES);
	assert_string_equal(mtd_aging_sight_name(MTD_AGING_BLIND), "blind");
	assert_string_equal(mtd_aging_sight_name(MTD_AGING_SEES), "sees");
	assert_string_equal(mtd_aging_sight_name(MTD_AGING_UNTESTED), "untested");
}

/* PSI "some" against wall time: over the budget holds this interval and the next two. */
static void test_stall_budget(void **state)
{
	struct mtd_stall s = {0};
	const double budget = MTD_STALL_BUDGET_DEFAULT;

	(void)state;
	mtd_stall_note(&s, 1000000, 10000, budget); /* primes: history before attach is not ours */
	assert_true(mtd_stall_allows(&s));
	assert_int_equal(s.total_us, 0);
	/* 10 ms stalled in 10 s: 0.1%, within 0.2%. */
	mtd_stall_note(&s, 1010000, 20000, budget);
	assert_true(mtd_stall_allows(&s));
	assert_true(s.frac > 0.00099 && s.frac < 0.00101);
	/* 100 ms in 10 s: 1%, over. */
	mtd_stall_note(&s, 1110000, 30000, budget);
	assert_false(mtd_stall_allows(&s));
	mtd_stall_note(&s, 1110000, 40000, budget);
	assert_false(mtd_stall_allows(&s));
	mtd_stall_note(&s, 1110000, 50000, budget);
	assert_false(mtd_stall_allows(&s));
	mtd_stall_note(&s, 1110000, 60000, budget);
	assert_true(mtd_stall_allows(&s));
	assert_int_equal(s.total_us, 110000);
	assert_true(s.worst > 0.0099 && s.worst < 0.0101);
	/* The same clock again: no interval, nothing changes. */
	mtd_stall_note(&s, 1900000, 60000, budget);
	assert_true(mtd_stall_allows(&s));
	/* A counter that went back (the cgroup was made again): starts over, no stall. */
	mtd_stall_note(&s, 5, 70000, budget);
	assert_true(mtd_stall_allows(&s));
	assert_int_equal(s.total_us, 110000);

	assert_int_equal(mtd_stall_weigh(0, budget, 100), 100);
	assert_int_equal(mtd_stall_weigh(budget, budget, 100), 200);
	assert_int_equal(mtd_stall_weigh(100 * budget, budget, 100), 500); /* at most 4x extra */
	assert_int_equal(mtd_stall_weigh(0.5, 0, 100), 100);
}

/* Reclaim may spend a quarter of the wall clock; credit is capped at one interval. */
static void test_duty(void **state)
{
	struct mtd_duty d = {0};

	(void)state;
	mtd_duty_earn(&d, 1000, MTD_DUTY_DEFAULT, 2500);
	assert_true(mtd_duty_may(&d)); /* the first step may go at once */
	mtd_duty_spend(&d, 3000);      /* a slow write: 3 s */
	assert_false(mtd_duty_may(&d));
	mtd_duty_earn(&d, 2000, MTD_DUTY_DEFAULT, 2500); /* +250 ms: still 250 ms short */
	assert_false(mtd_duty_may(&d));
	mtd_duty_earn(&d, 3100, MTD_DUTY_DEFAULT, 2500); /* +275 ms */
	assert_true(mtd_duty_may(&d));
	/* A long pause does not come back as a burst. */
	mtd_duty_earn(&d, 1000000, MTD_DUTY_DEFAULT, 2500);
	mtd_duty_spend(&d, 2500);
	assert_false(mtd_duty_may(&d));
	/* A clock that stands still earns nothing. */
	mtd_duty_earn(&d, 1000000, MTD_DUTY_DEFAULT, 2500);
	assert_false(mtd_duty_may(&d));
}

/* Text compresses: eviction goes on.  Random data: held 10 minutes, then a probe, doubled. */
static void test_pool_worth(void **state)
{
	struct mtd_pool_worth w = {0};
	const double min = MTD_POOL_MIN_SAVING_DEFAULT;
	char why[256];

	(void)state;
	/* Under a verdict's worth evicted: no verdict yet, whatever the pool did. */
	mtd_pool_note(&w, 8 * MiB, 8 * MiB, min, 0);
	assert_false(w.measured);
	assert_true(mtd_pool_allows(&w, 0));
	/* 2.5x compression: 16 MiB in, the pool grew 6.4 MiB: saves 60%. */
	mtd_pool_note(&w, 8 * MiB, (int64_t)(6.4 * MiB) - 8 * (int64_t)MiB, min, 1000);
	assert_true(w.measured);
	assert_true(w.saving > 0.59 && w.saving < 0.61);
	assert_true(mtd_pool_allows(&w, 1000));

	/* Incompressible: 16 MiB in, 16.2 MiB of pool. */
	mtd_pool_note(&w, 16 * MiB, (int64_t)(16.2 * MiB), min, 2000);
	assert_true(w.saving < 0);
	assert_false(mtd_pool_allows(&w, 2000));
	assert_false(mtd_pool_allows(&w, 2000 + MTD_POOL_HOLD_FIRST_MS - 1));
	mtd_pool_why(&w, 2000, why, sizeof(why));
	assert_non_null(strstr(why, "incompressible"));
	assert_non_null(strstr(why, "600 s"));
	/* The hold ends by itself: the next steps are a probe, and a window starts afresh. */
	uint64_t t = 2000 + MTD_POOL_HOLD_FIRST_MS;
	assert_true(mtd_pool_allows(&w, t));
	assert_int_equal(w.win_evicted, 0);
	mtd_pool_note(&w, 16 * MiB, 16 * (int64_t)MiB, min, t);
	assert_false(mtd_pool_allows(&w, t));
	assert_int_equal(w.hold_ms, 2 * MTD_POOL_HOLD_FIRST_MS);
	/* Doubling stops at an hour. */
	for (int i = 0; i < 5; i++) {
		t = w.hold_until_ms;
		assert_true(mtd_pool_allows(&w, t));
		mtd_pool_note(&w, 16 * MiB, 16 * (int64_t)MiB, min, t);
	}
	assert_int_equal(w.hold_ms, MTD_POOL_HOLD_MAX_MS);
	/* A probe that pays ends the doubling. */
	t = w.hold_until_ms;
	assert_true(mtd_pool_allows(&w, t));
	mtd_pool_note(&w, 16 * MiB, 4 * (int64_t)MiB, min, t);
	assert_true(mtd_pool_allows(&w, t));
	assert_int_equal(w.hold_ms, 0);
	assert_int_equal(w.evicted_total, 16 * MiB * 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lru_gen_parse), cmocka_unit_test(test_lru_gen_truncated),
	    cmocka_unit_test(test_lru_gen_ages),  cmocka_unit_test(test_lru_gen_files),
	    cmocka_unit_test(test_aging_sight),   cmocka_unit_test(test_stall_budget),
	    cmocka_unit_test(test_duty),          cmocka_unit_test(test_pool_worth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
