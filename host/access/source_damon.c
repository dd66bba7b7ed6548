// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_damon.c - the damon access-bit source: Linux DAMON in physical-address mode over
 * the host frames that back a guest's RAM, through DAMON's sysfs interface
 * (Documentation/admin-guide/mm/damon/usage.rst).
 *
 * DAMON samples one random page per region every sample interval (checking and clearing
 * the accessed bits of every mapping of it through the rmap, so on a KVM host the MMU
 * notifiers harvest the guest's EPT / stage-2 accessed bits too), counts per region how
 * many samples found it accessed (nr_accesses) in each aggregation interval and for how
 * many intervals that count held (age), and splits and merges regions so that each holds
 * memory of one temperature.  A DAMOS scheme with action "stat" and an access pattern that
 * matches everything lets memtided read every region through tried_regions.
 *
 * One round (age): 1. ask for the regions (update_schemes_tried_regions) and read them; only
 * then 2. vmm_age_begin (a round whose regions could not be read leaves libvmm untouched:
 * source.h); 3. a region is young when it was accessed in the last aggregation
 * (nr_accesses > 0) or its age (aggregations since its access count last changed) is less
 * than the aggregations run since the last round; every guest page whose frame lies in a
 * young region is marked young (a reverse map, frames sorted, binary search), and the pages
 * on the shared zero page are marked free (guest_ram.h); 4. re-read QEMU's pagemap (frames
 * move: the host's khugepaged collapses guest RAM into huge pages, pages fault in) and, when
 * the set of frame ranges changed, give DAMON the new target regions (commit).  A commit
 * that fails voids the next round (its regions would be the old frames'), which tries it
 * again.  DAMON reports regions through update_schemes_tried_regions since Linux 6.2: the
 * source probes it once at setup and is refused on a kernel without it, rather than failing
 * every round.
 * Resolution: DAMON samples one page per region, so a region holding a hot host huge page
 * and a cold one reads accessed whole.  DAMON splits and merges regions between a minimum
 * and a maximum count, and never merges two into one larger than the watched size over the
 * minimum.  memtided asks for one region per 2 MiB of guest RAM at least (and one per frame
 * range), and cuts the target ranges at every 2 MiB frame boundary, so DAMON's regions start
 * on huge-page boundaries and never grow past one: scenario 11's precision went from
 * 0.80-0.85 (regions at twice the frame ranges) to 0.97-0.996.  Up to MAX_SPLIT regions
 * (cut at 4, 8 ... MiB beyond): the sampling cost grows with the count (0.02 CPU/s of
 * kdamond for a 512 MiB guest).  What exact regions cannot see is an access through a TLB
 * entry the CPU kept: docs/design.md, Part 0.  Guest RAM whose frames scatter over more
 * than MAX_REGIONS ranges is refused (at setup; a round that finds it fails): DAMON watches
 * whole physical ranges, so fewer targets would have to span frames of other processes, and
 * their accesses would be read as the guest's (a THP-backed guest above about 8 GiB).
 *
 * What DAMON cannot see: a frame it cannot get as an LRU folio it never samples, so
 * hugetlbfs-backed RAM would read all cold (refused, guest_ram.c), as would the shared zero
 * page (left out).
 *
 * Sharing DAMON politely: DAMON's sysfs adds kdamonds only while none runs (writing
 * nr_kdamonds is refused with EBUSY then, and when none runs it rebuilds every kdamond
 * directory, erasing their settings).  So memtided uses DAMON only where no other tool has
 * a kdamond configured, takes kdamond 0, and records that in RUN_DIR/damon.owner (its pid).
 * A kdamond whose owner record names a memtided that is gone is memtided's own leftover
 * after a crash: it is switched off and removed before anything else.  On detach and exit
 * memtided switches its kdamond off and sets nr_kdamonds back to 0.  One kdamond serves one
 * VM: a second VM on the same host is told DAMON is taken and uses another source.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/guest_ram.h"
#include "access/source.h"

/* Paths here are the admin directory (at most 255 bytes) plus fixed names and numbers:
 * every buffer is sized for that; GCC cannot see the bound through the chained snprintfs. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define SAMPLE_US   5000   /* DAMON's default */
#define AGGR_US     100000 /* DAMON's default */
#define MAX_REGIONS 4096
#define MAX_SPLIT   512 /* the most regions asked for resolution alone (sampling cost) */

static atomic_bool damon_taken; /* one kdamond, one VM per memtided */

struct rev {
	uint64_t pfn;
	uint64_t page; /* RAM-block page index */
};

/* One region as DAMON reported it. */
struct region {
	uint64_t start, end, nr_accesses, age;
};

struct damon_src {
	char kd[300];    /* ADMIN/kdamonds/0 */
	char owner[300]; /* RUN_DIR/damon.owner */
	char admin[256];
	struct mtd_guest_ram gram;
	uint64_t ram;    /* bytes */
	struct rev *rev; /* present pages by frame */
	uint64_t nr_rev;
	uint64_t *pfn1;   /* per page: frame + 1 (guest_ram.h) */
	uint8_t *zero;    /* per page: on the zero page */
	bool uncommitted; /* the last commit failed: the regions are not the frames' */
	char last_err[120];
	uint64_t (*targets)[2]; /* frame ranges given to DAMON, bytes */
	size_t nr_targets;
	uint64_t last_round_ms;
	struct region *regions; /* the last round's, from tried_regions */
	size_t nr_regions, cap_regions, last_nr_regions;
	uint64_t last_tried; /* the stat scheme's nr_tried at the last round */
	bool on;
};

/* ---- sysfs -------------------------------------------------------------------------------- */

static int put(const char *dir, const char *file, const char *val)
{
	char path[512];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		rc = -errno ? -errno : -EIO;
	close(fd);
	return rc;
}

static int putu(const char *dir, const char *file, uint64_t v)
{
	char b[32];
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	return put(dir, file, b);
}

static int get(const char *dir, const char *file, char *buf, size_t len)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static uint64_t getu(const char *dir, const char *file)
{
	char b[64];
	return get(dir, file, b, sizeof(b)) == 0 ? strtoull(b, NULL, 10) : 0;
}

/* A directory the kernel creates on its own; in a test tree we make it. */
static void dir_of(char *out, size_t len, const char *base, const char *sub)
{
	snprintf(out, len, "%s/%s", base, sub);
	(void)mkdir(out, 0755);
}

/* ---- ownership ---------------------------------------------------------------------------- */

static int owner_pid(const char *owner)
{
	char b[32];
	FILE *f = fopen(owner, "re");
	int pid = 0;

	if (!f)
		return 0;
	if (fgets(b, sizeof(b), f))
		pid = (int)strtol(b, NULL, 10);
	fclose(f);
	return pid;
}

static void kdamond_off(const char *admin)
{
	char kd[300];

	snprintf(kd, sizeof(kd), "%s/kdamonds/0", admin);
	(void)put(kd, "state", "off");
	(void)put(admin, "kdamonds/nr_kdamonds", "0");
}

/*
 * May memtided take kdamond 0?  0, or -EBUSY with why.  Cleans up its own leftover first.
 */
static int damon_free(const char *admin, const char *owner, char *why, size_t whylen)
{
	char kds[300], st[16];
	uint64_t n;
	int pid = owner_pid(owner);

	snprintf(kds, sizeof(kds), "%s/kdamonds", admin);
	n = getu(kds, "nr_kdamonds");
	if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH && n >= 1) {
		/* Step 0: memtided's own kdamond, left running by a memtided that died. */
		kdamond_off(admin);
		unlink(owner);
		n = getu(kds, "nr_kdamonds");
	}
	if (n == 0)
		return 0;
	for (uint64_t i = 0; i < n; i++) {
		char kd[320];
		snprintf(kd, sizeof(kd), "%s/%llu", kds, (unsigned long long)i);
		if (get(kd, "state", st, sizeof(st)) == 0 && !strcmp(st, "on")) {
			snprintf(why, whylen,
				 "another tool runs kdamond %llu (pid %llu); DAMON adds kdamonds "
				 "only while none runs, and memtided never takes over another's",
				 (unsigned long long)i, (unsigned long long)getu(kd, "pid"));
			return -EBUSY;
		}
	}
	snprintf(why, whylen,
		 "another tool has %llu kdamond(s) configured (not running); adding one would "
		 "erase their settings",
		 (unsigned long long)n);
	return -EBUSY;
}

