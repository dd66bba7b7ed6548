// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vsock_dev.c - the virtio-vsock device behind memtided's vhost-user back end (vhost.h):
 * one served port, one connection, credit-based flow control, a bounded control queue.
 *
 * Data layout (one allocation of ~130 KiB per VM, whatever the guest does):
 *
 *   in[VSOCK_CONN_BUF]   guest -> host bytes the host has not taken yet (a ring; the
 *                        guest may have at most VSOCK_CONN_BUF in flight: our buf_alloc)
 *   out[VSOCK_CONN_BUF]  host -> guest bytes waiting for the guest's credit and rx buffers
 *   ctrl[VSOCK_CTRL_QUEUE] control packets (RESPONSE, RST, SHUTDOWN, CREDIT_*) waiting for
 *                        rx buffers; full: the newest is dropped and counted
 *
 * Connection states:
 *
 *   NONE --REQUEST to the port, privileged source port, accepting--> OPEN
 *   OPEN --RST, SHUTDOWN(both), a violation--> GUEST_GONE --in[] taken by the host--> NONE
 *   OPEN --host closes--> HOST_CLOSING --out[] sent--> (SHUTDOWN + RST queued) NONE
 *
 * Counters are u32 and wrap, as on the wire: every credit computation is a difference of
 * two of them, and a difference a lying guest can make absurd (fwd_cnt ahead of what we
 * sent) reads as "no credit", which only stalls that guest.
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vsock/vhost.h"
#include "vsock/vhost_int.h"

enum conn_state { CONN_NONE = 0, CONN_OPEN, CONN_GUEST_GONE, CONN_HOST_CLOSING };

struct ctrl {
	uint16_t op;
	uint32_t guest_port;
	uint32_t flags;
};

struct vsock_dev {
	struct vsock_dev_config cfg;
	bool accepting;

	/* the connection */
	enum conn_state st;
	uint64_t gen;
	uint32_t guest_port;
	uint32_t peer_buf_alloc, peer_fwd_cnt; /* the guest's receive side, as last told */
	uint32_t tx_cnt;                       /* payload bytes we sent */
	uint32_t rx_cnt;                       /* payload bytes the guest sent */
	uint32_t fwd_cnt;                      /* of those, taken by the host */
	uint32_t fwd_reported;                 /* fwd_cnt in our last packet's header */
	bool guest_shut_rcv;                   /* the guest takes no more data */
	bool credit_requested;                 /* CREDIT_REQUEST sent, no answer yet */
	uint32_t in_head, in_len;
	uint32_t out_head, out_len;

	struct ctrl ctrl[VSOCK_CTRL_QUEUE];
	unsigned ctrl_head, ctrl_n;
	struct vsock_dev_counters ctr;
	bool said_broken[2]; /* rx, tx: the broken ring was logged */

	uint8_t in[VSOCK_CONN_BUF];
	uint8_t out[VSOCK_CONN_BUF];
};

