#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# trace_ept.sh: `memtide-trace ept` records a trace from a real TCG guest through memtide's
# ept plugin, and the policy lab replays it (memtide-sim).
#
# The e2e guest (tests/e2e/lib.sh, plain QEMU) runs memload hotpages: 32 MiB written page
# by page, round after round, and 64 MiB written once, with the guest-physical addresses of
# both from its own pagemap.  Recorded: 6 epochs of 500 ms with the plugin instrumenting
# all the time, then 4 epochs with one 200 ms sampling window each (as memtided samples).
# Checked: the trace is valid (memtide-trace info); in every epoch the write set holds the
# hot pages (>= 95%) and, after the first, few of the cold ones (<= 5%); the sampled
# recording sees the hot pages too (>= 90% per epoch); memtide-sim replays the trace with
# memtide's policy and reports its figures; memtide-trace refuses a table memtided-style
# claimed by another live process.  Takes about 40 s.
set -u
. "$(dirname "$0")/../e2e/lib.sh"
e2e_init trace_ept
echo "1..6"
skip_all() { for i in $(seq 1 6); do echo "ok $i # SKIP $*"; done; exit 0; }
command -v qemu-system-x86_64 >/dev/null || skip_all "qemu-system-x86_64 not installed"
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
[ -f "$PLUGIN" ] || skip_all "the ept plugin is not built"
e2e_build || skip_all "cannot build the e2e guest"
TABLE=$E2E_DIR/guest.ept
TRACE=$E2E_DIR/guest.mtt
e2e_boot 512 "memload hotpages 32 64 120" "memtide.agent=0" -plugin "$PLUGIN,table=$TABLE,ram=512M"
e2e_wait 'WL-PAGES-END' 90 >/dev/null || {
	for i in $(seq 1 6); do echo "not ok $i - the guest did not start its workload"; done
	exit 1
}

"$BUILD/bin/memtide-trace" ept --epoch-ms 500 --epochs 6 --name hotpages -o "$TRACE" "$TABLE" \
	>"$E2E_DIR/rec.json" 2>"$E2E_DIR/rec.err"
rc=$?
sed 's/^/# /' "$E2E_DIR/rec.json" "$E2E_DIR/rec.err"
"$BUILD/bin/memtide-trace" info "$TRACE" >"$E2E_DIR/info.json" 2>&1
[ $rc = 0 ] && grep -q '"epochs":6,' "$E2E_DIR/info.json" && grep -q '"source":"ept:hotpages"' "$E2E_DIR/info.json"
e2e_check $? "memtide-trace ept recorded 6 epochs, and the trace reads back (memtide-trace info)"

# per-epoch share of the hot pages written, of the cold pages touched, from the trace itself
# (decoded here from docs/trace-format.md, independently of sim/trace.c)
python3 - "$E2E_CONSOLE" "$TRACE" >"$E2E_DIR/shares.txt" <<'PY'
import struct, subprocess, sys
con, path = sys.argv[1], sys.argv[2]
hot, cold = set(), set()
for l in open(con, errors="replace"):
    p = l.split()
    if len(p) == 4 and p[0] == "WL-PAGES":
        s, n = int(p[2], 16) >> 12, int(p[3])
        (hot if p[1] == "hot" else cold).update(range(s, s + n))
raw = open(path, "rb").read()
assert raw[:8] == b"MTDTRACE"
body = subprocess.run(["zstd", "-dc"], input=raw[16:], capture_output=True).stdout
pos = 0
def v():
    global pos
    x = sh = 0
    while True:
        b = body[pos]; pos += 1
        x |= (b & 0x7f) << sh; sh += 7
        if not b & 0x80:
            return x
def runs():
    out, end = [], 0
    for _ in range(v()):
        s = end + v(); n = v() + 1
        out.append((s, n)); end = s + n
    return out
assert v() == 4096
ranges, at = [], 0
for _ in range(v()):
    gap, n = v(), v(); at += gap; ranges.append((at, n)); at += n
