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

#include "act/swap_share.h"
#include "act/swap_stat.h"

#define MiB ((uint64_t)1 << 20)

static void test_parsers(void **state)
{
	struct mtd_swap_stat s;
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

	struct mtd_swap_device d[4];
	assert_int_equal(
	    mtd_swap_parse_swaps(
		"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
		"/dev/zram3                              partition\t1048572\t\t512\t\t100\n"
		"/swapfile                               file\t\t524284\t\t0\t\t-2\n"
		"/dev/zram12                             partition\t4\t\t0\t\t5\n",
		d, 4),
	    3);
	assert_true(d[0].zram && d[0].zram_nr == 3 && d[0].priority == 100);
	assert_int_equal(d[0].size_bytes, 1048572ULL * 1024);
	assert_int_equal(d[0].used_bytes, 512 * 1024);
	assert_true(!d[1].zram && d[1].priority == -2);
	assert_true(d[2].zram && d[2].zram_nr == 12);
	/* More lines than room: counted, the first ones kept. */
	assert_int_equal(mtd_swap_parse_swaps("Filename Type Size Used Priority\n"
					      "/a file 4 0 -2\n/b file 4 0 -3\n",
					      d, 1),
			 2);
	assert_int_equal(mtd_swap_parse_swaps("garbage\n", d, 4), -EPROTO);
	assert_int_equal(
	    mtd_swap_parse_swaps("Filename Type Size Used Priority\n/a file x 0 1\n", d, 4),
	    -EPROTO);

	struct mtd_swap_device z = {0};
	assert_int_equal(
	    mtd_swap_parse_mm_stat(
		"  4096       74    12288  8388608  2109440        0        0        0        0\n",
		&z),
	    0);
	assert_int_equal(z.stored_bytes, 4096);
	assert_int_equal(z.pool_bytes, 12288);
	assert_int_equal(z.limit_bytes, 8 * MiB);
	assert_int_equal(mtd_swap_parse_mm_stat("1 2 3\n", &z), -EPROTO);
}

/* A stat of devices: name, size and used in MiB, priority, zram pool and limit in MiB. */
static void dev(struct mtd_swap_stat *s, bool zram, uint64_t size, uint64_t used, int prio,
		uint64_t pool, uint64_t limit)
{
	struct mtd_swap_device *d = &s->dev[s->nr_listed++];

	*d = (struct mtd_swap_device){.size_bytes = size * MiB,
				      .used_bytes = used * MiB,
				      .priority = prio,
				      .zram = zram,
				      .zram_known = zram,
				      .pool_bytes = pool * MiB,
				      .limit_bytes = limit * MiB};
	s->total_bytes += size * MiB;
	s->free_bytes += (size - used) * MiB;
}

