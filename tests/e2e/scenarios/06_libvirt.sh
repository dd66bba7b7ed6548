#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 06_libvirt.sh: scenario 6, scenario 2 through libvirt, started the way an operator runs it.
#
# libvirtd (started here as root, with memtide's hook installed in /etc/libvirt/hooks/qemu.d/
# before it starts) runs a transient <domain type='qemu'> (E2E_ACCEL=kvm, on the KVM host
# stand: <domain type='kvm'>, checked to run on KVM) with a virtio balloon (free page
# reporting on, stats period 2 s) and the agent's unix channel.  memtided runs in its default
# libvirt mode with no domain named on its command line: it must find the domain by itself,
# through the hook (which tells it over the control socket) and libvirt's lifecycle events,
# learn the agent's socket from the domain XML, and balloon it through libvirt.
# Workload as in scenario 2 (memload hotcold: 200 MiB hot, 350 MiB cold anon, 150 MiB cold
# tmpfs), zram inside the guest as swap (so the guest-RAM Rss is already net of what swap
# holds), guest THP off.  The throughput baseline without memtide is scenario 2's (same guest,
# same workload, plain QEMU), read from build/e2e/02_cold_memory.json when it ran.
# Asserts: memtided attached the domain without being told its name; the hook ran and reached
# memtided; the guest's host memory fell by >= 60% of the cold amount within 60 s; no OOM
# kill; the cold data reads back intact; memtided's exit leaves the domain's balloon where it
# was (it used to hand the domain its full size: on a host of many VMs, the overcommit
# memtide exists to prevent).
. "$(dirname "$0")/../lib.sh"
# On the KVM host stand the return check (60% of the cold within 60 s) holds only when the
# machine is quiet (300 MiB in one run, 190 in another), and the scenario is not in make
# check-kvm: the nested guest's own reclaim is the bound, as in scenario 2 (docs/e2e.md).
. "$(dirname "$0")/../lib_libvirt.sh"
e2e_init 06_libvirt
TOTAL=6
[ "$E2E_ACCEL" = kvm ] && TOTAL=7
echo "1..$TOTAL"
skip_all() { e2e_skip_all $TOTAL "$1"; }
[ "$(id -u)" = 0 ] || skip_all "needs root to run libvirtd"
command -v libvirtd >/dev/null || skip_all "libvirtd is not installed"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
for f in memtided memtidectl; do
	if [ ! -x "$BUILD/bin/$f" ]; then
		e2e_not_ok "$f is not built ($BUILD/bin/$f)"
		exit 1
	fi
done
HOOK_SRC=contrib/libvirt/hooks/qemu.d/memtide
if [ ! -f "$HOOK_SRC" ]; then
	e2e_not_ok "the libvirt hook $HOOK_SRC is missing"
	exit 1
fi
COLD_MIB=500
DOM=memtide-e2e-$$
SOCK=$E2E_DIR/ctl.sock

# The installed hook calls memtidectl from PATH with the default socket; the test's copy
# points at this build and this test's control socket instead.
sed -e "s|^MEMTIDECTL=.*|MEMTIDECTL=$PWD/$BUILD/bin/memtidectl|" \
	-e "s|^MEMTIDE_SOCKET=.*|MEMTIDE_SOCKET=$SOCK|" "$HOOK_SRC" >"$E2E_DIR/hook"
if ! e2e_lv_up "$E2E_DIR/hook"; then
	e2e_not_ok "libvirtd did not start"
	exit 1
fi

# The agent's working set, as the scenario was measured (e2e_memtided_conf says why).  The
# host's vsock_dir, where lib_libvirt.sh's domains put their vsock socket (a state
# directory of its own would otherwise move it there).
printf '[daemon]\nvsock_dir = /run/memtide/vsock\n[defaults]\nsource = %s\n' "${E2E_SOURCE:-agent}" \
	>"$E2E_DIR/memtided.conf"
e2e_start "$BUILD/bin/memtided" --interval 2 --foreground --no-metrics --socket "$SOCK" \
	--state-dir "$E2E_DIR/state" --config "$E2E_DIR/memtided.conf" --log-level info \
	2>"$E2E_DIR/memtided.log"
MPID=$E2E_LAST_PID
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

