/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * guest_layout.h - where QEMU puts guest RAM, for the sources that see QEMU's RAM block or
 * the host frames behind it rather than guest-physical addresses (idle, damon;
 * guest_layout.c).
 */
#ifndef MEMTIDE_HOST_ACCESS_GUEST_LAYOUT_H
#define MEMTIDE_HOST_ACCESS_GUEST_LAYOUT_H

#include <stdint.h>

#include "vmm.h"

/*
 * The guest RAM layout of QEMU process pid (its command line: the machine type and
 * max-ram-below-4g), for sources that see QEMU's RAM block rather than guest-physical
 * addresses.  RAM up to lowmem sits at GPA 0, the rest at 4 GiB; lowmem follows QEMU 7.2's
 * pc and q35 rules: pc keeps all RAM low below 3.5 GiB and splits at 3 GiB above that, q35
 * keeps it low below 2.75 GiB and splits at 2 GiB.  Fills ranges (2 at most) and *lowmem
 * (0: all low); returns the number of ranges, or -EINVAL.
 */
int mtd_guest_layout(const char *proc_dir, int pid, uint64_t ram_bytes, struct vmm_range *ranges,
		     uint64_t *lowmem);

/* RAM-block offset of guest-physical gpa under that layout (UINT64_MAX: not RAM). */
uint64_t mtd_guest_ram_offset(uint64_t gpa, uint64_t ram_bytes, uint64_t lowmem);

/*
 * QEMU's mapping of guest RAM: the start of its largest mapping of at least ram_bytes (and
 * at most 8 MiB more: alignment and a guard page) in proc_dir/PID/maps.  0 or -errno.
 */
int mtd_guest_ram_hva(const char *proc_dir, int pid, uint64_t ram_bytes, uint64_t *hva);

#endif /* MEMTIDE_HOST_ACCESS_GUEST_LAYOUT_H */
