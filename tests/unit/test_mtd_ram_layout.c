/*
 * test_mtd_ram_layout.c - the vhost-user memory table checked against QEMU's `info mtree -f`
 * and /proc/PID/maps (host/ram_layout.c), on text recorded from QEMU 7.2 running this
 * project's e2e guest (256 MiB, -machine memory-backend=mem), then altered.
 *
 * Checked: the recorded table (two regions: below the VGA hole, and from 0xc0000 with the
 * BIOS-shadow ROM pieces) agrees; only the "memory" address space's view is read; a region
 * shifted by a page, a wrong backend offset, a region past RAM, a RAM piece missing from
 * the table and a QEMU address QEMU does not map are each caught with a reason; text with
 * no memory view is -EPROTO.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ram_layout.h"

static const char mtree[] =
    "FlatView #0\n"
    " AS \"memory\", root: system\n"
    " AS \"cpu-memory-0\", root: system\n"
    " AS \"vhost-user-vsock-pci\", root: bus master container\n"
    " Root memory region: system\n"
    "  0000000000000000-000000000009ffff (prio 0, ram): mem\n"
    "  00000000000a0000-00000000000bffff (prio 1, i/o): vga-lowmem\n"
    "  00000000000c0000-00000000000c9fff (prio 0, rom): mem @00000000000c0000\n"
    "  00000000000ca000-00000000000ccfff (prio 0, ram): mem @00000000000ca000\n"
    "  00000000000cd000-00000000000e7fff (prio 0, rom): mem @00000000000cd000\n"
    "  00000000000e8000-00000000000effff (prio 0, ram): mem @00000000000e8000\n"
    "  00000000000f0000-00000000000fffff (prio 0, rom): mem @00000000000f0000\n"
    "  0000000000100000-000000000fffffff (prio 0, ram): mem @0000000000100000\n"
    "  00000000fd000000-00000000fdffffff (prio 1, ram): vga.vram\n"
    "  00000000fe000000-00000000fe000fff (prio 0, i/o): virtio-pci-common-vhost-vsock\n"
    "  00000000fffc0000-00000000ffffffff (prio 0, rom): pc.bios\n"
    "\n"
    "FlatView #1\n"
    " AS \"cpu-smm-0\", root: memory\n"
    " Root memory region: memory\n"
    "  0000000000000000-00000000000bffff (prio 0, ram): mem\n";

static const char maps[] = "55d0c0a00000-55d0c0b00000 r-xp 00000000 08:01 1234 /usr/bin/qemu\n"
			   "7fb0cbfff000-7fb0dbfff000 rw-s 00000000 00:01 77 /memfd:mem (deleted)\n"
			   "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";

static void recorded(struct vu_layout_region r[2])
{
	r[0] = (struct vu_layout_region){0, 0xa0000, 0x7fb0cbfff000, 0};
	r[1] = (struct vu_layout_region){0xc0000, 0xff40000, 0x7fb0cc0bf000, 0xc0000};
}

static void test_recorded_table_agrees(void **state)
{
	struct vu_layout_region r[2];
	struct mtd_mtree_range m[32];
	char why[200];
	(void)state;

	assert_int_equal(mtd_mtree_parse(mtree, m, 32), 9); /* 7 of mem, vga.vram, pc.bios */
	assert_string_equal(m[0].name, "mem");
	assert_int_equal(m[6].offset, 0x100000);
	recorded(r);
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "agree"));
}

static void test_mismatches_caught(void **state)
{
	struct vu_layout_region r[2];
	char why[200];
	(void)state;

	recorded(r);
	r[1].gpa += 0x1000; /* shifted: offsets disagree */
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "offset"));

	recorded(r);
	r[1].fd_offset = 0x1000;
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 0);

	recorded(r);
	r[1].bytes += 0x1000; /* past the end of RAM */
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "not RAM"));

	recorded(r);
	r[1].bytes -= 0x100000; /* the table lacks RAM QEMU maps */
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "lacks"));

	recorded(r);
	assert_int_equal(mtd_ram_layout_check(r, 1, mtree, maps, why, sizeof(why)), 0);

	recorded(r);
	r[0].qemu_va = 0x1000; /* not a QEMU mapping */
	assert_int_equal(mtd_ram_layout_check(r, 2, mtree, maps, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no mapping"));

	recorded(r);
	assert_int_equal(mtd_ram_layout_check(r, 0, mtree, maps, why, sizeof(why)), 0);
	assert_int_equal(mtd_ram_layout_check(r, 2, "FlatView #0\n AS \"io\", root: io\n", maps,
					      why, sizeof(why)),
			 -EPROTO);
	assert_int_equal(mtd_ram_layout_check(r, 2, "", maps, why, sizeof(why)), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recorded_table_agrees),
	    cmocka_unit_test(test_mismatches_caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
