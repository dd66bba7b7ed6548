#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_ctl.sh: memtided's control socket and memtidectl, against a real QEMU guest.
#
# memtided runs in plain-QEMU mode on the tiny integration guest (host_guest.sh) with
# libvmm's simulated source (--source sim: no agent needed, and the generations fill the
# same way as with a live source), so `status`, `vm show` and `top` have a real balloon and
# real generations to show.  Policy round trips go through the daemon (plain-QEMU mode keeps
# the policy in memory; the libvirt metadata path is host_libvirt.sh's).
#
# Checked: status lists the VM with its balloon figures; --json is valid JSON; vm show prints
# generation bars and the controller; policy set/get round trip; a bad key, a bad value, an
# unknown VM are refused with exit 1 and a message; garbage and an over-long line get JSON
# errors and the daemon lives on; a non-root peer is refused; the socket is 0600; a second
# memtided on the same socket refuses to start; memtidectl with no daemon exits 3 saying
# so; `hook` with no daemon exits 3 at once, saying so; top --count 2 prints two frames;
# SIGHUP keeps the policy set at run time (enabled=false, the kill switch, among it);
# `release --wait` brings the VM back to its full size, never faster than release_rate (64M
# here) in any second of the balloon's real size, read every 50 ms through a second QMP
# monitor, and `resume` ends the release.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"
TOTAL=23

echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided/memtidectl not built"
command -v qemu-system-x86_64 >/dev/null || skip_rest "no qemu-system-x86_64"
it_guest_build || skip_rest "cannot build the integration guest"

dir=$(mktemp -d /tmp/memtide-it-ctl.XXXXXX)
chmod 755 "$dir" # so that the non-root peer of test 11 reaches the socket's own check
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
SOCK=$dir/run/ctl.sock
PORT=$((20000 + $$ % 20000))
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }

# 1-2: no daemon yet.
out=$(ctl status 2>&1)
rc=$?
[ $rc = 3 ] && echo "$out" | grep -q "cannot reach memtided at $SOCK"
check $? "no daemon: memtidectl exits 3 and says it cannot reach memtided (rc $rc)"
t0=$(date +%s%N)
ctl hook some-domain started begin </dev/null >/dev/null 2>"$dir/hook.err"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
# Non-zero so the hook script can log the missed event (the script itself exits 0, so
# libvirt never fails a domain over us: host_frontends.sh checks that).
[ $rc = 3 ] && [ $ms -lt 1000 ] && grep -q "not delivered" "$dir/hook.err"
check $? "no daemon: hook exits 3 at once ($ms ms) saying the event was not delivered"

qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
	-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
	-serial "file:$dir/serial.log" -qmp "unix:$dir/qmp.sock,server=on,wait=off" \
	-qmp "unix:$dir/test.sock,server=on,wait=off" \
	-device virtio-balloon-pci,id=balloon0,free-page-reporting=on 2>"$dir/qemu.err" &
pids+=($!)
wait_for 30 grep -qs "memtide-it-guest ready" "$dir/serial.log" || skip_rest "guest did not boot"

printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
stats_period = 1
metrics_port = $PORT
socket = $SOCK
source = sim
state_dir = $dir/state
[controller]
max_inflate_step = 64M
[host]
meminfo = $dir/meminfo
release_rate = 64M
[defaults]
min = 192M
headroom = 32M
CONF
"$BIN/memtided" --qmp "$dir/qmp.sock" --name it-vm --foreground --config "$dir/memtided.conf" \
	--log-level info >"$dir/memtided.log" 2>&1 &
mpid=$!
pids+=($mpid)
gens_ready() { ctl --json vm show it-vm 2>/dev/null | grep -q '"generations":\[{'; }
wait_for 20 gens_ready || { tail -20 "$dir/memtided.log" | sed 's/^/# /'; }

# 3: the socket's mode.
[ "$(stat -c %a "$SOCK")" = 600 ]
check $? "the control socket is mode 0600 ($(stat -c %a "$SOCK"))"

