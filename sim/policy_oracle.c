// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_oracle.c - the oracle: knows the whole trace, and so gives the lower bound on
 * resident memory for a refault budget that no real policy can beat.
 *
 * Under the replay model (sim/replay.c) every accessed page is resident in its epoch, so
 * between two accesses of a page at epochs a < b a policy either keeps it resident through
 * epochs a+1..b-1 or pays one refault at b.  A page whose next event is a free, or that is
 * never accessed again, costs nothing to evict at once.  Minimising resident time for k
 * refaults is then picking the k live gaps with the largest savings (each costs exactly one
 * refault): VMIN (Prieve & Fabry, CACM 1976) with the cost swept instead of fixed.
 *
 *   plan     one backward pass over the trace gives, for every access entry, the saving
 *            (ms of residency) of evicting after it, or DEAD; savings are sorted once.
 *   bound    mean_resident(k) = (C - sum of the k largest savings) / duration, where C is
 *            the resident time when every live gap is kept (epoch 0 counts all of RAM:
 *            everything starts resident).
 *   policy   k* = the largest k whose rate k / minutes / mean_resident(k) is within the
 *            budget (the rate only grows with k); the replay evicts exactly those k gaps,
 *            and every dead page at once.  Its refaults equal k* and its mean resident
 *            equals the bound, which tests check.
 * Cost: O(entries log entries) for the sort; memory 12 bytes per access entry.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define DEAD UINT64_MAX
#define NONE UINT32_MAX

struct plan {
	uint64_t nr_entries;
	uint64_t *off;    /* first entry of each epoch */
	uint64_t *saving; /* per entry: ms saved by evicting after it, or DEAD */
	uint32_t *order;  /* live entries with saving > 0, largest saving first */
	uint64_t nr_live;
	double c_ms;    /* resident page-ms with every live gap kept */
	uint8_t *evict; /* per entry: evict after it (policy only) */
};

static void plan_free(struct plan *pl)
{
	free(pl->off);
	free(pl->saving);
	free(pl->order);
	free(pl->evict);
	free(pl);
}

static int cmp_saving_desc(const void *a, const void *b, void *arg)
{
	const uint64_t *s = arg;
	uint64_t x = s[*(const uint32_t *)a], y = s[*(const uint32_t *)b];
	return (x < y) - (x > y);
}

static int plan_new(const struct sim_trace *t, struct plan **out)
{
	struct plan *pl = calloc(1, sizeof(*pl));
	uint32_t *next_acc = NULL, *next_free = NULL;
	int rc = -ENOMEM;

	if (!pl)
		return -ENOMEM;
	pl->off = malloc((t->nr_epochs + 1) * sizeof(*pl->off));
	if (!pl->off)
		goto out;
	for (size_t e = 0; e < t->nr_epochs; e++) {
		pl->off[e] = pl->nr_entries;
		pl->nr_entries += t->epochs[e].nr_acc;
	}
	pl->off[t->nr_epochs] = pl->nr_entries;
	if (pl->nr_entries >= UINT32_MAX) {
		rc = -EFBIG;
		goto out;
	}
	pl->saving = malloc((pl->nr_entries + 1) * sizeof(*pl->saving));
	pl->order = malloc((pl->nr_entries + 1) * sizeof(*pl->order));
	next_acc = malloc(t->ram_pages * sizeof(*next_acc));
	next_free = malloc(t->ram_pages * sizeof(*next_free));
	if (!pl->saving || !pl->order || !next_acc || !next_free)
		goto out;
	memset(next_acc, 0xff, t->ram_pages * sizeof(*next_acc));
	memset(next_free, 0xff, t->ram_pages * sizeof(*next_free));
	pl->c_ms = (double)t->ram_pages * (double)(sim_epoch_end_ms(t, 0) - t->epochs[0].t_ms);
	for (size_t e = t->nr_epochs; e-- > 0;) {
		const struct sim_epoch *ep = &t->epochs[e];
		uint64_t end = sim_epoch_end_ms(t, e);
		if (e > 0)
			pl->c_ms += (double)ep->nr_acc * (double)(end - ep->t_ms);
		for (uint32_t i = 0; i < ep->nr_free; i++)
			next_free[ep->freed[i]] = (uint32_t)e;
		for (uint32_t i = 0; i < ep->nr_acc; i++) {
			uint32_t p = SIM_ACC_PAGE(ep->acc[i]);
			uint32_t n = next_acc[p], f = next_free[p];
			uint64_t ent = pl->off[e] + i;
			if (n == NONE || (f != NONE && f < n)) {
				pl->saving[ent] = DEAD;
			} else {
				pl->saving[ent] = t->epochs[n].t_ms - end;
				pl->c_ms += (double)pl->saving[ent];
				if (pl->saving[ent] > 0)
					pl->order[pl->nr_live++] = (uint32_t)ent;
			}
			next_acc[p] = (uint32_t)e;
		}
	}
	qsort_r(pl->order, pl->nr_live, sizeof(*pl->order), cmp_saving_desc, pl->saving);
	*out = pl;
	pl = NULL;
	rc = 0;
out:
	free(next_acc);
	free(next_free);
	if (pl)
		plan_free(pl);
	return rc;
}

