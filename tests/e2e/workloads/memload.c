// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memload.c: the e2e guest's memory workload (static, runs as the guest's /init child).
 *
 * Modes (argv[1]); every line it prints starts with "WL-" so the host harness can wait on it:
 *   touchfree MIB HOLD_S   touch MIB of anonymous memory, print "WL-TOUCHED MIB", hold HOLD_S
 *                          seconds, munmap it, print "WL-FREED", then idle HOLD_S*4 seconds so
 *                          free page reporting can be watched from the host while the guest lives.
 *   hotcold HOT COLD CACHE SECONDS
 *                          fill COLD MiB of anonymous memory once (compressible: each 4 KiB page
 *                          holds its index repeated, as cold heap usually compresses), write CACHE
 *                          MiB to /tmp/cache (page cache on tmpfs), then touch HOT MiB page by page
 *                          for SECONDS seconds, printing "WL-RATE <s> <pages/s> swpin=<pages>
 *                          mig=<pages> swpout=<pages>" once a second (the guest's swap-ins,
 *                          migrations and swap-outs in that second)
 *                          and "WL-DONE <mean pages/s> pswpin=<guest swap-ins so far>" at the
 *                          end.  The cold pages are checked then: "WL-COLD-OK" or
 *                          "WL-COLD-BAD <n>".  With GROW_MIB and
 *                          GROW_AT_S the hot set grows by GROW_MIB at second GROW_AT_S ("WL-GROW
 *                          <s> <MiB> balloon=<MiB> pswpin= pswpout=", then "WL-GROWN <seconds
 *                          the first touch took> pswpin= pswpout=": the guest's swap counters).
 *                          With GROW_BALLOON_MIB too, GROW_AT_S is the earliest second: the
 *                          growth waits until the host's balloon holds at least that much
 *                          (/proc/vmstat's balloon pages: with deflate-on-oom MemTotal does not
 *                          fall), so it meets a guest the host has squeezed,
 *                          whatever the host's pace; at SECONDS - 20 it grows regardless.
 *   hold COLD SECONDS      fill COLD MiB as hotcold does, print "WL-FILLED", then sleep SECONDS
 *                          seconds: a process whose memory is reclaimed while it runs on no
 *                          CPU (no TLB shootdown needs to reach it), then check the pages as
 *                          hotcold does ("WL-COLD-OK" or "WL-COLD-BAD <n>").
 *   integrity MIB SECONDS
 *                          fill MIB of anonymous memory with checksummed pages, print "WL-FILLED",
 *                          then for SECONDS seconds run verify passes: "WL-PASS-BEGIN n", check
 *                          every page (its exact content for its index and generation, and its
 *                          checksum), "WL-PASS n bad=<pages> pages=<pages> pswpout=<guest's
 *                          pages swapped out so far>", then rewrite one page
 *                          in eight with the next generation so that dirty pages keep going
 *                          through swap.  Ends with "WL-INTEGRITY <passes> <bad pages in total>".
 *   hotpages HOT COLD SECONDS [SCATTER]
 *                          map HOT and COLD MiB of anonymous memory (separate mappings), write
 *                          every page of both once, then print where they are in guest-physical
 *                          memory (from /proc/self/pagemap: "WL-PAGES hot|cold <gpa hex>
 *                          <pages>", one line per run of consecutive frames) and "WL-PAGES-END",
 *                          and for SECONDS seconds write one word in each hot page, round after
 *                          round, printing "WL-RATE <s> <pages/s>" once a second and "WL-MOVED
 *                          <s> hot <pages> cold <pages>" every 5 s (pages the guest kernel has
 *                          moved to other frames since they were printed).  With SCATTER
 *                          = N > 1, only every N-th page of the hot mapping is hot (a scattered
 *                          hot set; the rest of it counts as cold).  Ends with "WL-DONE".
 *   churn HOT COLD CHURN PERIOD_S SECONDS
 *                          write COLD MiB once and leave it, then for SECONDS seconds touch HOT
 *                          MiB page by page and, every PERIOD_S seconds, map CHURN MiB, write
 *                          every page and unmap it at once ("WL-CHURN <s> <n>"): a guest that
 *                          keeps allocating and freeing memory, as a build or a batch job
 *                          does.  Prints "WL-FILLED" after the cold data, "WL-RATE <s>
 *                          <pages/s>" once a second and "WL-DONE" at the end.
 *   periodic MIB SECONDS P1 [P2 ...]
 *                          for each period Pi (seconds), map MIB and write every page once;
 *                          print where each set lies ("WL-PAGES p<Pi> <gpa hex> <pages>")
 *                          and "WL-PAGES-END"; then for SECONDS seconds touch every page of
 *                          set i once every Pi seconds, the pages' moments spread evenly over
 *                          the period (page j at j x Pi / n, plus whole periods), printing
 *                          "WL-RATE <s> <pages/s>" once a second and "WL-DONE" at the end: what
 *                          a sampling source sees of pages used every 1, 5 or 30 s.
 * Layout: one mmap per region, 4 KiB pages, one word per page written per touch (a touch is what
 * makes the page young; its content is not the point).  Exit status 0 unless a check failed or a
 * mapping could not be made.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE_BYTES 4096UL
#define MIB_BYTES  (1UL << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned char *map_mib(unsigned long mib)
{
	void *p =
	    mmap(NULL, mib * MIB_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("WL-ERROR mmap %lu MiB failed\n", mib);
		return NULL;
	}
	return p;
}

static void touch_all(unsigned char *p, unsigned long bytes)
{
	for (unsigned long off = 0; off < bytes; off += PAGE_BYTES)
		p[off] = (unsigned char)(off >> 12 | 1);
}

static int touchfree(unsigned long mib, unsigned long hold_s)
{
	unsigned char *p = map_mib(mib);

	if (!p)
		return 1;
	touch_all(p, mib * MIB_BYTES);
	printf("WL-TOUCHED %lu\n", mib);
	fflush(stdout);
	sleep((unsigned int)hold_s);
	munmap(p, mib * MIB_BYTES);
	printf("WL-FREED %lu\n", mib);
	fflush(stdout);
	sleep((unsigned int)(hold_s * 4));
	return 0;
}

static void fill_cold(uint64_t *p, unsigned long pages)
{
	for (unsigned long i = 0; i < pages; i++)
		for (unsigned long w = 0; w < PAGE_BYTES / 8; w++)
			p[i * (PAGE_BYTES / 8) + w] = i * 0x9e3779b97f4a7c15ULL;
}

static unsigned long check_cold(const uint64_t *p, unsigned long pages)
{
	unsigned long bad = 0;

	for (unsigned long i = 0; i < pages; i++)
		for (unsigned long w = 0; w < PAGE_BYTES / 8; w++)
			if (p[i * (PAGE_BYTES / 8) + w] != i * 0x9e3779b97f4a7c15ULL) {
				bad++;
				break;
			}
	return bad;
}

static int hold(unsigned long cold_mib, unsigned long seconds)
{
	unsigned long pages = cold_mib * MIB_BYTES / PAGE_BYTES;
	unsigned char *cold = map_mib(cold_mib);

	if (!cold)
		return 1;
	fill_cold((uint64_t *)cold, pages);
	printf("WL-FILLED hot 0 cold %lu cache 0\n", cold_mib);
	fflush(stdout);
	sleep((unsigned)seconds);
	unsigned long bad = check_cold((const uint64_t *)cold, pages);
	if (bad)
		printf("WL-COLD-BAD %lu\n", bad);
	else
		printf("WL-COLD-OK\n");
	return bad ? 1 : 0;
}

static int write_cache(unsigned long mib)
{
	static char buf[MIB_BYTES];
	FILE *f = fopen("/tmp/cache", "w");

	if (!f) {
		printf("WL-ERROR cannot write /tmp/cache\n");
		return -1;
	}
	memset(buf, 'c', sizeof(buf));
	for (unsigned long i = 0; i < mib; i++)
		fwrite(buf, 1, sizeof(buf), f);
	fclose(f);
	return 0;
}

/* A counter from /proc/vmstat (pswpin, pswpout: pages the guest swapped in and out so far;
 * 0 when unreadable). */
static unsigned long vmstat(const char *name)
{
	char line[128];
	size_t n = strlen(name);
	unsigned long out = 0;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ' ')
			out = strtoul(line + n + 1, NULL, 10);
	fclose(f);
	return out;
}

