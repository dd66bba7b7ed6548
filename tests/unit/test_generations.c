// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_generations.c - Part 4 of libvmm: generations, the aging hand, hints (vmm/guest.c,
 * vmm/generations.c, vmm/age.c).
 *
 * The centre piece is a random run checked against a shadow model: the model keeps every
 * page's round (the seq of the generation it was put in), tier and eviction seq in plain
 * 64-bit fields (no labels, no sweep, no merges: a page is in the youngest live generation
 * at or after its round, which is what merging a generation into its younger neighbour
 * means), applies the MGLRU rules as written in docs/design.md, and after every operation
 * the library's per-generation counts must equal the model's, vmm_check_invariants must
 * pass, and no page may read less than 1/2.2 of its idle time outside the oldest
 * generation.  That catches a wrong merge, a label read as the wrong generation, a label
 * freed while a byte still carries it, or a count that drifts.  The layout's rule itself is
 * checked on its own (test_layout_rule, test_reach_table).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vmm.h"
/* White-box: the corruption test below reaches into the page state on purpose. */
#include "../../vmm/guest_priv.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

/* xorshift64*: deterministic, seeded per test. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static struct vmm_guest *guest(const struct vmm_range *ram, size_t n, unsigned nr_gens,
			       unsigned nr_tiers)
{
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	vmm_guest_config_default(&cfg);
	cfg.ram = ram;
	cfg.nr_ram = n;
	cfg.nr_gens = nr_gens;
	cfg.nr_tiers = nr_tiers;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_non_null(g);
	return g;
}

static void test_config_and_layout(void **state)
{
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_range bad[2] = {{0, 4 * MiB}, {2 * MiB, 8 * MiB}};
	struct vmm_range ram[2] = {{0, 1 * GiB}, {2 * GiB, 3 * GiB}};

	(void)state;
	vmm_guest_config_default(&cfg);
	assert_int_equal(cfg.nr_gens, VMM_DEFAULT_NR_GENS);
	cfg.ram = bad;
	cfg.nr_ram = 2;
	assert_int_equal(vmm_guest_new(&cfg, &g), -EINVAL); /* overlapping */
	bad[1].start = 4 * MiB + 1;
	assert_int_equal(vmm_guest_new(&cfg, &g), -EINVAL); /* unaligned */
	cfg.ram = ram;
	cfg.nr_gens = VMM_MAX_NR_GENS + 1;
	assert_int_equal(vmm_guest_new(&cfg, &g), -EINVAL);
	cfg.nr_gens = 1;
	assert_int_equal(vmm_guest_new(&cfg, &g), -EINVAL);
	cfg.nr_gens = VMM_MAX_NR_GENS;
	cfg.nr_tiers = 0;
	assert_int_equal(vmm_guest_new(&cfg, &g), -EINVAL);
	assert_null(g);

	g = guest(ram, 2, VMM_DEFAULT_NR_GENS, VMM_MAX_NR_TIERS);
	struct vmm_guest_stats st;
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.ram_pages, 2 * GiB / VMM_PAGE_SIZE);
	assert_int_equal(st.resident_pages, st.ram_pages);
	assert_int_equal(st.nr_gens, 1);
	assert_int_equal(st.gen[0].pages, st.ram_pages);
	/* The goal: <= 1.5 bytes of libvmm state per guest page, holes not counted as RAM
	 * but everything allocated counted (the 1 GiB hole costs nothing). */
	assert_true((double)st.metadata_bytes / (double)st.ram_pages <= 1.5);
	assert_true(st.metadata_bytes >= st.ram_pages); /* one byte a page at least */
	assert_int_equal(vmm_check_invariants(g), 0);

	/* Spans in the hole, or running into it, are refused without a change. */
	assert_int_equal(vmm_mark_young(g, 1 * GiB, 1, false), -ERANGE);
	assert_int_equal(vmm_hint_access(g, 1 * GiB - VMM_PAGE_SIZE, 2), -ERANGE);
	assert_int_equal(vmm_mark_young(g, 4096 + 1, 1, false), -EINVAL);
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	assert_int_equal(vmm_age_begin(g, 999), -EINVAL); /* time ran backwards */
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 0); /* nothing moved */
	vmm_guest_free(g);
}

