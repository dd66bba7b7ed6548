/*
 * test_mtd_vm_loop.c - one VM's control loop (host/vm_loop.c) against a scripted balloon.
 *
 * The balloon here is a fake actuator (struct mtd_balloon_ops): a unit test cannot run QEMU,
 * and only a fake can fail a command or drop its connection on cue.  It behaves as QEMU's
 * balloon does for what the loop sees: actual follows the last target set, at once.  The
 * same paths run against real QEMU guests in tests/integration/host_lifecycle.sh.
 *
 * Checked: stopping the loop (daemon exit, detach) leaves the balloon where it is; a VM
 * whose inputs go stale keeps its size; a deflate whose balloon command fails is retried
 * each tick until it is carried out, and is not recorded as done before; after the
 * actuator reconnects to the same QEMU the current target is applied again.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "daemon.h"
#include "vm.h"

#define MiB ((uint64_t)1 << 20)

/* ---- the fake balloon ------------------------------------------------------------------ */

struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t domain_bytes;
	uint64_t actual_bytes;   /* follows the last target set */
	unsigned reads;          /* read() calls: one per tick */
	unsigned sets, failed;   /* set_target calls that worked / were failed on purpose */
	unsigned fail_next;      /* fail this many set_target calls from now */
	uint64_t max_set_bytes;  /* largest target set since the test last reset it */
	bool stats_fresh;        /* balloon stats move each read (inputs fresh) */
	bool low_available;      /* stats say MemAvailable is under its mark: pressure */
	uint64_t stats_update_s; /* last-update of the stats */
	unsigned generation;     /* connections made: moves on a reconnect */
};

static int fake_open(void *ctx, uint64_t *domain_bytes, char *err, size_t errlen)
{
	struct fake *f = ctx;
	(void)err;
	(void)errlen;
	pthread_mutex_lock(&f->lock);
	*domain_bytes = f->domain_bytes;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int fake_set_target(void *ctx, uint64_t target_bytes, char *err, size_t errlen)
{
	struct fake *f = ctx;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	if (f->fail_next) {
		f->fail_next--;
		f->failed++;
		snprintf(err, errlen, "QMP balloon: injected failure");
		rc = -EIO;
	} else {
		f->actual_bytes = target_bytes;
		f->sets++;
		if (target_bytes > f->max_set_bytes)
			f->max_set_bytes = target_bytes;
	}
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static int fake_read(void *ctx, uint64_t *actual_bytes, struct mtd_balloon_stats *st)
{
	struct fake *f = ctx;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&f->lock);
	*actual_bytes = f->actual_bytes;
	if (f->stats_fresh)
		f->stats_update_s++;
	st->valid = f->stats_update_s != 0;
	st->last_update_s = f->stats_update_s;
	st->has_available = true;
	st->available_bytes = f->low_available ? 8 * MiB : 512 * MiB;
	f->reads++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int fake_fpr(void *ctx, bool *on)
{
	(void)ctx;
	*on = true;
	return 0;
}

static void fake_destroy(void *ctx)
{
	(void)ctx; /* on the test's stack */
}

static const struct mtd_balloon_ops fake_ops = {
    .name = "fake",
    .open = fake_open,
    .set_target = fake_set_target,
    .read = fake_read,
    .fpr = fake_fpr,
    .destroy = fake_destroy,
};

static void fake_init(struct fake *f, uint64_t domain, uint64_t actual)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->domain_bytes = domain;
	f->actual_bytes = actual;
	f->stats_fresh = true;
}

/* Wait (an event, not a sleep) until the loop has read the balloon n more times: n ticks. */
static void wait_reads(struct fake *f, unsigned n)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	pthread_mutex_lock(&f->lock);
	unsigned until = f->reads + n;
	while (f->reads < until)
		assert_int_equal(pthread_cond_timedwait(&f->cond, &f->lock, &dl), 0);
	pthread_mutex_unlock(&f->lock);
}

static uint64_t fake_actual(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t a = f->actual_bytes;
	pthread_mutex_unlock(&f->lock);
	return a;
}

/* Wait up to max_ticks for actual to satisfy a bound; returns actual. */
static uint64_t wait_actual(struct fake *f, bool below, uint64_t bound, unsigned max_ticks)
{
	for (unsigned i = 0; i < max_ticks; i++) {
		uint64_t a = fake_actual(f);
		if (below ? a <= bound : a >= bound)
			return a;
		wait_reads(f, 1);
	}
	return fake_actual(f);
}

/* ---- a daemon with one VM on the fake ---------------------------------------------------- */

static struct mtd_daemon *d;
static struct mtd_vm *vm;
static struct fake f; /* outlives a test that fails early: its loop is stopped first */

