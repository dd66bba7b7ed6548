/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * agent_link.h - the host side of one VM's connection to its guest agent (proto).
 *
 * Two transports, one protocol:
 *   virtio-serial  memtided connects to the agent channel's host-side unix socket (QEMU
 *                  listens on it: a libvirt <channel type='unix'> with <source mode='bind'>,
 *                  or -chardev socket,server=on);
 *   vsock          the agent connects to memtided's vhost-user-vsock back end
 *                  (host/vsock/vsock_service.c), which hands the stream over as one end of a
 *                  socketpair through an fd source (mtd_agent_link_set_fd_source).
 * A stream from the fd source replaces whatever the link had: the agent chose vsock (or
 * restarted), so a virtio-serial session, or an older vsock one, is over.  On a connection
 * memtided sends hello and config, and then receives the agent's stats, wss reports, hints
 * and reclaim replies.  It sends reclaim requests, and pings (round-trip times are kept).
 *
 * Everything from the agent is untrusted: frames go through proto's bounded reader, strict
 * decoder and error budget; a peer that keeps sending garbage is disconnected and the link
 * reconnects after an exponential backoff.  Figures within the wire's bounds but beyond the
 * VM (4 PiB used of 1 GiB, a counter up 2^50 in a second) are clamped on arrival and the
 * peer marked untrusted (agent_bounds.h).  Nothing the agent says can touch another VM:
 * the link belongs to one VM's loop thread and writes only into its own fields.  Memory is
 * bounded: the reader (<= 1 MiB + 4), the writer (256 KiB), one stats, one wss, HINT_RING
 * hints.
 *
 * Thread context: one link per VM loop thread; not thread-safe.
 */
#ifndef MEMTIDE_HOST_AGENT_LINK_H
#define MEMTIDE_HOST_AGENT_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

#define MTD_AGENT_HINT_RING 8

struct mtd_agent_link;

/* A new link to the socket at path ("": none, streams come from an fd source only); it
 * connects on the first mtd_agent_link_service.
 * interval_ms sets the agent's report and wss intervals.  0 or -ENOMEM / -ENAMETOOLONG. */
int mtd_agent_link_new(const char *path, uint64_t interval_ms, struct mtd_agent_link **out);
void mtd_agent_link_free(struct mtd_agent_link *l);

/*
 * Take streams from take_fd(ctx) too: it returns a connected, non-blocking stream fd that
 * the link then owns, or a negative errno when there is none (called on every service).
 * A link made with path "" has no virtio-serial socket: name is then what logs call it.
 */
void mtd_agent_link_set_fd_source(struct mtd_agent_link *l, int (*take_fd)(void *ctx), void *ctx,
				  const char *name);
/* Ping the agent every interval_ms while the link is ready (0: never). */
void mtd_agent_link_set_ping(struct mtd_agent_link *l, uint64_t interval_ms);
/* Round trips of the last pings (up to 256): median and 99th percentile in microseconds,
 * and how many the figures rest on (0: none yet). */
void mtd_agent_link_rtt(const struct mtd_agent_link *l, uint64_t *p50_us, uint64_t *p99_us,
			unsigned *samples);
/* Every ping answered since the link was made, and their round trips added up (for a
 * Prometheus summary's _count and _sum). */
void mtd_agent_link_rtt_total(const struct mtd_agent_link *l, uint64_t *count, uint64_t *sum_us);
/* While a ping is in flight: when its answer is due at the latest for the round trip to be
 * worth measuring (sent + 50 ms); 0 when none is.  The VM loop holds its tick until then,
 * so that a tick's QMP calls do not show up as the channel's latency. */
uint64_t mtd_agent_link_ping_due_back(const struct mtd_agent_link *l);
/* "vsock" or "virtio-serial" while connected, "" when not. */
const char *mtd_agent_link_transport(const struct mtd_agent_link *l);

/* For poll(): the fd (-1 when not connected) and the events to wait for. */
int mtd_agent_link_fd(const struct mtd_agent_link *l);
short mtd_agent_link_events(const struct mtd_agent_link *l);
/* When the link wants to be serviced next without fd activity (reconnect), CLOCK_MONOTONIC
 * ms; UINT64_MAX for never. */
