// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * actuators.c - memtided's balloon and the agent's reclaim, in the lab: how memory taken from
 * a guest goes back to the host under policy `return=balloon` and `return=reclaim`
 * (memtided's default), with memtided's own balloon policy deciding how much.
 *
 * memtide-sim's memtide (policy_memtide.c) runs libvmm's generations and vmm_decide as
 * memtided does.  With --mt-return pageout it evicts pages itself, as memtided's host pageout
 * does.  With balloon or reclaim, each control interval goes through this file, in the order
 * of memtided's tick (host/decide/tick_decide.c: estimate, then control):
 *   Step 1: the estimate - libvmm's working set at the cold age (the caller reads it), then
 *           memtided's corrections from host/decide/steady.c: the peak of the last cold age, and
 *           the bound by the guest RAM the host holds and by what the guest says it uses;
 *   Step 2: the inputs memtided would have - with the agent (--mt-agent 1, the default):
 *           the guest's use (live pages in its RAM), MemAvailable, its growth, the last
 *           request's answer; without: the balloon's own figures, MemAvailable and the
 *           major-fault rate;
 *   Step 3: the policy - host/decide/controller.c's mtd_ctl_step, the very function memtided
 *           calls, with memtided's default settings and policy;
 *   Step 4: the actuators -
 *           the agent's reclaim (when memtided asks it: under reclaim, and under balloon
 *                    for what the balloon will take): the guest's own LRU (sim/lru2.c,
 *                    Linux's active/inactive lists) swaps the pages out; a page the guest
 *                    swapped out refaults when touched, its frame back on the host or not;
 *           reclaim: the freed frames go back to the host only through free page
 *                    reporting: whole 2 MiB blocks, after its delay (sim/fpr.c);
 *           balloon: the balloon takes the guest's memory down to its target, free pages
 *                    first (4 KiB at a time), and the guest lives within what is left, its
 *                    LRU swapping out pages whenever the working set would outgrow it,
 *                    every epoch;
 *           and libvmm follows the target as memtided's account_target makes it (the
 *           oldest pages past the cold age count as taken; a deflate gives back the newest).
 * Scale: memtided's settings are bytes for guests of a GiB or more (a 256 MiB floor, 128 MiB
 * of headroom and steps), and the lab's traces are 12-128 MiB.  A trace stands for a guest of
 * --mt-guest-mib (1 GiB) of the same shape: every byte figure of memtided's defaults is
 * scaled by the trace's RAM / that size.
 * Not modelled: the balloon's and the guest's reclaim's own speed: both act within the
 * interval (a balloon of 512 MiB took the guest's MemTotal down within 2 s here, /work/
 * shared/README.md; memtided's steps are 128 MiB at 5 s intervals); the guest's reclaim reads no page on its way out (a trace has no such accesses,
 * so memtided's echo correction is not applied); PSI; page cache (MemAvailable is free
 * memory only).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "decide/controller.h"
#include "base/policy.h"
#include "sim.h"
#include "decide/steady.h"

#define ACT_RUNS 256
#define MIB      (1024 * 1024ull)

struct sim_act {
	struct mtd_ctl_config cfg;
	struct mtd_policy pol;
	struct mtd_ctl_state st;
	struct mtd_steady steady;
	struct sim_lru2 *lru;
	uint64_t domain_bytes;
	uint64_t balloon_pages; /* the guest's memory the balloon leaves it */
	bool applied;           /* a balloon target was set */
	uint64_t prev_target;   /* bytes; libvmm's account of the target (0: none yet) */
	struct vmm_run *taken;  /* runs libvmm counts as taken by the target, oldest first */
	size_t nr_taken, cap_taken;
	struct vmm_run runs[ACT_RUNS];
};

const char *sim_return_name(enum sim_return r)
{
	switch (r) {
	case SIM_RETURN_PAGEOUT:
		return "pageout";
	case SIM_RETURN_BALLOON:
		return "balloon";
	case SIM_RETURN_RECLAIM:
		return "reclaim";
	}
	return "?";
}

/* bytes x scale, in whole pages, never under least (memtided's own minimum for it). */
static uint64_t scaled(uint64_t bytes, double scale, uint64_t least)
{
	uint64_t b = (uint64_t)((double)bytes * scale) & ~(uint64_t)(SIM_PAGE_SIZE - 1);
	return b > least ? b : least;
}

int sim_act_ctl_config(const struct sim_ctx *ctx, struct mtd_ctl_config *cfg)
{
	double scale = (double)(ctx->t->ram_pages * SIM_PAGE_SIZE) /
		       ((double)ctx->p->mt_guest_mib * (double)MIB);
	char err[160];

	mtd_ctl_config_default(cfg);
	cfg->interval_ms = ctx->p->mt_interval_ms;
	/* Steps of 1 MiB at least, as memtided accepts them (mtd_ctl_config_validate). */
	cfg->max_inflate_step_bytes = scaled(cfg->max_inflate_step_bytes, scale, MIB);
	cfg->deflate_min_bytes = scaled(cfg->deflate_min_bytes, scale, MIB);
	cfg->mem_available_low_bytes = scaled(cfg->mem_available_low_bytes, scale, SIM_PAGE_SIZE);
	cfg->min_change_bytes = scaled(cfg->min_change_bytes, scale, SIM_PAGE_SIZE);
	cfg->major_faults_high_per_s *= scale;
	return mtd_ctl_config_finish(cfg, err, sizeof(err)) != 0 ? -EINVAL : 0;
}

int sim_act_new(struct sim_ctx *ctx, enum sim_return mode, struct sim_act **out)
{
	struct sim_act *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	rc = sim_lru2_new(ctx->t->ram_pages, &a->lru);
	if (rc) {
		free(a);
		return rc;
	}
	a->domain_bytes = ctx->t->ram_pages * SIM_PAGE_SIZE;
	a->balloon_pages = ctx->t->ram_pages;
	double scale = (double)a->domain_bytes / ((double)ctx->p->mt_guest_mib * (double)MIB);
	if (sim_act_ctl_config(ctx, &a->cfg) != 0) {
		sim_act_free(a);
		return -EINVAL;
	}
	mtd_policy_default(&a->pol);
	a->pol.min_bytes = scaled(a->pol.min_bytes, scale, SIM_PAGE_SIZE);
	a->pol.headroom_bytes = scaled(a->pol.headroom_bytes, scale, SIM_PAGE_SIZE);
	a->pol.target_refault_per_min = ctx->p->mt_target;
	a->pol.return_via = mode == SIM_RETURN_BALLOON ? MTD_RETURN_BALLOON : MTD_RETURN_RECLAIM;
	*out = a;
	return 0;
}

void sim_act_free(struct sim_act *a)
{
	if (!a)
		return;
	sim_lru2_free(a->lru);
	free(a->taken);
	free(a);
}

void sim_act_epoch(struct sim_act *a, struct sim_ctx *ctx, size_t e)
{
	sim_lru2_epoch(a->lru, ctx, e);
	/* The guest lives within what the balloon leaves it: free frames go first, then its
	 * LRU swaps out (the balloon's pages are not resident; neither are reported ones). */
	if (ctx->resident_pages > a->balloon_pages)
		sim_lru2_shrink(a->lru, ctx, a->balloon_pages);
}

/* Live pages in the guest's RAM: what MemTotal - MemFree counts (the lab has no cache). */
static uint64_t guest_used_pages(const struct sim_ctx *ctx)
{
	uint64_t n = 0;

	for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
		n += (ctx->pg[p] & (SIM_PG_LIVE | SIM_PG_RESIDENT)) ==
		     (SIM_PG_LIVE | SIM_PG_RESIDENT);
	return n;
}

/* libvmm follows the target (host/act/tick_act.c account_target): a step down counts the oldest
 * pages past the cold age as taken, a step up gives the newest back, unused (vmm_give_back). */
static int account_target(struct sim_act *a, struct vmm_guest *g, uint64_t now_ms,
			  uint64_t cold_age_ms, uint64_t from, uint64_t to)
{
	if (to < from) {
		struct vmm_evict_req req = {
		    .max_pages = (from - to) / SIM_PAGE_SIZE,
		    .min_age_ms = cold_age_ms,
		    .now_ms = now_ms,
		    .runs = a->runs,
		    .max_runs = ACT_RUNS,
		};
		struct vmm_evict_result res;
		int rc = vmm_evict(g, &req, &res);
		if (rc < 0)
			return rc;
		if (a->nr_taken + res.nr_runs > a->cap_taken) {
			size_t cap = (a->cap_taken ? 2 * a->cap_taken : 1024) + res.nr_runs;
			struct vmm_run *n = realloc(a->taken, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			a->taken = n;
			a->cap_taken = cap;
		}
		memcpy(&a->taken[a->nr_taken], a->runs, res.nr_runs * sizeof(a->runs[0]));
		a->nr_taken += res.nr_runs;
		return 0;
	}
	uint64_t left = (to - from) / SIM_PAGE_SIZE;
	while (left && a->nr_taken) {
		struct vmm_run *r = &a->taken[a->nr_taken - 1];
		uint64_t n = r->npages < left ? r->npages : left;
		(void)vmm_give_back(g, r->gpa + (r->npages - n) * SIM_PAGE_SIZE, n);
		r->npages -= n;
		left -= n;
		if (!r->npages)
			a->nr_taken--;
	}
	return 0;
}

int sim_act_control(struct sim_act *a, struct sim_ctx *ctx, struct vmm_guest *g,
		    const struct sim_act_tick *t)
{
	bool agent = ctx->p->mt_agent;
	uint64_t used = guest_used_pages(ctx) * SIM_PAGE_SIZE;
	uint64_t wss = 0;

	/* Step 1 */
	if (t->wss_valid) {
		wss = mtd_steady_peak(&a->steady, t->wss_bytes, t->now_ms, t->cold_age_ms, true);
		wss = mtd_steady_bound(wss, ctx->resident_pages * SIM_PAGE_SIZE, agent, used);
	}
	/* Step 2 */
	uint64_t in_ram = a->balloon_pages * SIM_PAGE_SIZE;
	struct mtd_ctl_input in = {
	    .now_ms = t->now_ms,
	    .domain_bytes = a->domain_bytes,
	    .actual_bytes = in_ram,
	    .wss_valid = t->wss_valid,
	    .wss_bytes = wss,
	    .inputs_fresh = true,
	    .avail_known = true,
	    .guest_avail_bytes = in_ram > used ? in_ram - used : 0,
	    .used_known = agent,
	    .guest_used_bytes = agent ? used : 0,
	    .can_reclaim = agent && ctx->fpr != NULL,
	    .faults_known = !agent,
	    .major_faults_per_s =
		t->dt_ms ? (double)t->guest_refaults * 1000.0 / (double)t->dt_ms : 0,
	    .refault_hold = t->refault_hold,
	};
	in.growing = mtd_steady_growing(&a->steady, &a->cfg, in.used_known, used, t->now_ms);
	in.reclaim_futile =
	    in.used_known && mtd_steady_futile(&a->steady, &a->cfg, used, wss, t->now_ms);
	if (t->wss_valid && in.used_known) {
		in.cold_known = true;
		in.cold_bytes = used > wss ? used - wss : 0;
	}
	/* Step 3 */
	struct mtd_ctl_output out;
	bool first = !a->applied;
	uint64_t prev = a->prev_target;
	mtd_ctl_step(&a->cfg, &a->pol, &in, &a->st, &out);
	/* Step 4: the agent's reclaim, answered within the interval, sent as memtided sends it
	 * (host/act/tick_act.c): on a change, the first time, with the balloon a cap, or while a
	 * balloon step waits for the guest to free room. */
	bool waits = !out.soft && out.balloon_bytes > out.target_bytes;
	if (out.reclaim_bytes && agent && (out.changed || first || out.soft || waits)) {
		uint64_t freed = sim_lru2_swapout(a->lru, ctx, out.reclaim_bytes / SIM_PAGE_SIZE) *
				 SIM_PAGE_SIZE;
		mtd_steady_reclaim_sent(&a->steady, t->now_ms, a->cfg.interval_ms,
					a->cfg.interval_ms);
		/* answered at once: never slow */
		mtd_steady_reply(&a->steady, &a->cfg, out.reclaim_bytes, freed,
				 freed >= out.reclaim_bytes ? PROTO_RECLAIM_DONE
							    : PROTO_RECLAIM_PARTIAL,
				 0, (uint32_t)a->cfg.interval_ms);
		mtd_steady_reclaim_answered(&a->steady, t->now_ms, a->cfg.interval_ms);
	}
	uint64_t from = prev ? prev : in_ram;
	if (out.target_bytes != from) {
		int rc = account_target(a, g, t->now_ms, t->cold_age_ms, from, out.target_bytes);
		if (rc)
			return rc;
	}
	a->prev_target = out.target_bytes;
	/* The balloon, as memtided's apply sets it: up at once, down by min_change at least. */
	if (first || out.balloon_bytes > in_ram ||
	    in_ram - out.balloon_bytes >= a->cfg.min_change_bytes) {
		uint64_t pages = out.balloon_bytes / SIM_PAGE_SIZE;
		a->balloon_pages = pages;
		a->applied = true;
		if (ctx->resident_pages > a->balloon_pages)
			sim_lru2_shrink(a->lru, ctx, a->balloon_pages);
	}
	return 0;
}
