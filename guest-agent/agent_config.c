// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_config.c - memtide-agent's settings: defaults, a key=value file, flags.
 *
 * One table (keys[]) names every setting, its type and bounds; the config file (parsed by
 * libinih, linked statically like json-c) and the command-line flags (--key=value) both go
 * through agent_config_set(), so a key means the same in both places and is checked the
 * same way.  Keys may sit outside any section or in [agent]; any other section is an error,
 * as is an unknown key: a typo in a guest's config must not be silently ignored.
 *
 * The defaults make a guest with no config file work: vsock to the host (CID 2, port 5253)
 * when the guest has a vsock transport, else (or when that does not reach memtided) the
 * virtio-serial port org.memtide.agent.0; stats every 2 s, hint socket
 * /run/memtide-agent.sock.
 */
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

enum kind { K_STR, K_U32, K_U64, K_BOOL, K_DBL, K_TRANSPORT };

struct key {
	const char *name;
	enum kind kind;
	size_t off;
	size_t size; /* K_STR: buffer size */
	double lo, hi;
	const char *help;
};

#define F(field) offsetof(struct agent_config, field), sizeof(((struct agent_config *)0)->field)

static const struct key keys[] = {
    {"transport", K_TRANSPORT, F(transport), 0, 0, "auto | virtio | vsock | unix"},
    {"port", K_STR, F(port_name), 0, 0, "virtio-serial port name"},
    {"device", K_STR, F(device), 0, 0, "virtio-serial device path (skips the name lookup)"},
    {"vsock_cid", K_U32, F(vsock_cid), 1, 0xffffffffu, "vsock peer CID (host: 2)"},
    {"vsock_port", K_U32, F(vsock_port), 1, 0xffffffffu, "vsock port"},
    {"unix_path", K_STR, F(unix_path), 0, 0, "unix socket path to connect to"},
    {"hint_socket", K_STR, F(hint_socket), 0, 0, "local hint socket (empty: none)"},
    {"sys_root", K_STR, F(sys_root), 0, 0, "prefix for /proc and /sys (tests)"},
    {"report_interval_ms", K_U32, F(report_interval_ms), PROTO_INTERVAL_MIN_MS,
     PROTO_INTERVAL_MAX_MS, "stats period"},
    {"wss_interval_ms", K_U32, F(wss_interval_ms), PROTO_INTERVAL_MIN_MS, PROTO_INTERVAL_MAX_MS,
     "wss period"},
    {"floor_bytes", K_U64, F(floor_bytes), 0, (double)PROTO_BYTES_MAX,
     "never reclaim MemAvailable below this"},
    {"floor_percent", K_U32, F(floor_percent), 0, 90, "... nor below this % of MemTotal"},
    {"allow_drop_caches", K_BOOL, F(allow_drop_caches), 0, 1, "may drop clean page cache"},
    {"enable_mglru", K_BOOL, F(enable_mglru), 0, 1, "turn MGLRU on at start if it is off"},
    {"reclaim_nice", K_U32, F(reclaim_nice), 0, 19,
     "nice value of reclaim done for the host (the guest's own work goes first)"},
    {"reclaim_pause_ms", K_U32, F(reclaim_pause_ms), 0, 5000,
     "pause after each second of reclaim for the host (0: none)"},
    {"backoff_min_ms", K_U32, F(backoff_min_ms), 1, 600000, "first reconnect delay"},
    {"backoff_max_ms", K_U32, F(backoff_max_ms), 1, 600000, "longest reconnect delay"},
    {"send_rate", K_DBL, F(send_rate_per_s), 0.1, 1000, "frames/s to the host, at most"},
    {"hint_rate", K_DBL, F(hint_rate_per_s), 0.1, 1000, "hints/s to the host, at most"},
    {"hint_user_rate", K_DBL, F(hint_user_rate_per_s), 0.1, 1000,
     "hints/s from each user other than root, at most"},
    {"hint_user_need", K_BOOL, F(hint_user_need), 0, 1,
     "users other than root may send need hints"},
    {"max_hint_clients", K_U32, F(max_hint_clients), 1, 64, "hint socket connections"},
    {"log_level", K_U32, F(log_level), 0, 3, "0 error .. 3 debug"},
    {"watch_interval_ms", K_U32, F(watch_interval_ms), 0, 60000,
     "growth watch period (0: off): /proc/meminfo read this often"},
    {"watch_horizon_ms", K_U32, F(watch_horizon_ms), 100, 60000,
     "growth projected this far ahead beyond MemAvailable sends a need"},
    {"watch_min_rate", K_U64, F(watch_min_rate_bytes), 0, (double)PROTO_BYTES_MAX,
     "bytes/s: slower growth of memory in use is ignored"},
};

