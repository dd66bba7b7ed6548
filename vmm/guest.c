// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * guest.c - one guest's page state: lifetime, layout lookup, statistics and invariants
 * (Part 4 of libvmm, generations; the encoding is in guest_priv.h).
 *
 * vmm_guest_new copies the RAM layout, allocates one byte per RAM page (holes take no
 * space: pages[] is dense over the ranges) and one 32-byte count block per 2 MiB piece of
 * each range, and starts every page resident in generation 0, tier 0.  Nothing here is
 * global; the object owns all of its memory.
 *
 * Invariants (vmm_check_invariants, O(pages), called by the tests after every random
 * operation):
 *   I1  1 <= live generations <= nr_gens; along order[] the slots are distinct, their
 *       positions match, seqs increase and births never decrease; min_seq and max_seq are
 *       the oldest's and the youngest's seq.
 *   I2  every resident page's label names a live slot and its tier is below nr_tiers; an
 *       evicted page's distance is at most 24 (the sweep's bound).
 *   I3  each live slot's count and each chunk's cnt[] equal a recount; other slots are 0.
 *   I4  sum of the counts == resident pages, resident + evicted_pages == ram_pages.
 *   I5  only resident pages carry the free mark, and free_pages counts them.
 *   I6  each live slot's canonical label names it; a label names a live slot or none; at
 *       most SWEEP_ROUNDS labels are retired (name a slot whose canonical label they are
 *       not), each to be freed within SWEEP_ROUNDS rounds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "guest_priv.h"

#define MAX_RANGES 4096 /* a layout is a handful of ranges; refuse absurd ones */

/* ======================================================================================
 * Part 4: generations - guest lifetime
 * ====================================================================================== */

void vmm_guest_config_default(struct vmm_guest_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->nr_gens = VMM_DEFAULT_NR_GENS;
	cfg->nr_tiers = VMM_MAX_NR_TIERS;
	cfg->lookaround_max = 63; /* Linux's MIN_LRU_BATCH - 1 */
	vmm_bloom_config_default(&cfg->bloom);
	/* measured: docs/walker.md (non-leaf bits) and docs/design.md (the two rules) */
	cfg->use_nonleaf_accessed = true;
	cfg->dirty_ages_up = false;
	cfg->lookaround_feeds_bloom = true;
	cfg->unseen_is_unused = false;
	cfg->gens_widen = true;
	cfg->reuse_raises_tier = false;
	cfg->refault_raises_tier = false;
}

/* Ranges must be non-empty, 4 KiB aligned, ascending and disjoint. */
static int check_layout(const struct vmm_range *ram, size_t n)
{
	if (!ram || n == 0 || n > MAX_RANGES)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if ((ram[i].start | ram[i].end) & (VMM_PAGE_SIZE - 1))
			return -EINVAL;
		if (ram[i].end <= ram[i].start)
			return -EINVAL;
		if (i && ram[i].start < ram[i - 1].end)
			return -EINVAL;
	}
	return 0;
}

