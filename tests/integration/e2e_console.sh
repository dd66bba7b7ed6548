#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# e2e_console.sh - tests/e2e/console.py, the follower the e2e scenarios read the guest's
# console with: a line QEMU has written only half of is not a line yet (it is matched once
# its newline arrives, whole), later lines are still seen, skip() forgets what came before,
# and the program form prints the arrival time and exits 1 at its timeout.  No guest is
# needed: the "console" is a file this test writes, piece by piece, as QEMU's serial does.
set -u
work=$(mktemp -d /tmp/e2e_console.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
echo "1..4"

PYTHONPATH=tests/e2e python3 - "$work/console.log" <<'PY'
import sys
from console import Console

path = sys.argv[1]
log = open(path, "ab", buffering=0)
log.write(b"boot noise\r\n")
con = Console(path)
n = 0

def check(ok, what):
    global n
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))

def first(pattern, timeout):
    """The first whole line matching pattern: its groups (with an arrival time on the host's
    monotonic clock), or what went wrong, as a string."""
    try:
        m, ms = con.wait(pattern, timeout)
    except RuntimeError as e:
        return str(e)
    return m.groups() if ms > 0 else "arrival time %d ms" % ms

# The writer is mid-line: the head is read, but it is no line yet.
log.write(b"WL-PASS 10 bad=0 pa")
half = first(r"WL-PASS 10 bad=(\d+) pages=(\d+)", 0.3)
log.write(b"ges=114688 pswpout=7\r\nWL-PASS-BEGIN 11\r\n")
whole = first(r"WL-PASS 10 bad=(\d+) pages=(\d+)", 5)
check(isinstance(half, str) and half.startswith("no console line") and whole == ("0", "114688"),
      "a line written in two pieces is matched once, whole (half: %s; whole: %s)" % (half, whole))
nxt = first(r"WL-PASS-BEGIN (\d+)", 5)
check(nxt == ("11",), "the line after it is seen too (%s)" % (nxt,))
log.write(b"WL-PASS-BEGIN 12\n")
con.skip()
log.write(b"WL-PASS-BEGIN 13\n")
after = first(r"WL-PASS-BEGIN (\d+)", 5)
check(after == ("13",), "skip() forgets the lines written before it (next: %s)" % (after,))
PY
[ $? = 0 ] || echo "not ok - the module checks stopped early (see above)"
n=3

printf 'WL-GROW 300 pswpin=1\n' >>"$work/console.log"
out=$(python3 tests/e2e/console.py "$work/console.log" '^WL-GROW ' 5)
rc=$?
python3 tests/e2e/console.py "$work/console.log" '^WL-NEVER' 0.3 2>"$work/err"
rc2=$?
if [ $rc = 0 ] && [[ "$out" =~ ^[0-9]+\ WL-GROW\ 300\ pswpin=1$ ]] && [ $rc2 = 1 ] &&
	grep -q "no console line matching" "$work/err"; then
	ok "console.py prints 'MS LINE' for a match, exits 1 with a message at its timeout"
else
	nok "console.py: match rc $rc '$out', timeout rc $rc2: $(cat "$work/err")"
fi
