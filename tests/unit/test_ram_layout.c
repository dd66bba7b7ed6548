// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ram_layout.c - the guest RAM layout (host/act/ram_layout.c) on recorded QEMU 7.2 answers.
 *
 * tests/unit/data/ram_layout/CASE/ holds what memtided asks a QEMU, recorded from Debian's
 * qemu-system-x86 7.2 started paused (-S) with the case's memory options: `info mtree -f`,
 * `info ramblock`, query-memdev, query-memory-devices, `gpa2hva` of the first and last page of
 * every guest-RAM range, /proc/PID/smaps (trimmed to the mappings around guest RAM) and the
 * /proc/PID/fd link targets.  Cases:
 *   pc-1g         -m 1G: pc.ram below the PCI hole only
 *   pc-5g         -m 5G: 3 GiB below the hole, 2 GiB above 4 GiB (pc.ram @0xc0000000)
 *   q35-5g        -M q35 -m 5G: 2 GiB below, 3 GiB above (pc.ram @0x80000000)
 *   dimm-hotplug  -m 1G,slots=4,maxmem=8G, a cold-plugged memfd DIMM (share=on) and a DIMM
 *                 hotplugged with object-add + device_add (memory-backend-ram)
 *   mlock         -overcommit mem-lock=on
 *   hugetlb       a DIMM on hugetlbfs (2 MiB pages) beside anonymous pc.ram
 * Then the checks that make a layout unsure, by editing one answer at a time.
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
#include <json-c/json.h>

#include "act/ram_layout.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* ---- loading a recorded case --------------------------------------------------------- */

static char *slurp(const char *cs, const char *file)
{
	const char *root = getenv("MEMTIDE_SRCDIR");
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/tests/unit/data/ram_layout/%s/%s", root ? root : ".", cs,
		 file);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s (run from the source tree or set MEMTIDE_SRCDIR)", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return buf;
}

/* Everything a case holds, parsed, ready for mtd_ram_layout_build. */
struct rec {
	struct mtd_flat_range flat[256];
	struct mtd_ramblock blocks[64];
	char memdevs[16][MTD_RAM_NAME_MAX];
	struct mtd_memdevice devs[16];
	uint64_t first[256], last[256];
	struct mtd_vma vmas[64];
	char *fds;
	struct mtd_ram_inputs in;
};

/* The recorded gpa2hva answer for addr ("== gpa2hva 0x..." then QEMU's line). */
static uint64_t recorded_hva(const char *text, uint64_t addr)
{
	char key[64];
	const char *p;
	uint64_t hva = 0;

	snprintf(key, sizeof(key), "== gpa2hva 0x%" PRIx64 "\n", addr);
	p = strstr(text, key);
	if (!p)
		fail_msg("no recorded gpa2hva for 0x%" PRIx64, addr);
	if (mtd_ram_parse_gpa2hva(p + strlen(key), &hva, NULL, 0) < 0)
		return 0;
	return hva;
}

static struct rec *load(const char *cs)
{
	struct rec *r = calloc(1, sizeof(*r));
	char *t;
	struct json_object *j;
	int n;
	bool is_ram[256];

	assert_non_null(r);
	t = slurp(cs, "mtree.txt");
	n = mtd_ram_parse_flatview(t, r->flat, 256);
	free(t);
	assert_true(n > 0);
	r->in.flat = r->flat;
	r->in.nr_flat = (size_t)n;
	t = slurp(cs, "ramblock.txt");
	n = mtd_ram_parse_ramblocks(t, r->blocks, 64);
	free(t);
	assert_true(n > 0);
	r->in.blocks = r->blocks;
	r->in.nr_blocks = (size_t)n;
	t = slurp(cs, "memdev.json");
	j = json_tokener_parse(t);
	free(t);
	n = mtd_ram_parse_memdevs(j, r->memdevs, 16);
	json_object_put(j);
	assert_true(n > 0);
	r->in.memdevs = r->memdevs;
	r->in.nr_memdevs = (size_t)n;
	t = slurp(cs, "memory-devices.json");
	j = json_tokener_parse(t);
	free(t);
	n = mtd_ram_parse_memdevices(j, r->devs, 16);
	json_object_put(j);
	assert_true(n >= 0);
	r->in.devices = r->devs;
	r->in.nr_devices = (size_t)n;
	t = slurp(cs, "gpa2hva.txt");
	mtd_ram_guest_ranges(&r->in, is_ram);
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < r->in.nr_flat; i++) {
		if (!is_ram[i])
			continue;
		r->first[i] = recorded_hva(t, r->flat[i].start);
		r->last[i] = recorded_hva(t, r->flat[i].end - 4096);
		if (r->first[i] < lo)
			lo = r->first[i];
		if (r->first[i] + (r->flat[i].end - r->flat[i].start) > hi)
			hi = r->first[i] + (r->flat[i].end - r->flat[i].start);
	}
	free(t);
	r->in.hva_first = r->first;
	r->in.hva_last = r->last;
	t = slurp(cs, "smaps.txt");
	n = mtd_ram_parse_smaps(t, lo, hi, r->vmas, 64);
	free(t);
	assert_true(n > 0);
	r->in.vmas = r->vmas;
	r->in.nr_vmas = (size_t)n;
	r->fds = slurp(cs, "fd.txt");
	r->in.vfio = mtd_ram_fds_pin_memory(r->fds);
	return r;
}

