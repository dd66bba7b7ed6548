#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_isolation.sh: one frozen QMP peer stalls nothing but its own VM.
#
# memtided manages 8 VMs in plain-QEMU mode (--qmp once per VM) with libvmm's simulated
# source and a 1 s interval.  vm1..vm7 are fake QMP peers (tests/integration/lib/
# fake_qmp.py, a mock: eight real guests would not fit this test's time and CPU); vm8 is a
# real QEMU (the tiny integration guest of host_guest.sh, TCG) when one can run here.
#
# Checked:
#   1  vm1's fake peer freezes (accepts, never answers): memtided says so once in its log,
#      and status shows vm1's peer unresponsive, since when, and which call
#   2  meanwhile vm2..vm7 keep their interval (gaps between their balloon reads, as their
#      peers saw them, at most 1.5 intervals)
#   3  vm2's fake peer answers half a line and freezes: vm2 unresponsive, vm3..vm7 on time
#   4  the real QEMU of vm8 is stopped with SIGSTOP: vm8 unresponsive, vm3..vm7 on time
#   5  after SIGCONT vm8's QEMU answers again and memtided says so
#   6  memtidectl detach of the frozen vm1 returns within 3 s and vm1 is gone
#   7  the control socket answered every status within 100 ms p99 all along (sampled
#      every 50 ms from the first freeze to the end)
#   8  SIGTERM with vm2's peer still frozen: memtided exits within 3 s
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"
LIB=$(cd "$(dirname "$0")" && pwd)/lib
TOTAL=8
echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $*"; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided/memtidectl not built"
dir=$(mktemp -d /tmp/memtide-it-iso.XXXXXX)
pids=()
qpid=
cleanup() {
	[ -n "$qpid" ] && kill -CONT "$qpid" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ "$failed" = 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT
SOCK=$dir/ctl.sock
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }
mono() { python3 -c 'import time; print(int(time.monotonic() * 1000))'; }

# The real QEMU for vm8, when the integration guest can be built and booted.
real=0
if command -v qemu-system-x86_64 >/dev/null && it_guest_build; then
	qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
		-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
		-serial "file:$dir/serial.log" -qmp "unix:$dir/vm8.qmp,server=on,wait=off" \
		-device virtio-balloon-pci,id=balloon0 2>"$dir/qemu.err" &
	qpid=$!
	pids+=($qpid)
	for _ in $(seq 150); do grep -qs "memtide-it-guest ready" "$dir/serial.log" && break; sleep 0.2; done
	grep -qs "memtide-it-guest ready" "$dir/serial.log" && real=1
fi
fakes="vm1 vm2 vm3 vm4 vm5 vm6 vm7"
[ $real = 1 ] || fakes="$fakes vm8"
python3 "$LIB/fake_qmp.py" "$dir" $fakes &
pids+=($!)
for _ in $(seq 50); do [ -p "$dir/fake_qmp.ctl" ] && [ -S "$dir/vm7.qmp" ] && break; sleep 0.1; done
exec 7>"$dir/fake_qmp.ctl"

printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
call_timeout = 2s
metrics_port = 0
socket = $SOCK
source = sim
[host]
meminfo = $dir/meminfo
CONF
args=()
for i in 1 2 3 4 5 6 7 8; do args+=(--qmp "$dir/vm$i.qmp" --name "vm$i"); done
"$BIN/memtided" "${args[@]}" --foreground --config "$dir/memtided.conf" --state-dir "$dir/state" --log-level info \
	>"$dir/memtided.log" 2>&1 &
mpid=$!
pids+=($mpid)
all_active() { [ "$(ctl --json status 2>/dev/null | grep -o '"state":"active"' | wc -l)" = 8 ]; }
for _ in $(seq 150); do all_active && break; sleep 0.2; done
all_active || { ctl status | sed 's/^/# /'; tail -20 "$dir/memtided.log" | sed 's/^/# /'; }

# Status latency, every 50 ms, until told to stop.
python3 - "$SOCK" "$dir/lat.stop" >"$dir/lat.out" <<'PY' &
import os, socket, sys, time
path, stop = sys.argv[1], sys.argv[2]
lat = []
while not os.path.exists(stop):
    t0 = time.monotonic()
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(path)
        s.sendall(b'{"cmd":"status"}\n')
        buf = b""
        while b"\n" not in buf:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
        s.close()
    except OSError:
        pass
    lat.append((time.monotonic() - t0) * 1000)
    time.sleep(0.05)
lat.sort()
print("n %d p50 %.1f p99 %.1f max %.1f" % (len(lat), lat[len(lat) // 2],
      lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1]))
