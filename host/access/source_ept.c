// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_ept.c - the ept access-bit source: a TCG guest's emulated EPT, kept by memtide's
 * QEMU plugin (ept_table.h), aged with libvmm's walker and bloom filter as hardware tables
 * would be (vmm_age_walk: test-and-clear of A, and of D with it).
 *
 * One round (age): 1. vmm_age_walk over the table: every page used during the last window
 * moves to the youngest generation; 2. the next window's length (vmm_sample_update: from
 * the policy's ept_window, doubled while the walk sees under half of the pages the round
 * before saw again, up to a fifth of the interval, halved back while it sees most of them);
 * 3. ask the plugin for it, to start at a random moment of the interval (window_phase):
 * a window right after each round, at the same phase every time, saw a page used every
 * second in every round if its touch fell in the window and never if not (the guest's own
 * timers keep such pages in step with memtided's rounds): bench/ept_sampling.sh measured
 * 35% of such pages ever seen in 22 rounds, and the widening's estimate read them as caught
 * (93% seen again).  At a random moment each round, each page is caught with the window's
 * share of its period, round after round independently.  So a generation holds the pages
 * seen in one sampling window per interval: a page used only outside the windows is not
 * seen that round (it is seen in a later one if it stays in use).  docs/design.md, Part 0, "What a sampled source can tell",
 * has the measurements behind the widening.  Non-leaf accessed bits are exact here (the plugin sets them with every leaf), so
 * the walk skips subtrees nobody touched (VMM_PT_NONLEAF_ACCESSED; docs/walker.md has the
 * measurement).
 *
 * A round ages only what was sampled: when the plugin never started the window asked for
 * (a paused VM, a vCPU that never reaches an interrupt return, a QEMU that stopped polling)
 * the walk would read "nothing touched" for the whole guest, so the round is no round
 * (-ENODATA: libvmm untouched, the controller holds; tick_age.c), and the request stands
 * for when the guest runs again.  Before every use of the table the file is checked
 * (mtd_ept_file_check): a file cut short or re-created under the mapping is never read.
 *
 * Eviction: under return=balloon/reclaim the guest picks which pages it gives up, so the
 * runs libvmm's eviction hand names are bookkeeping (the hand calls evicted only for host
 * pageout).  Host-side eviction's pages are zapped here (mtd_ept_file_zap), as KVM's MMU
 * notifier zaps the EPT entries of a page the host takes: the leaf is made present again by
 * the guest's next access in a window, and the refault is counted from pagemap.
 *
 * What the plugin cannot see: instruction fetches and the guest's own page-table walks
 * (TCG's softmmu does both without a memory callback), and device DMA.  Code and page-table
 * pages used only that way look idle here; host-side eviction keeps them once they came
 * back (docs/design.md, Part 0, has the measurement).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access/ept_file.h"
#include "access/source.h"
#include "base/clock.h"
#include "base/log.h"

struct ept_src {
	struct mtd_ept_file f;
	struct vmm_range ram[2];
	size_t nr_ram;
	struct vmm_sample sample;   /* the window (vmm/sample.c) */
	uint64_t interval_ms;       /* the rounds' interval: where a window may start */
	uint64_t rng;               /* the windows' phases */
	struct vmm_walk_stats last; /* the last round's walk */
	uint64_t asked_seq;         /* the req_seq of the window asked for last */
	char last_err[160];         /* why the last round was void ("": it was not) */
};

static void ask_window(struct ept_src *s, uint64_t window_ms, uint64_t not_before_ms)
{
	mtd_ept_file_request_window_at(&s->f, window_ms, not_before_ms);
	s->asked_seq = __atomic_load_n(&s->f.h->req_seq, __ATOMIC_ACQUIRE);
}

/* The next window's start: a random moment of the interval that leaves it time to end
 * before the next round (a poll of the plugin takes up to a guest timer tick, its switch
 * 10-13 ms: 300 ms of room). */
static uint64_t window_phase(struct ept_src *s, uint64_t now_ms)
{
	uint64_t room = s->interval_ms > s->sample.window_ms + 300
			    ? s->interval_ms - s->sample.window_ms - 300
			    : 0;

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return room ? now_ms + s->rng % room : 0;
}

static int ept_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct ept_src *s = ctx;

	struct vmm_guest_stats gs;
	int rc = mtd_ept_file_check(&s->f, s->last_err, sizeof(s->last_err));
	if (rc < 0)
		return rc;
	/* The window asked for never started: nothing was sampled (the request stands). */
	if (__atomic_load_n(&s->f.h->started_seq, __ATOMIC_ACQUIRE) < s->asked_seq) {
		snprintf(
		    s->last_err, sizeof(s->last_err),
		    "the plugin ran no sampling window since the last round (a paused guest?): "
		    "nothing aged");
		return -ENODATA;
	}
	s->last_err[0] = '\0';
	/* Step 1 */
	rc = vmm_age_walk(g, &s->f.pt, now_ms, &s->last);
	/* Step 2 */
	if (rc == 0) {
		vmm_guest_get_stats(g, &gs);
		vmm_sample_update(&s->sample, gs.young_prev, gs.young_again);
	}
	/* Step 3: the next window, whatever the walk found (a QEMU that is gone just never
	 * answers; fresh() says so). */
	ask_window(s, s->sample.window_ms, window_phase(s, now_ms));
	return rc;
}

