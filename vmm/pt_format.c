// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pt_format.c - look up a page-table format by id (Part 1 of libvmm).
 *
 * The formats are constant tables (pt_ept.c, pt_s2.c); callers hold the returned pointer
 * for as long as they like.  walk.c recognises these two objects by address and uses its
 * inlined inner loop for them; any other `struct vmm_pt_format` a caller builds still walks,
 * through the function pointers.
 */
#include <errno.h>
#include <stddef.h>

#include "pt_format.h"

const struct vmm_pt_format *vmm_pt_format_get(enum vmm_pt_format_id id)
{
	switch (id) {
	case VMM_PT_EPT:
		return &vmm_pt_format_ept;
	case VMM_PT_S2:
		return &vmm_pt_format_s2;
	}
	return NULL;
}

/* ---- trees from the hardware's own root registers ----------------------------------------- */

#define EPTP_WALK_SHIFT 3
#define EPTP_WALK_MASK  (7ULL << EPTP_WALK_SHIFT) /* page-walk length - 1 */
#define EPTP_AD         (1ULL << 6)               /* accessed and dirty flags enabled */
#define EPTP_RSVD       (0x1fULL << 7)            /* bits 11:7 reserved */

int vmm_pt_from_eptp(struct vmm_pt *pt, uint64_t eptp,
		     uint64_t *(*table)(void *mem_ctx, uint64_t table_pa), void *mem_ctx)
{
	unsigned walk = (unsigned)((eptp & EPTP_WALK_MASK) >> EPTP_WALK_SHIFT) + 1;

	if (!pt || !table || (eptp & EPTP_RSVD) || (walk != 4 && walk != 5))
		return -EINVAL;
	if (!(eptp & EPTP_AD))
		return -EOPNOTSUPP;
	*pt = (struct vmm_pt){
	    .fmt = &vmm_pt_format_ept,
	    .root_pa = eptp & EPT_PA_MASK,
	    .table = table,
	    .mem_ctx = mem_ctx,
	    .levels = (int)walk,
	};
	return 0;
}

#define VTCR_T0SZ(v) ((unsigned)((v)&0x3f))
#define VTCR_SL0(v)  ((unsigned)(((v) >> 6) & 3))
#define VTCR_TG0(v)  ((unsigned)(((v) >> 14) & 3))
#define VTCR_DS      (1ULL << 32)
#define VTTBR_BADDR  0x0000FFFFFFFFFFFEULL

int vmm_pt_from_vtcr(struct vmm_pt *pt, uint64_t vttbr, uint64_t vtcr,
		     uint64_t *(*table)(void *mem_ctx, uint64_t table_pa), void *mem_ctx)
{
	unsigned ipa_bits = 64 - VTCR_T0SZ(vtcr), sl0 = VTCR_SL0(vtcr);
	int start;
	unsigned root_bits, n = 1;
	uint64_t root = vttbr & VTTBR_BADDR;

	/* 4 KiB granule only (TG0 = 0); SL0 3 or DS (FEAT_LPA2) would start at level -1. */
	if (!pt || !table || VTCR_TG0(vtcr) != 0 || sl0 == 3 || (vtcr & VTCR_DS) ||
	    VTCR_T0SZ(vtcr) < 16)
		return -EINVAL;
	start = 2 - (int)sl0; /* SL0 0: level 2, 1: level 1, 2: level 0 */
	root_bits = PT_LEVEL_SHIFT(start) + 9;
	if (ipa_bits > root_bits) {
		if (ipa_bits - root_bits > 4)
			return -EINVAL; /* more than 16 concatenated tables */
		n = 1u << (ipa_bits - root_bits);
	}
	if (root & (n * VMM_PAGE_SIZE - 1))
		return -EINVAL; /* a concatenated root is aligned to its whole size */
	*pt = (struct vmm_pt){
	    .fmt = &vmm_pt_format_s2,
	    .root_pa = root,
	    .table = table,
	    .mem_ctx = mem_ctx,
	    .levels = PT_LAST_LEVEL + 1 - start,
	    .root_tables = n,
	};
	return 0;
}
