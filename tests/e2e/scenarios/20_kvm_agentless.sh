#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 20_kvm_agentless.sh: scenario 20, host-side eviction of a KVM guest on a stock Debian 12 host
# through the VM's memory cgroup: no agent, no access source memtided can read (KVM keeps the
# accessed bits in its nested page tables; Debian's 6.1 has no DAMON, no idle page tracking),
# the kernel's own reclaim asking KVM which pages the guest used (host/act/memcg_hand.h).
#
# Runs in the KVM host stand only (tests/kvm/stand.sh run tests/e2e/scenarios/20_kvm_agentless.sh,
# which sets E2E_ACCEL=kvm); elsewhere every check SKIPs.  A 1536 MiB KVM guest runs pageload
# (64 MiB hot, touched page by page all the time; 512 MiB of JSON-like cold data, 2-3x
# compressible, written once, checksummed), started as an operator would start a plain QEMU
# whose memory memtided is to manage: in a cgroup of its own with the memory controller
# (E2E_KVM_CG).  MGLRU is the operator's host-wide setting, never memtided's: the test sets
# it (E2E_MGLRU, y by default: the issue's path; n runs the classic LRU through
# memory.reclaim) and records it.  memtided runs at its defaults (interval 1 s) in plain-QEMU
# mode; the measurement is tests/e2e/pageout_run.py's, as scenario 12's: a 20 s baseline with
# the policy enabled=no, then, over a window of E2E_KVM_WINDOW_S (120 s) after enable, what
# came back net of the zram pool, the hot rate after against before, the longest dip of the
# hot rate under half its baseline median (pageload's 100 ms WL-FINE rates, inside the window
# only: tests/e2e/hot_rates.py), refaults page by page against the pages that really left
# swap (QEMU's pagemap), E2E_KVM_CYCLES evict/verify cycles (1; the issue's 10 are a soak's).
# Why 120 s and not scenario 12's 60: memtided's controller watches a guest for a cold age
# (~63 s at the defaults) before it calls any page cold (a page is known idle for a cold age
# only after a cold age of watching; vmm/decide.c), and the access-history reset at attach
# waits as long, so at the defaults its first eviction comes ~40-45 s after enable (20 s of
# the watching fall in the baseline).  The issue's goal is returned_net >= 0.8 x best at the
# defaults, not "within a minute": the window is that designed delay plus a minute of
# eviction.  What the first minute gave is reported beside it (returned_net_mib_60s,
# longest_dip_s_60s, psi_some_ms_60s), and first_evict_s (enable to the first sample with
# anything in swap, +-1 s) says how much of the window the watching took.
# Added here: what eviction could save at best, cold_mib x (1 - 1/zram_ratio).
#
# Figures: build/e2e/kvm_agentless.json.  Goals (the issue's): returned_net_mib >= 0.8 x
# best_mib; tput_ratio >= 0.95; longest_dip_s <= 2; refaults_error <= 0.05; corrupted_pages 0.
# E2E_KVM_BODY=random: the same guest with incompressible cold data (kvm_agentless_random.json):
# memtided must notice that the zram pool eats the saving and stop (vm show says
# incompressible), with refaults over the run at most 1% of the cold pages; no cycles.
# Check 1 is tests/e2e/hot_rates.py's self-test of the dip computation (it runs anywhere).
# Needs root, zram, cgroup v2 with memory.reclaim.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib_zram.sh"
e2e_init "agentless${E2E_KVM_BODY:+_$E2E_KVM_BODY}"
TOTAL=11
echo "1..$TOTAL"
skip_all() {
	local i
	e2e_fig skipped "$1"
	for i in $(seq $((E2E_N + 1)) $TOTAL); do echo "ok $i # SKIP $1"; done
	exit 0
}
python3 tests/e2e/hot_rates.py --selftest
e2e_check $? "the longest-dip computation on known streams (hot_rates.py --selftest)"
[ "$E2E_ACCEL" = kvm ] || skip_all "a KVM guest on a stock KVM host: the KVM stand's (tests/kvm/stand.sh)"
command -v qemu-system-x86_64 >/dev/null || skip_all "no qemu-system-x86_64"
[ -e /sys/fs/cgroup/cgroup.controllers ] || skip_all "no cgroup v2 at /sys/fs/cgroup"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
for f in "$BUILD/bin/memtided" "$BUILD/bin/memtidectl" "$BUILD/guest/bin/pageload"; do
	[ -e "$f" ] || { e2e_not_ok "$f is not built"; exit 1; }
