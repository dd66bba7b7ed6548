// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pt_ept.c - the x86 EPT page-table format (Part 1 of libvmm).
 *
 * Intel's extended page tables map guest-physical to host-physical addresses in four levels
 * of 512 eight-byte entries: PML4 (level 0, 512 GiB per entry), PDPT (level 1, 1 GiB), PD
 * (level 2, 2 MiB) and PT (level 3, 4 KiB).  One entry:
 *
 *   63      52 51                    12 11  10  9   8   7    6   5:3   2   1   0
 *  +----------+------------------------+------+---+---+----+----+-----+---+---+---+
 *  | ignored  | physical address 51:12 | ign. | D | A | PS |IPAT| EMT | X | W | R |
 *  +----------+------------------------+------+---+---+----+----+-----+---+---+---+
 *
 *  - present: any of R/W/X.  PS (bit 7) on a PDPTE/PDE makes it a 1 GiB/2 MiB leaf whose
 *    address bits below 30/21 are reserved zero; on a PML4E it is reserved, on a PTE ignored.
 *  - A (bit 8) is set by the CPU on any access through the entry, D (bit 9, leaves only) on
 *    a write, both only when EPTP bit 6 enables accessed/dirty flags.  The CPU sets them with
 *    a locked read-modify-write, so software that clears them must do the same (walk.c).
 *  - EMT (bits 5:3) is the memory type of a leaf; memtide's simulated leaves use 6 (WB).
 *
 * Invariants: the encoders produce only entries the decoders accept at the same level, and
 * never set a reserved bit (tests/unit/test_pt_format.c checks both against hand-written
 * encodings).  The raw bit names live in pt_format.h.
 */
#include "pt_format.h"

static bool ept_op_present(uint64_t e, int level)
{
	(void)level; /* R/W/X mean "present" at every level */
	return ept_present(e);
}

static bool ept_op_is_leaf(uint64_t e, int level)
{
	return ept_is_leaf(e, level);
}

static uint64_t ept_op_addr(uint64_t e)
{
	return e & EPT_PA_MASK;
}

static bool ept_op_dirty(uint64_t e)
{
	return (e & EPT_D) != 0;
}

/* A non-leaf entry: R/W/X all set so the leaves below decide the permissions; bits 7:3 of
 * a non-leaf EPT entry are reserved and stay zero. */
static uint64_t ept_op_make_table(uint64_t table_pa)
{
	return (table_pa & EPT_PA_MASK) | EPT_RWX;
}

/* A leaf: R+X always, W when writable, memory type WB, PS (bit 7) at levels 1 and 2.
 * A and D start clear: the mapping exists but has not been used yet. */
static uint64_t ept_op_make_leaf(uint64_t pa, int level, bool writable)
{
	uint64_t e = (pa & EPT_PA_MASK) | EPT_R | EPT_X | EPT_MT_WB;

	if (writable)
		e |= EPT_W;
	if (level == 1 || level == 2)
		e |= EPT_LARGE;
	return e;
}

/* What the CPU ORs into a leaf on an access: A always; D on a write, but only to a writable
 * leaf (a write to a leaf without W is an EPT violation and dirties nothing). */
static uint64_t ept_op_hw_access_bits(uint64_t e, bool write)
{
	if (write && (e & EPT_W))
		return EPT_A | EPT_D;
	return EPT_A;
}

const struct vmm_pt_format vmm_pt_format_ept = {
    .name = "ept",
    .id = VMM_PT_EPT,
    .present = ept_op_present,
    .is_leaf = ept_op_is_leaf,
    .addr = ept_op_addr,
    .accessed_mask = EPT_A,
    .dirty = ept_op_dirty,
    .dirty_clear_mask = EPT_D,
    .make_table = ept_op_make_table,
    .make_leaf = ept_op_make_leaf,
    .hw_access_bits = ept_op_hw_access_bits,
};
