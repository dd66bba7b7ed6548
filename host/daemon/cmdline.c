// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmdline.c - memtided's flags (cmdline.h): getopt_long over a fixed table, with every
 * problem reported as one sentence instead of getopt's own stderr output.
 *
 * What used to be silent: a 33rd flag was dropped (a fixed array of 32), and a --qmp or
 * --agent path of 256 bytes or more was cut short by snprintf into the daemon's buffer (the
 * daemon then retried a different path forever).  Flags that are config keys now keep one
 * slot per key (applied in the order given, the last one of a key wins, as before), and
 * paths longer than a unix socket address are refused.
 */
#include "daemon/cmdline.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>
#include <sys/un.h>

#include "vsock/kvsock.h"

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
	    "  --qmp PATH             plain-QEMU mode: a VM through its QMP socket (give\n"
	    "                         --qmp once per VM; --agent and --name after a --qmp\n"
	    "                         are that VM's)\n"
	    "  --agent PATH           plain-QEMU mode: the VM's agent channel socket\n"
	    "  --agent vsock:PATH     plain-QEMU mode: the agent over vsock, memtided being the\n"
	    "                         back end of QEMU's vhost-user-vsock-pci on socket PATH\n"
	    "  --agent vsock          plain-QEMU mode: the agent over the kernel's vsock\n"
	    "                         (vhost-vsock-pci): memtided listens on AF_VSOCK and knows\n"
	    "                         the VM by the guest-cid= on QEMU's command line\n"
	    "  --name NAME            plain-QEMU mode: the name shown for the VM (qemu,\n"
	    "                         qemu2, ...)\n"
	    "\n"
	    "Options:\n"
	    "  --config PATH          INI settings (default " DEFAULT_CONFIG ")\n"
	    "  --interval DURATION    control interval, e.g. 5s, 500ms (default 5s)\n"
	    "  --source live|sim      access-bit sources: live (per VM: ept, idle, damon or the\n"
	    "                         agent, as its policy says) or sim (simulated hardware)\n"
	    "  --log-level LEVEL      error, warning, notice (default), info, debug\n"
	    "  --syslog               log to syslog instead of stderr\n"
	    "  --metrics-listen ADDR:PORT\n"
	    "                         Prometheus metrics here (default 127.0.0.1:9848;\n"
	    "                         [::1]:9848 for IPv6, 0.0.0.0:9848 for every address)\n"
	    "  --metrics-port PORT    Prometheus metrics on the same address, this port\n"
	    "  --no-metrics           no metrics endpoint\n"
	    "  --socket PATH          control socket (default /run/memtide/memtided.sock)\n"
	    "  --observe-only         compute and show what memtided would do, change no VM\n"
	    "  --state-dir PATH       per-VM state across restarts and history (default\n"
	    "                         /var/lib/memtide)\n"
	    "  --foreground           do not detach from the terminal\n"
	    "  --check-config [FILE]  check the settings (FILE, else --config's file, with\n"
	    "                         the flags given) and exit: 0 if memtided would start\n"
	    "                         with them, 1 with FILE:LINE and why (2: bad usage)\n"
	    "  --help, --version\n"
	    "\n"
	    "Flags override the config file.  Its sections and keys:\n"
	    "  [daemon]     uri socket interval source log_level metrics_port stats_period\n"
	    "               ept_dir young_dump_dir state_dir observe_only\n"
	    "               call_timeout domains vsock_dir vsock_cid vsock_port kernel_vsock\n"
	    "               agent_ping\n"
	    "  [metrics]    listen\n"
	    "  [controller] max_inflate_step deflate_min psi_some_avg10_high\n"
	    "               mem_available_low major_faults_high agent_silence\n"
	    "               hold_after_deflate hold_max min_change\n"
	    "  [host]       low_mark high_mark interval settle release_rate meminfo\n"
	    "  [defaults]   enabled min max priority target_refault_per_min headroom\n"
	    "               return (balloon, reclaim, pageout or auto) source ept_window observe\n"
	    "               cold_age\n"
	    "               (per-domain policy unless the domain's memtide metadata says)\n"
	    "  [pageout]    swap_reserve max_step requery step duty stall_budget min_saving\n"
	    "               (host-side eviction)\n"
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
	OPT_METRICS_LISTEN,
	OPT_NO_METRICS,
	OPT_SOCKET,
	OPT_FOREGROUND,
	OPT_OBSERVE_ONLY,
	OPT_STATE_DIR,
	OPT_HELP,
	OPT_VERSION,
	OPT_CHECK_CONFIG,
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
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"no-metrics", no_argument, NULL, OPT_NO_METRICS},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"foreground", no_argument, NULL, OPT_FOREGROUND},
    {"observe-only", no_argument, NULL, OPT_OBSERVE_ONLY},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {"check-config", optional_argument, NULL, OPT_CHECK_CONFIG},
    {NULL, 0, NULL, 0},
};

