#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# systemd_unit.sh: the systemd units memtide ships (memtided, memtide-zram-swap, the agent's),
# and memtided's side of Type=notify.
#
# systemd does not run as PID 1 on these machines (`systemctl is-system-running` says
# "offline"; systemd-nspawn --boot never comes up here), so these tests check the parts on
# the host, each against the real thing it stands for; tests/packaging/systemd_guest.sh
# (`make check-packaging`, run by CI) boots a guest whose PID 1 is systemd and runs the
# packaged unit there:
#   1-3  systemd-analyze verify: the units parse, name programs that exist and man pages
#        that resolve (the built programs, contrib/ and docs/man stand in for the packaged ones)
#   4-6  systemd-analyze security --offline: memtided 2.6 or better, the zram swap 5.0 or
#        better, the agent 3.0 or better (the figures are printed)
#   7    the zram swap unit is ordered at shutdown (DefaultDependencies=no, Conflicts= and
#        Before=shutdown.target, before memtided and libvirtd so that it stops after them),
#        loads zram through modprobe@zram.service (its sandbox cannot load modules), and has
#        no mount namespace (swapon records the device's path as its caller sees it: from a
#        namespace of its own /proc/swaps says "/zram0", and systemd's swapoff at shutdown
#        cannot find it)
#   8    what memtided must reach is still granted by the unit: the capabilities
#        (CAP_SYS_PTRACE for other users' /proc and ProtectProc=invisible, CAP_SYS_NICE for
#        process_madvise, CAP_DAC_OVERRIDE for libvirt-qemu's sockets, CAP_SYS_ADMIN for the
#        frames in QEMU's pagemap that the idle and damon sources read), AF_UNIX and AF_INET,
#        /proc/meminfo (no ProcSubset=pid), the libvirt and QEMU socket folders, DAMON's sysfs
#        and the idle page bitmap, its state and runtime directories
#   9    the seccomp filter: every system call memtided made in a run (libvirt mode on
#        libvirt's in-process test driver, a control request, a metrics scrape, SIGHUP, stop;
#        traced with strace) is one the unit's SystemCallFilter= allows, its groups expanded
#        by this systemd's own `systemd-analyze syscall-filter`
#   10   the notify protocol (sd_notify(3), what systemd reads on $NOTIFY_SOCKET): READY=1
#        only once the control socket answers, WATCHDOG=1 at least every half WatchdogSec,
#        STOPPING=1 on SIGTERM; read from a datagram socket this test listens on
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
echo "1..10"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
command -v systemd-analyze >/dev/null || {
	for i in $(seq 10); do echo "ok $i # SKIP no systemd-analyze"; done
	exit 0
}
dir=$(mktemp -d /tmp/memtide-it-unit.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	[ -n "${lpid:-}" ] && kill "$lpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
: >"$dir/empty.conf" # built-in defaults, whatever /etc/memtide holds

# The units as install.sh writes them, pointing at the built programs.
UNITS="memtided memtide-zram-swap memtide-agent"
for u in $UNITS; do
	sed -e "s|@SBINDIR@|$BIN|g" -e "s|@BINDIR@|$BIN|g" -e "s|@DOCDIR@|$PWD/docs|g" \
		-e "s|@LIBDIR@|$PWD/contrib|g" "contrib/systemd/$u.service" >"$dir/$u.service"
done
mkdir -p "$dir/man/man1" "$dir/man/man5" "$dir/man/man8"
for p in docs/man/*.[158]; do ln -s "$PWD/$p" "$dir/man/man${p##*.}/"; done

for u in $UNITS; do
	out=$(cd "$dir" && MANPATH=$dir/man systemd-analyze verify "./$u.service" 2>&1)
	rc=$?
	[ -z "$out" ] || echo "$out" | sed 's/^/# /'
	[ $rc = 0 ] && [ -z "$out" ]
	check $? "systemd-analyze verify $u.service: clean"
done

for u in memtided:2.6 memtide-zram-swap:5.0 memtide-agent:3.0; do
	goal=${u#*:} u=${u%:*}
	out=$(cd "$dir" && systemd-analyze security --offline=yes "./$u.service" 2>&1)
	level=$(echo "$out" | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
	[ -n "$level" ] && awk -v l="$level" -v g="$goal" 'BEGIN { exit !(l <= g) }'
	rc=$?
	[ $rc = 0 ] || echo "$out" | grep '✗' | sed 's/^/# /'
	check $rc "systemd-analyze security --offline $u.service: exposure ${level:-?} (goal $goal or better)"
done

# 7: the zram swap's place at boot and shutdown.
Z=contrib/systemd/memtide-zram-swap.service
zkey() { grep -E "^$1=" "$Z" | sed "s/^$1=//" | tr '\n' ' '; }
[ "$(zkey DefaultDependencies)" = "no " ] && zkey Conflicts | grep -qw shutdown.target &&
	zkey Before | grep -qw shutdown.target && zkey Before | grep -qw memtided.service &&
	zkey Before | grep -qw libvirtd.service && zkey Wants | grep -qw modprobe@zram.service &&
	zkey After | grep -qw modprobe@zram.service &&
	! grep -E '^(ProtectSystem|ProtectHome|PrivateTmp|PrivateDevices|PrivateMounts|PrivateIPC|ProtectKernelTunables|ProtectKernelModules|ProtectKernelLogs|ProtectControlGroups|ProtectProc|ProcSubset|ReadWritePaths|ReadOnlyPaths|InaccessiblePaths|BindPaths|TemporaryFileSystem|RootDirectory|MountFlags)=' "$Z"
check $? "the zram swap unit: DefaultDependencies=no, Conflicts= and Before=shutdown.target, Before=memtided and libvirtd, zram loaded by modprobe@zram.service, no mount namespace"

# 8: the grants memtided needs.
U=contrib/systemd/memtided.service
key() { grep -E "^$1=" "$U" | sed "s/^$1=//" | tr '\n' ' '; }
ok=0
for c in CAP_SYS_PTRACE CAP_SYS_NICE CAP_DAC_OVERRIDE CAP_SYS_ADMIN; do
	key CapabilityBoundingSet | grep -qw "$c" || { echo "# CapabilityBoundingSet lacks $c"; ok=1; }
done
for a in AF_UNIX AF_INET AF_INET6; do
	key RestrictAddressFamilies | grep -qw "$a" || { echo "# RestrictAddressFamilies lacks $a"; ok=1; }
done
for p in /run/libvirt /var/lib/libvirt/qemu /sys/kernel/mm/damon/admin /sys/kernel/mm/page_idle; do
	key ReadWritePaths | grep -q -- "-\?$p\b" || { echo "# ReadWritePaths lacks $p"; ok=1; }
done
[ "$(key StateDirectory)" = "memtide " ] && [ "$(key RuntimeDirectory)" = "memtide " ] &&
	[ "$(key Type)" = "notify " ] && [ -n "$(key WatchdogSec)" ] &&
	! grep -q '^ProcSubset=pid' "$U" && ! grep -q '^PrivateNetwork=yes' "$U" &&
	key SystemCallFilter | grep -qw process_madvise || { echo "# state/runtime dir, notify, /proc or syscalls"; ok=1; }
check $ok "the unit still grants what memtided reaches (capabilities, sockets, /proc, DAMON, state dir)"

# 9: every system call memtided makes is allowed.
if command -v strace >/dev/null && [ -x "$BIN/memtided" ]; then
	PORT=$((20000 + $$ % 20000))
	strace -f -qq -o "$dir/trace" "$BIN/memtided" --uri test:///default --foreground \
		--socket "$dir/ctl.sock" --metrics-listen "127.0.0.1:$PORT" --interval 500ms \
		--config "$dir/empty.conf" --log-level debug >"$dir/strace-run.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do [ -S "$dir/ctl.sock" ] && break; sleep 0.1; done
	"$BIN/memtidectl" --socket "$dir/ctl.sock" status >/dev/null 2>&1
	curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null
	mpid=$(pgrep -P "$pid") # memtided, strace's child: signals go to it, not to strace
	kill -HUP "$mpid"
	sleep 1 # a few control intervals of the test domain's loop
	kill -TERM "$mpid"
	wait "$pid"
	pid=
	expand() { # the system calls of a group, recursively
		systemd-analyze syscall-filter "$1" | awk 'NR > 1 && $1 !~ /^#/ && NF {print $1}' |
			while read -r s; do
				case $s in @*) expand "$s" ;; *) echo "$s" ;; esac
			done
	}
	allow=$(for s in $(key SystemCallFilter | tr ' ' '\n' | grep -v '^~'); do
		case $s in @*) expand "$s" ;; *) echo "$s" ;; esac
	done | sort -u)
	deny=$(for s in $(grep '^SystemCallFilter=~' "$U" | sed 's/^SystemCallFilter=~//'); do
		case $s in @*) expand "$s" ;; *) echo "$s" ;; esac
	done | sort -u)
	used=$(sed -nE 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/p' "$dir/trace" | sort -u)
	bad=$(comm -23 <(echo "$used") <(comm -23 <(echo "$allow") <(echo "$deny")))
	[ -n "$bad" ] && echo "# refused by the unit's filter: $(echo $bad)"
	[ -n "$used" ] && [ -z "$bad" ]
	check $? "the seccomp filter allows all $(echo "$used" | wc -l) system calls memtided made (libvirt test driver, control, metrics, reload, stop)"
else
	n=$((n + 1))
	echo "ok $n # SKIP no strace (scripts/deps.sh installs it)"
fi

# 10: the notify protocol.
python3 - "$dir/notify.sock" "$dir/notify.log" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(15)
with open(sys.argv[2], 'w') as log:
    try:
        while True:
            msg = s.recv(4096).decode()
            log.write('%.3f %s\n' % (time.monotonic(), msg.replace('\n', '|')))
            log.flush()
            if 'STOPPING=1' in msg:
                break
    except socket.timeout:
        pass
PY
lpid=$!
for _ in $(seq 50); do [ -S "$dir/notify.sock" ] && break; sleep 0.1; done
NOTIFY_SOCKET=$dir/notify.sock WATCHDOG_USEC=1000000 "$BIN/memtided" --qmp "$dir/no-qmp.sock" \
	--name unit-vm --foreground --socket "$dir/ctl2.sock" --no-metrics --config "$dir/empty.conf" \
	>"$dir/notify-run.log" 2>&1 &
pid=$!
ready=1
for _ in $(seq 100); do
	if grep -q 'READY=1' "$dir/notify.log" 2>/dev/null; then
		# Ready means the control socket answers.
		"$BIN/memtidectl" --socket "$dir/ctl2.sock" status >/dev/null 2>&1
		ready=$?
		break
	fi
	sleep 0.1
done
sleep 2.2 # the watchdog's pings come at half of WATCHDOG_USEC (1 s): four or so in 2.2 s
kill -TERM "$pid"
wait "$pid"
pid=
wait "$lpid"
lpid=
pings=$(grep -c 'WATCHDOG=1' "$dir/notify.log")
gap=$(awk '/WATCHDOG=1/ { if (last) { g = $1 - last; if (g > max) max = g } last = $1 } END { printf "%.2f", max }' "$dir/notify.log")
[ $ready = 0 ] && [ "$pings" -ge 3 ] && awk -v g="$gap" 'BEGIN { exit !(g <= 0.75) }' &&
	grep -q 'STOPPING=1' "$dir/notify.log" && head -1 "$dir/notify.log" | grep -q 'READY=1|STATUS='
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/notify.log" "$dir/notify-run.log" | tail -20
check $rc "notify: READY=1 once the control socket answers, $pings watchdog pings (longest gap ${gap}s of 1 s), STOPPING=1 on SIGTERM"

exit $failed
