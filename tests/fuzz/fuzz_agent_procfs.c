// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_agent_procfs.c - libFuzzer target for the guest agent's /proc parsers
 * (guest-agent/agent_procfs.c): /proc/meminfo, /proc/vmstat, /proc/pressure/memory and
 * /proc/iomem text.
 *
 * Each input is given to all four parsers (a file's text is what the guest kernel, or a
 * test's sys_root, puts there).  Checked beyond "no crash": what a parser accepts is within
 * the protocol's ranges and sendable - a stats or hello message built from it passes
 * proto_validate and encodes (the file comment promises that "a kernel oddity never makes a
 * report unsendable"); free <= total; RAM ranges ascend without overlap.
 * Seeds (tests/fuzz/corpus/agent_procfs/) are real files of a Debian 12 6.1 guest and host.
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

static void sendable(const struct proto_msg *m)
{
	size_t len;

	CHECK(proto_validate(m, NULL) == PROTO_OK);
	CHECK(proto_encode(m, frame, sizeof(frame), &len, NULL) == PROTO_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct proto_msg m;
	struct proto_stats *st = &m.u.stats;
	char *text = malloc(size + 1);
	int n;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.id = 1;
	st->mono_ms = 1;
	if (agent_parse_meminfo(text, st) == 0) {
		CHECK(st->mem_free_bytes <= st->mem_total_bytes);
		CHECK(st->swap_free_bytes <= st->swap_total_bytes);
		(void)agent_parse_vmstat(text, st);
		if (agent_parse_psi(text, &st->psi) == 0)
			st->has_psi = true;
		sendable(&m);
	} else {
		(void)agent_parse_vmstat(text, st);
		(void)agent_parse_psi(text, &st->psi);
	}

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.id = 1;
	m.u.hello.role = PROTO_ROLE_AGENT;
	m.u.hello.version_min = PROTO_VERSION_MIN;
	m.u.hello.version_max = PROTO_VERSION_MAX;
	m.u.hello.page_size_bytes = 4096;
	memcpy(m.u.hello.software, "fuzz", 5);
	memcpy(m.u.hello.kernel, "6.1", 4);
	n = agent_parse_iomem(text, m.u.hello.ram, PROTO_MAX_RAM_RANGES);
	CHECK(n >= 0 && n <= PROTO_MAX_RAM_RANGES);
	for (int i = 1; i < n; i++)
		CHECK(m.u.hello.ram[i].start >=
		      m.u.hello.ram[i - 1].start + m.u.hello.ram[i - 1].bytes);
	if (n > 0) {
		m.u.hello.nr_ram = (uint32_t)n;
		m.u.hello.caps = PROTO_CAP_RAM_LAYOUT;
		sendable(&m);
	}
	free(text);
	return 0;
}
