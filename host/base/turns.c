// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * turns.c - first come, first served turns (see turns.h for why).
 *
 * A queue of waiters, each with a condition variable of its own on its stack, so a turn
 * that ends wakes exactly the next waiter: 256 loops waiting on one shared condition would
 * all wake, 256 times a second at a 1 s interval, to find that one of them may go.  The
 * turn is handed over under the lock (busy is not lowered and raised again), so a caller
 * arriving meanwhile cannot overtake the queue.
 */
#include "base/turns.h"

#include <errno.h>
#include <string.h>

struct mtd_turn_waiter {
	pthread_cond_t cond;
	bool go;
	struct mtd_turn_waiter *next;
};

int mtd_turns_init(struct mtd_turns *t, unsigned slots)
{
	memset(t, 0, sizeof(*t));
	if (!slots)
		return -EINVAL;
	int rc = pthread_mutex_init(&t->lock, NULL);
	if (rc)
		return -rc;
	t->slots = slots;
	return 0;
}

void mtd_turns_destroy(struct mtd_turns *t)
{
	if (t->slots)
		pthread_mutex_destroy(&t->lock);
	t->slots = 0;
}

bool mtd_turns_take(struct mtd_turns *t)
{
	if (!t->slots)
		return false;
	pthread_mutex_lock(&t->lock);
	if (t->busy < t->slots && !t->head) {
		t->busy++;
		pthread_mutex_unlock(&t->lock);
		return true;
	}
	/* The waiter lives on this stack while it is queued: mtd_turns_give unlinks it (under
	 * the lock) before setting go, so no pointer to it is left once this returns. */
	struct mtd_turn_waiter w = {.go = false, .next = NULL};
	pthread_cond_init(&w.cond, NULL);
	if (t->tail)
		t->tail->next = &w;
	else
		t->head = &w; // cppcheck-suppress autoVariables ; unlinked before go (above)
	t->tail = &w;         // cppcheck-suppress autoVariables ; unlinked before go (above)
	t->waited_total++;
	while (!w.go)
		pthread_cond_wait(&w.cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	pthread_cond_destroy(&w.cond);
	return true;
}

void mtd_turns_give(struct mtd_turns *t, bool taken)
{
	if (!taken || !t->slots)
		return;
	pthread_mutex_lock(&t->lock);
	struct mtd_turn_waiter *w = t->head;
	if (w) {
		/* The turn passes straight to the longest waiter: busy stays as it is. */
		t->head = w->next;
		if (!t->head)
			t->tail = NULL;
		w->go = true;
		pthread_cond_signal(&w->cond);
	} else {
		t->busy--;
	}
	pthread_mutex_unlock(&t->lock);
}
