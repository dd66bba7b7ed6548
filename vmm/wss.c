// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wss.c - the working-set estimate (Part 7 of libvmm).
 *
 * "How much of this guest did it touch in the last 5 s, 30 s, 2 min, 10 min?"  The
 * generations already hold the answer: generation seq was born at gen_birth_ms[seq], the
 * start of the aging round that found its pages used.  A page in generation seq was last
 * seen accessed by that round, so at now_ms it has been idle for at most
 * now_ms - birth(seq) (plus the interval before the round, which we cannot resolve).
 * The estimate for idle age A is the resident pages of every generation with
 *
 *     now_ms - birth(seq) <= A
 *
 * in bytes: the memory the guest used within A, give or take one aging interval.  It errs
 * on the side of more: a generation born within A may hold pages used just before A
 * began, never the other way round, so a balloon sized from it does not squeeze the
 * guest.  Its resolution is the aging interval, and its reach nr_gens - 1 intervals: an
 * age beyond the oldest generation's birth counts every resident page.
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
		for (uint64_t seq = g->max_seq + 1; seq-- > g->min_seq;) {
			uint64_t birth = g->gen_birth_ms[SLOT(seq)];
			if (now_ms > birth && now_ms - birth > ages_ms[i])
				break;
			pages += g->gen_pages[SLOT(seq)];
		}
		bytes_out[i] = pages << VMM_PAGE_SHIFT;
	}
	return 0;
}
