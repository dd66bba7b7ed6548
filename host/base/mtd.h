/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mtd.h - the seam between memtided's core (VM registry, per-VM control loops, libvirt and
 * QEMU actuators) and its front ends (control socket, Prometheus metrics, memtidectl).
 *
 * The core publishes, per VM, an immutable status snapshot (struct mtd_vm_status) that it
 * swaps with RCU after every control step; front ends read snapshots lock-free under
 * rcu_read_lock() and never touch a VM's live state.  Front ends ask for changes (attach,
 * detach, policy) through the mtd_daemon_* calls below, which the core serialises.
 *
 * Everything here is prefixed mtd_.  Sizes are bytes, times are CLOCK_MONOTONIC ms.
 */
#ifndef MEMTIDE_MTD_H
#define MEMTIDE_MTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_VERSION      "0.1.0" /* memtided's and memtidectl's; debian/changelog's too */
#define MTD_NAME_MAX     128     /* libvirt domain names are shorter in practice */
#define MTD_PATH_MAX     256     /* a file or socket path in memtided's settings */
#define MTD_WSS_BINS     4       /* idle ages of the working-set estimate */
#define MTD_MAX_GENS     16
#define MTD_LAST_ACTIONS 8
#define MTD_RAM_REGIONS  8 /* vhost-user's memory table holds at most 8 */
#define MTD_SOURCE_NOTES 5 /* sources a VM could use (all five: none may be chosen) */

/* Printed after the version line by --version, as GNU tools do: the copyright and license. */
#define MTD_LICENSE                                                                                \
	"Copyright (C) 2026 the memtide developers.\n"                                             \
	"License GPL-2.0-or-later: GNU GPL version 2 or later "                                    \
	"<https://gnu.org/licenses/gpl.html>.\n"                                                   \
	"This is free software: you are free to change and redistribute it.\n"                     \
	"There is NO WARRANTY, to the extent permitted by law.\n"

enum mtd_vm_state {
	MTD_VM_ATTACHING = 0, /* connecting to QMP / agent, learning the guest */
	MTD_VM_ACTIVE,        /* control loop running, may inflate */
	MTD_VM_AGENT_SILENT,  /* the agent (or, without one, the balloon stats) went quiet: no
			      * inflation, the size kept */
	MTD_VM_DEFLATING,     /* pressure or need: giving memory back to the guest */
	MTD_VM_DISABLED,      /* policy says enabled=false: watched, size kept, never inflated */
	MTD_VM_ERROR,         /* actuator failed repeatedly; see last_error */
	MTD_VM_RELEASED,      /* memtidectl release: back to its ceiling at a host-safe pace,
			      * never inflated until memtidectl resume */
	MTD_VM_DETACHED,      /* gone; the snapshot is kept until the entry is freed */
};

const char *mtd_vm_state_name(enum mtd_vm_state s);

/*
 * How memory taken from a guest goes back to the host (policy key `return`):
 *   balloon  the balloon is inflated to the target; the guest's memory.reclaim is asked
 *            first for what the balloon will take.  Works with any guest, agent or not.
 *            The host discards the balloon's pages 4 KiB at a time, which splits the huge
 *            pages backing guest RAM (measured: 806 -> 132-268 MiB AnonHugePages in
 *            scenario 2, and a hot set 11-23% slower afterwards under TCG).
 *   reclaim  the agent reclaims down to the target and free page reporting hands the freed
 *            memory back in 2 MiB blocks, so the host's huge pages over the rest stay
 *            whole; the balloon stays at the ceiling and is used only as a cap: when the
 *            host arbiter squeezes the VM, or the agent cannot reclaim (no agent, no
 *            reclaim capability, or free page reporting off), it falls back to `balloon`,
 *            or to `pageout` for a VM without an agent that has a live access source.
 *   pageout  memtided evicts the guest's cold pages itself (oldest generations, past the
 *            cold age) into host swap with process_madvise(MADV_PAGEOUT); nothing is
 *            asked of the guest and the balloon stays at the ceiling (host/act/pageout_hand.c).
 *   auto     the agent's reclaim for what the guest will give, host pageout for the rest.
 */
