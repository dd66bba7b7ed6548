// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * metrics.c - Prometheus text exposition of memtided's state (metrics.h).
 *
 * Rendering walks the VM snapshots once per metric family, so each family's # HELP and
 * # TYPE come once, followed by one sample per VM (the format wants a family's samples
 * together).  Label values (domain names come from libvirt, i.e. from whoever defined the
 * domain) are escaped as the format requires: backslash, double quote and newline.
 *
 * The HTTP side is libmicrohttpd with its internal polling thread (epoll, one thread, one
 * request at a time), bound to [metrics] listen (loopback by default, so any local user can
 * connect).  A slow client must not hold the endpoint: MHD's idle timeout alone is reset by
 * every byte, so 32 connections trickling a header byte every few seconds used to hold
 * every slot for good.  Three limits now:
 *   - at most MAX_CONNS connections, and MAX_CONNS_PER_IP from one source address;
 *   - a request deadline: every connection must have sent a whole request within
 *     REQUEST_DEADLINE_S of being accepted or of its previous answer, whatever it trickles,
 *     or a watchdog thread shuts its socket down (MHD then closes it);
 *   - MHD's own idle timeout for a client that stops reading its answer.
 * A slot held by a slow client is thus free again within REQUEST_DEADLINE_S.
 */
#include "front/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "base/clock.h"

#define MAX_CONNS          256U
#define MAX_CONNS_PER_IP   128U
#define REQUEST_DEADLINE_S 5U
#define IDLE_TIMEOUT_S     5U

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap + (size_t)n + 1) * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* A label value, escaped per the exposition format. */
static void put_label(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(b, "\\\\");
		else if (*s == '"')
			put(b, "\\\"");
		else if (*s == '\n')
			put(b, "\\n");
		else
			put(b, "%c", *s);
	}
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
	put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One family over every VM: a per-VM sampler fills in the samples. */
typedef void (*sample_fn)(struct buf *b, const char *metric, const struct mtd_vm_status *st);

struct walk {
	struct buf *b;
	const char *metric;
	sample_fn fn;
};

static void walk_one(void *arg, const struct mtd_vm_status *st)
{
	struct walk *w = arg;

	w->fn(w->b, w->metric, st);
}

static void per_vm(struct mtd_daemon *d, struct buf *b, const char *metric, const char *type,
		   const char *help, sample_fn fn)
{
	struct walk w = {.b = b, .metric = metric, .fn = fn};

	family(b, metric, type, help);
	mtd_daemon_foreach_vm(d, walk_one, &w);
}

static void dom(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	put(b, "%s{domain=\"", metric);
	put_label(b, st->name);
	put(b, "\"");
}

/* Samplers: one simple field each. */
#define SAMPLER(fn_name, fmt, expr)                                                                \
	static void fn_name(struct buf *b, const char *metric, const struct mtd_vm_status *st)     \
	{                                                                                          \
		dom(b, metric, st);                                                                \
		put(b, "} " fmt "\n", expr);                                                       \
	}
SAMPLER(s_max, "%" PRIu64, st->max_bytes)
SAMPLER(s_target, "%" PRIu64, st->balloon_target_bytes)
SAMPLER(s_goal, "%" PRIu64, st->target_bytes)
SAMPLER(s_soft, "%d", st->soft ? 1 : 0)
SAMPLER(s_actual, "%" PRIu64, st->balloon_actual_bytes)
SAMPLER(s_returned, "%" PRIu64, st->returned_bytes)
SAMPLER(s_observe, "%d", st->observe ? 1 : 0)
SAMPLER(s_wss, "%" PRIu64, st->working_set_bytes)
/* The policy keeps its target per minute (target_refault_per_min); Prometheus wants base
 * units: per second.  A setting, not a measurement: the measured side is the counter
 * memtide_vm_refaults_total over memtide_vm_resident_bytes. */
SAMPLER(s_refault_target, "%.6g", st->policy.target_refault_per_min / 60.0)
SAMPLER(s_cold, "%.3f", (double)st->cold_age_ms / 1000.0)
SAMPLER(s_floor, "%.3f", (double)st->reuse_floor_ms / 1000.0)
SAMPLER(s_hold, "%.3f", (double)st->hold_left_ms / 1000.0)
SAMPLER(s_refused, "%u", st->refused_steps)
SAMPLER(s_output, "%.6g", st->controller_output)
SAMPLER(s_agent, "%d", st->agent_connected ? 1 : 0)
SAMPLER(s_untrusted, "%d", st->agent_untrusted[0] ? 1 : 0)
SAMPLER(c_clamped, "%" PRIu64, st->agent_clamped)
SAMPLER(s_fpr, "%d", st->fpr_on ? 1 : 0)