PY
latp=$!
pids+=($latp)

# on_time FROM_MS TO_MS VMS...: every listed VM's balloon reads within [FROM, TO] at most
# 1.5 intervals apart (and the window's edges no further than that from a read).
on_time() {
	python3 - "$dir/fake_qmp.log" "$@" <<'PY'
import sys
log, t0, t1, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
ticks = {n: [] for n in names}
for line in open(log):
    w = line.split()
    if len(w) == 2 and w[0] in ticks and w[1].isdigit() and t0 <= int(w[1]) <= t1:
        ticks[w[0]].append(int(w[1]))
worst = 0
for n, t in ticks.items():
    pts = [t0] + t + [t1]
    worst = max(worst, max(b - a for a, b in zip(pts, pts[1:])))
print("worst gap %d ms" % worst)
sys.exit(0 if worst <= 1500 else 1)
PY
}
unresponsive() { # VM: status says its peer is unresponsive, since when and which call
	ctl --json status | python3 -c '
import json, sys
vm = [v for v in json.load(sys.stdin)["vms"] if v["name"] == sys.argv[1]][0]
sys.exit(0 if vm["peer_unresponsive"] and vm["peer_unresponsive_since_ms"] > 0 and vm["peer_call"] else 1)' "$1"
}

# 1-2: vm1 frozen.
echo "freeze vm1" >&7
t0=$(mono)
sleep 8
t1=$(mono)
unresponsive vm1 && [ "$(grep -c 'vm1: qmp unresponsive' "$dir/memtided.log")" = 1 ]
check $? "vm1 frozen: said once ($(grep -m1 'vm1: qmp unresponsive' "$dir/memtided.log" | cut -c1-150)) and in status"
g=$(on_time "$t0" "$t1" vm2 vm3 vm4 vm5 vm6 vm7)
check $? "vm2..vm7 keep their 1 s interval beside frozen vm1 ($g)"

# 3: vm2 answers half a line, then freezes.
echo "half vm2" >&7
t0=$(mono)
sleep 6
t1=$(mono)
g=$(on_time "$((t0 + 1500))" "$t1" vm3 vm4 vm5 vm6 vm7)
rc=$?
unresponsive vm2 && [ $rc = 0 ]
check $? "vm2's peer sent half a line: vm2 unresponsive; vm3..vm7 on time ($g)"

# 4-5: the real QEMU stopped.
if [ $real = 1 ]; then
	kill -STOP "$qpid"
	t0=$(mono)
	sleep 6
	t1=$(mono)
	g=$(on_time "$t0" "$t1" vm3 vm4 vm5 vm6 vm7)
	rc=$?
	unresponsive vm8 && [ $rc = 0 ]
	check $? "real QEMU of vm8 under SIGSTOP: vm8 unresponsive; vm3..vm7 on time ($g)"
	kill -CONT "$qpid"
	for _ in $(seq 100); do grep -q "vm8: qmp answers again" "$dir/memtided.log" && break; sleep 0.3; done
	grep -q "vm8: qmp answers again" "$dir/memtided.log" && ! unresponsive vm8
	check $? "after SIGCONT: $(grep -m1 'vm8: qmp answers again' "$dir/memtided.log" | cut -c1-120)"
else
	skip "no real QEMU guest here (vm8 is a fake peer)"
	skip "no real QEMU guest here"
fi

# 6: detach the frozen vm1.
s0=$(date +%s%N)
out=$(ctl --timeout 10s detach vm1 2>&1)
rc=$?
ms=$((($(date +%s%N) - s0) / 1000000))
[ $rc = 0 ] && [ $ms -lt 3000 ] && ! ctl status | grep -q '^vm1 '
check $? "detach of frozen vm1: rc $rc in $ms ms ($(echo "$out" | tr '\n' ' ' | cut -c1-160))"

# 7: control latency over all of it.
touch "$dir/lat.stop"
wait $latp
python3 -c '
import sys
w = open(sys.argv[1]).read().split()
sys.exit(0 if float(w[w.index("p99") + 1]) < 100 else 1)' "$dir/lat.out"
check $? "control socket status latency with frozen peers: $(cat "$dir/lat.out") ms"

# 8: stop with vm2 still frozen.
s0=$(date +%s%N)
kill -TERM $mpid
for _ in $(seq 100); do kill -0 $mpid 2>/dev/null || break; sleep 0.05; done
ms=$((($(date +%s%N) - s0) / 1000000))
! kill -0 $mpid 2>/dev/null && [ $ms -lt 3000 ]
check $? "SIGTERM with a frozen peer: memtided exits in $ms ms"
exit 0
