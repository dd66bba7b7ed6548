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
#include <time.h>

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

/* The status READY=1 came with: a reload ends with it again. */
static char ready_status[200];

void mtd_notify_ready(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ready_status, sizeof(ready_status), fmt, ap);
	va_end(ap);
	mtd_notify_reloaded();
}

void mtd_notify_reloading(const char *config_path)
{
	struct timespec ts;
	char msg[400];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading %s",
		 (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000,
		 config_path);
	(void)sd_notify(0, msg);
}

void mtd_notify_reloaded(void)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", ready_status);
	(void)sd_notify(0, msg);
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
