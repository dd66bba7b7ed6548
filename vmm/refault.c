// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * refault.c - refaults: an evicted page touched again (Part 5 of libvmm).
 *
 * A refault is the cost of a wrong eviction: the host took a page back and the guest
 * needed it after all.  Two figures make it useful feedback:
 *
 *   distance  aging rounds between eviction and refault (guest_priv.h: the evicted page's
 *             byte keeps max_seq at eviction, mod 32, kept exact by the sweep up to 15;
 *             VMM_REFAULT_DIST_CAP = 15 means "15 or more").  A short distance says the page
 *             was evicted while still in use: the cold age threshold was too low.  The
 *             reclaim controller (Part 6b) is fed the refault count; the histogram lets an
 *             operator see how wrong the evictions were.
 *   tier      the tier the page was in when it was evicted.  Tier protection (Part 6a)
 *             compares refaults per eviction between tiers.
 *
 * Only refaults within nr_gens generations of their eviction count for tier protection,
 * as Linux counts only refaults whose eviction generation is still the oldest few: a page
 * that comes back after a long absence says nothing about the tier policy of today.
 *
 * libvmm learns of a refault in two ways: the caller reports the fault (vmm_refault), or
 * the aging hand finds an evicted page present and young again (generations.c).  Either
 * way the page comes back in the tier it left, or one up with refault_raises_tier: a source
 * blind to some accesses (vmm.h says which) would otherwise see a page used only that way
 * go out again as soon as it has aged, evict -> refault for ever.
 * Cost: O(1) per refault.
 */
#include <errno.h>

#include "guest_priv.h"

/* ======================================================================================
 * Part 5: refaults
 * ====================================================================================== */

unsigned vmm_refault_tier(const struct vmm_guest *g, uint8_t b)
{
	unsigned tier = pb_tier(b);

	return g->refault_raises_tier && tier + 1 < g->nr_tiers ? tier + 1 : tier;
}

uint64_t vmm_refault_record(struct vmm_guest *g, uint8_t b)
{
	uint64_t d = guest_evicted_distance(g, b);
	unsigned tier = pb_tier(b);

	if (d > VMM_REFAULT_DIST_CAP)
		d = VMM_REFAULT_DIST_CAP;
	g->refaults_total++;
	g->refaults_by_tier[tier]++;
	g->refault_distance_hist[d]++;
	if (d < g->nr_gens)
		g->tp.t[tier].refaulted++;
	return d;
}

int vmm_refault(struct vmm_guest *g, uint64_t gpa, struct vmm_refault *out)
{
	if (!g || !out)
		return -EINVAL;
	if (!guest_counts_ok(g))
		return -EUCLEAN;
	int rc = vmm_guest_check_span(g, gpa, 1);
	if (rc < 0)
		return rc;
	uint64_t pfn = gpa >> VMM_PAGE_SHIFT;
	const struct guest_range *r = vmm_guest_range_of(g, pfn);
	uint64_t idx = r->first_page + pfn - r->start_pfn;
	uint8_t b = g->pages[idx];

	out->distance_gens = 0;
	out->tier = 0;
	out->was_evicted = (b & PB_EVICTED) != 0;
	if (!out->was_evicted)
		return 0;
	out->distance_gens = vmm_refault_record(g, b);
	out->tier = pb_tier(b);
	/* Back in the youngest generation, in the tier it left from (one up with
	 * refault_raises_tier): it just proved used. */
	vmm_gen_insert(g, idx, guest_chunk_of(r, pfn), vmm_refault_tier(g, b));
	return 0;
}