int vmm_guest_new(const struct vmm_guest_config *cfg, struct vmm_guest **out)
{
	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	if (cfg->nr_gens < VMM_MIN_NR_GENS || cfg->nr_gens > VMM_MAX_NR_GENS)
		return -EINVAL;
	if (cfg->nr_tiers < 1 || cfg->nr_tiers > VMM_MAX_NR_TIERS)
		return -EINVAL;
	if (cfg->lookaround_max > 511)
		return -EINVAL;
	int rc = check_layout(cfg->ram, cfg->nr_ram);
	if (rc < 0)
		return rc;

	struct vmm_guest *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->nr_gens = cfg->nr_gens;
	g->nr_tiers = cfg->nr_tiers;
	g->lookaround_max = cfg->lookaround_max;
	g->use_nonleaf_accessed = cfg->use_nonleaf_accessed;
	g->dirty_ages_up = cfg->dirty_ages_up;
	g->lookaround_feeds_bloom = cfg->lookaround_feeds_bloom;
	g->unseen_is_unused = cfg->unseen_is_unused;
	g->gens_widen = cfg->gens_widen;
	g->reuse_raises_tier = cfg->reuse_raises_tier;
	g->refault_raises_tier = cfg->refault_raises_tier;
	vmm_tp_init(&g->tp, cfg->nr_tiers);
	/* One generation, seq 0, in slot 0 with label 0; every other label free. */
	memset(g->label_slot, LABEL_FREE, sizeof(g->label_slot));
	g->label_slot[0] = 0;
	g->nr_live = 1;
	g->order[0] = 0;

	rc = -ENOMEM;
	g->ranges = calloc(cfg->nr_ram, sizeof(*g->ranges));
	if (!g->ranges)
		goto fail;
	g->nr_ranges = cfg->nr_ram;
	for (size_t i = 0; i < cfg->nr_ram; i++) {
		struct guest_range *r = &g->ranges[i];
		r->start_pfn = cfg->ram[i].start >> VMM_PAGE_SHIFT;
		r->end_pfn = cfg->ram[i].end >> VMM_PAGE_SHIFT;
		r->first_page = g->ram_pages;
		r->first_chunk = g->nr_chunks;
		g->ram_pages += r->end_pfn - r->start_pfn;
		g->nr_chunks +=
		    ((r->end_pfn - 1) >> CHUNK_SHIFT) - (r->start_pfn >> CHUNK_SHIFT) + 1;
	}
	g->pages = calloc(g->ram_pages, 1); /* 0 = resident, tier 0, seq 0 */
	g->chunks = calloc(g->nr_chunks, sizeof(*g->chunks));
	g->free_map = calloc((g->ram_pages + 63) / 64, sizeof(*g->free_map));
	if (!g->pages || !g->chunks || !g->free_map)
		goto fail;
	rc = vmm_bloom_new(&cfg->bloom, &g->bloom);
	if (rc < 0)
		goto fail;

	for (size_t i = 0; i < g->nr_ranges; i++) {
		const struct guest_range *r = &g->ranges[i];
		for (uint64_t pfn = r->start_pfn; pfn < r->end_pfn;) {
			uint64_t next = ((pfn >> CHUNK_SHIFT) + 1) << CHUNK_SHIFT;
			if (next > r->end_pfn)
				next = r->end_pfn;
			g->chunks[guest_chunk_of(r, pfn)].cnt[0] = (uint16_t)(next - pfn);
			pfn = next;
		}
	}
	g->gen[0].pages = g->ram_pages;
	g->metadata_bytes = sizeof(*g) + g->nr_ranges * sizeof(*g->ranges) + g->ram_pages +
			    g->nr_chunks * sizeof(*g->chunks) +
			    (g->ram_pages + 63) / 64 * sizeof(*g->free_map) +
			    (sizeof(uint64_t) << (cfg->bloom.bits_shift - 5)); /* two filters */
	*out = g;
	return 0;
fail:
	vmm_guest_free(g);
	return rc;
}

void vmm_guest_free(struct vmm_guest *g)
{
	if (!g)
		return;
	vmm_bloom_free(g->bloom);
	free(g->chunks);
	free(g->free_map);
	free(g->pages);
	free(g->ranges);
	free(g);
}

/* ======================================================================================
 * Part 4: generations - layout lookup
 * ====================================================================================== */

const struct guest_range *vmm_guest_range_of(const struct vmm_guest *g, uint64_t pfn)
{
	size_t lo = 0, hi = g->nr_ranges;

	while (lo < hi) { /* first range with end_pfn > pfn */
		size_t mid = lo + (hi - lo) / 2;
		if (g->ranges[mid].end_pfn <= pfn)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == g->nr_ranges || g->ranges[lo].start_pfn > pfn)
		return NULL;
	return &g->ranges[lo];
}

int vmm_guest_check_span(const struct vmm_guest *g, uint64_t gpa, uint64_t npages)
{
	if (gpa & (VMM_PAGE_SIZE - 1) || npages == 0)
		return -EINVAL;
	uint64_t pfn = gpa >> VMM_PAGE_SHIFT;
	if (npages > UINT64_MAX - pfn)
		return -EINVAL;
	uint64_t end = pfn + npages;
	/* Cost: one lookup per range the span crosses, at most nr_ranges. */
	while (pfn < end) {
		const struct guest_range *r = vmm_guest_range_of(g, pfn);
		if (!r)
			return -ERANGE;
		pfn = r->end_pfn;
	}
	return 0;
}

/* ======================================================================================
 * Part 4: generations - statistics and invariants
 * ====================================================================================== */

void vmm_guest_get_stats(const struct vmm_guest *g, struct vmm_guest_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->min_seq = g->min_seq;
	st->max_seq = g->max_seq;
	st->nr_gens = g->nr_live;
	for (unsigned i = 0; i < g->nr_live; i++) {
		const struct gen_slot *gs = &g->gen[g->order[i]];
		st->gen[i] = (struct vmm_gen_info){
		    .seq = gs->seq, .birth_ms = gs->birth_ms, .pages = gs->pages};
	}
	st->ram_pages = g->ram_pages;
	st->evicted_pages = g->evicted_pages;
	st->resident_pages = g->ram_pages - g->evicted_pages;
	st->free_pages = g->free_pages;
	st->refaults_total = g->refaults_total;
	st->evicted_total = g->evicted_total;
	memcpy(st->refaults_by_tier, g->refaults_by_tier, sizeof(st->refaults_by_tier));
	memcpy(st->refault_distance_hist, g->refault_distance_hist,
	       sizeof(st->refault_distance_hist));
	vmm_reuse_hists(g, st->reuse_hist, st->reuse_first_hist);
	st->reuse_raises_tier = g->reuse_raises_tier;
	unsigned from = vmm_tp_protected_from(&g->tp);
	for (unsigned t = from; t < g->nr_tiers; t++)
		st->tier_protected[t] = true;
	st->metadata_bytes = g->metadata_bytes;
	st->young_prev = g->young_prev;
	st->young_again = g->young_again;
}

