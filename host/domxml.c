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
 * Existing elements are edited in place and keep their other attributes and children; new
 * ones get indentation like their siblings so the diff an operator reads is tidy.
 */
#include "domxml.h"

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

/* The whitespace before parent's closing tag, and the indent of its children. */
static void indent_of(xmlNodePtr parent, char *ind, size_t len)
{
	snprintf(ind, len, "\n  ");
	for (xmlNodePtr c = parent->children; c; c = c->next) {
		if (c->type == XML_TEXT_NODE && c->next && c->next->type == XML_ELEMENT_NODE &&
		    xmlIsBlankNode(c)) {
			snprintf(ind, len, "%s", (const char *)c->content);
			return;
		}
	}
	/* No element children: one level deeper than the parent's own indent. */
	if (parent->prev && parent->prev->type == XML_TEXT_NODE && xmlIsBlankNode(parent->prev))
		snprintf(ind, len, "%s  ", (const char *)parent->prev->content);
}

/* Append el as the last element child of parent, indented like its siblings. */
static void append_indented(xmlNodePtr parent, xmlNodePtr el)
{
	char ind[64];
	xmlNodePtr last = parent->last;

	indent_of(parent, ind, sizeof(ind));
	if (last && last->type == XML_TEXT_NODE && xmlIsBlankNode(last)) {
		/* Element first, then its indent before it: libxml2 merges a text node added
		 * next to another text node, which would put the indent after el. */
		xmlAddPrevSibling(last, el);
		xmlAddPrevSibling(el, xmlNewText(BAD_CAST ind));
	} else {
		/* The parent closes on the same line: open a line for el and close after it. */
		char close[64];
		size_t n = strlen(ind);

		snprintf(close, sizeof(close), "%.*s", (int)(n >= 2 ? n - 2 : n), ind);
		xmlAddChild(parent, xmlNewText(BAD_CAST ind));
		xmlAddChild(parent, el);
		xmlAddChild(parent, xmlNewText(BAD_CAST close));
	}
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
		append_indented(devices, mb);
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
		append_indented(mb, stats);
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
	append_indented(devices, ch);
	append_indented(ch, src);
	append_indented(ch, tgt);
	note(nt, "added the memtide agent channel (unix socket, virtio-serial port "
		 "org.memtide.agent.0)");
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
