// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pageload.c: the e2e guest's workload for host-side eviction (scenario 9, pageout).
 *
 *   pageload HOT_MIB COLD_MIB [repeat|text|json|random] [FINE_MS]
 *
 * Fills COLD_MIB of anonymous memory once with checksummed pages, then touches HOT_MIB page
 * by page for as long as it runs (one word written per page: the hot set the host must never
 * evict), printing "WL-RATE <second> <hot pages/s>" on the console once a second.  The cold
 * pages hold, per 4 KiB page: its index, its generation, a body, and an FNV-1a checksum of
 * the rest; the body is a repeated 8-byte value ("repeat": compresses as cold heap usually
 * does, like memload's cold data), 1 KiB of pseudo-random bytes and zeros ("text": about
 * 3.5x with lzo-rle, for a harder pool), JSON-like records of words and numbers drawn at
 * random ("json": what a service's cold heap of parsed requests or cached documents holds;
 * 2-3x with lzo-rle and lz4), or pseudo-random bytes throughout ("random": encrypted or
 * already compressed data, which no compressor shrinks).  With FINE_MS, the hot rate is
 * also printed every FINE_MS milliseconds ("WL-FINE <ms since start> <hot pages/s>"), so
 * that a dip shorter than a second can be seen.
 *
 * The host drives it through a virtio-serial port named org.memtide.test.0 (found through
 * /sys/class/virtio-ports, as the agent finds its own), one command a line, one answer each:
 *   plan N     choose the next N cold pages not touched since the last verify, in runs of 64
 *              contiguous pages spread over the region by a stride (so that the guest's own
 *              page-table pages, which its MMU reads on the way and which were cold too, are
 *              few beside them), and answer their guest-physical addresses, read from
 *              /proc/self/pagemap: "plan N" then N lines of hex GPAs then "end".  Nothing is
 *              touched yet, so the host can look at where those pages are first.
 *   go         first touch of the planned pages (one read each) and a check of their
 *              content: "done N bad=B".
 *   verify     read and check every cold page, then rewrite one page in eight with the next
 *              generation (dirty pages keep going through swap): "verified P bad=B pages=N".
 *   quit       "bye", and exit 0.
 * Lines on the console: "WL-READY hot=H cold=C port=/dev/vportNpM", "WL-RATE ...",
 * "WL-ERROR ..." (then exit 1).  The hot loop checks the port between slices of 2048 pages,
 * so a command waits at most one slice.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE      4096UL
#define WORDS     (PAGE / 8)
#define MIB       (1UL << 20)
#define PORT_NAME "org.memtide.test.0"
#define SLICE     2048
#define PLAN_RUN  64 /* pages planned together */

static unsigned char *hot, *cold;
static unsigned long hot_pages, cold_pages;
static uint32_t *gen;          /* per cold page */
static unsigned long *planned; /* page indices of the last plan */
static unsigned long nr_planned;
static unsigned long cursor;   /* next page of the spread to plan */
static unsigned char *touched; /* per cold page: planned since the last verify */
enum body { BODY_REPEAT, BODY_TEXT, BODY_JSON, BODY_RANDOM };
static enum body body = BODY_REPEAT;
static const char *const body_names[] = {"repeat", "text", "json", "random"};
static int port = -1;
static unsigned fine_ms; /* 0: no WL-FINE lines */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static uint64_t fnv(const uint64_t *w, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ w[i]) * 1099511628211ULL;
	return h;
}

/* JSON-like records, as a service's cold heap holds them: keys and words from a small
 * vocabulary, numbers and identifiers drawn at random (len bytes from seed s). */
static void fill_json(char *out, size_t len, uint64_t s)
{
	static const char *const keys[] = {"id",    "user", "name",   "email", "created", "status",
					   "score", "tags", "region", "items", "price",   "note"};
	static const char *const words[] = {
	    "alpha",   "bravo",  "charlie", "delta",    "echo",     "foxtrot", "golf",
	    "hotel",   "india",  "juliet",  "kilo",     "lima",     "active",  "pending",
	    "closed",  "europe", "asia",    "americas", "premium",  "basic",   "trial",
	    "shipped", "return", "review",  "the",      "order",    "arrived", "late",
	    "and",     "was",    "not",     "as",       "described"};
	size_t n = 0;

	while (n < len) {
		char rec[160];
		int r = 0;
		r += snprintf(rec + r, sizeof(rec) - (size_t)r, "{");
		for (unsigned f = 0; f < 4 && r < 120; f++) {
			s = mix(s);
			const char *k = keys[s % (sizeof(keys) / sizeof(keys[0]))];
			uint64_t v = mix(s);
			switch (v % 3) {
			case 0:
				r += snprintf(rec + r, sizeof(rec) - (size_t)r, "\"%s\":%llu,", k,
					      (unsigned long long)(v >> 8) % 10000000ULL);
				break;
			case 1:
				r += snprintf(
				    rec + r, sizeof(rec) - (size_t)r, "\"%s\":\"%s %s\",", k,
				    words[(v >> 8) % (sizeof(words) / sizeof(words[0]))],
				    words[(v >> 20) % (sizeof(words) / sizeof(words[0]))]);
				break;
			default:
				r +=
				    snprintf(rec + r, sizeof(rec) - (size_t)r, "\"%s\":\"%08llx\",",
					     k, (unsigned long long)(v >> 16) & 0xffffffffULL);
			}
		}
		r += snprintf(rec + r - 1, sizeof(rec) - (size_t)r + 1, "}\n") - 1;
		for (int j = 0; j < r && n < len; j++)
			out[n++] = rec[j];
	}
}

