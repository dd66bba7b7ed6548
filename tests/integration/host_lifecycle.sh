#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_lifecycle.sh: memtided's faults in plain-QEMU mode, against a real QEMU guest.
#
# Real: QEMU (TCG) booting the tiny integration guest (host_guest.sh) whose virtio balloon
# driver carries out memtided's targets (read back through a second QMP monitor), and
# memtided.  Between memtided and QEMU's QMP socket sits a proxy (a Python program below)
# that passes every line through and, on cue, answers `balloon` with an error, drops the
# connection, or closes its listening socket for a while: no real QEMU fails on demand.
# The working set is libvmm's simulation (source = sim: the guest runs no agent).
#
# Checked, each with its one log line: a deflate whose balloon command fails (QMP error,
# then a dropped connection) is retried each tick and carried out within seconds, not
# after the hold; after the QMP socket comes back the current target is sent again; QEMU
# killed in the middle of an inflation: memtided says it lost the balloon and runs on, and
# the QEMU started in its place is started over from its full size (the dead one's target
# is never sent to it); the state directory turned unwritable: one warning, memtided runs
# on, and one notice when it is writable again; 100 QMP reconnects leak no fd and no
# memory; 100 kill -9 / start cycles of memtided at random moments leave one whole state
# file (never a corrupt one) and the balloon where it was; the VM never goes below its
# floor.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"
. "$(dirname "$0")/lib/asan_rss.sh" # rss_kib PID, RSS_SAN (ASan's quarantine off)
TOTAL=9

echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided/memtidectl not built"
command -v qemu-system-x86_64 >/dev/null || skip_rest "no qemu-system-x86_64"
it_guest_build || skip_rest "cannot build the integration guest"

dir=$(mktemp -d /tmp/memtide-it-life.XXXXXX)
pids=()
qpid= mpid=
cleanup() {
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
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
		sleep 0.1
	done
	"$@"
}
logged() { grep -q "$1" "$dir/memtided.log"; }
count() { grep -c "$1" "$dir/memtided.log"; }
SOCK=$dir/ctl.sock
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }

# ---- the QMP proxy -------------------------------------------------------------------------
cat >"$dir/proxy.py" <<'PY'
# A QMP proxy: memtided connects to LISTEN, each connection is passed to QEMU's UPSTREAM line
# by line.  Commands on a FIFO: fail-balloon N (answer the next N `balloon` commands with a
# QMP error), drop (close the connection now), refuse SECONDS (no listening socket for that
# long: connections are refused), stats (log the connections made so far).
import json, os, select, socket, sys, time
listen_path, upstream_path, fifo_path, log_path = sys.argv[1:5]
log = open(log_path, "a", buffering=1)
fifo = os.open(fifo_path, os.O_RDONLY | os.O_NONBLOCK)

def listen():
    try:
        os.unlink(listen_path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX)
    s.bind(listen_path)
    s.listen(4)
    return s

srv, pairs, fail, refuse_until, accepted = listen(), {}, 0, 0.0, 0

def close_all():
    for c, p in list(pairs.items()):
        c.close()
        p["up"].close()
    pairs.clear()

while True:
    if srv is None and time.monotonic() >= refuse_until:
        srv = listen()
        log.write("listening again\n")
    rl = [fifo] + ([srv] if srv else []) + list(pairs) + [p["up"] for p in pairs.values()]
    r, _, _ = select.select(rl, [], [], 0.05)
    if fifo in r:
        for line in os.read(fifo, 4096).decode().split("\n"):
            w = line.split()
            if not w:
                continue
            log.write("cmd %s\n" % line)
            if w[0] == "fail-balloon":
                fail = int(w[1])
            elif w[0] == "drop":
                close_all()
            elif w[0] == "refuse":
                close_all()
                srv.close()
                os.unlink(listen_path)
                srv, refuse_until = None, time.monotonic() + float(w[1])
        continue
    if srv is not None and srv in r:
        c = srv.accept()[0]
        u = socket.socket(socket.AF_UNIX)
        try:
            u.connect(upstream_path)
        except OSError as e:
            log.write("upstream: %s\n" % e)
            c.close()
            continue
        accepted += 1
        log.write("accepted %d\n" % accepted)
        pairs[c] = {"up": u, "buf": b""}
        continue
    for c, p in list(pairs.items()):
        try:
            if p["up"] in r:
                d = p["up"].recv(65536)
                if not d:
                    raise ConnectionResetError("QEMU closed")
                c.sendall(d)
            if c in r:
                d = c.recv(65536)
                if not d:
                    raise ConnectionResetError("memtided closed")
                p["buf"] += d
                while b"\n" in p["buf"]:
                    line, p["buf"] = p["buf"].split(b"\n", 1)
                    try:
                        m = json.loads(line)
                    except ValueError:
                        m = {}
                    if m.get("execute") == "balloon" and fail > 0:
                        fail -= 1
                        log.write("failed balloon %d\n" % m["arguments"]["value"])
                        e = {"error": {"class": "GenericError", "desc": "injected by the test"}}
                        if "id" in m:
                            e["id"] = m["id"]
                        c.sendall((json.dumps(e) + "\n").encode())
                        continue
                    if m.get("execute") == "balloon":
                        log.write("balloon %d\n" % m["arguments"]["value"])
                    p["up"].sendall(line + b"\n")
        except OSError:
            # either side gone (a killed memtided resets its end): drop the pair
            c.close()
            p["up"].close()
            del pairs[c]
