// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_metrics.c - /metrics follows Prometheus' exposition format and naming rules
 * (host/front/metrics.c).
 *
 * Three VMs are registered by hand on a daemon that is never started (no hypervisor: the
 * rendering reads only published snapshots and the host figures): one with no data yet (the
 * state a VM is in while attaching), one with every figure filled in, and one whose name
 * needs label escaping.  The rendering is parsed line by line and checked against the rules
 * an exporter must keep (https://prometheus.io/docs/practices/naming/ and the text format):
 *   - each family has one HELP and one TYPE, before its samples, and its samples together;
 *   - counters, and only counters, end in _total; every other name carries a base unit
 *     (_bytes, _seconds, _ratio, _per_second, _info) or is a named 0/1 or count gauge;
 *   - a rate is a counter (rate() makes it per second), never a gauge "per second": the
 *     one gauge so named is a policy setting, the refault target;
 *   - a summary (the agent's round trips) has its quantiles, _sum and _count;
 *   - a figure memtided does not know yet has no sample rather than a 0 (the VM with no
 *     data: no host RSS, resident size, guest MemAvailable or PSI, tick gap, round trip);
 *   - no non-base unit (per minute, percent, pages, ms) in any name;
 *   - no series (name and label set) twice: the empty VM's working set by age used to
 *     repeat one series four times;
 *   - values parse as numbers; ratios lie in [0, 1]; 0/1 gauges are 0 or 1;
 *   - memtide_build_info, memtide_up and the counters are there with the values given.
 * With METRICS_SAMPLE_OUT set, the rendering is written there too, for `promtool check
 * metrics` (tests/integration/contrib.sh).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "daemon/vm.h"
#include "base/clock.h"
#include "front/metrics.h"

#define MiB ((uint64_t)1 << 20)

static struct mtd_vm *add_vm(struct mtd_daemon *d, const char *name)
{
	struct mtd_vm *vm;
	assert_int_equal(mtd_vm_new(&d->vm_host, name, "", &d->cfg.defaults, &vm), 0);
	assert_int_equal(mtd_registry_add(&d->registry, vm), 0);
	return vm;
}

/* Gauges that carry no unit suffix: booleans, states and plain counts of things. */
static const char *const unitless_gauges[] = {
    "memtide_up",
    "memtide_libvirt_connected",
    "memtide_host_under_pressure",
    "memtide_vms",
    "memtide_vm_state",
    "memtide_vm_pageout_state",
    "memtide_vm_cgroup_incompressible",
    "memtide_vm_return_by_reclaim",
    "memtide_vm_refused_steps_in_a_row",
    "memtide_vm_controller_output",
    "memtide_vm_agent_connected",
    "memtide_vm_agent_untrusted",
    "memtide_vm_free_page_reporting",
    "memtide_observe_only",
    "memtide_vm_observe_only",
    "memtide_vm_peer_unresponsive",
    "memtide_vm_behind",
};
static const char *const boolean_gauges[] = {
    "memtide_vm_peer_unresponsive",
    "memtide_vm_behind",
    "memtide_observe_only",
    "memtide_vm_observe_only",
    "memtide_up",
    "memtide_libvirt_connected",
    "memtide_host_under_pressure",
    "memtide_vm_state",
    "memtide_vm_pageout_state",
    "memtide_vm_cgroup_incompressible",
    "memtide_vm_return_by_reclaim",
    "memtide_vm_agent_connected",
    "memtide_vm_agent_untrusted",
    "memtide_vm_free_page_reporting",
};

/* Gauges named "per second" that are settings, not measurements (no counter can hold them). */
static const char *const setting_gauges[] = {
    "memtide_vm_refault_target_ratio_per_second",
};

static bool in(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return true;
	return false;
}

static bool ends(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

#define MAX_SERIES 512
struct parsed {
	char family[MAX_SERIES][96];
	char type[MAX_SERIES][16];
	unsigned nr_families;
	char series[MAX_SERIES][256];
	double value[MAX_SERIES];
	unsigned nr_series;
};

/* Parse and check the rules that need no knowledge of the figures. */
static void check_format(const char *text, struct parsed *p)
{
	char *copy = strdup(text), *save = NULL;
	char cur[96] = "", cur_type[16] = "";
	bool help_seen = false;

	assert_non_null(copy);
	memset(p, 0, sizeof(*p));
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[96], rest[128], type[16];
		if (sscanf(line, "# HELP %95s %127[^\n]", name, rest) == 2) {
			for (unsigned i = 0; i < p->nr_families; i++)
				if (!strcmp(p->family[i], name))
					fail_msg("family %s appears twice", name);
			snprintf(cur, sizeof(cur), "%s", name);
			help_seen = true;
			cur_type[0] = '\0';
			continue;
		}
		if (sscanf(line, "# TYPE %95s %15s", name, type) == 2) {
			if (!help_seen || strcmp(name, cur) != 0 || cur_type[0])
				fail_msg("TYPE of %s not right after its one HELP", name);
			if (strcmp(type, "gauge") != 0 && strcmp(type, "counter") != 0 &&
			    strcmp(type, "summary") != 0)
				fail_msg("%s: type %s", name, type);
			if (!strcmp(type, "summary") && !ends(name, "_seconds"))
				fail_msg("%s: a summary with no base unit in its name", name);
			if (!strcmp(type, "gauge") && ends(name, "_per_second") &&
			    !in(name, setting_gauges,
				sizeof(setting_gauges) / sizeof(setting_gauges[0])))
				fail_msg("%s: a rate exported as a gauge (make it a counter)",
					 name);
			snprintf(cur_type, sizeof(cur_type), "%s", type);
			assert_true(p->nr_families < MAX_SERIES);
			snprintf(p->family[p->nr_families], sizeof(p->family[0]), "%s", name);
			snprintf(p->type[p->nr_families++], sizeof(p->type[0]), "%s", type);
			/* Naming: the namespace, counters _total, everything else a unit. */
			if (strncmp(name, "memtide_", 8) != 0)
				fail_msg("%s: not in the memtide_ namespace", name);
			if (!strcmp(type, "counter") != ends(name, "_total"))
				fail_msg("%s: a %s %s _total", name, type,
					 ends(name, "_total") ? "ends in" : "without");
			if (!strcmp(type, "gauge") && !ends(name, "_bytes") &&
			    !ends(name, "_seconds") && !ends(name, "_ratio") &&
			    !ends(name, "_per_second") && !ends(name, "_info") &&
			    !in(name, unitless_gauges,
				sizeof(unitless_gauges) / sizeof(unitless_gauges[0])))
				fail_msg("%s: a gauge with no base unit in its name", name);
			const char *non_base[] = {"per_minute", "percent", "_pages",
						  "_ms",        "_mib",    "_kb"};
			for (size_t i = 0; i < sizeof(non_base) / sizeof(non_base[0]); i++)
				if (strstr(name, non_base[i]))
					fail_msg("%s: non-base unit '%s'", name, non_base[i]);
			continue;
		}
		if (line[0] == '#')
			fail_msg("stray comment: %s", line);
		/* A sample: NAME[{LABELS}] VALUE */
		char *sp = strrchr(line, ' ');
		assert_non_null(sp);
		*sp = '\0';
		char *end;
		errno = 0;
		double v = strtod(sp + 1, &end);
		if (errno || *end || end == sp + 1)
			fail_msg("%s: value '%s' is not a number", line, sp + 1);
		size_t nlen = strcspn(line, "{"), clen = strlen(cur);
		bool own = nlen == clen && strncmp(line, cur, nlen) == 0;
		/* a summary's samples: NAME{...,quantile=...}, NAME_sum, NAME_count */
		if (!own && !strcmp(cur_type, "summary") && strncmp(line, cur, clen) == 0 &&
		    (!strncmp(line + clen, "_sum", nlen - clen) ||
		     !strncmp(line + clen, "_count", nlen - clen)) &&
		    (nlen - clen == 4 || nlen - clen == 6))
			own = true;
		else if (own && !strcmp(cur_type, "summary") && !strstr(line, "quantile=\""))
			own = false;
		if (!own || !cur_type[0])
			fail_msg("sample %s outside its family (current: %s)", line, cur);
		for (unsigned i = 0; i < p->nr_series; i++)
			if (!strcmp(p->series[i], line))
				fail_msg("series %s twice", line);
		assert_true(p->nr_series < MAX_SERIES);
		snprintf(p->series[p->nr_series], sizeof(p->series[0]), "%s", line);
		p->value[p->nr_series++] = v;
		if (ends(cur, "_ratio") && (v < 0 || v > 1))
			fail_msg("%s: ratio %g outside [0, 1]", line, v);
		if (in(cur, boolean_gauges, sizeof(boolean_gauges) / sizeof(boolean_gauges[0])) &&
		    v != 0 && v != 1)
			fail_msg("%s: 0/1 gauge at %g", line, v);
		if (v < 0)
			fail_msg("%s: negative", line);
	}
	free(copy);
}

static double value_of(const struct parsed *p, const char *series)
{
	for (unsigned i = 0; i < p->nr_series; i++)
		if (!strcmp(p->series[i], series))
			return p->value[i];
	fail_msg("no series %s", series);
	return -1;
}

static unsigned count_prefix(const struct parsed *p, const char *prefix)
{
	unsigned n = 0;
	for (unsigned i = 0; i < p->nr_series; i++)
		n += strncmp(p->series[i], prefix, strlen(prefix)) == 0;
	return n;
}

static void test_rendering_follows_the_rules(void **state)
{
	struct mtd_config cfg;
	struct mtd_daemon *d;
	struct parsed *p = calloc(1, sizeof(*p));
	(void)state;

	mtd_config_default(&cfg);
	assert_int_equal(mtd_daemon_new(&cfg, &d), 0);
	rcu_register_thread();

	/* VM 1: attaching, no data at all. */
	struct mtd_vm *empty = add_vm(d, "empty");
	assert_int_equal(mtd_vm_publish(empty), 0);
	/* VM 2: every figure. */
	struct mtd_vm *full = add_vm(d, "full");
	struct mtd_vm_status *st = &full->draft;
	st->state = MTD_VM_ACTIVE;
	st->max_bytes = 2048 * MiB;
	st->balloon_target_bytes = st->balloon_actual_bytes = 1536 * MiB;
	st->target_bytes = 1400 * MiB;
	st->working_set_bytes = 1200 * MiB;
	for (unsigned i = 0; i < MTD_WSS_BINS; i++) {
		st->wss_age_ms[i] = 5000u << (2 * i);
		st->wss_bytes[i] = (900 + 100 * i) * MiB;
	}
	st->nr_gens = 4;
	for (unsigned i = 0; i < 4; i++)
		st->gen_pages[i] = 1000 * (i + 1);
	st->refault_rate_per_min = 0.006; /* 0.0001 per second */
	st->resident_bytes = 1300 * MiB;
	st->guest_psi_some_avg10 = 12.5; /* percent: 0.125 as a ratio */
	st->guest_psi_known = true;
	st->guest_mem_available_bytes = 600 * MiB;
	st->host_rss_bytes = 1100 * MiB;
	st->tick_gap_ms = 2000;
	st->agent_connected = true;
	st->agent_rtt_tracked = true;
	st->agent_rtt_samples = 40;
	st->agent_rtt_p50_us = 800;
	st->agent_rtt_p99_us = 4000;
	st->agent_rtt_count = 90;
	st->agent_rtt_sum_us = 90000;
	st->returned_bytes = 512 * MiB;
	st->untouched_bytes = 692 * MiB;
	st->counters.inflations = 7;
	st->counters.inflated_bytes = 448 * MiB;
	st->counters.reclaimed_bytes = 300 * MiB;
	assert_int_equal(mtd_vm_publish(full), 0);
	/* VM 3: a name that needs escaping in a label value. */
	struct mtd_vm *odd = add_vm(d, "we\"ird\\vm");
	assert_int_equal(mtd_vm_publish(odd), 0);

	pthread_mutex_lock(&d->host.lock);
	d->host.status.nr_vms = 3;
	d->host.status.libvirt_connected = 1;
	d->host.status.pressure_episodes = 2;
	d->host.status.updated_ms = mtd_mono_ms();
	d->host.status.interval_ms = 2000;
	pthread_mutex_unlock(&d->host.lock);

	char *text = mtd_metrics_render(d);
	assert_non_null(text);
	const char *out = getenv("METRICS_SAMPLE_OUT");
	if (out) {
		FILE *f = fopen(out, "w");
		assert_non_null(f);
		fputs(text, f);
		fclose(f);
	}
	check_format(text, p);

	/* The figures, in base units. */
	assert_true(
	    value_of(p, "memtide_build_info{version=\"" MTD_VERSION "\",mode=\"libvirt\"}") == 1);
	assert_true(value_of(p, "memtide_up") == 1);
	assert_true(value_of(p, "memtide_libvirt_connected") == 1);
	assert_true(value_of(p, "memtide_host_pressure_episodes_total") == 2);
	assert_true(value_of(p, "memtide_vm_balloon_inflations_total{domain=\"full\"}") == 7);
	assert_true(value_of(p, "memtide_vm_balloon_inflated_bytes_total{domain=\"full\"}") ==
		    448.0 * MiB);
	assert_true(value_of(p, "memtide_vm_reclaimed_bytes_total{domain=\"full\"}") ==
		    300.0 * MiB);
	/* Honest figures: what memtide returned, apart from what the guest never used. */
	assert_true(value_of(p, "memtide_vm_returned_bytes{domain=\"full\"}") == 512.0 * MiB);
	assert_true(value_of(p, "memtide_vm_untouched_bytes{domain=\"full\"}") == 692.0 * MiB);
	assert_true(value_of(p, "memtide_vm_resident_bytes{domain=\"full\"}") == 1300.0 * MiB);
	assert_true(value_of(p, "memtide_vm_host_rss_bytes{domain=\"full\"}") == 1100.0 * MiB);
	assert_true(value_of(p, "memtide_vm_guest_memory_available_bytes{domain=\"full\"}") ==
		    600.0 * MiB);
	assert_true(value_of(p, "memtide_vm_tick_gap_seconds{domain=\"full\"}") == 2.0);
	/* The round trips: a summary. */
	assert_true(value_of(p, "memtide_vm_agent_rtt_seconds{domain=\"full\",quantile=\"0.5\"}") ==
		    0.0008);
	assert_true(
	    value_of(p, "memtide_vm_agent_rtt_seconds{domain=\"full\",quantile=\"0.99\"}") ==
	    0.004);
	assert_true(value_of(p, "memtide_vm_agent_rtt_seconds_sum{domain=\"full\"}") == 0.09);
	assert_true(value_of(p, "memtide_vm_agent_rtt_seconds_count{domain=\"full\"}") == 90);
	/* What memtided does not know has no sample: the empty VM has none of these. */
	const char *unknown[] = {"memtide_vm_host_rss_bytes",
				 "memtide_vm_untouched_bytes",
				 "memtide_vm_resident_bytes",
				 "memtide_vm_guest_memory_available_bytes",
				 "memtide_vm_guest_psi_memory_some_avg10_ratio",
				 "memtide_vm_tick_gap_seconds",
				 "memtide_vm_agent_rtt_seconds"};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		char prefix[128];

		snprintf(prefix, sizeof(prefix), "%s{domain=\"empty\"", unknown[i]);
		if (count_prefix(p, prefix))
			fail_msg("%s: a sample for a VM that has no such figure yet", unknown[i]);
		snprintf(prefix, sizeof(prefix), "%s{domain=\"full\"", unknown[i]);
		if (!count_prefix(p, prefix))
			fail_msg("%s: no sample for the VM that has it", unknown[i]);
	}
	assert_true(value_of(p, "memtide_vm_guest_psi_memory_some_avg10_ratio{domain=\"full\"}") ==
		    0.125);
	assert_true(value_of(p, "memtide_vm_generation_bytes{domain=\"full\",gen=\"0\"}") ==
		    1000.0 * 4096);
	assert_true(value_of(p, "memtide_vm_state{domain=\"full\",state=\"active\"}") == 1);
	assert_true(value_of(p, "memtide_vm_state{domain=\"full\",state=\"agent-silent\"}") == 0);
	/* Working set by age: four ages for the VM with data, none for the empty one. */
	assert_int_equal(count_prefix(p, "memtide_vm_working_set_by_age_bytes{domain=\"full\""), 4);
	assert_int_equal(count_prefix(p, "memtide_vm_working_set_by_age_bytes{domain=\"empty\""),
			 0);
	/* Every per-VM family has the escaped name. */
	assert_true(value_of(p, "memtide_vm_max_bytes{domain=\"we\\\"ird\\\\vm\"}") == 0);
	/* Every counter is there for every VM. */
	for (unsigned i = 0; i < p->nr_families; i++) {
		char prefix[128];
		if (strcmp(p->type[i], "counter") != 0 ||
		    strncmp(p->family[i], "memtide_host_", 13) == 0)
			continue;
		snprintf(prefix, sizeof(prefix), "%s{", p->family[i]);
		assert_int_equal(count_prefix(p, prefix), 3);
	}
	free(text);

	/* In plain-QEMU mode there is no libvirt: no libvirt gauge rather than a false 0; a
	 * main loop that has not ticked for three intervals is not up. */
	pthread_mutex_lock(&d->host.lock);
	d->host.status.libvirt_connected = -1;
	d->host.status.updated_ms = mtd_mono_ms() - 7000;
	pthread_mutex_unlock(&d->host.lock);
	text = mtd_metrics_render(d);
	check_format(text, p);
	assert_null(strstr(text, "memtide_libvirt_connected"));
	assert_true(value_of(p, "memtide_up") == 0);
	assert_non_null(strstr(text, "mode=\"qemu\""));
	free(text);

	struct mtd_vm *vms[] = {empty, full, odd};
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(mtd_registry_del(&d->registry, vms[i]), 0);
	synchronize_rcu();
	for (size_t i = 0; i < 3; i++)
		mtd_vm_free(vms[i]);
	rcu_unregister_thread();
	rcu_barrier();
	mtd_daemon_free(d);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rendering_follows_the_rules),
	};
	return cmocka_run_group_tests_name("mtd_metrics", tests, NULL, NULL);
}
