// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * release_pace.c - the pace of memtidectl release across the host's released VMs
 * (release_pace.h has the rule and why).
 *
 * Why the bound looks at actual sizes: a balloon may lag its target by seconds (a busy TCG
 * guest, a guest that frees slowly).  Stepping each target up by the rate from the last
 * target lets the targets run ahead of the balloons, and when a balloon catches up it gives
 * several seconds' worth at once: 296 MiB in one second against 128 MiB/s was measured that
 * way, and 428 MiB within a settle window that had 300 MiB of room.  Counting from what each
 * balloon really is bounds what it can give, however late.
 */
#include "decide/release_pace.h"

#include <string.h>

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static bool live(const struct mtd_release_pace_vm *e, uint64_t now_ms)
{
	return e->key && now_ms >= e->step_ms && now_ms - e->step_ms <= RELEASE_PACE_EXPIRE_MS;
}

/* key's entry: its own while it is live, else a fresh one (a free or a lapsed entry);
 * NULL when every entry is taken by a live VM. */
static struct mtd_release_pace_vm *entry(struct mtd_release_budget *b, uint64_t key,
					 uint64_t now_ms)
{
	struct mtd_release_pace_vm *spare = NULL;

	for (unsigned i = 0; i < MTD_RELEASE_PACE_VMS; i++) {
		struct mtd_release_pace_vm *e = &b->vm[i];
		if (e->key == key && live(e, now_ms))
			return e;
		if (!spare && !live(e, now_ms))
			spare = e;
	}
	if (spare) {
		memset(spare, 0, sizeof(*spare));
		spare->key = key;
	}
	return spare;
}

/* The buckets' span for the settle window in force (a changed window starts them over). */
static uint64_t bucket_width(const struct mtd_arbiter_config *cfg, struct mtd_release_budget *b)
{
	uint64_t w = (cfg->settle_ms + MTD_RELEASE_PACE_BUCKETS - 1) / MTD_RELEASE_PACE_BUCKETS;

	if (w < 100)
		w = 100;
	if (b->width_ms != w) {
		b->width_ms = w;
		memset(b->gave_bytes, 0, sizeof(b->gave_bytes));
		memset(b->gave_slot, 0, sizeof(b->gave_slot));
	}
	return w;
}

static void record_gave(struct mtd_release_budget *b, uint64_t width, uint64_t now_ms,
			uint64_t bytes)
{
	uint64_t slot = now_ms / width;
	unsigned i = (unsigned)(slot % MTD_RELEASE_PACE_BUCKETS);

	if (b->gave_slot[i] != slot) {
		b->gave_slot[i] = slot;
		b->gave_bytes[i] = 0;
	}
	b->gave_bytes[i] = add_sat(b->gave_bytes[i], bytes);
}

/* What the balloons gave within the last settle_ms: every bucket that reaches into it
 * (a bucket partly older counts whole: more, not less). */
static uint64_t gave_recently(const struct mtd_arbiter_config *cfg,
			      const struct mtd_release_budget *b, uint64_t width, uint64_t now_ms)
{
	uint64_t from = sub0(now_ms, cfg->settle_ms) / width, to = now_ms / width, sum = 0;

	for (unsigned i = 0; i < MTD_RELEASE_PACE_BUCKETS; i++)
		if (b->gave_bytes[i] && b->gave_slot[i] >= from && b->gave_slot[i] <= to)
			sum = add_sat(sum, b->gave_bytes[i]);
	return sum;
}

/* Note the VM's actual size now (at most one sample per 100 ms: keeping the older one of
 * two close samples looks further back, never less far) and return its size a second ago:
 * the newest sample at least 1000 ms old, else the oldest (taken when its release began). */
static uint64_t actual_a_second_ago(struct mtd_release_pace_vm *e, uint64_t now_ms, uint64_t actual)
{
	unsigned n = e->samples;

	if (!n || now_ms >= e->at_ms[n - 1] + 100) {
		if (n == MTD_RELEASE_PACE_SAMPLES) {
			memmove(e->at_ms, e->at_ms + 1, (n - 1) * sizeof(e->at_ms[0]));
			memmove(e->actual, e->actual + 1, (n - 1) * sizeof(e->actual[0]));
			n--;
		}
		e->at_ms[n] = now_ms;
		e->actual[n] = actual;
		e->samples = ++n;
	}
	uint64_t ref = e->actual[0];
	for (unsigned i = 0; i < n && e->at_ms[i] + 1000 <= now_ms; i++)
		ref = e->actual[i];
	/* a balloon that shrank since (it was still inflating when released) gave nothing */
	return ref < actual ? ref : actual;
}

uint64_t mtd_release_pace_step(const struct mtd_arbiter_config *cfg, struct mtd_release_budget *b,
			       uint64_t key, uint64_t now_ms, uint64_t mem_total_bytes,
			       uint64_t mem_available_bytes, uint64_t actual_bytes,
			       uint64_t target_bytes, uint64_t ceiling_bytes, bool *host_short)
{
	uint64_t low, high, have = actual_bytes > target_bytes ? actual_bytes : target_bytes;
	uint64_t width = bucket_width(cfg, b);
	struct mtd_release_pace_vm *e;

	*host_short = false;
	mtd_arbiter_marks(cfg, mem_total_bytes, &low, &high);
	e = key ? entry(b, key, now_ms) : NULL;
	if (!e)
		return have; /* every entry taken: nothing more this step */
	if (e->samples && actual_bytes > e->last_actual)
		record_gave(b, width, now_ms, actual_bytes - e->last_actual);
	uint64_t ref = actual_a_second_ago(e, now_ms, actual_bytes);

	/* What the other released VMs may still give: in a second, and at all. */
	uint64_t others_charge = 0, others_owed = 0;
	for (unsigned i = 0; i < MTD_RELEASE_PACE_VMS; i++) {
		const struct mtd_release_pace_vm *o = &b->vm[i];
		if (o == e || !live(o, now_ms))
			continue;
		others_charge = add_sat(others_charge, o->charge_bytes);
		others_owed = add_sat(others_owed, o->owed_bytes);
	}
	uint64_t room =
	    sub0(mem_available_bytes,
		 add_sat(add_sat(low, gave_recently(cfg, b, width, now_ms)), others_owed));
	*host_short = room == 0;

	uint64_t upto = add_sat(ref, sub0(cfg->release_rate_bytes_per_s, others_charge));
	if (upto > add_sat(actual_bytes, room))
		upto = add_sat(actual_bytes, room);
	if (upto > ceiling_bytes)
		upto = ceiling_bytes;
	if (upto < have)
		upto = have; /* given is given: a released VM is never inflated */
	e->step_ms = now_ms;
	e->charge_bytes = sub0(upto, ref);
	e->owed_bytes = sub0(upto, actual_bytes);
	e->last_actual = actual_bytes;
	return upto;
}
