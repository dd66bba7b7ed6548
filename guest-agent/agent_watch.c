// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_watch.c - the growth watch: tell the host the guest is about to run out, before it does.
 *
 * memtided decides once per control interval (5 s by default) from the agent's stats.  A
 * working set that grows by a few hundred MiB fills a guest's headroom in about a second,
 * and from then on the guest reclaims or swaps: deciding at the next interval is too late.
 * So the agent watches its guest's memory in use itself, every watch_interval_ms (100 ms by
 * default: a read of /proc/meminfo and of the balloon's counters), and projects its recent
 * growth over watch_horizon_ms (2 s: about how long the host takes to hear, decide and
 * deflate the balloon under TCG).
 * Why 100 ms: a growth starts at any moment of the period, so the period is the watch's
 * worst delay.  A guest that memtided left with 128 MiB available (twice the agent's 64 MiB
 * floor) and that touches 500 MiB/s (scenario 3 under TCG: 300 MiB in 0.6 s) has about
 * 250 ms before it must swap.  With 250 ms the first deflation came 58-334 ms after the
 * growth, and at 334 ms the guest swapped out 32 MiB (CI, 6 Dec 2026).  A read of
 * /proc/meminfo costs about 9 us on this project's hosts (a few times that under TCG): ten
 * a second are well under 0.1% of a CPU.
 * When the projected growth is more than what is still available, the guest will run out
 * within the horizon, and the agent sends a `need` hint for that projected amount, which
 * memtided answers at once (need + headroom, clamped to the domain's ceiling:
 * docs/protocol.md).
 *
 * Why these rules:
 *   - "In use" is MemTotal - MemAvailable, not MemAvailable alone, with MemTotal net of the
 *     balloon (agent_balloon.c): a balloon inflating takes its pages out of both, so the
 *     host's own inflation leaves "in use" unchanged and never reads as a guest about to run
 *     out.  (Without deflate-on-oom the driver takes them out of MemTotal itself; with it,
 *     MemTotal stays and the agent subtracts them.)
 *   - A growth must also show in what the guest's processes hold (anon and shmem, in RAM or
 *     swap: agent_use_of): free pages away from the free lists while free page reporting
 *     hands them to the host make MemAvailable dip by up to 64 MiB with nothing growing
 *     (seen on the KVM host stand: needs of 597 MiB with 330 MiB available, and memtided
 *     gave back the step it had just taken and held for 60 s).
 *   - The rate over one watch step is what the workload allocates now; growth slower than
 *     watch_min_rate (16 MiB/s) is the ordinary drift of a page cache and not a reason to
 *     wake the host.
 *   - A need covers the whole horizon, so after sending one the watch is quiet for one
 *     horizon: the host has time to deflate, and is not sent a need for every 100 ms of the
 *     same growth (memtided adds each need on top of the target it already set).  Quiet
 *     only while the guest's use stays within what that need asked for: a growth that
 *     starts slowly and then speeds up outgrows a need projected from its first 100 ms, and
 *     waiting out the horizon then means swapping (scenario 3, 6 Dec: a first need of 74
 *     MiB for a 300 MiB growth, the rest 4 s later on pressure, 37 MiB swapped out).
 *   - A guest with plenty available (the balloon not inflated, or a big guest) never sends
 *     one: the projection stays under what is available.
 * The rule is a pure function of (state, now, MemTotal, MemAvailable) so the unit tests
 * drive it.
 */
#include <errno.h>
#include <string.h>

#include "agent.h"

#define MiB (1ULL << 20)

uint64_t agent_watch_step(struct agent_watch *w, const struct agent_config *c, uint64_t now_ms,
			  const struct proto_stats *st)
{
	struct agent_use u = agent_use_of(st);
	uint64_t used = u.used, avail_bytes = st->mem_available_bytes;
	uint64_t need = 0;

	bool quiet = now_ms < w->quiet_until_ms && used <= w->quiet_used_max;

	/* A reading within half a period of the last is not a rate: over a few milliseconds a
	 * fraction of a MiB of noise projects to hundreds of MiB.  The watch that runs beside a
	 * reclaim request reads at once when it starts, often just after the loop's own read,
	 * and one such pair sent a need with no growth at all (CI, scenario 3: the balloon went
	 * back to 1024 MiB and held).  Skipped whole: the last reading stays the base. */
	if (w->primed && now_ms < w->last_ms + c->watch_interval_ms / 2)
		return 0;

	uint64_t grew = agent_use_rise(w->last, u);
	if (w->primed && now_ms > w->last_ms && !quiet && grew) {
		uint64_t dt = now_ms - w->last_ms;
		/* bytes per second, then over the horizon; no overflow for any growth below
		 * 2^44 bytes per step */
		uint64_t rate = grew * 1000 / dt;
		uint64_t projected = rate * c->watch_horizon_ms / 1000;

		if (rate >= c->watch_min_rate_bytes && projected > avail_bytes) {
			need = (projected + MiB - 1) & ~(MiB - 1);
			w->quiet_until_ms = now_ms + c->watch_horizon_ms;
			w->quiet_used_max = used + need;
		}
	}
	w->primed = true;
	w->last_ms = now_ms;
	w->last = u;
	return need;
}

int agent_watch_read(const struct agent_config *c, struct proto_stats *st)
{
	return agent_read_meminfo(c, st);
}