enum mtd_return_via {
	MTD_RETURN_BALLOON = 0,
	MTD_RETURN_RECLAIM,
	MTD_RETURN_PAGEOUT,
	MTD_RETURN_AUTO,
};
const char *mtd_return_via_name(enum mtd_return_via r);

/* How memory goes back this interval: the resolved mode, except that the agent's reclaim with
 * no soft target (the controller moved the balloon instead) is the balloon's doing. */
static inline enum mtd_return_via mtd_return_in_force(enum mtd_return_via mode, bool soft)
{
	return mode == MTD_RETURN_RECLAIM && !soft ? MTD_RETURN_BALLOON : mode;
}

/*
 * Where a VM's page-access information comes from (policy key `source`; host/access/):
 * auto picks the first available of ept, idle, damon, then the agent's amounts, then the
 * VM's memory cgroup (what the host kernel's reclaim learns of the guest).
 */
enum mtd_access_pref {
	MTD_ACCESS_AUTO = 0,
	MTD_ACCESS_EPT,
	MTD_ACCESS_IDLE,
	MTD_ACCESS_DAMON,
	MTD_ACCESS_AGENT,
	MTD_ACCESS_MEMCG,
};
const char *mtd_access_pref_name(enum mtd_access_pref p);

/* Per-domain policy (daemon defaults, overridden from the domain's libvirt metadata). */
struct mtd_policy {
	bool enabled;
	uint64_t min_bytes;             /* never balloon the guest below this (the floor) */
	uint64_t max_bytes;             /* never give it more than this (0: the domain's maximum) */
	unsigned priority;              /* host arbitration weight: lower is reclaimed first */
	double target_refault_per_min;  /* fraction of resident pages per minute (0.002) */
	uint64_t headroom_bytes;        /* added to the working set to form the target */
	enum mtd_return_via return_via; /* key `return`: balloon, reclaim, pageout or auto */
	enum mtd_access_pref source;    /* key `source`: auto, ept, idle, damon, agent */
	uint64_t ept_window_ms;         /* key `ept_window`: the ept source's sampling window */
	bool observe;         /* key `observe`: compute and show what would be done, do nothing */
	uint64_t cold_age_ms; /* key `cold_age`: a fixed cold age, the refault controller
			       * bypassed (a static threshold, tuned by hand); 0: the controller's */
};

/* Host-side eviction (return=pageout or auto), as the pageout hand last saw it. */
enum mtd_pageout_state {
	MTD_PAGEOUT_OFF = 0, /* not in force (return=balloon or reclaim) */
	MTD_PAGEOUT_ACTIVE,  /* evicting pages past the cold age */
	MTD_PAGEOUT_PAUSED,  /* in force, not now (swap full, VM not active, guest reclaiming) */
	MTD_PAGEOUT_REFUSED, /* cannot (map unsure, memory pinned or locked, no live source) */
};
const char *mtd_pageout_state_name(enum mtd_pageout_state s);

struct mtd_vm_pageout {
	enum mtd_pageout_state state;
	char why[240];             /* refused or paused: why; else what is kept out, or "" */
	uint64_t evictable_bytes;  /* guest RAM the map allows to page out */
	uint64_t swapped_bytes;    /* evicted pages in host swap now: the RSS they freed */
	uint64_t pool_bytes;       /* their share of the compressed pools (zram, zswap) */
	uint64_t out_total_bytes;  /* sent to swap, cumulative */
	uint64_t refaults_total;   /* pages read back from swap for the guest, cumulative */
	uint64_t collapsed_total;  /* pages khugepaged read back into huge pages, cumulative */
	uint64_t job_reads_total;  /* evicted pages QEMU read back itself (migration, snapshot,
				    * memory dump), not counted as refaults, cumulative */
	uint64_t held_bytes;       /* chosen, but the kernel kept them (shared, KSM, pinned,
				    * locked): not asked again until a cold age has passed */
	double swapin_pages_per_s; /* refaults over the last interval */
	uint64_t free_bytes;       /* not evicted, yet holding nothing on the host: the guest's
				    * free memory (libvmm counts its next use as no reuse) */
	uint64_t last_out_bytes;   /* the last batch sent to swap */
	uint64_t last_out_ms;      /* how long it took (process_madvise and the checks) */
};

/* Host-side eviction through the VM's memory cgroup (act/memcg_hand.h): the kernel's reclaim
 * picks the pages, asking KVM which ones the guest used. */
