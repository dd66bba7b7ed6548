// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_decide.c - stage 3 of a VM's tick: the decision (tick_decide.h).
 *
 * Two steps, in the data flow's order (docs/design.md, "The tick"):
 *   3a on a scheduled tick, libvmm's: the refault signal -> vmm_decide (the same call
 *      memtide-sim's memtide makes) -> the cold age; the working set at it, with the
 *      steady-guest corrections (steady.h);
 *   3b every tick, the controller's: the target (working set + headroom within [floor,
 *      ceiling]) and its safety rules (controller.c: asymmetric steps, pressure, need,
 *      silence), with observe-only and a release on top.
 */
#include "decide/tick_decide.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "decide/return_via.h"
#include "decide/stall_budget.h"

#define MiB ((uint64_t)1 << 20)

/*
 * Idle ages of the published working-set estimate, in intervals: 10 s, 30 s, 2 min and
 * 10 min at the default 5 s.  libvmm's VMM_MAX_NR_GENS generations widen with age and tell
 * apart ages up to an hour at 5 s (vmm_gens_reach_ms; they stopped at 14 intervals when the
 * two oldest always folded, and every resident page looked touched beyond).  Fixed ages in
 * seconds would mean nothing at short intervals.
 */
static const unsigned wss_age_intervals[MTD_WSS_BINS] = {2, 6, 24, 120};

/* ---- 3a: libvmm's decision --------------------------------------------------------------- */

static void decide_age(struct mtd_vm_decide *s, const struct mtd_decide_env *e, struct vmm_guest *g,
		       struct mtd_tick *t)
{
	uint64_t guest_refaults = 0, majfault = 0;
	bool have_guest = false;

	if (!t->aging || !g)
		return;
	if (t->age_rc == 0)
		s->rounds++;

	/* The refault signal, in 4 KiB pages over dt: pages libvmm saw come back after the
	 * balloon took them, plus the guest's own.  The guest's workingset_refault and
	 * pgmajfault mostly count the same events (a refaulting page is read back: a major
	 * fault), so the larger delta is taken, not the sum. */
	if (t->as) {
		guest_refaults = t->as->refault_anon + t->as->refault_file;
		majfault = t->as->pgmajfault;
		have_guest = true;
	} else if (t->bstats_valid) {
		majfault = t->bstats_major_faults;
		have_guest = true;
	}
	uint64_t signal = t->gs.refaults_total - s->last_refaults;
	s->last_refaults = t->gs.refaults_total;
	/* Host-side reclaim through the cgroup: the pages read back from swap for the guest,
	 * weighted up by the time the VM stalled for memory (stall_budget.h). */
	if (t->cg_valid)
		signal += mtd_stall_weigh(t->cg_stall, e->stall_budget, t->cg_refaults);
	if (have_guest) {
		/* The agent's counts (from the link's start) and the balloon's (since the guest's
		 * boot) are not one count: a change of source starts a new base. */
		if (s->have_fault_base && s->fault_base_agent != (t->as != NULL)) {
			s->have_fault_base = false;
			s->fault_base_agent = t->as != NULL;
		}
		if (s->have_fault_base) {
			uint64_t dr = guest_refaults >= s->last_guest_refaults
					  ? guest_refaults - s->last_guest_refaults
					  : 0; /* counters restart with a guest reboot */
			uint64_t dm =
			    majfault >= s->last_majfault ? majfault - s->last_majfault : 0;
			signal += dr > dm ? dr : dm;
		}
		s->last_guest_refaults = guest_refaults;
		s->last_majfault = majfault;
		s->have_fault_base = true;
	}
	e->draft->counters.refaults += signal; /* before PSI weighs it: pages, not a score */
	/* Memory stalls weigh the signal up: at PSI some avg10 = 10%, refaults count double. */
	if (t->as && t->as->has_psi)
		signal = (uint64_t)((double)signal * (1.0 + t->as->psi.some_avg10 / 10.0));

