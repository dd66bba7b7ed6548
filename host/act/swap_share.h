/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * swap_share.h - the host's swap as one budget for every VM's host-side eviction.
 *
 * Each VM loop sends its cold pages to the same host swap.  Were each to take the room past
 * the reserve on its own, loops in the same interval would all see the same room and
 * together write up to N x max_step past the reserve.  The share counts what it granted and
 * what has not yet gone out: a loop takes a grant before its batch (the room read now, past
 * the reserve, less the others' outstanding grants) and gives it back once its pages went
 * out, when the swap figures show them.
 *
 * The daemon keeps one (daemon/host.c); both hands take from it (pageout_hand.h,
 * mtd_hand_env.swap_take; memcg_hand.h, mtd_memcg_hand_env.swap_take), each through a
 * struct mtd_swap_taker.  The share: any thread; a taker: its hand's loop.
 */
#ifndef MEMTIDE_HOST_SWAP_SHARE_H
#define MEMTIDE_HOST_SWAP_SHARE_H

#include <pthread.h>
#include <stdint.h>

#include "act/swap_stat.h"

struct mtd_swap_share {
	pthread_mutex_t lock;
	uint64_t outstanding_bytes; /* granted, not yet given back */
	const char *proc_root;      /* NULL: /proc (tests point these elsewhere) */
	const char *sys_root;       /* NULL: /sys */
};

void mtd_swap_share_init(struct mtd_swap_share *s, const char *proc_root, const char *sys_root);
void mtd_swap_share_destroy(struct mtd_swap_share *s);
/* A grant of at most want_bytes past reserve_bytes (swap_stat.h, mtd_swap_grant_from), the
 * swap's figures in out->sw.  ctx: the share.  0, or -errno when the figures cannot be read
 * (nothing granted). */
int mtd_swap_share_take(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
			struct mtd_swap_grant *out);
/* Give a grant back (all of it, whatever of it was used: the swap figures now show what
 * went out).  ctx: the share. */
void mtd_swap_share_done(void *ctx, uint64_t granted_bytes);

/* One hand's side of the budget: the share it takes from (take, done, ctx: as
 * mtd_swap_share_take and mtd_swap_share_done on a share; take NULL: the hand reads the swap
 * itself from proc_root and sys_root, as the only writer) and the grant it holds now. */
struct mtd_swap_taker {
	int (*take)(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
		    struct mtd_swap_grant *out);
	void (*done)(void *ctx, uint64_t granted_bytes);
	void *ctx;
	const char *proc_root; /* NULL: /proc */
	const char *sys_root;  /* NULL: /sys */
	uint64_t granted;      /* held now: given back by mtd_swap_taker_give_back */
};
/* A grant of at most want_bytes past reserve_bytes, held in t->granted (out: the grant and
 * the swap's figures).  0, or -errno when the figures cannot be read (nothing held). */
int mtd_swap_taker_take(struct mtd_swap_taker *t, uint64_t want_bytes, uint64_t reserve_bytes,
			struct mtd_swap_grant *out);
/* Give back what t holds, once its pages went out (or none will). */
void mtd_swap_taker_give_back(struct mtd_swap_taker *t);

#endif /* MEMTIDE_HOST_SWAP_SHARE_H */