static double trace_ms(const struct sim_trace *t)
{
	return (double)(t->end_ms - t->epochs[0].t_ms);
}

/* Largest k within the budget, and the bound at it. */
static uint64_t plan_k_for_budget(const struct plan *pl, const struct sim_trace *t, double budget)
{
	double dur = trace_ms(t), saved = 0;
	uint64_t k = 0;

	for (uint64_t i = 0; i < pl->nr_live; i++) {
		saved += (double)pl->saving[pl->order[i]];
		double mean = (pl->c_ms - saved) / dur;
		if (mean <= 0 || (double)(i + 1) / (dur / 60000.0) / mean > budget)
			break;
		k = i + 1;
	}
	return k;
}

int sim_oracle_bound(const struct sim_trace *t, uint64_t k, double *mean_resident_out)
{
	struct plan *pl;
	double saved = 0;
	int rc = plan_new(t, &pl);

	if (rc)
		return rc;
	for (uint64_t i = 0; i < k && i < pl->nr_live; i++)
		saved += (double)pl->saving[pl->order[i]];
	*mean_resident_out = (pl->c_ms - saved) / trace_ms(t);
	plan_free(pl);
	return 0;
}

static int oracle_init(struct sim_ctx *ctx, void **state)
{
	struct plan *pl;
	int rc = plan_new(ctx->t, &pl);

	if (rc)
		return rc;
	pl->evict = calloc(pl->nr_entries + 1, 1);
	if (!pl->evict) {
		plan_free(pl);
		return -ENOMEM;
	}
	uint64_t k = plan_k_for_budget(pl, ctx->t, ctx->p->budget);
	for (uint64_t i = 0; i < k; i++)
		pl->evict[pl->order[i]] = 1;
	for (uint64_t i = 0; i < pl->nr_entries; i++)
		if (pl->saving[i] == DEAD)
			pl->evict[i] = 1;
	*state = pl;
	return 0;
}

static int oracle_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	const struct plan *pl = state;
	const struct sim_epoch *ep = &ctx->t->epochs[e];

	if (e == 0) /* never-touched pages hold nothing: return them all */
		for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
			if (!(ctx->pg[p] & SIM_PG_LIVE))
				sim_evict(ctx, (uint32_t)p);
	for (uint32_t i = 0; i < ep->nr_acc; i++)
		if (pl->evict[pl->off[e] + i])
			sim_evict(ctx, SIM_ACC_PAGE(ep->acc[i]));
	for (uint32_t i = 0; i < ep->nr_free; i++)
		if (!(ctx->pg[ep->freed[i]] & SIM_PG_LIVE))
			sim_evict(ctx, ep->freed[i]);
	return 0;
}

static void oracle_fini(void *state)
{
	plan_free(state);
}

const struct sim_policy sim_policy_oracle = {
    .name = "oracle",
    .fpr = SIM_FPR_PARAM,
    .knob = "budget",
    .init = oracle_init,
    .epoch = oracle_epoch,
    .fini = oracle_fini,
};
