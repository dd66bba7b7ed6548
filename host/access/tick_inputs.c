// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_inputs.c - stage 1 of a VM's tick: what the VM's peers say now (tick_inputs.h).
 *
 * Nothing here moves anything: the balloon is read, not set, and a peer that went quiet
 * leaves the VM as it is (controller.h says why memtided never gives memory back only
 * because it lost sight of the guest).
 */
#include "access/tick_inputs.h"

#include <inttypes.h>
#include <string.h>

#include "act/agent_link.h"
#include "base/log.h"
#include "decide/steady.h"

#define MiB ((uint64_t)1 << 20)

/* The RAM the guest's kernel holds outside MemTotal: its memmap (64 bytes a 4 KiB page), its
 * image, a crash kernel; 63 MiB of scenario 5's 1 GiB Debian guest.  The balloon sizes RAM,
 * the working set and the headroom are in MemTotal's terms, so under return=balloon the
 * target adds it (controller.c, step 8).  It is the balloon's actual size less the agent's
 * MemTotal (net of the balloon: agent_balloon.c), which move together but are read at
 * different moments: only a report that came while the balloon had stood still for two
 * intervals is read (reports come every interval), and mtd_ctl_reserved_note keeps the
 * least reading (the figure does not change while the guest runs; a guest's figures are
 * untrusted, and too high a reading would only give the guest more, within its ceiling). */
static void note_reserved(struct mtd_vm_decide *s, const struct mtd_inputs_env *e,
			  const struct proto_stats *as, uint64_t now_ms)
{
	const struct mtd_balloon *b = e->balloon;
	uint64_t interval = e->ctl->interval_ms;

	if (!b->actual_since_ms || now_ms - b->actual_since_ms < 2 * interval)
		return;
	uint64_t r = mtd_ctl_reserved_note(s->reserved_bytes, b->actual, as->mem_total_bytes,
					   b->domain_bytes);
	if (r && !s->reserved_bytes)
		mtd_info("%s: the guest's kernel holds %" PRIu64
			 " MiB of its RAM outside MemTotal; the balloon's target leaves room for "
			 "it under return=balloon",
			 e->vm, r / MiB);
	s->reserved_bytes = r;
}

/* The guest's answer to the last reclaim request, once, as an action: what it freed is the
 * other half of an inflate an operator reads in `memtidectl vm show`. */
static void note_reclaim_reply(struct mtd_vm_decide *s, const struct mtd_inputs_env *e,
			       uint64_t now_ms)
{
	uint64_t seq;
	const struct proto_reclaim_reply *r = mtd_agent_link_reclaim_reply(e->agent, &seq);

	if (!r || seq == s->reclaim_seen)
		return;
	s->reclaim_seen = seq;
	uint32_t deadline = mtd_agent_link_reply_deadline(e->agent);
	mtd_steady_reply(&s->steady, e->ctl, r->requested_bytes, r->freed_bytes, r->result,
			 r->elapsed_ms, deadline);
	/* Once per run of them: the operator sees why memtided keeps asking a guest that
	 * answers with little. */
	if (s->steady.slow_replies == 1)
		mtd_info("%s: the guest reclaims slowly: %" PRIu64 " of %" PRIu64
			 " MiB freed in the %u ms it was given: asked again, not held as futile",
			 e->vm, r->freed_bytes / MiB, r->requested_bytes / MiB, deadline);
	e->draft->counters.reclaimed_bytes += r->freed_bytes;
	mtd_steady_reclaim_answered(&s->steady, now_ms, e->ctl->interval_ms);
	mtd_audit(e->audit, now_ms, "reclaimed", r->requested_bytes, r->freed_bytes,
		  proto_reclaim_result_name(r->result), "guest", false);
	/* the message passed proto's validation: no control characters */
	mtd_debug("%s: reclaim took %u ms in the guest%s%s", e->vm, r->elapsed_ms,
		  r->message[0] ? ": " : "", r->message);
}

/* What the balloon's news voids of the decision: a new QEMU is a new guest at its full
 * size (its estimate, its kernel's share of RAM, its fault counts and the runs taken were
 * the old one's); a
 * balloon holding more than was set is where the controller starts from. */
