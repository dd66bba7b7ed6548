// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pageout_hand.c - host-side eviction for one VM (pageout_hand.h): the layout, the actuator,
 * libvmm's eviction hand and the refault scan, tied together once per control interval.
 *
 * States (mtd.h, enum mtd_pageout_state), each change logged once with its reason
 * (hand_state.h):
 *   OFF       return=balloon or reclaim: nothing is evicted here (pages evicted earlier are
 *             still watched, so their refaults are still counted);
 *   REFUSED   the VM cannot be paged out by memtided: no live page-level source, no QEMU
 *             monitor or pid, a map memtided cannot be sure of, memory that is pinned
 *             (VFIO), locked or on hugetlbfs, or no permission.  Tried again every
 *             requery_ms (a layout can become sure: a DIMM finished plugging);
 *   PAUSED    in force but not now: the VM is not being shrunk (pressure, hold, silent
 *             source), the host's swap is full or absent, or (auto) the guest is still
 *             freeing what its agent was asked for;
 *   ACTIVE    evicting.
 */
#include "act/pageout_hand.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act/hand_state.h"
#include "act/pageout.h"
#include "act/swap_share.h"
#include "act/swap_stat.h"
#include "base/log.h"
#include "base/parse.h"
#include "decide/duty.h"
#include "decide/pool_worth.h"
#include "decide/stall_budget.h"
#include "vmm.h"

#define MiB           ((uint64_t)1 << 20)
#define EVICT_RUNS    1024
#define THP_REREAD_MS 60000

struct kept_list {
	struct vmm_run *r;
	size_t n, cap;
};

/* Pages chosen but kept, with the generation each left (vmm_put_back), for the round. */
struct back {
	uint64_t gpa, npages, seq;
};
struct back_list {
	struct back *b;
	size_t n, cap;
};

struct mtd_pageout_hand {
	struct mtd_pageout_config cfg;
	mtd_qmp_fn qmp;
	void *qmp_ctx;
	const char *proc_root, *sys_root;

	struct mtd_ram_layout *layout; /* NULL until first set up */
	struct mtd_pageout *po;        /* NULL until set up, or after QEMU went away */
	uint64_t next_setup_ms;        /* next (re)try of the setup, or of the full layout query */
	uint64_t full_room_bytes;      /* room past the reserve when the last cold run did not fit,
				   * 0: none */
	struct mtd_thp_settings thp;
	uint64_t thp_read_ms;
	struct mtd_swap_stat swap;
	struct mtd_swap_taker taker; /* the host's swap budget, and this round's grant */
	int (*memjob)(void *ctx, struct mtd_memjob *out);
	void *memjob_ctx;
	uint64_t job_reads; /* evicted pages QEMU read back itself, cumulative */
	uint64_t scan_job_reads;

	struct mtd_agent_giving giving; /* the agent's last reclaim answer (auto) */

	uint64_t last_scan_ms;
	double swapin_per_s;
	uint64_t free_pages; /* held nothing on the host at the last mtd_hand_mark_free */
	uint64_t last_out_bytes, last_out_ms;

	struct vmm_guest *g; /* the callbacks' guest, during a call */
	struct kept_list kept;
	struct back_list back;
	uint64_t kept_now;      /* pages of the batch kept */
	size_t nr_runs_now;     /* runs of the batch */
	uint64_t held_retry_ms; /* pages the kernel kept were last released for a new try */
	struct vmm_run *runs;   /* EVICT_RUNS */
	uint64_t *run_seq;      /* EVICT_RUNS: the generation each run left */

	char name[MTD_NAME_MAX];
	char source_name[16];
	struct mtd_hand_state hs;
	char pending_why[240]; /* the last refusal's sentence, until the next try */
	int pid;
	bool live;
	bool announced; /* "can be paged out" said: the map may first open for free pages only */
	bool swap_known;
	bool job_now;     /* QEMU was reading all guest memory at the last look */
	bool job_before;  /* ... at the look before it */
	bool job_reading; /* the refault scan under way counts QEMU's reads apart */
};

/* ---- settings ------------------------------------------------------------------------ */

void mtd_pageout_config_default(struct mtd_pageout_config *c)
{
	c->swap_reserve_bytes = 64 * MiB;
	c->max_step_bytes = VMM_DECIDE_MAX_STEP_PAGES << VMM_PAGE_SHIFT;
	c->requery_ms = 60000;
	c->step_bytes = 8 * MiB;
	c->duty = MTD_DUTY_DEFAULT;
	c->stall_budget = MTD_STALL_BUDGET_DEFAULT;
	c->min_saving = MTD_POOL_MIN_SAVING_DEFAULT;
}

/* A share such as 0.25 or 25%, within [lo, hi]. */
static int parse_share(const char *value, double lo, double hi, double *out)
{
	char *e;
	double v = strtod(value, &e);

	if (e == value)
		return -EINVAL;
	if (*e == '%') {
		v /= 100.0;
		e++;
	}
	if (*e || !(v >= lo && v <= hi))
		return -EINVAL;
	*out = v;
	return 0;
}

