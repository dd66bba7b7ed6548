// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy.c - the list of memtide-sim's policies, in report order (baselines first, the
 * oracle last), and lookup by name.
 */
#include <string.h>

#include "sim.h"

const struct sim_policy *const sim_policies[] = {
    &sim_policy_none,    &sim_policy_fpr,    &sim_policy_mom,
    &sim_policy_damon,   &sim_policy_lru2,   &sim_policy_idle,
    &sim_policy_memtide, &sim_policy_oracle, NULL,
};

const struct sim_policy *sim_policy_get(const char *name)
{
	for (size_t i = 0; sim_policies[i]; i++)
		if (!strcmp(sim_policies[i]->name, name))
			return sim_policies[i];
	return NULL;
}