static void after_news(struct mtd_vm_decide *s, struct mtd_vm_act *a, const struct mtd_balloon *b,
		       enum mtd_balloon_news news)
{
	if (news == MTD_BALLOON_RESTARTED) {
		memset(&s->ctl, 0, sizeof(s->ctl));
		a->nr_taken = 0;
		s->rounds = 0; /* the estimate was the old guest's: two rounds before a new one */
		s->reserved_bytes = 0;
		/* libvmm's guest is made again for the new process (vm_attach.c): its refault
		 * count starts at 0, and the last decision was over the old one's pages. */
		s->last_refaults = 0;
		s->have_fault_base = false;
		memset(&s->decision, 0, sizeof(s->decision));
	} else if (news == MTD_BALLOON_GREW) {
		s->ctl.target_bytes = s->ctl.balloon_bytes = b->actual;
		s->rounds = 0;
	}
}

static void read_agent(struct mtd_vm_decide *s, const struct mtd_inputs_env *e, struct mtd_tick *t)
{
	const struct mtd_ctl_config *c = e->ctl;
	uint64_t seq;

	mtd_agent_link_service(e->agent, t->now_ms);
	uint64_t heard = mtd_agent_link_last_heard(e->agent);
	/* An agent reclaiming for us is busy, not silent: its loop reports nothing while the
	 * kernel reclaims (under TCG into zram one request took over 30 s).  Busy for the
	 * request's deadline and agent_silence after it, no longer: an agent killed just after
	 * a request used to count as busy for 2 x agent_silence, and by then the guest's
	 * pressure, seen through the balloon, spoke first, so the silence was never said
	 * (scenario 5, once in CI).  A false "silent" only holds inflation. */
	t->agent_up = mtd_agent_link_ready(e->agent);
	t->agent_heard_ms = heard;
	t->agent_fresh = t->agent_up && heard &&
			 (t->now_ms - heard <= c->agent_silence_ms ||
			  mtd_agent_link_reclaiming(e->agent, t->now_ms, c->agent_silence_ms));
	const struct proto_stats *as = mtd_agent_link_stats(e->agent, &seq);
	t->as = t->agent_fresh ? as : NULL;
	if (as && seq != s->avail_seq) {
		s->avail_seq = seq;
		s->avail_balloon = e->balloon->actual;
		if (t->agent_fresh)
			note_reserved(s, e, as, t->now_ms);
	}
	t->need_bytes += mtd_agent_link_take_need(e->agent);
	note_reclaim_reply(s, e, t->now_ms);
	const struct proto_hello *h = mtd_agent_link_hello(e->agent);
	t->agent_caps_known = h != NULL;
	t->agent_caps = h ? h->caps : 0;
}

void mtd_tick_inputs(struct mtd_vm_decide *s, struct mtd_vm_act *a, const struct mtd_inputs_env *e,
		     struct mtd_tick *t)
{
	struct mtd_balloon *b = e->balloon;
	enum mtd_balloon_news news = mtd_balloon_read(b, t->now_ms, e->ctl->min_change_bytes,
						      s->ctl.balloon_bytes, e->draft);

	after_news(s, a, b, news);
	t->guest_took_back = news == MTD_BALLOON_TOOK_BACK;
	t->qemu_restarted = news == MTD_BALLOON_RESTARTED;
	t->bstats_fresh = mtd_balloon_stats_fresh(b, t->now_ms, e->ctl->agent_silence_ms);
	if (e->agent) {
		/* The agent's figures are bounded by the VM's RAM (agent_bounds.h); QEMU may have
		 * changed since the last tick. */
		mtd_agent_link_set_ram(e->agent, b->domain_bytes);
		read_agent(s, e, t);
	}
	t->domain_bytes = b->domain_bytes;
	t->actual_bytes = b->actual;
	t->applied_valid = b->applied_valid;
	t->fpr_on = b->fpr_known && b->fpr_on;
	t->bstats_valid = b->stats.valid;
	t->bstats_has_available = b->stats.has_available;
	t->bstats_available_bytes = b->stats.available_bytes;
	t->bstats_major_faults = b->stats.major_faults;
	t->majflt_known = b->majflt_known;
	t->majflt_per_s = b->majflt_per_s;
}
