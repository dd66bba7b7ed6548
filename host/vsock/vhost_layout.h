/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost_layout.h - QEMU's vhost-user memory table (what the vsock back end is given: each
 * region's guest-physical range and QEMU's own address for it) checked against the guest
 * RAM layout memtided derives from QMP (ram_layout.h: the flat view, the memory backends,
 * gpa2hva, QEMU's mappings).  The two come from different parts of QEMU; when they agree,
 * host-side eviction's map is confirmed by a second, independent source.
 *
 * Pure: structs in, verdict out (tests/unit/test_mtd_vhost_layout.c).  vm_vsock.c fetches
 * the QMP layout when a new memory table arrives.
 */
#ifndef MEMTIDE_HOST_VHOST_LAYOUT_H
#define MEMTIDE_HOST_VHOST_LAYOUT_H

#include <stddef.h>

#include "act/ram_layout.h"
#include "vsock/vhost.h"

/* Legacy BIOS area: a pc machine maps shadow-ROM pieces of its RAM block here (read-only,
 * so QMP does not list them as RAM) and vhost-user's table includes them. */
#define MTD_VHOST_LEGACY_END 0x100000u

/*
 * 1: they agree - the QMP layout is sure; every RAM region of it lies in the table at the
 * same QEMU address (table.qemu_va + offset == layout.hva + offset, byte for byte); the
 * table holds nothing else above the legacy BIOS area.  0: they do not (why says where).
 */
int mtd_vhost_layout_check(const struct vu_layout_region *t, unsigned n,
			   const struct mtd_ram_layout *l, char *why, size_t whylen);

#endif /* MEMTIDE_HOST_VHOST_LAYOUT_H */
