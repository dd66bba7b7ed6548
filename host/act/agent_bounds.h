/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_bounds.h - what a guest agent may say about its own VM: every figure it reports,
 * bounded by what is physically possible for that VM.
 *
 * proto's validator checks the wire (types, and bounds any VM could meet: a size up to
 * 2^52 bytes, a counter up to 2^53); it cannot know the VM.  Within those, an agent could
 * still say its guest uses 4 PiB of a 1 GiB VM, or jump a refault counter by 2^50 in a
 * second (a refault rate of 8e14 % shown in `vm show`).  Here, on arrival (agent_link.c),
 * before any figure reaches a decision, the status, the log or /metrics:
 *   - sizes: MemTotal at most the VM's RAM; MemFree, MemAvailable, Cached, AnonPages and
 *     Shmem at most MemTotal; the working-set report's bins and generations at most the
 *     RAM in all (scaled down together); a reclaim reply's figures at most the RAM;
 *   - counters (workingset_refault_anon/file, pgmajfault, pswpin, pswpout): each may grow
 *     by at most MTD_AGENT_PAGES_PER_S_MAX a second, with a burst of
 *     MTD_AGENT_COUNTER_GRACE_MS of it for reports that queued and arrive together (a
 *     bucket per counter: a peer that reports a hundred times a second gains nothing).
 *     What is passed on counts from the link's start: the first report of a session (a
 *     guest's count since its boot, whatever it is) and a count that went back (a restart)
 *     add nothing, so neither a new session nor a lie in its first report reads as a burst
 *     of refaults.
 * A figure beyond its bound is clamped to it and counted; the peer is then marked
 * untrusted with a sentence naming the first such figure (agent_link.c shows it).  A
 * need (an application's hint) beyond the RAM is clamped without a mark: asking is not
 * lying.  A VM whose RAM size is not known yet (0) gets the counter bounds only.
 *
 * Pure; not thread-safe on the same state.
 */
#ifndef MEMTIDE_HOST_AGENT_BOUNDS_H
#define MEMTIDE_HOST_AGENT_BOUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* No guest moves pages faster than its memory bus: 2^25 4 KiB pages a second is 128 GiB/s,
 * above any a VM has; a guest that faults or swaps that fast has no time to do anything
 * else. */
#define MTD_AGENT_PAGES_PER_S_MAX  (1ULL << 25)
#define MTD_AGENT_COUNTER_GRACE_MS 2000 /* reports that queued arrive together */
#define MTD_AGENT_COUNTERS         5

/* The counters as reported (raw, this session) and as passed on (out, since the state was
 * zeroed: the link's start), and what each may still grow by now (budget).  A new session
 * clears set only. */
struct mtd_agent_counter_state {
	bool set;
	uint64_t at_ms;
	uint64_t raw[MTD_AGENT_COUNTERS], out[MTD_AGENT_COUNTERS];
	uint64_t budget[MTD_AGENT_COUNTERS];
};

/* Bound a stats report of a VM of ram_bytes (0: unknown) arriving at now_ms.  Returns how
 * many figures were clamped; why (when not NULL) gets a sentence on the first. */
unsigned mtd_agent_bound_stats(struct proto_stats *st, uint64_t ram_bytes,
			       struct mtd_agent_counter_state *cs, uint64_t now_ms, char *why,
			       size_t whylen);
/* Bound a wss report: bins (bytes) and generations (pages of page_size bytes). */
unsigned mtd_agent_bound_wss(struct proto_wss *w, uint64_t ram_bytes, uint32_t page_size, char *why,
			     size_t whylen);
/* Bound a reclaim reply. */
unsigned mtd_agent_bound_reply(struct proto_reclaim_reply *r, uint64_t ram_bytes, char *why,
			       size_t whylen);

#endif /* MEMTIDE_HOST_AGENT_BOUNDS_H */