uint64_t mtd_agent_link_deadline(const struct mtd_agent_link *l);

/* Connect when due, read and handle what arrived, flush what is queued.  Never blocks. */
void mtd_agent_link_service(struct mtd_agent_link *l, uint64_t now_ms);

/* Handshake done (hello both ways, versions agreed). */
bool mtd_agent_link_ready(const struct mtd_agent_link *l);
/* CLOCK_MONOTONIC ms of the last valid message (0: never). */
uint64_t mtd_agent_link_last_heard(const struct mtd_agent_link *l);
/* Is the agent busy with our reclaim request (not answered yet, and its deadline passed by
 * less than silence_ms)?  Its loop does not report while the kernel reclaims, so it is not
 * silent then.  Never longer than silence_ms after it was last heard plus the deadline and
 * the 5 s before a reply is late: a request to an agent already quiet excuses no more. */
bool mtd_agent_link_reclaiming(const struct mtd_agent_link *l, uint64_t now_ms,
			       uint64_t silence_ms);
/* The agent's hello (valid when ready). */
const struct proto_hello *mtd_agent_link_hello(const struct mtd_agent_link *l);

/* The newest stats / wss report, and a counter that moves with each new one.  Sizes are
 * within the VM, and the vmstat counters count from the link's start (agent_bounds.h). */
const struct proto_stats *mtd_agent_link_stats(const struct mtd_agent_link *l, uint64_t *seq);
const struct proto_wss *mtd_agent_link_wss(const struct mtd_agent_link *l, uint64_t *seq);
/* The wss bin edges memtided asks the agent for at interval_ms (6 of them, into edges_ms):
 * half-way between whole intervals, where the agent's generations never fall. */
unsigned mtd_agent_wss_edges(uint64_t interval_ms, uint64_t *edges_ms);
/* Take the oldest unread hot/cold hint (copied to *out): true, or false when none. */
bool mtd_agent_link_take_hint(struct mtd_agent_link *l, struct proto_hint *out);
/* Take the bytes of memory the agent has announced it needs since the last call (sum). */
uint64_t mtd_agent_link_take_need(struct mtd_agent_link *l);

/* Ask the agent to reclaim bytes.  0, -ENOTCONN (not ready), -EBUSY (one is outstanding, or
 * the last went unanswered past its deadline and the agent has said nothing since), -ENOSPC
 * (the agent is not reading). */
int mtd_agent_link_reclaim(struct mtd_agent_link *l, uint64_t bytes, bool anon_too,
			   uint32_t deadline_ms, uint64_t now_ms);
/* The newest reclaim reply, and a counter that moves with each. */
const struct proto_reclaim_reply *mtd_agent_link_reclaim_reply(const struct mtd_agent_link *l,
							       uint64_t *seq);
/* The deadline memtided gave the request that reply answers (0: no reply yet): a reply
 * whose elapsed_ms reached it ran out of time (decide/steady.h, slow). */
uint32_t mtd_agent_link_reply_deadline(const struct mtd_agent_link *l);

/* The VM's RAM: no figure the agent gives of its guest's memory may exceed it
 * (agent_bounds.h); 0 while not known.  Set before each service: QEMU may change. */
void mtd_agent_link_set_ram(struct mtd_agent_link *l, uint64_t ram_bytes);
/* "" while the agent's figures have all been within its VM this session; else a sentence
 * on the first one that was not (clamped, and the peer marked untrusted).  *clamped (may be
 * NULL): figures clamped since the link was made. */
const char *mtd_agent_link_untrusted(const struct mtd_agent_link *l, uint64_t *clamped);

/* Counters for logs and tests. */
struct mtd_agent_link_counters {
	uint64_t connects, disconnects, frames, rejected, dropped;
	uint64_t pings, pongs; /* sent, and answered in time */
	uint64_t rehellos;     /* handshakes again on an open stream (a restarted agent) */
};
void mtd_agent_link_counters(const struct mtd_agent_link *l, struct mtd_agent_link_counters *c);

#endif /* MEMTIDE_HOST_AGENT_LINK_H */
