/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * choose.h - which access-bit source a VM gets (choose.c).
 *
 * Preference, best first: ept (page-level, exact while it samples), idle (page-level on the
 * host frames), damon (regions of host frames), then the agent's amounts (the guest's own
 * MGLRU), then the VM's memory cgroup (what the host kernel's reclaim learns: a KVM guest on
 * a host with neither DAMON nor idle page tracking).  The cgroup is looked at only when its
 * source is tried (env->memcg_open): nothing of a VM with another source is moved or
 * reclaimed through its cgroup.  The policy key
 * `source` narrows it to one; if that one is unavailable the VM falls back to the agent and
 * the reason is shown.  Every source not taken gets one sentence saying why, for
 * `memtidectl vm show` and the status JSON.
 */
#ifndef MEMTIDE_HOST_ACCESS_CHOOSE_H
#define MEMTIDE_HOST_ACCESS_CHOOSE_H

#include <stddef.h>
#include <stdint.h>

#include "access/source.h"
#include "base/mtd.h"
#include "vmm.h"

struct mtd_agent_link;
struct mtd_memcg_hand;

struct mtd_access_env {
	const char *vm_name;
	uint64_t guest_bytes;
	int qemu_pid;   /* 0: unknown (then only ept's pid check is skipped) */
	int on_kvm;     /* QEMU runs the guest on KVM: 1, 0, or -1 unknown */
	mtd_qmp_fn qmp; /* QEMU's monitor (NULL: none): the checked RAM map */
	void *qmp_ctx;
	struct mtd_agent_link *agent; /* NULL: no agent channel */
	uint64_t interval_ms, agent_silence_ms;
	enum mtd_access_pref pref;    /* policy `source` */
	uint64_t ept_window_ms;       /* policy `ept_window` */
	const char *ept_dir;          /* the plugin's table files: DIR/NAME.ept */
	const char *proc_dir;         /* "/proc" (tests point it at recorded files) */
	const char *idle_bitmap;      /* "/sys/kernel/mm/page_idle/bitmap" */
	const char *damon_admin;      /* "/sys/kernel/mm/damon/admin" */
	const char *run_dir;          /* "/run/memtide": DAMON's ownership record */
	const char *young_dump_dir;   /* "" or NULL: off (young_dump.c) */
	struct mtd_memcg_hand *memcg; /* the VM's cgroup reclaim (NULL: none usable) */
	const char *memcg_why;        /* ...and why not */
	/* Finds the VM's cgroup and makes its hand (in plain-QEMU mode it may move QEMU into
	 * memtide.slice), called only when the memcg source is tried: the policy says
	 * source=memcg, or source=auto and no other source opened.  A VM with a page-level source
	 * (ept, idle, damon) or an agent under auto never has its QEMU moved nor
	 * memory.reclaim written.  *out NULL with why: no cgroup it can use.  0 or -ENOMEM.
	 * NULL: memcg above is used as it is. */
	int (*memcg_open)(void *ctx, struct mtd_memcg_hand **out, char *why, size_t len);
	void *memcg_ctx;
};

struct mtd_access_choice {
	char chosen[16];  /* "ept", "idle", "damon", "agent", "memcg" or "none" */
	char detail[160]; /* about the chosen source, or why none */
	unsigned nr_notes;
	struct {
		char name[8];
		char why[152];
	} notes[MTD_SOURCE_NOTES];
};

/* Zero env and fill its paths with the real ones. */
void mtd_access_env_default(struct mtd_access_env *env);

/* Make the source env asks for (out->ops NULL: none at all) and say why the others were
 * not taken.  0, or -ENOMEM. */
int mtd_access_choose(const struct mtd_access_env *env, struct mtd_source *out,
		      struct mtd_access_choice *ch);

/* At daemon start: the directory QEMU's plugins write their tables in (root:kvm 01770 when
 * missing: QEMU runs as libvirt's qemu user in group kvm; base/qemu_dir.h), memtided's
 * run_dir, and a kdamond a crashed memtided left (its claim is run_dir/damon.owner). */
void mtd_access_daemon_start(const char *ept_dir, const char *run_dir);

/* Copy a choice into a VM status. */
void mtd_access_choice_to_status(const struct mtd_access_choice *ch, struct mtd_vm_status *st);
/* Bring the status's source_detail up to date from the source's describe op (the ept
 * windows move every round); sources without one keep the line written at attach. */
void mtd_access_refresh_status(const struct mtd_source *src, struct mtd_vm_status *st);

#endif /* MEMTIDE_HOST_ACCESS_CHOOSE_H */
