// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ept_file.c - open, check, claim and drive the emulated EPT file (ept_file.h).
 *
 * Checks, in order, before anything of the file is trusted: a regular file, not a symlink;
 * at least one header page; the magic and version; the table offsets exactly those
 * mtd_ept_layout gives for the span, and the file no shorter than them; the span a multiple
 * of 1 GiB within MTD_EPT_SPAN_MAX.  Table lookups for the walker are then checked against
 * the mapping on every call (ept_table_at), so entries written by a misbehaving plugin can
 * only point at other tables of the same file.
 */
#include "access/ept_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB (1ULL << 30)

static int fail(char *why, size_t len, int rc, const char *fmt, const char *arg)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(why, len, fmt, arg);
#pragma GCC diagnostic pop
	return rc;
}

static bool pid_alive(int pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* The user QEMU process pid runs as (its /proc entry's owner). */
static bool qemu_uid(int pid, uint32_t *uid)
{
	char p[32];
	struct stat st;

	snprintf(p, sizeof(p), "/proc/%d", pid);
	if (pid <= 0 || stat(p, &st) < 0)
		return false;
	*uid = st.st_uid;
	return true;
}

/* vmm_pt's table callback: the 512 entries at file offset pa, or NULL outside the tables. */
static uint64_t *ept_table_at(void *ctx, uint64_t pa)
{
	const struct mtd_ept_file *f = ctx;

	if (pa & (MTD_EPT_PAGE - 1) || pa < f->root_off || pa > f->map_bytes - MTD_EPT_PAGE)
		return NULL;
	return (uint64_t *)(f->map + pa);
}

int mtd_ept_file_open(const char *path, int expect_pid, struct mtd_ept_file *f, char *why,
		      size_t whylen)
{
	struct mtd_ept_header h;
	struct stat st;
	uint64_t root, pdpt, pd, pt, bytes;
	int rc;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (f->fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			return fail(
			    why, whylen, rc,
			    "no table %s: QEMU runs without the memtide-ept plugin, or the plugin "
			    "could not make it (QEMU's log says)",
			    path);
		return fail(why, whylen, rc, "cannot open %s", path);
	}
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)MTD_EPT_PAGE ||
	    pread(f->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		rc = fail(why, whylen, -EINVAL, "%s is not an EPT table file", path);
		goto bad;
	}
	if (memcmp(h.magic, MTD_EPT_MAGIC, 8) != 0 || h.version != MTD_EPT_VERSION ||
	    h.header_bytes != MTD_EPT_PAGE) {
		rc = fail(why, whylen, -EINVAL,
			  "%s has no memtide-ept header of version 1 (another plugin version?)",
			  path);
		goto bad;
	}
	if (h.span_bytes == 0 || h.span_bytes % GiB || h.span_bytes > MTD_EPT_SPAN_MAX) {
		rc = fail(why, whylen, -EINVAL, "%s: bad span", path);
		goto bad;
	}
	mtd_ept_layout(h.span_bytes, &root, &pdpt, &pd, &pt, &bytes);
	if (h.root_off != root || h.pdpt_off != pdpt || h.pd_off != pd || h.pt_off != pt ||
	    h.file_bytes != bytes || (uint64_t)st.st_size < bytes) {
		rc = fail(why, whylen, -EINVAL, "%s: table offsets do not match its span", path);
		goto bad;
	}
	uint32_t quid;
	if (!qemu_uid(h.qemu_pid, &quid) || st.st_uid != quid || (st.st_mode & 022)) {
		char msg[96];
		snprintf(msg, sizeof(msg),
			 "owned by uid %u mode %03o, QEMU (pid %d) runs as uid %d",
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), h.qemu_pid,
			 pid_alive(h.qemu_pid) && qemu_uid(h.qemu_pid, &quid) ? (int)quid : -1);
		if (pid_alive(h.qemu_pid)) {
			rc =
			    fail(why, whylen, -EPERM,
				 "the table file is not QEMU's own (%s, writable by it alone): not "
				 "read",
				 msg);
			goto bad;
		}
	}
	if (!pid_alive(h.qemu_pid)) {
		rc = fail(why, whylen, -ESRCH, "%s is left over from a QEMU that is gone", path);
		goto bad;
	}
	if (expect_pid > 0 && h.qemu_pid != expect_pid) {
		char msg[64];
		snprintf(msg, sizeof(msg), "%d, not this VM's QEMU", h.qemu_pid);
		rc = fail(why, whylen, -ESRCH, "the table file belongs to QEMU pid %s", msg);
		goto bad;
	}
	f->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		rc = -errno;
		fail(why, whylen, rc, "cannot map %s", path);
		goto bad;
	}
	f->map_bytes = bytes;
	f->qemu_pid = h.qemu_pid;
	f->uid = st.st_uid;
	f->ino = st.st_ino;
	f->dev = st.st_dev;
	f->span_bytes = h.span_bytes;
	f->root_off = root;
	f->pt_off = pt;
	f->h = (struct mtd_ept_header *)f->map;
	f->pt = (struct vmm_pt){
	    .fmt = vmm_pt_format_get(VMM_PT_EPT),
	    .root_pa = root,
	    .table = ept_table_at,
	    .mem_ctx = f,
	    .flags = (h.flags & MTD_EPT_F_NONLEAF_A) ? VMM_PT_NONLEAF_ACCESSED : 0,
	};
	return 0;
