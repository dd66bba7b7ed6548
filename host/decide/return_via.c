// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * return_via.c - the policy's `return` resolved for a VM's agent and access source
 * (return_via.h).  The controller steers by it (decide/tick_decide.c), host-side eviction
 * acts by it (act/pageout_hand.c), the status shows it.
 */
#include "decide/return_via.h"

enum mtd_return_via mtd_return_resolve(enum mtd_return_via policy, bool agent_expected,
				       bool host_evicts)
{
	if (policy == MTD_RETURN_RECLAIM && !agent_expected && host_evicts)
		return MTD_RETURN_PAGEOUT;
	if (policy == MTD_RETURN_AUTO && !agent_expected)
		return MTD_RETURN_PAGEOUT;
	return policy;
}

bool mtd_agent_giving(struct mtd_agent_giving *g, bool asked, uint64_t reply_seq, bool reply_done,
		      uint64_t now_ms, uint64_t interval_ms)
{
	if (reply_seq != g->seen_seq) {
		g->seen_seq = reply_seq;
		g->reply_ms = now_ms;
		g->reply_done = reply_done;
	}
	return (asked && !g->seen_seq) ||
	       (g->reply_done && now_ms - g->reply_ms <= 2 * interval_ms);
}
