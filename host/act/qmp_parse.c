// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * qmp_parse.c - QEMU's words, checked: the pure half of the QMP client (qmp_parse.h).
 *
 * Every function here takes text or a json-c tree and returns checked values; none does I/O,
 * so the client (qmp.c), libvirt mode (libvirt_conn.c, which gets QMP replies as text) and
 * the fuzz target (tests/fuzz/fuzz_qmp.c) run exactly the same checks.
 *
 * The rule: a member is read only through a typed accessor below, which answers "absent"
 * for JSON null, a wrong type, a string with an embedded NUL (\u0000), a negative or
 * fractional number, or a number beyond the bound the caller names.  json-c represents a
 * JSON null as a NULL json_object, and json_object_get_string(NULL) is NULL: before these
 * accessors, {"event": null} and a qom-list entry {"type": null} reached strcmp/strstr
 * with NULL and ended memtided with SIGSEGV (tests/unit/test_mtd_qmp.c).
 *
 * Numbers: json-c keeps integers above INT64_MAX as uint64 and json_object_get_int64()
 * clamps them to INT64_MAX, so the bound is checked on the uint64 value.  Duplicate keys:
 * json-c keeps the last; QMP is read once per message, so no check can see another value
 * than the one used.
 */
#include "act/qmp_parse.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* ---- typed accessors ------------------------------------------------------------------ */

const char *mtd_qmp_str(struct json_object *o, const char *key)
{
	struct json_object *v;
	const char *s;

	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	s = json_object_get_string(v);
	if (!s || strlen(s) != (size_t)json_object_get_string_len(v))
		return NULL; /* an embedded NUL: the C string would be another name */
	return s;
}

int mtd_qmp_u64(struct json_object *v, uint64_t max, uint64_t *out)
{
	uint64_t u;

	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return -EPROTO;
	u = json_object_get_uint64(v);
	if (u > max)
		return -EPROTO;
	*out = u;
	return 0;
}

int mtd_qmp_get_u64(struct json_object *o, const char *key, uint64_t max, uint64_t *out)
{
	struct json_object *v;

	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
		return -EPROTO;
	return mtd_qmp_u64(v, max, out);
}

/* ---- messages ------------------------------------------------------------------------- */

static bool only_space(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

int mtd_qmp_parse_line(const char *s, size_t len, struct json_object **out)
{
	struct json_tokener *t;
	struct json_object *o;
	size_t end;

	*out = NULL;
	if (only_space(s, len))
		return 1;
	if (len > MTD_QMP_MAX_MSG_BYTES || memchr(s, '\0', len))
		return -EPROTO;
	t = json_tokener_new();
	if (!t)
		return -ENOMEM;
	o = json_tokener_parse_ex(t, s, (int)len);
	end = json_tokener_get_parse_end(t);
	if (json_tokener_get_error(t) != json_tokener_success || !o ||
	    !json_object_is_type(o, json_type_object) || !only_space(s + end, len - end)) {
		json_object_put(o);
		json_tokener_free(t);
		return -EPROTO;
	}
	json_tokener_free(t);
	*out = o;
	return 0;
}

bool mtd_qmp_is_event(struct json_object *msg)
{
	return json_object_is_type(msg, json_type_object) &&
	       json_object_object_get_ex(msg, "event", NULL);
}

bool mtd_qmp_balloon_event(struct json_object *msg, uint64_t *actual_bytes)
{
	const char *ev = mtd_qmp_str(msg, "event");
	struct json_object *data;

	if (!ev || strcmp(ev, "BALLOON_CHANGE") != 0 ||
	    !json_object_object_get_ex(msg, "data", &data))
		return false;
	return mtd_qmp_get_u64(data, "actual", MTD_QMP_BYTES_MAX, actual_bytes) == 0;
}

int mtd_qmp_reply_result(struct json_object *msg, struct json_object **ret, char *err,
			 size_t errlen)
{
	struct json_object *r, *e;

	if (ret)
		*ret = NULL;
	if (!json_object_is_type(msg, json_type_object)) {
		snprintf(err, errlen, "QMP reply is not a JSON object");
		return -EPROTO;
	}
	if (json_object_object_get_ex(msg, "return", &r)) {
		if (ret)
			*ret = json_object_get(r); /* NULL for "return": null */
		return 0;
	}
	if (json_object_object_get_ex(msg, "error", &e)) {
		const char *desc = mtd_qmp_str(e, "desc");

		if (desc) {
			/* it reaches logs and, through last_error, the operator's terminal:
			 * no escape sequences from QEMU */
			size_t n = 0;

			for (; n < 200 && n + 1 < errlen && desc[n]; n++)
				err[n] = (unsigned char)desc[n] < 0x20 || desc[n] == 0x7f ? '?'
											  : desc[n];
			if (errlen)
				err[n] = '\0';
		} else
			snprintf(err, errlen, "QEMU returned an error without a description");
		return -EREMOTEIO;
	}
	snprintf(err, errlen, "QMP reply has neither return nor error");
	return -EPROTO;
}

int mtd_qmp_parse_reply(const char *text, struct json_object **ret, char *err, size_t errlen)
{
	struct json_object *msg = NULL;
	int rc;

	if (ret)
		*ret = NULL;
	if (!text || mtd_qmp_parse_line(text, strlen(text), &msg) != 0) {
		snprintf(err, errlen, "QMP reply is not a JSON object");
		return -EPROTO;
	}
	rc = mtd_qmp_reply_result(msg, ret, err, errlen);
	json_object_put(msg);
	return rc;
}

/* ---- replies -------------------------------------------------------------------------- */

/* A QOM child name we may put into a path: 1..63 printable ASCII bytes without '/' (one
 * path component; QEMU's own ids are letters, digits, '-', '.', '_', and "device[N]"). */
static bool qom_name_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (s[n] <= ' ' || s[n] > '~' || s[n] == '/')
			return false;
	return n > 0 && n < 64;
}

