// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_memcg_hand.c - host-side reclaim through a VM's memory cgroup (host/act/memcg_hand.c):
 * which VMs get it and the sentence for those that do not, the stall budget holding
 * eviction with its reason where `memtidectl vm show` reads it, the writes to memory.reclaim
 * in steps once it may go, what it publishes (mechanism, working-set origin), and the reset
 * of the guest's access history through QEMU's clear_refs before the first eviction.
 *
 * Against a fake cgroupfs, /proc and /sys (ordinary files in a temporary directory,
 * fake_tree.h): this machine's memory controller is on cgroup v1 and its kernel has no MGLRU,
 * and a real memory.reclaim would take memory from a real process.  A fake memory.reclaim
 * takes the bytes written and reclaims nothing, so every write here finds nothing more to
 * take; what the kernel does with them is scenario 20's
 * (tests/e2e/scenarios/20_kvm_agentless.sh, on the KVM stand).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/balloon.h"
#include "act/memcg_hand.h"
#include "act/pageout_hand.h"
#include "act/swap_share.h"
#include "base/mtd.h"
#include "fake_tree.h"
#include "vmm.h"

#define QEMU_PID 1234
#define SCOPE    FAKE_SCOPE
#define MiB      ((uint64_t)1 << 20)

static void psi(struct fake_tree *t, uint64_t some_us)
{
	char text[200];

	snprintf(text, sizeof(text),
		 "some avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n"
		 "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		 (unsigned long long)some_us);
	fake_put(t->cg, SCOPE "/memory.pressure", text);
}

/* A libvirt domain's cgroup on a host with 2 GiB of swap, MGLRU off. */
static void domain(struct fake_tree *t)
{
	fake_put(t->cg, "cgroup.controllers", "cpu io memory pids\n");
	fake_libvirt_domain(t, QEMU_PID);
	fake_put(t->cg, SCOPE "/memory.stat",
		 "anon 1000000000\nfile 0\nworkingset_refault_anon 0\npgmajfault 10\n");
	fake_put(t->cg, SCOPE "/memory.swap.current", "0\n");
	psi(t, 0);
	fake_proc_stat(t, QEMU_PID, "qemu", 0x400000);
	fake_put(t->proc, "1234/status", "Name:\tqemu\nRssAnon:\t 1000000 kB\n");
	fake_put(t->proc, "meminfo",
		 "MemTotal: 8000000 kB\nMemFree: 4000000 kB\nSwapTotal: 2097148 kB\n"
		 "SwapFree: 2097148 kB\n");
	fake_put(t->proc, "swaps", "Filename Type Size Used Priority\n");
	fake_put(t->sys, "kernel/mm/lru_gen/enabled", "0x0000\n");
}

static int setup(void **state)
{
	struct fake_tree *t = fake_tree_new("cghand");

	domain(t);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	fake_tree_free(*state);
	return 0;
}

/* A hand on t's VM; env_in (may be NULL) gives the host's swap budget. */
static struct mtd_memcg_hand *hand_env(struct fake_tree *t, bool may_move,
				       const struct mtd_memcg_hand_env *env_in, char *why,
				       size_t len)
{
	struct mtd_pageout_config cfg;
	struct mtd_memcg_hand_env env = {
	    .vm_name = "vm",
	    .qemu_pid = QEMU_PID,
	    .may_move = may_move,
	    .proc_root = t->proc,
	    .sys_root = t->sys,
	    .cg_root = t->cg,
	    .lru_gen_path = t->lru,
	};
	struct mtd_memcg_hand *h = NULL;

	if (env_in) {
		env.swap_take = env_in->swap_take;
		env.swap_done = env_in->swap_done;
		env.swap_ctx = env_in->swap_ctx;
	}
	mtd_pageout_config_default(&cfg);
	assert_int_equal(mtd_memcg_hand_new(&cfg, &env, &h, why, len), 0);
	return h;
}

static struct mtd_memcg_hand *hand(struct fake_tree *t, bool may_move, char *why, size_t len)
{
	return hand_env(t, may_move, NULL, why, len);
}

/* A VM whose cgroup cannot be used gets no hand, and the sentence says what to set up. */
static void test_refusals(void **state)
{
	struct fake_tree *t = *state;
	char why[512];

	/* QEMU shares its cgroup with a shell under libvirt: never moved. */
	fake_put(t->cg, SCOPE "/libvirt/emulator/cgroup.procs", "1234\n4242\n");
	fake_put(t->proc, "4242/stat", "4242 (bash) S 1 4242 4242 0 -1 4194304 0 0\n");
	assert_null(hand(t, false, why, sizeof(why)));
	assert_non_null(strstr(why, "libvirt makes one"));
	/* Plain QEMU that already holds its guest's memory: a move would leave it behind. */
	assert_null(hand(t, true, why, sizeof(why)));
	assert_non_null(strstr(why, "systemd-run --scope"));
	/* cgroup v1 for memory. */
	fake_put(t->cg, SCOPE "/libvirt/emulator/cgroup.procs", "1234\n");
	fake_put(t->proc, "1234/cgroup",
		 "5:memory:/machine.slice\n0::" SCOPE "/libvirt/emulator\n");
	assert_null(hand(t, false, why, sizeof(why)));
	assert_non_null(strstr(why, "cgroup v1"));
}

static struct mtd_memcg_input input(const struct vmm_decision *d, uint64_t now_ms)
{
	return (struct mtd_memcg_input){
	    .mode = MTD_RETURN_PAGEOUT,
	    .may_take = true,
	    .may_age = true,
	    .decision = d,
	    .max_age_ms = 3600000,
	    .interval_ms = 1000,
	    .now_ms = now_ms,
	};
}

/* Over the stall budget eviction holds, for the interval and two after, and says why;
 * then it writes memory.reclaim in steps of [pageout] step. */
static void test_stall_then_reclaim(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (64 * MiB) >> 12};
	char why[512];

	struct mtd_memcg_hand *h = hand(t, false, why, sizeof(why));
	assert_non_null(h);
	mtd_memcg_hand_feedback(h, 1000, &r);
	assert_true(r.valid);
	assert_false(r.mglru);
	assert_int_equal(r.resident_bytes, 1000000000);
	/* 100 ms of stall in a second: 10%, over 0.2%. */
	psi(t, 100000);
	mtd_memcg_hand_feedback(h, 2000, &r);
	assert_true(r.stall > 0.099 && r.stall < 0.101);
	struct mtd_memcg_input in = input(&d, 2000);
	mtd_memcg_hand_step(h, &in);
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "stall budget"));
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	assert_true(st.memcg.in_use);
	assert_string_equal(st.memcg.cgroup, SCOPE);
	assert_string_equal(st.memcg.mechanism, "classic");
	assert_string_equal(st.memcg.estimate, "classic LRU (resident)");
	assert_true(st.memcg.stall_pct > 9.9 && st.memcg.stall_pct < 10.1);
	assert_false(st.memcg.refaults_exact);

	/* Two quiet intervals: still held. */
	for (uint64_t now = 3000; now <= 4000; now += 1000) {
		mtd_memcg_hand_feedback(h, now, &r);
		in = input(&d, now);
		mtd_memcg_hand_step(h, &in);
		mtd_memcg_hand_publish(h, &st);
		assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
		assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	}
	/* The third: it goes, one step of 8 MiB (the fake takes nothing, so it stops there). */
	mtd_memcg_hand_feedback(h, 5000, &r);
	in = input(&d, 5000);
	mtd_memcg_hand_step(h, &in);
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "8388608");

	/* The controller holds: nothing written, and the reason passed on. */
	fake_put(t->cg, SCOPE "/memory.reclaim", "");
	d.gate = VMM_DECIDE_HOLD;
	mtd_memcg_hand_feedback(h, 6000, &r);
	in = input(&d, 6000);
	in.hold_why = "refaults over budget";
	mtd_memcg_hand_step(h, &in);
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "refaults over budget"));
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");

	/* return=balloon: off. */
	in = input(&d, 7000);
	in.mode = MTD_RETURN_BALLOON;
	mtd_memcg_hand_step(h, &in);
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_OFF);
	mtd_memcg_hand_free(h);
}

