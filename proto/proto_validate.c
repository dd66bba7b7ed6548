// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_validate.c - the one validator of every message, used by both directions.
 *
 * The decoder only turns JSON into a struct (types, presence, each integer within its C
 * type and PROTO_INT_MAX); every rule about values - ranges, alignment, order, consistency
 * between fields - lives here, one function per message, and runs on the decoded struct.
 * The encoder runs the same function before it writes, so a side never sends what its peer
 * would reject and the two ends cannot drift apart.  Field paths in errors are the wire
 * names ("ranges[3].start"), so an error reply points the peer at its own JSON.
 */
#include <stdio.h>
#include <string.h>

#include "proto_int.h"

#define HINT_ALIGN_BYTES 4096ULL    /* hint ranges are whole 4 KiB pages (smallest page size) */
#define PID_MAX_LIMIT    (1u << 22) /* Linux PID_MAX_LIMIT on 64-bit */
#define ERRNO_MAX        4095u      /* the kernel's MAX_ERRNO */

static const uint32_t known_caps =
    PROTO_CAP_STATS | PROTO_CAP_PSI | PROTO_CAP_WSS | PROTO_CAP_HINT | PROTO_CAP_RAM_LAYOUT |
    PROTO_CAP_RECLAIM_MEMCG | PROTO_CAP_RECLAIM_MGLRU | PROTO_CAP_RECLAIM_DROP_CACHES |
    PROTO_CAP_RECLAIM_COMPACT | PROTO_CAP_HOST_RECLAIM | PROTO_CAP_HOST_WSS | PROTO_CAP_HOST_HINT;
static const uint32_t known_collectors =
    PROTO_COLLECT_STATS | PROTO_COLLECT_WSS | PROTO_COLLECT_HINT;

static enum proto_status range_u64(struct proto_error *err, const char *field, uint64_t v,
				   uint64_t lo, uint64_t hi)
{
	if (v < lo || v > hi)
		return proto_err_set(err, PROTO_E_RANGE, field, "%s is %llu, must be %llu..%llu",
				     field, (unsigned long long)v, (unsigned long long)lo,
				     (unsigned long long)hi);
	return PROTO_OK;
}

static enum proto_status range_dbl(struct proto_error *err, const char *field, double v, double lo,
				   double hi)
{
	/* written so that NaN fails too */
	if (!(v >= lo && v <= hi))
		return proto_err_set(err, PROTO_E_RANGE, field, "%s is %g, must be %g..%g", field,
				     v, lo, hi);
	return PROTO_OK;
}

/* A NUL-terminated string in a cap-sized array that obeys the wire's text rule. */
static enum proto_status text(struct proto_error *err, const char *field, const char *s, size_t cap,
			      bool nonempty)
{
	size_t n = strnlen(s, cap);

	if (n == cap)
		return proto_err_set(err, PROTO_E_TOO_LONG, field, "%s longer than %zu bytes",
				     field, cap - 1);
	if (nonempty && n == 0)
		return proto_err_set(err, PROTO_E_RANGE, field, "%s is empty", field);
	if (!proto_text_ok(s, n))
		return proto_err_set(err, PROTO_E_BAD_VALUE, field,
				     "%s has a control character or invalid UTF-8", field);
	return PROTO_OK;
}

/* Ranges: bytes > 0, inside the physical address space, ascending and disjoint, and (when
 * align > 1) aligned.  name is the array's wire name. */
static enum proto_status ranges(struct proto_error *err, const char *name,
				const struct proto_range *r, uint32_t n, uint64_t align)
{
	char f[PROTO_FIELD_MAX];
	uint64_t prev_end = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (r[i].start % align) {
			proto_pathf(f, sizeof(f), "%s[%u].start", name, i);
			return proto_err_set(err, PROTO_E_BAD_VALUE, f, "%s not %llu-aligned", f,
					     (unsigned long long)align);
		}
		if (r[i].bytes == 0 || r[i].bytes % align) {
			proto_pathf(f, sizeof(f), "%s[%u].bytes", name, i);
			return proto_err_set(err, r[i].bytes ? PROTO_E_BAD_VALUE : PROTO_E_RANGE, f,
					     "%s must be a non-zero multiple of %llu", f,
					     (unsigned long long)align);
		}
		if (r[i].start > PROTO_PHYS_ADDR_MAX ||
		    r[i].bytes > PROTO_PHYS_ADDR_MAX - r[i].start) {
			proto_pathf(f, sizeof(f), "%s[%u]", name, i);
			return proto_err_set(err, PROTO_E_RANGE, f, "%s ends beyond 2^52", f);
		}
		if (i > 0 && r[i].start < prev_end) {
			proto_pathf(f, sizeof(f), "%s[%u].start", name, i);
			return proto_err_set(err, PROTO_E_BAD_VALUE, f,
					     "%s overlaps or precedes the range before it", f);
		}
		prev_end = r[i].start + r[i].bytes;
	}
	return PROTO_OK;
}

