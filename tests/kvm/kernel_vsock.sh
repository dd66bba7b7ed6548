#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# kernel_vsock.sh: the agent over the kernel's vsock on a KVM host (the KVM host stand:
# tests/kvm/stand.sh run tests/kvm/kernel_vsock.sh; make check-kvm).
#
# On a KVM host the ordinary vsock is the kernel's (vhost_vsock; QEMU's -device
# vhost-vsock-pci,guest-cid=N).  memtided listens on AF_VSOCK (--agent vsock, or by itself
# where /dev/vhost-vsock exists) and knows each connection's VM by its guest CID, read from
# QEMU's command line (host/vsock/kvsock.h).  One KVM guest (512 MiB, the agent's default
# transport "auto", no virtio-serial port), in the operator's order, then:
#   1. the agent connects over the kernel's vsock: memtided's status says transport vsock and
#      the VM's CID;
#   2. memtided's pings (every 50 ms) over >= 200 round trips: ping_rtt_ms_p50/_p99 (goal: p99
#      under 5 ms, reported as rtt_goal_p99_under_5ms), beside the same guest's over
#      virtio-serial and over memtided's own vhost-user-vsock back end measured just before in
#      the same run (_virtio_serial, _vhost_user).  Asserted as scenario 16 asserts it, a ratio
#      side by side: the median within 3x + 1 ms of virtio-serial's.  The 5 ms goal itself
#      cannot hold on the stand: every round trip crosses two guest kernels whose vCPUs TCG
#      emulates on a shared 2-core host, and virtio-serial there measured p99 120-300 ms
#      (docs/e2e.md, "What KVM changes");
#   3. a second guest with a CID memtided has no VM for (its agent connects all the same):
#      refused, with a log line naming the CID, and never taken for the first VM's agent;
#   4. memtided killed (SIGKILL) and started again: the agent is heard again within 10 s.
# Figures: build/e2e/kvm_vsock.json (connected, ping_rtt_ms_p50, ping_rtt_ms_p99, ...).
. "$(dirname "$0")/../e2e/lib.sh"
e2e_init vsock
echo "1..7"
if [ ! -c /dev/vhost-vsock ]; then
	# Said, never skipped silently: this host cannot give a guest the kernel's vsock.
	e2e_not_ok "the kernel's vsock needs /dev/vhost-vsock (a KVM host: tests/kvm/stand.sh run $0)"
	exit 1
fi
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it"
	exit 1
fi
CID=${E2E_CID:-5} OTHER_CID=$((${E2E_CID:-5} + 1))
SOCK=$E2E_DIR/ctl.sock
CONF=$E2E_DIR/memtided.conf
printf '[daemon]\nagent_ping = 50ms\nstate_dir = %s\n' "$E2E_DIR/state" >"$CONF"
E2E_NO_BRIDGE=1

memtided() { # LOG AGENT
	e2e_start "$BUILD/bin/memtided" --qmp "$E2E_DIR/qmp.sock" --agent "$2" --interval 2 \
		--foreground --no-metrics --socket "$SOCK" --config "$CONF" \
		--log-level "${E2E_LOG_LEVEL:-info}" 2>"$1"
	MPID=$E2E_LAST_PID
}
field() { # PYTHON-EXPR over the VM object v
	"$BUILD/bin/memtidectl" --socket "$SOCK" --json vm show qemu 2>/dev/null | python3 -c "
import json, sys
try:
    v = json.load(sys.stdin)['vm']
    print($1)
except Exception:
    print('')"
}
rtt() { # LABEL: wait for >= 200 round trips, record p50/p99 in ms
	local n=0
	for _ in $(seq 120); do
		n=$(field "v['agent_rtt']['samples']")
		[ "${n:-0}" -ge 200 ] && break
		sleep 1
	done
	e2e_fig "ping_samples$1" "${n:-0}"
	e2e_fig "ping_rtt_ms_p50$1" "$(field "'%.3f' % (v['agent_rtt']['p50_us'] / 1000)")"
	e2e_fig "ping_rtt_ms_p99$1" "$(field "'%.3f' % (v['agent_rtt']['p99_us'] / 1000)")"
	RTT_N=${n:-0}
}
stop_both() {
	kill "$MPID" "$E2E_QEMU_PID" 2>/dev/null
	wait "$MPID" "$E2E_QEMU_PID" 2>/dev/null
}

# The references, the same guest: virtio-serial, then memtided's vhost-user-vsock back end.
E2E_TRANSPORT=virtio
memtided "$E2E_DIR/memtided.serial.log" "$E2E_DIR/agent.sock"
e2e_boot 512 "sleep 600" ""
e2e_wait_file "$E2E_DIR/memtided.serial.log" 'agent .*agent.sock: connected' 180 >/dev/null
rtt _virtio_serial
stop_both
E2E_TRANSPORT=vsock
memtided "$E2E_DIR/memtided.vhost.log" "vsock:$E2E_DIR/vsock.sock"
e2e_boot 512 "sleep 600" ""
e2e_wait_file "$E2E_DIR/memtided.vhost.log" 'agent vsock:qemu: connected' 180 >/dev/null
rtt _vhost_user
stop_both
ref="virtio-serial p50 ${E2E_FIGS[ping_rtt_ms_p50_virtio_serial]} p99 ${E2E_FIGS[ping_rtt_ms_p99_virtio_serial]} ms, vhost-user p50 ${E2E_FIGS[ping_rtt_ms_p50_vhost_user]} p99 ${E2E_FIGS[ping_rtt_ms_p99_vhost_user]} ms"
[ "${E2E_FIGS[ping_samples_virtio_serial]}" -ge 200 ] && [ "${E2E_FIGS[ping_samples_vhost_user]}" -ge 200 ]
e2e_check $? "references measured on this KVM guest: $ref"

