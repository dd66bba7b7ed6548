// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_control_load.c - the control socket's server (host/front/control.c) under a burst
 * of clients, as libvirtd's restart brings one hook per running domain at once.
 *
 * A real server thread on a real unix socket, in front of a daemon in plain-QEMU mode whose
 * QMP socket does not exist (as test_mtd_control.c): the requests are answered from memory.
 * Checked: every client whose request was sent gets its answer, even when there are many
 * times more clients than slots and they all connect before the server reads any of them;
 * silent connections that fill every slot give way to a request within the hook's budget, and
 * are told they may come again ("retry": true).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "front/control.h"
#include "daemon/daemon.h"
#include "base/clock.h"

struct rig {
	struct mtd_daemon *d;
	struct mtd_control *ctl;
	char dir[64];
	char path[108];
};

static int rig_up(void **state)
{
	struct rig *r = calloc(1, sizeof(*r));
	struct mtd_config cfg;
	char err[200];

	assert_non_null(r);
	/* One CPU for the test and the threads it starts (they inherit it): see burst(). */
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
	(void)sched_setaffinity(0, sizeof(one), &one);
	snprintf(r->dir, sizeof(r->dir), "/tmp/mtd-ctl-load.XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	snprintf(r->path, sizeof(r->path), "%s/ctl.sock", r->dir);
	mtd_config_default(&cfg);
	cfg.ctl.interval_ms = 200;
	assert_int_equal(mtd_daemon_new(&cfg, &r->d), 0);
	r->d->mode = MTD_MODE_QMP;
	snprintf(r->d->qmp_path, sizeof(r->d->qmp_path), "/nonexistent/qmp.sock");
	snprintf(r->d->vm_name, sizeof(r->d->vm_name), "vm1");
	assert_int_equal(mtd_daemon_start(r->d), 0);
	assert_int_equal(mtd_control_start(r->d, r->path, "test", &r->ctl, err, sizeof(err)), 0);
	*state = r;
	return 0;
}

static int rig_down(void **state)
{
	struct rig *r = *state;

	mtd_control_stop(r->ctl);
	mtd_daemon_stop(r->d);
	mtd_daemon_free(r->d);
	rmdir(r->dir);
	free(r);
	return 0;
}

/* A blocking connect: the kernel holds it while the listen queue is full. */
static int dial(const struct rig *r)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memcpy(a.sun_path, r->path, strlen(r->path) + 1);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_line(int fd, const char *line)
{
	size_t n = strlen(line);

	return send(fd, line, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* The first line the server sends, within ms; "" when it closed first or said nothing. */
static void read_line(int fd, char *buf, size_t len, int ms)
{
	size_t got = 0;

	buf[0] = '\0';
	while (got + 1 < len && !memchr(buf, '\n', got)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, ms) <= 0)
			break;
		ssize_t n = recv(fd, buf + got, len - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
	}
}

/*
 * Many more clients than slots, each connecting and sending its whole request before the
 * next connects, none reading until all have sent: the server meets a full table and a
 * listen queue of clients whose requests wait unread.  Every one is answered.
 *
 * The server thread runs at real-time priority 1 when it may (as root).  The clients are
 * sent from a thread above it on the same CPU, so the server runs only while the clients
 * wait for room in the listen queue: it always meets a queue of requests already sent, as
 * under a burst of processes on a busy host, rather than one client at a time.  Without the
 * privilege the burst is gentler and the test weaker, not wrong.
 */
static void burst(void **state, const char *req, int n)
{
	struct rig *r = *state;
	int *fd = calloc((size_t)n, sizeof(int));
	int answered = 0, sent = 0;
	char buf[4096], first_loss[4096] = "";

	assert_non_null(fd);
	struct sched_param above = {.sched_priority = 2}, normal = {.sched_priority = 0};
	bool rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &above) == 0;
	for (int i = 0; i < n; i++) {
		fd[i] = dial(r);
		if (fd[i] >= 0 && send_line(fd[i], req) == 0)
			sent++;
	}
	if (rt)
		(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
	for (int i = 0; i < n; i++) {
		if (fd[i] < 0)
			continue;
		read_line(fd[i], buf, sizeof(buf), 10000);
		if (strstr(buf, "\"ok\":true"))
			answered++;
		else if (!first_loss[0])
			snprintf(first_loss, sizeof(first_loss), "%s", buf[0] ? buf : "(closed)");
		close(fd[i]);
	}
	free(fd);
	print_message("%s%d clients, %d sent, %d answered%s%s\n",
		      rt ? "" : "(no real-time priority) ", n, sent, answered,
		      first_loss[0] ? "; first lost: " : "", first_loss);
	assert_int_equal(sent, n);
	assert_int_equal(answered, n);
}

static void test_burst_status(void **state)
{
	burst(state, "{\"cmd\":\"status\"}\n", 8 * MTD_CONTROL_MAX_CLIENTS);
}

static void test_burst_hook(void **state)
{
	burst(state, "{\"cmd\":\"hook\",\"domain\":\"d\",\"op\":\"started\",\"subop\":\"begin\"}\n",
	      8 * MTD_CONTROL_MAX_CLIENTS);
}

/* Every slot held by a client that says nothing: a request still gets in, within the hook's
 * 2 s, and the silent ones that made room are told they may come again. */
static void test_silent_holders_give_way(void **state)
{
	struct rig *r = *state;
	int hold[MTD_CONTROL_MAX_CLIENTS], told = 0;
	char buf[4096];

	/* The listen queue is first come, first served: the holders take every slot before the
	 * request below is accepted, whenever the server gets to them. */
	for (int i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++)
		assert_true((hold[i] = dial(r)) >= 0);

	uint64_t t0 = mtd_mono_ms();
	int fd = dial(r);
	assert_true(fd >= 0);
	assert_int_equal(send_line(fd, "{\"cmd\":\"hook\",\"domain\":\"d\",\"op\":\"started\"}\n"),
			 0);
	read_line(fd, buf, sizeof(buf), 10000);
	uint64_t took = mtd_mono_ms() - t0;
	print_message("the request behind %d silent connections: answered in %llu ms\n",
		      MTD_CONTROL_MAX_CLIENTS, (unsigned long long)took);
	assert_non_null(strstr(buf, "\"ok\":true"));
	assert_true(took < 2000);
	close(fd);
	for (int i = 0; i < MTD_CONTROL_MAX_CLIENTS; i++) {
		struct pollfd p = {.fd = hold[i], .events = POLLIN};
		if (poll(&p, 1, 0) == 1) {
			read_line(hold[i], buf, sizeof(buf), 0);
			if (strstr(buf, "closed to make room") && strstr(buf, "\"retry\":true"))
				told++;
		}
		close(hold[i]);
	}
	assert_true(told >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_burst_status, rig_up, rig_down),
	    cmocka_unit_test_setup_teardown(test_burst_hook, rig_up, rig_down),
	    cmocka_unit_test_setup_teardown(test_silent_holders_give_way, rig_up, rig_down),
	};
	return cmocka_run_group_tests_name("mtd_control_load", tests, NULL, NULL);
}
