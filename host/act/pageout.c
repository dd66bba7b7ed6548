// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pageout.c - the host-side pageout actuator (pageout.h): process_madvise(MADV_PAGEOUT) on
 * QEMU's guest RAM, checked through /proc/PID/pagemap, and the refault scan.
 *
 * Data layout, per evictable region of the guest RAM layout:
 *
 *   st[page]        one byte per 4 KiB page of the region (private anonymous memory only:
 *                   ram_layout.c says why shared memory cannot be checked):
 *                     PG_RESIDENT  memtided has not evicted it (libvmm counts it resident)
 *                     PG_SWAPPED   evicted, and in host swap (pagemap bit 62)
 *                     PG_EMPTY     evicted while it held nothing on the host (never touched,
 *                                  or discarded by QEMU after the guest freed it)
 *                     PG_HELD      resident: the kernel kept it at its last try (shared,
 *                                  KSM, pinned, locked); not tried again before
 *                                  mtd_pageout_retry_held
 *                     PG_CAND      transient, inside mtd_pageout_runs only
 *                     PG_REFUSED   transient: a candidate whose mapping the kernel refused
 *   blk_swapped[b]  pages in PG_SWAPPED per 2 MiB block b of QEMU's address space (blocks
 *                   are HVA-aligned, as khugepaged sees them; the first and last may reach
 *                   outside the region)
 *   blk_out[b]      pages in PG_SWAPPED or PG_EMPTY: the scan reads only blocks with some
 *   blk_cand[b]     candidates in this call (zero between calls)
 *   blk_take[b]     the swap budget's share of block b in this call (zero between calls)
 *
 * Invariant (checked by the unit tests through mtd_pageout_get_stats): the per-block counts
 * are the sums of the page states, and swapped_pages / empty_pages the totals.
 *
 * Pagemap entries (Documentation/admin-guide/mm/pagemap.rst): bit 63 present, bit 62
 * swapped, bits 0-54 the frame number when present (zero without CAP_SYS_ADMIN).
 */
#include "act/pageout.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vmm.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

#define PAGE_SHIFT       12
#define PAGE_BYTES       ((uint64_t)1 << PAGE_SHIFT)
#define BLOCK_SHIFT      21
#define BLOCK_PAGES      512
#define PM_PRESENT       (1ULL << 63)
#define PM_SWAPPED       (1ULL << 62)
#define PM_PFN_MASK      ((1ULL << 55) - 1)
#define IOV_BATCH        1024 /* UIO_MAXIOV */
/* Bytes a process_madvise call is given: the kernel takes at most MAX_RW_COUNT (INT_MAX
 * rounded down to a page) and drops the rest of the vector without a word. */
#define ADVISE_MAX_BYTES ((uint64_t)1 << 30)
#define PM_CHUNK         (64 * 1024) /* pagemap entries read at once: 512 KiB */
#define SCAN_BLOCKS                                                                                \
	(PM_CHUNK / BLOCK_PAGES) /* blocks coalesced into one scan read: all of po->pm */

enum { PG_RESIDENT = 0, PG_SWAPPED = 1, PG_EMPTY = 2, PG_CAND = 3, PG_HELD = 4, PG_REFUSED = 5 };

/* Not evicted: resident in libvmm's eyes. */
static inline bool pg_resident(uint8_t s)
{
	return s == PG_RESIDENT || s == PG_HELD;
}

struct po_region {
	struct mtd_ram_region r;
	uint64_t pages;
	uint8_t *st;
	uint64_t blk_base; /* hva rounded down to 2 MiB */
	size_t nr_blk;
	uint16_t *blk_swapped, *blk_out, *blk_cand, *blk_take;
};

