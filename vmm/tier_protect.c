// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tier_protect.c - MGLRU's tier protection (Part 6a of libvmm, PID control).
 *
 * Why: generations order pages by when they were last seen accessed, but pages reported
 * through hints (the guest's own accesses the host cannot see as page-table bits) carry
 * more history: a page hinted three times is in tier 2 (generations.c raises the tier by
 * one per hint).  If pages of a higher tier come back (refault) more often per eviction
 * than plain tier-0 pages, evicting them by age alone is a mistake, so the eviction hand
 * keeps them back - moves them up one generation instead - until their refault rate is in
 * line with tier 0's.  This is the feedback loop Linux's multi-gen LRU runs per memcg
 * (mm/vmscan.c, "PID controller"); memtide runs it per guest.
 *
 * The terms, per tier t:
 *   process variable  PV_t = refaulted_t / total_t, with total_t = evicted_t + protected_t
 *                     (pages that left the oldest generation from tier t, one way or the
 *                     other).  Unit: refaults per page that reached the eviction hand.
 *   setpoint          SP = the same ratio for tier 0, the base tier: plain pages, whose
 *                     refaults are the price every eviction policy pays.
 *   gains             1 for SP, 2 for PV: a tier is protected only when its ratio is more
 *                     than twice tier 0's, so noise does not flip protection on and off.
 *   P term            the ratios of the current window (since min_seq last advanced).
 *   I term            an exponential moving average: each time min_seq advances (an
 *                     oldest generation is done with), avg = (avg + window) / 2, and the
 *                     window starts again.  Refaulted and total are averaged separately so
 *                     their ratio stays a ratio of counts.
 *   D term            none: refaults arrive in bursts, a derivative would chase them.
 * Smoothing, as in Linux: SP's total gets + TP_MIN_REFAULTS and its refaulted + 1, so an
 * empty tier 0 does not make every other tier look infinitely worse; a tier with fewer
 * than TP_MIN_REFAULTS refaults is never protected (too little evidence).
 *
 * The setpoint needs tier-0 evictions to mean anything: before there are any, SP reads as
 * 1/64 and a tier with 64 refaults looks worse and is protected.  That errs towards the
 * guest (keeping memory), and tier 0 is almost always evicted first anyway.
 *
 * Decision: the lowest tier t >= 1 whose PV exceeds the setpoint is the first protected
 * one, and every tier above it is protected too (a page in a higher tier was hinted more
 * often).  evict.c applies it: a page of a protected tier in the oldest generation moves
 * up one generation, and its tier drops by one, so protection without new hints runs out
 * after at most nr_tiers - 1 rounds and no page is protected forever.
 *
 * Difference from Linux, on purpose: Linux keeps two windows (by min_seq parity) so that a
 * refault is credited to the window its eviction was counted in; memtide credits it to the
 * current one.  With the 1/2 carry-over the two differ by at most one window's weight.
 *
 * Cost: O(nr_tiers) per decision (once per vmm_evict call) and per carry-over.
 */
#include "guest_priv.h"

#define TP_MIN_REFAULTS 64 /* Linux: MIN_LRU_BATCH (BITS_PER_LONG) */
#define TP_GAIN_SP      1
#define TP_GAIN_PV      2

/* ======================================================================================
 * Part 6: PID control - tier protection
 * ====================================================================================== */

void vmm_tp_init(struct tier_protect *tp, unsigned nr_tiers)
{
	*tp = (struct tier_protect){.nr_tiers = nr_tiers};
}

struct ctrl_pos {
	uint64_t refaulted, total;
	unsigned gain;
};

static struct ctrl_pos read_pos(const struct tier_protect *tp, unsigned tier, unsigned gain)
{
	const struct tier_ctrl *c = &tp->t[tier];

	return (struct ctrl_pos){
	    .refaulted = c->avg_refaulted + c->refaulted,
	    .total = c->avg_total + c->evicted + c->protected_pages,
	    .gain = gain,
	};
}

/* Is PV within the setpoint (refaulted_pv / total_pv * gain_sp <= refaulted_sp / total_sp *
 * gain_pv, smoothed), i.e. no reason to protect?  Cross-multiplied: no division by 0. */
static bool within_setpoint(const struct ctrl_pos *sp, const struct ctrl_pos *pv)
{
	if (pv->refaulted < TP_MIN_REFAULTS)
		return true;
	/* Counts stay far below 2^40 over a guest's life (2^40 pages = 4 EiB), so the
	 * products of two counts and a gain fit in 128 bits; use them to be safe. */
	unsigned __int128 lhs = (unsigned __int128)pv->refaulted * (sp->total + TP_MIN_REFAULTS);
	unsigned __int128 rhs = (unsigned __int128)(sp->refaulted + 1) * pv->total;
	return lhs * sp->gain <= rhs * pv->gain;
}

unsigned vmm_tp_protected_from(const struct tier_protect *tp)
{
	struct ctrl_pos sp = read_pos(tp, 0, TP_GAIN_SP);

	for (unsigned tier = 1; tier < tp->nr_tiers; tier++) {
		struct ctrl_pos pv = read_pos(tp, tier, TP_GAIN_PV);
		if (!within_setpoint(&sp, &pv))
			return tier;
	}
	return tp->nr_tiers;
}

void vmm_tp_carry_over(struct tier_protect *tp)
{
	for (unsigned tier = 0; tier < tp->nr_tiers; tier++) {
		struct tier_ctrl *c = &tp->t[tier];
		c->avg_refaulted = (c->avg_refaulted + c->refaulted) / 2;
		c->avg_total = (c->avg_total + c->evicted + c->protected_pages) / 2;
		c->refaulted = c->evicted = c->protected_pages = 0;
	}
}
