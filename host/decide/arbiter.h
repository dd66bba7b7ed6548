/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * arbiter.h - host arbitration: when the host runs short, which VMs give more.
 *
 * The arbiter compares the host's MemAvailable with a low and a high mark and gives every
 * VM a squeeze in [0, 1], which its controller applies as: headroom * (1 - squeeze),
 * inflate step * (1 + squeeze), and a reclaim refault target * (1 + 3 * squeeze) (the
 * reclaim controller then accepts a shorter cold age, so the working set shrinks).
 *
 *   MemAvailable < low mark   the deficit still open, low - available - pending (memory
 *                             already asked of balloons that have not got there yet), is
 *                             spread over the VMs in order of priority, lowest first: each
 *                             takes squeeze = deficit left / its reclaimable bytes (capped
 *                             at 1) until nothing is left; VMs of equal priority share in
 *                             proportion to reclaimable.  Squeezes only ever rise while the
 *                             host is short, and at most once per settle_ms: a balloon takes
 *                             seconds to move (a TCG guest here gave ~64 MiB/s), and raising
 *                             again before MemAvailable shows the last step would squeeze
 *                             the next priority for memory that is already on its way.
 *   MemAvailable > high mark  every squeeze returns to 0: headroom goes back to the VMs.
 *   in between                squeezes stay as they were (hysteresis: no flapping).
 *
 * Pure apart from mtd_arbiter_read_meminfo.  Called from the daemon's main thread only.
 */
#ifndef MEMTIDE_HOST_ARBITER_H
#define MEMTIDE_HOST_ARBITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mtd_arbiter_config {
	uint64_t low_mark_bytes;  /* under this the host is under pressure (0: 5% of MemTotal) */
	uint64_t high_mark_bytes; /* over this pressure is over (0: 2 x low mark) */
	uint64_t settle_ms;       /* least time between two raises of the squeezes (10 s) */
	uint64_t release_rate_bytes_per_s; /* memtidectl release: most handed back per second
					    * across all VMs (128 MiB; release_pace.h) */
};

/* State kept between rounds. */
struct mtd_arbiter_state {
	uint64_t last_raise_ms; /* when squeezes last rose (0: never) */
};

struct mtd_arbiter_vm {
	unsigned priority;          /* lower gives first */
	uint64_t reclaimable_bytes; /* target - max(floor, working set): what squeeze can take */
	uint64_t pending_bytes;     /* actual - target when the balloon is still inflating */
	double squeeze;             /* in: last value; out: new value */
};

struct mtd_arbiter_result {
	bool under_pressure;
	uint64_t deficit_bytes;
	uint64_t low_mark_bytes, high_mark_bytes;
};

/* Resolve 0 marks against mem_total_bytes (see the struct). */
void mtd_arbiter_marks(const struct mtd_arbiter_config *cfg, uint64_t mem_total_bytes,
		       uint64_t *low, uint64_t *high);

/* One arbitration round over vms[0..n) at now_ms.  Cost O(n log n). */
void mtd_arbiter_run(const struct mtd_arbiter_config *cfg, struct mtd_arbiter_state *state,
		     uint64_t now_ms, uint64_t mem_total_bytes, uint64_t mem_available_bytes,
		     struct mtd_arbiter_vm *vms, size_t n, struct mtd_arbiter_result *res);

/* Read MemTotal and MemAvailable from a meminfo file (/proc/meminfo).  0, -errno, or
 * -EPROTO when either field is missing. */
int mtd_arbiter_read_meminfo(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes);

#endif /* MEMTIDE_HOST_ARBITER_H */
