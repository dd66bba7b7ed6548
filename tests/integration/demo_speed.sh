#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# demo_speed.sh: the demo's slowdown line (scripts/demo_speed.py) on consoles of known shape,
# written here as the workload writes them ("WL-RATE <second> <pages/s> ..."):
#   1 TCG's levels: a baseline mostly in the slow level and a run in the fast one, the shape
#     that made the demo print -443.6% from medians (the medians of these lines give under
#     -100% too): the line says "none measurable", not a negative figure
#   2 a real slowdown (the run at half the baseline's rate, levels and all): about 50%
#   3 too few seconds: "not measured"
#   4 200 consoles of random levels and lengths: the figure is never under 0% nor over 100%,
#     and the second line says why TCG moves
set -u
echo "1..4"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
dir=$(mktemp -d /tmp/memtide-it-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
S=scripts/demo_speed.py
# console FILE RATE...: one WL-RATE line a second from second 1, with the workload's tail.
console() {
	local f=$1 s=1
	shift
	: >"$f"
	for r in "$@"; do
		printf 'WL-RATE %d %s swpin=0 mig=0\r\n' "$s" "$r" >>"$f"
		s=$((s + 1))
	done
}

# 1: seconds 3-10 the baseline, from 11 the run.  Slow level ~9 K pages/s, fast ~47 M.
console "$dir/levels" 9000000 9100000 8700 9000 9400 8900000 8800 9200 9100 9050 \
	47000000 46000000 48000000 47500000 9000 46500000 47200000 46800000 47100000 46900000
old=$(awk '$1 == "WL-RATE" { if ($2 >= 3 && $2 <= 10) b[++nb] = $3; if ($2 >= 11) r[++nr] = $3 }
	function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
	END { printf "%.1f", 100 * (1 - med(r, nr) / med(b, nb)) }' "$dir/levels")
out=$(python3 "$S" "$dir/levels" 3 10 11)
echo "$out" | sed 's/^/# /'
awk -v o="$old" 'BEGIN { exit !(o < -100) }' && echo "$out" | head -1 | grep -q 'none measurable' &&
	! echo "$out" | grep -qE -- '-[0-9.]+%'
check $? "TCG's levels (medians would say $old%): '$(echo "$out" | head -1 | sed 's/  */ /g')'"

# 2: the same levels, the run at half the rate.
console "$dir/half" 9000000 9100000 9000000 8900000 9400000 8900000 8800 9200000 9100000 9050000 \
	4500000 4600000 4400000 4550000 4500 4520000 4480000 4510000 4490000 4530000
slow=$(python3 "$S" "$dir/half" 3 10 11 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["slowdown_percent"])')
line=$(python3 "$S" "$dir/half" 3 10 11); line=${line%%$'\n'*}
awk -v s="$slow" 'BEGIN { exit !(s >= 40 && s <= 60) }' && echo "$line" | grep -qE ' [0-9]+\.[0-9]% \(90th percentile'
check $? "a real halving: $slow% ('$(echo "$line" | sed 's/  */ /g')')"

console "$dir/short" 9000000 9100000 9000000 4500000
out=$(python3 "$S" "$dir/short" 3 10 11); grep -q "not measured" <<<"${out%%$'\n'*}"
check $? "too few seconds: not measured"

python3 - "$S" "$dir" <<'PY'
import importlib.util, random, sys
spec = importlib.util.spec_from_file_location('demo_speed', sys.argv[1])
ds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ds)
d = sys.argv[2]
random.seed(7)
bad = 0
for i in range(200):
    levels = [random.choice([8.7e3, 2.3e6, 3.7e6, 9e6, 47e6, 110e6]) for _ in range(4)]
    n = random.randint(14, 90)
    f = '%s/r%d' % (d, i)
    with open(f, 'w') as o:
        lvl = random.choice(levels)
        for s in range(1, n + 1):
            if random.random() < 0.15:
                lvl = random.choice(levels)
            o.write('WL-RATE %d %.0f swpin=0 mig=0\n' % (s, lvl * random.uniform(0.8, 1.2)))
    fig = ds.measure(f, 3, 10, 11)
    t = ds.text(fig)
    sp = fig['slowdown_percent']
    if sp is None or not (0 <= sp < 100) or '-' in t.split('\n')[0].split(':', 1)[1].split('(')[0] \
            or 'TCG' not in t:
        bad += 1
        print('# console %d: %r %r' % (i, fig, t))
sys.exit(1 if bad else 0)
PY
check $? "200 consoles of random TCG levels: every figure between 0% and 100%, and the line why TCG moves"
exit $failed