static enum proto_status v_hello(const struct proto_hello *h, struct proto_error *err)
{
	enum proto_status s;

	if (h->role != PROTO_ROLE_AGENT && h->role != PROTO_ROLE_HOST)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "role", "role is not agent or host");
	if ((s = range_u64(err, "version_min", h->version_min, 1, PROTO_VERSION_LIMIT)) ||
	    (s = range_u64(err, "version_max", h->version_max, h->version_min,
			   PROTO_VERSION_LIMIT)) ||
	    (s = text(err, "software", h->software, sizeof(h->software), true)))
		return s;
	if (h->caps & ~known_caps)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "caps", "caps has unknown bits 0x%x",
				     h->caps & ~known_caps);
	if (h->role == PROTO_ROLE_HOST) {
		if (h->kernel[0] || h->page_size_bytes || h->nr_ram)
			return proto_err_set(err, PROTO_E_BAD_VALUE, "role",
					     "a host hello carries no kernel, page size or ram");
		return PROTO_OK;
	}
	if ((s = text(err, "kernel", h->kernel, sizeof(h->kernel), true)))
		return s;
	if (h->page_size_bytes & (h->page_size_bytes - 1))
		return proto_err_set(err, PROTO_E_BAD_VALUE, "page_size_bytes",
				     "page_size_bytes %u is not a power of two",
				     h->page_size_bytes);
	if ((s = range_u64(err, "page_size_bytes", h->page_size_bytes, PROTO_PAGE_SIZE_MIN,
			   PROTO_PAGE_SIZE_MAX)))
		return s;
	if (h->nr_ram > PROTO_MAX_RAM_RANGES)
		return proto_err_set(err, PROTO_E_TOO_LONG, "ram", "more than %d ram ranges",
				     PROTO_MAX_RAM_RANGES);
	/* /proc/iomem ranges need not be page aligned (e.g. 0x1000-0x9fbff) */
	return ranges(err, "ram", h->ram, h->nr_ram, 1);
}

static enum proto_status v_stats(const struct proto_stats *st, struct proto_error *err)
{
	const struct {
		const char *name;
		uint64_t v, max;
	} f[] = {
	    {"mono_ms", st->mono_ms, PROTO_INT_MAX},
	    {"mem_total_bytes", st->mem_total_bytes, PROTO_BYTES_MAX},
	    {"mem_free_bytes", st->mem_free_bytes, st->mem_total_bytes},
	    {"mem_available_bytes", st->mem_available_bytes, PROTO_BYTES_MAX},
	    {"cached_bytes", st->cached_bytes, PROTO_BYTES_MAX},
	    {"anon_bytes", st->anon_bytes, PROTO_BYTES_MAX},
	    {"shmem_bytes", st->shmem_bytes, PROTO_BYTES_MAX},
	    {"swap_total_bytes", st->swap_total_bytes, PROTO_BYTES_MAX},
	    {"swap_free_bytes", st->swap_free_bytes, st->swap_total_bytes},
	    {"refault_anon", st->refault_anon, PROTO_COUNTER_MAX},
	    {"refault_file", st->refault_file, PROTO_COUNTER_MAX},
	    {"pgmajfault", st->pgmajfault, PROTO_COUNTER_MAX},
	    {"pswpin", st->pswpin, PROTO_COUNTER_MAX},
	    {"pswpout", st->pswpout, PROTO_COUNTER_MAX},
	};
	enum proto_status s;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if ((s = range_u64(err, f[i].name, f[i].v, 0, f[i].max)))
			return s;
	if (!st->has_psi)
		return PROTO_OK;
	if ((s = range_dbl(err, "psi.some_avg10", st->psi.some_avg10, 0, PROTO_PSI_AVG_MAX)) ||
	    (s = range_dbl(err, "psi.some_avg60", st->psi.some_avg60, 0, PROTO_PSI_AVG_MAX)) ||
	    (s = range_dbl(err, "psi.full_avg10", st->psi.full_avg10, 0, PROTO_PSI_AVG_MAX)) ||
	    (s = range_dbl(err, "psi.full_avg60", st->psi.full_avg60, 0, PROTO_PSI_AVG_MAX)) ||
	    (s = range_u64(err, "psi.some_total_us", st->psi.some_total_us, 0,
			   PROTO_COUNTER_MAX)) ||
	    (s = range_u64(err, "psi.full_total_us", st->psi.full_total_us, 0, PROTO_COUNTER_MAX)))
		return s;
	return PROTO_OK;
}

