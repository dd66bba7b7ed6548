// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_domxml.c - the domain XML transform behind `memtidectl domxml-patch` (host/front/domxml.c).
 *
 * Pure text in, text out: these tests stand in for a libvirt round trip, which
 * tests/e2e/pending/06_libvirt.sh and host_libvirt.sh cover with a real libvirtd.
 * Checked: a bare domain gets a virtio balloon with free page reporting and stats and the
 * agent channel; an existing balloon is edited in place (its other attributes kept); model
 * none becomes virtio; a patched domain needs nothing (idempotent); an existing agent
 * channel is not duplicated; malformed input is refused with a reason.  With --vsock: shared
 * memfd RAM and the vhost-user-vsock device in <qemu:commandline> (namespace declared, the
 * socket named for the domain), idempotent, an existing memoryBacking edited in place, a
 * kernel <vsock> left alone with a warning, a name too long for a socket path refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "front/domxml.h"

#define BARE                                                                                       \
	"<domain type='kvm'>\n  <name>web1</name>\n  <memory unit='KiB'>1048576</memory>\n"        \
	"  <devices>\n    <disk type='file' device='disk'/>\n  </devices>\n</domain>\n"

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static int patch(const char *in, char **after, char **changes)
{
	char *before = NULL, err[200];
	int n = mtd_domxml_patch(in, &before, after, changes, err, sizeof(err));

	free(before);
	return n;
}

static void test_bare_domain_gets_everything(void **state)
{
	char *after, *changes;
	(void)state;

	int n = patch(BARE, &after, &changes);
	assert_int_equal(n, 3); /* balloon (with FPR and deflate-on-oom), stats, channel */
	assert_non_null(strstr(after, "<memballoon model=\"virtio\" freePageReporting=\"on\" "
				      "autodeflate=\"on\">"));
	assert_non_null(strstr(after, "<stats period=\"2\"/>"));
	assert_non_null(strstr(after, "name=\"org.memtide.agent.0\""));
	assert_non_null(strstr(after, "<channel type=\"unix\">"));
	assert_non_null(strstr(after, "<source mode=\"bind\"/>"));
	assert_non_null(strstr(after, "<disk type=\"file\" device=\"disk\"/>"));
	assert_non_null(strstr(changes, "agent channel"));

	/* Idempotent: the patched domain needs nothing more. */
	char *again, *changes2;
	assert_int_equal(patch(after, &again, &changes2), 0);
	assert_string_equal(changes2, "");
	assert_int_equal(count(again, "<memballoon"), 1);
	assert_int_equal(count(again, "<channel"), 1);
	free(after);
	free(changes);
	free(again);
	free(changes2);
}

static void test_existing_balloon_edited_in_place(void **state)
{
	char *after, *changes;
	(void)state;
	const char *in = "<domain type='qemu'><name>a</name><devices>"
			 "<memballoon model='virtio' autodeflate='on'><stats period='0'/>"
			 "<address type='pci' slot='0x05'/></memballoon>"
			 "<channel type='unix'><source mode='bind' path='/x'/>"
			 "<target type='virtio' name='org.memtide.agent.0'/></channel>"
			 "</devices></domain>";

	assert_int_equal(patch(in, &after, &changes), 2); /* FPR on, stats period */
	assert_non_null(strstr(after, "autodeflate=\"on\""));
	assert_non_null(strstr(after, "freePageReporting=\"on\""));
	assert_non_null(strstr(after, "<stats period=\"2\"/>"));
	assert_non_null(strstr(after, "slot=\"0x05\""));
	assert_int_equal(count(after, "<memballoon"), 1);
	assert_int_equal(count(after, "<channel"), 1);
	assert_non_null(strstr(after, "path=\"/x\""));
	free(after);
	free(changes);
}

/* deflate-on-oom: a guest whose OOM killer is about to run takes pages back from the
 * balloon itself, so a guest under pressure is safe even with memtided gone. */
