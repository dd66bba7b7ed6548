// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_swap_stat.c - host swap room and the compressed pools' cost (host/act/swap_stat.c), on
 * text in the kernel's formats and on a stand-in /proc and /sys.
 */
#include <errno.h>
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

#include "act/swap_stat.h"

#define MiB ((uint64_t)1 << 20)

static void test_parsers(void **state)
{
	struct mtd_swap_stat s;
	unsigned z[4], nd;
	uint64_t stored, pool;
	(void)state;

	assert_int_equal(mtd_swap_parse_meminfo("MemTotal: 100 kB\nSwapCached: 0 kB\n"
						"SwapTotal:  2097148 kB\nSwapFree:   1048576 kB\n"
						"Zswap:        10240 kB\nZswapped:     40960 kB\n",
						&s),
			 0);
	assert_int_equal(s.total_bytes, 2097148ULL * 1024);
	assert_int_equal(s.free_bytes, 1024 * MiB);
	assert_int_equal(s.zswap_pool_bytes, 10 * MiB);
	assert_int_equal(s.zswap_stored_bytes, 40 * MiB);
	/* No SwapTotal, or free above total: not meminfo as the kernel writes it. */
	assert_int_equal(mtd_swap_parse_meminfo("MemTotal: 100 kB\n", &s), -EPROTO);
	assert_int_equal(mtd_swap_parse_meminfo("SwapTotal: 1 kB\nSwapFree: 2 kB\n", &s), -EPROTO);
	assert_int_equal(mtd_swap_parse_meminfo("SwapTotal: x kB\nSwapFree: 0 kB\n", &s), -EPROTO);

	assert_int_equal(
	    mtd_swap_parse_swaps(
		"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
		"/dev/zram3                              partition\t1048572\t\t0\t\t100\n"
		"/swapfile                               file\t\t524284\t\t0\t\t-2\n"
		"/dev/zram12                             partition\t4\t\t0\t\t5\n",
		z, 4, &nd),
	    2);
	assert_int_equal(nd, 3);
	assert_int_equal(z[0], 3);
	assert_int_equal(z[1], 12);
	assert_int_equal(mtd_swap_parse_swaps("garbage\n", z, 4, &nd), -EPROTO);

	assert_int_equal(
	    mtd_swap_parse_mm_stat(
		"  4096       74    12288        0  2109440        0        0        0        0\n",
		&stored, &pool),
	    0);
	assert_int_equal(stored, 4096);
	assert_int_equal(pool, 12288);
	assert_int_equal(mtd_swap_parse_mm_stat("1 2\n", &stored, &pool), -EPROTO);
}

static void test_pool_share(void **state)
{
	struct mtd_swap_stat s = {.total_bytes = 2048 * MiB,
				  .free_bytes = 1024 * MiB,
				  .zram_pool_bytes = 200 * MiB,
				  .zswap_pool_bytes = 56 * MiB};
	(void)state;

	assert_int_equal(mtd_swap_used(&s), 1024 * MiB);
	assert_int_equal(mtd_swap_pool(&s), 256 * MiB);
	/* A VM with half of the swap in use holds half of the pools. */
	assert_int_equal(mtd_swap_pool_share(&s, 512 * MiB), 128 * MiB);
	assert_int_equal(mtd_swap_pool_share(&s, 4096 * MiB), 256 * MiB);
	/* Disk swap only: no RAM cost. */
	s.zram_pool_bytes = s.zswap_pool_bytes = 0;
	assert_int_equal(mtd_swap_pool_share(&s, 512 * MiB), 0);
	/* No swap in use. */
	s.free_bytes = s.total_bytes;
	s.zram_pool_bytes = 1;
	assert_int_equal(mtd_swap_pool_share(&s, 512 * MiB), 0);
}

static void put(const char *dir, const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_read(void **state)
{
	char dir[] = "/tmp/memtide-test-swap.XXXXXX", p[256];
	struct mtd_swap_stat s;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/block", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/block/zram7", dir);
	mkdir(p, 0700);
	put(dir, "meminfo", "SwapTotal: 1048576 kB\nSwapFree: 786432 kB\n");
	put(dir, "swaps",
	    "Filename Type Size Used Priority\n/dev/zram7 partition 1048576 262144 100\n"
	    "/dev/zram9 partition 4 0 1\n");
	put(dir, "block/zram7/mm_stat", "268435456 50331648 52428800 0 52428800 0 0 0 0\n");
	/* zram9 is listed but unreadable: it counts as empty. */
	assert_int_equal(mtd_swap_read(dir, dir, &s), 0);
	assert_int_equal(s.nr_devices, 2);
	assert_int_equal(s.nr_zram, 1);
	assert_int_equal(s.zram_stored_bytes, 256 * MiB);
	assert_int_equal(s.zram_pool_bytes, 50 * MiB);
	assert_int_equal(mtd_swap_used(&s), 256 * MiB);
	assert_int_equal(mtd_swap_pool_share(&s, 128 * MiB), 25 * MiB);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
	assert_true(mtd_swap_read("/nonexistent", "/nonexistent", &s) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parsers),
	    cmocka_unit_test(test_pool_share),
	    cmocka_unit_test(test_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
