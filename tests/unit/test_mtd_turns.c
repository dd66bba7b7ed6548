// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_turns.c - first come, first served turns (host/base/turns.c).
 *
 * With one slot, threads that asked while it was busy are let in in the order they asked,
 * one at a time; with two slots two run at once and a third waits for one of them; a zeroed
 * struct (tests that build a daemon by hand) lets every caller in without a turn.  The
 * threads' order is set by waiting until each is seen queued (waited_total under the lock),
 * not by sleeping.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/turns.h"

#define NR_WAITERS 5

struct run {
	struct mtd_turns *t;
	atomic_int *order; /* next admission number */
	int admitted;      /* this thread's admission number */
	atomic_int *running, *most_running;
	atomic_bool *release; /* the turn ends when set */
};

static void *take_one(void *arg)
{
	struct run *r = arg;
	bool taken = mtd_turns_take(r->t);

	r->admitted = atomic_fetch_add(r->order, 1);
	int now = atomic_fetch_add(r->running, 1) + 1;
	int most = atomic_load(r->most_running);
	while (now > most && !atomic_compare_exchange_weak(r->most_running, &most, now)) {
	}
	while (!atomic_load(r->release))
		sched_yield();
	atomic_fetch_sub(r->running, 1);
	mtd_turns_give(r->t, taken);
	return NULL;
}

static uint64_t waited(struct mtd_turns *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->waited_total;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void wait_queued(struct mtd_turns *t, uint64_t n)
{
	while (waited(t) < n)
		sched_yield();
}

static void test_one_slot_in_order(void **state)
{
	struct mtd_turns t;
	atomic_int order = 0, running = 0, most = 0;
	atomic_bool release = false;
	struct run r[NR_WAITERS];
	pthread_t th[NR_WAITERS];
	(void)state;

	assert_int_equal(mtd_turns_init(&t, 1), 0);
	bool mine = mtd_turns_take(&t); /* the slot is busy: every thread below must queue */
	assert_true(mine);
	for (int i = 0; i < NR_WAITERS; i++) {
		r[i] = (struct run){&t, &order, -1, &running, &most, &release};
		assert_int_equal(pthread_create(&th[i], NULL, take_one, &r[i]), 0);
		wait_queued(&t, (uint64_t)i + 1); /* thread i is queued before i + 1 starts */
	}
	assert_int_equal(atomic_load(&order), 0); /* nobody got in while the slot was held */
	atomic_store(&release, true);
	mtd_turns_give(&t, mine);
	for (int i = 0; i < NR_WAITERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < NR_WAITERS; i++)
		assert_int_equal(r[i].admitted, i); /* first come, first served */
	assert_int_equal(atomic_load(&most), 1);    /* one at a time */
	assert_int_equal(t.busy, 0);
	assert_null(t.head);
	mtd_turns_destroy(&t);
}

static void test_two_slots(void **state)
{
	struct mtd_turns t;
	atomic_int order = 0, running = 0, most = 0;
	atomic_bool release = false;
	struct run r[3];
	pthread_t th[3];
	(void)state;

	assert_int_equal(mtd_turns_init(&t, 2), 0);
	for (int i = 0; i < 3; i++)
		r[i] = (struct run){&t, &order, -1, &running, &most, &release};
	assert_int_equal(pthread_create(&th[0], NULL, take_one, &r[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, take_one, &r[1]), 0);
	while (atomic_load(&running) < 2) /* both in at once, neither queued */
		sched_yield();
	assert_int_equal(waited(&t), 0);
	assert_int_equal(pthread_create(&th[2], NULL, take_one, &r[2]), 0);
	wait_queued(&t, 1); /* the third waits */
	assert_int_equal(atomic_load(&order), 2);
	atomic_store(&release, true);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(r[2].admitted, 2);
	assert_int_equal(atomic_load(&most), 2);
	assert_int_equal(t.busy, 0);
	mtd_turns_destroy(&t);
}

static void test_zeroed_and_bad(void **state)
{
	struct mtd_turns t;
	(void)state;

	memset(&t, 0, sizeof(t));
	assert_false(mtd_turns_take(&t)); /* no limit: no turn to give back */
	mtd_turns_give(&t, false);
	assert_int_equal(mtd_turns_init(&t, 0), -EINVAL);
	assert_false(mtd_turns_take(&t));
	mtd_turns_destroy(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_slot_in_order),
	    cmocka_unit_test(test_two_slots),
	    cmocka_unit_test(test_zeroed_and_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
