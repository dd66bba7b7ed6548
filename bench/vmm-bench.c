// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmm-bench.c - libvmm's benchmarks (`make bench`; build/bin/vmm-bench).
 *
 * Prints one JSON object per result on stdout, each with a "name"; progress goes to stderr.
 *
 *   age_dense         aging walk over a simulated guest (16 and 64 GiB, 4 KiB pages, all
 *                     mapped, 10% young); guest pages aged per second, and in the same run a
 *                     plain sequential read of as many 8-byte words: ratio_vs_seqread =
 *                     seqread time / walk time (goal >= 0.25).
 *   age_sparse_bloom  64 GiB guest, 5% of pages hot in clusters; leaf entries read per walk
 *                     without and with the bloom filter (entries_ratio, goal >= 5), the wall
 *                     time ratio, and the share of young pages the filtered walks still find.
 *   bloom_k_sweep     the same for several full_walk_every (K): the measurement behind the
 *                     default K in vmm/bloom.c.
 *   metadata          bytes of libvmm state per 4 KiB guest page (vmm_guest_get_stats()
 *                     .metadata_bytes of a 16 and a 64 GiB guest, after aging rounds over
 *                     simulated tables; goal <= 1.5).  The simulated page tables are not
 *                     counted: they stand for the hypervisor's own tables.
 *   gens_layout       memtided's 16 generations widening with age (vmm/generations.c, "The
 *                     layout") against the old rule (the oldest always folds: gens_widen
 *                     off), on the same tables and the same young pages each round (10%
 *                     at random), in steady state (a merge every round): vmm_age_walk's
 *                     time for each and the bare vmm_walk's, the ratios the medians of the
 *                     per-round ratios; bytes per page of each; the idle ages the
 *                     generations reach.  Goals: walk_ratio_widen_vs_fold <= 1.05 and the
 *                     same bytes per page.
 *
 * Every figure is measured side by side in the same process and the same run; times are
 * the fastest of several repetitions (age_dense, medians alongside; its ratio is the median
 * of back-to-back pairs) or per-position minima summed over a whole K-cycle in steady state
 * (bloom), as the machine is shared.  The
 * walk results are checked (young pages reported = pages touched), so a broken walker
 * cannot post a good number.  --quick (or VMM_BENCH_QUICK=1) shrinks the guests 16x for
 * tests; the whole default run stays under ~1 minute on this 2-core machine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm.h"

