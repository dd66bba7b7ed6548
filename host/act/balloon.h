/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * balloon.h - the balloon actuator: what a VM's loop asks of the hypervisor, whichever it
 * is: libvirt (libvirt_conn.c) or a plain QMP socket (qmp.c) (struct mtd_balloon_ops), and
 * the loop's side of it (struct mtd_balloon, balloon.c): what the balloon last read, the
 * target the hypervisor last took, and the health of the peer behind it.
 *
 * Letting go: nothing here ever moves the balloon on its own.  A command that fails is not
 * recorded as done: the current target is sent again each tick until the hypervisor takes
 * it, and again after the actuator reconnects to the same QEMU; a QEMU that was restarted
 * meanwhile (a new process behind the socket) is started over from its size.
 *
 * Peer health.  Every call (QMP or libvirt) is bounded by [daemon] call_timeout (qmp.c,
 * bounded_call.c).  A call that times out marks the VM's peer unresponsive: one log line,
 * the status says since when and which call, and from then on the peer is probed with one
 * call at a time after 1, 2, 4 ... 30 s instead of every tick.  The first call that answers
 * ends it (logged with its duration).  Nothing is actuated while the peer is unresponsive:
 * the VM stays as it is, and the current target is sent once it answers again.
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
 * QEMU's whole-memory operations: a migration (to another host, or to a file: libvirt's
 * save), a snapshot (snapshot-save or -load) or a guest-memory dump.  Each reads or writes
 * every page of guest RAM, so pages in host swap come back without the guest touching them
 * (host-side eviction pauses for them and does not count those as refaults).
 */
struct mtd_memjob {
	bool active;   /* one is under way now */
	char what[32]; /* "migration", "snapshot", "memory dump" (when active) */
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
	/* QEMU's whole-memory operations now (optional, NULL: not known).  0 or -errno; a
	 * monitor that does not answer is an error (a synchronous savevm or dump holds QEMU's
	 * main loop). */
	int (*memjob)(void *ctx, struct mtd_memjob *out);
	/* Connections made so far (optional, NULL: the actuator never reconnects by itself):
	 * when it moves, the actuator lost its connection and made a new one. */
	unsigned (*connects)(void *ctx);
	void (*destroy)(void *ctx);
};

struct mtd_vm_status;
struct mtd_audit;

/* One VM's balloon as its loop drives it.  Loop thread only.  ops and ctx are set by the
 * daemon before the loop starts; the rest starts zeroed. */
struct mtd_balloon {
	const struct mtd_balloon_ops *ops;
	void *ctx;
	const char *vm;           /* the VM's name, for the log */
	uint64_t call_timeout_ms; /* [daemon] call_timeout, named when a call times out */

	uint64_t domain_bytes;          /* the domain's memory, from open */
	uint64_t actual;                /* what the balloon last reported */
	uint64_t actual_since_ms;       /* when actual last changed */
	struct mtd_balloon_stats stats; /* the driver's, as last read */
	uint64_t stats_seen_update_s;   /* last-update of the newest stats */
	uint64_t stats_seen_ms;         /* when last-update last moved */
	uint64_t majflt_seen;           /* major faults at the last fresh sample */
	uint64_t majflt_seen_ms;
	double majflt_per_s; /* over the last stats period (valid when majflt_known) */
	bool majflt_known;
	bool read_failing;      /* the balloon cannot be read: told once per outage */
	unsigned connects_seen; /* ops->connects at the last read */
	char instance[48];      /* the QEMU process now ("PID:STARTTIME", "" unknown) */
	bool fpr_on, fpr_known; /* free page reporting, as asked at attach */
	uint64_t rss_next_ms;   /* next read of the guest RAM's resident size */

	uint64_t applied_bytes; /* the target the hypervisor last accepted */
	bool applied_valid;     /* applied_bytes holds one (none yet after attach or restart) */
	bool apply_pending;     /* the last command failed or the actuator reconnected: send
				 * the current target again at the next tick */
	unsigned failures;      /* target commands failed in a row */

	uint64_t peer_down_since_ms; /* first call the peer did not answer (0: answering) */
	uint64_t peer_next_probe_ms; /* while down: no call before this */
	unsigned peer_probes;        /* unanswered probes in a row (backoff exponent) */
};

#define MTD_BALLOON_ERROR_AFTER 3 /* failed target commands in a row before the VM shows ERROR */

/* What a read found besides the figures. */
enum mtd_balloon_news {
	MTD_BALLOON_SAME = 0,    /* nothing: same connection, same QEMU */
	MTD_BALLOON_RESTARTED,   /* a new QEMU process: a new guest at its full size */
	MTD_BALLOON_GREW,        /* reconnected, and the balloon holds more than was set */
	MTD_BALLOON_RECONNECTED, /* reconnected to the same QEMU: the target goes again */
	MTD_BALLOON_TOOK_BACK,   /* the guest deflated it itself (deflate-on-oom) */
};

/* Connect (again) to the hypervisor: the domain's size into b->domain_bytes.  0 or -errno
 * with err set; the peer's health is noted either way. */
int mtd_balloon_open(struct mtd_balloon *b, struct mtd_vm_status *draft, char *err, size_t errlen);
/* After the first open: which QEMU it is, and the connections so far. */
void mtd_balloon_attached(struct mtd_balloon *b);
/* Is free page reporting on (b->fpr_on, b->fpr_known)?  Said once, loudly, when it is off:
 * what the agent's reclaim frees then stays with the guest. */
void mtd_balloon_query_fpr(struct mtd_balloon *b, struct mtd_vm_status *draft);
/* The QEMU process behind the actuator.  0 or -errno (-ENOTSUP: the actuator cannot say). */
int mtd_balloon_pid(const struct mtd_balloon *b, int *pid);
/* Does QEMU run the guest on KVM (QMP query-kvm: present and enabled)?  0 with *on, or
 * -ENOTSUP (no monitor) / -errno (the query failed). */
int mtd_balloon_on_kvm(const struct mtd_balloon *b, bool *on);
/* Read the balloon's actual and its driver's stats (unless the peer is down and not due a
 * probe), the guest RAM resident on the host (draft->host_rss_bytes, every 10 s), and
 * whether the actuator reconnected.  set_bytes: the target memtided set (for the log). */
enum mtd_balloon_news mtd_balloon_read(struct mtd_balloon *b, uint64_t now_ms,
				       uint64_t min_change_bytes, uint64_t set_bytes,
				       struct mtd_vm_status *draft);
/* The driver's stats moved within silence_ms. */
bool mtd_balloon_stats_fresh(const struct mtd_balloon *b, uint64_t now_ms, uint64_t silence_ms);
/*
 * Send target_bytes as the balloon's target: when it moved by min_change at least, or when
 * the last one was not taken (a failed command, a reconnect); until the hypervisor accepts
 * it, it is not done.  Observe-only: said (audit "would"), never sent.  The status's
 * counters, balloon target and last error follow; the step goes to the audit trail.
 */
void mtd_balloon_apply(struct mtd_balloon *b, uint64_t target_bytes, bool observe,
		       uint64_t min_change_bytes, uint64_t now_ms, const char *reason,
		       const char *source, struct mtd_vm_status *draft,
		       const struct mtd_audit *audit);

/* "PID:STARTTIME" of a process (its start time in clock ticks since boot, from
 * /proc/PID/stat: a PID reused by a later process differs in it).  0 or -errno. */
int mtd_process_instance(int pid, char *buf, size_t len);

#endif /* MEMTIDE_HOST_BALLOON_H */