struct mtd_pageout {
	int pid;
	char proc_root[64];
	int pidfd;
	int pagemap_fd;
	size_t nr;
	struct po_region *reg;
	uint64_t *pm; /* PM_CHUNK entries */
	struct mtd_pageout_stats stats;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

const char *mtd_pageout_kept_name(enum mtd_pageout_kept k)
{
	static const char *const names[MTD_PO_KEPT_NR] = {
	    [MTD_PO_KEPT_RESIDENT] = "resident",
	    [MTD_PO_KEPT_THP] = "huge page",
	    [MTD_PO_KEPT_SWAP_FULL] = "swap full",
	    [MTD_PO_KEPT_OUTSIDE] = "outside the map",
	    [MTD_PO_KEPT_REFUSED] = "refused by the kernel",
	};
	return (unsigned)k < MTD_PO_KEPT_NR ? names[k] : "?";
}

/* ---- khugepaged's settings ----------------------------------------------------------- */

static int read_sysfs(const char *root, const char *rel, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/%s", root, rel);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	return 0;
}

int mtd_pageout_read_thp(const char *sysfs_root, struct mtd_thp_settings *out)
{
	char buf[128];

	if (!sysfs_root)
		sysfs_root = "/sys";
	/* The kernel's defaults (mm/khugepaged.c: HPAGE_PMD_NR / 8 and HPAGE_PMD_NR - 1). */
	*out = (struct mtd_thp_settings){.scans = true, .max_ptes_swap = 64, .max_ptes_none = 511};
	if (read_sysfs(sysfs_root, "enabled", buf, sizeof(buf)) == 0) {
		/* "always [madvise] never": the bracketed word is in force. */
		out->always = strstr(buf, "[always]") != NULL;
		out->scans = strstr(buf, "[never]") == NULL;
	}
	if (read_sysfs(sysfs_root, "khugepaged/max_ptes_swap", buf, sizeof(buf)) == 0)
		out->max_ptes_swap = (unsigned)strtoul(buf, NULL, 10);
	if (read_sysfs(sysfs_root, "khugepaged/max_ptes_none", buf, sizeof(buf)) == 0)
		out->max_ptes_none = (unsigned)strtoul(buf, NULL, 10);
	return 0;
}

/* Would khugepaged collapse this region's blocks at all? */
static bool khugepaged_scans(const struct po_region *pr, const struct mtd_thp_settings *thp)
{
	return thp && thp->scans && pr->r.backing == MTD_RAM_ANON && (thp->always || pr->r.thp);
}

/* ---- regions and state --------------------------------------------------------------- */

static void region_free(struct po_region *pr)
{
	free(pr->st);
	free(pr->blk_swapped);
	free(pr->blk_out);
	free(pr->blk_cand);
	free(pr->blk_take);
	memset(pr, 0, sizeof(*pr));
}

static int region_init(struct po_region *pr, const struct mtd_ram_region *r)
{
	memset(pr, 0, sizeof(*pr));
	pr->r = *r;
	pr->pages = r->bytes >> PAGE_SHIFT;
	pr->blk_base = r->hva & ~(((uint64_t)1 << BLOCK_SHIFT) - 1);
	pr->nr_blk = (size_t)(((r->hva + r->bytes - 1 - pr->blk_base) >> BLOCK_SHIFT) + 1);
	pr->st = calloc(pr->pages, 1);
	pr->blk_swapped = calloc(pr->nr_blk, sizeof(uint16_t));
	pr->blk_out = calloc(pr->nr_blk, sizeof(uint16_t));
	pr->blk_cand = calloc(pr->nr_blk, sizeof(uint16_t));
	pr->blk_take = calloc(pr->nr_blk, sizeof(uint16_t));
	if (!pr->st || !pr->blk_swapped || !pr->blk_out || !pr->blk_cand || !pr->blk_take) {
		region_free(pr);
		return -ENOMEM;
	}
	return 0;
}

static size_t blk_of(const struct po_region *pr, uint64_t page)
{
	return (size_t)((pr->r.hva + (page << PAGE_SHIFT) - pr->blk_base) >> BLOCK_SHIFT);
}

/* Move page idx of pr to state s, keeping the block counts and totals. */
static void set_state(struct mtd_pageout *po, struct po_region *pr, uint64_t idx, uint8_t s)
{
	uint8_t old = pr->st[idx];
	size_t b = blk_of(pr, idx);

	if (old == s)
		return;
	if (old == PG_SWAPPED) {
		pr->blk_swapped[b]--;
		po->stats.swapped_pages--;
	}
	if (old == PG_SWAPPED || old == PG_EMPTY)
		pr->blk_out[b]--;
	if (old == PG_EMPTY)
		po->stats.empty_pages--;
	if (old == PG_CAND)
		pr->blk_cand[b]--;
	if (old == PG_HELD)
		po->stats.held_pages--;
	if (s == PG_HELD)
		po->stats.held_pages++;
	if (s == PG_SWAPPED) {
		pr->blk_swapped[b]++;
		po->stats.swapped_pages++;
	}
	if (s == PG_SWAPPED || s == PG_EMPTY)
		pr->blk_out[b]++;
	if (s == PG_EMPTY)
		po->stats.empty_pages++;
	if (s == PG_CAND)
		pr->blk_cand[b]++;
	pr->st[idx] = s;
}

/* Read n pagemap entries from hva into po->pm (n <= PM_CHUNK). */
static int read_pm(struct mtd_pageout *po, uint64_t hva, size_t n)
{
	size_t want = n * sizeof(uint64_t), got = 0;
	off_t off = (off_t)((hva >> PAGE_SHIFT) * sizeof(uint64_t));

	while (got < want) {
		ssize_t r =
		    pread(po->pagemap_fd, (char *)po->pm + got, want - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ESRCH ? -ESRCH : -errno;
		if (r == 0)
			return -ESRCH; /* the process exited: its pagemap reads empty */
		got += (size_t)r;
	}
	return 0;
}

/* po->reg for layout l.  Regions of keep (the old ones) that are unchanged are moved over
 * with their state (zeroed in keep); on -ENOMEM whatever was moved is lost. */
static int load_regions(struct mtd_pageout *po, const struct mtd_ram_layout *l,
			struct po_region *keep, size_t nr_keep)
{
	struct po_region *reg = calloc(l->nr ? l->nr : 1, sizeof(*reg));
	size_t n = 0;

	if (!reg)
		return -ENOMEM;
	for (size_t i = 0; i < l->nr; i++) {
		const struct mtd_ram_region *r = &l->r[i];
		bool kept = false;
		if (!r->evictable)
			continue;
		for (size_t k = 0; k < nr_keep; k++) {
			struct po_region *o = &keep[k];
			if (o->st && o->r.gpa == r->gpa && o->r.bytes == r->bytes &&
			    o->r.hva == r->hva && o->r.backing == r->backing) {
				reg[n++] = *o; /* moved: the caller drops its copy */
				memset(o, 0, sizeof(*o));
				kept = true;
				break;
			}
		}
		if (kept)
			continue;
		if (region_init(&reg[n], r) < 0) {
			for (size_t k = 0; k < n; k++)
				region_free(&reg[k]);
			free(reg);
			return -ENOMEM;
		}
		n++;
	}
	po->reg = reg;
	po->nr = n;
	return 0;
}

static void recount(struct mtd_pageout *po)
{
	po->stats.swapped_pages = po->stats.empty_pages = po->stats.evictable_pages = 0;
	po->stats.held_pages = 0;
	for (size_t i = 0; i < po->nr; i++) {
		struct po_region *pr = &po->reg[i];
		po->stats.evictable_pages += pr->pages;
		for (uint64_t p = 0; p < pr->pages; p++) {
			po->stats.swapped_pages += pr->st[p] == PG_SWAPPED;
			po->stats.empty_pages += pr->st[p] == PG_EMPTY;
			po->stats.held_pages += pr->st[p] == PG_HELD;
		}
	}
}

/* Pages already in swap when memtided comes: ours from now on (they are evicted either way). */
static int adopt(struct mtd_pageout *po, struct po_region *pr)
{
	for (uint64_t p = 0; p < pr->pages; p += PM_CHUNK) {
		size_t n = pr->pages - p < PM_CHUNK ? (size_t)(pr->pages - p) : PM_CHUNK;
		int rc = read_pm(po, pr->r.hva + (p << PAGE_SHIFT), n);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < n; i++) {
			if ((po->pm[i] & PM_SWAPPED) && pg_resident(pr->st[p + i])) {
				set_state(po, pr, p + i, PG_SWAPPED);
				po->stats.adopted_pages++;
			}
			if (!po->stats.pfn_visible && (po->pm[i] & PM_PRESENT) &&
			    (po->pm[i] & PM_PFN_MASK))
				po->stats.pfn_visible = true;
		}
	}
	return 0;
}

static int open_map(int pid, const struct mtd_ram_layout *l, const char *proc_root, bool probe,
		    struct mtd_pageout **out, char *err, size_t errlen)
{
	struct mtd_pageout *po = calloc(1, sizeof(*po));
	char path[128];
	int rc;