int mtd_pageout_config_set(struct mtd_pageout_config *c, const char *key, const char *value,
			   char *err, size_t errlen)
{
	uint64_t v;

	if (strcmp(key, "swap_reserve") == 0) {
		if (mtd_parse_bytes(value, &v) < 0 || v > (1ULL << 50)) {
			snprintf(err, errlen,
				 "swap_reserve must be a size such as 64M, not '%.32s'", value);
			return -EINVAL;
		}
		c->swap_reserve_bytes = v;
	} else if (strcmp(key, "max_step") == 0) {
		if (mtd_parse_bytes(value, &v) < 0 || v < 2 * MiB || v > (1ULL << 44)) {
			snprintf(err, errlen,
				 "max_step must be a size of at least 2M such as 1G, not '%.32s'",
				 value);
			return -EINVAL;
		}
		c->max_step_bytes = v;
	} else if (strcmp(key, "requery") == 0) {
		if (mtd_parse_ms(value, &v) < 0 || v < 1000 || v > 86400000) {
			snprintf(err, errlen,
				 "requery must be a duration from 1s to 24h, not '%.32s'", value);
			return -EINVAL;
		}
		c->requery_ms = v;
	} else if (strcmp(key, "step") == 0) {
		if (mtd_parse_bytes(value, &v) < 0 || v < 1 * MiB || v > (1ULL << 34)) {
			snprintf(err, errlen,
				 "step must be a size of at least 1M such as 8M, not '%.32s'",
				 value);
			return -EINVAL;
		}
		c->step_bytes = v;
	} else if (strcmp(key, "duty") == 0) {
		if (parse_share(value, 0.01, 1.0, &c->duty) < 0) {
			snprintf(err, errlen, "duty must be a share from 1%% to 100%%, not '%.32s'",
				 value);
			return -EINVAL;
		}
	} else if (strcmp(key, "stall_budget") == 0) {
		if (parse_share(value, 0.0001, 0.5, &c->stall_budget) < 0) {
			snprintf(err, errlen,
				 "stall_budget must be a share from 0.01%% to 50%%, not '%.32s'",
				 value);
			return -EINVAL;
		}
	} else if (strcmp(key, "min_saving") == 0) {
		if (parse_share(value, 0.0, 0.95, &c->min_saving) < 0) {
			snprintf(err, errlen,
				 "min_saving must be a share from 0%% to 95%%, not '%.32s'", value);
			return -EINVAL;
		}
	} else {
		snprintf(err, errlen,
			 "unknown [pageout] key '%.32s' (swap_reserve, max_step, requery, step, "
			 "duty, stall_budget, min_saving)",
			 key);
		return -EINVAL;
	}
	return 0;
}

/* ---- state and its log ------------------------------------------------------------- */

/* The state vm show and the metrics publish, each change logged once (hand_state.h). */
#define set_state(h, s, ...)                                                                       \
	mtd_hand_state_set(&(h)->hs, (h)->name, "host-side eviction", (s), __VA_ARGS__)

/* ---- setup --------------------------------------------------------------------------- */

int mtd_hand_new(const struct mtd_pageout_config *cfg, const struct mtd_hand_env *env,
		 struct mtd_pageout_hand **out)
{
	struct mtd_pageout_hand *h = calloc(1, sizeof(*h));

	*out = NULL;
	if (!h)
		return -ENOMEM;
	h->runs = calloc(EVICT_RUNS, sizeof(*h->runs));
	h->run_seq = calloc(EVICT_RUNS, sizeof(*h->run_seq));
	if (!h->runs || !h->run_seq) {
		free(h->runs);
		free(h->run_seq);
		free(h);
		return -ENOMEM;
	}
	h->cfg = *cfg;
	snprintf(h->name, sizeof(h->name), "%s", env->vm_name ? env->vm_name : "?");
	h->qmp = env->qmp;
	h->qmp_ctx = env->qmp_ctx;
	h->pid = env->qemu_pid;
	h->live = env->live_source;
	snprintf(h->source_name, sizeof(h->source_name), "%s",
		 env->source_name ? env->source_name : "none");
	h->proc_root = env->proc_root;
	h->sys_root = env->sys_root;
	h->taker = (struct mtd_swap_taker){.take = env->swap_take,
					   .done = env->swap_done,
					   .ctx = env->swap_ctx,
					   .proc_root = env->proc_root,
					   .sys_root = env->sys_root};
	h->memjob = env->memjob;
	h->memjob_ctx = env->memjob_ctx;
	h->hs.state = h->hs.logged_state = MTD_PAGEOUT_OFF;
	*out = h;
	return 0;
}

void mtd_hand_free(struct mtd_pageout_hand *h)
{
	if (!h)
		return;
	if (h->po) {
		struct mtd_pageout_stats st;
		mtd_pageout_get_stats(h->po, &st);
		if (st.swapped_pages)
			mtd_notice("%s: %" PRIu64
				   " MiB of the guest's memory stay in host swap; the "
				   "kernel reads them back as the guest touches them",
				   h->name, (st.swapped_pages << VMM_PAGE_SHIFT) / MiB);
	}
	mtd_pageout_close(h->po);
	free(h->layout);
	free(h->kept.r);
	free(h->back.b);
	free(h->runs);
	free(h->run_seq);
	free(h);
}