/* The rules, one by one, on a small guest. */
static void test_rules(void **state)
{
	struct vmm_range ram = {0, 4 * MiB};
	struct vmm_guest *g = guest(&ram, 1, 4, 4);
	struct vmm_guest_stats st;

	(void)state;
	assert_int_equal(vmm_age_begin(g, 1000), 0); /* seq 1 */
	assert_int_equal(vmm_mark_young(g, 0, 10, false), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.max_seq, 1);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 10);
	assert_int_equal(st.gen[st.nr_gens - 1].birth_ms, 1000);

	assert_int_equal(vmm_age_begin(g, 2000), 0); /* seq 2 */
	assert_int_equal(vmm_age_begin(g, 3000), 0); /* seq 3 */
	/* A hint moves a page up ONE generation: 10 pages in seq 1 -> 5 of them to seq 2. */
	assert_int_equal(vmm_hint_access(g, 0, 5), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[1].seq, 1);
	assert_int_equal(st.gen[1].pages, 5);
	assert_int_equal(st.gen[2].pages, 5);
	/* Never past the youngest: three more hints take them to seq 3 and keep them there. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(vmm_hint_access(g, 0, 5), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[3].seq, 3);
	assert_int_equal(st.gen[3].pages, 5);
	/* Cold hint: to the oldest generation. */
	assert_int_equal(vmm_hint_cold(g, 0, 2), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[0].pages, 1024 - 10 + 2);
	assert_int_equal(vmm_check_invariants(g), 0);

	/* Fourth round with nr_gens 4, all in use: seq 2 is empty (its pages went on to seq 3)
	 * and goes, which loses nothing (rule 1). */
	assert_int_equal(vmm_age_begin(g, 4000), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.nr_gens, 4);
	assert_int_equal(st.gen[0].seq, 0);
	assert_int_equal(st.gen[1].seq, 1);
	assert_int_equal(st.gen[2].seq, 3);
	assert_int_equal(st.gen[3].seq, 4);
	/* Fifth: none empty but the youngest.  Seq 1 into seq 3 spans idle ages 2 s..4 s (seq 0
	 * and 1 were born at 1000), a factor 2 <= 2.2; seq 3 into seq 4 spans 1 s..4 s: too
	 * wide.  So seq 1's 5 pages join seq 3 (rule 2). */
	assert_int_equal(vmm_age_begin(g, 5000), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.min_seq, 0);
	assert_int_equal(st.max_seq, 5);
	assert_int_equal(st.gen[0].pages, 1024 - 10 + 2);
	assert_int_equal(st.gen[1].seq, 3);
	assert_int_equal(st.gen[1].pages, 5 + 3);
	assert_int_equal(st.gen[1].birth_ms, 3000); /* the younger one's birth */
	assert_int_equal(st.gen[2].seq, 4);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

/* gens_widen off: the old rule, the oldest always folds into the next, so the generations
 * are the last nr_gens rounds and the oldest holds everything before. */
static void test_rules_fold_oldest(void **state)
{
	struct vmm_range ram = {0, 4 * MiB};
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_guest_stats st;

	(void)state;
	vmm_guest_config_default(&cfg);
	assert_true(cfg.gens_widen);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.gens_widen = false;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	for (uint64_t r = 1; r <= 10; r++) {
		assert_int_equal(vmm_age_begin(g, r * 1000), 0);
		assert_int_equal(vmm_mark_young(g, r * VMM_PAGE_SIZE, 1, false), 0);
	}
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.nr_gens, 4);
	assert_int_equal(st.min_seq, 7);
	assert_int_equal(st.max_seq, 10);
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(st.gen[k].birth_ms, (7 + k) * 1000);
	assert_int_equal(st.gen[0].pages, 1024 - 3); /* seq 0..7 folded: all but 8, 9, 10 */
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

