/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * kernel_fs.h - a stand-in for two kernel interfaces this machine cannot give the unit tests:
 * the page_idle bitmap (this kernel has no CONFIG_IDLE_PAGE_TRACKING) and DAMON's sysfs
 * (this kernel has it, but another tool's kdamond runs from boot, and memtided never touches
 * another tool's kdamond, so memtided's use of it cannot be driven here).
 *
 * Served by FUSE from a thread of the test process, so the sources under test do their real
 * file I/O, and the files behave as the kernel's do, not as plain files that accept anything:
 *
 *   page_idle/bitmap   reads and writes of whole 8-byte words at 8-byte offsets only
 *                      (EINVAL otherwise); writing 1 marks a frame idle; reading gives 1 for
 *                      a frame still idle; frames not on the LRU (kfs_idle_not_lru: the zero
 *                      page, hugetlbfs) read 0 whatever was written, as page_idle_get_folio
 *                      finds no LRU folio for them.  The test plays the hardware's part with
 *                      kfs_idle_access (an access clears the idle bit).
 *   damon/...          DAMON's sysfs (Documentation/admin-guide/mm/damon/usage.rst): the
 *                      directories appear when an nr_* file is written (nothing else can
 *                      make them: no mkdir, no create); nr_kdamonds is refused (EBUSY) while
 *                      a kdamond runs; state reads "on" or "off" and takes on, off, commit,
 *                      update_schemes_stats and update_schemes_tried_regions, every command
 *                      but "on" refused (EINVAL) on a kdamond that is off, and "on" refused
 *                      without paddr targets; numbers must be numbers; operations only takes
 *                      what avail_operations lists.  tried_regions is filled from what the
 *                      test says DAMON saw (kfs_damon_regions) at update_schemes_tried_regions,
 *                      and stats/nr_tried at update_schemes_stats.  kfs_damon_old_kernel
 *                      stands for a kernel before 6.2: no tried_regions directory, and
 *                      update_schemes_tried_regions refused.
 *
 * Header-only (one unit test uses it); link with fuse3.  kfs_mount returns -errno when FUSE
 * cannot be had (no /dev/fuse, not root): the tests then skip and say so.
 */
#ifndef MEMTIDE_TESTS_KERNEL_FS_H
#define MEMTIDE_TESTS_KERNEL_FS_H

#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KFS_PATH_MAX 200
/* Paths are the mount-relative sysfs paths plus short fixed names: truncation cannot happen
 * at these sizes, which GCC cannot see through the chained snprintfs. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#define KFS_VAL_MAX 64

struct kfs_node {
	char path[KFS_PATH_MAX]; /* "/damon/kdamonds/0/state" */
	bool dir;
	char val[KFS_VAL_MAX];
};

struct kfs_region {
	uint64_t start, end, nr_accesses, age;
};

