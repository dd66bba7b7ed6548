// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_json.c - from payload bytes to a trusted json-c tree (the decoder's first half).
 *
 * A payload is hostile until this file says otherwise.  Three steps, in order:
 *
 *   1. Pre-scan (one pass over the bytes, no allocation): rejects NUL bytes, single-quoted
 *      strings (json-c accepts {'a':1} even in strict mode - seen with 0.16), nesting deeper
 *      than PROTO_JSON_MAX_DEPTH, and more than SCAN_MAX_TOKENS members/elements, which
 *      bounds json-c's allocations to a few hundred objects instead of the ~500 000 a 1 MiB
 *      frame of "[0,0,0,...]" would cost.  It also counts the members of every object, in
 *      the order their '{' appear (pre-order).
 *   2. json-c parse, strict, UTF-8 validating, with depth PROTO_JSON_MAX_DEPTH; the whole
 *      payload must be one object and nothing after it (whitespace aside).
 *   3. Duplicate keys: json-c keeps the last of two equal keys silently, so an object's
 *      length in the tree is smaller than its member count from step 1.  The tree is walked
 *      in pre-order (json-c keeps insertion order), so the first object whose counts differ
 *      is the one with the duplicate: everything before it in pre-order is intact.
 *
 * Before step 1 the whole payload is checked to be UTF-8 by proto_utf8_valid(): json-c's
 * JSON_TOKENER_VALIDATE_UTF8 (0.16) lets overlong forms such as C0 AF through (seen).
 *
 * NaN and Infinity pass json-c (it accepts them in strict mode); the typed decoder rejects
 * them per field, where it can name the field.
 */
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "proto_json.h"

#define SCAN_MAX_TOKENS  8192 /* ':' plus ',' outside strings; largest message uses ~800 */
#define SCAN_MAX_OBJECTS 1024 /* '{' in a payload; largest message has ~260 */

struct scan {
	uint16_t members[SCAN_MAX_OBJECTS]; /* per object, pre-order */
	unsigned nr_objects;
};

/* Step 1.  Structure errors (unbalanced brackets) are left to json-c in step 2. */
static enum proto_status prescan(const char *p, size_t len, struct scan *sc,
				 struct proto_error *err)
{
	int stack[PROTO_JSON_MAX_DEPTH]; /* object index, or -1 for an array */
	unsigned depth = 0, tokens = 0;
	bool in_str = false, esc = false;

	sc->nr_objects = 0;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];

		if (c == '\0')
			return proto_err_set(err, PROTO_E_JSON, "", "NUL byte at offset %zu", i);
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			break;
		case '\'':
			return proto_err_set(err, PROTO_E_JSON, "",
					     "single-quoted string at offset %zu", i);
		case '{':
		case '[':
			if (depth == PROTO_JSON_MAX_DEPTH)
				return proto_err_set(err, PROTO_E_DEPTH, "",
						     "nested deeper than %d at offset %zu",
						     PROTO_JSON_MAX_DEPTH, i);
			if (c == '[') {
				stack[depth++] = -1;
				break;
			}
			if (sc->nr_objects == SCAN_MAX_OBJECTS)
				return proto_err_set(err, PROTO_E_TOO_LONG, "",
						     "more than %d objects", SCAN_MAX_OBJECTS);
			sc->members[sc->nr_objects] = 0;
			stack[depth++] = (int)sc->nr_objects++;
			break;
		case '}':
		case ']':
			if (depth)
				depth--;
			break;
		case ':':
		case ',':
			if (++tokens > SCAN_MAX_TOKENS)
				return proto_err_set(err, PROTO_E_TOO_LONG, "",
						     "more than %d members and elements",
						     SCAN_MAX_TOKENS);
			/* members <= tokens <= 8192 fits uint16_t */
			if (c == ':' && depth && stack[depth - 1] >= 0)
				sc->members[stack[depth - 1]]++;
			break;
		default:
			break;
		}
	}
	return PROTO_OK;
}

