#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# config_check.sh: memtided --check-config, and what a reload (SIGHUP) says and does.
#   1 --check-config FILE: 0 and "valid" for a good file; 1 with FILE:LINE and why for an
#     unknown key, a bad value, a key given twice, a section given twice, an indented line,
#     a file that is not there; the flags given beside it are checked too; 2 for bad usage
#   2 a reload of memtided (libvirt's test driver) after the file changed: the log names the
#     keys it applied and, as waiting for a restart, every key read only at start that the
#     file changed ([metrics] listen and [daemon] interval among them); a second reload
#     with no change still names them (they are still not in force)
#   3 sd_notify around the reload, read from a datagram socket this test listens on as
#     systemd would: RELOADING=1 with MONOTONIC_USEC (now, on CLOCK_MONOTONIC), then READY=1
#     with the status memtided started with; a file that no longer parses changes nothing
#     and ends the reload with READY=1 too
# The unit runs `memtided --check-config` before its kill -HUP (ExecReload), so `systemctl
# reload` fails on a bad file: tests/packaging/systemd_guest.sh checks that under systemd.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
echo "1..3"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
dir=$(mktemp -d /tmp/memtide-it-conf.XXXXXX)
mpid= lpid=
cleanup() {
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null
	[ -n "$lpid" ] && kill "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# 1
C=$dir/c.conf
bad=
want() { # want RC TEXT-IN-OUTPUT -- ARGS...
	local rc=$1 says=$2 out got
	shift 3
	out=$("$BIN/memtided" "$@" 2>&1)
	got=$?
	[ "$got" = "$rc" ] && grep -qF -- "$says" <<<"$out" || bad="$bad|$*: exit $got '$out'"
}
printf '[daemon]\nuri = test:///default\ninterval = 2s\n[defaults]\nheadroom = 64M\n' >"$C"
want 0 "$C: valid" -- --check-config "$C"
want 0 "$C: valid" -- --config "$C" --check-config
printf '[daemon]\nuri = test:///default\nintervall = 2s\n' >"$C"
want 1 "$C:3: unknown key 'intervall' in [daemon]" -- --check-config "$C"
printf '[daemon]\n\n[defaults]\nheadroom = lots\n' >"$C"
want 1 "$C:4: headroom must be" -- --check-config="$C"
printf '[daemon]\ninterval = 2s\n; a comment\ninterval = 5s\n' >"$C"
want 1 "$C:4: 'interval' in [daemon] is given twice, here and at line 2" -- --check-config "$C"
printf '[defaults]\nmin = 1G\n[host]\nlow_mark = 1G\n[defaults]\nmax = 4G\n' >"$C"
want 1 "$C:5: section [defaults] is given twice, here and at line 1" -- --check-config "$C"
printf '[daemon]\nuri = test:///default\n    interval = 2s\n' >"$C"
want 1 "$C:3: an indented line continues 'uri' of line 2" -- --check-config "$C"
want 1 "$dir/none.conf: No such file" -- --check-config "$dir/none.conf"
printf '[daemon]\nuri = test:///default\n' >"$C"
want 1 "interval must be" -- --check-config "$C" --interval 1ms
want 2 "empty" -- --check-config=
[ -z "$bad" ]
check $? "--check-config: 0 for a good file, 1 with FILE:LINE for 8 kinds of bad one, 2 for bad usage${bad:+ (not:${bad})}"

# 2 and 3: memtided with a config, reloaded twice after the file changed, then with a bad file.
python3 - "$dir/notify.sock" "$dir/notify.log" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(30)
with open(sys.argv[2], 'w') as log:
    try:
        while True:
            msg = s.recv(4096).decode()
            log.write('%d %s\n' % (time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000, msg.replace('\n', '|')))
            log.flush()
            if 'STOPPING=1' in msg:
                break
    except socket.timeout:
        pass
PY
lpid=$!
for _ in $(seq 50); do [ -S "$dir/notify.sock" ] && break; sleep 0.1; done
printf '[daemon]\nuri = test:///default\nvsock_dir = none\ninterval = 2s\n[metrics]\nlisten = off\n[defaults]\nheadroom = 64M\n' >"$C"
NOTIFY_SOCKET=$dir/notify.sock "$BIN/memtided" --foreground --config "$C" --socket "$dir/ctl.sock" \
	--state-dir "$dir/state" >"$dir/memtided.log" 2>&1 &
mpid=$!
for _ in $(seq 100); do grep -q 'READY=1' "$dir/notify.log" 2>/dev/null && break; sleep 0.1; done
# wait_log N PATTERN: the log has N lines matching
wait_log() { for _ in $(seq 100); do [ "$(grep -c "$2" "$dir/memtided.log")" -ge "$1" ] && return 0; sleep 0.1; done; return 1; }
printf '[daemon]\nuri = test:///default\nvsock_dir = none\ninterval = 3s\n[metrics]\nlisten = 127.0.0.1:19848\n[defaults]\nheadroom = 128M\nmin = 512M\n[host]\nlow_mark = 1G\n' >"$C"
kill -HUP $mpid
wait_log 1 'reloaded '
kill -HUP $mpid
wait_log 2 'reloaded '
printf '[daemon]\nuri = test:///default\ninterval = 3s\ninterval = 4s\n' >"$C"
kill -HUP $mpid
wait_log 1 'keeping the settings in force'
sed 's/^/# memtided: /' "$dir/memtided.log" | grep -E 'reload' | head -6
r1=$(grep 'reloaded ' "$dir/memtided.log" | head -1)
w=$(grep 'reload: .*changed since memtided started' "$dir/memtided.log")
r2=$(grep 'reloaded ' "$dir/memtided.log" | sed -n 2p)
grep -q 'applied \[defaults\] headroom, \[defaults\] min, \[host\] low_mark; 1 VM policies re-read' <<<"$r1" &&
	[ "$(echo "$w" | wc -l)" = 2 ] && ! grep -vq '\[daemon\] interval, \[metrics\] listen changed' <<<"$w" &&
	grep -q 'no setting a reload applies changed' <<<"$r2" &&
	grep -q "$C:4: 'interval' in \[daemon\] is given twice" "$dir/memtided.log"
check $? "reloads: the first applied [defaults] headroom and min and [host] low_mark, both name [daemon] interval and [metrics] listen as waiting for a restart, the second applied nothing new; a bad file is refused with FILE:LINE"

kill -TERM $mpid
wait $mpid
mpid=
wait $lpid
lpid=
sed 's/^/# notify: /' "$dir/notify.log" | head -12
python3 - "$dir/notify.log" <<'PY'
import sys
lines = [l.rstrip('\n').split(' ', 1) for l in open(sys.argv[1])]
msgs = [(int(t), m.split('|')) for t, m in lines]
ready0 = next(m for t, m in msgs if 'READY=1' in m)
status0 = [f for f in ready0 if f.startswith('STATUS=')]
reloads = [i for i, (t, m) in enumerate(msgs) if 'RELOADING=1' in m]
assert len(reloads) == 3, 'three reloads, not %d' % len(reloads)
for i in reloads:
    t, m = msgs[i]
    usec = [int(f.split('=', 1)[1]) for f in m if f.startswith('MONOTONIC_USEC=')]
    assert usec and abs(usec[0] - t) < 2_000_000, 'MONOTONIC_USEC %s is not now (%d)' % (usec, t)
    after = next(mm for tt, mm in msgs[i + 1:] if 'READY=1' in mm or 'RELOADING=1' in mm)
    assert 'READY=1' in after, 'a reload not ended by READY=1'
    assert [f for f in after if f.startswith('STATUS=')] == status0, 'status after: %s' % after
PY
check $? "sd_notify: 3 reloads, each RELOADING=1 with MONOTONIC_USEC now, then READY=1 with the starting status (the bad file's too)"
exit $failed
