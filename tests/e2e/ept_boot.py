#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ept_boot.py: boot the e2e guest again and again under TCG with memtide's ept plugin, and
ask for a sampling window right after each start, as memtided does when it attaches a guest
that is starting (a libvirt hook, a host reboot).  Used by scenario 17.

Each boot: QEMU starts paused (-S, as libvirt starts it), is resumed over QMP, and 5-25 ms
later (stepping by 5 ms from boot to boot; --steps 3: 5-15 ms) `memtidectl ept-mode TABLE window 200ms` asks
for a window; another is asked every 500 ms after.  The boot counts as up once the guest has
printed on its console and the plugin has run 3 windows (read with `memtidectl --json
ept-status`), and as stuck when that has not happened within DEADLINE seconds: then the
plugin's counters say where it stopped (a heartbeat that no longer moves: no vCPU runs).  A stuck QEMU is killed (SIGTERM, then
SIGKILL after 5 s: a deadlocked one ignores SIGTERM).

Prints one JSON object per boot and a summary object last.
"""
import argparse, json, os, socket, subprocess, time

ap = argparse.ArgumentParser()
ap.add_argument("--plugin", required=True)
ap.add_argument("--kernel", required=True)
ap.add_argument("--initrd", required=True)
ap.add_argument("--ctl", required=True, help="memtidectl")
ap.add_argument("--dir", required=True)
ap.add_argument("--boots", type=int, default=20)
ap.add_argument("--ask-ms", type=int, default=20,
                help="boots ask their first window 0.25 .. 1.25 x this many ms after the resume")
ap.add_argument("--steps", type=int, default=5, choices=range(1, 6),
                help="boots step through the first STEPS of those 5 delays (3: 5, 10, 15 ms)")
ap.add_argument("--deadline", type=float, default=30)
a = ap.parse_args()


def status(table):
    r = subprocess.run([a.ctl, "--json", "ept-status", table], capture_output=True, text=True)
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


def ask(table):
    subprocess.run([a.ctl, "ept-mode", table, "window", "200ms"], capture_output=True)


def wait_for(pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def boot(i):
    d = os.path.join(a.dir, "boot%d" % i)
    os.makedirs(d, exist_ok=True)
    table, qmp, con = d + "/guest.ept", d + "/qmp.sock", d + "/console.log"
    q = subprocess.Popen(
        ["qemu-system-x86_64", "-S", "-accel", "tcg", "-smp", "2", "-m", "512", "-display", "none",
         "-nodefaults", "-no-reboot", "-kernel", a.kernel, "-initrd", a.initrd, "-append",
         "console=ttyS0 quiet panic=-1 memtide.agent=0 memtide.run=memload,hotpages,32,64,300",
         "-serial", "file:" + con, "-qmp", "unix:%s,server=on,wait=off" % qmp,
         "-plugin", "%s,table=%s,ram=512M" % (a.plugin, table)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(d + "/qemu.err", "w"))
    res = {"boot": i}
    try:
        if not wait_for(lambda: os.path.exists(table) and os.path.exists(qmp), 20):
            res.update(up=False, why="QEMU made no table or QMP socket in 20 s")
            return res
        s = socket.socket(socket.AF_UNIX)
        s.connect(qmp)
        f = s.makefile("rw")
        f.readline()
        f.write(json.dumps({"execute": "qmp_capabilities"}) + "\n")
        f.flush()
        while "return" not in json.loads(f.readline()):
            pass
        # The window is asked ask_ms after the resume is sent, not after QEMU answers it: the
        # freeze needed a request in the first tens of milliseconds, while the BIOS runs.
        # Boots step through 0.25, 0.5, ... 1.25 x ask_ms to cover that moment.
        ask_s = a.ask_ms * (1 + i % a.steps) / 4000
        f.write(json.dumps({"execute": "cont"}) + "\n")
        f.flush()
        t0 = time.monotonic()
        time.sleep(ask_s)
        ask(table)
        res["ask_ms"] = round(ask_s * 1000)
        nxt = time.monotonic() + 0.5
        st = {}
        while time.monotonic() < t0 + a.deadline:
            st = status(table)
            if os.path.getsize(con) > 0 and st.get("windows", 0) >= 3:
                break
            if time.monotonic() >= nxt:
                ask(table)
                nxt += 0.5
            time.sleep(0.05)
        up = os.path.getsize(con) > 0 and st.get("windows", 0) >= 3
        res.update(up=up, s=round(time.monotonic() - t0, 2), console_bytes=os.path.getsize(con),
                   **{k: st.get(k) for k in ("windows", "resets", "on", "heartbeat_age_ms")})
        s.close()
        return res
    finally:
        q.terminate()
        try:
            q.wait(5)
            res["exited_on_sigterm"] = True
        except subprocess.TimeoutExpired:
            q.kill()
            q.wait()
            res["exited_on_sigterm"] = False


stuck = 0
secs = []
for i in range(a.boots):
    r = boot(i)
    print(json.dumps(r), flush=True)
    if r.get("up"):
        secs.append(r["s"])
    else:
        stuck += 1
secs.sort()
print(json.dumps({"summary": True, "boots": a.boots, "stuck": stuck,
                  "median_s_to_3_windows": secs[len(secs) // 2] if secs else None}), flush=True)
