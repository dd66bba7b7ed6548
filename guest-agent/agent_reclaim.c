// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_reclaim.c - carrying out the host's reclaim request inside the guest.
 *
 * Methods, best first (each is used only when the guest has it and the scope allows it):
 *   1. memcg        "N" to memory.reclaim of the root cgroup v2 (Linux 5.19+).  Proactive
 *                   reclaim with the kernel's own LRU order and no side effects beyond it.
 *                   6.1's memory.reclaim cannot be told "page cache only", so for scope
 *                   "file" it is used only when the guest has no swap (then only page cache
 *                   can go anyway).
 *   2. mglru        '-' eviction of the oldest generations (swappiness 0 for scope "file").
 *   3. drop_caches  "1" to /proc/sys/vm/drop_caches: clean page cache, all of it, at once;
 *                   only when the guest admin allowed it (allow_drop_caches).
 *   4. compact      "1" to /proc/sys/vm/compact_memory, last and only when asked: it frees
 *                   nothing but gathers free pages into the 2 MiB blocks that free page
 *                   reporting hands to the host.
 *
 * The floor: memory the agent frees is about to be taken by the host (balloon, free page
 * reporting), so MemAvailable after that is MemAvailable now minus what was freed.  The agent
 * therefore frees at most MemAvailable - floor, and says "floor" in the reply when that cut
 * the request.  floor = max(floor_bytes, floor_percent of MemTotal).
 *
 * Honesty: every figure in the reply is measured - MemFree (plus what the balloon holds)
 * before and after each step and over the whole request - never the amount asked for.  The
 * balloon is counted because memtided inflates while the agent reclaims: pages freed and
 * taken by the balloon at once were freed.  Other activity in the guest moves MemFree too; a
 * negative delta is reported as 0.
 *
 * Priority: reclaim done for the host runs at nice reclaim_nice (10), and back at the agent's
 * own afterwards.  memory.reclaim and MGLRU eviction reclaim in the writer's context, and
 * with zram the writer also compresses every page it swaps out.  At nice 10 the guest's own
 * work at nice 0 gets about 90% of a contended CPU; on an idle CPU reclaim runs at full
 * speed.  Measured in tests/e2e/scenarios/09_kv_steady.sh (2-vCPU TCG guest on a 2-core
 * host, a CPU-bound key-value server while 434 MiB went to zram for the host), one run
 * each: the longest stretch under half the median throughput went from 9.9 s to 2.3 s, and
 * the 100 ms windows under half from 246 to 56 of 4201; scenario 2 still returned 478 MiB
 * in 60 s.
 *
 * Pauses: after every PACE_BUSY_MS (1 s) of reclaim work the agent sleeps reclaim_pause_ms
 * (250 ms), so the guest's own threads get stretches of the CPUs without reclaim beside them
 * (a niced thread still takes its share of a contended CPU, and each swap-out on TCG flushes
 * every vCPU's software TLB).  That costs at most a fifth of reclaim's speed and bounds how
 * long the guest's work runs next to uninterrupted reclaim; the pause never runs past the
 * request's deadline.  Scenario 9 with it (one run, DAMON source): longest stretch under half
 * the median 1.1 s; the pauses were not measured apart from the host-side changes of the
 * same day, so the figure is the two together.
 *
 * Steps run in chunks of at most CHUNK_BYTES, checking the deadline between chunks, so one
 * request blocks the agent's loop for about its deadline at most; memory.reclaim's chunks
 * start at 4 MiB and follow how long each takes (doubled under 50 ms, halved over 150 ms),
 * since a single write cannot be cut short.  Why so short: the growth stop below is checked
 * between chunks and every PAUSE_SLICE_MS of a pause, so a chunk's length is how late it
 * can act.  With chunks of up to 500 ms (and a 250 ms pause slept whole), a growth that
 * met a request in scenario 3 had its need sent 368 ms after it began, and the guest
 * swapped out 17 MiB meanwhile (by hand, 7 Dec).  A write to memory.reclaim costs a walk of
 * the cgroup's LRUs whatever its size, a few hundred microseconds here: ten a second are
 * noise beside the reclaim itself.
 *
 * Growth: a request stops as soon as the guest's use (MemTotal - MemAvailable) rises
 * AGENT_GROWTH_STOP_BYTES above the lowest it read during the request: checked between
 * chunks, and every 20 ms by a guard thread that interrupts the reclaiming thread
 * (agent_reclaim_guard.c).  Reclaim only lowers that
 * figure, so a rise is the guest allocating faster than reclaim frees: it needs its memory,
 * and reclaiming on would push out what it is about to use.  It also measures the request
 * by MemFree, which the growth eats, so the request would run to its deadline.  And while a
 * request runs, the agent's loop is not watching for growth (agent_watch.c), so its `need`
 * waits for the request to end: in scenario 3 (CI, 7 Dec) a growth began 2 s after a
 * request, the need went 577 ms later, and the guest swapped out 35 MiB meanwhile, where
 * growths that met no request were answered in 53-313 ms with 0-4 MiB swapped.
 *
 * Seen (Debian 6.1 guest, 768 MiB, QEMU TCG, zram swap, 200 MiB of cold shmem): a 64 MiB
 * "any" request -> memcg freed 67.7 MB in 310 ms, MemFree +68 MiB as the guest's own
 * /proc/meminfo showed; result "done".  Without swap or disk-backed page cache the same
 * request freed 0 and said "partial" - nothing was reclaimable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define CHUNK_BYTES    (64ULL << 20)
#define CHUNK_MIN      (1ULL << 20) /* memory.reclaim's first and smallest chunk ... */
#define CHUNK_FIRST    (4ULL << 20)
#define CHUNK_FAST_MS  50           /* ... doubled while a chunk takes less, halved when it takes */
#define CHUNK_SLOW_MS  150          /* more: a growth is seen within ~0.15 s (the file comment) */
#define MIN_GAIN_BYTES (1ULL << 20) /* a chunk that frees less ends the method */
#define PACE_BUSY_MS   1000         /* reclaim work between two pauses */
#define PAUSE_SLICE_MS 50           /* a pause looks for growth this often */

int agent_cgroup2_root(const struct agent_config *c, char *out, size_t cap)
{
	char path[AGENT_PATH_MAX + 32];
	char *buf = malloc(64 * 1024);
	int rc = -ENOENT;
	char *line, *save = NULL;

	if (!buf)
		return -ENOMEM;
	agent_path(c, "/proc/mounts", path, sizeof(path));
	if (agent_read_file(path, buf, 64 * 1024) < 0) {
		free(buf);
		return -ENOENT;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char dev[64], mnt[AGENT_PATH_MAX], type[32];

		if (sscanf(line, "%63s %255s %31s", dev, mnt, type) == 3 &&
		    strcmp(type, "cgroup2") == 0) {
			snprintf(out, cap, "%s%s", c->sys_root, mnt);
			rc = 0;
			break;
		}
	}
	free(buf);
	return rc;
}

/* memory.reclaim of the root cgroup, when the memory controller is on there. */
static bool memcg_reclaim_path(const struct agent_config *c, char *out, size_t cap)
{
	char root[AGENT_PATH_MAX];

	if (agent_cgroup2_root(c, root, sizeof(root)) < 0)
		return false;
	snprintf(out, cap, "%s/memory.reclaim", root);
	return access(out, W_OK) == 0;
}

static bool writable(const struct agent_config *c, const char *p)
{
	char path[AGENT_PATH_MAX + 48];

	agent_path(c, p, path, sizeof(path));
	return access(path, W_OK) == 0;
}

uint32_t agent_reclaim_caps(const struct agent_config *c)
{
	char path[AGENT_PATH_MAX + 32];
	uint32_t caps = 0;

	if (memcg_reclaim_path(c, path, sizeof(path)))
		caps |= PROTO_CAP_RECLAIM_MEMCG;
	if (agent_mglru_available(c))
		caps |= PROTO_CAP_RECLAIM_MGLRU;
	if (c->allow_drop_caches && writable(c, "/proc/sys/vm/drop_caches"))
		caps |= PROTO_CAP_RECLAIM_DROP_CACHES;
	if (writable(c, "/proc/sys/vm/compact_memory"))
		caps |= PROTO_CAP_RECLAIM_COMPACT;
	return caps;
}

uint64_t agent_floor_bytes(const struct agent_config *c, uint64_t mem_total_bytes)
{
	uint64_t pct = mem_total_bytes / 100 * c->floor_percent;

	return pct > c->floor_bytes ? pct : c->floor_bytes;
}

/* MemFree and MemAvailable now (MemTotal net of the balloon); false when unreadable. */
static bool meminfo_now(const struct agent_config *c, struct proto_stats *st)
{
	return agent_read_meminfo(c, st) == 0;
}

/* The level a reclaim raises: MemFree plus the pages the balloon holds.  memtided inflates
 * while the agent reclaims, and the balloon takes free pages as they appear: MemFree alone
 * would call memory freed and taken at once "not freed" (agent_balloon.c). */
static uint64_t mem_free(const struct agent_config *c)
{
	struct proto_stats st;
	struct agent_balloon b;

	if (!meminfo_now(c, &st))
		return 0;
	if (agent_balloon_read(c, &b) < 0)
		b.held_bytes = 0;
	return st.mem_free_bytes + b.held_bytes;
}

struct run {
	const struct agent_config *c;
	uint64_t target;          /* bytes to free, after the floor cut */
	uint64_t start_free;      /* mem_free() at the start: MemFree plus what the balloon holds */
	uint64_t deadline_ms;     /* CLOCK_MONOTONIC */
	struct agent_growth base; /* the lowest use read during the request (agent_use_of) */
	uint64_t grew;            /* > 0: how far the guest's use rose above it; stopped */
	struct agent_growth_guard *guard; /* NULL when no guard thread runs */
	struct proto_reclaim_reply *rep;
	int tried, failed;
	struct agent_reclaim_pace pace;
};

static uint64_t freed_so_far(const struct run *r)
{
	uint64_t now = mem_free(r->c);

	return now > r->start_free ? now - r->start_free : 0;
}

/* Is the guest's use rising while we reclaim (the file comment, "Growth")?  Latches. */
static bool guest_grows(struct run *r)
{
	struct proto_stats st;

	if (!r->grew && r->guard)
		r->grew = agent_growth_guard_grew(r->guard);
	if (r->grew || !meminfo_now(r->c, &st))
		return r->grew > 0;
	r->grew = agent_growth_step(&r->base, agent_use_of(&st));
	return r->grew > 0;
}

static bool done(struct run *r)
{
	return freed_so_far(r) >= r->target || agent_now_ms() >= r->deadline_ms || guest_grows(r);
}

uint64_t agent_reclaim_pace(struct agent_reclaim_pace *p, uint32_t pause_ms, uint64_t took_ms)
{
	if (!pause_ms)
		return 0;
	p->busy_ms += took_ms;
	if (p->busy_ms < PACE_BUSY_MS)
		return 0;
	p->busy_ms = 0;
	return pause_ms;
}

/* A chunk took took_ms: pause when the pace says so, never past the deadline. */
static void pace_after(struct run *r, uint64_t took_ms)
{
	uint64_t ms = agent_reclaim_pace(&r->pace, r->c->reclaim_pause_ms, took_ms),
		 now = agent_now_ms();

	if (!ms || now >= r->deadline_ms || guest_grows(r))
		return;
	if (ms > r->deadline_ms - now)
		ms = r->deadline_ms - now;
	/* In slices, so a growth during the pause stops the request within one. */
	while (ms && !guest_grows(r)) {
		uint64_t slice = ms < PAUSE_SLICE_MS ? ms : PAUSE_SLICE_MS;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)slice * 1000000L};

		(void)nanosleep(&ts, NULL); /* EINTR: the growth guard, seen on the next turn */
		ms -= slice;
	}
}

