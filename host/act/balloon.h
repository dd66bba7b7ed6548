/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * balloon.h - the balloon actuator: what a VM's loop asks of the hypervisor, whichever it
 * is: libvirt (libvirt_conn.c) or a plain QMP socket (qmp.c).
 */
#ifndef MEMTIDE_HOST_BALLOON_H
#define MEMTIDE_HOST_BALLOON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

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
 * The balloon and what the hypervisor knows about the guest: libvirt (libvirt_conn.c) or a
 * plain QMP socket (qmp.c).  Called from the VM's loop thread only.  All return 0 or -errno.
 */
struct mtd_balloon_ops {
	const char *name;
	/* (Re)connect and set the stats period; fills the domain's memory size. */
	int (*open)(void *ctx, uint64_t *domain_bytes, char *err, size_t errlen);
	int (*set_target)(void *ctx, uint64_t target_bytes, char *err, size_t errlen);
	/* Balloon actual and the driver's stats (stats->valid false when not reported). */
	int (*read)(void *ctx, uint64_t *actual_bytes, struct mtd_balloon_stats *stats);
	/* Is free page reporting on for this balloon?  -ENOTSUP when it cannot be told. */
	int (*fpr)(void *ctx, bool *on);
	/* The QEMU process, for the guest RAM's resident size and to tell a restarted QEMU
	 * from a reconnect to the same one.  -ENOTSUP when unknown. */
	int (*qemu_pid)(void *ctx, int *pid);
	/* One QMP command, passed through (libvirt: its monitor passthrough).  *ret as for
	 * mtd_qmp_execute.  NULL when the actuator has no monitor. */
	int (*qmp)(void *ctx, const char *cmd, struct json_object *args, struct json_object **ret,
		   char *err, size_t errlen);
	/* Connections made so far (optional, NULL: the actuator never reconnects by itself):
	 * when it moves, the actuator lost its connection and made a new one. */
	unsigned (*connects)(void *ctx);
	void (*destroy)(void *ctx);
};

#endif /* MEMTIDE_HOST_BALLOON_H */
