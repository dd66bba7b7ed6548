/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * turns.h - first come, first served turns at the CPU-heavy part of a VM's tick.
 *
 * Each VM has its own loop thread (vm_loop.c), and the part of a tick that needs the CPU is
 * libvmm's aging round: the access source's walk and the refault scan.  When the host's
 * CPU is short, many loops are due at once; left to the scheduler, each gets a thin slice
 * of a core and finishes whenever it happens to, so some VMs age every few seconds and
 * others not for twenty (bench/daemon_scale.py's tick_evenness).  Turns make the loops
 * queue: at most `slots` rounds run at a time (nine per CPU memtided may use: daemon.c
 * says why nine), and the others wait in the order they asked.  An overloaded host then
 * stretches every VM's interval by about the same amount.
 *
 * Only CPU work is done inside a turn: a call to QEMU or libvirt, which can stall for
 * call_timeout on a frozen peer, never holds one.
 */
#ifndef MEMTIDE_TURNS_H
#define MEMTIDE_TURNS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct mtd_turn_waiter;

struct mtd_turns {
	unsigned slots; /* 0: no limit (a zeroed struct, as in tests, lets every caller in) */
	pthread_mutex_t lock;
	unsigned busy;                       /* turns running now */
	struct mtd_turn_waiter *head, *tail; /* waiting, in the order they asked */
	uint64_t waited_total;               /* callers that had to wait (diagnostics) */
};

/* slots: how many turns may run at once (at least 1).  0 or -errno. */
int mtd_turns_init(struct mtd_turns *t, unsigned slots);
void mtd_turns_destroy(struct mtd_turns *t);
/* Wait for a turn (none if t->slots is 0).  Returns whether one was taken: pass it to
 * mtd_turns_give. */
bool mtd_turns_take(struct mtd_turns *t);
/* End a turn taken by mtd_turns_take; the longest waiter goes next. */
void mtd_turns_give(struct mtd_turns *t, bool taken);

#endif /* MEMTIDE_TURNS_H */
