// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_loop.c - one VM's control loop, on a thread of its own.
 *
 * Why a thread per VM and not a timer wheel: libvirt's API is synchronous (one RPC per
 * call: virDomainSetMemoryFlags, virDomainMemoryStats) and a QMP socket can stall when QEMU
 * is busy; with one thread per VM a stalled call delays only its own VM, which is the
 * isolation the daemon promises.  A host runs tens to a few hundred VMs; each thread gets a
 * 256 KiB stack (its big buffers are on the heap), so a hundred VMs cost ~25 MiB of address
 * space and almost no resident memory.  Each loop sleeps in poll() on its wake eventfd and
 * its agent socket until its next tick, so the agent's "need" and the host's exit are acted
 * on at once, not at the next interval.
 *
 * One tick is the data flow of docs/design.md, in order ("Control loop"):
 *   Step 1  inputs: balloon actual and driver stats; the agent's stats, need, hints;
 *   Step 2  libvmm: the source ages the generations; the refault signal feeds the reclaim
 *           controller, which sets the cold age threshold; working set at that threshold;
 *   Step 3  target: working set + headroom within [floor, ceiling] (controller.c);
 *   Step 4  safety: asymmetric steps, pressure, need, silence (controller.c);
 *   Step 5  actuate: agent reclaim request, then the balloon target (policy `return`:
 *           the balloon follows the target, or stays a cap while reclaim and free page
 *           reporting return the memory); libvmm learns which pages left (eviction hand)
 *           or came back; with return=pageout or auto, the eviction hand's cold runs go
 *           to host swap (pageout_hand.h, Step 5b; its refault scan is Step 2a);
 *   Step 6  publish the status snapshot (RCU), and save what a restarted memtided needs
 *           to resume (state.c) when it changed.
 *
 * Letting go: the loop never moves the balloon when it stops (daemon exit, detach) and
 * never gives memory back only because it lost sight of the guest (agent silent, stats
 * stale, the hypervisor unreachable): controller.h says why.  A balloon command that fails
 * is not recorded as done: the current target is sent again each tick until the hypervisor
 * takes it, and again after the actuator reconnects to the same QEMU; a QEMU that was
 * restarted meanwhile (a new process behind the socket) is started over from its size.
 *
 * Peer health.  Every balloon call (QMP or libvirt) is bounded by [daemon] call_timeout
 * (qmp.c, bounded_call.c).  A call that times out marks the VM's peer unresponsive: one log
 * line, the status says since when and which call, and from then on the loop probes the peer
 * with one call at a time after 1, 2, 4 ... 30 s instead of every tick, carrying on with the
 * agent and its status meanwhile.  The first call that answers ends it (logged with its
 * duration).  Nothing is actuated while the peer is unresponsive: the VM stays as it is, and
 * the current target is sent once it answers again.
 *
 * Overload.  The loops run at nice +LOOP_NICE, so the control socket's thread and the main
 * thread (nice 0) win the CPU when the loops saturate it (measured in bench/daemon_scale.py:
 * 256 simulated VMs at 1 s with a CPU hog beside them).  A loop that cannot keep its interval
 * skips the ticks it missed rather than bursting, counts them (ticks_late), and says so once
 * when it falls behind and once when it is back.  The ticks stretch evenly across VMs
 * because the CPU part of each aging round waits its turn, first come first served
 * (turns.h): left to the scheduler alone, some VMs aged every few seconds and others not
 * for twenty.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "act/agent_link.h"
#include "vsock/vsock_service.h"
#include "access/choose.h"
#include "daemon/daemon.h"
#include "base/log.h"
#include "act/pageout_hand.h"
#include "daemon/state.h"
#include "daemon/vm.h"

#define MiB                 ((uint64_t)1 << 20)
#define LOOP_STACK_BYTES    (256 * 1024)
#define RELEASE_TICK_MS     1000 /* a release climbs once a second, whatever the interval */
#define BALLOON_ERROR_AFTER 3    /* failed actuations in a row before the VM shows ERROR */
#define EVICT_BATCH         64
#define LOOP_NICE           10    /* loops yield the CPU to the front ends and main thread */
#define PEER_PROBE_MAX_MS   30000 /* an unresponsive peer is probed at least this often */
#define BEHIND_AFTER        3     /* late ticks in a row before "falling behind" is said */

/*
 * Idle ages of the published working-set estimate: 2, 4 and 8 intervals and the oldest age
 * the generations resolve.  libvmm keeps VMM_MAX_NR_GENS generations, one per interval, and
 * folds the two oldest together under the younger one's birth, so beyond (nr_gens - 2)
 * intervals every resident page looks touched (measured: a 10% hot 512 MiB sim guest showed
 * 51 MiB at 10 s and 512 MiB at 30 s with 1 s intervals).  Fixed ages in seconds would mean
 * nothing at short intervals.
 */