/* ---- frames ------------------------------------------------------------------------------- */

static int cmp_rev(const void *a, const void *b)
{
	const struct rev *x = a, *y = b;
	return x->pfn < y->pfn ? -1 : x->pfn > y->pfn;
}

/* Step 4: frames of every present page, sorted; returns 1 when the ranges changed, -E2BIG
 * (nothing changed) when they would take more than MAX_REGIONS target ranges. */
static int read_frames(struct damon_src *s)
{
	uint64_t(*t)[2] = NULL;
	size_t nt = 0;
	int rc = mtd_guest_ram_frames(&s->gram, s->pfn1, s->zero);

	if (rc < 0)
		return rc;
	s->nr_rev = 0;
	for (uint64_t p = 0; p < s->gram.pages; p++)
		if (s->pfn1[p])
			s->rev[s->nr_rev++] = (struct rev){.pfn = s->pfn1[p] - 1, .page = p};
	qsort(s->rev, s->nr_rev, sizeof(*s->rev), cmp_rev);
	/* Contiguous frames make one target range, cut at every `cut`-aligned frame so that
	 * DAMON's regions start on host huge-page boundaries (see Resolution above); never
	 * across a gap: the frames between belong to someone else. */
	uint64_t cut = VMM_SIZE_2M;
	while (s->ram / cut > MAX_SPLIT)
		cut *= 2;
	t = calloc(MAX_REGIONS, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint64_t i = 0; i < s->nr_rev; i++) {
		uint64_t a = s->rev[i].pfn << VMM_PAGE_SHIFT;
		if (nt && t[nt - 1][1] > a)
			continue; /* a frame mapped twice */
		if (nt && t[nt - 1][1] == a && a % cut != 0) {
			t[nt - 1][1] = a + VMM_PAGE_SIZE;
			continue;
		}
		if (nt == MAX_REGIONS) {
			free(t);
			return -E2BIG;
		}
		t[nt][0] = a;
		t[nt++][1] = a + VMM_PAGE_SIZE;
	}
	int changed = nt != s->nr_targets || (nt && memcmp(t, s->targets, nt * sizeof(*t)) != 0);
	free(s->targets);
	s->targets = t;
	s->nr_targets = nt;
	return changed;
}

