// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * return_via.c - the policy's `return` resolved for a VM's agent and access source
 * (return_via.h).  The controller steers by it (decide/tick_decide.c), host-side eviction
 * acts by it (act/pageout_hand.c), the status shows it.
 */
#include "decide/return_via.h"

enum mtd_return_via mtd_return_resolve(enum mtd_return_via policy, bool agent_expected,
				       bool live_source)
{
	if (policy == MTD_RETURN_RECLAIM && !agent_expected && live_source)
		return MTD_RETURN_PAGEOUT;
	if (policy == MTD_RETURN_AUTO && !agent_expected)
		return MTD_RETURN_PAGEOUT;
	return policy;
}