src = body[pos:pos + v()]; pos += len(src)
def gpa_page(idx):  # page index -> guest-physical page number
    for start, n in ranges:
        if idx < n:
            return start + idx
        idx -= n
while body[pos] == 0x45:
    pos += 1; v()
    rd, wr, fr = runs(), runs(), runs()
    w = {gpa_page(s + i) for s, n in wr for i in range(n)}
    r = {gpa_page(s + i) for s, n in rd for i in range(n)}
    print(round(len(hot & w) / len(hot), 4), round(len(cold & (w | r)) / len(cold), 4))
PY
cat "$E2E_DIR/shares.txt" | sed 's/^/# hot written, cold touched: /'
awk 'NR == 1 { if ($1 < 0.95) bad = 1; next } { if ($1 < 0.95 || $2 > 0.05) bad = 1 }
     END { exit (NR == 6 && !bad) ? 0 : 1 }' "$E2E_DIR/shares.txt"
e2e_check $? "every epoch holds >= 95% of the hot pages as writes, and after the first <= 5% of the cold ones"

"$BUILD/bin/memtide-trace" ept --epoch-ms 500 --epochs 4 --window 200 -o "$E2E_DIR/sampled.mtt" \
	"$TABLE" >"$E2E_DIR/rec2.json" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '"window_ms":200' "$E2E_DIR/rec2.json" &&
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['page_writes'] >= 0.9 * 4 * 8192 else 1)" "$E2E_DIR/rec2.json"
e2e_check $? "sampled recording (one 200 ms window per epoch) still sees the hot set: $(grep -o '"page_writes":[0-9]*' "$E2E_DIR/rec2.json") of >= 29491"

"$BUILD/bin/memtide-sim" run --policy memtide --trace "$E2E_DIR/guest.mtt" >"$E2E_DIR/sim.json" 2>&1
sed 's/^/# /' "$E2E_DIR/sim.json"
python3 - "$E2E_DIR/sim.json" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert d["name"] == "sim_run" and d["policy"] == "memtide" and d["ram_pages"] == 131072, d
assert 0 <= d["saved"] <= 1 and d["peak_resident_pages"] > 0, d
PY
e2e_check $? "memtide-sim replays the recorded guest with memtide's policy"

# one controller at a time: a claim by a live process (pid 1 here) is refused, and the
# table is left as it was
python3 - "$TABLE" <<'PY'
import mmap, struct, sys
f = open(sys.argv[1], "r+b"); m = mmap.mmap(f.fileno(), 4096)
# controller_pid follows magic(8) version(4) header_bytes(4) span, file_bytes, 4 offsets (6x8),
# qemu_pid(4) flags(4) created_ms(8) ram_bytes(8) lowmem_bytes(8)
off = 8 + 4 + 4 + 6 * 8 + 4 + 4 + 8 + 8 + 8
m[off:off + 4] = struct.pack("<i", 1)
PY
"$BUILD/bin/memtide-trace" ept --epochs 1 --epoch-ms 100 -o "$E2E_DIR/x.mtt" "$TABLE" >/dev/null 2>"$E2E_DIR/busy.err"
[ $? = 1 ] && grep -q "driven by another process (pid 1)" "$E2E_DIR/busy.err" && [ ! -e "$E2E_DIR/x.mtt" ]
e2e_check $? "a table another live process drives is refused: $(cat "$E2E_DIR/busy.err")"

# the plugin, back at mode off when the recorder left (it gives its claim up)
python3 - "$TABLE" <<'PY'
import mmap, struct, sys
f = open(sys.argv[1], "r+b"); m = mmap.mmap(f.fileno(), 4096)
off = 8 + 4 + 4 + 6 * 8 + 4 + 4 + 8 + 8 + 8
m[off:off + 4] = struct.pack("<i", 0)
PY
"$BUILD/bin/memtidectl" --json ept-status "$TABLE" | grep -q '"mode":0,'
e2e_check $? "instrumentation is off once the recorder has left"
exit $E2E_FAILED