PY
mkfifo "$dir/proxy.fifo"
python3 "$dir/proxy.py" "$dir/proxy.sock" "$dir/qmp.sock" "$dir/proxy.fifo" "$dir/proxy.log" &
pids+=($!)
exec 7<>"$dir/proxy.fifo"
proxy() { echo "$*" >&7; }

# ---- the guest -------------------------------------------------------------------------------
boot() {
	: >"$dir/serial.log"
	qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
		-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
		-serial "file:$dir/serial.log" \
		-qmp "unix:$dir/qmp.sock,server=on,wait=off" -qmp "unix:$dir/test.sock,server=on,wait=off" \
		-device virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on \
		2>>"$dir/qemu.err" &
	qpid=$!
	wait_for 30 grep -q "memtide-it-guest ready" "$dir/serial.log"
}
boot || skip_rest "guest did not boot"
actual() { balloon_mib "$dir/test.sock"; }
at() { [ "$(actual)" = "$1" ]; }
below() { local a; a=$(actual); [ -n "$a" ] && [ "$a" -le "$1" ]; }
above() { local a; a=$(actual); [ -n "$a" ] && [ "$a" -ge "$1" ]; }

printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
# cold_age fixes the age by hand (5 s, its least, cut to the 1.4 s the generations reach at
# this interval): at a 100 ms interval the generations tell ages apart up to 1.4 s, under the
# reuse histogram's second bucket, so the refault controller would vouch for none and take
# nothing (docs/operations.md, "Eviction by age held").  This test is about memtided's
# lifecycle, not that controller.
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 100ms
stats_period = 1
metrics_port = 0
socket = $SOCK
source = sim
state_dir = $dir/state
[controller]
max_inflate_step = 64M
hold_after_deflate = 600s
[host]
meminfo = $dir/meminfo
[defaults]
min = 192M
headroom = 32M
cold_age = 5s
[sim]
hot_percent = 10
CONF
start_memtided() {
	"$BIN/memtided" --qmp "$dir/proxy.sock" --name it-vm --foreground \
		--config "$dir/memtided.conf" --log-level info >>"$dir/memtided.log" 2>&1 &
	mpid=$!
}
start_memtided
wait_for 30 below 192 || { nok "memtided did not inflate the guest to its floor: $(actual) MiB"; tail "$dir/memtided.log"; exit 1; }

# 1: a deflate whose balloon command fails three times (QMP errors): retried each tick and
# carried out within a second, not after the 600 s hold.
proxy fail-balloon 3
t0=$(date +%s%N)
ctl policy set it-vm min=320M
wait_for 10 above 320
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$(grep -c '^failed balloon' "$dir/proxy.log")" = 3 ] && above 320 &&
	[ "$(count 'balloon target 320 MiB not set')" = 1 ] && logged "balloon target 320 MiB set after 3 failed tries"
check $? "a deflate failed 3 times by QMP errors is retried each tick: 192 -> $(actual) MiB in $ms ms, one warning"

# 2: the connection drops on the deflate, and the QMP socket is gone for 2 s: the target is
# sent again once it comes back.
proxy refuse 2
ctl policy set it-vm min=400M
t0=$(date +%s%N)
wait_for 10 above 400
ms=$((($(date +%s%N) - t0) / 1000000))
above 400 && [ $ms -ge 1500 ] && logged "cannot reach the balloon" && logged "the balloon answers again" &&
	grep -q "listening again" "$dir/proxy.log"
check $? "QMP socket gone for 2 s during a deflate: the target reached the guest $ms ms later, after it came back"

# 3: QEMU killed in the middle of an inflation.  The proxy hides QEMU's pid (memtided sees
# the proxy's), so what tells the new QEMU from the old is its balloon: all 512 MiB, more
# than memtided set.  (Connected directly, the pid says it: tests/unit/test_mtd_vm_loop.c.)
lost0=$(count "cannot reach the balloon")
ctl policy set it-vm min=192M
wait_for 10 logged "inflate 400->"
kill -KILL $qpid
wait $qpid 2>/dev/null
wait_for 5 eval '[ "$(count "cannot reach the balloon")" -gt '"$lost0"' ]'
lost=$(($(count "cannot reach the balloon") - lost0))
kill -0 $mpid
rc=$?
boot
wait_for 15 logged "the balloon holds 512 MiB, more than"
first=$(sed -n '/the balloon holds 512 MiB, more than/,$p' "$dir/memtided.log" | grep -o 'inflate [0-9]*->[0-9]*' | head -1)
[ $rc = 0 ] && [ "$lost" = 1 ] && logged "the balloon holds 512 MiB, more than" &&
	{ [ -z "$first" ] || [ "$first" = "inflate 512->448" ]; }