void agent_config_defaults(struct agent_config *c)
{
	memset(c, 0, sizeof(*c));
	c->transport = AGENT_TR_AUTO;
	snprintf(c->port_name, sizeof(c->port_name), "%s", AGENT_DEFAULT_PORT);
	c->vsock_cid = AGENT_HOST_CID;
	c->vsock_port = AGENT_DEFAULT_VSOCK_PORT;
	snprintf(c->hint_socket, sizeof(c->hint_socket), "%s", AGENT_DEFAULT_HINT_SOCK);
	c->report_interval_ms = PROTO_DEFAULT_REPORT_INTERVAL_MS;
	c->wss_interval_ms = PROTO_DEFAULT_WSS_INTERVAL_MS;
	c->floor_bytes = 64ULL << 20;
	c->floor_percent = 5;
	c->backoff_min_ms = 100;
	c->backoff_max_ms = 5000;
	c->send_rate_per_s = 20;
	c->hint_rate_per_s = 5;
	c->hint_user_rate_per_s = 1;
	c->max_hint_clients = 8;
	c->log_level = AGENT_INFO;
	c->watch_interval_ms = 100;
	c->watch_horizon_ms = 2000;
	c->watch_min_rate_bytes = 16ULL << 20;
	c->reclaim_nice = 10;
	c->reclaim_pause_ms = 250;
	c->enable_mglru = true;
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Whole-string unsigned number, decimal or 0x hex; no sign, no trailing bytes. */
static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

int agent_config_set(struct agent_config *c, const char *key, const char *value, char *err,
		     size_t errlen)
{
	char *p;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct key *k = &keys[i];
		uint64_t u;
		double d;
		char *end;

		if (strcmp(k->name, key) != 0)
			continue;
		p = (char *)c + k->off;
		switch (k->kind) {
		case K_STR:
			if (strlen(value) >= k->size)
				return bad(err, errlen, "%s: value too long: '%s'", key, value);
			snprintf(p, k->size, "%s", value);
			return 0;
		case K_U32:
		case K_U64:
			if (!parse_u64(value, &u) || (double)u < k->lo || (double)u > k->hi)
				return bad(err, errlen, "%s: not a number in range: '%s'", key,
					   value);
			if (k->kind == K_U32)
				*(uint32_t *)(void *)p = (uint32_t)u;
			else
				*(uint64_t *)(void *)p = u;
			return 0;
		case K_BOOL:
			if (!strcmp(value, "true") || !strcmp(value, "yes") || !strcmp(value, "1"))
				*(bool *)p = true;
			else if (!strcmp(value, "false") || !strcmp(value, "no") ||
				 !strcmp(value, "0"))
				*(bool *)p = false;
			else
				return bad(err, errlen, "%s: not a boolean: '%s'", key, value);
			return 0;
		case K_DBL:
			errno = 0;
			d = strtod(value, &end);
			if (errno || end == value || *end || !(d >= k->lo && d <= k->hi))
				return bad(err, errlen, "%s: not a number in range: '%s'", key,
					   value);
			*(double *)(void *)p = d;
			return 0;
		case K_TRANSPORT:
			if (!strcmp(value, "virtio"))
				c->transport = AGENT_TR_VIRTIO;
			else if (!strcmp(value, "vsock"))
				c->transport = AGENT_TR_VSOCK;
			else if (!strcmp(value, "unix"))
				c->transport = AGENT_TR_UNIX;
			else if (!strcmp(value, "fd"))
				c->transport = AGENT_TR_FD;
			else if (!strcmp(value, "auto"))
				c->transport = AGENT_TR_AUTO;
			else
				return bad(err, errlen,
					   "%s: not auto, virtio, vsock, unix or fd: '%s'", key,
					   value);
			return 0;
		}
	}
	return bad(err, errlen, "unknown key '%s'", key);
}

