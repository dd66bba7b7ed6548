// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * domxml.c - the domain XML transform behind `memtidectl domxml-patch` (domxml.h).
 *
 * Rules, each applied only when needed, so a second run changes nothing:
 *   1. <memballoon>: missing or model='none' -> model='virtio'; freePageReporting='on' (the
 *      guest's freed pages go back to the host: the reason memtide works at all);
 *      autodeflate='on' (QEMU's deflate-on-oom: a guest whose OOM killer is about to run
 *      takes pages back from the balloon itself, so a guest memtided left ballooned is safe
 *      even with memtided gone; it no longer hands VMs their maximum when it stops); a
 *      <stats period='2'/> child when there is none or its period is 0 (memtided reads the
 *      guest's MemAvailable and swap figures from the balloon between agent reports).
 *   2. A <channel type='unix'> whose target is virtio, name org.memtide.agent.0, with a
 *      <source mode='bind'/> and no path: libvirt then picks a per-domain socket path
 *      (under /var/lib/libvirt/qemu/channel/) and memtided learns it from the live XML.
 * With the vsock option (memtidectl domxml-patch --vsock):
 *   3. <memoryBacking> with <source type='memfd'/> and <access mode='shared'/>: vhost-user
 *      back ends map the guest's RAM, so it must be a shareable file (QEMU's
 *      memory-backend-memfd,share=on).  A file source that is already shared is kept.
 *   4. <qemu:commandline> arguments (libvirt has no element for vhost-user-vsock):
 *        -chardev socket,id=memtide-vsock,path=DIR/NAME.sock,server=on
 *        -device vhost-user-vsock-pci,chardev=memtide-vsock
 *      QEMU listens and waits for memtided at start (vsock_service.h says why); memtided
 *      finds the socket in DIR (its [daemon] vsock_dir).  A domain with a kernel <vsock>
 *      device is left alone (a guest has one vsock transport).
 * Rules 3 and 4 are for a host without the kernel's vhost_vsock.  Where it has one
 * (/dev/vhost-vsock: opts->kernel_vsock), the ordinary device instead:
 *   3k. <vsock model='virtio'><cid auto='yes'/></vsock>: libvirt picks a CID no other guest
 *      has at each start and writes it in the live XML, where memtided reads it to know the
 *      agent's connections (kvsock.h).  auto='yes' rather than a fixed address: two domains
 *      given one CID by hand cannot both start, and memtided would refuse the second's.
 *      A domain with a <vsock> keeps it; one with memtide's vhost-user vsock is left alone.
 * Existing elements are edited in place and keep their other attributes and children; new
 * ones get indentation like their siblings so the diff an operator reads is tidy.
 */
#include "front/domxml.h"
#include "front/xml_indent.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

struct notes {
	char text[1024];
	int n;
};

static void note(struct notes *nt, const char *s)
{
	size_t len = strlen(nt->text);

	snprintf(nt->text + len, sizeof(nt->text) - len, "%s\n", s);
	nt->n++;
}

/* A warning is told but is not a change. */
static void warn(struct notes *nt, const char *s)
{
	note(nt, s);
	nt->n--;
}

static xmlNodePtr child(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr c = parent->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && !xmlStrcmp(c->name, BAD_CAST name))
			return c;
	return NULL;
}

static int attr_is(xmlNodePtr n, const char *name, const char *value)
{
	xmlChar *v = xmlGetProp(n, BAD_CAST name);
	int same = v && !xmlStrcmp(v, BAD_CAST value);

	xmlFree(v);
	return same;
}

