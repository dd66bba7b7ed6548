/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bounded_call.h - run a blocking call (a libvirt RPC) on a worker thread and wait for it
 * no longer than a deadline.
 *
 * libvirt's client API has no per-call timeout: virDomainMemoryStats on a domain whose QEMU
 * is frozen waits for libvirtd, which waits for QEMU's monitor without a limit.  A VM's loop
 * must not wait with it (it would stop servicing the agent, publishing status, and obeying
 * detach), so each VM that talks to libvirt owns one worker thread, started on the first
 * call, that makes the call while the loop waits on a condition variable up to the deadline.
 * When the deadline passes first, the loop gets -ETIMEDOUT and carries on; the worker stays
 * in the call until libvirt returns, and meanwhile the next call fails at once with -EBUSY
 * (one call in flight per VM, never a queue).  Nothing the caller owns is touched after a
 * timeout: a job is a heap object whose last holder (caller or worker) frees it.
 *
 * Thread context: one struct mtd_bcall belongs to one caller thread (the VM's loop).
 */
#ifndef MEMTIDE_HOST_BOUNDED_CALL_H
#define MEMTIDE_HOST_BOUNDED_CALL_H

#include <stdatomic.h>
#include <stdbool.h>

struct mtd_bcall;

/* A job: embed it first in a struct that carries the call's inputs and outputs. */
struct mtd_bjob {
	int (*run)(struct mtd_bjob *job);      /* on the worker: the blocking call; returns rc */
	void (*destroy)(struct mtd_bjob *job); /* frees the enclosing struct and what it holds */
	int refs;                              /* caller and worker; under the bcall's lock */
	bool done;
	int rc;
};

/* NULL on no memory.  The worker thread starts on the first call. */
struct mtd_bcall *mtd_bcall_new(void);

/*
 * Run job->run on the worker and wait for it up to timeout_ms, or up to 1 s after *hurry
 * reads true (hurry may be NULL).  Returns job->rc when the call finished in time; then, and
 * after -EBUSY (an earlier call is still running: job was not run) or -EAGAIN (no worker
 * thread could be started), the caller still holds job: it reads the outputs and drops it
 * with mtd_bjob_put.  -ETIMEDOUT: the call is still running and job now belongs to the
 * worker, which destroys it when libvirt returns; the caller must not touch it again.
 */
int mtd_bcall_run(struct mtd_bcall *b, struct mtd_bjob *job, int timeout_ms,
		  const atomic_bool *hurry);

/* Drop the caller's reference after reading the outputs of a finished job. */
void mtd_bjob_put(struct mtd_bcall *b, struct mtd_bjob *job);

/* Is a call still running (one that timed out)? */
bool mtd_bcall_busy(struct mtd_bcall *b);

/* Release.  Never waits: a worker still inside a call frees everything when it returns. */
void mtd_bcall_free(struct mtd_bcall *b);

#endif /* MEMTIDE_HOST_BOUNDED_CALL_H */