struct mtd_vm_memcg {
	bool in_use;               /* the VM has a cgroup host-side reclaim can use */
	char cgroup[160];          /* its path under the cgroup2 root */
	char moved_from[96];       /* memtided moved QEMU here from this cgroup ("" : it did not) */
	char mechanism[16];        /* "mglru" (lru_gen '-') or "classic" (memory.reclaim) */
	char aging[12];            /* does the kernel's aging see the guest: "blind", "sees",
				    * "untested" (decide/aging_sight.h) */
	char estimate[48];         /* where the working set comes from */
	uint64_t current_bytes;    /* memory.current */
	uint64_t swap_bytes;       /* memory.swap.current */
	uint64_t young_bytes;      /* put in its generation within the cold age */
	uint64_t kept_total_bytes; /* eviction found the guest using them and kept them */
	bool refaults_exact;       /* refaults counted page by page (else major faults) */
	double stall_pct;          /* PSI some over the last interval, % of it */
	double stall_budget_pct;
	uint64_t stall_total_ms; /* PSI some since attach */
	double pool_saving_pct;  /* the compressed pool's saving on what eviction took (-1:
				    * not measured yet) */
	bool incompressible;     /* eviction held: the pool eats what it saves */
	char history[256];       /* the guest's access history: reset at attach, or why not
				  * (act/access_reset.h) */
};

struct mtd_action {
	uint64_t at_ms;
	char what[96]; /* "inflate 1024->896 MiB", "reclaim 64 MiB: freed 60 MiB", ... */
};

/*
 * Cumulative counts since the VM was attached: they only grow (Prometheus counters, the
 * `_total` families of /metrics; a re-attach starts them at 0, which rate() takes as a reset).
 */
struct mtd_vm_counters {
	uint64_t inflations, deflations;         /* balloon target moves down / up */
	uint64_t inflated_bytes, deflated_bytes; /* the sizes of those moves */
	uint64_t balloon_errors;                 /* balloon commands that failed */
	uint64_t reclaim_requests;               /* reclaim requests sent to the agent */
	uint64_t reclaim_requested_bytes;        /* what they asked for */
	uint64_t reclaimed_bytes;                /* what the guest said it freed */
	uint64_t refused_steps;                  /* steps the guest gave back at once */
	uint64_t refaults;                       /* 4 KiB pages of the refault signal */
};

/* One VM as the control loop last saw it.  Immutable once published. */
struct mtd_vm_status {
	char name[MTD_NAME_MAX];
	char uuid[37];
	enum mtd_vm_state state;
	struct mtd_policy policy;
	uint64_t updated_ms;

	uint64_t max_bytes;            /* domain's configured memory */
	uint64_t target_bytes;         /* memory the guest should keep: working set + headroom */
	bool soft;                     /* return=reclaim in force: the balloon is only a cap */
	uint64_t guest_used_bytes;     /* MemTotal - MemFree, from the agent (0: unknown) */
	uint64_t balloon_target_bytes; /* what we asked for */
	uint64_t balloon_actual_bytes; /* what the balloon reports */
	uint64_t host_rss_bytes;       /* guest RAM resident on the host, when known (0: unknown) */
	uint64_t resident_bytes;       /* guest memory the reclaim controller counts resident (in
					* libvmm's generations): its refault ratio is refaults per
					* second over this (0: unknown, before the first aging) */
	uint64_t saved_bytes;          /* max_bytes - balloon_actual_bytes, plus FPR returns,
					* minus the compressed pool's share of pageout */
	enum mtd_return_via return_in_force; /* how memory goes back now (policy resolved) */
	struct mtd_vm_pageout pageout;
	struct mtd_vm_memcg memcg;

	uint64_t working_set_bytes; /* at the cold age threshold: what the target is built on */
	uint64_t wss_age_ms[MTD_WSS_BINS];
	uint64_t wss_bytes[MTD_WSS_BINS];
	unsigned nr_gens;
	uint64_t gen_pages[MTD_MAX_GENS]; /* oldest first */
	uint64_t gen_age_ms[MTD_MAX_GENS];

