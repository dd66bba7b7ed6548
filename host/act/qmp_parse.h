/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qmp_parse.h - the pure parsers of QEMU's words (qmp_parse.c): QEMU's text in, checked
 * values out.
 */
#ifndef MEMTIDE_HOST_QMP_PARSE_H
#define MEMTIDE_HOST_QMP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/balloon.h"

struct json_object;

/* No I/O: the client above, libvirt mode and tests/fuzz/fuzz_qmp.c share them.  A member
 * that is JSON null, of the wrong type, a string with an embedded NUL, or a number that is
 * negative, fractional or over its bound reads as absent: -EPROTO or "skipped", never a
 * crash and never a clamped value. */
#define MTD_QMP_MAX_MSG_BYTES (1u << 20)         /* one line from QEMU, at most */
#define MTD_QMP_BYTES_MAX     (1ULL << 52)       /* any memory size: 4 PiB */
#define MTD_QMP_COUNTER_MAX   ((1ULL << 53) - 1) /* counters and times (exact in a double) */

/* The string member key of object o; NULL when o is no object, key is absent, null, not a
 * string, or holds a NUL byte. */
const char *mtd_qmp_str(struct json_object *o, const char *key);
/* v as an unsigned integer <= max: 0, or -EPROTO (null, not an int, negative, over max). */
int mtd_qmp_u64(struct json_object *v, uint64_t max, uint64_t *out);
/* Member key of o, as mtd_qmp_u64.  *out is written only on success. */
int mtd_qmp_get_u64(struct json_object *o, const char *key, uint64_t max, uint64_t *out);
/* One line of QMP text (no NUL, at most MTD_QMP_MAX_MSG_BYTES): 0 with a JSON object in
 * *out (caller puts it), 1 for a blank line, -EPROTO for anything else (not JSON, not an
 * object, text after the object). */
int mtd_qmp_parse_line(const char *s, size_t len, struct json_object **out);
/* Whether msg is an asynchronous event (has an "event" member, whatever its value). */
bool mtd_qmp_is_event(struct json_object *msg);
/* A well-formed BALLOON_CHANGE event: true with data.actual in *actual_bytes. */
bool mtd_qmp_balloon_event(struct json_object *msg, uint64_t *actual_bytes);
/* A command's reply: 0 with *ret = the "return" member (a new reference, NULL for null),
 * -EREMOTEIO with QEMU's description in err, -EPROTO when it is neither. */
int mtd_qmp_reply_result(struct json_object *msg, struct json_object **ret, char *err,
			 size_t errlen);
/* Parse a whole QMP reply text ({"return": ...} or {"error": ...}) as libvirt's
 * virDomainQemuMonitorCommand hands it back; *ret as for mtd_qmp_execute. */
int mtd_qmp_parse_reply(const char *text, struct json_object **ret, char *err, size_t errlen);
/* In a qom-list "return" array, the first virtio-balloon child whose name is one clean path
 * component: "DIR/NAME" into path.  -ENODEV when none, -ENAMETOOLONG. */
int mtd_qmp_find_balloon_entry(struct json_object *list, const char *dir, char *path, size_t len);
/* Parse a qom-get guest-stats "return" value.  0 or -EPROTO. */
/* Is QEMU reading all of guest memory itself?  From the answers to query-migrate,
 * query-dump and query-jobs (each may be NULL: not asked, or QEMU has no such command). */
void mtd_qmp_parse_memjob(struct json_object *migrate, struct json_object *dump,
			  struct json_object *jobs, struct mtd_memjob *out);
int mtd_qmp_parse_guest_stats(struct json_object *ret, struct mtd_balloon_stats *out);
/* A boolean "return" value (qom-get free-page-reporting).  0 or -EPROTO. */
int mtd_qmp_parse_bool(struct json_object *ret, bool *out);

#endif /* MEMTIDE_HOST_QMP_PARSE_H */