check $? "QEMU killed mid-inflate: $lost line, memtided runs on; the new QEMU is started from 512 MiB (first move: ${first:-none yet})"
wait_for 30 below 192

# 4: the state directory turns unwritable (a file where it was): one warning, memtided runs
# on; writable again: one notice, and the state is there.
mv "$dir/state" "$dir/state.away" && touch "$dir/state"
ctl policy set it-vm headroom=40M && ctl policy set it-vm headroom=48M && ctl policy set it-vm headroom=56M
wait_for 5 logged "state not saved"
warned=$(count "state not saved")
rm "$dir/state" && mv "$dir/state.away" "$dir/state"
ctl policy set it-vm headroom=32M
wait_for 5 logged "state saved in $dir/state again"
[ "$warned" = 1 ] && kill -0 $mpid && grep -q '"headroom":"33554432"' "$dir/state/it-vm.state"
check $? "state directory unwritable: $warned warning, memtided runs on; writable again: saved ('state saved ... again')"

# 5, 6: 100 QMP reconnects (the connection dropped under memtided): no fd, no memory leaked.
. "$(dirname "$0")/lib/fd_count.sh" # fds PID, fds_low PID
reconnects() { count "reconnected to QEMU"; }
drop_once() {
	local r
	r=$(reconnects)
	proxy drop
	wait_for 5 eval '[ "$(reconnects)" -gt '"$r"' ]'
}
# Warm up: 5 reconnects; 60 for ASan's allocator (lib/asan_rss.sh).
warm=5
[ "$RSS_SAN" = 1 ] && warm=60
for _ in $(seq $warm); do drop_once; done
fd0=$(fds_low "$mpid") rss0=$(rss_kib "$mpid") bad=0
for _ in $(seq 100); do drop_once || bad=$((bad + 1)); done
fd1=$(fds_low "$mpid") rss1=$(rss_kib "$mpid")
echo "# memtided over 100 QMP reconnects: fds $fd0 -> $fd1, VmRSS $rss0 -> $rss1 KiB"
[ $bad = 0 ] && [ "$fd1" -le "$fd0" ] && [ $((rss1 - rss0)) -le 1024 ]
check $? "100 QMP reconnects: fds $fd0 -> $fd1, VmRSS $rss0 -> $rss1 KiB (<= 1 MiB more), $bad missed"
wait_for 5 below 192
at 192
check $? "after the reconnects the guest is where it was: $(actual) MiB"

# 7, 8: 100 kill -9 / start cycles at random moments (the state file is written whenever a
# policy set changes it, so kills land on writes too): one whole state file, never a
# corrupt one, no leftover, and the balloon where it was.
cycles=0
mark=$(wc -l <"$dir/proxy.log")
resumed() { count "resumed from its state file"; }
for i in $(seq 100); do
	r=$(resumed)
	kill -KILL $mpid
	wait $mpid 2>/dev/null
	start_memtided
	wait_for 5 eval '[ "$(resumed)" -gt '"$r"' ]'
	ctl policy set it-vm headroom=$((32 + i % 8))M >/dev/null 2>&1
	sleep "0.$((RANDOM % 2))$((RANDOM % 10))"
	cycles=$((cycles + 1))
done
# every balloon command the 100 memtided sent (the proxy saw them all): the size it had
sizes_moved=$(tail -n +$((mark + 1)) "$dir/proxy.log" | grep '^balloon ' | grep -vc '^balloon 201326592$')
at 192 || sizes_moved=$((sizes_moved + 1))
bad_state=$(count "state file ignored")
# (history/ holds the audit trail, memtidectl vm history's; no temporary file may be left)
files=$(ls -A "$dir/state" | grep -vx history)
echo "# state directory after $cycles kills: $files"
[ "$bad_state" = 0 ] && [ "$files" = "it-vm.state" ] && [ $sizes_moved = 0 ] &&
	"$BIN/memtidectl" --socket "$SOCK" status | grep -q '^it-vm '
check $? "$cycles kill -9 / start cycles: $bad_state corrupt state files, files '$files', $sizes_moved balloon commands other than the 192 MiB it had"
[ "$(count 'resumed from its state file')" -ge 100 ]
check $? "every start resumed from the state file ($(count 'resumed from its state file') times)"

# 9: the floor: every balloon command memtided sent QEMU (the proxy saw them all).
kill -TERM $mpid
wait $mpid
mpid=
lowest=$(awk '/^balloon / { v = int($2 / 1048576); if (m == "" || v < m) m = v } END { print m }' "$dir/proxy.log")
[ -n "$lowest" ] && [ "$lowest" -ge 192 ]
check $? "no balloon target under the 192 MiB floor was ever sent (lowest $lowest MiB of $(grep -c '^balloon ' "$dir/proxy.log"))"
if [ "$failed" != 0 ]; then
	echo "# logs kept in $dir"
	grep -vE 'info: it-vm: (inflate|deflate|reclaim|policy)' "$dir/memtided.log" | tail -30 | sed 's/^/# /'
fi
exit $failed
