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
 *           or came back;
 *   Step 6  publish the status snapshot (RCU).
 *
 * Peer health.  Every balloon call (QMP or libvirt) is bounded by [daemon] call_timeout
 * (qmp.c, bounded_call.c).  A call that times out marks the VM's peer unresponsive: one log
 * line, the status says since when and which call, and from then on the loop probes the peer
 * with one call at a time after 1, 2, 4 ... 30 s instead of every tick, carrying on with the
 * agent and its status meanwhile.  The first call that answers ends it (logged with its
 * duration).  Nothing is actuated while the peer is unresponsive: the VM stays as it is.
 *
 * Overload.  The loops run at nice +LOOP_NICE, so the control socket's thread and the main
 * thread (nice 0) win the CPU when the loops saturate it (measured in bench/daemon_scale.py:
 * 256 simulated VMs at 1 s with a CPU hog beside them).  A loop that cannot keep its interval
 * skips the ticks it missed rather than bursting (the ticks stretch, evenly across VMs since
 * they share one nice level), counts them (ticks_late), and says so once when it falls
 * behind and once when it is back.
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

#include "agent_link.h"
#include "choose.h"
#include "daemon.h"
#include "log.h"
#include "vm.h"

#define MiB                 ((uint64_t)1 << 20)
#define LOOP_STACK_BYTES    (256 * 1024)
#define BALLOON_ERROR_AFTER 3 /* failed actuations in a row before the VM shows ERROR */
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

	if (vm->agent_path[0]) {
		rc = mtd_agent_link_new(vm->agent_path, cfg->ctl.interval_ms, &vm->agent);
		if (rc < 0)
			return rc;
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
		rc = vmm_guest_new(&gc, &vm->guest);
		if (rc < 0)
			return rc;
	}
	struct vmm_reclaim_config rcfg;
	vmm_reclaim_config_default(&rcfg);
	rcfg.target_refault_per_min = vm->policy.target_refault_per_min;
	/* The threshold must be resolvable by the generations kept: nr_gens - 2 intervals. */
	uint64_t span_ms = (VMM_MAX_NR_GENS - 2) * cfg->ctl.interval_ms;
	if (rcfg.max_age_ms > span_ms)
		rcfg.max_age_ms = span_ms;
	if (rcfg.min_age_ms > rcfg.max_age_ms)
		rcfg.min_age_ms = rcfg.max_age_ms;
	if (rcfg.initial_age_ms > rcfg.max_age_ms || rcfg.initial_age_ms < rcfg.min_age_ms)
		rcfg.initial_age_ms = rcfg.max_age_ms;
	/* The reuse floor needs page-level truth: the agent's amounts, laid over the first
	 * pages of RAM, would read as reuses every time the guest's use grows back. */
	if (!vm->source.ops || !vm->source.ops->per_page)
		rcfg.reuse_tau_ms = 0;
	rc = vmm_reclaim_init(&vm->reclaim, &rcfg);
	if (rc < 0)
		return rc;
	vm->cold_age_ms = vm->reclaim.age_ms;

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
	    vm->agent_path[0] ? vm->agent_path : "none",
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
	uint64_t need_bytes;
	struct vmm_guest_stats gs;
	bool have_gs;
	bool wss_valid;
	uint64_t wss_bytes;
};

/* The guest's answer to the last reclaim request, once, as an action: what it freed is the
 * other half of an inflate an operator reads in `memtidectl vm show`. */
