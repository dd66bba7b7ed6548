// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_agent_config.c - libFuzzer target for the guest agent's settings
 * (guest-agent/agent_config.c): the key=value file (libinih) and, through the same
 * agent_config_set, its --key=value flags.
 *
 * Each input is a config file's text, loaded over the defaults with agent_config_load_text;
 * then each of its lines of the form key=value is also set on its own, as a flag would be.
 * Checked: a rejected file leaves the settings untouched and says where; an accepted one
 * has every string terminated in its buffer, every number within its key's bounds
 * (intervals, rates, client count), a backoff range that is a range, and prints
 * (agent_config_dump) without fault.
 * Seeds (tests/fuzz/corpus/agent_config/) are a commented file with every key, and the
 * integration tests' files.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

static void check(const struct agent_config *c)
{
	CHECK(memchr(c->port_name, 0, sizeof(c->port_name)) &&
	      memchr(c->device, 0, sizeof(c->device)));
	CHECK(memchr(c->unix_path, 0, sizeof(c->unix_path)));
	CHECK(memchr(c->hint_socket, 0, sizeof(c->hint_socket)));
	CHECK(memchr(c->sys_root, 0, sizeof(c->sys_root)));
	CHECK(c->transport >= AGENT_TR_VIRTIO && c->transport <= AGENT_TR_AUTO);
	CHECK(c->report_interval_ms >= PROTO_INTERVAL_MIN_MS &&
	      c->report_interval_ms <= PROTO_INTERVAL_MAX_MS);
	CHECK(c->wss_interval_ms >= PROTO_INTERVAL_MIN_MS &&
	      c->wss_interval_ms <= PROTO_INTERVAL_MAX_MS);
	CHECK(c->floor_bytes <= PROTO_BYTES_MAX && c->floor_percent <= 90);
	CHECK(c->send_rate_per_s >= 0.1 && c->send_rate_per_s <= 1000);
	CHECK(c->hint_rate_per_s >= 0.1 && c->hint_rate_per_s <= 1000);
	CHECK(c->max_hint_clients >= 1 && c->max_hint_clients <= 64);
	CHECK(c->log_level <= 3 && c->backoff_min_ms >= 1);
}

/* Byte for byte: the copies under comparison were made with memcpy, padding included. */
static bool same_bytes(const void *a, const void *b, size_t n)
{
	// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
	return memcmp(a, b, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agent_config c, before;
	static int devnull = -1;
	char err[256];
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	memcpy(text, data, size);
	text[size] = '\0';

	agent_config_defaults(&c);
	memcpy(&before, &c, sizeof(c));
	err[0] = '\0';
	if (agent_config_load_text(&c, "fuzz.conf", text, err, sizeof(err)) == 0) {
		check(&c);
		CHECK(c.backoff_min_ms <= c.backoff_max_ms);
		agent_config_dump(&c, devnull);
	} else {
		CHECK(strncmp(err, "fuzz.conf", 9) == 0);
		CHECK(same_bytes(&c, &before, sizeof(c)));
	}

	/* as flags: key=value per line, each applied alone; a refused one changes nothing */
	agent_config_defaults(&c);
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (!eq)
			continue;
		*eq = '\0';
		memcpy(&before, &c, sizeof(c));
		if (agent_config_set(&c, line, eq + 1, err, sizeof(err)) == 0)
			check(&c);
		else
			CHECK(same_bytes(&c, &before, sizeof(c)));
	}
	free(text);
	return 0;
}