static void test_existing_balloon_gets_autodeflate(void **state)
{
	char *after, *changes;
	(void)state;
	const char *in = "<domain type='qemu'><name>a</name><devices>"
			 "<memballoon model='virtio' freePageReporting='on' autodeflate='off'>"
			 "<stats period='2'/></memballoon>"
			 "<channel type='unix'><source mode='bind'/>"
			 "<target type='virtio' name='org.memtide.agent.0'/></channel>"
			 "</devices></domain>";

	assert_int_equal(patch(in, &after, &changes), 1);
	assert_non_null(strstr(after, "autodeflate=\"on\""));
	assert_null(strstr(after, "autodeflate=\"off\""));
	assert_non_null(strstr(changes, "deflate-on-oom"));
	free(after);
	free(changes);
}

static void test_model_none_becomes_virtio(void **state)
{
	char *after, *changes;
	(void)state;
	const char *in = "<domain><devices><memballoon model='none'/></devices></domain>";

	assert_true(patch(in, &after, &changes) >= 3);
	assert_null(strstr(after, "model=\"none\""));
	assert_non_null(strstr(after, "model=\"virtio\""));
	assert_non_null(strstr(changes, "next starts"));
	free(after);
	free(changes);
}

static void test_malformed_refused(void **state)
{
	char *before, *after, *changes, err[200];
	(void)state;
	const char *bad[] = {"", "not xml", "<domain><name>x</name></domain>",
			     "<network><devices/></network>", "<domain><devices>"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(
		    mtd_domxml_patch(bad[i], &before, &after, &changes, err, sizeof(err)), -EINVAL);
		assert_null(after);
		assert_true(strlen(err) > 0);
	}
}

static int patch_vsock(const char *in, char **after, char **changes, char *err)
{
	struct mtd_domxml_opts o = {.vsock = true, .vsock_dir = "/run/memtide/vsock"};
	char *before = NULL;
	int n = mtd_domxml_patch_opts(in, &o, &before, after, changes, err, 200);

	free(before);
	return n;
}

static void test_vsock_device_and_shared_ram(void **state)
{
	char *after, *changes, *again, *changes2, err[200];
	(void)state;

	int n = patch_vsock(BARE, &after, &changes, err);
	assert_int_equal(n, 6); /* balloon, stats, channel, memfd, shared, device */
	assert_non_null(strstr(after, "<source type=\"memfd\"/>"));
	assert_non_null(strstr(after, "<access mode=\"shared\"/>"));
	assert_non_null(strstr(after, "xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\""));
	assert_non_null(strstr(after, "<qemu:arg value=\"-chardev\"/>"));
	assert_non_null(strstr(after, "<qemu:arg value=\"socket,id=memtide-vsock,path=/run/memtide/"
				      "vsock/web1.sock,server=on\"/>"));
	assert_non_null(
	    strstr(after, "<qemu:arg value=\"vhost-user-vsock-pci,chardev=memtide-vsock\"/>"));
	assert_non_null(strstr(changes, "vsock"));
	/* Idempotent. */
	assert_int_equal(patch_vsock(after, &again, &changes2, err), 0);
	assert_int_equal(count(again, "vhost-user-vsock-pci"), 1);
	free(after);
	free(changes);
	free(again);
	free(changes2);

	/* An existing anonymous, private backing is edited in place (its hugepages kept). */
	const char *mb = "<domain type='kvm'><name>db</name><memoryBacking><hugepages/>"
			 "<source type='anonymous'/><access mode='private'/></memoryBacking>"
			 "<devices/></domain>";
	n = patch_vsock(mb, &after, &changes, err);
	assert_true(n > 0);
	assert_int_equal(count(after, "<memoryBacking>"), 1);
	assert_non_null(strstr(after, "<hugepages/>"));
	assert_non_null(strstr(after, "<source type=\"memfd\"/>"));
	assert_non_null(strstr(after, "<access mode=\"shared\"/>"));
	free(after);
	free(changes);

	/* A kernel vsock device: left alone, with a warning. */
	const char *kv = "<domain type='kvm'><name>k</name><devices><vsock model='virtio'/>"
			 "</devices></domain>";
	n = patch_vsock(kv, &after, &changes, err);
	assert_true(n > 0);
	assert_null(strstr(after, "vhost-user-vsock-pci"));
	assert_non_null(strstr(changes, "kernel <vsock>"));
	free(after);
	free(changes);

	/* A name that makes too long a socket path. */
	char longname[256];
	snprintf(longname, sizeof(longname), "<domain><name>%090d</name><devices/></domain>", 7);
	assert_int_equal(patch_vsock(longname, &after, &changes, err), -EINVAL);
	assert_non_null(strstr(err, "107"));

	/* Without the option nothing of this is added. */
	assert_int_equal(patch(BARE, &after, &changes), 3);
	assert_null(strstr(after, "qemu:commandline"));
	assert_null(strstr(after, "memoryBacking"));
	free(after);
	free(changes);
}