/* Bin edges: 1..PROTO_MAX_WSS_BINS, the first 0, strictly ascending. */
static enum proto_status bin_edges(struct proto_error *err, const char *name, uint32_t n,
				   const uint64_t *edge_ms, const char *suffix)
{
	char f[PROTO_FIELD_MAX];
	uint64_t prev = 0;

	if (n == 0 || n > PROTO_MAX_WSS_BINS)
		return proto_err_set(err, n ? PROTO_E_TOO_LONG : PROTO_E_RANGE, name,
				     "%s must have 1..%d entries", name, PROTO_MAX_WSS_BINS);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t e = edge_ms[i];

		proto_pathf(f, sizeof(f), "%s[%u]%s", name, i, suffix);
		if (i == 0 && e != 0)
			return proto_err_set(err, PROTO_E_BAD_VALUE, f, "%s must be 0", f);
		if (i > 0 && e <= prev)
			return proto_err_set(err, PROTO_E_BAD_VALUE, f,
					     "%s must be above the edge before it", f);
		if (e > PROTO_AGE_MAX_MS)
			return proto_err_set(err, PROTO_E_RANGE, f, "%s too large", f);
		prev = e;
	}
	return PROTO_OK;
}

static enum proto_status v_wss(const struct proto_wss *w, struct proto_error *err)
{
	uint64_t edges[PROTO_MAX_WSS_BINS];
	char f[PROTO_FIELD_MAX];
	enum proto_status s;

	if ((s = range_u64(err, "mono_ms", w->mono_ms, 0, PROTO_INT_MAX)))
		return s;
	if (w->nr_gens > PROTO_MAX_GENS)
		return proto_err_set(err, PROTO_E_TOO_LONG, "gens", "more than %d gens",
				     PROTO_MAX_GENS);
	for (uint32_t i = 0; i < w->nr_gens; i++) {
		const struct proto_wss_gen *g = &w->gens[i];

		proto_pathf(f, sizeof(f), "gens[%u].node", i);
		if ((s = range_u64(err, f, g->node, 0, 1023)))
			return s;
		proto_pathf(f, sizeof(f), "gens[%u].seq", i);
		if ((s = range_u64(err, f, g->seq, 0, PROTO_INT_MAX)))
			return s;
		proto_pathf(f, sizeof(f), "gens[%u].age_ms", i);
		if ((s = range_u64(err, f, g->age_ms, i ? w->gens[i - 1].age_ms : 0,
				   PROTO_AGE_MAX_MS)))
			return s;
		proto_pathf(f, sizeof(f), "gens[%u].anon_pages", i);
		if ((s = range_u64(err, f, g->anon_pages, 0, PROTO_PAGES_MAX)))
			return s;
		proto_pathf(f, sizeof(f), "gens[%u].file_pages", i);
		if ((s = range_u64(err, f, g->file_pages, 0, PROTO_PAGES_MAX)))
			return s;
	}
	if (w->nr_bins > PROTO_MAX_WSS_BINS)
		return proto_err_set(err, PROTO_E_TOO_LONG, "bins", "more than %d bins",
				     PROTO_MAX_WSS_BINS);
	for (uint32_t i = 0; i < w->nr_bins; i++)
		edges[i] = w->bins[i].min_age_ms;
	if ((s = bin_edges(err, "bins", w->nr_bins, edges, ".min_age_ms")))
		return s;
	for (uint32_t i = 0; i < w->nr_bins; i++) {
		proto_pathf(f, sizeof(f), "bins[%u].anon_bytes", i);
		if ((s = range_u64(err, f, w->bins[i].anon_bytes, 0, PROTO_BYTES_MAX)))
			return s;
		proto_pathf(f, sizeof(f), "bins[%u].file_bytes", i);
		if ((s = range_u64(err, f, w->bins[i].file_bytes, 0, PROTO_BYTES_MAX)))
			return s;
	}
	return PROTO_OK;
}

