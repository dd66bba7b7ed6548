/*
 * vm.c - a managed VM's record and its published status (see vm.h for ownership).
 *
 * Snapshot layout: each published status lives in a box with the rcu_head that frees it:
 *
 *   struct status_box { struct rcu_head rcu; struct mtd_vm_status st; }
 *                                            ^ vm->status points here
 *
 * Publishing copies the loop's draft into a fresh box, swaps the pointer (rcu_xchg_pointer:
 * a reader sees the old or the new snapshot, whole), and hands the old box to call_rcu.
 * One snapshot is ~2 KiB; at one swap per interval per VM the allocator cost is noise.
 */
#include "vm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

struct status_box {
	struct rcu_head rcu;
	struct mtd_vm_status st;
};

static const char *const state_names[] = {
    [MTD_VM_ATTACHING] = "attaching", [MTD_VM_ACTIVE] = "active",     [MTD_VM_HOLD] = "hold",
    [MTD_VM_DEFLATING] = "deflating", [MTD_VM_DISABLED] = "disabled", [MTD_VM_ERROR] = "error",
    [MTD_VM_RELEASED] = "released",   [MTD_VM_DETACHED] = "detached",
};

const char *mtd_vm_state_name(enum mtd_vm_state s)
{
	if ((unsigned)s < sizeof(state_names) / sizeof(state_names[0]) && state_names[s])
		return state_names[s];
	return "unknown";
}

static void free_box(struct rcu_head *h)
{
	free(caa_container_of(h, struct status_box, rcu));
}

int mtd_vm_new(struct mtd_daemon *d, const char *name, const char *uuid,
	       const struct mtd_policy *policy, struct mtd_vm **out)
{
	struct mtd_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return -ENOMEM;
	vm->d = d;
	snprintf(vm->name, sizeof(vm->name), "%s", name);
	snprintf(vm->uuid, sizeof(vm->uuid), "%s", uuid ? uuid : "");
	vm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->wake_fd < 0) {
		int e = -errno;
		free(vm);
		return e;
	}
	pthread_mutex_init(&vm->mbox_lock, NULL);
	vm->policy = *policy;
	vm->policy_new = *policy; /* the latest policy asked for, taken or not */
	memcpy(vm->draft.name, vm->name, sizeof(vm->name));
	memcpy(vm->draft.uuid, vm->uuid, sizeof(vm->uuid));
	vm->draft.state = MTD_VM_ATTACHING;
	vm->draft.policy = *policy;
	if (mtd_vm_publish(vm) < 0) {
		close(vm->wake_fd);
		pthread_mutex_destroy(&vm->mbox_lock);
		free(vm);
		return -ENOMEM;
	}
	*out = vm;
	return 0;
}

void mtd_vm_free(struct mtd_vm *vm)
{
	struct mtd_vm_status *st;

	if (!vm)
		return;
	/* Nobody can reach vm any more (grace period passed): free the snapshot directly. */
	st = vm->status;
	if (st)
		free(caa_container_of(st, struct status_box, st));
	if (vm->balloon && vm->balloon_ctx)
		vm->balloon->destroy(vm->balloon_ctx);
	free(vm->saved);
	free(vm->last_saved);
	close(vm->wake_fd);
	pthread_mutex_destroy(&vm->mbox_lock);
	free(vm);
}

int mtd_vm_publish(struct mtd_vm *vm)
{
	struct status_box *box = malloc(sizeof(*box));
	struct mtd_vm_status *old;

	if (!box)
		return -ENOMEM;
	box->st = vm->draft;
	old = rcu_xchg_pointer(&vm->status, &box->st);
	if (old)
		call_rcu(&caa_container_of(old, struct status_box, st)->rcu, free_box);
	return 0;
}

void mtd_vm_action(struct mtd_vm *vm, uint64_t now_ms, const char *fmt, ...)
{
	struct mtd_vm_status *st = &vm->draft;
	struct mtd_action *a;
	va_list ap;

	if (st->nr_actions == MTD_LAST_ACTIONS) {
		memmove(&st->actions[0], &st->actions[1],
			sizeof(st->actions[0]) * (MTD_LAST_ACTIONS - 1));
		st->nr_actions--;
	}
	a = &st->actions[st->nr_actions++];
	a->at_ms = now_ms;
	va_start(ap, fmt);
	vsnprintf(a->what, sizeof(a->what), fmt, ap);
	va_end(ap);
	mtd_info("%s: %s", vm->name, a->what);
}

void mtd_vm_wake(struct mtd_vm *vm)
{
	uint64_t one = 1;

	if (write(vm->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, the loop will wake anyway */
	}
}

void mtd_vm_set_policy(struct mtd_vm *vm, const struct mtd_policy *p)
{
	pthread_mutex_lock(&vm->mbox_lock);
	vm->policy_new = *p;
	vm->policy_dirty = true;
	pthread_mutex_unlock(&vm->mbox_lock);
	mtd_vm_wake(vm);
}
