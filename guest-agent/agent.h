/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent.h - libagent: the parts of memtide-agent, the program inside each guest.
 *
 * The agent is the guest's end of the host-agent protocol (proto/proto.h).  It reports what
 * only the guest knows and does what only the guest can do:
 *
 *   collectors  (agent_procfs.c)  /proc/meminfo, /proc/vmstat, /proc/pressure/memory and
 *                                 /proc/iomem -> stats and hello;
 *               (agent_mglru.c)   /sys/kernel/debug/lru_gen -> wss (after asking the
 *                                 kernel to age), and MGLRU eviction for reclaim;
 *   reclaim     (agent_reclaim.c) cgroup v2 memory.reclaim, MGLRU '-', drop_caches, then
 *                                 compaction, never below the MemAvailable floor;
 *   hints       (agent_hint.c)    a local socket where applications declare their memory
 *                                 hot or cold (virtual -> guest-physical via pagemap) or
 *                                 announce a need;
 *   transport   (agent_transport.c) virtio-serial port by name, AF_VSOCK, unix socket;
 *   loop        (agent_loop.c)    one poll() loop tying them together, with reconnect
 *                                 backoff and rate limits;
 *   config      (agent_config.c)  defaults, key=value file (libinih), flags.
 *
 * A file the guest kernel lacks is a missing capability (reported in hello), never an error.
 * Single-threaded: every function runs on the loop's thread unless its comment says so.
 * Functions return 0 or a negative errno unless stated.  Names are prefixed agent_.
 */
#ifndef MEMTIDE_AGENT_H
#define MEMTIDE_AGENT_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define AGENT_VERSION            "0.1.0"
#define AGENT_DEFAULT_PORT       "org.memtide.agent.0"
#define AGENT_DEFAULT_HINT_SOCK  "/run/memtide-agent.sock"
#define AGENT_DEFAULT_VSOCK_PORT 5253
#define AGENT_HOST_CID           2 /* VMADDR_CID_HOST */
#define AGENT_PATH_MAX           256

/* --version prints this after the version line; it is in the static binary for anyone to read. */
#define AGENT_LICENSE                                                                              \
	"Copyright (C) 2026 the memtide developers.\n"                                             \
	"License GPL-2.0-or-later: GNU GPL version 2 or later "                                    \
	"<https://gnu.org/licenses/gpl.html>.\n"                                                   \
	"This is free software: you are free to change and redistribute it.\n"                     \
	"There is NO WARRANTY, to the extent permitted by law.\n"

/* ======================================================================================
 * Config (agent_config.c)
 * ====================================================================================== */

enum agent_transport {
	AGENT_TR_VIRTIO = 1, /* virtio-serial port, found by name */
	AGENT_TR_VSOCK = 2,  /* AF_VSOCK to the host (CID 2) */
	AGENT_TR_UNIX = 3,   /* unix stream socket (tests, or a host-side relay) */
	AGENT_TR_FD = 4,     /* an inherited, connected fd (socketpair in tests); used once */
	AGENT_TR_AUTO = 5,   /* the default: vsock when the guest has a vsock transport,
			      * virtio-serial otherwise or when vsock does not reach the host */
};

