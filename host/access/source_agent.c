// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_agent.c - the agent's reports as an access-bit source (see source.h).
 *
 * The guest agent knows *how much* memory its guest touched within each idle age (the
 * guest's own multi-generational LRU, reported as wss bins) but not *where*: a guest cannot
 * see its guest-physical accessed bits in the host's EPT.  This source therefore lays the
 * amount over libvmm's pages: every round it starts a new generation and marks young the
 * `young` bytes (memory the guest touched within the last two of its agings: the wss bins
 * that start below 3/2 intervals, agent_link.c says why) at the bottom of guest RAM.
 * Because the young set of a shorter age is then always inside that of a longer one,
 * libvmm's generations reproduce the guest's own histogram, and its working-set estimate
 * and refault accounting work unchanged.
 * Addresses from this source are a layout, not the guest's: they are never used to unmap
 * anything (the balloon driver picks its own pages inside the guest).
 *
 * Hints do carry real guest-physical ranges (the agent translated them through pagemap):
 * hot ranges are applied with vmm_hint_access, cold ones with vmm_hint_cold.  Ranges beyond
 * the layout are ignored (libvmm returns -ERANGE).
 *
 * What the guest holds outside its LRU (the kernel's own allocations, slab, page tables, a zram
 * pool: MemTotal - MemFree less every page in the MGLRU's generations) is counted young as
 * well: no reclaim the agent runs can free it, and a balloon target that left it out
 * squeezed the guest into pressure once the balloon reached it (scenario 3, 2 of 3 runs;
 * docs/results.md, sim_actuators).  The MGLRU reports only the pages on its lists; the stats
 * say how much the guest uses in all.  The two are read at different moments, and while the
 * guest reclaims they differ by what it freed in between; the working set keeps a young
 * reading for a whole cold age, so one such reading would give the guest its memory back
 * (one run of scenario 2 grew its target 461 -> 845 MiB just after a reclaim reply, which
 * fits such a reading; its log did not show the readings).  So a pair taken over a second
 * apart is not used, and the figure is the least of the last three: a real rise, such as a
 * zram pool that grows with each reclaim, shows within three reports.
 *
 * Without a new wss report since the last round the previous amount is re-marked: a guest
 * whose agent reports less often than the daemon's interval does not look idle.  An agent
 * that sends no wss at all (its guest runs without MGLRU) is read through its stats instead:
 * MemTotal - MemAvailable counts as young, a high estimate, so only free and easily
 * reclaimed memory is taken from such a guest.  (The agent's MemTotal is net of the pages a
 * deflate-on-oom balloon holds, guest-agent/agent_balloon.c: the kernel counts them as
 * allocated, and memtided's own inflation would otherwise read as the guest's growth.)
 */
#include "access/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "act/agent_link.h"
#include "base/log.h"
#include "vmm.h"

/* wss reports of a session not read (agent_age says why). */
#define SETTLE_REPORTS 2

struct agent_src {
	struct mtd_agent_link *link;
	struct vmm_range ram;   /* [0, guest bytes) */
	uint64_t last_wss_seq;  /* the wss report used last round */
	uint64_t young_bytes;   /* from that report, outside_bytes included */
	uint64_t outside_bytes; /* the guest's use outside its LRU: the least of the last few */
	struct mtd_outside_filter outside;
	const char *estimate;   /* what young_bytes was last read from (vm show) */
	bool by_age;            /* ...the guest's own page ages (MGLRU), not its use */
	uint64_t silence_ms;    /* fresh while the agent spoke within this */
	uint64_t interval_ms;   /* the agent ages its MGLRU once an interval */
	uint64_t session;       /* the link's connects + re-hellos when last seen */
	unsigned settled;       /* wss reports seen in this session, up to SETTLE_REPORTS */
	struct proto_hint hint; /* scratch, 4 KiB: off the stack */
};

/* Bytes in bins that start below 3/2 intervals (the bins are ascending by age; the agent may
 * not use the edges agent_link asked for, so the edges are read, not assumed). */
uint64_t mtd_agent_young_bytes(const struct proto_wss *w, uint64_t interval_ms)
{
	uint64_t b = 0, young_ms = interval_ms * 3 / 2;

	for (uint32_t i = 0; i < w->nr_bins && i < PROTO_MAX_WSS_BINS; i++) {
		if (w->bins[i].min_age_ms >= young_ms)
			break;
		b += w->bins[i].anon_bytes + w->bins[i].file_bytes;
	}
	return b;
}

/* Every page in the report's bins: the guest's LRU, young and old. */
static uint64_t lru_bytes(const struct proto_wss *w)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < w->nr_bins && i < PROTO_MAX_WSS_BINS; i++)
		b += w->bins[i].anon_bytes + w->bins[i].file_bytes;
	return b;
}