/* I1 and I6 */
static bool seqs_ok(const struct vmm_guest *g)
{
	unsigned used = 0, retired = 0;

	if (g->nr_live < 1 || g->nr_live > g->nr_gens)
		return false;
	for (unsigned i = 0; i < g->nr_live; i++) {
		unsigned s = g->order[i];
		if (s >= VMM_MAX_NR_GENS || (used >> s) & 1 || g->gen[s].pos != i)
			return false;
		used |= 1u << s;
		if (g->gen[s].label >= PB_LABELS || g->label_slot[g->gen[s].label] != s)
			return false;
		if (i && (g->gen[s].seq <= g->gen[g->order[i - 1]].seq ||
			  g->gen[s].birth_ms < g->gen[g->order[i - 1]].birth_ms))
			return false;
	}
	if (g->min_seq != g->gen[g->order[0]].seq ||
	    g->max_seq != g->gen[g->order[g->nr_live - 1]].seq)
		return false;
	for (unsigned l = 0; l < PB_LABELS; l++) {
		unsigned s = g->label_slot[l];
		if (s == LABEL_FREE)
			continue;
		if (s >= VMM_MAX_NR_GENS || !((used >> s) & 1))
			return false;
		if (g->gen[s].label != l && (++retired > SWEEP_ROUNDS ||
					     g->label_free_round[l] > g->max_seq + SWEEP_ROUNDS))
			return false;
	}
	return true;
}

/* I3 for one chunk: recount[] holds the chunk's pages per slot. */
static bool chunk_ok(const struct vmm_guest *g, uint64_t ci, const uint64_t *recount)
{
	for (unsigned s = 0; s < VMM_MAX_NR_GENS; s++)
		if (g->chunks[ci].cnt[s] != recount[s])
			return false;
	return true;
}

/* I2 and I3 for one range, adding its pages per slot to per_slot[]. */
static bool range_ok(const struct vmm_guest *g, const struct guest_range *r, uint64_t *per_slot,
		     uint64_t *evicted)
{
	uint64_t recount[VMM_MAX_NR_GENS] = {0};
	uint64_t ci = guest_chunk_of(r, r->start_pfn);

	for (uint64_t pfn = r->start_pfn; pfn < r->end_pfn; pfn++) {
		if (guest_chunk_of(r, pfn) != ci) {
			if (!chunk_ok(g, ci, recount))
				return false;
			memset(recount, 0, sizeof(recount));
			ci = guest_chunk_of(r, pfn);
		}
		uint8_t b = g->pages[r->first_page + pfn - r->start_pfn];
		if (pb_tier(b) >= g->nr_tiers)
			return false;
		if (b & PB_EVICTED) {
			if (guest_evicted_distance(g, b) > EVICT_DIST_MAX + SWEEP_ROUNDS)
				return false;
			(*evicted)++;
			continue;
		}
		unsigned slot = guest_page_slot(g, b);
		if (slot >= VMM_MAX_NR_GENS)
			return false; /* a label that names no generation */
		recount[slot]++;
		per_slot[slot]++;
	}
	return chunk_ok(g, ci, recount);
}

int vmm_check_invariants(const struct vmm_guest *g)
{
	uint64_t per_slot[VMM_MAX_NR_GENS] = {0}, evicted = 0, resident = 0;

	if (!g)
		return -EINVAL;
	if (!guest_counts_ok(g) || !seqs_ok(g))
		return -EUCLEAN;
	for (size_t i = 0; i < g->nr_ranges; i++)
		if (!range_ok(g, &g->ranges[i], per_slot, &evicted))
			return -EUCLEAN;
	unsigned live = 0;
	for (unsigned i = 0; i < g->nr_live; i++)
		live |= 1u << g->order[i];
	for (unsigned s = 0; s < VMM_MAX_NR_GENS; s++) {
		uint64_t counted = (live >> s) & 1 ? g->gen[s].pages : 0;
		if (per_slot[s] != counted)
			return -EUCLEAN;
		resident += per_slot[s];
	}
	if (evicted != g->evicted_pages || resident + evicted != g->ram_pages)
		return -EUCLEAN;
	/* I5 */
	uint64_t marked = 0;
	for (uint64_t idx = 0; idx < g->ram_pages; idx++) {
		if (!guest_page_free(g, idx))
			continue;
		if (g->pages[idx] & PB_EVICTED)
			return -EUCLEAN;
		marked++;
	}
	if (marked != g->free_pages)
		return -EUCLEAN;
	return 0;
}
