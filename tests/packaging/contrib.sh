#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# contrib.sh: the Prometheus alert rules and the Grafana dashboard in contrib/ are valid and
# speak of series memtided really serves (`make check-packaging`, run by CI: it needs
# promtool, from Debian's prometheus package).
#
#   1 promtool check rules: the rules parse and their expressions are valid PromQL
#   2 promtool test rules: each alert fires on the series that should fire it, after its
#     `for`, with the annotations it promises, and not on healthy series
#   3 promtool check metrics: a /metrics rendering (test_mtd_metrics writes one with every
#     kind of VM) passes Prometheus' own linter for names, units and counters
#   4 the dashboard is valid JSON, and every metric its panels and variables query is a
#     family of that rendering; so is every metric the alert rules use
set -u
BUILD=${BUILD:-build}
echo "1..4"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
if ! command -v promtool >/dev/null; then
	for i in 1 2 3 4; do echo "ok $i # SKIP no promtool (scripts/deps.sh packaging installs it)"; done
	exit 0
fi
dir=$(mktemp -d /tmp/memtide-contrib.XXXXXX)
trap 'rm -rf "$dir"' EXIT
rules=contrib/prometheus/memtide-alerts.yml

promtool check rules "$rules" >"$dir/rules.log" 2>&1
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/rules.log"
check $rc "promtool check rules $rules"

(cd contrib/prometheus && promtool test rules memtide-alerts.test.yml) >"$dir/test.log" 2>&1
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/test.log"
check $rc "promtool test rules: the alerts fire when they should, with their annotations"

METRICS_SAMPLE_OUT=$dir/metrics.prom "$BUILD/tests/unit/test_mtd_metrics" >"$dir/unit.log" 2>&1 &&
	promtool check metrics <"$dir/metrics.prom" >"$dir/lint.log" 2>&1
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/unit.log" "$dir/lint.log"
check $rc "promtool check metrics: /metrics follows Prometheus' naming rules ($(grep -c '^# TYPE' "$dir/metrics.prom" 2>/dev/null) families)"

python3 - "$dir/metrics.prom" contrib/grafana/memtide-dashboard.json "$rules" <<'PY'
import json, re, sys
families = {l.split()[2] for l in open(sys.argv[1]) if l.startswith('# TYPE ')}
dash = json.load(open(sys.argv[2]))
exprs = [t['expr'] for p in dash['panels'] for t in p.get('targets', [])]
exprs += [v['query'] for v in dash['templating']['list']]
exprs += re.findall(r'expr:\s*(.+)', open(sys.argv[3]).read())
used = set()
for e in exprs:
    used |= set(re.findall(r'\bmemtide_[a-z0-9_]+', e))
missing = sorted(used - families)
for m in missing:
    print('# not served by memtided:', m)
print('# %d metrics used by the dashboard and the rules, all served' % len(used) if not missing else '')
sys.exit(1 if missing or not used else 0)
PY
check $? "the dashboard is valid JSON and it and the rules use only metrics memtided serves"
exit $failed
