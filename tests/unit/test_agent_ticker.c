// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_ticker.c - the agent's periodic thread (guest-agent/agent_ticker.c).
 *
 * The growth watch and the growth guard run on tickers while a reclaim request holds the
 * agent's loop.  What they rely on: the first call comes at once (a growth already under
 * way is seen before the request's first chunk), calls go on until stop, and once stop
 * returns no call is running or will run (the guard's signal must never reach a thread that
 * has moved on).  Real threads and a real clock; every wait is on a condition, none on a
 * sleep standing in for one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <time.h>

#include <cmocka.h>

#include "agent.h"

struct counter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned calls;
	atomic_bool inside;     /* a call is running */
	atomic_uint after_stop; /* calls that began after stop returned */
	atomic_bool stopped;
};

static void count_call(void *arg)
{
	struct counter *k = arg;

	atomic_store(&k->inside, true);
	if (atomic_load(&k->stopped))
		atomic_fetch_add(&k->after_stop, 1);
	pthread_mutex_lock(&k->mu);
	k->calls++;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	atomic_store(&k->inside, false);
}

static void counter_init(struct counter *k)
{
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->calls = 0;
	atomic_init(&k->inside, false);
	atomic_init(&k->after_stop, 0);
	atomic_init(&k->stopped, false);
}

/* Wait (at most 10 s) until at least n calls; returns the count seen. */
static unsigned wait_calls(struct counter *k, unsigned n)
{
	struct timespec ts;
	unsigned got;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&k->mu);
	while (k->calls < n && pthread_cond_timedwait(&k->cv, &k->mu, &ts) != ETIMEDOUT)
		;
	got = k->calls;
	pthread_mutex_unlock(&k->mu);
	return got;
}

/* A period of an hour: only the call at start can come within the test. */
static void test_first_call_at_once(void **state)
{
	struct agent_ticker t;
	struct counter k;

	(void)state;
	counter_init(&k);
	assert_int_equal(agent_ticker_start(&t, 3600 * 1000, count_call, &k), 0);
	assert_int_equal(wait_calls(&k, 1), 1);
	agent_ticker_stop(&t);
	assert_int_equal(k.calls, 1);
}

static void test_calls_repeat_and_end_at_stop(void **state)
{
	struct agent_ticker t;
	struct counter k;

	(void)state;
	counter_init(&k);
	assert_int_equal(agent_ticker_start(&t, 1, count_call, &k), 0);
	assert_true(wait_calls(&k, 20) >= 20);
	agent_ticker_stop(&t);
	atomic_store(&k.stopped, true);
	assert_false(atomic_load(&k.inside)); /* stop waited for the call in progress */
	unsigned at_stop = k.calls;
	/* Give a stray call every chance to show: a second ticker's 20 calls take as long as
	 * the first's did. */
	struct counter k2;
	counter_init(&k2);
	assert_int_equal(agent_ticker_start(&t, 1, count_call, &k2), 0);
	assert_true(wait_calls(&k2, 20) >= 20);
	agent_ticker_stop(&t);
	assert_int_equal(k.calls, at_stop);
	assert_int_equal(atomic_load(&k.after_stop), 0);
}

static void test_bad_arguments(void **state)
{
	struct agent_ticker t;
	struct counter k;

	(void)state;
	counter_init(&k);
	assert_int_equal(agent_ticker_start(&t, 0, count_call, &k), -EINVAL);
	assert_int_equal(agent_ticker_start(&t, 10, NULL, &k), -EINVAL);
	assert_int_equal(agent_ticker_start(NULL, 10, count_call, &k), -EINVAL);
	agent_ticker_stop(NULL); /* a no-op, as on a ticker that never started */
	assert_int_equal(k.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_first_call_at_once),
	    cmocka_unit_test(test_calls_repeat_and_end_at_stop),
	    cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
