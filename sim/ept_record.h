/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_record.h - record a memtide trace (docs/trace-format.md) from a live TCG guest through
 * its emulated EPT file (ept_table.h): `memtide-trace ept`.
 *
 * Each epoch, the recorder harvests the table the way memtided's ept source does (an
 * atomic test-and-clear walk of every present leaf, vmm_walk with clear_dirty): the pages
 * whose accessed bit is set are the epoch's accesses, those also dirty its writes.  The
 * policy lab (memtide-sim) then replays a real guest, kernel and all, not only a process
 * under valgrind.  The guest's frees are not visible in the tables: traces recorded here
 * have empty free sets.
 */
#ifndef MEMTIDE_HOST_ACCESS_EPT_RECORD_H
#define MEMTIDE_HOST_ACCESS_EPT_RECORD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim_trace;

struct mtd_ept_record_opts {
	uint64_t epoch_ms;  /* wall time per epoch (> 0) */
	uint64_t epochs;    /* epochs to record (> 0) */
	uint64_t window_ms; /* 0: instrument all the time (every access seen); else one
			     * sampling window of this length per epoch, as memtided does */
	bool random_phase;  /* each window at a random moment of its epoch, as memtided places
			     * them (else right after each harvest, as memtided did before) */
	uint64_t ram_bytes; /* guest RAM when the plugin was not told (0: the plugin's) */
	/* Set asynchronously (a signal) to stop after the current epoch; may be NULL. */
	volatile sig_atomic_t *stop;
};

struct mtd_ept_record_stats {
	uint64_t epochs;          /* epochs recorded */
	uint64_t page_accesses;   /* pages seen accessed, summed over epochs */
	uint64_t page_writes;     /* of those, written */
	uint64_t walk_entries;    /* entries the harvest walks read, summed */
	uint64_t walk_us;         /* their wall time, summed (microseconds) */
	uint64_t table_tables;    /* leaf tables present in the table at the end */
	uint64_t table_ram_pages; /* pages of guest RAM the table covers */
	bool qemu_gone;           /* recording ended because QEMU exited */
};

/*
 * Claim the table at path, tell the plugin what to instrument, and record o->epochs epochs
 * into t (initialised here with the guest's RAM layout; the caller frees it with
 * sim_trace_free, also on error).  The first harvest, before epoch 0, only clears what
 * was set before recording began.  Ends early, with what was recorded, when QEMU exits or
 * *o->stop is set.  Instrumentation is switched off and the claim given up at the end.
 * Returns 0, or -errno with one sentence in err: -ENOENT / -EINVAL / -ESRCH (the file:
 * ept_file.h), -EBUSY (memtided or another recorder drives it), -EINVAL (bad options),
 * -ENOMEM.
 */
int mtd_ept_record(const char *path, const struct mtd_ept_record_opts *o, struct sim_trace *t,
		   struct mtd_ept_record_stats *st, char *err, size_t errlen);

#endif /* MEMTIDE_HOST_ACCESS_EPT_RECORD_H */
