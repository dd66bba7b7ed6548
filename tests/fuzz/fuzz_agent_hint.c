// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_agent_hint.c - libFuzzer target for the guest agent's hint socket: the request
 * language and pagemap translation (agent_hint.c) and the per-user guard
 * (agent_hint_guard.c), i.e. everything any user in the guest can reach.
 *
 * Input layout: byte 0 picks the caller (even: root, odd: uid 1000), byte 1 whether
 * hint_user_need is set; then one request line (up to '\n'); the rest is the content of the
 * caller's /proc/PID/pagemap in a fake /proc (a mock: a real pagemap's bits cannot be
 * chosen).  The same bytes then drive the guard as (uid, want, time step) triples.
 * Checked: a need from a user without hint_user_need is refused; a user never gets a range
 * outside the pages its pagemap marks present and exclusively mapped, nor about another
 * user's process; ranges are page-aligned, ascending and disjoint, at most
 * AGENT_HINT_MAX_RANGES; the guard never grants more than asked, never admits past a cap,
 * and never lets a user take the socket bucket below root's reserve.
 * Seeds (tests/fuzz/corpus/agent_hint/) are each request form with small pagemaps.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

#define PM_PRESENT   (1ULL << 63)
#define PM_EXCLUSIVE (1ULL << 56)
#define PM_PFN_MASK  ((1ULL << 55) - 1)
#define USER_PID     200 /* owned by uid 1000 */
#define ROOT_PID     100 /* owned by root */

static struct agent_config cfg;
static int pagemap_fd = -1;
static uint64_t page;

static void setup(void)
{
	char path[AGENT_PATH_MAX + 64];
	int fd;

	agent_config_defaults(&cfg);
	snprintf(cfg.sys_root, sizeof(cfg.sys_root), "/tmp/memtide-fuzz-hint-%d", (int)getpid());
	snprintf(path, sizeof(path), "%s", cfg.sys_root);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/proc", cfg.sys_root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/%d", cfg.sys_root, ROOT_PID);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/%d/pagemap", cfg.sys_root, ROOT_PID);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/proc/%d", cfg.sys_root, USER_PID);
	mkdir(path, 0755);
	if (chown(path, 1000, 1000) < 0) {
		/* not root: uid 1000 then owns nothing, which the checks allow for */
	}
	snprintf(path, sizeof(path), "%s/proc/%d/pagemap", cfg.sys_root, USER_PID);
	pagemap_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (pagemap_fd < 0)
		abort();
	page = (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Is [start, start+bytes) made only of frames that the pagemap marks present (and, for a
 * user, exclusive)? */
static bool from_pagemap(const uint64_t *ent, size_t n, uint64_t start, uint64_t bytes,
			 bool exclusive)
{
	for (uint64_t a = start; a < start + bytes; a += page) {
		uint64_t pfn = a / page;
		bool found = false;

		for (size_t i = 0; i < n && !found; i++)
			found = (ent[i] & PM_PRESENT) && (ent[i] & PM_PFN_MASK) == pfn &&
				(!exclusive || (ent[i] & PM_EXCLUSIVE));
		if (!found)
			return false;
	}
	return true;
}

static void guard_ops(const uint8_t *data, size_t size)
{
	struct agent_hint_guard g;
	uint64_t now = 1;

	agent_hint_guard_init(&g, &cfg);
	for (size_t i = 0; i + 3 <= size; i += 3) {
		uid_t uid = data[i] & 1 ? 0 : 1000 + (data[i] >> 1) % 24;
		uint32_t want = data[i + 1] % 12, open = data[i + 1] >> 4, mine = data[i + 2] & 3;
		uint32_t got;

		now += (uint64_t)data[i + 2] * 8;
		if (agent_hint_guard_admit(&g, uid, open, mine) == 0) {
			CHECK(open < g.max_clients);
			CHECK(uid == 0 || (mine < AGENT_HINT_USER_CONNS &&
					   open < g.max_clients - AGENT_HINT_ROOT_SLOTS));
		}
		got = agent_hint_guard_take(&g, uid, want, now);
		CHECK(got <= want);
		CHECK(g.all.tokens <= g.all.burst + 1e-9);
		if (uid != 0 && got > 0)
			CHECK(g.all.tokens >= AGENT_HINT_ROOT_RESERVE - 1e-9);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_hint_req req;
	char line[AGENT_HINT_LINE_MAX], err[256];
	const uint8_t *nl, *pm;
	size_t line_len, pm_len, n_ent;
	uid_t uid;
	int rc;

	if (pagemap_fd < 0)
		setup();
	if (size < 2 || size > 64 * 1024)
		return 0;
	uid = data[0] & 1 ? 1000 : 0;
	cfg.hint_user_need = data[1] & 1;
	nl = memchr(data + 2, '\n', size - 2);
	line_len = nl ? (size_t)(nl - (data + 2)) : size - 2;
	if (line_len >= sizeof(line))
		line_len = sizeof(line) - 1;
	memcpy(line, data + 2, line_len);
	line[line_len] = '\0';
	pm = nl ? nl + 1 : data + size;
	pm_len = (size_t)(data + size - pm) / 8 * 8;
	n_ent = pm_len / 8;
	if (ftruncate(pagemap_fd, 0) < 0 ||
	    (pm_len && pwrite(pagemap_fd, pm, pm_len, 0) != (ssize_t)pm_len))
		return 0;

	uint64_t *ent = malloc(pm_len ? pm_len : 8);
	if (!ent)
		return 0;
	memcpy(ent, pm, pm_len);
	rc = agent_hint_parse(&cfg, line, USER_PID, uid, &req, err, sizeof(err));
	if (rc == 0) {
		CHECK(req.head.kind == PROTO_HINT_HOT || req.head.kind == PROTO_HINT_COLD ||
		      req.head.kind == PROTO_HINT_NEED);
		if (req.head.kind == PROTO_HINT_NEED) {
			CHECK(uid == 0 || cfg.hint_user_need);
			CHECK(req.head.need_bytes > 0 && req.head.need_bytes <= PROTO_BYTES_MAX);
			CHECK(!req.ranges);
		} else {
			/* a user may only ever have described its own process */
			if (uid != 0)
				CHECK(req.head.pid == USER_PID);
			CHECK(req.nr_ranges >= 1 && req.nr_ranges <= AGENT_HINT_MAX_RANGES);
			for (uint32_t i = 0; i < req.nr_ranges; i++) {
				const struct proto_range *r = &req.ranges[i];

				CHECK(r->bytes > 0 && r->start % page == 0 && r->bytes % page == 0);
				CHECK(i == 0 || r->start > req.ranges[i - 1].start +
							       req.ranges[i - 1].bytes - 1);
				if (req.head.pid == USER_PID && n_ent <= 512)
					CHECK(
					    from_pagemap(ent, n_ent, r->start, r->bytes, uid != 0));
			}
			/* and what the loop sends is a valid hint message */
			struct proto_msg m;
			uint32_t k = req.nr_ranges < PROTO_MAX_HINT_RANGES ? req.nr_ranges
									   : PROTO_MAX_HINT_RANGES;
			memset(&m, 0, sizeof(m));
			m.type = PROTO_MSG_HINT;
			m.id = 1;
			m.u.hint = req.head;
			memcpy(m.u.hint.ranges, req.ranges, k * sizeof(*req.ranges));
			m.u.hint.nr_ranges = k;
			CHECK(proto_validate(&m, NULL) == PROTO_OK);
			free(req.ranges);
		}
	} else {
		CHECK(err[0] != '\0' && !req.ranges);
	}
	free(ent);
	guard_ops(data, size);
	return 0;
}
