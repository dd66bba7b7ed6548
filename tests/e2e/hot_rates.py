#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""hot_rates.py: the hot set's rates that pageload prints on a guest's console, and what a
phase of eviction did to them: the 90th-percentile ratio of per-second rates and the longest
stretch under half the baseline's rate.  Used by pageout_run.py (memtided's phase) and
reclaim_baselines.py (the side by side's contenders), so every contender is measured alike.

pageload (tests/e2e/workloads/pageload.c) prints "WL-RATE <s> <pages/s>" once a second and,
with a fine period, "WL-FINE <ms> <pages/s>" every 100 ms: <ms> is the guest's clock since the
workload started, the rate is the pages touched since the previous WL-FINE over the time since
it.  So each fine sample stands for the interval (previous sample, this one]: a guest that
froze (its vCPUs waiting on KVM's MMU lock, say) prints nothing and its next sample covers the
freeze with a low rate.  A phase in which the workload serves a command (verify, the refault
plan) looks the same, which is why a dip is only ever counted inside a measured window: the
window is given in host time (CLOCK_MONOTONIC ms, as the scripts keep it) and mapped onto the
guest's clock by the smallest gap seen between a line's stamp and its arrival on the host.

Run as a program (`hot_rates.py --selftest`) it checks the dip computation on made-up streams;
scenario 20 runs that as its first check.
"""
import re
import statistics
import sys
import threading
import time

# A sample interval this much longer than pageload's 100 ms period is a gap in the stream (the
# guest printed nothing), counted as under the rate whatever rate the sample reports.
GAP_MS = 500


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, (len(xs) * 9) // 10)]


def longest_dip(samples, base, w0, w1, gap_ms=GAP_MS):
    """Seconds of the longest stretch within [w0, w1] (guest ms) in which the hot rate was under
    base / 2.  samples: (guest ms, rate) in order, each the mean over the interval since the
    one before (the first only opens the stream).  An interval of more than gap_ms counts as
    under, and so does the window's tail after the last sample (the stream stopped in it)."""
    longest, run_start, prev = 0.0, None, None
    for t, r in samples:
        if prev is not None and t > w0 and prev < w1:
            lo, hi = max(prev, w0), min(t, w1)
            if r < base / 2 or t - prev > gap_ms:
                run_start = lo if run_start is None else run_start
                longest = max(longest, hi - run_start)
            else:
                run_start = None
        prev = t
    if prev is not None and prev < w1 and w1 - prev > gap_ms:
        lo = max(prev, w0)
        run_start = lo if run_start is None else run_start
        longest = max(longest, w1 - run_start)
    return round(longest / 1000.0, 2)


class Rates(threading.Thread):
    """Follows the console: WL-RATE rates with their host arrival times, WL-FINE samples with
    their guest stamps and arrival times."""

    def __init__(self, console_path):
        super().__init__(daemon=True)
        from console import Console  # the caller's directory is on sys.path
        self.c = Console(console_path)
        self.rates = []  # (arrival ms, pages/s)
        self.fine = []  # (guest ms, pages/s)
        self.offset = None  # min(arrival - guest ms): host ms = guest ms + offset
        self.lock = threading.Lock()

    def run(self):
        rx = re.compile(r"WL-(RATE|FINE) (\d+) (\d+)")
        while True:
            for line, ms in self.c.lines(3600):
                m = rx.search(line)
                if not m:
                    continue
                with self.lock:
                    if m.group(1) == "RATE":
                        self.rates.append((ms, int(m.group(3))))
                    else:
                        g = int(m.group(2))
                        self.fine.append((g, int(m.group(3))))
                        off = ms - g
                        self.offset = off if self.offset is None else min(self.offset, off)

    def between(self, t0, t1):
        """WL-RATE rates that arrived within [t0, t1] (host ms)."""
        with self.lock:
            return [r for ms, r in self.rates if t0 <= ms <= t1]

    def fine_median(self, t0, t1):
        """Median WL-FINE rate over [t0, t1] (host ms), or None."""
        with self.lock:
            if self.offset is None:
                return None
            g0, g1 = t0 - self.offset, t1 - self.offset
            xs = [r for g, r in self.fine if g0 <= g <= g1]
        return statistics.median(xs) if xs else None

    def wait_past(self, t, timeout_s):
        """Until a WL-FINE sample stamped after host ms t has arrived (True), or timeout_s
        passes (False: the guest prints nothing; the window's tail then counts as a gap)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self.lock:
                if self.fine and self.offset is not None and self.fine[-1][0] > t - self.offset:
                    return True
            time.sleep(0.1)
        return False

    def dip(self, base, t0, t1):
        """(longest dip in s, fine samples in the window) over [t0, t1] (host ms)."""
        with self.lock:
            if self.offset is None or not base:
                return None, 0
            g0, g1 = t0 - self.offset, t1 - self.offset
            fine = list(self.fine)
        n = sum(1 for g, _ in fine if g0 <= g <= g1)
        return longest_dip(fine, base, g0, g1), n


def _stream(t0, t1, rate, step=100):
    return [(t, rate) for t in range(t0, t1 + 1, step)]


def selftest():
    """The dip computation on streams whose answer is known; returns the failures."""
    fast, slow = 1000, 100
    cases = []
    s = _stream(0, 10000, fast)
    cases.append(("steady", longest_dip(s, fast, 0, 10000), 0.0))
    s = _stream(0, 3000, fast) + _stream(3100, 4000, slow) + _stream(4100, 10000, fast)
    cases.append(("a 1 s dip", longest_dip(s, fast, 0, 10000), 1.0))
    s = _stream(0, 3000, fast) + [(6000, slow)] + _stream(6100, 10000, fast)
    cases.append(("the guest frozen 3 s", longest_dip(s, fast, 0, 10000), 3.0))
    s = _stream(0, 3000, fast) + [(6000, fast * 2)] + _stream(6100, 10000, fast)
    cases.append(("a 3 s gap whatever its rate", longest_dip(s, fast, 0, 10000), 3.0))
    s = _stream(0, 8000, fast) + [(20000, slow)] + _stream(20100, 30000, fast)
    cases.append(("a command phase after the window", longest_dip(s, fast, 0, 8000), 0.0))
    cases.append(("a gap across the window's end", longest_dip(s, fast, 0, 10000), 2.0))
    cases.append(("a gap across the window's start", longest_dip(s, fast, 15000, 30000), 5.0))
    s = _stream(0, 7000, fast)
    cases.append(("the stream stops in the window", longest_dip(s, fast, 0, 10000), 3.0))
    s = _stream(0, 2000, fast) + _stream(2100, 2500, slow) + _stream(2600, 5000, fast) + \
        _stream(5100, 6500, slow) + _stream(6600, 10000, fast)
    cases.append(("the longer of two dips", longest_dip(s, fast, 0, 10000), 1.5))
    cases.append(("a dip clipped at the window's start", longest_dip(s, fast, 5500, 10000), 1.0))
    cases.append(("no samples", longest_dip([], fast, 0, 10000), 0.0))
    return ["%s: %s, wanted %s" % (n, got, want) for n, got, want in cases if got != want]


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        bad = selftest()
        for b in bad:
            print("hot_rates selftest: " + b, file=sys.stderr)
        sys.exit(1 if bad else 0)
    print("usage: hot_rates.py --selftest", file=sys.stderr)
    sys.exit(2)
