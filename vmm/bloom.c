// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bloom.c - the bloom filter over leaf page-table pages (Part 3 of libvmm).
 *
 * Why: in a large guest most 2 MiB regions are cold, yet a plain aging walk reads all 512
 * entries of every leaf table to learn that.  Linux's multi-gen LRU remembers which leaf
 * tables were dense with young entries during one walk and lets the next walk read only
 * those (mm/vmscan.c: update_bloom_filter / test_bloom_filter).  memtide does the same for
 * EPT and stage-2 leaf tables, keyed by the table's physical address.
 *
 * Layout: two filters of 2^bits_shift bits, one per parity of the sequence number:
 *
 *     filter[seq & 1]        read by the walk for seq (which tables to visit)
 *     filter[(seq + 1) & 1]  written by the walk for seq (tables admitted for seq + 1)
 *
 *   struct vmm_bloom | f[0] {seq, nr_added} | f[1] {...} | bits: f[0] words | f[1] words
 *
 * Each filter remembers the seq it holds.  Invariant: a filter's bits are exactly the
 * items added for f.seq since it was last emptied; a filter holding another seq than the
 * one asked about is treated as empty.  So vmm_bloom_add empties a stale filter itself,
 * and a caller that skips a seq, or splits a walk into budget-limited calls, still gets
 * correct filters without calling vmm_bloom_reset.
 *
 * Hashing: one 64-bit mix of the table address (the murmur3 finalizer), split into h1 and
 * h2; key i is (h1 + i * h2) mod 2^bits_shift (Kirsch-Mitzenmacher double hashing).  The
 * false-positive rate after n adds is then the textbook (1 - e^(-k n / m))^k;
 * tests/unit/test_bloom.c checks it.  For a 64 GiB guest with 5% of its 32768 leaf tables
 * admitted (n = 1638, m = 2^15, k = 2) that is 0.9%: a false positive only costs one extra
 * table read, never a missed page.
 *
 * Full walks: a filtered walk never re-examines a table that was cold last time, so pages
 * that warm up inside a skipped table are found late (their accessed bits stay set: they
 * are reported by the next full walk, never lost).  The walk for every seq that is a
 * multiple of full_walk_every (K) ignores the filter, and so does any walk whose filter is
 * empty (the first walk, or after a skipped seq).  K was measured with bench/vmm-bench
 * (age_sparse_bloom and bloom_k_sweep: 64 GiB EPT guest, 4 KiB pages, 5% of pages hot in
 * clusters of 1-8 MiB, every hot page touched each interval; leaf entries read per walk
 * averaged over two whole K-cycles in steady state; unfiltered walk = 16.8 M entries):
 *
 *      K    entries/walk   entries_ratio   wall-time ratio   young found
 *      2        9.07 M          1.85             1.4            99.7%
 *      4        5.21 M          3.22             1.7            99.5%
 *      8        3.28 M          5.11             2.1            99.5%
 *     16        2.32 M          7.24             2.1            99.4%
 *     32        1.84 M          9.13             2.1            99.4%
 *
 * About (1 + (K - 1) * f) / K of a full walk, with f = 8% of the leaf tables dense enough
 * to be admitted (5% hot pages, plus tables a cluster only partly covers).  K = 8 is the
 * smallest K that meets the goal of reading 5x fewer entries, and it bounds how stale the
 * picture of a table that warms up can get to 8 aging intervals (its pages are found by
 * the next full walk, or sooner by the eviction hand's look-around).  Beyond K = 8 the wall
 * time stops improving: the filtered walk is then dominated by the atomic clears of the
 * hot pages themselves, not by reading cold entries.  "young found" is the share of the
 * unfiltered walks' young pages the filtered walks report in the same intervals; the
 * 0.5% missing are hot pages in tables below the admission bar, reported by the next full
 * walk (their accessed bits stay set).
 *
 * Cost: vmm_bloom_test / vmm_bloom_add are O(nr_hashes); emptying a filter is
 * 2^(bits_shift - 3) bytes of memset (4 KiB by default), once per seq.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

struct bloom_half {
	uint64_t seq;      /* the seq this filter holds items for (valid when holds) */
	uint64_t nr_added; /* items added since it was emptied; 0 = empty */
	bool holds;        /* false until the first reset/add */
};

struct vmm_bloom {
	struct vmm_bloom_config cfg;
	uint64_t bit_mask; /* 2^bits_shift - 1 */
	size_t nr_words;   /* 64-bit words per filter */
	struct bloom_half f[2];
	uint64_t bits[]; /* f[0]'s words, then f[1]'s */
};

#define BLOOM_MIN_SHIFT  8
#define BLOOM_MAX_SHIFT  28
#define BLOOM_MAX_HASHES 8

void vmm_bloom_config_default(struct vmm_bloom_config *cfg)
{
	cfg->bits_shift = 15;     /* Linux BLOOM_FILTER_SHIFT */
	cfg->nr_hashes = 2;       /* Linux uses two keys */
	cfg->admit_young_x = 8;   /* one young entry per 64-byte line of 8-byte entries */
	cfg->full_walk_every = 8; /* measured, see the file comment */
}

int vmm_bloom_new(const struct vmm_bloom_config *cfg, struct vmm_bloom **out)
{
	struct vmm_bloom *b;
	size_t nr_words;

	if (!cfg || !out)
		return -EINVAL;
	if (cfg->bits_shift < BLOOM_MIN_SHIFT || cfg->bits_shift > BLOOM_MAX_SHIFT ||
	    cfg->nr_hashes < 1 || cfg->nr_hashes > BLOOM_MAX_HASHES || cfg->admit_young_x < 1 ||
	    cfg->full_walk_every < 1)
		return -EINVAL;
	nr_words = ((size_t)1 << cfg->bits_shift) / 64;
	b = calloc(1, sizeof(*b) + 2 * nr_words * sizeof(uint64_t));
	if (!b)
		return -ENOMEM;
	b->cfg = *cfg;
	b->bit_mask = (1ULL << cfg->bits_shift) - 1;
	b->nr_words = nr_words;
	*out = b;
	return 0;
}

void vmm_bloom_free(struct vmm_bloom *b)
{
	free(b);
}

static uint64_t *half_bits(const struct vmm_bloom *b, uint64_t seq)
{
	return (uint64_t *)b->bits + (seq & 1) * b->nr_words;
}

static bool holds_seq(const struct vmm_bloom *b, uint64_t seq)
{
	const struct bloom_half *f = &b->f[seq & 1];

	return f->holds && f->seq == seq;
}

/* murmur3's 64-bit finalizer: every input bit flips each output bit with p ~ 1/2, which
 * the double-hashing keys need; table addresses differ only in bits 12 and up. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Key i of an item: bit index (h1 + i * h2) mod 2^bits_shift; h2 is odd so the keys of
 * one item are distinct whenever nr_hashes <= 2^bits_shift. */
static uint64_t bloom_key(const struct vmm_bloom *b, uint64_t h, unsigned i)
{
	uint64_t h1 = h & 0xffffffffULL, h2 = (h >> 32) | 1;

	return (h1 + i * h2) & b->bit_mask;
}

void vmm_bloom_reset(struct vmm_bloom *b, uint64_t seq)
{
	struct bloom_half *f = &b->f[seq & 1];

	memset(half_bits(b, seq), 0, b->nr_words * sizeof(uint64_t));
	f->seq = seq;
	f->nr_added = 0;
	f->holds = true;
}

bool vmm_bloom_filtering(const struct vmm_bloom *b, uint64_t seq)
{
	if (seq % b->cfg.full_walk_every == 0)
		return false; /* a full walk is due */
	return holds_seq(b, seq) && b->f[seq & 1].nr_added > 0;
}

bool vmm_bloom_test(const struct vmm_bloom *b, uint64_t seq, uint64_t table_pa)
{
	const uint64_t *bits = half_bits(b, seq);
	uint64_t h = mix64(table_pa);

	if (!holds_seq(b, seq))
		return false;
	for (unsigned i = 0; i < b->cfg.nr_hashes; i++) {
		uint64_t k = bloom_key(b, h, i);

		if (!(bits[k / 64] & (1ULL << (k % 64))))
			return false;
	}
	return true;
}

void vmm_bloom_add(struct vmm_bloom *b, uint64_t seq, uint64_t table_pa)
{
	uint64_t *bits = half_bits(b, seq);
	uint64_t h = mix64(table_pa);

	if (!holds_seq(b, seq))
		vmm_bloom_reset(b, seq); /* still holds seq - 2 (or nothing): empty it first */
	for (unsigned i = 0; i < b->cfg.nr_hashes; i++) {
		uint64_t k = bloom_key(b, h, i);

		bits[k / 64] |= 1ULL << (k % 64);
	}
	b->f[seq & 1].nr_added++;
}

bool vmm_bloom_admit(const struct vmm_bloom *b, uint64_t young, uint64_t entries)
{
	/* Linux's suitable_to_scan(): at least one young entry per cache line on average. */
	return young > 0 && young * b->cfg.admit_young_x >= entries;
}
