// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_ept.c - the ept access-bit source: a TCG guest's emulated EPT, kept by memtide's
 * QEMU plugin (ept_table.h), aged with libvmm's walker and bloom filter as hardware tables
 * would be (vmm_age_walk: test-and-clear of A, and of D with it).
 *
 * One round (age): 1. vmm_age_walk over the table: every page used during the last window
 * moves to the youngest generation; 2. ask the plugin for the next window of window_ms.
 * So a generation holds the pages seen in one sampling window per interval: a page used
 * only outside the windows is not seen that round (it is seen in a later one if it stays in
 * use).  Non-leaf accessed bits are exact here (the plugin sets them with every leaf), so
 * the walk skips subtrees nobody touched (VMM_PT_NONLEAF_ACCESSED; docs/walker.md has the
 * measurement).
 *
 * Eviction: under return=balloon/reclaim the guest picks which pages it gives up, so the
 * runs libvmm's eviction hand names are bookkeeping, and nothing is zapped here (.evicted
 * is NULL): a guest access to such a page counts as a refault, an over-count that makes
 * memtided take less.  Host-side eviction makes the runs real with mtd_ept_file_zap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access/ept_file.h"
#include "access/source.h"
#include "base/log.h"

struct ept_src {
	struct mtd_ept_file f;
	struct vmm_range ram[2];
	size_t nr_ram;
	uint64_t window_ms;
	struct vmm_walk_stats last; /* the last round's walk */
};

static int ept_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct ept_src *s = ctx;

	/* Step 1 */
	int rc = vmm_age_walk(g, &s->f.pt, now_ms, &s->last);
	/* Step 2: the next window, whatever the walk found (a QEMU that is gone just never
	 * answers; fresh() says so). */
	mtd_ept_file_request_window(&s->f, s->window_ms);
	return rc;
}

static bool ept_fresh(void *ctx, uint64_t now_ms)
{
	struct ept_src *s = ctx;

	(void)now_ms;
	return mtd_ept_file_alive(&s->f);
}

/* The status line, current at every publish (the window counts move every round): what
 * the plugin did (windows, time instrumented), what the last walk read, and a warning when
 * the plugin has stopped polling its header (a guest whose vCPUs neither run nor idle: a
 * paused VM), since windows then never start. */
static int ept_describe(void *ctx, char *buf, size_t len)
{
	const struct ept_src *s = ctx;
	const struct mtd_ept_header *h = s->f.h;
	struct timespec ts;
	char stale[64] = "";

	if (!h)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	uint64_t beat = __atomic_load_n(&h->heartbeat_ms, __ATOMIC_RELAXED);
	if (beat && now > beat + 10000)
		snprintf(stale, sizeof(stale), "; plugin silent for %llu s (paused?)",
			 (unsigned long long)((now - beat) / 1000));
	snprintf(buf, len,
		 "window %llu ms; %llu windows, %llu ms instrumented; last walk read %llu "
		 "entries, %llu young pages%s",
		 (unsigned long long)s->window_ms,
		 (unsigned long long)__atomic_load_n(&h->windows, __ATOMIC_RELAXED),
		 (unsigned long long)__atomic_load_n(&h->on_ms_total, __ATOMIC_RELAXED),
		 (unsigned long long)s->last.entries_read, (unsigned long long)s->last.young_pages,
		 stale);
	return 0;
}

static void ept_destroy(void *ctx)
{
	struct ept_src *s = ctx;

	if (!s)
		return;
	mtd_ept_file_close(&s->f); /* instrumentation off, claim given up */
	free(s);
}

static const struct mtd_source_ops ept_ops = {
    .name = "ept",
    .per_page = true,
    .age = ept_age,
    .evicted = NULL,
    .fresh = ept_fresh,
    .describe = ept_describe,
    .destroy = ept_destroy,
};

int mtd_source_ept_new(const char *path, int qemu_pid, uint64_t guest_bytes, uint64_t window_ms,
		       struct mtd_source *out, char *why, size_t whylen)
{
	struct ept_src *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	if (window_ms == 0) {
		snprintf(why, whylen, "the sampling window must be longer than 0 ms");
		free(s);
		return -EINVAL;
	}
	rc = mtd_ept_file_open(path, qemu_pid, &s->f, why, whylen);
	if (rc == 0)
		rc = mtd_ept_file_claim(&s->f, why, whylen);
	if (rc == 0) {
		rc = mtd_ept_file_layout(&s->f, guest_bytes, s->ram, why, whylen);
		if (rc > 0) {
			s->nr_ram = (size_t)rc;
			rc = 0;
		}
	}
	if (rc < 0) {
		mtd_ept_file_close(&s->f);
		free(s);
		return rc;
	}
	s->window_ms = window_ms;
	/* The first window now: the first round then has something to harvest. */
	mtd_ept_file_request_window(&s->f, window_ms);
	*out = (struct mtd_source){.ops = &ept_ops, .ctx = s, .ram = s->ram, .nr_ram = s->nr_ram};
	return 0;
}
