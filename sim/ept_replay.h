/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_replay.h - memtide's emulated EPT in memory, for the walker lab (bench/walk-bench.c).
 *
 * The same tables as the QEMU plugin's file (host/access/ept_table.h: the layout, the
 * entries, and the marking rule: a leaf becomes present with A on its first access and
 * gets D on a store, then each upper entry on the way up gets A; the leaf is written
 * first, docs/walker.md says why), kept in process memory and driven by access sets: a
 * trace's epochs (one recorded from a live guest by `memtide-trace ept` replays that
 * guest's table round by round) or a synthetic hot set.  Several copies fed the same
 * accesses let walkers with different options (bloom filter, non-leaf accessed bits) be
 * compared on the same rounds, which one live table cannot do: each walk clears the bits
 * the next one would need.
 */
#ifndef MEMTIDE_SIM_EPT_REPLAY_H
#define MEMTIDE_SIM_EPT_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm.h"

struct sim_ept;

/* Empty tables (nothing present) over GPA [0, span_bytes), span a multiple of 1 GiB up to
 * the plugin's maximum.  Memory: calloc'ed like the plugin's sparse file, so only the
 * tables ever touched take pages.  0, -EINVAL or -ENOMEM. */
int sim_ept_new(uint64_t span_bytes, struct sim_ept **out);
void sim_ept_free(struct sim_ept *t);
/* One access to the page at gpa (< span), as the plugin records it.  O(1). */
void sim_ept_mark(struct sim_ept *t, uint64_t gpa, bool write);
/* The tree, for vmm_walk / vmm_age_walk (VMM_PT_NONLEAF_ACCESSED set: the upper A bits
 * are exact here). */
const struct vmm_pt *sim_ept_pt(const struct sim_ept *t);
/* Leaf tables present (2 MiB regions ever touched). */
uint64_t sim_ept_leaf_tables(const struct sim_ept *t);

#endif /* MEMTIDE_SIM_EPT_REPLAY_H */
