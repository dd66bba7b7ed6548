// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_decode.c - from a trusted json-c tree to a typed struct proto_msg.
 *
 * proto_json_parse() has already checked the structure (one object, depth, UTF-8, no
 * duplicate keys).  Here each message has one decoder that:
 *   1. rejects any key outside its list (unknown field, named);
 *   2. reads each field with a typed getter that checks presence (missing field), JSON type
 *      (wrong type: an integer field takes only a JSON integer, so 1.5 and 1e3 are wrong
 *      types), and the bounds of the C type it lands in, capped at PROTO_INT_MAX (range);
 *   3. leaves every value rule to proto_validate(), which proto_decode() runs last.
 * The message's id is read before anything else, so an error reply can name it (err->re).
 *
 * Getter arguments: the object, a path prefix ("" at top level, "ranges[2]" inside an
 * array) and the key; errors carry prefix.key.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "proto_json.h"

/* A decoding position: the object being read and its path. */
struct dec {
	struct json_object *obj;
	const char *prefix;
	struct proto_error *err;
};

static void path(const struct dec *d, const char *key, char *buf, size_t cap)
{
	proto_pathf(buf, cap, "%s%s%s", d->prefix, *d->prefix ? "." : "", key);
}

/* Step 1: every key of d->obj must be in keys[]. */
static enum proto_status only_keys(const struct dec *d, const char *const *keys, size_t n)
{
	char f[PROTO_FIELD_MAX];

	json_object_object_foreach(d->obj, key, val)
	{
		bool known = false;

		(void)val;
		for (size_t i = 0; i < n && !known; i++)
			known = strcmp(key, keys[i]) == 0;
		if (!known) {
			path(d, key, f, sizeof(f));
			return proto_err_set(d->err, PROTO_E_UNKNOWN_FIELD, f, "unknown field '%s'",
					     f);
		}
	}
	return PROTO_OK;
}

static bool has(const struct dec *d, const char *key)
{
	return json_object_object_get_ex(d->obj, key, NULL);
}

/* The value of a required key with the given JSON type (double also takes an integer). */
static enum proto_status get(const struct dec *d, const char *key, enum json_type want,
			     struct json_object **out)
{
	char f[PROTO_FIELD_MAX];
	struct json_object *v;
	enum json_type t;

	path(d, key, f, sizeof(f));
	if (!json_object_object_get_ex(d->obj, key, &v))
		return proto_err_set(d->err, PROTO_E_MISSING_FIELD, f, "missing field '%s'", f);
	t = json_object_get_type(v);
	if (t != want && !(want == json_type_double && t == json_type_int))
		return proto_err_set(d->err, PROTO_E_WRONG_TYPE, f, "'%s' must be a %s, not %s", f,
				     want == json_type_int ? "integer" : json_type_to_name(want),
				     json_type_to_name(t));
	*out = v;
	return PROTO_OK;
}

/* Integer in 0..max (max <= PROTO_INT_MAX). */
static enum proto_status get_u64(const struct dec *d, const char *key, uint64_t max, uint64_t *out)
{
	char f[PROTO_FIELD_MAX];
	struct json_object *v;
	enum proto_status s;
	int64_t i;

	if ((s = get(d, key, json_type_int, &v)))
		return s;
	/* json-c saturates values beyond int64 at INT64_MAX (or keeps them as uint64):
	 * either way they are above PROTO_INT_MAX here */
	i = json_object_get_int64(v);
	if (i < 0 || (uint64_t)i > max) {
		path(d, key, f, sizeof(f));
		return proto_err_set(d->err, PROTO_E_RANGE, f, "'%s' must be 0..%llu", f,
				     (unsigned long long)max);
	}
	*out = (uint64_t)i;
	return PROTO_OK;
}

static enum proto_status get_u32(const struct dec *d, const char *key, uint32_t *out)
{
	uint64_t v;
	enum proto_status s = get_u64(d, key, UINT32_MAX, &v);

