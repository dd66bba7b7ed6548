// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memcg_hand.c - host-side eviction through the VM's memory cgroup (memcg_hand.h).
 *
 * States (the pageout hand's, mtd.h enum mtd_pageout_state), each change logged once
 * (hand_state.h):
 *   OFF      return=balloon or reclaim;
 *   REFUSED  no cgroup it can use (the reason stays in why), or QEMU is gone;
 *   PAUSED   in force, not now: the controller is not taking, the decision's gate, the stall
 *            budget, the pool's verdict, no room in swap, no generation old enough yet;
 *   ACTIVE   evicting.
 */
#include "act/memcg_hand.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act/access_reset.h"
#include "act/balloon.h"
#include "act/hand_state.h"
#include "act/lru_gen.h"
#include "act/memcg.h"
#include "act/pageout.h"
#include "act/ram_layout.h"
#include "act/swap_share.h"
#include "act/swap_stat.h"
#include "act/vm_cgroup.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/turns.h"
#include "decide/aging_sight.h"
#include "decide/duty.h"
#include "decide/pool_worth.h"
#include "decide/stall_budget.h"
#include "vmm.h"

#define MiB          ((uint64_t)1 << 20)
#define PAGE         ((uint64_t)4096)
#define SWAPPINESS   200 /* lru_gen '-': anonymous memory only (guest RAM is anonymous) */
#define MAP_RETRY_MS 60000
#define STEPS_MAX    64         /* writes in one interval, whatever the credit */
#define MOVE_MAX     (64 * MiB) /* QEMU is moved only while it holds less (memory stays) */

struct mtd_memcg_hand {
	struct mtd_pageout_config cfg;
	char name[MTD_NAME_MAX];
	mtd_qmp_fn qmp;
	void *qmp_ctx;
	struct mtd_turns *turns;
	int (*memjob)(void *ctx, struct mtd_memjob *out);
	void *memjob_ctx;
	const char *proc_root, *sys_root;
	char lru_gen_path[256];

	struct mtd_vm_cgroup cg;

	/* readings */
	struct mtd_memcg_stat st;
	struct mtd_lru_view view;
	uint64_t cold_age_ms; /* the decision's, from the last step */
	uint64_t interval_ms;
	uint64_t young_bytes;

	/* refaults: page by page through the map, or the cgroup's major faults */
	struct mtd_ram_layout *layout;
	struct mtd_pageout *po;
	uint64_t next_map_ms;
	uint64_t majflt_last;
	uint64_t refaults_new, refaults_total;

	/* the rules */
	struct mtd_stall stall;
	struct mtd_pool_worth pool;
	struct mtd_duty duty;
	uint64_t sight_checked, sight_kept;
	uint64_t aged_ms; /* memtided's last '+' */

	/* the guest's access history, reset once (access_reset.h) */
	enum { RESET_NOT_YET, RESET_DONE, RESET_FAILED } reset;
	uint64_t reset_ms;
	char reset_why[200];
	bool reset_wait_said;

	/* what it did */
	uint64_t kept_total_pages;
	uint64_t last_out_bytes, last_out_ms;
	struct mtd_swap_stat swap;
	struct mtd_swap_taker taker; /* the host's swap budget, and this round's grant */

	struct mtd_hand_state hs;
	int pid;
	int mglru; /* 1 on, 0 classic, -1 not yet read */
	enum mtd_aging_sight sight;
	bool have_st;
	bool have_view;
	bool map_said;
	bool majflt_primed;
	bool swap_known;
};

/* The state vm show and the metrics publish, each change logged once (hand_state.h). */
#define set_state(h, s, ...)                                                                       \
	mtd_hand_state_set(&(h)->hs, (h)->name, "host-side reclaim (cgroup)", (s), __VA_ARGS__)

/* ---- setup ----------------------------------------------------------------------------- */

int mtd_memcg_hand_new(const struct mtd_pageout_config *cfg, const struct mtd_memcg_hand_env *env,
		       struct mtd_memcg_hand **out, char *why, size_t whylen)
{
	struct mtd_cgroup_env ce = {.proc_root = env->proc_root, .cg_root = env->cg_root};
	struct mtd_vm_cgroup cg;
	struct mtd_memcg_hand *h;
	int rc;

	*out = NULL;
	why[0] = '\0';
	if (env->qemu_pid <= 0) {
		snprintf(why, whylen, "QEMU's process is not known");
		return 0;
	}
	rc = mtd_cgroup_find(&ce, env->qemu_pid, &cg, why, whylen);
	uint64_t rss = 0;
	if (rc == -EBUSY && env->may_move &&
	    (mtd_cgroup_rss_anon(env->proc_root, env->qemu_pid, &rss) < 0 || rss > MOVE_MAX)) {
		size_t n = strlen(why);
		snprintf(why + n, whylen - n,
			 ", and it holds %" PRIu64 " MiB already, which a move would leave "
			 "charged there: start QEMU in a cgroup of its own (e.g. systemd-run "
			 "--scope -p MemoryAccounting=yes qemu-system-x86_64 ...)",
			 rss / MiB);
		rc = -EPERM;
	} else if (rc == -EBUSY && env->may_move) {
		char found[240];
		snprintf(found, sizeof(found), "%s", why);
		rc = mtd_cgroup_adopt(&ce, env->vm_name, env->qemu_pid, &cg, why, whylen);
		if (rc == 0)
			mtd_notice("%s: moved QEMU (pid %d) into the cgroup %s (%s); memory it was "
				   "charged before the move stays charged to %s",
				   env->vm_name, env->qemu_pid, cg.path, found, cg.moved_from);
	} else if (rc == -EBUSY) {
		size_t n = strlen(why);
		snprintf(why + n, whylen - n,
			 ": host-side reclaim needs a cgroup of the VM's own (libvirt makes one)");
	}
	if (rc < 0)
		return rc == -ENOMEM ? rc : 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->cfg = *cfg;
	snprintf(h->name, sizeof(h->name), "%s", env->vm_name ? env->vm_name : "?");
	h->pid = env->qemu_pid;
	h->qmp = env->qmp;
	h->qmp_ctx = env->qmp_ctx;
	h->turns = env->turns;
	h->memjob = env->memjob;
	h->memjob_ctx = env->memjob_ctx;
	h->taker = (struct mtd_swap_taker){.take = env->swap_take,
					   .done = env->swap_done,
					   .ctx = env->swap_ctx,
					   .proc_root = env->proc_root,
					   .sys_root = env->sys_root};
	h->proc_root = env->proc_root;
	h->sys_root = env->sys_root;
	snprintf(h->lru_gen_path, sizeof(h->lru_gen_path), "%s",
		 env->lru_gen_path ? env->lru_gen_path : "/sys/kernel/debug/lru_gen");
	h->cg = cg;
	h->mglru = -1;
	h->hs.state = h->hs.logged_state = MTD_PAGEOUT_OFF;
	mtd_info("%s: memory cgroup %s: host-side reclaim can go through it", h->name, cg.path);
	*out = h;
	return 0;
}

void mtd_memcg_hand_free(struct mtd_memcg_hand *h)
{
	if (!h)
		return;
	if (h->st.swap_bytes)
		mtd_notice("%s: %" PRIu64
			   " MiB of the guest's memory stay in host swap; the kernel "
			   "reads them back as the guest touches them",
			   h->name, h->st.swap_bytes / MiB);
	int rc = mtd_cgroup_remove_if_empty(&h->cg);
	if (rc == 0 && h->cg.created)
		mtd_info("%s: removed the cgroup %s memtided made (QEMU has left it)", h->name,
			 h->cg.path);
	mtd_pageout_close(h->po);
	free(h->layout);
	free(h);
}

/* The map that counts refaults page by page: QEMU's guest RAM from QMP, watched through
 * pagemap.  Without it the cgroup's major faults stand in. */
static void open_map(struct mtd_memcg_hand *h, uint64_t now_ms)
{
	char err[200] = "";

	if (h->po || !h->qmp || now_ms < h->next_map_ms)
		return;
	h->next_map_ms = now_ms + MAP_RETRY_MS;
	if (!h->layout && !(h->layout = calloc(1, sizeof(*h->layout))))
		return;
	int rc = mtd_ram_layout_query(h->qmp, h->qmp_ctx, h->pid, h->proc_root, h->layout);
	if (rc == 0 && h->layout->sure && h->layout->evictable_bytes)
		rc = mtd_pageout_open_watch(h->pid, h->layout, h->proc_root, &h->po, err,
					    sizeof(err));
	else
		snprintf(err, sizeof(err), "%.190s", h->layout->why);
	if (!h->po && !h->map_said) {
		mtd_info("%s: refaults counted from the cgroup's major faults (the guest RAM map "
			 "could not be read: %s)",
			 h->name, err[0] ? err : strerror(-rc));
		h->map_said = true;
	} else if (h->po) {
		mtd_info("%s: refaults counted page by page over %" PRIu64 " MiB of guest RAM",
			 h->name, h->layout->evictable_bytes / MiB);
	}
}

/* ---- Step 2a: feedback ----------------------------------------------------------------- */

static void count_refault(void *arg, uint64_t gpa)
{
	(void)gpa;
	((struct mtd_memcg_hand *)arg)->refaults_new++;
}

static uint64_t young_within(const struct mtd_memcg_hand *h, uint64_t age_ms)
{
	uint64_t pages = 0;

	for (unsigned i = 0; i < h->view.nr; i++)
		pages += mtd_lru_vec_anon_within(&h->view.v[i], age_ms);
	return pages * PAGE;
}

void mtd_memcg_hand_feedback(struct mtd_memcg_hand *h, uint64_t now_ms,
			     struct mtd_memcg_reading *out)
{
	memset(out, 0, sizeof(*out));
	if (!h || h->hs.state == MTD_PAGEOUT_REFUSED)
		return;
	int rc = mtd_memcg_read(h->cg.dir, &h->st);
	if (rc < 0) {
		h->have_st = false;
		set_state(h, MTD_PAGEOUT_REFUSED, "cannot read the cgroup %s: %s", h->cg.path,
			  strerror(-rc));
		return;
	}
	h->have_st = true;
	int on = mtd_lru_gen_enabled(h->sys_root);
	on = on > 0;
	if (on != h->mglru)
		mtd_notice(
		    "%s: the host's MGLRU is %s: host-side reclaim %s", h->name, on ? "on" : "off",
		    on ? "evicts by generation (lru_gen '-') at the cold age"
		       : "goes through memory.reclaim and the classic LRU, which has no ages; "
			 "turn MGLRU on for eviction by age (echo y > "
			 "/sys/kernel/mm/lru_gen/enabled: host-wide, the operator's call)");
	h->mglru = on;
	h->have_view = on && mtd_lru_gen_read(h->lru_gen_path, h->cg.path, &h->view) == 0;
	mtd_stall_note(&h->stall, h->st.psi_some_us, now_ms, h->cfg.stall_budget);

	/* Refaults: the map's scan is exact; the major faults are the cgroup's, QEMU's own
	 * file reads included. */
	uint64_t majflt = h->st.pgmajfault;
	if (h->po) {
		static const struct mtd_pageout_scan_ops ops = {.refault = count_refault};
		struct mtd_pageout_scan_result res;
		if (mtd_pageout_scan(h->po, &ops, h, &res) == -ESRCH) {
			mtd_pageout_close(h->po);
			h->po = NULL;
		}
	} else if (h->majflt_primed && majflt >= h->majflt_last) {
		h->refaults_new += majflt - h->majflt_last;
	}
	h->majflt_last = majflt;
	h->majflt_primed = true;

	out->valid = true;
	out->mglru = on;
	out->resident_bytes = h->st.anon_bytes;
	uint64_t age =
	    h->cold_age_ms ? h->cold_age_ms : 2 * (h->interval_ms ? h->interval_ms : 5000);
	h->young_bytes = h->have_view ? young_within(h, age) : h->st.anon_bytes;
	out->young_bytes = h->young_bytes;
	out->refaults = h->refaults_new;
	out->refaults_exact = h->po != NULL;
	out->stall = h->stall.frac;
	out->swapped_bytes = h->st.swap_bytes;
	h->refaults_total += h->refaults_new;
	h->refaults_new = 0;
}

/* ---- Step 5b: eviction ----------------------------------------------------------------- */

/* Age every lruvec whose youngest generation is older than spacing_ms: generations then lie
 * far enough apart for the cold age.  Returns whether any was aged. */
static bool age_if_due(struct mtd_memcg_hand *h, uint64_t spacing_ms)
{
	bool aged = false;

	for (unsigned i = 0; i < h->view.nr; i++) {
		const struct mtd_lru_vec *v = &h->view.v[i];
		if (!v->nr || v->g[v->nr - 1].age_ms < spacing_ms)
			continue;
		int rc = mtd_lru_gen_cmd(h->lru_gen_path, '+', v->memcg_id, v->node,
					 mtd_lru_vec_max_seq(v), 1, 1);
		if (rc == 0)
			aged = true;
		else
			mtd_debug("%s: lru_gen '+' on memcg %u node %d: %s", h->name, v->memcg_id,
				  v->node, strerror(-rc));
	}
	return aged;
}

/* Generations about half a cold age apart: the second oldest then lies a cold age back once
 * it is evictable. */
static uint64_t spacing_for(const struct vmm_decision *d, uint64_t interval_ms)
{
	return d->cold_age_ms / 2 > interval_ms ? d->cold_age_ms / 2 : interval_ms;
}

struct step_result {
	uint64_t taken_bytes; /* put in swap (memory.swap.current growth) */
	uint64_t kept_pages;  /* looked at and found used (MGLRU) */
	int64_t pool_growth;  /* the compressed pools over the write */
	uint64_t ms;
	int rc;
	bool exhausted; /* nothing more to take at this age */
};

/* One write to the kernel: '-' over the oldest generations of lruvec vi up to seq, or
 * memory.reclaim.  Its results from the cgroup's figures before and after. */
static void one_write(struct mtd_memcg_hand *h, int vi, uint64_t seq, uint64_t bytes,
		      struct step_result *r)
{
	struct mtd_memcg_stat before = h->st, after;
	struct mtd_swap_stat s0, s1;
	bool pools = mtd_swap_read(h->proc_root, h->sys_root, &s0) == 0;
	uint64_t old_before = vi >= 0 ? mtd_lru_vec_anon_through(&h->view.v[vi], seq) : 0;
	uint64_t t0 = mtd_mono_ms();

	memset(r, 0, sizeof(*r));
	if (vi >= 0)
		r->rc = mtd_lru_gen_cmd(h->lru_gen_path, '-', h->view.v[vi].memcg_id,
					h->view.v[vi].node, seq, SWAPPINESS, bytes / PAGE);
	else
		r->rc = mtd_memcg_reclaim(h->cg.dir, bytes);
	r->ms = mtd_mono_ms() - t0;
	if (mtd_memcg_read(h->cg.dir, &after) == 0) {
		h->st = after;
		r->taken_bytes =
		    after.swap_bytes > before.swap_bytes ? after.swap_bytes - before.swap_bytes : 0;
	}
	if (pools && mtd_swap_read(h->proc_root, h->sys_root, &s1) == 0)
		r->pool_growth = (int64_t)mtd_swap_pool(&s1) - (int64_t)mtd_swap_pool(&s0);
	if (vi >= 0) {
		struct mtd_lru_view nv;
		unsigned id = h->view.v[vi].memcg_id;
		int node = h->view.v[vi].node;
		if (mtd_lru_gen_read(h->lru_gen_path, h->cg.path, &nv) == 0) {
			h->view = nv;
			uint64_t old_after = 0;
			for (unsigned i = 0; i < nv.nr; i++)
				if (nv.v[i].memcg_id == id && nv.v[i].node == node)
					old_after = mtd_lru_vec_anon_through(&nv.v[i], seq);
			uint64_t gone = old_before > old_after ? old_before - old_after : 0;
			uint64_t taken = r->taken_bytes / PAGE;
			r->kept_pages = gone > taken ? gone - taken : 0;
			r->exhausted = old_after == 0;
		}
	}
	if (vi < 0 && (r->rc == -EAGAIN || r->taken_bytes < bytes / 4))
		r->exhausted = true; /* the classic LRU found little to take */
	if (vi >= 0 && r->rc == 0 && !r->taken_bytes)
		r->exhausted = true;
}

/* The lruvec and generation to evict next for the cold age: the one with the most pages in
 * generations old enough.  -1 without any. */
static int pick(const struct mtd_memcg_hand *h, uint64_t cold_age_ms, uint64_t *seq)
{
	int best = -1;
	uint64_t most = 0;

	for (unsigned i = 0; i < h->view.nr; i++) {
		uint64_t s;
		if (!mtd_lru_vec_evictable_seq(&h->view.v[i], cold_age_ms, &s))
			continue;
		uint64_t n = mtd_lru_vec_anon_through(&h->view.v[i], s);
		if (n > most) {
			most = n;
			best = (int)i;
			*seq = s;
		}
	}
	return best;
}

/* Reset the guest's access history once, before the first aging and eviction
 * (access_reset.h), unless QEMU is reading all of guest memory itself now (or cannot say):
 * then at a later step. */
static void reset_history(struct mtd_memcg_hand *h, uint64_t now_ms)
{
	struct mtd_memjob j = {0};

	if (h->reset != RESET_NOT_YET)
		return;
	int rc = h->memjob ? h->memjob(h->memjob_ctx, &j) : 0;
	if (rc < 0 || j.active) {
		if (!h->reset_wait_said)
			mtd_info("%s: the guest's access history is reset before the first "
				 "eviction, not while QEMU %s%s",
				 h->name,
				 rc < 0 ? "cannot say whether it reads all of guest memory: "
					: "reads all of guest memory itself: ",
				 rc < 0      ? strerror(-rc)
				 : j.what[0] ? j.what
					     : "?");
		h->reset_wait_said = true;
		return;
	}
	uint64_t t0 = mtd_mono_ms();
	rc = mtd_access_reset(h->proc_root, h->pid, h->reset_why, sizeof(h->reset_why));
	h->reset_ms = now_ms;
	if (rc < 0) {
		h->reset = RESET_FAILED;
		mtd_warn("%s: could not reset the guest's access history (%s): the first "
			 "eviction pass will find what the guest touched before memtided came "
			 "used, and keep it one cold age more",
			 h->name, h->reset_why);
		return;
	}
	h->reset = RESET_DONE;
	snprintf(h->reset_why, sizeof(h->reset_why),
		 "reset at attach (QEMU's clear_refs: KVM's and the host's accessed bits), %" PRIu64
		 " ms",
		 mtd_mono_ms() - t0);
	mtd_notice("%s: reset the guest's access history (QEMU pid %d, clear_refs 4 then 1, "
		   "%" PRIu64 " ms): eviction judges its pages by what it touches from now on; "
		   "the guest faults its working set back into KVM once",
		   h->name, h->pid, mtd_mono_ms() - t0);
}

/* The grant goes back to the host's share once the round's writes are done (memory.reclaim
 * returns when the kernel has reclaimed: the swap figures now show the pages). */
static void give_back(struct mtd_memcg_hand *h)
{
	mtd_swap_taker_give_back(&h->taker);
}

/* Room in swap for this round's writes: a grant from the host's share (h->taker.granted,
 * given back after them), as the pageout hand takes one; 0 with a paused state when there is
 * none. */
static uint64_t swap_budget(struct mtd_memcg_hand *h, uint64_t want_bytes)
{
	struct mtd_swap_grant g = {.binding = -1};
	char why[sizeof(h->hs.why)];
	int rc;

	rc = mtd_swap_taker_take(&h->taker, want_bytes, h->cfg.swap_reserve_bytes, &g);
	h->swap_known = rc == 0;
	if (!h->swap_known) {
		set_state(h, MTD_PAGEOUT_PAUSED, "cannot read the host's swap figures");
		return 0;
	}
	h->swap = g.sw;
	if (!g.sw.total_bytes || !g.bytes) {
		give_back(h);
		mtd_swap_grant_why(&g, h->cfg.swap_reserve_bytes, why, sizeof(why));
		set_state(h, MTD_PAGEOUT_PAUSED, "%s", why);
		return 0;
	}
	return g.bytes;
}

static bool gates(struct mtd_memcg_hand *h, const struct mtd_memcg_input *in)
{
	const struct vmm_decision *d = in->decision;
	char why[sizeof(h->hs.why)];

	if (!in->may_take) {
		set_state(h, MTD_PAGEOUT_PAUSED, "the controller is not taking memory now (%s)",
			  in->why_not ? in->why_not : "?");
		return false;
	}
	if (in->mode == MTD_RETURN_AUTO && in->agent_giving) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "the guest is still freeing what its agent was asked for");
		return false;
	}
	if (!d)
		return false;
	if (d->gate == VMM_DECIDE_WATCHING) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "watching the guest for %" PRIu64 " s before the first eviction (the "
			  "cold age)",
			  d->cold_age_ms / 1000);
		return false;
	}
	if (h->reset == RESET_NOT_YET) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "the guest's access history is not reset yet (QEMU is reading all of "
			  "guest memory, or cannot say)");
		return false;
	}
	if (h->reset == RESET_DONE && in->now_ms < h->reset_ms + d->cold_age_ms) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "the guest's access history was reset %" PRIu64
			  " s ago: eviction waits a cold age (%" PRIu64 " s) from it",
			  (in->now_ms - h->reset_ms) / 1000, d->cold_age_ms / 1000);
		return false;
	}
	if (d->gate == VMM_DECIDE_HOLD) {
		set_state(h, MTD_PAGEOUT_PAUSED, "the refault controller holds: %s",
			  in->hold_why ? in->hold_why : "-");
		return false;
	}
	if (d->gate == VMM_DECIDE_FLOOR || !d->take_pages) {
		set_state(h, MTD_PAGEOUT_PAUSED, "the guest is at its floor (policy min)");
		return false;
	}
	if (!mtd_stall_allows(&h->stall)) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "the guest waited for memory %.2f%% of the last interval, over its stall "
			  "budget of %.2f%% (PSI some)",
			  h->stall.frac * 100.0, h->cfg.stall_budget * 100.0);
		return false;
	}
	if (!mtd_pool_allows(&h->pool, in->now_ms)) {
		mtd_pool_why(&h->pool, in->now_ms, why, sizeof(why));
		set_state(h, MTD_PAGEOUT_PAUSED, "%s", why);
		return false;
	}
	return swap_budget(h, d->take_pages * PAGE) > 0;
}

