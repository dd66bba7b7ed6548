/*
 * cmdline.h - memtided's command line: parsed and checked apart from main(), so the unit
 * tests and tests/fuzz/fuzz_cmdline.c run the very code memtided runs.
 *
 * Order of settings: built-in defaults, then the config file, then the flags that map onto
 * config keys (--uri, --interval, ...; the last of a repeated flag wins).  The rest
 * (--qmp, --agent, --name, --config, --syslog, --foreground) are not config keys and are
 * returned as they are, checked: a path too long for a unix socket, an empty --name, or
 * one with a control character is an error here, never a truncation later.
 */
#ifndef MEMTIDE_HOST_CMDLINE_H
#define MEMTIDE_HOST_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "policy.h"

enum mtd_cmdline_action {
	MTD_CMDLINE_RUN = 0,
	MTD_CMDLINE_HELP,    /* --help or -h: print mtd_cmdline_usage(stdout), exit 0 */
	MTD_CMDLINE_VERSION, /* --version */
};

/* The flags that are config keys, in the order they are applied. */
enum mtd_cmdline_key {
	MTD_FLAG_URI = 0,
	MTD_FLAG_INTERVAL,
	MTD_FLAG_SOURCE,
	MTD_FLAG_LOG_LEVEL,
	MTD_FLAG_METRICS_PORT, /* --metrics-port N, or --no-metrics ("0") */
	MTD_FLAG_SOCKET,
	MTD_FLAG_NR,
};

struct mtd_cmdline {
	enum mtd_cmdline_action action;
	const char *config_path; /* --config, else the default path */
	bool config_given;       /* a missing default file means defaults; a given one must exist */
	const char *qmp;         /* plain-QEMU mode: QMP socket (NULL: libvirt mode) */
	const char *agent;       /* plain-QEMU mode: agent socket (NULL: none) */
	const char *name;        /* plain-QEMU mode: the VM's name ("qemu") */
	bool use_syslog, foreground;
	const char *set[MTD_FLAG_NR]; /* config-key flags given (NULL: not given) */
};

/*
 * Parse argv (pointers into it are kept in *out; getopt may permute argv).  0, or -EINVAL
 * with one sentence in err (unknown option, missing value, stray argument, --agent without
 * --qmp, a bad --name or socket path).  Resets getopt's state first, so it may run again.
 */
int mtd_cmdline_parse(int argc, char **argv, struct mtd_cmdline *out, char *err, size_t errlen);

/* Apply the config-key flags over cfg.  0, or -EINVAL with "--flag: sentence" in err. */
int mtd_cmdline_apply(const struct mtd_cmdline *cl, struct mtd_config *cfg, char *err,
		      size_t errlen);

void mtd_cmdline_usage(FILE *f);

#endif /* MEMTIDE_HOST_CMDLINE_H */
