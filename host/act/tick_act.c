// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_act.c - stage 4 of a VM's tick: the decision carried out (tick_act.h).
 *
 * Policy `return` says who returns the memory: the balloon follows the target, or stays a
 * cap while the agent's reclaim and free page reporting return it; with return=pageout or
 * auto the eviction hand's cold runs go to host swap (pageout_hand.h).  Whichever carries
 * it out, libvmm learns which pages left (the eviction hand picks the coldest runs) or came
 * back, unless host-side eviction evicts for real.  Observe-only: every step is said
 * ("would ...") and none is taken.
 */
#include "act/tick_act.h"

#include <string.h>

#include "act/agent_link.h"
#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "decide/steady.h"

#define EVICT_BATCH 64

/* libvmm learns which pages the target took (eviction hand) or gave back: by the balloon, or
 * by the guest's own reclaim when return=reclaim is in force. */
static void account_target(struct mtd_vm_act *a, const struct mtd_vm_decide *s,
			   const struct mtd_act_env *e, uint64_t now_ms, uint64_t from, uint64_t to)
{
	if (!e->guest)
		return;
	if (to < from) {
		struct vmm_run runs[EVICT_BATCH];
		struct vmm_evict_req req = {
		    .max_pages = (from - to) >> VMM_PAGE_SHIFT,
		    .min_age_ms = s->cold_age_ms,
		    .now_ms = now_ms,
		    .runs = runs,
		    .max_runs = EVICT_BATCH,
		};
		struct vmm_evict_result res;
		if (a->nr_taken + EVICT_BATCH > MTD_MAX_TAKEN_RUNS)
			return; /* history full: the balloon still moves, libvmm is not told */
		if (vmm_evict(e->guest, &req, &res) < 0)
			return;
		memcpy(&a->taken[a->nr_taken], runs, res.nr_runs * sizeof(runs[0]));
		a->nr_taken += res.nr_runs;
		if (e->evicted)
			e->evicted(e->evicted_ctx, runs, res.nr_runs);
		return;
	}
	/* Deflate: the newest runs come back first, as memory the guest has not used yet
	 * (vmm_give_back says what counting them young did). */
	uint64_t left = (to - from) >> VMM_PAGE_SHIFT;
	while (left && a->nr_taken) {
		struct vmm_run *r = &a->taken[a->nr_taken - 1];
		uint64_t n = r->npages < left ? r->npages : left;
		(void)vmm_give_back(e->guest, r->gpa + ((r->npages - n) << VMM_PAGE_SHIFT), n);
		r->npages -= n;
		left -= n;
		if (!r->npages)
			a->nr_taken--;
	}
}

/* For the host arbiter: what a full squeeze could still take here, and what the balloon
 * has yet to take. */
static void tell_arbiter(const struct mtd_act_env *e, const struct mtd_tick *t)
{
	const struct mtd_ctl_output *out = &t->out;
	uint64_t reclaimable = t->reclaimable_bytes;
	uint64_t resident = t->gs.resident_pages << VMM_PAGE_SHIFT;

	/* Host-side eviction takes resident pages beyond the working set, within the room in
	 * swap and net of the compressed pool. */
	if (t->hostside && !t->observe) {
		uint64_t cold =
		    t->may_reclaim && resident > t->keep_bytes ? resident - t->keep_bytes : 0;
		reclaimable = t->cg_evicts ? mtd_memcg_hand_reclaimable(e->memcg, cold)
					   : mtd_hand_reclaimable(e->hand, cold);
	}
	atomic_store(e->reclaimable_bytes, reclaimable);
	uint64_t holds = out->soft && t->in.used_known ? t->in.guest_used_bytes : t->actual_bytes;
	atomic_store(e->pending_bytes,
		     !t->observe && holds > out->target_bytes ? holds - out->target_bytes : 0);
}

/* The agent's reclaim.  before/after in the trail: what the guest uses, and what it is
 * asked to use.  Under the balloon, a step waits for the guest to free the memory first
 * (controller.c, actuate: the balloon follows only into what the guest has free), so the
 * balloon stays above the target and nothing "changed": the request goes all the same, or
 * neither ever moves (scenario 2 under return=balloon sat at 807 MiB of a 328 MiB target).
 * An outstanding request (-EBUSY) and a futile answer (steady.h) keep it from repeating. */
static void ask_agent(struct mtd_vm_decide *s, const struct mtd_act_env *e,
		      const struct mtd_tick *t)
{
	const struct mtd_ctl_output *out = &t->out;
	const struct mtd_ctl_config *c = e->ctl;
	bool waits = !out->soft && out->balloon_bytes > out->target_bytes;

	if (out->reclaim_bytes && e->agent && (out->changed || t->first || out->soft || waits)) {
		uint64_t used = t->in.used_known ? t->in.guest_used_bytes : t->actual_bytes;
		uint64_t to = used > out->reclaim_bytes ? used - out->reclaim_bytes : 0;
		if (t->observe) {
			mtd_audit(e->audit, t->now_ms, "reclaim", used, to, t->reason, t->who,
				  true);
		} else if (mtd_agent_link_reclaim(e->agent, out->reclaim_bytes, true,
						  (uint32_t)c->interval_ms, t->now_ms) == 0) {
			e->draft->counters.reclaim_requests++;
			mtd_steady_reclaim_sent(&s->steady, t->now_ms, c->interval_ms,
						c->interval_ms);
			e->draft->counters.reclaim_requested_bytes += out->reclaim_bytes;
			mtd_audit(e->audit, t->now_ms, "reclaim", used, to, t->reason, t->who,
				  false);
		}
	}
}

