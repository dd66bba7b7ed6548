// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_stat.c - host swap room and compressed-pool cost (swap_stat.h).
 */
#include "act/swap_stat.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ZRAM 32

uint64_t mtd_swap_pool_share(const struct mtd_swap_stat *s, uint64_t swapped_bytes)
{
	uint64_t used = mtd_swap_used(s), pool = mtd_swap_pool(s);

	if (!used || !pool)
		return 0;
	if (swapped_bytes >= used)
		return pool;
	/* swapped * pool / used without overflow: both are below 2^50 in practice, but a
	 * double keeps it safe for any input. */
	return (uint64_t)((double)swapped_bytes * (double)pool / (double)used);
}

uint64_t mtd_swap_room(const struct mtd_swap_stat *s, uint64_t reserve_bytes,
		       uint64_t full_free_bytes, char *why, size_t len)
{
	if (!s->total_bytes) {
		snprintf(why, len,
			 "the host has no swap: set up zram (contrib/memtide-zram-swap, "
			 "docs/operations.md \"Host swap\")");
		return 0;
	}
	if (s->free_bytes <= reserve_bytes ||
	    (full_free_bytes && s->free_bytes <= full_free_bytes)) {
		snprintf(why, len,
			 "host swap full (%llu MiB free of %llu MiB, %llu MiB kept in reserve): "
			 "cold pages stay in guest RAM, nothing is lost",
			 (unsigned long long)(s->free_bytes >> 20),
			 (unsigned long long)(s->total_bytes >> 20),
			 (unsigned long long)(reserve_bytes >> 20));
		return 0;
	}
	return s->free_bytes - reserve_bytes;
}

/* The number after key at the start of line (then " kB" or nothing); false otherwise. */
static bool field_u64(const char *line, const char *key, uint64_t *v)
{
	size_t kl = strlen(key);
	char *e;

	if (strncmp(line, key, kl) != 0)
		return false;
	line += kl;
	while (*line == ' ' || *line == '\t')
		line++;
	if (!isdigit((unsigned char)*line))
		return false;
	errno = 0;
	unsigned long long x = strtoull(line, &e, 10);
	if (errno)
		return false;
	*v = x;
	return true;
}

int mtd_swap_parse_meminfo(const char *text, struct mtd_swap_stat *out)
{
	const char *p = text;
	bool total = false, free_ = false;
	uint64_t kb;

	memset(out, 0, sizeof(*out));
	while (p && *p) {
		if (field_u64(p, "SwapTotal:", &kb)) {
			out->total_bytes = kb * 1024;
			total = true;
		} else if (field_u64(p, "SwapFree:", &kb)) {
			out->free_bytes = kb * 1024;
			free_ = true;
		} else if (field_u64(p, "Zswap:", &kb)) {
			out->zswap_pool_bytes = kb * 1024;
		} else if (field_u64(p, "Zswapped:", &kb)) {
			out->zswap_stored_bytes = kb * 1024;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!total || !free_ || out->free_bytes > out->total_bytes)
		return -EPROTO;
	return 0;
}

int mtd_swap_parse_swaps(const char *text, unsigned *zram, size_t max, unsigned *nr_devices)
{
	const char *p = text;
	int nz = 0;
	bool header = false;

	*nr_devices = 0;
	while (p && *p) {
		if (!header) {
			if (strncmp(p, "Filename", 8) != 0)
				return -EPROTO;
			header = true;
		} else if (*p && *p != '\n') {
			uint64_t n;
			(*nr_devices)++;
			if (field_u64(p, "/dev/zram", &n) && n < 1u << 20 && (size_t)nz < max)
				zram[nz++] = (unsigned)n;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return header ? nz : -EPROTO;
}

int mtd_swap_parse_mm_stat(const char *text, uint64_t *stored_bytes, uint64_t *pool_bytes)
{
	uint64_t v[3];
	char *e;

	/* orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages ... */
	for (int i = 0; i < 3; i++) {
		while (text && (*text == ' ' || *text == '\t'))
			text++;
		if (!text || !isdigit((unsigned char)*text))
			return -EPROTO;
		errno = 0;
		v[i] = strtoull(text, &e, 10);
		if (errno)
			return -EPROTO;
		text = e;
	}
	*stored_bytes = v[0];
	*pool_bytes = v[2];
	return 0;
}

static char *read_small(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 65536);
	if (!buf) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int mtd_swap_read(const char *proc_root, const char *sys_root, struct mtd_swap_stat *out)
{
	char path[256], *t;
	unsigned zram[MAX_ZRAM], nd = 0;
	int nz, rc;

	if (!proc_root)
		proc_root = "/proc";
	if (!sys_root)
		sys_root = "/sys";
	snprintf(path, sizeof(path), "%s/meminfo", proc_root);
	t = read_small(path);
	if (!t)
		return -errno ? -errno : -EIO;
	rc = mtd_swap_parse_meminfo(t, out);
	free(t);
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/swaps", proc_root);
	t = read_small(path);
	nz = t ? mtd_swap_parse_swaps(t, zram, MAX_ZRAM, &nd) : 0;
	free(t);
	out->nr_devices = nd;
	for (int i = 0; i < nz; i++) {
		uint64_t stored, pool;
		snprintf(path, sizeof(path), "%s/block/zram%u/mm_stat", sys_root, zram[i]);
		t = read_small(path);
		if (t && mtd_swap_parse_mm_stat(t, &stored, &pool) == 0) {
			out->zram_stored_bytes += stored;
			out->zram_pool_bytes += pool;
			out->nr_zram++;
		}
		free(t);
	}
	return 0;
}