static void unload(struct rec *r)
{
	free(r->fds);
	free(r);
}

static struct mtd_ram_layout *build(struct rec *r)
{
	struct mtd_ram_layout *l = calloc(1, sizeof(*l));

	assert_non_null(l);
	assert_int_equal(mtd_ram_layout_build(&r->in, l), 0);
	return l;
}

/* A region must translate both ways and agree with QEMU's own answer for its last page. */
static void check_region(const struct mtd_ram_layout *l, size_t i, uint64_t gpa, uint64_t bytes,
			 const char *block, uint64_t block_offset)
{
	const struct mtd_ram_region *r = &l->r[i];
	uint64_t hva, back, contig;

	assert_true(i < l->nr);
	assert_int_equal(r->gpa, gpa);
	assert_int_equal(r->bytes, bytes);
	assert_string_equal(r->block, block);
	assert_int_equal(r->block_offset, block_offset);
	assert_int_equal(mtd_ram_layout_gpa_to_hva(l, gpa + bytes - 4096, &hva, &contig), 0);
	assert_int_equal(hva, r->hva + bytes - 4096);
	assert_int_equal(contig, 4096);
	assert_int_equal(mtd_ram_layout_hva_to_gpa(l, hva, &back), 0);
	assert_int_equal(back, gpa + bytes - 4096);
	assert_int_equal(mtd_ram_layout_ram_addr_to_gpa(l, r->ram_addr + 8192, &back), 0);
	assert_int_equal(back, gpa + 8192);
	assert_ptr_equal(mtd_ram_layout_find(l, gpa), r);
}

/* ---- the recorded cases -------------------------------------------------------------- */

static void test_pc_1g(void **state)
{
	struct rec *r = load("pc-1g");
	struct mtd_ram_layout *l = build(r);
	uint64_t hva;
	(void)state;

	assert_true(l->sure);
	assert_false(l->vfio);
	assert_int_equal(l->nr, 2);
	check_region(l, 0, 0, 0xa0000, "pc.ram", 0);
	check_region(l, 1, 0x100000, 1 * GiB - 0x100000, "pc.ram", 0x100000);
	/* The low 640 KiB are mapped but kept (the chipset remaps the first MiB). */
	assert_false(l->r[0].evictable);
	assert_true(l->r[1].evictable);
	assert_int_equal(l->r[1].backing, MTD_RAM_ANON);
	assert_true(l->r[1].thp);
	assert_false(l->r[1].locked);
	assert_int_equal(l->evictable_bytes, 1 * GiB - 0x100000);
	assert_int_equal(l->ram_bytes, 1 * GiB - 0x60000);
	assert_string_equal(l->why, "");
	/* Both ranges of pc.ram sit at one base; the legacy hole and the PCI hole are not RAM. */
	assert_int_equal(l->r[1].hva - l->r[1].block_offset, l->r[0].hva);
	assert_int_equal(mtd_ram_layout_gpa_to_hva(l, 0xb8000, &hva, NULL), -ERANGE);
	assert_int_equal(mtd_ram_layout_gpa_to_hva(l, 0xfee00000, &hva, NULL), -ERANGE);
	assert_int_equal(mtd_ram_layout_gpa_to_hva(l, 1 * GiB, &hva, NULL), -ERANGE);
	free(l);
	unload(r);
}

