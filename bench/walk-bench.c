// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * walk-bench.c - which walker options an emulated EPT should age with (`make bench`;
 * build/bin/walk-bench): the bloom filter alone, the table's non-leaf accessed bits alone,
 * both, or neither, measured on the same rounds.
 *
 * Prints one JSON object per workload on stdout ("name": "walk_variants"); progress on
 * stderr.  Four copies of the emulated EPT (sim/ept_replay.h: the plugin's own layout and
 * marking rule) receive the same accesses each round; each is walked as vmm_age_walk
 * walks (test-and-clear of A and D) with its own options and its own bloom filter:
 *
 *   plain    every present leaf table read
 *   bloom    libvmm's bloom filter (K = 8: every 8th walk full)
 *   nonleaf  subtrees whose upper A is clear skipped (exact on the emulated EPT)
 *   both     the two together (a table is read when the filter holds it and its A is set)
 *
 * Figures per variant: leaf entries and all entries read per walk, and walk time (the
 * per-position minimum over the cycles measured, averaged over a K-cycle: the machine is
 * shared, vmm-bench does the same), and the young pages found as a share of the plain
 * walk's in the same rounds (the bloom filter finds pages of tables it skipped only at the
 * next full walk; the non-leaf bits miss nothing).
 *
 * Workloads:
 *   default   simulated guests of 4, 16 and 64 GiB whose RAM was all touched once, then
 *             every round the same hot set: "clustered" (5% of pages in 1-8 MiB clusters),
 *             "scattered" (5% of pages chosen one by one, at random) and "sparse" (one page
 *             per 2 MiB), and "mixed" (clustered plus one page in every other 2 MiB: the
 *             case real programs show, where the filter holds the clusters' tables and skips
 *             the lone pages' on 7 rounds of 8).  --quick shrinks the guests 16x.
 *   --trace FILE [--label L]
 *             the epochs of a trace, one per round: a trace `memtide-trace ept` recorded
 *             from a live guest replays that guest's table (bench/ept_live.sh).
 * The plain walk's young pages are checked against the accesses marked (a broken replay
 * cannot post a figure).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ept_replay.h"
#include "sim.h"
#include "vmm.h"

#define K    8 /* the bloom filter's full_walk_every: libvmm's default */
#define NVAR 4
#define GiB  (1ULL << 30)

static const struct {
	const char *name;
	bool bloom, nonleaf;
} variants[NVAR] = {{"plain", false, false},
		    {"bloom", true, false},
		    {"nonleaf", false, true},
		    {"both", true, true}};

struct variant {
	struct sim_ept *t;
	struct vmm_bloom *b;
	double entries, leaf_entries, young;
	double min_s[K];
	unsigned walks;
};

