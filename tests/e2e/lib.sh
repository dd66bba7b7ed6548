#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# lib.sh: the end-to-end harness, sourced by tests/e2e/scenarios/*.sh and scripts/demo.sh.
#
# It boots a real Debian guest under QEMU the way an operator would (plain QEMU, a
# virtio-balloon with free page reporting and deflate-on-oom, QMP on a unix socket, and the
# agent's channel), and gives the scenarios:
#   e2e_init NAME            work dir, TAP counter, figures file $BUILD/e2e/NAME.json, and an
#                            EXIT trap that stops every process the harness started, by PID.
#   e2e_build                the guest image (tests/e2e/guest/build.sh) and our workloads.
#   e2e_boot MIB RUN [APPEND] [QEMU ARGS...]
#                            boots a guest of MIB MiB running RUN (spaces as commas).
#   e2e_wait REGEX SECONDS   waits for a console line (no sleeps: follows the log), prints it.
#   e2e_guest_rss_mib        the guest's host memory: Rss of QEMU's guest-RAM mapping from
#                            /proc/PID/smaps, not VmRSS (which carries ~100 MiB of TCG code
#                            buffers and device state, shared/README.md).
#   e2e_qmp JSON...          QMP commands on a fresh connection to the test's own QMP
#                            monitor (memtided holds the first: QEMU serves one client per
#                            monitor), one reply line each.
#   e2e_start CMD...         starts a host process in the background and remembers its PID.
#   e2e_memtided_conf RETURN writes a memtided.conf whose [defaults] set policy `return`
#                            (reclaim or balloon) and `source` (E2E_SOURCE, default agent:
#                            the scenarios were measured with the agent's working set, and
#                            a host with a free kdamond would otherwise give them DAMON's;
#                            scenarios 9 and 11 run host bits) and prints its path, for --config; its
#                            state_dir is the test's own ($E2E_DIR/state, never
#                            /var/lib/memtide).
#   e2e_ok / e2e_not_ok      TAP lines; e2e_fig KEY VALUE records a figure (printed and JSON:
#                            numbers and true/false as such, anything else as a string).
# Data: $E2E_DIR holds console.log, qmp.sock, agent.sock; $E2E_PIDS lists started PIDs.
#
# The agent's channel, E2E_TRANSPORT (the guest agent's default "auto" finds either):
#   virtio (default)  a virtio-serial port named org.memtide.agent.0 on a QEMU chardev socket;
#   vsock             memtided's vhost-user-vsock-pci (host/vsock/vsock_service.h) and no
#                     virtio-serial port; guest RAM is a shared memfd (vhost-user maps it).
#                     QEMU 7.2 waits for the device's back end before it runs the guest, and
#                     scenarios start memtided only later: until they do, the harness's
#                     vsock_bridge (memtided's own back end code, tests/e2e/vsock_bridge.c)
#                     serves the device; e2e_start kills it when memtided starts, and memtided
#                     takes the device over as after a restart of its own.
#   kvsock            the kernel's vsock (-device vhost-vsock-pci,guest-cid=$E2E_CID, 3 by
#                     default): only on a host with /dev/vhost-vsock (the KVM host stand).
#                     memtided's --agent is "vsock": it listens on AF_VSOCK and knows the VM
#                     by the guest-cid on QEMU's command line.  No scripted host can reach
#                     the agent there ($E2E_AGENT_SOCK is empty).
# Either way $E2E_AGENT is what memtided's --agent takes (a socket, or vsock:SOCKET) and
# $E2E_AGENT_SOCK the unix socket where a scripted host reaches the agent itself.
#
# The guest's accelerator, E2E_ACCEL:
#   tcg (default)  QEMU's emulator: this machine's kernel has no KVM an ordinary guest can use.
#   kvm            -accel kvm -cpu host, as on an operator's host.  Only where /dev/kvm is a
#                  real KVM: inside the KVM host stand (tests/kvm/stand.sh runs a scenario
#                  there unchanged).  Figures go to $BUILD/e2e/kvm_NAME.json, beside the TCG
#                  run's NAME.json.
set -u
BUILD=${BUILD:-build}
E2E_TRANSPORT=${E2E_TRANSPORT:-virtio}
E2E_ACCEL=${E2E_ACCEL:-tcg}
E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E_PIDS=()
E2E_N=0
E2E_FAILED=0
declare -A E2E_FIGS=()
E2E_FIG_KEYS=()

