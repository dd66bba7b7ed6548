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
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agent_link.h"
#include "log.h"
#include "ram_layout.h"
#include "vm.h"
#include "vsock_service.h"

#define MAPS_MAX_BYTES (4u << 20) /* /proc/PID/maps of a QEMU: a few hundred lines */

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

/* QEMU's mappings, read whole (bounded). */
static char *read_maps(int pid)
{
	char path[64];
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !buf) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	for (;;) {
		if (len + 1 == cap) {
			char *n = cap * 2 <= MAPS_MAX_BYTES ? realloc(buf, cap * 2) : NULL;
			if (!n)
				break;
			buf = n;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

/* The memory table against QMP's flat view and QEMU's maps (ram_layout.c). */
static void check_layout(struct mtd_vm *vm, const struct mtd_vsock_state *s)
{
	struct mtd_vm_status *st = &vm->draft;
	struct json_object *args = json_object_new_object(), *ret = NULL;
	char err[200], *maps = NULL;
	int pid = 0, rc;

	st->ram_layout_check = 0;
	json_object_object_add(args, "command-line", json_object_new_string("info mtree -f"));
	rc = qmp(vm, "human-monitor-command", args, &ret, err, sizeof(err));
	json_object_put(args);
	if (rc < 0 || !json_object_is_type(ret, json_type_string)) {
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot read QEMU's memory tree: %.120s", rc < 0 ? err : "not a string");
		json_object_put(ret);
		return;
	}
	if (vm->balloon->qemu_pid(vm->balloon_ctx, &pid) == 0)
		maps = read_maps(pid);
	if (!maps) {
		snprintf(st->ram_layout_detail, sizeof(st->ram_layout_detail),
			 "cannot read QEMU's mappings (pid %d)", pid);
		json_object_put(ret);
		return;
	}
	rc = mtd_ram_layout_check(s->regions, s->nr_regions, json_object_get_string(ret), maps,
				  st->ram_layout_detail, sizeof(st->ram_layout_detail));
	st->ram_layout_check = rc == 1 ? 1 : 0;
	json_object_put(ret);
	free(maps);
	mtd_log(rc == 1 ? MTD_LOG_NOTICE : MTD_LOG_WARNING,
		"%s: guest RAM layout from vhost-user: %s", vm->name, st->ram_layout_detail);
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
			vm->draft.ram_regions[i] = (struct mtd_ram_region){
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
}
