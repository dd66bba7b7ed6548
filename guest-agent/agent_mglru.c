// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_mglru.c - the guest's multi-generational LRU: working-set report and eviction.
 *
 * Interface (Documentation/admin-guide/mm/multigen_lru.rst, Linux 6.1):
 *   /sys/kernel/mm/lru_gen/enabled   non-zero when MGLRU runs ('y' turns it on);
 *   /sys/kernel/debug/lru_gen        reads as
 *        memcg  memcg_id  memcg_path
 *          node  node_id
 *            min_gen_nr  age_in_ms  nr_anon_pages  nr_file_pages
 *            ...
 *            max_gen_nr  age_in_ms  nr_anon_pages  nr_file_pages
 *   and takes commands
 *        + memcg_id node_id max_gen_nr [can_swap [force_scan]]      (aging)
 *        - memcg_id node_id min_gen_nr [swappiness [nr_to_reclaim]] (eviction)
 *
 * Working set: every wss report first ages each lruvec ('+' on its max_gen_nr), so the
 * pages touched since the last report move into a new youngest generation.  A generation's
 * pages have then not been touched since the next younger generation was born: that birth
 * age is the generation's idle age (0 for the youngest).  Pages are folded into the bins by
 * idle age, in bytes.  '+' fails with ERANGE when the lruvec already has MAX_NR_GENS
 * generations; the report is still valid (it just does not gain a generation), so that
 * error is ignored.
 *
 * Eviction: '-' with gen = max_gen_nr - 2 (the kernel protects the two youngest), bounded
 * by nr_to_reclaim, swappiness 0 (file only) or vm.swappiness (anon too).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define LRU_GEN_BUF_BYTES (256u * 1024) /* 64 memcgs x 4 nodes x 4 gens ~ 50 KiB */

int agent_lru_gen_parse(const char *text, struct agent_gen *gens, int max_gens,
			struct agent_lruvec *vecs, int max_vecs, int *nr_vecs, bool *more)
{
	const char *p = text;
	uint32_t memcg = 0;
	int n = 0, nv = 0, cur = -1; /* cur: index of the current lruvec, -1 before a node */
	bool have_memcg = false;

