/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h - memtided's core object, internal to the core (front ends see only mtd.h).
 *
 * Threads:
 *   main       signals, the work queue (attach/detach/hook news), host arbitration ticks
 *              (host.c);
 *   libvirt    libvirt's default event loop (libvirt_conn.c), whose news only queues work;
 *   one per VM the control loop (vm_loop.c);
 *   front ends the control socket and metrics (theirs), reading snapshots under RCU.
 * Attach, detach and policy changes are serialised by d->lock (a mutex held only by control
 * paths, never by a VM loop); VM loops never take it, so a slow libvirt call in one place
 * never stalls another VM's loop.
 */
#ifndef MEMTIDE_HOST_DAEMON_H
#define MEMTIDE_HOST_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "base/mtd.h"
#include "base/turns.h"
#include "daemon/config.h"
#include "daemon/host.h"
#include "daemon/registry.h"
#include "daemon/vm.h"
#include "decide/arbiter.h"

struct mtd_libvirt;
struct mtd_vm;
struct mtd_vsock;
struct mtd_kvsock;

enum mtd_mode {
	MTD_MODE_LIBVIRT = 0, /* every running domain with a balloon */
	MTD_MODE_QMP,         /* one VM: --qmp PATH [--agent PATH] */
};

/* A unit of work for the main thread (from libvirt events, hooks, front ends). */
enum mtd_work_kind {
	MTD_WORK_ATTACH = 1,
	MTD_WORK_DETACH, /* stop managing (device change: an attach follows); state kept */
	MTD_WORK_GONE,   /* the domain stopped: detach and remove its state file */
	MTD_WORK_RESCAN, /* re-list running domains (libvirtd reconnect) */
	MTD_WORK_POLICY, /* the domain's memtide metadata changed: reload it */
	MTD_WORK_REAP,   /* a detached VM's loop finished: join it, unlink, free */
};

struct mtd_work {
	enum mtd_work_kind kind;
	char name[MTD_NAME_MAX];
	uint64_t serial; /* MTD_WORK_REAP: which VM of that name (mtd_vm.serial) */
	struct mtd_work *next;
};

/* Plain-QEMU mode manages one VM per --qmp given; the first is qmp_path/agent_path/vm_name
 * below, the others are here. */
#define MTD_MAX_QMP_VMS 64
struct mtd_qmp_vm {
	char qmp_path[MTD_PATH_MAX];
	char agent_path[MTD_PATH_MAX]; /* "" : no agent */
	char name[MTD_NAME_MAX];
};

struct mtd_daemon {
	struct mtd_config cfg;
	enum mtd_mode mode;
	char qmp_path[MTD_PATH_MAX];   /* plain-QEMU mode */
	char agent_path[MTD_PATH_MAX]; /* plain-QEMU mode ("" : no agent; "vsock:PATH": the
					* agent over memtided's vhost-user-vsock on QEMU's PATH) */
	char vm_name[MTD_NAME_MAX];    /* plain-QEMU mode: the name shown for the VM */
	struct mtd_qmp_vm more_qmp[MTD_MAX_QMP_VMS - 1]; /* plain-QEMU mode: VMs 2..N */
	unsigned nr_more_qmp;
	unsigned nr_abandoned; /* loops still stuck in a call when the daemon stopped */

	struct mtd_registry registry; /* struct mtd_vm by name (registry.h) */
	pthread_mutex_t lock;         /* serialises attach / detach / policy set */
	struct mtd_libvirt *lv;       /* libvirt mode */
	struct mtd_vsock *vsock;      /* the vhost-user-vsock back end (NULL: none) */
	struct mtd_kvsock *kvsock;    /* the AF_VSOCK listener, kernel vsock (NULL: none) */

	pthread_mutex_t work_lock; /* guards work_head / work_tail */
	struct mtd_work *work_head, *work_tail;
	int work_fd; /* eventfd: wakes the main thread */
	atomic_bool exiting;

	uint64_t watchdog_ms; /* systemd's WatchdogSec= (0: none): main loop pings at half */

	char config_path[MTD_PATH_MAX]; /* re-read on SIGHUP */
	bool config_missing_ok;         /* the default path: a missing file means defaults */
	/* The file's keys as the last reload applied them (at first, as memtided started):
	 * what the next reload's log says changed, beside the keys changed since the start
	 * that only a restart puts in force (cfg.file_keys). */
	struct mtd_config_key applied_keys[MTD_CONFIG_MAX_KEYS];
	unsigned nr_applied_keys;

	struct mtd_host host;   /* the host's memory, arbitration, a release's pace (host.h) */
	struct mtd_turns turns; /* the loops' aging rounds, a few per CPU at a time (turns.h) */
	struct mtd_turns reclaim_turns; /* cgroup reclaim writes, one VM at a time */

	char boot_id[37];           /* this boot's id: state files of another boot are void */
	atomic_bool state_failing;  /* saving VM state fails (told once, not per VM) */
	struct mtd_vm_host vm_host; /* what every VM is handed of the daemon (vm.h) */
};

/* Lifecycle (daemon.c), called from main(). */
int mtd_daemon_new(const struct mtd_config *cfg, struct mtd_daemon **out);
/* Start managing: connect to libvirt and attach running domains, or attach the QMP VM. */
int mtd_daemon_start(struct mtd_daemon *d);
/* Run the main thread's loop until *stop_fd is readable (a signalfd).  0 or -errno. */
int mtd_daemon_run(struct mtd_daemon *d, int signal_fd);
/* SIGHUP: re-read the config file's [defaults] and [host] and every VM's policy (plain-QEMU
 * mode: [defaults] under the policy set at run time).  Main thread. */
void mtd_daemon_reload(struct mtd_daemon *d);
/* Do the queued work now, as the main thread's loop would (tests; main thread only). */
void mtd_daemon_drain_work(struct mtd_daemon *d);
/* Stop every loop (each VM keeps its size; its state is saved), disconnect.  Then free. */
void mtd_daemon_stop(struct mtd_daemon *d);
void mtd_daemon_free(struct mtd_daemon *d);
/* Queue work for the main thread (any thread, never blocks on libvirt). */
int mtd_daemon_queue(struct mtd_daemon *d, enum mtd_work_kind kind, const char *name);
/* A VM's loop that was asked to detach has finished: the main thread reaps it. */
int mtd_daemon_queue_reap(struct mtd_daemon *d, const char *name, uint64_t serial);

#endif /* MEMTIDE_HOST_DAEMON_H */