static const unsigned wss_age_intervals[MTD_WSS_BINS] = {2, 4, 8, VMM_MAX_NR_GENS - 2};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t name_seed(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void set_error(struct mtd_vm *vm, const char *what, const char *detail)
{
	snprintf(vm->draft.last_error, sizeof(vm->draft.last_error), "%.40s%.110s", what, detail);
}

/* Sleep until deadline or a wake-up; returns true when the loop must stop. */
static bool wait_wake(struct mtd_vm *vm, int timeout_ms)
{
	struct pollfd p = {.fd = vm->wake_fd, .events = POLLIN};
	uint64_t v;

	if (poll(&p, 1, timeout_ms) > 0 && read(vm->wake_fd, &v, sizeof(v)) < 0) {
		/* drained by someone else: fine */
	}
	return atomic_load(&vm->stop);
}

/* ---- peer health ------------------------------------------------------------------------ */

/* A failure that means the peer does not answer (as opposed to refusing or being gone). */
static bool peer_silent(int rc)
{
	return rc == -ETIMEDOUT || rc == -EAGAIN || rc == -EBUSY;
}

/* May a balloon call be made now?  While the peer is unresponsive, one probe at a time. */
static bool peer_may_call(struct mtd_vm *vm, uint64_t now_ms)
{
	return !vm->peer_down_since_ms || now_ms >= vm->peer_next_probe_ms;
}

/* Record a balloon call's outcome: the start and the end of an unresponsive peer. */
static void peer_note(struct mtd_vm *vm, const char *call, uint64_t started_ms, int rc,
		      const char *err)
{
	uint64_t now = mono_ms();
	char why[120];

	if (peer_silent(rc) && (!err || !*err)) {
		if (rc == -ETIMEDOUT)
			snprintf(why, sizeof(why), "no answer within %" PRIu64 " ms",
				 vm->d->cfg.call_timeout_ms);
		else if (rc == -EAGAIN)
			snprintf(why, sizeof(why),
				 "QEMU does not accept connections (backlog full)");
		else
			snprintf(why, sizeof(why), "an earlier call has not returned");
		err = why;
	}
	if (peer_silent(rc)) {
		unsigned shift = vm->peer_probes < 5 ? vm->peer_probes : 5;
		uint64_t wait_ms = 1000ULL << shift;

		if (wait_ms > PEER_PROBE_MAX_MS)
			wait_ms = PEER_PROBE_MAX_MS;
		vm->peer_next_probe_ms = now + wait_ms;
		vm->peer_probes++;
		if (!vm->peer_down_since_ms) {
			vm->peer_down_since_ms = started_ms ? started_ms : now;
			snprintf(vm->draft.peer_call, sizeof(vm->draft.peer_call), "%s", call);
			mtd_warn(
			    "%s: %s unresponsive: %s: %s; the VM is left as it is, and the peer "
			    "probed again after 1, 2, 4 ... %d s",
			    vm->name, vm->balloon->name, call, err && *err ? err : strerror(-rc),
			    PEER_PROBE_MAX_MS / 1000);
		}
		snprintf(vm->draft.last_error, sizeof(vm->draft.last_error),
			 "%s unresponsive: %.40s: %.90s", vm->balloon->name, call,
			 err && *err ? err : strerror(-rc));
	} else if (vm->peer_down_since_ms && rc != -ECANCELED) {
		mtd_notice("%s: %s answers again after %" PRIu64 " s", vm->name, vm->balloon->name,
			   (now - vm->peer_down_since_ms) / 1000);
		vm->peer_down_since_ms = 0;
		vm->peer_probes = 0;
		vm->draft.peer_call[0] = '\0';
		vm->draft.last_error[0] = '\0';
	}
	vm->draft.peer_unresponsive_since_ms = vm->peer_down_since_ms;
}

/* ---- attach ----------------------------------------------------------------------------- */

/* Does the source report the guest's own accesses page by page (not amounts, not a
 * simulation)?  Host-side eviction needs that. */
static bool live_source(const struct mtd_vm *vm)
{
	return vm->source.ops && vm->source.ops->per_page && vm->d->cfg.source != MTD_SOURCE_SIM;
}

/* How memory goes back for this VM now: its policy's `return`, resolved for its agent and
 * source (pageout_hand.h). */
static enum mtd_return_via return_mode(const struct mtd_vm *vm)
{
	return mtd_return_resolve(vm->policy.return_via, vm->agent_expected, live_source(vm));
}

/* Host-side eviction's hand: it asks QEMU for the memory map the first time pageout is in
 * force. */
static int attach_pageout(struct mtd_vm *vm)
{
	struct mtd_hand_env env = {
	    .vm_name = vm->name,
	    .qmp = vm->balloon->qmp,
	    .qmp_ctx = vm->balloon_ctx,
	    .live_source = live_source(vm),
	    .source_name = vm->source.ops ? vm->source.ops->name : "none",
	};
	int pid;

	if (vm->balloon->qemu_pid && vm->balloon->qemu_pid(vm->balloon_ctx, &pid) == 0)
		env.qemu_pid = pid;
	return mtd_hand_new(&vm->d->cfg.pageout, &env, &vm->hand);
}

/* Which QEMU process is behind the actuator now: "PID:STARTTIME", "" when it cannot tell. */
static void read_instance(struct mtd_vm *vm, char *out, size_t len)
{
	int pid;

	out[0] = '\0';
	if (vm->balloon->qemu_pid && vm->balloon->qemu_pid(vm->balloon_ctx, &pid) == 0 &&
	    mtd_state_process_instance(pid, out, len) < 0)
		out[0] = '\0';
}

/* The access-bit source, chosen per VM by its policy (host/access/choose.c). */
static int choose_source(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	int pid = 0;

	mtd_access_env_default(&env);
	if (vm->balloon->qemu_pid && vm->balloon->qemu_pid(vm->balloon_ctx, &pid) < 0)
		pid = 0;
	env.vm_name = vm->name;
	env.guest_bytes = vm->domain_bytes;
	env.qemu_pid = pid;
	env.agent = vm->agent;
	env.interval_ms = cfg->ctl.interval_ms;
	env.agent_silence_ms = cfg->ctl.agent_silence_ms;
	env.pref = vm->policy.source;
	env.ept_window_ms = vm->policy.ept_window_ms;
	env.ept_dir = cfg->ept_dir;
	env.run_dir = cfg->run_dir;
	env.young_dump_dir = cfg->young_dump_dir;
	int rc = mtd_access_choose(&env, &vm->source, &ch);
	if (rc < 0)
		return rc;
	mtd_access_choice_to_status(&ch, &vm->draft);
	for (unsigned i = 0; i < ch.nr_notes; i++)
		mtd_info("%s: source %s not used: %s", vm->name, ch.notes[i].name, ch.notes[i].why);
	return 0;
}

static int attach(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	char err[200];
	unsigned delay_ms = 500;
	int rc;

	/* The hypervisor side first: without a balloon there is nothing to steer. */
	for (;;) {
		uint64_t t0 = mono_ms();
		err[0] = '\0';
		rc = vm->balloon->open(vm->balloon_ctx, &vm->domain_bytes, err, sizeof(err));
		peer_note(vm, "open", t0, rc, err);
		if (rc == 0)
			break;
		set_error(vm, "", err);
		vm->draft.state = MTD_VM_ERROR;
		(void)mtd_vm_publish(vm);
		/* Once at WARNING; the retries (with backoff up to 30 s) at DEBUG. */
		mtd_log(delay_ms == 500 ? MTD_LOG_WARNING : MTD_LOG_DEBUG,
			"%s: cannot open the balloon: %s (retrying)", vm->name, err);
		if (wait_wake(vm, (int)delay_ms))
			return -ECANCELED;
		delay_ms = delay_ms < 16000 ? delay_ms * 2 : 30000;
	}
	vm->draft.last_error[0] = '\0';
	vm->draft.max_bytes = vm->domain_bytes;
	read_instance(vm, vm->instance, sizeof(vm->instance));
	if (vm->balloon->connects)
		vm->connects_seen = vm->balloon->connects(vm->balloon_ctx);

	/* The agent's channel: virtio-serial (a socket to connect to), vsock (streams from the
	 * vsock service), or both (the agent picks: vsock when its guest has one). */
	if (vm->vsock_expected && vm->d->vsock) {
		rc = mtd_vsock_claim(vm->d->vsock, vm->name, vm->wake_fd, &vm->vsock);
		if (rc < 0)
			return rc;
		vm->draft.ram_layout_check = -1;
	}
	if (vm->agent_path[0] || vm->vsock) {
		char label[MTD_NAME_MAX + 8];

		rc = mtd_agent_link_new(vm->agent_path, cfg->ctl.interval_ms, &vm->agent);
		if (rc < 0)
			return rc;
		snprintf(label, sizeof(label), "vsock:%s", vm->name);
		if (vm->vsock)
			mtd_agent_link_set_fd_source(vm->agent, mtd_vsock_take_fd, vm->vsock,
						     label);
		mtd_agent_link_set_ping(vm->agent, cfg->agent_ping_ms);
	}
	if (cfg->source == MTD_SOURCE_SIM) {
		rc = mtd_source_sim_new(vm->domain_bytes, cfg->sim_hot_percent, name_seed(vm->name),
					&vm->source);
		snprintf(vm->draft.source, sizeof(vm->draft.source), "sim");
	} else {
		rc = choose_source(vm); /* none at all: watched and kept safe, never inflated */
	}
	if (rc < 0)
		return rc;
	if (vm->source.ops) {
		struct vmm_guest_config gc;
		vmm_guest_config_default(&gc);
		gc.ram = vm->source.ram;
		gc.nr_ram = vm->source.nr_ram;
		gc.nr_gens = VMM_MAX_NR_GENS;
		/* The agent's amounts: what lies beyond them is what the guest says it does not
		 * use, not pages libvmm has yet to watch (source_agent.c). */
		gc.unseen_is_unused = !vm->source.ops->per_page;
		rc = vmm_guest_new(&gc, &vm->guest);
		if (rc < 0)
			return rc;
	}
	struct vmm_reclaim_config rcfg;
	vmm_reclaim_config_default(&rcfg);
	rcfg.target_refault_per_min = vm->policy.target_refault_per_min;
	/* The threshold must be resolvable by the generations kept: nr_gens - 2 intervals. */
	vmm_reclaim_config_fit(&rcfg, VMM_MAX_NR_GENS, cfg->ctl.interval_ms);
	/* The reuse floor needs page-level truth: the agent's amounts, laid over the first
	 * pages of RAM, would read as reuses every time the guest's use grows back. */
	if (!vm->source.ops || !vm->source.ops->per_page)
		rcfg.reuse_tau_ms = 0;
	rc = vmm_reclaim_init(&vm->reclaim, &rcfg);
	if (rc < 0)
		return rc;
	vm->cold_age_ms = vm->reclaim.age_ms;
	rc = attach_pageout(vm);
	if (rc < 0)
		return rc;

	/* Free page reporting returns what the agent's reclaim frees: without it the guest
	 * keeps those pages, so say so once, loudly. */
	bool on = false;
	uint64_t t0 = mono_ms();
	rc = vm->balloon->fpr(vm->balloon_ctx, &on);
	peer_note(vm, "free-page-reporting query", t0, rc, NULL);
	vm->fpr_known = rc == 0;
	vm->fpr_on = on;
	if (rc == 0 && !on)
		mtd_warn("%s: free page reporting is off on the balloon: memory the guest frees "
			 "stays with it (memtidectl domxml-patch %s adds freePageReporting='on')",
			 vm->name, vm->name);
	else if (rc < 0)
		mtd_info("%s: cannot tell whether free page reporting is on (%s)", vm->name,
			 strerror(-rc));
	mtd_notice(
	    "%s: attached: %" PRIu64 " MiB, balloon via %s, source %s, agent %s; policy "
	    "%s min %" PRIu64 " MiB max %" PRIu64 " MiB priority %u headroom %" PRIu64 " MiB",
	    vm->name, vm->domain_bytes / MiB, vm->balloon->name,
	    vm->source.ops ? vm->source.ops->name : "none",
	    vm->agent_path[0] ? vm->agent_path
	    : vm->vsock       ? "vsock"
			      : "none",
	    vm->policy.enabled ? "enabled" : "disabled", vm->policy.min_bytes / MiB,
	    vm->policy.max_bytes / MiB, vm->policy.priority, vm->policy.headroom_bytes / MiB);
	return 0;
}

/*
 * The guest RAM's resident size on the host: Rss of QEMU's largest mapping of at least the
 * guest's size in /proc/PID/smaps (QEMU's own VmRSS carries ~100 MiB of TCG buffers and
 * device state; /work/shared/README.md).  Reading smaps makes the kernel walk the process's
 * page tables (~1 ms per GiB mapped), so it is read at most every RSS_EVERY_MS.
 */
#define RSS_EVERY_MS 10000
static int guest_rss(int pid, uint64_t guest_bytes, uint64_t *rss_bytes)
{
	char path[64], line[256];
	unsigned long long size_kib = 0, best_kib = 0, best_rss = 0;
	bool candidate = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Size:", 5) == 0) {
			size_kib = strtoull(line + 5, NULL, 10);
			candidate = size_kib * 1024 >= guest_bytes && size_kib > best_kib;
		} else if (candidate && strncmp(line, "Rss:", 4) == 0) {
			best_rss = strtoull(line + 4, NULL, 10);
			best_kib = size_kib;
			candidate = false;
		}
	}
	fclose(f);
	if (!best_kib)
		return -ENOENT;
	*rss_bytes = (uint64_t)best_rss * 1024;
	return 0;
}

static void read_rss(struct mtd_vm *vm, uint64_t now_ms)
{
	int pid;

	if (now_ms < vm->rss_next_ms || !vm->balloon->qemu_pid)
		return;
	vm->rss_next_ms = now_ms + RSS_EVERY_MS;
	if (vm->balloon->qemu_pid(vm->balloon_ctx, &pid) < 0 ||
	    guest_rss(pid, vm->domain_bytes, &vm->draft.host_rss_bytes) < 0)
		vm->draft.host_rss_bytes = 0; /* unknown */
}

/* ---- one tick --------------------------------------------------------------------------- */

struct tick {
	uint64_t now_ms, dt_ms;
	const struct proto_stats *as; /* agent stats, when the agent is fresh */
	bool agent_fresh;
	bool bstats_fresh;    /* the balloon's stats moved within agent_silence */
	bool guest_took_back; /* actual rose above the target set, by the guest's doing */
	uint64_t need_bytes;
	struct vmm_guest_stats gs;
	bool have_gs;
	bool wss_valid;
	uint64_t wss_bytes;
};

/* The RAM the guest's kernel holds outside MemTotal: its memmap (64 bytes a 4 KiB page), its
 * image, a crash kernel; 63 MiB of scenario 5's 1 GiB Debian guest.  The balloon sizes RAM,
 * the working set and the headroom are in MemTotal's terms, so under return=balloon the
 * target adds it (controller.c, step 8).  It is the balloon's actual size less the agent's
 * MemTotal (net of the balloon: agent_balloon.c), which move together but are read at
 * different moments: only a report that came while the balloon had stood still for two
 * intervals is read (reports come every interval), and mtd_ctl_reserved_note keeps the
 * least reading (the figure does not change while the guest runs; a guest's figures are
 * untrusted, and too high a reading would only give the guest more, within its ceiling). */
static void note_reserved(struct mtd_vm *vm, const struct proto_stats *as, uint64_t now_ms)
{
	uint64_t interval = vm->d->cfg.ctl.interval_ms;

	if (!vm->actual_since_ms || now_ms - vm->actual_since_ms < 2 * interval)
		return;
	uint64_t r = mtd_ctl_reserved_note(vm->reserved_bytes, vm->balloon_actual,
					   as->mem_total_bytes, vm->domain_bytes);
	if (r && !vm->reserved_bytes)
		mtd_info("%s: the guest's kernel holds %" PRIu64
			 " MiB of its RAM outside MemTotal; the balloon's target leaves room for "
			 "it under return=balloon",
			 vm->name, r / MiB);
	vm->reserved_bytes = r;
}

/* The guest's answer to the last reclaim request, once, as an action: what it freed is the
 * other half of an inflate an operator reads in `memtidectl vm show`. */
