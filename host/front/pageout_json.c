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

void mtd_json_host_swap(struct json_object *o, const struct mtd_host_status *h)
{
	put_u64(o, "swap_total_bytes", h->swap_total_bytes);
	put_u64(o, "swap_free_bytes", h->swap_free_bytes);
	put_u64(o, "swap_pool_bytes", h->swap_pool_bytes);
}
