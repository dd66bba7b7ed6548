// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtide-trace.c - record a memtide trace from a real process, or inspect one.
 *
 *   memtide-trace record [options] -o FILE -- COMMAND [ARGS...]
 *       runs COMMAND under `valgrind --tool=lackey --trace-mem=yes`, reading lackey's
 *       output through a pipe (it never touches the disk: a second of native run time is
 *       tens of millions of lines) and converting it (sim/lackey.c).
 *   memtide-trace convert [options] -o FILE [LACKEY_LOG]   the same from a saved log
 *   memtide-trace info FILE                                 validate and summarise
 *   memtide-trace ept [options] -o FILE TABLE
 *       records a live TCG guest through memtide's ept plugin table (host/access/
 *       ept_record.h): each epoch's pages are those whose accessed bit the guest set, the
 *       written ones those it made dirty; prints a JSON summary on stdout.
 *
 * The command's stdin is inherited; its stdout goes to /dev/null so it cannot interleave
 * with anything; valgrind writes lackey's records to the pipe (--log-fd).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ept_record.h"
#include "base/parse.h"
#include "sim.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: memtide-trace record [options] -o FILE -- COMMAND [ARGS...]\n"
		"       memtide-trace convert [options] -o FILE [LACKEY_LOG]   (stdin if none)\n"
		"       memtide-trace info FILE\n"
		"       memtide-trace ept [--epoch-ms MS] [--epochs N] [--window MS]\n"
		"                         [--random-phase] [--ram SIZE] [--name NAME]\n"
		"                         -o FILE TABLE\n"
		"options:\n"
		"  -o, --output FILE        trace to write\n"
		"  --epoch-accesses N       memory accesses per epoch (default 100000)\n"
		"  --epoch-ms MS            virtual time per epoch (default 1000)\n"
		"  --max-accesses N         stop after N accesses (default 0: run to the end)\n"
		"  --no-ifetch              leave instruction fetches out\n"
		"  --name NAME              source name stored in the trace (default: command)\n"
		"  -h, --help               this text\n"
		"Lackey runs the program ~50x slower: keep recordings short.\n"
		"ept: TABLE is the plugin's table file (memtidectl ept-plugin); epochs of\n"
		"--epoch-ms (default 1000), --epochs of them (default 10; SIGINT ends early);\n"
		"the plugin instruments all the time unless --window MS asks for one sampling\n"
		"window per epoch (as memtided does; --random-phase: at a random moment of the\n"
		"epoch, as memtided places them, else right after each harvest); --ram when the\n"
		"plugin was not given ram=.\n"
		"memtided must not drive the same table meanwhile.\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -EINVAL;
	*out = v;
	return 0;
}

static int info(const char *path)
{
	struct sim_trace t;
	char err[256];
	uint64_t acc = 0, wr = 0, fr = 0;

	if (sim_trace_read(&t, path, err, sizeof(err))) {
		fprintf(stderr, "memtide-trace: %s\n", err);
		return 1;
	}
	for (size_t e = 0; e < t.nr_epochs; e++) {
		acc += t.epochs[e].nr_acc;
		fr += t.epochs[e].nr_free;
		for (uint32_t i = 0; i < t.epochs[e].nr_acc; i++)
			wr += (t.epochs[e].acc[i] & SIM_ACC_WRITE) != 0;
	}
	printf("{\"trace\":\"%s\",\"source\":\"%s\",\"page_size\":%u,\"ram_ranges\":%zu,"
	       "\"ram_pages\":%llu,\"epochs\":%zu,\"duration_ms\":%llu,\"page_accesses\":%llu,"
	       "\"page_writes\":%llu,\"page_frees\":%llu}\n",
	       path, t.source, t.page_size, t.nr_ram, (unsigned long long)t.ram_pages, t.nr_epochs,
	       (unsigned long long)(t.end_ms - t.epochs[0].t_ms), (unsigned long long)acc,
	       (unsigned long long)wr, (unsigned long long)fr);
	sim_trace_free(&t);
	return 0;
}

