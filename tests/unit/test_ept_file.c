// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ept_file.c - the emulated EPT file (host/access/ept_table.h) from memtided's side:
 * ept_file.c's checks and claim, and the ept source (source_ept.c) over it.
 *
 * The QEMU plugin cannot run here without QEMU, so the file is written the way the plugin
 * writes it (fake_plugin_*: the same layout, header and marking rule: upper entries and
 * the leaf ORed with A, and D on a store); tests/e2e/scenarios/08_access_ept.sh and
 * tests/integration/domxml_ept.sh run the real plugin.  Checked: the plugin's entries
 * decode as EPT with libvmm's own format (present, leaf, A, D); a missing file, a bad
 * magic, offsets that do not match the span, a dead QEMU, another QEMU's file and a
 * symlink are refused with their reasons; the controller claim (ours, a live holder's, a
 * dead holder's); the RAM layout from the plugin's args, from the guest size, and refused
 * above 2 GiB without args; the source ages marked pages into the youngest generation,
 * asks for one window per round, and its status line moves with the plugin's counters
 * (source_detail); entries a hostile plugin points outside the tables or at the header
 * make the walk report errors, never read or write outside the tables; zap clears leaves and refuses ranges
 * outside the span.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "access/choose.h"
#include "access/ept_file.h"
#include "access/ept_table.h"
#include "access/source.h"
#include "access/young_dump.h"

#define GiB (1ULL << 30)

static char dir[64], path[128];

struct fake {
	uint8_t *map;
	uint64_t bytes;
	struct mtd_ept_header *h;
	uint64_t *root, *pdpt, *pd, *pt;
};

/* The plugin's open_table: a 1 GiB span, RAM as given, our pid as QEMU's. */
static void fake_plugin_open(struct fake *f, uint64_t ram, uint64_t lowmem)
{
	uint64_t root, pdpt, pd, pt;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	mtd_ept_layout(GiB, &root, &pdpt, &pd, &pt, &f->bytes);
	assert_int_equal(ftruncate(fd, (off_t)f->bytes), 0);
	f->map = mmap(NULL, f->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(f->map != MAP_FAILED);
	close(fd);
	f->h = (struct mtd_ept_header *)f->map;
	f->root = (uint64_t *)(f->map + root);
	f->pdpt = (uint64_t *)(f->map + pdpt);
	f->pd = (uint64_t *)(f->map + pd);
	f->pt = (uint64_t *)(f->map + pt);
	*f->h = (struct mtd_ept_header){
	    .version = MTD_EPT_VERSION,
	    .header_bytes = MTD_EPT_PAGE,
	    .span_bytes = GiB,
	    .file_bytes = f->bytes,
	    .root_off = root,
	    .pdpt_off = pdpt,
	    .pd_off = pd,
	    .pt_off = pt,
	    .qemu_pid = (int32_t)getpid(),
	    .flags = MTD_EPT_F_NONLEAF_A,
	    .ram_bytes = ram,
	    .lowmem_bytes = lowmem,
	};
	memcpy(f->h->magic, MTD_EPT_MAGIC, 8);
}

/* The plugin's mark(): what an access during a window does to the table (the plugin's own
 * marking, ept_table.h). */
static void fake_plugin_mark(struct fake *f, uint64_t gpa, bool store)
{
	uint64_t want =
	    (gpa & MTD_EPT_PA_MASK) | MTD_EPT_LEAF | MTD_EPT_A | (store ? MTD_EPT_D : 0);
	uint64_t *const up[3] = {&f->pd[gpa >> 21], &f->pdpt[gpa >> 30], &f->root[gpa >> 39]};
	const uint64_t up_want[3] = {
	    (f->h->pt_off + (gpa >> 21) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	    (f->h->pd_off + (gpa >> 30) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	    (f->h->pdpt_off + (gpa >> 39) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	};
	(void)mtd_ept_mark_leaf(&f->pt[gpa >> 12], want, up, up_want);
}

/* The plugin running the window asked for last (its poll_header: started, then done). */
static void fake_plugin_window(struct fake *f)
{
	f->h->started_seq = f->h->req_seq;
	f->h->done_seq = f->h->req_seq;
	f->h->windows++;
}

static void fake_close(struct fake *f)
{
	munmap(f->map, f->bytes);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memtide-test-ept.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vm1.ept", dir);
	return 0;
}

static int teardown(void **state)
{
	char p[160];
	(void)state;
	unlink(path);
	snprintf(p, sizeof(p), "%s/link.ept", dir);
	unlink(p);
	rmdir(dir);
	return 0;
}

/* The plugin's entries are EPT entries as libvmm's format reads them. */
static void test_entries_decode_as_ept(void **state)
{
	const struct vmm_pt_format *ept = vmm_pt_format_get(VMM_PT_EPT);
	struct fake f;
	(void)state;

	fake_plugin_open(&f, 512ULL << 20, 0);
	fake_plugin_mark(&f, 0x1234000, true);
	fake_plugin_mark(&f, 0x1235000, false);
	uint64_t e = f.pt[0x1234], r = f.pt[0x1235], pde = f.pd[0x1234000 >> 21];
	assert_true(ept->present(e, 3) && ept->is_leaf(e, 3));
	assert_true(e & ept->accessed_mask);
	assert_true(ept->dirty(e));
	assert_false(ept->dirty(r));
	assert_true(ept->present(pde, 2) && !ept->is_leaf(pde, 2));
	assert_int_equal(ept->addr(pde), f.h->pt_off + (0x1234000 >> 21) * MTD_EPT_PAGE);
	assert_int_equal(ept->addr(e), 0x1234000);
	fake_close(&f);
}

static void refused(int expect_pid, int rc, const char *why)
{
	struct mtd_ept_file ef;
	char msg[300] = "";

	assert_int_equal(mtd_ept_file_open(path, expect_pid, &ef, msg, sizeof(msg)), rc);
	if (!strstr(msg, why))
		fail_msg("expected '%s' in '%s'", why, msg);
	mtd_ept_file_close(&ef);
}

static void test_open_refusals(void **state)
{
	struct fake f;
	char link[160];
	(void)state;

	unlink(path);
	refused(0, -ENOENT, "no table");
	fake_plugin_open(&f, 512ULL << 20, 0);
	refused(getpid() + 1 == 1 ? 2 : 1, -ESRCH, "not this VM's QEMU");
	memcpy(f.h->magic, "MTDEPT99", 8);
	refused(0, -EINVAL, "no memtide-ept header");
	memcpy(f.h->magic, MTD_EPT_MAGIC, 8);
	f.h->pt_off += MTD_EPT_PAGE;
	refused(0, -EINVAL, "offsets do not match");
	f.h->pt_off -= MTD_EPT_PAGE;
	f.h->span_bytes = 3 * (GiB / 2);
	refused(0, -EINVAL, "bad span");
	f.h->span_bytes = GiB;
	/* a QEMU that is gone: a child that exited and was reaped */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	f.h->qemu_pid = child;
	refused(0, -ESRCH, "QEMU that is gone");
	f.h->qemu_pid = (int32_t)getpid();
	snprintf(link, sizeof(link), "%s/link.ept", dir);
	assert_int_equal(symlink(path, link), 0);
	{
		struct mtd_ept_file ef;
		char msg[300];
		assert_true(mtd_ept_file_open(link, 0, &ef, msg, sizeof(msg)) < 0);
		mtd_ept_file_close(&ef);
	}
	struct mtd_ept_file ef;
	char msg[300];
	assert_int_equal(mtd_ept_file_open(path, getpid(), &ef, msg, sizeof(msg)), 0);
	mtd_ept_file_close(&ef);
	fake_close(&f);
}

static void test_claim(void **state)
{
	struct fake f;
	struct mtd_ept_file ef;
	char msg[300];
	(void)state;

	fake_plugin_open(&f, 512ULL << 20, 0);
	assert_int_equal(mtd_ept_file_open(path, 0, &ef, msg, sizeof(msg)), 0);
	f.h->controller_pid = 1; /* init: alive, not us */
	assert_int_equal(mtd_ept_file_claim(&ef, msg, sizeof(msg)), -EBUSY);
	assert_non_null(strstr(msg, "pid 1"));
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	f.h->controller_pid = child; /* a dead controller is replaced */
	assert_int_equal(mtd_ept_file_claim(&ef, msg, sizeof(msg)), 0);
	assert_int_equal(f.h->controller_pid, getpid());
	mtd_ept_file_request_window(&ef, 200);
	assert_int_equal(f.h->mode, MTD_EPT_MODE_WINDOWS);
	assert_int_equal(f.h->window_not_before_ms, 0); /* at once */
	uint64_t seq = f.h->req_seq;
	mtd_ept_file_request_window_at(&ef, 400, 123456);
	assert_int_equal(f.h->req_seq, seq + 1);
	assert_int_equal(f.h->window_ms, 400);
	assert_int_equal(f.h->window_not_before_ms, 123456); /* a moment of the interval */
	mtd_ept_file_close(&ef); /* gives the claim up and switches instrumentation off */
	assert_int_equal(f.h->controller_pid, 0);
	assert_int_equal(f.h->mode, MTD_EPT_MODE_OFF);
	fake_close(&f);
}

static void test_layout(void **state)
{
	struct fake f;
	struct mtd_ept_file ef;
	struct vmm_range r[2];
	char msg[300];
	(void)state;

	/* from the plugin's args: 768 MiB, 512 low, the rest at 4 GiB needs a span past it */
	fake_plugin_open(&f, 768ULL << 20, 512ULL << 20);
	assert_int_equal(mtd_ept_file_open(path, 0, &ef, msg, sizeof(msg)), 0);
	assert_int_equal(mtd_ept_file_layout(&ef, 0, r, msg, sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "past the table's span"));
	mtd_ept_file_close(&ef);
	fake_close(&f);
	/* no args: the guest size, written back for the plugin */
	fake_plugin_open(&f, 0, 0);
	assert_int_equal(mtd_ept_file_open(path, 0, &ef, msg, sizeof(msg)), 0);
	assert_int_equal(mtd_ept_file_layout(&ef, 300ULL << 20, r, msg, sizeof(msg)), 1);
	assert_int_equal(r[0].start, 0);
	assert_int_equal(r[0].end, 300ULL << 20);
	assert_int_equal(f.h->ram_bytes, 300ULL << 20);
	f.h->ram_bytes = 0;
	assert_int_equal(mtd_ept_file_layout(&ef, 3 * GiB, r, msg, sizeof(msg)), -EINVAL);
	assert_non_null(strstr(msg, "ram= and lowmem="));
	mtd_ept_file_close(&ef);
	fake_close(&f);
}

static unsigned windows_in(const char *line)
{
	const char *p = strstr(line, " windows");
	while (p && p > line && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return p ? (unsigned)strtoul(p, NULL, 10) : 999;
}

struct young_set {
	uint64_t pages, first;
};

static void collect(void *arg, uint64_t gpa, uint64_t n)
{
	struct young_set *y = arg;
	if (!y->pages)
		y->first = gpa;
	y->pages += n;
}

/* The source: one round harvests the window's pages into the youngest generation, asks
 * for the next window, and its status line follows the plugin's counters. */
static void test_source_rounds_and_detail(void **state)
{
	struct fake f;
	struct mtd_source src;
	struct vmm_guest_config gc;
	struct vmm_guest *g;
	char msg[300], line[160];
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	assert_int_equal(
	    mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src, msg, sizeof(msg)), 0);
	assert_int_equal(f.h->req_seq, 1); /* the first window at once */
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_int_equal(windows_in(line), 0);
	vmm_guest_config_default(&gc);
	gc.ram = src.ram;
	gc.nr_ram = src.nr_ram;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);

	for (unsigned i = 0; i < 8; i++)
		fake_plugin_mark(&f, (64ULL << 20) + i * 4096, i & 1);
	fake_plugin_window(&f);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	assert_int_equal(f.h->req_seq, 2);
	/* the next window at a random moment of the 5 s interval, with room to end in it */
	uint64_t at1 = f.h->window_not_before_ms;
	assert_true(at1 >= 1000 && at1 < 1000 + 5000 - 200 - 300);
	struct young_set y = {0};
	assert_int_equal(vmm_young_runs(g, 1, collect, &y), 0);
	assert_int_equal(y.pages, 8);
	assert_int_equal(y.first, 64ULL << 20);
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_int_equal(windows_in(line), 1);
	assert_non_null(strstr(line, "8 young pages"));
	/* the A bits were cleared: a round with no access finds nothing young */
	fake_plugin_window(&f);
	assert_int_equal(src.ops->age(src.ctx, g, 2000), 0);
	uint64_t at2 = f.h->window_not_before_ms;
	assert_true(at2 >= 2000 && at2 < 2000 + 4500);
	assert_true(at2 - 2000 != at1 - 1000); /* not in step with the rounds */
	y = (struct young_set){0};
	assert_int_equal(vmm_young_runs(g, 1, collect, &y), 0);
	assert_int_equal(y.pages, 0);
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_int_equal(windows_in(line), 2);
	assert_non_null(strstr(line, " 0 young pages"));

	/* the describe op survives the young-dump wrapper (memtided's diagnostic) */
	assert_int_equal(mtd_source_young_dump(&src, dir, "vm1"), 0);
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_int_equal(windows_in(line), 2);
	struct mtd_vm_status st;
	memset(&st, 0, sizeof(st));
	mtd_access_refresh_status(&src, &st);
	assert_non_null(strstr(st.source_detail, "2 windows"));

	vmm_guest_free(g);
	mtd_source_destroy(&src);
	char young[160];
	snprintf(young, sizeof(young), "%s/vm1.young", dir);
	unlink(young);
	assert_int_equal(f.h->controller_pid, 0);
	fake_close(&f);
}

/* Entries a hostile plugin wrote: tables outside the file, unaligned, the header. */
static void test_hostile_entries_stay_inside(void **state)
{
	struct fake f;
	struct mtd_ept_file ef;
	struct vmm_walk_stats st;
	char msg[300];
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	fake_plugin_mark(&f, 0, false);
	f.pd[1] = (f.bytes + 0x100000) | MTD_EPT_TABLE | MTD_EPT_A; /* past the end */
	f.pd[2] = 0 | MTD_EPT_TABLE | MTD_EPT_A;                    /* the header */
	/* another table of the file (the root): read as a leaf table, nonsense but inside */
	f.pd[3] = f.h->root_off | MTD_EPT_TABLE | MTD_EPT_A;
	assert_int_equal(mtd_ept_file_open(path, 0, &ef, msg, sizeof(msg)), 0);
	struct vmm_walk_opts o = {.gpa_start = 0, .gpa_end = 256ULL << 20};
	assert_int_equal(vmm_walk(&ef.pt, &o, &st), -EFAULT);
	assert_int_equal(st.errors, 2);
	assert_int_equal(st.young_pages, 1 + 1); /* page 0, and the root's entry 0 read as a leaf */
	assert_int_equal(f.h->magic[0], 'M');    /* the header was not written */
	mtd_ept_file_close(&ef);
	fake_close(&f);
}

static void test_zap(void **state)
{
	struct fake f;
	struct mtd_ept_file ef;
	char msg[300];
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	for (unsigned i = 0; i < 4; i++)
		fake_plugin_mark(&f, 0x200000 + i * 4096ULL, false);
	assert_int_equal(mtd_ept_file_open(path, 0, &ef, msg, sizeof(msg)), 0);
	assert_int_equal(mtd_ept_file_zap(&ef, 0x200000, 8), 4);
	assert_int_equal(f.pt[0x200], 0);
	assert_int_equal(mtd_ept_file_zap(&ef, 0x200000, 8), 0);
	assert_int_equal(mtd_ept_file_zap(&ef, GiB - 4096, 2), -ERANGE);
	assert_int_equal(mtd_ept_file_zap(&ef, 0x200001, 1), -ERANGE);
	mtd_ept_file_close(&ef);
	fake_close(&f);
}

/* A window the plugin never ran (a paused guest): the round ages nothing (libvmm untouched)
 * and the request stands; once the plugin runs it, rounds go on. */
static void test_window_never_ran(void **state)
{
	struct fake f;
	struct mtd_source src;
	struct vmm_guest_config gc;
	struct vmm_guest *g;
	struct vmm_guest_stats gs;
	char msg[300], line[300];
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	assert_int_equal(
	    mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src, msg, sizeof(msg)), 0);
	vmm_guest_config_default(&gc);
	gc.ram = src.ram;
	gc.nr_ram = src.nr_ram;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);
	fake_plugin_window(&f);
	fake_plugin_mark(&f, 1ULL << 20, false);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	vmm_guest_get_stats(g, &gs);
	uint64_t seq = gs.max_seq, req = f.h->req_seq;
	/* the guest is paused: no window starts */
	assert_int_equal(src.ops->age(src.ctx, g, 6000), -ENODATA);
	assert_int_equal(src.ops->age(src.ctx, g, 11000), -ENODATA);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.max_seq, seq);   /* no generation in which "nothing was touched" */
	assert_int_equal(f.h->req_seq, req); /* the request stands */
	struct young_set y = {0};
	assert_int_equal(vmm_young_runs(g, 1, collect, &y), 0);
	assert_int_equal(y.pages, 1); /* the page seen before is still the youngest */
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "ran no sampling window"));
	/* it runs again */
	fake_plugin_window(&f);
	assert_int_equal(src.ops->age(src.ctx, g, 16000), 0);
	vmm_guest_get_stats(g, &gs);
	assert_int_equal(gs.max_seq, seq + 1);
	vmm_guest_free(g);
	mtd_source_destroy(&src);
	fake_close(&f);
}

