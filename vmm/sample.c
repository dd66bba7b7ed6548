// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sample.c - how long a sampling source's window should be (Part 0 of libvmm, sampled
 * sources).
 *
 * A source that sees accesses only in a window of each aging interval (memtided's ept
 * plugin: it instruments guest memory 200 ms of every 5 s, since instrumented code runs 3-5x
 * slower) sees a page touched once a second in about one round of five.  The generations
 * then read its gaps between sightings as idle ages: 25 s on average, and minutes in the
 * tail, so the reuse floor (Part 8) rises to minutes and the hot set looks like data idle
 * since it was written (docs/design.md, Part 0, "What a sampled source can tell").
 *
 * The estimate of how well the window catches the guest's steady pages: of the pages the
 * previous round found used, the share this round found used again.  For a page used at a
 * steady rate and caught by a window with probability p, that share is p (the window must
 * open at a random moment of each round: one in step with the rounds catches the same pages
 * every time, and the share reads 1 while most of the set is never seen; source_ept.c); for
 * pages used in every window, 1.  (A page used once and never again reads as missed too: a
 * stream of new pages keeps the window wide for nothing but its cost, within the cap.)  So:
 *   - the window starts at its longest, max_ms: the first rounds are the ones the
 *     generations learn the guest's reuses from, and a narrow first window read a hot set
 *     touched once a second as gaps of minutes, which the reuse window remembered for five
 *     (memtide-sim's sim_sampled: the kv trace's first return 235 s after its load starting
 *     at 200 ms, 105 s starting at 1 s);
 *   - the share over `high` (0.85) halves it, down to base_ms (the policy's ept_window);
 *   - under `low` (0.5) doubles it, up to max_ms;
 *   - a round with fewer than min_pages seen before changes nothing (an idle guest says
 *     nothing about sampling).
 * max_ms is a fifth of the interval by default: a guest instrumented a fifth of the time at
 * 1/k of its speed does 0.8 + 0.2 / k of its work, a slowdown of 1.16 at k = 3.3 (the worst
 * full-time slowdown scenario 8 measured) and 1.19 at k = 5, within the slowdown_sampled
 * goal of 1.3 (scenario 8 measures it at the longest window too).
 *
 * Cost: O(1) a round.
 */
#include <errno.h>
#include <string.h>

#include "vmm.h"

void vmm_sample_config_default(struct vmm_sample_config *cfg, uint64_t base_ms,
			       uint64_t interval_ms)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->base_ms = base_ms;
	cfg->max_ms = interval_ms / 5 > base_ms ? interval_ms / 5 : base_ms;
	cfg->low = 0.5;
	cfg->high = 0.85;
	cfg->min_pages = 256;
}

int vmm_sample_init(struct vmm_sample *s, const struct vmm_sample_config *cfg)
{
	if (!s || !cfg || !cfg->base_ms || cfg->max_ms < cfg->base_ms || !(cfg->low >= 0.0) ||
	    !(cfg->high <= 1.0) || cfg->low > cfg->high)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->window_ms = cfg->max_ms;
	s->caught = -1.0;
	return 0;
}

uint64_t vmm_sample_update(struct vmm_sample *s, uint64_t seen_before, uint64_t seen_again)
{
	const struct vmm_sample_config *c = &s->cfg;

	if (seen_before < c->min_pages || seen_again > seen_before)
		return s->window_ms;
	s->caught = (double)seen_again / (double)seen_before;
	if (s->caught < c->low && s->window_ms < c->max_ms)
		s->window_ms = s->window_ms * 2 < c->max_ms ? s->window_ms * 2 : c->max_ms;
	else if (s->caught > c->high && s->window_ms > c->base_ms)
		s->window_ms = s->window_ms / 2 > c->base_ms ? s->window_ms / 2 : c->base_ms;
	return s->window_ms;
}