	*out = NULL;
	if (!po) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	po->pid = pid;
	snprintf(po->proc_root, sizeof(po->proc_root), "%s", proc_root ? proc_root : "/proc");
	po->pidfd = -1;
	po->pagemap_fd = -1;
	po->pm = malloc(PM_CHUNK * sizeof(uint64_t));
	if (!po->pm) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	po->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (po->pidfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "pidfd_open(%d): %s", pid, strerror(errno));
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%d/pagemap", proc_root ? proc_root : "/proc", pid);
	po->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (po->pagemap_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	/* The permission probe: an empty vector runs every check (ptrace read access,
	 * CAP_SYS_NICE) and advises nothing. */
	struct iovec none = {.iov_base = NULL, .iov_len = 0};
	if (probe && syscall(SYS_process_madvise, po->pidfd, &none, 1, MADV_PAGEOUT, 0) < 0) {
		rc = -errno;
		snprintf(err, errlen,
			 rc == -EPERM
			     ? "process_madvise on QEMU (pid %d) is not permitted: memtided "
			       "needs CAP_SYS_NICE and ptrace access to it"
			     : "process_madvise on QEMU (pid %d): %s",
			 pid, strerror(errno));
		goto fail;
	}
	rc = load_regions(po, l, NULL, 0);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory for %" PRIu64 " MiB of page state",
			 l->evictable_bytes >> 32);
		goto fail;
	}
	recount(po);
	for (size_t i = 0; i < po->nr; i++) {
		rc = adopt(po, &po->reg[i]);
		if (rc < 0) {
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
			goto fail;
		}
	}
	*out = po;
	return 0;
fail:
	mtd_pageout_close(po);
	return rc;
}

int mtd_pageout_open(int pid, const struct mtd_ram_layout *l, const char *proc_root,
		     struct mtd_pageout **out, char *err, size_t errlen)
{
	return open_map(pid, l, proc_root, true, out, err, errlen);
}

int mtd_pageout_open_watch(int pid, const struct mtd_ram_layout *l, const char *proc_root,
			   struct mtd_pageout **out, char *err, size_t errlen)
{
	return open_map(pid, l, proc_root, false, out, err, errlen);
}

