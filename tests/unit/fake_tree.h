/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fake_tree.h - a fake cgroupfs, /proc and /sys for the unit tests of the cgroup side of
 * host-side eviction (test_vm_cgroup.c: finding and moving a VM's cgroup; test_memcg_hand.c:
 * the hand that reclaims through it).
 *
 * Ordinary files in a temporary directory, which the code under test is pointed at through
 * its proc_root, cg_root and sys_root: this machine's memory controller is on cgroup v1
 * (../shared/README.md), and moving a process between real cgroups, or writing a real
 * memory.reclaim, would touch host-global state.  What only the kernel's files do (files that
 * appear by themselves, memory.reclaim reclaiming) is the KVM stand's to test.
 *
 * Header-only, every function static inline so a test uses what it needs.
 */
#ifndef MEMTIDE_TESTS_FAKE_TREE_H
#define MEMTIDE_TESTS_FAKE_TREE_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The cmocka asserts: the includer includes cmocka.h (after setjmp.h, stdarg.h, stddef.h). */

/* A libvirt domain's scope under systemd, as on the KVM stand. */
#define FAKE_SCOPE "/machine.slice/machine-qemu\\x2d1\\x2dvm.scope"

struct fake_tree {
	char top[64];  /* the temporary directory */
	char proc[80]; /* top/proc: /proc */
	char cg[80];   /* top/cg: the cgroup2 mount */
	char sys[80];  /* top/sys: /sys */
	char lru[80];  /* top/lru_gen: debugfs's lru_gen (MGLRU's generations) */
};

/* Write text to dir/rel, making its directories. */
static inline void fake_put(const char *dir, const char *rel, const char *text)
{
	char path[3 * PATH_MAX], cmd[4 * PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* dir/rel's text (up to 4 KiB, in a buffer the next call reuses), or NULL if it is absent. */
static inline char *fake_get(const char *dir, const char *rel)
{
	static char buf[4096];
	char path[3 * PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* An empty tree under /tmp/memtide-TAG.XXXXXX; free it with fake_tree_free. */
static inline struct fake_tree *fake_tree_new(const char *tag)
{
	struct fake_tree *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->top, sizeof(t->top), "/tmp/memtide-%s.XXXXXX", tag);
	assert_non_null(mkdtemp(t->top));
	snprintf(t->proc, sizeof(t->proc), "%s/proc", t->top);
	snprintf(t->cg, sizeof(t->cg), "%s/cg", t->top);
	snprintf(t->sys, sizeof(t->sys), "%s/sys", t->top);
	snprintf(t->lru, sizeof(t->lru), "%s/lru_gen", t->top);
	return t;
}

static inline void fake_tree_free(struct fake_tree *t)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->top);
	assert_int_equal(system(cmd), 0);
	free(t);
}

/* A process's /proc/PID/stat with its name and its flags field (the 9th). */
static inline void fake_proc_stat(struct fake_tree *t, int pid, const char *comm,
				  unsigned long flags)
{
	char rel[64], text[256];

	snprintf(rel, sizeof(rel), "%d/stat", pid);
	snprintf(text, sizeof(text), "%d (%s) S 1 %d %d 0 -1 %lu 0 0\n", pid, comm, pid, pid,
		 flags);
	fake_put(t->proc, rel, text);
}

/* libvirt's layout under systemd: QEMU (pid) alone in FAKE_SCOPE's libvirt/emulator, the
 * scope at 1 GiB with a memory.reclaim, and QEMU's /proc/PID/cgroup saying so (cgroup v2
 * only).  The caller writes the root's cgroup.controllers and QEMU's stat. */
static inline void fake_libvirt_domain(struct fake_tree *t, int pid)
{
	char rel[64], text[64];

	fake_put(t->cg, FAKE_SCOPE "/memory.current", "1073741824\n");
	fake_put(t->cg, FAKE_SCOPE "/memory.reclaim", "");
	fake_put(t->cg, FAKE_SCOPE "/cgroup.procs", "");
	snprintf(text, sizeof(text), "%d\n", pid);
	fake_put(t->cg, FAKE_SCOPE "/libvirt/emulator/cgroup.procs", text);
	snprintf(rel, sizeof(rel), "%d/cgroup", pid);
	fake_put(t->proc, rel, "0::" FAKE_SCOPE "/libvirt/emulator\n");
}

#endif /* MEMTIDE_TESTS_FAKE_TREE_H */
