// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reclaim_ctl.c - the reclaim controller (Part 6b of libvmm, PID control).
 *
 * Question it answers: how long must a page have been idle before the host may take it?
 * Too short a cold age threshold and the guest faults its memory back (refaults: latency
 * for the guest, work for the host); too long and memory that could serve other guests
 * sits idle.  Google's far-memory system (Lagar-Cavilla et al., ASPLOS 2019) settled this
 * with a target promotion rate - refaults per minute as a fraction of the memory - of
 * 0.2% per minute, and a controller that moves the threshold to hold it.  memtide does the
 * same per guest, with the refaults libvmm counts (Part 5) or the guest reports.
 *
 * The terms:
 *   process variable  r = refault_pages / resident_pages / minutes: the fraction of the
 *                     guest's resident memory faulted back per minute in the last interval.
 *   setpoint          target_refault_per_min (default 0.002).
 *   measurement       m = log2(1 + r / target), in octaves.  m = 1 at the target; it is 0
 *                     for no refaults and grows only logarithmically in a burst, so one
 *                     burst of refaults (a guest reboot, a batch job) cannot slam the
 *                     threshold to its maximum in one step.  The PID's setpoint is 1.
 *   output            aggressiveness a, in octaves below the longest threshold:
 *                     threshold = max_age_ms / 2^a, a in [0, log2(max_age / min_age)].
 *                     Positive error (fewer refaults than the target) raises a: reclaim
 *                     more.  Working in octaves makes the loop gain about the same at a
 *                     threshold of 10 s and of 1 h: the refault rate of a typical guest
 *                     falls roughly as 1 / threshold (idle times are spread over decades),
 *                     so one octave of threshold is about one octave of rate anywhere.
 *   gains             kp 0.25 (octaves per octave of error), ki 0.01 per s, no D: the
 *                     refault count of one 5 s interval is noisy and the plant is slow (a
 *                     page evicted now refaults only when next used, a threshold later),
 *                     so integral action does the work.  tests/unit/test_reclaim_ctl.c
 *                     runs a simulated guest (20 000 pages, idle times spread from 10 s
 *                     to 4 h) for 6 h: over hours 4-6 the rate is 0.00200/min against
 *                     the 0.002 target, the threshold between 291 and 347 s (0.00191/min,
 *                     291..386 s, with the reuse floor fed by refaults alone; fed raw
 *                     interval counts: 0.00216/min, 242..416 s).
 * Bursts: the measurement is taken on a moving average of the rate (time constant
 *   smooth_tau_ms, 60 s), not on each interval's own count.  Refaults come in bursts: a
 *   cohort of pages crosses the threshold together and comes back together.  A working
 *   set reused every 20 s with the threshold at 16 s refaults one burst every 40 s, 30x
 *   the target over those 40 s; per 5 s interval that is log2(1 + 240) = 7.9 once and 0
 *   seven times, a mean of 0.99: the controller sat at its setpoint while the true rate
 *   was 30x the target (memtide-sim's step trace: 56-59 intervals to react).  The log of
 *   an average is the right reading of that rate; the average of the logs is not
 *   (Jensen).  With the 60 s average the threshold rises in the first interval after the
 *   step and no page of the grown set refaults twice (docs/results.md, sim_react).
 * The reuse floor: the PID learns only from refaults, so while nothing refaults it lowers the
 *   threshold steadily, until a whole cohort of pages reused at some period crosses it at
 *   once and comes back as a burst (memtide-sim, docs/results.md: a controller fed raw
 *   refault counts took 280-295 s to react to a step growth, 30 s with the floor).  The
 *   aging hand has seen those reuses already: libvmm counts pages used again by how long
 *   they had been idle (reuse.c).  In a window of reuse_tau_ms (5 min) those counts give,
 *   for each threshold T, the refault rate T would cause: the reuses at idle ages >= T, per
 *   minute, over the resident pages.  The floor is the lowest bucket boundary whose
 *   predicted rate is within the target; the threshold is the PID's or the floor,
 *   whichever is longer.  Refaults that happened (the prediction missed, or pages evicted
 *   before the window saw them) are counted at the threshold that let them go, so the
 *   floor rises past it.  When the floor binds, the PID's integral is set back to the
 *   floor's position (tracking anti-windup), so that a refault burst moves the threshold up
 *   at once rather than after unwinding what the PID accumulated while the floor held it.
 * Holding: the controller may also say "take nothing by age for now" (ctl->hold, with
 *   hold_why); whoever evicts by age (memtided's host pageout, memtide-sim) then evicts
 *   nothing.  Without it the controller's least aggressive output is still its longest
 *   age, and a guest whose pages come back after longer idle times than that is evicted
 *   anyway: at memtided's 70 s, memtide-sim's zipf trace refaulted at 160x a 0.2% budget,
 *   cc1 and python3 at 83-95x.  It holds when:
 *   - learning: the floor counts only once the guest has been watched for trust_factor
 *     (4) times the threshold applied (the floor, or min_age_ms above it), and once the
 *     aging hand has reported any reuse (or the reuse window has passed with none: an
 *     idle guest).  A page watched for W
 *     can only be seen reused after up to W; right after attach every cohort looks
 *     unused, and the floor of an empty window is the shortest threshold.  Starting
 *     at the shortest threshold evicted zipf's whole live set 15 s in, and paid it
 *     back over the next 10 minutes at 48x the budget;
 *   - too old: even the longest age the generations tell apart would cost more than
 *     the budget (the floor lies past max_age_ms): the reuses seen there are pages
 *     idle for longer, and evicting them would refault them;
 *   - refaults: the PID sits at the longest age and the averaged rate is still above
 *     the target.
 *   When the floor is vouched for, lies below the PID's threshold and refaults keep the
 *   target, the threshold goes straight down to it: the floor is a measurement, and the
 *   PID's slow descent (0.01 octave a second) is for when nothing else is known.
 *   Measured (memtide-sim bench, 18 trace x budget cases; docs/results.md "sim_defaults"):
 *   at or under 1.25x the budget on 13 (2 before), with 0 refaults on 11 of them; 4 of
 *   the 5 over are phases and scan, whose idle data comes back all at once after minutes
 *   of idleness, which no reuse seen before could predict.  The price is memory: with no
 *   vouched threshold the guest gives back only what it does not use.
 * Weighing (cfg.weigh): "reused past the longest age" used to hold everything.  A key-value
 *   server's guest with a sampled source (memtided's ept plugin sees 200 ms of every 5 s)
 *   showed why that is wrong: its hot pages, touched once a second, were seen once every
 *   ~25 s, so some showed gaps past the 70 s the generations then told apart; 1.4 GiB
 *   written once and never read again sat beside them, and memtided took nothing.  Pages
 *   that came back after a long gap are a known population; pages written once are not.
 *   So with reuse_raises_tier (generations.c) a reuse lifts a page's tier, the aging hand
 *   counts the reuses of tier-0 pages apart (first comebacks), and when the floor over all
 *   reuses lies past the longest age the controller keeps two floors with the allowance
 *   shared (otherwise one floor over all reuses serves both: split, the lab's phases trace
 *   went from 0 to 74x its budget, its pages that never came back judged without the
 *   evidence of those that did, which came back after minutes the same way):
 *   - pages that never came back (tier 0) go past the floor of their first comebacks
 *     (floor_ms; the threshold, age_ms, is the PID's or this floor, as before): those
 *     first comebacks are exactly the refaults taking them would cause;
 *   - pages that came back (tier 1 and up) go past the floor of their later reuses, with
 *     what the first comebacks leave of the allowance (reused_floor_ms, reused_age_ms),
 *     once vouched for like any floor; until then, or when it lies past the longest age,
 *     they stay (mode "unreused"; the eviction hand's reused_min_age_ms);
 *   - when even first comebacks run past the longest age faster than the budget, no age
 *     keeps all of them, but a part may go (mode "step"): vmm_decide measures, at each
 *     bucket age A up to the longest, how often a page idle past A comes back (first
 *     comebacks past A per minute over the pages idle past A) and lets as many go as the
 *     budget carries at that rate, counting those already out, one max_step at a time; the
 *     averaged refault rate watches it (a rate above the target holds, as at the longest
 *     age).
 *   Probing: a floor counts once the guest was watched trust_factor times as long
 *   ("Holding"); at memtided's 5 s interval with a sampled source a key-value server's
 *   floor lies near 90 s (its hot pages' sampled gaps), so it counted after six minutes,
 *   while most of its RAM had been idle since it was loaded.  What the trust factor guards
 *   against is pages that come back later than the guest has been watched; the first
 *   comebacks seen so far say how likely that is.  So while the floor is not yet vouched
 *   for, the controller probes at the floor of first comebacks computed with a
 *   trust_factor-th of the allowance (a margin for what it has not seen yet), once it has
 *   watched as long: pages that never came back, idle past it, go at most probe_pages a
 *   round, 1/64 of the guest at first and twice as many each round the averaged refault
 *   rate keeps the target; a rate over it holds (refaults) and the probe starts again
 *   small.  The pages that came back stay.  What a wrong probe costs is what it took before
 *   the refaults showed.
 * First comebacks are once (cfg.first_window_ms, with reuse_raises_tier): a page comes back
 *   "first" once, then climbs a tier, so a burst of first comebacks says how many pages
 *   that never came back were coming back then, not how many still are.  A key-value
 *   server loaded while memtided watches shows one such burst: its hot values' first reads
 *   after the load come back from about the load's length (45-64 s on scenario 19's guest),
 *   and after it nothing that never came back comes back.  Counted over the 5 min reuse
 *   window, the burst held the floor at 45-64 s, vouched for only after watching four times
 *   as long: the store went ~300 s after its load on the guest (tests/unit/test_decide.c,
 *   test_first_comebacks_once: 210 s; memtide-sim bench, sim_sampled's hot-first trace:
 *   200 s).  So the floors read the first comebacks at their rate over the last
 *   first_window_ms (a minute: a ring of the last VMM_FIRST_ROUNDS rounds, scaled to the
 *   reuse window's time base), and every reuse as the later reuses of pages that came back
 *   (the reuse window less its first comebacks) plus those; a minute after the burst it no
 *   longer counts (the unit test: 90 s, the lab: 80 s).  Refaults still count as first
 *   comebacks at the threshold that let them go, so a threshold that costs comebacks shows
 *   at once; later reuses keep the 5 min window (pages that came back may have a period of
 *   minutes).  memtide-sim bench's sim_defaults: no trace went past its budget that was
 *   within it (docs/results.md).
 *   The balloon and the guest's reclaim cannot tell the two populations apart: they read
 *   the estimate at the longer threshold, and hold while the pages that came back stay for
 *   good or the controller steps (vmm_decision.estimate_age_ms, holds_all_takers).
 * Known bias: the loop zeroes the average of log2(1 + r / target), and a noisy r whose log
 * averages to the target's has a higher plain average (Jensen), so a noisy rate settles
 * above the target: 8% with raw interval counts in the test above; with the moving
 * average, which takes most of the noise out first, under 1%.
 *
 * Cost: O(1) per update.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "vmm.h"

/* ======================================================================================
 * Part 6: PID control - the reclaim controller
 * ====================================================================================== */

void vmm_reclaim_config_default(struct vmm_reclaim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->target_refault_per_min = 0.002;
	cfg->min_age_ms = 10 * 1000;
	cfg->max_age_ms = 60 * 60 * 1000;
	cfg->initial_age_ms = 2 * 60 * 1000;
	cfg->smooth_tau_ms = 60 * 1000;
	cfg->reuse_tau_ms = 5 * 60 * 1000;
	cfg->trust_factor = 4;
	cfg->weigh = true;
	cfg->first_window_ms = 60 * 1000;
	cfg->probe = false; /* measured: reclaim_ctl.c, "Probing" */
	cfg->pid = (struct vmm_pid_config){
	    .kp = 0.25, .ki = 0.01, .kd = 0.0, .d_smoothing = 0.2,
	    /* out_min / out_max are set by vmm_reclaim_init from the age limits */
	};
}

/* The threshold for aggressiveness a (octaves below max_age_ms), within the limits. */
static uint64_t age_of(const struct vmm_reclaim_config *c, double a)
{
	double age = (double)c->max_age_ms / exp2(a);
	if (age < (double)c->min_age_ms)
		return c->min_age_ms;
	if (age > (double)c->max_age_ms)
		return c->max_age_ms;
	return (uint64_t)llround(age);
}

int vmm_reclaim_init(struct vmm_reclaim_ctl *ctl, const struct vmm_reclaim_config *cfg)
{
	if (!ctl || !cfg)
		return -EINVAL;
	if (!(cfg->target_refault_per_min > 0.0) || !isfinite(cfg->target_refault_per_min))
		return -EINVAL;
	if (cfg->min_age_ms == 0 || cfg->min_age_ms > cfg->max_age_ms)
		return -EINVAL;
	if (cfg->initial_age_ms < cfg->min_age_ms || cfg->initial_age_ms > cfg->max_age_ms)
		return -EINVAL;
	memset(ctl, 0, sizeof(*ctl));
	ctl->cfg = *cfg;
	struct vmm_pid_config pc = cfg->pid;
	pc.out_min = 0.0;
	pc.out_max = log2((double)cfg->max_age_ms / (double)cfg->min_age_ms);
	vmm_pid_init(&ctl->pid, &pc);
	/* Start at the initial threshold: the integral holds the whole output. */
	ctl->pid.integral = log2((double)cfg->max_age_ms / (double)cfg->initial_age_ms);
	ctl->pid.output = ctl->pid.integral;
	ctl->age_ms = cfg->initial_age_ms;
	ctl->reused_age_ms = cfg->initial_age_ms;
	return 0;
}

/* The least age of the oldest generation's birth, in rounds, once the rule of
 * generations.c ("The layout") first folds the oldest, for 2..16 generations: the rule run
 * for 200,000 regular rounds (tests/unit/test_generations.c runs it again and compares). */
static const uint16_t gens_reach_rounds[VMM_MAX_NR_GENS + 1] = {
    [2] = 1,   [3] = 2,   [4] = 3,   [5] = 5,    [6] = 8,    [7] = 12,   [8] = 21,   [9] = 28,
    [10] = 47, [11] = 76, [12] = 92, [13] = 167, [14] = 238, [15] = 408, [16] = 766,
};

uint64_t vmm_gens_reach_ms(unsigned nr_gens, uint64_t round_ms)
{
	if (nr_gens < VMM_MIN_NR_GENS)
		nr_gens = VMM_MIN_NR_GENS;
	if (nr_gens > VMM_MAX_NR_GENS)
		nr_gens = VMM_MAX_NR_GENS;
	return gens_reach_rounds[nr_gens] * round_ms;
}

void vmm_reclaim_config_fit(struct vmm_reclaim_config *cfg, unsigned nr_gens, uint64_t round_ms)
{
	uint64_t span_ms = vmm_gens_reach_ms(nr_gens, round_ms);

	if (cfg->max_age_ms > span_ms)
		cfg->max_age_ms = span_ms;
	if (cfg->min_age_ms > cfg->max_age_ms)
		cfg->min_age_ms = cfg->max_age_ms;
	if (cfg->initial_age_ms > cfg->max_age_ms || cfg->initial_age_ms < cfg->min_age_ms)
		cfg->initial_age_ms = cfg->max_age_ms;
}

const char *vmm_reclaim_hold_name(enum vmm_reclaim_hold why)
{
	switch (why) {
	case VMM_HOLD_NONE:
		return "none";
	case VMM_HOLD_LEARNING:
		return "learning";
	case VMM_HOLD_TOO_OLD:
		return "reused-past-longest-age";
	case VMM_HOLD_REFAULTS:
		return "refaults-at-longest-age";
	}
	return "?";
}

const char *vmm_reclaim_mode_name(enum vmm_reclaim_mode mode)
{
	switch (mode) {
	case VMM_TAKE_BY_AGE:
		return "by-age";
	case VMM_TAKE_UNREUSED:
		return "unreused";
	case VMM_TAKE_STEP:
		return "step";
	}
	return "?";
}

void vmm_reclaim_observe_first(struct vmm_reclaim_ctl *ctl, const uint64_t *first_hist, bool reuse)
{
	if (!ctl || !first_hist)
		return;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++) {
		if (first_hist[k] < ctl->reuse_first_now[k])
			ctl->reuse_first_last[k] = 0; /* a new guest state */
		ctl->reuse_first_now[k] = first_hist[k];
		if (!reuse)
			ctl->reuse_first_last[k] = first_hist[k];
	}
	ctl->first_fed = true;
}

/* The windows the floors read, in the reuse window's time base: every reuse (all) and the
 * first comebacks (first).  With first comebacks once a page (first_once) and a
 * first_window_ms, the first comebacks are their recent rate (the file comment, "First
 * comebacks are once"), and every reuse is the later reuses of pages that came back (the
 * reuse window less its first comebacks) plus those. */
static void windows(const struct vmm_reclaim_ctl *ctl, double *all, double *first)
{
	bool recent = ctl->first_fed && ctl->first_once && ctl->cfg.first_window_ms &&
		      ctl->first_recent_ms > 0.0;
	double scale = recent ? ctl->reuse_win_ms / ctl->first_recent_ms : 0.0;

	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++) {
		if (!ctl->first_fed) {
			all[k] = first[k] = ctl->reuse_win[k];
		} else if (!recent) {
			all[k] = ctl->reuse_win[k];
			first[k] = ctl->reuse_first_win[k];
		} else {
			double later = ctl->reuse_win[k] - ctl->reuse_first_win[k];
			first[k] = ctl->first_recent[k] * scale;
			all[k] = (later > 0.0 ? later : 0.0) + first[k];
		}
	}
}

double vmm_reclaim_reuse_rate(const struct vmm_reclaim_ctl *ctl, uint64_t age_ms, bool first_only)
{
	double all[VMM_REUSE_BUCKETS], first[VMM_REUSE_BUCKETS];
	const double *win = first_only ? first : all;
	double n = 0.0;

	if (ctl->reuse_win_ms <= 0.0)
		return 0.0;
	windows(ctl, all, first);
	for (unsigned k = vmm_reuse_bucket_of(age_ms); k < VMM_REUSE_BUCKETS; k++)
		n += win[k];
	return n * 60000.0 / ctl->reuse_win_ms;
}

void vmm_reclaim_observe_reuse(struct vmm_reclaim_ctl *ctl, const uint64_t *hist)
{
	if (!ctl || !hist)
		return;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++) {
		if (hist[k] < ctl->reuse_now[k])
			ctl->reuse_last[k] = 0; /* a new guest state: count from zero */
		ctl->reuse_now[k] = hist[k];
	}
}

void vmm_reclaim_skip_reuse(struct vmm_reclaim_ctl *ctl, const uint64_t *hist)
{
	if (!ctl || !hist)
		return;
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
		ctl->reuse_now[k] = ctl->reuse_last[k] = hist[k];
}

/* The lowest bucket whose reuses at or past it fit the allowance, as an age (0 for the
 * first bucket); FLOOR_PAST when even the longest age the generations tell apart does not
 * (the floor lies past max_age_ms). */
#define FLOOR_PAST UINT64_MAX
static uint64_t floor_of(const struct vmm_reclaim_config *c, const double *win, double allowed)
{
	double cost = 0.0;
	unsigned k = VMM_REUSE_BUCKETS;

	/* Reuses a threshold in bucket k would have turned into refaults: those at ages in
	 * bucket k or above. */
	while (k > 0 && cost + win[k - 1] <= allowed)
		cost += win[--k];
	if (k == VMM_REUSE_BUCKETS || vmm_reuse_bucket_ms(k) > c->max_age_ms)
		return FLOOR_PAST;
	return vmm_reuse_bucket_ms(k);
}

/* Fold the interval's growth of one histogram into its window (and into grew, if given). */
static uint64_t fold(uint64_t *now, uint64_t *last, double *win, double decay, double *grew_out)
{
	uint64_t seen = 0;

	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++) {
		uint64_t grew = now[k] - last[k];
		last[k] = now[k];
		win[k] = win[k] * decay + (double)grew;
		seen += grew;
		if (grew_out)
			grew_out[k] = (double)grew;
	}
	return seen;
}

