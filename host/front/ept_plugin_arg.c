// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept_plugin_arg.c - the ept plugin's -plugin argument (ept_plugin_arg.h): where the plugin
 * is installed, and the argument for one guest, with the RAM split QEMU makes around the
 * PCI hole (guest_layout.c's rules).  Shared by `memtidectl ept-plugin` (ept_cli.c) and
 * domxml-patch --ept (domxml_ept.c).
 */
#include "front/ept_plugin_arg.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access/ept_file.h"

#define GiB (1ULL << 30)

int mtd_ept_plugin_path(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/../lib/memtide/memtide-ept.so", exe);
			char real[PATH_MAX];
			if (realpath(out, real)) {
				snprintf(out, len, "%s", real);
				return 0;
			}
		}
	}
	snprintf(out, len, "/usr/lib/memtide/memtide-ept.so");
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

/* Append s to out at *n with every ',' doubled: QEMU's option parser reads ",," as a comma
 * inside a value and a single ',' as the start of the next option. */
static void put_escaped(char *out, size_t len, size_t *n, const char *s)
{
	for (; *s && *n + 2 < len; s++) {
		out[(*n)++] = *s;
		if (*s == ',')
			out[(*n)++] = ',';
	}
	if (*s)
		*n = len; /* did not fit */
	else
		out[*n] = '\0';
}

int mtd_ept_plugin_arg(const char *plugin, const char *dir, const char *name, uint64_t ram,
		       bool q35, char *out, size_t len)
{
	char table[300], tail[96];
	uint64_t low = 0;
	size_t n = 0;

	if (mtd_ept_path(dir, name, table, sizeof(table)) < 0)
		return -ENAMETOOLONG;
	/* the split QEMU 7.2 makes (guest_layout.c's rules) */
	if (q35 && ram >= 0xb0000000ULL)
		low = 2 * GiB;
	else if (!q35 && ram >= 0xe0000000ULL)
		low = 3 * GiB;
	snprintf(tail, sizeof(tail), ",ram=%" PRIu64 "M", ram >> 20);
	if (low)
		snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), ",lowmem=%" PRIu64 "M",
			 low >> 20);
	if (len == 0)
		return -ENOSPC;
	out[0] = '\0';
	put_escaped(out, len, &n, plugin);
	if (n < len && n + 7 < len) {
		memcpy(out + n, ",table=", 8);
		n += 7;
	} else {
		n = len;
	}
	if (n < len)
		put_escaped(out, len, &n, table);
	if (n >= len || n + strlen(tail) >= len)
		return -ENOSPC;
	memcpy(out + n, tail, strlen(tail) + 1);
	return 0;
}
