/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qmp.h - a small QMP client (QEMU Machine Protocol over a unix socket) for plain-QEMU mode,
 * and the parsers for balloon replies that libvirt mode shares (libvirt passes QMP through
 * virDomainQemuMonitorCommand).
 *
 * Synchronous: one command in flight, each bounded by a timeout; asynchronous events that
 * arrive while waiting are consumed (BALLOON_CHANGE is remembered, the rest dropped).  QEMU
 * is a peer we trust more than a guest, but its replies are still checked field by field:
 * a missing or mistyped member is -EPROTO, never a crash.
 *
 * Thread context: one mtd_qmp belongs to one thread (the VM's loop).
 */
#ifndef MEMTIDE_HOST_QMP_H
#define MEMTIDE_HOST_QMP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct mtd_qmp;

/* What the virtio balloon tells about the guest (QMP guest-stats, libvirt memory stats). */
struct mtd_balloon_stats {
	bool valid;             /* the guest driver has reported at least once */
	uint64_t last_update_s; /* guest-stats last-update (0: never) */
	bool has_available;
	uint64_t available_bytes; /* MemAvailable as the balloon driver reports it */
	uint64_t free_bytes;
	uint64_t total_bytes;
	uint64_t major_faults; /* pgmajfault, cumulative */
	uint64_t minor_faults;
	uint64_t swap_in_bytes;
};

/*
 * Connect, read the greeting, negotiate capabilities.  Never blocks longer than timeout_ms
 * per step: -EAGAIN when QEMU's listen backlog is full (it stopped accepting), -ETIMEDOUT
 * when it accepted but does not speak; 0, -errno, -EPROTO otherwise.  hurry (may be NULL):
 * once it reads true, every wait of this client ends within 1 s (the VM is stopping).
 */
int mtd_qmp_connect(const char *path, int timeout_ms, const atomic_bool *hurry,
		    struct mtd_qmp **out);
/* The same over a connected stream fd, which the client owns from now on (closed on
 * error too); tests and tests/fuzz/fuzz_qmp.c hand it one end of a socketpair. */
int mtd_qmp_connect_fd(int fd, int timeout_ms, const atomic_bool *hurry, struct mtd_qmp **out);
void mtd_qmp_close(struct mtd_qmp *q);

/*
 * Run one command.  args may be NULL (not consumed).  On success *ret (may be NULL) gets the
 * "return" member with a reference the caller drops with json_object_put.  QEMU's error
 * reply is -EREMOTEIO with its description in err.  A broken or silent socket is -EIO or
 * -ETIMEDOUT; the client is then unusable (reconnect).
 */
int mtd_qmp_execute(struct mtd_qmp *q, const char *cmd, struct json_object *args,
		    struct json_object **ret, char *err, size_t errlen);

/* balloon: set the guest's memory (target) in bytes. */
int mtd_qmp_balloon(struct mtd_qmp *q, uint64_t target_bytes);
/* query-balloon: the balloon's actual (guest memory now) in bytes. */
int mtd_qmp_query_balloon(struct mtd_qmp *q, uint64_t *actual_bytes);
/* Find the virtio-balloon device's QOM path (peripheral or peripheral-anon).  -ENODEV. */
int mtd_qmp_find_balloon(struct mtd_qmp *q, char *path, size_t len);
/* qom-set guest-stats-polling-interval (seconds). */
int mtd_qmp_set_stats_period(struct mtd_qmp *q, const char *path, unsigned seconds);
/* qom-get guest-stats. */
int mtd_qmp_guest_stats(struct mtd_qmp *q, const char *path, struct mtd_balloon_stats *out);
/* qom-get free-page-reporting. */
int mtd_qmp_fpr(struct mtd_qmp *q, const char *path, bool *on);
/* The last BALLOON_CHANGE event's actual, if one arrived (0: none). */
uint64_t mtd_qmp_last_balloon_event(const struct mtd_qmp *q);

/* ---- the pure parsers (qmp_parse.c): QEMU's text in, checked values out --------------
 * No I/O: the client above, libvirt mode and tests/fuzz/fuzz_qmp.c share them.  A member
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
int mtd_qmp_parse_guest_stats(struct json_object *ret, struct mtd_balloon_stats *out);
/* A boolean "return" value (qom-get free-page-reporting).  0 or -EPROTO. */
int mtd_qmp_parse_bool(struct json_object *ret, bool *out);

/* The balloon actuator for plain-QEMU mode (struct mtd_balloon_ops, vm.h): a QMP socket
 * that reconnects by itself after QEMU drops it.  Each command is bounded by timeout_ms
 * (-ETIMEDOUT, or -EAGAIN when QEMU does not accept), cut to 1 s once *hurry is true.
 * NULL when path is too long or no memory. */
struct mtd_balloon_ops;
extern const struct mtd_balloon_ops mtd_qmp_balloon_ops;
void *mtd_qmp_balloon_new(const char *path, unsigned stats_period_s, int timeout_ms,
			  const atomic_bool *hurry);

#endif /* MEMTIDE_HOST_QMP_H */
