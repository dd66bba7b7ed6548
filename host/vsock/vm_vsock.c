// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_vsock.c - a VM loop's part of memtided's vhost-user-vsock back end (vm_vsock.h,
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

#include "vsock/vm_vsock.h"

#include "act/agent_link.h"
#include "act/ram_layout.h"
#include "base/clock.h"
#include "base/log.h"
#include "vsock/kvsock.h"
#include "vsock/vhost_layout.h"
#include "vsock/vsock_service.h"

static int qmp(const struct mtd_balloon *b, const char *cmd, struct json_object *args,
	       struct json_object **ret, char *err, size_t errlen)
{
	if (!b->ops->qmp) {
		snprintf(err, errlen, "the %s actuator has no QMP", b->ops->name);
		return -ENOTSUP;
	}
	return b->ops->qmp(b->ctx, cmd, args, ret, err, errlen);
}

/*
 * QEMU 7.2's vhost-user-vsock sends nothing to a back end that connects after it set the
 * device up; a VM stop and cont makes it stop and start its vhost device (virtio's vmstate
 * change), which replays features, memory table and rings to us.  Only for a running VM:
 * a paused one does the same when its operator resumes it.  A cont that fails is retried:
 * memtided must never leave a VM paused.
 */
static void restart_device(struct mtd_vm_vsock *v, const struct mtd_balloon *b)
{
	struct json_object *ret = NULL, *running;
	char err[200];
	uint64_t t0;
	int rc;

	rc = qmp(b, "query-status", NULL, &ret, err, sizeof(err));
	if (rc < 0) {
		mtd_warn("%s: vsock: cannot restart the device: %s", b->vm, err);
		return;
	}
	bool is_running =
	    json_object_object_get_ex(ret, "running", &running) && json_object_get_boolean(running);
	json_object_put(ret);
	if (!is_running) {
		mtd_notice("%s: vsock: the VM is paused; its vsock device restarts when it resumes",
			   b->vm);
		return;
	}
	t0 = mtd_mono_ms();
	rc = qmp(b, "stop", NULL, NULL, err, sizeof(err));
	if (rc < 0) {
		mtd_warn("%s: vsock: cannot restart the device (QMP stop: %s)", b->vm, err);
		return;
	}
	for (int i = 0; i < 5; i++) {
		rc = qmp(b, "cont", NULL, NULL, err, sizeof(err));
		if (rc == 0)
			break;
		mtd_err("%s: vsock: QMP cont failed (%s): retrying, the VM is paused", b->vm, err);
	}
	v->restarts++;
	mtd_notice("%s: vsock: restarted the device in QEMU (QMP stop/cont, %" PRIu64
		   " ms): memtided came back to a running VM",
		   b->vm, mtd_mono_ms() - t0);
}

/* The memory table against the layout QMP gives (ram_layout.h, vhost_layout.h). */
static void check_layout(const struct mtd_balloon *b, const struct mtd_vsock_state *s,
			 struct mtd_vm_status *st)
{
	struct mtd_ram_layout *l = calloc(1, sizeof(*l));
	int pid = 0, rc;

	st->ram_layout_check = 0;
	if (!l || !b->ops->qmp || mtd_balloon_pid(b, &pid) < 0) {
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot ask QEMU for its RAM map (%s)",
			 l ? "no QMP or no pid" : "no memory");
		free(l);
		return;
	}
	rc = mtd_ram_layout_query(b->ops->qmp, b->ctx, pid, "/proc", l);
	if (rc < 0)
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot read QEMU's RAM map: %.120s", l->why);
	else
		st->ram_layout_check =
		    mtd_vhost_layout_check(s->regions, s->nr_regions, l, st->ram_layout_detail,
					   sizeof(st->ram_layout_detail));
	free(l);
	mtd_log(st->ram_layout_check == 1 ? MTD_LOG_NOTICE : MTD_LOG_WARNING,
		"%s: guest RAM layout from vhost-user: %s %s", b->vm,
		st->ram_layout_check == 1 ? "matches QMP:" : "DOES NOT match QMP:",
		st->ram_layout_detail);
}

void mtd_vm_vsock_step(struct mtd_vm_vsock *v, const struct mtd_balloon *b,
		       struct mtd_vm_status *draft)
{
	struct mtd_vsock_state s;
	int pid = 0;

	if (!v->claim)
		return;
	mtd_vsock_state(v->claim, &s);
	draft->vsock_connected = s.connected;
	/* Step 1: a session with no set-up on it, to the QEMU we manage: restart the device. */
	if (s.connected && !s.initialised && !s.started && v->restart_session != s.session &&
	    (s.qemu_pid == 0 || b->ops->qemu_pid(b->ctx, &pid) < 0 || pid == s.qemu_pid)) {
		v->restart_session = s.session;
		restart_device(v, b);
	}
	/* Step 2: a new memory table: publish it, check it. */
	if (s.nr_regions && s.layout_gen != v->layout_checked_gen) {
		v->layout_checked_gen = s.layout_gen;
		draft->nr_ram_regions = s.nr_regions;
		for (unsigned i = 0; i < s.nr_regions && i < MTD_RAM_REGIONS; i++)
			draft->ram_regions[i] = (struct mtd_vm_ram_region){
			    s.regions[i].gpa, s.regions[i].bytes, s.regions[i].qemu_va};
		check_layout(b, &s, draft);
	}
}

void mtd_vm_channel_status(const struct mtd_vm_vsock *v, struct mtd_agent_link *agent,
			   struct mtd_vm_status *st)
{
	st->vsock = v->claim != NULL;
	st->vsock_cid = mtd_kvsock_claim_cid(v->kclaim);
	st->vsock_restarts = v->restarts;
	if (!agent)
		return;
	snprintf(st->agent_transport, sizeof(st->agent_transport), "%s",
		 mtd_agent_link_ready(agent) ? mtd_agent_link_transport(agent) : "");
	mtd_agent_link_rtt(agent, &st->agent_rtt_p50_us, &st->agent_rtt_p99_us,
			   &st->agent_rtt_samples);
	snprintf(st->agent_untrusted, sizeof(st->agent_untrusted), "%s",
		 mtd_agent_link_untrusted(agent, &st->agent_clamped));
	mtd_agent_link_rtt_total(agent, &st->agent_rtt_count, &st->agent_rtt_sum_us);
	st->agent_rtt_tracked = true;
}