/* 4 KiB pages the balloon holds: nr_balloon_pages (6.15+), else inflations - deflations. */
static unsigned long balloon_pages(void)
{
	unsigned long n = vmstat("nr_balloon_pages"), in, out;

	if (n)
		return n;
	in = vmstat("balloon_inflate");
	out = vmstat("balloon_deflate");
	return in > out ? in - out : 0;
}

static int hotcold(unsigned long hot_mib, unsigned long cold_mib, unsigned long cache_mib,
		   unsigned long seconds, unsigned long grow_mib, unsigned long grow_at,
		   unsigned long grow_balloon_mib)
{
	unsigned long cold_pages = cold_mib * MIB_BYTES / PAGE_BYTES;
	unsigned long hot_pages = hot_mib * MIB_BYTES / PAGE_BYTES;
	/* The growth is mapped now and first touched at grow_at: untouched, it costs nothing. */
	unsigned char *cold = map_mib(cold_mib), *hot = map_mib(hot_mib + grow_mib);
	double t0, tsec, total = 0;
	unsigned long sec = 0, touched = 0, i = 0, balloon_mib = 0;
	unsigned long swpin0 = vmstat("pswpin"), mig0 = vmstat("pgmigrate_success");
	unsigned long swpout0 = vmstat("pswpout");
	int grow_now = 0;

	if (hot_pages == 0) {
		printf("WL-ERROR hotcold needs a hot set of at least 1 MiB\n");
		return 2;
	}
	if (!cold || !hot)
		return 1;
	fill_cold((uint64_t *)cold, cold_pages);
	if (cache_mib && write_cache(cache_mib))
		return 1;
	touch_all(hot, hot_mib * MIB_BYTES);
	printf("WL-FILLED hot %lu cold %lu cache %lu\n", hot_mib, cold_mib, cache_mib);
	fflush(stdout);
	t0 = tsec = now_s();
	while (sec < seconds) {
		if (grow_now) {
			double g0 = now_s();

			grow_now = 0;
			printf("WL-GROW %lu %lu balloon=%lu pswpin=%lu pswpout=%lu\n", sec,
			       grow_mib, balloon_mib, vmstat("pswpin"), vmstat("pswpout"));
			fflush(stdout);
			touch_all(hot + hot_mib * MIB_BYTES, grow_mib * MIB_BYTES);
			hot_pages += grow_mib * MIB_BYTES / PAGE_BYTES;
			grow_mib = 0;
			printf("WL-GROWN %.1f pswpin=%lu pswpout=%lu\n", now_s() - g0,
			       vmstat("pswpin"), vmstat("pswpout"));
			fflush(stdout);
		}
		hot[(i % hot_pages) * PAGE_BYTES + (i / hot_pages) % PAGE_BYTES]++;
		i++;
		touched++;
		if ((touched & 1023) == 0 && now_s() - tsec >= 1.0) {
			double t = now_s();

			unsigned long swpin = vmstat("pswpin"), mig = vmstat("pgmigrate_success");
			unsigned long swpout = vmstat("pswpout");

			sec++;
			/* The rate, and what the guest's kernel did to the workload's pages in the
			 * same second: swap-ins, and pages migrated (compaction moves pages, and
			 * each move costs the workload a TLB flush and a fault); and how much it
			 * swapped out (the guest's own reclaim, whoever asked for it). */
			printf("WL-RATE %lu %.0f swpin=%lu mig=%lu swpout=%lu\n", sec,
			       touched / (t - tsec), swpin - swpin0, mig - mig0, swpout - swpout0);
			swpin0 = swpin;
			mig0 = mig;
			swpout0 = swpout;
			fflush(stdout);
			total += touched;
			touched = 0;
			tsec = t;
			/* Once a second: is it time to grow? */
			if (grow_mib && sec >= grow_at) {
				balloon_mib = balloon_pages() * PAGE_BYTES / MIB_BYTES;
				grow_now = balloon_mib >= grow_balloon_mib || sec + 20 >= seconds;
			}
		}
	}
	/* The guest's swap-ins so far: the workload's refaults, before the check below reads
	 * every cold page back. */
	printf("WL-DONE %.0f pswpin=%lu\n", total / (now_s() - t0), vmstat("pswpin"));
	unsigned long bad = check_cold((uint64_t *)cold, cold_pages);
	if (bad)
		printf("WL-COLD-BAD %lu\n", bad);
	else
		printf("WL-COLD-OK\n");
	fflush(stdout);
	return bad ? 1 : 0;
}

