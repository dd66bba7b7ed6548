/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pool_worth.h - does host-side eviction still pay?  Memory sent to zram (or zswap) stays
 * in RAM, compressed: the host gains what the page took less what its compressed copy takes.
 * Random or encrypted data does not compress (zram stores such a page whole, and a little
 * more), so evicting it gains nothing and still costs the guest a refault each time it
 * touches the page again.
 *
 * memtided measures this from its own figures, step by step: the bytes its eviction put in
 * swap (the VM cgroup's memory.swap.current growth) against the growth of the compressed
 * pools over the same step (swap_stat.h: zram's mem_used_total, zswap's pool).  The steps
 * take turns across VMs (turns.h), so another VM's eviction does not land in the window.
 *
 *   - A verdict needs MTD_POOL_MEASURE_BYTES evicted since the last one.
 *   - The saving is 1 - pool growth / evicted.  Under min_saving ([pageout] min_saving, 25%
 *     by default: a compression ratio under 1.33) eviction stops: nothing more is taken for a
 *     hold of 10 minutes, doubled at each verdict alike up to an hour, after which the next
 *     MTD_POOL_MEASURE_BYTES are a probe; a verdict over min_saving ends the doubling.
 *   - What is already in swap stays there: it costs the pool about what it cost the guest,
 *     and reading it back would cost the guest a refault for nothing.
 *
 * Pure: bytes and the clock come in as arguments.
 */
#ifndef MEMTIDE_HOST_POOL_WORTH_H
#define MEMTIDE_HOST_POOL_WORTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_POOL_MEASURE_BYTES      ((uint64_t)16 << 20)
#define MTD_POOL_MIN_SAVING_DEFAULT 0.25
#define MTD_POOL_HOLD_FIRST_MS      (10 * 60 * 1000ULL)
#define MTD_POOL_HOLD_MAX_MS        (60 * 60 * 1000ULL)

struct mtd_pool_worth {
	uint64_t win_evicted;   /* bytes put in swap since the last verdict */
	int64_t win_pool;       /* pool growth over the same steps (may be negative) */
	bool measured;          /* a verdict has been reached */
	double saving;          /* the last verdict's saving */
	bool holding;           /* eviction stopped: it does not pay */
	uint64_t hold_until_ms; /* ...until then */
	uint64_t hold_ms;       /* the last hold's length */
	uint64_t evicted_total; /* since attach */
	int64_t pool_total;
};

/* One eviction step: evicted bytes went to swap while the pools grew by pool_growth. */
void mtd_pool_note(struct mtd_pool_worth *w, uint64_t evicted_bytes, int64_t pool_growth,
		   double min_saving, uint64_t now_ms);

/* May eviction take more now?  False while a hold runs (it ends by itself at its time). */
bool mtd_pool_allows(struct mtd_pool_worth *w, uint64_t now_ms);

/* The sentence for vm show and the log: why eviction is held, with the figures. */
void mtd_pool_why(const struct mtd_pool_worth *w, uint64_t now_ms, char *buf, size_t len);

#endif /* MEMTIDE_HOST_POOL_WORTH_H */
