#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_qmp.sh: memtided in plain-QEMU mode (--qmp, --agent) against a real QEMU guest.
#
# The guest is the tiny integration guest (host_guest.sh): a real kernel whose virtio-balloon
# driver carries out memtided's targets, so every balloon figure below is the guest's own,
# read back through a second QMP monitor.  The guest agent is played by a scripted peer on
# the agent socket (a Python program speaking the protocol's frames): the real memtide-agent
# runs inside the end-to-end guest (tests/e2e), and only a scripted peer can go silent, send
# a need or garbage on cue.  It says what it receives in its log.
#
# Checked: handshake; inflation toward working set + headroom in bounded steps with reclaim
# requests to the agent; the floor; deflate at once on the agent's need and on guest PSI;
# a silent agent: no inflation, and the guest keeps its size (no return to the full size,
# which would overcommit a host whose agents go quiet together); a garbage-sending agent is cut off and the link comes back; a restarted agent
# (a new hello on the open channel, as virtio-serial gives it) is handshaken again; SIGTERM
# leaves the guest at the size it has; an agent that lies (uses 4 PiB of the 512 MiB VM,
# refault counters up 2^50 a report) has its figures clamped to the VM in `vm show`, the
# JSON and /metrics, and is marked untrusted there and in the log.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
IT_GUEST_LIB=1 . "$(dirname "$0")/host_guest.sh"

TOTAL=11
echo "1..$TOTAL"
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }
failed=0

[ -x "$BIN/memtided" ] || skip_rest "memtided not built"
command -v qemu-system-x86_64 >/dev/null || skip_rest "no qemu-system-x86_64"
it_guest_build || skip_rest "cannot build the integration guest (no Debian kernel package?)"

