/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * choose.h - which access-bit source a VM gets (choose.c), and the guest RAM layout the
 * host-side sources share (guest_layout.c).
 *
 * Preference, best first: ept (page-level, exact while it samples), idle (page-level on the
 * host frames), damon (regions of host frames), then the agent's amounts.  The policy key
 * `source` narrows it to one; if that one is unavailable the VM falls back to the agent and
 * the reason is shown.  Every source not taken gets one sentence saying why, for
 * `memtidectl vm show` and the status JSON.
 */
#ifndef MEMTIDE_HOST_ACCESS_CHOOSE_H
#define MEMTIDE_HOST_ACCESS_CHOOSE_H

#include <stdint.h>

#include "base/mtd.h"
#include "access/source.h"
#include "vmm.h"

struct mtd_agent_link;

struct mtd_access_env {
	const char *vm_name;
	uint64_t guest_bytes;
	int qemu_pid;                 /* 0: unknown (then only ept's pid check is skipped) */
	struct mtd_agent_link *agent; /* NULL: no agent channel */
	uint64_t interval_ms, agent_silence_ms;
	enum mtd_access_pref pref;  /* policy `source` */
	uint64_t ept_window_ms;     /* policy `ept_window` */
	const char *ept_dir;        /* the plugin's table files: DIR/NAME.ept */
	const char *proc_dir;       /* "/proc" (tests point it at recorded files) */
	const char *idle_bitmap;    /* "/sys/kernel/mm/page_idle/bitmap" */
	const char *damon_admin;    /* "/sys/kernel/mm/damon/admin" */
	const char *run_dir;        /* "/run/memtide": DAMON's ownership record */
	const char *young_dump_dir; /* "" or NULL: off (young_dump.c) */
};

struct mtd_access_choice {
	char chosen[16];  /* "ept", "idle", "damon", "agent" or "none" */
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

/* Wrap src so that each aging round writes the pages in libvmm's two youngest generations
 * to DIR/NAME.young (young_dump.c; a diagnostic).  0 or -ENOMEM (src unchanged). */
int mtd_source_young_dump(struct mtd_source *src, const char *dir, const char *vm_name);

/* At daemon start: the directory QEMU's plugins write their tables in (root:kvm 01770 when
 * missing: QEMU runs as libvirt's qemu user in group kvm; base/qemu_dir.h), memtided's
 * run_dir, and a kdamond a crashed memtided left (its claim is run_dir/damon.owner). */
void mtd_access_daemon_start(const char *ept_dir, const char *run_dir);

/* Copy a choice into a VM status. */
void mtd_access_choice_to_status(const struct mtd_access_choice *ch, struct mtd_vm_status *st);
/* Bring the status's source_detail up to date from the source's describe op (the ept
 * windows move every round); sources without one keep the line written at attach. */
void mtd_access_refresh_status(const struct mtd_source *src, struct mtd_vm_status *st);

/*
 * The guest RAM layout of QEMU process pid (its command line: the machine type and
 * max-ram-below-4g), for sources that see QEMU's RAM block rather than guest-physical
 * addresses.  RAM up to lowmem sits at GPA 0, the rest at 4 GiB; lowmem follows QEMU 7.2's
 * pc and q35 rules: pc keeps all RAM low below 3.5 GiB and splits at 3 GiB above that, q35
 * keeps it low below 2.75 GiB and splits at 2 GiB.  Fills ranges (2 at most) and *lowmem
 * (0: all low); returns the number of ranges, or -EINVAL.
 */
int mtd_guest_layout(const char *proc_dir, int pid, uint64_t ram_bytes, struct vmm_range *ranges,
		     uint64_t *lowmem);

/* RAM-block offset of guest-physical gpa under that layout (UINT64_MAX: not RAM). */
uint64_t mtd_guest_ram_offset(uint64_t gpa, uint64_t ram_bytes, uint64_t lowmem);

/*
 * QEMU's mapping of guest RAM: the start of its largest mapping of at least ram_bytes (and
 * at most 8 MiB more: alignment and a guard page) in proc_dir/PID/maps.  0 or -errno.
 */
int mtd_guest_ram_hva(const char *proc_dir, int pid, uint64_t ram_bytes, uint64_t *hva);

#endif /* MEMTIDE_HOST_ACCESS_CHOOSE_H */