static int write_targets(struct damon_src *s)
{
	char ctx[400], tg[420], rg[440], r[460];
	int rc;

	snprintf(ctx, sizeof(ctx), "%s/contexts/0", s->kd);
	dir_of(tg, sizeof(tg), ctx, "targets");
	rc = putu(tg, "nr_targets", 1);
	dir_of(tg, sizeof(tg), ctx, "targets/0");
	dir_of(rg, sizeof(rg), tg, "regions");
	if (rc == 0)
		rc = putu(rg, "nr_regions", s->nr_targets);
	for (size_t i = 0; i < s->nr_targets && rc == 0; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%zu", i);
		dir_of(r, sizeof(r), rg, name);
		rc = putu(r, "start", s->targets[i][0]);
		if (rc == 0)
			rc = putu(r, "end", s->targets[i][1]);
	}
	return rc;
}

void mtd_damon_region_limits(size_t nr_targets, uint64_t ram_bytes, uint64_t *min, uint64_t *max)
{
	uint64_t lo = ram_bytes / VMM_SIZE_2M;

	if (lo > MAX_SPLIT)
		lo = MAX_SPLIT;
	if (lo < nr_targets)
		lo = nr_targets;
	if (lo < 10)
		lo = 10;
	if (lo > MAX_REGIONS)
		lo = MAX_REGIONS;
	*min = lo;
	*max = 2 * lo;
}

static int setup(struct damon_src *s)
{
	char d[400], a[420], sc[420], p[440];
	int rc;

	rc = put(s->admin, "kdamonds/nr_kdamonds", "1");
	dir_of(d, sizeof(d), s->admin, "kdamonds/0");
	dir_of(d, sizeof(d), s->kd, "contexts");
	if (rc == 0)
		rc = putu(d, "nr_contexts", 1);
	dir_of(d, sizeof(d), s->kd, "contexts/0");
	if (rc == 0)
		rc = put(d, "operations", "paddr");
	dir_of(a, sizeof(a), d, "monitoring_attrs");
	dir_of(a, sizeof(a), d, "monitoring_attrs/intervals");
	if (rc == 0)
		rc = putu(a, "sample_us", SAMPLE_US);
	if (rc == 0)
		rc = putu(a, "aggr_us", AGGR_US);
	dir_of(a, sizeof(a), d, "monitoring_attrs/nr_regions");
	uint64_t min, max;
	mtd_damon_region_limits(s->nr_targets, s->ram, &min, &max);
	if (rc == 0)
		rc = putu(a, "max", max);
	if (rc == 0)
		rc = putu(a, "min", min);
	if (rc == 0)
		rc = write_targets(s);
	dir_of(sc, sizeof(sc), d, "schemes");
	if (rc == 0)
		rc = putu(sc, "nr_schemes", 1);
	dir_of(sc, sizeof(sc), d, "schemes/0");
	if (rc == 0)
		rc = put(sc, "action", "stat");
	static const char *const pat[][2] = {
	    {"sz", "18446744073709551615"}, {"nr_accesses", "4294967295"}, {"age", "4294967295"}};
	dir_of(p, sizeof(p), sc, "access_pattern");
	for (size_t i = 0; i < 3 && rc == 0; i++) {
		char q[480];
		snprintf(q, sizeof(q), "%s/access_pattern/%s", sc, pat[i][0]);
		(void)mkdir(q, 0755);
		rc = put(q, "min", "0");
		if (rc == 0)
			rc = put(q, "max", pat[i][1]);
	}
	if (rc == 0)
		rc = put(s->kd, "state", "on");
	return rc;
}

