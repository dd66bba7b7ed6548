/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vmm.h - libvmm, memtide's memory-management core.
 *
 * libvmm decides which guest-physical pages of a VM are hot and which are cold, the way
 * Linux's multi-generational LRU does for a host's own memory, and how fast cold memory may
 * be taken back.  It does no I/O, starts no threads, reads no clock and keeps no global
 * state: the caller passes time in (now_ms arguments, CLOCK_MONOTONIC on the host side) and
 * owns every object, so one daemon can run many guests and tests can run many instances.
 *
 * The parts, in the order a page meets them (docs/design.md tells the whole story):
 *
 *   0. Sampled sources                 how long a source that sees a window of each round
 *                                      should look, from how many pages it sees again.
 *   1. Page-table formats and walker   x86 EPT and arm64 stage-2 behind one ops table; the
 *                                      walker test-and-clears accessed bits over a GPA range.
 *   2. Simulated hardware              real EPT / stage-2 tables in memory, driven by access
 *                                      streams the way an MMU drives them (tests, benchmarks,
 *                                      memtide-sim, and memtided's simulated source).
 *   3. Bloom filter                    remembers which leaf tables were dense with young
 *                                      entries, so the next walk can skip the rest.
 *   4. Generations                     every 4 KiB page sits in one of 2..16 generations,
 *                                      which widen with age (16 tell apart one round from
 *                                      an hour); the aging hand makes young pages youngest,
 *                                      the eviction hand takes the oldest first, in GPA runs.
 *   5. Refaults                        an evicted page touched again: its distance and tier.
 *   6. PID control                     a general PID, MGLRU's tier protection, and the reclaim
 *                                      controller that sets the cold age threshold so the
 *                                      refault rate tracks a target.
 *   7. Working-set estimate            bytes touched within each of a list of idle ages.
 *   8. Reuse histogram                 pages used again, by how long they had been idle: the
 *                                      refaults each threshold would cause, known before
 *                                      anything is evicted (6's controller reads it).
 *
 * Conventions: functions that can fail return 0 or a negative errno (-EINVAL for bad
 * arguments, -ENOMEM, -ERANGE for an address outside the guest); nothing aborts on bad
 * input.  Addresses are guest-physical (GPA) in bytes; sizes carry their unit in the name
 * (_pages are 4 KiB pages, _bytes, _ms).  No function is thread-safe on the same object
 * unless its comment says so; the one deliberate exception is the accessed/dirty bits in
 * page tables, which hardware (or vmm_simhw_access from another thread) may set at any time.
 */
#ifndef MEMTIDE_VMM_H
#define MEMTIDE_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VMM_PAGE_SHIFT 12
#define VMM_PAGE_SIZE  (1ULL << VMM_PAGE_SHIFT)
#define VMM_SIZE_2M    (1ULL << 21)
#define VMM_SIZE_1G    (1ULL << 30)

/* A range of guest-physical memory, [start, end), both 4 KiB aligned. */
struct vmm_range {
	uint64_t start;
	uint64_t end;
};

/* ======================================================================================
 * Part 1: page-table formats and walker
 * ====================================================================================== */

enum vmm_pt_format_id {
	VMM_PT_EPT = 1, /* Intel EPT, 4 levels, 4 KiB / 2 MiB / 1 GiB leaves */
	VMM_PT_S2 = 2,  /* arm64 stage-2, 4 KiB granule, levels 0-3, 2 MiB / 1 GiB blocks */
};

/*
 * One page-table format.  Levels are numbered from the root: level 0 is the PML4 (EPT) or
 * stage-2 level 0, level 3 is the last level (EPT PT, stage-2 level 3), whose entries map
 * 4 KiB.  An entry at level 1 maps 1 GiB when it is a leaf, at level 2 it maps 2 MiB.
 * Every table holds 512 eight-byte entries.
 */
struct vmm_pt_format {
	const char *name;
	enum vmm_pt_format_id id;
	/* Is this entry present (EPT: any of R/W/X; stage-2: valid bit)? */
	bool (*present)(uint64_t e, int level);
	/* Present and a leaf: a page at level 3, a block/large page at level 1 or 2. */
	bool (*is_leaf)(uint64_t e, int level);
	/* Physical address held in the entry (next table, or the leaf's output address). */
	uint64_t (*addr)(uint64_t e);
	/* The accessed bit (EPT bit 8, stage-2 AF bit 10): the walker test-and-clears it. */
	uint64_t accessed_mask;
	/* Is the leaf dirty?  EPT: bit 9.  Stage-2: DBM (bit 51) set and S2AP write (bit 7) set. */
	bool (*dirty)(uint64_t e);
	/* The bits to clear to make a dirty leaf clean again (EPT: bit 9; stage-2: S2AP[1]). */
	uint64_t dirty_clear_mask;
	/* Encoders, for simulated hardware and tests. */
	uint64_t (*make_table)(uint64_t table_pa);
	uint64_t (*make_leaf)(uint64_t pa, int level, bool writable);
	/* The bits an MMU sets in a leaf on a read (write=false) or a write (write=true). */
	uint64_t (*hw_access_bits)(uint64_t e, bool write);
};

const struct vmm_pt_format *vmm_pt_format_get(enum vmm_pt_format_id id);

/*
 * A page-table tree to walk.  Tables are named by their physical address; `table` maps one
 * to the 512 entries the walker reads and clears in place (NULL: not mappable, the walk
 * reports -EFAULT for it and goes on).  The entries may be changed by hardware at any time.
 */
struct vmm_pt {
	const struct vmm_pt_format *fmt;
	uint64_t root_pa;
	uint64_t *(*table)(void *mem_ctx, uint64_t table_pa);
	void *mem_ctx;
	/* Levels from the root to the 4 KiB leaves: 0 or 4 (the default), 5 for 5-level EPT
	 * (a PML5 above the PML4), 3 or 2 for a stage-2 walk that starts at level 1 or 2 (KVM's
	 * default 40-bit IPA starts at level 1).  Levels keep their names from the leaf up:
	 * level 3 maps 4 KiB, 2 MiB, 1 1 GiB, 0 512 GiB, -1 256 TiB. */
	int levels;
	/* Concatenated root tables (stage 2 only): 0 or 1, or up to 16 physically contiguous
	 * tables at root_pa read as one root of root_tables * 512 entries. */
	unsigned root_tables;
	unsigned flags; /* VMM_PT_* */
};
/* The tree's non-leaf accessed bits are exact: set in every upper entry whenever a leaf
 * below gets A, with no paging-structure cache that could skip that (memtide's emulated EPT
 * for TCG).  vmm_walk may then skip a subtree whose entry has A clear (opts
 * use_nonleaf_accessed).  Never set it for hardware tables: docs/walker.md says why. */
#define VMM_PT_NONLEAF_ACCESSED 0x1

/*
 * A tree from an x86 EPT pointer (VMCS field EPTP): root = bits 51:12, page-walk length - 1
 * in bits 5:3 (3: 4 levels, 4: 5 levels), accessed/dirty flags enabled by bit 6.  Fills pt
 * (fmt, root_pa, levels; table and mem_ctx as given).  Returns 0, -EINVAL (a walk length
 * other than 4 or 5, reserved bits 11:7 set), or -EOPNOTSUPP (bit 6 clear: the CPU sets no
 * accessed bits in these tables, there is nothing to age).
 */
int vmm_pt_from_eptp(struct vmm_pt *pt, uint64_t eptp,
		     uint64_t *(*table)(void *mem_ctx, uint64_t table_pa), void *mem_ctx);
/*
 * A tree from arm64 VTTBR_EL2 (root: BADDR, bits 47:1, VMID ignored) and VTCR_EL2 (T0SZ
 * 5:0, SL0 7:6, TG0 15:14, HA bit 21, DS bit 32).  Only the 4 KiB granule (TG0 = 0): the
 * walk starts at level 2, 1 or 0 (SL0 = 0, 1, 2) with up to 16 concatenated root tables
 * when the IPA is wider than one root table resolves (KVM's default 40-bit IPA: level 1,
 * two tables).  Returns 0, or -EINVAL for what it cannot walk: another granule, SL0 = 3 or
 * DS = 1 (level -1, FEAT_LPA2), an IPA wider than 16 concatenated tables reach, or a root not
 * aligned to its concatenated size.  HA clear is accepted: the access flag is then managed
 * by software (an access to a page whose AF the walker cleared takes an access-flag fault
 * that KVM handles by setting AF), so aging still works, at the price of a fault per page.
 */
int vmm_pt_from_vtcr(struct vmm_pt *pt, uint64_t vttbr, uint64_t vtcr,
		     uint64_t *(*table)(void *mem_ctx, uint64_t table_pa), void *mem_ctx);

/*
 * One leaf the walker reports: young (accessed since the last walk), dirty, or both; flags
 * says which.  A leaf that is dirty but not young is reported with VMM_YOUNG_DIRTY alone
 * (with clear_dirty off it is reported again on every walk until something cleans it).
 */
struct vmm_young {
	uint64_t gpa;    /* first byte the leaf maps */
	uint32_t npages; /* 4 KiB pages the leaf maps: 1, 512 or 262144 */
	uint8_t flags;   /* VMM_YOUNG_* */
};
#define VMM_YOUNG_ACCESSED 0x1 /* the accessed bit was set (and is now clear) */
#define VMM_YOUNG_DIRTY    0x2 /* the leaf was dirty */

/* Called with 1..VMM_WALK_BATCH reported leaves at a time, in ascending GPA order, on the
 * walking thread.  `batch` is valid only during the call. */
#define VMM_WALK_BATCH 64
typedef void (*vmm_young_fn)(void *arg, const struct vmm_young *batch, size_t n);

struct vmm_bloom;

struct vmm_walk_opts {
	uint64_t gpa_start, gpa_end; /* [start, end) to visit */
	/* Optional: skip leaf tables the filter does not hold for `seq` (when
	 * vmm_bloom_filtering says so), and admit leaf tables found dense with young entries
	 * into the filter for seq + 1.  NULL walks everything.  A walk for seq may be split into
	 * several budget-limited calls with the same seq; the filter for seq + 1 is emptied by
	 * the first add for it, so no explicit vmm_bloom_reset is needed. */
	struct vmm_bloom *bloom;
	uint64_t seq;
	/* Also clean the dirty leaves reported (write tracking), in the same atomic as the
	 * accessed bit.  Stage-2 leaves without DBM are never touched: their S2AP[1] is a
	 * permission, not dirty state. */
	bool clear_dirty;
	vmm_young_fn fn; /* receives young leaves; may be NULL (counting only) */
	void *arg;
	/* Stop after reading this many entries (all levels); 0 = no limit.  The walk stops at
	 * an entry boundary and stats->next_gpa says where to resume (resuming re-reads at most
	 * 3 upper-level entries).  A huge leaf is never split between two calls. */
	uint64_t budget_entries;
	/* Skip subtrees whose upper entry has A clear, and clear the A of upper entries whose
	 * subtree the walk reads whole; only when pt->flags has VMM_PT_NONLEAF_ACCESSED and the
	 * format is EPT (stage 2 has no access flag in table descriptors). */
	bool use_nonleaf_accessed;
};

struct vmm_walk_stats {
	uint64_t entries_read;      /* page-table entries loaded, all levels */
	uint64_t tables_visited;    /* leaf tables (level 3) read */
	uint64_t tables_skipped;    /* leaf tables skipped by the bloom filter */
	uint64_t leaf_entries_read; /* entries loaded from leaf tables (level 3) */
	uint64_t leaves;            /* present leaves seen */
	uint64_t young_pages;       /* 4 KiB pages covered by young leaves */
	uint64_t dirty_pages;       /* 4 KiB pages covered by dirty leaves */
	uint64_t next_gpa;          /* where a budget-limited walk stopped (gpa_end when done) */
	int errors;                 /* tables that could not be mapped */
	uint64_t subtrees_skipped_nonleaf; /* subtrees skipped because their upper A was clear */
};

/*
 * Walk [gpa_start, gpa_end) of a tree, test-and-clear the accessed bit of every present
 * leaf atomically (an accessed bit that hardware sets during the walk is either reported
 * now or left set for the next walk: the race with the MMU loses nothing; what a TLB that
 * still caches the translation may keep the MMU from setting again is in docs/walker.md),
 * and report young and dirty leaves in batches.  EPT entries without the read bit (W or X
 * alone: misconfigurations, which KVM uses for MMIO with a generation number in bits 3-10)
 * are never reported, never descended into and never written.  A huge leaf is one entry: reported once, with its own first GPA and size,
 * even when the range covers only part of it.
 * Cost: one load per entry visited, one atomic read-modify-write per young (or, with
 * clear_dirty, dirty) leaf; at most budget_entries loads.  stats (may be NULL) is filled
 * from zero on every call, not accumulated.
 * Thread context: any thread; the entries may be set concurrently by hardware or by
 * vmm_simhw_access, but the tree's structure must not change during the walk.
 * Returns 0, -EINVAL (NULL pt/opts/table callback, unaligned or reversed range, gpa_end
 * above what the tree's levels and root tables resolve, levels or root_tables the format
 * does not have), or -EFAULT when a table could not be mapped (the rest is still walked).
 */
int vmm_walk(const struct vmm_pt *pt, const struct vmm_walk_opts *opts,
	     struct vmm_walk_stats *stats);

/*
 * Look-around (MGLRU's lru_gen_look_around): having found the page at `gpa` young, test-
 * and-clear the accessed bits of a window of up to max + 1 entries of the same leaf table
 * (a table maps 2 MiB: 512 entries) that contains gpa, centred on it and clamped to the
 * table, and report the young ones (gpa's own entry included) through fn.  When gpa is
 * mapped by a huge leaf, that one leaf is tested.  Linux uses max = 63.  Dirty bits are
 * reported, not cleared.  Cost: 3 loads to find the table, then at most max + 1 loads.
 * Returns the number of young leaves reported (0 when gpa is not mapped), or -EINVAL,
 * -EFAULT (a table could not be mapped).
 */
int vmm_lookaround(const struct vmm_pt *pt, uint64_t gpa, unsigned max, vmm_young_fn fn, void *arg);
/* What a look-around read: its leaf table (table_pa; 0 when gpa is mapped by a huge leaf
 * or not at all) and how many of its entries it tested. */
struct vmm_lookaround_window {
	uint64_t table_pa;
	unsigned entries;
};
/* vmm_lookaround, and fill win (the eviction hand feeds the bloom filter from it). */
int vmm_lookaround_ex(const struct vmm_pt *pt, uint64_t gpa, unsigned max, vmm_young_fn fn,
		      void *arg, struct vmm_lookaround_window *win);

/* ======================================================================================
 * Part 2: simulated hardware
 * ====================================================================================== */

struct vmm_simhw_config {
	enum vmm_pt_format_id fmt;
	uint64_t guest_bytes; /* RAM to map, a multiple of 2 MiB */
	unsigned nr_holes;    /* unmapped gaps spread over the address space (MMIO-like) */
	uint64_t hole_bytes;  /* size of each gap, a multiple of 2 MiB */
	double huge_2m_share; /* share of 2 MiB regions mapped by one 2 MiB leaf, 0..1 */
	double huge_1g_share; /* share of 1 GiB regions mapped by one 1 GiB leaf, 0..1 */
	uint64_t seed;        /* for the placement of holes and huge leaves */
	/* EPT only: accesses set A in the upper entries too, exactly (no paging-structure
	 * cache keeps them from being set again), and the tree says so with
	 * VMM_PT_NONLEAF_ACCESSED: the emulated EPT's behaviour (host/access/ept_table.h). */
	bool nonleaf_accessed;
};

struct vmm_simhw;

/*
 * Build the tables: every page of RAM mapped (4 KiB, 2 MiB or 1 GiB leaves as the shares
 * and seed decide), writable, accessed and dirty bits clear.  Memory: about 4 KiB of tables
 * per 2 MiB of 4 KiB-mapped RAM (128 MiB for 64 GiB).  Returns 0, -EINVAL (format unknown,
 * sizes not 2 MiB multiples, more holes than 2 MiB pieces, share outside 0..1, more than
 * 16 TiB of address space, nonleaf_accessed on stage 2) or -ENOMEM.  The object owns all its memory; no global state.
 */
int vmm_simhw_new(const struct vmm_simhw_config *cfg, struct vmm_simhw **out);
void vmm_simhw_free(struct vmm_simhw *hw);
/* The tree to hand to vmm_walk. Valid until vmm_simhw_free. */
const struct vmm_pt *vmm_simhw_pt(const struct vmm_simhw *hw);
/* The guest RAM layout (mapped ranges, holes excluded). Returns the number of ranges. */
size_t vmm_simhw_ram(const struct vmm_simhw *hw, const struct vmm_range **ranges);
/*
 * One access as an MMU makes it: sets A (and D on a write) atomically in the leaf.  Safe to
 * call from another thread while vmm_walk runs on the same tables.  Returns 0, 1 when the
 * page was not present (a fault: the page is mapped again, as the host would on a refault),
 * or -ERANGE for an address outside guest RAM.
 */
int vmm_simhw_access(struct vmm_simhw *hw, uint64_t gpa, bool write);
/* Unmap pages the host took back (eviction); a huge leaf is split first (its children
 * keep its accessed and dirty state) and tables are never freed, so a later refault only
 * stores one entry.  Pages already unmapped are skipped.  Cost: O(npages).  Not thread-safe
 * against vmm_simhw_access or vmm_walk on the same tables (the host holds its MMU lock).
 * Returns 0, -EINVAL (unaligned gpa, npages 0), -ERANGE (the run leaves its RAM range),
 * -ENOMEM (a split could not allocate; pages before it are unmapped). */
int vmm_simhw_unmap(struct vmm_simhw *hw, uint64_t gpa, uint64_t npages);
/* Bytes of page tables the simulation allocated. */
uint64_t vmm_simhw_table_bytes(const struct vmm_simhw *hw);

/* What the simulated tables map right now. */
struct vmm_simhw_counts {
	uint64_t leaves_4k, leaves_2m, leaves_1g; /* present leaves of each size */
	uint64_t mapped_pages;                    /* 4 KiB pages they cover */
	uint64_t tables;                          /* page-table pages in use, all levels */
};
/* Counts kept as the tables change; exact when no vmm_simhw_access runs concurrently. */
void vmm_simhw_get_counts(const struct vmm_simhw *hw, struct vmm_simhw_counts *out);

/* ======================================================================================
 * Part 3: bloom filter over leaf page-table pages
 * ====================================================================================== */

struct vmm_bloom_config {
	unsigned bits_shift;      /* filter size 2^bits_shift bits, 8..28 (Linux: 15) */
	unsigned nr_hashes;       /* hash keys per item, 1..8 (Linux: 2) */
	unsigned admit_young_x;   /* admit a table when young * admit_young_x >= entries (8) */
	unsigned full_walk_every; /* >= 1: every K-th seq walks everything (1: always) */
};

/* Linux's choices, and K = 8 (see vmm/bloom.c for the measurement behind it). */
void vmm_bloom_config_default(struct vmm_bloom_config *cfg);
/* Returns 0, -EINVAL (a field out of range), -ENOMEM.  Memory: 2^(bits_shift - 2) bytes
 * (two filters), 8 KiB with the defaults.  Not thread-safe: one walker at a time. */
int vmm_bloom_new(const struct vmm_bloom_config *cfg, struct vmm_bloom **out);
void vmm_bloom_free(struct vmm_bloom *b);
/* Should the walk for `seq` skip leaf tables not in the filter?  False when the filter for
 * seq is empty or a full walk is due (seq % full_walk_every == 0). */
bool vmm_bloom_filtering(const struct vmm_bloom *b, uint64_t seq);
/* Is the leaf table at table_pa (maybe) in the filter for seq? */
bool vmm_bloom_test(const struct vmm_bloom *b, uint64_t seq, uint64_t table_pa);
/* Put table_pa into the filter for seq (used for seq + 1 during the walk for seq). */
void vmm_bloom_add(struct vmm_bloom *b, uint64_t seq, uint64_t table_pa);
/* Clear the filter that seq will fill (called at the start of the walk for seq - 1).
 * Optional: vmm_bloom_add empties a filter that still holds an older seq by itself. */
void vmm_bloom_reset(struct vmm_bloom *b, uint64_t seq);
/* Is a leaf table with `young` young entries out of `entries` read dense enough to admit
 * (young * admit_young_x >= entries, and young > 0)? */
bool vmm_bloom_admit(const struct vmm_bloom *b, uint64_t young, uint64_t entries);

/* ======================================================================================
 * Parts 4, 5 and 7: generations, refaults and the working-set estimate (one guest)
 * ====================================================================================== */

#define VMM_MIN_NR_GENS     2
#define VMM_DEFAULT_NR_GENS 4
#define VMM_MAX_NR_GENS     16
#define VMM_MAX_NR_TIERS    4

struct vmm_guest_config {
	const struct vmm_range *ram; /* guest RAM layout; pages outside it are holes */
	size_t nr_ram;
	unsigned nr_gens;        /* generations kept, VMM_MIN_NR_GENS..VMM_MAX_NR_GENS */
	unsigned nr_tiers;       /* 1..VMM_MAX_NR_TIERS */
	unsigned lookaround_max; /* neighbours harvested around a young page on eviction (63) */
	struct vmm_bloom_config bloom;
	/* Trees whose upper accessed bits are exact (VMM_PT_NONLEAF_ACCESSED: memtide's
	 * emulated EPT): vmm_age_walk skips subtrees whose upper A is clear and leaves the
	 * bloom filter out, which misses nothing (docs/walker.md has the measurement).  Off:
	 * the bloom filter, as on hardware tables.  Default on. */
	bool use_nonleaf_accessed;
	/* Rules where libvmm may depart from Linux's MGLRU (docs/design.md, "Rules that differ
	 * from Linux's MGLRU", has the measurements behind the defaults):
	 *   dirty_ages_up          a leaf found dirty but not young moves its page up one
	 *                          generation (Linux skips non-young entries whatever D says);
	 *   lookaround_feeds_bloom the eviction hand's look-around adds a leaf table it found
	 *                          dense with young entries to the bloom filter of the next
	 *                          aging walk (Linux's rule). */
	bool dirty_ages_up;
	bool lookaround_feeds_bloom;
	/* The pages not yet reported young are unused by the caller's own word, not merely
	 * unwatched: a source that reports amounts and lays them over the first pages of RAM
	 * (memtided's agent source: what its guest says it does not use).  Generation 0 then
	 * keeps a birth of 0 (as old as can be) instead of the first round's.  Default off. */
	bool unseen_is_unused;
	/* When all nr_gens generations are in use, a new round merges the pair that loses least
	 * (an empty one, else the narrowest in idle ages within a factor of 2.2), so older
	 * generations widen and 16 reach an hour (vmm/generations.c, "The layout").  Off: the
	 * oldest always folds into the next, and 16 reach 14 rounds.  Default on. */
	bool gens_widen;
	/* A page the aging hand finds used again after it had aged (a reuse, Part 8) climbs a
	 * tier, so tier 0 holds the pages never seen to come back (written once, or not yet
	 * reused), and the reuses of tier-0 pages are counted apart (reuse_first_hist): the
	 * reclaim controller can then take what never came back while it holds back what did
	 * (vmm/reclaim_ctl.c, "Weighing").  Linux raises tiers on file descriptor accesses
	 * only; memtided turns this on for page-level sources.  Default off. */
	bool reuse_raises_tier;
	/* A refault brings the page back one tier up (capped at nr_tiers - 1), as Linux marks
	 * a refaulting page as working set: the fault is proof of use the source may never
	 * give.  For a source blind to some accesses (memtided's ept plugin sees loads and
	 * stores, not instruction fetches nor the guest's page-table walks), a page used only
	 * that way is never seen young, so in tier 0 it would be the first pick again after
	 * each refault.  Up a tier, it is held as a page that came back (the weighing's
	 * reused_min_age_ms); pages that keep coming back climb on, and tier protection keeps
	 * the tiers whose refaults per eviction outrun tier 0's (tier_protect.c).  Default
	 * off. */
	bool refault_raises_tier;
};

/* nr_gens 4, nr_tiers 4, lookaround_max 63, the bloom filter's defaults,
 * use_nonleaf_accessed on, dirty_ages_up off, lookaround_feeds_bloom on, unseen_is_unused
 * off, gens_widen on, reuse_raises_tier off, refault_raises_tier off; no layout. */
void vmm_guest_config_default(struct vmm_guest_config *cfg);

struct vmm_guest;

/*
 * Every page of the layout starts resident in the oldest generation, tier 0, seq 0, born
 * at the first aging round (vmm_age_begin): nothing is known to be idle before libvmm
 * watched it (unless cfg.unseen_is_unused: born at 0).  The layout is copied.  Memory: one byte per RAM page plus 32 bytes per 2 MiB
 * plus the bloom filter, about 1.06 bytes per page (vmm_guest_stats.metadata_bytes);
 * holes cost nothing.  Returns 0, -EINVAL (no layout, ranges unaligned, empty, unsorted or
 * overlapping, nr_gens / nr_tiers / lookaround_max (0..511) / bloom out of range) or
 * -ENOMEM.  No function taking a vmm_guest is thread-safe on the same guest: one caller at
 * a time (memtided's per-VM thread).  All vmm_guest functions accept a NULL guest with
 * -EINVAL.  Page-range arguments (gpa, npages) must be 4 KiB aligned, npages > 0, and lie
 * wholly inside guest RAM: otherwise -EINVAL (alignment, npages 0, overflow) or -ERANGE
 * (a page outside RAM), and nothing changes.  Every function that changes a guest first
 * checks libvmm's own count invariant in O(nr_gens) and returns -EUCLEAN, changing
 * nothing, if it fails (a libvmm bug, never bad input: drop the guest and start again).
 */
int vmm_guest_new(const struct vmm_guest_config *cfg, struct vmm_guest **out);
void vmm_guest_free(struct vmm_guest *g);

/*
 * The aging hand, driven by page tables: start a new youngest generation stamped now_ms
 * (folding the two oldest together when all nr_gens are in use), walk pt over guest RAM
 * with the guest's bloom filter (or, on a tree with exact upper accessed bits and
 * use_nonleaf_accessed, skipping the subtrees they say are idle), and move every young page
 * into the youngest generation (with dirty_ages_up, a dirty page that is not young moves up
 * one generation); an evicted page found present and
 * young counts as a refault.  stats (optional) receives the walk's figures, summed over the
 * RAM ranges.  The walk cleans the dirty state it reports (clear_dirty): do not run it on a
 * VM whose dirty bits the host logs for migration at the same time.
 * Cost: vmm_age_begin's, plus vmm_walk over RAM, plus O(1) per young page.
 * Returns 0, -EINVAL (NULL, a bad tree, now_ms earlier than the last round), or -EFAULT
 * (some table could not be mapped; the rest was walked and applied).
 */
int vmm_age_walk(struct vmm_guest *g, const struct vmm_pt *pt, uint64_t now_ms,
		 struct vmm_walk_stats *stats);

/* The aging hand for sources without page tables (agent reports, traces): start a new
 * youngest generation; then report young pages with vmm_mark_young.  Also runs the sweep
 * that keeps the page encoding exact (vmm/guest_priv.h).  Cost: O(nr_chunks + ram_pages / 8),
 * measured 0.4 ms for 16 GiB, 0.9 ms for 64 GiB.  Returns 0 or -EINVAL (now_ms earlier than
 * the last round's: ages would go negative). */
int vmm_age_begin(struct vmm_guest *g, uint64_t now_ms);
/* Pages in [gpa, gpa + npages*4K) were accessed since the last aging round: move them to
 * the youngest generation (evicted ones count as refaults, with their distance and tier).
 * dirty adds nothing for a young page (it goes to the youngest generation either way).
 * O(npages).  Returns 0, -EINVAL, -ERANGE (see vmm_guest_new). */
int vmm_mark_young(struct vmm_guest *g, uint64_t gpa, uint64_t npages, bool dirty);

/* A hint (not a page-table bit) that pages were accessed: each resident page moves up one
 * generation (never past the youngest) and its tier rises by one (up to nr_tiers - 1);
 * evicted pages are left alone (their return is a refault).  O(npages). */
int vmm_hint_access(struct vmm_guest *g, uint64_t gpa, uint64_t npages);
/* A hint that pages are cold: each resident page moves to the oldest generation, tier 0.
 * O(npages). */
int vmm_hint_cold(struct vmm_guest *g, uint64_t gpa, uint64_t npages);
/* The guest holds nothing in these pages (it freed them, or never used them; memtided
 * learns it from QEMU's pagemap once free page reporting or a balloon has taken them): each
 * resident page moves to the oldest generation, tier 0, marked free.  When a marked page is
 * next seen used (vmm_mark_young, a walk, vmm_hint_access) the guest is filling fresh
 * memory: it moves to the youngest generation as any used page does, but counts as no reuse
 * (reuse.c).  Without this, a guest reallocating memory it freed minutes earlier reads as
 * reusing pages idle for minutes, and the reclaim controller's reuse floor climbs with its
 * allocations.  The mark goes when the page is used or evicted; evicted pages are left
 * alone.  Only bookkeeping: nothing is freed or evicted here.  O(npages). */
int vmm_hint_free(struct vmm_guest *g, uint64_t gpa, uint64_t npages);

/* A run of guest-physical pages the eviction hand chose. */
struct vmm_run {
	uint64_t gpa;
	uint64_t npages;
};

struct vmm_evict_req {
	uint64_t max_pages;  /* evict at most this many pages */
	uint64_t min_age_ms; /* only from generations whose youngest page is at least this old */
	uint64_t now_ms;
	struct vmm_run *runs; /* caller's array for the chosen runs, ascending within a gen */
	size_t max_runs;
	/* Optional: page tables to check for young pages before evicting (look-around). */
	const struct vmm_pt *pt;
	/* The pages that came back before (tier 1 and up, with the guest's reuse_raises_tier)
	 * go only from generations at least this old: 0, as min_age_ms; UINT64_MAX: they stay
	 * (vmm_decision.reused_age_ms). */
	uint64_t reused_min_age_ms;
	/* Optional, max_runs entries: the seq of the generation each run came from, for
	 * vmm_put_back.  With it a run never spans two generations, and a generation the hand
	 * empties stays (empty) until the next aging round, ready to take its pages back. */
	uint64_t *run_seq;
};

struct vmm_evict_result {
	uint64_t evicted_pages;
	size_t nr_runs;
	uint64_t protected_pages; /* kept back by tier protection (moved up one generation) */
	uint64_t young_pages;     /* found young by look-around and promoted instead */
};

/*
 * The eviction hand: take pages from the oldest generation first, oldest generation to
 * youngest allowed by min_age_ms (a generation is allowed when now_ms - its birth >=
 * min_age_ms), never the youngest, coalesced into GPA runs (whole 2 MiB-aligned runs are
 * taken first within a generation, as free page reporting and THP return 2 MiB blocks;
 * runs are ascending within a generation).  With pt, pages found young by look-around are
 * promoted instead (young_pages); pages of a protected tier move up one generation and
 * drop a tier instead (protected_pages).  Evicted pages leave the generations; min_seq
 * advances when the oldest empties.  Stops at max_pages, or when a new run would not fit
 * in max_runs.  The caller must give the evicted pages back (or call vmm_restore).
 * Cost: O(nr_chunks) per generation visited, O(512) per 2 MiB piece holding candidates,
 * plus one look-around per lookaround_max + 1 candidates; measured 3.6 ns per page evicted.
 * Returns 0 or -EINVAL (NULL g/req/res, runs NULL with max_runs > 0).
 */
int vmm_evict(struct vmm_guest *g, const struct vmm_evict_req *req, struct vmm_evict_result *res);

/* Pages are resident again without a refault to record, and count as just used: host
 * pageout could not page them out after all, or the guest filled them (memory handed back
 * unused is vmm_give_back's): the evicted ones enter the youngest generation, tier 0;
 * resident ones are left alone.  O(npages).  Returns 0, -EINVAL, -ERANGE. */
int vmm_restore(struct vmm_guest *g, uint64_t gpa, uint64_t npages);
/* Pages the eviction hand chose that did not leave after all (host pageout could not page
 * them out: khugepaged would rebuild their huge page, swap is full, the kernel kept them
 * because they are shared, merged by KSM, pinned or locked) go back where they were: the
 * evicted ones become resident in the generation whose seq the hand gave for their run
 * (vmm_evict_req.run_seq) - or, when that one has since merged into a younger one or
 * emptied, the oldest live generation at or after it - with the tier they left with, and
 * their eviction is uncounted (evicted_total, the tier's window).  Not vmm_restore: they were
 * not used, and counted young they inflated the working set and waited a whole cold age
 * before they could be tried again.  Resident ones are left alone.  O(npages + nr_gens).
 * Returns 0, -EINVAL, -ERANGE. */
int vmm_put_back(struct vmm_guest *g, uint64_t gpa, uint64_t npages, uint64_t seq);
/* Pages the host handed back to the guest, which has not used them yet (a balloon's
 * deflation, the target rising under return=reclaim): evicted ones become resident in the
 * oldest generation, tier 0, marked free (vmm_hint_free); resident ones are left alone.
 * Not vmm_restore: a handed-back page is no use, and counted young it raised the working
 * set by what was handed back, so the target rose by it again at the next interval, a step
 * every interval up to the ceiling (scenario 2 by hand, 7 Dec: 256 -> 1024 MiB in 108 MiB
 * steps, the guest's use steady at 288 MiB).  O(npages).  Returns 0, -EINVAL, -ERANGE. */
int vmm_give_back(struct vmm_guest *g, uint64_t gpa, uint64_t npages);

/* Refault distances are exact from 0 to VMM_MAX_NR_GENS - 2; VMM_MAX_NR_GENS - 1 (15)
 * means "that many or more" (the page byte keeps the eviction seq modulo 32, kept exact by
 * a sweep: docs/design.md, Part 4). */
struct vmm_refault {
	uint64_t distance_gens; /* aging rounds between eviction and refault, capped at 15 */
	unsigned tier;          /* the page's tier when it was evicted */
	bool was_evicted;       /* false: the page was resident, nothing recorded */
};

/* The caller saw the guest touch an evicted page (a fault).  The page becomes resident in
 * the youngest generation, in the tier it was evicted from (one up with
 * refault_raises_tier), and the refault is counted (in the tier it was evicted from).
 * A resident page: out->was_evicted = false, nothing changes.  Returns 0, -EINVAL (NULL,
 * unaligned gpa), -ERANGE (gpa outside RAM). */
int vmm_refault(struct vmm_guest *g, uint64_t gpa, struct vmm_refault *out);

struct vmm_gen_info {
	uint64_t seq;
	uint64_t birth_ms; /* when the aging round that created it began */
	uint64_t pages;
};

/* Reuses by idle age (vmm/reuse.c): bucket k counts pages the aging hand found used again
 * after an idle age in [vmm_reuse_bucket_ms(k), vmm_reuse_bucket_ms(k + 1)): half-octaves
 * from 1 s, the first bucket also holding shorter ages, the last (about 97 min) longer. */
#define VMM_REUSE_BUCKETS 26

struct vmm_guest_stats {
	uint64_t min_seq, max_seq;
	unsigned nr_gens;                         /* max_seq - min_seq + 1 */
	struct vmm_gen_info gen[VMM_MAX_NR_GENS]; /* oldest first */
	uint64_t ram_pages;                       /* pages in the layout */
	uint64_t resident_pages;                  /* in some generation */
	uint64_t evicted_pages;
	uint64_t free_pages; /* resident pages marked free (vmm_hint_free), not used since */
	uint64_t refaults_total;
	uint64_t evicted_total;
	uint64_t refaults_by_tier[VMM_MAX_NR_TIERS];
	uint64_t refault_distance_hist[VMM_MAX_NR_GENS]; /* last bucket: that many or more */
	uint64_t reuse_hist[VMM_REUSE_BUCKETS]; /* cumulative reuses by idle age, see above */
	/* the same, of pages in tier 0 when they came back: with reuse_raises_tier, the first
	 * comeback of each page */
	uint64_t reuse_first_hist[VMM_REUSE_BUCKETS];
	bool reuse_raises_tier; /* the config's: a page comes back "first" once, then climbs */
	bool tier_protected[VMM_MAX_NR_TIERS]; /* what the next vmm_evict would keep back */
	uint64_t metadata_bytes;               /* everything libvmm allocated for this guest */
	/* The last aging round: pages the round before it found used (its youngest generation
	 * when this one opened), and how many of them this one found used again (a sampled
	 * source's catch: vmm_sample_update) */
	uint64_t young_prev, young_again;
};

/* The resident pages in the ngens youngest generations (ngens 2: what the guest used in
 * the last two aging rounds), as runs in ascending GPA order.  O(ram pages).  Returns 0 or
 * -EINVAL (NULL, ngens 0). */
typedef void (*vmm_run_fn)(void *arg, uint64_t gpa, uint64_t npages);
int vmm_young_runs(const struct vmm_guest *g, unsigned ngens, vmm_run_fn fn, void *arg);

/* A snapshot; O(nr_gens + nr_tiers).  g and st must not be NULL. */
void vmm_guest_get_stats(const struct vmm_guest *g, struct vmm_guest_stats *st);

/* The bucket of an idle age, and the lowest age of bucket k (0 for k = 0; k beyond the
 * last reads as the last).  O(1). */
unsigned vmm_reuse_bucket_of(uint64_t age_ms);
uint64_t vmm_reuse_bucket_ms(unsigned k);

/* Check every invariant (min_seq <= each page's seq <= max_seq, per-generation and per-2 MiB
 * counts equal a recount, evicted distances within the sweep's bound, resident + evicted =
 * ram pages).  O(pages).  Returns 0, -EINVAL (NULL) or -EUCLEAN. */
int vmm_check_invariants(const struct vmm_guest *g);

/*
 * Working-set estimate: for each idle age ages_ms[i], bytes of the guest touched within
 * that age at now_ms (resident pages whose generation was born at or after now - age).
 * Errs towards more memory by at most one aging interval; an age reaching past the oldest
 * generation's birth counts every resident page.  O(n * nr_gens).  Returns 0 or -EINVAL
 * (NULL g, or n > 0 with NULL arrays).
 */
int vmm_wss(const struct vmm_guest *g, uint64_t now_ms, const uint64_t *ages_ms, size_t n,
	    uint64_t *bytes_out);

/* ======================================================================================
 * Part 6: PID control
 * ====================================================================================== */

struct vmm_pid_config {
	double kp, ki, kd;       /* gains, in output units per unit of error (per s for ki) */
	double out_min, out_max; /* output limits; the integral stops growing at them */
	double d_smoothing;      /* 0..1: weight of the newest derivative sample (1 = none,
				  * 0 = the derivative stays 0); clamped into 0..1 */
};

struct vmm_pid {
	struct vmm_pid_config cfg;
	double integral;  /* ki-weighted accumulated error, kept within the output limits */
	double prev_meas; /* last measurement, for derivative on measurement */
	double deriv;     /* smoothed derivative of the measurement */
	double output;    /* last output */
	bool primed;      /* prev_meas is valid */
};

/* Copies cfg (out_max below out_min is raised to out_min); output starts at 0 clamped into
 * the limits; the caller may preset integral to start elsewhere. */
void vmm_pid_init(struct vmm_pid *pid, const struct vmm_pid_config *cfg);
/* One step: error = setpoint - measurement; returns the clamped output.  dt_s > 0; a bad
 * dt_s or a NaN/infinite input changes nothing and returns the last output.  O(1). */
double vmm_pid_update(struct vmm_pid *pid, double setpoint, double measurement, double dt_s);

/*
 * The reclaim controller: sets the cold age threshold (how long a page must have been idle
 * before it may be evicted) so that the guest's refault rate tracks a target expressed as a
 * fraction of its resident pages per minute.  More refaults than the target raise the
 * threshold (reclaim less), fewer lower it.
 */
struct vmm_reclaim_config {
	double target_refault_per_min; /* fraction of resident pages per minute (0.002) */
	uint64_t min_age_ms, max_age_ms, initial_age_ms;
	uint64_t smooth_tau_ms;    /* time constant of the refault rate's moving average; 0:
				    * each interval's own rate (see vmm/reclaim_ctl.c) */
	uint64_t reuse_tau_ms;     /* time constant of the reuse histogram's window; 0: no
				    * reuse floor (see vmm/reclaim_ctl.c) */
	unsigned trust_factor;     /* the floor at T counts only after watching the guest for
				    * trust_factor x T; 0: at once (see vmm/reclaim_ctl.c) */
	bool weigh;                /* where pages idle past the longest age come back, take
				    * those that never came back, or a measured step, instead of
				    * holding (see vmm/reclaim_ctl.c, "Weighing"); default on */
	uint64_t first_window_ms;  /* first comebacks are counted over this recent span, not the
				    * reuse window (see vmm/reclaim_ctl.c, "First comebacks
				    * are once"); 0: over the reuse window */
	bool probe;                /* between once and trust_factor times the floor watched,
				    * take a growing probe of pages that never came back (see
				    * vmm/reclaim_ctl.c, "Probing"; needs weigh) */
	struct vmm_pid_config pid; /* acts on log2 of the threshold; see vmm/reclaim_ctl.c */
};

/* Why the reclaim controller holds (takes nothing for now): vmm_reclaim_ctl.hold. */
enum vmm_reclaim_hold {
	VMM_HOLD_NONE,
	VMM_HOLD_LEARNING, /* watched too briefly for the reuses to vouch for a threshold */
	VMM_HOLD_TOO_OLD,  /* pages idle past the longest age come back too often */
	VMM_HOLD_REFAULTS, /* at the longest age, refaults still above the target */
};

/* What the threshold applies to while the controller does not hold: vmm_reclaim_ctl.mode
 * (vmm/reclaim_ctl.c, "Weighing"). */
enum vmm_reclaim_mode {
	VMM_TAKE_BY_AGE,   /* every page idle past the threshold: the reuses vouch for it */
	VMM_TAKE_UNREUSED, /* pages idle past it that never came back; those that did go only
			    * past reused_age_ms, or stay */
	VMM_TAKE_STEP,     /* even pages that never came back return past the longest age:
			    * as many of them as their measured return rate lets the budget
			    * carry (vmm_decide counts them), watching the refaults */
};

/* Rounds of first comebacks the controller keeps for their recent rate: 64 rounds, 320 s at
 * memtided's 5 s interval (cfg.first_window_ms is a minute), 64 s at 1 s. */
#define VMM_FIRST_ROUNDS 64

struct vmm_reclaim_ctl {
	struct vmm_reclaim_config cfg;
	struct vmm_pid pid;
	uint64_t age_ms;          /* current threshold */
	double last_rate_per_min; /* last measured refault fraction per minute (raw) */
	double rate_per_min;      /* what the controller acts on: the moving average */
	bool primed;              /* the average has its first value */
	/* the reuse floor: reuses per idle-age bucket in a decaying window of reuse_tau_ms */
	uint64_t reuse_now[VMM_REUSE_BUCKETS];        /* last vmm_reclaim_observe_reuse */
	uint64_t reuse_last[VMM_REUSE_BUCKETS];       /* what the window already holds */
	double reuse_win[VMM_REUSE_BUCKETS];          /* decayed reuse counts */
	double reuse_win_ms;                          /* the same decay applied to elapsed time */
	uint64_t reuse_first_now[VMM_REUSE_BUCKETS];  /* the same, of first comebacks */
	uint64_t reuse_first_last[VMM_REUSE_BUCKETS]; /* (vmm_guest_stats.reuse_first_hist) */
	double reuse_first_win[VMM_REUSE_BUCKETS];
	bool first_fed;  /* vmm_reclaim_observe_first was called: else every reuse is a first */
	bool first_once; /* ... from a guest whose pages climb a tier when they come back */
	/* First comebacks of the last rounds (a ring, newest at first_next - 1) and their sum
	 * over the last cfg.first_window_ms: their recent rate */
	float first_ring[VMM_FIRST_ROUNDS][VMM_REUSE_BUCKETS];
	uint32_t first_ring_ms[VMM_FIRST_ROUNDS];
	unsigned first_next, first_rounds;
	double first_recent[VMM_REUSE_BUCKETS];
	double first_recent_ms;
	uint64_t floor_ms; /* the shortest threshold the reuses say keeps the target (0: none) */
	uint64_t floor_all_ms;    /* that floor over every reuse; UINT64_MAX: past the longest
				  * age (without weighing, floor_ms) */
	uint64_t floor_first_ms;  /* over first comebacks (with weighing, floor_ms) */
	uint64_t reused_floor_ms; /* over the later reuses of pages that came back, with what
				   * first comebacks leave of the allowance; 0: as floor_ms;
				   * UINT64_MAX: they stay (past the longest age, or not vouched
				   * for yet) */
	uint64_t reused_age_ms;   /* the threshold for pages that came back (>= age_ms;
				   * UINT64_MAX: they stay) */
	uint64_t watched_ms;      /* time fed to vmm_reclaim_update since init */
	double reuses_seen;       /* reuses (not refaults) in the window */
	/* Take nothing for now: the reuses do not yet vouch for any threshold the generations
	 * can tell apart, or even the longest refaults above the target.  A caller that evicts
	 * by age (host pageout, the lab) evicts nothing while it is set; hold_why says why. */
	bool hold;
	enum vmm_reclaim_hold hold_why;
	enum vmm_reclaim_mode mode; /* what the threshold applies to when not holding */
	/* Watched once as long as the floor, not yet trust_factor times: take at most
	 * probe_pages a round of pages that never came back (vmm/reclaim_ctl.c, "Probing") */
	bool probing;
	uint64_t probe_pages;
};

/* The longest idle age nr_gens generations, one born every round_ms, tell apart once they
 * have watched the guest that long: the least age of the oldest generation's birth under
 * the layout's rule (vmm/generations.c, "The layout"; with gens_widen).  16 generations:
 * 766 rounds (64 min at 5 s); 4: 3 rounds.  memtided bounds its cold age by it, and
 * memtide-sim lays out memtided's generations with it. */
uint64_t vmm_gens_reach_ms(unsigned nr_gens, uint64_t round_ms);

/* A short phrase for hold_why ("learning", ...) and for mode ("by-age", "unreused",
 * "step"). */
const char *vmm_reclaim_hold_name(enum vmm_reclaim_hold why);
const char *vmm_reclaim_mode_name(enum vmm_reclaim_mode mode);
/* Reuses per minute, in the controller's window, of pages idle age_ms or longer: every
 * reuse, or first comebacks only.  O(VMM_REUSE_BUCKETS). */
double vmm_reclaim_reuse_rate(const struct vmm_reclaim_ctl *ctl, uint64_t age_ms, bool first_only);

/* target 0.002/min, thresholds 10 s .. 1 h starting at 2 min, rate averaged over 60 s,
 * reuse window 5 min, trust factor 4, weighing on, probing off, kp 0.25, ki 0.01/s, kd 0
 * (measured in tests/unit/test_reclaim_ctl.c and memtide-sim's sim_defaults). */
void vmm_reclaim_config_default(struct vmm_reclaim_config *cfg);
/* Returns 0 or -EINVAL (target not > 0, min_age_ms 0 or above max_age_ms, initial_age_ms
 * outside [min, max]).  The pid's out_min/out_max are set here from the age limits. */
int vmm_reclaim_init(struct vmm_reclaim_ctl *ctl, const struct vmm_reclaim_config *cfg);
/* Feed one interval: refault_pages seen in dt_ms, with resident_pages resident. Returns the
 * new cold age threshold in ms (dt_ms 0 or resident_pages 0: the current one).  The target
 * in ctl->cfg may be changed between calls.  O(1). */
uint64_t vmm_reclaim_update(struct vmm_reclaim_ctl *ctl, uint64_t refault_pages,
			    uint64_t resident_pages, uint64_t dt_ms);
/* The guest's cumulative reuse histogram (vmm_guest_stats.reuse_hist), read before each
 * vmm_reclaim_update: the next update adds what it grew by to its window and keeps the
 * threshold at or above the reuse floor.  A histogram that went backwards (a new guest
 * state) restarts the count.  O(VMM_REUSE_BUCKETS). */
void vmm_reclaim_observe_reuse(struct vmm_reclaim_ctl *ctl, const uint64_t *hist);
/* The same histogram, read when its growth since the last reading is known not to be reuse:
 * the guest's own reclaim read those pages on their way to swap, and host-side access bits
 * take the read for a use (memtided: while the agent reclaims for it).  The next update adds
 * none of that growth to its window.  O(VMM_REUSE_BUCKETS). */
void vmm_reclaim_skip_reuse(struct vmm_reclaim_ctl *ctl, const uint64_t *hist);
/* The first comebacks (vmm_guest_stats.reuse_first_hist), read with the histogram above
 * (observe: reuse says whether it is the guest's use or to be skipped).  Without it every
 * reuse counts as a first comeback, as with reuse_raises_tier off.  O(VMM_REUSE_BUCKETS). */
void vmm_reclaim_observe_first(struct vmm_reclaim_ctl *ctl, const uint64_t *first_hist, bool reuse);

/* memtided's limits for a guest aged one round every round_ms with nr_gens generations: the
 * longest threshold is what they tell apart (vmm_gens_reach_ms), the shortest no longer, and
 * a start outside the limits starts at the longest.  memtided sets its controller up with it
 * and memtide-sim's memtided layout does the same, so the two start alike.  O(1). */
void vmm_reclaim_config_fit(struct vmm_reclaim_config *cfg, unsigned nr_gens, uint64_t round_ms);

/*
 * Part 6c: one round of the per-VM decision (vmm/decide.c).  The reuses the aging hand saw
 * -> the reclaim controller -> how long a page must have lain idle to go, and how many the
 * eviction hand may take this round, or why none.  memtided (host/decide/tick_decide.c, then host
 * pageout in host/act/pageout_hand.c) and memtide-sim's memtide (sim/policy_memtide.c) decide
 * through this one call; each then acts its own way (QEMU's pages to host swap, the lab's
 * single-page eviction).  What the lab measures is what the daemon decides.
 */
/* The most a round takes by default: 1 GiB (memtided's [pageout] max_step). */
#define VMM_DECIDE_MAX_STEP_PAGES ((uint64_t)1 << (30 - VMM_PAGE_SHIFT))

enum vmm_decide_gate {
	VMM_DECIDE_WATCHING, /* watched for less than the cold age: no page is known that idle
			      * (first: a zeroed decision takes nothing) */
	VMM_DECIDE_TAKE,     /* take_pages pages idle cold_age_ms or longer may go (those
			      * that came back: reused_age_ms) */
	VMM_DECIDE_HOLD,     /* the controller holds (vmm_reclaim_ctl.hold_why says why) */
	VMM_DECIDE_FLOOR,    /* the guest is down to its floor */
};

struct vmm_decide_in {
	uint64_t dt_ms;          /* since the last round (0: the controller is not fed) */
	uint64_t refaults;       /* the refault signal over dt_ms, in 4 KiB pages */
	uint64_t resident_pages; /* the guest's RAM the host holds (the controller's base) */
	uint64_t watched_ms;     /* since the access-bit source first saw the guest */
	bool reuse_is_echo;      /* the reuses seen since the last round are the guest's own
				  * reclaim reading pages (vmm_reclaim_skip_reuse), not uses */
	uint64_t fixed_age_ms;   /* an operator's fixed cold age (0: the controller's); the
				  * controller still runs and a fixed age is never held */
	bool hold_overridden;    /* take even while the controller holds (a host squeeze) */
	uint64_t floor_pages;    /* keep at least this many pages resident */
	uint64_t max_step_pages; /* take at most this many a round (0: no limit) */
	uint64_t now_ms;         /* the round's time, for the generations' ages (0: the last
				  * aging round's start) */
};

struct vmm_decision {
	uint64_t cold_age_ms; /* the threshold in force */
	enum vmm_decide_gate gate;
	uint64_t take_pages;        /* gate VMM_DECIDE_TAKE: at most this many (else 0) */
	bool fixed_age;             /* cold_age_ms is the operator's (vmm_decide_in.fixed_age_ms) */
	bool fixed_age_capped;      /* fixed_age_ms is past the controller's max_age_ms, which is
				  * used instead: the generations cannot tell older ages apart */
	bool holds_all_takers;      /* the controller holds because even the longest age it can
				* tell apart refaults past the budget (not while it is only
				* learning; while it weighs, too: only host pageout can leave
				* the pages that came back), and no fixed age overrides it:
				* nothing may go by age through any actuator - the balloon and
				* the guest's reclaim too, not host pageout alone (memtided's
				* refault_hold) */
	enum vmm_reclaim_mode mode; /* the controller's (VMM_TAKE_BY_AGE under a fixed age) */
	uint64_t reused_age_ms;     /* vmm_evict_req.reused_min_age_ms for this round: pages that
				     * came back go past it (UINT64_MAX: they stay) */
	uint64_t estimate_age_ms;   /* the one age for takers that cannot tell pages that came
				     * back apart (the balloon, the guest's reclaim): the longer
				     * of the two thresholds, or cold_age_ms while they stay */
	/* VMM_TAKE_STEP: pages idle past cold_age_ms (resident, at this round), and how often
	 * one of them comes back, per minute (first comebacks over them); the budget carries
	 * step_pages of them out at once, evicted ones included */
	uint64_t step_idle_pages;
	double step_return_per_min;
	uint64_t step_pages;
};

/* A short phrase for a gate ("take", "watching", "hold", "floor"). */
const char *vmm_decide_gate_name(enum vmm_decide_gate gate);

/* One round: reads g's reuse histograms (vmm_guest_get_stats), feeds the controller, and
 * fills *out.  Evicts nothing: the caller runs vmm_evict with out->cold_age_ms and
 * out->reused_age_ms for at most out->take_pages.  Returns 0, or -EINVAL for a NULL
 * argument.  O(nr_gens x buckets). */
int vmm_decide(const struct vmm_guest *g, struct vmm_reclaim_ctl *ctl,
	       const struct vmm_decide_in *in, struct vmm_decision *out);

/* What the round decided and why, in one line for an operator (memtided's `vm show`, the
 * lab's trace): "taking pages idle past 2m10s (the reuses vouch for it)", "taking only pages
 * that never came back, idle past 1m30s: pages idle past 1h come back at 12/min, all of them
 * pages seen back before", ...  Writes at most len bytes, NUL-terminated; returns buf. */
char *vmm_decision_explain(const struct vmm_reclaim_ctl *ctl, const struct vmm_decision *d,
			   char *buf, size_t len);

/* ======================================================================================
 * Part 0: sampled sources - how long the window should be (vmm/sample.c)
 * ====================================================================================== */

struct vmm_sample_config {
	uint64_t base_ms;   /* the shortest window (memtided: the policy's ept_window) */
	uint64_t max_ms;    /* the longest (a fifth of the interval: the slowdown's bound) */
	double low, high;   /* widen under this caught share, narrow over that (0.5, 0.85) */
	uint64_t min_pages; /* a round with fewer pages seen before changes nothing (256) */
};

struct vmm_sample {
	struct vmm_sample_config cfg;
	uint64_t window_ms; /* the next window */
	double caught;      /* the last estimate of the share caught (-1: none yet) */
};

/* base_ms, and a longest window of a fifth of interval_ms (at least base_ms). */
void vmm_sample_config_default(struct vmm_sample_config *cfg, uint64_t base_ms,
			       uint64_t interval_ms);
/* The window starts at max_ms.  Returns 0 or -EINVAL (base 0, max under base, low over high
 * or out of 0..1). */
int vmm_sample_init(struct vmm_sample *s, const struct vmm_sample_config *cfg);
/* One round: seen_before = the pages the previous round found used, seen_again = how many
 * of them this round found used again (vmm_guest_stats.young_prev, young_again).  Returns
 * the next window's length.  O(1). */
uint64_t vmm_sample_update(struct vmm_sample *s, uint64_t seen_before, uint64_t seen_again);

#ifdef __cplusplus
}
#endif
#endif /* MEMTIDE_VMM_H */
