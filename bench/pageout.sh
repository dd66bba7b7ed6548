#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# pageout.sh: pageout-bench with a host swap of its own (`make bench`, from scripts/bench.sh;
# JSON lines on stdout).
#
# pageout-bench's throughput, swapped-scan and refault figures need room in host swap.  As
# root on a host with zram, this adds a 512 MiB zram swap device for the run (lib_zram.sh:
# hot_add, priority above any other swap, removed on exit, INT and TERM included) so that
# `make bench` measures host-side eviction into zram, memtided's default setup.  Without root
# or zram it runs pageout-bench on whatever swap the host has (the figures that need swap
# then print "skipped" lines with the reason).  Seconds.
set -u
BUILD=${BUILD:-build}
. "$(dirname "$0")/../tests/e2e/lib.sh"
. "$(dirname "$0")/../tests/e2e/lib_zram.sh"
e2e_init pageout_bench
E2E_JSON= # figures go to stdout, not to build/e2e
[ -x "$BUILD/bin/pageout-bench" ] || { echo "pageout.sh: pageout-bench not built: skipped" >&2; exit 0; }
if e2e_zram_add 512M; then
	echo "pageout.sh: zram$E2E_ZRAM (512 MiB) as swap for the run" >&2
else
	echo "pageout.sh: no zram swap of its own ($E2E_ZRAM_WHY): the host's swap as it is" >&2
fi
"$BUILD/bin/pageout-bench"
