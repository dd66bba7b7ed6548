// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_sim_trace.c - the trace file format: a write/read round trip keeps every bit, and the
 * strict reader rejects corrupt or hostile input with an error (never a crash, never a
 * half-filled trace).  Hostile bodies are built here by hand, byte by byte, from the format
 * in docs/trace-format.md, and compressed with zstd, so they pass the envelope and reach
 * the body parser.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "sim.h"

static char tmpdir[] = "/tmp/test_sim_trace.XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(*len);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void assert_same_trace(const struct sim_trace *a, const struct sim_trace *b)
{
	assert_int_equal(a->ram_pages, b->ram_pages);
	assert_int_equal(a->nr_ram, b->nr_ram);
	for (size_t i = 0; i < a->nr_ram; i++) {
		assert_int_equal(a->ram[i].start, b->ram[i].start);
		assert_int_equal(a->ram[i].end, b->ram[i].end);
	}
	assert_string_equal(a->source, b->source);
	assert_int_equal(a->nr_epochs, b->nr_epochs);
	assert_int_equal(a->end_ms, b->end_ms);
	for (size_t e = 0; e < a->nr_epochs; e++) {
		assert_int_equal(a->epochs[e].t_ms, b->epochs[e].t_ms);
		assert_int_equal(a->epochs[e].nr_acc, b->epochs[e].nr_acc);
		assert_int_equal(a->epochs[e].nr_free, b->epochs[e].nr_free);
		if (a->epochs[e].nr_acc)
			assert_memory_equal(a->epochs[e].acc, b->epochs[e].acc,
					    a->epochs[e].nr_acc * sizeof(uint32_t));
		if (a->epochs[e].nr_free)
			assert_memory_equal(a->epochs[e].freed, b->epochs[e].freed,
					    a->epochs[e].nr_free * sizeof(uint32_t));
	}
}

/* A two-range layout with a hole, reads, writes, frees and uneven epochs. */
static void build_small(struct sim_trace *t)
{
	struct vmm_range ram[2] = {{0, 4 * VMM_SIZE_2M}, {6 * VMM_SIZE_2M, 8 * VMM_SIZE_2M}};
	uint32_t a0[] = {5, 6, 7, 1000 | SIM_ACC_WRITE, 3071, 7 | SIM_ACC_WRITE};
	uint32_t a1[] = {0, 1, 2, 3, 2048 | SIM_ACC_WRITE};
	uint32_t f1[] = {1000, 6};

	assert_int_equal(sim_trace_init(t, ram, 2), 0);
	assert_int_equal(t->ram_pages, 6 * 512);
	snprintf(t->source, sizeof(t->source), "unit");
	assert_int_equal(sim_trace_add_epoch(t, 100, a0, 6, NULL, 0), 0);
	assert_int_equal(sim_trace_add_epoch(t, 1100, a1, 5, f1, 2), 0);
	assert_int_equal(sim_trace_add_epoch(t, 1500, NULL, 0, NULL, 0), 0);
	assert_int_equal(sim_trace_finish(t, 4000), 0);
	/* add_epoch sorted, merged duplicates (7 read + 7 written = written). */
	assert_int_equal(t->epochs[0].nr_acc, 5);
	assert_int_equal(t->epochs[0].acc[2], 7 | SIM_ACC_WRITE);
}

static void test_round_trip_small(void **state)
{
	struct sim_trace t, r;
	char path[256], err[256];

	(void)state;
	build_small(&t);
	path_of(path, sizeof(path), "small.mtt");
	assert_int_equal(sim_trace_write(&t, path, 3, err, sizeof(err)), 0);
	assert_int_equal(sim_trace_read(&r, path, err, sizeof(err)), 0);
	assert_same_trace(&t, &r);
	/* GPA mapping across the hole. */
	assert_int_equal(sim_page_gpa(&r, 2048), 6 * VMM_SIZE_2M);
	assert_int_equal(sim_gpa_page(&r, 6 * VMM_SIZE_2M + 4096), 2049);
	assert_int_equal(sim_gpa_page(&r, 5 * VMM_SIZE_2M), -ERANGE);
	sim_trace_free(&t);
	sim_trace_free(&r);
}

static void test_round_trip_generated(void **state)
{
	char path[256], err[256];

	(void)state;
	for (int k = 0; k < SIM_GEN__COUNT; k++) {
		struct sim_gen_opts o;
		struct sim_trace t, r;
		sim_gen_opts_default(&o, (enum sim_gen_kind)k);
		o.ram_pages = 4096;
		o.epochs = 80;
		assert_int_equal(sim_gen(&o, &t), 0);
		path_of(path, sizeof(path), "gen.mtt");
		assert_int_equal(sim_trace_write(&t, path, 1, err, sizeof(err)), 0);
		assert_int_equal(sim_trace_read(&r, path, err, sizeof(err)), 0);
		assert_same_trace(&t, &r);
		sim_trace_free(&t);
		sim_trace_free(&r);
	}
}