static void patch_balloon(xmlNodePtr devices, struct notes *nt)
{
	xmlNodePtr mb = child(devices, "memballoon"), stats;
	char period[16];

	if (!mb) {
		mb = xmlNewNode(NULL, BAD_CAST "memballoon");
		xmlNewProp(mb, BAD_CAST "model", BAD_CAST "virtio");
		xmlNewProp(mb, BAD_CAST "freePageReporting", BAD_CAST "on");
		xmlNewProp(mb, BAD_CAST "autodeflate", BAD_CAST "on");
		mtd_xml_append_indented(devices, mb);
		note(nt, "added a virtio memballoon with free page reporting and deflate-on-oom");
	} else if (!attr_is(mb, "model", "virtio")) {
		xmlSetProp(mb, BAD_CAST "model", BAD_CAST "virtio");
		note(nt, "memballoon model set to virtio (takes effect when the domain next "
			 "starts)");
	}
	if (!attr_is(mb, "freePageReporting", "on")) {
		xmlSetProp(mb, BAD_CAST "freePageReporting", BAD_CAST "on");
		note(nt,
		     "free page reporting turned on (takes effect when the domain next starts)");
	}
	if (!attr_is(mb, "autodeflate", "on")) {
		xmlSetProp(mb, BAD_CAST "autodeflate", BAD_CAST "on");
		note(nt, "deflate-on-oom turned on: a guest about to run out takes memory back "
			 "from the balloon itself, with or without memtided (takes effect when the "
			 "domain next starts)");
	}
	snprintf(period, sizeof(period), "%d", MTD_STATS_PERIOD_S);
	stats = child(mb, "stats");
	if (!stats) {
		stats = xmlNewNode(NULL, BAD_CAST "stats");
		xmlNewProp(stats, BAD_CAST "period", BAD_CAST period);
		mtd_xml_append_indented(mb, stats);
		note(nt, "balloon stats period set to 2 s");
	} else {
		xmlChar *p = xmlGetProp(stats, BAD_CAST "period");

		if (!p || strtol((const char *)p, NULL, 10) <= 0) {
			xmlSetProp(stats, BAD_CAST "period", BAD_CAST period);
			note(nt, "balloon stats period set to 2 s");
		}
		xmlFree(p);
	}
}

static bool is_agent_channel(xmlNodePtr ch)
{
	xmlNodePtr t = child(ch, "target");

	return t && attr_is(t, "type", "virtio") && attr_is(t, "name", MTD_AGENT_CHANNEL);
}

static void patch_channel(xmlNodePtr devices, struct notes *nt)
{
	for (xmlNodePtr c = devices->children; c; c = c->next) {
		if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, BAD_CAST "channel") ||
		    !is_agent_channel(c))
			continue;
		if (!attr_is(c, "type", "unix"))
			warn(nt, "warning: the memtide agent channel is not type='unix'; memtided "
				 "cannot reach the agent through it (left as it is)");
		return;
	}
	xmlNodePtr ch = xmlNewNode(NULL, BAD_CAST "channel");
	xmlNodePtr src = xmlNewNode(NULL, BAD_CAST "source");
	xmlNodePtr tgt = xmlNewNode(NULL, BAD_CAST "target");

	xmlNewProp(ch, BAD_CAST "type", BAD_CAST "unix");
	xmlNewProp(src, BAD_CAST "mode", BAD_CAST "bind");
	xmlNewProp(tgt, BAD_CAST "type", BAD_CAST "virtio");
	xmlNewProp(tgt, BAD_CAST "name", BAD_CAST MTD_AGENT_CHANNEL);
	mtd_xml_append_indented(devices, ch);
	mtd_xml_append_indented(ch, src);
	mtd_xml_append_indented(ch, tgt);
	note(nt, "added the memtide agent channel (unix socket, virtio-serial port "
		 "org.memtide.agent.0)");
}

