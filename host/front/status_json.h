/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * status_json.h - memtided's published state as JSON: one encoding shared by the control
 * socket (control.c), which sends it, and memtidectl, which reads the same field names.
 *
 * Units are in the field names: *_bytes, *_ms, *_per_min.  docs/control-socket.md lists
 * every field.  The encoders build json-c objects the caller owns (json_object_put).
 */
#ifndef MEMTIDE_HOST_STATUS_JSON_H
#define MEMTIDE_HOST_STATUS_JSON_H

#include <stdbool.h>

#include <json-c/json.h>

#include "base/mtd.h"

/* The policy as an object: enabled, min_bytes, max_bytes, priority, ... */
struct json_object *mtd_json_policy(const struct mtd_policy *p);

/* One VM.  full adds the generation histogram, the working set by idle age and the last
 * actions (what `memtidectl vm show` prints); the summary is what `status` lists. */
struct json_object *mtd_json_vm(const struct mtd_vm_status *st, bool full);

/* The host's figures: memory, low mark, pressure, number of VMs, memory saved. */
struct json_object *mtd_json_host(const struct mtd_host_status *h);

#endif /* MEMTIDE_HOST_STATUS_JSON_H */
