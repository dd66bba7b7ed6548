/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * controller.h - the per-VM balloon policy math of memtided (pure: no I/O, no clock).
 *
 * One call per control interval turns what the VM loop measured into a target (the memory
 * the guest should keep), a balloon target and an agent reclaim request.  The working-set estimate and the cold age threshold come from
 * libvmm (the loop runs vmm_reclaim_update and vmm_wss first); this file adds headroom, the
 * domain's bounds and the safety rules, which are asymmetric on purpose:
 *
 *   - inflate (take memory) slowly: at most max_inflate_step_bytes per interval, and not at
 *     all for hold_after_deflate_ms after any deflate; a guest that gives back a step taken
 *     within that time (a need, pressure or growth right after it) has refused it, and each
 *     refusal in a row doubles the hold, up to hold_max_ms, until a step holds for a whole
 *     hold_after_deflate_ms: a guest whose working set the estimate misses is then probed
 *     every few minutes, not squeezed every 30 s;
 *   - deflate (give memory back) at once: when guest PSI, MemAvailable or (with no agent)
 *     the balloon's major-fault rate crosses its threshold, or the agent announces a need,
 *     or the estimate grew; by what that need calls for, never more;
 *   - never below the floor (policy min), never above the ceiling (policy max or the
 *     domain's memory);
 *   - take nothing while nobody can say what the guest needs (inputs stale: agent silent,
 *     stats stale), and stop an inflation still in flight when they go stale: the balloon
 *     target is raised to the balloon's actual size, so a guest is not squeezed on toward a
 *     target decided on reports nobody vouches for any more (a balloon moving at 4-15 MiB/s
 *     under nested KVM kept inflating for a minute after its agent died); while policy says enabled=false, once the operator released the VM,
 *     or while libvmm's refault controller says even the longest age it can tell apart
 *     would refault past the budget (refault_hold; a host squeeze overrides it);
 *     and give nothing back for those reasons alone: the VM keeps the size it has.  Handing
 *     every VM its maximum when memtided loses sight of them (an agent restart, a daemon
 *     restart) is what overcommits a host; a guest that runs short shows it (need, PSI,
 *     MemAvailable, faults) and is answered, and with memtided gone the balloon's
 *     deflate-on-oom lets the guest take pages back itself;
 *   - a released VM (memtidectl release) climbs back to its ceiling by what the host can
 *     spare (release_grant_bytes, from the daemon: a rate limit and the host's MemAvailable
 *     above its low mark), and stays there.
 *
 * Two ways to take memory (policy `return`, mtd.h): with `balloon` the balloon follows the
 * target; with `reclaim` the agent is asked to reclaim what the guest uses beyond the
 * target, at most one step per interval, and the balloon, a cap, stays where it is (rising
 * only with the target) unless the host arbiter squeezes the VM or the guest cannot reclaim
 * (then it is `balloon` again, stepping down from where it is).  With `pageout` and `auto`
 * (host-side eviction, pageout_hand.h) the balloon stays a cap whatever happens; `auto` asks
 * the agent to reclaim as `reclaim` does when it can, `pageout` never asks it.  The caller
 * passes the policy with `return` resolved (mtd_return_resolve).
 *
 * Thread context: the state belongs to one VM loop thread; nothing here is shared.
 */
#ifndef MEMTIDE_HOST_CONTROLLER_H
#define MEMTIDE_HOST_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mtd.h"

/* Daemon-wide safety settings ([controller] in memtided.conf). */
struct mtd_ctl_config {
	uint64_t interval_ms;             /* control interval (default 5000) */
	uint64_t max_inflate_step_bytes;  /* most memory taken per interval (128 MiB) */
	uint64_t deflate_min_bytes;       /* least memory given back on pressure (256 MiB) */
	double psi_some_avg10_high;       /* guest memory PSI some avg10, percent (10.0) */
	uint64_t mem_available_low_bytes; /* guest MemAvailable under this is pressure (64 MiB) */
	uint64_t agent_silence_ms;        /* no agent message for this long: hold (30000) */
	uint64_t hold_after_deflate_ms;   /* no inflation this long after a deflate (30000) */
	uint64_t hold_max_ms;      /* longest hold once the guest keeps refusing steps (480000) */
	uint64_t min_change_bytes; /* ignore target changes smaller than this (4 MiB) */
	double major_faults_high_per_s; /* balloon stats, no agent: guest major faults per
					 * second over this is pressure (1000) */
};

void mtd_ctl_config_default(struct mtd_ctl_config *cfg);
/* Returns 0, or -EINVAL with a sentence in err when a setting is out of its range. */
/* Settings as the daemon runs them: agent_silence raised to two intervals when shorter,
 * then validated.  0 or -EINVAL with a sentence in err. */
int mtd_ctl_config_finish(struct mtd_ctl_config *cfg, char *err, size_t errlen);
int mtd_ctl_config_validate(const struct mtd_ctl_config *cfg, char *err, size_t errlen);

/* Why the target is what it is; named for logs and `memtidectl vm show`. */
enum mtd_ctl_reason {
	MTD_CTL_STEADY = 0,    /* target already where the estimate puts it */
	MTD_CTL_INFLATE,       /* stepping down toward working set + headroom */
	MTD_CTL_GROW,          /* estimate rose above the target: given back at once */
	MTD_CTL_HOLD_COOLDOWN, /* would inflate, but a deflate happened too recently */
	MTD_CTL_NO_ESTIMATE,   /* no working-set estimate yet: target kept */
	MTD_CTL_PRESSURE,      /* guest PSI or MemAvailable crossed its threshold */
	MTD_CTL_NEED,          /* the agent announced it needs memory */
	MTD_CTL_SILENT,        /* inputs stale (agent silent): size kept, nothing taken */
	MTD_CTL_DISABLED,      /* policy enabled=false: size kept, never inflated */
	MTD_CTL_RELEASE,       /* released by the operator: back to the ceiling at the host's
				* pace, never inflated */
	MTD_CTL_GROWING,       /* the guest's use still grows fast: no step taken (steady.h) */
	MTD_CTL_FUTILE,        /* the guest freed ~nothing when last asked and nothing changed
				* since: no step taken, nothing asked (steady.h) */
	MTD_CTL_REFAULT_HOLD,  /* even the longest cold age refaults past the budget (libvmm's
				* reclaim hold): no step taken, nothing asked */
};
const char *mtd_ctl_reason_name(enum mtd_ctl_reason r);

/* One interval's measurements. */
struct mtd_ctl_input {
	uint64_t now_ms;       /* CLOCK_MONOTONIC */
	uint64_t domain_bytes; /* the domain's memory: the balloon's upper bound */
	uint64_t actual_bytes; /* balloon actual: memory the guest has now */
	bool wss_valid;        /* libvmm has an estimate (at least two aging rounds) */
	uint64_t wss_bytes;    /* working set at the cold age threshold */
	bool inputs_fresh;     /* agent (or balloon stats) heard within agent_silence_ms */
	bool avail_known;      /* guest MemAvailable known this interval */
	uint64_t guest_avail_bytes;
	bool psi_known;            /* guest memory PSI known this interval */
	double psi_some_avg10;     /* percent */
	bool pressure_answered;    /* the PSI and MemAvailable above come from a report already
				    * answered with a deflate: not pressure again (a dead agent's
				    * last report stays fresh for agent_silence) */
	uint64_t need_bytes;       /* agent's announced need since the last step (0: none) */
	bool guest_took_back;      /* the balloon's actual rose above the target by itself: the
				    * guest deflated it (deflate-on-oom) */
	double squeeze;            /* host arbiter, 0..1: share of headroom taken away */
	bool used_known;           /* guest_used_bytes known this interval (agent stats) */
	uint64_t guest_used_bytes; /* MemTotal - MemFree: what reclaim can bring down */
	bool can_reclaim;          /* agent ready with a reclaim method, free page reporting on */
	bool faults_known;         /* the guest's major-fault rate known (fresh balloon stats) */
	double major_faults_per_s; /* pgmajfault per second over the last stats period */
	bool released;             /* memtidectl release: climb to the ceiling, take nothing */
	uint64_t release_grant_bytes;  /* what the host lets a release give this step */
	bool growing;                  /* the guest's use grows fast (steady.h) */
	bool reclaim_futile;           /* the last reclaim freed ~nothing, nothing changed since */
	bool cold_known;               /* cold_bytes is known: the working set comes from page ages
				       * (the guest's MGLRU or access bits), not from its use */
	uint64_t cold_bytes;           /* the guest's use beyond the working set: no reclaim request
				       * asks for more (a lowered ceiling excepted) */
	uint64_t guest_reserved_bytes; /* the guest RAM its kernel holds outside MemTotal (its
					* memmap and image): under return=balloon the target
					* adds it, as the balloon sizes RAM (0: unknown) */
	bool refault_hold;             /* libvmm's reclaim controller holds because even its
				       * longest age refaults past the budget: nothing is taken by
				       * age - by the balloon, the agent or host pageout - unless
				       * the host squeezes the VM */
};

struct mtd_ctl_state {
	bool primed;             /* target_bytes holds a decision */
	uint64_t target_bytes;   /* memory the guest should keep */
	uint64_t balloon_bytes;  /* current balloon target (= target_bytes unless soft) */
	uint64_t hold_until_ms;  /* no inflation before this (after a deflate) */
	uint64_t last_take_ms;   /* when the target last stepped down (0: never) */
	bool refused_since_take; /* a deflate followed the last step down */
	unsigned refusals;       /* steps given back at once, in a row */
	enum mtd_ctl_reason reason;
	bool was_fresh; /* the last step's inputs were fresh: a silence now is news
				  * (not after a resume, nor before the guest first spoke) */
};

struct mtd_ctl_output {
	uint64_t target_bytes;  /* memory the guest should keep */
	uint64_t balloon_bytes; /* balloon target to set */
	bool changed;           /* balloon differs from the previous by >= min_change_bytes */
	bool soft;              /* reclaim, pageout or auto in force: the balloon is only a cap */
	uint64_t reclaim_bytes; /* ask the agent to reclaim this much first (0: none) */
	enum mtd_ctl_reason reason;
	enum mtd_vm_state state;             /* ACTIVE, HOLD, DEFLATING, DISABLED or RELEASED */
	uint64_t floor_bytes, ceiling_bytes; /* the bounds used */
	uint64_t backoff_hold_ms;    /* a step refused now armed a longer hold, this long (0: no) */
	uint64_t stopped_from_bytes; /* the inputs went stale with an inflation in flight: the
				      * balloon target it was heading for (0: none); the balloon
				      * and the target now hold at its actual size */
};

/*
 * One control step.  policy gives the bounds and headroom, in the measurements, st the
 * VM's controller state (updated).  Never returns a target or balloon outside [floor,
 * ceiling], never lowers either, nor asks to reclaim, by more than max_inflate_step_bytes
 * (scaled up to 2x by squeeze) in one step; a lowered ceiling cuts both at once.
 */
void mtd_ctl_step(const struct mtd_ctl_config *cfg, const struct mtd_policy *policy,
		  const struct mtd_ctl_input *in, struct mtd_ctl_state *st,
		  struct mtd_ctl_output *out);

/* The ceiling of a VM: policy max, or the domain's memory (what a release restores). */
uint64_t mtd_ctl_safe_bytes(const struct mtd_policy *policy, uint64_t domain_bytes);

/*
 * The guest's MemAvailable now, from a report that may be older than the balloon's last
 * steps: the reported figure less what the balloon took since (balloon sizes are the memory
 * the guest keeps, so a lower balloon_now_bytes means more taken).  The input's
 * guest_avail_bytes, so that the balloon steps into the room one report shows once.
 */
uint64_t mtd_ctl_avail_since_report(uint64_t reported_avail_bytes, uint64_t balloon_at_report_bytes,
				    uint64_t balloon_now_bytes);

/*
 * The RAM the guest's kernel holds outside MemTotal (input guest_reserved_bytes), from one
 * reading taken while the balloon stood still: its actual size less the agent's MemTotal
 * (net of the balloon).  Returns the figure to keep: the least believable reading so far
 * (kept_bytes 0: none yet).  A reading over a quarter of the domain is not believed.
 */
uint64_t mtd_ctl_reserved_note(uint64_t kept_bytes, uint64_t actual_bytes, uint64_t mem_total_bytes,
			       uint64_t domain_bytes);

/*
 * Resume a VM's controller from the state a previous memtided saved (a restart, an
 * upgrade, kill -9): saved holds its target, balloon target, hold and refusals.  Nothing
 * in it is trusted beyond the rules the controller keeps anyway:
 *   1. the balloon within [floor, ceiling]; a balloon more than two inflate steps under the
 *      balloon's actual (actual_bytes, 0: unknown) is a step this controller never takes,
 *      so the VM resumes from its actual size instead (false is returned, why says so);
 *   2. the target within [floor, balloon];
 *   3. the hold at most hold_max_ms from now_ms, the last step not in the future, the
 *      refusals at most 32.
 * st is overwritten and primed.  Returns true when the saved balloon was taken.
 */
bool mtd_ctl_resume(const struct mtd_ctl_config *cfg, const struct mtd_policy *policy,
		    uint64_t domain_bytes, uint64_t actual_bytes, uint64_t now_ms,
		    const struct mtd_ctl_state *saved, struct mtd_ctl_state *st, char *why,
		    size_t whylen);

#endif /* MEMTIDE_HOST_CONTROLLER_H */