/* ---- one round ---------------------------------------------------------------------------- */

/* Step 3 for one young region [start, end) of physical bytes. */
static void mark_region(struct damon_src *s, struct vmm_guest *g, uint64_t start, uint64_t end)
{
	uint64_t lo = 0, hi = s->nr_rev;

	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (s->rev[mid].pfn < start >> VMM_PAGE_SHIFT)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint64_t i = lo; i < s->nr_rev && s->rev[i].pfn < end >> VMM_PAGE_SHIFT; i++)
		(void)vmm_mark_young(g, mtd_guest_ram_gpa(&s->gram, s->rev[i].page), 1, false);
}

/* Step 1: the regions DAMON watched since the last round, into s->regions. */
static int read_regions(struct damon_src *s)
{
	char tr[480];

	if (put(s->kd, "state", "update_schemes_tried_regions") < 0)
		return -EIO;
	snprintf(tr, sizeof(tr), "%s/contexts/0/schemes/0/tried_regions", s->kd);
	DIR *d = opendir(tr);
	if (!d)
		return -errno;
	s->nr_regions = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char r[760];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (s->nr_regions == s->cap_regions) {
			size_t cap = s->cap_regions ? s->cap_regions * 2 : 256;
			struct region *n = realloc(s->regions, cap * sizeof(*n));
			if (!n) {
				closedir(d);
				return -ENOMEM;
			}
			s->regions = n;
			s->cap_regions = cap;
		}
		snprintf(r, sizeof(r), "%s/%s", tr, de->d_name);
		s->regions[s->nr_regions++] = (struct region){
		    .start = getu(r, "start"),
		    .end = getu(r, "end"),
		    .nr_accesses = getu(r, "nr_accesses"),
		    .age = getu(r, "age"),
		};
	}
	closedir(d);
	return 0;
}

/*
 * How many aggregations DAMON ran since the last round: the unit of a region's age.  The
 * wall clock gives since_ms / aggregation interval, but only if kdamond kept to its
 * interval; on a busy host it runs late, fewer aggregations fit in the round, and a region
 * idle all round would read younger than the round and count as accessed.  The stat scheme
 * tries every region once per aggregation, so the growth of its nr_tried over the region
 * count says how many aggregations really ran.  The smaller of the two is taken (kdamond
 * never runs early); without the scheme's stats, the wall clock alone.
 */
static uint64_t aggregations_since(struct damon_src *s, uint64_t since_ms)
{
	char st[480];
	uint64_t by_clock = since_ms * 1000 / AGGR_US, tried = 0, by_stats = UINT64_MAX;

	snprintf(st, sizeof(st), "%s/contexts/0/schemes/0/stats", s->kd);
	if (put(s->kd, "state", "update_schemes_stats") == 0)
		tried = getu(st, "nr_tried");
	uint64_t regions = (s->last_nr_regions + s->nr_regions + 1) / 2;
	if (tried > s->last_tried && s->last_tried && regions)
		by_stats = (tried - s->last_tried + regions / 2) / regions;
	s->last_tried = tried;
	s->last_nr_regions = s->nr_regions;
	return by_stats < by_clock ? by_stats : by_clock;
}