/* The config key behind each key flag. */
static const struct {
	const char *section, *key;
} flag_key[MTD_FLAG_NR] = {
    [MTD_FLAG_URI] = {"daemon", "uri"},
    [MTD_FLAG_INTERVAL] = {"daemon", "interval"},
    [MTD_FLAG_SOURCE] = {"daemon", "source"},
    [MTD_FLAG_LOG_LEVEL] = {"daemon", "log_level"},
    [MTD_FLAG_METRICS_PORT] = {"daemon", "metrics_port"},
    [MTD_FLAG_METRICS_LISTEN] = {"metrics", "listen"},
    [MTD_FLAG_SOCKET] = {"daemon", "socket"},
    [MTD_FLAG_OBSERVE_ONLY] = {"daemon", "observe_only"},
    [MTD_FLAG_STATE_DIR] = {"daemon", "state_dir"},
};

/* Append a config-key flag; an earlier one of the same key leaves its place. */
static void set_flag(struct mtd_cmdline *cl, enum mtd_cmdline_key key, const char *value,
		     const char *flag)
{
	unsigned i = 0;

	while (i < cl->nr_set && cl->set[i].key != key)
		i++;
	if (i < cl->nr_set) {
		memmove(&cl->set[i], &cl->set[i + 1], (cl->nr_set - i - 1) * sizeof(cl->set[0]));
		cl->nr_set--;
	}
	cl->set[cl->nr_set++] = (struct mtd_cmdline_set){key, value, flag};
}

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

/* A VM name: 1..MTD_NAME_MAX-1 bytes, no control character (it is printed in logs and tables). */
static int check_name(const char *name, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (n == 0 || n >= MTD_NAME_MAX)
		return bad(err, errlen, "--name must be 1..%d characters", MTD_NAME_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return bad(err, errlen, "--name must not hold control characters");
	return 0;
}

/* --agent or --name: the latest --qmp VM's (the first VM's before any --qmp). */
static int set_vm_field(struct mtd_cmdline *out, bool agent, const char *arg, char *err,
			size_t errlen)
{
	struct mtd_cmdline_vm *v = &out->vm[out->nr_vms ? out->nr_vms - 1 : 0];
	const char **slot = agent ? &v->agent : &v->name;

	if (*slot)
		return bad(err, errlen, "two --%s for one --qmp VM", agent ? "agent" : "name");
	*slot = arg;
	return 0;
}

static int check_vms(struct mtd_cmdline *out, char *err, size_t errlen)
{
	if (!out->nr_vms && out->vm[0].agent)
		return bad(err, errlen,
			   "--agent needs --qmp (in libvirt mode the agent channel comes from the "
			   "domain XML)");
	for (unsigned i = 0; i < out->nr_vms; i++) {
		struct mtd_cmdline_vm *v = &out->vm[i];

		if (check_sock_path("--qmp", v->qmp, err, errlen) < 0)
			return -EINVAL;
		/* vsock:PATH: memtided is the back end of QEMU's vhost-user-vsock-pci on PATH */
		if (v->agent && strncmp(v->agent, "vsock:", 6) == 0 &&
		    check_sock_path("--agent vsock:PATH", v->agent + 6, err, errlen) < 0)
			return -EINVAL;
		if (v->agent && strncmp(v->agent, "vsock:", 6) != 0 &&
		    strcmp(v->agent, MTD_KVSOCK_AGENT) != 0 &&
		    check_sock_path("--agent", v->agent, err, errlen) < 0)
			return -EINVAL;
		if (!v->name) {
			snprintf(v->default_name, sizeof(v->default_name), i ? "qemu%u" : "qemu",
				 i + 1);
			v->name = v->default_name;
		}
		if (check_name(v->name, err, errlen) < 0)
			return -EINVAL;
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(out->vm[k].name, v->name))
				return bad(err, errlen, "two VMs named '%s' (--name)", v->name);
	}
	return 0;
}