static void dlog(struct vsock_dev *d, enum vsock_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void dlog(struct vsock_dev *d, enum vsock_log_level lvl, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (!d->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->cfg.log(d->cfg.log_ctx, lvl, msg);
}

/* A guest can make these happen at will: say the 1st, 2nd, 4th, 8th... (log2 lines). */
static bool say_nth(uint64_t n)
{
	return n && !(n & (n - 1));
}

int vsock_dev_new(const struct vsock_dev_config *cfg, struct vsock_dev **out)
{
	struct vsock_dev *d;

	if (cfg->guest_cid <= VSOCK_HOST_CID || cfg->guest_cid > UINT32_MAX || !cfg->port)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *cfg;
	*out = d;
	return 0;
}

void vsock_dev_free(struct vsock_dev *d)
{
	free(d);
}

static int vsock_get_config(void *dev, uint32_t off, uint8_t *buf, uint32_t len)
{
	struct vsock_dev *d = dev;
	struct virtio_vsock_config c = {.guest_cid = htole64(d->cfg.guest_cid)};

	memcpy(buf, (const uint8_t *)&c + off, len);
	return 0;
}

const struct vu_device_ops vsock_dev_ops = {
    .nr_queues = 2, /* rx, tx: QEMU keeps the event queue */
    .features = 0,  /* VIRTIO_VSOCK_F_SEQPACKET not offered: stream only */
    .config_bytes = sizeof(struct virtio_vsock_config),
    .get_config = vsock_get_config,
};

void vsock_dev_set_accepting(struct vsock_dev *d, bool on)
{
	d->accepting = on;
}

/* ---- control queue ------------------------------------------------------------------- */

static void queue_ctrl(struct vsock_dev *d, uint16_t op, uint32_t guest_port, uint32_t flags)
{
	if (d->ctrl_n == VSOCK_CTRL_QUEUE) {
		d->ctr.ctrl_dropped++;
		return;
	}
	d->ctrl[(d->ctrl_head + d->ctrl_n) % VSOCK_CTRL_QUEUE] =
	    (struct ctrl){.op = op, .guest_port = guest_port, .flags = flags};
	d->ctrl_n++;
	if (op == VIRTIO_VSOCK_OP_RST)
		d->ctr.resets_sent++;
}

static bool is_conn(const struct vsock_dev *d, uint32_t guest_port)
{
	return d->st != CONN_NONE && guest_port == d->guest_port;
}

/* ---- the connection ------------------------------------------------------------------ */

static uint32_t credit(const struct vsock_dev *d)
{
	uint32_t in_flight = d->tx_cnt - d->peer_fwd_cnt;

	return in_flight > d->peer_buf_alloc ? 0 : d->peer_buf_alloc - in_flight;
}

/* The guest broke the connection's rules, or went away: no more traffic with it; what it
 * sent before still goes to the host. */
static void guest_gone(struct vsock_dev *d, bool send_rst)
{
	if (send_rst)
		queue_ctrl(d, VIRTIO_VSOCK_OP_RST, d->guest_port, 0);
	d->out_len = d->out_head = 0;
	d->st = d->in_len ? CONN_GUEST_GONE : CONN_NONE;
}

static void open_conn(struct vsock_dev *d, const struct vsock_hdr *h)
{
	if (d->st == CONN_OPEN || d->st == CONN_HOST_CLOSING) {
		dlog(d, VSOCK_LOG_NOTICE,
		     "vsock: a new agent connection from port %u replaces "
		     "the one from port %u",
		     h->src_port, d->guest_port);
		queue_ctrl(d, VIRTIO_VSOCK_OP_RST, d->guest_port, 0);
	}
	d->st = CONN_OPEN;
	d->gen++;
	d->guest_port = h->src_port;
	d->peer_buf_alloc = h->buf_alloc;
	d->peer_fwd_cnt = h->fwd_cnt;
	d->tx_cnt = d->rx_cnt = d->fwd_cnt = d->fwd_reported = 0;
	d->guest_shut_rcv = d->credit_requested = false;
	d->in_head = d->in_len = d->out_head = d->out_len = 0;
	d->ctr.connects++;
	queue_ctrl(d, VIRTIO_VSOCK_OP_RESPONSE, h->src_port, 0);
	dlog(d, VSOCK_LOG_INFO, "vsock: connection from guest port %u to port %u", h->src_port,
	     h->dst_port);
}

static void refuse(struct vsock_dev *d, const struct vsock_hdr *h, const char *why)
{
	d->ctr.refused++;
	queue_ctrl(d, VIRTIO_VSOCK_OP_RST, h->src_port, 0);
	if (say_nth(d->ctr.refused))
		dlog(d, VSOCK_LOG_INFO,
		     "vsock: refused a connection from guest port %u to port %u: "
		     "%s (refusal #%llu)",
		     h->src_port, h->dst_port, why, (unsigned long long)d->ctr.refused);
}

static void on_request(struct vsock_dev *d, const struct vsock_hdr *h)
{
	if (h->dst_port != d->cfg.port)
		refuse(d, h, "no service on that port");
	else if (!d->accepting)
		refuse(d, h, "memtided is not managing this VM");
	else if (h->src_port >= VSOCK_PRIV_PORTS)
		refuse(d, h,
		       "not from a privileged port (only root in the guest may be the agent)");
	else
		open_conn(d, h);
}

/* Step 2 of a packet from the guest (step 1: vsock_hdr_check): what it does to the
 * connection.  payload/len: the chain and where its payload starts. */
static void on_packet(struct vsock_dev *d, const struct vsock_hdr *h, const struct vq_chain *c)
{
	if (h->op == VIRTIO_VSOCK_OP_REQUEST) {
		on_request(d, h);
		return;
	}
	if (h->dst_port != d->cfg.port || !is_conn(d, h->src_port) || d->st == CONN_GUEST_GONE) {
		/* Never answer a reset with a reset. */
		if (h->op != VIRTIO_VSOCK_OP_RST)
			queue_ctrl(d, VIRTIO_VSOCK_OP_RST, h->src_port, 0);
		return;
	}
	/* Every packet carries the guest's receive-side credit. */
	d->peer_buf_alloc = h->buf_alloc;
	d->peer_fwd_cnt = h->fwd_cnt;
	d->credit_requested = false;
	switch (h->op) {
	case VIRTIO_VSOCK_OP_RST:
		dlog(d, VSOCK_LOG_INFO, "vsock: the guest reset the connection from port %u",
		     d->guest_port);
		guest_gone(d, false);
		return;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (h->flags & VIRTIO_VSOCK_SHUTDOWN_RCV) {
			d->guest_shut_rcv = true;
			d->out_len = d->out_head = 0;
		}
		/* The guest sends no more: it is closing; the reset completes its close. */
		if (h->flags & VIRTIO_VSOCK_SHUTDOWN_SEND) {
			dlog(d, VSOCK_LOG_INFO,
			     "vsock: the guest closed the connection from port %u", d->guest_port);
			guest_gone(d, true);
		}
		return;
	case VIRTIO_VSOCK_OP_RW: {
		if (d->st == CONN_HOST_CLOSING) {
			/* Nobody reads any more: taken and dropped, so the guest's credit holds. */
			d->rx_cnt += h->len;
			d->fwd_cnt += h->len;
			return;
		}
		if (h->len > VSOCK_CONN_BUF - d->in_len) {
			d->ctr.credit_violations++;
			dlog(d, VSOCK_LOG_WARN,
			     "vsock: the guest sent %u bytes with %u of credit: "
			     "connection reset",
			     h->len, VSOCK_CONN_BUF - d->in_len);
			guest_gone(d, true);
			return;
		}
		uint32_t tail = (d->in_head + d->in_len) % VSOCK_CONN_BUF;
		uint32_t first = VSOCK_CONN_BUF - tail < h->len ? VSOCK_CONN_BUF - tail : h->len;

		vq_chain_read(c, VSOCK_HDR_BYTES, d->in + tail, first);
		vq_chain_read(c, VSOCK_HDR_BYTES + first, d->in, h->len - first);
		d->in_len += h->len;
		d->rx_cnt += h->len;
		d->ctr.rx_bytes += h->len;
		return;
	}
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		queue_ctrl(d, VIRTIO_VSOCK_OP_CREDIT_UPDATE, d->guest_port, 0);
		return;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		return;
	default: /* RESPONSE: we never asked for a connection */
		guest_gone(d, true);
		return;
	}
}

/* ---- the rings ----------------------------------------------------------------------- */

static void tx_one(struct vsock_dev *d, const struct vq_chain *c)
{
	struct virtio_vsock_hdr w;
	struct vsock_hdr h;
	char why[160];
	int rc;

	if (c->read_bytes < VSOCK_HDR_BYTES) {
		d->ctr.bad_packets++;
		return;
	}
	vq_chain_read(c, 0, &w, sizeof(w));
	vsock_hdr_decode(&w, &h);
	rc = vsock_hdr_check(&h, d->cfg.guest_cid, c->read_bytes - VSOCK_HDR_BYTES, why,
			     sizeof(why));
	d->ctr.tx_packets++;
	if (rc < 0) {
		d->ctr.bad_packets++;
		if (say_nth(d->ctr.bad_packets))
			dlog(d, VSOCK_LOG_WARN, "vsock: bad packet from the guest: %s (#%llu)", why,
			     (unsigned long long)d->ctr.bad_packets);
		/* A malformed packet on the connection ends it; one not for us is dropped. */
		if (rc == -EINVAL && h.op != VIRTIO_VSOCK_OP_RST && h.src_cid == d->cfg.guest_cid) {
			if (is_conn(d, h.src_port) && d->st != CONN_GUEST_GONE)
				guest_gone(d, true);
			else
				queue_ctrl(d, VIRTIO_VSOCK_OP_RST, h.src_port, 0);
		}
		return;
	}
	on_packet(d, &h, c);
}

static void fill_hdr(const struct vsock_dev *d, uint16_t op, uint32_t guest_port, uint32_t flags,
		     uint32_t len, struct virtio_vsock_hdr *w)
{
	struct vsock_hdr h = {
	    .src_cid = VSOCK_HOST_CID,
	    .dst_cid = d->cfg.guest_cid,
	    .src_port = d->cfg.port,
	    .dst_port = guest_port,
	    .len = len,
	    .type = VIRTIO_VSOCK_TYPE_STREAM,
	    .op = op,
	    .flags = flags,
	};

	/* Our receive side's credit, on every packet of the connection. */
	if (is_conn(d, guest_port)) {
		h.buf_alloc = VSOCK_CONN_BUF;
		h.fwd_cnt = d->fwd_cnt;
	}
	vsock_hdr_encode(&h, w);
}

/* What the rx ring is wanted for: a control packet, or data the guest has credit for. */
static bool rx_work(struct vsock_dev *d)
{
	if (d->ctrl_n)
		return true;
	if ((d->st != CONN_OPEN && d->st != CONN_HOST_CLOSING) || !d->out_len || d->guest_shut_rcv)
		return false;
	if (credit(d))
		return true;
	if (!d->credit_requested) {
		d->credit_requested = true;
		queue_ctrl(d, VIRTIO_VSOCK_OP_CREDIT_REQUEST, d->guest_port, 0);
		return true;
	}
	return false;
}

/* Fill one rx chain with the next packet.  Returns the bytes written. */
static uint32_t rx_one(struct vsock_dev *d, const struct vq_chain *c)
{
	struct virtio_vsock_hdr w;

	if (d->ctrl_n) {
		struct ctrl k = d->ctrl[d->ctrl_head];

		d->ctrl_head = (d->ctrl_head + 1) % VSOCK_CTRL_QUEUE;
		d->ctrl_n--;
		fill_hdr(d, k.op, k.guest_port, k.flags, 0, &w);
		if (is_conn(d, k.guest_port))
			d->fwd_reported = d->fwd_cnt;
		vq_chain_write(c, 0, &w, sizeof(w));
		return VSOCK_HDR_BYTES;
	}
	uint32_t n = d->out_len, room = c->write_bytes - VSOCK_HDR_BYTES, cr = credit(d);

	if (n > room)
		n = room;
	if (n > cr)
		n = cr;
	if (n > VSOCK_MAX_PAYLOAD)
		n = VSOCK_MAX_PAYLOAD;
	fill_hdr(d, VIRTIO_VSOCK_OP_RW, d->guest_port, 0, n, &w);
	vq_chain_write(c, 0, &w, sizeof(w));
	uint32_t first = VSOCK_CONN_BUF - d->out_head < n ? VSOCK_CONN_BUF - d->out_head : n;
	vq_chain_write(c, VSOCK_HDR_BYTES, d->out + d->out_head, first);
	vq_chain_write(c, VSOCK_HDR_BYTES + first, d->out, n - first);
	d->out_head = (d->out_head + n) % VSOCK_CONN_BUF;
	d->out_len -= n;
	d->tx_cnt += n;
	d->fwd_reported = d->fwd_cnt;
	d->ctr.tx_bytes += n;
	return VSOCK_HDR_BYTES + n;
}

/* A host close completes once what it queued has gone out. */
static void finish_host_close(struct vsock_dev *d)
{
	if (d->st != CONN_HOST_CLOSING || (d->out_len && !d->guest_shut_rcv))
		return;
	queue_ctrl(d, VIRTIO_VSOCK_OP_SHUTDOWN, d->guest_port,
		   VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
	queue_ctrl(d, VIRTIO_VSOCK_OP_RST, d->guest_port, 0);
	d->st = CONN_NONE;
	d->out_len = d->out_head = 0;
}

/* Once per breakage: a broken ring is left alone, and says so once. */
static void say_broken(struct vsock_dev *d, const struct vq *vr, int i, const char *name)
{
	if (!vr->broken) {
		d->said_broken[i] = false;
		return;
	}
	if (d->said_broken[i])
		return;
	d->said_broken[i] = true;
	dlog(d, VSOCK_LOG_ERR,
	     "vsock: the guest broke its %s ring (it is left alone until QEMU sets it up again)",
	     name);
}

bool vsock_dev_process(struct vsock_dev *d, struct vq *rx, struct vq *tx, const struct vu_mem *m,
		       unsigned budget)
{
	struct vq_chain c;
	bool more = false;
	int rc;

	/* Step 1: the guest's packets. */
	for (unsigned i = 0; vq_ready(tx); i++) {
		if (i == budget) {
			more = true;
			break;
		}
		rc = vq_pop(tx, m, &c);
		if (rc == 0 || rc == -EIO)
			break;
		if (rc < 0) {
			d->ctr.bad_packets++;
			continue;
		}
		tx_one(d, &c);
		vq_push(tx, c.head, 0);
	}
	say_broken(d, tx, 1, "tx");
	vq_notify(tx);

	/* Step 2: ours, as far as the guest gave buffers. */
	finish_host_close(d);
	while (rx_work(d) && vq_ready(rx)) {
		rc = vq_pop(rx, m, &c);
		if (rc == 0 || rc == -EIO)
			break;
		if (rc < 0)
			continue;
		if (c.nr_read || c.write_bytes < VSOCK_HDR_BYTES) {
			/* Not a receive buffer we can use: given back empty. */
			d->ctr.bad_packets++;
			vq_push(rx, c.head, 0);
			continue;
		}
		vq_push(rx, c.head, rx_one(d, &c));
		d->ctr.rx_packets++;
		finish_host_close(d);
	}
	say_broken(d, rx, 0, "rx");
	vq_notify(rx);
	return more;
}

/* ---- the host side ------------------------------------------------------------------- */

void vsock_dev_conn(const struct vsock_dev *d, struct vsock_conn_view *v)
{
	memset(v, 0, sizeof(*v));
	v->gen = d->gen;
	v->open = d->st != CONN_NONE;
	v->guest_done = d->st == CONN_GUEST_GONE;
	v->guest_port = d->guest_port;
	v->in_bytes = d->in_len;
	if (d->st == CONN_OPEN && !d->guest_shut_rcv)
		v->out_room = VSOCK_CONN_BUF - d->out_len;
}

size_t vsock_dev_in_peek(const struct vsock_dev *d, const uint8_t **p)
{
	*p = d->in + d->in_head;
	return VSOCK_CONN_BUF - d->in_head < d->in_len ? VSOCK_CONN_BUF - d->in_head : d->in_len;
}

void vsock_dev_in_consume(struct vsock_dev *d, size_t n)
{
	if (n > d->in_len)
		n = d->in_len;
	d->in_head = (uint32_t)((d->in_head + n) % VSOCK_CONN_BUF);
	d->in_len -= (uint32_t)n;
	d->fwd_cnt += (uint32_t)n;
	if (d->st == CONN_GUEST_GONE && !d->in_len) {
		d->st = CONN_NONE;
		return;
	}
	/* Tell the guest its credit came back once it can see less than half of our buffer
	 * free: a sender that waits for credit is never left waiting on us. */
	uint32_t unreported = d->fwd_cnt - d->fwd_reported;
	uint32_t visible_free = VSOCK_CONN_BUF - (d->rx_cnt - d->fwd_reported);

	if (d->st == CONN_OPEN && unreported && visible_free < VSOCK_CONN_BUF / 2) {
		queue_ctrl(d, VIRTIO_VSOCK_OP_CREDIT_UPDATE, d->guest_port, 0);
		d->fwd_reported = d->fwd_cnt;
	}
}

size_t vsock_dev_out_push(struct vsock_dev *d, const void *buf, size_t n)
{
	if (d->st != CONN_OPEN || d->guest_shut_rcv)
		return 0;
	if (n > VSOCK_CONN_BUF - d->out_len)
		n = VSOCK_CONN_BUF - d->out_len;
	uint32_t tail = (d->out_head + d->out_len) % VSOCK_CONN_BUF;
	size_t first = VSOCK_CONN_BUF - tail < n ? VSOCK_CONN_BUF - tail : n;

	memcpy(d->out + tail, buf, first);
	memcpy(d->out, (const uint8_t *)buf + first, n - first);
	d->out_len += (uint32_t)n;
	return n;
}

void vsock_dev_host_close(struct vsock_dev *d)
{
	if (d->st == CONN_OPEN)
		d->st = CONN_HOST_CLOSING;
	else if (d->st == CONN_GUEST_GONE)
		d->st = CONN_NONE;
	finish_host_close(d);
}

void vsock_dev_drop(struct vsock_dev *d)
{
	d->st = CONN_NONE;
	d->ctrl_n = d->ctrl_head = 0;
	d->in_len = d->in_head = d->out_len = d->out_head = 0;
}

void vsock_dev_counters(const struct vsock_dev *d, struct vsock_dev_counters *c)
{
	*c = d->ctr;
}