	if (!s)
		*out = (uint32_t)v;
	return s;
}

static enum proto_status get_int(const struct dec *d, const char *key, uint64_t *out)
{
	return get_u64(d, key, PROTO_INT_MAX, out);
}

static enum proto_status get_dbl(const struct dec *d, const char *key, double *out)
{
	char f[PROTO_FIELD_MAX];
	struct json_object *v;
	enum proto_status s;
	double x;

	if ((s = get(d, key, json_type_double, &v)))
		return s;
	x = json_object_get_double(v);
	if (!isfinite(x)) {
		path(d, key, f, sizeof(f));
		return proto_err_set(d->err, PROTO_E_RANGE, f, "'%s' is not a finite number", f);
	}
	*out = x;
	return PROTO_OK;
}

static enum proto_status get_bool(const struct dec *d, const char *key, bool *out)
{
	struct json_object *v;
	enum proto_status s;

	if ((s = get(d, key, json_type_boolean, &v)))
		return s;
	*out = json_object_get_boolean(v);
	return PROTO_OK;
}

/* String into buf[cap] (NUL-terminated); the text rule is checked here because an
 * embedded \u0000 would be invisible once copied. */
static enum proto_status get_str(const struct dec *d, const char *key, char *buf, size_t cap)
{
	char f[PROTO_FIELD_MAX];
	struct json_object *v;
	enum proto_status s;
	const char *str;
	size_t n;

	if ((s = get(d, key, json_type_string, &v)))
		return s;
	str = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	path(d, key, f, sizeof(f));
	if (n >= cap)
		return proto_err_set(d->err, PROTO_E_TOO_LONG, f, "'%s' longer than %zu bytes", f,
				     cap - 1);
	if (!proto_text_ok(str, n))
		return proto_err_set(d->err, PROTO_E_BAD_VALUE, f,
				     "'%s' has a control character or invalid UTF-8", f);
	memcpy(buf, str, n);
	buf[n] = '\0';
	return PROTO_OK;
}

/* One of the small enums, by name. */
static enum proto_status get_enum(const struct dec *d, const char *key, enum proto_enum_kind kind,
				  unsigned *out)
{
	char name[32], f[PROTO_FIELD_MAX];
	enum proto_status s;

	if ((s = get_str(d, key, name, sizeof(name)))) {
		if (s == PROTO_E_TOO_LONG)
			goto bad;
		return s;
	}
	if (proto_enum_from_name(kind, name, out))
		return PROTO_OK;
bad:
	path(d, key, f, sizeof(f));
	return proto_err_set(d->err, PROTO_E_BAD_VALUE, f, "'%s' has an unknown value", f);
}

/* Array of at most max elements. */
static enum proto_status get_array(const struct dec *d, const char *key, size_t max,
				   struct json_object **arr, uint32_t *n)
{
	char f[PROTO_FIELD_MAX];
	enum proto_status s;
	size_t len;

	if ((s = get(d, key, json_type_array, arr)))
		return s;
	len = json_object_array_length(*arr);
	if (len > max) {
		path(d, key, f, sizeof(f));
		return proto_err_set(d->err, PROTO_E_TOO_LONG, f, "'%s' has %zu entries, max %zu",
				     f, len, max);
	}
	*n = (uint32_t)len;
	return PROTO_OK;
}

/* Element i of an array must be an object: a decoding position for it. */
static enum proto_status elem_obj(const struct dec *d, const char *key, struct json_object *arr,
				  uint32_t i, char *prefix, size_t cap, struct dec *out)
{
	struct json_object *e = json_object_array_get_idx(arr, i);
	char base[PROTO_FIELD_MAX];

	path(d, key, base, sizeof(base));
	proto_pathf(prefix, cap, "%s[%u]", base, i);
	if (!json_object_is_type(e, json_type_object))
		return proto_err_set(d->err, PROTO_E_WRONG_TYPE, prefix, "'%s' must be an object",
				     prefix);
	out->obj = e;
	out->prefix = prefix;
	out->err = d->err;
	return PROTO_OK;
}

