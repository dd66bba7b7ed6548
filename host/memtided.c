/*
 * memtided.c - main() of the memtide host daemon.
 *
 * Parses flags over the config file over built-in defaults, sets up logging and signals,
 * builds the core (daemon.c) and runs the main thread until SIGTERM or SIGINT, then stops:
 * every VM keeps the size it has, and its state (state_dir) lets the next memtided resume.  The front ends (control socket, metrics endpoint) read the
 * core through host/mtd.h; the control socket starts before any VM is touched, so a second
 * memtided on the same socket stops before it could fight the first over a balloon.
 *
 * Two modes:
 *   libvirt    (default) every running domain with a virtio balloon on --uri;
 *   plain QEMU --qmp PATH [--agent PATH] [--name NAME], once per VM: each VM's QMP socket
 *              and agent channel.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <urcu.h>

#include "choose.h"
#include "control.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "policy.h"

#define MEMTIDE_VERSION MTD_VERSION
#define DEFAULT_CONFIG  "/etc/memtide/memtided.conf"

static void usage(FILE *f)
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
	    "  --help, --version\n"
	    "\n"
	    "Flags override the config file.  Its sections and keys:\n"
	    "  [daemon]     uri socket interval source log_level metrics_port stats_period\n"
	    "               ept_dir young_dump_dir state_dir observe_only\n"
	    "               call_timeout domains\n"
	    "  [metrics]    listen\n"
	    "  [controller] max_inflate_step deflate_min psi_some_avg10_high\n"
	    "               mem_available_low major_faults_high agent_silence\n"
	    "               hold_after_deflate hold_max min_change\n"
	    "  [host]       low_mark high_mark interval settle release_rate meminfo\n"
	    "  [defaults]   enabled min max priority target_refault_per_min headroom\n"
	    "               return (balloon, reclaim, pageout or auto) source ept_window observe\n"
	    "               (per-domain policy unless the domain's memtide metadata says)\n"
	    "  [pageout]    swap_reserve max_step requery (host-side eviction)\n"
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
    {NULL, 0, NULL, 0},
};

/* A flag that maps onto a config key, applied after the file is read. */
struct flag_set {
	const char *section, *key, *value;
	const char *flag; /* as given, for the error message */
};

