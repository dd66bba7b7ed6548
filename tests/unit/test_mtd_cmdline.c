// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_cmdline.c - memtided's flags (host/daemon/cmdline.c) and the config file read from text
 * (mtd_config_load_text): what main() runs, without starting a daemon.
 *
 * Checked: flags land on their config keys and the last of a repeated flag wins, however
 * many are given (a 33rd flag used to be dropped silently); a socket path too long for a
 * unix address is refused instead of cut short; a --name with a control character, a stray
 * argument, an unknown option and a missing value each give one sentence; parsing twice
 * gives the same answer (getopt's state is reset).  The config text parser reports the file
 * and line of the first bad key and leaves the settings untouched.
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

#include "daemon/cmdline.h"

static int parse(struct mtd_cmdline *cl, char *err, size_t errlen, ...)
{
	char *argv[128];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"memtided";
	va_start(ap, errlen);
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 127;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	err[0] = '\0';
	return mtd_cmdline_parse(argc, argv, cl, err, errlen);
}

static void test_flags_apply(void **state)
{
	struct mtd_cmdline cl;
	struct mtd_config cfg;
	char err[256];
	(void)state;

	assert_int_equal(parse(&cl, err, sizeof(err), "--interval", "2s", "--no-metrics",
			       "--source=sim", "--qmp", "/run/q.sock", "--name", "web 1",
			       "--foreground", (char *)NULL),
			 0);
	assert_int_equal(cl.action, MTD_CMDLINE_RUN);
	assert_int_equal(cl.nr_vms, 1);
	assert_string_equal(cl.vm[0].qmp, "/run/q.sock");
	assert_string_equal(cl.vm[0].name, "web 1");
	assert_null(cl.vm[0].agent);
	assert_true(cl.foreground);
	assert_false(cl.config_given);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.ctl.interval_ms, 2000);
	assert_int_equal(cfg.metrics_port, 0);
	assert_int_equal(cfg.source, MTD_SOURCE_SIM);

	/* a bad value is named by its flag */
	assert_int_equal(parse(&cl, err, sizeof(err), "--interval", "soon", (char *)NULL), 0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--interval:"));
	assert_int_equal(cfg.ctl.interval_ms, 5000);
}

/* Forty flags: none dropped; the last --interval wins. */
static void test_many_flags(void **state)
{
	char *argv[64], vals[40][32];
	struct mtd_cmdline cl;
	struct mtd_config cfg;
	char err[256];
	int argc = 0;
	(void)state;

	argv[argc++] = (char *)"memtided";
	for (int i = 0; i < 40; i++) {
		snprintf(vals[i], sizeof(vals[i]), "--interval=%ds", i + 1);
		argv[argc++] = vals[i];
	}
	argv[argc] = NULL;
	assert_int_equal(mtd_cmdline_parse(argc, argv, &cl, err, sizeof(err)), 0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.ctl.interval_ms, 40000);
}

/* Several plain-QEMU VMs: --agent and --name belong to the --qmp before them (the first
 * VM's when given before any --qmp); default names qemu, qemu2, ...; two of one name, or
 * two --agent for one VM, are refused. */
static void test_vms(void **state)
{
	struct mtd_cmdline cl;
	char err[256];
	(void)state;

	assert_int_equal(parse(&cl, err, sizeof(err), "--agent", "/a1", "--qmp", "/q1", "--qmp",
			       "/q2", "--name", "db", "--agent", "/a2", "--qmp", "/q3",
			       (char *)NULL),
			 0);
	assert_int_equal(cl.nr_vms, 3);
	assert_string_equal(cl.vm[0].qmp, "/q1");
	assert_string_equal(cl.vm[0].agent, "/a1");
	assert_string_equal(cl.vm[0].name, "qemu");
	assert_string_equal(cl.vm[1].qmp, "/q2");
	assert_string_equal(cl.vm[1].agent, "/a2");
	assert_string_equal(cl.vm[1].name, "db");
	assert_string_equal(cl.vm[2].name, "qemu3");
	assert_null(cl.vm[2].agent);
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", "/q1", "--name", "x", "--qmp", "/q2",
			       "--name", "x", (char *)NULL),
			 -EINVAL);
	assert_non_null(strstr(err, "two VMs named 'x'"));
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", "/q1", "--agent", "/a", "--agent",
			       "/b", (char *)NULL),
			 -EINVAL);
	assert_non_null(strstr(err, "two --agent for one --qmp VM"));
	/* a --name with a control character is refused for any VM, not only the first */
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", "/q1", "--qmp", "/q2", "--name",
			       "b\nc", (char *)NULL),
			 -EINVAL);
	assert_non_null(strstr(err, "control characters"));
}

/* Flags on keys that write the same setting apply in the order given: --metrics-port after
 * --metrics-listen changes the port on that address; --no-metrics after either turns it
 * off; the last of a repeated key takes its place in the order. */
