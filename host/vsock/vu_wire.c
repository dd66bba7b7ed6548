// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vu_wire.c - the vhost-user envelope: request names for logs and the per-request rules
 * every message is checked against before a handler runs (vhost_int.h).
 *
 * Two layers, as QEMU's own back ends validate:
 *   1. the envelope (vu_session.c reads it): version 1, no reply flag, a payload no larger
 *      than the largest we accept (VU_PAYLOAD_MAX), at most VU_MAX_FDS fds, no truncated
 *      ancillary data.  A failure here means the stream cannot be trusted: -EPROTO, and the
 *      session closes the connection.
 *   2. the request (the rule table below): the exact payload size the request carries, the
 *      fds it may bring, its ring index and its own bounds.  A failure here is -EINVAL: the
 *      message is refused (a failure reply when QEMU asked for one), its fds are closed and
 *      no state changes.
 * One table row per request, so every handler gets the same checks (libvhost-user checks
 * some indexes in one handler and not in its neighbour).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "vsock/vhost_int.h"

enum payload_kind {
	PL_UNKNOWN = 0, /* no row: an unknown request */
	PL_NONE,        /* no payload */
	PL_U64,         /* a u64 */
	PL_STATE,       /* struct vu_vring_state, ring index checked */
	PL_ADDR,        /* struct vu_vring_addr, ring index checked */
	PL_VRING_FD,    /* u64: ring index and the no-fd bit; one fd unless the bit says none */
	PL_MEM,         /* struct vu_memory_wire with nregions regions and as many fds */
	PL_CONFIG,      /* struct vu_config_wire with size payload bytes */
	PL_REFUSED,     /* a request of a feature we never offer: refused whatever it holds */
};

struct rule {
	const char *name;
	enum payload_kind kind;
	bool reply; /* always answered, NEED_REPLY or not */
};

#define R(req, k, rep) [VU_##req] = {"VHOST_USER_" #req, k, rep}
static const struct rule rules[VU_REQUEST_MAX] = {
    R(GET_FEATURES, PL_NONE, true),
    R(SET_FEATURES, PL_U64, false),
    R(SET_OWNER, PL_NONE, false),
    R(RESET_OWNER, PL_NONE, false),
    R(SET_MEM_TABLE, PL_MEM, false),
    R(SET_LOG_BASE, PL_REFUSED, false),
    R(SET_LOG_FD, PL_REFUSED, false),
    R(SET_VRING_NUM, PL_STATE, false),
    R(SET_VRING_ADDR, PL_ADDR, false),
    R(SET_VRING_BASE, PL_STATE, false),
    R(GET_VRING_BASE, PL_STATE, true),
    R(SET_VRING_KICK, PL_VRING_FD, false),
    R(SET_VRING_CALL, PL_VRING_FD, false),
    R(SET_VRING_ERR, PL_VRING_FD, false),
    R(GET_PROTOCOL_FEATURES, PL_NONE, true),
    R(SET_PROTOCOL_FEATURES, PL_U64, false),
    R(GET_QUEUE_NUM, PL_NONE, true),
    R(SET_VRING_ENABLE, PL_STATE, false),
    R(SEND_RARP, PL_REFUSED, false),
    R(NET_SET_MTU, PL_REFUSED, false),
    R(SET_SLAVE_REQ_FD, PL_REFUSED, false),
    R(IOTLB_MSG, PL_REFUSED, false),
    R(SET_VRING_ENDIAN, PL_REFUSED, false),
    R(GET_CONFIG, PL_CONFIG, true),
    R(SET_CONFIG, PL_CONFIG, false),
    R(RESET_DEVICE, PL_REFUSED, false),
    R(VRING_KICK, PL_REFUSED, false),
    R(GET_MAX_MEM_SLOTS, PL_REFUSED, false),
    R(ADD_MEM_REG, PL_REFUSED, false),
    R(REM_MEM_REG, PL_REFUSED, false),
    R(SET_STATUS, PL_REFUSED, false),
    R(GET_STATUS, PL_REFUSED, false),
};
#undef R

const char *vu_request_name(uint32_t request)
{
	if (request < VU_REQUEST_MAX && rules[request].name)
		return rules[request].name;
	return "unknown";
}

bool vu_request_has_reply(uint32_t request)
{
	return request < VU_REQUEST_MAX && rules[request].reply;
}

