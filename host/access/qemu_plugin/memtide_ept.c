// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtide_ept.c - a QEMU TCG plugin that keeps an emulated x86 EPT over guest RAM, with
 * hardware-like accessed and dirty bits, in a file memtided maps (host/access/ept_table.h).
 *
 * Use (system emulation, QEMU 7.2; `memtidectl ept-plugin` prints the exact argument):
 *   -plugin /usr/lib/memtide/memtide-ept.so,table=/run/memtide/ept/NAME.ept[,ram=1G]
 *           [,lowmem=3G][,span=1T][,mode=off|always]
 *   table   the table file (not `file`: QEMU keeps that key for the plugin's path); created,
 *           truncated and locked for QEMU's lifetime, removed at exit.  When it cannot be
 *           made (no directory, taken by another QEMU) the plugin says so on QEMU's stderr
 *           and stays idle: the guest starts anyway, without the ept source
 *   ram     guest RAM size (-m): accesses at RAM offsets beyond it (ROM, video RAM) are
 *           dropped; lowmem: RAM below the PCI hole when RAM also sits above 4 GiB (pc:
 *           3 GiB once RAM >= 3.5 GiB, q35: 2 GiB once RAM >= 2.75 GiB).  Without ram the
 *           addresses QEMU reports are used as they are: right for guests whose RAM is all
 *           below 4 GiB.
 *   mode    start instrumenting at once (always) or only when memtided asks (off, default).
 *
 * What it does on each guest RAM access while instrumenting: one callback per load or store
 * (registered MEM_RW: Debian's 7.2 fires a loads-only callback on stores only; the store
 * flag, bit 17 of the meminfo word, is tested here), QEMU's own lookup of the physical
 * address (qemu_plugin_hwaddr_phys_addr: ~17 ns, the cost of this plugin, measured in
 * shared/README.md), I/O skipped; then the leaf of that page is loaded and, only when the
 * accessed bit (or on a store the dirty bit) is missing, the upper entries and the leaf
 * get an atomic OR, as an MMU does.  Upper entries get their accessed bit too whenever a
 * leaf is updated, so a non-leaf A bit here is exact (no paging-structure cache keeps it
 * from being set again; docs/walker.md).  Instruction fetches and device DMA are not seen.
 *
 * Sampling windows: instrumentation costs 3-5x on memory-heavy guest code, so memtided
 * asks for it in windows (header req_seq / window_ms).  qemu_plugin_reset switches the
 * callbacks (10-13 ms, and every translation is redone) and must run on a vCPU thread, so
 * the plugin polls the header where a vCPU passes regularly at no cost when idle-of-work:
 * on every interrupt or system-call return (an exec callback on iretq and sysretq, which a
 * busy Linux guest executes at least HZ times a second, on its timer interrupt).  A window
 * therefore starts within a timer tick of the request (or of the moment the controller
 * asked it not to start before, window_not_before_ms) and ends within a tick of window_ms
 * (a window that ends while every vCPU sleeps ends at the next interrupt: a sleeping guest
 * touches nothing meanwhile).
 *
 * Never from the idle callback, which only beats the heartbeat: a reset there froze the
 * guest for good.  The reset's flush is queued on the calling vCPU and runs only once
 * every other vCPU is out of its translated code.  From an idle vCPU (the second one waits
 * for its start-up IPI through the whole BIOS) the work sat queued, and the next thing to
 * wake that vCPU was the first one asking it to run something and waiting for the answer
 * inside its own translated code (early in the BIOS): each waited for the other.  Seen with
 * gdb on Debian's QEMU 7.2: one vCPU thread in start_exclusive, the other in do_run_on_cpu;
 * 7 boots of 101 with a window asked 20 ms after the start, as memtided does when it
 * attaches a starting guest (tests/integration/domxml_ept.sh met it in CI), and 0 of 100
 * since (scenario 17 boots it again and again).  Called from a running vCPU, the flush
 * runs as soon as that vCPU leaves its current block.
 *
 * The plugin API is declared here from QEMU's documented interface (docs/devel/tcg-
 * plugins.rst, API version 1): Debian ships no qemu-plugin.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "access/ept_table.h"
