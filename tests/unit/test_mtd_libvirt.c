// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_libvirt.c - memtided's libvirt-side parsing and the policy's metadata round trip
 * (host/act/libvirt_conn.c, host/base/policy.c).
 *
 * The domain XML parser is pure and is fed real-shaped XML (as `virsh dumpxml` prints it).
 * The metadata round trip runs against libvirt's test driver (test:///default): a unit test
 * cannot start libvirtd and a QEMU guest; tests/integration/host_libvirt.sh covers the same
 * path against a real libvirtd and real domains.
 */
#include <errno.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "act/libvirt_conn.h"
#include "act/libvirt_conn.h"
#include "base/policy.h"

#define MiB ((uint64_t)1 << 20)

static const char domxml[] =
    "<domain type='qemu' id='3'>\n"
    "  <name>web1</name>\n"
    "  <uuid>0f8fad5b-d9cb-469f-a165-70867728950e</uuid>\n"
    "  <memory unit='KiB'>524288</memory>\n"
    "  <devices>\n"
    "    <channel type='unix'>\n"
    "      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/web1.other'/>\n"
    "      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>\n"
    "    </channel>\n"
    "    <channel type='unix'>\n"
    "      <source mode='bind' path='/run/memtide/web1.agent'/>\n"
    "      <target type='virtio' name='" MTD_AGENT_CHANNEL_NAME "' state='connected'/>\n"
    "      <alias name='channel1'/>\n"
    "    </channel>\n"
    "    <memballoon model='virtio' freePageReporting='on'>\n"
    "      <stats period='2'/>\n"
    "      <alias name='balloon0'/>\n"
    "    </memballoon>\n"
    "  </devices>\n"
    "</domain>\n";

static void test_parse_domain_xml(void **state)
{
	struct mtd_domain_info info;
	(void)state;

	assert_int_equal(mtd_libvirt_parse_domain_xml(domxml, &info), 0);
	assert_string_equal(info.uuid, "0f8fad5b-d9cb-469f-a165-70867728950e");
	assert_true(info.has_balloon);
	assert_true(info.fpr_attr);
	assert_string_equal(info.agent_path, "/run/memtide/web1.agent");

	assert_int_equal(mtd_libvirt_parse_domain_xml("<domain><devices><memballoon model='none'/>"
						      "</devices></domain>",
						      &info),
			 0);
	assert_false(info.has_balloon);
	assert_string_equal(info.agent_path, "");
	assert_int_equal(mtd_libvirt_parse_domain_xml("<domain><devices>", &info), -EPROTO);
	assert_int_equal(info.vsock_cid, 0);

	/* The kernel's vsock: the live XML's CID (libvirt's pick under auto='yes'); none, or one
	 * that is no guest's, reads 0. */
	static const char *const cids[][2] = {
	    {"<vsock model='virtio'><cid auto='yes' address='42'/></vsock>", "42"},
	    {"<vsock model='virtio'><cid auto='no' address='3'/></vsock>", "3"},
	    {"<vsock><cid address='0x10'/></vsock>", "16"},
	    {"<vsock model='virtio'><cid auto='yes'/></vsock>", "0"},
	    {"<vsock model='virtio'><cid address='2'/></vsock>", "0"},
	    {"<vsock model='virtio'><cid address='4294967295'/></vsock>", "0"},
	    {"<vsock model='virtio'><cid address='12abc'/></vsock>", "0"},
	    {"<vsock model='virtio'><cid address='-5'/></vsock>", "0"},
	};
	for (size_t i = 0; i < sizeof(cids) / sizeof(cids[0]); i++) {
		char xml[300];
		snprintf(xml, sizeof(xml), "<domain><devices>%s</devices></domain>", cids[i][0]);
		assert_int_equal(mtd_libvirt_parse_domain_xml(xml, &info), 0);
		assert_int_equal(info.vsock_cid, strtoul(cids[i][1], NULL, 0));
	}
}

static void ignore_errors(void *opaque, virErrorPtr e)
{
	(void)opaque;
	(void)e;
}

