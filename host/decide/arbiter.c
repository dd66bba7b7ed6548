// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * arbiter.c - host arbitration across VMs (see arbiter.h for the rule).
 *
 * The arbiter never sets balloon targets itself: it only tells each VM's controller how
 * hard to lean (squeeze), so the per-VM safety rules (floor, slow inflation, deflate on
 * guest pressure) still hold for every VM whatever the host's state.  A squeezed VM whose
 * guest comes under pressure still deflates at once.
 */
#include "decide/arbiter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mtd_arbiter_marks(const struct mtd_arbiter_config *cfg, uint64_t mem_total_bytes,
		       uint64_t *low, uint64_t *high)
{
	*low = cfg->low_mark_bytes ? cfg->low_mark_bytes : mem_total_bytes / 20;
	*high = cfg->high_mark_bytes ? cfg->high_mark_bytes : *low * 2;
	if (*high < *low)
		*high = *low;
}

struct order {
	size_t idx;
	unsigned priority;
	uint64_t reclaimable;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void mtd_arbiter_run(const struct mtd_arbiter_config *cfg, struct mtd_arbiter_state *state,
		     uint64_t now_ms, uint64_t mem_total_bytes, uint64_t mem_available_bytes,
		     struct mtd_arbiter_vm *vms, size_t n, struct mtd_arbiter_result *res)
{
	uint64_t low, high;

	mtd_arbiter_marks(cfg, mem_total_bytes, &low, &high);
	memset(res, 0, sizeof(*res));
	res->low_mark_bytes = low;
	res->high_mark_bytes = high;

	/* Room again: every VM gets its headroom back. */
	if (mem_available_bytes > high) {
		for (size_t i = 0; i < n; i++)
			vms[i].squeeze = 0.0;
		state->last_raise_ms = 0;
		return;
	}
	/* Between the marks: keep the last decision (hysteresis). */
	if (mem_available_bytes >= low)
		return;

	res->under_pressure = true;
	res->deficit_bytes = low - mem_available_bytes;
	if (n == 0)
		return;
	/* Let the last raise show in MemAvailable before raising again. */
	if (state->last_raise_ms && now_ms < state->last_raise_ms + cfg->settle_ms)
		return;
	/* Memory already asked of balloons on their way down counts as coming. */
	uint64_t pending = 0;
	for (size_t i = 0; i < n; i++)
		pending += vms[i].pending_bytes;
	if (pending >= res->deficit_bytes)
		return;
	struct order *ord = calloc(n, sizeof(*ord));
	if (!ord) {
		/* Out of memory on a host under pressure: lean on everyone fully. */
		for (size_t i = 0; i < n; i++)
			vms[i].squeeze = 1.0;
		return;
	}
	for (size_t i = 0; i < n; i++)
		ord[i] = (struct order){i, vms[i].priority, vms[i].reclaimable_bytes};
	qsort(ord, n, sizeof(*ord), order_cmp);

	/* Lowest priority first; a priority class shares its part in proportion to what each
	 * member can give, so one big VM does not shield its peers. */
	double left = (double)(res->deficit_bytes - pending);
	bool raised = false;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		double class_bytes = 0.0;
		while (j < n && ord[j].priority == ord[i].priority)
			class_bytes += (double)ord[j++].reclaimable;
		double s = 0.0;
		if (left > 0.0 && class_bytes > 0.0)
			s = left >= class_bytes ? 1.0 : left / class_bytes;
		for (size_t k = i; k < j; k++) {
			/* Never relax a VM while the host is still short. */
			double prev = vms[ord[k].idx].squeeze;
			if (s > prev) {
				vms[ord[k].idx].squeeze = s;
				raised = true;
			}
		}
		left -= s * class_bytes;
		i = j;
	}
	free(ord);
	if (raised)
		state->last_raise_ms = now_ms;
}

int mtd_arbiter_read_meminfo(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes)
{
	char line[256];
	bool have_total = false, have_avail = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		bool total = strncmp(line, "MemTotal:", 9) == 0;
		bool avail = strncmp(line, "MemAvailable:", 13) == 0;
		char *end;
		if (!total && !avail)
			continue;
		errno = 0;
		unsigned long long kib = strtoull(line + (total ? 9 : 13), &end, 10);
		if (errno || strncmp(end, " kB", 3) != 0 || kib > UINT64_MAX / 1024)
			continue; /* not the kernel's format: treat the field as missing */
		if (total) {
			*total_bytes = (uint64_t)kib * 1024;
			have_total = true;
		} else {
			*avail_bytes = (uint64_t)kib * 1024;
			have_avail = true;
		}
	}
	fclose(f);
	return have_total && have_avail ? 0 : -EPROTO;
}
