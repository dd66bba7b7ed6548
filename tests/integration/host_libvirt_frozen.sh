#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_libvirt_frozen.sh: a frozen QEMU under a real libvirtd stalls only its own VM.
#
# Two transient domains (the tiny integration guest of host_guest.sh, TCG) under the real
# libvirtd; memtided in libvirt mode with libvmm's simulated source.  The QEMU of one domain
# is stopped with SIGSTOP: libvirtd then waits on that QEMU's monitor without a limit, and
# every libvirt call memtided makes for that VM would wait with it.  Domain names start with
# a tag of this run (mtd-fz-PID-), memtided manages only those ([daemon] domains), so other
# domains on the shared libvirtd are never touched, and they are destroyed at the end.
#
# Checked:
#   1  the frozen VM's libvirt calls time out (call_timeout 2 s): memtided logs "libvirt
#      unresponsive" for it, and status shows it with since/which call
#   2  the other VM keeps its 1 s interval meanwhile (tick_gap_ms, ticks_late unchanged)
#   3  the control socket answers status within 100 ms p99 throughout (every 50 ms for 8 s)
#   4  detach of the frozen VM completes within 3 s

set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"
TOTAL=4
echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ "$(id -u)" = 0 ] || skip_rest "needs root to run libvirtd"
[ -x "$BIN/memtided" ] || skip_rest "memtided not built"
command -v libvirtd >/dev/null || skip_rest "libvirtd not installed"
it_guest_build || skip_rest "cannot build the integration guest"
# Started with every inherited descriptor closed (Python's close_fds): a daemon started under
# `flock /tmp/memtide-heavy.lock` would otherwise keep the shared lock for as long as it runs.
tests/libvirtd_up.sh
V="virsh -q -c qemu:///system"
for _ in $(seq 50); do $V version >/dev/null 2>&1 && break; sleep 0.2; done
$V version >/dev/null 2>&1 || skip_rest "libvirtd does not answer"

dir=$(mktemp -d /tmp/memtide-it-fz.XXXXXX)
chmod 755 "$dir"
cp "$IT_KERNEL" "$IT_INITRD" "$dir/"
chmod 644 "$dir/vmlinux" "$dir/initrd.cpio"
tag=mtd-fz-$$
doms=() mpid= qpid=
cleanup() {
	[ -n "$qpid" ] && kill -CONT "$qpid" 2>/dev/null
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null
	for d in "${doms[@]}"; do $V destroy "$d" >/dev/null 2>&1; done
	[ "$failed" = 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT
start_dom() {
	cat >"$dir/$1.xml" <<XML
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>512</memory>
  <currentMemory unit='MiB'>512</currentMemory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/vmlinux</kernel>
    <initrd>$dir/initrd.cpio</initrd>
    <cmdline>console=ttyS0 quiet</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'><source path='$dir/$1.console'/><target port='0'/></serial>
    <memballoon model='virtio'><stats period='1'/></memballoon>
  </devices>
</domain>
XML
	doms+=("$1")
	$V create "$dir/$1.xml" >/dev/null
}
A=$tag-a F=$tag-f
start_dom "$A"
start_dom "$F"
for _ in $(seq 120); do grep -qs "memtide-it-guest ready" "$dir/$F.console" && break; sleep 0.25; done
SOCK=$dir/ctl.sock
printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
stats_period = 1
call_timeout = 2s
domains = $tag-*
metrics_port = 0
socket = $SOCK
source = sim
[host]
meminfo = $dir/meminfo
CONF
"$BIN/memtided" --foreground --config "$dir/memtided.conf" --state-dir "$dir/state" --log-level info >"$dir/memtided.log" 2>&1 &
mpid=$!
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }
field() { # VM FIELD
	ctl --json status 2>/dev/null | python3 -c '
import json, sys
v = [v for v in json.load(sys.stdin)["vms"] if v["name"] == sys.argv[1]]
print(v[0][sys.argv[2]] if v else "")' "$1" "$2"
}
for _ in $(seq 100); do [ "$(field "$F" state)" = active ] && [ "$(field "$A" state)" = active ] && break; sleep 0.2; done

qpid=$(cat "/run/libvirt/qemu/$F.pid" 2>/dev/null)
[ -n "$qpid" ] || skip_rest "no pid file for $F"
late0=$(field "$A" ticks_late)
kill -STOP "$qpid"
# Status round trips on the socket itself (a Python client, as memtidectl sends them; a
# memtidectl process per sample would time its own start-up on a loaded machine), every
# 50 ms for 8 s while the QEMU is stopped.
python3 - "$SOCK" <<'PY' >"$dir/lat.out"
import socket, sys, time
lat, end = [], time.monotonic() + 8
while time.monotonic() < end:
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
    s.sendall(b'{"cmd":"status"}\n'); buf = b""
    while b"\n" not in buf:
        d = s.recv(1 << 20)
        if not d:
            break
        buf += d
    s.close()
    lat.append((time.monotonic() - t0) * 1000)
    time.sleep(0.05)
lat.sort()
print("n %d p50 %.1f p99 %.1f max %.1f" % (len(lat), lat[len(lat) // 2],
      lat[min(len(lat) - 1, int(len(lat) * 0.99))], lat[-1]))
PY
grep -q "$F: libvirt unresponsive" "$dir/memtided.log" && [ "$(field "$F" peer_unresponsive)" = True ]
check $? "frozen $F: $(grep -m1 "$F: libvirt unresponsive" "$dir/memtided.log" | cut -c1-160)"
late1=$(field "$A" ticks_late)
gap=$(field "$A" tick_gap_ms)
[ "$late1" = "$late0" ] && [ "${gap:-99999}" -le 1500 ]
check $? "$A keeps its interval beside it (tick gap $gap ms, late ticks $late0 -> $late1)"
python3 -c '
import sys
w = open(sys.argv[1]).read().split()
sys.exit(0 if float(w[w.index("p99") + 1]) < 100 else 1)' "$dir/lat.out"
check $? "status answered within 100 ms p99 with the QEMU stopped ($(cat "$dir/lat.out") ms)"
s0=$(date +%s%N)
ctl --timeout 10s detach "$F" >"$dir/detach.out" 2>&1
rc=$?
ms=$((($(date +%s%N) - s0) / 1000000))
[ $rc = 0 ] && [ $ms -lt 3000 ]
check $? "detach of frozen $F: rc $rc in $ms ms ($(tr '\n' ' ' <"$dir/detach.out" | cut -c1-120))"
exit 0
