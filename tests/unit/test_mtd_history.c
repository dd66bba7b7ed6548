// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_history.c - the audit trail on disk (host/daemon/history.c), the words for an agent's
 * capabilities (host/act/agent_caps.c) and the honest figures (mtd_vm_figures).
 *
 * History: entries are JSON lines with every field, in order, in a 0600 file under a 0700
 * folder; a name with '/', '%' or a leading '.' stays inside the folder; a full file is
 * rotated to .1 (one older file kept) and the next entry starts a new one; an unwritable
 * state directory is an error returned, not a crash.
 * Capabilities: the names are the protocol's; the consequence names what is missing (no
 * reclaim, no working set, no PSI) and says "full" when nothing is.
 * Honest figures (host/daemon/vm.c): what memtide returned apart from what is not resident without
 * it, including the case seen in the field (a guest that gave nothing back read "saved").
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "act/agent_caps.h"
#include "daemon/history.h"
#include "daemon/vm.h"
#include "proto.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memtide-ut-history.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static size_t count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;
	int c;
	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void test_entries_are_json_lines(void **state)
{
	char path[512], line[1024];
	struct stat sb;
	(void)state;

	for (int i = 0; i < 3; i++) {
		struct mtd_history_entry e = {
		    .unix_ms = 1796350445123ULL + (uint64_t)i * 1000, /* 2026-12-04T02:14:05.123Z */
		    .vm = "web\"1",
		    .what = "balloon",
		    .before_bytes = (1024ULL - 64 * (uint64_t)i) << 20,
		    .after_bytes = (960ULL - 64 * (uint64_t)i) << 20,
		    .reason = "inflate",
		    .source = i == 2 ? "arbiter" : "controller",
		    .observe = i == 0,
		};
		assert_int_equal(mtd_history_append(dir, &e), 0);
	}
	assert_int_equal(mtd_history_path(dir, "web\"1", path, sizeof(path)), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	for (int i = 0; i < 3; i++) {
		assert_non_null(fgets(line, sizeof(line), f));
		struct json_object *o = json_tokener_parse(line), *v;
		assert_non_null(o);
		assert_true(json_object_object_get_ex(o, "vm", &v));
		assert_string_equal(json_object_get_string(v), "web\"1");
		assert_true(json_object_object_get_ex(o, "before_bytes", &v));
		assert_int_equal(json_object_get_int64(v), (int64_t)((1024 - 64 * i) << 20));
		assert_true(json_object_object_get_ex(o, "after_bytes", &v));
		assert_int_equal(json_object_get_int64(v), (int64_t)((960 - 64 * i) << 20));
		assert_true(json_object_object_get_ex(o, "source", &v));
		assert_string_equal(json_object_get_string(v), i == 2 ? "arbiter" : "controller");
		assert_true(json_object_object_get_ex(o, "observe", &v));
		assert_int_equal(json_object_get_boolean(v), i == 0);
		assert_true(json_object_object_get_ex(o, "time", &v));
		if (i == 0)
			assert_string_equal(json_object_get_string(v), "2026-12-04T02:14:05.123Z");
		json_object_put(o);
	}
	assert_null(fgets(line, sizeof(line), f));
	fclose(f);
}

static void test_names_stay_inside(void **state)
{
	char path[512];
	(void)state;
	assert_int_equal(mtd_history_path("/s", "../../etc/x", path, sizeof(path)), 0);
	/* Every slash escaped: ".." inside a file name is only a name. */
	assert_string_equal(path, "/s/history/%2E.%2F..%2Fetc%2Fx.jsonl");
	assert_int_equal(mtd_history_path("/s", "a%b", path, sizeof(path)), 0);
	assert_string_equal(path, "/s/history/a%25b.jsonl");
	/* Written there, not elsewhere. */
	struct mtd_history_entry e = {.unix_ms = 1,
				      .vm = "../escape",
				      .what = "balloon",
				      .reason = "inflate",
				      .source = "controller"};
	assert_int_equal(mtd_history_append(dir, &e), 0);
	char outside[600];
	snprintf(outside, sizeof(outside), "%s/escape.jsonl", dir);
	assert_int_not_equal(access(outside, F_OK), 0);
	char big[400];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(mtd_history_path("/s", big, path, 64), -ENAMETOOLONG);
}

static void test_rotation(void **state)
{
	char path[512], old[520];
	struct mtd_history_entry e = {.unix_ms = 1,
				      .vm = "rot",
				      .what = "reclaim",
				      .reason = "inflate",
				      .source = "controller"};
	(void)state;
	assert_int_equal(mtd_history_path(dir, "rot", path, sizeof(path)), 0);
	snprintf(old, sizeof(old), "%s.1", path);
	/* Fill the file past the limit: about 170 bytes an entry. */
	size_t n = 0;
	struct stat sb = {0};
	while (stat(path, &sb) != 0 || sb.st_size < (off_t)MTD_HISTORY_MAX_BYTES) {
		assert_int_equal(mtd_history_append(dir, &e), 0);
		n++;
		assert_true(n < 100000);
	}
	assert_int_not_equal(access(old, F_OK), 0);
	assert_int_equal(mtd_history_append(dir, &e), 0); /* rotates, then writes */
	assert_int_equal(access(old, F_OK), 0);
	assert_int_equal(count_lines(old), n);
	assert_int_equal(count_lines(path), 1);
}

static void test_unwritable_dir_is_an_error(void **state)
{
	struct mtd_history_entry e = {.unix_ms = 1,
				      .vm = "x",
				      .what = "balloon",
				      .reason = "inflate",
				      .source = "controller"};
	(void)state;
	assert_true(mtd_history_append("/nonexistent/memtide", &e) < 0);
}

static void test_caps_words(void **state)
{
	char names[160], means[400];
	(void)state;
	uint32_t full = PROTO_CAP_STATS | PROTO_CAP_PSI | PROTO_CAP_WSS | PROTO_CAP_RECLAIM_MEMCG;
	mtd_agent_caps_names(full | PROTO_CAP_HOST_RECLAIM, names, sizeof(names));
	assert_non_null(strstr(names, "stats"));
	assert_non_null(strstr(names, "wss"));
	assert_null(strstr(names, "host")); /* host-side bits are not the agent's */
	mtd_agent_caps_consequence(full, means, sizeof(means));
	assert_true(strncmp(means, "full", 4) == 0);
	/* No cgroup2 reclaim, no MGLRU: the balloon only, and no working set. */
	mtd_agent_caps_consequence(PROTO_CAP_STATS | PROTO_CAP_PSI, means, sizeof(means));
	assert_non_null(strstr(means, "cannot reclaim"));
	assert_non_null(strstr(means, "balloon only"));
	assert_non_null(strstr(means, "no working set"));
	assert_null(strstr(means, "no PSI"));
	/* MGLRU eviction alone is a way to reclaim. */
	mtd_agent_caps_consequence(PROTO_CAP_STATS | PROTO_CAP_WSS | PROTO_CAP_RECLAIM_MGLRU, means,
				   sizeof(means));
	assert_null(strstr(means, "cannot reclaim"));
	assert_non_null(strstr(means, "no PSI"));
	mtd_agent_caps_names(0, names, sizeof(names));
	assert_string_equal(names, "none");
}

/* Honest figures (host/daemon/vm.c, mtd_vm_figures). */
static void test_honest_figures(void **state)
{
	const uint64_t M = 1 << 20;
	uint64_t ret, untouched;
	(void)state;
	/* The case seen: a 1 GiB guest that gave nothing back (balloon at the top, no reclaim)
	 * but never touched 692 MiB: nothing returned, 692 MiB untouched (it read "saved"). */
	mtd_vm_figures(1024 * M, 1024 * M, 332 * M, 0, false, &ret, &untouched);
	assert_int_equal(ret, 0);
	assert_int_equal(untouched, 692 * M);
	/* The balloon holds 256 MiB: that is returned, whatever else is absent. */
	mtd_vm_figures(1024 * M, 768 * M, 300 * M, 0, false, &ret, &untouched);
	assert_int_equal(ret, 256 * M);
	assert_int_equal(untouched, 468 * M);
	/* return=reclaim: the agent freed 400 MiB, 300 of it still away (Rss grew back). */
	mtd_vm_figures(1024 * M, 1024 * M, 724 * M, 400 * M, false, &ret, &untouched);
	assert_int_equal(ret, 300 * M);
	assert_int_equal(untouched, 0);
	/* Unknown Rss: the balloon's hold only, nothing said of the rest. */
	mtd_vm_figures(1024 * M, 896 * M, 0, 400 * M, false, &ret, &untouched);
	assert_int_equal(ret, 128 * M);
	assert_int_equal(untouched, 0);
	/* Observe-only: nothing done, nothing returned. */
	mtd_vm_figures(1024 * M, 896 * M, 500 * M, 0, true, &ret, &untouched);
	assert_int_equal(ret, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entries_are_json_lines),
	    cmocka_unit_test(test_names_stay_inside),
	    cmocka_unit_test(test_rotation),
	    cmocka_unit_test(test_unwritable_dir_is_an_error),
	    cmocka_unit_test(test_caps_words),
	    cmocka_unit_test(test_honest_figures),
	};
	return cmocka_run_group_tests_name("mtd_history", tests, setup, teardown);
}
