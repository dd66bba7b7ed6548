// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept_record.c - a trace from a live guest's emulated EPT (ept_record.h).
 *
 * Steps (numbered as in the code):
 *   1. open and claim the table, learn the RAM layout (the trace's layout too);
 *   2. switch instrumentation on (always, or one window per epoch), and harvest once to
 *      drop what was set before recording began;
 *   3. per epoch: sleep to the epoch's end on CLOCK_MONOTONIC, harvest: a walk that tests
 *      and clears every present leaf's A and D (the pages seen are the epoch's accesses,
 *      the dirty ones its writes), append the epoch;
 *   4. switch instrumentation off and give the claim up (mtd_ept_file_close).
 * The harvest reads the whole table every epoch (no bloom filter, no skipping by upper A
 * bits): a trace must hold every page seen, and its cost is reported (walk_entries,
 * walk_us) as the live table's plain walk in `make bench` (bench/ept_live.sh).
 * Cost: one walk of the present tables per epoch, plus one sorted copy of its pages.
 */
#include "ept_record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access/ept_file.h"
#include "sim.h"

struct harvest {
	const struct vmm_range *ram;
	size_t nr_ram;
	uint64_t base[2]; /* page index of each range's first page */
	uint32_t *acc;    /* the epoch's pages (SIM_ACC_WRITE on writes) */
	uint64_t nr, cap; /* cap: the RAM's pages */
	uint64_t range;   /* the range being walked */
	uint64_t writes;
};

