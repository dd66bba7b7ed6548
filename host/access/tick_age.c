// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tick_age.c - stage 2 of a VM's tick: the access-bit source's turn (tick_age.h).
 */
#include "access/tick_age.h"

#include <errno.h>
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
	if (t->age_rc != 0 && t->age_rc != -EAGAIN)
		mtd_debug("%s: source %s: %s", e->vm, src->ops->name, strerror(-t->age_rc));
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
	bool by_age = true;
	t->estimate = !src->ops            ? NULL
		      : src->ops->estimate ? src->ops->estimate(src->ctx, &by_age)
					   : "access bits";
	t->estimate_by_age = by_age;
}
