// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_sim_lackey.c - valgrind lackey output to trace: address-space compaction into 2 MiB
 * blocks, page-crossing accesses, write bits, epochs by access count, and the rejection of
 * lines that are not lackey records.  The input is lackey's format, written out here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sim.h"

static int convert(const char *text, uint64_t per_epoch, struct sim_trace *t, char *err)
{
	struct sim_lackey_opts o = {
	    .epoch_accesses = per_epoch, .epoch_ms = 500, .with_ifetch = true};
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	uint64_t n;

	assert_non_null(f);
	int rc = sim_lackey_convert(f, &o, t, &n, err, 256);
	fclose(f);
	return rc;
}

static void test_convert(void **state)
{
	/* Two regions 1 GiB apart (compacted to blocks 0 and 1), a store crossing a page
	 * boundary, valgrind's own messages in between. */
	const char *text = "==123== Lackey, an example Valgrind tool\n"
			   "I  04001000,3\n"
			   " L 04001ff8,8\n"
			   " S 04002ffc,8\n"
			   "==123== more chatter\n"
			   " M 44000010,4\n"
			   " L 04001000,4\n";
	struct sim_trace t;
	char err[256];

	(void)state;
	assert_int_equal(convert(text, 2, &t, err), 0);
	assert_int_equal(t.ram_pages, 2 * SIM_BLOCK_PAGES);
	assert_int_equal(t.nr_epochs, 3); /* 5 accesses, 2 per epoch */
	assert_int_equal(t.end_ms, 1500);
	/* 0x04000000 starts the block: page 0x04001000 is index 1 of block 0. */
	assert_int_equal(t.epochs[0].nr_acc, 1);
	assert_int_equal(t.epochs[0].acc[0], 1);
	/* The store at 0x04002ffc,8 touches pages 2 and 3, both written; the M record is a
	 * write to block 1 (0x44000000), page 0 of it = index 512. */
	assert_int_equal(t.epochs[1].nr_acc, 3);
	assert_int_equal(t.epochs[1].acc[0], 2 | SIM_ACC_WRITE);
	assert_int_equal(t.epochs[1].acc[1], 3 | SIM_ACC_WRITE);
	assert_int_equal(t.epochs[1].acc[2], 512 | SIM_ACC_WRITE);
	/* The last load alone in the last epoch, a read. */
	assert_int_equal(t.epochs[2].nr_acc, 1);
	assert_int_equal(t.epochs[2].acc[0], 1);
	sim_trace_free(&t);
}

static void test_reject(void **state)
{
	struct sim_trace t;
	char err[256];

	(void)state;
	assert_int_equal(convert(" L zzzz,8\n", 10, &t, err), -EINVAL);
	assert_non_null(strstr(err, "line 1"));
	assert_int_equal(convert(" X 1000,8\n", 10, &t, err), -EINVAL);
	assert_int_equal(convert(" L 1000,0\n", 10, &t, err), -EINVAL);
	assert_int_equal(convert(" L 1000,8 trailing\n", 10, &t, err), -EINVAL);
	assert_int_equal(convert("==1== only chatter\n", 10, &t, err), -EINVAL);
	assert_non_null(strstr(err, "no lackey records"));
	assert_int_equal(convert(" L ffffffffffffffff,8\n", 10, &t, err), -EINVAL);
	assert_null(t.epochs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convert),
	    cmocka_unit_test(test_reject),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
