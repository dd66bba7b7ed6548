#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_observe.sh: observe-only mode, the audit trail and honest figures, on a real QEMU
# guest (the tiny integration guest of host_guest.sh, plain-QEMU mode, libvmm's simulated
# source so the working set is known without an agent).
#
# The VM starts observe-only ([defaults] observe = yes):
#   1 memtided computes inflations and says so ("would inflate A->B MiB" at notice, the
#     default level), but the balloon stays at the guest's full 512 MiB
#   2 status marks the VM "observe:", returns 0 (nothing was done), vm show says
#     OBSERVE-ONLY; /metrics has memtide_vm_observe_only 1
#   3 the history file holds the would-be steps, each with observe true, before > after,
#     a reason and a source
# Then `memtidectl policy set VM observe=no`:
#   4 memtided acts: the balloon really goes down, one step at a time from the guest's real
#     size (not from the would-be target)
#   5 the trail has the real steps (observe false), at notice, with VM, before, after,
#     reason and source; memtidectl vm history prints them in order, after the would-be ones,
#     and reads them with memtided stopped
#   6 status and vm show count what memtide returned (the balloon's hold) apart from what is
#     not resident without its doing
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"
TOTAL=6
echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided/memtidectl not built"
command -v qemu-system-x86_64 >/dev/null || skip_rest "no qemu-system-x86_64"
it_guest_build || skip_rest "cannot build the integration guest"

dir=$(mktemp -d /tmp/memtide-it-observe.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ "$failed" = 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT
wait_for() {
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}
SOCK=$dir/ctl.sock
PORT=$((20000 + ($$ + 7) % 20000))
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }
MiB=1048576

qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
	-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
	-serial "file:$dir/serial.log" -qmp "unix:$dir/qmp.sock,server=on,wait=off" \
	-device virtio-balloon-pci,id=balloon0,free-page-reporting=on 2>"$dir/qemu.err" &
pids+=($!)
wait_for 30 grep -qs "memtide-it-guest ready" "$dir/serial.log" || skip_rest "guest did not boot"

printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
# cold_age fixes the age by hand (5 s, its least): the refault controller vouches for its
# 10 s floor only after watching the guest four times as long (docs/operations.md,
# "learning"), 40 s in which no step, would-be or real, comes.  This test is about
# observe-only and the trail, not that controller.
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
stats_period = 1
socket = $SOCK
source = sim
state_dir = $dir/state
[metrics]
listen = 127.0.0.1:$PORT
[controller]
max_inflate_step = 64M
[host]
meminfo = $dir/meminfo
[defaults]
min = 192M
headroom = 32M
return = balloon
observe = yes
cold_age = 5s
CONF
# The default log level (notice): the trail must be there without asking for more.
"$BIN/memtided" --qmp "$dir/qmp.sock" --name it-obs --foreground --config "$dir/memtided.conf" \
	>"$dir/memtided.log" 2>&1 &