/* Start a step record; returns it. */
static struct proto_reclaim_step *step_begin(struct run *r, enum proto_reclaim_method m)
{
	struct proto_reclaim_step *s = &r->rep->steps[r->rep->nr_steps++];

	memset(s, 0, sizeof(*s));
	s->method = m;
	/* compaction frees nothing: it does not make a request "tried" */
	if (m != PROTO_METHOD_COMPACT)
		r->tried++;
	return s;
}

static void step_end(struct run *r, struct proto_reclaim_step *s, uint64_t free0, uint64_t t0,
		     int err)
{
	uint64_t free1 = mem_free(r->c);

	s->freed_bytes = free1 > free0 ? free1 - free0 : 0;
	s->elapsed_ms = (uint32_t)(agent_now_ms() - t0);
	s->err = err < 0 ? -err : 0;
	if (s->err > 4095)
		s->err = EIO;
	if (err < 0 && s->freed_bytes == 0 && s->method != PROTO_METHOD_COMPACT)
		r->failed++;
}

/* Step 1 */
static void run_memcg(struct run *r, const char *file)
{
	struct proto_reclaim_step *s = step_begin(r, PROTO_METHOD_MEMCG);
	uint64_t free0 = mem_free(r->c), t0 = agent_now_ms();
	int err = 0;

	uint64_t chunk = CHUNK_FIRST;

	while (!done(r)) {
		uint64_t left = r->target - freed_so_far(r), c0 = agent_now_ms();
		char num[32];

		snprintf(num, sizeof(num), "%llu",
			 (unsigned long long)(left < chunk ? left : chunk));
		err = agent_write_file(file, num);
		/* EAGAIN: the kernel could not reclaim the whole chunk - it has no more; EINTR:
		 * the growth guard cut it short */
		if (err < 0)
			break;
		/* Size the next chunk by how long this one took: one write cannot be cut short,
		 * and a guest under load reclaims slowly (TCG, into zram: one 32 MiB write kept
		 * the agent from its timers for over 30 s, and memtided called it silent). */
		uint64_t took = agent_now_ms() - c0;
		if (took < CHUNK_FAST_MS && chunk < CHUNK_BYTES)
			chunk *= 2;
		else if (took > CHUNK_SLOW_MS && chunk > CHUNK_MIN)
			chunk /= 2;
		pace_after(r, took);
	}
	step_end(r, s, free0, t0, err == -EAGAIN || (err == -EINTR && guest_grows(r)) ? 0 : err);
}

