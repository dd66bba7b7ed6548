// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_policy.c - connection policy both ends share: version negotiation, a token-bucket
 * rate limit, the per-peer error budget, and reconnect backoff.
 *
 * All of it is pure arithmetic on caller-supplied time (CLOCK_MONOTONIC ms) and randomness,
 * so tests drive it step by step and the host and the agent cannot disagree on when a peer
 * is cut off.
 *
 * Error budget (a leaky bucket): points_milli rises by 1000 per rejected frame and leaks
 * 1000 per PROTO_BUDGET_LEAK_MS.  Above PROTO_BUDGET_POINTS points the peer is disconnected.
 * A burst of 11 bad frames therefore disconnects; one bad frame every 10 s never does.
 */
#include <string.h>

#include "proto_int.h"

enum proto_status proto_version_negotiate(uint32_t my_min, uint32_t my_max, uint32_t peer_min,
					  uint32_t peer_max, uint32_t *out)
{
	uint32_t lo = my_min > peer_min ? my_min : peer_min;
	uint32_t hi = my_max < peer_max ? my_max : peer_max;

	if (lo > hi || lo == 0)
		return PROTO_E_VERSION;
	*out = hi;
	return PROTO_OK;
}

void proto_rate_init(struct proto_rate *r, double rate_per_s, double burst)
{
	memset(r, 0, sizeof(*r));
	r->rate_per_s = rate_per_s;
	r->burst = burst < 1 ? 1 : burst;
	r->tokens = r->burst;
}

bool proto_rate_take(struct proto_rate *r, uint64_t now_ms)
{
	if (!r->started) {
		r->started = true;
		r->last_ms = now_ms;
	}
	/* a clock that went backwards (it should not: CLOCK_MONOTONIC) adds nothing */
	if (now_ms > r->last_ms) {
		r->tokens += (double)(now_ms - r->last_ms) * r->rate_per_s / 1000.0;
		if (r->tokens > r->burst)
			r->tokens = r->burst;
		r->last_ms = now_ms;
	}
	if (r->tokens < 1.0)
		return false;
	r->tokens -= 1.0;
	return true;
}

void proto_guard_init(struct proto_guard *g)
{
	memset(g, 0, sizeof(*g));
	proto_rate_init(&g->msg_rate, PROTO_BUDGET_MSG_RATE, PROTO_BUDGET_MSG_BURST);
}

static void leak(struct proto_guard *g, uint64_t now_ms)
{
	if (now_ms > g->last_ms) {
		uint64_t drained = (now_ms - g->last_ms) * 1000 / PROTO_BUDGET_LEAK_MS;

		g->points_milli = drained >= g->points_milli ? 0 : g->points_milli - drained;
	}
	if (now_ms > g->last_ms || g->last_ms == 0)
		g->last_ms = now_ms;
}

/* One point; DISCONNECT when over budget. */
static enum proto_verdict charge(struct proto_guard *g, uint64_t now_ms)
{
	leak(g, now_ms);
	g->points_milli += 1000;
	return g->points_milli > (uint64_t)PROTO_BUDGET_POINTS * 1000 ? PROTO_VERDICT_DISCONNECT
								      : PROTO_VERDICT_REJECT;
}

enum proto_verdict proto_guard_frame(struct proto_guard *g, uint64_t now_ms)
{
	if (proto_rate_take(&g->msg_rate, now_ms))
		return PROTO_VERDICT_OK;
	g->nr_dropped++;
	return charge(g, now_ms) == PROTO_VERDICT_DISCONNECT ? PROTO_VERDICT_DISCONNECT
							     : PROTO_VERDICT_DROP;
}

enum proto_verdict proto_guard_error(struct proto_guard *g, enum proto_status s, uint64_t now_ms)
{
	g->nr_errors++;
	if (proto_status_is_fatal(s) || s == PROTO_E_VERSION)
		return PROTO_VERDICT_DISCONNECT;
	return charge(g, now_ms);
}

void proto_backoff_init(struct proto_backoff *b, uint32_t min_ms, uint32_t max_ms)
{
	b->min_ms = min_ms ? min_ms : 1;
	b->max_ms = max_ms < b->min_ms ? b->min_ms : max_ms;
	b->cur_ms = b->min_ms;
}

uint32_t proto_backoff_next(struct proto_backoff *b, uint32_t rand)
{
	uint32_t d = b->cur_ms;
	/* subtract up to 25% jitter, so agents that lost the host together do not return in
	 * lock-step */
	uint32_t jitter = (uint32_t)((uint64_t)(d / 4) * rand / UINT32_MAX);

	b->cur_ms = d > b->max_ms / 2 ? b->max_ms : d * 2;
	return d - jitter;
}

void proto_backoff_reset(struct proto_backoff *b)
{
	b->cur_ms = b->min_ms;
}