uint64_t mtd_agent_outside_lru_bytes(const struct proto_stats *st, const struct proto_wss *w)
{
	if (!st || !w || st->mem_total_bytes < st->mem_free_bytes)
		return 0;
	/* Taken more than a second apart, the two reports describe different guests: one
	 * read before a reclaim and one after it differ by all it freed. */
	uint64_t apart =
	    st->mono_ms > w->mono_ms ? st->mono_ms - w->mono_ms : w->mono_ms - st->mono_ms;
	if (apart > MTD_OUTSIDE_APART_MS)
		return UINT64_MAX;
	uint64_t used = st->mem_total_bytes - st->mem_free_bytes, lru = lru_bytes(w);

	return used > lru ? used - lru : 0;
}

uint64_t mtd_agent_outside_note(struct mtd_outside_filter *f, uint64_t sample)
{
	if (sample != UINT64_MAX) {
		f->v[f->next] = sample;
		f->next = (f->next + 1) % MTD_OUTSIDE_SAMPLES;
		if (f->n < MTD_OUTSIDE_SAMPLES)
			f->n++;
	}
	uint64_t least = f->n ? UINT64_MAX : 0;
	for (unsigned i = 0; i < f->n; i++)
		if (f->v[i] < least)
			least = f->v[i];
	return least;
}

/* A new agent session (a connect, or an agent restarted on an open stream) starts over:
 * its first reports carry no idle history (agent_age), and its readings outside the LRU
 * are of a guest that may have changed meanwhile. */
static void note_session(struct agent_src *s)
{
	struct mtd_agent_link_counters c;

	mtd_agent_link_counters(s->link, &c);
	if (c.connects + c.rehellos == s->session)
		return;
	s->session = c.connects + c.rehellos;
	s->settled = 0;
	s->outside = (struct mtd_outside_filter){0};
}

static int agent_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct agent_src *s = ctx;
	uint64_t seq;
	const struct proto_wss *w = mtd_agent_link_wss(s->link, &seq);
	int rc = vmm_age_begin(g, now_ms);

	if (rc < 0)
		return rc;
	note_session(s);
	bool fresh = w && seq != s->last_wss_seq;
	/* The first reports of a session have no idle history: a generation's idle age is the
	 * birth age of the next younger one, and until the agent has aged twice that is the
	 * first aging, just now, for every page the guest holds ("young 589 MiB" of a guest
	 * whose hot set is 200 MiB, in two reports running).  Laid as young, that reading
	 * stays in the working set for a cold age, and again later whenever the cold age
	 * rises past it: scenario 2's target grew 461 -> 591 MiB on a refault 24 s after
	 * attach, and the 60 s hold after a step given back cut its minute short. */
	if (fresh && s->settled < SETTLE_REPORTS) {
		s->last_wss_seq = seq;
		s->settled++;
		mtd_debug("agent wss: report %u of the session, no idle history yet: not read",
			  s->settled);
		if (!s->estimate)
			return -EAGAIN; /* nothing known yet: the estimate waits */
		fresh = false;
	}
	if (fresh) {
		s->last_wss_seq = seq;
		uint64_t sseq;
		uint64_t reading =
		    mtd_agent_outside_lru_bytes(mtd_agent_link_stats(s->link, &sseq), w);
		s->outside_bytes = mtd_agent_outside_note(&s->outside, reading);
		s->young_bytes = mtd_agent_young_bytes(w, s->interval_ms) + s->outside_bytes;
		s->estimate = "guest MGLRU";
		s->by_age = true;
		if (mtd_log_enabled(MTD_LOG_DEBUG)) {
			char line[512];
			int n = 0;
			for (uint32_t i = 0; i < w->nr_gens && i < PROTO_MAX_GENS && n < 400; i++)
				n += snprintf(line + n, sizeof(line) - (size_t)n,
					      " [%u/%u seq %llu %llu ms %llu+%llu]",
					      w->gens[i].memcg_id, w->gens[i].node,
					      (unsigned long long)w->gens[i].seq,
					      (unsigned long long)w->gens[i].age_ms,
					      (unsigned long long)w->gens[i].anon_pages,
					      (unsigned long long)w->gens[i].file_pages);
			mtd_debug("agent wss: young %llu MiB (%llu outside the LRU, read %lld) of "
				  "gens%s",
				  (unsigned long long)(s->young_bytes >> 20),
				  (unsigned long long)(s->outside_bytes >> 20),
				  reading == UINT64_MAX ? -1LL : (long long)(reading >> 20), line);
		}
	} else if (!w) {
		/* No wss from this agent (its guest runs without MGLRU): every byte the guest
		 * cannot give up easily, MemTotal - MemAvailable, counts as young.  The estimate
		 * is high, so only free and easily reclaimed memory is ever taken. */
		uint64_t sseq;
		const struct proto_stats *st = mtd_agent_link_stats(s->link, &sseq);
		if (!st)
			return -EAGAIN;
		s->young_bytes = st->mem_total_bytes > st->mem_available_bytes
				     ? st->mem_total_bytes - st->mem_available_bytes
				     : 0;
		s->outside_bytes = 0;
		s->estimate = "MemAvailable fallback";
		s->by_age = false;
	}
	uint64_t span = s->ram.end - s->ram.start;
	uint64_t pages = (s->young_bytes < span ? s->young_bytes : span) >> VMM_PAGE_SHIFT;
	if (pages)
		rc = vmm_mark_young(g, s->ram.start, pages, false);
	while (rc >= 0 && mtd_agent_link_take_hint(s->link, &s->hint)) {
		for (uint32_t i = 0; i < s->hint.nr_ranges && i < PROTO_MAX_HINT_RANGES; i++) {
			uint64_t gpa = s->hint.ranges[i].start;
			uint64_t n = s->hint.ranges[i].bytes >> VMM_PAGE_SHIFT;
			if (s->hint.kind == PROTO_HINT_HOT)
				(void)vmm_hint_access(g, gpa, n);
			else if (s->hint.kind == PROTO_HINT_COLD)
				(void)vmm_hint_cold(g, gpa, n);
		}
	}
	return rc < 0 ? rc : 0;
}