# The kernel's vsock: memtided first, as an operator starts it, then QEMU.
E2E_TRANSPORT=kvsock E2E_CID=$CID
memtided "$E2E_DIR/memtided.log" vsock
e2e_boot 512 "sleep 600" ""
line=$(e2e_wait_file "$E2E_DIR/memtided.log" 'agent vsock:qemu: connected' 180)
connected=false
for _ in $(seq 50); do
	[ -n "$line" ] && [ "$(field "v['agent_transport']")" = vsock ] &&
		[ "$(field "v.get('vsock_cid', 0)")" = "$CID" ] && connected=true && break
	sleep 0.2
done
e2e_fig connected "$connected"
e2e_fig guest_cid "$(field "v.get('vsock_cid', 0)")"
[ $connected = true ]
e2e_check $? "the agent connected over the kernel's vsock from CID $CID (memtided listening on AF_VSOCK; no virtio-serial port)"
if [ $connected != true ]; then
	tail -20 "$E2E_DIR/memtided.log" | sed 's/^/# memtided: /'
	exit 1
fi
rtt ""
p50=${E2E_FIGS[ping_rtt_ms_p50]} p99=${E2E_FIGS[ping_rtt_ms_p99]}
goal=false
python3 -c "import sys; sys.exit(0 if 0 < float('${p99:-0}') < 5 else 1)" && goal=true
e2e_fig rtt_goal_p99_under_5ms "$goal"
[ "$goal" = true ] || echo "# goal not met: p99 $p99 ms >= 5 ms ($ref, the same guest in the same run)"
serial_p50=${E2E_FIGS[ping_rtt_ms_p50_virtio_serial]}
e2e_fig p50_over_virtio_serial "$(awk -v a="${p50:-0}" -v b="${serial_p50:-0}" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
[ "$RTT_N" -ge 200 ] && python3 -c "import sys; sys.exit(0 if 0 < float('${p50:-0}') <= 3 * float('${serial_p50:-0}') + 1 else 1)"
e2e_check $? "kernel vsock round trips ($RTT_N): p50 $p50 ms, p99 $p99 ms; median within 3x + 1 ms of virtio-serial's ($ref)"

# A guest whose CID memtided has no VM for: its agent's connection is refused and said.
saved=("$E2E_DIR" "$E2E_QEMU_PID" "$E2E_CONSOLE" "$E2E_QMP" "$E2E_QMP_TEST")
E2E_CID=$OTHER_CID
mkdir -p "$E2E_DIR/other"
E2E_DIR=$E2E_DIR/other
e2e_boot 512 "sleep 600" ""
other_qemu=$E2E_QEMU_PID
E2E_DIR=${saved[0]} E2E_QEMU_PID=${saved[1]} E2E_CONSOLE=${saved[2]} E2E_QMP=${saved[3]}
E2E_QMP_TEST=${saved[4]}
refused=$(e2e_wait_file "$E2E_DIR/memtided.log" "refused a connection from CID $OTHER_CID" 180)
e2e_fig refused_line "$refused"
kill "$other_qemu" 2>/dev/null
wait "$other_qemu" 2>/dev/null
[ -n "$refused" ] && ! grep -q "agent vsock:qemu: a new vsock connection replaces it" "$E2E_DIR/memtided.log" &&
	[ "$(field "v['agent_transport']")" = vsock ]
e2e_check $? "a guest with CID $OTHER_CID (no VM of memtided's) is refused and said: ${refused#*: }"

# memtided killed and started again: the agent is heard again.
t0=$(e2e_now_ms)
kill -9 "$MPID"
wait "$MPID" 2>/dev/null
memtided "$E2E_DIR/memtided.2.log" vsock
if e2e_wait_file "$E2E_DIR/memtided.2.log" 'agent vsock:qemu: connected' 60 >/dev/null; then
	dt=$(($(e2e_now_ms) - t0))
else
	dt=999999
fi
e2e_fig reconnect_s "$(awk -v w=$dt 'BEGIN { printf "%.2f", w / 1000 }')"
[ $dt -lt 10000 ]
e2e_check $? "after memtided was killed and restarted the agent was heard again within 10 s ($dt ms)"

kill -TERM "$MPID"
wait "$MPID"
rc=$?
! cat "$E2E_DIR"/memtided*.log | grep -qiE 'sanitizer|segv|abort|assert'
[ $? = 0 ] && [ $rc = 0 ]
e2e_check $? "memtided exits 0 and its logs show no crash"
grep -E 'vsock' "$E2E_DIR/memtided.log" | head -8 | sed 's/^/# memtided: /'
