// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * control_req.c - one control-socket request line -> a checked struct mtd_control_req
 * (control.h).  Pure: no daemon, no I/O, so the unit tests and tests/fuzz/fuzz_control.c
 * run exactly what the control thread runs.
 *
 * Two layers, the envelope first:
 *   1. The line goes through proto_json_parse(), the agent protocol's hardened intake: one
 *      strict JSON object, valid UTF-8, no raw NUL, no duplicate key (json-c would keep the
 *      last of two "name"s silently: {"cmd":"detach","name":"a","name":"b"} must not mean
 *      either), depth and size bounded.
 *   2. Each field the command needs is a string of 1..MTD_NAME_MAX-1 bytes with no control
 *      character.  JSON's \u0000 escape puts a NUL inside a json-c string, and a C string
 *      stops there: {"name":"web1\u0000x"} used to act on "web1".  Control characters
 *      (\u0001-\u001f, \u007f) would reach log lines and terminal output, and no libvirt
 *      domain name, policy key or value holds one.
 * Fields a command does not use are ignored (a newer memtidectl may send more).
 */
#include "front/control_req.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

static const struct {
	const char *name;
	enum mtd_control_cmd cmd;
} cmds[] = {
    {"status", MTD_CTL_STATUS},
    {"vm", MTD_CTL_VM},
    {"attach", MTD_CTL_ATTACH},
    {"detach", MTD_CTL_DETACH},
    {"policy-get", MTD_CTL_POLICY_GET},
    {"policy-set", MTD_CTL_POLICY_SET},
    {"hook", MTD_CTL_HOOK},
    {"version", MTD_CTL_VERSION},
    {"release", MTD_CTL_RELEASE_VMS},
    {"resume", MTD_CTL_RESUME_VMS},
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A string field into out[MTD_NAME_MAX].  required: absent is an error, else "" stays. */
static int take_str(struct json_object *req, const char *key, bool required, char *out, char *err,
		    size_t errlen)
{
	struct json_object *v;
	const char *s;
	size_t len;

	if (!json_object_object_get_ex(req, key, &v))
		return required ? fail(err, errlen, "missing field '%s'", key) : 0;
	if (!json_object_is_type(v, json_type_string))
		return fail(err, errlen, "field '%s' must be a string", key);
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if (len == 0)
		return required ? fail(err, errlen, "field '%s' is empty", key) : 0;
	if (len >= MTD_NAME_MAX)
		return fail(err, errlen, "field '%s' is longer than %d characters", key,
			    MTD_NAME_MAX - 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == 0)
			return fail(err, errlen,
				    "field '%s' contains a NUL byte (\\u0000) at offset %zu", key,
				    i);
		if (c < 0x20 || c == 0x7f)
			return fail(
			    err, errlen,
			    "field '%s' contains a control character (0x%02x) at offset %zu", key,
			    c, i);
	}
	memcpy(out, s, len + 1);
	return 0;
}

/* A \u0000 escape in the line itself (its backslash not escaped by another).  json-c keeps
 * object member names as C strings: {"set":{"min\u0000x":"1G"}} would reach us as "min",
 * so member names cannot be checked after the parse as string values are. */
static bool has_nul_escape(const char *line, size_t len)
{
	for (size_t i = 0; i + 6 <= len; i++) {
		size_t slashes = 0;

		if (memcmp(line + i, "\\u0000", 6) != 0)
			continue;
		while (slashes < i && line[i - 1 - slashes] == '\\')
			slashes++;
		if (slashes % 2 == 0)
			return true;
	}
	return false;
}

