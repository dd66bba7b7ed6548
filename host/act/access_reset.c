// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * access_reset.c - a KVM guest's access history reset through QEMU's clear_refs
 * (access_reset.h says why, and what it costs the guest).
 */
#include "act/access_reset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* O_APPEND: the kernel's clear_refs ignores the offset; a test's stand-in file keeps both
 * writes in order. */
static int write_cmd(const char *path, const char *cmd)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = strlen(cmd);
	ssize_t w = write(fd, cmd, n);
	int rc = w == (ssize_t)n ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

int mtd_access_reset(const char *proc_root, int pid, char *why, size_t whylen)
{
	char path[256];
	int rc;

	why[0] = '\0';
	snprintf(path, sizeof(path), "%s/%d/clear_refs", proc_root ? proc_root : "/proc", pid);
	/* Soft-dirty first: its notifier call moves KVM's accessed bits to PG_referenced, which
	 * "1" then clears with the host PTEs' young bits. */
	rc = write_cmd(path, "4\n");
	if (rc < 0) {
		snprintf(why, whylen,
			 "%s: '4' (soft-dirty, which makes KVM drop its accessed bits): %s", path,
			 strerror(-rc));
		return rc;
	}
	rc = write_cmd(path, "1\n");
	if (rc < 0)
		snprintf(why, whylen, "%s: '1' (the host's accessed bits): %s", path,
			 strerror(-rc));
	return rc;
}
