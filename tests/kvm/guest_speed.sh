#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# guest_speed.sh: one guest's speed, for the stand's self-test (tests/kvm/selftest.sh runs it
# on this machine under TCG, and in the stand, through tests/kvm/stand.sh run, under KVM: the
# same script, guest and workload both times).
#
# It boots the e2e guest through the harness (tests/e2e/lib.sh; E2E_ACCEL picks the
# accelerator, as for the scenarios) and runs SPEED_WORKLOAD (the hot set of scenario 2, 200 MiB
# touched page by page, one rate a second) for SPEED_SECONDS (10).  Under KVM it first checks what
# makes the stand a KVM host: /dev/kvm and kvm_amd with nested paging (npt=Y), and then that
# QEMU really runs the guest on KVM (QMP query-kvm: present and enabled).  Figures, in
# $BUILD/e2e/guest_speed.json (kvm_guest_speed.json under KVM): guest_boot_s (QEMU started to
# the guest's E2E-READY, wall time where QEMU runs), rates (pages/s, each second after
# SPEED_SKIP warm-up seconds) and their median; under KVM also kvm_ok and nested_paging.
. "$(dirname "$0")/../e2e/lib.sh"
e2e_init guest_speed
SPEED_SECONDS=${SPEED_SECONDS:-10}
SPEED_SKIP=${SPEED_SKIP:-3}
SPEED_WORKLOAD=${SPEED_WORKLOAD:-memload hotcold 200 1 0}
e2e_fig accel "$E2E_ACCEL"

if [ "$E2E_ACCEL" = kvm ]; then
	npt=$(cat /sys/module/kvm_amd/parameters/npt 2>/dev/null)
	np=false
	[ -c /dev/kvm ] && [ "$npt" = Y ] && np=true
	e2e_fig nested_paging "$np"
	e2e_fig l1_uptime_s "$(cut -d' ' -f1 /proc/uptime)"
	[ "$np" = true ]
	e2e_check $? "a KVM host with nested paging (/dev/kvm, kvm_amd npt=${npt:-not loaded})"
fi
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it"
	exit 1
fi
t0=$(e2e_now_ms)
e2e_boot 1024 "$SPEED_WORKLOAD $SPEED_SECONDS" "memtide.agent=0 transparent_hugepage=never"
# (no ^: with no line before it, the guest's first line follows SeaBIOS's "Booting from ROM..")
ready=$(e2e_wait 'E2E-READY' 120)
boot_ms=$(($(e2e_now_ms) - t0))
e2e_fig guest_boot_s "$(awk -v m="$boot_ms" 'BEGIN { printf "%.1f", m / 1000 }')"
if [ "$E2E_ACCEL" = kvm ]; then
	kvm=$(e2e_qmp '{"execute":"query-kvm"}')
	ok=false
	[[ $kvm == *'"enabled": true'* ]] && [[ $kvm == *'"present": true'* ]] && [ -n "$ready" ] &&
		ok=true
	e2e_fig kvm_ok "$ok"
	[ "$ok" = true ]
	e2e_check $? "the guest runs on KVM (query-kvm: $kvm; up in $boot_ms ms)"
fi
e2e_wait '^WL-DONE' $((SPEED_SECONDS + 120)) >/dev/null
rates=$(grep -a '^WL-RATE' "$E2E_CONSOLE" | tr -d '\r' | awk -v s="$SPEED_SKIP" '$2 > s { print $3 }')
e2e_fig rates "$(echo $rates)"
med=$(echo "$rates" | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }')
e2e_fig rate_median_pages_per_s "$med"
[ "${med:-0}" -gt 0 ]
e2e_check $? "$E2E_ACCEL guest ran its workload ($med pages/s median after ${SPEED_SKIP} s; up in $boot_ms ms)"
e2e_wait '^E2E-EXIT 0' 60 >/dev/null
e2e_check $? "$E2E_ACCEL guest's workload exited cleanly"
