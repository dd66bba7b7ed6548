/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sim.h - libsim, memtide's policy lab: traces, generators, the replay core and policies.
 *
 * memtide-sim answers "how much memory does a policy save, at what refault cost" by
 * replaying a recorded (or generated) access trace of one guest against a policy.  The
 * parts, in the order a trace meets them:
 *
 *   trace      sim/trace.c      in-memory trace; reader and writer of the file format
 *                                (docs/trace-format.md): magic + version header, then a zstd
 *                                stream of run-length coded page sets per epoch.
 *   recording  sim/lackey.c     valgrind lackey output -> trace (memtide-trace).
 *              sim/gen.c        synthetic generators (zipf, grow-shrink, phases, scan,
 *                                sparse huge pages, step growth).
 *   replay     sim/replay.c     the model of "resident" and "refault"; calls the policy at
 *                                the end of every epoch; measures everything.
 *              sim/fpr.c        free page reporting (2 MiB blocks, ~2 s delay).
 *              sim/lru2.c       Linux's active/inactive LRU (guest reclaim under a limit).
 *   policies   sim/policy_*.c   none, fpr-only, mom, damon, lru2, memtide, oracle.
 *   analysis   sim/frontier.c   savings at a refault budget, sweeps, CSV and gnuplot.
 *
 * Page numbering: a trace names pages by dense index over its RAM layout (the first page of
 * the first range is 0), so per-page state is a flat array; sim_page_gpa() maps back.
 * Single-threaded; nothing here keeps global state.
 */
#ifndef MEMTIDE_SIM_H
#define MEMTIDE_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vmm.h"

#define SIM_PAGE_SIZE     4096u
#define SIM_BLOCK_PAGES   512u /* one 2 MiB block: the unit of free page reporting */
/* A page index with this bit set in an epoch's access list was written. */
#define SIM_ACC_WRITE     0x80000000u
#define SIM_ACC_PAGE(a)   ((a) & ~SIM_ACC_WRITE)
/* Largest RAM a trace may describe: page indices must fit below SIM_ACC_WRITE. */
#define SIM_MAX_RAM_PAGES (1ull << 30)

/* ======================================================================================
 * Trace
 * ====================================================================================== */

struct sim_epoch {
	uint64_t t_ms;    /* start of the epoch; the epoch lasts until the next one starts */
	uint32_t nr_acc;  /* pages accessed in the epoch */
	uint32_t nr_free; /* pages the guest freed at the end of the epoch */
	uint32_t *acc;    /* ascending page indices, SIM_ACC_WRITE set when written */
	uint32_t *freed;  /* ascending page indices */
};

struct sim_trace {
	uint32_t page_size;    /* bytes; version 1 supports 4096 only */
	size_t nr_ram;         /* ranges in the layout */
	struct vmm_range *ram; /* GPA ranges, 2 MiB aligned, ascending, disjoint */
	uint64_t ram_pages;    /* pages in the layout */
	size_t nr_epochs, cap_epochs;
	struct sim_epoch *epochs;
	uint64_t end_ms; /* end of the last epoch */
	char source[64]; /* what produced it ("gen:zipf", "lackey:gzip"), for reports */
};

/* An empty trace with the given layout (copied).  Returns 0, -EINVAL (unaligned, unsorted
 * or empty layout, more than SIM_MAX_RAM_PAGES), -ENOMEM. */
int sim_trace_init(struct sim_trace *t, const struct vmm_range *ram, size_t nr_ram);
void sim_trace_free(struct sim_trace *t);
/* Append an epoch starting at t_ms (> the previous one's).  acc/freed are copied, sorted
 * and de-duplicated (an index both read and written keeps the write bit).  Returns 0,
 * -EINVAL (time not increasing, index outside RAM), -ENOMEM. */
int sim_trace_add_epoch(struct sim_trace *t, uint64_t t_ms, const uint32_t *acc, size_t nr_acc,
			const uint32_t *freed, size_t nr_free);