static void test_above_4g_pc_and_q35(void **state)
{
	struct rec *r = load("pc-5g");
	struct mtd_ram_layout *l = build(r);
	(void)state;

	assert_true(l->sure);
	assert_int_equal(l->nr, 3);
	check_region(l, 1, 0x100000, 3 * GiB - 0x100000, "pc.ram", 0x100000);
	check_region(l, 2, 4 * GiB, 2 * GiB, "pc.ram", 3 * GiB);
	assert_int_equal(l->r[2].hva, l->r[0].hva + 3 * GiB);
	assert_true(l->r[2].evictable);
	assert_int_equal(l->evictable_bytes, 5 * GiB - 0x100000);
	free(l);
	unload(r);

	r = load("q35-5g");
	l = build(r);
	assert_true(l->sure);
	assert_int_equal(l->nr, 3);
	check_region(l, 1, 0x100000, 2 * GiB - 0x100000, "pc.ram", 0x100000);
	check_region(l, 2, 4 * GiB, 3 * GiB, "pc.ram", 2 * GiB);
	assert_int_equal(l->evictable_bytes, 5 * GiB - 0x100000);
	free(l);
	unload(r);
}

static void test_dimms_cold_and_hotplugged(void **state)
{
	struct rec *r = load("dimm-hotplug");
	struct mtd_ram_layout *l = build(r);
	char desc[1024];
	(void)state;

	assert_true(l->sure);
	assert_int_equal(l->nr, 4);
	check_region(l, 2, 4 * GiB, 256 * MiB, "mem1", 0);
	check_region(l, 3, 4 * GiB + 256 * MiB, 512 * MiB, "hp1", 0);
	/* The cold-plugged DIMM is a shared memfd (shmem: kept, pageout could not be checked),
	 * the hotplugged one is anonymous; each carries its device's id. */
	assert_string_equal(l->r[2].device, "dimm1");
	assert_false(l->r[2].hotplugged);
	assert_int_equal(l->r[2].backing, MTD_RAM_SHMEM);
	assert_false(l->r[2].evictable);
	assert_non_null(strstr(l->why, "RAM block mem1 is shared memory"));
	assert_string_equal(l->r[3].device, "dimmhp1");
	assert_true(l->r[3].hotplugged);
	assert_int_equal(l->r[3].backing, MTD_RAM_ANON);
	assert_true(l->r[3].evictable);
	/* mem1 was created before pc.ram, so QEMU's ram_addr space starts with it: the
	 * plugin-visible offsets are not GPAs even below 4 GiB. */
	assert_int_equal(l->r[2].ram_addr, 0);
	assert_int_equal(l->r[1].ram_addr, 256 * MiB + 0x100000);
	assert_int_equal(l->evictable_bytes, 1 * GiB - 0x100000 + 512 * MiB);
	assert_int_equal(mtd_ram_layout_describe(l, desc, sizeof(desc)), 0);
	assert_non_null(strstr(desc, "hp1@0x0 (dimmhp1, hotplugged)"));
	assert_non_null(strstr(desc, "shared memory"));
	free(l);
	unload(r);
}

static void test_mlock_and_hugetlb_are_kept(void **state)
{
	struct rec *r = load("mlock");
	struct mtd_ram_layout *l = build(r);
	(void)state;

	assert_true(l->sure); /* the map is known; it just cannot be paged out */
	assert_true(l->r[1].locked);
	assert_int_equal(l->evictable_bytes, 0);
	assert_non_null(strstr(l->why, "RAM block pc.ram is locked in memory"));
	free(l);
	unload(r);

	r = load("hugetlb");
	l = build(r);
	assert_true(l->sure);
	assert_int_equal(l->nr, 3);
	check_region(l, 2, 4 * GiB, 64 * MiB, "hmem", 0);
	assert_int_equal(l->r[2].backing, MTD_RAM_HUGETLB);
	assert_int_equal(l->r[2].page_bytes, 2 * MiB);
	assert_false(l->r[2].evictable);
	assert_true(l->r[1].evictable);
	assert_int_equal(l->evictable_bytes, 512 * MiB - 0x100000);
	assert_non_null(strstr(l->why, "RAM block hmem is on hugetlbfs (2048 KiB pages)"));
	free(l);
	unload(r);
}

