// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_memtide.c - memtide's own policy: libvmm's generations, eviction hand and reclaim
 * controller (vmm/include/vmm.h parts 4-6), driven the way memtided drives them, with the
 * trace standing in for the access-bit source.
 *
 * The trace plays the role of the page tables' accessed bits: accesses since the last aging
 * round are collected (as hardware would set A bits) and harvested at the next round, which
 * is what libvmm's generations assume - a generation born at T holds pages last seen used
 * before T, so "born at least min_age ago" means "idle at least min_age".  Reporting
 * accesses to libvmm as they happen instead would put pages used after T into the
 * generation born at T, and the eviction hand would take pages idle for only
 * min_age - interval (measured: on the phases trace, half of all evictions refaulted).
 *
 * At the end of each epoch, in the order of the data flow (docs/design.md):
 *   Step 1: feedback - faults the core saw: a refault goes to vmm_refault (and counts for
 *           the controller), a fill of a page libvmm had evicted to vmm_restore; pages the
 *           guest freed are, with mt-take-free (default), given to the host at once (and,
 *           after the first epoch, every page never used) and, with mt-free-hint (default),
 *           told to libvmm as free (vmm_hint_free): they hold nothing, a balloon's
 *           inflation takes free memory
 *           first (memtided's balloon path), and the guest's next use of one is a fill, not
 *           a reuse at the age it lay free; with mt-take-free 0 (return=reclaim, where only
 *           free page reporting's 2 MiB blocks go back) they are hinted cold (vmm_hint_cold);
 *   Step 2: access bits - the epoch's accesses join the set seen since the last round, as
 *           the source sees them: with mt-sample-ms (memtided's ept plugin, 200 ms of each
 *           interval from the round on), only the epochs inside that window, and of an epoch
 *           the window cuts, each page with the share of the epoch it covers (a page read
 *           once at a random moment of the epoch); the window widens and narrows after
 *           each round as memtided's source sets it (vmm_sample_update; mt-sample-adapt 0
 *           keeps it fixed) and opens at a random moment of the interval as memtided's
 *           source places it (mt-sample-phase 0: right after the round, as it did before);
 *           0, every access (sources without windows);
 *   Step 3: decision - every mt-interval-ms, vmm_decide, the call memtided makes each
 *           tick (host/decide/tick_decide.c): the reuses by idle age floor the threshold
 *           (--mt-reuse-tau-ms 0 turns that off), the interval's refaults and the resident
 *           pages set it (libvmm averages the rate over mt-smooth-tau-ms first; --mt-smooth
 *           0 turns that off), and its gates say how many pages may go: none while the
 *           guest was watched for less than the threshold or the controller holds, at most
 *           mt-max-step-pages;
 *   Step 4: aging - every threshold / mt-aging-div (at least every epoch): vmm_age_begin,
 *           then the collected accesses go to vmm_mark_young in runs (write = dirty);
 *   Step 5: eviction - right after aging, vmm_evict takes as many pages as the decision
 *           allows from the generations born at least the threshold ago, in runs.
 * That is --mt-return pageout (the default: memtided's host pageout).  With balloon or reclaim
 * the steps go in memtided's order instead (mt_epoch_act): at each control interval the
 * round ages, vmm_decide sets the cold age, and libvmm's working set at it goes to memtided's
 * balloon policy and actuators (sim/actuators.c); libvmm hears of no free page, as memtided
 * reads no map in those modes.
 * The generations must span the threshold: nr_gens >= mt-aging-div + 2 (checked at init).
 * libvmm does not see free page reporting (the core's FPR returns free blocks by itself),
 * so it may believe a reported page resident: that costs only a no-op eviction later, and
 * the controller is fed the core's resident count, which is exact.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decide/controller.h"
#include "decide/steady.h"
#include "sim.h"

#define MT_RUNS 1024

struct mt {
	struct vmm_guest *g;
	struct vmm_reclaim_ctl ctl;
	uint8_t *vmm_evicted; /* 1 while libvmm counts the page as evicted */
	uint8_t *seen;        /* accessed since the last aging round (the "A bit") */
	uint32_t *seen_list;  /* those pages, in arrival order */
	uint64_t nr_seen;
	struct vmm_run runs[MT_RUNS];
	struct vmm_decision dec; /* the last vmm_decide (dec.cold_age_ms: the threshold) */
	uint64_t t0_ms;          /* the trace's start: the guest is watched from then */
	uint64_t last_aging_ms;
	uint64_t next_ctl_ms, last_ctl_ms;
	uint64_t refaults_in_interval;
	/* --mt-return balloon or reclaim: memtided's balloon policy and its actuators */
	struct sim_act *act;
	uint64_t rounds;          /* aging rounds so far */
	uint64_t libvmm_refaults; /* libvmm's refault count at the last decision */
	uint64_t rng;             /* the sampling model's cuts (mt-sample-ms) */
	struct vmm_sample
	    sample; /* the window, as memtided's ept source sets it (mt-sample-adapt) */
	uint64_t window_from_ms; /* where the round's window opens (mt-sample-phase) */
	/* mt-fill-wait: memtided's rule that host pageout waits while the guest's RAM grows
	 * fast (host/act/tick_act.c), on the same function and settings */
	struct mtd_ctl_config fill_cfg;
	struct mtd_steady fill;
	bool filling;
};

static void mt_fini(void *state)
{
	struct mt *m = state;

	vmm_guest_free(m->g);
	sim_act_free(m->act);
	free(m->vmm_evicted);
	free(m->seen);
	free(m->seen_list);
	free(m);
}

static int mt_init(struct sim_ctx *ctx, void **state)
{
	const struct sim_params *p = ctx->p;
	struct vmm_guest_config gc;
	struct vmm_reclaim_config rc;
	uint64_t t0 = ctx->t->epochs[0].t_ms;
	struct mt *m = calloc(1, sizeof(*m));
	int err;

	if (!m)
		return -ENOMEM;
	if (p->mt_aging_div && p->mt_nr_gens < p->mt_aging_div + 2) {
		free(m);
		return -EINVAL;
	}
	m->vmm_evicted = calloc(ctx->t->ram_pages, 1);
	m->seen = calloc(ctx->t->ram_pages, 1);
	m->seen_list = malloc(ctx->t->ram_pages * sizeof(*m->seen_list));
	if (!m->vmm_evicted || !m->seen || !m->seen_list) {
		mt_fini(m);
		return -ENOMEM;
	}
	vmm_guest_config_default(&gc);
	gc.ram = ctx->t->ram;
	gc.nr_ram = ctx->t->nr_ram;
	gc.nr_gens = p->mt_nr_gens;
	gc.gens_widen = p->mt_gens_widen;
	gc.reuse_raises_tier = p->mt_reuse_tiers;
	gc.refault_raises_tier = p->mt_refault_tiers;
	err = vmm_guest_new(&gc, &m->g);
	if (err)
		goto fail;
	vmm_reclaim_config_default(&rc);
	rc.target_refault_per_min = p->mt_target;
	rc.min_age_ms = p->mt_min_age_ms;
	rc.max_age_ms = p->mt_max_age_ms;
	/* Start inside the limits whatever they are set to: raising mt-min-age-ms alone
	 * must not make the defaults invalid. */
	rc.initial_age_ms = p->mt_initial_age_ms < rc.min_age_ms   ? rc.min_age_ms
			    : p->mt_initial_age_ms > rc.max_age_ms ? rc.max_age_ms
								   : p->mt_initial_age_ms;
	/* libvmm averages the refault rate (60 s) before its controller reads it: bursts are
	 * read as their rate (vmm/reclaim_ctl.c); --mt-smooth 0 feeds each interval raw. */
	rc.smooth_tau_ms = p->mt_smooth ? p->mt_smooth_tau_ms : 0;
	/* The reuse floor: the aging hand's reuses by idle age keep the threshold above the
	 * ages the guest still reuses (vmm/reuse.c); --mt-reuse-tau-ms 0 turns it off. */
	rc.reuse_tau_ms = p->mt_reuse_tau_ms;
	rc.trust_factor = p->mt_trust;
	rc.weigh = p->mt_weigh;
	rc.probe = p->mt_probe;
	rc.first_window_ms = p->mt_first_window_ms;
	rc.pid.kp = p->mt_kp;
	rc.pid.ki = p->mt_ki;
	rc.pid.kd = p->mt_kd;
	err = vmm_reclaim_init(&m->ctl, &rc);
	if (err)
		goto fail;
	if (p->mt_return != SIM_RETURN_PAGEOUT) {
		err = sim_act_new(ctx, (enum sim_return)p->mt_return, &m->act);
		if (err)
			goto fail;
	}
	m->dec.cold_age_ms = m->ctl.age_ms;
	m->dec.gate = VMM_DECIDE_WATCHING; /* nothing goes before the first decision */
	m->t0_ms = t0;
	m->window_from_ms = t0;
	m->rng = p->seed ^ 0x5eed5a3b1eULL;
	if (p->mt_sample_ms) {
		struct vmm_sample_config sc;
		vmm_sample_config_default(&sc, p->mt_sample_ms, p->mt_interval_ms);
		if (!p->mt_sample_adapt)
			sc.max_ms = sc.base_ms;
		err = vmm_sample_init(&m->sample, &sc);
		if (err)
			goto fail;
	}
	if (p->mt_fill_wait && (err = sim_act_ctl_config(ctx, &m->fill_cfg)) != 0)
		goto fail;
	m->last_aging_ms = t0;
	m->last_ctl_ms = t0;
	m->next_ctl_ms = t0 + p->mt_interval_ms;
	*state = m;
	return 0;
fail:
	mt_fini(m);
	return err;
}

/* Step 1 */
static int mt_feedback(struct mt *m, struct sim_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_faulted; i++) {
		uint32_t idx = ctx->faulted[i];
		uint64_t gpa = sim_page_gpa(ctx->t, idx);
		int rc = 0;
		if (ctx->faulted_refault[i]) {
			struct vmm_refault rf;
			m->refaults_in_interval++;
			if (m->vmm_evicted[idx])
				rc = vmm_refault(m->g, gpa, &rf);
		} else if (m->vmm_evicted[idx]) {
			rc = vmm_restore(m->g, gpa, 1);
		}
		if (rc)
			return rc;
		m->vmm_evicted[idx] = 0;
	}
	return 0;
}

/* Step 1: a page the guest holds nothing in goes to the host; with mt-free-hint libvmm
 * hears so (vmm_hint_free: its next use is no reuse), else it is hinted cold. */
static int mt_take_free(struct mt *m, struct sim_ctx *ctx, uint32_t p)
{
	uint64_t gpa = sim_page_gpa(ctx->t, p);
	int rc = m->vmm_evicted[p]      ? 0 /* libvmm has it out already */
		 : ctx->p->mt_free_hint ? vmm_hint_free(m->g, gpa, 1)
					: vmm_hint_cold(m->g, gpa, 1);

	sim_evict(ctx, p);
	return rc;
}

/* Step 2: the accessed bits of epoch e as the source sees them (SIM seen bit 2 = written):
 * all of them, or with mt-sample-ms those of the window that opened at the last round. */
static void mt_collect(struct mt *m, const struct sim_ctx *ctx, size_t e)
{
	const struct sim_epoch *ep = &ctx->t->epochs[e];
	uint64_t t0 = ep->t_ms, t1 = sim_epoch_end_ms(ctx->t, e);
	uint64_t w = ctx->p->mt_sample_ms ? m->sample.window_ms : 0;
	double share = 1.0;

	if (w) {
		uint64_t open = m->window_from_ms;
		uint64_t from = t0 > open ? t0 : open;
		uint64_t to = t1 < open + w ? t1 : open + w;
		if (to <= from)
			return; /* the window was shut all through this epoch */
		share = (double)(to - from) / (double)(t1 - t0);
	}
	for (uint32_t i = 0; i < ep->nr_acc; i++) {
		uint32_t p = SIM_ACC_PAGE(ep->acc[i]);
		if (share < 1.0 && sim_rand01(&m->rng) >= share)
			continue;
		if (!m->seen[p])
			m->seen_list[m->nr_seen++] = p;
		m->seen[p] |= (uint8_t)(1 | ((ep->acc[i] & SIM_ACC_WRITE) ? 2 : 0));
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Step 4: a new generation, and the pages seen since the last one moved into it. */
static int mt_age(struct mt *m, struct sim_ctx *ctx, uint64_t now_ms)
{
	int rc = vmm_age_begin(m->g, now_ms);

	qsort(m->seen_list, m->nr_seen, sizeof(*m->seen_list), cmp_u32);
	for (uint64_t i = 0; i < m->nr_seen && !rc;) {
		uint32_t start = m->seen_list[i], n = 1;
		uint8_t w = m->seen[start] & 2;
		while (i + n < m->nr_seen && m->seen_list[i + n] == start + n &&
		       (m->seen[start + n] & 2) == w && (start + n) % SIM_BLOCK_PAGES != 0)
			n++; /* runs of equal dirtiness, never across a 2 MiB block */
		rc = vmm_mark_young(m->g, sim_page_gpa(ctx->t, start), n, w != 0);
		i += n;
	}
	for (uint64_t i = 0; i < m->nr_seen; i++)
		m->seen[m->seen_list[i]] = 0;
	m->nr_seen = 0;
	m->last_aging_ms = now_ms;
	m->rounds++;
	if (!rc && ctx->p->mt_sample_ms) { /* the next window, as memtided's ept source sets it */
		struct vmm_guest_stats gs;
		vmm_guest_get_stats(m->g, &gs);
		uint64_t w = vmm_sample_update(&m->sample, gs.young_prev, gs.young_again);
		uint64_t room =
		    ctx->p->mt_interval_ms > w + 300 ? ctx->p->mt_interval_ms - w - 300 : 0;
		m->window_from_ms = now_ms;
		if (ctx->p->mt_sample_phase && room) /* at a random moment (source_ept.c) */
			m->window_from_ms += sim_rand(&m->rng) % room;
	}
	return rc;
}

/* Step 5 */
static int mt_evict(struct mt *m, struct sim_ctx *ctx, uint64_t now_ms)
{
	uint64_t left = m->dec.take_pages;

	for (int pass = 0; pass < 1024 && left; pass++) {
		struct vmm_evict_req req = {
		    .max_pages = left,
		    .min_age_ms = m->dec.cold_age_ms,
		    .now_ms = now_ms,
		    .runs = m->runs,
		    .max_runs = MT_RUNS,
		    .reused_min_age_ms = m->dec.reused_age_ms,
		};
		struct vmm_evict_result res;
		int rc = vmm_evict(m->g, &req, &res);
		if (rc)
			return rc;
		for (size_t r = 0; r < res.nr_runs; r++) {
			int64_t first = sim_gpa_page(ctx->t, m->runs[r].gpa);
			if (first < 0)
				return -ERANGE;
			for (uint64_t k = 0; k < m->runs[r].npages; k++) {
				m->vmm_evicted[first + (int64_t)k] = 1;
				sim_evict(ctx, (uint32_t)(first + (int64_t)k));
			}
		}
		left -= res.evicted_pages < left ? res.evicted_pages : left;
		if (res.evicted_pages == 0 || res.nr_runs < MT_RUNS)
			break;
	}
	return 0;
}

/* Step 4 is due: a round every threshold / mt-aging-div (mt-aging-div 0: every control
 * interval, as memtided ages). */
static bool mt_aging_due(const struct mt *m, const struct sim_ctx *ctx, uint64_t t1)
{
	uint64_t every = ctx->p->mt_aging_div ? m->dec.cold_age_ms / ctx->p->mt_aging_div
					      : ctx->p->mt_interval_ms;
	return t1 >= m->last_aging_ms + every;
}

/* Step 3: the call memtided makes each tick, with the interval's refaults. */
static int mt_decide(struct mt *m, const struct sim_ctx *ctx, uint64_t t1, uint64_t refaults)
{
	struct vmm_decide_in in = {
	    .dt_ms = t1 - m->last_ctl_ms,
	    .refaults = refaults,
	    .resident_pages = ctx->resident_pages,
	    .watched_ms = t1 - m->t0_ms,
	    .max_step_pages = ctx->p->mt_max_step_pages,
	};
	return vmm_decide(m->g, &m->ctl, &in, &m->dec);
}

static void mt_interval_done(struct mt *m, const struct sim_ctx *ctx, uint64_t t1)
{
	m->refaults_in_interval = 0;
	m->last_ctl_ms = t1;
	m->next_ctl_ms = t1 + ctx->p->mt_interval_ms;
}

/* --mt-return balloon or reclaim, one control interval in memtided's order (host/decide/tick.h):
 * the source ages, vmm_decide sets the cold age from the refault signal (libvmm's refaults
 * of pages the target took, plus the guest's major faults, as memtided adds them), libvmm's
 * working set at that age goes to memtided's balloon policy (sim/actuators.c). */
static int mt_control_act(struct mt *m, struct sim_ctx *ctx, uint64_t t1, bool age)
{
	struct vmm_guest_stats gs;
	int rc = age ? mt_age(m, ctx, t1) : 0;

	if (rc)
		return rc;
	vmm_guest_get_stats(m->g, &gs);
	uint64_t signal = gs.refaults_total - m->libvmm_refaults + m->refaults_in_interval;
	m->libvmm_refaults = gs.refaults_total;
	rc = mt_decide(m, ctx, t1, signal);
	if (rc)
		return rc;
	struct sim_act_tick tick = {
	    .now_ms = t1,
	    .dt_ms = t1 - m->last_ctl_ms,
	    .guest_refaults = m->refaults_in_interval,
	    .cold_age_ms = m->dec.estimate_age_ms,
	    .refault_hold = m->dec.holds_all_takers,
	};
	/* Two rounds, and more than a cold age of watching, before the estimate means anything
	 * (memtided's rule, host/decide/tick_decide.c: no page is known idle for longer than it was
	 * watched). */
	if (m->rounds >= 2 && t1 - m->t0_ms > tick.cold_age_ms &&
	    vmm_wss(m->g, t1, &tick.cold_age_ms, 1, &tick.wss_bytes) == 0)
		tick.wss_valid = true;
	mt_interval_done(m, ctx, t1);
	return sim_act_control(m->act, ctx, m->g, &tick);
}

/* Step 1, with mt-free-hint, under balloon or reclaim: memtided reads QEMU's map each tick
 * and marks free in libvmm every page that holds nothing on the host (host/act/pageout_hand.c
 * mtd_hand_mark_free): reported by free page reporting, taken by the balloon, or never
 * used.  In the lab those are the pages not resident (nothing is in host swap here). */
static int mt_mark_free(struct mt *m, const struct sim_ctx *ctx)
{
	int rc = 0;

	for (uint32_t p = 0; p < ctx->t->ram_pages && !rc; p++)
		if (!(ctx->pg[p] & SIM_PG_RESIDENT))
			rc = vmm_hint_free(m->g, sim_page_gpa(ctx->t, p), 1);
	return rc;
}

/* --mt-return balloon or reclaim: free page reporting and the balloon take free memory by
 * themselves; libvmm hears which pages they emptied once a control interval, as memtided
 * reads them from QEMU's map. */
static int mt_epoch_act(struct mt *m, struct sim_ctx *ctx, size_t e)
{
	uint64_t t1 = sim_epoch_end_ms(ctx->t, e);
	int rc = mt_feedback(m, ctx); /* Step 1 */

	if (!rc && ctx->p->mt_free_hint && t1 >= m->next_ctl_ms)
		rc = mt_mark_free(m, ctx);
	if (rc)
		return rc;
	sim_act_epoch(m->act, ctx, e);
	mt_collect(m, ctx, e); /* Step 2 */
	bool age = mt_aging_due(m, ctx, t1);
	if (t1 >= m->next_ctl_ms) /* Steps 3-5 */
		return mt_control_act(m, ctx, t1, age);
	return age ? mt_age(m, ctx, t1) : 0;
}

static int mt_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct mt *m = state;

	if (m->act)
		return mt_epoch_act(m, ctx, e);
	const struct sim_epoch *ep = &ctx->t->epochs[e];
	uint64_t t1 = sim_epoch_end_ms(ctx->t, e);
	int rc = mt_feedback(m, ctx); /* Step 1 */

	for (uint32_t i = 0; i < ep->nr_free && !rc; i++)
		rc = ctx->p->mt_take_free
			 ? mt_take_free(m, ctx, ep->freed[i])
			 : vmm_hint_cold(m->g, sim_page_gpa(ctx->t, ep->freed[i]), 1);
	/* The guest's memory that was never used is free too: the first inflation takes it
	 * (the guest reports MemFree; the balloon's pages come from its free lists). */
	if (e == 0 && ctx->p->mt_take_free)
		for (uint32_t p = 0; p < ctx->t->ram_pages && !rc; p++)
			if (!(ctx->pg[p] & SIM_PG_LIVE))
				rc = mt_take_free(m, ctx, p);
	if (rc)
		return rc;
	mt_collect(m, ctx, e);      /* Step 2 */
	if (t1 >= m->next_ctl_ms) { /* Step 3 */
		rc = mt_decide(m, ctx, t1, m->refaults_in_interval);
		if (rc)
			return rc;
		/* The guest's RAM on the host, as memtided reads it: growing fast, it loads. */
		m->filling = ctx->p->mt_fill_wait &&
			     mtd_steady_growing(&m->fill, &m->fill_cfg, true,
						ctx->resident_pages * SIM_PAGE_SIZE, t1);
		mt_interval_done(m, ctx, t1);
	}
	if (!mt_aging_due(m, ctx, t1))
		return 0;
	rc = mt_age(m, ctx, t1); /* Step 4 */
	/* watching, holding, the guest still filling its memory: take nothing */
	if (rc || m->dec.gate != VMM_DECIDE_TAKE || m->filling)
		return rc;
	return mt_evict(m, ctx, t1); /* Step 5 */
}

const struct sim_policy sim_policy_memtide = {
    .name = "memtide",
    .fpr = SIM_FPR_PARAM,
    .knob = "mt-min-age-ms",
    .init = mt_init,
    .epoch = mt_epoch,
    .fini = mt_fini,
};