/* Step 3, recursive over a tree json-c built with depth <= PROTO_JSON_MAX_DEPTH. */
static enum proto_status dup_walk(struct json_object *o, const struct scan *sc, unsigned *next,
				  const char *path, struct proto_error *err)
{
	char sub[PROTO_FIELD_MAX];
	enum proto_status s;

	if (json_object_is_type(o, json_type_object)) {
		unsigned idx = (*next)++;

		if (idx >= sc->nr_objects ||
		    (size_t)json_object_object_length(o) != sc->members[idx])
			return proto_err_set(err, PROTO_E_DUPLICATE_KEY, path,
					     "duplicate key in object '%s'", path);
		json_object_object_foreach(o, key, val)
		{
			proto_pathf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
			if ((s = dup_walk(val, sc, next, sub, err)))
				return s;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		size_t n = json_object_array_length(o);

		for (size_t i = 0; i < n; i++) {
			proto_pathf(sub, sizeof(sub), "%s[%zu]", path, i);
			if ((s = dup_walk(json_object_array_get_idx(o, i), sc, next, sub, err)))
				return s;
		}
	}
	return PROTO_OK;
}

static enum proto_status map_tokener_error(enum json_tokener_error je, size_t off,
					   struct proto_error *err)
{
	switch (je) {
	case json_tokener_error_depth:
		return proto_err_set(err, PROTO_E_DEPTH, "", "nested deeper than %d",
				     PROTO_JSON_MAX_DEPTH);
	case json_tokener_error_parse_utf8_string:
		return proto_err_set(err, PROTO_E_UTF8, "", "invalid UTF-8 at offset %zu", off);
	case json_tokener_continue:
		return proto_err_set(err, PROTO_E_JSON, "", "JSON ends early");
	default:
		return proto_err_set(err, PROTO_E_JSON, "", "%s at offset %zu",
				     json_tokener_error_desc(je), off);
	}
}

static bool only_space(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
			return false;
	return true;
}

enum proto_status proto_json_parse(const void *json, size_t len, struct json_object **out,
				   struct proto_error *err)
{
	const char *p = json;
	struct json_tokener *tok = NULL;
	struct json_object *o = NULL;
	struct scan sc;
	enum proto_status s;
	size_t end;
	unsigned next = 0;

	*out = NULL;
	if (len == 0 || len > PROTO_FRAME_MAX_BYTES)
		return proto_err_set(err, len ? PROTO_E_FRAME_TOO_LARGE : PROTO_E_JSON, "",
				     "payload of %zu bytes", len);
	/* Step 1.  json-c's own UTF-8 check lets overlong forms (C0 AF) through: check the
	 * whole payload here (outside strings only ASCII is valid JSON anyway). */
	if (!proto_utf8_valid(p, len))
		return proto_err_set(err, PROTO_E_UTF8, "", "payload is not valid UTF-8");
	if ((s = prescan(p, len, &sc, err)))
		return s;
	/* Step 2 */
	tok = json_tokener_new_ex(PROTO_JSON_MAX_DEPTH);
	if (!tok)
		return proto_err_set(err, PROTO_E_NOMEM, "", "json_tokener_new_ex failed");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, p, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!o && json_tokener_get_error(tok) == json_tokener_continue) {
		/* a top-level number ("12") waits for more digits: end the input */
		o = json_tokener_parse_ex(tok, "", 1);
		end = len;
	}
	if (!o) {
		enum json_tokener_error je = json_tokener_get_error(tok);

		/* a complete top-level "null" also yields NULL, with success */
		s = je == json_tokener_success
			? proto_err_set(err, PROTO_E_NOT_OBJECT, "", "payload is null")
			: map_tokener_error(je, json_tokener_get_parse_end(tok), err);
		goto out;
	}
	if (end < len && !only_space(p + end, len - end)) {
		s = proto_err_set(err, PROTO_E_JSON, "", "bytes after the object at offset %zu",
				  end);
		goto out;
	}
	if (!json_object_is_type(o, json_type_object)) {
		s = proto_err_set(err, PROTO_E_NOT_OBJECT, "",
				  "payload is a JSON %s, not an object",
				  json_type_to_name(json_object_get_type(o)));
		goto out;
	}
	/* Step 3 */
	if ((s = dup_walk(o, &sc, &next, "", err)))
		goto out;
	*out = o;
	o = NULL;
out:
	json_object_put(o);
	json_tokener_free(tok);
	return s;
}
