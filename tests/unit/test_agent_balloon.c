// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_balloon.c - the agent's view of the virtio balloon (guest-agent/agent_balloon.c).
 *
 * A deflate-on-oom balloon leaves its pages in MemTotal as allocated memory; the agent
 * reports MemTotal net of them, so that the host's own inflation never reads as the guest's
 * growth.  These tests build the guest's /proc and /sys files under a scratch root (the
 * agent's sys_root), in the formats Linux 6.1 writes them; the real files are read by the
 * e2e guests (scenario 03 inflates a deflate-on-oom balloon and checks the growth watch and
 * the reclaim replies).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

#define MIB (1ULL << 20)

/* bit 0 first, as /sys/bus/virtio/devices/virtioN/features prints them: bits 1, 2 (deflate
 * on oom), 3, 5 and 32 of a 6.1 guest with free page reporting */
#define FEATURES_DOO    "0111010000000000000000000000000010000000000000000000000000000000\n"
#define FEATURES_NO_DOO "0101010000000000000000000000000010000000000000000000000000000000\n"

struct root {
	char dir[64];
	struct agent_config c;
};

static void put(struct root *r, const char *rel, const char *text)
{
	char path[256], cmd[320];
	FILE *f;

	snprintf(path, sizeof(path), "%s%s", r->dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A 1024 MiB guest: 700 MiB free, 800 available. */
static void guest(struct root *r, const char *vmstat_balloon, const char *features)
{
	char vmstat[512];

	snprintf(r->dir, sizeof(r->dir), "/tmp/memtide-balloon-XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	agent_config_defaults(&r->c);
	snprintf(r->c.sys_root, sizeof(r->c.sys_root), "%s", r->dir);
	put(r, "/proc/meminfo",
	    "MemTotal:        1048576 kB\nMemFree:          716800 kB\n"
	    "MemAvailable:     819200 kB\nBuffers:            1024 kB\n"
	    "AnonPages:        204800 kB\nShmem:                 0 kB\n");
	snprintf(vmstat, sizeof(vmstat), "nr_free_pages 179200\npgmajfault 12\n%sswap_ra 0\n",
		 vmstat_balloon);
	put(r, "/proc/vmstat", vmstat);
	if (features)
		put(r, "/sys/bus/virtio/drivers/virtio_balloon/virtio3/features", features);
}

static void done(struct root *r)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
	assert_int_equal(system(cmd), 0);
}

static void test_parsers(void **state)
{
	uint64_t pages = 7;

	(void)state;
	/* 6.1: inflations - deflations */
	assert_int_equal(agent_parse_balloon_pages("balloon_inflate 51200\nballoon_deflate 12800\n"
						   "balloon_migrate 3\n",
						   &pages),
			 0);
	assert_int_equal(pages, 38400);
	/* 6.15+: the gauge wins over the events */
	assert_int_equal(agent_parse_balloon_pages("nr_balloon_pages 99\nballoon_inflate 51200\n"
						   "balloon_deflate 0\n",
						   &pages),
			 0);
	assert_int_equal(pages, 99);
	/* no balloon counters (CONFIG_MEMORY_BALLOON off), or a malformed number */
	assert_int_equal(agent_parse_balloon_pages("pgmajfault 1\n", &pages), -ENOENT);
	assert_int_equal(
	    agent_parse_balloon_pages("balloon_inflate x\nballoon_deflate 0\n", &pages), -ENOENT);
	/* more deflations than inflations cannot be: nothing held */
	assert_int_equal(
	    agent_parse_balloon_pages("balloon_inflate 5\nballoon_deflate 9\n", &pages), 0);
	assert_int_equal(pages, 0);

	assert_int_equal(agent_parse_virtio_feature(FEATURES_DOO, 2), 1);
	assert_int_equal(agent_parse_virtio_feature(FEATURES_NO_DOO, 2), 0);
	assert_int_equal(agent_parse_virtio_feature("01", 2), -EINVAL);
	assert_int_equal(agent_parse_virtio_feature("01x1", 2), -EINVAL);
}

/* 150 MiB in a deflate-on-oom balloon: MemTotal is reported net of it. */
static void test_deflate_on_oom_nets_mem_total(void **state)
{
	struct root r = {0};
	struct agent_balloon b;
	struct proto_stats st;
	uint32_t caps;

	(void)state;
	guest(&r, "balloon_inflate 51200\nballoon_deflate 12800\n", FEATURES_DOO);
	assert_int_equal(agent_balloon_read(&r.c, &b), 0);
	assert_int_equal(b.pages, 38400);
	assert_int_equal(b.held_bytes, 150 * MIB);
	assert_true(b.in_mem_total);
	assert_int_equal(agent_read_meminfo(&r.c, &st), 0);
	assert_int_equal(st.mem_total_bytes, (1024 - 150) * MIB);
	assert_int_equal(st.mem_free_bytes, 700 * MIB);
	assert_int_equal(st.mem_available_bytes, 800 * MIB);
	/* every door the agent reads memory through agrees: stats and the growth watch */
	assert_int_equal(agent_collect_stats(&r.c, &st, &caps), 0);
	assert_int_equal(st.mem_total_bytes, (1024 - 150) * MIB);
	assert_int_equal(st.pgmajfault, 12);
	struct proto_stats ws;
	assert_int_equal(agent_watch_read(&r.c, &ws), 0);
	assert_int_equal(ws.mem_total_bytes, (1024 - 150) * MIB);
	assert_int_equal(ws.mem_available_bytes, 800 * MIB);
	done(&r);
}

/* Without deflate-on-oom the driver took the pages out of MemTotal itself: left as printed. */
static void test_plain_balloon_left_alone(void **state)
{
	struct root r = {0};
	struct proto_stats st;

	(void)state;
	guest(&r, "balloon_inflate 51200\nballoon_deflate 12800\n", FEATURES_NO_DOO);
	assert_int_equal(agent_read_meminfo(&r.c, &st), 0);
	assert_int_equal(st.mem_total_bytes, 1024 * MIB);
	done(&r);
	/* features unreadable: unknown, left as printed (the guest looks bigger, never smaller) */
	guest(&r, "balloon_inflate 51200\nballoon_deflate 12800\n", NULL);
	assert_int_equal(agent_read_meminfo(&r.c, &st), 0);
	assert_int_equal(st.mem_total_bytes, 1024 * MIB);
	done(&r);
	/* no balloon counters at all */
	guest(&r, "", FEATURES_DOO);
	assert_int_equal(agent_read_meminfo(&r.c, &st), 0);
	assert_int_equal(st.mem_total_bytes, 1024 * MIB);
	done(&r);
}

/* Counters that claim more than MemTotal - MemAvailable (a hostile or broken kernel view):
 * MemTotal never falls below what is available. */
static void test_adjust_clamps(void **state)
{
	struct agent_balloon b = {.pages = 1, .held_bytes = 900 * MIB, .in_mem_total = true};
	struct proto_stats st = {.mem_total_bytes = 1024 * MIB,
				 .mem_free_bytes = 700 * MIB,
				 .mem_available_bytes = 800 * MIB};

	(void)state;
	agent_balloon_adjust(&b, &st);
	assert_int_equal(st.mem_total_bytes, 800 * MIB);
	b.in_mem_total = false;
	st.mem_total_bytes = 1024 * MIB;
	agent_balloon_adjust(&b, &st);
	assert_int_equal(st.mem_total_bytes, 1024 * MIB);
}

/* A reclaim measures what it freed from MemFree plus what the balloon holds, at the start as
 * at the end: the pages a balloon held before the request are not freed by it.  Here no
 * reclaim method exists under the scratch root, so nothing can be freed, and the reply must
 * say so; counting the balloon's 150 MiB at the end only would answer "done, freed 150". */
static void test_reclaim_does_not_count_the_balloon(void **state)
{
	struct root r = {0};
	struct proto_reclaim req = {64 * MIB, PROTO_SCOPE_ANY, 2000, false};
	struct proto_reclaim_reply rep;

	(void)state;
	guest(&r, "balloon_inflate 51200\nballoon_deflate 12800\n", FEATURES_DOO);
	r.c.floor_bytes = 1 * MIB;
	r.c.floor_percent = 0;
	agent_reclaim_run(&r.c, &req, &rep);
	assert_int_equal(rep.freed_bytes, 0);
	assert_int_not_equal(rep.result, PROTO_RECLAIM_DONE);
	done(&r);
}

/* The guest allocates 100 MiB, 150 ms into a request: its use (MemTotal - MemAvailable) rises
 * while the agent reclaims.  The file is replaced whole (rename), as a read never sees half. */
/* The guest's meminfo becomes text, at once (a rename). */
static void meminfo_now(struct root *r, const char *text)
{
	char tmp[128], path[128];

	snprintf(tmp, sizeof(tmp), "%s/proc/meminfo.new", r->dir);
	snprintf(path, sizeof(path), "%s/proc/meminfo", r->dir);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	(void)rename(tmp, path);
}

/* A process allocates 100 MiB: MemAvailable falls and AnonPages rises by as much. */
static void grow_now(struct root *r)
{
	meminfo_now(r, "MemTotal:        1048576 kB\nMemFree:          614400 kB\n"
		       "MemAvailable:     716800 kB\nBuffers:            1024 kB\n"
		       "AnonPages:        307200 kB\nShmem:                 0 kB\n");
}

static void *grow_later(void *arg)
{
	struct timespec ts = {0, 150 * 1000 * 1000};

	nanosleep(&ts, NULL);
	grow_now(arg);
	return NULL;
}

/* A request stops when the guest's use rises while it runs: the guest needs its memory, and
 * the agent's loop cannot say so (its growth watch) until the request ends.  Here
 * memory.reclaim accepts every write and frees nothing, so without the rule the request runs
 * to its 3 s deadline; with it, it ends just after the 100 MiB rise and says why. */
static void test_reclaim_stops_when_the_guest_grows(void **state)
{
	struct root r = {0};
	struct proto_reclaim req = {64 * MIB, PROTO_SCOPE_ANY, 3000, false};
	struct proto_reclaim_reply rep;
	pthread_t t;

	(void)state;
	guest(&r, "", NULL);
	put(&r, "/proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
	put(&r, "/sys/fs/cgroup/memory.reclaim", "");
	assert_int_equal(pthread_create(&t, NULL, grow_later, &r), 0);
	agent_reclaim_run(&r.c, &req, &rep);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(rep.result, PROTO_RECLAIM_PARTIAL);
	assert_non_null(strstr(rep.message, "grew by 100 MiB"));
	done(&r);
}

/* Free page reporting takes 100 MiB of free pages off the free lists while the request runs:
 * MemAvailable falls as it would for a growth, but nothing the guest's processes hold grows.
 * The request is not stopped: it runs to its deadline (memory.reclaim here frees nothing) and
 * says so.  On the KVM host stand such dips stopped requests "grown by 18-33 MiB". */
static void *dip_later(void *arg)
{
	struct root *r = arg;

	usleep(300 * 1000);
	meminfo_now(r, "MemTotal:        1048576 kB\nMemFree:          614400 kB\n"
		       "MemAvailable:     716800 kB\nBuffers:            1024 kB\n"
		       "AnonPages:        204800 kB\nShmem:                 0 kB\n");
	return NULL;
}

static void test_free_page_reporting_dip_does_not_stop_it(void **state)
{
	struct root r = {0};
	struct proto_reclaim req = {64 * MIB, PROTO_SCOPE_ANY, 1500, false};
	struct proto_reclaim_reply rep;
	pthread_t t;

	(void)state;
	guest(&r, "", NULL);
	put(&r, "/proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
	put(&r, "/sys/fs/cgroup/memory.reclaim", "");
	assert_int_equal(pthread_create(&t, NULL, dip_later, &r), 0);
	agent_reclaim_run(&r.c, &req, &rep);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(rep.result, PROTO_RECLAIM_PARTIAL);
	assert_null(strstr(rep.message, "grew"));
	assert_true(rep.elapsed_ms >= 1500);
	done(&r);
}

/* The guard's side: a FIFO for memory.reclaim, kept full, so the request's write blocks as a
 * write into a slowly reclaiming guest does; when the agent has opened it (inotify), the
 * guest grows by 100 MiB.  If the request is still blocked after WAIT_MS, the FIFO is
 * drained so the test ends (and fails on the time the request took). */
#define WAIT_MS 10000
struct blocked {
	struct root *r;
	int rfd, ino, returned[2];
};

static void *grow_when_blocked(void *arg)
{
	struct blocked *b = arg;
	struct pollfd p = {b->ino, POLLIN, 0};
	char buf[65536];

	if (poll(&p, 1, WAIT_MS) != 1)
		return NULL;
	grow_now(b->r);
	p = (struct pollfd){b->returned[0], POLLIN, 0};
	if (poll(&p, 1, WAIT_MS) != 1)
		while (read(b->rfd, buf, sizeof(buf)) > 0)
			;
	return NULL;
}

/* A growth stops a request inside a write to memory.reclaim, not after it: the guard thread
 * (agent_reclaim_guard.c) sees the guest's use rise and interrupts the write.  Without the
 * guard the request stays in the blocked write until the FIFO is drained, 10 s later.  The
 * request is larger than the floor lets go, and the reply still says the growth stopped it:
 * that is why it ended, and what the host must hear. */
static void test_growth_cuts_the_write_short(void **state)
{
	struct root r = {0};
	struct proto_reclaim req = {1000 * MIB, PROTO_SCOPE_ANY, 20000, false};
	struct proto_reclaim_reply rep;
	struct blocked b = {.r = &r};
	char fifo[128], buf[65536];
	pthread_t t;
	int wfd;

	(void)state;
	guest(&r, "", NULL);
	put(&r, "/proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n");
	put(&r, "/sys/fs/cgroup/cgroup.procs", "");
	snprintf(fifo, sizeof(fifo), "%s/sys/fs/cgroup/memory.reclaim", r.dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	b.rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(b.rfd >= 0);
	wfd = open(fifo, O_WRONLY | O_NONBLOCK);
	assert_true(wfd >= 0);
	memset(buf, 'x', sizeof(buf));
	while (write(wfd, buf, sizeof(buf)) > 0 || errno != EAGAIN)
		;
	close(wfd);
	b.ino = inotify_init1(IN_CLOEXEC);
	assert_true(b.ino >= 0);
	assert_true(inotify_add_watch(b.ino, fifo, IN_OPEN) >= 0);
	assert_int_equal(pipe(b.returned), 0);
	assert_int_equal(pthread_create(&t, NULL, grow_when_blocked, &b), 0);

	agent_reclaim_run(&r.c, &req, &rep);
	assert_int_equal(write(b.returned[1], "x", 1), 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(rep.result, PROTO_RECLAIM_PARTIAL);
	assert_non_null(strstr(rep.message, "grew by 100 MiB"));
	assert_true(rep.elapsed_ms < WAIT_MS / 2);
	close(b.rfd);
	close(b.ino);
	close(b.returned[0]);
	close(b.returned[1]);
	done(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parsers),
	    cmocka_unit_test(test_deflate_on_oom_nets_mem_total),
	    cmocka_unit_test(test_plain_balloon_left_alone),
	    cmocka_unit_test(test_adjust_clamps),
	    cmocka_unit_test(test_reclaim_does_not_count_the_balloon),
	    cmocka_unit_test(test_reclaim_stops_when_the_guest_grows),
	    cmocka_unit_test(test_growth_cuts_the_write_short),
	    cmocka_unit_test(test_free_page_reporting_dip_does_not_stop_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
