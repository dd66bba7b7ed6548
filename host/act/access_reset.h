/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * access_reset.h - forget what a KVM guest touched before memtided came, once, so that the
 * kernel's reclaim judges its pages by what the guest touches from then on.
 *
 * Why: the kernel's reclaim decides a page of a KVM guest is in use when the host's page
 * table entry is young or KVM says so through the MMU notifier (clear_flush_young: the
 * accessed bit of the nested page table's entry).  Both are set when the guest first
 * touched the page - for data it wrote once at boot and never again as much as for its hot
 * set - and only a reclaim pass that looks at the page clears them.  So the first eviction
 * pass over a VM finds everything "recently used" and moves it to the youngest generation,
 * and cold data becomes evictable only one more cold age later (measured on the KVM stand,
 * Debian 12's 6.1: the first pass kept 646-672 MiB, the whole fill,
 * first cold MiB 47-61 s after enable, about 10 MiB back at 60 s of a best ~460).
 *
 * How, through /proc/PID/clear_refs of QEMU (fs/proc/task_mmu.c, clear_refs_write):
 *   "4" (soft-dirty) brackets its walk with mmu_notifier_invalidate_range_start/_end over the
 *       whole address space: KVM zaps its nested mappings of guest RAM, and with them their
 *       accessed bits (what KVM had goes to the page's PG_referenced, which MGLRU's isolation
 *       clears and which leaves an anonymous page evictable on the classic LRU); the guest
 *       then faults back into KVM only what it touches, which is young again;
 *   "1" (all) then clears the young bit of every host PTE and the pages' PG_referenced
 *       (it does not call the notifier on 6.1, hence "4" first).
 * Cost, once: the guest's working set faults back into KVM's page tables (a minor fault
 * each), and each page written afterwards takes one write-protect fault (the soft-dirty
 * clear write-protects the host PTEs).  Nothing is evicted, nothing is lost.
 *
 * Not while QEMU itself reads all of guest memory (a migration, snapshot or dump: the
 * caller checks), and not for a process another tool tracks with soft-dirty (CRIU's
 * pre-dump): the caller only does it for VMs whose host-side eviction goes through their
 * cgroup, once per QEMU process.
 */
#ifndef MEMTIDE_HOST_ACCESS_RESET_H
#define MEMTIDE_HOST_ACCESS_RESET_H

#include <stddef.h>

/* Write "4" then "1" to PROC/pid/clear_refs (proc_root NULL: /proc).  0, or -errno of the
 * write that failed (why says which, and what it means for the VM). */
int mtd_access_reset(const char *proc_root, int pid, char *why, size_t whylen);

#endif /* MEMTIDE_HOST_ACCESS_RESET_H */
