// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay.c - the replay core: what "resident" and "refault" mean in memtide-sim.
 *
 * The model (docs/trace-format.md, "Replay model", says the same for users):
 *   - Guest RAM starts fully resident: no management ("none") keeps every page resident,
 *     which is what a statically allocated VM costs the host.
 *   - A page is live from its first access until a free record for it, and again from its
 *     next access.  A page that was never accessed, or was freed and not accessed since, is
 *     free: its contents do not matter to the guest.
 *   - Epoch e, step by step:
 *       Step 1: every page accessed in e must be resident during e.  A non-resident page
 *               that was live when it was evicted is a refault (the host must read it back);
 *               one that was free when evicted is a fill (a zero page, no I/O).  A page the
 *               guest's own reclaim swapped out is a refault too, resident or not (the
 *               guest reads it back from its swap).
 *       Step 2: resident pages after step 1 are the epoch's residency, weighted by its
 *               length for the mean; the peak is the largest.
 *       Step 3: the epoch's free records make pages free (they stay resident until
 *               something returns them).
 *       Step 4: free page reporting, when on, returns 2 MiB blocks free for its delay.
 *       Step 5: the policy sees the epoch and evicts with sim_evict().
 *   - Rates: refault_rate = refaults per minute / mean resident pages (the budget's unit);
 *     refault_share = refaults / live pages evicted.
 * The policy's CPU time is CLOCK_THREAD_CPUTIME_ID around its init and epoch calls only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

int sim_evict(struct sim_ctx *ctx, uint32_t idx)
{
	uint8_t *pg = &ctx->pg[idx];

	if (!(*pg & SIM_PG_RESIDENT))
		return 0;
	*pg &= (uint8_t)~SIM_PG_RESIDENT;
	if (*pg & SIM_PG_LIVE) {
		*pg |= SIM_PG_EVLIVE;
		ctx->res->evicted_live++;
	} else {
		*pg &= (uint8_t)~SIM_PG_EVLIVE;
		ctx->res->evicted_free++;
	}
	ctx->resident_pages--;
	return 1;
}

int sim_guest_swapout(struct sim_ctx *ctx, uint32_t idx)
{
	uint8_t *pg = &ctx->pg[idx];

	if (!(*pg & SIM_PG_LIVE) || !(*pg & SIM_PG_RESIDENT))
		return 0;
	*pg = (uint8_t)((*pg & ~SIM_PG_LIVE) | SIM_PG_GSWAP);
	ctx->live_pages--;
	ctx->res->evicted_live++;
	if (ctx->fpr)
		sim_fpr_live(ctx->fpr, idx, -1, ctx->now_ms);
	return 1;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Steps 1-3 for epoch e. */
static void apply_epoch(struct sim_ctx *ctx, size_t e, uint64_t now_ms)
{
	const struct sim_epoch *ep = &ctx->t->epochs[e];

	ctx->nr_faulted = 0;
	/* Step 1: accesses. */
	for (uint32_t i = 0; i < ep->nr_acc; i++) {
		uint32_t idx = SIM_ACC_PAGE(ep->acc[i]);
		uint8_t *pg = &ctx->pg[idx];
		if (!(*pg & SIM_PG_RESIDENT) || (*pg & SIM_PG_GSWAP)) {
			bool refault = *pg & (SIM_PG_EVLIVE | SIM_PG_GSWAP);
			if (refault)
				ctx->res->refaults++;
			else
				ctx->res->fills++;
			ctx->faulted_refault[ctx->nr_faulted] = refault;
			ctx->faulted[ctx->nr_faulted++] = idx;
			if (!(*pg & SIM_PG_RESIDENT))
				ctx->resident_pages++;
			*pg = (uint8_t)((*pg | SIM_PG_RESIDENT) & ~(SIM_PG_EVLIVE | SIM_PG_GSWAP));
		}
		if (!(*pg & SIM_PG_LIVE)) {
			*pg |= SIM_PG_LIVE;
			ctx->live_pages++;
			if (ctx->fpr)
				sim_fpr_live(ctx->fpr, idx, +1, now_ms);
		}
	}
}

static void apply_frees(struct sim_ctx *ctx, size_t e, uint64_t now_ms)
{
	const struct sim_epoch *ep = &ctx->t->epochs[e];

	/* Step 3: frees. */
	for (uint32_t i = 0; i < ep->nr_free; i++) {
		uint8_t *pg = &ctx->pg[ep->freed[i]];
		if (*pg & SIM_PG_LIVE) {
			*pg &= (uint8_t)~SIM_PG_LIVE;
			ctx->live_pages--;
			if (ctx->fpr)
				sim_fpr_live(ctx->fpr, ep->freed[i], -1, now_ms);
		}
		/* A freed page holds nothing any more, evicted or in the guest's swap. */
		if (!(*pg & SIM_PG_RESIDENT))
			*pg &= (uint8_t)~SIM_PG_EVLIVE;
		*pg &= (uint8_t)~SIM_PG_GSWAP;
	}
}

int sim_replay(const struct sim_trace *t, const struct sim_policy *pol, const struct sim_params *p,
	       bool keep_series, struct sim_result *res)
{
	struct sim_ctx ctx = {.t = t, .p = p, .res = res};
	void *state = NULL;
	double resident_ms = 0, cpu0;
	int rc = -ENOMEM;

	memset(res, 0, sizeof(*res));
	snprintf(res->policy, sizeof(res->policy), "%s", pol->name);
	res->ram_pages = t->ram_pages;
	if (!t->nr_epochs || t->end_ms <= t->epochs[0].t_ms)
		return -EINVAL;
	ctx.pg = malloc(t->ram_pages);
	ctx.faulted = malloc(t->ram_pages * sizeof(*ctx.faulted));
	ctx.faulted_refault = malloc(t->ram_pages);
	if (keep_series) {
		res->refaults_per_epoch = calloc(t->nr_epochs, sizeof(uint32_t));
		res->resident_per_epoch = calloc(t->nr_epochs, sizeof(uint32_t));
	}
	if (!ctx.pg || !ctx.faulted || !ctx.faulted_refault ||
	    (keep_series && (!res->refaults_per_epoch || !res->resident_per_epoch)))
		goto out;
	memset(ctx.pg, SIM_PG_RESIDENT, t->ram_pages);
	ctx.resident_pages = t->ram_pages;
	if (pol->fpr == SIM_FPR_ON || (pol->fpr == SIM_FPR_PARAM && p->fpr)) {
		rc = sim_fpr_new(t, p->fpr_delay_ms, &ctx.fpr);
		if (rc)
			goto out;
	}
	cpu0 = thread_cpu_s();
	rc = pol->init ? pol->init(&ctx, &state) : 0;
	res->policy_cpu_s += thread_cpu_s() - cpu0;
	if (rc)
		goto out;
	for (size_t e = 0; e < t->nr_epochs; e++) {
		uint64_t t0 = t->epochs[e].t_ms, t1 = sim_epoch_end_ms(t, e);
		uint64_t before = res->refaults;
		apply_epoch(&ctx, e, t0);
		/* Step 2: residency during the epoch. */
		resident_ms += (double)ctx.resident_pages * (double)(t1 - t0);
		if (ctx.resident_pages > res->peak_resident_pages)
			res->peak_resident_pages = ctx.resident_pages;
		if (res->refaults_per_epoch) {
			res->refaults_per_epoch[e] = (uint32_t)(res->refaults - before);
			res->resident_per_epoch[e] = (uint32_t)ctx.resident_pages;
		}
		apply_frees(&ctx, e, t1);
		/* Step 4: free page reporting. */
		if (ctx.fpr)
			sim_fpr_report(ctx.fpr, &ctx, t1);
		/* Step 5: the policy. */
		ctx.now_ms = t1;
		cpu0 = thread_cpu_s();
		rc = pol->epoch ? pol->epoch(&ctx, state, e) : 0;
		res->policy_cpu_s += thread_cpu_s() - cpu0;
		if (rc)
			goto out;
	}
	double dur_ms = (double)(t->end_ms - t->epochs[0].t_ms);
	res->duration_min = dur_ms / 60000.0;
	res->mean_resident_pages = resident_ms / dur_ms;
	res->saved = 1.0 - res->mean_resident_pages / (double)t->ram_pages;
	res->refault_rate =
	    res->mean_resident_pages > 0
		? (double)res->refaults / res->duration_min / res->mean_resident_pages
		: 0;
	res->refault_share =
	    res->evicted_live ? (double)res->refaults / (double)res->evicted_live : 0;
	rc = 0;
out:
	if (pol->fini && state)
		pol->fini(state);
	sim_fpr_free(ctx.fpr);
	free(ctx.pg);
	free(ctx.faulted);
	free(ctx.faulted_refault);
	if (rc)
		sim_result_free(res);
	return rc;
}

void sim_result_free(struct sim_result *res)
{
	free(res->refaults_per_epoch);
	free(res->resident_per_epoch);
	res->refaults_per_epoch = NULL;
	res->resident_per_epoch = NULL;
}

uint64_t sim_react_ms(const struct sim_trace *t, const struct sim_result *r, uint64_t step_ms,
		      uint64_t window_ms, double budget)
{
	uint64_t last_over_end = 0;
	size_t e = 0;

	if (!r->refaults_per_epoch || !window_ms)
		return 0;
	while (e < t->nr_epochs && t->epochs[e].t_ms < step_ms)
		e++;
	/* Windows [step + i*w, step + (i+1)*w): refaults per minute over mean resident. */
	for (uint64_t w0 = step_ms; e < t->nr_epochs; w0 += window_ms) {
		double refaults = 0, res_ms = 0, span_ms = 0;
		for (; e < t->nr_epochs && t->epochs[e].t_ms < w0 + window_ms; e++) {
			double d = (double)(sim_epoch_end_ms(t, e) - t->epochs[e].t_ms);
			refaults += r->refaults_per_epoch[e];
			res_ms += r->resident_per_epoch[e] * d;
			span_ms += d;
		}
		if (span_ms <= 0)
			continue;
		double rate = refaults / (span_ms / 60000.0) / (res_ms / span_ms);
		if (rate > budget)
			last_over_end = w0 + window_ms - step_ms;
	}
	return last_over_end;
}

void sim_result_json(FILE *out, const char *name, const char *trace, const struct sim_result *r)
{
	fprintf(out,
		"{\"name\":\"%s\",\"trace\":\"%s\",\"policy\":\"%s\",\"ram_pages\":%llu,"
		"\"duration_min\":%.3f,\"mean_resident_pages\":%.1f,\"peak_resident_pages\":%llu,"
		"\"saved\":%.5f,\"refaults\":%llu,\"fills\":%llu,\"evicted_live\":%llu,"
		"\"evicted_free\":%llu,\"refault_rate_per_min\":%.6f,\"refault_share\":%.5f,"
		"\"policy_cpu_s\":%.4f}\n",
		name, trace, r->policy, (unsigned long long)r->ram_pages, r->duration_min,
		r->mean_resident_pages, (unsigned long long)r->peak_resident_pages, r->saved,
		(unsigned long long)r->refaults, (unsigned long long)r->fills,
		(unsigned long long)r->evicted_live, (unsigned long long)r->evicted_free,
		r->refault_rate, r->refault_share, r->policy_cpu_s);
}
