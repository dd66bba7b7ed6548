// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemon.c - memtided's core object: lifecycle, the main thread's work queue, attach and
 * detach, and the mtd_daemon_* calls the front ends use (mtd.h).  The host's side (its
 * memory, arbitration, a release's pace) is host.c.
 *
 * The main thread owns every attach and detach (libvirt events and hook news arrive as
 * queued work; front-end calls take d->lock and do the work on their own thread).  A VM is
 * removed in three steps: its loop is asked to stop (the VM keeps the size it has; its state
 * file stays for the next attach, or goes when the domain stopped) and, when it has
 * finished, queues MTD_WORK_REAP; the main thread then joins it (at once: it has returned),
 * unlinks it from the registry, and frees it after an RCU grace period, so a front end that
 * found it a moment earlier still reads valid memory.  Nobody waits on a loop that is still
 * inside a QMP or libvirt call: a detach returns as soon as it is asked for, and the status
 * shows the VM as detaching meanwhile.  The one exception is the daemon's stop, which waits
 * for every loop together, up to STOP_WAIT_MS (calls are cut to 1 s once a loop is
 * stopping, qmp.c and bounded_call.c), and leaves a loop stuck past that behind rather than
 * hang the stop.
 *
 * Restarts: at attach, a VM's state file (state.c) from this boot is handed to its loop,
 * which resumes from it on its first tick; after listing the running domains, the files of
 * domains that no longer run are removed.
 */
#include "daemon/daemon.h"
#include "vsock/kvsock.h"
#include "vsock/vsock_service.h"

#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "act/libvirt_conn.h"
#include "act/qmp.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/notify.h"
#include "daemon/state.h"
#include "daemon/vm.h"

#define MiB             ((uint64_t)1 << 20)
#define MAX_QUEUED_WORK 4096 /* a flood of events is cut here (rescan recovers) */
#define RECONNECT_MS    5000
#define STOP_WAIT_MS    5000 /* the daemon's stop waits this long for every loop together */

/* Aging rounds that may run at once, per CPU.  The loops work at nice +10, a tenth of an
 * ordinary task's weight: nine of them weigh about one nice-0 task, so under contention the
 * rounds together take about what one ordinary process per CPU would.  One per CPU left
 * them a tenth of that beside two busy processes (daemon_scale: 0.15 cores, against 0.67
 * with no turns at all). */
#define TURNS_PER_CPU 9

/* The CPUs memtided may run on (its affinity: a unit's CPUAffinity= counts), at least 1. */
static unsigned usable_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static uint64_t vm_release_upto(void *ctx, uint64_t key, uint64_t now_ms, uint64_t actual_bytes,
				uint64_t target_bytes, uint64_t ceiling_bytes, bool *host_short)
{
	struct mtd_daemon *d = ctx;

	return mtd_host_release_upto(&d->host, &d->cfg, key, now_ms, actual_bytes, target_bytes,
				     ceiling_bytes, host_short);
}

static int vm_reap(void *ctx, const char *name, uint64_t serial)
{
	return mtd_daemon_queue_reap(ctx, name, serial);
}

int mtd_daemon_new(const struct mtd_config *cfg, struct mtd_daemon **out)
{
	struct mtd_daemon *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	memcpy(d->applied_keys, cfg->file_keys, sizeof(d->applied_keys));
	d->nr_applied_keys = cfg->nr_file_keys;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->work_lock, NULL);
	d->work_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->work_fd < 0 || mtd_registry_init(&d->registry) < 0 ||
	    mtd_turns_init(&d->turns, TURNS_PER_CPU * usable_cpus()) < 0 ||
	    mtd_turns_init(&d->reclaim_turns, 1) < 0) {
		mtd_daemon_free(d);
		return -ENOMEM;
	}
	mtd_host_init(&d->host, cfg->arb.release_rate_bytes_per_s);
	d->vm_host = (struct mtd_vm_host){
	    .cfg = &d->cfg,
	    .turns = &d->turns,
	    .reclaim_turns = &d->reclaim_turns,
	    .boot_id = d->boot_id,
	    .state_failing = &d->state_failing,
	    .swap = &d->host.swap,
	    .release_upto = vm_release_upto,
	    .reap = vm_reap,
	    .ctx = d,
	};
	/* Without a boot id a state file of another boot (other QEMU processes) could not be
	 * told from this one's: keep no state then. */
	if (d->cfg.state_dir[0] && mtd_state_boot_id(d->boot_id) < 0) {
		mtd_warn("cannot read this boot's id: VM state is not kept across restarts");
		d->cfg.state_dir[0] = '\0';
	}
	*out = d;
	return 0;
}

void mtd_daemon_free(struct mtd_daemon *d)
{
	if (!d)
		return;
	if (d->nr_abandoned) {
		/* A loop left inside a call still points at d: the process is ending, so the
		 * memory goes with it rather than from under that thread. */
		mtd_warn("%u VM loop(s) left behind at exit; not freeing the daemon's state",
			 d->nr_abandoned);
		return;
	}
	while (d->work_head) {
		struct mtd_work *w = d->work_head;
		d->work_head = w->next;
		free(w);
	}
	mtd_registry_destroy(&d->registry);
	if (d->work_fd >= 0)
		close(d->work_fd);
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_destroy(&d->work_lock);
	mtd_host_destroy(&d->host);
	mtd_turns_destroy(&d->turns);
	mtd_turns_destroy(&d->reclaim_turns);
	free(d);
}

/* ---- work queue ------------------------------------------------------------------------ */