#include "base/clock.h"

/* ---- the QEMU plugin API we use (API version 1, QEMU 7.2) -------------------------------- */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_plugin_hwaddr;
typedef struct {
	const char *target_name;
	struct {
		int min, cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus, max_vcpus;
		} system;
	};
} qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_RW = 3 };
typedef void (*qemu_plugin_simple_cb_t)(qemu_plugin_id_t id);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu, qemu_plugin_meminfo_t info,
					  uint64_t vaddr, void *userdata);
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))
#define MEMINFO_STORE      (1u << 17) /* QEMU_PLUGIN_MEM_W << 16 in the meminfo word */

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
				      void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr);
bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr);
uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr);
void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb);
void qemu_plugin_register_vcpu_idle_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);
int qemu_plugin_n_vcpus(void);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv);

/* ---- state ------------------------------------------------------------------------------- */
static struct {
	qemu_plugin_id_t id;
	char path[4096];
	int fd;
	uint8_t *map;
	uint64_t map_bytes;
	struct mtd_ept_header *h;
	uint64_t *root, *pdpt, *pd, *pt; /* the table regions */
	uint64_t span, ram, lowmem;      /* ram/lowmem: copied from the header at window start */
	bool on;                         /* the callbacks registered now instrument */
	int resetting;                   /* a qemu_plugin_reset is in flight (atomic) */
	bool want_on;                    /* what the reset in flight switches to */
	uint64_t window_end_ms, on_since_ms;
} P = {.fd = -1};

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char line[4400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	qemu_plugin_outs(line);
}

/* ---- the MMU's part: set A (and D) in the leaf of gpa -------------------------------------- */