/* The round's first comebacks join the ring, and the recent sums are taken again over the
 * newest rounds that span first_window_ms (all the ring holds, if less). */
static void first_recent_push(struct vmm_reclaim_ctl *ctl, const double *grew, uint64_t dt_ms)
{
	unsigned i = ctl->first_next;
	double ms = 0.0;

	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
		ctl->first_ring[i][k] = (float)grew[k];
	ctl->first_ring_ms[i] = dt_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)dt_ms;
	ctl->first_next = (i + 1) % VMM_FIRST_ROUNDS;
	if (ctl->first_rounds < VMM_FIRST_ROUNDS)
		ctl->first_rounds++;
	memset(ctl->first_recent, 0, sizeof(ctl->first_recent));
	for (unsigned n = 0; n < ctl->first_rounds && ms < (double)ctl->cfg.first_window_ms; n++) {
		unsigned j = (ctl->first_next + VMM_FIRST_ROUNDS - 1 - n) % VMM_FIRST_ROUNDS;
		for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
			ctl->first_recent[k] += (double)ctl->first_ring[j][k];
		ms += (double)ctl->first_ring_ms[j];
	}
	ctl->first_recent_ms = ms;
}

/* Has the guest been watched long enough to vouch for a floor (the file comment,
 * "Holding")?  The shortest threshold that can be applied: the floor, or min_age_ms above
 * it.  A page idle for t can be seen reused only once the guest has been watched for t,
 * whoever chose t: vouching for the floor alone (1 s, 10 s into a run) let memtide-sim
 * evict at the 10 s minimum 10 s after the start, and python3's trace paid it back at 11x
 * the budget. */
