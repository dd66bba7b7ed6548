// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_daemon.c - the core's front-end calls (mtd.h) on a daemon in plain-QEMU mode
 * whose QMP socket does not exist: the VM is registered and its loop keeps retrying, so
 * every call can be exercised without a hypervisor.  Hook news and attach/detach requests
 * come from other processes (the libvirt hook, memtidectl): bad names are refused, a flood
 * of hook calls is bounded, unknown operations are ignored.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "daemon/vm.h"

#define MiB ((uint64_t)1 << 20)

static char state_dir[64];

/* Tests never touch /var/lib/memtide: a directory of their own. */
static void test_config(struct mtd_config *cfg)
{
	mtd_config_default(cfg);
	if (!state_dir[0]) {
		snprintf(state_dir, sizeof(state_dir), "/tmp/mtd-daemon-test.XXXXXX");
		assert_non_null(mkdtemp(state_dir));
	}
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", state_dir);
}

static size_t queued(struct mtd_daemon *d, enum mtd_work_kind kind);

static struct mtd_daemon *start_qmp_daemon(void)
{
	struct mtd_config cfg;
	struct mtd_daemon *d;

	test_config(&cfg);
	cfg.ctl.interval_ms = 200;
	assert_int_equal(mtd_daemon_new(&cfg, &d), 0);
	d->mode = MTD_MODE_QMP;
	snprintf(d->qmp_path, sizeof(d->qmp_path), "/nonexistent/qmp.sock");
	snprintf(d->vm_name, sizeof(d->vm_name), "vm1");
	assert_int_equal(mtd_daemon_start(d), 0);
	return d;
}

static void count_cb(void *arg, const struct mtd_vm_status *st)
{
	(void)st;
	(*(int *)arg)++;
}

