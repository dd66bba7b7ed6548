// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * young_dump.c - a diagnostic wrapper around any access-bit source: after each aging round
 * it writes the pages libvmm holds in its two youngest generations to a file, so that what
 * memtided believes the guest uses can be compared with what the guest really uses
 * (tests/e2e/scenarios/08_access_ept.sh does, for its recall and precision).  Off unless
 * [daemon] young_dump_dir is set.
 *
 * File (replaced atomically each round: written beside, then renamed):
 *   "round N\n", then one "GPA NPAGES\n" line per run, hex GPA, decimal pages.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "access/young_dump.h"

#include "vmm.h"

struct dump {
	struct mtd_source inner;
	struct mtd_source_ops ops; /* the inner ops with age wrapped */
	char path[300];
	uint64_t rounds;
};

static void put_run(void *arg, uint64_t gpa, uint64_t npages)
{
	fprintf(arg, "%" PRIx64 " %" PRIu64 "\n", gpa, npages);
}

static int dump_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct dump *d = ctx;
	char tmp[310];
	int rc = d->inner.ops->age(d->inner.ctx, g, now_ms);
	FILE *f;

	if (rc < 0 && rc != -EAGAIN)
		return rc;
	d->rounds++;
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->path);
	f = fopen(tmp, "we");
	if (!f)
		return rc;
	fprintf(f, "round %" PRIu64 "\n", d->rounds);
	(void)vmm_young_runs(g, 2, put_run, f);
	if (fclose(f) == 0)
		(void)rename(tmp, d->path);
	return rc;
}

static void dump_evicted(void *ctx, const struct vmm_run *runs, size_t n)
{
	struct dump *d = ctx;
	d->inner.ops->evicted(d->inner.ctx, runs, n);
}

static void dump_paged_out(void *ctx, const struct vmm_run *runs, size_t n)
{
	struct dump *d = ctx;
	d->inner.ops->paged_out(d->inner.ctx, runs, n);
}

static bool dump_fresh(void *ctx, uint64_t now_ms)
{
	struct dump *d = ctx;
	return d->inner.ops->fresh(d->inner.ctx, now_ms);
}

static int dump_describe(void *ctx, char *buf, size_t len)
{
	struct dump *d = ctx;
	return d->inner.ops->describe(d->inner.ctx, buf, len);
}

static const char *dump_estimate(void *ctx, bool *by_age)
{
	struct dump *d = ctx;
	return d->inner.ops->estimate(d->inner.ctx, by_age);
}

static void dump_destroy(void *ctx)
{
	struct dump *d = ctx;
	mtd_source_destroy(&d->inner);
	free(d);
}

int mtd_source_young_dump(struct mtd_source *src, const char *dir, const char *vm_name)
{
	struct dump *d;

	if (!src->ops)
		return 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->inner = *src;
	d->ops = *src->ops;
	d->ops.age = dump_age;
	d->ops.evicted = src->ops->evicted ? dump_evicted : NULL;
	d->ops.paged_out = src->ops->paged_out ? dump_paged_out : NULL;
	d->ops.fresh = src->ops->fresh ? dump_fresh : NULL;
	d->ops.describe = src->ops->describe ? dump_describe : NULL;
	d->ops.estimate = src->ops->estimate ? dump_estimate : NULL;
	d->ops.destroy = dump_destroy;
	snprintf(d->path, sizeof(d->path), "%s/%s.young", dir, vm_name);
	*src =
	    (struct mtd_source){.ops = &d->ops, .ctx = d, .ram = src->ram, .nr_ram = src->nr_ram};
	return 0;
}