static void note_reclaim_reply(struct mtd_vm *vm, uint64_t now_ms)
{
	uint64_t seq;
	const struct proto_reclaim_reply *r = mtd_agent_link_reclaim_reply(vm->agent, &seq);

	if (!r || seq == vm->reclaim_seen)
		return;
	vm->reclaim_seen = seq;
	mtd_steady_reply(&vm->steady, &vm->d->cfg.ctl, r->requested_bytes, r->freed_bytes,
			 proto_reclaim_result_name(r->result));
	vm->draft.counters.reclaimed_bytes += r->freed_bytes;
	mtd_steady_reclaim_answered(&vm->steady, now_ms, vm->d->cfg.ctl.interval_ms);
	mtd_vm_audit(vm, now_ms, "reclaimed", r->requested_bytes, r->freed_bytes,
		     proto_reclaim_result_name(r->result), "guest", false);
	/* the message passed proto's validation: no control characters */
	mtd_debug("%s: reclaim took %u ms in the guest%s%s", vm->name, r->elapsed_ms,
		  r->message[0] ? ": " : "", r->message);
}

/* The actuator connected again (QEMU's QMP socket came back).  The same QEMU keeps the
 * balloon target it had, but a command may have been lost on the way: send the current one
 * again.  A new QEMU process is a new guest at its full size: start over from it. */
static void on_reconnect(struct mtd_vm *vm)
{
	char now[sizeof(vm->instance)];
	char err[200];

	read_instance(vm, now, sizeof(now));
	if (now[0] && vm->instance[0] && strcmp(now, vm->instance) != 0) {
		uint64_t domain = vm->domain_bytes;
		if (vm->balloon->open(vm->balloon_ctx, &domain, err, sizeof(err)) == 0)
			vm->domain_bytes = domain;
		memset(&vm->ctl, 0, sizeof(vm->ctl));
		vm->applied_valid = vm->apply_pending = false;
		vm->nr_evicted = 0;
		vm->rounds = 0; /* the estimate was the old guest's: two rounds before a new one */
		vm->reserved_bytes = 0; /* and its kernel's share of RAM */
		mtd_notice("%s: QEMU was restarted (process %s, was %s): starting over from its "
			   "current size, %" PRIu64 " MiB",
			   vm->name, now, vm->instance, vm->balloon_actual / MiB);
	} else if (vm->applied_valid &&
		   vm->balloon_actual > vm->applied_bytes + vm->d->cfg.ctl.min_change_bytes) {
		/* More than memtided set: the guest deflated the balloon itself meanwhile
		 * (deflate-on-oom), or a new QEMU is behind a proxy that hides its pid.  Either
		 * way the old target is not sent to it: the size it has now is the start. */
		mtd_notice("%s: reconnected to QEMU: the balloon holds %" PRIu64 " MiB, more than "
			   "the %" PRIu64 " MiB set: starting from its size",
			   vm->name, vm->balloon_actual / MiB, vm->applied_bytes / MiB);
		vm->ctl.target_bytes = vm->ctl.balloon_bytes = vm->balloon_actual;
		vm->applied_valid = vm->apply_pending = false;
		vm->rounds = 0;
	} else if (vm->applied_valid) {
		vm->apply_pending = true;
		mtd_notice("%s: reconnected to QEMU: sending the balloon target %" PRIu64
			   " MiB again",
			   vm->name, vm->ctl.balloon_bytes / MiB);
	}
	memcpy(vm->instance, now, sizeof(now));
}

/* The guest's major faults per second from the balloon's stats, over the last period. */
static void note_faults(struct mtd_vm *vm, const struct mtd_balloon_stats *bs, uint64_t now_ms)
{
	if (vm->majflt_seen_ms && now_ms > vm->majflt_seen_ms &&
	    bs->major_faults >= vm->majflt_seen) {
		vm->majflt_per_s = (double)(bs->major_faults - vm->majflt_seen) * 1000.0 /
				   (double)(now_ms - vm->majflt_seen_ms);
		vm->majflt_known = true;
	} else {
		vm->majflt_known = false; /* the first sample, or the counter restarted */
	}
	vm->majflt_seen = bs->major_faults;
	vm->majflt_seen_ms = now_ms;
}

/* Step 1: inputs. */
static void read_inputs(struct mtd_vm *vm, struct tick *t)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	struct mtd_balloon_stats bs;
	uint64_t actual = 0, seq;
	int rc = -EAGAIN;

	if (peer_may_call(vm, t->now_ms)) {
		rc = vm->balloon->read(vm->balloon_ctx, &actual, &bs);
		peer_note(vm, "balloon read", t->now_ms, rc, NULL);
	}
	if (rc == 0) {
		if (vm->read_failing)
			mtd_notice("%s: the balloon answers again (actual %" PRIu64 " MiB)",
				   vm->name, actual / MiB);
		uint64_t before = vm->balloon_actual;
		vm->read_failing = false;
		vm->balloon_actual = actual;
		if (actual != before || !vm->actual_since_ms)
			vm->actual_since_ms = t->now_ms;
		vm->bstats = bs;
		if (bs.valid && bs.last_update_s != vm->bstats_seen_update_s) {
			vm->bstats_seen_update_s = bs.last_update_s;
			vm->bstats_seen_ms = t->now_ms;
			note_faults(vm, &bs, t->now_ms);
		}
		bool reconnected = false;
		if (vm->balloon->connects) {
			unsigned c = vm->balloon->connects(vm->balloon_ctx);
			reconnected = vm->connects_seen && c != vm->connects_seen;
			if (reconnected)
				on_reconnect(vm);
			vm->connects_seen = c;
		}
		/* Deflate-on-oom: the guest took pages back from the balloon (actual rose, above
		 * the target memtided set).  An inflation in flight only ever lowers actual. */
		uint64_t slack = cfg->ctl.min_change_bytes;
		if (!reconnected && vm->applied_valid && actual > vm->applied_bytes + slack &&
		    actual > before + slack) {
			t->guest_took_back = true;
			mtd_notice("%s: the guest took %" PRIu64
				   " MiB back from the balloon itself "
				   "(deflate-on-oom): it keeps them",
				   vm->name, (actual - vm->applied_bytes) / MiB);
		}
	} else if (!vm->peer_down_since_ms) { /* an unresponsive peer is told by peer_note */
		if (!vm->read_failing)
			mtd_warn("%s: cannot reach the balloon (%s): its size is left as it is; "
				 "trying again each tick",
				 vm->name, strerror(-rc));
		vm->read_failing = true;
		vm->bstats.valid = false;
	}
	t->bstats_fresh = vm->bstats.valid && vm->bstats_seen_ms &&
			  t->now_ms - vm->bstats_seen_ms <= cfg->ctl.agent_silence_ms;
	read_rss(vm, t->now_ms);
	if (vm->agent) {
		mtd_agent_link_service(vm->agent, t->now_ms);
		uint64_t heard = mtd_agent_link_last_heard(vm->agent);
		/* An agent reclaiming for us is busy, not silent: its loop reports nothing while
		 * the kernel reclaims (under TCG into zram one request took over 30 s).  Busy for
		 * the request's deadline and agent_silence after it, no longer: an agent killed
		 * just after a request used to count as busy for 2 x agent_silence, and by then
		 * the guest's pressure, seen through the balloon, spoke first, so the silence was
		 * never said (scenario 5, once in CI).  A false "silent" only holds inflation. */
		t->agent_fresh =
		    mtd_agent_link_ready(vm->agent) && heard &&
		    (t->now_ms - heard <= cfg->ctl.agent_silence_ms ||
		     mtd_agent_link_reclaiming(vm->agent, t->now_ms, cfg->ctl.agent_silence_ms));
		const struct proto_stats *as = mtd_agent_link_stats(vm->agent, &seq);
		t->as = t->agent_fresh ? as : NULL;
		if (as && seq != vm->avail_seq) {
			vm->avail_seq = seq;
			vm->avail_balloon = vm->balloon_actual;
			if (t->agent_fresh)
				note_reserved(vm, as, t->now_ms);
		}
		t->need_bytes = mtd_agent_link_take_need(vm->agent);
		note_reclaim_reply(vm, t->now_ms);
	}
}

