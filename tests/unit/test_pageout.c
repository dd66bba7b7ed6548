// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_pageout.c - the pageout actuator (host/act/pageout.c) against a real process, without
 * touching host-global state.  The free page scan (mtd_pageout_find_empty) against the same
 * child: its untouched half is the guest's free memory, until it touches a page of it.
 *
 * A child process maps 16 MiB (2 MiB-aligned, MADV_HUGEPAGE, as QEMU maps guest RAM), touches
 * and mlocks the first 8 MiB and leaves the rest untouched; a hand-made layout places that
 * mapping at GPA 1 GiB.  Locked pages are the ones the kernel's pageout always refuses
 * (EINVAL for their mapping), so every outcome here is the same whether or not the host has
 * swap: candidates the kernel refused are reported kept (refused) and held until
 * mtd_pageout_retry_held, untouched pages are evicted as empty, and pages outside the map,
 * beyond the swap budget or in blocks khugepaged would rebuild are never tried.  The path
 * into swap and back (refaults, collapses) needs a swap device: tests/integration/
 * host_pageout.sh runs it under the shared lock with a zram device of its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/pageout.h"
#include "vmm.h"

#define MiB       ((uint64_t)1 << 20)
#define GPA_BASE  ((uint64_t)1 << 30)
#define CHILD_MIB 16

struct child {
	pid_t pid;
	int cmd, ack;
	uint64_t hva;
};

/*
 * Lock [p, p + len) for real.  Under -fsanitize=address, mlock() is ASan's interceptor, which
 * locks nothing and returns 0 (verbosity=1 says "AddressSanitizer ignores mlock"), and the
 * child of an instrumented test runs it too: so the lock goes to the kernel directly, and
 * VmLck must then show it, or the child stops here rather than leave the pages unlocked.
 */
