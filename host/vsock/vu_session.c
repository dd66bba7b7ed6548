// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vu_session.c - one vhost-user connection from QEMU, back-end side (vhost.h).
 *
 * Each message goes through three steps, and only the last changes anything:
 *   1. read: the header with its ancillary fds (a truncated control message, or a payload
 *      larger than any request carries, is a broken envelope: -EPROTO, close);
 *   2. check: vu_msg_check's per-request rules (vu_wire.c), then the handler's own
 *      preconditions (features offered, the config window, a translatable ring);
 *   3. apply, then reply: GET_* requests always get their payload (a zero-size payload when
 *      they failed, which QEMU reads as an error); others get a u64 0/1 when QEMU set
 *      NEED_REPLY (REPLY_ACK).  Received fds that no handler took are closed.
 *
 * Restarts.  QEMU 7.2's vhost-user-vsock has no reconnect logic of its own: when memtided
 * restarts and connects again to QEMU's socket, QEMU sends nothing until it restarts the
 * device (vhost_dev_stop/start: memtided makes it do so with QMP stop/cont).  The new
 * session then sees SET_VRING_ENABLE, GET_VRING_BASE, SET_FEATURES, SET_MEM_TABLE, the ring
 * setup and kicks - with no GET_FEATURES or SET_OWNER before them - and must accept that.
 * It cannot know the rings' bases at GET_VRING_BASE (the last back end died with them), so
 * it answers 0 and marks the ring base_unknown; when QEMU hands that 0 back with
 * SET_VRING_BASE the ring resumes from the used index in guest memory instead (exact for
 * our device: every chain it takes is returned before the next poll, so used == avail).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vsock/vhost.h"
#include "vsock/vhost_int.h"

#define VU_MAX_QUEUES 8

#define PF_OFFERED ((1ull << VU_PF_MQ) | (1ull << VU_PF_REPLY_ACK) | (1ull << VU_PF_CONFIG))

struct vu_session {
	const struct vu_device_ops *ops;
	void *dev;
	uint64_t features;          /* acknowledged by SET_FEATURES */
	uint64_t protocol_features; /* acknowledged by SET_PROTOCOL_FEATURES */
	bool initialised;           /* GET_FEATURES or SET_OWNER seen */
	bool started;               /* some ring got a kick fd */
	struct vu_mem mem;
	struct vq rings[VU_MAX_QUEUES];
	bool base_trusted[VU_MAX_QUEUES]; /* last_avail came from QEMU or from guest memory */
	bool base_made_up[VU_MAX_QUEUES]; /* our last GET_VRING_BASE answer was a guess (0) */
	char err[240];
	uint64_t err_seq;
	struct vu_session_counters ctr;
};

static uint64_t offered_features(const struct vu_session *s)
{
	return (1ull << VU_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES) | s->ops->features;
}

static int refuse(struct vu_session *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(struct vu_session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->err_seq++;
	return err;
}

int vu_session_new(const struct vu_device_ops *ops, void *dev, struct vu_session **out)
{
	struct vu_session *s;

	if (ops->nr_queues == 0 || ops->nr_queues > VU_MAX_QUEUES)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->dev = dev;
	for (unsigned i = 0; i < VU_MAX_QUEUES; i++)
		vq_init(&s->rings[i]);
	*out = s;
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void vu_session_free(struct vu_session *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < VU_MAX_QUEUES; i++) {
		close_fd(&s->rings[i].kick_fd);
		close_fd(&s->rings[i].call_fd);
		close_fd(&s->rings[i].err_fd);
	}
	vu_mem_clear(&s->mem);
	free(s);
}

/* ---- step 1: read -------------------------------------------------------------------- */

static int read_msg(int fd, struct vu_msg *m)
{
	union {
		char buf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &m->hdr, .iov_len = sizeof(m->hdr)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;

	memset(m, 0, sizeof(*m));
	/* The first byte decides whether there is a message at all; the rest of it follows
	 * (QEMU writes a message in one go), bounded by the socket's SO_RCVTIMEO. */
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (n == 0)
		return -EPIPE;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->nr_fds < VU_MAX_FDS)
				m->fds[m->nr_fds++] = f;
			else
				close(f);
		}
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		vu_msg_close_fds(m);
		return -EPROTO;
	}
	if ((size_t)n < sizeof(m->hdr)) {
		ssize_t r = recv(fd, (char *)&m->hdr + n, sizeof(m->hdr) - (size_t)n, MSG_WAITALL);

		if (r != (ssize_t)(sizeof(m->hdr) - (size_t)n)) {
			vu_msg_close_fds(m);
			return r == 0 ? -EPIPE : -EPROTO;
		}
	}
	if (m->hdr.size > VU_PAYLOAD_MAX) {
		vu_msg_close_fds(m);
		return -EPROTO;
	}
	if (m->hdr.size) {
		n = recv(fd, &m->p, m->hdr.size, MSG_WAITALL);
		if (n != (ssize_t)m->hdr.size) {
			vu_msg_close_fds(m);
			return n == 0 ? -EPIPE : -EPROTO;
		}
	}
	return 0;
}

