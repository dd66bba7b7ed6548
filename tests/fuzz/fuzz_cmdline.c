// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_cmdline.c - libFuzzer target for memtided's command line (host/daemon/cmdline.c).
 *
 * Each input is an argument vector: the bytes split at NUL into at most 63 arguments after
 * "memtided".  Parsed with mtd_cmdline_parse; on success the config-key flags are applied
 * over the defaults and the result goes through the controller config check memtided runs
 * next.  Checked: a parse that succeeds only hands on socket paths that fit a unix address,
 * VM names of 1..127 bytes with no control character and no two alike, and each config key
 * once; a failure always says why.
 * Parsing twice gives the same answer (getopt's global state is reset each time).
 * Seeds (tests/fuzz/corpus/cmdline/) are the command lines of the docs and tests.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cmdline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

#define MAX_ARGS 64

static int split(char *buf, size_t size, char **argv, char **copy)
{
	int argc = 0;
	size_t off = 0;

	argv[argc++] = (char *)"memtided";
	while (off < size && argc < MAX_ARGS - 1) {
		argv[argc++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	argv[argc] = NULL;
	memcpy(copy, argv, sizeof(*argv) * (size_t)(argc + 1));
	return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mtd_config cfg;
	char *argv[MAX_ARGS], *again[MAX_ARGS];
	struct mtd_cmdline cl, cl2;
	char err[256], err2[256];
	char *buf = malloc(size + 1);
	int argc, rc, rc2;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	argc = split(buf, size, argv, again);
	err[0] = '\0';
	rc = mtd_cmdline_parse(argc, argv, &cl, err, sizeof(err));
	if (rc == 0 && cl.action == MTD_CMDLINE_RUN) {
		CHECK(cl.nr_vms <= MTD_MAX_QMP_VMS && cl.nr_set <= MTD_FLAG_NR);
		for (unsigned v = 0; v < cl.nr_vms; v++) {
			const struct mtd_cmdline_vm *vm = &cl.vm[v];
			size_t n = strlen(vm->name);

			CHECK(vm->qmp[0] && strlen(vm->qmp) < 108);
			/* a socket path, or vsock:PATH (memtided the vhost-user back end on PATH) */
			const char *sock = vm->agent && strncmp(vm->agent, "vsock:", 6) == 0
					       ? vm->agent + 6
					       : vm->agent;
			CHECK(!sock || (sock[0] && strlen(sock) < 108));
			CHECK(n > 0 && n < 128);
			for (size_t i = 0; i < n; i++)
				CHECK((unsigned char)vm->name[i] >= 0x20 && vm->name[i] != 0x7f);
			for (unsigned k = 0; k < v; k++)
				CHECK(strcmp(cl.vm[k].name, vm->name) != 0);
		}
		CHECK(cl.nr_vms || !cl.vm[0].agent);
		for (unsigned i = 0; i < cl.nr_set; i++)
			for (unsigned k = 0; k < i; k++)
				CHECK(cl.set[k].key != cl.set[i].key);
		CHECK(strlen(cl.config_path) < MTD_PATH_MAX);
		mtd_config_default(&cfg);
		if (mtd_cmdline_apply(&cl, &cfg, err, sizeof(err)) == 0) {
			(void)mtd_ctl_config_finish(&cfg.ctl, err, sizeof(err));
			(void)mtd_config_validate(&cfg, err, sizeof(err));
		} else
			CHECK(err[0] == '-');
	} else if (rc != 0) {
		CHECK(err[0] != '\0');
	}
	/* the same vector again, in its first order (getopt permutes argv in place) */
	rc2 = mtd_cmdline_parse(argc, again, &cl2, err2, sizeof(err2));
	CHECK(rc == rc2);
	if (rc == 0)
		CHECK(cl.action == cl2.action && cl.nr_vms == cl2.nr_vms &&
		      cl.nr_set == cl2.nr_set && cl.config_path == cl2.config_path &&
		      (!cl.nr_vms || cl.vm[0].qmp == cl2.vm[0].qmp) &&
		      /* names are settled only for a run (--help stops before) */
		      (cl.action != MTD_CMDLINE_RUN || !cl.nr_vms ||
		       !strcmp(cl.vm[0].name, cl2.vm[0].name)));
	free(buf);
	return 0;
}
