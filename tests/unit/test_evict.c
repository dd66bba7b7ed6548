// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_evict.c - the eviction hand (vmm/evict.c).
 *
 * Oldest generation first; the youngest never; min_age_ms respected; whole 2 MiB-aligned
 * pieces taken before scattered pages; runs ascending and coalesced within a generation;
 * the caller's limits (max_pages, max_runs) kept; look-around over simulated tables turns
 * a page found young into a promotion instead of an eviction, and (Linux's rule, on by
 * default) a look-around window dense with young entries puts its table into the bloom
 * filter the next aging walk reads, but never into an empty filter.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE

static struct vmm_guest *guest(const struct vmm_range *ram, size_t n)
{
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	vmm_guest_config_default(&cfg);
	cfg.ram = ram;
	cfg.nr_ram = n;
	cfg.nr_gens = 8;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	return g;
}

static uint64_t runs_pages(const struct vmm_run *runs, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += runs[i].npages;
	return sum;
}

static bool in_runs(const struct vmm_run *runs, size_t n, uint64_t gpa)
{
	for (size_t i = 0; i < n; i++)
		if (gpa >= runs[i].gpa && gpa < runs[i].gpa + runs[i].npages * PAGE)
			return true;
	return false;
}

static void test_oldest_first(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest *g = guest(&ram, 1);
	struct vmm_run runs[256] = {{0}};
	struct vmm_evict_result res;
	struct vmm_guest_stats st;

	(void)state;
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 512, false), 0); /* seq 1: [0, 2 MiB) */
	assert_int_equal(vmm_age_begin(g, 2000), 0);
	assert_int_equal(vmm_mark_young(g, 4 * MiB, 512, false), 0); /* seq 2 */
	assert_int_equal(vmm_age_begin(g, 3000), 0);
	assert_int_equal(vmm_mark_young(g, 8 * MiB, 52, false), 0); /* seq 3 */
	uint64_t old = 4096 - 512 - 512 - 52;                       /* seq 0 */

	struct vmm_evict_req req = {
	    .max_pages = old + 100, .now_ms = 3000, .runs = runs, .max_runs = 256};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, old + 100);
	assert_int_equal(runs_pages(runs, res.nr_runs), old + 100);
	/* Every seq-0 page went, and the other 100 came from seq 1, none from seq 2 or 3. */
	uint64_t from_seq1 = 0;
	for (uint64_t pfn = 0; pfn < 4096; pfn++) {
		uint64_t gpa = pfn * PAGE;
		bool seq1 = gpa < 2 * MiB;
		bool younger =
		    (gpa >= 4 * MiB && gpa < 6 * MiB) || (gpa >= 8 * MiB && pfn < 2048 + 52);
		if (younger)
			assert_false(in_runs(runs, res.nr_runs, gpa));
		else if (seq1)
			from_seq1 += in_runs(runs, res.nr_runs, gpa);
		else
			assert_true(in_runs(runs, res.nr_runs, gpa));
	}
	assert_int_equal(from_seq1, 100);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.min_seq, 1); /* seq 0 emptied: min_seq advanced */
	assert_int_equal(st.evicted_pages, old + 100);
	assert_int_equal(st.evicted_total, old + 100);

	/* The youngest generation is never taken, whatever the limits. */
	req.max_pages = 100000;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 512 - 100 + 512);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.min_seq, st.max_seq);
	assert_int_equal(st.resident_pages, 52);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

static void test_min_age(void **state)
{
	struct vmm_range ram = {0, 8 * MiB};
	struct vmm_guest *g = guest(&ram, 1);
	struct vmm_run runs[16] = {{0}};
	struct vmm_evict_result res;

	(void)state;
	assert_int_equal(vmm_age_begin(g, 5000), 0);  /* seq 1; seq 0 born now too */
	assert_int_equal(vmm_age_begin(g, 10000), 0); /* seq 2 */
	assert_int_equal(vmm_mark_young(g, 0, 1024, false), 0);
	assert_int_equal(vmm_age_begin(g, 20000), 0); /* seq 3, empty */
	/* At 25 s: seq 0 born at the first round (5 s: 20 s old), seq 2 at 10 s (15 s old). */
	struct vmm_evict_req req = {
	    .max_pages = 5000, .min_age_ms = 20000, .now_ms = 25000, .runs = runs, .max_runs = 16};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 1024); /* seq 0 only */
	assert_int_equal(res.nr_runs, 1);
	assert_int_equal(runs[0].gpa, 4 * MiB);
	assert_int_equal(runs[0].npages, 1024);
	req.min_age_ms = 15000;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 1024); /* now seq 2 too */
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

