/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vm.h - one managed VM: its identity, its actuators, its control-loop state, and the
 * status snapshot it publishes.
 *
 * Ownership and threads:
 *   - The registry (registry.c) owns struct mtd_vm; it is found by name under RCU.
 *   - The VM's loop thread (vm_loop.c) owns everything under "loop-private": nobody else
 *     reads or writes those fields, so they need no lock.
 *   - Other threads talk to the loop only through the "mailbox" fields (atomics, or the
 *     mailbox mutex) and wake it through wake_fd (an eventfd).
 *   - The published status is an immutable snapshot swapped with rcu_xchg_pointer; the old
 *     one is freed with call_rcu after every reader is done.
 *
 * Memory per VM is bounded: the libvmm guest (metadata proportional to guest RAM; see
 * vmm_guest_stats.metadata_bytes), the agent link's buffers (fixed caps), MAX_EVICTED_RUNS
 * runs of balloon history, and two snapshots at most during a swap.
 */
#ifndef MEMTIDE_HOST_VM_H
#define MEMTIDE_HOST_VM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "decide/controller.h"
#include "base/mtd.h"
#include "daemon/policy.h"
#include "act/qmp.h"
#include "access/source.h"
#include "daemon/state.h"
#include "decide/steady.h"
#include "vmm.h"

struct mtd_daemon;
struct mtd_agent_link;
struct mtd_vsock_claim;
struct mtd_pageout_hand;
struct json_object;

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

#define MAX_EVICTED_RUNS 1024

struct mtd_vm {
	/* ---- identity and registry (immutable after mtd_vm_new) ---- */
	char name[MTD_NAME_MAX];
	char uuid[37];
	uint64_t serial; /* unique per mtd_vm_new: tells two VMs of one name apart */
	struct mtd_daemon *d;
	struct cds_lfht_node node; /* in the registry's hash table, keyed by name */
	struct rcu_head rcu;       /* for freeing after removal */

	/* ---- published snapshot (RCU) ---- */
	struct mtd_vm_status *status; /* rcu_dereference under rcu_read_lock */

	/* ---- mailbox: other threads -> loop ---- */
	int wake_fd;                  /* eventfd: a write wakes the loop at once */
	atomic_bool stop;             /* leave the loop; the VM keeps the size it has */
	atomic_bool detaching;        /* detach asked (the loop is on its way out) */
	atomic_uint squeeze_permille; /* host arbiter's squeeze, 0..1000 */
	/* loop -> arbiter: what a full squeeze could still take, target - max(floor, working
	 * set at the cold age threshold), and what the balloon has yet to take, actual -
	 * target; bytes */
	_Atomic uint64_t reclaimable_bytes;
	_Atomic uint64_t pending_bytes;
	pthread_mutex_t mbox_lock; /* guards policy_new, policy_dirty, policy_set, release_cmd */
	struct mtd_policy policy_new;
	bool policy_dirty;
	/* runtime policy overrides (plain-QEMU mode: memtidectl policy set), value text per key
	 * of mtd_policy_keys ("" not set): kept over [defaults] on SIGHUP, saved in the state */
	char policy_set[MTD_POLICY_NKEYS][MTD_POLICY_VALUE_MAX];
	int release_cmd; /* 0 none, 1 release, -1 resume: memtidectl's ask, not yet taken */

	/* ---- actuators and inputs (set before the loop starts, then loop-private) ---- */
	const struct mtd_balloon_ops *balloon;
	void *balloon_ctx;
	char agent_path[256]; /* unix socket of the agent channel ("" : none) */
	bool agent_expected;
	bool vsock_expected;        /* the VM has memtided's vhost-user-vsock device */
	struct mtd_saved_vm *saved; /* a state file to resume from (taken on the first tick) */
	bool forget;                /* on stop: remove the state file (the domain is gone) */
	atomic_bool gone;           /* the domain went away, maybe while a detach was under way: the
			   * reap removes its state file too */