/* Array of names -> bit set.  Unknown names: ignored when lenient (capabilities), else an
 * error.  max is the array bound. */
static enum proto_status get_name_set(const struct dec *d, const char *key, size_t max,
				      uint32_t (*lookup)(const char *), bool lenient, uint32_t *out)
{
	char f[PROTO_FIELD_MAX];
	struct json_object *arr;
	enum proto_status s;
	uint32_t n;

	if ((s = get_array(d, key, max, &arr, &n)))
		return s;
	*out = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);
		const char *name;
		uint32_t bit;

		proto_pathf(f, sizeof(f), "%s[%u]", key, i);
		if (!json_object_is_type(e, json_type_string))
			return proto_err_set(d->err, PROTO_E_WRONG_TYPE, f, "'%s' must be a string",
					     f);
		name = json_object_get_string(e);
		if (json_object_get_string_len(e) > 32 ||
		    strlen(name) != (size_t)json_object_get_string_len(e))
			return proto_err_set(d->err, PROTO_E_TOO_LONG, f, "'%s' is not a name", f);
		bit = lookup(name);
		if (!bit && !lenient)
			return proto_err_set(d->err, PROTO_E_BAD_VALUE, f, "unknown name in '%s'",
					     f);
		*out |= bit;
	}
	return PROTO_OK;
}

static enum proto_status get_ranges(const struct dec *d, const char *key, size_t max,
				    struct proto_range *r, uint32_t *n)
{
	static const char *const keys[] = {"start", "bytes"};
	char pre[PROTO_FIELD_MAX];
	struct json_object *arr;
	enum proto_status s;
	struct dec e;

	if ((s = get_array(d, key, max, &arr, n)))
		return s;
	for (uint32_t i = 0; i < *n; i++) {
		if ((s = elem_obj(d, key, arr, i, pre, sizeof(pre), &e)) ||
		    (s = only_keys(&e, keys, 2)) || (s = get_int(&e, "start", &r[i].start)) ||
		    (s = get_int(&e, "bytes", &r[i].bytes)))
			return s;
	}
	return PROTO_OK;
}

#define KEYS(...)     static const char *const keys[] = {"type", "id", __VA_ARGS__}
#define CHECK_KEYS(d) only_keys(d, keys, sizeof(keys) / sizeof(keys[0]))

static enum proto_status d_hello(const struct dec *d, struct proto_hello *h)
{
	KEYS("role", "version_min", "version_max", "software", "caps", "kernel", "page_size_bytes",
	     "ram");
	static const char *const host_keys[] = {"type",        "id",       "role", "version_min",
						"version_max", "software", "caps"};
	enum proto_status s;
	unsigned role;

	if ((s = CHECK_KEYS(d)) || (s = get_enum(d, "role", PROTO_ENUM_ROLE, &role)))
		return s;
	h->role = (enum proto_role)role;
	/* a host has no guest facts: those keys are unknown in its hello */
	if (h->role == PROTO_ROLE_HOST && (s = only_keys(d, host_keys, 7)))
		return s;
	if ((s = get_u32(d, "version_min", &h->version_min)) ||
	    (s = get_u32(d, "version_max", &h->version_max)) ||
	    (s = get_str(d, "software", h->software, sizeof(h->software))) ||
	    (s = get_name_set(d, "caps", PROTO_MAX_CAPS, proto_cap_from_name, true, &h->caps)))
		return s;
	if (h->role == PROTO_ROLE_HOST)
		return PROTO_OK;
	if ((s = get_str(d, "kernel", h->kernel, sizeof(h->kernel))) ||
	    (s = get_u32(d, "page_size_bytes", &h->page_size_bytes)) ||
	    (s = get_ranges(d, "ram", PROTO_MAX_RAM_RANGES, h->ram, &h->nr_ram)))
		return s;
	return PROTO_OK;
}

