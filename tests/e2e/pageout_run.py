#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""pageout_run.py: one run of scenario 12 (host-side eviction) against a booted guest.

The guest runs `pageload HOT COLD` (tests/e2e/workloads/pageload.c) and memtided has just been
started on it; this script measures, in order, and prints one JSON object of figures:

  0. with --base-s: memtided was started with the policy enabled=no; for that long it only
     watches (the access source samples the guest exactly as it will afterwards) and the hot
     rate over it is the baseline; then `memtidectl policy set VM enabled=yes`;
  A. first eviction (without --base-s the baseline is from memtided's start to it) and
     memtided's own timing of its first batch ("pageout: N MiB to swap in M ms" in its
     log): pageout_mib_s;
  B. at --seconds (60 by default) after enable (memtided's start without --base-s), and with
     a longer window at 60 s too (the same names suffixed _60s): returned_net_mib = (drop of the guest-RAM mapping's Rss)
     - (growth of the test's zram pool, mem_used_total); the hot rate after the eviction
     against the baseline: tput_ratio (90th percentiles of per-second rates; the medians'
     ratio beside it) and tput_ratio_cpu
     (hot pages per CPU-second of QEMU: the same with the host's load taken out); the Rss
     slope over the quiet end of this phase (creep_short_mib_per_min);
  C. refaults: the guest plans N first touches of cold pages and tells their guest-physical
     addresses; this script looks them up in QEMU's pagemap (touched_swapped); the guest
     touches them; every guest page that left swap over the window, by a pagemap snapshot
     of all guest RAM before and after, is refaults_true; memtided's count (status
     pageout.refaults_total) and QEMU's major faults over the same window are
     refaults_counted and refaults_majflt;
     refaults_ept_seen is how many of them the ept source's table ever showed accessed
     (the other candidate signal: the plugin instruments only in sampling windows);
  D. creep (--creep-s): only the hot set runs; the guest-RAM Rss slope over its last part;
  E. integrity (--cycles): each cycle waits until memtided has evicted the cold set again,
     then has the guest check every cold page and rewrite one in eight: corrupted_pages
     (with --cycles-policy set first: by default a fixed cold age of 20 s, so that the
     controller does not learn to keep data read back every cycle);
  F. balloon (--balloon): memtided is stopped, the balloon is inflated by the same 512 MiB in
     the same guest and timed (QMP query-balloon every 50 ms): balloon_mib_s.
Figure names get --prefix (the return=auto run is reported beside the agentless one).
With --evict-self the script evicts instead of memtided, by the same system call memtided's
pageout makes (process_madvise(MADV_PAGEOUT) on QEMU's guest RAM from 1 MiB up, 64 MiB a
call): for a host where memtided has no access source to choose cold pages by (a Debian 6.1
KVM host: no DAMON, no idle page tracking, no ept plugin under KVM), so what pageout and
swap-in do to a KVM guest is measured all the same: A is that eviction (evict_s, and
hot_back_s: until the hot set's rate is back to half its baseline), C counts refaults by
QEMU's major faults against the truth (memtided counts none: it evicted nothing), E evicts
again before each verify.
Progress goes to stderr.
"""
import argparse
import array
import ctypes
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hot_rates import Rates, p90  # noqa: E402

MiB = 1 << 20


T_START = time.monotonic()


def log(*a):
    print("# [%5.1f s]" % (time.monotonic() - T_START), *a, file=sys.stderr, flush=True)


def swapped_pages(pid, base, mem_mib):
    """The guest pages (by guest-physical page number) that QEMU's pagemap shows in swap,
    over the RAM mapped from guest-physical 0 at host address base."""
    n = mem_mib * MiB >> 12
    fd = os.open("/proc/%d/pagemap" % pid, os.O_RDONLY)
    try:
        raw = os.pread(fd, n * 8, (base >> 12) * 8)
    finally:
        os.close(fd)
    ents = array.array("Q", raw)
    return {i for i, e in enumerate(ents) if (e >> 62) & 1}


class SwapWatch(threading.Thread):
    """QEMU's swapped guest pages, read every 200 ms over a window.  A page that was in swap
    at any reading and is not at the last one came back inside the window; this also catches
    a page evicted after the window opened and touched before it closed."""

    def __init__(self, pid, base, mem_mib):
        super().__init__(daemon=True)
        self.args = (pid, base, mem_mib)
        self.first = swapped_pages(*self.args)
        self.ever = set(self.first)
        self.last = self.first
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(0.2):
            cur = swapped_pages(*self.args)
            self.ever |= cur
            self.last = cur

    def finish(self):
        self.halt.set()
        self.join()
        self.last = swapped_pages(*self.args)
        self.ever |= self.last

    def came_back(self):
        return len(self.ever - self.last)


def settled_refaults(smp, hold_s=3.0, limit_s=30.0):
    """A sample whose refault count has not moved for hold_s (memtided's interval is 1 s)."""
    t_end = time.monotonic() + limit_s
    last = smp.take()
    since = time.monotonic()
    while time.monotonic() < t_end:
        time.sleep(0.5)
        cur = smp.take()
        if cur.get("refaults") != last.get("refaults"):
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= hold_s:
            return cur
    log("refault count still moving after %d s" % limit_s)
    return last


def now_ms():
    return int(time.monotonic() * 1000)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def pageout_self(pid, base, mem_mib, in_swap_mib=None):
    """process_madvise(MADV_PAGEOUT) over guest RAM from 1 MiB up (the first MiB, as memtided
    keeps it), 64 MiB a call: the call memtided's pageout makes, over the whole RAM twice.
    On a KVM guest the first pass finds nearly every page referenced: MADV_PAGEOUT clears the
    host page table's young bit itself, but reclaim's reference check also asks KVM, through
    its MMU notifier, whether the nested page table's accessed bit is set, and for a page the
    guest wrote once and never again it still is (nothing clears it): the page is kept and the
    bit cleared.  The second pass then takes it, huge pages whole.  On the KVM host stand (7
    Dec): 32 MiB then 562 MiB in swap of a guest with 512 MiB cold, a third pass nothing more;
    under TCG (no secondary MMU) the second pass finds nothing left.  in_swap_mib, when given,
    gets the MiB in swap after each pass.  Returns the seconds taken."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pidfd = libc.syscall(434, ctypes.c_int(pid), ctypes.c_uint(0))  # pidfd_open
    if pidfd < 0:
        raise RuntimeError("pidfd_open(%d): %s" % (pid, os.strerror(ctypes.get_errno())))
    t = time.monotonic()
    try:
        for _ in range(2):
            for off in range(MiB, mem_mib * MiB, 64 * MiB):
                iov = _Iovec(base + off, min(64 * MiB, mem_mib * MiB - off))
                # process_madvise(pidfd, iov, 1, MADV_PAGEOUT, 0)
                if libc.syscall(440, ctypes.c_int(pidfd), ctypes.byref(iov), ctypes.c_size_t(1),
                                ctypes.c_int(21), ctypes.c_uint(0)) < 0:
                    raise RuntimeError("process_madvise: %s" % os.strerror(ctypes.get_errno()))
            if in_swap_mib is not None:
                in_swap_mib.append(round(len(swapped_pages(pid, base, mem_mib)) * 4096 / MiB, 1))
    finally:
        os.close(pidfd)
    return time.monotonic() - t


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(20)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        json.loads(self.f.readline())
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
                raise RuntimeError("QMP %s: %s" % (name, r["error"].get("desc")))
            return r.get("return")

    def hmp(self, line):
        return self.cmd("human-monitor-command", **{"command-line": line})


class Port:
    """The workload's command port (a virtio-serial socket QEMU serves)."""

    def __init__(self, path):
        deadline = time.monotonic() + 30
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.s.settimeout(300)
        self.f = self.s.makefile("rw")

    def send(self, line):
        self.f.write(line + "\n")
        self.f.flush()

    def line(self):
        l = self.f.readline()
        if not l:
            raise RuntimeError("the workload's port closed")
        return l.strip()


class Sampler(threading.Thread):
    """Once a second: guest-RAM Rss and AnonHugePages, the zram device's stats, memtided's
    view of the VM, QEMU's major faults."""

    def __init__(self, a):
        super().__init__(daemon=True)
        self.a = a
        self.samples = []
        self.stop = False
        self.lock = threading.Lock()

    def rss(self):
        lo, hi = self.a.mem_mib * 1024, (self.a.mem_mib + 8) * 1024
        best, rss, thp, size = 0, 0, 0, 0
        cur_rss = 0
        with open("/proc/%d/smaps" % self.a.qemu_pid) as f:
            for line in f:
                if line.startswith("Size:"):
                    size = int(line.split()[1])
                elif line.startswith("Rss:"):
                    cur_rss = int(line.split()[1])
                elif line.startswith("AnonHugePages:"):
                    if lo <= size <= hi and size >= best:
                        best, rss, thp = size, cur_rss, int(line.split()[1])
        return rss * 1024, thp * 1024

    def zram(self):
        with open("/sys/block/zram%d/mm_stat" % self.a.zram) as f:
            v = f.read().split()
        return int(v[0]), int(v[2])  # orig_data_size, mem_used_total

    def stat(self):
        """QEMU's major faults and CPU seconds (utime + stime)."""
        with open("/proc/%d/stat" % self.a.qemu_pid) as f:
            s = f.read()
        v = s[s.rindex(")") + 2:].split()
        return int(v[9]), (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")

    def status(self):
        try:
            out = subprocess.run([self.a.ctl, "--socket", self.a.ctl_sock, "--json", "vm", "show",
                                  self.a.vm], capture_output=True, text=True, timeout=10).stdout
            return json.loads(out)["vm"]
        except (ValueError, KeyError, subprocess.SubprocessError):
            return None

    def take(self):
        rss, thp = self.rss()
        orig, pool = self.zram()
        majflt, cpu = self.stat()
        s = {"ms": now_ms(), "rss": rss, "thp": thp, "zram_orig": orig, "zram_pool": pool,
             "majflt": majflt, "cpu_s": cpu, "psi": psi_some_us(self.a.cgroup)}
        st = self.status()
        if st:
            p = st.get("pageout", {})
            s.update(state=p.get("state"), swapped=p.get("swapped_bytes", 0),
                     refaults=p.get("refaults_total", 0), out_total=p.get("out_total_bytes", 0),
                     collapsed=p.get("collapsed_total", 0), why=p.get("why", ""),
                     vm_state=st.get("state"), cold_age_ms=st.get("cold_age_ms"))
        return s

    def run(self):
        while not self.stop:
            try:
                s = self.take()
                with self.lock:
                    self.samples.append(s)
            except OSError:
                pass
            time.sleep(1)

    def last(self, key=None):
        with self.lock:
            for s in reversed(self.samples):
                if key is None or key in s:
                    return s
        return None

    def window(self, t0, t1):
        with self.lock:
            return [s for s in self.samples if t0 <= s["ms"] <= t1]


def per_cpu_second(rates, smp, t0, t1):
    """Hot pages per CPU-second of QEMU over [t0, t1]: the rate with the host's contention
    taken out (on a shared 2-core machine a vCPU gets from a third to all of a core)."""
    w = smp.window(t0, t1)
    if len(w) < 2:
        return None
    pages = sum(rates.between(w[0]["ms"], w[-1]["ms"]))
    cpu = w[-1]["cpu_s"] - w[0]["cpu_s"]
    return pages / cpu if cpu > 0 else None


def slope_mib_per_min(samples):
    """Least-squares slope of Rss over time, MiB per minute."""
    if len(samples) < 3:
        return None
    xs = [s["ms"] / 60000.0 for s in samples]
    ys = [s["rss"] / MiB for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def psi_some_us(cg):
    """The cgroup's memory PSI "some" total (microseconds), or None."""
    if not cg:
        return None
    try:
        for line in open(os.path.join(cg, "memory.pressure")):
            if line.startswith("some "):
                return int(line.split("total=")[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise RuntimeError("timed out after %d s waiting for %s" % (timeout, what))


def first_batch(logfile, cold_mib):
    """memtided's first pageout batch that moved most of the cold set: (MiB, ms)."""
    rx = re.compile(r"pageout: (\d+) MiB to swap in (\d+) ms")
    with open(logfile, errors="replace") as f:
        for line in f:
            m = rx.search(line)
            if m and int(m.group(1)) >= cold_mib * 0.8:
                return int(m.group(1)), int(m.group(2))
    return None


def main():
    ap = argparse.ArgumentParser()
    for k in ("qmp", "port", "console", "ctl", "ctl-sock", "log"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--vm", default="qemu")
    ap.add_argument("--qemu-pid", type=int, required=True)
    ap.add_argument("--memtided-pid", type=int, default=0)
    ap.add_argument("--zram", type=int, required=True)
    ap.add_argument("--mem-mib", type=int, required=True)
    ap.add_argument("--cold-mib", type=int, required=True)
    ap.add_argument("--touches", type=int, default=4096)
    ap.add_argument("--creep-s", type=int, default=0)
    ap.add_argument("--creep-window-s", type=int, default=0)
    ap.add_argument("--cycles", type=int, default=0)
    ap.add_argument("--cycles-policy", default="cold_age=20s",
                    help="policy set before the cycles ('' keeps the VM's)")
    ap.add_argument("--balloon", action="store_true")
    ap.add_argument("--refaults", action="store_true")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--ept-table", default="")
    ap.add_argument("--base-s", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=60,
                    help="the measured window: figures this long after enable (memtided's start)")
    ap.add_argument("--evict-self", action="store_true")
    ap.add_argument("--cgroup", default="",
                    help="the VM's cgroup directory: its PSI stall over the window is reported")
    ap.add_argument("--no-quit", action="store_true",
                    help="leave the workload running at the end (more phases follow)")
    a = ap.parse_args()
    figs = FIGS

    def fig(k, v):
        figs[a.prefix + k] = v
        log("%s%s = %s" % (a.prefix, k, v))

    qmp = Qmp(a.qmp)
    port = Port(a.port)
    smp = Sampler(a)
    rates = Rates(a.console)
    smp.start()
    rates.start()
    fig("cold_mib", a.cold_mib)

    # 0. the baseline: memtided runs (the access source samples the guest as it will after)
    # with the policy enabled=no, so nothing is taken; then it is enabled.
    tb = now_ms()
    if a.base_s:
        wait_for(lambda: now_ms() - tb >= a.base_s * 1000, a.base_s + 30, "the baseline")
        before = rates.between(tb + 2000, now_ms())
        cb = per_cpu_second(rates, smp, tb + 2000, now_ms())
    # The host's figures before memtided may take anything: once enabled it can page out
    # within a tick, before a sample taken after the command would be (seen: -0.1 s).
    s0 = smp.take()
    psi0 = psi_some_us(a.cgroup)
    if a.base_s:
        subprocess.run([a.ctl, "--socket", a.ctl_sock, "policy", "set", a.vm, "enabled=yes"],
                       check=True, capture_output=True, timeout=10)
    t0 = now_ms()

    # A. the first eviction
    base = int(re.search(r"is (0x[0-9a-f]+)", qmp.hmp("gpa2hva 0x100000")).group(1), 16) - 0x100000
    if a.evict_self:
        # memtided has no source to evict by here: the test evicts, as memtided would
        time.sleep(10)  # a baseline of the hot rate first
        before_self = rates.between(t0 + 2000, now_ms())
        pre = len(swapped_pages(a.qemu_pid, base, a.mem_mib))
        t_ev = now_ms()
        passes = []
        dt = pageout_self(a.qemu_pid, base, a.mem_mib, passes)
        out = len(swapped_pages(a.qemu_pid, base, a.mem_mib)) - pre
        fig("in_swap_pass1_mib", passes[0])
        fig("in_swap_pass2_mib", passes[1])
        fig("evicted_by", "the test (process_madvise): memtided has no access source here")
        fig("evict_s", round(dt, 2))
        fig("evicted_mib", round(out * 4096 / MiB, 1))
        fig("pageout_mib_s", round(out * 4096 / MiB / max(dt, 0.001), 1))
        # The hot set comes back through KVM's faults: how long until it runs at half its
        # rate again.
        med = statistics.median(before_self) if before_self else 0
        back = wait_for(lambda: [r for r in rates.between(t_ev, now_ms()) if r >= med / 2],
                        120, "the hot set back")
        fig("hot_back_s", round((now_ms() - t_ev) / 1000, 1) if back else None)
    else:
        ev = wait_for(lambda: (smp.last("out_total") or {}).get("out_total", 0) > 0 and
                      smp.last("out_total"), 120, "memtided's first pageout")
        t_ev = ev["ms"]
        # From enable (or memtided's start) to the first sample with anything sent to swap:
        # memtided's own designed delay (watching a cold age) plus at most a second.
        fig("first_evict_s", round((t_ev - t0) / 1000, 1))
        batch = first_batch(a.log, a.cold_mib)
        if batch:
            fig("pageout_mib_s", round(batch[0] / max(batch[1], 1) * 1000, 1))
            fig("pageout_batch_mib", batch[0])

    # B. at the window's end (--seconds after enable; 60 by default): what the host got back,
    # the hot rate, and the short creep.  A longer window also reports the same figures at
    # 60 s, suffixed _60s, so what a minute gave is not hidden behind the longer one.
    def returned_at(sec, suffix):
        # The sampler's first reading at the mark, not one taken now: the wait for the first
        # eviction above may end after the mark (seen: 103 s after enable with random data).
        wait_for(lambda: now_ms() - t0 >= sec * 1000, sec + 60, "%d s" % sec)
        s = (smp.window(t0 + sec * 1000, now_ms()) or [smp.take()])[0]
        psi = s.get("psi")
        if psi0 is not None and psi is not None:
            fig("psi_some_ms" + ((suffix or "_60s") if sec == 60 else suffix),
                round((psi - psi0) / 1000, 1))
        rss_drop = s0["rss"] - s["rss"]
        pool_growth = s["zram_pool"] - s0["zram_pool"]
        fig("rss_drop_mib" + suffix, round(rss_drop / MiB, 1))
        fig("zram_pool_growth_mib" + suffix, round(pool_growth / MiB, 1))
        fig("returned_net_mib" + suffix, round((rss_drop - pool_growth) / MiB, 1))
        if s["zram_pool"]:
            fig("zram_ratio" + suffix, round(s["zram_orig"] / s["zram_pool"], 2))
        # What the device holds against what memtided says it sent: anything else (another
        # process, the host's own reclaim or DAMON) swapping into it shows here.
        fig("zram_stored_mib" + suffix, round(s["zram_orig"] / MiB, 1))
        fig("swapped_mib" + suffix, round(s.get("swapped", 0) / MiB, 1))
        return s

    fig("window_s", a.seconds)
    if a.seconds > 60:
        returned_at(60, "_60s")
    s_end = returned_at(a.seconds, "")
    if not a.base_s:
        before = rates.between(t0 + 2000, t_ev - 1000)
        cb = per_cpu_second(rates, smp, t0 + 2000, t_ev - 1000)
        fig("rate_before_median", statistics.median(before) if before else None)
    after = rates.between(t_ev + 5000, s_end["ms"])
    # The 90th percentiles, as scenario 2 compares them: TCG runs the same loop in modes a
    # few seconds to minutes long (8.9 / 4.7 M pages/s with nothing managing the guest), so a
    # median of 18 seconds before against 54 after compares modes as often as it compares
    # the hot set (CI of 5 Dec: medians 7.40 / 6.96 M, 0.94, no hot page refaulted).  The
    # medians are reported beside it.
    if len(before) >= 3 and len(after) >= 3:
        fig("rate_before", p90(before))
        fig("rate_after", p90(after))
        fig("tput_ratio", round(p90(after) / p90(before), 3))
        fig("tput_ratio_median", round(statistics.median(after) / statistics.median(before), 3))
        fig("rate_samples", "%d/%d" % (len(before), len(after)))
    ca = per_cpu_second(rates, smp, t_ev + 5000, s_end["ms"])
    if cb and ca:
        fig("rate_per_cpu_s_before", round(cb))
        fig("rate_per_cpu_s_after", round(ca))
        fig("tput_ratio_cpu", round(ca / cb, 3))
    # The longest stretch of the hot rate under half its baseline's (the 100 ms WL-FINE
    # rates, when the workload prints them), from enable to the window's end only: the
    # phases after it (the refault plan, the cycles' verify) print no rates by design.
    fine_base = rates.fine_median(tb + 2000, t0) if a.base_s else \
        rates.fine_median(t0 + 2000, t_ev - 1000)
    if fine_base:
        rates.wait_past(s_end["ms"], 10)  # the window's last samples through the console
        dip, n = rates.dip(fine_base, t0, s_end["ms"])
        fig("longest_dip_s", dip)
        fig("fine_samples", n)
        if a.seconds > 60:
            fig("longest_dip_s_60s", rates.dip(fine_base, t0, t0 + 60000)[0])
    quiet = smp.window(t_ev + 20000, s_end["ms"])
    sl = slope_mib_per_min(quiet)
    if sl is not None:
        fig("creep_short_mib_per_min", round(sl, 2))

    # C. refaults, page by page
    if a.refaults:
        ra, bga = smp.take(), now_ms()
        time.sleep(5)
        rb = smp.take()
        fig("refaults_background_5s", rb["refaults"] - ra["refaults"])
        port.send("plan %d" % a.touches)
        head = port.line()
        n = int(head.split()[1])
        gpas = []
        while True:
            l = port.line()
            if l == "end":
                break
            gpas.append(int(l, 16))
        in_swap = swapped_pages(a.qemu_pid, base, a.mem_mib)
        swapped_set = {g for g in gpas if 0 < g < a.mem_mib * MiB and g >> 12 in in_swap}
        fig("touched_pages", len(gpas))
        fig("touched_swapped", len(swapped_set))
        # What the ept source could see of these first touches: their leaves' accessed bits
        # in the plugin's table, polled every 50 ms from before the touch to 3 s after (a
        # walk clears a bit once a second; the plugin sets it only within its windows).
        seen = set()
        swapped_gpas = [g for g in gpas if 0 < g < a.mem_mib * MiB and
                        g in swapped_set]
        stop_poll = threading.Event()

        def poll_ept():
            try:
                with open(a.ept_table, "rb") as f:
                    pt_off = int.from_bytes(os.pread(f.fileno(), 8, 56), "little")
                    while not stop_poll.is_set():
                        for g in swapped_gpas:
                            if g not in seen:
                                e = int.from_bytes(os.pread(f.fileno(), 8, pt_off + (g >> 12) * 8), "little")
                                if e & (1 << 8):
                                    seen.add(g)
                        time.sleep(0.05)
            except OSError as e:
                log("ept table: %s" % e)
        poller = threading.Thread(target=poll_ept, daemon=True)
        if a.ept_table:
            poller.start()
        # memtided's count lags the pages by a scan and a status update (one interval each):
        # a refault from before the window (the guest planning its touches) would land in
        # it.  So both ends wait until the count holds still over three intervals.
        r0 = settled_refaults(smp)
        watch = SwapWatch(a.qemu_pid, base, a.mem_mib)
        watch.start()
        port.send("go")
        done = port.line()
        m = re.match(r"done (\d+) bad=(\d+)", done)
        bad_touch = int(m.group(2)) if m else -1
        r1 = settled_refaults(smp)
        watch.finish()
        # The truth is every guest page that came back from swap over the window, not only
        # the planned ones: the guest's page-table pages that map them were cold too, and the
        # touches read them back (CI of 4 Dec: 3996 planned, 4206 back, 4168 major faults).
        # Pages memtided evicted inside the window and that came back in it count too (CI of
        # 5 Dec: 4318 counted, 4320 major faults, 4112 by the window's two ends alone).
        swapped = watch.came_back()
        fig("refaults_true", swapped)
        fig("refaults_true_ends", len(watch.first - watch.last))
        fig("evicted_in_window_pages", (r1.get("out_total", 0) - r0.get("out_total", 0)) >> 12)
        stop_poll.set()
        if a.ept_table:
            poller.join()
            fig("refaults_ept_seen", len(seen))
        fig("refaults_counted", r1["refaults"] - r0["refaults"])
        fig("refaults_majflt", r1["majflt"] - r0["majflt"])
        fig("touch_bad_pages", bad_touch)
        # Counted: memtided's pagemap scan, or, when the test evicted, QEMU's major faults
        # (memtided evicted nothing to scan for): how a refault through KVM shows on the host.
        counted = figs[a.prefix + ("refaults_majflt" if a.evict_self else "refaults_counted")]
        if swapped:
            fig("refaults_error", round(abs(counted - swapped) / swapped, 4))
        log("plan %d -> %d swapped; %s" % (n, swapped, done))

    # D. creep: only the hot set runs
    if a.creep_s:
        tc = now_ms()
        wait_for(lambda: now_ms() - tc >= a.creep_s * 1000, a.creep_s + 60, "the creep phase")
        w = a.creep_window_s or a.creep_s
        sl = slope_mib_per_min(smp.window(now_ms() - w * 1000, now_ms()))
        fig("creep_mib_per_min", round(sl, 3) if sl is not None else None)
        fig("creep_window_s", w)
        last = smp.last("collapsed")
        fig("khugepaged_collapsed_pages", last.get("collapsed", 0) if last else 0)
        fig("guest_thp_mib", round(smp.take()["thp"] / MiB, 1))

    # E. integrity: evict, touch back, check
    if a.cycles:
        bad = 0
        # The cycles test the data's integrity under eviction again and again, not the
        # controller: left at its budget, the controller (rightly) stops calling cold data
        # that the guest reads back every cycle (the soak of 4 Dec: cycles took 45, 71, 130
        # s, then more than 180 s as the reuse floor and the refaults raised the cold age;
        # a budget of 100%/min still gave 39, 75 s).  A fixed cold age (policy cold_age)
        # takes the controller out: each cycle is the verify, 20 s, and one eviction.
        if len(a.cycles_policy) and not a.evict_self:
            subprocess.run([a.ctl, "--socket", a.ctl_sock, "policy", "set", a.vm] +
                           a.cycles_policy.split(), check=True, capture_output=True, timeout=10)
            log("cycles: policy set %s" % a.cycles_policy)
        for c in range(a.cycles):
            if a.evict_self:
                pageout_self(a.qemu_pid, base, a.mem_mib)
                n = len(swapped_pages(a.qemu_pid, base, a.mem_mib)) * 4096
                log("cycle %d: the test evicted; %.0f MiB in swap" % (c + 1, n / MiB))
                if n < a.cold_mib * MiB * 0.85:
                    raise RuntimeError("cycle %d: only %d MiB went to swap" % (c + 1, n // MiB))
            else:
                wait_for(lambda: (smp.take().get("swapped", 0)) >= a.cold_mib * MiB * 0.85, 180,
                         "cycle %d: the cold set back in swap" % (c + 1))
            port.send("verify")
            l = port.line()
            m = re.match(r"verified (\d+) bad=(\d+) pages=(\d+)", l)
            if not m:
                raise RuntimeError("verify: %s" % l)
            bad += int(m.group(2))
            log("cycle %d: %s" % (c + 1, l))
        fig("cycles", a.cycles)
        fig("corrupted_pages", bad + max(figs.get(a.prefix + "touch_bad_pages", 0), 0))

    last = smp.take()
    fig("refaults_total", last.get("refaults", 0))
    fig("pageout_state", last.get("state"))
    smp.stop = True

    # F. the balloon, by the same amount, in the same guest, memtided gone
    if a.balloon and a.memtided_pid:
        os.kill(a.memtided_pid, signal.SIGTERM)
        wait_for(lambda: not os.path.exists("/proc/%d" % a.memtided_pid) or
                 open("/proc/%d/stat" % a.memtided_pid).read().split()[2] == "Z", 30, "memtided to exit")
        actual0 = qmp.cmd("query-balloon")["actual"]
        target = actual0 - a.cold_mib * MiB
        tb = time.monotonic()
        qmp.cmd("balloon", value=target)
        while qmp.cmd("query-balloon")["actual"] > target + 2 * MiB:
            if time.monotonic() - tb > 120:
                raise RuntimeError("the balloon did not inflate by %d MiB in 120 s" % a.cold_mib)
            time.sleep(0.05)
        dt = time.monotonic() - tb
        fig("balloon_mib_s", round(a.cold_mib / dt, 1))
        qmp.cmd("balloon", value=actual0)
    if not a.no_quit:
        port.send("quit")
    print(json.dumps(figs))
    return 0


# What was measured so far: a phase that fails (a timeout) keeps the figures before it.
FIGS = {}

if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError) as e:
        print("pageout_run.py: %s" % e, file=sys.stderr)
        print(json.dumps(FIGS))
        sys.exit(1)
