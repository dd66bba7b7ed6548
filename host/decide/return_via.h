/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * return_via.h - how memory taken from a VM goes back to the host: its policy's `return`
 * (mtd.h, enum mtd_return_via), resolved for what the VM has (return_via.c).  Pure.
 */
#ifndef MEMTIDE_HOST_RETURN_VIA_H
#define MEMTIDE_HOST_RETURN_VIA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/mtd.h"

/*
 * The way memory goes back for a VM, from its policy: `reclaim` (the default) without an
 * agent becomes `pageout` where host-side eviction can run; `auto` without an agent is
 * `pageout`.  host_evicts: memtided can evict the guest's cold pages itself - a live
 * page-level access source (ept, idle, damon: it picks the pages), or the VM's memory cgroup
 * (the kernel's reclaim picks them, asking KVM: act/memcg_hand.h).
 */
enum mtd_return_via mtd_return_resolve(enum mtd_return_via policy, bool agent_expected,
				       bool host_evicts);

/*
 * return=auto: the guest picks first.  Host-side eviction waits while the agent was asked and
 * has not answered yet, or its last answer (reply_seq moves with each) freed all it was asked
 * for within the last two intervals: the guest is still giving.  The caller keeps *g.
 */
struct mtd_agent_giving {
	uint64_t seen_seq, reply_ms;
	bool reply_done;
};
bool mtd_agent_giving(struct mtd_agent_giving *g, bool asked, uint64_t reply_seq, bool reply_done,
		      uint64_t now_ms, uint64_t interval_ms);

#endif /* MEMTIDE_HOST_RETURN_VIA_H */