/* Counters (struct mtd_vm_counters). */
SAMPLER(c_inflations, "%" PRIu64, st->counters.inflations)
SAMPLER(c_deflations, "%" PRIu64, st->counters.deflations)
SAMPLER(c_inflated, "%" PRIu64, st->counters.inflated_bytes)
SAMPLER(c_deflated, "%" PRIu64, st->counters.deflated_bytes)
SAMPLER(c_balloon_errors, "%" PRIu64, st->counters.balloon_errors)
SAMPLER(c_reclaim_requests, "%" PRIu64, st->counters.reclaim_requests)
SAMPLER(c_reclaim_requested, "%" PRIu64, st->counters.reclaim_requested_bytes)
SAMPLER(c_reclaimed, "%" PRIu64, st->counters.reclaimed_bytes)
SAMPLER(c_refused, "%" PRIu64, st->counters.refused_steps)
SAMPLER(c_refaults, "%" PRIu64, st->counters.refaults)
SAMPLER(s_peer_down, "%d", st->peer_unresponsive_since_ms ? 1 : 0)
SAMPLER(s_late, "%" PRIu64, st->ticks_late)
SAMPLER(s_behind, "%d", st->behind ? 1 : 0)
SAMPLER(s_po_swapped, "%" PRIu64, st->pageout.swapped_bytes)
SAMPLER(s_po_pool, "%" PRIu64, st->pageout.pool_bytes)
SAMPLER(s_po_out, "%" PRIu64, st->pageout.out_total_bytes)
SAMPLER(s_po_refaults, "%" PRIu64, st->pageout.refaults_total)
SAMPLER(s_cg_stall, "%.6f", st->memcg.stall_pct / 100.0)
SAMPLER(s_cg_stall_total, "%.3f", (double)st->memcg.stall_total_ms / 1000.0)
SAMPLER(s_cg_kept, "%" PRIu64, st->memcg.kept_total_bytes)
SAMPLER(s_cg_incompressible, "%d", st->memcg.incompressible ? 1 : 0)
#undef SAMPLER

/* Figures memtided may not know yet (no aging round, no agent report, no second tick): such
 * a VM gets no sample rather than a 0 that reads as a value. */
#define SAMPLER_IF(fn_name, known, fmt, expr)                                                      \
	static void fn_name(struct buf *b, const char *metric, const struct mtd_vm_status *st)     \
	{                                                                                          \
		if (!(known))                                                                      \
			return;                                                                    \
		dom(b, metric, st);                                                                \
		put(b, "} " fmt "\n", expr);                                                       \
	}
SAMPLER_IF(s_rss, st->host_rss_bytes, "%" PRIu64, st->host_rss_bytes)
SAMPLER_IF(s_untouched, st->host_rss_bytes, "%" PRIu64, st->untouched_bytes)
SAMPLER_IF(s_resident, st->resident_bytes, "%" PRIu64, st->resident_bytes)
SAMPLER_IF(s_avail, st->guest_mem_available_bytes, "%" PRIu64, st->guest_mem_available_bytes)
/* The agent reports PSI as the kernel prints it, a percentage; a ratio here. */
SAMPLER_IF(s_psi, st->guest_psi_known, "%.4f", st->guest_psi_some_avg10 / 100.0)
SAMPLER_IF(s_tick_gap, st->tick_gap_ms, "%.3f", (double)st->tick_gap_ms / 1000.0)
#undef SAMPLER_IF

/* The agent's round trips as a summary: the median and 99th percentile of the last 256
 * pings (none before the first), and every ping answered since attach with their sum. */
