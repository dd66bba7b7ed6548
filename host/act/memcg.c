// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memcg.c - one cgroup v2 memory controller's figures and memory.reclaim (memcg.h).
 */
#include "act/memcg.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "key value" at the start of line: true and *v. */
static bool keyval(const char *line, const char *key, uint64_t *v)
{
	size_t kl = strlen(key);

	if (strncmp(line, key, kl) != 0 || line[kl] != ' ')
		return false;
	const char *s = line + kl + 1;
	if (!isdigit((unsigned char)*s))
		return false;
	char *e;
	errno = 0;
	unsigned long long x = strtoull(s, &e, 10);
	if (errno)
		return false;
	*v = x;
	return true;
}

int mtd_memcg_parse_stat(const char *text, struct mtd_memcg_stat *out)
{
	bool anon = false;

	for (const char *p = text; p && *p;) {
		keyval(p, "file", &out->file_bytes);
		keyval(p, "workingset_refault_anon", &out->refault_anon);
		keyval(p, "workingset_refault_file", &out->refault_file);
		keyval(p, "pgmajfault", &out->pgmajfault);
		if (keyval(p, "anon", &out->anon_bytes))
			anon = true;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return anon ? 0 : -EPROTO;
}

/* The number after key (e.g. "total=") in line: true and *v. */
static bool after_u64(const char *line, const char *key, uint64_t *v)
{
	const char *t = strstr(line, key);

	if (!t)
		return false;
	t += strlen(key);
	if (!isdigit((unsigned char)*t))
		return false;
	char *e;
	errno = 0;
	unsigned long long x = strtoull(t, &e, 10);
	if (errno)
		return false;
	*v = x;
	return true;
}

int mtd_memcg_parse_pressure(const char *text, struct mtd_memcg_stat *out)
{
	const char *some = strstr(text, "some ");
	const char *full = strstr(text, "full ");

	if (!some || !after_u64(some, "total=", &out->psi_some_us))
		return -EPROTO;
	if (strncmp(some, "some avg10=", 11) == 0) {
		char *e;
		errno = 0;
		double avg = strtod(some + 11, &e);
		if (!errno && e != some + 11)
			out->psi_some_avg10 = avg;
	}
	if (full)
		(void)after_u64(full, "total=", &out->psi_full_us);
	out->has_psi = true;
	return 0;
}

int mtd_memcg_parse_limit(const char *text, uint64_t *bytes)
{
	if (strncmp(text, "max", 3) == 0) {
		*bytes = UINT64_MAX;
		return 0;
	}
	if (!isdigit((unsigned char)text[0]))
		return -EPROTO;
	char *e;
	errno = 0;
	unsigned long long x = strtoull(text, &e, 10);
	if (errno)
		return -EPROTO;
	*bytes = x;
	return 0;
}

/* The whole of dir/name into buf (NUL-terminated).  0 or -errno. */
static int slurp(const char *dir, const char *name, char *buf, size_t len)
{
	char path[512];
	size_t got = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;
			close(fd);
			return rc;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	return 0;
}

int mtd_memcg_read(const char *dir, struct mtd_memcg_stat *out)
{
	char *buf = calloc(1, 16384);
	int rc;

	memset(out, 0, sizeof(*out));
	out->high_bytes = out->max_bytes = UINT64_MAX;
	if (!buf)
		return -ENOMEM;
	rc = slurp(dir, "memory.current", buf, 16384);
	if (rc == 0)
		rc = mtd_memcg_parse_limit(buf, &out->current_bytes);
	if (rc == 0)
		rc = slurp(dir, "memory.stat", buf, 16384);
	if (rc == 0)
		rc = mtd_memcg_parse_stat(buf, out);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	if (slurp(dir, "memory.swap.current", buf, 16384) == 0 &&
	    mtd_memcg_parse_limit(buf, &out->swap_bytes) == 0)
		out->has_swap = true;
	if (slurp(dir, "memory.pressure", buf, 16384) == 0)
		(void)mtd_memcg_parse_pressure(buf, out);
	if (slurp(dir, "memory.high", buf, 16384) == 0 &&
	    mtd_memcg_parse_limit(buf, &out->high_bytes) == 0 &&
	    slurp(dir, "memory.max", buf, 16384) == 0 &&
	    mtd_memcg_parse_limit(buf, &out->max_bytes) == 0)
		out->has_limits = true;
	free(buf);
	return 0;
}

int mtd_memcg_reclaim(const char *dir, uint64_t bytes)
{
	char path[512], arg[32];
	int fd, n;

	snprintf(path, sizeof(path), "%s/memory.reclaim", dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(arg, sizeof(arg), "%" PRIu64, bytes);
	ssize_t w = write(fd, arg, (size_t)n);
	int rc = w == n ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}
