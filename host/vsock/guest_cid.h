/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * guest_cid.h - a plain-QEMU VM's vsock CID, from QEMU's own command line.
 *
 * memtided's AF_VSOCK listener (kvsock.h) tells VMs apart by their guest CID.  In libvirt mode
 * the domain XML says it (<vsock><cid address='N'/>, act/libvirt_conn.h); a QEMU started by
 * hand says it only on its command line, which /proc/PID/cmdline keeps: the kernel's vsock
 * device in either of QEMU's spellings,
 *     -device vhost-vsock-pci,id=vsock0,guest-cid=3
 *     -device {"driver":"vhost-vsock-pci","id":"vsock0","guest-cid":3,"vhostfd":"28"}
 * (libvirt's is the second), vhost-vsock-pci-non-transitional, vhost-vsock-device (virtio-mmio)
 * and vhost-vsock-ccw alike; never vhost-user-vsock-*, which is memtided's own back end.
 */
#ifndef MEMTIDE_HOST_GUEST_CID_H
#define MEMTIDE_HOST_GUEST_CID_H

#include <stddef.h>
#include <stdint.h>

/* args: the arguments as /proc/PID/cmdline holds them (each NUL-terminated), len bytes.
 * 0 with *cid, -ENOENT (no kernel vsock device), -EINVAL (one whose guest-cid is missing or
 * not a CID a guest can have: 3 .. 2^32 - 2), -E2BIG (two devices: which one the agent uses
 * is the guest's choice). */
int mtd_guest_cid_parse(const char *args, size_t len, uint32_t *cid);
/* The same for process pid under proc_dir ("/proc"): also -errno of reading it. */
int mtd_guest_cid_of_pid(const char *proc_dir, int pid, uint32_t *cid);

#endif /* MEMTIDE_HOST_GUEST_CID_H */
