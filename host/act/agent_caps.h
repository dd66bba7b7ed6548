/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_caps.h - what a guest agent said it can do (its hello's capabilities), and what that
 * means for its VM, in words for the log and `memtidectl vm show`.
 *
 * An operator whose VM gives nothing back must be able to tell why: the agent's reclaim
 * needs cgroup2's memory.reclaim or MGLRU in the guest, and a real working set needs the
 * guest's MGLRU on.  mtd_agent_caps_consequence() names the first thing missing and what
 * memtided does about it.
 */
#ifndef MEMTIDE_HOST_AGENT_CAPS_H
#define MEMTIDE_HOST_AGENT_CAPS_H

#include <stddef.h>
#include <stdint.h>

/* "stats psi wss reclaim.memcg ..." for the agent-side bits of caps ("none" if none). */
void mtd_agent_caps_names(uint32_t caps, char *buf, size_t len);

/* One sentence on what the capabilities allow and what they cost this VM, e.g. "cannot
 * reclaim (no cgroup2 memory.reclaim, no MGLRU in the guest): memory goes back by the
 * balloon only".  "full: ..." when nothing is missing. */
void mtd_agent_caps_consequence(uint32_t caps, char *buf, size_t len);

#endif /* MEMTIDE_HOST_AGENT_CAPS_H */
