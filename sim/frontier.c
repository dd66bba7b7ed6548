// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * frontier.c - from sweeps to the operator's question: how much memory does a policy save
 * within a refault budget?  Each policy is run at several settings of its knob; the answer
 * for a budget is its best setting whose measured refault rate stays within it.  Written as
 * CSV (one row per run) and plotted with gnuplot: saved memory against refault rate, one
 * curve per policy, the budgets as vertical lines.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

int sim_best_under_budget(const struct sim_point *pts, size_t n, double budget, double *saved)
{
	int best = -1;

	*saved = 0;
	for (size_t i = 0; i < n; i++) {
		if (pts[i].refault_rate > budget)
			continue;
		if (best < 0 || pts[i].saved > *saved) {
			best = (int)i;
			*saved = pts[i].saved;
		}
	}
	return best;
}

size_t sim_default_knob_values(const struct sim_policy *pol, double *vals, size_t max)
{
	/* Ranges chosen to span "barely reclaims" to "reclaims far past the budgets". */
	static const double mom[] = {0.40, 0.30, 0.20, 0.10, 0.05, 0.02};
	static const double damon[] = {600000, 450000, 300000, 240000, 120000,
				       60000,  30000,  15000,  8000,   2000};
	static const double lru2[] = {1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05};
	/* memtide: the floor of its cold age threshold (the controller moves it above). */
	static const double mt[] = {600000, 450000, 300000, 240000, 120000,
				    60000,  30000,  20000,  10000,  5000};
	/* idle: the one threshold memtide must beat, on a fine grid (it is tuned in hindsight). */
	static const double idle[] = {900000, 600000, 450000, 300000, 240000, 180000, 120000, 90000,
				      60000,  45000,  30000,  20000,  15000,  10000,  5000,   2000};
	static const double oracle[] = {0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05};
	const double *v = NULL;
	size_t n = 0;

	if (!strcmp(pol->name, "mom")) {
		v = mom;
		n = sizeof(mom) / sizeof(*mom);
	} else if (!strcmp(pol->name, "damon")) {
		v = damon;
		n = sizeof(damon) / sizeof(*damon);
	} else if (!strcmp(pol->name, "lru2")) {
		v = lru2;
		n = sizeof(lru2) / sizeof(*lru2);
	} else if (!strcmp(pol->name, "idle")) {
		v = idle;
		n = sizeof(idle) / sizeof(*idle);
	} else if (!strcmp(pol->name, "memtide")) {
		v = mt;
		n = sizeof(mt) / sizeof(*mt);
	} else if (!strcmp(pol->name, "oracle")) {
		v = oracle;
		n = sizeof(oracle) / sizeof(*oracle);
	} else {
		vals[0] = 0; /* no knob: one run */
		return max ? 1 : 0;
	}
	if (n > max)
		n = max;
	memcpy(vals, v, n * sizeof(*v));
	return n;
}

int sim_points_csv(FILE *out, bool header, const char *policy, const char *knob,
		   const struct sim_point *pts, size_t n)
{
	if (header)
		fprintf(out, "policy,knob,value,saved,refault_rate_per_min,mean_resident_pages,"
			     "peak_resident_pages,refaults,fills,policy_cpu_s\n");
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s,%s,%g,%.6f,%.8f,%.1f,%llu,%llu,%llu,%.4f\n", policy,
			knob[0] ? knob : "-", pts[i].knob, pts[i].saved, pts[i].refault_rate,
			pts[i].r.mean_resident_pages,
			(unsigned long long)pts[i].r.peak_resident_pages,
			(unsigned long long)pts[i].r.refaults, (unsigned long long)pts[i].r.fills,
			pts[i].r.policy_cpu_s);
	return ferror(out) ? -EIO : 0;
}

/* gnuplot script: one curve per policy (the CSV's first column), points sorted by rate.
 * The policy names come from our own table, never from input, so quoting is safe. */
static void plot_script(FILE *g, const char *csv, const char *base, const char *title, double lo,
			double hi, const char *term, const char *ext)
{
	fprintf(g, "set terminal %s size 900,600\n", term);
	fprintf(g, "set output '%s.%s'\n", base, ext);
	fprintf(g, "set datafile separator ','\n");
	fprintf(g, "set title '%s' noenhanced\n", title);
	fprintf(g, "set xlabel 'refaults per minute, share of resident pages'\n");
	fprintf(g, "set ylabel 'memory saved vs no management (%%)'\n");
	fprintf(g, "set logscale x\nset xrange [5e-6:1]\nset yrange [0:100]\nset grid\n");
	fprintf(g, "set key outside right\n");
	fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc 'gray'\n", lo, lo);
	fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc 'gray'\n", hi, hi);
	fprintf(g, "plot ");
	for (size_t i = 0; sim_policies[i]; i++) {
		const char *n = sim_policies[i]->name;
		/* Zero refault rates are drawn at 1e-5 (the log axis' left edge). */
		fprintf(g,
			"%s'< grep \"^%s,\" %s | sort -t, -k5 -g' using "
			"(($5)<1e-5?1e-5:($5)):(100*($4)) with linespoints title '%s'",
			i ? ", " : "", n, csv, n);
	}
	fprintf(g, "\n");
}

int sim_plot(const char *csv_path, const char *base, const char *title, double budget_lo,
	     double budget_hi)
{
	static const char *const terms[][2] = {{"pngcairo", "png"}, {"svg", "svg"}};

	for (size_t i = 0; i < 2; i++) {
		FILE *g = popen("gnuplot 2>/dev/null", "w");
		if (!g)
			return -ENOENT;
		plot_script(g, csv_path, base, title, budget_lo, budget_hi, terms[i][0],
			    terms[i][1]);
		int st = pclose(g);
		if (st == -1 || !WIFEXITED(st))
			return -EIO;
		if (WEXITSTATUS(st) == 127)
			return -ENOENT;
		if (WEXITSTATUS(st))
			return -EIO;
	}
	return 0;
}
