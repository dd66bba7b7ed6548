#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# selftest.sh: the KVM host stand's self-test (tests/kvm/stand.sh selftest; `make check` runs it).
#
# Is the stand a KVM host, and what does a KVM guest on it cost against a guest under this
# machine's own TCG?  The same guest and workload (tests/kvm/guest_speed.sh) run here under
# TCG, then in the stand under KVM, then here again: each KVM rate is compared with the mean of
# the TCG runs just before and after it (the machine's speed drifts, and other work shares its
# two cores), and never two at once (they would share the cores).  STAND_SPEED_ROUNDS (1)
# repeats the KVM run and the TCG run after it, for the spread.
# Figures in $BUILD/e2e/kvm_stand.json: kvm_ok, nested_paging, guest_boot_s (the KVM guest's
# QEMU start to its E2E-READY) beside guest_boot_tcg_s, l1_boot_s (the stand's QEMU start to its
# chroot) and stand_run_s (the whole stand run: boot, guest, shutdown), rate_kvm_over_tcg (the
# median of the rounds' ratios; ratio_min and ratio_max beside it) with both rates.
. "$(dirname "$0")/../e2e/lib.sh"
E2E_ACCEL=tcg
e2e_init kvm_stand
here=tests/kvm
rounds=${STAND_SPEED_ROUNDS:-1}
t_start=$(e2e_now_ms)

# jget FILE KEY: one field of a figures file ("" when absent).
jget() {
	python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))
except Exception: print("")' "$1" "$2"
}

tcg_run() {
	rm -f "$BUILD/e2e/guest_speed.json"
	bash "$here/guest_speed.sh"
	cp "$BUILD/e2e/guest_speed.json" "$E2E_DIR/tcg_$1.json" 2>/dev/null
}
kvm_run() {
	rm -f "$BUILD/e2e/kvm_guest_speed.json"
	"$here/stand.sh" run "$here/guest_speed.sh"
	cp "$BUILD/e2e/kvm_guest_speed.json" "$E2E_DIR/kvm_$1.json" 2>/dev/null
	cp "$BUILD/kvm/runs/guest_speed/timing.json" "$E2E_DIR/timing_$1.json" 2>/dev/null
}

tcg_run 0
for ((i = 1; i <= rounds; i++)); do
	kvm_run "$i"
	tcg_run "$i"
done

# Every figure comes from the runs' own files; a run that left none counts as a failure.
read -r kvm_ok np ratio rmin rmax rkvm rtcg boot_kvm boot_tcg l1_boot stand_s drift < <(
	python3 - "$E2E_DIR" "$rounds" <<'PY'
import json, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(d, name)))
    except Exception:
        return {}
tcg = [load("tcg_%d.json" % i) for i in range(rounds + 1)]
kvm = [load("kvm_%d.json" % i) for i in range(1, rounds + 1)]
tim = [load("timing_%d.json" % i) for i in range(1, rounds + 1)]
rate = lambda j: float(j.get("rate_median_pages_per_s", 0) or 0)
ratios = []
for i, k in enumerate(kvm):
    t = (rate(tcg[i]) + rate(tcg[i + 1])) / 2
    ratios.append(rate(k) / t if t > 0 else 0)
med = lambda xs: statistics.median(xs) if xs else 0
ok = all(k.get("kvm_ok") is True for k in kvm) and bool(kvm)
np = all(k.get("nested_paging") is True for k in kvm) and bool(kvm)
t0, tn = rate(tcg[0]), rate(tcg[-1])
print("true" if ok else "false", "true" if np else "false",
      "%.3f" % med(ratios), "%.3f" % min(ratios), "%.3f" % max(ratios),
      int(med([rate(k) for k in kvm])), int(med([rate(t) for t in tcg])),
      "%.1f" % med([float(k.get("guest_boot_s", 0) or 0) for k in kvm]),
      "%.1f" % med([float(t.get("guest_boot_s", 0) or 0) for t in tcg]),
      "%.1f" % med([float(t.get("l1_up_wall_s", 0) or 0) for t in tim]),
      "%.1f" % med([float(t.get("total_wall_s", 0) or 0) for t in tim]),
      "%.3f" % (tn / t0 if t0 > 0 else 0))
PY
)
e2e_fig kvm_ok "$kvm_ok"
e2e_fig nested_paging "$np"
e2e_fig rounds "$rounds"
e2e_fig rate_kvm_over_tcg "$ratio"
e2e_fig ratio_min "$rmin"
e2e_fig ratio_max "$rmax"
e2e_fig rate_kvm_pages_per_s "$rkvm"
e2e_fig rate_tcg_pages_per_s "$rtcg"
e2e_fig tcg_drift "$drift"
e2e_fig guest_boot_s "$boot_kvm"
e2e_fig guest_boot_tcg_s "$boot_tcg"
e2e_fig l1_boot_s "$l1_boot"
e2e_fig stand_run_s "$stand_s"
e2e_fig selftest_s "$(awk -v m=$(($(e2e_now_ms) - t_start)) 'BEGIN { printf "%.1f", m / 1000 }')"
[ "$kvm_ok" = true ] && [ "$np" = true ]
e2e_check $? "the stand is a KVM host with nested paging, and its guests run on KVM (every round)"
awk -v r="$ratio" 'BEGIN { exit !(r > 0) }'
e2e_check $? "a KVM guest's rate against TCG's measured: $ratio (min $rmin, max $rmax; $rkvm vs $rtcg pages/s; TCG drift $drift)"