/* The exact content of cold page i at generation g. */
static void fill_page(uint64_t *w, unsigned long i, uint32_t g)
{
	w[0] = 0x6d656d7469646530ULL ^ i;
	w[1] = g;
	if (body == BODY_TEXT) {
		uint64_t s = mix(i * 2654435761ULL + g);
		for (size_t k = 2; k < WORDS - 1; k++)
			w[k] = k < 2 + 128 ? (s = mix(s)) : 0;
	} else if (body == BODY_RANDOM) {
		uint64_t s = mix(i * 2654435761ULL + g + 1);
		for (size_t k = 2; k < WORDS - 1; k++)
			w[k] = s = mix(s);
	} else if (body == BODY_JSON) {
		fill_json((char *)&w[2], (WORDS - 3) * 8, mix(i * 2654435761ULL + g + 2));
	} else {
		uint64_t v = mix(i ^ ((uint64_t)g << 40));
		for (size_t k = 2; k < WORDS - 1; k++)
			w[k] = v;
	}
	w[WORDS - 1] = fnv(w, WORDS - 1);
}

static bool check_page(unsigned long i)
{
	uint64_t want[WORDS];
	fill_page(want, i, gen[i]);
	return memcmp(cold + i * PAGE, want, PAGE) == 0;
}

static int find_port(void)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *e;
	char path[300], name[64];

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		bool ok = fgets(name, sizeof(name), f) &&
			  strncmp(name, PORT_NAME, strlen(PORT_NAME)) == 0;
		fclose(f);
		if (ok) {
			snprintf(path, sizeof(path), "/dev/%s", e->d_name);
			closedir(d);
			printf("WL-PORT %s\n", path);
			return open(path, O_RDWR | O_NONBLOCK);
		}
	}
	closedir(d);
	return -1;
}

