/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memcg_hand.h - host-side eviction through the VM's memory cgroup: the kernel's own reclaim
 * chooses the pages, memtided says how much, how old, and when to stop.
 *
 * For a VM with no page-level access source memtided can read - a KVM guest on a stock
 * kernel: its accessed bits live in KVM's nested page tables, and Debian 12's 6.1 has
 * neither DAMON nor idle page tracking - the host kernel still knows which pages the guest
 * touched at the moment it evicts: reclaim's reverse-map walk asks KVM through the MMU
 * notifier (clear_flush_young), keeps what the guest used and evicts the rest.  This hand
 * drives that reclaim for one VM:
 *
 *   MGLRU on (/sys/kernel/mm/lru_gen/enabled: the operator's setting, host-wide; memtided
 *   never turns it on): lru_gen's '-' evicts from the oldest generations only, so a page
 *   goes only if it sat in a generation whose successor was born the cold age ago or
 *   earlier and the guest has not touched it since it was put there; memtided ages the
 *   cgroup ('+') so that generations are born far enough apart for the cold age the
 *   reclaim controller chose (vmm_decide).  A page eviction finds used moves to the
 *   youngest generation: the generations say when the kernel last found each page used.
 *   MGLRU off (the classic LRU): memory.reclaim, which has no ages to be told; it takes
 *   while the controller's cold age is below its longest, that is while refaults stay
 *   within their budget, and holds when they reach it.
 *
 * Each interval it takes at most the decision's take_pages, in writes of [pageout] step
 * (8 MiB) paced by the duty cycle (decide/duty.h), one VM at a time across the host
 * (turns), within a grant of the host's swap (act/swap_share.h: the one budget every VM's
 * hand takes from, as the pageout hand does; the kernel reclaims in batches, so a write may
 * go a little past what it asked, which the reserve covers); it holds while the VM's stall
 * is over its budget (decide/stall_budget.h) and once the compressed pool stops saving what
 * eviction takes (decide/pool_worth.h).  Nothing it writes stays behind: it sets no limit on
 * the cgroup.
 *
 * What it reads each interval (mtd_memcg_hand_feedback), for the tick's other stages: the
 * cgroup's figures (memory.current, memory.stat, memory.pressure, memory.swap.current), the
 * generations, and the refaults - page by page from QEMU's pagemap when the guest RAM map
 * could be read (the pages the kernel sent to swap are adopted after each step, and a page
 * of them present again was read back for the guest: act/pageout.h), else the cgroup's major
 * faults (measured on the stand: 3-30% more than the pages that came back).
 *
 * Whether the kernel's aging sees the guest is tested on the VM (decide/aging_sight.h) and
 * shown; so is the mechanism in force.
 *
 * Once per hand (each attach, and after QEMU restarts), at the first step where eviction is in force (not observe-only,
 * return=pageout or auto) and QEMU is not reading all of guest memory itself, the hand
 * resets the guest's access history (act/access_reset.h): otherwise the accessed bits the
 * guest set before memtided came make the first eviction pass keep everything.  Eviction
 * then waits a cold age from the reset, so what it takes went untouched that long.
 *
 * Thread context: one hand belongs to one VM loop.
 */
#ifndef MEMTIDE_HOST_MEMCG_HAND_H
#define MEMTIDE_HOST_MEMCG_HAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/pageout_hand.h"
#include "base/mtd.h"
#include "decide/return_via.h"

struct mtd_memjob;
struct mtd_turns;
struct vmm_decision;

struct mtd_memcg_hand_env {
	const char *vm_name;
	int qemu_pid; /* 0: unknown (no hand) */
	mtd_qmp_fn qmp;
	void *qmp_ctx;
	bool may_move;            /* plain-QEMU mode: QEMU may be moved into a cgroup of
					* its own (libvirt owns its domains' cgroups) */
	struct mtd_turns *turns;  /* one VM's reclaim at a time (NULL: no turns) */
	const char *proc_root;    /* NULL: /proc */
	const char *sys_root;     /* NULL: /sys */
	const char *cg_root;      /* NULL: the cgroup2 mount */
	const char *lru_gen_path; /* NULL: /sys/kernel/debug/lru_gen */
	/* The host's swap, one budget for every VM's hand: as mtd_hand_env's (pageout_hand.h;
	 * NULL: the hand reads the swap itself, as the only writer). */
	int (*swap_take)(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
			 struct mtd_swap_grant *out);
	void (*swap_done)(void *ctx, uint64_t granted_bytes);
	void *swap_ctx;
	/* QEMU's whole-memory operations (balloon.h; NULL: not known): the access history is
	 * not reset while one is under way */
	int (*memjob)(void *ctx, struct mtd_memjob *out);
	void *memjob_ctx;
};

