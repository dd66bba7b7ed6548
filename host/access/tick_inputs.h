/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tick_inputs.h - stage 1 of a VM's tick (decide/tick.h): what the VM's peers say now.  The
 * balloon's actual and its driver's stats (act/balloon.h), a reconnect or a restarted QEMU;
 * the agent's stats, its need and its answer to the last reclaim request
 * (act/agent_link.h).  What a restart voids of the decision's state goes here too.
 */
#ifndef MEMTIDE_HOST_TICK_INPUTS_H
#define MEMTIDE_HOST_TICK_INPUTS_H

#include "act/balloon.h"
#include "act/tick_act.h"
#include "base/audit.h"
#include "base/mtd.h"
#include "decide/tick.h"
#include "decide/tick_decide.h"

struct mtd_agent_link;

struct mtd_inputs_env {
	const char *vm;
	const struct mtd_ctl_config *ctl;
	struct mtd_balloon *balloon;
	struct mtd_agent_link *agent; /* NULL: no agent channel */
	struct mtd_vm_status *draft;
	const struct mtd_audit *audit;
};

/* Stage 1.  t->need_bytes may already hold a need that woke the loop: the agent's adds. */
void mtd_tick_inputs(struct mtd_vm_decide *s, struct mtd_vm_act *a, const struct mtd_inputs_env *e,
		     struct mtd_tick *t);

#endif /* MEMTIDE_HOST_TICK_INPUTS_H */