static enum proto_status d_stats(const struct dec *d, struct proto_stats *st)
{
	KEYS("mono_ms", "mem_total_bytes", "mem_free_bytes", "mem_available_bytes", "cached_bytes",
	     "anon_bytes", "shmem_bytes", "swap_total_bytes", "swap_free_bytes", "refault_anon",
	     "refault_file", "pgmajfault", "pswpin", "pswpout", "psi");
	static const char *const psi_keys[] = {"some_avg10", "some_avg60", "some_total_us",
					       "full_avg10", "full_avg60", "full_total_us"};
	struct json_object *po;
	enum proto_status s;
	struct dec p;

	if ((s = CHECK_KEYS(d)) || (s = get_int(d, "mono_ms", &st->mono_ms)) ||
	    (s = get_int(d, "mem_total_bytes", &st->mem_total_bytes)) ||
	    (s = get_int(d, "mem_free_bytes", &st->mem_free_bytes)) ||
	    (s = get_int(d, "mem_available_bytes", &st->mem_available_bytes)) ||
	    (s = get_int(d, "cached_bytes", &st->cached_bytes)) ||
	    (s = get_int(d, "anon_bytes", &st->anon_bytes)) ||
	    (s = get_int(d, "shmem_bytes", &st->shmem_bytes)) ||
	    (s = get_int(d, "swap_total_bytes", &st->swap_total_bytes)) ||
	    (s = get_int(d, "swap_free_bytes", &st->swap_free_bytes)) ||
	    (s = get_int(d, "refault_anon", &st->refault_anon)) ||
	    (s = get_int(d, "refault_file", &st->refault_file)) ||
	    (s = get_int(d, "pgmajfault", &st->pgmajfault)) ||
	    (s = get_int(d, "pswpin", &st->pswpin)) || (s = get_int(d, "pswpout", &st->pswpout)))
		return s;
	st->has_psi = has(d, "psi");
	if (!st->has_psi)
		return PROTO_OK;
	if ((s = get(d, "psi", json_type_object, &po)))
		return s;
	p = (struct dec){.obj = po, .prefix = "psi", .err = d->err};
	if ((s = only_keys(&p, psi_keys, 6)) ||
	    (s = get_dbl(&p, "some_avg10", &st->psi.some_avg10)) ||
	    (s = get_dbl(&p, "some_avg60", &st->psi.some_avg60)) ||
	    (s = get_int(&p, "some_total_us", &st->psi.some_total_us)) ||
	    (s = get_dbl(&p, "full_avg10", &st->psi.full_avg10)) ||
	    (s = get_dbl(&p, "full_avg60", &st->psi.full_avg60)) ||
	    (s = get_int(&p, "full_total_us", &st->psi.full_total_us)))
		return s;
	return PROTO_OK;
}

static enum proto_status d_wss(const struct dec *d, struct proto_wss *w)
{
	KEYS("mono_ms", "gens_complete", "gens", "bins");
	static const char *const gen_keys[] = {"memcg_id", "node",       "seq",
					       "age_ms",   "anon_pages", "file_pages"};
	static const char *const bin_keys[] = {"min_age_ms", "anon_bytes", "file_bytes"};
	char pre[PROTO_FIELD_MAX];
	struct json_object *arr;
	enum proto_status s;
	struct dec e;

