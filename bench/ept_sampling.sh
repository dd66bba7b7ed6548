#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ept_sampling.sh: what memtided's sampled access source sees of pages used every 1, 5 and
# 30 s (`make bench`, from scripts/bench.sh; JSON lines "ept_sampling" on stdout).
#
# A 1 GiB TCG guest boots with memtide's plugin and runs memload periodic: three sets of
# 16 MiB (4096 pages each), every page of a set touched once per period (1, 5 or 30 s),
# the pages' moments spread evenly over the period.  memtide-trace ept records what the
# ept source sees: rounds of 5 s (memtided's interval), one sampling window each, of 200 ms
# (the policy's default ept_window), 400, 800 and 1000 ms (the steps vmm_sample_update
# takes, up to its cap at a fifth of the interval), 90 s each, with the window at a random
# moment of each round (as memtided places it) and right after each round (as it did
# before: a page used every second sits in step with the rounds, and the same share of the
# set is seen every round while the rest is never seen).  ept-sightings scores
# each set per window: the share seen per round, the share seen again in the next round
# (the window's own estimate of its catch), and the idle ages between sightings the
# generations would read.  About 14 minutes.  Needs QEMU and the guest image; without them
# it prints nothing and says why on stderr.
set -u
BUILD=${BUILD:-build}
. "$(dirname "$0")/../tests/e2e/lib.sh"
e2e_init ept_sampling
E2E_JSON= # figures go to stdout, not to build/e2e
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
EPOCHS=${EPT_SAMPLING_EPOCHS:-18}
WINDOWS=${EPT_SAMPLING_WINDOWS:-200 400 800 1000}
PHASES=${EPT_SAMPLING_PHASES:-random fixed}
say() { echo "ept_sampling.sh: $*" >&2; }
command -v qemu-system-x86_64 >/dev/null || { say "no qemu-system-x86_64: skipped"; exit 0; }
[ -f "$PLUGIN" ] && [ -x "$BUILD/bin/ept-sightings" ] || { say "not built: skipped"; exit 0; }
e2e_build >/dev/null 2>&1 || { say "cannot build the guest image: skipped"; exit 0; }
rc=0
table=$E2E_DIR/periodic.ept
n=0
for w in $WINDOWS; do for p in $PHASES; do n=$((n + 1)); done; done
secs=$(((EPOCHS * 5 + 10) * n + 120))
e2e_boot 1024 "memload periodic 16 $secs 1 5 30" "memtide.agent=0" \
	-plugin "$PLUGIN,table=$table,ram=1024M"
if ! e2e_wait 'WL-PAGES-END' 180 >/dev/null; then
	say "the guest did not start its workload"
	exit 1
fi
awk '$1 == "WL-PAGES" && NF == 4 { print $2, $3, $4 }' "$E2E_CONSOLE" | tr -d '\r' >"$E2E_DIR/sets"
for w in $WINDOWS; do
	for phase in $PHASES; do
		trace=$E2E_DIR/periodic-$w-$phase.mtt
		rp=()
		[ "$phase" = random ] && rp=(--random-phase)
		if "$BUILD/bin/memtide-trace" ept --epoch-ms 5000 --epochs "$EPOCHS" --window "$w" \
			"${rp[@]}" --name "periodic-$w-$phase" -o "$trace" "$table" \
			>"$E2E_DIR/rec-$w-$phase.json" 2>"$E2E_DIR/rec.err"; then
			"$BUILD/bin/ept-sightings" "$trace" "$E2E_DIR/sets" "window_${w}ms_$phase" |
				python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    d["window_ms"], d["phase"] = int(sys.argv[1]), sys.argv[2]
    d["period_s"] = float(d["set"][1:])
    print(json.dumps(d))' "$w" "$phase" || rc=1
		else
			say "window $w ms ($phase): $(cat "$E2E_DIR/rec.err")"
			rc=1
		fi
	done
done
kill "$E2E_QEMU_PID" 2>/dev/null
wait "$E2E_QEMU_PID" 2>/dev/null
exit $rc
