// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_arbiter.c - host arbitration (host/decide/arbiter.c): who is squeezed when the host runs
 * short, hysteresis between the marks, and the meminfo reader.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "decide/arbiter.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static const struct mtd_arbiter_config cfg = {
    .low_mark_bytes = 4 * GiB, .high_mark_bytes = 6 * GiB, .settle_ms = 0};

static void test_lowest_priority_gives_first(void **state)
{
	struct mtd_arbiter_vm v[3] = {
	    {.priority = 100, .reclaimable_bytes = 2 * GiB},
	    {.priority = 10, .reclaimable_bytes = 2 * GiB},
	    {.priority = 50, .reclaimable_bytes = 2 * GiB},
	};
	struct mtd_arbiter_result r;
	struct mtd_arbiter_state as = {0};
	(void)state;

	/* 1 GiB short: half of the lowest-priority VM's reclaimable, nobody else. */
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 3 * GiB, v, 3, &r);
	assert_true(r.under_pressure);
	assert_int_equal(r.deficit_bytes, 1 * GiB);
	assert_true(v[1].squeeze > 0.49 && v[1].squeeze < 0.51);
	assert_true(v[0].squeeze == 0.0);
	assert_true(v[2].squeeze == 0.0);

	/* 3 GiB short: priority 10 fully, priority 50 half, priority 100 untouched. */
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 1 * GiB, v, 3, &r);
	assert_true(v[1].squeeze == 1.0);
	assert_true(v[2].squeeze > 0.49 && v[2].squeeze < 0.51);
	assert_true(v[0].squeeze == 0.0);
}

static void test_equal_priority_shares(void **state)
{
	struct mtd_arbiter_vm v[2] = {
	    {.priority = 1, .reclaimable_bytes = 3 * GiB},
	    {.priority = 1, .reclaimable_bytes = 1 * GiB},
	};
	struct mtd_arbiter_result r;
	struct mtd_arbiter_state as = {0};
	(void)state;
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 2 * GiB, v, 2, &r);
	/* 2 GiB of 4 GiB in the class: each at 0.5, so 1.5 GiB and 0.5 GiB. */
	assert_true(v[0].squeeze > 0.49 && v[0].squeeze < 0.51);
	assert_true(v[1].squeeze > 0.49 && v[1].squeeze < 0.51);
}

static void test_hysteresis_and_release(void **state)
{
	struct mtd_arbiter_vm v[1] = {{.priority = 1, .reclaimable_bytes = 2 * GiB}};
	struct mtd_arbiter_result r;
	struct mtd_arbiter_state as = {0};
	(void)state;
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 3 * GiB, v, 1, &r);
	assert_true(v[0].squeeze > 0.49 && v[0].squeeze < 0.51);
	/* Between the marks: kept. */
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 5 * GiB, v, 1, &r);
	assert_false(r.under_pressure);
	assert_true(v[0].squeeze > 0.49 && v[0].squeeze < 0.51);
	/* Still short but less: never relaxed while short. */
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 3584 * MiB, v, 1, &r);
	assert_true(v[0].squeeze > 0.49);
	/* Over the high mark: headroom back. */
	mtd_arbiter_run(&cfg, &as, 1000, 64 * GiB, 7 * GiB, v, 1, &r);
	assert_true(v[0].squeeze == 0.0);
}

/* Memory already asked of an inflating balloon counts against the deficit; raises wait for
 * the settle time, so a lagging MemAvailable does not squeeze the next priority. */
