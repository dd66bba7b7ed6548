// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pageout-bench.c - what host-side eviction costs and how exact its refault count is, on a
 * child process standing in for QEMU (host/act/pageout.c, the code memtided runs).
 *
 * The child maps 256 MiB the way QEMU maps guest RAM (2 MiB-aligned, MADV_HUGEPAGE) and
 * fills it with compressible pages.  Results, one JSON line each:
 *   pageout_scan_present   refault scan over resident pages: ns per page
 *   pageout_scan_empty     over pages that were never touched (no page table): ns per page
 *   pageout_free_scan      the free page scan memtided runs every interval over all of guest
 *                          RAM (mtd_pageout_find_empty), half of it present and half never
 *                          touched: ns per page, ms per GiB, and the pages it found
 * and, when the host has swap (the figures need it; nothing here sets swap up: run it with a
 * zram device, as docs/design.md says):
 *   pageout_throughput     mtd_pageout_runs over all of it: MiB/s into swap, with the same
 *                          run's sequential-read bandwidth beside it
 *   pageout_scan_swapped   refault scan over swapped pages: ns per page
 *   pageout_refaults       the child touches 4096 distinct swapped pages: what the pagemap
 *                          scan counts, what the child's own major-fault counter says, and
 *                          the truth (4096)
 * A figure that cannot be measured prints a line with "skipped" and why.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "act/pageout.h"
#include "act/swap_stat.h"
#include "vmm.h"

#define MiB       ((uint64_t)1 << 20)
#define CHILD_MIB 256
#define GPA_BASE  ((uint64_t)1 << 32)
#define TOUCHES   4096

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct child {
	pid_t pid;
	int cmd, ack;
	uint64_t hva;
};

/* The child: map, fill the first half (the second stays untouched), then touch the pages it
 * is told ("t" + count, then the page indices) and exit on "q". */
static void child_main(int cmd, int ack)
{
	size_t sz = CHILD_MIB * MiB;
	char *raw =
	    mmap(NULL, sz + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	uint64_t a = (uintptr_t)p;
	char c;

	madvise(p, sz, MADV_HUGEPAGE);
	for (size_t off = 0; off < sz / 2; off += 8)
		*(uint64_t *)(p + off) = off >> 12;
	if (write(ack, &a, sizeof(a)) != sizeof(a))
		_exit(1);
	while (read(cmd, &c, 1) == 1 && c == 't') {
		uint32_t n, idx;
		volatile uint64_t sink = 0;
		if (read(cmd, &n, sizeof(n)) != sizeof(n))
			break;
		for (uint32_t k = 0; k < n; k++) {
			if (read(cmd, &idx, sizeof(idx)) != sizeof(idx))
				_exit(1);
			sink += *(volatile uint64_t *)(p + (size_t)idx * 4096);
		}
		(void)sink;
		if (write(ack, &c, 1) != 1)
			break;
	}
	_exit(0);
}

static unsigned long majflt(pid_t pid)
{
	char path[64], buf[1024];
	FILE *f;
	unsigned long v = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		char *s = strrchr(buf, ')');
		/* fields after the command: state ppid pgrp session tty tpgid flags minflt
		 * cminflt majflt */
		char *p = s ? s + 2 : NULL;
		for (int i = 0; p && i < 9; i++) {
			p = strchr(p, ' ');
			p = p ? p + 1 : NULL;
		}
		if (p)
			v = strtoul(p, NULL, 10);
	}
	fclose(f);
	return v;
}

static void on_refault(void *arg, uint64_t gpa)
{
	(void)gpa;
	(*(uint64_t *)arg)++;
}

static double scan_ns_per_page(struct mtd_pageout *po, uint64_t pages, uint64_t *refaults)
{
	struct mtd_pageout_scan_ops ops = {.refault = on_refault};
	struct mtd_pageout_scan_result r;
	double best = 1e30;

	for (int i = 0; i < 5; i++) {
		if (mtd_pageout_scan(po, &ops, refaults, &r) < 0)
			return -1;
		double ns = (double)r.ns / (double)pages;
		if (ns < best)
			best = ns;
	}
	return best;
}

static void count_empty(void *arg, uint64_t gpa, uint64_t npages)
{
	(void)arg;
	(void)gpa;
	(void)npages;
}

