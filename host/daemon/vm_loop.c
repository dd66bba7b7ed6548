// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_loop.c - one VM's control loop, on a thread of its own: the loop, its mail, and the
 * calls to the tick's stages (decide/tick.h lists them, each in its folder's file).
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
 * One tick is the data flow of docs/design.md, in order ("The tick"): 1 inputs, 2 age,
 * 3 decide, 4 act, 5 publish, 6 save.  The loop holds no rule of its own: when to tick, and
 * what the tick's stages are handed.
 *
 * Letting go: the loop never moves the balloon when it stops (daemon exit, detach) and
 * never gives memory back only because it lost sight of the guest (agent silent, stats
 * stale, the hypervisor unreachable): controller.h says why.  A balloon command that fails
 * is not recorded as done (act/balloon.h), nor is anything actuated through a peer that
 * does not answer.
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

#include "access/tick_age.h"
#include "access/tick_inputs.h"
#include "act/agent_link.h"
#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "act/tick_act.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/state.h"
#include "daemon/vm.h"
#include "decide/tick_decide.h"
#include "vsock/kvsock.h"
#include "vsock/vsock_service.h"

#define MiB              ((uint64_t)1 << 20)
#define LOOP_STACK_BYTES (256 * 1024)
#define RELEASE_TICK_MS  250 /* a release climbs 4 times a second (release_pace.h) */
#define LOOP_NICE        10  /* loops yield the CPU to the front ends and main thread */
#define BEHIND_AFTER     3   /* late ticks in a row before "falling behind" is said */

/* ---- one tick --------------------------------------------------------------------------- */

/* What the decision is handed of its VM and the daemon (also for the operator's release). */
static struct mtd_decide_env decide_env(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = vm->host->cfg;

	return (struct mtd_decide_env){
	    .vm = vm->name,
	    .ctl = &cfg->ctl,
	    .policy = &vm->policy,
	    .observe_only = cfg->observe_only,
	    .agent_expected = vm->agent_expected,
	    .max_step_bytes = cfg->pageout.max_step_bytes,
	    .stall_budget = cfg->pageout.stall_budget,
	    .squeeze_permille = atomic_load(&vm->squeeze_permille),
	    .draft = &vm->draft,
	    .release_upto = vm->host->release_upto,
	    .grant_ctx = vm->host->ctx,
	};
}

/*
 * One tick.  aging: a scheduled tick (libvmm ages a generation); an out-of-schedule tick for
 * the agent's need (extra_need_bytes), a release's climb or an operator's ask only reads
 * inputs and decides, so the generations keep their one-per-interval spacing.
 */
static void tick(struct mtd_vm *vm, uint64_t now_ms, bool aging, uint64_t extra_need_bytes)
{
	const struct mtd_config *cfg = vm->host->cfg;
	struct mtd_tick *t = calloc(1, sizeof(*t)); /* ~1.5 KiB of libvmm stats: off the stack */

	if (!t)
		return;
	t->now_ms = now_ms;
	t->aging = aging;
	t->need_bytes = extra_need_bytes;
	if (!vm->first_tick_ms)
		vm->first_tick_ms = now_ms;
	t->first_tick_ms = vm->first_tick_ms;
	if (aging) {
		t->dt_ms = vm->last_step_ms && now_ms > vm->last_step_ms ? now_ms - vm->last_step_ms
									 : cfg->ctl.interval_ms;
		vm->last_step_ms = now_ms;
	}

	struct mtd_inputs_env in = {
	    .vm = vm->name,
	    .ctl = &cfg->ctl,
	    .balloon = &vm->balloon,
	    .agent = vm->agent,
	    .draft = &vm->draft,
	    .audit = &vm->audit,
	};
	mtd_tick_inputs(&vm->dec, &vm->act, &in, t);
	/* A new QEMU (plain QMP: the same socket, another process): the source, libvmm's guest
	 * and host-side eviction's hand were the old process's (its pid, its table file, its
	 * frames); they start over on the new one before this tick ages anything. */
	if (t->qemu_restarted) {
		(void)mtd_vm_reattach_access(vm);
		vm->first_tick_ms = t->first_tick_ms = now_ms; /* no older age is vouched for */
	}

	struct mtd_age_env age = {
	    .vm = vm->name,
	    .source = &vm->source,
	    .guest = vm->guest,
	    .hand = vm->hand,
	    .memcg = vm->memcg,
	    .turns = vm->host->turns,
	    .simulated = cfg->source == MTD_SOURCE_SIM,
	    .agent_expected = vm->agent_expected,
	    .state = &vm->age_state,
	};
	mtd_tick_age(&age, t);

	mtd_tick_resume(vm, now_ms);
	struct mtd_decide_env dec = decide_env(vm);
	mtd_tick_decide(&vm->dec, &dec, vm->guest, t);

	struct mtd_act_env act = {
	    .vm = vm->name,
	    .ctl = &cfg->ctl,
	    .balloon = &vm->balloon,
	    .agent = vm->agent,
	    .hand = vm->hand,
	    .memcg = vm->memcg,
	    .guest = vm->guest,
	    .evicted = vm->source.ops ? vm->source.ops->evicted : NULL,
	    .paged_out = !vm->source.ops             ? NULL
			 : vm->source.ops->paged_out ? vm->source.ops->paged_out
						     : vm->source.ops->evicted,
	    .evicted_ctx = vm->source.ctx,
	    .draft = &vm->draft,
	    .audit = &vm->audit,
	    .reclaimable_bytes = &vm->reclaimable_bytes,
	    .pending_bytes = &vm->pending_bytes,
	};
	mtd_tick_act(&vm->act, &vm->dec, &act, t);

	mtd_tick_publish(vm, t);
	mtd_tick_save(vm, now_ms);
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
	uint64_t interval = vm->host->cfg->ctl.interval_ms;
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
	struct mtd_decide_env e = decide_env(vm);
	if (mtd_decide_release(&vm->dec, &e, cmd, vm->balloon.domain_bytes, now_ms))
		changed = true;
	return changed;
}