/* Step 2 */
static void run_mglru(struct run *r, bool anon)
{
	struct proto_reclaim_step *s = step_begin(r, PROTO_METHOD_MGLRU);
	uint64_t free0 = mem_free(r->c), t0 = agent_now_ms();
	long page = sysconf(_SC_PAGESIZE);
	int err = 0;

	while (!done(r)) {
		uint64_t before = freed_so_far(r), left = r->target - before, c0 = agent_now_ms();

		err = agent_mglru_evict(
		    r->c, (left < CHUNK_BYTES ? left : CHUNK_BYTES) / (uint64_t)page + 1, anon);
		if (err < 0 || freed_so_far(r) < before + MIN_GAIN_BYTES)
			break;
		pace_after(r, agent_now_ms() - c0);
	}
	step_end(r, s, free0, t0, err == -EINTR && guest_grows(r) ? 0 : err);
}

/* Steps 3 and 4: one write to a /proc/sys/vm file. */
static void run_once(struct run *r, enum proto_reclaim_method m, const char *p)
{
	struct proto_reclaim_step *s = step_begin(r, m);
	uint64_t free0 = mem_free(r->c), t0 = agent_now_ms();
	char path[AGENT_PATH_MAX + 48];

	agent_path(r->c, p, path, sizeof(path));
	step_end(r, s, free0, t0, agent_write_file(path, "1"));
}