int64_t mtd_pageout_adopt(struct mtd_pageout *po)
{
	uint64_t before = po->stats.adopted_pages;

	for (size_t i = 0; i < po->nr; i++) {
		int rc = adopt(po, &po->reg[i]);
		if (rc < 0)
			return rc;
	}
	uint64_t n = po->stats.adopted_pages - before;
	po->stats.out_total += n;
	return (int64_t)n;
}

void mtd_pageout_close(struct mtd_pageout *po)
{
	if (!po)
		return;
	for (size_t i = 0; i < po->nr; i++)
		region_free(&po->reg[i]);
	free(po->reg);
	free(po->pm);
	if (po->pidfd >= 0)
		close(po->pidfd);
	if (po->pagemap_fd >= 0)
		close(po->pagemap_fd);
	free(po);
}

int mtd_pageout_set_layout(struct mtd_pageout *po, const struct mtd_ram_layout *l)
{
	struct po_region *old = po->reg;
	size_t nr_old = po->nr;
	int rc = load_regions(po, l, old, nr_old);

	if (rc < 0) {
		po->reg = old;
		po->nr = nr_old;
		recount(po); /* regions moved before the failure lost their state */
		return rc;
	}
	for (size_t k = 0; k < nr_old; k++)
		region_free(&old[k]);
	free(old);
	recount(po);
	return 0;
}

void mtd_pageout_get_stats(const struct mtd_pageout *po, struct mtd_pageout_stats *out)
{
	*out = po->stats;
}

/* ---- pageout ------------------------------------------------------------------------- */

/* A span of one region's pages touched by this call. */
struct span {
	struct po_region *pr;
	uint64_t first, n; /* page indices in the region */
};

/* Kept pages are reported in GPA runs of one reason. */
struct kept_acc {
	mtd_pageout_kept_fn fn;
	void *arg;
	uint64_t gpa, n;
	enum mtd_pageout_kept why;
	struct mtd_pageout_result *res;
};

static void kept_flush(struct kept_acc *k)
{
	if (k->n && k->fn)
		k->fn(k->arg, k->gpa, k->n, k->why);
	k->n = 0;
}

static void kept_add(struct kept_acc *k, uint64_t gpa, uint64_t n, enum mtd_pageout_kept why)
{
	k->res->kept_pages[why] += n;
	if (k->n && k->why == why && k->gpa + (k->n << PAGE_SHIFT) == gpa) {
		k->n += n;
		return;
	}
	kept_flush(k);
	k->gpa = gpa;
	k->n = n;
	k->why = why;
}

/* Split runs into spans of evictable regions; pages elsewhere are kept (outside). */
static size_t make_spans(struct mtd_pageout *po, const struct vmm_run *runs, size_t nr_runs,
			 struct span *sp, size_t max, struct kept_acc *k)
{
	size_t n = 0;

	for (size_t i = 0; i < nr_runs; i++) {
		uint64_t gpa = runs[i].gpa, end = runs[i].gpa + (runs[i].npages << PAGE_SHIFT);
		while (gpa < end) {
			struct po_region *pr = NULL;
			uint64_t next = end;
			for (size_t r = 0; r < po->nr; r++) {
				struct po_region *c = &po->reg[r];
				if (gpa >= c->r.gpa && gpa < c->r.gpa + c->r.bytes) {
					pr = c;
					break;
				}
				if (c->r.gpa > gpa && c->r.gpa < next)
					next = c->r.gpa; /* the next region starts here */
			}
			if (!pr || n >= max) {
				if (pr)
					next = end; /* out of spans: keep the rest */
				kept_add(k, gpa, (next - gpa) >> PAGE_SHIFT, MTD_PO_KEPT_OUTSIDE);
				gpa = next;
				continue;
			}
			uint64_t stop =
			    end < pr->r.gpa + pr->r.bytes ? end : pr->r.gpa + pr->r.bytes;
			sp[n].pr = pr;
			sp[n].first = (gpa - pr->r.gpa) >> PAGE_SHIFT;
			sp[n].n = (stop - gpa) >> PAGE_SHIFT;
			n++;
			gpa = stop;
		}
	}
	return n;
}

/* Step 1: what each page holds now; resident ones become candidates, held ones are kept. */
static int classify_spans(struct mtd_pageout *po, struct span *sp, size_t n, struct kept_acc *k,
			  struct mtd_pageout_result *res)
{
	for (size_t s = 0; s < n; s++) {
		struct po_region *pr = sp[s].pr;
		for (uint64_t p = 0; p < sp[s].n; p += PM_CHUNK) {
			size_t c = sp[s].n - p < PM_CHUNK ? (size_t)(sp[s].n - p) : PM_CHUNK;
			uint64_t idx0 = sp[s].first + p;
			int rc = read_pm(po, pr->r.hva + (idx0 << PAGE_SHIFT), c);
			if (rc < 0)
				return rc;
			for (size_t i = 0; i < c; i++) {
				uint64_t e = po->pm[i];
				uint8_t st = pr->st[idx0 + i];
				if (!pg_resident(st)) {
					res->already_pages++;
				} else if (e & PM_SWAPPED) {
					set_state(po, pr, idx0 + i, PG_SWAPPED);
					res->already_pages++;
				} else if (!(e & PM_PRESENT)) {
					set_state(po, pr, idx0 + i, PG_EMPTY);
					res->empty_pages++;
				} else if (st == PG_HELD) {
					kept_add(k, pr->r.gpa + ((idx0 + i) << PAGE_SHIFT), 1,
						 MTD_PO_KEPT_RESIDENT);
				} else {
					set_state(po, pr, idx0 + i, PG_CAND);
				}
			}
		}
	}
	return 0;
}