static void test_flag_order(void **state)
{
	struct mtd_cmdline cl;
	struct mtd_config cfg;
	char err[256];
	(void)state;

	assert_int_equal(parse(&cl, err, sizeof(err), "--metrics-listen", "[::1]:9000",
			       "--metrics-port", "9001", "--observe-only", "--state-dir", "/tmp/st",
			       (char *)NULL),
			 0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.metrics_addr, "::1");
	assert_int_equal(cfg.metrics_port, 9001);
	assert_true(cfg.observe_only);
	assert_string_equal(cfg.state_dir, "/tmp/st");

	assert_int_equal(parse(&cl, err, sizeof(err), "--no-metrics", "--metrics-port", "9001",
			       "--metrics-listen", "127.0.0.1:9002", "--metrics-port", "9003",
			       (char *)NULL),
			 0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.metrics_addr, "127.0.0.1");
	assert_int_equal(cfg.metrics_port, 9003);

	assert_int_equal(
	    parse(&cl, err, sizeof(err), "--metrics-port", "9001", "--no-metrics", (char *)NULL),
	    0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.metrics_port, 0);

	assert_int_equal(parse(&cl, err, sizeof(err), "--metrics-listen", "nowhere", (char *)NULL),
			 0);
	mtd_config_default(&cfg);
	assert_int_equal(mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--metrics-listen:"));
}

static void test_refused(void **state)
{
	char longpath[300];
	struct mtd_cmdline cl;
	char err[256];
	(void)state;

	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", longpath, (char *)NULL), -EINVAL);
	assert_non_null(strstr(err, "--qmp must be a socket path"));
	longpath[108] = '\0'; /* 108 bytes: one more than sun_path holds */
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", longpath, (char *)NULL), -EINVAL);
	longpath[107] = '\0';
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", longpath, (char *)NULL), 0);
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", "/q", "--agent", "", (char *)NULL),
			 -EINVAL);
	/* --agent vsock: the kernel's vsock, no socket path */
	assert_int_equal(
	    parse(&cl, err, sizeof(err), "--qmp", "/q", "--agent", "vsock", (char *)NULL), 0);
	assert_string_equal(cl.vm[0].agent, "vsock");
	assert_int_equal(
	    parse(&cl, err, sizeof(err), "--qmp", "/q", "--name", "a\x1b[2Jb", (char *)NULL),
	    -EINVAL);
	assert_non_null(strstr(err, "control characters"));
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", "/q", "--name", "", (char *)NULL),
			 -EINVAL);
	assert_int_equal(parse(&cl, err, sizeof(err), "--agent", "/a", (char *)NULL), -EINVAL);
	assert_non_null(strstr(err, "--agent needs --qmp"));
	assert_int_equal(parse(&cl, err, sizeof(err), "--bogus", (char *)NULL), -EINVAL);
	assert_non_null(strstr(err, "unknown option '--bogus'"));
	assert_int_equal(parse(&cl, err, sizeof(err), "--qmp", (char *)NULL), -EINVAL);
	assert_non_null(strstr(err, "needs a value"));
	assert_int_equal(parse(&cl, err, sizeof(err), "stray", (char *)NULL), -EINVAL);
	assert_non_null(strstr(err, "unexpected argument 'stray'"));
	/* getopt's state is reset: the same line parses the same way again */
	assert_int_equal(parse(&cl, err, sizeof(err), "--bogus", (char *)NULL), -EINVAL);
	assert_int_equal(parse(&cl, err, sizeof(err), "--help", (char *)NULL), 0);
	assert_int_equal(cl.action, MTD_CMDLINE_HELP);
	assert_int_equal(parse(&cl, err, sizeof(err), "--version", "--bogus", (char *)NULL), 0);
	assert_int_equal(cl.action, MTD_CMDLINE_VERSION);
}

static void test_config_text(void **state)
{
	struct mtd_config cfg, before;
	char err[256];
	(void)state;

	mtd_config_default(&cfg);
	assert_int_equal(mtd_config_load_text(&cfg, "t.conf",
					      "; a comment\n[daemon]\ninterval = 1s\n"
					      "[defaults]\nmin = 512M\n",
					      err, sizeof(err)),
			 0);
	assert_int_equal(cfg.ctl.interval_ms, 1000);
	assert_int_equal(cfg.defaults.min_bytes, 512ull << 20);
	before = cfg;
	assert_int_equal(mtd_config_load_text(&cfg, "t.conf",
					      "[daemon]\ninterval = 3s\n[host]\nlow_mark = lots\n",
					      err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "t.conf:4: low_mark must be"));
	assert_memory_equal(&cfg, &before, sizeof(cfg));
	assert_int_equal(mtd_config_load_text(&cfg, "t.conf", "interval\n", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "t.conf:1: not an INI line"));
	assert_int_equal(mtd_config_load_text(&cfg, "t.conf", "[defaults]\nmin = 2G\nmax = 1G\n",
					      err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "above max"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flags_apply), cmocka_unit_test(test_many_flags),
	    cmocka_unit_test(test_vms),         cmocka_unit_test(test_flag_order),
	    cmocka_unit_test(test_refused),     cmocka_unit_test(test_config_text),
	};
	return cmocka_run_group_tests_name("mtd_cmdline", tests, NULL, NULL);
}