struct mtd_memcg_hand;

/* A hand for one VM: finds its cgroup (moving QEMU when it must and may).  *out is NULL when
 * the VM has no cgroup it can use (the reason is logged once); 0, or -ENOMEM. */
int mtd_memcg_hand_new(const struct mtd_pageout_config *cfg, const struct mtd_memcg_hand_env *env,
		       struct mtd_memcg_hand **out, char *why, size_t whylen);
/* Let go: nothing to undo on the cgroup; a cgroup memtided made is removed once QEMU left it. */
void mtd_memcg_hand_free(struct mtd_memcg_hand *h);

/* What the hand read at the start of a scheduled tick. */
struct mtd_memcg_reading {
	bool valid;
	bool mglru;              /* MGLRU on: the generations are read */
	uint64_t resident_bytes; /* the cgroup's anonymous memory (guest RAM and QEMU's own) */
	uint64_t young_bytes;    /* of it, put in its generation within the cold age (MGLRU);
				   * all of it with the classic LRU */
	uint64_t refaults;       /* pages read back from swap since the last reading */
	bool refaults_exact;     /* page by page (pagemap); else the cgroup's major faults */
	double stall;            /* PSI some over the last interval, a share of it */
	uint64_t swapped_bytes;  /* the cgroup's memory.swap.current */
};

/* Step 2a: read the cgroup and count the refaults.  now_ms: the tick's clock. */
void mtd_memcg_hand_feedback(struct mtd_memcg_hand *h, uint64_t now_ms,
			     struct mtd_memcg_reading *out);

/* Step 5b's inputs (as the pageout hand's, mtd_hand_input). */
struct mtd_memcg_input {
	enum mtd_return_via mode;
	bool may_take;
	bool may_age; /* lru_gen '+' on the cgroup's spacing: all but observe-only */
	const char *why_not;
	bool agent_giving; /* return=auto: the guest is still freeing what its agent was asked */
	const struct vmm_decision *decision;
	const char *hold_why;
	uint64_t max_age_ms; /* the reclaim controller's longest cold age */
	uint64_t interval_ms;
	uint64_t now_ms;
};

/* Step 5b: evict. */
void mtd_memcg_hand_step(struct mtd_memcg_hand *h, const struct mtd_memcg_input *in);

/* Step 6: st->pageout and st->memcg, and the resident drop host-side reclaim made, net of
 * the pool, into st->returned_bytes / saved_bytes (as mtd_hand_publish). */
void mtd_memcg_hand_publish(const struct mtd_memcg_hand *h, struct mtd_vm_status *st);

/* What a full squeeze could still take, net of the pool and within the room in swap. */
uint64_t mtd_memcg_hand_reclaimable(const struct mtd_memcg_hand *h, uint64_t cold_resident_bytes);

/* The guest memory the cgroup holds in swap now (bytes). */
uint64_t mtd_memcg_hand_swapped_bytes(const struct mtd_memcg_hand *h);

/* The working set's origin, for the source (access/source_memcg.c) and vm show: "host
 * reclaim (what eviction keeps)" with blind aging, "host MGLRU" where aging sees the guest,
 * "classic LRU (resident)" with MGLRU off. */
const char *mtd_memcg_hand_estimate(const struct mtd_memcg_hand *h);
/* The last reading's working set (young_bytes) and whether the cgroup answered it. */
bool mtd_memcg_hand_young(const struct mtd_memcg_hand *h, uint64_t *young_bytes, bool *by_age);

/* One line about the cgroup and what the kernel's aging sees, for the source's detail. */
int mtd_memcg_hand_describe(const struct mtd_memcg_hand *h, char *buf, size_t len);

#endif /* MEMTIDE_HOST_MEMCG_HAND_H */
