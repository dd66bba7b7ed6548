// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_access_sources.c - the host-side access sources (host/access/source_idle.c,
 * source_damon.c, guest_ram.c, choose.c, tick_age.c) against a real process's memory and
 * kernel interfaces that behave as the kernel's do.
 *
 * The "QEMU" is a child process with GUEST_MIB of private anonymous memory (4 KiB pages):
 * some pages written (frames of their own), some only read (the kernel maps its shared zero
 * page there), the rest untouched.  Its monitor is a function answering what QEMU 7.2
 * answers for a guest whose RAM is that mapping (at GPA 0, or split around a hole as a pc
 * or q35 machine splits RAM above 4 GiB); /proc is a directory of the test's whose PID
 * entry holds links to the child's real smaps, maps, fd and pagemap (the real frames: the
 * test runs as root), or, where a test needs frames the kernel would not give on demand, a
 * pagemap file written from the real one.
 *
 * This machine's kernel has no idle page tracking, and its DAMON runs another tool's
 * kdamond from boot (which memtided must not touch), so neither can be driven live here: the
 * page_idle bitmap and DAMON's sysfs are stand-ins served by FUSE that behave as the
 * kernel's (kernel_fs.h says how: word-sized bitmap I/O, non-LRU frames never idle,
 * directories made by nr_* writes, commands refused on a stopped kdamond, a kernel before
 * 6.2 without tried_regions).  The test plays the hardware: an access clears a frame's idle
 * bit; DAMON's regions are what the test says DAMON saw.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "access/choose.h"
#include "access/guest_ram.h"
#include "access/source.h"
#include "access/tick_age.h"
#include "base/turns.h"
#include "kernel_fs.h"
#include "vmm.h"

#define MiB       ((uint64_t)1 << 20)
#define GUEST_MIB 20 /* 5120 pages: room for more frame ranges than DAMON is given */
#define PAGES     (GUEST_MIB * 256)
#define WRITTEN   1024        /* pages 0..1023 written */
#define READ_END  1536        /* pages 1024..1535 only read: the zero page */
#define HIGH      (PAGES / 2) /* pages HIGH..HIGH+63 written too (above 4 GiB when split) */
#define GiB4      ((uint64_t)4 << 30)

static char root[128], mnt[160], proc[160], run[160];
static bool have_kfs;

/* ---- the child "QEMU" ------------------------------------------------------------------ */

struct child {
	pid_t pid;
	int cmd, ack;
	uint64_t hva;
};

