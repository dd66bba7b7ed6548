/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control_req.h - one control-socket request, parsed and checked (control_req.c): what the
 * control thread (control.c) answers, the unit tests and tests/fuzz/fuzz_control.c drive.
 * docs/control-socket.md is the protocol.
 */
#ifndef MEMTIDE_HOST_CONTROL_REQ_H
#define MEMTIDE_HOST_CONTROL_REQ_H

#include <stdbool.h>
#include <stddef.h>

#include "base/mtd.h"

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

#endif /* MEMTIDE_HOST_CONTROL_REQ_H */
