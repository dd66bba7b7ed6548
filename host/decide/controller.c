// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * controller.c - per-VM balloon target and safety rules (see controller.h for the contract).
 *
 * Terms, in bytes of guest memory (the balloon "target" is the memory the guest keeps, as
 * libvirt's setmem and QMP's balloon command take it):
 *   floor    = policy.min_bytes, the least the guest is ever left with;
 *   ceiling  = policy.max_bytes when set, else the domain's memory (also the safe size);
 *   desired  = wss + headroom * (1 - squeeze) (+ the RAM the guest's kernel holds outside
 *              MemTotal, under return=balloon), clamped to [floor, ceiling], where wss is
 *              libvmm's working set at the reclaim controller's cold age threshold and
 *              squeeze (0..1) is how hard the host arbiter leans on this VM;
 *   step     = max_inflate_step_bytes * (1 + squeeze): the most taken in one interval.
 *
 * The step, in order (docs/operations.md lists the same rules for operators):
 *   1. bounds (a lowered max takes effect at once, with a reclaim of the cut);
 *   2. agent need -> give need + headroom now; the guest took memory back from the balloon
 *      itself (deflate-on-oom: actual rose above the balloon target) -> keep what it took;
 *   3. pressure (PSI, MemAvailable, or with no PSI the major-fault rate) -> give
 *      max(deflate_min, headroom) now;
 *   4. released -> climb toward the ceiling by the host's grant, take nothing;
 *   5. disabled -> keep; 6. stale inputs -> keep;
 *   7. no estimate -> keep; 8. desired above target -> give now;
 *   9. desired below target -> take at most one step, unless within the post-deflate hold,
 *      while the guest's use still grows fast, or while the guest could not free what it
 *      was last asked for and nothing has changed since (steady.h).
 * Steps 2 and 3 come first: whatever else holds (disabled, silent, released), a guest that
 * shows need gets what it calls for.  Steps 4-6 never lower the balloon ("may take" is
 * false): the VM keeps its size.
 * Then the actuators ("return" in controller.h): the balloon follows the target, or, with
 * return=reclaim in force, stays where it is (a cap, rising with the target) while the
 * agent reclaims the guest's use down to the target.
 * Every deflate (2, 3, 8) arms the hold, so a VM that just needed memory is not squeezed
 * again in the next interval (and a VM that keeps refusing steps waits longer each time:
 * arm_hold): the asymmetry that keeps a guest out of its OOM killer (seen
 * here: a balloon inflated to hot set + 250 MiB had the guest OOM-kill its workload 1.3 s
 * later; /work/shared/README.md).
 */
#include "decide/controller.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#define MiB ((uint64_t)1 << 20)

static const char *const reason_names[] = {
    [MTD_CTL_STEADY] = "steady",
    [MTD_CTL_INFLATE] = "inflate",
    [MTD_CTL_GROW] = "grow",
    [MTD_CTL_HOLD_COOLDOWN] = "cooldown",
    [MTD_CTL_NO_ESTIMATE] = "no-estimate",
    [MTD_CTL_PRESSURE] = "pressure",
    [MTD_CTL_NEED] = "need",
    [MTD_CTL_SILENT] = "silent",
    [MTD_CTL_DISABLED] = "disabled",
    [MTD_CTL_RELEASE] = "release",
    [MTD_CTL_GROWING] = "growing",
    [MTD_CTL_FUTILE] = "reclaim-futile",
    [MTD_CTL_REFAULT_HOLD] = "refault-hold",
};

const char *mtd_ctl_reason_name(enum mtd_ctl_reason r)
{
	if ((unsigned)r < sizeof(reason_names) / sizeof(reason_names[0]) && reason_names[r])
		return reason_names[r];
	return "unknown";
}

void mtd_ctl_config_default(struct mtd_ctl_config *cfg)
{
	cfg->interval_ms = 5000;
	cfg->max_inflate_step_bytes = 128 * MiB;
	cfg->deflate_min_bytes = 256 * MiB;
	cfg->psi_some_avg10_high = 10.0;
	cfg->mem_available_low_bytes = 64 * MiB;
	cfg->agent_silence_ms = 30000;
	cfg->hold_after_deflate_ms = 30000;
	cfg->hold_max_ms = 480000;
	cfg->min_change_bytes = 4 * MiB;
	/* ~4 MiB/s read back from disk or swap: a guest that thrashes does this and more;
	 * one that only starts programs stays far under it. */
	cfg->major_faults_high_per_s = 1000.0;
}

