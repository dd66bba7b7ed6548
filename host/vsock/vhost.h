/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost.h - memtided's vhost-user back end for QEMU's vhost-user-vsock-pci: the session
 * with QEMU (vu_session.c) and the virtio-vsock device behind it (vsock_dev.c).
 *
 * Why a back end of our own: Debian 12 ships no libvhost-user (QEMU keeps it as an internal
 * subproject) and DPDK's librte_vhost serves virtio-net; the part of the protocol a vsock
 * device needs (features, memory table, two rings, config) is ~1000 lines written from
 * QEMU's docs/interop/vhost-user.rst and the virtio 1.2 specification.
 *
 * Roles: QEMU is the front end and owns the device as the guest sees it (PCI, config space
 * cache, and the vsock event queue, which QEMU keeps to itself: the back end has rings 0
 * rx and 1 tx only).  We are the back end: we read the guest's packets from the tx ring and
 * write ours into the buffers it posts on the rx ring, in the guest's memory, which QEMU
 * shares with us (memory-backend-memfd,share=on) through SET_MEM_TABLE.
 *
 * Pure state machines: nothing here polls, sleeps, reads a clock or logs by itself.  The
 * embedding (host/vsock/vsock_service.c) owns the socket and the eventfds, calls in when they
 * are readable, and moves the agent's bytes between the device and a socketpair.
 * Thread context: a session and its device belong to one thread.
 */
#ifndef MEMTIDE_HOST_VHOST_H
#define MEMTIDE_HOST_VHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vq;
struct vu_mem;

/* ======================================================================================
 * The vhost-user session (vu_session.c)
 * ====================================================================================== */

/* What the device tells the session: its rings, features and config space. */
struct vu_device_ops {
	unsigned nr_queues;    /* rings the back end serves */
	uint64_t features;     /* virtio device feature bits offered beyond VERSION_1 */
	uint32_t config_bytes; /* size of the device's config space */
	/* Fill len bytes of the config space from off (already checked to lie inside
	 * config_bytes).  0 or -errno. */
	int (*get_config)(void *dev, uint32_t off, uint8_t *buf, uint32_t len);
};

struct vu_session;

struct vu_session_counters {
	uint64_t messages;   /* every message read */
	uint64_t refused;    /* failed vu_msg_check or a handler: answered with a failure */
	uint64_t mem_tables; /* SET_MEM_TABLE applied */
	uint64_t kicks;      /* kick eventfds drained */
};

/* A session on a connected socket; dev is passed back to ops.  0 or -ENOMEM. */
int vu_session_new(const struct vu_device_ops *ops, void *dev, struct vu_session **out);
/* Unmap the guest memory and close the ring eventfds (never the socket). */
void vu_session_free(struct vu_session *s);

/*
 * Read and handle one message from fd (blocking for the rest of a message once its first
 * byte is there; the caller sets SO_RCVTIMEO).  Returns 0 (handled: applied, or refused
 * with a failure reply and no state change), -EAGAIN (nothing to read), -EPIPE (QEMU
 * closed), -EPROTO (a broken envelope: close the connection), -errno (socket error).
 * vu_session_error() says what the last refusal or failure was.
 */
int vu_session_read(struct vu_session *s, int fd);
const char *vu_session_error(const struct vu_session *s);
/* Monotonic count of refusals and failures; a change means vu_session_error is new. */
uint64_t vu_session_error_seq(const struct vu_session *s);

/* Ring q's kick eventfd to poll (-1: none), and the drain after it was readable. */
int vu_session_kick_fd(const struct vu_session *s, unsigned q);
void vu_session_kicked(struct vu_session *s, unsigned q);
struct vq *vu_session_ring(struct vu_session *s, unsigned q);
const struct vu_mem *vu_session_mem(const struct vu_session *s);
/* QEMU began this session from the start (GET_FEATURES or SET_OWNER seen).  false on a
 * connection to a QEMU that had set the device up with an earlier back end. */
bool vu_session_initialised(const struct vu_session *s);
/* Some ring has been started (a kick fd set) on this connection. */
bool vu_session_started(const struct vu_session *s);
void vu_session_counters(const struct vu_session *s, struct vu_session_counters *c);

/* One region of the guest's RAM as QEMU described it. */
struct vu_layout_region {
	uint64_t gpa;       /* guest-physical start */
	uint64_t bytes;     /* length */
	uint64_t qemu_va;   /* where QEMU maps it in its own address space */
	uint64_t fd_offset; /* offset in QEMU's memory backend (memfd) */
};
/* The memory table in force: up to max regions into out; returns how many (0: none yet),
 * and *generation (moves with each new table). */
