#!/bin/bash
# 04_integrity.sh: scenario 4, no guest data is lost through reclaim and balloon cycles.
#
# A 768 MiB guest (zram swap inside it, 600 MiB) fills 448 MiB (most of its free RAM) with
# checksummed pages (memload integrity: exact content per page index and generation, plus an
# FNV checksum) and verifies every page in a loop, rewriting one page in eight after each pass
# so dirty pages keep going out to swap.  The host drives 20 cycles with memtided's two
# actuators, scripted (tests/e2e/integrity_host.py) so the cycles come fast and exactly as
# many as asked: an agent reclaim (anon allowed, with compaction) and the balloon down to
# 480 MiB (the reclaim and the balloon push the data out through zram: pswpout is checked),
# then the balloon back to 768 MiB.  After each
# cycle a verify pass begins and ends, so every page is checked after every cycle.
# memtided itself is not running here: its actuators are the same QMP `balloon` and agent
# `reclaim` messages; scenarios 2 and 6 show memtided issuing them.
# Asserts: 20 cycles done; the balloon reached its low target in most cycles (memory really
# left the guest); every verify pass after a cycle found 0 bad pages.
. "$(dirname "$0")/../lib.sh"
e2e_init 04_integrity
echo "1..3"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above)"
	exit 1
fi
CYCLES=${INTEGRITY_CYCLES:-20} LOW=${INTEGRITY_LOW:-480} FULL=768 DATA=448
e2e_boot $FULL "memload integrity $DATA 900" "memtide.zram_mib=600 transparent_hugepage=never"
t0=$(e2e_now_ms)
python3 tests/e2e/integrity_host.py "$E2E_QMP" "$E2E_AGENT" "$E2E_CONSOLE" $CYCLES $LOW $FULL \
	>"$E2E_DIR/result.json" 2>"$E2E_DIR/host.err"
rc=$?
sed 's/^/# /' "$E2E_DIR/host.err" | tail -25
e2e_fig seconds $((($(e2e_now_ms) - t0) / 1000))
if [ $rc != 0 ] || [ ! -s "$E2E_DIR/result.json" ]; then
	e2e_not_ok "the host script failed (rc $rc)"
	e2e_not_ok "balloon cycles: no result"
	e2e_not_ok "integrity: no result"
	exit 1
fi
read -r done reached bad pages reclaimed swapped < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
c = r["cycles"]
print(len(c), sum(x["reached_low"] for x in c), sum(x["bad"] for x in c),
      sum(x["pages"] for x in c), sum(x["reclaimed_mib"] for x in c),
      r.get("pswpout_last", 0) - r.get("pswpout_first", 0))' "$E2E_DIR/result.json")
e2e_fig cycles "$done"
e2e_fig cycles_reaching_low "$reached"
e2e_fig pages_verified "$pages"
e2e_fig bad_pages "$bad"
e2e_fig agent_reclaimed_mib_total "$reclaimed"
e2e_fig pswpout_pages "$swapped"
[ "$done" = "$CYCLES" ]
e2e_check $? "$done of $CYCLES reclaim + inflate + deflate cycles done"
[ "$reached" -ge $((CYCLES * 3 / 4)) ] && [ "$swapped" -gt $((DATA * 256)) ]
e2e_check $? "the balloon reached $LOW MiB in $reached of $done cycles (>= 3/4) and $swapped pages went out to swap (> the $DATA MiB of data)"
[ "$bad" = 0 ] && [ "$pages" -gt 0 ]
e2e_check $? "every page verified after every cycle: $bad bad of $pages checked"
