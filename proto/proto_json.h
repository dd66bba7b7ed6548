/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto_json.h - internal: payload bytes -> json-c tree, with the wire's structural rules
 * (see proto_json.c).  The declaration is public, in proto.h: the decoder and memtided's
 * control socket share it.
 */
#ifndef MEMTIDE_PROTO_JSON_H
#define MEMTIDE_PROTO_JSON_H

#include <stddef.h>

#include "proto_int.h"

/* proto_json_parse() is declared in proto.h (memtided's control socket uses it too). */

#endif /* MEMTIDE_PROTO_JSON_H */
