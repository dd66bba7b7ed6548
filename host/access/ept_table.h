/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_table.h - the emulated EPT file shared by memtide's QEMU TCG plugin and memtided.
 *
 * A TCG guest has no second-stage page tables of its own, so the plugin
 * (host/access/qemu_plugin/memtide_ept.c) keeps one for it: a real x86 EPT, four levels of
 * 512 eight-byte entries in the Intel SDM's format, covering guest-physical [0, span).
 * On every guest RAM access while it instruments, the plugin sets the leaf's accessed bit
 * (and the dirty bit on a store) with an atomic OR, only when the bit is clear, as the
 * hardware does; memtided maps the same file and ages it with libvmm's walker and bloom
 * filter exactly as it would hardware tables (host/access/source_ept.c).
 *
 * File layout ("physical addresses" in the entries are file offsets):
 *
 *   0                       header (this struct, one 4 KiB page)
 *   root_off   = 4 KiB      PML4: one table
 *   pdpt_off   = 8 KiB      PDPTs: one per 512 GiB of span
 *   pd_off                  PDs: one per GiB of span
 *   pt_off                  leaf tables (PTs): one per 2 MiB of span; PT i maps
 *                           GPA [i * 2 MiB, (i + 1) * 2 MiB), so the leaf of GPA g is
 *                           entry g >> 12 counted from pt_off (the plugin's fast path)
 *
 * The file is sparse: a table the guest never reached is a hole (reads as zeros: not
 * present).  Like KVM, which fills its EPT on first use (EPT violations), the plugin makes
 * a leaf present on the first access to its page and the upper entries on the way down;
 * since every table sits at a fixed offset, "making an entry present" is an OR of a
 * constant, idempotent and race-free between vCPU threads.  A leaf memtided clears (host-
 * side eviction zaps it) becomes present again on the next access: a refault.
 *
 * Control, in the header (all fields accessed with __atomic builtins; both sides are on
 * the same host): the controller (memtided, or memtide-trace) claims the file with
 * controller_pid, writes the guest RAM layout the plugin cannot learn itself, and asks for
 * sampling windows (req_seq + window_ms) or for instrumentation all the time (mode).  The
 * plugin switches instrumentation on and off from a vCPU thread with qemu_plugin_reset
 * and reports in the status fields.  Sizes and offsets never change after the plugin
 * wrote the header; memtided validates them against the file's size before using them.
 */
#ifndef MEMTIDE_HOST_EPT_TABLE_H
#define MEMTIDE_HOST_EPT_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#define MTD_EPT_MAGIC        "MTDEPT01" /* 8 bytes, no NUL */
#define MTD_EPT_VERSION      1
#define MTD_EPT_PAGE         4096ULL
#define MTD_EPT_SPAN_DEFAULT (1ULL << 40) /* 1 TiB of GPA: 2 GiB of sparse leaf tables */
#define MTD_EPT_SPAN_MAX     (1ULL << 42) /* 4 TiB */

/* EPT entry bits (Intel SDM vol. 3C, "EPT Translation Mechanism"; the same as libvmm's
 * vmm/pt_format.h, which tests/unit/test_ept_file.c checks by decoding plugin entries with
 * vmm_pt_format_get(VMM_PT_EPT)). */
#define MTD_EPT_R       (1ULL << 0)
#define MTD_EPT_W       (1ULL << 1)
#define MTD_EPT_X       (1ULL << 2)
#define MTD_EPT_MT_WB   (6ULL << 3)
#define MTD_EPT_A       (1ULL << 8)
#define MTD_EPT_D       (1ULL << 9)
#define MTD_EPT_TABLE   (MTD_EPT_R | MTD_EPT_W | MTD_EPT_X)                 /* non-leaf */
#define MTD_EPT_LEAF    (MTD_EPT_R | MTD_EPT_W | MTD_EPT_X | MTD_EPT_MT_WB) /* 4 KiB leaf */
#define MTD_EPT_PA_MASK 0x000FFFFFFFFFF000ULL

/* mode: what the controller asks for */
enum mtd_ept_mode {
	MTD_EPT_MODE_OFF = 0,     /* never instrument */
	MTD_EPT_MODE_WINDOWS = 1, /* one window of window_ms per req_seq increment */
	MTD_EPT_MODE_ALWAYS = 2,  /* instrument all the time (measurement, tracing) */
};

/* flags, set by the plugin */
#define MTD_EPT_F_NONLEAF_A 0x1 /* non-leaf A bits are set on every leaf update: exact */

struct mtd_ept_header {
	/* ---- written once by the plugin before anyone else may read ---- */
	char magic[8];         /* MTD_EPT_MAGIC */
	uint32_t version;      /* MTD_EPT_VERSION */
	uint32_t header_bytes; /* MTD_EPT_PAGE */
	uint64_t span_bytes;   /* GPA covered, a multiple of 1 GiB */
	uint64_t file_bytes;   /* the file's size */
	uint64_t root_off, pdpt_off, pd_off, pt_off;
	int32_t qemu_pid;    /* the QEMU process the plugin runs in */
	uint32_t flags;      /* MTD_EPT_F_* */
	uint64_t created_ms; /* CLOCK_MONOTONIC */
	/* ---- the guest RAM layout: from the plugin's args, or written by the controller
	 * before its first window (the plugin reads it at each window start) ---- */
	uint64_t ram_bytes;    /* guest RAM (QEMU's RAM block); 0: unknown */
	uint64_t lowmem_bytes; /* RAM below the PCI hole; the rest sits at 4 GiB.  0: all */
	/* ---- control: written by the controller ---- */
	int32_t controller_pid; /* who drives the windows (0: nobody) */
	uint32_t mode;          /* enum mtd_ept_mode */
	uint64_t req_seq;       /* bumped for each window asked for */
	uint64_t window_ms;     /* length of each window */
	/* ---- status: written by the plugin ---- */
	uint64_t on;           /* 1 while instrumenting */
	uint64_t started_seq;  /* the req_seq of the window running or last run */
	uint64_t done_seq;     /* the req_seq of the last window that ended */
	uint64_t windows;      /* windows run */
	uint64_t on_ms_total;  /* milliseconds spent instrumenting */
	uint64_t resets;       /* qemu_plugin_reset calls */
	uint64_t heartbeat_ms; /* CLOCK_MONOTONIC of the plugin's last poll */
	uint64_t marks;        /* leaf updates (a bit newly set) */
	uint64_t dropped;      /* RAM accesses outside the layout or span */
	/* ---- control again, appended so that every field above keeps its offset (an older
	 * plugin never reads it; an older controller leaves it 0) ---- */
	uint64_t window_not_before_ms; /* the window asked for starts no sooner (CLOCK_MONOTONIC;
					* 0: at once): memtided places each at a random moment
					* of its interval (source_ept.c says why) */
};

/* Offsets of the tables for a span (a multiple of 1 GiB, at most MTD_EPT_SPAN_MAX). */
static inline void mtd_ept_layout(uint64_t span, uint64_t *root, uint64_t *pdpt, uint64_t *pd,
				  uint64_t *pt, uint64_t *file_bytes)
{
	uint64_t n_pdpt = (span + (1ULL << 39) - 1) >> 39, n_pd = span >> 30, n_pt = span >> 21;

	*root = MTD_EPT_PAGE;
	*pdpt = *root + MTD_EPT_PAGE;
	*pd = *pdpt + n_pdpt * MTD_EPT_PAGE;
	*pt = *pd + n_pd * MTD_EPT_PAGE;
	*file_bytes = *pt + n_pt * MTD_EPT_PAGE;
}

/*
 * The MMU's part, as the plugin does it on a guest access: set A (and D on a store) in the
 * leaf of gpa, then the upper entries on the way up.  leaf_want is the leaf's whole value
 * (the page mapped to itself, MTD_EPT_LEAF, A, D); up[i] the upper entries (PD, PDPT, PML4)
 * with the value each must hold (table offset | MTD_EPT_TABLE | MTD_EPT_A).  Returns true
 * when a bit was newly set.
 *
 * The order matters to a walker that skips subtrees whose upper A is clear (docs/walker.md,
 * "Non-leaf accessed bits"): it clears an upper A, then reads the subtree.  The leaf first:
 * an upper A set after the leaf is either seen by that walk together with the leaf, or set
 * after the clear and kept for the next one.  But an upper A already set is not written
 * again, only read, and "store the leaf, then load the upper entry" against the walker's
 * "store the upper entry, then load the leaf" is the store-buffering pattern: without a
 * full fence on both sides, each may read the other's old value (the walker misses the new
 * leaf A, this side sees the upper A the walker is clearing and skips it), leaving a young
 * leaf under a clear upper A, unseen until its neighbours are next touched.  x86's locked
 * RMW is a full fence already; on a weakly ordered host (arm64) it is not, hence the
 * explicit one here and in libvmm's walker (vmm/walk.c, nonleaf_enter).  Both are on rare
 * paths: here only when a bit is newly set, there once per subtree entered.
 */
static inline bool mtd_ept_mark_leaf(uint64_t *leaf, uint64_t leaf_want, uint64_t *const up[3],
				     const uint64_t up_want[3])
{
	if ((__atomic_load_n(leaf, __ATOMIC_RELAXED) & leaf_want) == leaf_want)
		return false; /* the common case: the page was already seen this round */
	__atomic_fetch_or(leaf, leaf_want, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int i = 0; i < 3; i++)
		if ((__atomic_load_n(up[i], __ATOMIC_RELAXED) & up_want[i]) != up_want[i])
			__atomic_fetch_or(up[i], up_want[i], __ATOMIC_RELEASE);
	return true;
}

/*
 * The guest-physical address of QEMU's RAM offset `pa` (what qemu_plugin_hwaddr_phys_addr
 * returns: the true GPA for RAM below 4 GiB on the pc machines, the offset into the RAM
 * block above that; shared/README.md), or UINT64_MAX when it is not guest RAM (ROM and
 * video RAM come after the RAM block).  ram 0: nothing known, pa is taken as it is.
 */
static inline uint64_t mtd_ept_gpa(uint64_t pa, uint64_t ram, uint64_t lowmem)
{
	if (!ram)
		return pa;
	if (pa >= ram)
		return UINT64_MAX;
	if (lowmem && lowmem < ram && pa >= lowmem)
		return pa - lowmem + (1ULL << 32);
	return pa;
}

#endif /* MEMTIDE_HOST_EPT_TABLE_H */
