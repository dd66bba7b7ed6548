// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_damon.c - DAMON's region-based access sampling with DAMON_RECLAIM's scheme, as
 * mm/damon/core.c and mm/damon/reclaim.c do it (6.1), over guest RAM as one target.
 *
 * Regions: contiguous page ranges covering RAM, each with nr_accesses (samples that found
 * its sampled page accessed, this aggregation), last_nr_accesses and age (aggregations with
 * a similar access count).  Every aggregation interval (100 ms) of every epoch:
 *   Step 1: sample: aggr/sample (20) times per region, test one random page of it;
 *   Step 2: merge neighbours whose nr_accesses differ by <= max(1, samples/10) while the
 *           merged size stays <= RAM / min_regions (age, counts: size-weighted means); a
 *           region whose count moved by more than that threshold gets age 0, else age + 1;
 *   Step 3: DAMON_RECLAIM: page out regions with nr_accesses == 0 and age >= min_age,
 *           oldest first, within the size quota (128 MiB per 1 s window);
 *   Step 4: last_nr_accesses = nr_accesses, nr_accesses = 0;
 *   Step 5: split every region in two (three when fewer than max/3) at random points,
 *           while there are at most max_regions / 2 regions.
 * The one approximation: a trace knows accesses per epoch, not per 5 ms, so a sample sees a
 * page accessed when the trace says it was accessed in the epoch holding the sample.  That
 * makes DAMON see more accesses than it would (never fewer): it errs toward keeping memory.
 * DAMON_RECLAIM's free-memory watermarks are left out: a host-side policy runs regardless
 * of the guest's free memory, as the other policies here do.
 * Cost: per aggregation, samples x regions (<= 20,000) random lookups, and O(regions) for
 * merge and split.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct region {
	uint64_t start, end; /* pages [start, end) */
	uint32_t nr_accesses, last_nr_accesses;
	uint32_t age; /* aggregation intervals */
};

struct cand {
	uint32_t age;
	size_t idx;
};

struct damon {
	struct region *r, *tmp;
	size_t nr, cap;
	uint32_t *stamp; /* epoch + 1 when the page was accessed in that epoch */
	uint64_t next_aggr_ms;
	uint64_t quota_window_ms, quota_used_bytes;
	uint64_t rng;
	uint32_t samples; /* per region per aggregation */
	struct cand *cand;
};

static int damon_init(struct sim_ctx *ctx, void **state)
{
	const struct sim_params *p = ctx->p;
	struct damon *d = calloc(1, sizeof(*d));
	uint64_t ram = ctx->t->ram_pages, n = p->damon_min_regions;

	if (!d)
		return -ENOMEM;
	if (p->damon_aggr_ms < p->damon_sample_ms || p->damon_min_regions > p->damon_max_regions) {
		free(d);
		return -EINVAL;
	}
	if (n > ram)
		n = ram;
	d->cap = 3 * p->damon_max_regions + 3;
	d->r = calloc(d->cap, sizeof(*d->r));
	d->tmp = calloc(d->cap, sizeof(*d->tmp));
	d->cand = calloc(d->cap, sizeof(*d->cand));
	d->stamp = calloc(ram, sizeof(*d->stamp));
	if (!d->r || !d->tmp || !d->stamp || !d->cand) {
		free(d->r);
		free(d->tmp);
		free(d->cand);
		free(d->stamp);
		free(d);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		d->r[i].start = ram * i / n;
		d->r[i].end = ram * (i + 1) / n;
	}
	d->nr = n;
	d->samples = (uint32_t)(p->damon_aggr_ms / p->damon_sample_ms);
	d->next_aggr_ms = ctx->t->epochs[0].t_ms + p->damon_aggr_ms;
	d->quota_window_ms = ctx->t->epochs[0].t_ms;
	d->rng = p->seed;
	*state = d;
	return 0;
}

static void damon_merge(struct damon *d, uint64_t sz_limit)
{
	uint32_t thres = d->samples / 10 > 1 ? d->samples / 10 : 1;
	size_t o = 0;

	for (size_t i = 0; i < d->nr; i++) {
		struct region *r = &d->r[i];
		uint32_t diff = r->nr_accesses > r->last_nr_accesses
				    ? r->nr_accesses - r->last_nr_accesses
				    : r->last_nr_accesses - r->nr_accesses;
		r->age = diff > thres ? 0 : r->age + 1;
		if (o) {
			struct region *m = &d->tmp[o - 1];
			uint32_t dn = m->nr_accesses > r->nr_accesses
					  ? m->nr_accesses - r->nr_accesses
					  : r->nr_accesses - m->nr_accesses;
			uint64_t sm = m->end - m->start, sr = r->end - r->start;
			if (dn <= thres && sm + sr <= sz_limit) {
				m->nr_accesses =
				    (uint32_t)((m->nr_accesses * sm + r->nr_accesses * sr) /
					       (sm + sr));
				m->last_nr_accesses = (uint32_t)((m->last_nr_accesses * sm +
								  r->last_nr_accesses * sr) /
								 (sm + sr));
				m->age = (uint32_t)((m->age * sm + r->age * sr) / (sm + sr));
				m->end = r->end;
				continue;
			}
		}
		d->tmp[o++] = *r;
	}
	struct region *sw = d->r;
	d->r = d->tmp;
	d->tmp = sw;
	d->nr = o;
}