/* The classic LRU has no ages: it takes only while the controller's cold age is below its
 * longest (refaults within the budget), and holds when they push it there. */
static bool classic_may(struct mtd_memcg_hand *h, const struct vmm_decision *d, uint64_t max_age_ms)
{
	if (d->cold_age_ms < max_age_ms)
		return true;
	set_state(h, MTD_PAGEOUT_PAUSED,
		  "MGLRU is off: memory.reclaim has no ages to be told, so it takes only while "
		  "refaults stay within their budget (the cold age is at its longest, %" PRIu64
		  " s)",
		  d->cold_age_ms / 1000);
	return false;
}

void mtd_memcg_hand_step(struct mtd_memcg_hand *h, const struct mtd_memcg_input *in)
{
	const struct vmm_decision *d = in->decision;
	uint64_t taken = 0, kept = 0, spent = 0;
	unsigned writes = 0;

	if (!h)
		return;
	h->interval_ms = in->interval_ms;
	if (d)
		h->cold_age_ms = d->cold_age_ms;
	if (in->mode != MTD_RETURN_PAGEOUT && in->mode != MTD_RETURN_AUTO) {
		set_state(h, MTD_PAGEOUT_OFF, NULL);
		return;
	}
	if (h->hs.state == MTD_PAGEOUT_REFUSED || !h->have_st || !d)
		return;
	open_map(h, in->now_ms);
	if (in->may_age)
		reset_history(h, in->now_ms);
	mtd_duty_earn(&h->duty, in->now_ms, h->cfg.duty, in->interval_ms);
	/* The cgroup is aged on its spacing whenever memtided watches the VM - also while the
	 * controller watches the guest for its first cold age, and while the VM's policy says
	 * enabled=no, as a page-level source keeps sampling then - so the generation that holds
	 * what the guest had when memtided came has a successor a cold age old when eviction may
	 * start, and the first eviction takes it at once instead of one more cold age later
	 * (seen on the KVM stand: the first eviction 68 s after the policy was enabled).  Aging
	 * only starts generations; it takes nothing.  Observe-only: not even that. */
	bool after_aging = false;
	if (h->mglru && h->have_view && in->may_age &&
	    age_if_due(h, spacing_for(d, in->interval_ms))) {
		h->aged_ms = in->now_ms;
		after_aging = true;
		(void)mtd_lru_gen_read(h->lru_gen_path, h->cg.path, &h->view);
	}
	if (!gates(h, in)) /* the last gate takes the round's grant of swap */
		return;
	if (!h->mglru && !classic_may(h, d, in->max_age_ms)) {
		give_back(h);
		return;
	}
	if (!mtd_duty_may(&h->duty)) {
		give_back(h);
		set_state(h, MTD_PAGEOUT_ACTIVE,
			  "pacing: the last writes used this interval's "
			  "share of the clock");
		return;
	}
	uint64_t limit =
	    d->take_pages * PAGE < h->taker.granted ? d->take_pages * PAGE : h->taker.granted;
	if (h->mglru && !h->have_view) {
		give_back(h);
		set_state(h, MTD_PAGEOUT_PAUSED, "cannot read the kernel's generations (%s)",
			  h->lru_gen_path);
		return;
	}
	bool turn = h->turns && mtd_turns_take(h->turns); /* NULL: no turns (memcg_hand.h) */
	while (taken < limit && mtd_duty_may(&h->duty) && writes < STEPS_MAX) {
		uint64_t seq = 0;
		int vi = -1;
		if (h->mglru && (vi = pick(h, d->cold_age_ms, &seq)) < 0)
			break;
		uint64_t want =
		    limit - taken < h->cfg.step_bytes ? limit - taken : h->cfg.step_bytes;
		struct step_result r;
		one_write(h, vi, seq, want, &r);
		writes++;
		mtd_duty_spend(&h->duty, r.ms);
		spent += r.ms;
		taken += r.taken_bytes;
		kept += r.kept_pages;
		if (r.taken_bytes || r.pool_growth)
			mtd_pool_note(&h->pool, r.taken_bytes, r.pool_growth, h->cfg.min_saving,
				      in->now_ms);
		if (after_aging && h->sight == MTD_AGING_UNTESTED) {
			h->sight_checked += r.kept_pages + r.taken_bytes / PAGE;
			h->sight_kept += r.kept_pages;
			h->sight = mtd_aging_verdict(h->sight_checked, h->sight_kept);
			if (h->sight != MTD_AGING_UNTESTED)
				mtd_notice(
				    "%s: the kernel's aging %s this guest's accesses: eviction "
				    "right after an aging found %" PRIu64 " of %" PRIu64
				    " MiB used (%s)",
				    h->name, h->sight == MTD_AGING_BLIND ? "does not see" : "sees",
				    h->sight_kept * PAGE / MiB, h->sight_checked * PAGE / MiB,
				    h->sight == MTD_AGING_BLIND
					? "the working set is what eviction keeps"
					: "the generations are the guest's own");
		}
		if (r.rc < 0 && r.rc != -EAGAIN) {
			if (r.rc != -EINVAL) /* a stale generation: read again next interval */
				mtd_info("%s: reclaim write: %s", h->name, strerror(-r.rc));
			break;
		}
		if (r.exhausted || !mtd_pool_allows(&h->pool, in->now_ms))
			break;
	}
	if (h->turns)
		mtd_turns_give(h->turns, turn);
	give_back(h);
	h->kept_total_pages += kept;
	if (h->po && taken) {
		int64_t n = mtd_pageout_adopt(h->po);
		if (n == -ESRCH) {
			mtd_pageout_close(h->po);
			h->po = NULL;
		}
	}
	if (taken) {
		h->last_out_bytes = taken;
		h->last_out_ms = spent;
	}
	if (!writes && h->mglru) {
		set_state(h, MTD_PAGEOUT_PAUSED,
			  "no generation is old enough yet (the cold age is %" PRIu64 " s)",
			  d->cold_age_ms / 1000);
		return;
	}
	set_state(h, MTD_PAGEOUT_ACTIVE, "%s", h->mglru ? "MGLRU, by generation" : "classic LRU");
	if (taken || kept)
		mtd_log(taken >= MiB ? MTD_LOG_INFO : MTD_LOG_DEBUG,
			"%s: reclaim: %" PRIu64 " MiB to swap in %" PRIu64 " ms, %" PRIu64
			" MiB found used and kept (%u writes, cold age %" PRIu64 " s)",
			h->name, taken / MiB, spent, kept * PAGE / MiB, writes,
			d->cold_age_ms / 1000);
}