static void s_rtt(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	if (!st->agent_rtt_tracked)
		return;
	if (st->agent_rtt_samples) {
		dom(b, metric, st);
		put(b, ",quantile=\"0.5\"} %.6f\n", (double)st->agent_rtt_p50_us / 1e6);
		dom(b, metric, st);
		put(b, ",quantile=\"0.99\"} %.6f\n", (double)st->agent_rtt_p99_us / 1e6);
	}
	put(b, "%s_sum{domain=\"", metric);
	put_label(b, st->name);
	put(b, "\"} %.6f\n", (double)st->agent_rtt_sum_us / 1e6);
	put(b, "%s_count{domain=\"", metric);
	put_label(b, st->name);
	put(b, "\"} %" PRIu64 "\n", st->agent_rtt_count);
}

static void s_po_state(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	for (int s = MTD_PAGEOUT_OFF; s <= MTD_PAGEOUT_REFUSED; s++) {
		dom(b, metric, st);
		put(b, ",state=\"%s\"} %d\n", mtd_pageout_state_name((enum mtd_pageout_state)s),
		    (int)st->pageout.state == s);
	}
}

/* Host-side reclaim through the VM's cgroup: how it runs, as labels (1 while so). */
static void s_cg_info(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	if (!st->memcg.in_use)
		return;
	dom(b, metric, st);
	put(b, ",mechanism=\"%s\",aging=\"%s\",working_set_from=\"%s\"} 1\n", st->memcg.mechanism,
	    st->memcg.aging, st->memcg.estimate);
}

/* One sample per idle age the estimate has.  A VM with no estimate yet has every age at 0:
 * it gets no sample (four at 0 would be one series four times); ages are increasing, so a
 * repeat of the previous age is skipped too. */
static void s_wss_age(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	uint64_t last = 0;

	for (unsigned i = 0; i < MTD_WSS_BINS; i++) {
		if (st->wss_age_ms[i] == 0 || st->wss_age_ms[i] == last)
			continue;
		last = st->wss_age_ms[i];
		dom(b, metric, st);
		put(b, ",idle_age_seconds=\"%.3f\"} %" PRIu64 "\n",
		    (double)st->wss_age_ms[i] / 1000.0, st->wss_bytes[i]);
	}
}

static void s_gens(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	unsigned n = st->nr_gens < MTD_MAX_GENS ? st->nr_gens : MTD_MAX_GENS;

	/* gen="0" is the oldest: the eviction hand's end.  libvmm counts 4 KiB pages. */
	for (unsigned i = 0; i < n; i++) {
		dom(b, metric, st);
		put(b, ",gen=\"%u\"} %" PRIu64 "\n", i, st->gen_pages[i] * 4096);
	}
}

static void s_state(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	for (int s = MTD_VM_ATTACHING; s <= MTD_VM_DETACHED; s++) {
		dom(b, metric, st);
		put(b, ",state=\"%s\"} %d\n", mtd_vm_state_name((enum mtd_vm_state)s),
		    (int)st->state == s);
	}
}

static void host_gauge(struct buf *b, const char *name, const char *help, uint64_t v)
{
	family(b, name, "gauge", help);
	put(b, "%s %" PRIu64 "\n", name, v);
}

/*
 * Naming (https://prometheus.io/docs/practices/naming/): base units in the name's suffix
 * (_bytes, _seconds, _ratio), counters end in _total, 0/1 gauges for booleans, one series per
 * name and label set.  tests/unit/test_mtd_metrics.c checks every rule on a rendering, and
 * docs/operations.md lists every family.
 */
