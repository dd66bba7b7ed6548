// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_qmp.c - memtided's QMP client (host/act/qmp.c, host/act/qmp_parse.c) against a hostile or
 * buggy QEMU.
 *
 * The peer on the QMP socket is a scripted fake, a thread of this test: it stands in for a
 * hostile QEMU, which a unit test cannot make a real QEMU be (a real QEMU never sends
 * {"event": null}).  It greets, then answers every command line with the first scripted
 * reply whose match text appears in the request; events can ride in front of any reply.
 * tests/integration/host_qmp.sh runs the same client against a real QEMU guest.
 *
 * Checked: JSON null, wrong types, negative and huge numbers and duplicate keys in events,
 * replies, qom-list entries, errors and guest-stats are each a clean error or skipped, never
 * a crash (before the fix {"event": null} and a qom-list entry with "type": null each ended
 * memtided with SIGSEGV), and the client keeps working afterwards.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "act/qmp.h"

#define GiB ((uint64_t)1 << 30)

struct rule {
	const char *match; /* substring of the request line */
	const char *send;  /* lines to send back, each ending in \n */
};

struct fake_qmp {
	char path[108];
	int listen_fd;
	pthread_t th;
	const char *greeting;
	const struct rule *rules; /* ends with {NULL, NULL} */
};

static const char greeting[] =
    "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 2, \"minor\": 2, \"major\": 7}}, "
    "\"capabilities\": [\"oob\"]}}\n";

static void send_text(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void answer(struct fake_qmp *f, int fd, const char *line)
{
	for (const struct rule *r = f->rules; r && r->match; r++) {
		if (strstr(line, r->match)) {
			send_text(fd, r->send);
			return;
		}
	}
	if (strstr(line, "qmp_capabilities")) {
		send_text(fd, "{\"return\": {}}\n");
		return;
	}
	send_text(fd,
		  "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"not scripted\"}}\n");
}

/* Serve connections one after the other until the listening socket is shut down. */
static void *fake_thread(void *arg)
{
	struct fake_qmp *f = arg;

	for (;;) {
		char buf[8192];
		size_t len = 0;
		int fd = accept(f->listen_fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		send_text(fd, f->greeting);
		for (;;) {
			ssize_t r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			char *nl;

			if (r <= 0)
				break;
			len += (size_t)r;
			buf[len] = '\0';
			while ((nl = strchr(buf, '\n')) != NULL) {
				*nl = '\0';
				answer(f, fd, buf);
				len -= (size_t)(nl + 1 - buf);
				memmove(buf, nl + 1, len + 1);
			}
		}
		close(fd);
	}
}

static void fake_start(struct fake_qmp *f, const struct rule *rules, const char *greet)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static int seq;

	memset(f, 0, sizeof(*f));
	f->rules = rules;
	f->greeting = greet ? greet : greeting;
	snprintf(f->path, sizeof(f->path), "/tmp/memtide-test-qmp-%d-%d.sock", (int)getpid(),
		 seq++);
	unlink(f->path);
	memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->listen_fd >= 0);
	assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->listen_fd, 4), 0);
	assert_int_equal(pthread_create(&f->th, NULL, fake_thread, f), 0);
}

static void fake_stop(struct fake_qmp *f)
{
	shutdown(f->listen_fd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->listen_fd);
	unlink(f->path);
}

static struct mtd_qmp *connect_ok(struct fake_qmp *f)
{
	struct mtd_qmp *q = NULL;

	assert_int_equal(mtd_qmp_connect(f->path, 3000, NULL, &q), 0);
	assert_non_null(q);
	return q;
}

/* ---- events ------------------------------------------------------------------------------ */

/* Events with a null, non-string or odd name, and BALLOON_CHANGE events whose data is null,
 * not an object, or whose actual is null, negative, fractional, a string or past 2^63:
 * each is dropped, and the reply behind them still arrives. */
static void test_hostile_events(void **state)
{
	static const struct rule rules[] = {
	    {"query-balloon",
	     "{\"event\": null}\n"
	     "{\"event\": 7, \"data\": {\"actual\": 1}}\n"
	     "{\"event\": {}, \"data\": null}\n"
	     "{\"event\": [\"BALLOON_CHANGE\"]}\n"
	     "{\"event\": \"BALLOON_CHANGE\"}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": null}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": 5}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": null}}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": -4096}}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 1.5e9}}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": \"1073741824\"}}\n"
	     "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 18446744073709551615}}\n"
	     "{\"event\": \"BALLOON_CHANGE\\u0000\", \"data\": {\"actual\": 4096}}\n"
	     "{\"return\": {\"actual\": 1073741824}}\n"},
	    {NULL, NULL},
	};
	struct fake_qmp f;
	struct mtd_qmp *q;
	uint64_t actual = 0;
	(void)state;

	fake_start(&f, rules, NULL);
	q = connect_ok(&f);
	assert_int_equal(mtd_qmp_query_balloon(q, &actual), 0);
	assert_int_equal(actual, GiB);
	assert_int_equal(mtd_qmp_last_balloon_event(q), 0);
	/* and the connection is still usable */
	actual = 0;
	assert_int_equal(mtd_qmp_query_balloon(q, &actual), 0);
	assert_int_equal(actual, GiB);
	mtd_qmp_close(q);
	fake_stop(&f);
}

