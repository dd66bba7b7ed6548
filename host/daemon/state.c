// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * state.c - per-VM state files (see state.h for what is kept, and why).
 *
 * Layout of one file, NAME.state in the state directory (json-c writes it, so any name is
 * escaped correctly):
 *
 *   {"format":1,"name":"web1","uuid":"...","boot_id":"...","instance":"4242:1234567",
 *    "saved_ms":57727948,"balloon_bytes":805306368,"target_bytes":671088640,
 *    "hold_until_ms":57757948,"last_take_ms":57700000,"refused_since_take":false,
 *    "refusals":1,"released":false,"policy_set":{"enabled":"no"}}
 *
 * Checks on the way in, each a sentence for the log: the size (at most MTD_STATE_MAX_BYTES,
 * read through O_NOFOLLOW from a regular file), strict JSON, the format number, every
 * field's type and range, no NUL inside a string (json-c strings can carry \u0000, which
 * would cut a name short), policy keys known.  Semantic checks (name, boot, QEMU instance,
 * sizes against the balloon) are the caller's: they need what only the caller knows.
 */
#include "daemon/state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/log.h"

#define SIZE_MAX_BYTES (1ULL << 50) /* 1 PiB: no guest has more */
#define TIME_MAX_MS    (1ULL << 62)
#define SAFE_NAME_MAX  60 /* longer names are hashed (file names stay short) */

/* ---- encoding -------------------------------------------------------------------------- */

static void put_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_int64(v > INT64_MAX ? INT64_MAX : (int64_t)v));
}

int mtd_state_encode(const struct mtd_saved_vm *s, char *buf, size_t len)
{
	struct json_object *o = json_object_new_object(), *p = json_object_new_object();
	int rc = 0;

	json_object_object_add(o, "format", json_object_new_int(MTD_STATE_FORMAT));
	json_object_object_add(o, "name", json_object_new_string(s->name));
	json_object_object_add(o, "uuid", json_object_new_string(s->uuid));
	json_object_object_add(o, "boot_id", json_object_new_string(s->boot_id));
	json_object_object_add(o, "instance", json_object_new_string(s->instance));
	put_u64(o, "saved_ms", s->saved_ms);
	put_u64(o, "balloon_bytes", s->ctl.balloon_bytes);
	put_u64(o, "target_bytes", s->ctl.target_bytes);
	put_u64(o, "hold_until_ms", s->ctl.hold_until_ms);
	put_u64(o, "last_take_ms", s->ctl.last_take_ms);
	json_object_object_add(o, "refused_since_take",
			       json_object_new_boolean(s->ctl.refused_since_take));
	put_u64(o, "refusals", s->ctl.refusals);
	json_object_object_add(o, "released", json_object_new_boolean(s->released));
	for (int i = 0; i < MTD_POLICY_NKEYS; i++)
		if (s->policy_set[i][0])
			json_object_object_add(p, mtd_policy_keys[i],
					       json_object_new_string(s->policy_set[i]));
	json_object_object_add(o, "policy_set", p);
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	if (strlen(text) + 2 > len)
		rc = -ENOSPC;
	else
		snprintf(buf, len, "%s\n", text);
	json_object_put(o);
	return rc;
}

/* ---- decoding -------------------------------------------------------------------------- */

static int get_str(struct json_object *o, const char *k, char *out, size_t size, bool nonempty,
		   char *err, size_t errlen)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_string)) {
		snprintf(err, errlen, "'%s' is missing or not a string", k);
		return -EINVAL;
	}
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	if (strlen(s) != n) {
		snprintf(err, errlen, "'%s' holds a NUL character", k);
		return -EINVAL;
	}
	if (n >= size || (nonempty && n == 0)) {
		snprintf(err, errlen, "'%s' must be %s%zu characters", k, nonempty ? "1.." : "0..",
			 size - 1);
		return -EINVAL;
	}
	memcpy(out, s, n + 1);
	return 0;
}