int mtd_control_parse(const char *line, size_t len, struct mtd_control_req *req, char *err,
		      size_t errlen)
{
	struct json_object *o = NULL, *cmdv;
	struct proto_error perr;
	const char *cmd;
	int rc = -EINVAL;

	memset(req, 0, sizeof(*req));
	if (proto_json_parse(line, len, &o, &perr) != PROTO_OK) {
		if (perr.code == PROTO_E_NOT_OBJECT)
			return fail(err, errlen, "a request is a JSON object with a \"cmd\" field");
		if (perr.code == PROTO_E_DUPLICATE_KEY)
			return fail(err, errlen, "not a valid request: a duplicate key");
		return fail(err, errlen, "not a JSON object: %s", perr.message);
	}
	if (!json_object_object_get_ex(o, "cmd", &cmdv) ||
	    !json_object_is_type(cmdv, json_type_string)) {
		fail(err, errlen,
		     "missing field 'cmd' (a string: status, vm, attach, detach, policy-get, "
		     "policy-set, release, resume, hook, version)");
		goto out;
	}
	cmd = json_object_get_string(cmdv);
	req->cmd = MTD_CTL_NONE;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strlen(cmd) == (size_t)json_object_get_string_len(cmdv) &&
		    strcmp(cmd, cmds[i].name) == 0)
			req->cmd = cmds[i].cmd;
	switch (req->cmd) {
	case MTD_CTL_NONE: {
		/* echo at most 64 printable bytes of it */
		char shown[65];
		size_t n = 0;

		for (const char *p = cmd; *p && n < sizeof(shown) - 1; p++)
			shown[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
		shown[n] = '\0';
		fail(err, errlen,
		     "unknown cmd '%s' (status, vm, attach, detach, policy-get, policy-set, "
		     "release, resume, hook, version)",
		     shown);
		goto out;
	}
	case MTD_CTL_STATUS:
	case MTD_CTL_VERSION:
		rc = 0;
		break;
	case MTD_CTL_VM:
	case MTD_CTL_ATTACH:
	case MTD_CTL_DETACH:
	case MTD_CTL_POLICY_GET:
		rc = take_str(o, "name", true, req->name, err, errlen);
		break;
	case MTD_CTL_POLICY_SET: {
		struct json_object *set;

		rc = take_str(o, "name", true, req->name, err, errlen);
		if (rc < 0)
			break;
		if (!json_object_object_get_ex(o, "set", &set)) {
			rc = take_str(o, "key", true, req->pairs[0].key, err, errlen);
			if (rc == 0)
				rc = take_str(o, "value", true, req->pairs[0].value, err, errlen);
			req->npairs = rc == 0;
			break;
		}
		/* Several keys at once (proto_json_parse has refused a key given twice). */
		if (has_nul_escape(line, len)) {
			rc = fail(err, errlen, "the request contains a NUL byte (\\u0000)");
			break;
		}
		if (!json_object_is_type(set, json_type_object) ||
		    json_object_object_length(set) == 0) {
			rc = fail(err, errlen,
				  "field 'set' must be an object of KEY: VALUE strings");
			break;
		}
		if (json_object_object_length(set) > MTD_CONTROL_MAX_PAIRS) {
			rc = fail(err, errlen, "field 'set' holds more than %d keys",
				  MTD_CONTROL_MAX_PAIRS);
			break;
		}
		json_object_object_foreach(set, k, v)
		{
			struct mtd_kv *kv = &req->pairs[req->npairs];
			size_t klen = strlen(k);

			/* The key is a JSON member name: bounded and clean like any field. */
			if (klen == 0 || klen >= sizeof(kv->key)) {
				rc = fail(err, errlen, "a key of 'set' is empty or too long");
				break;
			}
			for (size_t i = 0; i < klen && rc == 0; i++)
				if ((unsigned char)k[i] < 0x20 || k[i] == 0x7f)
					rc = fail(err, errlen,
						  "a key of 'set' contains a control character");
			if (rc == 0 && !json_object_is_type(v, json_type_string))
				rc = fail(err, errlen,
					  "the value of '%.32s' in 'set' must be a string", k);
			if (rc == 0) {
				struct json_object *one = json_object_new_object();

				json_object_object_add(one, "value", json_object_get(v));
				rc = take_str(one, "value", true, kv->value, err, errlen);
				json_object_put(one);
			}
			if (rc < 0)
				break;
			memcpy(kv->key, k, klen + 1);
			req->npairs++;
		}
		break;
	}
	case MTD_CTL_RELEASE_VMS:
	case MTD_CTL_RESUME_VMS: {
		struct json_object *all;

		if (!json_object_object_get_ex(o, "all", &all)) {
			rc = take_str(o, "name", true, req->name, err, errlen);
			break;
		}
		if (!json_object_is_type(all, json_type_boolean) || !json_object_get_boolean(all)) {
			fail(err, errlen, "field 'all' must be true (or give 'name')");
			break;
		}
		req->all = true;
		rc = 0;
		break;
	}
	case MTD_CTL_HOOK:
		rc = take_str(o, "domain", true, req->name, err, errlen);
		if (rc == 0)
			rc = take_str(o, "op", true, req->op, err, errlen);
		if (rc == 0)
			rc = take_str(o, "subop", false, req->subop, err, errlen);
		if (rc == 0 && !req->subop[0])
			memcpy(req->subop, "-", 2);
		break;
	}
out:
	json_object_put(o);
	return rc;
}
