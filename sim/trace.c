// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace.c - memtide's access trace: the in-memory form, and its file format's strict reader
 * and writer.  docs/trace-format.md is the specification; this file follows it section by
 * section.
 *
 * In memory, an epoch is a sorted array of page indices (SIM_ACC_WRITE marks writes) and a
 * sorted array of freed pages: the replay core walks them in order, and 4 bytes per access
 * keeps a 600-epoch trace of a 256 MiB guest in a few MiB.  On disk the same sets are runs
 * of consecutive pages, gap/length varints, compressed with zstd: the synthetic suite
 * shrinks to ~1-3% of the in-memory size that way.
 *
 * The reader treats a trace as untrusted: it never trusts a count to size an allocation
 * before the data behind it has been seen, bounds every quantity (SIM_MAX_RAM_PAGES,
 * TRACE_MAX_EPOCHS, TRACE_MAX_ENTRIES, decompressed size), checks order and disjointness of
 * every run, and names the decompressed-stream offset of the first inconsistency.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "sim.h"

#define TRACE_MAGIC       "MTDTRACE"
#define TRACE_VERSION     1u
#define TRACE_HDR_BYTES   16u
#define TRACE_MAX_RANGES  4096u
#define TRACE_MAX_EPOCHS  (10u * 1000 * 1000)
#define TRACE_MAX_ENTRIES (1ull << 28) /* page entries over all epochs: 1 GiB in memory */
#define TRACE_TAG_EPOCH   0x45         /* 'E' */
#define TRACE_TAG_END     0x5A         /* 'Z' */

/* ======================================================================================
 * In-memory trace
 * ====================================================================================== */

int sim_trace_init(struct sim_trace *t, const struct vmm_range *ram, size_t nr_ram)
{
	uint64_t pages = 0, prev_end = 0;

	memset(t, 0, sizeof(*t));
	if (nr_ram == 0 || nr_ram > TRACE_MAX_RANGES)
		return -EINVAL;
	for (size_t i = 0; i < nr_ram; i++) {
		if (ram[i].start % VMM_SIZE_2M || ram[i].end % VMM_SIZE_2M ||
		    ram[i].end <= ram[i].start || (i && ram[i].start < prev_end))
			return -EINVAL;
		prev_end = ram[i].end;
		pages += (ram[i].end - ram[i].start) / SIM_PAGE_SIZE;
	}
	if (pages > SIM_MAX_RAM_PAGES)
		return -EINVAL;
	t->ram = malloc(nr_ram * sizeof(*ram));
	if (!t->ram)
		return -ENOMEM;
	memcpy(t->ram, ram, nr_ram * sizeof(*ram));
	t->nr_ram = nr_ram;
	t->ram_pages = pages;
	t->page_size = SIM_PAGE_SIZE;
	return 0;
}

void sim_trace_free(struct sim_trace *t)
{
	for (size_t e = 0; e < t->nr_epochs; e++) {
		free(t->epochs[e].acc);
		free(t->epochs[e].freed);
	}
	free(t->epochs);
	free(t->ram);
	memset(t, 0, sizeof(*t));
}

static int cmp_page(const void *a, const void *b)
{
	uint32_t x = SIM_ACC_PAGE(*(const uint32_t *)a), y = SIM_ACC_PAGE(*(const uint32_t *)b);
	return (x > y) - (x < y);
}

/* Sort and merge duplicates (OR of the write bit).  Returns the new count. */
static size_t sort_unique(uint32_t *v, size_t n)
{
	size_t o = 0;

	qsort(v, n, sizeof(*v), cmp_page);
	for (size_t i = 0; i < n; i++) {
		if (o && SIM_ACC_PAGE(v[o - 1]) == SIM_ACC_PAGE(v[i]))
			v[o - 1] |= v[i] & SIM_ACC_WRITE;
		else
			v[o++] = v[i];
	}
	return o;
}

static int copy_set(const uint32_t *in, size_t n, uint64_t ram_pages, bool keep_write,
		    uint32_t **out, uint32_t *nr_out)
{
	uint32_t *v;

	*out = NULL;
	*nr_out = 0;
	if (!n)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (SIM_ACC_PAGE(in[i]) >= ram_pages) {
			free(v);
			return -EINVAL;
		}
		v[i] = keep_write ? in[i] : SIM_ACC_PAGE(in[i]);
	}
	*nr_out = (uint32_t)sort_unique(v, n);
	*out = v;
	return 0;
}