static void child_main(int cmd, int ack)
{
	char *raw = mmap(NULL, (GUEST_MIB + 2) * MiB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	uint64_t a = (uintptr_t)p;
	char c;

	madvise((void *)p, GUEST_MIB * MiB, MADV_NOHUGEPAGE); /* a frame per page */
	for (size_t i = 0; i < WRITTEN; i++)
		p[i * 4096] = 1;
	for (size_t i = WRITTEN; i < READ_END; i++)
		(void)p[i * 4096];
	for (size_t i = HIGH; i < HIGH + 64; i++)
		p[i * 4096] = 1;
	if (write(ack, &a, sizeof(a)) != sizeof(a))
		_exit(2);
	while (read(cmd, &c, 1) == 1 && c != 'q') {
	}
	_exit(0);
}

static struct child *child_start(void)
{
	struct child *ch = calloc(1, sizeof(*ch));
	int c[2], a[2];

	assert_int_equal(pipe(c), 0);
	assert_int_equal(pipe(a), 0);
	ch->pid = fork();
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

/* The child's frames, from its real pagemap: pfn[i] (0: not present). */
static void child_frames(const struct child *ch, uint64_t *pfn)
{
	char path[64];
	uint64_t *pm = calloc(PAGES, 8);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", ch->pid);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, pm, PAGES * 8, (off_t)(ch->hva / 4096 * 8)), PAGES * 8);
	close(fd);
	for (size_t i = 0; i < PAGES; i++)
		pfn[i] = (pm[i] >> 63) ? pm[i] & ((1ULL << 55) - 1) : 0;
	free(pm);
}

/* ---- its monitor --------------------------------------------------------------------- */

struct monitor {
	struct child *ch;
	bool split;   /* RAM in two ranges: [0, half) and [4 GiB, 4 GiB + half) */
	bool hugetlb; /* the RAM block's pages are 2 MiB (hugetlbfs) */
};

static int fake_qmp(void *ctx, const char *cmd, struct json_object *args, struct json_object **ret,
		    char *err, size_t errlen)
{
	struct monitor *m = ctx;
	char buf[1024];
	const uint64_t half = GUEST_MIB * MiB / 2;

	if (strcmp(cmd, "query-memdev") == 0) {
		snprintf(buf, sizeof(buf), "[{\"id\":\"pc.ram\",\"size\":%llu}]",
			 (unsigned long long)(GUEST_MIB * MiB));
		*ret = json_tokener_parse(buf);
		return 0;
	}
	if (strcmp(cmd, "query-memory-devices") == 0) {
		*ret = json_object_new_array();
		return 0;
	}
	if (strcmp(cmd, "human-monitor-command") != 0) {
		snprintf(err, errlen, "unexpected %s", cmd);
		return -EREMOTEIO;
	}
	struct json_object *cl;
	assert_true(json_object_object_get_ex(args, "command-line", &cl));
	const char *line = json_object_get_string(cl);
	unsigned long long gpa = 0;
	char *end = NULL;
	if (strcmp(line, "info mtree -f") == 0) {
		if (m->split)
			snprintf(buf, sizeof(buf),
				 "FlatView #0\n AS \"memory\", root: system\n Root memory region: "
				 "system\n  0000000000000000-%016llx (prio 0, ram): pc.ram\n"
				 "  0000000100000000-%016llx (prio 0, ram): pc.ram "
				 "@%016llx\n\n",
				 (unsigned long long)(half - 1),
				 (unsigned long long)(GiB4 + half - 1), (unsigned long long)half);
		else
			snprintf(buf, sizeof(buf),
				 "FlatView #0\n AS \"memory\", root: system\n Root memory region: "
				 "system\n  0000000000000000-%016llx (prio 0, ram): "
				 "pc.ram\n\n",
				 (unsigned long long)(2 * half - 1));
	} else if (strcmp(line, "info ramblock") == 0) {
		snprintf(buf, sizeof(buf),
			 "              Block Name    PSize              Offset               "
			 "Used              Total\n                  pc.ram    %s  "
			 "0x0000000000000000 0x%016llx 0x%016llx\n",
			 m->hugetlb ? "2 MiB" : "4 KiB", 2 * (unsigned long long)half,
			 2 * (unsigned long long)half);
	} else if (strncmp(line, "gpa2hva 0x", 10) == 0 &&
		   (gpa = strtoull(line + 10, &end, 16), end != line + 10 && !*end)) {
		uint64_t off = gpa >= GiB4 ? gpa - GiB4 + half : gpa;
		snprintf(buf, sizeof(buf), "Host virtual address for 0x%llx (pc.ram) is 0x%llx\n",
			 gpa, (unsigned long long)m->ch->hva + off);
	} else {
		snprintf(err, errlen, "unexpected HMP %s", line);
		return -EREMOTEIO;
	}
	*ret = json_object_new_string(buf);
	return 0;
}

/* proc/PID: links to the child's real files; pagemap a link too unless `pagemap` is given
 * (PAGES entries written at the child's HVA: frames the test chose). */
static void make_proc(const struct child *ch, const uint64_t *pagemap)
{
	static const char *const files[] = {"smaps", "maps", "fd", "status"};
	char d[256], l[320], t[64];

	snprintf(d, sizeof(d), "%s/%d", proc, ch->pid);
	mkdir(proc, 0755);
	mkdir(d, 0755);
	for (size_t i = 0; i < 4; i++) {
		snprintf(l, sizeof(l), "%s/%s", d, files[i]);
		snprintf(t, sizeof(t), "/proc/%d/%s", ch->pid, files[i]);
		unlink(l);
		assert_int_equal(symlink(t, l), 0);
	}
	snprintf(l, sizeof(l), "%s/pagemap", d);
	unlink(l);
	if (!pagemap) {
		snprintf(t, sizeof(t), "/proc/%d/pagemap", ch->pid);
		assert_int_equal(symlink(t, l), 0);
		return;
	}
	int fd = open(l, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, pagemap, PAGES * 8, (off_t)(ch->hva / 4096 * 8)), PAGES * 8);
	close(fd);
}

static void env_for(struct mtd_access_env *env, struct monitor *m, enum mtd_access_pref pref)
{
	static char bitmap[200], admin[200];

	mtd_access_env_default(env);
	snprintf(bitmap, sizeof(bitmap), "%s/page_idle/bitmap", mnt);
	snprintf(admin, sizeof(admin), "%s/damon", mnt);
	env->proc_dir = proc;
	env->idle_bitmap = bitmap;
	env->damon_admin = admin;
	env->run_dir = run;
	env->ept_dir = root;
	env->vm_name = "vm1";
	env->qemu_pid = m->ch->pid;
	env->qmp = fake_qmp;
	env->qmp_ctx = m;
	env->guest_bytes = GUEST_MIB * MiB;
	env->interval_ms = 5000;
	env->ept_window_ms = 200;
	env->pref = pref;
}

static const char *why_of(const struct mtd_access_choice *ch, const char *name)
{
	for (unsigned i = 0; i < ch->nr_notes; i++)
		if (!strcmp(ch->notes[i].name, name))
			return ch->notes[i].why;
	return "";
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

/* The pages libvmm has in its youngest generation, by page index of the child's mapping. */
struct young_set {
	uint64_t pages;
	bool split;
	uint8_t young[PAGES];
};

static void collect(void *arg, uint64_t gpa, uint64_t n)
{
	struct young_set *y = arg;
	uint64_t base = y->split && gpa >= GiB4 ? gpa - GiB4 + GUEST_MIB * MiB / 2 : gpa;
	for (uint64_t i = 0; i < n; i++)
		y->young[(base >> 12) + i] = 1;
	y->pages += n;
}

static uint64_t max_seq(const struct vmm_guest *g)
{
	struct vmm_guest_stats st;
	vmm_guest_get_stats(g, &st);
	return st.max_seq;
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/memtide-test-access.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(mnt, sizeof(mnt), "%s/kernel", root);
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(run, sizeof(run), "%s/run", root);
	mkdir(mnt, 0755);
	mkdir(run, 0755);
	have_kfs = getuid() == 0 && kfs_mount(mnt) == 0;
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	(void)state;
	kfs_umount();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

#define NEED_KERNEL_FS()                                                                           \
	do {                                                                                       \
		if (!have_kfs) {                                                                   \
			print_message("needs root and FUSE for the stand-in kernel files\n");      \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* ---- idle ------------------------------------------------------------------------------ */

/* The kernel's idle page tracking over every frame up to the child's highest, the zero
 * page (the child's only-read pages) not on the LRU, as in the kernel.  The highest frame. */
static uint64_t idle_kernel(const uint64_t *pfn)
{
	uint64_t maxpfn = 0;

	for (size_t i = 0; i < PAGES; i++)
		maxpfn = pfn[i] > maxpfn ? pfn[i] : maxpfn;
	free(K.idle);
	free(K.lru_not);
	kfs_idle_frames(maxpfn);
	kfs_idle_not_lru(pfn[WRITTEN]);
	return maxpfn;
}

static void test_idle(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	uint64_t *pfn = calloc(PAGES, 8), maxpfn = 0;

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	child_frames(m.ch, pfn);
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_IDLE);
	/* without the bitmap: not chosen, and the reason names the kernel option */
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "idle"), "no idle page tracking"));
	maxpfn = idle_kernel(pfn);
	uint64_t zero_pfn = pfn[WRITTEN];
	assert_true(zero_pfn != 0);
	for (size_t i = WRITTEN; i < READ_END; i++)
		assert_int_equal(pfn[i], zero_pfn); /* the kernel's shared zero page */
	(void)maxpfn;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "idle") != 0)
		fail_msg("idle not chosen: %s", why_of(&ch, "idle"));
	assert_int_equal(src.nr_ram, 1);
	assert_int_equal(src.ram[0].end, GUEST_MIB * MiB);
	/* the constructor marked every written frame idle, in whole words the kernel took */
	for (size_t i = 0; i < WRITTEN; i++)
		assert_true(kfs_idle_is_idle(pfn[i]));
	assert_int_equal(K.writes_refused, 0);
	/* the guest touches every 3rd written page: the "hardware" clears those idle bits */
	for (size_t i = 0; i < WRITTEN; i += 3)
		kfs_idle_access(pfn[i]);
	struct vmm_guest *g = guest_for(&src);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	struct young_set *y = calloc(1, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	/* young: exactly the touched pages; the zero page's, which the kernel reads "not idle"
	 * for ever, are not (they hold nothing of the guest's) */
	for (size_t i = 0; i < PAGES; i++)
		if (y->young[i] != (i < WRITTEN && i % 3 == 0))
			fail_msg("page %zu young %d", i, y->young[i]);
	/* ... and libvmm counts them free, not resident cold memory for the eviction hand */
	struct vmm_guest_stats gs;
	vmm_guest_get_stats(g, &gs);
	assert_true(gs.free_pages >= READ_END - WRITTEN);
	/* all idle again: the next round finds nothing young */
	assert_int_equal(src.ops->age(src.ctx, g, 2000), 0);
	memset(y, 0, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_int_equal(y->pages, 0);
	assert_int_equal(K.writes_refused, 0);

	/* A round that cannot be read (the bitmap shrank: the kernel answers nothing past its
	 * end) fails and leaves libvmm as it was: no new generation in which nothing was
	 * touched; tick_age then holds the controller until a round succeeds. */
	uint64_t seq = max_seq(g);
	uint64_t words = K.idle_words;
	K.idle_words = 1;
	struct mtd_age_state ast = {0};
	struct mtd_turns turns;
	assert_int_equal(mtd_turns_init(&turns, 1), 0);
	struct mtd_age_env ae = {
	    .vm = "vm1", .source = &src, .guest = g, .turns = &turns, .state = &ast};
	struct mtd_tick t = {.now_ms = 3000, .aging = true};
	mtd_tick_age(&ae, &t);
	assert_true(t.age_rc < 0);
	assert_int_equal(max_seq(g), seq);
	assert_true(t.source_fresh_known);
	assert_false(t.source_fresh);
	/* the next tick, out of schedule, still says stale */
	struct mtd_tick t2 = {.now_ms = 3500, .aging = false};
	mtd_tick_age(&ae, &t2);
	assert_false(t2.source_fresh);
	K.idle_words = words;
	struct mtd_tick t3 = {.now_ms = 4000, .aging = true};
	mtd_tick_age(&ae, &t3);
	assert_int_equal(t3.age_rc, 0);
	assert_true(t3.source_fresh);
	assert_int_equal(max_seq(g), seq + 1);

	mtd_turns_destroy(&turns);
	mtd_source_destroy(&src);
	vmm_guest_free(g);
	free(y);
	free(pfn);
	child_stop(m.ch);
}

/* The layout is QEMU's checked map, not a guess from its command line: RAM split around a
 * hole (a q35 guest with max-ram-below-4g) ages at the GPAs QEMU puts it. */
static void test_idle_split_layout(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.split = true};
	uint64_t *pfn = calloc(PAGES, 8);

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	child_frames(m.ch, pfn);
	make_proc(m.ch, NULL);
	(void)idle_kernel(pfn);
	env_for(&env, &m, MTD_ACCESS_IDLE);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "idle") != 0)
		fail_msg("idle not chosen: %s", why_of(&ch, "idle"));
	assert_int_equal(src.nr_ram, 2);
	assert_int_equal(src.ram[0].start, 0);
	assert_int_equal(src.ram[0].end, GUEST_MIB * MiB / 2);
	assert_int_equal(src.ram[1].start, GiB4);
	assert_int_equal(src.ram[1].end, GiB4 + GUEST_MIB * MiB / 2);
	/* page HIGH + 3 is the first byte of the upper half plus 3 pages: GPA 4 GiB + 12 KiB */
	kfs_idle_access(pfn[5]);
	kfs_idle_access(pfn[HIGH + 3]);
	struct vmm_guest *g = guest_for(&src);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	struct young_set *y = calloc(1, sizeof(*y));
	y->split = true;
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_int_equal(y->pages, 2);
	assert_true(y->young[5] && y->young[HIGH + 3]);
	mtd_source_destroy(&src);
	vmm_guest_free(g);
	free(y);
	free(pfn);
	child_stop(m.ch);
}