/* A well-formed BALLOON_CHANGE is remembered; a duplicate key keeps json-c's last value. */
static void test_balloon_event(void **state)
{
	static const struct rule rules[] = {
	    {"query-balloon", "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 536870912}, "
			      "\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}}\n"
			      "{\"return\": {\"actual\": 536870912, \"actual\": 536870912}}\n"},
	    {NULL, NULL},
	};
	struct fake_qmp f;
	struct mtd_qmp *q;
	uint64_t actual = 0;
	(void)state;

	fake_start(&f, rules, NULL);
	q = connect_ok(&f);
	assert_int_equal(mtd_qmp_query_balloon(q, &actual), 0);
	assert_int_equal(actual, 512ull << 20);
	assert_int_equal(mtd_qmp_last_balloon_event(q), 512ull << 20);
	mtd_qmp_close(q);
	fake_stop(&f);
}

/* ---- replies ----------------------------------------------------------------------------- */

/* qom-list entries with a null, numeric or missing name or type, entries that are not
 * objects at all, and names that are not a single path component: skipped; the one good
 * entry behind them is found. */
static void test_hostile_qom_list(void **state)
{
	static const struct rule rules[] = {
	    {"peripheral\"",
	     "{\"return\": [{\"name\": \"x\", \"type\": null},"
	     " {\"name\": null, \"type\": \"child<virtio-balloon-pci>\"},"
	     " {\"name\": 5, \"type\": \"child<virtio-balloon-pci>\"},"
	     " {\"name\": \"y\", \"type\": 12},"
	     " {\"name\": \"y\", \"type\": [\"child<virtio-balloon-pci>\"]},"
	     " {\"name\": \"../../evil\", \"type\": \"child<virtio-balloon-pci>\"},"
	     " {\"name\": \"\", \"type\": \"child<virtio-balloon-pci>\"},"
	     " {\"name\": \"a\\u0000b\", \"type\": \"child<virtio-balloon-pci>\"},"
	     " {\"type\": \"child<virtio-balloon-pci>\"},"
	     " null, 7, \"balloon0\", [],"
	     " {\"name\": \"balloon0\", \"type\": \"child<virtio-balloon-pci>\"}]}\n"},
	    {NULL, NULL},
	};
	struct fake_qmp f;
	struct mtd_qmp *q;
	char path[128];
	(void)state;

	fake_start(&f, rules, NULL);
	q = connect_ok(&f);
	assert_int_equal(mtd_qmp_find_balloon(q, path, sizeof(path)), 0);
	assert_string_equal(path, "/machine/peripheral/balloon0");
	mtd_qmp_close(q);
	fake_stop(&f);
}

/* Nothing usable in either list: -ENODEV, no crash. */
static void test_qom_list_nothing(void **state)
{
	static const struct rule rules[] = {
	    {"peripheral-anon\"",
	     "{\"return\": [{\"name\": null, \"type\": null}, {\"name\": \"z\"}]}\n"},
	    {"peripheral\"", "{\"return\": null}\n"},
	    {NULL, NULL},
	};
	struct fake_qmp f;
	struct mtd_qmp *q;
	char path[128];
	(void)state;

	fake_start(&f, rules, NULL);
	q = connect_ok(&f);
	assert_int_equal(mtd_qmp_find_balloon(q, path, sizeof(path)), -ENODEV);
	mtd_qmp_close(q);
	fake_stop(&f);
}

/* query-balloon's actual null, negative, fractional, a string, or beyond any machine
 * (2^64 - 1, which json-c reads as an unsigned int): -EPROTO each time. */
static void test_hostile_numbers(void **state)
{
	static const char *const bad[] = {
	    "{\"return\": {\"actual\": null}}\n",
	    "{\"return\": {\"actual\": -1}}\n",
	    "{\"return\": {\"actual\": 1.5}}\n",
	    "{\"return\": {\"actual\": \"1073741824\"}}\n",
	    "{\"return\": {\"actual\": 18446744073709551615}}\n",
	    "{\"return\": {\"actual\": 9223372036854775807}}\n",
	    "{\"return\": {}}\n",
	    "{\"return\": null}\n",
	    "{\"return\": [1]}\n",
	    "{\"return\": {\"actual\": true}}\n",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct rule rules[] = {{"query-balloon", bad[i]}, {NULL, NULL}};
		struct fake_qmp f;
		struct mtd_qmp *q;
		uint64_t actual = 12345;

		fake_start(&f, rules, NULL);
		q = connect_ok(&f);
		assert_int_equal(mtd_qmp_query_balloon(q, &actual), -EPROTO);
		assert_int_equal(actual, 12345);
		mtd_qmp_close(q);
		fake_stop(&f);
	}
}