static void test_2m_runs_first_and_sorted(void **state)
{
	struct vmm_range ram = {0, 8 * MiB}; /* 4 pieces of 2 MiB */
	struct vmm_guest *g = guest(&ram, 1);
	struct vmm_run runs[600] = {{0}};
	struct vmm_evict_result res;

	(void)state;
	/* Old (seq 1): piece 2 (whole) and every 4th page of piece 0; the rest young. */
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 2048, false), 0);
	assert_int_equal(vmm_age_begin(g, 2000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 2048, false), 0); /* all in seq 2 */
	assert_int_equal(vmm_hint_cold(g, 4 * MiB, 512), 0);    /* back to seq 1 */
	for (uint64_t i = 0; i < 512; i += 4)
		assert_int_equal(vmm_hint_cold(g, i * PAGE, 1), 0);
	/* 512 pages wanted: the whole piece, in one run, although lower GPAs are as old. */
	struct vmm_evict_req req = {
	    .max_pages = 512, .now_ms = 2000, .runs = runs, .max_runs = 600};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.nr_runs, 1);
	assert_int_equal(runs[0].gpa, 4 * MiB);
	assert_int_equal(runs[0].npages, 512);
	/* The rest of the generation: 128 single pages, ascending, none adjacent. */
	req.max_pages = 1000;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 128);
	assert_int_equal(res.nr_runs, 128);
	for (size_t i = 1; i < res.nr_runs; i++)
		assert_true(runs[i].gpa > runs[i - 1].gpa + runs[i - 1].npages * PAGE);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

static void test_limits_and_errors(void **state)
{
	struct vmm_range ram = {0, 8 * MiB};
	struct vmm_guest *g = guest(&ram, 1);
	struct vmm_run runs[4] = {{0}};
	struct vmm_evict_result res;

	(void)state;
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	for (uint64_t i = 0; i < 2048; i += 2) /* every other page young: runs of 1 */
		assert_int_equal(vmm_mark_young(g, i * PAGE, 1, false), 0);
	struct vmm_evict_req req = {.max_pages = 1000, .now_ms = 1000, .runs = runs, .max_runs = 4};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.nr_runs, 4);
	assert_int_equal(res.evicted_pages, 4);
	assert_int_equal(runs_pages(runs, 4), 4);
	req.runs = NULL;
	assert_int_equal(vmm_evict(g, &req, &res), -EINVAL);
	assert_int_equal(vmm_evict(NULL, &req, &res), -EINVAL);
	req.runs = runs;
	req.max_pages = 0;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

static void count_cb(void *arg, const struct vmm_young *b, size_t n)
{
	(void)b;
	*(size_t *)arg += n;
}

/* Pages the guest touched after the last aging walk are still old in the generations;
 * with the tables passed in, look-around finds them young and they stay. */
static void test_lookaround(void **state)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_S2, .guest_bytes = 8 * MiB, .seed = 3};
	struct vmm_simhw *hw = NULL;
	const struct vmm_range *ram;
	struct vmm_run runs[64] = {{0}};
	struct vmm_evict_result res;
	struct vmm_guest_stats st;

	(void)state;
	assert_int_equal(vmm_simhw_new(&hc, &hw), 0);
	size_t nr = vmm_simhw_ram(hw, &ram);
	struct vmm_guest *g = guest(ram, nr);
	const struct vmm_pt *pt = vmm_simhw_pt(hw);
	uint64_t base = ram[0].start;

	assert_int_equal(vmm_age_walk(g, pt, 1000, NULL), 0); /* nothing young: all in seq 0 */
	for (uint64_t i = 100; i < 110; i++)
		assert_int_equal(vmm_simhw_access(hw, base + i * PAGE, false), 0);
	struct vmm_evict_req req = {
	    .max_pages = 512, .now_ms = 1000, .runs = runs, .max_runs = 64, .pt = pt};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.young_pages, 10);
	assert_int_equal(res.evicted_pages, 512);
	for (uint64_t i = 100; i < 110; i++)
		assert_false(in_runs(runs, res.nr_runs, base + i * PAGE));
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 10); /* promoted to the youngest */
	/* Their accessed bits were consumed by look-around, not left for the next walk. */
	size_t young = 0;
	assert_true(vmm_lookaround(pt, base + 105 * PAGE, 20, count_cb, &young) == 0);
	assert_int_equal(young, 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
	vmm_simhw_free(hw);
}

