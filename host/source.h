/*
 * source.h - where a VM's page-access information comes from: the access-bit source.
 *
 * The first stage of memtide's data flow ("access-bit source -> libvmm generations -> ...").
 * A source runs one aging round per control interval: it starts a new youngest generation in
 * the VM's libvmm guest and tells libvmm which pages were touched since the last round
 * (page-table walks, or reports that stand in for them).  Everything after this stage (the
 * working-set estimate, the reclaim controller, the balloon) is the same whatever the source.
 *
 * Sources today:
 *   sim    libvmm's simulated hardware: real EPT tables in memory, a synthetic workload
 *          touching a fixed hot share of RAM each round, vmm_age_walk over the tables.
 *          For tests and demos (host arbitration across several VMs without real guests).
 *   agent  the guest agent's reports (proto): its working-set histogram and access/cold
 *          hints, fed through vmm_age_begin / vmm_mark_young / vmm_hint_access / _cold.
 * A source that walks a live guest's EPT plugs in with the same ops.
 *
 * Thread context: a source belongs to its VM's loop thread; ops are never called
 * concurrently for one source.
 */
#ifndef MEMTIDE_HOST_SOURCE_H
#define MEMTIDE_HOST_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vmm_guest;
struct vmm_range;
struct vmm_run;

struct mtd_source_ops {
	const char *name;
	/* The source says which pages were used (access bits), not only how much memory: only
	 * then do the reuses libvmm counts by idle age mean anything (vmm/reuse.c). */
	bool per_page;
	/*
	 * One aging round at now_ms: must call vmm_age_begin or vmm_age_walk on g exactly once,
	 * then report young pages.  Returns 0, -EAGAIN when the source had nothing new this
	 * round (libvmm was still aged: idle time passes), or -errno.
	 */
	int (*age)(void *ctx, struct vmm_guest *g, uint64_t now_ms);
	/* The host took these runs back (balloon inflation chose them).  May be NULL. */
	void (*evicted)(void *ctx, const struct vmm_run *runs, size_t n);
	/* Is the source's information current (the agent spoke recently; the sim always)? */
	bool (*fresh)(void *ctx, uint64_t now_ms);
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
/* The agent's reports for a guest of guest_bytes, read from link (owned by the caller, must
 * outlive the source); memory the guest touched within two interval_ms counts as young each
 * round; fresh while the agent spoke within silence_ms.  0, -EINVAL, -ENOMEM. */
int mtd_source_agent_new(struct mtd_agent_link *link, uint64_t guest_bytes, uint64_t interval_ms,
			 uint64_t silence_ms, struct mtd_source *out);

static inline void mtd_source_destroy(struct mtd_source *s)
{
	if (s->ops)
		s->ops->destroy(s->ctx);
	s->ops = NULL;
	s->ctx = NULL;
}

#endif /* MEMTIDE_HOST_SOURCE_H */