struct load_ctx {
	struct agent_config *c;
	char *err;
	size_t errlen;
	int rc;
};

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *l = user;

	if (l->rc)
		return 0;
	if (section[0] && strcmp(section, "agent") != 0) {
		l->rc = bad(l->err, l->errlen, "unknown section [%s]", section);
		return 0;
	}
	l->rc = agent_config_set(l->c, name, value, l->err, l->errlen);
	return l->rc == 0;
}

/* After libinih's pass over a copy: say where it failed, or check the cross-key rules and
 * commit.  line is ini_parse_*()'s result (0, the first bad line, or -1/-2). */
static int load_finish(struct agent_config *c, const struct agent_config *tmp,
		       const struct load_ctx *l, int line, const char *name, char *err,
		       size_t errlen)
{
	if (line != 0) {
		if (err && line > 0) {
			char why[160];

			snprintf(why, sizeof(why), "%s", l->rc ? err : "syntax error");
			snprintf(err, errlen, "%s:%d: %s", name, line, why);
		} else if (err) {
			snprintf(err, errlen, "%s: cannot parse (%d)", name, line);
		}
		return -EINVAL;
	}
	if (tmp->backoff_max_ms < tmp->backoff_min_ms) {
		if (err)
			snprintf(err, errlen, "%s: backoff_max_ms below backoff_min_ms", name);
		return -EINVAL;
	}
	*c = *tmp;
	return 0;
}

int agent_config_load(struct agent_config *c, const char *path, char *err, size_t errlen)
{
	struct agent_config tmp = *c;
	struct load_ctx l = {&tmp, err, errlen, 0};
	int line;
	FILE *f = fopen(path, "re");

	if (!f) {
		int e = errno;

		if (err)
			snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	line = ini_parse_file(f, on_ini, &l);
	fclose(f);
	return load_finish(c, &tmp, &l, line, path, err, errlen);
}

int agent_config_load_text(struct agent_config *c, const char *name, const char *text, char *err,
			   size_t errlen)
{
	struct agent_config tmp = *c;
	struct load_ctx l = {&tmp, err, errlen, 0};

	return load_finish(c, &tmp, &l, ini_parse_string(text, on_ini, &l), name, err, errlen);
}

void agent_config_dump(const struct agent_config *c, int fd)
{
	static const char *const tr[] = {"", "virtio", "vsock", "unix", "fd", "auto"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct key *k = &keys[i];
		const char *p = (const char *)c + k->off;

		switch (k->kind) {
		case K_STR:
			dprintf(fd, "%s=%s", k->name, p);
			break;
		case K_U32:
			dprintf(fd, "%s=%u", k->name, *(const uint32_t *)(const void *)p);
			break;
		case K_U64:
			dprintf(fd, "%s=%llu", k->name,
				(unsigned long long)*(const uint64_t *)(const void *)p);
			break;
		case K_BOOL:
			dprintf(fd, "%s=%s", k->name, *(const bool *)p ? "true" : "false");
			break;
		case K_DBL:
			dprintf(fd, "%s=%g", k->name, *(const double *)(const void *)p);
			break;
		case K_TRANSPORT:
			dprintf(fd, "%s=%s", k->name,
				c->transport <= AGENT_TR_AUTO ? tr[c->transport] : "?");
			break;
		}
		dprintf(fd, "\t# %s\n", k->help);
	}
}
