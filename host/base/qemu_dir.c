// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qemu_dir.c - the directories QEMU writes into (qemu_dir.h): made root:kvm, group-writable,
 * when memtided finds them missing.
 */
#include "base/qemu_dir.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mtd_qemu_dir_make(const char *dir, mode_t group_mode)
{
	char tmp[PATH_MAX];
	struct group *g;

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp) || tmp[0] != '/')
		return -EINVAL;
	for (char *s = tmp + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	/* 0700 until its group and mode are set: never open to others in between. */
	if (mkdir(tmp, 0700) < 0)
		return errno == EEXIST ? 0 : -errno;
	g = getgrnam(MTD_QEMU_GROUP);
	if (g && chown(tmp, 0, g->gr_gid) == 0)
		return chmod(tmp, group_mode) < 0 ? -errno : 0;
	return chmod(tmp, 0755) < 0 ? -errno : 0;
}