static bool vouched(const struct vmm_reclaim_ctl *ctl, uint64_t floor_ms)
{
	const struct vmm_reclaim_config *c = &ctl->cfg;
	uint64_t t = floor_ms > c->min_age_ms ? floor_ms : c->min_age_ms;

	return ctl->watched_ms >= (uint64_t)c->trust_factor * t;
}

/* Reuses at bucket k or past it in win. */
static double cost_from(const double *win, unsigned k)
{
	double cost = 0.0;

	for (; k < VMM_REUSE_BUCKETS; k++)
		cost += win[k];
	return cost;
}

/* The reuse floor (why: the file comment): fold the interval's reuses and refaults into
 * the windows, find the lowest threshold whose predicted refault rate keeps the target, and
 * say whether the windows vouch for it ("Holding").  When even the longest age does not
 * keep it, weigh ("Weighing"): pages that never came back (their first comebacks) and
 * pages that did (their later reuses) each get a floor, the allowance shared: first
 * comebacks spend it first (ctl->floor_ms), the pages that came back get what is left
 * (ctl->reused_floor_ms).  While a floor is not yet vouched for, probe ("Probing").
 * *informed: the window holds reuses the aging hand saw (refaults alone say only that the
 * threshold was too short, nothing about what a shorter one would cost). */