/* MGLRU on: while memtided watches the VM (policy enabled=no, or the controller watching the
 * guest before its first eviction) the hand ages the cgroup (lru_gen '+') so the first
 * eviction need not wait one more cold age, and takes nothing; observe-only: not even that. */
static void test_ages_while_watching(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d = {.cold_age_ms = 60000, .gate = VMM_DECIDE_WATCHING};
	static const char gens[] = "memcg     7 " SCOPE "\n"
				   "  node     0\n"
				   "         12     90000     3000         0\n"
				   "         13     40000   200000         0\n";
	char why[512];

	fake_put(t->sys, "kernel/mm/lru_gen/enabled", "0x0007\n");
	fake_put(t->top, "lru_gen", gens);
	struct mtd_memcg_hand *h = hand(t, false, why, sizeof(why));
	assert_non_null(h);
	mtd_memcg_hand_feedback(h, 1000, &r);
	assert_true(r.mglru);
	/* Observe-only: untouched. */
	struct mtd_memcg_input in = input(&d, 1000);
	in.may_take = false;
	in.may_age = false;
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->top, "lru_gen"), gens);
	/* Policy enabled=no (nothing to take), but watched: the youngest generation (40 s) is
	 * past half the cold age: aged, and nothing taken. */
	in = input(&d, 1500);
	in.may_take = false;
	mtd_memcg_hand_step(h, &in);
	assert_int_equal(strncmp(fake_get(t->top, "lru_gen"), "+ 7 0 13 1 1\n", 13), 0);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	/* Watching: aged too (the same generations read back: due again). */
	fake_put(t->top, "lru_gen", gens);
	mtd_memcg_hand_feedback(h, 2000, &r);
	in = input(&d, 2000);
	mtd_memcg_hand_step(h, &in);
	assert_int_equal(strncmp(fake_get(t->top, "lru_gen"), "+ 7 0 13 1 1\n", 13), 0);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "watching"));
	mtd_memcg_hand_free(h);
}