static void expect_reject(const char *path, int want_rc, const char *want_msg)
{
	struct sim_trace t;
	char err[256] = "";
	int rc = sim_trace_read(&t, path, err, sizeof(err));

	if (rc != want_rc || !strstr(err, want_msg))
		fail_msg("%s: rc %d (want %d), error '%s' (want '%s')", path, rc, want_rc, err,
			 want_msg);
	assert_int_equal(t.nr_epochs, 0); /* nothing half-built is left */
	assert_null(t.epochs);
}

static void test_reject_envelope(void **state)
{
	struct sim_trace t;
	char path[256], bad[256], err[256];
	size_t len;

	(void)state;
	build_small(&t);
	path_of(path, sizeof(path), "env.mtt");
	assert_int_equal(sim_trace_write(&t, path, 3, err, sizeof(err)), 0);
	sim_trace_free(&t);
	uint8_t *b = read_file(path, &len);
	path_of(bad, sizeof(bad), "bad.mtt");

	b[0] ^= 0xff; /* magic */
	write_file(bad, b, len);
	expect_reject(bad, -EINVAL, "bad magic");
	b[0] ^= 0xff;
	b[8] = 2; /* version */
	write_file(bad, b, len);
	expect_reject(bad, -EINVAL, "version 2");
	b[8] = 1;
	/* Every truncation is an error, whatever the cut. */
	for (size_t cut = 0; cut < len; cut++) {
		struct sim_trace r;
		write_file(bad, b, cut);
		assert_true(sim_trace_read(&r, bad, err, sizeof(err)) < 0);
	}
	/* A flipped bit anywhere past our header never yields different data: either it is
	 * rejected (zstd's content checksum, the parser) or, in a zstd frame header field that
	 * does not change the content (window size), the trace reads back identical. */
	{
		struct sim_trace orig;
		int rejected = 0;
		assert_int_equal(sim_trace_read(&orig, path, err, sizeof(err)), 0);
		for (size_t i = 16; i < len; i++) {
			struct sim_trace r;
			b[i] ^= 0x10;
			write_file(bad, b, len);
			if (sim_trace_read(&r, bad, err, sizeof(err)) == 0) {
				assert_same_trace(&orig, &r);
				sim_trace_free(&r);
			} else {
				rejected++;
			}
			b[i] ^= 0x10;
		}
		assert_true(rejected >= (int)(len - 16) - 4);
		sim_trace_free(&orig);
	}
	/* Bytes after the frame. */
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, b, len);
	longer[len] = 0;
	write_file(bad, longer, len + 1);
	expect_reject(bad, -EINVAL, "after the compressed frame");
	free(longer);
	free(b);
	path_of(bad, sizeof(bad), "does-not-exist.mtt");
	expect_reject(bad, -ENOENT, "No such file");
}

/* ---- hand-built bodies ------------------------------------------------------------------ */

struct body {
	uint8_t b[512];
	size_t n;
};

static void v(struct body *b, uint64_t x)
{
	do {
		b->b[b->n++] = (uint8_t)((x & 0x7f) | (x >= 0x80 ? 0x80 : 0));
		x >>= 7;
	} while (x);
}

static void byte(struct body *b, uint8_t x)
{
	b->b[b->n++] = x;
}

/* Header: page size 4096, one range of 512 pages at 0, source "x". */
static void hdr(struct body *b)
{
	v(b, 4096);
	v(b, 1);
	v(b, 0);
	v(b, 512);
	v(b, 1);
	byte(b, 'x');
}

static void write_body(const char *path, const struct body *b)
{
	uint8_t out[1024] = "MTDTRACE\x01\x00\x00\x00\x00\x00\x00\x00";
	size_t z = ZSTD_compress(out + 16, sizeof(out) - 16, b->b, b->n, 1);
	assert_false(ZSTD_isError(z));
	write_file(path, out, 16 + z);
}