int main(void)
{
	int c[2], a[2];
	struct child ch;
	struct mtd_ram_layout l = {0};
	struct mtd_pageout *po;
	struct mtd_pageout_result res;
	struct mtd_swap_stat sw;
	struct mtd_thp_settings thp;
	char err[200];
	uint64_t half = CHILD_MIB * MiB / 2 / 4096, refaults = 0;
	char t;

	if (pipe(c) || pipe(a))
		return 1;
	ch.pid = fork();
	if (ch.pid == 0) {
		close(c[1]);
		close(a[0]);
		child_main(c[0], a[1]);
	}
	close(c[0]);
	close(a[1]);
	ch.cmd = c[1];
	ch.ack = a[0];
	if (read(ch.ack, &ch.hva, sizeof(ch.hva)) != sizeof(ch.hva))
		return 1;
	l.nr = 1;
	l.sure = true;
	l.r[0] = (struct mtd_ram_region){.gpa = GPA_BASE,
					 .bytes = CHILD_MIB * MiB,
					 .hva = ch.hva,
					 .backing = MTD_RAM_ANON,
					 .page_bytes = 4096,
					 .thp = true,
					 .evictable = true};
	l.ram_bytes = l.evictable_bytes = CHILD_MIB * MiB;
	if (mtd_pageout_open(ch.pid, &l, NULL, &po, err, sizeof(err)) < 0) {
		printf("{\"name\":\"pageout\",\"skipped\":\"%s\"}\n", err);
		kill(ch.pid, SIGKILL);
		return 0;
	}
	(void)mtd_pageout_read_thp(NULL, &thp);

	/* The free page scan, before anything is evicted: the untouched half is what it finds. */
	double fbest = 1e30;
	int64_t found = -1;
	for (int i = 0; i < 5; i++) {
		double f0 = now_s();
		found = mtd_pageout_find_empty(po, count_empty, NULL);
		double ns = (now_s() - f0) * 1e9 / (double)(2 * half);
		if (ns < fbest)
			fbest = ns;
	}
	printf("{\"name\":\"pageout_free_scan\",\"ns_per_page\":%.2f,\"ms_per_gib\":%.2f,"
	       "\"pages\":%" PRIu64 ",\"found\":%" PRId64 ",\"expected\":%" PRIu64 "}\n",
	       fbest, fbest * 262144.0 / 1e6, 2 * half, found, half);

	/* The untouched half: evicted as empty, then scanned. */
	struct vmm_run empty = {.gpa = GPA_BASE + half * 4096, .npages = half};
	mtd_pageout_runs(po, &empty, 1, &thp, 0, NULL, NULL, &res);
	printf("{\"name\":\"pageout_scan_empty\",\"ns_per_page\":%.2f,\"pages\":%" PRIu64 "}\n",
	       scan_ns_per_page(po, half, &refaults), half);

	if (mtd_swap_read(NULL, NULL, &sw) < 0 || sw.free_bytes < CHILD_MIB * MiB) {
		printf(
		    "{\"name\":\"pageout_throughput\",\"skipped\":\"no room in host swap (set up "
		    "zram first)\"}\n");
		goto out;
	}
	/* The sequential-read bound of this machine, in the same run. */
	size_t bsz = 256 * MiB;
	uint64_t *buf = malloc(bsz), sum = 0;
	memset(buf, 1, bsz);
	double t0 = now_s();
	for (size_t i = 0; i < bsz / 8; i++)
		sum += buf[i];
	double read_mib_s = (double)bsz / MiB / (now_s() - t0);
	free(buf);

	struct vmm_run filled = {.gpa = GPA_BASE, .npages = half};
	if (mtd_pageout_runs(po, &filled, 1, &thp, UINT64_MAX, NULL, NULL, &res) < 0)
		goto out;
	printf("{\"name\":\"pageout_throughput\",\"mib_s\":%.0f,\"swapped_mib\":%" PRIu64
	       ",\"kept_pages\":%" PRIu64 ",\"syscalls\":%" PRIu64
	       ",\"seq_read_mib_s\":%.0f,\"sum\":%" PRIu64 "}\n",
	       (double)(res.swapped_pages * 4096) / MiB / ((double)res.ns / 1e9),
	       res.swapped_pages * 4096 / MiB, res.kept_pages[MTD_PO_KEPT_RESIDENT], res.syscalls,
	       read_mib_s, sum & 1);
	printf("{\"name\":\"pageout_scan_swapped\",\"ns_per_page\":%.2f,\"pages\":%" PRIu64 "}\n",
	       scan_ns_per_page(po, half * 2, &refaults), half * 2);

	/* Refaults: TOUCHES distinct swapped pages, spread by a stride. */
	unsigned long mf0 = majflt(ch.pid);
	t = 't';
	uint32_t n = TOUCHES;
	if (write(ch.cmd, &t, 1) != 1 || write(ch.cmd, &n, sizeof(n)) != sizeof(n))
		goto out;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t idx = (uint32_t)(((uint64_t)k * 7919) % half);
		if (write(ch.cmd, &idx, sizeof(idx)) != sizeof(idx))
			goto out;
	}
	if (read(ch.ack, &t, 1) != 1)
		goto out;
	unsigned long mf = majflt(ch.pid) - mf0;
	refaults = 0;
	struct mtd_pageout_scan_ops ops = {.refault = on_refault};
	struct mtd_pageout_scan_result sr;
	mtd_pageout_scan(po, &ops, &refaults, &sr);
	printf("{\"name\":\"pageout_refaults\",\"true\":%u,\"pagemap\":%" PRIu64
	       ",\"majflt\":%lu,\"scan_us\":%" PRIu64 "}\n",
	       n, refaults, mf, sr.ns / 1000);
out:
	t = 'q';
	if (write(ch.cmd, &t, 1) != 1)
		kill(ch.pid, SIGKILL);
	waitpid(ch.pid, NULL, 0);
	mtd_pageout_close(po);
	return 0;
}
