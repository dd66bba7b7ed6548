// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_publish.c - stage 5 of a VM's tick (decide/tick.h): the status snapshot.  Every
 * stage's figures go into the VM's draft, which is published whole (vm.c, RCU): the front
 * ends (control socket, metrics) read only snapshots.
 */
#include <inttypes.h>
#include <stdio.h>

#include "access/choose.h"
#include "act/agent_link.h"
#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "base/log.h"
#include "daemon/vm.h"

#define MiB ((uint64_t)1 << 20)

/* Generations, oldest first, with their ages: the first holds every page resident when
 * memtide came, at least as old as our watch, and we cannot say more. */
static void put_generations(struct mtd_vm_status *st, const struct mtd_tick *t)
{
	st->resident_bytes = t->gs.resident_pages << VMM_PAGE_SHIFT;
	st->nr_gens = t->gs.nr_gens < MTD_MAX_GENS ? t->gs.nr_gens : MTD_MAX_GENS;
	for (unsigned i = 0; i < st->nr_gens; i++) {
		st->gen_pages[i] = t->gs.gen[i].pages;
		uint64_t birth = t->gs.gen[i].birth_ms > t->first_tick_ms ? t->gs.gen[i].birth_ms
									  : t->first_tick_ms;
		st->gen_age_ms[i] = t->now_ms > birth ? t->now_ms - birth : 0;
	}
}

/* The guest's own figures: its agent's last word, else the balloon driver's. */
static void put_guest(struct mtd_vm *vm, struct mtd_vm_status *st)
{
	uint64_t seq;

	st->agent_connected = vm->agent && mtd_agent_link_ready(vm->agent);
	mtd_vm_channel_status(&vm->vsock, vm->agent, st);
	if (st->agent_connected) { /* kept after the agent goes: its last word */
		st->agent_caps = mtd_agent_link_hello(vm->agent)->caps;
		st->agent_caps_known = true;
	}
	st->fpr_on = vm->balloon.fpr_on;
	mtd_access_refresh_status(&vm->source, st);
	const struct proto_stats *as = vm->agent ? mtd_agent_link_stats(vm->agent, &seq) : NULL;
	if (as) {
		st->guest_mem_available_bytes = as->mem_available_bytes;
		st->guest_psi_some_avg10 = as->has_psi ? as->psi.some_avg10 : 0.0;
		st->guest_psi_known = as->has_psi;
	} else if (vm->balloon.stats.valid && vm->balloon.stats.has_available) {
		st->guest_mem_available_bytes = vm->balloon.stats.available_bytes;
	}
}

void mtd_tick_publish(struct mtd_vm *vm, const struct mtd_tick *t)
{
	const struct mtd_ctl_output *out = &t->out;
	const struct mtd_vm_decide *s = &vm->dec;
	const struct mtd_balloon *b = &vm->balloon;
	struct mtd_vm_status *st = &vm->draft;

	st->state = b->failures >= MTD_BALLOON_ERROR_AFTER ? MTD_VM_ERROR : out->state;
	st->policy = vm->policy;
	st->updated_ms = t->now_ms;
	st->max_bytes = b->domain_bytes;
	st->balloon_actual_bytes = b->actual;
	/* Honest figures (mtd_vm_figures): what memtide returned, apart from what is not
	 * resident without its doing. */
	mtd_vm_figures(b->domain_bytes, b->actual, st->host_rss_bytes, st->counters.reclaimed_bytes,
		       st->observe, &st->returned_bytes, &st->untouched_bytes);
	st->saved_bytes = st->returned_bytes;
	/* Host-side eviction: what it put in swap is returned, less the compressed pool's
	 * share (pageout_hand.h). */
	st->return_in_force = mtd_return_in_force(t->mode, st->soft);
	if (t->cg_evicts)
		mtd_memcg_hand_publish(vm->memcg, st); /* the kernel's reclaim evicts */
	else
		mtd_hand_publish(vm->hand, st);
	if (t->have_gs)
		put_generations(st, t);
	st->refault_rate_per_min = s->reclaim.last_rate_per_min;
	st->cold_age_ms = s->cold_age_ms;
	st->reuse_floor_ms = s->reclaim.floor_ms;
	snprintf(st->reclaim_hold, sizeof(st->reclaim_hold), "%s",
		 mtd_decide_holds(s, &vm->policy, t->have_source && t->per_page)
		     ? vmm_reclaim_hold_name(s->reclaim.hold_why)
		     : "");
	st->hold_left_ms = s->ctl.hold_until_ms > t->now_ms ? s->ctl.hold_until_ms - t->now_ms : 0;
	st->refused_steps = s->ctl.refusals;
	uint64_t ceiling = mtd_ctl_safe_bytes(&vm->policy, b->domain_bytes);
	st->released = s->released;
	st->release_left_bytes = s->released && ceiling > b->actual ? ceiling - b->actual : 0;
	st->release_waiting = s->released && s->release_waiting;
	st->working_set_bytes = t->wss_bytes;
	st->controller_output = s->reclaim.pid.output;
	put_guest(vm, st);
	if (b->failures == 0 && st->state != MTD_VM_ERROR && !b->peer_down_since_ms)
		st->last_error[0] = '\0';
	(void)mtd_vm_publish(vm);
	/* wss: the estimate the controller used (at the cold age); the one at the shortest age
	 * beside it, which is what the guest touched last interval */
	mtd_debug("%s: actual %" PRIu64 " MiB host rss %" PRIu64 " MiB balloon %" PRIu64
		  " MiB target %" PRIu64 " MiB used %" PRIu64 " MiB wss %" PRIu64 " MiB (%" PRIu64
		  " MiB at %" PRIu64 " ms) cold age %" PRIu64 " ms refaults %.5f/min %s",
		  vm->name, b->actual / MiB, st->host_rss_bytes / MiB,
		  st->balloon_target_bytes / MiB, st->target_bytes / MiB,
		  st->guest_used_bytes / MiB, st->working_set_bytes / MiB, st->wss_bytes[0] / MiB,
		  st->wss_age_ms[0], s->cold_age_ms, st->refault_rate_per_min,
		  mtd_ctl_reason_name(out->reason));
}
