// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ram_layout.c - the guest RAM layout: GPA -> QEMU HVA, from QEMU's answers, checked against
 * the QEMU process's mappings (ram_layout.h says what is asked and why).
 *
 * Layout of the result: regions sorted by GPA, each one flat-view range of guest RAM, so a
 * lookup is a binary search and a region's translation is one addition.  The regions are
 * exactly the flat view's lines: pc.ram on the pc machine gives two or three (below 640 KiB,
 * 1 MiB to the PCI hole, above 4 GiB), each DIMM one more.
 *
 * The first MiB of GPA space is in the map but never evictable: the chipset remaps parts of
 * it at run time (PAM shadowing of the BIOS area, SMRAM), so the flat view read at attach
 * may not hold there later, and 640 KiB are not worth the doubt.
 *
 * One file of about 1,260 lines, on purpose: the seven answers' parsers, the build that
 * cross-checks them against each other, and the query that asks a live QEMU are one check
 * read in order (a parser's every field is a premise of a check in mtd_ram_layout_build),
 * sharing the line and number readers at the top; tests/fuzz/fuzz_ram_layout.c drives them
 * together.  Parsers and build apart would put each check's two halves in two files.
 */
#include "act/ram_layout.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#define PAGE_BYTES     ((uint64_t)4096)
#define LOW_LEGACY_END ((uint64_t)1 << 20)
#define MAX_TEXT_BYTES (8U << 20) /* a monitor answer or smaps file larger is refused */
#define MAX_VMAS       512
#define MiB            ((uint64_t)1 << 20)

/* ---- small text helpers -------------------------------------------------------------- */

/* Append a sentence to why (space-separated), truncating cleanly. */
static void why_add(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void why_add(char *why, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(why, len);
	va_list ap;

	if (used + 2 >= len)
		return;
	if (used) {
		why[used++] = ' ';
		why[used] = '\0';
	}
	va_start(ap, fmt);
	vsnprintf(why + used, len - used, fmt, ap);
	va_end(ap);
}

/* The next line of text: [*p, eol), *p advanced past it.  False at the end. */
static bool next_line(const char **p, const char **line, size_t *len)
{
	const char *s = *p, *e;

	if (!s || !*s)
		return false;
	e = strchr(s, '\n');
	*line = s;
	*len = e ? (size_t)(e - s) : strlen(s);
	*p = e ? e + 1 : s + *len;
	return true;
}

/* Copy a line into a bounded, NUL-terminated buffer (long lines are cut). */
static void line_copy(char *dst, size_t dstlen, const char *line, size_t len)
{
	size_t n = len < dstlen - 1 ? len : dstlen - 1;

	memcpy(dst, line, n);
	dst[n] = '\0';
	while (n && (dst[n - 1] == '\r' || dst[n - 1] == ' '))
		dst[--n] = '\0';
}

/* Parse exactly 16 hex digits at s into *v. */
static bool hex16(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	for (int i = 0; i < 16; i++) {
		int c = (unsigned char)s[i];
		int d = isdigit(c)               ? c - '0'
			: (c >= 'a' && c <= 'f') ? c - 'a' + 10
			: (c >= 'A' && c <= 'F') ? c - 'A' + 10
						 : -1;
		if (d < 0)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return true;
}

/* Parse "0x" then hex digits; *end after them. */
static bool hex0x(const char *s, uint64_t *v, const char **end)
{
	char *e;

	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !isxdigit((unsigned char)s[2]))
		return false;
	errno = 0;
	unsigned long long x = strtoull(s + 2, &e, 16);
	if (errno)
		return false;
	*v = x;
	if (end)
		*end = e;
	return true;
}

/* The next token (run of non-blanks) of *p into out (cut to len - 1); false at the end. */
static bool token(const char **p, char *out, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return false;
	while (s[n] && s[n] != ' ' && s[n] != '\t')
		n++;
	snprintf(out, len, "%.*s", (int)n, s);
	*p = s + n;
	return true;
}

/* A whole token as a number (base 16 takes an optional 0x). */
static bool tok_u64(const char *tok, int base, uint64_t *v)
{
	char *e;

	if (!isxdigit((unsigned char)tok[0]))
		return false;
	errno = 0;
	unsigned long long x = strtoull(tok, &e, base);
	if (errno || e == tok || *e)
		return false;
	*v = x;
	return true;
}

/* "Key:   N kB" -> N; false unless line starts with key. */
static bool field_kb(const char *line, const char *key, uint64_t *kb)
{
	size_t kl = strlen(key);
	char tok[32];
	const char *p = line + kl;

	return strncmp(line, key, kl) == 0 && token(&p, tok, sizeof(tok)) && tok_u64(tok, 10, kb);
}

static void copy_name(char *dst, size_t len, const char *s, size_t n)
{
	if (n >= len)
		n = len - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* ---- info mtree -f ------------------------------------------------------------------- */

/*
 * One range line: "  %016x-%016x (prio %d, TYPE): NAME[ @%016x][ ACCEL...]".  The end printed
 * is inclusive.  NAME is one token for every region memtide cares about (memory backend ids
 * cannot hold spaces); other names may, and are then cut at the first space, which is
 * harmless: they are never matched.
 */
static int parse_range_line(const char *l, size_t len, struct mtd_flat_range *r)
{
	char buf[256];
	const char *p, *q;
	uint64_t a, b;

	line_copy(buf, sizeof(buf), l, len);
	p = buf;
	while (*p == ' ')
		p++;
	if (strlen(p) < 34 || !hex16(p, &a) || p[16] != '-' || !hex16(p + 17, &b) || b < a ||
	    strncmp(p + 33, " (prio ", 7) != 0)
		return -EPROTO;
	q = strchr(p + 40, ',');
	if (!q || q[1] != ' ')
		return -EPROTO;
	q += 2;
	const char *close = strstr(q, "): ");
	if (!close)
		return -EPROTO;
	size_t tlen = (size_t)(close - q);
	r->ram =
	    (tlen == 3 && strncmp(q, "ram", 3) == 0) || (tlen == 6 && strncmp(q, "nv-ram", 6) == 0);
	r->start = a;
	r->end = b + 1; /* b may be UINT64_MAX for a region reaching the top: end wraps to 0 */
	if (r->end == 0)
		r->end = UINT64_MAX;
	p = close + 3;
	q = p;
	while (*q && *q != ' ')
		q++;
	if (q == p)
		return -EPROTO;
	copy_name(r->name, sizeof(r->name), p, (size_t)(q - p));
	r->offset = 0;
	if (q[0] == ' ' && q[1] == '@') {
		if (strlen(q + 2) < 16 || !hex16(q + 2, &r->offset))
			return -EPROTO;
	}
	return 0;
}

int mtd_ram_parse_flatview(const char *text, struct mtd_flat_range *out, size_t max)
{
	const char *p = text, *l;
	size_t len, n = 0;
	bool in_view = false, is_memory = false, found = false;

	if (!text)
		return -EPROTO;
	while (next_line(&p, &l, &len)) {
		if (len >= 8 && strncmp(l, "FlatView", 8) == 0) {
			if (found)
				break; /* the "memory" view ended */
			in_view = true;
			is_memory = false;
			continue;
		}
		if (!in_view)
			continue;
		if (len > 5 && strncmp(l, " AS \"", 5) == 0) {
			if (len >= 13 && strncmp(l + 5, "memory\"", 7) == 0) {
				is_memory = true;
				found = true;
			}
			continue;
		}
		if (!is_memory)
			continue;
		const char *s = l;
		while (s < l + len && *s == ' ')
			s++;
		if (s + 16 < l + len && isxdigit((unsigned char)*s) && s[16] == '-') {
			struct mtd_flat_range r;
			if (parse_range_line(l, len, &r) < 0)
				return -EPROTO;
			if (n >= max)
				return -E2BIG;
			out[n++] = r;
		}
	}
	return found ? (int)n : -EPROTO;
}

/* ---- info ramblock ------------------------------------------------------------------- */

static bool parse_psize(uint64_t num, const char *unit, uint64_t *bytes)
{
	uint64_t mult = strcmp(unit, "B") == 0     ? 1
			: strcmp(unit, "KiB") == 0 ? 1ULL << 10
			: strcmp(unit, "MiB") == 0 ? 1ULL << 20
			: strcmp(unit, "GiB") == 0 ? 1ULL << 30
						   : 0;
	if (!mult || num == 0 || num > 1024)
		return false;
	*bytes = num * mult;
	return true;
}

int mtd_ram_parse_ramblocks(const char *text, struct mtd_ramblock *out, size_t max)
{
	const char *p = text, *l;
	size_t len, n = 0;
	bool header = false;

	if (!text)
		return -EPROTO;
	while (next_line(&p, &l, &len)) {
		char buf[256], name[MTD_RAM_NAME_MAX], unit[8], t[3][32], ns[16];
		uint64_t num, off, used, total;
		const char *p2 = buf;

		line_copy(buf, sizeof(buf), l, len);
		if (!buf[0])
			continue;
		if (strstr(buf, "Block Name") && strstr(buf, "PSize")) {
			header = true;
			continue;
		}
		if (!header)
			return -EPROTO;
		/* NAME PSIZE UNIT 0xOFFSET 0xUSED 0xTOTAL (newer QEMUs add columns: ignored) */
		if (!token(&p2, name, sizeof(name)) || !token(&p2, ns, sizeof(ns)) ||
		    !tok_u64(ns, 10, &num) || !token(&p2, unit, sizeof(unit)) ||
		    !token(&p2, t[0], sizeof(t[0])) || !token(&p2, t[1], sizeof(t[1])) ||
		    !token(&p2, t[2], sizeof(t[2])) || !tok_u64(t[0], 16, &off) ||
		    !tok_u64(t[1], 16, &used) || !tok_u64(t[2], 16, &total))
			return -EPROTO;
		struct mtd_ramblock b = {.offset = off, .used_bytes = used};
		if (!parse_psize(num, unit, &b.page_bytes) || used > total)
			return -EPROTO;
		snprintf(b.name, sizeof(b.name), "%s", name);
		if (n >= max)
			return -E2BIG;
		out[n++] = b;
	}
	return header ? (int)n : -EPROTO;
}

/* ---- gpa2hva ------------------------------------------------------------------------- */

int mtd_ram_parse_gpa2hva(const char *text, uint64_t *hva, char *name, size_t namelen)
{
	static const char pre[] = "Host virtual address for ";
	const char *p, *e;
	uint64_t gpa;

	if (!text)
		return -EPROTO;
	if (strstr(text, "No memory is mapped at address") || strstr(text, "is not RAM"))
		return -ENOENT;
	p = strstr(text, pre);
	if (!p)
		return -EPROTO;
	p += sizeof(pre) - 1;
	if (!hex0x(p, &gpa, &e) || strncmp(e, " (", 2) != 0)
		return -EPROTO;
	p = e + 2;
	e = strstr(p, ") is ");
	if (!e || e == p)
		return -EPROTO;
	if (name)
		copy_name(name, namelen, p, (size_t)(e - p));
	if (!hex0x(e + 5, hva, NULL))
		return -EPROTO;
	return 0;
}

/* ---- QMP answers --------------------------------------------------------------------- */

static const char *strip_objects(const char *s)
{
	return strncmp(s, "/objects/", 9) == 0 ? s + 9 : s;
}

int mtd_ram_parse_memdevs(struct json_object *ret, char (*ids)[MTD_RAM_NAME_MAX], size_t max)
{
	size_t n = 0;

	if (!json_object_is_type(ret, json_type_array))
		return -EPROTO;
	for (size_t i = 0; i < json_object_array_length(ret); i++) {
		struct json_object *m = json_object_array_get_idx(ret, i), *id;
		if (!json_object_is_type(m, json_type_object))
			return -EPROTO;
		if (!json_object_object_get_ex(m, "id", &id))
			continue; /* id is optional in the schema; an anonymous backend backs nothing we can name */
		if (!json_object_is_type(id, json_type_string))
			return -EPROTO;
		if (n >= max)
			return -E2BIG;
		snprintf(ids[n++], MTD_RAM_NAME_MAX, "%s", json_object_get_string(id));
	}
	return (int)n;
}

static bool get_u64_member(struct json_object *o, const char *k, uint64_t *v)
{
	struct json_object *x;

	if (!json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_int))
		return false;
	*v = (uint64_t)json_object_get_uint64(x);
	return true;
}

int mtd_ram_parse_memdevices(struct json_object *ret, struct mtd_memdevice *out, size_t max)
{
	size_t n = 0;

	if (!json_object_is_type(ret, json_type_array))
		return -EPROTO;
	for (size_t i = 0; i < json_object_array_length(ret); i++) {
		struct json_object *m = json_object_array_get_idx(ret, i), *type, *data, *x;
		struct mtd_memdevice d = {0};

		if (!json_object_object_get_ex(m, "type", &type) ||
		    !json_object_is_type(type, json_type_string) ||
		    !json_object_object_get_ex(m, "data", &data) ||
		    !json_object_is_type(data, json_type_object))
			return -EPROTO;
		snprintf(d.type, sizeof(d.type), "%s", json_object_get_string(type));
		if (json_object_object_get_ex(data, "id", &x) &&
		    json_object_is_type(x, json_type_string))
			snprintf(d.id, sizeof(d.id), "%s", json_object_get_string(x));
		if (json_object_object_get_ex(data, "memdev", &x) &&
		    json_object_is_type(x, json_type_string))
			snprintf(d.memdev, sizeof(d.memdev), "%s",
				 strip_objects(json_object_get_string(x)));
		/* DIMMs say addr, virtio devices memaddr. */
		if (!get_u64_member(data, "addr", &d.addr) &&
		    !get_u64_member(data, "memaddr", &d.addr))
			return -EPROTO;
		if (!get_u64_member(data, "size", &d.size))
			return -EPROTO;
		if (json_object_object_get_ex(data, "hotplugged", &x) &&
		    json_object_is_type(x, json_type_boolean))
			d.hotplugged = json_object_get_boolean(x);
		if (n >= max)
			return -E2BIG;
		out[n++] = d;
	}
	return (int)n;
}

/* ---- /proc/PID/smaps and maps -------------------------------------------------------- */

/* "start-end perms offset dev inode [path]" */
static bool parse_vma_header(const char *l, size_t len, struct mtd_vma *v)
{
	char buf[512], range[40], perms[8], off[24], dev[16], ino[24];
	const char *p = buf;
	uint64_t s, e, x;

	line_copy(buf, sizeof(buf), l, len);
	if (!token(&p, range, sizeof(range)) || !token(&p, perms, sizeof(perms)) ||
	    !token(&p, off, sizeof(off)) || !token(&p, dev, sizeof(dev)) ||
	    !token(&p, ino, sizeof(ino)) || !tok_u64(off, 16, &x) || !tok_u64(ino, 10, &x))
		return false;
	char *dash = strchr(range, '-');
	if (!dash)
		return false;
	*dash = '\0';
	if (!tok_u64(range, 16, &s) || !tok_u64(dash + 1, 16, &e) || e <= s || strlen(perms) != 4)
		return false;
	memset(v, 0, sizeof(*v));
	v->start = s;
	v->end = e;
	v->readable = perms[0] == 'r';
	v->writable = perms[1] == 'w';
	v->shared = perms[3] == 's';
	while (*p == ' ' || *p == '\t')
		p++;
	snprintf(v->path, sizeof(v->path), "%s", p);
	return true;
}

static unsigned parse_vmflags(const char *s)
{
	unsigned f = 0;
	char tok[8];

	while (token(&s, tok, sizeof(tok))) {
		if (!strcmp(tok, "lo"))
			f |= MTD_VMA_LOCKED;
		else if (!strcmp(tok, "ht"))
			f |= MTD_VMA_HUGETLB;
		else if (!strcmp(tok, "hg"))
			f |= MTD_VMA_HUGEPAGE;
		else if (!strcmp(tok, "nh"))
			f |= MTD_VMA_NOHUGE;
		else if (!strcmp(tok, "io") || !strcmp(tok, "pf"))
			f |= MTD_VMA_IO;
	}
	return f;
}

int mtd_ram_parse_smaps(const char *text, uint64_t lo, uint64_t hi, struct mtd_vma *out, size_t max)
{
	struct mtd_hva_span one = {.start = lo, .end = hi};

	return mtd_ram_parse_smaps_in(text, &one, 1, out, max);
}

static bool in_spans(const struct mtd_vma *v, const struct mtd_hva_span *spans, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		if (v->end > spans[i].start && v->start < spans[i].end)
			return true;
	return false;
}

int mtd_ram_parse_smaps_in(const char *text, const struct mtd_hva_span *spans, size_t nr,
			   struct mtd_vma *out, size_t max)
{
	const char *p = text, *l;
	size_t len, n = 0;
	struct mtd_vma cur;
	bool keep = false;

	if (!text)
		return -EPROTO;
	while (next_line(&p, &l, &len)) {
		size_t hx = 0;
		while (hx < len && isxdigit((unsigned char)l[hx]))
			hx++;
		if (hx && hx < len && l[hx] == '-') {
			/* A VMA header: hex digits then '-' (a field line is "Name:  value"). */
			if (!parse_vma_header(l, len, &cur))
				return -EPROTO;
			keep = in_spans(&cur, spans, nr);
			if (keep) {
				if (n >= max)
					return -E2BIG;
				out[n++] = cur;
			}
			continue;
		}
		if (!keep || !n)
			continue;
		char buf[256];
		line_copy(buf, sizeof(buf), l, len);
		uint64_t kb;
		if (field_kb(buf, "KernelPageSize:", &kb))
			out[n - 1].kernel_page_bytes = kb * 1024;
		else if (field_kb(buf, "Locked:", &kb) && kb)
			out[n - 1].flags |= MTD_VMA_LOCKED;
		else if (strncmp(buf, "VmFlags:", 8) == 0)
			out[n - 1].flags |= parse_vmflags(buf + 8);
	}
	return (int)n;
}

bool mtd_ram_fds_pin_memory(const char *links)
{
	const char *p = links, *l;
	size_t len;

	while (links && next_line(&p, &l, &len)) {
		char buf[256];
		line_copy(buf, sizeof(buf), l, len);
		if (strncmp(buf, "/dev/vfio/", 10) == 0 || strcmp(buf, "/dev/iommu") == 0 ||
		    strstr(buf, "anon_inode:[vfio-device]"))
			return true;
	}
	return false;
}

/* ---- building the layout ------------------------------------------------------------- */

const char *mtd_ram_backing_name(enum mtd_ram_backing b)
{
	switch (b) {
	case MTD_RAM_ANON:
		return "anonymous";
	case MTD_RAM_SHMEM:
		return "shared memory";
	case MTD_RAM_HUGETLB:
		return "hugetlbfs";
	case MTD_RAM_FILE:
		return "file";
	}
	return "?";
}

static bool is_memdev(const struct mtd_ram_inputs *in, const char *name)
{
	const char *n = strip_objects(name);

	for (size_t i = 0; i < in->nr_memdevs; i++)
		if (strcmp(in->memdevs[i], n) == 0)
			return true;
	return false;
}

void mtd_ram_guest_ranges(const struct mtd_ram_inputs *in, bool *is_ram)
{
	for (size_t i = 0; i < in->nr_flat; i++)
		is_ram[i] = in->flat[i].ram && is_memdev(in, in->flat[i].name);
}

static const struct mtd_ramblock *find_block(const struct mtd_ram_inputs *in, const char *name)
{
	for (size_t i = 0; i < in->nr_blocks; i++)
		if (strcmp(in->blocks[i].name, name) == 0 ||
		    strcmp(strip_objects(in->blocks[i].name), strip_objects(name)) == 0)
			return &in->blocks[i];
	return NULL;
}

/* The backing of one region from the mappings under [hva, hva + bytes). */
static int classify(const struct mtd_ram_inputs *in, struct mtd_ram_region *r, char *why, size_t wl)
{
	uint64_t at = r->hva, end = r->hva + r->bytes;
	bool first = true, shared = false;
	unsigned flags = 0;
	uint64_t kpage = 0;
	char path[sizeof(r->path)] = "";

	while (at < end) {
		const struct mtd_vma *v = NULL;
		for (size_t i = 0; i < in->nr_vmas; i++)
			if (in->vmas[i].start <= at && at < in->vmas[i].end) {
				v = &in->vmas[i];
				break;
			}
		if (!v) {
			why_add(why, wl,
				"Cannot be sure of the memory map: RAM block %s's host address "
				"0x%" PRIx64 " (GPA 0x%" PRIx64 ") is not mapped in QEMU.",
				r->block, at, r->gpa + (at - r->hva));
			return -ESTALE;
		}
		if (!v->readable || !v->writable || (v->flags & MTD_VMA_IO)) {
			why_add(why, wl,
				"Cannot be sure of the memory map: RAM block %s's host mapping at "
				"0x%" PRIx64 " is not plain read-write memory.",
				r->block, v->start);
			return -ESTALE;
		}
		if (first) {
			shared = v->shared;
			snprintf(path, sizeof(path), "%s", v->path);
			kpage = v->kernel_page_bytes;
			first = false;
		} else if (v->shared != shared || strcmp(v->path, path) != 0) {
			why_add(why, wl,
				"Cannot be sure of the memory map: RAM block %s spans mappings of "
				"different kinds.",
				r->block);
			return -ESTALE;
		}
		flags |= v->flags;
		if (v->kernel_page_bytes > kpage)
			kpage = v->kernel_page_bytes;
		at = v->end;
	}
	snprintf(r->path, sizeof(r->path), "%s", path);
	r->shared = shared;
	r->locked = flags & MTD_VMA_LOCKED;
	r->thp = flags & MTD_VMA_HUGEPAGE;
	if (kpage > r->page_bytes)
		r->page_bytes = kpage;
	if ((flags & MTD_VMA_HUGETLB) || r->page_bytes > PAGE_BYTES)
		r->backing = MTD_RAM_HUGETLB;
	else if (!path[0] || path[0] == '[')
		r->backing =
		    shared ? MTD_RAM_SHMEM : MTD_RAM_ANON; /* MAP_SHARED|MAP_ANONYMOUS is shmem */
	else if (shared &&
		 (strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "/dev/shm/", 9) == 0 ||
		  strncmp(path, "/SYSV", 5) == 0 || strncmp(path, "/dev/zero", 9) == 0))
		/* memfd, POSIX and SysV shared memory, and MAP_SHARED|MAP_ANONYMOUS (shown as
		 * /dev/zero: memory-backend-ram,share=on) are all shmem. */
		r->backing = MTD_RAM_SHMEM;
	else
		r->backing = MTD_RAM_FILE;
	return 0;
}

/* Step 4's device check: the ranges backed by d->memdev are contiguous and cover exactly
 * [addr, addr + size) (virtio-mem: start at addr; its size is what is plugged). */
static int check_device(struct mtd_ram_layout *l, const struct mtd_memdevice *d, char *why,
			size_t wl)
{
	uint64_t at = d->addr, covered = 0;
	bool any = false;
	bool exact = strcmp(d->type, "dimm") == 0 || strcmp(d->type, "nvdimm") == 0;

	if (!d->memdev[0])
		return 0;
	for (size_t i = 0; i < l->nr; i++) {
		struct mtd_ram_region *r = &l->r[i];
		if (strcmp(strip_objects(r->block), d->memdev) != 0)
			continue;
		if (r->gpa != at) {
			why_add(why, wl,
				"Cannot be sure of the memory map: %s %s is at GPA 0x%" PRIx64
				" but its memory appears at 0x%" PRIx64 ".",
				d->type, d->id[0] ? d->id : d->memdev, d->addr, r->gpa);
			return -ESTALE;
		}
		snprintf(r->device, sizeof(r->device), "%s", d->id[0] ? d->id : d->memdev);
		r->hotplugged = d->hotplugged;
		at += r->bytes;
		covered += r->bytes;
		any = true;
	}
	if (!any) {
		why_add(why, wl,
			"Cannot be sure of the memory map: %s %s (GPA 0x%" PRIx64 ", %" PRIu64
			" MiB) is not in QEMU's flat view.",
			d->type, d->id[0] ? d->id : d->memdev, d->addr, d->size / MiB);
		return -ESTALE;
	}
	if (exact && covered != d->size) {
		why_add(why, wl,
			"Cannot be sure of the memory map: %s %s has %" PRIu64
			" MiB but the flat view maps %" PRIu64 " MiB of it.",
			d->type, d->id[0] ? d->id : d->memdev, d->size / MiB, covered / MiB);
		return -ESTALE;
	}
	return 0;
}

static void say_not_evictable(struct mtd_ram_layout *l)
{
	char done[MTD_RAM_MAX_REGIONS][MTD_RAM_NAME_MAX];
	size_t nd = 0;

	for (size_t i = 0; i < l->nr; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		bool seen = false;
		if (r->evictable || r->gpa + r->bytes <= LOW_LEGACY_END)
			continue;
		for (size_t k = 0; k < nd; k++)
			seen |= strcmp(done[k], r->block) == 0;
		if (seen)
			continue;
		snprintf(done[nd++], MTD_RAM_NAME_MAX, "%s", r->block);
		if (r->locked)
			why_add(l->why, sizeof(l->why),
				"RAM block %s is locked in memory (mlock, e.g. -overcommit "
				"mem-lock=on): it cannot be paged out.",
				r->block);
		else if (r->backing == MTD_RAM_HUGETLB)
			why_add(l->why, sizeof(l->why),
				"RAM block %s is on hugetlbfs (%" PRIu64
				" KiB pages): huge pages are never swapped.",
				r->block, r->page_bytes >> 10);
		else if (r->backing == MTD_RAM_FILE)
			why_add(l->why, sizeof(l->why),
				"RAM block %s is backed by the file %s: pageout would write to the "
				"file, not to swap.",
				r->block, r->path);
		else if (r->backing == MTD_RAM_SHMEM)
			why_add(
			    l->why, sizeof(l->why),
			    "RAM block %s is shared memory (memfd or share=on): pagemap cannot "
			    "show which of its pages are in swap, so pageout could not be checked.",
			    r->block);
	}
}

int mtd_ram_layout_build(const struct mtd_ram_inputs *in, struct mtd_ram_layout *out)
{
	bool is_ram[256];
	char *why;
	size_t wl;

	if (!in || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	why = out->why;
	wl = sizeof(out->why);
	out->vfio = in->vfio;
	if (in->nr_flat > sizeof(is_ram) / sizeof(is_ram[0])) {
		why_add(why, wl,
			"Cannot be sure of the memory map: QEMU's flat view has %zu ranges, more "
			"than memtided reads.",
			in->nr_flat);
		return 0;
	}
	mtd_ram_guest_ranges(in, is_ram);

	/* Steps 1-3: one region per guest-RAM range, translated by QEMU itself. */
	for (size_t i = 0; i < in->nr_flat; i++) {
		const struct mtd_flat_range *f = &in->flat[i];
		if (!is_ram[i])
			continue;
		if (out->nr >= MTD_RAM_MAX_REGIONS) {
			why_add(why, wl,
				"Cannot be sure of the memory map: more than %d RAM ranges.",
				MTD_RAM_MAX_REGIONS);
			return 0;
		}
		uint64_t bytes = f->end - f->start;
		if (f->start % PAGE_BYTES || bytes % PAGE_BYTES || f->offset % PAGE_BYTES ||
		    !bytes) {
			why_add(why, wl,
				"Cannot be sure of the memory map: RAM range 0x%" PRIx64
				"-0x%" PRIx64 " of %s is not page-aligned.",
				f->start, f->end, f->name);
			return 0;
		}
		uint64_t hva = in->hva_first[i], last = in->hva_last[i];
		if (!hva || hva % PAGE_BYTES || hva + bytes < hva ||
		    last != hva + bytes - PAGE_BYTES) {
			why_add(why, wl,
				"Cannot be sure of the memory map: QEMU's gpa2hva does not "
				"translate %s's range at GPA 0x%" PRIx64 " (%" PRIu64
				" MiB) contiguously.",
				f->name, f->start, bytes / MiB);
			return 0;
		}
		if (out->nr && out->r[out->nr - 1].gpa + out->r[out->nr - 1].bytes > f->start) {
			why_add(
			    why, wl,
			    "Cannot be sure of the memory map: RAM ranges overlap at GPA 0x%" PRIx64
			    ".",
			    f->start);
			return 0;
		}
		struct mtd_ram_region *r = &out->r[out->nr++];
		r->gpa = f->start;
		r->bytes = bytes;
		r->hva = hva;
		r->block_offset = f->offset;
		snprintf(r->block, sizeof(r->block), "%s", f->name);
		const struct mtd_ramblock *b = find_block(in, f->name);
		if (!b) {
			why_add(why, wl,
				"Cannot be sure of the memory map: RAM block %s is not in QEMU's "
				"ramblock list.",
				f->name);
			out->nr = 0;
			return 0;
		}
		if (f->offset + bytes > b->used_bytes) {
			why_add(why, wl,
				"Cannot be sure of the memory map: the range at GPA 0x%" PRIx64
				" runs past the end of RAM block %s.",
				f->start, f->name);
			out->nr = 0;
			return 0;
		}
		r->ram_addr = b->offset + f->offset;
		r->page_bytes = b->page_bytes;
		/* Every range of one block agrees on where the block starts. */
		for (size_t k = 0; k + 1 < out->nr; k++)
			if (strcmp(out->r[k].block, r->block) == 0 &&
			    out->r[k].hva - out->r[k].block_offset != r->hva - r->block_offset) {
				why_add(why, wl,
					"Cannot be sure of the memory map: QEMU translates two "
					"ranges of RAM block %s to different bases.",
					r->block);
				out->nr = 0;
				return 0;
			}
		out->ram_bytes += bytes;
	}
	if (!out->nr) {
		why_add(why, wl,
			"Cannot be sure of the memory map: QEMU's flat view has no range backed by "
			"a memory backend.");
		return 0;
	}
	/* Step 4: memory devices. */
	for (size_t i = 0; i < in->nr_devices; i++)
		if (check_device(out, &in->devices[i], why, wl) < 0) {
			out->nr = 0;
			out->ram_bytes = 0;
			return 0;
		}
	/* The mappings: backing and locks. */
	for (size_t i = 0; i < out->nr; i++)
		if (classify(in, &out->r[i], why, wl) < 0) {
			out->nr = 0;
			out->ram_bytes = 0;
			return 0;
		}
	out->sure = true;
	for (size_t i = 0; i < out->nr; i++) {
		struct mtd_ram_region *r = &out->r[i];
		/* Only private anonymous memory: a shared-memory page written to swap leaves no
		 * swap entry in QEMU's page table (measured on this host's 6.18: pagemap reads
		 * "not present" for it, as for a page still in the page cache), so neither the
		 * pageout's result nor a refault could be told page by page. */
		r->evictable = !out->vfio && !r->locked && r->backing == MTD_RAM_ANON &&
			       r->gpa >= LOW_LEGACY_END;
		if (r->evictable)
			out->evictable_bytes += r->bytes;
	}
	if (out->vfio)
		why_add(why, wl,
			"A VFIO device is assigned: QEMU pins all guest RAM for DMA, so none of it "
			"can be paged out.");
	else
		say_not_evictable(out);
	return 0;
}

/* ---- lookups ------------------------------------------------------------------------- */

const struct mtd_ram_region *mtd_ram_layout_find(const struct mtd_ram_layout *l, uint64_t gpa)
{
	size_t lo = 0, hi = l ? l->nr : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct mtd_ram_region *r = &l->r[mid];
		if (gpa < r->gpa)
			hi = mid;
		else if (gpa - r->gpa >= r->bytes)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

int mtd_ram_layout_gpa_to_hva(const struct mtd_ram_layout *l, uint64_t gpa, uint64_t *hva,
			      uint64_t *contig_bytes)
{
	const struct mtd_ram_region *r = mtd_ram_layout_find(l, gpa);

	if (!r)
		return -ERANGE;
	*hva = r->hva + (gpa - r->gpa);
	if (contig_bytes)
		*contig_bytes = r->bytes - (gpa - r->gpa);
	return 0;
}

int mtd_ram_layout_hva_to_gpa(const struct mtd_ram_layout *l, uint64_t hva, uint64_t *gpa)
{
	for (size_t i = 0; l && i < l->nr; i++)
		if (hva >= l->r[i].hva && hva - l->r[i].hva < l->r[i].bytes) {
			*gpa = l->r[i].gpa + (hva - l->r[i].hva);
			return 0;
		}
	return -ERANGE;
}

int mtd_ram_layout_ram_addr_to_gpa(const struct mtd_ram_layout *l, uint64_t ram_addr, uint64_t *gpa)
{
	for (size_t i = 0; l && i < l->nr; i++)
		if (ram_addr >= l->r[i].ram_addr && ram_addr - l->r[i].ram_addr < l->r[i].bytes) {
			*gpa = l->r[i].gpa + (ram_addr - l->r[i].ram_addr);
			return 0;
		}
	return -ERANGE;
}

bool mtd_ram_layout_same(const struct mtd_ram_layout *a, const struct mtd_ram_layout *b)
{
	if (a->nr != b->nr || a->sure != b->sure || a->vfio != b->vfio)
		return false;
	for (size_t i = 0; i < a->nr; i++) {
		const struct mtd_ram_region *x = &a->r[i], *y = &b->r[i];
		if (x->gpa != y->gpa || x->bytes != y->bytes || x->hva != y->hva ||
		    x->backing != y->backing || x->locked != y->locked ||
		    x->evictable != y->evictable || strcmp(x->block, y->block) != 0)
			return false;
	}
	return true;
}

int mtd_ram_layout_describe(const struct mtd_ram_layout *l, char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return -ENOSPC;
	buf[0] = '\0';
	for (size_t i = 0; i < l->nr; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		int n = snprintf(buf + used, len - used,
				 "%s0x%" PRIx64 "+%" PRIu64 "K %s@0x%" PRIx64
				 "%s%s%s hva 0x%" PRIx64 " %s%s%s",
				 i ? "; " : "", r->gpa, r->bytes >> 10, r->block, r->block_offset,
				 r->device[0] ? " (" : "", r->device,
				 r->device[0] ? (r->hotplugged ? ", hotplugged)" : ")") : "",
				 r->hva, mtd_ram_backing_name(r->backing),
				 r->locked ? ", locked" : "", r->evictable ? "" : ", kept");
		if (n < 0 || (size_t)n >= len - used)
			return -ENOSPC;
		used += (size_t)n;
	}
	return 0;
}

/* ---- against a live QEMU ------------------------------------------------------------- */

/* Read a whole small file into a NUL-terminated heap buffer (at most MAX_TEXT_BYTES). */
static int read_text(const char *path, char **out)
{
	FILE *f = fopen(path, "re");
	size_t cap = 1 << 16, len = 0;
	char *buf;

	if (!f)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= MAX_TEXT_BYTES) {
				free(buf);
				fclose(f);
				return -EFBIG;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				fclose(f);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	int err = ferror(f) ? -EIO : 0;
	fclose(f);
	if (err) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* The fd link targets of pid, one a line. */
static char *fd_links(const char *proc_root, int pid)
{
	char dir[128];
	size_t cap = 4096, len = 0;
	char *buf = calloc(1, cap);
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/%d/fd", proc_root, pid);
	d = opendir(dir);
	if (!d || !buf) {
		if (d)
			closedir(d);
		return buf;
	}
	while ((e = readdir(d))) {
		char link[PATH_MAX], path[512];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (len + (size_t)n + 2 > cap) {
			char *nb = realloc(buf, cap * 2 + (size_t)n);
			if (!nb)
				break;
			buf = nb;
			cap = cap * 2 + (size_t)n;
		}
		memcpy(buf + len, link, (size_t)n);
		len += (size_t)n;
		buf[len++] = '\n';
		buf[len] = '\0';
	}
	closedir(d);
	return buf;
}

static int hmp(mtd_qmp_fn qmp, void *ctx, const char *cmdline, char **text, char *err,
	       size_t errlen)
{
	struct json_object *args = json_object_new_object(), *ret = NULL;
	int rc;

	if (!args)
		return -ENOMEM;
	json_object_object_add(args, "command-line", json_object_new_string(cmdline));
	rc = qmp(ctx, "human-monitor-command", args, &ret, err, errlen);
	json_object_put(args);
	if (rc < 0)
		return rc;
	if (!json_object_is_type(ret, json_type_string) ||
	    json_object_get_string_len(ret) > (int)MAX_TEXT_BYTES) {
		json_object_put(ret);
		snprintf(err, errlen, "HMP %s: the answer is not text", cmdline);
		return -EPROTO;
	}
	*text = strdup(json_object_get_string(ret));
	json_object_put(ret);
	return *text ? 0 : -ENOMEM;
}

static int gpa2hva(mtd_qmp_fn qmp, void *ctx, uint64_t gpa, uint64_t *hva, char *err, size_t errlen)
{
	char cmd[64], *text = NULL;
	int rc;

	snprintf(cmd, sizeof(cmd), "gpa2hva 0x%" PRIx64, gpa);
	rc = hmp(qmp, ctx, cmd, &text, err, errlen);
	if (rc < 0)
		return rc;
	rc = mtd_ram_parse_gpa2hva(text, hva, NULL, 0);
	free(text);
	if (rc == -ENOENT)
		*hva = 0; /* the builder says what is wrong with it */
	return rc == -ENOENT ? 0 : rc;
}

int mtd_ram_layout_query(mtd_qmp_fn qmp, void *qmp_ctx, int pid, const char *proc_root,
			 struct mtd_ram_layout *out)
{
	struct mtd_flat_range *flat = calloc(256, sizeof(*flat));
	struct mtd_ramblock *blocks = calloc(128, sizeof(*blocks));
	char(*memdevs)[MTD_RAM_NAME_MAX] = calloc(MTD_RAM_MAX_REGIONS, sizeof(*memdevs));
	struct mtd_memdevice *devs = calloc(MTD_RAM_MAX_REGIONS, sizeof(*devs));
	uint64_t *first = calloc(256, sizeof(uint64_t)), *last = calloc(256, sizeof(uint64_t));
	struct mtd_vma *vmas = calloc(MAX_VMAS, sizeof(*vmas));
	struct mtd_hva_span *spans = calloc(256, sizeof(*spans));
	struct json_object *ret = NULL;
	char *text = NULL, err[200] = "", path[128];
	struct mtd_ram_inputs in = {0};
	bool is_ram[256];
	int rc, n;

	memset(out, 0, sizeof(*out));
	if (!flat || !blocks || !memdevs || !devs || !first || !last || !vmas || !spans) {
		rc = -ENOMEM;
		snprintf(out->why, sizeof(out->why), "out of memory");
		goto out;
	}
	if (!proc_root)
		proc_root = "/proc";
	/* 1. The flat view. */
	rc = hmp(qmp, qmp_ctx, "info mtree -f", &text, err, sizeof(err));
	if (rc < 0)
		goto fail;
	n = mtd_ram_parse_flatview(text, flat, 256);
	free(text);
	text = NULL;
	if (n < 0) {
		rc = n;
		snprintf(err, sizeof(err), "cannot parse QEMU's `info mtree -f`");
		goto fail;
	}
	in.flat = flat;
	in.nr_flat = (size_t)n;
	/* 2. The memory backends and devices. */
	rc = qmp(qmp_ctx, "query-memdev", NULL, &ret, err, sizeof(err));
	if (rc < 0)
		goto fail;
	n = mtd_ram_parse_memdevs(ret, memdevs, MTD_RAM_MAX_REGIONS);
	json_object_put(ret);
	ret = NULL;
	if (n < 0) {
		rc = n;
		snprintf(err, sizeof(err), "cannot parse QEMU's query-memdev");
		goto fail;
	}
	in.memdevs = memdevs;
	in.nr_memdevs = (size_t)n;
	rc = qmp(qmp_ctx, "query-memory-devices", NULL, &ret, err, sizeof(err));
	if (rc < 0)
		goto fail;
	n = mtd_ram_parse_memdevices(ret, devs, MTD_RAM_MAX_REGIONS);
	json_object_put(ret);
	ret = NULL;
	if (n < 0) {
		rc = n;
		snprintf(err, sizeof(err), "cannot parse QEMU's query-memory-devices");
		goto fail;
	}
	in.devices = devs;
	in.nr_devices = (size_t)n;
	/* 4. RAM blocks. */
	rc = hmp(qmp, qmp_ctx, "info ramblock", &text, err, sizeof(err));
	if (rc < 0)
		goto fail;
	n = mtd_ram_parse_ramblocks(text, blocks, 128);
	free(text);
	text = NULL;
	if (n < 0) {
		rc = n;
		snprintf(err, sizeof(err), "cannot parse QEMU's `info ramblock`");
		goto fail;
	}
	in.blocks = blocks;
	in.nr_blocks = (size_t)n;
	/* 3. QEMU's own translation of each guest-RAM range's first and last page. */
	mtd_ram_guest_ranges(&in, is_ram);
	size_t nr_spans = 0;
	for (size_t i = 0; i < in.nr_flat; i++) {
		if (!is_ram[i])
			continue;
		rc = gpa2hva(qmp, qmp_ctx, flat[i].start, &first[i], err, sizeof(err));
		if (rc == 0 && flat[i].end - flat[i].start > PAGE_BYTES)
			rc = gpa2hva(qmp, qmp_ctx, flat[i].end - PAGE_BYTES, &last[i], err,
				     sizeof(err));
		else
			last[i] = first[i];
		if (rc < 0)
			goto fail;
		/* The mappings under each range, not under the span from the lowest to the
		 * highest: a DIMM far from the machine's RAM has all of QEMU between them. */
		if (first[i])
			spans[nr_spans++] = (struct mtd_hva_span){
			    .start = first[i], .end = first[i] + (flat[i].end - flat[i].start)};
	}
	in.hva_first = first;
	in.hva_last = last;
	/* The mappings under guest RAM, and the fds. */
	snprintf(path, sizeof(path), "%s/%d/smaps", proc_root, pid);
	rc = read_text(path, &text);
	if (rc < 0) {
		snprintf(err, sizeof(err), "cannot read %s: %s", path, strerror(-rc));
		goto fail;
	}
	n = mtd_ram_parse_smaps_in(text, spans, nr_spans, vmas, MAX_VMAS);
	free(text);
	text = NULL;
	if (n < 0) {
		rc = n;
		if (n == -E2BIG)
			snprintf(err, sizeof(err),
				 "guest RAM lies in more than %d of QEMU's mappings (%s)", MAX_VMAS,
				 path);
		else
			snprintf(err, sizeof(err), "cannot parse %s", path);
		goto fail;
	}
	in.vmas = vmas;
	in.nr_vmas = (size_t)n;
	char *links = fd_links(proc_root, pid);
	in.vfio = mtd_ram_fds_pin_memory(links);
	free(links);
	rc = mtd_ram_layout_build(&in, out);
	goto out;
fail:
	snprintf(out->why, sizeof(out->why), "Cannot read the memory map from QEMU: %s.",
		 err[0] ? err : strerror(-rc));
out:
	free(text);
	free(flat);
	free(blocks);
	free(memdevs);
	free(devs);
	free(first);
	free(last);
	free(vmas);
	free(spans);
	return rc;
}

int mtd_ram_layout_recheck(const struct mtd_ram_layout *l, int pid, const char *proc_root)
{
	struct mtd_vma *vmas = calloc(MAX_VMAS, sizeof(*vmas));
	struct mtd_hva_span spans[MTD_RAM_MAX_REGIONS];
	char path[128], *text = NULL;
	size_t nr_spans = 0;
	int rc, n;

	if (!vmas)
		return -ENOMEM;
	for (size_t i = 0; i < l->nr && i < MTD_RAM_MAX_REGIONS; i++)
		spans[nr_spans++] =
		    (struct mtd_hva_span){.start = l->r[i].hva, .end = l->r[i].hva + l->r[i].bytes};
	snprintf(path, sizeof(path), "%s/%d/maps", proc_root ? proc_root : "/proc", pid);
	rc = read_text(path, &text);
	if (rc < 0)
		goto out;
	n = mtd_ram_parse_smaps_in(text, spans, nr_spans, vmas, MAX_VMAS);
	if (n < 0) {
		rc = n;
		goto out;
	}
	for (size_t i = 0; i < l->nr && rc == 0; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		uint64_t at = r->hva, end = r->hva + r->bytes;
		while (at < end) {
			const struct mtd_vma *v = NULL;
			for (int k = 0; k < n; k++)
				if (vmas[k].start <= at && at < vmas[k].end)
					v = &vmas[k];
			if (!v || !v->readable || !v->writable || v->shared != r->shared ||
			    strcmp(v->path, r->path) != 0) {
				rc = -ESTALE;
				break;
			}
			at = v->end;
		}
	}
out:
	free(text);
	free(vmas);
	return rc;
}