static void note_reclaim_reply(struct mtd_vm *vm, uint64_t now_ms)
{
	uint64_t seq;
	const struct proto_reclaim_reply *r = mtd_agent_link_reclaim_reply(vm->agent, &seq);

	if (!r || seq == vm->reclaim_seen)
		return;
	vm->reclaim_seen = seq;
	vm->draft.counters.reclaimed_bytes += r->freed_bytes;
	mtd_vm_audit(vm, now_ms, "reclaimed", r->requested_bytes, r->freed_bytes,
		     proto_reclaim_result_name(r->result), "guest", false);
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
		vm->balloon_actual = actual;
		vm->bstats = bs;
		if (bs.valid && bs.last_update_s != vm->bstats_seen_update_s) {
			vm->bstats_seen_update_s = bs.last_update_s;
			vm->bstats_seen_ms = t->now_ms;
		}
	} else {
		vm->bstats.valid = false;
	}
	read_rss(vm, t->now_ms);
	if (vm->agent) {
		mtd_agent_link_service(vm->agent, t->now_ms);
		uint64_t heard = mtd_agent_link_last_heard(vm->agent);
		t->agent_fresh = mtd_agent_link_ready(vm->agent) && heard &&
				 t->now_ms - heard <= cfg->ctl.agent_silence_ms;
		const struct proto_stats *as = mtd_agent_link_stats(vm->agent, &seq);
		t->as = t->agent_fresh ? as : NULL;
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
	int rc = vm->source.ops->age(vm->source.ctx, vm->guest, t->now_ms);
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
	/* The reuses the aging hand saw, by idle age: the threshold stays above the ages the
	 * guest still comes back to (vmm/reuse.c). */
	vmm_reclaim_observe_reuse(&vm->reclaim, t->gs.reuse_hist);
	vm->cold_age_ms = vmm_reclaim_update(&vm->reclaim, signal, t->gs.resident_pages, t->dt_ms);

	/* Two aging rounds at least before the estimate means anything. */
	if (vm->rounds >= 2 &&
	    vmm_wss(vm->guest, t->now_ms, &vm->cold_age_ms, 1, &t->wss_bytes) == 0)
		t->wss_valid = true;
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
	/* Deflate: the newest runs come back first. */
	uint64_t left = (to - from) >> VMM_PAGE_SHIFT;
	while (left && vm->nr_evicted) {
		struct vmm_run *r = &vm->evicted[vm->nr_evicted - 1];
		uint64_t n = r->npages < left ? r->npages : left;
		(void)vmm_restore(vm->guest, r->gpa + ((r->npages - n) << VMM_PAGE_SHIFT), n);
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
		return "operator";
	case MTD_CTL_EXIT:
		return "shutdown";
	default:
		return atomic_load(&vm->squeeze_permille) ? "arbiter" : "controller";
	}
}

