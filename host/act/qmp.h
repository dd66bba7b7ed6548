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

#include "act/balloon.h"
#include "act/qmp_parse.h"

struct json_object;
struct mtd_qmp;

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

/* The balloon actuator for plain-QEMU mode (struct mtd_balloon_ops, balloon.h): a QMP socket
 * that reconnects by itself after QEMU drops it.  Each command is bounded by timeout_ms
 * (-ETIMEDOUT, or -EAGAIN when QEMU does not accept), cut to 1 s once *hurry is true.
 * NULL when path is too long or no memory. */
extern const struct mtd_balloon_ops mtd_qmp_balloon_ops;
void *mtd_qmp_balloon_new(const char *path, unsigned stats_period_s, int timeout_ms,
			  const atomic_bool *hurry);

#endif /* MEMTIDE_HOST_QMP_H */
