// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_refault.c - refaults (vmm/refault.c, Part 5).
 *
 * Distances are checked for every gap from 0 to 40 aging rounds (past the 32 the page byte
 * can tell apart without the sweep, so a wraparound bug shows), each reported both ways:
 * by the caller (vmm_refault) and by the aging hand finding the page young again
 * (vmm_mark_young, and vmm_age_walk over simulated tables).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE
#define CAP  (VMM_MAX_NR_GENS - 1)
#define GAPS 41

static struct vmm_guest *guest(const struct vmm_range *ram, size_t n, unsigned nr_gens)
{
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	vmm_guest_config_default(&cfg);
	cfg.ram = ram;
	cfg.nr_ram = n;
	cfg.nr_gens = nr_gens;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	return g;
}

/* Evict exactly the page at gpa: every other page is seen young first, so it is alone in
 * the oldest generation (seeing the others young refaults any evicted among them). */
static void evict_one(struct vmm_guest *g, uint64_t ram_pages, uint64_t gpa, uint64_t *now_ms)
{
	struct vmm_run run = {0};
	struct vmm_evict_result res;
	uint64_t t = gpa / PAGE;

	*now_ms += 1000;
	assert_int_equal(vmm_age_begin(g, *now_ms), 0);
	if (t)
		assert_int_equal(vmm_mark_young(g, 0, t, false), 0);
	if (t + 1 < ram_pages)
		assert_int_equal(vmm_mark_young(g, gpa + PAGE, ram_pages - t - 1, false), 0);
	*now_ms += 1000;
	assert_int_equal(vmm_age_begin(g, *now_ms), 0);
	struct vmm_evict_req req = {.max_pages = 1, .now_ms = *now_ms, .runs = &run, .max_runs = 1};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 1);
	assert_int_equal(run.gpa, gpa);
}

static uint64_t expect(uint64_t gap)
{
	return gap < CAP ? gap : CAP;
}

static void test_distance_caller_reported(void **state)
{
	struct vmm_range ram = {0, 2 * MiB};
	struct vmm_guest *g = guest(&ram, 1, 4);
	struct vmm_guest_stats st;
	uint64_t now_ms = 0;

	(void)state;
	for (uint64_t gap = 0; gap < GAPS; gap++) {
		struct vmm_refault rf;
		evict_one(g, 512, 7 * PAGE, &now_ms);
		for (uint64_t k = 0; k < gap; k++) {
			now_ms += 1000;
			assert_int_equal(vmm_age_begin(g, now_ms), 0);
		}
		vmm_guest_get_stats(g, &st);
		uint64_t before = st.refault_distance_hist[expect(gap)];
		assert_int_equal(vmm_refault(g, 7 * PAGE, &rf), 0);
		assert_true(rf.was_evicted);
		assert_int_equal(rf.distance_gens, expect(gap));
		vmm_guest_get_stats(g, &st);
		assert_int_equal(st.refault_distance_hist[expect(gap)], before + 1);
		assert_int_equal(st.gen[st.nr_gens - 1].pages, 1); /* back in the youngest */
		assert_int_equal(vmm_check_invariants(g), 0);
	}
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.refaults_total, GAPS);
	assert_int_equal(st.refault_distance_hist[CAP], GAPS - CAP);

	/* A resident page: nothing recorded. */
	struct vmm_refault rf;
	assert_int_equal(vmm_refault(g, 8 * PAGE, &rf), 0);
	assert_false(rf.was_evicted);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.refaults_total, GAPS);
	assert_int_equal(vmm_refault(g, 2 * MiB, &rf), -ERANGE);
	vmm_guest_free(g);
}

/*
 * Pages 100..119 evicted one at a time, at rounds 2, 4, ..., 40, then all seen young
 * together in round 41: page 100 + i has distance 41 - 2 (i + 1).  With page tables
 * (hw != NULL) "seen young" is an accessed bit found by vmm_age_walk; without, it is
 * vmm_mark_young.  Every page but the targets is used every other round.
 */
struct rig {
	struct vmm_guest *g;
	struct vmm_simhw *hw;
	uint64_t base, now_ms;
};

