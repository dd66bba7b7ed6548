/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stall_budget.h - how long a VM may wait for memory because of memtided: its stall
 * budget, held beside the refault budget (vmm_reclaim_ctl) while the host takes memory from
 * it through the kernel's reclaim (act/memcg_hand.h).
 *
 * A refault is what the guest pays for a wrong eviction, but its price depends on where the
 * page was: microseconds from zram, milliseconds from a disk.  PSI measures the price itself:
 * memory.pressure's "some" total grows by the time any task of the VM's cgroup (a vCPU
 * thread among them) waited for memory - a refault's read, direct reclaim, throttling.  So
 * the rule counts stalled time against wall time, per VM:
 *
 *   - over each interval, stall = (growth of "some") / (interval);
 *   - eviction holds while the last interval's stall is over the budget, and for the next
 *     MTD_STALL_HOLD_INTERVALS intervals after one that was (the memory just read back is
 *     what the guest uses: taking more now would take it again);
 *   - the refault signal the reclaim controller sees is weighted up by the stall, as for a
 *     guest agent's own PSI (tick_decide.c): stall / budget counts extra.
 *
 * The budget is a fraction of wall time: 0.2% by default ([pageout] stall_budget), close to
 * senpai's 10 ms in 6 s (0.17%), the rule Meta's TMO runs the same kernel interface with.
 * A default, not a tuning: scenario 20 (tests/e2e/scenarios/20_kvm_agentless.sh) runs with it.
 *
 * Pure: the caller passes the counter and the clock.
 */
#ifndef MEMTIDE_HOST_STALL_BUDGET_H
#define MEMTIDE_HOST_STALL_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define MTD_STALL_BUDGET_DEFAULT 0.002
#define MTD_STALL_HOLD_INTERVALS 2

struct mtd_stall {
	bool primed;
	uint64_t last_us; /* "some" total at the last note */
	uint64_t last_ms;
	double frac;        /* stalled share of the last interval */
	double worst;       /* the highest frac since attach */
	uint64_t total_us;  /* stall since the first note (what memtided's time cost) */
	unsigned hold_left; /* intervals still held after one over the budget */
};

/* One reading of the cgroup's PSI "some" total (microseconds) at now_ms.  A counter that went
 * backwards (a new cgroup) starts over. */
void mtd_stall_note(struct mtd_stall *s, uint64_t some_total_us, uint64_t now_ms, double budget);

/* May eviction go on this interval?  False while the stall was over budget, or within the
 * hold after it. */
bool mtd_stall_allows(const struct mtd_stall *s);

/* The refault signal, weighted up by the stall (a share of the interval): pages * (1 +
 * stall / budget), the extra at most 4x. */
uint64_t mtd_stall_weigh(double stall, double budget, uint64_t pages);

#endif /* MEMTIDE_HOST_STALL_BUDGET_H */