static int damon_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct damon_src *s = ctx;
	uint64_t since_ms = s->last_round_ms && now_ms > s->last_round_ms
				? now_ms - s->last_round_ms
				: AGGR_US / 1000;
	int rc;

	if (s->uncommitted) {
		/* DAMON watches frames the guest left (the last commit failed, or the frames
		 * scattered past MAX_REGIONS ranges): its regions say nothing of the pages on the
		 * new ones, which would read cold.  Commit, and read the regions next round. */
		rc = read_frames(s);
		if (rc >= 0 && write_targets(s) == 0 && put(s->kd, "state", "commit") == 0)
			s->uncommitted = false;
		snprintf(s->last_err, sizeof(s->last_err), "%s",
			 rc == -E2BIG
			     ? "guest RAM's frames scatter over more ranges than DAMON "
			       "is given: no round until they gather again"
			     : "DAMON is given the guest's new frames: this round is void");
		return rc == -E2BIG ? -E2BIG : -ESTALE;
	}
	/* Step 1 */
	rc = read_regions(s);
	if (rc < 0) {
		snprintf(s->last_err, sizeof(s->last_err), "DAMON's regions could not be read: %s",
			 strerror(-rc));
		return rc;
	}
	uint64_t aggrs = aggregations_since(s, since_ms);
	/* Step 2 */
	rc = vmm_age_begin(g, now_ms);
	if (rc < 0)
		return rc;
	s->last_round_ms = now_ms;
	s->last_err[0] = '\0';
	/* Step 3 */
	for (size_t i = 0; i < s->nr_regions; i++) {
		const struct region *r = &s->regions[i];
		if (r->end > r->start && (r->nr_accesses > 0 || r->age < aggrs))
			mark_region(s, g, r->start, r->end);
	}
	mtd_guest_ram_hint_zero(&s->gram, s->zero, g);
	/* Step 4 */
	rc = read_frames(s);
	if (rc < 0 || (rc == 1 && (write_targets(s) < 0 || put(s->kd, "state", "commit") < 0)))
		s->uncommitted = true;
	return 0;
}

static bool damon_fresh(void *ctx, uint64_t now_ms)
{
	struct damon_src *s = ctx;
	char st[16];

	(void)now_ms;
	return get(s->kd, "state", st, sizeof(st)) == 0 && !strcmp(st, "on");
}

static void damon_destroy(void *ctx)
{
	struct damon_src *s = ctx;

	if (!s)
		return;
	if (s->on) {
		kdamond_off(s->admin);
		unlink(s->owner);
		atomic_store(&damon_taken, false);
	}
	mtd_guest_ram_close(&s->gram);
	free(s->rev);
	free(s->pfn1);
	free(s->zero);
	free(s->targets);
	free(s->regions);
	free(s);
}

/* DAMON samples one page per region every sampling interval through each aggregation:
 * no window of the round to widen (vmm/sample.c is for the ept source). */
static int damon_describe(void *ctx, char *buf, size_t len)
{
	const struct damon_src *s = ctx;

	snprintf(buf, len,
		 "DAMON's regions, sampled all through each aggregation; no sampling "
		 "window%s%s",
		 s->last_err[0] ? "; " : "", s->last_err);
	return 0;
}

static const struct mtd_source_ops damon_ops = {
    .name = "damon",
    .per_page = true,
    .age = damon_age,
    .evicted = NULL, /* the guest picks what the balloon takes (see source_ept.c) */
    .fresh = damon_fresh,
    .describe = damon_describe,
    .destroy = damon_destroy,
};

int mtd_damon_probe(const char *admin, const char *run_dir, char *why, size_t whylen)
{
	char owner[300], path[300];

	snprintf(path, sizeof(path), "%s/kdamonds", admin);
	if (access(path, F_OK) != 0) {
		snprintf(why, whylen, "this kernel has no DAMON sysfs interface (%s missing)",
			 admin);
		return -ENOENT;
	}
	if (atomic_load(&damon_taken)) {
		snprintf(why, whylen, "memtided's one kdamond already serves another VM");
		return -EBUSY;
	}
	snprintf(owner, sizeof(owner), "%s/damon.owner", run_dir);
	return damon_free(admin, owner, why, whylen);
}

void mtd_damon_cleanup(const char *admin, const char *run_dir)
{
	char owner[300], why[200];

	snprintf(owner, sizeof(owner), "%s/damon.owner", run_dir);
	(void)damon_free(admin, owner, why, sizeof(why));
}

/* Does this kernel's DAMON report its regions?  update_schemes_tried_regions came with
 * Linux 6.2; before it, every round would fail.  Asked once of the running kdamond. */
