// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_pageout_hand.c - host-side eviction's hand (host/act/pageout_hand.c): settings, how
 * `return` resolves, and the hand's states driven end to end against a real process.
 *
 * The "QEMU" is a child process with 16 MiB of anonymous memory mapped as QEMU maps guest RAM
 * (2 MiB-aligned, MADV_HUGEPAGE); the first 8 MiB are touched and then also mapped by a
 * process of its own (a fork: as a vhost-user back end maps guest RAM, two mappers), the rest
 * is untouched.  Its monitor is a function answering what QEMU 7.2 answers for
 * a guest whose RAM is that mapping at GPA 1 GiB; /proc is a directory of the test's own
 * whose PID entry links to the child's real one and whose meminfo and swaps say what swap the
 * test wants (the real host's swap is host-global and not the unit tests' to touch).  Pages
 * mapped by two processes are always skipped by the kernel's pageout, so every outcome is the
 * same whether or not the host has swap.
 */
#include <errno.h>
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

#include "act/pageout_hand.h"
#include "act/swap_share.h"
#include "daemon/config.h"
#include "vmm.h"

#define MiB       ((uint64_t)1 << 20)
#define GPA_BASE  ((uint64_t)1 << 30)
#define CHILD_MIB 16

/* Times in the test are small; the loop's clock (CLOCK_MONOTONIC) is far from 0, where
 * libvmm's first generation is born. */
#define T(ms) ((uint64_t)(ms) + 100000)

