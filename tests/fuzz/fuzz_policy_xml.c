// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_policy_xml.c - libFuzzer target for memtide's per-domain policy metadata
 * (mtd_policy_from_xml in host/base/policy.c): XML any libvirt user with write access to a domain
 * can store, read by root memtided on every attach and metadata change.
 *
 * Each input is the metadata element as virDomainGetMetadata returns it.  Checked: a
 * rejected one leaves the policy untouched and says why; an accepted one passes the policy
 * checks, and writing it back (mtd_policy_to_xml, what `memtidectl policy set` stores) and
 * reading that gives the very same policy, bit for bit.
 * Seeds (tests/fuzz/corpus/policy_xml/) are the element with every attribute, a partial
 * one, and ones that must be refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "base/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

/* Field by field: the struct has padding that defaults never write. */
static bool same(const struct mtd_policy *a, const struct mtd_policy *b)
{
	return a->enabled == b->enabled && a->min_bytes == b->min_bytes &&
	       a->max_bytes == b->max_bytes && a->priority == b->priority &&
	       a->target_refault_per_min == b->target_refault_per_min &&
	       a->headroom_bytes == b->headroom_bytes && a->return_via == b->return_via &&
	       a->source == b->source && a->ept_window_ms == b->ept_window_ms &&
	       a->cold_age_ms == b->cold_age_ms && a->observe == b->observe;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	struct mtd_policy p, before, back;
	char err[300], out[512];
	char *xml;

	if (!init) {
		xmlInitParser();
		init = true;
	}
	xml = malloc(size + 1);
	if (!xml)
		return 0;
	memcpy(xml, data, size);
	xml[size] = '\0';
	mtd_policy_default(&p);
	before = p;
	err[0] = '\0';
	if (mtd_policy_from_xml(&p, xml, err, sizeof(err)) == 0) {
		CHECK(mtd_policy_validate(&p, err, sizeof(err)) == 0);
		CHECK(mtd_policy_to_xml(&p, out, sizeof(out)) == 0);
		mtd_policy_default(&back);
		CHECK(mtd_policy_from_xml(&back, out, err, sizeof(err)) == 0);
		CHECK(same(&back, &p));
	} else {
		CHECK(err[0] != '\0');
		CHECK(same(&before, &p));
	}
	free(xml);
	return 0;
}
