// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - memtide-agent's command line: run the agent, or send it one hint.
 *
 *   memtide-agent [-c FILE] [-d] [--KEY=VALUE ...]     run (foreground unless -d)
 *   memtide-agent hint hot|cold ADDR LEN [PID]          declare memory hot or cold
 *   memtide-agent hint need BYTES WITHIN_MS             announce a need
 *   memtide-agent reclaim [--scope=file|any] [--deadline-ms=N] [--compact] BYTES
 *                                                       reclaim here and now, as if the host
 *                                                       asked; prints the reply as JSON
 *
 * Settings: built-in defaults, then the config file (-c FILE, or /etc/memtide-agent.conf
 * when it exists), then --KEY=VALUE flags, each key as in the file (dashes may stand for
 * underscores).  With no file and no flags the agent serves virtio-serial port
 * org.memtide.agent.0, which is what a guest started by memtided has.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define DEFAULT_CONFIG "/etc/memtide-agent.conf"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: memtide-agent [OPTION]... [--KEY=VALUE]...\n"
		"       memtide-agent hint hot|cold ADDR LEN [PID]\n"
		"       memtide-agent hint need BYTES WITHIN_MS\n"
		"\n"
		"The memtide guest agent: reports this guest's memory to the host's memtided,\n"
		"carries out its reclaim requests and forwards application hints.\n"
		"\n"
		"  -c, --config FILE   settings file (default " DEFAULT_CONFIG " if present)\n"
		"  -d, --daemon        detach and run in the background\n"
		"  -f, --foreground    stay in the foreground (the default; what systemd runs)\n"
		"      --pidfile FILE  write the daemon's pid here\n"
		"      --log-file FILE append the log here instead of stderr\n"
		"  -v, --verbose       more log (repeatable)\n"
		"      --dump-config   print the settings in force and exit\n"
		"  -h, --help          this help\n"
		"  -V, --version       version\n"
		"\n"
		"Any setting of the file can be given as --KEY=VALUE, e.g.\n"
		"  --transport=vsock --vsock-port=5253   (default: auto, vsock or virtio-serial)\n"
		"  --transport=unix --unix-path=/tmp/host.sock\n"
		"  --port=org.memtide.agent.0 --report-interval-ms=2000\n"
		"Settings and defaults (--dump-config prints them):\n");
}