/* The rule on its own (vmm_gens_pick_merge): an empty generation goes first; else the pair
 * whose merged generation is narrowest in idle ages, within 2.2; else the oldest folds. */
static void test_layout_rule(void **state)
{
	/* births in ms of five generations; ages at now = 100 */
	uint64_t b[5] = {0, 50, 80, 90, 95}, pages[5] = {9, 9, 9, 9, 9};

	(void)state;
	/* Merging i into i + 1 spans ages (100 - b[i + 1]) .. (100 - b[i - 1]):
	 * i = 1: 20..100 (5x), i = 2: 10..50 (5x), i = 3: 5..20 (4x): none within 2.2. */
	assert_int_equal(vmm_gens_pick_merge(b, pages, 5, 100), 0);
	pages[2] = 0; /* an empty one goes whatever its span */
	assert_int_equal(vmm_gens_pick_merge(b, pages, 5, 100), 2);
	/* i = 1: 40..100 (2.5x), i = 2: 30..60 (2x), i = 3: 10..40 (4x) */
	uint64_t c[5] = {0, 40, 60, 70, 90};
	assert_int_equal(vmm_gens_pick_merge(c, NULL, 5, 100), 2);
	/* i = 1: 80..100 (1.25x), i = 2: 60..90 (1.5x), i = 3: 50..80 (1.6x): the narrowest */
	uint64_t e[5] = {0, 10, 20, 40, 50};
	assert_int_equal(vmm_gens_pick_merge(e, NULL, 5, 100), 1);
	/* Two generations: nothing to choose, the oldest folds. */
	assert_int_equal(vmm_gens_pick_merge(e, NULL, 2, 100), 0);
	/* The previous round born now (two rounds at once): nothing merges into it. */
	uint64_t f[4] = {0, 50, 70, 100}; /* i = 1: 30..100 (3.3x), i = 2: into age 0 */
	assert_int_equal(vmm_gens_pick_merge(f, NULL, 4, 100), 0);
}

/* The least age of the oldest generation once it first folds, for regular rounds, equals
 * the table behind vmm_gens_reach_ms: the rule run again for 200,000 rounds. */
static void test_reach_table(void **state)
{
	(void)state;
	for (unsigned n = VMM_MIN_NR_GENS; n <= VMM_MAX_NR_GENS; n++) {
		uint64_t birth[VMM_MAX_NR_GENS + 1] = {0};
		unsigned live = 1;
		uint64_t least = UINT64_MAX;
		bool folded = false;
		for (uint64_t now = 1; now <= 200000; now++) {
			if (live >= n) {
				unsigned i = vmm_gens_pick_merge(birth, NULL, live, now);
				folded |= i == 0;
				memmove(&birth[i], &birth[i + 1], (live - i - 1) * sizeof(*birth));
				live--;
			}
			birth[live++] = now;
			if (folded && now - birth[0] < least)
				least = now - birth[0];
		}
		assert_int_equal(vmm_gens_reach_ms(n, 1), least);
	}
	/* 16 generations at memtided's 5 s: more than an hour. */
	assert_true(vmm_gens_reach_ms(VMM_MAX_NR_GENS, 5000) >= 3600 * 1000);
}

/* ---- the shadow model ----------------------------------------------------------------- */

struct mpage {
	bool evicted;
	uint64_t seq; /* resident: the round it was put in (its generation may have merged on) */
	unsigned tier;
	uint64_t evseq; /* evicted: max_seq at eviction */
	bool seen;      /* seq is the round it was last seen used (not a hint's move) */
};

struct model {
	struct vmm_guest *g;
	const struct vmm_range *ram;
	size_t nr_ram;
	uint64_t npages;
	struct mpage *p;
	unsigned nr_tiers;
	uint64_t birth_of_round[4096]; /* each round's start, for the idle ages */
};

