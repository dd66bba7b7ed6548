/*
 * reclaim_echo.h - what the guest's own reclaim looks like to host-side access bits, and how
 * long it keeps looking like that.
 *
 * To swap a page out, the guest reads it: zram compresses it, a disk write DMAs it.  Access
 * bits the host reads (DAMON on QEMU's mapping, the ept plugin's stage-2 bits, idle page
 * tracking) see that read as a use, so every page a reclaim request frees turns young in
 * libvmm at the very moment it leaves the guest's working set.  It then stays in the working
 * set at the cold age for one cold age, untouched: free in the guest, and given back to the
 * host by free page reporting.
 *
 * Seen (tests/e2e/scenarios/09_kv_steady.sh on a host with DAMON, 1 GiB guest): a 91 MiB
 * reclaim freed 92 MiB, guest RAM on the host fell by 88 MiB, and within 20 s the working
 * set from DAMON grew by about as much: the target climbed 520 -> 706 MiB ("grow"), was held
 * by the cooldown for 60 s, and stepped down again, the grow-hold-descend cycle issue 13
 * names.  The guest's MGLRU (the agent's working set) does not see the echo: the kernel
 * reads pages for swap through its own mapping, not the process page tables MGLRU ages.
 *
 * So, for page-level sources only, memtided leaves out of the working set what the guest
 * freed for it within the last cold age (plus one interval: the round that saw the reads).
 * The echo expires just as the pages it stands for age out of the estimate.  Nothing is
 * taken on the strength of it that the guest did not already free, and the guest's need,
 * pressure and PSI still give memory back at once (controller.c, steps 2 and 3).
 *
 * Thread context: one VM loop thread owns a struct mtd_echo; nothing here is shared.
 */
#ifndef MEMTIDE_RECLAIM_ECHO_H
#define MEMTIDE_RECLAIM_ECHO_H

#include <stdint.h>

#define MTD_ECHO_MAX 16 /* replies remembered; older ones fold into the oldest kept */

struct mtd_echo {
	unsigned n;
	struct {
		uint64_t at_ms, bytes;
	} e[MTD_ECHO_MAX];
};

/* The guest answered a reclaim request at now_ms having freed bytes. */
void mtd_echo_add(struct mtd_echo *ec, uint64_t now_ms, uint64_t bytes);
/* What reclaims answered within the last window_ms still add to the working set; older
 * answers are forgotten. */
uint64_t mtd_echo_bytes(struct mtd_echo *ec, uint64_t now_ms, uint64_t window_ms);
/* The working set with the echo left out, never below 0. */
uint64_t mtd_echo_discount(uint64_t wss_bytes, uint64_t echo_bytes);

#endif
