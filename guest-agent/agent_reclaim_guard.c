// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_reclaim_guard.c - stop a reclaim request the moment the guest starts to grow.
 *
 * A reclaim request (agent_reclaim.c) swaps out or drops what memtided called cold, at tens
 * of MiB a second under TCG.  When the guest starts allocating fast meanwhile, it needs that
 * memory back, not pushed further out: memtided deflates as soon as it hears (the growth
 * watch's need), and every page the request still swaps out after the growth began is a
 * page the guest swapped in its own growth (scenario 3 counts them: at most 2% of the
 * growth).  Checking between chunks was not enough: one write to memory.reclaim cannot be
 * checked inside, and under a growth a write took 386 ms; the runs of 7 Dec that met a
 * request swapped out 7-9 MiB after the growth began, at the request's own pace, where
 * growths that met none swapped 0-4 MiB.
 *
 * So while a request runs, a guard thread reads the guest's use (MemTotal - MemAvailable, and
 * what its processes hold: agent_use_of says why both) every GUARD_PERIOD_MS and, when both
 * rise AGENT_GROWTH_STOP_BYTES above the lowest they read,
 * marks the request grown and sends the reclaiming thread a signal.  memory.reclaim checks
 * for a pending signal before each reclaim pass and returns EINTR: on the guests' 6.1 a pass
 * is what is left of the write, so the signal ends a write that has fallen short and is
 * retrying, and a write blocked elsewhere (later kernels reclaim in smaller passes and stop
 * sooner); a pause sleeping between chunks wakes too.  A pass itself runs on, which is why
 * chunks are sized to take 50-150 ms (agent_reclaim.c): one chunk is how late a stop can be.
 * The signal is SIGURG, with a handler that does nothing and no SA_RESTART: the agent uses
 * no socket's out-of-band data, so nothing else in the process gives SIGURG a meaning.
 * The thread is an agent_ticker (agent_ticker.c), whose stop guarantees no signal after it.
 *
 * Why the rise above the lowest: reclaim only lowers the figure (into zram it stays about
 * level: a page compressed into the pool is still in use), so a rise is the guest
 * allocating faster than reclaim frees.  16 MiB is 64-85 ms of scenario 3's growth
 * (250-300 MiB/s less what reclaim frees), and more than the few MiB a guest's page tables
 * and slab drift by within a request.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "agent.h"

#define GUARD_PERIOD_MS 20 /* a /proc/meminfo read: tens of microseconds under TCG */

uint64_t agent_growth_step(struct agent_growth *g, struct agent_use u)
{
	if (u.used < g->low.used)
		g->low.used = u.used;
	if (u.held < g->low.held)
		g->low.held = u.held;
	uint64_t rise = agent_use_rise(g->low, u);
	return rise >= AGENT_GROWTH_STOP_BYTES ? rise : 0;
}

static void on_sigurg(int sig)
{
	(void)sig; /* its arrival is the message: the write it interrupts returns EINTR */
}

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_rc;

static void install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigurg;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: the write must end */
	handler_rc = sigaction(SIGURG, &sa, NULL) < 0 ? -errno : 0;
}

/* One look, every GUARD_PERIOD_MS (the ticker holds its mutex: after stop, no signal). */
static void guard_tick(void *arg)
{
	struct agent_growth_guard *g = arg;
	uint64_t grew = atomic_load(&g->grew);
	struct proto_stats st;

	if (!grew && agent_read_meminfo(g->c, &st) == 0)
		grew = agent_growth_step(&g->base, agent_use_of(&st));
	if (grew) {
		atomic_store(&g->grew, grew);
		/* Again every period until the request ends: a signal that lands between two
		 * system calls interrupts neither, and the next write would run whole (seen in a
		 * unit test on a loaded host: the FIFO write blocked 10 s). */
		pthread_kill(g->reclaimer, SIGURG);
	}
}

int agent_growth_guard_start(struct agent_growth_guard *g, const struct agent_config *c)
{
	memset(g, 0, sizeof(*g));
	g->c = c;
	atomic_init(&g->grew, 0);
	pthread_once(&handler_once, install_handler);
	if (handler_rc < 0)
		return handler_rc;
	g->reclaimer = pthread_self();
	/* The base is read here, before the request starts: read first by the thread, it missed
	 * a growth that came before the thread ran (a unit test on a loaded host). */
	struct proto_stats st;
	g->base.low = (struct agent_use){UINT64_MAX, UINT64_MAX};
	if (agent_read_meminfo(c, &st) == 0)
		(void)agent_growth_step(&g->base, agent_use_of(&st));
	return agent_ticker_start(&g->tick, GUARD_PERIOD_MS, guard_tick, g);
}

uint64_t agent_growth_guard_grew(struct agent_growth_guard *g)
{
	return atomic_load(&g->grew);
}

void agent_growth_guard_stop(struct agent_growth_guard *g)
{
	agent_ticker_stop(&g->tick);
}