static struct mpage *mpage_of(struct model *m, uint64_t gpa)
{
	uint64_t base = 0;

	for (size_t i = 0; i < m->nr_ram; i++) {
		if (gpa >= m->ram[i].start && gpa < m->ram[i].end)
			return &m->p[base + ((gpa - m->ram[i].start) >> VMM_PAGE_SHIFT)];
		base += (m->ram[i].end - m->ram[i].start) >> VMM_PAGE_SHIFT;
	}
	return NULL;
}

/* The generation a page is in: the oldest live one at or after its round. */
static uint64_t eff_seq(const struct mpage *p, const struct vmm_guest_stats *st)
{
	for (unsigned k = 0; k < st->nr_gens; k++)
		if (st->gen[k].seq >= p->seq)
			return st->gen[k].seq;
	fail_msg("page of round %llu past the youngest generation", (unsigned long long)p->seq);
	return 0;
}

static unsigned gen_index(const struct vmm_guest_stats *st, uint64_t seq)
{
	for (unsigned k = 0; k < st->nr_gens; k++)
		if (st->gen[k].seq == seq)
			return k;
	fail_msg("no generation %llu", (unsigned long long)seq);
	return 0;
}

/* The library's counts per generation equal the model's, and its own check passes. */
static void model_check(struct model *m)
{
	struct vmm_guest_stats st;
	uint64_t count[VMM_MAX_NR_GENS] = {0}, evicted = 0;

	assert_int_equal(vmm_check_invariants(m->g), 0);
	vmm_guest_get_stats(m->g, &st);
	for (uint64_t i = 0; i < m->npages; i++) {
		if (m->p[i].evicted) {
			evicted++;
			continue;
		}
		unsigned k = gen_index(&st, eff_seq(&m->p[i], &st));
		count[k]++;
		/* Outside the oldest generation a page reads at least 1/2.2 of its idle time
		 * (ages at the youngest's birth, the last round's start). */
		if (k > 0 && m->p[i].seen && m->p[i].seq < 4096) {
			uint64_t now = st.gen[st.nr_gens - 1].birth_ms;
			uint64_t idle = now - m->birth_of_round[m->p[i].seq];
			uint64_t reads = now - st.gen[k].birth_ms;
			assert_true(idle * 5 <= reads * 11);
		}
	}
	assert_int_equal(st.evicted_pages, evicted);
	for (unsigned k = 0; k < st.nr_gens; k++)
		assert_int_equal(st.gen[k].pages, count[k]);
}

/* A random span of RAM: within one range, 1..600 pages. */
static void rand_span(struct model *m, uint64_t *s, uint64_t *gpa, uint64_t *n)
{
	const struct vmm_range *r = &m->ram[rnd(s) % m->nr_ram];
	uint64_t pages = (r->end - r->start) >> VMM_PAGE_SHIFT;
	uint64_t first = rnd(s) % pages;
	uint64_t len = 1 + rnd(s) % 600;

	if (len > pages - first)
		len = pages - first;
	*gpa = r->start + (first << VMM_PAGE_SHIFT);
	*n = len;
}

