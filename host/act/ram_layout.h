/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ram_layout.h - where a QEMU guest's RAM lives: guest-physical address (GPA) -> QEMU's host
 * virtual address (HVA), for every RAM region, checked against the QEMU process's mappings.
 *
 * memtided evicts guest pages itself (host/act/pageout.c) by naming them in QEMU's address space,
 * and reads them back through /proc/PID/pagemap; both need this map, and both must be sure
 * of it.  QEMU 7.2 has no QMP command that returns host addresses, so the layout is put
 * together from four answers and cross-checked:
 *
 *   1. HMP `info mtree -f` (through QMP human-monitor-command): the flat view of the
 *      "memory" address space.  Each "ram" line is a GPA range, the RAM block backing it and
 *      the offset into that block ("pc.ram @00000000c0000000" above the 4 GiB PCI hole).
 *   2. QMP query-memdev: the memory backends.  Only ranges backed by one (the machine's
 *      pc.ram, NUMA nodes, DIMMs) are guest RAM; other "ram" ranges (VGA memory, ROMs) are
 *      device memory and are left alone.
 *   3. HMP `gpa2hva ADDR` for the first and the last page of each range: QEMU's own
 *      translation.  Every range of one RAM block must agree on the block's base
 *      (hva - offset), and the last page must sit where the first says it does.
 *   4. QMP query-memory-devices: every DIMM must appear as one range at its address, of its
 *      size, backed by its memdev; HMP `info ramblock` gives each block's size and page size
 *      (a range may not run past its block) and QEMU's ram_addr offsets (what a TCG plugin
 *      sees as the "physical" address of RAM above 4 GiB).
 *
 * Then /proc/PID/smaps: each range's HVA span must lie in readable, writable mappings of one
 * kind, which says what host-side eviction can do with it:
 *   anonymous private   pages go to swap (memory-backend-ram: QEMU's default);
 *   shared memory       memfd, /dev/shm, SysV, or shared anonymous (/dev/zero: a
 *                       memory-backend-ram with share=on): pages would go to swap through
 *                       shmem, but pagemap shows a swapped shmem page as "not present",
 *                       like one still in the page cache: not evictable (it could not be
 *                       checked);
 *   hugetlbfs           never swapped: not evictable;
 *   other files         pageout would write the file, not swap: not evictable;
 *   mlocked             (VmFlags lo: -overcommit mem-lock=on) cannot be paged out.
 * A VFIO device (an open VFIO group or device, or /dev/iommu, among /proc/PID/fd) pins all guest RAM for
 * DMA: nothing is evictable.
 *
 * Anything that does not add up makes the layout "unsure": memtided then refuses host-side
 * eviction for the VM and says why (`memtidectl vm show`).  A layout can still be sure while
 * some regions are not evictable (a hugetlbfs DIMM beside anonymous pc.ram): the others are
 * used and the reason lists the rest.
 *
 * The parsers are pure functions of text (unit-tested on recorded QEMU 7.2 output,
 * tests/unit/test_ram_layout.c); mtd_ram_layout_query drives them against a live QEMU.  QEMU
 * is trusted more than a guest, but every line is still checked: a malformed answer is
 * -EPROTO with a sentence, never a crash and never a guess.
 *
 * Thread context: no state of its own; a layout belongs to its caller.
 */
#ifndef MEMTIDE_HOST_RAM_LAYOUT_H
#define MEMTIDE_HOST_RAM_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

#define MTD_RAM_MAX_REGIONS 64 /* RAM ranges of one guest (pc: 2-3, plus one per DIMM) */
#define MTD_RAM_NAME_MAX    64 /* RAM block and device ids (QEMU ids are short) */
#define MTD_RAM_WHY_MAX     320

/* ---- what the parsers return ---------------------------------------------------------- */

/* One line of the flat view. */
struct mtd_flat_range {
	uint64_t start, end; /* GPA, [start, end) */
	uint64_t offset;     /* offset into the region (0 when the line has no @) */
	bool ram;            /* "ram" or "nv-ram" (not rom, romd, ramd, i/o, iommu) */
	char name[MTD_RAM_NAME_MAX];
};

/* One line of `info ramblock`. */
struct mtd_ramblock {
	char name[MTD_RAM_NAME_MAX];
	uint64_t page_bytes; /* PSize: 4 KiB, or the huge page size of hugetlbfs backing */
	uint64_t offset;     /* ram_addr_t of the block's first byte */
	uint64_t used_bytes;
};

/* One memory device (query-memory-devices): a DIMM, NVDIMM, virtio-mem or virtio-pmem. */
struct mtd_memdevice {
	char type[16]; /* "dimm", "nvdimm", "virtio-mem", ... */
	char id[MTD_RAM_NAME_MAX];
	char memdev[MTD_RAM_NAME_MAX]; /* backend id, "/objects/" stripped */
	uint64_t addr, size;
	bool hotplugged;
};

/* One mapping of the QEMU process, from /proc/PID/smaps (or maps: flags then unknown). */
struct mtd_vma {
	uint64_t start, end;
	bool readable, writable, shared;
	uint64_t kernel_page_bytes; /* 0: not given (maps) */
	unsigned flags;             /* MTD_VMA_* from VmFlags */
	char path[128];             /* "" for anonymous memory */
};
#define MTD_VMA_LOCKED   0x1  /* lo: mlocked */
#define MTD_VMA_HUGETLB  0x2  /* ht */
#define MTD_VMA_HUGEPAGE 0x4  /* hg: MADV_HUGEPAGE */
#define MTD_VMA_NOHUGE   0x8  /* nh: MADV_NOHUGEPAGE */
#define MTD_VMA_IO       0x10 /* io / pf: device or PFN mapping */

/* Parse `info mtree -f`: the ranges of the flat view that serves the address space named
 * "memory".  Returns the number of ranges (at most max are stored; more is -E2BIG), or
 * -EPROTO (no such flat view, or a line that does not parse). */
int mtd_ram_parse_flatview(const char *text, struct mtd_flat_range *out, size_t max);
/* Parse `info ramblock`.  Count, -E2BIG or -EPROTO. */
int mtd_ram_parse_ramblocks(const char *text, struct mtd_ramblock *out, size_t max);
/* Parse one `gpa2hva` answer: "Host virtual address for 0x... (NAME) is 0x...".  0 with
 * *hva and name (may be NULL) set, -ENOENT when QEMU says the address is not RAM or not
 * mapped, -EPROTO otherwise. */
int mtd_ram_parse_gpa2hva(const char *text, uint64_t *hva, char *name, size_t namelen);
/* query-memdev's return: the backends' ids.  Count, -E2BIG or -EPROTO. */
int mtd_ram_parse_memdevs(struct json_object *ret, char (*ids)[MTD_RAM_NAME_MAX], size_t max);
/* query-memory-devices' return.  Count, -E2BIG or -EPROTO. */
int mtd_ram_parse_memdevices(struct json_object *ret, struct mtd_memdevice *out, size_t max);
/* /proc/PID/smaps or /proc/PID/maps text: the mappings that overlap [lo, hi) (others are
 * skipped, so a QEMU with thousands of mappings needs no large array).  Count, -E2BIG or
 * -EPROTO. */
int mtd_ram_parse_smaps(const char *text, uint64_t lo, uint64_t hi, struct mtd_vma *out,
			size_t max);
/* A span of QEMU's virtual addresses: [start, end). */
struct mtd_hva_span {
	uint64_t start, end;
};
/* The same, for the mappings that overlap any of nr spans: one per guest-RAM region, so
 * that a DIMM mapped far from the machine's RAM does not bring every mapping between them
 * (QEMU's libraries, heaps, thread stacks) into out. */
int mtd_ram_parse_smaps_in(const char *text, const struct mtd_hva_span *spans, size_t nr,
			   struct mtd_vma *out, size_t max);
/* /proc/PID/fd link targets, one per line ("/dev/vfio/12"): does one of them pin guest
 * memory for DMA (VFIO group or device, iommufd)? */
bool mtd_ram_fds_pin_memory(const char *links);

/* ---- the layout ----------------------------------------------------------------------- */

enum mtd_ram_backing {
	MTD_RAM_ANON = 0, /* private anonymous memory */
	MTD_RAM_SHMEM,    /* shared memory: memfd, /dev/shm, tmpfs */
	MTD_RAM_HUGETLB,  /* hugetlbfs */
	MTD_RAM_FILE,     /* any other file */
};
const char *mtd_ram_backing_name(enum mtd_ram_backing b);

struct mtd_ram_region {
	uint64_t gpa;                  /* first guest-physical byte, 4 KiB aligned */
	uint64_t bytes;                /* length, a 4 KiB multiple */
	uint64_t hva;                  /* QEMU's virtual address of gpa */
	uint64_t block_offset;         /* offset of gpa in its RAM block */
	uint64_t ram_addr;             /* QEMU's ram_addr_t of gpa (block offset + block_offset) */
	char block[MTD_RAM_NAME_MAX];  /* RAM block = memory backend id ("pc.ram", "mem1") */
	char device[MTD_RAM_NAME_MAX]; /* memory device id ("dimm1"), "" for machine RAM */
	bool hotplugged;               /* the device was added at run time */
	enum mtd_ram_backing backing;
	uint64_t page_bytes; /* the backing's page size */
	bool locked;         /* mlocked */
	bool thp;            /* QEMU asked for huge pages (MADV_HUGEPAGE) */
	bool evictable;      /* host-side eviction may page it out */
	bool shared;         /* a MAP_SHARED mapping, for the re-check */
	char path[128];      /* the backing file ("" anonymous), for the re-check */
};

struct mtd_ram_layout {
	size_t nr;
	struct mtd_ram_region r[MTD_RAM_MAX_REGIONS]; /* ascending GPA, disjoint */
	uint64_t ram_bytes;                           /* sum of the regions */
	uint64_t evictable_bytes;                     /* sum of the evictable ones */
	bool sure; /* every check passed: the map can be trusted */
	bool vfio; /* a VFIO device pins guest memory */
	/* Why some or all of the guest cannot be evicted ("" when all of it can).  One or more
	 * sentences for `memtidectl vm show` and the log. */
	char why[MTD_RAM_WHY_MAX];
};

/* What the builder is given: parsed answers and, per guest-RAM flat range in order, the
 * two gpa2hva results (first page, last page; 0 when QEMU had none). */
struct mtd_ram_inputs {
	const struct mtd_flat_range *flat;
	size_t nr_flat;
	const struct mtd_ramblock *blocks;
	size_t nr_blocks;
	char (*memdevs)[MTD_RAM_NAME_MAX];
	size_t nr_memdevs;
	const struct mtd_memdevice *devices;
	size_t nr_devices;
	const uint64_t *hva_first; /* indexed like flat[] (entries for non-RAM ranges unused) */
	const uint64_t *hva_last;
	const struct mtd_vma *vmas; /* mappings overlapping guest RAM */
	size_t nr_vmas;
	bool vfio;
};

/* Which flat ranges are guest RAM (backed by a memory backend)?  Sets is_ram[i] for each
 * of in->flat[0..nr_flat) (only flat, nr_flat, memdevs and nr_memdevs are read): the
 * builder needs gpa2hva answers for exactly those. */
void mtd_ram_guest_ranges(const struct mtd_ram_inputs *in, bool *is_ram);

/*
 * Put the layout together and check it (steps 1-4 and the mappings, above).  Always fills
 * out; out->sure says whether to trust it, out->why what is wrong or left out.  Returns 0,
 * or -EINVAL for NULL arguments.  Pure: no I/O.
 */
int mtd_ram_layout_build(const struct mtd_ram_inputs *in, struct mtd_ram_layout *out);

/* The region holding gpa, or NULL. O(log nr). */
const struct mtd_ram_region *mtd_ram_layout_find(const struct mtd_ram_layout *l, uint64_t gpa);
/* gpa -> hva; *contig_bytes (may be NULL) gets how far the translation stays contiguous
 * (to the end of the region).  0 or -ERANGE. */
int mtd_ram_layout_gpa_to_hva(const struct mtd_ram_layout *l, uint64_t gpa, uint64_t *hva,
			      uint64_t *contig_bytes);
/* hva -> gpa (vhost-user's memory table gives QEMU's HVAs).  0 or -ERANGE. */
int mtd_ram_layout_hva_to_gpa(const struct mtd_ram_layout *l, uint64_t hva, uint64_t *gpa);
/* ram_addr_t -> gpa (what a TCG plugin reports for RAM above 4 GiB).  0 or -ERANGE. */
int mtd_ram_layout_ram_addr_to_gpa(const struct mtd_ram_layout *l, uint64_t ram_addr,
				   uint64_t *gpa);
/* Two layouts describe the same map (regions, addresses, backing)? */
bool mtd_ram_layout_same(const struct mtd_ram_layout *a, const struct mtd_ram_layout *b);
/* One line per region for logs: "0x100000000+2048M pc.ram@0xc0000000 hva 0x7f.. anon". */
int mtd_ram_layout_describe(const struct mtd_ram_layout *l, char *buf, size_t len);

/* ---- against a live QEMU ------------------------------------------------------------- */

/* Runs one QMP command and hands back its "return" member (a reference the caller drops).
 * args may be NULL.  0, -EREMOTEIO (QEMU's error, described in err) or -errno. */
typedef int (*mtd_qmp_fn)(void *ctx, const char *cmd, struct json_object *args,
			  struct json_object **ret, char *err, size_t errlen);

/*
 * Ask QEMU (through qmp) and read /proc/PID/smaps and /proc/PID/fd (proc_root, normally
 * "/proc", so tests can point elsewhere), then mtd_ram_layout_build.  Costs about
 * 4 + 2 x ranges monitor commands and one smaps read (the kernel walks the page tables:
 * ~1 ms per GiB resident).  Returns 0 (out->sure says whether to trust it), or -errno when
 * QEMU or /proc could not be asked at all (out->why says what failed).
 */
int mtd_ram_layout_query(mtd_qmp_fn qmp, void *qmp_ctx, int pid, const char *proc_root,
			 struct mtd_ram_layout *out);

/* Cheap re-check between queries: the mappings under every region are still those the
 * layout was built on (reads /proc/PID/maps: no page-table walk).  0, -ESTALE, -errno. */
int mtd_ram_layout_recheck(const struct mtd_ram_layout *l, int pid, const char *proc_root);

#endif /* MEMTIDE_HOST_RAM_LAYOUT_H */
