// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_balloon.c - what the virtio balloon holds in this guest, so that the agent's figures
 * mean memory the guest can use.
 *
 * Where balloon pages show up in /proc/meminfo depends on a feature the driver negotiated:
 *   - without deflate-on-oom (VIRTIO_BALLOON_F_DEFLATE_ON_OOM, feature bit 2) the driver takes
 *     each inflated page out of the managed pages: MemTotal falls with the balloon;
 *   - with it (memtided's domxml-patch turns it on, the e2e guests run with it) MemTotal stays
 *     and the inflated pages count as allocated: neither free nor available.
 * In the second case MemTotal - MemAvailable, the agent's "in use" (its growth watch, the
 * host's estimate for a guest without MGLRU), would rise with every page the host takes: the
 * host would read its own inflation as the guest's growth and give the memory back at once.
 * So the agent reports MemTotal net of the pages a deflate-on-oom balloon holds, and
 * measures what a reclaim freed as MemFree's rise plus the pages the balloon took meanwhile
 * (memtided inflates while the agent reclaims: the balloon eats what reclaim frees).
 *
 * Sources: /proc/vmstat nr_balloon_pages (Linux 6.15+), else balloon_inflate -
 * balloon_deflate (both count pages since boot, CONFIG_MEMORY_BALLOON); the features string in
 * /sys/bus/virtio/drivers/virtio_balloon/virtioN/features ('0'/'1' per bit, bit 0 first).
 * A guest without a balloon, or whose files are unreadable, holds nothing: figures stay as
 * the kernel prints them.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define DEFLATE_ON_OOM_BIT 2
#define VMSTAT_BUF_BYTES   (64 * 1024)

int agent_parse_balloon_pages(const char *text, uint64_t *pages)
{
	uint64_t in, out;

	if (agent_vmstat_get(text, "nr_balloon_pages", pages))
		return 0;
	if (!agent_vmstat_get(text, "balloon_inflate", &in) ||
	    !agent_vmstat_get(text, "balloon_deflate", &out))
		return -ENOENT;
	/* deflations never outnumber inflations; a counter that wrapped reads as nothing held */
	*pages = in > out ? in - out : 0;
	return 0;
}

int agent_parse_virtio_feature(const char *text, unsigned bit)
{
	for (unsigned i = 0; i <= bit; i++)
		if (text[i] != '0' && text[i] != '1')
			return -EINVAL;
	return text[bit] == '1';
}

/* Does the balloon driver keep its pages inside MemTotal?  0 no, 1 yes, -errno unknown. */
static int deflate_on_oom(const struct agent_config *c)
{
	char dir[AGENT_PATH_MAX + 64], path[AGENT_PATH_MAX + 64 + 256 + 16], buf[128];
	struct dirent *e;
	DIR *d;
	int rc = -ENOENT;

	agent_path(c, "/sys/bus/virtio/drivers/virtio_balloon", dir, sizeof(dir));
	d = opendir(dir);
	if (!d)
		return -errno;
	/* one balloon per guest: the first device bound to the driver */
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "virtio", 6) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/features", dir, e->d_name);
		if (agent_read_file(path, buf, sizeof(buf)) > DEFLATE_ON_OOM_BIT)
			rc = agent_parse_virtio_feature(buf, DEFLATE_ON_OOM_BIT);
		break;
	}
	closedir(d);
	return rc;
}

int agent_balloon_read(const struct agent_config *c, struct agent_balloon *b)
{
	char path[AGENT_PATH_MAX + 32];
	char *buf;
	int rc;

	memset(b, 0, sizeof(*b));
	buf = malloc(VMSTAT_BUF_BYTES);
	if (!buf)
		return -ENOMEM;
	agent_path(c, "/proc/vmstat", path, sizeof(path));
	rc = agent_read_file(path, buf, VMSTAT_BUF_BYTES) < 0
		 ? -EIO
		 : agent_parse_balloon_pages(buf, &b->pages);
	free(buf);
	if (rc < 0)
		return rc;
	b->held_bytes = b->pages * (uint64_t)sysconf(_SC_PAGESIZE);
	/* Unknown counts as "outside MemTotal": figures are then left as printed, the side
	 * where a guest looks bigger, never smaller, than it is. */
	b->in_mem_total = b->pages && deflate_on_oom(c) == 1;
	return 0;
}

void agent_balloon_adjust(const struct agent_balloon *b, struct proto_stats *st)
{
	uint64_t floor;

	if (!b->in_mem_total || !b->held_bytes)
		return;
	/* The pages are neither free nor available, so MemTotal net of them still holds both. */
	floor = st->mem_available_bytes > st->mem_free_bytes ? st->mem_available_bytes
							     : st->mem_free_bytes;
	st->mem_total_bytes = st->mem_total_bytes > floor + b->held_bytes
				  ? st->mem_total_bytes - b->held_bytes
				  : floor;
}

/*
 * MemAvailable and the balloon's count come from two files read one after the other.  While
 * the balloon inflates, the count read second is ahead of the MemAvailable read first, so
 * the guest's use came out low by what the balloon took in between; the next reading, the
 * balloon at rest, then looked like growth (a reclaim request stopped "grew by 17 MiB" with
 * no growth, scenario 3 by hand, 7 Dec, the agent's thread preempted between the reads).
 * So the count is read on both sides of meminfo, again while they differ (the driver moves
 * it a batch at a time), and the middle of the two is taken if they never agree.
 */
int agent_read_meminfo(const struct agent_config *c, struct proto_stats *st)
{
	char path[AGENT_PATH_MAX + 32];
	char buf[8192];
	struct agent_balloon b0, b1;
	bool have0 = false, have1 = false;

	agent_path(c, "/proc/meminfo", path, sizeof(path));
	for (int i = 0; i < 4; i++) {
		memset(st, 0, sizeof(*st));
		have0 = agent_balloon_read(c, &b0) == 0;
		if (agent_read_file(path, buf, sizeof(buf)) <= 0)
			return -EIO;
		if (agent_parse_meminfo(buf, st) < 0)
			return -EINVAL;
		have1 = agent_balloon_read(c, &b1) == 0;
		if (!have0 || !have1 || b0.pages == b1.pages)
			break;
	}
	if (!have1)
		return 0;
	if (have0 && b0.pages != b1.pages) {
		b1.pages = (b0.pages + b1.pages) / 2; /* both far below 2^63 */
		b1.held_bytes = (b0.held_bytes + b1.held_bytes) / 2;
	}
	agent_balloon_adjust(&b1, st);
	return 0;
}