/* On a host with the kernel's vhost_vsock (/dev/vhost-vsock) --vsock adds libvirt's own
 * <vsock> with a CID libvirt picks, and neither the vhost-user device nor shared RAM. */
static void test_kernel_vsock_where_the_host_has_it(void **state)
{
	struct mtd_domxml_opts o = {.vsock = true, .kernel_vsock = true, .vsock_dir = "/x"};
	char *before, *after, *changes, *b2, *again, *c2, err[200];
	(void)state;

	int n = mtd_domxml_patch_opts(BARE, &o, &before, &after, &changes, err, sizeof(err));
	assert_int_equal(n, 4); /* balloon, stats, channel, vsock */
	assert_non_null(strstr(after, "<vsock model=\"virtio\">"));
	assert_non_null(strstr(after, "<cid auto=\"yes\"/>"));
	assert_null(strstr(after, "vhost-user-vsock-pci"));
	assert_null(strstr(after, "memoryBacking"));
	assert_non_null(strstr(changes, "/dev/vhost-vsock"));
	/* Idempotent. */
	assert_int_equal(mtd_domxml_patch_opts(after, &o, &b2, &again, &c2, err, sizeof(err)), 0);
	assert_int_equal(count(again, "<vsock"), 1);
	free(before);
	free(after);
	free(changes);
	free(b2);
	free(again);
	free(c2);

	/* A <vsock> of the operator's (a fixed CID) is kept as it is. */
	const char *kv = "<domain type='kvm'><name>k</name><devices><vsock model='virtio'>"
			 "<cid auto='no' address='7'/></vsock></devices></domain>";
	n = mtd_domxml_patch_opts(kv, &o, &before, &after, &changes, err, sizeof(err));
	assert_true(n > 0);
	assert_non_null(strstr(after, "address=\"7\""));
	assert_int_equal(count(after, "<vsock"), 1);
	free(before);
	free(after);
	free(changes);

	/* memtide's vhost-user vsock already there: one vsock transport per guest. */
	struct mtd_domxml_opts vu = {.vsock = true, .vsock_dir = "/run/memtide/vsock"};
	n = mtd_domxml_patch_opts(BARE, &vu, &before, &after, &changes, err, sizeof(err));
	assert_true(n > 0);
	free(before);
	free(changes);
	n = mtd_domxml_patch_opts(after, &o, &b2, &again, &c2, err, sizeof(err));
	assert_int_equal(n, 0);
	assert_null(strstr(again, "<vsock"));
	assert_non_null(strstr(c2, "vhost-user vsock"));
	free(after);
	free(b2);
	free(again);
	free(c2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bare_domain_gets_everything),
	    cmocka_unit_test(test_existing_balloon_edited_in_place),
	    cmocka_unit_test(test_existing_balloon_gets_autodeflate),
	    cmocka_unit_test(test_model_none_becomes_virtio),
	    cmocka_unit_test(test_malformed_refused),
	    cmocka_unit_test(test_vsock_device_and_shared_ram),
	    cmocka_unit_test(test_kernel_vsock_where_the_host_has_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
