// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lru_gen.c - the host's MGLRU for one memory cgroup: its switch, its generations, its
 * commands (lru_gen.h).
 */
#include "act/lru_gen.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MAX (8u << 20) /* the file for thousands of memcgs stays far below */

int mtd_lru_gen_enabled(const char *sys_root)
{
	char path[256], buf[32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/kernel/mm/lru_gen/enabled", sys_root ? sys_root : "/sys");
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EPROTO;
	}
	fclose(f);
	if (buf[0] == 'y' || buf[0] == 'Y')
		return 1;
	if (buf[0] == 'n' || buf[0] == 'N')
		return 0;
	char *e;
	errno = 0;
	unsigned long caps = strtoul(buf, &e, 0);
	if (errno || e == buf)
		return -EPROTO;
	return (caps & 1) ? 1 : 0;
}

/* cg_path itself or a cgroup under it. */
static bool under(const char *path, const char *cg_path)
{
	size_t n = strlen(cg_path);

	if (n == 1 && cg_path[0] == '/')
		return true;
	while (n > 1 && cg_path[n - 1] == '/')
		n--;
	return strncmp(path, cg_path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Up to 4 unsigned numbers from s; trailing marks (' ', 'x', '~') after each are skipped. */
static int numbers(const char *s, uint64_t *v, int max)
{
	int n = 0;

	while (*s && n < max) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!isdigit((unsigned char)*s))
			break;
		char *e;
		errno = 0;
		unsigned long long x = strtoull(s, &e, 10);
		if (errno)
			return -1;
		v[n++] = x;
		s = e;
		while (*s && *s != ' ' && *s != '\t' && *s != '\n')
			s++; /* a mark */
	}
	return n;
}

int mtd_lru_gen_parse(const char *text, const char *cg_path, struct mtd_lru_view *out)
{
	const char *p = text;
	bool in_memcg = false, match = false;
	unsigned memcg_id = 0;
	struct mtd_lru_vec *cur = NULL;

	memset(out, 0, sizeof(*out));
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[512];
		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl ? nl + 1 : NULL;

		const char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			continue;
		if (strncmp(s, "memcg", 5) == 0 && (s[5] == ' ' || s[5] == '\t')) {
			char path[384] = "/", *e;
			errno = 0;
			unsigned long long id = strtoull(s + 5, &e, 10);
			if (errno || e == s + 5 || id > UINT_MAX)
				return -EPROTO;
			while (*e == ' ' || *e == '\t')
				e++;
			/* The root memcg prints an empty path with CONFIG_MEMCG off; "/" else. */
			size_t pl = strcspn(e, " \t");
			if (pl && pl < sizeof(path)) {
				memcpy(path, e, pl);
				path[pl] = '\0';
			}
			memcg_id = (unsigned)id;
			in_memcg = true;
			match = under(path, cg_path);
			cur = NULL;
			continue;
		}
		if (strncmp(s, "node", 4) == 0 && (s[4] == ' ' || s[4] == '\t')) {
			char *e;
			errno = 0;
			long node = strtol(s + 4, &e, 10);
			if (!in_memcg || errno || e == s + 4 || node < 0 || node > INT_MAX)
				return -EPROTO;
			cur = NULL;
			if (!match)
				continue;
			if (out->nr == MTD_LRU_VECS) {
				out->truncated = true;
				continue;
			}
			cur = &out->v[out->nr++];
			cur->memcg_id = memcg_id;
			cur->node = (int)node;
			continue;
		}
		uint64_t v[4];
		int n = numbers(s, v, 4);
		if (n < 0)
			return -EPROTO;
		if (n == 4) {
			if (!in_memcg)
				return -EPROTO;
			if (!cur || cur->nr == MTD_LRU_GENS)
				continue;
			cur->g[cur->nr++] = (struct mtd_lru_gen){
			    .seq = v[0], .age_ms = v[1], .anon_pages = v[2], .file_pages = v[3]};
		}
		/* Anything else (the full file's tiers and mm_walk stats) is not read. */
	}
	return 0;
}

int mtd_lru_gen_read(const char *path, const char *cg_path, struct mtd_lru_view *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t cap = 64 * 1024, len = 0;
	char *buf;
	int rc;

	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= READ_MAX) {
				break; /* parse what came: the VM's memcgs are listed by now, or not */
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			free(buf);
			close(fd);
			return rc;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	rc = mtd_lru_gen_parse(buf, cg_path, out);
	free(buf);
	return rc;
}

int mtd_lru_gen_cmd(const char *path, char op, unsigned memcg_id, int node, uint64_t seq,
		    uint64_t arg1, uint64_t arg2)
{
	char cmd[128];
	int fd, n;

	if (op != '+' && op != '-')
		return -EINVAL;
	n = snprintf(cmd, sizeof(cmd), "%c %u %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", op,
		     memcg_id, node, seq, arg1, arg2);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, cmd, (size_t)n);
	int rc = w == n ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

uint64_t mtd_lru_vec_max_seq(const struct mtd_lru_vec *v)
{
	return v->nr ? v->g[v->nr - 1].seq : 0;
}

uint64_t mtd_lru_vec_min_seq(const struct mtd_lru_vec *v)
{
	return v->nr ? v->g[0].seq : 0;
}

uint64_t mtd_lru_vec_anon(const struct mtd_lru_vec *v)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < v->nr; i++)
		n += v->g[i].anon_pages;
	return n;
}

bool mtd_lru_vec_evictable_seq(const struct mtd_lru_vec *v, uint64_t min_age_ms, uint64_t *seq)
{
	uint64_t max = mtd_lru_vec_max_seq(v);
	bool found = false;

	/* The list runs oldest first; the successor of g[i] is g[i + 1], one seq younger. */
	for (unsigned i = 0; i + 1 < v->nr; i++) {
		if (v->g[i].seq + 2 > max || v->g[i + 1].seq != v->g[i].seq + 1)
			break;
		if (v->g[i + 1].age_ms < min_age_ms)
			break;
		*seq = v->g[i].seq;
		found = true;
	}
	return found;
}

uint64_t mtd_lru_vec_anon_through(const struct mtd_lru_vec *v, uint64_t seq)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < v->nr && v->g[i].seq <= seq; i++)
		n += v->g[i].anon_pages;
	return n;
}

uint64_t mtd_lru_vec_anon_within(const struct mtd_lru_vec *v, uint64_t age_ms)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < v->nr; i++)
		if (i + 1 == v->nr || v->g[i + 1].age_ms < age_ms)
			n += v->g[i].anon_pages;
	return n;
}
