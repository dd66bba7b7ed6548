/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * domxml.h - what `memtidectl domxml-patch` changes in a libvirt domain's XML so that
 * memtide can manage it: a virtio memballoon with free page reporting on and a stats period,
 * and the unix channel the guest agent talks through; with --vsock also the agent's vsock
 * (on a host with the kernel's vhost_vsock, libvirt's own <vsock> device, whose guests
 * memtided tells apart by CID; elsewhere memtided as the back end of a vhost-user-vsock-pci
 * device, which libvirt has no element for: it goes through <qemu:commandline>, with the
 * shared guest RAM vhost-user needs).
 *
 * A pure text-to-text transform (libxml2, no libvirt, no I/O), so it is unit-tested on
 * sample domain XML; memtidectl does the libvirt part (read the inactive XML, show the diff,
 * define the result).
 */
#ifndef MEMTIDE_HOST_DOMXML_H
#define MEMTIDE_HOST_DOMXML_H

#include <stdbool.h>
#include <stddef.h>

#define MTD_AGENT_CHANNEL  "org.memtide.agent.0"
#define MTD_STATS_PERIOD_S 2
#define MTD_QEMU_NS        "http://libvirt.org/schemas/domain/qemu/1.0"
#define MTD_VSOCK_CHARDEV  "memtide-vsock"

struct mtd_domxml_opts {
	bool vsock;            /* add the agent's vsock (which one: kernel_vsock) */
	bool kernel_vsock;     /* the host has the kernel's vhost-vsock (/dev/vhost-vsock): the
				* kernel's <vsock> device; else memtided's vhost-user-vsock
				* device and the shared memfd RAM it needs */
	const char *vsock_dir; /* where QEMU makes the vhost-user socket (memtided watches it) */
};

/*
 * Patch domain XML text.  On success *before and *after are the document serialised by
 * libxml2 without and with the changes (so a diff of the two shows only the changes, not
 * libxml2's quoting), *changes is a sentence per change, one per line ("" when the domain
 * already has everything); the caller frees all three.  Returns the number of changes, or
 * -EINVAL with a sentence in err (not XML, not a <domain>, no <devices>).
 */
int mtd_domxml_patch(const char *xml, char **before, char **after, char **changes, char *err,
		     size_t errlen);
/* The same with options (mtd_domxml_patch: no vsock).  -EINVAL also when the domain's name
 * makes too long a socket path under opts->vsock_dir. */
int mtd_domxml_patch_opts(const char *xml, const struct mtd_domxml_opts *opts, char **before,
			  char **after, char **changes, char *err, size_t errlen);

#endif /* MEMTIDE_HOST_DOMXML_H */