/* Step 2: libvmm ages the generations; the reclaim controller sets the cold age. */
static void run_libvmm(struct mtd_vm *vm, struct tick *t)
{
	uint64_t guest_refaults = 0, majfault = 0;
	bool have_guest = false;

	if (!vm->guest)
		return;
	/* The round's CPU work waits its turn behind the other VMs' (turns.h): an overloaded
	 * host stretches every VM's interval alike.  No call to QEMU or libvirt inside. */
	bool turn = mtd_turns_take(&vm->d->turns);
	/* Step 2a: pages read back from host swap are refaults, before the source ages. */
	mtd_hand_feedback(vm->hand, vm->guest, t->now_ms);
	mtd_hand_mark_free(vm->hand, vm->guest);
	int rc = vm->source.ops->age(vm->source.ctx, vm->guest, t->now_ms);
	mtd_turns_give(&vm->d->turns, turn);
	if (rc == 0)
		vm->rounds++;
	else if (rc != -EAGAIN)
		mtd_debug("%s: source %s: %s", vm->name, vm->source.ops->name, strerror(-rc));
	vmm_guest_get_stats(vm->guest, &t->gs);
	t->have_gs = true;

	/* The refault signal, in 4 KiB pages over dt: pages libvmm saw come back after the
	 * balloon took them, plus the guest's own.  The guest's workingset_refault and
	 * pgmajfault mostly count the same events (a refaulting page is read back: a major
	 * fault), so the larger delta is taken, not the sum. */
	if (t->as) {
		guest_refaults = t->as->refault_anon + t->as->refault_file;
		majfault = t->as->pgmajfault;
		have_guest = true;
	} else if (vm->bstats.valid) {
		majfault = vm->bstats.major_faults;
		have_guest = true;
	}
	uint64_t signal = t->gs.refaults_total - vm->last_refaults;
	vm->last_refaults = t->gs.refaults_total;
	if (have_guest) {
		if (vm->have_fault_base) {
			uint64_t dr = guest_refaults >= vm->last_guest_refaults
					  ? guest_refaults - vm->last_guest_refaults
					  : 0; /* counters restart with a guest reboot */
			uint64_t dm =
			    majfault >= vm->last_majfault ? majfault - vm->last_majfault : 0;
			signal += dr > dm ? dr : dm;
		}
		vm->last_guest_refaults = guest_refaults;
		vm->last_majfault = majfault;
		vm->have_fault_base = true;
	}
	vm->draft.counters.refaults += signal; /* before PSI weighs it: pages, not a score */
	/* Memory stalls weigh the signal up: at PSI some avg10 = 10%, refaults count double. */
	if (t->as && t->as->has_psi)
		signal = (uint64_t)((double)signal * (1.0 + t->as->psi.some_avg10 / 10.0));

	/* Host arbitration: a squeezed VM tolerates up to 4x its refault target. */
	double squeeze = atomic_load(&vm->squeeze_permille) / 1000.0;
	vm->reclaim.cfg.target_refault_per_min =
	    vm->policy.target_refault_per_min * (1.0 + 3.0 * squeeze);
	/* The decision (vmm_decide, the same call memtide-sim's memtide makes): the reuses the
	 * aging hand saw keep the threshold above the ages the guest still comes back to
	 * (vmm/reuse.c), unless they are the guest's own reclaim reading pages (echo:
	 * steady.h); the controller sets the cold age from the signal; the gates say whether
	 * host pageout may take anything this round.  A fixed cold age (policy cold_age)
	 * replaces the controller's choice, bounded by the generations kept; the controller
	 * still runs, so its rate and floor stay visible.  A host squeeze takes through a
	 * hold, as it does for the balloon; so does a source without page-level bits, whose
	 * controller has no reuses to vouch with. */
	struct vmm_decide_in din = {
	    .dt_ms = t->dt_ms,
	    .refaults = signal,
	    .resident_pages = t->gs.resident_pages,
	    .watched_ms = t->now_ms - vm->first_tick_ms,
	    .reuse_is_echo = live_source(vm) && mtd_steady_in_reclaim(&vm->steady, t->now_ms),
	    .fixed_age_ms = vm->policy.cold_age_ms,
	    .hold_overridden = atomic_load(&vm->squeeze_permille) || !vm->source.ops->per_page,
	    .floor_pages = vm->policy.min_bytes >> VMM_PAGE_SHIFT,
	    .max_step_pages = vm->d->cfg.pageout.max_step_bytes >> VMM_PAGE_SHIFT,
	};
	(void)vmm_decide(vm->guest, &vm->reclaim, &din, &vm->decision); /* args are set */
	vm->cold_age_ms = vm->decision.cold_age_ms;
	if (vm->decision.fixed_age_capped && vm->cold_age_capped_ms != vm->policy.cold_age_ms) {
		mtd_notice("%s: policy cold_age %" PRIu64
			   " s is older than the generations kept can tell apart (%u "
			   "intervals); using %" PRIu64 " s",
			   vm->name, vm->policy.cold_age_ms / 1000, VMM_MAX_NR_GENS - 2,
			   vm->cold_age_ms / 1000);
		vm->cold_age_capped_ms = vm->policy.cold_age_ms;
	}

	/* Two aging rounds at least, and with page-level bits a whole cold age of watching,
	 * before the estimate means anything: libvmm vouches for no page idle longer than it
	 * has watched it (vmm_age_begin, step 0), so until then every page not seen yet counts
	 * as used, and an estimate of all of RAM would hand the guest its maximum at every
	 * attach and every restart of memtided.  The agent's amounts need no watch: what they
	 * leave out is what the guest says it does not use (vmm_guest_config.unseen_is_unused).
	 * Longer than a cold age, not as long: generation 0, every page not seen since attach,
	 * was born at the first tick, and vmm_wss counts a generation born exactly the age ago,
	 * so the first reading at equality (a tick on the very millisecond) was all of RAM,
	 * and the peak (steady.h) held it for one more cold age (found by memtide-sim's balloon
	 * model, sim/actuators.c: on the sqlite3 trace nothing was taken until 145 s, the cold
	 * age being 70 s). */
	bool watched = !vm->source.ops->per_page || t->now_ms - vm->first_tick_ms > vm->cold_age_ms;
	if (vm->rounds >= 2 && watched &&
	    vmm_wss(vm->guest, t->now_ms, &vm->cold_age_ms, 1, &t->wss_bytes) == 0)
		t->wss_valid = true;
	/* Host-side page-level bits, read with three corrections (steady.h; docs/design.md,
	 * Part 7): without the pages the guest's own reclaim read on their way out (echo), the
	 * highest reading of the last cold age (peak), and never more than the guest RAM the
	 * host holds or the guest says it uses (bound).  Pages memtided paged out are evicted,
	 * not in the estimate. */
	if (t->wss_valid && live_source(vm)) {
		bool youngest;
		uint64_t echo =
		    mtd_steady_echo(&vm->steady, &t->gs, t->now_ms, vm->cold_age_ms, &youngest);
		t->wss_bytes =
		    mtd_steady_peak(&vm->steady, t->wss_bytes > echo ? t->wss_bytes - echo : 0,
				    t->now_ms, vm->cold_age_ms, !youngest);
		bool used_known = t->as && t->as->mem_total_bytes >= t->as->mem_free_bytes;
		t->wss_bytes = mtd_steady_bound(
		    t->wss_bytes, vm->draft.host_rss_bytes, used_known,
		    used_known ? t->as->mem_total_bytes - t->as->mem_free_bytes : 0);
	}
	for (unsigned i = 0; i < MTD_WSS_BINS; i++)
		vm->draft.wss_age_ms[i] = wss_age_intervals[i] * vm->d->cfg.ctl.interval_ms;
	(void)vmm_wss(vm->guest, t->now_ms, vm->draft.wss_age_ms, MTD_WSS_BINS,
		      vm->draft.wss_bytes);
}

/* libvmm learns which pages the target took (eviction hand) or gave back: by the balloon, or
 * by the guest's own reclaim when return=reclaim is in force. */
static void account_target(struct mtd_vm *vm, uint64_t now_ms, uint64_t from, uint64_t to)
{
	if (!vm->guest)
		return;
	if (to < from) {
		struct vmm_run runs[EVICT_BATCH];
		struct vmm_evict_req req = {
		    .max_pages = (from - to) >> VMM_PAGE_SHIFT,
		    .min_age_ms = vm->cold_age_ms,
		    .now_ms = now_ms,
		    .runs = runs,
		    .max_runs = EVICT_BATCH,
		};
		struct vmm_evict_result res;
		if (vm->nr_evicted + EVICT_BATCH > MAX_EVICTED_RUNS)
			return; /* history full: the balloon still moves, libvmm is not told */
		if (vmm_evict(vm->guest, &req, &res) < 0)
			return;
		memcpy(&vm->evicted[vm->nr_evicted], runs, res.nr_runs * sizeof(runs[0]));
		vm->nr_evicted += res.nr_runs;
		if (vm->source.ops && vm->source.ops->evicted)
			vm->source.ops->evicted(vm->source.ctx, runs, res.nr_runs);
		return;
	}
	/* Deflate: the newest runs come back first, as memory the guest has not used yet
	 * (vmm_give_back says what counting them young did). */
	uint64_t left = (to - from) >> VMM_PAGE_SHIFT;
	while (left && vm->nr_evicted) {
		struct vmm_run *r = &vm->evicted[vm->nr_evicted - 1];
		uint64_t n = r->npages < left ? r->npages : left;
		(void)vmm_give_back(vm->guest, r->gpa + ((r->npages - n) << VMM_PAGE_SHIFT), n);
		r->npages -= n;
		left -= n;
		if (!r->npages)
			vm->nr_evicted--;
	}
}

/* Who wanted a change, for the audit trail (history.h): the guest's own signals, the host
 * arbiter's squeeze, the operator's policy, the daemon's stop, or the controller. */
static const char *change_source(const struct mtd_vm *vm, enum mtd_ctl_reason r)
{
	switch (r) {
	case MTD_CTL_PRESSURE:
	case MTD_CTL_NEED:
	case MTD_CTL_GROW:
		return "guest";
	case MTD_CTL_SILENT:
		return "agent-silence";
	case MTD_CTL_DISABLED:
	case MTD_CTL_RELEASE:
		return "operator";
	default:
		return atomic_load(&vm->squeeze_permille) ? "arbiter" : "controller";
	}
}

/* A state file from the previous memtided: take it over on the first tick, once the
 * balloon's actual is known (mtd_ctl_resume checks the file against it). */
static void resume(struct mtd_vm *vm, uint64_t now_ms)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	struct mtd_saved_vm *s = vm->saved;
	char why[200];

	vm->saved = NULL;
	if (s->instance[0] && vm->instance[0] && strcmp(s->instance, vm->instance) != 0) {
		mtd_notice("%s: the state file is from an earlier QEMU process (%s, now %s): "
			   "starting from the current size, %" PRIu64 " MiB",
			   vm->name, s->instance, vm->instance, vm->balloon_actual / MiB);
		free(s);
		return;
	}
	bool taken = mtd_ctl_resume(&cfg->ctl, &vm->policy, vm->domain_bytes, vm->balloon_actual,
				    now_ms, &s->ctl, &vm->ctl, why, sizeof(why));
	vm->released = s->released;
	vm->draft.resumed = true;
	if (!taken)
		mtd_warn("%s: state file: %s; resuming from the current size, %" PRIu64 " MiB",
			 vm->name, why, vm->ctl.balloon_bytes / MiB);
	else
		mtd_notice("%s: resumed from its state file (saved %" PRIu64 " s ago): balloon "
			   "%" PRIu64 " MiB (actual %" PRIu64 " MiB), target %" PRIu64
			   " MiB, no inflation for %" PRIu64 " s, %u steps refused in a row%s",
			   vm->name, now_ms > s->saved_ms ? (now_ms - s->saved_ms) / 1000 : 0,
			   vm->ctl.balloon_bytes / MiB, vm->balloon_actual / MiB,
			   vm->ctl.target_bytes / MiB,
			   vm->ctl.hold_until_ms > now_ms ? (vm->ctl.hold_until_ms - now_ms) / 1000
							  : 0,
			   vm->ctl.refusals, vm->released ? ", released" : "");
	free(s);
}

/* What a release may give this step: the host's grant (daemon.c) toward the ceiling. */
static uint64_t release_grant(struct mtd_vm *vm, uint64_t now_ms)
{
	uint64_t ceiling = mtd_ctl_safe_bytes(&vm->policy, vm->domain_bytes);
	uint64_t have = vm->ctl.balloon_bytes > vm->ctl.target_bytes ? vm->ctl.balloon_bytes
								     : vm->ctl.target_bytes;
	bool host_short = false;
	uint64_t g;

	if (!vm->ctl.primed || have >= ceiling) {
		vm->release_waiting = false;
		return 0;
	}
	g = mtd_daemon_release_grant(vm->d, ceiling - have, now_ms, &host_short);
	if (!g && host_short && !vm->release_waiting)
		mtd_notice("%s: release waiting: the host has nothing to spare above its low mark",
			   vm->name);
	vm->release_waiting = !g && host_short;
	return g;
}

/* Step 5: the balloon.  Sent when it moved, or when the last one was not taken (a failed
 * command, a reconnect): until the hypervisor accepts it, it is not done.  Observe-only:
 * said (audit "would"), never sent. */
