/*
 * cmdline.c - memtided's flags (cmdline.h): getopt_long over a fixed table, with every
 * problem reported as one sentence instead of getopt's own stderr output.
 *
 * What used to be silent: a 33rd flag was dropped (a fixed array of 32), and a --qmp or
 * --agent path of 256 bytes or more was cut short by snprintf into the daemon's buffer (the
 * daemon then retried a different path forever).  Flags that are config keys now keep one
 * slot per key (the last one given wins, as before), and paths longer than a unix socket
 * address are refused.
 */
#include "cmdline.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>
#include <sys/un.h>

#define DEFAULT_CONFIG "/etc/memtide/memtided.conf"

void mtd_cmdline_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: memtided [OPTIONS]\n"
	    "memtide host daemon: hands VMs' cold memory back to the host through\n"
	    "virtio-balloon and free page reporting, with the guest agent's help.\n"
	    "\n"
	    "Modes:\n"
	    "  (default)              manage every running libvirt domain with a balloon\n"
	    "  --uri URI              libvirt connection (default qemu:///system)\n"
	    "  --qmp PATH             plain-QEMU mode: one VM through its QMP socket\n"
	    "  --agent PATH           plain-QEMU mode: the VM's agent channel socket\n"
	    "  --name NAME            plain-QEMU mode: the name shown for the VM (qemu)\n"
	    "\n"
	    "Options:\n"
	    "  --config PATH          INI settings (default " DEFAULT_CONFIG ")\n"
	    "  --interval DURATION    control interval, e.g. 5s, 500ms (default 5s)\n"
	    "  --source live|sim      access-bit sources: live (per VM: ept, idle, damon or the\n"
	    "                         agent, as its policy says) or sim (simulated hardware)\n"
	    "  --log-level LEVEL      error, warning, notice (default), info, debug\n"
	    "  --syslog               log to syslog instead of stderr\n"
	    "  --metrics-port PORT    Prometheus metrics on 127.0.0.1:PORT (default 9848)\n"
	    "  --no-metrics           no metrics endpoint\n"
	    "  --socket PATH          control socket (default /run/memtide/memtided.sock)\n"
	    "  --foreground           do not detach from the terminal\n"
	    "  --help, --version\n"
	    "\n"
	    "Flags override the config file.  Its sections and keys:\n"
	    "  [daemon]     uri socket interval source log_level metrics_port stats_period\n"
	    "               ept_dir young_dump_dir\n"
	    "  [controller] max_inflate_step deflate_min psi_some_avg10_high\n"
	    "               mem_available_low agent_silence hold_after_deflate hold_max\n"
	    "               min_change\n"
	    "  [host]       low_mark high_mark interval settle meminfo\n"
	    "  [defaults]   enabled min max priority target_refault_per_min headroom\n"
	    "               return (balloon or reclaim)\n"
	    "               (per-domain policy unless the domain's memtide metadata says)\n"
	    "  [sim]        hot_percent\n");
}

enum {
	OPT_URI = 256,
	OPT_QMP,
	OPT_AGENT,
	OPT_NAME,
	OPT_CONFIG,
	OPT_INTERVAL,
	OPT_SOURCE,
	OPT_LOG_LEVEL,
	OPT_SYSLOG,
	OPT_METRICS_PORT,
	OPT_NO_METRICS,
	OPT_SOCKET,
	OPT_FOREGROUND,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option options[] = {
    {"uri", required_argument, NULL, OPT_URI},
    {"qmp", required_argument, NULL, OPT_QMP},
    {"agent", required_argument, NULL, OPT_AGENT},
    {"name", required_argument, NULL, OPT_NAME},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"source", required_argument, NULL, OPT_SOURCE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"syslog", no_argument, NULL, OPT_SYSLOG},
    {"metrics-port", required_argument, NULL, OPT_METRICS_PORT},
    {"no-metrics", no_argument, NULL, OPT_NO_METRICS},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"foreground", no_argument, NULL, OPT_FOREGROUND},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* The config key behind each key flag: [daemon] KEY. */
