#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# swap_hog.py: a process whose memory sits in swap, standing in for the guest pages memtided
# pages out (tests/integration/zram_swap.sh on the host, tests/packaging/systemd_guest.sh in
# a guest).  The zram helper cannot tell a QEMU's pages from any other process's: swap in
# use is what it guards.
#
#   swap_hog.py MIB OUT
#
# Maps MIB MiB of private anonymous memory, writes a pattern that differs page by page (so
# zram stores every page, compressed), pages all of it out with madvise(MADV_PAGEOUT) (the
# call memtided makes on QEMU, here on itself), then writes "swapped KIB" (its VmSwap) to
# OUT.  On SIGUSR1 it reads every page back and writes "intact" or "corrupt N" to OUT.check.
# It runs until SIGTERM.
import ctypes
import hashlib
import mmap
import os
import signal
import sys

PAGE = 4096
MADV_PAGEOUT = 21  # linux/mman.h; Python's mmap module lacks the name on Debian 12

mib, out = int(sys.argv[1]), sys.argv[2]
size = mib << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def page(i):
    return hashlib.sha256(i.to_bytes(8, 'little')).digest() * (PAGE // 32)


for i in range(size // PAGE):
    m[i * PAGE:(i + 1) * PAGE] = page(i)
libc = ctypes.CDLL(None, use_errno=True)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
if libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(size), MADV_PAGEOUT) != 0:
    sys.exit('madvise(MADV_PAGEOUT): errno %d' % ctypes.get_errno())


def vm_swap_kib():
    for line in open('/proc/self/status'):
        if line.startswith('VmSwap:'):
            return int(line.split()[1])
    return 0


with open(out + '.tmp', 'w') as f:
    f.write('swapped %d\n' % vm_swap_kib())
os.rename(out + '.tmp', out)


def check(_sig, _frame):
    bad = sum(1 for i in range(size // PAGE) if m[i * PAGE:(i + 1) * PAGE] != page(i))
    with open(out + '.check.tmp', 'w') as f:
        f.write('intact\n' if bad == 0 else 'corrupt %d\n' % bad)
    os.rename(out + '.check.tmp', out + '.check')


signal.signal(signal.SIGUSR1, check)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
