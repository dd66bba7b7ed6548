// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_bounded_call.c - a blocking call run with a deadline (host/act/bounded_call.c).
 *
 * The blocking call is a read from a pipe that the test writes when it wants the call to
 * return: a stand-in for a libvirt RPC to a frozen QEMU that resumes later.  Checked: a call
 * that returns in time gives its result; one that does not gives -ETIMEDOUT and the next call
 * -EBUSY (never a queue); the late call's job is destroyed by the worker when it returns, not
 * before; the hurry flag cuts a long deadline; freeing while a call is stuck does not wait
 * and the worker cleans up after.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/bounded_call.h"
#include "base/clock.h"

struct pipe_job {
	struct mtd_bjob base;
	int rfd;           /* the call reads one byte from here */
	int done_fd;       /* destroy writes one byte here */
	unsigned char got; /* output */
};

static int pipe_run(struct mtd_bjob *b)
{
	struct pipe_job *j = (struct pipe_job *)b;

	return read(j->rfd, &j->got, 1) == 1 ? 0 : -EIO;
}

static void pipe_destroy(struct mtd_bjob *b)
{
	struct pipe_job *j = (struct pipe_job *)b;
	char one = 1;

	if (write(j->done_fd, &one, 1) != 1)
		abort();
	free(j);
}

static struct pipe_job *job(int rfd, int done_fd)
{
	struct pipe_job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	j->base.run = pipe_run;
	j->base.destroy = pipe_destroy;
	j->rfd = rfd;
	j->done_fd = done_fd;
	return j;
}

/* Wait until one job was destroyed (the done pipe says so). */
static void await_destroyed(int done_r)
{
	struct pollfd p = {.fd = done_r, .events = POLLIN};
	char c;

	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(read(done_r, &c, 1), 1);
}

static void test_in_time_late_busy_and_cleanup(void **state)
{
	int in[2], done[2];
	struct mtd_bcall *b = mtd_bcall_new();
	struct pipe_job *j;
	char x = 42;

	(void)state;
	assert_non_null(b);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(done), 0);

	/* In time: the result is the call's, and the caller reads the output, then drops it. */
	assert_int_equal(write(in[1], &x, 1), 1);
	j = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &j->base, 5000, NULL), 0);
	assert_int_equal(j->got, 42);
	mtd_bjob_put(b, &j->base);
	await_destroyed(done[0]);

	/* Late: -ETIMEDOUT near the deadline; the job lives on with the worker. */
	uint64_t t0 = mtd_mono_ms();
	j = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &j->base, 200, NULL), -ETIMEDOUT);
	assert_true(mtd_mono_ms() - t0 < 2000);
	assert_true(mtd_bcall_busy(b));
	struct pollfd p = {.fd = done[0], .events = POLLIN};
	assert_int_equal(poll(&p, 1, 0), 0); /* not destroyed while the call runs */

	/* Meanwhile the next call is refused at once, not queued. */
	struct pipe_job *k = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &k->base, 5000, NULL), -EBUSY);
	mtd_bjob_put(b, &k->base);
	await_destroyed(done[0]);

	/* The frozen peer resumes: the late call returns and the worker destroys its job. */
	assert_int_equal(write(in[1], &x, 1), 1);
	await_destroyed(done[0]);
	while (mtd_bcall_busy(b))
		assert_int_equal(poll(NULL, 0, 1), 0);
	assert_int_equal(write(in[1], &x, 1), 1);
	j = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &j->base, 5000, NULL), 0);
	mtd_bjob_put(b, &j->base);
	await_destroyed(done[0]);

	/* Freed while a call is stuck: returns at once; the worker cleans up when it returns. */
	j = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &j->base, 50, NULL), -ETIMEDOUT);
	mtd_bcall_free(b);
	assert_int_equal(write(in[1], &x, 1), 1);
	await_destroyed(done[0]);
	close(in[0]);
	close(in[1]);
	close(done[0]);
	close(done[1]);
}

static void test_hurry_cuts_deadline(void **state)
{
	int in[2], done[2];
	struct mtd_bcall *b = mtd_bcall_new();
	atomic_bool hurry = true;
	char x = 1;

	(void)state;
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(done), 0);
	uint64_t t0 = mtd_mono_ms();
	struct pipe_job *j = job(in[0], done[1]);
	assert_int_equal(mtd_bcall_run(b, &j->base, 60000, &hurry), -ETIMEDOUT);
	uint64_t took = mtd_mono_ms() - t0;
	assert_true(took >= 900 && took < 5000); /* 1 s, not 60 */
	mtd_bcall_free(b);
	assert_int_equal(write(in[1], &x, 1), 1);
	await_destroyed(done[0]);
	close(in[0]);
	close(in[1]);
	close(done[0]);
	close(done[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_in_time_late_busy_and_cleanup),
	    cmocka_unit_test(test_hurry_cuts_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
