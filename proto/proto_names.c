// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_names.c - name tables of the host-agent protocol.
 *
 * Every enum that travels on the wire does so as a name, never as a number, so a log line and
 * a frame read the same and a reordering of an enum can never change the protocol.  Each
 * table is indexed by the enum's explicit value ([value] = "name"); a hole (NULL) is a value
 * that does not exist.  Lookups by name are linear: the longest table has 43 slots and runs
 * once per field, cheaper than the json-c parse that produced the string.
 */
#include <string.h>

#include "proto.h"
#include "proto_int.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const status_names[] = {
    [PROTO_OK] = "ok",
    [PROTO_E_FRAME_TOO_LARGE] = "frame_too_large",
    [PROTO_E_FRAME_EMPTY] = "frame_empty",
    [PROTO_E_TRUNCATED] = "truncated",
    [PROTO_E_JSON] = "json",
    [PROTO_E_DEPTH] = "depth",
    [PROTO_E_UTF8] = "utf8",
    [PROTO_E_NOT_OBJECT] = "not_object",
    [PROTO_E_DUPLICATE_KEY] = "duplicate_key",
    [PROTO_E_UNKNOWN_TYPE] = "unknown_type",
    [PROTO_E_MISSING_FIELD] = "missing_field",
    [PROTO_E_UNKNOWN_FIELD] = "unknown_field",
    [PROTO_E_WRONG_TYPE] = "wrong_type",
    [PROTO_E_RANGE] = "range",
    [PROTO_E_TOO_LONG] = "too_long",
    [PROTO_E_BAD_VALUE] = "bad_value",
    [PROTO_E_VERSION] = "version",
    [PROTO_E_STATE] = "state",
    [PROTO_E_RATE] = "rate",
    [PROTO_E_BUSY] = "busy",
    [PROTO_E_UNSUPPORTED] = "unsupported",
    [PROTO_E_NOSPC] = "nospc",
    [PROTO_E_NOMEM] = "nomem",
    [PROTO_E_INTERNAL] = "internal",
};

static const char *const msg_names[PROTO_MSG_TYPE_COUNT] = {
    [PROTO_MSG_HELLO] = "hello",     [PROTO_MSG_STATS] = "stats",
    [PROTO_MSG_WSS] = "wss",         [PROTO_MSG_HINT] = "hint",
    [PROTO_MSG_RECLAIM] = "reclaim", [PROTO_MSG_RECLAIM_REPLY] = "reclaim_reply",
    [PROTO_MSG_CONFIG] = "config",   [PROTO_MSG_CONFIG_REPLY] = "config_reply",
    [PROTO_MSG_PING] = "ping",       [PROTO_MSG_PONG] = "pong",
    [PROTO_MSG_ERROR] = "error",
};

/* Capability names, by bit number. */
static const char *const cap_names[32] = {
    [0] = "stats",
    [1] = "psi",
    [2] = "wss",
    [3] = "hint",
    [4] = "ram_layout",
    [5] = "reclaim.memcg",
    [6] = "reclaim.mglru",
    [7] = "reclaim.drop_caches",
    [8] = "reclaim.compact",
    [16] = "host.reclaim",
    [17] = "host.wss",
    [18] = "host.hint",
};

static const char *const collector_names[32] = {
    [0] = "stats",
    [1] = "wss",
    [2] = "hint",
};

static const char *const role_names[] = {
    [PROTO_ROLE_AGENT] = "agent",
    [PROTO_ROLE_HOST] = "host",
};

static const char *const hint_kind_names[] = {
    [PROTO_HINT_HOT] = "hot",
    [PROTO_HINT_COLD] = "cold",
    [PROTO_HINT_NEED] = "need",
};

static const char *const scope_names[] = {
    [PROTO_SCOPE_FILE] = "file",
    [PROTO_SCOPE_ANY] = "any",
};

static const char *const method_names[] = {
    [PROTO_METHOD_MEMCG] = "memcg",
    [PROTO_METHOD_MGLRU] = "mglru",
    [PROTO_METHOD_DROP_CACHES] = "drop_caches",
    [PROTO_METHOD_COMPACT] = "compact",
};

