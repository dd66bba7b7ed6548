// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_state.c - memtided's per-VM state files (host/daemon/state.c).
 *
 * Checked: a round trip keeps every field; a name of any characters gets a file name of
 * safe characters (hashed when it must be) and the file holds the full name; the decoder
 * refuses, with a sentence, every malformed or hostile file shape (not JSON, wrong types,
 * out-of-range numbers, NUL inside strings, unknown policy keys, another format, oversized
 * files, symlinks, another VM's file); 200000 random mutations of a valid file never crash
 * it (run under ASan by `make sanitize`); saving is atomic (a leftover .tmp never hides the
 * file) and prune removes files of VMs that no longer run, and leftovers.
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

#include "act/balloon.h"
#include "daemon/state.h"

#define MiB ((uint64_t)1 << 20)

static char dir[64];

static void sample(struct mtd_saved_vm *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->uuid, sizeof(s->uuid), "0f8fad5b-d9cb-469f-a165-70867728950e");
	assert_int_equal(mtd_state_boot_id(s->boot_id), 0);
	snprintf(s->instance, sizeof(s->instance), "4242:123456");
	s->saved_ms = 57727948;
	s->ctl.primed = true;
	s->ctl.balloon_bytes = 768 * MiB;
	s->ctl.target_bytes = 640 * MiB;
	s->ctl.hold_until_ms = 57757948;
	s->ctl.last_take_ms = 57700000;
	s->ctl.refused_since_take = true;
	s->ctl.refusals = 3;
	s->released = true;
	snprintf(s->policy_set[0], sizeof(s->policy_set[0]), "no");
	snprintf(s->policy_set[5], sizeof(s->policy_set[5]), "134217728");
}

static void test_round_trip(void **state)
{
	struct mtd_saved_vm a, b;
	char text[4096], err[200];
	(void)state;

	sample(&a, "web \"1\" \\ é");
	assert_int_equal(mtd_state_encode(&a, text, sizeof(text)), 0);
	assert_int_equal(mtd_state_decode(text, strlen(text), &b, err, sizeof(err)), 0);
	assert_string_equal(b.name, a.name);
	assert_string_equal(b.uuid, a.uuid);
	assert_string_equal(b.boot_id, a.boot_id);
	assert_string_equal(b.instance, a.instance);
	assert_int_equal(b.saved_ms, a.saved_ms);
	assert_true(b.ctl.primed);
	assert_int_equal(b.ctl.balloon_bytes, a.ctl.balloon_bytes);
	assert_int_equal(b.ctl.target_bytes, a.ctl.target_bytes);
	assert_int_equal(b.ctl.hold_until_ms, a.ctl.hold_until_ms);
	assert_int_equal(b.ctl.last_take_ms, a.ctl.last_take_ms);
	assert_true(b.ctl.refused_since_take);
	assert_int_equal(b.ctl.refusals, 3);
	assert_true(b.released);
	assert_string_equal(b.policy_set[0], "no");
	assert_string_equal(b.policy_set[5], "134217728");
	assert_string_equal(b.policy_set[1], "");
	/* A buffer too small is refused, not overrun. */
	assert_int_equal(mtd_state_encode(&a, text, 64), -ENOSPC);
}

static void test_file_names(void **state)
{
	char fn[MTD_STATE_NAME_MAX], fn2[MTD_STATE_NAME_MAX], longname[MTD_NAME_MAX];
	(void)state;

	assert_int_equal(mtd_state_file_name("web-1.prod_a", fn, sizeof(fn)), 0);
	assert_string_equal(fn, "web-1.prod_a.state");
	/* slashes, dots first, spaces, long names: hashed, never a path */
	assert_int_equal(mtd_state_file_name("../../etc/passwd", fn, sizeof(fn)), 0);
	assert_null(strchr(fn, '/'));
	assert_int_equal(fn[0], '~');
	assert_int_equal(mtd_state_file_name(".hidden", fn2, sizeof(fn2)), 0);
	assert_int_equal(fn2[0], '~');
	assert_string_not_equal(fn, fn2);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(mtd_state_file_name(longname, fn, sizeof(fn)), 0);
	assert_true(strlen(fn) < 32);
	assert_int_equal(mtd_state_file_name("", fn, sizeof(fn)), -EINVAL);
}

/* Every hostile shape: one sentence, never a crash, never a half-filled success. */
static void test_refuses_bad_files(void **state)
{
	static const char *const bad[] = {
	    "",
	    "not json",
	    "[1,2,3]",
	    "{\"format\":1}",
	    "{\"format\":2,\"name\":\"a\"}",
	    "{\"format\":\"1\"}",
	    /* a NUL inside the name */
	    "{\"format\":1,\"name\":\"vm\\u0000x\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":"
	    "\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    /* negative, too large, wrong types */
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":-1,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":18446744073709551615,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1.5e9,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":0,\"target_bytes\":0,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":\"no\",\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":99,"
	    "\"released\":false,\"policy_set\":{}}",
	    /* policy: unknown key, wrong type, too long */
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{\"root\":\"yes\"}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{\"min\":5}}",
	    "{\"format\":1,\"name\":\"vm\",\"uuid\":\"\",\"boot_id\":\"b\",\"instance\":\"\","
	    "\"saved_ms\":1,\"balloon_bytes\":1048576,\"target_bytes\":1048576,"
	    "\"hold_until_ms\":0,\"last_take_ms\":0,\"refused_since_take\":false,\"refusals\":0,"
	    "\"released\":false,\"policy_set\":{\"min\":\"1111111111111111111111111111111111111111"
	    "1111111111\"}}",
	    /* trailing text, deep nesting */
	    "{\"format\":1} {}",
	    "{\"format\":1,\"x\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}",
	};
	struct mtd_saved_vm s;
	char err[200];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(mtd_state_decode(bad[i], strlen(bad[i]), &s, err, sizeof(err)),
				 -EINVAL);
		assert_true(strlen(err) > 0);
	}
}

