/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * duty.h - how much of the wall clock host-side reclaim may spend: its duty cycle.
 *
 * A write to memory.reclaim or lru_gen's '-' runs the kernel's reclaim in the writer's
 * context: it compresses every page it evicts (zram), walks reverse maps and flushes TLBs,
 * and a guest whose vCPUs share the host's CPUs with it slows down meanwhile.  On the KVM
 * stand (by hand, a probe driving lru_gen on a KVM guest) a single 64 MiB write took 3-6 s
 * and held the guest under half its rate for up to 1.8 s; steps of 8 MiB, each followed by
 * a pause three times its length, kept every dip under a second.  So eviction is paced by the time it takes, not by the
 * bytes: it earns duty x elapsed time, spends what each write took, and writes only while
 * it is in credit.  Unused credit is capped at one interval's worth, so an eviction that
 * was paused does not come back as a burst.
 *
 * Pure: the caller passes the clock and the time each write took.
 */
#ifndef MEMTIDE_HOST_DUTY_H
#define MEMTIDE_HOST_DUTY_H

#include <stdbool.h>
#include <stdint.h>

#define MTD_DUTY_DEFAULT 0.25

struct mtd_duty {
	bool primed;
	uint64_t last_ms;
	double credit_ms;
};

/* Time passed until now_ms: earn duty x elapsed, up to cap_ms of credit. */
void mtd_duty_earn(struct mtd_duty *d, uint64_t now_ms, double duty, uint64_t cap_ms);
/* May a write start now? */
bool mtd_duty_may(const struct mtd_duty *d);
/* A write took ms. */
void mtd_duty_spend(struct mtd_duty *d, uint64_t ms);

#endif /* MEMTIDE_HOST_DUTY_H */