int sim_trace_add_epoch(struct sim_trace *t, uint64_t t_ms, const uint32_t *acc, size_t nr_acc,
			const uint32_t *freed, size_t nr_free)
{
	struct sim_epoch *ep;
	int rc;

	if (t->nr_epochs && t_ms <= t->epochs[t->nr_epochs - 1].t_ms)
		return -EINVAL;
	if (t->nr_epochs >= TRACE_MAX_EPOCHS || nr_acc > UINT32_MAX || nr_free > UINT32_MAX)
		return -EINVAL;
	if (t->nr_epochs == t->cap_epochs) {
		size_t cap = t->cap_epochs ? t->cap_epochs * 2 : 64;
		struct sim_epoch *n = realloc(t->epochs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->epochs = n;
		t->cap_epochs = cap;
	}
	ep = &t->epochs[t->nr_epochs];
	memset(ep, 0, sizeof(*ep));
	ep->t_ms = t_ms;
	rc = copy_set(acc, nr_acc, t->ram_pages, true, &ep->acc, &ep->nr_acc);
	if (rc)
		return rc;
	rc = copy_set(freed, nr_free, t->ram_pages, false, &ep->freed, &ep->nr_free);
	if (rc) {
		free(ep->acc);
		return rc;
	}
	t->nr_epochs++;
	return 0;
}

int sim_trace_finish(struct sim_trace *t, uint64_t end_ms)
{
	if (!t->nr_epochs || end_ms <= t->epochs[t->nr_epochs - 1].t_ms)
		return -EINVAL;
	t->end_ms = end_ms;
	return 0;
}

uint64_t sim_epoch_end_ms(const struct sim_trace *t, size_t e)
{
	return e + 1 < t->nr_epochs ? t->epochs[e + 1].t_ms : t->end_ms;
}

uint64_t sim_page_gpa(const struct sim_trace *t, uint64_t idx)
{
	for (size_t i = 0; i < t->nr_ram; i++) {
		uint64_t n = (t->ram[i].end - t->ram[i].start) / SIM_PAGE_SIZE;
		if (idx < n)
			return t->ram[i].start + idx * SIM_PAGE_SIZE;
		idx -= n;
	}
	return UINT64_MAX;
}

int64_t sim_gpa_page(const struct sim_trace *t, uint64_t gpa)
{
	uint64_t base = 0;

	for (size_t i = 0; i < t->nr_ram; i++) {
		if (gpa >= t->ram[i].start && gpa < t->ram[i].end)
			return (int64_t)(base + (gpa - t->ram[i].start) / SIM_PAGE_SIZE);
		base += (t->ram[i].end - t->ram[i].start) / SIM_PAGE_SIZE;
	}
	return -ERANGE;
}

/* ======================================================================================
 * Writer: body into a buffer, then one zstd frame with a content checksum
 * ====================================================================================== */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void wb_put(struct wbuf *b, const void *src, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

/* Unsigned LEB128: 7 bits per byte, low group first, high bit = more follows. */
static void wb_varint(struct wbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			tmp[n] |= 0x80;
		n++;
	} while (v);
	wb_put(b, tmp, n);
}

/* One set as runs: count, then per run the gap from the previous run's end and len - 1.
 * `want`: SIM_ACC_WRITE selects written entries, 0 read-only ones, ~0u every entry. */
static void wb_set(struct wbuf *b, const uint32_t *v, uint32_t n, uint32_t want)
{
	uint32_t runs = 0;
	uint64_t prev_end = 0;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			wb_varint(b, runs);
		prev_end = 0;
		for (uint32_t i = 0; i < n;) {
			if (want != ~0u && (v[i] & SIM_ACC_WRITE) != want) {
				i++;
				continue;
			}
			uint32_t start = SIM_ACC_PAGE(v[i]), len = 1;
			uint32_t j = i + 1;
			for (; j < n; j++) {
				if (want != ~0u && (v[j] & SIM_ACC_WRITE) != want)
					break;
				if (SIM_ACC_PAGE(v[j]) != start + len)
					break;
				len++;
			}
			if (pass == 0) {
				runs++;
			} else {
				wb_varint(b, start - prev_end);
				wb_varint(b, len - 1);
			}
			prev_end = (uint64_t)start + len;
			i = j;
		}
	}
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int sim_trace_write(const struct sim_trace *t, const char *path, int level, char *err,
		    size_t errlen)
{
	struct wbuf b = {0};
	uint8_t hdr[TRACE_HDR_BYTES] = {0};
	uint64_t prev_end = 0, prev_t = 0;
	size_t slen = strnlen(t->source, sizeof(t->source) - 1);
	void *z = NULL;
	FILE *f = NULL;
	int rc = 0;

	if (!t->nr_epochs || t->end_ms <= t->epochs[t->nr_epochs - 1].t_ms) {
		set_err(err, errlen, "trace has no epochs or is not finished");
		return -EINVAL;
	}
	/* Step 1: the guest header. */
	wb_varint(&b, t->page_size);
	wb_varint(&b, t->nr_ram);
	for (size_t i = 0; i < t->nr_ram; i++) {
		wb_varint(&b, (t->ram[i].start - prev_end) / SIM_PAGE_SIZE);
		wb_varint(&b, (t->ram[i].end - t->ram[i].start) / SIM_PAGE_SIZE);
		prev_end = t->ram[i].end;
	}
	wb_varint(&b, slen);
	wb_put(&b, t->source, slen);
	/* Step 2: epochs. */
	for (size_t e = 0; e < t->nr_epochs; e++) {
		const struct sim_epoch *ep = &t->epochs[e];
		uint8_t tag = TRACE_TAG_EPOCH;
		wb_put(&b, &tag, 1);
		wb_varint(&b, ep->t_ms - prev_t);
		prev_t = ep->t_ms;
		wb_set(&b, ep->acc, ep->nr_acc, 0);
		wb_set(&b, ep->acc, ep->nr_acc, SIM_ACC_WRITE);
		wb_set(&b, ep->freed, ep->nr_free, ~0u);
	}
	/* Step 3: the end record. */
	{
		uint8_t tag = TRACE_TAG_END;
		wb_put(&b, &tag, 1);
		wb_varint(&b, t->nr_epochs);
		wb_varint(&b, t->end_ms - prev_t);
	}
	if (b.err) {
		rc = b.err;
		set_err(err, errlen, "out of memory encoding the trace");
		goto out;
	}
	size_t zcap = ZSTD_compressBound(b.len);
	z = malloc(zcap);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (!z || !cc) {
		ZSTD_freeCCtx(cc);
		rc = -ENOMEM;
		set_err(err, errlen, "out of memory compressing the trace");
		goto out;
	}
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
	size_t zlen = ZSTD_compress2(cc, z, zcap, b.p, b.len);
	ZSTD_freeCCtx(cc);
	if (ZSTD_isError(zlen)) {
		rc = -EIO;
		set_err(err, errlen, "zstd: %s", ZSTD_getErrorName(zlen));
		goto out;
	}
	memcpy(hdr, TRACE_MAGIC, sizeof(TRACE_MAGIC) - 1); /* the 8 bytes, no NUL */
	hdr[8] = TRACE_VERSION; /* little-endian u32 version, then u32 flags = 0 */
	f = fopen(path, "wb");
	if (!f) {
		rc = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr) || fwrite(z, 1, zlen, f) != zlen) {
		rc = -EIO;
		set_err(err, errlen, "%s: write failed", path);
	}
	if (fclose(f) && !rc) {
		rc = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
	}
out:
	free(z);
	free(b.p);
	return rc;
}

