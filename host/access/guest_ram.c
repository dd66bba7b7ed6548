// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * guest_ram.c - the guest RAM the idle and damon sources watch, from QEMU's checked map
 * (guest_ram.h).
 *
 * Pages are numbered region by region in GPA order (page index -> region by a search of
 * first_page[]); a region's page i sits at HVA region.hva + i * 4 KiB in QEMU, whose
 * pagemap entry gives its frame.  The zero pages' frames are learnt from this process's own
 * mappings: a private anonymous page that was only read is mapped to the shared zero page,
 * and a 2 MiB-aligned one with MADV_HUGEPAGE to THP's huge zero page (when
 * transparent_hugepage/use_zero_page is on).  Their frames are the same in every process.
 */
#include "access/guest_ram.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PM_PFN_MASK ((1ULL << 55) - 1)
#define PM_PRESENT  (1ULL << 63)
#define CHUNK_PAGES 4096 /* pagemap entries read per pread */

/* The frame a read-only touch of this mapping's first byte maps (0: not visible). */
static uint64_t frame_of_read(const volatile uint8_t *p)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	(void)*p;
	if (fd < 0)
		return 0;
	if (pread(fd, &e, 8, (off_t)((uintptr_t)p / VMM_PAGE_SIZE * 8)) != 8)
		e = 0;
	close(fd);
	return (e & PM_PRESENT) ? e & PM_PFN_MASK : 0;
}

static void learn_zero_frames(struct mtd_guest_ram *r)
{
	uint8_t *p = mmap(NULL, VMM_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED) {
		r->zero_pfn = frame_of_read(p);
		munmap(p, VMM_PAGE_SIZE);
	}
	uint8_t *h = mmap(NULL, 2 * VMM_SIZE_2M, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h != MAP_FAILED) {
		uint8_t *a = (uint8_t *)(((uintptr_t)h + VMM_SIZE_2M - 1) & ~(VMM_SIZE_2M - 1));
		(void)madvise(a, VMM_SIZE_2M, MADV_HUGEPAGE);
		uint64_t f = frame_of_read(a);
		/* The huge zero page only when THP mapped one: else the 4 KiB zero page again. */
		if (f && f != r->zero_pfn && f % 512 == 0)
			r->huge_zero_pfn = f;
		munmap(h, 2 * VMM_SIZE_2M);
	}
}

static int refuse(char *why, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *why, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return rc;
}

