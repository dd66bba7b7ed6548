#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""per_page_rules.py - would a page's own history beat the best single idle threshold?

Why: memtide, at its defaults, is to save more than the best idle-age threshold tuned in
hindsight on every real-program trace, using what libvmm knows per page.  Before
building that into libvmm, this asks the lab whether the signal is there at all.  It tunes
both sides in hindsight, exact to the page (sim/policy_idle.c, no generations, no
controller):
  - the single threshold on a fine grid (every 5 s up to 15 min: finer than sim_defaults'
    16 ages, so a rule cannot win by falling between two of them);
  - the per-page rules: a page seen reused since it was allocated goes after the threshold
    x idle-reused-x (under 1: reused pages go sooner; over 1: they are kept longer, as
    MGLRU's tiers keep pages used more often), and not while it has been idle for less than
    its longest idle gap x idle-gap-x (the page's own reuse distance), over a grid of both
    and of the threshold.
If any rule setting saves more than the best threshold at a refault rate within the budget,
the page's history carries information the threshold does not; the margin says how much.

Prints one JSON line per trace and budget ("name":"per_page_rules").  Runs the traces
two at a time; about a minute for sim/traces.

Usage: sim/tools/per_page_rules.py [--sim build/bin/memtide-sim] [--traces sim/traces]
                                   [--budget B ...]   (0.002 0.01)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

FINE_AGES_MS = list(range(5000, 900001, 5000))
RULE_AGES_MS = [5000, 10000, 15000, 20000, 30000, 45000, 60000, 90000, 120000, 180000,
                300000, 450000, 600000, 900000]
REUSED_X = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
GAP_X = [0.0, 1.0, 2.0, 4.0]


def run(sim, trace, age, reused_x, gap_x):
    cmd = [sim, "run", "--policy", "idle", "--trace", trace, "--idle-age-ms", str(age),
           "--idle-reused-x", str(reused_x), "--idle-gap-x", str(gap_x)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    return {"age_ms": age, "reused_x": reused_x, "gap_x": gap_x, "saved": j["saved"],
            "rate": j["refault_rate_per_min"]}


def best(points, budget):
    ok = [p for p in points if p["rate"] <= budget]
    return max(ok, key=lambda p: (p["saved"], -p["rate"])) if ok else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default="build/bin/memtide-sim")
    ap.add_argument("--traces", default="sim/traces")
    ap.add_argument("--budget", type=float, nargs="+", default=[0.002, 0.01])
    a = ap.parse_args()
    traces = sorted(glob.glob(os.path.join(a.traces, "*.mtt")))
    if not traces:
        sys.exit(f"per_page_rules.py: no *.mtt trace in {a.traces}")
    if not os.access(a.sim, os.X_OK):
        sys.exit(f"per_page_rules.py: {a.sim} is not built (make all)")
    rules = [(r, g) for r in REUSED_X for g in GAP_X if (r, g) != (1.0, 0.0)]
    for tr in traces:
        jobs = [(a.sim, tr, age, 1.0, 0.0) for age in FINE_AGES_MS]
        jobs += [(a.sim, tr, age, r, g) for (r, g) in rules for age in RULE_AGES_MS]
        with ThreadPoolExecutor(2) as ex:
            pts = list(ex.map(lambda j: run(*j), jobs))
        single = [p for p in pts if (p["reused_x"], p["gap_x"]) == (1.0, 0.0)]
        ruled = [p for p in pts if (p["reused_x"], p["gap_x"]) != (1.0, 0.0)]
        name = os.path.splitext(os.path.basename(tr))[0]
        for b in a.budget:
            s, r = best(single, b), best(ruled, b)
            line = {"name": "per_page_rules", "trace": "lackey:" + name, "budget": b,
                    "idle_saved": round(s["saved"], 4) if s else None,
                    "idle_age_ms": s["age_ms"] if s else None,
                    "rule_saved": round(r["saved"], 4) if r else None,
                    "rule": {k: r[k] for k in ("age_ms", "reused_x", "gap_x")} if r else None,
                    "rule_rate": round(r["rate"], 5) if r else None,
                    "gain_pts": round(100 * (r["saved"] - s["saved"]), 2) if r and s else None,
                    "settings": len(pts)}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
