// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_config.c - libFuzzer target for memtided's config file (host/daemon/config.c: libinih over
 * the [daemon], [controller], [host], [defaults] and [sim] tables).
 *
 * Each input is the text of a memtided.conf, loaded over the built-in defaults with
 * mtd_config_load_text (the same path as mtd_config_load, minus the fopen).  Checked: on
 * success the settings pass the same cross-checks memtided applies (controller config,
 * default policy), the strings are terminated inside their buffers and the default policy
 * survives a round trip through its metadata XML; on failure the settings are untouched
 * and the error names the file.
 * Seeds (tests/fuzz/corpus/config/) are contrib/memtided.conf and the integration tests'
 * files.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/policy.h"
#include "daemon/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

/* Byte for byte: the copies under comparison were made with memcpy, padding included. */
static bool same_bytes(const void *a, const void *b, size_t n)
{
	// NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
	return memcmp(a, b, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mtd_config cfg, before;
	struct mtd_policy back;
	char err[300], xml[512];
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	mtd_config_default(&cfg);
	memcpy(&before, &cfg, sizeof(cfg));
	if (mtd_config_load_text(&cfg, "fuzz.conf", text, err, sizeof(err)) == 0) {
		CHECK(mtd_ctl_config_validate(&cfg.ctl, err, sizeof(err)) == 0);
		CHECK(mtd_policy_validate(&cfg.defaults, err, sizeof(err)) == 0);
		CHECK(memchr(cfg.uri, 0, sizeof(cfg.uri)) &&
		      memchr(cfg.socket_path, 0, sizeof(cfg.socket_path)));
		CHECK(memchr(cfg.meminfo_path, 0, sizeof(cfg.meminfo_path)));
		CHECK(memchr(cfg.ept_dir, 0, sizeof(cfg.ept_dir)) &&
		      memchr(cfg.young_dump_dir, 0, sizeof(cfg.young_dump_dir)));
		CHECK(cfg.metrics_port >= 0 && cfg.metrics_port <= 65535);
		CHECK(cfg.sim_hot_percent <= 100);
		/* what memtidectl policy set stores must read back as the same policy */
		CHECK(mtd_policy_to_xml(&cfg.defaults, xml, sizeof(xml)) == 0);
		mtd_policy_default(&back);
		CHECK(mtd_policy_from_xml(&back, xml, err, sizeof(err)) == 0);
		CHECK(back.enabled == cfg.defaults.enabled &&
		      back.min_bytes == cfg.defaults.min_bytes &&
		      back.max_bytes == cfg.defaults.max_bytes &&
		      back.priority == cfg.defaults.priority &&
		      back.target_refault_per_min == cfg.defaults.target_refault_per_min &&
		      back.headroom_bytes == cfg.defaults.headroom_bytes &&
		      back.return_via == cfg.defaults.return_via &&
		      back.source == cfg.defaults.source &&
		      back.ept_window_ms == cfg.defaults.ept_window_ms &&
		      back.cold_age_ms == cfg.defaults.cold_age_ms);
	} else {
		CHECK(strncmp(err, "fuzz.conf", 9) == 0);
		CHECK(same_bytes(&cfg, &before, sizeof(cfg)));
	}
	free(text);
	return 0;
}