static void test_config(void **state)
{
	struct mtd_pageout_config c;
	struct mtd_config cfg;
	char err[200];
	(void)state;

	mtd_pageout_config_default(&c);
	assert_int_equal(c.swap_reserve_bytes, 64 * MiB);
	assert_int_equal(c.max_step_bytes, 1024 * MiB);
	assert_int_equal(mtd_pageout_config_set(&c, "swap_reserve", "128M", err, sizeof(err)), 0);
	assert_int_equal(c.swap_reserve_bytes, 128 * MiB);
	assert_int_equal(mtd_pageout_config_set(&c, "max_step", "1M", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max_step must be"));
	assert_int_equal(mtd_pageout_config_set(&c, "requery", "500ms", err, sizeof(err)), -EINVAL);
	assert_int_equal(mtd_pageout_config_set(&c, "requery", "2m", err, sizeof(err)), 0);
	assert_int_equal(c.requery_ms, 120000);
	assert_int_equal(mtd_pageout_config_set(&c, "swap", "1G", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown [pageout] key 'swap'"));
	/* Through the daemon's config, as memtided.conf's [pageout] section. */
	mtd_config_default(&cfg);
	assert_int_equal(cfg.pageout.requery_ms, 60000);
	assert_int_equal(mtd_config_set(&cfg, "pageout", "max_step", "256M", err, sizeof(err)), 0);
	assert_int_equal(cfg.pageout.max_step_bytes, 256 * MiB);
}

static void test_resolve(void **state)
{
	(void)state;
	/* The default (reclaim) becomes pageout only without an agent and with a live source. */
	assert_int_equal(mtd_return_resolve(MTD_RETURN_RECLAIM, false, true), MTD_RETURN_PAGEOUT);
	assert_int_equal(mtd_return_resolve(MTD_RETURN_RECLAIM, false, false), MTD_RETURN_RECLAIM);
	assert_int_equal(mtd_return_resolve(MTD_RETURN_RECLAIM, true, true), MTD_RETURN_RECLAIM);
	/* auto without an agent is pageout; with one it stays auto. */
	assert_int_equal(mtd_return_resolve(MTD_RETURN_AUTO, false, true), MTD_RETURN_PAGEOUT);
	assert_int_equal(mtd_return_resolve(MTD_RETURN_AUTO, true, true), MTD_RETURN_AUTO);
	/* What the operator chose explicitly stays. */
	assert_int_equal(mtd_return_resolve(MTD_RETURN_BALLOON, false, true), MTD_RETURN_BALLOON);
	assert_int_equal(mtd_return_resolve(MTD_RETURN_PAGEOUT, true, false), MTD_RETURN_PAGEOUT);
}

/* ---- the child ("QEMU") and its monitor ------------------------------------------------ */

struct child {
	pid_t pid;
	int cmd, ack;
	uint64_t hva;
};

static void child_main(int cmd, int ack)
{
	size_t sz = CHILD_MIB * MiB;
	char *raw =
	    mmap(NULL, sz + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1));
	uint64_t a = (uintptr_t)p;
	char c;
	uint32_t idx;
	pid_t peer;

	madvise(p, sz, MADV_HUGEPAGE);
	memset(p, 0x5a, sz / 2);
	/* The peer maps the touched half too (fork shares its pages until either writes) and
	 * waits to die with us: those pages have two mappers. */
	peer = fork();
	if (peer == 0) {
		for (;;)
			pause();
	}
	if (write(ack, &a, sizeof(a)) != sizeof(a))
		_exit(2);
	while (read(cmd, &c, 1) == 1 && c == 't') {
		if (read(cmd, &idx, sizeof(idx)) != sizeof(idx))
			break;
		p[(size_t)idx * 4096] = 1;
		if (write(ack, &c, 1) != 1)
			break;
	}
	kill(peer, SIGKILL);
	waitpid(peer, NULL, 0);
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

struct monitor {
	struct child *ch;
	bool broken; /* answer the flat view with garbage */
	int fail_rc; /* not 0: every command fails so (a monitor that does not answer yet) */
	unsigned calls;
};

/* QEMU 7.2's answers for a guest whose RAM is the child's 16 MiB at GPA 1 GiB. */
static int fake_qmp(void *ctx, const char *cmd, struct json_object *args, struct json_object **ret,
		    char *err, size_t errlen)
{
	struct monitor *m = ctx;
	char buf[1024];

	m->calls++;
	if (m->fail_rc) {
		snprintf(err, errlen, "no answer from QEMU in 5 s");
		return m->fail_rc;
	}
	if (strcmp(cmd, "query-memdev") == 0) {
		*ret = json_tokener_parse("[{\"id\":\"test.ram\",\"size\":16777216}]");
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
		snprintf(buf, sizeof(buf),
			 m->broken
			     ? "garbage\n"
			     : "FlatView #0\n AS \"memory\", root: system\n Root memory region: "
			       "system\n  0000000040000000-0000000040ffffff (prio 0, ram): "
			       "test.ram\n\n");
	} else if (strcmp(line, "info ramblock") == 0) {
		snprintf(
		    buf, sizeof(buf),
		    "              Block Name    PSize              Offset               Used "
		    "             Total\n                test.ram    4 KiB  0x0000000000000000 "
		    "0x0000000001000000 0x0000000001000000\n");
	} else if (strncmp(line, "gpa2hva 0x", 10) == 0 &&
		   (gpa = strtoull(line + 10, &end, 16), end != line + 10 && !*end)) {
		snprintf(buf, sizeof(buf), "Host virtual address for 0x%llx (test.ram) is 0x%llx\n",
			 gpa, (unsigned long long)(m->ch->hva + (gpa - GPA_BASE)));
	} else {
		snprintf(err, errlen, "unexpected HMP %s", line);
		return -EREMOTEIO;
	}
	*ret = json_object_new_string(buf);
	return 0;
}

/* A /proc of the test's own: PID links to the child's real entry; meminfo and swaps are
 * written by set_swap. */
static char proc_dir[64];

static void make_proc(pid_t pid)
{
	char link[128], target[64];

	snprintf(proc_dir, sizeof(proc_dir), "/tmp/memtide-test-proc.XXXXXX");
	assert_non_null(mkdtemp(proc_dir));
	snprintf(link, sizeof(link), "%s/%d", proc_dir, pid);
	snprintf(target, sizeof(target), "/proc/%d", pid);
	assert_int_equal(symlink(target, link), 0);
}

static void set_swap(uint64_t total_mib, uint64_t free_mib)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/meminfo", proc_dir);
	f = fopen(path, "w");
	fprintf(f, "MemTotal: 1000000 kB\nSwapTotal: %" PRIu64 " kB\nSwapFree: %" PRIu64 " kB\n",
		total_mib * 1024, free_mib * 1024);
	fclose(f);
	snprintf(path, sizeof(path), "%s/swaps", proc_dir);
	f = fopen(path, "w");
	fprintf(f, "Filename Type Size Used Priority\n");
	if (total_mib)
		fprintf(f, "/swapfile file %" PRIu64 " 0 -2\n", total_mib * 1024);
	fclose(f);
}

/* One zram of total_mib, none of it used, whose pool uses pool_mib of a limit_mib
 * mem_limit (0: none); its mm_stat under proc_dir, which the test passes as sys_root too. */
static void set_zram(uint64_t total_mib, uint64_t pool_mib, uint64_t limit_mib)
{
	char path[160];
	FILE *f;

	set_swap(total_mib, total_mib);
	snprintf(path, sizeof(path), "%s/swaps", proc_dir);
	f = fopen(path, "w");
	fprintf(f, "Filename Type Size Used Priority\n/dev/zram5 partition %" PRIu64 " 0 100\n",
		total_mib * 1024);
	fclose(f);
	snprintf(path, sizeof(path), "%s/block", proc_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/block/zram5", proc_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/block/zram5/mm_stat", proc_dir);
	f = fopen(path, "w");
	fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " 0 0 0 0 0\n",
		pool_mib * 3 * MiB, pool_mib * MiB, pool_mib * MiB, limit_mib * MiB);
	fclose(f);
}

static void drop_proc(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", proc_dir);
	assert_int_equal(system(cmd), 0);
}

static struct vmm_guest *guest_over_child(void)
{
	struct vmm_range r = {.start = GPA_BASE, .end = GPA_BASE + CHILD_MIB * MiB};
	struct vmm_guest_config gc;
	struct vmm_guest *g;

	vmm_guest_config_default(&gc);
	gc.ram = &r;
	gc.nr_ram = 1;
	gc.nr_gens = VMM_MAX_NR_GENS;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);
	/* Watched from 0, then one aging round that saw nothing: every page stays in the first
	 * generation (born at 0), which is no longer the youngest (the eviction hand never
	 * takes the youngest). */
	assert_int_equal(vmm_age_begin(g, 0), 0);
	assert_int_equal(vmm_age_begin(g, T(500)), 0);
	return g;
}

/* The round's decision as vmm_decide gives it (tests/unit/test_decide.c checks the call):
 * a 10 s cold age, watching until then, then every page the child has may go. */
static struct vmm_decision decision;

static struct mtd_hand_input input(uint64_t now_ms, uint64_t watched_ms)
{
	bool watching = watched_ms < 10000;

	decision = (struct vmm_decision){
	    .cold_age_ms = 10000,
	    .gate = watching ? VMM_DECIDE_WATCHING : VMM_DECIDE_TAKE,
	    .take_pages = watching ? 0 : CHILD_MIB * 256,
	};
	return (struct mtd_hand_input){.mode = MTD_RETURN_PAGEOUT,
				       .may_take = true,
				       .why_not = "steady",
				       .interval_ms = 1000,
				       .decision = &decision,
				       .now_ms = T(now_ms)};
}

/* The hand's view of the child "QEMU" behind mon, its /proc under proc_dir. */
static struct mtd_hand_env hand_env(struct monitor *mon, bool live, const char *source)
{
	return (struct mtd_hand_env){.vm_name = "t",
				     .qmp = fake_qmp,
				     .qmp_ctx = mon,
				     .qemu_pid = mon->ch->pid,
				     .live_source = live,
				     .source_name = source,
				     .proc_root = proc_dir,
				     .sys_root = "/nonexistent"};
}

static void test_states(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	(void)state;

	make_proc(ch->pid);
	set_swap(0, 0);
	mtd_pageout_config_default(&cfg);
	cfg.requery_ms = 1000;

	/* Not a live source: refused, and nothing asked of QEMU. */
	struct mtd_hand_env env = hand_env(&mon, false, "agent");
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "no live page-level access source (source agent)"));
	assert_int_equal(mon.calls, 0);
	/* Under balloon the hand is off. */
	in.mode = MTD_RETURN_BALLOON;
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_OFF);
	mtd_hand_free(h);

	/* A live source, but QEMU's flat view does not parse: refused with the map's reason,
	 * tried again only after requery_ms. */
	env.live_source = true;
	mon.broken = true;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "Cannot read the memory map from QEMU"));
	unsigned calls = mon.calls;
	in.now_ms = T(1500);
	mtd_hand_step(h, g, &in);
	assert_int_equal(mon.calls, calls);
	/* QEMU answers properly now: the map is read, but the host has no swap. */
	mon.broken = false;
	in.now_ms = T(2100);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.evictable_bytes, CHILD_MIB * MiB);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "the host has no swap"));
	assert_non_null(mtd_hand_layout(h));
	/* Swap, but the source has watched for less than the cold age. */
	set_swap(1024, 1024);
	in = input(3000, 5000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "watching the guest"));
	/* The controller is not taking memory (pressure). */
	in = input(3000, 60000);
	in.may_take = false;
	in.why_not = "pressure";
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_non_null(strstr(st.pageout.why, "not taking memory now (pressure)"));
	/* The refault controller holds (vmm_reclaim_ctl.hold): nothing is evicted, and why. */
	in = input(3000, 60000);
	decision.gate = VMM_DECIDE_HOLD;
	decision.take_pages = 0;
	in.hold_why = "pages idle past the longest age come back faster than the refault target";
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "the refault controller holds: pages idle past"));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, 0);
	/* Swap full: paused with the line an operator needs. */
	set_swap(1024, 32);
	in = input(3000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "host swap full (32 MiB free of 1024 MiB"));
	assert_non_null(strstr(st.pageout.why, "nothing is lost"));
	assert_int_equal(mtd_hand_reclaimable(h, 512 * MiB), 0);

	/* auto with a guest still giving (its last answer: all it was asked for, just now). */
	set_swap(1024, 1024);
	in = input(4000, 60000);
	in.mode = MTD_RETURN_AUTO;
	in.reply_seq = 7;
	in.reply_done = true;
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_non_null(strstr(st.pageout.why, "still freeing"));
	/* Three intervals later with no new answer: the guest has given what it will. */
	in.now_ms = T(7100);

	/* Active: everything past the cold age goes.  libvmm's pages all sit in the first
	 * generation (born at 0), older than the cold age: the shared 8 MiB are tried and kept
	 * (restored), the untouched 8 MiB are evicted as empty. */
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128);
	assert_int_equal(gs.resident_pages, CHILD_MIB * 128);
	assert_int_equal(vmm_check_invariants(g), 0);
	assert_true(mtd_hand_reclaimable(h, 512 * MiB) > 0);

	/* The guest uses two of the empty pages: restored, no refault.  A first touch of an
	 * empty 2 MiB block is backed by a huge page, so two blocks are resident again. */
	child_touch(ch, CHILD_MIB * 128 + 10);
	child_touch(ch, CHILD_MIB * 256 - 1);
	mtd_hand_feedback(h, g, T(8000));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128 - 1024);
	assert_int_equal(gs.refaults_total, 0);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.refaults_total, 0);
	assert_int_equal(vmm_check_invariants(g), 0);

	/* QEMU gone: refused, and the feedback says so without touching libvmm. */
	child_stop(ch);
	mtd_hand_feedback(h, g, T(9000));
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "is gone"));
	mtd_hand_free(h);
	vmm_guest_free(g);
	drop_proc();
}