done
e2e_zram_add 2G || skip_all "host swap: $E2E_ZRAM_WHY"
MEM=1536 HOT=64 COLD=512 BODY=${E2E_KVM_BODY:-json}
WINDOW=${E2E_KVM_WINDOW_S:-120}
CYCLES=${E2E_KVM_CYCLES:-1}
RUNARGS=(--refaults --cycles "$CYCLES")
[ "$BODY" = random ] && CYCLES=0 RUNARGS=()
# The side by side (E2E_KVM_SIDE=1, compressible body): after memtided's phase, in the same
# guest, a senpai-style memory.reclaim loop and a static memory.high, each for memtided's
# window after a 15 s baseline of its own (tests/e2e/reclaim_baselines.py); about 6 minutes
# more.  Each contender's hot-rate tput_ratio and longest dip are measured as memtided's.
SIDE=${E2E_KVM_SIDE:-0}
[ "$BODY" = random ] && SIDE=0
[ "$SIDE" = 1 ] && RUNARGS+=(--no-quit)
MGLRU=${E2E_MGLRU:-y}
CG=/sys/fs/cgroup/${E2E_KVM_CG:-memtide-e2e-vm}
MGLRU_WAS=
if [ -e /sys/kernel/mm/lru_gen/enabled ]; then
	MGLRU_WAS=$(cat /sys/kernel/mm/lru_gen/enabled)
	echo "$MGLRU" >/sys/kernel/mm/lru_gen/enabled
	e2e_fig mglru "$(cat /sys/kernel/mm/lru_gen/enabled)"
fi
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p "$CG"
e2e_fig body "$BODY"
e2e_fig cycles_planned "$CYCLES"
e2e_fig window_planned_s "$WINDOW"
e2e_fig zram_device "zram$E2E_ZRAM"
e2e_fig kernel "$(uname -r)"

# Progress, so a run the stand stops at its time-out still says where it was: a line on each
# step, and every 30 s the guest console's last line and the cgroup's memory (the stand
# streams this output back as it comes).
T0=$SECONDS
say() { echo "# [$((SECONDS - T0)) s] $*"; }
heartbeat() {
	while sleep 30; do
		say "heartbeat: console: $(tail -c 300 "$E2E_CONSOLE" 2>/dev/null | tr -d '\r' | tail -1 | cut -c1-120);" \
			"cgroup $(($(cat "$CG/memory.current" 2>/dev/null || echo 0) >> 20)) MiB," \
			"swap $(($(cat "$CG/memory.swap.current" 2>/dev/null || echo 0) >> 20)) MiB;" \
			"memtided: $(grep -E 'cgroup|reclaim|source' "$E2E_DIR/memtided.log" 2>/dev/null | tail -1 | cut -c1-200)"
	done
}
# QEMU in the VM's own cgroup, as `systemd-run --scope` would put it.
qemu-system-x86_64() {
	echo "$BASHPID" >"$CG/cgroup.procs"
	exec /usr/bin/qemu-system-x86_64 "$@"
}
e2e_boot $MEM "pageload $HOT $COLD $BODY 100" "memtide.agent=0" \
	-chardev "socket,id=tc,path=$E2E_DIR/wl.port,server=on,wait=off" \
	-device virtserialport,chardev=tc,name=org.memtide.test.0 \
	-qmp "unix:$E2E_DIR/test.qmp,server,nowait"
heartbeat &
E2E_PIDS+=($!) # stopped with the harness's own processes
say "booting the guest (${MEM} MiB, KVM), pageload ${HOT} MiB hot, ${COLD} MiB ${BODY} cold"
if ! e2e_wait '^WL-READY' 600 >/dev/null; then
	e2e_not_ok "the guest did not start its workload: $(tail -3 "$E2E_CONSOLE" | tr '\n' ' ')"
	exit 1
fi
say "workload ready; memtided starts"
log=$E2E_DIR/memtided.log
# E2E_KVM_CONF: more lines for memtided's configuration (a tuned run, e.g. '[pageout]' and
# 'duty = 50%'), recorded as a figure: its results go beside the defaults', never instead.
printf '[defaults]\nenabled = no\n%s\n' "${E2E_KVM_CONF:-}" >"$E2E_DIR/m.conf"
[ -n "${E2E_KVM_CONF:-}" ] && e2e_fig tuned_conf "$(printf '%s' "$E2E_KVM_CONF" | tr '\n' ' ')"
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --name vm --interval 1s --foreground \
	--config "$E2E_DIR/m.conf" --no-metrics --socket "$E2E_DIR/m.sock" --log-level info 2>"$log"
mpid=$E2E_LAST_PID
# memtided's own account of the cgroup, as it comes (a run the stand cuts short keeps it).
tail -n +1 -F --pid="$mpid" "$log" 2>/dev/null | grep --line-buffered -E 'cgroup|reclaim|source|aging|MGLRU|incompress|stall' |
	sed -u 's/^/# memtided: /' &