static void test_vfio_pins_everything(void **state)
{
	struct rec *r = load("pc-1g");
	struct mtd_ram_layout *l;
	(void)state;

	assert_false(mtd_ram_fds_pin_memory(r->fds));
	assert_true(mtd_ram_fds_pin_memory("/dev/null\n/dev/vfio/vfio\n/dev/vfio/12\n"));
	assert_true(mtd_ram_fds_pin_memory("anon_inode:[vfio-device]\n"));
	assert_true(mtd_ram_fds_pin_memory("socket:[1]\n/dev/iommu\n"));
	assert_false(mtd_ram_fds_pin_memory("/dev/vfio\n/tmp/dev/iommu\n"));
	r->in.vfio = true;
	l = build(r);
	assert_true(l->sure);
	assert_true(l->vfio);
	assert_int_equal(l->evictable_bytes, 0);
	assert_non_null(strstr(l->why, "VFIO"));
	free(l);
	unload(r);
}

/* ---- what makes a layout unsure ------------------------------------------------------ */

static void expect_unsure(struct rec *r, const char *says)
{
	struct mtd_ram_layout *l = build(r);

	assert_false(l->sure);
	assert_int_equal(l->evictable_bytes, 0);
	if (!strstr(l->why, says))
		fail_msg("why '%s' does not say '%s'", l->why, says);
	free(l);
}

static void test_unsure_maps(void **state)
{
	struct rec *r = load("pc-5g");
	(void)state;

	/* QEMU translates the last page of the range above 4 GiB somewhere else. */
	r->last[r->in.nr_flat - 1] += 4096;
	expect_unsure(r, "does not translate pc.ram's range at GPA 0x100000000");
	r->last[r->in.nr_flat - 1] -= 4096;
	/* gpa2hva says "No memory is mapped" for a range the flat view calls RAM. */
	uint64_t keep = r->first[r->in.nr_flat - 1];
	r->first[r->in.nr_flat - 1] = 0;
	expect_unsure(r, "does not translate");
	/* Two ranges of one block disagree on its base (a consistent but shifted answer). */
	r->first[r->in.nr_flat - 1] = keep + 2 * MiB;
	r->last[r->in.nr_flat - 1] += 2 * MiB;
	expect_unsure(r, "to different bases");
	r->first[r->in.nr_flat - 1] = keep;
	r->last[r->in.nr_flat - 1] -= 2 * MiB;
	/* The mapping under guest RAM is gone (QEMU unmapped it, or a wrong process). */
	size_t nv = r->in.nr_vmas;
	r->in.nr_vmas = 0;
	expect_unsure(r, "is not mapped in QEMU");
	r->in.nr_vmas = nv;
	/* pc.ram missing from the ramblock list. */
	size_t nb = r->in.nr_blocks;
	r->in.nr_blocks = 0;
	expect_unsure(r, "not in QEMU's ramblock list");
	r->in.nr_blocks = nb;
	/* No memory backends at all: no flat range is known to be guest RAM. */
	size_t nm = r->in.nr_memdevs;
	r->in.nr_memdevs = 0;
	expect_unsure(r, "no range backed by a memory backend");
	r->in.nr_memdevs = nm;
	/* And back to a sure layout: nothing above leaked. */
	struct mtd_ram_layout *l = build(r);
	assert_true(l->sure);
	free(l);
	unload(r);
}

static void test_unsure_devices(void **state)
{
	struct rec *r = load("dimm-hotplug");
	(void)state;

	/* A DIMM that query-memory-devices places elsewhere than the flat view. */
	r->devs[1].addr += 128 * MiB;
	expect_unsure(r, "dimm dimmhp1 is at GPA");
	r->devs[1].addr -= 128 * MiB;
	/* A DIMM larger than what is mapped of it. */
	r->devs[0].size *= 2;
	expect_unsure(r, "dimm dimm1 has 512 MiB but the flat view maps 256 MiB");
	r->devs[0].size /= 2;
	/* A DIMM whose memdev is not in the flat view at all. */
	snprintf(r->devs[1].memdev, sizeof(r->devs[1].memdev), "nosuch");
	expect_unsure(r, "is not in QEMU's flat view");
	unload(r);
}

