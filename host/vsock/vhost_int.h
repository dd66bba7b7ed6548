/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vhost_int.h - the parts of host/vsock/ that its own files, the unit tests and the fuzz
 * target share: the vhost-user wire format, the guest memory table, the split virtqueue and
 * the virtio-vsock packet header.  memtided's other files use vhost.h only.
 *
 * Everything here is pure: no threads, no logging, no clock.  File descriptors appear only
 * where the protocol carries them (vu_mem_set maps the memfds QEMU sends).  Sources:
 * QEMU's docs/interop/vhost-user.rst (the wire format) and the virtio 1.2 specification
 * (2.7 split virtqueues, 5.10 socket device); the C layouts of the virtio structures come
 * from the kernel's UAPI headers (linux/virtio_ring.h, linux/virtio_vsock.h).
 */
#ifndef MEMTIDE_HOST_VHOST_INT_H
#define MEMTIDE_HOST_VHOST_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_vsock.h>

/* ======================================================================================
 * vhost-user wire format (vu_wire.c)
 *
 *   +---------+-------+------+-----------------------------+
 *   | request | flags | size | payload (size bytes)        |   all native-endian (x86: LE)
 *   +---------+-------+------+-----------------------------+
 *     u32       u32     u32
 * flags: bits 0-1 the version (1), bit 2 "this is a reply", bit 3 "the front end wants a
 * reply" (REPLY_ACK).  File descriptors travel as SCM_RIGHTS ancillary data of the header's
 * sendmsg, at most VU_MAX_FDS of them.
 * ====================================================================================== */

/* Front-end requests.  Values are the wire's; gaps are requests of features we never offer
 * (26-33: crypto sessions, postcopy, inflight tracking, vhost-user-gpu). */
enum vu_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SEND_RARP = 19,
	VU_NET_SET_MTU = 20,
	VU_SET_SLAVE_REQ_FD = 21,
	VU_IOTLB_MSG = 22,
	VU_SET_VRING_ENDIAN = 23,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_RESET_DEVICE = 34,
	VU_VRING_KICK = 35,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_STATUS = 39,
	VU_GET_STATUS = 40,
	VU_REQUEST_MAX = 41, /* first value past the table */
};

#define VU_VERSION          0x1u
#define VU_VERSION_MASK     0x3u
#define VU_FLAG_REPLY       (1u << 2)
#define VU_FLAG_NEED_REPLY  (1u << 3)
/* In SET_VRING_KICK/CALL/ERR's u64: bits 0-7 the ring, bit 8 "no fd attached". */
#define VU_VRING_IDX_MASK   0xffull
#define VU_VRING_NOFD_MASK  (1ull << 8)
#define VU_MAX_FDS          8 /* VHOST_MEMORY_BASELINE_NREGIONS: SET_MEM_TABLE's most */
#define VU_MAX_REGIONS      8
#define VU_CONFIG_SPACE_MAX 256 /* VHOST_USER_MAX_CONFIG_SIZE */

/* Feature bits (virtio and vhost-user's own). */
#define VU_F_PROTOCOL_FEATURES 30 /* VHOST_USER_F_PROTOCOL_FEATURES: a reused reserved bit */
#define VU_F_VERSION_1         32 /* VIRTIO_F_VERSION_1 */
/* Protocol feature bits. */
#define VU_PF_MQ               0
#define VU_PF_REPLY_ACK        3
#define VU_PF_CONFIG           9

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
} __attribute__((packed));

/* Ring addresses are QEMU's own virtual addresses (no IOMMU platform negotiated). */
struct vu_vring_addr {
	uint32_t index;
	uint32_t flags; /* bit 0: log used-ring writes (migration logging: never offered) */
	uint64_t desc_uva;
	uint64_t used_uva;
	uint64_t avail_uva;
	uint64_t log_gpa;
} __attribute__((packed));

struct vu_region_wire {
	uint64_t gpa;         /* guest-physical address of the region */
	uint64_t size;        /* bytes */
	uint64_t uva;         /* where QEMU maps it: the address host-side eviction madvises */
	uint64_t mmap_offset; /* offset of the region in the fd sent with it */
} __attribute__((packed));

struct vu_memory_wire {
	uint32_t nregions;
	uint32_t padding;
	struct vu_region_wire r[VU_MAX_REGIONS];
} __attribute__((packed));

struct vu_config_wire {
	uint32_t offset;
	uint32_t size;
	uint32_t flags; /* 0: a guest write, 1: live migration */
	uint8_t payload[VU_CONFIG_SPACE_MAX];
} __attribute__((packed));

union vu_payload {
	uint64_t u64;
	struct vu_vring_state state;
	struct vu_vring_addr addr;
	struct vu_memory_wire mem;
	struct vu_config_wire config;
	uint8_t bytes[sizeof(struct vu_config_wire)];
};

#define VU_PAYLOAD_MAX sizeof(union vu_payload) /* 268 bytes: config's header + 256 */

/* One message as received: header, payload (size bytes valid) and the fds that came with it
 * (owned by the message until a handler takes them; vu_msg_close_fds closes the rest). */