/* Refuse what a source cannot see: hugetlbfs RAM is not on the LRU (idle would read it all
 * used, DAMON all unused). */
static void test_hugetlb_refused(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.hugetlb = true};

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_IDLE);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "idle"), "hugetlbfs"));
	env.pref = MTD_ACCESS_DAMON;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "hugetlbfs"));
	char v[16];
	kfs_value("/damon/kdamonds/nr_kdamonds", v, sizeof(v));
	assert_string_equal(v, "0"); /* DAMON left as it was */
	child_stop(m.ch);
}

/* ---- damon ----------------------------------------------------------------------------- */

static void damon_reset(void)
{
	pthread_mutex_lock(&K.lock);
	kfs_clear_under("/damon/kdamonds");
	kfs_add("/damon/kdamonds/nr_kdamonds", false, "0");
	pthread_mutex_unlock(&K.lock);
	kfs_damon_old_kernel(false);
	kfs_damon_regions(NULL, 0, 0);
	char owner[200];
	snprintf(owner, sizeof(owner), "%s/damon.owner", run);
	unlink(owner);
}

static void test_damon_polite(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	char v[64], owner[200];

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_DAMON);
	snprintf(owner, sizeof(owner), "%s/damon.owner", run);
	/* 1. another tool's kdamond runs: refused, untouched */
	damon_reset();
	kfs_damon_other_tool(true);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "another tool runs kdamond 0 (pid 84)"));
	kfs_value("/damon/kdamonds/0/state", v, sizeof(v));
	assert_string_equal(v, "on");
	/* 2. configured but not running: refused too (adding one would erase it) */
	damon_reset();
	kfs_damon_other_tool(false);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "configured"));
	kfs_value("/damon/kdamonds/nr_kdamonds", v, sizeof(v));
	assert_string_equal(v, "1");
	/* 3. a crashed memtided's kdamond (owner pid gone): switched off, removed, retaken */
	damon_reset();
	kfs_damon_other_tool(true);
	FILE *f = fopen(owner, "w");
	fprintf(f, "999999\n");
	fclose(f);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "damon") != 0)
		fail_msg("damon not chosen: %s", why_of(&ch, "damon"));
	kfs_value("/damon/kdamonds/0/contexts/0/operations", v, sizeof(v));
	assert_string_equal(v, "paddr");
	kfs_value("/damon/kdamonds/0/state", v, sizeof(v));
	assert_string_equal(v, "on");
	kfs_value("/damon/kdamonds/0/contexts/0/schemes/0/action", v, sizeof(v));
	assert_string_equal(v, "stat");
	/* a second VM: memtided's one kdamond is taken */
	struct mtd_source src2;
	struct mtd_access_choice ch2;
	assert_int_equal(mtd_access_choose(&env, &src2, &ch2), 0);
	assert_string_equal(ch2.chosen, "none");
	/* 4. exit: switched off, nr_kdamonds back to 0, the record gone */
	mtd_source_destroy(&src);
	kfs_value("/damon/kdamonds/nr_kdamonds", v, sizeof(v));
	assert_string_equal(v, "0");
	assert_int_equal(access(owner, F_OK), -1);
	child_stop(m.ch);
}

