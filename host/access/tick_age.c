// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_age.c - stage 2 of a VM's tick: the access-bit source's turn (tick_age.h).
 *
 * A round that fails (source.h: -errno, libvmm untouched) is no round: the generations did
 * not advance, and the source's figures are not fresh until a round succeeds again, so the
 * controller holds and host-side eviction pauses.  Counting it as a round in which nothing
 * was touched made the whole guest look one interval colder each time (a DAMON without
 * update_schemes_tried_regions did it every round, and pageout evicted hot memory until the
 * refaults stopped it).  -ENODATA is the same for a quieter reason (the ept plugin ran no
 * sampling window: a paused VM): said at info level, not as a warning.
 */
#include "access/tick_age.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "base/log.h"
#include "base/turns.h"
#include "vmm.h"

/* The VM's cgroup, read for the memcg source and the refault signal (memcg_hand.h). */
static void read_cgroup(const struct mtd_age_env *e, struct mtd_tick *t)
{
	struct mtd_memcg_reading r;

	if (!e->memcg)
		return;
	mtd_memcg_hand_feedback(e->memcg, t->now_ms, &r);
	t->cg_valid = r.valid;
	t->cg_refaults = r.refaults;
	t->cg_stall = r.stall;
}

/* The failing starts, goes on or ends: said once each way. */
static void note_round(const struct mtd_age_env *e, int rc, uint64_t now_ms)
{
	struct mtd_age_state *st = e->state;
	const char *name = e->source->ops->name;
	bool failed = rc != 0 && rc != -EAGAIN;

	if (!st)
		return;
	if (!failed) {
		if (st->failed_rc)
			mtd_notice("%s: source %s: aging again after %u failed rounds (%" PRIu64
				   " s)",
				   e->vm, name, st->failed_rounds, (now_ms - st->failed_ms) / 1000);
		st->failed_rc = 0;
		st->failed_rounds = 0;
		return;
	}
	if (!st->failed_rc || st->failed_rc != rc) {
		char why[200] = "";
		(void)mtd_source_describe(e->source, why, sizeof(why));
		mtd_log(rc == -ENODATA ? MTD_LOG_INFO : MTD_LOG_WARNING,
			"%s: source %s: aging round failed (%s)%s%s; the generations stay as they "
			"were and nothing is taken until a round succeeds",
			e->vm, name, strerror(-rc), why[0] ? ": " : "", why);
		if (!st->failed_rc)
			st->failed_ms = now_ms;
	}
	st->failed_rc = rc;
	st->failed_rounds++;
}

/* One aging round.  Its CPU work waits its turn behind the other VMs' (turns.h): an
 * overloaded host stretches every VM's interval alike.  No call to QEMU or libvirt
 * inside. */
static void age(const struct mtd_age_env *e, struct mtd_tick *t)
{
	const struct mtd_source *src = e->source;
	bool turn = mtd_turns_take(e->turns);

	/* Step 2a: pages read back from host swap are refaults, before the source ages; the
	 * cgroup's figures first, as the memcg source reads them. */
	read_cgroup(e, t);
	mtd_hand_feedback(e->hand, e->guest, t->now_ms);
	mtd_hand_mark_free(e->hand, e->guest);
	t->age_rc = src->ops->age(src->ctx, e->guest, t->now_ms);
	mtd_turns_give(e->turns, turn);
	note_round(e, t->age_rc, t->now_ms);
	vmm_guest_get_stats(e->guest, &t->gs);
	t->have_gs = true;
}

void mtd_tick_age(const struct mtd_age_env *e, struct mtd_tick *t)
{
	const struct mtd_source *src = e->source;

	t->have_source = src->ops != NULL;
	t->per_page = src->ops && src->ops->per_page;
	t->live_source = mtd_source_live(src, e->simulated);
	t->have_guest = e->guest != NULL;
	t->cg_usable = e->memcg != NULL;
	t->cg_evicts = t->cg_usable && !t->live_source;
	if (t->aging && e->guest && src->ops) /* a guest is made only for a source */
		age(e, t);
	else if (t->aging) /* no source: the cgroup is still read */
		read_cgroup(e, t);
	t->swapped_bytes =
	    t->cg_evicts ? mtd_memcg_hand_swapped_bytes(e->memcg) : mtd_hand_swapped_bytes(e->hand);
	if (!e->agent_expected && src->ops && src->ops->fresh) {
		t->source_fresh_known = true;
		t->source_fresh = src->ops->fresh(src->ctx, t->now_ms);
	}
	/* A failed round's figures are stale whoever else speaks for the guest: the agent's
	 * freshness says nothing of libvmm's generations, which host-side eviction reads. */
	if (e->state && e->state->failed_rc && src->ops) {
		t->source_fresh_known = true;
		t->source_fresh = false;
		t->age_failed = true;
	}
	bool by_age = true;
	t->estimate = !src->ops            ? NULL
		      : src->ops->estimate ? src->ops->estimate(src->ctx, &by_age)
					   : "access bits";
	t->estimate_by_age = by_age;
}