static void op_evict(struct model *m, uint64_t *s, uint64_t now_ms)
{
	struct vmm_run runs[64] = {{0}};
	struct vmm_evict_req req = {.max_pages = 1 + rnd(s) % 3000,
				    .min_age_ms = rnd(s) % 4000,
				    .now_ms = now_ms,
				    .runs = runs,
				    .max_runs = 1 + rnd(s) % 64};
	struct vmm_evict_result res;
	struct vmm_guest_stats st;

	vmm_guest_get_stats(m->g, &st);
	assert_int_equal(vmm_evict(m->g, &req, &res), 0);
	assert_true(res.evicted_pages <= req.max_pages);
	assert_true(res.nr_runs <= req.max_runs);
	assert_int_equal(res.protected_pages, 0); /* nr_tiers 1: nothing to protect */
	uint64_t sum = 0, max_evicted_seq = 0;
	for (size_t i = 0; i < res.nr_runs; i++) {
		for (uint64_t k = 0; k < runs[i].npages; k++) {
			struct mpage *p = mpage_of(m, runs[i].gpa + (k << VMM_PAGE_SHIFT));
			assert_non_null(p);
			assert_false(p->evicted);
			uint64_t sq = eff_seq(p, &st);
			assert_true(sq < st.max_seq); /* never the youngest */
			if (sq > max_evicted_seq)
				max_evicted_seq = sq;
			p->evicted = true;
			p->evseq = st.max_seq;
		}
		sum += runs[i].npages;
	}
	assert_int_equal(sum, res.evicted_pages);
	/* Oldest first: nothing left resident is older than what was taken. */
	if (res.evicted_pages)
		for (uint64_t i = 0; i < m->npages; i++)
			if (!m->p[i].evicted)
				assert_true(eff_seq(&m->p[i], &st) >= max_evicted_seq);
}

static void op_refault(struct model *m, uint64_t *s)
{
	uint64_t gpa, n;
	struct vmm_refault rf;
	struct vmm_guest_stats st;

	rand_span(m, s, &gpa, &n);
	vmm_guest_get_stats(m->g, &st);
	struct mpage *p = mpage_of(m, gpa);
	assert_int_equal(vmm_refault(m->g, gpa, &rf), 0);
	assert_int_equal(rf.was_evicted, p->evicted);
	if (!p->evicted)
		return;
	uint64_t d = st.max_seq - p->evseq;
	assert_int_equal(rf.distance_gens, d < VMM_MAX_NR_GENS - 1 ? d : VMM_MAX_NR_GENS - 1);
	assert_int_equal(rf.tier, p->tier);
	*p = (struct mpage){.seq = st.max_seq, .tier = p->tier, .seen = true};
}

/* One random operation, applied to the library and the model alike. */
static void random_op(struct model *m, uint64_t *s, uint64_t *now_ms)
{
	struct vmm_guest_stats st;
	uint64_t gpa, n;
	unsigned op = rnd(s) % 100;

	vmm_guest_get_stats(m->g, &st);
	rand_span(m, s, &gpa, &n);
	if (op < 10) {
		*now_ms += 1 + rnd(s) % 2000;
		assert_int_equal(vmm_age_begin(m->g, *now_ms), 0);
		vmm_guest_get_stats(m->g, &st);
		if (st.max_seq < 4096)
			m->birth_of_round[st.max_seq] = *now_ms;
	} else if (op < 40) {
		assert_int_equal(vmm_mark_young(m->g, gpa, n, rnd(s) & 1), 0);
		for (uint64_t k = 0; k < n; k++) {
			/* seen young, resident or evicted (a refault): the youngest generation */
			struct mpage *p = mpage_of(m, gpa + (k << VMM_PAGE_SHIFT));
			*p = (struct mpage){.seq = st.max_seq, .tier = p->tier, .seen = true};
		}
	} else if (op < 55) {
		assert_int_equal(vmm_hint_access(m->g, gpa, n), 0);
		for (uint64_t k = 0; k < n; k++) {
			struct mpage *p = mpage_of(m, gpa + (k << VMM_PAGE_SHIFT));
			if (p->evicted)
				continue;
			unsigned gi = gen_index(&st, eff_seq(p, &st));
			p->seq = st.gen[gi + 1 < st.nr_gens ? gi + 1 : gi].seq; /* up one */
			p->seen = false;
			if (p->tier + 1 < m->nr_tiers)
				p->tier++;
		}
	} else if (op < 62) {
		assert_int_equal(vmm_hint_cold(m->g, gpa, n), 0);
		for (uint64_t k = 0; k < n; k++) {
			struct mpage *p = mpage_of(m, gpa + (k << VMM_PAGE_SHIFT));
			if (!p->evicted)
				*p = (struct mpage){.seq = st.min_seq};
		}
	} else if (op < 80) {
		op_evict(m, s, *now_ms);
	} else if (op < 92) {
		op_refault(m, s);
	} else if (op < 96) {
		assert_int_equal(vmm_restore(m->g, gpa, n), 0);
		for (uint64_t k = 0; k < n; k++) {
			struct mpage *p = mpage_of(m, gpa + (k << VMM_PAGE_SHIFT));
			if (p->evicted)
				*p = (struct mpage){.seq = st.max_seq, .seen = true};
		}
	} else {
		assert_int_equal(vmm_give_back(m->g, gpa, n), 0);
		for (uint64_t k = 0; k < n; k++) {
			struct mpage *p = mpage_of(m, gpa + (k << VMM_PAGE_SHIFT));
			if (p->evicted)
				*p = (struct mpage){.seq = st.min_seq};
		}
	}
}

