/*
 * test_wss.c - the working-set estimate (vmm/wss.c, Part 7).
 *
 * A constructed history with known answers: rounds at 5 s, 10 s and 40 s mark disjoint
 * sets of 1000, 200 and 50 pages young (plus 10 pages of the 5 s set again at 40 s), so
 * at 41 s the bytes touched within each idle age are known exactly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define MiB  (1ULL << 20)
#define PAGE VMM_PAGE_SIZE

static void test_constructed_history(void **state)
{
	struct vmm_range ram = {0, 16 * MiB}; /* 4096 pages */
	struct vmm_guest_config cfg;
	struct vmm_guest *g = NULL;

	(void)state;
	vmm_guest_config_default(&cfg);
	cfg.ram = &ram;
	cfg.nr_ram = 1;
	cfg.nr_gens = 8;
	assert_int_equal(vmm_guest_new(&cfg, &g), 0);
	assert_int_equal(vmm_age_begin(g, 5000), 0);
	assert_int_equal(vmm_mark_young(g, 0, 1000, false), 0);
	assert_int_equal(vmm_age_begin(g, 10000), 0);
	assert_int_equal(vmm_mark_young(g, 1000 * PAGE, 200, false), 0);
	assert_int_equal(vmm_age_begin(g, 40000), 0);
	assert_int_equal(vmm_mark_young(g, 1200 * PAGE, 50, false), 0);
	assert_int_equal(vmm_mark_young(g, 0, 10, false), 0); /* used again: counted once */

	/* At 41 s: seq 3 is 1 s old (60 pages), seq 2 31 s (200), seq 1 36 s (990), seq 0
	 * 41 s (the other 2846). */
	const uint64_t ages_ms[] = {500, 1000, 30000, 31000, 36000, 40999, 41000, 3600000};
	const uint64_t pages[] = {0, 60, 60, 260, 1250, 1250, 4096, 4096};
	uint64_t bytes[8];
	assert_int_equal(vmm_wss(g, 41000, ages_ms, 8, bytes), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(bytes[i], pages[i] * PAGE);

	/* Evicted pages are not part of the working set, whatever the age. */
	struct vmm_run runs[8] = {{0}};
	struct vmm_evict_result res;
	struct vmm_evict_req req = {.max_pages = 96, .now_ms = 41000, .runs = runs, .max_runs = 8};
	assert_int_equal(vmm_evict(g, &req, &res), 0);
	assert_int_equal(res.evicted_pages, 96);
	assert_int_equal(vmm_wss(g, 41000, ages_ms, 8, bytes), 0);
	assert_int_equal(bytes[7], (4096 - 96) * PAGE);
	assert_int_equal(bytes[3], 260 * PAGE); /* the oldest went, the young stay */

	assert_int_equal(vmm_wss(NULL, 0, ages_ms, 1, bytes), -EINVAL);
	assert_int_equal(vmm_wss(g, 0, NULL, 1, bytes), -EINVAL);
	assert_int_equal(vmm_wss(g, 0, NULL, 0, NULL), 0);
	vmm_guest_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_constructed_history),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