/* ---- the cgroup's gate ------------------------------------------------------------------ */

/* Stands for vm_attach.c's open_memcg, which finds the VM's cgroup and may move a plain QEMU
 * into memtide.slice: it must be called only when the memcg source is tried. */
static unsigned memcg_opens;
static int memcg_open_counted(void *ctx, struct mtd_memcg_hand **out, char *why, size_t len)
{
	(void)ctx;
	memcg_opens++;
	*out = NULL;
	snprintf(why, len, "QEMU shares the root cgroup (stand-in)");
	return 0;
}

/* A VM a page-level source serves (idle, DAMON) never has its cgroup looked at, so its QEMU
 * is never moved and nothing is written to its memory.reclaim; a KVM guest on a host with
 * neither gets it tried once under source=auto, and source=memcg asks for it whatever else
 * there is. */
static void test_memcg_gate(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	uint64_t *pfn = calloc(PAGES, 8);
	char damon_away[250];

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	child_frames(m.ch, pfn);
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_AUTO);
	env.on_kvm = 1; /* ept refused */
	env.memcg_open = memcg_open_counted;
	snprintf(damon_away, sizeof(damon_away), "%s/no-damon", root);
	const char *damon_here = env.damon_admin, *idle_here = env.idle_bitmap;
	env.damon_admin = damon_away;
	env.idle_bitmap = damon_away;
	damon_reset();

	/* 1. A KVM guest, no idle page tracking, no DAMON, no agent: the cgroup is tried, once. */
	memcg_opens = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (memcg_opens != 1)
		fail_msg("the cgroup tried %u times; chosen %s", memcg_opens, ch.chosen);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "memcg"), "shares the root cgroup"));
	assert_non_null(strstr(why_of(&ch, "ept"), "runs on KVM"));

	/* 2. The host has idle page tracking: idle is chosen, the cgroup never looked at. */
	(void)idle_kernel(pfn);
	env.idle_bitmap = idle_here;
	memcg_opens = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "idle") != 0)
		fail_msg("idle not chosen: %s", why_of(&ch, "idle"));
	assert_int_equal(memcg_opens, 0);
	assert_non_null(strstr(why_of(&ch, "memcg"), "not tried"));
	mtd_source_destroy(&src);

	/* 3. The host has DAMON (and no idle page tracking): the same. */
	env.idle_bitmap = damon_away;
	env.damon_admin = damon_here;
	damon_reset();
	memcg_opens = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "damon") != 0)
		fail_msg("damon not chosen: %s", why_of(&ch, "damon"));
	assert_int_equal(memcg_opens, 0);
	assert_non_null(strstr(why_of(&ch, "memcg"), "not tried"));
	mtd_source_destroy(&src);

	/* 4. Policy names a page-level source: the cgroup is not tried either. */
	env.pref = MTD_ACCESS_EPT;
	memcg_opens = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_int_equal(memcg_opens, 0);
	mtd_source_destroy(&src);

	/* 5. source=memcg: tried first, even with DAMON there (the operator's choice). */
	env.pref = MTD_ACCESS_MEMCG;
	memcg_opens = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_int_equal(memcg_opens, 1);
	assert_non_null(strstr(why_of(&ch, "memcg"), "asked for by policy"));
	mtd_source_destroy(&src);
	damon_reset();
	free(pfn);
	child_stop(m.ch);
}