int mtd_daemon_queue(struct mtd_daemon *d, enum mtd_work_kind kind, const char *name)
{
	struct mtd_work *w;
	size_t n = 0;

	pthread_mutex_lock(&d->work_lock);
	for (w = d->work_head; w; w = w->next)
		n++;
	pthread_mutex_unlock(&d->work_lock);
	if (n >= MAX_QUEUED_WORK)
		return -ENOSPC;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = kind;
	snprintf(w->name, sizeof(w->name), "%s", name);
	pthread_mutex_lock(&d->work_lock);
	if (d->work_tail)
		d->work_tail->next = w;
	else
		d->work_head = w;
	d->work_tail = w;
	pthread_mutex_unlock(&d->work_lock);
	uint64_t one = 1;
	if (write(d->work_fd, &one, sizeof(one)) < 0) {
		/* counter already set: the main thread wakes anyway */
	}
	return 0;
}

int mtd_daemon_queue_reap(struct mtd_daemon *d, const char *name, uint64_t serial)
{
	struct mtd_work *w = calloc(1, sizeof(*w));
	uint64_t one = 1;

	/* Never refused for a full queue: a finished loop must be reaped. */
	if (!w)
		return -ENOMEM;
	w->kind = MTD_WORK_REAP;
	w->serial = serial;
	snprintf(w->name, sizeof(w->name), "%s", name);
	pthread_mutex_lock(&d->work_lock);
	if (d->work_tail)
		d->work_tail->next = w;
	else
		d->work_head = w;
	d->work_tail = w;
	pthread_mutex_unlock(&d->work_lock);
	if (write(d->work_fd, &one, sizeof(one)) < 0) {
		/* counter already set: the main thread wakes anyway */
	}
	return 0;
}

static struct mtd_work *dequeue(struct mtd_daemon *d)
{
	pthread_mutex_lock(&d->work_lock);
	struct mtd_work *w = d->work_head;
	if (w) {
		d->work_head = w->next;
		if (!d->work_head)
			d->work_tail = NULL;
	}
	pthread_mutex_unlock(&d->work_lock);
	return w;
}

/* ---- attach / detach (d->lock held) ---------------------------------------------------- */

static void free_vm_rcu(struct rcu_head *h)
{
	mtd_vm_free(caa_container_of(h, struct mtd_vm, rcu));
}

/* Runtime policy kept in a state file (plain-QEMU mode): each key over pol, as `policy set`
 * would, kept in vm->policy_set; a value the policy now refuses is dropped and said. */
static void apply_policy_set(struct mtd_vm *vm, struct mtd_policy *pol,
			     char set[MTD_POLICY_NKEYS][MTD_POLICY_VALUE_MAX], const char *from)
{
	char err[200];

	for (int i = 0; i < MTD_POLICY_NKEYS; i++) {
		if (!set[i][0])
			continue;
		if (mtd_policy_set_kv(pol, mtd_policy_keys[i], set[i], err, sizeof(err)) < 0) {
			mtd_warn("%s: runtime policy %s=%s from %s dropped: %s", vm->name,
				 mtd_policy_keys[i], set[i], from, err);
			set[i][0] = '\0';
		}
	}
}

/* The VM's state file, when one from this boot and this domain is there: handed to the
 * loop (which checks it against the balloon on its first tick); in plain-QEMU mode its
 * runtime policy is applied over pol. */
static void load_saved(struct mtd_daemon *d, struct mtd_vm *vm, struct mtd_policy *pol)
{
	struct mtd_saved_vm *s;
	char err[400];
	int rc;

	if (!d->cfg.state_dir[0] || !(s = malloc(sizeof(*s))))
		return;
	rc = mtd_state_load(d->cfg.state_dir, vm->name, s, err, sizeof(err));
	if (rc < 0) {
		if (rc != -ENOENT)
			mtd_warn("%s: state file ignored: %s (the VM keeps its current size)",
				 vm->name, err);
		free(s);
		return;
	}
	if (strcmp(s->boot_id, d->boot_id) != 0) {
		mtd_info("%s: state file from an earlier boot ignored", vm->name);
		free(s);
		return;
	}
	if (vm->uuid[0] && s->uuid[0] && strcmp(vm->uuid, s->uuid) != 0) {
		mtd_notice("%s: state file of another domain of that name (uuid %s) ignored",
			   vm->name, s->uuid);
		free(s);
		return;
	}
	if (d->mode == MTD_MODE_QMP) {
		/* libvirt keeps a domain's policy in its metadata; plain QEMU has only this. */
		apply_policy_set(vm, pol, s->policy_set, "the state file");
		memcpy(vm->policy_set, s->policy_set, sizeof(vm->policy_set));
		vm->policy = vm->policy_new = vm->draft.policy = *pol;
	}
	vm->saved = s;
}

static int start_vm(struct mtd_daemon *d, struct mtd_vm *vm)
{
	int rc = mtd_registry_add(&d->registry, vm);

	if (rc < 0) {
		mtd_vm_free(vm);
		return -EBUSY;
	}
	rc = mtd_vm_loop_start(vm);
	if (rc < 0) {
		(void)mtd_registry_del(&d->registry, vm);
		call_rcu(&vm->rcu, free_vm_rcu);
		return rc;
	}
	return 0;
}

