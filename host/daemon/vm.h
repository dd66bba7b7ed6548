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
 * vmm_guest_stats.metadata_bytes), the agent link's buffers (fixed caps), MTD_MAX_TAKEN_RUNS
 * runs of balloon history (act/tick_act.h), and two snapshots at most during a swap.
 *
 * The loop-private state is each stage's own (decide/tick.h): the balloon's (act/),
 * the decision's (decide/), the act stage's (act/), the vsock device's (vsock/); the record
 * holds them, the stages never see the record.
 */
#ifndef MEMTIDE_HOST_VM_H
#define MEMTIDE_HOST_VM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "access/source.h"
#include "access/tick_age.h"
#include "act/balloon.h"
#include "act/swap_share.h"
#include "act/tick_act.h"
#include "base/audit.h"
#include "base/mtd.h"
#include "base/policy.h"
#include "daemon/config.h"
#include "daemon/state.h"
#include "decide/tick_decide.h"
#include "vmm.h"
#include "vsock/vm_vsock.h"

struct mtd_agent_link;
struct mtd_memcg_hand;
struct mtd_pageout_hand;
struct mtd_turns;
struct mtd_vsock;

/*
 * What a VM needs of the daemon that runs it, handed down at mtd_vm_new (daemon.c fills one
 * for all its VMs): its settings, the shared resources, and two calls back.  The VM never
 * sees the daemon itself.
 */
struct mtd_vm_host {
	const struct mtd_config *cfg;
	struct mtd_turns *turns;         /* the loops' aging rounds take turns (turns.h) */
	struct mtd_turns *reclaim_turns; /* host-side reclaim through cgroups: one VM at a time */
	struct mtd_vsock *vsock;         /* the vhost-user-vsock back end (NULL: none) */
	struct mtd_kvsock *kvsock;       /* the AF_VSOCK listener, kernel vsock (NULL: none) */
	const char *boot_id;             /* this boot's: state files of another boot are void */
	atomic_bool *state_failing;      /* saving VM state fails (told once, not per VM) */
	struct mtd_swap_share *swap;     /* host swap, one budget for every VM's pageout */
	/* How high a released VM's balloon target may go now, counted from the balloon's
	 * actual size (the daemon's pace for all, release_pace.h; any thread). */
	uint64_t (*release_upto)(void *ctx, uint64_t key, uint64_t now_ms, uint64_t actual_bytes,
				 uint64_t target_bytes, uint64_t ceiling_bytes, bool *host_short);
	/* A VM's loop that was asked to detach has finished: the main thread reaps it. */
	int (*reap)(void *ctx, const char *name, uint64_t serial);
	void *ctx;
};

struct mtd_vm {
	/* ---- identity and registry (immutable after mtd_vm_new) ---- */
	char name[MTD_NAME_MAX];
	char uuid[37];
	uint64_t serial; /* unique per mtd_vm_new: tells two VMs of one name apart */
	const struct mtd_vm_host *host;
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
	struct mtd_balloon balloon; /* ops and ctx set by the daemon (balloon.h) */
	char agent_path[256];       /* unix socket of the agent channel ("" : none) */
	bool agent_expected;
	bool vsock_expected;        /* the VM has memtided's vhost-user-vsock device */
	bool kvsock_expected;       /* the VM has the kernel's vsock device (vhost-vsock-pci) */
	uint32_t kvsock_cid;        /* its guest CID from the domain XML (0: read QEMU's
				     * command line at attach: plain-QEMU mode) */
	struct mtd_saved_vm *saved; /* a state file to resume from (taken on the first tick) */
	bool forget;                /* on stop: remove the state file (the domain is gone) */
	atomic_bool gone;           /* the domain went away, maybe while a detach was under way: the
			   * reap removes its state file too */

	/* ---- loop-private ---- */
	pthread_t thread;
	bool thread_started;
	struct mtd_policy policy;
	struct mtd_agent_link *agent;
	struct mtd_source source;
	struct vmm_guest *guest;
	struct mtd_pageout_hand *hand;  /* host-side eviction (pageout_hand.h) */
	struct mtd_memcg_hand *memcg;   /* ...through the VM's cgroup (memcg_hand.h; NULL: none) */
	struct mtd_vm_vsock vsock;      /* the vsock device's side (vm_vsock.h) */
	struct mtd_vm_decide dec;       /* the decision's state (decide/tick_decide.h) */
	struct mtd_vm_act act;          /* the act stage's (act/tick_act.h) */
	struct mtd_age_state age_state; /* failed aging rounds (access/tick_age.h) */
	struct mtd_audit audit;         /* mtd_vm_audit, for the stages */
	uint64_t last_step_ms;          /* the last scheduled tick */
	uint64_t first_tick_ms;      /* when the loop first ran: the oldest age it can vouch for */
	uint64_t last_sched_tick_ms; /* start of the last scheduled tick */
	unsigned late_in_row, ontime_in_row;
	struct mtd_saved_vm *last_saved; /* what the state file holds (NULL: not written yet) */
	bool state_failing;              /* saving fails: told once per outage */
	bool history_warned;             /* a failed history write was logged (once) */
	struct mtd_vm_status draft;      /* built here each step, then published as a copy */
};

/* Create a VM record (not yet in the registry, no thread).  0 or -ENOMEM. */
int mtd_vm_new(const struct mtd_vm_host *host, const char *name, const char *uuid,
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

/* The status's last error: what failed and why, within its field. */
void mtd_vm_set_error(struct mtd_vm *vm, const char *what, const char *detail);

/* The VM's QEMU was restarted (a new process behind the same monitor): the access source,
 * libvmm's guest and reclaim controller and host-side eviction's hand are made again for
 * the new process, as at attach.  0 or -errno (the VM then runs with no source: watched,
 * never squeezed). */
int mtd_vm_reattach_access(struct mtd_vm *vm);
/* Attach (vm_attach.c, on the loop's thread): the balloon first (retried until it opens or
 * the loop is asked to stop: -ECANCELED), then the agent's channel, the access source,
 * libvmm's guest and reclaim controller, host-side eviction's hand.  0 or -errno. */
int mtd_vm_attach(struct mtd_vm *vm);

/* The tick's stages on the VM's own record (decide/tick.h lists them all): 5, publish the
 * status (tick_publish.c); 6, save what a restarted memtided needs when it changed
 * (tick_save.c), and, before the first decision, take over a state file a previous memtided
 * saved (mtd_tick_resume: a no-op without one). */
void mtd_tick_publish(struct mtd_vm *vm, const struct mtd_tick *t);
void mtd_tick_save(struct mtd_vm *vm, uint64_t now_ms);
void mtd_tick_resume(struct mtd_vm *vm, uint64_t now_ms);

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
