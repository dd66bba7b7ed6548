// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_writer.c - bounded output queue for non-blocking byte streams.
 *
 * Layout: one contiguous buffer, [ sent | head ... queued ... tail | free ].  Queued frames
 * are written from head; before queueing, sent bytes are dropped by compaction.  The queue
 * never holds more than limit_bytes: a peer that stops reading (a virtio-serial port with no
 * host behind it blocks every write) costs at most that much memory, and the caller learns
 * it from PROTO_E_NOSPC instead of blocking.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto_int.h"

void proto_writer_init(struct proto_writer *w, size_t limit_bytes)
{
	memset(w, 0, sizeof(*w));
	w->limit_bytes = limit_bytes ? limit_bytes : PROTO_WRITER_DEFAULT_LIMIT;
}

void proto_writer_free(struct proto_writer *w)
{
	free(w->buf);
	w->buf = NULL;
	w->cap = w->head = w->tail = 0;
}

void proto_writer_reset(struct proto_writer *w)
{
	w->head = w->tail = 0;
}

size_t proto_writer_pending(const struct proto_writer *w)
{
	return w->tail - w->head;
}

enum proto_status proto_writer_queue(struct proto_writer *w, const void *frame, size_t len)
{
	size_t pending = w->tail - w->head;

	if (len > w->limit_bytes - (pending < w->limit_bytes ? pending : w->limit_bytes) ||
	    pending >= w->limit_bytes)
		return PROTO_E_NOSPC;
	if (w->head > 0) {
		memmove(w->buf, w->buf + w->head, pending);
		w->tail = pending;
		w->head = 0;
	}
	if (w->cap - w->tail < len) {
		size_t ncap = w->cap ? w->cap : 4096;
		uint8_t *nb;

		while (ncap - w->tail < len)
			ncap *= 2;
		nb = realloc(w->buf, ncap);
		if (!nb)
			return PROTO_E_NOMEM;
		w->buf = nb;
		w->cap = ncap;
	}
	memcpy(w->buf + w->tail, frame, len);
	w->tail += len;
	return PROTO_OK;
}

enum proto_status proto_writer_send(struct proto_writer *w, const struct proto_msg *m,
				    struct proto_error *err)
{
	uint8_t frame[PROTO_ENCODE_MAX_BYTES];
	enum proto_status s;
	size_t n;

	if ((s = proto_encode(m, frame, sizeof(frame), &n, err)))
		return s;
	if ((s = proto_writer_queue(w, frame, n)))
		return proto_err_set(err, s, "", "output queue full (%zu bytes pending)",
				     proto_writer_pending(w));
	return PROTO_OK;
}

int proto_writer_flush(struct proto_writer *w, int fd)
{
	struct stat st;
	bool sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);

	while (w->head < w->tail) {
		size_t left = w->tail - w->head;
		ssize_t n = sock ? send(fd, w->buf + w->head, left, MSG_NOSIGNAL | MSG_DONTWAIT)
				 : write(fd, w->buf + w->head, left);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 1;
			return -errno;
		}
		w->head += (size_t)n;
	}
	w->head = w->tail = 0;
	return 0;
}