E2E_PIDS+=($!)
python3 tests/e2e/pageout_run.py --qmp "$E2E_DIR/test.qmp" --port "$E2E_DIR/wl.port" \
	--console "$E2E_CONSOLE" --ctl "$BUILD/bin/memtidectl" --ctl-sock "$E2E_DIR/m.sock" \
	--log "$log" --vm vm --qemu-pid "$E2E_QEMU_PID" --memtided-pid 0 --zram "$E2E_ZRAM" \
	--mem-mib $MEM --cold-mib $COLD --base-s 20 --seconds "$WINDOW" --cgroup "$CG" "${RUNARGS[@]}" \
	>"$E2E_DIR/run.json"
rc=$?
say "pageout_run.py done (rc $rc)"
"$BUILD/bin/memtidectl" --socket "$E2E_DIR/m.sock" vm show vm >"$E2E_DIR/vm_show.txt" 2>&1
"$BUILD/bin/memtidectl" --socket "$E2E_DIR/m.sock" --json vm show vm >"$E2E_DIR/vm_show.json" 2>&1
sed 's/^/# vm show: /' "$E2E_DIR/vm_show.txt" | head -30
kill "$mpid" 2>/dev/null
wait "$mpid" 2>/dev/null
# What memtided left on the cgroup after it stopped: no limit (it never writes one).
e2e_fig cg_high_after "$(cat "$CG/memory.high")"
e2e_fig cg_max_after "$(cat "$CG/memory.max")"
if [ "$SIDE" = 1 ] && [ $rc = 0 ]; then
	say "side by side: senpai-style memory.reclaim loop, then a static memory.high (memtided stopped)"
	python3 tests/e2e/reclaim_baselines.py --cg "$CG" --zram "$E2E_ZRAM" --port "$E2E_DIR/wl.port" \
		--cold-mib $COLD --seconds "$WINDOW" --console "$E2E_CONSOLE" >"$E2E_DIR/baselines.json"
	say "side by side done (rc $?)"
fi
kill "$E2E_QEMU_PID" 2>/dev/null
wait "$E2E_QEMU_PID" 2>/dev/null
# The host as it was: the operator's MGLRU setting, no cgroup of the test's.
[ -n "$MGLRU_WAS" ] && echo "$MGLRU_WAS" >/sys/kernel/mm/lru_gen/enabled
rmdir "$CG" 2>/dev/null

# Every figure, then the ones added here: the best saving and the side by side's verdict.
while read -r k v; do e2e_fig "$k" "$v"; done < <(python3 - "$E2E_DIR/run.json" \
	"$E2E_DIR/vm_show.json" "$COLD" "$E2E_DIR/baselines.json" <<'EOF'
import json, sys
figs = json.load(open(sys.argv[1]))
try:
    side = json.load(open(sys.argv[4]))
except (OSError, ValueError):
    side = {}
if side:
    figs.update(side)
    # Each contender over the same window: memory saved net of the pool, PSI stall, and what
    # the guest felt (hot-rate p90 ratio, longest dip under half the rate).  PSI does not see
    # a KVM guest's stall (its vCPUs wait on KVM's MMU lock), so "no more stall" is asked of
    # both measures: PSI some, and the longest dip with 0.2 s of slack (two of the 100 ms
    # samples: the dips are measured at that resolution).
    figs["memtided_saved_mib"] = figs.get("returned_net_mib")
    figs["memtided_stall_ms"] = figs.get("psi_some_ms")
    figs["memtided_tput_ratio"] = figs.get("tput_ratio")
    figs["memtided_longest_dip_s"] = figs.get("longest_dip_s")
    others = [m for m in ("senpai", "high") if side.get(m + "_saved_mib") is not None]
    mine = [figs.get("memtided_" + k) for k in ("saved_mib", "stall_ms", "longest_dip_s")]
    if others and None not in mine:
        best = max(others, key=lambda m: side[m + "_saved_mib"])
        figs["side_better_baseline"] = best
        figs["side_best_saved_mib"] = side[best + "_saved_mib"]
        figs["side_best_stall_ms"] = side.get(best + "_stall_ms")
        figs["side_best_longest_dip_s"] = side.get(best + "_longest_dip_s")
        saves = mine[0] >= side[best + "_saved_mib"]
        psi_ok = side.get(best + "_stall_ms") is not None and mine[1] <= side[best + "_stall_ms"]
        dip_ok = side.get(best + "_longest_dip_s") is not None and \
            mine[2] <= side[best + "_longest_dip_s"] + 0.2
        figs["beats_baselines_saved"] = saves
        figs["beats_baselines_psi"] = psi_ok
        figs["beats_baselines_dip"] = dip_ok
        figs["beats_baselines"] = bool(saves and psi_ok and dip_ok)
cold = int(sys.argv[3])
r = figs.get("zram_ratio")
if r:
    figs["best_mib"] = round(cold * (1 - 1 / r), 1)
    for s in ("", "_60s"):
        if figs.get("returned_net_mib" + s) is not None:
            figs["returned_vs_best" + s] = round(figs["returned_net_mib" + s] / figs["best_mib"], 3)
try:
    m = json.load(open(sys.argv[2]))["vm"].get("memcg", {})
    for k in ("cgroup", "mechanism", "aging", "working_set_from", "stall_total_ms",
              "pool_saving_pct", "incompressible"):
        if k in m:
            figs["memcg_" + k] = m[k]
except (OSError, ValueError, KeyError):
    pass
for k, v in figs.items():
    print(k, "null" if v is None else str(v).replace(" ", "_"))
EOF
)
[ $rc = 0 ]
e2e_check $? "the run completed ($(grep -c . "$log") lines of memtided's log)"
grep -q 'host-side reclaim (cgroup) active' "$log"
e2e_check $? "memtided evicted through the VM's cgroup ($(grep -o 'memory cgroup [^:]*' "$log" | head -1))"
if [ "$BODY" = random ]; then
	e2e_ok "returned_net_mib ${E2E_FIGS[returned_net_mib]:-missing} with incompressible data (reported, no goal)"
	[ "${E2E_FIGS[memcg_incompressible]:-}" = True ]
	e2e_check $? "memtided found the pool eating the saving and held (vm show: incompressible ${E2E_FIGS[memcg_incompressible]:-missing})"
	e2e_goal refaults_total '<=' $((COLD * 256 / 100)) "refaults at most 1% of the cold pages"
	e2e_ok "tput, dips, refault counting, cycles: the compressible run's # SKIP random data"
	e2e_ok "cycles # SKIP random data"
