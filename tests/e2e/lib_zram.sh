#!/bin/bash
# lib_zram.sh: a zram swap device of the test's own, sourced after lib.sh.
#
# Host swap is host-global: a test adds its own device through /sys/class/zram-control/hot_add
# (never /dev/zram0, which the operator may use), swaps on it at a priority above any other
# swap so that host-side eviction lands there, and removes it when the test ends, after every
# process the harness started is gone (swapoff then has nothing to read back).  Run tests that
# use it under the shared lock (flock /tmp/memtide-heavy.lock).
#   e2e_zram_add SIZE [ALGO]   sets E2E_ZRAM (the device number); status 1 with a reason on
#                              stderr when zram is not available
#   e2e_zram_stat              "orig_data_size mem_used_total" of it, bytes
E2E_ZRAM=

e2e_zram_remove() {
	[ -n "$E2E_ZRAM" ] || return 0
	swapoff "/dev/zram$E2E_ZRAM" 2>/dev/null
	echo "$E2E_ZRAM" >/sys/class/zram-control/hot_remove 2>/dev/null ||
		echo "lib_zram.sh: could not remove zram$E2E_ZRAM" >&2
	E2E_ZRAM=
}

# Runs lib.sh's cleanup (every started process stopped, figures written) first.
e2e_zram_cleanup() {
	e2e_cleanup
	e2e_zram_remove
}

e2e_zram_add() {
	local size=$1 algo=${2:-}
	if [ ! -w /sys/class/zram-control/hot_add ]; then
		echo "lib_zram.sh: no /sys/class/zram-control (zram not built in, or not root)" >&2
		return 1
	fi
	E2E_ZRAM=$(cat /sys/class/zram-control/hot_add) || return 1
	trap e2e_zram_cleanup EXIT
	[ -n "$algo" ] && echo "$algo" >"/sys/block/zram$E2E_ZRAM/comp_algorithm" 2>/dev/null
	if ! echo "$size" >"/sys/block/zram$E2E_ZRAM/disksize" ||
		! mkswap "/dev/zram$E2E_ZRAM" >/dev/null ||
		! swapon -p 32767 "/dev/zram$E2E_ZRAM"; then
		echo "lib_zram.sh: cannot set up zram$E2E_ZRAM as swap" >&2
		e2e_zram_remove
		return 1
	fi
}

e2e_zram_stat() {
	awk '{print $1, $3}' "/sys/block/zram$E2E_ZRAM/mm_stat"
}
