// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * balloon.c - the loop's side of the balloon actuator (balloon.h): open, read, send the
 * target, and the hypervisor peer's health, whatever the actuator (QMP or libvirt).
 *
 * Called from the VM's loop thread only: by attach (daemon/vm_attach.c), the tick's input
 * stage (access/tick_inputs.c, mtd_balloon_read) and its act stage (act/tick_act.c,
 * mtd_balloon_apply).
 */
#include "act/balloon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "base/audit.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mtd.h"

#define MiB               ((uint64_t)1 << 20)
#define PEER_PROBE_MAX_MS 30000 /* an unresponsive peer is probed at least this often */

/* ---- peer health ------------------------------------------------------------------------ */

/* A failure that means the peer does not answer (as opposed to refusing or being gone). */
static bool peer_silent(int rc)
{
	return rc == -ETIMEDOUT || rc == -EAGAIN || rc == -EBUSY;
}

/* May a call be made now?  While the peer is unresponsive, one probe at a time. */
static bool peer_may_call(const struct mtd_balloon *b, uint64_t now_ms)
{
	return !b->peer_down_since_ms || now_ms >= b->peer_next_probe_ms;
}

/* Record a call's outcome: the start and the end of an unresponsive peer. */
static void peer_note(struct mtd_balloon *b, const char *call, uint64_t started_ms, int rc,
		      const char *err, struct mtd_vm_status *draft)
{
	uint64_t now = mtd_mono_ms();
	char why[120];

	if (peer_silent(rc) && (!err || !*err)) {
		if (rc == -ETIMEDOUT)
			snprintf(why, sizeof(why), "no answer within %" PRIu64 " ms",
				 b->call_timeout_ms);
		else if (rc == -EAGAIN)
			snprintf(why, sizeof(why),
				 "QEMU does not accept connections (backlog full)");
		else
			snprintf(why, sizeof(why), "an earlier call has not returned");
		err = why;
	}
	if (peer_silent(rc)) {
		unsigned shift = b->peer_probes < 5 ? b->peer_probes : 5;
		uint64_t wait_ms = 1000ULL << shift;

		if (wait_ms > PEER_PROBE_MAX_MS)
			wait_ms = PEER_PROBE_MAX_MS;
		b->peer_next_probe_ms = now + wait_ms;
		b->peer_probes++;
		if (!b->peer_down_since_ms) {
			b->peer_down_since_ms = started_ms ? started_ms : now;
			snprintf(draft->peer_call, sizeof(draft->peer_call), "%s", call);
			mtd_warn(
			    "%s: %s unresponsive: %s: %s; the VM is left as it is, and the peer "
			    "probed again after 1, 2, 4 ... %d s",
			    b->vm, b->ops->name, call, err && *err ? err : strerror(-rc),
			    PEER_PROBE_MAX_MS / 1000);
		}
		snprintf(draft->last_error, sizeof(draft->last_error),
			 "%s unresponsive: %.40s: %.90s", b->ops->name, call,
			 err && *err ? err : strerror(-rc));
	} else if (b->peer_down_since_ms && rc != -ECANCELED) {
		mtd_notice("%s: %s answers again after %" PRIu64 " s", b->vm, b->ops->name,
			   (now - b->peer_down_since_ms) / 1000);
		b->peer_down_since_ms = 0;
		b->peer_probes = 0;
		draft->peer_call[0] = '\0';
		draft->last_error[0] = '\0';
	}
	draft->peer_unresponsive_since_ms = b->peer_down_since_ms;
}

/* ---- open ------------------------------------------------------------------------------- */

int mtd_balloon_open(struct mtd_balloon *b, struct mtd_vm_status *draft, char *err, size_t errlen)
{
	uint64_t t0 = mtd_mono_ms();
	int rc;

	err[0] = '\0';
	rc = b->ops->open(b->ctx, &b->domain_bytes, err, errlen);
	peer_note(b, "open", t0, rc, err, draft);
	return rc;
}

int mtd_balloon_pid(const struct mtd_balloon *b, int *pid)
{
	if (!b->ops->qemu_pid)
		return -ENOTSUP;
	return b->ops->qemu_pid(b->ctx, pid);
}

