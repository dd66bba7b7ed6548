// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * params.c - every tunable of every memtide-sim policy, by command-line name.
 *
 * One table drives parsing, range checks, --help and `sweep --param`: a parameter added
 * here is settable everywhere.  Defaults follow the systems the baselines imitate (oVirt
 * MOM's balloon.rules, DAMON_RECLAIM's module parameters, Linux's page_reporting_order and
 * the reporting delay measured on this machine) and libvmm's own defaults for memtide.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum ptype { P_DBL, P_U64, P_UINT, P_BOOL };

struct pdesc {
	const char *name;
	enum ptype type;
	size_t off;
	double min, max;
	const char *help;
};

#define F(f) offsetof(struct sim_params, f)
static const struct pdesc pdescs[] = {
    {"budget", P_DBL, F(budget), 0, 100, "refault budget, share of resident pages per minute"},
    {"fpr", P_BOOL, F(fpr), 0, 1, "free page reporting on (every policy but none)"},
    {"fpr-delay-ms", P_U64, F(fpr_delay_ms), 0, 3.6e6, "free -> reported to the host"},
    {"seed", P_U64, F(seed), 0, 1.8e19, "random seed (damon's sampling)"},
    {"mom-pressure", P_DBL, F(mom_pressure), 0, 1, "host free share under which MOM shrinks"},
    {"mom-host-free", P_DBL, F(mom_host_free), 0, 1, "host free share the host reports"},
    {"mom-min-free", P_DBL, F(mom_min_free), 0, 0.95, "guest kept at least this share free"},
    {"mom-max-step", P_DBL, F(mom_max_step), 0, 1, "balloon step at most, share of RAM"},
    {"mom-min-step", P_DBL, F(mom_min_step), 0, 1, "balloon step at least, share of RAM"},
    {"mom-interval-ms", P_U64, F(mom_interval_ms), 1, 3.6e6, "MOM policy loop"},
    {"damon-sample-ms", P_U64, F(damon_sample_ms), 1, 1e5, "DAMON sampling interval"},
    {"damon-aggr-ms", P_U64, F(damon_aggr_ms), 1, 1e6, "DAMON aggregation interval"},
    {"damon-min-regions", P_U64, F(damon_min_regions), 1, 1e6, "DAMON min regions"},
    {"damon-max-regions", P_U64, F(damon_max_regions), 3, 1e6, "DAMON max regions"},
    {"damon-min-age-ms", P_U64, F(damon_min_age_ms), 0, 3.6e7, "reclaim regions idle this long"},
    {"damon-quota-bytes-s", P_U64, F(damon_quota_bytes_s), 0, 1e13, "reclaim size quota"},
    {"lru2-limit", P_DBL, F(lru2_limit), 0, 1, "resident limit, share of RAM"},
    {"idle-age-ms", P_U64, F(idle_age_ms), 1, 3.6e8, "idle: evict a page idle this long"},
    {"idle-reused-x", P_DBL, F(idle_reused_x), 0.01, 100,
     "idle, per-page rule: a page seen reused goes after idle-age-ms x this (1: the single "
     "threshold)"},
    {"idle-gap-x", P_DBL, F(idle_gap_x), 0, 100,
     "idle, per-page rule: a page seen reused stays while idle under its longest idle gap x this "
     "(0: off)"},
    {"mt-nr-gens", P_UINT, F(mt_nr_gens), VMM_MIN_NR_GENS, VMM_MAX_NR_GENS, "generations"},
    {"mt-interval-ms", P_U64, F(mt_interval_ms), 1, 3.6e6, "control interval"},
    {"mt-target", P_DBL, F(mt_target), 0, 100, "target refaults, share of resident per minute"},
    {"mt-min-age-ms", P_U64, F(mt_min_age_ms), 1, 3.6e7, "cold age threshold, lowest"},
    {"mt-max-age-ms", P_U64, F(mt_max_age_ms), 1, 3.6e8, "cold age threshold, highest"},
    {"mt-initial-age-ms", P_U64, F(mt_initial_age_ms), 1, 3.6e8, "cold age threshold, start"},
    {"mt-kp", P_DBL, F(mt_kp), 0, 1e3, "reclaim PID proportional gain"},
    {"mt-ki", P_DBL, F(mt_ki), 0, 1e3, "reclaim PID integral gain (per s)"},
    {"mt-kd", P_DBL, F(mt_kd), 0, 1e3, "reclaim PID derivative gain"},
    {"mt-smooth", P_BOOL, F(mt_smooth), 0, 1,
     "average the refault rate before the controller (libvmm's default)"},
    {"mt-smooth-tau-ms", P_U64, F(mt_smooth_tau_ms), 1, 3.6e6, "time constant of that EMA"},
    {"mt-reuse-tau-ms", P_U64, F(mt_reuse_tau_ms), 0, 3.6e7,
     "window of the reuse histogram that floors the threshold (0: no floor)"},
    {"mt-take-free", P_BOOL, F(mt_take_free), 0, 1,
     "pages the guest frees go to the host at once (the balloon takes free memory first)"},
    {"mt-free-hint", P_BOOL, F(mt_free_hint), 0, 1,
     "libvmm is told which pages went to the host free, as memtided reads them from QEMU's "
     "pagemap (0: hinted cold instead; their next use reads as a reuse)"},
    {"mt-trust", P_UINT, F(mt_trust), 0, 64,
     "the reuse floor at T counts after watching the guest for trust x T (0: at once)"},
    {"mt-max-step-pages", P_U64, F(mt_max_step_pages), 0, 1e9,
     "most pages a round takes, as memtided's [pageout] max_step (0: no limit)"},
    {"mt-return", P_UINT, F(mt_return), 0, 2,
     "how memory goes back, as memtided's policy `return`: pageout (0, memtide evicts), "
     "balloon (1) or reclaim (2, the agent: memtided's default), by name or number"},
    {"mt-agent", P_BOOL, F(mt_agent), 0, 1,
     "balloon and reclaim: the guest runs memtide-agent (its use, growth and reclaim; 0: the "
     "balloon's figures only, and reclaim falls back to the balloon, as in memtided)"},
    {"mt-guest-mib", P_U64, F(mt_guest_mib), 1, 1e7,
     "the guest a trace stands for: memtided's byte settings (floor, headroom, steps) scale "
     "by the trace's RAM / this (balloon and reclaim)"},
    {"mt-aging-div", P_UINT, F(mt_aging_div), 0, 64,
     "aging rounds per cold age threshold (0: one every control interval, as memtided)"},
    {"mt-sample-ms", P_U64, F(mt_sample_ms), 0, 3.6e6,
     "the access source sees this much of each aging interval, from its start (memtided's "
     "ept plugin: its 200 ms window; 0: every access, as idle page tracking, DAMON and the "
     "guest's MGLRU)"},
    {"mt-sample-adapt", P_BOOL, F(mt_sample_adapt), 0, 1,
     "the window widens (to a fifth of the interval) while the source sees under half of the "
     "pages it saw the round before again, as memtided's ept source (0: mt-sample-ms fixed)"},
    {"mt-sample-phase", P_BOOL, F(mt_sample_phase), 0, 1,
     "each window opens at a random moment of its interval, as memtided's ept source places "
     "it (0: right after the round)"},
    {"mt-gens-widen", P_BOOL, F(mt_gens_widen), 0, 1,
     "generations widen with age (0: the oldest always folds, the rule before 7 Dec 2026)"},
    {"mt-weigh", P_BOOL, F(mt_weigh), 0, 1,
     "where pages idle past the longest age come back, take those that never did or a "
     "measured step (0: hold, the rule before 7 Dec 2026)"},
    {"mt-probe", P_BOOL, F(mt_probe), 0, 1,
     "between once and mt-trust times its floor watched, take a doubling probe of pages "
     "that never came back, watching the refaults (0: hold while learning)"},
    {"mt-first-window-ms", P_U64, F(mt_first_window_ms), 0, 3.6e6,
     "first comebacks (pages that never came back before) are counted over this recent "
     "span, not the reuse window: each page comes back first once (0: the reuse window)"},
    {"mt-reuse-tiers", P_BOOL, F(mt_reuse_tiers), 0, 1,
     "a page found used again climbs a tier, so pages that came back are told from those "
     "that never did (memtided: page-level sources)"},
    {"mt-refault-tiers", P_BOOL, F(mt_refault_tiers), 0, 1,
     "a page that refaults comes back a tier up, so one the source cannot see used stops "
     "being the first pick (memtided: the ept source, blind to fetches and page walks)"},
    {"mt-fill-wait", P_BOOL, F(mt_fill_wait), 0, 1,
     "pageout takes nothing while the guest's memory grows fast (a load: what it wrote is "
     "idle until it reads it), as memtided's host pageout (on with --memtided)"},
};
#undef F