	/* Host arbitration: a squeezed VM tolerates up to 4x its refault target. */
	double squeeze = e->squeeze_permille / 1000.0;
	s->reclaim.cfg.target_refault_per_min =
	    e->policy->target_refault_per_min * (1.0 + 3.0 * squeeze);
	/* The decision (vmm_decide, the same call memtide-sim's memtide makes): the reuses the
	 * aging hand saw keep the threshold above the ages the guest still comes back to
	 * (vmm/reuse.c), unless they are the guest's own reclaim reading pages (echo:
	 * steady.h); the controller sets the cold age from the signal; the gates say whether
	 * host pageout may take anything this round.  A fixed cold age (policy cold_age)
	 * replaces the controller's choice, bounded by the generations kept; the controller
	 * still runs, so its rate and floor stay visible.  A host squeeze takes through a
	 * hold, as it does for the balloon; so does a source without page-level bits, whose
	 * controller has no reuses to vouch with. */
	struct vmm_decide_in din = {
	    .dt_ms = t->dt_ms,
	    .refaults = signal,
	    .resident_pages = t->gs.resident_pages,
	    .watched_ms = t->now_ms - t->first_tick_ms,
	    .reuse_is_echo = t->live_source && mtd_steady_in_reclaim(&s->steady, t->now_ms),
	    .fixed_age_ms = e->policy->cold_age_ms,
	    .hold_overridden = e->squeeze_permille || !t->per_page,
	    .floor_pages = e->policy->min_bytes >> VMM_PAGE_SHIFT,
	    .max_step_pages = e->max_step_bytes >> VMM_PAGE_SHIFT,
	    .now_ms = t->now_ms,
	};
	(void)vmm_decide(g, &s->reclaim, &din, &s->decision); /* args are set */
	/* The balloon and the guest's reclaim cannot leave the pages that came back: their
	 * estimate is read at the age that lets those go too (vmm_decision.estimate_age_ms). */
	s->cold_age_ms = s->decision.estimate_age_ms;
	/* What eviction by age does this round and why, for vm show; logged when its kind
	 * changes (the figures in it move every round). */
	char line[sizeof(e->draft->eviction)];
	vmm_decision_explain(&s->reclaim, &s->decision, line, sizeof(line));
	if (t->per_page && strcmp(line, e->draft->eviction) != 0 &&
	    (s->decision.mode != s->logged_mode || s->decision.gate != s->logged_gate)) {
		mtd_info("%s: eviction by age: %s", e->vm, line);
		s->logged_mode = s->decision.mode;
		s->logged_gate = s->decision.gate;
	}
	snprintf(e->draft->eviction, sizeof(e->draft->eviction), "%s", line);
	if (s->decision.fixed_age_capped && s->cold_age_capped_ms != e->policy->cold_age_ms) {
		mtd_notice("%s: policy cold_age %" PRIu64
			   " s is older than the generations kept can tell apart; using %" PRIu64
			   " s",
			   e->vm, e->policy->cold_age_ms / 1000, s->cold_age_ms / 1000);
		s->cold_age_capped_ms = e->policy->cold_age_ms;
	}

	/* Two aging rounds at least, and with page-level bits a whole cold age of watching,
	 * before the estimate means anything: libvmm vouches for no page idle longer than it
	 * has watched it (vmm_age_begin, step 0), so until then every page not seen yet counts
	 * as used, and an estimate of all of RAM would hand the guest its maximum at every
	 * attach and every restart of memtided.  The agent's amounts need no watch: what they
	 * leave out is what the guest says it does not use (vmm_guest_config.unseen_is_unused).
	 * Longer than a cold age, not as long: generation 0, every page not seen since attach,
	 * was born at the first tick, and vmm_wss counts a generation born exactly the age ago,
	 * so the first reading at equality (a tick on the very millisecond) was all of RAM,
	 * and the peak (steady.h) held it for one more cold age (found by memtide-sim's balloon
	 * model, sim/actuators.c: on the sqlite3 trace nothing was taken until 145 s, the cold
	 * age being 70 s). */
	bool watched = !t->per_page || t->now_ms - t->first_tick_ms > s->cold_age_ms;
	if (s->rounds >= 2 && watched &&
	    vmm_wss(g, t->now_ms, &s->cold_age_ms, 1, &t->wss_bytes) == 0)
		t->wss_valid = true;
	/* Host-side page-level bits, read with three corrections (steady.h; docs/design.md,
	 * Part 7): without the pages the guest's own reclaim read on their way out (echo), the
	 * highest reading of the last cold age (peak), and never more than the guest RAM the
	 * host holds or the guest says it uses (bound).  Pages memtided paged out are evicted,
	 * not in the estimate. */
	if (t->wss_valid && t->live_source) {
		bool youngest;
		uint64_t echo =
		    mtd_steady_echo(&s->steady, &t->gs, t->now_ms, s->cold_age_ms, &youngest);
		t->wss_bytes =
		    mtd_steady_peak(&s->steady, t->wss_bytes > echo ? t->wss_bytes - echo : 0,
				    t->now_ms, s->cold_age_ms, !youngest);
		bool used_known = t->as && t->as->mem_total_bytes >= t->as->mem_free_bytes;
		t->wss_bytes = mtd_steady_bound(
		    t->wss_bytes, e->draft->host_rss_bytes, used_known,
		    used_known ? t->as->mem_total_bytes - t->as->mem_free_bytes : 0);
	}
	for (unsigned i = 0; i < MTD_WSS_BINS; i++)
		e->draft->wss_age_ms[i] = wss_age_intervals[i] * e->ctl->interval_ms;
	(void)vmm_wss(g, t->now_ms, e->draft->wss_age_ms, MTD_WSS_BINS, e->draft->wss_bytes);
}