# 4-5: status, human and JSON.
out=$(ctl status)
echo "$out" | sed 's/^/#   /'
echo "$out" | grep -Eq '^it-vm +(active|attaching|agent-silent|deflating) +512M'
check $? "status lists it-vm with its state and 512 MiB maximum"
ctl --json status | python3 -c '
import json, sys
r = json.load(sys.stdin)
v = r["vms"][0]
assert r["ok"] and v["name"] == "it-vm" and v["max_bytes"] == 512 << 20, v
assert 0 < v["balloon_actual_bytes"] <= v["max_bytes"], v
assert r["host"]["mem_total_bytes"] == 25165824 * 1024, r["host"]
# The threshold never goes below the reuse floor (the simulated source has page-level bits).
assert 0 <= v["reuse_floor_ms"] <= v["cold_age_ms"], v
# The inflation hold is at most hold_max (8 min by default) and says how it got there.
assert 0 <= v["hold_left_ms"] <= 480000 and v["refused_steps"] >= 0, v'
check $? "status --json parses and its figures are the VM's and the host's"

# 6: vm show.
out=$(ctl vm show it-vm)
echo "$out" | sed 's/^/#   /' | head -20
echo "$out" | grep -q 'generations (oldest first' && echo "$out" | grep -Eq '\|#+\.*\|' &&
	echo "$out" | grep -Eq 'controller: cold age threshold [0-9.]+[sm] \(reuse floor ([0-9.]+[sm]|none)\)'
check $? "vm show prints generation bars and the controller"

# 7-9: policy.
ctl policy set it-vm headroom=64M priority=3 && out=$(ctl policy get it-vm)
echo "$out" | grep -qx 'headroom=64M' && echo "$out" | grep -qx 'priority=3'
check $? "policy set then get: headroom=64M priority=3"
err=$(ctl policy set it-vm colour=blue 2>&1)
rc=$?
[ $rc = 1 ] && [ -n "$err" ] && echo "# $err"
check $? "an unknown policy key is refused with exit 1 and a message"
err=$(ctl policy set it-vm headroom=lots 2>&1)
rc1=$?
err2=$(ctl vm show no-such-vm 2>&1)
rc2=$?
[ $rc1 = 1 ] && [ $rc2 = 1 ] && echo "$err2" | grep -q "no domain named 'no-such-vm'"
check $? "a bad value and an unknown VM are refused with exit 1 ($err | $err2)"

# 10: hostile input on the socket.
python3 - "$SOCK" <<'PY'
import json, socket, sys
def ask(data):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(data)
    s.settimeout(5); buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(65536)
        if not c: break
        buf += c
    s.close(); return json.loads(buf)
for bad in [b"garbage\n", b"[1,2]\n", b'{"cmd":7}\n', b'{"cmd":"vm","name":{"a":1}}\n',
            b'{"cmd":"status"} trailing\n', b"\xff\xfe\n", b'{"a":' * 100 + b"\n",
            b'{"cmd":"policy-set","name":"it-vm","key":"min"}\n']:
    r = ask(bad)
    assert r["ok"] is False and r["error"], (bad, r)
r = ask(b"x" * 70000)
assert r["ok"] is False and "longer than" in r["error"], r
assert ask(b'{"cmd":"status"}\n')["ok"] is True
PY
check $? "garbage, wrong types, deep nesting and a 70000-byte line get JSON errors; the daemon answers after"

# 11: a non-root peer.
err=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/memtidectl" --socket "$SOCK" status 2>&1)
rc=$?
chmod 0666 "$SOCK" # even with the file open to all, SO_PEERCRED must refuse
err2=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/memtidectl" --socket "$SOCK" status 2>&1)
rc2=$?
chmod 0600 "$SOCK"
[ $rc = 3 ] && echo "$err" | grep -q "permission denied" && [ $rc2 = 1 ] &&
	echo "$err2" | grep -q "permission denied"