static void test_front_end_calls(void **state)
{
	struct mtd_daemon *d = start_qmp_daemon();
	struct mtd_vm_status *st = calloc(1, sizeof(*st));
	struct mtd_policy p;
	char err[200];
	int n = 0;
	(void)state;

	rcu_register_thread();
	assert_int_equal(mtd_daemon_foreach_vm(d, count_cb, &n), 1);
	assert_int_equal(n, 1);
	assert_int_equal(mtd_daemon_get_vm(d, "vm1", st), 0);
	assert_string_equal(st->name, "vm1");
	assert_int_equal(mtd_daemon_get_vm(d, "nope", st), -ENOENT);

	/* Policy: validated, applied, visible at once; refused with a sentence. */
	assert_int_equal(mtd_daemon_policy_set(d, "vm1", "min", "300M", err, sizeof(err)), 0);
	assert_int_equal(mtd_daemon_policy_get(d, "vm1", &p), 0);
	assert_int_equal(p.min_bytes, 300 * MiB);
	assert_int_equal(mtd_daemon_policy_set(d, "vm1", "min", "-1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "min must be"));
	assert_int_equal(mtd_daemon_policy_set(d, "nope", "min", "1G", err, sizeof(err)), -ENOENT);
	assert_int_equal(mtd_daemon_policy_get(d, "nope", &p), -ENOENT);

	/* Attach is libvirt's.  Detach is asynchronous: it asks and returns; a second ask while
	 * the loop leaves is -EALREADY; the loop queues its reaping when it has left, and once
	 * the main thread has done that work the VM is gone. */
	assert_int_equal(mtd_daemon_attach(d, "vm2"), -EOPNOTSUPP);
	assert_int_equal(mtd_daemon_attach(d, ""), -EINVAL);
	/* The host line as an arbiter tick left it, with this VM's saving in it: a detach
	 * takes the VM out of it at once, not at the next tick. */
	pthread_mutex_lock(&d->host.lock);
	d->host.status.nr_vms = 1;
	d->host.status.saved_bytes = 692 * MiB;
	pthread_mutex_unlock(&d->host.lock);
	assert_int_equal(mtd_daemon_detach(d, "vm1"), 0);
	int again = mtd_daemon_detach(d, "vm1");
	assert_true(again == -EALREADY);
	struct pollfd wp = {.fd = d->work_fd, .events = POLLIN};
	while (queued(d, MTD_WORK_REAP) == 0) {
		uint64_t v;
		assert_int_equal(poll(&wp, 1, 5000), 1); /* the loop's reap request wakes us */
		assert_int_equal(read(d->work_fd, &v, sizeof(v)), sizeof(v));
	}
	mtd_daemon_drain_work(d);
	struct mtd_host_status after;
	mtd_daemon_host_status(d, &after);
	assert_int_equal(after.nr_vms, 0);
	assert_int_equal(after.saved_bytes, 0);
	assert_int_equal(mtd_daemon_detach(d, "vm1"), -ENOENT);
	n = 0;
	assert_int_equal(mtd_daemon_foreach_vm(d, count_cb, &n), 0);

	struct mtd_host_status hs;
	mtd_daemon_host_status(d, &hs);
	assert_int_equal(hs.nr_vms, 0);
	rcu_unregister_thread();

	mtd_daemon_stop(d);
	mtd_daemon_free(d);
	free(st);
}

static size_t queued(struct mtd_daemon *d, enum mtd_work_kind kind)
{
	size_t n = 0;
	for (struct mtd_work *w = d->work_head; w; w = w->next)
		n += w->kind == kind;
	return n;
}

static void test_hook_events(void **state)
{
	struct mtd_config cfg;
	struct mtd_daemon *d;
	char longname[MTD_NAME_MAX + 10];
	(void)state;

	test_config(&cfg);
	assert_int_equal(mtd_daemon_new(&cfg, &d), 0);
	assert_int_equal(mtd_daemon_hook_event(d, "web1", "started", "begin"), 0);
	assert_int_equal(mtd_daemon_hook_event(d, "web1", "reconnect", "begin"), 0);
	assert_int_equal(mtd_daemon_hook_event(d, "web1", "stopped", "end"), 0);
	assert_int_equal(mtd_daemon_hook_event(d, "web1", "prepare", "begin"), 0); /* ignored */
	assert_int_equal(queued(d, MTD_WORK_ATTACH), 2);
	assert_int_equal(queued(d, MTD_WORK_GONE), 1); /* stopped: its state file goes too */
	assert_string_equal(d->work_head->name, "web1");

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(mtd_daemon_hook_event(d, longname, "started", "begin"), -EINVAL);
	assert_int_equal(mtd_daemon_hook_event(d, "", "started", "begin"), -EINVAL);
	assert_int_equal(mtd_daemon_hook_event(d, "web1", NULL, NULL), -EINVAL);

	/* A flood is cut at a bound, not queued without end. */
	int rc = 0, i;
	for (i = 0; i < 100000 && rc == 0; i++)
		rc = mtd_daemon_hook_event(d, "web1", "started", "begin");
	assert_int_equal(rc, -ENOSPC);
	assert_true(i < 10000);
	mtd_daemon_free(d);
}

/* Plain-QEMU mode keeps the policy set at run time (the kill switch enabled=false among
 * it) over [defaults] when SIGHUP re-reads the file, and in the VM's state file. */
static void test_reload_keeps_runtime_policy(void **state)
{
	struct mtd_daemon *d = start_qmp_daemon();
	struct mtd_policy p;
	char err[200], conf[128];
	FILE *f;
	(void)state;

	rcu_register_thread();
	snprintf(conf, sizeof(conf), "%s/memtided.conf", state_dir);
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[defaults]\nheadroom = 96M\nmin = 200M\n");
	fclose(f);
	snprintf(d->config_path, sizeof(d->config_path), "%s", conf);
	assert_int_equal(mtd_daemon_policy_set(d, "vm1", "enabled", "false", err, sizeof(err)), 0);
	assert_int_equal(mtd_daemon_policy_set(d, "vm1", "min", "300M", err, sizeof(err)), 0);
	mtd_daemon_reload(d);
	assert_int_equal(mtd_daemon_policy_get(d, "vm1", &p), 0);
	assert_false(p.enabled);                      /* kept */
	assert_int_equal(p.min_bytes, 300 * MiB);     /* kept over the file's 200M */
	assert_int_equal(p.headroom_bytes, 96 * MiB); /* the file's new default */
	/* A runtime value the new defaults refuse is dropped, the rest kept. */
	f = fopen(conf, "w");
	assert_non_null(f);
	fprintf(f, "[defaults]\nmax = 256M\n");
	fclose(f);
	mtd_daemon_reload(d);
	assert_int_equal(mtd_daemon_policy_get(d, "vm1", &p), 0);
	assert_false(p.enabled);
	assert_int_equal(p.max_bytes, 256 * MiB);
	assert_true(p.min_bytes <= 256 * MiB);
	unlink(conf);

	/* Release and resume: by name or all; an unknown name is refused. */
	assert_int_equal(mtd_daemon_release(d, "nope", true, NULL, NULL), -ENOENT);
	assert_int_equal(mtd_daemon_release(d, "vm1", true, NULL, NULL), 1);
	assert_int_equal(mtd_daemon_release(d, NULL, false, NULL, NULL), 1);
	assert_int_equal(mtd_daemon_release(d, "", true, NULL, NULL), -EINVAL);
	rcu_unregister_thread();
	mtd_daemon_stop(d);
	mtd_daemon_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_front_end_calls),
	    cmocka_unit_test(test_hook_events),
	    cmocka_unit_test(test_reload_keeps_runtime_policy),
	};
	int rc = cmocka_run_group_tests_name("mtd_daemon", tests, NULL, NULL);
	if (state_dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
		if (system(cmd) != 0)
			rc = 1;
	}
	return rc;
}