static enum vmm_reclaim_hold reuse_floor(struct vmm_reclaim_ctl *ctl, uint64_t refault_pages,
					 uint64_t resident_pages, uint64_t dt_ms, double target,
					 bool *informed)
{
	const struct vmm_reclaim_config *c = &ctl->cfg;
	double decay = exp(-(double)dt_ms / (double)c->reuse_tau_ms);
	uint64_t seen = fold(ctl->reuse_now, ctl->reuse_last, ctl->reuse_win, decay, NULL);
	double all[VMM_REUSE_BUCKETS], first[VMM_REUSE_BUCKETS], grew[VMM_REUSE_BUCKETS];
	double known[VMM_REUSE_BUCKETS];
	unsigned at = vmm_reuse_bucket_of(ctl->age_ms);

	fold(ctl->reuse_first_now, ctl->reuse_first_last, ctl->reuse_first_win, decay, grew);
	/* Refaults are counted at the threshold that let them go, as first comebacks too:
	 * the threshold applies to the pages that never came back. */
	ctl->reuse_win[at] += (double)refault_pages;
	if (ctl->first_fed) {
		ctl->reuse_first_win[at] += (double)refault_pages;
		grew[at] += (double)refault_pages;
		first_recent_push(ctl, grew, dt_ms);
	}
	ctl->reuse_win_ms = ctl->reuse_win_ms * decay + (double)dt_ms;
	windows(ctl, all, first);
	ctl->reuses_seen = ctl->reuses_seen * decay + (double)seen;
	*informed = ctl->reuses_seen >= 1.0;

	/* The allowance is the target's count over the window. */
	double allowed = target * (double)resident_pages * ctl->reuse_win_ms / 60000.0;
	ctl->floor_all_ms = floor_of(c, all, allowed);
	ctl->floor_first_ms = floor_of(c, first, allowed);
	ctl->mode = VMM_TAKE_BY_AGE;
	ctl->reused_floor_ms = 0; /* one threshold for all */
	ctl->floor_ms = ctl->floor_all_ms;
	ctl->probing = false;
	if (ctl->floor_all_ms == FLOOR_PAST) {
		ctl->floor_ms = c->max_age_ms;
		if (!c->weigh)
			return VMM_HOLD_TOO_OLD; /* even the longest age reuses too often */
		if (ctl->floor_first_ms == FLOOR_PAST) {
			/* Even pages that never came back return past the longest age: a step
			 * (vmm_decide), and the others stay. */
			ctl->mode = VMM_TAKE_STEP;
			ctl->reused_floor_ms = FLOOR_PAST;
		} else {
			double left =
			    allowed - cost_from(first, vmm_reuse_bucket_of(ctl->floor_first_ms));
			for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++)
				known[k] = all[k] > first[k] ? all[k] - first[k] : 0.0;
			uint64_t r = floor_of(c, known, left > 0.0 ? left : 0.0);
			/* Not yet vouched for: the pages that came back stay until it is. */
			ctl->mode = VMM_TAKE_UNREUSED;
			ctl->floor_ms = ctl->floor_first_ms;
			ctl->reused_floor_ms = r != FLOOR_PAST && vouched(ctl, r) ? r : FLOOR_PAST;
		}
	}
	if (!*informed && ctl->watched_ms < c->reuse_tau_ms)
		return VMM_HOLD_LEARNING; /* no reuse seen yet: nothing measured */
	/* A step measures as it goes (vmm_decide): its pages came back past the longest age,
	 * which the guest was watched for. */
	if (ctl->mode == VMM_TAKE_STEP || vouched(ctl, ctl->floor_ms))
		return VMM_HOLD_NONE;
	/* Probing: the first comebacks' floor with a trust_factor-th of the allowance, watched
	 * once as long. */
	uint64_t p = floor_of(c, first, allowed / (c->trust_factor ? c->trust_factor : 1));
	if (!c->weigh || !c->probe || !*informed || p == FLOOR_PAST)
		return VMM_HOLD_LEARNING; /* not watched long enough to see reuses past t */
	if (p < ctl->floor_ms)
		p = ctl->floor_ms;
	if (ctl->watched_ms < (p > c->min_age_ms ? p : c->min_age_ms))
		return VMM_HOLD_LEARNING;
	ctl->probing = true;
	ctl->mode = VMM_TAKE_UNREUSED;
	ctl->floor_ms = p;
	ctl->reused_floor_ms = FLOOR_PAST;
	return VMM_HOLD_NONE;
}