char *mtd_metrics_render(struct mtd_daemon *d)
{
	struct buf b = {0};
	struct mtd_host_status h;

	mtd_daemon_host_status(d, &h);
	uint64_t now_ms = mtd_mono_ms();

	family(&b, "memtide_build_info", "gauge", "memtided's version and mode; always 1.");
	put(&b, "memtide_build_info{version=\"%s\",mode=\"%s\"} 1\n", MTD_VERSION,
	    h.libvirt_connected < 0 ? "qemu" : "libvirt");
	/* Up: the main loop (host arbitration, libvirt news, signals) turned within three of its
	 * periods.  The endpoint's own thread answers even when that loop is wedged. */
	family(&b, "memtide_up", "gauge",
	       "1 while memtided's main loop runs (ticked within 3 host intervals).");
	put(&b, "memtide_up %d\n",
	    h.updated_ms && now_ms - h.updated_ms <= 3 * (h.interval_ms ? h.interval_ms : 2000));
	if (h.libvirt_connected >= 0) {
		family(&b, "memtide_libvirt_connected", "gauge",
		       "1 while memtided's libvirt connection is open.");
		put(&b, "memtide_libvirt_connected %d\n", h.libvirt_connected);
	}
	host_gauge(&b, "memtide_host_memory_total_bytes", "Host MemTotal.", h.mem_total_bytes);
	host_gauge(&b, "memtide_host_memory_available_bytes", "Host MemAvailable.",
		   h.mem_available_bytes);
	host_gauge(&b, "memtide_host_low_mark_bytes",
		   "Host MemAvailable under which VMs are squeezed, lowest priority first.",
		   h.low_mark_bytes);
	host_gauge(&b, "memtide_host_high_mark_bytes",
		   "Host MemAvailable over which host pressure ends.", h.high_mark_bytes);
	host_gauge(&b, "memtide_host_under_pressure", "1 while the host is under its low mark.",
		   h.under_pressure ? 1 : 0);
	family(&b, "memtide_host_pressure_episodes_total", "counter",
	       "Times the host went under its low mark.");
	put(&b, "memtide_host_pressure_episodes_total %" PRIu64 "\n", h.pressure_episodes);
	host_gauge(&b, "memtide_vms", "VMs managed.", h.nr_vms);
	host_gauge(&b, "memtide_host_returned_bytes",
		   "Memory memtide returned to the host, every VM (not what was never used).",
		   h.saved_bytes);
	host_gauge(&b, "memtide_observe_only",
		   "1 while memtided runs observe-only: it computes, shows and changes nothing.",
		   h.observe_only ? 1 : 0);
	host_gauge(&b, "memtide_host_swap_total_bytes", "Host SwapTotal.", h.swap_total_bytes);
	host_gauge(&b, "memtide_host_swap_free_bytes", "Host SwapFree.", h.swap_free_bytes);
	host_gauge(&b, "memtide_host_swap_pool_bytes",
		   "RAM the compressed swap pools hold (zram devices, zswap).", h.swap_pool_bytes);

	per_vm(d, &b, "memtide_vm_state", "gauge", "The VM's state (1 for the current one).",
	       s_state);
	per_vm(d, &b, "memtide_vm_max_bytes", "gauge", "The domain's configured memory.", s_max);
	per_vm(d, &b, "memtide_vm_target_bytes", "gauge",
	       "Memory the guest should keep: working set + headroom.", s_goal);
	per_vm(d, &b, "memtide_vm_return_by_reclaim", "gauge",
	       "1: memory goes back by the agent's reclaim (the balloon a cap); 0: by the balloon.",
	       s_soft);
	per_vm(d, &b, "memtide_vm_balloon_target_bytes", "gauge",
	       "Balloon target memtided asked for.", s_target);
	per_vm(d, &b, "memtide_vm_balloon_actual_bytes", "gauge",
	       "Guest memory as the balloon reports it.", s_actual);
	per_vm(d, &b, "memtide_vm_host_rss_bytes", "gauge",
	       "Guest RAM resident on the host (no sample while unknown).", s_rss);
	per_vm(d, &b, "memtide_vm_returned_bytes", "gauge",
	       "Memory memtide returned from this VM: the balloon's hold, and what the agent's "
	       "reclaim freed that is still not resident.",
	       s_returned);
	per_vm(d, &b, "memtide_vm_untouched_bytes", "gauge",
	       "Guest RAM not resident without memtide's doing: never touched, or freed by the "
	       "guest itself (no sample while unknown).",
	       s_untouched);
	per_vm(d, &b, "memtide_vm_observe_only", "gauge",
	       "1 while memtided only observes this VM (host-wide or its policy's observe=yes).",
	       s_observe);
	per_vm(d, &b, "memtide_vm_working_set_bytes", "gauge",
	       "Working set at the cold age threshold.", s_wss);
	per_vm(d, &b, "memtide_vm_working_set_by_age_bytes", "gauge",
	       "Memory used within each idle age (none before the first estimate).", s_wss_age);
	per_vm(d, &b, "memtide_vm_generation_bytes", "gauge",
	       "Guest memory per generation, gen 0 the oldest.", s_gens);
	per_vm(d, &b, "memtide_vm_resident_bytes", "gauge",
	       "Guest memory the reclaim controller counts resident: rate of "
	       "memtide_vm_refaults_total * 4096 over this is its refault ratio per second (no "
	       "sample before the first aging round).",
	       s_resident);
	per_vm(d, &b, "memtide_vm_refault_target_ratio_per_second", "gauge",
	       "The policy's refault target, a setting (target_refault_per_min / 60): refaulted "
	       "pages per second per resident page.",
	       s_refault_target);
	per_vm(d, &b, "memtide_vm_cold_age_seconds", "gauge",
	       "Reclaim controller output: pages idle longer are cold.", s_cold);
	per_vm(d, &b, "memtide_vm_reuse_floor_seconds", "gauge",
	       "Shortest cold age the guest's reuses by idle age allow (0: none).", s_floor);
	per_vm(d, &b, "memtide_vm_inflate_hold_seconds", "gauge",
	       "No inflation for this much longer (after a deflation; doubled per refused step).",
	       s_hold);
	per_vm(d, &b, "memtide_vm_refused_steps_in_a_row", "gauge",
	       "Steps the guest gave back at once, in a row (0 once a step stands).", s_refused);
	per_vm(d, &b, "memtide_vm_controller_output", "gauge", "Reclaim PID controller output.",
	       s_output);
	per_vm(d, &b, "memtide_vm_agent_connected", "gauge", "1 when the guest agent is connected.",
	       s_agent);
	per_vm(d, &b, "memtide_vm_agent_untrusted", "gauge",
	       "1 when the agent said more than its VM can have this session (its figures are "
	       "clamped).",
	       s_untrusted);
	per_vm(d, &b, "memtide_vm_agent_figures_clamped_total", "counter",
	       "Figures from the agent clamped to what its VM can have.", c_clamped);
	per_vm(d, &b, "memtide_vm_agent_rtt_seconds", "summary",
	       "Round trips of memtided's pings to the agent: quantiles of the last 256, and "
	       "every ping answered since attach (VMs with an agent link only).",
	       s_rtt);
	per_vm(d, &b, "memtide_vm_free_page_reporting", "gauge",
	       "1 when the balloon has free page reporting on.", s_fpr);
	per_vm(d, &b, "memtide_vm_guest_memory_available_bytes", "gauge",
	       "Guest MemAvailable, from the agent or the balloon's statistics (no sample while "
	       "neither has said).",
	       s_avail);
	per_vm(d, &b, "memtide_vm_guest_psi_memory_some_avg10_ratio", "gauge",
	       "Guest PSI memory some avg10, as a ratio (0.05 = 5% of the time stalled; no sample "
	       "unless the agent reports it).",
	       s_psi);

	per_vm(d, &b, "memtide_vm_balloon_inflations_total", "counter",
	       "Balloon target moves down (memory taken from the guest).", c_inflations);
	per_vm(d, &b, "memtide_vm_balloon_deflations_total", "counter",
	       "Balloon target moves up (memory given back to the guest).", c_deflations);
	per_vm(d, &b, "memtide_vm_balloon_inflated_bytes_total", "counter",
	       "Sum of the balloon's moves down.", c_inflated);
	per_vm(d, &b, "memtide_vm_balloon_deflated_bytes_total", "counter",
	       "Sum of the balloon's moves up.", c_deflated);
	per_vm(d, &b, "memtide_vm_balloon_errors_total", "counter", "Balloon commands that failed.",
	       c_balloon_errors);
	per_vm(d, &b, "memtide_vm_reclaim_requests_total", "counter",
	       "Reclaim requests sent to the guest agent.", c_reclaim_requests);
	per_vm(d, &b, "memtide_vm_reclaim_requested_bytes_total", "counter",
	       "Memory those reclaim requests asked for.", c_reclaim_requested);
	per_vm(d, &b, "memtide_vm_reclaimed_bytes_total", "counter",
	       "Memory the guest agent said its reclaim freed.", c_reclaimed);
	per_vm(d, &b, "memtide_vm_refused_steps_total", "counter",
	       "Steps the guest gave back at once (each doubles the inflation hold).", c_refused);
	per_vm(d, &b, "memtide_vm_refaults_total", "counter",
	       "4 KiB pages refaulted after reclaim (libvmm's and the guest's count, the larger).",
	       c_refaults);
	per_vm(d, &b, "memtide_vm_peer_unresponsive", "gauge",
	       "1 while the VM's QMP socket or libvirt does not answer within call_timeout.",
	       s_peer_down);
	per_vm(d, &b, "memtide_vm_tick_gap_seconds", "gauge",
	       "Time between the VM's last two control ticks (the interval when on time; no "
	       "sample before the second).",
	       s_tick_gap);
	per_vm(d, &b, "memtide_vm_ticks_late_total", "counter",
	       "Control ticks that came more than 1.5 intervals after the one before.", s_late);
	per_vm(d, &b, "memtide_vm_behind", "gauge",
	       "1 while the VM's loop falls behind its interval (3 late ticks in a row).",
	       s_behind);
	per_vm(d, &b, "memtide_vm_pageout_state", "gauge",
	       "Host-side eviction's state (1 for the current one).", s_po_state);
	per_vm(d, &b, "memtide_vm_pageout_swapped_bytes", "gauge",
	       "Guest memory memtided paged out that is in host swap now (its RSS drop).",
	       s_po_swapped);
	per_vm(d, &b, "memtide_vm_pageout_pool_bytes", "gauge",
	       "Its share of the compressed swap pool: returned = swapped - pool.", s_po_pool);
	per_vm(d, &b, "memtide_vm_pageout_out_bytes_total", "counter",
	       "Guest memory sent to host swap.", s_po_out);
	per_vm(d, &b, "memtide_vm_pageout_refaults_total", "counter",
	       "Guest pages read back from host swap (refaults; rate() gives them per second).",
	       s_po_refaults);
	per_vm(d, &b, "memtide_vm_cgroup_info", "gauge",
	       "Host-side reclaim through the VM's cgroup: mechanism (mglru, classic), whether the "
	       "kernel's aging sees the guest (blind, sees, untested), the working set's origin.",
	       s_cg_info);
	per_vm(d, &b, "memtide_vm_cgroup_stall_ratio", "gauge",
	       "Share of the last interval the VM's cgroup waited for memory (PSI some).",
	       s_cg_stall);
	per_vm(d, &b, "memtide_vm_cgroup_stall_seconds_total", "counter",
	       "Time the VM's cgroup waited for memory since attach (PSI some).", s_cg_stall_total);
	per_vm(d, &b, "memtide_vm_cgroup_kept_bytes_total", "counter",
	       "Guest memory the kernel's eviction found used and kept.", s_cg_kept);
	per_vm(d, &b, "memtide_vm_cgroup_incompressible", "gauge",
	       "1 while eviction holds because the compressed pool eats what it saves.",
	       s_cg_incompressible);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

/* One live connection, for the request deadline.  Linked while MHD has it open. */
struct conn {
	int fd;
	uint64_t due_ms; /* a whole request by then, or shut down */
	bool cut;        /* shut down already */
	struct conn *prev, *next;
};

struct mtd_metrics {
	struct mtd_daemon *d;
	struct MHD_Daemon *mhd;
	pthread_mutex_t lock; /* guards conns */
	struct conn conns;    /* list head */
	pthread_t watchdog;
	int stop_fd; /* eventfd: ends the watchdog */
};

/* MHD tells of every connection it opens and closes (on its own thread).  CLOSED comes
 * before MHD closes the fd, so the watchdog never shuts down a reused descriptor. */
static void on_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode toe)
{
	struct mtd_metrics *m = cls;
	struct conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		k = calloc(1, sizeof(*k));
		if (!k || !ci)
			goto fail;
		k->fd = ci->connect_fd;
		k->due_ms = mtd_mono_ms() + REQUEST_DEADLINE_S * 1000;
		pthread_mutex_lock(&m->lock);
		k->next = m->conns.next;
		k->prev = &m->conns;
		m->conns.next->prev = k;
		m->conns.next = k;
		pthread_mutex_unlock(&m->lock);
		*socket_context = k;
		return;
	fail:
		free(k);
		*socket_context = NULL;
		return;
	}
	if (!k)
		return;
	pthread_mutex_lock(&m->lock);
	k->prev->next = k->next;
	k->next->prev = k->prev;
	pthread_mutex_unlock(&m->lock);
	free(k);
	*socket_context = NULL;
}

