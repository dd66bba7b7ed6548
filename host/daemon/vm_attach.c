// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_attach.c - a VM's attach, on its loop's thread before the first tick (vm.h,
 * mtd_vm_attach): each stage's part of the VM is made here, in the data flow's order.
 *
 *   the balloon (act/balloon.h): retried, with backoff up to 30 s, until it opens; without
 *            a balloon there is nothing to steer;
 *   the agent's channel (act/agent_link.h): virtio-serial (a socket to connect to), vsock
 *            (streams from the vsock service, vsock/), or both (the agent picks: vsock when
 *            its guest has one);
 *   the VM's memory cgroup (act/memcg_hand.h): host-side reclaim through the kernel,
 *            where there is no live page-level source (a KVM guest on a stock host);
 *   the access-bit source (access/choose.c, by the VM's policy; the simulated one under
 *            [daemon] source = sim); none at all: watched and kept safe, never inflated;
 *   libvmm's guest and reclaim controller (decide/tick_decide.h);
 *   host-side eviction's hand (act/pageout_hand.h), which asks QEMU for its memory map only
 *            the first time pageout is in force;
 *   free page reporting, asked once (act/balloon.c says why it matters).
 * A new QEMU behind the same monitor (mtd_vm_reattach_access) has its own pid, table file
 * and frames: the source, libvmm's guest and controller and the hand are made again.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "access/choose.h"
#include "act/agent_link.h"
#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "act/swap_share.h"
#include "base/log.h"
#include "daemon/vm.h"
#include "vsock/guest_cid.h"
#include "vsock/kvsock.h"
#include "vsock/vsock_service.h"

#define MiB ((uint64_t)1 << 20)

