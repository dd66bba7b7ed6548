#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""reclaim_host.py: a scripted host for scenario 7 (agent reclaim in a real guest).

Connects to the agent's virtio-serial socket (QEMU's chardev, server side), does the
handshake of docs/protocol.md, waits for two stats reports, then sends two reclaim requests
(page cache only, then anon allowed; with compaction, as memtided asks, unless argv[2] is "nocompact") and collects stats for a few intervals
after each.  "rate MIB" as argv[2]: one request for MIB, anon allowed, no compaction, 60 s
deadline: the guest's own reclaim rate (tests/kvm/reclaim_rate.sh).  Prints one JSON object of results on stdout; "RECLAIMED" on stderr when the
anon reply has arrived.  Exits 1 with a reason on stderr on any protocol surprise.
"""
import json
import socket
import struct
import sys
import time

MiB = 1 << 20


class Link:
    def __init__(self, path):
        deadline = time.monotonic() + 60
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.s.settimeout(1.0)
        self.buf = b""
        self.nid = 0

    def send(self, m):
        self.nid += 1
        m["id"] = self.nid
        b = json.dumps(m).encode()
        self.s.sendall(struct.pack(">I", len(b)) + b)
        return self.nid

    def recv(self, timeout):
        """One message, or None when nothing arrives within timeout seconds."""
        end = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if n > MiB:
                    raise RuntimeError("frame of %d bytes" % n)
                if len(self.buf) >= 4 + n:
                    m = json.loads(self.buf[4:4 + n])
                    self.buf = self.buf[4 + n:]
                    return m
            if time.monotonic() > end:
                return None
            try:
                chunk = self.s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                raise RuntimeError("agent closed the connection")
            self.buf += chunk

    def wait(self, pred, timeout, stats):
        """Messages until pred(m) holds; stats reports seen meanwhile go to the stats list."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = self.recv(end - time.monotonic())
            if m is None:
                break
            if m.get("type") == "stats":
                stats.append(m)
            elif m.get("type") == "error":
                raise RuntimeError("agent error: %s" % m)
            if pred(m):
                return m
        raise RuntimeError("timed out waiting")


def reclaim(link, stats, nbytes, scope, compact):
    rid = link.send({"type": "reclaim", "bytes": nbytes, "scope": scope,
                     "deadline_ms": 60000, "compact": compact})
    before = stats[-1]
    reply = link.wait(lambda m: m.get("type") == "reclaim_reply" and m.get("re") == rid,
                      90, stats)
    return before, reply


def main():
    link = Link(sys.argv[1])
    link.send({"type": "hello", "role": "host", "version_min": 1, "version_max": 1,
               "software": "e2e-reclaim-host 1", "caps": ["host.reclaim"]})
    stats = []
    hello = link.wait(lambda m: m.get("type") == "hello", 60, stats)
    link.wait(lambda m: m.get("type") == "stats" and len(stats) >= 2, 30, stats)

    if len(sys.argv) >= 4 and sys.argv[2] == "rate":
        _, r = reclaim(link, stats, int(sys.argv[3]) * MiB, "any", False)
        print(json.dumps({"result": r["result"], "freed_mib": r["freed_bytes"] / MiB,
                          "elapsed_ms": r["elapsed_ms"], "message": r.get("message", ""),
                          "steps_ms": "+".join(str(s["elapsed_ms"]) for s in r.get("steps", []))}))
        return 0
    _, file_reply = reclaim(link, stats, 100 * MiB, "file", False)
    link.wait(lambda m: m.get("type") == "stats", 10, stats)

    compact = not (len(sys.argv) >= 3 and sys.argv[2] == "nocompact")
    before, anon_reply = reclaim(link, stats, 200 * MiB, "any", compact)
    print("RECLAIMED", file=sys.stderr, flush=True)
    n = len(stats)
    link.wait(lambda m: m.get("type") == "stats" and len(stats) > n, 10, stats)
    after = stats[-1]

    out = {
        "caps": ",".join(hello.get("caps", [])),
        "file_result": file_reply["result"],
        "file_freed_mib": file_reply["freed_bytes"] // MiB,
        "anon_result": anon_reply["result"],
        "anon_methods": "+".join(s["method"] for s in anon_reply.get("steps", [])),
        "anon_freed_mib": anon_reply["freed_bytes"] // MiB,
        "anon_message": anon_reply.get("message", ""),
        "anon_step_ms": "+".join(str(s["elapsed_ms"]) for s in anon_reply.get("steps", [])),
        "anon_elapsed_ms": anon_reply["elapsed_ms"],
        "memfree_gain_mib": (after["mem_free_bytes"] - before["mem_free_bytes"]) // MiB,
        "pswpout_pages": after["pswpout"] - before["pswpout"],
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, KeyError, ValueError) as e:
        print("reclaim_host: %s" % e, file=sys.stderr)
        sys.exit(1)
