// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_control.c - libFuzzer target for memtided's control socket requests.
 *
 * Each input is one request line, used twice:
 *   1. mtd_control_parse (host/front/control_req.c): on success every string it hands on is
 *      1..127 bytes with no NUL or control character, and a field the command does not
 *      take is empty.
 *   2. mtd_control_handle on a daemon in libvirt mode that was never started (no libvirt
 *      connection, no VM): every command runs to its reply (status, vm, attach -> "not
 *      connected", policy-set -> "no domain", hook -> queued), and the reply must be one
 *      JSON object with a boolean "ok" and, when false, a string "error".  Hook events are
 *      drained after each input so the queue's bound is not what every input hits.
 * Seeds (tests/fuzz/corpus/control/) are the requests memtidectl and the libvirt hook send.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <urcu.h>

#include "base/log.h"
#include "daemon/daemon.h"
#include "front/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

static struct mtd_daemon *d;

static void check_field(const char *s, bool may_be_empty)
{
	size_t n = strnlen(s, MTD_NAME_MAX);

	CHECK(n < MTD_NAME_MAX && (may_be_empty || n > 0));
	for (size_t i = 0; i < n; i++)
		CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
}

static void drain(void)
{
	pthread_mutex_lock(&d->work_lock);
	while (d->work_head) {
		struct mtd_work *w = d->work_head;

		d->work_head = w->next;
		free(w);
	}
	d->work_tail = NULL;
	pthread_mutex_unlock(&d->work_lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mtd_control_req req;
	struct json_object *rep, *ok, *e;
	char err[300];
	char *out;

	if (!d) {
		struct mtd_config cfg;

		mtd_log_init(MTD_LOG_ERR, false, "fuzz_control");
		mtd_config_default(&cfg);
		if (mtd_daemon_new(&cfg, &d) < 0)
			abort();
		rcu_register_thread();
	}
	if (size > MTD_CONTROL_MAX_REQUEST)
		return 0; /* the connection refuses longer lines before parsing */

	if (mtd_control_parse((const char *)data, size, &req, err, sizeof(err)) == 0) {
		CHECK(req.cmd > MTD_CTL_NONE && req.cmd <= MTD_CTL_RESUME_VMS);
		bool many = req.cmd == MTD_CTL_RELEASE_VMS || req.cmd == MTD_CTL_RESUME_VMS;
		CHECK(!req.all || many); /* {"all": true} only where it means something */
		bool named = req.cmd != MTD_CTL_STATUS && req.cmd != MTD_CTL_VERSION && !req.all;
		check_field(req.name, !named);
		CHECK(req.npairs <= MTD_CONTROL_MAX_PAIRS);
		CHECK((req.npairs > 0) == (req.cmd == MTD_CTL_POLICY_SET));
		for (unsigned i = 0; i < req.npairs; i++) {
			check_field(req.pairs[i].key, false);
			check_field(req.pairs[i].value, false);
		}
		check_field(req.op, req.cmd != MTD_CTL_HOOK);
		check_field(req.subop, req.cmd != MTD_CTL_HOOK);
	} else {
		CHECK(err[0] != '\0');
	}

	out = mtd_control_handle(d, "fuzz", (const char *)data, size);
	CHECK(out != NULL);
	rep = json_tokener_parse(out);
	CHECK(json_object_is_type(rep, json_type_object));
	CHECK(json_object_object_get_ex(rep, "ok", &ok) &&
	      json_object_is_type(ok, json_type_boolean));
	if (!json_object_get_boolean(ok))
		CHECK(json_object_object_get_ex(rep, "error", &e) &&
		      json_object_is_type(e, json_type_string));
	json_object_put(rep);
	free(out);
	drain();
	return 0;
}