bad:
	close(f->fd);
	f->fd = -1;
	return rc;
}

int mtd_ept_file_check(const struct mtd_ept_file *f, char *why, size_t whylen)
{
	struct stat st, at;

	if (!f->map)
		return fail(why, whylen, -EINVAL, "%s is not open", f->path);
	if (fstat(f->fd, &st) < 0)
		return fail(why, whylen, -EIO, "%s cannot be read", f->path);
	if (stat(f->path, &at) < 0 || at.st_ino != f->ino || at.st_dev != f->dev ||
	    st.st_nlink == 0)
		return fail(why, whylen, -ESTALE,
			    "%s was removed or replaced (a new QEMU?): the source must be opened "
			    "again",
			    f->path);
	if (st.st_uid != f->uid || (st.st_mode & 022))
		return fail(why, whylen, -EPERM, "%s changed owner or mode: not read", f->path);
	if ((uint64_t)st.st_size < f->map_bytes)
		return fail(why, whylen, -EIO,
			    "%s was cut short under its mapping (re-created by a new QEMU, or "
			    "truncated): not read",
			    f->path);
	/* Read only now that the file is known to be long enough. */
	if (__atomic_load_n(&f->h->qemu_pid, __ATOMIC_ACQUIRE) != f->qemu_pid)
		return fail(why, whylen, -ESTALE, "%s now belongs to another QEMU", f->path);
	if (!pid_alive(f->qemu_pid))
		return fail(why, whylen, -ESRCH, "%s: its QEMU is gone", f->path);
	return 0;
}