static int attach_libvirt(struct mtd_daemon *d, const char *name)
{
	struct mtd_domain_info info;
	struct _virDomain *dom = NULL;
	struct mtd_policy pol;
	struct mtd_vm *vm;
	char err[200];
	int rc;

	rcu_read_lock();
	bool known = mtd_registry_find(&d->registry, name) != NULL;
	rcu_read_unlock();
	if (known)
		return -EBUSY;
	if (fnmatch(d->cfg.domains, name, 0) != 0) {
		mtd_debug("%s: not attached: not in [daemon] domains = %s", name, d->cfg.domains);
		return -EPERM;
	}
	rc = mtd_libvirt_domain(d->lv, name, &dom, &info, err, sizeof(err));
	if (rc < 0) {
		mtd_info("%s: not attached: %s", name, err);
		return rc;
	}
	if (!info.has_balloon) {
		mtd_info("%s: not attached: the domain has no virtio memballoon", name);
		mtd_libvirt_domain_put(dom);
		return -ENODEV;
	}
	rc = mtd_policy_load_domain(dom, &d->cfg.defaults, &pol, err, sizeof(err));
	if (rc < 0) {
		/* A policy we cannot read must not turn into defaults that may inflate: watch
		 * the VM, keep it at its safe size, and say why. */
		mtd_err("%s: %s; the VM is watched but not ballooned until the policy is fixed "
			"(memtidectl policy set %s ...)",
			name, err, name);
		pol = d->cfg.defaults;
		pol.enabled = false;
	}
	rc = mtd_vm_new(&d->vm_host, name, info.uuid, &pol, &vm);
	if (rc < 0) {
		mtd_libvirt_domain_put(dom);
		return rc;
	}
	if (rc == 0 && !pol.enabled)
		snprintf(vm->draft.last_error, sizeof(vm->draft.last_error), "%.150s", err);
	load_saved(d, vm, &pol);
	vm->balloon.ops = &mtd_libvirt_balloon_ops;
	vm->balloon.ctx = mtd_libvirt_balloon_new(dom, d->cfg.stats_period_s,
						  (int)d->cfg.call_timeout_ms, &vm->stop);
	if (!vm->balloon.ctx) {
		mtd_libvirt_domain_put(dom);
		mtd_vm_free(vm);
		return -ENOMEM;
	}
	snprintf(vm->agent_path, sizeof(vm->agent_path), "%s", info.agent_path);
	vm->vsock_expected = info.has_vsock && d->vsock;
	/* the kernel's <vsock>: its CID is in the live XML (libvirt fills in an auto one) */
	vm->kvsock_expected = info.vsock_cid != 0;
	vm->kvsock_cid = info.vsock_cid;
	vm->agent_expected =
	    info.agent_path[0] != '\0' || vm->vsock_expected || (vm->kvsock_expected && d->kvsock);
	return start_vm(d, vm);
}

/* --agent vsock:PATH (the agent over memtided's vhost-user-vsock back end on PATH)? */
static bool is_vsock_agent(const char *agent_path)
{
	return !strncmp(agent_path, VSOCK_AGENT_PREFIX, strlen(VSOCK_AGENT_PREFIX));
}

static int attach_qmp_one(struct mtd_daemon *d, const char *name, const char *qmp_path,
			  const char *agent_path)
{
	struct mtd_vm *vm;
	struct mtd_policy pol = d->cfg.defaults;
	int rc = mtd_vm_new(&d->vm_host, name, NULL, &pol, &vm);

	if (rc < 0)
		return rc;
	load_saved(d, vm, &pol);
	vm->balloon.ops = &mtd_qmp_balloon_ops;
	vm->balloon.ctx = mtd_qmp_balloon_new(qmp_path, d->cfg.stats_period_s,
					      (int)d->cfg.call_timeout_ms, &vm->stop);
	if (!vm->balloon.ctx) {
		mtd_vm_free(vm);
		return -ENAMETOOLONG;
	}
	/* --agent vsock:PATH: the agent comes through the vsock service, no socket of its own */
	vm->vsock_expected = is_vsock_agent(agent_path);
	/* --agent vsock: the kernel's vsock, the CID from QEMU's command line at attach */
	vm->kvsock_expected = !strcmp(agent_path, MTD_KVSOCK_AGENT);
	if (!vm->vsock_expected && !vm->kvsock_expected)
		snprintf(vm->agent_path, sizeof(vm->agent_path), "%s", agent_path);
	vm->agent_expected = agent_path[0] != '\0';
	return start_vm(d, vm);
}

/* Plain-QEMU mode: the VM of each --qmp (each loop connects on its own). */
static int attach_qmp(struct mtd_daemon *d)
{
	int rc = attach_qmp_one(d, d->vm_name, d->qmp_path, d->agent_path);

	for (unsigned i = 0; rc == 0 && i < d->nr_more_qmp; i++)
		rc = attach_qmp_one(d, d->more_qmp[i].name, d->more_qmp[i].qmp_path,
				    d->more_qmp[i].agent_path);
	return rc;
}

/* The log line of a VM whose loop has ended (its thread joined; d->lock held). */
static void say_detached(struct mtd_vm *vm)
{
	rcu_read_lock();
	const struct mtd_vm_status *st = rcu_dereference(vm->status);
	uint64_t actual = st ? st->balloon_actual_bytes : 0;
	rcu_read_unlock();
	if (vm->forget || atomic_load(&vm->gone))
		mtd_notice("%s: detached: the domain stopped", vm->name);
	else
		mtd_notice("%s: detached, left at %" PRIu64 " MiB", vm->name, actual / MiB);
}

/* Ask a VM's loop to leave (it keeps the size it has; forget: the domain is gone, stopped,
 * crashed or migrated away, so its state file goes too); it queues MTD_WORK_REAP when it has.  Never waits.  0,
 * -ENOENT, or -EALREADY (a detach is already under way). */
static int detach_request(struct mtd_daemon *d, const char *name, bool forget)
{
	int rc = -ENOENT;

	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(&d->registry, name);
	if (vm && forget)
		atomic_store(&vm->gone, true);
	if (vm && atomic_load(&vm->detaching)) {
		rc = -EALREADY;
	} else if (vm) {
		vm->forget = forget; /* read by the loop after it sees stop (atomic, below) */
		mtd_vm_loop_request_stop(vm, true);
		mtd_info("%s: detach asked%s", name, forget ? " (the domain stopped)" : "");
		rc = 0;
	}
	rcu_read_unlock();
	if (rc == -ENOENT && forget && d->cfg.state_dir[0])
		(void)mtd_state_remove(d->cfg.state_dir, name);
	return rc;
}