/* Under balloon and reclaim, host-side eviction is off, but with a live source the map is
 * still read: the child's untouched half holds nothing on the host and is marked free in
 * libvmm (its next use is no reuse); nothing is evicted, and the state stays off.  Without
 * a live source nothing is asked of QEMU. */
static void test_free_pages_without_pageout(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	(void)state;

	make_proc(ch->pid);
	set_swap(1024, 1024);
	mtd_pageout_config_default(&cfg);
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	enum mtd_return_via modes[] = {MTD_RETURN_RECLAIM, MTD_RETURN_BALLOON};
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
		struct mtd_hand_input in = input(1000, 60000);
		in.mode = modes[i];
		/* Before the map is read, nothing is marked. */
		mtd_hand_mark_free(h, g);
		vmm_guest_get_stats(g, &gs);
		assert_int_equal(gs.free_pages, 0);
		mtd_hand_step(h, g, &in);
		mtd_hand_publish(h, &st);
		assert_int_equal(st.pageout.state, MTD_PAGEOUT_OFF);
		assert_true(mon.calls > 0);
		mtd_hand_mark_free(h, g);
		vmm_guest_get_stats(g, &gs);
		assert_int_equal(gs.free_pages, CHILD_MIB * 128);
		assert_int_equal(gs.evicted_pages, 0);
		assert_int_equal(vmm_check_invariants(g), 0);
		mtd_hand_free(h);
		vmm_guest_free(g);
		g = guest_over_child();
	}
	/* Not a live source: the map is not read. */
	env.live_source = false;
	mon.calls = 0;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	struct mtd_hand_input in = input(1000, 60000);
	in.mode = MTD_RETURN_RECLAIM;
	mtd_hand_step(h, g, &in);
	mtd_hand_mark_free(h, g);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(mon.calls, 0);
	assert_int_equal(gs.free_pages, 0);
	mtd_hand_free(h);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

