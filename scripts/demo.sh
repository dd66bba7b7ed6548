#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# demo.sh: `make demo`: memtide handing a guest's cold memory back to the host, live.
#
# Boots a 1 GiB Debian guest under QEMU TCG (tests/e2e/lib.sh: plain QEMU, virtio-balloon with
# free page reporting, the agent's virtio-serial port, zram swap in the guest) running a
# workload with a 64 MiB hot set and 500 MiB of cold data (400 MiB anonymous, 100 MiB tmpfs).
# Fifteen seconds of the workload run without memtided (the baseline rate), then memtided starts
# in plain-QEMU mode and the demo shows `memtidectl top` every 2 s, with the guest's host
# memory measured beside it (Rss of its guest-RAM mapping) and the hot set's touch rate.  It ends with
# a summary: cold MiB, MiB returned to the host, refaults (guest swap-ins while the workload
# ran), workload slowdown (scripts/demo_speed.py: 90th percentiles, as scenario 2 uses).
# DEMO_JSON=FILE also writes that summary as one JSON object.  ~90 s; every process it
# started is stopped on exit (lib.sh's EXIT trap), the temporary directory removed.
# DEMO_AGENT=0 (`make demo DEMO_AGENT=0`) shows the agentless path instead: no agent and no
# swap in the guest; QEMU carries memtide's ept plugin (the access source) and the host gets
# a zram swap device of the demo's own (tests/e2e/lib_zram.sh; removed at the end), so
# memtided's return resolves to pageout and it evicts the cold pages itself.  The summary
# lines are the same; "returned" is then net of the zram pool's growth and "refaults" are
# the pages memtided saw read back from host swap.
# The hot-set rate under TCG is noisy (seen from 8.7 K to 110 M pages/s in one run): the
# slowdown figure compares 90th percentiles, says "none measurable" within 10%, and says why
# TCG moves.
set -u
BUILD=${BUILD:-build}
AGENT=${DEMO_AGENT:-1}
. "$(dirname "$0")/../tests/e2e/lib.sh"
. "$(dirname "$0")/../tests/e2e/lib_zram.sh"
e2e_init demo
E2E_JSON=
HOT=64 COLD_ANON=400 COLD_CACHE=100 SECS=80 BASE_S=15
echo "== memtide demo: building the guest image"
e2e_build || { echo "demo: cannot build the guest image" >&2; exit 1; }
[ -x "$BUILD/bin/memtided" ] || { echo "demo: $BUILD/bin/memtided is not built" >&2; exit 1; }
if [ "$AGENT" = 1 ]; then
	echo "== booting a 1 GiB guest: hot $HOT MiB, cold $COLD_ANON MiB anon + $COLD_CACHE MiB tmpfs"
	e2e_boot 1024 "memload hotcold $HOT $COLD_ANON $COLD_CACHE $SECS" "memtide.zram_mib=700 transparent_hugepage=never"
	MTD_ARGS=(--agent "$E2E_AGENT")
else
	PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
	[ -f "$PLUGIN" ] || { echo "demo: $PLUGIN is not built" >&2; exit 1; }
	e2e_zram_add 1G || { echo "demo: the agentless path needs zram on the host (root)" >&2; exit 1; }
	echo "== host swap: zram$E2E_ZRAM (1 GiB, the demo's own, removed at the end)"
	echo "== booting a 1 GiB guest with no agent and memtide's ept plugin: hot $HOT MiB, cold $COLD_ANON MiB anon + $COLD_CACHE MiB tmpfs"
	e2e_boot 1024 "memload hotcold $HOT $COLD_ANON $COLD_CACHE $SECS" "memtide.agent=0" \
		-plugin "$PLUGIN,table=$E2E_DIR/demo.ept,ram=1024M"
	printf '[daemon]\nept_dir = %s\n' "$E2E_DIR" >"$E2E_DIR/memtided.conf"
	MTD_ARGS=(--name demo --config "$E2E_DIR/memtided.conf")
fi
e2e_wait '^WL-FILLED' 120 >/dev/null || { echo "demo: workload did not start" >&2; exit 1; }
e2e_wait "^WL-RATE $BASE_S " 60 >/dev/null
# The console's per-second rates for seconds FROM..TO: "median min max" (0 0 0 if none).
rates_median() {
	grep -a '^WL-RATE' "$E2E_CONSOLE" | awk -v a="$1" -v b="$2" '$2 >= a && $2 <= b { print $3 }' |
		sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d %d %d\n", v[int((NR + 1) / 2)], v[1], v[NR]; else print 0, 0, 0 }'
}
read -r base _ < <(rates_median 3 "$BASE_S")
rss0=$(e2e_guest_rss_mib)
pool0=0
[ "$AGENT" = 1 ] || read -r _ pool0 < <(e2e_zram_stat)
echo "== baseline: $base pages/s, guest's host memory $rss0 MiB; starting memtided"
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" "${MTD_ARGS[@]}" --interval 2 --foreground \
	--no-metrics --socket "$E2E_DIR/ctl.sock" --state-dir "$E2E_DIR/state" --log-level info \
	2>"$E2E_DIR/memtided.log"
