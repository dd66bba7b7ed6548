#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 18_free_churn.sh: scenario 18, host-side eviction of a guest that keeps allocating and
# freeing memory (a reallocation of free memory is not a reuse: counted as one, it would
# hold the cold age up and leave the cold data in place).
#
# A 1 GiB TCG guest with no agent runs memload churn: 256 MiB of data written once and left
# cold, 64 MiB hot (touched page by page all the time), and every 20 s 192 MiB mapped,
# written and unmapped, as a build or a batch job allocates and frees.  QEMU carries
# memtide's ept plugin (the access source) and free page reporting; the host has a zram swap
# device of the test's own.  memtided runs it at its defaults (interval 1 s, so the longest
# age its generations tell apart is 14 s): with no agent and a live source, `return`
# resolves to pageout.
#
# Each churn allocates pages the guest had freed 20 s before (or never used), which free
# page reporting had given back to the host.  To the access bits that is a page idle for
# 20 s used again: read as a reuse, past the longest age, and the refault controller holds
# ("reused-past-longest-age") and host pageout takes nothing.  memtided reads QEMU's pagemap
# each interval and marks the pages that hold nothing on the host as the guest's free memory
# (vmm_hint_free), whose next use is no reuse.  Measured before that (one run): held from
# 23 s on, 0 MiB paged out in 150 s; after: 300 MiB paged out 35 s after memtided started.
#
# Figures: build/e2e/18_free_churn.json.  Asserts: host pageout took at least 200 of the 256
# MiB of cold data within 120 s; vm show reported free memory holding nothing on the host;
# the guest kept churning; memtided logged no errors.  About 2.5 minutes.
# Needs root and zram; run under the shared lock.  A host that cannot give the test a zram
# swap device SKIPs every check with the reason.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../lib_zram.sh"
e2e_init 18_free_churn
TOTAL=4
echo "1..$TOTAL"
skip_all() { e2e_skip_all $TOTAL "$1"; }
command -v qemu-system-x86_64 >/dev/null || skip_all "no qemu-system-x86_64"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
CTL=$BUILD/bin/memtidectl
for f in "$BUILD/bin/memtided" "$CTL" "$PLUGIN" "$BUILD/guest/bin/memload"; do
	[ -e "$f" ] || { e2e_not_ok "$f is not built"; exit 1; }
done
e2e_zram_add 1G || skip_all "host swap: $E2E_ZRAM_WHY"
MEM=1024 HOT=64 COLD=256 CHURN=192 PERIOD=20 WAIT_S=120
e2e_fig cold_mib $COLD
e2e_fig churn_mib $CHURN
e2e_fig churn_period_s $PERIOD

e2e_boot $MEM "memload churn $HOT $COLD $CHURN $PERIOD 300" "memtide.agent=0" \
	-plugin "$PLUGIN,table=$E2E_DIR/churn.ept,ram=${MEM}M"
if ! e2e_wait '^WL-FILLED' 120 >/dev/null; then
	echo "# console: $(tail -3 "$E2E_CONSOLE" | tr '\n' ' ')"
	e2e_not_ok "the guest did not start memload churn"
	exit 1
fi
log=$E2E_DIR/memtided.log
printf '[daemon]\nept_dir = %s\n' "$E2E_DIR" >"$E2E_DIR/churn.conf"
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --name churn --interval 1s --foreground \
	--config "$E2E_DIR/churn.conf" --no-metrics --socket "$E2E_DIR/churn.sock" \
	--log-level info 2>"$log"
t0=$(date +%s.%N)
# Sample vm show every second: the first time the swap holds 200 MiB, and the most free
# memory seen.  A poll is the measurement here (the figures are the VM's state over time),
# not a stand-in for an event.
read -r took_s swapped_mib free_mib holds < <(python3 - "$CTL" "$E2E_DIR/churn.sock" "$t0" "$WAIT_S" <<'PY'
import json, subprocess, sys, time
ctl, sock, t0, wait_s = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
took, swapped, free, holds, last = None, 0, 0, 0, None
while time.time() - t0 < wait_s:
    try:
        out = subprocess.run([ctl, "--socket", sock, "--json", "vm", "show", "churn"],
                             capture_output=True, text=True, timeout=10).stdout
        vm = json.loads(out)["vm"]
    except (ValueError, KeyError, subprocess.SubprocessError):
        time.sleep(1)
        continue
    po = vm["pageout"]
    swapped = max(swapped, po["swapped_bytes"] >> 20)
    free = max(free, po.get("free_bytes", 0) >> 20)
    hold = vm.get("reclaim_hold") or ""
    if hold != last and hold not in ("", "none"):
        holds += 1
    last = hold
    if took is None and po["swapped_bytes"] >= 200 << 20:
        took = time.time() - t0
        break
    time.sleep(1)
print(f"{took:.1f}" if took is not None else "null", swapped, free, holds)
PY
)
e2e_fig pageout_200mib_s "$took_s"
e2e_fig swapped_mib "$swapped_mib"
e2e_fig free_seen_mib "$free_mib"
e2e_fig hold_changes "$holds"
"$CTL" --socket "$E2E_DIR/churn.sock" vm show churn >"$E2E_DIR/churn.show" 2>&1
[ "$took_s" != null ]
e2e_check $? "host pageout took 200 of the $COLD MiB of cold data within $WAIT_S s (after ${took_s} s; $swapped_mib MiB in host swap)"
if [ "$took_s" = null ]; then
	grep -E 'hold|paused|eviction' "$log" | tail -5 | sed 's/^/# /'
fi
[ "${free_mib:-0}" -gt 0 ] && grep -q 'free in the guest' "$E2E_DIR/churn.show"
e2e_check $? "vm show: up to $free_mib MiB of guest RAM held nothing on the host (the guest's free memory)"
# The second churn (40 s into the workload) shows the guest allocating again what it freed.
e2e_wait '^WL-CHURN [0-9]+ 2([^0-9]|$)' 90 >/dev/null
rc=$?
churns=$(grep -ac '^WL-CHURN' "$E2E_CONSOLE")
e2e_fig churn_cycles "$churns"
[ $rc = 0 ] && ! grep -aq '^WL-ERROR' "$E2E_CONSOLE"
e2e_check $? "the guest kept allocating and freeing ($churns churn cycles, no workload error)"
if grep -qE 'memtided.*(ERROR|AddressSanitizer)|(^| )err(or)?: ' "$log"; then
	e2e_not_ok "memtided logged errors: $(grep -E 'err(or)?: ' "$log" | head -2 | tr '\n' ' ')"
else
	e2e_ok "memtided logged no errors"
fi
