// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config.c - memtided's settings (config.h): built-in defaults, memtided.conf (INI,
 * libinih) and the flags that map onto its keys.
 *
 * Layout: one setter per section, each key with one parser that validates before it
 * writes, so a rejected value never reaches the live settings; the INI handler works on a
 * copy and commits it only when every key passed and the cross-key checks hold.  [defaults]
 * is the per-domain policy's keys (base/policy.c); [pageout] is host-side eviction's
 * (act/pageout_hand.c).
 */
#include "daemon/config.h"

#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "access/ept_file.h"
#include "base/parse.h"
#include "vsock/vsock_service.h"

#define MiB ((uint64_t)1 << 20)

void mtd_config_default(struct mtd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->uri, sizeof(cfg->uri), "qemu:///system");
	snprintf(cfg->socket_path, sizeof(cfg->socket_path), "/run/memtide/memtided.sock");
	snprintf(cfg->log_level, sizeof(cfg->log_level), "notice");
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "/var/lib/memtide");
	cfg->metrics_port = 9848;
	snprintf(cfg->metrics_addr, sizeof(cfg->metrics_addr), "127.0.0.1");
	cfg->source = MTD_SOURCE_AGENT;
	snprintf(cfg->ept_dir, sizeof(cfg->ept_dir), "%s", MTD_EPT_DIR_DEFAULT);
	snprintf(cfg->run_dir, sizeof(cfg->run_dir), "/run/memtide");
	cfg->sim_hot_percent = 25;
	cfg->stats_period_s = 2;
	cfg->call_timeout_ms = 5000;
	snprintf(cfg->domains, sizeof(cfg->domains), "*");
	mtd_ctl_config_default(&cfg->ctl);
	cfg->arbiter_interval_ms = 2000;
	cfg->arb.settle_ms = 10000;
	cfg->arb.release_rate_bytes_per_s = 128 * MiB;
	snprintf(cfg->meminfo_path, sizeof(cfg->meminfo_path), "/proc/meminfo");
	mtd_policy_default(&cfg->defaults);
	snprintf(cfg->vsock_dir, sizeof(cfg->vsock_dir), "%s", MTD_VSOCK_DIR);
	cfg->vsock_cid = VSOCK_DEFAULT_CID;
	cfg->vsock_port = VSOCK_DEFAULT_PORT;
	cfg->kernel_vsock = -1;
	cfg->agent_ping_ms = 10000;
	mtd_pageout_config_default(&cfg->pageout);
}

