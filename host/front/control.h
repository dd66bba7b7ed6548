/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control.h - memtided's control socket: the door memtidectl, the libvirt hook and
 * operators' scripts come through.
 *
 * A unix stream socket (default /run/memtide/memtided.sock, mode 0600) served by one thread
 * of its own.  Each peer's credentials are checked with SO_PEERCRED: root and memtided's own
 * user only.  Requests and replies are one JSON object per line; docs/control-socket.md
 * specifies them.  The thread reads VM state through host/base/mtd.h only (RCU snapshots and the
 * mtd_daemon_* calls), so it never touches a VM's live state.
 */
#ifndef MEMTIDE_HOST_CONTROL_H
#define MEMTIDE_HOST_CONTROL_H

#include <stddef.h>

#include "base/mtd.h"
#include "front/control_req.h"

#define MTD_CONTROL_MAX_REQUEST (64 * 1024) /* bytes per request line */
/*
 * Sized for a host of a few hundred VMs.  The largest burst is libvirtd's restart: it runs the
 * hook ("reconnect") for every running domain at once, so several hundred clients arrive
 * together, besides the operators' and monitoring's memtidectl calls.  The listen queue holds
 * such a burst whole (1024: a few hundred VMs, twice over; the kernel caps it at
 * net.core.somaxconn, 4096 by default): a client queued there has connected and its request
 * waits in its socket until a slot is free.  The slots are what the thread holds at once;
 * each request takes it microseconds to a few ms (status of 256 VMs), so 64 keep it busy
 * while the rest wait their turn in the queue, at a 64 KiB request buffer each while
 * connected (4 MiB at most).
 */
#define MTD_CONTROL_MAX_CLIENTS 64
#define MTD_CONTROL_BACKLOG     1024
#define MTD_CONTROL_MAX_SLOW    8     /* attach/detach/policy-set running at once */
#define MTD_CONTROL_IDLE_MS     30000 /* a connection with no request this long is closed */
/* A connection that has sent nothing (or part of a line) for this long may be closed to make
 * room; one just accepted has its request on the way, or waiting unread. */
#define MTD_CONTROL_GRACE_MS    1000

struct mtd_control;

/*
 * Bind the socket at path (creating its directory, 0755, when missing) and start serving.
 * A socket file nobody answers on is stale and replaced; one that answers belongs to a
 * running memtided and is an error.  0, or -errno with a sentence in err.
 */
int mtd_control_start(struct mtd_daemon *d, const char *path, const char *version,
		      struct mtd_control **out, char *err, size_t errlen);

/* Stop the thread, close every connection, remove the socket file.  NULL is a no-op. */
void mtd_control_stop(struct mtd_control *c);

/*
 * Answer one request line (no newline) as a JSON text the caller frees.  Exposed for the
 * unit tests; the thread calls it for every line it reads.
 */
char *mtd_control_handle(struct mtd_daemon *d, const char *version, const char *line, size_t len);

#endif /* MEMTIDE_HOST_CONTROL_H */