static struct {
	pthread_mutex_t lock;
	struct fuse *fuse;
	pthread_t thread;
	char mnt[256];
	struct kfs_node *n;
	size_t nr, cap;
	/* page_idle */
	uint64_t idle_words;
	uint64_t *idle, *lru_not; /* one bit per frame */
	/* DAMON */
	bool old_kernel;
	struct kfs_region *regions;
	size_t nr_regions;
	uint64_t nr_tried;
	unsigned writes_refused; /* writes the "kernel" refused, for the tests' asserts */
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- the node table ------------------------------------------------------------------- */

static struct kfs_node *kfs_find(const char *path)
{
	for (size_t i = 0; i < K.nr; i++)
		if (!strcmp(K.n[i].path, path))
			return &K.n[i];
	return NULL;
}

static void kfs_add(const char *path, bool dir, const char *val)
{
	struct kfs_node *x = kfs_find(path);

	if (!x) {
		if (K.nr == K.cap) {
			K.cap = K.cap ? K.cap * 2 : 256;
			K.n = realloc(K.n, K.cap * sizeof(*K.n));
		}
		x = &K.n[K.nr++];
	}
	snprintf(x->path, sizeof(x->path), "%s", path);
	x->dir = dir;
	snprintf(x->val, sizeof(x->val), "%s", val ? val : "");
}

/* Remove everything under dir (not dir itself). */
static void kfs_clear_under(const char *dir)
{
	size_t l = strlen(dir), j = 0;

	for (size_t i = 0; i < K.nr; i++)
		if (!(!strncmp(K.n[i].path, dir, l) && K.n[i].path[l] == '/'))
			K.n[j++] = K.n[i];
	K.nr = j;
}

static void kfs_addf(bool dir, const char *val, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void kfs_addf(bool dir, const char *val, const char *fmt, ...)
{
	char p[KFS_PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	kfs_add(p, dir, val);
}

static const char *kfs_get(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *kfs_get(const char *fmt, ...)
{
	char p[KFS_PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	struct kfs_node *x = kfs_find(p);
	return x ? x->val : NULL;
}

static bool kfs_ends(const char *path, const char *suffix)
{
	size_t a = strlen(path), b = strlen(suffix);
	return a >= b && !strcmp(path + a - b, suffix);
}

/* ---- DAMON's directories, as the kernel makes them ------------------------------------ */

static void kfs_make_scheme(const char *d)
{
	static const char *const pat[] = {"sz", "nr_accesses", "age"};

	kfs_add(d, true, NULL);
	kfs_addf(false, "stat", "%s/action", d);
	kfs_addf(true, NULL, "%s/access_pattern", d);
	for (int i = 0; i < 3; i++) {
		kfs_addf(true, NULL, "%s/access_pattern/%s", d, pat[i]);
		kfs_addf(false, "0", "%s/access_pattern/%s/min", d, pat[i]);
		kfs_addf(false, "0", "%s/access_pattern/%s/max", d, pat[i]);
	}
	kfs_addf(true, NULL, "%s/stats", d);
	kfs_addf(false, "0", "%s/stats/nr_tried", d);
	kfs_addf(false, "0", "%s/stats/sz_tried", d);
	if (!K.old_kernel) {
		kfs_addf(true, NULL, "%s/tried_regions", d);
		kfs_addf(false, "0", "%s/tried_regions/total_bytes", d);
	}
}

static void kfs_make_context(const char *d)
{
	kfs_add(d, true, NULL);
	kfs_addf(false, "vaddr\nfvaddr\npaddr", "%s/avail_operations", d);
	kfs_addf(false, "vaddr", "%s/operations", d);
	kfs_addf(true, NULL, "%s/monitoring_attrs", d);
	kfs_addf(true, NULL, "%s/monitoring_attrs/intervals", d);
	kfs_addf(false, "5000", "%s/monitoring_attrs/intervals/sample_us", d);
	kfs_addf(false, "100000", "%s/monitoring_attrs/intervals/aggr_us", d);
	kfs_addf(false, "1000000", "%s/monitoring_attrs/intervals/update_us", d);
	kfs_addf(true, NULL, "%s/monitoring_attrs/nr_regions", d);
	kfs_addf(false, "10", "%s/monitoring_attrs/nr_regions/min", d);
	kfs_addf(false, "1000", "%s/monitoring_attrs/nr_regions/max", d);
	kfs_addf(true, NULL, "%s/targets", d);
	kfs_addf(false, "0", "%s/targets/nr_targets", d);
	kfs_addf(true, NULL, "%s/schemes", d);
	kfs_addf(false, "0", "%s/schemes/nr_schemes", d);
}

static void kfs_make_kdamond(const char *d)
{
	kfs_add(d, true, NULL);
	kfs_addf(false, "off", "%s/state", d);
	kfs_addf(false, "-1", "%s/pid", d);
	kfs_addf(true, NULL, "%s/contexts", d);
	kfs_addf(false, "0", "%s/contexts/nr_contexts", d);
}

/* Writing n to DIR/nr_NAME: DIR/0 .. DIR/n-1 made afresh by make. */
static void kfs_make_n(const char *nr_path, unsigned long n, void (*make)(const char *))
{
	char dir[KFS_PATH_MAX];
	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(nr_path, '/') - nr_path), nr_path);
	kfs_clear_under(dir);
	kfs_addf(false, "", "%s", nr_path);
	for (unsigned long i = 0; i < n; i++) {
		char d[KFS_PATH_MAX + 24];
		snprintf(d, sizeof(d), "%s/%lu", dir, i);
		make(d);
	}
}

static void kfs_make_target(const char *d)
{
	kfs_add(d, true, NULL);
	kfs_addf(false, "0", "%s/pid_target", d);
	kfs_addf(true, NULL, "%s/regions", d);
	kfs_addf(false, "0", "%s/regions/nr_regions", d);
}

static void kfs_make_region(const char *d)
{
	kfs_add(d, true, NULL);
	kfs_addf(false, "0", "%s/start", d);
	kfs_addf(false, "0", "%s/end", d);
}

static bool kfs_any_on(void)
{
	for (size_t i = 0; i < K.nr; i++)
		if (kfs_ends(K.n[i].path, "/state") && !strcmp(K.n[i].val, "on"))
			return true;
	return false;
}

static void kfs_fill_tried(const char *kd)
{
	char tr[KFS_PATH_MAX];
	uint64_t total = 0;

	snprintf(tr, sizeof(tr), "%s/contexts/0/schemes/0/tried_regions", kd);
	kfs_clear_under(tr);
	for (size_t i = 0; i < K.nr_regions; i++) {
		const struct kfs_region *r = &K.regions[i];
		char v[4][24];
		snprintf(v[0], 24, "%llu", (unsigned long long)r->start);
		snprintf(v[1], 24, "%llu", (unsigned long long)r->end);
		snprintf(v[2], 24, "%llu", (unsigned long long)r->nr_accesses);
		snprintf(v[3], 24, "%llu", (unsigned long long)r->age);
		kfs_addf(true, NULL, "%s/%zu", tr, i);
		kfs_addf(false, v[0], "%s/%zu/start", tr, i);
		kfs_addf(false, v[1], "%s/%zu/end", tr, i);
		kfs_addf(false, v[2], "%s/%zu/nr_accesses", tr, i);
		kfs_addf(false, v[3], "%s/%zu/age", tr, i);
		total += r->end - r->start;
	}
	char t[24];
	snprintf(t, sizeof(t), "%llu", (unsigned long long)total);
	kfs_addf(false, t, "%s/total_bytes", tr);
}

/* A write to state: the kdamond's commands. */
static int kfs_state(struct kfs_node *x, const char *v)
{
	char kd[KFS_PATH_MAX];
	bool on = !strcmp(x->val, "on");

	snprintf(kd, sizeof(kd), "%.*s", (int)(strlen(x->path) - 6), x->path);
	if (!strcmp(v, "on")) {
		const char *ops = kfs_get("%s/contexts/0/operations", kd);
		const char *nt = kfs_get("%s/contexts/0/targets/nr_targets", kd);
		const char *nr = kfs_get("%s/contexts/0/targets/0/regions/nr_regions", kd);
		if (on)
			return -EBUSY;
		if (!ops || strcmp(ops, "paddr") || !nt || atoi(nt) < 1 || !nr || atoi(nr) < 1)
			return -EINVAL;
		snprintf(x->val, sizeof(x->val), "on");
		kfs_addf(false, "4242", "%s/pid", kd);
		return 0;
	}
	if (!on)
		return -EINVAL; /* every other command needs a running kdamond */
	if (!strcmp(v, "off")) {
		snprintf(x->val, sizeof(x->val), "off");
		kfs_addf(false, "-1", "%s/pid", kd);
	} else if (!strcmp(v, "commit")) {
		/* the new targets take effect: nothing to model */
	} else if (!strcmp(v, "update_schemes_stats")) {
		char n[24];
		snprintf(n, sizeof(n), "%llu", (unsigned long long)K.nr_tried);
		kfs_addf(false, n, "%s/contexts/0/schemes/0/stats/nr_tried", kd);
	} else if (!strcmp(v, "update_schemes_tried_regions") && !K.old_kernel) {
		kfs_fill_tried(kd);
	} else {
		return -EINVAL;
	}
	return 0;
}

static bool kfs_number(const char *v)
{
	char *end;
	if (!*v || (*v == '-' && v[1] != '1'))
		return false;
	(void)strtoll(v, &end, 10);
	return *end == '\0';
}

static int kfs_write_damon(struct kfs_node *x, const char *v)
{
	char p[KFS_PATH_MAX]; /* the table moves under x as directories are made */

	snprintf(p, sizeof(p), "%s", x->path);

	if (kfs_ends(p, "/state"))
		return kfs_state(x, v);
	if (kfs_ends(p, "/operations")) {
		if (strcmp(v, "vaddr") && strcmp(v, "fvaddr") && strcmp(v, "paddr"))
			return -EINVAL;
		snprintf(x->val, sizeof(x->val), "%s", v);
		return 0;
	}
	if (kfs_ends(p, "/action")) {
		snprintf(x->val, sizeof(x->val), "%s", v);
		return 0;
	}
	if (!kfs_number(v))
		return -EINVAL;
	unsigned long n = strtoul(v, NULL, 10);
	if (kfs_ends(p, "/kdamonds/nr_kdamonds")) {
		if (kfs_any_on())
			return -EBUSY;
		kfs_make_n(p, n, kfs_make_kdamond);
	} else if (kfs_ends(p, "/contexts/nr_contexts")) {
		kfs_make_n(p, n, kfs_make_context);
	} else if (kfs_ends(p, "/targets/nr_targets")) {
		kfs_make_n(p, n, kfs_make_target);
	} else if (kfs_ends(p, "/regions/nr_regions") && !strstr(p, "monitoring_attrs")) {
		kfs_make_n(p, n, kfs_make_region);
	} else if (kfs_ends(p, "/schemes/nr_schemes")) {
		kfs_make_n(p, n, kfs_make_scheme);
	} else if (strstr(p, "/tried_regions/") || kfs_ends(p, "/pid") || strstr(p, "/stats/") ||
		   kfs_ends(p, "avail_operations")) {
		return -EACCES; /* read-only files */
	}
	x = kfs_find(p); /* kfs_make_n may have moved the table */
	snprintf(x->val, sizeof(x->val), "%s", v);
	return 0;
}

/* ---- page_idle/bitmap ----------------------------------------------------------------- */

static int kfs_idle_io(char *buf, size_t n, off_t off, bool wr)
{
	if (off % 8 || n % 8)
		return -EINVAL;
	uint64_t w0 = (uint64_t)off / 8;
	if (w0 >= K.idle_words)
		return wr ? -ENXIO : 0;
	if (w0 + n / 8 > K.idle_words)
		n = (K.idle_words - w0) * 8;
	for (size_t i = 0; i < n / 8; i++) {
		uint64_t v;
		if (wr) {
			memcpy(&v, buf + i * 8, 8);
			K.idle[w0 + i] |= v & ~K.lru_not[w0 + i];
		} else {
			v = K.idle[w0 + i] & ~K.lru_not[w0 + i];
			memcpy(buf + i * 8, &v, 8);
		}
	}
	return (int)n;
}

/* ---- FUSE --------------------------------------------------------------------------- */

static int kfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/") || !strcmp(path, "/page_idle")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!strcmp(path, "/page_idle/bitmap")) {
		if (!K.idle_words)
			return -ENOENT;
		st->st_mode = S_IFREG | 0600;
		st->st_size = (off_t)(K.idle_words * 8);
		return 0;
	}
	pthread_mutex_lock(&K.lock);
	struct kfs_node *x = kfs_find(path);
	int rc = -ENOENT;
	if (x) {
		st->st_mode = x->dir ? S_IFDIR | 0755 : S_IFREG | 0644;
		st->st_nlink = x->dir ? 2 : 1;
		st->st_size = x->dir ? 0 : 4096; /* as sysfs says of its files */
		rc = 0;
	}
	pthread_mutex_unlock(&K.lock);
	return rc;
}

static int kfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
	size_t l = strlen(path);