/*
 * Step 2: huge pages and the swap budget take candidates back, a 2 MiB block at a time.
 * 2a: a block that would hold at most max_ptes_swap swapped pages is left alone: khugepaged
 *     would read them back to rebuild the huge page.
 * 2b: the budget (room in swap) is handed out block by block in order; a block whose share
 *     would again leave it within khugepaged's reach gets nothing.
 */
static void limit_candidates(struct mtd_pageout *po, struct span *sp, size_t n,
			     const struct mtd_thp_settings *thp, uint64_t budget_pages,
			     struct kept_acc *k)
{
	uint64_t left = budget_pages;

	for (size_t s = 0; s < n; s++) { /* 2a */
		struct po_region *pr = sp[s].pr;
		if (!khugepaged_scans(pr, thp))
			continue;
		for (uint64_t i = sp[s].first; i < sp[s].first + sp[s].n; i++) {
			size_t b = blk_of(pr, i);
			if (pr->st[i] == PG_CAND &&
			    (unsigned)pr->blk_swapped[b] + pr->blk_cand[b] <= thp->max_ptes_swap) {
				set_state(po, pr, i, PG_RESIDENT);
				kept_add(k, pr->r.gpa + (i << PAGE_SHIFT), 1, MTD_PO_KEPT_THP);
			}
		}
	}
	for (size_t s = 0; s < n; s++) { /* 2b */
		struct po_region *pr = sp[s].pr;
		bool rule = khugepaged_scans(pr, thp);
		for (uint64_t i = sp[s].first; i < sp[s].first + sp[s].n; i++) {
			if (pr->st[i] != PG_CAND)
				continue;
			size_t b = blk_of(pr, i);
			/* blk_take[b]: 0 = not decided yet, else 1 + pages still to take. */
			if (!pr->blk_take[b]) {
				uint64_t take = pr->blk_cand[b] < left ? pr->blk_cand[b] : left;
				if (rule && pr->blk_swapped[b] + take <= thp->max_ptes_swap)
					take = 0;
				left -= take;
				pr->blk_take[b] = (uint16_t)(take + 1);
			}
			if (pr->blk_take[b] > 1) {
				pr->blk_take[b]--;
				continue;
			}
			set_state(po, pr, i, PG_RESIDENT);
			kept_add(k, pr->r.gpa + (i << PAGE_SHIFT), 1, MTD_PO_KEPT_SWAP_FULL);
		}
	}
	for (size_t s = 0; s < n; s++) /* blk_take is zero between calls */
		for (uint64_t i = sp[s].first; i < sp[s].first + sp[s].n; i++)
			sp[s].pr->blk_take[blk_of(sp[s].pr, i)] = 0;
}

/* The candidates in QEMU's [lo, hi) become refused (the kernel would not page them out). */
static void mark_refused(struct mtd_pageout *po, uint64_t lo, uint64_t hi)
{
	for (size_t r = 0; r < po->nr; r++) {
		struct po_region *pr = &po->reg[r];
		uint64_t a = lo > pr->r.hva ? lo : pr->r.hva;
		uint64_t e = hi < pr->r.hva + pr->r.bytes ? hi : pr->r.hva + pr->r.bytes;
		for (; a < e; a += PAGE_BYTES) {
			uint64_t idx = (a - pr->r.hva) >> PAGE_SHIFT;
			if (pr->st[idx] == PG_CAND)
				set_state(po, pr, idx, PG_REFUSED);
		}
	}
}