static int set_str(char *dst, size_t len, const char *v, const char *key, char *err, size_t errlen)
{
	if (!*v || strlen(v) >= len) {
		snprintf(err, errlen, "%s must be 1..%zu characters", key, len - 1);
		return -EINVAL;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int bad(char *err, size_t errlen, const char *key, const char *what, const char *v)
{
	snprintf(err, errlen, "%s must be %s, not '%.32s'", key, what, v);
	return -EINVAL;
}

static int set_daemon(struct mtd_config *c, const char *k, const char *v, char *err, size_t errlen)
{
	unsigned u;

	if (!strcmp(k, "uri"))
		return set_str(c->uri, sizeof(c->uri), v, k, err, errlen);
	if (!strcmp(k, "socket"))
		return set_str(c->socket_path, sizeof(c->socket_path), v, k, err, errlen);
	if (!strcmp(k, "observe_only"))
		return mtd_parse_bool(v, &c->observe_only) < 0 ? bad(err, errlen, k, "yes or no", v)
							       : 0;
	if (!strcmp(k, "log_level")) {
		static const char *const levels[] = {"error", "warning", "notice", "info", "debug"};
		bool known = false;
		for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
			known = known || strcmp(v, levels[i]) == 0;
		if (!known)
			return bad(err, errlen, k, "error, warning, notice, info or debug", v);
		return set_str(c->log_level, sizeof(c->log_level), v, k, err, errlen);
	}
	if (!strcmp(k, "metrics_port")) {
		if (mtd_parse_uint(v, 65535, &u) < 0)
			return bad(err, errlen, k, "a TCP port 1..65535 (0: off)", v);
		c->metrics_port = (int)u;
		return 0;
	}
	if (!strcmp(k, "interval"))
		return mtd_parse_ms(v, &c->ctl.interval_ms) < 0
			   ? bad(err, errlen, k, "a duration such as 5s", v)
			   : 0;
	if (!strcmp(k, "domains"))
		return set_str(c->domains, sizeof(c->domains), v, k, err, errlen);
	if (!strcmp(k, "call_timeout")) {
		uint64_t ms;
		if (mtd_parse_ms(v, &ms) < 0 || ms < 100 || ms > 600000)
			return bad(err, errlen, k, "a duration from 100ms to 10min", v);
		c->call_timeout_ms = ms;
		return 0;
	}
	if (!strcmp(k, "stats_period")) {
		if (mtd_parse_uint(v, 3600, &u) < 0 || u == 0)
			return bad(err, errlen, k, "seconds 1..3600", v);
		c->stats_period_s = u;
		return 0;
	}
	if (!strcmp(k, "vsock_dir")) {
		if (strcmp(v, "none") != 0 && v[0] != '/')
			return bad(err, errlen, k, "an absolute directory, or none", v);
		return set_str(c->vsock_dir, sizeof(c->vsock_dir), v, k, err, errlen);
	}
	if (!strcmp(k, "vsock_cid")) {
		/* 0-2 are the hypervisor's, the local and the host's addresses; -1 is "any" */
		if (mtd_parse_uint(v, UINT32_MAX - 1, &u) < 0 || u < 3)
			return bad(err, errlen, k, "a guest CID 3..4294967294", v);
		c->vsock_cid = u;
		return 0;
	}
	if (!strcmp(k, "vsock_port")) {
		if (mtd_parse_uint(v, UINT32_MAX - 1, &u) < 0 || u == 0)
			return bad(err, errlen, k, "a port 1..4294967294", v);
		c->vsock_port = u;
		return 0;
	}
	if (!strcmp(k, "kernel_vsock")) {
		bool on;
		if (!strcmp(v, "auto"))
			c->kernel_vsock = -1;
		else if (mtd_parse_bool(v, &on) == 0)
			c->kernel_vsock = on;
		else
			return bad(err, errlen, k, "auto, yes or no", v);
		return 0;
	}
	if (!strcmp(k, "agent_ping"))
		return mtd_parse_ms(v, &c->agent_ping_ms) < 0
			   ? bad(err, errlen, k, "a duration such as 10s (0: never)", v)
			   : 0;
	if (!strcmp(k, "state_dir")) {
		/* Absolute: memtided runs from / as a daemon, and a relative path would land
		 * wherever it was started from. */
		if (v[0] != '/' || strlen(v) + 1 + MTD_STATE_NAME_MAX >= sizeof(c->state_dir))
			return bad(err, errlen, k,
				   "an absolute directory path of at most 180 bytes", v);
		return set_str(c->state_dir, sizeof(c->state_dir), v, k, err, errlen);
	}
	if (!strcmp(k, "source")) {
		/* live: each VM's source as its policy says (auto by default); "agent" is the
		 * older name of the same thing */
		if (!strcmp(v, "live") || !strcmp(v, "agent"))
			c->source = MTD_SOURCE_AGENT;
		else if (!strcmp(v, "sim"))
			c->source = MTD_SOURCE_SIM;
		else
			return bad(err, errlen, k, "live or sim", v);
		return 0;
	}
	if (!strcmp(k, "ept_dir"))
		return set_str(c->ept_dir, sizeof(c->ept_dir), v, k, err, errlen);
	if (!strcmp(k, "young_dump_dir"))
		return set_str(c->young_dump_dir, sizeof(c->young_dump_dir), v, k, err, errlen);
	snprintf(err, errlen, "unknown key '%.32s' in [daemon]", k);
	return -EINVAL;
}

int mtd_parse_listen(const char *s, char *addr, size_t addrlen, int *port)
{
	char host[64];
	const char *colon;
	unsigned char sa[sizeof(struct in6_addr)];
	unsigned p;
	size_t n;
	bool v6 = false;

	if (!strcmp(s, "off") || !strcmp(s, "0")) {
		snprintf(addr, addrlen, "%s", "");
		*port = 0;
		return 0;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return -EINVAL;
		n = (size_t)(close - s - 1);
		if (n >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, n);
		host[n] = 0;
		colon = close + 1;
		v6 = true;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host))
			return -EINVAL;
		n = (size_t)(colon - s);
		memcpy(host, s, n);
		host[n] = 0;
	}
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, sa) != 1)
		return -EINVAL;
	if (mtd_parse_uint(colon + 1, 65535, &p) < 0 || p == 0 || strlen(host) >= addrlen)
		return -EINVAL;
	snprintf(addr, addrlen, "%s", host);
	*port = (int)p;
	return 0;
}