/* ---- Step 6: status -------------------------------------------------------------------- */

const char *mtd_memcg_hand_estimate(const struct mtd_memcg_hand *h)
{
	if (!h || !h->mglru)
		return "classic LRU (resident)";
	return h->sight == MTD_AGING_SEES ? "host MGLRU" : "host reclaim (what eviction keeps)";
}

bool mtd_memcg_hand_young(const struct mtd_memcg_hand *h, uint64_t *young_bytes, bool *by_age)
{
	if (!h || !h->have_st)
		return false;
	*young_bytes = h->young_bytes;
	*by_age = h->mglru == 1;
	return true;
}

int mtd_memcg_hand_describe(const struct mtd_memcg_hand *h, char *buf, size_t len)
{
	if (!h)
		return -EOPNOTSUPP;
	if (h->mglru == 1)
		snprintf(buf, len,
			 "the kernel's reclaim asks KVM which pages the guest used (cgroup %s, "
			 "MGLRU; aging %s): %" PRIu64 " MiB used within the cold age",
			 h->cg.path, mtd_aging_sight_name(h->sight), h->young_bytes / MiB);
	else
		snprintf(buf, len,
			 "the kernel's reclaim asks KVM which pages the guest used (cgroup %s, "
			 "classic LRU: no ages): %" PRIu64 " MiB resident",
			 h->cg.path, h->st.anon_bytes / MiB);
	return 0;
}