void mtd_ept_file_close(struct mtd_ept_file *f)
{
	char why[8];
	int c = f->h ? mtd_ept_file_check(f, why, sizeof(why)) : -EINVAL;
	/* Only our own file, whole: never another QEMU's header, never past a cut-short end */
	if (f->h && f->claimed_by && (c == 0 || c == -ESRCH)) {
		__atomic_store_n(&f->h->mode, MTD_EPT_MODE_OFF, __ATOMIC_RELEASE);
		int32_t me = f->claimed_by;
		__atomic_compare_exchange_n(&f->h->controller_pid, &me, 0, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
	}
	if (f->map)
		munmap(f->map, f->map_bytes);
	if (f->fd >= 0)
		close(f->fd);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

int mtd_ept_file_claim(struct mtd_ept_file *f, char *why, size_t whylen)
{
	int32_t me = (int32_t)getpid();

	for (int tries = 0; tries < 4; tries++) {
		int32_t cur = __atomic_load_n(&f->h->controller_pid, __ATOMIC_ACQUIRE);
		if (cur == me || (cur != 0 && pid_alive(cur) && cur != me)) {
			if (cur == me) {
				f->claimed_by = me;
				return 0;
			}
			char msg[32];
			snprintf(msg, sizeof(msg), "%d", cur);
			return fail(why, whylen, -EBUSY,
				    "the table is driven by another process (pid %s)", msg);
		}
		if (__atomic_compare_exchange_n(&f->h->controller_pid, &cur, me, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			f->claimed_by = me;
			return 0;
		}
	}
	return fail(why, whylen, -EBUSY, "%s: the controller claim keeps changing", f->path);
}

int mtd_ept_file_layout(struct mtd_ept_file *f, uint64_t ram_bytes, struct vmm_range *ranges,
			char *why, size_t whylen)
{
	uint64_t ram = __atomic_load_n(&f->h->ram_bytes, __ATOMIC_ACQUIRE);
	uint64_t low = __atomic_load_n(&f->h->lowmem_bytes, __ATOMIC_ACQUIRE);

	if (!ram) {
		/* Both pc machines keep all RAM below 4 GiB up to 2 GiB (q35 moves RAM above
		 * 4 GiB from 2.75 GiB, pc from 3.5 GiB); beyond that the split must be told. */
		ram = ram_bytes & ~(VMM_SIZE_2M - 1);
		if (ram > 2 * GiB)
			return fail(why, whylen, -EINVAL,
				    "guest RAM above 2 GiB may sit above 4 GiB: start the plugin "
				    "with ram= and lowmem= (memtidectl ept-plugin prints them)%s",
				    "");
		low = 0;
		__atomic_store_n(&f->h->lowmem_bytes, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&f->h->ram_bytes, ram, __ATOMIC_RELEASE);
	}
	ram &= ~(VMM_SIZE_2M - 1);
	low &= ~(VMM_SIZE_2M - 1);
	if (!ram)
		return fail(why, whylen, -EINVAL, "%s: guest RAM below 2 MiB", f->path);
	if (low && low < ram) {
		ranges[0] = (struct vmm_range){0, low};
		ranges[1] = (struct vmm_range){1ULL << 32, (1ULL << 32) + ram - low};
		if (ranges[1].end > f->span_bytes)
			return fail(why, whylen, -EINVAL, "%s: RAM reaches past the table's span",
				    f->path);
		return 2;
	}
	if (ram > f->span_bytes)
		return fail(why, whylen, -EINVAL, "%s: RAM reaches past the table's span", f->path);
	ranges[0] = (struct vmm_range){0, ram};
	return 1;
}

void mtd_ept_file_request_window(struct mtd_ept_file *f, uint64_t window_ms)
{
	mtd_ept_file_request_window_at(f, window_ms, 0);
}

void mtd_ept_file_request_window_at(struct mtd_ept_file *f, uint64_t window_ms,
				    uint64_t not_before_ms)
{
	/* Before req_seq: the plugin reads both once it sees the new request. */
	__atomic_store_n(&f->h->window_not_before_ms, not_before_ms, __ATOMIC_RELEASE);
	__atomic_store_n(&f->h->window_ms, window_ms, __ATOMIC_RELEASE);
	__atomic_store_n(&f->h->mode, MTD_EPT_MODE_WINDOWS, __ATOMIC_RELEASE);
	__atomic_fetch_add(&f->h->req_seq, 1, __ATOMIC_ACQ_REL);
}

void mtd_ept_file_set_mode(struct mtd_ept_file *f, enum mtd_ept_mode mode)
{
	__atomic_store_n(&f->h->mode, (uint32_t)mode, __ATOMIC_RELEASE);
}

bool mtd_ept_file_alive(const struct mtd_ept_file *f)
{
	return f->h && pid_alive(f->qemu_pid);
}

int64_t mtd_ept_file_zap(struct mtd_ept_file *f, uint64_t gpa, uint64_t npages)
{
	int64_t present = 0;

	if (gpa % VMM_PAGE_SIZE || npages > f->span_bytes / VMM_PAGE_SIZE ||
	    gpa > f->span_bytes - npages * VMM_PAGE_SIZE)
		return -ERANGE;
	uint64_t *leaf = (uint64_t *)(f->map + f->pt_off) + (gpa >> VMM_PAGE_SHIFT);
	for (uint64_t i = 0; i < npages; i++)
		present += (__atomic_exchange_n(&leaf[i], 0, __ATOMIC_ACQ_REL) & MTD_EPT_R) != 0;
	return present;
}

int mtd_ept_path(const char *dir, const char *vm_name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/%s.ept", dir, vm_name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	for (char *p = out + strlen(dir) + 1; *p; p++)
		if (*p == '/')
			*p = '_';
	return 0;
}