struct agent_config {
	enum agent_transport transport;
	char port_name[64];          /* virtio-serial port name */
	char device[AGENT_PATH_MAX]; /* explicit device path (overrides the name lookup) */
	uint32_t vsock_cid;          /* default AGENT_HOST_CID */
	uint32_t vsock_port;
	char unix_path[108];           /* sun_path size */
	uint32_t fd;                   /* AGENT_TR_FD: the fd (the agent owns it from now) */
	char hint_socket[108];         /* "" disables the hint socket */
	char sys_root[AGENT_PATH_MAX]; /* prefix for /proc and /sys paths ("" in production) */
	uint32_t report_interval_ms;   /* stats period until the host configures it */
	uint32_t wss_interval_ms;      /* wss period (each one ages the guest MGLRU) */
	uint64_t floor_bytes;          /* never reclaim MemAvailable below max(this, ...) */
	uint32_t floor_percent;        /* ... this percentage of MemTotal) */
	bool allow_drop_caches;        /* guest admin allows dropping clean page cache */
	bool enable_mglru;             /* write 'y' to lru_gen/enabled at start if it reads 0 */
	uint32_t reclaim_nice;         /* reclaim for the host runs at this nice (0-19) */
	uint32_t reclaim_pause_ms;     /* ... and pauses this long after each second of it */
	uint32_t backoff_min_ms;       /* reconnect delays grow from here ... */
	uint32_t backoff_max_ms;       /* ... to here */
	double send_rate_per_s;        /* all frames to the host (token bucket) */
	double hint_rate_per_s;        /* hints forwarded to the host, every caller together */
	double hint_user_rate_per_s;   /* ... from each user other than root */
	bool hint_user_need;           /* users other than root may send need hints */
	uint32_t max_hint_clients;     /* concurrent hint socket connections */
	uint32_t log_level;            /* 0 errors, 1 + warnings, 2 + info, 3 + debug */
	uint32_t watch_interval_ms;    /* growth watch period; 0: no watch (agent_watch.c) */
	uint32_t watch_horizon_ms;     /* how far ahead growth of memory in use is projected */
	uint64_t watch_min_rate_bytes; /* growth slower than this per second is ignored */
};

/* Fill defaults: transport auto (vsock to the host's port 5253 when the guest has vsock,
 * else virtio port org.memtide.agent.0), 2 s reports, 10 s wss, floor
 * max(64 MiB, 5%), no drop_caches, backoff 100 ms .. 5 s, 20 frames/s, 5 hints/s (1/s per
 * user other than root, who may not send need), growth watch every 100 ms over a 2 s
 * horizon, ignoring growth under 16 MiB/s. */
void agent_config_defaults(struct agent_config *c);
/* Set one key from text (the file's and the flags' common path).  -EINVAL with a sentence
 * in err for an unknown key or a bad value; c is unchanged then. */
int agent_config_set(struct agent_config *c, const char *key, const char *value, char *err,
		     size_t errlen);
/* Read a key=value file (libinih; keys outside any [section], or in [agent]).  -errno if
 * it cannot be opened, -EINVAL (err says which line) on a bad line or value. */
int agent_config_load(struct agent_config *c, const char *path, char *err, size_t errlen);
/* The same over text in memory (name is what err calls it). */
int agent_config_load_text(struct agent_config *c, const char *name, const char *text, char *err,
			   size_t errlen);
/* Print every key with its current value, as a config file would hold it. */
void agent_config_dump(const struct agent_config *c, int fd);

/* ======================================================================================
 * Logging (agent_log.c)
 * ====================================================================================== */

void agent_log_init(int level, const char *ident);
void agent_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define AGENT_ERR   0
#define AGENT_WARN  1
#define AGENT_INFO  2
#define AGENT_DEBUG 3

/* ======================================================================================
 * Growth watch (agent_watch.c): a need hint before the guest runs out
 * ====================================================================================== */
/* The guest's use as the growth rules read it, and the lowest of each read so far. */
struct agent_use {
	uint64_t used; /* MemTotal - MemAvailable */
	uint64_t held; /* AnonPages + Shmem + swap in use: what processes hold (0: unknown) */
};
struct agent_growth {
	struct agent_use low;
};
/*
 * The guest's use as the growth rules read it.  used: MemTotal - MemAvailable (0 if less).
 * held: what the guest's processes hold, anonymous and shmem pages in RAM and in swap
 * (AnonPages + Shmem + SwapTotal - SwapFree); 0 when the kernel shows neither.  A growth is
 * a rise of both.  MemAvailable alone also falls while free pages are away from the free
 * lists: free page reporting takes up to 64 MiB of them at a time while the host discards
 * them, and compaction isolates some.  On the KVM host stand, where the host answers a
 * report slowly, that read as 18-33 MiB of growth within 100 ms, and the watch sent needs
 * (memtided gave the guest its memory back and held for 60 s) and the guard stopped
 * requests, with nothing in the guest growing; held does not move then.  Swap-out moves
 * pages from RAM to swap and leaves held level, as reclaim into zram leaves used level.
 */
