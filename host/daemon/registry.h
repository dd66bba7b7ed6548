/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * registry.h - the VMs a daemon manages, by name (registry.c): a liburcu lock-free hash
 * table that readers walk under RCU with no lock, and writers change under the daemon's
 * lock.
 */
#ifndef MEMTIDE_HOST_REGISTRY_H
#define MEMTIDE_HOST_REGISTRY_H

#include <stddef.h>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "base/mtd.h"

struct mtd_vm;

struct mtd_registry {
	struct cds_lfht *vms;
};

int mtd_registry_init(struct mtd_registry *r);
void mtd_registry_destroy(struct mtd_registry *r);
/* Insert vm unless one of the same name exists: 0 or -EEXIST. */
int mtd_registry_add(struct mtd_registry *r, struct mtd_vm *vm);
/* Find by name.  Call under rcu_read_lock; the pointer is valid until rcu_read_unlock. */
struct mtd_vm *mtd_registry_find(struct mtd_registry *r, const char *name);
/* Unlink vm (readers may still hold it until a grace period passes).  0 or -ENOENT. */
int mtd_registry_del(struct mtd_registry *r, struct mtd_vm *vm);
/* Number of VMs, and a bounded list of them for control paths (under d->lock). */
size_t mtd_registry_list(struct mtd_registry *r, struct mtd_vm **vms, size_t max);
/* Call fn for each VM's current snapshot, under the RCU read lock (mtd.h,
 * mtd_daemon_foreach_vm).  Returns the number visited. */
int mtd_registry_foreach_status(struct mtd_registry *r,
				void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg);
/* Copy one VM's snapshot into *out.  0 or -ENOENT. */
int mtd_registry_get_status(struct mtd_registry *r, const char *name, struct mtd_vm_status *out);

#endif /* MEMTIDE_HOST_REGISTRY_H */
