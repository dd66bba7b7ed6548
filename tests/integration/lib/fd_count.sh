#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fd_count.sh: count a daemon's open fds for a leak check (sourced by host_restart.sh and
# host_lifecycle.sh, which run 100 cycles of something and compare the count before and
# after).
#
# memtided opens files for a moment all the time (each VM's loop reads /proc and the host's
# meminfo every interval, saves its state file, answers a control connection; a detached VM
# closes its eventfd after an RCU grace period), so one reading is no measure: CI read
# 21 -> 22 once and 24 -> 25 once, with the same fds listed before and after.  A leaked fd is
# in every reading, so the count is the lowest of 20 readings, 50 ms apart.

# fds PID: the number of fds PID holds now.
fds() { ls "/proc/$1/fd" | wc -l; }

# fds_low PID: the lowest of 20 readings of fds PID, 50 ms apart (about 1 s).
fds_low() {
	local low c
	low=$(fds "$1")
	for _ in $(seq 19); do
		sleep 0.05
		c=$(fds "$1")
		[ "$c" -lt "$low" ] && low=$c
	done
	echo "$low"
}
