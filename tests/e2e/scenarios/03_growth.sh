#!/bin/bash
# 03_growth.sh: scenario 3, the working set grows by 300 MiB after memtided has taken the
# cold memory; memtided must give memory back before the guest thrashes or OOMs.
#
# Plain QEMU, the guest and workload of scenario 2 (200 MiB hot, 350 MiB cold anon, 150 MiB
# cold tmpfs, zram swap inside, guest THP off), memtided --interval 2.  At second 45 of the
# hot phase memload grows its hot set by 300 MiB (first touch of a new mapping).  The test
# follows the balloon target through `memtidectl --json status` every 0.5 s.
# Reported: the target before the growth; time from the growth to memtided's first
# deflation and to a target 256 MiB higher (memtided's deflate_min: what pressure gives back
# at once; the guest does not need the whole 300 MiB more, as part of what it held before
# was cold data now compressed in zram); the peak target; how long the guest took to touch
# its new 300 MiB; swap-ins.
# Asserts: memtided had inflated before the growth; its first deflation came within 10 s
# (five control intervals) of the growth; no OOM kill; the cold data is intact.
# Measured (two runs): first deflation after 3.8 s and 3.6 s (two intervals); but how much
# it gave varied: 618 -> 874 MiB at once on PSI pressure in one run, 706 -> 750 MiB in small
# "grow" steps in the other, where the guest swapped instead (pswpin 90-110 k pages over the
# whole run).  The amount given on growth follows MemTotal - MemAvailable while the guest
# runs without MGLRU, and swap keeps that low: see the issue note.
. "$(dirname "$0")/../lib.sh"
e2e_init 03_growth
echo "1..4"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
GROW=300
e2e_boot 1024 "memload hotcold 200 350 150 80 $GROW 45" "memtide.zram_mib=700 transparent_hugepage=never"
e2e_wait '^WL-FILLED' 150 >/dev/null
SOCK=$E2E_DIR/ctl.sock
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --agent "$E2E_AGENT" --interval 2 --foreground \
	--no-metrics --socket "$SOCK" --log-level info 2>"$E2E_DIR/memtided.log"
target() {
	"$BUILD/bin/memtidectl" --socket "$SOCK" --json status 2>/dev/null |
		python3 -c 'import json,sys; v=json.load(sys.stdin)["vms"]; print(v[0]["balloon_target_bytes"] >> 20 if v else "")' 2>/dev/null
}
e2e_wait '^WL-GROW ' 150 >/dev/null
tg=$(e2e_now_ms)
before=$(target)
e2e_fig target_before_growth_mib "${before:-0}"
first=-1 enough=-1 peak=${before:-0}
while [ $(($(e2e_now_ms) - tg)) -lt 20000 ] && kill -0 "$E2E_QEMU_PID" 2>/dev/null; do
	t=$(target)
	el=$(($(e2e_now_ms) - tg))
	if [ -n "$t" ] && [ -n "$before" ]; then
		[ "$t" -gt "$peak" ] && peak=$t
		[ $first -lt 0 ] && [ "$t" -gt "$before" ] && first=$el
		[ $enough -lt 0 ] && { [ "$t" -ge $((before + 256)) ] || [ "$t" -ge 1024 ]; } && enough=$el
	fi
	sleep 0.5
done
grown=$(e2e_wait '^WL-GROWN' 120 | awk '{print $2}')
vm=$(e2e_wait '^E2E-VMSTAT' 120)
e2e_fig first_deflate_ms "$first"
e2e_fig target_up_256_ms "$enough"
e2e_fig target_after_20s_mib "$(target)"
e2e_fig target_peak_mib "$peak"
e2e_fig guest_touch_of_growth_s "${grown:-unknown}"
e2e_fig pswpin "$(echo "$vm" | sed -n 's/.*pswpin \([0-9]*\).*/\1/p')"
oom=$(echo "$vm" | sed -n 's/.*oom_kill \([0-9]*\).*/\1/p')
e2e_fig oom_kill "${oom:-unknown}"
[ -n "$before" ] && [ "$before" -lt 900 ]
e2e_check $? "memtided had inflated before the growth (target ${before:-?} MiB)"
[ $first -ge 0 ] && [ $first -le 10000 ]
e2e_check $? "memtided deflated within 10 s of the growth (first deflation after $first ms; 256 MiB back after $enough ms, -1: not within 20 s; peak target $peak MiB)"
[ "${oom:-1}" = 0 ]
e2e_check $? "no OOM kill in the guest"
grep -q '^WL-COLD-OK' "$E2E_CONSOLE"
e2e_check $? "cold data intact"
grep -E 'inflate|deflate' "$E2E_DIR/memtided.log" | tail -8 | sed 's/^/# memtided: /'
