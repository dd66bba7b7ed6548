/*
 * proto_json.h - internal: payload bytes -> json-c tree, with the wire's structural rules
 * (see proto_json.c).  Used by the decoder only.
 */
#ifndef MEMTIDE_PROTO_JSON_H
#define MEMTIDE_PROTO_JSON_H

#include <stddef.h>

#include "proto_int.h"

struct json_object;

/*
 * Parse json[0..len) into *out (one JSON object; caller releases it with json_object_put).
 * Errors: PROTO_E_JSON, PROTO_E_DEPTH, PROTO_E_UTF8, PROTO_E_NOT_OBJECT,
 * PROTO_E_DUPLICATE_KEY, PROTO_E_TOO_LONG (too many tokens), PROTO_E_FRAME_TOO_LARGE,
 * PROTO_E_NOMEM; *out is then NULL.
 */
enum proto_status proto_json_parse(const void *json, size_t len, struct json_object **out,
				   struct proto_error *err);

#endif /* MEMTIDE_PROTO_JSON_H */
