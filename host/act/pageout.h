/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pageout.h - the host-side pageout actuator: guest pages out of QEMU's memory into host swap,
 * and the pages that came back.
 *
 * The fourth actuator beside the balloon, the agent's reclaim and free page reporting, and
 * the only one that needs nothing from the guest.  memtided names guest pages by GPA; the
 * guest RAM layout (ram_layout.h) turns them into QEMU's virtual addresses, and
 * process_madvise(MADV_PAGEOUT) on a pidfd of the QEMU process reclaims them into swap (zram
 * by default: docs/operations.md, "Host swap").
 *
 * What it promises:
 *   - Nothing the guest may need is ever discarded.  MADV_PAGEOUT writes a page to swap and
 *     the kernel reads it back when QEMU (for the guest) touches it; no MADV_DONTNEED or
 *     MADV_REMOVE is ever issued here.  (The only discards of guest RAM are QEMU's own, for
 *     pages the guest reported free through the balloon.)  Even a stale map cannot lose
 *     data: the worst a wrong address does is page out some other memory of QEMU's.
 *   - The result is checked, not the return value: the kernel skips pages mapped twice
 *     (vhost-user backends, KSM), locked pages, and pages it cannot swap (swap full) while
 *     still returning the full length (measured, /work/shared/README.md).  After each call
 *     /proc/PID/pagemap says which pages went to swap; the others are reported as kept.
 *   - Huge pages stay whole where they can (docs/design.md, "Host huge
 *     pages"): a 2 MiB block (in QEMU's address space, where khugepaged works) is paged out
 *     only if it would then hold more swapped pages than khugepaged's max_ptes_swap; with
 *     fewer, khugepaged would read them back to rebuild the huge page (this host: 64), the
 *     memory would creep back and every such read would look like a refault.  A block that
 *     khugepaged collapsed anyway is recognised (all 512 pages present again, on 512
 *     contiguous, aligned frames) and reported as collapsed, not as 512 refaults.
 *
 * Per page it keeps one state byte, for the evictable regions only (1 byte per 4 KiB:
 * 4 MiB for a 16 GiB guest), and per 2 MiB block a count of pages out, so the refault scan
 * reads only blocks that hold evicted pages.
 *
 * Thread context: one mtd_pageout belongs to one thread (the VM's loop).
 */
#ifndef MEMTIDE_HOST_PAGEOUT_H
#define MEMTIDE_HOST_PAGEOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/ram_layout.h"

struct mtd_pageout;
struct vmm_run;

/* What khugepaged does to QEMU's memory, read from sysfs (mtd_pageout_read_thp). */
struct mtd_thp_settings {
	bool scans;             /* khugepaged may collapse guest RAM at all (THP not "never") */
	bool always;            /* THP "always": every anonymous mapping, not only MADV_HUGEPAGE */
	unsigned max_ptes_swap; /* swapped pages it reads back to collapse a block (64) */
	unsigned max_ptes_none; /* empty pages it fills to collapse a block (511) */
};

/* Read /sys/kernel/mm/transparent_hugepage (sysfs_root: normally "/sys", tests point it
 * elsewhere).  Missing files mean the kernel's defaults.  0 or -errno. */
int mtd_pageout_read_thp(const char *sysfs_root, struct mtd_thp_settings *out);

/*
 * Open the actuator for QEMU process pid over layout l (copied): a pidfd, /proc/PID/pagemap,
 * and a permission probe (process_madvise needs ptrace read access and CAP_SYS_NICE).
 * proc_root is "/proc" unless a test says otherwise.  Pages already in swap (memtided
 * restarted, or the host's own reclaim) are adopted as swapped.  Returns 0, or -EPERM /
 * -ESRCH / -ENOSYS / -ENOMEM / -errno with a sentence in err.
 */
int mtd_pageout_open(int pid, const struct mtd_ram_layout *l, const char *proc_root,
		     struct mtd_pageout **out, char *err, size_t errlen);
void mtd_pageout_close(struct mtd_pageout *po);

/*
 * The same map, for watching only: the kernel's own reclaim sends the pages out (host-side
 * reclaim through the VM's cgroup, memcg_hand.h), this says which went and which came back
 * (mtd_pageout_adopt, then mtd_pageout_scan), page by page.  Needs pagemap read access, not
 * process_madvise's.  Returns as mtd_pageout_open.
 */
int mtd_pageout_open_watch(int pid, const struct mtd_ram_layout *l, const char *proc_root,
			   struct mtd_pageout **out, char *err, size_t errlen);

/* Pages in swap now that the map counts resident: something else sent them (the kernel's
 * reclaim).  They are the map's from now on (adopted_pages, out_total), so the refault scan
 * counts them when they come back.  Cost: 8 bytes of pagemap per page of every region.
 * Returns the pages adopted, -ESRCH or -errno. */
int64_t mtd_pageout_adopt(struct mtd_pageout *po);

/* A new layout (a re-query found a change): regions that are the same keep their state,
 * pages of regions that went away are forgotten.  0 or -ENOMEM. */
int mtd_pageout_set_layout(struct mtd_pageout *po, const struct mtd_ram_layout *l);

/* Why a page was not paged out, for the kept callback and the counters. */
enum mtd_pageout_kept {
	MTD_PO_KEPT_RESIDENT = 0, /* still resident after MADV_PAGEOUT (shared, KSM, pinned,
				   * touched meanwhile), or held since such a try */
	MTD_PO_KEPT_THP,          /* its 2 MiB block would be rebuilt by khugepaged */
	MTD_PO_KEPT_SWAP_FULL,    /* no room left in host swap (the budget) */
	MTD_PO_KEPT_OUTSIDE,      /* not in an evictable region of the layout */
	MTD_PO_KEPT_REFUSED,      /* the kernel refused MADV_PAGEOUT on its mapping (locked:
				   * mlock after the map was read; EINVAL) */
	MTD_PO_KEPT_NR,
};
const char *mtd_pageout_kept_name(enum mtd_pageout_kept k);

struct mtd_pageout_result {
	uint64_t swapped_pages; /* went to swap now */
	uint64_t empty_pages;   /* held nothing on the host (never touched or
					     * discarded): evicted without a write */
	uint64_t already_pages; /* were in swap already */
	uint64_t kept_pages[MTD_PO_KEPT_NR];
	uint64_t syscalls;      /* process_madvise calls made */
	uint64_t refused_spans; /* spans the kernel refused (each tried again per mapping) */
	uint64_t ns;            /* time in process_madvise and the checks */
};

/* Called for pages that stay resident: the caller gives them back to libvmm (vmm_restore). */
typedef void (*mtd_pageout_kept_fn)(void *arg, uint64_t gpa, uint64_t npages,
				    enum mtd_pageout_kept why);

/*
 * Page out runs (guest-physical, 4 KiB aligned), at most budget_pages of them into swap
 * (the caller's share of free swap).  Every page of the runs ends up either out (swapped,
 * empty or already swapped: counted in res) or reported once through kept.
 * Cost: one pagemap read before and after (8 bytes per page), one process_madvise per 1024
 * contiguous spans or 1 GiB, and the kernel's reclaim (compression, for zram).
 * process_madvise's return is read: the kernel stops a vector at the first span it refuses
 * (a locked mapping: EINVAL) and takes at most MAX_RW_COUNT (2 GiB - 4 KiB) a call, both
 * measured on this host's 6.18; a refused span is tried again mapping by mapping
 * (/proc/PID/maps), the pages of the mappings it refuses are kept (MTD_PO_KEPT_REFUSED),
 * and the vector goes on after it.
 * Pages the kernel kept (MTD_PO_KEPT_RESIDENT, MTD_PO_KEPT_REFUSED) are held: later calls
 * report them kept at once, without asking the kernel again, until mtd_pageout_retry_held.
 * Returns 0, -ESRCH (QEMU is gone), -EPERM, or -errno; pages not yet handled when it fails
 * are reported through kept.
 */
int mtd_pageout_runs(struct mtd_pageout *po, const struct vmm_run *runs, size_t nr_runs,
		     const struct mtd_thp_settings *thp, uint64_t budget_pages,
		     mtd_pageout_kept_fn kept, void *arg, struct mtd_pageout_result *res);

/* Pages held since the kernel kept them may be tried again (the caller's pace: once per
 * cold age).  Returns how many were held.  O(evictable pages) when some are. */
uint64_t mtd_pageout_retry_held(struct mtd_pageout *po);

/* What the refault scan found. */
struct mtd_pageout_scan_result {
	uint64_t refaults;        /* swapped pages present again: read back for the guest */
	uint64_t collapsed_pages; /* swapped pages khugepaged read back into a huge page */
	uint64_t dropped_pages;   /* swapped pages QEMU discarded (the guest freed them) */
	uint64_t filled_pages;    /* empty pages the guest used again (no read: no refault) */
	uint64_t blocks_read;     /* 2 MiB blocks whose pagemap was read */
	uint64_t ns;
};

struct mtd_pageout_scan_ops {
	/* A page read back from swap: the guest touched it.  The caller records it as a
	 * refault (vmm_refault). */
	void (*refault)(void *arg, uint64_t gpa);
	/* Pages resident again without a refault (collapsed by khugepaged, or empty ones the
	 * guest used): the caller restores them (vmm_restore). */
	void (*restored)(void *arg, uint64_t gpa, uint64_t npages);
};

/*
 * The refault scan: read pagemap over every 2 MiB block holding evicted pages and report
 * what changed since the last look.  Exact for pages (a page counts once, when it comes
 * back); cost 8 bytes of pagemap per page of those blocks (measured in bench/pageout-bench:
 * docs/design.md "Refaults, page by page").  Returns 0, -ESRCH, or -errno.
 */
int mtd_pageout_scan(struct mtd_pageout *po, const struct mtd_pageout_scan_ops *ops, void *arg,
		     struct mtd_pageout_scan_result *res);

/*
 * The guest's free memory, as the host sees it: pages memtided has not evicted whose pagemap
 * entry is neither present nor swapped.  They hold nothing on the host: never touched since
 * QEMU started, or discarded by QEMU after the guest freed them (free page reporting, the
 * balloon).  fn gets them in runs, ascending.  Cost: 8 bytes of pagemap per page of every
 * evictable region (all of them, unlike the refault scan).  Returns the pages found,
 * -ESRCH (QEMU is gone) or -errno.
 */
typedef void (*mtd_pageout_empty_fn)(void *arg, uint64_t gpa, uint64_t npages);
int64_t mtd_pageout_find_empty(struct mtd_pageout *po, mtd_pageout_empty_fn fn, void *arg);

/* Counters for status and metrics. */
struct mtd_pageout_stats {
	uint64_t swapped_pages;   /* evicted pages in host swap now */
	uint64_t empty_pages;     /* evicted pages that hold nothing on the host */
	uint64_t adopted_pages;   /* found in swap at open */
	uint64_t out_total;       /* pages sent to swap, cumulative */
	uint64_t refaults_total;  /* pages read back for the guest, cumulative */
	uint64_t collapsed_total; /* pages khugepaged read back, cumulative */
	uint64_t kept_total[MTD_PO_KEPT_NR];
	uint64_t evictable_pages; /* pages of the evictable regions */
	uint64_t held_pages;      /* kept by the kernel at their last try, not asked again yet */
	bool pfn_visible;         /* pagemap shows frame numbers (CAP_SYS_ADMIN): collapses
				   * can be told from refaults */
};
void mtd_pageout_get_stats(const struct mtd_pageout *po, struct mtd_pageout_stats *out);

#endif /* MEMTIDE_HOST_PAGEOUT_H */