/* ---- 3b: the controller's --------------------------------------------------------------- */

/* Who wanted a change, for the audit trail (history.h): the guest's own signals, the host
 * arbiter's squeeze, the operator's policy, the daemon's stop, or the controller. */
static const char *change_source(const struct mtd_decide_env *e, enum mtd_ctl_reason r)
{
	switch (r) {
	case MTD_CTL_PRESSURE:
	case MTD_CTL_NEED:
	case MTD_CTL_GROW:
		return "guest";
	case MTD_CTL_SILENT:
		return "agent-silence";
	case MTD_CTL_DISABLED:
	case MTD_CTL_RELEASE:
		return "operator";
	default:
		return e->squeeze_permille ? "arbiter" : "controller";
	}
}

/* What a release may give this step, above the target it has: the host's pace (daemon.c,
 * release_pace.h), counted from the balloon's actual size. */
static uint64_t release_grant(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			      const struct mtd_tick *t)
{
	uint64_t ceiling = mtd_ctl_safe_bytes(e->policy, t->domain_bytes);
	uint64_t have =
	    s->ctl.balloon_bytes > s->ctl.target_bytes ? s->ctl.balloon_bytes : s->ctl.target_bytes;
	bool host_short = false;
	uint64_t g;

	if (!s->ctl.primed || have >= ceiling) {
		s->release_waiting = false;
		return 0;
	}
	uint64_t upto = e->release_upto(e->grant_ctx, (uint64_t)(uintptr_t)s, t->now_ms,
					t->actual_bytes, have, ceiling, &host_short);
	g = upto > have ? upto - have : 0;
	if (!g && host_short && !s->release_waiting)
		mtd_notice("%s: release waiting: the host has nothing to spare above its low mark",
			   e->vm);
	s->release_waiting = !g && host_short;
	return g;
}

/* Which of the controller's pressure signals fired (its step 3), for the log. */
static const char *pressure_why(const struct mtd_ctl_config *c, const struct mtd_ctl_input *in,
				char *buf, size_t len)
{
	if (in->psi_known && in->psi_some_avg10 > c->psi_some_avg10_high)
		snprintf(buf, len, "PSI memory some avg10 %.1f%%, over %.1f%%", in->psi_some_avg10,
			 c->psi_some_avg10_high);
	else if (in->avail_known && in->guest_avail_bytes < c->mem_available_low_bytes)
		snprintf(buf, len, "MemAvailable %" PRIu64 " MiB, under %" PRIu64 " MiB",
			 in->guest_avail_bytes / MiB, c->mem_available_low_bytes / MiB);
	else
		snprintf(buf, len, "major faults %.0f/s, over %.0f/s", in->major_faults_per_s,
			 c->major_faults_high_per_s);
	return buf;
}

/* The guest's MemAvailable as its agent last reported it, less what the balloon took since
 * that report: the balloon steps into the room a report shows, and the next step must not
 * find the same room again.  An agent that dies keeps its last report "fresh" for up to
 * agent_silence; stepping on it, the balloon took 448 -> 267 MiB in four steps of one stale
 * MemAvailable, and the guest met pressure before the silence was said (scenario 5). */