/* A zram whose pool is at its memory limit refuses writes while it still has free slots (the
 * kernel then keeps the pages in RAM behind swap entries and pagemap calls them swapped):
 * the hand budgets against the limit and pauses, saying so; with room under the limit it
 * evicts. */
static void test_zram_limit(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	(void)state;

	make_proc(ch->pid);
	/* 1 GiB of free slots, but the pool is 100 of its 100 MiB. */
	set_zram(1024, 100, 100);
	mtd_pageout_config_default(&cfg);
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	env.sys_root = proc_dir;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(
	    strstr(st.pageout.why, "zram5's pool uses 100 of its 100 MiB memory limit"));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, 0);
	assert_int_equal(mtd_hand_reclaimable(h, 512 * MiB), 0);
	/* Room under the limit but no more than the reserve: still paused. */
	set_zram(1024, 100, 150);
	in = input(2000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(
	    strstr(st.pageout.why, "100 of its 150 MiB memory limit (mem_limit; 50 MiB left"));
	/* The limit raised: the untouched half goes. */
	set_zram(1024, 100, 512);
	in = input(3000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128);
	mtd_hand_free(h);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

/* Every VM's hand takes its room from the host's one share: room another VM's hand holds
 * is not there, and the pause says so; given back, it is. */
static void test_swap_share(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	struct mtd_swap_share share;
	struct mtd_swap_grant other;
	(void)state;

	make_proc(ch->pid);
	set_swap(1024, 1024);
	mtd_swap_share_init(&share, proc_dir, "/nonexistent");
	mtd_pageout_config_default(&cfg);
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	env.swap_take = mtd_swap_share_take;
	env.swap_done = mtd_swap_share_done;
	env.swap_ctx = &share;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	/* Another VM's hand holds all of the room past the reserve. */
	assert_int_equal(mtd_swap_share_take(&share, 4096 * MiB, cfg.swap_reserve_bytes, &other),
			 0);
	assert_int_equal(other.bytes, 960 * MiB);
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "960 MiB of the room are granted to other VMs"));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, 0);
	/* It gives the grant back: this one's turn, and its own grant is back after its batch. */
	mtd_swap_share_done(&share, other.bytes);
	in = input(2000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128);
	assert_int_equal(share.outstanding_bytes, 0);
	mtd_hand_free(h);
	mtd_swap_share_destroy(&share);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