/* Host-side eviction, once the controller has spoken (pageout_hand.h). */
static void evict_host(struct mtd_vm_act *a, const struct mtd_vm_decide *s,
		       const struct mtd_act_env *e, const struct mtd_tick *t)
{
	const struct mtd_ctl_output *out = &t->out;
	char why[160];
	uint64_t seq = 0;
	const struct proto_reclaim_reply *r =
	    e->agent ? mtd_agent_link_reclaim_reply(e->agent, &seq) : NULL;
	/* The guest's first touches grow its RAM on the host: a guest filling memory fast (the
	 * steady rule's rate, steady.h) is loading, and what it writes is idle until it reads
	 * it: the values a loading server wrote first were its hot ones (scenario 9 met it
	 * with the agent's reclaim, scenario 19 with host pageout: the hot tenth paged out
	 * during the load and read back as the GETs began).  So host pageout waits. */
	a->rss_filling = mtd_steady_growing(&a->rss_steady, e->ctl, e->draft->host_rss_bytes != 0,
					    e->draft->host_rss_bytes, t->now_ms);
	struct mtd_hand_input in = {
	    .mode = t->mode,
	    /* Memory is taken only while the controller takes it: not under pressure, a need,
	     * a hold, a silent source, on exit or opt-out. */
	    .may_take = out->state == MTD_VM_ACTIVE && !s->observing && !a->rss_filling &&
			!t->age_failed &&
			(out->reason == MTD_CTL_STEADY || out->reason == MTD_CTL_INFLATE ||
			 out->reason == MTD_CTL_REFAULT_HOLD),
	    .why_not = t->age_failed    ? "the access source's last aging round failed"
		       : s->observing   ? "observe-only"
		       : a->rss_filling ? "the guest is filling memory (its RAM on the host grows)"
					: mtd_ctl_reason_name(out->reason),
	    .agent_asked = out->reclaim_bytes && e->agent,
	    .reply_seq = r ? seq : 0,
	    .reply_done = r && r->freed_bytes >= r->requested_bytes,
	    .interval_ms = e->ctl->interval_ms,
	    .decision = &s->decision,
	    .hold_why = s->decision.gate == VMM_DECIDE_HOLD
			    ? mtd_decide_hold_why(s, why, sizeof(why))
			    : NULL,
	    .now_ms = t->now_ms,
	    .evicted = e->paged_out,
	    .evicted_ctx = e->evicted_ctx,
	};

	if (t->cg_evicts) {
		/* No live source: the kernel's reclaim picks the pages (memcg_hand.h). */
		struct mtd_memcg_input mi = {
		    .mode = t->mode,
		    .may_take = in.may_take,
		    .may_age = !s->observing,
		    .why_not = in.why_not,
		    .agent_giving = mtd_agent_giving(&a->cg_giving, in.agent_asked, in.reply_seq,
						     in.reply_done, t->now_ms, in.interval_ms),
		    .decision = in.decision,
		    .hold_why = in.hold_why,
		    .max_age_ms = s->reclaim.cfg.max_age_ms,
		    .interval_ms = in.interval_ms,
		    .now_ms = t->now_ms,
		};
		mtd_memcg_hand_step(e->memcg, &mi);
		return;
	}
	if (t->have_gs)
		mtd_hand_step(e->hand, e->guest, &in);
}

void mtd_tick_act(struct mtd_vm_act *a, struct mtd_vm_decide *s, const struct mtd_act_env *e,
		  const struct mtd_tick *t)
{
	const struct mtd_ctl_output *out = &t->out;
	uint64_t prev_target = t->prev_target;

	tell_arbiter(e, t);
	ask_agent(s, e, t);
	/* libvmm follows the target, whichever actuator carries it out (not when nothing is
	 * carried out, nor under host-side eviction, whose hand evicts for real); with the
	 * balloon a cap, the target moves alone, and the trail says so. */
	if (!t->observe && !t->hostside &&
	    out->target_bytes != (prev_target ? prev_target : t->actual_bytes))
		account_target(a, s, e, t->now_ms, prev_target ? prev_target : t->actual_bytes,
			       out->target_bytes);
	if (out->soft && prev_target && out->target_bytes != prev_target &&
	    (out->target_bytes > prev_target ||
	     prev_target - out->target_bytes >= e->ctl->min_change_bytes))
		mtd_audit(e->audit, t->now_ms, "target", prev_target, out->target_bytes, t->reason,
			  t->who, t->observe);
	mtd_balloon_apply(e->balloon, out->balloon_bytes, t->observe, e->ctl->min_change_bytes,
			  t->now_ms, t->reason, t->who, e->draft, e->audit);
	if (t->aging)
		evict_host(a, s, e, t);
}