	(void)off;
	(void)fi;
	(void)fl;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	if (!strcmp(path, "/")) {
		fill(buf, "page_idle", NULL, 0, 0);
		l = 0;
	}
	pthread_mutex_lock(&K.lock);
	for (size_t i = 0; i < K.nr; i++) {
		const char *p = K.n[i].path;
		if (!strncmp(p, path, l) && p[l] == '/' && !strchr(p + l + 1, '/'))
			fill(buf, p + l + 1, NULL, 0, 0);
	}
	pthread_mutex_unlock(&K.lock);
	return 0;
}

static int kfs_open(const char *path, struct fuse_file_info *fi)
{
	struct stat st;

	fi->direct_io = 1; /* every read and write reaches us, as with sysfs */
	return kfs_getattr(path, &st, NULL);
}

static int kfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)path;
	(void)size;
	(void)fi;
	return 0; /* O_TRUNC on a sysfs file does nothing */
}

static int kfs_read(const char *path, char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	pthread_mutex_lock(&K.lock);
	int rc;
	if (!strcmp(path, "/page_idle/bitmap")) {
		rc = kfs_idle_io(buf, n, off, false);
	} else {
		struct kfs_node *x = kfs_find(path);
		char v[KFS_VAL_MAX + 1];
		snprintf(v, sizeof(v), "%s\n", x ? x->val : "");
		size_t len = strlen(v);
		rc = !x || x->dir ? -EISDIR : off >= (off_t)len ? 0 : (int)(len - (size_t)off);
		if (rc > (int)n)
			rc = (int)n;
		if (rc > 0)
			memcpy(buf, v + off, (size_t)rc);
	}
	pthread_mutex_unlock(&K.lock);
	return rc;
}

