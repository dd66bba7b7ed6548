// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept_cli.c - memtidectl's ept commands (ept_cli.h): the exact -plugin argument for a
 * guest (ept_plugin_arg.c), a table file's state, and switching its instrumentation by hand (measurements,
 * tracing with another tool).  They work on the file, not through memtided.
 */
#include "front/ept_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "access/choose.h"
#include "access/ept_file.h"
#include "base/clock.h"
#include "base/parse.h"
#include "front/domxml_ept.h"
#include "front/ept_plugin_arg.h"

int mtd_ept_domxml_step(const char *xml, const char *plugin, const char *dir, char **after,
			char **changes, char *err, size_t errlen)
{
	char found[PATH_MAX], warn[PATH_MAX + 300] = "";
	struct stat st;
	int n;

	if (!plugin) {
		if (mtd_ept_plugin_path(found, sizeof(found)) < 0)
			snprintf(warn, sizeof(warn),
				 "warning: memtide-ept.so is not installed at %s: QEMU will refuse "
				 "to start the domain until it is (or pass --plugin PATH)\n",
				 found);
		plugin = found;
	} else if (stat(plugin, &st) < 0) {
		snprintf(warn, sizeof(warn),
			 "warning: %s does not exist: QEMU will refuse to start the domain until "
			 "it does\n",
			 plugin);
	}
	if (!warn[0] && stat(plugin, &st) == 0 && !(st.st_mode & S_IROTH))
		snprintf(warn, sizeof(warn),
			 "warning: %s is not readable by other users: QEMU, which libvirt runs "
			 "as its own user, may not load it\n",
			 plugin);
	if (stat(dir, &st) < 0)
		snprintf(warn + strlen(warn), sizeof(warn) - strlen(warn),
			 "warning: %s does not exist yet: memtided makes it when it starts (and "
			 "systemd-tmpfiles at boot); until then the plugin cannot make its table "
			 "and the domain runs without the ept source\n",
			 dir);
	n = mtd_domxml_patch_ept(xml, plugin, dir, after, changes, err, errlen);
	if (n >= 0 && warn[0]) {
		size_t a = strlen(*changes), b = strlen(warn);
		char *all = malloc(a + b + 1);
		if (!all) {
			free(*after);
			free(*changes);
			*after = *changes = NULL;
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		memcpy(all, *changes, a);
		memcpy(all + a, warn, b + 1);
		free(*changes);
		*changes = all;
	}
	return n;
}

static int usage(void)
{
	fprintf(
	    stderr,
	    "usage: memtidectl ept-plugin NAME --memory SIZE [--machine pc|q35] [--dir DIR]\n"
	    "       memtidectl ept-status TABLE\n"
	    "       memtidectl ept-mode TABLE off|always|window TIME  (200ms, 1s; a bare number is "
	    "seconds)\n");
	return 2;
}

static int cmd_plugin(int argc, char **argv)
{
	const char *name = NULL, *dir = MTD_EPT_DIR_DEFAULT;
	uint64_t ram = 0;
	bool q35 = false;
	char plugin[PATH_MAX], arg[PATH_MAX + 400];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--memory") && i + 1 < argc) {
			if (mtd_parse_bytes(argv[++i], &ram) < 0 || ram < (2ULL << 20)) {
				fprintf(stderr, "memtidectl: --memory must be a size such as 1G\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--machine") && i + 1 < argc) {
			q35 = strstr(argv[++i], "q35") != NULL;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			return usage();
		}
	}
	if (!name || !ram)
		return usage();
	if (mtd_ept_plugin_path(plugin, sizeof(plugin)) < 0)
		fprintf(stderr, "memtidectl: warning: memtide-ept.so is not installed at %s\n",
			plugin);
	if (mtd_ept_plugin_arg(plugin, dir, name, ram, q35, arg, sizeof(arg)) < 0) {
		fprintf(stderr, "memtidectl: the name or directory is too long\n");
		return 2;
	}
	printf("-plugin %s\n", arg);
	return 0;
}

