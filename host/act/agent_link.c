// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_link.c - host side of the agent protocol for one VM (see agent_link.h).
 *
 * States: DOWN (waiting for the backoff deadline) -> connect() -> HELLO_WAIT (our hello and
 * config queued, waiting for the agent's hello) -> READY.  Any stream error, EOF, write
 * failure or error-budget verdict goes back to DOWN with the next backoff delay (500 ms
 * doubling to 30 s, jittered); a handshake that completes resets the backoff.
 *
 * One handler per message type, dispatched by one switch; the frame envelope is checked by
 * proto_reader (length bound) and proto_decode (strict validator) before any handler runs;
 * handlers only copy validated structs into the link.  Messages the host never expects
 * (reclaim, config from the agent) are rejected with PROTO_E_STATE and cost budget points.
 * An agent's hello on a ready link is a restarted agent (virtio-serial: the stream stays
 * open): READY -> HELLO_WAIT with our hello and config sent again -> READY.
 */
#include "act/agent_link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "act/agent_bounds.h"
#include "act/agent_caps.h"
#include "base/log.h"

#define BACKOFF_MIN_MS    500
#define BACKOFF_MAX_MS    30000
#define READS_PER_SERVICE 16 /* bound one service call: at most 16 reads of <= 64 KiB */
#define RTT_SAMPLES       256
#define PING_LOST_MS      10000 /* a ping unanswered this long is lost, the next may go */
#define PING_WAIT_MS      50    /* the VM loop holds its tick this long for a pong */
#define REPLY_LATE_MS     5000  /* a reclaim reply this long past its deadline is late */

enum link_state { LINK_DOWN, LINK_HELLO_WAIT, LINK_READY };

struct mtd_agent_link {
	char path[108]; /* the virtio-serial socket; or the name logs use when there is none */
	uint64_t interval_ms;
	enum link_state state;
	int fd;
	struct proto_reader rd;
	struct proto_writer wr;
	struct proto_guard guard;
	struct proto_backoff backoff;
	uint64_t next_connect_ms;
	uint32_t next_id;
	uint32_t version;
	bool logged_down;    /* one NOTICE per outage, not one per retry */
	bool has_socket;     /* path is a socket to connect to */
	bool fd_from_source; /* the current fd came from take_fd */

	struct proto_hello hello;
	uint64_t last_heard_ms;
	struct proto_stats stats;
	uint64_t stats_seq;
	struct proto_wss wss;
	uint64_t wss_seq;
	struct proto_hint hints[MTD_AGENT_HINT_RING];
	unsigned hint_head, hint_count;
	uint64_t need_bytes;
	uint32_t reclaim_outstanding; /* id of the request in flight, 0: none */
	uint32_t reclaim_late;        /* id of the last request given up on, 0: none */
	uint32_t late_first;          /* the oldest one given up on and not answered yet */
	uint32_t late_deadline_ms;    /* their deadline */
	uint64_t reclaim_sent_ms;
	uint32_t reclaim_deadline_ms;
	struct proto_reclaim_reply reclaim_reply;
	uint32_t reply_deadline_ms; /* the deadline of the request reclaim_reply answers */
	uint64_t reclaim_seq;
	struct mtd_agent_link_counters ctr;

	/* the vsock back end's streams (NULL: virtio-serial only) */
	int (*take_fd)(void *ctx);
	void *take_ctx;

	/* pings: one in flight at a time; round trips in a ring of the last RTT_SAMPLES */
	uint64_t ping_interval_ms;
	uint64_t next_ping_ms;
	uint32_t ping_id;      /* id of the ping in flight, 0: none */
	uint64_t ping_sent_us; /* CLOCK_MONOTONIC microseconds */
	uint64_t ping_sent_ms;
	uint32_t rtt_us[RTT_SAMPLES];
	unsigned rtt_n, rtt_next;
	uint64_t rtt_sum_us; /* every answered ping's round trip, added up (ctr.pongs of them) */

	/* what the agent may say about its VM (agent_bounds.h) */
	uint64_t ram_bytes;                  /* the VM's RAM (0: not known yet) */
	struct mtd_agent_counter_state ctrs; /* this session's counters */
	char untrusted[200];                 /* the first figure clamped this session ("": none) */
	uint64_t clamped;                    /* figures clamped since the link was made */
};