static enum proto_status v_hint(const struct proto_hint *h, struct proto_error *err)
{
	enum proto_status s;

	if ((s = range_u64(err, "pid", h->pid, 1, PID_MAX_LIMIT)))
		return s;
	switch (h->kind) {
	case PROTO_HINT_HOT:
	case PROTO_HINT_COLD:
		if (h->nr_ranges == 0 || h->nr_ranges > PROTO_MAX_HINT_RANGES)
			return proto_err_set(err, h->nr_ranges ? PROTO_E_TOO_LONG : PROTO_E_RANGE,
					     "ranges", "a %s hint needs 1..%d ranges",
					     proto_hint_kind_name(h->kind), PROTO_MAX_HINT_RANGES);
		if (h->need_bytes || h->within_ms)
			return proto_err_set(err, PROTO_E_BAD_VALUE, "need_bytes",
					     "only a need hint has need_bytes and within_ms");
		return ranges(err, "ranges", h->ranges, h->nr_ranges, HINT_ALIGN_BYTES);
	case PROTO_HINT_NEED:
		if (h->nr_ranges || h->truncated)
			return proto_err_set(err, PROTO_E_BAD_VALUE, "ranges",
					     "a need hint has no ranges");
		if ((s = range_u64(err, "need_bytes", h->need_bytes, 1, PROTO_BYTES_MAX)) ||
		    (s = range_u64(err, "within_ms", h->within_ms, 0, PROTO_WITHIN_MAX_MS)))
			return s;
		return PROTO_OK;
	}
	return proto_err_set(err, PROTO_E_BAD_VALUE, "kind", "kind is not hot, cold or need");
}

static enum proto_status v_reclaim(const struct proto_reclaim *r, struct proto_error *err)
{
	enum proto_status s;

	if (r->scope != PROTO_SCOPE_FILE && r->scope != PROTO_SCOPE_ANY)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "scope", "scope is not file or any");
	if ((s = range_u64(err, "bytes", r->bytes, 1, PROTO_BYTES_MAX)) ||
	    (s = range_u64(err, "deadline_ms", r->deadline_ms, PROTO_DEADLINE_MIN_MS,
			   PROTO_DEADLINE_MAX_MS)))
		return s;
	return PROTO_OK;
}

static enum proto_status v_reclaim_reply(const struct proto_reclaim_reply *r,
					 struct proto_error *err)
{
	char f[PROTO_FIELD_MAX];
	uint32_t seen = 0;
	enum proto_status s;

	if ((s = range_u64(err, "re", r->re, 1, PROTO_ID_MAX)))
		return s;
	if (r->result < PROTO_RECLAIM_DONE || r->result > PROTO_RECLAIM_FAILED)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "result", "unknown result");
	if ((s = range_u64(err, "requested_bytes", r->requested_bytes, 1, PROTO_BYTES_MAX)) ||
	    (s = range_u64(err, "freed_bytes", r->freed_bytes, 0, PROTO_BYTES_MAX)) ||
	    (s = range_u64(err, "mem_available_bytes", r->mem_available_bytes, 0,
			   PROTO_BYTES_MAX)) ||
	    (s = range_u64(err, "floor_bytes", r->floor_bytes, 0, PROTO_BYTES_MAX)) ||
	    (s = range_u64(err, "elapsed_ms", r->elapsed_ms, 0, PROTO_INTERVAL_MAX_MS)))
		return s;
	if (r->nr_steps > PROTO_MAX_RECLAIM_STEPS)
		return proto_err_set(err, PROTO_E_TOO_LONG, "steps", "more than %d steps",
				     PROTO_MAX_RECLAIM_STEPS);
	for (uint32_t i = 0; i < r->nr_steps; i++) {
		const struct proto_reclaim_step *st = &r->steps[i];

		proto_pathf(f, sizeof(f), "steps[%u].method", i);
		if (st->method < PROTO_METHOD_MEMCG || st->method > PROTO_METHOD_COMPACT)
			return proto_err_set(err, PROTO_E_BAD_VALUE, f, "unknown method");
		if (seen & (1u << st->method))
			return proto_err_set(err, PROTO_E_BAD_VALUE, f, "%s twice",
					     proto_reclaim_method_name(st->method));
		seen |= 1u << st->method;
		proto_pathf(f, sizeof(f), "steps[%u].freed_bytes", i);
		if ((s = range_u64(err, f, st->freed_bytes, 0, PROTO_BYTES_MAX)))
			return s;
		proto_pathf(f, sizeof(f), "steps[%u].elapsed_ms", i);
		if ((s = range_u64(err, f, st->elapsed_ms, 0, PROTO_INTERVAL_MAX_MS)))
			return s;
		proto_pathf(f, sizeof(f), "steps[%u].err", i);
		if (st->err < 0 || (uint32_t)st->err > ERRNO_MAX)
			return proto_err_set(err, PROTO_E_RANGE, f, "%s must be 0..%u", f,
					     ERRNO_MAX);
	}
	return text(err, "message", r->message, sizeof(r->message), false);
}

