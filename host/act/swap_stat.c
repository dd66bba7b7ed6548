// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_stat.c - host swap room and compressed-pool cost (swap_stat.h): the kernel's files
 * parsed, and the room before a write fails counted in the kernel's order of devices.
 */
#include "act/swap_stat.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)

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

void mtd_swap_grant_why(const struct mtd_swap_grant *g, uint64_t reserve_bytes, char *why,
			size_t len)
{
	const struct mtd_swap_stat *s = &g->sw;
	char others[96] = "";

	if (!s->total_bytes) {
		snprintf(why, len,
			 "the host has no swap: set up zram (contrib/memtide-zram-swap, "
			 "docs/operations.md \"Host swap\")");
		return;
	}
	if (g->others_bytes)
		snprintf(others, sizeof(others),
			 "; %" PRIu64
			 " MiB of the room are granted to other VMs' host-side eviction now",
			 g->others_bytes / MiB);
	if (g->binding >= 0 && (unsigned)g->binding < s->nr_listed) {
		const struct mtd_swap_device *d = &s->dev[g->binding];
		uint64_t left = d->limit_bytes > d->pool_bytes ? d->limit_bytes - d->pool_bytes : 0;
		snprintf(why, len,
			 "host swap full: zram%u's pool uses %" PRIu64 " of its %" PRIu64
			 " MiB memory limit (mem_limit; %" PRIu64 " MiB left, %" PRIu64
			 " MiB kept in reserve%s), past which the kernel keeps pages in RAM "
			 "behind swap entries: cold pages stay in guest RAM, nothing is lost",
			 d->zram_nr, d->pool_bytes / MiB, d->limit_bytes / MiB, left / MiB,
			 reserve_bytes / MiB, others);
		return;
	}
	snprintf(why, len,
		 "host swap full (%" PRIu64 " MiB free of %" PRIu64 " MiB, %" PRIu64
		 " MiB kept in reserve%s): cold pages stay in guest RAM, nothing is lost",
		 s->free_bytes / MiB, s->total_bytes / MiB, reserve_bytes / MiB, others);
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

/* The next whitespace-separated token of *p into buf (NUL-terminated); false at the line's
 * end. */
static bool token(const char **p, char *buf, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s || *s == '\n')
		return false;
	while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
		if (n + 1 < len)
			buf[n++] = *s;
		s++;
	}
	buf[n] = '\0';
	*p = s;
	return true;
}

static bool parse_u64(const char *t, uint64_t *v)
{
	char *e;

	if (!isdigit((unsigned char)*t))
		return false;
	errno = 0;
	unsigned long long x = strtoull(t, &e, 10);
	if (errno || *e)
		return false;
	*v = x;
	return true;
}

