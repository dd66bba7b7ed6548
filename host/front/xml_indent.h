/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xml_indent.h: append an element to a libvirt domain XML, indented like its siblings
 * (xml_indent.c says why).  Used by domxml.c and front/domxml_ept.c.
 */
#ifndef MEMTIDE_XML_INDENT_H
#define MEMTIDE_XML_INDENT_H

#include <libxml/tree.h>

/* Append el as the last element child of parent, indented like its siblings (one level
 * deeper than parent when it has none); parent takes ownership of el. */
void mtd_xml_append_indented(xmlNodePtr parent, xmlNodePtr el);

#endif
