/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * source.h - where a VM's page-access information comes from: the access-bit source.
 *
 * The first stage of memtide's data flow ("access-bit source -> libvmm generations -> ...").
 * A source runs one aging round per control interval: it starts a new youngest generation in
 * the VM's libvmm guest and tells libvmm which pages were touched since the last round
 * (page-table walks, or reports that stand in for them).  Everything after this stage (the
 * working-set estimate, the reclaim controller, the balloon) is the same whatever the source.
 *
 * Sources (one file each in host/access/; choose.c picks one per VM, policy key `source`):
 *   ept    a TCG guest's emulated EPT, kept by memtide's QEMU plugin (qemu_plugin/) in a
 *          shared file, aged by libvmm's walker and bloom filter in sampling windows.
 *   idle   the host's idle page tracking (page_idle bitmap) over the frames backing guest
 *          RAM (pagemap of QEMU): the usual path on KVM hosts with the option built in.
 *   damon  Linux DAMON in physical-address mode over those frames, through its sysfs.
 *   memcg  the VM's memory cgroup: what the host kernel's reclaim learns of the guest's use
 *          (it asks KVM which pages were touched when it evicts), for KVM guests on hosts
 *          with neither DAMON nor idle page tracking.  Amounts, laid over low RAM; the
 *          kernel picks the pages (act/memcg_hand.h evicts through it).
 *   agent  the guest agent's reports (proto): its working-set histogram and access/cold
 *          hints, fed through vmm_age_begin / vmm_mark_young / vmm_hint_access / _cold.
 *          Amounts, not pages: the fallback when no page-level source is available.
 *   sim    libvmm's simulated hardware: real EPT tables in memory, a synthetic workload
 *          touching a fixed hot share of RAM each round, vmm_age_walk over the tables.
 *          For tests and demos (host arbitration across several VMs without real guests).
 *
 * Thread context: a source belongs to its VM's loop thread; ops are never called
 * concurrently for one source.
 */
#ifndef MEMTIDE_HOST_SOURCE_H
#define MEMTIDE_HOST_SOURCE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/ram_layout.h"

struct vmm_guest;
struct vmm_range;
struct vmm_run;

struct mtd_source_ops {
	const char *name;
	/* The source says which pages were used (access bits), not only how much memory: only
	 * then do the reuses libvmm counts by idle age mean anything (vmm/reuse.c). */
	bool per_page;
	/* The source sees loads and stores only (the ept plugin: neither instruction fetches
	 * nor the guest's own page-table walks).  A page used only that way looks idle, goes
	 * out and refaults: libvmm brings refaulting pages back a tier up so they stop being
	 * the first pick (vmm_guest_config.refault_raises_tier). */
	bool loads_stores_only;
	/*
	 * One aging round at now_ms: reads what the round needs first, then calls
	 * vmm_age_begin or vmm_age_walk on g exactly once and reports young pages.  Returns 0,
	 * -EAGAIN when the source had nothing new this round (libvmm was still aged: idle time
	 * passes), or -errno when the round could not be read: then libvmm is untouched (the
	 * generations do not advance: a round that read nothing is no evidence that nothing
	 * was touched), and tick_age.c holds the controller until a round succeeds.
	 * -ENODATA: nothing was sampled (the ept plugin ran no window: a paused VM).
	 */
	int (*age)(void *ctx, struct vmm_guest *g, uint64_t now_ms);
	/* The host took these runs back (balloon inflation chose them: bookkeeping, the guest
	 * picked its own pages; and host-side eviction, when paged_out is NULL).  May be NULL. */
	void (*evicted)(void *ctx, const struct vmm_run *runs, size_t n);
	/* Host-side eviction paged these very pages out (the ept source zaps their leaves, as
	 * KVM's MMU notifier would).  May be NULL: evicted is called instead. */
	void (*paged_out)(void *ctx, const struct vmm_run *runs, size_t n);
	/* Is the source's information current (the agent spoke recently; the sim always)? */
	bool (*fresh)(void *ctx, uint64_t now_ms);
	/* One line about the source's state now (for the status's source_detail, refreshed at
	 * every publish): 0, or -errno and buf untouched.  May be NULL (the line written at
	 * attach stands). */
	int (*describe)(void *ctx, char *buf, size_t len);
	/* Where the working set comes from, for vm show and the log ("guest MGLRU",
	 * "MemAvailable fallback").  *by_age: it comes from pages' idle ages, so what the guest
	 * uses beyond it is cold; false when it follows the guest's use.  May be NULL: the
	 * source's own access bits, by age. */
	const char *(*estimate)(void *ctx, bool *by_age);
	void (*destroy)(void *ctx);
};

struct mtd_source {
	const struct mtd_source_ops *ops;
	void *ctx;
	/* The guest RAM layout the source describes, for vmm_guest_new.  Owned by ctx. */
	const struct vmm_range *ram;
	size_t nr_ram;
};

/*
 * Simulated hardware for a guest of guest_bytes (rounded down to 2 MiB), touching
 * hot_percent of its pages every round (spread over RAM by a hash of seed, so VMs differ).
 * 0, -EINVAL, -ENOMEM.
 */
int mtd_source_sim_new(uint64_t guest_bytes, unsigned hot_percent, uint64_t seed,
		       struct mtd_source *out);

struct mtd_agent_link;
struct proto_wss;
struct proto_stats;
/* The bytes an agent's wss report counts as touched within the last two of its agings: the
 * bins that start below 3/2 interval_ms (agent_link.c, mtd_agent_wss_edges, says why). */