uint64_t vmm_reclaim_update(struct vmm_reclaim_ctl *ctl, uint64_t refault_pages,
			    uint64_t resident_pages, uint64_t dt_ms)
{
	const struct vmm_reclaim_config *c = &ctl->cfg;
	enum vmm_reclaim_hold why = VMM_HOLD_NONE;

	ctl->watched_ms += dt_ms;
	/* No interval, or nothing resident: no rate to measure; hold. */
	if (dt_ms == 0 || resident_pages == 0)
		return ctl->age_ms;
	double minutes = (double)dt_ms / 60000.0;
	double rate = (double)refault_pages / (double)resident_pages / minutes;
	double target = c->target_refault_per_min > 0.0 ? c->target_refault_per_min : 0.002;

	/* The moving average first (why: the file comment, "Bursts"). */
	if (!ctl->primed || c->smooth_tau_ms == 0)
		ctl->rate_per_min = rate;
	else
		ctl->rate_per_min += (rate - ctl->rate_per_min) *
				     (1.0 - exp(-(double)dt_ms / (double)c->smooth_tau_ms));
	ctl->primed = true;
	double m = log2(1.0 + ctl->rate_per_min / target);
	double a = vmm_pid_update(&ctl->pid, 1.0, m, (double)dt_ms / 1000.0);

	ctl->last_rate_per_min = rate;
	if (c->reuse_tau_ms) {
		bool informed;
		why = reuse_floor(ctl, refault_pages, resident_pages, dt_ms, target, &informed);
		double a_floor = ctl->floor_ms > 0
				     ? log2((double)c->max_age_ms / (double)ctl->floor_ms)
				     : ctl->pid.cfg.out_max;
		/* A floor the reuses vouch for, below the PID's threshold, while refaults keep
		 * the target: go down to it at once (the file comment, "Holding"). */
		if (why == VMM_HOLD_NONE && informed && a < a_floor &&
		    ctl->rate_per_min <= target) {
			a = a_floor > ctl->pid.cfg.out_max ? ctl->pid.cfg.out_max : a_floor;
			ctl->pid.integral = a;
			ctl->pid.output = a;
		}
		if (a > a_floor) { /* the floor binds: track it (the file comment) */
			a = a_floor < 0.0 ? 0.0 : a_floor;
			if (ctl->pid.integral > a)
				ctl->pid.integral = a;
			ctl->pid.output = a;
		}
	}
	/* At the longest age and still above the target: nothing shorter is left to try.  A
	 * step or a probe is watched the same way: taking more while the refaults run past the
	 * target would only add to them. */
	if (why == VMM_HOLD_NONE && (a <= 0.0 || ctl->mode == VMM_TAKE_STEP || ctl->probing) &&
	    ctl->rate_per_min > target)
		why = VMM_HOLD_REFAULTS;
	/* The probe doubles each round the refaults keep the target, from 1/64 of the guest. */
	if (ctl->probing && why == VMM_HOLD_NONE) {
		uint64_t first = resident_pages / 64 ? resident_pages / 64 : 1;
		ctl->probe_pages = ctl->probe_pages ? ctl->probe_pages * 2 : first;
		if (ctl->probe_pages > resident_pages)
			ctl->probe_pages = resident_pages;
	} else {
		ctl->probe_pages = 0;
	}
	ctl->hold_why = why;
	ctl->hold = why != VMM_HOLD_NONE;
	ctl->age_ms = age_of(c, a);
	/* The pages that came back: at their own floor when it lies past the threshold, and
	 * not at all while it is past the longest age or not yet vouched for. */
	ctl->reused_age_ms = ctl->reused_floor_ms == FLOOR_PAST   ? UINT64_MAX
			     : ctl->reused_floor_ms > ctl->age_ms ? ctl->reused_floor_ms
								  : ctl->age_ms;
	if (ctl->mode == VMM_TAKE_UNREUSED && ctl->reused_age_ms == ctl->age_ms)
		ctl->mode = VMM_TAKE_BY_AGE;
	return ctl->age_ms;
}