dir=$(mktemp -d /tmp/memtide-it-qmp.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ "$failed" = 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT

# ---- the scripted agent ----------------------------------------------------------------------
cat >"$dir/agent.py" <<'PY'
# Scripted guest agent: listens on the agent socket as QEMU's chardev would; commands arrive
# one per line on a FIFO: normal, need MIB, psi PCT, silent, garbage, rehello (a restarted
# agent's first words on the open connection).
import json, os, select, socket, struct, sys, time
sock_path, fifo_path, log_path = sys.argv[1:4]
log = open(log_path, "a", buffering=1)
srv = socket.socket(socket.AF_UNIX)
srv.bind(sock_path)
srv.listen(4)
fifo = os.open(fifo_path, os.O_RDONLY | os.O_NONBLOCK)
conn, buf, nid, mode, psi, ready = None, b"", 0, "normal", 0.0, False
MiB = 1 << 20

def send(m):
    global nid
    nid += 1
    m["id"] = nid
    b = json.dumps(m).encode()
    conn.sendall(struct.pack(">I", len(b)) + b)

lies = 0

def report():
    global lies
    now = int(time.monotonic() * 1000)
    lie = mode == "lie"  # within the wire's bounds, beyond the VM's
    lies += 1 if lie else 0
    send({"type": "stats", "mono_ms": now,
          "mem_total_bytes": (1 << 52) if lie else 512 * MiB,
          "mem_free_bytes": 0 if lie else 200 * MiB, "mem_available_bytes": 300 * MiB,
          "cached_bytes": 50 * MiB, "anon_bytes": 100 * MiB, "shmem_bytes": 0,
          "swap_total_bytes": 0, "swap_free_bytes": 0, "refault_anon": lies << 50,
          "refault_file": 0, "pgmajfault": 0, "pswpin": 0, "pswpout": 0,
          "psi": {"some_avg10": psi, "some_avg60": 0.0, "some_total_us": 0,
                  "full_avg10": 0.0, "full_avg60": 0.0, "full_total_us": 0}})
    # 100 MiB touched within the last interval, 300 MiB idle for longer
    send({"type": "wss", "mono_ms": now, "gens_complete": True, "gens": [],
          "bins": [{"min_age_ms": 0, "anon_bytes": 100 * MiB, "file_bytes": 0},
                   {"min_age_ms": 1000, "anon_bytes": 0, "file_bytes": 0},
                   {"min_age_ms": 2000, "anon_bytes": 250 * MiB, "file_bytes": 50 * MiB}]})

def hello():
    send({"type": "hello", "role": "agent", "version_min": 1, "version_max": 1,
          "software": "scripted-agent 1", "caps": ["stats", "psi", "wss", "hint"],
          "kernel": "6.1.0", "page_size_bytes": 4096, "ram": []})

def handle(m):
    global ready
    t = m.get("type")
    if t == "hello":
        log.write("hello from host\n")
        if not ready:
            hello()
        ready = True
    elif t == "reclaim":
        log.write("reclaim %d\n" % m["bytes"])
        send({"type": "reclaim_reply", "re": m["id"], "result": "done",
              "requested_bytes": m["bytes"], "freed_bytes": m["bytes"],
              "mem_available_bytes": 300 * MiB, "floor_bytes": 32 * MiB, "elapsed_ms": 5,
              "steps": [], "message": ""})
    elif t == "error":
        log.write("error %s %s\n" % (m.get("code"), m.get("message")))
    else:
        log.write("got %s\n" % t)

last = 0.0
while True:
    fds = [srv, fifo] + ([conn] if conn else [])
    r, _, _ = select.select(fds, [], [], 0.2)
    if srv in r:
        if conn:
            conn.close()
        conn, buf, ready = srv.accept()[0], b"", False
        log.write("connected\n")
    if fifo in r:
        for line in os.read(fifo, 4096).decode().split("\n"):
            w = line.split()
            if not w:
                continue
            log.write("cmd %s\n" % line)
            if w[0] == "need" and conn:
                send({"type": "hint", "kind": "need", "pid": 1,
                      "need_bytes": int(w[1]) * MiB, "within_ms": 0})
            elif w[0] == "psi":
                psi = float(w[1])
            elif w[0] == "rehello" and conn:
                hello()  # a new agent speaks first, then waits for the host's hello
                ready = True
            elif w[0] == "garbage" and conn:
                try:
                    for i in range(30):
                        g = b"this is not json at all"
                        conn.sendall(struct.pack(">I", len(g)) + g)
                except OSError:
                    pass
            else:
                mode = w[0]
    if conn and conn in r:
        try:
            d = conn.recv(65536)
        except OSError:
            d = b""
        if not d:
            log.write("disconnected\n")
            conn.close()
            conn = None
            continue
        buf += d
        while len(buf) >= 4:
            n = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + n:
                break
            handle(json.loads(buf[4:4 + n]))
            buf = buf[4 + n:]
    if conn and mode in ("normal", "lie") and time.monotonic() - last >= 0.5:
        last = time.monotonic()
        try:
            report()
        except OSError:
            pass
PY
mkfifo "$dir/agent.fifo"
python3 "$dir/agent.py" "$dir/agent.sock" "$dir/agent.fifo" "$dir/agent.log" &
pids+=($!)
exec 7<>"$dir/agent.fifo" # keep the FIFO open for writing
agent() { echo "$*" >&7; }

# ---- the guest -------------------------------------------------------------------------------
qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
	-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
	-serial "file:$dir/serial.log" \
	-qmp "unix:$dir/qmp.sock,server=on,wait=off" -qmp "unix:$dir/test.sock,server=on,wait=off" \
	-device virtio-balloon-pci,id=balloon0,free-page-reporting=on 2>"$dir/qemu.err" &
pids+=($!)
for _ in $(seq 150); do grep -q "memtide-it-guest ready" "$dir/serial.log" 2>/dev/null && break; sleep 0.2; done

# ---- memtided ---------------------------------------------------------------------------------
printf 'MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n' >"$dir/meminfo"
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
stats_period = 1
metrics_port = 0
socket = $dir/ctl.sock
state_dir = $dir/state
[controller]
max_inflate_step = 64M
hold_after_deflate = 3s
agent_silence = 3s
deflate_min = 128M
mem_available_low = 32M
psi_some_avg10_high = 10
[host]
meminfo = $dir/meminfo
[defaults]
min = 192M
headroom = 32M
CONF
"$BIN/memtided" --qmp "$dir/qmp.sock" --agent "$dir/agent.sock" --name it-vm --foreground \
	--config "$dir/memtided.conf" --log-level info >"$dir/memtided.log" 2>&1 &
mpid=$!
pids+=($mpid)
fail_rest() {
	while [ $n -lt $TOTAL ]; do nok "$*"; done
	tail -20 "$dir/memtided.log" | sed 's/^/# /'
	exit 1
}

# wait_for SECONDS COMMAND...: poll a condition every 0.2 s until it holds or time runs out.
wait_for() {
	local limit=$1
	shift
	local end=$((SECONDS + limit))
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}
actual() { balloon_mib "$dir/test.sock"; }
below() { [ "$(actual)" -le "$1" ]; }
above() { [ "$(actual)" -ge "$1" ]; }
logged() { grep -q "$1" "$2"; }

# 1: handshake
if wait_for 15 logged "hello from host" "$dir/agent.log"; then ok "memtided connects to the agent and says hello"; else nok "no hello from memtided"; fi
kill -0 $mpid 2>/dev/null || fail_rest "memtided is not running"

# 2, 3: inflation in bounded steps, down to the floor, with reclaim requests first
min_seen=512
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
	a=$(actual)
	[ "$a" -lt "$min_seen" ] && min_seen=$a
	[ "$a" -le 196 ] && break
	sleep 0.2
done
if [ "$min_seen" -le 196 ] && logged "^reclaim " "$dir/agent.log"; then
	ok "inflates 512 -> $min_seen MiB (working set 100 + headroom 32, floor 192) and asks the agent to reclaim first"
else
	nok "balloon reached $min_seen MiB; reclaim requests: $(grep -c '^reclaim' "$dir/agent.log")"
fi
steps=$(grep -o 'inflate [0-9]*->[0-9]*' "$dir/memtided.log" | awk -F'[ >-]+' '{d=$2-$3; if (d>m) m=d} END {print m+0}')
if [ "$steps" -gt 0 ] && [ "$steps" -le 64 ] && [ "$min_seen" -ge 192 ]; then
	ok "largest inflate step $steps MiB <= 64 MiB; never below the 192 MiB floor"
else
	nok "largest inflate step $steps MiB, lowest actual $min_seen MiB"
fi

# 4: the agent's need is answered at once
before=$(actual)
t0=$(date +%s%N)
agent need 200
if [ "$before" -le 300 ] && wait_for 10 above 420; then
	ms=$((($(date +%s%N) - t0) / 1000000))
	ok "need 200 MiB: balloon deflated to $(actual) MiB within $ms ms"
else
	nok "need: balloon $before -> $(actual) MiB"
fi

# 5: guest PSI over its mark deflates at once (after inflation resumed past the hold)
wait_for 30 below 300 >/dev/null
before=$(actual)
agent psi 40
if wait_for 10 above $((before + 120)); then ok "guest PSI 40%: deflated $before -> $(actual) MiB at once"; else nok "psi: $before -> $(actual) MiB"; fi
agent psi 0

# 6, 7: silence: no inflation, and the guest keeps the size it has (it used to get its full
# 512 MiB back: with many VMs, the host overcommit memtide exists to prevent)
wait_for 30 below 300 >/dev/null
agent silent
wait_for 10 logged "silent: nothing heard from the guest" "$dir/memtided.log"
held=$(actual)
still=1
for _ in $(seq 10); do [ "$(actual)" = "$held" ] || still=0; sleep 0.5; done
if [ "$held" -le 300 ] && [ $still = 1 ]; then ok "agent silent: the balloon holds at $held MiB for 5 s (no inflation, no return to 512 MiB)"; else nok "silent: $held -> $(actual) MiB"; fi
if [ "$(grep -c "silent: nothing heard from the guest.*holding at $held MiB" "$dir/memtided.log")" = 1 ]; then ok "silence is logged once, with the size held"; else nok "silence notices: $(grep -c 'silent:' "$dir/memtided.log")"; fi

# 8: garbage: the agent is cut off, memtided lives on and reconnects
agent normal
wait_for 10 logged "reclaim" "$dir/agent.log" >/dev/null
conns_before=$(grep -c '^connected' "$dir/agent.log")
agent garbage
if wait_for 10 logged "disconnected: too many invalid messages" "$dir/memtided.log" &&
	wait_for 10 eval '[ "$(grep -c "^connected" "$dir/agent.log")" -gt "$conns_before" ]' &&
	kill -0 $mpid; then
	ok "a garbage-sending agent is disconnected, memtided keeps running and reconnects"
else
	nok "garbage: $(tail -3 "$dir/memtided.log")"
fi

# 9: a restarted agent: its hello arrives on the open channel; memtided answers it with its
# own hello and config (no state error), and reports flow again
hellos=$(grep -c '^hello from host' "$dir/agent.log")
agent rehello
if wait_for 10 eval '[ "$(grep -c "^hello from host" "$dir/agent.log")" -gt "$hellos" ]' &&
	logged "a new agent said hello on the open channel" "$dir/memtided.log" &&
	! grep -q "hello is the first message" "$dir/agent.log"; then
	ok "a restarted agent's hello on the open channel is answered: handshake again"
else
	nok "rehello: $(grep -c '^hello from host' "$dir/agent.log") host hellos; $(grep 'error' "$dir/agent.log" | tail -1)"
fi

# 10: SIGTERM leaves the guest at the size it has
wait_for 30 below 300 >/dev/null
low=$(actual)
kill -TERM $mpid
wait $mpid
rc=$?
still=1
for _ in $(seq 10); do [ "$(actual)" = "$low" ] || still=0; sleep 0.5; done
if [ $rc = 0 ] && [ $still = 1 ] && [ -s "$dir/state/it-vm.state" ]; then
	ok "SIGTERM at $low MiB: memtided exits 0, the guest stays at $low MiB, its state is saved"
else
	nok "exit: rc $rc, balloon $low -> $(actual) MiB, state $(ls "$dir/state" 2>&1)"
fi
# 11: a lying agent, to a memtided started again (it resumes from its state file)
PORT=$((20000 + ($$ * 11) % 20000))
"$BIN/memtided" --qmp "$dir/qmp.sock" --agent "$dir/agent.sock" --name it-vm --foreground \
	--config "$dir/memtided.conf" --metrics-port $PORT --log-level info >"$dir/memtided2.log" 2>&1 &
mpid=$!
pids+=($mpid)
ctl() { "$BIN/memtidectl" --socket "$dir/ctl.sock" "$@"; }
wait_for 20 logged "agent .*: connected" "$dir/memtided2.log"
agent lie
wait_for 20 logged "marked untrusted" "$dir/memtided2.log"
# a few lying reports: each after the session's first clamps MemTotal and the counter
wait_for 10 eval 'ctl --json vm show it-vm | grep -Eq "\"agent_figures_clamped\":([5-9]|[1-9][0-9])"'
show=$(ctl vm show it-vm)
json=$(ctl --json vm show it-vm)
metrics=$(curl -sf "http://127.0.0.1:$PORT/metrics")
echo "$show" | grep -E "guest uses|UNTRUSTED|refaults" | sed 's/^/#   /'
agent normal
if echo "$json" | python3 -c '
import json, sys
v = json.load(sys.stdin)["vm"]
assert v["agent_untrusted"].startswith("MemTotal 4294967296 MiB"), v["agent_untrusted"]
assert 0 < v["guest_used_bytes"] <= v["max_bytes"], v["guest_used_bytes"]
assert v["agent_figures_clamped"] >= 5, v["agent_figures_clamped"]
# 2^50 pages a report would read as ~1e13 of resident pages a minute; clamped to 2^25
# pages a second it is ~1e4 (a 512 MiB guest): bounded, and marked
assert v["refault_rate_per_min"] < 1e6, v["refault_rate_per_min"]' &&
	echo "$show" | grep -q "agent figures UNTRUSTED: it said MemTotal 4294967296 MiB" &&
	! echo "$show" | grep -q "guest uses 4" &&
	echo "$metrics" | grep -q '^memtide_vm_agent_untrusted{domain="it-vm"} 1$' &&
	echo "$metrics" | grep -Eq '^memtide_vm_agent_figures_clamped_total\{domain="it-vm"\} [1-9]' &&
	logged "agent .*: says MemTotal 4294967296 MiB, over the VM's RAM (512 MiB)" "$dir/memtided2.log" &&
	kill -0 $mpid; then
	ok "a lying agent: figures clamped to the 512 MiB VM and marked untrusted in vm show, JSON, /metrics and the log"
else
	nok "lying agent: $(echo "$json" | head -c 600)"
fi
kill -TERM $mpid
wait $mpid

if [ "$failed" != 0 ]; then
	echo "# logs kept in $dir"
	tail -30 "$dir/memtided.log" | sed 's/^/# /'
fi
exit $failed
