// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gen.c - synthetic access traces: the shapes a balloon policy must get right.
 *
 * Every generator lays guest RAM out as one range from GPA 0, uses epochs of epoch_ms and
 * is deterministic for a seed.  The shapes, with what each one tests:
 *   zipf    75% of RAM is live (written in epoch 0); each epoch draws RAM/5 page accesses
 *           from a Zipf(1.3) popularity over it, ranks shuffled over the pages.  A long
 *           tail of pages reused every tens of seconds to minutes: the classic cold memory.
 *   grow    the allocated region [0, w) follows a triangle wave between 20% and 80% of RAM
 *           (period 300 epochs); its first quarter is hot (every epoch), the rest is touched
 *           with probability 0.05 per epoch; pages above w are freed when w shrinks.
 *   phases  four phases of epochs/4, hot set A, B, C, A (each 20% of RAM, each page touched
 *           with probability 0.5 per epoch) over 80% of RAM written in epoch 0: old phases
 *           come back, so evicting them too eagerly costs refaults.
 *   scan    20% of RAM hot (p = 0.7 per epoch), 60% written in epoch 0 and then idle except
 *           for one sequential scan over it (4% of RAM per epoch) starting at half time.
 *   sparse  one hot 4 KiB page per 2 MiB block (every epoch) in every block; the other pages
 *           of 75% of the blocks are written in epoch 0 and never again.  Free page
 *           reporting returns nothing here (no block is wholly free).
 *   step    10% hot (every epoch); 40% written in epoch 0 and idle until half time, then all
 *           of it touched at once and afterwards each page every 20 epochs (staggered): a
 *           step growth of the working set (sim_react).  o->step_at_ms says when.
 *   kv      a key-value server: 1% of RAM (its code, stack and index) touched every epoch;
 *           a store of 40% of RAM written once, in order, over the first 30 s (loaded
 *           while memtide watches); then GETs over a hot tenth of the store, pages picked
 *           at random, each hot page read kv_reads_per_s times a second on average (a
 *           Poisson count per epoch), the rest never read again.  Epochs of 100 ms by
 *           default, so that a sampling source's 200 ms windows are two whole epochs.  The
 *           shape that made memtided return nothing with a sampled source (docs/design.md,
 *           Part 0, "What a sampled source can tell").
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static const char *const gen_names[SIM_GEN__COUNT] = {
    [SIM_GEN_ZIPF] = "zipf", [SIM_GEN_GROW] = "grow",     [SIM_GEN_PHASES] = "phases",
    [SIM_GEN_SCAN] = "scan", [SIM_GEN_SPARSE] = "sparse", [SIM_GEN_STEP] = "step",
    [SIM_GEN_KV] = "kv",
};

const char *sim_gen_name(enum sim_gen_kind k)
{
	return (unsigned)k < SIM_GEN__COUNT ? gen_names[k] : "?";
}

int sim_gen_by_name(const char *name, enum sim_gen_kind *out)
{
	for (int k = 0; k < SIM_GEN__COUNT; k++) {
		if (!strcmp(name, gen_names[k])) {
			*out = (enum sim_gen_kind)k;
			return 0;
		}
	}
	return -ENOENT;
}

void sim_gen_opts_default(struct sim_gen_opts *o, enum sim_gen_kind k)
{
	memset(o, 0, sizeof(*o));
	o->kind = k;
	o->ram_pages = 32768; /* 128 MiB: big enough for 64 blocks, small enough to be quick */
	o->epochs = 600;
	o->epoch_ms = 1000;
	o->seed = 42;
	o->kv_reads_per_s = 1.0;
	o->kv_load_ms = 30000;
	if (k == SIM_GEN_KV) { /* 10 minutes in 100 ms epochs */
		o->epochs = 6000;
		o->epoch_ms = 100;
	}
}

/* Per-epoch access list under construction. */
struct acc {
	uint32_t *v;
	size_t n, cap;
	uint32_t *fr;
	size_t nf, capf;
};

