// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * domxml_ept.c - the domain XML transform behind `memtidectl domxml-patch --ept`
 * (domxml_ept.h).
 *
 * Why the RAM layout is written into the argument: the plugin sees QEMU's RAM-block
 * offsets, which equal guest-physical addresses only below the PCI hole; QEMU 7.2 moves RAM
 * above 4 GiB once the guest has 3.5 GiB (pc: 3 GiB stay low) or 2.75 GiB (q35: 2 GiB stay
 * low).  The domain's <memory> and machine type decide that split, so they decide ram= and
 * lowmem= (mtd_ept_plugin_arg); a domain resized later gets its argument corrected by the
 * next run.  What the plugin cannot place is refused rather than guessed: NUMA cells (one
 * RAM block per cell) and a max-ram-below-4g passed through to QEMU.  Memory hot-plugged
 * into DIMM slots lands in RAM blocks of its own, which the plugin drops (counted in its
 * header's `dropped`): a warning, since the base RAM is still seen exactly.
 *
 * Steps (numbered as in the code):
 *   1. the domain: type='qemu' (TCG), an x86 pc or q35 machine, its name and <memory>;
 *   2. the expected "-plugin" value for them;
 *   3. existing memtide-ept -plugin pairs in <qemu:commandline>: keep the first if right,
 *      correct it if not, drop the others;
 *   4. none: append the pair (creating <qemu:commandline> and the qemu namespace).
 */
#include "front/domxml_ept.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "front/ept_plugin_arg.h"
#include "front/xml_indent.h"

struct notes {
	char text[1536];
	int n;
};

static void note(struct notes *nt, bool change, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(struct notes *nt, bool change, const char *fmt, ...)
{
	size_t len = strlen(nt->text);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(nt->text + len, sizeof(nt->text) - len, fmt, ap);
	va_end(ap);
	len = strlen(nt->text);
	snprintf(nt->text + len, sizeof(nt->text) - len, "\n");
	nt->n += change;
}

/* A child element of libvirt's own vocabulary (no prefix: not qemu:commandline's). */
static xmlNodePtr child(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && (!c->ns || !c->ns->prefix) &&
		    !xmlStrcmp(c->name, BAD_CAST name))
			return c;
	return NULL;
}

static bool is_qemu(xmlNodePtr n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && n->ns &&
	       !xmlStrcmp(n->ns->href, BAD_CAST MTD_QEMU_XMLNS) &&
	       !xmlStrcmp(n->name, BAD_CAST name);
}

/* The attribute's value copied into buf ("" when absent). */
static void attr(xmlNodePtr n, const char *name, char *buf, size_t len)
{
	xmlChar *v = n ? xmlGetProp(n, BAD_CAST name) : NULL;

	snprintf(buf, len, "%s", v ? (const char *)v : "");
	xmlFree(v);
}

/* <memory unit='U'>N</memory> in bytes (libvirt's units; KiB when none).  0 or -EINVAL. */
static int memory_bytes(xmlNodePtr mem, uint64_t *out)
{
	static const struct {
		const char *unit;
		uint64_t mul;
	} units[] = {{"b", 1},          {"bytes", 1},       {"KB", 1000},
		     {"k", 1024},       {"KiB", 1024},      {"MB", 1000000},
		     {"M", 1 << 20},    {"MiB", 1 << 20},   {"GB", 1000000000},
		     {"G", 1 << 30},    {"GiB", 1 << 30},   {"TB", 1000000000000ULL},
		     {"T", 1ULL << 40}, {"TiB", 1ULL << 40}};
	char unit[16], *end;
	xmlChar *text;
	unsigned long long v;
	uint64_t mul = 0;

	if (!mem)
		return -EINVAL;
	attr(mem, "unit", unit, sizeof(unit));
	if (!unit[0])
		mul = 1024;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !mul; i++)
		if (!strcmp(unit, units[i].unit))
			mul = units[i].mul;
	text = xmlNodeGetContent(mem);
	if (!text || !mul)
		goto bad;
	errno = 0;
	v = strtoull((const char *)text, &end, 10);
	while (*end == ' ' || *end == '\n' || *end == '\t')
		end++;
	if (errno || end == (char *)text || *end || v == 0 || v > UINT64_MAX / mul)
		goto bad;
	xmlFree(text);
	*out = v * mul;
	return 0;
bad:
	xmlFree(text);
	return -EINVAL;
}

