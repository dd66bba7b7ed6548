// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * steady.c - the growing, futile-reclaim and peak rules (steady.h says why they exist).
 */
#include "decide/steady.h"

#include "vmm.h"

#include <inttypes.h>
#include <stdio.h>

#define MiB ((uint64_t)1 << 20)

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

bool mtd_steady_growing(struct mtd_steady *s, const struct mtd_ctl_config *c, bool used_known,
			uint64_t used_bytes, uint64_t now_ms)
{
	if (!used_known) {
		s->have_used = false;
		s->growth_bps = 0;
		return false;
	}
	if (s->have_used && now_ms > s->last_used_ms && c->interval_ms) {
		double dt_s = (double)(now_ms - s->last_used_ms) / 1000.0;
		double rate = used_bytes > s->last_used_bytes
				  ? (double)(used_bytes - s->last_used_bytes) / dt_s
				  : 0.0;
		/* An exponential average with a time constant of three intervals; a reading
		 * after a long gap replaces it. */
		double w = dt_s / (3.0 * (double)c->interval_ms / 1000.0);
		s->growth_bps += (rate - s->growth_bps) * (w < 1.0 ? w : 1.0);
	}
	s->have_used = true;
	s->last_used_bytes = used_bytes;
	s->last_used_ms = now_ms;
	return c->interval_ms &&
	       s->growth_bps > 4.0 * (double)c->min_change_bytes * 1000.0 / (double)c->interval_ms;
}

void mtd_steady_reply(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t asked_bytes,
		      uint64_t freed_bytes, enum proto_reclaim_result result, uint32_t elapsed_ms,
		      uint32_t deadline_ms)
{
	const char *name = proto_reclaim_result_name(result);

	s->slow = result == PROTO_RECLAIM_PARTIAL && deadline_ms && elapsed_ms >= deadline_ms &&
		  freed_bytes >= MTD_STEADY_SLOW_MIN;
	s->slow_replies = s->slow ? s->slow_replies + 1 : 0;
	s->futile = !s->slow && asked_bytes && freed_bytes < c->min_change_bytes &&
		    2 * freed_bytes < asked_bytes;
	s->futile_fresh = s->futile;
	s->futile_asked_bytes = asked_bytes;
	s->futile_freed_bytes = freed_bytes;
	snprintf(s->futile_result, sizeof(s->futile_result), "%s", name ? name : "?");
}

bool mtd_steady_futile(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t used_bytes,
		       uint64_t wss_bytes, uint64_t now_ms)
{
	if (s->futile_fresh) {
		s->futile_fresh = false;
		s->futile_used_bytes = used_bytes;
		s->futile_wss_bytes = wss_bytes;
		s->futile_since_ms = now_ms;
	}
	if (s->futile &&
	    (absdiff(used_bytes, s->futile_used_bytes) >= c->min_change_bytes ||
	     absdiff(wss_bytes, s->futile_wss_bytes) >= c->min_change_bytes ||
	     now_ms < s->futile_since_ms || now_ms - s->futile_since_ms >= c->hold_max_ms))
		s->futile = false;
	return s->futile;
}

void mtd_steady_why(const struct mtd_steady *s, const struct mtd_ctl_config *c,
		    enum mtd_ctl_reason reason, char *buf, size_t len)
{
	if (reason == MTD_CTL_GROWING)
		snprintf(buf, len,
			 "the guest's use grows by %.1f MiB/s: nothing is taken until it settles",
			 s->growth_bps / (double)MiB);
	else if (reason == MTD_CTL_FUTILE)
		snprintf(buf, len,
			 "the guest freed %" PRIu64 " of %" PRIu64
			 " MiB when last asked (%s): not asked again until its use or working set "
			 "moves by %" PRIu64 " MiB (or for %" PRIu64 " s)",
			 s->futile_freed_bytes / MiB, s->futile_asked_bytes / MiB, s->futile_result,
			 c->min_change_bytes / MiB, c->hold_max_ms / 1000);
	else if (len)
		buf[0] = '\0';
}

/* Keep a reading; a full list drops its oldest. */
static void record_wss(struct mtd_steady *s, uint64_t wss_bytes, uint64_t now_ms)
{
	if (s->nr_wss == MTD_STEADY_WSS_MAX) {
		for (unsigned i = 1; i < s->nr_wss; i++)
			s->wss[i - 1] = s->wss[i];
		s->nr_wss--;
	}
	s->wss[s->nr_wss].at_ms = now_ms;
	s->wss[s->nr_wss].bytes = wss_bytes;
	s->nr_wss++;
}

