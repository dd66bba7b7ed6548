// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_report.c - what the agent tells the host about its guest (agent.h): the stats
 * message (procfs readings, MemTotal net of the balloon's deflate-on-oom pages) and the
 * hello's guest facts (kernel, page size, RAM layout, and the capabilities found: stats,
 * PSI, MGLRU's working set, the ways the guest can reclaim).
 *
 * It sits above the readers it gathers from (agent_procfs.c, agent_balloon.c,
 * agent_mglru.c, agent_reclaim.c), none of which calls back into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent.h"

int agent_collect_stats(const struct agent_config *c, struct proto_stats *st, uint32_t *caps)
{
	char path[AGENT_PATH_MAX + 32];
	char *buf = malloc(AGENT_FILE_BUF_BYTES);
	long n;

	memset(st, 0, sizeof(*st));
	*caps = 0;
	if (!buf)
		return -ENOMEM;
	st->mono_ms = agent_now_ms();
	agent_path(c, "/proc/meminfo", path, sizeof(path));
	n = agent_read_file(path, buf, AGENT_FILE_BUF_BYTES);
	if (n < 0 || agent_parse_meminfo(buf, st) < 0) {
		free(buf);
		return n < 0 ? (int)n : -EINVAL;
	}
	*caps |= PROTO_CAP_STATS;
	{
		struct agent_balloon b;

		if (agent_balloon_read(c, &b) == 0)
			agent_balloon_adjust(&b, st);
	}
	agent_path(c, "/proc/vmstat", path, sizeof(path));
	if (agent_read_file(path, buf, AGENT_FILE_BUF_BYTES) >= 0)
		agent_parse_vmstat(buf, st);
	agent_path(c, "/proc/pressure/memory", path, sizeof(path));
	if (agent_read_file(path, buf, AGENT_FILE_BUF_BYTES) >= 0 &&
	    agent_parse_psi(buf, &st->psi) == 0) {
		st->has_psi = true;
		*caps |= PROTO_CAP_PSI;
	}
	free(buf);
	return 0;
}

void agent_collect_hello(const struct agent_config *c, struct proto_hello *h)
{
	char *buf = malloc(AGENT_FILE_BUF_BYTES);
	char path[AGENT_PATH_MAX + 32];
	struct proto_stats st;
	struct utsname u;
	uint32_t caps = 0;
	long ps = sysconf(_SC_PAGESIZE);
	int n;

	memset(h, 0, sizeof(*h));
	h->role = PROTO_ROLE_AGENT;
	h->version_min = PROTO_VERSION_MIN;
	h->version_max = PROTO_VERSION_MAX;
	snprintf(h->software, sizeof(h->software), "memtide-agent %s", AGENT_VERSION);
	if (uname(&u) == 0 && u.release[0])
		snprintf(h->kernel, sizeof(h->kernel), "%s", u.release);
	else
		snprintf(h->kernel, sizeof(h->kernel), "unknown");
	h->page_size_bytes =
	    ps >= PROTO_PAGE_SIZE_MIN && ps <= PROTO_PAGE_SIZE_MAX ? (uint32_t)ps : 4096;
	agent_path(c, "/proc/iomem", path, sizeof(path));
	if (buf && agent_read_file(path, buf, AGENT_FILE_BUF_BYTES) >= 0) {
		n = agent_parse_iomem(buf, h->ram, PROTO_MAX_RAM_RANGES);
		if (n > 0) {
			h->nr_ram = (uint32_t)n;
			h->caps |= PROTO_CAP_RAM_LAYOUT;
		}
	}
	free(buf);
	if (agent_collect_stats(c, &st, &caps) == 0)
		h->caps |= caps;
	if (agent_mglru_available(c))
		h->caps |= PROTO_CAP_WSS;
	h->caps |= agent_reclaim_caps(c);
}