uint64_t mtd_agent_young_bytes(const struct proto_wss *w, uint64_t interval_ms);
/* What the guest uses outside its LRU: MemTotal - MemFree less every page in w's bins; 0
 * without both reports; UINT64_MAX (no reading) when they were taken more than
 * MTD_OUTSIDE_APART_MS apart on the guest's clock. */
#define MTD_OUTSIDE_APART_MS 1000
uint64_t mtd_agent_outside_lru_bytes(const struct proto_stats *st, const struct proto_wss *w);
/* The least of the last MTD_OUTSIDE_SAMPLES readings, sample included (UINT64_MAX: none this
 * time); 0 before any. */
#define MTD_OUTSIDE_SAMPLES 3
struct mtd_outside_filter {
	uint64_t v[MTD_OUTSIDE_SAMPLES];
	unsigned n, next;
};
uint64_t mtd_agent_outside_note(struct mtd_outside_filter *f, uint64_t sample);
/* The agent's reports for a guest of guest_bytes, read from link (owned by the caller, must
 * outlive the source); memory the guest touched within its last two agings (one per
 * interval_ms) counts as young each round; fresh while the agent spoke within silence_ms.
 * 0, -EINVAL, -ENOMEM. */
int mtd_source_agent_new(struct mtd_agent_link *link, uint64_t guest_bytes, uint64_t interval_ms,
			 uint64_t silence_ms, struct mtd_source *out);

/*
 * The ept source over the plugin's table file at path (ept_file.h), which must belong to
 * QEMU process qemu_pid (0: not checked).  guest_bytes: the guest's RAM, used for the layout
 * when the plugin was not told it.  window_ms: each round's shortest sampling window; it
 * widens up to a fifth of interval_ms (the rounds' interval) while the windows miss pages in
 * use (vmm_sample_update).  0, or -errno with a sentence in why (-ENOENT: QEMU runs without
 * the plugin; -ESRCH, -EBUSY, -EINVAL).
 */
int mtd_source_ept_new(const char *path, int qemu_pid, uint64_t guest_bytes, uint64_t window_ms,
		       uint64_t interval_ms, struct mtd_source *out, char *why, size_t whylen);

/* What the host-side sources (idle, damon) are handed: QEMU's process and monitor (its
 * checked RAM map, guest_ram.h) and the kernel's files. */
struct mtd_host_source_env {
	int qemu_pid;
	mtd_qmp_fn qmp; /* NULL: no monitor: refused */
	void *qmp_ctx;
	const char *proc_dir;    /* "/proc" */
	const char *idle_bitmap; /* "/sys/kernel/mm/page_idle/bitmap" */
	const char *damon_admin; /* "/sys/kernel/mm/damon/admin" */
	const char *run_dir;     /* "/run/memtide": DAMON's ownership record */
};

/*
 * The idle source over QEMU's guest-RAM frames (env's proc_dir/PID/pagemap, through its
 * checked map) and the page_idle bitmap file.  0, or -errno with why (-ENOENT: the kernel
 * has no idle page tracking; -EOPNOTSUPP: RAM it cannot see, on hugetlbfs).
 */
int mtd_source_idle_new(const struct mtd_host_source_env *env, struct mtd_source *out, char *why,
			size_t whylen);
/*
 * The damon source: DAMON (paddr) under env's damon_admin, its ownership record in run_dir.
 * 0, or -errno with why (-ENOENT: no DAMON sysfs; -EBUSY: another tool's kdamond, or
 * memtided's one kdamond serves another VM; -EOPNOTSUPP: no paddr, no region reports
 * (update_schemes_tried_regions), or RAM it cannot see; -E2BIG: guest RAM's frames scattered
 * over more ranges than DAMON is given).
 */
int mtd_source_damon_new(const struct mtd_host_source_env *env, struct mtd_source *out, char *why,
			 size_t whylen);
/* Could the damon source start now?  0, or -errno with why; no side effect but removing
 * a crashed memtided's kdamond. */
int mtd_damon_probe(const char *admin, const char *run_dir, char *why, size_t whylen);
/* Switch off and remove a kdamond a crashed memtided left behind (at daemon start). */
void mtd_damon_cleanup(const char *admin, const char *run_dir);
/* DAMON's region count limits for a guest of ram_bytes whose frames form nr_targets
 * target ranges: at least one region per 2 MiB of RAM (up to 512) and per range, at most
 * twice that. */
void mtd_damon_region_limits(size_t nr_targets, uint64_t ram_bytes, uint64_t *min, uint64_t *max);

struct mtd_memcg_hand;
/* The memcg source over hand (the VM's; must outlive the source), for a guest of guest_bytes.
 * Fresh while the cgroup answers.  0, -EINVAL, -ENOMEM. */
int mtd_source_memcg_new(struct mtd_memcg_hand *hand, uint64_t guest_bytes, struct mtd_source *out);

/* The source's describe op: 0, or -EOPNOTSUPP (no such op, or no source) / its error. */
static inline int mtd_source_describe(const struct mtd_source *s, char *buf, size_t len)
{
	if (!s->ops || !s->ops->describe)
		return -EOPNOTSUPP;
	return s->ops->describe(s->ctx, buf, len);
}

/* Does the source report the guest's own accesses page by page (not amounts, not libvmm's
 * simulation, [daemon] source = sim)?  Host-side eviction needs that. */
static inline bool mtd_source_live(const struct mtd_source *s, bool simulated)
{
	return s->ops && s->ops->per_page && !simulated;
}

static inline void mtd_source_destroy(struct mtd_source *s)
{
	if (s->ops)
		s->ops->destroy(s->ctx);
	s->ops = NULL;
	s->ctx = NULL;
}

#endif /* MEMTIDE_HOST_SOURCE_H */