static volatile sig_atomic_t ept_stop;

static void on_stop(int sig)
{
	(void)sig;
	ept_stop = 1;
}

/* memtide-trace ept: argv[0] is "ept". */
static int cmd_ept(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"epoch-ms", required_argument, NULL, 'm'},
	    {"epochs", required_argument, NULL, 'e'},
	    {"window", required_argument, NULL, 'w'},
	    {"ram", required_argument, NULL, 'r'},
	    {"name", required_argument, NULL, 'n'},
	    {"random-phase", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct mtd_ept_record_opts o = {.epoch_ms = 1000, .epochs = 10, .stop = &ept_stop};
	struct mtd_ept_record_stats st;
	const char *out = NULL, *name = NULL;
	struct sim_trace t;
	char err[300] = "";
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+o:h", lopts, NULL)) != -1) {
		uint64_t *dst = c == 'm' ? &o.epoch_ms : c == 'e' ? &o.epochs : &o.window_ms;
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'm':
		case 'e':
		case 'w':
			if (parse_u64(optarg, dst) || (c != 'w' && *dst == 0)) {
				fprintf(stderr, "memtide-trace: bad number '%s'\n", optarg);
				return 2;
			}
			break;
		case 'r':
			if (mtd_parse_bytes(optarg, &o.ram_bytes) < 0) {
				fprintf(stderr, "memtide-trace: --ram must be a size such as 1G\n");
				return 2;
			}
			break;
		case 'n':
			name = optarg;
			break;
		case 'p':
			o.random_phase = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!out || optind != argc - 1) {
		fprintf(stderr, "memtide-trace: ept needs -o FILE and one TABLE\n");
		return 2;
	}
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	rc = mtd_ept_record(argv[optind], &o, &t, &st, err, sizeof(err));
	if (rc == 0) {
		snprintf(t.source, sizeof(t.source), "ept:%.58s", name ? name : "guest");
		rc = sim_trace_write(&t, out, 19, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "memtide-trace: %s\n", err);
		sim_trace_free(&t);
		return 1;
	}
	printf("{\"trace\":\"%s\",\"source\":\"%s\",\"epochs\":%llu,\"epoch_ms\":%llu,"
	       "\"window_ms\":%llu,\"ram_pages\":%llu,\"page_accesses\":%llu,"
	       "\"page_writes\":%llu,\"leaf_tables\":%llu,\"walk_entries_per_epoch\":%.0f,"
	       "\"walk_ms_per_epoch\":%.3f,\"qemu_gone\":%s}\n",
	       out, t.source, (unsigned long long)st.epochs, (unsigned long long)o.epoch_ms,
	       (unsigned long long)o.window_ms, (unsigned long long)st.table_ram_pages,
	       (unsigned long long)st.page_accesses, (unsigned long long)st.page_writes,
	       (unsigned long long)st.table_tables, (double)st.walk_entries / (double)st.epochs,
	       (double)st.walk_us / 1000.0 / (double)st.epochs, st.qemu_gone ? "true" : "false");
	sim_trace_free(&t);
	return 0;
}

