#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 11_access_damon.sh: scenario 11, the damon access source on a real TCG guest.
#
# The same workload as scenario 8 (memload hotpages: 64 MiB written page by page, round
# after round, and 128 MiB written once and left; the guest reports where both sit in
# guest-physical memory from its own pagemap), but QEMU runs without the ept plugin and
# memtided's policy asks for source=damon: DAMON in physical-address mode over the host
# frames behind the guest's RAM (host/access/source_damon.c).  memtided watches only
# (enabled=no).  The pages in memtided's two youngest generations (young_dump_dir) are
# compared with the workload's twice:
#   1. as the host gives them, after three intervals past the first aging round: figures
#      recall_raw and precision_raw, recorded and not held to the goal.  Linux never
#      flushes the TLB when it clears an accessed bit, and the vCPU thread keeps a 64 MiB hot
#      set (32 host huge pages) in its TLB, so on a quiet host some hot huge pages read idle
#      for 10 s and more (recall 0.55-0.85 in 3 runs of 15 here).  That is the hardware's
#      and the kernel's, not memtided's (docs/design.md, Part 0);
#   2. two intervals later, with QEMU's TLB flushed once a second meanwhile (the harness
#      writes 4 to /proc/QEMU/clear_refs, standing in for the TLB evictions of a busy host;
#      memtided cannot do it itself, since on KVM that write zaps every EPT entry): figures
#      recall and precision, held to the goal.  This measures what memtided owns: DAMON's
#      configuration, the frame map and the reading of its regions.
# Figures (build/e2e/access_damon.json): recall = |hot and young| / |hot|; precision =
# |hot and young| / |workload pages that are young|; rounds; memtided's and its kdamond's
# CPU seconds per second over the first measurement; pages the guest kernel moved since it
# reported them.  Goals (what a region-level source must give to stand in for page-level
# bits): recall and precision >= 0.8.  Then memtided's
# politeness: on exit it switches its kdamond off and leaves DAMON as it found it (no
# kdamond, no ownership record).
#
# DAMON's sysfs adds kdamonds only while none is configured, and memtided never takes over
# another tool's: on a host where another tool runs a kdamond (this development machine
# runs one from boot: kdamond 0, paddr, a pageout scheme) the scenario SKIPs with that
# reason, written to the JSON as "skipped", and touches nothing.  It never stops,
# reconfigures or removes a kdamond it did not start.  Takes about 35 s where it runs.
. "$(dirname "$0")/../lib.sh"
e2e_init access_damon
TOTAL=5
echo "1..$TOTAL"
ADMIN=/sys/kernel/mm/damon/admin
# memtided's claim on DAMON (damon.owner) is in its run directory: the state directory
# e2e_start gives it (a memtided with a state directory of its own keeps off /run/memtide).
RUN_DIR=$E2E_DIR/state

skip_all() { e2e_skip_all $TOTAL "$1"; }

# Why DAMON cannot be had here, the way memtided decides it (mtd_damon_probe), or nothing.
damon_unavailable() {
	local n k kd owner
	[ -d "$ADMIN/kdamonds" ] || {
		echo "this kernel has no DAMON sysfs interface ($ADMIN missing)"
		return
	}
	n=$(cat "$ADMIN/kdamonds/nr_kdamonds" 2>/dev/null) || {
		echo "cannot read $ADMIN/kdamonds/nr_kdamonds (not root?)"
		return
	}
	[ "${n:-0}" -gt 0 ] || return
	owner=$(cat "$RUN_DIR/damon.owner" 2>/dev/null)
	if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
		echo "a running memtided (pid $owner) already uses DAMON's kdamond"
		return
	fi
	[ -n "$owner" ] && return # a crashed memtided's leftover: memtided removes it itself
	for ((k = 0; k < n; k++)); do
		kd=$ADMIN/kdamonds/$k
		printf 'another tool runs kdamond %d (state %s, pid %s, %s, scheme %s); DAMON adds kdamonds only while none is configured and memtided never takes over another tool'"'"'s\n' \
			"$k" "$(cat "$kd/state" 2>/dev/null)" "$(cat "$kd/pid" 2>/dev/null)" \
			"$(cat "$kd/contexts/0/operations" 2>/dev/null)" \
			"$(cat "$kd/contexts/0/schemes/0/action" 2>/dev/null || echo none)"
		return
	done
}

[ "$(id -u)" = 0 ] || skip_all "needs root for DAMON's sysfs and QEMU's pagemap"
why=$(damon_unavailable)
[ -z "$why" ] || skip_all "$why"
if ! e2e_build; then
	e2e_not_ok "guest image"
	exit 1
fi
NAME=access-damon
PHASE_S=${E2E_PHASE_S:-8}

e2e_boot 512 "memload hotpages 64 128 $((PHASE_S * 8 + 40))" "memtide.agent=0"
if e2e_wait 'WL-PAGES-END' 90 >/dev/null; then
	e2e_ok "guest up, its workload's pages reported"
else
	e2e_not_ok "guest did not report its pages (console: $(tail -3 "$E2E_CONSOLE" | tr '\n' ' '))"
	exit 1
fi