/* A whole request arrived: the next one is due REQUEST_DEADLINE_S from now. */
static void conn_answered(struct mtd_metrics *m, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *k = ci ? ci->socket_context : NULL;

	if (!k)
		return;
	pthread_mutex_lock(&m->lock);
	k->due_ms = mtd_mono_ms() + REQUEST_DEADLINE_S * 1000;
	pthread_mutex_unlock(&m->lock);
}

/* Every 250 ms: shut down connections past their request deadline. */
static void *watchdog(void *arg)
{
	struct mtd_metrics *m = arg;
	struct pollfd p = {.fd = m->stop_fd, .events = POLLIN};

	while (poll(&p, 1, 250) == 0 || (p.revents == 0 && errno == EINTR)) {
		uint64_t now = mtd_mono_ms();
		pthread_mutex_lock(&m->lock);
		for (struct conn *k = m->conns.next; k != &m->conns; k = k->next) {
			if (!k->cut && now >= k->due_ms) {
				(void)shutdown(k->fd, SHUT_RDWR);
				k->cut = true;
			}
		}
		pthread_mutex_unlock(&m->lock);
	}
	return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, char *text,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, mode);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct mtd_metrics *m = cls;
	static char not_found[] = "not found: memtided serves /metrics\n";
	static char bad_method[] = "only GET\n";
	char *text;

	(void)version;
	(void)upload;
	(void)con_cls;
	if (*upload_size)
		return MHD_NO; /* no request bodies */
	conn_answered(m, c);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", bad_method,
			     MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", not_found,
			     MHD_RESPMEM_PERSISTENT);
	/* Registered for the render only: MHD owns this thread and ends it without telling
	 * us, and a thread must not exit while registered with liburcu.  A scrape every few
	 * seconds makes the registration's cost (a mutex) irrelevant. */
	rcu_register_thread();
	text = mtd_metrics_render(m->d);
	rcu_unregister_thread();
	if (!text)
		return MHD_NO;
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text,
		     MHD_RESPMEM_MUST_FREE);
}

