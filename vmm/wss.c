// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wss.c - the working-set estimate (Part 7 of libvmm).
 *
 * "How much of this guest did it touch in the last 5 s, 30 s, 2 min, 10 min?"  The
 * generations already hold the answer: each generation has its birth_ms, the start of the
 * aging round that opened it, and holds the pages last seen used by that round or by an
 * older round merged into it (generations.c, "The layout").  So at now_ms its pages have
 * been idle since now_ms - birth or longer.  The estimate for idle age A is the resident
 * pages of every generation with
 *
 *     now_ms - birth <= A
 *
 * in bytes: the memory the guest used within A.  It errs on the side of more: a
 * generation born within A may hold pages used before A began, never the other way round,
 * so a balloon sized from it does not squeeze the guest.  Its resolution is a generation's
 * width: one aging interval for the young ones, wider for older ones (generations.c, "The
 * layout": a page idle for t reads at least t / 2.2); an age beyond the oldest
 * generation's birth counts every resident page.
 *
 * Cost: O(n * nr_gens).
 */
#include <errno.h>

#include "guest_priv.h"

/* ======================================================================================
 * Part 7: working-set estimate
 * ====================================================================================== */

int vmm_wss(const struct vmm_guest *g, uint64_t now_ms, const uint64_t *ages_ms, size_t n,
	    uint64_t *bytes_out)
{
	if (!g || (n && (!ages_ms || !bytes_out)))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		uint64_t pages = 0;
		/* Youngest first: stop at the first generation older than the age. */
		for (unsigned k = g->nr_live; k-- > 0;) {
			const struct gen_slot *gs = &g->gen[g->order[k]];
			if (now_ms > gs->birth_ms && now_ms - gs->birth_ms > ages_ms[i])
				break;
			pages += gs->pages;
		}
		bytes_out[i] = pages << VMM_PAGE_SHIFT;
	}
	return 0;
}