static void start(struct fake *fk, enum mtd_source_kind source)
{
	struct mtd_config cfg;
	struct mtd_policy pol;

	mtd_config_default(&cfg);
	cfg.source = source;
	cfg.sim_hot_percent = 10;
	cfg.ctl.interval_ms = 100;
	cfg.ctl.agent_silence_ms = 300;
	cfg.ctl.hold_after_deflate_ms = 100000; /* a deflate stands for the whole test */
	cfg.ctl.max_inflate_step_bytes = 64 * MiB;
	cfg.ctl.deflate_min_bytes = 128 * MiB;
	cfg.ctl.mem_available_low_bytes = 32 * MiB;
	assert_int_equal(mtd_daemon_new(&cfg, &d), 0);
	d->mode = MTD_MODE_QMP;
	pol = cfg.defaults;
	pol.min_bytes = 256 * MiB;
	pol.headroom_bytes = 32 * MiB;
	pol.return_via = MTD_RETURN_BALLOON;
	assert_int_equal(mtd_vm_new(d, "vm1", NULL, &pol, &vm), 0);
	vm->balloon = &fake_ops;
	vm->balloon_ctx = fk;
	assert_int_equal(mtd_registry_add(d, vm), 0);
	assert_int_equal(mtd_vm_loop_start(vm), 0);
}

static void stop(bool daemon_exit)
{
	if (!vm)
		return;
	mtd_vm_loop_stop(vm, daemon_exit);
	assert_int_equal(mtd_registry_del(d, vm), 0);
	synchronize_rcu();
	mtd_vm_free(vm);
	vm = NULL;
	rcu_barrier();
	mtd_daemon_free(d);
	d = NULL;
}

/* A failed assertion leaves the test early: stop its loop before the fake goes away. */
static int teardown(void **state)
{
	(void)state;
	stop(false);
	return 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

/* Daemon exit (SIGTERM, a package upgrade's restart) leaves the balloon where it is. */
static void test_exit_leaves_size(void **state)
{
	(void)state;

	fake_init(&f, 1024 * MiB, 1024 * MiB);
	start(&f, MTD_SOURCE_SIM);
	/* the sim's 10% hot set: the target goes to the floor, 256 MiB, 64 MiB a tick */
	uint64_t a = wait_actual(&f, true, 640 * MiB, 100);
	assert_true(a <= 640 * MiB);
	pthread_mutex_lock(&f.lock);
	f.max_set_bytes = 0;
	unsigned sets = f.sets;
	pthread_mutex_unlock(&f.lock);
	a = fake_actual(&f);
	stop(true);
	/* no balloon command after the stop that gives memory back */
	assert_true(f.max_set_bytes <= a);
	assert_true(f.sets <= sets + 1);
	assert_true(f.actual_bytes <= a);
}

/* Detach of a running domain (memtidectl detach) leaves it where it is too. */
static void test_detach_leaves_size(void **state)
{
	(void)state;

	fake_init(&f, 1024 * MiB, 1024 * MiB);
	start(&f, MTD_SOURCE_SIM);
	uint64_t a = wait_actual(&f, true, 768 * MiB, 100);
	assert_true(a <= 768 * MiB);
	pthread_mutex_lock(&f.lock);
	f.max_set_bytes = 0;
	pthread_mutex_unlock(&f.lock);
	a = fake_actual(&f);
	stop(false);
	assert_true(f.max_set_bytes <= a);
	assert_true(f.actual_bytes <= a);
}

/* A VM found ballooned (a restarted memtided with no agent yet) whose inputs then go stale
 * keeps its size: nobody knows what the guest needs, and handing it its maximum is what
 * overcommits the host. */
static void test_stale_inputs_keep_size(void **state)
{
	(void)state;

	fake_init(&f, 1024 * MiB, 600 * MiB);
	f.stats_fresh = false;
	start(&f, MTD_SOURCE_AGENT); /* no agent path: balloon stats are the only input */
	wait_reads(&f, 10);          /* 1 s: three times agent_silence */
	assert_int_equal(fake_actual(&f), 600 * MiB);
	assert_true(f.max_set_bytes <= 600 * MiB);
	assert_int_equal(vm->ctl.reason, MTD_CTL_SILENT);
	stop(false);
	assert_int_equal(f.actual_bytes, 600 * MiB);
}

/* A deflate whose balloon command fails is retried each tick until it is carried out. */
static void test_failed_deflate_is_retried(void **state)
{
	(void)state;

	fake_init(&f, 1024 * MiB, 1024 * MiB);
	start(&f, MTD_SOURCE_SIM);
	uint64_t low = wait_actual(&f, true, 512 * MiB, 100);
	assert_true(low <= 512 * MiB);
	/* The guest runs short (balloon stats): pressure gives back 128 MiB at once; the next
	 * three balloon commands fail (QMP error, a dropped connection). */
	pthread_mutex_lock(&f.lock);
	f.fail_next = 3;
	f.low_available = true;
	pthread_mutex_unlock(&f.lock);
	wait_reads(&f, 1);
	pthread_mutex_lock(&f.lock);
	f.low_available = false;
	pthread_mutex_unlock(&f.lock);
	/* Three failures, then the fourth try goes through: within a few ticks, not after the
	 * hold (100 s here). */
	uint64_t a = wait_actual(&f, false, low + 128 * MiB, 10);
	assert_int_equal(f.failed, 3);
	assert_true(a >= low + 128 * MiB);
	stop(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_exit_leaves_size, teardown),
	    cmocka_unit_test_teardown(test_detach_leaves_size, teardown),
	    cmocka_unit_test_teardown(test_stale_inputs_keep_size, teardown),
	    cmocka_unit_test_teardown(test_failed_deflate_is_retried, teardown),
	};
	rcu_register_thread();
	int rc = cmocka_run_group_tests_name("mtd_vm_loop", tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
