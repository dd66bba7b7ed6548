#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 17_ept_boot.sh: scenario 17, a guest with memtide's ept plugin boots when memtided asks for
# sampling windows from its first moments.
#
# memtided attaches a guest when it starts (the libvirt hook, a host reboot) and asks the
# plugin for a window at once.  Until 6 Dec 2026 the plugin switched windows from QEMU's
# idle callback too, and a window asked in the first milliseconds froze the guest for good
# (QEMU 7.2: one vCPU thread in start_exclusive, the other in do_run_on_cpu, each waiting
# for the other; host/access/qemu_plugin/memtide_ept.c says how).  With this harness the
# old plugin froze 12 of 40 boots (asked after 5 ms: 5 of 8, 10 ms: 4 of 8, 15 ms: 3 of 8,
# 20-25 ms: 0 of 16), and QEMU then ignored SIGTERM; the fixed one 0 of 20.
# tests/integration/domxml_ept.sh met it in CI.
#
# Plain QEMU, TCG, 2 vCPUs, the e2e guest running memload; tests/e2e/ept_boot.py boots it
# again and again, paused then resumed over QMP as libvirt does, asks for a 200 ms window
# 5-25 ms after the resume and every 500 ms after (memtidectl ept-mode), and waits for the
# guest's console and 3 windows (an event, with a 30 s deadline).
# make check boots 12 times, asking 5, 10 and 15 ms after the resume (4 boots each; ~50 s):
# the old plugin froze 5 of 8, 4 of 8 and 3 of 8 boots at those delays, so a clean 12 had a
# chance of (3/8)^4 (4/8)^4 (5/8)^4 = 0.02%, the same as the 20 boots over 5-25 ms make check
# ran before (4 each; 20 and 25 ms froze none of 16).  make soak boots 200 times over all
# five delays, 5-25 ms (about 12 min).
# Reported: boots, stuck boots, median seconds to the third window, QEMUs that ignored
# SIGTERM.  Asserts: every boot came up and ran its windows; every QEMU stopped on SIGTERM.
. "$(dirname "$0")/../lib.sh"
e2e_init 17_ept_boot
echo "1..2"
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
if [ ! -f "$PLUGIN" ]; then
	e2e_not_ok "the ept plugin is not built ($PLUGIN)"
	e2e_not_ok "the ept plugin is not built"
	exit 1
fi
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	e2e_not_ok "guest image: cannot build it"
	exit 1
fi
BOOTS=12 STEPS=3
[ "${E2E_SOAK:-0}" = 1 ] && BOOTS=200 STEPS=5
python3 tests/e2e/ept_boot.py --plugin "$PLUGIN" --kernel "$E2E_KERNEL" --initrd "$E2E_INITRD" \
	--ctl "$BUILD/bin/memtidectl" --dir "$E2E_DIR" --boots "$BOOTS" --steps "$STEPS" \
	>"$E2E_DIR/boots.jsonl"
sum=$(tail -1 "$E2E_DIR/boots.jsonl")
val() { echo "$sum" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1'))" 2>/dev/null; }
stuck=$(val stuck)
deaf=$(grep -c '"exited_on_sigterm": false' "$E2E_DIR/boots.jsonl")
e2e_fig boots "$(val boots)"
e2e_fig stuck_boots "${stuck:-unknown}"
e2e_fig median_s_to_3_windows "$(val median_s_to_3_windows)"
e2e_fig qemu_ignored_sigterm "$deaf"
grep -v '"up": true' "$E2E_DIR/boots.jsonl" | grep -v summary | head -5 | sed 's/^/# stuck: /'
[ "$(val boots)" = "$BOOTS" ] && [ "$stuck" = 0 ]
e2e_check $? "every guest booted and ran its windows with one asked 5-$((STEPS * 5)) ms after the start ($stuck of $BOOTS stuck)"
[ "$deaf" = 0 ]
e2e_check $? "every QEMU stopped on SIGTERM ($deaf did not)"
