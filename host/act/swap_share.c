// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * swap_share.c - the host's swap as one budget for every VM's host-side eviction
 * (swap_share.h): grants counted under a lock, the room read under it so that two loops
 * never both see the same room; and a hand's side of it, the taker.
 */
#include "act/swap_share.h"

void mtd_swap_share_init(struct mtd_swap_share *s, const char *proc_root, const char *sys_root)
{
	pthread_mutex_init(&s->lock, NULL);
	s->outstanding_bytes = 0;
	s->proc_root = proc_root;
	s->sys_root = sys_root;
}

void mtd_swap_share_destroy(struct mtd_swap_share *s)
{
	pthread_mutex_destroy(&s->lock);
}

int mtd_swap_share_take(void *ctx, uint64_t want_bytes, uint64_t reserve_bytes,
			struct mtd_swap_grant *out)
{
	struct mtd_swap_share *s = ctx;
	int rc;

	*out = (struct mtd_swap_grant){.binding = -1};
	pthread_mutex_lock(&s->lock);
	rc = mtd_swap_read(s->proc_root, s->sys_root, &out->sw);
	if (rc == 0) {
		mtd_swap_grant_from(out, reserve_bytes, s->outstanding_bytes, want_bytes);
		s->outstanding_bytes += out->bytes;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void mtd_swap_share_done(void *ctx, uint64_t granted_bytes)
{
	struct mtd_swap_share *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->outstanding_bytes -=
	    granted_bytes < s->outstanding_bytes ? granted_bytes : s->outstanding_bytes;
	pthread_mutex_unlock(&s->lock);
}

int mtd_swap_taker_take(struct mtd_swap_taker *t, uint64_t want_bytes, uint64_t reserve_bytes,
			struct mtd_swap_grant *out)
{
	int rc;

	*out = (struct mtd_swap_grant){.binding = -1};
	if (t->take) {
		rc = t->take(t->ctx, want_bytes, reserve_bytes, out);
	} else {
		rc = mtd_swap_read(t->proc_root, t->sys_root, &out->sw);
		if (rc == 0)
			mtd_swap_grant_from(out, reserve_bytes, 0, want_bytes);
	}
	t->granted = rc == 0 ? out->bytes : 0;
	return rc;
}

void mtd_swap_taker_give_back(struct mtd_swap_taker *t)
{
	if (t->done && t->granted)
		t->done(t->ctx, t->granted);
	t->granted = 0;
}
