/*
 * steady.h - two rules that keep a steady guest's target steady (issue 13's "stable on real
 * guests"), apart from the controller so that they can be read and tested alone.
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
 * Thread context: one VM loop thread owns a struct mtd_steady; nothing here is shared.
 */
#ifndef MEMTIDE_STEADY_H
#define MEMTIDE_STEADY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller.h"

#define MTD_STEADY_WSS_MAX 64 /* readings kept for the peak: a cold age at 1 s intervals */

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
	/* the working set's recent readings, oldest first (peak) */
	unsigned nr_wss;
	struct {
		uint64_t at_ms, bytes;
	} wss[MTD_STEADY_WSS_MAX];
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

/* The guest answered a reclaim request: freed of asked, with the agent's result name. */
void mtd_steady_reply(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t asked_bytes,
		      uint64_t freed_bytes, const char *result);

/*
 * Was the last request futile, with nothing changed since?  Futile: it freed less than
 * min_change_bytes and less than half of what was asked.  The first check after the answer
 * notes the guest's use and working set; it stops being futile when either has moved by
 * min_change_bytes since, or after hold_max_ms (a guest's swap can drain with neither
 * moving).
 */
bool mtd_steady_futile(struct mtd_steady *s, const struct mtd_ctl_config *c, uint64_t used_bytes,
		       uint64_t wss_bytes, uint64_t now_ms);

/* The highest working set read within the last window_ms, this one included.  Readings
 * are kept at most MTD_STEADY_WSS_MAX; with more in the window the oldest go first. */
uint64_t mtd_steady_peak(struct mtd_steady *s, uint64_t wss_bytes, uint64_t now_ms,
			 uint64_t window_ms);

/* One sentence for `memtidectl vm show` and the log: why the controller holds back, for
 * the reasons above; "" for any other. */
void mtd_steady_why(const struct mtd_steady *s, const struct mtd_ctl_config *c,
		    enum mtd_ctl_reason reason, char *buf, size_t len);

#endif /* MEMTIDE_STEADY_H */
