// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_ram_layout.c - libFuzzer target for the guest RAM layout (host/act/ram_layout.c): what a
 * hostile or broken QEMU can answer to the questions host-side eviction asks before it names
 * a single guest page in QEMU's address space.
 *
 * Each input holds the seven answers memtided puts together, separated by lines "==":
 *   `info mtree -f`, `info ramblock`, query-memdev's return (JSON), query-memory-devices'
 *   return (JSON), the gpa2hva answers (one line each: first then last page of every guest-RAM
 *   range, in order), /proc/PID/smaps, and the /proc/PID/fd link targets.
 * Every parser runs on its section, then the builder on whatever they accepted.
 * Checked beyond "no crash, no sanitizer report": parser counts are within their arrays; a
 * layout said to be sure has ascending, disjoint, 4 KiB-aligned regions whose sums match,
 * evictable regions only of anonymous memory, none at all with VFIO, and translations that
 * agree both ways; every text for the log is terminated.  A violation traps.
 * Seeds (tests/fuzz/corpus/ram_layout/) are the recorded QEMU 7.2 cases of
 * tests/unit/test_ram_layout.c, in this format.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "act/ram_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

#define SECTIONS 7
#define MAX_FLAT 64
#define PAGE     4096u

/* Split text in place at lines "==": up to SECTIONS pieces, the rest "" (never NULL). */
static void split(char *text, char *sec[SECTIONS])
{
	char *p = text;

	for (int i = 0; i < SECTIONS; i++)
		sec[i] = (char *)"";
	for (int i = 0; i < SECTIONS && p; i++) {
		char *next = strstr(p, "\n==\n");

		sec[i] = p;
		if (next) {
			*next = '\0';
			p = next + 4;
		} else {
			p = NULL;
		}
	}
}

static void check_layout(const struct mtd_ram_layout *l)
{
	uint64_t ram = 0, evictable = 0;

	CHECK(memchr(l->why, 0, sizeof(l->why)));
	CHECK(l->nr <= MTD_RAM_MAX_REGIONS);
	if (!l->sure)
		return;
	for (size_t i = 0; i < l->nr; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		uint64_t hva, gpa, contig;

		CHECK(r->bytes && r->gpa % PAGE == 0 && r->bytes % PAGE == 0);
		CHECK(r->gpa + r->bytes > r->gpa);
		CHECK(i == 0 || l->r[i - 1].gpa + l->r[i - 1].bytes <= r->gpa);
		CHECK(memchr(r->block, 0, sizeof(r->block)) && memchr(r->path, 0, sizeof(r->path)));
		CHECK(!r->evictable || (r->backing == MTD_RAM_ANON && !r->locked && !l->vfio));
		ram += r->bytes;
		evictable += r->evictable ? r->bytes : 0;
		CHECK(mtd_ram_layout_find(l, r->gpa) == r);
		CHECK(mtd_ram_layout_find(l, r->gpa + r->bytes - 1) == r);
		CHECK(mtd_ram_layout_gpa_to_hva(l, r->gpa + r->bytes - PAGE, &hva, &contig) == 0);
		CHECK(hva == r->hva + r->bytes - PAGE && contig == PAGE);
		CHECK(mtd_ram_layout_hva_to_gpa(l, hva, &gpa) == 0 &&
		      gpa == r->gpa + r->bytes - PAGE);
	}
	CHECK(ram == l->ram_bytes && evictable == l->evictable_bytes);
}

/* One gpa2hva answer per line, in order; a missing or refused answer is 0. */
static uint64_t next_hva(char **p)
{
	uint64_t hva = 0;
	char *line = *p, *nl;

	if (!line || !*line)
		return 0;
	nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	*p = nl ? nl + 1 : NULL;
	if (mtd_ram_parse_gpa2hva(line, &hva, NULL, 0) < 0)
		hva = 0;
	return hva;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mtd_flat_range flat[MAX_FLAT];
	static struct mtd_ramblock blocks[16];
	static char memdevs[16][MTD_RAM_NAME_MAX];
	static struct mtd_memdevice devs[16];
	static uint64_t first[MAX_FLAT], last[MAX_FLAT];
	static struct mtd_vma vmas[32];
	static struct mtd_ram_layout layout, again;
	struct mtd_ram_inputs in = {0};
	bool is_ram[MAX_FLAT];
	char *text, *sec[SECTIONS], *hv, buf[4096];
	struct json_object *j;
	int n;

	if (size > 256 * 1024)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	split(text, sec);

	n = mtd_ram_parse_flatview(sec[0], flat, MAX_FLAT);
	CHECK(n <= MAX_FLAT);
	in.flat = flat;
	in.nr_flat = n > 0 ? (size_t)n : 0;
	n = mtd_ram_parse_ramblocks(sec[1], blocks, 16);
	CHECK(n <= 16);
	in.blocks = blocks;
	in.nr_blocks = n > 0 ? (size_t)n : 0;
	j = json_tokener_parse(sec[2]);
	n = mtd_ram_parse_memdevs(j, memdevs, 16);
	json_object_put(j);
	CHECK(n <= 16);
	in.memdevs = memdevs;
	in.nr_memdevs = n > 0 ? (size_t)n : 0;
	j = json_tokener_parse(sec[3]);
	n = mtd_ram_parse_memdevices(j, devs, 16);
	json_object_put(j);
	CHECK(n <= 16);
	in.devices = devs;
	in.nr_devices = n > 0 ? (size_t)n : 0;

	mtd_ram_guest_ranges(&in, is_ram);
	hv = sec[4];
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < in.nr_flat; i++) {
		first[i] = last[i] = 0;
		if (!is_ram[i])
			continue;
		first[i] = next_hva(&hv);
		last[i] = next_hva(&hv);
		if (first[i] < lo)
			lo = first[i];
		if (first[i] + (flat[i].end - flat[i].start) > hi)
			hi = first[i] + (flat[i].end - flat[i].start);
	}
	in.hva_first = first;
	in.hva_last = last;
	n = mtd_ram_parse_smaps(sec[5], lo, hi > lo ? hi : lo, vmas, 32);
	CHECK(n <= 32);
	in.vmas = vmas;
	in.nr_vmas = n > 0 ? (size_t)n : 0;
	in.vfio = mtd_ram_fds_pin_memory(sec[6]);

	CHECK(mtd_ram_layout_build(&in, &layout) == 0);
	check_layout(&layout);
	/* Pure: the same answers build the same layout. */
	CHECK(mtd_ram_layout_build(&in, &again) == 0);
	CHECK(again.sure == layout.sure && mtd_ram_layout_same(&layout, &again));
	n = mtd_ram_layout_describe(&layout, buf, sizeof(buf));
	CHECK(n >= 0 && memchr(buf, 0, sizeof(buf)));
	free(text);
	return 0;
}