int mtd_ctl_config_finish(struct mtd_ctl_config *cfg, char *err, size_t errlen)
{
	/* The agent must be heard within the silence window: at least two intervals.  Raised
	 * before the checks, so that a long interval (60 s over the 30 s default silence) is
	 * accepted rather than refused for a window the daemon would have widened anyway. */
	if (cfg->interval_ms <= 3600 * 1000 && cfg->agent_silence_ms < 2 * cfg->interval_ms)
		cfg->agent_silence_ms = 2 * cfg->interval_ms;
	return mtd_ctl_config_validate(cfg, err, errlen);
}

int mtd_ctl_config_validate(const struct mtd_ctl_config *cfg, char *err, size_t errlen)
{
	if (cfg->interval_ms < 100 || cfg->interval_ms > 3600 * 1000) {
		snprintf(err, errlen, "interval must be between 0.1 s and 3600 s");
		return -EINVAL;
	}
	if (cfg->max_inflate_step_bytes < MiB) {
		snprintf(err, errlen, "max_inflate_step must be at least 1 MiB");
		return -EINVAL;
	}
	if (cfg->deflate_min_bytes < MiB) {
		snprintf(err, errlen, "deflate_min must be at least 1 MiB");
		return -EINVAL;
	}
	if (!(cfg->psi_some_avg10_high > 0.0 && cfg->psi_some_avg10_high <= 100.0)) {
		snprintf(err, errlen, "psi_some_avg10_high must be in (0, 100] percent");
		return -EINVAL;
	}
	if (cfg->agent_silence_ms < cfg->interval_ms) {
		snprintf(err, errlen, "agent_silence must be at least one interval");
		return -EINVAL;
	}
	if (cfg->hold_after_deflate_ms > 24 * 3600 * 1000ULL) {
		snprintf(err, errlen, "hold_after_deflate must be at most 24 h");
		return -EINVAL;
	}
	if (cfg->hold_max_ms > 24 * 3600 * 1000ULL) {
		snprintf(err, errlen, "hold_max must be at most 24 h");
		return -EINVAL;
	}
	if (!(cfg->major_faults_high_per_s > 0.0 && cfg->major_faults_high_per_s <= 1e9)) {
		snprintf(err, errlen, "major_faults_high must be a rate in (0, 1e9] per second");
		return -EINVAL;
	}
	return 0;
}

uint64_t mtd_ctl_avail_since_report(uint64_t reported_avail_bytes, uint64_t balloon_at_report_bytes,
				    uint64_t balloon_now_bytes)
{
	uint64_t taken = balloon_at_report_bytes > balloon_now_bytes
			     ? balloon_at_report_bytes - balloon_now_bytes
			     : 0;

	return reported_avail_bytes > taken ? reported_avail_bytes - taken : 0;
}

uint64_t mtd_ctl_reserved_note(uint64_t kept_bytes, uint64_t actual_bytes, uint64_t mem_total_bytes,
			       uint64_t domain_bytes)
{
	if (actual_bytes <= mem_total_bytes)
		return kept_bytes;
	uint64_t r = actual_bytes - mem_total_bytes;
	if (r > domain_bytes / 4)
		return kept_bytes;
	return kept_bytes && kept_bytes <= r ? kept_bytes : r;
}