static void test_pending_and_settle(void **state)
{
	struct mtd_arbiter_config c = cfg;
	struct mtd_arbiter_state as = {0};
	struct mtd_arbiter_result r;
	struct mtd_arbiter_vm v[2] = {
	    {.priority = 1, .reclaimable_bytes = 1 * GiB},
	    {.priority = 9, .reclaimable_bytes = 4 * GiB},
	};
	(void)state;
	c.settle_ms = 10000;

	/* 1 GiB short: the low priority VM fully. */
	mtd_arbiter_run(&c, &as, 1000, 64 * GiB, 3 * GiB, v, 2, &r);
	assert_true(v[0].squeeze == 1.0);
	assert_true(v[1].squeeze == 0.0);
	assert_int_equal(as.last_raise_ms, 1000);

	/* MemAvailable has not moved yet (the balloon is on its way): within the settle time
	 * nothing rises, whatever the figures say. */
	v[0].reclaimable_bytes = 0;
	mtd_arbiter_run(&c, &as, 5000, 64 * GiB, 3 * GiB, v, 2, &r);
	assert_true(r.under_pressure);
	assert_true(v[1].squeeze == 0.0);

	/* After it, a balloon still inflating counts as coming: 768 MiB pending of 1 GiB
	 * leaves 256 MiB for the next priority, a sixteenth of its 4 GiB. */
	v[0].pending_bytes = 768 * MiB;
	mtd_arbiter_run(&c, &as, 12000, 64 * GiB, 3 * GiB, v, 2, &r);
	assert_true(v[1].squeeze > 0.0624 && v[1].squeeze < 0.0626);
	assert_int_equal(as.last_raise_ms, 12000);

	/* Pending covers the rest: no raise. */
	v[0].pending_bytes = 2 * GiB;
	double before = v[1].squeeze;
	mtd_arbiter_run(&c, &as, 30000, 64 * GiB, 3 * GiB, v, 2, &r);
	assert_true(v[1].squeeze == before);
	assert_int_equal(as.last_raise_ms, 12000);

	/* Room again: all back to 0 and the settle clock is reset. */
	mtd_arbiter_run(&c, &as, 31000, 64 * GiB, 7 * GiB, v, 2, &r);
	assert_true(v[0].squeeze == 0.0 && v[1].squeeze == 0.0);
	assert_int_equal(as.last_raise_ms, 0);
}

static void test_default_marks(void **state)
{
	struct mtd_arbiter_config zero = {0};
	uint64_t lo, hi;
	(void)state;
	mtd_arbiter_marks(&zero, 20 * GiB, &lo, &hi);
	assert_int_equal(lo, 1 * GiB);
	assert_int_equal(hi, 2 * GiB);
	struct mtd_arbiter_vm none[1];
	struct mtd_arbiter_result r;
	struct mtd_arbiter_state as = {0};
	mtd_arbiter_run(&zero, &as, 1000, 20 * GiB, 512 * MiB, none, 0, &r);
	assert_true(r.under_pressure);
}

static void test_meminfo(void **state)
{
	char path[] = "/tmp/mtd-meminfo-XXXXXX";
	uint64_t total = 0, avail = 0;
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "MemTotal:       24576000 kB\nMemFree:  100 kB\n"
			   "MemAvailable:   12288000 kB\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(mtd_arbiter_read_meminfo(path, &total, &avail), 0);
	assert_int_equal(total, 24576000ULL * 1024);
	assert_int_equal(avail, 12288000ULL * 1024);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "MemTotal: 5 kB\n", 15), 15);
	close(fd);
	assert_int_equal(mtd_arbiter_read_meminfo(path, &total, &avail), -EPROTO);
	unlink(path);
	assert_int_equal(mtd_arbiter_read_meminfo("/nonexistent", &total, &avail), -ENOENT);
	/* The real one parses. */
	assert_int_equal(mtd_arbiter_read_meminfo("/proc/meminfo", &total, &avail), 0);
	assert_true(total > avail);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lowest_priority_gives_first),
	    cmocka_unit_test(test_equal_priority_shares),
	    cmocka_unit_test(test_hysteresis_and_release),
	    cmocka_unit_test(test_pending_and_settle),
	    cmocka_unit_test(test_default_marks),
	    cmocka_unit_test(test_meminfo),
	};
	return cmocka_run_group_tests_name("mtd_arbiter", tests, NULL, NULL);
}
