/*
 * ram_layout.h - the guest's RAM layout as QEMU's vhost-user memory table describes it
 * (guest-physical range -> QEMU's own virtual address and memory-backend offset), checked
 * against QEMU's other two views of the same memory before anything relies on it:
 *   - QMP: `info mtree -f` (through human-monitor-command), the flat view of the "memory"
 *     address space: every RAM piece with the region it belongs to and its offset in it;
 *   - /proc/QEMU_PID/maps: QEMU's mappings, which must hold each region's virtual range.
 * Host-side eviction madvises QEMU's addresses; a layout that does not agree with both is
 * not to be used (the VM's status says why).
 *
 * Pure: text in, verdict out (unit-tested on recorded QEMU output).  The VM loop fetches the
 * text (vm_vsock.c).
 */
#ifndef MEMTIDE_HOST_RAM_LAYOUT_H
#define MEMTIDE_HOST_RAM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "vhost/vhost.h"

#define MTD_MTREE_MAX_RANGES 512 /* flat-view RAM pieces considered (a pc guest has ~10) */

/* One RAM or ROM piece of the flat view: [start, end] at offset in region name. */
struct mtd_mtree_range {
	uint64_t start, end; /* inclusive, as QEMU prints them */
	uint64_t offset;     /* into the memory region (" @offset", else 0) */
	char name[48];       /* the memory region: the RAM backend's id ("mem", "pc.ram") */
};

/* Parse the flat view of address space "memory" out of `info mtree -f`: its ram and rom
 * pieces into out (at most max).  Returns how many, or -EPROTO when there is no such view. */
int mtd_mtree_parse(const char *text, struct mtd_mtree_range *out, unsigned max);

/*
 * Check the memory table against the flat view and QEMU's maps.  Returns 1 (they agree),
 * 0 (they do not: why says where), or -EPROTO (the mtree text has no memory view).
 * Agreement: every byte of every region is a RAM/ROM piece of the flat view whose offset in
 * its region equals the region's fd offset at that byte; every piece of those same regions
 * (the RAM backends) is in the table; each region's QEMU range lies inside one mapping.
 */
int mtd_ram_layout_check(const struct vu_layout_region *r, unsigned n, const char *mtree,
			 const char *maps, char *why, size_t whylen);

#endif /* MEMTIDE_HOST_RAM_LAYOUT_H */