int mtd_swap_parse_swaps(const char *text, struct mtd_swap_device *out, size_t max)
{
	const char *p = text;
	bool header = false;
	int n = 0;

	while (p && *p) {
		if (!header) {
			if (strncmp(p, "Filename", 8) != 0)
				return -EPROTO;
			header = true;
		} else if (*p != '\n') {
			struct mtd_swap_device d = {0};
			char type[32], size[32], used[32], prio[32];
			uint64_t v;
			const char *q = p;
			if (!token(&q, d.name, sizeof(d.name)) || !token(&q, type, sizeof(type)) ||
			    !token(&q, size, sizeof(size)) || !token(&q, used, sizeof(used)) ||
			    !token(&q, prio, sizeof(prio)))
				return -EPROTO;
			char *e;
			long pr = strtol(prio, &e, 10);
			if (*e || pr < -32768 || pr > 32767 || !parse_u64(size, &d.size_bytes) ||
			    !parse_u64(used, &d.used_bytes))
				return -EPROTO;
			d.priority = (int)pr;
			d.size_bytes *= 1024;
			d.used_bytes *= 1024;
			if (strncmp(d.name, "/dev/zram", 9) == 0 && parse_u64(d.name + 9, &v) &&
			    v < 1u << 20) {
				d.zram = true;
				d.zram_nr = (unsigned)v;
			}
			if ((size_t)n < max)
				out[n] = d;
			n++;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return header ? n : -EPROTO;
}

/* The first count whitespace-separated numbers of text. */
static int numbers(const char *text, uint64_t *v, int count)
{
	char t[32];

	for (int i = 0; i < count; i++)
		if (!text || !token(&text, t, sizeof(t)) || !parse_u64(t, &v[i]))
			return -EPROTO;
	return 0;
}

int mtd_swap_parse_mm_stat(const char *text, struct mtd_swap_device *d)
{
	uint64_t v[4];

	/* orig_data_size compr_data_size mem_used_total mem_limit mem_used_max same_pages ... */
	if (numbers(text, v, 4) < 0)
		return -EPROTO;
	d->stored_bytes = v[0];
	d->pool_bytes = v[2];
	d->limit_bytes = v[3];
	return 0;
}

/* Room of one device before a write to it fails; *binds: its pool's limit comes first. */
static uint64_t device_room(const struct mtd_swap_device *d, bool *binds)
{
	uint64_t free = d->size_bytes > d->used_bytes ? d->size_bytes - d->used_bytes : 0;

	*binds = false;
	if (!d->zram || !d->zram_known || !d->limit_bytes)
		return free;
	/* A page takes at most a page of pool (one that does not compress is stored whole):
	 * counting it so never writes past the limit, and the room shrinks towards it. */
	uint64_t pool = d->limit_bytes > d->pool_bytes ? d->limit_bytes - d->pool_bytes : 0;
	pool &= ~(uint64_t)4095;
	if (pool < free) {
		*binds = true;
		return pool;
	}
	return free;
}

uint64_t mtd_swap_room(const struct mtd_swap_stat *s, int *binding)
{
	unsigned n = s->nr_listed < MTD_SWAP_MAX_DEVICES ? s->nr_listed : MTD_SWAP_MAX_DEVICES;
	bool done[MTD_SWAP_MAX_DEVICES] = {false};
	uint64_t room = 0;

	if (binding)
		*binding = -1;
	if (!n)
		return s->free_bytes;
	/* Priority groups, highest first: the kernel fills a group (round robin inside it)
	 * before it takes a slot of the next. */
	for (;;) {
		int top = 0;
		bool any = false;
		for (unsigned i = 0; i < n; i++)
			if (!done[i] && (!any || s->dev[i].priority > top)) {
				top = s->dev[i].priority;
				any = true;
			}
		if (!any)
			break;
		uint64_t sum = 0, least = UINT64_MAX;
		unsigned members = 0;
		int binds_at = -1;
		for (unsigned i = 0; i < n; i++) {
			bool binds;
			if (done[i] || s->dev[i].priority != top)
				continue;
			done[i] = true;
			uint64_t r = device_room(&s->dev[i], &binds);
			sum += r;
			members++;
			if (binds && (binds_at < 0 || r < least)) {
				binds_at = (int)i;
				least = r;
			}
		}
		if (binds_at < 0) {
			room += sum;
			continue;
		}
		/* Round robin hands the device whose pool fills first one page in `members`:
		 * the group takes that many times its room, then writes start to fail. */
		uint64_t g = least * members;
		room += g < sum ? g : sum;
		if (binding)
			*binding = binds_at;
		break;
	}
	return room < s->free_bytes ? room : s->free_bytes; /* the two files read apart */
}

void mtd_swap_grant_from(struct mtd_swap_grant *g, uint64_t reserve_bytes,
			 uint64_t outstanding_bytes, uint64_t want_bytes)
{
	uint64_t room = mtd_swap_room(&g->sw, &g->binding);

	g->room_bytes = room > reserve_bytes ? room - reserve_bytes : 0;
	g->others_bytes = outstanding_bytes;
	g->bytes = g->room_bytes > outstanding_bytes ? g->room_bytes - outstanding_bytes : 0;
	if (g->bytes > want_bytes)
		g->bytes = want_bytes;
}

bool mtd_swap_full_after(const struct mtd_swap_grant *g)
{
	return g->binding < 0 || g->room_bytes < (2u << 20);
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
	int n, rc;

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
	n = t ? mtd_swap_parse_swaps(t, out->dev, MTD_SWAP_MAX_DEVICES) : 0;
	free(t);
	if (n < 0)
		n = 0;
	out->nr_devices = (unsigned)n;
	out->nr_listed = (unsigned)n;
	for (unsigned i = 0; i < out->nr_listed && i < MTD_SWAP_MAX_DEVICES; i++) {
		struct mtd_swap_device *d = &out->dev[i];
		if (!d->zram)
			continue;
		snprintf(path, sizeof(path), "%s/block/zram%u/mm_stat", sys_root, d->zram_nr);
		t = read_small(path);
		d->zram_known = t && mtd_swap_parse_mm_stat(t, d) == 0;
		free(t);
		if (!d->zram_known)
			continue;
		out->zram_stored_bytes += d->stored_bytes;
		out->zram_pool_bytes += d->pool_bytes;
		out->nr_zram++;
	}
	return 0;
}
