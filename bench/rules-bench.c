// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rules-bench.c - the two rules where libvmm could depart from Linux's MGLRU, measured
 * (`make bench`; build/bin/rules-bench; JSON lines, "name": "mglru_rules").
 *
 *   dirty_ages_up           a leaf found dirty but not young moves its page up one
 *                           generation (memtide's old rule; Linux skips non-young entries)
 *   lookaround_feeds_bloom  the eviction hand's look-around puts a leaf table it found dense
 *                           with young entries into the next walk's bloom filter (Linux)
 *
 * A page-table lab: every round, the workload's accesses go to simulated EPT tables as an
 * MMU makes them (vmm_simhw_access: A, and D on a write; an access to an evicted page maps
 * it again: a refault), vmm_age_walk ages the guest (bloom filter on, as on hardware
 * tables), then vmm_evict takes every page idle for 3 rounds or more, with look-around over
 * the tables, and the tables drop what it took (vmm_simhw_unmap).  The same rounds run
 * under the four combinations of the two rules, and again without look-around (the
 * eviction hand without the tables: memtided's loop today, where the balloon or the
 * guest picks the pages; the feed rule cannot act there).  Figures per combination:
 *   refaults          pages the walk found back after eviction (libvmm's count)
 *   resident_share    mean resident pages / RAM over the measured rounds
 *   seen_share        young pages the walks reported / pages accessed in their rounds
 *                     (the bloom filter's blind spot: a skipped table's pages are seen
 *                     only at the next full walk, or by look-around)
 *   ws_recall         (synthetic workloads) hot pages in the two youngest generations
 *                     after each walk / hot pages: what the working-set estimate counts
 *   entries_per_round page-table entries the walks read
 * Workloads: "mixed" (1 GiB, 5% of pages hot in 1-8 MiB clusters plus one hot page in
 * every other 2 MiB: the shape under which the working set was undercounted), "runs" (the clusters
 * plus a run of 16 hot pages in every other 2 MiB: dense for a look-around window, sparse
 * for the walk's admission), both with one hot page in 8 written each round; and the
 * policy lab's real-program traces (sim/traces/, --traces DIR), one epoch per round.
 * Rounds after the first 8 are measured.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "vmm.h"

#define MIN_AGE_ROUNDS 3
#define ROUND_MS       1000
#define WARMUP         8
#define RUNS_MAX       1024

struct acc {
	uint64_t gpa;
	bool write;
};

/* A workload: round r's accesses, and the pages counted as hot (synthetic only). */
struct workload {
	const char *name;
	struct vmm_range ram;
	size_t rounds;
	/* fills acc (cap: RAM pages), returns the count */
	size_t (*round)(const struct workload *w, size_t r, struct acc *acc);
	const struct sim_trace *t;
	uint64_t *hot; /* synthetic: the hot pages (gpa), every round */
	uint64_t nhot;
};

struct figures {
	uint64_t refaults, resident_sum, young, accessed, entries, ws_hit, ws_total;
	size_t rounds;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static size_t synth_round(const struct workload *w, size_t r, struct acc *acc)
{
	(void)r;
	for (uint64_t i = 0; i < w->nhot; i++)
		acc[i] = (struct acc){w->hot[i], (i & 7) == 0};
	return w->nhot;
}

static size_t trace_round(const struct workload *w, size_t r, struct acc *acc)
{
	const struct sim_epoch *e = &w->t->epochs[r];

	for (uint32_t i = 0; i < e->nr_acc; i++)
		acc[i] = (struct acc){sim_page_gpa(w->t, SIM_ACC_PAGE(e->acc[i])),
				      (e->acc[i] & SIM_ACC_WRITE) != 0};
	return e->nr_acc;
}

/* "mixed" and "runs" over npages: clusters of 5% plus, in every other 2 MiB, one page or
 * a run of 16. */
static uint64_t *synth_hot(bool runs, uint64_t npages, uint64_t *n)
{
	unsigned char *hot = calloc(npages, 1);
	uint64_t rng = runs ? 11 : 13, want = npages / 20, have = 0, *out;

	if (!hot)
		return NULL;
	while (have < want) {
		uint64_t len = 256 + rng_next(&rng) % 1792, start = rng_next(&rng) % (npages - len);
		for (uint64_t p = start; p < start + len && have < want; p++) {
			have += !hot[p];
			hot[p] = 1;
		}
	}
	for (uint64_t t = 1; t < npages / 512; t += 2) {
		uint64_t at = t * 512 + rng_next(&rng) % (runs ? 512 - 16 : 512);
		for (uint64_t i = 0; i < (runs ? 16 : 1); i++)
			hot[at + i] = 1;
	}
	out = malloc(npages * sizeof(*out));
	*n = 0;
	for (uint64_t p = 0; out && p < npages; p++)
		if (hot[p])
			out[(*n)++] = p << 12;
	free(hot);
	return out;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

struct ws_ctx {
	const uint64_t *hot; /* sorted */
	uint64_t n, hits;
};

static void ws_count(void *arg, uint64_t gpa, uint64_t npages)
{
	struct ws_ctx *c = arg;
	/* hot pages in [gpa, gpa + npages * 4K): two binary searches */
	uint64_t lo = 0, hi = c->n, end = gpa + npages * VMM_PAGE_SIZE;
	while (lo < hi) {
		uint64_t m = (lo + hi) / 2;
		if (c->hot[m] < gpa)
			lo = m + 1;
		else
			hi = m;
	}
	uint64_t first = lo;
	hi = c->n;
	while (lo < hi) {
		uint64_t m = (lo + hi) / 2;
		if (c->hot[m] < end)
			lo = m + 1;
		else
			hi = m;
	}
	c->hits += lo - first;
}

static int run(const struct workload *w, bool dirty_rule, bool feed_rule, bool lookaround,
	       struct figures *f)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_EPT, .guest_bytes = w->ram.end - w->ram.start};
	struct vmm_simhw *hw = NULL;
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_guest_stats st;
	struct vmm_run runs[RUNS_MAX];
	uint64_t npages = hc.guest_bytes >> 12, last_refaults = 0;
	struct acc *acc = malloc(npages * sizeof(*acc));
	int rc;

	memset(f, 0, sizeof(*f));
	if (!acc)
		return -ENOMEM;
	rc = vmm_simhw_new(&hc, &hw);
	if (rc == 0) {
		vmm_guest_config_default(&cfg);
		cfg.nr_ram = vmm_simhw_ram(hw, &cfg.ram);
		cfg.nr_gens = MIN_AGE_ROUNDS + 4;
		cfg.dirty_ages_up = dirty_rule;
		cfg.lookaround_feeds_bloom = feed_rule;
		rc = vmm_guest_new(&cfg, &g);
	}
	const struct vmm_pt *pt = rc == 0 ? vmm_simhw_pt(hw) : NULL;
	for (size_t r = 0; r < w->rounds && rc == 0; r++) {
		uint64_t now = (r + 1) * ROUND_MS;
		size_t n = w->round(w, r, acc);
		struct vmm_walk_stats ws;
		bool measure = r >= WARMUP;

		for (size_t i = 0; i < n; i++)
			(void)vmm_simhw_access(hw, acc[i].gpa, acc[i].write);
		rc = vmm_age_walk(g, pt, now, &ws);
		if (rc)
			break;
		vmm_guest_get_stats(g, &st);
		if (measure) {
			f->rounds++;
			f->young += ws.young_pages;
			f->accessed += n;
			f->entries += ws.entries_read;
			f->refaults += st.refaults_total - last_refaults;
			f->resident_sum += st.resident_pages;
			if (w->hot) {
				struct ws_ctx c = {.hot = w->hot, .n = w->nhot};
				vmm_young_runs(g, 2, ws_count, &c);
				f->ws_hit += c.hits;
				f->ws_total += w->nhot;
			}
		}
		last_refaults = st.refaults_total;
		/* eviction: everything idle MIN_AGE_ROUNDS rounds or more, in batches of runs */
		for (;;) {
			struct vmm_evict_result res;
			struct vmm_evict_req req = {.max_pages = npages,
						    .min_age_ms = MIN_AGE_ROUNDS * ROUND_MS,
						    .now_ms = now,
						    .runs = runs,
						    .max_runs = RUNS_MAX,
						    .pt = lookaround ? pt : NULL};
			rc = vmm_evict(g, &req, &res);
			for (size_t i = 0; rc == 0 && i < res.nr_runs; i++)
				rc = vmm_simhw_unmap(hw, runs[i].gpa, runs[i].npages);
			if (rc || res.nr_runs < RUNS_MAX)
				break;
		}
	}
	vmm_guest_free(g);
	vmm_simhw_free(hw);
	free(acc);
	return rc;
}

static void report(const struct workload *w, bool dirty_rule, bool feed_rule, bool lookaround,
		   const struct figures *f, uint64_t ram_pages)
{
	printf("{\"name\":\"mglru_rules\",\"workload\":\"%s\",\"lookaround\":%s,"
	       "\"dirty_ages_up\":%s,\"lookaround_feeds_bloom\":%s,\"linux_rules\":%s,"
	       "\"rounds\":%zu,\"ram_pages\":%llu,\"refaults\":%llu,\"resident_share\":%.4f,"
	       "\"seen_share\":%.4f,",
	       w->name, lookaround ? "true" : "false", dirty_rule ? "true" : "false",
	       feed_rule ? "true" : "false", !dirty_rule && feed_rule ? "true" : "false", f->rounds,
	       (unsigned long long)ram_pages, (unsigned long long)f->refaults,
	       (double)f->resident_sum / (double)f->rounds / (double)ram_pages,
	       f->accessed ? (double)f->young / (double)f->accessed : 1.0);
	if (f->ws_total)
		printf("\"ws_recall\":%.4f,", (double)f->ws_hit / (double)f->ws_total);
	printf("\"entries_per_round\":%.0f}\n", (double)f->entries / (double)f->rounds);
	fflush(stdout);
}

static int all_rules(const struct workload *w)
{
	int failures = 0;

	/* with look-around (the eviction hand given the tables), then without (memtided's
	 * loop today: the balloon takes the pages, no tables reach vmm_evict), where the feed
	 * rule cannot act */
	for (int la = 1; la >= 0; la--)
		for (int d = 0; d <= 1; d++)
			for (int l = 0; l <= la; l++) {
				struct figures f;
				int rc = run(w, d, l, la, &f);
				if (rc) {
					fprintf(stderr, "rules-bench: %s: %s\n", w->name,
						strerror(-rc));
					failures++;
					continue;
				}
				report(w, d, l, la, &f, (w->ram.end - w->ram.start) >> 12);
			}
	return failures;
}

int main(int argc, char **argv)
{
	const char *dir = "sim/traces";
	static const char *const traces[] = {"gzip", "cc1", "python3", "sqlite3"};
	int failures = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--traces") && i + 1 < argc) {
			dir = argv[++i];
		} else {
			fprintf(stderr, "usage: rules-bench [--traces DIR]\n");
			return 2;
		}
	}
	for (int runs = 0; runs <= 1; runs++) {
		struct workload w = {.name = runs ? "runs" : "mixed",
				     .ram = {0, 1ULL << 30},
				     .rounds = WARMUP + 32,
				     .round = synth_round};
		w.hot = synth_hot(runs, (1ULL << 30) >> 12, &w.nhot);
		if (!w.hot)
			return 1;
		qsort(w.hot, w.nhot, sizeof(*w.hot), cmp_u64);
		fprintf(stderr, "rules-bench: %s\n", w.name);
		failures += all_rules(&w);
		free(w.hot);
	}
	for (size_t i = 0; i < sizeof(traces) / sizeof(traces[0]); i++) {
		char path[512], err[256];
		struct sim_trace t;
		snprintf(path, sizeof(path), "%s/%s.mtt", dir, traces[i]);
		if (sim_trace_read(&t, path, err, sizeof(err))) {
			fprintf(stderr, "rules-bench: %s\n", err);
			failures++;
			continue;
		}
		/* the simulated tables map one range from 0: the trace's layout, packed */
		struct workload w = {.name = traces[i],
				     .ram = {0, t.ram_pages << 12},
				     .rounds = t.nr_epochs,
				     .round = trace_round,
				     .t = &t};
		if (t.nr_ram != 1 || t.ram[0].start != 0) {
			fprintf(stderr, "rules-bench: %s: only traces with one range at 0\n", path);
			failures++;
		} else {
			fprintf(stderr, "rules-bench: %s\n", path);
			failures += all_rules(&w);
		}
		sim_trace_free(&t);
	}
	return failures ? 1 : 0;
}
