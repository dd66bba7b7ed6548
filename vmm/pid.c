// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pid.c - a general PID controller (Part 6 of libvmm, PID control).
 *
 * Used by the reclaim controller (reclaim_ctl.c), and meant for any other loop memtide
 * closes (the host's balloon policy may use it too).  The textbook form
 *
 *     u = kp * e + ki * integral(e dt) + kd * de/dt,     e = setpoint - measurement
 *
 * with the four changes every practical PID needs, each for a stated reason:
 *
 *   1. Output limits: u is clamped to [out_min, out_max]; an actuator has a range.
 *   2. Anti-windup (conditional integration, plus a clamp): while the output is saturated
 *      and the error pushes it further out, the integral grows no further than to where
 *      the output reaches the limit; and the integral itself never leaves [out_min,
 *      out_max].  Without this, a long saturation (say the guest sits idle and the
 *      threshold is pinned at its minimum) builds an integral that takes as long again to
 *      unwind: the overshoot the tests look for.  (Keeping the old integral outright, as
 *      this did first, could stop the output short of the limit for good: the reclaim
 *      controller, started at 2 min under refaults at 100x its target, stopped at 56 min
 *      and never reached its longest age, 1 h, where it holds.)
 *   3. Derivative on measurement: the D term uses -d(measurement)/dt, not de/dt, so a step
 *      of the setpoint does not kick the output ("derivative kick").
 *   4. Derivative smoothing: an exponential moving average of the measurement's slope,
 *      deriv = a * slope + (1 - a) * deriv, a = d_smoothing in [0, 1] (1: no smoothing,
 *      0: the derivative stays 0).  Refault counts are noisy; an unsmoothed D amplifies it.
 *
 * The state (struct vmm_pid in vmm.h): integral is the ki-weighted sum, in output units,
 * so changing ki on the fly does not bump the output.  Bad input (dt_s <= 0, NaN) leaves
 * the state alone and returns the last output.  Cost: O(1).
 */
#include <math.h>
#include <string.h>

#include "vmm.h"

/* ======================================================================================
 * Part 6: PID control - the general controller
 * ====================================================================================== */

void vmm_pid_init(struct vmm_pid *pid, const struct vmm_pid_config *cfg)
{
	memset(pid, 0, sizeof(*pid));
	pid->cfg = *cfg;
	if (pid->cfg.out_max < pid->cfg.out_min)
		pid->cfg.out_max = pid->cfg.out_min;
	if (!(pid->cfg.d_smoothing >= 0.0)) /* also catches NaN */
		pid->cfg.d_smoothing = 0.0;
	if (pid->cfg.d_smoothing > 1.0)
		pid->cfg.d_smoothing = 1.0;
	pid->output = pid->cfg.out_min > 0.0 ? pid->cfg.out_min : 0.0;
	if (pid->output > pid->cfg.out_max)
		pid->output = pid->cfg.out_max;
}

static double clamp(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

double vmm_pid_update(struct vmm_pid *pid, double setpoint, double measurement, double dt_s)
{
	const struct vmm_pid_config *c = &pid->cfg;

	if (!(dt_s > 0.0) || !isfinite(setpoint) || !isfinite(measurement))
		return pid->output;
	double err = setpoint - measurement;

	/* Step 3 and 4: the smoothed slope of the measurement. */
	if (pid->primed) {
		double slope = (measurement - pid->prev_meas) / dt_s;
		pid->deriv = c->d_smoothing * slope + (1.0 - c->d_smoothing) * pid->deriv;
	}
	pid->prev_meas = measurement;
	pid->primed = true;

	double p = c->kp * err;
	double d = -c->kd * pid->deriv;
	double integral = clamp(pid->integral + c->ki * err * dt_s, c->out_min, c->out_max);
	double u = p + integral + d;

	/* Step 2: saturated and the error pushes further out: the integral goes only as far
	 * as puts the output at the limit (never back past where it was). */
	if (u > c->out_max && integral > pid->integral)
		integral = clamp(c->out_max - p - d, pid->integral, integral);
	else if (u < c->out_min && integral < pid->integral)
		integral = clamp(c->out_min - p - d, integral, pid->integral);
	pid->integral = integral;
	/* Step 1 */
	pid->output = clamp(p + integral + d, c->out_min, c->out_max);
	return pid->output;
}