unsigned vu_session_layout(const struct vu_session *s, struct vu_layout_region *out, unsigned max,
			   uint64_t *generation);

/* ======================================================================================
 * The virtio-vsock device (vsock_dev.c)
 *
 * One port is served: the agent's (default 5253) on the host (CID 2).  A guest connects to
 * it from a privileged source port (< 1024, so only root in the guest can be the agent, as
 * only root can open the virtio-serial port); a second such connection replaces the first
 * (a restarted agent).  Every other request is refused with a reset.
 *
 * Flow control (virtio 1.2, 5.10.6.3): each side advertises buf_alloc and the bytes it has
 * consumed (fwd_cnt); a sender keeps its bytes in flight within buf_alloc - (tx_cnt -
 * peer fwd_cnt).  We advertise VSOCK_CONN_BUF and hold exactly that much per direction:
 * a guest that sends beyond its credit is reset, never buffered.
 * ====================================================================================== */

#define VSOCK_CONN_BUF     (64u * 1024) /* bytes buffered per direction */
#define VSOCK_CTRL_QUEUE   32           /* control packets waiting for an rx buffer */
#define VSOCK_DEFAULT_PORT 5253
#define VSOCK_DEFAULT_CID  3

struct vsock_dev;

enum vsock_log_level { VSOCK_LOG_ERR = 0, VSOCK_LOG_WARN, VSOCK_LOG_NOTICE, VSOCK_LOG_INFO };

struct vsock_dev_config {
	uint64_t guest_cid; /* the guest's address (config space), > 2 */
	uint32_t port;      /* the one port served on the host */
	/* Optional: one line per noteworthy event (connection, refusal, violation). */
	void (*log)(void *ctx, enum vsock_log_level level, const char *msg);
	void *log_ctx;
};

struct vsock_dev_counters {
	uint64_t rx_packets, tx_packets; /* to / from the guest */
	uint64_t rx_bytes, tx_bytes;     /* payload */
	uint64_t connects;               /* connections accepted */
	uint64_t refused;                /* requests answered with a reset */
	uint64_t resets_sent;
	uint64_t bad_packets;  /* failed vsock_hdr_check or came on a broken chain */
	uint64_t ctrl_dropped; /* control packets dropped with the queue full */
	uint64_t credit_violations;
};

/* 0, -EINVAL (cid <= 2 or port 0) or -ENOMEM. */
int vsock_dev_new(const struct vsock_dev_config *cfg, struct vsock_dev **out);
void vsock_dev_free(struct vsock_dev *d);
/* The session's device ops for this device (2 rings, config = guest_cid). */
extern const struct vu_device_ops vsock_dev_ops;

/* Accept connections to the port (someone reads them); when false, requests get a reset. */
void vsock_dev_set_accepting(struct vsock_dev *d, bool on);

/*
 * Move packets: at most budget chains from the tx ring (the guest's packets), then as many
 * of ours as the rx ring has buffers for (control packets first, then data within the
 * guest's credit).  Signals the guest through the rings' call fds.  Returns true when work
 * is left (the budget ran out): call again without waiting for a kick.
 */
bool vsock_dev_process(struct vsock_dev *d, struct vq *rx, struct vq *tx, const struct vu_mem *m,
		       unsigned budget);

/* The connection as the host side sees it. */
struct vsock_conn_view {
	uint64_t gen;    /* moves with each new connection (0: none ever) */
	bool open;       /* a connection exists (possibly closing) */
	bool guest_done; /* the guest sends no more: EOF once in_bytes is drained */
	uint32_t guest_port;
	uint32_t in_bytes; /* guest -> host bytes waiting for the host */
	uint32_t out_room; /* bytes the host may queue for the guest now */
};
void vsock_dev_conn(const struct vsock_dev *d, struct vsock_conn_view *v);
/* The longest contiguous run of guest -> host bytes (*p), and its length. */
size_t vsock_dev_in_peek(const struct vsock_dev *d, const uint8_t **p);
/* The host took n of them: the guest gets that credit back. */
void vsock_dev_in_consume(struct vsock_dev *d, size_t n);
/* Queue up to n bytes for the guest; returns how many were taken. */
size_t vsock_dev_out_push(struct vsock_dev *d, const void *buf, size_t n);
/* The host side is gone: what is queued for the guest goes first, then a shutdown and a
 * reset, and the connection slot is free. */
void vsock_dev_host_close(struct vsock_dev *d);
/* Forget the connection at once (the session ended: the guest's rings are gone).  Sends
 * nothing. */
void vsock_dev_drop(struct vsock_dev *d);
void vsock_dev_counters(const struct vsock_dev *d, struct vsock_dev_counters *c);

#endif /* MEMTIDE_HOST_VHOST_H */
