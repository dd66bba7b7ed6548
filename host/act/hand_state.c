// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * hand_state.c - the state a host-side eviction hand publishes, and its log (hand_state.h);
 * the states' names (mtd.h, mtd_pageout_state_name).
 */
#include "act/hand_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

const char *mtd_pageout_state_name(enum mtd_pageout_state s)
{
	switch (s) {
	case MTD_PAGEOUT_OFF:
		return "off";
	case MTD_PAGEOUT_ACTIVE:
		return "active";
	case MTD_PAGEOUT_PAUSED:
		return "paused";
	case MTD_PAGEOUT_REFUSED:
		return "refused";
	}
	return "?";
}

void mtd_hand_state_set(struct mtd_hand_state *hs, const char *vm, const char *hand,
			enum mtd_pageout_state s, const char *fmt, ...)
{
	va_list ap;

	hs->state = s;
	hs->why[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(hs->why, sizeof(hs->why), fmt, ap);
		va_end(ap);
	}
	if (s == hs->logged_state && strcmp(hs->why, hs->logged_why) == 0)
		return;
	/* A refusal, a full swap or an incompressible pool is news an operator needs; the rest
	 * is routine. */
	enum mtd_log_level lvl = s == MTD_PAGEOUT_REFUSED ? MTD_LOG_WARNING : MTD_LOG_NOTICE;
	if (s == MTD_PAGEOUT_PAUSED && !strstr(hs->why, "swap") && !strstr(hs->why, "incompress"))
		lvl = MTD_LOG_INFO;
	mtd_log(lvl, "%s: %s %s%s%s", vm, hand, mtd_pageout_state_name(s), hs->why[0] ? ": " : "",
		hs->why);
	hs->logged_state = s;
	snprintf(hs->logged_why, sizeof(hs->logged_why), "%s", hs->why);
}
