/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * notify.h - memtided's word to its service manager: readiness, the watchdog, status, stop.
 *
 * Under systemd (Type=notify, WatchdogSec=) these are sd_notify(3) messages on the socket
 * systemd names in $NOTIFY_SOCKET; elsewhere (a terminal, a test, another init) every call is
 * a no-op.  libsystemd's sd_notify is used rather than the datagram protocol written out by
 * hand: it is on every Debian system already (libsystemd0 is required by systemd itself and
 * by libvirt's daemons) and it handles the abstract-socket and credential details.
 */
#ifndef MEMTIDE_HOST_NOTIFY_H
#define MEMTIDE_HOST_NOTIFY_H

#include <stdint.h>

/* The watchdog period systemd asked for (WatchdogSec=), in ms; 0 when none.  memtided pings
 * at half of it from its main loop, so a main thread wedged for that long is restarted. */
uint64_t mtd_notify_watchdog_ms(void);
/* Startup done: the control socket answers and every running VM is attached or queued. */
void mtd_notify_ready(const char *status_fmt, ...) __attribute__((format(printf, 1, 2)));
/* The main loop is alive. */
void mtd_notify_watchdog(void);
/* A one-line status for `systemctl status`. */
void mtd_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A reload (SIGHUP) starts: RELOADING=1 with MONOTONIC_USEC, and the status says so. */
void mtd_notify_reloading(const char *config_path);
/* It is over: READY=1 and the status mtd_notify_ready last gave. */
void mtd_notify_reloaded(void);
/* Stopping: leaving every VM as it is and disconnecting. */
void mtd_notify_stopping(void);

#endif /* MEMTIDE_HOST_NOTIFY_H */