/* QEMU's whole-memory operation, as the balloon's memjob would say it. */
struct job {
	bool active;
	int rc;
};

static int fake_memjob(void *ctx, struct mtd_memjob *out)
{
	const struct job *j = ctx;

	memset(out, 0, sizeof(*out));
	out->active = j->active;
	if (j->active)
		snprintf(out->what, sizeof(out->what), "migration");
	return j->rc;
}

/* The guest's access history is reset once, through QEMU's clear_refs ("4": KVM drops its
 * nested mappings and their accessed bits; then "1": the host's young bits), before the
 * first eviction: never observe-only, never while QEMU reads all of guest memory or cannot
 * say, and eviction then waits a cold age from the reset.  A stand-in file for clear_refs
 * keeps what was written (the hand appends). */
static void test_resets_history(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (64 * MiB) >> 12};
	struct job job = {.active = false, .rc = 0};
	struct mtd_pageout_config cfg;
	struct mtd_memcg_hand_env env = {
	    .vm_name = "vm",
	    .qemu_pid = QEMU_PID,
	    .proc_root = t->proc,
	    .sys_root = t->sys,
	    .cg_root = t->cg,
	    .lru_gen_path = t->lru,
	    .memjob = fake_memjob,
	    .memjob_ctx = &job,
	};
	struct mtd_memcg_hand *h = NULL;
	char why[512];

	fake_put(t->proc, "1234/clear_refs", "");
	mtd_pageout_config_default(&cfg);
	assert_int_equal(mtd_memcg_hand_new(&cfg, &env, &h, why, sizeof(why)), 0);
	assert_non_null(h);
	mtd_memcg_hand_feedback(h, 1000, &r);

	/* Observe-only: untouched. */
	struct mtd_memcg_input in = input(&d, 1000);
	in.may_take = false;
	in.may_age = false;
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->proc, "1234/clear_refs"), "");
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h, &st);
	assert_non_null(strstr(st.memcg.history, "not reset yet"));

	/* A migration under way, then a monitor that cannot say: not reset, nothing taken. */
	job.active = true;
	in = input(&d, 1500);
	mtd_memcg_hand_step(h, &in);
	job.active = false;
	job.rc = -ETIMEDOUT;
	in = input(&d, 1700);
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->proc, "1234/clear_refs"), "");
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "not reset yet"));

	/* QEMU idle: reset, soft-dirty first, and eviction waits a cold age from it. */
	job.rc = 0;
	mtd_memcg_hand_feedback(h, 2000, &r);
	in = input(&d, 2000);
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->proc, "1234/clear_refs"), "4\n1\n");
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "access history was reset"));
	assert_non_null(strstr(st.memcg.history, "reset at attach"));

	/* Once: not again, and still held just short of a cold age. */
	fake_put(t->proc, "1234/clear_refs", "");
	mtd_memcg_hand_feedback(h, 61000, &r);
	in = input(&d, 61000);
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->proc, "1234/clear_refs"), "");
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");

	/* A cold age after the reset: it takes. */
	mtd_memcg_hand_feedback(h, 62000, &r);
	in = input(&d, 62000);
	mtd_memcg_hand_step(h, &in);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "8388608");
	assert_string_equal(fake_get(t->proc, "1234/clear_refs"), "");
	mtd_memcg_hand_free(h);
}

