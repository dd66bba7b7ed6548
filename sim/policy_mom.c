// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_mom.c - a balloon driven the way oVirt MOM's default policy (balloon.rules)
 * drives it, with the guest's own LRU (sim/lru2.c) reclaiming when the balloon squeezes.
 *
 * Every mom-interval-ms (10 s), with the host's free share below mom-pressure (the simulated
 * host is overcommitted: mom-host-free 10% < 20%), MOM shrinks the guest:
 *   Step 1: used = live resident pages (what the guest's MemFree leaves out);
 *   Step 2: floor = used / (1 - mom-min-free): the guest keeps >= 20% of its size free;
 *   Step 3: size = max(floor, current * (1 - mom-max-step)): shrink by at most 5% a round,
 *           grow back to the floor at once when the guest is short (as balloon.rules does);
 *   Step 4: apply only if |size - current| >= mom-min-step x RAM (0.25%).
 * Without host pressure MOM grows the guest by mom-max-step a round up to its RAM.
 * Between rounds the guest lives within `size`: whenever resident pages exceed it (the
 * working set grew) the guest reclaims with its LRU, free pages first.
 * The balloon itself is not resident: resident <= size always holds after an epoch.
 */
#include <errno.h>
#include <stdlib.h>

#include "sim.h"

struct mom {
	struct sim_lru2 *lru;
	uint64_t size_pages; /* guest memory the balloon leaves (RAM - balloon) */
	uint64_t next_tick_ms;
};

static int mom_init(struct sim_ctx *ctx, void **state)
{
	struct mom *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	rc = sim_lru2_new(ctx->t->ram_pages, &m->lru);
	if (rc) {
		free(m);
		return rc;
	}
	m->size_pages = ctx->t->ram_pages;
	m->next_tick_ms = ctx->t->epochs[0].t_ms + ctx->p->mom_interval_ms;
	*state = m;
	return 0;
}

static uint64_t live_resident(const struct sim_ctx *ctx)
{
	uint64_t n = 0;

	for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
		n += (ctx->pg[p] & (SIM_PG_LIVE | SIM_PG_RESIDENT)) ==
		     (SIM_PG_LIVE | SIM_PG_RESIDENT);
	return n;
}

static void mom_tick(struct mom *m, const struct sim_ctx *ctx)
{
	const struct sim_params *p = ctx->p;
	double ram = (double)ctx->t->ram_pages, cur = (double)m->size_pages, size;

	if (p->mom_host_free < p->mom_pressure) {
		double used = (double)live_resident(ctx);            /* Step 1 */
		double floor_pages = used / (1.0 - p->mom_min_free); /* Step 2 */
		size = cur * (1.0 - p->mom_max_step);                /* Step 3 */
		if (size < floor_pages)
			size = floor_pages;
	} else {
		size = cur * (1.0 + p->mom_max_step);
	}
	if (size > ram)
		size = ram;
	if (size < 1)
		size = 1;
	double delta = size > cur ? size - cur : cur - size;
	if (delta < p->mom_min_step * ram || delta < 1) /* Step 4 */
		return;
	m->size_pages = (uint64_t)size;
}

static int mom_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct mom *m = state;
	uint64_t now = sim_epoch_end_ms(ctx->t, e);

	sim_lru2_epoch(m->lru, ctx, e);
	while (now >= m->next_tick_ms) {
		mom_tick(m, ctx);
		m->next_tick_ms += ctx->p->mom_interval_ms;
	}
	sim_lru2_shrink(m->lru, ctx, m->size_pages);
	return 0;
}

static void mom_fini(void *state)
{
	struct mom *m = state;

	sim_lru2_free(m->lru);
	free(m);
}

const struct sim_policy sim_policy_mom = {
    .name = "mom",
    .fpr = SIM_FPR_PARAM,
    .knob = "mom-min-free",
    .init = mom_init,
    .epoch = mom_epoch,
    .fini = mom_fini,
};
