// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_log.c - memtide-agent's log: one line per event on stderr, with a level.
 *
 * The agent runs in guests that may have no syslog (a busybox initramfs), so it writes to
 * stderr and lets the init system (or --log-file in main.c, which points stderr at a file)
 * decide where that goes.  Each line: "memtide-agent[pid]: LEVEL: message".
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "agent.h"

static int log_level = AGENT_INFO;
static const char *log_ident = "memtide-agent";

void agent_log_init(int level, const char *ident)
{
	log_level = level;
	if (ident)
		log_ident = ident;
}

void agent_log(int level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char line[512];
	va_list ap;
	int n;

	if (level > log_level)
		return;
	n = snprintf(line, sizeof(line), "%s[%d]: %s: ", log_ident, (int)getpid(),
		     names[level < 0   ? 0
			   : level > 3 ? 3
				       : level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one write(2) per line, so lines from a daemon and its parent do not interleave */
	dprintf(STDERR_FILENO, "%s\n", line);
}