int mtd_qmp_find_balloon_entry(struct json_object *list, const char *dir, char *path, size_t len)
{
	size_t n;

	if (!json_object_is_type(list, json_type_array))
		return -ENODEV;
	n = json_object_array_length(list);
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(list, i);
		const char *name = mtd_qmp_str(e, "name"), *type = mtd_qmp_str(e, "type");

		if (!name || !type || !strstr(type, "virtio-balloon") || !qom_name_ok(name))
			continue;
		int w = snprintf(path, len, "%s/%s", dir, name);
		return w > 0 && (size_t)w < len ? 0 : -ENAMETOOLONG;
	}
	return -ENODEV;
}

int mtd_qmp_parse_guest_stats(struct json_object *ret, struct mtd_balloon_stats *out)
{
	struct json_object *stats;
	struct mtd_balloon_stats s = {0};

	if (!json_object_is_type(ret, json_type_object) ||
	    !json_object_object_get_ex(ret, "stats", &stats) ||
	    !json_object_is_type(stats, json_type_object))
		return -EPROTO;
	if (mtd_qmp_get_u64(ret, "last-update", MTD_QMP_COUNTER_MAX, &s.last_update_s) < 0)
		return -EPROTO;
	/* QEMU reports -1 for a statistic the guest never sent: rejected, so it stays
	 * unknown (0), as does anything null, mistyped or beyond its bound. */
	s.has_available = mtd_qmp_get_u64(stats, "stat-available-memory", MTD_QMP_BYTES_MAX,
					  &s.available_bytes) == 0;
	(void)mtd_qmp_get_u64(stats, "stat-free-memory", MTD_QMP_BYTES_MAX, &s.free_bytes);
	(void)mtd_qmp_get_u64(stats, "stat-total-memory", MTD_QMP_BYTES_MAX, &s.total_bytes);
	(void)mtd_qmp_get_u64(stats, "stat-major-faults", MTD_QMP_COUNTER_MAX, &s.major_faults);
	(void)mtd_qmp_get_u64(stats, "stat-minor-faults", MTD_QMP_COUNTER_MAX, &s.minor_faults);
	(void)mtd_qmp_get_u64(stats, "stat-swap-in", MTD_QMP_BYTES_MAX, &s.swap_in_bytes);
	s.valid = s.last_update_s != 0;
	*out = s;
	return 0;
}

int mtd_qmp_parse_bool(struct json_object *ret, bool *out)
{
	if (!json_object_is_type(ret, json_type_boolean))
		return -EPROTO;
	*out = json_object_get_boolean(ret);
	return 0;
}

/* A migration's states from setup until it ends (QAPI MigrationStatus): "none", "completed",
 * "failed" and "cancelled" are the ones where no page is being read. */
static bool migrating(const char *st)
{
	return st && strcmp(st, "none") != 0 && strcmp(st, "completed") != 0 &&
	       strcmp(st, "failed") != 0 && strcmp(st, "cancelled") != 0;
}

/* A job's states while it runs (QAPI JobStatus). */
static bool job_running(const char *st)
{
	static const char *const live[] = {"created", "running", "paused", "ready",
					   "standby", "waiting", "pending"};

	for (size_t i = 0; st && i < sizeof(live) / sizeof(live[0]); i++)
		if (strcmp(st, live[i]) == 0)
			return true;
	return false;
}

void mtd_qmp_parse_memjob(struct json_object *migrate, struct json_object *dump,
			  struct json_object *jobs, struct mtd_memjob *out)
{
	memset(out, 0, sizeof(*out));
	if (json_object_is_type(migrate, json_type_object) &&
	    migrating(mtd_qmp_str(migrate, "status"))) {
		out->active = true;
		snprintf(out->what, sizeof(out->what), "migration");
		return;
	}
	if (json_object_is_type(dump, json_type_object)) {
		const char *st = mtd_qmp_str(dump, "status");
		if (st && strcmp(st, "active") == 0) {
			out->active = true;
			snprintf(out->what, sizeof(out->what), "memory dump");
			return;
		}
	}
	if (!json_object_is_type(jobs, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(jobs); i++) {
		struct json_object *j = json_object_array_get_idx(jobs, i);
		const char *type =
		    json_object_is_type(j, json_type_object) ? mtd_qmp_str(j, "type") : NULL;
		if (type &&
		    (strcmp(type, "snapshot-save") == 0 || strcmp(type, "snapshot-load") == 0) &&
		    job_running(mtd_qmp_str(j, "status"))) {
			out->active = true;
			snprintf(out->what, sizeof(out->what), "snapshot");
			return;
		}
	}
}
