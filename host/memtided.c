// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtided.c - main() of the memtide host daemon.
 *
 * Parses flags (cmdline.c) over the config file over built-in defaults, sets up logging and
 * signals, builds the core (daemon.c) and runs the main thread until SIGTERM or SIGINT, then
 * stops: every VM keeps the size it has, and its state (state_dir) lets the next memtided
 * resume.  The front ends (control socket, metrics endpoint) read the
 * core through host/base/mtd.h; the control socket starts before any VM is touched, so a second
 * memtided on the same socket stops before it could fight the first over a balloon.
 *
 * Two modes:
 *   libvirt    (default) every running domain with a virtio balloon on --uri;
 *   plain QEMU --qmp PATH [--agent PATH] [--name NAME], once per VM: each VM's QMP socket
 *              and agent channel (a virtio-serial socket, or vsock:PATH: memtided is the
 *              back end of the VM's vhost-user-vsock-pci on QEMU's socket PATH;
 *              host/vsock/vsock_service.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <urcu.h>

#include "access/choose.h"
#include "base/log.h"
#include "daemon/cmdline.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/notify.h"
#include "front/control.h"
#include "front/metrics.h"

#define MEMTIDE_VERSION MTD_VERSION

/* Built-in defaults, then the config file, then the flags, checked as a whole: what the
 * daemon starts with, and what --check-config checks (the same code, so a file it passes is
 * one memtided starts with). */
static int load_settings(const struct mtd_cmdline *cl, struct mtd_config *cfg, char *err,
			 size_t errlen)
{
	mtd_config_default(cfg);
	if (mtd_config_load(cfg, cl->config_path, !cl->config_given, err, errlen) < 0 ||
	    mtd_cmdline_apply(cl, cfg, err, errlen) < 0 ||
	    mtd_ctl_config_finish(&cfg->ctl, err, errlen) < 0 ||
	    mtd_config_validate(cfg, err, errlen) < 0)
		return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	static struct mtd_config cfg;
	struct mtd_cmdline cl;
	char err[256];

	if (mtd_cmdline_parse(argc, argv, &cl, err, sizeof(err)) < 0) {
		fprintf(stderr, "memtided: %s\n", err);
		return 2;
	}
	if (cl.action == MTD_CMDLINE_HELP) {
		mtd_cmdline_usage(stdout);
		return 0;
	}
	if (cl.action == MTD_CMDLINE_VERSION) {
		printf("memtided " MEMTIDE_VERSION "\n" MTD_LICENSE);
		return 0;
	}
	const char *config_path = cl.config_path, *qmp = cl.nr_vms ? cl.vm[0].qmp : NULL;
	bool config_given = cl.config_given, use_syslog = cl.use_syslog, foreground = cl.foreground;

	/* Step 1: settings: defaults, then the file, then flags. */
	xmlInitParser();
	if (load_settings(&cl, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "memtided: %s\n", err);
		return cl.action == MTD_CMDLINE_CHECK_CONFIG ? 1 : 2;
	}
	char moved[600];
	bool follow = mtd_config_follow_state_dir(&cfg, moved, sizeof(moved));
	if (cl.action == MTD_CMDLINE_CHECK_CONFIG) {
		if (access(config_path, F_OK) < 0 && !config_given)
			printf("memtided: %s does not exist: the built-in settings are valid\n",
			       config_path);
		else
			printf("memtided: %s: valid\n", config_path);
		return 0;
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
		snprintf(d->agent_path, sizeof(d->agent_path), "%s",
			 cl.vm[0].agent ? cl.vm[0].agent : "");
		snprintf(d->vm_name, sizeof(d->vm_name), "%s", cl.vm[0].name);
		for (unsigned i = 1; i < cl.nr_vms; i++) {
			struct mtd_qmp_vm *v = &d->more_qmp[d->nr_more_qmp++];
			snprintf(v->qmp_path, sizeof(v->qmp_path), "%s", cl.vm[i].qmp);
			snprintf(v->agent_path, sizeof(v->agent_path), "%s",
				 cl.vm[i].agent ? cl.vm[i].agent : "");
			snprintf(v->name, sizeof(v->name), "%s", cl.vm[i].name);
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
	if (follow)
		mtd_notice("%s", moved);
	if (cfg.source != MTD_SOURCE_SIM)
		mtd_access_daemon_start(cfg.ept_dir, cfg.run_dir);
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