/* Every refusal says why.  One that may pass (QEMU's monitor not answering yet, as when
 * memtided attaches to a QEMU that is starting) says so and is tried again at the next
 * interval, not a requery (a minute) later; one found while the map was only read for its
 * free pages (return=balloon) is said as soon as host-side eviction is asked for. */
static void test_refusal_reasons(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch, .fail_rc = -ETIMEDOUT};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	(void)state;

	make_proc(ch->pid);
	set_swap(1024, 1024);
	mtd_pageout_config_default(&cfg); /* requery: 60 s */
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "no answer from QEMU in 5 s"));
	assert_non_null(strstr(st.pageout.why, "may not be ready yet: tried again every 1 s"));
	unsigned calls = mon.calls;
	in.now_ms = T(1500);
	mtd_hand_step(h, g, &in);
	assert_int_equal(mon.calls, calls);
	/* QEMU answers now: one interval later the map is read and eviction goes on. */
	mon.fail_rc = 0;
	in = input(2000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_true(mon.calls > calls);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	mtd_hand_free(h);

	/* Under balloon the map's refusal goes to the debug log only; asked for pageout
	 * within the requery, the state says it at once (it stayed "off", no reason). */
	mon.broken = true;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	in = input(3000, 60000);
	in.mode = MTD_RETURN_BALLOON;
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_OFF);
	in = input(4000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "Cannot read the memory map from QEMU"));
	mtd_hand_free(h);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