/* A release still climbing toward the ceiling: it ticks each RELEASE_TICK_MS. */
static bool releasing(const struct mtd_vm *vm)
{
	return mtd_decide_releasing(&vm->dec, &vm->policy, vm->balloon.domain_bytes);
}

static void *loop_main(void *arg)
{
	struct mtd_vm *vm = arg;
	const struct mtd_config *cfg = vm->host->cfg;
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
	int rc = mtd_vm_attach(vm);
	if (rc < 0) {
		if (rc != -ECANCELED) {
			mtd_vm_set_error(vm, "attach failed: ", strerror(-rc));
			mtd_err("%s: attach failed: %s", vm->name, strerror(-rc));
			vm->draft.state = MTD_VM_ERROR;
			(void)mtd_vm_publish(vm);
		}
		goto out;
	}
	next_tick = mtd_mono_ms();
	uint64_t next_release = 0;
	while (!atomic_load(&vm->stop)) {
		uint64_t now = mtd_mono_ms();
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
		} else if (vm->dec.ctl.primed &&
			   (asked || (releasing(vm) && now >= next_release))) {
			tick(vm, now, false, 0);
			next_release = now + RELEASE_TICK_MS;
		}
		/* The vsock device first: a session memtided just got may need a restart. */
		mtd_vm_vsock_step(&vm->vsock, &vm->balloon, &vm->draft);
		uint64_t deadline = next_tick > ping_back ? next_tick : ping_back;
		if (releasing(vm) && next_release < deadline)
			deadline = next_release;
		if (vm->agent && mtd_agent_link_deadline(vm->agent) < deadline)
			deadline = mtd_agent_link_deadline(vm->agent);
		now = mtd_mono_ms();
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
			now = mtd_mono_ms();
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
		mtd_tick_save(vm, mtd_mono_ms());
out:
	vm->draft.state = MTD_VM_DETACHED;
	(void)mtd_vm_publish(vm);
	mtd_hand_free(vm->hand);
	vm->hand = NULL;
	if (vm->guest)
		vmm_guest_free(vm->guest);
	vm->guest = NULL;
	mtd_source_destroy(&vm->source); /* before the cgroup's hand it reads */
	mtd_memcg_hand_free(vm->memcg);
	vm->memcg = NULL;
	mtd_agent_link_free(vm->agent);
	vm->agent = NULL;
	mtd_vsock_release(vm->vsock.claim);
	vm->vsock.claim = NULL;
	mtd_kvsock_release(vm->vsock.kclaim);
	vm->vsock.kclaim = NULL;
	rcu_unregister_thread();
	/* Last: once queued, the main thread may join and free vm. */
	if (atomic_load(&vm->detaching) && vm->host->reap(vm->host->ctx, vm->name, vm->serial) < 0)
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
		if (mtd_mono_ms() >= deadline_ms)
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
