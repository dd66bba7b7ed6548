// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pool_worth.c - whether host-side eviction still saves memory (pool_worth.h).
 */
#include "decide/pool_worth.h"

#include <inttypes.h>
#include <stdio.h>

#define MiB ((uint64_t)1 << 20)

void mtd_pool_note(struct mtd_pool_worth *w, uint64_t evicted_bytes, int64_t pool_growth,
		   double min_saving, uint64_t now_ms)
{
	w->win_evicted += evicted_bytes;
	w->win_pool += pool_growth;
	w->evicted_total += evicted_bytes;
	w->pool_total += pool_growth;
	if (w->win_evicted < MTD_POOL_MEASURE_BYTES)
		return;
	w->saving = 1.0 - (double)w->win_pool / (double)w->win_evicted;
	w->measured = true;
	w->win_evicted = 0;
	w->win_pool = 0;
	if (w->saving >= min_saving) {
		w->hold_ms = 0;
		return;
	}
	w->hold_ms = !w->hold_ms                             ? MTD_POOL_HOLD_FIRST_MS
		     : w->hold_ms * 2 > MTD_POOL_HOLD_MAX_MS ? MTD_POOL_HOLD_MAX_MS
							     : w->hold_ms * 2;
	w->holding = true;
	w->hold_until_ms = now_ms + w->hold_ms;
}

bool mtd_pool_allows(struct mtd_pool_worth *w, uint64_t now_ms)
{
	if (w->holding && now_ms >= w->hold_until_ms) {
		w->holding = false; /* the next steps are a probe */
		w->win_evicted = 0;
		w->win_pool = 0;
	}
	return !w->holding;
}

void mtd_pool_why(const struct mtd_pool_worth *w, uint64_t now_ms, char *buf, size_t len)
{
	uint64_t left = w->hold_until_ms > now_ms ? w->hold_until_ms - now_ms : 0;

	snprintf(buf, len,
		 "incompressible: the compressed pool grew by %.0f%% of what eviction put in "
		 "swap (it saves %.0f%%): nothing more is taken for %" PRIu64 " s, pages in "
		 "swap stay there",
		 (1.0 - w->saving) * 100.0, w->saving * 100.0, left / 1000);
}
