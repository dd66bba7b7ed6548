// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * registry.c - the VM registry: a liburcu lock-free resizable hash table (lfht) of struct
 * mtd_vm keyed by domain name.
 *
 * Readers (control socket, metrics, arbiter) look VMs up and walk them under rcu_read_lock
 * with no lock at all; writers (attach, detach) are serialised by the daemon's lock, so the lfht's
 * add_unique never races another writer on the same name, only readers, which lfht allows.
 * A removed VM is freed only after a grace period (call_rcu), so a reader that found it just
 * before removal still sees valid memory and its last published snapshot.
 *
 * Walks use cds_lfht_for_each over nodes, not cds_lfht_for_each_entry: the _entry form
 * computes container_of(NULL) when the walk ends, which UBSan reports as pointer overflow.
 */
#include <errno.h>
#include <string.h>

#include "daemon/registry.h"
#include "daemon/vm.h"

/* FNV-1a over the name: names are short; lfht wants a well-spread 64-bit hash. */
static unsigned long name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (unsigned long)h;
}

static int name_match(struct cds_lfht_node *node, const void *key)
{
	const struct mtd_vm *vm = caa_container_of(node, struct mtd_vm, node);
	return strcmp(vm->name, key) == 0;
}

int mtd_registry_init(struct mtd_registry *r)
{
	r->vms = cds_lfht_new(16, 16, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	return r->vms ? 0 : -ENOMEM;
}

void mtd_registry_destroy(struct mtd_registry *r)
{
	if (r->vms)
		(void)cds_lfht_destroy(r->vms, NULL);
	r->vms = NULL;
}

int mtd_registry_add(struct mtd_registry *r, struct mtd_vm *vm)
{
	struct cds_lfht_node *got;

	cds_lfht_node_init(&vm->node);
	rcu_read_lock();
	got = cds_lfht_add_unique(r->vms, name_hash(vm->name), name_match, vm->name, &vm->node);
	rcu_read_unlock();
	return got == &vm->node ? 0 : -EEXIST;
}

struct mtd_vm *mtd_registry_find(struct mtd_registry *r, const char *name)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *node;

	cds_lfht_lookup(r->vms, name_hash(name), name_match, name, &it);
	node = cds_lfht_iter_get_node(&it);
	return node ? caa_container_of(node, struct mtd_vm, node) : NULL;
}

int mtd_registry_del(struct mtd_registry *r, struct mtd_vm *vm)
{
	int rc;

	rcu_read_lock();
	rc = cds_lfht_del(r->vms, &vm->node);
	rcu_read_unlock();
	return rc == 0 ? 0 : -ENOENT;
}

size_t mtd_registry_list(struct mtd_registry *r, struct mtd_vm **vms, size_t max)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *vnode;
	struct mtd_vm *vm;
	size_t n = 0;

	rcu_read_lock();
	cds_lfht_for_each(r->vms, &it, vnode)
	{
		vm = caa_container_of(vnode, struct mtd_vm, node);
		if (n < max)
			vms[n] = vm;
		n++;
	}
	rcu_read_unlock();
	return n;
}

int mtd_registry_foreach_status(struct mtd_registry *r,
				void (*fn)(void *arg, const struct mtd_vm_status *st), void *arg)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *vnode;
	struct mtd_vm *vm;
	int n = 0;

	rcu_read_lock();
	cds_lfht_for_each(r->vms, &it, vnode)
	{
		vm = caa_container_of(vnode, struct mtd_vm, node);
		const struct mtd_vm_status *st = rcu_dereference(vm->status);
		if (st) {
			fn(arg, st);
			n++;
		}
	}
	rcu_read_unlock();
	return n;
}

int mtd_registry_get_status(struct mtd_registry *r, const char *name, struct mtd_vm_status *out)
{
	int rc = -ENOENT;

	rcu_read_lock();
	struct mtd_vm *vm = mtd_registry_find(r, name);
	if (vm) {
		const struct mtd_vm_status *st = rcu_dereference(vm->status);
		if (st) {
			*out = *st;
			rc = 0;
		}
	}
	rcu_read_unlock();
	return rc;
}
