// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_qmp.c - libFuzzer target for memtided's QMP client: what a hostile QEMU can say.
 *
 * Each input is what QEMU writes on the QMP socket, used twice:
 *   1. Line by line through the pure parsers (host/act/qmp_parse.c): every line is parsed; an
 *      event goes to the BALLOON_CHANGE reader, a reply to the reply reader, and whatever
 *      it returns to every reply parser memtided has (qom-list balloon search, query-balloon
 *      actual, query-memory-size-summary base-memory, guest-stats, a boolean) whatever the
 *      command was - QEMU may answer anything.  The whole input also goes through
 *      mtd_qmp_parse_reply, libvirt mode's path.
 *   2. As a session: the input is written into one end of a socketpair (then shut), and
 *      the real client connects over the other end and runs the plain-QEMU actuator's
 *      commands in order, reading its replies from the input: greeting, qmp_capabilities,
 *      qom-list, query-balloon, qom-get guest-stats, qom-get free-page-reporting.  The
 *      stream's end is EOF, so nothing waits on a timeout.
 * Checked beyond "no crash, no sanitizer report": every value a parser accepts is within
 * its bound, a balloon path is DIR/ one clean component, and an error text for the log
 * holds no control character.  A violation traps.
 * Seeds (tests/fuzz/corpus/qmp/) are real QEMU 7.2 output for those commands and the
 * replies that once crashed memtided (null members, wrong types).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "act/qmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

static void check_text(const char *s)
{
	for (; *s; s++)
		CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
}

static void check_path(const char *path, const char *dir)
{
	size_t d = strlen(dir);

	CHECK(strncmp(path, dir, d) == 0 && path[d] == '/' && path[d + 1]);
	CHECK(!strchr(path + d + 1, '/'));
	check_text(path);
}

static void check_stats(const struct mtd_balloon_stats *st)
{
	CHECK(st->available_bytes <= MTD_QMP_BYTES_MAX && st->free_bytes <= MTD_QMP_BYTES_MAX &&
	      st->total_bytes <= MTD_QMP_BYTES_MAX && st->swap_in_bytes <= MTD_QMP_BYTES_MAX);
	CHECK(st->major_faults <= MTD_QMP_COUNTER_MAX && st->minor_faults <= MTD_QMP_COUNTER_MAX);
	CHECK(st->valid == (st->last_update_s != 0));
}

/* Every reply parser on one "return" value. */
static void all_parsers(struct json_object *ret)
{
	struct mtd_balloon_stats st;
	char path[128];
	uint64_t v;
	bool b;

	if (mtd_qmp_find_balloon_entry(ret, "/machine/peripheral", path, sizeof(path)) == 0)
		check_path(path, "/machine/peripheral");
	if (mtd_qmp_get_u64(ret, "actual", MTD_QMP_BYTES_MAX, &v) == 0)
		CHECK(v <= MTD_QMP_BYTES_MAX);
	if (mtd_qmp_get_u64(ret, "base-memory", MTD_QMP_BYTES_MAX, &v) == 0)
		CHECK(v <= MTD_QMP_BYTES_MAX);
	if (mtd_qmp_parse_guest_stats(ret, &st) == 0)
		check_stats(&st);
	(void)mtd_qmp_parse_bool(ret, &b);
	(void)mtd_qmp_str(ret, "desc");
}

static void lines(const char *text, size_t size)
{
	size_t off = 0;

	while (off < size) {
		const char *nl = memchr(text + off, '\n', size - off);
		size_t len = nl ? (size_t)(nl - (text + off)) + 1 : size - off;
		struct json_object *msg = NULL, *ret = NULL;
		char err[160];
		uint64_t actual;

		if (mtd_qmp_parse_line(text + off, len, &msg) == 0) {
			CHECK(json_object_is_type(msg, json_type_object));
			if (mtd_qmp_is_event(msg)) {
				if (mtd_qmp_balloon_event(msg, &actual))
					CHECK(actual <= MTD_QMP_BYTES_MAX);
			} else {
				int rc = mtd_qmp_reply_result(msg, &ret, err, sizeof(err));

				CHECK(rc == 0 || rc == -EREMOTEIO || rc == -EPROTO);
				if (rc < 0) {
					CHECK(!ret);
					check_text(err);
				}
				all_parsers(ret);
				json_object_put(ret);
			}
			json_object_put(msg);
		}
		off += len;
	}
}

static void session(const uint8_t *data, size_t size)
{
	struct mtd_balloon_stats st;
	struct mtd_qmp *q = NULL;
	char path[128];
	uint64_t actual;
	bool on;
	int sv[2];

	if (size > 64 * 1024 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return; /* larger inputs would not fit the socket buffer at once */
	if (write(sv[1], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	shutdown(sv[1], SHUT_WR);
	if (mtd_qmp_connect_fd(sv[0], 1000, NULL, &q) == 0) {
		if (mtd_qmp_find_balloon(q, path, sizeof(path)) == 0)
			CHECK(strncmp(path, "/machine/peripheral", 19) == 0);
		if (mtd_qmp_query_balloon(q, &actual) == 0)
			CHECK(actual <= MTD_QMP_BYTES_MAX);
		if (mtd_qmp_guest_stats(q, "/machine/peripheral/balloon0", &st) == 0)
			check_stats(&st);
		(void)mtd_qmp_fpr(q, "/machine/peripheral/balloon0", &on);
		(void)mtd_qmp_balloon(q, 1ull << 30);
		CHECK(mtd_qmp_last_balloon_event(q) <= MTD_QMP_BYTES_MAX);
		mtd_qmp_close(q);
	}
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct json_object *ret = NULL;
	char err[160];

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	lines(text, size);
	if (mtd_qmp_parse_reply(text, &ret, err, sizeof(err)) == 0)
		all_parsers(ret);
	json_object_put(ret);
	free(text);
	session(data, size);
	return 0;
}