/* No clear_refs to write (a QEMU gone, a /proc that refuses): said in vm show, and eviction
 * is not held for it. */
static void test_reset_refused(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (64 * MiB) >> 12};
	char why[512];

	struct mtd_memcg_hand *h = hand(t, false, why, sizeof(why));
	assert_non_null(h);
	mtd_memcg_hand_feedback(h, 1000, &r);
	struct mtd_memcg_input in = input(&d, 1000);
	mtd_memcg_hand_step(h, &in);
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h, &st);
	assert_non_null(strstr(st.memcg.history, "NOT reset"));
	assert_non_null(strstr(st.memcg.history, "clear_refs"));
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "8388608");
	mtd_memcg_hand_free(h);
}

/* No swap on the host: held, with the sentence that says how to get some. */
static void test_no_swap(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (64 * MiB) >> 12};
	char why[512];

	fake_put(t->proc, "meminfo", "MemTotal: 8000000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n");
	struct mtd_memcg_hand *h = hand(t, false, why, sizeof(why));
	assert_non_null(h);
	mtd_memcg_hand_feedback(h, 1000, &r);
	struct mtd_memcg_input in = input(&d, 1000);
	mtd_memcg_hand_step(h, &in);
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "no swap"));
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	mtd_memcg_hand_free(h);
}

/* The host's swap budget (act/swap_share.h), and a semaphore posted once a hand took its
 * grant from it. */
struct told_share {
	struct mtd_swap_share share;
	sem_t taken;
};

static int take_and_tell(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
			 struct mtd_swap_grant *out)
{
	struct told_share *ts = ctx;
	int rc = mtd_swap_share_take(&ts->share, want_bytes, reserve_bytes, out);

	sem_post(&ts->taken);
	return rc;
}

static void done_told(void *ctx, uint64_t granted_bytes)
{
	struct told_share *ts = ctx;

	mtd_swap_share_done(&ts->share, granted_bytes);
}

struct stepping {
	struct mtd_memcg_hand *h;
	struct mtd_memcg_input in;
};

static void *step_thread(void *arg)
{
	struct stepping *a = arg;

	mtd_memcg_hand_step(a->h, &a->in);
	return NULL;
}

/*
 * Two VMs' cgroup hands and one swap budget.  A grant another hand holds is room this one
 * does not get.  And while the first hand holds its grant (its
 * memory.reclaim is a FIFO here, so its write waits for the test to read it, as a slow
 * reclaim would), the second gets only the room the first did not take.  1088 MiB of swap,
 * 64 MiB in reserve: 1024 MiB of room; the first asks for 1020 MiB, the second for 64 MiB
 * and writes 4 MiB, not its 8 MiB step.  Once the first is done, its grant is back.
 */
