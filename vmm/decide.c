// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * decide.c - one round of memtide's per-VM decision (Part 6c of libvmm).
 *
 * The data flow's middle stage, in one place: the generations have aged (Parts 4-5), and
 * before anything is taken this asks, in order,
 *   1. what did the guest come back to?  The reuses the aging hand counted since the last
 *      round go to the controller's window (vmm_reclaim_observe_reuse), unless the caller
 *      knows they were its own reclaim reading pages on their way out (skip_reuse);
 *   2. how long must a page lie idle to go?  The controller turns the round's refaults
 *      into the cold age threshold (vmm_reclaim_update); an operator's fixed age
 *      replaces it, bounded by what the generations tell apart;
 *   3. may anything go now, and how much?  Not before the source has watched the guest
 *      for the cold age (a page it has not seen used is known idle only that long), not
 *      while the controller holds (its reuses do not vouch for any threshold yet, or even
 *      the longest refaults too much), not below the floor, and no more than a step.
 *
 * memtided calls it each aging tick (host/decide/tick_decide.c) and host pageout evicts by the answer
 * (host/act/pageout_hand.c); memtide-sim's memtide calls it each control interval and evicts
 * single pages by it (sim/policy_memtide.c).  Each keeps only what is its own: memtided
 * the refault signal it assembles from libvmm and the guest, the host's squeeze and the
 * actuator's own limits (swap room, QEMU's layout); the lab its exact fault counts.
 */
#include <errno.h>
#include <stddef.h>

#include "vmm.h"

const char *vmm_decide_gate_name(enum vmm_decide_gate gate)
{
	switch (gate) {
	case VMM_DECIDE_TAKE:
		return "take";
	case VMM_DECIDE_WATCHING:
		return "watching";
	case VMM_DECIDE_HOLD:
		return "hold";
	case VMM_DECIDE_FLOOR:
		return "floor";
	}
	return "?";
}

/* 2: the controller's threshold, or the operator's, bounded by the longest age. */
static uint64_t threshold(const struct vmm_reclaim_ctl *ctl, uint64_t controller_ms,
			  uint64_t fixed_ms, bool *capped)
{
	*capped = false;
	if (!fixed_ms)
		return controller_ms;
	if (fixed_ms > ctl->cfg.max_age_ms) {
		*capped = true;
		return ctl->cfg.max_age_ms;
	}
	return fixed_ms;
}

/* 3: the gates, in the order a reader of `vm show` meets them. */
static enum vmm_decide_gate gate(const struct vmm_reclaim_ctl *ctl, const struct vmm_decide_in *in,
				 uint64_t cold_age_ms, uint64_t *take)
{
	*take = 0;
	if (in->watched_ms < cold_age_ms)
		return VMM_DECIDE_WATCHING;
	if (ctl->hold && !in->fixed_age_ms && !in->hold_overridden)
		return VMM_DECIDE_HOLD;
	if (in->resident_pages <= in->floor_pages)
		return VMM_DECIDE_FLOOR;
	*take = in->resident_pages - in->floor_pages;
	if (in->max_step_pages && *take > in->max_step_pages)
		*take = in->max_step_pages;
	return VMM_DECIDE_TAKE;
}

int vmm_decide(const struct vmm_guest *g, struct vmm_reclaim_ctl *ctl,
	       const struct vmm_decide_in *in, struct vmm_decision *out)
{
	struct vmm_guest_stats gs;

	if (!g || !ctl || !in || !out)
		return -EINVAL;
	vmm_guest_get_stats(g, &gs); /* 1 */
	if (in->reuse_is_echo)
		vmm_reclaim_skip_reuse(ctl, gs.reuse_hist);
	else
		vmm_reclaim_observe_reuse(ctl, gs.reuse_hist);
	uint64_t age = vmm_reclaim_update(ctl, in->refaults, in->resident_pages, in->dt_ms); /* 2 */
	out->cold_age_ms = threshold(ctl, age, in->fixed_age_ms, &out->fixed_age_capped);
	out->gate = gate(ctl, in, out->cold_age_ms, &out->take_pages); /* 3 */
	/* While it only learns, the balloon and the agent go on: their estimate is read at the
	 * controller's age, which starts at the longest (host/decide/tick_decide.c says what gating them
	 * on learning too cost). */
	out->holds_all_takers =
	    ctl->hold && ctl->hold_why != VMM_HOLD_LEARNING && !in->fixed_age_ms;
	return 0;
}