struct vu_msg {
	struct vu_hdr hdr;
	union vu_payload p;
	int fds[VU_MAX_FDS];
	unsigned nr_fds;
};

/* "VHOST_USER_SET_MEM_TABLE" for logs; "unknown" past the table. */
const char *vu_request_name(uint32_t request);

/*
 * Check a received message against its request's rules before any handler sees it: the
 * version, no reply flag, a known request, the payload size this request carries, and the
 * number of fds it may bring (SET_MEM_TABLE: one per region; SET_VRING_KICK/CALL/ERR: one
 * unless the payload's no-fd bit says none).  Ring indexes are checked against nr_queues;
 * SET_MEM_TABLE's region count against VU_MAX_REGIONS and SET/GET_CONFIG's window against
 * the config space.  Returns 0, or -EPROTO (malformed: the envelope cannot be trusted any
 * more), -EINVAL (well formed but not acceptable: answer with a failure and carry on), with
 * a sentence in why.  Never changes m.
 */
int vu_msg_check(const struct vu_msg *m, unsigned nr_queues, char *why, size_t whylen);
/* Close every fd still held by m and forget them. */
void vu_msg_close_fds(struct vu_msg *m);
/* Does this request always have a reply (GET_*), whatever NEED_REPLY says? */
bool vu_request_has_reply(uint32_t request);

/* ======================================================================================
 * Guest memory table (vu_mem.c)
 *
 * QEMU sends the guest's RAM as up to 8 regions, each a guest-physical range, the address
 * QEMU itself maps it at, and a memfd (with an offset).  We map each region shared and
 * translate:
 *   gpa -> our pointer   for descriptor buffers (guest-physical addresses)
 *   uva -> our pointer   for the rings themselves (QEMU passes its own addresses)
 * A translation succeeds only when the whole [address, address + len) lies in mapped
 * regions; nothing the guest writes can move a pointer outside them.
 * ====================================================================================== */

struct vu_region {
	uint64_t gpa, size, uva, mmap_offset;
	uint8_t *host;  /* our view of gpa .. gpa + size */
	void *map_base; /* what to munmap (the mapping starts at the fd's offset 0) */
	size_t map_len;
};

struct vu_mem {
	unsigned n;
	struct vu_region r[VU_MAX_REGIONS];
	uint64_t generation; /* moves with every new table (rings re-translate their pointers) */
};

/*
 * Validate a SET_MEM_TABLE payload and map its regions over a new table: every region
 * non-empty, no address or offset overflow, no two regions overlapping in guest-physical
 * or QEMU address, each fd a file at least offset + size long (a shorter one would raise
 * SIGBUS on access).  On success the old mappings of *m are replaced; on failure *m is
 * untouched.  The fds are not closed (the caller owns them).  0, -EINVAL (why says which
 * region), -errno from mmap/fstat.
 */
int vu_mem_set(struct vu_mem *m, const struct vu_memory_wire *w, const int *fds, char *why,
	       size_t whylen);
/* The same table over memory already in this process (tests and the fuzz target): region i
 * is host[i] for w->r[i].size bytes.  Nothing is unmapped by vu_mem_clear then. */
int vu_mem_set_raw(struct vu_mem *m, const struct vu_memory_wire *w, uint8_t *const *host,
		   char *why, size_t whylen);
void vu_mem_clear(struct vu_mem *m);
/* Our pointer for [gpa, gpa + len) when it lies in one region; NULL otherwise. */
void *vu_mem_gpa(const struct vu_mem *m, uint64_t gpa, uint64_t len);
/* Our pointer for QEMU's [uva, uva + len) when it lies in one region; NULL otherwise. */
void *vu_mem_uva(const struct vu_mem *m, uint64_t uva, uint64_t len);
/* [gpa, gpa + len) as iovecs (split where regions meet), appended at iov[*n] with at most
 * max entries in all.  0, -EFAULT (a byte outside every region), -E2BIG (too many pieces). */
int vu_mem_iov(const struct vu_mem *m, uint64_t gpa, uint32_t len, struct iovec *iov, unsigned *n,
	       unsigned max);

/* ======================================================================================
 * Split virtqueue, device side (vring.c)
 *
 *   descriptor table  num x {u64 addr, u32 len, u16 flags, u16 next}   16-byte aligned
 *   available ring    u16 flags, u16 idx, u16 ring[num]                2-byte aligned
 *   used ring         u16 flags, u16 idx, {u32 id, u32 len}[num]       4-byte aligned
 * The driver (the guest) writes the table and the available ring, the device (we) the used
 * ring.  Everything the guest wrote is read once into local variables, then checked:
 * a head or next index < num, at most num descriptors in a chain (no loops), no indirect
 * descriptors (not negotiated), readable descriptors before writable ones, at most
 * VQ_MAX_IOV pieces, every buffer inside the memory table.  A chain that breaks a
 * rule is returned to the guest as used with length 0 (dropped, counted); a ring whose
 * available index runs more than num ahead is marked broken and left alone until QEMU
 * sets it up again (virtio's "needs reset").
 * ====================================================================================== */