static void test_one_swap_budget(void **state)
{
	struct fake_tree *t = *state, *t1 = fake_tree_new("cghand1");
	struct told_share ts;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	struct vmm_decision d1 = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (1020 * MiB) >> 12};
	struct vmm_decision d2 = {
	    .cold_age_ms = 60000, .gate = VMM_DECIDE_TAKE, .take_pages = (64 * MiB) >> 12};
	char why[512], path[PATH_MAX], buf[64];

	fake_put(t->proc, "meminfo",
		 "MemTotal: 8000000 kB\nMemFree: 4000000 kB\nSwapTotal: 1114112 kB\n"
		 "SwapFree: 1114112 kB\n");
	mtd_swap_share_init(&ts.share, t->proc, t->sys);
	assert_int_equal(sem_init(&ts.taken, 0, 0), 0);
	domain(t1);
	snprintf(path, sizeof(path), "%s" SCOPE "/memory.reclaim", t1->cg);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);

	const struct mtd_memcg_hand_env e1 = {
	    .swap_take = take_and_tell, .swap_done = done_told, .swap_ctx = &ts};
	const struct mtd_memcg_hand_env e2 = {.swap_take = mtd_swap_share_take,
					      .swap_done = mtd_swap_share_done,
					      .swap_ctx = &ts.share};
	struct mtd_memcg_hand *h1 = hand_env(t1, false, &e1, why, sizeof(why));
	struct mtd_memcg_hand *h2 = hand_env(t, false, &e2, why, sizeof(why));
	assert_non_null(h1);
	assert_non_null(h2);
	mtd_memcg_hand_feedback(h1, 1000, &r);
	mtd_memcg_hand_feedback(h2, 1000, &r);

	/* A grant another VM's hand holds (all 1024 MiB) leaves none: paused, and said. */
	struct mtd_swap_grant held;
	assert_int_equal(mtd_swap_share_take(&ts.share, 1024 * MiB, 64 * MiB, &held), 0);
	assert_int_equal(held.bytes, 1024 * MiB);
	struct mtd_memcg_input in = input(&d2, 1000);
	mtd_memcg_hand_step(h2, &in);
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h2, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_PAUSED);
	assert_non_null(strstr(st.pageout.why, "1024 MiB of the room are granted to other VMs"));
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "");
	mtd_swap_share_done(&ts.share, held.bytes);

	struct stepping first = {.h = h1, .in = input(&d1, 2000)};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, step_thread, &first), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30; /* a bound on a broken hand, not a wait for one that works */
	assert_int_equal(sem_timedwait(&ts.taken, &until), 0);

	/* The first holds 1020 MiB of the 1024: the second writes what is left. */
	mtd_memcg_hand_feedback(h2, 2000, &r);
	in = input(&d2, 2000);
	mtd_memcg_hand_step(h2, &in);
	mtd_memcg_hand_publish(h2, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "4194304");

	/* Let the first write go through, and wait for its step to end. */
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	assert_true(fd >= 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 30000), 1);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "8388608");
	assert_int_equal(pthread_join(th, NULL), 0);
	close(fd);
	mtd_memcg_hand_publish(h1, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_ACTIVE);
	assert_int_equal(ts.share.outstanding_bytes, 0);

	/* Its grant is back: the second's next round writes a whole step. */
	fake_put(t->cg, SCOPE "/memory.reclaim", "");
	mtd_memcg_hand_feedback(h2, 3000, &r);
	in = input(&d2, 3000);
	mtd_memcg_hand_step(h2, &in);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "8388608");

	mtd_memcg_hand_free(h1);
	mtd_memcg_hand_free(h2);
	sem_destroy(&ts.taken);
	mtd_swap_share_destroy(&ts.share);
	fake_tree_free(t1);
}

/* The cgroup gone (the VM stopped): refused, said, nothing written after. */
static void test_cgroup_gone(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_reading r;
	struct mtd_vm_status st;
	char why[512], cmd[256];

	struct mtd_memcg_hand *h = hand(t, false, why, sizeof(why));
	assert_non_null(h);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/machine.slice'", t->cg);
	assert_int_equal(system(cmd), 0);
	mtd_memcg_hand_feedback(h, 1000, &r);
	assert_false(r.valid);
	memset(&st, 0, sizeof(st));
	mtd_memcg_hand_publish(h, &st);
	assert_int_equal(st.pageout.state, MTD_PAGEOUT_REFUSED);
	assert_non_null(strstr(st.pageout.why, "cannot read the cgroup"));
	mtd_memcg_hand_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stall_then_reclaim, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ages_while_watching, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resets_history, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_swap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_swap_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cgroup_gone, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
