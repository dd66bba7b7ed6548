// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pageout_json.c - host-side eviction's part of the status JSON (pageout_json.h): the
 * "pageout" object of a VM and the host's swap figures.  Kept beside, not inside,
 * status_json.c: the fields are those of struct mtd_vm_pageout (mtd.h), and
 * docs/control-socket.md lists them.
 */
#include <stdint.h>

#include "front/pageout_json.h"

static void put_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v));
}

struct json_object *mtd_json_pageout(const struct mtd_vm_pageout *p)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "state",
			       json_object_new_string(mtd_pageout_state_name(p->state)));
	json_object_object_add(o, "why", json_object_new_string(p->why));
	put_u64(o, "evictable_bytes", p->evictable_bytes);
	put_u64(o, "swapped_bytes", p->swapped_bytes);
	put_u64(o, "pool_bytes", p->pool_bytes);
	put_u64(o, "net_bytes",
		p->swapped_bytes > p->pool_bytes ? p->swapped_bytes - p->pool_bytes : 0);
	put_u64(o, "out_total_bytes", p->out_total_bytes);
	put_u64(o, "refaults_total", p->refaults_total);
	put_u64(o, "collapsed_total", p->collapsed_total);
	put_u64(o, "held_bytes", p->held_bytes);
	put_u64(o, "job_reads_total", p->job_reads_total);
	json_object_object_add(o, "swapin_pages_per_s",
			       json_object_new_double(p->swapin_pages_per_s));
	put_u64(o, "last_out_bytes", p->last_out_bytes);
	put_u64(o, "last_out_ms", p->last_out_ms);
	put_u64(o, "free_bytes", p->free_bytes);
	return o;
}

struct json_object *mtd_json_memcg(const struct mtd_vm_memcg *m)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "cgroup", json_object_new_string(m->cgroup));
	if (m->moved_from[0])
		json_object_object_add(o, "moved_from", json_object_new_string(m->moved_from));
	json_object_object_add(o, "mechanism", json_object_new_string(m->mechanism));
	json_object_object_add(o, "aging", json_object_new_string(m->aging));
	json_object_object_add(o, "working_set_from", json_object_new_string(m->estimate));
	put_u64(o, "current_bytes", m->current_bytes);
	put_u64(o, "swap_bytes", m->swap_bytes);
	put_u64(o, "young_bytes", m->young_bytes);
	put_u64(o, "kept_total_bytes", m->kept_total_bytes);
	json_object_object_add(o, "refaults_exact", json_object_new_boolean(m->refaults_exact));
	json_object_object_add(o, "stall_pct", json_object_new_double(m->stall_pct));
	json_object_object_add(o, "stall_budget_pct", json_object_new_double(m->stall_budget_pct));
	put_u64(o, "stall_total_ms", m->stall_total_ms);
	json_object_object_add(o, "pool_saving_pct", json_object_new_double(m->pool_saving_pct));
	json_object_object_add(o, "incompressible", json_object_new_boolean(m->incompressible));
	json_object_object_add(o, "access_history", json_object_new_string(m->history));
	return o;
}

void mtd_json_host_swap(struct json_object *o, const struct mtd_host_status *h)
{
	put_u64(o, "swap_total_bytes", h->swap_total_bytes);
	put_u64(o, "swap_free_bytes", h->swap_free_bytes);
	put_u64(o, "swap_pool_bytes", h->swap_pool_bytes);
}