/* memtide: libvmm's own defaults (vmm_reclaim_config_default), and a 5 s control interval
 * (memtided's loop). */
static void mt_defaults(struct sim_params *p)
{
	struct vmm_reclaim_config rc;

	vmm_reclaim_config_default(&rc);
	p->mt_nr_gens = VMM_DEFAULT_NR_GENS;
	p->mt_interval_ms = 5000;
	p->mt_target = rc.target_refault_per_min;
	p->mt_min_age_ms = rc.min_age_ms;
	p->mt_max_age_ms = rc.max_age_ms;
	/* Start at the floor, not libvmm's 2 min: a trace begins with the guest's data freshly
	 * written, and starting at 2 min only delays the first eviction by 2 min of a 10 min
	 * trace (measured on the sparse trace with a 10 s floor: 84.5% saved from 2 min,
	 * 97.5% from the floor, no refaults either way).  The controller raises it on refaults;
	 * a floor above it (mt-min-age-ms, the sweep's knob) lifts the start with it. */
	p->mt_initial_age_ms = rc.min_age_ms;
	p->mt_kp = rc.pid.kp;
	p->mt_ki = rc.pid.ki;
	p->mt_kd = rc.pid.kd;
	p->mt_aging_div = 2;
	/* On, as in memtided: libvmm averages the refault rate before its controller. */
	p->mt_smooth = rc.smooth_tau_ms != 0;
	p->mt_smooth_tau_ms = rc.smooth_tau_ms;
	p->mt_reuse_tau_ms = rc.reuse_tau_ms;
	p->mt_trust = rc.trust_factor;
	p->mt_max_step_pages = VMM_DECIDE_MAX_STEP_PAGES;
	p->mt_take_free = true;
	p->mt_free_hint = true;
	p->mt_return = SIM_RETURN_PAGEOUT;
	p->mt_agent = true;
	p->mt_guest_mib = 1024;
	p->mt_sample_ms = 0;
	p->mt_sample_adapt = true;
	p->mt_sample_phase = true;
	p->mt_gens_widen = true;
	p->mt_weigh = rc.weigh;
	p->mt_probe = rc.probe;
	p->mt_first_window_ms = rc.first_window_ms;
	p->mt_reuse_tiers = true;
	p->mt_refault_tiers = false; /* the sim's default source sees every access */
	p->mt_fill_wait = false;
}