	if ((s = CHECK_KEYS(d)) || (s = get_int(d, "mono_ms", &w->mono_ms)) ||
	    (s = get_bool(d, "gens_complete", &w->gens_complete)) ||
	    (s = get_array(d, "gens", PROTO_MAX_GENS, &arr, &w->nr_gens)))
		return s;
	for (uint32_t i = 0; i < w->nr_gens; i++) {
		struct proto_wss_gen *g = &w->gens[i];

		if ((s = elem_obj(d, "gens", arr, i, pre, sizeof(pre), &e)) ||
		    (s = only_keys(&e, gen_keys, 6)) ||
		    (s = get_u32(&e, "memcg_id", &g->memcg_id)) ||
		    (s = get_u32(&e, "node", &g->node)) || (s = get_int(&e, "seq", &g->seq)) ||
		    (s = get_int(&e, "age_ms", &g->age_ms)) ||
		    (s = get_int(&e, "anon_pages", &g->anon_pages)) ||
		    (s = get_int(&e, "file_pages", &g->file_pages)))
			return s;
	}
	if ((s = get_array(d, "bins", PROTO_MAX_WSS_BINS, &arr, &w->nr_bins)))
		return s;
	for (uint32_t i = 0; i < w->nr_bins; i++) {
		struct proto_wss_bin *b = &w->bins[i];

		if ((s = elem_obj(d, "bins", arr, i, pre, sizeof(pre), &e)) ||
		    (s = only_keys(&e, bin_keys, 3)) ||
		    (s = get_int(&e, "min_age_ms", &b->min_age_ms)) ||
		    (s = get_int(&e, "anon_bytes", &b->anon_bytes)) ||
		    (s = get_int(&e, "file_bytes", &b->file_bytes)))
			return s;
	}
	return PROTO_OK;
}

static enum proto_status d_hint(const struct dec *d, struct proto_hint *h)
{
	KEYS("kind", "pid", "truncated", "ranges", "need_bytes", "within_ms");
	static const char *const range_keys[] = {"type", "id",        "kind",
						 "pid",  "truncated", "ranges"};
	static const char *const need_keys[] = {"type", "id",         "kind",
						"pid",  "need_bytes", "within_ms"};
	enum proto_status s;
	unsigned kind;

	if ((s = CHECK_KEYS(d)) || (s = get_enum(d, "kind", PROTO_ENUM_HINT_KIND, &kind)) ||
	    (s = get_u32(d, "pid", &h->pid)))
		return s;
	h->kind = (enum proto_hint_kind)kind;
	if (h->kind == PROTO_HINT_NEED) {
		if ((s = only_keys(d, need_keys, 6)) ||
		    (s = get_int(d, "need_bytes", &h->need_bytes)) ||
		    (s = get_int(d, "within_ms", &h->within_ms)))
			return s;
		return PROTO_OK;
	}
	if ((s = only_keys(d, range_keys, 6)) || (s = get_bool(d, "truncated", &h->truncated)) ||
	    (s = get_ranges(d, "ranges", PROTO_MAX_HINT_RANGES, h->ranges, &h->nr_ranges)))
		return s;
	return PROTO_OK;
}

static enum proto_status d_reclaim(const struct dec *d, struct proto_reclaim *r)
{
	KEYS("bytes", "scope", "deadline_ms", "compact");
	enum proto_status s;
	unsigned scope;

	if ((s = CHECK_KEYS(d)) || (s = get_int(d, "bytes", &r->bytes)) ||
	    (s = get_enum(d, "scope", PROTO_ENUM_SCOPE, &scope)) ||
	    (s = get_u32(d, "deadline_ms", &r->deadline_ms)) ||
	    (s = get_bool(d, "compact", &r->compact)))
		return s;
	r->scope = (enum proto_reclaim_scope)scope;
	return PROTO_OK;
}

static enum proto_status d_reclaim_reply(const struct dec *d, struct proto_reclaim_reply *r)
{
	KEYS("re", "result", "requested_bytes", "freed_bytes", "mem_available_bytes", "floor_bytes",
	     "elapsed_ms", "steps", "message");
	static const char *const step_keys[] = {"method", "freed_bytes", "elapsed_ms", "err"};
	char pre[PROTO_FIELD_MAX];
	struct json_object *arr;
	enum proto_status s;
	unsigned u;
	struct dec e;

