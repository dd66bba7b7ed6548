// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * aging_sight.c - the verdict on the host kernel's aging of a KVM guest (aging_sight.h).
 */
#include "decide/aging_sight.h"

enum mtd_aging_sight mtd_aging_verdict(uint64_t checked_pages, uint64_t kept_pages)
{
	if (checked_pages < MTD_AGING_TEST_PAGES)
		return MTD_AGING_UNTESTED;
	return kept_pages * 4 >= checked_pages ? MTD_AGING_BLIND : MTD_AGING_SEES;
}

const char *mtd_aging_sight_name(enum mtd_aging_sight s)
{
	switch (s) {
	case MTD_AGING_BLIND:
		return "blind";
	case MTD_AGING_SEES:
		return "sees";
	default:
		return "untested";
	}
}