static void run_model(unsigned nr_gens, unsigned nr_tiers, uint64_t seed, int ops)
{
	/* Two ranges, the second not 2 MiB aligned at either end (partial pieces). */
	static const struct vmm_range ram[2] = {{0, 6 * MiB},
						{8 * MiB + 12 * 4096, 11 * MiB + 20 * 4096}};
	struct model m = {.ram = ram, .nr_ram = 2, .nr_tiers = nr_tiers};
	uint64_t s = seed, now_ms = 0;

	m.g = guest(ram, 2, nr_gens, nr_tiers);
	m.birth_of_round[0] = 0; /* the first round sets generation 0's birth: checked below */
	for (size_t i = 0; i < 2; i++)
		m.npages += (ram[i].end - ram[i].start) >> VMM_PAGE_SHIFT;
	m.p = calloc(m.npages, sizeof(*m.p));
	assert_non_null(m.p);
	for (int i = 0; i < ops; i++) {
		random_op(&m, &s, &now_ms);
		model_check(&m);
	}
	free(m.p);
	vmm_guest_free(m.g);
}

static void test_random_against_model(void **state)
{
	(void)state;
	/* nr_gens 2 (the least), 4 (default), 16 (the most: merges in the middle, labels
	 * retired and reused); long runs so that merges and label reuse happen many times. */
	run_model(2, 1, 0x1234567, 1500);
	run_model(4, 1, 0xfeedbeef, 1500);
	run_model(16, 1, 0xabcdef01, 1500);
	run_model(16, 1, 0x5eed5eed, 6000);
	run_model(8, 1, 0x0badcafe, 6000);
}

/* With tiers (tier protection may act), only the library's own invariants are checked. */
static void test_random_invariants_with_tiers(void **state)
{
	struct vmm_range ram = {0, 16 * MiB};
	uint64_t s = 42, now_ms = 0;

	(void)state;
	for (unsigned nr_gens = VMM_MIN_NR_GENS; nr_gens <= VMM_MAX_NR_GENS; nr_gens += 7) {
		struct vmm_guest *g = guest(&ram, 1, nr_gens, 4);
		for (int i = 0; i < 3000; i++) {
			uint64_t gpa = (rnd(&s) % 4096) << VMM_PAGE_SHIFT;
			uint64_t n = 1 + rnd(&s) % (4096 - (gpa >> VMM_PAGE_SHIFT));
			struct vmm_run runs[32] = {{0}};
			struct vmm_evict_req req = {.max_pages = rnd(&s) % 2048,
						    .now_ms = now_ms,
						    .runs = runs,
						    .max_runs = 32};
			struct vmm_evict_result res;
			struct vmm_refault rf;
			switch (rnd(&s) % 6) {
			case 0:
				now_ms += 1000;
				assert_int_equal(vmm_age_begin(g, now_ms), 0);
				break;
			case 1:
				assert_int_equal(vmm_mark_young(g, gpa, n, false), 0);
				break;
			case 2:
				assert_int_equal(vmm_hint_access(g, gpa, n), 0);
				break;
			case 3:
				assert_int_equal(vmm_evict(g, &req, &res), 0);
				break;
			case 4:
				assert_int_equal(vmm_refault(g, gpa, &rf), 0);
				break;
			default:
				assert_int_equal(vmm_restore(g, gpa, n), 0);
				break;
			}
			assert_int_equal(vmm_check_invariants(g), 0);
		}
		vmm_guest_free(g);
	}
}

