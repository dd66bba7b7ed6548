/*
 * ram_layout.c - the vhost-user memory table checked against QEMU's flat view and maps
 * (ram_layout.h).
 *
 * `info mtree -f` prints each flat view once, headed by the address spaces that share it:
 *
 *   FlatView #0
 *    AS "memory", root: system
 *    AS "cpu-memory-0", root: system
 *    Root memory region: system
 *     0000000000000000-000000000009ffff (prio 0, ram): mem
 *     00000000000c0000-00000000000c9fff (prio 0, rom): mem @00000000000c0000
 *     0000000000100000-000000000fffffff (prio 0, ram): mem @0000000000100000
 *     00000000fd000000-00000000fdffffff (prio 1, ram): vga.vram
 *
 * We take the view listing AS "memory" and its ram/rom lines.  Costs: one pass over the
 * text; the checks are O(regions x pieces), at most 8 x 512.
 */
#include "ram_layout.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A hex number at *p (no 0x), moving *p past it.  false when there is none. */
static bool hex(const char **p, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(*p, &end, 16);
	if (end == *p || errno)
		return false;
	*p = end;
	return true;
}

/* One flat-view line: "  START-END (prio P, KIND): NAME[ @OFFSET]".  1: a ram/rom piece. */
static int parse_piece(const char *line, size_t len, struct mtd_mtree_range *out)
{
	char buf[256];
	const char *p = buf, *kind, *name;
	uint64_t a, b;

	if (len >= sizeof(buf))
		return 0;
	memcpy(buf, line, len);
	buf[len] = '\0';
	while (*p == ' ')
		p++;
	if (!hex(&p, &a) || *p++ != '-' || !hex(&p, &b) || b < a || strncmp(p, " (prio ", 7) != 0)
		return 0;
	kind = strstr(p, ", ");
	name = strstr(p, "): ");
	if (!kind || !name || name < kind)
		return 0;
	kind += 2;
	if (!((name - kind == 3 && !strncmp(kind, "ram", 3)) ||
	      (name - kind == 3 && !strncmp(kind, "rom", 3))))
		return 0;
	name += 3;
	char *at = strstr(name, " @");
	out->start = a;
	out->end = b;
	out->offset = 0;
	if (at) {
		const char *o = at + 2;

		*at = '\0';
		if (!hex(&o, &out->offset))
			return 0;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	return 1;
}

int mtd_mtree_parse(const char *text, struct mtd_mtree_range *out, unsigned max)
{
	bool in_view = false, found = false;
	unsigned n = 0;

	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (!strncmp(p, "FlatView #", 10))
			in_view = false;
		else if (len > 14 && !strncmp(p, " AS \"memory\",", 13))
			in_view = found = true;
		else if (in_view && n < max && parse_piece(p, len, &out[n]) == 1)
			n++;
		p = nl ? nl + 1 : NULL;
	}
	return found ? (int)n : -EPROTO;
}

static const struct mtd_mtree_range *piece_at(const struct mtd_mtree_range *m, unsigned n,
					      uint64_t gpa)
{
	for (unsigned i = 0; i < n; i++)
		if (gpa >= m[i].start && gpa <= m[i].end)
			return &m[i];
	return NULL;
}

/* The table region holding gpa, or NULL. */
static const struct vu_layout_region *in_table(const struct vu_layout_region *r, unsigned n,
					       uint64_t gpa)
{
	for (unsigned i = 0; i < n; i++)
		if (gpa >= r[i].gpa && gpa - r[i].gpa < r[i].bytes)
			return &r[i];
	return NULL;
}

