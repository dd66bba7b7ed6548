/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cmdline.h - memtided's command line: parsed and checked apart from main(), so the unit
 * tests and tests/fuzz/fuzz_cmdline.c run the very code memtided runs.
 *
 * Order of settings: built-in defaults, then the config file, then the flags that map onto
 * config keys (--uri, --interval, --metrics-listen, ...; applied in the order given, the
 * last of a repeated flag wins).  The rest (--qmp, --agent, --name, --config, --syslog,
 * --foreground) are not config keys and are returned as they are, checked: a path too long
 * for a unix socket, an empty --name, one with a control character, or two VMs of one
 * name is an error here, never a truncation or a surprise later.
 */
#ifndef MEMTIDE_HOST_CMDLINE_H
#define MEMTIDE_HOST_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "daemon/config.h"
#include "daemon/daemon.h"

enum mtd_cmdline_action {
	MTD_CMDLINE_RUN = 0,
	MTD_CMDLINE_HELP,         /* --help or -h: print mtd_cmdline_usage(stdout), exit 0 */
	MTD_CMDLINE_VERSION,      /* --version */
	MTD_CMDLINE_CHECK_CONFIG, /* --check-config [FILE]: check the settings (FILE, else
				   * --config's or the default file, with the flags), say what
				   * is wrong as FILE:LINE, exit 0 or 1 (as nginx -t, sshd -t) */
};

/* The flags that are config keys: one slot per key. */
enum mtd_cmdline_key {
	MTD_FLAG_URI = 0,
	MTD_FLAG_INTERVAL,
	MTD_FLAG_SOURCE,
	MTD_FLAG_LOG_LEVEL,
	MTD_FLAG_METRICS_PORT,   /* [daemon] metrics_port */
	MTD_FLAG_METRICS_LISTEN, /* --metrics-listen ADDR:PORT, or --no-metrics ("off") */
	MTD_FLAG_SOCKET,
	MTD_FLAG_OBSERVE_ONLY,
	MTD_FLAG_STATE_DIR,
	MTD_FLAG_NR,
};

/* One config-key flag as given. */
struct mtd_cmdline_set {
	enum mtd_cmdline_key key;
	const char *value;
	const char *flag; /* its name without "--", for the error message */
};

/* One plain-QEMU VM: its --qmp and the --agent/--name given after it. */
struct mtd_cmdline_vm {
	const char *qmp;
	const char *agent; /* NULL: none */
	const char *name;  /* --name, else qemu, qemu2, ... (default_name) */
	char default_name[16];
};

struct mtd_cmdline {
	enum mtd_cmdline_action action;
	const char *config_path; /* --config, else the default path */
	bool config_given;       /* a missing default file means defaults; a given one must exist */
	bool use_syslog, foreground;
	/* Plain-QEMU mode: the VMs in the order of their --qmp (none: libvirt mode).  --agent
	 * and --name given before the first --qmp are the first VM's. */
	unsigned nr_vms;
	struct mtd_cmdline_vm vm[MTD_MAX_QMP_VMS];
	/* Config-key flags in the order they are applied: a repeated key keeps only its last
	 * value, in the last one's place (applying them all in order would end the same way:
	 * each key writes the same fields each time), so no flag is ever dropped for room. */
	unsigned nr_set;
	struct mtd_cmdline_set set[MTD_FLAG_NR];
};

/*
 * Parse argv (pointers into it are kept in *out; getopt may permute argv).  0, or -EINVAL
 * with one sentence in err (unknown option, missing value, stray argument, --agent without
 * --qmp, a bad --name or socket path, more than MTD_MAX_QMP_VMS VMs, two --agent or --name
 * for one VM, two VMs of one name).  Resets getopt's state first, so it may run again.
 */
int mtd_cmdline_parse(int argc, char **argv, struct mtd_cmdline *out, char *err, size_t errlen);

/* Apply the config-key flags over cfg.  0, or -EINVAL with "--flag: sentence" in err. */
int mtd_cmdline_apply(const struct mtd_cmdline *cl, struct mtd_config *cfg, char *err,
		      size_t errlen);

void mtd_cmdline_usage(FILE *f);

#endif /* MEMTIDE_HOST_CMDLINE_H */
