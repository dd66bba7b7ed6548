// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_domxml_ept.c - `memtidectl domxml-patch --ept` (host/front/domxml_ept.c): the ept
 * plugin added to a domain's <qemu:commandline> with the RAM layout QEMU 7.2 gives it.
 *
 * Pure text in, text out; tests/integration/domxml_ept.sh runs the same patch against a real
 * libvirtd and starts the domain.  Checked: a TCG pc domain gets exactly one -plugin pair
 * with its table and RAM, in libvirt's qemu namespace, and a second run changes nothing;
 * the RAM split above 4 GiB for pc (3 GiB low) and q35 (2 GiB low) and none below it;
 * libvirt's memory units; a resized domain's argument is corrected and a duplicate removed,
 * other passthrough arguments kept; an existing prefix for the namespace is reused; commas
 * in the name are escaped for QEMU's option parser; DIMM slots give a warning, not a
 * change; KVM, NUMA, non-pc machines, other architectures, max-ram-below-4g and bad XML are
 * refused with a reason.
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

#include "front/domxml_ept.h"

#define SO  "/usr/lib/memtide/memtide-ept.so"
#define DIR "/run/memtide/ept"

static char *dom(const char *type, const char *name, const char *mem, const char *machine,
		 const char *extra)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf),
		 "<domain type='%s'>\n  <name>%s</name>\n  %s\n"
		 "  <os>\n    <type arch='x86_64' machine='%s'>hvm</type>\n  </os>\n"
		 "  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
		 "  </devices>\n%s</domain>\n",
		 type, name, mem, machine, extra);
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static int patch(const char *in, char **after, char **changes, char *err)
{
	return mtd_domxml_patch_ept(in, SO, DIR, after, changes, err, 300);
}

static void test_tcg_pc_domain_gets_the_plugin_once(void **state)
{
	char *after, *changes, *after2, *changes2, err[300];
	(void)state;

	const char *in =
	    dom("qemu", "web1", "<memory unit='KiB'>524288</memory>", "pc-i440fx-7.2", "");
	assert_int_equal(patch(in, &after, &changes, err), 1);
	assert_non_null(strstr(after, "xmlns:qemu=\"" MTD_QEMU_XMLNS "\""));
	assert_non_null(strstr(after, "<qemu:commandline>"));
	assert_non_null(strstr(after, "<qemu:arg value=\"-plugin\"/>"));
	assert_non_null(
	    strstr(after, "<qemu:arg value=\"" SO ",table=" DIR "/web1.ept,ram=512M\"/>"));
	assert_null(strstr(after, "lowmem"));
	/* the passthrough goes after <devices>, as libvirt's schema has it */
	assert_true(strstr(after, "<qemu:commandline>") > strstr(after, "</devices>"));
	assert_non_null(strstr(changes, "added memtide's ept plugin"));

	/* Idempotent: the patched domain needs nothing, and is left byte for byte. */
	assert_int_equal(patch(after, &after2, &changes2, err), 0);
	assert_string_equal(after2, after);
	assert_string_equal(changes2, "");
	free(after);
	free(changes);
	free(after2);
	free(changes2);
}

static void check_split(const char *machine, const char *mem, const char *want)
{
	char *after, *changes, err[300];

	assert_int_equal(patch(dom("qemu", "v", mem, machine, ""), &after, &changes, err), 1);
	if (!strstr(after, want))
		fail_msg("%s %s: no '%s' in %s", machine, mem, want, after);
	free(after);
	free(changes);
}

/* QEMU 7.2: pc keeps 3 GiB low once RAM reaches 3.5 GiB, q35 2 GiB once it reaches 2.75. */
static void test_ram_split_follows_the_machine(void **state)
{
	(void)state;
	check_split("pc", "<memory unit='GiB'>4</memory>", "ram=4096M,lowmem=3072M\"");
	check_split("pc-q35-7.2", "<memory unit='GiB'>4</memory>", "ram=4096M,lowmem=2048M\"");
	check_split("pc", "<memory unit='MiB'>3500</memory>", "ram=3500M\"");
	check_split("q35", "<memory unit='MiB'>2815</memory>", "ram=2815M\"");
	check_split("q35", "<memory unit='MiB'>2816</memory>", "ram=2816M,lowmem=2048M\"");
	check_split("q35", "<memory unit='MiB'>2048</memory>", "ram=2048M\"");
	/* libvirt's units, and KiB when there is none */
	check_split("pc", "<memory>1048576</memory>", "ram=1024M\"");
	check_split("pc", "<memory unit='G'>2</memory>", "ram=2048M\"");
	check_split("pc", "<memory unit='bytes'>268435456</memory>", "ram=256M\"");
	check_split("pc", "<memory unit='MB'>1000</memory>", "ram=953M\"");
}