static uint64_t name_seed(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* Sleep until timeout or a wake-up; true when the loop must stop. */
static bool wait_wake(struct mtd_vm *vm, int timeout_ms)
{
	struct pollfd p = {.fd = vm->wake_fd, .events = POLLIN};
	uint64_t v;

	if (poll(&p, 1, timeout_ms) > 0 && read(vm->wake_fd, &v, sizeof(v)) < 0) {
		/* drained by someone else: fine */
	}
	return atomic_load(&vm->stop);
}

/* Host-side eviction's hand: it asks QEMU for the memory map the first time pageout is in
 * force. */
static int attach_pageout(struct mtd_vm *vm)
{
	struct mtd_hand_env env = {
	    .vm_name = vm->name,
	    .qmp = vm->balloon.ops->qmp,
	    .qmp_ctx = vm->balloon.ctx,
	    .live_source = mtd_source_live(&vm->source, vm->host->cfg->source == MTD_SOURCE_SIM),
	    .source_name = vm->source.ops ? vm->source.ops->name : "none",
	    .swap_take = vm->host->swap ? mtd_swap_share_take : NULL,
	    .swap_done = vm->host->swap ? mtd_swap_share_done : NULL,
	    .swap_ctx = vm->host->swap,
	    .memjob = vm->balloon.ops->memjob,
	    .memjob_ctx = vm->balloon.ctx,
	};
	int pid;

	if (mtd_balloon_pid(&vm->balloon, &pid) == 0)
		env.qemu_pid = pid;
	return mtd_hand_new(&vm->host->cfg->pageout, &env, &vm->hand);
}

/* The VM's memory cgroup, for host-side reclaim through the kernel (memcg_hand.h): the
 * chooser calls this only when the memcg source is tried (policy source=memcg, or auto with
 * no other source: access/choose.h), so a VM another source serves is never moved nor
 * reclaimed through its cgroup.  In plain-QEMU mode memtided may move QEMU into a cgroup of
 * its own, unless the VM's policy says return=balloon (host-side eviction can never run for
 * it: nothing to move QEMU for); libvirt owns its domains' cgroups, and a QEMU already alone
 * in a cgroup of its own is used where it is (act/vm_cgroup.h).  No cgroup it can use: the
 * VM goes on without it (why goes to the source notes). */
static int open_memcg(void *ctx, struct mtd_memcg_hand **out, char *why, size_t whylen)
{
	struct mtd_vm *vm = ctx;
	struct mtd_memcg_hand_env env = {
	    .vm_name = vm->name,
	    .qmp = vm->balloon.ops->qmp,
	    .qmp_ctx = vm->balloon.ctx,
	    .may_move = strcmp(vm->balloon.ops->name, "libvirt") != 0 &&
			vm->policy.return_via != MTD_RETURN_BALLOON,
	    .turns = vm->host->reclaim_turns,
	    .swap_take = vm->host->swap ? mtd_swap_share_take : NULL,
	    .swap_done = vm->host->swap ? mtd_swap_share_done : NULL,
	    .swap_ctx = vm->host->swap,
	    .memjob = vm->balloon.ops->memjob,
	    .memjob_ctx = vm->balloon.ctx,
	};
	int pid;

	*out = NULL;
	if (mtd_balloon_pid(&vm->balloon, &pid) == 0)
		env.qemu_pid = pid;
	int rc = mtd_memcg_hand_new(&vm->host->cfg->pageout, &env, &vm->memcg, why, whylen);
	if (!vm->memcg && why[0])
		mtd_info("%s: no host-side reclaim through a cgroup: %s", vm->name, why);
	*out = vm->memcg;
	return rc;
}

/* The access-bit source, chosen per VM by its policy (host/access/choose.c). */
static int choose_source(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = vm->host->cfg;
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	int pid = 0;

	mtd_access_env_default(&env);
	if (vm->balloon.ops->qemu_pid && mtd_balloon_pid(&vm->balloon, &pid) < 0)
		pid = 0;
	env.vm_name = vm->name;
	env.guest_bytes = vm->balloon.domain_bytes;
	env.qemu_pid = pid;
	env.qmp = vm->balloon.ops->qmp;
	env.qmp_ctx = vm->balloon.ctx;
	bool kvm = false;
	if (mtd_balloon_on_kvm(&vm->balloon, &kvm) == 0)
		env.on_kvm = kvm;
	env.agent = vm->agent;
	env.interval_ms = cfg->ctl.interval_ms;
	env.agent_silence_ms = cfg->ctl.agent_silence_ms;
	env.pref = vm->policy.source;
	env.ept_window_ms = vm->policy.ept_window_ms;
	env.ept_dir = cfg->ept_dir;
	env.run_dir = cfg->run_dir;
	env.young_dump_dir = cfg->young_dump_dir;
	env.memcg_open = open_memcg;
	env.memcg_ctx = vm;
	int rc = mtd_access_choose(&env, &vm->source, &ch);
	if (rc < 0)
		return rc;
	mtd_access_choice_to_status(&ch, &vm->draft);
	for (unsigned i = 0; i < ch.nr_notes; i++)
		mtd_info("%s: source %s not used: %s", vm->name, ch.notes[i].name, ch.notes[i].why);
	if (strcmp(ch.chosen, "memcg") == 0)
		mtd_info("%s: source memcg: %s", vm->name, ch.detail);
	return 0;
}

/* The hypervisor side first: without a balloon there is nothing to steer. */
static int open_balloon(struct mtd_vm *vm)
{
	char err[200];
	unsigned delay_ms = 500;

	vm->balloon.call_timeout_ms = vm->host->cfg->call_timeout_ms;
	while (mtd_balloon_open(&vm->balloon, &vm->draft, err, sizeof(err)) < 0) {
		mtd_vm_set_error(vm, "", err);
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
	vm->draft.max_bytes = vm->balloon.domain_bytes;
	mtd_balloon_attached(&vm->balloon);
	return 0;
}

/* The kernel's vsock: the VM's CID (the domain XML's, or QEMU's command line's), claimed
 * on memtided's AF_VSOCK listener.  Whatever fails is said and leaves the VM without that
 * channel (a virtio-serial one still works): the VM is managed all the same. */
static void claim_kernel_vsock(struct mtd_vm *vm)
{
	uint32_t cid = vm->kvsock_cid;
	int pid = 0, rc = 0;

	if (!cid) {
		rc = mtd_balloon_pid(&vm->balloon, &pid);
		if (rc == 0)
			rc = mtd_guest_cid_of_pid("/proc", pid, &cid);
		if (rc < 0) {
			mtd_err("%s: vsock: no guest CID: %s (the agent connects over the kernel's "
				"vsock from the CID on QEMU's -device vhost-vsock-pci,guest-cid=N; "
				"QEMU pid %d)",
				vm->name,
				rc == -ENOENT   ? "QEMU has no kernel vsock device"
				: rc == -E2BIG  ? "QEMU has two kernel vsock devices"
				: rc == -EINVAL ? "its guest-cid is missing or not a guest's CID"
						: strerror(-rc),
				pid);
			return;
		}
	}
	if (!vm->host->kvsock) {
		mtd_err("%s: vsock: the VM has the kernel's vsock device (CID %u) but memtided "
			"does not listen on AF_VSOCK ([daemon] kernel_vsock, or it could not "
			"start): its agent cannot reach memtided that way",
			vm->name, cid);
		return;
	}
	rc = mtd_kvsock_claim(vm->host->kvsock, vm->name, cid, vm->wake_fd, &vm->vsock.kclaim);
	if (rc < 0 && rc != -EEXIST) /* -EEXIST is logged by the claim, with the other VM */
		mtd_err("%s: vsock: cannot claim CID %u: %s", vm->name, cid, strerror(-rc));
	else if (rc == 0)
		mtd_info("%s: vsock: the agent's connections from CID %u are this VM's", vm->name,
			 cid);
}

static int open_agent(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = vm->host->cfg;
	int rc;

	if (vm->vsock_expected && vm->host->vsock) {
		rc = mtd_vsock_claim(vm->host->vsock, vm->name, vm->wake_fd, &vm->vsock.claim);
		if (rc < 0)
			return rc;
		vm->draft.ram_layout_check = -1;
	}
	if (vm->kvsock_expected)
		claim_kernel_vsock(vm);
	if (vm->agent_path[0] || vm->vsock.claim || vm->vsock.kclaim) {
		char label[MTD_NAME_MAX + 8];

		rc = mtd_agent_link_new(vm->agent_path, cfg->ctl.interval_ms, &vm->agent);
		if (rc < 0)
			return rc;
		snprintf(label, sizeof(label), "vsock:%s", vm->name);
		if (vm->vsock.claim)
			mtd_agent_link_set_fd_source(vm->agent, mtd_vsock_take_fd, vm->vsock.claim,
						     label);
		else if (vm->vsock.kclaim)
			mtd_agent_link_set_fd_source(vm->agent, mtd_kvsock_take_fd,
						     vm->vsock.kclaim, label);
		mtd_agent_link_set_ping(vm->agent, cfg->agent_ping_ms);
		mtd_agent_link_set_ram(vm->agent, vm->balloon.domain_bytes);
	}
	return 0;
}

/* libvmm's guest over the source's RAM, and its reclaim controller. */
static int open_libvmm(struct mtd_vm *vm)
{
	const struct mtd_config *cfg = vm->host->cfg;
	int rc;

	if (vm->source.ops) {
		struct vmm_guest_config gc;
		vmm_guest_config_default(&gc);
		gc.ram = vm->source.ram;
		gc.nr_ram = vm->source.nr_ram;
		gc.nr_gens = VMM_MAX_NR_GENS;
		/* The agent's amounts: what lies beyond them is what the guest says it does not
		 * use, not pages libvmm has yet to watch (source_agent.c). */
		gc.unseen_is_unused = !vm->source.ops->per_page;
		/* Page-level bits: pages that came back are told from pages that never did, so
		 * the controller can take the latter when the former come back late
		 * (vmm/reclaim_ctl.c, "Weighing"). */
		gc.reuse_raises_tier = vm->source.ops->per_page;
		/* Code and page-table pages the ept plugin cannot see used would otherwise
		 * cycle evict -> refault in tier 0 (vmm.h, refault_raises_tier). */
		gc.refault_raises_tier = vm->source.ops->loads_stores_only;
		rc = vmm_guest_new(&gc, &vm->guest);
		if (rc < 0)
			return rc;
	}
	struct vmm_reclaim_config rcfg;
	vmm_reclaim_config_default(&rcfg);
	rcfg.target_refault_per_min = vm->policy.target_refault_per_min;
	/* The threshold must be resolvable by the generations kept (an hour and more at 5 s). */
	vmm_reclaim_config_fit(&rcfg, VMM_MAX_NR_GENS, cfg->ctl.interval_ms);
	/* The reuse floor needs page-level truth: the agent's amounts, laid over the first
	 * pages of RAM, would read as reuses every time the guest's use grows back. */
	if (!vm->source.ops || !vm->source.ops->per_page)
		rcfg.reuse_tau_ms = 0;
	rc = vmm_reclaim_init(&vm->dec.reclaim, &rcfg);
	if (rc < 0)
		return rc;
	vm->dec.cold_age_ms = vm->dec.reclaim.age_ms;
	return 0;
}

/* The source: the simulated one under [daemon] source = sim, else the policy's choice. */
static int open_source(struct mtd_vm *vm)
{
	if (vm->host->cfg->source == MTD_SOURCE_SIM) {
		snprintf(vm->draft.source, sizeof(vm->draft.source), "sim");
		return mtd_source_sim_new(vm->balloon.domain_bytes, vm->host->cfg->sim_hot_percent,
					  name_seed(vm->name), &vm->source);
	}
	return choose_source(vm); /* none at all: watched and kept safe, never inflated */
}

int mtd_vm_reattach_access(struct mtd_vm *vm)
{
	int pid = 0, rc;

	mtd_hand_free(vm->hand);
	vm->hand = NULL;
	mtd_memcg_hand_free(vm->memcg);
	vm->memcg = NULL;
	if (vm->guest)
		vmm_guest_free(vm->guest);
	vm->guest = NULL;
	mtd_source_destroy(&vm->source);
	memset(&vm->age_state, 0, sizeof(vm->age_state));
	rc = open_source(vm);
	if (rc == 0)
		rc = open_libvmm(vm);
	if (rc == 0)
		rc = attach_pageout(vm);
	if (mtd_balloon_pid(&vm->balloon, &pid) < 0)
		pid = 0;
	if (rc < 0) {
		mtd_err("%s: QEMU restarted (pid %d): cannot attach to it again: %s; the VM is "
			"watched and kept at its size",
			vm->name, pid, strerror(-rc));
		if (vm->guest)
			vmm_guest_free(vm->guest);
		vm->guest = NULL;
		mtd_source_destroy(&vm->source);
		snprintf(vm->draft.source, sizeof(vm->draft.source), "none");
		snprintf(vm->draft.source_detail, sizeof(vm->draft.source_detail),
			 "QEMU restarted: cannot attach to it again: %s", strerror(-rc));
		return rc;
	}
	mtd_notice("%s: QEMU restarted (pid %d): source %s, libvmm's generations and host-side "
		   "eviction start over on the new process",
		   vm->name, pid, vm->source.ops ? vm->source.ops->name : "none");
	return 0;
}

int mtd_vm_attach(struct mtd_vm *vm)
{
	int rc;

	rc = open_balloon(vm);
	if (rc < 0)
		return rc;
	rc = open_agent(vm);
	if (rc < 0)
		return rc;
	rc = open_source(vm);
	if (rc < 0)
		return rc;
	rc = open_libvmm(vm);
	if (rc < 0)
		return rc;
	rc = attach_pageout(vm);
	if (rc < 0)
		return rc;
	mtd_balloon_query_fpr(&vm->balloon, &vm->draft);
	mtd_notice(
	    "%s: attached: %" PRIu64 " MiB, balloon via %s, source %s, agent %s; policy "
	    "%s min %" PRIu64 " MiB max %" PRIu64 " MiB priority %u headroom %" PRIu64 " MiB",
	    vm->name, vm->balloon.domain_bytes / MiB, vm->balloon.ops->name,
	    vm->source.ops ? vm->source.ops->name : "none",
	    vm->agent_path[0]  ? vm->agent_path
	    : vm->vsock.claim  ? "vsock"
	    : vm->vsock.kclaim ? "vsock (kernel)"
			       : "none",
	    vm->policy.enabled ? "enabled" : "disabled", vm->policy.min_bytes / MiB,
	    vm->policy.max_bytes / MiB, vm->policy.priority, vm->policy.headroom_bytes / MiB);
	return 0;
}