/* QEMU's error with a null, numeric or missing desc, or a null error: -EREMOTEIO, and the
 * message never prints "(null)". */
static void test_hostile_errors(void **state)
{
	static const char *const bad[] = {
	    "{\"error\": {\"class\": \"GenericError\", \"desc\": null}}\n",
	    "{\"error\": {\"class\": \"GenericError\", \"desc\": 42}}\n",
	    "{\"error\": {\"class\": null}}\n",
	    "{\"error\": null}\n",
	    "{\"error\": \"boom\"}\n",
	    /* NOLINTNEXTLINE(bugprone-suspicious-missing-comma): one string, two lines */
	    "{\"error\": {\"class\": \"GenericError\", \"desc\": "
	    "\"\\u001b]0;owned\\u0007\\u001b[2J\"}}\n",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct rule rules[] = {{"query-balloon", bad[i]}, {NULL, NULL}};
		struct fake_qmp f;
		struct mtd_qmp *q;
		struct json_object *ret = (struct json_object *)1;
		char err[160] = "";

		fake_start(&f, rules, NULL);
		q = connect_ok(&f);
		assert_int_equal(mtd_qmp_execute(q, "query-balloon", NULL, &ret, err, sizeof(err)),
				 -EREMOTEIO);
		assert_null(ret);
		assert_true(err[0] != '\0');
		assert_null(strstr(err, "(null)"));
		/* no terminal escape from QEMU reaches a log or memtidectl's output */
		for (const char *p = err; *p; p++)
			assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
		mtd_qmp_close(q);
		fake_stop(&f);
	}
}

/* A greeting whose QMP member is null, or that is not an object: refused cleanly. */
static void test_hostile_greeting(void **state)
{
	static const char *const bad[] = {
	    "[\"QMP\"]\n",
	    "\"QMP\"\n",
	    "{\"event\": null}\n",
	    "{\"QMP\"\n",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fake_qmp f;
		struct mtd_qmp *q = NULL;

		fake_start(&f, NULL, bad[i]);
		/* the last one never ends its line: the timeout ends the wait */
		assert_true(mtd_qmp_connect(f.path, 300, NULL, &q) < 0);
		assert_null(q);
		fake_stop(&f);
	}
}

/* guest-stats with null members, negative statistics (QEMU's -1 for "never sent"), wrong
 * types and huge values: what is sane is kept, the rest is unknown. */
static void test_hostile_guest_stats(void **state)
{
	static const struct rule rules[] = {
	    {"guest-stats",
	     "{\"return\": {\"stats\": {\"stat-available-memory\": null,"
	     " \"stat-free-memory\": -1, \"stat-total-memory\": \"x\","
	     " \"stat-major-faults\": 18446744073709551615, \"stat-minor-faults\": 3,"
	     " \"stat-swap-in\": 1.5}, \"last-update\": 17}}\n"},
	    {"free-page-reporting", "{\"return\": null}\n"},
	    {NULL, NULL},
	};
	struct fake_qmp f;
	struct mtd_qmp *q;
	struct mtd_balloon_stats st;
	bool on = true;
	(void)state;

	fake_start(&f, rules, NULL);
	q = connect_ok(&f);
	assert_int_equal(mtd_qmp_guest_stats(q, "/machine/peripheral/balloon0", &st), 0);
	assert_true(st.valid);
	assert_int_equal(st.last_update_s, 17);
	assert_false(st.has_available);
	assert_int_equal(st.free_bytes, 0);
	assert_int_equal(st.total_bytes, 0);
	assert_int_equal(st.major_faults, 0);
	assert_int_equal(st.minor_faults, 3);
	assert_int_equal(st.swap_in_bytes, 0);
	assert_int_equal(mtd_qmp_fpr(q, "/machine/peripheral/balloon0", &on), -EPROTO);
	assert_true(on);
	mtd_qmp_close(q);
	fake_stop(&f);

	/* QEMU 7.2 reports a statistic the guest never sent as 2^64-1 (captured from a real
	 * QEMU), which json-c's get_int64 reads as INT64_MAX: once that passed the
	 * "not negative" check, and a guest whose driver sends no MemAvailable had 8 EiB
	 * available.  Now it is unknown. */
	struct json_object *real = json_tokener_parse(
	    "{\"stats\": {\"stat-available-memory\": 18446744073709551615, "
	    "\"stat-free-memory\": 702545920, \"stat-total-memory\": 18446744073709551615}, "
	    "\"last-update\": 1733325297}");
	assert_int_equal(mtd_qmp_parse_guest_stats(real, &st), 0);
	assert_true(st.valid);
	assert_false(st.has_available);
	assert_int_equal(st.available_bytes, 0);
	assert_int_equal(st.free_bytes, 702545920);
	assert_int_equal(st.total_bytes, 0);
	json_object_put(real);

	/* the pure parser on the same shapes, and on nulls at the top */
	struct json_object *o = json_tokener_parse("{\"stats\": null, \"last-update\": 1}");
	assert_int_equal(mtd_qmp_parse_guest_stats(o, &st), -EPROTO);
	json_object_put(o);
	assert_int_equal(mtd_qmp_parse_guest_stats(NULL, &st), -EPROTO);
}

