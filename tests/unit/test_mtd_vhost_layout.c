// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_vhost_layout.c - the vhost-user memory table checked against the QMP-derived
 * guest RAM layout (host/vsock/vhost_layout.c over host/act/ram_layout.h).
 *
 * The table is the one QEMU 7.2 sent memtided for the e2e guest (256 MiB, memory-backend
 * "mem": [0, 0xa0000) and [0xc0000, 0x10000000), the second holding the BIOS-shadow ROM
 * pieces below 1 MiB); the layout is what QMP lists as guest RAM for it (the ram pieces of
 * "mem", ROM pieces left out).  Checked: they agree; a table whose QEMU address is off by a
 * page, a table that misses RAM QMP knows, a table with RAM QMP does not list above 1 MiB,
 * an unsure QMP layout and empty inputs are each refused with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vsock/vhost_layout.h"

#define VA 0x7fb0cbfff000ull

static void table(struct vu_layout_region t[2])
{
	t[0] = (struct vu_layout_region){0, 0xa0000, VA, 0};
	t[1] = (struct vu_layout_region){0xc0000, 0xff40000, VA + 0xc0000, 0xc0000};
}

static void add(struct mtd_ram_layout *l, uint64_t gpa, uint64_t bytes)
{
	struct mtd_ram_region *r = &l->r[l->nr++];

	memset(r, 0, sizeof(*r));
	r->gpa = gpa;
	r->bytes = bytes;
	r->hva = VA + gpa;
	r->block_offset = gpa;
	strcpy(r->block, "mem");
	l->ram_bytes += bytes;
}

/* QMP's guest RAM: the ram (not rom) pieces of "mem" in the flat view. */
static void layout(struct mtd_ram_layout *l)
{
	memset(l, 0, sizeof(*l));
	add(l, 0, 0xa0000);
	add(l, 0xca000, 0x3000);
	add(l, 0xe8000, 0x8000);
	add(l, 0x100000, 0xff00000);
	l->sure = true;
}

static void test_agree(void **state)
{
	struct vu_layout_region t[2];
	static struct mtd_ram_layout l;
	char why[300];
	(void)state;

	table(t);
	layout(&l);
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "same QEMU address"));
}

static void test_disagree(void **state)
{
	struct vu_layout_region t[2];
	static struct mtd_ram_layout l;
	char why[300];
	(void)state;

	table(t);
	layout(&l);
	t[1].qemu_va += 4096;
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "per QMP"));

	table(t);
	t[1].bytes -= 0x200000; /* QMP's top 2 MiB missing */
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "not in the memory table"));

	table(t);
	layout(&l);
	l.r[3].bytes -= 0x100000; /* the table has RAM QMP does not list, above 1 MiB */
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "does not list"));

	layout(&l);
	l.sure = false;
	strcpy(l.why, "gpa2hva disagrees");
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "gpa2hva disagrees"));

	layout(&l);
	assert_int_equal(mtd_vhost_layout_check(t, 0, &l, why, sizeof(why)), 0);
	l.nr = 0;
	assert_int_equal(mtd_vhost_layout_check(t, 2, &l, why, sizeof(why)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_agree),
	    cmocka_unit_test(test_disagree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