static void reclaim_steps(const struct agent_config *c, const struct proto_reclaim *req,
			  struct proto_reclaim_reply *rep);

/* The guest's own work first (why: the file comment, "Priority").  Linux keeps nice per
 * thread, and setpriority(PRIO_PROCESS, 0, ...) sets the calling thread's. */
void agent_reclaim_run(const struct agent_config *c, const struct proto_reclaim *req,
		       struct proto_reclaim_reply *rep)
{
	errno = 0;
	int before = getpriority(PRIO_PROCESS, 0);
	bool niced = errno == 0 && (int)c->reclaim_nice > before &&
		     setpriority(PRIO_PROCESS, 0, (int)c->reclaim_nice) == 0;

	reclaim_steps(c, req, rep);
	if (niced && setpriority(PRIO_PROCESS, 0, before) < 0)
		agent_log(AGENT_WARN,
			  "reclaim: cannot return to nice %d (%s): the agent stays at %u", before,
			  strerror(errno), c->reclaim_nice);
}

static void reclaim_steps(const struct agent_config *c, const struct proto_reclaim *req,
			  struct proto_reclaim_reply *rep)
{
	char memcg_file[AGENT_PATH_MAX + 32];
	struct proto_stats st;
	struct run r = {.c = c, .rep = rep};
	uint64_t t0 = agent_now_ms(), floor, headroom, avail0;
	bool anon = req->scope == PROTO_SCOPE_ANY, cut = false;
	uint32_t caps = agent_reclaim_caps(c);