	if ((s = CHECK_KEYS(d)) || (s = get_u32(d, "re", &r->re)) ||
	    (s = get_enum(d, "result", PROTO_ENUM_RESULT, &u)))
		return s;
	r->result = (enum proto_reclaim_result)u;
	if ((s = get_int(d, "requested_bytes", &r->requested_bytes)) ||
	    (s = get_int(d, "freed_bytes", &r->freed_bytes)) ||
	    (s = get_int(d, "mem_available_bytes", &r->mem_available_bytes)) ||
	    (s = get_int(d, "floor_bytes", &r->floor_bytes)) ||
	    (s = get_u32(d, "elapsed_ms", &r->elapsed_ms)) ||
	    (s = get_str(d, "message", r->message, sizeof(r->message))) ||
	    (s = get_array(d, "steps", PROTO_MAX_RECLAIM_STEPS, &arr, &r->nr_steps)))
		return s;
	for (uint32_t i = 0; i < r->nr_steps; i++) {
		struct proto_reclaim_step *st = &r->steps[i];
		uint32_t e32;

		if ((s = elem_obj(d, "steps", arr, i, pre, sizeof(pre), &e)) ||
		    (s = only_keys(&e, step_keys, 4)) ||
		    (s = get_enum(&e, "method", PROTO_ENUM_METHOD, &u)) ||
		    (s = get_int(&e, "freed_bytes", &st->freed_bytes)) ||
		    (s = get_u32(&e, "elapsed_ms", &st->elapsed_ms)) ||
		    (s = get_u32(&e, "err", &e32)))
			return s;
		st->method = (enum proto_reclaim_method)u;
		/* values above INT32_MAX become negative and fail validation's 0..4095 */
		st->err = e32 > INT32_MAX ? -1 : (int32_t)e32;
	}
	return PROTO_OK;
}

static enum proto_status d_config_fields(const struct dec *d, struct proto_config *c)
{
	struct json_object *arr;
	enum proto_status s;

	if ((s = get_u32(d, "report_interval_ms", &c->report_interval_ms)) ||
	    (s = get_u32(d, "wss_interval_ms", &c->wss_interval_ms)) ||
	    (s = get_name_set(d, "collectors", PROTO_MAX_COLLECTORS, proto_collector_from_name,
			      false, &c->collectors)) ||
	    (s = get_array(d, "wss_bins_ms", PROTO_MAX_WSS_BINS, &arr, &c->nr_wss_bins)))
		return s;
	for (uint32_t i = 0; i < c->nr_wss_bins; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);
		char f[PROTO_FIELD_MAX];
		int64_t v;

		proto_pathf(f, sizeof(f), "wss_bins_ms[%u]", i);
		if (!json_object_is_type(e, json_type_int))
			return proto_err_set(d->err, PROTO_E_WRONG_TYPE, f,
					     "'%s' must be an integer", f);
		v = json_object_get_int64(e);
		if (v < 0 || (uint64_t)v > PROTO_INT_MAX)
			return proto_err_set(d->err, PROTO_E_RANGE, f, "'%s' must be 0..%llu", f,
					     (unsigned long long)PROTO_INT_MAX);
		c->wss_bins_ms[i] = (uint64_t)v;
	}
	return PROTO_OK;
}

static enum proto_status d_config(const struct dec *d, struct proto_config *c)
{
	KEYS("report_interval_ms", "wss_interval_ms", "collectors", "wss_bins_ms");
	enum proto_status s;

	if ((s = CHECK_KEYS(d)))
		return s;
	return d_config_fields(d, c);
}

static enum proto_status d_config_reply(const struct dec *d, struct proto_config_reply *c)
{
	KEYS("re", "report_interval_ms", "wss_interval_ms", "collectors", "wss_bins_ms");
	enum proto_status s;

