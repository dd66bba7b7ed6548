// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_sim_gen.c - each synthetic generator produces the shape sim/gen.c says it does,
 * checked by statistics over the generated trace (not by re-running the generator's code).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim.h"

#define RAM 8192 /* 16 blocks of 2 MiB */

static void gen(enum sim_gen_kind k, uint64_t epochs, struct sim_trace *t, struct sim_gen_opts *o)
{
	sim_gen_opts_default(o, k);
	o->ram_pages = RAM;
	o->epochs = epochs;
	assert_int_equal(sim_gen(o, t), 0);
	assert_int_equal(t->nr_epochs, epochs);
	assert_int_equal(t->ram_pages, RAM);
}

/* Accesses per page over epochs [from, to). */
static uint32_t *counts(const struct sim_trace *t, size_t from, size_t to)
{
	uint32_t *c = calloc(t->ram_pages, sizeof(*c));
	assert_non_null(c);
	for (size_t e = from; e < to; e++)
		for (uint32_t i = 0; i < t->epochs[e].nr_acc; i++)
			c[SIM_ACC_PAGE(t->epochs[e].acc[i])]++;
	return c;
}

static int cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x < y) - (x > y);
}

static void test_zipf(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;

	(void)state;
	gen(SIM_GEN_ZIPF, 400, &t, &o);
	/* Epoch 0 writes the live set, 3/4 of RAM, and nothing else. */
	assert_int_equal(t.epochs[0].nr_acc, RAM * 3 / 4);
	uint32_t *c = counts(&t, 1, t.nr_epochs);
	for (uint64_t p = RAM * 3 / 4; p < RAM; p++)
		assert_int_equal(c[p], 0);
	/* Popularity by rank, where pages are touched less than once an epoch: Zipf(1.3) makes
	 * rank 300 about 10^1.3 = 20 times as popular as rank 3000 (expected counts ~88 and ~5
	 * here, 88 rather than 100 as an epoch counts a page once): accept 8..45. */
	qsort(c, RAM, sizeof(*c), cmp_desc);
	double ratio = (double)c[299] / (double)c[2999];
	if (ratio < 8 || ratio > 45)
		fail_msg("rank300/rank3000 = %.1f (%u / %u)", ratio, c[299], c[2999]);
	/* A cold tail: at least a third of the live pages are touched in < 5% of epochs. */
	uint64_t cold = 0;
	for (uint64_t i = 0; i < RAM * 3 / 4; i++)
		cold += c[i] < t.nr_epochs / 20;
	assert_true(cold > RAM / 4);
	/* And a hot head: some page is touched in nearly every epoch. */
	assert_true(c[0] > t.nr_epochs * 9 / 10);
	free(c);
	sim_trace_free(&t);
}

static void test_grow(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	uint64_t lo = RAM, hi = 0, frees = 0;

	(void)state;
	gen(SIM_GEN_GROW, 600, &t, &o);
	for (size_t e = 0; e < t.nr_epochs; e++) {
		const struct sim_epoch *ep = &t.epochs[e];
		uint64_t top = SIM_ACC_PAGE(ep->acc[ep->nr_acc - 1]) + 1;
		lo = top < lo ? top : lo;
		hi = top > hi ? top : hi;
		/* Frees come only above what is in use now. */
		for (uint32_t i = 0; i < ep->nr_free; i++)
			assert_true(ep->freed[i] >= top);
		frees += ep->nr_free;
		/* The hot quarter is touched every epoch. */
		assert_true(ep->nr_acc >= top / 4);
	}
	/* The allocated region swings between 20% and 80% of RAM. */
	assert_in_range(lo, RAM / 5 - 64, RAM / 5 + 64);
	assert_in_range(hi, RAM * 4 / 5 - 64, RAM * 4 / 5 + 64);
	/* Two shrinking phases free what the growth allocated: 2 x 60% of RAM. */
	assert_in_range(frees, RAM * 6 / 5 - 256, RAM * 6 / 5 + 256);
	sim_trace_free(&t);
}

static void test_phases(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	uint64_t ph = 100, hs = RAM / 5;

	(void)state;
	gen(SIM_GEN_PHASES, 4 * ph, &t, &o);
	for (int k = 0; k < 4; k++) {
		uint32_t *c = counts(&t, k * ph + 1, (k + 1) * ph);
		uint64_t base = (uint64_t)(k % 3) * hs;
		for (uint64_t p = 0; p < RAM; p++) {
			if (p >= base && p < base + hs)
				assert_in_range(c[p], ph / 4, ph * 3 / 4); /* p = 0.5 per epoch */
			else
				assert_int_equal(c[p], 0);
		}
		free(c);
	}
	sim_trace_free(&t);
}