uint64_t mtd_hand_swapped_bytes(const struct mtd_pageout_hand *h)
{
	struct mtd_pageout_stats st;

	if (!h || !h->po)
		return 0;
	mtd_pageout_get_stats(h->po, &st);
	return st.swapped_pages << VMM_PAGE_SHIFT;
}

const struct mtd_ram_layout *mtd_hand_layout(const struct mtd_pageout_hand *h)
{
	return h ? h->layout : NULL;
}

/* Why the map cannot be opened: the state says so when host-side eviction is asked for;
 * when the map is only read for the guest's free memory (return=balloon or reclaim), the
 * hand stays off and the reason goes to the debug log. */
static void refuse(struct mtd_pageout_hand *h, bool evicting, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct mtd_pageout_hand *h, bool evicting, const char *fmt, ...)
{
	char why[sizeof(h->hs.why)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(h->pending_why, sizeof(h->pending_why), "%s", why);
	if (evicting)
		set_state(h, MTD_PAGEOUT_REFUSED, "%s", why);
	else
		mtd_debug("%s: guest RAM map not read for its free pages: %s", h->name, why);
}

/* The operator's line for the map, once host-side eviction is in force on it (the map may
 * have been opened earlier under balloon or reclaim, for the free pages alone). */
static void announce(struct mtd_pageout_hand *h)
{
	char desc[1024];

	if (mtd_ram_layout_describe(h->layout, desc, sizeof(desc)) < 0)
		snprintf(desc, sizeof(desc), "%zu regions", h->layout->nr);
	mtd_notice("%s: guest RAM map checked: %" PRIu64 " MiB can be paged out (%s)%s%s", h->name,
		   h->layout->evictable_bytes / MiB, desc, h->layout->why[0] ? "; " : "",
		   h->layout->why);
	h->announced = true;
}

/* A monitor that does not answer yet (QEMU starting, its main loop busy), or answers that
 * it is not ready: the map may be read in a moment. */
static bool may_pass(int rc)
{
	return rc == -ETIMEDOUT || rc == -EIO || rc == -EAGAIN || rc == -EBUSY || rc == -ENOTCONN ||
	       rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPIPE;
}

/* A refusal that may pass: said so, and tried again at the next interval, not a requery
 * later. */
static void refuse_for_now(struct mtd_pageout_hand *h, bool evicting, uint64_t now_ms,
			   uint64_t interval_ms, const char *why)
{
	h->next_setup_ms = now_ms + interval_ms;
	refuse(h, evicting, "%s (QEMU may not be ready yet: tried again every %" PRIu64 " s)", why,
	       (interval_ms + 999) / 1000);
}

/* Query the layout and open the actuator; on failure, refuse() says why.  True when the
 * map is open.  evicting: host-side eviction is in force (else the map is only read for
 * the pages that hold nothing, mtd_hand_mark_free). */
static bool setup(struct mtd_pageout_hand *h, uint64_t now_ms, uint64_t interval_ms, bool evicting)
{
	char err[200] = "";
	int rc;

	if (h->po) {
		if (evicting && !h->announced)
			announce(h);
		return true;
	}
	if (now_ms < h->next_setup_ms) {
		/* Refused recently: the state still says why, unless the map was only read for
		 * its free pages until now (the refusal went to the debug log). */
		if (evicting && h->hs.state != MTD_PAGEOUT_REFUSED)
			set_state(h, MTD_PAGEOUT_REFUSED, "%s",
				  h->pending_why[0] ? h->pending_why
						    : "the guest RAM map was not read yet");
		return false;
	}
	h->next_setup_ms = now_ms + h->cfg.requery_ms;
	if (!h->live) {
		refuse(h, evicting,
		       "no live page-level access source (source %s): only the guest's own "
		       "accessed bits say which pages are cold",
		       h->source_name);
		return false;
	}
	if (!h->qmp || h->pid <= 0) {
		refuse(h, evicting,
		       "QEMU's monitor or process is not known, so its memory map cannot be read");
		return false;
	}
	if (!h->layout && !(h->layout = calloc(1, sizeof(*h->layout)))) {
		refuse(h, evicting, "out of memory");
		return false;
	}
	rc = mtd_ram_layout_query(h->qmp, h->qmp_ctx, h->pid, h->proc_root, h->layout);
	if (rc < 0 && may_pass(rc)) {
		refuse_for_now(h, evicting, now_ms, interval_ms, h->layout->why);
		return false;
	}
	if (rc < 0 || !h->layout->sure || !h->layout->evictable_bytes) {
		refuse(h, evicting, "%s",
		       h->layout->why[0]
			   ? h->layout->why
			   : "QEMU's guest RAM map shows no memory that can be paged out");
		return false;
	}
	rc = mtd_pageout_open(h->pid, h->layout, h->proc_root, &h->po, err, sizeof(err));
	if (rc < 0) {
		refuse(h, evicting, "%s", err);
		return false;
	}
	struct mtd_pageout_stats st;
	mtd_pageout_get_stats(h->po, &st);
	if (evicting)
		announce(h);
	else
		mtd_info("%s: guest RAM map read: host-side eviction is off; the map says which "
			 "pages the guest's free page reporting and balloon emptied",
			 h->name);
	if (st.adopted_pages)
		mtd_notice("%s: %" PRIu64 " MiB of guest RAM were already in host swap", h->name,
			   (st.adopted_pages << VMM_PAGE_SHIFT) / MiB);
	if (!st.pfn_visible)
		mtd_info("%s: pagemap shows no frame numbers (no CAP_SYS_ADMIN): khugepaged's "
			 "collapses will count as refaults",
			 h->name);
	(void)mtd_pageout_read_thp(h->sys_root, &h->thp);
	h->thp_read_ms = now_ms;
	return true;
}

/* The map can change under a running VM (DIMM hotplug or unplug): a cheap check of the
 * mappings every interval, the whole query every requery_ms or when the check fails. */
static void keep_layout(struct mtd_pageout_hand *h, uint64_t now_ms, bool evicting)
{
	struct mtd_ram_layout *nl;
	bool stale = mtd_ram_layout_recheck(h->layout, h->pid, h->proc_root) < 0;

	if (!stale && now_ms < h->next_setup_ms)
		return;
	h->next_setup_ms = now_ms + h->cfg.requery_ms;
	nl = calloc(1, sizeof(*nl));
	if (!nl)
		return;
	int rc = mtd_ram_layout_query(h->qmp, h->qmp_ctx, h->pid, h->proc_root, nl);
	if (rc == 0 && nl->sure && mtd_ram_layout_same(nl, h->layout)) {
		free(nl);
		return;
	}
	if (rc < 0 || !nl->sure || !nl->evictable_bytes) {
		/* Stop here; what is in swap stays there and comes back as it is touched. */
		mtd_pageout_close(h->po);
		h->po = NULL;
		refuse(h, evicting, "the guest RAM map changed: %s", nl->why);
		free(h->layout);
		h->layout = nl;
		return;
	}
	mtd_log(evicting ? MTD_LOG_NOTICE : MTD_LOG_INFO,
		"%s: guest RAM map changed: %" PRIu64 " MiB can now be paged out", h->name,
		nl->evictable_bytes / MiB);
	if (mtd_pageout_set_layout(h->po, nl) < 0) {
		free(nl);
		return;
	}
	free(h->layout);
	h->layout = nl;
}

/* ---- Step 2a: feedback ------------------------------------------------------------- */

static void on_refault(void *arg, uint64_t gpa)
{
	struct mtd_pageout_hand *h = arg;
	struct vmm_refault rf;

	if (h->job_reading) {
		/* QEMU read it for a migration, snapshot or dump: the guest did not use it.
		 * Resident again, so back in libvmm, in the oldest generation (seq 0: the first
		 * live one), and not a refault for the controller. */
		if (vmm_put_back(h->g, gpa, 1, 0) < 0)
			(void)vmm_restore(h->g, gpa, 1);
		h->scan_job_reads++;
		return;
	}

	/* libvmm records the distance and tier; a page it already saw come back (the source's
	 * walk found it young first) is not counted twice. */
	(void)vmm_refault(h->g, gpa, &rf);
}

static void on_restored(void *arg, uint64_t gpa, uint64_t npages)
{
	struct mtd_pageout_hand *h = arg;

	/* QEMU reading an empty page for a migration maps it (the zero page): not a use. */
	if (h->job_reading && vmm_put_back(h->g, gpa, npages, 0) == 0)
		return;
	(void)vmm_restore(h->g, gpa, npages);
}

void mtd_hand_feedback(struct mtd_pageout_hand *h, struct vmm_guest *g, uint64_t now_ms)
{
	static const struct mtd_pageout_scan_ops ops = {.refault = on_refault,
							.restored = on_restored};
	struct mtd_pageout_scan_result res;

	if (!h || !h->po || !g)
		return;
	h->g = g;
	h->job_reading = h->job_now || h->job_before;
	h->scan_job_reads = 0;
	int rc = mtd_pageout_scan(h->po, &ops, h, &res);
	h->g = NULL;
	h->job_reads += h->scan_job_reads;
	res.refaults -= h->scan_job_reads < res.refaults ? h->scan_job_reads : res.refaults;
	if (h->scan_job_reads)
		mtd_info("%s: %" PRIu64
			 " MiB read back from host swap by QEMU itself (a migration, "
			 "snapshot or dump), not counted as refaults",
			 h->name, (h->scan_job_reads << VMM_PAGE_SHIFT) / MiB);
	if (rc == -ESRCH) {
		mtd_pageout_close(h->po);
		h->po = NULL;
		set_state(h, MTD_PAGEOUT_REFUSED, "QEMU (pid %d) is gone", h->pid);
		return;
	}
	if (h->last_scan_ms && now_ms > h->last_scan_ms)
		h->swapin_per_s =
		    (double)res.refaults * 1000.0 / (double)(now_ms - h->last_scan_ms);
	h->last_scan_ms = now_ms;
	if (res.collapsed_pages)
		mtd_info("%s: khugepaged read %" PRIu64 " swapped pages back into huge pages",
			 h->name, res.collapsed_pages);
	if (res.refaults || res.filled_pages || res.dropped_pages)
		mtd_debug("%s: refault scan: %" PRIu64 " refaults, %" PRIu64
			  " empty pages used, %" PRIu64 " dropped by QEMU, %" PRIu64
			  " blocks in %" PRIu64 " us",
			  h->name, res.refaults, res.filled_pages, res.dropped_pages,
			  res.blocks_read, res.ns / 1000);
}

static void on_empty(void *arg, uint64_t gpa, uint64_t npages)
{
	struct mtd_pageout_hand *h = arg;

	(void)vmm_hint_free(h->g, gpa, npages); /* -ERANGE: outside libvmm's layout, skip */
}

void mtd_hand_mark_free(struct mtd_pageout_hand *h, struct vmm_guest *g)
{
	if (!h || !h->po || !g)
		return;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	h->g = g;
	int64_t n = mtd_pageout_find_empty(h->po, on_empty, h);
	h->g = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (n >= 0 && (uint64_t)n != h->free_pages)
		mtd_debug(
		    "%s: free page scan: %" PRIu64 " MiB hold nothing on the host (%ld us)",
		    h->name, ((uint64_t)n << VMM_PAGE_SHIFT) / MiB,
		    (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000));
	if (n >= 0)
		h->free_pages = (uint64_t)n;
	else if (n != -ESRCH) /* QEMU gone: the next refault scan says so */
		mtd_debug("%s: free page scan: %s", h->name, strerror((int)-n));
}

/* QEMU reading all of guest memory itself (a migration, a snapshot, a dump) reads every page
 * in host swap back: eviction waits, and what comes back until the next look is counted
 * apart (mtd_hand_feedback).  True, with the paused state, while one is under way or it
 * cannot be told. */
static bool memjob_pauses(struct mtd_pageout_hand *h)
{
	struct mtd_memjob j = {0};

	if (!h->memjob)
		return false;
	int rc = h->memjob(h->memjob_ctx, &j);
	h->job_before = h->job_now;
	if (rc < 0) {
		/* A synchronous savevm or dump holds QEMU's monitor: it looks like this. */
		h->job_now = true;
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "cannot tell whether QEMU is reading all of guest memory (a migration, "
			  "snapshot or dump): %s",
			  strerror(-rc));
		return true;
	}
	h->job_now = j.active;
	if (!j.active)
		return false;
	set_state(h, MTD_PAGEOUT_PAUSED,
		  "QEMU is reading all of guest memory itself (%s): host-side eviction waits, "
		  "and the pages it reads back from host swap are not counted as refaults",
		  j.what[0] ? j.what : "?");
	return true;
}