/* The table must be QEMU's own (owner, mode), and is checked before every use: a file cut
 * short under the mapping (a QEMU re-created it, or its owner truncated it) is not read,
 * where reading it ended memtided with SIGBUS. */
static void test_file_checks(void **state)
{
	struct fake f;
	struct mtd_source src;
	struct vmm_guest_config gc;
	struct vmm_guest *g;
	char msg[300], line[300];
	(void)state;

	/* another user's file naming our "QEMU": refused */
	fake_plugin_open(&f, 256ULL << 20, 0);
	if (getuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_int_equal(mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src,
						    msg, sizeof(msg)),
				 -EPERM);
		assert_non_null(strstr(msg, "not QEMU's own"));
		assert_int_equal(chown(path, 0, 0), 0);
	}
	/* writable by others: refused */
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(
	    mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src, msg, sizeof(msg)),
	    -EPERM);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(
	    mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src, msg, sizeof(msg)), 0);
	vmm_guest_config_default(&gc);
	gc.ram = src.ram;
	gc.nr_ram = src.nr_ram;
	assert_int_equal(vmm_guest_new(&gc, &g), 0);
	fake_plugin_window(&f);
	assert_int_equal(src.ops->age(src.ctx, g, 1000), 0);
	/* cut short under the mapping */
	assert_int_equal(truncate(path, 4096), 0);
	assert_int_equal(src.ops->age(src.ctx, g, 6000), -EIO);
	assert_int_equal(mtd_source_describe(&src, line, sizeof(line)), 0);
	assert_non_null(strstr(line, "cut short"));
	/* re-created by another QEMU under the same name: not this source's table any more */
	fake_close(&f);
	fake_plugin_open(&f, 256ULL << 20, 0);
	f.h->qemu_pid = 1;
	assert_int_equal(src.ops->age(src.ctx, g, 11000), -ESTALE);
	vmm_guest_free(g);
	mtd_source_destroy(&src);
	assert_int_equal(f.h->mode, 0); /* the new QEMU's header left alone */
	fake_close(&f);
}