static int set_metrics(struct mtd_config *c, const char *k, const char *v, char *err, size_t errlen)
{
	if (!strcmp(k, "listen")) {
		if (mtd_parse_listen(v, c->metrics_addr, sizeof(c->metrics_addr),
				     &c->metrics_port) < 0)
			return bad(err, errlen, k,
				   "ADDRESS:PORT such as 127.0.0.1:9848, [::1]:9848 or "
				   "0.0.0.0:9848, or off",
				   v);
		return 0;
	}
	snprintf(err, errlen, "unknown key '%.32s' in [metrics]", k);
	return -EINVAL;
}

static int set_controller(struct mtd_ctl_config *c, const char *k, const char *v, char *err,
			  size_t errlen)
{
	uint64_t *bytes = NULL, *ms = NULL;

	if (!strcmp(k, "max_inflate_step"))
		bytes = &c->max_inflate_step_bytes;
	else if (!strcmp(k, "deflate_min"))
		bytes = &c->deflate_min_bytes;
	else if (!strcmp(k, "mem_available_low"))
		bytes = &c->mem_available_low_bytes;
	else if (!strcmp(k, "min_change"))
		bytes = &c->min_change_bytes;
	else if (!strcmp(k, "agent_silence"))
		ms = &c->agent_silence_ms;
	else if (!strcmp(k, "hold_after_deflate"))
		ms = &c->hold_after_deflate_ms;
	else if (!strcmp(k, "hold_max"))
		ms = &c->hold_max_ms;
	else if (!strcmp(k, "psi_some_avg10_high")) {
		if (mtd_parse_double(v, 0.01, 100.0, &c->psi_some_avg10_high) < 0)
			return bad(err, errlen, k, "a percentage in (0, 100]", v);
		return 0;
	} else if (!strcmp(k, "major_faults_high")) {
		if (mtd_parse_double(v, 1.0, 1e9, &c->major_faults_high_per_s) < 0)
			return bad(err, errlen, k, "major faults per second, 1..1e9", v);
		return 0;
	} else {
		snprintf(err, errlen, "unknown key '%.32s' in [controller]", k);
		return -EINVAL;
	}
	if (bytes && mtd_parse_bytes(v, bytes) < 0)
		return bad(err, errlen, k, "a size such as 128M", v);
	if (ms && mtd_parse_ms(v, ms) < 0)
		return bad(err, errlen, k, "a duration such as 30s", v);
	return 0;
}

int mtd_config_set(struct mtd_config *cfg, const char *section, const char *key, const char *value,
		   char *err, size_t errlen)
{
	if (!strcmp(section, "daemon"))
		return set_daemon(cfg, key, value, err, errlen);
	if (!strcmp(section, "metrics"))
		return set_metrics(cfg, key, value, err, errlen);
	if (!strcmp(section, "controller"))
		return set_controller(&cfg->ctl, key, value, err, errlen);
	if (!strcmp(section, "defaults"))
		return mtd_policy_set_kv(&cfg->defaults, key, value, err, errlen);
	if (!strcmp(section, "pageout"))
		return mtd_pageout_config_set(&cfg->pageout, key, value, err, errlen);
	if (!strcmp(section, "host")) {
		if (!strcmp(key, "low_mark"))
			return mtd_parse_bytes(value, &cfg->arb.low_mark_bytes) < 0
				   ? bad(err, errlen, key, "a size such as 2G (0: 5% of RAM)",
					 value)
				   : 0;
		if (!strcmp(key, "high_mark"))
			return mtd_parse_bytes(value, &cfg->arb.high_mark_bytes) < 0
				   ? bad(err, errlen, key, "a size (0: twice the low mark)", value)
				   : 0;
		if (!strcmp(key, "settle"))
			return mtd_parse_ms(value, &cfg->arb.settle_ms) < 0
				   ? bad(err, errlen, key, "a duration such as 10s", value)
				   : 0;
		if (!strcmp(key, "release_rate"))
			return mtd_parse_bytes(value, &cfg->arb.release_rate_bytes_per_s) < 0 ||
				       cfg->arb.release_rate_bytes_per_s < MiB
				   ? bad(err, errlen, key,
					 "a size per second of at least 1M, such as 128M", value)
				   : 0;
		if (!strcmp(key, "meminfo"))
			return set_str(cfg->meminfo_path, sizeof(cfg->meminfo_path), value, key,
				       err, errlen);
		if (!strcmp(key, "interval"))
			return mtd_parse_ms(value, &cfg->arbiter_interval_ms) < 0 ||
				       cfg->arbiter_interval_ms < 100
				   ? bad(err, errlen, key, "a duration of at least 100ms", value)
				   : 0;
		snprintf(err, errlen, "unknown key '%.32s' in [host]", key);
		return -EINVAL;
	}
	if (!strcmp(section, "sim")) {
		if (!strcmp(key, "hot_percent"))
			return mtd_parse_uint(value, 100, &cfg->sim_hot_percent) < 0
				   ? bad(err, errlen, key, "a percentage 0..100", value)
				   : 0;
		snprintf(err, errlen, "unknown key '%.32s' in [sim]", key);
		return -EINVAL;
	}
	snprintf(err, errlen,
		 "unknown section [%.32s] (daemon, metrics, controller, host, defaults, "
		 "pageout, sim)",
		 section);
	return -EINVAL;
}

