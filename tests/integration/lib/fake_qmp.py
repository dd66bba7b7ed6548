#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# fake_qmp.py: stand-in QEMU QMP monitors for memtided's isolation tests and benchmarks.
#
# A mock, and said so wherever it is used: a real QEMU per VM costs ~100 MiB and a CPU's
# worth of TCG boot each, and only a scripted peer can freeze, or send half a line, on cue.
# It speaks the part of QMP memtided uses (greeting, qmp_capabilities, qom-list, qom-set,
# qom-get guest-stats / free-page-reporting, query-memory-size-summary, query-balloon,
# balloon) on one unix socket per VM, all from one process.  Like QEMU it listens with a
# backlog of 1.
#
# usage: fake_qmp.py DIR NAME... ; sockets are DIR/NAME.qmp; commands arrive one per line on
# the FIFO DIR/fake_qmp.ctl:
#   freeze NAME   stop answering, reading and accepting (a SIGSTOPped QEMU, as seen from
#                 its socket: connections queue in the backlog, requests go unanswered)
#   half NAME     answer the next request with half a line, then freeze
#   thaw NAME     answer again
# Every query-balloon is logged to DIR/fake_qmp.log as "NAME MONOTONIC_MS": the VM's ticks.
import json, os, select, socket, stat, sys, time

d, names = sys.argv[1], sys.argv[2:]
log = open(os.path.join(d, "fake_qmp.log"), "a", buffering=1)
ctl_path = os.path.join(d, "fake_qmp.ctl")
if os.path.exists(ctl_path) and not stat.S_ISFIFO(os.stat(ctl_path).st_mode):
    os.unlink(ctl_path)  # a writer that came first made a plain file: start over
if not os.path.exists(ctl_path):
    os.mkfifo(ctl_path)
ctl = os.open(ctl_path, os.O_RDONLY | os.O_NONBLOCK)
ctl_keep = os.open(ctl_path, os.O_WRONLY | os.O_NONBLOCK)  # never see EOF on the FIFO
GiB = 1 << 30


class Vm:
    def __init__(self, name):
        self.name = name
        self.mode = "ok"  # ok, half, frozen
        self.actual = GiB
        self.srv = socket.socket(socket.AF_UNIX)
        path = os.path.join(d, name + ".qmp")
        if os.path.exists(path):
            os.unlink(path)
        self.srv.bind(path)
        self.srv.listen(1)
        self.conns = {}


vms = [Vm(n) for n in names]
by_sock = {}


def reply(vm, c, obj):
    data = (json.dumps(obj) + "\r\n").encode()
    if vm.mode == "half":
        data = data[: len(data) // 2]
        vm.mode = "frozen"
        log.write("%s half-line\n" % vm.name)
    try:
        c.sendall(data)
    except OSError:
        pass


def handle(vm, c, req):
    cmd = req.get("execute")
    args = req.get("arguments", {})
    if cmd == "query-balloon":
        log.write("%s %d\n" % (vm.name, int(time.monotonic() * 1000)))
        return reply(vm, c, {"return": {"actual": vm.actual}})
    if cmd == "balloon":
        vm.actual = int(args.get("value", vm.actual))
        return reply(vm, c, {"return": {}})
    if cmd == "qom-list":
        ret = [{"name": "balloon0", "type": "child<virtio-balloon-pci>"}] \
            if args.get("path") == "/machine/peripheral" else []
        return reply(vm, c, {"return": ret})
    if cmd == "query-memory-size-summary":
        return reply(vm, c, {"return": {"base-memory": GiB, "plugged-memory": 0}})
    if cmd == "qom-get" and args.get("property") == "guest-stats":
        return reply(vm, c, {"return": {"last-update": int(time.time()), "stats": {
            "stat-available-memory": vm.actual // 2, "stat-free-memory": vm.actual // 4,
            "stat-total-memory": vm.actual, "stat-major-faults": 0,
            "stat-minor-faults": 0, "stat-swap-in": 0}}})
    if cmd == "qom-get" and args.get("property") == "free-page-reporting":
        return reply(vm, c, {"return": True})
    return reply(vm, c, {"return": {}})


while True:
    rl = [ctl]
    for vm in vms:
        if vm.mode == "frozen":
            continue
        rl.append(vm.srv)
        rl.extend(vm.conns)
    r, _, _ = select.select(rl, [], [], 0.5)
    if ctl in r:
        for line in os.read(ctl, 4096).decode().splitlines():
            w = line.split()
            for vm in vms:
                if len(w) == 2 and vm.name == w[1]:
                    vm.mode = {"freeze": "frozen", "half": "half", "thaw": "ok"}.get(w[0], vm.mode)
                    log.write("%s %s\n" % (vm.name, vm.mode))
    for vm in vms:
        if vm.mode == "frozen":
            continue
        if vm.srv in r:
            c, _ = vm.srv.accept()
            vm.conns[c] = b""
            c.sendall(b'{"QMP": {"version": {"qemu": {"major": 7, "minor": 2, "micro": 0}},'
                      b' "capabilities": []}}\r\n')
        for c in [c for c in vm.conns if c in r]:
            try:
                data = c.recv(65536)
            except OSError:
                data = b""
            if not data:
                del vm.conns[c]
                c.close()
                continue
            buf = vm.conns[c] + data
            while b"\n" in buf and vm.mode != "frozen":
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    handle(vm, c, json.loads(line))
            if c in vm.conns:
                vm.conns[c] = buf
