/*
 * test_reclaim_echo.c - the guest's reclaim as page-level access bits see it
 * (host/reclaim_echo.h): what is left out of the working set, for how long, and that a
 * full list never lets the echo expire early.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "reclaim_echo.h"

#define MiB ((uint64_t)1 << 20)

/* Seen in scenario 9: 92 MiB freed at t=100 s, cold age 70 s, interval 5 s. */
static void test_echo_lasts_one_cold_age(void **state)
{
	struct mtd_echo ec = {0};
	(void)state;

	mtd_echo_add(&ec, 100000, 92 * MiB);
	assert_int_equal(mtd_echo_bytes(&ec, 100000, 75000), 92 * MiB);
	assert_int_equal(mtd_echo_bytes(&ec, 175000, 75000), 92 * MiB); /* exactly the window */
	assert_int_equal(mtd_echo_discount(706 * MiB, 92 * MiB), 614 * MiB);
	assert_int_equal(mtd_echo_bytes(&ec, 175001, 75000), 0); /* aged out, forgotten */
	assert_int_equal(ec.n, 0);
	/* A later reclaim adds to one still in the window; each leaves on its own time. */
	mtd_echo_add(&ec, 200000, 30 * MiB);
	mtd_echo_add(&ec, 230000, 10 * MiB);
	assert_int_equal(mtd_echo_bytes(&ec, 240000, 75000), 40 * MiB);
	assert_int_equal(mtd_echo_bytes(&ec, 290000, 75000), 10 * MiB);
	/* A reclaim that freed nothing leaves nothing; the estimate never goes below 0. */
	mtd_echo_add(&ec, 290000, 0);
	assert_int_equal(ec.n, 1);
	assert_int_equal(mtd_echo_discount(5 * MiB, 10 * MiB), 0);
}

static void test_full_list_expires_late_not_early(void **state)
{
	struct mtd_echo ec = {0};
	(void)state;

	for (unsigned i = 0; i < MTD_ECHO_MAX + 4; i++)
		mtd_echo_add(&ec, 1000 * (uint64_t)(i + 1), MiB);
	assert_int_equal(ec.n, MTD_ECHO_MAX);
	/* Nothing lost: every MiB is still counted. */
	assert_int_equal(mtd_echo_bytes(&ec, 20000, 100000), (MTD_ECHO_MAX + 4) * MiB);
	/* The folded ones carry the latest of their times: at 1000 + window + 1 the first
	 * reply alone would have expired, but the sum still holds all of them. */
	assert_int_equal(mtd_echo_bytes(&ec, 101001, 100000), (MTD_ECHO_MAX + 4) * MiB);
	/* Past the newest reply's window, all are gone. */
	assert_int_equal(mtd_echo_bytes(&ec, 120001, 100000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_echo_lasts_one_cold_age),
	    cmocka_unit_test(test_full_list_expires_late_not_early),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