#define VQ_MAX_IOV   16
#define VQ_MAX_NUM   32768 /* the split ring's largest size */
#define VQ_MAX_CHAIN 64    /* descriptors followed per chain, whatever num says */

struct vq {
	uint16_t num; /* 0: not set up */
	uint64_t desc_uva, avail_uva, used_uva;
	uint8_t *desc; /* our pointers into guest memory (NULL until translated) */
	uint8_t *avail;
	uint8_t *used;
	uint16_t last_avail; /* next available entry we take */
	uint16_t used_idx;   /* next used entry we fill (our shadow of used->idx) */
	bool base_unknown;   /* GET_VRING_BASE answered without knowing: resync from used->idx */
	bool started;        /* kick fd set: the ring may be processed */
	bool enabled;        /* SET_VRING_ENABLE (or no protocol features): we may use it */
	bool broken;         /* the guest broke the ring: left alone until set up again */
	bool synced;         /* used_idx (and last_avail, when base_unknown) read from memory */
	bool signal_due;     /* used entries pushed since the last vq_notify */
	int kick_fd, call_fd, err_fd; /* -1 when none */
	uint64_t mem_generation;      /* the table the pointers were translated with */
	uint64_t dropped_chains;      /* chains returned unused because they broke a rule */
};

struct vq_chain {
	uint16_t head;
	unsigned nr_read, nr_write; /* iov[0..nr_read) readable, then nr_write writable */
	uint32_t read_bytes, write_bytes;
	struct iovec iov[VQ_MAX_IOV];
};

void vq_init(struct vq *vr);
/* Translate the ring's three parts with the memory table (again after each new table):
 * 0, -EFAULT (a part outside the table), -EINVAL (misaligned or num unset). */
int vq_translate(struct vq *vr, const struct vu_mem *m);
/* Ready to process: translated, started, enabled and not broken. */
bool vq_ready(const struct vq *vr);
/*
 * Take the next available chain into c.  1: taken; 0: none available; -EFAULT: the chain
 * broke a rule (it has been returned to the guest as used, length 0, and counted: call
 * again for the next one); -EIO: the ring is broken (vr->broken set).
 */
int vq_pop(struct vq *vr, const struct vu_mem *m, struct vq_chain *c);
/* Return a chain to the guest: used element {head, len}, then the index (release order). */
void vq_push(struct vq *vr, uint16_t head, uint32_t len);
/* After pushes: signal the call fd unless the guest asked for no interrupts.  true when a
 * signal was sent. */
bool vq_notify(struct vq *vr);
/* The used index as the guest's memory has it (the resync point after a restart). */
uint16_t vq_used_idx_mem(const struct vq *vr);
/* How many entries the guest has made available that we have not taken (0 when broken or
 * not ready). */
uint16_t vq_avail_pending(const struct vq *vr);

/* Copy up to len bytes from the chain's readable part, starting at byte off.  Returns the
 * bytes copied. */
size_t vq_chain_read(const struct vq_chain *c, size_t off, void *buf, size_t len);
/* Copy up to len bytes into the chain's writable part, starting at byte off.  Returns the
 * bytes copied. */
size_t vq_chain_write(const struct vq_chain *c, size_t off, const void *buf, size_t len);

/* ======================================================================================
 * virtio-vsock packets (vsock_pkt.c)
 * ====================================================================================== */

#define VSOCK_HDR_BYTES   ((uint32_t)sizeof(struct virtio_vsock_hdr)) /* 44 */
#define VSOCK_MAX_PAYLOAD (64u * 1024) /* the Linux driver's largest packet */
#define VSOCK_HOST_CID    2u           /* VMADDR_CID_HOST */
#define VSOCK_PRIV_PORTS  1024u        /* ports below this need CAP_NET_BIND_SERVICE */

/* A header in host order. */
struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port;
	uint32_t len;
	uint16_t type, op;
	uint32_t flags;
	uint32_t buf_alloc, fwd_cnt;
};

void vsock_hdr_decode(const struct virtio_vsock_hdr *w, struct vsock_hdr *h);
void vsock_hdr_encode(const struct vsock_hdr *h, struct virtio_vsock_hdr *w);
/* "RW", "REQUEST", ... for logs. */
const char *vsock_op_name(uint16_t op);

/*
 * What a packet from the guest may be, checked before it touches a connection: a stream
 * packet, a known op, len <= VSOCK_MAX_PAYLOAD and no more than the chain carries after the
 * header, len 0 for every op but RW, SHUTDOWN flags within RCV|SEND, from guest_cid to the
 * host.  0 or a negative errno with a sentence in why: -EINVAL (answer with a reset) or
 * -EPERM (not for us: wrong addresses; dropped without a word, as the spec says).
 */
int vsock_hdr_check(const struct vsock_hdr *h, uint64_t guest_cid, uint32_t chain_payload,
		    char *why, size_t whylen);

#endif /* MEMTIDE_HOST_VHOST_INT_H */
