// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * status_json.c - encode memtided's status snapshots (host/base/mtd.h) as JSON for the control
 * socket.  Pure functions of the snapshot: no locks, no I/O.  What they write is read back
 * through the control socket by tests/integration/host_ctl.sh and host_observe.sh.
 *
 * Integers stay integers (json-c int64: bytes up to 8 EiB, never rounded through double);
 * rates are doubles.  Names are stable: memtidectl and operators' scripts read them.
 */
#include "front/status_json.h"

#include <stdint.h>
#include <string.h>

#include "act/agent_caps.h"
#include "front/pageout_json.h"

static void put_u64(struct json_object *o, const char *k, uint64_t v)
{
	/* Anything above INT64_MAX is not a real size or time; clamp rather than wrap. */
	json_object_object_add(o, k, json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v));
}

static void put_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}

struct json_object *mtd_json_policy(const struct mtd_policy *p)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "enabled", json_object_new_boolean(p->enabled));
	put_u64(o, "min_bytes", p->min_bytes);
	put_u64(o, "max_bytes", p->max_bytes);
	put_u64(o, "priority", p->priority);
	json_object_object_add(o, "target_refault_per_min",
			       json_object_new_double(p->target_refault_per_min));
	put_u64(o, "headroom_bytes", p->headroom_bytes);
	put_str(o, "return", mtd_return_via_name(p->return_via));
	put_str(o, "source", mtd_access_pref_name(p->source));
	put_u64(o, "ept_window_ms", p->ept_window_ms);
	json_object_object_add(o, "observe", json_object_new_boolean(p->observe));
	put_u64(o, "cold_age_ms", p->cold_age_ms);
	return o;
}

static struct json_object *gens(const struct mtd_vm_status *st)
{
	struct json_object *a = json_object_new_array();
	unsigned n = st->nr_gens < MTD_MAX_GENS ? st->nr_gens : MTD_MAX_GENS;

	for (unsigned i = 0; i < n; i++) {
		struct json_object *g = json_object_new_object();

		put_u64(g, "pages", st->gen_pages[i]);
		put_u64(g, "age_ms", st->gen_age_ms[i]);
		json_object_array_add(a, g);
	}
	return a;
}

static struct json_object *wss(const struct mtd_vm_status *st)
{
	struct json_object *a = json_object_new_array();

	for (unsigned i = 0; i < MTD_WSS_BINS; i++) {
		struct json_object *b = json_object_new_object();

		put_u64(b, "idle_age_ms", st->wss_age_ms[i]);
		put_u64(b, "bytes", st->wss_bytes[i]);
		json_object_array_add(a, b);
	}
	return a;
}

static struct json_object *actions(const struct mtd_vm_status *st)
{
	struct json_object *a = json_object_new_array();
	unsigned n = st->nr_actions < MTD_LAST_ACTIONS ? st->nr_actions : MTD_LAST_ACTIONS;

	for (unsigned i = 0; i < n; i++) {
		struct json_object *x = json_object_new_object();

		put_u64(x, "at_ms", st->actions[i].at_ms);
		put_str(x, "what", st->actions[i].what);
		json_object_array_add(a, x);
	}
	return a;
}

/* The guest RAM layout from the vhost-user memory table, with its check against QMP. */
static struct json_object *ram_layout(const struct mtd_vm_status *st)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	unsigned n = st->nr_ram_regions < MTD_RAM_REGIONS ? st->nr_ram_regions : MTD_RAM_REGIONS;

	put_str(o, "source", "vhost-user");
	for (unsigned i = 0; i < n; i++) {
		struct json_object *r = json_object_new_object();

		put_u64(r, "gpa", st->ram_regions[i].gpa);
		put_u64(r, "bytes", st->ram_regions[i].bytes);
		put_u64(r, "qemu_va", st->ram_regions[i].qemu_va);
		json_object_array_add(a, r);
	}
	json_object_object_add(o, "regions", a);
	/* null until checked */
	json_object_object_add(
	    o, "matches_qmp",
	    st->ram_layout_check < 0 ? NULL : json_object_new_boolean(st->ram_layout_check == 1));
	put_str(o, "detail", st->ram_layout_detail);
	return o;
}

static struct json_object *agent_rtt(const struct mtd_vm_status *st)
{
	struct json_object *o = json_object_new_object();

	put_u64(o, "p50_us", st->agent_rtt_p50_us);
	put_u64(o, "p99_us", st->agent_rtt_p99_us);
	put_u64(o, "samples", st->agent_rtt_samples);
	return o;
}

struct json_object *mtd_json_vm(const struct mtd_vm_status *st, bool full)
{
	struct json_object *o = json_object_new_object();