static int lock_for_real(void *p, size_t len)
{
	char line[128];
	unsigned long kib = 0;
	FILE *f;

	if (syscall(SYS_mlock, p, len) != 0) {
		fprintf(stderr, "test_pageout child: mlock of %zu bytes: %s\n", len,
			strerror(errno));
		return -1;
	}
	f = fopen("/proc/self/status", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmLck:", 6) == 0) {
			kib = strtoul(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	if (kib * 1024 < len) {
		fprintf(stderr, "test_pageout child: VmLck is %lu kB after the mlock\n", kib);
		return -1;
	}
	return 0;
}

/* The child: map, touch + lock the first half, then obey "t<idx>" (touch page idx) and "q". */
static void child_main(int cmd, int ack)
{
	size_t sz = CHILD_MIB * MiB;
	char *raw =
	    mmap(NULL, sz + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	uint64_t a = (uintptr_t)p;
	char c;
	uint32_t idx;

	madvise(p, sz, MADV_HUGEPAGE);
	memset(p, 0x5a, sz / 2);
	if (lock_for_real(p, sz / 2) != 0)
		_exit(2);
	if (write(ack, &a, sizeof(a)) != sizeof(a))
		_exit(3);
	while (read(cmd, &c, 1) == 1) {
		if (c == 'q')
			break;
		if (read(cmd, &idx, sizeof(idx)) != sizeof(idx))
			break;
		p[(size_t)idx * 4096] = 1;
		if (write(ack, &c, 1) != 1)
			break;
	}
	_exit(0);
}

static struct child *child_start(void)
{
	struct child *ch = calloc(1, sizeof(*ch));
	int c[2], a[2];

	assert_non_null(ch);
	assert_int_equal(pipe(c), 0);
	assert_int_equal(pipe(a), 0);
	ch->pid = fork();
	assert_true(ch->pid >= 0);
	if (ch->pid == 0) {
		close(c[1]);
		close(a[0]);
		child_main(c[0], a[1]);
	}
	close(c[0]);
	close(a[1]);
	ch->cmd = c[1];
	ch->ack = a[0];
	assert_int_equal(read(ch->ack, &ch->hva, sizeof(ch->hva)), sizeof(ch->hva));
	return ch;
}

static void child_touch(struct child *ch, uint32_t idx)
{
	char c = 't';

	assert_int_equal(write(ch->cmd, &c, 1), 1);
	assert_int_equal(write(ch->cmd, &idx, sizeof(idx)), sizeof(idx));
	assert_int_equal(read(ch->ack, &c, 1), 1);
}

static void child_stop(struct child *ch)
{
	char c = 'q';

	if (write(ch->cmd, &c, 1) != 1)
		kill(ch->pid, SIGKILL);
	waitpid(ch->pid, NULL, 0);
	close(ch->cmd);
	close(ch->ack);
	free(ch);
}

static void layout_of(const struct child *ch, struct mtd_ram_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->nr = 1;
	l->sure = true;
	l->r[0] = (struct mtd_ram_region){.gpa = GPA_BASE,
					  .bytes = CHILD_MIB * MiB,
					  .hva = ch->hva,
					  .backing = MTD_RAM_ANON,
					  .page_bytes = 4096,
					  .thp = true,
					  .evictable = true};
	snprintf(l->r[0].block, sizeof(l->r[0].block), "test.ram");
	l->ram_bytes = l->evictable_bytes = CHILD_MIB * MiB;
}

/* Kept pages, tallied by reason, and checked to be disjoint runs inside what was asked. */
struct kept_log {
	uint64_t pages[MTD_PO_KEPT_NR];
	uint64_t calls;
};

static void on_kept(void *arg, uint64_t gpa, uint64_t npages, enum mtd_pageout_kept why)
{
	struct kept_log *k = arg;

	assert_true(gpa % 4096 == 0 && npages > 0);
	assert_true((unsigned)why < MTD_PO_KEPT_NR);
	k->pages[why] += npages;
	k->calls++;
}

static const struct mtd_thp_settings thp_default = {
    .scans = true, .always = false, .max_ptes_swap = 64, .max_ptes_none = 511};

static void test_thp_settings(void **state)
{
	char dir[] = "/tmp/memtide-test-sys.XXXXXX", path[256];
	struct mtd_thp_settings t;
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	/* Nothing there: the kernel's defaults. */
	assert_int_equal(mtd_pageout_read_thp(dir, &t), 0);
	assert_true(t.scans);
	assert_int_equal(t.max_ptes_swap, 64);
	snprintf(path, sizeof(path), "%s/kernel", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/kernel/mm", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/khugepaged", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/enabled", dir);
	f = fopen(path, "w");
	fputs("always madvise [never]\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/khugepaged/max_ptes_swap",
		 dir);
	f = fopen(path, "w");
	fputs("0\n", f);
	fclose(f);
	assert_int_equal(mtd_pageout_read_thp(dir, &t), 0);
	assert_false(t.scans);
	assert_int_equal(t.max_ptes_swap, 0);
	assert_int_equal(t.max_ptes_none, 511);
	assert_int_equal(system("rm -rf /tmp/memtide-test-sys.*"), 0);
}

static void test_open_errors(void **state)
{
	struct mtd_ram_layout l;
	struct mtd_pageout *po = NULL;
	struct child fake = {.hva = 1ULL << 40};
	char err[200];
	(void)state;

	layout_of(&fake, &l);
	/* A pid that does not exist: pidfd_open says so. */
	assert_int_equal(mtd_pageout_open(0x3fffffff, &l, NULL, &po, err, sizeof(err)), -ESRCH);
	assert_null(po);
	assert_non_null(strstr(err, "pidfd_open"));
}

/* The guest's free memory as the host sees it (mtd_pageout_find_empty): runs of pages
 * neither present nor swapped, that memtided has not evicted itself. */
struct empty_log {
	uint64_t pages, runs, last_end;
	uint64_t probe; /* a gpa that must not be reported */
	bool probe_seen;
};

static void on_empty(void *arg, uint64_t gpa, uint64_t npages)
{
	struct empty_log *e = arg;

	assert_true(gpa % 4096 == 0 && npages > 0);
	assert_true(gpa >= e->last_end); /* ascending, disjoint */
	e->last_end = gpa + npages * 4096;
	if (e->probe >= gpa && e->probe < e->last_end)
		e->probe_seen = true;
	e->pages += npages;
	e->runs++;
}

static void test_find_empty(void **state)
{
	struct child *ch = child_start();
	struct mtd_ram_layout l;
	struct mtd_pageout *po;
	struct mtd_pageout_result res;
	struct kept_log k = {0};
	char err[200];
	(void)state;

	layout_of(ch, &l);
	assert_int_equal(mtd_pageout_open(ch->pid, &l, NULL, &po, err, sizeof(err)), 0);
	/* The locked first half is present; the untouched second half holds nothing. */
	struct empty_log e = {.probe = GPA_BASE};
	assert_int_equal(mtd_pageout_find_empty(po, on_empty, &e), CHILD_MIB * 128);
	assert_int_equal(e.pages, CHILD_MIB * 128);
	assert_int_equal(e.runs, 1);
	assert_false(e.probe_seen);
	/* The child uses one page of the second half (THP may fill its whole 2 MiB block). */
	child_touch(ch, CHILD_MIB * 128 + 700);
	e = (struct empty_log){.probe = GPA_BASE + (CHILD_MIB * 128 + 700) * 4096ULL};
	int64_t n = mtd_pageout_find_empty(po, on_empty, &e);
	assert_true(n >= CHILD_MIB * 128 - 512 && n <= CHILD_MIB * 128 - 1);
	assert_int_equal((uint64_t)n, e.pages);
	assert_false(e.probe_seen);
	/* Pages memtided evicts are its own, not the guest's free memory. */
	struct vmm_run all = {.gpa = GPA_BASE, .npages = CHILD_MIB * 256};
	assert_int_equal(mtd_pageout_runs(po, &all, 1, &thp_default, UINT64_MAX, on_kept, &k, &res),
			 0);
	assert_true(res.empty_pages >= (uint64_t)n);
	e = (struct empty_log){0};
	assert_int_equal(mtd_pageout_find_empty(po, on_empty, &e), 0);
	assert_int_equal(e.runs, 0);
	assert_int_equal(mtd_pageout_find_empty(po, NULL, NULL), -EINVAL);
	mtd_pageout_close(po);
	child_stop(ch);
}

static void test_pageout_outcomes(void **state)
{
	struct child *ch = child_start();
	struct mtd_ram_layout l;
	struct mtd_pageout *po;
	struct mtd_pageout_result res;
	struct mtd_pageout_stats st;
	struct kept_log k = {0};
	char err[200];
	(void)state;

	layout_of(ch, &l);
	assert_int_equal(mtd_pageout_open(ch->pid, &l, NULL, &po, err, sizeof(err)), 0);
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.evictable_pages, CHILD_MIB * 256);
	assert_int_equal(st.swapped_pages, 0);
	assert_int_equal(st.adopted_pages, 0);

	/* The whole region, plus 1 MiB beyond it on each side (outside the map). */
	struct vmm_run runs[] = {
	    {.gpa = GPA_BASE - MiB, .npages = 256},
	    {.gpa = GPA_BASE, .npages = CHILD_MIB * 256},
	    {.gpa = GPA_BASE + CHILD_MIB * MiB, .npages = 256},
	};
	assert_int_equal(mtd_pageout_runs(po, runs, 3, &thp_default, UINT64_MAX, on_kept, &k, &res),
			 0);
	/* Untouched half: evicted as empty.  Locked half: tried, refused by the kernel (its
	 * mapping is locked: EINVAL, which the vector's return says), kept and held. */
	assert_int_equal(res.empty_pages, CHILD_MIB * 128);
	assert_int_equal(res.swapped_pages, 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], CHILD_MIB * 128);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_RESIDENT], 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_OUTSIDE], 512);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_THP], 0);
	assert_true(res.syscalls >= 2); /* the vector, then the refused span per mapping */
	assert_int_equal(res.refused_spans, 1);
	assert_int_equal(k.pages[MTD_PO_KEPT_REFUSED], CHILD_MIB * 128);
	assert_int_equal(k.pages[MTD_PO_KEPT_OUTSIDE], 512);
	/* Kept pages come in runs, not page by page. */
	assert_true(k.calls <= 8);
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.empty_pages, CHILD_MIB * 128);
	assert_int_equal(st.kept_total[MTD_PO_KEPT_REFUSED], CHILD_MIB * 128);
	assert_int_equal(st.held_pages, CHILD_MIB * 128);

	/* Evicting the same pages again: the empty ones are already out, the held ones are kept
	 * without asking the kernel again. */
	memset(&k, 0, sizeof(k));
	assert_int_equal(
	    mtd_pageout_runs(po, &runs[1], 1, &thp_default, UINT64_MAX, on_kept, &k, &res), 0);
	assert_int_equal(res.already_pages, CHILD_MIB * 128);
	assert_int_equal(res.empty_pages, 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_RESIDENT], CHILD_MIB * 128);
	assert_int_equal(res.syscalls, 0);
	/* Once retried, they are asked for again (and refused again). */
	assert_int_equal(mtd_pageout_retry_held(po), CHILD_MIB * 128);
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.held_pages, 0);
	assert_int_equal(
	    mtd_pageout_runs(po, &runs[1], 1, &thp_default, UINT64_MAX, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], CHILD_MIB * 128);
	assert_true(res.syscalls >= 2);

	/* The guest uses 3 of the empty pages: the scan restores them, with no refault (nothing
	 * was read from swap).  A first touch of an empty 2 MiB block is backed by a huge page
	 * (MADV_HUGEPAGE), so two blocks, 1024 pages, are resident again. */
	struct scan_log {
		uint64_t refaults, restored;
	} sl = {0};
	struct mtd_pageout_scan_ops ops = {
	    .refault = NULL,
	    .restored = NULL,
	};
	(void)ops;
	child_touch(ch, CHILD_MIB * 128 + 5);
	child_touch(ch, CHILD_MIB * 128 + 6);
	child_touch(ch, CHILD_MIB * 256 - 1);
	struct mtd_pageout_scan_result sr;
	assert_int_equal(mtd_pageout_scan(po, &ops, &sl, &sr), 0);
	assert_int_equal(sr.filled_pages, 1024);
	assert_int_equal(sr.refaults, 0);
	assert_int_equal(sr.blocks_read, 4); /* only blocks holding evicted pages */
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.empty_pages, CHILD_MIB * 128 - 1024);

	/* QEMU gone: every call says so. */
	child_stop(ch);
	assert_int_equal(mtd_pageout_scan(po, &ops, &sl, &sr), -ESRCH);
	memset(&k, 0, sizeof(k));
	struct vmm_run one = {.gpa = GPA_BASE, .npages = 16};
	int rc = mtd_pageout_runs(po, &one, 1, &thp_default, UINT64_MAX, on_kept, &k, &res);
	assert_int_equal(rc, -ESRCH);
	mtd_pageout_close(po);
}