static inline struct agent_use agent_use_of(const struct proto_stats *st)
{
	struct agent_use u = {
	    .used = st->mem_total_bytes > st->mem_available_bytes
			? st->mem_total_bytes - st->mem_available_bytes
			: 0,
	    .held = st->anon_bytes + st->shmem_bytes,
	};
	if (u.held && st->swap_total_bytes > st->swap_free_bytes)
		u.held += st->swap_total_bytes - st->swap_free_bytes;
	return u;
}
/* How far u rose above b: the lesser of the two rises (only used's, when held is unknown). */
static inline uint64_t agent_use_rise(struct agent_use b, struct agent_use u)
{
	uint64_t r = u.used > b.used ? u.used - b.used : 0;

	if (u.held && b.held) {
		uint64_t h = u.held > b.held ? u.held - b.held : 0;
		r = h < r ? h : r;
	}
	return r;
}
struct agent_watch {
	bool primed;
	uint64_t last_ms;
	struct agent_use last;   /* the use at the last step (agent_use_of) */
	uint64_t quiet_until_ms; /* no new need before this (one horizon after the last) */
	uint64_t quiet_used_max; /* ... unless in use grows past this: the last need's use */
};
/* One watch step with the guest's /proc/meminfo read at now_ms: the bytes to ask for in a
 * need hint (rounded up to MiB), or 0.  The growth is the rise of both used and held
 * (agent_use_of). */
uint64_t agent_watch_step(struct agent_watch *w, const struct agent_config *c, uint64_t now_ms,
			  const struct proto_stats *st);
/* /proc/meminfo (under sys_root), as the watch reads it.  0 or -errno. */
int agent_watch_read(const struct agent_config *c, struct proto_stats *st);

/* ======================================================================================
 * Collectors (agent_procfs.c)
 * ====================================================================================== */

/*
 * Read a whole small file (procfs/sysfs/debugfs) into buf, NUL-terminated.  Returns the
 * length, -ENOENT/-EACCES/... when unreadable, -EFBIG when it does not fit in cap-1.
 */
long agent_read_file(const char *path, char *buf, size_t cap);
/* Write a string to a control file (one write(2)).  0 or -errno. */
int agent_write_file(const char *path, const char *s);
/* path = sys_root + p */
void agent_path(const struct agent_config *c, const char *p, char *out, size_t cap);

/* Parsers on file text (pure; the tests feed them real files).  Each returns 0, or -EINVAL
 * when a required line is absent or malformed. */
int agent_parse_meminfo(const char *text, struct proto_stats *st);
/* One "Key:" line of meminfo text, kB turned into bytes; false when absent or malformed. */
bool agent_meminfo_get(const char *text, const char *key, uint64_t *bytes);
/* One "name value" line of vmstat text (clamped to PROTO_COUNTER_MAX); false when absent or
 * when no number follows the name. */
bool agent_vmstat_get(const char *text, const char *key, uint64_t *v);
int agent_parse_vmstat(const char *text, struct proto_stats *st);
int agent_parse_psi(const char *text, struct proto_psi *psi);
/* System RAM ranges (top-level lines only), ascending, up to max; returns the number
 * found (0 when all addresses read as 0: a non-root reader sees zeros). */
int agent_parse_iomem(const char *text, struct proto_range *r, uint32_t max);

/* The virtio balloon as the guest sees it (agent_balloon.c). */
struct agent_balloon {
	uint64_t pages;      /* 4 KiB pages the balloon holds now */
	uint64_t held_bytes; /* the same in bytes (guest page size) */
	bool in_mem_total;   /* deflate-on-oom: they still count in MemTotal, as allocated */
};
/* Pages held, from /proc/vmstat text: nr_balloon_pages, else balloon_inflate -
 * balloon_deflate.  -ENOENT when the kernel has no balloon counters. */