/* Rule 3: shareable guest RAM. */
static void patch_memory_backing(xmlNodePtr root, struct notes *nt)
{
	xmlNodePtr mb = child(root, "memoryBacking"), src, acc;

	if (!mb) {
		mb = xmlNewNode(NULL, BAD_CAST "memoryBacking");
		mtd_xml_append_indented(root, mb);
	}
	src = child(mb, "source");
	acc = child(mb, "access");
	if (!src) {
		src = xmlNewNode(NULL, BAD_CAST "source");
		xmlNewProp(src, BAD_CAST "type", BAD_CAST "memfd");
		mtd_xml_append_indented(mb, src);
		note(nt, "guest RAM from a memfd (memoryBacking source memfd), which the vsock "
			 "back end can map");
	} else if (!attr_is(src, "type", "memfd") && !attr_is(src, "type", "file")) {
		xmlSetProp(src, BAD_CAST "type", BAD_CAST "memfd");
		note(nt, "guest RAM from a memfd instead of anonymous memory (memoryBacking source "
			 "memfd)");
	}
	if (!acc) {
		acc = xmlNewNode(NULL, BAD_CAST "access");
		xmlNewProp(acc, BAD_CAST "mode", BAD_CAST "shared");
		mtd_xml_append_indented(mb, acc);
		note(nt, "guest RAM shared (memoryBacking access shared): vhost-user needs it");
	} else if (!attr_is(acc, "mode", "shared")) {
		xmlSetProp(acc, BAD_CAST "mode", BAD_CAST "shared");
		note(nt, "guest RAM access set to shared (vhost-user needs it)");
	}
}

static bool has_vsock_arg(xmlNodePtr cl)
{
	for (xmlNodePtr a = cl ? cl->children : NULL; a; a = a->next) {
		xmlChar *v;
		bool hit;

		if (a->type != XML_ELEMENT_NODE || xmlStrcmp(a->name, BAD_CAST "arg"))
			continue;
		v = xmlGetProp(a, BAD_CAST "value");
		hit = v && !xmlStrncmp(v, BAD_CAST "vhost-user-vsock-pci", 20);
		xmlFree(v);
		if (hit)
			return true;
	}
	return false;
}

static void add_arg(xmlNodePtr cl, xmlNsPtr ns, const char *value)
{
	xmlNodePtr a = xmlNewNode(ns, BAD_CAST "arg");

	xmlNewProp(a, BAD_CAST "value", BAD_CAST value);
	mtd_xml_append_indented(cl, a);
}

/* Rule 4: the device, through qemu:commandline. */
static int patch_vsock_device(xmlNodePtr root, xmlNodePtr devices, const char *dir,
			      struct notes *nt, char *err, size_t errlen)
{
	xmlNsPtr ns = xmlSearchNsByHref(root->doc, root, BAD_CAST MTD_QEMU_NS);
	xmlNodePtr cl = NULL, name = child(root, "name");
	xmlChar *dom;
	char chardev[300];

	if (child(devices, "vsock")) {
		warn(nt, "warning: the domain has a kernel <vsock> device; memtide's vhost-user "
			 "vsock not added (a guest has one vsock transport)");
		return 0;
	}
	for (xmlNodePtr c = root->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && c->ns &&
		    !xmlStrcmp(c->ns->href, BAD_CAST MTD_QEMU_NS) &&
		    !xmlStrcmp(c->name, BAD_CAST "commandline"))
			cl = c;
	if (has_vsock_arg(cl))
		return 0;
	dom = name ? xmlNodeGetContent(name) : NULL;
	if (!dom || !dom[0]) {
		xmlFree(dom);
		snprintf(err, errlen, "the domain has no <name>: the vsock socket is named for it");
		return -EINVAL;
	}
	/* The socket path must fit sun_path (108 bytes with its NUL). */
	if (snprintf(chardev, sizeof(chardev), "%s/%s.sock", dir, (const char *)dom) >= 108 ||
	    strchr((const char *)dom, '/') || strchr((const char *)dom, ',')) {
		snprintf(err, errlen,
			 "the socket path %.150s/<name>.sock is longer than 107 characters, or the "
			 "name has '/' or ','",
			 dir);
		xmlFree(dom);
		return -EINVAL;
	}
	snprintf(chardev, sizeof(chardev),
		 "socket,id=" MTD_VSOCK_CHARDEV ",path=%s/%s.sock,server=on", dir,
		 (const char *)dom);
	xmlFree(dom);
	if (!ns)
		ns = xmlNewNs(root, BAD_CAST MTD_QEMU_NS, BAD_CAST "qemu");
	if (!cl) {
		cl = xmlNewNode(ns, BAD_CAST "commandline");
		mtd_xml_append_indented(root, cl);
	}
	add_arg(cl, ns, "-chardev");
	add_arg(cl, ns, chardev);
	add_arg(cl, ns, "-device");
	add_arg(cl, ns, "vhost-user-vsock-pci,chardev=" MTD_VSOCK_CHARDEV);
	note(nt, "added the agent's vsock: a vhost-user-vsock-pci device served by memtided "
		 "(qemu:commandline; the domain starts once memtided runs)");
	return 0;
}

