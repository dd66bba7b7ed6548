// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_hint_guard.c - how much each caller of the hint socket may do (agent.h).
 *
 * The socket is open to every user in the guest (mode 0666), and everything it forwards
 * shares one path to the host.  Unguarded, one user could take it all: the 8 slots by
 * opening 8 idle connections (held forever), and the 5 hints/s by sending as fast as it
 * could - and the growth watch's need hints drew from the same bucket, so a flood could
 * keep the host from hearing that the guest was about to run out.  Now:
 *
 *   slots   a user other than root holds at most AGENT_HINT_USER_CONNS connections and
 *           never the last AGENT_HINT_ROOT_SLOTS; every connection has AGENT_HINT_LINE_MS
 *           to send its line (agent_loop.c closes it after that);
 *   rate    every hint spends a token of the socket's bucket (hint_rate_per_s); a user
 *           other than root also one of its own bucket (hint_user_rate_per_s, burst
 *           AGENT_HINT_USER_BURST), and may not take the socket bucket's last
 *           AGENT_HINT_ROOT_RESERVE tokens.  The growth watch has a bucket of its own
 *           (agent_loop.c), which no caller can spend.
 *
 * Per-user buckets live in AGENT_HINT_PEERS entries; a new user takes a free entry or the
 * one seen longest ago (which then starts full again: reaching that takes 16 uids, which
 * only root can make).
 */
#include "agent.h"

#include <errno.h>
#include <string.h>

void agent_hint_guard_init(struct agent_hint_guard *g, const struct agent_config *c)
{
	memset(g, 0, sizeof(*g));
	proto_rate_init(&g->all, c->hint_rate_per_s, AGENT_HINT_BURST);
	g->user_rate_per_s = c->hint_user_rate_per_s;
	g->max_clients = c->max_hint_clients;
}

int agent_hint_guard_admit(const struct agent_hint_guard *g, uid_t uid, uint32_t open_total,
			   uint32_t open_by_uid)
{
	uint32_t user_slots;

	if (open_total >= g->max_clients)
		return -EBUSY;
	if (uid == 0)
		return 0;
	user_slots = g->max_clients > AGENT_HINT_ROOT_SLOTS ? g->max_clients - AGENT_HINT_ROOT_SLOTS
							    : g->max_clients;
	if (open_total >= user_slots)
		return -EBUSY;
	return open_by_uid >= AGENT_HINT_USER_CONNS ? -EUSERS : 0;
}

static struct agent_hint_peer *peer_of(struct agent_hint_guard *g, uid_t uid, uint64_t now_ms)
{
	struct agent_hint_peer *free_one = NULL, *oldest = NULL;

	for (int i = 0; i < AGENT_HINT_PEERS; i++) {
		struct agent_hint_peer *p = &g->peers[i];

		if (p->used && p->uid == uid) {
			p->seen_ms = now_ms;
			return p;
		}
		if (!p->used && !free_one)
			free_one = p;
		if (p->used && (!oldest || p->seen_ms < oldest->seen_ms))
			oldest = p;
	}
	if (!free_one)
		free_one = oldest;
	free_one->used = true;
	free_one->uid = uid;
	free_one->seen_ms = now_ms;
	proto_rate_init(&free_one->rate, g->user_rate_per_s, AGENT_HINT_USER_BURST);
	return free_one;
}

/* One token of the socket's bucket; a user may not leave it below the root reserve. */
static bool take_all(struct agent_hint_guard *g, bool root, uint64_t now_ms)
{
	if (!proto_rate_take(&g->all, now_ms))
		return false;
	if (!root && g->all.tokens < AGENT_HINT_ROOT_RESERVE) {
		g->all.tokens += 1.0; /* give it back: it was root's */
		return false;
	}
	return true;
}

uint32_t agent_hint_guard_take(struct agent_hint_guard *g, uid_t uid, uint32_t want,
			       uint64_t now_ms)
{
	struct agent_hint_peer *p = uid == 0 ? NULL : peer_of(g, uid, now_ms);
	uint32_t granted = 0;

	while (granted < want) {
		if (p && !proto_rate_take(&p->rate, now_ms))
			break;
		if (!take_all(g, uid == 0, now_ms)) {
			if (p)
				p->rate.tokens += 1.0; /* not spent after all */
			break;
		}
		granted++;
	}
	return granted;
}
