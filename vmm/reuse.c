// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reuse.c - the reuse histogram (Part 8 of libvmm): what a lower threshold would cost,
 * measured before anything is evicted.
 *
 * The reclaim controller (Part 6b) learns from refaults, and refaults exist only after an
 * eviction: lowering the cold age threshold below the period at which some set of pages is
 * reused costs that whole set once before the controller hears of it.  On a guest whose
 * working set is reused every 40 s, a threshold that drifts from 60 s to 30 s evicts all of
 * it and pays it back as refaults over the next 40 s.
 *
 * The aging hand sees those reuses anyway.  A page in generation seq was last seen used
 * before that generation's birth; when a later aging round finds it accessed again, it had
 * been idle for about birth(max_seq) - birth(seq).  Had the threshold been at or below that
 * age, the page would have been evicted and this access would have been a refault.  So the
 * count of reuses by idle age, per minute, is the refault rate each threshold would cause:
 * the curve Google's far-memory system (Lagar-Cavilla et al., ASPLOS 2019) builds from its
 * "promotion histogram" to pick its threshold.  libvmm counts reuses into VMM_REUSE_BUCKETS
 * half-octave buckets of idle age (bucket k holds ages in [2^(k/2), 2^((k+1)/2)) s; the
 * first also holds everything under 1 s, the last everything above), cumulatively, in
 * vmm_guest_stats.reuse_hist; the controller turns their growth into rates
 * (reclaim_ctl.c: the reuse floor).
 *
 * Not a reuse: a page marked free (vmm_hint_free) that the guest uses again.  It held
 * nothing; the guest is filling fresh memory, and evicting it would have cost no refault.
 *
 * Accuracy: the age is the age of the page's generation, whose birth is the youngest of
 * the rounds merged into it (generations.c, "The layout"): a page reads at least 1/2.2 of
 * its idle time, and as idle as the eviction hand will take it to be.  So a reuse counted
 * at age A is a refault under any threshold at or below A, and under no longer one: the
 * eviction hand takes a generation only once its age reaches the threshold.
 *
 * First comebacks: reuse_first_hist counts the reuses of pages in tier 0.  With
 * reuse_raises_tier a reuse lifts the page's tier, so those are the pages' first returns:
 * the reclaim controller weighs pages that never came back apart from those that did
 * (reclaim_ctl.c, "Weighing").
 *
 * Cost: the bucket of each live generation is computed once per aging round (O(nr_gens),
 * here); the aging hand then adds one increment per page it promotes (generations.c).
 */
#include <math.h>
#include <string.h>

#include "guest_priv.h"

unsigned vmm_reuse_bucket_of(uint64_t age_ms)
{
	if (age_ms < 1000)
		return 0;
	double k = floor(2.0 * log2((double)age_ms / 1000.0));

	return k >= VMM_REUSE_BUCKETS - 1 ? VMM_REUSE_BUCKETS - 1 : (unsigned)k;
}

uint64_t vmm_reuse_bucket_ms(unsigned k)
{
	if (k == 0)
		return 0;
	if (k >= VMM_REUSE_BUCKETS)
		k = VMM_REUSE_BUCKETS - 1;
	return (uint64_t)ceil(1000.0 * exp2((double)k / 2.0));
}

void vmm_reuse_hists(const struct vmm_guest *g, uint64_t *all, uint64_t *first)
{
	for (unsigned k = 0; k < VMM_REUSE_BUCKETS; k++) {
		all[k] = g->reuse_hist[k] + (g->reuse_round[k] & 0xffffffffu);
		first[k] = g->reuse_first_hist[k] + (g->reuse_round[k] >> 32);
	}
}

void vmm_reuse_new_round(struct vmm_guest *g)
{
	uint64_t now = g->gen[guest_youngest(g)].birth_ms;

	vmm_reuse_hists(g, g->reuse_hist, g->reuse_first_hist);
	memset(g->reuse_round, 0, sizeof(g->reuse_round));

	for (unsigned i = 0; i < g->nr_live; i++) {
		struct gen_slot *gs = &g->gen[g->order[i]];
		gs->reuse_bucket = (uint8_t)vmm_reuse_bucket_of(now - gs->birth_ms);
	}
}