	if ((s = CHECK_KEYS(d)) || (s = get_u32(d, "re", &c->re)))
		return s;
	return d_config_fields(d, &c->config);
}

static enum proto_status d_ping(const struct dec *d, struct proto_ping *p)
{
	KEYS("mono_ms");
	enum proto_status s;

	if ((s = CHECK_KEYS(d)))
		return s;
	return get_int(d, "mono_ms", &p->mono_ms);
}

static enum proto_status d_pong(const struct dec *d, struct proto_pong *p)
{
	KEYS("re", "mono_ms");
	enum proto_status s;

	if ((s = CHECK_KEYS(d)) || (s = get_u32(d, "re", &p->re)))
		return s;
	return get_int(d, "mono_ms", &p->mono_ms);
}

static enum proto_status d_error(const struct dec *d, struct proto_error_msg *e)
{
	KEYS("re", "code", "fatal", "field", "message");
	char code[32];
	enum proto_status s;

	if ((s = CHECK_KEYS(d)) || (s = get_u32(d, "re", &e->re)) ||
	    (s = get_str(d, "code", code, sizeof(code))) || (s = get_bool(d, "fatal", &e->fatal)) ||
	    (s = get_str(d, "field", e->field, sizeof(e->field))) ||
	    (s = get_str(d, "message", e->message, sizeof(e->message))))
		return s;
	if (!proto_status_from_name(code, &e->code))
		return proto_err_set(d->err, PROTO_E_BAD_VALUE, "code", "unknown error code");
	return PROTO_OK;
}

static enum proto_status decode_body(const struct dec *d, struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_MSG_HELLO:
		return d_hello(d, &m->u.hello);
	case PROTO_MSG_STATS:
		return d_stats(d, &m->u.stats);
	case PROTO_MSG_WSS:
		return d_wss(d, &m->u.wss);
	case PROTO_MSG_HINT:
		return d_hint(d, &m->u.hint);
	case PROTO_MSG_RECLAIM:
		return d_reclaim(d, &m->u.reclaim);
	case PROTO_MSG_RECLAIM_REPLY:
		return d_reclaim_reply(d, &m->u.reclaim_reply);
	case PROTO_MSG_CONFIG:
		return d_config(d, &m->u.config);
	case PROTO_MSG_CONFIG_REPLY:
		return d_config_reply(d, &m->u.config_reply);
	case PROTO_MSG_PING:
		return d_ping(d, &m->u.ping);
	case PROTO_MSG_PONG:
		return d_pong(d, &m->u.pong);
	case PROTO_MSG_ERROR:
		return d_error(d, &m->u.error);
	}
	return proto_err_set(d->err, PROTO_E_INTERNAL, "type", "no decoder for type %d",
			     (int)m->type);
}

enum proto_status proto_decode(const void *json, size_t len, struct proto_msg *out,
			       struct proto_error *err)
{
	struct json_object *root = NULL, *tv;
	struct proto_error local;
	enum proto_status s;
	struct dec d;

	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	memset(out, 0, sizeof(*out));
	if ((s = proto_json_parse(json, len, &root, err)))
		return s;
	d = (struct dec){.obj = root, .prefix = "", .err = err};
	/* id first, so that every later error can name the message it answers */
	if ((s = get_u32(&d, "id", &out->id)))
		goto out;
	err->re = out->id;
	if ((s = get(&d, "type", json_type_string, &tv)))
		goto out;
	if (json_object_get_string_len(tv) >= 32 ||
	    !proto_msg_type_from_name(json_object_get_string(tv), &out->type) ||
	    strlen(json_object_get_string(tv)) != (size_t)json_object_get_string_len(tv)) {
		s = proto_err_set(err, PROTO_E_UNKNOWN_TYPE, "type", "unknown message type");
		goto out;
	}
	if ((s = decode_body(&d, out)))
		goto out;
	s = proto_validate(out, err);
out:
	json_object_put(root);
	return s;
}