/* Start valgrind lackey on argv with its records on a pipe; returns the read end. */
static FILE *start_lackey(char **argv, pid_t *pid)
{
	int pfd[2];
	char logfd[32];

	if (pipe(pfd))
		return NULL;
	*pid = fork();
	if (*pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return NULL;
	}
	if (*pid == 0) {
		int argc = 0;
		while (argv[argc])
			argc++;
		char **va = calloc((size_t)argc + 6, sizeof(*va));
		int devnull = open("/dev/null", O_WRONLY);
		if (!va || devnull < 0)
			_exit(126);
		close(pfd[0]);
		dup2(devnull, STDOUT_FILENO);
		snprintf(logfd, sizeof(logfd), "--log-fd=%d", pfd[1]);
		va[0] = "valgrind";
		va[1] = "--tool=lackey";
		va[2] = "--trace-mem=yes";
		va[3] = logfd;
		va[4] = "--";
		for (int i = 0; i < argc; i++)
			va[5 + i] = argv[i];
		execvp("valgrind", va);
		_exit(127);
	}
	close(pfd[1]);
	return fdopen(pfd[0], "r");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"epoch-accesses", required_argument, NULL, 'a'},
	    {"epoch-ms", required_argument, NULL, 'm'},
	    {"max-accesses", required_argument, NULL, 'x'},
	    {"no-ifetch", no_argument, NULL, 'I'},
	    {"name", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct sim_lackey_opts o = {
	    .epoch_accesses = 100000, .epoch_ms = 1000, .with_ifetch = true};
	const char *out = NULL, *name = NULL, *cmd;
	struct sim_trace t;
	char err[256] = "";
	uint64_t nacc = 0;
	FILE *in;
	pid_t pid = -1;
	int c, rc;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "info")) {
		if (argc != 3) {
			usage(stderr);
			return 2;
		}
		return info(argv[2]);
	}
	if (!strcmp(cmd, "ept"))
		return cmd_ept(argc - 1, argv + 1);
	if (strcmp(cmd, "record") != 0 && strcmp(cmd, "convert") != 0) {
		fprintf(stderr, "memtide-trace: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "+o:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'a':
		case 'm':
		case 'x': {
			uint64_t v;
			if (parse_u64(optarg, &v) || (c != 'x' && v == 0)) {
				fprintf(stderr, "memtide-trace: bad number '%s'\n", optarg);
				return 2;
			}
			*(c == 'a'   ? &o.epoch_accesses
			  : c == 'm' ? &o.epoch_ms
				     : &o.max_accesses) = v;
			break;
		}
		case 'I':
			o.with_ifetch = false;
			break;
		case 'n':
			name = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!out) {
		fprintf(stderr, "memtide-trace: -o FILE is required\n");
		return 2;
	}
	if (!strcmp(cmd, "record")) {
		if (optind >= argc) {
			fprintf(stderr, "memtide-trace: record needs a command after --\n");
			return 2;
		}
		in = start_lackey(argv + optind, &pid);
		if (!name)
			name = argv[optind];
	} else {
		in = optind < argc ? fopen(argv[optind], "r") : stdin;
		if (!name)
			name = optind < argc ? argv[optind] : "stdin";
	}
	if (!in) {
		fprintf(stderr, "memtide-trace: %s\n", strerror(errno));
		return 1;
	}
	rc = sim_lackey_convert(in, &o, &t, &nacc, err, sizeof(err));
	if (pid > 0) {
		int st;
		kill(pid, SIGKILL); /* done reading: stop it if --max-accesses cut it short */
		fclose(in);
		waitpid(pid, &st, 0);
		if (!rc && WIFEXITED(st) && WEXITSTATUS(st) == 127) {
			fprintf(stderr,
				"memtide-trace: cannot run valgrind (apt install valgrind)\n");
			sim_trace_free(&t);
			return 1;
		}
	} else if (in != stdin) {
		fclose(in);
	}
	if (rc) {
		fprintf(stderr, "memtide-trace: %s\n", err);
		return 1;
	}
	snprintf(t.source, sizeof(t.source), "lackey:%s", name);
	rc = sim_trace_write(&t, out, 19, err, sizeof(err));
	if (rc)
		fprintf(stderr, "memtide-trace: %s\n", err);
	else
		fprintf(
		    stderr, "memtide-trace: %llu accesses, %zu epochs, %llu pages of RAM -> %s\n",
		    (unsigned long long)nacc, t.nr_epochs, (unsigned long long)t.ram_pages, out);
	sim_trace_free(&t);
	return rc ? 1 : 0;
}
