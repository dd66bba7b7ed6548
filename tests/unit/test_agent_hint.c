// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_hint.c - what a user of the guest's hint socket may do (agent_hint.c,
 * agent_hint_guard.c), without sockets.
 *
 * The guard is pure and runs on a clock the test advances.  The request parser runs against
 * a fake /proc under a temporary sys_root: a pagemap file written by the test (a mock: a
 * real pagemap's bits cannot be chosen, and shows pfns only to CAP_SYS_ADMIN), with
 * /proc/PID directories owned by the users the test plays.  test_agent_link.c's
 * test_hint_socket_users runs the same rules through the real socket with a real
 * unprivileged process and real pagemap.
 *
 * Checked: slots (a user holds at most 2 connections and never the last slot), rates (a
 * user's own 1/s burst 3; the socket's bucket keeps 2 tokens for root), the peer table's
 * reuse; need is root's unless hint_user_need; a user describes only processes it owns, and
 * of those only the pages mapped by that process alone; root describes any page.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

#define PM_PRESENT   (1ULL << 63)
#define PM_EXCLUSIVE (1ULL << 56)

static void test_guard_slots(void **state)
{
	struct agent_config c;
	struct agent_hint_guard g;
	(void)state;

	agent_config_defaults(&c); /* 8 slots */
	agent_hint_guard_init(&g, &c);
	assert_int_equal(agent_hint_guard_admit(&g, 1000, 0, 0), 0);
	assert_int_equal(agent_hint_guard_admit(&g, 1000, 1, 1), 0);
	assert_int_equal(agent_hint_guard_admit(&g, 1000, 2, 2), -EUSERS);
	/* other users fill up to 7; the 8th slot is root's */
	assert_int_equal(agent_hint_guard_admit(&g, 1001, 6, 0), 0);
	assert_int_equal(agent_hint_guard_admit(&g, 1001, 7, 0), -EBUSY);
	assert_int_equal(agent_hint_guard_admit(&g, 0, 7, 0), 0);
	assert_int_equal(agent_hint_guard_admit(&g, 0, 8, 0), -EBUSY);
	/* root has no per-user cap */
	assert_int_equal(agent_hint_guard_admit(&g, 0, 5, 5), 0);
	/* one slot in all: there is nothing to reserve */
	c.max_hint_clients = 1;
	agent_hint_guard_init(&g, &c);
	assert_int_equal(agent_hint_guard_admit(&g, 1000, 0, 0), 0);
}

static void test_guard_rates(void **state)
{
	struct agent_config c;
	struct agent_hint_guard g;
	uint64_t t = 1000;
	uint32_t got = 0;
	(void)state;

	agent_config_defaults(&c); /* 5/s burst 10 for all; 1/s burst 3 per user */
	agent_hint_guard_init(&g, &c);
	/* a user's own bucket: 3 at once, then one a second */
	assert_int_equal(agent_hint_guard_take(&g, 1000, 10, t), 3);
	assert_int_equal(agent_hint_guard_take(&g, 1000, 1, t), 0);
	assert_int_equal(agent_hint_guard_take(&g, 1000, 1, t + 999), 0);
	assert_int_equal(agent_hint_guard_take(&g, 1000, 1, t + 1000), 1);
	/* a second user has its own */
	assert_int_equal(agent_hint_guard_take(&g, 1001, 10, t + 1000), 3);
	/* users together have used 7 of the socket's 10 (+5 refilled over the second): at
	 * most the tokens above the root reserve are theirs */
	for (uid_t u = 2000; u < 2010; u++)
		got += agent_hint_guard_take(&g, u, 3, t + 1000);
	assert_true(got <= 10 + 5 - 7 - 2);
	/* root still gets its reserve at the same instant */
	assert_int_equal(agent_hint_guard_take(&g, 0, 2, t + 1000), 2);
	assert_int_equal(agent_hint_guard_take(&g, 0, 1, t + 1000), 0);

	/* a user refused by the socket's bucket keeps its own token */
	c.hint_user_rate_per_s = 0.1;
	agent_hint_guard_init(&g, &c);
	assert_int_equal(agent_hint_guard_take(&g, 0, 10, t), 10);
	assert_int_equal(agent_hint_guard_take(&g, 3000, 3, t), 0);
	assert_int_equal(agent_hint_guard_take(&g, 3000, 3, t + 2000), 3);
}

static void test_guard_peer_table(void **state)
{
	struct agent_config c;
	struct agent_hint_guard g;
	(void)state;

	agent_config_defaults(&c);
	c.hint_rate_per_s = 1000; /* the socket's bucket is not what this is about */
	agent_hint_guard_init(&g, &c);
	g.all.burst = g.all.tokens = 1e9;
	/* uid 1000 spends its burst, then 16 other uids arrive later: 1000's entry is the
	 * oldest and is reused - it comes back full, which is the documented price */
	assert_int_equal(agent_hint_guard_take(&g, 1000, 3, 10), 3);
	for (uid_t u = 1; u <= AGENT_HINT_PEERS; u++)
		assert_int_equal(agent_hint_guard_take(&g, 5000 + u, 1, 20 + u), 1);
	assert_int_equal(agent_hint_guard_take(&g, 1000, 3, 100), 3);
	/* but a uid seen recently keeps its (empty) bucket */
	assert_int_equal(agent_hint_guard_take(&g, 1000, 1, 101), 0);
}

/* ---- the parser against a fake /proc ------------------------------------------------------ */

struct fake_proc {
	char root[64];
};

/* /proc/PID owned by uid, with a pagemap of the given entries from vaddr 0. */
static void fake_pid(struct fake_proc *f, int pid, uid_t uid, const uint64_t *ent, size_t n)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/proc", f->root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/%d", f->root, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, uid, 0), 0);
	snprintf(path, sizeof(path), "%s/proc/%d/pagemap", f->root, pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, ent, n * 8), (ssize_t)(n * 8));
	close(fd);
}