/* The domain was resized: its argument follows; a duplicate goes; other arguments stay. */
static void test_stale_argument_corrected_duplicate_removed(void **state)
{
	char *after, *changes, err[300];
	(void)state;

	const char *cl =
	    "  <qemu:commandline xmlns:qemu='" MTD_QEMU_XMLNS "'>\n"
	    "    <qemu:arg value='-chardev'/>\n    <qemu:arg value='socket,id=x,path=/s'/>\n"
	    "    <qemu:arg value='-plugin'/>\n"
	    "    <qemu:arg value='/old/memtide-ept.so,table=/x/web1.ept,ram=512M'/>\n"
	    "    <qemu:arg value='-plugin'/>\n"
	    "    <qemu:arg value='/old/memtide-ept.so,table=/x/web1.ept,ram=512M'/>\n"
	    "    <qemu:arg value='-plugin'/>\n    <qemu:arg value='/usr/lib/other.so'/>\n"
	    "  </qemu:commandline>\n";
	int n = patch(dom("qemu", "web1", "<memory unit='MiB'>1024</memory>", "pc", cl), &after,
		      &changes, err);
	assert_int_equal(n, 2);
	assert_int_equal(count(after, "memtide-ept.so"), 1);
	assert_non_null(strstr(after, SO ",table=" DIR "/web1.ept,ram=1024M"));
	assert_non_null(strstr(changes, "corrected"));
	assert_non_null(strstr(changes, "removed a second"));
	assert_non_null(strstr(after, "socket,id=x,path=/s"));
	assert_non_null(strstr(after, "/usr/lib/other.so"));
	assert_int_equal(count(after, "value=\"-plugin\""), 2);
	free(after);
	free(changes);
}

static void test_existing_namespace_prefix_reused(void **state)
{
	char *after, *changes, err[300];
	(void)state;

	const char *in = "<domain type='qemu' xmlns:q='" MTD_QEMU_XMLNS "'><name>a</name>"
			 "<memory unit='MiB'>256</memory><devices/>"
			 "<q:commandline><q:arg value='-S'/></q:commandline></domain>";
	assert_int_equal(patch(in, &after, &changes, err), 1);
	assert_int_equal(count(after, "commandline>"), 2); /* one element, open and close */
	assert_non_null(strstr(after, "<q:arg value=\"-plugin\"/>"));
	assert_null(strstr(after, "xmlns:qemu"));
	free(after);
	free(changes);
}

/* QEMU's option parser splits at ',': a comma in the table path is doubled. */
static void test_comma_in_name_escaped(void **state)
{
	char *after, *changes, err[300];
	(void)state;

	assert_int_equal(patch(dom("qemu", "a,b", "<memory unit='MiB'>256</memory>", "pc", ""),
			       &after, &changes, err),
			 1);
	assert_non_null(strstr(after, ",table=" DIR "/a,,b.ept,ram=256M"));
	free(after);
	free(changes);
}

static void test_dimm_slots_warn(void **state)
{
	char *after, *changes, err[300];
	(void)state;

	const char *in = "<domain type='qemu'><name>a</name>"
			 "<maxMemory slots='4' unit='GiB'>8</maxMemory>"
			 "<memory unit='GiB'>1</memory><devices/></domain>";
	assert_int_equal(patch(in, &after, &changes, err), 1);
	assert_non_null(strstr(changes, "warning: memory hot-plugged"));
	free(after);
	free(changes);
}

static void refused(const char *in, const char *why)
{
	char *after = (char *)1, *changes = (char *)1, err[300] = "";

	assert_int_equal(patch(in, &after, &changes, err), -EINVAL);
	assert_null(after);
	assert_null(changes);
	if (!strstr(err, why))
		fail_msg("expected '%s' in '%s'", why, err);
}

static void test_refusals(void **state)
{
	(void)state;
	refused(dom("kvm", "a", "<memory>1048576</memory>", "pc", ""), "TCG guests");
	refused(dom("qemu", "a", "<memory>1048576</memory>", "microvm", ""), "pc and q35");
	refused(dom("qemu", "a", "", "pc", ""), "<memory>");
	refused(dom("qemu", "a", "<memory unit='parsec'>1</memory>", "pc", ""), "<memory>");
	refused(dom("qemu", "a", "<memory>12x</memory>", "pc", ""), "<memory>");
	refused("<domain type='qemu'><name>a</name><memory>1048576</memory><cpu><numa>"
		"<cell id='0' cpus='0' memory='524288'/></numa></cpu><devices/></domain>",
		"NUMA");
	refused("<domain type='qemu'><name>a</name><memory>1048576</memory><os><type "
		"arch='aarch64' machine='virt'>hvm</type></os><devices/></domain>",
		"x86");
	refused(dom("qemu", "a", "<memory>1048576</memory>", "pc",
		    "<qemu:commandline xmlns:qemu='" MTD_QEMU_XMLNS "'><qemu:arg value='-machine'/>"
		    "<qemu:arg value='max-ram-below-4g=2G'/></qemu:commandline>"),
		"max-ram-below-4g");
	refused("<domain type='qemu'><memory>1048576</memory><devices/></domain>", "<name>");
	refused("<domain", "does not parse");
	refused("<network/>", "not a libvirt domain");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tcg_pc_domain_gets_the_plugin_once),
	    cmocka_unit_test(test_ram_split_follows_the_machine),
	    cmocka_unit_test(test_stale_argument_corrected_duplicate_removed),
	    cmocka_unit_test(test_existing_namespace_prefix_reused),
	    cmocka_unit_test(test_comma_in_name_escaped),
	    cmocka_unit_test(test_dimm_slots_warn),
	    cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
