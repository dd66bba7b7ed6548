#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# agent_cli.sh - memtide-agent as a program: flags, defaults with no config file, errors,
# the hint and reclaim subcommands, and real cgroup v2 reclaim where this machine has it.
#
# The agent's protocol behaviour is tested in tests/unit/test_agent_link.c; this script
# checks what an operator or an init system meets.  Prints TAP.
set -u
BUILD=${BUILD:-build}
AGENT=${MEMTIDE_BIN:-$PWD/$BUILD/bin}/memtide-agent
TMP=$(mktemp -d /tmp/memtide-agent-cli.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check() { if eval "$2"; then ok "$1"; else nok "$1"; fi; }

[ -x "$AGENT" ] || { echo "not ok 1 - $AGENT not built"; exit 1; }

out=$("$AGENT" --version); rc=$?
check "--version exits 0 and names the protocol" '[ $rc -eq 0 ] && [[ $out == "memtide-agent "*"protocol"* ]]'

out=$("$AGENT" --help); rc=$?
check "--help documents hint, reclaim and the defaults" \
	'[ $rc -eq 0 ] && [[ $out == *"hint hot|cold"* ]] && [[ $out == *"reclaim"* ]] && [[ $out == *"port=org.memtide.agent.0"* ]]'

desc=$(file -b "$AGENT")
if [[ $BUILD == *san* ]]; then
	skip "static link: sanitizer builds link the agent dynamically"
else
	check "statically linked (runs in any guest with no other files)" '[[ $desc == *"statically linked"* ]]'
fi

# No config file, no flags: the defaults; no virtio port on this host, so it keeps retrying
# and must not exit.  `timeout` ends the observation window (exit 124 = still running).
timeout 1.5 "$AGENT" -v -v --hint-socket= >"$TMP/run.log" 2>&1; rc=$?
check "with no config and no host it keeps running (never exits because the host is away)" \
	'[ $rc -eq 124 ] && grep -q "starting (transport auto: vsock, then virtio-serial)" "$TMP/run.log" && grep -q "retrying in" "$TMP/run.log"'

# --daemon returns once the child is ready (pidfile written): no polling for the file.
# The daemon is stopped by its own pid, and the wait for its exit is tail --pid.
"$AGENT" -d --pidfile="$TMP/agent.pid" --log-file="$TMP/daemon.log" --hint-socket="$TMP/hint.sock" \
	--transport=unix --unix-path="$TMP/nohost.sock"; rc=$?
pid=$(cat "$TMP/agent.pid" 2>/dev/null)
check "--daemon detaches, writes its pidfile and keeps running" '[ $rc -eq 0 ] && [ -n "$pid" ] && kill -0 "$pid"'
out=$("$AGENT" hint --socket="$TMP/hint.sock" need 1048576 1000 2>&1); rc=$?
check "the daemon's hint socket answers (no host yet: the hint is refused, with a reason)" \
	'[ $rc -eq 1 ] && [[ $out == "error host not connected"* ]]'
[ -n "$pid" ] && kill "$pid"
timeout 10 tail --pid="$pid" -f /dev/null; rc=$?
check "SIGTERM stops the daemon cleanly; pidfile and hint socket removed" \
	'[ $rc -eq 0 ] && [ ! -e "$TMP/agent.pid" ] && [ ! -e "$TMP/hint.sock" ] && grep -q stopped "$TMP/daemon.log"'

out=$("$AGENT" --report-interval-ms=5 2>&1); rc=$?
check "an out-of-range flag is refused with exit 2 and a reason" '[ $rc -eq 2 ] && [[ $out == *"report_interval_ms"* ]]'

printf 'transport = unix\nbogus_key = 1\n' >"$TMP/bad.conf"
out=$("$AGENT" -c "$TMP/bad.conf" 2>&1); rc=$?
check "a bad config file line is named (file:line) and refused" '[ $rc -eq 2 ] && [[ $out == *"bad.conf:2"* ]]'

printf 'transport = unix\nunix_path = /tmp/x.sock\n' >"$TMP/good.conf"
out=$("$AGENT" -c "$TMP/good.conf" --report-interval-ms=500 --dump-config); rc=$?
check "config file then flags, flags last" '[ $rc -eq 0 ] && [[ $out == *"transport=unix"* ]] && [[ $out == *"report_interval_ms=500"* ]]'

out=$("$AGENT" hint --socket="$TMP/none.sock" need 1048576 1000 2>&1); rc=$?
check "hint with no agent running fails with a reason" '[ $rc -eq 1 ] && [[ $out == *"none.sock"* ]]'

out=$("$AGENT" reclaim --floor-bytes=4503599627370496 16777216); rc=$?
check "reclaim refuses at the MemAvailable floor and says so" \
	'[ $rc -eq 1 ] && [[ $out == *"\"result\":\"floor\""* ]] && [[ $out == *"\"freed_bytes\":0"* ]]'

# Real reclaim through the root cgroup v2's memory.reclaim.
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -z "$cg2" ]; then
	skip "memcg reclaim: no cgroup2 mount"
elif [ ! -w "$cg2/memory.reclaim" ]; then
	skip "memcg reclaim: $cg2/memory.reclaim absent - the memory controller is not on the cgroup v2 root here (cgroup v1 memory)"
else
	# 64 MiB of page cache to reclaim
	dd if=/dev/zero of="$TMP/cache" bs=1M count=64 status=none && cat "$TMP/cache" >/dev/null
	out=$("$AGENT" reclaim --scope=any --floor-percent=0 --floor-bytes=0 33554432); rc=$?
	echo "# $out"
	check "memcg reclaim frees memory and reports it" \
		'[ $rc -eq 0 ] && [[ $out == *"\"method\":\"memcg\""* ]] && ! [[ $out == *"\"freed_bytes\":0,"*"\"mem_available"* ]]'
fi
echo "1..$n"