/* The domain's own text content of <name>, into buf.  0 or -EINVAL. */
static int domain_name(xmlNodePtr root, char *buf, size_t len)
{
	xmlChar *name = xmlNodeGetContent(child(root, "name"));
	int rc = name && name[0] && strlen((const char *)name) < len ? 0 : -EINVAL;

	if (rc == 0)
		snprintf(buf, len, "%s", (const char *)name);
	xmlFree(name);
	return rc;
}

/* Is this argument value the memtide-ept plugin's? */
static bool is_ept_value(const char *v)
{
	const char *comma = strchr(v, ',');
	size_t n = comma ? (size_t)(comma - v) : strlen(v);
	static const char so[] = "memtide-ept.so";

	return n >= sizeof(so) - 1 && !strncmp(v + n - (sizeof(so) - 1), so, sizeof(so) - 1);
}

/* Remove n and the blank text before it (its indent). */
static void remove_indented(xmlNodePtr n)
{
	xmlNodePtr prev = n->prev;

	if (prev && prev->type == XML_TEXT_NODE && xmlIsBlankNode(prev)) {
		xmlUnlinkNode(prev);
		xmlFreeNode(prev);
	}
	xmlUnlinkNode(n);
	xmlFreeNode(n);
}

static xmlNodePtr next_element(xmlNodePtr n)
{
	for (n = n->next; n && n->type != XML_ELEMENT_NODE; n = n->next)
		;
	return n;
}

/* Step 1: what the domain is.  0, or -EINVAL with err. */
static int inspect(xmlNodePtr root, char *name, size_t namelen, uint64_t *ram, bool *q35,
		   struct notes *nt, char *err, size_t errlen)
{
	char type[32], machine[64], arch[32];
	xmlNodePtr os = child(root, "os"), ostype = child(os, "type"), cpu = child(root, "cpu");

	attr(root, "type", type, sizeof(type));
	if (strcmp(type, "qemu") != 0) {
		snprintf(err, errlen,
			 "the ept plugin is for TCG guests (<domain type='qemu'>), this domain is "
			 "type='%.20s': under KVM the plugin sees no access (KVM runs the guest's "
			 "code); memtided reads the hardware EPT's accessed bits through idle "
			 "page tracking or DAMON where the host kernel has them",
			 type);
		return -EINVAL;
	}
	if (domain_name(root, name, namelen) < 0) {
		snprintf(err, errlen, "the domain has no <name> (the table file is named for it)");
		return -EINVAL;
	}
	attr(ostype, "arch", arch, sizeof(arch));
	attr(ostype, "machine", machine, sizeof(machine));
	if (arch[0] && strcmp(arch, "x86_64") != 0 && strcmp(arch, "i686") != 0) {
		snprintf(err, errlen, "arch '%.20s': the ept plugin models x86 guests only", arch);
		return -EINVAL;
	}
	*q35 = strstr(machine, "q35") != NULL;
	if (machine[0] && !*q35 && strcmp(machine, "pc") != 0 &&
	    strncmp(machine, "pc-i440fx", 9) != 0 && strncmp(machine, "pc-", 3) != 0) {
		snprintf(err, errlen,
			 "machine '%.40s': the ept plugin knows the RAM layout of the pc and q35 "
			 "machines only",
			 machine);
		return -EINVAL;
	}
	if (memory_bytes(child(root, "memory"), ram) < 0 || *ram < (2ULL << 20)) {
		snprintf(err, errlen,
			 "the domain's <memory> is missing or not a size of 2 MiB or more");
		return -EINVAL;
	}
	if (child(child(cpu, "numa"), "cell")) {
		snprintf(err, errlen,
			 "the domain has NUMA cells: QEMU gives each its own RAM block, which the "
			 "ept plugin does not place; use the agent's or another source");
		return -EINVAL;
	}
	if (child(root, "maxMemory"))
		note(nt, false,
		     "warning: memory hot-plugged into the domain's DIMM slots is not seen by the "
		     "ept plugin (only the base %" PRIu64 " MiB is)",
		     *ram >> 20);
	return 0;
}

/* Does any passthrough argument set max-ram-below-4g (a RAM split we do not model)? */
static bool sets_max_ram_below_4g(xmlNodePtr root)
{
	for (xmlNodePtr cl = root->children; cl; cl = cl->next) {
		if (!is_qemu(cl, "commandline"))
			continue;
		for (xmlNodePtr a = cl->children; a; a = a->next) {
			char v[512];
			if (!is_qemu(a, "arg"))
				continue;
			attr(a, "value", v, sizeof(v));
			if (strstr(v, "max-ram-below-4g"))
				return true;
		}
	}
	return false;
}

static xmlNodePtr new_arg(xmlNsPtr ns, const char *value)
{
	xmlNodePtr a = xmlNewNode(ns, BAD_CAST "arg");

	xmlNewProp(a, BAD_CAST "value", BAD_CAST value);
	return a;
}