static int send_reply(int fd, uint32_t request, const void *payload, uint32_t size)
{
	struct {
		struct vu_hdr h;
		union vu_payload p;
	} __attribute__((packed)) r;

	r.h.request = request;
	r.h.flags = VU_VERSION | VU_FLAG_REPLY;
	r.h.size = size;
	if (size)
		memcpy(&r.p, payload, size);
	ssize_t n = send(fd, &r, sizeof(r.h) + size, MSG_NOSIGNAL);

	return n == (ssize_t)(sizeof(r.h) + size) ? 0 : -EIO;
}

/* ---- step 3: one handler per request ------------------------------------------------- */

/* A handler returns 0 or a negative errno (s->err says why), and for GET_* requests fills
 * *rep / *rep_size. */
typedef int (*handler_fn)(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			  uint32_t *rep_size);

static int h_get_features(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			  uint32_t *rep_size)
{
	(void)m;
	s->initialised = true;
	rep->u64 = offered_features(s);
	*rep_size = 8;
	return 0;
}

static int h_set_features(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			  uint32_t *rep_size)
{
	(void)rep;
	(void)rep_size;
	if (m->p.u64 & ~offered_features(s))
		return refuse(s, -EINVAL, "SET_FEATURES: 0x%llx has bits never offered (0x%llx)",
			      (unsigned long long)m->p.u64,
			      (unsigned long long)offered_features(s));
	s->features = m->p.u64;
	return 0;
}

static int h_set_owner(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
		       uint32_t *rep_size)
{
	(void)m;
	(void)rep;
	(void)rep_size;
	s->initialised = true;
	return 0;
}

/* Deprecated; the spec's advice: disable every ring, keep the session. */
static int h_reset_owner(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			 uint32_t *rep_size)
{
	(void)m;
	(void)rep;
	(void)rep_size;
	for (unsigned i = 0; i < s->ops->nr_queues; i++)
		s->rings[i].started = false;
	return 0;
}

static void retranslate(struct vu_session *s)
{
	for (unsigned i = 0; i < s->ops->nr_queues; i++) {
		struct vq *vr = &s->rings[i];

		if (vr->num && vr->desc_uva)
			(void)vq_translate(vr, &s->mem);
	}
}

static int h_set_mem_table(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			   uint32_t *rep_size)
{
	char why[200];
	int rc;

	(void)rep;
	(void)rep_size;
	rc = vu_mem_set(&s->mem, &m->p.mem, m->fds, why, sizeof(why));
	/* The mappings hold the memory now; the fds are not needed either way. */
	vu_msg_close_fds(m);
	if (rc < 0)
		return refuse(s, rc, "SET_MEM_TABLE: %s", why);
	s->ctr.mem_tables++;
	retranslate(s);
	return 0;
}

static int h_set_vring_num(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			   uint32_t *rep_size)
{
	struct vq *vr = &s->rings[m->p.state.index];

	(void)rep;
	(void)rep_size;
	vr->num = (uint16_t)m->p.state.num; /* 32768 at most: checked */
	vr->desc = vr->avail = vr->used = NULL;
	vr->broken = false;
	if (vr->desc_uva)
		(void)vq_translate(vr, &s->mem);
	return 0;
}

static int h_set_vring_addr(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			    uint32_t *rep_size)
{
	const struct vu_vring_addr *a = &m->p.addr;
	struct vq *vr = &s->rings[a->index];
	struct vq prev = *vr;
	int rc;

	(void)rep;
	(void)rep_size;
	vr->desc_uva = a->desc_uva;
	vr->avail_uva = a->avail_uva;
	vr->used_uva = a->used_uva;
	vr->broken = false;
	rc = vq_translate(vr, &s->mem);
	if (rc < 0) {
		*vr = prev;
		return refuse(s, rc,
			      "SET_VRING_ADDR: ring %u at desc 0x%llx avail 0x%llx used 0x%llx "
			      "with %u entries is %s",
			      a->index, (unsigned long long)a->desc_uva,
			      (unsigned long long)a->avail_uva, (unsigned long long)a->used_uva,
			      vr->num,
			      rc == -EFAULT ? "outside the memory table" : "misaligned or unsized");
	}
	return 0;
}

