#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_hostile.sh: memtided (plain-QEMU mode) against a hostile QEMU and hostile control clients.
#
# The QMP peer is a scripted fake (Python, below): it stands in for a hostile or buggy QEMU,
# which a real QEMU cannot be made to be.  It answers every command memtided sends, and puts
# in front of each reply the messages that once crashed memtided ({"event": null},
# a qom-list entry with "type": null) and their relatives (nulls, wrong types, negative and
# 2^64-1 numbers, embedded NUL bytes, duplicate keys, a balloon name with '/').  It logs every
# command it receives, so the test waits on memtided's progress, not on time.
# Control clients then send names and values with an embedded \u0000 or other control
# characters, duplicate keys and non-string fields (tests/unit/test_mtd_control.c has the full
# table; here it is the running daemon that must answer and live on).  Last, memtidectl
# reads replies with nulls and wrong types from a fake daemon (a mock of memtided's socket:
# the real one never sends them) and must print neither "(null)" nor crash.
#
# No QEMU and no libvirt are needed: this runs anywhere memtided builds.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
TOTAL=10

echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided/memtidectl not built"
command -v python3 >/dev/null || skip_rest "no python3"

dir=$(mktemp -d /tmp/memtide-it-hostile.XXXXXX)
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
ctl() { "$BIN/memtidectl" --socket "$SOCK" "$@"; }

cat >"$dir/qmp.py" <<'PY'
# A hostile QEMU on a QMP socket (see host_hostile.sh).
import json, socket, sys
path, log_path = sys.argv[1:3]
log = open(log_path, "a", buffering=1)
GiB = 1 << 30
junk = [
    b'{"event": null}',
    b'{"event": 7, "data": {"actual": 1}}',
    b'{"event": "BALLOON_CHANGE", "data": null}',
    b'{"event": "BALLOON_CHANGE", "data": {"actual": null}}',
    b'{"event": "BALLOON_CHANGE", "data": {"actual": -4096}}',
    b'{"event": "BALLOON_CHANGE", "data": {"actual": 18446744073709551615}}',
    b'{"event": "BALLOON_CHANGE\\u0000x", "data": {"actual": 4096}}',
    b'{"event": {"nested": [null]}, "event": null}',
    b'',
]
def reply(cmd, args):
    if cmd == "qmp_capabilities":
        return {"return": {}}
    if cmd == "qom-list":
        if args.get("path") == "/machine/peripheral":
            return {"return": [{"name": "x", "type": None}, {"name": None, "type": "child<virtio-balloon-pci>"},
                               {"name": 5, "type": "child<virtio-balloon-pci>"}, None, 7,
                               {"name": "../../evil", "type": "child<virtio-balloon-pci>"},
                               {"name": "balloon0", "type": "child<virtio-balloon-pci>"}]}
        return {"return": [{"name": None, "type": None}]}
    if cmd == "query-memory-size-summary":
        return {"return": {"base-memory": GiB, "plugged-memory": None}}
    if cmd == "query-balloon":
        return {"return": {"actual": GiB}}
    if cmd == "qom-get" and args.get("property") == "guest-stats":
        return {"return": {"stats": {"stat-available-memory": None, "stat-free-memory": -1,
                                     "stat-total-memory": "x", "stat-major-faults": 18446744073709551615},
                           "last-update": None}}
    if cmd == "qom-get":
        return {"return": None}
    if cmd in ("qom-set", "balloon"):
        return {"return": {}}
    return {"error": {"class": None, "desc": None}}
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(4)
while True:
    conn, _ = srv.accept()
    conn.sendall(b'{"QMP": {"version": {}, "capabilities": []}}\n')
    buf = b""
    try:
        while True:
            d = conn.recv(65536)
            if not d:
                break
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    req = json.loads(line)
                    cmd, args = req.get("execute"), req.get("arguments") or {}
                except ValueError:
                    cmd, args = None, {}
                print(cmd, json.dumps(args), file=log)
                out = b"\n".join(junk) + b"\n" + json.dumps(reply(cmd, args)).encode() + b"\n"
                conn.sendall(out)
    except OSError:
        pass
    conn.close()
PY
python3 "$dir/qmp.py" "$dir/qmp.sock" "$dir/qmp.log" 2>"$dir/qmp.err" &
pids+=($!)
wait_for 10 test -S "$dir/qmp.sock" || skip_rest "the fake QMP peer did not start"

printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 200ms
stats_period = 1
metrics_port = 0
socket = $SOCK
source = sim
[host]
meminfo = $dir/meminfo
CONF
"$BIN/memtided" --qmp "$dir/qmp.sock" --name hostile-vm --foreground --state-dir "$dir/state" \
	--config "$dir/memtided.conf" --log-level debug >"$dir/memtided.log" 2>&1 &