void vu_msg_close_fds(struct vu_msg *m)
{
	for (unsigned i = 0; i < m->nr_fds && i < VU_MAX_FDS; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nr_fds = 0;
}

static int fail(int err, char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int err, char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}

static int check_size(const struct vu_msg *m, const char *name, uint32_t want, char *why,
		      size_t len)
{
	if (m->hdr.size != want)
		return fail(-EINVAL, why, len, "%s: payload of %u bytes, expected %u", name,
			    m->hdr.size, want);
	return 0;
}

static int check_fds(const struct vu_msg *m, const char *name, unsigned want, char *why, size_t len)
{
	if (m->nr_fds != want)
		return fail(-EINVAL, why, len, "%s: %u file descriptors, expected %u", name,
			    m->nr_fds, want);
	return 0;
}

static int check_ring(const char *name, uint64_t index, unsigned nr_queues, char *why, size_t len)
{
	if (index >= nr_queues)
		return fail(-EINVAL, why, len, "%s: ring %llu, the device has %u", name,
			    (unsigned long long)index, nr_queues);
	return 0;
}

static int check_mem(const struct vu_msg *m, const char *name, char *why, size_t len)
{
	uint32_t n;

	if (m->hdr.size < 8)
		return fail(-EINVAL, why, len, "%s: payload of %u bytes, shorter than its count",
			    name, m->hdr.size);
	n = m->p.mem.nregions;
	if (n == 0 || n > VU_MAX_REGIONS)
		return fail(-EINVAL, why, len, "%s: %u regions (1 to %d)", name, n, VU_MAX_REGIONS);
	int rc = check_size(m, name, 8 + n * (uint32_t)sizeof(struct vu_region_wire), why, len);
	return rc < 0 ? rc : check_fds(m, name, n, why, len);
}

static int check_config(const struct vu_msg *m, const char *name, char *why, size_t len)
{
	const struct vu_config_wire *c = &m->p.config;

	if (m->hdr.size < 12)
		return fail(-EINVAL, why, len, "%s: payload of %u bytes, shorter than its header",
			    name, m->hdr.size);
	if (c->size > VU_CONFIG_SPACE_MAX || c->offset > VU_CONFIG_SPACE_MAX - c->size)
		return fail(-EINVAL, why, len, "%s: window at %u of %u bytes", name, c->offset,
			    c->size);
	if (c->flags > 1)
		return fail(-EINVAL, why, len, "%s: flags 0x%x", name, c->flags);
	return check_size(m, name, 12 + c->size, why, len);
}

int vu_msg_check(const struct vu_msg *m, unsigned nr_queues, char *why, size_t whylen)
{
	uint32_t req = m->hdr.request;
	const char *name = vu_request_name(req);
	int rc;

	/* Step 1: the envelope. */
	if ((m->hdr.flags & VU_VERSION_MASK) != VU_VERSION || (m->hdr.flags & VU_FLAG_REPLY))
		return fail(-EPROTO, why, whylen, "%s: flags 0x%x (version 1, no reply bit)", name,
			    m->hdr.flags);
	if (m->hdr.size > VU_PAYLOAD_MAX)
		return fail(-EPROTO, why, whylen, "%s: payload of %u bytes (at most %zu)", name,
			    m->hdr.size, VU_PAYLOAD_MAX);
	if (m->nr_fds > VU_MAX_FDS)
		return fail(-EPROTO, why, whylen, "%s: %u file descriptors (at most %d)", name,
			    m->nr_fds, VU_MAX_FDS);

	/* Step 2: the request's own rule. */
	switch (req < VU_REQUEST_MAX ? rules[req].kind : PL_UNKNOWN) {
	case PL_UNKNOWN:
		return fail(-EINVAL, why, whylen, "%s request %u", name, req);
	case PL_REFUSED:
		return fail(-EINVAL, why, whylen, "%s: a feature this back end never offers", name);
	case PL_NONE:
		rc = check_size(m, name, 0, why, whylen);
		return rc < 0 ? rc : check_fds(m, name, 0, why, whylen);
	case PL_U64:
		rc = check_size(m, name, 8, why, whylen);
		return rc < 0 ? rc : check_fds(m, name, 0, why, whylen);
	case PL_STATE:
		rc = check_size(m, name, sizeof(struct vu_vring_state), why, whylen);
		if (rc == 0)
			rc = check_fds(m, name, 0, why, whylen);
		if (rc == 0)
			rc = check_ring(name, m->p.state.index, nr_queues, why, whylen);
		if (rc == 0 && req == VU_SET_VRING_ENABLE && m->p.state.num > 1)
			rc = fail(-EINVAL, why, whylen, "%s: %u (0 or 1)", name, m->p.state.num);
		if (rc == 0 && req == VU_SET_VRING_NUM &&
		    (m->p.state.num == 0 || m->p.state.num > VQ_MAX_NUM ||
		     (m->p.state.num & (m->p.state.num - 1))))
			rc = fail(-EINVAL, why, whylen, "%s: %u entries (a power of 2 up to %d)",
				  name, m->p.state.num, VQ_MAX_NUM);
		if (rc == 0 && req == VU_SET_VRING_BASE && m->p.state.num > UINT16_MAX)
			rc = fail(-EINVAL, why, whylen, "%s: base %u (16 bits)", name,
				  m->p.state.num);
		return rc;
	case PL_ADDR:
		rc = check_size(m, name, sizeof(struct vu_vring_addr), why, whylen);
		if (rc == 0)
			rc = check_fds(m, name, 0, why, whylen);
		if (rc == 0)
			rc = check_ring(name, m->p.addr.index, nr_queues, why, whylen);
		if (rc == 0 && m->p.addr.flags)
			rc = fail(-EINVAL, why, whylen, "%s: flags 0x%x (logging never offered)",
				  name, m->p.addr.flags);
		return rc;
	case PL_VRING_FD: {
		rc = check_size(m, name, 8, why, whylen);
		if (rc < 0)
			return rc;
		uint64_t v = m->p.u64;
		if (v & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD_MASK))
			return fail(-EINVAL, why, whylen, "%s: reserved bits in 0x%llx", name,
				    (unsigned long long)v);
		rc = check_fds(m, name, (v & VU_VRING_NOFD_MASK) ? 0 : 1, why, whylen);
		return rc < 0 ? rc
			      : check_ring(name, v & VU_VRING_IDX_MASK, nr_queues, why, whylen);
	}
	case PL_MEM:
		return check_mem(m, name, why, whylen);
	case PL_CONFIG:
		rc = check_config(m, name, why, whylen);
		return rc < 0 ? rc : check_fds(m, name, 0, why, whylen);
	}
	return fail(-EINVAL, why, whylen, "%s request %u", name, req);
}
