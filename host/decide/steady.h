/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * steady.h - the rules that keep a steady guest's target steady (a real guest's target must
 * not climb and fall while its use does not), apart from the controller so that they can be
 * read and tested alone.
 *
 * Seen on a real guest running a key-value server under memtided (1.5 GiB, 600 MiB of
 * values, the first-written ones read most):
 *   - reclaim began while the server was still loading, and swapped out the values written
 *     first, which were the hot ones;
 *   - with the guest's swap full or absent, memtided asked 11-17 times in a row and was
 *     answered "freed 0 of N MiB" each time, the guest scanning its memory for nothing.
 * So the controller takes no step while the guest's use is still growing fast (growing),
 * and does not ask again after a request the guest could not meet until something has
 * changed (futile).  Neither ever stops memory going back to the guest: both only hold
 * back a step down (controller.c, step 9).
 *
 * A third rule is about the estimate itself (peak).  Page-level bits from the host are
 * noisy: DAMON marks a whole region young when the one page it sampled there was used, so
 * on scenario 9 (a 150 MiB hot set scattered through 1 GiB) the working set read 160-336
 * MiB from one 5 s round to the next, and every low reading took a step the next high one
 * gave back ("grow").  The controller is given the highest reading of the last cold age
 * instead: a low reading has to last a cold age before memory is taken on its strength,
 * and growth is seen at once.
 *
 * And a fourth about the guest's own reclaim (echo).  To swap a page out the guest reads it
 * (zram compresses it, a disk write DMAs it), and host-side bits take the read for a use:
 * every page a reclaim request frees turns young just as it leaves the working set.  Those
 * pages sit in the generations born while the guest reclaimed (from the request until one
 * interval after the answer: the round after it still holds the last reads), and nothing
 * touches them again, so once younger generations exist those generations hold little
 * else, and they are left out of the page-level estimate for as long as they are within
 * the cold age.  While the youngest generation is itself one of them, it holds the hot set
 * and the reads together: that reading is not taken, and the peak of the earlier ones
 * stands.  Seen on scenario 9 with DAMON: after a 128 MiB reclaim the youngest generation
 * held 462 MiB and the target climbed 534 -> 678 MiB.
 *
 * Thread context: one VM loop thread owns a struct mtd_steady; nothing here is shared.
 */
#ifndef MEMTIDE_STEADY_H
#define MEMTIDE_STEADY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide/controller.h"
#include "proto.h"

#define MTD_STEADY_WSS_MAX  64 /* readings kept for the peak: a cold age at 1 s intervals */
#define MTD_STEADY_RECLAIMS 8  /* reclaim windows kept for the echo */
/* A reply that ran to its deadline having freed this much was slow, not futile: one of the
 * agent's smallest memory.reclaim chunks (a guest that frees even that in a deadline is
 * making progress; one scanning for nothing frees pages, not MiB) */
#define MTD_STEADY_SLOW_MIN ((uint64_t)1 << 20)

struct vmm_guest_stats;

struct mtd_steady {
	/* growth of the guest's use (MemTotal - MemFree), bytes per second, averaged */
	bool have_used;
	uint64_t last_used_bytes, last_used_ms;
	double growth_bps;
	/* the last reclaim answer that freed (almost) nothing, and what things were then */
	bool futile;
	bool futile_fresh; /* answered since the last check: the baseline is not taken yet */
	uint64_t futile_used_bytes, futile_wss_bytes, futile_since_ms;
	uint64_t futile_asked_bytes, futile_freed_bytes;
	char futile_result[24];
	bool slow;             /* the last answer was slow (mtd_steady_reply) */
	uint64_t slow_replies; /* slow answers in a row */
	/* the working set's recent readings, oldest first (peak) */
	unsigned nr_wss;
	struct {
		uint64_t at_ms, bytes;
	} wss[MTD_STEADY_WSS_MAX];
	/* when the guest reclaimed for us, oldest first (echo) */
	unsigned nr_reclaims;
	struct {
		uint64_t from_ms, to_ms;
	} reclaims[MTD_STEADY_RECLAIMS];
};

/*
 * Is the guest's use growing fast?  used_known false (no agent figures this interval)
 * forgets the history: growth is measured only between two known readings.  Growth is the
 * rise of `used` per second, averaged over about three intervals; falls count as none
 * (reclaim and frees are not the question).  Fast is more than four min_change_bytes an
 * interval (3.2 MiB/s at the defaults): a server loading its data grows by tens of MiB a
 * second, a steady guest's page cache and logs by far less.
 */
