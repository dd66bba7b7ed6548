// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_control.c - the control socket's request parser (host/front/control_req.c) and the
 * handler behind it (mtd_control_handle), on hostile request lines.
 *
 * The parser is pure and is fed a table of lines a buggy script or a hostile local root
 * process could send: embedded \u0000 and other control characters in names and values,
 * duplicate keys, nulls and wrong types, over-long and empty fields, non-objects, invalid
 * UTF-8.  Each must be refused with a sentence that names the problem.  The handler then runs
 * on a daemon in plain-QEMU mode whose QMP socket does not exist (as test_mtd_daemon.c): a
 * name cut at its NUL must not reach the VM of the shorter name.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "front/control.h"

static int parse(const char *line, struct mtd_control_req *req, char *err, size_t errlen)
{
	err[0] = '\0';
	return mtd_control_parse(line, strlen(line), req, err, errlen);
}

static void test_parse_good(void **state)
{
	struct mtd_control_req r;
	char err[300];
	(void)state;

	assert_int_equal(parse("{\"cmd\":\"status\"}", &r, err, sizeof(err)), 0);
	assert_int_equal(r.cmd, MTD_CTL_STATUS);
	assert_int_equal(
	    parse("{\"cmd\":\"vm\",\"name\":\"web-1.example_0\"}", &r, err, sizeof(err)), 0);
	assert_int_equal(r.cmd, MTD_CTL_VM);
	assert_string_equal(r.name, "web-1.example_0");
	assert_int_equal(parse("{\"cmd\":\"policy-set\",\"name\":\"w\",\"key\":\"min\","
			       "\"value\":\"1G\",\"extra\":[1,{\"x\":null}]}",
			       &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.cmd, MTD_CTL_POLICY_SET);
	assert_int_equal(r.npairs, 1);
	assert_string_equal(r.pairs[0].key, "min");
	assert_string_equal(r.pairs[0].value, "1G");
	/* several keys at once, all or none (the daemon applies them together) */
	assert_int_equal(parse("{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\":\"3G\","
			       "\"max\":\"4G\"}}",
			       &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.npairs, 2);
	assert_string_equal(r.pairs[0].key, "min");
	assert_string_equal(r.pairs[1].value, "4G");
	assert_int_equal(
	    parse("{\"cmd\":\"hook\",\"domain\":\"w\",\"op\":\"started\"}", &r, err, sizeof(err)),
	    0);
	assert_string_equal(r.name, "w");
	assert_string_equal(r.subop, "-");
	/* UTF-8 names are names (libvirt allows them) */
	assert_int_equal(parse("{\"cmd\":\"vm\",\"name\":\"caf\\u00e9\"}", &r, err, sizeof(err)),
			 0);
	assert_string_equal(r.name, "caf\xc3\xa9");
}

/* Each line, and a word its error must contain. */
static const struct {
	const char *line;
	size_t len; /* 0: strlen */
	const char *says;
} bad[] = {
    {"{\"cmd\":\"vm\",\"name\":\"web1\\u0000evil\"}", 0, "NUL"},
    {"{\"cmd\":\"vm\",\"name\":\"\\u0000\"}", 0, "NUL"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"key\":\"min\\u0000\",\"value\":\"1G\"}", 0, "NUL"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"key\":\"min\",\"value\":\"1G\\u0000\"}", 0, "NUL"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"key\":\"min\",\"value\":\"1G\\u001b[2J\"}", 0,
     "control character (0x1b)"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\\u0000x\":\"1G\"}}", 0, "NUL"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\":\"1G\\u0000\"}}", 0, "NUL"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\":\"\\u001b[2J\"}}", 0,
     "control character (0x1b)"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\":\"1G\",\"min\":\"2G\"}}", 0,
     "duplicate"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{}}", 0, "'set' must be an object"},
    {"{\"cmd\":\"policy-set\",\"name\":\"w\",\"set\":{\"min\":1}}", 0, "must be a string"},
    {"{\"cmd\":\"vm\",\"name\":\"a\\nb\"}", 0, "control character (0x0a)"},
    {"{\"cmd\":\"vm\",\"name\":\"a\\u007fb\"}", 0, "control character (0x7f)"},
    {"{\"cmd\":\"hook\",\"domain\":\"w\",\"op\":\"started\",\"subop\":\"\\t\"}", 0,
     "control character"},
    {"{\"cmd\":\"status\\u0000\"}", 0, "unknown cmd"},
    {"{\"cmd\":\"vm\",\"name\":\"a\",\"name\":\"b\"}", 0, "duplicate"},
    {"{\"cmd\":\"status\",\"cmd\":\"detach\"}", 0, "duplicate"},
    {"{\"cmd\":\"vm\",\"name\":null}", 0, "'name' must be a string"},
    {"{\"cmd\":\"vm\",\"name\":7}", 0, "'name' must be a string"},
    {"{\"cmd\":\"vm\",\"name\":[\"a\"]}", 0, "'name' must be a string"},
    {"{\"cmd\":\"vm\",\"name\":\"\"}", 0, "empty"},
    {"{\"cmd\":\"vm\"}", 0, "missing field 'name'"},
    {"{\"cmd\":null}", 0, "missing field 'cmd'"},
    {"{\"cmd\":\"reboot-host\"}", 0, "unknown cmd 'reboot-host'"},
    {"{\"cmd\":\"\\u001b]0;pwned\\u0007\"}", 0, "unknown cmd '?]0;pwned?'"},
    {"[\"status\"]", 0, "JSON object"},
    {"null", 0, "JSON object"},
    {"{\"cmd\":'status'}", 0, "single-quoted"},
    {"{\"cmd\":\"status\"} {}", 0, "not a JSON object"},
    {"{\"cmd\":\"vm\",\"name\":\"\xc0\xaf\"}", 0, "UTF-8"},
    {"{\"cmd\":\"status\"\0}", 17, "NUL"},
    {"{\"cmd\":", 0, "not a JSON object"},
    {"", 0, "not a JSON object"},
    {"{\"a\":{\"b\":{\"c\":{\"d\":{}}}},\"cmd\":\"status\"}", 0, "deeper"},
};

static void test_parse_bad(void **state)
{
	char longname[MTD_NAME_MAX + 40];
	struct mtd_control_req r;
	char err[300];
	int wrong = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = bad[i].len ? bad[i].len : strlen(bad[i].line);

		err[0] = '\0';
		if (mtd_control_parse(bad[i].line, len, &r, err, sizeof(err)) != -EINVAL ||
		    !strstr(err, bad[i].says)) {
			print_error("line %zu: %s -> '%s' (wanted '%s')\n", i, bad[i].line, err,
				    bad[i].says);
			wrong++;
		}
	}
	assert_int_equal(wrong, 0);
	snprintf(longname, sizeof(longname), "{\"cmd\":\"vm\",\"name\":\"%0*d\"}", MTD_NAME_MAX, 0);
	assert_int_equal(parse(longname, &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "longer than 127"));
}

/* The handler on a live daemon: the cut name never reaches vm1. */
static void test_handle_nul_name(void **state)
{
	struct mtd_config cfg;
	struct mtd_daemon *d;
	char *out;
	(void)state;

	mtd_config_default(&cfg);
	cfg.ctl.interval_ms = 200;
	assert_int_equal(mtd_daemon_new(&cfg, &d), 0);
	d->mode = MTD_MODE_QMP;
	snprintf(d->qmp_path, sizeof(d->qmp_path), "/nonexistent/qmp.sock");
	snprintf(d->vm_name, sizeof(d->vm_name), "vm1");
	assert_int_equal(mtd_daemon_start(d), 0);
	rcu_register_thread();

	static const char ok_line[] = "{\"cmd\":\"vm\",\"name\":\"vm1\"}";
	out = mtd_control_handle(d, "test", ok_line, strlen(ok_line));
	assert_non_null(strstr(out, "\"ok\":true"));
	free(out);

	static const char nul_line[] = "{\"cmd\":\"vm\",\"name\":\"vm1\\u0000x\"}";
	out = mtd_control_handle(d, "test", nul_line, strlen(nul_line));
	assert_non_null(strstr(out, "\"ok\":false"));
	assert_non_null(strstr(out, "NUL"));
	free(out);

	/* a detach cut at the NUL would have detached vm1 */
	static const char det_line[] = "{\"cmd\":\"detach\",\"name\":\"vm1\\u0000\"}";
	out = mtd_control_handle(d, "test", det_line, strlen(det_line));
	assert_non_null(strstr(out, "\"ok\":false"));
	free(out);
	out = mtd_control_handle(d, "test", ok_line, strlen(ok_line));
	assert_non_null(strstr(out, "\"ok\":true"));
	free(out);

	static const char set_line[] =
	    "{\"cmd\":\"policy-set\",\"name\":\"vm1\",\"key\":\"enabled\",\"value\":\"no\\u0000\"}";
	out = mtd_control_handle(d, "test", set_line, strlen(set_line));
	assert_non_null(strstr(out, "\"ok\":false"));
	free(out);
	struct mtd_policy p;
	assert_int_equal(mtd_daemon_policy_get(d, "vm1", &p), 0);
	assert_true(p.enabled);

	rcu_unregister_thread();
	mtd_daemon_stop(d);
	mtd_daemon_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_handle_nul_name),
	};
	return cmocka_run_group_tests_name("mtd_control", tests, NULL, NULL);
}