/* The aging walk over simulated EPT tables: young -> youngest; dirty but not young ->
 * nothing (Linux's rule, the default) or, with dirty_ages_up, up one generation. */
static void age_walk_case(bool dirty_ages_up)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_EPT, .guest_bytes = 64 * MiB, .seed = 7};
	struct vmm_simhw *hw = NULL;
	const struct vmm_range *ram;
	struct vmm_guest_config cfg;
	struct vmm_guest_stats st;
	struct vmm_walk_stats ws;
	struct vmm_guest *g = NULL;

	assert_int_equal(vmm_simhw_new(&hc, &hw), 0);
	vmm_guest_config_default(&cfg);
	assert_false(cfg.dirty_ages_up); /* the default follows Linux */
	cfg.nr_ram = vmm_simhw_ram(hw, &ram);
	cfg.ram = ram;
	cfg.dirty_ages_up = dirty_ages_up;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	const struct vmm_pt *pt = vmm_simhw_pt(hw);

	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(vmm_simhw_access(hw, ram[0].start + i * 3 * VMM_PAGE_SIZE, i & 1),
				 0);
	assert_int_equal(vmm_age_walk(g, pt, 1000, &ws), 0);
	assert_int_equal(ws.young_pages, 100);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 100);
	assert_int_equal(vmm_check_invariants(g), 0);

	/* Nothing touched: the next round's youngest generation stays empty. */
	assert_int_equal(vmm_age_walk(g, pt, 2000, &ws), 0);
	assert_int_equal(ws.young_pages, 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 0);
	assert_int_equal(st.gen[st.nr_gens - 2].pages, 100);

	/* A write whose accessed bit look-around already took: dirty, not young.  With the
	 * rule the page moves up one generation (from seq 0 to seq 1), never to the youngest
	 * (seq 3); without it, it stays where it was (seq 0). */
	uint64_t gpa = ram[0].start + 1 * VMM_PAGE_SIZE; /* untouched so far: seq 0 */
	assert_int_equal(vmm_simhw_access(hw, gpa, true), 0);
	assert_true(vmm_lookaround(pt, gpa, 0, NULL, NULL) == 1);
	assert_int_equal(vmm_age_walk(g, pt, 3000, &ws), 0);
	assert_int_equal(ws.young_pages, 0);
	assert_int_equal(ws.dirty_pages, 1);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.min_seq, 0);
	assert_int_equal(st.max_seq, 3);
	assert_int_equal(st.gen[1].pages, dirty_ages_up ? 101 : 100); /* seq 1: round 1's */
	assert_int_equal(st.gen[3].pages, 0);                         /* seq 3: nothing young */
	/* The walk cleaned it either way: the next round does not see it again. */
	assert_int_equal(vmm_age_walk(g, pt, 4000, &ws), 0);
	assert_int_equal(ws.dirty_pages, 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
	vmm_simhw_free(hw);
}

static void test_age_walk(void **state)
{
	(void)state;
	age_walk_case(false);
	age_walk_case(true);
}

/* Holes and huge leaves: a young 2 MiB leaf makes 512 pages young, and every young page
 * the walker counts lands in the youngest generation, whatever range it is in. */
