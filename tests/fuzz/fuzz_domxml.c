// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_domxml.c - libFuzzer target for libvirt domain XML as memtide reads and patches it:
 * `memtidectl domxml-patch` (host/front/domxml.c) and memtided's reading of the live XML
 * (mtd_libvirt_parse_domain_xml in host/act/libvirt_conn.c: uuid, balloon model and free page
 * reporting, the agent channel's socket path).
 *
 * Each input is a domain XML text.  Checked: the patch either refuses with a sentence or
 * returns a change count and three texts; patching its output again changes nothing (the
 * patch is idempotent, as domxml.h promises); the live-XML parser never writes past its
 * fields and always terminates them, and on the patched XML of a well-formed libvirt
 * domain it finds the virtio balloon with free page reporting on.
 * Seeds (tests/fuzz/corpus/domxml/) are `virsh dumpxml` shapes: a bare domain, one with a
 * balloon model none, one already patched, one with the agent channel.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "act/libvirt_conn.h"
#include "front/domxml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

static void check_info(const struct mtd_domain_info *info)
{
	CHECK(memchr(info->uuid, 0, sizeof(info->uuid)));
	CHECK(memchr(info->agent_path, 0, sizeof(info->agent_path)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	struct mtd_domain_info info;
	char *xml, *before = NULL, *after = NULL, *changes = NULL;
	char err[200];
	int n;

	if (!init) {
		xmlInitParser();
		init = true;
	}
	if (size > 256 * 1024)
		return 0;
	xml = malloc(size + 1);
	if (!xml)
		return 0;
	memcpy(xml, data, size);
	xml[size] = '\0';

	if (mtd_libvirt_parse_domain_xml(xml, &info) == 0)
		check_info(&info);

	n = mtd_domxml_patch(xml, &before, &after, &changes, err, sizeof(err));
	if (n >= 0) {
		char *b2 = NULL, *a2 = NULL, *c2 = NULL;

		CHECK(before && after && changes);
		CHECK(mtd_domxml_patch(after, &b2, &a2, &c2, err, sizeof(err)) == 0);
		CHECK(strcmp(a2, after) == 0);
		free(b2);
		free(a2);
		free(c2);
		if (mtd_libvirt_parse_domain_xml(after, &info) == 0)
			check_info(&info);
	} else {
		CHECK(!before && !after && !changes && err[0]);
	}
	free(before);
	free(after);
	free(changes);
	free(xml);
	return 0;
}