static const char *const result_names[] = {
    [PROTO_RECLAIM_DONE] = "done",     [PROTO_RECLAIM_PARTIAL] = "partial",
    [PROTO_RECLAIM_FLOOR] = "floor",   [PROTO_RECLAIM_UNSUPPORTED] = "unsupported",
    [PROTO_RECLAIM_FAILED] = "failed",
};

static const char *table_name(const char *const *t, size_t n, unsigned v)
{
	if (v >= n || !t[v])
		return "invalid";
	return t[v];
}

static bool table_find(const char *const *t, size_t n, const char *name, unsigned *out)
{
	for (size_t i = 0; i < n; i++) {
		if (t[i] && strcmp(t[i], name) == 0) {
			*out = (unsigned)i;
			return true;
		}
	}
	return false;
}

const char *proto_status_name(enum proto_status s)
{
	return table_name(status_names, NELEM(status_names), (unsigned)s);
}

bool proto_status_from_name(const char *name, enum proto_status *out)
{
	unsigned v;

	if (!table_find(status_names, NELEM(status_names), name, &v))
		return false;
	*out = (enum proto_status)v;
	return true;
}

bool proto_status_is_fatal(enum proto_status s)
{
	return s == PROTO_E_FRAME_TOO_LARGE || s == PROTO_E_FRAME_EMPTY || s == PROTO_E_TRUNCATED;
}

const char *proto_msg_type_name(enum proto_msg_type t)
{
	return table_name(msg_names, NELEM(msg_names), (unsigned)t);
}

bool proto_msg_type_from_name(const char *name, enum proto_msg_type *out)
{
	unsigned v;

	if (!table_find(msg_names, NELEM(msg_names), name, &v))
		return false;
	*out = (enum proto_msg_type)v;
	return true;
}

/* Bit number of a value with exactly one bit set, or -1. */
static int single_bit(uint32_t bit)
{
	if (bit == 0 || (bit & (bit - 1)) != 0)
		return -1;
	return __builtin_ctz(bit);
}

const char *proto_cap_name(uint32_t cap)
{
	int b = single_bit(cap);

	return b < 0 ? NULL : cap_names[b];
}

uint32_t proto_cap_from_name(const char *name)
{
	unsigned v;

	if (!table_find(cap_names, NELEM(cap_names), name, &v))
		return 0;
	return 1u << v;
}

const char *proto_collector_name(uint32_t bit)
{
	int b = single_bit(bit);

	return b < 0 ? NULL : collector_names[b];
}

uint32_t proto_collector_from_name(const char *name)
{
	unsigned v;

	if (!table_find(collector_names, NELEM(collector_names), name, &v))
		return 0;
	return 1u << v;
}

const char *proto_role_name(enum proto_role r)
{
	return table_name(role_names, NELEM(role_names), (unsigned)r);
}

const char *proto_hint_kind_name(enum proto_hint_kind k)
{
	return table_name(hint_kind_names, NELEM(hint_kind_names), (unsigned)k);
}

const char *proto_reclaim_scope_name(enum proto_reclaim_scope s)
{
	return table_name(scope_names, NELEM(scope_names), (unsigned)s);
}

const char *proto_reclaim_method_name(enum proto_reclaim_method m)
{
	return table_name(method_names, NELEM(method_names), (unsigned)m);
}

const char *proto_reclaim_result_name(enum proto_reclaim_result r)
{
	return table_name(result_names, NELEM(result_names), (unsigned)r);
}

bool proto_enum_from_name(enum proto_enum_kind which, const char *name, unsigned *out)
{
	switch (which) {
	case PROTO_ENUM_ROLE:
		return table_find(role_names, NELEM(role_names), name, out);
	case PROTO_ENUM_HINT_KIND:
		return table_find(hint_kind_names, NELEM(hint_kind_names), name, out);
	case PROTO_ENUM_SCOPE:
		return table_find(scope_names, NELEM(scope_names), name, out);
	case PROTO_ENUM_METHOD:
		return table_find(method_names, NELEM(method_names), name, out);
	case PROTO_ENUM_RESULT:
		return table_find(result_names, NELEM(result_names), name, out);
	}
	return false;
}
