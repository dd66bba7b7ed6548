/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vm_vsock.h - a VM loop's part of memtided's vhost-user-vsock back end (vm_vsock.c): the
 * device restart after memtided comes back to a running QEMU, and the guest RAM layout from
 * QEMU's memory table, checked against QMP before it is trusted.  Loop thread only.
 */
#ifndef MEMTIDE_HOST_VM_VSOCK_H
#define MEMTIDE_HOST_VM_VSOCK_H

#include <stdint.h>

#include "act/balloon.h"
#include "base/mtd.h"

struct mtd_vsock_claim;
struct mtd_kvsock_claim;
struct mtd_agent_link;

struct mtd_vm_vsock {
	struct mtd_vsock_claim *claim; /* our claim on the vsock service's endpoint (NULL: none) */
	struct mtd_kvsock_claim *kclaim; /* our claim on a kernel vsock CID (NULL: none) */
	uint64_t restart_session;        /* the session a device restart was asked for */
	unsigned restarts;
	uint64_t layout_checked_gen; /* the memory table last checked against QMP */
};

/* On every wake of the loop (a mutex and a copy of the endpoint's state; QMP, through the
 * balloon actuator's monitor, only when something changed): restart the device when
 * memtided reconnected to a running QEMU, publish and check a new memory table. */
void mtd_vm_vsock_step(struct mtd_vm_vsock *v, const struct mtd_balloon *b,
		       struct mtd_vm_status *draft);
/* Fill st's agent-channel and vsock fields (agent may be NULL). */
void mtd_vm_channel_status(const struct mtd_vm_vsock *v, struct mtd_agent_link *agent,
			   struct mtd_vm_status *st);

#endif /* MEMTIDE_HOST_VM_VSOCK_H */