/* ======================================================================================
 * Reader: a byte source over ZSTD_decompressStream, then the body parser
 * ====================================================================================== */

struct rd {
	FILE *f;
	ZSTD_DStream *zs;
	uint8_t in[1 << 16], out[1 << 16];
	ZSTD_inBuffer zin;
	ZSTD_outBuffer zout;
	size_t pos;      /* next byte of out to consume */
	uint64_t offset; /* bytes of the decompressed body consumed */
	bool frame_done; /* ZSTD_decompressStream returned 0: the frame ended */
	char *err;
	size_t errlen;
	int rc; /* first error */
};

static int rd_fail(struct rd *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int rd_fail(struct rd *r, int rc, const char *fmt, ...)
{
	va_list ap;
	char msg[160];

	if (r->rc)
		return r->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	set_err(r->err, r->errlen, "corrupt trace at body offset %llu: %s",
		(unsigned long long)r->offset, msg);
	r->rc = rc;
	return rc;
}

/* Refill out[]; returns bytes available, 0 at the end of the frame, or -errno. */
static int rd_fill(struct rd *r)
{
	r->zout.dst = r->out;
	r->zout.size = sizeof(r->out);
	r->zout.pos = 0;
	r->pos = 0;
	while (r->zout.pos == 0) {
		if (r->frame_done)
			return 0;
		if (r->zin.pos == r->zin.size) {
			size_t n = fread(r->in, 1, sizeof(r->in), r->f);
			if (n == 0)
				return rd_fail(r, -EINVAL,
					       "truncated: compressed stream ends early");
			r->zin.src = r->in;
			r->zin.size = n;
			r->zin.pos = 0;
		}
		size_t ret = ZSTD_decompressStream(r->zs, &r->zout, &r->zin);
		if (ZSTD_isError(ret))
			return rd_fail(r, -EINVAL, "zstd: %s", ZSTD_getErrorName(ret));
		if (ret == 0)
			r->frame_done = true;
	}
	return (int)r->zout.pos;
}

static int rd_byte(struct rd *r, uint8_t *b)
{
	if (r->rc)
		return r->rc;
	if (r->pos == r->zout.pos) {
		int n = rd_fill(r);
		if (n < 0)
			return n;
		if (n == 0)
			return rd_fail(r, -EINVAL, "body ends before the end record");
	}
	*b = r->out[r->pos++];
	r->offset++;
	return 0;
}

static int rd_varint(struct rd *r, uint64_t *v)
{
	uint64_t x = 0;

	for (int i = 0; i < 10; i++) {
		uint8_t b = 0;
		int rc = rd_byte(r, &b);
		if (rc)
			return rc;
		if (i == 9 && b > 1)
			return rd_fail(r, -EINVAL, "varint overflows 64 bits");
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return rd_fail(r, -EINVAL, "varint longer than 10 bytes");
}

/* A growable page array for one set while it is decoded. */
struct pv {
	uint32_t *v;
	size_t n, cap;
};

static int pv_push(struct pv *p, uint32_t x)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		uint32_t *nv = realloc(p->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		p->v = nv;
		p->cap = cap;
	}
	p->v[p->n++] = x;
	return 0;
}

/* Decode one run-length set, appending its pages (with flag) to p.  Checks that runs are
 * ascending, disjoint and inside RAM; *entries counts toward TRACE_MAX_ENTRIES. */
static int rd_set(struct rd *r, const struct sim_trace *t, uint32_t flag, struct pv *p,
		  uint64_t *entries, const char *what)
{
	uint64_t nr_runs, prev_end = 0;
	int rc = rd_varint(r, &nr_runs);

	if (rc)
		return rc;
	if (nr_runs > t->ram_pages)
		return rd_fail(r, -EINVAL, "%s set: %llu runs in a %llu-page guest", what,
			       (unsigned long long)nr_runs, (unsigned long long)t->ram_pages);
	for (uint64_t i = 0; i < nr_runs; i++) {
		uint64_t gap, lenm1;
		if ((rc = rd_varint(r, &gap)) || (rc = rd_varint(r, &lenm1)))
			return rc;
		if (i && gap == 0)
			return rd_fail(r, -EINVAL, "%s set: runs touch (not merged)", what);
		if (gap > t->ram_pages || lenm1 >= t->ram_pages ||
		    prev_end + gap + lenm1 + 1 > t->ram_pages)
			return rd_fail(r, -EINVAL, "%s set: run outside guest RAM", what);
		uint64_t start = prev_end + gap;
		*entries += lenm1 + 1;
		if (*entries > TRACE_MAX_ENTRIES)
			return rd_fail(r, -EFBIG, "more than %llu page entries",
				       (unsigned long long)TRACE_MAX_ENTRIES);
		for (uint64_t pg = start; pg <= start + lenm1; pg++)
			if (pv_push(p, (uint32_t)pg | flag))
				return rd_fail(r, -ENOMEM, "out of memory");
		prev_end = start + lenm1 + 1;
	}
	return 0;
}

/* Merge the read and write sets (each ascending) into acc, rejecting overlap. */
static int merge_rw(struct rd *r, struct pv *rd_set_v, size_t nr_read, struct pv *out)
{
	const uint32_t *a = rd_set_v->v, *b = rd_set_v->v + nr_read;
	size_t na = nr_read, nb = rd_set_v->n - nr_read, i = 0, j = 0;

	out->n = 0;
	while (i < na || j < nb) {
		uint32_t x;
		if (j == nb || (i < na && a[i] < SIM_ACC_PAGE(b[j]))) {
			x = a[i++];
		} else if (i == na || SIM_ACC_PAGE(b[j]) < a[i]) {
			x = b[j++];
		} else {
			return rd_fail(r, -EINVAL, "page %u both in the read and the write set",
				       a[i]);
		}
		if (pv_push(out, x))
			return rd_fail(r, -ENOMEM, "out of memory");
	}
	return 0;
}

static int rd_header(struct rd *r, struct sim_trace *t)
{
	uint64_t page_size, nr, prev_end_pages = 0, slen;
	struct vmm_range *ram = NULL;
	int rc;

	if ((rc = rd_varint(r, &page_size)))
		return rc;
	if (page_size != SIM_PAGE_SIZE)
		return rd_fail(r, -EINVAL, "page size %llu not supported (version 1: 4096)",
			       (unsigned long long)page_size);
	if ((rc = rd_varint(r, &nr)))
		return rc;
	if (nr == 0 || nr > TRACE_MAX_RANGES)
		return rd_fail(r, -EINVAL, "%llu RAM ranges (1..%u allowed)",
			       (unsigned long long)nr, TRACE_MAX_RANGES);
	ram = calloc(nr, sizeof(*ram));
	if (!ram)
		return rd_fail(r, -ENOMEM, "out of memory");
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t gap, np;
		if ((rc = rd_varint(r, &gap)) || (rc = rd_varint(r, &np)))
			goto out;
		if (np == 0 || np % SIM_BLOCK_PAGES || gap % SIM_BLOCK_PAGES ||
		    gap > (1ull << 36) || np > SIM_MAX_RAM_PAGES) {
			rc = rd_fail(r, -EINVAL, "RAM range %llu not 2 MiB aligned or too large",
				     (unsigned long long)i);
			goto out;
		}
		ram[i].start = (prev_end_pages + gap) * SIM_PAGE_SIZE;
		ram[i].end = ram[i].start + np * SIM_PAGE_SIZE;
		prev_end_pages += gap + np;
	}
	rc = sim_trace_init(t, ram, nr);
	if (rc) {
		rc = rd_fail(r, rc == -ENOMEM ? -ENOMEM : -EFBIG, "RAM layout over %llu pages",
			     (unsigned long long)SIM_MAX_RAM_PAGES);
		goto out;
	}
	if ((rc = rd_varint(r, &slen)))
		goto out;
	if (slen >= sizeof(t->source)) {
		rc = rd_fail(r, -EINVAL, "source name of %llu bytes", (unsigned long long)slen);
		goto out;
	}
	for (uint64_t i = 0; i < slen; i++) {
		uint8_t c = 0;
		if ((rc = rd_byte(r, &c)))
			goto out;
		if (c < 0x20 || c > 0x7e) {
			rc = rd_fail(r, -EINVAL, "source name is not printable ASCII");
			goto out;
		}
		t->source[i] = (char)c;
	}
out:
	free(ram);
	return rc;
}

