// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept_replay.c - the emulated EPT in memory (ept_replay.h).
 *
 * Layout: exactly the plugin file's (mtd_ept_layout: header page, PML4, PDPTs, PDs, one
 * leaf table per 2 MiB at pt_off + (gpa >> 21) * 4 KiB), in one calloc'ed buffer, so
 * "physical addresses" in the entries are offsets into it as in the file, and a walk here
 * reads the same entries in the same order as a walk of a live guest's table.
 */
#include "ept_replay.h"

#include <errno.h>
#include <stdlib.h>

#include "access/ept_table.h"

struct sim_ept {
	uint8_t *mem;
	uint64_t bytes, span;
	uint64_t root_off, pdpt_off, pd_off, pt_off;
	uint64_t leaf_tables;
	struct vmm_pt pt;
};

static uint64_t *table_at(void *ctx, uint64_t pa)
{
	const struct sim_ept *t = ctx;

	if (pa & (MTD_EPT_PAGE - 1) || pa < t->root_off || pa > t->bytes - MTD_EPT_PAGE)
		return NULL;
	return (uint64_t *)(t->mem + pa);
}

int sim_ept_new(uint64_t span_bytes, struct sim_ept **out)
{
	struct sim_ept *t;

	if (!span_bytes || span_bytes % (1ULL << 30) || span_bytes > MTD_EPT_SPAN_MAX)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->span = span_bytes;
	mtd_ept_layout(span_bytes, &t->root_off, &t->pdpt_off, &t->pd_off, &t->pt_off, &t->bytes);
	t->mem = calloc(1, t->bytes);
	if (!t->mem) {
		free(t);
		return -ENOMEM;
	}
	t->pt = (struct vmm_pt){.fmt = vmm_pt_format_get(VMM_PT_EPT),
				.root_pa = t->root_off,
				.table = table_at,
				.mem_ctx = t,
				.flags = VMM_PT_NONLEAF_ACCESSED};
	*out = t;
	return 0;
}

void sim_ept_free(struct sim_ept *t)
{
	if (!t)
		return;
	free(t->mem);
	free(t);
}

static void or_if_missing(uint64_t *slot, uint64_t bits)
{
	if ((__atomic_load_n(slot, __ATOMIC_RELAXED) & bits) != bits)
		__atomic_fetch_or(slot, bits, __ATOMIC_RELEASE);
}

void sim_ept_mark(struct sim_ept *t, uint64_t gpa, bool write)
{
	uint64_t *root = (uint64_t *)(t->mem + t->root_off),
		 *pdpt = (uint64_t *)(t->mem + t->pdpt_off);
	uint64_t *pd = (uint64_t *)(t->mem + t->pd_off), *leaf = (uint64_t *)(t->mem + t->pt_off);
	uint64_t want =
	    (gpa & MTD_EPT_PA_MASK) | MTD_EPT_LEAF | MTD_EPT_A | (write ? MTD_EPT_D : 0);

	if (gpa >= t->span)
		return;
	leaf += gpa >> 12;
	if ((*leaf & want) == want)
		return;
	__atomic_fetch_or(leaf, want, __ATOMIC_RELAXED);
	if (!(pd[gpa >> 21] & MTD_EPT_R))
		t->leaf_tables++;
	or_if_missing(&pd[gpa >> 21],
		      (t->pt_off + (gpa >> 21) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A);
	or_if_missing(&pdpt[gpa >> 30],
		      (t->pd_off + (gpa >> 30) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A);
	or_if_missing(&root[gpa >> 39],
		      (t->pdpt_off + (gpa >> 39) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A);
}

const struct vmm_pt *sim_ept_pt(const struct sim_ept *t)
{
	return &t->pt;
}

uint64_t sim_ept_leaf_tables(const struct sim_ept *t)
{
	return t->leaf_tables;
}
