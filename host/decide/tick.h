/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tick.h - one tick of a VM's loop as its stages hand it on: what was read, what the source
 * did, what was decided.  The loop (daemon/vm_loop.c) runs the stages in the data flow's
 * order (docs/design.md, "The tick"), each filling its part of struct mtd_tick:
 *
 *   1 inputs   access/tick_inputs.c  the balloon and its driver's stats; the agent's stats,
 *                                    need and reclaim answers (act/balloon.h, act/agent_link.h)
 *   2 age      access/tick_age.c     on a scheduled tick the source ages libvmm's
 *                                    generations (the refault scan first); what the source
 *                                    says of its figures, every tick
 *   3 decide   decide/tick_decide.c  the refault signal -> libvmm's decision (cold age) and
 *                                    the working set; the controller's target and safety
 *                                    rules (controller.h, steady.h)
 *   4 act      act/tick_act.c        the agent's reclaim, libvmm following the target, the
 *                                    balloon, host-side eviction
 *   5 publish  daemon/tick_publish.c the status snapshot (RCU)
 *   6 save     daemon/tick_save.c    what a restarted memtided needs, when it changed
 *
 * A stage reads what the stages before it wrote here and its own folder's state; it never
 * reaches back into the VM's record.  Lives in decide/ because every stage reads it and
 * decide/ is the bottom of their level (host/README.md).
 */
#ifndef MEMTIDE_HOST_TICK_H
#define MEMTIDE_HOST_TICK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/mtd.h"
#include "decide/controller.h"
#include "proto.h"
#include "vmm.h"

struct mtd_tick {
	uint64_t now_ms;
	uint64_t dt_ms;         /* since the last scheduled tick (scheduled ticks only) */
	bool aging;             /* a scheduled tick: libvmm ages a generation; an out-of-schedule
				 * one (the agent's need, a release's climb, an operator's ask)
				 * only reads inputs and decides */
	uint64_t first_tick_ms; /* when the loop first ran: the oldest age it can vouch for */

	/* 1 inputs */
	uint64_t domain_bytes;     /* the domain's memory */
	uint64_t actual_bytes;     /* the balloon's actual */
	bool applied_valid;        /* the hypervisor took a target since attach (or restart) */
	bool fpr_on;               /* free page reporting known to be on */
	bool bstats_fresh;         /* the balloon's stats moved within agent_silence */
	bool bstats_valid;         /* the balloon driver has reported */
	bool bstats_has_available; /* ... its MemAvailable */
	uint64_t bstats_available_bytes;
	uint64_t bstats_major_faults; /* cumulative */
	bool majflt_known;            /* the driver's major faults per second */
	double majflt_per_s;
	bool guest_took_back;         /* actual rose above the target set, by the guest's doing */
	bool qemu_restarted;          /* a new QEMU process: everything tied to the old one goes */
	const struct proto_stats *as; /* agent stats, when the agent is fresh */
	bool agent_fresh;
	bool agent_up;           /* the agent's link is connected (its handshake done) */
	uint64_t agent_heard_ms; /* when the agent last spoke (0: never) */
	bool agent_caps_known;   /* the agent said hello: agent_caps is its word */
	uint32_t agent_caps;     /* enum proto_cap bits */
	uint64_t need_bytes;     /* the agent's need, and an out-of-schedule tick's */

	/* 2 age */
	bool have_source;        /* a source is in use */
	bool per_page;           /* it reports pages, not amounts */
	bool live_source;        /* it reports the guest's own accesses page by page */
	bool source_fresh_known; /* the source says whether its figures are fresh */
	bool source_fresh;
	const char *estimate;      /* where the working set comes from (the source's words) */
	bool estimate_by_age;      /* the guest's use beyond the working set is cold */
	bool have_guest;           /* libvmm watches the guest */
	int age_rc;                /* the source's aging round: 0, -EAGAIN, -errno */
	bool age_failed;           /* the last round failed: libvmm's figures are stale */
	struct vmm_guest_stats gs; /* libvmm's, after the round */
	bool have_gs;
	uint64_t swapped_bytes; /* what host-side eviction holds in swap now */
	/* host-side reclaim through the VM's cgroup (act/memcg_hand.h), when it has one */
	bool cg_usable;       /* the VM has a cgroup the kernel's reclaim can be driven through */
	bool cg_evicts;       /* ...and it, not the pageout hand, evicts (no live source) */
	bool cg_valid;        /* read this tick */
	uint64_t cg_refaults; /* pages read back from swap since the last reading */
	double cg_stall;      /* PSI some over the last interval, a share of it */

	/* 3 decide */
	bool wss_valid;
	uint64_t wss_bytes;         /* the working set at the cold age, corrected */
	struct mtd_ctl_input in;    /* what the controller was given */
	struct mtd_ctl_output out;  /* what it decided */
	enum mtd_return_via mode;   /* how memory goes back now (policy resolved) */
	bool hostside;              /* host-side eviction in force (pageout, auto) */
	bool observe;               /* observe-only in force: nothing is done */
	bool first;                 /* no target taken yet (as the tick began) */
	uint64_t prev_target;       /* the target before this tick (0: none yet) */
	const char *reason;         /* the controller's reason, for the audit trail */
	const char *who;            /* who wanted the change (tick_decide.c) */
	bool may_reclaim;           /* a squeeze may take from this VM now */
	uint64_t keep_bytes;        /* never below: max(working set, floor) */
	uint64_t reclaimable_bytes; /* what a full squeeze could still take */
};

#endif /* MEMTIDE_HOST_TICK_H */
