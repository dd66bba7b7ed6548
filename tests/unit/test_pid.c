// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_pid.c - the general PID controller (vmm/pid.c).
 *
 * The plant: two first-order lags in series (gain 2, time constants 10 s and 3 s), the
 * shape of most things memtide controls (a threshold acts on evictions, evictions on
 * refaults, each with its own delay).  Two lags make oscillation possible: a loop with
 * too much gain rings.  After a setpoint step the output must settle without growing
 * oscillation: overshoot bounded, every peak of the error smaller than the one before,
 * and within 2% of the setpoint from some time on.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vmm.h"

#define DT_S 0.5

struct plant {
	double x1, y; /* first lag's state, output */
};

static double plant_step(struct plant *p, double u)
{
	p->x1 += DT_S / 10.0 * (2.0 * u - p->x1);
	p->y += DT_S / 3.0 * (p->x1 - p->y);
	return p->y;
}

struct run {
	double overshoot; /* max(y - sp) / sp */
	double peaks[32]; /* |error| at each local extremum of the error after the step */
	int nr_peaks;
	double settled_at_s; /* from then on |y - sp| <= 2% sp */
};

static void simulate(const struct vmm_pid_config *cfg, double sp, double seconds, struct run *r)
{
	struct vmm_pid pid;
	struct plant p = {0};
	double prev_e = 0, prev_de = 0;

	vmm_pid_init(&pid, cfg);
	*r = (struct run){.settled_at_s = -1};
	for (int k = 0; k * DT_S < seconds; k++) {
		double u = vmm_pid_update(&pid, sp, p.y, DT_S);
		assert_true(u >= cfg->out_min && u <= cfg->out_max);
		double y = plant_step(&p, u);
		double e = y - sp;
		if (e / sp > r->overshoot)
			r->overshoot = e / sp;
		double de = e - prev_e;
		/* Peaks below 1e-6 of the setpoint are rounding, not oscillation. */
		if (k > 1 && ((prev_de > 0 && de <= 0) || (prev_de < 0 && de >= 0)) &&
		    fabs(prev_e) > 1e-6 * sp && r->nr_peaks < 32)
			r->peaks[r->nr_peaks++] = fabs(prev_e);
		if (fabs(e) > 0.02 * sp)
			r->settled_at_s = -1;
		else if (r->settled_at_s < 0)
			r->settled_at_s = k * DT_S;
		prev_e = e;
		prev_de = de;
	}
}

static void test_step_settles(void **state)
{
	struct vmm_pid_config cfg = {
	    .kp = 0.8, .ki = 0.1, .kd = 1.0, .out_min = 0, .out_max = 10, .d_smoothing = 0.5};
	struct run r;

	(void)state;
	simulate(&cfg, 5.0, 300, &r);
	assert_true(r.overshoot < 0.15);
	assert_true(r.nr_peaks >= 1);
	for (int i = 1; i < r.nr_peaks; i++)
		assert_true(r.peaks[i] < r.peaks[i - 1]);
	assert_true(r.settled_at_s >= 0 && r.settled_at_s < 120);
	print_message("pid: overshoot %.1f%%, %d peaks, settled (2%%) at %.0f s\n",
		      r.overshoot * 100, r.nr_peaks, r.settled_at_s);

	/* The same loop with 8x the gains rings: the checks above are able to fail. */
	cfg.kp *= 8;
	cfg.ki *= 8;
	cfg.kd = 0;
	cfg.out_max = 1000;
	simulate(&cfg, 5.0, 300, &r);
	assert_true(r.overshoot > 0.15);
	print_message("pid: 8x gains: overshoot %.1f%%\n", r.overshoot * 100);
}

/* A setpoint out of reach saturates the output for a long time; when it comes back in
 * reach the output must leave saturation at once, not after unwinding an integral. */
static void test_anti_windup(void **state)
{
	struct vmm_pid_config cfg = {.kp = 0.5, .ki = 0.5, .out_min = 0, .out_max = 1};
	struct vmm_pid pid;
	struct plant p = {0};

	(void)state;
	vmm_pid_init(&pid, &cfg);
	for (int k = 0; k < 2000; k++) /* sp 10, the plant reaches 2 at most */
		plant_step(&p, vmm_pid_update(&pid, 10.0, p.y, DT_S));
	assert_true(pid.output == 1.0);
	assert_true(pid.integral <= cfg.out_max); /* never wound beyond the limit */
	int k;
	for (k = 0; k < 100; k++)
		if (vmm_pid_update(&pid, 0.5, p.y, DT_S) < 1.0)
			break;
	assert_true(k <= 2);
}

/* Derivative on measurement: a setpoint step alone does not kick the output. */
static void test_no_derivative_kick(void **state)
{
	struct vmm_pid_config cfg = {.kd = 10, .out_min = -100, .out_max = 100, .d_smoothing = 1};
	struct vmm_pid pid;

	(void)state;
	vmm_pid_init(&pid, &cfg);
	assert_true(vmm_pid_update(&pid, 0, 1.0, 1.0) == 0.0);
	assert_true(vmm_pid_update(&pid, 50, 1.0, 1.0) == 0.0);   /* sp step, same measurement */
	assert_true(vmm_pid_update(&pid, 50, 2.0, 1.0) == -10.0); /* measurement rises 1/s */
	/* Bad input changes nothing. */
	assert_true(vmm_pid_update(&pid, 50, NAN, 1.0) == -10.0);
	assert_true(vmm_pid_update(&pid, 50, 3.0, 0.0) == -10.0);
}

/* Smoothing: the derivative of a noisy measurement varies less with d_smoothing < 1. */
static void test_derivative_smoothing(void **state)
{
	double var[2];

	(void)state;
	for (int s = 0; s < 2; s++) {
		struct vmm_pid_config cfg = {
		    .kd = 1, .out_min = -1e9, .out_max = 1e9, .d_smoothing = s ? 0.1 : 1.0};
		struct vmm_pid pid;
		double sum = 0, sum2 = 0;
		uint64_t x = 88172645463325252ULL;
		vmm_pid_init(&pid, &cfg);
		for (int k = 0; k < 2000; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			double noise = (double)(x % 1000) / 1000.0 - 0.5;
			double u = vmm_pid_update(&pid, 0, noise, 1.0);
			sum += u;
			sum2 += u * u;
		}
		var[s] = sum2 / 2000 - (sum / 2000) * (sum / 2000);
	}
	assert_true(var[1] < var[0] / 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_step_settles),
	    cmocka_unit_test(test_anti_windup),
	    cmocka_unit_test(test_no_derivative_kick),
	    cmocka_unit_test(test_derivative_smoothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
