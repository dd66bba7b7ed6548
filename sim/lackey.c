// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lackey.c - turn valgrind lackey's memory trace into a memtide trace.
 *
 * `valgrind --tool=lackey --trace-mem=yes` prints one line per access of the client
 * program: "I  ADDR,SIZE" (instruction fetch), " L ADDR,SIZE" (load), " S ..." (store),
 * " M ..." (modify: load and store), ADDR in hex, SIZE in decimal; valgrind's own messages
 * start with "==PID==".  The program's virtual address space stands for guest RAM:
 *   - time: every epoch_accesses accesses make one epoch of epoch_ms (virtual time: lackey
 *     runs the program ~50x slower, so wall time would mean nothing);
 *   - layout: every 2 MiB region of the address space the program touched becomes one 2 MiB
 *     block of guest RAM, blocks laid out from GPA 0 in address order (the text, heap, mmap
 *     and stack regions of a process are far apart; compacting them keeps the guest small
 *     while keeping the 2 MiB structure free page reporting and huge pages care about);
 *   - pages of a touched region never accessed are free (never touched) pages.
 * The trace has no free records: lackey does not see malloc/free.
 * Data layout while converting: per epoch, an open-addressing set of page numbers (write
 * bit in bit 63), dumped to an array at the epoch's end; the layout is known only at the
 * end of input, so page numbers are mapped to indices in a second pass over the arrays.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define WBIT (1ull << 63)

struct pset {
	uint64_t *slot; /* vpn + 1 (0 = empty), WBIT when written */
	size_t cap, n;
};

struct ep_pages {
	uint64_t *v;
	size_t n;
};

struct conv {
	struct pset s;
	struct ep_pages *ep;
	size_t nr_ep, cap_ep;
};

static size_t hash64(uint64_t x, size_t cap)
{
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 17) & (cap - 1);
}

static int pset_add(struct pset *s, uint64_t vpn, bool write)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		uint64_t *ns = calloc(cap, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t h = hash64((s->slot[i] & ~WBIT) - 1, cap);
			while (ns[h])
				h = (h + 1) & (cap - 1);
			ns[h] = s->slot[i];
		}
		free(s->slot);
		s->slot = ns;
		s->cap = cap;
	}
	size_t h = hash64(vpn, s->cap);
	while (s->slot[h] && (s->slot[h] & ~WBIT) != vpn + 1)
		h = (h + 1) & (s->cap - 1);
	if (!s->slot[h])
		s->n++;
	s->slot[h] |= (vpn + 1) | (write ? WBIT : 0);
	return 0;
}