# The live view is memtidectl top (one frame every 2 s: the target, the balloon's actual size,
# working set, generations, memory saved), with the host-side measurement and the workload's
# rate under it.  memtided runs its defaults: return=reclaim, so the target falls while the
# balloon stays at 1024 MiB, and the memory comes back through the agent's reclaim and free
# page reporting (agentless: return resolves to pageout, and memtided pages the cold memory
# out to the host's zram itself).  Without a terminal the frames follow one another.
t0=$(e2e_now_ms)
min=$rss0
# Agentless, what came back is net of the zram pool at the same moment: the pool shrinks again
# as the cold-data check reads pages back (zram frees a slot on swap-in), so the best net
# figure is taken frame by frame, not the lowest Rss less the pool at the end.
best_net=0 best_pool=0
CTL=("$BUILD/bin/memtidectl" --socket "$E2E_DIR/ctl.sock")
while kill -0 "$E2E_QEMU_PID" 2>/dev/null && ! grep -qa '^WL-DONE' "$E2E_CONSOLE"; do
	r=$(e2e_guest_rss_mib)
	[ -n "$r" ] && [ "$r" -gt 0 ] && [ "$r" -lt "$min" ] && min=$r
	if [ "$AGENT" != 1 ] && [ -n "$r" ] && [ "$r" -gt 0 ]; then
		read -r _ pool < <(e2e_zram_stat)
		pool_mib=$(((pool - pool0) >> 20))
		[ $((rss0 - r - pool_mib)) -gt "$best_net" ] && best_net=$((rss0 - r - pool_mib)) best_pool=$pool_mib best_rss=$r
		echo "host zram pool: +$pool_mib MiB (what came back is net of it)"
	fi
	# The last line may be half written (QEMU's serial writes a byte at a time): a line
	# that has reached " mig=" has its rate whole.
	rate=$(tr -d '\r' <"$E2E_CONSOLE" | awk '/^WL-RATE / && / mig=/ { r = $3 } END { print r }')
	"${CTL[@]}" top --count 1 2>/dev/null || echo "(memtided not answering yet)"
	# Agentless, the guest never swaps: its refaults are the pages memtided saw read back
	# from host swap (pageout.refaults_total), taken while the workload runs.
	[ "$AGENT" = 1 ] || host_refaults=$("${CTL[@]}" --json vm show demo 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["vm"]["pageout"]["refaults_total"])' 2>/dev/null)
	printf 'after %ss: guest RAM resident on the host %s MiB (was %s: %s MiB back); hot set %s pages/s (baseline median %s)\n' \
		$((($(e2e_now_ms) - t0) / 1000)) "${r:-?}" "$rss0" $((rss0 - ${r:-$rss0})) "${rate:-?}" "$base"
	grep -E 'inflate|deflate|giving|reclaim|gave back|pageout:|host-side eviction' "$E2E_DIR/memtided.log" | tail -3 | sed 's/^memtided\[[0-9.]*\] [a-z]*: /memtided: /'
	sleep 2
done
# The rate with memtided: every second after it started, against the baseline's seconds, as
# 90th percentiles (scripts/demo_speed.py says why not medians).
# Refaults: the guest's swap-ins while the workload ran (WL-DONE), not the cold-data check
# after it, which reads every cold page back in.
refaults=$(grep -a '^WL-DONE' "$E2E_CONSOLE" | tail -1 | sed -n 's/.*pswpin=\([0-9]*\).*/\1/p')
[ "$AGENT" = 1 ] || refaults=${host_refaults:-}
vm=$(e2e_wait '^E2E-VMSTAT' 30)
all_in=$(echo "$vm" | sed -n 's/.*pswpin \([0-9]*\).*/\1/p')
cold=$((COLD_ANON + COLD_CACHE))
echo "== summary"
echo "cold memory in the guest:      $cold MiB"
if [ "$AGENT" = 1 ]; then
	returned=$((rss0 - min))
	echo "returned to the host (peak):   $returned MiB (guest RAM Rss $rss0 -> $min MiB; zram is inside it)"
	echo "refaults (guest swap-ins):     ${refaults:-?} pages while the workload ran (${all_in:-?} with the cold-data check)"
else
	returned=$best_net
	echo "returned to the host (peak):   $returned MiB (guest RAM Rss $rss0 -> ${best_rss:-$rss0} MiB, less $best_pool MiB of zram pool at that moment; no agent)"
	echo "refaults (host swap-ins):      ${refaults:-?} pages read back from host swap while the workload ran"
fi
python3 scripts/demo_speed.py "$E2E_CONSOLE" 3 "$BASE_S" $((BASE_S + 1))
grep -qa '^WL-COLD-OK' "$E2E_CONSOLE" && echo "cold data verified intact"
if [ -n "${DEMO_JSON:-}" ]; then
	speed=$(python3 scripts/demo_speed.py "$E2E_CONSOLE" 3 "$BASE_S" $((BASE_S + 1)) --json)
	printf '{"cold_mib":%d,"returned_mib":%d,"refaults":%d,%s}\n' \
		"$cold" "$returned" "${refaults:-0}" "$(echo "$speed" | sed 's/^{//; s/}$//')" >"$DEMO_JSON"
	echo "summary written to $DEMO_JSON"
fi
