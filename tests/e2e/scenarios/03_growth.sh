#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 03_growth.sh: scenario 3, the working set grows by 300 MiB after memtided has taken the
# cold memory; memtided must give memory back before the guest thrashes or OOMs.
#
# Plain QEMU, the guest and workload of scenario 2 (200 MiB hot, 350 MiB cold anon, 150 MiB
# cold tmpfs, zram swap inside, guest THP off), memtided --interval 2.  From second 20 of the
# hot phase, once memtided's balloon holds at least 128 MiB (the guest's vmstat balloon pages:
# the growth must meet a squeezed guest, whatever pace memtided took; a fixed second raced with
# it and, in one CI run, met a guest memtided had already given its memory back), memload grows
# its hot set by 300 MiB (first touch of a new mapping).  What reacts
# first is the agent's growth watch (guest-agent/agent_watch.c): memory in use growing fast
# enough to run out within 2 s sends memtided a `need`, which it answers at once, between
# ticks.  The growth's start is taken on the host's monotonic clock as the console line
# appears; memtided's balloon moves come from its log (same clock).
# Reported: the target before the growth; time from the growth to memtided's first
# deflation and its reason; to a target 256 MiB higher; the peak target; how long the guest
# took to touch its new 300 MiB; the guest's swap-outs and swap-ins while it did.
# Asserts: memtided had inflated before the growth; its first deflation came within two
# control intervals (4 s); the guest swapped out at most 2% of the growth while touching it
# (memtided gave memory back before the guest had to swap); no OOM kill; cold data intact.
# On the KVM host stand (E2E_ACCEL=kvm) the first three checks cannot hold, and the scenario is
# not in make check-kvm: the nested guest's own reclaim frees a few MiB a second, so memtided's
# balloon does not reach 128 MiB before the 60 s fallback, the guest's pressure gives back what
# it took, and the growth meets a full-size guest that must swap (docs/e2e.md, "The scenarios
# on KVM").  Checks 4 and 5 held.
. "$(dirname "$0")/../lib.sh"
e2e_init 03_growth
echo "1..5"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
GROW=300
e2e_boot 1024 "memload hotcold 200 350 150 80 $GROW 20 128" "memtide.zram_mib=700 transparent_hugepage=never ${E2E_APPEND:-}"
e2e_wait '^WL-FILLED' 150 >/dev/null
SOCK=$E2E_DIR/ctl.sock
# return=balloon: this scenario measures the balloon's deflation, the path a VM squeezed by
# host pressure takes (with the default, reclaim, the balloon stays at 1024 MiB and a growing
# guest simply takes back the memory it freed; scenario 2 measures that).
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --agent "$E2E_AGENT" --interval 2 --foreground \
	--config "$(e2e_memtided_conf balloon)" --no-metrics --socket "$SOCK" --log-level "${E2E_LOG_LEVEL:-info}" 2>"$E2E_DIR/memtided.log"
# When the guest's growth began, on the host's CLOCK_MONOTONIC (memtided's log clock): the
# console is followed here, not with tail, so the time is taken as the line appears.
tg_ms=$(python3 tests/e2e/console.py "$E2E_CONSOLE" '^WL-GROW ' 150)
gline=${tg_ms#* }
tg_ms=${tg_ms%% *}
gnline=$(e2e_wait '^WL-GROWN' 120)
grown=$(echo "$gnline" | awk '{print $2}')
swap_of() { echo "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p"; }
in0=$(swap_of "$gline" pswpin) out0=$(swap_of "$gline" pswpout)
in1=$(swap_of "$gnline" pswpin) out1=$(swap_of "$gnline" pswpout)
vm=$(e2e_wait '^E2E-VMSTAT' 120)
# memtided's balloon moves after the growth began: "[T] info: qemu: deflate A->B MiB (why)".
read -r before first enough peak why < <(awk -v t0="${tg_ms:-0}" -F'[][]' '
	/ deflate [0-9]+->[0-9]+ MiB/ && $2 * 1000 >= t0 {
		ms = int($2 * 1000 - t0); split($3, w, "deflate "); split(w[2], ab, "->|[ ]MiB")
		if (first == "") { first = ms; before = ab[1]; why = $3; sub(/.*\(/, "", why); sub(/\).*/, "", why) }
		if (enough == "" && (ab[2] >= before + 256 || ab[2] >= 1024)) enough = ms
		if (ab[2] > peak) peak = ab[2]
	}
	END { print (before == "" ? 0 : before), (first == "" ? -1 : first),
		    (enough == "" ? -1 : enough), peak + 0, (why == "" ? "-" : why) }' "$E2E_DIR/memtided.log")
e2e_fig target_before_growth_mib "$before"
e2e_fig balloon_at_growth_mib "$(echo "$gline" | sed -n 's/.* balloon=\([0-9]*\).*/\1/p')"
e2e_fig growth_at_s "$(echo "$gline" | awk '{print $2}')"
e2e_fig first_deflate_ms "$first"
e2e_fig first_deflate_reason "$why"
e2e_fig target_up_256_ms "$enough"
e2e_fig target_peak_mib "$peak"
e2e_fig guest_touch_of_growth_s "${grown:-unknown}"
e2e_fig growth_pswpout_pages $((${out1:-0} - ${out0:-0}))
e2e_fig growth_pswpin_pages $((${in1:-0} - ${in0:-0}))
e2e_fig pswpin_whole_run "$(echo "$vm" | sed -n 's/.*pswpin \([0-9]*\).*/\1/p')"
oom=$(echo "$vm" | sed -n 's/.*oom_kill \([0-9]*\).*/\1/p')
e2e_fig oom_kill "${oom:-unknown}"
[ "$before" -gt 0 ] && [ "$before" -lt 900 ]
e2e_check $? "memtided had inflated before the growth (target $before MiB)"
[ "$first" -ge 0 ] && [ "$first" -le 4000 ]
e2e_check $? "memtided deflated within two control intervals of the growth ($first ms, on '$why'; 256 MiB back after $enough ms; peak target $peak MiB)"
swapped=$((${out1:-0} - ${out0:-0}))
[ -n "$out1" ] && [ "$swapped" -le $((GROW * 256 / 50)) ]
e2e_check $? "the guest swapped out $swapped pages while it touched its $GROW MiB (at most 2% of them)"
[ "${oom:-1}" = 0 ]
e2e_check $? "no OOM kill in the guest"
grep -q '^WL-COLD-OK' "$E2E_CONSOLE"
e2e_check $? "cold data intact"
grep -E 'inflate|deflate' "$E2E_DIR/memtided.log" | tail -8 | sed 's/^/# memtided: /'