static int h_set_vring_base(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			    uint32_t *rep_size)
{
	unsigned q = m->p.state.index;
	struct vq *vr = &s->rings[q];

	(void)rep;
	(void)rep_size;
	if (s->base_made_up[q] && m->p.state.num == 0) {
		/* Our own guess coming back: resume from guest memory instead. */
		vr->base_unknown = true;
		s->base_trusted[q] = false;
	} else {
		vr->last_avail = (uint16_t)m->p.state.num;
		vr->base_unknown = false;
		s->base_trusted[q] = true;
	}
	s->base_made_up[q] = false;
	vr->synced = false;
	return 0;
}

static int h_get_vring_base(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			    uint32_t *rep_size)
{
	unsigned q = m->p.state.index;
	struct vq *vr = &s->rings[q];

	/* Stops the ring (the spec's "stop ring upon GET_VRING_BASE"). */
	vr->started = false;
	close_fd(&vr->kick_fd);
	rep->state.index = q;
	if (s->base_trusted[q] || vr->synced) {
		rep->state.num = vr->last_avail;
	} else {
		rep->state.num = 0;
		s->base_made_up[q] = true;
		vr->base_unknown = true;
	}
	vr->synced = false;
	*rep_size = sizeof(rep->state);
	return 0;
}

static int h_set_vring_fd(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			  uint32_t *rep_size)
{
	unsigned q = (unsigned)(m->p.u64 & VU_VRING_IDX_MASK);
	bool nofd = (m->p.u64 & VU_VRING_NOFD_MASK) != 0;
	struct vq *vr = &s->rings[q];
	int fd = nofd ? -1 : m->fds[0];

	(void)rep;
	(void)rep_size;
	if (m->hdr.request == VU_SET_VRING_KICK && nofd)
		return refuse(s, -EINVAL,
			      "SET_VRING_KICK: ring %u without a kick fd (polling "
			      "mode is not supported)",
			      q);
	m->nr_fds = 0; /* the ring owns it now */
	switch (m->hdr.request) {
	case VU_SET_VRING_KICK:
		close_fd(&vr->kick_fd);
		vr->kick_fd = fd;
		/* A kick fd starts the ring; without protocol features it starts enabled. */
		vr->started = true;
		vr->synced = false;
		if (!(s->features & (1ull << VU_F_PROTOCOL_FEATURES)))
			vr->enabled = true;
		s->started = true;
		break;
	case VU_SET_VRING_CALL:
		close_fd(&vr->call_fd);
		vr->call_fd = fd;
		break;
	default:
		close_fd(&vr->err_fd);
		vr->err_fd = fd;
		break;
	}
	return 0;
}

static int h_get_protocol_features(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
				   uint32_t *rep_size)
{
	(void)s;
	(void)m;
	rep->u64 = PF_OFFERED;
	*rep_size = 8;
	return 0;
}

static int h_set_protocol_features(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
				   uint32_t *rep_size)
{
	(void)rep;
	(void)rep_size;
	if (m->p.u64 & ~PF_OFFERED)
		return refuse(s, -EINVAL,
			      "SET_PROTOCOL_FEATURES: 0x%llx has bits never offered (0x%llx)",
			      (unsigned long long)m->p.u64, (unsigned long long)PF_OFFERED);
	s->protocol_features = m->p.u64;
	return 0;
}

static int h_get_queue_num(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			   uint32_t *rep_size)
{
	(void)m;
	rep->u64 = s->ops->nr_queues;
	*rep_size = 8;
	return 0;
}

static int h_set_vring_enable(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			      uint32_t *rep_size)
{
	(void)rep;
	(void)rep_size;
	s->rings[m->p.state.index].enabled = m->p.state.num != 0;
	return 0;
}

static int h_get_config(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			uint32_t *rep_size)
{
	const struct vu_config_wire *c = &m->p.config;
	int rc;

	if (c->offset > s->ops->config_bytes || c->size > s->ops->config_bytes - c->offset)
		return refuse(s, -EINVAL, "GET_CONFIG: %u bytes at %u, the config space has %u",
			      c->size, c->offset, s->ops->config_bytes);
	rep->config.offset = c->offset;
	rep->config.size = c->size;
	rep->config.flags = c->flags;
	rc = s->ops->get_config(s->dev, c->offset, rep->config.payload, c->size);
	if (rc < 0)
		return refuse(s, rc, "GET_CONFIG: the device failed (%s)", strerror(-rc));
	*rep_size = 12 + c->size;
	return 0;
}

static int h_set_config(struct vu_session *s, struct vu_msg *m, union vu_payload *rep,
			uint32_t *rep_size)
{
	(void)m;
	(void)rep;
	(void)rep_size;
	return refuse(s, -EPERM, "SET_CONFIG: the vsock config space (guest_cid) is read-only");
}