/*
 * Table A is touched whole every round (the walk admits it: the filter is never empty);
 * table B holds a run of 16 hot pages, too sparse for the walk's admission (16 * 8 < 512)
 * but dense in a look-around window (16 * 8 >= 64).  Round 2's filtered walk skips B, so
 * B's run keeps its accessed bits and ages; the eviction hand's look-around finds the run
 * young.  With the rule, round 3's walk reads B; without it, it skips B again.
 * touch_a_again false: A idle in round 2, so that walk admits nothing, the filter for
 * round 3 is empty (a full walk), and the look-around must not make it a filter of one.
 */
static unsigned feed_case(bool rule, bool touch_a_again)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_EPT, .guest_bytes = 64 * MiB, .seed = 3};
	struct vmm_simhw *hw = NULL;
	const struct vmm_range *ram;
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_walk_stats ws;
	struct vmm_run runs[256];
	struct vmm_evict_result res;

	assert_int_equal(vmm_simhw_new(&hc, &hw), 0);
	vmm_guest_config_default(&cfg);
	assert_true(cfg.lookaround_feeds_bloom); /* the default follows Linux */
	cfg.nr_ram = vmm_simhw_ram(hw, &ram);
	cfg.ram = ram;
	cfg.nr_gens = 8;
	cfg.lookaround_feeds_bloom = rule;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	const struct vmm_pt *pt = vmm_simhw_pt(hw);
	uint64_t a = ram[0].start + 4 * VMM_SIZE_2M,
		 b = ram[0].start + 9 * VMM_SIZE_2M + 100 * PAGE;

	for (int round = 1; round <= 2; round++) {
		if (round == 1 || touch_a_again)
			for (uint64_t i = 0; i < 512; i++)
				assert_int_equal(vmm_simhw_access(hw, a + i * PAGE, false), 0);
		for (uint64_t i = 0; i < 16; i++)
			assert_int_equal(vmm_simhw_access(hw, b + i * PAGE, true), 0);
		assert_int_equal(vmm_age_walk(g, pt, (uint64_t)round * 1000, &ws), 0);
	}
	/* round 2 read A alone: the filter round 1's walk filled */
	assert_int_equal(ws.tables_visited, 1);
	struct vmm_evict_req req = {
	    .max_pages = 1 << 20, .now_ms = 2500, .runs = runs, .max_runs = 256, .pt = pt};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_true(res.young_pages >= (touch_a_again ? 16 : 0));
	assert_int_equal(vmm_age_walk(g, pt, 3000, &ws), 0);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
	vmm_simhw_free(hw);
	return (unsigned)ws.tables_visited;
}

static void test_lookaround_feeds_bloom(void **state)
{
	(void)state;

	/* the rule: round 3 reads A and B */
	assert_int_equal(feed_case(true, true), 2);
	/* without it: A only */
	assert_int_equal(feed_case(false, true), 1);
	/* an empty filter stays empty: round 3 is a full walk either way */
	assert_int_equal(feed_case(true, false), 32);
	assert_int_equal(feed_case(false, false), 32);
}

/* The generation (seq) a resident page is in, from the stats' per-generation counts: the
 * page is moved alone to a probe and back is not possible, so the test checks counts. */
static uint64_t gen_pages(const struct vmm_guest *g, uint64_t seq)
{
	struct vmm_guest_stats st;

	vmm_guest_get_stats(g, &st);
	for (unsigned i = 0; i < st.nr_gens && i < VMM_MAX_NR_GENS; i++)
		if (st.gen[i].seq == seq && st.gen[i].pages)
			return st.gen[i].pages;
	return 0;
}