	*more = false;
	while (p && *p) {
		const char *s = p;
		unsigned long long a, b, c, d;
		char *end;

		while (*s == ' ' || *s == '\t')
			s++;
		if (strncmp(s, "memcg", 5) == 0) {
			a = strtoull(s + 5, &end, 10);
			if (end == s + 5 || a > UINT32_MAX)
				return -EINVAL;
			memcg = (uint32_t)a;
			have_memcg = true;
			cur = -1;
		} else if (strncmp(s, "node", 4) == 0) {
			a = strtoull(s + 4, &end, 10);
			if (end == s + 4 || a > 1023 || !have_memcg)
				return -EINVAL;
			cur = -1;
			if (nv < max_vecs) {
				cur = nv++;
				vecs[cur] =
				    (struct agent_lruvec){memcg, (uint32_t)a, UINT64_MAX, 0};
			} else {
				*more = true;
			}
		} else if (*s >= '0' && *s <= '9') {
			/* gen line; "full" output marks may follow numbers, so parse by hand */
			a = strtoull(s, &end, 10);
			b = strtoull(end, &end, 10);
			c = strtoull(end, &end, 10);
			d = strtoull(end, &end, 10);
			if (cur < 0 && nv < max_vecs)
				return -EINVAL; /* a gen line outside any node */
			if (cur >= 0) {
				struct agent_lruvec *v = &vecs[cur];

				if (a < v->min_seq)
					v->min_seq = a;
				if (a > v->max_seq)
					v->max_seq = a;
				if (n < max_gens)
					gens[n++] =
					    (struct agent_gen){v->memcg_id, v->node, a, b, c, d};
				else
					*more = true;
			}
		} else if (*s && *s != '\n') {
			return -EINVAL;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	*nr_vecs = nv;
	return n;
}

/* Saturating: a wrapped sum would under-report the working set, and the host would take
 * memory the guest uses (2^48 pages x 64 KiB wrapped to 0: tests/fuzz/fuzz_agent_mglru.c). */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t pages, uint32_t page_size)
{
	return page_size && pages > UINT64_MAX / page_size ? UINT64_MAX : pages * page_size;
}

static int by_age(const void *x, const void *y)
{
	const struct agent_gen *a = x, *b = y;

	return a->age_ms < b->age_ms ? -1 : a->age_ms > b->age_ms;
}

/* Idle age of gens[i]: birth age of the next younger generation of the same lruvec. */
static uint64_t idle_ms(const struct agent_gen *gens, int n, int i)
{
	uint64_t best = 0;
	bool found = false;

	for (int k = 0; k < n; k++) {
		if (gens[k].memcg_id != gens[i].memcg_id || gens[k].node != gens[i].node ||
		    gens[k].seq <= gens[i].seq)
			continue;
		if (!found || gens[k].seq < best) {
			best = gens[k].seq;
			found = true;
			/* keep the age of the closest younger one */
		}
	}
	if (!found)
		return 0;
	for (int k = 0; k < n; k++)
		if (gens[k].memcg_id == gens[i].memcg_id && gens[k].node == gens[i].node &&
		    gens[k].seq == best)
			return gens[k].age_ms;
	return 0;
}

void agent_wss_fold(const struct agent_gen *gens, int n, bool complete, const uint64_t *edges_ms,
		    uint32_t nr_edges, uint32_t page_size, struct proto_wss *w)
{
	struct agent_gen sorted[AGENT_MAX_GENS];

	if (n > AGENT_MAX_GENS)
		n = AGENT_MAX_GENS;
	memset(w, 0, sizeof(*w));
	w->nr_bins = nr_edges;
	for (uint32_t b = 0; b < nr_edges; b++)
		w->bins[b].min_age_ms = edges_ms[b];
	for (int i = 0; i < n; i++) {
		uint64_t idle = idle_ms(gens, n, i);
		uint32_t b = 0;

		while (b + 1 < nr_edges && idle >= edges_ms[b + 1])
			b++;
		w->bins[b].anon_bytes =
		    sat_add(w->bins[b].anon_bytes, sat_mul(gens[i].anon_pages, page_size));
		w->bins[b].file_bytes =
		    sat_add(w->bins[b].file_bytes, sat_mul(gens[i].file_pages, page_size));
	}
	for (uint32_t b = 0; b < nr_edges; b++) {
		if (w->bins[b].anon_bytes > PROTO_BYTES_MAX)
			w->bins[b].anon_bytes = PROTO_BYTES_MAX;
		if (w->bins[b].file_bytes > PROTO_BYTES_MAX)
			w->bins[b].file_bytes = PROTO_BYTES_MAX;
	}
	memcpy(sorted, gens, sizeof(sorted[0]) * (size_t)n);
	qsort(sorted, (size_t)n, sizeof(sorted[0]), by_age);
	w->gens_complete = complete && n <= PROTO_MAX_GENS;
	w->nr_gens = n > PROTO_MAX_GENS ? PROTO_MAX_GENS : (uint32_t)n;
	for (uint32_t i = 0; i < w->nr_gens; i++) {
		const struct agent_gen *g = &sorted[i];

		w->gens[i] = (struct proto_wss_gen){
		    .memcg_id = g->memcg_id,
		    .node = g->node,
		    .seq = g->seq > PROTO_INT_MAX ? PROTO_INT_MAX : g->seq,
		    .age_ms = g->age_ms > PROTO_AGE_MAX_MS ? PROTO_AGE_MAX_MS : g->age_ms,
		    .anon_pages = g->anon_pages > PROTO_PAGES_MAX ? PROTO_PAGES_MAX : g->anon_pages,
		    .file_pages = g->file_pages > PROTO_PAGES_MAX ? PROTO_PAGES_MAX : g->file_pages,
		};
	}
}

bool agent_mglru_available(const struct agent_config *c)
{
	char path[AGENT_PATH_MAX + 48], buf[32];

	agent_path(c, "/sys/kernel/mm/lru_gen/enabled", path, sizeof(path));
	if (agent_read_file(path, buf, sizeof(buf)) <= 0 || strtoul(buf, NULL, 0) == 0)
		return false;
	agent_path(c, "/sys/kernel/debug/lru_gen", path, sizeof(path));
	return access(path, R_OK | W_OK) == 0;
}

/*
 * Turn the guest's MGLRU on, once, at start.  Debian builds it in but leaves it off at run
 * time, and without it there is no working set by age: the host can then take only free and
 * easily reclaimed memory.  A value already non-zero is the guest administrator's (perhaps a
 * subset of the components) and is left as it is; so is a kernel without the file.
 */
int agent_mglru_enable(const struct agent_config *c)
{
	char path[AGENT_PATH_MAX + 48], buf[32];
	long n;
	int rc;

	agent_path(c, "/sys/kernel/mm/lru_gen/enabled", path, sizeof(path));
	n = agent_read_file(path, buf, sizeof(buf));
	if (n <= 0)
		return n == 0 ? -ENODATA : (int)n;
	if (strtoul(buf, NULL, 0) != 0)
		return 0;
	rc = agent_write_file(path, "y");
	return rc < 0 ? rc : 1;
}

/* Read lru_gen into gens/vecs (heap buffer). */
static int read_lru_gen(const struct agent_config *c, struct agent_gen *gens,
			struct agent_lruvec *vecs, int *nv, bool *more)
{
	char path[AGENT_PATH_MAX + 48];
	char *buf = malloc(LRU_GEN_BUF_BYTES);
	long len;
	int n;

