// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bounded_call.c - a per-VM worker thread that makes blocking calls for a waiter with a
 * deadline (see bounded_call.h).
 *
 * State, all under b->lock:
 *   job      the job handed to the worker (NULL: idle);
 *   refs     the owner (until mtd_bcall_free) and the worker thread (while it runs);
 *   quit     the owner let go: the worker leaves after its current job.
 * The waiter and the worker hand over through two conditions: `work` (a job is there, or
 * quit) and `done` (the job finished).  A job's refs count the waiter and the worker; the
 * one who drops the last calls job->destroy, so a waiter that timed out never touches the
 * job again and a worker never touches a waiter's stack.
 *
 * Cost: one thread hop per call (a few tens of microseconds), next to a libvirt RPC's
 * round trip of a few hundred microseconds at least.
 */
#include "act/bounded_call.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"

#define HURRY_MS       1000
#define HURRY_SLICE_MS 100
#define WORKER_STACK   (256 * 1024)

struct mtd_bcall {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct mtd_bjob *job; /* handed to the worker, until it finishes */
	bool started;         /* the worker thread exists */
	bool quit;            /* the owner let go */
	int refs;             /* owner + worker */
};

static void bcall_unref_locked(struct mtd_bcall *b, bool *free_it)
{
	*free_it = --b->refs == 0;
}

static void bcall_destroy(struct mtd_bcall *b)
{
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->work);
	pthread_cond_destroy(&b->done);
	free(b);
}

/* Drop one reference to job; b->lock held.  Returns the job to destroy (outside the lock). */
static struct mtd_bjob *job_unref_locked(struct mtd_bjob *job)
{
	return --job->refs == 0 ? job : NULL;
}

static void *worker(void *arg)
{
	struct mtd_bcall *b = arg;
	bool free_it;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		while (!b->job && !b->quit)
			pthread_cond_wait(&b->work, &b->lock);
		if (!b->job)
			break; /* quit, idle */
		struct mtd_bjob *job = b->job;
		pthread_mutex_unlock(&b->lock);
		int rc = job->run(job); /* may block for as long as libvirt does */
		pthread_mutex_lock(&b->lock);
		job->rc = rc;
		job->done = true;
		b->job = NULL;
		pthread_cond_broadcast(&b->done);
		struct mtd_bjob *dead = job_unref_locked(job);
		if (dead) {
			pthread_mutex_unlock(&b->lock);
			dead->destroy(dead);
			pthread_mutex_lock(&b->lock);
		}
		if (b->quit)
			break;
	}
	bcall_unref_locked(b, &free_it);
	pthread_mutex_unlock(&b->lock);
	if (free_it)
		bcall_destroy(b);
	return NULL;
}

struct mtd_bcall *mtd_bcall_new(void)
{
	struct mtd_bcall *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->work, NULL);
	/* The waiter's deadline is on CLOCK_MONOTONIC, like every interval in memtided. */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->done, &ca);
	pthread_condattr_destroy(&ca);
	b->refs = 1;
	return b;
}

/* Start the worker; b->lock held.  0 or -EAGAIN. */
static int start_locked(struct mtd_bcall *b)
{
	pthread_attr_t a;
	pthread_t t;
	int rc;

	if (b->started)
		return 0;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, WORKER_STACK);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &a, worker, b);
	pthread_attr_destroy(&a);
	if (rc)
		return -EAGAIN;
	b->started = true;
	b->refs++;
	return 0;
}

int mtd_bcall_run(struct mtd_bcall *b, struct mtd_bjob *job, int timeout_ms,
		  const atomic_bool *hurry)
{
	uint64_t deadline = mtd_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
	bool hurried = false;
	int rc;

	job->refs = 1;
	job->done = false;
	pthread_mutex_lock(&b->lock);
	if (b->job) {
		rc = -EBUSY;
		goto out;
	}
	rc = start_locked(b);
	if (rc < 0)
		goto out;
	job->refs = 2; /* the worker's, until it finishes */
	b->job = job;
	pthread_cond_signal(&b->work);
	while (!job->done) {
		uint64_t now = mtd_mono_ms();
		if (!hurried && hurry && atomic_load(hurry)) {
			hurried = true;
			if (now + HURRY_MS < deadline)
				deadline = now + HURRY_MS;
		}
		if (now >= deadline)
			break;
		uint64_t until = deadline - now < HURRY_SLICE_MS ? deadline : now + HURRY_SLICE_MS;
		struct timespec ts = {.tv_sec = (time_t)(until / 1000),
				      .tv_nsec = (long)(until % 1000) * 1000000};
		pthread_cond_timedwait(&b->done, &b->lock, &ts);
	}
	rc = job->done ? job->rc : -ETIMEDOUT;
	if (!job->done) {
		/* The worker keeps its reference and frees the job when the call returns. */
		struct mtd_bjob *dead = job_unref_locked(job);
		pthread_mutex_unlock(&b->lock);
		if (dead)
			dead->destroy(dead);
		return rc;
	}
out:
	/* Done (or never run): the caller still holds its reference for reading outputs. */
	pthread_mutex_unlock(&b->lock);
	return rc;
}

void mtd_bjob_put(struct mtd_bcall *b, struct mtd_bjob *job)
{
	pthread_mutex_lock(&b->lock);
	struct mtd_bjob *dead = job_unref_locked(job);
	pthread_mutex_unlock(&b->lock);
	if (dead)
		dead->destroy(dead);
}

bool mtd_bcall_busy(struct mtd_bcall *b)
{
	pthread_mutex_lock(&b->lock);
	bool busy = b->job != NULL;
	pthread_mutex_unlock(&b->lock);
	return busy;
}

void mtd_bcall_free(struct mtd_bcall *b)
{
	bool free_it;

	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->quit = true;
	pthread_cond_signal(&b->work);
	bcall_unref_locked(b, &free_it);
	pthread_mutex_unlock(&b->lock);
	if (free_it)
		bcall_destroy(b);
}