int mtd_balloon_on_kvm(const struct mtd_balloon *b, bool *on)
{
	struct json_object *ret = NULL, *en;
	char err[160];

	if (!b->ops->qmp)
		return -ENOTSUP;
	int rc = b->ops->qmp(b->ctx, "query-kvm", NULL, &ret, err, sizeof(err));
	if (rc < 0)
		return rc;
	*on = ret && json_object_object_get_ex(ret, "enabled", &en) && json_object_get_boolean(en);
	json_object_put(ret);
	return 0;
}

int mtd_process_instance(int pid, char *buf, size_t len)
{
	char path[64], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	/* "PID (COMM) S PPID ..." : COMM may hold spaces and ')', so count from the last ')';
	 * starttime is field 22, the 20th after it. */
	char *p = strrchr(line, ')');
	if (!p)
		return -EPROTO;
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EPROTO;
	unsigned long long start = strtoull(p + 1, NULL, 10);
	if (!start)
		return -EPROTO;
	return snprintf(buf, len, "%d:%llu", pid, start) < (int)len ? 0 : -ENOSPC;
}

/* Which QEMU process is behind the actuator now: "PID:STARTTIME", "" when it cannot tell. */
static void read_instance(const struct mtd_balloon *b, char *out, size_t len)
{
	int pid;

	out[0] = '\0';
	if (mtd_balloon_pid(b, &pid) == 0 && mtd_process_instance(pid, out, len) < 0)
		out[0] = '\0';
}

void mtd_balloon_attached(struct mtd_balloon *b)
{
	read_instance(b, b->instance, sizeof(b->instance));
	if (b->ops->connects)
		b->connects_seen = b->ops->connects(b->ctx);
}

void mtd_balloon_query_fpr(struct mtd_balloon *b, struct mtd_vm_status *draft)
{
	bool on = false;
	uint64_t t0 = mtd_mono_ms();
	int rc = b->ops->fpr(b->ctx, &on);

	peer_note(b, "free-page-reporting query", t0, rc, NULL, draft);
	b->fpr_known = rc == 0;
	b->fpr_on = on;
	/* Free page reporting returns what the agent's reclaim frees: without it the guest
	 * keeps those pages, so say so once, loudly. */
	if (rc == 0 && !on)
		mtd_warn("%s: free page reporting is off on the balloon: memory the guest frees "
			 "stays with it (memtidectl domxml-patch %s adds freePageReporting='on')",
			 b->vm, b->vm);
	else if (rc < 0)
		mtd_info("%s: cannot tell whether free page reporting is on (%s)", b->vm,
			 strerror(-rc));
}

/* ---- read ------------------------------------------------------------------------------- */

/*
 * The guest RAM's resident size on the host: Rss of QEMU's largest mapping of at least the
 * guest's size in /proc/PID/smaps (QEMU's own VmRSS carries ~100 MiB of TCG buffers and
 * device state; /work/shared/README.md).  Reading smaps makes the kernel walk the process's
 * page tables (~1 ms per GiB mapped), so it is read at most every RSS_EVERY_MS.
 */
#define RSS_EVERY_MS 10000
static int guest_rss(int pid, uint64_t guest_bytes, uint64_t *rss_bytes)
{
	char path[64], line[256];
	unsigned long long size_kib = 0, best_kib = 0, best_rss = 0;
	bool candidate = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Size:", 5) == 0) {
			size_kib = strtoull(line + 5, NULL, 10);
			candidate = size_kib * 1024 >= guest_bytes && size_kib > best_kib;
		} else if (candidate && strncmp(line, "Rss:", 4) == 0) {
			best_rss = strtoull(line + 4, NULL, 10);
			best_kib = size_kib;
			candidate = false;
		}
	}
	fclose(f);
	if (!best_kib)
		return -ENOENT;
	*rss_bytes = (uint64_t)best_rss * 1024;
	return 0;
}

static void read_rss(struct mtd_balloon *b, uint64_t now_ms, struct mtd_vm_status *draft)
{
	int pid;

	if (now_ms < b->rss_next_ms || !b->ops->qemu_pid)
		return;
	b->rss_next_ms = now_ms + RSS_EVERY_MS;
	if (b->ops->qemu_pid(b->ctx, &pid) < 0 ||
	    guest_rss(pid, b->domain_bytes, &draft->host_rss_bytes) < 0)
		draft->host_rss_bytes = 0; /* unknown */
}