int agent_parse_balloon_pages(const char *text, uint64_t *pages);
/* Bit `bit` of a virtio features string ('0'/'1' per bit, bit 0 first): 0, 1 or -EINVAL. */
int agent_parse_virtio_feature(const char *text, unsigned bit);
/* Read the balloon now; -errno (and *b zeroed) when the guest has no balloon counters. */
int agent_balloon_read(const struct agent_config *c, struct agent_balloon *b);
/* MemTotal net of the pages a deflate-on-oom balloon holds (kept >= MemAvailable, MemFree). */
void agent_balloon_adjust(const struct agent_balloon *b, struct proto_stats *st);
/* /proc/meminfo as the agent reports it: parsed, then adjusted for the balloon.  -errno. */
int agent_read_meminfo(const struct agent_config *c, struct proto_stats *st);

/* A bounded buffer for one procfs file read whole (the largest, /proc/vmstat, is ~5 KiB on
 * 6.1; /proc/iomem on a big guest ~4 KiB). */
#define AGENT_FILE_BUF_BYTES (64u * 1024)

/* Collect a stats message now (agent_report.c).  caps receives PROTO_CAP_STATS and PROTO_CAP_PSI as found.
 * -errno only when /proc/meminfo is unreadable. */
int agent_collect_stats(const struct agent_config *c, struct proto_stats *st, uint32_t *caps);
/* Fill the guest facts of an agent hello (kernel, page size, RAM layout, capabilities
 * probed from the files present). */
void agent_collect_hello(const struct agent_config *c, struct proto_hello *h);
/* CLOCK_MONOTONIC in ms. */
uint64_t agent_now_ms(void);

/* ======================================================================================
 * MGLRU (agent_mglru.c)
 * ====================================================================================== */

/* One generation as /sys/kernel/debug/lru_gen prints it. */
struct agent_gen {
	uint32_t memcg_id;
	uint32_t node;
	uint64_t seq;
	uint64_t age_ms;
	uint64_t anon_pages;
	uint64_t file_pages;
};

/* An lruvec (memcg, node) and its generation numbers. */
struct agent_lruvec {
	uint32_t memcg_id;
	uint32_t node;
	uint64_t min_seq;
	uint64_t max_seq;
};

#define AGENT_MAX_LRUVECS 64
#define AGENT_MAX_GENS    256

/*
 * Parse lru_gen text: gens (up to max_gens, in file order) and lruvecs (up to max_vecs).
 * Returns the number of gens, -EINVAL on a malformed line.  *more is set when entries were
 * dropped for lack of room.
 */
int agent_lru_gen_parse(const char *text, struct agent_gen *gens, int max_gens,
			struct agent_lruvec *vecs, int max_vecs, int *nr_vecs, bool *more);
/* Fold gens into wss: gens sorted by age (youngest first, at most PROTO_MAX_GENS kept, the
 * rest summed into the bins only), bins with the given edges (ms). */
void agent_wss_fold(const struct agent_gen *gens, int n, bool complete, const uint64_t *edges_ms,
		    uint32_t nr_edges, uint32_t page_size, struct proto_wss *w);
/* Whether MGLRU is on (lru_gen/enabled non-zero) and debugfs lru_gen readable. */
bool agent_mglru_available(const struct agent_config *c);
/* Turn MGLRU on if it is off: 1 turned on, 0 already on, -errno (no such file, no right). */
int agent_mglru_enable(const struct agent_config *c);
/* Age every lruvec ('+ memcg node max_seq'), then read and fold into *w.  -ENOENT when
 * MGLRU is unavailable. */
int agent_mglru_wss(const struct agent_config *c, const uint64_t *edges_ms, uint32_t nr_edges,
		    struct proto_wss *w);
/* Evict the oldest generations of every lruvec with '- memcg node min_seq swappiness
 * nr_pages', spreading nr_pages over the lruvecs.  anon: swappiness 200 (anon allowed) or
 * 0 (file only).  0 or -errno. */
int agent_mglru_evict(const struct agent_config *c, uint64_t nr_pages, bool anon);

/* ======================================================================================
 * Reclaim (agent_reclaim.c)
 * ====================================================================================== */