int mtd_guest_ram_open(mtd_qmp_fn qmp, void *qmp_ctx, int pid, const char *proc_dir,
		       const char *source, struct mtd_guest_ram *r, char *why, size_t whylen)
{
	char path[300];
	int rc;

	memset(r, 0, sizeof(*r));
	r->pagemap_fd = -1;
	if (!qmp)
		return refuse(why, whylen, -ENOTSUP,
			      "QEMU's monitor is not at hand, so where guest RAM lives cannot be "
			      "checked (%s sees host frames)",
			      source);
	r->layout = calloc(1, sizeof(*r->layout));
	if (!r->layout)
		return -ENOMEM;
	/* proc_dir is "/proc" or a test's tree; ram_layout reads PID/smaps and PID/fd in it */
	rc = mtd_ram_layout_query(qmp, qmp_ctx, pid, proc_dir, r->layout);
	if (rc < 0 || !r->layout->sure) {
		rc = refuse(why, whylen, -EPROTO, "guest RAM's map could not be checked: %.200s",
			    r->layout->why);
		goto fail;
	}
	for (size_t i = 0; i < r->layout->nr; i++) {
		const struct mtd_ram_region *g = &r->layout->r[i];
		if (g->backing == MTD_RAM_HUGETLB) {
			rc = refuse(why, whylen, -EOPNOTSUPP,
				    "guest RAM at 0x%llx (%s) is on hugetlbfs, whose pages are not "
				    "on the kernel's LRU: %s cannot see their accesses",
				    (unsigned long long)g->gpa, g->block, source);
			goto fail;
		}
		r->ranges[i] = (struct vmm_range){g->gpa, g->gpa + g->bytes};
		r->first_page[i] = r->pages;
		r->pages += g->bytes >> VMM_PAGE_SHIFT;
	}
	r->nr_ranges = r->layout->nr;
	r->first_page[r->nr_ranges] = r->pages;
	if (!r->pages) {
		rc = refuse(why, whylen, -EPROTO, "QEMU's map shows no guest RAM");
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%d/pagemap", proc_dir, pid);
	r->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	r->pm = calloc(CHUNK_PAGES, sizeof(*r->pm));
	if (r->pagemap_fd < 0 || !r->pm) {
		rc = r->pm ? -errno : -ENOMEM;
		refuse(why, whylen, rc, "cannot read %s", path);
		goto fail;
	}
	learn_zero_frames(r);
	return 0;
fail:
	mtd_guest_ram_close(r);
	return rc;
}

void mtd_guest_ram_close(struct mtd_guest_ram *r)
{
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	free(r->layout);
	free(r->pm);
	memset(r, 0, sizeof(*r));
	r->pagemap_fd = -1;
}

static size_t region_of(const struct mtd_guest_ram *r, uint64_t page)
{
	size_t lo = 0, hi = r->nr_ranges;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (r->first_page[mid] <= page)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t mtd_guest_ram_gpa(const struct mtd_guest_ram *r, uint64_t page)
{
	size_t i = region_of(r, page);

	return r->ranges[i].start + ((page - r->first_page[i]) << VMM_PAGE_SHIFT);
}

int mtd_guest_ram_region_start(const struct mtd_guest_ram *r, uint64_t page)
{
	return r->first_page[region_of(r, page)] == page;
}

static bool is_zero(const struct mtd_guest_ram *r, uint64_t f)
{
	return (r->zero_pfn && f == r->zero_pfn) ||
	       (r->huge_zero_pfn && f >= r->huge_zero_pfn && f < r->huge_zero_pfn + 512);
}

int mtd_guest_ram_frames(struct mtd_guest_ram *r, uint64_t *pfn1, uint8_t *zero)
{
	r->zero_pages = 0;
	for (size_t i = 0; i < r->nr_ranges; i++) {
		const struct mtd_ram_region *g = &r->layout->r[i];
		uint64_t n = g->bytes >> VMM_PAGE_SHIFT, base = r->first_page[i];

		for (uint64_t p = 0; p < n; p += CHUNK_PAGES) {
			uint64_t k = n - p < CHUNK_PAGES ? n - p : CHUNK_PAGES;
			off_t off = (off_t)(((g->hva >> VMM_PAGE_SHIFT) + p) * 8);
			ssize_t got = pread(r->pagemap_fd, r->pm, k * 8, off);

			if (got < 0)
				return -errno;
			for (uint64_t j = 0; j < k; j++) {
				uint64_t e = j * 8 < (uint64_t)got ? r->pm[j] : 0;
				uint64_t f = e & PM_PFN_MASK;
				bool z = (e & PM_PRESENT) && f && is_zero(r, f);

				pfn1[base + p + j] = (e & PM_PRESENT) && f && !z ? f + 1 : 0;
				if (zero)
					zero[base + p + j] = z;
				r->zero_pages += z;
			}
		}
	}
	return 0;
}

void mtd_guest_ram_hint_zero(const struct mtd_guest_ram *r, const uint8_t *zero,
			     struct vmm_guest *g)
{
	uint64_t run = 0;

	if (!zero || !r->zero_pages)
		return;
	for (uint64_t p = 0; p <= r->pages; p++) {
		bool z = p < r->pages && zero[p] && !(run && mtd_guest_ram_region_start(r, p));
		if (z) {
			run++;
			continue;
		}
		if (run)
			(void)vmm_hint_free(g, mtd_guest_ram_gpa(r, p - run), run);
		run = p < r->pages && zero[p] ? 1 : 0;
	}
}
