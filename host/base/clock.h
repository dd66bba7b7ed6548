/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clock.h - memtided's clock: CLOCK_MONOTONIC in milliseconds.
 *
 * Every time in memtided (intervals, deadlines, the status's *_ms figures, the times handed
 * to libvmm as now_ms) is this clock: a clock step never moves it, and it counts from the
 * host's boot, so a restarted memtided reads the same clock as the one before it.  Inline,
 * so that QEMU's ept plugin (host/access/qemu_plugin/, built on its own) can stamp its
 * heartbeat with it too.  libvmm reads no clock (it is handed now_ms), and the guest agent
 * keeps its own (agent.h): it links nothing of host/.
 */
#ifndef MEMTIDE_CLOCK_H
#define MEMTIDE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mtd_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif /* MEMTIDE_CLOCK_H */