/* Random byte flips, truncations and splices of a valid file: the decoder only ever
 * answers 0 or -EINVAL (ASan under make sanitize watches the memory). */
static void test_mutations_never_crash(void **state)
{
	static const char punct[] = "{}[]\":,0-9e\\u";
	struct mtd_saved_vm a, b;
	char text[4096], m[4096], err[200];
	unsigned ok = 0;
	(void)state;

	sample(&a, "vm");
	assert_int_equal(mtd_state_encode(&a, text, sizeof(text)), 0);
	size_t n = strlen(text);
	srandom(14);
	for (int i = 0; i < 200000; i++) {
		size_t len = n;
		memcpy(m, text, n + 1); /* with its NUL: the decoder is given len, never reads it */
		int k = 1 + (int)(random() % 4);
		for (int j = 0; j < k; j++) {
			size_t at = (size_t)random() % len;
			switch (random() % 3) {
			case 0:
				m[at] = (char)random();
				break;
			case 1:
				len = at ? at : 1;
				break;
			default:
				m[at] = punct[(size_t)random() % (sizeof(punct) - 1)];
				break;
			}
		}
		int rc = mtd_state_decode(m, len, &b, err, sizeof(err));
		assert_true(rc == 0 || rc == -EINVAL);
		if (rc == 0) {
			ok++;
			assert_true(b.ctl.balloon_bytes > 0);
			assert_true(strlen(b.name) == strnlen(b.name, sizeof(b.name) - 1));
		}
	}
	print_message("%u of 200000 mutations still decoded\n", ok);
}

static bool keep_a(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "a") == 0;
}

static void test_files(void **state)
{
	struct mtd_saved_vm s, r;
	char err[300], path[160];
	(void)state;

	assert_int_equal(mtd_state_dir_prepare(dir, err, sizeof(err)), 0);
	struct stat sb;
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	/* a file where the directory should be: a sentence */
	snprintf(path, sizeof(path), "%s/file", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/file/sub", dir);
	assert_true(mtd_state_dir_prepare(path, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "state directory"));
	sample(&s, "a");
	assert_true(mtd_state_save(path, &s, err, sizeof(err)) < 0);

	assert_int_equal(mtd_state_save(dir, &s, err, sizeof(err)), 0);
	assert_int_equal(mtd_state_load(dir, "a", &r, err, sizeof(err)), 0);
	assert_int_equal(r.ctl.balloon_bytes, s.ctl.balloon_bytes);
	assert_int_equal(mtd_state_load(dir, "zz", &r, err, sizeof(err)), -ENOENT);
	snprintf(path, sizeof(path), "%s/a.state", dir);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	/* a leftover .tmp (a kill between write and rename) never hides the file */
	snprintf(path, sizeof(path), "%s/a.state.tmp", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{garbage", f);
	fclose(f);
	assert_int_equal(mtd_state_load(dir, "a", &r, err, sizeof(err)), 0);

	/* another VM's file under this VM's name: refused */
	sample(&s, "b");
	assert_int_equal(mtd_state_save(dir, &s, err, sizeof(err)), 0);
	char from[160], to[160];
	snprintf(from, sizeof(from), "%s/b.state", dir);
	snprintf(to, sizeof(to), "%s/c.state", dir);
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(mtd_state_load(dir, "c", &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "belongs to 'b'"));

	/* a symlink is not followed; an oversized file is not read */
	snprintf(path, sizeof(path), "%s/d.state", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(mtd_state_load(dir, "d", &r, err, sizeof(err)) < 0);
	snprintf(path, sizeof(path), "%s/e.state", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < MTD_STATE_MAX_BYTES + 10; i++)
		fputc(' ', f);
	fclose(f);
	assert_int_equal(mtd_state_load(dir, "e", &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bytes"));

	/* prune: only a's file stays (c: its VM b does not run; d, e: unreadable; .tmp) */
	assert_int_equal(mtd_state_prune(dir, keep_a, NULL), 4);
	assert_int_equal(mtd_state_load(dir, "a", &r, err, sizeof(err)), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(mtd_state_remove(dir, "a"), 0);
	assert_int_equal(mtd_state_remove(dir, "a"), -ENOENT);
	snprintf(path, sizeof(path), "%s/file", dir);
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
}

static void test_instance(void **state)
{
	char a[48], b[48];
	(void)state;

	assert_int_equal(mtd_process_instance(getpid(), a, sizeof(a)), 0);
	assert_int_equal(mtd_process_instance(getpid(), b, sizeof(b)), 0);
	assert_string_equal(a, b);
	assert_int_equal(strtol(a, NULL, 10), getpid());
	assert_int_equal(mtd_process_instance(1, b, sizeof(b)), 0);
	assert_string_not_equal(a, b);
	assert_true(mtd_process_instance(0x7ffffff0, b, sizeof(b)) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_file_names),
	    cmocka_unit_test(test_refuses_bad_files),
	    cmocka_unit_test(test_mutations_never_crash),
	    cmocka_unit_test(test_files),
	    cmocka_unit_test(test_instance),
	};
	snprintf(dir, sizeof(dir), "/tmp/mtd-state-test.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	(void)rmdir(dir); /* mtd_state_dir_prepare creates it */
	return cmocka_run_group_tests_name("mtd_state", tests, NULL, NULL);
}