/* libvirt mode hands the whole reply text to mtd_qmp_parse_reply. */
static void test_parse_reply_text(void **state)
{
	struct json_object *ret = NULL;
	char err[160];
	(void)state;

	assert_int_equal(mtd_qmp_parse_reply("{\"return\": true}", &ret, err, sizeof(err)), 0);
	assert_true(json_object_get_boolean(ret));
	json_object_put(ret);
	assert_int_equal(
	    mtd_qmp_parse_reply("{\"error\": {\"desc\": null}}", &ret, err, sizeof(err)),
	    -EREMOTEIO);
	assert_null(strstr(err, "(null)"));
	assert_int_equal(mtd_qmp_parse_reply("null", &ret, err, sizeof(err)), -EPROTO);
	assert_int_equal(mtd_qmp_parse_reply("", &ret, err, sizeof(err)), -EPROTO);
	assert_int_equal(mtd_qmp_parse_reply("{\"return\": 1} trailing", &ret, err, sizeof(err)),
			 -EPROTO);
	assert_int_equal(mtd_qmp_parse_reply(NULL, &ret, err, sizeof(err)), -EPROTO);
}

/* QEMU reading all of guest memory itself: a migration in any of its running states, an
 * active dump, a snapshot job that has not concluded; the states around them, other jobs
 * and answers of the wrong shape are not. */
static void test_memjob(void **state)
{
	struct mtd_memjob j;
	struct {
		const char *migrate, *dump, *jobs;
		const char *what; /* NULL: none */
	} cases[] = {
	    {"{\"status\": \"active\"}", NULL, NULL, "migration"},
	    {"{\"status\": \"postcopy-active\"}", NULL, NULL, "migration"},
	    {"{\"status\": \"device\"}", NULL, NULL, "migration"},
	    {"{\"status\": \"completed\"}", NULL, NULL, NULL},
	    {"{}", "{\"status\": \"none\"}", "[]", NULL},
	    {"{\"status\": \"failed\"}", "{\"status\": \"active\", \"completed\": 0}", "[]",
	     "memory dump"},
	    {"{}", "{\"status\": \"completed\"}",
	     "[{\"id\": \"s\", \"type\": \"snapshot-save\", \"status\": \"running\"}]", "snapshot"},
	    {"{}", NULL,
	     "[{\"id\": \"s\", \"type\": \"snapshot-load\", \"status\": \"concluded\"},"
	     " {\"id\": \"b\", \"type\": \"backup\", \"status\": \"running\"}]",
	     NULL},
	    {"[1]", "\"active\"", "{\"type\": \"snapshot-save\"}", NULL},
	    {"{\"status\": 7}", "{\"status\": null}", "[null, 3, {\"type\": 1}]", NULL},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json_object *m =
		    cases[i].migrate ? json_tokener_parse(cases[i].migrate) : NULL;
		struct json_object *d = cases[i].dump ? json_tokener_parse(cases[i].dump) : NULL;
		struct json_object *js = cases[i].jobs ? json_tokener_parse(cases[i].jobs) : NULL;
		mtd_qmp_parse_memjob(m, d, js, &j);
		assert_int_equal(j.active, cases[i].what != NULL);
		if (cases[i].what)
			assert_string_equal(j.what, cases[i].what);
		json_object_put(m);
		json_object_put(d);
		json_object_put(js);
	}
	mtd_qmp_parse_memjob(NULL, NULL, NULL, &j);
	assert_false(j.active);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostile_events),   cmocka_unit_test(test_balloon_event),
	    cmocka_unit_test(test_hostile_qom_list), cmocka_unit_test(test_qom_list_nothing),
	    cmocka_unit_test(test_hostile_numbers),  cmocka_unit_test(test_hostile_errors),
	    cmocka_unit_test(test_hostile_greeting), cmocka_unit_test(test_hostile_guest_stats),
	    cmocka_unit_test(test_parse_reply_text), cmocka_unit_test(test_memjob),
	};
	return cmocka_run_group_tests_name("mtd_qmp", tests, NULL, NULL);
}
