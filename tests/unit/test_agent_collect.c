// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_agent_collect.c - memtide-agent's collectors, config and reclaim on this machine.
 *
 * The collectors read this machine's real /proc and are checked against what the kernel
 * says through other doors (sysinfo(2), uname(2), getpagesize()).  The MGLRU parser and the
 * fold are checked on text in the kernel's documented lru_gen format, because this host's
 * kernel has no MGLRU (the e2e guest's has; the scenario there exercises the real file).
 * Real reclaim through cgroup v2 is in tests/integration/agent_cli.sh (it needs the
 * memory controller on the cgroup v2 root, which these machines lack, and skips saying so).
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
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"

static char *slurp(const char *path)
{
	char *buf = malloc(1 << 20);
	long n;

	assert_non_null(buf);
	n = agent_read_file(path, buf, 1 << 20);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void test_meminfo_matches_sysinfo(void **state)
{
	struct proto_stats st;
	struct sysinfo si;
	char *text = slurp("/proc/meminfo");
	uint64_t total;

	(void)state;
	assert_non_null(text);
	memset(&st, 0, sizeof(st));
	assert_int_equal(agent_parse_meminfo(text, &st), 0);
	assert_int_equal(sysinfo(&si), 0);
	total = (uint64_t)si.totalram * si.mem_unit;
	/* /proc/meminfo rounds to KiB */
	assert_true(st.mem_total_bytes <= total && total - st.mem_total_bytes < 1024);
	assert_true(st.mem_free_bytes <= st.mem_total_bytes);
	assert_true(st.mem_available_bytes > 0);
	assert_true(st.mem_available_bytes <= st.mem_total_bytes);
	assert_true(st.cached_bytes < st.mem_total_bytes);
	assert_true(st.swap_free_bytes <= st.swap_total_bytes);
	assert_int_equal(st.swap_total_bytes, (uint64_t)si.totalswap * si.mem_unit / 1024 * 1024);
	printf("# MemTotal %llu MiB, MemAvailable %llu MiB\n",
	       (unsigned long long)st.mem_total_bytes >> 20,
	       (unsigned long long)st.mem_available_bytes >> 20);
	free(text);
}

static void test_vmstat_and_psi(void **state)
{
	struct proto_stats st, st2;
	uint32_t caps;
	char *text = slurp("/proc/vmstat");

	(void)state;
	assert_non_null(text);
	memset(&st, 0, sizeof(st));
	assert_int_equal(agent_parse_vmstat(text, &st), 0);
	/* every process that ever started faulted its text in: a booted system has some */
	assert_true(st.pgmajfault > 0 || st.refault_file > 0 || st.pswpin == 0);
	free(text);
	assert_int_equal(agent_parse_vmstat("nr_free_pages 5\n", &st), -EINVAL);

	/* whole collection: counters never go backwards between two reads */
	assert_int_equal(agent_collect_stats(NULL, &st, &caps), 0);
	assert_true(caps & PROTO_CAP_STATS);
	assert_int_equal(agent_collect_stats(NULL, &st2, &caps), 0);
	assert_true(st2.pgmajfault >= st.pgmajfault);
	assert_true(st2.refault_file >= st.refault_file);
	assert_true(st2.mono_ms >= st.mono_ms);
	if (access("/proc/pressure/memory", R_OK) == 0) {
		assert_true(caps & PROTO_CAP_PSI);
		assert_true(st2.has_psi);
		assert_true(st2.psi.some_avg10 >= 0 && st2.psi.some_avg10 <= 100);
		assert_true(st2.psi.some_total_us >= st.psi.some_total_us);
		assert_true(st2.psi.full_total_us <= st2.psi.some_total_us);
	} else {
		assert_false(caps & PROTO_CAP_PSI);
	}
	{
		struct proto_psi psi;

		assert_int_equal(agent_parse_psi("some avg10=1.50 avg60=0.25 avg300=0.00 total=77\n"
						 "full avg10=0.50 avg60=0.00 avg300=0.00 total=7\n",
						 &psi),
				 0);
		assert_true(psi.some_avg10 == 1.5 && psi.some_avg60 == 0.25);
		assert_int_equal(psi.some_total_us, 77);
		assert_int_equal(psi.full_total_us, 7);
		assert_int_equal(agent_parse_psi("some avg10=150 avg60=0 avg300=0 total=1\n", &psi),
				 -EINVAL);
		assert_int_equal(agent_parse_psi("garbage", &psi), -EINVAL);
	}
}

static void test_iomem(void **state)
{
	struct proto_range r[PROTO_MAX_RAM_RANGES];
	struct sysinfo si;
	char *text = slurp("/proc/iomem");
	uint64_t sum = 0;
	int n;

	(void)state;
	assert_non_null(text);
	n = agent_parse_iomem(text, r, PROTO_MAX_RAM_RANGES);
	free(text);
	if (geteuid() != 0) {
		assert_int_equal(n, 0); /* non-root reads zeros: no RAM layout, by design */
		return;
	}
	assert_true(n > 0);
	assert_int_equal(sysinfo(&si), 0);
	for (int i = 0; i < n; i++) {
		sum += r[i].bytes;
		if (i)
			assert_true(r[i].start >= r[i - 1].start + r[i - 1].bytes);
	}
	/* the kernel's MemTotal is System RAM minus what it reserved for itself */
	assert_true(sum >= (uint64_t)si.totalram * si.mem_unit);
	printf("# %d System RAM ranges, %llu MiB\n", n, (unsigned long long)sum >> 20);

	n = agent_parse_iomem("00000000-00000000 : System RAM\n00000000-00000000 : System RAM\n", r,
			      PROTO_MAX_RAM_RANGES);
	assert_int_equal(n, 0);
	n = agent_parse_iomem("00001000-0009fbff : System RAM\n  00002000-00002fff : Kernel code\n"
			      "000a0000-000fffff : Reserved\n00100000-7ffdffff : System RAM\n",
			      r, PROTO_MAX_RAM_RANGES);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].start, 0x1000);
	assert_int_equal(r[0].bytes, 0x9f000 - 0x400);
	assert_int_equal(r[1].bytes, 0x7ffe0000 - 0x100000);
}