/* --KEY=VALUE with dashes in KEY turned into underscores. */
static int set_flag(struct agent_config *c, const char *arg)
{
	char key[64], err[256];
	const char *eq = strchr(arg, '=');
	size_t n;

	if (!eq || (n = (size_t)(eq - arg)) >= sizeof(key) || n == 0) {
		fprintf(stderr, "memtide-agent: '--%s': expected --KEY=VALUE\n", arg);
		return -EINVAL;
	}
	memcpy(key, arg, n);
	key[n] = '\0';
	for (char *p = key; *p; p++)
		if (*p == '-')
			*p = '_';
	if (agent_config_set(c, key, eq + 1, err, sizeof(err)) < 0) {
		fprintf(stderr, "memtide-agent: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

static int cmd_hint(int argc, char **argv)
{
	const char *sock = AGENT_DEFAULT_HINT_SOCK;
	char line[AGENT_HINT_LINE_MAX], reply[AGENT_HINT_LINE_MAX];
	size_t len = 0;
	int rc, i = 1;

	if (i + 1 < argc && strncmp(argv[i], "--socket=", 9) == 0)
		sock = argv[i++] + 9;
	if (argc - i < 3 || argc - i > 4) {
		fprintf(stderr,
			"usage: memtide-agent hint [--socket=PATH] hot|cold ADDR LEN [PID]\n"
			"       memtide-agent hint [--socket=PATH] need BYTES WITHIN_MS\n");
		return 2;
	}
	line[0] = '\0';
	for (; i < argc; i++) {
		int k = snprintf(line + len, sizeof(line) - len, "%s%s", len ? " " : "", argv[i]);

		if (k < 0 || (size_t)k >= sizeof(line) - len) {
			fprintf(stderr, "memtide-agent hint: request too long\n");
			return 2;
		}
		len += (size_t)k;
	}
	rc = agent_hint_client(sock, line, reply, sizeof(reply));
	if (rc < 0) {
		fprintf(stderr, "memtide-agent hint: %s: %s\n", sock, strerror(-rc));
		return 1;
	}
	printf("%s\n", reply);
	return rc;
}

/*
 * `memtide-agent reclaim`: run one reclaim request locally with the settings in force (the
 * floor, allow_drop_caches) and print the reply the host would get, as JSON.  For operators
 * checking a guest by hand, and for tests.  Exit 0 when something was freed or the request
 * was met, 1 otherwise, 2 on usage errors.
 */
static int cmd_reclaim(int argc, char **argv)
{
	struct proto_reclaim req = {0, PROTO_SCOPE_FILE, 10000, false};
	struct agent_config cfg;
	struct proto_msg m;
	uint8_t buf[PROTO_ENCODE_MAX_BYTES];
	char err[320];
	size_t n;
	int rc;

	agent_config_defaults(&cfg);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;

		if (strcmp(a, "--scope=file") == 0) {
			req.scope = PROTO_SCOPE_FILE;
		} else if (strcmp(a, "--scope=any") == 0) {
			req.scope = PROTO_SCOPE_ANY;
		} else if (strcmp(a, "--compact") == 0) {
			req.compact = true;
		} else if (strncmp(a, "--deadline-ms=", 14) == 0) {
			unsigned long v = strtoul(a + 14, &end, 10);

			if (*end || v < PROTO_DEADLINE_MIN_MS || v > PROTO_DEADLINE_MAX_MS)
				goto usage;
			req.deadline_ms = (uint32_t)v;
		} else if (strcmp(a, "-c") == 0 && i + 1 < argc) {
			rc = agent_config_load(&cfg, argv[++i], err, sizeof(err));
			if (rc < 0) {
				fprintf(stderr, "memtide-agent: %s\n", err);
				return 2;
			}
		} else if (strncmp(a, "--", 2) == 0) {
			if (set_flag(&cfg, a + 2) < 0)
				return 2;
		} else {
			unsigned long long v = strtoull(a, &end, 0);

			if (*end || v == 0 || v > PROTO_BYTES_MAX || req.bytes)
				goto usage;
			req.bytes = v;
		}
	}
	if (!req.bytes)
		goto usage;
	agent_log_init((int)cfg.log_level, "memtide-agent");
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_RECLAIM_REPLY;
	m.id = 1;
	agent_reclaim_run(&cfg, &req, &m.u.reclaim_reply);
	m.u.reclaim_reply.re = 1;
	if (proto_encode(&m, buf, sizeof(buf), &n, NULL) != PROTO_OK) {
		fprintf(stderr, "memtide-agent: cannot encode the reply\n");
		return 1;
	}
	printf("%.*s\n", (int)(n - PROTO_FRAME_HDR_BYTES),
	       (const char *)buf + PROTO_FRAME_HDR_BYTES);
	return m.u.reclaim_reply.freed_bytes > 0 || m.u.reclaim_reply.result == PROTO_RECLAIM_DONE
		   ? 0
		   : 1;
usage:
	fprintf(stderr, "usage: memtide-agent reclaim [--scope=file|any] [--deadline-ms=N] "
			"[--compact] [-c FILE] [--KEY=VALUE]... BYTES\n");
	return 2;
}

/*
 * Run in the background: fork, and let the parent exit only once the child says it is
 * ready (pidfile written, agent set up), so that whoever started us can rely on the pidfile
 * when the command returns - no polling.  The child starts a new session and points stdio
 * at /dev/null (main() then puts the --log-file on stderr); it moves to "/" only after the
 * pidfile is written, so relative paths on the command line work.  Returns, in the child,
 * the fd to write the readiness byte to; -1 on failure.  The parent never returns.
 */
static int detach(void)
{
	int pfd[2], null;
	pid_t pid;
	char c;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		fprintf(stderr, "memtide-agent: pipe: %s\n", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "memtide-agent: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		close(pfd[1]);
		/* EOF without the byte: the child died during start-up (it logged why) */
		_exit(read(pfd[0], &c, 1) == 1 ? 0 : 1);
	}
	close(pfd[0]);
	setsid();
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
	return pfd[1];
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	enum { OPT_PIDFILE = 256, OPT_LOGFILE, OPT_DUMP };
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"daemon", no_argument, NULL, 'd'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"pidfile", required_argument, NULL, OPT_PIDFILE},
	    {"log-file", required_argument, NULL, OPT_LOGFILE},
	    {"verbose", no_argument, NULL, 'v'},
	    {"dump-config", no_argument, NULL, OPT_DUMP},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	struct agent_config cfg;
	const char *config = NULL, *pidfile = NULL, *logfile = NULL;
	bool daemonize = false, dump = false;
	int verbose = 0, opt, rc, ready_fd = -1, log_fd = -1;
	static char pid_abs[PATH_MAX];
	struct agent *a;
	char err[320];

	if (argc > 1 && strcmp(argv[1], "hint") == 0)
		return cmd_hint(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "reclaim") == 0)
		return cmd_reclaim(argc - 1, argv + 1);

	agent_config_defaults(&cfg);
	/* first pass: options; --KEY=VALUE flags are applied after the config file */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:dfvhV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'd':
			daemonize = true;
			break;
		case 'f':
			daemonize = false;
			break;
		case 'v':
			verbose++;
			break;
		case OPT_PIDFILE:
			pidfile = optarg;
			break;
		case OPT_LOGFILE:
			logfile = optarg;
			break;
		case OPT_DUMP:
			dump = true;
			break;
		case 'h':
			usage(stdout);
			agent_config_dump(&cfg, STDOUT_FILENO);
			return 0;
		case 'V':
			printf("memtide-agent %s (protocol %d..%d)\n", AGENT_VERSION,
			       PROTO_VERSION_MIN, PROTO_VERSION_MAX);
			fputs(AGENT_LICENSE, stdout);
			return 0;
		default:
			break; /* a --KEY=VALUE flag: second pass */
		}
	}
	if (config || access(DEFAULT_CONFIG, F_OK) == 0) {
		rc = agent_config_load(&cfg, config ? config : DEFAULT_CONFIG, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "memtide-agent: %s\n", err);
			return 2;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		bool known = false;

		if (strncmp(arg, "--", 2) != 0) {
			if (arg[0] == '-' && arg[1] && strchr("c", arg[1]) && !arg[2])
				i++; /* -c FILE */
			else if (arg[0] != '-' || !arg[1] ||
				 strspn(arg + 1, "dfvhV") != strlen(arg + 1)) {
				fprintf(stderr,
					"memtide-agent: unexpected argument '%s' (see --help)\n",
					arg);
				return 2;
			}
			continue;
		}
		for (const struct option *o = opts; o->name; o++) {
			size_t n = strlen(o->name);

			if (strncmp(arg + 2, o->name, n) == 0 &&
			    (!arg[2 + n] || arg[2 + n] == '=')) {
				known = true;
				if (o->has_arg == required_argument && !arg[2 + n])
					i++;
			}
		}
		if (!known && set_flag(&cfg, arg + 2) < 0)
			return 2;
	}
	if (cfg.backoff_max_ms < cfg.backoff_min_ms) {
		fprintf(stderr, "memtide-agent: backoff_max_ms below backoff_min_ms\n");
		return 2;
	}
	if (verbose)
		cfg.log_level = cfg.log_level + (uint32_t)verbose > AGENT_DEBUG
				    ? AGENT_DEBUG
				    : cfg.log_level + (uint32_t)verbose;
	if (dump) {
		agent_config_dump(&cfg, STDOUT_FILENO);
		return 0;
	}
	agent_log_init((int)cfg.log_level, "memtide-agent");

	if (logfile) {
		log_fd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (log_fd < 0) {
			fprintf(stderr, "memtide-agent: %s: %s\n", logfile, strerror(errno));
			return 1;
		}
	}
	if (daemonize) {
		ready_fd = detach();
		if (ready_fd < 0)
			return 1;
	}
	if (log_fd >= 0) {
		dup2(log_fd, STDERR_FILENO);
		close(log_fd);
	}
	if (pidfile && write_pidfile(pidfile) < 0)
		agent_log(AGENT_WARN, "cannot write pidfile %s", pidfile);
	/* remember it absolutely: we leave the current directory below */
	if (pidfile && realpath(pidfile, pid_abs))
		pidfile = pid_abs;
	if (daemonize && chdir("/") < 0)
		agent_log(AGENT_WARN, "cannot chdir to /");

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	rc = agent_new(&cfg, &a);
	if (rc < 0) {
		agent_log(AGENT_ERR, "cannot start: %s", strerror(-rc));
		return 1;
	}
	agent_log(AGENT_INFO, "memtide-agent %s starting (transport %s)", AGENT_VERSION,
		  cfg.transport == AGENT_TR_VIRTIO  ? cfg.port_name
		  : cfg.transport == AGENT_TR_VSOCK ? "vsock"
		  : cfg.transport == AGENT_TR_AUTO
		      ? (agent_vsock_present(&cfg) ? "auto: vsock, "
						     "then virtio-serial"
						   : "auto: virtio-serial")
		      : cfg.unix_path);
	if (ready_fd >= 0) {
		/* the parent waits for this byte: pidfile written, agent set up */
		if (write(ready_fd, "", 1) < 0)
			agent_log(AGENT_WARN, "cannot tell the parent we are ready");
		close(ready_fd);
	}
	rc = agent_run(a, &stop_flag);
	agent_free(a);
	if (pidfile && unlink(pidfile) < 0 && errno != ENOENT)
		agent_log(AGENT_WARN, "cannot remove pidfile %s", pidfile);
	agent_log(AGENT_INFO, "stopped");
	return rc < 0 ? 1 : 0;
}
