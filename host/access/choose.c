// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * choose.c - pick a VM's access-bit source (choose.h): try each page-level source in order
 * of preference, keep the first that opens, and write one sentence for every other.
 */
#include "access/choose.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/ept_file.h"
#include "access/young_dump.h"
#include "base/qemu_dir.h"

void mtd_access_env_default(struct mtd_access_env *env)
{
	memset(env, 0, sizeof(*env));
	env->ept_dir = MTD_EPT_DIR_DEFAULT;
	env->proc_dir = "/proc";
	env->idle_bitmap = "/sys/kernel/mm/page_idle/bitmap";
	env->damon_admin = "/sys/kernel/mm/damon/admin";
	env->run_dir = "/run/memtide";
	env->on_kvm = -1;
}

static void note(struct mtd_access_choice *ch, const char *name, const char *why)
{
	if (ch->nr_notes >= MTD_SOURCE_NOTES)
		return;
	snprintf(ch->notes[ch->nr_notes].name, sizeof(ch->notes[0].name), "%s", name);
	snprintf(ch->notes[ch->nr_notes].why, sizeof(ch->notes[0].why), "%.151s", why);
	ch->nr_notes++;
}

static int try_one(const struct mtd_access_env *env, enum mtd_access_pref which,
		   struct mtd_source *out, char *why, size_t len)
{
	char path[300];

	why[0] = '\0';
	switch (which) {
	case MTD_ACCESS_EPT:
		/* QEMU loads a TCG plugin under KVM too, and the plugin writes its table, but
		 * it never sees an access: KVM runs the guest's code, not QEMU's translation.
		 * Its table would call every page idle (seen on the KVM host stand: memtided
		 * took the guest's target from 1536 to 256 MiB in 9 s on it). */
		if (env->on_kvm == 1) {
			snprintf(why, len,
				 "the VM runs on KVM: the ept plugin sees only code QEMU's TCG "
				 "translates, and would call every page idle");
			return -ENOTSUP;
		}
		if (mtd_ept_path(env->ept_dir, env->vm_name, path, sizeof(path)) < 0) {
			snprintf(why, len, "the VM's name is too long for a table path");
			return -ENAMETOOLONG;
		}
		return mtd_source_ept_new(path, env->qemu_pid, env->guest_bytes, env->ept_window_ms,
					  env->interval_ms, out, why, len);
	case MTD_ACCESS_IDLE:
	case MTD_ACCESS_DAMON: {
		struct mtd_host_source_env h = {
		    .qemu_pid = env->qemu_pid,
		    .qmp = env->qmp,
		    .qmp_ctx = env->qmp_ctx,
		    .proc_dir = env->proc_dir,
		    .idle_bitmap = env->idle_bitmap,
		    .damon_admin = env->damon_admin,
		    .run_dir = env->run_dir,
		};
		return which == MTD_ACCESS_IDLE ? mtd_source_idle_new(&h, out, why, len)
						: mtd_source_damon_new(&h, out, why, len);
	}
	case MTD_ACCESS_AGENT:
		if (!env->agent) {
			snprintf(why, len, "the domain has no memtide agent channel");
			return -ENOENT;
		}
		return mtd_source_agent_new(env->agent, env->guest_bytes, env->interval_ms,
					    env->agent_silence_ms, out);
	case MTD_ACCESS_MEMCG: {
		struct mtd_memcg_hand *hand = env->memcg;
		const char *no = env->memcg_why;
		char opened[200] = "";
		if (env->memcg_open) {
			int rc = env->memcg_open(env->memcg_ctx, &hand, opened, sizeof(opened));
			if (rc < 0)
				return rc;
			no = opened;
		}
		if (!hand) {
			snprintf(why, len, "%s",
				 no && no[0]
				     ? no
				     : "the VM has no memory cgroup host-side reclaim can use");
			return -ENOENT;
		}
		return mtd_source_memcg_new(hand, env->guest_bytes, out);
	}
	case MTD_ACCESS_AUTO:
		break;
	}
	return -EINVAL;
}

int mtd_access_choose(const struct mtd_access_env *env, struct mtd_source *out,
		      struct mtd_access_choice *ch)
{
	/* The agent comes last when it is the fallback of a source policy names (memcg). */
	enum mtd_access_pref order[] = {MTD_ACCESS_EPT, MTD_ACCESS_IDLE, MTD_ACCESS_DAMON,
					MTD_ACCESS_AGENT, MTD_ACCESS_MEMCG};
	if (env->pref == MTD_ACCESS_MEMCG) {
		order[3] = MTD_ACCESS_MEMCG;
		order[4] = MTD_ACCESS_AGENT;
	}
	char why[200];
	bool forced_failed = false;

	memset(ch, 0, sizeof(*ch));
	memset(out, 0, sizeof(*out));
	snprintf(ch->chosen, sizeof(ch->chosen), "none");
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		enum mtd_access_pref s = order[i];
		const char *name = mtd_access_pref_name(s);