static void test_hello_encodes(void **state)
{
	struct proto_msg m;
	struct utsname u;
	uint8_t buf[PROTO_ENCODE_MAX_BYTES];
	size_t n;
	struct agent_config c;

	(void)state;
	agent_config_defaults(&c);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HELLO;
	m.id = 1;
	agent_collect_hello(&c, &m.u.hello);
	assert_int_equal(uname(&u), 0);
	assert_string_equal(m.u.hello.kernel, u.release);
	assert_int_equal(m.u.hello.page_size_bytes, (uint32_t)getpagesize());
	/* whatever this machine has, the hello is a valid message */
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &n, NULL), PROTO_OK);
	printf("# hello from this machine: %zu bytes, caps 0x%x\n", n, m.u.hello.caps);
}

/* lru_gen text in the documented format: two memcgs, node 0, four generations each. */
static const char lru_gen_text[] = "memcg     1 /\n"
				   "  node     0\n"
				   "           4      90000        100        200\n"
				   "           5      30000         10         20\n"
				   "           6       3000          1          2\n"
				   "           7        100       1000       2000\n"
				   "memcg     2 /system.slice\n"
				   "  node     0\n"
				   "          10      50000          5          5\n"
				   "          11          0          7          7\n";

static void test_lru_gen_parse_fold(void **state)
{
	struct agent_gen g[16];
	struct agent_lruvec v[4];
	struct proto_wss w;
	struct proto_msg m;
	const uint64_t edges[] = {0, 1000, 10000, 60000};
	int nv, n;
	bool more;

	(void)state;
	n = agent_lru_gen_parse(lru_gen_text, g, 16, v, 4, &nv, &more);
	assert_int_equal(n, 6);
	assert_int_equal(nv, 2);
	assert_false(more);
	assert_int_equal(v[0].memcg_id, 1);
	assert_int_equal(v[0].min_seq, 4);
	assert_int_equal(v[0].max_seq, 7);
	assert_int_equal(v[1].memcg_id, 2);
	assert_int_equal(v[1].max_seq, 11);
	assert_int_equal(g[0].age_ms, 90000);
	assert_int_equal(g[3].anon_pages, 1000);

	agent_wss_fold(g, n, true, edges, 4, 4096, &w);
	/* idle age of a generation = age of the next younger one in its lruvec:
	 *   memcg1 seq7: 0 (youngest) -> bin 0;  seq6: 100 -> bin 0;  seq5: 3000 -> bin 1;
	 *   seq4: 30000 -> bin 2;  memcg2 seq11: 0 -> bin 0;  seq10: 0 -> bin 0 */
	assert_int_equal(w.nr_bins, 4);
	assert_int_equal(w.bins[0].anon_bytes, (1000 + 1 + 7 + 5) * 4096ULL);
	assert_int_equal(w.bins[0].file_bytes, (2000 + 2 + 7 + 5) * 4096ULL);
	assert_int_equal(w.bins[1].anon_bytes, 10 * 4096ULL);
	assert_int_equal(w.bins[2].anon_bytes, 100 * 4096ULL);
	assert_int_equal(w.bins[3].anon_bytes, 0);
	assert_int_equal(w.nr_gens, 6);
	assert_true(w.gens_complete);
	for (uint32_t i = 1; i < w.nr_gens; i++)
		assert_true(w.gens[i].age_ms >= w.gens[i - 1].age_ms);
	/* it is a valid wss message */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_WSS;
	m.id = 1;
	m.u.wss = w;
	assert_int_equal(proto_validate(&m, NULL), PROTO_OK);

	/* no room: the rest is flagged, not overrun */
	n = agent_lru_gen_parse(lru_gen_text, g, 3, v, 1, &nv, &more);
	assert_int_equal(n, 3);
	assert_int_equal(nv, 1);
	assert_true(more);
	/* malformed */
	assert_int_equal(agent_lru_gen_parse("  node 0\n 1 2 3 4\n", g, 16, v, 4, &nv, &more),
			 -EINVAL);
	assert_int_equal(agent_lru_gen_parse("memcg 1 /\nbogus\n", g, 16, v, 4, &nv, &more),
			 -EINVAL);
	assert_int_equal(agent_lru_gen_parse("memcg 1 /\n 1 2 3 4\n", g, 16, v, 4, &nv, &more),
			 -EINVAL);
	/* this host: no MGLRU means no wss capability, not an error */
	if (access("/sys/kernel/mm/lru_gen/enabled", F_OK) != 0) {
		struct agent_config c;

		agent_config_defaults(&c);
		assert_false(agent_mglru_available(&c));
		assert_int_equal(agent_mglru_wss(&c, edges, 4, &w), -ENOENT);
	}
}