static void apply(struct mtd_vm *vm, const struct tick *t, const struct mtd_ctl_output *out,
		  bool observe, const char *reason, const char *source)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	uint64_t prev = vm->applied_bytes;
	bool first = !vm->applied_valid;
	char err[200] = "";
	/* What the first target set moves from: the balloon as it is.  A VM observed since
	 * attach has its first real step here, and the trail must show it (CI 43: 512 -> 448
	 * MiB went unlogged and uncounted right after observe-only ended). */
	uint64_t from = first ? vm->balloon_actual : prev;

	if (observe) {
		uint64_t was = vm->draft.balloon_target_bytes;
		if (was && out->balloon_bytes != was)
			mtd_vm_audit(vm, t->now_ms, "balloon", was, out->balloon_bytes, reason,
				     source, true);
		vm->draft.balloon_target_bytes = out->balloon_bytes;
		return;
	}
	if (!first && !vm->apply_pending && out->balloon_bytes <= prev &&
	    prev - out->balloon_bytes < cfg->ctl.min_change_bytes)
		return;
	if (vm->peer_down_since_ms) {
		vm->apply_pending = true; /* sent once the peer answers again */
		return; /* nothing is actuated through a peer that does not answer */
	}
	uint64_t t0 = mono_ms();
	int rc = vm->balloon->set_target(vm->balloon_ctx, out->balloon_bytes, err, sizeof(err));
	peer_note(vm, "balloon target", t0, rc, err);
	if (rc < 0 && vm->peer_down_since_ms) {
		vm->apply_pending = true; /* said once by peer_note; not an actuator error */
		return;
	}
	if (rc < 0) {
		vm->balloon_failures++;
		vm->draft.counters.balloon_errors++;
		set_error(vm, "balloon: ", err);
		if (!vm->apply_pending)
			mtd_warn("%s: balloon target %" PRIu64 " MiB not set (%s): trying again "
				 "each tick",
				 vm->name, out->balloon_bytes / MiB, err);
		vm->apply_pending = true;
		if (vm->balloon_failures == BALLOON_ERROR_AFTER)
			mtd_err("%s: balloon target failed %d times: %s", vm->name,
				BALLOON_ERROR_AFTER, err);
		return;
	}
	if (vm->balloon_failures)
		mtd_notice("%s: balloon target %" PRIu64 " MiB set after %u failed tries", vm->name,
			   out->balloon_bytes / MiB, vm->balloon_failures);
	vm->balloon_failures = 0;
	vm->apply_pending = false;
	vm->applied_bytes = out->balloon_bytes;
	vm->applied_valid = true;
	vm->draft.balloon_target_bytes = out->balloon_bytes;
	if (!from)
		return; /* the size it had is not known: no step to count */
	if (out->balloon_bytes < from) {
		vm->draft.counters.inflations++;
		vm->draft.counters.inflated_bytes += from - out->balloon_bytes;
	} else if (out->balloon_bytes > from) {
		vm->draft.counters.deflations++;
		vm->draft.counters.deflated_bytes += out->balloon_bytes - from;
	}
	if (out->balloon_bytes != from)
		mtd_vm_audit(vm, t->now_ms, "balloon", from, out->balloon_bytes, reason, source,
			     false);
}

/* Which of the controller's pressure signals fired (its step 3), for the log. */
static const char *pressure_why(const struct mtd_ctl_config *c, const struct mtd_ctl_input *in,
				char *buf, size_t len)
{
	if (in->psi_known && in->psi_some_avg10 > c->psi_some_avg10_high)
		snprintf(buf, len, "PSI memory some avg10 %.1f%%, over %.1f%%", in->psi_some_avg10,
			 c->psi_some_avg10_high);
	else if (in->avail_known && in->guest_avail_bytes < c->mem_available_low_bytes)
		snprintf(buf, len, "MemAvailable %" PRIu64 " MiB, under %" PRIu64 " MiB",
			 in->guest_avail_bytes / MiB, c->mem_available_low_bytes / MiB);
	else
		snprintf(buf, len, "major faults %.0f/s, over %.0f/s", in->major_faults_per_s,
			 c->major_faults_high_per_s);
	return buf;
}

/* The guest's MemAvailable as its agent last reported it, less what the balloon took since
 * that report: the balloon steps into the room a report shows, and the next step must not
 * find the same room again.  An agent that dies keeps its last report "fresh" for up to
 * agent_silence; stepping on it, the balloon took 448 -> 267 MiB in four steps of one stale
 * MemAvailable, and the guest met pressure before the silence was said (scenario 5). */
static uint64_t avail_now(const struct mtd_vm *vm, const struct proto_stats *as)
{
	uint64_t now = vm->ctl.primed && vm->ctl.balloon_bytes < vm->balloon_actual
			   ? vm->ctl.balloon_bytes
			   : vm->balloon_actual;

	return mtd_ctl_avail_since_report(as->mem_available_bytes, vm->avail_balloon, now);
}

/* Where the working set comes from: the guest's MGLRU, the source's own access bits, or
 * the MemAvailable fallback (which counts every byte in use, so that only free and easily
 * reclaimed memory is ever taken).  In vm show, and in the log when it changes.  by_age:
 * the guest's use beyond the working set is cold. */
static bool note_estimate(struct mtd_vm *vm)
{
	bool by_age = true;
	const char *e = !vm->source.ops ? "none (no source)"
			: vm->source.ops->estimate
			    ? vm->source.ops->estimate(vm->source.ctx, &by_age)
			    : "access bits";

	/* "none yet" is not said: the agent's hello and what follows it are. */
	if (strcmp(e, vm->draft.wss_source) != 0 && strncmp(e, "none yet", 8) == 0) {
		snprintf(vm->draft.wss_source, sizeof(vm->draft.wss_source), "%s", e);
	} else if (strcmp(e, vm->draft.wss_source) != 0) {
		snprintf(vm->draft.wss_source, sizeof(vm->draft.wss_source), "%s", e);
		if (strcmp(e, "MemAvailable fallback") == 0)
			mtd_notice("%s: working set from the %s: the guest's MGLRU reports nothing "
				   "(off, or not built in), so everything the guest uses counts as "
				   "its working set and only free or easily reclaimed memory is "
				   "taken (docs/operations.md, \"Working-set source\")",
				   vm->name, e);
		else
			mtd_notice("%s: working set from %s", vm->name, e);
	}
	return by_age && vm->source.ops;
}

/* The steady-guest rules' inputs (steady.h), and how much of the guest's use is cold. */
static void steady_inputs(struct mtd_vm *vm, const struct tick *t, uint64_t used_raw,
			  struct mtd_ctl_input *in)
{
	const struct mtd_ctl_config *c = &vm->d->cfg.ctl;
	bool by_age = note_estimate(vm);

	in->growing = mtd_steady_growing(&vm->steady, c, in->used_known, used_raw, t->now_ms);
	in->reclaim_futile =
	    in->used_known && mtd_steady_futile(&vm->steady, c, used_raw, t->wss_bytes, t->now_ms);
	if (by_age && t->wss_valid && in->used_known) {
		in->cold_known = true;
		in->cold_bytes =
		    in->guest_used_bytes > t->wss_bytes ? in->guest_used_bytes - t->wss_bytes : 0;
	}
}

/* The reclaim controller takes nothing by age for now (vmm/reclaim_ctl.c, "Holding").  Only
 * page-level sources evict by age; policy cold_age fixes the age by hand and bypasses the
 * controller. */
static bool reclaim_holds(const struct mtd_vm *vm)
{
	return vm->reclaim.hold && !vm->policy.cold_age_ms && vm->source.ops &&
	       vm->source.ops->per_page;
}

/* The holds that stop every taker, not host pageout alone: even the longest age the
 * generations tell apart would refault past the budget (reused-past-longest-age,
 * refaults-at-longest-age).  While the controller is only learning, the balloon and the
 * agent go on: their estimate is read at the controller's age, which starts at the longest
 * and comes down only as the reuses vouch for shorter ones, where host pageout would evict
 * by a floor not yet vouched for.  Gating them on learning too held scenario 2 (ept source,
 * the agent reclaiming) for 30-40 s after each reclaim step, its reads having named a
 * longer floor to learn. */
static bool reclaim_holds_all(const struct mtd_vm *vm)
{
	return vm->decision.holds_all_takers && vm->source.ops && vm->source.ops->per_page;
}

/* Why it holds, for host pageout's state and the log. */
static const char *hold_why(const struct mtd_vm *vm, char *buf, size_t len)
{
	switch (vm->reclaim.hold_why) {
	case VMM_HOLD_LEARNING:
		snprintf(buf, len,
			 "learning which idle ages the guest comes back to (a cold age counts "
			 "after watching the guest %u times as long)",
			 vm->reclaim.cfg.trust_factor);
		break;
	case VMM_HOLD_TOO_OLD:
		snprintf(buf, len,
			 "pages idle past the longest age the generations tell apart (%" PRIu64
			 " s) come back faster than the refault target",
			 vm->reclaim.cfg.max_age_ms / 1000);
		break;
	case VMM_HOLD_REFAULTS:
		snprintf(buf, len,
			 "refaults stay above the target even at the longest age (%" PRIu64 " s)",
			 vm->reclaim.cfg.max_age_ms / 1000);
		break;
	default:
		snprintf(buf, len, "-");
	}
	return buf;
}

/* The controller's reason, and why a steady-guest rule holds it back (vm show; the log
 * once when the sentence changes). */
static void note_decision(struct mtd_vm *vm, enum mtd_ctl_reason reason)
{
	char why[sizeof(vm->draft.decision_detail)];

	bool same_reason = strcmp(vm->draft.decision, mtd_ctl_reason_name(reason)) == 0;
	snprintf(vm->draft.decision, sizeof(vm->draft.decision), "%s", mtd_ctl_reason_name(reason));
	mtd_steady_why(&vm->steady, &vm->d->cfg.ctl, reason, why, sizeof(why));
	if (reason == MTD_CTL_NO_ESTIMATE && vm->guest && vm->source.ops->per_page &&
	    vm->rounds >= 2)
		snprintf(why, sizeof(why),
			 "watching the guest for one cold age (%" PRIu64 " s) before the first "
			 "estimate: no page is known to be idle for longer than it was watched",
			 vm->cold_age_ms / 1000);
	if (reason == MTD_CTL_REFAULT_HOLD) {
		char held[sizeof(why) - 32];
		snprintf(why, sizeof(why), "nothing taken by age: %s",
			 hold_why(vm, held, sizeof(held)));
	}
	/* The growth and the cold age change every tick: said once per stretch, not per figure. */
	bool same = same_reason && (reason == MTD_CTL_GROWING || reason == MTD_CTL_NO_ESTIMATE ||
				    strcmp(why, vm->draft.decision_detail) == 0);
	if (!same && why[0])
		mtd_info("%s: %s", vm->name, why);
	snprintf(vm->draft.decision_detail, sizeof(vm->draft.decision_detail), "%s", why);
}