check $? "a non-root peer is refused (file mode: rc $rc; peer credentials: rc $rc2, '$err2')"

# 12: a second daemon on the same socket.
"$BIN/memtided" --qmp "$dir/qmp.sock" --name it-vm2 --foreground --config "$dir/memtided.conf" \
	>"$dir/second.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "another memtided answers" "$dir/second.log" && kill -0 $mpid
check $? "a second memtided on the same socket refuses to start (rc $rc), the first runs on"

# 13: top, not on a tty.
out=$(ctl top --count 2 --interval 0.2)
[ "$(echo "$out" | grep -c '^memtidectl top')" = 2 ] && echo "$out" | grep -q '^it-vm:'
check $? "top --count 2 prints two frames with the VM's generations"

# 14: the hook reaches the daemon (plain-QEMU mode logs it and does nothing else).
ctl hook other-dom started begin && wait_for 5 grep -q "other-dom: libvirt hook: started begin" "$dir/memtided.log"
check $? "hook reaches memtided and is logged"

# 15-17: Prometheus metrics.
curl -sf "http://127.0.0.1:$PORT/metrics" >"$dir/metrics.txt"
python3 - "$dir/metrics.txt" <<'PY'
# A strict reader of the text exposition format 0.0.4: every sample belongs to a family
# declared by # HELP and # TYPE just before its samples, names and labels are well formed,
# values parse as floats, no series is repeated.
import re, sys
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
sample = re.compile(r"^(" + name_re + r")(\{(.*)\})? (\S+)$")
label = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')
fam, typed, seen, series = None, set(), set(), {}
for ln in open(sys.argv[1]).read().splitlines():
    if ln.startswith("# HELP "):
        fam = ln.split()[2]; assert fam not in seen, "family twice: " + fam; seen.add(fam); continue
    if ln.startswith("# TYPE "):
        _, _, n, t = ln.split(); assert n == fam and t in ("gauge", "counter", "summary"), ln; typed.add(n)
        assert (t == "counter") == n.endswith("_total"), "counter iff _total: " + ln
        assert not re.search(r"per_minute|percent|_pages", n), "non-base unit: " + ln
        continue
    m = sample.match(ln); assert m, "bad line: " + ln
    n, labels, v = m.group(1), m.group(3) or "", m.group(4)
    # a summary's _sum and _count belong to it
    assert fam in typed and (n == fam or n in (fam + "_sum", fam + "_count")), "sample outside its family: " + ln
    float(v)
    pos, lab = 0, {}
    while pos < len(labels):
        lm = label.match(labels, pos); assert lm, "bad labels: " + ln
        lab[lm.group(1)] = lm.group(2); pos = lm.end()
    key = (n, tuple(sorted(lab.items()))); assert key not in series, "repeated: " + ln
    series[key] = float(v)
def get(n, **lab):
    return [v for (k, l), v in series.items() if k == n and all(dict(l).get(a) == b for a, b in lab.items())]