void sim_params_memtided_layout(struct sim_params *p)
{
	struct vmm_reclaim_config rc;

	/* memtided's limits, fitted by the same call memtided makes (host/daemon/vm_attach.c); the
	 * floor stays the lab's (the sweep's knob). */
	vmm_reclaim_config_default(&rc);
	rc.min_age_ms = p->mt_min_age_ms;
	vmm_reclaim_config_fit(&rc, VMM_MAX_NR_GENS, p->mt_interval_ms);
	p->mt_nr_gens = VMM_MAX_NR_GENS;
	p->mt_aging_div = 0;
	p->mt_fill_wait = true;
	p->mt_min_age_ms = rc.min_age_ms;
	p->mt_max_age_ms = rc.max_age_ms;
	p->mt_initial_age_ms = rc.initial_age_ms;
}

void sim_params_default(struct sim_params *p)
{
	memset(p, 0, sizeof(*p));
	p->budget = 0.002;
	p->fpr = true;
	p->fpr_delay_ms = 2000;
	p->seed = 1;
	/* oVirt MOM balloon.rules: pressure_threshold 0.20, min_guest_free_percent 0.20,
	 * max_balloon_change_percent 0.05, min_balloon_change_percent 0.0025, 10 s loop.  The
	 * simulated host is overcommitted (10% free), so MOM is always in its shrink branch. */
	p->mom_pressure = 0.20;
	p->mom_host_free = 0.10;
	p->mom_min_free = 0.20;
	p->mom_max_step = 0.05;
	p->mom_min_step = 0.0025;
	p->mom_interval_ms = 10000;
	/* DAMON defaults (5 ms / 100 ms, 10..1000 regions) and DAMON_RECLAIM's min_age 120 s
	 * and 128 MiB/s size quota. */
	p->damon_sample_ms = 5;
	p->damon_aggr_ms = 100;
	p->damon_min_regions = 10;
	p->damon_max_regions = 1000;
	p->damon_min_age_ms = 120000;
	p->damon_quota_bytes_s = 128ull << 20;
	p->lru2_limit = 0.5;
	p->idle_age_ms = 120000;
	p->idle_reused_x = 1;
	p->idle_gap_x = 0;
	mt_defaults(p);
}