static int get_u64(struct json_object *o, const char *k, uint64_t max, uint64_t *out, char *err,
		   size_t errlen)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int)) {
		snprintf(err, errlen, "'%s' is missing or not an integer", k);
		return -EINVAL;
	}
	int64_t x = json_object_get_int64(v);
	if (x < 0 || (uint64_t)x > max) {
		snprintf(err, errlen, "'%s' is out of range (0..%" PRIu64 ")", k, max);
		return -EINVAL;
	}
	*out = (uint64_t)x;
	return 0;
}

static int get_bool(struct json_object *o, const char *k, bool *out, char *err, size_t errlen)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_boolean)) {
		snprintf(err, errlen, "'%s' is missing or not true/false", k);
		return -EINVAL;
	}
	*out = json_object_get_boolean(v);
	return 0;
}

static int get_policy_set(struct json_object *o, struct mtd_saved_vm *s, char *err, size_t errlen)
{
	struct json_object *p;

	if (!json_object_object_get_ex(o, "policy_set", &p) ||
	    !json_object_is_type(p, json_type_object)) {
		snprintf(err, errlen, "'policy_set' is missing or not an object");
		return -EINVAL;
	}
	json_object_object_foreach(p, key, val)
	{
		int i = mtd_policy_key_index(key);
		char kerr[120];

		if (i < 0) {
			snprintf(err, errlen, "policy_set: unknown key '%.32s'", key);
			return -EINVAL;
		}
		struct json_object *one = json_object_new_object();
		json_object_object_add(one, key, json_object_get(val));
		int rc = get_str(one, key, s->policy_set[i], sizeof(s->policy_set[i]), true, kerr,
				 sizeof(kerr));
		json_object_put(one);
		if (rc < 0) {
			snprintf(err, errlen, "policy_set: %s", kerr);
			return rc;
		}
	}
	return 0;
}

int mtd_state_decode(const char *text, size_t len, struct mtd_saved_vm *s, char *err, size_t errlen)
{
	struct json_tokener *tok;
	struct json_object *o;
	uint64_t v;
	int rc = -EINVAL;

	memset(s, 0, sizeof(*s));
	if (len > MTD_STATE_MAX_BYTES) {
		snprintf(err, errlen, "larger than %d bytes", MTD_STATE_MAX_BYTES);
		return -EINVAL;
	}
	tok = json_tokener_new_ex(8); /* the file is two levels deep */
	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	/* Only a trailing newline may follow the object. */
	while (o && used < len && (text[used] == '\n' || text[used] == ' '))
		used++;
	if (!o || je != json_tokener_success || used != len) {
		snprintf(err, errlen, "not one JSON object (%s)",
			 je == json_tokener_success ? "trailing text"
						    : json_tokener_error_desc(je));
		goto out;
	}
	if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	if (get_u64(o, "format", 1000, &v, err, errlen) < 0)
		goto out;
	if (v != MTD_STATE_FORMAT) {
		snprintf(err, errlen, "format %" PRIu64 " (this memtided reads format %d)", v,
			 MTD_STATE_FORMAT);
		goto out;
	}
	if (get_str(o, "name", s->name, sizeof(s->name), true, err, errlen) < 0 ||
	    get_str(o, "uuid", s->uuid, sizeof(s->uuid), false, err, errlen) < 0 ||
	    get_str(o, "boot_id", s->boot_id, sizeof(s->boot_id), true, err, errlen) < 0 ||
	    get_str(o, "instance", s->instance, sizeof(s->instance), false, err, errlen) < 0 ||
	    get_u64(o, "saved_ms", TIME_MAX_MS, &s->saved_ms, err, errlen) < 0 ||
	    get_u64(o, "balloon_bytes", SIZE_MAX_BYTES, &s->ctl.balloon_bytes, err, errlen) < 0 ||
	    get_u64(o, "target_bytes", SIZE_MAX_BYTES, &s->ctl.target_bytes, err, errlen) < 0 ||
	    get_u64(o, "hold_until_ms", TIME_MAX_MS, &s->ctl.hold_until_ms, err, errlen) < 0 ||
	    get_u64(o, "last_take_ms", TIME_MAX_MS, &s->ctl.last_take_ms, err, errlen) < 0 ||
	    get_bool(o, "refused_since_take", &s->ctl.refused_since_take, err, errlen) < 0 ||
	    get_u64(o, "refusals", 32, &v, err, errlen) < 0)
		goto out;
	s->ctl.refusals = (unsigned)v;
	if (get_bool(o, "released", &s->released, err, errlen) < 0 ||
	    get_policy_set(o, s, err, errlen) < 0)
		goto out;
	if (s->ctl.balloon_bytes == 0) {
		snprintf(err, errlen, "'balloon_bytes' is 0");
		goto out;
	}
	s->ctl.primed = true;
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

/* ---- files ------------------------------------------------------------------------------ */

static bool safe_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || c == '+';
}

