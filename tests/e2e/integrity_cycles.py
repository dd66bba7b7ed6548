#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""integrity_cycles.py: the operator's side of scenario 4 (data integrity through memtided's cycles).

Usage: integrity_cycles.py MEMTIDECTL SOCKET VM CONSOLE CYCLES LOW_MIB

memtided runs the guest; this script only does what an operator does, through memtidectl:
  1. `policy set VM max=LOW`: memtided cuts the balloon to LOW at once and first asks the
     agent to reclaim the cut (anon allowed, with compaction); wait until the balloon's
     actual size (memtidectl vm show --json) is within 8 MiB of LOW, or 40 s (reported, not
     hidden);
  2. `policy set VM max=0` (the cap lifted): nothing is asked of memtided; its own rules
     (guest pressure, the working set above the target) must give memory back: wait until
     the actual size is at least LOW + 64 MiB (60 s);
  3. wait for the guest workload (memload integrity) to begin a verify pass and finish it,
     so every page is checked after every cycle.
Prints one JSON object: per cycle the balloon's lowest and deflated size, the pass that
checked it, its bad pages and the guest's pswpout.  Exit 1 on a timeout or a memtidectl
failure.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console import Console  # noqa: E402  (whole lines only: see console.py)

MiB = 1 << 20


class Ctl:
    def __init__(self, exe, sock, vm):
        self.exe, self.sock, self.vm = exe, sock, vm

    def run(self, *args):
        r = subprocess.run([self.exe, "--socket", self.sock] + list(args),
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("memtidectl %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                                r.stderr.strip()))
        return r.stdout

    def cap(self, mib):
        self.run("policy", "set", self.vm, "max=%dM" % mib if mib else "max=0")

    def actual_mib(self):
        vm = json.loads(self.run("--json", "vm", "show", self.vm))
        vm = vm.get("vm", vm)
        return vm["balloon_actual_bytes"] // MiB


def wait_actual(ctl, done, timeout):
    """Poll the balloon through memtided until done(actual); (actual, lowest, highest, ok)."""
    end = time.monotonic() + timeout
    a = ctl.actual_mib()
    low = high = a
    while not done(a) and time.monotonic() < end:
        time.sleep(0.25)
        a = ctl.actual_mib()
        low, high = min(low, a), max(high, a)
    return a, low, high, done(a)


def main():
    exe, sock, vm, console_path = sys.argv[1:5]
    cycles, low_mib = int(sys.argv[5]), int(sys.argv[6])
    ctl = Ctl(exe, sock, vm)
    con = Console(console_path)
    con.wait(r"WL-FILLED", 180)
    out = {"cycles": []}
    for c in range(cycles):
        t0 = time.monotonic()
        ctl.cap(low_mib)
        _, lowest, _, reached = wait_actual(ctl, lambda a: a <= low_mib + 8, 40)
        ctl.cap(0)
        back, _, highest, gave = wait_actual(ctl, lambda a: a >= low_mib + 64, 60)
        if not gave:
            raise RuntimeError("cycle %d: memtided gave nothing back within 60 s "
                               "(balloon at %d MiB)" % (c, back))
        # Every page is checked after this cycle: a pass that begins from now on (a pass
        # already running began before the cycle ended and does not count).
        con.skip()
        n = int(con.wait(r"WL-PASS-BEGIN (\d+)", 120)[0].group(1))
        m, _ = con.wait(r"WL-PASS %d bad=(\d+) pages=(\d+) pswpout=(\d+)" % n, 180)
        out["cycles"].append({
            "cycle": c, "lowest_mib": lowest, "reached_low": reached,
            "deflated_mib": highest, "pass": n, "bad": int(m.group(1)),
            "pages": int(m.group(2)), "pswpout": int(m.group(3)),
            "seconds": round(time.monotonic() - t0, 1)})
        print("cycle %d: balloon down to %d MiB%s, back up to %d MiB, pass %d: %d bad of %d, "
              "pswpout %s" % (c, lowest, "" if reached else " (cap not reached)", highest, n,
                              int(m.group(1)), int(m.group(2)), m.group(3)),
              file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        print("integrity_cycles: %s" % e, file=sys.stderr)
        sys.exit(1)