int mtd_config_validate(const struct mtd_config *cfg, char *err, size_t errlen)
{
	const struct mtd_arbiter_config *a = &cfg->arb;

	/* Pressure starts under the low mark and ends over the high mark: a high mark under
	 * the low one would end pressure before it began.  With either left at 0 the other is
	 * derived from it (arbiter.c), so only two explicit marks can disagree. */
	if (a->low_mark_bytes && a->high_mark_bytes && a->low_mark_bytes > a->high_mark_bytes) {
		snprintf(err, errlen,
			 "[host] low_mark (%" PRIu64 " MiB) is above high_mark (%" PRIu64
			 " MiB): pressure starts under low_mark and ends over high_mark",
			 a->low_mark_bytes / MiB, a->high_mark_bytes / MiB);
		return -EINVAL;
	}
	return mtd_policy_validate(&cfg->defaults, err, errlen);
}

/*
 * One pass of libinih over a file or a text.  libinih tells its handler neither the line
 * nor where a section starts, so it reads through reader() here, which counts lines and
 * notes each "[section]" line as it goes by: the handler then knows the line of every key,
 * and a key or section given twice is an error naming both lines.
 */
#define MAX_SECTIONS 16
struct ini_ctx {
	struct mtd_config *cfg;
	char err[200];
	int failed;
	int errline;   /* the line of the error, when it is ours, not libinih's */
	int line;      /* lines read so far; the one being parsed */
	bool at_start; /* the next chunk read starts a line (libinih reads long lines in parts) */
	bool indented; /* the line being parsed starts with a blank: libinih takes it as more of
			* the value above (its multi-line values) */
	FILE *f;       /* a file, or the text below */
	const char *text;
	int key_line[MTD_CONFIG_MAX_KEYS];
	struct {
		char name[16];
		int line;
	} sec[MAX_SECTIONS];
	unsigned nsec;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* A "[name]" line (libinih's own trimming: leading blanks, then '[' ... ']'). */
static void note_section(struct ini_ctx *c, const char *line)
{
	const char *p = line, *end;
	size_t n;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '[' || !(end = strchr(p, ']')))
		return;
	n = (size_t)(end - p - 1);
	for (unsigned i = 0; i < c->nsec; i++)
		if (strlen(c->sec[i].name) == n && !strncmp(c->sec[i].name, p + 1, n)) {
			if (!c->failed) {
				snprintf(c->err, sizeof(c->err),
					 "section [%.*s] is given twice, here and at line %d: "
					 "give each section once",
					 (int)(n < 32 ? n : 32), p + 1, c->sec[i].line);
				c->failed = 1;
				c->errline = c->line;
			}
			return;
		}
	if (c->nsec < MAX_SECTIONS && n < sizeof(c->sec[0].name)) {
		memcpy(c->sec[c->nsec].name, p + 1, n);
		c->sec[c->nsec].name[n] = '\0';
		c->sec[c->nsec++].line = c->line;
	}
}

static char *reader(char *str, int num, void *stream)
{
	struct ini_ctx *c = stream;
	char *got;

	if (c->f) {
		got = fgets(str, num, c->f);
	} else {
		/* ini_parse_string's reader, with the same contract as fgets */
		const char *nl;
		size_t n;

		if (!c->text || !*c->text || num < 2)
			return NULL;
		nl = strchr(c->text, '\n');
		n = nl ? (size_t)(nl - c->text) + 1 : strlen(c->text);
		if (n > (size_t)num - 1)
			n = (size_t)num - 1;
		memcpy(str, c->text, n);
		str[n] = '\0';
		c->text += n;
		got = str;
	}
	if (!got)
		return NULL;
	if (c->at_start) {
		c->line++;
		c->indented = got[0] == ' ' || got[0] == '\t';
		note_section(c, got);
	}
	c->at_start = strchr(got, '\n') != NULL;
	return got;
}

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct ini_ctx *c = user;
	struct mtd_config *cfg = c->cfg;

