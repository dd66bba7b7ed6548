/*
 * metrics.c - Prometheus text exposition of memtided's state (metrics.h).
 *
 * Rendering walks the VM snapshots once per metric family, so each family's # HELP and
 * # TYPE come once, followed by one sample per VM (the format wants a family's samples
 * together).  Label values (domain names come from libvirt, i.e. from whoever defined the
 * domain) are escaped as the format requires: backslash, double quote and newline.
 *
 * The HTTP side is libmicrohttpd with its internal polling thread (one thread, one request at
 * a time, at most 32 connections, 10 s idle timeout), bound to 127.0.0.1 only.
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <urcu.h>

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
SAMPLER(s_rss, "%" PRIu64, st->host_rss_bytes)
SAMPLER(s_saved, "%" PRIu64, st->saved_bytes)
SAMPLER(s_wss, "%" PRIu64, st->working_set_bytes)
SAMPLER(s_refault, "%.6g", st->refault_rate_per_min)
SAMPLER(s_cold, "%.3f", (double)st->cold_age_ms / 1000.0)
SAMPLER(s_floor, "%.3f", (double)st->reuse_floor_ms / 1000.0)
SAMPLER(s_hold, "%.3f", (double)st->hold_left_ms / 1000.0)
SAMPLER(s_refused, "%u", st->refused_steps)
SAMPLER(s_output, "%.6g", st->controller_output)
SAMPLER(s_agent, "%d", st->agent_connected ? 1 : 0)
SAMPLER(s_fpr, "%d", st->fpr_on ? 1 : 0)
SAMPLER(s_rtt50, "%.6f", (double)st->agent_rtt_p50_us / 1e6)
SAMPLER(s_rtt99, "%.6f", (double)st->agent_rtt_p99_us / 1e6)
SAMPLER(s_avail, "%" PRIu64, st->guest_mem_available_bytes)
SAMPLER(s_psi, "%.2f", st->guest_psi_some_avg10)
SAMPLER(s_po_swapped, "%" PRIu64, st->pageout.swapped_bytes)
SAMPLER(s_po_pool, "%" PRIu64, st->pageout.pool_bytes)
SAMPLER(s_po_out, "%" PRIu64, st->pageout.out_total_bytes)
SAMPLER(s_po_refaults, "%" PRIu64, st->pageout.refaults_total)
SAMPLER(s_po_swapin, "%.3f", st->pageout.swapin_pages_per_s)
#undef SAMPLER

static void s_po_state(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	for (int s = MTD_PAGEOUT_OFF; s <= MTD_PAGEOUT_REFUSED; s++) {
		dom(b, metric, st);
		put(b, ",state=\"%s\"} %d\n", mtd_pageout_state_name((enum mtd_pageout_state)s),
		    (int)st->pageout.state == s);
	}
}

static void s_wss_age(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	for (unsigned i = 0; i < MTD_WSS_BINS; i++) {
		dom(b, metric, st);
		put(b, ",idle_age_seconds=\"%.3f\"} %" PRIu64 "\n",
		    (double)st->wss_age_ms[i] / 1000.0, st->wss_bytes[i]);
	}
}

static void s_gens(struct buf *b, const char *metric, const struct mtd_vm_status *st)
{
	unsigned n = st->nr_gens < MTD_MAX_GENS ? st->nr_gens : MTD_MAX_GENS;

	/* gen="0" is the oldest: the eviction hand's end. */
	for (unsigned i = 0; i < n; i++) {
		dom(b, metric, st);
		put(b, ",gen=\"%u\"} %" PRIu64 "\n", i, st->gen_pages[i]);
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

char *mtd_metrics_render(struct mtd_daemon *d)
{
	struct buf b = {0};
	struct mtd_host_status h;

	mtd_daemon_host_status(d, &h);
	family(&b, "memtide_host_memory_total_bytes", "gauge", "Host MemTotal.");
	put(&b, "memtide_host_memory_total_bytes %" PRIu64 "\n", h.mem_total_bytes);
	family(&b, "memtide_host_memory_available_bytes", "gauge", "Host MemAvailable.");
	put(&b, "memtide_host_memory_available_bytes %" PRIu64 "\n", h.mem_available_bytes);
	family(&b, "memtide_host_low_mark_bytes", "gauge",
	       "Host MemAvailable under which VMs are squeezed, lowest priority first.");
	put(&b, "memtide_host_low_mark_bytes %" PRIu64 "\n", h.low_mark_bytes);
	family(&b, "memtide_host_under_pressure", "gauge",
	       "1 while the host is under its low mark.");
	put(&b, "memtide_host_under_pressure %d\n", h.under_pressure ? 1 : 0);
	family(&b, "memtide_vms", "gauge", "VMs managed.");
	put(&b, "memtide_vms %u\n", h.nr_vms);
	family(&b, "memtide_host_saved_bytes", "gauge",
	       "Memory handed back to the host by every VM (net of the compressed swap pool).");
	put(&b, "memtide_host_saved_bytes %" PRIu64 "\n", h.saved_bytes);
	family(&b, "memtide_host_swap_total_bytes", "gauge", "Host SwapTotal.");
	put(&b, "memtide_host_swap_total_bytes %" PRIu64 "\n", h.swap_total_bytes);
	family(&b, "memtide_host_swap_free_bytes", "gauge", "Host SwapFree.");
	put(&b, "memtide_host_swap_free_bytes %" PRIu64 "\n", h.swap_free_bytes);
	family(&b, "memtide_host_swap_pool_bytes", "gauge",
	       "RAM the compressed swap pools hold (zram devices, zswap).");
	put(&b, "memtide_host_swap_pool_bytes %" PRIu64 "\n", h.swap_pool_bytes);

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
	       "Guest RAM resident on the host (0: unknown).", s_rss);
	per_vm(d, &b, "memtide_vm_saved_bytes", "gauge", "Memory handed back by this VM.", s_saved);
	per_vm(d, &b, "memtide_vm_working_set_bytes", "gauge",
	       "Working set at the cold age threshold.", s_wss);
	per_vm(d, &b, "memtide_vm_working_set_by_age_bytes", "gauge",
	       "Memory used within each idle age.", s_wss_age);
	per_vm(d, &b, "memtide_vm_generation_pages", "gauge",
	       "4 KiB pages per generation, gen 0 the oldest.", s_gens);
	per_vm(d, &b, "memtide_vm_refault_rate_per_minute", "gauge",
	       "Refaults as a fraction of resident pages per minute.", s_refault);
	per_vm(d, &b, "memtide_vm_cold_age_seconds", "gauge",
	       "Reclaim controller output: pages idle longer are cold.", s_cold);
	per_vm(d, &b, "memtide_vm_reuse_floor_seconds", "gauge",
	       "Shortest cold age the guest's reuses by idle age allow (0: none).", s_floor);
	per_vm(d, &b, "memtide_vm_inflate_hold_seconds", "gauge",
	       "No inflation for this much longer (after a deflation; doubled per refused step).",
	       s_hold);
	per_vm(d, &b, "memtide_vm_refused_steps", "gauge",
	       "Steps the guest gave back at once, in a row.", s_refused);
	per_vm(d, &b, "memtide_vm_controller_output", "gauge", "Reclaim PID controller output.",
	       s_output);
	per_vm(d, &b, "memtide_vm_agent_connected", "gauge", "1 when the guest agent is connected.",
	       s_agent);
	per_vm(d, &b, "memtide_vm_agent_rtt_p50_seconds", "gauge",
	       "Median round trip of memtided's pings to the agent (last 256; 0: none yet).",
	       s_rtt50);
	per_vm(d, &b, "memtide_vm_agent_rtt_p99_seconds", "gauge",
	       "99th percentile round trip of memtided's pings to the agent (last 256).", s_rtt99);
	per_vm(d, &b, "memtide_vm_free_page_reporting", "gauge",
	       "1 when the balloon has free page reporting on.", s_fpr);
	per_vm(d, &b, "memtide_vm_guest_mem_available_bytes", "gauge", "Guest MemAvailable.",
	       s_avail);
	per_vm(d, &b, "memtide_vm_guest_psi_some_avg10", "gauge",
	       "Guest PSI memory some avg10, percent.", s_psi);
	per_vm(d, &b, "memtide_vm_pageout_state", "gauge",
	       "Host-side eviction's state (1 for the current one).", s_po_state);
	per_vm(d, &b, "memtide_vm_pageout_swapped_bytes", "gauge",
	       "Guest memory memtided paged out that is in host swap now (its RSS drop).",
	       s_po_swapped);
	per_vm(d, &b, "memtide_vm_pageout_pool_bytes", "gauge",
	       "Its share of the compressed swap pool: saved = swapped - pool.", s_po_pool);
	per_vm(d, &b, "memtide_vm_pageout_out_bytes_total", "counter",
	       "Guest memory sent to host swap.", s_po_out);
	per_vm(d, &b, "memtide_vm_pageout_refaults_total", "counter",
	       "Guest pages read back from host swap (refaults).", s_po_refaults);
	per_vm(d, &b, "memtide_vm_swapin_pages_per_second", "gauge",
	       "Guest pages read back from host swap per second, over the last interval.",
	       s_po_swapin);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

struct mtd_metrics {
	struct mtd_daemon *d;
	struct MHD_Daemon *mhd;
};

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

int mtd_metrics_start(struct mtd_daemon *d, int port, struct mtd_metrics **out, char *err,
		      size_t errlen)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct mtd_metrics *m;

	*out = NULL;
	if (port <= 0 || port > 65535) {
		snprintf(err, errlen, "metrics port must be 1..65535");
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->d = d;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	m->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL,
				  handle, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_CONNECTION_LIMIT, 32U, MHD_OPTION_CONNECTION_TIMEOUT,
				  10U, MHD_OPTION_END);
	if (!m->mhd) {
		snprintf(err, errlen,
			 "cannot serve metrics on 127.0.0.1:%d (port in use? --metrics-port PORT "
			 "or --no-metrics)",
			 port);
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
	MHD_stop_daemon(m->mhd);
	free(m);
}