static bool ept_fresh(void *ctx, uint64_t now_ms)
{
	struct ept_src *s = ctx;

	(void)now_ms;
	return mtd_ept_file_alive(&s->f);
}

/* Host-side eviction took these pages: their leaves go, as KVM zaps EPT entries. */
static void ept_paged_out(void *ctx, const struct vmm_run *runs, size_t n)
{
	struct ept_src *s = ctx;
	char why[8];

	if (mtd_ept_file_check(&s->f, why, sizeof(why)) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		(void)mtd_ept_file_zap(&s->f, runs[i].gpa, runs[i].npages);
}

/* The status line, current at every publish (the window counts move every round): what
 * the plugin did (windows, time instrumented), what the last walk read, and a warning when
 * the plugin has stopped polling its header (a guest whose vCPUs neither run nor idle: a
 * paused VM), since windows then never start. */
static int ept_describe(void *ctx, char *buf, size_t len)
{
	const struct ept_src *s = ctx;
	const struct mtd_ept_header *h = s->f.h;
	char stale[64] = "";

	if (!h)
		return -EINVAL;
	char bad[160];
	if (mtd_ept_file_check(&s->f, bad, sizeof(bad)) < 0) {
		snprintf(buf, len, "%s", bad); /* the mapping is not read */
		return 0;
	}
	uint64_t now = mtd_mono_ms();
	uint64_t beat = __atomic_load_n(&h->heartbeat_ms, __ATOMIC_RELAXED);
	if (beat && now > beat + 10000)
		snprintf(stale, sizeof(stale), "; plugin silent for %llu s (paused?)",
			 (unsigned long long)((now - beat) / 1000));
	char caught[48] = "";
	if (s->sample.caught >= 0.0)
		snprintf(caught, sizeof(caught), ", %.0f%% of last round's pages seen again",
			 s->sample.caught * 100.0);
	snprintf(buf, len,
		 "window %llu ms (%llu..%llu%s); %llu windows, %llu ms instrumented; last walk "
		 "read %llu entries, %llu young pages%s%s%s",
		 (unsigned long long)s->sample.window_ms, (unsigned long long)s->sample.cfg.base_ms,
		 (unsigned long long)s->sample.cfg.max_ms, caught,
		 (unsigned long long)__atomic_load_n(&h->windows, __ATOMIC_RELAXED),
		 (unsigned long long)__atomic_load_n(&h->on_ms_total, __ATOMIC_RELAXED),
		 (unsigned long long)s->last.entries_read, (unsigned long long)s->last.young_pages,
		 stale, s->last_err[0] ? "; " : "", s->last_err);
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
    .loads_stores_only = true,
    .age = ept_age,
    .evicted = NULL, /* the balloon's runs are bookkeeping: the guest picked its pages */
    .paged_out = ept_paged_out,
    .fresh = ept_fresh,
    .describe = ept_describe,
    .destroy = ept_destroy,
};

int mtd_source_ept_new(const char *path, int qemu_pid, uint64_t guest_bytes, uint64_t window_ms,
		       uint64_t interval_ms, struct mtd_source *out, char *why, size_t whylen)
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
	struct vmm_sample_config sc;
	vmm_sample_config_default(&sc, window_ms, interval_ms);
	(void)vmm_sample_init(&s->sample, &sc); /* window_ms > 0, checked above */
	s->interval_ms = interval_ms;
	s->rng = (uint64_t)qemu_pid * 0x9e3779b97f4a7c15ULL ^ 0x5eed5a3bULL; /* any non-zero */
	/* The first window now: the first round then has something to harvest. */
	ask_window(s, window_ms, 0);
	*out = (struct mtd_source){.ops = &ept_ops, .ctx = s, .ram = s->ram, .nr_ram = s->nr_ram};
	return 0;
}
