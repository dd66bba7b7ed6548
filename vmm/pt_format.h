/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pt_format.h - libvmm internal: the bit layouts of the two page-table formats.
 *
 * This is the one place where the raw encodings live.  pt_ept.c and pt_s2.c wrap them in
 * the public `struct vmm_pt_format` ops tables (vmm_pt_format_get); walk.c includes this
 * header too, so that its inner loop over a leaf table can test the bits inline instead of
 * making an indirect call per entry (see walk.c for the measured reason).
 *
 * Sources, by table title (the chapter numbers move between editions):
 *   EPT  Intel SDM vol. 3C, "VMX Support for Address Translation", section "EPT Translation
 *        Mechanism": "Format of an EPT PML4 Entry", "... EPT PDPTE that Maps a 1-GByte Page",
 *        "... EPT PDE that Maps a 2-MByte Page", "... EPT Page-Table Entry that Maps a
 *        4-KByte Page"; "Accessed and Dirty Flags for EPT".
 *   S2   Arm ARM (DDI 0487), "VMSAv8-64 translation table format descriptors" and "Stage 2
 *        memory region attributes"; "Hardware management of the Access flag and dirty state"
 *        (FEAT_HAFDBS: AF set by hardware, DBM turns a write to a clean page into S2AP[1]=1).
 *
 * Levels are numbered from the root as in vmm.h: 0 = PML4 / stage-2 level 0, 3 = last level.
 */
#ifndef MEMTIDE_VMM_PT_FORMAT_H
#define MEMTIDE_VMM_PT_FORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm.h"

/* Shift of the GPA bits a level indexes: 39 (512 GiB per entry), 30, 21, 12 (4 KiB). */
#define PT_LEVEL_SHIFT(level) (39 - 9 * (level))
#define PT_ENTRIES            512
#define PT_LAST_LEVEL         3

/* ---- x86 EPT ----------------------------------------------------------------------------- */
#define EPT_R       (1ULL << 0) /* read access */
#define EPT_W       (1ULL << 1) /* write access */
#define EPT_X       (1ULL << 2) /* supervisor-mode execute */
#define EPT_RWX     (EPT_R | EPT_W | EPT_X)
#define EPT_MT_WB   (6ULL << 3)           /* leaf bits 5:3, EPT memory type: 6 = write-back */
#define EPT_LARGE   (1ULL << 7)           /* PDPTE/PDE: maps a 1 GiB / 2 MiB page */
#define EPT_A       (1ULL << 8)           /* accessed (set by the CPU when EPTP bit 6 is on) */
#define EPT_D       (1ULL << 9)           /* dirty: leaves only */
#define EPT_PA_MASK 0x000FFFFFFFFFF000ULL /* bits 51:12 */

/*
 * An EPT entry the walker may use: R (bit 0) set.  The SDM calls an entry present when any
 * of R/W/X is set, but W without R is an EPT misconfiguration, and KVM builds exactly such
 * entries on purpose for MMIO (W|X, no R, with an MMIO generation number in bits 3-10, so
 * bits 8 and 9 there are not A and D): reporting them young or clearing "A" would corrupt
 * KVM's MMIO cache.  Execute-only leaves (X alone, legal on CPUs with that capability) are
 * skipped too: KVM never maps guest RAM execute-only.  Such entries are never reported,
 * never descended into and never written.
 */
static inline bool ept_present(uint64_t e)
{
	return (e & EPT_R) != 0;
}

/* A leaf: every present PT entry; a PDPTE/PDE with bit 7.  Bit 7 of a PML4E is reserved. */
static inline bool ept_is_leaf(uint64_t e, int level)
{
	if (!ept_present(e))
		return false;
	if (level == PT_LAST_LEVEL)
		return true;
	return (level == 1 || level == 2) && (e & EPT_LARGE);
}

/* ---- arm64 stage-2, 4 KiB granule --------------------------------------------------------- */
#define S2_VALID      (1ULL << 0)   /* descriptor valid */
#define S2_TABLE      (1ULL << 1)   /* levels 0-2: 1 = table, 0 = block; level 3: 1 = page */
#define S2_MEMATTR_WB (0xFULL << 2) /* MemAttr[3:0] bits 5:2: Normal, inner+outer write-back */
#define S2AP_R        (1ULL << 6)   /* S2AP[0]: reads allowed */
#define S2AP_W        (1ULL << 7)   /* S2AP[1]: writes allowed; with DBM: the page is dirty */
#define S2_SH_INNER   (3ULL << 8)   /* SH[1:0] bits 9:8: inner shareable */
#define S2_AF         (1ULL << 10)  /* access flag */
#define S2_DBM        (1ULL << 51)  /* dirty bit modifier: hardware manages S2AP[1] as dirty */
#define S2_OA_MASK    0x0000FFFFFFFFF000ULL /* output address bits 47:12 (48-bit OA) */

/*
 * Valid, with the descriptor type the level allows.  Level 3 with bit 1 clear is reserved
 * (invalid); a level-0 block does not exist with a 4 KiB granule (without FEAT_LPA2), so at
 * level 0 only a table descriptor (0b11) leads anywhere.
 */
static inline bool s2_present(uint64_t e, int level)
{
	if (level == 0 || level == PT_LAST_LEVEL)
		return (e & (S2_VALID | S2_TABLE)) == (S2_VALID | S2_TABLE);
	return (e & S2_VALID) != 0;
}

/* A page (0b11 at level 3) or a block (0b01 at level 1: 1 GiB, level 2: 2 MiB). */
static inline bool s2_is_leaf(uint64_t e, int level)
{
	if (level == PT_LAST_LEVEL)
		return (e & (S2_VALID | S2_TABLE)) == (S2_VALID | S2_TABLE);
	if (level == 1 || level == 2)
		return (e & (S2_VALID | S2_TABLE)) == S2_VALID;
	return false;
}

/* Hardware dirty state: a leaf with DBM set is writable-clean while S2AP[1] is 0, and the
 * MMU sets S2AP[1] on the first write; so DBM + S2AP[1] means dirty.  Without DBM, S2AP[1]
 * is a plain permission and says nothing about dirtiness. */
static inline bool s2_dirty(uint64_t e)
{
	return (e & (S2_DBM | S2AP_W)) == (S2_DBM | S2AP_W);
}

/* The two format objects behind vmm_pt_format_get (pt_ept.c, pt_s2.c). */
extern const struct vmm_pt_format vmm_pt_format_ept;
extern const struct vmm_pt_format vmm_pt_format_s2;

#endif /* MEMTIDE_VMM_PT_FORMAT_H */