	if (c->failed)
		return 1; /* keep the first error only */
	for (unsigned i = 0; i < cfg->nr_file_keys; i++) {
		const struct mtd_config_key *k = &cfg->file_keys[i];

		if (!strcmp(k->section, section) && !strcmp(k->key, name)) {
			if (c->indented)
				snprintf(
				    c->err, sizeof(c->err),
				    "an indented line continues '%.32s' of line %d: a value is "
				    "one line (unindent it, or make it a comment)",
				    name, c->key_line[i]);
			else
				snprintf(c->err, sizeof(c->err),
					 "'%.32s' in [%.16s] is given twice, here and at line %d: "
					 "give each key once",
					 name, section, c->key_line[i]);
			c->failed = 1;
			c->errline = c->line;
			return 1;
		}
	}
	if (mtd_config_set(cfg, section, name, value, c->err, sizeof(c->err)) < 0) {
		c->failed = 1;
		c->errline = c->line;
		return 1;
	}
	/* Every key that mtd_config_set took fits (sections and keys are known and short). */
	if (cfg->nr_file_keys < MTD_CONFIG_MAX_KEYS &&
	    strlen(section) < sizeof(cfg->file_keys[0].section) &&
	    strlen(name) < sizeof(cfg->file_keys[0].key)) {
		struct mtd_config_key *k = &cfg->file_keys[cfg->nr_file_keys];

		snprintf(k->section, sizeof(k->section), "%s", section);
		snprintf(k->key, sizeof(k->key), "%s", name);
		k->value_hash = hash_str(value);
		c->key_line[cfg->nr_file_keys++] = c->line;
	}
	return 1;
}

/* After libinih's pass over a copy: say where it failed, or check the cross-key rules and
 * commit.  line is ini_parse_stream()'s result (0, the first line it could not read as
 * INI, or -1/-2). */
static int config_finish(struct mtd_config *cfg, struct mtd_config *n, struct ini_ctx *c, int line,
			 const char *name, char *err, size_t errlen)
{
	if (c->failed) {
		snprintf(err, errlen, "%s:%d: %s", name, c->errline, c->err);
		return -EINVAL;
	}
	if (line != 0) {
		if (line > 0)
			snprintf(err, errlen, "%s:%d: not an INI line (key = value or [section])",
				 name, line);
		else
			snprintf(err, errlen, "%s: cannot be read (%s)", name,
				 line == -2 ? "out of memory" : "I/O error");
		return -EINVAL;
	}
	if (mtd_ctl_config_validate(&n->ctl, c->err, sizeof(c->err)) < 0 ||
	    mtd_config_validate(n, c->err, sizeof(c->err)) < 0) {
		snprintf(err, errlen, "%s: %s", name, c->err);
		return -EINVAL;
	}
	*cfg = *n;
	return 0;
}