struct bench {
	struct variant v[NVAR];
	const struct vmm_range *ram;
	size_t nr_ram;
	uint64_t rng;
	int failures;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int bench_init(struct bench *b, const struct vmm_range *ram, size_t nr_ram)
{
	uint64_t end = ram[nr_ram - 1].end, span = (end + GiB - 1) & ~(GiB - 1);
	struct vmm_bloom_config cfg;
	int rc = 0;

	memset(b->v, 0, sizeof(b->v));
	b->ram = ram;
	b->nr_ram = nr_ram;
	vmm_bloom_config_default(&cfg);
	cfg.full_walk_every = K;
	for (int i = 0; i < NVAR && !rc; i++) {
		rc = sim_ept_new(span, &b->v[i].t);
		if (!rc && variants[i].bloom)
			rc = vmm_bloom_new(&cfg, &b->v[i].b);
	}
	return rc;
}

static void bench_fini(struct bench *b)
{
	for (int i = 0; i < NVAR; i++) {
		sim_ept_free(b->v[i].t);
		vmm_bloom_free(b->v[i].b);
	}
}

/* One round for every variant: the accesses (page numbers; bit 63 marks a write), then
 * one walk for seq.  measure: add to the figures, at K-cycle position seq % K. */
#define WRITE_BIT (1ULL << 63)

static int round_all(struct bench *b, const uint64_t *acc, uint64_t n, uint64_t seq, bool measure)
{
	double young_plain = 0;

	for (int i = 0; i < NVAR; i++) {
		struct variant *v = &b->v[i];
		struct vmm_walk_stats sum = {0};
		double t0, t;

		for (uint64_t j = 0; j < n; j++)
			sim_ept_mark(v->t, (acc[j] & ~WRITE_BIT) << 12, (acc[j] & WRITE_BIT) != 0);
		t0 = now_s();
		for (size_t r = 0; r < b->nr_ram; r++) {
			struct vmm_walk_opts o = {.gpa_start = b->ram[r].start,
						  .gpa_end = b->ram[r].end,
						  .bloom = v->b,
						  .seq = seq,
						  .clear_dirty = true,
						  .use_nonleaf_accessed = variants[i].nonleaf};
			struct vmm_walk_stats s;
			if (vmm_walk(sim_ept_pt(v->t), &o, &s) < 0)
				return -EFAULT;
			sum.entries_read += s.entries_read;
			sum.leaf_entries_read += s.leaf_entries_read;
			sum.young_pages += s.young_pages;
		}
		t = now_s() - t0;
		if (i == 0) {
			young_plain = (double)sum.young_pages;
			if (sum.young_pages != n) {
				fprintf(stderr,
					"walk-bench: the plain walk found %llu young pages of %llu "
					"marked\n",
					(unsigned long long)sum.young_pages, (unsigned long long)n);
				b->failures++;
			}
		}
		(void)young_plain;
		if (!measure)
			continue;
		unsigned pos = (unsigned)(seq % K);
		if (v->min_s[pos] == 0 || t < v->min_s[pos])
			v->min_s[pos] = t;
		v->entries += (double)sum.entries_read;
		v->leaf_entries += (double)sum.leaf_entries_read;
		v->young += (double)sum.young_pages;
		v->walks++;
	}
	return 0;
}

static void report(struct bench *b, const char *source, const char *shape, uint64_t ram_bytes,
		   uint64_t hot_pages)
{
	const struct variant *p = &b->v[0];
	double cyc[NVAR];

	for (int i = 0; i < NVAR; i++) {
		cyc[i] = 0;
		for (int k = 0; k < K; k++)
			cyc[i] += b->v[i].min_s[k];
		cyc[i] /= K;
	}
	printf("{\"name\":\"walk_variants\",\"source\":\"%s\",\"shape\":\"%s\",\"ram_gib\":%.3f,"
	       "\"leaf_tables\":%llu,\"hot_pages\":%llu,\"walks_measured\":%u,"
	       "\"full_walk_every\":%d",
	       source, shape, (double)ram_bytes / GiB,
	       (unsigned long long)sim_ept_leaf_tables(p->t), (unsigned long long)hot_pages,
	       p->walks, K);
	for (int i = 0; i < NVAR; i++) {
		const struct variant *v = &b->v[i];
		printf(",\"%s_leaf_entries\":%.0f,\"%s_entries\":%.0f,\"%s_walk_ms\":%.4f",
		       variants[i].name, v->leaf_entries / v->walks, variants[i].name,
		       v->entries / v->walks, variants[i].name, cyc[i] * 1e3);
		if (i)
			printf(",\"%s_entries_ratio\":%.3f,\"%s_wall_ratio\":%.3f,\"%s_young_"
			       "found\":%.4f",
			       variants[i].name, p->entries / v->entries, variants[i].name,
			       cyc[0] / cyc[i], variants[i].name, v->young / p->young);
	}
	printf("}\n");
	fflush(stdout);
}

/* ---- simulated guests ----------------------------------------------------------------- */

enum shape { CLUSTERED, SCATTERED, SPARSE, MIXED };
static const char *const shape_name[] = {"clustered", "scattered", "sparse", "mixed"};

/* The hot pages of a shape over npages of RAM, ascending; *n set.  NULL on ENOMEM. */
static uint64_t *hot_set(enum shape s, uint64_t npages, uint64_t *rng, uint64_t *n)
{
	unsigned char *hot = calloc(npages, 1);
	uint64_t want = npages / 20, have = 0, *out;

	if (!hot)
		return NULL;
	if (s == SPARSE || s == MIXED) {
		for (uint64_t t = 0; t < npages / 512; t++) {
			hot[t * 512 + rng_next(rng) % 512] = 1;
			have++;
		}
	}
	if (s == MIXED)
		want += have;
	while (s != SPARSE && have < want) {
		uint64_t len = s != SCATTERED ? 256 + rng_next(rng) % 1792 : 1;
		uint64_t start = rng_next(rng) % (npages - len);
		for (uint64_t p = start; p < start + len && have < want; p++) {
			have += !hot[p];
			hot[p] = 1;
		}
	}
	out = malloc((have ? have : 1) * sizeof(*out));
	*n = 0;
	for (uint64_t p = 0; out && p < npages; p++)
		if (hot[p])
			out[(*n)++] = p;
	free(hot);
	return out;
}

static void sim_guest(uint64_t bytes, enum shape s, uint64_t seed, int *failures)
{
	struct vmm_range ram = {0, bytes};
	uint64_t npages = bytes >> 12, nhot, seq = 1, rng = seed;
	uint64_t *all = malloc(npages * sizeof(*all)), *hot = hot_set(s, npages, &rng, &nhot);
	struct bench b = {0};

	if (!all || !hot || bench_init(&b, &ram, 1)) {
		fprintf(stderr, "walk-bench: out of memory\n");
		(*failures)++;
		goto out;
	}
	for (uint64_t p = 0; p < npages; p++)
		all[p] = p;
	/* every page touched once (a guest up for a while), then K rounds to warm the filter,
	 * then two whole K-cycles measured; one page in 8 of the hot set written each round */
	for (uint64_t i = 0; i < nhot; i += 8)
		hot[i] |= WRITE_BIT;
	if (round_all(&b, all, npages, seq++, false) == 0)
		for (int r = 0; r < 3 * K; r++)
			if (round_all(&b, hot, nhot, seq++, r >= K) < 0)
				break;
	report(&b, "sim", shape_name[s], bytes, nhot);
	*failures += b.failures;
out:
	bench_fini(&b);
	free(all);
	free(hot);
}

/* ---- traces ----------------------------------------------------------------------------- */

static int from_trace(const char *path, const char *label)
{
	struct sim_trace t;
	struct bench b = {0};
	char err[256];
	uint64_t *acc = NULL, hot_sum = 0;
	int rc;

	if (sim_trace_read(&t, path, err, sizeof(err))) {
		fprintf(stderr, "walk-bench: %s\n", err);
		return 1;
	}
	if (t.nr_epochs < 2 * K) {
		fprintf(stderr,
			"walk-bench: %s has %zu epochs, %d needed (a warm-up cycle and a "
			"measured one)\n",
			path, t.nr_epochs, 2 * K);
		sim_trace_free(&t);
		return 1;
	}
	rc = bench_init(&b, t.ram, t.nr_ram);
	acc = malloc((t.ram_pages ? t.ram_pages : 1) * sizeof(*acc));
	if (rc || !acc) {
		fprintf(stderr, "walk-bench: out of memory\n");
		rc = 1;
		goto out;
	}
	/* whole K-cycles after the first one, which warms the filter */
	size_t measured_from = K, last = K + (t.nr_epochs - K) / K * K;
	for (size_t e = 0; e < last && rc == 0; e++) {
		const struct sim_epoch *ep = &t.epochs[e];
		for (uint32_t i = 0; i < ep->nr_acc; i++)
			acc[i] = (sim_page_gpa(&t, SIM_ACC_PAGE(ep->acc[i])) >> 12) |
				 (ep->acc[i] & SIM_ACC_WRITE ? WRITE_BIT : 0);
		if (e >= measured_from)
			hot_sum += ep->nr_acc;
		rc = round_all(&b, acc, ep->nr_acc, e + 1, e >= measured_from);
	}
	if (rc == 0)
		report(&b, t.source, label ? label : path, t.ram_pages << 12,
		       hot_sum / (last - measured_from));
	rc = rc || b.failures;
out:
	free(acc);
	bench_fini(&b);
	sim_trace_free(&t);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned shrink = 1;
	int failures = 0;
	const char *q = getenv("VMM_BENCH_QUICK"), *label = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			shrink = 16;
		} else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
			label = argv[++i];
		} else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
			failures += from_trace(argv[++i], label);
			label = NULL;
		} else {
			fprintf(stderr,
				"usage: walk-bench [--quick] | [--label L] --trace FILE ...\n");
			return 2;
		}
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--trace"))
			return failures ? 1 : 0; /* traces given: only those */
	if (q && *q && strcmp(q, "0") != 0)
		shrink = 16;
	static const uint64_t gib[] = {4, 16, 64};
	for (size_t g = 0; g < sizeof(gib) / sizeof(gib[0]); g++)
		for (int s = CLUSTERED; s <= MIXED; s++) {
			fprintf(stderr, "walk-bench: %llu GiB, %s\n", (unsigned long long)gib[g],
				shape_name[s]);
			sim_guest((gib[g] << 30) / shrink, (enum shape)s, 7 + g, &failures);
		}
	if (failures)
		fprintf(stderr, "walk-bench: %d failures\n", failures);
	return failures ? 1 : 0;
}
