// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stall_budget.c - a VM's stall budget (stall_budget.h).
 */
#include "decide/stall_budget.h"

void mtd_stall_note(struct mtd_stall *s, uint64_t some_total_us, uint64_t now_ms, double budget)
{
	if (!s->primed || some_total_us < s->last_us || now_ms <= s->last_ms) {
		if (!s->primed || some_total_us < s->last_us) {
			s->last_us = some_total_us;
			s->last_ms = now_ms;
			s->primed = true;
		}
		return;
	}
	uint64_t d_us = some_total_us - s->last_us, d_ms = now_ms - s->last_ms;
	s->frac = (double)d_us / ((double)d_ms * 1000.0);
	if (s->frac > s->worst)
		s->worst = s->frac;
	s->total_us += d_us;
	s->last_us = some_total_us;
	s->last_ms = now_ms;
	if (s->frac > budget)
		s->hold_left = MTD_STALL_HOLD_INTERVALS + 1; /* this one, and as many after */
	else if (s->hold_left)
		s->hold_left--;
}

bool mtd_stall_allows(const struct mtd_stall *s)
{
	return s->hold_left == 0;
}

uint64_t mtd_stall_weigh(double stall, double budget, uint64_t pages)
{
	if (budget <= 0 || !(stall > 0))
		return pages;
	double extra = stall / budget;
	if (extra > 4.0)
		extra = 4.0;
	return (uint64_t)((double)pages * (1.0 + extra));
}