/* Capabilities of reclaim found on this guest (PROTO_CAP_RECLAIM_* bits). */
uint32_t agent_reclaim_caps(const struct agent_config *c);
/* The cgroup v2 mount point from /proc/mounts into out; -ENOENT when none. */
int agent_cgroup2_root(const struct agent_config *c, char *out, size_t cap);
/* The MemAvailable floor in bytes for this MemTotal. */
uint64_t agent_floor_bytes(const struct agent_config *c, uint64_t mem_total_bytes);
/* Reclaim's pauses (agent_reclaim.c, "Pauses"): add a chunk's duration; returns how long to
 * pause now (pause_ms once a second of work has built up, else 0; 0 when pause_ms is 0). */
struct agent_reclaim_pace {
	uint64_t busy_ms; /* reclaim work since the last pause */
};
uint64_t agent_reclaim_pace(struct agent_reclaim_pace *p, uint32_t pause_ms, uint64_t took_ms);
/* A thread that calls fn(arg) every period_ms, the first time at once, until stopped
 * (agent_ticker.c).  fn runs with the ticker's mutex held, so once agent_ticker_stop returns
 * it is not running and never runs again.  start: 0 or -errno; stop is a no-op on a ticker
 * that did not start. */
struct agent_ticker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool over, running;
	uint32_t period_ms;
	void (*fn)(void *arg);
	void *arg;
};
int agent_ticker_start(struct agent_ticker *t, uint32_t period_ms, void (*fn)(void *), void *arg);
void agent_ticker_stop(struct agent_ticker *t);
/*
 * The growth guard (agent_reclaim_guard.c): while a request runs, a thread reads the guest's
 * use and, when it rises AGENT_GROWTH_STOP_BYTES above the lowest it read, marks the request
 * grown and interrupts the reclaiming thread (SIGURG: memory.reclaim returns EINTR at its
 * next pass, a pause wakes).
 * start: 0, or -errno (no guard: the request still checks between its chunks).  Started and
 * stopped by the thread that reclaims.
 */
#define AGENT_GROWTH_STOP_BYTES (16ULL << 20)
struct agent_growth_guard {
	const struct agent_config *c;
	pthread_t reclaimer;
	struct agent_ticker tick;
	_Atomic uint64_t grew;    /* > 0: how far the use rose above its lowest */
	struct agent_growth base; /* the lowest use read since the guard started */
};
int agent_growth_guard_start(struct agent_growth_guard *g, const struct agent_config *c);
uint64_t agent_growth_guard_grew(struct agent_growth_guard *g);
void agent_growth_guard_stop(struct agent_growth_guard *g);
/* The rule, pure: lower g's lowest to u (each figure apart; set both to UINT64_MAX to start);
 * the rise above them when it is AGENT_GROWTH_STOP_BYTES or more, else 0. */
uint64_t agent_growth_step(struct agent_growth *g, struct agent_use u);
/*
 * Carry out a reclaim request (see docs/protocol.md "reclaim"): methods best first, each in
 * chunks, stopping at the request's size, its deadline, or the floor; compaction last when
 * asked.  Fills *rep completely (re excluded).  Blocks the caller for at most about
 * deadline_ms (one chunk may run over).
 */
void agent_reclaim_run(const struct agent_config *c, const struct proto_reclaim *req,
		       struct proto_reclaim_reply *rep);

/* ======================================================================================
 * Hints (agent_hint.c)
 * ====================================================================================== */

/*
 * The hint socket speaks one text line per request (one request per connection), one line
 * back:
 *   "hot ADDR LEN [PID]" | "cold ADDR LEN [PID]"   virtual memory, hex or decimal, of the
 *                        caller, or of PID when the caller is root or owns PID
 *   "need BYTES WITHIN_MS"
 * Reply: "ok N" (N = guest-physical ranges sent, " truncated" when some were left out) or
 * "error REASON".
 */
#define AGENT_HINT_LINE_MAX 256