static void test_scan(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	uint64_t half = 200, hot = RAM / 5, cold_end = RAM * 4 / 5;

	(void)state;
	gen(SIM_GEN_SCAN, 2 * half, &t, &o);
	uint32_t *c = counts(&t, 1, t.nr_epochs);
	for (uint64_t p = hot; p < cold_end; p++)
		assert_int_equal(c[p], 1); /* touched once after epoch 0: the scan */
	for (uint64_t p = cold_end; p < RAM; p++)
		assert_int_equal(c[p], 0);
	free(c);
	/* The scan is sequential, 4% of RAM per epoch (60% in 15 and a bit), from half time. */
	c = counts(&t, half, half + 16);
	for (uint64_t p = hot; p < cold_end; p++)
		assert_int_equal(c[p], 1);
	free(c);
	c = counts(&t, 1, half);
	for (uint64_t p = hot; p < cold_end; p++)
		assert_int_equal(c[p], 0);
	free(c);
	sim_trace_free(&t);
}

static void test_sparse(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;

	(void)state;
	gen(SIM_GEN_SPARSE, 50, &t, &o);
	for (size_t e = 1; e < t.nr_epochs; e++) {
		const struct sim_epoch *ep = &t.epochs[e];
		uint32_t per_block[RAM / SIM_BLOCK_PAGES] = {0};
		assert_int_equal(ep->nr_acc, RAM / SIM_BLOCK_PAGES);
		for (uint32_t i = 0; i < ep->nr_acc; i++)
			per_block[SIM_ACC_PAGE(ep->acc[i]) / SIM_BLOCK_PAGES]++;
		for (size_t b = 0; b < RAM / SIM_BLOCK_PAGES; b++)
			assert_int_equal(per_block[b], 1);
		/* The same hot page every epoch. */
		assert_memory_equal(ep->acc, t.epochs[1].acc, ep->nr_acc * sizeof(uint32_t));
	}
	/* Epoch 0: three blocks in four written whole. */
	assert_int_equal(t.epochs[0].nr_acc, RAM / SIM_BLOCK_PAGES / 4 * 3 * SIM_BLOCK_PAGES +
						 RAM / SIM_BLOCK_PAGES / 4);
	sim_trace_free(&t);
}

static void test_step(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	uint64_t half = 200, hot = RAM / 10, b_end = hot + RAM * 2 / 5;

	(void)state;
	gen(SIM_GEN_STEP, 2 * half, &t, &o);
	assert_int_equal(o.step_at_ms, half * o.epoch_ms);
	uint32_t *c = counts(&t, 1, half);
	for (uint64_t p = 0; p < RAM; p++)
		assert_int_equal(c[p], p < hot ? half - 1 : 0);
	free(c);
	assert_int_equal(t.epochs[half].nr_acc, b_end);
	/* After the step, each page of the new working set every 20 epochs. */
	c = counts(&t, half + 1, half + 1 + 20 * 9);
	for (uint64_t p = hot; p < b_end; p++)
		assert_int_equal(c[p], 9);
	free(c);
	sim_trace_free(&t);
}

/* kv: the server's pages every epoch; the store written once, in order, over the first 30 s;
 * then reads of a tenth of it only, each hot page about kv_reads_per_s a second. */
static void test_kv(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;

	(void)state;
	sim_gen_opts_default(&o, SIM_GEN_KV);
	assert_int_equal(o.epoch_ms, 100);
	o.ram_pages = RAM;
	o.epochs = 900; /* 90 s */
	assert_int_equal(sim_gen(&o, &t), 0);
	uint64_t base = RAM / 50, store = RAM * 2 / 5;
	uint32_t *c = counts(&t, 0, 300); /* the load */
	for (uint64_t p = base; p < base + store; p++)
		assert_int_equal(c[p], 1); /* each value written once */
	free(c);
	c = counts(&t, 300, 900); /* 60 s of reads */
	uint64_t read = 0, total = 0;
	for (uint64_t p = base; p < base + store; p++) {
		read += c[p] > 0;
		total += c[p];
		assert_true(c[p] < 200);
	}
	/* a tenth of the store, each read ~60 times a minute (a Poisson count per epoch: a
	 * page read twice in one epoch counts once) */
	assert_true(read > store / 12 && read < store / 8);
	assert_true((double)total / (double)read > 45 && (double)total / (double)read < 65);
	free(c);
	assert_non_null(strstr(t.source, "kv@1/s"));
	sim_trace_free(&t);
	o.kv_reads_per_s = 0;
	assert_int_equal(sim_gen(&o, &t), -EINVAL);
}

static void test_bad_options(void **state)
{
	struct sim_gen_opts o;
	struct sim_trace t;
	enum sim_gen_kind k;

	(void)state;
	sim_gen_opts_default(&o, SIM_GEN_ZIPF);
	o.ram_pages = 1000; /* not a multiple of 512 */
	assert_int_equal(sim_gen(&o, &t), -EINVAL);
	o.ram_pages = 512;
	o.epochs = 0;
	assert_int_equal(sim_gen(&o, &t), -EINVAL);
	assert_int_equal(sim_gen_by_name("sparse", &k), 0);
	assert_int_equal(k, SIM_GEN_SPARSE);
	assert_int_equal(sim_gen_by_name("nope", &k), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_zipf),   cmocka_unit_test(test_grow),
	    cmocka_unit_test(test_phases), cmocka_unit_test(test_scan),
	    cmocka_unit_test(test_sparse), cmocka_unit_test(test_step),
	    cmocka_unit_test(test_kv),     cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