/* 64 characters: one more than port_name holds */
#define LONG_PORT_LINE "port = 0123456789012345678901234567890123456789012345678901234567890123\n"

/* Counts no kernel prints, but a parser must not wrap: 2^48 pages of 64 KiB is 2^64 bytes,
 * which wrapped to 0 and reported an empty working set (found by fuzz_agent_mglru). */
static void test_wss_fold_saturates(void **state)
{
	static const char text[] = "memcg 1 /\n node 0\n 7 0 281474976710656 281474976710656\n"
				   " 8 100 10 10\n";
	static const uint64_t edges[] = {0, 5000};
	struct agent_gen g[4];
	struct agent_lruvec v[2];
	struct proto_wss w;
	bool more;
	int nv, n;
	(void)state;

	n = agent_lru_gen_parse(text, g, 4, v, 2, &nv, &more);
	assert_int_equal(n, 2);
	agent_wss_fold(g, n, true, edges, 2, 65536, &w);
	assert_int_equal(w.nr_bins, 2);
	assert_int_equal(w.bins[0].anon_bytes, PROTO_BYTES_MAX);
	assert_int_equal(w.bins[0].file_bytes, PROTO_BYTES_MAX);
}

static void test_config_file(void **state)
{
	struct agent_config c;
	char path[] = "/tmp/memtide-agent-test-XXXXXX";
	char err[256];
	int fd = mkstemp(path);
	const char good[] = "# comment\n"
			    "transport = vsock\n"
			    "vsock_port = 9999\n"
			    "[agent]\n"
			    "report_interval_ms = 500\n"
			    "allow_drop_caches = yes\n"
			    "floor_bytes = 0x10000000\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, good, sizeof(good) - 1), (ssize_t)sizeof(good) - 1);
	close(fd);
	agent_config_defaults(&c);
	assert_int_equal(c.transport, AGENT_TR_AUTO);
	assert_string_equal(c.port_name, "org.memtide.agent.0");
	assert_int_equal(c.report_interval_ms, 2000);
	assert_int_equal(agent_config_load(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.transport, AGENT_TR_VSOCK);
	assert_int_equal(c.vsock_port, 9999);
	assert_int_equal(c.report_interval_ms, 500);
	assert_true(c.allow_drop_caches);
	assert_int_equal(c.floor_bytes, 256 << 20);

	/* each bad line: -EINVAL, the line named, the config untouched */
	{
		static const char *const bad[] = {
		    "repot_interval_ms = 5\n",
		    "report_interval_ms = 5\n",
		    "report_interval_ms = -1000\n",
		    "report_interval_ms = 1000x\n",
		    "allow_drop_caches = maybe\n",
		    "transport = carrier-pigeon\n",
		    "[other]\ntransport = unix\n",
		    "send_rate = nan\n",
		    LONG_PORT_LINE,
		    "no equals sign here\n",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct agent_config before = c;

			fd = open(path, O_WRONLY | O_TRUNC);
			assert_true(fd >= 0);
			assert_int_equal(write(fd, bad[i], strlen(bad[i])),
					 (ssize_t)strlen(bad[i]));
			close(fd);
			err[0] = '\0';
			assert_int_equal(agent_config_load(&c, path, err, sizeof(err)), -EINVAL);
			assert_non_null(strstr(err, path));
			assert_memory_equal(&before, &c, sizeof(c));
			printf("# -> %s\n", err);
		}
	}
	unlink(path);
	assert_int_equal(agent_config_load(&c, path, err, sizeof(err)), -ENOENT);
}

static void test_reclaim_floor_and_methods(void **state)
{
	struct agent_config c;
	struct proto_reclaim req = {32 << 20, PROTO_SCOPE_FILE, 2000, false};
	struct proto_reclaim_reply rep;
	struct proto_msg m;
	char root[AGENT_PATH_MAX];

	(void)state;
	agent_config_defaults(&c);
	/* a floor above MemAvailable: refused, nothing touched, and the reply says why */
	c.floor_bytes = PROTO_BYTES_MAX;
	agent_reclaim_run(&c, &req, &rep);
	assert_int_equal(rep.result, PROTO_RECLAIM_FLOOR);
	assert_int_equal(rep.nr_steps, 0);
	assert_int_equal(rep.floor_bytes, PROTO_BYTES_MAX);
	assert_non_null(strstr(rep.message, "floor"));
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM_REPLY;
	m.id = 1;
	rep.re = 1;
	m.u.reclaim_reply = rep;
	assert_int_equal(proto_validate(&m, NULL), PROTO_OK);
	/* floor = max(bytes, percent) */
	c.floor_bytes = 1 << 20;
	c.floor_percent = 10;
	assert_int_equal(agent_floor_bytes(&c, 1000ULL << 20), 100ULL << 20);
	c.floor_percent = 0;
	assert_int_equal(agent_floor_bytes(&c, 1000ULL << 20), 1 << 20);
	/* Reclaim runs niced (reclaim_nice) and the agent comes back to its own priority. */
	errno = 0;
	int prio = getpriority(PRIO_PROCESS, 0);
	assert_int_equal(errno, 0);
	c.floor_bytes = PROTO_BYTES_MAX;
	agent_reclaim_run(&c, &req, &rep);
	assert_int_equal(getpriority(PRIO_PROCESS, 0), prio);
	assert_int_equal(c.reclaim_nice, 10);
	/* ... and pauses after each second of work: chunks of 400 ms pause on the third (1.2 s
	 * built up), then count afresh; a chunk of 3 s pauses at once; pause 0 never pauses. */
	struct agent_reclaim_pace pace = {0};
	assert_int_equal(c.reclaim_pause_ms, 250);
	assert_int_equal(agent_reclaim_pace(&pace, 250, 400), 0);
	assert_int_equal(agent_reclaim_pace(&pace, 250, 400), 0);
	assert_int_equal(agent_reclaim_pace(&pace, 250, 400), 250);
	assert_int_equal(agent_reclaim_pace(&pace, 250, 400), 0);
	assert_int_equal(agent_reclaim_pace(&pace, 250, 3000), 250);
	assert_int_equal(agent_reclaim_pace(&pace, 0, 3000), 0);
	assert_int_equal(agent_reclaim_pace(&pace, 0, 3000), 0);

	/* cgroup v2 memory.reclaim is exercised for real by tests/integration/agent_cli.sh
	 * (`memtide-agent reclaim`), which skips with the reason where the controller is off */
	agent_config_defaults(&c);
	if (agent_cgroup2_root(&c, root, sizeof(root)) == 0)
		printf("# cgroup2 at %s, memory.reclaim %s\n", root,
		       agent_reclaim_caps(&c) & PROTO_CAP_RECLAIM_MEMCG ? "present" : "absent");
}

static void test_pagemap(void **state)
{
	struct agent_config c;
	struct proto_range r[PROTO_MAX_HINT_RANGES];
	struct agent_hint_req h;
	size_t len = 64 * 4096;
	uint8_t *buf;
	bool trunc;
	char err[160], line[96];
	int n;

	(void)state;
	agent_config_defaults(&c);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(buf != MAP_FAILED);
	/* touch every other page: 32 resident, 32 not */
	for (size_t i = 0; i < len; i += 2 * 4096)
		buf[i] = 1;
	n = agent_pagemap_ranges(&c, getpid(), (uintptr_t)buf, len, r, PROTO_MAX_HINT_RANGES,
				 &trunc);
	if (n == -EPERM) {
		/* cmocka prints "not ok # SKIP", which the runner counts as a failure: the
		 * reason goes to the log and the non-root behaviour is what is checked */
		munmap(buf, len);
		printf("# pagemap pfns read as 0 without CAP_SYS_ADMIN: -EPERM, as documented\n");
		assert_true(geteuid() != 0);
		return;
	}
	assert_true(n > 0);
	{
		uint64_t total = 0;

		for (int i = 0; i < n; i++) {
			total += r[i].bytes;
			assert_int_equal(r[i].start % 4096, 0);
			if (i)
				assert_true(r[i].start > r[i - 1].start + r[i - 1].bytes - 1);
		}
		assert_int_equal(total, 32 * 4096);
	}
	/* the request language */
	snprintf(line, sizeof(line), "hot %p %zu", (void *)buf, len);
	assert_int_equal(agent_hint_parse(&c, line, getpid(), getuid(), &h, err, sizeof(err)), 0);
	assert_int_equal(h.head.kind, PROTO_HINT_HOT);
	assert_int_equal(h.head.pid, (uint32_t)getpid());
	assert_int_equal(h.nr_ranges, (uint32_t)n);
	free(h.ranges);
	assert_int_equal(
	    agent_hint_parse(&c, "hot 0x1000", getpid(), getuid(), &h, err, sizeof(err)), -EINVAL);
	assert_int_equal(agent_hint_parse(&c, "need 0 5", getpid(), getuid(), &h, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(agent_hint_parse(&c, "cold 0x1000 4096 1 extra", getpid(), getuid(), &h,
					  err, sizeof(err)),
			 -EINVAL);
	/* another process's memory: only root or its owner may name it */
	assert_int_equal(
	    agent_hint_parse(&c, "cold 0x1000 4096 1", getpid(), 4242, &h, err, sizeof(err)),
	    -EPERM);
	/* unmapped memory: nothing resident */
	munmap(buf, len);
	snprintf(line, sizeof(line), "cold %p %zu", (void *)buf, len);
	assert_int_equal(agent_hint_parse(&c, line, getpid(), getuid(), &h, err, sizeof(err)),
			 -ENOENT);
}

/* The virtio-serial port lookup, on a directory tree shaped like a guest without udev.  No
 * virtio-serial device exists on this host (the e2e guest has the real one), so the port is
 * a FIFO standing in for /dev/vportNpM: the test says so here. */
static void test_virtio_port_lookup(void **state)
{
	struct agent_config c;
	char root[] = "/tmp/memtide-vport-XXXXXX", p[512], out[AGENT_PATH_MAX + 64];
	struct agent_transport_state used = {0};
	int fd;

	(void)state;
	assert_non_null(mkdtemp(root));
	agent_config_defaults(&c);
	snprintf(c.sys_root, sizeof(c.sys_root), "%s", root);
	assert_int_equal(agent_find_virtio_port(&c, out, sizeof(out)), -ENOENT);
	assert_int_equal(agent_transport_open(&c, &used), -ENOENT);

	snprintf(p, sizeof(p),
		 "mkdir -p %s/sys/class/virtio-ports/vport0p1 "
		 "%s/sys/class/virtio-ports/vport0p2 %s/dev && "
		 "echo org.qemu.guest_agent.0 > %s/sys/class/virtio-ports/vport0p1/name && "
		 "echo org.memtide.agent.0 > %s/sys/class/virtio-ports/vport0p2/name && "
		 "mkfifo %s/dev/vport0p2",
		 root, root, root, root, root, root);
	assert_int_equal(system(p), 0);
	assert_int_equal(agent_find_virtio_port(&c, out, sizeof(out)), 0);
	snprintf(p, sizeof(p), "%s/dev/vport0p2", root);
	assert_string_equal(out, p);
	fd = agent_transport_open(&c, &used);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);

	/* with udev's link present, it wins */
	snprintf(p, sizeof(p),
		 "mkdir -p %s/dev/virtio-ports && ln -s ../vport0p2 "
		 "%s/dev/virtio-ports/org.memtide.agent.0",
		 root, root);
	assert_int_equal(system(p), 0);
	assert_int_equal(agent_find_virtio_port(&c, out, sizeof(out)), 0);
	snprintf(p, sizeof(p), "%s/dev/virtio-ports/org.memtide.agent.0", root);
	assert_string_equal(out, p);

	/* another name finds nothing */
	snprintf(c.port_name, sizeof(c.port_name), "org.memtide.agent.1");
	assert_int_equal(agent_find_virtio_port(&c, out, sizeof(out)), -ENOENT);
	snprintf(p, sizeof(p), "rm -rf %s", root);
	assert_int_equal(system(p), 0);
}

/* MGLRU is turned on by default, only when it reads 0, and a missing file is an error the
 * caller logs (a stand-in sysfs under sys_root: the real file needs root and a 6.1+ kernel). */
static void test_mglru_enable(void **state)
{
	struct agent_config c;
	char root[] = "/tmp/memtide-lrugen-XXXXXX", p[512], f[AGENT_PATH_MAX + 64], buf[32];

	(void)state;
	assert_non_null(mkdtemp(root));
	agent_config_defaults(&c);
	assert_true(c.enable_mglru);
	snprintf(c.sys_root, sizeof(c.sys_root), "%s", root);
	assert_int_equal(agent_mglru_enable(&c), -ENOENT);

	snprintf(p, sizeof(p),
		 "mkdir -p %s/sys/kernel/mm/lru_gen && echo 0x0000 > "
		 "%s/sys/kernel/mm/lru_gen/enabled",
		 root, root);
	assert_int_equal(system(p), 0);
	snprintf(f, sizeof(f), "%s/sys/kernel/mm/lru_gen/enabled", root);
	assert_int_equal(agent_mglru_enable(&c), 1);
	assert_true(agent_read_file(f, buf, sizeof(buf)) > 0);
	assert_int_equal(buf[0], 'y');

	/* the administrator's own non-zero value (a subset of the components) stays */
	snprintf(p, sizeof(p), "echo 0x0001 > %s", f);
	assert_int_equal(system(p), 0);
	assert_int_equal(agent_mglru_enable(&c), 0);
	assert_true(agent_read_file(f, buf, sizeof(buf)) > 0);
	assert_int_equal(strtoul(buf, NULL, 0), 1);
	snprintf(p, sizeof(p), "rm -rf %s", root);
	assert_int_equal(system(p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_meminfo_matches_sysinfo),
	    cmocka_unit_test(test_vmstat_and_psi),
	    cmocka_unit_test(test_iomem),
	    cmocka_unit_test(test_hello_encodes),
	    cmocka_unit_test(test_lru_gen_parse_fold),
	    cmocka_unit_test(test_wss_fold_saturates),
	    cmocka_unit_test(test_config_file),
	    cmocka_unit_test(test_reclaim_floor_and_methods),
	    cmocka_unit_test(test_pagemap),
	    cmocka_unit_test(test_virtio_port_lookup),
	    cmocka_unit_test(test_mglru_enable),
	};

	agent_log_init(AGENT_WARN, "memtide-agent(test)");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
