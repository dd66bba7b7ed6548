/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vsock_service.h - memtided as the device back end of QEMU's vhost-user-vsock-pci: every
 * managed VM gets a vsock to memtided with no kernel module (no vhost_vsock on the host),
 * and memtided learns the guest's RAM layout from QEMU's memory table.
 *
 * Who listens.  QEMU does (-chardev socket,path=P,server=on; wait=on, the default) and
 * memtided connects.  QEMU 7.2's vhost-user-vsock must have its back end at realize (it asks
 * for features and config there) and has no reconnect logic; a client chardev with
 * reconnect=1 connects too late for realize (measured: the VM fails to start), while a
 * server chardev accepts a new connection whenever the old one drops.  So:
 *   - a VM starts once memtided connects (QEMU waits for it, as for any vhost-user device);
 *   - memtided restarted: it connects again and has QEMU restart the device (QMP stop +
 *     cont, a few ms of pause) because QEMU sends nothing to a new back end by itself;
 *   - QEMU restarted: a new socket, a new connection, a fresh session.
 *
 * Endpoints.  A socket memtided connects to, known by the VM's name: in plain-QEMU mode the
 * one given with --agent vsock:PATH (retried every 200 ms until QEMU is there), in libvirt
 * mode every NAME.sock in the watched directory (/run/memtide/vsock by default; inotify, and
 * a rescan every 2 s).  One thread serves them all: the vhost-user messages, the rings'
 * kicks, and the agent streams.
 *
 * Claims.  A VM's loop claims its endpoint by name: from then on the device accepts the
 * guest agent's connections and each new one arrives as one end of a socketpair, taken with
 * mtd_vsock_take_fd (the loop is woken through its wake fd).  Unclaimed, the device resets
 * the guest's connection requests (the agent falls back to virtio-serial).
 *
 * Thread context: every function may be called from any thread; they take the service's
 * mutex, which the service thread holds only while it handles one round of fd events.
 */
#ifndef MEMTIDE_HOST_VSOCK_SERVICE_H
#define MEMTIDE_HOST_VSOCK_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "vsock/vhost.h"

#define MTD_VSOCK_DIR       "/run/memtide/vsock"
#define VSOCK_AGENT_PREFIX  "vsock:" /* --agent vsock:PATH (plain-QEMU mode) */
#define MTD_VSOCK_MAX_EPS   256
#define MTD_VSOCK_RETRY_MS  200
#define MTD_VSOCK_RESCAN_MS 2000

struct mtd_vsock;
struct mtd_vsock_claim;

struct mtd_vsock_config {
	char dir[108];      /* watched directory ("": none, endpoints added by hand) */
	uint64_t guest_cid; /* the guests' CID (each VM's vsock is private: one value for all) */
	uint32_t port;      /* the agent's port on the host */
};

/* Start the service thread.  0, -errno (the directory cannot be made or watched). */
int mtd_vsock_start(const struct mtd_vsock_config *cfg, struct mtd_vsock **out);
/* Stop the thread; each guest connection gets a reset (when it has an rx buffer for it);
 * close every session.  QEMU keeps its devices and waits for the next memtided. */
void mtd_vsock_stop(struct mtd_vsock *v);

/* An endpoint by hand (plain-QEMU mode).  0, -EEXIST, -ENAMETOOLONG, -ENOSPC. */
int mtd_vsock_add_endpoint(struct mtd_vsock *v, const char *name, const char *path);
/* Is there an endpoint for this name (now)? */
bool mtd_vsock_has_endpoint(struct mtd_vsock *v, const char *name);

/* Claim name's endpoint (it may appear later).  wake_fd (an eventfd, not owned) gets a
 * write when a stream is ready or the session state changed.  0, -EEXIST, -ENOMEM. */
int mtd_vsock_claim(struct mtd_vsock *v, const char *name, int wake_fd,
		    struct mtd_vsock_claim **out);
/* Release: pending streams are closed, new requests get resets again. */
void mtd_vsock_release(struct mtd_vsock_claim *c);
/* The newest agent stream (non-blocking, the caller owns it), or -EAGAIN.  The signature
 * fits mtd_agent_link_set_fd_source. */
int mtd_vsock_take_fd(void *claim);

/* What the VM loop needs to know about its endpoint. */
struct mtd_vsock_state {
	bool endpoint;       /* the endpoint exists */
	bool connected;      /* a vhost-user session is up */
	uint64_t session;    /* moves with each new session (connection) */
	bool initialised;    /* QEMU began the session from the start (realize) */
	bool started;        /* QEMU started the rings on this session */
	int qemu_pid;        /* the peer of the connection (SO_PEERCRED), 0 unknown */
	unsigned nr_regions; /* the memory table (0: none yet) */
	struct vu_layout_region regions[8];
	uint64_t layout_gen; /* moves with each memory table */
	struct vsock_dev_counters dev;
	uint64_t refused_messages; /* vhost-user messages refused */
	bool ring_broken;          /* the guest broke a ring */
};
void mtd_vsock_state(struct mtd_vsock_claim *c, struct mtd_vsock_state *out);

#endif /* MEMTIDE_HOST_VSOCK_SERVICE_H */