static void test_mixed_mappings_are_unsure(void **state)
{
	struct rec *r = load("pc-1g");
	struct mtd_vma v[2];
	(void)state;

	/* pc.ram's span covered by a private and a shared mapping: not one kind. */
	const struct mtd_ram_region *pr;
	struct mtd_ram_layout *l = build(r);
	pr = &l->r[1];
	v[0] = (struct mtd_vma){
	    .start = l->r[0].hva, .end = pr->hva + 8 * MiB, .readable = true, .writable = true};
	v[1] = (struct mtd_vma){.start = pr->hva + 8 * MiB,
				.end = pr->hva + pr->bytes + 4096,
				.readable = true,
				.writable = true,
				.shared = true};
	free(l);
	r->in.vmas = v;
	r->in.nr_vmas = 2;
	expect_unsure(r, "spans mappings of different kinds");
	/* Read-only under guest RAM. */
	v[1].shared = false;
	v[1].writable = false;
	expect_unsure(r, "is not plain read-write memory");
	/* Split but uniform (QEMU's own madvise can split a VMA): still sure. */
	v[1].writable = true;
	l = build(r);
	assert_true(l->sure);
	assert_int_equal(l->r[1].backing, MTD_RAM_ANON);
	/* Shared anonymous memory (memory-backend-ram,share=on) is shmem: kept, and said. */
	snprintf(v[0].path, sizeof(v[0].path), "/dev/zero (deleted)");
	snprintf(v[1].path, sizeof(v[1].path), "/dev/zero (deleted)");
	v[0].shared = v[1].shared = true;
	free(l);
	l = build(r);
	assert_true(l->sure);
	assert_int_equal(l->r[1].backing, MTD_RAM_SHMEM);
	assert_false(l->r[1].evictable);
	assert_non_null(strstr(l->why, "shared memory"));
	/* A regular file: kept, and said. */
	snprintf(v[0].path, sizeof(v[0].path), "/var/lib/guest.ram");
	snprintf(v[1].path, sizeof(v[1].path), "/var/lib/guest.ram");
	v[0].shared = v[1].shared = true;
	free(l);
	l = build(r);
	assert_true(l->sure);
	assert_int_equal(l->r[1].backing, MTD_RAM_FILE);
	assert_int_equal(l->evictable_bytes, 0);
	assert_non_null(strstr(l->why, "backed by the file /var/lib/guest.ram"));
	free(l);
	unload(r);
}

/* ---- parsers on bad input ------------------------------------------------------------ */