static uint64_t avail_now(const struct mtd_vm_decide *s, const struct mtd_tick *t)
{
	uint64_t now = s->ctl.primed && s->ctl.balloon_bytes < t->actual_bytes
			   ? s->ctl.balloon_bytes
			   : t->actual_bytes;

	return mtd_ctl_avail_since_report(t->as->mem_available_bytes, s->avail_balloon, now);
}

/* Where the working set comes from: the guest's MGLRU, the source's own access bits, or
 * the MemAvailable fallback (which counts every byte in use, so that only free and easily
 * reclaimed memory is ever taken).  In vm show, and in the log when it changes.  True: the
 * guest's use beyond the working set is cold. */
static bool note_estimate(const struct mtd_decide_env *e, const struct mtd_tick *t)
{
	const char *est = !t->have_source ? "none (no source)" : t->estimate;
	struct mtd_vm_status *st = e->draft;

	/* "none yet" is not said: the agent's hello and what follows it are. */
	if (strcmp(est, st->wss_source) != 0 && strncmp(est, "none yet", 8) == 0) {
		snprintf(st->wss_source, sizeof(st->wss_source), "%s", est);
	} else if (strcmp(est, st->wss_source) != 0) {
		snprintf(st->wss_source, sizeof(st->wss_source), "%s", est);
		if (strcmp(est, "MemAvailable fallback") == 0)
			mtd_notice("%s: working set from the %s: the guest's MGLRU reports nothing "
				   "(off, or not built in), so everything the guest uses counts as "
				   "its working set and only free or easily reclaimed memory is "
				   "taken (docs/operations.md, \"Working-set source\")",
				   e->vm, est);
		else
			mtd_notice("%s: working set from %s", e->vm, est);
	}
	return t->estimate_by_age && t->have_source;
}

/* The steady-guest rules' inputs (steady.h), and how much of the guest's use is cold. */
static void steady_inputs(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			  const struct mtd_tick *t, uint64_t used_raw, struct mtd_ctl_input *in)
{
	const struct mtd_ctl_config *c = e->ctl;
	bool by_age = note_estimate(e, t);

	in->growing = mtd_steady_growing(&s->steady, c, in->used_known, used_raw, t->now_ms);
	in->reclaim_futile =
	    in->used_known && mtd_steady_futile(&s->steady, c, used_raw, t->wss_bytes, t->now_ms);
	if (by_age && t->wss_valid && in->used_known) {
		in->cold_known = true;
		in->cold_bytes =
		    in->guest_used_bytes > t->wss_bytes ? in->guest_used_bytes - t->wss_bytes : 0;
	}
}

bool mtd_decide_holds(const struct mtd_vm_decide *s, const struct mtd_policy *p, bool per_page)
{
	return s->reclaim.hold && !p->cold_age_ms && per_page;
}

/* The holds that stop every taker, not host pageout alone: even the longest age the
 * generations tell apart would refault past the budget (reused-past-longest-age,
 * refaults-at-longest-age).  While the controller is only learning, the balloon and the
 * agent go on: their estimate is read at the controller's age, which starts at the longest
 * and comes down only as the reuses vouch for shorter ones, where host pageout would evict
 * by a floor not yet vouched for.  Gating them on learning too held scenario 2 (ept source,
 * the agent reclaiming) for 30-40 s after each reclaim step, its reads having named a
 * longer floor to learn. */
static bool holds_all(const struct mtd_vm_decide *s, const struct mtd_tick *t)
{
	return s->decision.holds_all_takers && t->have_source && t->per_page;
}

const char *mtd_decide_hold_why(const struct mtd_vm_decide *s, char *buf, size_t len)
{
	return vmm_decision_explain(&s->reclaim, &s->decision, buf, len);
}

/* The controller's reason, and why a steady-guest rule holds it back (vm show; the log
 * once when the sentence changes). */
