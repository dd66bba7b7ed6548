/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tick_age.h - stage 2 of a VM's tick (decide/tick.h): the access-bit source's turn.  On a
 * scheduled tick it ages libvmm's generations (source.h), after host-side eviction's
 * refault scan (pageout_hand.h, step 2a); on every tick it says what its figures are worth
 * (fresh, page-level or amounts, where the working set comes from).
 */
#ifndef MEMTIDE_HOST_TICK_AGE_H
#define MEMTIDE_HOST_TICK_AGE_H

#include <stdbool.h>
#include <stdint.h>

#include "access/source.h"
#include "decide/tick.h"

struct mtd_memcg_hand;
struct mtd_pageout_hand;
struct mtd_turns;
struct vmm_guest;

/* What a failed aging round leaves behind, until a round succeeds again: the source's figures
 * are not fresh meanwhile (the controller holds, host-side eviction pauses), and the
 * operator is told once when it starts and once when it ends. */
struct mtd_age_state {
	int failed_rc;      /* the last round's error (0: the last round was good) */
	uint64_t failed_ms; /* when the failing began */
	unsigned failed_rounds;
};

struct mtd_age_env {
	const char *vm;
	struct mtd_source *source; /* ops NULL: none */
	struct vmm_guest *guest;   /* NULL: no source, nothing to age */
	struct mtd_pageout_hand *hand;
	struct mtd_memcg_hand *memcg; /* the VM's cgroup reclaim (NULL: none) */
	struct mtd_turns *turns;      /* the CPU part of a round waits its turn (turns.h) */
	bool simulated;               /* [daemon] source = sim: not the guest's own accesses */
	bool agent_expected;          /* the agent's freshness counts, not the source's */
	struct mtd_age_state *state;  /* the VM's, kept across ticks */
};

/* Stage 2. */
void mtd_tick_age(const struct mtd_age_env *e, struct mtd_tick *t);

#endif /* MEMTIDE_HOST_TICK_AGE_H */
