// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vhost_layout.c - the vhost-user memory table against the QMP-derived guest RAM layout
 * (vhost_layout.h).  Costs: O(table regions x layout regions) steps, at most 8 x 64.
 */
#include "vsock/vhost_layout.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

/* The table region holding gpa, or NULL. */
static const struct vu_layout_region *table_at(const struct vu_layout_region *t, unsigned n,
					       uint64_t gpa)
{
	for (unsigned i = 0; i < n; i++)
		if (gpa >= t[i].gpa && gpa - t[i].gpa < t[i].bytes)
			return &t[i];
	return NULL;
}

int mtd_vhost_layout_check(const struct vu_layout_region *t, unsigned n,
			   const struct mtd_ram_layout *l, char *why, size_t whylen)
{
	uint64_t covered = 0, table_bytes = 0;

	if (!l->sure) {
		snprintf(why, whylen, "QEMU's RAM map from QMP is not sure: %.200s", l->why);
		return 0;
	}
	if (!n || !l->nr) {
		snprintf(why, whylen, "%s is empty", n ? "QMP's RAM map" : "the memory table");
		return 0;
	}
	/* Step 1: every RAM region QMP knows, region by region through the table. */
	for (size_t i = 0; i < l->nr; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		uint64_t gpa = r->gpa, end = r->gpa + r->bytes;

		while (gpa < end) {
			const struct vu_layout_region *x = table_at(t, n, gpa);

			if (!x) {
				snprintf(why, whylen,
					 "QMP's RAM at gpa 0x%" PRIx64 " (%s) is not in the memory "
					 "table",
					 gpa, r->block);
				return 0;
			}
			if (x->qemu_va + (gpa - x->gpa) != r->hva + (gpa - r->gpa)) {
				snprintf(why, whylen,
					 "gpa 0x%" PRIx64 ": QEMU address 0x%" PRIx64
					 " per the memory table, 0x%" PRIx64 " per QMP",
					 gpa, x->qemu_va + (gpa - x->gpa), r->hva + (gpa - r->gpa));
				return 0;
			}
			uint64_t stop = x->gpa + x->bytes < end ? x->gpa + x->bytes : end;
			covered += stop - gpa;
			gpa = stop;
		}
	}
	/* Step 2: nothing in the table that QMP does not call RAM, but the BIOS area. */
	for (unsigned i = 0; i < n; i++) {
		table_bytes += t[i].bytes;
		for (uint64_t gpa = t[i].gpa; gpa < t[i].gpa + t[i].bytes;) {
			const struct mtd_ram_region *r = mtd_ram_layout_find(l, gpa);

			if (r) {
				gpa = r->gpa + r->bytes;
				continue;
			}
			if (gpa >= MTD_VHOST_LEGACY_END) {
				snprintf(why, whylen,
					 "the memory table has gpa 0x%" PRIx64
					 " that QMP does not list as guest RAM",
					 gpa);
				return 0;
			}
			gpa = MTD_VHOST_LEGACY_END; /* the rest of the BIOS area is allowed */
		}
	}
	snprintf(why, whylen,
		 "%u region%s, %" PRIu64 " MiB: every byte of QMP's %zu RAM region%s at the same "
		 "QEMU address",
		 n, n == 1 ? "" : "s", table_bytes >> 20, l->nr, l->nr == 1 ? "" : "s");
	(void)covered;
	return 1;
}