static void note_decision(const struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			  const struct mtd_tick *t, enum mtd_ctl_reason reason)
{
	struct mtd_vm_status *st = e->draft;
	char why[sizeof(st->decision_detail)];

	bool same_reason = strcmp(st->decision, mtd_ctl_reason_name(reason)) == 0;
	snprintf(st->decision, sizeof(st->decision), "%s", mtd_ctl_reason_name(reason));
	mtd_steady_why(&s->steady, e->ctl, reason, why, sizeof(why));
	if (reason == MTD_CTL_NO_ESTIMATE && t->have_guest && t->per_page && s->rounds >= 2)
		snprintf(why, sizeof(why),
			 "watching the guest for one cold age (%" PRIu64 " s) before the first "
			 "estimate: no page is known to be idle for longer than it was watched",
			 s->cold_age_ms / 1000);
	if (reason == MTD_CTL_REFAULT_HOLD) {
		char held[sizeof(why) - 80];
		snprintf(why, sizeof(why),
			 "nothing taken by age by the balloon or the guest's reclaim; host "
			 "pageout: %s",
			 mtd_decide_hold_why(s, held, sizeof(held)));
	}
	/* The growth and the cold age change every tick: said once per stretch, not per figure. */
	bool same = same_reason && (reason == MTD_CTL_GROWING || reason == MTD_CTL_NO_ESTIMATE ||
				    strcmp(why, st->decision_detail) == 0);
	if (!same && why[0])
		mtd_info("%s: %s", e->vm, why);
	snprintf(st->decision_detail, sizeof(st->decision_detail), "%s", why);
}

/* An inflation the silence stopped (controller.c, step 6): vm show says so for as long as
 * the silence lasts, beside the reason. */
static void note_stopped(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			 const struct mtd_ctl_output *out)
{
	struct mtd_vm_status *st = e->draft;

	if (out->stopped_from_bytes) {
		s->stopped_from = out->stopped_from_bytes;
		s->stopped_at = out->balloon_bytes;
	} else if (out->reason != MTD_CTL_SILENT) {
		s->stopped_from = s->stopped_at = 0;
	}
	if (s->stopped_at)
		snprintf(st->decision_detail, sizeof(st->decision_detail),
			 "the balloon was still inflating toward %" PRIu64 " MiB when the guest "
			 "went silent: stopped at %" PRIu64 " MiB, where it was",
			 s->stopped_from / MiB, s->stopped_at / MiB);
}

/* The controller's input from the tick's readings. */
static void controller_input(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			     struct mtd_tick *t)
{
	struct mtd_ctl_input *in = &t->in;

	*in = (struct mtd_ctl_input){
	    .now_ms = t->now_ms,
	    .domain_bytes = t->domain_bytes,
	    .actual_bytes = t->actual_bytes,
	    .wss_valid = t->wss_valid,
	    .wss_bytes = t->wss_bytes,
	    .need_bytes = t->need_bytes,
	    .guest_took_back = t->guest_took_back,
	    .squeeze = e->squeeze_permille / 1000.0,
	    .released = s->released,
	    /* nothing taken while even the longest age would refault past the budget (a
	     * squeeze excepted); see holds_all */
	    .refault_hold = holds_all(s, t),
	};
	if (s->released)
		in->release_grant_bytes = release_grant(s, e, t);
	if (t->age_failed)
		in->inputs_fresh = false; /* the generations are stale (tick_age.c) */
	else if (e->agent_expected)
		in->inputs_fresh = t->agent_fresh;
	else if (t->source_fresh_known)
		in->inputs_fresh = t->source_fresh;
	else
		in->inputs_fresh = t->bstats_fresh;
	if (t->as) {
		in->avail_known = true;
		in->guest_avail_bytes = avail_now(s, t);
		in->guest_reserved_bytes = s->reserved_bytes;
		in->used_known = t->as->mem_total_bytes >= t->as->mem_free_bytes;
		in->guest_used_bytes = t->as->mem_total_bytes - t->as->mem_free_bytes;
		/* Soft return needs an agent that can reclaim and a balloon that reports the
		 * freed pages: without reporting, freed memory never reaches the host. */
		in->can_reclaim =
		    t->agent_caps_known &&
		    (t->agent_caps & (PROTO_CAP_RECLAIM_MEMCG | PROTO_CAP_RECLAIM_MGLRU)) &&
		    t->fpr_on;
		in->psi_known = t->as->has_psi;
		in->psi_some_avg10 = t->as->psi.some_avg10;
		in->pressure_answered = s->pressure_seq && s->pressure_seq == s->avail_seq;
	} else if (t->bstats_fresh) {
		/* No agent to ask: the balloon driver's own figures, while they are fresh (stale
		 * ones would answer the same low MemAvailable again and again). */
		in->avail_known = t->bstats_has_available;
		in->guest_avail_bytes = t->bstats_available_bytes;
		in->faults_known = t->majflt_known;
		in->major_faults_per_s = t->majflt_per_s;
	}
}