int mtd_state_file_name(const char *vm_name, char *buf, size_t len)
{
	size_t n = strlen(vm_name);
	bool safe = n > 0 && n <= SAFE_NAME_MAX && vm_name[0] != '.';

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; safe && i < n; i++)
		safe = safe_char(vm_name[i]);
	if (safe)
		return snprintf(buf, len, "%s.state", vm_name) < (int)len ? 0 : -EINVAL;
	/* FNV-1a 64: the file holds the full name, so a collision is caught on load. */
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)vm_name[i]) * 1099511628211ULL;
	return snprintf(buf, len, "~%016" PRIx64 ".state", h) < (int)len ? 0 : -EINVAL;
}

static int path_of(const char *dir, const char *vm_name, const char *suffix, char *buf, size_t len)
{
	char fn[MTD_STATE_NAME_MAX];

	if (mtd_state_file_name(vm_name, fn, sizeof(fn)) < 0)
		return -EINVAL;
	return snprintf(buf, len, "%s/%s%s", dir, fn, suffix) < (int)len ? 0 : -ENAMETOOLONG;
}

int mtd_state_dir_prepare(const char *dir, char *err, size_t errlen)
{
	char p[MTD_PATH_MAX];
	struct stat sb;

	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p) || p[0] != '/') {
		snprintf(err, errlen, "state directory '%.100s' is not an absolute path", dir);
		return -EINVAL;
	}
	/* mkdir -p: parents 0755 (as /var/lib is), the directory itself 0700. */
	for (char *s = p + 1;; s++) {
		bool last = *s == '\0';
		if (*s != '/' && !last)
			continue;
		*s = '\0';
		if (mkdir(p, last ? 0700 : 0755) < 0 && errno != EEXIST) {
			int e = errno;
			snprintf(err, errlen, "cannot create the state directory %s: %s", p,
				 strerror(e));
			return -e;
		}
		if (last)
			break;
		*s = '/';
	}
	if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "state directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		int e = errno;
		snprintf(err, errlen, "state directory %s is not writable: %s", dir, strerror(e));
		return -e;
	}
	return 0;
}

int mtd_state_save(const char *dir, const struct mtd_saved_vm *s, char *err, size_t errlen)
{
	char path[MTD_PATH_MAX + MTD_STATE_NAME_MAX], tmp[sizeof(path) + 8], text[4096];
	int rc, fd;

	if (path_of(dir, s->name, "", path, sizeof(path)) < 0 ||
	    path_of(dir, s->name, ".tmp", tmp, sizeof(tmp)) < 0) {
		snprintf(err, errlen, "state file path too long under %.100s", dir);
		return -ENAMETOOLONG;
	}
	rc = mtd_state_encode(s, text, sizeof(text));
	if (rc < 0) {
		snprintf(err, errlen, "state of %.64s does not fit %zu bytes", s->name,
			 sizeof(text));
		return rc;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(-rc));
		return rc;
	}
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	rc = w == (ssize_t)n ? 0 : w < 0 ? -errno : -ENOSPC;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		(void)unlink(tmp);
	}
	return rc;
}