	char wss_source[40];         /* where the working set comes from ("guest MGLRU", ...) */
	char decision[24];           /* the controller's reason this interval ("inflate", ...) */
	char decision_detail[200];   /* why it holds back, when a steady-guest rule does */
	double refault_rate_per_min; /* measured, fraction of resident pages per minute */
	uint64_t cold_age_ms;        /* reclaim controller output */
	uint64_t reuse_floor_ms;     /* the shortest threshold the guest's reuses allow */
	char reclaim_hold[24];       /* why the controller takes nothing by age ("" : it does;
				      * vmm_reclaim_hold_name) */
	char eviction[240];          /* what eviction by age does this round and why, one line
				      * (vmm_decision_explain; page-level sources) */
	double controller_output;
	uint64_t hold_left_ms;       /* no inflation for this much longer (0: none) */
	unsigned refused_steps;      /* steps the guest gave back at once, in a row */
	bool released;               /* memtidectl release in force (until resume) */
	uint64_t release_left_bytes; /* what the release has still to give back (0: done) */
	bool release_waiting;        /* the host has nothing to spare above its low mark now */
	bool resumed;                /* this memtided took over from a saved state file */

	bool agent_connected;
	char agent_transport[16];  /* "vsock", "virtio-serial", "" while not connected */
	uint64_t agent_rtt_p50_us; /* ping round trips (memtided -> agent -> memtided) */
	uint64_t agent_rtt_p99_us;
	unsigned agent_rtt_samples; /* the last pings the figures rest on (0: none) */
	uint64_t agent_rtt_count;   /* every ping answered since attach ... */
	uint64_t agent_rtt_sum_us;  /* ... and their round trips added up */
	bool agent_rtt_tracked;     /* the VM has an agent link, whose pings are counted */
	bool vsock;                 /* the VM has memtided's vhost-user-vsock device */
	uint32_t vsock_cid;      /* its CID on the kernel's vsock, memtided listening (0: none) */
	bool vsock_connected;    /* memtided's vhost-user session with QEMU is up */
	unsigned vsock_restarts; /* device restarts memtided asked QEMU for (QMP stop/cont) */
	/* Guest RAM as QEMU's vhost-user memory table gives it: guest-physical -> QEMU virtual
	 * address, the layout host-side eviction works on; checked against QMP and QEMU's maps
	 * (ram_layout_check: 1 they agree, 0 they do not, -1 not checked yet). */
	unsigned nr_ram_regions;
	struct mtd_vm_ram_region {
		uint64_t gpa, bytes, qemu_va;
	} ram_regions[MTD_RAM_REGIONS];
	int ram_layout_check;
	char ram_layout_detail[160];
	char agent_untrusted[200]; /* "" : the agent's figures fit its VM this session; else the
				    * first that did not (clamped: act/agent_bounds.h) */
	uint64_t agent_clamped;    /* its figures clamped to the VM since attach */
	bool agent_caps_known;     /* an agent said hello on this attach: agent_caps is its word */
	uint32_t agent_caps;       /* enum proto_cap bits of its hello (agent_caps.h explains) */
	bool fpr_on;               /* free page reporting enabled on the balloon */
	uint64_t guest_mem_available_bytes;
	double guest_psi_some_avg10;
	bool guest_psi_known; /* the agent reports PSI (guest_psi_some_avg10 is its word) */

	/* The hypervisor peer (QMP socket or libvirt) and the loop's own timing. */
	uint64_t peer_unresponsive_since_ms; /* a call timed out then (0: the peer answers) */
	char peer_call[40];                  /* the call that timed out first ("balloon read") */
	uint64_t tick_gap_ms;                /* between the last two scheduled ticks */
	uint64_t ticks_late;                 /* ticks that came over 1.5 intervals after the last */
	bool behind;                         /* 3 late ticks in a row, until 3 on time */
	bool detaching;                      /* detach asked; the loop is on its way out */

	struct mtd_vm_counters counters;
	bool observe; /* observe-only in force (host-wide or the policy's): nothing is done */
	uint64_t returned_bytes;  /* what memtide returned to the host: the balloon's hold, and
				   * with return=reclaim what the agent freed that is not resident */
	uint64_t untouched_bytes; /* guest RAM not resident that memtide did not return: never
				   * touched, or freed by the guest itself (0: unknown) */
	/* the access-bit source in use ("none" without one), a line about it, and why each
	 * other source was not taken (host/access/choose.c) */
	char source[16];
	char source_detail[160];
	unsigned nr_source_not_taken;
	struct {
		char name[8];
		char why[152];
	} source_not_taken[MTD_SOURCE_NOTES];