static void test_age_walk_holes_and_huge(void **state)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_S2,
				      .guest_bytes = 256 * MiB,
				      .nr_holes = 3,
				      .hole_bytes = 32 * MiB,
				      .huge_2m_share = 0.5,
				      .seed = 11};
	struct vmm_simhw *hw = NULL;
	const struct vmm_range *ram;
	struct vmm_guest_stats st;
	struct vmm_walk_stats ws;
	uint64_t s = 99;

	(void)state;
	assert_int_equal(vmm_simhw_new(&hc, &hw), 0);
	size_t nr = vmm_simhw_ram(hw, &ram);
	assert_true(nr > 1);
	struct vmm_guest *g = guest(ram, nr, 8, 4);
	struct vmm_simhw_counts hc_counts;
	vmm_simhw_get_counts(hw, &hc_counts);
	assert_true(hc_counts.leaves_2m > 0);
	for (int round = 1; round <= 12; round++) {
		for (int i = 0; i < 200; i++) {
			const struct vmm_range *r = &ram[rnd(&s) % nr];
			uint64_t off =
			    (rnd(&s) % ((r->end - r->start) / VMM_PAGE_SIZE)) * VMM_PAGE_SIZE;
			assert_true(vmm_simhw_access(hw, r->start + off, rnd(&s) & 1) >= 0);
		}
		assert_int_equal(vmm_age_walk(g, vmm_simhw_pt(hw), round * 1000ULL, &ws), 0);
		assert_true(ws.young_pages > 0);
		vmm_guest_get_stats(g, &st);
		assert_int_equal(st.gen[st.nr_gens - 1].pages, ws.young_pages);
		assert_int_equal(st.ram_pages, hc_counts.mapped_pages);
		assert_int_equal(vmm_check_invariants(g), 0);
	}
	vmm_guest_free(g);
	vmm_simhw_free(hw);
}

/* The checks can fail: a corrupted page byte or count is caught, and mutating functions
 * refuse to act on corrupt counts. */
static void test_invariants_catch_corruption(void **state)
{
	struct vmm_range ram = {0, 4 * MiB};
	struct vmm_guest *g = guest(&ram, 1, 4, 4);
	struct vmm_run runs[4] = {{0}};
	struct vmm_evict_result res;
	struct vmm_evict_req req = {.max_pages = 1, .now_ms = 1000, .runs = runs, .max_runs = 4};

	(void)state;
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 10, false), 0);
	assert_int_equal(vmm_check_invariants(g), 0);

	uint8_t saved = g->pages[3]; /* seq 1 -> relabel as seq 0 behind the counts' back */
	g->pages[3] = pb_resident(0, 0);
	assert_int_equal(vmm_check_invariants(g), -EUCLEAN);
	g->pages[3] = saved;
	g->pages[700] = pb_resident(0, 3);
	assert_int_equal(vmm_check_invariants(g), 0); /* a tier change alone is consistent */
	g->chunks[0].cnt[1]++;                        /* a per-piece count off by one */
	assert_int_equal(vmm_check_invariants(g), -EUCLEAN);
	g->chunks[0].cnt[1]--;
	g->evicted_pages++; /* the cheap check: mutators refuse */
	assert_int_equal(vmm_check_invariants(g), -EUCLEAN);
	assert_int_equal(vmm_age_begin(g, 2000), -EUCLEAN);
	assert_int_equal(vmm_mark_young(g, 0, 1, false), -EUCLEAN);
	assert_int_equal(vmm_hint_access(g, 0, 1), -EUCLEAN);
	assert_int_equal(vmm_evict(g, &req, &res), -EUCLEAN);
	g->evicted_pages--;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 1);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_and_layout),
	    cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_rules_fold_oldest),
	    cmocka_unit_test(test_layout_rule),
	    cmocka_unit_test(test_reach_table),
	    cmocka_unit_test(test_random_against_model),
	    cmocka_unit_test(test_random_invariants_with_tiers),
	    cmocka_unit_test(test_age_walk),
	    cmocka_unit_test(test_age_walk_holes_and_huge),
	    cmocka_unit_test(test_invariants_catch_corruption),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
