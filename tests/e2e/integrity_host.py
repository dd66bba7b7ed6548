#!/usr/bin/env python3
"""integrity_host.py: the host side of scenario 4 (data integrity through reclaim cycles).

Usage: integrity_host.py QMP AGENT CONSOLE CYCLES LOW_MIB FULL_MIB

Drives the guest through CYCLES cycles with memtided's two actuators, scripted so that the
cycles come fast and exactly as many as asked: (1) an agent `reclaim` (anon allowed, with
compaction, as memtided asks) of FULL-LOW MiB and the balloon target set to LOW MiB over QMP;
wait until the balloon reports it (or 30 s: reported, not hidden); (2) the balloon back to
FULL MiB; wait until it is there.  After each cycle it waits for the guest workload (memload
integrity) to begin a verify pass and finish it, so every page is checked after every cycle.
Prints one JSON object: per cycle the balloon's lowest actual, the reclaim reply, the pass
that checked it and its bad pages.  Exit 1 on a protocol surprise or a timeout.
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reclaim_host import Link  # noqa: E402  (the agent protocol's framing and handshake)

MiB = 1 << 20


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(30)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        json.loads(self.f.readline())  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        m = {"execute": name}
        if args:
            m["arguments"] = args
        self.f.write(json.dumps(m) + "\n")
        self.f.flush()
        while True:
            r = json.loads(self.f.readline())
            if "event" in r:
                continue
            if "error" in r:
                raise RuntimeError("%s: %s" % (name, r["error"]))
            return r["return"]

    def actual_mib(self):
        return self.cmd("query-balloon")["actual"] // MiB


class Console:
    """Follows the guest's console log for WL- lines."""

    def __init__(self, path):
        self.f = open(path, "rb")

    def skip(self):
        """Forget every line written so far: the next wait sees only new ones."""
        self.f.seek(0, os.SEEK_END)

    def wait(self, pattern, timeout):
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = self.f.readline()
            if not line:
                time.sleep(0.05)
                continue
            m = rx.search(line.decode(errors="replace"))
            if m:
                return m
        raise RuntimeError("no console line matching %r within %d s" % (pattern, timeout))


def wait_balloon(q, want, above, timeout):
    end = time.monotonic() + timeout
    low = q.actual_mib()
    while time.monotonic() < end:
        a = q.actual_mib()
        low = min(low, a)
        if (a >= want) if above else (a <= want):
            return a, low, True
        time.sleep(0.2)
    return q.actual_mib(), low, False


def main():
    qmp_path, agent_path, console_path = sys.argv[1:4]
    cycles, low_mib, full_mib = (int(x) for x in sys.argv[4:7])
    q = Qmp(qmp_path)
    link = Link(agent_path)
    link.send({"type": "hello", "role": "host", "version_min": 1, "version_max": 1,
               "software": "e2e-integrity-host 1", "caps": ["host.reclaim"]})
    stats = []
    link.wait(lambda m: m.get("type") == "hello", 60, stats)
    con = Console(console_path)
    con.wait(r"WL-FILLED", 180)
    out = {"cycles": []}
    del stats[:]
    for c in range(cycles):
        t0 = time.monotonic()
        rid = link.send({"type": "reclaim", "bytes": (full_mib - low_mib) * MiB,
                         "scope": "any", "compact": True, "deadline_ms": 20000})
        reply = link.wait(lambda m: m.get("type") == "reclaim_reply" and m.get("re") == rid,
                          60, stats)
        for st in stats:  # swap-outs so far, from the agent's reports
            out["pswpout_first"] = out.get("pswpout_first", st["pswpout"])
            out["pswpout_last"] = st["pswpout"]
        del stats[:]  # bounded
        q.cmd("balloon", value=low_mib * MiB)
        _, lowest, reached = wait_balloon(q, low_mib + 8, False, 30)
        q.cmd("balloon", value=full_mib * MiB)
        back, _, full = wait_balloon(q, full_mib - 4, True, 30)
        if not full:
            raise RuntimeError("cycle %d: balloon stuck at %d MiB" % (c, back))
        # Every page is checked after this cycle: a pass that begins from now on (a pass
        # already running began before the cycle ended and does not count).
        con.skip()
        n = int(con.wait(r"WL-PASS-BEGIN (\d+)", 120).group(1))
        m = con.wait(r"WL-PASS %d bad=(\d+) pages=(\d+)" % n, 180)
        out["cycles"].append({
            "cycle": c, "lowest_mib": lowest, "reached_low": reached,
            "reclaimed_mib": reply.get("freed_bytes", 0) // MiB,
            "reclaim_result": reply.get("result"),
            "pass": n, "bad": int(m.group(1)), "pages": int(m.group(2)),
            "seconds": round(time.monotonic() - t0, 1)})
        print("cycle %d: balloon down to %d MiB%s, reclaimed %d MiB, pass %d: %d bad of %d"
              % (c, lowest, "" if reached else " (target not reached)",
                 out["cycles"][-1]["reclaimed_mib"], n, int(m.group(1)), int(m.group(2))),
              file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, OSError, ValueError) as e:
        print("integrity_host: %s" % e, file=sys.stderr)
        sys.exit(1)