/* Observe-only (host-wide or this VM's policy): the controller runs on what the guest
 * really does, and what it would do is shown and logged, never done.  Its targets then
 * stand apart from the balloon; when observing ends they restart from the balloon's actual
 * size, so the first real step is one step from where the guest really is. */
static bool observe_now(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			const struct mtd_tick *t)
{
	bool observe = e->observe_only || e->policy->observe;

	if (s->observing && !observe) {
		/* The controller's own state followed the would-be steps: it restarts from the
		 * real size too, with no hold or refusal that only a would-be step earned. */
		s->ctl.target_bytes = s->ctl.balloon_bytes = t->actual_bytes;
		s->ctl.hold_until_ms = s->ctl.last_take_ms = 0;
		s->ctl.refused_since_take = false;
		s->ctl.refusals = 0;
		e->draft->balloon_target_bytes = t->actual_bytes;
		e->draft->target_bytes = t->actual_bytes;
		mtd_notice("%s: observe-only ends: memtided acts on this VM from now on", e->vm);
	} else if (!s->observing && observe && e->draft->balloon_target_bytes) {
		mtd_notice("%s: observe-only: memtided shows what it would do and changes nothing",
			   e->vm);
	}
	s->observing = observe;
	e->draft->observe = observe;
	return observe;
}

const char *mtd_decide_silence_why(const struct mtd_tick *t, char *buf, size_t len)
{
	uint64_t heard = t->agent_heard_ms;

	if (!heard || heard > t->now_ms)
		snprintf(buf, len, "(its agent never spoke)");
	else if (t->agent_up)
		snprintf(buf, len, "for %" PRIu64 " s", (t->now_ms - heard) / 1000);
	else
		snprintf(buf, len, "for %" PRIu64 " s (its agent disconnected)",
			 (t->now_ms - heard) / 1000);
	return buf;
}

/* Transitions an operator wants to hear of; the first tick's "silent" (the agent has not
 * spoken yet) is not one. */
static void say_transitions(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			    const struct mtd_tick *t, enum mtd_ctl_reason before)
{
	const struct mtd_ctl_output *out = &t->out;
	char why[96];

	if (out->reason == MTD_CTL_PRESSURE && t->as)
		s->pressure_seq = s->avail_seq;
	if (out->reason != before && !t->first) {
		if (out->reason == MTD_CTL_PRESSURE)
			mtd_notice("%s: pressure (%s): giving memory back (target %" PRIu64 " MiB)",
				   e->vm, pressure_why(e->ctl, &t->in, why, sizeof(why)),
				   out->target_bytes / MiB);
		else if (out->reason == MTD_CTL_NEED)
			mtd_notice("%s: %s: giving memory back (target %" PRIu64 " MiB)", e->vm,
				   mtd_ctl_reason_name(out->reason), out->target_bytes / MiB);
		else if (out->reason == MTD_CTL_SILENT && out->stopped_from_bytes)
			mtd_notice(
			    "%s: silent: nothing heard from the guest %s: holding at %" PRIu64
			    " MiB, no inflation until it reports again (the balloon was still "
			    "inflating toward %" PRIu64 " MiB: stopped where it is)",
			    e->vm, mtd_decide_silence_why(t, why, sizeof(why)),
			    out->balloon_bytes / MiB, out->stopped_from_bytes / MiB);
		else if (out->reason == MTD_CTL_SILENT)
			mtd_notice(
			    "%s: silent: nothing heard from the guest %s: holding at %" PRIu64
			    " MiB, no inflation until it reports again",
			    e->vm, mtd_decide_silence_why(t, why, sizeof(why)),
			    out->balloon_bytes / MiB);
	}
	if (out->backoff_hold_ms)
		e->draft->counters.refused_steps++;
	if (out->backoff_hold_ms)
		mtd_notice(
		    "%s: the guest gave back the step just taken (%u in a row): no inflation "
		    "for %" PRIu64 " s",
		    e->vm, s->ctl.refusals, out->backoff_hold_ms / 1000);
}