static int cmd_status(const char *path, bool json)
{
	struct mtd_ept_file f;
	char why[300];
	uint64_t now;

	if (mtd_ept_file_open(path, 0, &f, why, sizeof(why)) < 0) {
		fprintf(stderr, "memtidectl: %s\n", why);
		return 1;
	}
	now = mtd_mono_ms();
	const struct mtd_ept_header *h = f.h;
#define L(x) (unsigned long long)__atomic_load_n(&h->x, __ATOMIC_RELAXED)
	if (json)
		printf(
		    "{\"qemu_pid\":%d,\"span_bytes\":%llu,\"ram_bytes\":%llu,\"lowmem_bytes\":%llu,"
		    "\"controller_pid\":%d,\"mode\":%u,\"on\":%llu,\"windows\":%llu,"
		    "\"on_ms_total\":%llu,\"resets\":%llu,\"marks\":%llu,\"dropped\":%llu,"
		    "\"heartbeat_age_ms\":%llu}\n",
		    h->qemu_pid, L(span_bytes), L(ram_bytes), L(lowmem_bytes), h->controller_pid,
		    h->mode, L(on), L(windows), L(on_ms_total), L(resets), L(marks), L(dropped),
		    now - (unsigned long long)L(heartbeat_ms));
	else
		printf("%s: QEMU pid %d, span %llu GiB, RAM %llu MiB (low %llu MiB)\n"
		       "  controller %d, mode %s, instrumenting %s\n"
		       "  %llu windows, %llu ms instrumented, %llu resets, %llu leaf updates, "
		       "%llu accesses outside RAM; last poll %llu ms ago\n",
		       path, h->qemu_pid, L(span_bytes) >> 30, L(ram_bytes) >> 20,
		       L(lowmem_bytes) >> 20, h->controller_pid,
		       h->mode == MTD_EPT_MODE_ALWAYS    ? "always"
		       : h->mode == MTD_EPT_MODE_WINDOWS ? "windows"
							 : "off",
		       L(on) ? "yes" : "no", L(windows), L(on_ms_total), L(resets), L(marks),
		       L(dropped), now - (unsigned long long)L(heartbeat_ms));
#undef L
	mtd_ept_file_close(&f);
	return 0;
}

static int cmd_mode(int argc, char **argv)
{
	struct mtd_ept_file f;
	char why[300];
	uint64_t ms = 0;

	if (argc < 3)
		return usage();
	if (!strcmp(argv[2], "window") && (argc != 4 || mtd_parse_ms(argv[3], &ms) < 0 || !ms))
		return usage();
	if (strcmp(argv[2], "off") != 0 && strcmp(argv[2], "always") != 0 &&
	    strcmp(argv[2], "window") != 0)
		return usage();
	if (mtd_ept_file_open(argv[1], 0, &f, why, sizeof(why)) < 0 ||
	    mtd_ept_file_claim(&f, why, sizeof(why)) < 0) {
		fprintf(stderr, "memtidectl: %s\n", why);
		mtd_ept_file_close(&f);
		return 1;
	}
	if (!strcmp(argv[2], "window"))
		mtd_ept_file_request_window(&f, ms);
	else
		mtd_ept_file_set_mode(&f, !strcmp(argv[2], "always") ? MTD_EPT_MODE_ALWAYS
								     : MTD_EPT_MODE_OFF);
	/* The mode stays after we leave: give the claim back without switching it off. */
	__atomic_store_n(&f.h->controller_pid, 0, __ATOMIC_RELEASE);
	f.claimed_by = 0;
	mtd_ept_file_close(&f);
	return 0;
}

int mtd_ept_cli(int argc, char **argv, bool json)
{
	if (!strcmp(argv[0], "ept-plugin"))
		return cmd_plugin(argc, argv);
	if (!strcmp(argv[0], "ept-status") && argc == 2)
		return cmd_status(argv[1], json);
	if (!strcmp(argv[0], "ept-mode"))
		return cmd_mode(argc, argv);
	return usage();
}
