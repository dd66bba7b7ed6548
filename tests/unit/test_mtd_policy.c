// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_policy.c - memtided's settings parsing and validation: sizes and durations
 * (host/base/parse.c), per-domain policy keys and the metadata XML, hostile input included
 * (host/base/policy.c), and the INI file (host/daemon/config.c), each accepted or refused
 * with a sentence, never half-applied.
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

#include "base/parse.h"
#include "base/policy.h"
#include "daemon/config.h"

#define MiB ((uint64_t)1 << 20)

static void test_parse_bytes(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(mtd_parse_bytes("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(mtd_parse_bytes("128M", &v), 0);
	assert_int_equal(v, 128 * MiB);
	assert_int_equal(mtd_parse_bytes("1GiB", &v), 0);
	assert_int_equal(v, 1024 * MiB);
	assert_int_equal(mtd_parse_bytes("2g", &v), 0);
	assert_int_equal(v, 2048 * MiB);
	assert_int_equal(mtd_parse_bytes("0", &v), 0);
	assert_int_equal(v, 0);
	const char *bad[] = {"",
			     "-1",
			     "+5",
			     "12Q",
			     "1.5G",
			     "M",
			     "5 M",
			     "1GiBx",
			     "99999999999999999999",
			     "17179869184T"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 77;
		assert_int_equal(mtd_parse_bytes(bad[i], &v), -EINVAL);
		assert_int_equal(v, 77);
	}
}

static void test_parse_ms(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(mtd_parse_ms("5", &v), 0);
	assert_int_equal(v, 5000);
	assert_int_equal(mtd_parse_ms("2s", &v), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(mtd_parse_ms("500ms", &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(mtd_parse_ms("1.5s", &v), 0);
	assert_int_equal(v, 1500);
	assert_int_equal(mtd_parse_ms("2m", &v), 0);
	assert_int_equal(v, 120000);
	assert_int_equal(mtd_parse_ms("-1", &v), -EINVAL);
	assert_int_equal(mtd_parse_ms("nan", &v), -EINVAL);
	assert_int_equal(mtd_parse_ms("inf", &v), -EINVAL);
	assert_int_equal(mtd_parse_ms("5h", &v), 0);
	assert_int_equal(v, 5 * 3600000);
	assert_int_equal(mtd_parse_ms("5d", &v), -EINVAL);
	assert_int_equal(mtd_parse_ms("5 s", &v), -EINVAL);
	assert_int_equal(mtd_parse_ms("1e30", &v), -EINVAL);
}

static void test_policy_keys(void **state)
{
	struct mtd_policy p, keep;
	char err[200];
	(void)state;
	mtd_policy_default(&p);

	assert_int_equal(mtd_policy_set_kv(&p, "min", "512M", err, sizeof(err)), 0);
	assert_int_equal(p.min_bytes, 512 * MiB);
	assert_int_equal(mtd_policy_set_kv(&p, "max", "4G", err, sizeof(err)), 0);
	assert_int_equal(p.max_bytes, 4096 * MiB);
	assert_int_equal(mtd_policy_set_kv(&p, "priority", "7", err, sizeof(err)), 0);
	assert_int_equal(p.priority, 7);
	assert_int_equal(mtd_policy_set_kv(&p, "enabled", "no", err, sizeof(err)), 0);
	assert_false(p.enabled);
	assert_int_equal(mtd_policy_set_kv(&p, "target_refault_per_min", "0.01", err, sizeof(err)),
			 0);
	assert_true(p.target_refault_per_min > 0.0099 && p.target_refault_per_min < 0.0101);
	assert_int_equal(mtd_policy_set_kv(&p, "headroom", "64M", err, sizeof(err)), 0);
	assert_int_equal(p.headroom_bytes, 64 * MiB);
	assert_int_equal(p.return_via, MTD_RETURN_RECLAIM); /* the default */
	assert_int_equal(mtd_policy_set_kv(&p, "return", "pageout", err, sizeof(err)), 0);
	assert_int_equal(p.return_via, MTD_RETURN_PAGEOUT);
	assert_string_equal(mtd_return_via_name(p.return_via), "pageout");
	assert_int_equal(mtd_policy_set_kv(&p, "return", "auto", err, sizeof(err)), 0);
	assert_int_equal(p.return_via, MTD_RETURN_AUTO);
	assert_string_equal(mtd_return_via_name(p.return_via), "auto");
	assert_int_equal(mtd_policy_set_kv(&p, "return", "balloon", err, sizeof(err)), 0);
	assert_int_equal(p.return_via, MTD_RETURN_BALLOON);
	assert_int_equal(p.cold_age_ms, 0); /* the default: the controller chooses */
	assert_int_equal(mtd_policy_set_kv(&p, "cold_age", "45s", err, sizeof(err)), 0);
	assert_int_equal(p.cold_age_ms, 45000);
	assert_int_equal(mtd_policy_set_kv(&p, "cold_age", "0", err, sizeof(err)), 0);
	assert_int_equal(p.cold_age_ms, 0);

	keep = p;
	struct {
		const char *k, *v, *says;
	} bad[] = {
	    {"min", "lots", "min must be"},
	    {"min", "8G", "above max"}, /* min > max */
	    {"max", "100M", "above max"},
	    {"max", "32M", "starve"},
	    {"priority", "1001", "priority"},
	    {"priority", "-3", "priority"},
	    {"enabled", "maybe", "yes or no"},
	    {"target_refault_per_min", "0", "fraction"},
	    {"target_refault_per_min", "nan", "fraction"},
	    {"target_refault_per_min", "2", "fraction"},
	    {"headroom", "1E", "headroom"},
	    {"return", "swap", "balloon, reclaim, pageout or auto"},
	    {"return", "", "balloon, reclaim, pageout or auto"},
	    {"cold_age", "1s", "from 5s to 1h"},
	    {"cold_age", "2h", "from 5s to 1h"},
	    {"cold_age", "soon", "cold_age must be"},
	    {"colour", "blue", "unknown policy key"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(mtd_policy_set_kv(&p, bad[i].k, bad[i].v, err, sizeof(err)),
				 -EINVAL);
		if (!strstr(err, bad[i].says))
			fail_msg("%s=%s: '%s' does not say '%s'", bad[i].k, bad[i].v, err,
				 bad[i].says);
		assert_memory_equal(&p, &keep, sizeof(p)); /* unchanged */
	}
}

static void test_policy_xml_round_trip(void **state)
{
	struct mtd_policy p, q;
	char xml[512], err[200];
	(void)state;
	mtd_policy_default(&p);
	p.min_bytes = 300 * MiB;
	p.max_bytes = 3000 * MiB;
	p.priority = 3;
	p.enabled = false;
	p.headroom_bytes = 10 * MiB;
	p.target_refault_per_min = 0.005;
	p.return_via = MTD_RETURN_BALLOON;
	p.observe = true;
	p.cold_age_ms = 30000;
	assert_int_equal(mtd_policy_to_xml(&p, xml, sizeof(xml)), 0);
	mtd_policy_default(&q);
	assert_false(q.observe);
	assert_int_equal(mtd_policy_from_xml(&q, xml, err, sizeof(err)), 0);
	assert_true(q.observe);
	assert_int_equal(q.cold_age_ms, 30000);
	assert_int_equal(q.min_bytes, p.min_bytes);
	assert_int_equal(q.max_bytes, p.max_bytes);
	assert_int_equal(q.priority, 3);
	assert_false(q.enabled);
	assert_int_equal(q.headroom_bytes, p.headroom_bytes);
	assert_int_equal(q.return_via, MTD_RETURN_BALLOON);
	assert_true(q.target_refault_per_min > 0.00499 && q.target_refault_per_min < 0.00501);
	assert_non_null(strstr(xml, "target_refault_per_min=\"0.005\""));
	/* every digit survives the metadata (the fuzzer found "%.6g" dropping them) */
	p.target_refault_per_min = 0.00123456789;
	assert_int_equal(mtd_policy_to_xml(&p, xml, sizeof(xml)), 0);
	mtd_policy_default(&q);
	assert_int_equal(mtd_policy_from_xml(&q, xml, err, sizeof(err)), 0);
	assert_true(q.target_refault_per_min == p.target_refault_per_min);
	p.target_refault_per_min = 0.1 + 0.2; /* needs 17 digits */
	assert_int_equal(mtd_policy_to_xml(&p, xml, sizeof(xml)), 0);
	assert_int_equal(mtd_policy_from_xml(&q, xml, err, sizeof(err)), 0);
	assert_true(q.target_refault_per_min == p.target_refault_per_min);

	/* As libvirt returns it: with our namespace on the element; missing keys keep
	 * the defaults. */
	mtd_policy_default(&q);
	assert_int_equal(mtd_policy_from_xml(&q,
					     "<memtide:policy xmlns:memtide=\"" MTD_POLICY_XMLNS
					     "\" priority=\"9\"/>",
					     err, sizeof(err)),
			 0);
	assert_int_equal(q.priority, 9);
	assert_int_equal(q.min_bytes, 256 * MiB);
}

/* Nested entities (a small "billion laughs"): refused, never expanded into a number. */
static const char entities[] =
    "<!DOCTYPE l [<!ENTITY a 'aaaaaaaaaa'><!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;'>"
    "<!ENTITY c '&b;&b;&b;&b;&b;&b;&b;&b;'>]><policy priority='&c;'/>";

/* The defaults set every field, whatever the memory held before (observe was left as it
 * was: on the stack a bool holding 253, found by tests/fuzz/fuzz_policy_xml.c under UBSan). */
static void test_policy_default_whole(void **state)
{
	struct mtd_policy p;
	char out[512];
	(void)state;

	memset(&p, 0xfd, sizeof(p));
	mtd_policy_default(&p);
	assert_false(p.observe);
	assert_int_equal(mtd_policy_to_xml(&p, out, sizeof(out)), 0);
	assert_non_null(strstr(out, " observe=\"no\""));
}

static void test_policy_xml_hostile(void **state)
{
	struct mtd_policy p, keep;
	char err[200];
	(void)state;
	mtd_policy_default(&p);
	keep = p;
	const char *bad[] = {
	    "<policy",
	    "not xml at all",
	    "<other priority='1'/>",
	    "<policy xmlns='https://example.com/other' priority='1'/>",
	    "<policy priority='1' bogus='2'/>",
	    "<policy priority='one'/>",
	    "<policy min='2G' max='1G'/>",
	    entities,
	    "<!DOCTYPE p [<!ENTITY x SYSTEM 'file:///etc/passwd'>]><policy priority='&x;'/>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(mtd_policy_from_xml(&p, bad[i], err, sizeof(err)), -EINVAL);
		assert_true(strlen(err) > 10);
		assert_memory_equal(&p, &keep, sizeof(p));
	}
	/* Oversized input is refused before parsing. */
	char *big = malloc(8192);
	assert_non_null(big);
	memset(big, ' ', 8191);
	big[8191] = '\0';
	memcpy(big, "<policy", 7);
	assert_int_equal(mtd_policy_from_xml(&p, big, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "longer"));
	free(big);
	/* NULL or empty: nothing stored, defaults stand. */
	assert_int_equal(mtd_policy_from_xml(&p, NULL, err, sizeof(err)), 0);
	assert_int_equal(mtd_policy_from_xml(&p, "", err, sizeof(err)), 0);
	assert_memory_equal(&p, &keep, sizeof(p));
}

static char *write_tmp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/mtd-policy-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void test_config_file(void **state)
{
	struct mtd_config c, keep;
	char err[256];
	(void)state;
	mtd_config_default(&c);
	char *path = write_tmp("; memtided.conf\n"
			       "[daemon]\ninterval = 2s\nsource = sim\nmetrics_port = 0\n"
			       "[controller]\nmax_inflate_step = 64M\nagent_silence = 10s\n"
			       "psi_some_avg10_high = 20\nhold_max = 4min\n"
			       "[host]\nlow_mark = 1G\n"
			       "[defaults]\nmin = 128M\npriority = 5\n"
			       "[sim]\nhot_percent = 30\n");
	assert_int_equal(mtd_config_load(&c, path, false, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(c.ctl.interval_ms, 2000);
	assert_int_equal(c.source, MTD_SOURCE_SIM);
	assert_int_equal(c.metrics_port, 0);
	assert_int_equal(c.ctl.max_inflate_step_bytes, 64 * MiB);
	assert_int_equal(c.ctl.agent_silence_ms, 10000);
	assert_int_equal(c.ctl.hold_max_ms, 240000);
	assert_int_equal(c.arb.low_mark_bytes, 1024 * MiB);
	assert_int_equal(c.defaults.min_bytes, 128 * MiB);
	assert_int_equal(c.defaults.priority, 5);
	assert_int_equal(c.sim_hot_percent, 30);

	/* Errors name the file and the line, and change nothing. */
	keep = c;
	struct {
		const char *text, *says;
	} bad[] = {
	    {"[daemon]\ninterval = 2s\nintervall = 3s\n", ":3: unknown key 'intervall'"},
	    {"[deamon]\nuri = x\n", ":2: unknown section [deamon]"},
	    {"[controller]\nmax_inflate_step = big\n", ":2: max_inflate_step must be"},
	    {"[defaults]\nmin = 2G\nmax = 1G\n", ":3: min (2048 MiB) is above max"},
	    {"[daemon]\nthis line has no equals\n", ":2: not an INI line"},
	    {"[daemon]\ninterval = 10ms\n", "interval must be between"},
	    {"[daemon]\nlog_level = loud\n", "log_level must be"},
	    {"[controller]\nhold_max = 2d\n", ":2: hold_max must be"},
	    {"[controller]\nhold_max = 25h\n", "hold_max must be at most 24 h"},
	    {"[host]\nlow_mark = 2G\nhigh_mark = 1G\n", "low_mark (2048 MiB) is above high_mark"},
	    {"[metrics]\nlisten = localhost:9848\n", ":2: listen must be ADDRESS:PORT"},
	    {"[metrics]\nlisten = 127.0.0.1:0\n", ":2: listen must be"},
	    {"[metrics]\nport = 1\n", ":2: unknown key 'port' in [metrics]"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		path = write_tmp(bad[i].text);
		err[0] = '\0';
		assert_int_equal(mtd_config_load(&c, path, false, err, sizeof(err)), -EINVAL);
		unlink(path);
		if (!strstr(err, bad[i].says))
			fail_msg("'%s' does not say '%s'", err, bad[i].says);
		assert_memory_equal(&c, &keep, sizeof(c));
	}
	/* A missing default file is fine; a missing named file is not. */
	assert_int_equal(mtd_config_load(&c, "/nonexistent/memtided.conf", true, err, sizeof(err)),
			 0);
	assert_int_equal(mtd_config_load(&c, "/nonexistent/memtided.conf", false, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/memtided.conf"));
	/* A directory is not an empty file: refused, saying so. */
	assert_int_equal(mtd_config_load(&c, "/tmp", false, err, sizeof(err)), -EISDIR);
	assert_non_null(strstr(err, "/tmp: a directory"));
	assert_memory_equal(&c, &keep, sizeof(c));
	/* Marks that agree pass. */
	path = write_tmp("[host]\nlow_mark = 1G\nhigh_mark = 1G\n");
	assert_int_equal(mtd_config_load(&c, path, false, err, sizeof(err)), 0);
	unlink(path);
}

/* A key or a section given twice is an error naming both lines, in a file and in a text; so
 * is an indented line, which libinih would read as more of the value above it.  Line numbers
 * hold past a line longer than libinih reads at once. */
static void test_config_twice(void **state)
{
	struct mtd_config c, keep;
	char err[256], longc[400];
	(void)state;

	memset(longc, 'x', sizeof(longc));
	longc[0] = ';';
	longc[sizeof(longc) - 2] = '\n';
	longc[sizeof(longc) - 1] = '\0';
	mtd_config_default(&c);
	keep = c;
	struct {
		const char *head, *text, *says;
	} bad[] = {
	    {"", "[daemon]\ninterval = 2s\nsource = sim\ninterval = 3s\n",
	     ":4: 'interval' in [daemon] is given twice, here and at line 2"},
	    {"", "[daemon]\ninterval = 2s\n[host]\nlow_mark = 1G\n[daemon]\nsource = sim\n",
	     ":5: section [daemon] is given twice, here and at line 1"},
	    {"", "[daemon]\nuri = test:///default\n  interval = 3s\n",
	     ":3: an indented line continues 'uri' of line 2"},
	    {longc, "[daemon]\ninterval = 2s\ninterval = 2s\n",
	     ":4: 'interval' in [daemon] is given twice, here and at line 3"},
	    {longc, "[daemon]\nbogus = 1\n", ":3: unknown key 'bogus'"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[800];

		snprintf(text, sizeof(text), "%s%s", bad[i].head, bad[i].text);
		for (int as_text = 0; as_text < 2; as_text++) {
			int rc;

			err[0] = '\0';
			if (as_text) {
				rc = mtd_config_load_text(&c, "t.conf", text, err, sizeof(err));
			} else {
				char *path = write_tmp(text);

				rc = mtd_config_load(&c, path, false, err, sizeof(err));
				unlink(path);
			}
			assert_int_equal(rc, -EINVAL);
			if (!strstr(err, bad[i].says))
				fail_msg("%zu: '%s' does not say '%s'", i, err, bad[i].says);
			assert_memory_equal(&c, &keep, sizeof(c));
		}
	}
	/* One key in two sections is two keys. */
	assert_int_equal(mtd_config_load_text(&c, "t.conf",
					      "[daemon]\ninterval = 2s\n[host]\ninterval = 3s\n",
					      err, sizeof(err)),
			 0);
	assert_int_equal(c.nr_file_keys, 2);
}

/* What a reload says: the keys changed, set or dropped, live ones apart from the ones only a
 * restart puts in force. */
static void test_config_changed(void **state)
{
	struct mtd_config a, b;
	char err[256], live[300], restart[300];
	(void)state;

	mtd_config_default(&a);
	mtd_config_default(&b);
	assert_int_equal(mtd_config_load_text(&a, "a",
					      "[daemon]\ninterval = 2s\nsource = sim\n"
					      "[defaults]\nheadroom = 64M\npriority = 5\n"
					      "[metrics]\nlisten = off\n",
					      err, sizeof(err)),
			 0);
	assert_int_equal(
	    mtd_config_load_text(&b, "b",
				 "[daemon]\ninterval = 3s\nsource = sim\n"
				 "[defaults]\nheadroom = 128M\npriority = 5\nmin = 1G\n"
				 "[host]\nlow_mark = 2G\ninterval = 3s\n",
				 err, sizeof(err)),
	    0);
	mtd_config_changed(a.file_keys, a.nr_file_keys, b.file_keys, b.nr_file_keys, true, live,
			   sizeof(live));
	mtd_config_changed(a.file_keys, a.nr_file_keys, b.file_keys, b.nr_file_keys, false, restart,
			   sizeof(restart));
	assert_string_equal(live, "[defaults] headroom, [defaults] min, [host] low_mark");
	assert_string_equal(restart, "[daemon] interval, [host] interval, [metrics] listen");
	mtd_config_changed(b.file_keys, b.nr_file_keys, b.file_keys, b.nr_file_keys, false, restart,
			   sizeof(restart));
	assert_string_equal(restart, "");
}

/* A state directory of its own moves ept_dir, vsock_dir and run_dir under it, unless the
 * file names them; a vsock_dir too long for a socket path turns the service off. */
static void test_config_follow_state_dir(void **state)
{
	struct mtd_config c;
	char err[256], said[600], longdir[200];
	(void)state;

	mtd_config_default(&c);
	assert_int_equal(mtd_config_follow_state_dir(&c, said, sizeof(said)), 0);
	assert_string_equal(c.ept_dir, "/run/memtide/ept");
	assert_string_equal(c.run_dir, "/run/memtide");

	mtd_config_default(&c);
	assert_int_equal(
	    mtd_config_load_text(&c, "t", "[daemon]\nstate_dir = /tmp/try\n", err, sizeof(err)), 0);
	assert_int_equal(mtd_config_follow_state_dir(&c, said, sizeof(said)), 1);
	assert_string_equal(c.ept_dir, "/tmp/try/ept");
	assert_string_equal(c.vsock_dir, "/tmp/try/vsock");
	assert_string_equal(c.run_dir, "/tmp/try");
	assert_non_null(strstr(said, "nothing of the host's /run/memtide is touched"));

	mtd_config_default(&c);
	assert_int_equal(mtd_config_load_text(&c, "t",
					      "[daemon]\nstate_dir = /tmp/try\n"
					      "vsock_dir = /run/memtide/vsock\n",
					      err, sizeof(err)),
			 0);
	assert_int_equal(mtd_config_follow_state_dir(&c, said, sizeof(said)), 1);
	assert_string_equal(c.vsock_dir, "/run/memtide/vsock"); /* the file said so */
	assert_string_equal(c.ept_dir, "/tmp/try/ept");

	mtd_config_default(&c);
	memset(longdir, 'd', sizeof(longdir));
	longdir[0] = '/';
	longdir[150] = '\0';
	snprintf(c.state_dir, sizeof(c.state_dir), "%s", longdir);
	assert_int_equal(mtd_config_follow_state_dir(&c, said, sizeof(said)), 1);
	assert_string_equal(c.vsock_dir, "none");
	assert_non_null(strstr(said, "too long for a socket path"));
}

/* [metrics] listen: loopback by default; v4, bracketed v6, and off. */
static void test_metrics_listen(void **state)
{
	struct mtd_config c;
	char err[256], addr[48];
	int port = -1;
	(void)state;
	mtd_config_default(&c);
	assert_string_equal(c.metrics_addr, "127.0.0.1");
	assert_int_equal(c.metrics_port, 9848);
	assert_int_equal(mtd_config_set(&c, "metrics", "listen", "0.0.0.0:9100", err, sizeof(err)),
			 0);
	assert_string_equal(c.metrics_addr, "0.0.0.0");
	assert_int_equal(c.metrics_port, 9100);
	assert_int_equal(mtd_parse_listen("[::1]:9848", addr, sizeof(addr), &port), 0);
	assert_string_equal(addr, "::1");
	assert_int_equal(port, 9848);
	assert_int_equal(mtd_parse_listen("off", addr, sizeof(addr), &port), 0);
	assert_int_equal(port, 0);
	const char *bad[] = {"::1:9848",   "[::1]9848", "127.0.0.1", "127.0.0.1:65536", "[]:1",
			     "1.2.3.4:-1", "host:80",   ":9848",     "[::1]:"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (mtd_parse_listen(bad[i], addr, sizeof(addr), &port) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
}

/* [daemon] call_timeout (bounded, a duration) and domains (a glob, any text but empty). */
static void test_daemon_isolation_keys(void **state)
{
	struct mtd_config c;
	char err[200];

	(void)state;
	mtd_config_default(&c);
	assert_int_equal(c.call_timeout_ms, 5000);
	assert_string_equal(c.domains, "*");
	assert_int_equal(mtd_config_set(&c, "daemon", "call_timeout", "2s", err, sizeof(err)), 0);
	assert_int_equal(c.call_timeout_ms, 2000);
	assert_int_equal(mtd_config_set(&c, "daemon", "call_timeout", "50ms", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "call_timeout must be"));
	assert_int_equal(mtd_config_set(&c, "daemon", "call_timeout", "11min", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(c.call_timeout_ms, 2000); /* unchanged by a refused value */
	assert_int_equal(mtd_config_set(&c, "daemon", "domains", "web-*", err, sizeof(err)), 0);
	assert_string_equal(c.domains, "web-*");
	assert_int_equal(mtd_config_set(&c, "daemon", "domains", "", err, sizeof(err)), -EINVAL);
	/* the AF_VSOCK listener: auto by default (where the host has /dev/vhost-vsock) */
	assert_int_equal(c.kernel_vsock, -1);
	assert_int_equal(mtd_config_set(&c, "daemon", "kernel_vsock", "no", err, sizeof(err)), 0);
	assert_int_equal(c.kernel_vsock, 0);
	assert_int_equal(mtd_config_set(&c, "daemon", "kernel_vsock", "yes", err, sizeof(err)), 0);
	assert_int_equal(c.kernel_vsock, 1);
	assert_int_equal(mtd_config_set(&c, "daemon", "kernel_vsock", "auto", err, sizeof(err)), 0);
	assert_int_equal(c.kernel_vsock, -1);
	assert_int_equal(mtd_config_set(&c, "daemon", "kernel_vsock", "maybe", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "auto, yes or no"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_bytes),
	    cmocka_unit_test(test_parse_ms),
	    cmocka_unit_test(test_policy_keys),
	    cmocka_unit_test(test_policy_xml_round_trip),
	    cmocka_unit_test(test_policy_xml_hostile),
	    cmocka_unit_test(test_config_file),
	    cmocka_unit_test(test_config_twice),
	    cmocka_unit_test(test_config_changed),
	    cmocka_unit_test(test_config_follow_state_dir),
	    cmocka_unit_test(test_metrics_listen),
	    cmocka_unit_test(test_daemon_isolation_keys),
	    cmocka_unit_test(test_policy_default_whole),
	};
	return cmocka_run_group_tests_name("mtd_policy", tests, NULL, NULL);
}