static uint64_t restored_pages;
static void on_restored(void *arg, uint64_t gpa, uint64_t npages)
{
	(void)arg;
	(void)gpa;
	restored_pages += npages;
}

static void test_thp_rule_and_budget(void **state)
{
	struct child *ch = child_start();
	struct mtd_ram_layout l;
	struct mtd_pageout *po;
	struct mtd_pageout_result res;
	struct kept_log k = {0};
	struct mtd_thp_settings thp = thp_default;
	char err[200];
	(void)state;

	layout_of(ch, &l);
	assert_int_equal(mtd_pageout_open(ch->pid, &l, NULL, &po, err, sizeof(err)), 0);
	/* 10 pages of a huge-page block: khugepaged would read them back (10 <= 64). */
	struct vmm_run few = {.gpa = GPA_BASE + 4096 * 3, .npages = 10};
	assert_int_equal(mtd_pageout_runs(po, &few, 1, &thp, UINT64_MAX, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_THP], 10);
	assert_int_equal(res.syscalls, 0);
	/* 65 pages: more than max_ptes_swap, tried (and refused: they are locked). */
	memset(&k, 0, sizeof(k));
	struct vmm_run more = {.gpa = GPA_BASE, .npages = 65};
	assert_int_equal(mtd_pageout_runs(po, &more, 1, &thp, UINT64_MAX, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_THP], 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], 65);
	/* khugepaged off (THP never, or a mapping without MADV_HUGEPAGE under "madvise"): no
	 * rule (the 10 were held by the try above). */
	thp.scans = false;
	(void)mtd_pageout_retry_held(po);
	assert_int_equal(mtd_pageout_runs(po, &few, 1, &thp, UINT64_MAX, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_THP], 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], 10);
	/* A budget of 100 pages over 1024 candidates: the rest wait for swap room. */
	struct vmm_run half = {.gpa = GPA_BASE, .npages = 1024};
	(void)mtd_pageout_retry_held(po);
	assert_int_equal(mtd_pageout_runs(po, &half, 1, &thp_default, 100, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_SWAP_FULL], 924);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], 100);
	/* A budget of 600: block 0 takes 512, and the 88 left for block 1 would leave it within
	 * khugepaged's reach... no: 88 > 64, so it takes them. */
	(void)mtd_pageout_retry_held(po);
	assert_int_equal(mtd_pageout_runs(po, &half, 1, &thp_default, 600, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_SWAP_FULL], 424);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], 600);
	/* A budget of 550: 38 for block 1 is not worth splitting its huge page for. */
	(void)mtd_pageout_retry_held(po);
	assert_int_equal(mtd_pageout_runs(po, &half, 1, &thp_default, 550, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_SWAP_FULL], 512);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_REFUSED], 512);
	/* A budget of 0: nothing is tried at all. */
	(void)mtd_pageout_retry_held(po);
	assert_int_equal(mtd_pageout_runs(po, &half, 1, &thp_default, 0, on_kept, &k, &res), 0);
	assert_int_equal(res.kept_pages[MTD_PO_KEPT_SWAP_FULL], 1024);
	assert_int_equal(res.syscalls, 0);
	struct mtd_pageout_stats st;
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.swapped_pages, 0);
	assert_int_equal(st.empty_pages, 0);

	/* A layout change that keeps the region keeps its state; one that moves it drops it. */
	struct vmm_run empty_half = {.gpa = GPA_BASE + 8 * MiB, .npages = 1024};
	assert_int_equal(mtd_pageout_runs(po, &empty_half, 1, &thp, UINT64_MAX, on_kept, &k, &res),
			 0);
	assert_int_equal(res.empty_pages, 1024);
	assert_int_equal(mtd_pageout_set_layout(po, &l), 0);
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.empty_pages, 1024);
	l.r[0].gpa += 16 * MiB;
	assert_int_equal(mtd_pageout_set_layout(po, &l), 0);
	mtd_pageout_get_stats(po, &st);
	assert_int_equal(st.empty_pages, 0);
	struct mtd_pageout_scan_ops ops = {.restored = on_restored};
	struct mtd_pageout_scan_result sr;
	restored_pages = 0;
	assert_int_equal(mtd_pageout_scan(po, &ops, NULL, &sr), 0);
	assert_int_equal(sr.blocks_read, 0);
	assert_int_equal(restored_pages, 0);
	mtd_pageout_close(po);
	child_stop(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_thp_settings),        cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_pageout_outcomes),    cmocka_unit_test(test_find_empty),
	    cmocka_unit_test(test_thp_rule_and_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
