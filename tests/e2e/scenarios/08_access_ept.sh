#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 08_access_ept.sh: scenario 8, the ept access source on a real TCG guest.
#
# The guest runs memload hotpages: 64 MiB written page by page, round after round (the hot
# set), and 128 MiB written once and then left alone (cold); it reports where both are in
# guest-physical memory from its own /proc/self/pagemap.  QEMU carries memtide's plugin
# (-plugin memtide-ept.so,table=...), which keeps an emulated EPT for the guest.
#
# Phases of the same workload process, in one boot (each measured phase has an off phase
# right before it, and the sampled one right after too: the machine is shared and its speed
# drifts by tens of percent within minutes, so only neighbours are compared):
#   off      the plugin is loaded, instrumentation off: the baseline rate;
#   full     instrumentation all the time (memtidectl ept-mode always);
#   off
#   sampled  memtided with the ept source at its defaults (5 s interval, 200 ms windows),
#            policy enabled=no so it only watches; after three intervals past its first
#            aging round, the pages in its two youngest generations (young_dump_dir) are
#            compared with the workload's;
#   off      memtided gone (it switches instrumentation off as it leaves).
# Figures (build/e2e/access_ept.json): recall = |hot and young| / |hot|; precision = |hot
# and young| / |workload pages that are young| (the guest kernel's pages do not count);
# rounds; slowdown_full = the rate of the off phase before it / its rate, slowdown_sampled =
# the mean rate of the off phases around it / its rate (> 1: slower), both in touches per
# QEMU CPU-second (what the plugin costs, whatever else the host runs); the _wall figures are
# the same from medians of the guest's per-second wall-clock rates, which other load on a
# shared machine moves by tens of percent; memtided's CPU seconds per second over the
# sampled phase.
# Goals (what a page-level source must give to be preferred over the agent's amounts):
# recall and precision >= 0.95, slowdown_sampled <= 1.3.
# Takes about 2 minutes.
. "$(dirname "$0")/../lib.sh"
e2e_init access_ept
echo "1..8"
if ! e2e_build; then
	e2e_not_ok "guest image"
	exit 1
fi
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
if [ ! -f "$PLUGIN" ]; then
	e2e_not_ok "the plugin is not built ($PLUGIN)"
	exit 1
fi
NAME=access-ept
TABLE=$E2E_DIR/$NAME.ept
CTL="$BUILD/bin/memtidectl"
PHASE_S=${E2E_PHASE_S:-8}

e2e_boot 512 "memload hotpages 64 128 $((PHASE_S * 5 + 40))" "memtide.agent=0" \
	-plugin "$PLUGIN,table=$TABLE,ram=512M"
if e2e_wait 'WL-PAGES-END' 90 >/dev/null && [ -f "$TABLE" ]; then
	e2e_ok "guest up with the plugin's table $TABLE"
else
	e2e_not_ok "guest did not report its pages (console: $(tail -3 "$E2E_CONSOLE" | tr '\n' ' '))"
	exit 1
fi

# lines of the console so far: a phase's rates are the WL-RATE lines after its mark
# and QEMU's CPU time at that line goes to marks.txt, for the rates per QEMU CPU-second
mark() {
	local l
	l=$(wc -l <"$E2E_CONSOLE")
	echo "$l $(awk '{print $14 + $15}' "/proc/$E2E_QEMU_PID/stat" 2>/dev/null)" >>"$E2E_DIR/marks.txt"
	echo "$l"
}
# wait until the table's instrumentation is on (1) or off (0)
wait_on() {
	local i
	for i in $(seq 1 100); do
		"$CTL" --json ept-status "$TABLE" 2>/dev/null | grep -q "\"on\":$1," && return 0
		e2e_wait "WL-RATE" 1 >/dev/null # a console line passes: no sleep needed
	done
	return 1
}