e2e_cleanup() {
	local i
	for ((i = ${#E2E_PIDS[@]} - 1; i >= 0; i--)); do
		kill "${E2E_PIDS[$i]}" 2>/dev/null
	done
	for ((i = ${#E2E_PIDS[@]} - 1; i >= 0; i--)); do
		# Give each up to 5 s, then SIGKILL: a wedged QEMU must not outlive the test.
		local n=0
		while kill -0 "${E2E_PIDS[$i]}" 2>/dev/null && [ $n -lt 50 ]; do
			sleep 0.1
			n=$((n + 1))
		done
		kill -9 "${E2E_PIDS[$i]}" 2>/dev/null
		wait "${E2E_PIDS[$i]}" 2>/dev/null
	done
	E2E_PIDS=()
	e2e_write_json
	[ -n "${E2E_DIR:-}" ] && [ "${E2E_KEEP:-0}" != 1 ] && rm -rf "$E2E_DIR"
}

e2e_init() {
	E2E_NAME=$1
	cd "$E2E_ROOT" || exit 1
	E2E_DIR=$(mktemp -d "/tmp/memtide-e2e-$E2E_NAME.XXXXXX")
	local prefix=
	[ "$E2E_ACCEL" = kvm ] && prefix=kvm_
	E2E_JSON=$PWD/$BUILD/e2e/$prefix$E2E_NAME.json
	# A scenario run over vsock keeps its virtio-serial figures: NAME-vsock.json.
	[ "$E2E_TRANSPORT" = vsock ] && [ "$E2E_NAME" != vsock ] &&
		E2E_JSON=$PWD/$BUILD/e2e/$prefix$E2E_NAME-vsock.json
	mkdir -p "$BUILD/e2e"
	# A speed check measured again (tests/run.sh): the earlier run's figures stay beside
	# these as NAME.1.json, NAME.2.json.
	if [ "${E2E_ATTEMPT:-1}" -gt 1 ]; then
		[ -f "$E2E_JSON" ] && mv -f "$E2E_JSON" "${E2E_JSON%.json}.$((E2E_ATTEMPT - 1)).json"
		e2e_fig attempt "$E2E_ATTEMPT"
	fi
	trap e2e_cleanup EXIT
	trap 'exit 130' INT TERM
}

e2e_ok() { E2E_N=$((E2E_N + 1)); echo "ok $E2E_N - $*"; }
e2e_not_ok() { E2E_N=$((E2E_N + 1)); E2E_FAILED=1; echo "not ok $E2E_N - $*"; }
# e2e_check COND_STATUS WHAT: ok when the status is 0.
e2e_check() { if [ "$1" -eq 0 ]; then e2e_ok "$2"; else e2e_not_ok "$2"; fi; }
# e2e_speed_check COND_STATUS WHAT: a check on a rate measured against a neighbouring phase of
# the same guest.  Under TCG on a shared 2-core machine such a ratio moves by 10-20% between
# runs of one build with nothing changed (docs/e2e.md, "Speed checks"), so its line carries
# the word "speed:" and tests/run.sh measures a scenario whose only failures are speed checks
# again, on a fresh boot (up to three times in all), and says so.  A check of behaviour (a
# stall, an OOM kill, a lost page) is an e2e_check and is never measured twice.
e2e_speed_check() { e2e_check "$1" "speed: $2"; }

e2e_fig() {
	[ -z "${E2E_FIGS[$1]+x}" ] && E2E_FIG_KEYS+=("$1")
	E2E_FIGS[$1]=$2
	echo "# $1 = $2"
}

# e2e_skip_all TOTAL WHY: every one of TOTAL checks SKIPs with the reason (also the JSON's
# "skipped"), and the scenario ends.
e2e_skip_all() {
	local i
	e2e_fig skipped "$2"
	for i in $(seq 1 "$1"); do echo "ok $i # SKIP $2"; done
	exit 0
}

# e2e_goal KEY OP VALUE WHAT: a check of figure KEY against its goal (python's OP).
e2e_goal() {
	local v=${E2E_FIGS[$1]:-}
	if [ -n "$v" ] && [ "$v" != null ] && python3 -c "import sys; sys.exit(0 if $v $2 $3 else 1)"; then
		e2e_ok "$4 ($1 = $v, goal $2 $3)"
	else
		e2e_not_ok "$4 ($1 = ${v:-missing}, goal $2 $3)"
	fi
}

e2e_write_json() {
	[ -n "${E2E_JSON:-}" ] || return 0
	local k sep='' s='{'
	s+="\"scenario\":\"$E2E_NAME\""
	for k in "${E2E_FIG_KEYS[@]}"; do
		local v=${E2E_FIGS[$k]}
		if [[ $v =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || [ "$v" = true ] || [ "$v" = false ]; then
			s+=",\"$k\":$v"
		else
			v=${v//\\/\\\\}
			s+=",\"$k\":\"${v//\"/\\\"}\""
		fi
	done
	s+="$sep}"
	echo "$s" >"$E2E_JSON"
}

# e2e_build: guest image and workloads; a missing kernel package is a failure with a reason.
e2e_build() {
	local wl
	for wl in tests/e2e/workloads/*.c; do
		wl=$(basename "$wl" .c)
		make --no-print-directory -s "$BUILD/guest/bin/$wl" >"$E2E_DIR/make.log" 2>&1 || {
			cat "$E2E_DIR/make.log" >&2
			return 1
		}
	done
	BUILD=$BUILD tests/e2e/guest/build.sh || return 1
	E2E_KERNEL=$PWD/$BUILD/e2e/guest/vmlinux
	E2E_INITRD=$PWD/$BUILD/e2e/guest/initrd.cpio
}

e2e_start() {
	# memtided takes the vsock device over from the bridge (see the top of this file).
	if [ -n "${E2E_VS_BRIDGE:-}" ] && [ "$(basename "$1")" = memtided ]; then
		kill -9 "$E2E_VS_BRIDGE" 2>/dev/null
		wait "$E2E_VS_BRIDGE" 2>/dev/null
		E2E_VS_BRIDGE=
	fi
	# A memtided of the tests keeps its state in the scenario's directory, never in the host's
	# /var/lib/memtide: a state file left there by an earlier run of the same VM name would be
	# resumed, runtime policy and all (seen: a policy set enabled=yes of a previous run).
	if [ "$(basename "$1")" = memtided ] && [[ " $* " != *" --state-dir "* ]]; then
		set -- "$@" --state-dir "$E2E_DIR/state"
	fi
	"$@" &
	E2E_PIDS+=($!)
	E2E_LAST_PID=$!
}

# e2e_boot MIB RUN [APPEND] [EXTRA QEMU ARGS...]: the guest, started as an operator would.
# E2E_SMP: the guest's vCPUs (2).  E2E_GUEST_APPEND adds to every guest's command line (by hand: e.g.
# memtide.agent_args=--log_level=3 puts the agent's debug log on the guest's console).
e2e_boot() {
	local mib=$1 run=$2 append=${3:-}
	shift 3 2>/dev/null || shift $#
	E2E_MEM_MIB=$mib
	E2E_CONSOLE=$E2E_DIR/console.log
	E2E_QMP=$E2E_DIR/qmp.sock
	E2E_QMP_TEST=$E2E_DIR/qmp-test.sock
	E2E_VSOCK=$E2E_DIR/vsock.sock
	local channel
	case $E2E_TRANSPORT in
	kvsock)
		E2E_AGENT=vsock
		E2E_AGENT_SOCK=
		channel=(-device "vhost-vsock-pci,guest-cid=${E2E_CID:-3}")
		;;
	vsock)
		E2E_AGENT=vsock:$E2E_VSOCK
		E2E_AGENT_SOCK=$E2E_DIR/agent-bridge.sock
		channel=(-chardev "socket,id=vs0,path=$E2E_VSOCK,server=on"
			-device vhost-user-vsock-pci,chardev=vs0)
		# E2E_NO_BRIDGE=1: the scenario runs memtided first, as an operator would.
		if [ "${E2E_NO_BRIDGE:-0}" != 1 ]; then
			e2e_start "$BUILD/tests/e2e/vsock_bridge" --vhost "$E2E_VSOCK" \
				--listen "$E2E_AGENT_SOCK" 2>"$E2E_DIR/bridge.log"
			E2E_VS_BRIDGE=$E2E_LAST_PID
		fi
		;;
	*)
		E2E_AGENT=$E2E_DIR/agent.sock
		E2E_AGENT_SOCK=$E2E_AGENT
		channel=(-device virtio-serial-pci
			-chardev "socket,id=ch0,path=$E2E_AGENT,server=on,wait=off"
			-device virtserialport,chardev=ch0,name=org.memtide.agent.0)
		;;
	esac
	# vhost-user maps guest RAM: a shared memfd (E2E_MEMFD=1 gives it to virtio-serial runs too,
	# to tell the transport's cost from the backing's).
	if [ "$E2E_TRANSPORT" = vsock ] || [ "${E2E_MEMFD:-0}" = 1 ]; then
		channel+=(-object "memory-backend-memfd,id=mem,size=${mib}M,share=on"
			-machine memory-backend=mem)
	fi
	local accel
	case $E2E_ACCEL in
	kvm) accel=(-accel kvm -cpu host) ;;
	*) accel=(-accel tcg) ;;
	esac
	: >"$E2E_CONSOLE"
	e2e_start qemu-system-x86_64 "${accel[@]}" -m "$mib" -smp "${E2E_SMP:-2}" -nographic -no-reboot -nic none \
		-kernel "$E2E_KERNEL" -initrd "$E2E_INITRD" \
		-append "console=ttyS0 quiet panic=-1 memtide.run=${run// /,} $append ${E2E_GUEST_APPEND:-}" \
		-device virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on \
		-qmp "unix:$E2E_QMP,server,nowait" -qmp "unix:$E2E_QMP_TEST,server,nowait" \
		"${channel[@]}" \
		"$@" </dev/null >"$E2E_CONSOLE" 2>"$E2E_DIR/qemu.err"
	E2E_QEMU_PID=$E2E_LAST_PID
}

# e2e_wait REGEX SECONDS: print the first console line matching REGEX; status 1 on timeout
# or when QEMU exits first.
e2e_wait() {
	local line
	line=$(timeout "$2" tail -n +1 --pid="$E2E_QEMU_PID" -F "$E2E_CONSOLE" 2>/dev/null |
		grep -a -m1 -E "$1")
	[ -n "$line" ] || return 1
	echo "${line%$'\r'}"
}

# e2e_guest_rss_mib: Rss of the guest-RAM mapping: the largest mapping no smaller than the
# guest's RAM and at most 8 MiB larger (QEMU adds alignment and a guard page).  TCG's code
# buffer is a mapping of up to 1 GiB too, hence the bounds rather than "the largest".
e2e_guest_rss_mib() {
	awk -v lo=$((E2E_MEM_MIB * 1024)) -v hi=$(((E2E_MEM_MIB + 8) * 1024)) '
	     /^Size:/ { size = $2 }
	     /^Rss:/  { if (size >= lo && size <= hi && size >= best) { best = size; rss = $2 } }
	     END { printf "%d\n", rss / 1024 }' "/proc/$E2E_QEMU_PID/smaps" 2>/dev/null
}

# e2e_guest_thp_mib: AnonHugePages of the same guest-RAM mapping: how much of the guest's
# memory the host backs with 2 MiB pages (a balloon's 4 KiB discards split them).
e2e_guest_thp_mib() {
	awk -v lo=$((E2E_MEM_MIB * 1024)) -v hi=$(((E2E_MEM_MIB + 8) * 1024)) '
	     /^Size:/ { size = $2 }
	     /^AnonHugePages:/ { if (size >= lo && size <= hi && size >= best) { best = size; thp = $2 } }
	     END { printf "%d\n", thp / 1024 }' "/proc/$E2E_QEMU_PID/smaps" 2>/dev/null
}

e2e_qmp() {
	python3 - "$E2E_QMP_TEST" "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
json.loads(f.readline())
f.write('{"execute":"qmp_capabilities"}\n'); f.flush(); reply()
for c in sys.argv[2:]:
    f.write(c + "\n"); f.flush()
    m = reply()
    print(json.dumps(m.get("return", m)))
PY
}

# e2e_balloon_mib: the balloon's actual size (guest RAM minus balloon) in MiB.
e2e_balloon_mib() {
	e2e_qmp '{"execute":"query-balloon"}' |
		python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["actual"] >> 20)'
}

# e2e_now_ms: CLOCK_MONOTONIC-like milliseconds (bash's EPOCHREALTIME is wall time; fine for
# a few seconds' intervals within one test, which is all it measures).
e2e_memtided_conf() {
	printf '[daemon]\nstate_dir = %s\n[defaults]\nreturn = %s\nsource = %s\n' "$E2E_DIR/state" \
		"$1" "${E2E_SOURCE:-agent}" >"$E2E_DIR/memtided.conf"
	echo "$E2E_DIR/memtided.conf"
}

e2e_now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# e2e_wait_file FILE REGEX SECONDS: the first line of FILE (a host log) matching REGEX.
e2e_wait_file() {
	local line
	line=$(timeout "$3" tail -n +1 -F "$1" 2>/dev/null | grep -a -m1 -E "$2")
	[ -n "$line" ] || return 1
	echo "$line"
}
