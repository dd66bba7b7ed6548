/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tick_act.h - stage 4 of a VM's tick (decide/tick.h): the decision carried out.  In the
 * data flow's order: the agent's reclaim request, libvmm learning which pages the target
 * took or gave back, the balloon (balloon.h), then on a scheduled tick host-side eviction
 * (pageout_hand.h).  Also tells the host arbiter what a squeeze could still take.
 */
#ifndef MEMTIDE_HOST_TICK_ACT_H
#define MEMTIDE_HOST_TICK_ACT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "act/balloon.h"
#include "base/audit.h"
#include "base/mtd.h"
#include "decide/return_via.h"
#include "decide/tick.h"
#include "decide/tick_decide.h"
#include "vmm.h"

struct mtd_agent_link;
struct mtd_memcg_hand;
struct mtd_pageout_hand;

#define MTD_MAX_TAKEN_RUNS 1024

/* The runs the target took, newest last, so that a step back up gives the newest back
 * first (loop thread only).  Bounded: when full, the balloon still moves and libvmm is not
 * told. */
struct mtd_vm_act {
	struct vmm_run taken[MTD_MAX_TAKEN_RUNS];
	size_t nr_taken;
	struct mtd_agent_giving cg_giving; /* return=auto through the cgroup: the agent's answer */
	struct mtd_steady rss_steady; /* the steady rule's growth on the guest's RAM on the host */
	bool rss_filling;             /* ... which grows fast: host pageout waits (evict_host) */
};

/* What the act stage works on, besides the tick and the decision's state. */
struct mtd_act_env {
	const char *vm;
	const struct mtd_ctl_config *ctl;
	struct mtd_balloon *balloon;
	struct mtd_agent_link *agent; /* NULL: no agent channel */
	struct mtd_pageout_hand *hand;
	struct mtd_memcg_hand *memcg; /* host-side reclaim through the cgroup (NULL: none) */
	struct vmm_guest *guest;      /* NULL: no source */
	/* The source learns which pages left (it may zap them); may be NULL. */
	void (*evicted)(void *ctx, const struct vmm_run *runs, size_t n);
	/* The same, for the pages host-side eviction really paged out (source.h, paged_out). */
	void (*paged_out)(void *ctx, const struct vmm_run *runs, size_t n);
	void *evicted_ctx;
	struct mtd_vm_status *draft;
	const struct mtd_audit *audit;
	/* For the host arbiter (daemon.c): what a full squeeze could still take here, and what
	 * the balloon has yet to take (actual - target), bytes. */
	_Atomic uint64_t *reclaimable_bytes;
	_Atomic uint64_t *pending_bytes;
};

/* Stage 4. */
void mtd_tick_act(struct mtd_vm_act *a, struct mtd_vm_decide *s, const struct mtd_act_env *e,
		  const struct mtd_tick *t);

#endif /* MEMTIDE_HOST_TICK_ACT_H */
