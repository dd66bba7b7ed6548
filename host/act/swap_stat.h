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
 * Room is not only free swap slots.  A zram device with a memory limit (mem_limit: the
 * operator's ZRAM_MEM_LIMIT in contrib/memtide-zram-swap) refuses a write once its pool
 * reaches the limit, while it still has free slots: the kernel then keeps the page in RAM,
 * in the swap cache behind the swap entry it already put in the page table, and pagemap
 * calls the page swapped (measured on this host's 6.18: 64 MiB of random data into a zram
 * with an 8 MiB limit, 14339 failed writes, every page "swapped", VmSwap 64 MiB, SwapCached
 * 57 MiB).  The kernel takes slots from the highest priority with free slots first, so a
 * full pool on top stops every write behind it.  mtd_swap_room counts, in priority order,
 * what can be written before a write fails, at 4 KiB of pool per page (a page that does not
 * compress is stored whole), and stops at the first device whose pool would refuse first.
 *
 * Sources: /proc/meminfo (SwapTotal, SwapFree, Zswap, Zswapped), /proc/swaps (each device's
 * size, slots in use and priority; which are zram), /sys/block/zramN/mm_stat (orig_data_size,
 * mem_used_total, mem_limit).  Reading costs a few small files;
 * memtided reads them once per VM per control interval, and once per [host] interval.
 *
 * Pure apart from mtd_swap_read; no state.
 */
#ifndef MEMTIDE_HOST_SWAP_STAT_H
#define MEMTIDE_HOST_SWAP_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_SWAP_MAX_DEVICES 32

/* One line of /proc/swaps, with its zram device's figures when it is one. */
struct mtd_swap_device {
	char name[64]; /* Filename */
	uint64_t size_bytes, used_bytes;
	int priority;
	bool zram;             /* /dev/zramN */
	unsigned zram_nr;      /* N */
	bool zram_known;       /* mm_stat was read */
	uint64_t stored_bytes; /* orig_data_size: data in it, uncompressed */
	uint64_t pool_bytes;   /* mem_used_total: RAM it uses */
	uint64_t limit_bytes;  /* mem_limit (0: none) */
};

struct mtd_swap_stat {
	uint64_t total_bytes;        /* SwapTotal */
	uint64_t free_bytes;         /* SwapFree */
	uint64_t zram_stored_bytes;  /* data in zram swap devices, uncompressed */
	uint64_t zram_pool_bytes;    /* RAM those devices use (mem_used_total) */
	uint64_t zswap_pool_bytes;   /* Zswap: RAM of zswap's pool */
	uint64_t zswap_stored_bytes; /* Zswapped: data in it, uncompressed */
	unsigned nr_devices;         /* active swap devices and files */
	unsigned nr_zram;            /* of which zram with figures read */
	struct mtd_swap_device dev[MTD_SWAP_MAX_DEVICES]; /* the first nr_listed of them */
	unsigned nr_listed;
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

/*
 * What can go to swap now before a write fails (see the top of this file), bytes; *binding
 * (may be NULL) gets the index in s->dev of the zram device whose memory limit stops it, or
 * -1 (free slots are the limit).  Without /proc/swaps' lines, SwapFree.
 */
uint64_t mtd_swap_room(const struct mtd_swap_stat *s, int *binding);

/* A share of the room for one writer, with the room others were granted and have not yet
 * written counted as gone (daemon/host.c keeps one for all VMs). */
struct mtd_swap_grant {
	uint64_t bytes;        /* granted: at most want */
	uint64_t room_bytes;   /* mtd_swap_room past the reserve, before others' grants */
	uint64_t others_bytes; /* granted to others, not yet written */
	int binding;           /* mtd_swap_room's */
	struct mtd_swap_stat sw;
};
/* Fill g from g->sw (read by the caller): room past reserve_bytes, less outstanding_bytes,
 * at most want_bytes.  Pure. */
void mtd_swap_grant_from(struct mtd_swap_grant *g, uint64_t reserve_bytes,
			 uint64_t outstanding_bytes, uint64_t want_bytes);

/* After a batch that ran out of its grant (g filled again from the figures read after it,
 * want 0): is the swap full until it frees up?  Free slots: yes (a batch takes what the
 * slots have).  A zram pool's limit: only when less than a huge page (2 MiB) fits past the
 * reserve, since its pool grew by the compressed size only, less than the grant counted. */
bool mtd_swap_full_after(const struct mtd_swap_grant *g);

/* Parse /proc/meminfo text (the swap and zswap lines).  0 or -EPROTO (no SwapTotal). */
int mtd_swap_parse_meminfo(const char *text, struct mtd_swap_stat *out);
/* Parse /proc/swaps text into out (at most max lines; more are counted, not stored).
 * Returns the number of devices, or -EPROTO. */
int mtd_swap_parse_swaps(const char *text, struct mtd_swap_device *out, size_t max);
/* Parse one zram mm_stat line into d: orig_data_size, mem_used_total, mem_limit.  0 or
 * -EPROTO. */
int mtd_swap_parse_mm_stat(const char *text, struct mtd_swap_device *d);

/* Why a grant (filled by mtd_swap_grant_from) leaves host-side eviction no room, in the
 * operator's sentence: the host has no swap; a zram pool at its memory limit (mem_limit, past
 * which the kernel keeps pages in RAM behind swap entries); or the swap full past the reserve,
 * with the room other VMs' hands hold in grants when they hold some. */
void mtd_swap_grant_why(const struct mtd_swap_grant *g, uint64_t reserve_bytes, char *why,
			size_t len);

/* Read it all.  proc_root / sys_root: "/proc" and "/sys" unless a test says otherwise.
 * 0 or -errno (meminfo unreadable); a zram device that cannot be read counts as empty and
 * unlimited. */
int mtd_swap_read(const char *proc_root, const char *sys_root, struct mtd_swap_stat *out);

#endif /* MEMTIDE_HOST_SWAP_STAT_H */
