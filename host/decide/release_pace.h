/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * release_pace.h - the pace of memtidectl release: how high each released VM's balloon
 * target may go now, shared by every released VM of the host.
 *
 * A released VM climbs back to its ceiling.  Two bounds hold on what the balloons really
 * give (their actual size, not the targets they were sent), across all released VMs:
 *   - the rate: in any second, at most release_rate.  A VM's target may stand at most
 *     release_rate, less what the other VMs may still give, above the actual size its
 *     balloon had a second ago (its "charge": what it can give in any second from its step
 *     on, the last second's delivery included).  The sum of the charges never exceeds the
 *     rate.  A target set a second or more ahead of a balloon that lags would otherwise be
 *     given all at once when the balloon catches up.
 *   - the host's room: what the balloons gave within the last settle_ms, plus what they may
 *     still give (targets above actual sizes), stays within MemAvailable above the low mark.
 *     Memory given back shows in MemAvailable only once the guest uses it, so what was given
 *     that recently counts as used already; nothing is granted while the host is at or under
 *     its low mark (*host_short is then true).
 * A target once given is never taken back here (a released VM is not inflated), and no
 * target stands below the balloon's actual size.  A VM that stops asking (resumed,
 * detached, at its ceiling) leaves the budget RELEASE_PACE_EXPIRE_MS after its last step.
 *
 * Steps come a few times a second (the loop's release tick): the rate bound looks a second
 * back, so a balloon that gives its grant at once gets the next one a second after it was
 * measured; at four steps a second the climb runs at 80-100% of the rate, never above.
 *
 * Pure: time and the host's figures come in as arguments.  The caller serialises calls
 * (the daemon's host_lock).
 */
#ifndef MEMTIDE_HOST_RELEASE_PACE_H
#define MEMTIDE_HOST_RELEASE_PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "decide/arbiter.h"

#define MTD_RELEASE_PACE_VMS     512  /* released VMs paced at once; more wait their turn */
#define MTD_RELEASE_PACE_SAMPLES 16   /* a VM's actual sizes, >= 100 ms apart: >= 1.5 s back */
#define MTD_RELEASE_PACE_BUCKETS 128  /* what the balloons gave, over the settle window */
#define RELEASE_PACE_EXPIRE_MS   2000 /* a VM that has not stepped this long is out */

struct mtd_release_pace_vm {
	uint64_t key;          /* whose (0: a free entry) */
	uint64_t step_ms;      /* its last step */
	uint64_t charge_bytes; /* its target less its actual a second before its last step */
	uint64_t owed_bytes;   /* its target less its actual at its last step */
	uint64_t last_actual;  /* its actual at its last step: what it gave is counted from it */
	uint64_t at_ms[MTD_RELEASE_PACE_SAMPLES], actual[MTD_RELEASE_PACE_SAMPLES];
	unsigned samples; /* in at_ms/actual, oldest first */
};

struct mtd_release_budget {
	struct mtd_release_pace_vm vm[MTD_RELEASE_PACE_VMS];
	uint64_t width_ms; /* a bucket's span: settle_ms / MTD_RELEASE_PACE_BUCKETS, >= 100 */
	uint64_t gave_bytes[MTD_RELEASE_PACE_BUCKETS];
	uint64_t gave_slot[MTD_RELEASE_PACE_BUCKETS]; /* the bucket's time, in widths */
};

/*
 * One released VM's step at now_ms: the highest balloon target it may have now (the VM
 * sets its target to that, or keeps a higher one it has).  key names the VM (not 0);
 * actual_bytes is its balloon's size as last read, target_bytes the target it has,
 * ceiling_bytes what the release climbs to.  The host's MemTotal and MemAvailable are read
 * now.  Returns at least max(actual, target) capped at the ceiling.
 */
uint64_t mtd_release_pace_step(const struct mtd_arbiter_config *cfg, struct mtd_release_budget *b,
			       uint64_t key, uint64_t now_ms, uint64_t mem_total_bytes,
			       uint64_t mem_available_bytes, uint64_t actual_bytes,
			       uint64_t target_bytes, uint64_t ceiling_bytes, bool *host_short);

#endif /* MEMTIDE_HOST_RELEASE_PACE_H */