/* Host-side eviction's pages lose their leaves (paged_out), as KVM zaps EPT entries; the
 * balloon's bookkeeping runs do not (evicted is NULL: the guest picked its own pages). */
static void test_paged_out_zaps(void **state)
{
	struct fake f;
	struct mtd_source src;
	char msg[300];
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	for (unsigned i = 0; i < 4; i++)
		fake_plugin_mark(&f, 0x200000 + i * 4096ULL, false);
	assert_int_equal(
	    mtd_source_ept_new(path, getpid(), 256ULL << 20, 200, 5000, &src, msg, sizeof(msg)), 0);
	assert_null(src.ops->evicted);
	assert_non_null(src.ops->paged_out);
	struct vmm_run r = {.gpa = 0x201000, .npages = 2};
	src.ops->paged_out(src.ctx, &r, 1);
	assert_true(f.pt[0x200] & MTD_EPT_A);
	assert_int_equal(f.pt[0x201], 0);
	assert_int_equal(f.pt[0x202], 0);
	assert_true(f.pt[0x203] & MTD_EPT_A);
	mtd_source_destroy(&src);
	fake_close(&f);
}

/* A QEMU that runs its guest on KVM loads the plugin all the same, and the plugin writes a
 * sound table, but it never sees an access: every page would read idle.  memtided asks QEMU
 * (query-kvm) and does not take the ept source then, saying why; with TCG the same table is
 * taken. */
