// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * guest_layout.c - where QEMU puts guest RAM, for the host-side sources (choose.h).
 *
 * The idle and damon sources see host frames, which they reach through QEMU's mapping of
 * its RAM block (HVA = mapping start + RAM offset, then pagemap); libvmm ages guest-physical
 * addresses.  Between the two sits the pc machines' split of RAM around the PCI hole, which
 * QEMU decides from the machine type and max-ram-below-4g, both on its command line
 * (libvirt passes -machine pc-q35-7.2,...; plain QEMU defaults to pc).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access/guest_layout.h"

#define GiB (1ULL << 30)

/* Bytes of max-ram-below-4g=SIZE in a -machine argument (0: not given). */
static uint64_t max_below(const char *arg)
{
	const char *p = strstr(arg, "max-ram-below-4g=");
	char *end;
	uint64_t v;

	if (!p)
		return 0;
	v = strtoull(p + 17, &end, 10);
	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		break;
	default:
		break;
	}
	return v;
}

int mtd_guest_layout(const char *proc_dir, int pid, uint64_t ram, struct vmm_range *ranges,
		     uint64_t *lowmem)
{
	char path[128], buf[8192];
	bool q35 = false;
	uint64_t below = 0, low;
	FILE *f;
	size_t n = 0;

	ram &= ~(VMM_SIZE_2M - 1);
	if (!ram)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%d/cmdline", proc_dir, pid);
	if (pid > 0 && (f = fopen(path, "re"))) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	/* arguments are NUL-separated: the one after -machine / -M, or machine= in one */
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		const char *a = buf + i;
		if ((!strcmp(a, "-machine") || !strcmp(a, "-M")) && i + strlen(a) + 1 < n) {
			const char *m = a + strlen(a) + 1;
			q35 = strstr(m, "q35") != NULL;
			below = max_below(m);
		}
	}
	/* QEMU 7.2's rules (hw/i386/pc_piix.c and pc_q35.c, as documented in docs above). */
	if (q35)
		low = below ? below : (ram >= 0xb0000000ULL ? 2 * GiB : 0xb0000000ULL);
	else {
		low = below ? below : 0xe0000000ULL;
		if (ram >= low && low > 3 * GiB)
			low = 3 * GiB; /* gigabyte alignment of the split */
	}
	if (ram <= low) {
		ranges[0] = (struct vmm_range){0, ram};
		*lowmem = 0;
		return 1;
	}
	low &= ~(VMM_SIZE_2M - 1);
	ranges[0] = (struct vmm_range){0, low};
	ranges[1] = (struct vmm_range){4 * GiB, 4 * GiB + ram - low};
	*lowmem = low;
	return 2;
}

uint64_t mtd_guest_ram_offset(uint64_t gpa, uint64_t ram, uint64_t lowmem)
{
	if (!lowmem)
		return gpa < ram ? gpa : UINT64_MAX;
	if (gpa < lowmem)
		return gpa;
	if (gpa >= 4 * GiB && gpa - 4 * GiB < ram - lowmem)
		return gpa - 4 * GiB + lowmem;
	return UINT64_MAX;
}

int mtd_guest_ram_hva(const char *proc_dir, int pid, uint64_t ram, uint64_t *hva)
{
	char path[128], line[512];
	uint64_t best = 0, best_start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/maps", proc_dir, pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *end;
		uint64_t s = strtoull(line, &end, 16), e;
		if (*end != '-')
			continue;
		e = strtoull(end + 1, &end, 16);
		if (*end != ' ' || e <= s)
			continue;
		if (e - s >= ram && e - s <= ram + (8ULL << 20) && e - s > best) {
			best = e - s;
			best_start = s;
		}
	}
	fclose(f);
	if (!best)
		return -ENOENT;
	*hva = best_start;
	return 0;
}
