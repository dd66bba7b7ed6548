// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_access_sources.c - the host-side access sources on recorded and stand-in kernel files
 * (host/access/source_idle.c, source_damon.c, choose.c, guest_layout.c).
 *
 * This machine's kernel has no idle page tracking, and its DAMON runs another tool's kdamond
 * (which memtided must not touch), so neither can be driven live here.  These tests say so:
 *   - idle: QEMU's pagemap is *recorded* from a real mapping of this test process
 *     (/proc/self/pagemap, real PFNs: the test runs as root), laid into a stand-in /proc tree
 *     with a maps line and a cmdline; the page_idle bitmap is a plain file whose bits the test
 *     sets and clears as the kernel would (1 = idle, cleared by an access).
 *   - damon: a stand-in sysfs tree; the test plays the kernel's part (tried_regions).
 * What is checked: which pages come out young, the bitmap being re-marked idle, DAMON's
 * setup written as usage.rst says, frames moving between rounds (the pagemap re-read: the
 * young page follows its frame, and a frame outside the targets makes new ones), politeness (another tool's kdamond, running or not,
 * is refused and left untouched; a crashed memtided's is cleaned up), and cleanup on exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "access/choose.h"
#include "access/guest_layout.h"
#include "access/source.h"
#include "vmm.h"

#define GUEST_MIB 4
#define HVA       0x40000000ULL /* where the stand-in QEMU maps guest RAM */
#define PID       4242

static char root[128];

static void put_file(const char *rel, const void *data, size_t len)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void put_str(const char *rel, const char *s)
{
	put_file(rel, s, strlen(s));
}

static void get_str(const char *rel, char *buf, size_t len)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static void mk(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	assert_true(mkdir(p, 0755) == 0 || errno == EEXIST);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/memtide-test-access.XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

/* A stand-in /proc/PID for a QEMU with GUEST_MIB of RAM at HVA: maps, cmdline, and a
 * pagemap recorded from a real mapping of this process.  Returns the PFNs (0: absent). */
static uint64_t *fake_qemu(void)
{
	size_t pages = GUEST_MIB << 8;
	uint64_t *pfn = calloc(pages, sizeof(*pfn)), *pm = calloc(pages, sizeof(*pm));
	unsigned char *mem = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	char line[128];
	int fd = open("/proc/self/pagemap", O_RDONLY);

	assert_true(mem != MAP_FAILED);
	assert_true(fd >= 0);
	for (size_t i = 0; i < pages; i++)
		mem[i * 4096] = 1;
	/* recorded: the kernel's own pagemap entries for those pages */
	assert_int_equal(pread(fd, pm, pages * 8, (off_t)((uintptr_t)mem / 4096 * 8)),
			 (ssize_t)(pages * 8));
	close(fd);
	for (size_t i = 0; i < pages; i++)
		pfn[i] = (pm[i] >> 63) ? pm[i] & ((1ULL << 55) - 1) : 0;
	if (!pfn[0]) {
		free(pm);
		munmap(mem, pages * 4096);
		return pfn; /* not root: the caller skips */
	}
	mk("proc");
	snprintf(line, sizeof(line), "proc/%d", PID);
	mk(line);
	snprintf(line, sizeof(line), "%llx-%llx rw-p 00000000 00:00 0\n", (unsigned long long)HVA,
		 (unsigned long long)(HVA + pages * 4096));
	char rel[64];
	snprintf(rel, sizeof(rel), "proc/%d/maps", PID);
	put_str(rel, line);
	snprintf(rel, sizeof(rel), "proc/%d/cmdline", PID);
	put_file(rel, "qemu-system-x86_64\0-machine\0pc-i440fx-7.2\0", 42);
	/* the pagemap: a sparse file with the recorded entries at the stand-in HVA */
	char p[512];
	snprintf(p, sizeof(p), "%s/proc/%d/pagemap", root, PID);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(pwrite(fd, pm, pages * 8, (off_t)(HVA / 4096 * 8)), (ssize_t)(pages * 8));
	close(fd);
	free(pm);
	munmap(mem, pages * 4096);
	return pfn;
}

static const char *why_of(const struct mtd_access_choice *ch, const char *name)
{
	for (unsigned i = 0; i < ch->nr_notes; i++)
		if (!strcmp(ch->notes[i].name, name))
			return ch->notes[i].why;
	return "";
}

static void env_for(struct mtd_access_env *env, char *proc, char *bitmap, char *admin, char *run)
{
	mtd_access_env_default(env);
	snprintf(proc, 256, "%s/proc", root);
	snprintf(bitmap, 256, "%s/page_idle_bitmap", root);
	snprintf(admin, 256, "%s/damon", root);
	snprintf(run, 256, "%s/run", root);
	env->proc_dir = proc;
	env->idle_bitmap = bitmap;
	env->damon_admin = admin;
	env->run_dir = run;
	env->ept_dir = root;
	env->vm_name = "vm1";
	env->qemu_pid = PID;
	env->guest_bytes = GUEST_MIB << 20;
	env->interval_ms = 5000;
	env->ept_window_ms = 200;
}

static struct vmm_guest *guest_for(const struct mtd_source *s)
{
	struct vmm_guest_config gc;
	struct vmm_guest *g;
	vmm_guest_config_default(&gc);
	gc.ram = s->ram;
	gc.nr_ram = s->nr_ram;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);
	return g;
}

struct young_set {
	uint64_t pages;
	uint8_t young[GUEST_MIB << 8];
};

static void collect(void *arg, uint64_t gpa, uint64_t n)
{
	struct young_set *y = arg;
	for (uint64_t i = 0; i < n; i++)
		y->young[(gpa >> 12) + i] = 1;
	y->pages += n;
}

/* idle: pages whose bit the "kernel" cleared come out young, the others not; every frame is
 * marked idle again after each round. */
static void test_idle_recorded(void **state)
{
	char proc[256], bitmap[256], admin[256], run[256];
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	uint64_t *pfn = fake_qemu();
	size_t pages = GUEST_MIB << 8;

	(void)state;
	if (!pfn[0]) {
		free(pfn);
		skip(); /* pagemap shows no PFNs without CAP_SYS_ADMIN */
		return;
	}
	env_for(&env, proc, bitmap, admin, run);
	/* without the bitmap: not chosen, and the reason names the kernel option */
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	bool said = false;
	for (unsigned i = 0; i < ch.nr_notes; i++)
		said = said || (!strcmp(ch.notes[i].name, "idle") &&
				strstr(ch.notes[i].why, "no idle page tracking"));
	assert_true(said);
	/* the bitmap: a file as large as the highest frame needs, all zero (not idle) */
	uint64_t maxpfn = 0;
	for (size_t i = 0; i < pages; i++)
		maxpfn = pfn[i] > maxpfn ? pfn[i] : maxpfn;
	int fd = open(bitmap, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(ftruncate(fd, (off_t)((maxpfn / 64 + 1) * 8)), 0);
	env.pref = MTD_ACCESS_IDLE;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "idle") != 0)
		fail_msg("idle not chosen: %s", why_of(&ch, "idle"));
	/* the constructor marked every frame idle */
	for (size_t i = 0; i < pages; i++) {
		uint64_t w = 0;
		assert_int_equal(pread(fd, &w, 8, (off_t)(pfn[i] / 64 * 8)), 8);
		assert_true(w & (1ULL << (pfn[i] % 64)));
	}
	/* the guest touches every 3rd page: the kernel clears those frames' idle bits */
	for (size_t i = 0; i < pages; i += 3) {
		uint64_t w;
		assert_int_equal(pread(fd, &w, 8, (off_t)(pfn[i] / 64 * 8)), 8);
		w &= ~(1ULL << (pfn[i] % 64));
		assert_int_equal(pwrite(fd, &w, 8, (off_t)(pfn[i] / 64 * 8)), 8);
	}
	struct vmm_guest *g = guest_for(&src);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	struct young_set *y = calloc(1, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	for (size_t i = 0; i < pages; i++)
		assert_int_equal(y->young[i], i % 3 == 0);
	/* all idle again: the next round finds nothing young */
	assert_int_equal(src.ops->age(src.ctx, g, 2000), 0);
	memset(y, 0, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_int_equal(y->pages, 0);
	mtd_source_destroy(&src);
	vmm_guest_free(g);
	free(y);
	free(pfn);
	close(fd);
}

/* A kdamond tree as the kernel shows it with n kdamonds, kdamond 0 in `state`. */
static void fake_damon(unsigned n, const char *state0)
{
	char v[16];
	mk("damon");
	mk("damon/kdamonds");
	snprintf(v, sizeof(v), "%u\n", n);
	put_str("damon/kdamonds/nr_kdamonds", v);
	if (n) {
		mk("damon/kdamonds/0");
		put_str("damon/kdamonds/0/state", state0);
		put_str("damon/kdamonds/0/pid", "84\n");
	}
}

/* Region `i` of the stand-in tried_regions: one page at frame address `start`, its access
 * count and age as DAMON would report them. */
static void fake_region(unsigned i, uint64_t start, const char *nr_accesses, const char *age)
{
	const char *const file[] = {"start", "end", "nr_accesses", "age"};
	char rel[128], val[2][32];

	snprintf(rel, sizeof(rel), "damon/kdamonds/0/contexts/0/schemes/0/tried_regions/%u", i);
	mk(rel);
	snprintf(val[0], sizeof(val[0]), "%llu", (unsigned long long)start);
	snprintf(val[1], sizeof(val[1]), "%llu", (unsigned long long)start + 4096);
	for (unsigned f = 0; f < 4; f++) {
		snprintf(rel, sizeof(rel),
			 "damon/kdamonds/0/contexts/0/schemes/0/tried_regions/%u/%s", i, file[f]);
		put_str(rel, f < 2 ? val[f] : f == 2 ? nr_accesses : age);
	}
}

static void test_damon_polite(void **state)
{
	char proc[256], bitmap[256], admin[256], run[256], buf[64];
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	uint64_t *pfn = fake_qemu();

	(void)state;
	if (!pfn[0]) {
		free(pfn);
		skip();
		return;
	}
	env_for(&env, proc, bitmap, admin, run);
	mk("run");
	env.pref = MTD_ACCESS_DAMON;
	/* 1. another tool's kdamond runs: refused, untouched */
	fake_damon(1, "on\n");
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "another tool runs kdamond 0 (pid 84)"));
	get_str("damon/kdamonds/0/state", buf, sizeof(buf));
	assert_string_equal(buf, "on");
	get_str("damon/kdamonds/nr_kdamonds", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	/* 2. configured but not running: refused too (adding one would erase it) */
	fake_damon(1, "off\n");
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "configured"));
	get_str("damon/kdamonds/nr_kdamonds", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	/* 3. a crashed memtided's kdamond (owner pid gone): cleaned up, then taken */
	fake_damon(1, "on\n");
	put_str("run/damon.owner", "999999\n");
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "damon");
	get_str("damon/kdamonds/0/contexts/0/operations", buf, sizeof(buf));
	assert_string_equal(buf, "paddr");
	get_str("damon/kdamonds/0/state", buf, sizeof(buf));
	assert_string_equal(buf, "on");
	get_str("run/damon.owner", buf, sizeof(buf));
	assert_int_equal(strtol(buf, NULL, 10), getpid());
	get_str("damon/kdamonds/0/contexts/0/schemes/0/action", buf, sizeof(buf));
	assert_string_equal(buf, "stat");
	/* a second VM: memtided's one kdamond is taken */
	struct mtd_source src2;
	struct mtd_access_choice ch2;
	assert_int_equal(mtd_access_choose(&env, &src2, &ch2), 0);
	assert_string_equal(ch2.chosen, "none");
	/* 4. a round: the "kernel" reports two regions, one accessed, one idle for long */
	uint64_t hot = pfn[10] << 12, cold = pfn[700] << 12;
	mk("damon/kdamonds/0/contexts/0/schemes/0/tried_regions");
	fake_region(0, hot, "5", "1");
	fake_region(1, cold, "0", "500");
	struct vmm_guest *g = guest_for(&src);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	assert_int_equal(src.ops->age(src.ctx, g, 6000), 0);
	get_str("damon/kdamonds/0/state", buf, sizeof(buf));
	assert_string_equal(buf, "update_schemes_stats"); /* after update_schemes_tried_regions */
	struct young_set *y = calloc(1, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_true(y->young[10]);
	assert_false(y->young[700]);
	/* 4b. frames move (the host kernel migrates or swaps guest RAM): the source re-reads
	 * QEMU's pagemap every round, after reading the regions.  Pages 10 and 700 trade
	 * frames: the same frame ranges (no new targets), but the accessed region's frame now
	 * backs page 700.  The round that finds the move still reads its regions through the
	 * frames DAMON watched until then (page 10); the next one through the new ones. */
	char pm_path[512];
	snprintf(pm_path, sizeof(pm_path), "%s/proc/%d/pagemap", root, PID);
	int pmfd = open(pm_path, O_RDWR);
	assert_true(pmfd >= 0);
	uint64_t e10 = (1ULL << 63) | pfn[700], e700 = (1ULL << 63) | pfn[10];
	assert_int_equal(pwrite(pmfd, &e10, 8, (off_t)((HVA / 4096 + 10) * 8)), 8);
	assert_int_equal(pwrite(pmfd, &e700, 8, (off_t)((HVA / 4096 + 700) * 8)), 8);
	assert_int_equal(src.ops->age(src.ctx, g, 11000), 0);
	memset(y, 0, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_true(y->young[10]);
	assert_false(y->young[700]);
	assert_int_equal(src.ops->age(src.ctx, g, 13000), 0);
	memset(y, 0, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_true(y->young[700]);
	assert_false(y->young[10]);
	/* page 10 moves to a frame outside every target range: DAMON gets new targets, the
	 * new frame among them (regions written, then state "commit" before the next request) */
	uint64_t maxpfn = 0;
	for (size_t i = 0; i < (GUEST_MIB << 8); i++)
		maxpfn = pfn[i] > maxpfn ? pfn[i] : maxpfn;
	e10 = (1ULL << 63) | (maxpfn + 1000);
	assert_int_equal(pwrite(pmfd, &e10, 8, (off_t)((HVA / 4096 + 10) * 8)), 8);
	close(pmfd);
	assert_int_equal(src.ops->age(src.ctx, g, 16000), 0);
	/* the commit comes after the regions were read: a region DAMON makes for the new
	 * frames has no samples yet, so it is first read a round later */
	get_str("damon/kdamonds/0/state", buf, sizeof(buf));
	assert_string_equal(buf, "commit");
	get_str("damon/kdamonds/0/contexts/0/targets/0/regions/nr_regions", buf, sizeof(buf));
	unsigned long nreg = strtoul(buf, NULL, 10);
	bool found = false;
	for (unsigned long i = 0; i < nreg && !found; i++) {
		char rel[128];
		snprintf(rel, sizeof(rel),
			 "damon/kdamonds/0/contexts/0/targets/0/regions/%lu/start", i);
		get_str(rel, buf, sizeof(buf));
		found = strtoull(buf, NULL, 10) == (maxpfn + 1000) << 12;
	}
	assert_true(found);
	/* pages 100-611 move to 512 contiguous frames that cross a 2 MiB frame boundary (as
	 * when the host backs them with small pages in a row): the targets are cut there, so
	 * no target range crosses a 2 MiB frame boundary, DAMON's regions start on huge-page
	 * boundaries and a region never holds two huge pages */
	uint64_t base = ((maxpfn + 4096) & ~511ULL) - 200;
	pmfd = open(pm_path, O_RDWR);
	assert_true(pmfd >= 0);
	for (uint64_t i = 0; i < 512; i++) {
		uint64_t e = (1ULL << 63) | (base + i);
		assert_int_equal(pwrite(pmfd, &e, 8, (off_t)((HVA / 4096 + 100 + i) * 8)), 8);
	}
	close(pmfd);
	assert_int_equal(src.ops->age(src.ctx, g, 17000), 0);
	get_str("damon/kdamonds/0/contexts/0/targets/0/regions/nr_regions", buf, sizeof(buf));
	nreg = strtoul(buf, NULL, 10);
	unsigned long in_run = 0;
	for (unsigned long i = 0; i < nreg; i++) {
		char rel[128];
		snprintf(rel, sizeof(rel),
			 "damon/kdamonds/0/contexts/0/targets/0/regions/%lu/start", i);
		get_str(rel, buf, sizeof(buf));
		uint64_t rs = strtoull(buf, NULL, 10);
		snprintf(rel, sizeof(rel), "damon/kdamonds/0/contexts/0/targets/0/regions/%lu/end",
			 i);
		get_str(rel, buf, sizeof(buf));
		uint64_t re = strtoull(buf, NULL, 10);
		assert_true(re > rs);
		assert_int_equal(rs >> 21, (re - 1) >> 21);
		in_run += rs >= base << 12 && re <= (base + 512) << 12;
	}
	assert_int_equal(in_run, 2); /* the run, cut in two at the boundary */
	/* 4c. kdamond runs late (a busy host): a 5 s round holds 50 aggregations by the clock,
	 * but the stat scheme tried the 2 regions only 10 times each.  Region ages count
	 * aggregations, so an idle region of age 20 was idle the whole round (not young), and
	 * one of age 5 changed within it (young).  By the clock alone both would be young. */
	uint64_t a650 = pfn[650] << 12, a900 = pfn[900] << 12;
	fake_region(0, a650, "0", "20");
	fake_region(1, a900, "0", "5");
	mk("damon/kdamonds/0/contexts/0/schemes/0/stats");
	put_str("damon/kdamonds/0/contexts/0/schemes/0/stats/nr_tried", "1000");
	assert_int_equal(src.ops->age(src.ctx, g, 21000), 0); /* the first count */
	put_str("damon/kdamonds/0/contexts/0/schemes/0/stats/nr_tried", "1020");
	assert_int_equal(src.ops->age(src.ctx, g, 26000), 0);
	memset(y, 0, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_false(y->young[650]);
	assert_true(y->young[900]);
	/* 5. exit: switched off and nr_kdamonds back to 0, the record gone */
	mtd_source_destroy(&src);
	get_str("damon/kdamonds/0/state", buf, sizeof(buf));
	assert_string_equal(buf, "off");
	get_str("damon/kdamonds/nr_kdamonds", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	assert_int_equal(access("run/damon.owner", F_OK), -1);
	vmm_guest_free(g);
	free(y);
	free(pfn);
}

/* DAMON's region limits: regions of ~2 MiB at most (DAMON never merges past RAM / min
 * regions), at least one per frame range, the count capped for the sampling cost. */
static void test_damon_region_limits(void **state)
{
	uint64_t min, max;

	(void)state;
	mtd_damon_region_limits(3, 512ULL << 20, &min, &max); /* 512 MiB in 2 MiB regions */
	assert_int_equal(min, 256);
	assert_int_equal(max, 512);
	mtd_damon_region_limits(3, 8ULL << 20, &min, &max); /* a tiny guest: DAMON's floor */
	assert_int_equal(min, 10);
	assert_int_equal(max, 20);
	mtd_damon_region_limits(300, 512ULL << 20, &min, &max); /* scattered frames */
	assert_int_equal(min, 300);
	assert_int_equal(max, 600);
	mtd_damon_region_limits(100, 64ULL << 30, &min, &max); /* a big guest: the cost cap */
	assert_int_equal(min, 512);
	assert_int_equal(max, 1024);
	mtd_damon_region_limits(100000, 64ULL << 30, &min, &max); /* the ranges' own cap */
	assert_int_equal(min, 4096);
	assert_int_equal(max, 8192);
}

/* The pc / q35 RAM splits (QEMU 7.2). */
static void test_layout(void **state)
{
	struct vmm_range r[2];
	uint64_t low;
	char rel[64];

	(void)state;
	mk("proc");
	mk("proc/77");
	snprintf(rel, sizeof(rel), "proc/77/cmdline");
	put_file(rel, "qemu\0-machine\0pc-q35-7.2,accel=tcg\0", 35);
	assert_int_equal(mtd_guest_layout(root, 0, 2ULL << 30, r, &low), 1); /* no cmdline: pc */
	char proc[256];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	assert_int_equal(mtd_guest_layout(proc, 77, 2560ULL << 20, r, &low), 1);
	assert_int_equal(mtd_guest_layout(proc, 77, 4ULL << 30, r, &low), 2);
	assert_int_equal(low, 2ULL << 30);
	assert_int_equal(r[1].start, 4ULL << 30);
	assert_int_equal(r[1].end, 6ULL << 30);
	assert_int_equal(mtd_guest_ram_offset(5ULL << 30, 4ULL << 30, low), 3ULL << 30);
	put_file(rel, "qemu\0-M\0pc\0", 11);
	assert_int_equal(mtd_guest_layout(proc, 77, 3ULL << 30, r, &low), 1);
	assert_int_equal(mtd_guest_layout(proc, 77, 4ULL << 30, r, &low), 2);
	assert_int_equal(low, 3ULL << 30);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_idle_recorded),
	    cmocka_unit_test(test_damon_polite),
	    cmocka_unit_test(test_damon_region_limits),
	    cmocka_unit_test(test_layout),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
