/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * host.h - the host as memtided sees it (host.c): its memory, arbitration across VMs, the
 * pace of a release, and the figures of `memtidectl status` and /metrics.
 */
#ifndef MEMTIDE_HOST_HOST_H
#define MEMTIDE_HOST_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "act/swap_share.h"
#include "base/mtd.h"
#include "daemon/config.h"
#include "daemon/registry.h"
#include "decide/arbiter.h"
#include "decide/release_pace.h"

struct mtd_host {
	pthread_mutex_t lock;              /* guards status and release */
	struct mtd_host_status status;     /* the figures front ends read */
	struct mtd_release_budget release; /* memtidectl release's pace, shared by all VMs */
	struct mtd_arbiter_state arb;      /* main thread only */
	struct mtd_swap_share swap;        /* host swap, one budget for every VM's pageout */
};

void mtd_host_init(struct mtd_host *h, uint64_t release_rate_bytes_per_s);
void mtd_host_destroy(struct mtd_host *h);
/* One arbitration round (main thread, each [host] interval): the host's memory against the
 * marks, every VM's squeeze, the swap, the figures.  libvirt_connected: 1 or 0; -1 in
 * plain-QEMU mode. */
void mtd_host_arbitrate(struct mtd_host *h, const struct mtd_config *cfg, struct mtd_registry *r,
			int libvirt_connected);
/* The figures' VM count and saving, from the VMs in the registry now (attach and detach
 * call it, so that `status` at once stops counting a VM let go). */
void mtd_host_totals(struct mtd_host *h, struct mtd_registry *r);
/* How high a released VM's balloon target may go now (release_pace.h,
 * mtd_release_pace_step), read against the host's MemAvailable now; key names the VM.  Any
 * thread (VM loops). */
uint64_t mtd_host_release_upto(struct mtd_host *h, const struct mtd_config *cfg, uint64_t key,
			       uint64_t now_ms, uint64_t actual_bytes, uint64_t target_bytes,
			       uint64_t ceiling_bytes, bool *host_short);
/* A copy of the figures (front ends). */
void mtd_host_status(struct mtd_host *h, struct mtd_host_status *out);

#endif /* MEMTIDE_HOST_HOST_H */
