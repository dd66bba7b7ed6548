// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kvserve.c: the e2e guest's key-value server (static, runs as the guest's /init child).
 *
 *   kvserve TOTAL_MIB HOT_PERCENT LOAD_S SERVE_S [GETS_PER_S [text]]
 *
 * A server's shape, as memtided met it on a real guest: its values are loaded while
 * memtided already runs, the hot ones first (what a server writes first is often what it
 * reads most: its index, its recent keys), and afterwards only HOT_PERCENT of them are read.
 *   load   TOTAL_MIB of 4 KiB values, written over LOAD_S seconds (paced), hot ones first;
 *          "WL-KV-LOADING", then "WL-KV-LOADED <seconds>";
 *   serve  for SERVE_S seconds, requests read one random hot value each (eight words of it,
 *          summed so the reads are not optimised away); the requests done in every 100 ms
 *          window are counted.  Once a second: "WL-KV <second> <requests/s> <the slowest
 *          100 ms window of that second, as requests/s>".  At the end:
 *          "WL-KV-DONE median=<requests/s> longest_dip_ms=<ms> dips=<n> windows=<n>
 *          longest_under_run_median_ms=<ms> pswpin=<pages> pswpout=<pages>
 *          pgmigrate=<pages> compact_scanned=<pages>" (the guest kernel's page migrations:
 *          compaction reads the pages it moves, cold ones too).
 * A dip is a fall: a run of consecutive 100 ms windows under half the median of the 30 s
 * of windows before the run began (the first second has no baseline and starts none).
 * longest_under_run_median_ms is the longest run under half the whole run's median, the
 * measure this used before: it is no baseline when the rate changes for good.  On scenario
 * 9's guest the server read 2.2 M values/s before memtided took anything and 5-10 M/s
 * after (5 Dec 2026), and the first two minutes, where nothing had happened yet, read as an
 * 11.6 s "dip" against the median of the whole run.
 * GETS_PER_S (0 or left out: as fast as the guest goes) paces the requests, in batches of 64
 * on a clock: a server whose clients ask at that rate, each hot value read GETS_PER_S /
 * (hot values) times a second; a request late on the clock is made at once, so a stall
 * shows as slow windows and then fast ones.
 * Values: each 4 KiB value holds a 64-byte random block repeated (zram compresses it about
 * 30x, so cold values cost the host little once reclaimed), or with "text" a record as a
 * JSON object would hold it: keys, words from a vocabulary of 1024 made-up words, numbers,
 * a few sentences, about 2-3x compressible (what a server of text or JSON keeps; the
 * scenario measures the host's zram ratio).  Exit status 0 unless a mapping could not be
 * made.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define VALUE_BYTES          4096UL
#define MIB_BYTES            (1UL << 20)
#define WINDOW_MS            100
#define BASELINE_WINDOWS     (30000 / WINDOW_MS) /* a dip is against the 30 s before it */
#define BASELINE_MIN_WINDOWS (1000 / WINDOW_MS)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static unsigned long vmstat(const char *name)
{
	char line[128];
	unsigned long v = 0;
	size_t n = strlen(name);
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ' ')
			v = strtoul(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

/* A made-up word for index i: two to four syllables. */
static const char *const syl[16] = {"ka", "lo", "mi", "ren", "sa", "to", "vel", "quo",
				    "di", "an", "es", "or",  "ul", "py", "zen", "bra"};

static size_t word(char *out, unsigned i)
{
	size_t n = 0;
	unsigned parts = 2 + i % 3;

	for (unsigned k = 0; k < parts; k++, i /= 16)
		n += (size_t)sprintf(out + n, "%s", syl[(i + k * 7) % 16]);
	return n;
}

/* Records of keys, words (of 1024), numbers, until len bytes are full. */
static void write_records(char *v, size_t len, unsigned long index)
{
	static const char *const keys[] = {"user", "city", "tag", "note", "title", "owner"};
	size_t n = 0;

	while (n + 512 < len) { /* a record takes at most ~450 bytes */
		n += (size_t)sprintf(v + n, "{\"id\":%lu,\"score\":%u,", index++,
				     (unsigned)(rnd() % 100000));
		for (int k = 0; k < 6; k++) {
			n += (size_t)sprintf(v + n, "\"%s\":\"", keys[k]);
			for (int w = 0; w < 1 + (int)(rnd() % 4); w++) {
				if (w)
					v[n++] = ' ';
				n += word(v + n, (unsigned)(rnd() % 1024));
			}
			n += (size_t)sprintf(v + n, "\",");
		}
		n += (size_t)sprintf(v + n, "\"at\":%u}\n", (unsigned)(rnd() % 2000000000));
	}
	memset(v + n, ' ', len - n);
}

/* A value of text: a 4 KiB slice of a pool of records made once (generating each value
 * under TCG took minutes for 600 MiB), its first bytes the value's own number.  zram
 * compresses each page alone, so a slice compresses as the records do. */
#define TEXT_POOL_BYTES (256UL << 10)
static char *text_pool;

static void write_text(char *v, unsigned long index)
{
	unsigned long off = (rnd() % (TEXT_POOL_BYTES - VALUE_BYTES)) & ~7UL;

	memcpy(v, text_pool + off, VALUE_BYTES);
	memcpy(v, &index, sizeof(index));
}

static void write_value(uint64_t *v)
{
	uint64_t block[8];

	for (int i = 0; i < 8; i++)
		block[i] = rnd();
	for (unsigned long w = 0; w < VALUE_BYTES / 8; w++)
		v[w] = block[w % 8];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The median of n windows (scratch holds n). */
static uint32_t median_of(const uint32_t *v, unsigned long n, uint32_t *scratch)
{
	memcpy(scratch, v, n * sizeof(*v));
	qsort(scratch, n, sizeof(*scratch), cmp_u32);
	return scratch[n / 2];
}

int main(int argc, char **argv)
{
	if (argc < 5 || argc > 7 || (argc == 7 && strcmp(argv[6], "text") != 0)) {
		fprintf(
		    stderr,
		    "usage: kvserve TOTAL_MIB HOT_PERCENT LOAD_S SERVE_S [GETS_PER_S [text]]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	unsigned long total_mib = strtoul(argv[1], NULL, 0), hot_pct = strtoul(argv[2], NULL, 0);
	double load_s = strtod(argv[3], NULL), serve_s = strtod(argv[4], NULL);
	double gets_per_s = argc >= 6 ? strtod(argv[5], NULL) : 0;
	int text = argc == 7;

	if (text) {
		text_pool = malloc(TEXT_POOL_BYTES);
		if (!text_pool)
			return 1;
		write_records(text_pool, TEXT_POOL_BYTES, 0);
	}
	unsigned long nr = total_mib * MIB_BYTES / VALUE_BYTES;
	unsigned long nr_hot = nr * hot_pct / 100;
	uint64_t *vals = mmap(NULL, nr * VALUE_BYTES, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (vals == MAP_FAILED || nr_hot == 0) {
		printf("WL-ERROR cannot map %lu MiB (or no hot values)\n", total_mib);
		return 1;
	}
	/* Load, hot values first, paced so it takes load_s. */
	printf("WL-KV-LOADING %lu %lu %s\n", total_mib, nr_hot * VALUE_BYTES / MIB_BYTES,
	       text ? "text" : "blocks");
	double t0 = now_s();
	for (unsigned long i = 0; i < nr; i++) {
		if (text)
			write_text((char *)(vals + i * (VALUE_BYTES / 8)), i);
		else
			write_value(vals + i * (VALUE_BYTES / 8));
		if ((i & 255) == 0) {
			double due = t0 + load_s * (double)i / (double)nr;
			while (now_s() < due) {
				struct timespec d = {0, 2000000};
				nanosleep(&d, NULL);
			}
		}
	}
	printf("WL-KV-LOADED %.1f\n", now_s() - t0);

	/* Serve. */
	unsigned long nwin = (unsigned long)(serve_s * 1000 / WINDOW_MS) + 1, w = 0;
	uint32_t *win = calloc(nwin, sizeof(*win));
	uint64_t sink = 0, in_win = 0, in_sec = 0;
	uint32_t slowest = UINT32_MAX;
	double start = now_s(), win_end = start + WINDOW_MS / 1000.0, sec_end = start + 1.0;
	int sec = 0;

	if (!win)
		return 1;
	uint64_t batches = 0;
	while (w < nwin) {
		if (gets_per_s > 0) { /* the clients' clock: batch b of 64 is due at 64 b / rate */
			double due = start + (double)(batches * 64) / gets_per_s;
			while (now_s() < due) {
				struct timespec d = {0, 500000};
				nanosleep(&d, NULL);
			}
		}
		batches++;
		for (int k = 0; k < 64; k++) {
			const uint64_t *v = vals + (rnd() % nr_hot) * (VALUE_BYTES / 8);
			unsigned long off = (rnd() % (VALUE_BYTES / 64)) * 8;
			for (int j = 0; j < 8; j++)
				sink += v[off + (unsigned long)j];
			in_win++;
		}
		double t = now_s();
		while (t >= win_end && w < nwin) {
			win[w] = (uint32_t)in_win;
			if (in_win < slowest)
				slowest = (uint32_t)in_win;
			in_sec += in_win;
			in_win = 0;
			w++;
			win_end += WINDOW_MS / 1000.0;
		}
		if (t >= sec_end) {
			printf("WL-KV %d %lu %lu\n", ++sec, (unsigned long)in_sec,
			       (unsigned long)slowest * (1000 / WINDOW_MS));
			in_sec = 0;
			slowest = UINT32_MAX;
			sec_end += 1.0;
		}
		if (t - start > serve_s + 5)
			break; /* the host stole the CPU for long: stop, the windows say so */
	}
	/* The median window, the longest run of windows under half of it, and the dips. */
	uint32_t *sorted = malloc(w * sizeof(*sorted));
	if (!sorted || w == 0)
		return 1;
	memcpy(sorted, win, w * sizeof(*sorted));
	qsort(sorted, w, sizeof(*sorted), cmp_u32);
	uint32_t median = sorted[w / 2];
	unsigned long run = 0, longest_flat = 0, longest = 0, dips = 0;
	for (unsigned long i = 0; i < w; i++) {
		run = win[i] * 2 < median ? run + 1 : 0;
		if (run > longest_flat)
			longest_flat = run;
	}
	for (unsigned long i = BASELINE_MIN_WINDOWS; i < w;) {
		unsigned long from = i > BASELINE_WINDOWS ? i - BASELINE_WINDOWS : 0, j = i;
		uint32_t base = median_of(win + from, i - from, sorted);

		while (j < w && win[j] * 2 < base)
			j++;
		if (j == i) {
			i++;
			continue;
		}
		dips++;
		if (j - i > longest)
			longest = j - i;
		i = j;
	}
	printf("WL-KV-DONE median=%lu longest_dip_ms=%lu dips=%lu windows=%lu "
	       "longest_under_run_median_ms=%lu pswpin=%lu "
	       "pswpout=%lu pgmigrate=%lu compact_scanned=%lu sink=%llu\n",
	       (unsigned long)median * (1000 / WINDOW_MS), longest * WINDOW_MS, dips, w,
	       longest_flat * WINDOW_MS, vmstat("pswpin"), vmstat("pswpout"),
	       vmstat("pgmigrate_success"), vmstat("compact_migrate_scanned"),
	       (unsigned long long)(sink & 1));
	free(sorted);
	free(win);
	return 0;
}