/* Close the trace: the last epoch ends at end_ms (> its start).  Returns 0 or -EINVAL. */
int sim_trace_finish(struct sim_trace *t, uint64_t end_ms);
uint64_t sim_epoch_end_ms(const struct sim_trace *t, size_t e);
/* GPA of page index idx (idx < ram_pages). */
uint64_t sim_page_gpa(const struct sim_trace *t, uint64_t idx);
/* Page index of gpa, or -ERANGE when it is outside the layout. */
int64_t sim_gpa_page(const struct sim_trace *t, uint64_t gpa);

/* Write t to path (zstd level `level`, 1..19).  Returns 0 or -errno; err gets a message. */
int sim_trace_write(const struct sim_trace *t, const char *path, int level, char *err,
		    size_t errlen);
/* Read and validate a trace.  Untrusted input: every field is checked before use and any
 * inconsistency is an error naming the byte offset in the decompressed stream.  Returns 0,
 * -EINVAL (corrupt or unsupported), -EFBIG (over the size limits), -ENOMEM, -EIO; on error
 * t is left empty and err holds a message. */
int sim_trace_read(struct sim_trace *t, const char *path, char *err, size_t errlen);

/* ======================================================================================
 * Recording: valgrind lackey and synthetic generators
 * ====================================================================================== */

struct sim_lackey_opts {
	uint64_t epoch_accesses; /* memory accesses per epoch */
	uint64_t epoch_ms;       /* virtual time one epoch stands for */
	uint64_t max_accesses;   /* stop after this many (0: no limit) */
	bool with_ifetch;        /* count instruction fetches as reads */
};

/* Convert lackey's --trace-mem=yes output read from `in` into a trace: the process's
 * virtual address space stands for guest RAM, every 2 MiB region it touched becomes one
 * 2 MiB block of RAM (laid out in address order from GPA 0).  Lines that are not lackey
 * records (valgrind's own "==pid==" messages) are skipped; a malformed record is an error.
 * Returns 0, -EINVAL (malformed input, *err set), -ENOMEM. */
int sim_lackey_convert(FILE *in, const struct sim_lackey_opts *o, struct sim_trace *t,
		       uint64_t *accesses_out, char *err, size_t errlen);

enum sim_gen_kind {
	SIM_GEN_ZIPF,   /* zipfian popularity over a fixed set of live pages */
	SIM_GEN_GROW,   /* working set grows and shrinks; shrinking frees pages */
	SIM_GEN_PHASES, /* hot set moves between phases, phases recur */
	SIM_GEN_SCAN,   /* steady hot set plus one scan over cold data */
	SIM_GEN_SPARSE, /* one hot 4 KiB page per 2 MiB block */
	SIM_GEN_STEP,   /* working set steps up (sim_react) */
	SIM_GEN_KV,     /* a key-value store: loaded once, a hot tenth read at random */
	SIM_GEN__COUNT,
};

struct sim_gen_opts {
	enum sim_gen_kind kind;
	uint64_t ram_pages; /* a multiple of SIM_BLOCK_PAGES */
	uint64_t epochs;    /* number of epochs */
	uint64_t epoch_ms;  /* epoch length */
	uint64_t seed;
	double kv_reads_per_s; /* SIM_GEN_KV: reads of each hot page a second (1) */
	uint64_t kv_load_ms;   /* SIM_GEN_KV: the load's length (30 s) */
	bool kv_hot_first;     /* SIM_GEN_KV: the hot tenth is the first written (kvserve's
				* layout), not a tenth at random */
	/* Derived shape, filled by sim_gen and read by tests and sim_react: */
	uint64_t step_at_ms; /* SIM_GEN_STEP: when the working set grows */
};

const char *sim_gen_name(enum sim_gen_kind k);
int sim_gen_by_name(const char *name, enum sim_gen_kind *out);
/* Generate a trace.  o->ram_pages, epochs, epoch_ms must be non-zero.  Returns 0, -EINVAL,
 * -ENOMEM. */