/* The guest's major faults per second from the balloon's stats, over the last period. */
static void note_faults(struct mtd_balloon *b, const struct mtd_balloon_stats *bs, uint64_t now_ms)
{
	if (b->majflt_seen_ms && now_ms > b->majflt_seen_ms && bs->major_faults >= b->majflt_seen) {
		b->majflt_per_s = (double)(bs->major_faults - b->majflt_seen) * 1000.0 /
				  (double)(now_ms - b->majflt_seen_ms);
		b->majflt_known = true;
	} else {
		b->majflt_known = false; /* the first sample, or the counter restarted */
	}
	b->majflt_seen = bs->major_faults;
	b->majflt_seen_ms = now_ms;
}

/* The actuator connected again (QEMU's QMP socket came back).  The same QEMU keeps the
 * balloon target it had, but a command may have been lost on the way: send the current one
 * again.  A new QEMU process is a new guest at its full size: start over from it. */
static enum mtd_balloon_news on_reconnect(struct mtd_balloon *b, uint64_t min_change_bytes,
					  uint64_t set_bytes)
{
	enum mtd_balloon_news news = MTD_BALLOON_RECONNECTED;
	char now[sizeof(b->instance)];
	char err[200];

	read_instance(b, now, sizeof(now));
	if (now[0] && b->instance[0] && strcmp(now, b->instance) != 0) {
		uint64_t domain = b->domain_bytes;
		if (b->ops->open(b->ctx, &domain, err, sizeof(err)) == 0)
			b->domain_bytes = domain;
		b->applied_valid = b->apply_pending = false;
		news = MTD_BALLOON_RESTARTED;
		mtd_notice("%s: QEMU was restarted (process %s, was %s): starting over from its "
			   "current size, %" PRIu64 " MiB",
			   b->vm, now, b->instance, b->actual / MiB);
	} else if (b->applied_valid && b->actual > b->applied_bytes + min_change_bytes) {
		/* More than memtided set: the guest deflated the balloon itself meanwhile
		 * (deflate-on-oom), or a new QEMU is behind a proxy that hides its pid.  Either
		 * way the old target is not sent to it: the size it has now is the start. */
		mtd_notice("%s: reconnected to QEMU: the balloon holds %" PRIu64 " MiB, more than "
			   "the %" PRIu64 " MiB set: starting from its size",
			   b->vm, b->actual / MiB, b->applied_bytes / MiB);
		b->applied_valid = b->apply_pending = false;
		news = MTD_BALLOON_GREW;
	} else if (b->applied_valid) {
		b->apply_pending = true;
		mtd_notice("%s: reconnected to QEMU: sending the balloon target %" PRIu64
			   " MiB again",
			   b->vm, set_bytes / MiB);
	}
	memcpy(b->instance, now, sizeof(now));
	return news;
}

enum mtd_balloon_news mtd_balloon_read(struct mtd_balloon *b, uint64_t now_ms,
				       uint64_t min_change_bytes, uint64_t set_bytes,
				       struct mtd_vm_status *draft)
{
	enum mtd_balloon_news news = MTD_BALLOON_SAME;
	struct mtd_balloon_stats bs;
	uint64_t actual = 0;
	int rc = -EAGAIN;

	if (peer_may_call(b, now_ms)) {
		rc = b->ops->read(b->ctx, &actual, &bs);
		peer_note(b, "balloon read", now_ms, rc, NULL, draft);
	}
	if (rc == 0) {
		if (b->read_failing)
			mtd_notice("%s: the balloon answers again (actual %" PRIu64 " MiB)", b->vm,
				   actual / MiB);
		uint64_t before = b->actual;
		b->read_failing = false;
		b->actual = actual;
		if (actual != before || !b->actual_since_ms)
			b->actual_since_ms = now_ms;
		b->stats = bs;
		if (bs.valid && bs.last_update_s != b->stats_seen_update_s) {
			b->stats_seen_update_s = bs.last_update_s;
			b->stats_seen_ms = now_ms;
			note_faults(b, &bs, now_ms);
		}
		if (b->ops->connects) {
			unsigned c = b->ops->connects(b->ctx);
			if (b->connects_seen && c != b->connects_seen)
				news = on_reconnect(b, min_change_bytes, set_bytes);
			b->connects_seen = c;
		}
		/* Deflate-on-oom: the guest took pages back from the balloon (actual rose, above
		 * the target memtided set).  An inflation in flight only ever lowers actual. */
		uint64_t slack = min_change_bytes;
		if (news == MTD_BALLOON_SAME && b->applied_valid &&
		    actual > b->applied_bytes + slack && actual > before + slack) {
			news = MTD_BALLOON_TOOK_BACK;
			mtd_notice("%s: the guest took %" PRIu64
				   " MiB back from the balloon itself "
				   "(deflate-on-oom): it keeps them",
				   b->vm, (actual - b->applied_bytes) / MiB);
		}
	} else if (!b->peer_down_since_ms) { /* an unresponsive peer is told by peer_note */
		if (!b->read_failing)
			mtd_warn("%s: cannot reach the balloon (%s): its size is left as it is; "
				 "trying again each tick",
				 b->vm, strerror(-rc));
		b->read_failing = true;
		b->stats.valid = false;
	}
	read_rss(b, now_ms, draft);
	return news;
}

