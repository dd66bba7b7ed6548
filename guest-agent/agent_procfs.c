// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_procfs.c - procfs text, read and parsed: meminfo, vmstat, PSI, iomem (agent.h);
 * the stats and the hello are put together from them by agent_report.c.
 *
 * Each file is read whole with one read loop into a bounded buffer (the largest, /proc/vmstat,
 * is ~5 KiB on 6.1; /proc/iomem on a big guest ~4 KiB) and parsed by a pure function, which
 * the tests run against this machine's real files.  A file that is absent or unreadable is a
 * missing capability: stats leave PSI out, hello reports no RAM layout, and so on.
 *
 * Units: /proc/meminfo is in kB (KiB), turned into bytes; /proc/vmstat counters are pages
 * or events, sent as they are; PSI totals are microseconds.  Values are clamped into the
 * protocol's ranges so that a kernel oddity never makes a report unsendable.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

uint64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void agent_path(const struct agent_config *c, const char *p, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s", c ? c->sys_root : "", p);
}

long agent_read_file(const char *path, char *buf, size_t cap)
{
	size_t len = 0;
	int fd;

	if (cap == 0)
		return -EINVAL;
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len + 1 >= cap) {
		char probe;

		/* full buffer: is there more? */
		if (read(fd, &probe, 1) > 0) {
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	buf[len] = '\0';
	return (long)len;
}

int agent_write_file(const char *path, const char *s)
{
	size_t len = strlen(s);
	ssize_t n;
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = write(fd, s, len);
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return (size_t)n == len ? 0 : -EIO;
}

static uint64_t clamp(uint64_t v, uint64_t max)
{
	return v > max ? max : v;
}

/* Value of "Key:" in meminfo text (kB -> bytes); false when absent. */
bool agent_meminfo_get(const char *text, const char *key, uint64_t *bytes)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			char *end;
			unsigned long long kb = strtoull(p + klen + 1, &end, 10);

			if (end == p + klen + 1)
				return false;
			*bytes = clamp(kb, PROTO_BYTES_MAX >> 10) << 10;
			return true;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

int agent_parse_meminfo(const char *text, struct proto_stats *st)
{
	if (!agent_meminfo_get(text, "MemTotal", &st->mem_total_bytes) ||
	    !agent_meminfo_get(text, "MemFree", &st->mem_free_bytes))
		return -EINVAL;
	/* optional lines: MemAvailable appeared in 3.14; the rest are old */
	if (!agent_meminfo_get(text, "MemAvailable", &st->mem_available_bytes))
		st->mem_available_bytes = st->mem_free_bytes;
	agent_meminfo_get(text, "Cached", &st->cached_bytes);
	agent_meminfo_get(text, "AnonPages", &st->anon_bytes);
	agent_meminfo_get(text, "Shmem", &st->shmem_bytes);
	agent_meminfo_get(text, "SwapTotal", &st->swap_total_bytes);
	agent_meminfo_get(text, "SwapFree", &st->swap_free_bytes);
	st->mem_free_bytes = clamp(st->mem_free_bytes, st->mem_total_bytes);
	st->swap_free_bytes = clamp(st->swap_free_bytes, st->swap_total_bytes);
	return 0;
}

bool agent_vmstat_get(const char *text, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			char *end;
			unsigned long long n = strtoull(p + klen + 1, &end, 10);

			if (end == p + klen + 1)
				return false;
			*v = clamp(n, PROTO_COUNTER_MAX);
			return true;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

int agent_parse_vmstat(const char *text, struct proto_stats *st)
{
	if (!agent_vmstat_get(text, "pgmajfault", &st->pgmajfault))
		return -EINVAL;
	/* before 5.9 there was one workingset_refault counter, all of it page cache */
	if (!agent_vmstat_get(text, "workingset_refault_file", &st->refault_file))
		agent_vmstat_get(text, "workingset_refault", &st->refault_file);
	agent_vmstat_get(text, "workingset_refault_anon", &st->refault_anon);
	agent_vmstat_get(text, "pswpin", &st->pswpin);
	agent_vmstat_get(text, "pswpout", &st->pswpout);
	return 0;
}

/* "name=" then a number, at *p; advances *p past it.  d or u receives the number. */
static bool psi_field(const char **p, const char *name, double *d, unsigned long long *u)
{
	size_t n = strlen(name);
	char *end;

	if (!d && !u)
		return false;
	while (**p == ' ')
		(*p)++;
	if (strncmp(*p, name, n) != 0 || (*p)[n] != '=')
		return false;
	*p += n + 1;
	errno = 0;
	if (d)
		*d = strtod(*p, &end);
	else
		*u = strtoull(*p, &end, 10);
	if (end == *p || errno)
		return false;
	*p = end;
	return true;
}

/* One PSI line: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0". */
static bool psi_line(const char *text, const char *kind, double *a10, double *a60, uint64_t *total)
{
	const char *p = strstr(text, kind);
	unsigned long long t = 0;
	double x300;

	if (!p || (p != text && p[-1] != '\n'))
		return false;
	p += strlen(kind);
	if (!psi_field(&p, "avg10", a10, NULL) || !psi_field(&p, "avg60", a60, NULL) ||
	    !psi_field(&p, "avg300", &x300, NULL) || !psi_field(&p, "total", NULL, &t))
		return false;
	if (!(*a10 >= 0 && *a10 <= 100) || !(*a60 >= 0 && *a60 <= 100))
		return false;
	*total = clamp(t, PROTO_COUNTER_MAX);
	return true;
}

int agent_parse_psi(const char *text, struct proto_psi *psi)
{
	if (!psi_line(text, "some", &psi->some_avg10, &psi->some_avg60, &psi->some_total_us))
		return -EINVAL;
	/* "full" exists for memory since 4.20's PSI itself; tolerate its absence */
	if (!psi_line(text, "full", &psi->full_avg10, &psi->full_avg60, &psi->full_total_us))
		psi->full_avg10 = psi->full_avg60 = 0, psi->full_total_us = 0;
	return 0;
}

int agent_parse_iomem(const char *text, struct proto_range *r, uint32_t max)
{
	const char *p = text;
	uint32_t n = 0;
	bool zeros = true;

	while (p && *p) {
		unsigned long long s = 0, e = 0;
		const char *q = NULL;
		char *end;

		/* top-level lines only: nested resources are indented.  "START-END : name" */
		if (*p != ' ') {
			s = strtoull(p, &end, 16);
			if (end != p && *end == '-') {
				const char *e0 = end + 1;

				e = strtoull(e0, &end, 16);
				if (end != e0 && strncmp(end, " : ", 3) == 0)
					q = end + 3;
			}
		}
		if (q && strncmp(q, "System RAM", 10) == 0 && (q[10] == '\n' || q[10] == '\0')) {
			if (s || e)
				zeros = false;
			if (e >= s && e < PROTO_PHYS_ADDR_MAX && n < max &&
			    (n == 0 || s >= r[n - 1].start + r[n - 1].bytes)) {
				r[n].start = s;
				r[n].bytes = e - s + 1;
				n++;
			}
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return zeros ? 0 : (int)n;
}