/*
 * A checksummed page: words 0..510 follow from (page index, generation), so a page that
 * came back from swap with another page's content, stale content, or zeros is caught by the
 * exact compare; word 511 is an FNV-1a checksum of the others, so a flipped bit is caught
 * even where the pattern would not say which.  The pattern repeats within a page, so zram
 * compresses it through its normal path (it is not a "same-filled" page).
 */
#define WORDS (PAGE_BYTES / 8)

static uint64_t fnv(const uint64_t *w, unsigned long n)
{
	uint64_t h = 1469598103934665603ULL;

	for (unsigned long i = 0; i < n; i++) {
		h ^= w[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void page_write(uint64_t *w, uint64_t idx, uint8_t gen)
{
	for (unsigned long i = 0; i < WORDS - 1; i++)
		w[i] = idx << 16 | (uint64_t)gen << 8 | (i & 0x3f);
	w[WORDS - 1] = fnv(w, WORDS - 1);
}

static int page_ok(const uint64_t *w, uint64_t idx, uint8_t gen)
{
	for (unsigned long i = 0; i < WORDS - 1; i++)
		if (w[i] != (idx << 16 | (uint64_t)gen << 8 | (i & 0x3f)))
			return 0;
	return w[WORDS - 1] == fnv(w, WORDS - 1);
}

static int integrity(unsigned long mib, unsigned long seconds)
{
	unsigned long pages = mib * MIB_BYTES / PAGE_BYTES, bad_total = 0, pass = 0;
	unsigned char *p = map_mib(mib);
	uint8_t *gen = calloc(pages, 1);

	if (!p || !gen) {
		free(gen);
		return 1;
	}
	for (unsigned long i = 0; i < pages; i++)
		page_write((uint64_t *)(p + i * PAGE_BYTES), i, 0);
	printf("WL-FILLED %lu\n", mib);
	double end = now_s() + (double)seconds;
	while (now_s() < end) {
		unsigned long bad = 0;

		printf("WL-PASS-BEGIN %lu\n", pass);
		for (unsigned long i = 0; i < pages; i++)
			if (!page_ok((uint64_t *)(p + i * PAGE_BYTES), i, gen[i]))
				bad++;
		printf("WL-PASS %lu bad=%lu pages=%lu pswpout=%lu\n", pass, bad, pages,
		       vmstat("pswpout"));
		bad_total += bad;
		for (unsigned long i = pass % 8; i < pages; i += 8) {
			gen[i]++;
			page_write((uint64_t *)(p + i * PAGE_BYTES), i, gen[i]);
		}
		pass++;
	}
	printf("WL-INTEGRITY %lu %lu\n", pass, bad_total);
	free(gen);
	return bad_total ? 1 : 0;
}

/* Print the guest-physical runs of the pages i < n of p with i % step == 0 (rest = 0) or
 * != 0 (rest = 1), from /proc/self/pagemap: PFN in bits 0-54, present bit 63 (root only). */
/* The frame of each of n pages at p (0: not present), from /proc/self/pagemap, into out. */
static int read_pfns(const unsigned char *p, unsigned long n, uint64_t *out)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ssize_t want = (ssize_t)(n * 8);

	if (fd < 0)
		return -1;
	ssize_t got = pread(fd, out, (size_t)want, (off_t)((uintptr_t)p / PAGE_BYTES * 8));
	close(fd);
	if (got != want)
		return -1;
	for (unsigned long i = 0; i < n; i++)
		out[i] = (out[i] >> 63) ? out[i] & ((1ULL << 55) - 1) : 0;
	return 0;
}

/* Print where pages i of n (every step-th, or with rest the others) sit, from their frames
 * pfn[] (0: not present): one "WL-PAGES kind <gpa hex> <pages>" line per run of consecutive
 * frames. */
static void print_gpas(const char *kind, const uint64_t *pfn, unsigned long n, unsigned long step,
		       int rest)
{
	uint64_t run_start = 0, run_len = 0;

	for (unsigned long i = 0; i <= n; i++) {
		bool take = i < n && (step <= 1 || (rest ? i % step != 0 : i % step == 0));
		uint64_t f = take ? pfn[i] : 0;
		if (f && run_len && f == run_start + run_len) {
			run_len++;
			continue;
		}
		if (run_len)
			printf("WL-PAGES %s %llx %llu\n", kind,
			       (unsigned long long)run_start * PAGE_BYTES,
			       (unsigned long long)run_len);
		run_start = f;
		run_len = f ? 1 : 0;
	}
}

/* How many of n pages sit on another frame than in was (the guest kernel moved them). */
static unsigned long moved_pages(const unsigned char *p, unsigned long n, const uint64_t *was,
				 uint64_t *now)
{
	unsigned long moved = 0;

	if (read_pfns(p, n, now) < 0)
		return n;
	for (unsigned long i = 0; i < n; i++)
		moved += now[i] != was[i];
	return moved;
}

static int hotpages(unsigned long hot_mib, unsigned long cold_mib, unsigned long seconds,
		    unsigned long scatter)
{
	unsigned char *hot = map_mib(hot_mib), *cold = map_mib(cold_mib);
	unsigned long hot_pages = hot_mib * MIB_BYTES / PAGE_BYTES;
	unsigned long step = scatter > 1 ? scatter : 1;

	if (!hot || !cold)
		return 1;
	touch_all(hot, hot_mib * MIB_BYTES);
	touch_all(cold, cold_mib * MIB_BYTES);
	/* Where the pages are, printed now and kept, to say later if the guest kernel moved any
	 * (compaction, khugepaged): a moved page is no longer at the address printed. */
	unsigned long cold_pages = cold_mib * MIB_BYTES / PAGE_BYTES;
	uint64_t *was_hot = calloc(hot_pages, 8), *was_cold = calloc(cold_pages, 8);
	if (!was_hot || !was_cold || read_pfns(hot, hot_pages, was_hot) < 0 ||
	    read_pfns(cold, cold_pages, was_cold) < 0) {
		printf("WL-ERROR pagemap\n");
		free(was_hot);
		free(was_cold);
		return 1;
	}
	/* hot: pages i with i % step == 0; the rest of the hot mapping is cold */
	print_gpas("hot", was_hot, hot_pages, step, 0);
	if (step > 1)
		print_gpas("cold", was_hot, hot_pages, step, 1);
	print_gpas("cold", was_cold, cold_pages, 1, 0);
	printf("WL-PAGES-END\n");
	fflush(stdout);
	uint64_t *now = calloc(cold_pages > hot_pages ? cold_pages : hot_pages, 8);
	bool track = now != NULL;
	double t0 = now_s(), next = t0 + 1, next_moved = t0 + 5;
	unsigned long done = 0, round = 0;
	while (now_s() - t0 < (double)seconds) {
		for (unsigned long i = 0; i < hot_pages; i += step)
			hot[i * PAGE_BYTES + (round % 64) * 8] = (unsigned char)round;
		done += (hot_pages + step - 1) / step;
		round++;
		double t = now_s();
		if (t >= next) {
			printf("WL-RATE %.0f %.0f\n", t - t0, done / (t - next + 1));
			fflush(stdout);
			done = 0;
			next = t + 1;
		}
		if (track && t >= next_moved) {
			printf("WL-MOVED %.0f hot %lu cold %lu\n", t - t0,
			       moved_pages(hot, hot_pages, was_hot, now),
			       moved_pages(cold, cold_pages, was_cold, now));
			fflush(stdout);
			next_moved = t + 5;
		}
	}
	free(was_hot);
	free(was_cold);
	free(now);
	printf("WL-DONE\n");
	return 0;
}

static int churn(unsigned long hot_mib, unsigned long cold_mib, unsigned long churn_mib,
		 unsigned long period_s, unsigned long seconds)
{
	unsigned long hot_pages = hot_mib * MIB_BYTES / PAGE_BYTES, i = 0, touched = 0, sec = 0;
	unsigned char *cold = map_mib(cold_mib), *hot = map_mib(hot_mib);
	unsigned long cycles = 0;
	double tsec;

	if (!cold || !hot || hot_pages == 0 || period_s == 0)
		return 1;
	touch_all(cold, cold_mib * MIB_BYTES);
	touch_all(hot, hot_mib * MIB_BYTES);
	printf("WL-FILLED hot %lu cold %lu\n", hot_mib, cold_mib);
	tsec = now_s();
	while (sec < seconds) {
		hot[(i % hot_pages) * PAGE_BYTES + (i / hot_pages) % PAGE_BYTES]++;
		i++;
		touched++;
		if ((touched & 1023) != 0 || now_s() - tsec < 1.0)
			continue;
		double t = now_s();
		sec++;
		printf("WL-RATE %lu %.0f\n", sec, touched / (t - tsec));
		touched = 0;
		tsec = t;
		if (sec % period_s == 0) {
			unsigned char *c = map_mib(churn_mib);
			if (!c)
				return 1;
			touch_all(c, churn_mib * MIB_BYTES);
			munmap(c, churn_mib * MIB_BYTES);
			printf("WL-CHURN %lu %lu\n", sec, ++cycles);
		}
	}
	printf("WL-DONE\n");
	return 0;
}

#define PERIODIC_SETS 4

static int periodic(unsigned long mib, unsigned long seconds, int nsets, char **periods)
{
	unsigned long n = mib * MIB_BYTES / PAGE_BYTES, touched = 0;
	unsigned char *set[PERIODIC_SETS];
	double period[PERIODIC_SETS];
	unsigned long next[PERIODIC_SETS] = {0}; /* touches done in each set */
	uint64_t *pfn = calloc(n, 8);
	char kind[32];

	if (!pfn || nsets < 1 || nsets > PERIODIC_SETS || n == 0) {
		free(pfn);
		return 1;
	}
	for (int i = 0; i < nsets; i++) {
		period[i] = strtod(periods[i], NULL);
		set[i] = map_mib(mib);
		if (!set[i] || !(period[i] > 0)) {
			free(pfn);
			return 1;
		}
		touch_all(set[i], mib * MIB_BYTES);
	}
	for (int i = 0; i < nsets; i++) {
		if (read_pfns(set[i], n, pfn) < 0) {
			printf("WL-ERROR pagemap\n");
			free(pfn);
			return 1;
		}
		snprintf(kind, sizeof(kind), "p%g", period[i]);
		print_gpas(kind, pfn, n, 1, 0);
	}
	printf("WL-PAGES-END\n");
	fflush(stdout);
	free(pfn);
	double t0 = now_s(), next_rate = t0 + 1;
	for (;;) {
		double t = now_s() - t0;
		if (t >= (double)seconds)
			break;
		/* every touch due by now: touch k of set i is page k % n at k x Pi / n */
		for (int i = 0; i < nsets; i++) {
			unsigned long due = (unsigned long)(t * (double)n / period[i]);
			for (; next[i] < due; next[i]++, touched++)
				set[i][(next[i] % n) * PAGE_BYTES + (next[i] / n % 64) * 8]++;
		}
		if (t0 + t >= next_rate) {
			printf("WL-RATE %.0f %lu\n", t, touched);
			fflush(stdout);
			touched = 0;
			next_rate += 1;
		}
		usleep(2000);
	}
	printf("WL-DONE\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "touchfree"))
		return touchfree(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0));
	if (argc >= 6 && argc <= 9 && argc != 7 && !strcmp(argv[1], "hotcold"))
		return hotcold(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0),
			       strtoul(argv[4], NULL, 0), strtoul(argv[5], NULL, 0),
			       argc >= 8 ? strtoul(argv[6], NULL, 0) : 0,
			       argc >= 8 ? strtoul(argv[7], NULL, 0) : 0,
			       argc == 9 ? strtoul(argv[8], NULL, 0) : 0);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "hotpages"))
		return hotpages(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0),
				strtoul(argv[4], NULL, 0),
				argc == 6 ? strtoul(argv[5], NULL, 0) : 1);
	if (argc == 7 && !strcmp(argv[1], "churn"))
		return churn(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0),
			     strtoul(argv[4], NULL, 0), strtoul(argv[5], NULL, 0),
			     strtoul(argv[6], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0));
	if (argc >= 5 && argc <= 4 + PERIODIC_SETS && !strcmp(argv[1], "periodic"))
		return periodic(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0), argc - 4,
				argv + 4);
	if (argc == 4 && !strcmp(argv[1], "integrity"))
		return integrity(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0));
	fprintf(stderr,
		"usage: memload touchfree MIB HOLD_S | hotcold HOT COLD CACHE SECONDS "
		"[GROW_MIB GROW_AT_S [GROW_BALLOON_MIB]] | "
		"integrity MIB SECONDS | hotpages HOT COLD SECONDS [SCATTER] | "
		"churn HOT COLD CHURN PERIOD_S SECONDS | periodic MIB SECONDS P1 [P2 ...] | "
		"hold COLD SECONDS\n");
	return 2;
}