static int end_epoch(struct conv *c)
{
	struct ep_pages *ep;

	if (c->nr_ep == c->cap_ep) {
		size_t cap = c->cap_ep ? c->cap_ep * 2 : 256;
		struct ep_pages *n = realloc(c->ep, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->ep = n;
		c->cap_ep = cap;
	}
	ep = &c->ep[c->nr_ep];
	ep->v = malloc((c->s.n ? c->s.n : 1) * sizeof(uint64_t));
	if (!ep->v)
		return -ENOMEM;
	ep->n = 0;
	for (size_t i = 0; i < c->s.cap; i++) {
		if (c->s.slot[i]) {
			uint64_t x = c->s.slot[i];
			ep->v[ep->n++] = ((x & ~WBIT) - 1) | (x & WBIT);
			c->s.slot[i] = 0;
		}
	}
	c->s.n = 0;
	c->nr_ep++;
	return 0;
}

/* Parse one lackey record.  Returns 1 for an access, 0 for a line to skip, -EINVAL. */
static int parse_line(const char *l, char *kind, uint64_t *addr, uint64_t *size)
{
	char *end;

	if (l[0] == '=' || l[0] == '\n' || l[0] == '\0' || l[0] == '-')
		return 0;
	if (l[0] == 'I' && l[1] == ' ')
		*kind = 'I';
	else if (l[0] == ' ' && (l[1] == 'L' || l[1] == 'S' || l[1] == 'M') && l[2] == ' ')
		*kind = l[1];
	else
		return -EINVAL;
	l += 2;
	while (*l == ' ')
		l++;
	errno = 0;
	*addr = strtoull(l, &end, 16);
	if (end == l || *end != ',' || errno)
		return -EINVAL;
	l = end + 1;
	*size = strtoull(l, &end, 10);
	if (end == l || (*end != '\n' && *end != '\0') || errno || *size == 0 || *size > 4096)
		return -EINVAL;
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Second pass: map page numbers to dense indices over the touched 2 MiB regions. */
static int build_trace(struct conv *c, const struct sim_lackey_opts *o, struct sim_trace *t)
{
	size_t total = 0, nr_chunks = 0;
	uint64_t *chunks;
	uint32_t *acc = NULL;
	int rc;

	for (size_t e = 0; e < c->nr_ep; e++)
		total += c->ep[e].n;
	chunks = malloc((total ? total : 1) * sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	for (size_t e = 0; e < c->nr_ep; e++)
		for (size_t i = 0; i < c->ep[e].n; i++)
			chunks[nr_chunks++] = (c->ep[e].v[i] & ~WBIT) >> 9;
	qsort(chunks, nr_chunks, sizeof(*chunks), cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < nr_chunks; i++)
		if (!u || chunks[u - 1] != chunks[i])
			chunks[u++] = chunks[i];
	nr_chunks = u;
	struct vmm_range ram = {0, (uint64_t)nr_chunks * VMM_SIZE_2M};
	rc = nr_chunks ? sim_trace_init(t, &ram, 1) : -EINVAL;
	if (rc)
		goto out;
	for (size_t e = 0; e < c->nr_ep && !rc; e++) {
		free(acc);
		acc = malloc((c->ep[e].n ? c->ep[e].n : 1) * sizeof(*acc));
		if (!acc) {
			rc = -ENOMEM;
			break;
		}
		for (size_t i = 0; i < c->ep[e].n; i++) {
			uint64_t vpn = c->ep[e].v[i] & ~WBIT, key = vpn >> 9;
			const uint64_t *ch =
			    bsearch(&key, chunks, nr_chunks, sizeof(*chunks), cmp_u64);
			acc[i] = (uint32_t)((size_t)(ch - chunks) * SIM_BLOCK_PAGES + (vpn & 511)) |
				 ((c->ep[e].v[i] & WBIT) ? SIM_ACC_WRITE : 0);
		}
		rc = sim_trace_add_epoch(t, e * o->epoch_ms, acc, c->ep[e].n, NULL, 0);
	}
	if (!rc)
		rc = sim_trace_finish(t, c->nr_ep * o->epoch_ms);
	if (rc)
		sim_trace_free(t);
out:
	free(acc);
	free(chunks);
	return rc;
}

int sim_lackey_convert(FILE *in, const struct sim_lackey_opts *o, struct sim_trace *t,
		       uint64_t *accesses_out, char *err, size_t errlen)
{
	struct conv c = {0};
	char line[256];
	uint64_t n = 0, lineno = 0, in_epoch = 0;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	if (!o->epoch_accesses || !o->epoch_ms) {
		snprintf(err, errlen, "epoch_accesses and epoch_ms must be > 0");
		return -EINVAL;
	}
	while (fgets(line, sizeof(line), in)) {
		char kind;
		uint64_t addr, size;
		lineno++;
		if (!strchr(line, '\n') && !feof(in)) {
			snprintf(err, errlen, "line %llu: longer than %zu bytes",
				 (unsigned long long)lineno, sizeof(line) - 1);
			rc = -EINVAL;
			break;
		}
		int k = parse_line(line, &kind, &addr, &size);
		if (k < 0) {
			snprintf(err, errlen, "line %llu: not a lackey record: %.60s",
				 (unsigned long long)lineno, line);
			rc = -EINVAL;
			break;
		}
		if (k == 0 || (kind == 'I' && !o->with_ifetch))
			continue;
		if (addr + size < addr || ((addr + size - 1) >> 12) >= (1ull << 50)) {
			snprintf(err, errlen, "line %llu: address beyond 2^62",
				 (unsigned long long)lineno);
			rc = -EINVAL;
			break;
		}
		bool write = kind == 'S' || kind == 'M';
		for (uint64_t pg = addr >> 12; pg <= (addr + size - 1) >> 12 && !rc; pg++)
			rc = pset_add(&c.s, pg, write);
		if (!rc && ++in_epoch == o->epoch_accesses) {
			rc = end_epoch(&c);
			in_epoch = 0;
		}
		if (rc) {
			snprintf(err, errlen, "out of memory");
			break;
		}
		n++;
		if (o->max_accesses && n >= o->max_accesses)
			break;
	}
	if (!rc && in_epoch)
		rc = end_epoch(&c);
	if (!rc && c.nr_ep == 0) {
		snprintf(err, errlen, "no lackey records in the input");
		rc = -EINVAL;
	}
	if (!rc) {
		rc = build_trace(&c, o, t);
		if (rc)
			snprintf(err, errlen, "cannot build the trace (%s)", strerror(-rc));
	}
	if (accesses_out)
		*accesses_out = n;
	for (size_t e = 0; e < c.nr_ep; e++)
		free(c.ep[e].v);
	free(c.ep);
	free(c.s.slot);
	return rc;
}
