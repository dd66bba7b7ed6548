#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""reclaim_baselines.py: the two ways an operator could squeeze a VM's cgroup without memtided,
run on the same guest after memtided's own phase, each for the same length, for scenario 20's
side by side (docs/e2e.md):

  senpai  a fixed-step memory.reclaim loop holding a PSI target, as Meta's senpai does: every
          interval, when the cgroup's memory stall (PSI some) over the last interval is under
          the target, write one step to memory.reclaim; else write nothing.
  high    a static memory.high at the working set (what the cgroup held at the first phase's
          start, every page read back, less the cold data), set once; put back to "max" at
          the end of the phase, whatever happens.

Before each phase the workload reads every cold page back (pageload's "verify" over its
command port), so each starts from the guest's whole data resident, then runs --base-s
untouched: that is the phase's own baseline of the hot rate.  For each: saved_mib (the
cgroup's memory.current drop less the zram pool's growth, over the phase), stall_ms (the
cgroup's PSI some over the phase), and, with --console, what the guest felt, measured as
pageout_run.py measures memtided's phase (tests/e2e/hot_rates.py): tput_ratio (90th
percentiles of the per-second hot rates from 5 s into the phase to its end, over the
baseline's) and longest_dip_s (the longest stretch of the 100 ms rates under half the
baseline's median, within the phase).  PSI alone does not do: a KVM guest's vCPUs wait on
KVM's MMU lock and the TLB flushes, which PSI does not count as a memory stall.  Figures:
one JSON object on stdout, progress on stderr.
"""
import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hot_rates import Rates, p90  # noqa: E402

MiB = 1 << 20
T_START = time.monotonic()


def log(*a):
    print("# [%5.1f s]" % (time.monotonic() - T_START), *a, file=sys.stderr, flush=True)


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def psi_some_us(cg):
    for line in open(os.path.join(cg, "memory.pressure")):
        if line.startswith("some "):
            return int(line.split("total=")[1])
    raise RuntimeError("no 'some' line in %s/memory.pressure" % cg)


def zram_pool(dev):
    with open("/sys/block/zram%d/mm_stat" % dev) as f:
        return int(f.read().split()[2])  # mem_used_total


def sample(a):
    return {"cur": read_int(os.path.join(a.cg, "memory.current")), "pool": zram_pool(a.zram),
            "psi": psi_some_us(a.cg), "t": time.monotonic()}


def touch_back(a):
    """The workload reads its cold data back (every page resident again)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(a.port)
    s.settimeout(600)
    f = s.makefile("rw")
    f.write("verify\n")
    f.flush()
    line = f.readline().strip()
    s.close()
    if not line.startswith("verified"):
        raise RuntimeError("verify: %r" % line)
    return line


def senpai(a):
    """Each interval: under the target, one step to memory.reclaim."""
    step = a.step_mib * MiB
    end = time.monotonic() + a.seconds
    prev = psi_some_us(a.cg)
    writes = held = 0
    while time.monotonic() < end:
        time.sleep(a.interval)
        now = psi_some_us(a.cg)
        stall = (now - prev) / (a.interval * 1e6)
        prev = now
        if stall >= a.target:
            held += 1
            continue
        try:
            with open(os.path.join(a.cg, "memory.reclaim"), "w") as f:
                f.write(str(step))
        except OSError:
            pass  # EAGAIN: the kernel could not take the whole step
        writes += 1
        prev = psi_some_us(a.cg)  # the write's own stall counts in the next interval
    return {"writes": writes, "held_intervals": held}


def high(a, ws_bytes):
    path = os.path.join(a.cg, "memory.high")
    with open(path, "w") as f:
        f.write(str(ws_bytes))
    try:
        time.sleep(a.seconds)
    finally:
        with open(path, "w") as f:
            f.write("max")
    return {"high_mib": round(ws_bytes / MiB, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cg", required=True)
    ap.add_argument("--zram", type=int, required=True)
    ap.add_argument("--port", required=True)
    ap.add_argument("--cold-mib", type=int, required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--target", type=float, default=0.002,
                    help="senpai's PSI target, a share of the interval (memtided's stall_budget)")
    ap.add_argument("--step-mib", type=int, default=8)
    ap.add_argument("--modes", default="senpai,high")
    ap.add_argument("--console", default="", help="the guest's console log (pageload's rates)")
    ap.add_argument("--base-s", type=int, default=15,
                    help="each phase's own baseline of the hot rate, nothing squeezing")
    a = ap.parse_args()
    figs = {"baseline_seconds": a.seconds, "senpai_target": a.target,
            "senpai_step_mib": a.step_mib}
    rates = None
    if a.console:
        rates = Rates(a.console)
        rates.start()
    ws = None  # the working set: what the cgroup holds with every page read back, less the cold data
    try:
        for mode in a.modes.split(","):
            log("%s: the workload reads its cold data back" % mode)
            log(touch_back(a))
            time.sleep(5)  # the touch-back's own faults out of the window
            tb = time.monotonic() * 1000
            if rates:
                time.sleep(a.base_s)  # the hot rate with nothing squeezing: the baseline
            s0 = sample(a)
            if ws is None:
                ws = max(s0["cur"] - a.cold_mib * MiB, 64 * MiB)
            log("%s: %.0f MiB in the cgroup; %d s" % (mode, s0["cur"] / MiB, a.seconds))
            if mode == "senpai":
                extra = senpai(a)
            elif mode == "high":
                extra = high(a, ws)
            else:
                raise RuntimeError("unknown mode %s" % mode)
            s1 = sample(a)
            if rates:
                t0, t1 = s0["t"] * 1000, s1["t"] * 1000
                before, after = rates.between(tb, t0), rates.between(t0 + 5000, t1)
                if len(before) >= 3 and len(after) >= 3:
                    figs[mode + "_tput_ratio"] = round(p90(after) / p90(before), 3)
                    figs[mode + "_rate_samples"] = "%d/%d" % (len(before), len(after))
                base = rates.fine_median(tb, t0)
                if base:
                    rates.wait_past(t1, 10)
                    figs[mode + "_longest_dip_s"], figs[mode + "_fine_samples"] = \
                        rates.dip(base, t0, t1)
            saved = (s0["cur"] - s1["cur"]) - (s1["pool"] - s0["pool"])
            figs[mode + "_saved_mib"] = round(saved / MiB, 1)
            figs[mode + "_stall_ms"] = round((s1["psi"] - s0["psi"]) / 1000, 1)
            for k, v in extra.items():
                figs[mode + "_" + k] = v
            log("%s: saved %.1f MiB, stall %.1f ms" % (mode, saved / MiB,
                                                        (s1["psi"] - s0["psi"]) / 1000))
    except (OSError, RuntimeError, ValueError) as e:
        print("reclaim_baselines.py: %s" % e, file=sys.stderr)
        print(json.dumps(figs))
        return 1
    print(json.dumps(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
