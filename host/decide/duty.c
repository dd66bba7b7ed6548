// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * duty.c - host-side reclaim's duty cycle (duty.h).
 */
#include "decide/duty.h"

void mtd_duty_earn(struct mtd_duty *d, uint64_t now_ms, double duty, uint64_t cap_ms)
{
	if (d->primed && now_ms > d->last_ms)
		d->credit_ms += (double)(now_ms - d->last_ms) * duty;
	else if (!d->primed)
		d->credit_ms = (double)cap_ms; /* the first step may go at once */
	if (d->credit_ms > (double)cap_ms)
		d->credit_ms = (double)cap_ms;
	d->last_ms = now_ms;
	d->primed = true;
}

bool mtd_duty_may(const struct mtd_duty *d)
{
	return d->credit_ms > 0;
}

void mtd_duty_spend(struct mtd_duty *d, uint64_t ms)
{
	d->credit_ms -= (double)ms;
}