/* Write all of buf to the port (it is non-blocking: wait for room). */
static void port_write(const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(port, buf, len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {.fd = port, .events = POLLOUT};
			poll(&p, 1, 1000);
			continue;
		}
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void port_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void port_printf(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		port_write(buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Guest-physical address of cold page i, from /proc/self/pagemap (0: not present). */
static uint64_t gpa_of(int pm, unsigned long i)
{
	uint64_t e = 0;
	uintptr_t va = (uintptr_t)(cold + i * PAGE);
	if (pread(pm, &e, sizeof(e), (off_t)(va / PAGE * 8)) != sizeof(e) || !(e >> 63))
		return 0;
	return (e & ((1ULL << 55) - 1)) * PAGE;
}

static void cmd_plan(unsigned long n)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	unsigned long chunks = cold_pages / PLAN_RUN;
	/* The spread: a stride coprime with the number of runs visits each run once. */
	unsigned long stride = 7919;
	char line[32];

	while (chunks % stride == 0)
		stride += 2;
	nr_planned = 0;
	port_printf("plan %lu\n", n);
	for (unsigned long tries = 0; nr_planned < n && tries < chunks; tries++) {
		unsigned long c = (cursor++ * stride) % chunks;
		for (unsigned long k = 0; k < PLAN_RUN && nr_planned < n; k++) {
			unsigned long i = c * PLAN_RUN + k;
			if (touched[i])
				continue;
			touched[i] = 1;
			planned[nr_planned++] = i;
			int len = snprintf(line, sizeof(line), "%llx\n",
					   (unsigned long long)gpa_of(pm, i));
			port_write(line, (size_t)len);
		}
	}
	if (pm >= 0)
		close(pm);
	port_printf("end\n");
}

static void cmd_go(void)
{
	unsigned long bad = 0;
	volatile uint64_t sink = 0;

	for (unsigned long k = 0; k < nr_planned; k++)
		sink += *(volatile uint64_t *)(cold + planned[k] * PAGE); /* the first touch */
	for (unsigned long k = 0; k < nr_planned; k++)
		bad += !check_page(planned[k]);
	(void)sink;
	port_printf("done %lu bad=%lu\n", nr_planned, bad);
}

static void cmd_verify(void)
{
	static unsigned long passes;
	unsigned long bad = 0;

	for (unsigned long i = 0; i < cold_pages; i++)
		bad += !check_page(i);
	for (unsigned long i = passes % 8; i < cold_pages; i += 8) {
		gen[i]++;
		fill_page((uint64_t *)(cold + i * PAGE), i, gen[i]);
	}
	memset(touched, 0, cold_pages);
	cursor = 0;
	passes++;
	port_printf("verified %lu bad=%lu pages=%lu\n", passes, bad, cold_pages);
}

/* Serve one command if a whole line is waiting.  Returns 1 on quit. */
static int serve(void)
{
	static char buf[256];
	static size_t len;
	ssize_t n = read(port, buf + len, sizeof(buf) - 1 - len);

	if (n > 0)
		len += (size_t)n;
	char *nl = memchr(buf, '\n', len);
	if (!nl)
		return len == sizeof(buf) - 1 ? (len = 0, 0) : 0;
	*nl = '\0';
	int quit = 0;
	char *end = NULL;
	unsigned long arg = strncmp(buf, "plan ", 5) == 0 ? strtoul(buf + 5, &end, 10) : 0;
	if (end && end != buf + 5 && !*end && arg <= cold_pages)
		cmd_plan(arg);
	else if (strcmp(buf, "go") == 0)
		cmd_go();
	else if (strcmp(buf, "verify") == 0)
		cmd_verify();
	else if (strcmp(buf, "quit") == 0) {
		port_printf("bye\n");
		quit = 1;
	} else
		port_printf("error unknown command '%.32s'\n", buf);
	size_t used = (size_t)(nl - buf) + 1;
	memmove(buf, buf + used, len - used);
	len -= used;
	return quit;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: pageload HOT_MIB COLD_MIB [repeat|text|json|random] "
				"[FINE_MS]\n");
		return 2;
	}
	hot_pages = strtoul(argv[1], NULL, 10) * MIB / PAGE;
	cold_pages = strtoul(argv[2], NULL, 10) * MIB / PAGE;
	for (unsigned b = 0; argc > 3 && b < sizeof(body_names) / sizeof(body_names[0]); b++)
		if (strcmp(argv[3], body_names[b]) == 0)
			body = (enum body)b;
	fine_ms = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	hot = mmap(NULL, hot_pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	cold = mmap(NULL, cold_pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	gen = calloc(cold_pages, sizeof(*gen));
	planned = calloc(cold_pages, sizeof(*planned));
	touched = calloc(cold_pages, 1);
	if (hot == MAP_FAILED || cold == MAP_FAILED || !gen || !planned || !touched) {
		printf("WL-ERROR cannot map %s MiB hot and %s MiB cold\n", argv[1], argv[2]);
		return 1;
	}
	for (unsigned long i = 0; i < cold_pages; i++)
		fill_page((uint64_t *)(cold + i * PAGE), i, 0);
	memset(hot, 1, hot_pages * PAGE);
	port = find_port();
	if (port < 0) {
		printf("WL-ERROR no virtio-serial port named %s\n", PORT_NAME);
		return 1;
	}
	printf("WL-READY hot=%s cold=%s body=%s\n", argv[1], argv[2], body_names[body]);
	double t0 = now_s(), last = t0, fine_last = t0;
	unsigned long pages = 0, p = 0, fine_pages = 0;
	for (;;) {
		for (unsigned long k = 0; k < SLICE; k++) {
			hot[p * PAGE + (pages & (PAGE - 8))] = (unsigned char)pages;
			p = p + 1 == hot_pages ? 0 : p + 1;
			pages++;
		}
		fine_pages += SLICE;
		if (serve())
			break;
		double t = now_s();
		if (fine_ms && (t - fine_last) * 1000.0 >= fine_ms) {
			printf("WL-FINE %.0f %.0f\n", (t - t0) * 1000.0,
			       fine_pages / (t - fine_last));
			fine_pages = 0;
			fine_last = t;
		}
		if (t - last >= 1.0) {
			printf("WL-RATE %.0f %.0f\n", t - t0, pages / (t - last));
			pages = 0;
			last = t;
		}
	}
	return 0;
}
