/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * domxml_ept.h - what `memtidectl domxml-patch --ept` adds to a libvirt domain so that its
 * QEMU loads memtide's ept plugin (host/access/qemu_plugin/): the -plugin argument, through
 * libvirt's QEMU command-line passthrough (<qemu:commandline>), with the table path
 * memtided looks for (DIR/NAME.ept) and the guest RAM layout the plugin needs (ram= and,
 * when QEMU puts RAM above 4 GiB, lowmem=), taken from the domain's own <memory> and
 * machine type.
 *
 * A pure text-to-text transform like host/front/domxml.h (libxml2, no libvirt, no I/O), applied
 * after it; unit-tested on sample XML (tests/unit/test_domxml_ept.c) and against a real
 * libvirtd in tests/integration/domxml_ept.sh.
 */
#ifndef MEMTIDE_HOST_ACCESS_DOMXML_EPT_H
#define MEMTIDE_HOST_ACCESS_DOMXML_EPT_H

#include <stddef.h>

#define MTD_QEMU_XMLNS "http://libvirt.org/schemas/domain/qemu/1.0"

/*
 * Patch domain XML text: make its <qemu:commandline> carry exactly one
 * "-plugin PLUGIN,table=DIR/NAME.ept,ram=...M[,lowmem=...M]" pair for this domain's RAM and
 * machine (mtd_ept_plugin_arg).  An existing memtide-ept -plugin pair is kept when it is
 * right, corrected when it is not (RAM resized, directory moved), and duplicates removed,
 * so a second run changes nothing.  Other <qemu:commandline> arguments are kept.
 * On success *after is the document as libxml2 serialises it and *changes one sentence
 * per line (changes and warnings; "" when nothing changed); the caller frees both.
 * Returns the number of changes, or a negative errno with one sentence in err and nothing
 * allocated: -EINVAL (not XML or not a domain; not a TCG domain (type='qemu'); not an x86
 * pc or q35 machine; no usable <memory>; NUMA cells or max-ram-below-4g, whose RAM layout
 * the plugin does not model), -ENAMETOOLONG, -ENOMEM.
 */
int mtd_domxml_patch_ept(const char *xml, const char *plugin, const char *dir, char **after,
			 char **changes, char *err, size_t errlen);

#endif /* MEMTIDE_HOST_ACCESS_DOMXML_EPT_H */
