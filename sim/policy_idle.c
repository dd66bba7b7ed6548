// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_idle.c - the single idle-age threshold, exact to the page: the policy memtide must
 * beat (the best fixed threshold, tuned in hindsight, is the bar memtide's generations
 * have to clear to be worth their cost), and per-page variants of it that ask
 * whether a page's own history would beat it.
 *
 * A page is evicted as soon as it has been idle for idle-age-ms: at the end of every epoch,
 * every resident live page whose last access ended at least that long ago goes to the host.
 * It has no controller and no page history beyond the last access; tuned in hindsight (the
 * best threshold per trace and budget, found by sweeping it) it is what a global cold age
 * can do at best, which is why sim_defaults compares memtide at its defaults against it.
 * Free memory is handled as memtide's policy does (mt-take-free, sim/policy_memtide.c):
 * pages the guest frees, and pages never used after the first epoch, go at once, so the
 * comparison measures only the choice among live pages.
 *
 * The per-page rules (off by default: both knobs at their neutral values) use what libvmm
 * can know about a page, exact here rather than quantised to generations: whether it has
 * been reused since it was allocated (used again after an idle epoch: MGLRU's tiers start
 * there), and its longest idle gap before such a reuse (the reuse distance libvmm's
 * histogram collects).  A reused page goes after idle-age-ms x idle-reused-x, and not while
 * it has been idle for less than its longest gap x idle-gap-x.  sim/tools/per_page_rules.py
 * sweeps them against the single threshold on a fine grid (docs/results.md): if a page's
 * history told returning pages from departing ones, some setting would save more at the
 * same refaults.  A page the guest frees starts again with no history.
 *
 * Cost: O(ram_pages) per epoch (one pass over the last-access stamps).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct idle {
	uint64_t *last_ms; /* end of the epoch that last accessed the page */
	uint64_t *gap_ms;  /* longest idle gap before a reuse; 0: not reused since alloc */
	uint8_t *fresh;    /* freed, or never used: its next use is an allocation, no reuse */
};

static void idle_fini(void *state)
{
	struct idle *s = state;

	free(s->last_ms);
	free(s->gap_ms);
	free(s->fresh);
	free(s);
}

static int idle_init(struct sim_ctx *ctx, void **state)
{
	struct idle *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->last_ms = calloc(ctx->t->ram_pages, sizeof(*s->last_ms));
	s->gap_ms = calloc(ctx->t->ram_pages, sizeof(*s->gap_ms));
	s->fresh = malloc(ctx->t->ram_pages);
	if (!s->last_ms || !s->gap_ms || !s->fresh) {
		idle_fini(s);
		return -ENOMEM;
	}
	memset(s->fresh, 1, ctx->t->ram_pages);
	for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
		s->last_ms[p] = ctx->t->epochs[0].t_ms;
	*state = s;
	return 0;
}

/* A use in the epoch starting at start_ms: a reuse if the page sat out at least one epoch. */
static void idle_touch(struct idle *s, uint32_t p, uint64_t start_ms, uint64_t now)
{
	if (!s->fresh[p] && s->last_ms[p] < start_ms && start_ms - s->last_ms[p] > s->gap_ms[p])
		s->gap_ms[p] = start_ms - s->last_ms[p];
	s->fresh[p] = 0;
	s->last_ms[p] = now;
}

/* The idle time after which page p goes: the single threshold, or the per-page rule. */
static uint64_t idle_limit(const struct idle *s, const struct sim_params *pr, uint32_t p)
{
	if (!s->gap_ms[p])
		return pr->idle_age_ms;
	double lim = (double)pr->idle_age_ms * pr->idle_reused_x,
	       by_gap = (double)s->gap_ms[p] * pr->idle_gap_x;
	return (uint64_t)(by_gap > lim ? by_gap : lim);
}

static int idle_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct idle *s = state;
	const struct sim_epoch *ep = &ctx->t->epochs[e];
	uint64_t now = sim_epoch_end_ms(ctx->t, e);

	for (uint32_t i = 0; i < ep->nr_acc; i++)
		idle_touch(s, SIM_ACC_PAGE(ep->acc[i]), ep->t_ms, now);
	for (uint32_t i = 0; i < ep->nr_free; i++) {
		s->gap_ms[ep->freed[i]] = 0;
		s->fresh[ep->freed[i]] = 1;
	}
	if (ctx->p->mt_take_free) {
		for (uint32_t i = 0; i < ep->nr_free; i++)
			sim_evict(ctx, ep->freed[i]);
		if (e == 0)
			for (uint32_t p = 0; p < ctx->t->ram_pages; p++)
				if (!(ctx->pg[p] & SIM_PG_LIVE))
					sim_evict(ctx, p);
	}
	for (uint32_t p = 0; p < ctx->t->ram_pages; p++)
		if ((ctx->pg[p] & SIM_PG_RESIDENT) &&
		    now - s->last_ms[p] >= idle_limit(s, ctx->p, p))
			sim_evict(ctx, p);
	return 0;
}

const struct sim_policy sim_policy_idle = {
    .name = "idle",
    .fpr = SIM_FPR_PARAM,
    .knob = "idle-age-ms",
    .init = idle_init,
    .epoch = idle_epoch,
    .fini = idle_fini,
};