	unsigned nr_actions;
	struct mtd_action actions[MTD_LAST_ACTIONS]; /* newest last */
	char last_error[160];
};

struct mtd_daemon;

/*
 * Call fn for each VM's current snapshot.  Takes the RCU read lock itself; fn must not block
 * or keep the pointer after it returns.  The calling thread must be registered with RCU
 * (rcu_register_thread).  Returns the number of VMs visited.
 */
int mtd_daemon_foreach_vm(struct mtd_daemon *d,
			  void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg);

/* Copy one VM's snapshot into *out. Returns 0 or -ENOENT. */
int mtd_daemon_get_vm(struct mtd_daemon *d, const char *name, struct mtd_vm_status *out);

/* Start or stop managing a domain by name (libvirt mode). 0, -ENOENT, -EBUSY, -errno.
 * Detach is asynchronous and never waits on the VM: it asks the VM's loop to leave and
 * returns (0, -ENOENT, or -EALREADY when a detach is under way); the snapshot says
 * detaching=true until the loop has left, then the VM is gone from the registry.  The VM
 * is left at the size it has, and its state file stays (a later attach resumes from it). */
int mtd_daemon_attach(struct mtd_daemon *d, const char *name);
int mtd_daemon_detach(struct mtd_daemon *d, const char *name);

/*
 * Release (release true) or resume one VM, or every VM when name is NULL.  A released VM
 * climbs back to its ceiling at a host-safe pace ([host] release_rate, and never past the
 * host's low mark of MemAvailable) and is not inflated until resumed; both persist across
 * restarts.  fn (may be NULL) is called for each VM affected, with its status before the
 * change.  Returns the number of VMs affected, or -ENOENT / -EINVAL.
 */
int mtd_daemon_release(struct mtd_daemon *d, const char *name, bool release,
		       void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg);

/* Policy of one domain.  set validates every key and value (errmsg gets a sentence for the
 * user), and only when all of them hold, and the policy they make together does, stores it in
 * the domain's libvirt metadata and applies it: all or none.  0, -ENOENT, -EINVAL. */
struct mtd_kv {
	char key[MTD_NAME_MAX];
	char value[MTD_NAME_MAX];
};
int mtd_daemon_policy_get(struct mtd_daemon *d, const char *name, struct mtd_policy *out);
int mtd_daemon_policy_set_many(struct mtd_daemon *d, const char *name, const struct mtd_kv *kv,
			       size_t n, char *errmsg, size_t errlen);
int mtd_daemon_policy_set(struct mtd_daemon *d, const char *name, const char *key,
			  const char *value, char *errmsg, size_t errlen);

/* The libvirt hook's news (domain, operation, sub-operation as libvirt passes them). The
 * core acts on it asynchronously; this returns at once. */
int mtd_daemon_hook_event(struct mtd_daemon *d, const char *domain, const char *op,
			  const char *subop);

/* Host-wide figures for metrics and `memtidectl status`. */
struct mtd_host_status {
	uint64_t mem_total_bytes, mem_available_bytes;
	uint64_t low_mark_bytes, high_mark_bytes;
	uint64_t release_rate_bytes_per_s; /* [host] release_rate: a release's pace */
	bool under_pressure;
	uint64_t pressure_episodes; /* times the host went under its low mark (a counter) */
	unsigned nr_vms;
	uint64_t saved_bytes;  /* sum of the VMs' returned_bytes */
	bool observe_only;     /* [daemon] observe_only: no VM is changed */
	int libvirt_connected; /* 1 or 0; -1 in plain-QEMU mode (no libvirt) */
	uint64_t updated_ms;   /* CLOCK_MONOTONIC ms of the main loop's last host tick */
	uint64_t interval_ms;  /* that tick's period ([host] interval) */
	uint64_t swap_total_bytes, swap_free_bytes; /* host swap */
	uint64_t swap_pool_bytes;                   /* RAM of the compressed pools (zram, zswap) */
};
void mtd_daemon_host_status(struct mtd_daemon *d, struct mtd_host_status *out);

#endif /* MEMTIDE_MTD_H */