uint64_t mtd_ctl_safe_bytes(const struct mtd_policy *policy, uint64_t domain_bytes)
{
	if (policy->max_bytes && policy->max_bytes < domain_bytes)
		return policy->max_bytes;
	return domain_bytes;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static double clamp01(double x)
{
	return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
}

/*
 * The hold after giving memory back.  A deflate within hold_after_deflate_ms of a step down
 * says the guest refused that step: its working set is larger than the estimate says (an
 * agent without MGLRU reports MemTotal - MemAvailable, which misses what sits in zram or
 * will be read again).  Probing again at the same pace would squeeze it every 30 s for
 * ever, so each refusal in a row doubles the hold, up to hold_max_ms, as the kernel defers
 * compaction after each failure (mm/compaction.c, defer_compaction); a deflate long after
 * the last step (the guest grew on its own) starts over.
 */
static void arm_hold(const struct mtd_ctl_config *cfg, const struct mtd_ctl_input *in,
		     struct mtd_ctl_state *st, enum mtd_ctl_reason why, struct mtd_ctl_output *out)
{
	bool answers = why == MTD_CTL_NEED || why == MTD_CTL_PRESSURE || why == MTD_CTL_GROW;
	bool after_take = answers && st->last_take_ms &&
			  in->now_ms - st->last_take_ms < cfg->hold_after_deflate_ms;
	uint64_t hold = cfg->hold_after_deflate_ms;
	bool counted = false;

	/* One refusal per step: a need and then pressure after the same step count once. */
	if (after_take && !st->refused_since_take) {
		st->refused_since_take = true;
		counted = true;
		if (st->refusals < 32)
			st->refusals++;
	} else if (answers && !after_take) {
		st->refusals = 0;
	}
	/* hold_max under hold_after_deflate turns the backoff off (an operator who lengthened
	 * the hold alone keeps a valid file). */
	uint64_t cap = cfg->hold_max_ms > hold ? cfg->hold_max_ms : hold;
	for (unsigned i = 0; i < st->refusals && hold < cap; i++)
		hold *= 2;
	hold = hold < cap ? hold : cap;
	st->hold_until_ms = in->now_ms + hold;
	if (counted && hold > cfg->hold_after_deflate_ms)
		out->backoff_hold_ms = hold;
}

/* Give memory back: raise the target to at least `to` and arm the inflation hold. */
static void deflate_to(const struct mtd_ctl_config *cfg, const struct mtd_ctl_input *in,
		       struct mtd_ctl_state *st, uint64_t to, enum mtd_ctl_reason why,
		       struct mtd_ctl_output *out)
{
	/* Only memory actually given back arms the hold: a VM already at its ceiling when the
	 * agent is not heard yet (start-up) must not wait hold_after_deflate_ms for nothing. */
	if (to > st->target_bytes) {
		st->target_bytes = to;
		arm_hold(cfg, in, st, why, out);
	}
	st->reason = why;
}

/*
 * The actuators for the target just decided.  The balloon goes to the target, or, when
 * return=reclaim is in force ("soft"), stays where it is unless the target rises above it
 * (it is a cap: raising it by itself would let the guest fill memory nobody asked it to
 * have); downwards it moves at most one step per interval (a VM leaving soft mode under host
 * pressure is not inflated by hundreds of MiB at once), upwards at once, never down while
 * the controller may not take, and a lowered ceiling cuts it at once.
 * The reclaim request: with the balloon, what the balloon is about to take, so the guest
 * frees it (into 2 MiB blocks free page reporting hands back) before the balloon's own
 * 4 KiB picks; the balloon takes only what the guest has room for, the rest once freed.
 * In soft mode, the same step the target just took, or what the guest uses beyond the
 * target if that is more (it refilled), one step at most, and only while the
 * controller is taking memory (not within a hold or while giving back).  The step matters
 * when the estimate follows the guest's use (an agent without MGLRU reports no wss: its
 * MemTotal - MemAvailable counts as the working set, so use never exceeds the target, and
 * each freed step is what lowers the next estimate, as the balloon's steps do).
 */
static void actuate(const struct mtd_ctl_config *cfg, const struct mtd_policy *policy,
		    const struct mtd_ctl_input *in, struct mtd_ctl_state *st, bool squeezed,
		    bool may_take, uint64_t step, uint64_t floor, uint64_t ceiling,
		    uint64_t prev_target, struct mtd_ctl_output *out)
{
	/* With host-side eviction (pageout, auto) the balloon is only a cap, even under a
	 * squeeze: the squeeze shortens the cold age instead, and an agentless guest's balloon
	 * could only be met by its OOM killer (/work/shared/README.md). */
	bool hostside =
	    policy->return_via == MTD_RETURN_PAGEOUT || policy->return_via == MTD_RETURN_AUTO;
	bool soft = (hostside ||
		     (policy->return_via == MTD_RETURN_RECLAIM && in->can_reclaim && !squeezed)) &&
		    may_take;
	/* The agent is asked to reclaim under reclaim, and under auto when it can. */
	bool ask_guest = policy->return_via == MTD_RETURN_RECLAIM ||
			 (policy->return_via == MTD_RETURN_AUTO && in->can_reclaim);
	/* Nor while its use grows fast or after a request it could not meet (steady.h): that
	 * holds back the requests of a steady target too, not only of a step. */
	ask_guest = ask_guest && !in->growing && !in->reclaim_futile;
	uint64_t from = clamp_u64(st->balloon_bytes, floor, ceiling);
	/* Soft: the cap stays where it is, rising with the target; never lowered here. */
	uint64_t goal =
	    soft ? (st->target_bytes > from ? st->target_bytes : from) : st->target_bytes;
	uint64_t next = goal >= from ? goal : from - goal > step ? from - step : goal;

	/* Not allowed to take (disabled, silent, released): the balloon keeps its place.
	 * Only a lowered ceiling (from, clamped) cuts it: the operator's explicit bound. */
	if (!may_take && next < from)
		next = from;
	/* With the balloon and a guest that can reclaim, the guest frees first and the balloon
	 * follows into what it has free: a step never leaves the guest less than twice its
	 * MemAvailable mark.  The rest of the step is asked of the guest's reclaim now and
	 * taken by the balloon at a later interval, once freed.  Without this, an estimate
	 * that knows the cold data steps faster than the guest frees it: scenario 3 with the
	 * guest's MGLRU on took 341 MiB in 6 s, MemAvailable fell under its 64 MiB mark, and
	 * memtided gave 256 MiB back and held for 60 s.  Not under a host squeeze: the host's
	 * need comes first.  Nor when the guest's last reclaim freed nothing: a balloon that
	 * then takes its whole step anyway leaves the guest's own kernel to free it at once,
	 * which a guest whose reclaim is slow cannot (a KVM guest on the stand freed 0 of 128
	 * MiB in its deadline; memtided stepped 640 -> 512 MiB, MemAvailable fell to 31 MiB
	 * within 2 s, and the pressure answer took the balloon back to 1024 MiB with a 60 s
	 * hold, twice in 150 s): the step is given back before it returns anything. */
	uint64_t asked = next; /* where the guest is asked to free down to */
	if (!soft && !squeezed && next < from && in->avail_known && in->can_reclaim) {
		uint64_t keep = 2 * cfg->mem_available_low_bytes;
		uint64_t room = in->guest_avail_bytes > keep ? in->guest_avail_bytes - keep : 0;
		/* In whole MiB: MemAvailable comes in KiB, QEMU rounds a target up to its
		 * 4 KiB page, and a target 3 KiB under 602 MiB read "602" in QEMU and "601" in
		 * the log (scenario 5 failed in CI on the mismatch). */
		room &= ~(MiB - 1);
		if (from - next > room)
			next = from - room;
		/* Nor a step under min_change: the balloon is not sent one (mtd_balloon_apply),
		 * so the controller would hold a balloon the guest does not have (scenario 5 on
		 * the KVM stand: 1 MiB of room, "holding at 596 MiB" with QEMU's at 597). */
		if (from - next < cfg->min_change_bytes)
			next = from;
	}
	if (!soft && asked < st->balloon_bytes && !in->reclaim_futile)
		out->reclaim_bytes = st->balloon_bytes - asked;
	if (soft && ask_guest && (st->reason == MTD_CTL_INFLATE || st->reason == MTD_CTL_STEADY)) {
		uint64_t cut = prev_target > st->target_bytes ? prev_target - st->target_bytes : 0;
		uint64_t over = 0;
		if (in->used_known &&
		    in->guest_used_bytes >= st->target_bytes + cfg->min_change_bytes)
			over = in->guest_used_bytes - st->target_bytes;
		uint64_t ask = over > cut ? over : cut;
		out->reclaim_bytes = ask < step ? ask : step;
	}
	/* Never more than the estimate calls cold, when it knows: the rest is the working set,
	 * and reclaiming it swaps out what the guest is about to read (a server on a real guest
	 * fell from 17,000 to 300-900 requests/s for half a minute after each over-large
	 * request).  The balloon still takes its step; this is what the guest frees first. */
	if (in->cold_known && out->reclaim_bytes > in->cold_bytes && st->balloon_bytes <= ceiling)
		out->reclaim_bytes = in->cold_bytes;
	/* A lowered ceiling cuts the balloon in soft mode too: the guest frees the cut first,
	 * asked in full (the operator's bound). */
	if (soft && next < st->balloon_bytes && st->balloon_bytes - next > out->reclaim_bytes)
		out->reclaim_bytes = st->balloon_bytes - next;
	st->balloon_bytes = next;
	out->balloon_bytes = next;
	out->target_bytes = st->target_bytes;
	out->soft = soft;
}

void mtd_ctl_step(const struct mtd_ctl_config *cfg, const struct mtd_policy *policy,
		  const struct mtd_ctl_input *in, struct mtd_ctl_state *st,
		  struct mtd_ctl_output *out)
{
	double squeeze = clamp01(in->squeeze);
	uint64_t prev;
	uint64_t step = (uint64_t)((double)cfg->max_inflate_step_bytes * (1.0 + squeeze));

	/* Step 1: bounds.  A floor above the ceiling (policy min > domain memory) is cut to
	 * the ceiling: the guest cannot have more than it has. */
	uint64_t ceiling = mtd_ctl_safe_bytes(policy, in->domain_bytes);
	uint64_t floor = policy->min_bytes < ceiling ? policy->min_bytes : ceiling;
	if (!st->primed) {
		/* First decision starts from what the guest has now. */
		st->target_bytes = in->actual_bytes ? in->actual_bytes : ceiling;
		st->balloon_bytes = st->target_bytes;
		st->primed = true;
	}
	/* prev is taken before the clamp: an operator who lowers max (or raises min) below (or
	 * above) the current balloon changes it now, in one move, not at the next unrelated
	 * change. */
	prev = st->balloon_bytes;
	uint64_t prev_target = st->target_bytes;
	st->target_bytes = clamp_u64(st->target_bytes, floor, ceiling);
	out->reclaim_bytes = 0;
	out->backoff_hold_ms = 0;
	out->stopped_from_bytes = 0;
	out->state = MTD_VM_ACTIVE;

	/* The refault controller's hold stops every taker, not host pageout's alone: a page
	 * the balloon or the guest's reclaim pushes out comes back just as a paged-out one
	 * does.  The host's own shortage (a squeeze) comes first. */
	bool age_held = in->refault_hold && squeeze <= 0.0;
	bool may_take = policy->enabled && in->inputs_fresh && !in->released && !age_held;
	uint64_t base = in->actual_bytes > st->target_bytes ? in->actual_bytes : st->target_bytes;
	uint64_t headroom = (uint64_t)((double)policy->headroom_bytes * (1.0 - squeeze));

	/* Step 2: the agent says the guest needs memory: give it, plus headroom, now.  A guest
	 * that deflated the balloon itself (its OOM killer was next) keeps what it took: a
	 * target left under it would have the driver inflate again at the next command. */
	if (in->need_bytes || in->guest_took_back) {
		uint64_t to =
		    in->need_bytes ? sat_add(sat_add(base, in->need_bytes), headroom) : base;
		deflate_to(cfg, in, st, clamp_u64(to, floor, ceiling), MTD_CTL_NEED, out);
		out->state = MTD_VM_DEFLATING;
		goto out;
	}
	/* Step 3: guest pressure: PSI some avg10 over its mark, MemAvailable under its, or,
	 * when PSI is not known (no agent), major faults over theirs.  One report is answered
	 * once: the same figures again (an agent that died keeps its last report "fresh") gave
	 * 256 MiB back at every interval, 262 -> 1024 MiB in three (scenario 5). */
	if ((!in->pressure_answered && in->psi_known &&
	     in->psi_some_avg10 > cfg->psi_some_avg10_high) ||
	    (!in->pressure_answered && in->avail_known &&
	     in->guest_avail_bytes < cfg->mem_available_low_bytes) ||
	    (!in->psi_known && in->faults_known &&
	     in->major_faults_per_s > cfg->major_faults_high_per_s)) {
		uint64_t give = policy->headroom_bytes > cfg->deflate_min_bytes
				    ? policy->headroom_bytes
				    : cfg->deflate_min_bytes;
		deflate_to(cfg, in, st, clamp_u64(sat_add(base, give), floor, ceiling),
			   MTD_CTL_PRESSURE, out);
		out->state = MTD_VM_DEFLATING;
		goto out;
	}
	/* Step 4: released by the operator: climb toward the ceiling by what the host can
	 * spare this step; never take.  No hold is armed: nothing is taken while released. */
	if (in->released) {
		uint64_t from =
		    st->balloon_bytes > st->target_bytes ? st->balloon_bytes : st->target_bytes;
		st->target_bytes =
		    clamp_u64(sat_add(from, in->release_grant_bytes), floor, ceiling);
		st->reason = MTD_CTL_RELEASE;
		out->state = MTD_VM_RELEASED;
		goto out;
	}
	/* Step 5: enabled=false: watched, the size kept, never inflated. */
	if (!policy->enabled) {
		st->reason = MTD_CTL_DISABLED;
		out->state = MTD_VM_DISABLED;
		goto out;
	}
	/* Step 6: nobody is telling us about the guest: keep its size, take nothing.  Nor let
	 * an inflation in flight go on taking: the balloon's target was set on reports now
	 * stale, and a slow balloon (4-15 MiB/s on a nested KVM guest) would go on squeezing the
	 * guest toward it for a minute, with nobody watching the guest's pressure.  So when the
	 * inputs go stale (fresh at the last step: not a silence since attach or a resume, where
	 * nothing was decided on them), the balloon and the target hold at the balloon's actual
	 * size.  Raising the target to where the balloon already is gives the guest nothing. */
	if (!in->inputs_fresh) {
		uint64_t at = clamp_u64(in->actual_bytes, floor, ceiling);
		if (st->was_fresh && in->actual_bytes &&
		    at >= st->balloon_bytes + cfg->min_change_bytes) {
			out->stopped_from_bytes = st->balloon_bytes;
			st->balloon_bytes = at;
			if (st->target_bytes < at)
				st->target_bytes = at;
		}
		st->reason = MTD_CTL_SILENT;
		out->state = MTD_VM_AGENT_SILENT;
		goto out;
	}
	/* Step 7: no estimate yet: keep the target, take nothing. */
	if (!in->wss_valid) {
		st->reason = MTD_CTL_NO_ESTIMATE;
		goto out;
	}
	/* The balloon sizes the guest's RAM, while the working set and the headroom are in
	 * MemTotal's terms: under the balloon, the RAM the guest's kernel holds outside MemTotal
	 * comes on top, or the headroom shrinks by it (scenario 5's guest, 63 MiB of 1 GiB: at
	 * working set + 128 MiB its MemAvailable read 56 MiB, under the 64 MiB mark, and memtided
	 * gave 256 MiB back).  Not in the other modes: there the target is compared with the
	 * guest's use, in MemTotal's terms too. */
	uint64_t reserved = policy->return_via == MTD_RETURN_BALLOON ? in->guest_reserved_bytes : 0;
	uint64_t desired =
	    clamp_u64(sat_add(sat_add(in->wss_bytes, headroom), reserved), floor, ceiling);

	/* Step 8: the working set grew past the target: give the difference back now.  By at
	 * least min_change, as a step down must be: an estimate that drifts by less (a guest
	 * whose agent went quiet, seen 0.3 MiB a tick) is noise, and a deflate would arm the
	 * hold and count as the guest refusing the last step. */
	if (desired >= st->target_bytes + cfg->min_change_bytes) {
		deflate_to(cfg, in, st, desired, MTD_CTL_GROW, out);
		goto out;
	}
	/* Step 9: take memory, one bounded step at a time, never within the hold. */
	if (desired + cfg->min_change_bytes > st->target_bytes) {
		st->reason = MTD_CTL_STEADY;
		goto out;
	}
	if (in->now_ms < st->hold_until_ms) {
		st->reason = MTD_CTL_HOLD_COOLDOWN;
		goto out;
	}
	if (age_held) {
		st->reason = MTD_CTL_REFAULT_HOLD;
		goto out;
	}
	/* Not while the guest is still filling its memory: what a server writes first is often
	 * what it reads most, and a step now pushes that out.  Not after a request the guest
	 * could not meet either, until something changes: asking again gets the same answer. */
	if (in->growing) {
		st->reason = MTD_CTL_GROWING;
		goto out;
	}
	if (in->reclaim_futile && policy->return_via == MTD_RETURN_RECLAIM) {
		/* Only where the guest's reclaim is what takes the memory: the balloon still
		 * takes free memory, and under auto host pageout takes what the guest could not
		 * free.  Those only stop asking the guest (actuate). */
		st->reason = MTD_CTL_FUTILE;
		goto out;
	}
	uint64_t next = st->target_bytes - desired > step ? st->target_bytes - step : desired;
	/* The last step stood a whole hold without being given back: the guest accepted it,
	 * and the refusals in a row end. */
	if (st->last_take_ms && !st->refused_since_take &&
	    in->now_ms - st->last_take_ms >= cfg->hold_after_deflate_ms)
		st->refusals = 0;
	st->target_bytes = next;
	st->last_take_ms = in->now_ms;
	st->refused_since_take = false;
	st->reason = MTD_CTL_INFLATE;
out:
	st->target_bytes = clamp_u64(st->target_bytes, floor, ceiling);
	actuate(cfg, policy, in, st, squeeze > 0.0, may_take, step, floor, ceiling, prev_target,
		out);
	out->changed = prev > st->balloon_bytes ? prev - st->balloon_bytes >= cfg->min_change_bytes
						: st->balloon_bytes - prev >= cfg->min_change_bytes;
	/* Any growth is reported, however small: memory handed back is never deferred. */
	if (st->balloon_bytes > prev)
		out->changed = true;
	out->reason = st->reason;
	st->was_fresh = in->inputs_fresh;
	out->floor_bytes = floor;
	out->ceiling_bytes = ceiling;
}

bool mtd_ctl_resume(const struct mtd_ctl_config *cfg, const struct mtd_policy *policy,
		    uint64_t domain_bytes, uint64_t actual_bytes, uint64_t now_ms,
		    const struct mtd_ctl_state *saved, struct mtd_ctl_state *st, char *why,
		    size_t whylen)
{
	uint64_t ceiling = mtd_ctl_safe_bytes(policy, domain_bytes);
	uint64_t floor = policy->min_bytes < ceiling ? policy->min_bytes : ceiling;
	uint64_t balloon = clamp_u64(saved->balloon_bytes, floor, ceiling);
	uint64_t two_steps = 2 * cfg->max_inflate_step_bytes;
	bool taken = true;

	why[0] = '\0';
	/* Rule 1: a balloon this far under actual was never one step of ours. */
	if (actual_bytes && balloon + two_steps < actual_bytes) {
		snprintf(why, whylen,
			 "its balloon target (%" PRIu64 " MiB) is more than two steps under the "
			 "balloon's actual (%" PRIu64 " MiB)",
			 balloon / MiB, actual_bytes / MiB);
		balloon = clamp_u64(actual_bytes, floor, ceiling);
		taken = false;
	}
	*st = (struct mtd_ctl_state){.primed = true, .balloon_bytes = balloon};
	/* Rule 2. */
	st->target_bytes = clamp_u64(saved->target_bytes, floor, balloon);
	if (!taken)
		st->target_bytes = balloon;
	/* Rule 3: times are CLOCK_MONOTONIC of this boot (the caller checked the boot). */
	uint64_t cap = cfg->hold_max_ms > cfg->hold_after_deflate_ms ? cfg->hold_max_ms
								     : cfg->hold_after_deflate_ms;
	if (saved->hold_until_ms > now_ms)
		st->hold_until_ms =
		    saved->hold_until_ms - now_ms > cap ? now_ms + cap : saved->hold_until_ms;
	st->last_take_ms = saved->last_take_ms <= now_ms ? saved->last_take_ms : 0;
	st->refused_since_take = saved->refused_since_take;
	st->refusals = saved->refusals <= 32 ? saved->refusals : 32;
	st->reason = MTD_CTL_STEADY;
	return taken;
}
