#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# daemon_scale.py: memtided's cost and front-end latency as the number of VMs grows.
#
# memtided runs in libvirt mode against libvirt's test driver (test:///FILE, in-process: a
# mock hypervisor, since hundreds of real guests cannot run here) with N running domains of
# 4 GiB, each with a virtio balloon, and libvmm's simulated source (source = sim), so every
# VM's loop ages 1 Mi simulated pages per tick, the daemon's real per-VM work.  For each
# (N, interval, hog) it measures, over a window after every VM is active:
#   cpu_per_vm_pct   memtided's CPU (utime + stime) per VM, percent of one core
#   status_p99_ms    round trip of {"cmd":"status"} on a fresh connection every 100 ms
#   vm_show_p99_ms   the same for {"cmd":"vm"} (memtidectl vm show's request)
#   tick_gap_p99_ms  gaps between successive snapshots of each VM (updated_ms), all VMs
#   tick_gap_p50_ms  the median of the same
#   tick_evenness    how evenly overloaded loops stretch: per VM, its mean gap between
#                    ticks over the window; the shortest of those over the longest (1.0:
#                    every VM kept the same pace; VMs with fewer than 2 gaps left out)
#   attach_cpu_ms_per_vm  CPU from start until every VM is active, per VM
#   ctl_wait_ms_per_wakeup  the control thread's run-queue wait per wake-up (schedstat of the
#                    thread named memtide-ctl; null for builds that do not name it)
# hog: 2 busy processes at nice 0 beside memtided, each in its own session (the "busy host"
# case).
# The measuring client runs at SCHED_FIFO 2 when it may (root), so that the figures are
# memtided's and not the client's own wait for a CPU on a loaded machine: on these shared
# 2-core machines other sessions' load alone kept a nice-0 client waiting 100 ms to 1 s.
# It is the same for both builds; "client_rt" says whether it was in force.
# Prints one JSON line per case: {"name":"daemon_scale","build":...,"vms":N,...}.
# MEMTIDED_BEFORE=path/to/old/memtided runs each case with it too, right before the current
# build, for side-by-side figures.  DAEMON_SCALE_CASES="16:5000:0 256:1000:1 ..." narrows.
import json, os, signal, socket, subprocess, sys, tempfile, time

BUILD = os.environ.get("BUILD", "build")
CUR = os.path.abspath(os.path.join(BUILD, "bin", "memtided"))
WINDOW_S = float(os.environ.get("DAEMON_SCALE_WINDOW", "20"))
CASES = os.environ.get("DAEMON_SCALE_CASES",
                       "16:5000:0 64:5000:0 256:5000:0 16:1000:0 64:1000:0 256:1000:0 "
                       "256:1000:1")
HZ = os.sysconf("SC_CLK_TCK")


def domains_xml(path, n):
    doms = []
    for i in range(n):
        doms.append("""<domain type='test'><name>ds%03d</name>
  <memory unit='GiB'>4</memory><currentMemory unit='GiB'>4</currentMemory><vcpu>1</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  <devices><memballoon model='virtio'/></devices></domain>""" % i)
    with open(path, "w") as f:
        f.write("<node>\n" + "\n".join(doms) + "\n</node>\n")


def cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        w = f.read().rsplit(")", 1)[1].split()
    return (int(w[11]) + int(w[12])) * 1000.0 / HZ


def call(sock, req):
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    s.sendall((json.dumps(req) + "\n").encode())
    buf = b""
    while b"\n" not in buf:
        d = s.recv(1 << 20)
        if not d:
            break
        buf += d
    s.close()
    return (time.monotonic() - t0) * 1000, json.loads(buf) if buf else None


def ctl_thread_stat(pid):
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                if f.read().strip() == "memtide-ctl":
                    with open("/proc/%d/task/%s/schedstat" % (pid, t)) as g:
                        w = g.read().split()
                    return int(w[1]) / 1e6, int(w[2])  # run delay ms, timeslices
        except OSError:
            pass
    return None


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else None


def evenness(per_vm):
    means = [sum(g) / len(g) for g in per_vm.values() if len(g) >= 2]
    return round(min(means) / max(means), 3) if means else None


def normal_policy():
    # Children (memtided, the hogs) run as they would anywhere: not the client's RT policy,
    # and each in a session of its own, as services and QEMU processes are: with the
    # kernel's autogroup on (Debian's default) the CPU is shared between sessions first, so
    # hogs in memtided's own session would compete with its threads one by one instead.
    try:
        os.setsid()
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        pass