/* Read a whole state file (bounded, no symlinks, regular files only). */
static int read_file(const char *path, char *buf, size_t cap, size_t *len, char *err, size_t errlen)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP)
			snprintf(err, errlen, "a symbolic link (not followed)");
		return rc;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "not a regular file");
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)sb.st_size > MTD_STATE_MAX_BYTES) {
		snprintf(err, errlen, "%lld bytes, more than the %d a state file may have",
			 (long long)sb.st_size, MTD_STATE_MAX_BYTES);
		close(fd);
		return -EINVAL;
	}
	*len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + *len, cap - *len);
		if (r < 0) {
			rc = -errno;
			snprintf(err, errlen, "read: %s", strerror(-rc));
			break;
		}
		if (r == 0)
			break;
		*len += (size_t)r;
		if (*len == cap) {
			snprintf(err, errlen, "grew past %d bytes while read", MTD_STATE_MAX_BYTES);
			rc = -EINVAL;
			break;
		}
	}
	close(fd);
	return rc;
}

int mtd_state_load(const char *dir, const char *vm_name, struct mtd_saved_vm *s, char *err,
		   size_t errlen)
{
	char path[MTD_PATH_MAX + MTD_STATE_NAME_MAX], why[200] = "";
	char *buf = malloc(MTD_STATE_MAX_BYTES + 1);
	size_t len = 0;
	int rc;

	if (!buf)
		return -ENOMEM;
	if (path_of(dir, vm_name, "", path, sizeof(path)) < 0) {
		snprintf(err, errlen, "state file path too long under %.100s", dir);
		free(buf);
		return -ENAMETOOLONG;
	}
	rc = read_file(path, buf, MTD_STATE_MAX_BYTES + 1, &len, why, sizeof(why));
	if (rc == 0)
		rc = mtd_state_decode(buf, len, s, why, sizeof(why));
	if (rc == 0 && strcmp(s->name, vm_name) != 0) {
		snprintf(why, sizeof(why), "it belongs to '%.64s'", s->name);
		rc = -EINVAL;
	}
	if (rc < 0 && rc != -ENOENT)
		snprintf(err, errlen, "%s: %s", path, why[0] ? why : strerror(-rc));
	free(buf);
	return rc;
}

int mtd_state_remove(const char *dir, const char *vm_name)
{
	char path[MTD_PATH_MAX + MTD_STATE_NAME_MAX + 8];

	if (path_of(dir, vm_name, ".tmp", path, sizeof(path)) == 0)
		(void)unlink(path);
	if (path_of(dir, vm_name, "", path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	return unlink(path) < 0 ? -errno : 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && strcmp(s + n - m, suffix) == 0;
}

int mtd_state_prune(const char *dir, bool (*keep)(void *arg, const char *vm_name), void *arg)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	int removed = 0;
	char *buf = malloc(MTD_STATE_MAX_BYTES + 1);

	if (!dh || !buf) {
		if (dh)
			closedir(dh);
		free(buf);
		return 0;
	}
	while ((de = readdir(dh))) {
		char path[MTD_PATH_MAX + 300], why[200] = "";
		struct mtd_saved_vm s;
		size_t len = 0;

		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (ends_with(de->d_name, ".state.tmp")) {
			/* a write that a kill interrupted: the .state beside it is whole */
			if (unlink(path) == 0)
				removed++;
			continue;
		}
		if (!ends_with(de->d_name, ".state"))
			continue;
		int rc = read_file(path, buf, MTD_STATE_MAX_BYTES + 1, &len, why, sizeof(why));
		if (rc == 0)
			rc = mtd_state_decode(buf, len, &s, why, sizeof(why));
		if (rc < 0) {
			mtd_warn("state file %s: %s; removed (no VM can be told from it)", path,
				 why[0] ? why : strerror(-rc));
		} else if (keep(arg, s.name)) {
			continue;
		} else {
			mtd_info("state of %s removed: the domain no longer runs", s.name);
		}
		if (unlink(path) == 0)
			removed++;
	}
	closedir(dh);
	free(buf);
	return removed;
}

int mtd_state_boot_id(char out[37])
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	char line[64] = "";

	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	if (strlen(line) != 36)
		return -EPROTO;
	memcpy(out, line, 37);
	return 0;
}
