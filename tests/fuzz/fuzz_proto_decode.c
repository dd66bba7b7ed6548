// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_proto_decode.c - libFuzzer target for the host-agent protocol decoder.
 *
 * Each input is used twice:
 *   1. as one payload for proto_decode();
 *   2. as a byte stream for the frame reader, fed in chunks whose sizes come from the
 *      input's first byte, with every complete frame decoded.
 * Whatever decodes must re-encode, and the re-encoded frame must decode to the identical
 * struct (encoder and decoder agree on every accepted message); a violation traps.
 * Seeds in tests/fuzz/corpus/proto_decode/ are one valid frame payload of each message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct proto_msg m, back;
static uint8_t frame[PROTO_ENCODE_MAX_BYTES];

static void check_one(const void *json, size_t len)
{
	struct proto_error err;
	size_t flen;

	if (proto_decode(json, len, &m, &err) != PROTO_OK) {
		/* the error must be reportable to the peer */
		struct proto_msg reply;

		if (err.code == PROTO_OK)
			__builtin_trap();
		proto_error_to_msg(&err, 1, false, &reply);
		if (proto_encode(&reply, frame, sizeof(frame), &flen, NULL) != PROTO_OK)
			__builtin_trap();
		return;
	}
	if (proto_encode(&m, frame, sizeof(frame), &flen, &err) != PROTO_OK)
		__builtin_trap();
	if (proto_decode(frame + PROTO_FRAME_HDR_BYTES, flen - PROTO_FRAME_HDR_BYTES, &back,
			 &err) != PROTO_OK)
		__builtin_trap();
	/* proto_decode zeroes the whole struct first, padding included, so bytes compare */
	if (memcmp(&m, &back, sizeof(m)) != 0) // NOLINT(bugprone-suspicious-memory-comparison)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_reader r;
	const char *json;
	size_t jlen, off = 0, chunk;

	check_one(data, size);

	/* as a stream: a 4-byte length prefix in front, then the input itself as more frames */
	chunk = size ? (size_t)data[0] % 61 + 1 : 1;
	proto_reader_init(&r);
	{
		uint8_t hdr[4] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16),
				  (uint8_t)(size >> 8), (uint8_t)size};

		if (proto_reader_feed(&r, hdr, 4) != 4)
			__builtin_trap();
	}
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;
		long took = proto_reader_feed(&r, data + off, n);
		int rc;

		if (took < 0)
			break;
		off += (size_t)took;
		while ((rc = proto_reader_next(&r, &json, &jlen, NULL)) == 1)
			check_one(json, jlen);
		if (rc < 0)
			break;
		if (took == 0 && rc == 0)
			__builtin_trap(); /* no progress on a healthy reader */
	}
	proto_reader_free(&r);
	return 0;
}