static const char *const flag_key[MTD_FLAG_NR] = {
    [MTD_FLAG_URI] = "uri",
    [MTD_FLAG_INTERVAL] = "interval",
    [MTD_FLAG_SOURCE] = "source",
    [MTD_FLAG_LOG_LEVEL] = "log_level",
    [MTD_FLAG_METRICS_PORT] = "metrics_port",
    [MTD_FLAG_SOCKET] = "socket",
};

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A unix socket path: 1..107 bytes (sun_path).  */
static int check_sock_path(const char *flag, const char *p, char *err, size_t errlen)
{
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

	if (!p[0] || strlen(p) > max)
		return bad(err, errlen, "%s must be a socket path of 1..%zu bytes", flag, max);
	return 0;
}

int mtd_cmdline_parse(int argc, char **argv, struct mtd_cmdline *out, char *err, size_t errlen)
{
	int opt;

	memset(out, 0, sizeof(*out));
	out->config_path = DEFAULT_CONFIG;
	out->name = "qemu";
	optind = 0; /* glibc: start over, whatever an earlier call left */
	opterr = 0; /* every problem becomes one sentence in err */
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		const char *arg = optarg ? optarg : ""; /* set for every option that takes one */

		switch (opt) {
		case OPT_URI:
			out->set[MTD_FLAG_URI] = arg;
			break;
		case OPT_INTERVAL:
			out->set[MTD_FLAG_INTERVAL] = arg;
			break;
		case OPT_SOURCE:
			out->set[MTD_FLAG_SOURCE] = arg;
			break;
		case OPT_LOG_LEVEL:
			out->set[MTD_FLAG_LOG_LEVEL] = arg;
			break;
		case OPT_METRICS_PORT:
			out->set[MTD_FLAG_METRICS_PORT] = arg;
			break;
		case OPT_NO_METRICS:
			out->set[MTD_FLAG_METRICS_PORT] = "0";
			break;
		case OPT_SOCKET:
			out->set[MTD_FLAG_SOCKET] = arg;
			break;
		case OPT_QMP:
			out->qmp = arg;
			break;
		case OPT_AGENT:
			out->agent = arg;
			break;
		case OPT_NAME:
			out->name = arg;
			break;
		case OPT_CONFIG:
			out->config_path = arg;
			out->config_given = true;
			break;
		case OPT_SYSLOG:
			out->use_syslog = true;
			break;
		case OPT_FOREGROUND:
			out->foreground = true;
			break;
		case 'h':
		case OPT_HELP:
			out->action = MTD_CMDLINE_HELP;
			return 0;
		case OPT_VERSION:
			out->action = MTD_CMDLINE_VERSION;
			return 0;
		case ':':
			return bad(err, errlen, "option '%.64s' needs a value (see --help)",
				   argv[optind - 1]);
		default:
			return bad(err, errlen, "unknown option '%.64s' (see --help)",
				   optind > 0 && optind <= argc ? argv[optind - 1] : "?");
		}
	}
	if (optind < argc)
		return bad(err, errlen, "unexpected argument '%.64s' (see --help)", argv[optind]);
	if (out->agent && !out->qmp)
		return bad(err, errlen,
			   "--agent needs --qmp (in libvirt mode the agent channel comes from the "
			   "domain XML)");
	if (out->qmp && check_sock_path("--qmp", out->qmp, err, errlen) < 0)
		return -EINVAL;
	if (out->agent && check_sock_path("--agent", out->agent, err, errlen) < 0)
		return -EINVAL;
	if (strlen(out->config_path) >= MTD_PATH_MAX)
		return bad(err, errlen, "--config must be a path of at most %d bytes",
			   MTD_PATH_MAX - 1);
	if (out->qmp) {
		size_t n = strlen(out->name);

		if (n == 0 || n >= MTD_NAME_MAX)
			return bad(err, errlen, "--name must be 1..%d characters",
				   MTD_NAME_MAX - 1);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)out->name[i] < 0x20 || out->name[i] == 0x7f)
				return bad(err, errlen, "--name must not hold control characters");
	}
	return 0;
}

int mtd_cmdline_apply(const struct mtd_cmdline *cl, struct mtd_config *cfg, char *err,
		      size_t errlen)
{
	static const char *const flag_name[MTD_FLAG_NR] = {
	    "uri", "interval", "source", "log-level", "metrics-port", "socket",
	};

	for (int i = 0; i < MTD_FLAG_NR; i++) {
		char why[200];

		if (!cl->set[i])
			continue;
		if (mtd_config_set(cfg, "daemon", flag_key[i], cl->set[i], why, sizeof(why)) < 0)
			return bad(err, errlen, "--%s: %s", flag_name[i], why);
	}
	return 0;
}