/* One aging round in which pages [first, first + n) and [first2, first2 + n2) are used. */
static void round_with(struct rig *r, uint64_t first, uint64_t n, uint64_t first2, uint64_t n2)
{
	r->now_ms += 1000;
	if (r->hw) { /* the MMU sets the bits, the round's walk finds them */
		for (uint64_t i = 0; i < n + n2; i++) {
			uint64_t pfn = i < n ? first + i : first2 + i - n;
			assert_true(vmm_simhw_access(r->hw, r->base + pfn * PAGE, false) >= 0);
		}
		assert_int_equal(vmm_age_walk(r->g, vmm_simhw_pt(r->hw), r->now_ms, NULL), 0);
		return;
	}
	assert_int_equal(vmm_age_begin(r->g, r->now_ms), 0);
	if (n)
		assert_int_equal(vmm_mark_young(r->g, r->base + first * PAGE, n, false), 0);
	if (n2)
		assert_int_equal(vmm_mark_young(r->g, r->base + first2 * PAGE, n2, false), 0);
}

static void refault_by_aging(bool with_tables)
{
	struct vmm_simhw_config hc = {.fmt = VMM_PT_EPT, .guest_bytes = 2 * MiB, .seed = 1};
	struct vmm_range ram0 = {0, 2 * MiB};
	const struct vmm_range *ram = &ram0;
	size_t nr = 1;
	struct rig r = {0};
	struct vmm_guest_stats st;

	if (with_tables) {
		assert_int_equal(vmm_simhw_new(&hc, &r.hw), 0);
		nr = vmm_simhw_ram(r.hw, &ram);
	}
	r.g = guest(ram, nr, VMM_MAX_NR_GENS);
	r.base = ram[0].start;
	for (uint64_t i = 0; i < 20; i++) {
		struct vmm_run run = {0};
		struct vmm_evict_result res;
		round_with(&r, 0, 100, 101 + i, 512 - 101 - i); /* all but the targets */
		round_with(&r, 0, 0, 0, 0);                     /* nothing */
		struct vmm_evict_req req = {
		    .max_pages = 1, .now_ms = r.now_ms, .runs = &run, .max_runs = 1};
		assert_int_equal(vmm_evict(r.g, &req, &res), 0);
		assert_int_equal(res.evicted_pages, 1);
		assert_int_equal(run.gpa, r.base + (100 + i) * PAGE);
		if (r.hw) /* the host took it: the next touch faults it back in */
			assert_int_equal(vmm_simhw_unmap(r.hw, run.gpa, 1), 0);
	}
	vmm_guest_get_stats(r.g, &st);
	assert_int_equal(st.max_seq, 40);
	assert_int_equal(st.refaults_total, 0);
	/* Round 41 sees all twenty used again. */
	round_with(&r, 100, 20, 0, 0);
	vmm_guest_get_stats(r.g, &st);
	assert_int_equal(st.max_seq, 41);
	assert_int_equal(st.refaults_total, 20);
	assert_int_equal(st.evicted_pages, 0);
	uint64_t want[VMM_MAX_NR_GENS] = {0};
	for (uint64_t i = 0; i < 20; i++)
		want[expect(41 - 2 * (i + 1))]++;
	for (unsigned d = 0; d < VMM_MAX_NR_GENS; d++)
		assert_int_equal(st.refault_distance_hist[d], want[d]);
	assert_int_equal(st.refault_distance_hist[CAP], 13); /* distances 15..39 */
	assert_int_equal(st.gen[st.nr_gens - 1].pages, 20);  /* back in the youngest */
	assert_int_equal(vmm_check_invariants(r.g), 0);
	vmm_guest_free(r.g);
	vmm_simhw_free(r.hw);
}

static void test_distance_mark_young(void **state)
{
	(void)state;
	refault_by_aging(false);
}

static void test_distance_age_walk(void **state)
{
	(void)state;
	refault_by_aging(true);
}

