// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * host.c - the host as memtided sees it (daemon.h): its MemAvailable against the arbiter's
 * marks every [host] interval, each VM's squeeze from the arbiter's rule (decide/arbiter.c),
 * the swap and its compressed pools, a release's pace shared by all VMs, and the host
 * figures `memtidectl status` and /metrics show.
 *
 * Threads: the main thread arbitrates; VM loops ask for release grants; front ends read the
 * figures.  The figures and the release budget are under h->lock; each VM's squeeze is an
 * atomic its loop reads.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "daemon/host.h"

#include "act/swap_stat.h"
#include "base/clock.h"
#include "base/log.h"
#include "daemon/vm.h"

#define MiB ((uint64_t)1 << 20)

/*
 * The host line's VM count and saving, from the VMs in the registry now.  The arbiter's tick
 * sets them too, every [host] interval; attach and detach call this so that `status` right
 * after a detach no longer counts the VM it let go (the balloon it leaves is not memtide's
 * saving any more).  A VM whose loop has ended (DETACHED) is not counted either.
 */
void mtd_host_totals(struct mtd_host *h, struct mtd_registry *r)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *vnode;
	uint64_t saved = 0;
	unsigned n = 0;

	rcu_read_lock();
	cds_lfht_for_each(r->vms, &it, vnode)
	{
		struct mtd_vm *vm = caa_container_of(vnode, struct mtd_vm, node);
		const struct mtd_vm_status *st = rcu_dereference(vm->status);
		if (!st || st->state == MTD_VM_DETACHED)
			continue;
		saved += st->saved_bytes;
		n++;
	}
	rcu_read_unlock();
	pthread_mutex_lock(&h->lock);
	h->status.nr_vms = n;
	h->status.saved_bytes = saved;
	pthread_mutex_unlock(&h->lock);
}

void mtd_host_arbitrate(struct mtd_host *h, const struct mtd_config *cfg, struct mtd_registry *r,
			int libvirt_connected)
{
	uint64_t total = 0, avail = 0, saved = 0;
	struct mtd_arbiter_result res;
	struct mtd_arbiter_vm *av = NULL;
	struct mtd_vm **vp = NULL;
	size_t n = 0, cap = 0;
	struct cds_lfht_iter it;
	struct cds_lfht_node *vnode;
	struct mtd_vm *vm;

	if (mtd_arbiter_read_meminfo(cfg->meminfo_path, &total, &avail) < 0)
		return;
	rcu_read_lock();
	cds_lfht_for_each(r->vms, &it, vnode)
	{
		vm = caa_container_of(vnode, struct mtd_vm, node);
		const struct mtd_vm_status *st = rcu_dereference(vm->status);
		if (!st)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			void *a = realloc(av, nc * sizeof(*av)), *b;
			if (!a)
				break;
			av = a;
			b = realloc(vp, nc * sizeof(struct mtd_vm *));
			if (!b)
				break;
			vp = b;
			cap = nc;
		}
		av[n] = (struct mtd_arbiter_vm){
		    .priority = st->policy.priority,
		    .reclaimable_bytes = atomic_load(&vm->reclaimable_bytes),
		    .pending_bytes = atomic_load(&vm->pending_bytes),
		    .squeeze = atomic_load(&vm->squeeze_permille) / 1000.0,
		};
		vp[n++] = vm;
		if (st->state != MTD_VM_DETACHED)
			saved += st->saved_bytes;
	}
	mtd_arbiter_run(&cfg->arb, &h->arb, mtd_mono_ms(), total, avail, av, n, &res);
	for (size_t i = 0; i < n; i++)
		atomic_store(&vp[i]->squeeze_permille, (unsigned)(av[i].squeeze * 1000.0 + 0.5));
	rcu_read_unlock();
	free(av);
	free(vp);

	/* Host swap and the compressed pools, for status and metrics (swap_stat.h). */
	struct mtd_swap_stat sw = {0};
	(void)mtd_swap_read(NULL, NULL, &sw);
	pthread_mutex_lock(&h->lock);
	h->status.swap_total_bytes = sw.total_bytes;
	h->status.swap_free_bytes = sw.free_bytes;
	h->status.swap_pool_bytes = mtd_swap_pool(&sw);
	bool was = h->status.under_pressure;
	/* Pressure starts under the low mark and ends over the high mark (hysteresis). */
	h->status.under_pressure = res.under_pressure || (was && avail <= res.high_mark_bytes);
	h->status.mem_total_bytes = total;
	h->status.mem_available_bytes = avail;
	h->status.low_mark_bytes = res.low_mark_bytes;
	h->status.high_mark_bytes = res.high_mark_bytes;
	if (h->status.under_pressure && !was)
		h->status.pressure_episodes++;
	h->status.nr_vms = (unsigned)n;
	h->status.saved_bytes = saved;
	h->status.libvirt_connected = libvirt_connected;
	h->status.updated_ms = mtd_mono_ms();
	h->status.interval_ms = cfg->arbiter_interval_ms;
	h->status.observe_only = cfg->observe_only;
	pthread_mutex_unlock(&h->lock);
	if (h->status.under_pressure && !was)
		mtd_notice("host under pressure: MemAvailable %" PRIu64 " MiB < low mark %" PRIu64
			   " MiB; reclaiming from lower priorities first",
			   avail / MiB, res.low_mark_bytes / MiB);
	else if (was && avail > res.high_mark_bytes)
		mtd_notice("host pressure over: MemAvailable %" PRIu64 " MiB", avail / MiB);
}

uint64_t mtd_host_release_upto(struct mtd_host *h, const struct mtd_config *cfg, uint64_t key,
			       uint64_t now_ms, uint64_t actual_bytes, uint64_t target_bytes,
			       uint64_t ceiling_bytes, bool *host_short)
{
	uint64_t total = 0, avail = 0, upto;

	*host_short = false;
	/* The host's MemAvailable now, not the arbiter's last look: a release may be the
	 * only thing moving memory.  Unreadable: nothing more is given. */
	if (mtd_arbiter_read_meminfo(cfg->meminfo_path, &total, &avail) < 0)
		return actual_bytes > target_bytes ? actual_bytes : target_bytes;
	pthread_mutex_lock(&h->lock);
	upto = mtd_release_pace_step(&cfg->arb, &h->release, key, now_ms, total, avail,
				     actual_bytes, target_bytes, ceiling_bytes, host_short);
	pthread_mutex_unlock(&h->lock);
	return upto;
}

void mtd_host_status(struct mtd_host *h, struct mtd_host_status *out)
{
	pthread_mutex_lock(&h->lock);
	*out = h->status;
	pthread_mutex_unlock(&h->lock);
}

void mtd_host_init(struct mtd_host *h, uint64_t release_rate_bytes_per_s)
{
	pthread_mutex_init(&h->lock, NULL);
	mtd_swap_share_init(&h->swap, NULL, NULL);
	h->status.release_rate_bytes_per_s = release_rate_bytes_per_s;
}

void mtd_host_destroy(struct mtd_host *h)
{
	mtd_swap_share_destroy(&h->swap);
	pthread_mutex_destroy(&h->lock);
}
