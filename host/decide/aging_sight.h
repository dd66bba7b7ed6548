/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * aging_sight.h - does the host kernel's MGLRU aging see a KVM guest's accesses?  Tested on
 * the VM itself, never assumed.
 *
 * The kernel's aging walks the process's page tables and moves pages whose accessed bit is
 * set to the youngest generation.  A KVM guest with nested paging (EPT, NPT) sets the
 * accessed bits of KVM's own tables, not the host's page tables, after its first fault; on
 * Debian 12's 6.1 the aging walk does not ask KVM (no MMU-notifier call), so every guest page
 * stays in the generation it was put in, hot or cold (measured on the stand: 812 MiB through
 * four agings).  Eviction does ask KVM (the reverse-map walk clears young through the MMU
 * notifier), so it keeps what the guest touched and moves it to the youngest generation.
 *
 * The test: eviction right after an aging, over generations that aging has just walked.  If
 * aging saw the guest, whatever the guest used is already in the new youngest generation and
 * the check finds (almost) nothing referenced in the old ones; if it is blind, the check finds
 * the guest's working set there.  One such check over at least MTD_AGING_TEST_PAGES decides:
 * blind when at least a quarter of what it looked at was kept.
 *
 * What changes with the answer: what the working set is called and how it is read
 * (memcg_hand.h).  With blind aging a generation's age says when eviction last found the page
 * used, not when the guest last touched it, and the guest's hot pages come up for a check
 * again every cold age.
 *
 * Pure.
 */
#ifndef MEMTIDE_HOST_AGING_SIGHT_H
#define MEMTIDE_HOST_AGING_SIGHT_H

#include <stdint.h>

#define MTD_AGING_TEST_PAGES 4096 /* 16 MiB looked at by one check */

enum mtd_aging_sight {
	MTD_AGING_UNTESTED = 0,
	MTD_AGING_BLIND, /* the aging walk does not see the guest's accesses */
	MTD_AGING_SEES,
};

/* The verdict of one check right after an aging: checked pages (kept + taken), of which kept
 * were found referenced.  MTD_AGING_UNTESTED when the check looked at too little. */
enum mtd_aging_sight mtd_aging_verdict(uint64_t checked_pages, uint64_t kept_pages);

const char *mtd_aging_sight_name(enum mtd_aging_sight s);

#endif /* MEMTIDE_HOST_AGING_SIGHT_H */