static inline void mark(uint64_t gpa, bool store)
{
	/* The leaf maps the page to itself: the file has no host addresses to offer, and the
	 * walker reads only the bits.  The order and the fence: mtd_ept_mark_leaf. */
	uint64_t want =
	    (gpa & MTD_EPT_PA_MASK) | MTD_EPT_LEAF | MTD_EPT_A | (store ? MTD_EPT_D : 0);
	uint64_t *const up[3] = {&P.pd[gpa >> 21], &P.pdpt[gpa >> 30], &P.root[gpa >> 39]};
	const uint64_t up_want[3] = {
	    (P.h->pt_off + (gpa >> 21) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	    (P.h->pd_off + (gpa >> 30) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	    (P.h->pdpt_off + (gpa >> 39) * MTD_EPT_PAGE) | MTD_EPT_TABLE | MTD_EPT_A,
	};

	if (mtd_ept_mark_leaf(&P.pt[gpa >> 12], want, up, up_want))
		__atomic_fetch_add(&P.h->marks, 1, __ATOMIC_RELAXED);
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
	struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
	uint64_t gpa;

	(void)vcpu;
	(void)ud;
	if (!hw || qemu_plugin_hwaddr_is_io(hw))
		return;
	gpa = mtd_ept_gpa(qemu_plugin_hwaddr_phys_addr(hw), P.ram, P.lowmem);
	if (gpa >= P.span) {
		__atomic_fetch_add(&P.h->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	mark(gpa, (info & MEMINFO_STORE) != 0);
}

/* ---- windows: polled on a vCPU thread --------------------------------------------------- */

static void after_reset(qemu_plugin_id_t id);

/* Called from a running vCPU only (see the top of this file for why not from an idle one). */
static void poll_header(void)
{
	struct mtd_ept_header *h = P.h;
	uint64_t now = mtd_mono_ms();
	uint32_t mode = __atomic_load_n(&h->mode, __ATOMIC_ACQUIRE);
	bool want = P.on;

	__atomic_store_n(&h->heartbeat_ms, now, __ATOMIC_RELAXED);
	if (__atomic_load_n(&P.resetting, __ATOMIC_ACQUIRE))
		return;
	if (!P.on)
		want = mode == MTD_EPT_MODE_ALWAYS ||
		       (mode == MTD_EPT_MODE_WINDOWS &&
			__atomic_load_n(&h->req_seq, __ATOMIC_ACQUIRE) != h->started_seq &&
			now >= __atomic_load_n(&h->window_not_before_ms, __ATOMIC_ACQUIRE));
	else
		want = mode == MTD_EPT_MODE_ALWAYS ||
		       (mode == MTD_EPT_MODE_WINDOWS && now < P.window_end_ms);
	if (want == P.on)
		return;
	int expected = 0;
	if (!__atomic_compare_exchange_n(&P.resetting, &expected, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return; /* another vCPU got there first */
	P.want_on = want;
	if (want) {
		/* The layout the controller wrote before asking, and the window's bounds. */
		P.ram = __atomic_load_n(&h->ram_bytes, __ATOMIC_ACQUIRE);
		P.lowmem = __atomic_load_n(&h->lowmem_bytes, __ATOMIC_ACQUIRE);
		uint64_t seq = __atomic_load_n(&h->req_seq, __ATOMIC_ACQUIRE);
		__atomic_store_n(&h->started_seq, seq, __ATOMIC_RELEASE);
		P.window_end_ms = now + __atomic_load_n(&h->window_ms, __ATOMIC_ACQUIRE);
		P.on_since_ms = now;
	} else {
		__atomic_store_n(&h->done_seq, h->started_seq, __ATOMIC_RELEASE);
		__atomic_fetch_add(&h->windows, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&h->on_ms_total, now - P.on_since_ms, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&h->resets, 1, __ATOMIC_RELAXED);
	qemu_plugin_reset(P.id, after_reset);
}

static void on_poll_insn(unsigned int vcpu, void *ud)
{
	(void)vcpu;
	(void)ud;
	poll_header();
}

/* A vCPU going idle: the guest is alive (memtided tells a paused guest by a stale
 * heartbeat), but no window is switched here. */
static void on_idle(qemu_plugin_id_t id, unsigned int vcpu)
{
	(void)id;
	(void)vcpu;
	__atomic_store_n(&P.h->heartbeat_ms, mtd_mono_ms(), __ATOMIC_RELAXED);
}

/* iretq (48 cf), iret (cf), sysretq (48 0f 07): where a running guest passes every tick. */
static bool is_poll_point(const struct qemu_plugin_insn *insn)
{
	const uint8_t *b = qemu_plugin_insn_data(insn);
	size_t n = qemu_plugin_insn_size(insn);

	if (!b || n == 0)
		return false;
	if (b[n - 1] == 0xcf && (n == 1 || (n == 2 && b[0] == 0x48)))
		return true;
	return n == 3 && b[0] == 0x48 && b[1] == 0x0f && b[2] == 0x07;
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);

	(void)id;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (P.on)
			qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_RW, NULL);
		if (is_poll_point(insn))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_poll_insn,
							       QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

static void on_qemu_exit(qemu_plugin_id_t id, void *ud);

static void register_all(qemu_plugin_id_t id)
{
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
	qemu_plugin_register_vcpu_idle_cb(id, on_idle);
	qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL); /* a reset drops it */
}

/*
 * QEMU 7.2 keeps a pointer to the memory callbacks of the instruction being executed in
 * each vCPU (plugin_mem_cbs) and clears it only when a translated block ends normally; a
 * block left through an exception (a guest page fault during a window) keeps it, the flush
 * of a reset frees what it points to, and the next helper that reports a memory access
 * (interrupt delivery pushing onto the stack, an atomic) walks freed memory: seen here as
 * "qemu_plugin_vcpu_mem_cb: code should not be reached" right after a window ended.  Here,
 * in the reset callback, every vCPU is stopped and the flush is done, so the pointers are
 * cleared with QEMU's own qemu_plugin_disable_mem_helpers.  Not part of the plugin API:
 * looked up by name, and skipped where it does not exist (later QEMUs clear the pointer
 * on every exit themselves).
 */
static void clear_stale_mem_cbs(void)
{
	void *(*get_cpu)(int) = (void *(*)(int))dlsym(RTLD_DEFAULT, "qemu_get_cpu");
	void (*disable)(void *) =
	    (void (*)(void *))dlsym(RTLD_DEFAULT, "qemu_plugin_disable_mem_helpers");

	if (!get_cpu || !disable)
		return;
	for (int i = 0; i < qemu_plugin_n_vcpus(); i++) {
		void *cpu = get_cpu(i);
		if (cpu)
			disable(cpu);
	}
}

/* Runs once every vCPU has left its translated code and the translations are flushed. */
static void after_reset(qemu_plugin_id_t id)
{
	clear_stale_mem_cbs();
	P.on = P.want_on;
	register_all(id);
	__atomic_store_n(&P.h->on, P.on ? 1 : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&P.resetting, 0, __ATOMIC_RELEASE);
}

static void on_qemu_exit(qemu_plugin_id_t id, void *ud)
{
	(void)id;
	(void)ud;
	if (!P.h)
		return;
	__atomic_store_n(&P.h->on, 0, __ATOMIC_RELEASE);
	/* The file describes this QEMU only: remove it so nobody takes it for a live one. */
	if (P.h->qemu_pid == (int32_t)getpid())
		unlink(P.path);
	munmap(P.map, P.map_bytes);
	close(P.fd);
	P.h = NULL;
}

/* ---- install ------------------------------------------------------------------------------ */

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	case 'T':
	case 't':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int open_table(uint32_t mode)
{
	struct stat st;
	uint64_t root, pdpt, pd, pt, bytes;

	mtd_ept_layout(P.span, &root, &pdpt, &pd, &pt, &bytes);
	P.fd = open(P.path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (P.fd < 0) {
		say("memtide-ept: cannot open %s: %s\n", P.path, strerror(errno));
		return -1;
	}
	if (flock(P.fd, LOCK_EX | LOCK_NB) < 0) {
		say("memtide-ept: %s is in use by another QEMU (%s)\n", P.path, strerror(errno));
		return -1;
	}
	if (fstat(P.fd, &st) < 0 || st.st_uid != geteuid() || !S_ISREG(st.st_mode)) {
		say("memtide-ept: %s is not a regular file of this user\n", P.path);
		return -1;
	}
	/* Truncate first: nothing of an earlier QEMU's table survives. */
	if (ftruncate(P.fd, 0) < 0 || ftruncate(P.fd, (off_t)bytes) < 0) {
		say("memtide-ept: cannot size %s: %s\n", P.path, strerror(errno));
		return -1;
	}
	P.map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, P.fd, 0);
	if (P.map == MAP_FAILED) {
		P.map = NULL;
		say("memtide-ept: cannot map %s: %s\n", P.path, strerror(errno));
		return -1;
	}
	P.map_bytes = bytes;
	P.h = (struct mtd_ept_header *)P.map;
	P.root = (uint64_t *)(P.map + root);
	P.pdpt = (uint64_t *)(P.map + pdpt);
	P.pd = (uint64_t *)(P.map + pd);
	P.pt = (uint64_t *)(P.map + pt);
	*P.h = (struct mtd_ept_header){
	    .version = MTD_EPT_VERSION,
	    .header_bytes = MTD_EPT_PAGE,
	    .span_bytes = P.span,
	    .file_bytes = bytes,
	    .root_off = root,
	    .pdpt_off = pdpt,
	    .pd_off = pd,
	    .pt_off = pt,
	    .qemu_pid = (int32_t)getpid(),
	    .flags = MTD_EPT_F_NONLEAF_A,
	    .created_ms = mtd_mono_ms(),
	    .ram_bytes = P.ram,
	    .lowmem_bytes = P.lowmem,
	    .mode = mode,
	};
	/* The magic last: a reader that sees it sees a complete header. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(P.h->magic, MTD_EPT_MAGIC, 8);
	return 0;
}

/* Undo a failed open_table. */
static void close_table(void)
{
	if (P.map)
		munmap(P.map, P.map_bytes);
	if (P.fd >= 0)
		close(P.fd);
	P.map = NULL;
	P.h = NULL;
	P.fd = -1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	uint32_t mode = MTD_EPT_MODE_OFF;

	if (!info->system_emulation) {
		qemu_plugin_outs("memtide-ept: needs system emulation (qemu-system-*)\n");
		return -1;
	}
	P.id = id;
	P.span = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = strchr(a, '=');
		size_t k = v ? (size_t)(v - a) : strlen(a);
		int bad = !v;

		v = v ? v + 1 : "";
		if (!bad && k == 5 && !strncmp(a, "table", 5))
			bad =
			    snprintf(P.path, sizeof(P.path), "%s", v) >= (int)sizeof(P.path) || !*v;
		else if (!bad && k == 3 && !strncmp(a, "ram", 3))
			bad = parse_size(v, &P.ram) < 0 || (P.ram & 0xfff);
		else if (!bad && k == 6 && !strncmp(a, "lowmem", 6))
			bad = parse_size(v, &P.lowmem) < 0 || (P.lowmem & 0xfff) ||
			      P.lowmem > (1ULL << 32);
		else if (!bad && k == 4 && !strncmp(a, "span", 4))
			bad = parse_size(v, &P.span) < 0 || (P.span & ((1ULL << 30) - 1)) ||
			      !P.span || P.span > MTD_EPT_SPAN_MAX;
		else if (!bad && k == 4 && !strncmp(a, "mode", 4) && !strcmp(v, "always"))
			mode = MTD_EPT_MODE_ALWAYS;
		else if (!bad && k == 4 && !strncmp(a, "mode", 4) && !strcmp(v, "off"))
			mode = MTD_EPT_MODE_OFF;
		else
			bad = 1;
		if (bad) {
			say("memtide-ept: bad argument '%s' (table=PATH, ram=SIZE, lowmem=SIZE, "
			    "span=SIZE in GiB steps, mode=off|always)\n",
			    a);
			return -1;
		}
	}
	if (!P.path[0]) {
		qemu_plugin_outs("memtide-ept: table=PATH is required\n");
		return -1;
	}
	if (!P.span) {
		uint64_t end = P.ram ? P.ram : MTD_EPT_SPAN_DEFAULT;
		if (P.ram && P.lowmem && P.lowmem < P.ram)
			end = (1ULL << 32) + P.ram - P.lowmem;
		P.span = (end + (1ULL << 30) - 1) & ~((1ULL << 30) - 1);
		if (P.span > MTD_EPT_SPAN_MAX) {
			qemu_plugin_outs("memtide-ept: guest RAM beyond 4 TiB is not supported\n");
			return -1;
		}
	}
	if (open_table(mode) < 0) {
		/* The guest must start whether or not memtide is ready (its table directory is
		 * made by memtided and at boot by systemd-tmpfiles): run without instrumenting,
		 * and memtided, finding no table, says so and takes another source. */
		close_table();
		say("memtide-ept: no table: the guest runs without the ept source\n");
		return 0;
	}
	/* Starting "on" needs no reset: no code has been translated yet. */
	P.on = mode == MTD_EPT_MODE_ALWAYS;
	if (P.on) {
		P.h->started_seq = 0;
		P.on_since_ms = mtd_mono_ms();
		P.window_end_ms = UINT64_MAX;
		P.h->on = 1;
	}
	register_all(id);
	return 0;
}