/* Rule 3k: the kernel's vsock device. */
static void patch_kernel_vsock(xmlNodePtr root, xmlNodePtr devices, struct notes *nt)
{
	xmlNodePtr cl = NULL;

	if (child(devices, "vsock"))
		return;
	for (xmlNodePtr c = root->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && c->ns &&
		    !xmlStrcmp(c->ns->href, BAD_CAST MTD_QEMU_NS) &&
		    !xmlStrcmp(c->name, BAD_CAST "commandline"))
			cl = c;
	if (has_vsock_arg(cl)) {
		warn(nt, "warning: the domain has memtide's vhost-user vsock; the kernel's <vsock> "
			 "not added (a guest has one vsock transport)");
		return;
	}
	xmlNodePtr vs = xmlNewNode(NULL, BAD_CAST "vsock");
	xmlNodePtr cid = xmlNewNode(NULL, BAD_CAST "cid");

	xmlNewProp(vs, BAD_CAST "model", BAD_CAST "virtio");
	xmlNewProp(cid, BAD_CAST "auto", BAD_CAST "yes");
	mtd_xml_append_indented(devices, vs);
	mtd_xml_append_indented(vs, cid);
	note(nt, "added the agent's vsock: the kernel's vhost-vsock device (this host has "
		 "/dev/vhost-vsock), its guest CID picked by libvirt at each start; memtided "
		 "listens on AF_VSOCK and knows the VM by that CID");
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

int mtd_domxml_patch(const char *xml, char **before, char **after, char **changes, char *err,
		     size_t errlen)
{
	const struct mtd_domxml_opts none = {.vsock = false};

	return mtd_domxml_patch_opts(xml, &none, before, after, changes, err, errlen);
}

int mtd_domxml_patch_opts(const char *xml, const struct mtd_domxml_opts *opts, char **before,
			  char **after, char **changes, char *err, size_t errlen)
{
	struct notes nt = {.text = "", .n = 0};
	xmlDocPtr doc;
	xmlNodePtr root, devices;

	*before = *after = *changes = NULL;
	doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		snprintf(err, errlen, "the domain XML does not parse");
		return -EINVAL;
	}
	root = xmlDocGetRootElement(doc);
	if (!root || xmlStrcmp(root->name, BAD_CAST "domain")) {
		snprintf(err, errlen, "not a libvirt domain: the root element is not <domain>");
		xmlFreeDoc(doc);
		return -EINVAL;
	}
	devices = child(root, "devices");
	if (!devices) {
		snprintf(err, errlen, "the domain has no <devices> element");
		xmlFreeDoc(doc);
		return -EINVAL;
	}
	*before = dump(doc);
	patch_balloon(devices, &nt);
	patch_channel(devices, &nt);
	if (opts->vsock && opts->kernel_vsock) {
		patch_kernel_vsock(root, devices, &nt);
	} else if (opts->vsock) {
		patch_memory_backing(root, &nt);
		if (patch_vsock_device(root, devices, opts->vsock_dir, &nt, err, errlen) < 0) {
			free(*before);
			*before = NULL;
			xmlFreeDoc(doc);
			return -EINVAL;
		}
	}
	*after = dump(doc);
	*changes = strdup(nt.text);
	xmlFreeDoc(doc);
	if (!*before || !*after || !*changes) {
		free(*before);
		free(*after);
		free(*changes);
		*before = *after = *changes = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return nt.n;
}
