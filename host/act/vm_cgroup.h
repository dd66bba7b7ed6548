/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vm_cgroup.h - a VM's memory cgroup: where host-side reclaim through the kernel's LRU
 * (act/memcg_hand.h) reads the guest's memory and asks for it back.
 *
 * Found from QEMU's own cgroup (/proc/PID/cgroup), on the unified hierarchy (cgroup v2):
 *   - under libvirt, the domain's cgroup: systemd's machine-qemu\x2dN\x2dNAME.scope (or
 *     libvirt's own machine/qemu-N-NAME.libvirt-qemu without systemd), above the
 *     libvirt/emulator and vcpuN groups its threads sit in;
 *   - in plain-QEMU mode, QEMU's cgroup when QEMU is alone in it (started as an operator
 *     should, e.g. `systemd-run --scope -p MemoryAccounting=yes qemu-system-x86_64 ...`);
 *     a QEMU that shares its cgroup (a login shell's, the root) is moved into a cgroup of
 *     its own, memtide.slice/NAME.scope under the cgroup2 root (mtd_cgroup_adopt), while it
 *     holds little memory yet (memtided attached as QEMU started).  Memory charged before a
 *     move stays charged where it was (cgroup v2 moves no charges), out of reach of reclaim
 *     through the new cgroup: a QEMU that already holds its guest's memory is not moved,
 *     and the caller says what to set up instead.
 * A host whose memory controller is on cgroup v1 (a hybrid hierarchy) has no memory.reclaim
 * and no per-cgroup PSI there: it is said so, and host-side reclaim through the cgroup is
 * not used (the VM keeps whatever other path memtided has for it).
 *
 * memtided changes nothing else of a cgroup: no memory.max, memory.high, memory.low or
 * memory.min is ever written, so a stop, a restart or a detach leaves nothing to undo.  A
 * moved QEMU stays where it was moved (moving it back could fail: its old cgroup may be gone);
 * memtided removes the cgroup it made once it is empty (QEMU exited).
 *
 * Pure apart from the functions that name a process or a directory.
 */
#ifndef MEMTIDE_HOST_VM_CGROUP_H
#define MEMTIDE_HOST_VM_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_CG_PATH_MAX 256
#define MTD_CG_SLICE    "memtide.slice"

struct mtd_vm_cgroup {
	char root[MTD_CG_PATH_MAX]; /* the cgroup2 mount ("/sys/fs/cgroup") */
	char path[MTD_CG_PATH_MAX]; /* the VM's cgroup under it ("/machine.slice/..."), as
				     * /proc/PID/cgroup and the kernel's lru_gen name it */
	char dir[1024];             /* root + path */
	bool moved;                 /* memtided moved QEMU here (plain QEMU) */
	bool created;               /* memtided made the directory */
	char moved_from[MTD_CG_PATH_MAX];
};

/* Where to look: "/proc" and the cgroup2 mount found in /proc/self/mountinfo, unless a test
 * points them elsewhere (cg_root non-NULL: that directory is the cgroup2 root). */
struct mtd_cgroup_env {
	const char *proc_root;
	const char *cg_root;
};

/*
 * /proc/PID/cgroup text: the unified hierarchy's path ("0::/x" gives "/x") into path, and
 * whether a v1 hierarchy holds the memory controller.  0 with the path, -ENOENT (no "0::"
 * line: a v1-only host), -EPROTO (not that file's format).
 */
int mtd_cgroup_parse_proc(const char *text, char *path, size_t len, bool *v1_memory);

/* /proc/self/mountinfo text: the cgroup2 mount point.  0, or -ENOENT (none mounted). */
int mtd_cgroup_parse_mountinfo(const char *text, char *root, size_t len);

/* The VM's cgroup from QEMU's: libvirt's per-domain cgroup above the groups it puts QEMU's
 * threads in (".../libvirt/emulator", ".../libvirt/vcpu0", ".../emulator"); else QEMU's own. */
void mtd_cgroup_vm_path(const char *qemu_path, char *out, size_t len);

/* The name memtided gives the cgroup of a VM it moves: NAME.scope with every character
 * outside [A-Za-z0-9_.-] written as \xHH, as systemd escapes unit names. */
void mtd_cgroup_scope_name(const char *vm_name, char *out, size_t len);

/*
 * QEMU process pid's VM cgroup.  0 and *out filled when host-side reclaim can use it: v2,
 * the memory controller on, memory.reclaim there, and no process in it or under it but QEMU.
 * Else a negative errno with a sentence in why:
 *   -EOPNOTSUPP  the memory controller is on cgroup v1 (or the kernel has no memory.reclaim);
 *   -ENOENT      no cgroup2 mount, or QEMU is gone;
 *   -EBUSY       QEMU shares its cgroup with other processes, or sits in the root cgroup:
 *                out is still filled (what was found); mtd_cgroup_adopt can move it.
 */
int mtd_cgroup_find(const struct mtd_cgroup_env *env, int pid, struct mtd_vm_cgroup *out, char *why,
		    size_t whylen);

/*
 * Move QEMU process pid (all its threads) into a cgroup of its own,
 * memtide.slice/NAME.scope under the cgroup2 root, with the memory controller on for it
 * (written to the subtree_control files on the way down).  0 and *cg updated (moved, created,
 * moved_from), or -errno with why.
 */
int mtd_cgroup_adopt(const struct mtd_cgroup_env *env, const char *vm_name, int pid,
		     struct mtd_vm_cgroup *cg, char *why, size_t whylen);

/* QEMU process pid's anonymous resident memory (RssAnon of /proc/PID/status): what a move
 * to another cgroup would leave charged behind.  0 or -errno. */
int mtd_cgroup_rss_anon(const char *proc_root, int pid, uint64_t *bytes);

/* Remove the cgroup memtided made for a VM once no process is left in it (QEMU exited).
 * 0, -EBUSY (still in use: left as it is), -errno. */
int mtd_cgroup_remove_if_empty(const struct mtd_vm_cgroup *cg);

#endif /* MEMTIDE_HOST_VM_CGROUP_H */