uint64_t mtd_steady_peak(struct mtd_steady *s, uint64_t wss_bytes, uint64_t now_ms,
			 uint64_t window_ms, bool record)
{
	unsigned keep = 0;
	uint64_t peak = wss_bytes;

	/* Forget readings older than the window (or from a clock that went back). */
	for (unsigned i = 0; i < s->nr_wss; i++) {
		if (s->wss[i].at_ms > now_ms || now_ms - s->wss[i].at_ms > window_ms)
			continue;
		s->wss[keep++] = s->wss[i];
	}
	s->nr_wss = keep;
	if (!record) /* the earlier readings alone, or this one when there are none */
		peak = s->nr_wss ? 0 : wss_bytes;
	else
		record_wss(s, wss_bytes, now_ms);
	for (unsigned i = 0; i < s->nr_wss; i++)
		if (s->wss[i].bytes > peak)
			peak = s->wss[i].bytes;
	return peak;
}

void mtd_steady_reclaim_sent(struct mtd_steady *s, uint64_t now_ms, uint64_t deadline_ms,
			     uint64_t interval_ms)
{
	if (s->nr_reclaims == MTD_STEADY_RECLAIMS) {
		/* Full: the two oldest become one window spanning both (more is left out, for
		 * a while, never less). */
		s->reclaims[1].from_ms = s->reclaims[0].from_ms;
		for (unsigned i = 1; i < s->nr_reclaims; i++)
			s->reclaims[i - 1] = s->reclaims[i];
		s->nr_reclaims--;
	}
	s->reclaims[s->nr_reclaims].from_ms = now_ms;
	s->reclaims[s->nr_reclaims].to_ms = now_ms + deadline_ms + interval_ms;
	s->nr_reclaims++;
}

void mtd_steady_reclaim_answered(struct mtd_steady *s, uint64_t now_ms, uint64_t interval_ms)
{
	if (s->nr_reclaims && s->reclaims[s->nr_reclaims - 1].from_ms <= now_ms)
		s->reclaims[s->nr_reclaims - 1].to_ms = now_ms + interval_ms;
}

bool mtd_steady_in_reclaim(const struct mtd_steady *s, uint64_t t_ms)
{
	for (unsigned i = 0; i < s->nr_reclaims; i++)
		if (t_ms > s->reclaims[i].from_ms && t_ms <= s->reclaims[i].to_ms)
			return true;
	return false;
}

uint64_t mtd_steady_echo(struct mtd_steady *s, const struct vmm_guest_stats *gs, uint64_t now_ms,
			 uint64_t cold_age_ms, bool *youngest)
{
	uint64_t pages = 0, oldest_birth = now_ms;
	unsigned n = gs->nr_gens < VMM_MAX_NR_GENS ? gs->nr_gens : VMM_MAX_NR_GENS;

	*youngest = false;
	for (unsigned i = n; i-- > 0;) {
		uint64_t birth = gs->gen[i].birth_ms;
		if (now_ms > birth && now_ms - birth > cold_age_ms)
			break; /* older than the cold age: not in the estimate anyway */
		oldest_birth = birth;
		if (!mtd_steady_in_reclaim(s, birth)) /* born while the guest reclaimed */
			continue;
		if (i == n - 1)
			*youngest = true;
		else
			pages += gs->gen[i].pages;
	}
	/* A closed window that ended before the oldest generation in the estimate was born
	 * can hold none of them again. */
	unsigned keep = 0;
	for (unsigned i = 0; i < s->nr_reclaims; i++)
		if (s->reclaims[i].to_ms >= oldest_birth)
			s->reclaims[keep++] = s->reclaims[i];
	s->nr_reclaims = keep;
	return pages << VMM_PAGE_SHIFT;
}

uint64_t mtd_steady_bound(uint64_t wss_bytes, uint64_t host_rss_bytes, bool used_known,
			  uint64_t used_bytes)
{
	if (host_rss_bytes && wss_bytes > host_rss_bytes)
		wss_bytes = host_rss_bytes;
	if (used_known && wss_bytes > used_bytes)
		wss_bytes = used_bytes;
	return wss_bytes;
}
