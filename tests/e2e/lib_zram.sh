#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# lib_zram.sh: a zram swap device of the test's own, sourced after lib.sh.
#
# Host swap is host-global: a test adds its own device through /sys/class/zram-control/hot_add
# (never /dev/zram0, which the operator may use), swaps on it at a priority above any other
# swap so that host-side eviction lands there, and removes it when the test ends, after every
# process the harness started is gone (swapoff then has nothing to read back).  The EXIT trap
# is in place before the device exists, and lib.sh turns INT and TERM (tests/run.sh's timeout)
# into that exit.  A test killed with SIGKILL cannot clean up: each device is recorded in
# /tmp/memtide-e2e-zram.N with its owner's PID, and the next e2e_zram_add removes the devices
# whose owner is gone.  Run tests that use it under the shared lock (flock
# /tmp/memtide-heavy.lock).
#   e2e_zram_add SIZE [ALGO]   sets E2E_ZRAM (the device number); status 1 when the host
#                              cannot give the test a zram swap, with the reason in
#                              E2E_ZRAM_WHY (and on stderr): the test SKIPs with it
#   e2e_zram_stat              "orig_data_size mem_used_total" of it, bytes
E2E_ZRAM=
E2E_ZRAM_WHY=
E2E_ZRAM_REC=/tmp/memtide-e2e-zram

# _e2e_zram_drop N: swapoff and hot_remove zram N, and forget its record.
_e2e_zram_drop() {
	swapoff "/dev/zram$1" 2>/dev/null
	if [ -e "/sys/block/zram$1" ] && ! echo "$1" >/sys/class/zram-control/hot_remove 2>/dev/null; then
		echo "lib_zram.sh: could not remove zram$1" >&2
		return 1
	fi
	rm -f "$E2E_ZRAM_REC.$1"
}

e2e_zram_remove() {
	[ -n "$E2E_ZRAM" ] || return 0
	_e2e_zram_drop "$E2E_ZRAM"
	E2E_ZRAM=
}

# Runs lib.sh's cleanup (every started process stopped, figures written) first.
e2e_zram_cleanup() {
	e2e_cleanup
	e2e_zram_remove
}

# Devices left by a test that was killed outright (its owner PID no longer runs).
_e2e_zram_sweep() {
	local rec n pid
	for rec in "$E2E_ZRAM_REC".*; do
		[ -f "$rec" ] || continue
		n=${rec##*.} pid=$(cat "$rec" 2>/dev/null)
		[[ $n =~ ^[0-9]+$ ]] || continue
		if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "lib_zram.sh: removing zram$n left by a killed test (pid ${pid:-?})" >&2
			_e2e_zram_drop "$n"
		fi
	done
}

e2e_zram_add() {
	local size=$1 algo=${2:-}
	if [ "$(id -u)" != 0 ]; then
		E2E_ZRAM_WHY="needs root for a zram swap device"
	elif ! command -v swapon >/dev/null || ! command -v mkswap >/dev/null; then
		E2E_ZRAM_WHY="no swapon/mkswap (util-linux)"
	elif [ ! -e /proc/swaps ]; then
		E2E_ZRAM_WHY="the kernel has no swap support (no /proc/swaps)"
	else
		# A fresh host may not have loaded the module; num_devices=0 adds no zram0.
		[ -e /sys/class/zram-control/hot_add ] || modprobe zram num_devices=0 2>/dev/null
		[ -e /sys/class/zram-control/hot_add ] ||
			E2E_ZRAM_WHY="no zram on this host (/sys/class/zram-control missing, modprobe zram failed)"
	fi
	if [ -n "$E2E_ZRAM_WHY" ]; then
		echo "lib_zram.sh: $E2E_ZRAM_WHY" >&2
		return 1
	fi
	_e2e_zram_sweep
	trap e2e_zram_cleanup EXIT
	if ! E2E_ZRAM=$(cat /sys/class/zram-control/hot_add 2>/dev/null) || [ -z "$E2E_ZRAM" ]; then
		E2E_ZRAM="" E2E_ZRAM_WHY="zram hot_add failed (no free device)"
		echo "lib_zram.sh: $E2E_ZRAM_WHY" >&2
		return 1
	fi
	echo $$ >"$E2E_ZRAM_REC.$E2E_ZRAM"
	[ -n "$algo" ] && echo "$algo" >"/sys/block/zram$E2E_ZRAM/comp_algorithm" 2>/dev/null
	if ! echo "$size" >"/sys/block/zram$E2E_ZRAM/disksize" ||
		! mkswap "/dev/zram$E2E_ZRAM" >/dev/null ||
		! swapon -p 32767 "/dev/zram$E2E_ZRAM"; then
		E2E_ZRAM_WHY="cannot set up zram$E2E_ZRAM as swap (swapon refused: a container?)"
		echo "lib_zram.sh: $E2E_ZRAM_WHY" >&2
		e2e_zram_remove
		return 1
	fi
}

e2e_zram_stat() {
	awk '{print $1, $3}' "/sys/block/zram$E2E_ZRAM/mm_stat"
}