	/* ---- loop-private ---- */
	pthread_t thread;
	bool thread_started;
	struct mtd_policy policy;
	uint64_t domain_bytes;
	struct mtd_agent_link *agent;
	struct mtd_source source;
	struct vmm_guest *guest;
	struct vmm_reclaim_ctl reclaim;
	struct mtd_ctl_state ctl;
	uint64_t cold_age_ms;
	struct vmm_decision decision; /* the last round's (vmm_decide): host pageout acts on it */
	uint64_t cold_age_capped_ms;  /* policy cold_age last said to be beyond the generations */
	uint64_t last_step_ms;
	uint64_t first_tick_ms;       /* when the loop first ran: the oldest age it can vouch for */
	uint64_t rounds;              /* aging rounds done */
	uint64_t last_refaults;       /* libvmm refaults_total at the last step */
	uint64_t last_guest_refaults; /* agent workingset_refault (pages) at the last step */
	uint64_t last_majfault;       /* pgmajfault at the last step */
	bool have_fault_base;
	uint64_t balloon_actual;
	uint64_t avail_seq;       /* the agent stats report the balloon level below goes with */
	uint64_t avail_balloon;   /* the balloon's actual size when that report came */
	uint64_t pressure_seq;    /* the agent stats report last answered as pressure (0: none) */
	uint64_t actual_since_ms; /* when the balloon's actual size last changed */
	uint64_t reserved_bytes;  /* guest RAM outside its MemTotal, least read (0: unknown) */
	uint64_t rss_next_ms;     /* next read of the guest RAM's resident size */
	struct mtd_balloon_stats bstats;
	uint64_t bstats_seen_update_s; /* last-update of the newest balloon stats */
	uint64_t bstats_seen_ms;       /* when last-update last moved */
	uint64_t reclaim_seen;         /* agent reclaim replies already logged as actions */
	struct mtd_steady steady;      /* growing and futile-reclaim rules (steady.h) */
	bool fpr_on, fpr_known;
	unsigned balloon_failures;
	struct mtd_vsock_claim *vsock;  /* our claim on the vsock service's endpoint */
	uint64_t vsock_restart_session; /* the session a device restart was asked for */
	unsigned vsock_restarts;
	uint64_t layout_checked_gen; /* the memory table last checked against QMP */
	uint64_t applied_bytes;      /* the balloon target the hypervisor last accepted */
	bool applied_valid;     /* applied_bytes holds one (none yet after attach or restart) */
	bool apply_pending;     /* the last command failed or the actuator reconnected: send
				 * the current target again at the next tick */
	bool read_failing;      /* the balloon cannot be read: told once per outage */
	unsigned connects_seen; /* balloon->connects at the last tick */
	char instance[48];      /* the QEMU process now ("PID:STARTTIME", "" unknown) */
	bool released;          /* memtidectl release in force */
	bool release_waiting;   /* the host had nothing to spare at the last release step */
	uint64_t majflt_seen;   /* balloon stats' major faults at the last fresh sample */
	uint64_t majflt_seen_ms;
	double majflt_per_s; /* over the last stats period (valid when majflt_known) */
	bool majflt_known;
	struct mtd_saved_vm *last_saved; /* what the state file holds (NULL: not written yet) */
	bool state_failing;              /* saving fails: told once per outage */
	bool observing;                  /* observe-only was in force at the last step */
	bool history_warned;             /* a failed history write was logged (once) */
	uint64_t peer_down_since_ms;     /* first call the peer did not answer (0: answering) */
	uint64_t peer_next_probe_ms;     /* while down: no balloon call before this */
	unsigned peer_probes;            /* unanswered probes in a row (backoff exponent) */
	uint64_t last_sched_tick_ms;     /* start of the last scheduled tick */
	unsigned late_in_row, ontime_in_row;
	struct mtd_pageout_hand *hand;            /* host-side eviction (pageout_hand.h) */
	struct vmm_run evicted[MAX_EVICTED_RUNS]; /* runs the balloon took, newest last */
	size_t nr_evicted;
	struct mtd_vm_status draft; /* built here each step, then published as a copy */
};

