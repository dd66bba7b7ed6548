/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * return_via.h - how memory taken from a VM goes back to the host: its policy's `return`
 * (mtd.h, enum mtd_return_via), resolved for what the VM has (return_via.c).  Pure.
 */
#ifndef MEMTIDE_HOST_RETURN_VIA_H
#define MEMTIDE_HOST_RETURN_VIA_H

#include <stdbool.h>

#include "base/mtd.h"

/*
 * The way memory goes back for a VM, from its policy: `reclaim` (the default) without an
 * agent becomes `pageout` where a live page-level access source exists; `auto` without an
 * agent is `pageout`.  live_source: the source reports the guest's own accesses page by
 * page (ept, idle, damon), not the agent's amounts nor a simulation.
 */
enum mtd_return_via mtd_return_resolve(enum mtd_return_via policy, bool agent_expected,
				       bool live_source);

#endif /* MEMTIDE_HOST_RETURN_VIA_H */
