// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_agent_mglru.c - libFuzzer target for the guest agent's MGLRU reader
 * (guest-agent/agent_mglru.c): /sys/kernel/debug/lru_gen text -> generations -> a wss report.
 *
 * Each input: the first two bytes choose the page size (4 KiB .. 64 KiB) and how many bin
 * edges of the default set to use; the rest is lru_gen text.  Parsed with
 * agent_lru_gen_parse, folded with agent_wss_fold.  Checked: the parse stays within its
 * arrays and reports every lruvec's min <= max sequence; the fold's report is sendable
 * (proto_validate and proto_encode accept it) whatever the counts - sums saturate at the
 * protocol's bounds instead of wrapping, which would under-report the working set and let
 * the host take memory the guest uses.
 * Seeds (tests/fuzz/corpus/agent_mglru/) are lru_gen of a Debian 12 6.1 guest with
 * MGLRU on, and hand-made edge cases (huge counts, many memcgs, nodes with no gens).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

static uint8_t frame[PROTO_ENCODE_MAX_BYTES];
static struct agent_gen gens[AGENT_MAX_GENS];
static struct agent_lruvec vecs[AGENT_MAX_LRUVECS];
static struct proto_msg m;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t edges[] = {0, 1000, 5000, 30000, 120000, 600000, 3600000};
	uint32_t page, nr_edges;
	int n, nv = -1;
	bool more;
	char *text;
	size_t len;

	if (size < 2)
		return 0;
	page = 4096u << (data[0] % 5); /* 4 KiB .. 64 KiB */
	nr_edges = 1 + data[1] % (uint32_t)(sizeof(edges) / sizeof(edges[0]));
	text = malloc(size - 1);
	if (!text)
		return 0;
	memcpy(text, data + 2, size - 2);
	text[size - 2] = '\0';

	n = agent_lru_gen_parse(text, gens, AGENT_MAX_GENS, vecs, AGENT_MAX_LRUVECS, &nv, &more);
	if (n >= 0) {
		CHECK(n <= AGENT_MAX_GENS && nv >= 0 && nv <= AGENT_MAX_LRUVECS);
		for (int i = 0; i < nv; i++)
			CHECK(vecs[i].min_seq == UINT64_MAX || vecs[i].min_seq <= vecs[i].max_seq);
		memset(&m, 0, sizeof(m));
		m.type = PROTO_MSG_WSS;
		m.id = 1;
		agent_wss_fold(gens, n, !more, edges, nr_edges, page, &m.u.wss);
		m.u.wss.mono_ms = 1;
		/* no wrap-around: what the bins hold adds up to at least every page the
		 * generations hold (each bin saturates at PROTO_BYTES_MAX) */
		unsigned __int128 want = 0, got = 0;
		for (int i = 0; i < n; i++)
			want += ((unsigned __int128)gens[i].anon_pages + gens[i].file_pages) * page;
		for (uint32_t b = 0; b < m.u.wss.nr_bins; b++)
			got += (unsigned __int128)m.u.wss.bins[b].anon_bytes +
			       m.u.wss.bins[b].file_bytes;
		CHECK(got >= (want < PROTO_BYTES_MAX ? want : PROTO_BYTES_MAX));
		CHECK(proto_validate(&m, NULL) == PROTO_OK);
		CHECK(proto_encode(&m, frame, sizeof(frame), &len, NULL) == PROTO_OK);
	}
	free(text);
	return 0;
}
