// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * history.c - the per-VM audit trail on disk (history.h).
 *
 * Each entry is encoded with json-c (names are libvirt's, i.e. anyone's: json-c escapes
 * them), then written with one write(2) on an O_APPEND descriptor, so entries from a VM's
 * loop never interleave and a crash loses at most the entry being written.
 */
#include "daemon/history.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

int mtd_history_path(const char *state_dir, const char *vm, char *buf, size_t len)
{
	size_t off;
	int n = snprintf(buf, len, "%s/history/", state_dir);

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	off = (size_t)n;
	for (const char *p = vm; *p; p++) {
		unsigned char c = (unsigned char)*p;
		bool escape = c == '/' || c == '%' || c < 0x20 || (p == vm && c == '.');
		n = escape ? snprintf(buf + off, len - off, "%%%02X", c)
			   : snprintf(buf + off, len - off, "%c", c);
		if (n < 0 || (size_t)n >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)n;
	}
	n = snprintf(buf + off, len - off, ".jsonl");
	return n < 0 || (size_t)n >= len - off ? -ENAMETOOLONG : 0;
}

static void iso_time(uint64_t unix_ms, char *buf, size_t len)
{
	time_t s = (time_t)(unix_ms / 1000);
	char sec[32];
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.31s.%03uZ", sec, (unsigned)(unix_ms % 1000));
}

int mtd_history_append(const char *state_dir, const struct mtd_history_entry *e)
{
	char path[512], dir[512], when[48];
	struct json_object *o;
	struct stat sb;
	int fd, rc = 0;

	if (mtd_history_path(state_dir, e->vm, path, sizeof(path)) < 0 ||
	    snprintf(dir, sizeof(dir), "%s/history", state_dir) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	/* The state directory itself too: systemd makes it (StateDirectory=), a memtided run by
	 * hand or from `make install` may find none. */
	if ((mkdir(state_dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST))
		return -errno;
	/* Step 1: rotate a full file (one older file is kept). */
	if (stat(path, &sb) == 0 && sb.st_size >= (off_t)MTD_HISTORY_MAX_BYTES) {
		char old[520];
		snprintf(old, sizeof(old), "%s.1", path);
		if (rename(path, old) < 0)
			return -errno;
	}
	/* Step 2: the line. */
	iso_time(e->unix_ms, when, sizeof(when));
	o = json_object_new_object();
	json_object_object_add(o, "time", json_object_new_string(when));
	json_object_object_add(o, "vm", json_object_new_string(e->vm));
	json_object_object_add(o, "what", json_object_new_string(e->what));
	json_object_object_add(o, "before_bytes", json_object_new_int64((int64_t)e->before_bytes));
	json_object_object_add(o, "after_bytes", json_object_new_int64((int64_t)e->after_bytes));
	json_object_object_add(o, "reason", json_object_new_string(e->reason));
	json_object_object_add(o, "source", json_object_new_string(e->source));
	json_object_object_add(o, "observe", json_object_new_boolean(e->observe));
	char line[1024];
	int tlen = snprintf(line, sizeof(line), "%s\n",
			    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	if (tlen < 0 || (size_t)tlen >= sizeof(line))
		return -E2BIG;
	/* Step 3: one append. */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, line, (size_t)tlen) != (ssize_t)tlen)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}