/* The room before a write fails, in the kernel's order of devices. */
static void test_room(void **state)
{
	struct mtd_swap_stat s = {0};
	int b;
	(void)state;

	/* No lines (swaps unreadable): SwapFree. */
	s.total_bytes = 100 * MiB;
	s.free_bytes = 60 * MiB;
	assert_int_equal(mtd_swap_room(&s, &b), 60 * MiB);
	assert_int_equal(b, -1);
	/* One zram without a limit: its free slots. */
	s = (struct mtd_swap_stat){0};
	dev(&s, true, 256, 64, 100, 20, 0);
	assert_int_equal(mtd_swap_room(&s, &b), 192 * MiB);
	assert_int_equal(b, -1);
	/* With an 8 MiB limit and 6 MiB of pool: 2 MiB, whatever its slots say. */
	s = (struct mtd_swap_stat){0};
	dev(&s, true, 256, 64, 100, 6, 8);
	assert_int_equal(mtd_swap_room(&s, &b), 2 * MiB);
	assert_int_equal(b, 0);
	/* ... and a disk swap of lower priority behind it is never reached: the zram has free
	 * slots, so the kernel keeps writing to it and every write fails. */
	dev(&s, false, 1024, 0, -2, 0, 0);
	assert_int_equal(mtd_swap_room(&s, &b), 2 * MiB);
	/* The pool at its limit: nothing. */
	s.dev[0].pool_bytes = 9 * MiB;
	assert_int_equal(mtd_swap_room(&s, &b), 0);
	/* A zram whose slots run out first is full by its slots: the disk is next. */
	s = (struct mtd_swap_stat){0};
	dev(&s, true, 64, 54, 100, 5, 512);
	dev(&s, false, 1024, 0, -2, 0, 0);
	assert_int_equal(mtd_swap_room(&s, &b), (10 + 1024) * MiB);
	assert_int_equal(b, -1);
	/* Two zram of one priority share the writes: the one with 2 MiB left stops both at
	 * 4 MiB. */
	s = (struct mtd_swap_stat){0};
	dev(&s, true, 256, 0, 50, 6, 8);
	dev(&s, true, 256, 0, 50, 0, 0);
	assert_int_equal(mtd_swap_room(&s, &b), 4 * MiB);
	assert_int_equal(b, 0);
	/* A grant: the room past the reserve, less what others were granted. */
	struct mtd_swap_grant g = {0};
	dev(&g.sw, false, 1024, 0, -2, 0, 0);
	mtd_swap_grant_from(&g, 64 * MiB, 900 * MiB, 1024 * MiB);
	assert_int_equal(g.room_bytes, 960 * MiB);
	assert_int_equal(g.bytes, 60 * MiB);
	mtd_swap_grant_from(&g, 64 * MiB, 0, 100 * MiB);
	assert_int_equal(g.bytes, 100 * MiB);
	mtd_swap_grant_from(&g, 2048 * MiB, 0, 100 * MiB);
	assert_int_equal(g.bytes, 0);
	/* After a batch: free slots are full at once; a pool limit while 2 MiB still fit past
	 * the reserve is not (the pool grew by the compressed size only). */
	g = (struct mtd_swap_grant){0};
	dev(&g.sw, false, 1024, 1000, -2, 0, 0);
	mtd_swap_grant_from(&g, 16 * MiB, 0, 0);
	assert_true(mtd_swap_full_after(&g));
	g = (struct mtd_swap_grant){0};
	dev(&g.sw, true, 1024, 40, 100, 5, 32);
	mtd_swap_grant_from(&g, 16 * MiB, 0, 0);
	assert_int_equal(g.binding, 0);
	assert_int_equal(g.room_bytes, 11 * MiB);
	assert_false(mtd_swap_full_after(&g));
	g.sw.dev[0].pool_bytes = 15 * MiB;
	mtd_swap_grant_from(&g, 16 * MiB, 0, 0);
	assert_int_equal(g.room_bytes, 1 * MiB);
	assert_true(mtd_swap_full_after(&g));
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
	put(dir, "block/zram7/mm_stat", "268435456 50331648 52428800 104857600 52428800 0 0 0 0\n");
	/* zram9 is listed but unreadable: it counts as empty and unlimited. */
	assert_int_equal(mtd_swap_read(dir, dir, &s), 0);
	assert_int_equal(s.nr_devices, 2);
	assert_int_equal(s.nr_zram, 1);
	assert_int_equal(s.zram_stored_bytes, 256 * MiB);
	assert_int_equal(s.zram_pool_bytes, 50 * MiB);
	assert_int_equal(s.dev[0].limit_bytes, 100 * MiB);
	assert_false(s.dev[1].zram_known);
	/* zram7 has 50 MiB of pool left under its limit; zram9 is of lower priority. */
	assert_int_equal(mtd_swap_room(&s, NULL), 50 * MiB);
	assert_int_equal(mtd_swap_used(&s), 256 * MiB);
	assert_int_equal(mtd_swap_pool_share(&s, 128 * MiB), 25 * MiB);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
	assert_true(mtd_swap_read("/nonexistent", "/nonexistent", &s) < 0);
}

/* Two VM loops in one interval: the second is granted what the first has not taken, never
 * the same room twice; a grant given back is room again. */
static void test_share(void **state)
{
	char dir[] = "/tmp/memtide-test-share.XXXXXX", p[256];
	struct mtd_swap_share sh;
	struct mtd_swap_grant a, b, c;
	(void)state;

	assert_non_null(mkdtemp(dir));
	put(dir, "meminfo", "SwapTotal: 1048576 kB\nSwapFree: 1048576 kB\n");
	put(dir, "swaps", "Filename Type Size Used Priority\n/swapfile file 1048576 0 -2\n");
	mtd_swap_share_init(&sh, dir, dir);
	assert_int_equal(mtd_swap_share_take(&sh, 600 * MiB, 64 * MiB, &a), 0);
	assert_int_equal(a.bytes, 600 * MiB);
	assert_int_equal(mtd_swap_share_take(&sh, 600 * MiB, 64 * MiB, &b), 0);
	assert_int_equal(b.bytes, 360 * MiB); /* 1024 - 64 reserved - 600 held */
	assert_int_equal(b.others_bytes, 600 * MiB);
	assert_true(a.bytes + b.bytes <= 960 * MiB);
	mtd_swap_share_done(&sh, a.bytes);
	assert_int_equal(mtd_swap_share_take(&sh, 1024 * MiB, 64 * MiB, &c), 0);
	assert_int_equal(c.bytes, 600 * MiB);
	mtd_swap_share_done(&sh, b.bytes);
	mtd_swap_share_done(&sh, c.bytes);
	mtd_swap_share_done(&sh, 1); /* more than is held: nothing below zero */
	assert_int_equal(sh.outstanding_bytes, 0);
	/* Figures that cannot be read: an error, nothing granted. */
	snprintf(p, sizeof(p), "%s/meminfo", dir);
	unlink(p);
	assert_true(mtd_swap_share_take(&sh, 1 * MiB, 0, &a) < 0);
	assert_int_equal(a.bytes, 0);
	assert_int_equal(sh.outstanding_bytes, 0);
	mtd_swap_share_destroy(&sh);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parsers), cmocka_unit_test(test_pool_share),
	    cmocka_unit_test(test_room),    cmocka_unit_test(test_read),
	    cmocka_unit_test(test_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