/* ---- Step 5b: eviction ------------------------------------------------------------- */

/* Remember kept pages for vmm_put_back at the end of the round; they stay evicted in libvmm
 * until then, so that the hand's next batch goes on to other cold pages.  Without memory
 * for the list they are restored at once (young: safe, only less exact). */
static void back_add(struct mtd_pageout_hand *h, uint64_t gpa, uint64_t npages, uint64_t seq)
{
	struct back_list *b = &h->back;

	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct back *nb = realloc(b->b, cap * sizeof(*nb));
		if (!nb) {
			(void)vmm_restore(h->g, gpa, npages);
			return;
		}
		b->b = nb;
		b->cap = cap;
	}
	b->b[b->n++] = (struct back){.gpa = gpa, .npages = npages, .seq = seq};
}

static void on_kept(void *arg, uint64_t gpa, uint64_t npages, enum mtd_pageout_kept why)
{
	struct mtd_pageout_hand *h = arg;
	struct kept_list *k = &h->kept;
	uint64_t end = gpa + (npages << VMM_PAGE_SHIFT);

	(void)why;
	h->kept_now += npages;
	/* Each run came from one generation (vmm_evict_req.run_seq). */
	for (size_t i = 0; i < h->nr_runs_now; i++) {
		uint64_t rs = h->runs[i].gpa, re = rs + (h->runs[i].npages << VMM_PAGE_SHIFT);
		uint64_t a = gpa > rs ? gpa : rs, e = end < re ? end : re;
		if (a < e)
			back_add(h, a, (e - a) >> VMM_PAGE_SHIFT, h->run_seq[i]);
	}
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256;
		struct vmm_run *r = realloc(k->r, cap * sizeof(*r));
		if (!r)
			return; /* the source is then told about a page that stayed: harmless */
		k->r = r;
		k->cap = cap;
	}
	k->r[k->n++] = (struct vmm_run){.gpa = gpa, .npages = npages};
}