int sim_gen(struct sim_gen_opts *o, struct sim_trace *t);
void sim_gen_opts_default(struct sim_gen_opts *o, enum sim_gen_kind k);

/* A small, fast, seeded PRNG (xorshift64*), so results repeat run to run. */
static inline uint64_t sim_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}
static inline double sim_rand01(uint64_t *s)
{
	return (double)(sim_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ======================================================================================
 * Replay core
 * ====================================================================================== */

/* Per-page state, one byte each. */
#define SIM_PG_RESIDENT 0x1 /* backed by host memory now */
#define SIM_PG_LIVE     0x2 /* holds guest data: accessed since the start or its last free */
#define SIM_PG_EVLIVE   0x4 /* not resident, and was live when evicted: touching it refaults */
#define SIM_PG_GSWAP                                                                               \
	0x8 /* the guest's own reclaim swapped its data out (not live; the
			     * frame may still be resident until free page reporting or the
			     * balloon takes it): touching it refaults, resident or not */

struct sim_ctx;

/*
 * A policy.  At the end of every epoch the core calls epoch(); the policy looks at what
 * happened (the epoch's accesses, ctx->faulted) and evicts with sim_evict().  It may keep
 * its own state of any kind; it must not change page state in any other way.
 */
enum sim_fpr_mode {
	SIM_FPR_PARAM, /* on when sim_params.fpr says so */
	SIM_FPR_OFF,   /* never (none: static allocation) */
	SIM_FPR_ON,    /* always (fpr-only) */
};

struct sim_policy {
	const char *name;
	enum sim_fpr_mode fpr;
	const char *knob; /* the parameter `sweep` varies by default */
	int (*init)(struct sim_ctx *ctx, void **state);
	int (*epoch)(struct sim_ctx *ctx, void *state, size_t e);
	void (*fini)(void *state);
};

/* Every tunable of every policy, by name (sim_params_set), with its default. */
struct sim_params {
	double budget;         /* refault budget, fraction of resident pages per minute */
	bool fpr;              /* free page reporting on (all policies but none) */
	uint64_t fpr_delay_ms; /* free -> reported (measured ~2.5 s, /work/shared) */
	/* mom */
	double mom_pressure;  /* host free share below which MOM shrinks guests (0.20) */
	double mom_host_free; /* host free share the simulated host reports (0.10) */
	double mom_min_free;  /* guest kept at least this free (0.20) */
	double mom_max_step;  /* balloon step at most (0.05 of guest memory) */
	double mom_min_step;  /* balloon step at least (0.0025) */
	uint64_t mom_interval_ms;
	/* damon */
	uint64_t damon_sample_ms, damon_aggr_ms;
	uint64_t damon_min_regions, damon_max_regions;
	uint64_t damon_min_age_ms;    /* DAMON_RECLAIM min_age (120 s) */
	uint64_t damon_quota_bytes_s; /* DAMON_RECLAIM size quota (128 MiB/s) */
	/* lru2 */
	double lru2_limit; /* resident limit as a share of RAM */
	/* memtide */
	unsigned mt_nr_gens;
	uint64_t mt_interval_ms; /* control interval */
	double mt_target;        /* target refault fraction per minute (reclaim ctl) */
	uint64_t mt_min_age_ms, mt_max_age_ms, mt_initial_age_ms;
	double mt_kp, mt_ki, mt_kd;
	unsigned mt_aging_div;       /* generations per cold age threshold */
	bool mt_smooth;              /* libvmm averages the refault rate (default on) */
	uint64_t mt_smooth_tau_ms;   /* that average's time constant */
	uint64_t mt_reuse_tau_ms;    /* reuse floor's window (0: no floor) */
	unsigned mt_trust;           /* the floor at T counts after watching trust x T */
	uint64_t mt_max_step_pages;  /* most pages a round takes (vmm_decide_in.max_step_pages) */
	bool mt_take_free;           /* the guest's freed pages go to the host at once */
	bool mt_free_hint;           /* libvmm is told so (vmm_hint_free), as memtided tells it */
	unsigned mt_return;          /* enum sim_return: how memory goes back (pageout) */
	bool mt_agent;               /* balloon, reclaim: the guest runs memtide-agent */
	uint64_t mt_guest_mib;       /* the guest a trace stands for: memtided's bytes scale */
	uint64_t mt_sample_ms;       /* the source sees this much of each aging interval (0: all) */
	bool mt_sample_adapt;        /* ... and widens it as memtided's ept source (vmm_sample) */
	bool mt_sample_phase;        /* ... and opens it at a random moment of the interval */
	bool mt_gens_widen;          /* vmm_guest_config.gens_widen */
	bool mt_weigh;               /* vmm_reclaim_config.weigh */
	bool mt_probe;               /* vmm_reclaim_config.probe */
	uint64_t mt_first_window_ms; /* vmm_reclaim_config.first_window_ms */
	bool mt_reuse_tiers;         /* vmm_guest_config.reuse_raises_tier */
	bool mt_refault_tiers;       /* vmm_guest_config.refault_raises_tier */
	bool mt_fill_wait; /* pageout waits while the guest's RAM grows fast, as memtided's */
	/* idle: the single idle-age threshold memtide is compared with */
	uint64_t idle_age_ms;
	double idle_reused_x; /* per-page rule: a reused page's threshold, x idle_age_ms (1) */
	double idle_gap_x;    /* per-page rule: ... at least its longest idle gap x this (0) */
	/* oracle: none, it reads `budget` */
	uint64_t seed;
};

void sim_params_default(struct sim_params *p);
/* memtide's generations laid out as memtided keeps them: VMM_MAX_NR_GENS generations, a round
 * every control interval, thresholds up to nr_gens - 2 intervals (host/daemon/vm_attach.c), starting
 * at the longest.  The lab's own layout (mt-aging-div rounds per threshold) reaches 1 h. */
void sim_params_memtided_layout(struct sim_params *p);
/* Set one parameter by its command-line name ("mom-min-free", "mt-target", ...).  Returns
 * 0, -ENOENT (no such parameter), -EINVAL (not a number, or not whole where it must be),
 * -ERANGE (outside the range sim_params_range gives). */
int sim_params_set(struct sim_params *p, const char *name, const char *value);
double sim_params_get(const struct sim_params *p, const char *name, int *err);
/* The range a parameter accepts: 0 or -ENOENT. */
int sim_params_range(const char *name, double *min, double *max);
/* Settings that are each in range but cannot run together (a floor above its ceiling):
 * 0, or -EINVAL with a sentence in err. */
int sim_params_check(const struct sim_params *p, char *err, size_t len);
/* Print every parameter with its default and meaning. */
void sim_params_help(FILE *out);

struct sim_result {
	char policy[16];
	uint64_t ram_pages;
	double duration_min;
	double mean_resident_pages; /* time-weighted over the trace */
	uint64_t peak_resident_pages;
	double saved;      /* 1 - mean_resident / ram (no management keeps all) */
	uint64_t refaults; /* live page touched after the policy evicted it */
	uint64_t fills;    /* free page touched after eviction: zero-fill, no I/O */
	uint64_t evicted_live, evicted_free;
	double refault_rate;          /* refaults per minute / mean resident pages */
	double refault_share;         /* refaults / live pages evicted */
	double policy_cpu_s;          /* thread CPU time inside the policy */
	uint32_t *refaults_per_epoch; /* owned; nr = trace's epochs (NULL unless asked) */
	uint32_t *resident_per_epoch; /* owned, as refaults_per_epoch */
};

struct sim_ctx {
	const struct sim_trace *t;
	const struct sim_params *p;
	uint8_t *pg;       /* SIM_PG_* per page */
	uint32_t *faulted; /* pages faulted in during the current epoch */
	size_t nr_faulted;
	uint8_t *faulted_refault; /* 1 = that fault was a refault, 0 = a fill */
	uint64_t resident_pages;
	uint64_t live_pages;
	struct sim_fpr *fpr; /* NULL when free page reporting is off */
	uint64_t now_ms;     /* the end of the epoch the policy is called for */
	struct sim_result *res;
	void *oracle_next; /* sim/policy_oracle.c's look-ahead (owned by the policy) */
};

/* Evict page idx (no-op when it is not resident).  Returns 1 when it was resident. */
int sim_evict(struct sim_ctx *ctx, uint32_t idx);
/* The guest's own reclaim swaps live page idx out (memtided's agent reclaim): its data goes
 * to the guest's swap and its frame is free in the guest, but stays resident on the host
 * until free page reporting returns its whole 2 MiB block.  Returns 1 when it was live. */
int sim_guest_swapout(struct sim_ctx *ctx, uint32_t idx);

extern const struct sim_policy sim_policy_none, sim_policy_fpr, sim_policy_mom, sim_policy_damon,
    sim_policy_lru2, sim_policy_idle, sim_policy_memtide, sim_policy_oracle;

const struct sim_policy *sim_policy_get(const char *name);
/* NULL-terminated list of every policy, in report order. */
extern const struct sim_policy *const sim_policies[];

/*
 * Replay trace t against policy pol with parameters p.  keep_series: also fill
 * res->refaults_per_epoch (free with sim_result_free).  Returns 0 or a negative errno from
 * the policy (-EINVAL for parameters it rejects, -ENOMEM).
 */
int sim_replay(const struct sim_trace *t, const struct sim_policy *pol, const struct sim_params *p,
	       bool keep_series, struct sim_result *res);
void sim_result_free(struct sim_result *res);
void sim_result_json(FILE *out, const char *name, const char *trace, const struct sim_result *r);

/* Free page reporting (sim/fpr.c). */
struct sim_fpr;
int sim_fpr_new(const struct sim_trace *t, uint64_t delay_ms, struct sim_fpr **out);
void sim_fpr_free(struct sim_fpr *f);
/* A page of block b became live (+1) or dead (-1). */
void sim_fpr_live(struct sim_fpr *f, uint32_t idx, int delta, uint64_t now_ms);
/* Report every block that has been wholly free for the delay: evict its resident pages. */
void sim_fpr_report(struct sim_fpr *f, struct sim_ctx *ctx, uint64_t now_ms);

/* memtided's balloon and agent reclaim (sim/actuators.c): how memtide gives memory back,
 * as memtided's policy `return` says. */
enum sim_return {
	SIM_RETURN_PAGEOUT = 0, /* memtide evicts pages itself (host pageout) */
	SIM_RETURN_BALLOON = 1, /* the balloon follows memtided's target */
	SIM_RETURN_RECLAIM = 2, /* the agent asks the guest to reclaim (memtided's default) */
};
const char *sim_return_name(enum sim_return r);
struct sim_act;
struct mtd_ctl_config;
/* One control interval's figures, as memtided's tick has them. */
struct sim_act_tick {
	uint64_t now_ms, dt_ms;
	uint64_t guest_refaults; /* the guest's major faults in the interval */
	bool wss_valid; /* libvmm's estimate counts (two rounds, more than a cold age watched) */
	uint64_t wss_bytes; /* libvmm's working set at the cold age */
	uint64_t cold_age_ms;
	bool refault_hold; /* the controller holds past learning (memtided's reclaim_holds_all) */
};
/* memtided's controller settings for a guest of the trace's shape: its byte figures scaled
 * by the trace's RAM over --mt-guest-mib (the file comment of sim/actuators.c).  Returns 0
 * or -EINVAL (settings memtided would refuse). */
int sim_act_ctl_config(const struct sim_ctx *ctx, struct mtd_ctl_config *cfg);
/* Returns 0, -ENOMEM, -EINVAL (settings memtided would refuse). */
int sim_act_new(struct sim_ctx *ctx, enum sim_return mode, struct sim_act **out);
void sim_act_free(struct sim_act *a);
/* Every epoch, after the core's step 1: the guest's LRU hears of the epoch, and lives
 * within what the balloon leaves it. */
void sim_act_epoch(struct sim_act *a, struct sim_ctx *ctx, size_t e);
/* Every control interval, after vmm_decide: memtided's estimate corrections, mtd_ctl_step
 * and the actuators.  Returns 0 or a negative errno from libvmm. */
int sim_act_control(struct sim_act *a, struct sim_ctx *ctx, struct vmm_guest *g,
		    const struct sim_act_tick *t);

/* Linux's active/inactive LRU (sim/lru2.c). */
struct sim_lru2;
int sim_lru2_new(uint64_t ram_pages, struct sim_lru2 **out);
void sim_lru2_free(struct sim_lru2 *l);
/* Feed the epoch's accesses and frees (call once per epoch, before shrinking). */
void sim_lru2_epoch(struct sim_lru2 *l, const struct sim_ctx *ctx, size_t e);
/* Reclaim until at most target_pages are resident: free pages first, then the inactive
 * list's tail, refilling it from the active list when it runs low.  Cost: O(pages
 * scanned), at most a few passes over the lists. */
void sim_lru2_shrink(struct sim_lru2 *l, struct sim_ctx *ctx, uint64_t target_pages);
/* The guest's memory.reclaim: swap out up to nr_pages live pages from the inactive tail (as
 * shrink chooses them; free pages are not its to take), with sim_guest_swapout.  Returns
 * how many went. */
uint64_t sim_lru2_swapout(struct sim_lru2 *l, struct sim_ctx *ctx, uint64_t nr_pages);

/*
 * The oracle's lower bound: the least mean resident memory any policy can have on t with
 * at most k refaults (VMIN, Prieve & Fabry 1976: between two uses of a page, either keep it
 * resident the whole gap or pay one refault; the k largest gaps are the ones to pay for).
 * *mean_resident_out gets the bound in pages.  Returns 0, -ENOMEM.
 */
int sim_oracle_bound(const struct sim_trace *t, uint64_t k, double *mean_resident_out);

/*
 * sim_react: after a step growth of the working set at step_ms, the time until the refault
 * rate, measured over windows of window_ms aligned to the step, is back under budget for
 * good (the end of the last window over budget, minus step_ms; 0 when none was).  Needs a
 * result with series.  Returns the time in ms.
 */
uint64_t sim_react_ms(const struct sim_trace *t, const struct sim_result *r, uint64_t step_ms,
		      uint64_t window_ms, double budget);

/* ======================================================================================
 * Analysis: the savings-versus-refaults frontier
 * ====================================================================================== */

/* One (setting, outcome) point of a sweep. */
struct sim_point {
	double knob;
	double saved, refault_rate;
	struct sim_result r; /* without series */
};

/*
 * The most memory a policy saves within a refault budget: the best of its points whose
 * refault rate is at most budget.  Returns the index of that point, or -1 when none meets
 * the budget (then *saved = 0: the policy must be turned off to meet it).
 */
int sim_best_under_budget(const struct sim_point *pts, size_t n, double budget, double *saved);

/* The default knob values a sweep tries for a policy; returns how many (<= max). */
size_t sim_default_knob_values(const struct sim_policy *pol, double *vals, size_t max);

/* Write the points as CSV rows "policy,knob,value,saved,refault_rate,..." (header first
 * when `header`).  Returns 0 or -errno. */
int sim_points_csv(FILE *out, bool header, const char *policy, const char *knob,
		   const struct sim_point *pts, size_t n);
/* Plot a sweep CSV with gnuplot into base.png and base.svg: memory saved against refault
 * rate, one curve per policy.  Returns 0, -ENOENT (no gnuplot), -EIO (gnuplot failed). */
int sim_plot(const char *csv_path, const char *base, const char *title, double budget_lo,
	     double budget_hi);

#endif /* MEMTIDE_SIM_H */
