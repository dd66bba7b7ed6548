// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pt_s2.c - the arm64 stage-2 page-table format, 4 KiB granule (Part 1 of libvmm).
 *
 * Stage 2 maps intermediate-physical (guest-physical) to physical addresses.  With a 4 KiB
 * granule and a 48-bit IPA the walk starts at level 0: levels 0..3 of 512 eight-byte
 * descriptors, level 1 and 2 may hold blocks (1 GiB / 2 MiB), level 3 holds pages.
 *
 *   63  55 54 53 52  51  50 48 47                  12 11  10  9:8  7:6   5:2    1   0
 *  +------+-----+---+---+-----+----------------------+---+---+----+-----+-------+---+---+
 *  | ign. | XN  |Con|DBM| res | output address 47:12 |res| AF| SH | S2AP|MemAttr| T | V |
 *  +------+-----+---+---+-----+----------------------+---+---+----+-----+-------+---+---+
 *
 *  - V (bit 0) valid; T (bit 1): at levels 0-2, 1 = table, 0 = block; at level 3 it must be
 *    1 (page); 0b01 at level 3 and a level-0 block are invalid with this granule.
 *  - S2AP (bits 7:6): bit 6 allows reads, bit 7 allows writes.
 *  - AF (bit 10): with FEAT_HAFDBS (VTCR_EL2.HA) the MMU sets it on access instead of
 *    faulting; software clears it to age the page.
 *  - DBM (bit 51): with VTCR_EL2.HD, a write to a leaf with DBM=1 and S2AP[1]=0 does not
 *    fault; the MMU sets S2AP[1].  So a DBM leaf is "writable-clean" with S2AP[1]=0 and
 *    "dirty" with S2AP[1]=1, and cleaning it means clearing S2AP[1] again.  A leaf without
 *    DBM is never reported dirty: S2AP[1] is then only a permission.
 *
 * Invariants: encoders never set reserved bits and produce entries the decoders accept at
 * the same level; dirty_clear_mask (S2AP[1]) is only ever cleared on DBM leaves (walk.c
 * checks DBM first, so a read-only-by-permission page never loses or gains write access).
 */
#include "pt_format.h"

static bool s2_op_present(uint64_t e, int level)
{
	return s2_present(e, level);
}

static bool s2_op_is_leaf(uint64_t e, int level)
{
	return s2_is_leaf(e, level);
}

static uint64_t s2_op_addr(uint64_t e)
{
	return e & S2_OA_MASK;
}

static bool s2_op_dirty(uint64_t e)
{
	return s2_dirty(e);
}

/* A table descriptor: 0b11 plus the next table's address; the table attribute bits
 * (APTable, XNTable: stage 1 only) stay zero. */
static uint64_t s2_op_make_table(uint64_t table_pa)
{
	return (table_pa & S2_OA_MASK) | S2_VALID | S2_TABLE;
}

/* A page (level 3, 0b11) or block (levels 1-2, 0b01): Normal WB memory, inner shareable,
 * reads allowed.  Writable leaves get DBM with S2AP[1]=0, i.e. writable-clean: the first
 * write makes them dirty, as KVM maps pages when dirty tracking is on.  AF starts clear. */
static uint64_t s2_op_make_leaf(uint64_t pa, int level, bool writable)
{
	uint64_t e = (pa & S2_OA_MASK) | S2_VALID | S2_MEMATTR_WB | S2AP_R | S2_SH_INNER;

	if (level == PT_LAST_LEVEL)
		e |= S2_TABLE; /* at level 3 bit 1 means "page" */
	if (writable)
		e |= S2_DBM;
	return e;
}

/* What the MMU sets on an access: AF; on a write to a DBM leaf also S2AP[1] (dirty).  A
 * write to a leaf with neither S2AP[1] nor DBM is a permission fault: only AF is set. */
static uint64_t s2_op_hw_access_bits(uint64_t e, bool write)
{
	if (write && (e & S2_DBM))
		return S2_AF | S2AP_W;
	return S2_AF;
}

const struct vmm_pt_format vmm_pt_format_s2 = {
    .name = "stage2",
    .id = VMM_PT_S2,
    .present = s2_op_present,
    .is_leaf = s2_op_is_leaf,
    .addr = s2_op_addr,
    .accessed_mask = S2_AF,
    .dirty = s2_op_dirty,
    .dirty_clear_mask = S2AP_W,
    .make_table = s2_op_make_table,
    .make_leaf = s2_op_make_leaf,
    .hw_access_bits = s2_op_hw_access_bits,
};