/* The round's kept pages go back to the generations they left: not used, so not young;
 * a generation since merged hands them to the next live one (vmm_put_back). */
static void put_back(struct mtd_pageout_hand *h, struct vmm_guest *g)
{
	for (size_t i = 0; i < h->back.n; i++) {
		const struct back *b = &h->back.b[i];
		if (vmm_put_back(g, b->gpa, b->npages, b->seq) < 0)
			(void)vmm_restore(g, b->gpa, b->npages);
	}
	h->back.n = 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct vmm_run *x = a, *y = b;
	return (x->gpa > y->gpa) - (x->gpa < y->gpa);
}

/* Tell the source which pages left: runs minus the kept ones (both sorted here). */
static void tell_source(struct mtd_pageout_hand *h, struct vmm_run *runs, size_t n,
			const struct mtd_hand_input *in)
{
	struct vmm_run out[64];
	size_t no = 0, ki = 0;

	if (!in->evicted)
		return;
	qsort(runs, n, sizeof(*runs), cmp_run);
	qsort(h->kept.r, h->kept.n, sizeof(*h->kept.r), cmp_run);
	for (size_t i = 0; i < n; i++) {
		uint64_t at = runs[i].gpa, end = runs[i].gpa + (runs[i].npages << VMM_PAGE_SHIFT);
		while (at < end) {
			while (ki < h->kept.n &&
			       h->kept.r[ki].gpa + (h->kept.r[ki].npages << VMM_PAGE_SHIFT) <= at)
				ki++;
			uint64_t stop = end;
			if (ki < h->kept.n && h->kept.r[ki].gpa <= at) {
				at = h->kept.r[ki].gpa + (h->kept.r[ki].npages << VMM_PAGE_SHIFT);
				continue;
			}
			if (ki < h->kept.n && h->kept.r[ki].gpa < stop)
				stop = h->kept.r[ki].gpa;
			out[no++] =
			    (struct vmm_run){.gpa = at, .npages = (stop - at) >> VMM_PAGE_SHIFT};
			if (no == 64) {
				in->evicted(in->evicted_ctx, out, no);
				no = 0;
			}
			at = stop;
		}
	}
	if (no)
		in->evicted(in->evicted_ctx, out, no);
}

