// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_caps.c - capabilities of a guest agent, named and explained (agent_caps.h).
 *
 * The consequences follow what the rest of memtided does with each bit: the controller lets
 * return=reclaim work only with a reclaim capability (decide/tick_decide.c, can_reclaim), the agent
 * source falls back from wss reports to MemTotal - MemAvailable (source_agent.c), and guest
 * pressure is read from PSI when the stats carry it, else from MemAvailable alone.
 */
#include "act/agent_caps.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

void mtd_agent_caps_names(uint32_t caps, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	/* Agent-side bits only (the host-side ones start at bit 16). */
	for (unsigned b = 0; b < 16; b++) {
		const char *name = (caps & (1u << b)) ? proto_cap_name(1u << b) : NULL;
		if (!name)
			continue;
		int n = snprintf(buf + off, len - off, "%s%s", off ? " " : "", name);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
	if (!off)
		snprintf(buf, len, "none");
}

void mtd_agent_caps_consequence(uint32_t caps, char *buf, size_t len)
{
	bool reclaim = caps & (PROTO_CAP_RECLAIM_MEMCG | PROTO_CAP_RECLAIM_MGLRU);
	bool wss = caps & PROTO_CAP_WSS;
	bool psi = caps & PROTO_CAP_PSI;
	char parts[3][160];
	int n = 0;

	if (!reclaim)
		snprintf(
		    parts[n++], sizeof(parts[0]),
		    "cannot reclaim (no cgroup2 memory.reclaim, no MGLRU in the guest): memory "
		    "goes back by the balloon only");
	if (!wss)
		snprintf(
		    parts[n++], sizeof(parts[0]),
		    "no working set by age (MGLRU off in the guest; the agent "
		    "turns it on unless enable_mglru=false): only free and easily reclaimed memory "
		    "is taken");
	if (!psi)
		snprintf(parts[n++], sizeof(parts[0]),
			 "no PSI: guest pressure is seen from MemAvailable only");
	if (n == 0) {
		snprintf(buf, len,
			 "full: reclaim in the guest, working set by age from MGLRU, PSI");
		return;
	}
	snprintf(buf, len, "%s%s%s%s%s", parts[0], n > 1 ? "; " : "", n > 1 ? parts[1] : "",
		 n > 2 ? "; " : "", n > 2 ? parts[2] : "");
}