static handler_fn handler(uint32_t request)
{
	switch (request) {
	case VU_GET_FEATURES:
		return h_get_features;
	case VU_SET_FEATURES:
		return h_set_features;
	case VU_SET_OWNER:
		return h_set_owner;
	case VU_RESET_OWNER:
		return h_reset_owner;
	case VU_SET_MEM_TABLE:
		return h_set_mem_table;
	case VU_SET_VRING_NUM:
		return h_set_vring_num;
	case VU_SET_VRING_ADDR:
		return h_set_vring_addr;
	case VU_SET_VRING_BASE:
		return h_set_vring_base;
	case VU_GET_VRING_BASE:
		return h_get_vring_base;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		return h_set_vring_fd;
	case VU_GET_PROTOCOL_FEATURES:
		return h_get_protocol_features;
	case VU_SET_PROTOCOL_FEATURES:
		return h_set_protocol_features;
	case VU_GET_QUEUE_NUM:
		return h_get_queue_num;
	case VU_SET_VRING_ENABLE:
		return h_set_vring_enable;
	case VU_GET_CONFIG:
		return h_get_config;
	case VU_SET_CONFIG:
		return h_set_config;
	default:
		return NULL; /* vu_msg_check refused everything else */
	}
}

int vu_session_read(struct vu_session *s, int fd)
{
	struct vu_msg m;
	union vu_payload rep;
	uint32_t rep_size = 0;
	char why[200];
	int rc;

	rc = read_msg(fd, &m);
	if (rc == -EPROTO)
		return refuse(s, -EPROTO, "a broken message envelope (truncated, or too large)");
	if (rc < 0)
		return rc;
	s->ctr.messages++;
	/* Step 2, then step 3. */
	rc = vu_msg_check(&m, s->ops->nr_queues, why, sizeof(why));
	if (rc == -EPROTO) {
		vu_msg_close_fds(&m);
		return refuse(s, -EPROTO, "%s", why);
	}
	if (rc < 0) {
		refuse(s, rc, "%s", why);
	} else {
		handler_fn h = handler(m.hdr.request);

		memset(&rep, 0, sizeof(rep));
		rc = h ? h(s, &m, &rep, &rep_size)
		       : refuse(s, -EINVAL, "%s: no handler", vu_request_name(m.hdr.request));
	}
	vu_msg_close_fds(&m);
	if (rc < 0)
		s->ctr.refused++;
	if (vu_request_has_reply(m.hdr.request)) {
		/* A failed GET gets an empty payload: QEMU reads the size mismatch as an error. */
		if (send_reply(fd, m.hdr.request, &rep, rc < 0 ? 0 : rep_size) < 0)
			return -EPIPE;
	} else if (m.hdr.flags & VU_FLAG_NEED_REPLY) {
		/* Answered whatever was negotiated: QEMU waits for it either way (a restarted
		 * session never saw SET_PROTOCOL_FEATURES, and QEMU still asks). */
		uint64_t v = rc < 0 ? 1 : 0;

		if (send_reply(fd, m.hdr.request, &v, 8) < 0)
			return -EPIPE;
	}
	return 0;
}

const char *vu_session_error(const struct vu_session *s)
{
	return s->err;
}

uint64_t vu_session_error_seq(const struct vu_session *s)
{
	return s->err_seq;
}

int vu_session_kick_fd(const struct vu_session *s, unsigned q)
{
	return q < s->ops->nr_queues ? s->rings[q].kick_fd : -1;
}

void vu_session_kicked(struct vu_session *s, unsigned q)
{
	uint64_t v;

	if (q < s->ops->nr_queues && s->rings[q].kick_fd >= 0 &&
	    read(s->rings[q].kick_fd, &v, sizeof(v)) == sizeof(v))
		s->ctr.kicks++;
}

struct vq *vu_session_ring(struct vu_session *s, unsigned q)
{
	return q < s->ops->nr_queues ? &s->rings[q] : NULL;
}

const struct vu_mem *vu_session_mem(const struct vu_session *s)
{
	return &s->mem;
}

bool vu_session_initialised(const struct vu_session *s)
{
	return s->initialised;
}

bool vu_session_started(const struct vu_session *s)
{
	return s->started;
}

void vu_session_counters(const struct vu_session *s, struct vu_session_counters *c)
{
	*c = s->ctr;
}

unsigned vu_session_layout(const struct vu_session *s, struct vu_layout_region *out, unsigned max,
			   uint64_t *generation)
{
	unsigned n = s->mem.n < max ? s->mem.n : max;

	for (unsigned i = 0; i < n; i++) {
		out[i].gpa = s->mem.r[i].gpa;
		out[i].bytes = s->mem.r[i].size;
		out[i].qemu_va = s->mem.r[i].uva;
		out[i].fd_offset = s->mem.r[i].mmap_offset;
	}
	*generation = s->mem.generation;
	return n;
}