/* The loop of a VM being detached has finished: join, unlink, free.  d->lock held. */
static void reap(struct mtd_daemon *d, const char *name, uint64_t serial)
{
	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(&d->registry, name);
	rcu_read_unlock();
	/* Still valid: only d->lock holders unlink and free, and we hold it. */
	if (!vm || vm->serial != serial)
		return; /* already reaped (a stop or a reconnect joined it) */
	if (mtd_vm_loop_join(vm, mtd_mono_ms() + STOP_WAIT_MS) < 0) {
		mtd_err("%s: its loop said it finished but did not end", name);
		return;
	}
	/* The domain stopped while an operator's or the hook's detach was already under way:
	 * its state goes as if the stop had come first (a later domain of that name starts
	 * afresh rather than being told of a stale file). */
	if (atomic_load(&vm->gone) && !vm->forget && d->cfg.state_dir[0])
		(void)mtd_state_remove(d->cfg.state_dir, vm->name);
	say_detached(vm);
	(void)mtd_registry_del(&d->registry, vm);
	call_rcu(&vm->rcu, free_vm_rcu);
	mtd_host_totals(&d->host, &d->registry);
}

/*
 * Stop every loop and wait for them together, up to STOP_WAIT_MS: they save their states in
 * parallel, and every call a stopping loop makes is cut to 1 s.  A loop still inside a call
 * after that is left behind (said in the log) and its VM stays registered, never freed.
 */
static void detach_all(struct mtd_daemon *d)
{
	struct mtd_vm *vms[512];
	size_t n, left = 0;
	uint64_t deadline = mtd_mono_ms() + STOP_WAIT_MS;

	n = mtd_registry_list(&d->registry, vms, 512);
	if (n > 512)
		n = 512;
	for (size_t i = 0; i < n; i++)
		mtd_vm_loop_request_stop(vms[i], false);
	for (size_t i = 0; i < n; i++) {
		if (mtd_vm_loop_join(vms[i], deadline) < 0) {
			mtd_err("%s: its loop is still inside a QMP or libvirt call after %d s; "
				"left behind",
				vms[i]->name, STOP_WAIT_MS / 1000);
			left++;
			continue;
		}
		say_detached(vms[i]);
		(void)mtd_registry_del(&d->registry, vms[i]);
		call_rcu(&vms[i]->rcu, free_vm_rcu);
	}
	d->nr_abandoned += (unsigned)left;
	mtd_host_totals(&d->host, &d->registry);
}

struct name_list {
	char **names;
	int n;
};