static bool agent_fresh(void *ctx, uint64_t now_ms)
{
	struct agent_src *s = ctx;
	uint64_t t = mtd_agent_link_last_heard(s->link);

	return mtd_agent_link_ready(s->link) && t && now_ms - t <= s->silence_ms;
}

static const char *agent_estimate(void *ctx, bool *by_age)
{
	const struct agent_src *s = ctx;

	*by_age = s->by_age;
	return s->estimate ? s->estimate : "none yet (no report from the agent)";
}

static int agent_describe(void *ctx, char *buf, size_t len)
{
	const struct agent_src *s = ctx;

	if (!s->estimate)
		return -EAGAIN;
	if (s->by_age)
		snprintf(buf, len,
			 "amounts from the guest's own LRU, laid over low RAM: %llu MiB used "
			 "recently, %llu MiB of it outside the LRU (kernel, slab, zram pool)",
			 (unsigned long long)(s->young_bytes >> 20),
			 (unsigned long long)(s->outside_bytes >> 20));
	else
		snprintf(buf, len,
			 "amounts from the guest's use, laid over low RAM: %llu MiB in use "
			 "(MemTotal - MemAvailable)",
			 (unsigned long long)(s->young_bytes >> 20));
	return 0;
}

static void agent_destroy(void *ctx)
{
	free(ctx);
}

static const struct mtd_source_ops agent_ops = {
    .name = "agent",
    .per_page = false, /* amounts of memory, laid over the first pages of RAM */
    .age = agent_age,
    .evicted = NULL,
    .fresh = agent_fresh,
    .describe = agent_describe,
    .estimate = agent_estimate,
    .destroy = agent_destroy,
};

int mtd_source_agent_new(struct mtd_agent_link *link, uint64_t guest_bytes, uint64_t interval_ms,
			 uint64_t silence_ms, struct mtd_source *out)
{
	struct agent_src *s;

	guest_bytes &= ~(VMM_PAGE_SIZE - 1);
	if (!link || guest_bytes == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->link = link;
	s->ram = (struct vmm_range){0, guest_bytes};
	s->silence_ms = silence_ms;
	s->interval_ms = interval_ms;
	*out = (struct mtd_source){.ops = &agent_ops, .ctx = s, .ram = &s->ram, .nr_ram = 1};
	return 0;
}