/* A kernel before 6.2 cannot report DAMON's regions: refused at setup with a sentence, not
 * chosen to fail every round (each one read as "nothing touched", the whole guest cold). */
static void test_damon_old_kernel(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	char v[64];

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_DAMON);
	damon_reset();
	kfs_damon_old_kernel(true);
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "cannot report its regions"));
	kfs_value("/damon/kdamonds/nr_kdamonds", v, sizeof(v));
	assert_string_equal(v, "0"); /* its kdamond switched off and removed again */
	child_stop(m.ch);
}

/* Rounds: young regions; a stopped kdamond fails the round without aging. */
static void test_damon_rounds(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	uint64_t *pfn = calloc(PAGES, 8);

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	child_frames(m.ch, pfn);
	make_proc(m.ch, NULL);
	env_for(&env, &m, MTD_ACCESS_DAMON);
	damon_reset();
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	if (strcmp(ch.chosen, "damon") != 0)
		fail_msg("damon not chosen: %s", why_of(&ch, "damon"));
	/* the targets: the written pages' frames, never the zero page's */
	char v[64];
	kfs_value("/damon/kdamonds/0/contexts/0/targets/0/regions/nr_regions", v, sizeof(v));
	unsigned long nreg = strtoul(v, NULL, 10);
	assert_true(nreg >= 1);
	for (unsigned long i = 0; i < nreg; i++) {
		char p[128];
		snprintf(p, sizeof(p), "/damon/kdamonds/0/contexts/0/targets/0/regions/%lu/start",
			 i);
		kfs_value(p, v, sizeof(v));
		uint64_t s = strtoull(v, NULL, 10);
		snprintf(p, sizeof(p), "/damon/kdamonds/0/contexts/0/targets/0/regions/%lu/end", i);
		kfs_value(p, v, sizeof(v));
		uint64_t e = strtoull(v, NULL, 10);
		assert_false(pfn[WRITTEN] << 12 >= s && pfn[WRITTEN] << 12 < e);
	}
	/* DAMON saw page 10's frame accessed, page 700's idle for long, the zero page "cold" */
	struct kfs_region r[] = {
	    {pfn[10] << 12, (pfn[10] << 12) + 4096, 5, 1},
	    {pfn[700] << 12, (pfn[700] << 12) + 4096, 0, 500},
	    {pfn[WRITTEN] << 12, (pfn[WRITTEN] << 12) + 4096, 0, 500},
	};
	kfs_damon_regions(r, 3, 0);
	struct vmm_guest *g = guest_for(&src);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	assert_int_equal(src.ops->age(src.ctx, g, 6000), 0);
	struct young_set *y = calloc(1, sizeof(*y));
	assert_int_equal(vmm_young_runs(g, 1, collect, y), 0);
	assert_true(y->young[10]);
	assert_false(y->young[700]);
	assert_int_equal(y->pages, 1);
	assert_true(src.ops->fresh(src.ctx, 6000));
	struct vmm_guest_stats gs;
	vmm_guest_get_stats(g, &gs);
	assert_true(gs.free_pages >= READ_END - WRITTEN); /* the zero page's: free */

	/* Someone switches memtided's kdamond off: the kernel refuses the region request; the
	 * round fails and libvmm stays as it was. */
	uint64_t seq = max_seq(g);
	pthread_mutex_lock(&K.lock);
	kfs_add("/damon/kdamonds/0/state", false, "off");
	pthread_mutex_unlock(&K.lock);
	assert_true(src.ops->age(src.ctx, g, 11000) < 0);
	assert_int_equal(max_seq(g), seq);
	assert_false(src.ops->fresh(src.ctx, 11000));
	char line[200];
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "could not be read"));
	mtd_source_destroy(&src);
	vmm_guest_free(g);
	free(y);
	free(pfn);
	child_stop(m.ch);
}