static const struct pdesc *find(const char *name)
{
	for (size_t i = 0; i < sizeof(pdescs) / sizeof(pdescs[0]); i++)
		if (!strcmp(pdescs[i].name, name))
			return &pdescs[i];
	return NULL;
}

int sim_params_set(struct sim_params *p, const char *name, const char *value)
{
	const struct pdesc *d = find(name);
	char *end;
	double v;

	if (!d)
		return -ENOENT;
	if (d->off == offsetof(struct sim_params, mt_return)) { /* memtided's names too */
		static const char *const number[] = {"0", "1", "2"};
		for (unsigned r = SIM_RETURN_PAGEOUT; r <= SIM_RETURN_RECLAIM; r++)
			if (strcmp(value, sim_return_name((enum sim_return)r)) == 0)
				value = number[r];
	}
	errno = 0;
	v = strtod(value, &end);
	if (errno || end == value || *end || v != v)
		return -EINVAL;
	if (v < d->min || v > d->max)
		return -ERANGE;
	if (d->type != P_DBL && v != (double)(uint64_t)v)
		return -EINVAL;
	char *f = (char *)p + d->off;
	switch (d->type) {
	case P_DBL:
		*(double *)(void *)f = v;
		break;
	case P_U64:
		*(uint64_t *)(void *)f = (uint64_t)v;
		break;
	case P_UINT:
		*(unsigned *)(void *)f = (unsigned)v;
		break;
	case P_BOOL:
		*(bool *)(void *)f = v != 0;
		break;
	}
	return 0;
}

double sim_params_get(const struct sim_params *p, const char *name, int *err)
{
	const struct pdesc *d = find(name);
	const char *f;

	*err = d ? 0 : -ENOENT;
	if (!d)
		return 0;
	f = (const char *)p + d->off;
	switch (d->type) {
	case P_DBL:
		return *(const double *)(const void *)f;
	case P_U64:
		return (double)*(const uint64_t *)(const void *)f;
	case P_UINT:
		return *(const unsigned *)(const void *)f;
	case P_BOOL:
		return *(const bool *)(const void *)f;
	}
	return 0;
}

int sim_params_range(const char *name, double *min, double *max)
{
	const struct pdesc *d = find(name);

	if (!d)
		return -ENOENT;
	*min = d->min;
	*max = d->max;
	return 0;
}

int sim_params_check(const struct sim_params *p, char *err, size_t len)
{
	if (p->mt_min_age_ms > p->mt_max_age_ms) {
		snprintf(err, len,
			 "--mt-min-age-ms (%llu) is above --mt-max-age-ms (%llu): the cold age "
			 "threshold's floor must not exceed its ceiling",
			 (unsigned long long)p->mt_min_age_ms,
			 (unsigned long long)p->mt_max_age_ms);
		return -EINVAL;
	}
	if (p->damon_min_regions > p->damon_max_regions) {
		snprintf(err, len, "--damon-min-regions (%llu) is above --damon-max-regions (%llu)",
			 (unsigned long long)p->damon_min_regions,
			 (unsigned long long)p->damon_max_regions);
		return -EINVAL;
	}
	if (p->mt_return != SIM_RETURN_PAGEOUT && p->mt_interval_ms < 100) {
		snprintf(err, len,
			 "--mt-interval-ms (%llu) is under 100 ms, the shortest control interval "
			 "memtided's balloon policy takes (--mt-return balloon and reclaim run it)",
			 (unsigned long long)p->mt_interval_ms);
		return -EINVAL;
	}
	if (p->mom_min_step > p->mom_max_step) {
		snprintf(err, len, "--mom-min-step (%g) is above --mom-max-step (%g)",
			 p->mom_min_step, p->mom_max_step);
		return -EINVAL;
	}
	return 0;
}

void sim_params_help(FILE *out)
{
	struct sim_params p;
	int err;

	sim_params_default(&p);
	for (size_t i = 0; i < sizeof(pdescs) / sizeof(pdescs[0]); i++)
		fprintf(out, "  --%-22s %-12g %s\n", pdescs[i].name,
			sim_params_get(&p, pdescs[i].name, &err), pdescs[i].help);
}