m_off=$(mark)
e2e_wait_file "$E2E_CONSOLE" "WL-RATE $((PHASE_S + 2)) " $((PHASE_S * 4)) >/dev/null
m_full=$(mark)
"$CTL" ept-mode "$TABLE" always && wait_on 1
e2e_check $? "instrumentation switched on at run time (qemu_plugin_reset)"
m_full=$(mark)
n0=$(grep -c WL-RATE "$E2E_CONSOLE")
until [ "$(grep -c WL-RATE "$E2E_CONSOLE")" -ge $((n0 + PHASE_S)) ]; do e2e_wait 'WL-RATE' 5 >/dev/null || break; done
m_full_end=$(mark)
"$CTL" ept-mode "$TABLE" off && wait_on 0
e2e_check $? "instrumentation switched off again"

# off again: the baseline next to the sampled phase
m_off2=$(mark)
n0=$(grep -c WL-RATE "$E2E_CONSOLE")
until [ "$(grep -c WL-RATE "$E2E_CONSOLE")" -ge $((n0 + PHASE_S)) ]; do e2e_wait 'WL-RATE' 5 >/dev/null || break; done

# the sampled phase: memtided, ept source, defaults but for watching only
printf '[daemon]\nept_dir = %s\nyoung_dump_dir = %s\n[defaults]\nenabled = no\n' \
	"$E2E_DIR" "$E2E_DIR" >"$E2E_DIR/memtided.conf"
m_off2_end=$(mark)
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --name "$NAME" --foreground \
	--config "$E2E_DIR/memtided.conf" --no-metrics --socket "$E2E_DIR/ctl.sock" \
	--log-level info 2>"$E2E_DIR/memtided.log"
MPID=$E2E_LAST_PID
cpu0=$(awk '{print $14 + $15}' /proc/$MPID/stat 2>/dev/null)
t0=$(e2e_now_ms)
e2e_wait_file "$E2E_DIR/$NAME.young" '^round 1$' 30 >/dev/null
m_s=$(mark)
if e2e_wait_file "$E2E_DIR/$NAME.young" '^round 4$' 40 >/dev/null; then
	e2e_ok "memtided aged the guest through the ept source for four rounds"
else
	e2e_not_ok "no fourth aging round (log: $(tail -3 "$E2E_DIR/memtided.log" | tr '\n' ' '))"
fi
cp "$E2E_DIR/$NAME.young" "$E2E_DIR/young.txt"
m_s_end=$(mark)
cpu1=$(awk '{print $14 + $15}' /proc/$MPID/stat 2>/dev/null)
t1=$(e2e_now_ms)
"$CTL" --socket "$E2E_DIR/ctl.sock" vm show "$NAME" >"$E2E_DIR/show.txt" 2>&1
"$CTL" --socket "$E2E_DIR/ctl.sock" --json vm show "$NAME" >"$E2E_DIR/show.json" 2>&1
grep -q "access source: ept" "$E2E_DIR/show.txt" && grep -q '"source":"ept"' "$E2E_DIR/show.json" &&
	grep -q '"source_not_taken":\[{' "$E2E_DIR/show.json"
e2e_check $? "vm show and --json name the ept source and why the others were not taken"
sed 's/^/# /' "$E2E_DIR/show.txt" | grep -E "source|not " | head -6

kill "$MPID"
wait_on 0
e2e_check $? "memtided switched instrumentation off as it left"
m_off3=$(mark)
n0=$(grep -c WL-RATE "$E2E_CONSOLE")
until [ "$(grep -c WL-RATE "$E2E_CONSOLE")" -ge $((n0 + PHASE_S)) ]; do e2e_wait 'WL-RATE' 5 >/dev/null || break; done
m_off3_end=$(mark)

python3 - "$E2E_CONSOLE" "$E2E_DIR/young.txt" "$m_off" "$m_full" "$m_full_end" "$m_s" "$m_s_end" \
	"$cpu0" "$cpu1" "$t0" "$t1" "$(getconf CLK_TCK)" "$m_off2" "$m_off3" "$m_off3_end" "$m_off2_end" \
	"$E2E_DIR/marks.txt" >"$E2E_DIR/figs.txt" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests/e2e"))
