/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu_dir.h - a directory QEMU writes into: memtide's ept plugin makes its tables in
 * ept_dir, QEMU its vhost-user-vsock sockets in vsock_dir.  libvirt runs QEMU as its qemu
 * user in group kvm (Debian: libvirt-qemu:kvm), so such a directory is root:kvm, writable by
 * the group and by no one else (never world-writable, as /tmp is); without a group kvm it is
 * root's alone (0755) and only a QEMU run as root can write there.
 */
#ifndef MEMTIDE_HOST_QEMU_DIR_H
#define MEMTIDE_HOST_QEMU_DIR_H

#include <sys/types.h>

#define MTD_QEMU_GROUP "kvm"

/*
 * Make dir (and its missing parents, 0755) when it is missing: root:kvm with group_mode
 * (0770; 01770 keeps each file its creator's, as the sticky bit of /tmp does), or 0755 when
 * there is no group kvm.  An existing directory is left as the operator (or
 * systemd-tmpfiles) made it.  0 or -errno.
 */
int mtd_qemu_dir_make(const char *dir, mode_t group_mode);

#endif /* MEMTIDE_HOST_QEMU_DIR_H */
