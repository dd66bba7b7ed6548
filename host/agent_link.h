/*
 * agent_link.h - the host side of one VM's connection to its guest agent (proto).
 *
 * memtided connects to the agent channel's host-side unix socket (QEMU listens on it: a
 * libvirt <channel type='unix'> with <source mode='bind'>, or -chardev socket,server=on),
 * sends hello and config, and then receives the agent's stats, wss reports, hints and
 * reclaim replies.  It sends reclaim requests.
 *
 * Everything from the agent is untrusted: frames go through proto's bounded reader, strict
 * decoder and error budget; a peer that keeps sending garbage is disconnected and the link
 * reconnects after an exponential backoff.  Nothing the agent says can touch another VM:
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

/* A new link to the socket at path; it connects on the first mtd_agent_link_service.
 * interval_ms sets the agent's report and wss intervals.  0 or -ENOMEM / -ENAMETOOLONG. */
int mtd_agent_link_new(const char *path, uint64_t interval_ms, struct mtd_agent_link **out);
void mtd_agent_link_free(struct mtd_agent_link *l);

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
/* The agent's hello (valid when ready). */
const struct proto_hello *mtd_agent_link_hello(const struct mtd_agent_link *l);

/* The newest stats / wss report, and a counter that moves with each new one. */
const struct proto_stats *mtd_agent_link_stats(const struct mtd_agent_link *l, uint64_t *seq);
const struct proto_wss *mtd_agent_link_wss(const struct mtd_agent_link *l, uint64_t *seq);
/* Take the oldest unread hot/cold hint (copied to *out): true, or false when none. */
bool mtd_agent_link_take_hint(struct mtd_agent_link *l, struct proto_hint *out);
/* Take the bytes of memory the agent has announced it needs since the last call (sum). */
uint64_t mtd_agent_link_take_need(struct mtd_agent_link *l);

/* Ask the agent to reclaim bytes.  0, -ENOTCONN (not ready), -EBUSY (one is outstanding),
 * -ENOSPC (the agent is not reading). */
int mtd_agent_link_reclaim(struct mtd_agent_link *l, uint64_t bytes, bool anon_too,
			   uint32_t deadline_ms, uint64_t now_ms);
/* The newest reclaim reply, and a counter that moves with each. */
const struct proto_reclaim_reply *mtd_agent_link_reclaim_reply(const struct mtd_agent_link *l,
							       uint64_t *seq);

/* Counters for logs and tests. */
struct mtd_agent_link_counters {
	uint64_t connects, disconnects, frames, rejected, dropped;
	uint64_t rehellos; /* handshakes again on an open stream (a restarted agent) */
};
void mtd_agent_link_counters(const struct mtd_agent_link *l, struct mtd_agent_link_counters *c);

#endif /* MEMTIDE_HOST_AGENT_LINK_H */