/* Does QEMU map [va, va + len) in one line of its maps? */
static bool mapped(const char *maps, uint64_t va, uint64_t len)
{
	for (const char *p = maps; p && *p;) {
		const char *q = p;
		uint64_t a, b;

		if (hex(&q, &a) && *q++ == '-' && hex(&q, &b) && va >= a && va + len <= b)
			return true;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return false;
}

int mtd_ram_layout_check(const struct vu_layout_region *r, unsigned n, const char *mtree,
			 const char *maps, char *why, size_t whylen)
{
	struct mtd_mtree_range *m = calloc(MTD_MTREE_MAX_RANGES, sizeof(*m));
	char names[8][48];
	unsigned nn = 0, total_bytes = 0;
	int pieces, ok = 1;

	if (!m) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	pieces = mtd_mtree_parse(mtree, m, MTD_MTREE_MAX_RANGES);
	if (pieces < 0) {
		free(m);
		snprintf(why, whylen, "QMP's mtree has no view of address space \"memory\"");
		return -EPROTO;
	}
	if (n == 0) {
		snprintf(why, whylen, "the memory table is empty");
		ok = 0;
	}
	/* Step 1: every byte of the table is RAM at the same backend offset. */
	for (unsigned i = 0; ok && i < n; i++) {
		uint64_t gpa = r[i].gpa, end = r[i].gpa + r[i].bytes;

		while (gpa < end) {
			const struct mtd_mtree_range *pc = piece_at(m, (unsigned)pieces, gpa);

			if (!pc) {
				snprintf(why, whylen,
					 "gpa 0x%" PRIx64 " is in the memory table but not RAM in "
					 "QEMU's flat view",
					 gpa);
				ok = 0;
				break;
			}
			if (pc->offset + (gpa - pc->start) != r[i].fd_offset + (gpa - r[i].gpa)) {
				snprintf(why, whylen,
					 "gpa 0x%" PRIx64 ": offset 0x%" PRIx64 " in '%s' per QMP, "
					 "0x%" PRIx64 " per the memory table",
					 gpa, pc->offset + (gpa - pc->start), pc->name,
					 r[i].fd_offset + (gpa - r[i].gpa));
				ok = 0;
				break;
			}
			bool known = false;
			for (unsigned k = 0; k < nn; k++)
				known = known || !strcmp(names[k], pc->name);
			if (!known && nn < 8)
				snprintf(names[nn++], sizeof(names[0]), "%s", pc->name);
			gpa = pc->end + 1 < end ? pc->end + 1 : end;
		}
		total_bytes += (unsigned)(r[i].bytes >> 20);
	}
	/* Step 2: every piece of those backends is in the table. */
	for (int i = 0; ok && i < pieces; i++) {
		bool backend = false;

		for (unsigned k = 0; k < nn; k++)
			backend = backend || !strcmp(names[k], m[i].name);
		if (!backend)
			continue;
		/* region by region: at most n steps per piece */
		for (uint64_t gpa = m[i].start; ok && gpa <= m[i].end;) {
			const struct vu_layout_region *t = in_table(r, n, gpa);

			if (!t) {
				snprintf(why, whylen,
					 "QEMU maps '%s' at gpa 0x%" PRIx64
					 " that the memory table "
					 "lacks",
					 m[i].name, gpa);
				ok = 0;
				break;
			}
			if (t->gpa + t->bytes == 0 || t->gpa + t->bytes - 1 >= m[i].end)
				break;
			gpa = t->gpa + t->bytes;
		}
	}
	/* Step 3: QEMU's addresses are QEMU's mappings. */
	for (unsigned i = 0; ok && i < n; i++) {
		if (!mapped(maps, r[i].qemu_va, r[i].bytes)) {
			snprintf(why, whylen,
				 "QEMU has no mapping for 0x%" PRIx64 "+0x%" PRIx64
				 " (region at gpa 0x%" PRIx64 ")",
				 r[i].qemu_va, r[i].bytes, r[i].gpa);
			ok = 0;
		}
	}
	if (ok)
		snprintf(why, whylen,
			 "%u region%s (%u MiB of '%s') agree with QMP's flat view and QEMU's "
			 "mappings",
			 n, n == 1 ? "" : "s", total_bytes, nn ? names[0] : "?");
	free(m);
	return ok;
}
