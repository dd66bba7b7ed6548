#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""console.py: follow a guest's console log, as QEMU writes it, for the workload's lines.

QEMU's serial port writes the guest's output to the log as the guest sends it, a few bytes at
a time, so a reader that keeps up with the writer often finds half a line at the end of the
file.  A follower that matched that half and went on would lose the line (its head and its
tail each fail the pattern): scenario 4 once waited 180 s for "WL-PASS 10" that had been read
in two pieces.  Here a line counts only once its newline has arrived.

As a module: Console(path).wait(pattern, timeout) -> (re.Match, host monotonic ms at arrival);
Console.skip() forgets what is written so far.
As a program: console.py LOG PATTERN TIMEOUT_S prints "MS LINE" for the first matching line
(MS on the host's CLOCK_MONOTONIC, memtided's log clock) and exits 0, or exits 1 at the timeout.
"""
import os
import re
import sys
import time


class Console:
    def __init__(self, path):
        self.f = open(path, "rb")
        self.partial = b""

    def skip(self):
        """Forget every line written so far: the next wait sees only new ones."""
        self.f.seek(0, os.SEEK_END)
        self.partial = b""

    def lines(self, timeout):
        """Yield (whole line without its newline, arrival ms) until timeout seconds pass."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            chunk = self.f.readline()
            if not chunk:
                time.sleep(0.01)
                continue
            self.partial += chunk
            if not self.partial.endswith(b"\n"):
                continue  # the writer is mid-line: wait for the rest
            line, self.partial = self.partial, b""
            yield line.rstrip(b"\r\n").decode(errors="replace"), int(time.monotonic() * 1000)

    def wait(self, pattern, timeout):
        rx = re.compile(pattern)
        for line, ms in self.lines(timeout):
            m = rx.search(line)
            if m:
                return m, ms
        raise RuntimeError("no console line matching %r within %d s" % (pattern, timeout))


def main():
    if len(sys.argv) != 4:
        print("usage: console.py LOG PATTERN TIMEOUT_S", file=sys.stderr)
        return 2
    try:
        m, ms = Console(sys.argv[1]).wait(sys.argv[2], float(sys.argv[3]))
    except (OSError, RuntimeError) as e:
        print("console.py: %s" % e, file=sys.stderr)
        return 1
    print(ms, m.string)
    return 0


if __name__ == "__main__":
    sys.exit(main())