static void test_parsers_reject_garbage(void **state)
{
	struct mtd_flat_range f[4];
	struct mtd_ramblock b[2];
	struct mtd_vma v[2];
	uint64_t hva;
	char name[16];
	(void)state;

	assert_int_equal(mtd_ram_parse_flatview("", f, 4), -EPROTO);
	assert_int_equal(mtd_ram_parse_flatview(NULL, f, 4), -EPROTO);
	/* No "memory" address space. */
	assert_int_equal(
	    mtd_ram_parse_flatview("FlatView #0\n AS \"I/O\", root: io\n"
				   "  0000000000000000-0000000000000007 (prio 0, i/o): dma\n",
				   f, 4),
	    -EPROTO);
	/* A cut line inside the memory view. */
	assert_int_equal(
	    mtd_ram_parse_flatview("FlatView #0\n AS \"memory\", root: system\n"
				   "  0000000000000000-00000000 (prio 0, ram): pc.ram\n",
				   f, 4),
	    -EPROTO);
	assert_int_equal(
	    mtd_ram_parse_flatview("FlatView #0\n AS \"memory\", root: system\n"
				   "  0000000000001000-0000000000000fff (prio 0, ram): x\n",
				   f, 4),
	    -EPROTO);
	/* Too many ranges for the caller's array. */
	assert_int_equal(
	    mtd_ram_parse_flatview("FlatView #0\n AS \"memory\", root: system\n"
				   "  0000000000000000-0000000000000fff (prio 0, ram): a\n"
				   "  0000000000001000-0000000000001fff (prio 0, ram): b\n",
				   f, 1),
	    -E2BIG);
	/* nv-ram is RAM, ramd (a device's RAM, e.g. VFIO BARs) and rom are not. */
	assert_int_equal(
	    mtd_ram_parse_flatview(
		"FlatView #0\n AS \"memory\", root: system\n"
		"  0000000000000000-0000000000000fff (prio 0, nv-ram): a\n"
		"  0000000000001000-0000000000001fff (prio 0, ramd): b @0000000000002000\n"
		"  0000000000002000-0000000000002fff (prio 0, rom): c\n",
		f, 4),
	    3);
	assert_true(f[0].ram);
	assert_false(f[1].ram);
	assert_int_equal(f[1].offset, 0x2000);
	assert_false(f[2].ram);

	assert_int_equal(mtd_ram_parse_ramblocks("pc.ram 4 KiB 0x0 0x1000 0x1000\n", b, 2),
			 -EPROTO);
	assert_int_equal(mtd_ram_parse_ramblocks("  Block Name  PSize  Offset  Used  Total\n"
						 "  pc.ram  4 XiB  0x0 0x1000 0x1000\n",
						 b, 2),
			 -EPROTO);
	assert_int_equal(mtd_ram_parse_ramblocks("  Block Name  PSize  Offset  Used  Total\n"
						 "  pc.ram  4 KiB  0x0 0x2000 0x1000\n",
						 b, 2),
			 -EPROTO);

	assert_int_equal(
	    mtd_ram_parse_gpa2hva("No memory is mapped at address 0x140000000\n", &hva, NULL, 0),
	    -ENOENT);
	assert_int_equal(
	    mtd_ram_parse_gpa2hva("Memory at address 0xa0000 is not RAM\n", &hva, NULL, 0),
	    -ENOENT);
	assert_int_equal(mtd_ram_parse_gpa2hva("unknown command: 'gpa2hva'\n", &hva, NULL, 0),
			 -EPROTO);
	assert_int_equal(
	    mtd_ram_parse_gpa2hva("Host virtual address for 0x10 () is 0x1\n", &hva, NULL, 0),
	    -EPROTO);
	assert_int_equal(
	    mtd_ram_parse_gpa2hva("Host virtual address for 0x1000 (pc.ram) is 0x7f0000001000\r\n",
				  &hva, name, sizeof(name)),
	    0);
	assert_int_equal(hva, 0x7f0000001000);
	assert_string_equal(name, "pc.ram");

	assert_int_equal(mtd_ram_parse_smaps("1000-zzzz rw-p 0 0:0 0\n", 0, UINT64_MAX, v, 2),
			 -EPROTO);
	assert_int_equal(mtd_ram_parse_smaps("1000-2000 rw-p 00000000 00:00 0\n3000-4000 rw-s "
					     "00000000 00:01 7 /memfd:x (deleted)\n",
					     0x1800, 0x3800, v, 1),
			 -E2BIG);
	assert_int_equal(mtd_ram_parse_smaps("1000-2000 rw-p 00000000 00:00 0\n3000-4000 rw-s "
					     "00000000 00:01 7 /memfd:x (deleted)\n",
					     0x2000, 0x3800, v, 2),
			 1);
	assert_true(v[0].shared);
	assert_string_equal(v[0].path, "/memfd:x (deleted)");

	struct json_object *j = json_tokener_parse("[{\"type\":\"dimm\",\"data\":{\"size\":1}}]");
	struct mtd_memdevice d[1];
	assert_int_equal(mtd_ram_parse_memdevices(j, d, 1), -EPROTO); /* no addr */
	json_object_put(j);
	j = json_tokener_parse("{\"id\":\"x\"}");
	char ids[1][MTD_RAM_NAME_MAX];
	assert_int_equal(mtd_ram_parse_memdevs(j, ids, 1), -EPROTO); /* not an array */
	json_object_put(j);
}

/* ---- the cheap re-check against /proc/PID/maps ------------------------------------- */

