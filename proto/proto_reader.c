// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_reader.c - incremental frame reader for non-blocking byte streams.
 *
 * Layout: one contiguous buffer,
 *
 *	buf: [ consumed | head ... unparsed bytes ... tail | free ]
 *
 * proto_reader_next() parses the frame at head; a complete one is returned in place (no
 * copy) and head moves past it.  Before more bytes come in, the unparsed bytes are moved to
 * the front (compaction), so a frame always lies contiguous in buf.
 *
 * Invariants: head <= tail <= cap <= READER_MAX_CAP.  The buffer grows (doubling, from
 * READER_MIN_CAP) only to hold the frame whose header was read, so its size is bounded by
 * PROTO_FRAME_HDR_BYTES + PROTO_FRAME_MAX_BYTES whatever the peer sends; a length prefix
 * above the bound breaks the reader before anything is allocated for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto_int.h"

#define READER_MIN_CAP (16u * 1024)
#define READER_MAX_CAP (PROTO_FRAME_HDR_BYTES + PROTO_FRAME_MAX_BYTES)
#define READ_CHUNK     (64u * 1024) /* most one read(2) asks for beyond the current frame */

void proto_reader_init(struct proto_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void proto_reader_free(struct proto_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void proto_reader_reset(struct proto_reader *r)
{
	r->head = r->tail = 0;
	r->broken = false;
	r->broken_code = PROTO_OK;
}

size_t proto_reader_pending(const struct proto_reader *r)
{
	return r->tail - r->head;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bytes the frame at head still needs: its header, then its payload. */
static size_t frame_need(const struct proto_reader *r)
{
	size_t have = r->tail - r->head;

	if (have < PROTO_FRAME_HDR_BYTES)
		return PROTO_FRAME_HDR_BYTES - have;
	{
		uint32_t len = be32(r->buf + r->head);

		if (len == 0 || len > PROTO_FRAME_MAX_BYTES)
			return 0; /* next() will report it */
		return PROTO_FRAME_HDR_BYTES + len > have ? PROTO_FRAME_HDR_BYTES + len - have : 0;
	}
}

/* Make room for want more bytes after tail: compact, then grow up to READER_MAX_CAP.
 * Returns the room there is (maybe less than want), or -1 on ENOMEM. */
static long make_room(struct proto_reader *r, size_t want)
{
	if (r->head > 0) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
	if (r->cap - r->tail < want && r->cap < READER_MAX_CAP) {
		size_t ncap = r->cap ? r->cap : READER_MIN_CAP;
		uint8_t *nb;

		while (ncap - r->tail < want && ncap < READER_MAX_CAP)
			ncap *= 2;
		if (ncap > READER_MAX_CAP)
			ncap = READER_MAX_CAP;
		nb = realloc(r->buf, ncap);
		if (!nb) {
			errno = ENOMEM;
			return -1;
		}
		r->buf = nb;
		r->cap = ncap;
	}
	return (long)(r->cap - r->tail);
}

/* How many bytes to take now: what the current frame needs, plus some of the next ones
 * (so small frames come in batches), never past READER_MAX_CAP. */
static size_t want_now(const struct proto_reader *r)
{
	size_t need = frame_need(r);

	return need + READ_CHUNK;
}

long proto_reader_feed(struct proto_reader *r, const void *data, size_t len)
{
	long room;

	if (r->broken || len == 0)
		return 0;
	room = make_room(r, want_now(r) < len ? want_now(r) : len);
	if (room < 0)
		return -1;
	if ((size_t)room < len)
		len = (size_t)room;
	memcpy(r->buf + r->tail, data, len);
	r->tail += len;
	return (long)len;
}

long proto_reader_read_fd(struct proto_reader *r, int fd)
{
	long room;
	ssize_t n;

	if (r->broken)
		return -EPROTO;
	room = make_room(r, want_now(r));
	if (room < 0)
		return -ENOMEM;
	if (room == 0)
		return -ENOBUFS; /* a complete frame is waiting: call proto_reader_next first */
	n = read(fd, r->buf + r->tail, (size_t)room);
	if (n < 0)
		return -errno;
	r->tail += (size_t)n;
	return (long)n;
}

int proto_reader_next(struct proto_reader *r, const char **json, size_t *len,
		      struct proto_error *err)
{
	size_t have = r->tail - r->head;
	uint32_t flen;

	if (r->broken) {
		proto_err_fill(err, r->broken_code, "", "stream broken earlier (%s)",
			       proto_status_name(r->broken_code));
		return -1;
	}
	if (have < PROTO_FRAME_HDR_BYTES)
		return 0;
	flen = be32(r->buf + r->head);
	if (flen == 0 || flen > PROTO_FRAME_MAX_BYTES) {
		r->broken = true;
		r->broken_code = flen ? PROTO_E_FRAME_TOO_LARGE : PROTO_E_FRAME_EMPTY;
		proto_err_fill(err, r->broken_code, "", "frame length %u (must be 1..%u)", flen,
			       PROTO_FRAME_MAX_BYTES);
		return -1;
	}
	if (have < PROTO_FRAME_HDR_BYTES + (size_t)flen)
		return 0;
	*json = (const char *)r->buf + r->head + PROTO_FRAME_HDR_BYTES;
	*len = flen;
	r->head += PROTO_FRAME_HDR_BYTES + (size_t)flen;
	return 1;
}
