/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tick_decide.h - stage 3 of a VM's tick (tick.h): the decision.  On a scheduled tick the
 * refault signal drives libvmm's reclaim controller (vmm_decide: the cold age, and whether
 * host pageout may take anything), and the working set is read at that age with the
 * steady-guest corrections (steady.h); every tick the controller turns it into a target
 * and its safety rules (controller.h).
 *
 * It applies the pure rules of this folder to one VM: no I/O but the log, which says what
 * changed (a pressure, a silence, a hold, observe-only beginning or ending).  What it
 * decided goes in the tick for the act stage (act/tick_act.c) and the status.
 */
#ifndef MEMTIDE_HOST_TICK_DECIDE_H
#define MEMTIDE_HOST_TICK_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mtd.h"
#include "decide/controller.h"
#include "decide/steady.h"
#include "decide/tick.h"
#include "vmm.h"

/* One VM's decision state, kept across ticks (loop thread only). */
struct mtd_vm_decide {
	struct mtd_ctl_state ctl;       /* the controller's (controller.h) */
	struct mtd_steady steady;       /* the steady-guest rules' (steady.h) */
	struct vmm_reclaim_ctl reclaim; /* libvmm's reclaim controller */
	struct vmm_decision decision;   /* the last round's (vmm_decide): host pageout acts on it */
	uint64_t cold_age_ms;
	uint64_t cold_age_capped_ms; /* policy cold_age last said to be beyond the generations */
	enum vmm_reclaim_mode logged_mode; /* eviction by age as the log last said it */
	enum vmm_decide_gate logged_gate;
	uint64_t rounds;              /* aging rounds done */
	uint64_t last_refaults;       /* libvmm refaults_total at the last round */
	uint64_t last_guest_refaults; /* agent workingset_refault (pages) at the last round */
	uint64_t last_majfault;       /* pgmajfault at the last round */
	bool have_fault_base;
	bool fault_base_agent;   /* the base is the agent's counts (else the balloon's stats) */
	bool released;           /* memtidectl release in force */
	bool release_waiting;    /* the host had nothing to spare at the last release step */
	bool observing;          /* observe-only was in force at the last tick */
	uint64_t avail_seq;      /* the agent stats report the balloon level below goes with */
	uint64_t avail_balloon;  /* the balloon's actual size when that report came */
	uint64_t pressure_seq;   /* the agent stats report last answered as pressure (0: none) */
	uint64_t reserved_bytes; /* guest RAM outside its MemTotal, least read (0: unknown) */
	uint64_t reclaim_seen;   /* agent reclaim replies already noted */
	uint64_t stopped_from;   /* this silence stopped an inflation in flight heading here */
	uint64_t stopped_at;     /* ... at the balloon's actual size then (0: none stopped) */
};

/* What the decision needs of its VM and the daemon, besides the tick. */
struct mtd_decide_env {
	const char *vm;                   /* the VM's name, for the log */
	const struct mtd_ctl_config *ctl; /* [controller] */
	const struct mtd_policy *policy;
	bool observe_only;         /* [daemon] observe_only */
	bool agent_expected;       /* the VM has an agent channel */
	uint64_t max_step_bytes;   /* [pageout] max_step: host pageout's step at most */
	double stall_budget;       /* [pageout] stall_budget (stall_budget.h) */
	unsigned squeeze_permille; /* the host arbiter's squeeze now, 0..1000 */
	struct mtd_vm_status *draft;
	/* How high a released VM's balloon target may go now, counted from the balloon's
	 * actual size (release_pace.h, the daemon's pace for every VM); key names the VM;
	 * *host_short when the host has nothing to spare above its low mark. */
	uint64_t (*release_upto)(void *ctx, uint64_t key, uint64_t now_ms, uint64_t actual_bytes,
				 uint64_t target_bytes, uint64_t ceiling_bytes, bool *host_short);
	void *grant_ctx;
};

/* Stage 3.  g: libvmm's guest (NULL: none). */
void mtd_tick_decide(struct mtd_vm_decide *s, const struct mtd_decide_env *e, struct vmm_guest *g,
		     struct mtd_tick *t);

/* libvmm's reclaim controller takes nothing by age for now (vmm/reclaim_ctl.c, "Holding"):
 * only page-level sources evict by age; policy cold_age fixes the age by hand and bypasses
 * the controller. */
bool mtd_decide_holds(const struct mtd_vm_decide *s, const struct mtd_policy *p, bool per_page);
/* Why it holds, in words for host pageout's state and the log. */
const char *mtd_decide_hold_why(const struct mtd_vm_decide *s, char *buf, size_t len);
/* How long the agent has been silent, in words for the "silent" line: the time since it last
 * spoke (t->agent_heard_ms), and that its link is down when it is.  Never the configured
 * agent_silence: a disconnect makes the agent stale at once (when QEMU exits it comes in the
 * same tick), and the line once claimed 30 s of silence there. */
const char *mtd_decide_silence_why(const struct mtd_tick *t, char *buf, size_t len);

/* The operator's release (cmd > 0) or resume (cmd < 0): true when it changed something a
 * tick should act on now.  A resume holds inflation for hold_after_deflate first: the guest
 * has just been given its memory. */
bool mtd_decide_release(struct mtd_vm_decide *s, const struct mtd_decide_env *e, int cmd,
			uint64_t domain_bytes, uint64_t now_ms);
/* A release still climbing toward the ceiling. */
bool mtd_decide_releasing(const struct mtd_vm_decide *s, const struct mtd_policy *p,
			  uint64_t domain_bytes);

#endif /* MEMTIDE_HOST_TICK_DECIDE_H */
