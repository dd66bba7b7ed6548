// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_ticker.c - a thread that calls one function every period until told to stop.
 *
 * While a reclaim request runs, the loop's thread is inside it for up to its deadline, and
 * two things must still happen on time: the growth watch that tells memtided the guest
 * needs memory (agent_loop.c) and the guard that stops the request when the guest grows
 * (agent_reclaim_guard.c).  Each runs on a ticker of its own, started and stopped by the
 * thread that reclaims.
 *
 * The function is called with the ticker's mutex held, the first time at once.  That is
 * what makes stop a promise: once agent_ticker_stop returns, the function is not running
 * and never runs again, so it may touch what the stopping thread owns (the guard signals
 * the reclaiming thread; after stop, no signal can be on its way).  The stopping thread
 * waits at most for one call to finish.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "agent.h"

static void *ticker_thread(void *arg)
{
	struct agent_ticker *t = arg;

	pthread_mutex_lock(&t->mu);
	while (!t->over) {
		struct timespec ts;

		t->fn(t->arg);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)(t->period_ms % 1000) * 1000000L;
		ts.tv_sec += (time_t)(t->period_ms / 1000) + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		while (!t->over && pthread_cond_timedwait(&t->cv, &t->mu, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

int agent_ticker_start(struct agent_ticker *t, uint32_t period_ms, void (*fn)(void *), void *arg)
{
	pthread_condattr_t ca;
	int rc;

	if (!t || !fn || period_ms == 0)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->period_ms = period_ms;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_init(&t->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* a clock step must not stall it */
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&t->th, NULL, ticker_thread, t);
	if (rc != 0) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mu);
		return -rc;
	}
	t->running = true;
	return 0;
}

void agent_ticker_stop(struct agent_ticker *t)
{
	if (!t || !t->running)
		return;
	pthread_mutex_lock(&t->mu);
	t->over = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->th, NULL);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	t->running = false;
}