/* Frames scattered over more than 4096 ranges (the THP-backed guest above ~8 GiB, here
 * the child's pagemap written with every other frame): refused, not watched through ranges
 * stretched over other processes' memory. */
static void test_damon_scattered(void **state)
{
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	struct mtd_source src;
	struct monitor m = {.ch = NULL};
	uint64_t *pm = calloc(PAGES, 8);
	char v[64];

	(void)state;
	NEED_KERNEL_FS();
	m.ch = child_start();
	for (size_t i = 0; i < PAGES; i++)
		pm[i] = (1ULL << 63) | (0x100000 + 2 * i); /* 5120 frames, none adjacent */
	make_proc(m.ch, pm);
	env_for(&env, &m, MTD_ACCESS_DAMON);
	damon_reset();
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "none");
	assert_non_null(strstr(why_of(&ch, "damon"), "more than 4096 ranges"));
	kfs_value("/damon/kdamonds/nr_kdamonds", v, sizeof(v));
	assert_string_equal(v, "0");
	child_stop(m.ch);
	free(pm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_idle),
	    cmocka_unit_test(test_idle_split_layout),
	    cmocka_unit_test(test_hugetlb_refused),
	    cmocka_unit_test(test_damon_polite),
	    cmocka_unit_test(test_damon_old_kernel),
	    cmocka_unit_test(test_memcg_gate),
	    cmocka_unit_test(test_damon_rounds),
	    cmocka_unit_test(test_damon_scattered),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