int main(int argc, char **argv)
{
	static struct mtd_config cfg;
	struct flag_set flags[32];
	size_t nr_flags = 0;
	const char *config_path = DEFAULT_CONFIG, *qmp = NULL;
	/* Plain-QEMU VMs in the order of their --qmp; --agent and --name given before the
	 * first --qmp are the first VM's, as with a single VM. */
	static const char *qmps[MTD_MAX_QMP_VMS], *agents[MTD_MAX_QMP_VMS], *names[MTD_MAX_QMP_VMS];
	static char default_names[MTD_MAX_QMP_VMS][16];
	unsigned nq = 0;
	bool config_given = false, use_syslog = false, foreground = false;
	char err[256];
	int opt, idx = 0;

	while ((opt = getopt_long(argc, argv, "h", options, &idx)) != -1) {
		struct flag_set f = {NULL, NULL, optarg, options[idx].name};
		switch (opt) {
		case OPT_URI:
			f.section = "daemon";
			f.key = "uri";
			break;
		case OPT_INTERVAL:
			f.section = "daemon";
			f.key = "interval";
			break;
		case OPT_SOURCE:
			f.section = "daemon";
			f.key = "source";
			break;
		case OPT_LOG_LEVEL:
			f.section = "daemon";
			f.key = "log_level";
			break;
		case OPT_METRICS_PORT:
			f.section = "daemon";
			f.key = "metrics_port";
			break;
		case OPT_METRICS_LISTEN:
			f.section = "metrics";
			f.key = "listen";
			break;
		case OPT_NO_METRICS:
			f.section = "metrics";
			f.key = "listen";
			f.value = "off";
			break;
		case OPT_SOCKET:
			f.section = "daemon";
			f.key = "socket";
			break;
		case OPT_OBSERVE_ONLY:
			f.section = "daemon";
			f.key = "observe_only";
			f.value = "yes";
			break;
		case OPT_STATE_DIR:
			f.section = "daemon";
			f.key = "state_dir";
			break;
		case OPT_QMP:
			if (nq == MTD_MAX_QMP_VMS) {
				fprintf(stderr, "memtided: at most %d --qmp VMs\n",
					MTD_MAX_QMP_VMS);
				return 2;
			}
			qmps[nq++] = optarg;
			qmp = qmps[0];
			break;
		case OPT_AGENT:
		case OPT_NAME: {
			const char **slot =
			    opt == OPT_AGENT ? &agents[nq ? nq - 1 : 0] : &names[nq ? nq - 1 : 0];
			if (*slot) {
				fprintf(stderr, "memtided: two --%s for one --qmp VM\n",
					opt == OPT_AGENT ? "agent" : "name");
				return 2;
			}
			*slot = optarg;
			break;
		}
		case OPT_CONFIG:
			config_path = optarg;
			config_given = true;
			break;
		case OPT_SYSLOG:
			use_syslog = true;
			break;
		case OPT_FOREGROUND:
			foreground = true;
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("memtided " MEMTIDE_VERSION "\n");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (f.section && nr_flags < sizeof(flags) / sizeof(flags[0]))
			flags[nr_flags++] = f;
	}
	if (optind < argc) {
		fprintf(stderr, "memtided: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (agents[0] && !qmp) {
		fprintf(stderr, "memtided: --agent needs --qmp (in libvirt mode the agent channel "
				"comes from the domain XML)\n");
		return 2;
	}
	for (unsigned i = 0; i < nq; i++) {
		if (!names[i]) {
			snprintf(default_names[i], sizeof(default_names[i]), i ? "qemu%u" : "qemu",
				 i + 1);
			names[i] = default_names[i];
		}
		if (strlen(names[i]) == 0 || strlen(names[i]) >= MTD_NAME_MAX) {
			fprintf(stderr, "memtided: --name must be 1..%d characters\n",
				MTD_NAME_MAX - 1);
			return 2;
		}
		if (!qmps[i] || strlen(qmps[i]) >= MTD_PATH_MAX ||
		    (agents[i] && strlen(agents[i]) >= MTD_PATH_MAX)) {
			fprintf(stderr,
				"memtided: --qmp and --agent paths must be shorter than %d "
				"characters\n",
				MTD_PATH_MAX);
			return 2;
		}
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(names[k], names[i])) {
				fprintf(stderr, "memtided: two VMs named '%s' (--name)\n",
					names[i]);
				return 2;
			}
	}

	/* Step 1: settings: defaults, then the file, then flags. */
	xmlInitParser();
	mtd_config_default(&cfg);
	if (mtd_config_load(&cfg, config_path, !config_given, err, sizeof(err)) < 0) {
		fprintf(stderr, "memtided: %s\n", err);
		return 2;
	}
	for (size_t i = 0; i < nr_flags; i++) {
		if (mtd_config_set(&cfg, flags[i].section, flags[i].key, flags[i].value, err,
				   sizeof(err)) < 0) {
			fprintf(stderr, "memtided: --%s: %s\n", flags[i].flag, err);
			return 2;
		}
	}
	if (mtd_ctl_config_finish(&cfg.ctl, err, sizeof(err)) < 0 ||
	    mtd_config_validate(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "memtided: %s\n", err);
		return 2;
	}

	/* Step 2: logging and the process. */
	enum mtd_log_level level;
	if (mtd_log_level_parse(cfg.log_level, &level) < 0)
		level = MTD_LOG_NOTICE;
	if (!foreground) {
		if (daemon(0, 0) < 0) {
			fprintf(stderr, "memtided: cannot detach: %s\n", strerror(errno));
			return 1;
		}
		use_syslog = true; /* stderr is /dev/null now */
	}
	mtd_log_init(level, use_syslog, "memtided");

	/* Signals: TERM and INT end the main loop and HUP reloads, all through a signalfd;
	 * blocked before any thread starts so every thread inherits the mask and only the main
	 * thread sees them. */
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0) {
		mtd_err("signalfd: %s", strerror(errno));
		return 1;
	}

	/* Step 3: the core. */
	struct mtd_daemon *d;
	if (mtd_daemon_new(&cfg, &d) < 0) {
		mtd_err("out of memory");
		return 1;
	}
	snprintf(d->config_path, sizeof(d->config_path), "%s", config_path);
	d->config_missing_ok = !config_given;
	if (qmp) {
		d->mode = MTD_MODE_QMP;
		snprintf(d->qmp_path, sizeof(d->qmp_path), "%s", qmp);
		snprintf(d->agent_path, sizeof(d->agent_path), "%s", agents[0] ? agents[0] : "");
		snprintf(d->vm_name, sizeof(d->vm_name), "%s", names[0]);
		for (unsigned i = 1; i < nq; i++) {
			struct mtd_qmp_vm *v = &d->more_qmp[d->nr_more_qmp++];
			snprintf(v->qmp_path, sizeof(v->qmp_path), "%s", qmps[i]);
			snprintf(v->agent_path, sizeof(v->agent_path), "%s",
				 agents[i] ? agents[i] : "");
			snprintf(v->name, sizeof(v->name), "%s", names[i]);
		}
	}
	/* Step 4: the front ends, reading the core through mtd.h.  The control socket comes
	 * first: if another memtided owns it, this one must not touch any balloon. */
	struct mtd_control *ctl = NULL;
	if (mtd_control_start(d, cfg.socket_path, MEMTIDE_VERSION, &ctl, err, sizeof(err)) < 0) {
		mtd_err("%s", err);
		mtd_daemon_free(d);
		return 1;
	}
	struct mtd_metrics *metrics = NULL;
	if (cfg.metrics_port > 0 && mtd_metrics_start(d, cfg.metrics_addr, cfg.metrics_port,
						      &metrics, err, sizeof(err)) < 0) {
		mtd_err("%s", err);
		mtd_control_stop(ctl);
		mtd_daemon_free(d);
		return 1;
	}
	mtd_notice("memtided " MEMTIDE_VERSION " starting: %s mode, interval %llu ms, source %s%s",
		   qmp ? "plain-QEMU" : "libvirt", (unsigned long long)cfg.ctl.interval_ms,
		   cfg.source == MTD_SOURCE_SIM ? "sim" : "live (per VM)",
		   cfg.observe_only ? "; OBSERVE-ONLY: no VM will be changed" : "");
	if (cfg.source != MTD_SOURCE_SIM)
		mtd_access_daemon_start(cfg.ept_dir);
	int rc = mtd_daemon_start(d);
	if (rc < 0) {
		mtd_metrics_stop(metrics);
		mtd_control_stop(ctl);
		mtd_daemon_stop(d);
		mtd_daemon_free(d);
		return 1;
	}
	/* Ready: the control socket answers (a hook's news is queued, not lost) and the
	 * running VMs are attached or queued.  The watchdog pings come from the main loop. */
	d->watchdog_ms = mtd_notify_watchdog_ms();
	mtd_notify_ready("%s mode, interval %llu ms, control %s", qmp ? "plain-QEMU" : "libvirt",
			 (unsigned long long)cfg.ctl.interval_ms, cfg.socket_path);

	/* Step 5: run until a signal, then stop: every VM keeps its size, its state is saved. */
	rc = mtd_daemon_run(d, sfd);
	mtd_notify_stopping();
	mtd_metrics_stop(metrics);
	mtd_control_stop(ctl);
	mtd_daemon_stop(d);
	mtd_daemon_free(d);
	close(sfd);
	mtd_notice("stopped");
	mtd_log_close();
	xmlCleanupParser();
	return rc < 0 ? 1 : 0;
}
