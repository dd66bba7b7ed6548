// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_encode.c - from a typed struct proto_msg to one frame on the wire.
 *
 * Steps: 1. proto_validate() (a side never sends what its peer would reject);
 *        2. build a json-c object, one builder per message, fields in docs/protocol.md order;
 *        3. serialise it plain (no spaces) behind a 4-byte big-endian length.
 * Keys are string literals added with JSON_C_OBJECT_ADD_CONSTANT_KEY (json-c does not copy
 * them) and JSON_C_OBJECT_ADD_KEY_IS_NEW (no lookup for an existing key): every key is
 * added once, by construction.
 *
 * Sizes measured by tests/unit/test_proto_codec.c: ping 44 bytes, a full stats with PSI
 * ~520, hello with 3 RAM ranges ~330, the largest (hint with 256 ranges) ~12 KiB - all far
 * below PROTO_ENCODE_MAX_BYTES.
 */
#include <string.h>

#include <json-c/json.h>

#include "proto_int.h"

/* Builder helpers: each returns false when json-c could not allocate. */
static bool add(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add_ex(
		o, key, v, JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

static bool add_u64(struct json_object *o, const char *key, uint64_t v)
{
	/* validated values are <= PROTO_INT_MAX, so int64 holds them */
	return add(o, key, json_object_new_int64((int64_t)v));
}

static bool add_dbl(struct json_object *o, const char *key, double v)
{
	return add(o, key, json_object_new_double(v));
}

static bool add_bool(struct json_object *o, const char *key, bool v)
{
	return add(o, key, json_object_new_boolean(v));
}

static bool add_str(struct json_object *o, const char *key, const char *v)
{
	return add(o, key, json_object_new_string(v));
}

static bool push(struct json_object *arr, struct json_object *v)
{
	if (!v)
		return false;
	if (json_object_array_add(arr, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

/* Bit set -> array of names, lowest bit first. */
static struct json_object *name_set(uint32_t bits, const char *(*name)(uint32_t))
{
	struct json_object *arr = json_object_new_array();

	for (unsigned b = 0; arr && b < 32; b++) {
		const char *n = (bits & (1u << b)) ? name(1u << b) : NULL;

		if (n && !push(arr, json_object_new_string(n))) {
			json_object_put(arr);
			return NULL;
		}
	}
	return arr;
}

static struct json_object *range_array(const struct proto_range *r, uint32_t n)
{
	struct json_object *arr = json_object_new_array_ext((int)n);

	for (uint32_t i = 0; arr && i < n; i++) {
		struct json_object *e = json_object_new_object();

		if (!e || !add_u64(e, "start", r[i].start) || !add_u64(e, "bytes", r[i].bytes) ||
		    !push(arr, e)) {
			json_object_put(e);
			json_object_put(arr);
			return NULL;
		}
	}
	return arr;
}

static bool e_hello(struct json_object *o, const struct proto_hello *h)
{
	if (!add_str(o, "role", proto_role_name(h->role)) ||
	    !add_u64(o, "version_min", h->version_min) ||
	    !add_u64(o, "version_max", h->version_max) || !add_str(o, "software", h->software) ||
	    !add(o, "caps", name_set(h->caps, proto_cap_name)))
		return false;
	if (h->role == PROTO_ROLE_HOST)
		return true;
	return add_str(o, "kernel", h->kernel) &&
	       add_u64(o, "page_size_bytes", h->page_size_bytes) &&
	       add(o, "ram", range_array(h->ram, h->nr_ram));
}

static bool e_stats(struct json_object *o, const struct proto_stats *st)
{
	struct json_object *p;

	if (!add_u64(o, "mono_ms", st->mono_ms) ||
	    !add_u64(o, "mem_total_bytes", st->mem_total_bytes) ||
	    !add_u64(o, "mem_free_bytes", st->mem_free_bytes) ||
	    !add_u64(o, "mem_available_bytes", st->mem_available_bytes) ||
	    !add_u64(o, "cached_bytes", st->cached_bytes) ||
	    !add_u64(o, "anon_bytes", st->anon_bytes) ||
	    !add_u64(o, "shmem_bytes", st->shmem_bytes) ||
	    !add_u64(o, "swap_total_bytes", st->swap_total_bytes) ||
	    !add_u64(o, "swap_free_bytes", st->swap_free_bytes) ||
	    !add_u64(o, "refault_anon", st->refault_anon) ||
	    !add_u64(o, "refault_file", st->refault_file) ||
	    !add_u64(o, "pgmajfault", st->pgmajfault) || !add_u64(o, "pswpin", st->pswpin) ||
	    !add_u64(o, "pswpout", st->pswpout))
		return false;
	if (!st->has_psi)
		return true;
	p = json_object_new_object();
	if (!p || !add_dbl(p, "some_avg10", st->psi.some_avg10) ||
	    !add_dbl(p, "some_avg60", st->psi.some_avg60) ||
	    !add_u64(p, "some_total_us", st->psi.some_total_us) ||
	    !add_dbl(p, "full_avg10", st->psi.full_avg10) ||
	    !add_dbl(p, "full_avg60", st->psi.full_avg60) ||
	    !add_u64(p, "full_total_us", st->psi.full_total_us)) {
		json_object_put(p);
		return false;
	}
	return add(o, "psi", p);
}

static bool e_wss(struct json_object *o, const struct proto_wss *w)
{
	struct json_object *gens, *bins;

	if (!add_u64(o, "mono_ms", w->mono_ms) || !add_bool(o, "gens_complete", w->gens_complete))
		return false;
	gens = json_object_new_array_ext((int)w->nr_gens);
	if (!add(o, "gens", gens))
		return false;
	for (uint32_t i = 0; i < w->nr_gens; i++) {
		const struct proto_wss_gen *g = &w->gens[i];
		struct json_object *e = json_object_new_object();

		if (!e || !add_u64(e, "memcg_id", g->memcg_id) || !add_u64(e, "node", g->node) ||
		    !add_u64(e, "seq", g->seq) || !add_u64(e, "age_ms", g->age_ms) ||
		    !add_u64(e, "anon_pages", g->anon_pages) ||
		    !add_u64(e, "file_pages", g->file_pages) || !push(gens, e)) {
			json_object_put(e);
			return false;
		}
	}
	bins = json_object_new_array_ext((int)w->nr_bins);
	if (!add(o, "bins", bins))
		return false;
	for (uint32_t i = 0; i < w->nr_bins; i++) {
		const struct proto_wss_bin *b = &w->bins[i];
		struct json_object *e = json_object_new_object();

		if (!e || !add_u64(e, "min_age_ms", b->min_age_ms) ||
		    !add_u64(e, "anon_bytes", b->anon_bytes) ||
		    !add_u64(e, "file_bytes", b->file_bytes) || !push(bins, e)) {
			json_object_put(e);
			return false;
		}
	}
	return true;
}

static bool e_hint(struct json_object *o, const struct proto_hint *h)
{
	if (!add_str(o, "kind", proto_hint_kind_name(h->kind)) || !add_u64(o, "pid", h->pid))
		return false;
	if (h->kind == PROTO_HINT_NEED)
		return add_u64(o, "need_bytes", h->need_bytes) &&
		       add_u64(o, "within_ms", h->within_ms);
	return add_bool(o, "truncated", h->truncated) &&
	       add(o, "ranges", range_array(h->ranges, h->nr_ranges));
}

static bool e_reclaim(struct json_object *o, const struct proto_reclaim *r)
{
	return add_u64(o, "bytes", r->bytes) &&
	       add_str(o, "scope", proto_reclaim_scope_name(r->scope)) &&
	       add_u64(o, "deadline_ms", r->deadline_ms) && add_bool(o, "compact", r->compact);
}

static bool e_reclaim_reply(struct json_object *o, const struct proto_reclaim_reply *r)
{
	struct json_object *steps;

	if (!add_u64(o, "re", r->re) ||
	    !add_str(o, "result", proto_reclaim_result_name(r->result)) ||
	    !add_u64(o, "requested_bytes", r->requested_bytes) ||
	    !add_u64(o, "freed_bytes", r->freed_bytes) ||
	    !add_u64(o, "mem_available_bytes", r->mem_available_bytes) ||
	    !add_u64(o, "floor_bytes", r->floor_bytes) || !add_u64(o, "elapsed_ms", r->elapsed_ms))
		return false;
	steps = json_object_new_array();
	if (!add(o, "steps", steps))
		return false;
	for (uint32_t i = 0; i < r->nr_steps; i++) {
		const struct proto_reclaim_step *st = &r->steps[i];
		struct json_object *e = json_object_new_object();

		if (!e || !add_str(e, "method", proto_reclaim_method_name(st->method)) ||
		    !add_u64(e, "freed_bytes", st->freed_bytes) ||
		    !add_u64(e, "elapsed_ms", st->elapsed_ms) ||
		    !add_u64(e, "err", (uint64_t)st->err) || !push(steps, e)) {
			json_object_put(e);
			return false;
		}
	}
	return add_str(o, "message", r->message);
}

static bool e_config(struct json_object *o, const struct proto_config *c)
{
	struct json_object *edges;

	if (!add_u64(o, "report_interval_ms", c->report_interval_ms) ||
	    !add_u64(o, "wss_interval_ms", c->wss_interval_ms) ||
	    !add(o, "collectors", name_set(c->collectors, proto_collector_name)))
		return false;
	edges = json_object_new_array();
	if (!add(o, "wss_bins_ms", edges))
		return false;
	for (uint32_t i = 0; i < c->nr_wss_bins; i++)
		if (!push(edges, json_object_new_int64((int64_t)c->wss_bins_ms[i])))
			return false;
	return true;
}

static bool e_error(struct json_object *o, const struct proto_error_msg *e)
{
	return add_u64(o, "re", e->re) && add_str(o, "code", proto_status_name(e->code)) &&
	       add_bool(o, "fatal", e->fatal) && add_str(o, "field", e->field) &&
	       add_str(o, "message", e->message);
}

static bool build(struct json_object *o, const struct proto_msg *m)
{
	if (!add_str(o, "type", proto_msg_type_name(m->type)) || !add_u64(o, "id", m->id))
		return false;
	switch (m->type) {
	case PROTO_MSG_HELLO:
		return e_hello(o, &m->u.hello);
	case PROTO_MSG_STATS:
		return e_stats(o, &m->u.stats);
	case PROTO_MSG_WSS:
		return e_wss(o, &m->u.wss);
	case PROTO_MSG_HINT:
		return e_hint(o, &m->u.hint);
	case PROTO_MSG_RECLAIM:
		return e_reclaim(o, &m->u.reclaim);
	case PROTO_MSG_RECLAIM_REPLY:
		return e_reclaim_reply(o, &m->u.reclaim_reply);
	case PROTO_MSG_CONFIG:
		return e_config(o, &m->u.config);
	case PROTO_MSG_CONFIG_REPLY:
		return add_u64(o, "re", m->u.config_reply.re) &&
		       e_config(o, &m->u.config_reply.config);
	case PROTO_MSG_PING:
		return add_u64(o, "mono_ms", m->u.ping.mono_ms);
	case PROTO_MSG_PONG:
		return add_u64(o, "re", m->u.pong.re) && add_u64(o, "mono_ms", m->u.pong.mono_ms);
	case PROTO_MSG_ERROR:
		return e_error(o, &m->u.error);
	}
	return false;
}

enum proto_status proto_encode(const struct proto_msg *m, void *buf, size_t cap, size_t *frame_len,
			       struct proto_error *err)
{
	struct json_object *o;
	enum proto_status s;
	const char *txt;
	uint8_t *out = buf;
	size_t n = 0;

	/* Step 1 */
	if ((s = proto_validate(m, err)))
		return s;
	/* Step 2 */
	o = json_object_new_object();
	if (!o || !build(o, m)) {
		s = proto_err_set(err, PROTO_E_NOMEM, "", "out of memory building %s",
				  proto_msg_type_name(m->type));
		goto out;
	}
	/* Step 3 */
	txt = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	if (!txt) {
		s = proto_err_set(err, PROTO_E_NOMEM, "", "out of memory serialising");
		goto out;
	}
	if (n > PROTO_FRAME_MAX_BYTES || cap < PROTO_FRAME_HDR_BYTES + n) {
		s = proto_err_set(err, PROTO_E_NOSPC, "", "%s needs %zu bytes, buffer has %zu",
				  proto_msg_type_name(m->type), PROTO_FRAME_HDR_BYTES + n, cap);
		goto out;
	}
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	memcpy(out + PROTO_FRAME_HDR_BYTES, txt, n);
	*frame_len = PROTO_FRAME_HDR_BYTES + n;
	s = PROTO_OK;
out:
	json_object_put(o);
	return s;
}

/* Copy a string that may quote peer bytes (an unknown key) or end in a multi-byte sequence
 * cut by truncation: anything but printable ASCII becomes '?', so the reply always encodes. */
static void ascii_copy(char *dst, const char *src, size_t cap)
{
	size_t i;

	for (i = 0; i + 1 < cap && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	dst[i] = '\0';
}

void proto_error_to_msg(const struct proto_error *err, uint32_t id, bool fatal, struct proto_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = PROTO_MSG_ERROR;
	m->id = id;
	m->u.error.re = err->re;
	m->u.error.code = err->code == PROTO_OK ? PROTO_E_INTERNAL : err->code;
	m->u.error.fatal = fatal || proto_status_is_fatal(err->code);
	ascii_copy(m->u.error.field, err->field, sizeof(m->u.error.field));
	ascii_copy(m->u.error.message, err->message, sizeof(m->u.error.message));
}