bool mtd_balloon_stats_fresh(const struct mtd_balloon *b, uint64_t now_ms, uint64_t silence_ms)
{
	return b->stats.valid && b->stats_seen_ms && now_ms - b->stats_seen_ms <= silence_ms;
}

/* ---- the target ------------------------------------------------------------------------- */

static void set_error(struct mtd_vm_status *draft, const char *what, const char *detail)
{
	snprintf(draft->last_error, sizeof(draft->last_error), "%.40s%.110s", what, detail);
}

void mtd_balloon_apply(struct mtd_balloon *b, uint64_t target_bytes, bool observe,
		       uint64_t min_change_bytes, uint64_t now_ms, const char *reason,
		       const char *source, struct mtd_vm_status *draft,
		       const struct mtd_audit *audit)
{
	uint64_t prev = b->applied_bytes;
	bool first = !b->applied_valid;
	char err[200] = "";
	/* What the first target set moves from: the balloon as it is.  A VM observed since
	 * attach has its first real step here, and the trail must show it (in one CI run
	 * 512 -> 448 MiB went unlogged and uncounted right after observe-only ended). */
	uint64_t from = first ? b->actual : prev;

	if (observe) {
		uint64_t was = draft->balloon_target_bytes;
		if (was && target_bytes != was)
			mtd_audit(audit, now_ms, "balloon", was, target_bytes, reason, source,
				  true);
		draft->balloon_target_bytes = target_bytes;
		return;
	}
	if (!first && !b->apply_pending && target_bytes <= prev &&
	    prev - target_bytes < min_change_bytes)
		return;
	if (b->peer_down_since_ms) {
		b->apply_pending = true; /* sent once the peer answers again */
		return; /* nothing is actuated through a peer that does not answer */
	}
	uint64_t t0 = mtd_mono_ms();
	int rc = b->ops->set_target(b->ctx, target_bytes, err, sizeof(err));
	peer_note(b, "balloon target", t0, rc, err, draft);
	if (rc < 0 && b->peer_down_since_ms) {
		b->apply_pending = true; /* said once by peer_note; not an actuator error */
		return;
	}
	if (rc < 0) {
		b->failures++;
		draft->counters.balloon_errors++;
		set_error(draft, "balloon: ", err);
		if (!b->apply_pending)
			mtd_warn("%s: balloon target %" PRIu64 " MiB not set (%s): trying again "
				 "each tick",
				 b->vm, target_bytes / MiB, err);
		b->apply_pending = true;
		if (b->failures == MTD_BALLOON_ERROR_AFTER)
			mtd_err("%s: balloon target failed %d times: %s", b->vm,
				MTD_BALLOON_ERROR_AFTER, err);
		return;
	}
	if (b->failures)
		mtd_notice("%s: balloon target %" PRIu64 " MiB set after %u failed tries", b->vm,
			   target_bytes / MiB, b->failures);
	b->failures = 0;
	b->apply_pending = false;
	b->applied_bytes = target_bytes;
	b->applied_valid = true;
	draft->balloon_target_bytes = target_bytes;
	if (!from)
		return; /* the size it had is not known: no step to count */
	if (target_bytes < from) {
		draft->counters.inflations++;
		draft->counters.inflated_bytes += from - target_bytes;
	} else if (target_bytes > from) {
		draft->counters.deflations++;
		draft->counters.deflated_bytes += target_bytes - from;
	}
	if (target_bytes != from)
		mtd_audit(audit, now_ms, "balloon", from, target_bytes, reason, source, false);
}