def run(binary, label, n, interval_ms, hog):
    d = tempfile.mkdtemp(prefix="memtide-ds.")
    xml, sock = os.path.join(d, "doms.xml"), os.path.join(d, "ctl.sock")
    domains_xml(xml, n)
    with open(os.path.join(d, "meminfo"), "w") as f:
        f.write("MemTotal: 2147483648 kB\nMemAvailable: 2000000000 kB\n")
    with open(os.path.join(d, "memtided.conf"), "w") as f:
        f.write("[daemon]\nsource = sim\nmetrics_port = 0\n[host]\nmeminfo = %s/meminfo\n" % d)
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=normal_policy)
            for _ in range(2 if hog else 0)]
    log = open(os.path.join(d, "memtided.log"), "w")
    p = subprocess.Popen([binary, "--uri", "test://" + xml, "--socket", sock, "--foreground",
                          "--config", os.path.join(d, "memtided.conf"),
                          "--interval", "%dms" % interval_ms], stdout=log, stderr=log,
                         preexec_fn=normal_policy)
    try:
        t_start = time.monotonic()
        active = False
        while time.monotonic() - t_start < 120:
            try:
                _, r = call(sock, {"cmd": "status"})
                vms = r["vms"] if r else []
                if len(vms) == n and all(v["state"] != "attaching" and v["updated_ms"] for v in vms):
                    active = True
                    break
            except OSError:
                pass
            time.sleep(0.2)
        attach_cpu = cpu_ms(p.pid)
        if not active:
            raise RuntimeError("%s: %d VMs never became active" % (label, n))
        time.sleep(2 * interval_ms / 1000.0)  # past the first ticks
        c0, t0 = cpu_ms(p.pid), time.monotonic()
        w0 = ctl_thread_stat(p.pid)
        st_lat, show_lat, seen = [], [], {}
        gaps = []
        per_vm = {}
        k = 0
        while time.monotonic() - t0 < WINDOW_S:
            ms, r = call(sock, {"cmd": "status"})
            st_lat.append(ms)
            for v in (r or {}).get("vms", []):
                last = seen.get(v["name"])
                if last is not None and v["updated_ms"] != last:
                    gaps.append(v["updated_ms"] - last)
                    per_vm.setdefault(v["name"], []).append(v["updated_ms"] - last)
                seen[v["name"]] = v["updated_ms"]
            ms, _ = call(sock, {"cmd": "vm", "name": "ds%03d" % (k % n)})
            show_lat.append(ms)
            k += 1
            time.sleep(0.1)
        c1, t1 = cpu_ms(p.pid), time.monotonic()
        w1 = ctl_thread_stat(p.pid)
        wait = round((w1[0] - w0[0]) / max(1, w1[1] - w0[1]), 2) if w0 and w1 else None
        # Gaps between polls (100 ms plus round trips) add up to one poll period of
        # uncertainty to each measured gap; intervals are 1 s and more.
        return {"name": "daemon_scale", "build": label, "vms": n, "interval_ms": interval_ms,
                "hog": bool(hog),
                "cpu_per_vm_pct": round((c1 - c0) / ((t1 - t0) * 1000) / n * 100, 3),
                "cpu_cores": round((c1 - c0) / ((t1 - t0) * 1000), 3),
                "status_p99_ms": round(p99(st_lat), 1), "status_max_ms": round(max(st_lat), 1),
                "vm_show_p99_ms": round(p99(show_lat), 1),
                "tick_gap_p99_ms": p99(gaps), "tick_gap_samples": len(gaps),
                "tick_gap_p50_ms": sorted(gaps)[len(gaps) // 2] if gaps else None,
                "tick_evenness": evenness(per_vm),
                "vms_without_2_gaps": n - sum(1 for g in per_vm.values() if len(g) >= 2),
                "attach_cpu_ms_per_vm": round(attach_cpu / n, 1),
                "ctl_wait_ms_per_wakeup": wait, "client_rt": CLIENT_RT,
                "window_s": round(t1 - t0, 1)}
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
        for h in hogs:
            h.kill()
            h.wait()
        log.close()
        subprocess.call(["rm", "-rf", d])


CLIENT_RT = False


def main():
    global CLIENT_RT
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(2))
        CLIENT_RT = True
    except (OSError, AttributeError):
        pass
    if not os.path.exists(CUR):
        print("daemon_scale: %s not built" % CUR, file=sys.stderr)
        return 1
    before = os.environ.get("MEMTIDED_BEFORE")
    for case in CASES.split():
        n, iv, hog = (int(x) for x in case.split(":"))
        builds = ([(before, "before")] if before else []) + [(CUR, "after" if before else "current")]
        for binary, label in builds:
            try:
                print(json.dumps(run(binary, label, n, iv, hog)), flush=True)
            except Exception as e:  # one case failing must not hide the others
                print("daemon_scale: %s" % e, file=sys.stderr)
    return 0


sys.exit(main())