mpid=$!
pids+=($mpid)

# 1: memtided reads balloon figures through the junk, over and over, and lives.
balloon_reads() { [ "$(grep -c '^query-balloon' "$dir/qmp.log" 2>/dev/null)" -ge "$1" ]; }
wait_for 30 balloon_reads 10
reads=$(grep -c '^query-balloon' "$dir/qmp.log" 2>/dev/null)
kill -0 $mpid 2>/dev/null && [ "${reads:-0}" -ge 10 ]
check $? "memtided lives through 10+ rounds of null events, null qom-list types and huge numbers ($reads balloon reads)"

# 2: it found the one good balloon entry and never built a path from the hostile names.
grep -q '"path": "/machine/peripheral/balloon0"' "$dir/qmp.log" &&
	! grep -q 'evil' "$dir/qmp.log"
check $? "the balloon is found at /machine/peripheral/balloon0; '../../evil' is never used"

# 3: the VM is managed and its balloon figure is QEMU's one sane number.
ctl --json vm show hostile-vm >"$dir/vm.json" 2>&1
python3 - "$dir/vm.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))["vm"]
assert v["balloon_actual_bytes"] == 1 << 30, v["balloon_actual_bytes"]
assert v["max_bytes"] == 1 << 30, v["max_bytes"]
EOF
check $? "status shows the VM with a 1 GiB balloon (no huge or negative figure got in)"

# 4-7: hostile control requests get a clear error and the daemon answers the next one.
ask() { python3 - "$SOCK" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
while not buf.endswith(b"\n"):
    d = s.recv(4096)
    if not d:
        break
    buf += d
print(buf.decode().strip())
EOF
}
out=$(ask '{"cmd":"vm","name":"hostile-vm\u0000evil"}')
echo "# $out"
[[ $out == *'"ok":false'* ]] && [[ $out == *'NUL'* ]]
check $? "a name with an embedded \\u0000 is refused, and the error says NUL"
out=$(ask '{"cmd":"policy-set","name":"hostile-vm","key":"min","value":"1G\u001b[2J"}')
echo "# $out"
[[ $out == *'"ok":false'* ]] && [[ $out == *'control character'* ]]
check $? "a value with a control character (ESC) is refused, and the error says so"
out=$(ask '{"cmd":"vm","name":"hostile-vm","name":"other"}')
echo "# $out"
[[ $out == *'"ok":false'* ]] && [[ $out == *'duplicate'* ]]
check $? "a request with a duplicate key is refused"
out=$(ask '{"cmd":"vm","name":null}')
echo "# $out"
[[ $out == *'"ok":false'* ]] && [[ $out == *"'name' must be a string"* ]]
check $? "a null name is refused as not a string"

# 8: still alive, still answering, and a clean stop.
ctl status >/dev/null 2>&1 && kill -0 $mpid 2>/dev/null && kill -TERM $mpid && wait $mpid
check $? "memtided still answers status and stops cleanly on SIGTERM"

# 9-10: memtidectl against a daemon that answers with nulls and wrong types.
cat >"$dir/fakectl.py" <<'PY'
import json, socket, sys
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1])
srv.listen(4)
vm = {"name": None, "state": 7, "uuid": None, "max_bytes": "x", "last_error": None,
      "policy": None, "generations": [None, {"pages": None}], "working_set": None,
      "actions": [None, {"what": None, "at_ms": None}], "return_in_force": None}
for _ in range(3):
    c, _ = srv.accept()
    req = json.loads(c.makefile().readline())
    if req.get("cmd") == "status":
        rep = {"ok": True, "host": None, "vms": [vm, None, 5]}
    elif req.get("cmd") == "vm":
        rep = {"ok": True, "vm": vm}
    else:
        rep = {"ok": False, "error": None}
    c.sendall(json.dumps(rep).encode() + b"\n")
    c.close()
PY
python3 "$dir/fakectl.py" "$dir/fake.sock" &
pids+=($!)
wait_for 10 test -S "$dir/fake.sock"
fctl() { "$BIN/memtidectl" --socket "$dir/fake.sock" "$@"; }
out=$(fctl status 2>&1; fctl vm show x 2>&1)
rc=$?
echo "$out" | head -12 | sed 's/^/#   /'
[ $rc -lt 128 ] && ! echo "$out" | grep -q '(null)'
check $? "memtidectl shows a reply full of nulls without crashing or printing (null)"
out=$(fctl policy get x 2>&1)
rc=$?
echo "# $out"
[ $rc = 1 ] && ! echo "$out" | grep -q '(null)'
check $? "an error reply whose error is null: exit 1, no (null)"
[ "$failed" = 0 ] || tail -n 30 "$dir/memtided.log" | sed 's/^/# /'
exit 0
