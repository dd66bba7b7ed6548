/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pageout_json.h - host-side eviction's part of the status JSON (pageout_json.c): a VM's
 * "pageout" object and the host's swap figures, which status_json.c puts in the VM's and
 * the host's objects.
 */
#ifndef MEMTIDE_HOST_PAGEOUT_JSON_H
#define MEMTIDE_HOST_PAGEOUT_JSON_H

#include <json-c/json.h>

#include "base/mtd.h"

/* Host-side eviction's object of a VM (struct mtd_vm_pageout's fields). */
struct json_object *mtd_json_pageout(const struct mtd_vm_pageout *p);
/* Host-side reclaim through the VM's cgroup (struct mtd_vm_memcg's fields). */
struct json_object *mtd_json_memcg(const struct mtd_vm_memcg *m);
/* The host's swap figures, added to o. */
void mtd_json_host_swap(struct json_object *o, const struct mtd_host_status *h);

#endif /* MEMTIDE_HOST_PAGEOUT_JSON_H */
