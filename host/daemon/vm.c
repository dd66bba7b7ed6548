// SPDX-License-Identifier: GPL-2.0-or-later
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
#include "daemon/vm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "daemon/history.h"

struct status_box {
	struct rcu_head rcu;
	struct mtd_vm_status st;
};

static const char *const state_names[] = {
    [MTD_VM_ATTACHING] = "attaching",       [MTD_VM_ACTIVE] = "active",
    [MTD_VM_AGENT_SILENT] = "agent-silent", [MTD_VM_DEFLATING] = "deflating",
    [MTD_VM_DISABLED] = "disabled",         [MTD_VM_ERROR] = "error",
    [MTD_VM_RELEASED] = "released",         [MTD_VM_DETACHED] = "detached",
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

static void audit_record(void *ctx, uint64_t now_ms, const char *what, uint64_t before_bytes,
			 uint64_t after_bytes, const char *reason, const char *source, bool observe)
{
	mtd_vm_audit(ctx, now_ms, what, before_bytes, after_bytes, reason, source, observe);
}

int mtd_vm_new(const struct mtd_vm_host *host, const char *name, const char *uuid,
	       const struct mtd_policy *policy, struct mtd_vm **out)
{
	struct mtd_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return -ENOMEM;
	static atomic_uint_fast64_t next_serial = 1;

	vm->host = host;
	vm->serial = atomic_fetch_add(&next_serial, 1);
	snprintf(vm->name, sizeof(vm->name), "%s", name);
	snprintf(vm->uuid, sizeof(vm->uuid), "%s", uuid ? uuid : "");
	vm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->wake_fd < 0) {
		int e = -errno;
		free(vm);
		return e;
	}
	pthread_mutex_init(&vm->mbox_lock, NULL);
	vm->balloon.vm = vm->name;
	vm->audit = (struct mtd_audit){.record = audit_record, .ctx = vm};
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
	if (vm->balloon.ops && vm->balloon.ctx)
		vm->balloon.ops->destroy(vm->balloon.ctx);
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

void mtd_vm_audit(struct mtd_vm *vm, uint64_t now_ms, const char *what, uint64_t before_bytes,
		  uint64_t after_bytes, const char *reason, const char *source, bool observe)
{
	struct mtd_vm_status *st = &vm->draft;
	struct mtd_action *a;
	struct timespec wall;
	const uint64_t mib = 1 << 20;

	if (st->nr_actions == MTD_LAST_ACTIONS) {
		memmove(&st->actions[0], &st->actions[1],
			sizeof(st->actions[0]) * (MTD_LAST_ACTIONS - 1));
		st->nr_actions--;
	}
	a = &st->actions[st->nr_actions++];
	a->at_ms = now_ms;
	/* The words are the ones the log has always used ("inflate A->B MiB (reason)"), so
	 * that greps and scripts keep working; the source comes after them. */
	const char *w = observe ? "would " : "";
	uint64_t b = before_bytes / mib, f = after_bytes / mib;
	/* A silence stops an inflation in flight by raising the target to where the balloon
	 * is (controller.c): no memory goes back, so it is not called a deflate. */
	if (!strcmp(what, "balloon") && after_bytes > before_bytes && !strcmp(reason, "silent"))
		snprintf(a->what, sizeof(a->what),
			 "%sinflation stopped: target %" PRIu64 "->%" PRIu64 " MiB (%s), source %s",
			 w, b, f, reason, source);
	else if (!strcmp(what, "balloon"))
		snprintf(a->what, sizeof(a->what),
			 "%s%s %" PRIu64 "->%" PRIu64 " MiB (%s), source %s", w,
			 after_bytes < before_bytes ? "inflate" : "deflate", b, f, reason, source);
	else if (!strcmp(what, "target"))
		snprintf(a->what, sizeof(a->what),
			 "%starget %" PRIu64 "->%" PRIu64 " MiB (%s, return=%s), source %s", w, b,
			 f, reason, mtd_return_via_name(st->return_in_force), source);
	else if (!strcmp(what, "reclaim"))
		snprintf(a->what, sizeof(a->what),
			 "%sreclaim %" PRIu64 " MiB asked (%s): uses %" PRIu64 ", to %" PRIu64
			 " MiB, source %s",
			 w, b > f ? b - f : 0, reason, b, f, source);
	else /* reclaimed: the guest's answer, its result last (scripts read it there) */
		snprintf(a->what, sizeof(a->what),
			 "reclaim: guest freed %" PRIu64 " of %" PRIu64 " MiB (%s)", f, b, reason);
	mtd_notice("%s: %s%s", vm->name, a->what, observe ? " [observe-only: nothing done]" : "");
	clock_gettime(CLOCK_REALTIME, &wall);
	struct mtd_history_entry e = {
	    .unix_ms = (uint64_t)wall.tv_sec * 1000 + (uint64_t)wall.tv_nsec / 1000000,
	    .vm = vm->name,
	    .what = what,
	    .before_bytes = before_bytes,
	    .after_bytes = after_bytes,
	    .reason = reason,
	    .source = source,
	    .observe = observe,
	};
	int rc = mtd_history_append(vm->host->cfg->state_dir, &e);
	if (rc < 0 && !vm->history_warned) {
		mtd_warn("%s: cannot write its history under %s: %s (the log keeps the trail)",
			 vm->name, vm->host->cfg->state_dir, strerror(-rc));
		vm->history_warned = true;
	} else if (rc == 0) {
		vm->history_warned = false;
	}
}

void mtd_vm_figures(uint64_t domain_bytes, uint64_t actual_bytes, uint64_t rss_bytes,
		    uint64_t reclaimed_bytes, bool observe, uint64_t *returned_bytes,
		    uint64_t *untouched_bytes)
{
	uint64_t held = domain_bytes > actual_bytes ? domain_bytes - actual_bytes : 0;
	uint64_t returned = held, untouched = 0;

	if (rss_bytes) {
		uint64_t absent = domain_bytes > rss_bytes ? domain_bytes - rss_bytes : 0;
		uint64_t beyond = absent > held ? absent - held : 0;
		returned = held + (reclaimed_bytes < beyond ? reclaimed_bytes : beyond);
		untouched = absent > returned ? absent - returned : 0;
	}
	*returned_bytes = observe ? 0 : returned;
	*untouched_bytes = untouched;
}

void mtd_vm_set_error(struct mtd_vm *vm, const char *what, const char *detail)
{
	snprintf(vm->draft.last_error, sizeof(vm->draft.last_error), "%.40s%.110s", what, detail);
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
