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
#   5 every alert has a `for` and a runbook_url whose anchor is a section of
#     docs/operations.md, and the rule tests cover every alert, firing and quiet
#   6 the dashboard has panels for every host swap and host-side eviction (pageout) family
set -u
BUILD=${BUILD:-build}
echo "1..6"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
if ! command -v promtool >/dev/null; then
	for i in 1 2 3 4 5 6; do echo "ok $i # SKIP no promtool (scripts/deps.sh packaging installs it)"; done
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
families = set()
for l in open(sys.argv[1]):
    if l.startswith('# TYPE '):
        name, kind = l.split()[2:4]
        families.add(name)
        if kind in ('summary', 'histogram'):  # their _sum and _count series
            families |= {name + '_sum', name + '_count'}
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

python3 - "$rules" contrib/prometheus/memtide-alerts.test.yml docs/operations.md <<'PY'
import re, sys
import yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))['groups'] for r in g['rules'] if 'alert' in r]
tests = yaml.safe_load(open(sys.argv[2]))['tests']
# GitHub's anchors: the heading lowercased, punctuation other than - and _ dropped, spaces
# turned into hyphens.
slugs = set()
for line in open(sys.argv[3]):
    m = re.match(r'#+ (.*)', line)
    if m:
        slugs.add(re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-'))
fired, quiet = set(), set()
for t in tests:
    for a in t.get('alert_rule_test', []):
        (fired if a.get('exp_alerts') else quiet).add(a['alertname'])
bad = []
for r in rules:
    a = r['alert']
    url = r.get('annotations', {}).get('runbook_url', '')
    if 'for' not in r:
        bad.append(a + ': no for')
    if not url.startswith('https://memtide.org/docs/operations.md#') or url.split('#', 1)[1] not in slugs:
        bad.append(a + ': runbook_url %r is no section of docs/operations.md' % url)
    if a not in fired or a not in quiet:
        bad.append(a + ': the rule tests never see it %s' % ('fire' if a not in fired else 'quiet'))
for b in bad:
    print('# ' + b)
print('# %d alerts' % len(rules))
sys.exit(1 if bad or not rules else 0)
PY
check $? "every alert has a for, a runbook_url to its section of docs/operations.md, and rule tests that see it fire and stay quiet"

python3 - "$dir/metrics.prom" contrib/grafana/memtide-dashboard.json <<'PY'
import json, re, sys
families = {l.split()[2] for l in open(sys.argv[1]) if l.startswith('# TYPE ')}
dash = json.load(open(sys.argv[2]))
used = set()
for p in dash['panels']:
    for t in p.get('targets', []):
        used |= set(re.findall(r'\bmemtide_[a-z0-9_]+', t['expr']))
want = {f for f in families if re.match(r'memtide_(host_swap|vm_pageout)_', f)}
missing = sorted(want - used)
for m in missing:
    print('# no panel shows', m)
sys.exit(1 if missing or not want else 0)
PY
check $? "the dashboard shows every host swap and host-side eviction family"
exit $failed