static void decide_target(struct mtd_vm_decide *s, const struct mtd_decide_env *e,
			  struct mtd_tick *t)
{
	struct mtd_ctl_input *in = &t->in;
	struct mtd_ctl_output *out = &t->out;

	controller_input(s, e, t);
	t->observe = observe_now(s, e, t);

	enum mtd_ctl_reason before = s->ctl.reason;
	t->first = !t->applied_valid;
	t->prev_target = e->draft->target_bytes;
	struct mtd_policy pol = *e->policy;
	pol.return_via = t->mode;
	/* What the host already holds in swap is not the guest's to free (it would read each
	 * page back to do so): return=auto asks the agent only for the rest. */
	uint64_t in_swap = t->hostside ? t->swapped_bytes : 0;
	uint64_t used_raw = in->guest_used_bytes;
	if (in->used_known)
		in->guest_used_bytes =
		    in->guest_used_bytes > in_swap ? in->guest_used_bytes - in_swap : 0;
	steady_inputs(s, e, t, used_raw, in);
	mtd_ctl_step(e->ctl, &pol, in, &s->ctl, out);
	note_decision(s, e, t, out->reason);
	note_stopped(s, e, out);
	e->draft->target_bytes = out->target_bytes;
	e->draft->soft = out->soft;
	/* Set here as well as at publish: the act stage's trail names it this same interval. */
	e->draft->return_in_force = mtd_return_in_force(t->mode, out->soft);
	e->draft->guest_used_bytes = in->used_known ? used_raw : 0;

	/* What the host arbiter could still take here: down to the working set, never below
	 * the floor; nothing without an estimate or while the VM may not be inflated.  Under
	 * host-side eviction the act stage asks the hand instead (act/tick_act.c). */
	t->keep_bytes = t->wss_bytes > out->floor_bytes ? t->wss_bytes : out->floor_bytes;
	t->may_reclaim =
	    t->wss_valid && e->policy->enabled && !s->released && in->inputs_fresh && !t->observe;
	t->reclaimable_bytes = t->may_reclaim && out->target_bytes > t->keep_bytes
				   ? out->target_bytes - t->keep_bytes
				   : 0;
	say_transitions(s, e, t, before);
	t->reason = mtd_ctl_reason_name(out->reason);
	t->who = change_source(e, out->reason);
}

void mtd_tick_decide(struct mtd_vm_decide *s, const struct mtd_decide_env *e, struct vmm_guest *g,
		     struct mtd_tick *t)
{
	decide_age(s, e, g, t);
	t->mode = mtd_return_resolve(e->policy->return_via, e->agent_expected,
				     t->live_source || t->cg_usable);
	t->hostside = t->mode == MTD_RETURN_PAGEOUT || t->mode == MTD_RETURN_AUTO;
	decide_target(s, e, t);
}

/* ---- the operator's release ------------------------------------------------------------- */

bool mtd_decide_release(struct mtd_vm_decide *s, const struct mtd_decide_env *e, int cmd,
			uint64_t domain_bytes, uint64_t now_ms)
{
	if (cmd > 0 && !s->released) {
		s->released = true;
		mtd_notice("%s: released: back to %" PRIu64 " MiB at the host's pace; no "
			   "inflation until memtidectl resume",
			   e->vm, mtd_ctl_safe_bytes(e->policy, domain_bytes) / MiB);
		return true;
	}
	if (cmd < 0 && s->released) {
		s->released = false;
		s->release_waiting = false;
		/* Not at once: the guest has just been given its memory; a hold first. */
		if (s->ctl.hold_until_ms < now_ms + e->ctl->hold_after_deflate_ms)
			s->ctl.hold_until_ms = now_ms + e->ctl->hold_after_deflate_ms;
		mtd_notice("%s: resumed: memtided may take memory again after %" PRIu64 " s", e->vm,
			   e->ctl->hold_after_deflate_ms / 1000);
		return true;
	}
	return false;
}

bool mtd_decide_releasing(const struct mtd_vm_decide *s, const struct mtd_policy *p,
			  uint64_t domain_bytes)
{
	return s->released && s->ctl.primed &&
	       s->ctl.balloon_bytes < mtd_ctl_safe_bytes(p, domain_bytes);
}