/* Host pageout could not page some chosen pages out: they go back to the generation they
 * left (vmm_put_back), not to the youngest as vmm_restore puts a page that came back; a
 * run never spans two generations when the caller asks for each run's seq; a generation
 * that emptied meanwhile hands its pages to the oldest live one after it. */
static void test_put_back(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest *g = guest(&ram, 1);
	struct vmm_run runs[256] = {{0}};
	uint64_t seqs[256];
	struct vmm_evict_result res;
	struct vmm_guest_stats st;

	(void)state;
	assert_int_equal(vmm_age_begin(g, 1000), 0);
	assert_int_equal(vmm_mark_young(g, 14 * MiB, 512, false), 0); /* seq 1: the top 2 MiB */
	assert_int_equal(vmm_age_begin(g, 2000), 0);
	assert_int_equal(vmm_mark_young(g, 4 * MiB, 512, false), 0); /* seq 2 */
	assert_int_equal(vmm_age_begin(g, 3000), 0);
	assert_int_equal(vmm_mark_young(g, 8 * MiB, 52, false), 0); /* seq 3, the youngest */
	uint64_t old = 4096 - 512 - 512 - 52;                       /* seq 0 */

	struct vmm_evict_req req = {
	    .max_pages = 1 << 20, .now_ms = 3000, .runs = runs, .max_runs = 256, .run_seq = seqs};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, old + 1024);
	/* seq 0's last run ends at 14 MiB where seq 1's starts: two runs, each of its own. */
	uint64_t by_seq[3] = {0};
	for (size_t i = 0; i < res.nr_runs; i++) {
		uint64_t a = runs[i].gpa, e = a + runs[i].npages * PAGE;
		uint64_t want = a >= 14 * MiB ? 1 : (a >= 4 * MiB && a < 6 * MiB) ? 2 : 0;
		assert_int_equal(seqs[i], want);
		if (want == 1)
			assert_true(a == 14 * MiB && e == 16 * MiB);
		else
			assert_true(e <= 14 * MiB && (want == 2) == (e <= 6 * MiB && a >= 4 * MiB));
		by_seq[want] += runs[i].npages;
	}
	assert_int_equal(by_seq[0], old);
	assert_int_equal(by_seq[1], 512);
	assert_int_equal(by_seq[2], 512);
	vmm_guest_get_stats(g, &st);
	uint64_t evicted_total = st.evicted_total;
	/* Emptied, seq 0, 1 and 2 stay until the next round: they can take their pages back. */
	assert_int_equal(st.nr_gens, 4);
	assert_int_equal(st.gen[0].seq, 0);
	assert_int_equal(st.gen[0].pages, 0);
	/* Also across a second call of the same round (the hand's next batch, nothing left to
	 * take: the youngest never goes). */
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.nr_gens, 4);
	assert_int_equal(st.gen[0].seq, 0);

	/* seq 1's run, seq 2's first 100 pages and 16 of seq 0 were not paged out: back where
	 * they were. */
	assert_int_equal(vmm_put_back(g, 14 * MiB, 512, 1), 0);
	assert_int_equal(vmm_put_back(g, 4 * MiB, 100, 2), 0);
	assert_int_equal(vmm_put_back(g, 0, 16, 0), 0);
	assert_int_equal(gen_pages(g, 0), 16);
	assert_int_equal(gen_pages(g, 1), 512);
	assert_int_equal(gen_pages(g, 2), 100);
	assert_int_equal(gen_pages(g, 3), 52); /* the youngest did not grow */
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.evicted_total, evicted_total - 512 - 100 - 16);
	assert_int_equal(st.evicted_pages, old + 1024 - 512 - 100 - 16);
	/* A page already resident is left alone. */
	assert_int_equal(vmm_put_back(g, 14 * MiB, 1, 2), 0);
	assert_int_equal(gen_pages(g, 1), 512);
	/* The next round trims what is still empty... none here; evict seq 0's 16 again and
	 * let a round pass: seq 0 is gone, and its pages go to the first live seq after it. */
	req.max_pages = 16;
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 16);
	assert_int_equal(seqs[0], 0);
	assert_int_equal(vmm_age_begin(g, 4000), 0);
	assert_int_equal(gen_pages(g, 0), 0);
	assert_int_equal(vmm_put_back(g, runs[0].gpa, runs[0].npages, 0), 0);
	assert_int_equal(gen_pages(g, 1), 512 + 16);
	assert_int_equal(vmm_check_invariants(g), 0);
	/* vmm_restore, by contrast, makes a page the youngest (it came back used). */
	assert_int_equal(vmm_restore(g, 6 * MiB - PAGE, 1), 0);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 1);
	/* Errors: as the other span calls. */
	assert_int_equal(vmm_put_back(NULL, 0, 1, 0), -EINVAL);
	assert_int_equal(vmm_put_back(g, 16 * MiB, 1, 0), -ERANGE);
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