if ! e2e_lv_boot "$DOM" 1024 "memload hotcold 200 350 150 70" \
	"memtide.zram_mib=700 transparent_hugepage=never"; then
	e2e_not_ok "libvirt did not start the domain"
	exit 1
fi
e2e_wait '^WL-FILLED' 150 >/dev/null
rss0=$(e2e_guest_rss_mib)
e2e_fig rss_filled_mib "$rss0"
e2e_fig domain_type "$($E2E_V dumpxml "$DOM" 2>/dev/null | sed -n "s/^<domain type='\([a-z]*\)'.*/\1/p")"
if [ "$E2E_ACCEL" = kvm ]; then
	kvm=$($E2E_V qemu-monitor-command "$DOM" '{"execute":"query-kvm"}' 2>&1)
	[[ $kvm == *'"enabled":true'* ]] && [ "${E2E_FIGS[domain_type]}" = kvm ]
	e2e_check $? "libvirt runs the domain on KVM (<domain type='${E2E_FIGS[domain_type]}'>; query-kvm: $kvm)"
fi

attached() { grep -q "$DOM.*attach" "$E2E_DIR/memtided.log"; }
for _ in $(seq 100); do attached && break; sleep 0.1; done
attached
e2e_check $? "memtided found and attached the domain by itself"
grep -q "hook.*$DOM\|$DOM.*hook" "$E2E_DIR/memtided.log"
e2e_check $? "the libvirt hook reached memtided through the control socket"

t0=$(e2e_now_ms)
min=$rss0 tmin=0
while [ $(($(e2e_now_ms) - t0)) -lt 60000 ] && kill -0 "$E2E_QEMU_PID" 2>/dev/null; do
	r=$(e2e_guest_rss_mib)
	if [ -n "$r" ] && [ "$r" -lt "$min" ]; then min=$r tmin=$(($(e2e_now_ms) - t0)); fi
	sleep 1
done
# memtided's exit leaves the domain's balloon where it is (the workload is still running):
# the actual before the exit and for 5 s after it are the same.
actual_kib() { $E2E_V dommemstat "$DOM" 2>/dev/null | awk '$1 == "actual" {print $2}'; }
before_exit=$(actual_kib)
kill -TERM "$MPID"
wait "$MPID" 2>/dev/null
kept=1
for _ in $(seq 10); do [ "$(actual_kib)" = "$before_exit" ] || kept=0; sleep 0.5; done
e2e_fig actual_before_exit_kib "$before_exit"
e2e_fig actual_after_exit_kib "$(actual_kib)"
with=$(e2e_wait '^WL-DONE' 90 | awk '{print $2}')
vm=$(e2e_wait '^E2E-VMSTAT' 60)
e2e_fig rss_min_mib "$min"
e2e_fig saved_mib $((rss0 - min))
e2e_fig saved_at_ms "$tmin"
e2e_fig memtide_pages_per_s "${with:-0}"
base=$(sed -n 's/.*"baseline_pages_per_s": *\([0-9.]*\).*/\1/p' "$BUILD/e2e/02_cold_memory.json" 2>/dev/null)
[ -n "$base" ] && e2e_fig scenario2_baseline_pages_per_s "$base"
e2e_fig pswpin "$(echo "$vm" | sed -n 's/.*pswpin \([0-9]*\).*/\1/p')"
oom=$(echo "$vm" | sed -n 's/.*oom_kill \([0-9]*\).*/\1/p')
e2e_fig oom_kill "${oom:-unknown}"
[ $((rss0 - min)) -ge $((COLD_MIB * 60 / 100)) ]
e2e_check $? "host memory fell by >= 60% of $COLD_MIB MiB cold within 60 s ($((rss0 - min)) MiB)"
[ "${oom:-1}" = 0 ]
e2e_check $? "no OOM kill in the guest"
grep -q '^WL-COLD-OK' "$E2E_CONSOLE"
e2e_check $? "cold data intact after swap and balloon"
[ $kept = 1 ] && [ -n "$before_exit" ]
e2e_check $? "memtided's exit left the domain's balloon where it was ($before_exit KiB)"
sed 's/^/# memtided: /' "$E2E_DIR/memtided.log" | tail -12