static void stop_watchdog(struct mtd_metrics *m)
{
	uint64_t one = 1;

	if (write(m->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(m->watchdog, NULL);
	close(m->stop_fd);
	pthread_mutex_destroy(&m->lock);
}

int mtd_metrics_start(struct mtd_daemon *d, const char *addr, int port, struct mtd_metrics **out,
		      char *err, size_t errlen)
{
	struct sockaddr_in sa4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
	struct sockaddr *sa = (struct sockaddr *)&sa4;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
	struct mtd_metrics *m;

	*out = NULL;
	if (port <= 0 || port > 65535) {
		snprintf(err, errlen, "metrics port must be 1..65535");
		return -EINVAL;
	}
	if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) == 1) {
		sa = (struct sockaddr *)&sa6;
		flags |= MHD_USE_IPv6;
	} else if (inet_pton(AF_INET, addr, &sa4.sin_addr) != 1) {
		snprintf(err, errlen,
			 "metrics address '%.40s' is not a numeric IPv4 or IPv6 address", addr);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->d = d;
	pthread_mutex_init(&m->lock, NULL);
	m->conns.next = m->conns.prev = &m->conns;
	m->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (m->stop_fd < 0 || pthread_create(&m->watchdog, NULL, watchdog, m) != 0) {
		snprintf(err, errlen, "metrics: cannot start the watchdog thread");
		if (m->stop_fd >= 0)
			close(m->stop_fd);
		pthread_mutex_destroy(&m->lock);
		free(m);
		return -EAGAIN;
	}
	m->mhd = MHD_start_daemon(flags | MHD_USE_EPOLL, (uint16_t)port, NULL, NULL, handle, m,
				  MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_CONNECTION_LIMIT, MAX_CONNS,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, MAX_CONNS_PER_IP,
				  MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
				  MHD_OPTION_NOTIFY_CONNECTION, on_conn, m, MHD_OPTION_END);
	if (!m->mhd) {
		stop_watchdog(m);
		snprintf(err, errlen,
			 "cannot serve metrics on %s%s%s:%d (port in use? [metrics] listen = "
			 "ADDRESS:PORT, or --no-metrics)",
			 sa == (struct sockaddr *)&sa6 ? "[" : "", addr,
			 sa == (struct sockaddr *)&sa6 ? "]" : "", port);
		free(m);
		return -EADDRINUSE;
	}
	*out = m;
	return 0;
}

void mtd_metrics_stop(struct mtd_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->mhd); /* closes every connection: the list is empty after */
	stop_watchdog(m);
	free(m);
}
