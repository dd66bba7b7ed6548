#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""zipf_online_bound.py - the most memory ANY online policy can save on memtide-sim's zipf trace.

Why: sim_pareto's goal asks memtide for 85% of the oracle's saving on every trace.  The
zipf trace (sim/gen.c) is an independent reference model: each 1 s epoch draws RAM/5 page
accesses from a fixed Zipf(1.3) popularity over the 75% of RAM that is live.  Under such a
model a page's past says nothing about when it is next used beyond its popularity, so the
best policy that does not see the future keeps a fixed set of the most popular pages (A0,
Aho, Denning and Ullman 1971) and lets every other page go right after each use: each use
of such a page is a refault.  This script finds the largest saving A0 reaches within a
refault budget (share of resident pages per minute), from the generator's own parameters.

Usage: sim/tools/zipf_online_bound.py [RAM_PAGES] [BUDGET...]   (32768; 0.002 0.01)
`make bench` prints its lines after memtide-sim's.
"""
import sys


def bound(ram_pages, budget, s=1.3, epoch_s=1.0):
    live = ram_pages * 3 // 4
    draws = ram_pages // 5
    w = [r ** -s for r in range(1, live + 1)]
    h = sum(w)
    # probability that page of rank r is used in an epoch
    p = [1.0 - (1.0 - x / h) ** draws for x in w]
    tail = [0.0] * (live + 1)
    for r in range(live - 1, -1, -1):
        tail[r] = tail[r + 1] + p[r]
    best = 0.0
    for k in range(live, -1, -1):  # keep ranks [0, k)
        refaults = tail[k]  # per epoch: uses of pages not kept
        resident = k + refaults  # a refaulted page stays for its epoch
        if refaults * 60.0 / epoch_s > budget * resident:
            break
        best = 1.0 - resident / ram_pages
    return best


if __name__ == "__main__":
    ram = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
    budgets = [float(b) for b in sys.argv[2:]] or [0.002, 0.01]
    for b in budgets:
        print(f'{{"name":"zipf_online_bound","budget":{b},"saved":{bound(ram, b):.4f}}}')