else
	e2e_goal returned_vs_best '>=' 0.8 "host got back 80% of what the cold data could save in zram"
	e2e_goal tput_ratio '>=' 0.95 "the hot set kept its speed"
	e2e_goal longest_dip_s '<=' 2 "no dip of the hot rate under half its baseline longer than 2 s"
	e2e_goal refaults_error '<=' 0.05 "refaults counted within 5% of the pages that came back from swap"
	e2e_goal corrupted_pages '==' 0 "no page corrupted across $CYCLES evict/verify cycles"
fi
if [ "$SIDE" != 1 ]; then
	e2e_ok "side by side with senpai's loop and a static memory.high # SKIP E2E_KVM_SIDE=1 runs it (compressible body only)"
elif [ -z "${E2E_FIGS[beats_baselines]:-}" ]; then
	e2e_not_ok "side by side: no figures (reclaim_baselines.py, above)"
else
	[ "${E2E_FIGS[beats_baselines]}" = True ]
	e2e_check $? "over ${WINDOW} s each, memtided saved ${E2E_FIGS[memtided_saved_mib]} MiB (PSI ${E2E_FIGS[memtided_stall_ms]} ms, longest dip ${E2E_FIGS[memtided_longest_dip_s]} s, tput ${E2E_FIGS[memtided_tput_ratio]:-?}); senpai's loop ${E2E_FIGS[senpai_saved_mib]:-?} MiB (${E2E_FIGS[senpai_stall_ms]:-?} ms, ${E2E_FIGS[senpai_longest_dip_s]:-?} s, ${E2E_FIGS[senpai_tput_ratio]:-?}); memory.high ${E2E_FIGS[high_saved_mib]:-?} MiB (${E2E_FIGS[high_stall_ms]:-?} ms, ${E2E_FIGS[high_longest_dip_s]:-?} s, ${E2E_FIGS[high_tput_ratio]:-?}): at least the better one's saving at no more PSI stall and no longer dip (+0.2 s)"
fi
[ "${E2E_FIGS[cg_max_after]:-}" = max ] && [ "${E2E_FIGS[cg_high_after]:-}" = max ]
e2e_check $? "memtided left no limit on the cgroup (memory.high ${E2E_FIGS[cg_high_after]:-?}, memory.max ${E2E_FIGS[cg_max_after]:-?})"
if grep -qE 'AddressSanitizer|(^| )err(or)?: ' "$log"; then
	e2e_not_ok "memtided logged errors: $(grep -E 'err(or)?: ' "$log" | head -2 | tr '\n' ' ')"
else
	e2e_ok "memtided logged no errors"
fi
[ "${E2E_KEEP:-0}" = 1 ] && echo "# kept $E2E_DIR"
exit 0