static int rd_body(struct rd *r, struct sim_trace *t)
{
	struct pv rw = {0}, acc = {0}, fr = {0};
	uint64_t now = 0, entries = 0;
	int rc = rd_header(r, t);

	while (!rc) {
		uint8_t tag = 0;
		uint64_t dt;
		if ((rc = rd_byte(r, &tag)))
			break;
		if (tag == TRACE_TAG_END) {
			uint64_t n;
			if ((rc = rd_varint(r, &n)) || (rc = rd_varint(r, &dt)))
				break;
			if (n != t->nr_epochs) {
				rc = rd_fail(r, -EINVAL, "end record says %llu epochs, found %zu",
					     (unsigned long long)n, t->nr_epochs);
			} else if (n == 0 || dt == 0 || dt > (1ull << 40)) {
				rc = rd_fail(r, -EINVAL, "no epochs, or last epoch of length %llu",
					     (unsigned long long)dt);
			} else {
				t->end_ms = now + dt;
			}
			break;
		}
		if (tag != TRACE_TAG_EPOCH) {
			rc = rd_fail(r, -EINVAL, "unknown record tag 0x%02x", tag);
			break;
		}
		if ((rc = rd_varint(r, &dt)))
			break;
		if ((t->nr_epochs && dt == 0) || dt > (1ull << 40)) {
			rc = rd_fail(r, -EINVAL, "epoch time does not increase (delta %llu ms)",
				     (unsigned long long)dt);
			break;
		}
		if (t->nr_epochs >= TRACE_MAX_EPOCHS) {
			rc = rd_fail(r, -EFBIG, "more than %u epochs", TRACE_MAX_EPOCHS);
			break;
		}
		now += dt;
		rw.n = fr.n = 0;
		if ((rc = rd_set(r, t, 0, &rw, &entries, "read")))
			break;
		size_t nr_read = rw.n;
		if ((rc = rd_set(r, t, SIM_ACC_WRITE, &rw, &entries, "write")) ||
		    (rc = rd_set(r, t, 0, &fr, &entries, "free")) ||
		    (rc = merge_rw(r, &rw, nr_read, &acc)))
			break;
		/* Already sorted and unique: add_epoch's sort is then one linear pass. */
		rc = sim_trace_add_epoch(t, now, acc.v, acc.n, fr.v, fr.n);
		if (rc)
			rc = rd_fail(r, rc, "cannot store epoch %zu", t->nr_epochs);
	}
	if (!rc) {
		/* The frame must end exactly here: no trailing bytes inside or after it. */
		uint8_t extra;
		if (r->pos < r->zout.pos || rd_fill(r) > 0)
			rc = rd_fail(r, -EINVAL, "data after the end record");
		else if (!r->rc && (r->zin.pos < r->zin.size || fread(&extra, 1, 1, r->f) == 1))
			rc = rd_fail(r, -EINVAL, "bytes after the compressed frame");
		else
			rc = r->rc;
	}
	free(rw.v);
	free(acc.v);
	free(fr.v);
	return rc;
}

