/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * state.h - what memtided keeps about each VM across its own restarts (a clean restart, a
 * package upgrade, kill -9), so the next memtided resumes where this one was instead of
 * starting over from nothing: the balloon target it set, the controller's hold and backoff,
 * a release in force, and (plain-QEMU mode, where nothing else keeps it) the runtime policy
 * set with `memtidectl policy set`.
 *
 * One small JSON file per VM under the state directory ([daemon] state_dir, --state-dir;
 * default /var/lib/memtide), written whole to NAME.state.tmp and renamed over NAME.state, so
 * a reader (the next memtided) sees the old file or the new one, never half of one.  No
 * fsync: the files only matter while the QEMU processes they describe live, and a host
 * crash ends those too; what must survive is memtided's own death (kill -9, OOM), and the
 * page cache survives that.
 *
 * The file is untrusted on the way in: at most MTD_STATE_MAX_BYTES are read, every field is
 * type- and range-checked, a name or boot that is not this one makes the whole file
 * ignored; a file that fails any check is reported in one sentence and ignored (the VM
 * resumes from its current size).  The controller re-checks what it takes against the
 * balloon's actual (mtd_ctl_resume), so no file can take a VM below its floor or inflate it.
 *
 * Thread context: pure functions and one file per VM; each VM's loop writes only its own.
 */
#ifndef MEMTIDE_HOST_STATE_H
#define MEMTIDE_HOST_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mtd.h"
#include "base/policy.h"
#include "decide/controller.h"

#define MTD_STATE_FORMAT    1
#define MTD_STATE_NAME_MAX  72    /* longest state file name */
#define MTD_STATE_MAX_BYTES 16384 /* a real file is ~700 bytes */

struct mtd_saved_vm {
	char name[MTD_NAME_MAX];
	char uuid[37];            /* libvirt mode: the domain's UUID ("" in plain-QEMU mode) */
	char boot_id[37];         /* /proc/sys/kernel/random/boot_id when saved */
	char instance[48];        /* the QEMU process, "PID:STARTTIME" ("" unknown) */
	uint64_t saved_ms;        /* CLOCK_MONOTONIC when saved */
	struct mtd_ctl_state ctl; /* target, balloon, hold, refusals (reason is not kept) */
	bool released;            /* memtidectl release in force */
	/* Runtime policy (plain-QEMU mode): the value text of each key set with policy set,
	 * indexed as mtd_policy_keys; "" where not set. */
	char policy_set[MTD_POLICY_NKEYS][MTD_POLICY_VALUE_MAX];
};

/* Encode s as one JSON object (text, NUL-terminated).  0 or -ENOSPC. */
int mtd_state_encode(const struct mtd_saved_vm *s, char *buf, size_t len);
/* Decode len bytes of text.  0, or -EINVAL with a sentence in err (s unspecified). */
int mtd_state_decode(const char *text, size_t len, struct mtd_saved_vm *s, char *err,
		     size_t errlen);

/* The file name for a VM (no directory): the name itself where it is made of safe
 * characters and short enough, else a hash of it.  0 or -EINVAL. */
int mtd_state_file_name(const char *vm_name, char *buf, size_t len);

/* Create dir (and missing parents) with mode 0700 when missing.  0 or -errno, err set. */
int mtd_state_dir_prepare(const char *dir, char *err, size_t errlen);
/* Write s atomically (tmp + rename).  0 or -errno with err set. */
int mtd_state_save(const char *dir, const struct mtd_saved_vm *s, char *err, size_t errlen);
/* Read and check the file of vm_name.  0; -ENOENT (none); -EINVAL or -errno with err set. */
int mtd_state_load(const char *dir, const char *vm_name, struct mtd_saved_vm *s, char *err,
		   size_t errlen);
/* Remove the file of vm_name (and a leftover .tmp).  0 or -errno (-ENOENT: there was none). */
int mtd_state_remove(const char *dir, const char *vm_name);
/* Remove the files of VMs keep() says no longer exist, and leftover .tmp files; a file
 * whose VM cannot be told is removed too (and logged).  Returns the number removed. */
int mtd_state_prune(const char *dir, bool (*keep)(void *arg, const char *vm_name), void *arg);

/* This boot's id (36 characters and a NUL).  0 or -errno. */
int mtd_state_boot_id(char out[37]);

#endif /* MEMTIDE_HOST_STATE_H */
