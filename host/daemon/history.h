/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * history.h - the audit trail: every change memtided makes to a VM's size, and every
 * eviction step, kept on disk per VM so that "what did memtide do to VM X at 02:14?" has an
 * answer after the fact, with memtided stopped or restarted.
 *
 * Layout: STATE_DIR/history/NAME.jsonl, one JSON object a line, oldest first:
 *   {"time":"2026-12-04T02:14:05.123Z","vm":"web1","what":"balloon","before_bytes":...,
 *    "after_bytes":...,"reason":"inflate","source":"controller","observe":false}
 * `what` is balloon (the balloon target moved), target (the target moved with the balloon a
 * cap, return=reclaim), reclaim (an eviction step asked of the guest agent: before = what
 * the guest used, after = what it was asked to use) or reclaimed (the guest's answer:
 * before = what it was asked to free, after = what it freed).
 * `source` says who wanted it: controller, arbiter (host pressure), guest (its need,
 * pressure or growth), agent-silence, operator (policy) or shutdown.  observe: memtided
 * only computed it (observe-only mode) and did nothing.
 * A file over MTD_HISTORY_MAX_BYTES is renamed NAME.jsonl.1 (one older file kept), so a VM's
 * history costs at most twice that on disk.  NAME is the VM's name with '/', '%' and a
 * leading '.' written as %XX, so no name reaches outside the folder.
 *
 * Writing is one open/append/close per entry: entries come at actions (a few a minute at
 * most), never per interval.  A failed write is the caller's to log; it never stops a loop.
 */
#ifndef MEMTIDE_HOST_HISTORY_H
#define MEMTIDE_HOST_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_HISTORY_MAX_BYTES (1u << 20)

struct mtd_history_entry {
	uint64_t unix_ms; /* CLOCK_REALTIME: an operator asks by wall-clock time */
	const char *vm;
	const char *what;
	uint64_t before_bytes, after_bytes;
	const char *reason;
	const char *source;
	bool observe;
};

/* The file of one VM: "DIR/history/NAME.jsonl".  0, or -ENAMETOOLONG. */
int mtd_history_path(const char *state_dir, const char *vm, char *buf, size_t len);

/* Append one entry (creating DIR/history, mode 0700, and the file, 0600, as needed).
 * 0 or -errno. */
int mtd_history_append(const char *state_dir, const struct mtd_history_entry *e);

#endif /* MEMTIDE_HOST_HISTORY_H */