/* Steps 3 and 4. */
static void place_arg(xmlNodePtr root, const char *want, struct notes *nt)
{
	xmlNsPtr ns = xmlSearchNsByHref(root->doc, root, BAD_CAST MTD_QEMU_XMLNS);
	xmlNodePtr cl_first = NULL;
	bool have = false;

	/* Step 3: every <qemu:commandline> (libvirt allows one, but read what is there). */
	for (xmlNodePtr cl = root->children; cl; cl = cl->next) {
		if (!is_qemu(cl, "commandline"))
			continue;
		if (!cl_first)
			cl_first = cl;
		for (xmlNodePtr a = cl->children, next; a; a = next) {
			char v[4096];
			xmlNodePtr val;

			next = a->next;
			if (!is_qemu(a, "arg"))
				continue;
			attr(a, "value", v, sizeof(v));
			val = next_element(a);
			if (strcmp(v, "-plugin") != 0 || !val || !is_qemu(val, "arg"))
				continue;
			attr(val, "value", v, sizeof(v));
			if (!is_ept_value(v))
				continue;
			next = next_element(val);
			if (have) {
				remove_indented(val);
				remove_indented(a);
				note(nt, true,
				     "removed a second memtide-ept -plugin argument (%.200s)", v);
				continue;
			}
			have = true;
			if (strcmp(v, want) != 0) {
				xmlSetProp(val, BAD_CAST "value", BAD_CAST want);
				note(nt, true,
				     "corrected the ept plugin's argument to this domain's RAM and "
				     "table (was %.300s)",
				     v);
			}
		}
	}
	if (have)
		return;
	/* Step 4 */
	if (!ns)
		ns = xmlNewNs(root, BAD_CAST MTD_QEMU_XMLNS, BAD_CAST "qemu");
	if (!cl_first) {
		cl_first = xmlNewNode(ns, BAD_CAST "commandline");
		mtd_xml_append_indented(root, cl_first);
	}
	mtd_xml_append_indented(cl_first, new_arg(ns, "-plugin"));
	mtd_xml_append_indented(cl_first, new_arg(ns, want));
	note(nt, true,
	     "added memtide's ept plugin (qemu:commandline -plugin %.300s): memtided then reads "
	     "this TCG guest's page accesses (takes effect when the domain next starts)",
	     want);
}

static char *dump(xmlDocPtr doc)
{
	xmlChar *mem = NULL;
	int len = 0;
	char *s;

	xmlDocDumpMemory(doc, &mem, &len);
	if (!mem)
		return NULL;
	s = strdup((const char *)mem);
	xmlFree(mem);
	return s;
}

int mtd_domxml_patch_ept(const char *xml, const char *plugin, const char *dir, char **after,
			 char **changes, char *err, size_t errlen)
{
	struct notes nt = {.text = "", .n = 0};
	char name[256], want[PATH_MAX + 512];
	uint64_t ram = 0;
	bool q35 = false;
	xmlDocPtr doc;
	xmlNodePtr root;
	int rc;

	*after = *changes = NULL;
	doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		snprintf(err, errlen, "the domain XML does not parse");
		return -EINVAL;
	}
	root = xmlDocGetRootElement(doc);
	if (!root || xmlStrcmp(root->name, BAD_CAST "domain")) {
		snprintf(err, errlen, "not a libvirt domain: the root element is not <domain>");
		rc = -EINVAL;
		goto out;
	}
	/* Step 1 */
	rc = inspect(root, name, sizeof(name), &ram, &q35, &nt, err, errlen);
	if (rc < 0)
		goto out;
	if (sets_max_ram_below_4g(root)) {
		snprintf(err, errlen,
			 "the domain passes max-ram-below-4g to QEMU: a RAM split the ept plugin's "
			 "arguments do not model");
		rc = -EINVAL;
		goto out;
	}
	/* Step 2 */
	rc = mtd_ept_plugin_arg(plugin, dir, name, ram, q35, want, sizeof(want));
	if (rc < 0) {
		snprintf(err, errlen,
			 "the plugin path, table directory or domain name is too long");
		rc = -ENAMETOOLONG;
		goto out;
	}
	/* Steps 3, 4 */
	place_arg(root, want, &nt);
	*after = dump(doc);
	*changes = strdup(nt.text);
	if (!*after || !*changes) {
		free(*after);
		free(*changes);
		*after = *changes = NULL;
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	rc = nt.n;
out:
	xmlFreeDoc(doc);
	return rc;
}