int sim_trace_read(struct sim_trace *t, const char *path, char *err, size_t errlen)
{
	uint8_t hdr[TRACE_HDR_BYTES];
	struct rd *r;
	int rc;

	memset(t, 0, sizeof(*t));
	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr) || memcmp(hdr, TRACE_MAGIC, 8) != 0) {
		fclose(f);
		set_err(err, errlen, "%s: not a memtide trace (bad magic)", path);
		return -EINVAL;
	}
	uint32_t version = hdr[8] | hdr[9] << 8 | hdr[10] << 16 | (uint32_t)hdr[11] << 24;
	uint32_t flags = hdr[12] | hdr[13] << 8 | hdr[14] << 16 | (uint32_t)hdr[15] << 24;
	if (version != TRACE_VERSION || flags != 0) {
		fclose(f);
		set_err(err, errlen, "%s: trace version %u flags 0x%x not supported (want %u, 0)",
			path, version, flags, TRACE_VERSION);
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		fclose(f);
		return -ENOMEM;
	}
	r->f = f;
	r->err = err;
	r->errlen = errlen;
	r->zs = ZSTD_createDStream();
	if (!r->zs) {
		rc = -ENOMEM;
		goto out;
	}
	ZSTD_initDStream(r->zs);
	rc = rd_body(r, t);
	if (!rc && ferror(f)) {
		rc = -EIO;
		set_err(err, errlen, "%s: read error", path);
	}
out:
	if (rc)
		sim_trace_free(t);
	ZSTD_freeDStream(r->zs);
	free(r);
	fclose(f);
	return rc;
}
