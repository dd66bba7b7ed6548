/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hand_state.h - the state a host-side eviction hand publishes, and its log.
 *
 * Both hands (pageout_hand.c: pages named one by one through process_madvise; memcg_hand.c:
 * the VM's memory cgroup) publish the same thing in `vm show` and the metrics: one of
 * mtd.h's MTD_PAGEOUT_* states and a sentence saying why.  Each change of either is logged
 * once, so a hand that pauses every tick for the same reason says so once.  A refusal is a
 * warning, a pause for the host's swap or an incompressible pool a notice (news an operator
 * needs), any other pause routine (info).  Not thread-safe: a hand's own loop sets it.
 */
#ifndef MEMTIDE_HAND_STATE_H
#define MEMTIDE_HAND_STATE_H

#include "base/mtd.h"

struct mtd_hand_state {
	enum mtd_pageout_state state;        /* what the status shows */
	char why[240];                       /* ... and why ("" for none) */
	enum mtd_pageout_state logged_state; /* what the log said last */
	char logged_why[240];
};

/* A zeroed struct is OFF, and logged as OFF: the first change away from it is logged. */

/* Set the state and its reason (fmt NULL: none), and log it if either changed.  vm names the
 * VM, hand the hand in the log line ("host-side eviction"). */
void mtd_hand_state_set(struct mtd_hand_state *hs, const char *vm, const char *hand,
			enum mtd_pageout_state s, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif /* MEMTIDE_HAND_STATE_H */
