// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_basic.c - the three baselines that need no model of their own:
 *   none      static allocation: every page stays resident, free page reporting off.
 *   fpr-only  free page reporting alone (the replay core's sim/fpr.c does the work): only
 *             memory the guest freed, in wholly free 2 MiB blocks, goes back.
 *   lru2      a fixed resident limit (lru2-limit x RAM, e.g. a cgroup memory.max around the
 *             VM) with Linux's active/inactive LRU choosing what to reclaim (sim/lru2.c).
 */
#include <errno.h>

#include "sim.h"

const struct sim_policy sim_policy_none = {
    .name = "none",
    .fpr = SIM_FPR_OFF,
    .knob = "",
};

const struct sim_policy sim_policy_fpr = {
    .name = "fpr-only",
    .fpr = SIM_FPR_ON,
    .knob = "",
};

static int lru2_init(struct sim_ctx *ctx, void **state)
{
	return sim_lru2_new(ctx->t->ram_pages, (struct sim_lru2 **)state);
}

static int lru2_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct sim_lru2 *l = state;

	sim_lru2_epoch(l, ctx, e);
	sim_lru2_shrink(l, ctx, (uint64_t)(ctx->p->lru2_limit * (double)ctx->t->ram_pages));
	return 0;
}

static void lru2_fini(void *state)
{
	sim_lru2_free(state);
}

const struct sim_policy sim_policy_lru2 = {
    .name = "lru2",
    .fpr = SIM_FPR_PARAM,
    .knob = "lru2-limit",
    .init = lru2_init,
    .epoch = lru2_epoch,
    .fini = lru2_fini,
};