/* QEMU's mappings over [lo, hi), from /proc/PID/maps.  Count, or -errno. */
static int maps_over(const struct mtd_pageout *po, uint64_t lo, uint64_t hi, struct mtd_vma *v,
		     size_t max)
{
	char path[96];
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	int fd, n;

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%d/maps", po->proc_root, po->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	for (;;) {
		if (len == cap) {
			char *nb = cap < (8u << 20) ? realloc(buf, cap * 2 + 1) : NULL;
			if (!nb) {
				close(fd);
				free(buf);
				return -EFBIG;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	n = mtd_ram_parse_smaps(buf, lo, hi, v, max);
	free(buf);
	return n;
}

static bool advise_fatal(int err)
{
	return err == ESRCH || err == EPERM || err == EBADF;
}

/*
 * The kernel refused a span (a vector stops at the first one it refuses): try it again one
 * mapping at a time, so that one locked mapping (mlock, -overcommit mem-lock) does not keep
 * the others in; the candidates of the mappings it refuses again are marked refused.
 * 0, or the -errno that ends the pageout.
 */
#define REFUSED_VMAS 64
static int advise_refused(struct mtd_pageout *po, const struct iovec *iov,
			  struct mtd_pageout_result *res)
{
	uint64_t lo = (uintptr_t)iov->iov_base, hi = lo + iov->iov_len;
	struct mtd_vma v[REFUSED_VMAS] = {{0}};
	int n = maps_over(po, lo, hi, v, REFUSED_VMAS);

	res->refused_spans++;
	if (n < 0) { /* cannot tell the mappings apart: the whole span stays in */
		mark_refused(po, lo, hi);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		uint64_t a = v[i].start > lo ? v[i].start : lo;
		uint64_t e = v[i].end < hi ? v[i].end : hi;
		struct iovec one = {.iov_base = (void *)(uintptr_t)a, .iov_len = (size_t)(e - a)};
		res->syscalls++;
		if (syscall(SYS_process_madvise, po->pidfd, &one, 1, MADV_PAGEOUT, 0) >= 0)
			continue;
		if (advise_fatal(errno))
			return -errno;
		mark_refused(po, a, e);
	}
	return 0;
}

/* One batch of spans: process_madvise, and past every span the kernel refused. */
static int advise_flush(struct mtd_pageout *po, struct iovec *iov, size_t *ni, uint64_t *bytes,
			struct mtd_pageout_result *res)
{
	size_t first = 0, n = *ni;
	int rc = 0;

	*ni = 0;
	*bytes = 0;
	while (first < n && rc == 0) {
		res->syscalls++;
		long done = syscall(SYS_process_madvise, po->pidfd, iov + first, n - first,
				    MADV_PAGEOUT, 0);
		if (done < 0 && advise_fatal(errno))
			return -errno;
		/* The spans it took whole; the one at done (if any) is the one it refused. */
		uint64_t left = done > 0 ? (uint64_t)done : 0;
		while (first < n && left >= iov[first].iov_len)
			left -= iov[first++].iov_len;
		if (first < n)
			rc = advise_refused(po, &iov[first++], res);
	}
	return rc;
}

/* Step 3: process_madvise over the candidates, contiguous pages coalesced, 1024 spans or
 * ADVISE_MAX_BYTES a call. */
static int advise(struct mtd_pageout *po, struct span *sp, size_t n, struct mtd_pageout_result *res)
{
	struct iovec iov[IOV_BATCH];
	size_t ni = 0;
	uint64_t bytes = 0;
	int rc;

	for (size_t s = 0; s < n; s++) {
		struct po_region *pr = sp[s].pr;
		for (uint64_t i = sp[s].first; i < sp[s].first + sp[s].n; i++) {
			if (pr->st[i] != PG_CAND)
				continue;
			char *a = (char *)(uintptr_t)(pr->r.hva + (i << PAGE_SHIFT));
			if (bytes + PAGE_BYTES > ADVISE_MAX_BYTES &&
			    (rc = advise_flush(po, iov, &ni, &bytes, res)) < 0)
				return rc;
			bytes += PAGE_BYTES;
			if (ni && (char *)iov[ni - 1].iov_base + iov[ni - 1].iov_len == a) {
				iov[ni - 1].iov_len += PAGE_BYTES;
				continue;
			}
			if (ni == IOV_BATCH) {
				bytes -= PAGE_BYTES;
				if ((rc = advise_flush(po, iov, &ni, &bytes, res)) < 0)
					return rc;
				bytes = PAGE_BYTES;
			}
			iov[ni].iov_base = a;
			iov[ni++].iov_len = PAGE_BYTES;
		}
	}
	return advise_flush(po, iov, &ni, &bytes, res);
}

/* Step 4: what really went.  Candidates become swapped or are kept. */
static int verify(struct mtd_pageout *po, struct span *sp, size_t n, struct kept_acc *k,
		  struct mtd_pageout_result *res)
{
	for (size_t s = 0; s < n; s++) {
		struct po_region *pr = sp[s].pr;
		for (uint64_t p = 0; p < sp[s].n; p += PM_CHUNK) {
			size_t c = sp[s].n - p < PM_CHUNK ? (size_t)(sp[s].n - p) : PM_CHUNK;
			uint64_t idx0 = sp[s].first + p;
			bool any = false;
			for (size_t i = 0; i < c && !any; i++)
				any = pr->st[idx0 + i] == PG_CAND || pr->st[idx0 + i] == PG_REFUSED;
			if (!any)
				continue;
			int rc = read_pm(po, pr->r.hva + (idx0 << PAGE_SHIFT), c);
			if (rc < 0)
				return rc;
			for (size_t i = 0; i < c; i++) {
				uint64_t e = po->pm[i], idx = idx0 + i;
				uint8_t st = pr->st[idx];
				if (st != PG_CAND && st != PG_REFUSED)
					continue;
				if (e & PM_SWAPPED) {
					set_state(po, pr, idx, PG_SWAPPED);
					res->swapped_pages++;
					po->stats.out_total++;
				} else if (!(e & PM_PRESENT)) {
					set_state(po, pr, idx,
						  PG_EMPTY); /* discarded by QEMU meanwhile */
					res->empty_pages++;
				} else {
					/* The kernel kept it: held until mtd_pageout_retry_held. */
					set_state(po, pr, idx, PG_HELD);
					kept_add(k, pr->r.gpa + (idx << PAGE_SHIFT), 1,
						 st == PG_REFUSED ? MTD_PO_KEPT_REFUSED
								  : MTD_PO_KEPT_RESIDENT);
				}
			}
		}
	}
	return 0;
}

/* After a failure: every candidate left is kept. */
static void abandon(struct mtd_pageout *po, struct span *sp, size_t n, struct kept_acc *k)
{
	for (size_t s = 0; s < n; s++)
		for (uint64_t i = sp[s].first; i < sp[s].first + sp[s].n; i++)
			if (sp[s].pr->st[i] == PG_CAND || sp[s].pr->st[i] == PG_REFUSED) {
				set_state(po, sp[s].pr, i, PG_RESIDENT);
				kept_add(k, sp[s].pr->r.gpa + (i << PAGE_SHIFT), 1,
					 MTD_PO_KEPT_RESIDENT);
			}
}

int mtd_pageout_runs(struct mtd_pageout *po, const struct vmm_run *runs, size_t nr_runs,
		     const struct mtd_thp_settings *thp, uint64_t budget_pages,
		     mtd_pageout_kept_fn kept, void *arg, struct mtd_pageout_result *res)
{
	struct kept_acc k = {.fn = kept, .arg = arg, .res = res};
	size_t max = nr_runs * 2 + po->nr + 1, n;
	struct span *sp = calloc(max, sizeof(*sp));
	uint64_t t0 = mono_ns();
	int rc;

	memset(res, 0, sizeof(*res));
	if (!sp) {
		for (size_t i = 0; i < nr_runs; i++)
			kept_add(&k, runs[i].gpa, runs[i].npages, MTD_PO_KEPT_RESIDENT);
		kept_flush(&k);
		return -ENOMEM;
	}
	n = make_spans(po, runs, nr_runs, sp, max, &k);
	rc = classify_spans(po, sp, n, &k, res);
	if (rc == 0) {
		limit_candidates(po, sp, n, thp, budget_pages, &k);
		rc = advise(po, sp, n, res);
	}
	if (rc == 0)
		rc = verify(po, sp, n, &k, res);
	abandon(po, sp, n, &k); /* a no-op unless a step failed */
	kept_flush(&k);
	for (int i = 0; i < MTD_PO_KEPT_NR; i++)
		po->stats.kept_total[i] += res->kept_pages[i];
	free(sp);
	res->ns = mono_ns() - t0;
	return rc;
}

uint64_t mtd_pageout_retry_held(struct mtd_pageout *po)
{
	uint64_t held = po->stats.held_pages;

	for (size_t r = 0; r < po->nr && po->stats.held_pages; r++)
		for (uint64_t p = 0; p < po->reg[r].pages; p++)
			if (po->reg[r].st[p] == PG_HELD)
				set_state(po, &po->reg[r], p, PG_RESIDENT);
	return held;
}

/* ---- the refault scan ---------------------------------------------------------------- */

/* Did khugepaged rebuild block b (pages [lo, hi) of pr, entries from e0) into a huge page?
 * All 512 present on contiguous frames starting at a 2 MiB-aligned one.  Only a collapse
 * (or a fresh huge page over an empty block, which cannot hold swapped pages) looks like
 * that: a refault reads one 4 KiB page into whatever frame is free. */
static bool collapsed(const struct mtd_pageout *po, const struct po_region *pr, uint64_t lo,
		      uint64_t hi, const uint64_t *e0)
{
	if (!po->stats.pfn_visible || hi - lo != BLOCK_PAGES ||
	    ((pr->r.hva + (lo << PAGE_SHIFT)) & ((1ULL << BLOCK_SHIFT) - 1)))
		return false;
	uint64_t pfn0 = e0[0] & PM_PFN_MASK;
	if (!(e0[0] & PM_PRESENT) || pfn0 % BLOCK_PAGES)
		return false;
	for (uint64_t i = 1; i < BLOCK_PAGES; i++)
		if (!(e0[i] & PM_PRESENT) || (e0[i] & PM_PFN_MASK) != pfn0 + i)
			return false;
	return true;
}

static int scan_region(struct mtd_pageout *po, struct po_region *pr,
		       const struct mtd_pageout_scan_ops *ops, void *arg,
		       struct mtd_pageout_scan_result *res)
{
	size_t b = 0;

	while (b < pr->nr_blk) {
		if (!pr->blk_out[b]) {
			b++;
			continue;
		}
		size_t b1 = b;
		while (b1 < pr->nr_blk && b1 - b < SCAN_BLOCKS && pr->blk_out[b1])
			b1++;
		/* Pages of the region in blocks [b, b1). */
		uint64_t hlo = pr->blk_base + ((uint64_t)b << BLOCK_SHIFT);
		uint64_t hhi = pr->blk_base + ((uint64_t)b1 << BLOCK_SHIFT);
		if (hlo < pr->r.hva)
			hlo = pr->r.hva;
		if (hhi > pr->r.hva + pr->r.bytes)
			hhi = pr->r.hva + pr->r.bytes;
		uint64_t lo = (hlo - pr->r.hva) >> PAGE_SHIFT, hi = (hhi - pr->r.hva) >> PAGE_SHIFT;
		int rc = read_pm(po, hlo, (size_t)(hi - lo));
		if (rc < 0)
			return rc;
		res->blocks_read += b1 - b;
		for (size_t blk = b; blk < b1; blk++) {
			/* The block's pages that belong to the region. */
			uint64_t bs = pr->blk_base + ((uint64_t)blk << BLOCK_SHIFT);
			uint64_t be = bs + ((uint64_t)1 << BLOCK_SHIFT);
			uint64_t plo =
			    ((bs > pr->r.hva ? bs : pr->r.hva) - pr->r.hva) >> PAGE_SHIFT;
			uint64_t phi =
			    ((be < pr->r.hva + pr->r.bytes ? be : pr->r.hva + pr->r.bytes) -
			     pr->r.hva) >>
			    PAGE_SHIFT;
			const uint64_t *e = po->pm + (plo - lo);
			bool whole = pr->blk_swapped[blk] && collapsed(po, pr, plo, phi, e);
			for (uint64_t i = plo; i < phi; i++) {
				uint64_t pe = e[i - plo];
				uint64_t gpa = pr->r.gpa + (i << PAGE_SHIFT);
				uint8_t s = pr->st[i];
				if (s == PG_SWAPPED && (pe & PM_PRESENT)) {
					set_state(po, pr, i, PG_RESIDENT);
					if (whole) {
						res->collapsed_pages++;
						po->stats.collapsed_total++;
						if (ops->restored)
							ops->restored(arg, gpa, 1);
					} else {
						res->refaults++;
						po->stats.refaults_total++;
						if (ops->refault)
							ops->refault(arg, gpa);
					}
				} else if (s == PG_SWAPPED && !(pe & PM_SWAPPED)) {
					/* Neither present nor in swap: QEMU discarded it after the
					 * guest freed it.  Still evicted, now holding nothing. */
					set_state(po, pr, i, PG_EMPTY);
					res->dropped_pages++;
				} else if (s == PG_EMPTY && (pe & PM_PRESENT)) {
					set_state(po, pr, i, PG_RESIDENT);
					res->filled_pages++;
					if (ops->restored)
						ops->restored(arg, gpa, 1);
				} else if (s == PG_EMPTY && (pe & PM_SWAPPED)) {
					set_state(po, pr, i, PG_SWAPPED);
				}
			}
		}
		b = b1;
	}
	return 0;
}

int mtd_pageout_scan(struct mtd_pageout *po, const struct mtd_pageout_scan_ops *ops, void *arg,
		     struct mtd_pageout_scan_result *res)
{
	uint64_t t0 = mono_ns();
	int rc = 0;

	memset(res, 0, sizeof(*res));
	for (size_t i = 0; i < po->nr && rc == 0; i++)
		rc = scan_region(po, &po->reg[i], ops, arg, res);
	res->ns = mono_ns() - t0;
	return rc;
}

/* Runs of empty pages in [lo, hi) of pr, whose pagemap entries start at e. */
static uint64_t empty_runs(const struct po_region *pr, uint64_t lo, uint64_t hi, const uint64_t *e,
			   mtd_pageout_empty_fn fn, void *arg)
{
	uint64_t found = 0, start = 0, n = 0;

	for (uint64_t i = lo; i < hi; i++) {
		bool empty = pg_resident(pr->st[i]) && !(e[i - lo] & (PM_PRESENT | PM_SWAPPED));
		if (empty && n++ == 0)
			start = i;
		if (empty && i + 1 < hi)
			continue;
		if (n)
			fn(arg, pr->r.gpa + (start << PAGE_SHIFT), n);
		found += n;
		n = 0;
	}
	return found;
}

int64_t mtd_pageout_find_empty(struct mtd_pageout *po, mtd_pageout_empty_fn fn, void *arg)
{
	int64_t found = 0;

	if (!po || !fn)
		return -EINVAL;
	for (size_t r = 0; r < po->nr; r++) {
		const struct po_region *pr = &po->reg[r];
		for (uint64_t lo = 0; lo < pr->pages; lo += PM_CHUNK) {
			uint64_t hi = pr->pages - lo > PM_CHUNK ? lo + PM_CHUNK : pr->pages;
			int rc = read_pm(po, pr->r.hva + (lo << PAGE_SHIFT), (size_t)(hi - lo));
			if (rc < 0)
				return rc;
			found += (int64_t)empty_runs(pr, lo, hi, po->pm, fn, arg);
		}
	}
	return found;
}
