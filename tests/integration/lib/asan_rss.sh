#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# asan_rss.sh: memtided's RSS as a leak measure, in a sanitizer build too (sourced by
# host_lifecycle.sh and host_restart.sh, with BIN set, before they start memtided).
#
# make sanitize links memtided with libasan.  ASan does not hand a freed block out again at
# once: it holds it in a quarantine (256 MiB by default) to catch uses after free, so RSS
# rises with every free until the quarantine is full.  Over 100 QMP reconnects a sanitized
# memtided's RSS rose 37,056 -> 49,292 KiB and over 100 detach/attach cycles 270,444 ->
# 313,004 KiB, where the plain build's did not move (18,472 -> 18,472) and LeakSanitizer
# reported nothing at memtided's exit.  So a sanitized memtided runs with the quarantine off
# (a freed block stays poisoned until it is handed out again, so a use right after the free
# is still caught), and RSS measures what memtided holds again.  ASan's allocator still
# grows for a while before it settles (after 5 QMP reconnects, 100 more took 928 KiB; from
# the 60th on RSS stayed within 100 KiB over 240 more): RSS_SAN=1 tells a script to warm
# up longer.  Where memtided starts threads all the time (host_restart.sh: a loop thread per
# attach, a worker per bounded libvirt call) it never settles: over 200 detach/attach cycles
# RSS rose 4.5 MiB and ASan's heap 65.0 -> 67.1 MB while the bytes memtided held
# (__sanitizer_get_current_allocated_bytes, read with gdb) went 19,014,212 -> 19,005,468:
# there RSS_SAN=1 means RSS is no measure, and the plain build's check is the one that counts.

# rss_kib PID: VmRSS of PID, in KiB.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

RSS_SAN=0
if readelf -d "$BIN/memtided" 2>/dev/null | grep -q 'NEEDED.*libasan'; then
	RSS_SAN=1
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0
fi