	put_str(o, "name", st->name);
	put_str(o, "uuid", st->uuid);
	put_str(o, "state", mtd_vm_state_name(st->state));
	put_u64(o, "updated_ms", st->updated_ms);
	put_u64(o, "max_bytes", st->max_bytes);
	put_u64(o, "balloon_target_bytes", st->balloon_target_bytes);
	put_u64(o, "target_bytes", st->target_bytes);
	put_str(o, "return_in_force", mtd_return_via_name(st->return_in_force));
	json_object_object_add(o, "pageout", mtd_json_pageout(&st->pageout));
	if (st->memcg.in_use)
		json_object_object_add(o, "memcg", mtd_json_memcg(&st->memcg));
	put_u64(o, "guest_used_bytes", st->guest_used_bytes);
	put_u64(o, "balloon_actual_bytes", st->balloon_actual_bytes);
	put_u64(o, "host_rss_bytes", st->host_rss_bytes);
	put_u64(o, "saved_bytes", st->saved_bytes); /* = returned_bytes; the old name, kept */
	put_u64(o, "returned_bytes", st->returned_bytes);
	put_u64(o, "untouched_bytes", st->untouched_bytes);
	json_object_object_add(o, "observe", json_object_new_boolean(st->observe));
	put_u64(o, "working_set_bytes", st->working_set_bytes);
	json_object_object_add(o, "refault_rate_per_min",
			       json_object_new_double(st->refault_rate_per_min));
	put_u64(o, "cold_age_ms", st->cold_age_ms);
	put_u64(o, "reuse_floor_ms", st->reuse_floor_ms);
	put_str(o, "reclaim_hold", st->reclaim_hold);
	put_str(o, "eviction", st->eviction);
	put_u64(o, "hold_left_ms", st->hold_left_ms);
	put_u64(o, "refused_steps", st->refused_steps);
	json_object_object_add(o, "agent_connected", json_object_new_boolean(st->agent_connected));
	put_str(o, "agent_transport", st->agent_transport);
	put_str(o, "agent_untrusted", st->agent_untrusted);
	put_u64(o, "agent_figures_clamped", st->agent_clamped);
	json_object_object_add(o, "vsock", json_object_new_boolean(st->vsock));
	if (st->vsock_cid)
		put_u64(o, "vsock_cid", st->vsock_cid);
	if (st->agent_caps_known) {
		char names[160], means[400];
		struct json_object *caps = json_object_new_array();
		mtd_agent_caps_names(st->agent_caps, names, sizeof(names));
		for (char *save = NULL, *w = strtok_r(names, " ", &save); w;
		     w = strtok_r(NULL, " ", &save))
			json_object_array_add(caps, json_object_new_string(w));
		json_object_object_add(o, "agent_caps", caps);
		mtd_agent_caps_consequence(st->agent_caps, means, sizeof(means));
		put_str(o, "agent_caps_consequence", means);
	}
	json_object_object_add(o, "fpr_on", json_object_new_boolean(st->fpr_on));
	json_object_object_add(o, "released", json_object_new_boolean(st->released));
	put_u64(o, "release_left_bytes", st->release_left_bytes);
	json_object_object_add(o, "release_waiting", json_object_new_boolean(st->release_waiting));
	json_object_object_add(o, "resumed", json_object_new_boolean(st->resumed));
	put_str(o, "last_error", st->last_error);
	put_str(o, "source", st->source[0] ? st->source : "none");
	/* The hypervisor peer and the loop's timing (docs/control-socket.md). */
	json_object_object_add(o, "peer_unresponsive",
			       json_object_new_boolean(st->peer_unresponsive_since_ms != 0));
	put_u64(o, "peer_unresponsive_since_ms", st->peer_unresponsive_since_ms);
	put_str(o, "peer_call", st->peer_call);
	put_u64(o, "tick_gap_ms", st->tick_gap_ms);
	put_u64(o, "ticks_late", st->ticks_late);
	json_object_object_add(o, "behind", json_object_new_boolean(st->behind));
	json_object_object_add(o, "detaching", json_object_new_boolean(st->detaching));
	if (!full)
		return o;
	put_str(o, "source_detail", st->source_detail);
	put_str(o, "wss_source", st->wss_source);
	put_str(o, "decision", st->decision);
	put_str(o, "decision_detail", st->decision_detail);
	struct json_object *nt = json_object_new_array();
	for (unsigned i = 0; i < st->nr_source_not_taken && i < MTD_SOURCE_NOTES; i++) {
		struct json_object *x = json_object_new_object();
		put_str(x, "source", st->source_not_taken[i].name);
		put_str(x, "why", st->source_not_taken[i].why);
		json_object_array_add(nt, x);
	}
	json_object_object_add(o, "source_not_taken", nt);
	json_object_object_add(o, "policy", mtd_json_policy(&st->policy));
	json_object_object_add(o, "controller_output",
			       json_object_new_double(st->controller_output));
	put_u64(o, "guest_mem_available_bytes", st->guest_mem_available_bytes);
	json_object_object_add(o, "guest_psi_some_avg10",
			       json_object_new_double(st->guest_psi_some_avg10));
	json_object_object_add(o, "working_set", wss(st));
	json_object_object_add(o, "generations", gens(st));
	json_object_object_add(o, "actions", actions(st));
	json_object_object_add(o, "agent_rtt", agent_rtt(st));
	if (st->vsock) {
		struct json_object *v = json_object_new_object();

		json_object_object_add(v, "connected",
				       json_object_new_boolean(st->vsock_connected));
		put_u64(v, "restarts", st->vsock_restarts);
		json_object_object_add(o, "vsock_device", v);
	}
	if (st->vsock || st->nr_ram_regions)
		json_object_object_add(o, "ram_layout", ram_layout(st));
	return o;
}

struct json_object *mtd_json_host(const struct mtd_host_status *h)
{
	struct json_object *o = json_object_new_object();

	put_u64(o, "mem_total_bytes", h->mem_total_bytes);
	put_u64(o, "mem_available_bytes", h->mem_available_bytes);
	put_u64(o, "low_mark_bytes", h->low_mark_bytes);
	json_object_object_add(o, "under_pressure", json_object_new_boolean(h->under_pressure));
	put_u64(o, "nr_vms", h->nr_vms);
	put_u64(o, "saved_bytes", h->saved_bytes); /* what memtide returned, every VM */
	json_object_object_add(o, "observe_only", json_object_new_boolean(h->observe_only));
	mtd_json_host_swap(o, h);
	put_u64(o, "release_rate_bytes_per_s", h->release_rate_bytes_per_s);
	return o;
}