/* The tier a page had when it was evicted comes back with its refault. */
static void test_tier(void **state)
{
	struct vmm_range ram = {0, 2 * MiB};
	struct vmm_guest *g = guest(&ram, 1, 4);
	struct vmm_guest_stats st;
	struct vmm_refault rf;
	uint64_t now_ms = 0;

	(void)state;
	evict_one(g, 512, 9 * PAGE, &now_ms); /* tier 0 */
	assert_int_equal(vmm_refault(g, 9 * PAGE, &rf), 0);
	assert_int_equal(rf.tier, 0);
	assert_int_equal(vmm_hint_access(g, 9 * PAGE, 1), 0);
	assert_int_equal(vmm_hint_access(g, 9 * PAGE, 1), 0); /* tier 2 */
	evict_one(g, 512, 9 * PAGE, &now_ms);
	assert_int_equal(vmm_refault(g, 9 * PAGE, &rf), 0);
	assert_int_equal(rf.tier, 2);
	vmm_guest_get_stats(g, &st);
	assert_int_equal(st.refaults_by_tier[0], 1);
	assert_int_equal(st.refaults_by_tier[2], 1);
	/* It came back in its tier: a further eviction and refault still say tier 2. */
	evict_one(g, 512, 9 * PAGE, &now_ms);
	assert_int_equal(vmm_refault(g, 9 * PAGE, &rf), 0);
	assert_int_equal(rf.tier, 2);
	vmm_guest_free(g);
}

/*
 * A source blind to some accesses (the ept plugin: instruction fetches, the guest's own
 * page-table walks): 64 "code" pages are never reported young, but each is faulted back the
 * round after it is evicted; 192 pages are reported young every round; 256 are never
 * touched.  Each round evicts what is 2 s idle, and pages that came back only at 10 s idle
 * (the weighing's reused_min_age_ms).  Returns the evictions of code pages over 40 rounds;
 * *cold_out: how many never-touched pages went out.
 */
static uint64_t blind_code_evictions(bool refault_raises_tier, uint64_t *cold_out)
{
	struct vmm_range ram = {0, 2 * MiB};
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;
	struct vmm_run runs[512] = {{0}};
	bool out[512] = {false};
	uint64_t now_ms = 0, code = 0, cold = 0;

	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 8;
	cfg.reuse_raises_tier = true; /* as memtided sets it for page-level sources */
	cfg.refault_raises_tier = refault_raises_tier;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	for (unsigned round = 0; round < 40; round++) {
		now_ms += 1000;
		assert_int_equal(vmm_age_begin(g, now_ms), 0);
		assert_int_equal(vmm_mark_young(g, 64 * PAGE, 192, false), 0);
		for (unsigned p = 0; p < 64; p++) {
			struct vmm_refault rf;
			if (!out[p])
				continue;
			assert_int_equal(vmm_refault(g, p * PAGE, &rf), 0); /* fetched again */
			assert_true(rf.was_evicted);
			out[p] = false;
		}
		struct vmm_evict_req req = {.min_age_ms = 2000,
					    .reused_min_age_ms = 10000,
					    .max_pages = 512,
					    .now_ms = now_ms,
					    .runs = runs,
					    .max_runs = 512};
		struct vmm_evict_result res;
		assert_int_equal(vmm_evict(g, &req, &res), 0);
		for (size_t i = 0; i < res.nr_runs; i++) {
			for (uint64_t k = 0; k < runs[i].npages; k++) {
				uint64_t p = runs[i].gpa / PAGE + k;
				assert_true(p < 64 || p >= 256); /* the hot pages never go */
				out[p] = true;
				code += p < 64;
				cold += p >= 256;
			}
		}
	}
	assert_int_equal(vmm_check_invariants(g), 0);
	vmm_guest_free(g);
	*cold_out = cold;
	return code;
}

/* A page that keeps refaulting stops being the first pick: with refault_raises_tier each
 * code page cycles evict -> refault at most once per reused age (10 rounds) and a few
 * times more while tier protection learns, where in tier 0 it went out every third round;
 * the never-touched pages go out all the same. */
static void test_refault_raises_tier_protects_blind_pages(void **state)
{
	uint64_t cold_blind, cold_raised;

	(void)state;
	uint64_t blind = blind_code_evictions(false, &cold_blind);
	uint64_t raised = blind_code_evictions(true, &cold_raised);
	print_message("code page evictions over 40 rounds: %llu in tier 0, %llu raised\n",
		      (unsigned long long)blind, (unsigned long long)raised);
	assert_true(blind >= 64 * 10); /* the cycle the fix ends: every 3rd round */
	assert_true(raised <= 64 * 5);
	assert_int_equal(cold_raised, 256);
	assert_int_equal(cold_blind, 256);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_distance_caller_reported),
	    cmocka_unit_test(test_distance_mark_young),
	    cmocka_unit_test(test_distance_age_walk),
	    cmocka_unit_test(test_tier),
	    cmocka_unit_test(test_refault_raises_tier_protects_blind_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