struct bench {
	unsigned shrink; /* divide guest sizes by this (1, or 16 with --quick) */
	uint64_t rng;
	int failures;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(struct bench *b)
{
	uint64_t z = (b->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The walk's consumer: what an aging hand does at the least (count what it is told). */
static void count_young(void *arg, const struct vmm_young *batch, size_t n)
{
	uint64_t *pages = arg;

	for (size_t i = 0; i < n; i++)
		*pages += batch[i].npages;
}

static int make_guest(enum vmm_pt_format_id fmt, uint64_t bytes, struct vmm_simhw **hw)
{
	struct vmm_simhw_config cfg = {.fmt = fmt, .guest_bytes = bytes, .seed = 42};
	int rc = vmm_simhw_new(&cfg, hw);

	if (rc)
		fprintf(stderr, "vmm-bench: vmm_simhw_new: %s\n", strerror(-rc));
	return rc;
}

static uint64_t ram_end(const struct vmm_simhw *hw)
{
	const struct vmm_range *r;
	size_t n = vmm_simhw_ram(hw, &r);

	return r[n - 1].end;
}

/* A plain sequential read of n 8-byte words: the floor any table walk is compared with. */
static double seqread_s(const uint64_t *buf, uint64_t n, uint64_t *sink)
{
	double t0 = now_s();
	uint64_t sum = 0;

	for (uint64_t i = 0; i < n; i++)
		sum += buf[i];
	*sink += sum;
	return now_s() - t0;
}

/* ---- age_dense -------------------------------------------------------------------------- */

/* Repetitions.  The machine is shared, so a slow rep may have measured someone else's
 * job: times are the fastest rep (medians alongside), and ratio_vs_seqread is the median
 * of the per-rep ratios of a walk and a read run back to back. */
#define DENSE_REPS 7

static void age_dense(struct bench *b, enum vmm_pt_format_id fmt, uint64_t gib)
{
	uint64_t bytes = (gib << 30) / b->shrink, npages = bytes >> VMM_PAGE_SHIFT, sink = 0;
	double walk_s[DENSE_REPS], read_s[DENSE_REPS], ratio[DENSE_REPS], t_build;
	struct vmm_walk_stats st = {0};
	struct vmm_simhw *hw;
	uint64_t *buf;

	b->rng = 1;
	t_build = now_s();
	if (make_guest(fmt, bytes, &hw)) {
		b->failures++;
		return;
	}
	t_build = now_s() - t_build;
	buf = malloc(npages * sizeof(*buf));
	if (!buf) {
		vmm_simhw_free(hw);
		b->failures++;
		return;
	}
	for (uint64_t i = 0; i < npages; i++)
		buf[i] = i; /* touch every page of the buffer before timing it */
	for (int rep = 0; rep < DENSE_REPS; rep++) {
		struct vmm_walk_opts o = {.gpa_end = ram_end(hw), .fn = count_young};
		uint64_t touched = 0, reported = 0;
		double t0;

		/* 10% young: each page touched with probability 1/10, as a guest would. */
		for (uint64_t p = 0; p < npages; p++) {
			if (rng_next(b) % 10 == 0) {
				vmm_simhw_access(hw, p << VMM_PAGE_SHIFT, false);
				touched++;
			}
		}
		o.arg = &reported;
		t0 = now_s();
		vmm_walk(vmm_simhw_pt(hw), &o, &st);
		walk_s[rep] = now_s() - t0;
		read_s[rep] = seqread_s(buf, npages, &sink);
		ratio[rep] = read_s[rep] / walk_s[rep]; /* the two ran back to back */
		if (reported != touched || st.young_pages != touched) {
			fprintf(stderr, "vmm-bench: age_dense: walk reported %llu of %llu young\n",
				(unsigned long long)reported, (unsigned long long)touched);
			b->failures++;
		}
	}
	{
		/* ratio: the median of the per-rep ratios, each of a walk and a read that ran
		 * back to back (so under the same load); absolute figures: the fastest rep */
		double wm = median(walk_s, DENSE_REPS), rm = median(read_s, DENSE_REPS);
		double w = walk_s[0], r = read_s[0]; /* sorted by median() */
		double q = median(ratio, DENSE_REPS);

		printf("{\"name\":\"age_dense\",\"format\":\"%s\",\"guest_gib\":%.3f,"
		       "\"pages\":%llu,\"young_share\":0.1,\"walk_ms\":%.3f,"
		       "\"pages_aged_per_s\":%.0f,\"ns_per_page\":%.3f,\"seqread_ms\":%.3f,"
		       "\"seqread_words_per_s\":%.0f,\"ratio_vs_seqread\":%.3f,"
		       "\"walk_ms_median\":%.3f,\"seqread_ms_median\":%.3f,"
		       "\"ratio_of_fastest\":%.3f,"
		       "\"entries_read\":%llu,\"table_bytes\":%llu,\"build_ms\":%.1f,"
		       "\"reps\":%d,\"sink\":%llu}\n",
		       vmm_pt_format_get(fmt)->name, (double)bytes / (1ULL << 30),
		       (unsigned long long)npages, w * 1e3, (double)npages / w,
		       w * 1e9 / (double)npages, r * 1e3, (double)npages / r, q, wm * 1e3, rm * 1e3,
		       r / w, (unsigned long long)st.entries_read,
		       (unsigned long long)vmm_simhw_table_bytes(hw), t_build * 1e3, DENSE_REPS,
		       (unsigned long long)(sink & 1));
		fflush(stdout);
	}
	free(buf);
	vmm_simhw_free(hw);
}

/* ---- age_sparse_bloom and bloom_k_sweep -------------------------------------------------- */

/* 5% of the guest's pages hot, in clusters of 256..2047 pages (1..8 MiB) at random places:
 * a heap, a page cache hot spot, a stack; what a real working set looks like to the MMU. */
struct hotset {
	uint64_t *gpa; /* hot pages, ascending */
	uint64_t n;
};

static int hotset_make(struct bench *b, uint64_t npages, double share, struct hotset *hs)
{
	unsigned char *hot = calloc(npages, 1);
	uint64_t want = (uint64_t)((double)npages * share), have = 0;

	if (!hot)
		return -ENOMEM;
	if (!want) {
		free(hot);
		return -EINVAL;
	}
	while (have < want) {
		uint64_t len = 256 + rng_next(b) % 1792, start = rng_next(b) % (npages - len);

		for (uint64_t p = start; p < start + len && have < want; p++) {
			have += !hot[p];
			hot[p] = 1;
		}
	}
	hs->gpa = malloc(have * sizeof(*hs->gpa));
	if (!hs->gpa) {
		free(hot);
		return -ENOMEM;
	}
	hs->n = 0;
	for (uint64_t p = 0; p < npages; p++)
		if (hot[p])
			hs->gpa[hs->n++] = p << VMM_PAGE_SHIFT;
	free(hot);
	return 0;
}

/* Sums over the measured walks, and the fastest walk seen at each position of the K-cycle
 * (position = seq % K; all unfiltered walks share position 0).  The machine is shared, so
 * a walk can be slowed by someone else's job: the time reported is the sum over one cycle
 * of the per-position minimum over the cycles measured, which is what a cycle costs when
 * nobody interferes; entry counts are exact and need no such care. */
#define MAX_K 32

struct walk_avg {
	double entries, leaf_entries, young_pages;
	double min_s[MAX_K];
	unsigned walks;
};

static double cycle_s(const struct walk_avg *a, unsigned k)
{
	double sum = 0;

	for (unsigned i = 0; i < k; i++)
		sum += a->min_s[i];
	return sum;
}

/* One aging interval: the guest touches every hot page, then one walk for seq. */
static int interval(struct vmm_simhw *hw, const struct hotset *hs, struct vmm_bloom *bloom,
		    uint64_t seq, unsigned pos, struct walk_avg *acc)
{
	struct vmm_walk_opts o = {.gpa_end = ram_end(hw), .bloom = bloom, .seq = seq};
	struct vmm_walk_stats st;
	double t0;
	int rc;

	for (uint64_t i = 0; i < hs->n; i++)
		vmm_simhw_access(hw, hs->gpa[i], false);
	t0 = now_s();
	rc = vmm_walk(vmm_simhw_pt(hw), &o, &st);
	if (acc) {
		double t = now_s() - t0;

		if (acc->walks == 0 || t < acc->min_s[pos] || acc->min_s[pos] == 0)
			acc->min_s[pos] = t;
		acc->entries += (double)st.entries_read;
		acc->leaf_entries += (double)st.leaf_entries_read;
		acc->young_pages += (double)st.young_pages;
		acc->walks++;
	}
	return rc;
}

/* Walk 2K intervals without a filter and, on the same guest, warm a filter for K
 * intervals and measure 2K more (two whole cycles of K, each with one full walk). */
static int sparse_measure(struct vmm_simhw *hw, const struct hotset *hs, unsigned k,
			  struct walk_avg *plain, struct walk_avg *filtered)
{
	struct vmm_bloom_config cfg;
	struct vmm_bloom *bloom;
	int rc = 0;

	memset(plain, 0, sizeof(*plain));
	memset(filtered, 0, sizeof(*filtered));
	if (k > MAX_K)
		return -EINVAL;
	interval(hw, hs, NULL, 0, 0, NULL); /* clear the accessed bits build and others left */
	for (unsigned i = 0; i < 2 * k && !rc; i++)
		rc = interval(hw, hs, NULL, 0, 0, plain);
	vmm_bloom_config_default(&cfg);
	cfg.full_walk_every = k;
	if (rc || (rc = vmm_bloom_new(&cfg, &bloom)))
		return rc;
	for (uint64_t seq = 1; seq <= 3ULL * k && !rc; seq++)
		rc = interval(hw, hs, bloom, seq, (unsigned)(seq % k), seq > k ? filtered : NULL);
	vmm_bloom_free(bloom);
	return rc;
}

static void age_sparse_bloom(struct bench *b, uint64_t gib)
{
	uint64_t bytes = (gib << 30) / b->shrink;
	static const unsigned sweep_k[] = {2, 4, 8, 16, 32};
	struct vmm_bloom_config def;
	struct walk_avg p, f;
	struct vmm_simhw *hw;
	struct hotset hs;

	vmm_bloom_config_default(&def);
	b->rng = 2; /* the same hot set whatever ran before */
	if (make_guest(VMM_PT_EPT, bytes, &hw)) {
		b->failures++;
		return;
	}
	if (hotset_make(b, bytes >> VMM_PAGE_SHIFT, 0.05, &hs)) {
		vmm_simhw_free(hw);
		b->failures++;
		return;
	}
	for (size_t i = 0; i < sizeof(sweep_k) / sizeof(sweep_k[0]); i++) {
		unsigned k = sweep_k[i];
		double pe, fe, pt, ft;

		if (sparse_measure(hw, &hs, k, &p, &f)) {
			b->failures++;
			break;
		}
		pe = p.leaf_entries / p.walks;
		fe = f.leaf_entries / f.walks;
		pt = p.min_s[0];         /* one unfiltered walk */
		ft = cycle_s(&f, k) / k; /* one filtered walk, averaged over a cycle */
		if (p.young_pages / p.walks != (double)hs.n) {
			fprintf(stderr, "vmm-bench: unfiltered walk found %.0f of %llu hot pages\n",
				p.young_pages / p.walks, (unsigned long long)hs.n);
			b->failures++;
		}
		printf("{\"name\":\"%s\",\"guest_gib\":%.3f,\"hot_share\":0.05,\"hot_pages\":%llu,"
		       "\"full_walk_every\":%u,\"bloom_bits_shift\":%u,\"nr_hashes\":%u,"
		       "\"admit_young_x\":%u,\"leaf_entries_per_walk_plain\":%.0f,"
		       "\"leaf_entries_per_walk_bloom\":%.0f,\"entries_ratio\":%.3f,"
		       "\"walk_ms_plain\":%.3f,\"walk_ms_bloom\":%.3f,\"wall_ratio\":%.3f,"
		       "\"young_found_ratio\":%.4f,\"walks_measured\":%u}\n",
		       k == def.full_walk_every ? "age_sparse_bloom" : "bloom_k_sweep",
		       (double)bytes / (1ULL << 30), (unsigned long long)hs.n, k, def.bits_shift,
		       def.nr_hashes, def.admit_young_x, pe, fe, pe / fe, pt * 1e3, ft * 1e3,
		       pt / ft, (f.young_pages / f.walks) / (p.young_pages / p.walks), f.walks);
		fflush(stdout);
	}
	free(hs.gpa);
	vmm_simhw_free(hw);
}

/* ---- metadata ------------------------------------------------------------------------------- */

#define METADATA_ROUNDS 4

static void metadata(struct bench *b, uint64_t gib)
{
	uint64_t bytes = (gib << 30) / b->shrink, npages = bytes >> VMM_PAGE_SHIFT;
	struct vmm_simhw_config hcfg = {.fmt = VMM_PT_EPT,
					.guest_bytes = bytes,
					.nr_holes = 1, /* the PCI hole below 4 GiB, as on x86 */
					.hole_bytes = bytes / 16,
					.seed = 42};
	struct vmm_guest_config cfg;
	struct vmm_guest_stats st;
	struct vmm_simhw *hw;
	struct vmm_guest *g;
	int rc;

	hcfg.hole_bytes &= ~(VMM_SIZE_2M - 1);
	b->rng = 3;
	if ((rc = vmm_simhw_new(&hcfg, &hw))) {
		fprintf(stderr, "vmm-bench: metadata: vmm_simhw_new: %s\n", strerror(-rc));
		b->failures++;
		return;
	}
	vmm_guest_config_default(&cfg);
	cfg.nr_ram = vmm_simhw_ram(hw, &cfg.ram);
	if ((rc = vmm_guest_new(&cfg, &g))) {
		fprintf(stderr, "vmm-bench: metadata: vmm_guest_new: %s\n", strerror(-rc));
		vmm_simhw_free(hw);
		b->failures++;
		return;
	}
	/* a few aging rounds, 10% of pages young each, so the state is a used guest's */
	for (int round = 1; round <= METADATA_ROUNDS && !rc; round++) {
		for (size_t r = 0; r < cfg.nr_ram; r++)
			for (uint64_t gpa = cfg.ram[r].start; gpa < cfg.ram[r].end;
			     gpa += VMM_PAGE_SIZE)
				if (rng_next(b) % 10 == 0)
					vmm_simhw_access(hw, gpa, false);
		rc = vmm_age_walk(g, vmm_simhw_pt(hw), (uint64_t)round * 5000, NULL);
	}
	vmm_guest_get_stats(g, &st);
	if (rc || st.ram_pages != npages) {
		fprintf(stderr, "vmm-bench: metadata: aging failed (%d) or layout mismatch\n", rc);
		b->failures++;
	} else {
		printf("{\"name\":\"metadata\",\"guest_gib\":%.3f,\"ram_pages\":%llu,"
		       "\"nr_gens\":%u,\"metadata_bytes\":%llu,\"bytes_per_page\":%.4f,"
		       "\"goal_bytes_per_page\":1.5,\"aging_rounds\":%d}\n",
		       (double)bytes / (1ULL << 30), (unsigned long long)st.ram_pages, st.nr_gens,
		       (unsigned long long)st.metadata_bytes,
		       (double)st.metadata_bytes / (double)st.ram_pages, METADATA_ROUNDS);
		fflush(stdout);
	}
	vmm_guest_free(g);
	vmm_simhw_free(hw);
}

/* ---- gens_layout ------------------------------------------------------------------------- */

#define LAYOUT_ROUNDS 48
#define LAYOUT_WARM   20 /* rounds before measuring: 16 generations full, merging each round */

static int layout_guest(struct vmm_simhw *hw, bool widen, struct vmm_guest **g)
{
	struct vmm_guest_config cfg;

	vmm_guest_config_default(&cfg);
	cfg.nr_ram = vmm_simhw_ram(hw, &cfg.ram);
	cfg.nr_gens = VMM_MAX_NR_GENS; /* memtided's */
	cfg.reuse_raises_tier = true;  /* memtided's for page-level sources */
	cfg.gens_widen = widen;
	/* Every walk reads every table and moves every young page: the whole cost of a round
	 * (random young pages are too sparse for the filter, which would skip 7 walks of 8). */
	cfg.bloom.full_walk_every = 1;
	return vmm_guest_new(&cfg, g);
}

static void touch_all(struct vmm_simhw *hw, const uint64_t *gpa, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		vmm_simhw_access(hw, gpa[i], false);
}

static void gens_layout(struct bench *b, uint64_t gib)
{
	uint64_t bytes = (gib << 30) / b->shrink, npages = bytes >> VMM_PAGE_SHIFT;
	double t_wide[LAYOUT_ROUNDS], t_fold[LAYOUT_ROUNDS], t_bare[LAYOUT_ROUNDS];
	double r_wf[LAYOUT_ROUNDS], r_wb[LAYOUT_ROUNDS];
	struct vmm_guest *wide = NULL, *fold = NULL;
	struct vmm_guest_stats sw, sf;
	struct vmm_simhw *hw;
	uint64_t *young = malloc((npages / 8 + 1024) * sizeof(*young)), ny = 0, sink = 0;
	unsigned m = 0;

	b->rng = 4;
	if (!young || make_guest(VMM_PT_EPT, bytes, &hw)) {
		free(young);
		b->failures++;
		return;
	}
	if (layout_guest(hw, true, &wide) || layout_guest(hw, false, &fold)) {
		fprintf(stderr, "vmm-bench: gens_layout: vmm_guest_new failed\n");
		b->failures++;
		goto out;
	}
	for (unsigned r = 1; r <= LAYOUT_ROUNDS; r++) {
		struct vmm_walk_opts o = {.gpa_end = ram_end(hw), .fn = count_young, .arg = &sink};
		struct vmm_guest *first = r & 1 ? wide : fold, *second = r & 1 ? fold : wide;
		double t0, t1, t2, t3;
		ny = 0;
		for (uint64_t p = 0; p < npages && ny < npages / 8 + 1024; p++)
			if (rng_next(b) % 10 == 0)
				young[ny++] = p << VMM_PAGE_SHIFT;
		/* The same young pages for each walker, in turn (each walk clears the bits). */
		touch_all(hw, young, ny);
		t0 = now_s();
		int rc = vmm_age_walk(first, vmm_simhw_pt(hw), r * 5000ULL, NULL);
		t1 = now_s();
		touch_all(hw, young, ny);
		t2 = now_s();
		rc |= vmm_age_walk(second, vmm_simhw_pt(hw), r * 5000ULL, NULL);
		t3 = now_s();
		touch_all(hw, young, ny);
		double tb = now_s();
		rc |= vmm_walk(vmm_simhw_pt(hw), &o, NULL);
		tb = now_s() - tb;
		if (rc) {
			b->failures++;
			break;
		}
		if (r <= LAYOUT_WARM)
			continue;
		t_wide[m] = first == wide ? t1 - t0 : t3 - t2;
		t_fold[m] = first == wide ? t3 - t2 : t1 - t0;
		t_bare[m] = tb;
		r_wf[m] = t_wide[m] / t_fold[m];
		r_wb[m] = t_wide[m] / t_bare[m];
		m++;
	}
	vmm_guest_get_stats(wide, &sw);
	vmm_guest_get_stats(fold, &sf);
	if (m && !vmm_check_invariants(wide) && !vmm_check_invariants(fold)) {
		double q_wf = median(r_wf, m), q_wb = median(r_wb, m);
		double mw = median(t_wide, m), mf = median(t_fold, m), mb = median(t_bare, m);
		uint64_t now = sw.gen[sw.nr_gens - 1].birth_ms;
		printf("{\"name\":\"gens_layout\",\"guest_gib\":%.3f,\"pages\":%llu,"
		       "\"nr_gens\":%u,\"round_ms\":5000,\"rounds\":%d,\"rounds_measured\":%u,"
		       "\"young_share\":0.1,\"age_walk_ms_widen\":%.3f,\"age_walk_ms_fold\":%.3f,"
		       "\"walk_ms_bare\":%.3f,\"age_walk_ms_widen_median\":%.3f,"
		       "\"age_walk_ms_fold_median\":%.3f,\"walk_ms_bare_median\":%.3f,"
		       "\"walk_ratio_widen_vs_fold\":%.3f,\"goal_walk_ratio\":1.05,"
		       "\"walk_ratio_widen_vs_bare\":%.3f,\"bytes_per_page_widen\":%.4f,"
		       "\"bytes_per_page_fold\":%.4f,\"oldest_age_s_widen\":%.0f,"
		       "\"oldest_age_s_fold\":%.0f,\"sink\":%llu}\n",
		       (double)bytes / (1ULL << 30), (unsigned long long)npages, sw.nr_gens,
		       LAYOUT_ROUNDS, m, t_wide[0] * 1e3, t_fold[0] * 1e3, t_bare[0] * 1e3,
		       mw * 1e3, mf * 1e3, mb * 1e3, q_wf, q_wb,
		       (double)sw.metadata_bytes / (double)sw.ram_pages,
		       (double)sf.metadata_bytes / (double)sf.ram_pages,
		       (double)(now - sw.gen[0].birth_ms) / 1e3,
		       (double)(now - sf.gen[0].birth_ms) / 1e3, (unsigned long long)(sink & 1));
		fflush(stdout);
	} else {
		fprintf(stderr,
			"vmm-bench: gens_layout: no rounds measured or invariants broken\n");
		b->failures++;
	}
out:
	vmm_guest_free(wide);
	vmm_guest_free(fold);
	vmm_simhw_free(hw);
	free(young);
}

/* Should the benchmark `name` run?  No names on the command line: all of them. */
static bool selected(int argc, char **argv, const char *name)
{
	bool any = false;

	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		any = true;
		if (!strcmp(argv[i], name))
			return true;
	}
	return !any;
}

/* Usage: vmm-bench [--quick] [age_dense] [age_sparse_bloom] [metadata] [gens_layout] */
int main(int argc, char **argv)
{
	struct bench b = {.shrink = 1, .rng = 1};
	const char *q = getenv("VMM_BENCH_QUICK");

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			b.shrink = 16;
		} else if (argv[i][0] == '-' || (strcmp(argv[i], "age_dense") != 0 &&
						 strcmp(argv[i], "age_sparse_bloom") != 0 &&
						 strcmp(argv[i], "metadata") != 0 &&
						 strcmp(argv[i], "gens_layout") != 0)) {
			fprintf(stderr, "usage: vmm-bench [--quick] [age_dense] [age_sparse_bloom] "
					"[metadata] [gens_layout]\n");
			return 2;
		}
	}
	if (q && *q && strcmp(q, "0") != 0)
		b.shrink = 16;
	if (selected(argc, argv, "age_dense")) {
		fprintf(stderr, "vmm-bench: age_dense\n");
		age_dense(&b, VMM_PT_EPT, 16);
		age_dense(&b, VMM_PT_S2, 16);
		age_dense(&b, VMM_PT_EPT, 64);
	}
	if (selected(argc, argv, "age_sparse_bloom")) {
		fprintf(stderr, "vmm-bench: age_sparse_bloom\n");
		age_sparse_bloom(&b, 64);
	}
	if (selected(argc, argv, "metadata")) {
		fprintf(stderr, "vmm-bench: metadata\n");
		metadata(&b, 16);
		metadata(&b, 64);
	}
	if (selected(argc, argv, "gens_layout")) {
		fprintf(stderr, "vmm-bench: gens_layout\n");
		gens_layout(&b, 16);
		gens_layout(&b, 64);
	}
	if (b.failures)
		fprintf(stderr, "vmm-bench: %d failures\n", b.failures);
	return b.failures ? 1 : 0;
}
