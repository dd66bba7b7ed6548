/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config.h - memtided's settings: built-in defaults, then memtided.conf (an INI file), then
 * the flags that map onto its keys (cmdline.h).
 *
 * A file an operator edited at 3 a.m. is untrusted text: every value goes through one
 * validator per key, which either accepts it or says in one sentence what is wrong; nothing
 * is half-applied.  The settings gather every stage's own: [controller] (decide/controller.h),
 * [host] (decide/arbiter.h), [pageout] (act/pageout_hand.h), [defaults] (base/policy.h).
 */
#ifndef MEMTIDE_HOST_CONFIG_H
#define MEMTIDE_HOST_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/pageout_hand.h"
#include "base/mtd.h"
#include "base/policy.h"
#include "daemon/state.h"
#include "decide/arbiter.h"
#include "decide/controller.h"

enum mtd_source_kind {
	MTD_SOURCE_AGENT = 0, /* live guests: per VM, the source its policy picks */
	MTD_SOURCE_SIM,       /* libvmm's simulated hardware (tests, demos) */
};

/* Daemon settings: memtided.conf, then command-line flags on top. */
#define MTD_CONFIG_MAX_KEYS 96 /* keys one file may set (every key of every section fits) */
struct mtd_config_key {
	char section[16];
	char key[32];
	uint64_t value_hash;
};

struct mtd_config {
	char uri[MTD_PATH_MAX];         /* [daemon] uri */
	char socket_path[MTD_PATH_MAX]; /* [daemon] socket */
	int metrics_port;               /* [metrics] listen's port ([daemon] metrics_port) */
	char metrics_addr[48];          /* [metrics] listen's address: numeric IPv4 or IPv6 */
	char log_level[16];             /* [daemon] log_level */
	char state_dir[MTD_PATH_MAX];   /* [daemon] state_dir: per-VM history (history.h) and
					 * state across restarts (state.h) */
	bool observe_only;              /* [daemon] observe_only: compute, show, change nothing */
	enum mtd_source_kind source;    /* [daemon] source = live | sim */
	char ept_dir[MTD_PATH_MAX];     /* [daemon] ept_dir: the ept plugin's table files */
	char run_dir[MTD_PATH_MAX];     /* memtided's own runtime files (DAMON's claim):
					 * /run/memtide (not a key: follows state_dir) */
	char young_dump_dir[MTD_PATH_MAX]; /* [daemon] young_dump_dir: "" off (diagnostic) */
	unsigned sim_hot_percent;          /* [sim] hot_percent: share of RAM the sim touches */
	unsigned stats_period_s;           /* [daemon] stats_period: balloon stats polling, s */
	char domains[MTD_PATH_MAX];        /* [daemon] domains: libvirt mode manages only domains
					    * whose name matches this glob (fnmatch; "*": all) */
	uint64_t call_timeout_ms;          /* [daemon] call_timeout: one QMP or libvirt call of a
					    * VM at most this long, then the VM's peer is
					    * unresponsive */
	struct mtd_ctl_config ctl;         /* [controller] */
	struct mtd_arbiter_config arb;     /* [host] */
	uint64_t arbiter_interval_ms;      /* [host] interval */
	char meminfo_path[MTD_PATH_MAX];   /* [host] meminfo: the host's /proc/meminfo (tests
					  * and containers point it at another file) */
	char vsock_dir[108];               /* [daemon] vsock_dir: QEMUs' vhost-user-vsock sockets
					  * (libvirt mode; "none": no vsock service) */
	uint64_t vsock_cid;                /* [daemon] vsock_cid: the guests' CID (3) */
	uint32_t vsock_port;               /* [daemon] vsock_port: the agent's port (5253) */
	int kernel_vsock;                  /* [daemon] kernel_vsock: listen on AF_VSOCK for the
					  * agents of VMs with the kernel's vsock device: 1 yes,
					  * 0 no, -1 auto (when the host has /dev/vhost-vsock) */
	uint64_t agent_ping_ms;            /* [daemon] agent_ping: ping the agent this often (10 s;
					  * 0: never) */
	struct mtd_policy defaults;        /* [defaults]: per-domain policy unless metadata says */
	struct mtd_pageout_config pageout; /* [pageout]: host-side eviction (pageout_hand.h) */
	/* What the file set, key by key (a hash of each value): a reload compares the new
	 * file's with these to say which settings changed, and which of them need a restart. */
	struct mtd_config_key file_keys[MTD_CONFIG_MAX_KEYS];
	unsigned nr_file_keys;
};

/*
 * A memtided with a state directory of its own (not /var/lib/memtide: a try-out beside the
 * host's memtided) keeps off the host's /run/memtide: ept_dir, vsock_dir and run_dir follow
 * state_dir (STATE/ept, STATE/vsock, STATE) unless the file sets them.  A vsock_dir too long
 * for a socket path turns the vsock service off.  Returns 1 with a sentence for the log in
 * said when it moved anything, else 0.
 */
int mtd_config_follow_state_dir(struct mtd_config *cfg, char *said, size_t saidlen);

/*
 * The settings that differ between two files' keys (set in one and not the other, or set to
 * another value), "[section] key" each, comma-separated, into out; live picks the keys a
 * reload applies ([defaults], and [host] low_mark, high_mark, settle, release_rate), !live
 * the others (read once, at start).  out may end up "".
 */
void mtd_config_changed(const struct mtd_config_key *old, unsigned nold,
			const struct mtd_config_key *n, unsigned nn, bool live, char *out,
			size_t outlen);
/* Whether a reload applies [section] key (see mtd_config_changed). */
bool mtd_config_key_is_live(const char *section, const char *key);

void mtd_config_default(struct mtd_config *cfg);

/* Checks across keys, after the file and the flags: [host] low_mark <= high_mark when both
 * are given, and the [defaults] policy's own (min <= max).  0 or -EINVAL with a sentence. */
int mtd_config_validate(const struct mtd_config *cfg, char *err, size_t errlen);

/* Parse a metrics listen address, "ADDR:PORT" with ADDR a numeric IPv4 address or an IPv6
 * one in brackets ("[::1]:9848"), or "off".  addr gets ADDR without brackets ("" for off),
 * *port the port (0 for off).  0 or -EINVAL. */
int mtd_parse_listen(const char *s, char *addr, size_t addrlen, int *port);

/*
 * Read an INI file over cfg.  missing_ok: a missing file is not an error (the default
 * path).  Returns 0, or -errno / -EINVAL with "FILE:LINE: sentence" in err.  Unknown
 * sections and keys are errors (a typo must not silently fall back to a default), and so is
 * a key given twice in a section, or a section given twice: the error names both lines
 * (which one was meant is the operator's to say, not a last-wins rule's).
 */
int mtd_config_load(struct mtd_config *cfg, const char *path, bool missing_ok, char *err,
		    size_t errlen);

/* The same over text already in memory (name is what err calls it).  0 or -EINVAL. */
int mtd_config_load_text(struct mtd_config *cfg, const char *name, const char *text, char *err,
			 size_t errlen);

/* Set one [section] key from text (also used for command-line flags).  0 or -EINVAL. */
int mtd_config_set(struct mtd_config *cfg, const char *section, const char *key, const char *value,
		   char *err, size_t errlen);

#endif /* MEMTIDE_HOST_CONFIG_H */