void mtd_memcg_hand_publish(const struct mtd_memcg_hand *h, struct mtd_vm_status *st)
{
	struct mtd_vm_memcg *m = &st->memcg;
	struct mtd_vm_pageout *p = &st->pageout;

	memset(m, 0, sizeof(*m));
	if (!h)
		return;
	m->in_use = true;
	snprintf(m->cgroup, sizeof(m->cgroup), "%.159s", h->cg.path);
	if (h->cg.moved)
		snprintf(m->moved_from, sizeof(m->moved_from), "%.95s", h->cg.moved_from);
	snprintf(m->mechanism, sizeof(m->mechanism), "%s",
		 h->mglru == 1   ? "mglru"
		 : h->mglru == 0 ? "classic"
				 : "");
	snprintf(m->aging, sizeof(m->aging), "%s", mtd_aging_sight_name(h->sight));
	snprintf(m->estimate, sizeof(m->estimate), "%s", mtd_memcg_hand_estimate(h));
	m->current_bytes = h->st.current_bytes;
	m->swap_bytes = h->st.swap_bytes;
	m->young_bytes = h->young_bytes;
	m->kept_total_bytes = h->kept_total_pages * PAGE;
	m->refaults_exact = h->po != NULL;
	m->stall_pct = h->stall.frac * 100.0;
	m->stall_budget_pct = h->cfg.stall_budget * 100.0;
	m->stall_total_ms = h->stall.total_us / 1000;
	m->pool_saving_pct = h->pool.measured ? h->pool.saving * 100.0 : -1.0;
	m->incompressible = h->pool.holding;
	if (h->reset == RESET_DONE)
		snprintf(m->history, sizeof(m->history), "%.199s", h->reset_why);
	else if (h->reset == RESET_FAILED)
		snprintf(m->history, sizeof(m->history),
			 "NOT reset (%.150s): the first eviction pass keeps what the guest "
			 "touched before",
			 h->reset_why);
	else
		snprintf(m->history, sizeof(m->history),
			 "not reset yet (it is once, when eviction is in force)");

	/* The pageout object carries the state and the figures both hands share. */
	memset(p, 0, sizeof(*p));
	p->state = h->hs.state;
	snprintf(p->why, sizeof(p->why), "%s", h->hs.why);
	p->swapped_bytes = h->st.swap_bytes;
	p->refaults_total = h->refaults_total;
	p->last_out_bytes = h->last_out_bytes;
	p->last_out_ms = h->last_out_ms;
	if (h->po) {
		struct mtd_pageout_stats ps;
		mtd_pageout_get_stats(h->po, &ps);
		p->out_total_bytes = ps.out_total << VMM_PAGE_SHIFT;
		p->evictable_bytes = ps.evictable_pages << VMM_PAGE_SHIFT;
	}
	if (h->swap_known)
		p->pool_bytes = mtd_swap_pool_share(&h->swap, p->swapped_bytes);
	if (st->observe)
		return;
	uint64_t add = p->swapped_bytes;
	if (st->host_rss_bytes && add > st->untouched_bytes)
		add = st->untouched_bytes;
	st->untouched_bytes -= st->untouched_bytes > add ? add : st->untouched_bytes;
	st->returned_bytes += add;
	st->returned_bytes -=
	    st->returned_bytes > p->pool_bytes ? p->pool_bytes : st->returned_bytes;
	st->saved_bytes = st->returned_bytes;
}

uint64_t mtd_memcg_hand_reclaimable(const struct mtd_memcg_hand *h, uint64_t cold_resident_bytes)
{
	if (!h || h->hs.state == MTD_PAGEOUT_REFUSED || !h->swap_known || h->pool.holding)
		return 0;
	uint64_t room = h->swap.free_bytes > h->cfg.swap_reserve_bytes
			    ? h->swap.free_bytes - h->cfg.swap_reserve_bytes
			    : 0;
	if (cold_resident_bytes > room)
		cold_resident_bytes = room;
	double saving = h->pool.measured ? h->pool.saving : (h->swap.nr_zram ? 0.5 : 1.0);
	if (saving < 0)
		saving = 0;
	return (uint64_t)((double)cold_resident_bytes * saving);
}

uint64_t mtd_memcg_hand_swapped_bytes(const struct mtd_memcg_hand *h)
{
	return h ? h->st.swap_bytes : 0;
}