static int probe_regions(struct damon_src *s, char *why, size_t whylen)
{
	char tr[480];
	int rc = put(s->kd, "state", "update_schemes_tried_regions");

	snprintf(tr, sizeof(tr), "%s/contexts/0/schemes/0/tried_regions", s->kd);
	if (rc == 0 && access(tr, R_OK | X_OK) != 0)
		rc = -errno;
	if (rc < 0)
		snprintf(why, whylen,
			 "this kernel's DAMON cannot report its regions (update_schemes_tried_"
			 "regions: %s; Linux 6.2 has it)",
			 strerror(-rc));
	return rc < 0 ? -EOPNOTSUPP : 0;
}

int mtd_source_damon_new(const struct mtd_host_source_env *env, struct mtd_source *out, char *why,
			 size_t whylen)
{
	struct damon_src *s;
	char path[300], ops[64];
	int rc;

	snprintf(path, sizeof(path), "%s/kdamonds", env->damon_admin);
	if (access(path, F_OK) != 0) {
		snprintf(why, whylen, "this kernel has no DAMON sysfs interface (%s missing)",
			 env->damon_admin);
		return -ENOENT;
	}
	if (env->qemu_pid <= 0) {
		snprintf(why, whylen, "QEMU's pid is not known");
		return -ESRCH;
	}
	bool expected = false;
	if (!atomic_compare_exchange_strong(&damon_taken, &expected, true)) {
		snprintf(why, whylen, "memtided's one kdamond already serves another VM");
		return -EBUSY;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		atomic_store(&damon_taken, false);
		return -ENOMEM;
	}
	s->gram.pagemap_fd = -1;
	snprintf(s->admin, sizeof(s->admin), "%s", env->damon_admin);
	snprintf(s->kd, sizeof(s->kd), "%s/kdamonds/0", env->damon_admin);
	snprintf(s->owner, sizeof(s->owner), "%s/damon.owner", env->run_dir);
	rc = damon_free(env->damon_admin, s->owner, why, whylen);
	if (rc < 0)
		goto fail;
	rc = mtd_guest_ram_open(env->qmp, env->qmp_ctx, env->qemu_pid, env->proc_dir, "DAMON",
				&s->gram, why, whylen);
	if (rc < 0)
		goto fail;
	s->ram = s->gram.pages << VMM_PAGE_SHIFT;
	s->rev = calloc(s->gram.pages, sizeof(*s->rev));
	s->pfn1 = calloc(s->gram.pages, sizeof(*s->pfn1));
	s->zero = calloc(s->gram.pages, 1);
	if (!s->rev || !s->pfn1 || !s->zero) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	rc = read_frames(s);
	if (rc == -E2BIG)
		snprintf(why, whylen,
			 "guest RAM's frames scatter over more than %d ranges: DAMON would "
			 "have to watch other processes' memory with them",
			 MAX_REGIONS);
	else if (rc >= 0 && s->nr_rev == 0) {
		rc = -EPERM;
		snprintf(why, whylen, "QEMU's pagemap shows no frames (needs CAP_SYS_ADMIN)");
	} else if (rc < 0)
		snprintf(why, whylen, "cannot read QEMU's pagemap: %s", strerror(-rc));
	if (rc < 0)
		goto fail;
	/* The owner record first: a crash from here on leaves a kdamond we will recognise. */
	FILE *f = fopen(s->owner, "we");
	if (!f) {
		rc = -errno;
		snprintf(why, whylen, "cannot write %s", s->owner);
		goto fail;
	}
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	s->on = true;
	rc = setup(s);
	if (rc == 0 && (get(s->kd, "contexts/0/operations", ops, sizeof(ops)) < 0 ||
			strcmp(ops, "paddr") != 0))
		rc = -EOPNOTSUPP;
	if (rc < 0) {
		snprintf(why, whylen, "DAMON refused the paddr setup (%s): no DAMON_PADDR?",
			 strerror(-rc));
		goto fail;
	}
	rc = probe_regions(s, why, whylen);
	if (rc < 0)
		goto fail;
	*out = (struct mtd_source){
	    .ops = &damon_ops, .ctx = s, .ram = s->gram.ranges, .nr_ram = s->gram.nr_ranges};
	return 0;
fail:
	if (!s->on)
		atomic_store(&damon_taken, false);
	damon_destroy(s);
	return rc;
}
