// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vsock_pkt.c - the virtio-vsock packet header (virtio 1.2, 5.10.6): little-endian on the
 * wire, host order in struct vsock_hdr, and the checks a packet from the guest passes before
 * it reaches a connection (vhost_int.h).
 *
 *   le64 src_cid | le64 dst_cid | le32 src_port | le32 dst_port | le32 len |
 *   le16 type | le16 op | le32 flags | le32 buf_alloc | le32 fwd_cnt          (44 bytes)
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>

#include "vsock/vhost_int.h"

void vsock_hdr_decode(const struct virtio_vsock_hdr *w, struct vsock_hdr *h)
{
	h->src_cid = le64toh(w->src_cid);
	h->dst_cid = le64toh(w->dst_cid);
	h->src_port = le32toh(w->src_port);
	h->dst_port = le32toh(w->dst_port);
	h->len = le32toh(w->len);
	h->type = le16toh(w->type);
	h->op = le16toh(w->op);
	h->flags = le32toh(w->flags);
	h->buf_alloc = le32toh(w->buf_alloc);
	h->fwd_cnt = le32toh(w->fwd_cnt);
}

void vsock_hdr_encode(const struct vsock_hdr *h, struct virtio_vsock_hdr *w)
{
	w->src_cid = htole64(h->src_cid);
	w->dst_cid = htole64(h->dst_cid);
	w->src_port = htole32(h->src_port);
	w->dst_port = htole32(h->dst_port);
	w->len = htole32(h->len);
	w->type = htole16(h->type);
	w->op = htole16(h->op);
	w->flags = htole32(h->flags);
	w->buf_alloc = htole32(h->buf_alloc);
	w->fwd_cnt = htole32(h->fwd_cnt);
}

const char *vsock_op_name(uint16_t op)
{
	static const char *const names[] = {
	    [VIRTIO_VSOCK_OP_INVALID] = "INVALID",
	    [VIRTIO_VSOCK_OP_REQUEST] = "REQUEST",
	    [VIRTIO_VSOCK_OP_RESPONSE] = "RESPONSE",
	    [VIRTIO_VSOCK_OP_RST] = "RST",
	    [VIRTIO_VSOCK_OP_SHUTDOWN] = "SHUTDOWN",
	    [VIRTIO_VSOCK_OP_RW] = "RW",
	    [VIRTIO_VSOCK_OP_CREDIT_UPDATE] = "CREDIT_UPDATE",
	    [VIRTIO_VSOCK_OP_CREDIT_REQUEST] = "CREDIT_REQUEST",
	};
	return op < sizeof(names) / sizeof(names[0]) ? names[op] : "unknown";
}

int vsock_hdr_check(const struct vsock_hdr *h, uint64_t guest_cid, uint32_t chain_payload,
		    char *why, size_t whylen)
{
	/* Not from our guest, or not to the host: the spec says drop, never answer (an
	 * answer would go to an address the guest does not own). */
	if (h->src_cid != guest_cid || h->dst_cid != VSOCK_HOST_CID) {
		snprintf(why, whylen, "from cid %llu to cid %llu (the guest is %llu, the host %u)",
			 (unsigned long long)h->src_cid, (unsigned long long)h->dst_cid,
			 (unsigned long long)guest_cid, VSOCK_HOST_CID);
		return -EPERM;
	}
	if (h->type != VIRTIO_VSOCK_TYPE_STREAM) {
		snprintf(why, whylen, "type %u (only stream sockets)", h->type);
		return -EINVAL;
	}
	if (h->op == VIRTIO_VSOCK_OP_INVALID || h->op > VIRTIO_VSOCK_OP_CREDIT_REQUEST) {
		snprintf(why, whylen, "op %u", h->op);
		return -EINVAL;
	}
	if (h->len > VSOCK_MAX_PAYLOAD || h->len > chain_payload) {
		snprintf(why, whylen, "%s of %u bytes (the buffer holds %u, the most is %u)",
			 vsock_op_name(h->op), h->len, chain_payload, VSOCK_MAX_PAYLOAD);
		return -EINVAL;
	}
	if (h->op != VIRTIO_VSOCK_OP_RW && h->len) {
		snprintf(why, whylen, "%s with %u bytes of payload", vsock_op_name(h->op), h->len);
		return -EINVAL;
	}
	if (h->op == VIRTIO_VSOCK_OP_SHUTDOWN &&
	    (h->flags & ~(uint32_t)(VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND))) {
		snprintf(why, whylen, "SHUTDOWN flags 0x%x", h->flags);
		return -EINVAL;
	}
	return 0;
}
