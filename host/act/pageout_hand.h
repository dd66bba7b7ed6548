/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pageout_hand.h - host-side eviction for one VM (policy return=pageout, or auto): libvmm's
 * eviction hand chooses the cold runs, the pageout actuator (pageout.h) sends them to host
 * swap, and the pages that come back are refaults, page by page.
 *
 * It adds two steps to a VM's tick (access/tick_age.c, act/tick_act.c; docs/design.md, "Host-side
 * eviction"), in data-flow order:
 *
 *   Step 2a feedback, before the source ages the generations: the refault scan.  A page read
 *           back from swap for the guest is a refault (vmm_refault: libvmm records the
 *           generation distance and tier it was evicted with, and the reclaim controller
 *           sees it in the next refault count, as the policy lab models it); a page that
 *           came back without a read (khugepaged's collapse, or an empty page the guest
 *           used) is restored (vmm_restore).  Pagemap is the exact source: the ept source's
 *           accessed bit misses instruction fetches and device DMA, and QEMU's major-fault
 *           count says neither which page nor which generation (measured: docs/design.md).
 *   Step 5b eviction, after the controller: as many pages as the round's decision allows
 *           (vmm_decide: watched for the cold age, the controller not holding, down to the
 *           policy's floor, at most max_step; sim/policy_memtide.c acts on the same call)
 *           from the generations past the cold age, within the room left in host swap; the
 *           pages that did not go (pageout.h says why) go back to the generation they left
 *           (vmm_put_back: not used, so not young), their eviction uncounted; those the
 *           kernel kept are tried again once a cold age has passed.
 *
 * What the host gets back is the guest RAM mapping's resident drop minus the compressed
 * pool's growth (swap_stat.h); both are published.  Nothing the guest needs is discarded:
 * pages go to swap, never away (pageout.h).  On detach, exit or opt-out the hand stops
 * evicting; pages already in swap stay there and come back as the guest touches them,
 * which the kernel does with or without memtided.
 *
 * Thread context: one hand belongs to one VM loop.
 */
#ifndef MEMTIDE_HOST_PAGEOUT_HAND_H
#define MEMTIDE_HOST_PAGEOUT_HAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/balloon.h"
#include "act/ram_layout.h"
#include "act/swap_stat.h"
#include "base/mtd.h"
#include "decide/return_via.h"

struct vmm_guest;
struct vmm_pt;
struct vmm_run;

/* [pageout] in memtided.conf. */
struct mtd_pageout_config {
	uint64_t swap_reserve_bytes; /* free swap left for everyone else (64 MiB) */
	uint64_t max_step_bytes;     /* most guest memory sent out per interval (1 GiB) */
	uint64_t requery_ms;         /* ask QEMU for the whole layout again this often (60 s) */
	/* Host-side reclaim through the VM's cgroup (memcg_hand.h): */
	uint64_t step_bytes; /* one write to the kernel (8 MiB) */
	double duty;         /* share of the wall clock its writes may take (0.25, duty.h) */
	double stall_budget; /* share of the wall clock the VM may wait for memory (0.002,
			      * stall_budget.h) */
	double min_saving;   /* eviction stops when the compressed pool saves less than this
			      * share of what it takes (0.25, pool_worth.h) */
};
void mtd_pageout_config_default(struct mtd_pageout_config *c);
/* One [pageout] key from text.  0, or -EINVAL with a sentence in err. */
int mtd_pageout_config_set(struct mtd_pageout_config *c, const char *key, const char *value,
			   char *err, size_t errlen);

/* What the hand needs from its VM, fixed at attach. */
struct mtd_hand_env {
	const char *vm_name;
	mtd_qmp_fn qmp; /* QEMU's monitor (NULL: none) */
	void *qmp_ctx;
	int qemu_pid;            /* 0: unknown */
	bool live_source;        /* see mtd_return_resolve */
	const char *source_name; /* for the refusal's sentence */
	const char *proc_root;   /* NULL: /proc (tests point these elsewhere) */
	const char *sys_root;    /* NULL: /sys */
	/* The host's swap, one budget for every VM's hand (daemon/host.c): take grants up to
	 * want bytes of the room past the reserve that no other hand holds (its figures in
	 * out); done gives a grant back once its pages went out (the swap figures then show
	 * them).  NULL: the hand reads the swap itself (its proc_root and sys_root), as the
	 * only writer. */
	int (*swap_take)(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
			 struct mtd_swap_grant *out);
	void (*swap_done)(void *ctx, uint64_t granted_bytes);
	void *swap_ctx;
	/* QEMU's whole-memory operations (balloon.h, mtd_balloon_ops.memjob; NULL: not
	 * known): asked each interval while host-side eviction is in force. */
	int (*memjob)(void *ctx, struct mtd_memjob *out);
	void *memjob_ctx;
};

struct mtd_pageout_hand;

/* A hand for one VM.  Nothing is asked of QEMU until pageout is first in force.  0 or
 * -ENOMEM. */
int mtd_hand_new(const struct mtd_pageout_config *cfg, const struct mtd_hand_env *env,
		 struct mtd_pageout_hand **out);
void mtd_hand_free(struct mtd_pageout_hand *h);

/* Step 2a: the refault scan (a no-op while nothing is evicted).  While QEMU reads all of
 * guest memory itself (a migration, a snapshot, a dump: env.memjob), and at the first scan
 * after one, pages that come back are its reads, not the guest's: they go back to the oldest
 * generation, cold, and are counted apart (job_reads_total), not as refaults.  g may be
 * NULL. */
void mtd_hand_feedback(struct mtd_pageout_hand *h, struct vmm_guest *g, uint64_t now_ms);

/* Step 2a, after the refault scan and before the source ages: the guest's free memory, as
 * QEMU's pagemap shows it (mtd_pageout_find_empty), is marked free in libvmm
 * (vmm_hint_free), so that the guest's next use of such a page is not read as a reuse at
 * the age it lay free.  Only while the map is open: with a live source, under every
 * return mode (under balloon and reclaim the map is read for this alone).  g may be NULL. */
void mtd_hand_mark_free(struct mtd_pageout_hand *h, struct vmm_guest *g);

/* Step 5b's inputs from the loop. */
struct mtd_hand_input {
	enum mtd_return_via mode; /* in force (mtd_return_resolve) */
	bool may_take;            /* the controller is taking memory (VM active, inputs fresh,
				   * not exiting, enabled) */
	const char *why_not;      /* when not: why, for the status ("VM holding", ...) */
	/* auto: the guest picks first.  Host pageout waits while the agent was asked and has not
	 * answered yet, or its last answer (reply_seq moves with each) freed all it was asked
	 * for within the last two intervals: the guest is still giving. */
	bool agent_asked;
	uint64_t reply_seq;
	bool reply_done;
	uint64_t interval_ms;
	/* The round's decision (vmm_decide): the cold age, and how many pages may go, or why
	 * none (watching for the cold age, the controller's hold, the policy's floor). */
	const struct vmm_decision *decision;
	const char *hold_why; /* gate VMM_DECIDE_HOLD: why, in words (may be NULL) */
	uint64_t now_ms;
	const struct vmm_pt *pt; /* the source's tables for look-around (NULL: none) */
	/* The source learns which pages left (it may zap them); may be NULL. */
	void (*evicted)(void *ctx, const struct vmm_run *runs, size_t n);
	void *evicted_ctx;
};

/* Step 5b: evict.  g may be NULL (no source: nothing to do).  Paused while QEMU reads all
 * of guest memory itself (env.memjob), or while that cannot be told.  At most what the swap can
 * take before a write fails (swap_stat.h, mtd_swap_room: a zram pool's memory limit counts)
 * past the reserve, less what other VMs' hands were granted and have not yet sent
 * (env.swap_take); paused, with the reason, when that is nothing. */
void mtd_hand_step(struct mtd_pageout_hand *h, struct vmm_guest *g,
		   const struct mtd_hand_input *in);

/* Step 6: fill st->pageout, and count host-side eviction's resident drop, less the
 * compressed pool's share, in st->returned_bytes / saved_bytes (after mtd_vm_figures). */
void mtd_hand_publish(const struct mtd_pageout_hand *h, struct mtd_vm_status *st);

/* What a full squeeze could still take from this VM by pageout, net of the compressed pool
 * and within the room in swap: for host arbitration (reclaimable_bytes). */
uint64_t mtd_hand_reclaimable(const struct mtd_pageout_hand *h, uint64_t cold_resident_bytes);

/* Guest memory this hand holds in host swap now (bytes). */
uint64_t mtd_hand_swapped_bytes(const struct mtd_pageout_hand *h);

/* The layout in use (NULL until pageout was first in force). */
const struct mtd_ram_layout *mtd_hand_layout(const struct mtd_pageout_hand *h);

#endif /* MEMTIDE_HOST_PAGEOUT_HAND_H */