		if (out->ops) {
			/* Not tried (it would take resources: DAMON's kdamond), only probed, so
			 * the operator learns whether it would have been there. */
			char because[200] = "";
			int prc = 0;
			if (s == MTD_ACCESS_IDLE && access(env->idle_bitmap, F_OK) != 0) {
				snprintf(because, sizeof(because),
					 "this kernel has no idle page tracking (%s missing)",
					 env->idle_bitmap);
				prc = -ENOENT;
			} else if (s == MTD_ACCESS_DAMON) {
				prc = mtd_damon_probe(env->damon_admin, env->run_dir, because,
						      sizeof(because));
			} else if (s == MTD_ACCESS_AGENT && !env->agent) {
				snprintf(because, sizeof(because),
					 "the domain has no memtide agent channel");
				prc = -ENOENT;
			} else if (s == MTD_ACCESS_MEMCG && env->memcg_open) {
				/* Not even looked at: finding the cgroup may move QEMU. */
				snprintf(because, sizeof(because),
					 "not tried: the VM's cgroup is used only when no other "
					 "source is there (policy source=memcg asks for it)");
				prc = -ENOENT;
			} else if (s == MTD_ACCESS_MEMCG && !env->memcg) {
				snprintf(because, sizeof(because), "%.190s",
					 env->memcg_why && env->memcg_why[0]
					     ? env->memcg_why
					     : "no memory cgroup host-side reclaim can use");
				prc = -ENOENT;
			}
			if (prc == 0)
				snprintf(because, sizeof(because), "available, but %s is preferred",
					 ch->chosen);
			note(ch, name, because);
			continue;
		}
		/* Policy names one source: the others are not tried, except the agent as the
		 * fallback when the named one cannot be had. */
		if (env->pref != MTD_ACCESS_AUTO && env->pref != s &&
		    !(s == MTD_ACCESS_AGENT && forced_failed)) {
			snprintf(why, sizeof(why), "not tried: policy source=%s",
				 mtd_access_pref_name(env->pref));
			note(ch, name, why);
			continue;
		}
		int rc = try_one(env, s, out, why, sizeof(why));
		if (rc == -ENOMEM)
			return rc;
		if (rc == 0 && out->ops) {
			snprintf(ch->chosen, sizeof(ch->chosen), "%s", name);
			if (s == MTD_ACCESS_EPT)
				(void)mtd_source_describe(out, ch->detail, sizeof(ch->detail));
			else if (s == MTD_ACCESS_MEMCG)
				snprintf(ch->detail, sizeof(ch->detail), "%s",
					 env->pref == MTD_ACCESS_MEMCG
					     ? "asked for by policy source=memcg"
					     : "no other source on this VM (source=auto): the host "
					       "kernel's reclaim through the VM's cgroup");
			else if (s == MTD_ACCESS_AGENT)
				snprintf(ch->detail, sizeof(ch->detail),
					 "amounts from the guest's own LRU, laid over low RAM%s",
					 forced_failed
					     ? " (the source policy asked for is unavailable)"
					     : "");
			continue;
		}
		memset(out, 0, sizeof(*out));
		if (!why[0])
			snprintf(why, sizeof(why), "%s", strerror(-rc));
		if (env->pref == s) {
			char forced[200];
			snprintf(forced, sizeof(forced),
				 "asked for by policy but unavailable: %.150s", why);
			note(ch, name, forced);
			forced_failed = true;
		} else {
			note(ch, name, why);
		}
	}
	if (!out->ops)
		snprintf(ch->detail, sizeof(ch->detail),
			 "no source: the VM is watched and kept at a safe size, never squeezed");
	else if (env->young_dump_dir && env->young_dump_dir[0])
		return mtd_source_young_dump(out, env->young_dump_dir, env->vm_name);
	return 0;
}

void mtd_access_daemon_start(const char *ept_dir, const char *run_dir)
{
	struct mtd_access_env env;

	mtd_access_env_default(&env);
	(void)mkdir(run_dir, 0755);
	/* The plugin in QEMU (libvirt's qemu user, group kvm) makes its table here; sticky, so
	 * each table stays its creator's. */
	(void)mtd_qemu_dir_make(ept_dir, 01770);
	mtd_damon_cleanup(env.damon_admin, run_dir);
}

void mtd_access_refresh_status(const struct mtd_source *src, struct mtd_vm_status *st)
{
	char line[sizeof(st->source_detail)];

	if (mtd_source_describe(src, line, sizeof(line)) == 0)
		memcpy(st->source_detail, line, sizeof(line));
}

void mtd_access_choice_to_status(const struct mtd_access_choice *ch, struct mtd_vm_status *st)
{
	snprintf(st->source, sizeof(st->source), "%s", ch->chosen);
	snprintf(st->source_detail, sizeof(st->source_detail), "%.159s", ch->detail);
	st->nr_source_not_taken = ch->nr_notes;
	for (unsigned i = 0; i < ch->nr_notes && i < MTD_SOURCE_NOTES; i++) {
		snprintf(st->source_not_taken[i].name, sizeof(st->source_not_taken[i].name), "%s",
			 ch->notes[i].name);
		snprintf(st->source_not_taken[i].why, sizeof(st->source_not_taken[i].why), "%.151s",
			 ch->notes[i].why);
	}
}
