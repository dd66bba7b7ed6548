// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * simhw.c - simulated hardware: real EPT / stage-2 tables in memory (Part 2 of libvmm).
 *
 * Not a stub of the walker: the tables are the same 8-byte encodings an MMU reads (built
 * with the format's own encoders), and vmm_simhw_access changes them the way an MMU does,
 * atomically, so vmm_walk cannot tell them from a live guest's tables.  Tests, benchmarks,
 * memtide-sim and memtided's simulated access-bit source drive guests through it.
 *
 * Address layout of a guest (all 2 MiB aligned):
 *
 *   GPA 0                                                           gpa_end
 *   | RAM piece 0 | hole | RAM piece 1 | hole | ... | RAM piece nr_holes |
 *
 *   The holes (MMIO-like gaps) sit near evenly spaced cut points, jittered by the seed.
 *   Output addresses: guest page gpa maps host PA HPA_BASE + gpa.
 *
 * Table pool: page tables are 4 KiB pages cut from 2 MiB slabs.  Table number i has the
 * physical address TABLE_PA_BASE + i * 4 KiB, so the PA -> pointer map the walker needs is
 * two array lookups (slab = i / 512, table = i % 512), O(1) and without a hash:
 *
 *   slabs[0] -> | table 0 (root) | table 1 | ... | table 511 |   (2 MiB, 2 MiB aligned)
 *   slabs[1] -> | table 512      | ...                        |
 *
 * 2 MiB slabs, 2 MiB aligned: a 64 GiB guest with 4 KiB pages needs 32768 leaf tables
 * (128 MiB); one allocation per 512 tables keeps malloc overhead negligible, and the
 * alignment lets the kernel back a slab with one transparent huge page where THP is
 * "always" (KVM's own table pages sit in the direct map, which is mapped huge).  This
 * machine has THP on "madvise" and libvmm makes no system calls, so here the tables and
 * vmm-bench's sequential-read buffer both sit on 4 KiB pages: like against like.
 *
 * Invariants:
 *  - every page of the RAM layout is mapped at build time; after vmm_simhw_unmap a page is
 *    absent until vmm_simhw_access refaults it; pages outside RAM are never mapped.
 *  - unmap splits huge leaves down to 4 KiB leaf tables and never frees a table, so a
 *    refault only stores one entry (compare-and-swap) and never allocates: that is what
 *    makes vmm_simhw_access safe to run on another thread during a walk.
 *  - a split copies the accessed and dirty state into every child: no access is lost.
 *  - all state is in struct vmm_simhw (no globals); the counters are exact when no access
 *    runs concurrently (refaults update them with relaxed atomics).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pt_format.h"

#define SLAB_TABLES   512 /* 4 KiB tables per 2 MiB slab */
#define SLAB_BYTES    (SLAB_TABLES * VMM_PAGE_SIZE)
#define TABLE_PA_BASE (1ULL << 45) /* table i lives at PA TABLE_PA_BASE + i * 4 KiB */
#define HPA_BASE      (1ULL << 46) /* guest page gpa maps HPA_BASE + gpa */
#define MAX_GPA                                                                                    \
	(1ULL << 44) /* 16 TiB of address space: tables and data stay apart,
				    * and under stage-2's 48-bit output addresses */

struct vmm_simhw {
	struct vmm_pt pt; /* handed to vmm_walk; pt.mem_ctx points back here */
	bool nonleaf;     /* accesses set A in upper entries too (cfg.nonleaf_accessed) */
	const struct vmm_pt_format *fmt;
	uint64_t **slabs; /* slab k holds tables k*512 .. k*512+511 */
	size_t nr_slabs, cap_slabs;
	uint64_t nr_tables;    /* tables handed out */
	struct vmm_range *ram; /* RAM pieces, ascending */
	size_t nr_ram;
	uint64_t rng;                   /* splitmix64 state, for the layout only */
	struct vmm_simhw_counts counts; /* updated by build, unmap, refault */
};

/* ---- table pool ----------------------------------------------------------------------- */

static uint64_t *sim_table(void *ctx, uint64_t pa)
{
	const struct vmm_simhw *hw = ctx;
	uint64_t i;

	if (pa < TABLE_PA_BASE || (pa & (VMM_PAGE_SIZE - 1)))
		return NULL;
	i = (pa - TABLE_PA_BASE) >> VMM_PAGE_SHIFT;
	if (i >= hw->nr_tables)
		return NULL;
	return hw->slabs[i / SLAB_TABLES] + (i % SLAB_TABLES) * PT_ENTRIES;
}

/* A zeroed table; its PA in *pa.  Returns 0 or -ENOMEM. */
static int table_alloc(struct vmm_simhw *hw, uint64_t *pa)
{
	if (hw->nr_tables == hw->nr_slabs * SLAB_TABLES) {
		uint64_t *slab;

		if (hw->nr_slabs == hw->cap_slabs) {
			size_t cap = hw->cap_slabs ? 2 * hw->cap_slabs : 8;
			uint64_t **s = realloc(hw->slabs, cap * sizeof(*s));

			if (!s)
				return -ENOMEM;
			hw->slabs = s;
			hw->cap_slabs = cap;
		}
		slab = aligned_alloc(SLAB_BYTES, SLAB_BYTES);
		if (!slab)
			return -ENOMEM;
		memset(slab, 0, SLAB_BYTES);
		hw->slabs[hw->nr_slabs++] = slab;
	}
	*pa = TABLE_PA_BASE + (hw->nr_tables++ << VMM_PAGE_SHIFT);
	hw->counts.tables++;
	return 0;
}

/* ---- layout ----------------------------------------------------------------------------- */

static uint64_t rng_next(struct vmm_simhw *hw)
{
	uint64_t z = (hw->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(struct vmm_simhw *hw)
{
	return (double)(rng_next(hw) >> 11) / (double)(1ULL << 53);
}

/*
 * Split guest_bytes of RAM into nr_holes + 1 pieces.  Cut k (after 2 MiB chunk cut[k]) is
 * near k+1 of nr_holes+1 equal parts, moved by up to a quarter part either way, and kept
 * strictly increasing so no piece is empty.
 */
static int layout_ram(struct vmm_simhw *hw, const struct vmm_simhw_config *cfg)
{
	uint64_t chunks = cfg->guest_bytes / VMM_SIZE_2M, prev = 0, gpa = 0;
	uint64_t part = chunks / (cfg->nr_holes + 1);

	hw->ram = calloc(cfg->nr_holes + 1, sizeof(*hw->ram));
	if (!hw->ram)
		return -ENOMEM;
	for (unsigned k = 0; k <= cfg->nr_holes; k++) {
		uint64_t cut = chunks;

		if (k < cfg->nr_holes) {
			uint64_t jitter = part / 4;
			uint64_t base = chunks * (k + 1) / (cfg->nr_holes + 1);

			cut = base - jitter + (jitter ? rng_next(hw) % (2 * jitter + 1) : 0);
			if (cut <= prev)
				cut = prev + 1;
			if (cut > chunks - (cfg->nr_holes - k))
				cut = chunks - (cfg->nr_holes - k);
		}
		hw->ram[k].start = gpa;
		hw->ram[k].end = gpa + (cut - prev) * VMM_SIZE_2M;
		gpa = hw->ram[k].end + cfg->hole_bytes;
		prev = cut;
	}
	hw->nr_ram = cfg->nr_holes + 1;
	return 0;
}

/* The RAM piece holding gpa, or NULL (a hole, or past the end).  Binary search. */
static const struct vmm_range *ram_find(const struct vmm_simhw *hw, uint64_t gpa)
{
	size_t lo = 0, hi = hw->nr_ram;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (gpa < hw->ram[mid].start)
			hi = mid;
		else if (gpa >= hw->ram[mid].end)
			lo = mid + 1;
		else
			return &hw->ram[mid];
	}
	return NULL;
}

/* ---- building and changing the tree ------------------------------------------------------ */

/* The entry of gpa at `level`, creating the tables above it.  NULL on -ENOMEM. */
static uint64_t *slot_create(struct vmm_simhw *hw, uint64_t gpa, int level)
{
	uint64_t pa = hw->pt.root_pa;

	for (int l = 0;; l++) {
		uint64_t *slot =
		    sim_table(hw, pa) + ((gpa >> PT_LEVEL_SHIFT(l)) & (PT_ENTRIES - 1));

		if (l == level)
			return slot;
		if (!hw->fmt->present(*slot, l)) {
			if (table_alloc(hw, &pa))
				return NULL;
			*slot = hw->fmt->make_table(pa);
		} else {
			pa = hw->fmt->addr(*slot);
		}
	}
}

static void count_leaf(struct vmm_simhw *hw, int level, int64_t d)
{
	uint64_t *c = level == 1   ? &hw->counts.leaves_1g
		      : level == 2 ? &hw->counts.leaves_2m
				   : &hw->counts.leaves_4k;

	__atomic_fetch_add(c, (uint64_t)d, __ATOMIC_RELAXED);
	__atomic_fetch_add(&hw->counts.mapped_pages,
			   (uint64_t)d << (PT_LEVEL_SHIFT(level) - VMM_PAGE_SHIFT),
			   __ATOMIC_RELAXED);
}

static int map_leaf(struct vmm_simhw *hw, uint64_t gpa, int level)
{
	uint64_t *slot = slot_create(hw, gpa, level);

	if (!slot)
		return -ENOMEM;
	*slot = hw->fmt->make_leaf(HPA_BASE + gpa, level, true);
	count_leaf(hw, level, 1);
	return 0;
}

/* Map one RAM piece: 1 GiB leaves where a whole aligned GiB fits and the dice say so, then
 * 2 MiB leaves by huge_2m_share, the rest as 4 KiB leaves. */
static int map_piece(struct vmm_simhw *hw, const struct vmm_range *r,
		     const struct vmm_simhw_config *cfg)
{
	uint64_t gpa = r->start;
	int rc = 0;

	while (gpa < r->end && !rc) {
		if (!(gpa & (VMM_SIZE_1G - 1)) && gpa + VMM_SIZE_1G <= r->end &&
		    rng_unit(hw) < cfg->huge_1g_share) {
			rc = map_leaf(hw, gpa, 1);
			gpa += VMM_SIZE_1G;
			continue;
		}
		if (rng_unit(hw) < cfg->huge_2m_share) {
			rc = map_leaf(hw, gpa, 2);
		} else {
			for (uint64_t p = 0; p < VMM_SIZE_2M && !rc; p += VMM_PAGE_SIZE)
				rc = map_leaf(hw, gpa + p, PT_LAST_LEVEL);
		}
		gpa += VMM_SIZE_2M;
	}
	return rc;
}

static bool config_valid(const struct vmm_simhw_config *cfg)
{
	uint64_t space;

	if (!vmm_pt_format_get(cfg->fmt) || !cfg->guest_bytes || cfg->guest_bytes % VMM_SIZE_2M ||
	    cfg->hole_bytes % VMM_SIZE_2M)
		return false;
	if (cfg->nr_holes && (!cfg->hole_bytes || cfg->nr_holes >= cfg->guest_bytes / VMM_SIZE_2M))
		return false;
	if (!(cfg->huge_2m_share >= 0 && cfg->huge_2m_share <= 1 && cfg->huge_1g_share >= 0 &&
	      cfg->huge_1g_share <= 1))
		return false; /* written so that NaN fails too */
	if (cfg->guest_bytes > MAX_GPA || cfg->nr_holes > MAX_GPA / VMM_SIZE_2M)
		return false;
	if (cfg->nonleaf_accessed && cfg->fmt != VMM_PT_EPT)
		return false; /* stage-2 table descriptors have no access flag */
	space = cfg->guest_bytes + (uint64_t)cfg->nr_holes * cfg->hole_bytes;
	return cfg->hole_bytes <= MAX_GPA && space <= MAX_GPA;
}

int vmm_simhw_new(const struct vmm_simhw_config *cfg, struct vmm_simhw **out)
{
	struct vmm_simhw *hw;
	int rc;

	if (!cfg || !out || !config_valid(cfg))
		return -EINVAL;
	hw = calloc(1, sizeof(*hw));
	if (!hw)
		return -ENOMEM;
	hw->fmt = vmm_pt_format_get(cfg->fmt);
	hw->rng = cfg->seed;
	hw->pt = (struct vmm_pt){.fmt = hw->fmt, .table = sim_table, .mem_ctx = hw};
	hw->nonleaf = cfg->nonleaf_accessed;
	if (hw->nonleaf)
		hw->pt.flags |= VMM_PT_NONLEAF_ACCESSED;
	rc = table_alloc(hw, &hw->pt.root_pa);
	if (!rc)
		rc = layout_ram(hw, cfg);
	for (size_t i = 0; !rc && i < hw->nr_ram; i++)
		rc = map_piece(hw, &hw->ram[i], cfg);
	if (rc) {
		vmm_simhw_free(hw);
		return rc;
	}
	*out = hw;
	return 0;
}

void vmm_simhw_free(struct vmm_simhw *hw)
{
	if (!hw)
		return;
	for (size_t i = 0; i < hw->nr_slabs; i++)
		free(hw->slabs[i]);
	free(hw->slabs);
	free(hw->ram);
	free(hw);
}

const struct vmm_pt *vmm_simhw_pt(const struct vmm_simhw *hw)
{
	return &hw->pt;
}

size_t vmm_simhw_ram(const struct vmm_simhw *hw, const struct vmm_range **ranges)
{
	*ranges = hw->ram;
	return hw->nr_ram;
}

uint64_t vmm_simhw_table_bytes(const struct vmm_simhw *hw)
{
	return (uint64_t)hw->nr_slabs * SLAB_BYTES;
}

void vmm_simhw_get_counts(const struct vmm_simhw *hw, struct vmm_simhw_counts *out)
{
	out->leaves_4k = __atomic_load_n(&hw->counts.leaves_4k, __ATOMIC_RELAXED);
	out->leaves_2m = __atomic_load_n(&hw->counts.leaves_2m, __ATOMIC_RELAXED);
	out->leaves_1g = __atomic_load_n(&hw->counts.leaves_1g, __ATOMIC_RELAXED);
	out->mapped_pages = __atomic_load_n(&hw->counts.mapped_pages, __ATOMIC_RELAXED);
	out->tables = hw->counts.tables;
}

/* ---- the MMU ------------------------------------------------------------------------------ */

/*
 * Set the access bits in a present leaf: one atomic OR, skipped when the bits are already
 * set (an MMU does not write an entry whose A/D are set either).  Races with the walker's
 * fetch_and on the same word; either order leaves the access visible to some walk.
 */
static void mmu_touch(const struct vmm_pt_format *f, uint64_t *slot, uint64_t e, bool write)
{
	uint64_t bits = f->hw_access_bits(e, write);

	if ((e & bits) != bits)
		__atomic_fetch_or(slot, bits, __ATOMIC_RELAXED);
}

/*
 * The upper entries' accessed bits, for trees that keep them (cfg.nonleaf_accessed), after
 * the leaf changed: leaf first, then the way up with release, so that a walker that clears
 * an upper A before reading its subtree cannot be left with a young leaf under a clear
 * upper A (docs/walker.md, "Non-leaf accessed bits").
 */
static void mmu_touch_upper(const struct vmm_pt_format *f, uint64_t **up, int n)
{
	for (int i = n - 1; i >= 0; i--)
		if (!(__atomic_load_n(up[i], __ATOMIC_RELAXED) & f->accessed_mask))
			__atomic_fetch_or(up[i], f->accessed_mask, __ATOMIC_RELEASE);
}

int vmm_simhw_access(struct vmm_simhw *hw, uint64_t gpa, bool write)
{
	const struct vmm_pt_format *f = hw->fmt;
	uint64_t pa = hw->pt.root_pa;
	uint64_t *up[PT_LAST_LEVEL + 1];
	int nup = 0;

	if (!ram_find(hw, gpa))
		return -ERANGE;
	for (int level = 0; level <= PT_LAST_LEVEL; level++) {
		uint64_t *t = sim_table(hw, pa), *slot, e, fresh;

		if (!t)
			return -EFAULT;
		slot = &t[(gpa >> PT_LEVEL_SHIFT(level)) & (PT_ENTRIES - 1)];
		e = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (f->present(e, level)) {
			if (f->is_leaf(e, level)) {
				uint64_t bits = f->hw_access_bits(e, write);
				if ((e & bits) == bits)
					return 0; /* nothing new: an MMU writes nothing either */
				mmu_touch(f, slot, e, write);
				if (hw->nonleaf)
					mmu_touch_upper(f, up, nup);
				return 0;
			}
			up[nup++] = slot;
			pa = f->addr(e);
			continue;
		}
		if (level != PT_LAST_LEVEL)
			return -EFAULT; /* unmap never removes a table: cannot happen */
		/* A refault: map the page again with this access already recorded.  The CAS
		 * races with another thread refaulting the same page; the loser touches the
		 * winner's leaf. */
		fresh = f->make_leaf(HPA_BASE + (gpa & ~(VMM_PAGE_SIZE - 1)), level, true);
		fresh |= f->hw_access_bits(fresh, write);
		int rc = 0;
		if (__atomic_compare_exchange_n(slot, &e, fresh, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED)) {
			count_leaf(hw, level, 1);
			rc = 1;
		} else {
			mmu_touch(f, slot, e, write);
		}
		if (hw->nonleaf)
			mmu_touch_upper(f, up, nup);
		return rc;
	}
	return -EFAULT;
}

/*
 * Replace the huge leaf *slot (at `level`, mapping gpa_base) by a table of 512 leaves of
 * the next size, each with the parent's permissions and its accessed and dirty state.
 * "Writable" is read back through the format: a leaf is writable when a write would set
 * more than the accessed bit (EPT: W; stage-2: DBM).
 */
static int split_leaf(struct vmm_simhw *hw, uint64_t *slot, int level, uint64_t gpa_base)
{
	const struct vmm_pt_format *f = hw->fmt;
	uint64_t e = *slot, pa, *t;
	uint64_t state = e & (f->accessed_mask | f->dirty_clear_mask);
	bool writable = f->hw_access_bits(e, true) != f->accessed_mask;
	uint64_t child_size = 1ULL << PT_LEVEL_SHIFT(level + 1);

	if (table_alloc(hw, &pa))
		return -ENOMEM;
	t = sim_table(hw, pa);
	for (unsigned i = 0; i < PT_ENTRIES; i++)
		t[i] =
		    f->make_leaf(HPA_BASE + gpa_base + i * child_size, level + 1, writable) | state;
	*slot = f->make_table(pa);
	count_leaf(hw, level, -1);
	count_leaf(hw, level + 1, PT_ENTRIES);
	return 0;
}

/* Unmap one 4 KiB page, splitting huge leaves above it. */
static int unmap_page(struct vmm_simhw *hw, uint64_t gpa)
{
	const struct vmm_pt_format *f = hw->fmt;
	uint64_t pa = hw->pt.root_pa;

	for (int level = 0; level <= PT_LAST_LEVEL; level++) {
		uint64_t *slot =
		    sim_table(hw, pa) + ((gpa >> PT_LEVEL_SHIFT(level)) & (PT_ENTRIES - 1));
		int rc;

		if (!f->present(*slot, level))
			return 0; /* already absent */
		if (level == PT_LAST_LEVEL) {
			*slot = 0;
			count_leaf(hw, level, -1);
			return 0;
		}
		if (f->is_leaf(*slot, level)) {
			rc = split_leaf(hw, slot, level,
					gpa & ~((1ULL << PT_LEVEL_SHIFT(level)) - 1));
			if (rc)
				return rc;
		}
		pa = f->addr(*slot);
	}
	return 0;
}

int vmm_simhw_unmap(struct vmm_simhw *hw, uint64_t gpa, uint64_t npages)
{
	const struct vmm_range *r;

	if (gpa & (VMM_PAGE_SIZE - 1) || !npages || npages > MAX_GPA >> VMM_PAGE_SHIFT)
		return -EINVAL;
	r = ram_find(hw, gpa);
	if (!r || gpa + (npages << VMM_PAGE_SHIFT) > r->end)
		return -ERANGE;
	for (uint64_t i = 0; i < npages; i++) {
		int rc = unmap_page(hw, gpa + (i << VMM_PAGE_SHIFT));

		if (rc)
			return rc;
	}
	return 0;
}
