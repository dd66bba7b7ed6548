// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_vsock.c - a VM loop's part of memtided's vhost-user-vsock back end (vm.h,
 * vsock_service.h): the device restart after memtided comes back to a running QEMU, and
 * the guest RAM layout from QEMU's memory table, checked against QMP before it is trusted.
 *
 * Called from the VM's loop thread on every wake (mtd_vm_vsock_step: a mutex and a copy of
 * the endpoint's state, QMP only when something changed) and when the status is built
 * (mtd_vm_channel_status).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "act/agent_link.h"
#include "base/log.h"
#include "act/ram_layout.h"
#include "vsock/vhost_layout.h"
#include "daemon/vm.h"
#include "vsock/vsock_service.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int qmp(struct mtd_vm *vm, const char *cmd, struct json_object *args,
	       struct json_object **ret, char *err, size_t errlen)
{
	if (!vm->balloon->qmp) {
		snprintf(err, errlen, "the %s actuator has no QMP", vm->balloon->name);
		return -ENOTSUP;
	}
	return vm->balloon->qmp(vm->balloon_ctx, cmd, args, ret, err, errlen);
}

/*
 * QEMU 7.2's vhost-user-vsock sends nothing to a back end that connects after it set the
 * device up; a VM stop and cont makes it stop and start its vhost device (virtio's vmstate
 * change), which replays features, memory table and rings to us.  Only for a running VM:
 * a paused one does the same when its operator resumes it.  A cont that fails is retried:
 * memtided must never leave a VM paused.
 */
static void restart_device(struct mtd_vm *vm)
{
	struct json_object *ret = NULL, *running;
	char err[200];
	uint64_t t0;
	int rc;

	rc = qmp(vm, "query-status", NULL, &ret, err, sizeof(err));
	if (rc < 0) {
		mtd_warn("%s: vsock: cannot restart the device: %s", vm->name, err);
		return;
	}
	bool is_running =
	    json_object_object_get_ex(ret, "running", &running) && json_object_get_boolean(running);
	json_object_put(ret);
	if (!is_running) {
		mtd_notice("%s: vsock: the VM is paused; its vsock device restarts when it resumes",
			   vm->name);
		return;
	}
	t0 = mono_ms();
	rc = qmp(vm, "stop", NULL, NULL, err, sizeof(err));
	if (rc < 0) {
		mtd_warn("%s: vsock: cannot restart the device (QMP stop: %s)", vm->name, err);
		return;
	}
	for (int i = 0; i < 5; i++) {
		rc = qmp(vm, "cont", NULL, NULL, err, sizeof(err));
		if (rc == 0)
			break;
		mtd_err("%s: vsock: QMP cont failed (%s): retrying, the VM is paused", vm->name,
			err);
	}
	vm->vsock_restarts++;
	mtd_notice("%s: vsock: restarted the device in QEMU (QMP stop/cont, %" PRIu64
		   " ms): memtided came back to a running VM",
		   vm->name, mono_ms() - t0);
}

/* The memory table against the layout QMP gives (ram_layout.h, vhost_layout.h). */
static void check_layout(struct mtd_vm *vm, const struct mtd_vsock_state *s)
{
	struct mtd_vm_status *st = &vm->draft;
	struct mtd_ram_layout *l = calloc(1, sizeof(*l));
	int pid = 0, rc;

	st->ram_layout_check = 0;
	if (!l || !vm->balloon->qmp || !vm->balloon->qemu_pid ||
	    vm->balloon->qemu_pid(vm->balloon_ctx, &pid) < 0) {
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot ask QEMU for its RAM map (%s)",
			 l ? "no QMP or no pid" : "no memory");
		free(l);
		return;
	}
	rc = mtd_ram_layout_query(vm->balloon->qmp, vm->balloon_ctx, pid, "/proc", l);
	if (rc < 0)
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot read QEMU's RAM map: %.120s", l->why);
	else
		st->ram_layout_check =
		    mtd_vhost_layout_check(s->regions, s->nr_regions, l, st->ram_layout_detail,
					   sizeof(st->ram_layout_detail));
	free(l);
	mtd_log(st->ram_layout_check == 1 ? MTD_LOG_NOTICE : MTD_LOG_WARNING,
		"%s: guest RAM layout from vhost-user: %s %s", vm->name,
		st->ram_layout_check == 1 ? "matches QMP:" : "DOES NOT match QMP:",
		st->ram_layout_detail);
}

void mtd_vm_vsock_step(struct mtd_vm *vm)
{
	struct mtd_vsock_state s;
	int pid = 0;

	if (!vm->vsock)
		return;
	mtd_vsock_state(vm->vsock, &s);
	vm->draft.vsock_connected = s.connected;
	/* Step 1: a session with no set-up on it, to the QEMU we manage: restart the device. */
	if (s.connected && !s.initialised && !s.started && vm->vsock_restart_session != s.session &&
	    (s.qemu_pid == 0 || vm->balloon->qemu_pid(vm->balloon_ctx, &pid) < 0 ||
	     pid == s.qemu_pid)) {
		vm->vsock_restart_session = s.session;
		restart_device(vm);
	}
	/* Step 2: a new memory table: publish it, check it. */
	if (s.nr_regions && s.layout_gen != vm->layout_checked_gen) {
		vm->layout_checked_gen = s.layout_gen;
		vm->draft.nr_ram_regions = s.nr_regions;
		for (unsigned i = 0; i < s.nr_regions && i < MTD_RAM_REGIONS; i++)
			vm->draft.ram_regions[i] = (struct mtd_vm_ram_region){
			    s.regions[i].gpa, s.regions[i].bytes, s.regions[i].qemu_va};
		check_layout(vm, &s);
	}
}

void mtd_vm_channel_status(struct mtd_vm *vm, struct mtd_vm_status *st)
{
	st->vsock = vm->vsock != NULL;
	st->vsock_restarts = vm->vsock_restarts;
	if (!vm->agent)
		return;
	snprintf(st->agent_transport, sizeof(st->agent_transport), "%s",
		 mtd_agent_link_ready(vm->agent) ? mtd_agent_link_transport(vm->agent) : "");
	mtd_agent_link_rtt(vm->agent, &st->agent_rtt_p50_us, &st->agent_rtt_p99_us,
			   &st->agent_rtt_samples);
	mtd_agent_link_rtt_total(vm->agent, &st->agent_rtt_count, &st->agent_rtt_sum_us);
	st->agent_rtt_tracked = true;
}
