// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_registry.c - the VM registry and its RCU snapshots under concurrency
 * (host/daemon/registry.c, host/daemon/vm.c).
 *
 * Reader threads walk and look up VMs lock-free while a writer adds VMs, publishes
 * snapshots at full speed and removes VMs (freed after a grace period).  Every snapshot is
 * written with actual == 2 * target and updated_ms == target, so a reader that ever saw a
 * torn or freed snapshot fails the check (and ASan, under SAN=1, reports the use after
 * free).  Duplicate names are refused.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/policy.h"
#include "daemon/daemon.h"
#include "daemon/vm.h"

#define NR_VMS     32
#define NR_READERS 3
#define ROUNDS     4000

static struct mtd_daemon d;
static const struct mtd_vm_host host; /* the records are never attached: nothing of it is read */
static atomic_bool done;
static atomic_ulong reads, bad;

static void free_vm_cb(struct rcu_head *h)
{
	mtd_vm_free(caa_container_of(h, struct mtd_vm, rcu));
}

static void check_one(void *arg, const struct mtd_vm_status *st)
{
	(void)arg;
	if (st->balloon_actual_bytes != 2 * st->balloon_target_bytes ||
	    st->updated_ms != st->balloon_target_bytes || strncmp(st->name, "vm-", 3) != 0)
		atomic_fetch_add(&bad, 1);
	atomic_fetch_add(&reads, 1);
}

static void *reader(void *arg)
{
	struct mtd_vm_status *copy = malloc(sizeof(*copy));
	unsigned seed = (unsigned)(uintptr_t)arg;

	rcu_register_thread();
	while (!atomic_load(&done)) {
		(void)mtd_daemon_foreach_vm(&d, check_one, NULL);
		char name[32];
		snprintf(name, sizeof(name), "vm-%d", rand_r(&seed) % NR_VMS);
		if (mtd_daemon_get_vm(&d, name, copy) == 0) {
			assert_string_equal(copy->name, name);
			check_one(NULL, copy);
		}
	}
	rcu_unregister_thread();
	free(copy);
	return NULL;
}

static void publish(struct mtd_vm *vm, uint64_t k)
{
	vm->draft.balloon_target_bytes = k;
	vm->draft.balloon_actual_bytes = 2 * k;
	vm->draft.updated_ms = k;
	assert_int_equal(mtd_vm_publish(vm), 0);
}

static void test_concurrent_readers_and_writer(void **state)
{
	struct mtd_vm *vms[NR_VMS] = {0};
	struct mtd_policy pol;
	pthread_t th[NR_READERS];
	(void)state;

	mtd_policy_default(&pol);
	assert_int_equal(mtd_registry_init(&d.registry), 0);
	rcu_register_thread();
	for (uintptr_t i = 0; i < NR_READERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, (void *)(i + 1)), 0);

	unsigned seed = 7;
	for (uint64_t r = 1; r <= ROUNDS; r++) {
		int i = rand_r(&seed) % NR_VMS;
		if (!vms[i]) {
			char name[32];
			snprintf(name, sizeof(name), "vm-%d", i);
			assert_int_equal(mtd_vm_new(&host, name, NULL, &pol, &vms[i]), 0);
			publish(vms[i], r);
			assert_int_equal(mtd_registry_add(&d.registry, vms[i]), 0);
		} else if (rand_r(&seed) % 8 == 0) {
			assert_int_equal(mtd_registry_del(&d.registry, vms[i]), 0);
			assert_int_equal(mtd_registry_del(&d.registry, vms[i]), -ENOENT);
			call_rcu(&vms[i]->rcu, free_vm_cb);
			vms[i] = NULL;
		} else {
			publish(vms[i], r);
		}
	}
	/* A second VM with a live name is refused. */
	for (int i = 0; i < NR_VMS; i++) {
		if (!vms[i])
			continue;
		struct mtd_vm *dup;
		assert_int_equal(mtd_vm_new(&host, vms[i]->name, NULL, &pol, &dup), 0);
		assert_int_equal(mtd_registry_add(&d.registry, dup), -EEXIST);
		mtd_vm_free(dup);
		break;
	}
	atomic_store(&done, true);
	for (int i = 0; i < NR_READERS; i++)
		pthread_join(th[i], NULL);

	size_t live = 0;
	for (int i = 0; i < NR_VMS; i++)
		live += vms[i] != NULL;
	struct mtd_vm *list[NR_VMS];
	assert_int_equal(mtd_registry_list(&d.registry, list, NR_VMS), live);
	for (int i = 0; i < NR_VMS; i++) {
		if (!vms[i])
			continue;
		assert_int_equal(mtd_registry_del(&d.registry, vms[i]), 0);
		call_rcu(&vms[i]->rcu, free_vm_cb);
	}
	rcu_unregister_thread();
	rcu_barrier();
	mtd_registry_destroy(&d.registry);
	print_message("# %lu snapshot reads, %lu inconsistent\n", atomic_load(&reads),
		      atomic_load(&bad));
	assert_true(atomic_load(&reads) > 0);
	assert_int_equal(atomic_load(&bad), 0);
}