bool mtd_steady_growing(struct mtd_steady *s, const struct mtd_ctl_config *c, bool used_known,
			uint64_t used_bytes, uint64_t now_ms);

/*
 * The guest answered a reclaim request: freed of asked, with the agent's result, the time it
 * took (elapsed_ms) and the deadline memtided gave it (deadline_ms).  A partial answer that
 * ran to its deadline and freed at least MTD_STEADY_SLOW_MIN is slow, not futile: the guest
 * was still freeing memory when its time ran out, and the next request finds more.  Seen on
 * a KVM host whose guest reclaimed at 1-10 MiB/s (each swapped-out page a TLB-shootdown IPI
 * to the other vCPU, 0.6-2 ms each in a nested guest): 2 s requests for 128 MiB freed 3-35
 * MiB, the small ones were judged futile, and nothing more was asked for up to hold_max
 * (scenario 2 got 36 MiB back in 60 s instead of 300).  A guest scanning for nothing (swap
 * full, everything hot) frees next to nothing in the whole deadline: still futile.
 */
void mtd_steady_reply(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t asked_bytes,
		      uint64_t freed_bytes, enum proto_reclaim_result result, uint32_t elapsed_ms,
		      uint32_t deadline_ms);

/*
 * Was the last request futile, with nothing changed since?  Futile: it freed less than
 * min_change_bytes and less than half of what was asked.  The first check after the answer
 * notes the guest's use and working set; it stops being futile when either has moved by
 * min_change_bytes since, or after hold_max_ms (a guest's swap can drain with neither
 * moving).
 */
bool mtd_steady_futile(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t used_bytes,
		       uint64_t wss_bytes, uint64_t now_ms);

/* The highest working set read within the last window_ms, this one included when record
 * (else the earlier ones only, or this one when there are none).  Readings are kept at most
 * MTD_STEADY_WSS_MAX; with more in the window the oldest go first. */
uint64_t mtd_steady_peak(struct mtd_steady *s, uint64_t wss_bytes, uint64_t now_ms,
			 uint64_t window_ms, bool record);

/*
 * The bound on a page-level estimate: never more than the guest RAM the host holds
 * (host_rss_bytes, 0 unknown; a page used since free page reporting or the balloon took it
 * would have faulted back in) nor than the guest says it uses (used_known: MemTotal -
 * MemFree; its free pages are no working set, though host bits see every one its allocator
 * touched, and after a reclaim it hands out pages from a large free pool).  Both only lower
 * the estimate: a guest that under-reports lowers its own.
 */
uint64_t mtd_steady_bound(uint64_t wss_bytes, uint64_t host_rss_bytes, bool used_known,
			  uint64_t used_bytes);

/* A reclaim request with deadline_ms went to the guest at now_ms: its window lasts until
 * one interval_ms past the deadline, or past the answer (mtd_steady_reclaim_answered:
 * sooner or later, whichever it is). */
void mtd_steady_reclaim_sent(struct mtd_steady *s, uint64_t now_ms, uint64_t deadline_ms,
			     uint64_t interval_ms);
void mtd_steady_reclaim_answered(struct mtd_steady *s, uint64_t now_ms, uint64_t interval_ms);
/* t_ms (a round's time, a generation's birth) lies in a reclaim window.  For a round: the
 * pages host-side bits saw used since the last one may be the guest's reads on the way to
 * swap.  Their reuses are not fed to the refault
 * controller's reuse floor (vmm_reclaim_skip_reuse): after a 128 MiB request every freed
 * page read as a reuse past the longest age, and the controller held for the rest of the
 * run (scenario 2 with the ept source: 86 MiB back in 60 s, against 398 without the hold). */
bool mtd_steady_in_reclaim(const struct mtd_steady *s, uint64_t t_ms);
/*
 * The echo in a page-level estimate at cold_age_ms: the bytes of the generations born
 * within it, and within a reclaim window, other than the youngest.  *youngest: the youngest
 * generation was born within one (its reading holds the reads: not to be recorded).
 * Windows older than any generation within the cold age are forgotten.
 */
uint64_t mtd_steady_echo(struct mtd_steady *s, const struct vmm_guest_stats *gs, uint64_t now_ms,
			 uint64_t cold_age_ms, bool *youngest);

/* One sentence for `memtidectl vm show` and the log: why the controller holds back, for
 * the reasons above; "" for any other. */
void mtd_steady_why(const struct mtd_steady *s, const struct mtd_ctl_config *c,
		    enum mtd_ctl_reason reason, char *buf, size_t len);

#endif /* MEMTIDE_STEADY_H */