/* Steps 3-5: the controller decides, the actuators carry it out. */
static void control(struct mtd_vm *vm, struct tick *t, struct mtd_ctl_output *out)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	struct mtd_ctl_input in = {
	    .now_ms = t->now_ms,
	    .domain_bytes = vm->domain_bytes,
	    .actual_bytes = vm->balloon_actual,
	    .wss_valid = t->wss_valid,
	    .wss_bytes = t->wss_bytes,
	    .need_bytes = t->need_bytes,
	    .guest_took_back = t->guest_took_back,
	    .squeeze = atomic_load(&vm->squeeze_permille) / 1000.0,
	    .released = vm->released,
	    /* nothing taken while even the longest age would refault past the budget (a
	     * squeeze excepted); see reclaim_holds_all */
	    .refault_hold = reclaim_holds_all(vm),
	};

	if (vm->saved && !vm->ctl.primed)
		resume(vm, t->now_ms);
	in.released = vm->released;
	if (vm->released)
		in.release_grant_bytes = release_grant(vm, t->now_ms);
	if (vm->agent_expected)
		in.inputs_fresh = t->agent_fresh;
	else if (vm->source.ops && vm->source.ops->fresh)
		in.inputs_fresh = vm->source.ops->fresh(vm->source.ctx, t->now_ms);
	else
		in.inputs_fresh = t->bstats_fresh;
	if (t->as) {
		const struct proto_hello *h = mtd_agent_link_hello(vm->agent);
		in.avail_known = true;
		in.guest_avail_bytes = avail_now(vm, t->as);
		in.guest_reserved_bytes = vm->reserved_bytes;
		in.used_known = t->as->mem_total_bytes >= t->as->mem_free_bytes;
		in.guest_used_bytes = t->as->mem_total_bytes - t->as->mem_free_bytes;
		/* Soft return needs an agent that can reclaim and a balloon that reports the
		 * freed pages: without reporting, freed memory never reaches the host. */
		in.can_reclaim = h &&
				 (h->caps & (PROTO_CAP_RECLAIM_MEMCG | PROTO_CAP_RECLAIM_MGLRU)) &&
				 vm->fpr_known && vm->fpr_on;
		in.psi_known = t->as->has_psi;
		in.psi_some_avg10 = t->as->psi.some_avg10;
		in.pressure_answered = vm->pressure_seq && vm->pressure_seq == vm->avail_seq;
	} else if (t->bstats_fresh) {
		/* No agent to ask: the balloon driver's own figures, while they are fresh (stale
		 * ones would answer the same low MemAvailable again and again). */
		in.avail_known = vm->bstats.has_available;
		in.guest_avail_bytes = vm->bstats.available_bytes;
		in.faults_known = vm->majflt_known;
		in.major_faults_per_s = vm->majflt_per_s;
	}

	/* Observe-only (host-wide or this VM's policy): the controller runs on what the guest
	 * really does, and what it would do is shown and logged, never done.  Its targets then
	 * stand apart from the balloon; when observing ends they restart from the balloon's
	 * actual size, so the first real step is one step from where the guest really is. */
	bool observe = cfg->observe_only || vm->policy.observe;
	if (vm->observing && !observe) {
		/* The controller's own state followed the would-be steps: it restarts from the
		 * real size too, with no hold or refusal that only a would-be step earned. */
		vm->ctl.target_bytes = vm->ctl.balloon_bytes = vm->balloon_actual;
		vm->ctl.hold_until_ms = vm->ctl.last_take_ms = 0;
		vm->ctl.refused_since_take = false;
		vm->ctl.refusals = 0;
		vm->draft.balloon_target_bytes = vm->balloon_actual;
		vm->draft.target_bytes = vm->balloon_actual;
		mtd_notice("%s: observe-only ends: memtided acts on this VM from now on", vm->name);
	} else if (!vm->observing && observe && vm->draft.balloon_target_bytes) {
		mtd_notice("%s: observe-only: memtided shows what it would do and changes nothing",
			   vm->name);
	}
	vm->observing = observe;
	vm->draft.observe = observe;

	enum mtd_ctl_reason before = vm->ctl.reason;
	bool first = !vm->applied_valid;
	uint64_t prev_target = vm->draft.target_bytes;
	struct mtd_policy pol = vm->policy;
	pol.return_via = return_mode(vm);
	bool hostside = pol.return_via == MTD_RETURN_PAGEOUT || pol.return_via == MTD_RETURN_AUTO;
	/* What the host already holds in swap is not the guest's to free (it would read each
	 * page back to do so): return=auto asks the agent only for the rest. */
	uint64_t in_swap = hostside ? mtd_hand_swapped_bytes(vm->hand) : 0;
	uint64_t used_raw = in.guest_used_bytes;
	if (in.used_known)
		in.guest_used_bytes =
		    in.guest_used_bytes > in_swap ? in.guest_used_bytes - in_swap : 0;
	steady_inputs(vm, t, used_raw, &in);
	mtd_ctl_step(&cfg->ctl, &pol, &in, &vm->ctl, out);
	note_decision(vm, out->reason);
	vm->draft.target_bytes = out->target_bytes;
	vm->draft.soft = out->soft;
	vm->draft.guest_used_bytes = in.used_known ? used_raw : 0;

	/* What the host arbiter could still take here: down to the working set, never below
	 * the floor; nothing without an estimate or while the VM may not be inflated. */
	uint64_t keep = t->wss_bytes > out->floor_bytes ? t->wss_bytes : out->floor_bytes;
	bool may_reclaim =
	    t->wss_valid && vm->policy.enabled && !vm->released && in.inputs_fresh && !observe;
	uint64_t reclaimable =
	    may_reclaim && out->target_bytes > keep ? out->target_bytes - keep : 0;
	/* Host-side eviction takes resident pages beyond the working set, within the room in
	 * swap and net of the compressed pool. */
	if (hostside && !observe)
		reclaimable = mtd_hand_reclaimable(
		    vm->hand, may_reclaim && (t->gs.resident_pages << VMM_PAGE_SHIFT) > keep
				  ? (t->gs.resident_pages << VMM_PAGE_SHIFT) - keep
				  : 0);
	atomic_store(&vm->reclaimable_bytes, reclaimable);
	uint64_t holds = out->soft && in.used_known ? in.guest_used_bytes : vm->balloon_actual;
	atomic_store(&vm->pending_bytes,
		     !observe && holds > out->target_bytes ? holds - out->target_bytes : 0);

	/* Transitions an operator wants to hear of; the first tick's "silent" (the agent has
	 * not spoken yet) is not one. */
	char why[96];

	if (out->reason == MTD_CTL_PRESSURE && t->as)
		vm->pressure_seq = vm->avail_seq;
	if (out->reason != before && !first) {
		if (out->reason == MTD_CTL_PRESSURE)
			mtd_notice("%s: pressure (%s): giving memory back (target %" PRIu64 " MiB)",
				   vm->name, pressure_why(&cfg->ctl, &in, why, sizeof(why)),
				   out->target_bytes / MiB);
		else if (out->reason == MTD_CTL_NEED)
			mtd_notice("%s: %s: giving memory back (target %" PRIu64 " MiB)", vm->name,
				   mtd_ctl_reason_name(out->reason), out->target_bytes / MiB);
		else if (out->reason == MTD_CTL_SILENT)
			mtd_notice("%s: silent: nothing heard from the guest for %" PRIu64
				   " s: holding at %" PRIu64 " MiB, no inflation until it "
				   "reports again",
				   vm->name, cfg->ctl.agent_silence_ms / 1000,
				   out->balloon_bytes / MiB);
	}
	if (out->backoff_hold_ms)
		vm->draft.counters.refused_steps++;
	if (out->backoff_hold_ms)
		mtd_notice(
		    "%s: the guest gave back the step just taken (%u in a row): no inflation "
		    "for %" PRIu64 " s",
		    vm->name, vm->ctl.refusals, out->backoff_hold_ms / 1000);

	const char *reason = mtd_ctl_reason_name(out->reason);
	const char *source = change_source(vm, out->reason);
	/* Step 4 (eviction): the agent's reclaim.  before/after: what the guest uses, and what
	 * it is asked to use. */
	/* Under the balloon, a step waits for the guest to free the memory first (controller.c,
	 * actuate: the balloon follows only into what the guest has free), so the balloon stays
	 * above the target and nothing "changed": the request goes all the same, or neither
	 * ever moves (scenario 2 under return=balloon sat at 807 MiB of a 328 MiB target).  An
	 * outstanding request (-EBUSY) and a futile answer (steady.h) keep it from repeating. */
	bool waits = !out->soft && out->balloon_bytes > out->target_bytes;
	if (out->reclaim_bytes && vm->agent && (out->changed || first || out->soft || waits)) {
		uint64_t used = in.used_known ? in.guest_used_bytes : vm->balloon_actual;
		uint64_t to = used > out->reclaim_bytes ? used - out->reclaim_bytes : 0;
		if (observe) {
			mtd_vm_audit(vm, t->now_ms, "reclaim", used, to, reason, source, true);
		} else if (mtd_agent_link_reclaim(vm->agent, out->reclaim_bytes, true,
						  (uint32_t)cfg->ctl.interval_ms, t->now_ms) == 0) {
			vm->draft.counters.reclaim_requests++;
			mtd_steady_reclaim_sent(&vm->steady, t->now_ms, cfg->ctl.interval_ms,
						cfg->ctl.interval_ms);
			vm->draft.counters.reclaim_requested_bytes += out->reclaim_bytes;
			mtd_vm_audit(vm, t->now_ms, "reclaim", used, to, reason, source, false);
		}
	}
	/* libvmm follows the target, whichever actuator carries it out (not when nothing is
	 * carried out, nor under host-side eviction, whose hand evicts for real); with the
	 * balloon a cap, the target moves alone, and the trail says so. */
	if (!observe && !hostside &&
	    out->target_bytes != (prev_target ? prev_target : vm->balloon_actual))
		account_target(vm, t->now_ms, prev_target ? prev_target : vm->balloon_actual,
			       out->target_bytes);
	if (out->soft && prev_target && out->target_bytes != prev_target &&
	    (out->target_bytes > prev_target ||
	     prev_target - out->target_bytes >= cfg->ctl.min_change_bytes))
		mtd_vm_audit(vm, t->now_ms, "target", prev_target, out->target_bytes, reason,
			     source, observe);
	apply(vm, t, out, observe, reason, source);
}