static void test_action_ring_keeps_newest(void **state)
{
	struct mtd_vm *vm;
	struct mtd_policy pol;
	(void)state;
	mtd_policy_default(&pol);
	assert_int_equal(mtd_vm_new(&host, "ring", NULL, &pol, &vm), 0);
	for (int i = 0; i < MTD_LAST_ACTIONS + 5; i++)
		mtd_vm_action(vm, (uint64_t)i, "action %d", i);
	assert_int_equal(vm->draft.nr_actions, MTD_LAST_ACTIONS);
	assert_string_equal(vm->draft.actions[MTD_LAST_ACTIONS - 1].what, "action 12");
	assert_string_equal(vm->draft.actions[0].what, "action 5");
	assert_string_equal(mtd_vm_state_name(MTD_VM_AGENT_SILENT), "agent-silent");
	assert_string_equal(mtd_vm_state_name((enum mtd_vm_state)99), "unknown");
	rcu_register_thread();
	assert_int_equal(mtd_vm_publish(vm), 0);
	rcu_unregister_thread();
	rcu_barrier();
	mtd_vm_free(vm);
}

/* A target moved under host-side eviction names that mode in the trail and the log, not the
 * agent's reclaim (the agentless demo once printed "return=reclaim" for every step). */
static void test_target_trail_names_the_mode(void **state)
{
	static const struct {
		enum mtd_return_via mode;
		const char *want;
	} cases[] = {
	    {MTD_RETURN_RECLAIM,
	     "target 1024->512 MiB (inflate, return=reclaim), source controller"},
	    {MTD_RETURN_PAGEOUT,
	     "target 1024->512 MiB (inflate, return=pageout), source controller"},
	    {MTD_RETURN_AUTO, "target 1024->512 MiB (inflate, return=auto), source controller"},
	};
	char dir[] = "/tmp/mtd-trail.XXXXXX", path[128];
	static struct mtd_config cfg; /* large: off the stack */
	struct mtd_vm_host trail_host = {.cfg = &cfg};
	struct mtd_policy pol;
	struct mtd_vm *vm;
	(void)state;
	mtd_config_default(&cfg);
	assert_non_null(mkdtemp(dir));
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir); /* the trail's history file */
	mtd_policy_default(&pol);
	assert_int_equal(mtd_vm_new(&trail_host, "trail", NULL, &pol, &vm), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		vm->draft.return_in_force = cases[i].mode;
		mtd_vm_audit(vm, i, "target", 1024ULL << 20, 512ULL << 20, "inflate", "controller",
			     false);
		assert_string_equal(vm->draft.actions[vm->draft.nr_actions - 1].what,
				    cases[i].want);
	}
	mtd_vm_free(vm);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_concurrent_readers_and_writer),
	    cmocka_unit_test(test_action_ring_keeps_newest),
	    cmocka_unit_test(test_target_trail_names_the_mode),
	};
	return cmocka_run_group_tests_name("mtd_registry", tests, NULL, NULL);
}