static int kfs_write(const char *path, const char *buf, size_t n, off_t off,
		     struct fuse_file_info *fi)
{
	int rc;

	(void)fi;
	pthread_mutex_lock(&K.lock);
	if (!strcmp(path, "/page_idle/bitmap")) {
		rc = kfs_idle_io((char *)buf, n, off, true);
	} else {
		struct kfs_node *x = kfs_find(path);
		char v[KFS_VAL_MAX];
		snprintf(v, sizeof(v), "%.*s", (int)n, buf);
		v[strcspn(v, "\n")] = '\0';
		rc = !x || x->dir ? -ENOENT : kfs_write_damon(x, v);
		if (rc == 0)
			rc = (int)n;
	}
	if (rc < 0)
		K.writes_refused++;
	pthread_mutex_unlock(&K.lock);
	return rc;
}

/* Nothing cached in the kernel: the tree changes under it as the "kernel" rebuilds it. */
static void *kfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	return NULL;
}

static const struct fuse_operations kfs_ops = {
    .init = kfs_init,
    .getattr = kfs_getattr,
    .readdir = kfs_readdir,
    .open = kfs_open,
    .truncate = kfs_truncate,
    .read = kfs_read,
    .write = kfs_write,
};

static void *kfs_loop(void *arg)
{
	(void)arg;
	fuse_loop(K.fuse);
	return NULL;
}