/* Field by field (struct padding may differ). */
static bool same_saved(const struct mtd_saved_vm *a, const struct mtd_saved_vm *b)
{
	return a->ctl.primed == b->ctl.primed && a->ctl.target_bytes == b->ctl.target_bytes &&
	       a->ctl.balloon_bytes == b->ctl.balloon_bytes &&
	       a->ctl.hold_until_ms == b->ctl.hold_until_ms &&
	       a->ctl.last_take_ms == b->ctl.last_take_ms &&
	       a->ctl.refused_since_take == b->ctl.refused_since_take &&
	       a->ctl.refusals == b->ctl.refusals && a->released == b->released &&
	       strcmp(a->instance, b->instance) == 0 &&
	       memcmp(a->policy_set, b->policy_set, sizeof(a->policy_set)) == 0;
}

/* What a restarted memtided needs, saved when it changed (state.c).  A failure is told
 * once for the whole daemon, and tried again each tick. */
static void save_state(struct mtd_vm *vm, uint64_t now_ms)
{
	struct mtd_daemon *d = vm->d;
	struct mtd_saved_vm *s;
	char err[300];

	if (!vm->ctl.primed || !d->cfg.state_dir[0])
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	memcpy(s->name, vm->name, sizeof(s->name));
	memcpy(s->uuid, vm->uuid, sizeof(s->uuid));
	memcpy(s->boot_id, d->boot_id, sizeof(s->boot_id));
	memcpy(s->instance, vm->instance, sizeof(s->instance));
	s->ctl = vm->ctl;
	s->ctl.reason = MTD_CTL_STEADY; /* not kept */
	if (vm->observing) {
		/* Observe-only: the controller's targets were never carried out; a memtided
		 * that resumes acting must start from the balloon as it really is. */
		s->ctl = (struct mtd_ctl_state){.primed = true,
						.target_bytes = vm->balloon_actual,
						.balloon_bytes = vm->balloon_actual};
		if (!vm->balloon_actual) {
			free(s);
			return;
		}
	}
	s->released = vm->released;
	pthread_mutex_lock(&vm->mbox_lock);
	memcpy(s->policy_set, vm->policy_set, sizeof(s->policy_set));
	pthread_mutex_unlock(&vm->mbox_lock);
	if (vm->last_saved && !vm->state_failing && same_saved(vm->last_saved, s)) {
		free(s);
		return;
	}
	struct mtd_saved_vm cmp = *s; /* what is compared next time: without saved_ms */
	s->saved_ms = now_ms;
	if (mtd_state_save(d->cfg.state_dir, s, err, sizeof(err)) < 0) {
		if (!atomic_exchange(&d->state_failing, true))
			mtd_warn("%s: state not saved: %s; a memtided restarted now would resume "
				 "this VM from its size alone, without its hold or release",
				 vm->name, err);
		vm->state_failing = true;
		free(s);
		return;
	}
	if (atomic_exchange(&d->state_failing, false))
		mtd_notice("%s: state saved in %s again", vm->name, d->cfg.state_dir);
	vm->state_failing = false;
	*s = cmp;
	free(vm->last_saved);
	vm->last_saved = s;
}

/* Step 5b: host-side eviction, once the controller has spoken (pageout_hand.h). */
static void evict_host(struct mtd_vm *vm, const struct tick *t, const struct mtd_ctl_output *out)
{
	char why[160];
	uint64_t seq = 0;
	const struct proto_reclaim_reply *r =
	    vm->agent ? mtd_agent_link_reclaim_reply(vm->agent, &seq) : NULL;
	struct mtd_hand_input in = {
	    .mode = return_mode(vm),
	    /* Memory is taken only while the controller takes it: not under pressure, a need,
	     * a hold, a silent source, on exit or opt-out. */
	    .may_take = out->state == MTD_VM_ACTIVE && !vm->observing &&
			(out->reason == MTD_CTL_STEADY || out->reason == MTD_CTL_INFLATE ||
			 out->reason == MTD_CTL_REFAULT_HOLD),
	    .why_not = vm->observing ? "observe-only" : mtd_ctl_reason_name(out->reason),
	    .agent_asked = out->reclaim_bytes && vm->agent,
	    .reply_seq = r ? seq : 0,
	    .reply_done = r && r->freed_bytes >= r->requested_bytes,
	    .interval_ms = vm->d->cfg.ctl.interval_ms,
	    .decision = &vm->decision,
	    .hold_why =
		vm->decision.gate == VMM_DECIDE_HOLD ? hold_why(vm, why, sizeof(why)) : NULL,
	    .now_ms = t->now_ms,
	    .evicted = vm->source.ops ? vm->source.ops->evicted : NULL,
	    .evicted_ctx = vm->source.ctx,
	};

	if (t->have_gs)
		mtd_hand_step(vm->hand, vm->guest, &in);
}

/* Step 6: the snapshot. */
static void publish(struct mtd_vm *vm, const struct tick *t, const struct mtd_ctl_output *out)
{
	struct mtd_vm_status *st = &vm->draft;
	uint64_t seq;

	st->state = vm->balloon_failures >= BALLOON_ERROR_AFTER ? MTD_VM_ERROR : out->state;
	st->policy = vm->policy;
	st->updated_ms = t->now_ms;
	st->max_bytes = vm->domain_bytes;
	st->balloon_actual_bytes = vm->balloon_actual;
	/* Honest figures (mtd_vm_figures): what memtide returned, apart from what is not
	 * resident without its doing. */
	mtd_vm_figures(vm->domain_bytes, vm->balloon_actual, st->host_rss_bytes,
		       st->counters.reclaimed_bytes, st->observe, &st->returned_bytes,
		       &st->untouched_bytes);
	st->saved_bytes = st->returned_bytes;
	/* Host-side eviction: what it put in swap is returned, less the compressed pool's
	 * share (pageout_hand.h). */
	enum mtd_return_via mode = return_mode(vm);
	st->return_in_force = mode == MTD_RETURN_RECLAIM && !st->soft ? MTD_RETURN_BALLOON : mode;
	mtd_hand_publish(vm->hand, st);
	if (t->have_gs) {
		st->resident_bytes = t->gs.resident_pages << VMM_PAGE_SHIFT;
		st->nr_gens = t->gs.nr_gens < MTD_MAX_GENS ? t->gs.nr_gens : MTD_MAX_GENS;
		for (unsigned i = 0; i < st->nr_gens; i++) {
			st->gen_pages[i] = t->gs.gen[i].pages;
			/* The first generation holds every page resident when memtide came: its
			 * pages are at least as old as our watch, and we cannot say more. */
			uint64_t birth = t->gs.gen[i].birth_ms > vm->first_tick_ms
					     ? t->gs.gen[i].birth_ms
					     : vm->first_tick_ms;
			st->gen_age_ms[i] = t->now_ms > birth ? t->now_ms - birth : 0;
		}
	}
	st->refault_rate_per_min = vm->reclaim.last_rate_per_min;
	st->cold_age_ms = vm->cold_age_ms;
	st->reuse_floor_ms = vm->reclaim.floor_ms;
	snprintf(st->reclaim_hold, sizeof(st->reclaim_hold), "%s",
		 reclaim_holds(vm) ? vmm_reclaim_hold_name(vm->reclaim.hold_why) : "");
	st->hold_left_ms =
	    vm->ctl.hold_until_ms > t->now_ms ? vm->ctl.hold_until_ms - t->now_ms : 0;
	st->refused_steps = vm->ctl.refusals;
	uint64_t ceiling = mtd_ctl_safe_bytes(&vm->policy, vm->domain_bytes);
	st->released = vm->released;
	st->release_left_bytes =
	    vm->released && ceiling > vm->balloon_actual ? ceiling - vm->balloon_actual : 0;
	st->release_waiting = vm->released && vm->release_waiting;
	st->working_set_bytes = t->wss_bytes;
	st->controller_output = vm->reclaim.pid.output;
	st->agent_connected = vm->agent && mtd_agent_link_ready(vm->agent);
	mtd_vm_channel_status(vm, st);
	if (st->agent_connected) { /* kept after the agent goes: its last word */
		st->agent_caps = mtd_agent_link_hello(vm->agent)->caps;
		st->agent_caps_known = true;
	}
	st->fpr_on = vm->fpr_on;
	mtd_access_refresh_status(&vm->source, st);
	const struct proto_stats *as = vm->agent ? mtd_agent_link_stats(vm->agent, &seq) : NULL;
	if (as) {
		st->guest_mem_available_bytes = as->mem_available_bytes;
		st->guest_psi_some_avg10 = as->has_psi ? as->psi.some_avg10 : 0.0;
		st->guest_psi_known = as->has_psi;
	} else if (vm->bstats.valid && vm->bstats.has_available) {
		st->guest_mem_available_bytes = vm->bstats.available_bytes;
	}
	if (vm->balloon_failures == 0 && st->state != MTD_VM_ERROR && !vm->peer_down_since_ms)
		st->last_error[0] = '\0';
	(void)mtd_vm_publish(vm);
	/* wss: the estimate the controller used (at the cold age); the one at the shortest age
	 * beside it, which is what the guest touched last interval */
	mtd_debug("%s: actual %" PRIu64 " MiB host rss %" PRIu64 " MiB balloon %" PRIu64
		  " MiB target %" PRIu64 " MiB used %" PRIu64 " MiB wss %" PRIu64 " MiB (%" PRIu64
		  " MiB at %" PRIu64 " ms) cold age %" PRIu64 " ms refaults %.5f/min %s",
		  vm->name, vm->balloon_actual / MiB, st->host_rss_bytes / MiB,
		  st->balloon_target_bytes / MiB, st->target_bytes / MiB,
		  st->guest_used_bytes / MiB, st->working_set_bytes / MiB, st->wss_bytes[0] / MiB,
		  st->wss_age_ms[0], vm->cold_age_ms, st->refault_rate_per_min,
		  mtd_ctl_reason_name(out->reason));
}

/*
 * One tick.  age: a scheduled tick (libvmm ages a generation); an out-of-schedule tick for
 * the agent's need (extra_need_bytes), a release's climb or an operator's ask only reads
 * inputs and decides, so the generations keep their one-per-interval spacing.
 */
static void tick(struct mtd_vm *vm, uint64_t now_ms, bool age, uint64_t extra_need_bytes)
{
	struct tick *t = calloc(1, sizeof(*t)); /* ~1.5 KiB of libvmm stats: off the stack */
	struct mtd_ctl_output out = {0};

	if (!t)
		return;
	t->now_ms = now_ms;
	if (!vm->first_tick_ms)
		vm->first_tick_ms = now_ms;
	if (age) {
		t->dt_ms = vm->last_step_ms && now_ms > vm->last_step_ms
			       ? now_ms - vm->last_step_ms
			       : vm->d->cfg.ctl.interval_ms;
		vm->last_step_ms = now_ms;
	}
	read_inputs(vm, t);
	t->need_bytes += extra_need_bytes;
	if (age)
		run_libvmm(vm, t);
	control(vm, t, &out);
	if (age)
		evict_host(vm, t, &out);
	publish(vm, t, &out);
	save_state(vm, now_ms);
	free(t);
}