static enum proto_status v_config(const struct proto_config *c, struct proto_error *err)
{
	enum proto_status s;

	if ((s = range_u64(err, "report_interval_ms", c->report_interval_ms, PROTO_INTERVAL_MIN_MS,
			   PROTO_INTERVAL_MAX_MS)) ||
	    (s = range_u64(err, "wss_interval_ms", c->wss_interval_ms, PROTO_INTERVAL_MIN_MS,
			   PROTO_INTERVAL_MAX_MS)))
		return s;
	if (c->collectors & ~known_collectors)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "collectors",
				     "collectors has unknown bits 0x%x",
				     c->collectors & ~known_collectors);
	return bin_edges(err, "wss_bins_ms", c->nr_wss_bins, c->wss_bins_ms, "");
}

static enum proto_status v_error(const struct proto_error_msg *e, struct proto_error *err)
{
	enum proto_status s;

	if (e->code == PROTO_OK || strcmp(proto_status_name(e->code), "invalid") == 0)
		return proto_err_set(err, PROTO_E_BAD_VALUE, "code", "code is not an error status");
	if ((s = text(err, "field", e->field, sizeof(e->field), false)))
		return s;
	return text(err, "message", e->message, sizeof(e->message), false);
}

enum proto_status proto_validate(const struct proto_msg *m, struct proto_error *err)
{
	enum proto_status s;

	if (m->id == 0)
		return proto_err_set(err, PROTO_E_RANGE, "id", "id must be 1..%u", PROTO_ID_MAX);
	switch (m->type) {
	case PROTO_MSG_HELLO:
		return v_hello(&m->u.hello, err);
	case PROTO_MSG_STATS:
		return v_stats(&m->u.stats, err);
	case PROTO_MSG_WSS:
		return v_wss(&m->u.wss, err);
	case PROTO_MSG_HINT:
		return v_hint(&m->u.hint, err);
	case PROTO_MSG_RECLAIM:
		return v_reclaim(&m->u.reclaim, err);
	case PROTO_MSG_RECLAIM_REPLY:
		return v_reclaim_reply(&m->u.reclaim_reply, err);
	case PROTO_MSG_CONFIG:
		return v_config(&m->u.config, err);
	case PROTO_MSG_CONFIG_REPLY:
		if ((s = range_u64(err, "re", m->u.config_reply.re, 1, PROTO_ID_MAX)))
			return s;
		return v_config(&m->u.config_reply.config, err);
	case PROTO_MSG_PING:
		return range_u64(err, "mono_ms", m->u.ping.mono_ms, 0, PROTO_INT_MAX);
	case PROTO_MSG_PONG:
		if ((s = range_u64(err, "re", m->u.pong.re, 1, PROTO_ID_MAX)))
			return s;
		return range_u64(err, "mono_ms", m->u.pong.mono_ms, 0, PROTO_INT_MAX);
	case PROTO_MSG_ERROR:
		return v_error(&m->u.error, err);
	}
	return proto_err_set(err, PROTO_E_UNKNOWN_TYPE, "type", "message type %d unknown",
			     (int)m->type);
}
