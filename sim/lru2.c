// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lru2.c - the active/inactive two-list LRU of Linux before MGLRU, for anonymous memory
 * (mm/vmscan.c shrink_active_list / shrink_inactive_list, 5.x), as the guest's reclaim.
 *
 * The lru2 policy puts it under a fixed resident limit; the mom policy under the limit its
 * balloon leaves.  Rules kept from Linux:
 *   - a faulted-in page enters the inactive list's head with its accessed bit set (the
 *     fault set the PTE's young bit);
 *   - the inactive tail is scanned: a referenced page is activated (anon pages with a young
 *     PTE always are, page_check_references), an unreferenced one is reclaimed;
 *   - when the inactive list is smaller than the active one (inactive_ratio 1, guests under
 *     1 GiB), the active tail is deactivated in batches of 32: the accessed bit is cleared
 *     and the page moves to the inactive head whatever its bit said (anon is not rotated).
 *   - freed pages leave the LRU; here they wait on a third list, reclaimed first (a balloon
 *     or the host takes free memory before anything else).
 * Data layout: doubly linked lists through prev/next arrays of page indices (NIL = none);
 * lst[] says which list a page is on.  Pages evicted by someone else (free page reporting)
 * stay linked until a scan meets them and unlinks them (they are not resident).
 */
#include <errno.h>
#include <stdlib.h>

#include "sim.h"

#define NIL UINT32_MAX
enum { L_NONE, L_FREE, L_INACTIVE, L_ACTIVE, L_COUNT };

struct sim_lru2 {
	uint64_t ram_pages;
	uint32_t *prev, *next;
	uint8_t *lst; /* L_* per page */
	uint8_t *ref; /* accessed bit, as a scan would test-and-clear it */
	uint32_t head[L_COUNT], tail[L_COUNT];
	uint64_t nr[L_COUNT];
};

static void unlink_pg(struct sim_lru2 *l, uint32_t p)
{
	uint8_t li = l->lst[p];

	if (li == L_NONE)
		return;
	if (l->prev[p] != NIL)
		l->next[l->prev[p]] = l->next[p];
	else
		l->head[li] = l->next[p];
	if (l->next[p] != NIL)
		l->prev[l->next[p]] = l->prev[p];
	else
		l->tail[li] = l->prev[p];
	l->nr[li]--;
	l->lst[p] = L_NONE;
}

/* A page holds guest data in the guest's RAM: resident, and not swapped out by the guest
 * (a swapped page's frame waits on the host for free page reporting, holding nothing). */
static bool in_guest_ram(const struct sim_ctx *ctx, uint32_t p)
{
	return (ctx->pg[p] & SIM_PG_RESIDENT) && !(ctx->pg[p] & SIM_PG_GSWAP);
}

static void push_head(struct sim_lru2 *l, uint32_t p, uint8_t li)
{
	unlink_pg(l, p);
	l->prev[p] = NIL;
	l->next[p] = l->head[li];
	if (l->head[li] != NIL)
		l->prev[l->head[li]] = p;
	else
		l->tail[li] = p;
	l->head[li] = p;
	l->lst[p] = li;
	l->nr[li]++;
}

int sim_lru2_new(uint64_t ram_pages, struct sim_lru2 **out)
{
	struct sim_lru2 *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->ram_pages = ram_pages;
	l->prev = malloc(ram_pages * sizeof(uint32_t));
	l->next = malloc(ram_pages * sizeof(uint32_t));
	l->lst = calloc(ram_pages, 1);
	l->ref = calloc(ram_pages, 1);
	if (!l->prev || !l->next || !l->lst || !l->ref) {
		sim_lru2_free(l);
		return -ENOMEM;
	}
	for (int i = 0; i < L_COUNT; i++)
		l->head[i] = l->tail[i] = NIL;
	/* All of RAM starts resident and free. */
	for (uint64_t p = 0; p < ram_pages; p++)
		push_head(l, (uint32_t)p, L_FREE);
	*out = l;
	return 0;
}

void sim_lru2_free(struct sim_lru2 *l)
{
	if (!l)
		return;
	free(l->prev);
	free(l->next);
	free(l->lst);
	free(l->ref);
	free(l);
}

void sim_lru2_epoch(struct sim_lru2 *l, const struct sim_ctx *ctx, size_t e)
{
	const struct sim_epoch *ep = &ctx->t->epochs[e];

	/* Faulted pages (new, refaulted, or reused after a free) enter the inactive head. */
	for (size_t i = 0; i < ctx->nr_faulted; i++)
		push_head(l, ctx->faulted[i], L_INACTIVE);
	for (uint32_t i = 0; i < ep->nr_acc; i++) {
		uint32_t p = SIM_ACC_PAGE(ep->acc[i]);
		if (l->lst[p] == L_FREE || l->lst[p] == L_NONE)
			push_head(l, p, L_INACTIVE);
		l->ref[p] = 1;
	}
	for (uint32_t i = 0; i < ep->nr_free; i++) {
		push_head(l, ep->freed[i], L_FREE);
		l->ref[ep->freed[i]] = 0;
	}
}

/* One step of reclaim from the inactive tail, refilling it from the active list when it
 * runs low: returns the page reclaimed (unlinked), NIL when none was this step (a page
 * moved, or one no longer in the guest's RAM unlinked), or NIL with *empty set when the
 * lists are empty. */
static uint32_t scan_one(struct sim_lru2 *l, const struct sim_ctx *ctx, bool *empty)
{
	uint32_t p;

	*empty = false;
	if (l->nr[L_INACTIVE] < l->nr[L_ACTIVE]) {
		for (int i = 0; i < 32 && l->tail[L_ACTIVE] != NIL; i++) {
			p = l->tail[L_ACTIVE];
			l->ref[p] = 0;
			if (in_guest_ram(ctx, p))
				push_head(l, p, L_INACTIVE);
			else
				unlink_pg(l, p);
		}
	}
	p = l->tail[L_INACTIVE];
	if (p == NIL) {
		*empty = true;
		return NIL;
	}
	if (!in_guest_ram(ctx, p)) {
		unlink_pg(l, p);
	} else if (l->ref[p]) {
		l->ref[p] = 0;
		push_head(l, p, L_ACTIVE);
	} else {
		unlink_pg(l, p);
		return p;
	}
	return NIL;
}

void sim_lru2_shrink(struct sim_lru2 *l, struct sim_ctx *ctx, uint64_t target_pages)
{
	/* Every page is scanned at most a few times per call: bound the loop by that. */
	uint64_t budget = 4 * l->ram_pages + 64;
	bool empty = false;

	while (ctx->resident_pages > target_pages && budget-- && !empty) {
		uint32_t p;
		if (l->tail[L_FREE] != NIL) {
			p = l->tail[L_FREE];
			unlink_pg(l, p);
			sim_evict(ctx, p);
			continue;
		}
		p = scan_one(l, ctx, &empty);
		if (p != NIL)
			sim_evict(ctx, p);
	}
}

uint64_t sim_lru2_swapout(struct sim_lru2 *l, struct sim_ctx *ctx, uint64_t nr_pages)
{
	uint64_t budget = 4 * l->ram_pages + 64, done = 0;
	bool empty = false;

	while (done < nr_pages && budget-- && !empty) {
		uint32_t p = scan_one(l, ctx, &empty);
		if (p == NIL)
			continue;
		done += (uint64_t)sim_guest_swapout(ctx, p);
		/* Its frame is free in the guest now (or held nothing live): a balloon takes it
		 * first, as it takes any free page. */
		push_head(l, p, L_FREE);
	}
	return done;
}