	if (!buf)
		return -ENOMEM;
	agent_path(c, "/sys/kernel/debug/lru_gen", path, sizeof(path));
	len = agent_read_file(path, buf, LRU_GEN_BUF_BYTES);
	if (len < 0 && len != -EFBIG) {
		free(buf);
		return (int)len;
	}
	n = len < 0
		? -EFBIG
		: agent_lru_gen_parse(buf, gens, AGENT_MAX_GENS, vecs, AGENT_MAX_LRUVECS, nv, more);
	free(buf);
	return n;
}

/* One command line to lru_gen. */
static int lru_cmd(const struct agent_config *c, const char *cmd)
{
	char path[AGENT_PATH_MAX + 48];

	agent_path(c, "/sys/kernel/debug/lru_gen", path, sizeof(path));
	return agent_write_file(path, cmd);
}

int agent_mglru_wss(const struct agent_config *c, const uint64_t *edges_ms, uint32_t nr_edges,
		    struct proto_wss *w)
{
	struct agent_gen *gens = calloc(AGENT_MAX_GENS, sizeof(*gens));
	struct agent_lruvec vecs[AGENT_MAX_LRUVECS];
	char cmd[96];
	bool more;
	int nv = 0, n;

	if (!gens)
		return -ENOMEM;
	if (!agent_mglru_available(c)) {
		free(gens);
		return -ENOENT;
	}
	/* Step 1: age every lruvec */
	n = read_lru_gen(c, gens, vecs, &nv, &more);
	if (n < 0)
		goto out;
	for (int i = 0; i < nv; i++) {
		int rc;

		if (vecs[i].min_seq == UINT64_MAX)
			continue; /* node without generations */
		snprintf(cmd, sizeof(cmd), "+ %u %u %llu", vecs[i].memcg_id, vecs[i].node,
			 (unsigned long long)vecs[i].max_seq);
		rc = lru_cmd(c, cmd);
		if (rc < 0 && rc != -ERANGE && rc != -EINVAL)
			agent_log(AGENT_DEBUG, "lru_gen '%s': %s", cmd, strerror(-rc));
	}
	/* Step 2: read the generations after aging and fold them */
	n = read_lru_gen(c, gens, vecs, &nv, &more);
	if (n < 0)
		goto out;
	agent_wss_fold(gens, n, !more, edges_ms, nr_edges, (uint32_t)sysconf(_SC_PAGESIZE), w);
	w->mono_ms = agent_now_ms();
	n = 0;
out:
	free(gens);
	return n;
}

int agent_mglru_evict(const struct agent_config *c, uint64_t nr_pages, bool anon)
{
	struct agent_gen *gens;
	struct agent_lruvec vecs[AGENT_MAX_LRUVECS];
	char path[AGENT_PATH_MAX + 48], buf[32], cmd[128];
	unsigned long swappiness = 0;
	int nv = 0, n, done = 0, last = -ENOENT;
	bool more;

	if (anon) {
		agent_path(c, "/proc/sys/vm/swappiness", path, sizeof(path));
		swappiness =
		    agent_read_file(path, buf, sizeof(buf)) > 0 ? strtoul(buf, NULL, 10) : 60;
		if (swappiness > 200)
			swappiness = 200;
	}
	gens = calloc(AGENT_MAX_GENS, sizeof(*gens));
	if (!gens)
		return -ENOMEM;
	n = read_lru_gen(c, gens, vecs, &nv, &more);
	free(gens);
	if (n < 0)
		return n;
	for (int i = 0; i < nv; i++) {
		int rc;

		/* the two youngest generations are protected: nothing to evict below that */
		if (vecs[i].min_seq == UINT64_MAX || vecs[i].max_seq < vecs[i].min_seq + 2)
			continue;
		snprintf(cmd, sizeof(cmd), "- %u %u %llu %lu %llu", vecs[i].memcg_id, vecs[i].node,
			 (unsigned long long)(vecs[i].max_seq - 2), swappiness,
			 (unsigned long long)nr_pages);
		rc = lru_cmd(c, cmd);
		if (rc == 0)
			done++;
		else
			last = rc;
	}
	return done ? 0 : last;
}
