#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""agent_kill_gate.py: kill a guest's agent while memtided holds memory from it.

Scenario 5 (agent loss) asks what memtided does when the agent falls silent with the
balloon inflated.  Killed at a fixed second, the agent may die before memtided took
anything, while memtided is still stepping down on its reports, or after the guest's own
pressure took the balloon back to the full size: a silence that then "holds" the guest at
1024 MiB cannot be told from a return to 1024 MiB (seen on the KVM stand, where the fill,
the guest's reclaim and the balloon are slower and their timing varies from run to run).
So the host picks the moment, from what it can see, and tells the guest over its control
port (tests/e2e/guest/build.sh, memtide.control_port):

  the balloon's actual (QMP query-balloon, the test's own monitor) is under --below-mib
  and stood within 1 MiB through two of memtided's ticks (its control socket's updated_ms,
  {"cmd":"vm"}, moved twice): memtided holds memory.  The actual need not have reached
  memtided's balloon target: on the KVM stand the guest's balloon driver lagged 27-96 MiB
  behind it for minutes, and a silence with an inflation in flight is what the controller
  stops where it is (its step 6), so that moment is as fair a test as any.

Polled every half second up to --timeout seconds (QMP and the control socket have no event
for "the balloon arrived and memtided kept it").  Prints one JSON line with what it saw at
the kill (or why there was none) and exits 0 when it sent "kill-agent", 1 when the moment
never came within the bound.

The port's connection stays open until the guest's console says it acted: data sent just
before the host end closes may be dropped with the connection.

Usage: agent_kill_gate.py --qmp SOCK --ctl SOCK --port SOCK --console FILE [--vm qemu]
                          [--below-mib 1024] [--timeout 120]
       agent_kill_gate.py --send WORD --port SOCK --console FILE   (e.g. end-run)
"""
import argparse
import json
import socket
import sys
import time

MiB = 1 << 20


def qmp_open(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    f = s.makefile("rw")
    json.loads(f.readline())  # greeting
    qmp_call(f, "qmp_capabilities")
    return s, f


def qmp_call(f, cmd):
    f.write(json.dumps({"execute": cmd}) + "\n")
    f.flush()
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            if "error" in m:
                raise RuntimeError("QMP %s: %s" % (cmd, m["error"].get("desc", m)))
            return m["return"]


def vm_status(path, name):
    """memtided's view of the VM, or None while it has none (not attached yet)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    try:
        s.connect(path)
        f = s.makefile("rw")
        f.write(json.dumps({"cmd": "vm", "name": name}) + "\n")
        f.flush()
        line = f.readline()
    except OSError:
        return None
    finally:
        s.close()
    try:
        return json.loads(line).get("vm")
    except ValueError:
        return None


def port_open(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    return s


def send_confirmed(s, word, console, expect, timeout=60):
    """Sends WORD on the open port S and waits for the console line EXPECT after it."""
    try:
        with open(console, "rb") as f:
            f.seek(0, 2)
            s.sendall(word.encode() + b"\n")
            t0 = time.monotonic()
            buf = b""
            while time.monotonic() - t0 < timeout:
                buf += f.read()
                if expect.encode() + b"\r" in buf or expect.encode() + b"\n" in buf:
                    return True
                time.sleep(0.1)
    finally:
        s.close()
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qmp")
    ap.add_argument("--ctl")
    ap.add_argument("--port", required=True)
    ap.add_argument("--console", required=True)
    ap.add_argument("--send")
    ap.add_argument("--vm", default="qemu")
    ap.add_argument("--below-mib", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()

    if a.send:
        done = {"end-run": "E2E-RUN-ENDED", "kill-agent": "E2E-AGENT-KILLED"}[a.send]
        return 0 if send_confirmed(port_open(a.port), a.send, a.console, done) else 1
    t0 = time.monotonic()
    out = {"sent": False}
    try:
        ps = port_open(a.port)  # held: the guest's read then waits for our word
        qs, qf = qmp_open(a.qmp)
    except (OSError, ValueError, RuntimeError) as e:
        out["why"] = "cannot reach QEMU's test monitor or the guest's control port: %s" % e
        print(json.dumps(out))
        return 1
    still_at = None  # the balloon's actual the ticks are counted at
    ticks_still = 0
    last_tick = None
    lowest = None
    seen = None
    while time.monotonic() - t0 < a.timeout:
        try:
            actual = qmp_call(qf, "query-balloon")["actual"]
        except (OSError, ValueError, RuntimeError) as e:
            # Seen on the KVM stand: the guest's QEMU gone, with nothing said, mid-run.
            out["why"] = ("QEMU's test monitor failed %.1f s into the wait (%s): the guest's "
                          "QEMU is gone or stuck; last seen %s"
                          % (time.monotonic() - t0, e, json.dumps(seen)))
            print(json.dumps(out))
            return 1
        vm = vm_status(a.ctl, a.vm)
        lowest = actual if lowest is None else min(lowest, actual)
        if vm is not None:
            bt = vm.get("balloon_target_bytes", 0)
            tick = vm.get("updated_ms")
            if still_at is None or abs(actual - still_at) >= MiB:
                still_at, ticks_still = actual, 0
            elif tick != last_tick:
                ticks_still += 1
            last_tick = tick
            seen = {"actual_mib": actual // MiB, "balloon_target_mib": bt // MiB,
                    "target_mib": vm.get("target_bytes", 0) // MiB,
                    "decision": vm.get("decision", ""),
                    "ticks_still": ticks_still}
            if actual < a.below_mib * MiB and ticks_still >= 2:
                break
        time.sleep(0.5)
    else:
        out["why"] = ("memtided held no memory within %d s: the balloon's lowest actual was "
                      "%d MiB (the kill needs it under %d MiB and still for two of "
                      "memtided's ticks); last seen %s" % (a.timeout, (lowest or 0) // MiB, a.below_mib,
                                                json.dumps(seen)))
        out["lowest_mib"] = (lowest or 0) // MiB
        print(json.dumps(out))
        return 1
    qs.close()
    out.update(seen)
    out["waited_s"] = round(time.monotonic() - t0, 1)
    out["sent"] = True
    if not send_confirmed(ps, "kill-agent", a.console, "E2E-AGENT-KILLED"):
        out["why"] = "the guest did not say E2E-AGENT-KILLED within 60 s of kill-agent"
        print(json.dumps(out))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