int mtd_agent_link_new(const char *path, uint64_t interval_ms, struct mtd_agent_link **out)
{
	struct mtd_agent_link *l;

	if (strlen(path) >= sizeof(l->path) - 1)
		return -ENAMETOOLONG;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	memcpy(l->path, path, strlen(path) + 1);
	l->has_socket = path[0] != '\0';
	l->interval_ms = interval_ms;
	l->fd = -1;
	proto_reader_init(&l->rd);
	proto_writer_init(&l->wr, 0);
	proto_backoff_init(&l->backoff, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
	*out = l;
	return 0;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void mtd_agent_link_set_fd_source(struct mtd_agent_link *l, int (*take_fd)(void *ctx), void *ctx,
				  const char *name)
{
	l->take_fd = take_fd;
	l->take_ctx = ctx;
	if (!l->has_socket)
		snprintf(l->path, sizeof(l->path), "%s", name);
}

void mtd_agent_link_set_ping(struct mtd_agent_link *l, uint64_t interval_ms)
{
	l->ping_interval_ms = interval_ms;
	l->next_ping_ms = 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void mtd_agent_link_rtt(const struct mtd_agent_link *l, uint64_t *p50_us, uint64_t *p99_us,
			unsigned *samples)
{
	uint32_t s[RTT_SAMPLES];

	*samples = l->rtt_n;
	*p50_us = *p99_us = 0;
	if (!l->rtt_n)
		return;
	memcpy(s, l->rtt_us, l->rtt_n * sizeof(s[0]));
	qsort(s, l->rtt_n, sizeof(s[0]), cmp_u32);
	/* nearest rank: the smallest sample with at least p% of them at or below it */
	*p50_us = s[(l->rtt_n * 50 + 99) / 100 - 1];
	*p99_us = s[(l->rtt_n * 99 + 99) / 100 - 1];
}

void mtd_agent_link_rtt_total(const struct mtd_agent_link *l, uint64_t *count, uint64_t *sum_us)
{
	*count = l->ctr.pongs;
	*sum_us = l->rtt_sum_us;
}

uint64_t mtd_agent_link_ping_due_back(const struct mtd_agent_link *l)
{
	return l->ping_id && l->state == LINK_READY ? l->ping_sent_ms + PING_WAIT_MS : 0;
}

const char *mtd_agent_link_transport(const struct mtd_agent_link *l)
{
	if (l->fd < 0)
		return "";
	return l->fd_from_source ? "vsock" : "virtio-serial";
}

static void link_down(struct mtd_agent_link *l, uint64_t now_ms, const char *why)
{
	if (l->fd >= 0) {
		close(l->fd);
		l->ctr.disconnects++;
		mtd_notice("agent %s: disconnected: %s", l->path, why);
	}
	l->fd = -1;
	l->fd_from_source = false;
	l->state = LINK_DOWN;
	l->reclaim_outstanding = 0;
	l->reclaim_late = 0;
	l->late_first = 0;
	l->ping_id = 0;
	proto_reader_reset(&l->rd);
	proto_writer_reset(&l->wr);
	l->next_connect_ms = now_ms + proto_backoff_next(&l->backoff, (uint32_t)random());
}

void mtd_agent_link_free(struct mtd_agent_link *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	proto_reader_free(&l->rd);
	proto_writer_free(&l->wr);
	free(l);
}

int mtd_agent_link_fd(const struct mtd_agent_link *l)
{
	return l->fd;
}

short mtd_agent_link_events(const struct mtd_agent_link *l)
{
	return (short)(POLLIN | (proto_writer_pending(&l->wr) ? POLLOUT : 0));
}

bool mtd_agent_link_reclaiming(const struct mtd_agent_link *l, uint64_t now_ms, uint64_t silence_ms)
{
	uint32_t id = l->reclaim_outstanding ? l->reclaim_outstanding : l->reclaim_late;
	/* A request excuses as much silence as it can cause, its deadline and the time before
	 * its reply is late, on top of what the agent had already been silent: an agent asked
	 * 14 s after it last spoke (killed, not busy) was otherwise given a whole silence after
	 * the request's deadline, and called silent 45 s after the kill (CI, scenario 5). */
	uint64_t busy = l->reclaim_sent_ms + l->reclaim_deadline_ms + silence_ms;
	uint64_t since = l->last_heard_ms + silence_ms + l->reclaim_deadline_ms + REPLY_LATE_MS;

	return l->state == LINK_READY && id && now_ms <= (busy < since ? busy : since);
}

uint64_t mtd_agent_link_deadline(const struct mtd_agent_link *l)
{
	uint64_t d = UINT64_MAX;

	/* A link with no socket of its own waits for its fd source, which wakes the loop. */
	if (l->state == LINK_DOWN)
		return l->has_socket ? l->next_connect_ms : UINT64_MAX;
	if (l->reclaim_outstanding)
		d = l->reclaim_sent_ms + l->reclaim_deadline_ms + REPLY_LATE_MS;
	if (l->state == LINK_READY && l->ping_interval_ms) {
		uint64_t p = l->ping_id ? l->ping_sent_ms + PING_LOST_MS : l->next_ping_ms;
		if (p < d)
			d = p;
	}
	return d;
}

bool mtd_agent_link_ready(const struct mtd_agent_link *l)
{
	return l->state == LINK_READY;
}

uint64_t mtd_agent_link_last_heard(const struct mtd_agent_link *l)
{
	return l->last_heard_ms;
}

const struct proto_hello *mtd_agent_link_hello(const struct mtd_agent_link *l)
{
	return &l->hello;
}

const struct proto_stats *mtd_agent_link_stats(const struct mtd_agent_link *l, uint64_t *seq)
{
	*seq = l->stats_seq;
	return l->stats_seq ? &l->stats : NULL;
}

const struct proto_wss *mtd_agent_link_wss(const struct mtd_agent_link *l, uint64_t *seq)
{
	*seq = l->wss_seq;
	return l->wss_seq ? &l->wss : NULL;
}

bool mtd_agent_link_take_hint(struct mtd_agent_link *l, struct proto_hint *out)
{
	if (!l->hint_count)
		return false;
	*out = l->hints[l->hint_head];
	l->hint_head = (l->hint_head + 1) % MTD_AGENT_HINT_RING;
	l->hint_count--;
	return true;
}

uint64_t mtd_agent_link_take_need(struct mtd_agent_link *l)
{
	uint64_t n = l->need_bytes;
	l->need_bytes = 0;
	return n;
}

const struct proto_reclaim_reply *mtd_agent_link_reclaim_reply(const struct mtd_agent_link *l,
							       uint64_t *seq)
{
	*seq = l->reclaim_seq;
	return l->reclaim_seq ? &l->reclaim_reply : NULL;
}

uint32_t mtd_agent_link_reply_deadline(const struct mtd_agent_link *l)
{
	return l->reclaim_seq ? l->reply_deadline_ms : 0;
}

void mtd_agent_link_counters(const struct mtd_agent_link *l, struct mtd_agent_link_counters *c)
{
	*c = l->ctr;
}

static uint32_t take_id(struct mtd_agent_link *l)
{
	if (l->next_id == 0 || l->next_id == PROTO_ID_MAX)
		l->next_id = 1;
	return l->next_id++;
}

static int send_msg(struct mtd_agent_link *l, struct proto_msg *m)
{
	struct proto_error e;
	enum proto_status s;

	m->id = take_id(l);
	s = proto_writer_send(&l->wr, m, &e);
	if (s == PROTO_E_NOSPC)
		return -ENOSPC;
	if (s != PROTO_OK) {
		mtd_err("agent %s: cannot encode %s: %s (%s)", l->path,
			proto_msg_type_name(m->type), e.message, proto_status_name(s));
		return -EINVAL;
	}
	return 0;
}

static void send_error(struct mtd_agent_link *l, const struct proto_error *e, bool fatal)
{
	struct proto_msg m;

	proto_error_to_msg(e, 0, fatal, &m);
	(void)send_msg(l, &m);
}

/* Step 1 of a connection: our hello and the configuration we want. */
static int send_handshake(struct mtd_agent_link *l)
{
	struct proto_msg m;
	uint32_t iv = (uint32_t)(l->interval_ms < PROTO_INTERVAL_MIN_MS   ? PROTO_INTERVAL_MIN_MS
				 : l->interval_ms > PROTO_INTERVAL_MAX_MS ? PROTO_INTERVAL_MAX_MS
									  : l->interval_ms);

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.u.hello.role = PROTO_ROLE_HOST;
	m.u.hello.version_min = PROTO_VERSION_MIN;
	m.u.hello.version_max = PROTO_VERSION_MAX;
	snprintf(m.u.hello.software, sizeof(m.u.hello.software), "memtided 0.1.0");
	m.u.hello.caps = PROTO_CAP_HOST_RECLAIM | PROTO_CAP_HOST_WSS | PROTO_CAP_HOST_HINT;
	if (send_msg(l, &m) < 0)
		return -EIO;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_CONFIG;
	m.u.config.report_interval_ms = iv;
	m.u.config.wss_interval_ms = iv;
	m.u.config.collectors = PROTO_COLLECT_STATS | PROTO_COLLECT_WSS | PROTO_COLLECT_HINT;
	m.u.config.nr_wss_bins = mtd_agent_wss_edges(iv, m.u.config.wss_bins_ms);
	return send_msg(l, &m) < 0 ? -EIO : 0;
}

/*
 * The wss bins asked of the agent: 0, 1/2, 3/2, 7/2, 15/2 and 31/2 intervals.  The agent ages its
 * MGLRU once an interval, so a generation's idle age (the birth age of the next younger
 * one) is a whole number of intervals give or take the timer's few milliseconds.  An edge
 * on a whole interval splits those readings at random: with edges at 0, 1, 2, 4 ...
 * intervals, 337 MiB of data idle for minutes read 3,980 ms idle on one report and 4,036 ms
 * on the next (2 s intervals), young every other round, and never aged (scenario 2 with
 * MGLRU on, 5 Dec 2026).  Edges half-way between the whole intervals cannot be crossed by
 * jitter.  source_agent.c reads the first two bins (idle under 3/2 intervals: touched
 * within the last two agings) as young.
 */
unsigned mtd_agent_wss_edges(uint64_t interval_ms, uint64_t *edges_ms)
{
	static const unsigned halves[] = {0, 1, 3, 7, 15, 31};

	for (unsigned i = 0; i < 6; i++)
		edges_ms[i] = interval_ms * halves[i] / 2;
	return 6;
}

/* Step 1 of a connection, whichever transport gave it: our hello and config. */
static void adopt(struct mtd_agent_link *l, int fd, bool from_source, uint64_t now_ms)
{
	l->fd = fd;
	l->fd_from_source = from_source;
	l->state = LINK_HELLO_WAIT;
	l->ctr.connects++;
	l->ping_id = 0;
	l->next_ping_ms = now_ms;
	proto_guard_init(&l->guard);
	proto_reader_reset(&l->rd);
	proto_writer_reset(&l->wr);
	if (send_handshake(l) < 0)
		link_down(l, now_ms, "cannot queue the handshake");
}

/* A stream from the fd source replaces the current connection, whatever its state. */
static void take_from_source(struct mtd_agent_link *l, uint64_t now_ms)
{
	int fd;

	if (!l->take_fd || (fd = l->take_fd(l->take_ctx)) < 0)
		return;
	if (l->fd >= 0) {
		bool was_vsock = l->fd_from_source;

		link_down(l, now_ms,
			  was_vsock ? "a new vsock connection replaces it"
				    : "the agent moved to vsock");
	}
	proto_backoff_reset(&l->backoff);
	mtd_info("agent %s: a vsock stream from the agent", l->path);
	adopt(l, fd, true, now_ms);
}

static void try_connect(struct mtd_agent_link *l, uint64_t now_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (!l->has_socket)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		l->next_connect_ms = now_ms + proto_backoff_next(&l->backoff, (uint32_t)random());
		return;
	}
	memcpy(sa.sun_path, l->path, strlen(l->path) + 1);
	/* A unix-socket connect either completes or fails at once (no EINPROGRESS wait). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (!l->logged_down) {
			mtd_notice("agent %s: cannot connect (%s); retrying with backoff", l->path,
				   strerror(errno));
			l->logged_down = true;
		}
		close(fd);
		l->next_connect_ms = now_ms + proto_backoff_next(&l->backoff, (uint32_t)random());
		return;
	}
	adopt(l, fd, false, now_ms);
}

/* ---- one handler per message ----------------------------------------------------------- */

static enum proto_status on_hello(struct mtd_agent_link *l, const struct proto_msg *m,
				  struct proto_error *e)
{
	const struct proto_hello *h = &m->u.hello;

	/* A new agent on the same stream: virtio-serial keeps the host end of the port open
	 * while the agent inside restarts, so the new one's hello arrives here and not on a
	 * new connection.  Answer it as a new connection is answered, with our hello and
	 * config; what the old agent had in flight (a reclaim) will never be answered. */
	if (l->state == LINK_READY && h->role == PROTO_ROLE_AGENT) {
		l->ctr.rehellos++;
		l->reclaim_outstanding = 0;
		l->reclaim_late = 0;
		proto_guard_init(&l->guard);
		mtd_notice("agent %s: a new agent said hello on the open channel (restarted?): "
			   "handshaking again",
			   l->path);
		if (send_handshake(l) < 0) {
			snprintf(e->message, sizeof(e->message), "cannot queue our hello");
			return PROTO_E_NOSPC;
		}
		l->state = LINK_HELLO_WAIT;
	}
	if (l->state != LINK_HELLO_WAIT || h->role != PROTO_ROLE_AGENT) {
		snprintf(e->message, sizeof(e->message),
			 "hello is the first message, from an agent");
		return PROTO_E_STATE;
	}
	if (proto_version_negotiate(PROTO_VERSION_MIN, PROTO_VERSION_MAX, h->version_min,
				    h->version_max, &l->version) != PROTO_OK) {
		snprintf(e->message, sizeof(e->message), "no common protocol version");
		return PROTO_E_VERSION;
	}
	l->hello = *h;
	l->state = LINK_READY;
	/* A new session: its counters are a new count (what was passed on goes on from where
	 * it was), and its word is taken afresh. */
	l->ctrs.set = false;
	l->untrusted[0] = '\0';
	l->logged_down = false;
	proto_backoff_reset(&l->backoff);
	char names[160], means[400];
	mtd_agent_caps_names(h->caps, names, sizeof(names));
	mtd_agent_caps_consequence(h->caps, means, sizeof(means));
	mtd_notice("agent %s: connected: %.63s on %.64s, protocol %u; can: %s; so: %s", l->path,
		   h->software, h->kernel, l->version, names, means);
	return PROTO_OK;
}

/* Figures beyond what the VM can have were clamped (agent_bounds.h): the peer is marked
 * untrusted for the session, said once in the log at warning, then at debug. */
static void note_clamped(struct mtd_agent_link *l, unsigned n, const char *why)
{
	if (!n)
		return;
	l->clamped += n;
	if (l->untrusted[0]) {
		mtd_debug("agent %s: clamped again: %s", l->path, why);
		return;
	}
	snprintf(l->untrusted, sizeof(l->untrusted), "%s", why);
	mtd_warn("agent %s: says %s: more than the VM can have; its figures are clamped to what "
		 "the VM can hold and marked untrusted",
		 l->path, why);
}

static enum proto_status on_hint(struct mtd_agent_link *l, const struct proto_msg *m)
{
	const struct proto_hint *h = &m->u.hint;

	if (h->kind == PROTO_HINT_NEED) {
		uint64_t n = l->need_bytes + h->need_bytes;
		/* Saturate at the wire bound: a guest cannot make the sum wrap; and at the VM's
		 * RAM: no guest can be given more (an application may ask it: not a lie). */
		l->need_bytes = n < l->need_bytes || n > PROTO_BYTES_MAX ? PROTO_BYTES_MAX : n;
		if (l->ram_bytes && l->need_bytes > l->ram_bytes)
			l->need_bytes = l->ram_bytes;
		return PROTO_OK;
	}
	/* A full ring drops the oldest hint: hints are advice, the newest counts most. */
	if (l->hint_count == MTD_AGENT_HINT_RING) {
		l->hint_head = (l->hint_head + 1) % MTD_AGENT_HINT_RING;
		l->hint_count--;
		l->ctr.dropped++;
	}
	l->hints[(l->hint_head + l->hint_count) % MTD_AGENT_HINT_RING] = *h;
	l->hint_count++;
	return PROTO_OK;
}

static enum proto_status on_reclaim_reply(struct mtd_agent_link *l, const struct proto_msg *m,
					  struct proto_error *e)
{
	char why[200] = "";

	/* A reply to the request given up on last is still the guest's measured answer (a
	 * reclaim under heavy swap can overrun its deadline by seconds under TCG): taken, late,
	 * also when a newer request went out since.  The agent answers in order, and while it
	 * reclaims its ticker still reports, which lets memtided ask again: on the KVM host
	 * stand and a loaded TCG host the late reply then came with the newer request in
	 * flight, was refused as answering no open request, and counted against the agent's
	 * error budget, a slow guest's honest answer punished as a protocol error. */
	uint32_t re = m->u.reclaim_reply.re;
	/* Requests given up on are answered in order, each once: any from the oldest one not
	 * answered yet to the newest given up on (a chain of them when the agent stayed busy:
	 * on the stand three requests went late in a row). */
	if (l->reclaim_late && re >= l->late_first && re <= l->reclaim_late) {
		mtd_info("agent %s: the reply to reclaim %u came after its deadline", l->path, re);
		l->late_first = re + 1;
		if (re == l->reclaim_late)
			l->reclaim_late = l->late_first = 0;
		l->reclaim_reply = m->u.reclaim_reply;
		l->reply_deadline_ms = l->late_deadline_ms;
		note_clamped(
		    l, mtd_agent_bound_reply(&l->reclaim_reply, l->ram_bytes, why, sizeof(why)),
		    why);
		l->reclaim_seq++;
		return PROTO_OK;
	}
	if (!l->reclaim_outstanding || m->u.reclaim_reply.re != l->reclaim_outstanding) {
		snprintf(e->message, sizeof(e->message), "reclaim_reply answers no open request");
		return PROTO_E_STATE;
	}
	l->reclaim_reply = m->u.reclaim_reply;
	l->reply_deadline_ms = l->reclaim_deadline_ms;
	note_clamped(l, mtd_agent_bound_reply(&l->reclaim_reply, l->ram_bytes, why, sizeof(why)),
		     why);
	l->reclaim_seq++;
	l->reclaim_outstanding = 0;
	l->reclaim_late = l->late_first = 0; /* answered in order: no older reply can follow */
	return PROTO_OK;
}

static enum proto_status dispatch(struct mtd_agent_link *l, const struct proto_msg *m,
				  uint64_t now_ms, struct proto_error *e)
{
	if (m->type != PROTO_MSG_HELLO && m->type != PROTO_MSG_ERROR && l->state != LINK_READY) {
		snprintf(e->message, sizeof(e->message), "%s before hello",
			 proto_msg_type_name(m->type));
		return PROTO_E_STATE;
	}
	switch (m->type) {
	case PROTO_MSG_HELLO:
		return on_hello(l, m, e);
	case PROTO_MSG_STATS: {
		char why[200] = "";
		l->stats = m->u.stats;
		note_clamped(l,
			     mtd_agent_bound_stats(&l->stats, l->ram_bytes, &l->ctrs, now_ms, why,
						   sizeof(why)),
			     why);
		l->stats_seq++;
		return PROTO_OK;
	}
	case PROTO_MSG_WSS: {
		char why[200] = "";
		l->wss = m->u.wss;
		note_clamped(l,
			     mtd_agent_bound_wss(&l->wss, l->ram_bytes, l->hello.page_size_bytes,
						 why, sizeof(why)),
			     why);
		l->wss_seq++;
		return PROTO_OK;
	}
	case PROTO_MSG_HINT:
		return on_hint(l, m);
	case PROTO_MSG_RECLAIM_REPLY:
		return on_reclaim_reply(l, m, e);
	case PROTO_MSG_CONFIG_REPLY:
		mtd_info("agent %s: config in force: report every %u ms, wss every %u ms", l->path,
			 m->u.config_reply.config.report_interval_ms,
			 m->u.config_reply.config.wss_interval_ms);
		return PROTO_OK;
	case PROTO_MSG_PING: {
		struct proto_msg r = {.type = PROTO_MSG_PONG};
		r.u.pong.re = m->id;
		r.u.pong.mono_ms = now_ms;
		return send_msg(l, &r) == 0 ? PROTO_OK : PROTO_E_NOSPC;
	}
	case PROTO_MSG_PONG:
		if (l->ping_id && m->u.pong.re == l->ping_id) {
			uint64_t rtt = mono_us() - l->ping_sent_us;

			l->rtt_us[l->rtt_next] = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
			l->rtt_sum_us += rtt;
			l->rtt_next = (l->rtt_next + 1) % RTT_SAMPLES;
			if (l->rtt_n < RTT_SAMPLES)
				l->rtt_n++;
			l->ping_id = 0;
			l->ctr.pongs++;
		}
		return PROTO_OK;
	case PROTO_MSG_ERROR:
		mtd_warn("agent %s: rejected our message %u: %s (%.63s: %.255s)", l->path,
			 m->u.error.re, proto_status_name(m->u.error.code), m->u.error.field,
			 m->u.error.message);
		if (m->u.error.re && m->u.error.re == l->reclaim_outstanding)
			l->reclaim_outstanding = 0;
		return m->u.error.fatal ? PROTO_E_STATE : PROTO_OK;
	case PROTO_MSG_RECLAIM:
	case PROTO_MSG_CONFIG:
	default:
		snprintf(e->message, sizeof(e->message), "%s is a host-to-agent message",
			 proto_msg_type_name(m->type));
		return PROTO_E_STATE;
	}
}

/* One payload: budget, decode, dispatch.  Returns false when the link went down. */
static bool handle_frame(struct mtd_agent_link *l, const char *json, size_t len, uint64_t now_ms)
{
	struct proto_msg *m = malloc(sizeof(*m)); /* ~20 KiB: keep it off the loop's stack */
	struct proto_error e = {0};
	enum proto_status s;
	enum proto_verdict v;

	l->ctr.frames++;
	v = proto_guard_frame(&l->guard, now_ms);
	if (v == PROTO_VERDICT_DROP) {
		l->ctr.dropped++;
		free(m);
		return true;
	}
	if (v == PROTO_VERDICT_DISCONNECT || !m) {
		free(m);
		link_down(l, now_ms, "agent exceeds its message rate");
		return false;
	}
	s = proto_decode(json, len, m, &e);
	if (s == PROTO_OK) {
		bool was_error = m->type == PROTO_MSG_ERROR;
		e.re = m->id;
		s = dispatch(l, m, now_ms, &e);
		if (s == PROTO_OK) {
			l->last_heard_ms = now_ms;
			free(m);
			return true;
		}
		e.code = s;
		if (was_error) {
			/* a fatal error from the agent: it is closing; never answer an error */
			free(m);
			link_down(l, now_ms, "agent sent a fatal error");
			return false;
		}
	}
	free(m);
	l->ctr.rejected++;
	e.code = s;
	v = proto_guard_error(&l->guard, s, now_ms);
	mtd_info("agent %s: rejected a frame: %s at '%s': %s", l->path, proto_status_name(s),
		 e.field, e.message);
	if (v == PROTO_VERDICT_DISCONNECT || s == PROTO_E_VERSION) {
		send_error(l, &e, true);
		(void)proto_writer_flush(&l->wr, l->fd);
		link_down(l, now_ms, "too many invalid messages");
		return false;
	}
	send_error(l, &e, false);
	return true;
}

/* At most one ping in flight: the next goes one interval after the previous one was sent,
 * or at once when the previous answer (or its loss) came later than that. */
static void maybe_ping(struct mtd_agent_link *l, uint64_t now_ms)
{
	struct proto_msg m;

	if (l->state != LINK_READY || !l->ping_interval_ms)
		return;
	if (l->ping_id && now_ms >= l->ping_sent_ms + PING_LOST_MS)
		l->ping_id = 0; /* lost; the agent_silence rule judges a silent agent */
	if (l->ping_id || now_ms < l->next_ping_ms)
		return;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	m.u.ping.mono_ms = now_ms;
	if (send_msg(l, &m) < 0)
		return;
	l->ping_id = m.id;
	l->ping_sent_us = mono_us();
	l->ping_sent_ms = now_ms;
	l->next_ping_ms = now_ms + l->ping_interval_ms;
	l->ctr.pings++;
}

void mtd_agent_link_service(struct mtd_agent_link *l, uint64_t now_ms)
{
	take_from_source(l, now_ms);
	if (l->state == LINK_DOWN) {
		if (now_ms < l->next_connect_ms)
			return;
		try_connect(l, now_ms);
		if (l->state == LINK_DOWN)
			return;
	}
	for (int i = 0; i < READS_PER_SERVICE; i++) {
		long n = proto_reader_read_fd(&l->rd, l->fd);
		const char *json;
		size_t len;
		struct proto_error e;
		int rc;

		if (n == -EAGAIN)
			break;
		if (n == -EINTR)
			continue;
		while ((rc = proto_reader_next(&l->rd, &json, &len, &e)) == 1) {
			if (!handle_frame(l, json, len, now_ms))
				return;
		}
		if (rc < 0) {
			send_error(l, &e, true);
			(void)proto_writer_flush(&l->wr, l->fd);
			link_down(l, now_ms, proto_status_name(e.code));
			return;
		}
		if (n == 0) {
			link_down(l, now_ms,
				  proto_reader_pending(&l->rd) ? "EOF inside a frame" : "EOF");
			return;
		}
		if (n < 0) {
			link_down(l, now_ms, strerror((int)-n));
			return;
		}
	}
	if (l->reclaim_outstanding &&
	    now_ms > l->reclaim_sent_ms + l->reclaim_deadline_ms + REPLY_LATE_MS) {
		mtd_warn("agent %s: no reply to reclaim %u within its deadline", l->path,
			 l->reclaim_outstanding);
		if (!l->reclaim_late)
			l->late_first = l->reclaim_outstanding;
		l->reclaim_late = l->reclaim_outstanding;
		l->late_deadline_ms = l->reclaim_deadline_ms;
		l->reclaim_outstanding = 0;
	}
	maybe_ping(l, now_ms);
	int f = proto_writer_flush(&l->wr, l->fd);
	if (f < 0)
		link_down(l, now_ms, strerror(-f));
}

int mtd_agent_link_reclaim(struct mtd_agent_link *l, uint64_t bytes, bool anon_too,
			   uint32_t deadline_ms, uint64_t now_ms)
{
	struct proto_msg m;
	int rc;

	if (l->state != LINK_READY)
		return -ENOTCONN;
	if (l->reclaim_outstanding)
		return -EBUSY;
	/* The last request went unanswered past its deadline and nothing came from the agent
	 * since: it is stuck in the kernel's reclaim, or gone.  Asking again would only keep it
	 * "reclaiming" (mtd_agent_link_reclaiming) and its silence unsaid: a killed agent, asked
	 * every 8 s while a balloon step waited, was called silent after 46 s, not 30
	 * (scenario 5).  Anything it says (a stats report, the late reply) opens the way. */
	if (l->reclaim_late && l->last_heard_ms <= l->reclaim_sent_ms)
		return -EBUSY;
	if (bytes == 0 || bytes > PROTO_BYTES_MAX)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM;
	m.u.reclaim.bytes = bytes;
	m.u.reclaim.scope = anon_too ? PROTO_SCOPE_ANY : PROTO_SCOPE_FILE;
	m.u.reclaim.deadline_ms = deadline_ms;
	/*
	 * Compaction, so that what was freed forms the 2 MiB blocks free page reporting returns.
	 * In scenario 7's guest (freshly booted, little fragmentation) it made no difference:
	 * 210 MiB back with it, 208 without, for ~300 ms more; a long-running guest's free
	 * memory is scattered, which is when it pays.
	 */
	m.u.reclaim.compact = true;
	rc = send_msg(l, &m);
	if (rc < 0)
		return rc;
	l->reclaim_outstanding = m.id;
	l->reclaim_sent_ms = now_ms;
	l->reclaim_deadline_ms = deadline_ms;
	int f = proto_writer_flush(&l->wr, l->fd);
	if (f < 0) {
		link_down(l, now_ms, strerror(-f));
		return -ENOTCONN;
	}
	return 0;
}

void mtd_agent_link_set_ram(struct mtd_agent_link *l, uint64_t ram_bytes)
{
	l->ram_bytes = ram_bytes;
}

const char *mtd_agent_link_untrusted(const struct mtd_agent_link *l, uint64_t *clamped)
{
	if (clamped)
		*clamped = l->clamped;
	return l->untrusted;
}
