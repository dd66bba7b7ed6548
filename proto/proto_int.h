/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto_int.h - internals shared by the files of proto/ (not installed, not for callers).
 *
 * Error reporting: every failure goes through proto_err_set(), which fills a struct
 * proto_error (when the caller gave one) with the status, the field path and a sentence,
 * and returns the status so the call site reads `return proto_err_set(...)`.
 */
#ifndef MEMTIDE_PROTO_INT_H
#define MEMTIDE_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

enum proto_enum_kind {
	PROTO_ENUM_ROLE,
	PROTO_ENUM_HINT_KIND,
	PROTO_ENUM_SCOPE,
	PROTO_ENUM_METHOD,
	PROTO_ENUM_RESULT,
};

/* Name -> value of one of the small wire enums; false when the name is unknown. */
bool proto_enum_from_name(enum proto_enum_kind which, const char *name, unsigned *out);
/* Collector bit for a name; 0 when unknown. */
uint32_t proto_collector_from_name(const char *name);

/* Fill *err (may be NULL): code, field (truncated to fit), printf-style message.  Keeps
 * err->re. */
void proto_err_fill(struct proto_error *err, enum proto_status code, const char *field,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* proto_err_fill, then the value code, so call sites read `return proto_err_set(...)`.  A
 * macro so that static analysis sees the (non-zero) status come back; code is evaluated
 * twice, so pass a value without side effects. */
#define proto_err_set(err, code, field, ...)                                                       \
	(proto_err_fill((err), (code), (field), __VA_ARGS__), (enum proto_status)(code))

/* snprintf for field paths and messages: truncation is expected and harmless (the path is
 * for humans), so the result is not returned. */
void proto_pathf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool proto_utf8_valid(const char *s, size_t len);

/* A wire string's rule: valid UTF-8, no control characters (< 0x20, 0x7f), len < cap. */
bool proto_text_ok(const char *s, size_t len);

#endif /* MEMTIDE_PROTO_INT_H */