/* The grant goes back to the host's share once the batch is out (the swap figures now show
 * its pages). */
static void give_back(struct mtd_pageout_hand *h)
{
	mtd_swap_taker_give_back(&h->taker);
}

/* Paused: the host has no swap, or its swap has no room for the next cold run (or none at
 * all past the reserve), or a zram pool at its memory limit would refuse the writes.  Cold
 * pages stay in guest RAM; nothing is lost. */
static void say_full(struct mtd_pageout_hand *h, const struct mtd_swap_grant *g)
{
	char why[sizeof(h->hs.why)];

	mtd_swap_grant_why(g, h->cfg.swap_reserve_bytes, why, sizeof(why));
	set_state(h, MTD_PAGEOUT_PAUSED, "%s", why);
}

/* Room in swap for this VM now, in pages (a grant from the host's share, given back after
 * the batch: h->taker.granted); 0 with a paused state when there is none. */
static uint64_t swap_budget(struct mtd_pageout_hand *h, uint64_t want_bytes)
{
	struct mtd_swap_grant g = {.binding = -1};
	int rc;

	rc = mtd_swap_taker_take(&h->taker, want_bytes, h->cfg.swap_reserve_bytes, &g);
	h->swap_known = rc == 0;
	if (!h->swap_known) {
		set_state(h, MTD_PAGEOUT_PAUSED, "cannot read the host's swap figures: %s",
			  strerror(-rc));
		return 0;
	}
	h->swap = g.sw;
	/* No swap; or full: nothing past the reserve (a zram pool's limit counts, swap_stat.h),
	 * or no more room than when the last cold run did not fit (until swap frees up, trying
	 * again each tick would only flap the state). */
	if (!h->swap.total_bytes || !g.bytes ||
	    (h->full_room_bytes && g.room_bytes <= h->full_room_bytes)) {
		give_back(h);
		say_full(h, &g);
		return 0;
	}
	h->full_room_bytes = 0;
	return g.bytes >> VMM_PAGE_SHIFT;
}