static int config_parse(struct mtd_config *cfg, FILE *f, const char *text, const char *name,
			char *err, size_t errlen)
{
	struct mtd_config *n = malloc(sizeof(*n));
	struct ini_ctx *c = calloc(1, sizeof(*c));
	int rc;

	if (!n || !c) {
		free(n);
		free(c);
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	*n = *cfg;
	n->nr_file_keys = 0; /* this file's keys only */
	c->cfg = n;
	c->f = f;
	c->text = text;
	c->at_start = true;
	rc = config_finish(cfg, n, c, ini_parse_stream(reader, c, ini_cb, c), name, err, errlen);
	free(n);
	free(c);
	return rc;
}

static bool file_sets(const struct mtd_config *cfg, const char *section, const char *key)
{
	for (unsigned i = 0; i < cfg->nr_file_keys; i++)
		if (!strcmp(cfg->file_keys[i].section, section) &&
		    !strcmp(cfg->file_keys[i].key, key))
			return true;
	return false;
}

int mtd_config_follow_state_dir(struct mtd_config *cfg, char *said, size_t saidlen)
{
	struct mtd_config def;
	char vsock[MTD_PATH_MAX + 8];
	bool ept, vs;

	said[0] = '\0';
	mtd_config_default(&def);
	if (!strcmp(cfg->state_dir, def.state_dir))
		return 0;
	ept = !file_sets(cfg, "daemon", "ept_dir") && !strcmp(cfg->ept_dir, def.ept_dir);
	vs = !file_sets(cfg, "daemon", "vsock_dir") && !strcmp(cfg->vsock_dir, def.vsock_dir);
	snprintf(cfg->run_dir, sizeof(cfg->run_dir), "%s", cfg->state_dir);
	if (ept)
		snprintf(cfg->ept_dir, sizeof(cfg->ept_dir), "%.200s/ept", cfg->state_dir);
	snprintf(vsock, sizeof(vsock), "%s/vsock", cfg->state_dir);
	if (vs && strlen(vsock) < sizeof(cfg->vsock_dir))
		memcpy(cfg->vsock_dir, vsock, strlen(vsock) + 1); /* fits: checked just above */
	else if (vs)
		snprintf(cfg->vsock_dir, sizeof(cfg->vsock_dir), "none");
	snprintf(said, saidlen,
		 "a state directory of its own (%.100s): DAMON's claim%s%s%s%s follow it, so "
		 "nothing of the host's /run/memtide is touched%s",
		 cfg->state_dir, ept ? ", ept_dir " : "", ept ? cfg->ept_dir : "",
		 vs ? ", vsock_dir " : "", vs ? cfg->vsock_dir : "",
		 vs && !strcmp(cfg->vsock_dir, "none")
		     ? " (STATE/vsock is too long for a socket path: no vsock service; set "
		       "[daemon] vsock_dir)"
		     : " (set [daemon] ept_dir or vsock_dir to share the host's)");
	return 1;
}

bool mtd_config_key_is_live(const char *section, const char *key)
{
	if (!strcmp(section, "defaults"))
		return true;
	return !strcmp(section, "host") && (!strcmp(key, "low_mark") || !strcmp(key, "high_mark") ||
					    !strcmp(key, "settle") || !strcmp(key, "release_rate"));
}

static void add_name(char *buf, size_t len, const struct mtd_config_key *k)
{
	size_t used = strlen(buf);

	snprintf(buf + used, len - used, "%s[%s] %s", used ? ", " : "", k->section, k->key);
}

/* Whether keys hold k's key, and with k's value. */
static bool find_key(const struct mtd_config_key *keys, unsigned nr, const struct mtd_config_key *k,
		     bool *same)
{
	for (unsigned i = 0; i < nr; i++)
		if (!strcmp(keys[i].section, k->section) && !strcmp(keys[i].key, k->key)) {
			*same = keys[i].value_hash == k->value_hash;
			return true;
		}
	return false;
}

void mtd_config_changed(const struct mtd_config_key *old, unsigned nold,
			const struct mtd_config_key *n, unsigned nn, bool live, char *out,
			size_t outlen)
{
	out[0] = '\0';
	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: the new file's keys, set or changed; pass 1: the old file's, dropped */
		const struct mtd_config_key *from = pass ? old : n, *other = pass ? n : old;
		unsigned nfrom = pass ? nold : nn, nother = pass ? nn : nold;

		for (unsigned i = 0; i < nfrom; i++) {
			bool same = false;

			if (find_key(other, nother, &from[i], &same) && (same || pass))
				continue;
			if (mtd_config_key_is_live(from[i].section, from[i].key) == live)
				add_name(out, outlen, &from[i]);
		}
	}
}

int mtd_config_load(struct mtd_config *cfg, const char *path, bool missing_ok, char *err,
		    size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct stat sb;
	int rc;

	if (!f) {
		int e = errno;
		if (e == ENOENT && missing_ok)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	/* fopen() opens a directory for reading, and libinih then reads no line from it: a
	 * directory would pass for an empty file and leave every default in force. */
	if (fstat(fileno(f), &sb) < 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: %s, not a config file (give the file itself)", path,
			 S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
		fclose(f);
		return -EISDIR;
	}
	rc = config_parse(cfg, f, NULL, path, err, errlen);
	fclose(f);
	return rc;
}

int mtd_config_load_text(struct mtd_config *cfg, const char *name, const char *text, char *err,
			 size_t errlen)
{
	return config_parse(cfg, NULL, text, name, err, errlen);
}
