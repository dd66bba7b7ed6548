#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# libvirtd_up.sh: start virtlogd and libvirtd (monolithic, as Debian 12 has them) unless they
# run already, for the tests that use the host's real libvirtd.
#
# The daemons outlive the test that starts them, so they are started with every descriptor
# but stdin, stdout and stderr closed: a test run under `flock LOCK` (or by a CI harness
# holding pipes) must not hand its lock or pipes to a daemon, which would hold the lock for
# as long as the daemon lives.  Never `libvirtd -l` (it fails here without network sockets).
start() { python3 -c 'import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], close_fds=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL).returncode)' "$@"; }
pgrep -x virtlogd >/dev/null || start virtlogd -d || exit 1
pgrep -x libvirtd >/dev/null || start libvirtd -d || exit 1