/* Generations merged since the eviction (all nr_gens in use, a new round makes room): the
 * pages go to the generation their own merged into, the first live seq at or after theirs. */
static void test_put_back_after_merge(void **state)
{
	struct vmm_range ram = {0, 16 * MiB};
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_run runs[64] = {{0}};
	uint64_t seqs[64] = {0}, gpa_of[4] = {0};
	struct vmm_evict_result res;
	struct vmm_guest_stats st;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 4;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	for (unsigned k = 1; k <= 3; k++) {
		assert_int_equal(vmm_age_begin(g, k * 1000), 0);
		assert_int_equal(vmm_mark_young(g, k * 4 * MiB, 512, false), 0);
	}
	/* All of seq 0, 1 and 2 leave (seq 3 is the youngest). */
	struct vmm_evict_req req = {
	    .max_pages = 1 << 20, .now_ms = 3000, .runs = runs, .max_runs = 64, .run_seq = seqs};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 4096 - 512);
	for (size_t i = 0; i < res.nr_runs; i++) {
		assert_true(seqs[i] < 3);
		gpa_of[seqs[i]] = runs[i].gpa;
	}
	/* One page of each comes back at once; the rest stays out.  Rounds go on until one of
	 * seq 1 and 2 is no longer live (merged into a younger one, or trimmed). */
	for (unsigned q = 1; q <= 2; q++)
		assert_int_equal(vmm_put_back(g, gpa_of[q], 1, q), 0);
	uint64_t gone = 0;
	for (unsigned k = 4; k < 40 && !gone; k++) {
		assert_int_equal(vmm_age_begin(g, k * 1000), 0);
		assert_int_equal(vmm_mark_young(g, 0, 1, false), 0);
		vmm_guest_get_stats(g, &st);
		for (uint64_t q = 1; q <= 2 && !gone; q++) {
			bool live = false;
			for (unsigned i = 0; i < st.nr_gens && i < VMM_MAX_NR_GENS; i++)
				live |= st.gen[i].seq == q;
			if (!live)
				gone = q;
		}
	}
	assert_true(gone);
	vmm_guest_get_stats(g, &st);
	uint64_t before[VMM_MAX_NR_GENS], target = UINT64_MAX;
	unsigned nlive = st.nr_gens < VMM_MAX_NR_GENS ? st.nr_gens : VMM_MAX_NR_GENS;
	for (unsigned i = 0; i < nlive; i++) {
		before[i] = st.gen[i].pages;
		if (st.gen[i].seq > gone && st.gen[i].seq < target)
			target = st.gen[i].seq;
	}
	assert_true(target != UINT64_MAX);
	assert_int_equal(vmm_put_back(g, gpa_of[gone] + PAGE, 1, gone), 0);
	vmm_guest_get_stats(g, &st);
	for (unsigned i = 0; i < nlive; i++)
		assert_int_equal(st.gen[i].pages, before[i] + (st.gen[i].seq == target));
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_oldest_first),
	    cmocka_unit_test(test_min_age),
	    cmocka_unit_test(test_2m_runs_first_and_sorted),
	    cmocka_unit_test(test_limits_and_errors),
	    cmocka_unit_test(test_lookaround),
	    cmocka_unit_test(test_lookaround_feeds_bloom),
	    cmocka_unit_test(test_put_back),
	    cmocka_unit_test(test_put_back_after_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
