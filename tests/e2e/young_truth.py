#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""young_truth.py: the ground truth scenarios 8 and 11 score memtided's young pages against.

memload hotpages prints, on the guest's console, where its hot and cold pages sit in
guest-physical memory ("WL-PAGES hot|cold <gpa hex> <pages>") and, every 5 s, how many of them
the guest kernel has moved since ("WL-MOVED <s> hot <pages> cold <pages>").  memtided's
young_dump_dir file lists the guest-physical runs in its youngest generations ("<gpa hex>
<pages>", after a "round N" line).

As a module: workload_pages(console) -> (hot, cold, moved), sets of guest page numbers and
the last (hot, cold) moved counts or None; young_pages(path) -> (pages, round);
scores(hot, cold, young) -> (recall, precision).
"""


def workload_pages(console):
    hot, cold, moved = set(), set(), None
    for line in open(console, errors="replace"):
        p = line.split()
        if len(p) == 4 and p[0] == "WL-PAGES":
            s, n = int(p[2], 16) >> 12, int(p[3])
            (hot if p[1] == "hot" else cold).update(range(s, s + n))
        elif len(p) == 6 and p[0] == "WL-MOVED":
            moved = (int(p[3]), int(p[5]))
    return hot, cold, moved


def young_pages(path):
    pages, rounds = set(), 0
    for line in open(path):
        p = line.split()
        if not p:
            continue
        if p[0] == "round":
            rounds = int(p[1])
        else:
            s, n = int(p[0], 16) >> 12, int(p[1])
            pages.update(range(s, s + n))
    return pages, rounds


def scores(hot, cold, young):
    """recall = |hot and young| / |hot|; precision = |hot and young| / |workload pages young|."""
    both = len(hot & young)
    return (round(both / max(1, len(hot)), 4),
            round(both / max(1, len((hot | cold) & young)), 4))