print("# memtide_vms %s, up %s, build_info %s" % (get("memtide_vms"), get("memtide_up"), get("memtide_build_info")))
assert get("memtide_vms") == [1.0]
assert get("memtide_vm_max_bytes", domain="it-vm") == [512 * 2**20]
assert 0 < get("memtide_vm_balloon_actual_bytes", domain="it-vm")[0] <= 512 * 2**20
assert sum(get("memtide_vm_state", domain="it-vm")) == 1.0
assert len(get("memtide_vm_generation_bytes", domain="it-vm")) >= 2
assert get("memtide_build_info", mode="qemu") == [1.0] and get("memtide_up") == [1.0]
assert get("memtide_libvirt_connected") == []  # plain-QEMU mode: no libvirt
assert get("memtide_vm_balloon_inflations_total", domain="it-vm")[0] >= 0
# no agent, so no PSI: a figure memtided does not know has no sample, not a 0
assert get("memtide_vm_guest_psi_memory_some_avg10_ratio", domain="it-vm") == []
assert get("memtide_vm_agent_rtt_seconds", domain="it-vm") == []
assert len(get("memtide_vm_working_set_by_age_bytes", domain="it-vm")) == 4
assert 0 <= get("memtide_vm_reuse_floor_seconds", domain="it-vm")[0] <= get("memtide_vm_cold_age_seconds", domain="it-vm")[0]
assert 0 <= get("memtide_vm_inflate_hold_seconds", domain="it-vm")[0] <= 480
assert get("memtide_vm_refused_steps_in_a_row", domain="it-vm")[0] >= 0
print("# %d series in %d families" % (len(series), len(seen)))
PY
check $? "the /metrics scrape parses as Prometheus text, with the VM's series and sane values"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/other")
[ "$code" = 404 ]
check $? "other paths get 404 ($code)"
"$BIN/memtided" --qmp "$dir/qmp.sock" --name it-vm3 --foreground --socket "$dir/third.sock" \
	--metrics-port $PORT --config "$dir/memtided.conf" >"$dir/third.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q "cannot serve metrics on 127.0.0.1:$PORT" "$dir/third.log" && [ ! -e "$dir/third.sock" ]
check $? "a taken metrics port: memtided exits $rc with a message and leaves nothing behind"

