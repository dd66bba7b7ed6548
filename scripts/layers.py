#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# layers.py: memtided's layering and the guest agent's, checked from the code itself.
#
# host/ is laid out as the data path (host/README.md): one folder per stage, and every arrow
# between two files runs one way, down:
#
#   host/memtided.c (main)  -> any folder
#   front/                  -> daemon/ and below
#   daemon/                 -> access/ decide/ act/ vsock/ and below
#   access/ vsock/ -> act/ -> decide/  (one level, ordered within: SIBLINGS below)
#   base/                   -> nothing in host/
#   every folder            -> vmm/ (libvmm) and proto/
#
# An arrow is either an #include "..." (read from the sources) or a call: an object that
# refers to a symbol another object defines (nm over $BUILD/obj, when the objects are there:
# `make lint` builds them first).  Calls catch what includes cannot: a function declared in
# a low header (base/mtd.h) but defined in a higher folder.
#
# It fails (exit 1) on:
#   - an arrow that runs up, or sideways between siblings other than those SIBLINGS allows;
#   - an arrow from host/ into sim/ or guest-agent/, or from the agent into host/;
#   - an include of a host/ header that does not name its folder ("act/qmp.h", not "qmp.h"),
#     or an include that resolves to no file;
#   - a circle between files (host/ and guest-agent/; a .c and its .h are one file here),
#     over includes and calls together.
# It prints what it found either way: per folder its files and arrows, then every fault.
#
# Usage: scripts/layers.py [--build DIR] [--root TREE]
#   DIR: where the objects are (default $BUILD, else build), relative to TREE;
#   TREE: the git work tree to check (default: the one this script is in; the self-test in
#   tests/integration/layers.sh points it at a scratch tree).
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The folders of host/ from top to bottom, and what each may use besides itself.
BELOW_DAEMON = {"access", "decide", "act", "vsock", "base"}
ALLOWED = {
    "main": {"front", "daemon"} | BELOW_DAEMON,
    "front": {"daemon"} | BELOW_DAEMON,
    "daemon": set(BELOW_DAEMON),
    "access": {"base"},
    "decide": {"base"},
    "act": {"base"},
    "vsock": {"base"},
    "base": set(),
    "agent": set(),
}
# Siblings: access/, decide/, act/ and vsock/ sit on one level, in an order of their own:
# decide/ at its bottom (the rules, and the tick every stage fills in), act/ above it (an
# actuator carries out what was decided), access/ and vsock/ on top (the inputs and the
# vsock device read the VM's peers, which act/ holds: the balloon, the agent link, the RAM
# layout).  A sibling may use only those listed for it here, so no two ever use each other.
SIBLINGS = {
    "access": {"act", "decide"},
    "act": {"decide"},
    "vsock": {"act"},
}
# Outside host/ and guest-agent/: what a folder of ours may use there.
OUTSIDE = {"vmm", "proto"}
ORDER = ["main", "front", "daemon", "access", "decide", "act", "vsock", "base", "agent"]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path):
    """The layer a tracked path belongs to, or the outside component it is in."""
    parts = path.split("/")
    if parts[0] == "host":
        return "main" if len(parts) == 2 else parts[1]
    if parts[0] == "guest-agent":
        return "agent"
    return parts[0]  # vmm, proto, sim, tests, ...


def node_of(path):
    """One file of the graph: a .c and its .h are one."""
    return os.path.splitext(path)[0]


def sources():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                          "host", "guest-agent"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(p for p in out if p.endswith((".c", ".h")) and
                      os.path.isfile(os.path.join(ROOT, p))))


def resolve(src, inc):
    """Where #include "inc" in src leads, as a path from ROOT (None: nowhere)."""
    here = os.path.dirname(src)
    cands = [os.path.join(here, inc)]
    if src.startswith("host/"):
        cands.append(os.path.join("host", inc))
    cands += [os.path.join(d, inc) for d in ("vmm/include", "proto", "guest-agent", "sim")]
    for c in cands:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(ROOT, c)):
            return c
    return None