static int push(uint32_t **v, size_t *n, size_t *cap, uint32_t x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		uint32_t *nv = realloc(*v, c * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int acc_add(struct acc *a, uint64_t pg, bool write)
{
	return push(&a->v, &a->n, &a->cap, (uint32_t)pg | (write ? SIM_ACC_WRITE : 0));
}

static int acc_range(struct acc *a, uint64_t from, uint64_t to, bool write)
{
	for (uint64_t p = from; p < to; p++)
		if (acc_add(a, p, write))
			return -ENOMEM;
	return 0;
}

/* Zipf: ranks 1..n, P(r) ~ 1/r^s, sampled by binary search over the CDF. */
struct zipf {
	double *cdf;
	uint32_t *page_of_rank;
	uint64_t n;
};

static int zipf_init(struct zipf *z, uint64_t n, double s, uint64_t *rng)
{
	double sum = 0;

	z->n = n;
	z->cdf = malloc(n * sizeof(double));
	z->page_of_rank = malloc(n * sizeof(uint32_t));
	if (!z->cdf || !z->page_of_rank)
		return -ENOMEM;
	for (uint64_t r = 0; r < n; r++) {
		sum += 1.0 / pow((double)(r + 1), s);
		z->cdf[r] = sum;
		z->page_of_rank[r] = (uint32_t)r;
	}
	for (uint64_t r = 0; r < n; r++)
		z->cdf[r] /= sum;
	for (uint64_t r = n - 1; r > 0; r--) { /* Fisher-Yates */
		uint64_t j = sim_rand(rng) % (r + 1);
		uint32_t tmp = z->page_of_rank[r];
		z->page_of_rank[r] = z->page_of_rank[j];
		z->page_of_rank[j] = tmp;
	}
	return 0;
}

static uint32_t zipf_draw(const struct zipf *z, uint64_t *rng)
{
	double u = sim_rand01(rng);
	uint64_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return z->page_of_rank[lo];
}

/* Working-set size of the grow generator at epoch e, in pages. */
static uint64_t grow_w(uint64_t ram, uint64_t e)
{
	double ph = (double)(e % 300) / 300.0;
	double tri = ph < 0.5 ? ph * 2 : 2 - ph * 2;
	uint64_t w = (uint64_t)((double)ram * (0.2 + 0.6 * tri));
	return w < 1 ? 1 : w;
}

/* The kv generator's layout: the server's own pages, then the store; hot[] marks the
 * store's hot tenth. */
static int kv_epoch(const struct sim_gen_opts *o, uint64_t e, struct acc *a, uint64_t *rng,
		    const uint8_t *hot)
{
	uint64_t ram = o->ram_pages, server = ram / 100, base = ram / 50, store = ram * 2 / 5;
	uint64_t t = e * o->epoch_ms, load_epochs = o->kv_load_ms / o->epoch_ms;
	/* A Poisson count of reads per epoch: the page is read at least once in it with
	 * probability 1 - exp(-rate x epoch). */
	double p_read = 1.0 - exp(-o->kv_reads_per_s * (double)o->epoch_ms / 1000.0);
	int rc = acc_range(a, 0, server, e == 0);

	if (!rc && t < o->kv_load_ms) { /* the load: the store written in order */
		uint64_t per = (store + load_epochs - 1) / (load_epochs ? load_epochs : 1);
		uint64_t from = base + e * per,
			 to = from + per < base + store ? from + per : base + store;
		if (from < base + store)
			rc = acc_range(a, from, to, true);
		return rc;
	}
	for (uint64_t p = base; p < base + store && !rc; p++)
		if (hot[p - base] && sim_rand01(rng) < p_read)
			rc = acc_add(a, p, false);
	return rc;
}

static int gen_epoch(struct sim_gen_opts *o, uint64_t e, struct acc *a, uint64_t *rng,
		     const struct zipf *z, const uint8_t *kv_hot)
{
	uint64_t ram = o->ram_pages, half = o->epochs / 2;
	int rc = 0;

	switch (o->kind) {
	case SIM_GEN_ZIPF:
		if (e == 0)
			return acc_range(a, 0, ram * 3 / 4, true);
		for (uint64_t i = 0; i < ram / 5 && !rc; i++)
			rc = acc_add(a, zipf_draw(z, rng), sim_rand(rng) % 4 == 0);
		return rc;
	case SIM_GEN_GROW: {
		uint64_t w = grow_w(ram, e), prev = e ? grow_w(ram, e - 1) : 0;
		if (w > prev) /* new allocations are written */
			rc = acc_range(a, prev, w, true);
		for (uint64_t p = 0; p < w / 4 && !rc; p++)
			rc = acc_add(a, p, false);
		for (uint64_t p = w / 4; p < w && !rc; p++)
			if (sim_rand01(rng) < 0.05)
				rc = acc_add(a, p, false);
		for (uint64_t p = w; p < prev && !rc; p++)
			rc = push(&a->fr, &a->nf, &a->capf, (uint32_t)p);
		return rc;
	}
	case SIM_GEN_PHASES: {
		uint64_t hs = ram / 5, phase = e / (o->epochs / 4 ? o->epochs / 4 : 1);
		uint64_t base = (phase % 3) * hs;
		if (e == 0)
			return acc_range(a, 0, ram * 4 / 5, true);
		for (uint64_t p = base; p < base + hs && !rc; p++)
			if (sim_rand01(rng) < 0.5)
				rc = acc_add(a, p, sim_rand(rng) % 8 == 0);
		return rc;
	}
	case SIM_GEN_SCAN: {
		uint64_t hot = ram / 5, cold_end = ram * 4 / 5, step = ram / 25;
		if (e == 0)
			rc = acc_range(a, 0, cold_end, true);
		for (uint64_t p = 0; p < hot && !rc; p++)
			if (sim_rand01(rng) < 0.7)
				rc = acc_add(a, p, sim_rand(rng) % 4 == 0);
		if (e >= half) {
			uint64_t from = hot + (e - half) * step;
			uint64_t to = from + step < cold_end ? from + step : cold_end;
			if (from < cold_end && !rc)
				rc = acc_range(a, from, to, false);
		}
		return rc;
	}
	case SIM_GEN_SPARSE:
		for (uint64_t b = 0; b < ram / SIM_BLOCK_PAGES && !rc; b++) {
			uint64_t first = b * SIM_BLOCK_PAGES;
			uint64_t hotp = first + (b * 37 + 11) % SIM_BLOCK_PAGES;
			if (e == 0 && b % 4 != 3)
				rc = acc_range(a, first, first + SIM_BLOCK_PAGES, true);
			else
				rc = acc_add(a, hotp, true);
		}
		return rc;
	case SIM_GEN_STEP: {
		uint64_t hot = ram / 10, b_end = hot + ram * 2 / 5;
		o->step_at_ms = half * o->epoch_ms;
		rc = acc_range(a, 0, hot, e == 0);
		if (!rc && (e == 0 || e == half))
			rc = acc_range(a, hot, b_end, e == 0);
		if (e > half)
			for (uint64_t p = hot; p < b_end && !rc; p++)
				if ((p + e - half) % 20 == 0)
					rc = acc_add(a, p, false);
		return rc;
	}
	case SIM_GEN_KV:
		return kv_epoch(o, e, a, rng, kv_hot);
	case SIM_GEN__COUNT:
		break;
	}
	return -EINVAL;
}

int sim_gen(struct sim_gen_opts *o, struct sim_trace *t)
{
	struct vmm_range ram = {0, o->ram_pages * SIM_PAGE_SIZE};
	struct zipf z = {0};
	struct acc a = {0};
	uint8_t *hot = NULL;
	uint64_t rng = o->seed ? o->seed : 1;
	int rc;

	if (!o->ram_pages || o->ram_pages % SIM_BLOCK_PAGES || o->ram_pages > SIM_MAX_RAM_PAGES ||
	    !o->epochs || !o->epoch_ms || (unsigned)o->kind >= SIM_GEN__COUNT)
		return -EINVAL;
	if (o->kind == SIM_GEN_KV &&
	    (!(o->kv_reads_per_s > 0.0) || o->kv_reads_per_s > 1000.0 || o->ram_pages < 1024 ||
	     o->kv_load_ms < o->epoch_ms || o->kv_load_ms > 3600000))
		return -EINVAL;
	rc = sim_trace_init(t, &ram, 1);
	if (rc)
		return rc;
	snprintf(t->source, sizeof(t->source), "gen:%s", sim_gen_name(o->kind));
	if (o->kind == SIM_GEN_ZIPF)
		rc = zipf_init(&z, o->ram_pages * 3 / 4, 1.3, &rng);
	if (o->kind == SIM_GEN_KV) { /* a tenth of the store, at random */
		uint64_t store = o->ram_pages * 2 / 5;
		hot = calloc(store, 1);
		if (!hot)
			rc = -ENOMEM;
		for (uint64_t p = 0; p < store && !rc; p++)
			hot[p] = o->kv_hot_first ? p < store / 10 : sim_rand(&rng) % 10 == 0;
		snprintf(t->source, sizeof(t->source), "gen:kv@%g/s%s", o->kv_reads_per_s,
			 o->kv_hot_first ? ",hot-first" : "");
	}
	for (uint64_t e = 0; e < o->epochs && !rc; e++) {
		a.n = a.nf = 0;
		rc = gen_epoch(o, e, &a, &rng, &z, hot);
		if (!rc)
			rc = sim_trace_add_epoch(t, e * o->epoch_ms, a.v, a.n, a.fr, a.nf);
	}
	if (!rc)
		rc = sim_trace_finish(t, o->epochs * o->epoch_ms);
	free(a.v);
	free(a.fr);
	free(z.cdf);
	free(z.page_of_rank);
	free(hot);
	if (rc)
		sim_trace_free(t);
	return rc;
}
