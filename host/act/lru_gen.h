/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lru_gen.h - the host kernel's multi-generational LRU (MGLRU) for one memory cgroup, as
 * Documentation/admin-guide/mm/multigen_lru.rst describes it: whether it is on, the
 * generations of the cgroup's memory (/sys/kernel/debug/lru_gen), and its two commands,
 * aging ('+') and eviction ('-').
 *
 * What a generation means for a KVM guest is the caller's business (act/memcg_hand.c says
 * it: on Debian 12's 6.1 the aging walk does not see a guest's accesses, eviction does).
 * Here: the kernel's text, read and written.
 *
 * The file lists every memory cgroup ("memcg ID PATH"), each NUMA node of it (" node N"),
 * and each generation from the oldest evictable one to the youngest (" SEQ AGE_MS ANON
 * FILE", sizes in pages).  A VM's memory may be charged to its cgroup or to cgroups below
 * it (libvirt's emulator and vcpu groups), so a view holds every memcg at or under a path.
 *
 * Pure apart from mtd_lru_gen_enabled, mtd_lru_gen_read and mtd_lru_gen_cmd.
 */
#ifndef MEMTIDE_HOST_LRU_GEN_H
#define MEMTIDE_HOST_LRU_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTD_LRU_GENS 8  /* MAX_NR_GENS is 4 on 6.1; room for a kernel built with more */
#define MTD_LRU_VECS 16 /* memcgs x nodes of one VM */

struct mtd_lru_gen {
	uint64_t seq;
	uint64_t age_ms; /* since the kernel made it (its birth) */
	uint64_t anon_pages, file_pages;
};

/* One lruvec: a memcg on a node, its generations oldest first. */
struct mtd_lru_vec {
	unsigned memcg_id;
	int node;
	unsigned nr;
	struct mtd_lru_gen g[MTD_LRU_GENS];
};

struct mtd_lru_view {
	unsigned nr;
	struct mtd_lru_vec v[MTD_LRU_VECS];
	bool truncated; /* more memcgs or nodes than MTD_LRU_VECS: the rest left out */
};

/*
 * Is MGLRU on?  /sys/kernel/mm/lru_gen/enabled ("0x0007": bit 0 is the main switch; "y"
 * and "n" are what an operator writes).  1 on, 0 off, -ENOENT (the kernel has no MGLRU),
 * -errno.  memtided only reads it: turning it on is host-wide, the operator's call.
 */
int mtd_lru_gen_enabled(const char *sys_root);

/* The lruvecs of the memcgs whose path is cg_path or lies under it ("/machine.slice/x" takes
 * "/machine.slice/x/libvirt/emulator" too, not "/machine.slice/xy").  0, or -EPROTO on text
 * that is not the kernel's (a generation line before any memcg or node). */
int mtd_lru_gen_parse(const char *text, const char *cg_path, struct mtd_lru_view *out);

/* Read path (normally /sys/kernel/debug/lru_gen) and parse it.  0 or -errno. */
int mtd_lru_gen_read(const char *path, const char *cg_path, struct mtd_lru_view *out);

/* Write one command to path: "+ ID NODE SEQ CAN_SWAP FORCE_SCAN" (op '+': arg1 can_swap,
 * arg2 force_scan) or "- ID NODE SEQ SWAPPINESS NR_TO_RECLAIM" (op '-').  The kernel's answer:
 * 0, -EINVAL (a stale SEQ, a memcg that is gone), -EINTR, -errno. */
int mtd_lru_gen_cmd(const char *path, char op, unsigned memcg_id, int node, uint64_t seq,
		    uint64_t arg1, uint64_t arg2);

/* The youngest and oldest generations listed (0 without any). */
uint64_t mtd_lru_vec_max_seq(const struct mtd_lru_vec *v);
uint64_t mtd_lru_vec_min_seq(const struct mtd_lru_vec *v);
/* Anonymous pages in every generation of v. */
uint64_t mtd_lru_vec_anon(const struct mtd_lru_vec *v);

/*
 * A generation's pages were last put there no later than the birth of the next younger one,
 * so a generation whose successor was born min_age_ms or more ago holds pages nothing has
 * put back since.  The kernel evicts only up to max_seq - 2 (MIN_NR_GENS).  The highest seq
 * eviction may name for pages idle that long: true and *seq, or false (none yet).
 */
bool mtd_lru_vec_evictable_seq(const struct mtd_lru_vec *v, uint64_t min_age_ms, uint64_t *seq);
/* Anonymous pages in the generations up to and including seq. */
uint64_t mtd_lru_vec_anon_through(const struct mtd_lru_vec *v, uint64_t seq);
/* Anonymous pages put where they are within the last age_ms: the youngest generation, and
 * every one whose successor was born less than age_ms ago. */
uint64_t mtd_lru_vec_anon_within(const struct mtd_lru_vec *v, uint64_t age_ms);

#endif /* MEMTIDE_HOST_LRU_GEN_H */