# 18-20: SIGHUP keeps what `policy set` changed at run time (plain QEMU has no metadata:
# only memtided holds it), the operator's kill switch above all; release and resume.
# memtided first steps a VM down one cold age after attach (11 s here: it vouches for no page
# idle longer than it watched it); the release below is to climb from there.
below_full() { [ "$(ctl --json vm show it-vm | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm"]["balloon_actual_bytes"] >> 20)')" -lt 512 ]; }
wait_for 60 below_full
ctl policy set it-vm enabled=false
low=$(ctl --json vm show it-vm | python3 -c 'import json,sys; print(json.load(sys.stdin)["vm"]["balloon_actual_bytes"] >> 20)')
kill -HUP $mpid
wait_for 5 grep -q "reload keeps the runtime policy enabled=no" "$dir/memtided.log"
disabled() { ctl policy get it-vm | grep -qx 'enabled=no' && ctl status | grep -Eq '^it-vm +disabled '; }
wait_for 5 disabled && ctl policy get it-vm | grep -qx 'headroom=64M'
check $? "SIGHUP keeps the runtime policy: enabled=false and headroom=64M stay in force"
# The balloon's real size every 50 ms while the release climbs, on a QMP monitor of its own.
python3 - "$dir/test.sock" "$dir/climb.txt" <<'PY' &
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rwb")
def cmd(c):
    f.write(json.dumps({"execute": c}).encode() + b"\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r.get("return")
json.loads(f.readline()); cmd("qmp_capabilities")
out, end = open(sys.argv[2], "w"), time.monotonic() + 40
while time.monotonic() < end:
    out.write("%d %d\n" % (time.monotonic() * 1000, cmd("query-balloon")["actual"])); out.flush()
    time.sleep(0.05)
PY
watch=$!
out=$(ctl release it-vm --wait 2>&1)
rc=$?
kill $watch 2>/dev/null
wait $watch 2>/dev/null
echo "$out" | sed 's/^/#   /'
# The most the balloon gave in any second, from its real size (two samples at most 1 s apart).
most=$(python3 - "$dir/climb.txt" <<'PY'
import sys
p = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
most = 0
for i, (t0, a0) in enumerate(p):
    for t1, a1 in p[i + 1:]:
        if t1 - t0 > 1000:
            break
        most = max(most, a1 - a0)
print(most >> 20)
PY
)
# (the balloon may still be on its way down when release arrives: it climbs from wherever it is)
from=$(echo "$out" | sed -nE 's/^  it-vm +([0-9]+)M -> 512M.*/\1/p' | head -1)
[ $rc = 0 ] && [ -n "$from" ] && [ "$from" -lt 512 ] && echo "$out" | grep -q '^done:' &&
	ctl status | grep -Eq '^it-vm +released +512M' &&
	ctl --json vm show it-vm | grep -q '"balloon_actual_bytes":536870912' &&
	[ -n "$most" ] && [ "$most" -le 64 ] && [ "$most" -gt 0 ]
check $? "release --wait: it-vm climbs from ${from:-?} (${low}M when asked) to 512 MiB, at most ${most:-?} MiB in any second (release_rate 64M), then shows 'released'"
err=$(ctl release no-such-vm 2>&1)
rc1=$?
ctl resume it-vm >/dev/null && ctl policy set it-vm enabled=true
rc2=$?
[ $rc1 = 1 ] && [ $rc2 = 0 ] && ! ctl status | grep -Eq '^it-vm +released' &&
	ctl --json vm show it-vm | grep -q '"released":false'
check $? "resume ends the release; an unknown VM is refused ($err)"

# 21-22: SIGHUP re-reads the file ([defaults] is the policy in plain-QEMU mode, under what
# policy set changed: min was never set at run time); a broken file changes nothing.
sed -i 's/^min = 192M/min = 160M/' "$dir/memtided.conf"
kill -HUP $mpid
mn() { ctl policy get it-vm | grep -qx "min=$1"; }
wait_for 5 mn 160M && ctl policy get it-vm | grep -qx 'headroom=64M'
check $? "SIGHUP: the new [defaults] min (160M) is in force, the runtime headroom=64M kept"
echo "[defaults]" >>"$dir/memtided.conf"
echo "min = much" >>"$dir/memtided.conf"
kill -HUP $mpid
wait_for 5 grep -q "reload: .*keeping the settings in force" "$dir/memtided.log" && mn 160M && kill -0 $mpid
check $? "SIGHUP with a broken file: an error in the log, the old settings kept, memtided runs on"

# 23: domxml-patch against a real libvirtd (started here as root when it is not running, as
# host_libvirt.sh does): no change without --yes; --yes defines the patched domain; a second
# run has nothing to change.
V="virsh -q -c qemu:///system"
lv_up() {
	command -v libvirtd >/dev/null && [ "$(id -u)" = 0 ] || return 1
	tests/libvirtd_up.sh
	wait_for 10 $V version >/dev/null 2>&1
}
if lv_up; then
	pd=mtd-patch-$$
	cat >"$dir/$pd.xml" <<XML
<domain type='qemu'>
  <name>$pd</name>
  <memory unit='MiB'>256</memory>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model='virtio'/></devices>
</domain>
XML
	$V define "$dir/$pd.xml" >/dev/null
	out1=$("$BIN/memtidectl" domxml-patch "$pd" </dev/null)
	unchanged=$($V dumpxml --inactive "$pd" | grep -c 'org.memtide.agent.0')
	"$BIN/memtidectl" domxml-patch "$pd" --yes >/dev/null
	x=$($V dumpxml --inactive "$pd")
	out3=$("$BIN/memtidectl" domxml-patch "$pd")
	$V undefine "$pd" >/dev/null
	echo "$out1" | grep -q '^+.*freePageReporting="on"' && [ "$unchanged" = 0 ] &&
		echo "$x" | grep -q "freePageReporting='on'" && echo "$x" | grep -q "autodeflate='on'" &&
		echo "$x" | grep -q "<stats period='2'/>" &&
		echo "$x" | grep -q "name='org.memtide.agent.0'" && echo "$out3" | grep -q "nothing to change"
	check $? "domxml-patch: shows the diff, changes nothing without --yes, patches with --yes, then has nothing to change"
else
	n=$((n + 1))
	echo "ok $n # SKIP domxml-patch: no libvirtd here (needs root)"
fi

kill -TERM $mpid
wait $mpid
[ ! -e "$SOCK" ] || { nok "memtided left its socket behind"; }
[ "$failed" = 0 ] || tail -20 "$dir/memtided.log" | sed 's/^/# /'
exit $failed