printf '[daemon]\nyoung_dump_dir = %s\n[defaults]\nenabled = no\nsource = damon\n' \
	"$E2E_DIR" >"$E2E_DIR/memtided.conf"
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --name "$NAME" --foreground \
	--config "$E2E_DIR/memtided.conf" --no-metrics --socket "$E2E_DIR/ctl.sock" \
	--log-level info 2>"$E2E_DIR/memtided.log"
MPID=$E2E_LAST_PID
if ! e2e_wait_file "$E2E_DIR/$NAME.young" '^round 1$' 40 >/dev/null; then
	e2e_not_ok "no aging round (log: $(tail -3 "$E2E_DIR/memtided.log" | tr '\n' ' '))"
	exit 1
fi
KPID=$(cat "$ADMIN/kdamonds/0/pid" 2>/dev/null)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
m0=$(cpu "$MPID") k0=$(cpu "${KPID:-0}") t0=$(e2e_now_ms)
if e2e_wait_file "$E2E_DIR/$NAME.young" '^round 4$' 40 >/dev/null; then
	e2e_ok "memtided aged the guest through the damon source for four rounds (kdamond pid ${KPID:-?})"
else
	e2e_not_ok "no fourth aging round (log: $(tail -3 "$E2E_DIR/memtided.log" | tr '\n' ' '))"
fi
cp "$E2E_DIR/$NAME.young" "$E2E_DIR/young_raw.txt"
m1=$(cpu "$MPID") k1=$(cpu "${KPID:-0}") t1=$(e2e_now_ms)
"$BUILD/bin/memtidectl" --socket "$E2E_DIR/ctl.sock" --json vm show "$NAME" >"$E2E_DIR/show.json" 2>&1
grep -q '"source":"damon"' "$E2E_DIR/show.json"
e2e_check $? "vm show --json names the damon source"

# Measurement 2: QEMU's TLB flushed once a second (a rate, not a wait) until round 6, whose
# two youngest generations hold only accesses made after the flushing began.
(
	while kill -0 "$E2E_QEMU_PID" 2>/dev/null; do
		echo 4 >"/proc/$E2E_QEMU_PID/clear_refs" 2>/dev/null && : >"$E2E_DIR/flushed"
		sleep 1
	done
) &
FLUSHER=$!
e2e_wait_file "$E2E_DIR/$NAME.young" '^round 6$' 40 >/dev/null ||
	echo "# no sixth aging round: the second measurement reads an earlier one"
cp "$E2E_DIR/$NAME.young" "$E2E_DIR/young.txt"
kill "$FLUSHER" 2>/dev/null
wait "$FLUSHER" 2>/dev/null
[ -e "$E2E_DIR/flushed" ] && flushed=yes || flushed="no (clear_refs refused)"
e2e_fig tlb_flushed "$([ -e "$E2E_DIR/flushed" ] && echo 1 || echo 0)"

kill "$MPID"
wait "$MPID" 2>/dev/null
[ "$(cat "$ADMIN/kdamonds/nr_kdamonds")" = 0 ] && [ ! -e "$RUN_DIR/damon.owner" ]
e2e_check $? "memtided left DAMON as it found it: no kdamond, no ownership record"

python3 - "$E2E_CONSOLE" "$E2E_DIR/young.txt" "$E2E_DIR/young_raw.txt" "$m0" "$m1" "$k0" "$k1" \
	"$t0" "$t1" "$(getconf CLK_TCK)" >"$E2E_DIR/figs.txt" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests/e2e"))
from young_truth import workload_pages, young_pages, scores
con, young, young_raw = sys.argv[1], sys.argv[2], sys.argv[3]
m0, m1, k0, k1, t0, t1, hz = (float(x or 0) for x in sys.argv[4:11])
hot, cold, moved = workload_pages(con)
raw, _ = young_pages(young_raw)
yg, rounds = young_pages(young)
secs = max(0.001, (t1 - t0) / 1000)
recall, precision = scores(hot, cold, yg)
recall_raw, precision_raw = scores(hot, cold, raw)
print("recall", recall)
print("precision", precision)
print("recall_raw", recall_raw)
print("precision_raw", precision_raw)
print("rounds", rounds)
print("hot_pages", len(hot))
print("cold_pages", len(cold))
print("young_pages", len(yg))
if moved:  # pages the guest kernel moved since it printed them: the truth above went stale
    print("guest_moved_hot_pages", moved[0])
    print("guest_moved_cold_pages", moved[1])
print("memtided_cpu_per_s", round((m1 - m0) / hz / secs, 4))
print("kdamond_cpu_per_s", round((k1 - k0) / hz / secs, 4))
PY
while read -r k v; do e2e_fig "$k" "$v"; done <"$E2E_DIR/figs.txt"
ge() { python3 -c "import sys; sys.exit(0 if float('$1') >= float('$2') else 1)"; }
ge "${E2E_FIGS[recall]:-0}" 0.8 && ge "${E2E_FIGS[precision]:-0}" 0.8
e2e_check $? "recall ${E2E_FIGS[recall]:-?} and precision ${E2E_FIGS[precision]:-?} >= 0.8 (goal), QEMU's TLB flushed each second: $flushed (as the host gave them: recall ${E2E_FIGS[recall_raw]:-?}, precision ${E2E_FIGS[precision_raw]:-?}; pages the guest moved meanwhile: hot ${E2E_FIGS[guest_moved_hot_pages]:-?}, cold ${E2E_FIGS[guest_moved_cold_pages]:-?})"
exit $E2E_FAILED
