// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * xml_indent.c: adding elements to a libvirt domain XML so that it stays laid out as an
 * operator wrote it.
 *
 * memtidectl domxml-patch (domxml.c) and its --ept part (front/domxml_ept.c) add elements
 * to a definition and show the operator the diff before applying it; libxml2 appends bare
 * nodes, which would put every new element on its parent's line.  Here a new element takes
 * the indent of its siblings, so the diff shows exactly the lines added.
 */
#include "front/xml_indent.h"

#include <stdio.h>
#include <string.h>

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

void mtd_xml_append_indented(xmlNodePtr parent, xmlNodePtr el)
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
