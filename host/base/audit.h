/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * audit.h - the audit trail as the stages of a VM's tick see it: every change memtided makes
 * to a VM's size, and every eviction step, is said once through this sink.
 *
 * The stages (access/, decide/, act/) say what they did; the daemon, which owns the VM's
 * record and its history file, hands each VM's sink down (daemon/vm.c, mtd_vm_audit: an
 * action in the status, a NOTICE line, a line of the history file, history.h).
 */
#ifndef MEMTIDE_HOST_AUDIT_H
#define MEMTIDE_HOST_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

/*
 * what: "balloon", "reclaim", "reclaimed", "target", "pageout" (history.h); before and
 * after in bytes; reason: the controller's (mtd_ctl_reason_name) or the actuator's; source:
 * who wanted it ("guest", "controller", "arbiter", "operator", ...); observe: only
 * computed (observe-only), said as "would ...".
 */
struct mtd_audit {
	void (*record)(void *ctx, uint64_t now_ms, const char *what, uint64_t before_bytes,
		       uint64_t after_bytes, const char *reason, const char *source, bool observe);
	void *ctx;
};

static inline void mtd_audit(const struct mtd_audit *a, uint64_t now_ms, const char *what,
			     uint64_t before_bytes, uint64_t after_bytes, const char *reason,
			     const char *source, bool observe)
{
	a->record(a->ctx, now_ms, what, before_bytes, after_bytes, reason, source, observe);
}

#endif /* MEMTIDE_HOST_AUDIT_H */
