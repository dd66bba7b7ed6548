/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memcg.h - one memory cgroup (v2) as host-side reclaim reads and drives it: what it holds
 * (memory.current, memory.swap.current, memory.stat), what its tasks feel (memory.pressure:
 * PSI), what it is limited to (memory.high, memory.max: read, never written here), and
 * proactive reclaim (memory.reclaim, Linux 5.19 and later).
 *
 * The cgroup is a VM's (act/vm_cgroup.h finds it), so its figures are the guest's as the
 * host sees them: a major fault of the cgroup is QEMU (for a vCPU, or for a device)
 * touching guest memory that was in swap; PSI's "some" is the time one of its tasks waited
 * for memory, a vCPU thread among them.
 *
 * Pure apart from mtd_memcg_read and mtd_memcg_reclaim.
 */
#ifndef MEMTIDE_HOST_MEMCG_H
#define MEMTIDE_HOST_MEMCG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mtd_memcg_stat {
	uint64_t current_bytes; /* memory.current: everything charged, guest RAM and QEMU's own */
	uint64_t swap_bytes;    /* memory.swap.current (0 without the file) */
	uint64_t anon_bytes;    /* memory.stat anon */
	uint64_t file_bytes;    /* memory.stat file */
	uint64_t refault_anon;  /* workingset_refault_anon, pages, cumulative */
	uint64_t refault_file;  /* workingset_refault_file */
	uint64_t pgmajfault;    /* major faults of the cgroup's tasks, cumulative */
	uint64_t psi_some_us;   /* memory.pressure "some" total, microseconds, cumulative */
	uint64_t psi_full_us;   /* "full" total */
	double psi_some_avg10;  /* percent */
	uint64_t high_bytes;    /* memory.high (UINT64_MAX: "max") */
	uint64_t max_bytes;     /* memory.max (UINT64_MAX: "max") */
	bool has_swap, has_psi, has_limits;
};

/* memory.stat text: the fields above (missing ones stay 0).  0 or -EPROTO (no "anon"). */
int mtd_memcg_parse_stat(const char *text, struct mtd_memcg_stat *out);
/* memory.pressure text: the "some" and "full" totals and some avg10.  0 or -EPROTO. */
int mtd_memcg_parse_pressure(const char *text, struct mtd_memcg_stat *out);
/* A limit file's text: a number, or "max" (UINT64_MAX).  0 or -EPROTO. */
int mtd_memcg_parse_limit(const char *text, uint64_t *bytes);

/* Read the cgroup at dir (e.g. /sys/fs/cgroup/machine.slice/machine-qemu\x2d1\x2dvm.scope).
 * 0, -ENOENT (the cgroup is gone), or -errno.  A missing memory.swap.current or
 * memory.pressure leaves has_swap / has_psi false; memory.current and memory.stat are
 * required. */
int mtd_memcg_read(const char *dir, struct mtd_memcg_stat *out);

/* Ask the kernel to reclaim bytes from the cgroup (memory.reclaim).  0 when it did, -EAGAIN
 * when it could not reclaim all of it (the kernel's answer after its retries), -EINTR,
 * -ENOENT (no memory.reclaim: the kernel is older than 5.19), -errno. */
int mtd_memcg_reclaim(const char *dir, uint64_t bytes);

#endif /* MEMTIDE_HOST_MEMCG_H */