static void test_recheck(void **state)
{
	struct rec *r = load("pc-1g");
	struct mtd_ram_layout *l = build(r);
	char dir[] = "/tmp/memtide-test-proc.XXXXXX", path[256];
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/42", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/42/maps", dir);
	/* The same mapping as recorded (smaps headers are maps lines). */
	f = fopen(path, "w");
	fprintf(f, "%" PRIx64 "-%" PRIx64 " rw-p 00000000 00:00 0 \n", l->r[0].hva,
		l->r[0].hva + GiB);
	fclose(f);
	assert_int_equal(mtd_ram_layout_recheck(l, 42, dir), 0);
	/* The guest RAM is now half unmapped. */
	f = fopen(path, "w");
	fprintf(f, "%" PRIx64 "-%" PRIx64 " rw-p 00000000 00:00 0 \n", l->r[0].hva,
		l->r[0].hva + GiB / 2);
	fclose(f);
	assert_int_equal(mtd_ram_layout_recheck(l, 42, dir), -ESTALE);
	/* Replaced by a shared mapping of a file at the same address. */
	f = fopen(path, "w");
	fprintf(f, "%" PRIx64 "-%" PRIx64 " rw-s 00000000 00:01 9 /dev/shm/x\n", l->r[0].hva,
		l->r[0].hva + GiB);
	fclose(f);
	assert_int_equal(mtd_ram_layout_recheck(l, 42, dir), -ESTALE);
	assert_int_equal(mtd_ram_layout_recheck(l, 43, dir), -ENOENT);
	unlink(path);
	snprintf(path, sizeof(path), "%s/42", dir);
	rmdir(path);
	rmdir(dir);
	free(l);
	unload(r);
}

/* A DIMM mapped far from the machine's RAM, QEMU's own 600 mappings between them (its
 * libraries, heaps, thread stacks): the mappings are gathered per region, not over the span
 * from the lowest to the highest, which held more than the 512 that are read. */
static void test_far_dimm(void **state)
{
	struct rec *r = load("pc-1g");
	struct mtd_ram_layout *l = build(r);
	char dir[] = "/tmp/memtide-test-proc.XXXXXX", path[256];
	const uint64_t far = l->r[0].hva + 5 * GiB; /* the 600 mappings fit below it */
	FILE *f;
	(void)state;

	l->r[1] = l->r[0];
	l->r[1].gpa = 0x100000000ULL;
	l->r[1].hva = far;
	l->r[1].bytes = GiB / 2;
	l->nr = 2;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/42", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/42/maps", dir);
	f = fopen(path, "w");
	fprintf(f, "%" PRIx64 "-%" PRIx64 " rw-p 00000000 00:00 0 \n", l->r[0].hva,
		l->r[0].hva + GiB);
	for (uint64_t i = 0; i < 600; i++) {
		uint64_t a = far - (600 - i) * 0x10000ULL;
		fprintf(f,
			"%" PRIx64 "-%" PRIx64 " r-xp 00000000 08:01 %" PRIu64 " /usr/lib/x%" PRIu64
			".so\n",
			a, a + 0x8000, i + 1, i);
	}
	fprintf(f, "%" PRIx64 "-%" PRIx64 " rw-p 00000000 00:00 0 \n", far, far + GiB / 2);
	fclose(f);
	assert_int_equal(mtd_ram_layout_recheck(l, 42, dir), 0);

	/* The parser alone: both regions' mappings, none of those between. */
	char *t = NULL;
	size_t len = 0;
	f = fopen(path, "r");
	assert_int_equal(getdelim(&t, &len, '\0', f) > 0, 1);
	fclose(f);
	struct mtd_hva_span spans[2] = {{l->r[0].hva, l->r[0].hva + GiB}, {far, far + GiB / 2}};
	struct mtd_vma v[4];
	assert_int_equal(mtd_ram_parse_smaps_in(t, spans, 2, v, 4), 2);
	assert_int_equal(v[0].start, l->r[0].hva);
	assert_int_equal(v[1].start, far);
	assert_int_equal(mtd_ram_parse_smaps(t, l->r[0].hva, far + GiB / 2, v, 4), -E2BIG);
	free(t);
	unlink(path);
	snprintf(path, sizeof(path), "%s/42", dir);
	rmdir(path);
	rmdir(dir);
	free(l);
	unload(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pc_1g),
	    cmocka_unit_test(test_above_4g_pc_and_q35),
	    cmocka_unit_test(test_dimms_cold_and_hotplugged),
	    cmocka_unit_test(test_mlock_and_hugetlb_are_kept),
	    cmocka_unit_test(test_vfio_pins_everything),
	    cmocka_unit_test(test_unsure_maps),
	    cmocka_unit_test(test_unsure_devices),
	    cmocka_unit_test(test_mixed_mappings_are_unsure),
	    cmocka_unit_test(test_parsers_reject_garbage),
	    cmocka_unit_test(test_recheck),
	    cmocka_unit_test(test_far_dimm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