static void test_reject_body(void **state)
{
	char path[256];
	struct body b;

	(void)state;
	path_of(path, sizeof(path), "body.mtt");

	/* A valid minimal body first, so the failures below are the edits' doing. */
	memset(&b, 0, sizeof(b));
	hdr(&b);
	byte(&b, 'E'), v(&b, 0), v(&b, 1), v(&b, 3), v(&b, 1), v(&b, 0), v(&b, 0);
	byte(&b, 'Z'), v(&b, 1), v(&b, 1000);
	write_body(path, &b);
	{
		struct sim_trace t;
		char err[256];
		assert_int_equal(sim_trace_read(&t, path, err, sizeof(err)), 0);
		assert_int_equal(t.epochs[0].nr_acc, 2); /* pages 3 and 4 */
		assert_int_equal(t.epochs[0].acc[1], 4);
		sim_trace_free(&t);
	}

	memset(&b, 0, sizeof(b)); /* page size */
	v(&b, 8192);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "page size 8192");

	memset(&b, 0, sizeof(b)); /* unaligned range */
	v(&b, 4096), v(&b, 1), v(&b, 0), v(&b, 100);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "not 2 MiB aligned");

	memset(&b, 0, sizeof(b)); /* a run past the end of RAM */
	hdr(&b);
	byte(&b, 'E'), v(&b, 0), v(&b, 1), v(&b, 500), v(&b, 20);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "outside guest RAM");

	memset(&b, 0, sizeof(b)); /* a page both read and written */
	hdr(&b);
	byte(&b, 'E'), v(&b, 0), v(&b, 1), v(&b, 3), v(&b, 0), v(&b, 1), v(&b, 3), v(&b, 0);
	v(&b, 0);
	byte(&b, 'Z'), v(&b, 1), v(&b, 10);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "both in the read and the write set");

	memset(&b, 0, sizeof(b)); /* time that does not move */
	hdr(&b);
	byte(&b, 'E'), v(&b, 5), v(&b, 0), v(&b, 0), v(&b, 0);
	byte(&b, 'E'), v(&b, 0);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "does not increase");

	memset(&b, 0, sizeof(b)); /* the end record's count disagrees */
	hdr(&b);
	byte(&b, 'E'), v(&b, 5), v(&b, 0), v(&b, 0), v(&b, 0);
	byte(&b, 'Z'), v(&b, 2), v(&b, 10);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "says 2 epochs");

	memset(&b, 0, sizeof(b)); /* bytes after the end record */
	hdr(&b);
	byte(&b, 'E'), v(&b, 5), v(&b, 0), v(&b, 0), v(&b, 0);
	byte(&b, 'Z'), v(&b, 1), v(&b, 10), byte(&b, 0);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "after the end record");

	memset(&b, 0, sizeof(b)); /* no end record */
	hdr(&b);
	byte(&b, 'E'), v(&b, 5), v(&b, 0), v(&b, 0), v(&b, 0);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "before the end record");

	memset(&b, 0, sizeof(b)); /* unknown tag */
	hdr(&b);
	byte(&b, 'Q');
	write_body(path, &b);
	expect_reject(path, -EINVAL, "unknown record tag 0x51");

	memset(&b, 0, sizeof(b)); /* a varint that never ends */
	v(&b, 4096);
	for (int i = 0; i < 11; i++)
		byte(&b, 0xff);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "varint");

	memset(&b, 0, sizeof(b)); /* runs that touch must have been merged */
	hdr(&b);
	byte(&b, 'E'), v(&b, 0), v(&b, 2), v(&b, 3), v(&b, 0), v(&b, 0), v(&b, 0);
	write_body(path, &b);
	expect_reject(path, -EINVAL, "runs touch");

	memset(&b, 0, sizeof(b)); /* a source name with a control character */
	v(&b, 4096), v(&b, 1), v(&b, 0), v(&b, 512), v(&b, 1), byte(&b, '\n');
	write_body(path, &b);
	expect_reject(path, -EINVAL, "printable");
}

static void test_builder_rejects(void **state)
{
	struct sim_trace t;
	struct vmm_range bad = {4096, VMM_SIZE_2M};
	struct vmm_range ok = {0, VMM_SIZE_2M};
	uint32_t out_of_ram = 512;

	(void)state;
	assert_int_equal(sim_trace_init(&t, &bad, 1), -EINVAL);
	assert_int_equal(sim_trace_init(&t, &ok, 1), 0);
	assert_int_equal(sim_trace_add_epoch(&t, 0, &out_of_ram, 1, NULL, 0), -EINVAL);
	assert_int_equal(sim_trace_add_epoch(&t, 10, NULL, 0, NULL, 0), 0);
	assert_int_equal(sim_trace_add_epoch(&t, 10, NULL, 0, NULL, 0), -EINVAL);
	assert_int_equal(sim_trace_finish(&t, 10), -EINVAL);
	sim_trace_free(&t);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_small), cmocka_unit_test(test_round_trip_generated),
	    cmocka_unit_test(test_reject_envelope),  cmocka_unit_test(test_reject_body),
	    cmocka_unit_test(test_builder_rejects),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
