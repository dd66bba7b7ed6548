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
 *      the longest refaults too much), not below the floor, and no more than a step.  When
 *      the controller weighs (reclaim_ctl.c, "Weighing"), only pages that never came back
 *      may go, and in its step mode only as many as the budget carries at the rate such
 *      pages come back: measured here, where the generations' sizes are known.
 *
 * memtided calls it each aging tick (host/decide/tick_decide.c) and host pageout evicts by the answer
 * (host/act/pageout_hand.c); memtide-sim's memtide calls it each control interval and evicts
 * single pages by it (sim/policy_memtide.c).  Each keeps only what is its own: memtided
 * the refault signal it assembles from libvmm and the guest, the host's squeeze and the
 * actuator's own limits (swap room, QEMU's layout); the lab its exact fault counts.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

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

/* Do the pages that came back come back past the longest age too often to go at all (as
 * against: not vouched for yet)?  Their floor over the window, without the vouching. */
static bool floor_past_longest(const struct vmm_reclaim_ctl *ctl)
{
	return ctl->mode == VMM_TAKE_UNREUSED && ctl->floor_all_ms == UINT64_MAX;
}

/* The step mode's measurement: at each bucket age A from the shortest threshold to the
 * longest, the resident pages idle past A (P) and the first comebacks past A per minute
 * (R): a page idle past A comes back at R / P a minute, so the budget carries
 * allowance x P / R of them out.  The age that carries the most wins. */
static void step_measure(const struct vmm_guest_stats *gs, const struct vmm_reclaim_ctl *ctl,
			 uint64_t now_ms, double allowance, struct vmm_decision *out)
{
	const struct vmm_reclaim_config *c = &ctl->cfg;
	double best = 0.0;

	for (unsigned k = vmm_reuse_bucket_of(c->min_age_ms); k < VMM_REUSE_BUCKETS; k++) {
		uint64_t age = vmm_reuse_bucket_ms(k), idle = 0;
		if (age < c->min_age_ms)
			continue; /* the bucket holding min_age_ms starts below it */
		if (age > c->max_age_ms)
			break;
		for (unsigned i = 0; i + 1 < gs->nr_gens; i++)
			if (now_ms >= gs->gen[i].birth_ms && now_ms - gs->gen[i].birth_ms >= age)
				idle += gs->gen[i].pages;
		double r = vmm_reclaim_reuse_rate(ctl, age, true);
		if (!idle || r <= 0.0)
			continue;
		double carried = allowance * (double)idle / r;
		if (carried > best) {
			best = carried;
			out->cold_age_ms = age;
			out->step_idle_pages = idle;
			out->step_return_per_min = r / (double)idle;
			out->step_pages = (uint64_t)carried;
		}
	}
}

int vmm_decide(const struct vmm_guest *g, struct vmm_reclaim_ctl *ctl,
	       const struct vmm_decide_in *in, struct vmm_decision *out)
{
	struct vmm_guest_stats gs;

	if (!g || !ctl || !in || !out)
		return -EINVAL;
	*out = (struct vmm_decision){0};
	vmm_guest_get_stats(g, &gs); /* 1 */
	if (in->reuse_is_echo)
		vmm_reclaim_skip_reuse(ctl, gs.reuse_hist);
	else
		vmm_reclaim_observe_reuse(ctl, gs.reuse_hist);
	vmm_reclaim_observe_first(ctl, gs.reuse_first_hist, !in->reuse_is_echo);
	ctl->first_once = gs.reuse_raises_tier; /* each page comes back first once */
	uint64_t age = vmm_reclaim_update(ctl, in->refaults, in->resident_pages, in->dt_ms); /* 2 */
	out->cold_age_ms = threshold(ctl, age, in->fixed_age_ms, &out->fixed_age_capped);
	out->fixed_age = in->fixed_age_ms != 0;
	out->mode = in->fixed_age_ms ? VMM_TAKE_BY_AGE : ctl->mode;
	out->reused_age_ms = in->fixed_age_ms ? out->cold_age_ms : ctl->reused_age_ms;
	out->estimate_age_ms =
	    out->reused_age_ms != UINT64_MAX && out->reused_age_ms > out->cold_age_ms
		? out->reused_age_ms
		: out->cold_age_ms;
	if (out->mode == VMM_TAKE_STEP && !ctl->hold) {
		uint64_t now = in->now_ms ? in->now_ms : gs.gen[gs.nr_gens - 1].birth_ms;
		double allowance = ctl->cfg.target_refault_per_min * (double)in->resident_pages;
		step_measure(&gs, ctl, now, allowance, out);
	}
	out->gate = gate(ctl, in, out->cold_age_ms, &out->take_pages); /* 3 */
	if (out->gate == VMM_DECIDE_TAKE && ctl->probing && !in->fixed_age_ms &&
	    out->take_pages > ctl->probe_pages)
		out->take_pages = ctl->probe_pages;
	if (out->gate == VMM_DECIDE_TAKE && out->mode == VMM_TAKE_STEP) {
		/* What is out already counts against what the budget carries. */
		uint64_t room =
		    out->step_pages > gs.evicted_pages ? out->step_pages - gs.evicted_pages : 0;
		if (out->take_pages > room)
			out->take_pages = room;
	}
	/* While it only learns, the balloon and the agent go on: their estimate is read at the
	 * controller's age, which starts at the longest (host/decide/tick_decide.c says what
	 * gating them on learning too cost).  While pages that came back stay for good, or it
	 * steps, they stop: they cannot leave those pages. */
	bool kept_for_good =
	    ctl->reused_age_ms == UINT64_MAX &&
	    (ctl->mode == VMM_TAKE_STEP || floor_past_longest(ctl)); /* not merely unvouched */
	out->holds_all_takers =
	    !in->fixed_age_ms &&
	    ((ctl->hold && ctl->hold_why != VMM_HOLD_LEARNING) || kept_for_good);
	return 0;
}