/* Steps 3-5: the controller decides, the actuators carry it out. */
static void control(struct mtd_vm *vm, struct tick *t, bool exiting, struct mtd_ctl_output *out)
{
	const struct mtd_config *cfg = &vm->d->cfg;
	struct mtd_ctl_input in = {
	    .now_ms = t->now_ms,
	    .domain_bytes = vm->domain_bytes,
	    .actual_bytes = vm->balloon_actual,
	    .wss_valid = t->wss_valid,
	    .wss_bytes = t->wss_bytes,
	    .need_bytes = t->need_bytes,
	    .squeeze = atomic_load(&vm->squeeze_permille) / 1000.0,
	    .exiting = exiting,
	};
	char err[200] = "";

	if (vm->agent_expected)
		in.inputs_fresh = t->agent_fresh;
	else if (vm->source.ops && vm->source.ops->fresh)
		in.inputs_fresh = vm->source.ops->fresh(vm->source.ctx, t->now_ms);
	else
		in.inputs_fresh = vm->bstats_seen_ms &&
				  t->now_ms - vm->bstats_seen_ms <= cfg->ctl.agent_silence_ms;
	if (t->as) {
		const struct proto_hello *h = mtd_agent_link_hello(vm->agent);
		in.avail_known = true;
		in.guest_avail_bytes = t->as->mem_available_bytes;
		in.used_known = t->as->mem_total_bytes >= t->as->mem_free_bytes;
		in.guest_used_bytes = t->as->mem_total_bytes - t->as->mem_free_bytes;
		/* Soft return needs an agent that can reclaim and a balloon that reports the
		 * freed pages: without reporting, freed memory never reaches the host. */
		in.can_reclaim = h &&
				 (h->caps & (PROTO_CAP_RECLAIM_MEMCG | PROTO_CAP_RECLAIM_MGLRU)) &&
				 vm->fpr_known && vm->fpr_on;
		in.psi_known = t->as->has_psi;
		in.psi_some_avg10 = t->as->psi.some_avg10;
	} else if (vm->bstats.valid && vm->bstats.has_available) {
		in.avail_known = true;
		in.guest_avail_bytes = vm->bstats.available_bytes;
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
	uint64_t prev = vm->draft.balloon_target_bytes, prev_target = vm->draft.target_bytes;
	mtd_ctl_step(&cfg->ctl, &vm->policy, &in, &vm->ctl, out);
	vm->draft.target_bytes = out->target_bytes;
	vm->draft.soft = out->soft;
	vm->draft.guest_used_bytes = in.used_known ? in.guest_used_bytes : 0;

	/* What the host arbiter could still take here: down to the working set, never below
	 * the floor; nothing without an estimate or while the VM is not steerable. */
	uint64_t keep = t->wss_bytes > out->floor_bytes ? t->wss_bytes : out->floor_bytes;
	atomic_store(&vm->reclaimable_bytes,
		     t->wss_valid && vm->policy.enabled && !observe && out->target_bytes > keep
			 ? out->target_bytes - keep
			 : 0);
	uint64_t holds = out->soft && in.used_known ? in.guest_used_bytes : vm->balloon_actual;
	atomic_store(&vm->pending_bytes,
		     !observe && holds > out->target_bytes ? holds - out->target_bytes : 0);

	/* Transitions into a deflating reason are events an operator wants; the first tick's
	 * "silent" (the agent has not spoken yet) is not. */
	if (out->reason != before && prev != 0 &&
	    (out->reason == MTD_CTL_PRESSURE || out->reason == MTD_CTL_NEED ||
	     out->reason == MTD_CTL_SILENT))
		mtd_notice("%s: %s: giving memory back (target %" PRIu64 " MiB)", vm->name,
			   mtd_ctl_reason_name(out->reason), out->target_bytes / MiB);
	if (out->backoff_hold_ms)
		vm->draft.counters.refused_steps++;
	if (out->backoff_hold_ms)
		mtd_notice(
		    "%s: the guest gave back the step just taken (%u in a row): no inflation "
		    "for %" PRIu64 " s",
		    vm->name, vm->ctl.refusals, out->backoff_hold_ms / 1000);

	bool first = prev == 0;
	const char *reason = mtd_ctl_reason_name(out->reason);
	const char *source = change_source(vm, out->reason);
	/* Step 4 (eviction): the agent's reclaim.  before/after: what the guest uses, and what
	 * it is asked to use. */
	if (out->reclaim_bytes && vm->agent && (out->changed || first || out->soft)) {
		uint64_t used = in.used_known ? in.guest_used_bytes : vm->balloon_actual;
		uint64_t to = used > out->reclaim_bytes ? used - out->reclaim_bytes : 0;
		if (observe) {
			mtd_vm_audit(vm, t->now_ms, "reclaim", used, to, reason, source, true);
		} else if (mtd_agent_link_reclaim(vm->agent, out->reclaim_bytes, true,
						  (uint32_t)cfg->ctl.interval_ms, t->now_ms) == 0) {
			vm->draft.counters.reclaim_requests++;
			vm->draft.counters.reclaim_requested_bytes += out->reclaim_bytes;
			mtd_vm_audit(vm, t->now_ms, "reclaim", used, to, reason, source, false);
		}
	}
	/* libvmm follows the target, whichever actuator carries it out (not when nothing is
	 * carried out); with the balloon a cap, the target moves alone, and the trail says so. */
	if (!observe && out->target_bytes != (prev_target ? prev_target : vm->balloon_actual))
		account_target(vm, t->now_ms, prev_target ? prev_target : vm->balloon_actual,
			       out->target_bytes);
	if (out->soft && prev_target && out->target_bytes != prev_target &&
	    (out->target_bytes > prev_target ||
	     prev_target - out->target_bytes >= cfg->ctl.min_change_bytes))
		mtd_vm_audit(vm, t->now_ms, "target", prev_target, out->target_bytes, reason,
			     source, observe);
	if (!out->changed && !first)
		return;
	/* Step 5: the balloon. */
	if (observe) {
		if (!first && out->balloon_bytes != prev)
			mtd_vm_audit(vm, t->now_ms, "balloon", prev, out->balloon_bytes, reason,
				     source, true);
		vm->draft.balloon_target_bytes = out->balloon_bytes;
		return;
	}
	if (vm->peer_down_since_ms)
		return; /* nothing is actuated through a peer that does not answer */
	uint64_t t0 = mono_ms();
	int rc = vm->balloon->set_target(vm->balloon_ctx, out->balloon_bytes, err, sizeof(err));
	peer_note(vm, "balloon target", t0, rc, err);
	if (rc < 0 && vm->peer_down_since_ms)
		return; /* said once by peer_note; not an actuator error */
	if (rc < 0) {
		vm->balloon_failures++;
		vm->draft.counters.balloon_errors++;
		set_error(vm, "balloon: ", err);
		if (vm->balloon_failures == BALLOON_ERROR_AFTER)
			mtd_err("%s: balloon target failed %d times: %s", vm->name,
				BALLOON_ERROR_AFTER, err);
		return;
	}
	vm->balloon_failures = 0;
	vm->draft.balloon_target_bytes = out->balloon_bytes;
	if (!first && out->balloon_bytes < prev) {
		vm->draft.counters.inflations++;
		vm->draft.counters.inflated_bytes += prev - out->balloon_bytes;
	} else if (!first && out->balloon_bytes > prev) {
		vm->draft.counters.deflations++;
		vm->draft.counters.deflated_bytes += out->balloon_bytes - prev;
	}
	if (!first && out->balloon_bytes != prev)
		mtd_vm_audit(vm, t->now_ms, "balloon", prev, out->balloon_bytes, reason, source,
			     false);
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
	if (t->have_gs) {
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
	st->hold_left_ms =
	    vm->ctl.hold_until_ms > t->now_ms ? vm->ctl.hold_until_ms - t->now_ms : 0;
	st->refused_steps = vm->ctl.refusals;
	st->working_set_bytes = t->wss_bytes;
	st->controller_output = vm->reclaim.pid.output;
	st->agent_connected = vm->agent && mtd_agent_link_ready(vm->agent);
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
	} else if (vm->bstats.valid && vm->bstats.has_available) {
		st->guest_mem_available_bytes = vm->bstats.available_bytes;
	}
	if (vm->balloon_failures == 0 && st->state != MTD_VM_ERROR && !vm->peer_down_since_ms)
		st->last_error[0] = '\0';
	(void)mtd_vm_publish(vm);
	mtd_debug("%s: actual %" PRIu64 " MiB host rss %" PRIu64 " MiB balloon %" PRIu64
		  " MiB target %" PRIu64 " MiB used %" PRIu64 " MiB wss %" PRIu64
		  " MiB cold age %" PRIu64 " ms refaults %.5f/min %s",
		  vm->name, vm->balloon_actual / MiB, st->host_rss_bytes / MiB,
		  st->balloon_target_bytes / MiB, st->target_bytes / MiB,
		  st->guest_used_bytes / MiB, st->wss_bytes[0] / MiB, vm->cold_age_ms,
		  st->refault_rate_per_min, mtd_ctl_reason_name(out->reason));
}

/*
 * One tick.  age: a scheduled tick (libvmm ages a generation); an out-of-schedule tick for
 * the agent's need (extra_need_bytes) only reads inputs and deflates, so the generations
 * keep their one-per-interval spacing.
 */
static void tick(struct mtd_vm *vm, uint64_t now_ms, bool exiting, bool age,
		 uint64_t extra_need_bytes)
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
	control(vm, t, exiting, &out);
	publish(vm, t, &out);
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

static void take_policy(struct mtd_vm *vm)
{
	pthread_mutex_lock(&vm->mbox_lock);
	if (vm->policy_dirty) {
		vm->policy = vm->policy_new;
		vm->policy_dirty = false;
		mtd_notice("%s: policy %s min %" PRIu64 " MiB max %" PRIu64 " MiB priority %u "
			   "headroom %" PRIu64 " MiB target refaults %.4g/min",
			   vm->name, vm->policy.enabled ? "enabled" : "disabled",
			   vm->policy.min_bytes / MiB, vm->policy.max_bytes / MiB,
			   vm->policy.priority, vm->policy.headroom_bytes / MiB,
			   vm->policy.target_refault_per_min);
	}
	pthread_mutex_unlock(&vm->mbox_lock);
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
	while (!atomic_load(&vm->stop)) {
		uint64_t now = mono_ms();
		take_policy(vm);
		if (now >= next_tick) {
			note_tick_gap(vm, now);
			tick(vm, now, false, true, 0);
			next_tick += cfg->ctl.interval_ms;
			if (next_tick <= now) /* fell behind (slow call): skip, do not burst */
				next_tick = now + cfg->ctl.interval_ms;
		}
		uint64_t deadline = next_tick;
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
				tick(vm, now, false, false, need);
		}
	}
	/* Say at once that it is on its way out (the exit step below may take a call). */
	vm->draft.detaching = atomic_load(&vm->detaching);
	(void)mtd_vm_publish(vm);
	/* Leaving: daemon exit or detach of a running domain leaves it at its safe size. */
	if (atomic_load(&vm->exiting))
		tick(vm, mono_ms(), true, false, 0);
out:
	vm->draft.state = MTD_VM_DETACHED;
	(void)mtd_vm_publish(vm);
	if (vm->guest)
		vmm_guest_free(vm->guest);
	vm->guest = NULL;
	mtd_source_destroy(&vm->source);
	mtd_agent_link_free(vm->agent);
	vm->agent = NULL;
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

void mtd_vm_loop_request_stop(struct mtd_vm *vm, bool exit_safe, bool detach)
{
	if (exit_safe)
		atomic_store(&vm->exiting, true);
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

void mtd_vm_loop_stop(struct mtd_vm *vm, bool exit_safe)
{
	if (!vm->thread_started)
		return;
	if (exit_safe)
		atomic_store(&vm->exiting, true);
	atomic_store(&vm->stop, true);
	mtd_vm_wake(vm);
	pthread_join(vm->thread, NULL);
	vm->thread_started = false;
}