/*
 * Open /proc/PID/pagemap (under sys_root) for a caller with uid: root may open any, anyone
 * else only a process whose /proc/PID it owns (-EPERM).  The check and the open go through
 * one fd of /proc/PID, so a PID reused in between is not someone else's.  fd or -errno.
 */
int agent_pagemap_open(const struct agent_config *c, pid_t pid, uid_t uid);
/*
 * Translate [vaddr, vaddr+len) into guest-physical ranges through an open pagemap (pfn bits
 * 0-54, present bit 63; pages not present are skipped; runs of adjacent frames are merged).
 * exclusive_only: skip pages the process shares with others (bit 56 clear).  Up to max
 * ranges; *truncated when more existed.  Returns the number of ranges, -EPERM when the pfns
 * read as zero (no CAP_SYS_ADMIN), -EACCES when every resident page was shared and
 * skipped, -EINVAL for an empty or over-4-GiB range, -errno.  Reads at most len/4096
 * entries, in chunks of 512.
 */
int agent_pagemap_read(int fd, uint64_t vaddr, uint64_t len, bool exclusive_only,
		       struct proto_range *r, uint32_t max, bool *truncated);
/* Both for a process of this program's choosing (root's view, every page). */
int agent_pagemap_ranges(const struct agent_config *c, pid_t pid, uint64_t vaddr, uint64_t len,
			 struct proto_range *r, uint32_t max, bool *truncated);
/* One request from the hint socket, parsed.  A hot/cold request may cover more ranges than
 * one hint message holds (PROTO_MAX_HINT_RANGES); the loop sends it as several. */
#define AGENT_HINT_MAX_RANGES (10 * PROTO_MAX_HINT_RANGES)
struct agent_hint_req {
	struct proto_hint head;     /* kind, pid, need_bytes, within_ms; no ranges */
	struct proto_range *ranges; /* hot/cold: heap, AGENT_HINT_MAX_RANGES; caller frees */
	uint32_t nr_ranges;
	bool truncated; /* more ranges existed than AGENT_HINT_MAX_RANGES */
};
/* Parse one request line from a caller (pid, uid from SO_PEERCRED) - runs the pagemap
 * translation.  0, or -errno with a reason in err (-EPERM: PID not the caller's, or a need
 * from a user other than root without hint_user_need; -EACCES: only shared pages there;
 * -ENOENT: nothing resident); req->ranges is NULL after an error. */
int agent_hint_parse(const struct agent_config *c, const char *line, pid_t pid, uid_t uid,
		     struct agent_hint_req *req, char *err, size_t errlen);

/*
 * Who may use the hint socket how much (agent_hint_guard.c).  Root is bounded only by the
 * socket's total rate and slot count; every other user by its own rate
 * (hint_user_rate_per_s, burst AGENT_HINT_USER_BURST), by AGENT_HINT_USER_CONNS connections
 * at once, and may not take the last AGENT_HINT_ROOT_SLOTS slots nor the last
 * AGENT_HINT_ROOT_RESERVE tokens of the total rate: a user flooding the socket leaves root's
 * hints their way.  A connection must deliver its line within AGENT_HINT_LINE_MS.
 * Memory: AGENT_HINT_PEERS rate entries, reused oldest first.  Pure (time is an argument).
 */
#define AGENT_HINT_PEERS        16
#define AGENT_HINT_BURST        10.0 /* the socket's bucket: hint_rate_per_s, this burst */
#define AGENT_HINT_USER_CONNS   2
#define AGENT_HINT_ROOT_SLOTS   1
#define AGENT_HINT_ROOT_RESERVE 2.0
#define AGENT_HINT_USER_BURST   3.0
#define AGENT_HINT_LINE_MS      2000
struct agent_hint_peer {
	bool used;
	uid_t uid;
	uint64_t seen_ms;
	struct proto_rate rate;
};
struct agent_hint_guard {
	struct proto_rate all; /* hint_rate_per_s: every hint the socket forwards */
	double user_rate_per_s;
	uint32_t max_clients;
	struct agent_hint_peer peers[AGENT_HINT_PEERS];
};
void agent_hint_guard_init(struct agent_hint_guard *g, const struct agent_config *c);
/* May a new connection from uid take a slot, with open_total connections open and
 * open_by_uid of them uid's?  0, or -EBUSY (no slot) / -EUSERS (uid has its share). */