/* "1h2m", "2m10s", "45s", "800ms": ages for a reader. */
static void age_str(uint64_t ms, char *buf, size_t len)
{
	uint64_t s = ms / 1000;

	if (ms < 1000)
		snprintf(buf, len, "%" PRIu64 "ms", ms);
	else if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
}

char *vmm_decision_explain(const struct vmm_reclaim_ctl *ctl, const struct vmm_decision *d,
			   char *buf, size_t len)
{
	char age[32], lng[32];
	const struct vmm_reclaim_config *c;

	if (!buf || !len)
		return buf;
	if (!ctl || !d) {
		snprintf(buf, len, "-");
		return buf;
	}
	c = &ctl->cfg;
	age_str(d->cold_age_ms, age, sizeof(age));
	age_str(c->max_age_ms, lng, sizeof(lng));
	double target = c->target_refault_per_min * 100.0; /* % of resident a minute */
	switch (d->gate) {
	case VMM_DECIDE_WATCHING:
		snprintf(buf, len,
			 "watching the guest for one cold age (%s) before taking anything: no page "
			 "is known to be idle for longer than it was watched",
			 age);
		return buf;
	case VMM_DECIDE_FLOOR:
		snprintf(buf, len, "taking nothing: the guest is down to its floor");
		return buf;
	case VMM_DECIDE_HOLD:
		switch (ctl->hold_why) {
		case VMM_HOLD_LEARNING:
			snprintf(
			    buf, len,
			    "taking nothing yet: learning which idle ages the guest comes back "
			    "to (a cold age counts after watching the guest %u times as long)",
			    c->trust_factor);
			break;
		case VMM_HOLD_TOO_OLD:
			snprintf(buf, len,
				 "taking nothing: pages idle past the longest age the generations "
				 "tell apart (%s) come back faster than the refault target",
				 lng);
			break;
		case VMM_HOLD_REFAULTS:
			snprintf(
			    buf, len,
			    "taking nothing: refaults run at %.3f%% of resident a minute, over "
			    "the %.3f%% target, at the longest age or a step",
			    ctl->rate_per_min * 100.0, target);
			break;
		default:
			snprintf(buf, len, "taking nothing");
		}
		return buf;
	case VMM_DECIDE_TAKE:
		break;
	}
	if (d->fixed_age) {
		snprintf(buf, len, "taking pages idle past %s (the policy's cold_age%s)", age,
			 d->fixed_age_capped ? ", cut to the longest age" : "");
		return buf;
	}
	switch (d->mode) {
	case VMM_TAKE_BY_AGE:
		snprintf(
		    buf, len,
		    "taking pages idle past %s: pages idle that long come back at %.1f a minute, "
		    "within the %.3f%% target",
		    age, vmm_reclaim_reuse_rate(ctl, d->cold_age_ms, false), target);
		break;
	case VMM_TAKE_UNREUSED:
		if (ctl->probing) {
			snprintf(buf, len,
				 "probing: taking at most %" PRIu64
				 " MiB a round of pages idle past "
				 "%s that never came back, twice as many each round the refaults "
				 "keep the %.3f%% target (the age counts after watching the guest "
				 "%u times as long)",
				 ctl->probe_pages >> (20 - VMM_PAGE_SHIFT), age, target,
				 c->trust_factor);
		} else if (d->reused_age_ms != UINT64_MAX) {
			char r[32];
			age_str(d->reused_age_ms, r, sizeof(r));
			snprintf(buf, len,
				 "taking pages idle past %s that never came back, and those that "
				 "did past %s: their reuses put them there, within the %.3f%% "
				 "target",
				 age, r, target);
		} else if (floor_past_longest(ctl)) {
			snprintf(buf, len,
				 "taking only pages that never came back, idle past %s: pages "
				 "idle past %s come back at %.1f a minute, over the %.3f%% "
				 "target, but they are pages that came back before",
				 age, lng, vmm_reclaim_reuse_rate(ctl, c->max_age_ms, false),
				 target);
		} else {
			snprintf(buf, len,
				 "taking only pages that never came back, idle past %s; those "
				 "that did stay until their own reuses vouch for an age",
				 age);
		}
		break;
	case VMM_TAKE_STEP:
		snprintf(
		    buf, len,
		    "taking at most %" PRIu64 " MiB of pages idle past %s that never came back: "
		    "each comes back once in %.0f min, so the %.3f%% target carries that many out",
		    d->step_pages >> (20 - VMM_PAGE_SHIFT), age,
		    d->step_return_per_min > 0 ? 1.0 / d->step_return_per_min : 0.0, target);
		break;
	}
	return buf;
}