/* Pages the hand chose but the kernel kept (the child's shared half: two mappers) go back
 * to the generation they left, not to the youngest as pages the guest used, and their
 * eviction is not counted; the actuator holds them (reported kept without asking the kernel)
 * until a cold age has passed, then they are tried again. */
static void test_kept_pages(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	(void)state;

	make_proc(ch->pid);
	set_swap(1024, 1024);
	mtd_pageout_config_default(&cfg);
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	vmm_guest_get_stats(g, &gs);
	uint64_t old_seq = gs.gen[0].seq;
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128);
	assert_int_equal(gs.evicted_total, CHILD_MIB * 128); /* the kept half uncounted */
	assert_int_equal(gs.gen[0].seq, old_seq);
	assert_int_equal(gs.gen[0].pages, CHILD_MIB * 128); /* back where they were */
	assert_int_equal(gs.gen[gs.nr_gens - 1].pages, 0);  /* none made young */
	assert_int_equal(st.pageout.held_bytes, CHILD_MIB / 2 * MiB);
	assert_int_equal(vmm_check_invariants(g), 0);
	/* Within the cold age they stay held. */
	in = input(2000, 60000);
	decision.take_pages = 0;
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.held_bytes, CHILD_MIB / 2 * MiB);
	/* A cold age later they may be tried again. */
	in = input(11000, 60000);
	decision.take_pages = 0;
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.held_bytes, 0);
	/* Tried: kept again, and back in the old generation again. */
	in = input(11500, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(st.pageout.held_bytes, CHILD_MIB / 2 * MiB);
	assert_int_equal(gs.gen[0].pages, CHILD_MIB * 128);
	assert_int_equal(gs.evicted_total, CHILD_MIB * 128);
	assert_int_equal(vmm_check_invariants(g), 0);
	mtd_hand_free(h);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

/* QEMU reading all of guest memory itself (a migration, a snapshot, a dump): host-side
 * eviction waits, saying why; when it cannot be told (a monitor held by a synchronous
 * savevm or dump does not answer), it waits too; once over, eviction goes on. */
struct fake_job {
	int rc;
	const char *what; /* NULL: none */
	unsigned calls;
};

static int fake_memjob(void *ctx, struct mtd_memjob *out)
{
	struct fake_job *f = ctx;

	f->calls++;
	memset(out, 0, sizeof(*out));
	if (f->rc)
		return f->rc;
	out->active = f->what != NULL;
	snprintf(out->what, sizeof(out->what), "%s", f->what ? f->what : "");
	return 0;
}

static void test_memjob(void **state)
{
	struct child *ch = child_start();
	struct monitor mon = {.ch = ch};
	struct fake_job job = {.what = "migration"};
	struct mtd_pageout_config cfg;
	struct mtd_pageout_hand *h;
	struct vmm_guest *g = guest_over_child();
	struct mtd_vm_status st = {0};
	struct vmm_guest_stats gs;
	(void)state;

	make_proc(ch->pid);
	set_swap(1024, 1024);
	mtd_pageout_config_default(&cfg);
	struct mtd_hand_env env = hand_env(&mon, true, "ept");
	env.memjob = fake_memjob;
	env.memjob_ctx = &job;
	assert_int_equal(mtd_hand_new(&cfg, &env, &h), 0);
	struct mtd_hand_input in = input(1000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(job.calls, 1);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "QEMU is reading all of guest memory itself "
					       "(migration): host-side eviction waits"));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, 0);
	/* A monitor that does not answer. */
	job.rc = -ETIMEDOUT;
	in = input(2000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "cannot tell whether QEMU is reading all of guest"));
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, 0);
	/* Over: eviction goes on. */
	job.rc = 0;
	job.what = NULL;
	in = input(3000, 60000);
	mtd_hand_step(h, g, &in);
	mtd_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.evicted_pages, CHILD_MIB * 128);
	assert_int_equal(st.pageout.job_reads_total, 0);
	mtd_hand_free(h);
	vmm_guest_free(g);
	child_stop(ch);
	drop_proc();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_resolve),
	    cmocka_unit_test(test_states),
	    cmocka_unit_test(test_free_pages_without_pageout),
	    cmocka_unit_test(test_zram_limit),
	    cmocka_unit_test(test_swap_share),
	    cmocka_unit_test(test_refusal_reasons),
	    cmocka_unit_test(test_kept_pages),
	    cmocka_unit_test(test_memjob),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