static bool running(void *arg, const char *name)
{
	const struct name_list *l = arg;

	for (int i = 0; i < l->n; i++)
		if (l->names[i] && strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

static void attach_running(struct mtd_daemon *d)
{
	char **names = NULL;
	int n = mtd_libvirt_running(d->lv, &names);

	if (n < 0) {
		mtd_err("cannot list running domains: %s", virGetLastErrorMessage());
		return;
	}
	for (int i = 0; i < n; i++)
		if (names[i])
			(void)attach_libvirt(d, names[i]);
	/* State of domains that stopped while memtided was away. */
	if (d->cfg.state_dir[0]) {
		struct name_list l = {names, n};
		(void)mtd_state_prune(d->cfg.state_dir, running, &l);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- lifecycle -------------------------------------------------------------------------- */

/* Plain-QEMU mode: the vsock endpoint of one VM whose agent path is vsock:PATH (others:
 * nothing to add).  0 or -errno, logged. */
static int add_vsock_endpoint(struct mtd_daemon *d, const char *name, const char *agent_path)
{
	int rc;

	if (!is_vsock_agent(agent_path))
		return 0;
	rc = mtd_vsock_add_endpoint(d->vsock, name, agent_path + strlen(VSOCK_AGENT_PREFIX));
	if (rc < 0)
		mtd_err("vsock: %s (%s): %s", agent_path, name, strerror(-rc));
	return rc;
}

/* The vhost-user-vsock back end: a watched directory in libvirt mode, the socket of each
 * --agent vsock:PATH in plain-QEMU mode.  0, or -errno when it was asked for and cannot
 * run (plain-QEMU mode); libvirt mode goes on without it and says why. */
static int start_vsock(struct mtd_daemon *d)
{
	struct mtd_vsock_config vc = {.guest_cid = d->cfg.vsock_cid, .port = d->cfg.vsock_port};
	bool plain = is_vsock_agent(d->agent_path);
	int rc;

	for (unsigned i = 0; i < d->nr_more_qmp; i++)
		plain = plain || is_vsock_agent(d->more_qmp[i].agent_path);
	if (d->mode == MTD_MODE_QMP && !plain)
		return 0;
	if (d->mode == MTD_MODE_LIBVIRT) {
		if (!strcmp(d->cfg.vsock_dir, "none"))
			return 0;
		snprintf(vc.dir, sizeof(vc.dir), "%s", d->cfg.vsock_dir);
	}
	rc = mtd_vsock_start(&vc, &d->vsock);
	if (rc < 0) {
		mtd_err("vsock: the vhost-user-vsock back end cannot start: %s%s", strerror(-rc),
			plain ? "" : " (VMs keep their virtio-serial agent channel)");
		return plain ? rc : 0;
	}
	d->vm_host.vsock = d->vsock;
	if (plain) {
		rc = add_vsock_endpoint(d, d->vm_name, d->agent_path);
		for (unsigned i = 0; rc == 0 && i < d->nr_more_qmp; i++)
			rc = add_vsock_endpoint(d, d->more_qmp[i].name, d->more_qmp[i].agent_path);
		if (rc < 0)
			return rc;
	}
	mtd_notice("vsock: serving vhost-user-vsock devices (%s), guest cid %llu, agent port %u",
		   plain ? "the --agent vsock: sockets" : vc.dir, (unsigned long long)vc.guest_cid,
		   vc.port);
	return 0;
}

/* The AF_VSOCK listener for the agents of VMs with the kernel's vsock device.  Wanted when
 * [daemon] kernel_vsock says yes, or a --agent vsock asks for it; by default (auto) when the
 * host can give its guests kernel vsock at all (/dev/vhost-vsock).  0, or -errno when it was
 * wanted by name and cannot run; auto goes on without it and says why. */
static int start_kvsock(struct mtd_daemon *d)
{
	bool asked = d->cfg.kernel_vsock == 1 || !strcmp(d->agent_path, MTD_KVSOCK_AGENT);
	int rc;

	for (unsigned i = 0; i < d->nr_more_qmp; i++)
		asked = asked || !strcmp(d->more_qmp[i].agent_path, MTD_KVSOCK_AGENT);
	if (asked && d->cfg.kernel_vsock == 0) {
		mtd_err("vsock: --agent vsock needs memtided to listen on AF_VSOCK, and [daemon] "
			"kernel_vsock = no");
		return -EINVAL;
	}
	if (!asked && (d->cfg.kernel_vsock == 0 || access(MTD_KVSOCK_DEV, F_OK) != 0))
		return 0;
	rc = mtd_kvsock_new(d->cfg.vsock_port, &d->kvsock);
	if (rc == 0)
		rc = mtd_kvsock_listen(d->kvsock);
	if (rc < 0) {
		mtd_log(asked ? MTD_LOG_ERR : MTD_LOG_WARNING,
			"vsock: cannot listen on AF_VSOCK port %u: %s%s", d->cfg.vsock_port,
			strerror(-rc),
			asked ? "" : " (agents on the kernel's vsock cannot reach memtided)");
		mtd_kvsock_free(d->kvsock);
		d->kvsock = NULL;
		return asked ? rc : 0;
	}
	d->vm_host.kvsock = d->kvsock;
	mtd_notice("vsock: listening on AF_VSOCK port %u for agents on the kernel's vsock "
		   "(each known by its VM's guest CID)",
		   d->cfg.vsock_port);
	return 0;
}

/* libvirt's news, on its event thread: work for the main thread, nothing more. */
static void on_libvirt_news(void *ctx, enum mtd_libvirt_news what, const char *name)
{
	struct mtd_daemon *d = ctx;

	switch (what) {
	case MTD_LV_STARTED:
		(void)mtd_daemon_queue(d, MTD_WORK_ATTACH, name);
		break;
	case MTD_LV_GONE:
		(void)mtd_daemon_queue(d, MTD_WORK_GONE, name);
		break;
	case MTD_LV_DEVICES:
		(void)mtd_daemon_queue(d, MTD_WORK_DETACH, name);
		(void)mtd_daemon_queue(d, MTD_WORK_ATTACH, name);
		break;
	case MTD_LV_POLICY:
		(void)mtd_daemon_queue(d, MTD_WORK_POLICY, name);
		break;
	case MTD_LV_LOST:
		(void)mtd_daemon_queue(d, MTD_WORK_RESCAN, "");
		break;
	}
}

int mtd_daemon_start(struct mtd_daemon *d)
{
	const struct mtd_libvirt_listener lv_listener = {.news = on_libvirt_news, .ctx = d};
	char err[256];
	int rc;

	if (d->cfg.state_dir[0] && mtd_state_dir_prepare(d->cfg.state_dir, err, sizeof(err)) < 0) {
		mtd_warn("%s: VM state will not survive a restart of memtided (sizes are left "
			 "alone all the same)",
			 err);
		atomic_store(&d->state_failing, true);
	}
	rc = start_vsock(d);
	if (rc == 0)
		rc = start_kvsock(d);
	if (rc < 0)
		return rc;
	if (d->mode == MTD_MODE_QMP) {
		pthread_mutex_lock(&d->lock);
		rc = attach_qmp(d);
		pthread_mutex_unlock(&d->lock);
		return rc;
	}
	rc = mtd_libvirt_open(&lv_listener, d->cfg.uri, &d->lv, err, sizeof(err));
	if (rc < 0) {
		mtd_err("%s (is libvirtd running? uri %s)", err, d->cfg.uri);
		return rc;
	}
	mtd_notice("connected to %s", d->cfg.uri);
	pthread_mutex_lock(&d->lock);
	attach_running(d);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

static void reconnect(struct mtd_daemon *d)
{
	const struct mtd_libvirt_listener lv_listener = {.news = on_libvirt_news, .ctx = d};
	char err[256];

	pthread_mutex_lock(&d->lock);
	mtd_warn("lost the libvirt connection: detaching every VM (sizes left as they are, "
		 "state kept), then reconnecting");
	detach_all(d);
	mtd_libvirt_close(d->lv);
	d->lv = NULL;
	if (mtd_libvirt_open(&lv_listener, d->cfg.uri, &d->lv, err, sizeof(err)) == 0) {
		mtd_notice("reconnected to %s", d->cfg.uri);
		attach_running(d);
	} else {
		mtd_warn("%s; retrying in %d s", err, RECONNECT_MS / 1000);
		(void)mtd_daemon_queue(d, MTD_WORK_RESCAN, "");
	}
	pthread_mutex_unlock(&d->lock);
}

/* The domain's memtide metadata changed (from us or anyone): apply what it says now. */
static void reload_policy(struct mtd_daemon *d, const char *name)
{
	struct _virDomain *dom = NULL;
	struct mtd_domain_info info;
	struct mtd_policy pol;
	char err[200];

	pthread_mutex_lock(&d->lock);
	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(&d->registry, name);
	rcu_read_unlock();
	if (vm && d->lv && mtd_libvirt_domain(d->lv, name, &dom, &info, err, sizeof(err)) == 0) {
		if (mtd_policy_load_domain(dom, &d->cfg.defaults, &pol, err, sizeof(err)) < 0) {
			mtd_err("%s: %s; the VM is kept at its safe size until the policy is fixed",
				name, err);
			pol = d->cfg.defaults;
			pol.enabled = false;
		}
		mtd_vm_set_policy(vm, &pol);
		mtd_libvirt_domain_put(dom);
	}
	pthread_mutex_unlock(&d->lock);
}

static void do_work(struct mtd_daemon *d, struct mtd_work *w)
{
	switch (w->kind) {
	case MTD_WORK_ATTACH:
		if (d->mode == MTD_MODE_LIBVIRT && d->lv) {
			pthread_mutex_lock(&d->lock);
			(void)attach_libvirt(d, w->name);
			pthread_mutex_unlock(&d->lock);
		}
		break;
	case MTD_WORK_DETACH:
	case MTD_WORK_GONE:
		(void)detach_request(d, w->name, w->kind == MTD_WORK_GONE);
		break;
	case MTD_WORK_REAP:
		pthread_mutex_lock(&d->lock);
		reap(d, w->name, w->serial);
		pthread_mutex_unlock(&d->lock);
		break;
	case MTD_WORK_POLICY:
		reload_policy(d, w->name);
		break;
	case MTD_WORK_RESCAN:
		if (d->mode == MTD_MODE_LIBVIRT && (!d->lv || mtd_libvirt_broken(d->lv)))
			reconnect(d);
		break;
	}
}

/* Plain-QEMU mode has no metadata: the policy is [defaults] with what `policy set`
 * changed at run time over it (the operator's kill switch enabled=false among them), so a
 * reload takes the new defaults and keeps those.  d->lock held. */
static void reload_runtime_policy(struct mtd_daemon *d, struct mtd_vm *vm)
{
	char set[MTD_POLICY_NKEYS][MTD_POLICY_VALUE_MAX];
	struct mtd_policy pol = d->cfg.defaults;

	pthread_mutex_lock(&vm->mbox_lock);
	memcpy(set, vm->policy_set, sizeof(set));
	pthread_mutex_unlock(&vm->mbox_lock);
	apply_policy_set(vm, &pol, set, "memtidectl policy set");
	pthread_mutex_lock(&vm->mbox_lock);
	memcpy(vm->policy_set, set, sizeof(set));
	pthread_mutex_unlock(&vm->mbox_lock);
	mtd_vm_set_policy(vm, &pol);
	for (int i = 0; i < MTD_POLICY_NKEYS; i++)
		if (set[i][0])
			mtd_info("%s: reload keeps the runtime policy %s=%s", vm->name,
				 mtd_policy_keys[i], set[i]);
}

/*
 * SIGHUP: re-read the config file's [defaults] and [host] sections and every domain's
 * policy (in plain-QEMU mode, [defaults] under what `policy set` changed).  Only what the
 * main thread owns changes here: the other sections ([daemon], [metrics], [controller],
 * [pageout], [sim] and [host] interval and meminfo) are read once, at start, and the log
 * names every one of those keys the file has changed since, as waiting for a restart.  A
 * file that no longer parses changes nothing.  systemd hears RELOADING=1 before and READY=1
 * after (with MONOTONIC_USEC, as systemd 253's Type=notify-reload wants; 252 ignores it).
 */
void mtd_daemon_reload(struct mtd_daemon *d)
{
	struct mtd_config *n = malloc(sizeof(*n));
	struct mtd_vm *vms[512];
	char err[300], live[600], restart[600];
	size_t nr;

	mtd_notify_reloading(d->config_path);
	if (!n) {
		mtd_notify_reloaded();
		return;
	}
	mtd_config_default(n);
	if (mtd_config_load(n, d->config_path, d->config_missing_ok, err, sizeof(err)) < 0) {
		mtd_err("reload: %s; keeping the settings in force", err);
		free(n);
		mtd_notify_reloaded();
		return;
	}
	char(*names)[MTD_NAME_MAX] = calloc(512, MTD_NAME_MAX);
	if (!names) {
		free(n);
		mtd_notify_reloaded();
		return;
	}
	mtd_config_changed(d->applied_keys, d->nr_applied_keys, n->file_keys, n->nr_file_keys, true,
			   live, sizeof(live));
	mtd_config_changed(d->cfg.file_keys, d->cfg.nr_file_keys, n->file_keys, n->nr_file_keys,
			   false, restart, sizeof(restart));
	memcpy(d->applied_keys, n->file_keys, sizeof(d->applied_keys));
	d->nr_applied_keys = n->nr_file_keys;
	pthread_mutex_lock(&d->lock);
	d->cfg.defaults = n->defaults;
	pthread_mutex_lock(&d->host.lock);
	d->cfg.arb = n->arb;
	d->host.status.release_rate_bytes_per_s = n->arb.release_rate_bytes_per_s;
	pthread_mutex_unlock(&d->host.lock);
	nr = mtd_registry_list(&d->registry, vms, 512);
	if (nr > 512)
		nr = 512;
	for (size_t i = 0; i < nr; i++) {
		memcpy(names[i], vms[i]->name, MTD_NAME_MAX);
		if (d->mode != MTD_MODE_LIBVIRT)
			reload_runtime_policy(d, vms[i]);
	}
	pthread_mutex_unlock(&d->lock);
	/* By name, each under the lock again: a VM detached meanwhile is simply not found. */
	if (d->mode == MTD_MODE_LIBVIRT)
		for (size_t i = 0; i < nr; i++)
			reload_policy(d, names[i]);
	free(names);
	mtd_notice("reloaded %s: %s%s; %zu VM policies re-read", d->config_path,
		   live[0] ? "applied " : "no setting a reload applies changed", live, nr);
	if (restart[0])
		mtd_warn("reload: %s changed since memtided started: read only at start, in force "
			 "at the next restart (systemctl restart memtided)",
			 restart);
	free(n);
	mtd_notify_reloaded();
}

/* Do every queued work item; a rescan at most every RECONNECT_MS. */
static void drain(struct mtd_daemon *d, uint64_t *next_rescan)
{
	struct mtd_work *w;

	while ((w = dequeue(d))) {
		if (w->kind == MTD_WORK_RESCAN && mtd_mono_ms() < *next_rescan) {
			/* too soon after the last attempt: try again at the next tick */
			free(w);
			(void)mtd_daemon_queue(d, MTD_WORK_RESCAN, "");
			break;
		}
		if (w->kind == MTD_WORK_RESCAN)
			*next_rescan = mtd_mono_ms() + RECONNECT_MS;
		do_work(d, w);
		free(w);
	}
}

void mtd_daemon_drain_work(struct mtd_daemon *d)
{
	uint64_t next_rescan = 0;

	drain(d, &next_rescan);
}

/* 1 or 0; -1 in plain-QEMU mode (no libvirt). */
static int libvirt_connected(const struct mtd_daemon *d)
{
	return d->mode == MTD_MODE_LIBVIRT ? (d->lv && !mtd_libvirt_broken(d->lv)) : -1;
}

int mtd_daemon_run(struct mtd_daemon *d, int signal_fd)
{
	uint64_t next_arb = 0, next_rescan = 0, next_ping = 0;

	rcu_register_thread();
	for (;;) {
		uint64_t now = mtd_mono_ms();
		if (now >= next_arb) {
			mtd_host_arbitrate(&d->host, &d->cfg, &d->registry, libvirt_connected(d));
			next_arb = now + d->cfg.arbiter_interval_ms;
		}
		/* The watchdog says this loop turns: a main thread stuck (on d->lock, in libvirt)
		 * for a whole WatchdogSec is restarted by systemd. */
		uint64_t wake = next_arb;
		if (d->watchdog_ms) {
			if (now >= next_ping) {
				mtd_notify_watchdog();
				next_ping = now + d->watchdog_ms / 2;
			}
			wake = next_ping < wake ? next_ping : wake;
		}
		struct pollfd p[2] = {{.fd = signal_fd, .events = POLLIN},
				      {.fd = d->work_fd, .events = POLLIN}};
		int timeout = (int)(wake > now ? wake - now : 0);
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
			    si.ssi_signo == SIGHUP) {
				mtd_daemon_reload(d);
			} else {
				mtd_notice("signal %u: stopping; every VM keeps the size it has",
					   si.ssi_signo);
				break;
			}
		}
		if (p[1].revents & POLLIN) {
			uint64_t v;
			if (read(d->work_fd, &v, sizeof(v)) < 0) {
				/* drained */
			}
		}
		drain(d, &next_rescan);
	}
	rcu_unregister_thread();
	return 0;
}

void mtd_daemon_stop(struct mtd_daemon *d)
{
	rcu_register_thread();
	atomic_store(&d->exiting, true);
	pthread_mutex_lock(&d->lock);
	detach_all(d);
	pthread_mutex_unlock(&d->lock);
	mtd_libvirt_close(d->lv);
	d->lv = NULL;
	/* After the VMs: their links are closed, the guests' connections get their resets. */
	mtd_vsock_stop(d->vsock);
	d->vsock = NULL;
	d->vm_host.vsock = NULL;
	mtd_kvsock_free(d->kvsock);
	d->kvsock = NULL;
	d->vm_host.kvsock = NULL;
	rcu_unregister_thread();
	/* Every VM was handed to call_rcu: wait for the frees before the registry goes. */
	rcu_barrier();
}

/* ---- mtd.h: front-end calls ----------------------------------------------------------- */

int mtd_daemon_attach(struct mtd_daemon *d, const char *name)
{
	int rc;

	if (!name || !*name || strlen(name) >= MTD_NAME_MAX)
		return -EINVAL;
	if (d->mode != MTD_MODE_LIBVIRT)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&d->lock);
	rc = d->lv ? attach_libvirt(d, name) : -EAGAIN;
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int mtd_daemon_detach(struct mtd_daemon *d, const char *name)
{
	int rc;

	if (!name || !*name || strlen(name) >= MTD_NAME_MAX)
		return -EINVAL;
	rc = detach_request(d, name, false); /* under RCU: needs no d->lock, waits on nothing */
	return rc;
}

int mtd_daemon_release(struct mtd_daemon *d, const char *name, bool release,
		       void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg)
{
	struct mtd_vm *vms[512];
	size_t n;
	int count = 0;

	if (name && (!*name || strlen(name) >= MTD_NAME_MAX))
		return -EINVAL;
	/* d->lock: no VM is detached and freed while it is asked. */
	pthread_mutex_lock(&d->lock);
	if (name) {
		rcu_read_lock();
		vms[0] = mtd_registry_find(&d->registry, name);
		rcu_read_unlock();
		n = vms[0] ? 1 : 0;
	} else {
		n = mtd_registry_list(&d->registry, vms, 512);
		n = n > 512 ? 512 : n;
	}
	for (size_t i = 0; i < n; i++) {
		rcu_read_lock();
		const struct mtd_vm_status *st = rcu_dereference(vms[i]->status);
		if (st && fn)
			fn(arg, st);
		rcu_read_unlock();
		mtd_vm_release(vms[i], release);
		count++;
	}
	pthread_mutex_unlock(&d->lock);
	if (name && !count)
		return -ENOENT;
	if (count)
		mtd_notice("%s %s on request from the control socket",
			   release ? "release" : "resume", name ? name : "of every VM");
	return count;
}

void mtd_daemon_host_status(struct mtd_daemon *d, struct mtd_host_status *out)
{
	mtd_host_status(&d->host, out);
}

int mtd_daemon_foreach_vm(struct mtd_daemon *d,
			  void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg)
{
	return mtd_registry_foreach_status(&d->registry, fn, arg);
}

int mtd_daemon_get_vm(struct mtd_daemon *d, const char *name, struct mtd_vm_status *out)
{
	return mtd_registry_get_status(&d->registry, name, out);
}

int mtd_daemon_policy_get(struct mtd_daemon *d, const char *name, struct mtd_policy *out)
{
	int rc = -ENOENT;

	if (!name)
		return -EINVAL;
	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(&d->registry, name);
	const struct mtd_vm_status *st = vm ? rcu_dereference(vm->status) : NULL;
	if (st) {
		/* The latest policy asked for is the one in force, whether or not the loop
		 * has taken it and published a snapshot with it yet. */
		pthread_mutex_lock(&vm->mbox_lock);
		*out = vm->policy_new;
		pthread_mutex_unlock(&vm->mbox_lock);
		rc = 0;
	}
	rcu_read_unlock();
	return rc;
}

int mtd_daemon_policy_set(struct mtd_daemon *d, const char *name, const char *key,
			  const char *value, char *errmsg, size_t errlen)
{
	struct mtd_kv kv;

	if (!key || !value || strlen(key) >= sizeof(kv.key) || strlen(value) >= sizeof(kv.value)) {
		snprintf(errmsg, errlen, "policy key and value are required");
		return -EINVAL;
	}
	snprintf(kv.key, sizeof(kv.key), "%s", key);
	snprintf(kv.value, sizeof(kv.value), "%s", value);
	return mtd_daemon_policy_set_many(d, name, &kv, 1, errmsg, errlen);
}

int mtd_daemon_policy_set_many(struct mtd_daemon *d, const char *name, const struct mtd_kv *kv,
			       size_t n, char *errmsg, size_t errlen)
{
	struct mtd_policy pol = d->cfg.defaults;
	struct _virDomain *dom = NULL;
	struct mtd_domain_info info;
	char said[400] = "";
	int rc;

	if (!name || !*name || strlen(name) >= MTD_NAME_MAX) {
		snprintf(errmsg, errlen, "a domain name is required");
		return -EINVAL;
	}
	if (n == 0) {
		snprintf(errmsg, errlen, "policy key and value are required");
		return -EINVAL;
	}
	pthread_mutex_lock(&d->lock);
	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(&d->registry, name);
	rcu_read_unlock();
	/* Start from the policy in force, including one set but not yet taken by the loop,
	 * so two sets in a row both stick.  (d->lock keeps vm registered meanwhile.) */
	if (vm)
		(void)mtd_daemon_policy_get(d, name, &pol);
	if (d->mode == MTD_MODE_LIBVIRT) {
		if (!d->lv) {
			snprintf(errmsg, errlen, "not connected to libvirt; try again shortly");
			rc = -EAGAIN;
			goto out;
		}
		rc = mtd_libvirt_domain(d->lv, name, &dom, &info, errmsg, errlen);
		if (rc < 0)
			goto out;
		/* Start from what the domain stores, so keys set elsewhere are kept. */
		char lerr[200];
		if (mtd_policy_load_domain(dom, &d->cfg.defaults, &pol, lerr, sizeof(lerr)) < 0)
			pol = d->cfg.defaults; /* the bad stored policy is replaced as a whole */
	} else if (!vm) {
		snprintf(errmsg, errlen, "no VM named '%.64s' is managed", name);
		rc = -ENOENT;
		goto out;
	}
	/* All or none: every key into a copy, then the policy they make together checked,
	 * before anything is stored or applied. */
	for (size_t i = 0; i < n; i++) {
		rc = mtd_policy_set_kv_one(&pol, kv[i].key, kv[i].value, errmsg, errlen);
		if (rc < 0)
			goto out;
		snprintf(said + strlen(said), sizeof(said) - strlen(said), "%s%s=%s", i ? " " : "",
			 kv[i].key, kv[i].value);
	}
	rc = mtd_policy_validate(&pol, errmsg, errlen);
	if (rc < 0)
		goto out;
	if (dom) {
		rc = mtd_policy_store_domain(dom, &pol, errmsg, errlen);
		if (rc < 0)
			goto out;
	}
	if (vm && d->mode != MTD_MODE_LIBVIRT) {
		/* Plain QEMU: nothing stores it but memtided; kept over [defaults] on SIGHUP
		 * and in the VM's state file across restarts. */
		pthread_mutex_lock(&vm->mbox_lock);
		for (size_t i = 0; i < n; i++) {
			int k = mtd_policy_key_index(kv[i].key);

			if (k >= 0 && mtd_policy_value_text(&pol, k, vm->policy_set[k],
							    sizeof(vm->policy_set[k])) < 0)
				vm->policy_set[k][0] = '\0';
		}
		pthread_mutex_unlock(&vm->mbox_lock);
	}
	if (vm)
		mtd_vm_set_policy(vm, &pol);
	mtd_notice("%s: policy %s", name, said);
out:
	mtd_libvirt_domain_put(dom);
	pthread_mutex_unlock(&d->lock);
	return rc;
}

int mtd_daemon_hook_event(struct mtd_daemon *d, const char *domain, const char *op,
			  const char *subop)
{
	if (!domain || !*domain || strlen(domain) >= MTD_NAME_MAX || !op)
		return -EINVAL;
	mtd_info("%s: libvirt hook: %s %s", domain, op, subop ? subop : "-");
	/* libvirt's hook runs "started begin", "reconnect begin", "stopped end", "release end". */
	if (!strcmp(op, "started") || !strcmp(op, "reconnect"))
		return mtd_daemon_queue(d, MTD_WORK_ATTACH, domain);
	if (!strcmp(op, "stopped") || !strcmp(op, "release"))
		return mtd_daemon_queue(d, MTD_WORK_GONE, domain);
	return 0;
}