/* Create a VM record (not yet in the registry, no thread).  0 or -ENOMEM. */
int mtd_vm_new(struct mtd_daemon *d, const char *name, const char *uuid,
	       const struct mtd_policy *policy, struct mtd_vm **out);
/* Free a VM whose thread has been joined and that no reader can reach any more. */
void mtd_vm_free(struct mtd_vm *vm);
/* Publish vm->draft as the new snapshot (copy), retiring the old one with call_rcu. */
int mtd_vm_publish(struct mtd_vm *vm);
/* Record an action in the draft ("inflate 1024->896 MiB"); kept in a ring of the last
 * MTD_LAST_ACTIONS.  Logged at INFO. */
void mtd_vm_action(struct mtd_vm *vm, uint64_t now_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The audit trail of a change to the VM's size or an eviction step (history.h says what
 * `what`, `reason` and `source` hold): recorded as an action, logged at NOTICE with the VM,
 * before, after, reason and source, and appended to the VM's history file.  observe: only
 * computed (observe-only mode), said as "would ...".  Loop thread only. */
void mtd_vm_audit(struct mtd_vm *vm, uint64_t now_ms, const char *what, uint64_t before_bytes,
		  uint64_t after_bytes, const char *reason, const char *source, bool observe);
/*
 * Honest figures: what memtide returned from a VM, apart from guest RAM that is simply not
 * resident (never touched by the guest, or freed by it and reported by free page reporting
 * without memtide's help).  A guest that gave nothing back must not read as "saved" because
 * it never touched half its RAM.
 *   held      the balloon's hold, domain - actual: memtide's doing (it set the target);
 *   absent    guest RAM not resident on the host, domain - rss, when rss is known (not 0);
 *   reclaimed what the agent's reclaim freed since attach, of which at most what is absent
 *             beyond the balloon's hold can still be away (the rest came back);
 *   returned  = held + min(reclaimed, absent - held)      (held alone when rss is unknown);
 *   untouched = absent - returned                          (0 when rss is unknown).
 * observe: nothing was done, so nothing was returned (returned 0).  Pure.
 */
void mtd_vm_figures(uint64_t domain_bytes, uint64_t actual_bytes, uint64_t rss_bytes,
		    uint64_t reclaimed_bytes, bool observe, uint64_t *returned_bytes,
		    uint64_t *untouched_bytes);
/* Wake the loop (policy change, stop, exit). */
void mtd_vm_wake(struct mtd_vm *vm);
/* Hand the loop a new policy (validated by the caller). */
void mtd_vm_set_policy(struct mtd_vm *vm, const struct mtd_policy *p);

/* memtided's vhost-user-vsock back end, the VM loop's side (vm_vsock.c): restart the device
 * after memtided reconnected to a running QEMU, publish and check the memory table. */
void mtd_vm_vsock_step(struct mtd_vm *vm);
/* Fill st's agent-channel and vsock fields. */
void mtd_vm_channel_status(struct mtd_vm *vm, struct mtd_vm_status *st);

/* The loop (vm_loop.c). */
int mtd_vm_loop_start(struct mtd_vm *vm);
/* Ask the loop to stop and join it.  The VM keeps the size it has; its state is saved
 * (or removed, when vm->forget says the domain is gone). */
void mtd_vm_loop_stop(struct mtd_vm *vm);
/* Ask the loop to stop without waiting (the VM keeps its size, as above); when detach, it
 * queues MTD_WORK_REAP once done. */
void mtd_vm_loop_request_stop(struct mtd_vm *vm, bool detach);
/* Join the loop by deadline_ms (CLOCK_MONOTONIC).  0, or -ETIMEDOUT (still running). */
int mtd_vm_loop_join(struct mtd_vm *vm, uint64_t deadline_ms);
/* Ask for a release (true) or a resume (false) of the VM; the loop takes it at once. */
void mtd_vm_release(struct mtd_vm *vm, bool release);

#endif /* MEMTIDE_HOST_VM_H */
