// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_bounds.c - a guest agent's figures bounded by its VM (agent_bounds.h has the rules
 * and why).  Every clamp names the field, what was said and the bound, so the sentence an
 * operator reads in `vm show` and the log says what the agent claimed.
 */
#include "act/agent_bounds.h"

#include <inttypes.h>
#include <stdio.h>

#define MiB (1024.0 * 1024.0)

/* Clamp *v to max: 1 when it was over (the first over, into why). */
static unsigned clamp_size(uint64_t *v, uint64_t max, const char *what, const char *bound,
			   unsigned so_far, char *why, size_t whylen)
{
	if (*v <= max)
		return 0;
	if (!so_far && why && whylen)
		snprintf(why, whylen, "%s %.0f MiB, over %s (%.0f MiB)", what, (double)*v / MiB,
			 bound, (double)max / MiB);
	*v = max;
	return 1;
}

unsigned mtd_agent_bound_stats(struct proto_stats *st, uint64_t ram_bytes,
			       struct mtd_agent_counter_state *cs, uint64_t now_ms, char *why,
			       size_t whylen)
{
	unsigned n = 0;

	if (ram_bytes) {
		n += clamp_size(&st->mem_total_bytes, ram_bytes, "MemTotal", "the VM's RAM", n, why,
				whylen);
		uint64_t *part[] = {&st->mem_free_bytes, &st->mem_available_bytes,
				    &st->cached_bytes, &st->anon_bytes, &st->shmem_bytes};
		static const char *const name[] = {"MemFree", "MemAvailable", "Cached", "AnonPages",
						   "Shmem"};
		for (unsigned i = 0; i < sizeof(part) / sizeof(part[0]); i++)
			n += clamp_size(part[i], st->mem_total_bytes, name[i], "MemTotal", n, why,
					whylen);
	}
	uint64_t *ctr[MTD_AGENT_COUNTERS] = {&st->refault_anon, &st->refault_file, &st->pgmajfault,
					     &st->pswpin, &st->pswpout};
	static const char *const cname[MTD_AGENT_COUNTERS] = {"workingset_refault_anon",
							      "workingset_refault_file",
							      "pgmajfault", "pswpin", "pswpout"};
	const uint64_t burst = MTD_AGENT_PAGES_PER_S_MAX * MTD_AGENT_COUNTER_GRACE_MS / 1000;
	uint64_t dt = cs->set && now_ms > cs->at_ms ? now_ms - cs->at_ms : 0;
	/* dt of a silent peer may be long: the bucket is full after the grace anyway */
	uint64_t refill =
	    dt >= MTD_AGENT_COUNTER_GRACE_MS ? burst : MTD_AGENT_PAGES_PER_S_MAX * dt / 1000;
	for (unsigned i = 0; i < MTD_AGENT_COUNTERS; i++) {
		uint64_t raw = *ctr[i];
		cs->budget[i] =
		    !cs->set || cs->budget[i] + refill > burst ? burst : cs->budget[i] + refill;
		if (cs->set && raw >= cs->raw[i]) {
			uint64_t d = raw - cs->raw[i];
			if (d > cs->budget[i]) {
				if (!n && why && whylen)
					snprintf(why, whylen,
						 "%s up %" PRIu64 " pages in %.1f s, over %" PRIu64
						 " a second",
						 cname[i], d, (double)dt / 1000,
						 (uint64_t)MTD_AGENT_PAGES_PER_S_MAX);
				d = cs->budget[i];
				n++;
			}
			cs->budget[i] -= d;
			cs->out[i] += d;
		} /* else the session's first, or a restarted count: it adds nothing */
		cs->raw[i] = raw;
		*ctr[i] = cs->out[i];
	}
	cs->set = true;
	cs->at_ms = now_ms;
	return n;
}

/* Scale v[0..n) (each *mul bytes) down together so that their sum is at most max bytes. */
static unsigned scale_down(uint64_t *const *v, unsigned count, uint64_t mul, uint64_t max,
			   const char *what, unsigned so_far, char *why, size_t whylen)
{
	double sum = 0;

	for (unsigned i = 0; i < count; i++)
		sum += (double)*v[i] * (double)mul;
	if (sum <= (double)max)
		return 0;
	if (!so_far && why && whylen)
		snprintf(why, whylen, "%s %.0f MiB in all, over the VM's RAM (%.0f MiB)", what,
			 sum / MiB, (double)max / MiB);
	double f = (double)max / sum;
	for (unsigned i = 0; i < count; i++)
		*v[i] = (uint64_t)((double)*v[i] * f);
	return 1;
}

unsigned mtd_agent_bound_wss(struct proto_wss *w, uint64_t ram_bytes, uint32_t page_size, char *why,
			     size_t whylen)
{
	uint64_t
	    *v[2 * (PROTO_MAX_WSS_BINS > PROTO_MAX_GENS ? PROTO_MAX_WSS_BINS : PROTO_MAX_GENS)];
	unsigned n = 0, k = 0;

	if (!ram_bytes)
		return 0;
	for (uint32_t i = 0; i < w->nr_bins && i < PROTO_MAX_WSS_BINS; i++) {
		v[k++] = &w->bins[i].anon_bytes;
		v[k++] = &w->bins[i].file_bytes;
	}
	n += scale_down(v, k, 1, ram_bytes, "the working-set report's bins", n, why, whylen);
	k = 0;
	for (uint32_t i = 0; i < w->nr_gens && i < PROTO_MAX_GENS; i++) {
		v[k++] = &w->gens[i].anon_pages;
		v[k++] = &w->gens[i].file_pages;
	}
	n += scale_down(v, k, page_size ? page_size : 4096, ram_bytes,
			"the working-set report's generations", n, why, whylen);
	return n;
}

unsigned mtd_agent_bound_reply(struct proto_reclaim_reply *r, uint64_t ram_bytes, char *why,
			       size_t whylen)
{
	unsigned n = 0;

	if (!ram_bytes)
		return 0;
	n +=
	    clamp_size(&r->freed_bytes, ram_bytes, "reclaim freed", "the VM's RAM", n, why, whylen);
	n += clamp_size(&r->mem_available_bytes, ram_bytes, "reclaim MemAvailable", "the VM's RAM",
			n, why, whylen);
	n +=
	    clamp_size(&r->floor_bytes, ram_bytes, "reclaim floor", "the VM's RAM", n, why, whylen);
	for (uint32_t i = 0; i < r->nr_steps && i < PROTO_MAX_RECLAIM_STEPS; i++)
		n += clamp_size(&r->steps[i].freed_bytes, ram_bytes, "a reclaim step's freed",
				"the VM's RAM", n, why, whylen);
	return n;
}
