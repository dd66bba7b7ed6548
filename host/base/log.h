/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.h - memtided's logging: levels, stderr or syslog.
 *
 * One process-wide sink, set once at start-up (mtd_log_init) before any thread starts, then
 * read-only; mtd_log() itself is thread-safe (one write(2)/syslog(3) per line, so lines from
 * different VM threads never interleave).  The default level is NOTICE: events an operator
 * wants at 3 a.m. (VM attached, detached, deflated on pressure, errors) and nothing per
 * interval or per page; INFO adds per-action lines, DEBUG per-interval figures.
 */
#ifndef MEMTIDE_HOST_LOG_H
#define MEMTIDE_HOST_LOG_H

#include <stdbool.h>

/* Values follow syslog's priorities so they pass straight through. */
enum mtd_log_level {
	MTD_LOG_ERR = 3,
	MTD_LOG_WARNING = 4,
	MTD_LOG_NOTICE = 5,
	MTD_LOG_INFO = 6,
	MTD_LOG_DEBUG = 7,
};

/* Parse "error", "warning", "notice", "info", "debug".  Returns 0 or -EINVAL. */
int mtd_log_level_parse(const char *s, enum mtd_log_level *out);
/* Set the level and the sink (syslog with ident, or stderr).  Call before threads start. */
void mtd_log_init(enum mtd_log_level level, bool use_syslog, const char *ident);
void mtd_log_close(void);
bool mtd_log_enabled(enum mtd_log_level level);

void mtd_log(enum mtd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define mtd_err(...)    mtd_log(MTD_LOG_ERR, __VA_ARGS__)
#define mtd_warn(...)   mtd_log(MTD_LOG_WARNING, __VA_ARGS__)
#define mtd_notice(...) mtd_log(MTD_LOG_NOTICE, __VA_ARGS__)
#define mtd_info(...)   mtd_log(MTD_LOG_INFO, __VA_ARGS__)
#define mtd_debug(...)  mtd_log(MTD_LOG_DEBUG, __VA_ARGS__)

#endif /* MEMTIDE_HOST_LOG_H */