/* ---- the thread ------------------------------------------------------------------------- */

/*
 * A scheduled tick starts: how long since the last one?  More than 1.5 intervals is late
 * (the CPU is short, or a call took long).  BEHIND_AFTER late ticks in a row are said once
 * ("falling behind"), and as many on time once more ("back on its interval").
 */
static void note_tick_gap(struct mtd_vm *vm, uint64_t now_ms)
{
	uint64_t interval = vm->d->cfg.ctl.interval_ms;
	uint64_t gap = vm->last_sched_tick_ms ? now_ms - vm->last_sched_tick_ms : interval;
	bool late = gap * 2 > interval * 3;

	vm->last_sched_tick_ms = now_ms;
	vm->draft.tick_gap_ms = gap;
	if (late) {
		vm->draft.ticks_late++;
		vm->ontime_in_row = 0;
		if (++vm->late_in_row == BEHIND_AFTER && !vm->draft.behind) {
			vm->draft.behind = true;
			mtd_notice(
			    "%s: falling behind its interval: %u ticks in a row came late, the "
			    "last after %" PRIu64 " ms (interval %" PRIu64 " ms); the host's CPU "
			    "is short or its peer slow",
			    vm->name, BEHIND_AFTER, gap, interval);
		}
	} else {
		vm->late_in_row = 0;
		if (++vm->ontime_in_row == BEHIND_AFTER && vm->draft.behind) {
			vm->draft.behind = false;
			mtd_notice("%s: back on its interval (%" PRIu64 " ms); %" PRIu64
				   " late ticks so far",
				   vm->name, interval, vm->draft.ticks_late);
		}
	}
}

/* What other threads asked for: a policy, a release or a resume.  True when something
 * changed that a tick should act on now. */
static bool take_mail(struct mtd_vm *vm, uint64_t now_ms)
{
	bool changed = false;
	int cmd;

	pthread_mutex_lock(&vm->mbox_lock);
	if (vm->policy_dirty) {
		vm->policy = vm->policy_new;
		vm->policy_dirty = false;
		changed = true;
		mtd_notice("%s: policy %s min %" PRIu64 " MiB max %" PRIu64 " MiB priority %u "
			   "headroom %" PRIu64 " MiB target refaults %.4g/min",
			   vm->name, vm->policy.enabled ? "enabled" : "disabled",
			   vm->policy.min_bytes / MiB, vm->policy.max_bytes / MiB,
			   vm->policy.priority, vm->policy.headroom_bytes / MiB,
			   vm->policy.target_refault_per_min);
	}
	cmd = vm->release_cmd;
	vm->release_cmd = 0;
	pthread_mutex_unlock(&vm->mbox_lock);
	if (cmd > 0 && !vm->released) {
		vm->released = true;
		changed = true;
		mtd_notice("%s: released: back to %" PRIu64 " MiB at the host's pace; no "
			   "inflation until memtidectl resume",
			   vm->name, mtd_ctl_safe_bytes(&vm->policy, vm->domain_bytes) / MiB);
	} else if (cmd < 0 && vm->released) {
		vm->released = false;
		vm->release_waiting = false;
		changed = true;
		/* Not at once: the guest has just been given its memory; a hold first. */
		if (vm->ctl.hold_until_ms < now_ms + vm->d->cfg.ctl.hold_after_deflate_ms)
			vm->ctl.hold_until_ms = now_ms + vm->d->cfg.ctl.hold_after_deflate_ms;
		mtd_notice("%s: resumed: memtided may take memory again after %" PRIu64 " s",
			   vm->name, vm->d->cfg.ctl.hold_after_deflate_ms / 1000);
	}
	return changed;
}

/* A release still climbing toward the ceiling: it ticks each RELEASE_TICK_MS. */
static bool releasing(const struct mtd_vm *vm)
{
	return vm->released && vm->ctl.primed &&
	       vm->ctl.balloon_bytes < mtd_ctl_safe_bytes(&vm->policy, vm->domain_bytes);
}

static void *loop_main(void *arg)
{
	struct mtd_vm *vm = arg;
	const struct mtd_config *cfg = &vm->d->cfg;
	uint64_t next_tick;

	char tname[16];
	snprintf(tname, sizeof(tname), "vm:%.12s", vm->name); /* top -H, perf */
	(void)pthread_setname_np(pthread_self(), tname);
	rcu_register_thread();
	/* Whatever thread started it, a loop runs under the normal policy, and at nice
	 * +LOOP_NICE: per-thread on Linux, so only this loop (and the call worker it starts)
	 * yields. */
	struct sched_param sp = {.sched_priority = 0};
	(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	errno = 0;
	int nice_now = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	if (errno == 0)
		(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
				  nice_now + LOOP_NICE > 19 ? 19 : nice_now + LOOP_NICE);
	int rc = attach(vm);
	if (rc < 0) {
		if (rc != -ECANCELED) {
			set_error(vm, "attach failed: ", strerror(-rc));
			mtd_err("%s: attach failed: %s", vm->name, strerror(-rc));
			vm->draft.state = MTD_VM_ERROR;
			(void)mtd_vm_publish(vm);
		}
		goto out;
	}
	next_tick = mono_ms();
	uint64_t next_release = 0;
	while (!atomic_load(&vm->stop)) {
		uint64_t now = mono_ms();
		/* A ping in flight is answered before the tick's QMP calls could hold its pong
		 * up: the round trip measures the channel, not this loop (at most 50 ms). */
		uint64_t ping_back = vm->agent ? mtd_agent_link_ping_due_back(vm->agent) : 0;
		bool asked = take_mail(vm, now);
		if (now >= next_tick && now >= ping_back) {
			note_tick_gap(vm, now);
			tick(vm, now, true, 0);
			next_tick += cfg->ctl.interval_ms;
			if (next_tick <= now) /* fell behind (slow call): skip, do not burst */
				next_tick = now + cfg->ctl.interval_ms;
			next_release = now + RELEASE_TICK_MS;
		} else if (vm->ctl.primed && (asked || (releasing(vm) && now >= next_release))) {
			tick(vm, now, false, 0);
			next_release = now + RELEASE_TICK_MS;
		}
		/* The vsock device first: a session memtided just got may need a restart. */
		mtd_vm_vsock_step(vm);
		uint64_t deadline = next_tick > ping_back ? next_tick : ping_back;
		if (releasing(vm) && next_release < deadline)
			deadline = next_release;
		if (vm->agent && mtd_agent_link_deadline(vm->agent) < deadline)
			deadline = mtd_agent_link_deadline(vm->agent);
		now = mono_ms();
		struct pollfd p[2] = {{.fd = vm->wake_fd, .events = POLLIN}, {.fd = -1}};
		if (vm->agent && mtd_agent_link_fd(vm->agent) >= 0) {
			p[1].fd = mtd_agent_link_fd(vm->agent);
			p[1].events = mtd_agent_link_events(vm->agent);
		}
		int timeout = deadline > now ? (int)(deadline - now) : 0;
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			uint64_t v;
			if (read(vm->wake_fd, &v, sizeof(v)) < 0) {
				/* already drained */
			}
		}
		if (vm->agent) {
			now = mono_ms();
			mtd_agent_link_service(vm->agent, now);
			/* The agent says the guest needs memory: act now, not at the next tick. */
			uint64_t need = mtd_agent_link_take_need(vm->agent);
			if (need)
				tick(vm, now, false, need);
		}
	}
	/* Say at once that it is on its way out (saving the state below may take a moment). */
	vm->draft.detaching = atomic_load(&vm->detaching);
	(void)mtd_vm_publish(vm);
	/* Leaving (daemon exit, detach): the VM keeps the size it has.  Its state stays for the
	 * next memtided, unless the domain is gone. */
	if (vm->forget)
		(void)mtd_state_remove(cfg->state_dir, vm->name);
	else
		save_state(vm, mono_ms());
out:
	vm->draft.state = MTD_VM_DETACHED;
	(void)mtd_vm_publish(vm);
	mtd_hand_free(vm->hand);
	vm->hand = NULL;
	if (vm->guest)
		vmm_guest_free(vm->guest);
	vm->guest = NULL;
	mtd_source_destroy(&vm->source);
	mtd_agent_link_free(vm->agent);
	vm->agent = NULL;
	mtd_vsock_release(vm->vsock);
	vm->vsock = NULL;
	rcu_unregister_thread();
	/* Last: once queued, the main thread may join and free vm. */
	if (atomic_load(&vm->detaching) && mtd_daemon_queue_reap(vm->d, vm->name, vm->serial) < 0)
		mtd_err("%s: cannot queue its removal; it stays listed as detached", vm->name);
	return NULL;
}

int mtd_vm_loop_start(struct mtd_vm *vm)
{
	pthread_attr_t a;
	int rc;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, LOOP_STACK_BYTES);
	pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED); /* never a caller's RT policy */
	pthread_attr_setschedpolicy(&a, SCHED_OTHER);
	struct sched_param sp = {.sched_priority = 0};
	pthread_attr_setschedparam(&a, &sp);
	rc = pthread_create(&vm->thread, &a, loop_main, vm);
	pthread_attr_destroy(&a);
	if (rc)
		return -rc;
	vm->thread_started = true;
	return 0;
}

void mtd_vm_release(struct mtd_vm *vm, bool release)
{
	pthread_mutex_lock(&vm->mbox_lock);
	vm->release_cmd = release ? 1 : -1;
	pthread_mutex_unlock(&vm->mbox_lock);
	mtd_vm_wake(vm);
}

void mtd_vm_loop_request_stop(struct mtd_vm *vm, bool detach)
{
	if (detach)
		atomic_store(&vm->detaching, true);
	atomic_store(&vm->stop, true);
	mtd_vm_wake(vm);
}

int mtd_vm_loop_join(struct mtd_vm *vm, uint64_t deadline_ms)
{
	if (!vm->thread_started)
		return 0;
	for (;;) {
		/* pthread_timedjoin_np takes CLOCK_REALTIME: wait in short steps instead. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		int rc = pthread_timedjoin_np(vm->thread, NULL, &ts);
		if (rc == 0) {
			vm->thread_started = false;
			return 0;
		}
		if (rc != ETIMEDOUT)
			return -rc;
		if (mono_ms() >= deadline_ms)
			return -ETIMEDOUT;
	}
}

void mtd_vm_loop_stop(struct mtd_vm *vm)
{
	if (!vm->thread_started)
		return;
	atomic_store(&vm->stop, true);
	mtd_vm_wake(vm);
	pthread_join(vm->thread, NULL);
	vm->thread_started = false;
}
