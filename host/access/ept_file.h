/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_file.h - the controller's side of the emulated EPT file (format: ept_table.h).
 *
 * memtided's ept source, memtide-trace and memtidectl open the file the QEMU plugin keeps,
 * check it describes a live QEMU, claim it (one controller at a time), tell the plugin the
 * guest RAM layout, and ask for sampling windows.  The tables are handed to libvmm as a
 * `struct vmm_pt` whose "physical addresses" are file offsets; every table pointer libvmm
 * asks for is bounds-checked against the file, so a corrupt or hostile file (the plugin runs
 * in QEMU, which a guest may have compromised) can make a walk report nonsense for that VM,
 * never read or write outside the mapping.
 *
 * Interface for host-side eviction (pageout_hand.h, through the source's evicted op):
 * mtd_ept_file_zap clears the leaves of pages paged out, as KVM's MMU notifier zaps EPT
 * entries when the host takes a page; the guest's next access inside a window makes the leaf
 * present again.  The refault itself is counted from pagemap (pageout_hand.h, step 2a),
 * which sees every access, not only those in a window.
 */
#ifndef MEMTIDE_HOST_EPT_FILE_H
#define MEMTIDE_HOST_EPT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access/ept_table.h"
#include "vmm.h"

struct mtd_ept_file {
	int fd;
	uint8_t *map;
	uint64_t map_bytes;
	struct mtd_ept_header *h; /* inside map */
	struct vmm_pt pt;         /* the tables, for vmm_walk / vmm_age_walk */
	int claimed_by;           /* our pid while we hold the controller claim, else 0 */
	/* our copies of what was checked at open: the header stays writable by QEMU */
	uint64_t span_bytes, root_off, pt_off;
	int32_t qemu_pid;
	uint32_t uid; /* the file's owner: QEMU's user */
	uint64_t ino, dev;
	char path[256];
};

/*
 * Open and map path.  expect_pid > 0: the file must belong to that QEMU process.  The file
 * must be owned by the user QEMU runs as and writable by nobody else (the plugin makes it
 * 0600): memtided runs as root and believes what the tables say, so a table another local
 * user made (the directory is group kvm's) is never read.  0, or -errno with one sentence in
 * why: -ENOENT (no file: QEMU runs without the plugin), -EINVAL (not a table file, bad header
 * or sizes), -ESRCH (its QEMU is gone, or another QEMU's), -EPERM (owner or mode).
 */
int mtd_ept_file_open(const char *path, int expect_pid, struct mtd_ept_file *f, char *why,
		      size_t whylen);
/*
 * Is the file still the one that was opened, as it was: the same inode at the path, owned by
 * the same user, writable by nobody else, no shorter than the mapping, its header naming the
 * same live QEMU?  Before every use of the mapping: a file cut short under it would end
 * memtided with SIGBUS (a QEMU restarted under the same name truncates and re-creates it;
 * its owner can truncate it at will).  0, or -errno with a sentence in why: -ESTALE (replaced
 * or re-created), -EIO (cut short), -EPERM (owner or mode changed), -ESRCH (QEMU gone).
 */
int mtd_ept_file_check(const struct mtd_ept_file *f, char *why, size_t whylen);
/* Give up the claim (mode OFF), unmap, close.  Safe on a zeroed or failed-open struct. */
void mtd_ept_file_close(struct mtd_ept_file *f);

/* Become the file's controller: 0, or -EBUSY with the holder's pid in why (a live process
 * other than us).  A holder that died is replaced. */
int mtd_ept_file_claim(struct mtd_ept_file *f, char *why, size_t whylen);

/*
 * The guest RAM layout (ept_table.h, mtd_ept_gpa): taken from the plugin's args when it had
 * them, else set from ram_bytes here.  Fills ranges (up to 2) for vmm_guest_new.  Returns the
 * number of ranges, or -EINVAL with a sentence when RAM may sit above 4 GiB and the plugin
 * was not told where (ram_bytes above 2 GiB without the plugin's ram= and lowmem=).
 */
int mtd_ept_file_layout(struct mtd_ept_file *f, uint64_t ram_bytes, struct vmm_range *ranges,
			char *why, size_t whylen);

/* Ask for one sampling window of window_ms (mode WINDOWS), or instrumentation always / off. */
void mtd_ept_file_request_window(struct mtd_ept_file *f, uint64_t window_ms);
/* The same, starting no sooner than not_before_ms (CLOCK_MONOTONIC; 0: at once). */
void mtd_ept_file_request_window_at(struct mtd_ept_file *f, uint64_t window_ms,
				    uint64_t not_before_ms);
void mtd_ept_file_set_mode(struct mtd_ept_file *f, enum mtd_ept_mode mode);

/* Is the QEMU that owns the file still running? */
bool mtd_ept_file_alive(const struct mtd_ept_file *f);

/* Clear the leaves of [gpa, gpa + npages * 4 KiB) (host-side eviction).  Returns how many
 * were present, or -ERANGE outside the span. */
int64_t mtd_ept_file_zap(struct mtd_ept_file *f, uint64_t gpa, uint64_t npages);

/* The table path memtided and memtidectl use for a VM: DIR/NAME.ept, with any '/' in the
 * name replaced.  0 or -ENAMETOOLONG. */
int mtd_ept_path(const char *dir, const char *vm_name, char *out, size_t len);

#define MTD_EPT_DIR_DEFAULT "/run/memtide/ept"

#endif /* MEMTIDE_HOST_EPT_FILE_H */