def may_use(a, b):
    if a == b or b in OUTSIDE:
        return True
    return b in ALLOWED.get(a, set()) or b in SIBLINGS.get(a, set())


def include_arrows(files, faults):
    arrows = []  # (from path, to path, why)
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                to = resolve(f, inc)
                where = "%s:%d" % (f, n)
                if to is None:
                    faults.append('%s: #include "%s" leads to no file' % (where, inc))
                    continue
                if f.startswith("host/") and to.startswith("host/") and \
                        "host/" + inc != to and not f.startswith("host/access/qemu_plugin/"):
                    faults.append('%s: #include "%s" should name its folder: "%s"'
                                  % (where, inc, to[len("host/"):]))
                arrows.append((f, to, '%s includes "%s"' % (where, inc)))
    return arrows


def nm(obj, *flags):
    r = subprocess.run(["nm", "-P", *flags, obj], capture_output=True, text=True)
    return r.stdout.splitlines() if r.returncode == 0 else []


def call_arrows(files, build):
    """(from source, to source, why) for every symbol one object uses and another defines."""
    objs = {}
    for f in files:
        if f.endswith(".c"):
            o = os.path.join(build, "obj", os.path.splitext(f)[0] + ".o")
            if os.path.isfile(o):
                objs[f] = o
    if not objs:
        return None
    defined = {}
    for f, o in objs.items():
        for line in nm(o, "-g", "--defined-only"):
            defined.setdefault(line.split()[0], f)
    arrows = []
    for f, o in objs.items():
        for line in nm(o, "-u"):
            sym = line.split()[0]
            to = defined.get(sym)
            if to and to != f:
                arrows.append((f, to, "%s calls %s (%s)" % (f, sym, to)))
    return arrows


def circles(edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    global ROOT
    build = os.environ.get("BUILD", "build")
    args = sys.argv[1:]
    while len(args) >= 2 and args[0] in ("--build", "--root"):
        if args[0] == "--build":
            build = args[1]
        else:
            ROOT = os.path.abspath(args[1])
        args = args[2:]
    if args:
        print("usage: scripts/layers.py [--build DIR] [--root TREE]", file=sys.stderr)
        return 2
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)

    files = sources()
    faults = []
    arrows = include_arrows(files, faults)
    calls = call_arrows(files, build)
    if calls is None:
        print("layers: no objects under %s/obj: calls not checked (make all first)" % build)
        calls = []
    arrows += calls

    ups, count = [], {}
    for a, b, why in arrows:
        la, lb = layer_of(a), layer_of(b)
        if la == lb:
            continue
        count[(la, lb)] = count.get((la, lb), 0) + 1
        if not may_use(la, lb):
            ups.append("up: %s -> %s: %s" % (la, lb, why))

    # Circles: between nodes (a .c with its .h), over includes and calls together.
    edges = {}
    for a, b, why in arrows:
        na, nb = node_of(a), node_of(b)
        if na != nb and not b.startswith(("vmm/", "proto/", "sim/")):
            edges.setdefault((na, nb), why)
    rings = circles(edges.keys())

    per = {}
    for f in files:
        per.setdefault(layer_of(f), set()).add(node_of(f))
    print("layers: %d files in %d folders; arrows between folders:" % (len(files), len(per)))
    for la in ORDER:
        if la not in per:
            continue
        uses = ", ".join("%s %d" % (lb, count[(la, lb)]) for lb in ORDER + sorted(OUTSIDE)
                         if (la, lb) in count)
        print("  %-7s %2d files  -> %s" % (la, len(per[la]), uses or "nothing of ours"))
    for u in sorted(set(ups)):
        print(u)
    for r in rings:
        print("circle: " + " <-> ".join(r))
        for a in r:
            for b in r:
                if (a, b) in edges:
                    print("    %s -> %s: %s" % (a, b, edges[(a, b)]))
    for f in faults:
        print(f)
    ups = set(ups)
    print("layers: %d arrows up, %d circles, %d bad includes"
          % (len(ups), len(rings), len(faults)))
    return 1 if ups or rings or faults else 0


if __name__ == "__main__":
    sys.exit(main())
