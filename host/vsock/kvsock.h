/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * kvsock.h - the agent over the kernel's vsock: memtided listens on AF_VSOCK on the host.
 *
 * On a KVM host the ordinary vsock device is the kernel's own (the vhost_vsock module, QEMU's
 * -device vhost-vsock-pci,guest-cid=N, libvirt's <vsock model='virtio'><cid .../></vsock>):
 * a guest connecting to CID 2 reaches a host process listening on AF_VSOCK.  Every guest on
 * the host shares that one listener, so the connection says which VM it comes from only by
 * its peer CID.  memtided maps each CID to the VM that has it (from the domain XML in libvirt
 * mode, from QEMU's command line in plain-QEMU mode: guest_cid.h) and hands the stream to that
 * VM's agent link, as the vhost-user back end hands its streams (vsock_service.h).
 *
 * Refused, each with a log line (at most one per CID every MTD_KVSOCK_SAY_MS): a CID no
 * attached VM has (another host program's guest, or a VM memtided does not manage, must not
 * be taken for one of ours), and a source port from 1024 up (only root in the guest can bind
 * one below 1024, as only root can open the virtio-serial port: an unprivileged guest process
 * must not pose as the agent; the agent binds one when it may, agent_transport.c).
 *
 * Claims.  A VM's loop claims its CID by name; a connection from that CID then arrives as a
 * pending fd, taken with mtd_kvsock_take_fd (the loop is woken through its wake fd).  A
 * newer connection replaces a pending one not taken yet (the agent reconnected).
 *
 * Thread context: one thread accepts (mtd_kvsock_listen); every function may be called from
 * any thread (one mutex).  mtd_kvsock_offer is the accept path without the socket, for tests.
 */
#ifndef MEMTIDE_HOST_KVSOCK_H
#define MEMTIDE_HOST_KVSOCK_H

#include <stdbool.h>
#include <stdint.h>

#define MTD_KVSOCK_DEV     "/dev/vhost-vsock" /* the host can give its guests kernel vsock */
#define MTD_KVSOCK_SAY_MS  10000              /* one refusal line per CID at most this often */
#define MTD_KVSOCK_PRIV    1024               /* source ports below this only root can bind */
#define MTD_KVSOCK_MIN_CID 3                  /* 0-2 are the hypervisor, local and host */
#define MTD_KVSOCK_AGENT   "vsock"            /* --agent vsock (plain-QEMU mode) */

struct mtd_kvsock;
struct mtd_kvsock_claim;

/* The claims table, not listening yet.  0 or -ENOMEM. */
int mtd_kvsock_new(uint32_t port, struct mtd_kvsock **out);
/* Listen on AF_VSOCK (any CID, port) and start the accepting thread.  0, or -errno
 * (-EAFNOSUPPORT: the kernel has no vsock; -EADDRINUSE: another listener has the port). */
int mtd_kvsock_listen(struct mtd_kvsock *k);
/* Stop the thread, close the listener and every pending fd, free.  Claims must have been
 * released. */
void mtd_kvsock_free(struct mtd_kvsock *k);

/* Claim cid for VM name.  wake_fd (an eventfd, not owned) gets a write when a stream is
 * pending.  0, -EINVAL (cid below MTD_KVSOCK_MIN_CID or above 32 bits' reserved -1),
 * -EEXIST (another VM claims that CID: both cannot be told apart; logged), -ENOMEM. */
int mtd_kvsock_claim(struct mtd_kvsock *k, const char *name, uint32_t cid, int wake_fd,
		     struct mtd_kvsock_claim **out);
void mtd_kvsock_release(struct mtd_kvsock_claim *c);
/* The newest pending stream (non-blocking, the caller owns it), or -EAGAIN.  Fits
 * mtd_agent_link_set_fd_source. */
int mtd_kvsock_take_fd(void *claim);
uint32_t mtd_kvsock_claim_cid(const struct mtd_kvsock_claim *c);

/* A connection accepted from cid:port (fd owned by the call).  0: handed to the VM with that
 * CID; -ENOENT: no VM has it, -EPERM: not from a privileged port (closed and logged). */
int mtd_kvsock_offer(struct mtd_kvsock *k, int fd, uint32_t cid, uint32_t port, uint64_t now_ms);

struct mtd_kvsock_counters {
	uint64_t accepted, handed, refused_cid, refused_port;
};
void mtd_kvsock_counters(struct mtd_kvsock *k, struct mtd_kvsock_counters *out);

#endif /* MEMTIDE_HOST_KVSOCK_H */