static void test_metadata_round_trip(void **state)
{
	struct mtd_policy defaults, p, q;
	char err[200];
	(void)state;

	virSetErrorFunc(NULL, ignore_errors);
	virConnectPtr c = virConnectOpen("test:///default");
	assert_non_null(c);
	virDomainPtr dom = virDomainLookupByName(c, "test");
	assert_non_null(dom);

	/* Nothing stored yet: the defaults. */
	mtd_policy_default(&defaults);
	assert_int_equal(mtd_policy_load_domain(dom, &defaults, &p, err, sizeof(err)), 0);
	assert_memory_equal(&p, &defaults, sizeof(p));

	/* Store, read back. */
	assert_int_equal(mtd_policy_set_kv(&p, "min", "300M", err, sizeof(err)), 0);
	assert_int_equal(mtd_policy_set_kv(&p, "priority", "4", err, sizeof(err)), 0);
	assert_int_equal(mtd_policy_set_kv(&p, "enabled", "no", err, sizeof(err)), 0);
	assert_int_equal(mtd_policy_store_domain(dom, &p, err, sizeof(err)), 0);
	assert_int_equal(mtd_policy_load_domain(dom, &defaults, &q, err, sizeof(err)), 0);
	assert_int_equal(q.min_bytes, 300 * MiB);
	assert_int_equal(q.priority, 4);
	assert_false(q.enabled);
	assert_int_equal(q.headroom_bytes, defaults.headroom_bytes);

	/* It is stored under memtide's namespace, as a user sees it. */
	char *raw = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, MTD_POLICY_XMLNS,
					 VIR_DOMAIN_AFFECT_CURRENT);
	assert_non_null(raw);
	assert_non_null(strstr(raw, "priority=\"4\""));
	free(raw);

	/* Hostile metadata set by someone else: refused with a reason, output untouched. */
	assert_int_equal(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
					      "<policy priority='high'/>", "memtide",
					      MTD_POLICY_XMLNS, VIR_DOMAIN_AFFECT_CURRENT),
			 0);
	q = defaults;
	assert_int_equal(mtd_policy_load_domain(dom, &defaults, &q, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "priority must be"));
	assert_memory_equal(&q, &defaults, sizeof(q));

	virDomainFree(dom);
	virConnectClose(c);
}

/* libvirt's jobs as QEMU's whole-memory operations: save, restore and migration either way,
 * snapshots and their revert, dumps; not a backup or a job that has ended; a libvirt that
 * names no operation: any running job may be one. */
static void test_memjob(void **state)
{
	struct mtd_memjob j;
	(void)state;

	mtd_libvirt_memjob(VIR_DOMAIN_JOB_UNBOUNDED, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, &j);
	assert_true(j.active);
	assert_string_equal(j.what, "migration");
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_UNBOUNDED, VIR_DOMAIN_JOB_OPERATION_SAVE, &j);
	assert_string_equal(j.what, "migration");
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_BOUNDED, VIR_DOMAIN_JOB_OPERATION_DUMP, &j);
	assert_true(j.active);
	assert_string_equal(j.what, "memory dump");
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_UNBOUNDED, VIR_DOMAIN_JOB_OPERATION_SNAPSHOT_REVERT, &j);
	assert_string_equal(j.what, "snapshot");
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_UNBOUNDED, VIR_DOMAIN_JOB_OPERATION_BACKUP, &j);
	assert_false(j.active);
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_NONE, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, &j);
	assert_false(j.active);
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_COMPLETED, VIR_DOMAIN_JOB_OPERATION_DUMP, &j);
	assert_false(j.active);
	mtd_libvirt_memjob(VIR_DOMAIN_JOB_UNBOUNDED, -1, &j);
	assert_true(j.active);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_domain_xml),
	    cmocka_unit_test(test_metadata_round_trip),
	    cmocka_unit_test(test_memjob),
	};
	return cmocka_run_group_tests_name("mtd_libvirt", tests, NULL, NULL);
}
