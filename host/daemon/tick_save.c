// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_save.c - stage 6 of a VM's tick (decide/tick.h): what a restarted memtided needs to
 * resume this VM (state.h), saved when it changed; and its other half, taking over the file
 * a previous memtided saved, on the first tick once the balloon's actual is known.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "daemon/state.h"
#include "daemon/vm.h"

#define MiB ((uint64_t)1 << 20)

/* Field by field (struct padding may differ). */
static bool same_saved(const struct mtd_saved_vm *a, const struct mtd_saved_vm *b)
{
	return a->ctl.primed == b->ctl.primed && a->ctl.target_bytes == b->ctl.target_bytes &&
	       a->ctl.balloon_bytes == b->ctl.balloon_bytes &&
	       a->ctl.hold_until_ms == b->ctl.hold_until_ms &&
	       a->ctl.last_take_ms == b->ctl.last_take_ms &&
	       a->ctl.refused_since_take == b->ctl.refused_since_take &&
	       a->ctl.refusals == b->ctl.refusals && a->released == b->released &&
	       strcmp(a->instance, b->instance) == 0 &&
	       memcmp(a->policy_set, b->policy_set, sizeof(a->policy_set)) == 0;
}

/* A failure is told once for the whole daemon, and tried again each tick. */
void mtd_tick_save(struct mtd_vm *vm, uint64_t now_ms)
{
	const struct mtd_vm_host *h = vm->host;
	const struct mtd_vm_decide *d = &vm->dec;
	struct mtd_saved_vm *s;
	char err[300];

	if (!d->ctl.primed || !h->cfg->state_dir[0])
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	memcpy(s->name, vm->name, sizeof(s->name));
	memcpy(s->uuid, vm->uuid, sizeof(s->uuid));
	memcpy(s->boot_id, h->boot_id, sizeof(s->boot_id));
	memcpy(s->instance, vm->balloon.instance, sizeof(s->instance));
	s->ctl = d->ctl;
	s->ctl.reason = MTD_CTL_STEADY; /* not kept */
	if (d->observing) {
		/* Observe-only: the controller's targets were never carried out; a memtided
		 * that resumes acting must start from the balloon as it really is. */
		s->ctl = (struct mtd_ctl_state){.primed = true,
						.target_bytes = vm->balloon.actual,
						.balloon_bytes = vm->balloon.actual};
		if (!vm->balloon.actual) {
			free(s);
			return;
		}
	}
	s->released = d->released;
	pthread_mutex_lock(&vm->mbox_lock);
	memcpy(s->policy_set, vm->policy_set, sizeof(s->policy_set));
	pthread_mutex_unlock(&vm->mbox_lock);
	if (vm->last_saved && !vm->state_failing && same_saved(vm->last_saved, s)) {
		free(s);
		return;
	}
	struct mtd_saved_vm cmp = *s; /* what is compared next time: without saved_ms */
	s->saved_ms = now_ms;
	if (mtd_state_save(h->cfg->state_dir, s, err, sizeof(err)) < 0) {
		if (!atomic_exchange(h->state_failing, true))
			mtd_warn("%s: state not saved: %s; a memtided restarted now would resume "
				 "this VM from its size alone, without its hold or release",
				 vm->name, err);
		vm->state_failing = true;
		free(s);
		return;
	}
	if (atomic_exchange(h->state_failing, false))
		mtd_notice("%s: state saved in %s again", vm->name, h->cfg->state_dir);
	vm->state_failing = false;
	*s = cmp;
	free(vm->last_saved);
	vm->last_saved = s;
}

/* mtd_ctl_resume checks the file against the balloon's actual. */
void mtd_tick_resume(struct mtd_vm *vm, uint64_t now_ms)
{
	const struct mtd_config *cfg = vm->host->cfg;
	struct mtd_vm_decide *d = &vm->dec;
	const struct mtd_balloon *b = &vm->balloon;
	struct mtd_saved_vm *s = vm->saved;
	char why[200];

	if (!s || d->ctl.primed)
		return;
	vm->saved = NULL;
	if (s->instance[0] && b->instance[0] && strcmp(s->instance, b->instance) != 0) {
		mtd_notice("%s: the state file is from an earlier QEMU process (%s, now %s): "
			   "starting from the current size, %" PRIu64 " MiB",
			   vm->name, s->instance, b->instance, b->actual / MiB);
		free(s);
		return;
	}
	bool taken = mtd_ctl_resume(&cfg->ctl, &vm->policy, b->domain_bytes, b->actual, now_ms,
				    &s->ctl, &d->ctl, why, sizeof(why));
	d->released = s->released;
	vm->draft.resumed = true;
	if (!taken)
		mtd_warn("%s: state file: %s; resuming from the current size, %" PRIu64 " MiB",
			 vm->name, why, d->ctl.balloon_bytes / MiB);
	else
		mtd_notice("%s: resumed from its state file (saved %" PRIu64 " s ago): balloon "
			   "%" PRIu64 " MiB (actual %" PRIu64 " MiB), target %" PRIu64
			   " MiB, no inflation for %" PRIu64 " s, %u steps refused in a row%s",
			   vm->name, now_ms > s->saved_ms ? (now_ms - s->saved_ms) / 1000 : 0,
			   d->ctl.balloon_bytes / MiB, b->actual / MiB, d->ctl.target_bytes / MiB,
			   d->ctl.hold_until_ms > now_ms ? (d->ctl.hold_until_ms - now_ms) / 1000
							 : 0,
			   d->ctl.refusals, d->released ? ", released" : "");
	free(s);
}