void mtd_hand_step(struct mtd_pageout_hand *h, struct vmm_guest *g, const struct mtd_hand_input *in)
{
	uint64_t sent = 0, ns = 0, evicted = 0, budget;
	bool full = false;

	if (!h)
		return;
	if (in->mode != MTD_RETURN_PAGEOUT && in->mode != MTD_RETURN_AUTO) {
		/* Host-side eviction is off, but with a live source the map is still read: the
		 * pages that hold nothing on the host (reported free, ballooned) are marked free
		 * in libvmm (mtd_hand_mark_free), so the guest filling them again is no reuse. */
		if (h->live && setup(h, in->now_ms, in->interval_ms, false))
			keep_layout(h, in->now_ms, false);
		h->job_now = h->job_before = false; /* not looked at while off */
		set_state(h, MTD_PAGEOUT_OFF, NULL);
		return;
	}
	if (!setup(h, in->now_ms, in->interval_ms, true) || !g)
		return;
	keep_layout(h, in->now_ms, true);
	if (!h->po || memjob_pauses(h))
		return;
	if (!in->may_take) {
		set_state(h, MTD_PAGEOUT_PAUSED, "the controller is not taking memory now (%s)",
			  in->why_not ? in->why_not : "?");
		return;
	}
	bool giving = mtd_agent_giving(&h->giving, in->agent_asked, in->reply_seq, in->reply_done,
				       in->now_ms, in->interval_ms);
	if (in->mode == MTD_RETURN_AUTO && giving) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "the guest is still freeing what its agent was asked for");
		return;
	}
	/* Pages the source has not seen used are idle for as long as it has watched, no more:
	 * the first generation holds everything that was resident when it came. */
	const struct vmm_decision *d = in->decision;
	if (!d)
		return;
	if (d->gate == VMM_DECIDE_WATCHING) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "watching the guest for %" PRIu64
			  " s before the first eviction (the cold "
			  "age)",
			  d->cold_age_ms / 1000);
		return;
	}
	if (d->gate == VMM_DECIDE_HOLD) {
		set_state(h, MTD_PAGEOUT_PAUSED, "the refault controller holds: %s",
			  in->hold_why ? in->hold_why : "-");
		return;
	}
	/* Pages the kernel kept (shared, KSM, pinned, locked) are held by the actuator and
	 * reported kept at once; once per cold age they are tried again, as a page that stays
	 * cold that long would be. */
	if (in->now_ms - h->held_retry_ms >= d->cold_age_ms) {
		uint64_t held = mtd_pageout_retry_held(h->po);
		h->held_retry_ms = in->now_ms;
		if (held)
			mtd_debug("%s: %" PRIu64 " MiB the kernel kept are tried again", h->name,
				  (held << VMM_PAGE_SHIFT) / MiB);
	}
	if (!d->take_pages) {
		set_state(h, MTD_PAGEOUT_ACTIVE, "%s", h->layout->why);
		return;
	}
	/* The controller weighs (vmm/reclaim_ctl.c): pages that came back stay, the rest go,
	 * or a measured part of them. */
	budget = swap_budget(h, d->take_pages << VMM_PAGE_SHIFT);
	if (!budget)
		return;
	if (in->now_ms - h->thp_read_ms >= THP_REREAD_MS) {
		(void)mtd_pageout_read_thp(h->sys_root, &h->thp);
		h->thp_read_ms = in->now_ms;
	}
	set_state(h, MTD_PAGEOUT_ACTIVE, "%s", h->layout->why);

	/* Every page past the cold age, down to the floor, one step at most (vmm_decide).
	 * Pages kept stay evicted in libvmm until the round ends (put_back), so the next batch
	 * takes other cold pages, and do not count against the step; the pages tried are
	 * bounded all the same. */
	uint64_t left = d->take_pages, tried = 0;
	h->g = g;
	while (left && tried < 4 * d->take_pages) {
		struct vmm_evict_req req = {
		    .max_pages = left,
		    .min_age_ms = d->cold_age_ms,
		    .now_ms = in->now_ms,
		    .runs = h->runs,
		    .max_runs = EVICT_RUNS,
		    .pt = in->pt,
		    .reused_min_age_ms = d->reused_age_ms,
		    .run_seq = h->run_seq,
		};
		struct vmm_evict_result er;
		struct mtd_pageout_result pr;
		if (vmm_evict(g, &req, &er) < 0 || !er.evicted_pages)
			break;
		bool last = er.nr_runs < EVICT_RUNS && er.evicted_pages < req.max_pages;
		h->kept.n = 0;
		h->kept_now = 0;
		h->nr_runs_now = er.nr_runs;
		int rc = mtd_pageout_runs(h->po, h->runs, er.nr_runs, &h->thp,
					  budget > sent ? budget - sent : 0, on_kept, h, &pr);
		h->nr_runs_now = 0;
		tell_source(h, h->runs, er.nr_runs, in);
		sent += pr.swapped_pages;
		evicted += pr.swapped_pages + pr.empty_pages + pr.already_pages;
		ns += pr.ns;
		tried += er.evicted_pages;
		uint64_t went = er.evicted_pages > h->kept_now ? er.evicted_pages - h->kept_now : 0;
		left -= went < left ? went : left;
		if (rc == -ESRCH) {
			mtd_pageout_close(h->po);
			h->po = NULL;
			set_state(h, MTD_PAGEOUT_REFUSED, "QEMU (pid %d) is gone", h->pid);
			break;
		}
		if (rc < 0) {
			set_state(h, MTD_PAGEOUT_REFUSED, "pageout failed: %s", strerror(-rc));
			break;
		}
		if (pr.kept_pages[MTD_PO_KEPT_SWAP_FULL]) {
			full = true;
			break; /* the next round reads the swap figures again */
		}
		if (last)
			break; /* no more cold pages */
	}
	put_back(h, g);
	h->g = NULL;
	give_back(h);
	/* What is left past the reserve is smaller than the cold runs (whole 2 MiB blocks where
	 * the host backs them with a huge page): as full as an empty reserve, and said so
	 * (host_pageout's 160 MiB swap once stopped at 143 MiB, 17 MiB free, 16 in reserve,
	 * "active" with nothing going out).  Also when this round sent some pages first: its
	 * 32 MiB swap once stopped 68 KiB short of the reserve, the last runs that fit going out
	 * a few pages a round between the controller's pauses, and "full" was never said in
	 * 180 s.  The figures are read again after this round's pages went out: the line says
	 * what is free now, and the next rounds stay full until swap frees up past it. */
	if (full) {
		struct mtd_swap_grant now = {.binding = -1};

		now.sw = h->swap;
		if (sent)
			(void)mtd_swap_read(h->proc_root, h->sys_root, &now.sw);
		h->swap = now.sw;
		mtd_swap_grant_from(&now, h->cfg.swap_reserve_bytes, 0, 0);
		if (mtd_swap_full_after(&now)) {
			h->full_room_bytes = now.room_bytes;
			say_full(h, &now);
		}
	}
	if (sent) {
		h->last_out_bytes = sent << VMM_PAGE_SHIFT;
		h->last_out_ms = ns / 1000000;
	}
	/* A few pages cross the cold age every interval: said at debug level; a batch of a
	 * MiB or more at info, with its speed (docs/e2e.md reads it). */
	if (sent || evicted)
		mtd_log(sent >= 256 || evicted >= 256 ? MTD_LOG_INFO : MTD_LOG_DEBUG,
			"%s: pageout: %" PRIu64 " MiB to swap in %" PRIu64 " ms (%" PRIu64
			" MiB evicted in all, cold age %" PRIu64 " s)",
			h->name, (sent << VMM_PAGE_SHIFT) / MiB, ns / 1000000,
			(evicted << VMM_PAGE_SHIFT) / MiB, d->cold_age_ms / 1000);
}

