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

#define MTD_CONTROL_MAX_REQUEST (64 * 1024) /* bytes per request line */
#define MTD_CONTROL_MAX_CLIENTS 16
#define MTD_CONTROL_MAX_SLOW    8     /* attach/detach/policy-set running at once */
#define MTD_CONTROL_IDLE_MS     30000 /* a connection with no request this long is closed */

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

/* A request, parsed and checked (control_req.c).  Strings are NUL-terminated and hold
 * 1..MTD_NAME_MAX-1 bytes with no control character; fields the command does not take are
 * "". */
enum mtd_control_cmd {
	MTD_CTL_NONE = 0,
	MTD_CTL_STATUS,
	MTD_CTL_VM,         /* name */
	MTD_CTL_ATTACH,     /* name */
	MTD_CTL_DETACH,     /* name */
	MTD_CTL_POLICY_GET, /* name */
	MTD_CTL_POLICY_SET, /* name, pairs (key, value) */
	MTD_CTL_HOOK,       /* name (the request's "domain"), op, subop ("-" when absent) */
	MTD_CTL_VERSION,
	MTD_CTL_RELEASE_VMS, /* name, or all */
	MTD_CTL_RESUME_VMS,  /* name, or all */
};
#define MTD_CONTROL_MAX_PAIRS 16 /* policy-set: keys in one request */

struct mtd_control_req {
	enum mtd_control_cmd cmd;
	char name[MTD_NAME_MAX];
	/* policy-set: {"key": K, "value": V} gives one pair; {"set": {K: V, ...}} several,
	 * applied all or none */
	struct mtd_kv pairs[MTD_CONTROL_MAX_PAIRS];
	unsigned npairs;
	char op[MTD_NAME_MAX];
	char subop[MTD_NAME_MAX];
	bool all; /* release/resume: {"all": true} in place of a name */
};

/*
 * Parse one request line (len bytes, no newline; need not be NUL-terminated).  0, or -EINVAL
 * with one sentence for the client in err: not one JSON object, a duplicate key, an unknown
 * cmd, a missing or non-string field, or one that is empty, too long, or holds a NUL
 * (\u0000) or another control character.  Pure; any thread.
 */
int mtd_control_parse(const char *line, size_t len, struct mtd_control_req *req, char *err,
		      size_t errlen);

/*
 * Answer one request line (no newline) as a JSON text the caller frees.  Exposed for the
 * unit tests; the thread calls it for every line it reads.
 */
char *mtd_control_handle(struct mtd_daemon *d, const char *version, const char *line, size_t len);

#endif /* MEMTIDE_HOST_CONTROL_H */
