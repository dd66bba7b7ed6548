// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept-sightings.c - what a sampling source sees of pages used at known periods
 * (bench/ept_sampling.sh runs it; docs/design.md, Part 0, "What a sampled source can tell").
 *
 *   ept-sightings TRACE SETS [LABEL]
 *
 * TRACE is a trace `memtide-trace ept --epoch-ms 5000 --window W` recorded from a live TCG
 * guest: one epoch per aging round, each epoch's pages those the plugin saw in that round's
 * window, as memtided's ept source sees them.  SETS lists the guest-physical runs of each
 * set of pages the guest touches at a known period ("NAME GPA_HEX PAGES" per line, from
 * memload periodic's "WL-PAGES" lines).  For each set, one JSON line "ept_sampling": the
 * share of the set seen per round (the window's catch), the share seen in two rounds in a
 * row (what vmm_sample_update estimates the catch by), and the idle ages the generations
 * would read between sightings (gaps in rounds x the epoch): median, 90th and 99th
 * percentiles, the longest, and the share of gaps past 70 s (what the generations told
 * apart before they widened) and past 5 min.  The first and last epochs are left out (the
 * recording starts and stops mid-round).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_SETS 8

struct set {
	char name[32];
	uint64_t pages;
	uint32_t *idx; /* trace page indices of the set */
	uint64_t nidx, cap;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static double pct(const uint64_t *v, uint64_t n, double q)
{
	return n ? (double)v[(uint64_t)(q * (double)(n - 1))] : 0.0;
}

static int add_page(struct set *s, uint32_t idx)
{
	if (s->nidx == s->cap) {
		uint64_t c = s->cap ? s->cap * 2 : 4096;
		uint32_t *v = realloc(s->idx, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->idx = v;
		s->cap = c;
	}
	s->idx[s->nidx++] = idx;
	return 0;
}

/* "NAME GPA_HEX PAGES" lines into sets (each set's pages as trace indices). */
static int read_sets(const char *path, const struct sim_trace *t, struct set *sets, int *nsets)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int rc = 0;

	if (!f)
		return -errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		char *save = NULL, *name = strtok_r(line, " \t\n", &save);
		char *gpa_s = strtok_r(NULL, " \t\n", &save), *n_s = strtok_r(NULL, " \t\n", &save);
		char *end1 = NULL, *end2 = NULL;
		if (!name || !gpa_s || !n_s)
			continue;
		uint64_t gpa = strtoull(gpa_s, &end1, 16), npages = strtoull(n_s, &end2, 10);
		if (*end1 || *end2)
			continue; /* not a run line */
		int i = 0;
		while (i < *nsets && strcmp(sets[i].name, name) != 0)
			i++;
		if (i == *nsets) {
			if (*nsets == MAX_SETS)
				break;
			snprintf(sets[i].name, sizeof(sets[i].name), "%s",
				 name); /* zeroed in main */
			(*nsets)++;
		}
		for (uint64_t p = 0; p < npages && !rc; p++) {
			int64_t idx = sim_gpa_page(t, gpa + p * SIM_PAGE_SIZE);
			if (idx >= 0)
				rc = add_page(&sets[i], (uint32_t)idx);
		}
	}
	fclose(f);
	return rc;
}

static void one_set(const struct sim_trace *t, const struct set *s, const char *label)
{
	uint64_t rounds = t->nr_epochs - 2, epoch_ms = t->epochs[1].t_ms - t->epochs[0].t_ms;
	int64_t *last = malloc(t->ram_pages * sizeof(*last));
	uint8_t *in = calloc(t->ram_pages, 1), *prev = calloc(t->ram_pages, 1);
	uint64_t *gaps = malloc(s->nidx * rounds * sizeof(*gaps)), ngaps = 0;
	uint64_t seen = 0, prev_seen = 0, again = 0, ever = 0;

	if (!last || !in || !prev || !gaps)
		goto out;
	for (uint64_t i = 0; i < t->ram_pages; i++)
		last[i] = -1;
	for (uint64_t i = 0; i < s->nidx; i++)
		in[s->idx[i]] = 1;
	for (uint64_t e = 1; e + 1 < t->nr_epochs; e++) {
		const struct sim_epoch *ep = &t->epochs[e];
		uint8_t *now = calloc(t->ram_pages, 1);
		if (!now)
			goto out;
		for (uint32_t a = 0; a < ep->nr_acc; a++) {
			uint32_t p = SIM_ACC_PAGE(ep->acc[a]);
			if (!in[p])
				continue;
			now[p] = 1;
			seen++;
			again += prev[p];
			if (last[p] >= 0)
				gaps[ngaps++] = (e - (uint64_t)last[p]) * epoch_ms;
			else
				ever++;
			last[p] = (int64_t)e;
		}
		for (uint64_t i = 0; i < s->nidx; i++)
			prev_seen += e + 2 < t->nr_epochs && now[s->idx[i]];
		free(prev);
		prev = now;
	}
	qsort(gaps, ngaps, sizeof(*gaps), cmp_u64);
	uint64_t past70 = 0, past300 = 0;
	for (uint64_t i = 0; i < ngaps; i++) {
		past70 += gaps[i] > 70000;
		past300 += gaps[i] > 300000;
	}
	printf("{\"name\":\"ept_sampling\",\"label\":\"%s\",\"set\":\"%s\",\"pages\":%llu,"
	       "\"rounds\":%llu,\"round_ms\":%llu,\"seen_per_round\":%.4f,"
	       "\"seen_again_share\":%.4f,\"ever_seen\":%.4f,\"gap_p50_s\":%.0f,"
	       "\"gap_p90_s\":%.0f,\"gap_p99_s\":%.0f,\"gap_max_s\":%.0f,\"gaps\":%llu,"
	       "\"gaps_past_70s\":%.4f,\"gaps_past_300s\":%.4f}\n",
	       label, s->name, (unsigned long long)s->nidx, (unsigned long long)rounds,
	       (unsigned long long)epoch_ms, (double)seen / (double)(s->nidx * rounds),
	       prev_seen ? (double)again / (double)prev_seen : 0.0, (double)ever / (double)s->nidx,
	       pct(gaps, ngaps, 0.5) / 1000, pct(gaps, ngaps, 0.9) / 1000,
	       pct(gaps, ngaps, 0.99) / 1000, ngaps ? (double)gaps[ngaps - 1] / 1000 : 0.0,
	       (unsigned long long)ngaps, ngaps ? (double)past70 / (double)ngaps : 0.0,
	       ngaps ? (double)past300 / (double)ngaps : 0.0);
out:
	free(last);
	free(in);
	free(prev);
	free(gaps);
}

int main(int argc, char **argv)
{
	struct sim_trace t;
	struct set sets[MAX_SETS];
	int nsets = 0;

	memset(sets, 0, sizeof(sets));
	char err[256];

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: ept-sightings TRACE SETS [LABEL]\n");
		return 2;
	}
	if (sim_trace_read(&t, argv[1], err, sizeof(err))) {
		fprintf(stderr, "ept-sightings: %s\n", err);
		return 1;
	}
	if (t.nr_epochs < 4) {
		fprintf(stderr, "ept-sightings: %s: fewer than 4 rounds\n", argv[1]);
		return 1;
	}
	int rc = read_sets(argv[2], &t, sets, &nsets);
	if (rc)
		fprintf(stderr, "ept-sightings: %s: %s\n", argv[2], strerror(-rc));
	for (int i = 0; i < nsets; i++) {
		if (!rc)
			one_set(&t, &sets[i], argc == 4 ? argv[3] : "");
		free(sets[i].idx);
	}
	sim_trace_free(&t);
	return rc ? 1 : 0;
}