/* ---- Step 6: status ---------------------------------------------------------------- */

void mtd_hand_publish(const struct mtd_pageout_hand *h, struct mtd_vm_status *st)
{
	struct mtd_vm_pageout *p = &st->pageout;

	memset(p, 0, sizeof(*p));
	if (!h)
		return;
	p->state = h->hs.state;
	snprintf(p->why, sizeof(p->why), "%s", h->hs.why);
	p->swapin_pages_per_s = h->swapin_per_s;
	p->free_bytes = h->po ? h->free_pages << VMM_PAGE_SHIFT : 0;
	p->last_out_bytes = h->last_out_bytes;
	p->last_out_ms = h->last_out_ms;
	if (h->layout && h->layout->sure)
		p->evictable_bytes = h->layout->evictable_bytes;
	if (h->po) {
		struct mtd_pageout_stats ps;
		mtd_pageout_get_stats(h->po, &ps);
		p->swapped_bytes = ps.swapped_pages << VMM_PAGE_SHIFT;
		p->out_total_bytes = ps.out_total << VMM_PAGE_SHIFT;
		p->refaults_total =
		    ps.refaults_total > h->job_reads ? ps.refaults_total - h->job_reads : 0;
		p->job_reads_total = h->job_reads;
		p->collapsed_total = ps.collapsed_total;
		p->held_bytes = ps.held_pages << VMM_PAGE_SHIFT;
		if (h->swap_known)
			p->pool_bytes = mtd_swap_pool_share(&h->swap, p->swapped_bytes);
	}
	/* What memtide returned (mtd_vm_figures) gains the resident drop host-side eviction
	 * made, which the balloon and the agent's figures counted as "untouched" (not resident
	 * without memtide's doing), less what the compressed pool holds for it. */
	if (st->observe)
		return;
	uint64_t add = p->swapped_bytes;
	if (st->host_rss_bytes && add > st->untouched_bytes)
		add = st->untouched_bytes; /* the resident size says no more is gone */
	st->untouched_bytes -= st->untouched_bytes > add ? add : st->untouched_bytes;
	st->returned_bytes += add;
	st->returned_bytes -=
	    st->returned_bytes > p->pool_bytes ? p->pool_bytes : st->returned_bytes;
	st->saved_bytes = st->returned_bytes;
}

uint64_t mtd_hand_reclaimable(const struct mtd_pageout_hand *h, uint64_t cold_resident_bytes)
{
	uint64_t room, used;
	double pool_share;

	if (!h || !h->po || h->hs.state == MTD_PAGEOUT_REFUSED || !h->swap_known)
		return 0;
	room = mtd_swap_room(&h->swap, NULL);
	room = room > h->cfg.swap_reserve_bytes ? room - h->cfg.swap_reserve_bytes : 0;
	if (cold_resident_bytes > room)
		cold_resident_bytes = room;
	/* Net of the pool: what the compressed copies cost so far, or half for a compressed
	 * pool that holds nothing yet (lzo-rle on typical guest memory: 2-4x). */
	used = mtd_swap_used(&h->swap);
	pool_share =
	    used ? (double)mtd_swap_pool(&h->swap) / (double)used : (h->swap.nr_zram ? 0.5 : 0.0);
	if (pool_share > 1.0)
		pool_share = 1.0;
	return (uint64_t)((double)cold_resident_bytes * (1.0 - pool_share));
}