	memset(rep, 0, sizeof(*rep));
	rep->requested_bytes = req->bytes;
	if (!meminfo_now(c, &st)) {
		rep->result = PROTO_RECLAIM_FAILED;
		snprintf(rep->message, sizeof(rep->message), "cannot read /proc/meminfo");
		return;
	}
	floor = agent_floor_bytes(c, st.mem_total_bytes);
	rep->floor_bytes = floor;
	avail0 = st.mem_available_bytes;
	headroom = avail0 > floor ? avail0 - floor : 0;
	r.target = req->bytes;
	if (r.target > headroom) {
		r.target = headroom;
		cut = true;
	}
	/* The same level freed_so_far() reads, balloon included: MemFree alone would count
	 * every page the balloon already held as freed by this request, and a request smaller
	 * than the balloon would end "done" before reclaiming anything (memtided's balloon
	 * waited on exactly that: "freed 217 of 128 MiB (done)" from a 216 MiB balloon). */
	r.start_free = mem_free(c);
	r.base.low = (struct agent_use){UINT64_MAX, UINT64_MAX};
	r.deadline_ms = t0 + req->deadline_ms;
	struct agent_growth_guard guard;
	int grc = r.target > 0 ? agent_growth_guard_start(&guard, c) : -ECANCELED;
	if (grc == 0)
		r.guard = &guard;
	else if (grc != -ECANCELED)
		agent_log(AGENT_WARN, "reclaim: no growth guard (%s): checked between chunks only",
			  strerror(-grc));
	if (r.target > 0) {
		/* Step 1: memory.reclaim, when it cannot touch anon against the scope */
		if ((caps & PROTO_CAP_RECLAIM_MEMCG) && (anon || st.swap_total_bytes == 0) &&
		    memcg_reclaim_path(c, memcg_file, sizeof(memcg_file)) && !done(&r))
			run_memcg(&r, memcg_file);
		/* Step 2: MGLRU eviction */
		if ((caps & PROTO_CAP_RECLAIM_MGLRU) && !done(&r))
			run_mglru(&r, anon);
		/* Step 3: clean page cache, when allowed */
		if ((caps & PROTO_CAP_RECLAIM_DROP_CACHES) && !done(&r))
			run_once(&r, PROTO_METHOD_DROP_CACHES, "/proc/sys/vm/drop_caches");
	}
	/* Step 4: compaction, when asked, even after the others met the target; not while the
	 * guest grows (it needs its memory, not 2 MiB blocks for the host) */
	if (r.guard) {
		agent_growth_guard_stop(r.guard);
		(void)guest_grows(&r); /* a growth the guard saw last */
		r.guard = NULL;
	}
	if (req->compact && (caps & PROTO_CAP_RECLAIM_COMPACT) && r.target > 0 && !r.grew)
		run_once(&r, PROTO_METHOD_COMPACT, "/proc/sys/vm/compact_memory");

	rep->freed_bytes = freed_so_far(&r);
	rep->mem_available_bytes = meminfo_now(c, &st) ? st.mem_available_bytes : 0;
	rep->elapsed_ms = (uint32_t)(agent_now_ms() - t0);
	if (rep->freed_bytes >= req->bytes) {
		rep->result = PROTO_RECLAIM_DONE;
	} else if (r.grew) { /* before the floor: the growth is why it ended, and the news */
		rep->result = PROTO_RECLAIM_PARTIAL;
		snprintf(rep->message, sizeof(rep->message),
			 "stopped: the guest's use grew by %llu MiB meanwhile",
			 (unsigned long long)(r.grew >> 20));
	} else if (cut) {
		rep->result = PROTO_RECLAIM_FLOOR;
		snprintf(rep->message, sizeof(rep->message),
			 "MemAvailable %llu MiB, floor %llu MiB: at most %llu MiB may go",
			 (unsigned long long)avail0 >> 20, (unsigned long long)floor >> 20,
			 (unsigned long long)headroom >> 20);
	} else if (r.tried == 0) {
		rep->result = PROTO_RECLAIM_UNSUPPORTED;
		snprintf(rep->message, sizeof(rep->message),
			 "no reclaim method for scope %s on this guest",
			 proto_reclaim_scope_name(req->scope));
	} else if (r.failed == r.tried && rep->freed_bytes == 0) {
		rep->result = PROTO_RECLAIM_FAILED;
		snprintf(rep->message, sizeof(rep->message), "every method failed (last: %s)",
			 strerror(rep->steps[rep->nr_steps - 1].err));
	} else {
		rep->result = PROTO_RECLAIM_PARTIAL;
		snprintf(rep->message, sizeof(rep->message), "%s",
			 agent_now_ms() >= r.deadline_ms ? "deadline reached"
							 : "the kernel freed no more");
	}
}