static void test_parse_rules(void **state)
{
	/* pages 0-3: exclusive pfns 100-101, then two shared pfns 200-201; page 4 absent */
	const uint64_t ent[] = {
	    PM_PRESENT | PM_EXCLUSIVE | 100,
	    PM_PRESENT | PM_EXCLUSIVE | 101,
	    PM_PRESENT | 200,
	    PM_PRESENT | 201,
	    0,
	};
	const uint64_t shared_only[] = {PM_PRESENT | 300, PM_PRESENT | 301};
	struct agent_config c;
	struct agent_hint_req req;
	struct fake_proc f;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	char err[200], line[64];
	(void)state;

	if (geteuid() != 0) {
		printf("# not root: cannot chown the fake /proc/PID to other users; the rules "
		       "are covered by test_agent_link's socket test where it can run\n");
		return;
	}
	snprintf(f.root, sizeof(f.root), "/tmp/memtide-test-proc-XXXXXX");
	assert_non_null(mkdtemp(f.root));
	fake_pid(&f, 4242, 1000, ent, 5);
	fake_pid(&f, 4343, 1001, shared_only, 2);
	agent_config_defaults(&c);
	snprintf(c.sys_root, sizeof(c.sys_root), "%s", f.root);

	/* need: root's, unless the admin allows users */
	assert_int_equal(
	    agent_hint_parse(&c, "need 1048576 100", 4242, 1000, &req, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "need is for root"));
	assert_int_equal(agent_hint_parse(&c, "need 1048576 100", 1, 0, &req, err, sizeof(err)), 0);
	c.hint_user_need = true;
	assert_int_equal(
	    agent_hint_parse(&c, "need 1048576 100", 4242, 1000, &req, err, sizeof(err)), 0);
	assert_int_equal(req.head.kind, PROTO_HINT_NEED);

	/* the user's own process: only its exclusive pages (pfn 100-101, one range) */
	snprintf(line, sizeof(line), "cold 0 %llu", (unsigned long long)page * 5);
	assert_int_equal(agent_hint_parse(&c, line, 4242, 1000, &req, err, sizeof(err)), 0);
	assert_int_equal(req.nr_ranges, 1);
	assert_int_equal(req.ranges[0].start, 100 * page);
	assert_int_equal(req.ranges[0].bytes, 2 * page);
	free(req.ranges);
	/* root sees every page of it: 100-101 and 200-201 */
	snprintf(line, sizeof(line), "cold 0 %llu 4242", (unsigned long long)page * 5);
	assert_int_equal(agent_hint_parse(&c, line, 1, 0, &req, err, sizeof(err)), 0);
	assert_int_equal(req.nr_ranges, 2);
	free(req.ranges);
	/* another user's process, named or not */
	snprintf(line, sizeof(line), "hot 0 %llu 4343", (unsigned long long)page);
	assert_int_equal(agent_hint_parse(&c, line, 4242, 1000, &req, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "not yours"));
	assert_null(req.ranges);
	snprintf(line, sizeof(line), "hot 0 %llu", (unsigned long long)page);
	assert_int_equal(agent_hint_parse(&c, line, 4343, 1000, &req, err, sizeof(err)), -EPERM);
	/* its owner, but every page shared: nothing of its own to describe */
	snprintf(line, sizeof(line), "hot 0 %llu", (unsigned long long)page * 2);
	assert_int_equal(agent_hint_parse(&c, line, 4343, 1001, &req, err, sizeof(err)), -EACCES);
	assert_non_null(strstr(err, "shared with other processes"));
	assert_null(req.ranges);
	/* a frame number beyond any machine (pfn * page would wrap): left out */
	const uint64_t huge[] = {PM_PRESENT | PM_EXCLUSIVE | ((1ULL << 55) - 1)};
	fake_pid(&f, 4545, 0, huge, 1);
	snprintf(line, sizeof(line), "hot 0 %llu 4545", (unsigned long long)page);
	assert_int_equal(agent_hint_parse(&c, line, 1, 0, &req, err, sizeof(err)), -ENOENT);
	/* a process that is gone */
	snprintf(line, sizeof(line), "hot 0 %llu", (unsigned long long)page);
	assert_int_equal(agent_hint_parse(&c, line, 4444, 1000, &req, err, sizeof(err)), -ENOENT);

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f.root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_guard_slots),
	    cmocka_unit_test(test_guard_rates),
	    cmocka_unit_test(test_guard_peer_table),
	    cmocka_unit_test(test_parse_rules),
	};
	return cmocka_run_group_tests_name("agent_hint", tests, NULL, NULL);
}
