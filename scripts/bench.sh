#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bench.sh: `make bench`.  Runs every benchmark program and prints their JSON lines (one
# object per result, each with a "name" field) on stdout; progress and errors go to stderr.
# The lines are also kept in $BUILD/bench/results.jsonl.
set -u
BUILD=${BUILD:-build}
out=$BUILD/bench
mkdir -p "$out"
: >"$out/results.jsonl"
rc=0
for b in "$BUILD"/bin/*-bench; do
	[ -x "$b" ] || continue
	# pageout-bench runs from bench/pageout.sh, with a zram swap of its own.
	[ "$(basename "$b")" = pageout-bench ] && continue
	echo "bench.sh: running $(basename "$b")" >&2
	"$b" | tee -a "$out/results.jsonl" || rc=1
done
# memtided at scale: N simulated 4 GiB VMs through libvirt's test driver (daemon_scale lines;
# MEMTIDED_BEFORE=old/memtided adds the same cases with an older build, side by side).
if [ -x "$BUILD/bin/memtided" ]; then
	echo "bench.sh: running daemon_scale" >&2
	BUILD=$BUILD python3 bench/daemon_scale.py | tee -a "$out/results.jsonl" || rc=1
fi
if [ -x "$BUILD/bin/memtide-sim" ]; then
	echo "bench.sh: running memtide-sim bench" >&2
	"$BUILD/bin/memtide-sim" bench | tee -a "$out/results.jsonl" || rc=1
	# The most any policy without foresight can save on the zipf trace (docs/results.md).
	python3 sim/tools/zipf_online_bound.py | tee -a "$out/results.jsonl" || rc=1
	# Whether a page's own history beats the best single idle threshold (about a minute).
	python3 sim/tools/per_page_rules.py --sim "$BUILD/bin/memtide-sim" |
		tee -a "$out/results.jsonl" || rc=1
fi
# Host-side eviction into a zram swap device of its own (seconds).
echo "bench.sh: running bench/pageout.sh" >&2
BUILD=$BUILD bash bench/pageout.sh | tee -a "$out/results.jsonl" || rc=1
# The walker on live emulated-EPT tables of real TCG guests (boots QEMU: ~2 minutes).
echo "bench.sh: running bench/ept_live.sh" >&2
BUILD=$BUILD bash bench/ept_live.sh | tee -a "$out/results.jsonl" || rc=1
# What the sampled ept source sees of pages used every 1, 5 and 30 s (boots QEMU: ~10 min).
echo "bench.sh: running bench/ept_sampling.sh" >&2
BUILD=$BUILD bash bench/ept_sampling.sh | tee -a "$out/results.jsonl" || rc=1
echo "bench.sh: $(wc -l <"$out/results.jsonl") results in $out/results.jsonl" >&2
exit $rc