static void test_not_on_kvm(void **state)
{
	struct fake f;
	struct mtd_source src;
	struct mtd_access_env env;
	struct mtd_access_choice ch;
	(void)state;

	fake_plugin_open(&f, 256ULL << 20, 0);
	mtd_access_env_default(&env);
	env.vm_name = "vm1";
	env.ept_dir = dir;
	env.qemu_pid = getpid();
	env.guest_bytes = 256ULL << 20;
	env.interval_ms = 1000;
	env.ept_window_ms = 200;
	env.idle_bitmap = "/nonexistent";
	env.damon_admin = "/nonexistent";

	env.on_kvm = 1;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_not_equal(ch.chosen, "ept");
	bool said = false;
	for (unsigned i = 0; i < ch.nr_notes; i++)
		said = said || (!strcmp(ch.notes[i].name, "ept") &&
				strstr(ch.notes[i].why, "runs on KVM") &&
				strstr(ch.notes[i].why, "every page idle"));
	assert_true(said);
	mtd_source_destroy(&src);

	env.on_kvm = 0;
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "ept");
	mtd_source_destroy(&src);
	env.on_kvm = -1; /* unknown (no monitor): as before, the table decides */
	assert_int_equal(mtd_access_choose(&env, &src, &ch), 0);
	assert_string_equal(ch.chosen, "ept");
	mtd_source_destroy(&src);
	fake_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_entries_decode_as_ept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_open_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_source_rounds_and_detail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_entries_stay_inside, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_zap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_window_never_ran, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_file_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_paged_out_zaps, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_on_kvm, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