mpid=$!
pids+=($mpid)
actual() { ctl --json vm show it-obs 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm"]["balloon_actual_bytes"] // 1048576)' 2>/dev/null; }

# 1: would-be steps, nothing done.
wait_for 40 grep -q "it-obs: would inflate [0-9]*->[0-9]* MiB" "$dir/memtided.log"
rc=$?
sleep 3 # three more intervals in which nothing may happen
a=$(actual)
[ $rc = 0 ] && [ "${a:-0}" -ge 500 ] && ! grep -qE "it-obs: inflate [0-9]+->" "$dir/memtided.log"
check $? "observe-only: 'would inflate' at notice, and the balloon stays at ${a:-?} MiB of 512"

# 2: status, vm show, metrics say so.
st=$(ctl status)
show=$(ctl vm show it-obs)
curl -s "http://127.0.0.1:$PORT/metrics" >"$dir/metrics.txt"
echo "$st" | grep -Eq '^it-obs +observe:[a-z-]+ +512M +[0-9]+M +5[01][0-9]M +[0-9]+M +0M ' &&
	echo "$show" | grep -q "OBSERVE-ONLY" && echo "$show" | grep -q "returned to the host by memtide 0" &&
	grep -qx 'memtide_vm_observe_only{domain="it-obs"} 1' "$dir/metrics.txt"
rc=$?
[ $rc = 0 ] || echo "$st" | sed 's/^/# /'
check $rc "status marks it observe: and counts 0 returned; vm show says OBSERVE-ONLY; memtide_vm_observe_only 1"

# 3: the trail of would-be steps.
H=$dir/state/history/it-obs.jsonl
python3 - "$H" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows, "no history"
b = [r for r in rows if r["what"] == "balloon"]
assert b and all(r["observe"] for r in rows), rows
assert all(r["before_bytes"] > r["after_bytes"] and r["reason"] and r["source"] == "controller" for r in b), b
assert all(r["vm"] == "it-obs" and r["time"].endswith("Z") for r in rows)
print("# %d would-be entries" % len(rows))
PY
check $? "the history file holds the would-be steps: observe true, before > after, reason, source"
[ "$(stat -c %a "$H")" = 600 ] || echo "# history mode $(stat -c %a "$H")"

# 4: observing ends; memtided acts from the guest's real size.
ctl policy set it-obs observe=no >/dev/null
wait_for 40 grep -q "it-obs: inflate [0-9]*->[0-9]* MiB" "$dir/memtided.log"
rc=$?
first=$(grep -o "it-obs: inflate [0-9]*->[0-9]* MiB" "$dir/memtided.log" | head -1)
from=$(echo "$first" | sed -E 's/.*inflate ([0-9]+)->([0-9]+).*/\1/')
to=$(echo "$first" | sed -E 's/.*inflate ([0-9]+)->([0-9]+).*/\2/')
below_500() { local a; a=$(actual); [ "${a:-512}" -lt 500 ]; }
wait_for 20 below_500
a=$(actual)
[ $rc = 0 ] && [ "${from:-0}" -ge 500 ] && [ $((from - to)) -le 64 ] && [ "${a:-512}" -lt 500 ] &&
	grep -q "it-obs: observe-only ends" "$dir/memtided.log"
check $? "observe=no: memtided acts, first step $from -> $to MiB (from the real size, at most 64 MiB), balloon now ${a:-?} MiB"
# The host line is summed at the arbiter's tick (every 2 s), the row at the VM's: await the tick
# that has seen the balloon's hold rather than reading the two at one instant.
host_counts() { ctl status | grep -Eq ' [0-9.]*[1-9][0-9.]*[MG] returned by memtide'; }
wait_for 10 host_counts
st2=$(ctl status)
show2=$(ctl vm show it-obs)

# 5: the real steps in the trail, the log and vm history, also with memtided stopped.
python3 - "$H" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
real = [r for r in rows if not r["observe"]]
assert real and real[0]["what"] == "balloon", rows
i = rows.index(real[0])
assert all(r["observe"] for r in rows[:i]) and not any(r["observe"] for r in rows[i:]), "order"
assert all(r["before_bytes"] != r["after_bytes"] and r["reason"] and r["source"] for r in real)
PY
rc=$?
kill $mpid
wait $mpid 2>/dev/null
hist=$(ctl vm history it-obs --state-dir "$dir/state" --last 1000)
[ $rc = 0 ] && grep -Eq "it-obs: inflate [0-9]+->[0-9]+ MiB \([a-z-]+\), source controller$" "$dir/memtided.log" &&
	echo "$hist" | grep -q "(observe-only: not done)" &&
	echo "$hist" | grep -Eq "balloon +[0-9]+M -> [0-9]+M +[a-z-]+ +controller$" &&
	[ "$(ctl --json vm history it-obs --state-dir "$dir/state" --last 3 | wc -l)" = 3 ]
rc=$?
[ $rc = 0 ] || echo "$hist" | tail -5 | sed 's/^/# /'
check $rc "the trail: real steps at notice with before, after, reason, source; vm history reads them with memtided stopped"

# 6: honest figures: the balloon's hold is memtide's; what is not resident beside it is not.
ret=$(echo "$st2" | awk '$1 == "it-obs" {print $7}')
host_ret=$(echo "$st2" | sed -n 's/.* \([0-9.]*[MG]\) returned by memtide.*/\1/p')
echo "$st2" | sed 's/^/# /'
# (the host line is summed at the arbiter's tick, every 2 s: not the same instant as the row)
[ -n "$ret" ] && [ "$ret" != "0M" ] && [ -n "$host_ret" ] && [ "$host_ret" != "0M" ] &&
	! echo "$st2" | grep -q "observe:" &&
	echo "$show2" | grep -Eq "returned to the host by memtide [0-9.]+[MG]; not resident without memtide's doing"
check $? "status counts what memtide returned ($ret; host line $host_ret) apart from what is not resident without it"
exit $failed
