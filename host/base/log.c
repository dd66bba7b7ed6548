// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * log.c - memtided's log sink (see log.h).
 *
 * stderr lines carry a CLOCK_MONOTONIC timestamp in seconds and the level name, formatted
 * into one buffer and written with a single write(2) so concurrent VM threads never tear a
 * line.  syslog(3) is already line-atomic.  Lines longer than the buffer are truncated with
 * a trailing "...", never split.
 */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static enum mtd_log_level log_level = MTD_LOG_NOTICE;
static bool log_syslog;

static const char *const level_names[] = {
    [MTD_LOG_ERR] = "error", [MTD_LOG_WARNING] = "warning", [MTD_LOG_NOTICE] = "notice",
    [MTD_LOG_INFO] = "info", [MTD_LOG_DEBUG] = "debug",
};

int mtd_log_level_parse(const char *s, enum mtd_log_level *out)
{
	for (int l = MTD_LOG_ERR; l <= MTD_LOG_DEBUG; l++) {
		if (strcmp(s, level_names[l]) == 0) {
			*out = (enum mtd_log_level)l;
			return 0;
		}
	}
	if (strcmp(s, "err") == 0) {
		*out = MTD_LOG_ERR;
		return 0;
	}
	if (strcmp(s, "warn") == 0) {
		*out = MTD_LOG_WARNING;
		return 0;
	}
	return -EINVAL;
}

void mtd_log_init(enum mtd_log_level level, bool use_syslog, const char *ident)
{
	log_level = level;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void mtd_log_close(void)
{
	if (log_syslog)
		closelog();
}

bool mtd_log_enabled(enum mtd_log_level level)
{
	return level <= log_level;
}

void mtd_log(enum mtd_log_level level, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	va_list ap;
	int n;
	int saved_errno = errno;

	if (!mtd_log_enabled(level))
		return;
	if (log_syslog) {
		va_start(ap, fmt);
		vsyslog((int)level, fmt, ap);
		va_end(ap);
		errno = saved_errno;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(line, sizeof(line), "memtided[%ld.%03ld] %s: ", (long)ts.tv_sec,
		     ts.tv_nsec / 1000000L, level_names[level]);
	if (n < 0)
		n = 0;
	/* Keep one byte for the newline; vsnprintf truncates and NUL-terminates. */
	size_t cap = sizeof(line) - 1 - (size_t)n;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, cap, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + ((size_t)m < cap ? (size_t)m : cap - 1);
	if ((size_t)m >= cap)
		memcpy(line + len - 3, "...", 3);
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0) {
		/* nowhere left to report it */
	}
	errno = saved_errno;
}
