#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# demo_speed.py: the demo's "workload slowdown" line, from the guest's console
# (scripts/demo.sh; tests/integration/demo_speed.sh feeds it consoles of known shape).
#
#   demo_speed.py CONSOLE BASE_FROM BASE_TO RUN_FROM [--json]
#
# CONSOLE holds the workload's "WL-RATE <second> <pages/s> ..." lines; seconds BASE_FROM to
# BASE_TO are the baseline (no memtided), RUN_FROM onwards the run with memtided.  Under TCG
# (QEMU's software CPU) one loop's rate jumps between levels 2-10x apart for 5-30 s at a time
# with nothing else changing (the software TLB), so a median picks a level by lot: one
# fresh-clone demo printed a slowdown of -443.6% from medians.  As scenario 2 does, the
# figure compares 90th percentiles, the rate the hot set still reaches in each phase
# (docs/e2e.md, "Speed checks"), and a ratio within 10% of the baseline's, or above it, is
# "none measurable": the line never shows a negative slowdown nor one over 100%.
# Prints two lines (the figure, then why TCG moves), or with --json one JSON object.
import json
import sys


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, (len(xs) * 9) // 10)]


def rates(path, lo, hi):
    out = []
    for line in open(path, errors='replace'):
        f = line.replace('\r', '').split()
        if len(f) >= 3 and f[0] == 'WL-RATE':
            try:
                s, r = float(f[1]), float(f[2])
            except ValueError:
                continue
            if lo <= s <= hi:
                out.append(r)
    return out


def human(r):
    for unit, div in (('M', 1e6), ('K', 1e3)):
        if r >= div:
            return '%.1f%s' % (r / div, unit)
    return '%.0f' % r


def measure(console, a, b, c):
    """The figures, from the console's seconds a..b (baseline) and c onwards."""
    base, run = rates(console, a, b), rates(console, c, float('inf'))
    fig = {'baseline_p90': 0, 'memtided_p90': 0, 'p90_ratio': None, 'slowdown_percent': None,
           'baseline_seconds': len(base), 'memtided_seconds': len(run)}
    if len(base) >= 3 and len(run) >= 3 and p90(base) > 0:
        bp, rp = p90(base), p90(run)
        ratio = rp / bp
        fig.update(baseline_p90=round(bp), memtided_p90=round(rp), p90_ratio=round(ratio, 3),
                   slowdown_percent=round(100 * (1 - ratio), 1) if ratio < 0.9 else 0.0)
    return fig


def text(fig):
    """The demo's two lines for the figures."""
    if fig['p90_ratio'] is None:
        line = 'not measured (%d seconds of baseline, %d with memtided: too few)' % (
            fig['baseline_seconds'], fig['memtided_seconds'])
    else:
        what = '90th percentile %s pages/s with memtided, %s before it' % (
            human(fig['memtided_p90']), human(fig['baseline_p90']))
        if fig['p90_ratio'] >= 0.9:
            line = 'none measurable (%s)' % what
        else:
            line = '%.1f%% (%s)' % (fig['slowdown_percent'], what)
    return ('workload slowdown:             ' + line + '\n'
            '                               (TCG, QEMU\'s software CPU, runs one loop at speeds '
            'that jump 2-10x for seconds at a time on their own: the 90th percentile is the rate '
            'the hot set still reaches; docs/e2e.md, "Speed checks")')


def main():
    args = [a for a in sys.argv[1:] if a != '--json']
    if len(args) != 4:
        sys.exit('usage: demo_speed.py CONSOLE BASE_FROM BASE_TO RUN_FROM [--json]')
    fig = measure(args[0], float(args[1]), float(args[2]), float(args[3]))
    print(json.dumps(fig) if '--json' in sys.argv else text(fig))


if __name__ == '__main__':
    main()