/* ---- the test's side ------------------------------------------------------------------ */

/* A fresh kernel at mnt: no kdamond, no idle bitmap (kfs_idle_frames adds one).  0 or
 * -errno (FUSE not available). */
static int kfs_mount(const char *mnt)
{
	char *argv[] = {"kernel_fs", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);

	snprintf(K.mnt, sizeof(K.mnt), "%s", mnt);
	K.nr = 0;
	K.old_kernel = false;
	K.nr_regions = 0;
	K.nr_tried = 0;
	K.writes_refused = 0;
	kfs_add("/damon", true, NULL);
	kfs_add("/damon/kdamonds", true, NULL);
	kfs_add("/damon/kdamonds/nr_kdamonds", false, "0");
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		return -errno;
	K.fuse = fuse_new(&args, &kfs_ops, sizeof(kfs_ops), NULL);
	fuse_opt_free_args(&args);
	if (!K.fuse)
		return -ENODEV;
	if (fuse_mount(K.fuse, mnt) != 0) {
		fuse_destroy(K.fuse);
		K.fuse = NULL;
		return -EPERM;
	}
	pthread_create(&K.thread, NULL, kfs_loop, NULL);
	return 0;
}

static void kfs_umount(void)
{
	if (!K.fuse)
		return;
	fuse_exit(K.fuse);
	fuse_unmount(K.fuse);
	/* A test that failed half-way left its files open: the mount stays busy, the loop
	 * reads on, and a plain join hung the binary until make's timeout.  End the loop (its
	 * read is a cancellation point); fuse_destroy then closes the connection. */
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	if (pthread_timedjoin_np(K.thread, NULL, &dl) != 0) {
		pthread_cancel(K.thread);
		pthread_join(K.thread, NULL);
	}
	fuse_destroy(K.fuse);
	K.fuse = NULL;
	free(K.idle);
	free(K.lru_not);
	free(K.regions);
	K.idle = K.lru_not = NULL;
	K.regions = NULL;
	K.idle_words = 0;
}

