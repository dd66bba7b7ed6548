#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ept_live.sh: the walker figures on live emulated-EPT tables (`make bench`, from
# scripts/bench.sh; JSON lines on stdout, "name":"ept_live_walk").
#
# For each guest size (512 MiB and 2 GiB: the table's size) and hot-set shape, a real TCG
# guest boots with memtide's plugin and runs memload hotpages: "clustered" writes 16 MiB
# page by page (4096 pages, physically contiguous in 2 MiB pieces: the guest backs them
# with transparent huge pages), "scattered" writes every 16th page of 256 MiB (the same
# 4096 pages, spread over 128 leaf tables).  The guest kernel's own pages come on top, as
# on any live guest.  memtide-trace ept records 16 epochs of 1 s with one 200 ms sampling
# window each (memtided's default window), walking the live table to harvest each epoch
# (its plain walk: entries and time per epoch, measured on the live table itself).
# walk-bench then replays the recorded epochs into four copies of the table and walks them
# with the bloom filter, the non-leaf accessed bits, both, or neither (the epochs after
# the first 8, which warm the filter), the comparison one live table cannot give.
# One output line per guest merges the two.  About 2 minutes.  Needs QEMU and the guest
# image (tests/e2e/guest/build.sh); without them it prints nothing and says why on stderr.
set -u
BUILD=${BUILD:-build}
. "$(dirname "$0")/../tests/e2e/lib.sh"
e2e_init ept_live
E2E_JSON= # figures go to stdout, not to build/e2e
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
say() { echo "ept_live.sh: $*" >&2; }
command -v qemu-system-x86_64 >/dev/null || { say "no qemu-system-x86_64: skipped"; exit 0; }
[ -f "$PLUGIN" ] && [ -x "$BUILD/bin/walk-bench" ] || { say "not built: skipped"; exit 0; }
e2e_build >/dev/null 2>&1 || { say "cannot build the guest image: skipped"; exit 0; }
rc=0

# one_guest MIB SHAPE MEMLOAD-ARGS...
one_guest() {
	local mib=$1 shape=$2
	shift 2
	local table=$E2E_DIR/$shape-$mib.ept trace=$E2E_DIR/$shape-$mib.mtt
	e2e_boot "$mib" "memload hotpages $*" "memtide.agent=0" -plugin "$PLUGIN,table=$table,ram=${mib}M"
	if ! e2e_wait 'WL-PAGES-END' 120 >/dev/null; then
		say "$shape $mib MiB: the guest did not start its workload"
		rc=1
		return
	fi
	"$BUILD/bin/memtide-trace" ept --epoch-ms 1000 --epochs 16 --window 200 --name "$shape" \
		-o "$trace" "$table" >"$E2E_DIR/rec.json" 2>"$E2E_DIR/rec.err" &&
		"$BUILD/bin/walk-bench" --label "$shape" --trace "$trace" >"$E2E_DIR/walk.json" \
			2>"$E2E_DIR/walk.err" ||
		{
			say "$shape $mib MiB: $(cat "$E2E_DIR/rec.err" "$E2E_DIR/walk.err")"
			rc=1
		}
	kill "$E2E_QEMU_PID" 2>/dev/null
	wait "$E2E_QEMU_PID" 2>/dev/null
	[ -s "$E2E_DIR/walk.json" ] || return
	python3 - "$E2E_DIR/rec.json" "$E2E_DIR/walk.json" "$mib" "$shape" <<'PY'
import json, sys
rec, walk = json.load(open(sys.argv[1])), json.loads(open(sys.argv[2]).read().splitlines()[-1])
out = {"name": "ept_live_walk", "guest_mib": int(sys.argv[3]), "shape": sys.argv[4],
       "window_ms": rec["window_ms"], "epochs": rec["epochs"],
       "live_plain_entries_per_epoch": rec["walk_entries_per_epoch"],
       "live_plain_walk_ms_per_epoch": rec["walk_ms_per_epoch"]}
for k, v in walk.items():
    if k not in ("name", "source", "shape", "ram_gib"):
        out[k] = v
print(json.dumps(out))
PY
	rm -f "$E2E_DIR/walk.json"
}

for mib in 512 2048; do
	one_guest "$mib" clustered 16 64 60
	one_guest "$mib" scattered 256 64 60 16
done
exit $rc