static void collect(void *arg, const struct vmm_young *b, size_t n)
{
	struct harvest *h = arg;
	const struct vmm_range *r = &h->ram[h->range];

	for (size_t i = 0; i < n; i++) {
		bool write = b[i].flags & VMM_YOUNG_DIRTY;
		for (uint64_t p = 0; p < b[i].npages; p++) {
			uint64_t gpa = b[i].gpa + p * VMM_PAGE_SIZE;
			if (gpa < r->start || gpa >= r->end || h->nr == h->cap)
				continue; /* a huge leaf reaching past RAM (a hostile table) */
			h->acc[h->nr++] = (uint32_t)(h->base[h->range] + ((gpa - r->start) >> 12)) |
					  (write ? SIM_ACC_WRITE : 0);
			h->writes += write;
		}
	}
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Test and clear every present leaf; the pages go to h->acc.  Returns entries read. */
static uint64_t harvest(struct mtd_ept_file *f, struct harvest *h, uint64_t *tables)
{
	uint64_t entries = 0;

	h->nr = 0;
	h->writes = 0;
	*tables = 0;
	for (h->range = 0; h->range < h->nr_ram; h->range++) {
		struct vmm_walk_opts o = {.gpa_start = h->ram[h->range].start,
					  .gpa_end = h->ram[h->range].end,
					  .clear_dirty = true,
					  .fn = collect,
					  .arg = h};
		struct vmm_walk_stats s;
		(void)vmm_walk(&f->pt, &o, &s); /* -EFAULT: a bad table entry; the rest is read */
		entries += s.entries_read;
		*tables += s.tables_visited;
	}
	return entries;
}

static void sleep_until_us(uint64_t t_us, volatile sig_atomic_t *stop)
{
	struct timespec ts = {.tv_sec = (time_t)(t_us / 1000000),
			      .tv_nsec = (long)(t_us % 1000000) * 1000};

	while (!(stop && *stop) &&
	       clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* A random moment of the coming epoch for its window, with 300 ms of room at its end (as
 * source_ept.c places memtided's). */
static uint64_t phase(const struct mtd_ept_record_opts *o, uint64_t *rng)
{
	uint64_t room = o->epoch_ms > o->window_ms + 300 ? o->epoch_ms - o->window_ms - 300 : 0;
	struct timespec ts;

	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return room ? (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + *rng % room : 0;
}

int mtd_ept_record(const char *path, const struct mtd_ept_record_opts *o, struct sim_trace *t,
		   struct mtd_ept_record_stats *st, char *err, size_t errlen)
{
	struct mtd_ept_file f;
	struct vmm_range ram[2] = {{0}};
	struct harvest h = {0};
	int rc, n;

	memset(st, 0, sizeof(*st));
	memset(t, 0, sizeof(*t));
	if (!o->epoch_ms || !o->epochs || (o->window_ms && o->window_ms >= o->epoch_ms)) {
		snprintf(err, errlen,
			 "epochs and their length must be > 0, a window shorter than "
			 "an epoch");
		return -EINVAL;
	}
	/* Step 1 */
	rc = mtd_ept_file_open(path, 0, &f, err, errlen);
	if (rc == 0)
		rc = mtd_ept_file_claim(&f, err, errlen);
	n = rc == 0 ? mtd_ept_file_layout(&f, o->ram_bytes, ram, err, errlen) : rc;
	if (n < 0) {
		mtd_ept_file_close(&f);
		return n;
	}
	rc = sim_trace_init(t, ram, (size_t)n);
	h.ram = ram;
	h.nr_ram = (size_t)n;
	h.cap = t->ram_pages;
	h.base[1] = n > 1 ? (ram[0].end - ram[0].start) >> 12 : 0;
	h.acc = rc == 0 ? malloc(h.cap * sizeof(*h.acc)) : NULL;
	if (!h.acc) {
		snprintf(err, errlen, rc ? "bad RAM layout in the table" : "out of memory");
		mtd_ept_file_close(&f);
		return rc ? rc : -ENOMEM;
	}
	/* Step 2 */
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	if (o->window_ms)
		mtd_ept_file_request_window_at(&f, o->window_ms,
					       o->random_phase ? phase(o, &rng) : 0);
	else
		mtd_ept_file_set_mode(&f, MTD_EPT_MODE_ALWAYS);
	uint64_t tables;
	(void)harvest(&f, &h, &tables);
	/* epoch e lasts from the harvest before it (t0 for the first) to its own harvest */
	uint64_t t0 = now_us(), last_us = t0, prev_ms = 0;
	/* Step 3 */
	for (uint64_t e = 0; e < o->epochs && rc == 0; e++) {
		sleep_until_us(t0 + (e + 1) * o->epoch_ms * 1000, o->stop);
		if (o->stop && *o->stop)
			break;
		if (!mtd_ept_file_alive(&f)) {
			st->qemu_gone = true;
			break;
		}
		uint64_t w0 = now_us();
		st->walk_entries += harvest(&f, &h, &tables);
		st->walk_us += now_us() - w0;
		if (o->window_ms && e + 1 < o->epochs)
			mtd_ept_file_request_window_at(&f, o->window_ms,
						       o->random_phase ? phase(o, &rng) : 0);
		uint64_t start_ms = (last_us - t0) / 1000;
		if (e && start_ms <= prev_ms)
			start_ms = prev_ms + 1;
		prev_ms = start_ms;
		last_us = w0;
		rc = sim_trace_add_epoch(t, start_ms, h.acc, h.nr, NULL, 0);
		if (rc) {
			snprintf(err, errlen, "cannot add epoch %llu: %s", (unsigned long long)e,
				 strerror(-rc));
			break;
		}
		st->epochs++;
		st->page_accesses += h.nr;
		st->page_writes += h.writes;
		st->table_tables = tables;
	}
	if (rc == 0 && st->epochs) {
		uint64_t end_ms = (last_us - t0) / 1000;
		rc = sim_trace_finish(t, end_ms > prev_ms ? end_ms : prev_ms + 1);
	} else if (rc == 0) {
		snprintf(err, errlen, "no epoch recorded (%s)",
			 st->qemu_gone ? "QEMU exited" : "stopped");
		rc = -EINTR;
	}
	st->table_ram_pages = t->ram_pages;
	/* Step 4 */
	free(h.acc);
	mtd_ept_file_close(&f);
	return rc;
}