/* The kernel has idle page tracking for frames up to max_pfn (all not idle). */
static void kfs_idle_frames(uint64_t max_pfn)
{
	pthread_mutex_lock(&K.lock);
	K.idle_words = max_pfn / 64 + 1;
	K.idle = calloc(K.idle_words, 8);
	K.lru_not = calloc(K.idle_words, 8);
	pthread_mutex_unlock(&K.lock);
}

static void kfs_idle_access(uint64_t pfn)
{
	pthread_mutex_lock(&K.lock);
	if (pfn / 64 < K.idle_words)
		K.idle[pfn / 64] &= ~(1ULL << (pfn % 64));
	pthread_mutex_unlock(&K.lock);
}

static bool kfs_idle_is_idle(uint64_t pfn)
{
	pthread_mutex_lock(&K.lock);
	bool r = pfn / 64 < K.idle_words && (K.idle[pfn / 64] >> (pfn % 64) & 1) &&
		 !(K.lru_not[pfn / 64] >> (pfn % 64) & 1);
	pthread_mutex_unlock(&K.lock);
	return r;
}

static void kfs_idle_not_lru(uint64_t pfn)
{
	pthread_mutex_lock(&K.lock);
	if (pfn / 64 < K.idle_words)
		K.lru_not[pfn / 64] |= 1ULL << (pfn % 64);
	pthread_mutex_unlock(&K.lock);
}

/* Another tool's kdamond 0, running or only configured. */
static void kfs_damon_other_tool(bool running)
{
	pthread_mutex_lock(&K.lock);
	kfs_make_n("/damon/kdamonds/nr_kdamonds", 1, kfs_make_kdamond);
	kfs_add("/damon/kdamonds/nr_kdamonds", false, "1");
	if (running) {
		kfs_add("/damon/kdamonds/0/state", false, "on");
		kfs_add("/damon/kdamonds/0/pid", false, "84");
	}
	pthread_mutex_unlock(&K.lock);
}

static void kfs_damon_old_kernel(bool old)
{
	pthread_mutex_lock(&K.lock);
	K.old_kernel = old;
	pthread_mutex_unlock(&K.lock);
}

/* What DAMON saw: reported at the next update_schemes_tried_regions / _stats. */
static void kfs_damon_regions(const struct kfs_region *r, size_t n, uint64_t nr_tried)
{
	pthread_mutex_lock(&K.lock);
	free(K.regions);
	K.regions = calloc(n ? n : 1, sizeof(*r));
	if (n)
		memcpy(K.regions, r, n * sizeof(*r));
	K.nr_regions = n;
	K.nr_tried = nr_tried;
	pthread_mutex_unlock(&K.lock);
}

/* A value as the kernel holds it ("" when there is no such file). */
static void kfs_value(const char *path, char *out, size_t len)
{
	pthread_mutex_lock(&K.lock);
	struct kfs_node *x = kfs_find(path);
	snprintf(out, len, "%s", x ? x->val : "");
	pthread_mutex_unlock(&K.lock);
}

#endif /* MEMTIDE_TESTS_KERNEL_FS_H */