int mtd_cmdline_parse(int argc, char **argv, struct mtd_cmdline *out, char *err, size_t errlen)
{
	int opt, idx = -1;

	memset(out, 0, sizeof(*out));
	out->config_path = DEFAULT_CONFIG;
	optind = 0; /* glibc: start over, whatever an earlier call left */
	opterr = 0; /* every problem becomes one sentence in err */
	while ((opt = getopt_long(argc, argv, ":h", options, &idx)) != -1) {
		const char *arg = optarg ? optarg : ""; /* set for every option that takes one */
		const char *flag = idx >= 0 ? options[idx].name : "";

		idx = -1; /* getopt_long sets it for long options only */

		switch (opt) {
		case OPT_URI:
			set_flag(out, MTD_FLAG_URI, arg, flag);
			break;
		case OPT_INTERVAL:
			set_flag(out, MTD_FLAG_INTERVAL, arg, flag);
			break;
		case OPT_SOURCE:
			set_flag(out, MTD_FLAG_SOURCE, arg, flag);
			break;
		case OPT_LOG_LEVEL:
			set_flag(out, MTD_FLAG_LOG_LEVEL, arg, flag);
			break;
		case OPT_METRICS_PORT:
			set_flag(out, MTD_FLAG_METRICS_PORT, arg, flag);
			break;
		case OPT_METRICS_LISTEN:
			set_flag(out, MTD_FLAG_METRICS_LISTEN, arg, flag);
			break;
		case OPT_NO_METRICS:
			set_flag(out, MTD_FLAG_METRICS_LISTEN, "off", flag);
			break;
		case OPT_SOCKET:
			set_flag(out, MTD_FLAG_SOCKET, arg, flag);
			break;
		case OPT_OBSERVE_ONLY:
			set_flag(out, MTD_FLAG_OBSERVE_ONLY, "yes", flag);
			break;
		case OPT_STATE_DIR:
			set_flag(out, MTD_FLAG_STATE_DIR, arg, flag);
			break;
		case OPT_QMP:
			if (out->nr_vms == MTD_MAX_QMP_VMS)
				return bad(err, errlen, "at most %d --qmp VMs", MTD_MAX_QMP_VMS);
			out->vm[out->nr_vms++].qmp = arg;
			break;
		case OPT_AGENT:
		case OPT_NAME:
			if (set_vm_field(out, opt == OPT_AGENT, arg, err, errlen) < 0)
				return -EINVAL;
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
		case OPT_CHECK_CONFIG:
			/* --check-config FILE as well as --check-config=FILE (getopt takes only
			 * the second form of an optional value) */
			if (!optarg && optind < argc && argv[optind][0] != '-')
				arg = argv[optind++];
			else if (!optarg)
				arg = NULL;
			if (arg && !arg[0])
				return bad(err, errlen, "--check-config: an empty file name");
			if (arg) {
				out->config_path = arg;
				out->config_given = true;
			}
			out->action = MTD_CMDLINE_CHECK_CONFIG;
			break;
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
	if (strlen(out->config_path) >= MTD_PATH_MAX)
		return bad(err, errlen, "--config must be a path of at most %d bytes",
			   MTD_PATH_MAX - 1);
	return check_vms(out, err, errlen);
}

int mtd_cmdline_apply(const struct mtd_cmdline *cl, struct mtd_config *cfg, char *err,
		      size_t errlen)
{
	for (unsigned i = 0; i < cl->nr_set; i++) {
		const struct mtd_cmdline_set *f = &cl->set[i];
		char why[200];

		if (mtd_config_set(cfg, flag_key[f->key].section, flag_key[f->key].key, f->value,
				   why, sizeof(why)) < 0)
			return bad(err, errlen, "--%s: %s", f->flag, why);
	}
	return 0;
}