from young_truth import workload_pages, young_pages, scores
con, young, m_off, m_full, m_full_end, m_s, m_s_end = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
cpu0, cpu1, t0, t1, hz = (float(x or 0) for x in sys.argv[8:13])
m_off2, m_off3, m_off3_end, m_off2_end = map(int, sys.argv[13:17])
lines = open(con, errors="replace").read().splitlines()
hot, cold, _ = workload_pages(con)
yg, rounds = young_pages(young)
def rate(a, b):
    r = [float(l.split()[2]) for l in lines[a:b] if l.startswith("WL-RATE")][2:]
    r.sort()
    return r[len(r) // 2] if r else 0.0   # median: robust to one slow second
off, full, samp = rate(m_off, m_full), rate(m_full, m_full_end), rate(m_s, m_s_end)
off2, off3 = rate(m_off2, m_off2_end), rate(m_off3, m_off3_end)
off_around = (off2 + off3) / 2
# The same per QEMU CPU-second: touches in the phase over the CPU time QEMU was given.  Other
# load on the host takes CPU from QEMU and slows the wall-clock rates of neighbouring phases
# by different amounts; what the plugin costs shows up as CPU per touch, which that load
# does not change.  This is the figure the goal is checked on.
cpu_at = {}
for l in open(sys.argv[17]):
    p = l.split()
    if len(p) == 2:
        cpu_at[int(p[0])] = float(p[1])
def cpu_rate(a, b):
    n = sum(float(l.split()[2]) for l in lines[a:b] if l.startswith("WL-RATE"))
    c = (cpu_at.get(b, 0) - cpu_at.get(a, 0)) / hz
    return n / c if c > 0 else 0.0
c_off, c_full, c_samp = cpu_rate(m_off, m_full), cpu_rate(m_full, m_full_end), cpu_rate(m_s, m_s_end)
c_around = (cpu_rate(m_off2, m_off2_end) + cpu_rate(m_off3, m_off3_end)) / 2
recall, precision = scores(hot, cold, yg)
print("recall", recall)
print("precision", precision)
print("rounds", rounds)
print("hot_pages", len(hot))
print("cold_pages", len(cold))
print("young_pages", len(yg))
print("rate_off", round(off))
print("rate_full", round(full))
print("rate_off_before_sampled", round(off2))
print("rate_off_after_sampled", round(off3))
print("rate_sampled", round(samp))
print("slowdown_full_wall", round(off / full, 3) if full else 0)
print("slowdown_sampled_wall", round(off_around / samp, 3) if samp else 0)
print("rate_off_per_cpu_s", round(c_off))
print("rate_sampled_per_cpu_s", round(c_samp))
print("slowdown_full", round(c_off / c_full, 3) if c_full else 0)
print("slowdown_sampled", round(c_around / c_samp, 3) if c_samp else 0)
print("memtided_cpu_per_s", round((cpu1 - cpu0) / hz / max(0.001, (t1 - t0) / 1000), 4))
PY
while read -r k v; do e2e_fig "$k" "$v"; done <"$E2E_DIR/figs.txt"
ge() { python3 -c "import sys; sys.exit(0 if float('$1') >= float('$2') else 1)"; }
ge "${E2E_FIGS[recall]:-0}" 0.95 && ge "${E2E_FIGS[precision]:-0}" 0.95
e2e_check $? "recall ${E2E_FIGS[recall]:-?} and precision ${E2E_FIGS[precision]:-?} >= 0.95 (goal)"
# Only the goal is asserted.  slowdown_full is reported, not checked: on a loaded 2-core machine
# two "off" phases a minute apart have differed by 30% (CI: 5.3M and 7.0M touches/s), so a full-
# instrumentation phase can come out faster than an off one by chance.  Tests 2-3 show that the
# plugin did switch instrumentation on and off.
ge 1.3 "${E2E_FIGS[slowdown_sampled]:-99}"
e2e_speed_check $? "slowdown_sampled ${E2E_FIGS[slowdown_sampled]:-?} <= 1.3 (goal; full: ${E2E_FIGS[slowdown_full]:-?})"
exit $E2E_FAILED