static void damon_split(struct damon *d, const struct sim_params *p)
{
	size_t o = 0, parts;

	if (d->nr > p->damon_max_regions / 2)
		return;
	parts = d->nr < p->damon_max_regions / 3 ? 3 : 2;
	for (size_t i = 0; i < d->nr; i++) {
		struct region r = d->r[i];
		for (size_t k = 1; k < parts && r.end - r.start >= 2; k++) {
			/* A split point 10%..90% into what is left, as damon_split_regions_of. */
			uint64_t sz = r.end - r.start;
			uint64_t at = r.start + sz / 10 + sim_rand(&d->rng) % (sz * 8 / 10 + 1);
			if (at <= r.start || at >= r.end)
				break;
			d->tmp[o] = r;
			d->tmp[o++].end = at;
			r.start = at;
		}
		d->tmp[o++] = r;
	}
	struct region *sw = d->r;
	d->r = d->tmp;
	d->tmp = sw;
	d->nr = o;
}

static int cmp_age_desc(const void *a, const void *b)
{
	uint32_t x = ((const struct cand *)a)->age, y = ((const struct cand *)b)->age;
	return (x < y) - (x > y);
}

static void damon_reclaim(struct damon *d, struct sim_ctx *ctx, uint64_t now_ms)
{
	const struct sim_params *p = ctx->p;
	size_t n = 0;

	if (now_ms >= d->quota_window_ms + 1000) {
		d->quota_window_ms = now_ms;
		d->quota_used_bytes = 0;
	}
	for (size_t i = 0; i < d->nr; i++)
		if (d->r[i].nr_accesses == 0 &&
		    (uint64_t)d->r[i].age * p->damon_aggr_ms >= p->damon_min_age_ms)
			d->cand[n++] = (struct cand){d->r[i].age, i};
	qsort(d->cand, n, sizeof(*d->cand), cmp_age_desc);
	for (size_t c = 0; c < n; c++) {
		const struct region *r = &d->r[d->cand[c].idx];
		for (uint64_t pg = r->start; pg < r->end; pg++) {
			if (p->damon_quota_bytes_s &&
			    d->quota_used_bytes + SIM_PAGE_SIZE > p->damon_quota_bytes_s)
				return;
			d->quota_used_bytes += SIM_PAGE_SIZE;
			sim_evict(ctx, (uint32_t)pg);
		}
	}
}

static int damon_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct damon *d = state;
	const struct sim_params *p = ctx->p;
	const struct sim_epoch *ep = &ctx->t->epochs[e];
	uint64_t t1 = sim_epoch_end_ms(ctx->t, e);
	uint64_t sz_limit = ctx->t->ram_pages / p->damon_min_regions;

	for (uint32_t i = 0; i < ep->nr_acc; i++)
		d->stamp[SIM_ACC_PAGE(ep->acc[i])] = (uint32_t)e + 1;
	if (sz_limit < 1)
		sz_limit = 1;
	while (d->next_aggr_ms <= t1) {
		for (size_t i = 0; i < d->nr; i++) { /* Step 1 */
			struct region *r = &d->r[i];
			uint64_t sz = r->end - r->start;
			for (uint32_t s = 0; s < d->samples; s++)
				r->nr_accesses +=
				    d->stamp[r->start + sim_rand(&d->rng) % sz] == (uint32_t)e + 1;
		}
		damon_merge(d, sz_limit);               /* Step 2 */
		damon_reclaim(d, ctx, d->next_aggr_ms); /* Step 3 */
		for (size_t i = 0; i < d->nr; i++) {    /* Step 4 */
			d->r[i].last_nr_accesses = d->r[i].nr_accesses;
			d->r[i].nr_accesses = 0;
		}
		damon_split(d, p); /* Step 5 */
		d->next_aggr_ms += p->damon_aggr_ms;
	}
	return 0;
}

static void damon_fini(void *state)
{
	struct damon *d = state;

	free(d->r);
	free(d->tmp);
	free(d->cand);
	free(d->stamp);
	free(d);
}

const struct sim_policy sim_policy_damon = {
    .name = "damon",
    .fpr = SIM_FPR_PARAM,
    .knob = "damon-min-age-ms",
    .init = damon_init,
    .epoch = damon_epoch,
    .fini = damon_fini,
};