int agent_hint_guard_admit(const struct agent_hint_guard *g, uid_t uid, uint32_t open_total,
			   uint32_t open_by_uid);
/* Spend up to want hint tokens for uid at now_ms: the number granted (0..want). */
uint32_t agent_hint_guard_take(struct agent_hint_guard *g, uid_t uid, uint32_t want,
			       uint64_t now_ms);
/* Listen on the hint socket path (a stale socket there is replaced).  fd or -errno. */
int agent_hint_listen(const char *path);
/* The `memtide-agent hint` client: send one request line to the socket, print the reply.
 * Returns 0 on "ok", 1 on an error reply, -errno when the agent cannot be reached. */
int agent_hint_client(const char *sock_path, const char *line, char *reply, size_t cap);

/* ======================================================================================
 * Transport (agent_transport.c)
 * ====================================================================================== */

/* Find the /dev node of a virtio-serial port by name: /dev/virtio-ports/NAME if it exists,
 * else the vportNpM whose /sys/class/virtio-ports/vportNpM/name matches.  -ENOENT. */
int agent_find_virtio_port(const struct agent_config *c, char *out, size_t cap);
/* What the transport remembers between connections. */
struct agent_transport_state {
	bool fd_used;              /* AGENT_TR_FD: the inherited fd was taken */
	enum agent_transport used; /* what the last open used (auto: vsock or virtio) */
	bool prefer_virtio;        /* auto: vsock did not reach the host last time */
	bool said_unprivileged;    /* the privileged-port warning was logged */
};
/* Open the configured transport, non-blocking.  Returns the fd, or -errno (-ENOENT: no such
 * port yet, or the inherited fd was used already (ts->fd_used); -ECONNREFUSED: host not
 * listening).  A vsock connection comes from a privileged port (below 1024) when the agent
 * may bind one: memtided accepts the agent only from such a port, so that no unprivileged
 * guest process can pose as the agent (only root may open the virtio-serial port either).
 * ts->used says which transport the fd is. */
int agent_transport_open(const struct agent_config *c, struct agent_transport_state *ts);
/* Auto mode: how the last connection went (it reached the host: a hello came back).  One that
 * did not makes the next try start with the other transport. */
void agent_transport_result(const struct agent_config *c, struct agent_transport_state *ts,
			    bool reached_host);
/* Does this guest have a vsock transport (a CID of its own)? */
bool agent_vsock_present(const struct agent_config *c);

/* ======================================================================================
 * The loop (agent_loop.c)
 * ====================================================================================== */

struct agent;

/* A new agent for cfg (copied).  -ENOMEM. */
int agent_new(const struct agent_config *cfg, struct agent **out);
void agent_free(struct agent *a);
/* Run until *stop becomes non-zero or agent_stop() is called: connect, hello, report,
 * serve requests and hints, reconnect after any disconnect.  Returns 0. */
int agent_run(struct agent *a, volatile sig_atomic_t *stop);
/* Ask agent_run to return soon; async-signal-safe and thread-safe (writes to a pipe). */
void agent_stop(struct agent *a);

/* Counters (for tests and the log line at exit). */
struct agent_counters {
	uint64_t connects;    /* connections that completed the handshake */
	uint64_t disconnects; /* connections lost (EOF, error, garbage, refused) */
	uint64_t frames_in;
	uint64_t frames_out;
	uint64_t rejected;     /* frames answered with an error */
	uint64_t rate_dropped; /* reports not sent because of the send rate limit */
	uint64_t stats_sent;
	uint64_t wss_sent;
	uint64_t hints_sent;
	uint64_t reclaims;
	uint64_t watch_needs; /* need hints the growth watch sent */
};
/* Thread-safe snapshot (the tests read it from another thread). */
void agent_get_counters(struct agent *a, struct agent_counters *out);

#endif /* MEMTIDE_AGENT_H */
