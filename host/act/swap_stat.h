/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_stat.h - the host's swap as host-side eviction sees it: room left, and what the
 * compressed pools (zram devices, zswap) cost in RAM.
 *
 * Memory that host-side eviction returns is the guest RAM mapping's resident drop minus what
 * the pages now take in a compressed pool: zram keeps them in RAM (compressed), zswap too
 * until it writes them back to its swap file.  Disk swap costs no RAM.  So the pool's share
 * of swapped memory is pool bytes / swap used bytes, whatever the mix of devices.
 *
 * Sources: /proc/meminfo (SwapTotal, SwapFree, Zswap, Zswapped), /proc/swaps (which devices
 * are zram), /sys/block/zramN/mm_stat (orig_data_size, mem_used_total).  Reading costs a few
 * small files; memtided reads them once per VM per control interval.
 *
 * Pure apart from mtd_swap_read; no state.
 */
#ifndef MEMTIDE_HOST_SWAP_STAT_H
#define MEMTIDE_HOST_SWAP_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mtd_swap_stat {
	uint64_t total_bytes;        /* SwapTotal */
	uint64_t free_bytes;         /* SwapFree */
	uint64_t zram_stored_bytes;  /* data in zram swap devices, uncompressed */
	uint64_t zram_pool_bytes;    /* RAM those devices use (mem_used_total) */
	uint64_t zswap_pool_bytes;   /* Zswap: RAM of zswap's pool */
	uint64_t zswap_stored_bytes; /* Zswapped: data in it, uncompressed */
	unsigned nr_devices;         /* active swap devices and files */
	unsigned nr_zram;            /* of which zram */
};

/* Bytes of swap in use. */
static inline uint64_t mtd_swap_used(const struct mtd_swap_stat *s)
{
	return s->total_bytes > s->free_bytes ? s->total_bytes - s->free_bytes : 0;
}

/* RAM the compressed pools hold. */
static inline uint64_t mtd_swap_pool(const struct mtd_swap_stat *s)
{
	return s->zram_pool_bytes + s->zswap_pool_bytes;
}

/* The pool's cost of swapped_bytes of one VM: its share of the pools, in proportion to swap
 * used (0 with no swap in use). */
uint64_t mtd_swap_pool_share(const struct mtd_swap_stat *s, uint64_t swapped_bytes);

/* Parse /proc/meminfo text (the swap and zswap lines).  0 or -EPROTO (no SwapTotal). */
int mtd_swap_parse_meminfo(const char *text, struct mtd_swap_stat *out);
/* Parse /proc/swaps text: count devices; zram device numbers into zram[] (at most max).
 * Returns the number of zram devices, or -EPROTO. */
int mtd_swap_parse_swaps(const char *text, unsigned *zram, size_t max, unsigned *nr_devices);
/* Parse one zram mm_stat line: orig_data_size and mem_used_total.  0 or -EPROTO. */
int mtd_swap_parse_mm_stat(const char *text, uint64_t *stored_bytes, uint64_t *pool_bytes);

/* Read it all.  proc_root / sys_root: "/proc" and "/sys" unless a test says otherwise.
 * 0 or -errno (meminfo unreadable); a zram device that cannot be read counts as empty. */
int mtd_swap_read(const char *proc_root, const char *sys_root, struct mtd_swap_stat *out);

#endif /* MEMTIDE_HOST_SWAP_STAT_H */
