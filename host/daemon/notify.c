// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * notify.c - sd_notify(3) messages for systemd's Type=notify and WatchdogSec= (notify.h).
 *
 * Every message is one sd_notify call; with no $NOTIFY_SOCKET sd_notify returns 0 and sends
 * nothing, so memtided run by hand or by a test is unaffected.  unset_environment is 0: the
 * watchdog and status messages come later from the same process.
 */
#include "daemon/notify.h"

#include <stdarg.h>
#include <stdio.h>

#include <systemd/sd-daemon.h>

uint64_t mtd_notify_watchdog_ms(void)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return usec / 1000 ? usec / 1000 : 1;
}

static void send_status(const char *head, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void send_status(const char *head, const char *fmt, va_list ap)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%sSTATUS=", head);

	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	(void)sd_notify(0, msg);
}

void mtd_notify_ready(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	send_status("READY=1\n", fmt, ap);
	va_end(ap);
}

void mtd_notify_status(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	send_status("", fmt, ap);
	va_end(ap);
}

void mtd_notify_watchdog(void)
{
	(void)sd_notify(0, "WATCHDOG=1");
}

void mtd_notify_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1\nSTATUS=stopping: leaving every VM and disconnecting");
}
