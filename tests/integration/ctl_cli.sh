#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ctl_cli.sh: memtidectl's command line as memtidectl(1) describes it, against a memtided on
# libvirt's in-process test driver (one running domain, "test"; the policy goes through the
# driver's domain metadata as it would through libvirtd's):
#   1 -V and --version print the version and exit 0
#   2 memtidectl's options after the command (`status --json`, `vm show test --socket S`,
#     `--timeout` after), as virsh takes them
#   3 COMMAND --help prints the usage on stdout and exits 0, for every command
#   4 MEMTIDE_SOCKET names the socket for every command that talks to memtided (pointed at
#     nothing, each says so, naming it, and exits 3; version exits 0 all the same), and
#     --socket wins over it
#   5 policy set with several keys changes all or none: one bad value leaves every key as it
#     was; keys whose order passes through min > max (min=6G max=8G over max=4G) are taken
#     together
#   6 policy get and vm show print every key `policy get --json` has, in the words policy
#     set takes: its output set back changes nothing
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
echo "1..6"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
dir=$(mktemp -d /tmp/memtide-it-cli.XXXXXX)
mpid=
cleanup() {
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
S=$dir/ctl.sock
printf '[daemon]\nvsock_dir = none\n' >"$dir/memtided.conf"
"$BIN/memtided" --uri test:///default --foreground --socket "$S" --no-metrics \
	--config "$dir/memtided.conf" --state-dir "$dir/state" >"$dir/memtided.log" 2>&1 &
mpid=$!
for _ in $(seq 100); do "$BIN/memtidectl" --socket "$S" status 2>/dev/null | grep -q '^test ' && break; sleep 0.1; done
ctl() { "$BIN/memtidectl" "$@"; }
version=$(dpkg-parsechangelog -S Version 2>/dev/null)

v1=$(ctl -V) && v2=$(ctl --version) && [ "$(echo "$v1" | head -1)" = "memtidectl $version" ] && [ "$v1" = "$v2" ]
check $? "-V and --version: '$(echo "$v1" | head -1)'"

j=$(ctl status --json --socket "$S") && echo "$j" | python3 -c 'import json,sys; json.load(sys.stdin)' &&
	ctl vm show test --socket "$S" | grep -q '^test' &&
	ctl policy get test --json --socket="$S" --timeout 5s | python3 -c 'import json,sys; assert "policy" in json.load(sys.stdin)'
check $? "options after the command: status --json --socket S, vm show test --socket S, policy get test --json --socket=S --timeout 5s"

bad=
for c in status "vm show test" "vm history test" top "policy get test" "policy set test min=1G" \
	"attach test" "detach test" "release test" "resume test" "hook test started begin" \
	"ept-plugin x --memory 1G" "ept-status t" "ept-mode t off" "domxml-patch test" version; do
	# shellcheck disable=SC2086
	out=$(ctl $c --help --socket "$S" 2>/dev/null)
	rc=$?
	[ $rc = 0 ] && echo "$out" | grep -q '^Usage: memtidectl' || bad="$bad '$c' ($rc)"
done
[ -z "$bad" ]
check $? "COMMAND --help prints the usage and exits 0 for all 16 commands${bad:+; not:$bad}"

bad=
for c in status "vm show test" "top --count 1" "policy get test" "policy set test min=1G" \
	"attach test" "detach test" "release test" "resume test" "hook test started begin" version; do
	# shellcheck disable=SC2086
	out=$(MEMTIDE_SOCKET=$dir/nothing.sock ctl $c 2>&1)
	rc=$?
	want=3
	[ "$c" = version ] && want=0 # it prints its own version whatever memtided's state
	[ $rc = $want ] && echo "$out" | grep -q "$dir/nothing.sock" || bad="$bad '$c' ($rc)"
done
MEMTIDE_SOCKET=$S ctl status | grep -q '^test ' &&
	MEMTIDE_SOCKET=$dir/nothing.sock ctl --socket "$S" status | grep -q '^test '
rc=$?
[ -z "$bad" ] && [ $rc = 0 ]
check $? "MEMTIDE_SOCKET names the socket for all 11 commands that talk to memtided, and --socket wins${bad:+; not:$bad}"

before=$(ctl --socket "$S" policy get test --json)
ctl --socket "$S" policy set test min=1G headroom=64M priority=bogus >"$dir/set.out" 2>&1
rc_bad=$?
after=$(ctl --socket "$S" policy get test --json)
ctl --socket "$S" policy set test max=4G min=3G >/dev/null 2>&1 &&
	ctl --socket "$S" policy set test min=6G max=8G >/dev/null 2>&1
rc_order=$?
got=$(ctl --socket "$S" policy get test | grep -E '^(min|max)=' | xargs)
[ $rc_bad = 1 ] && [ "$before" = "$after" ] && grep -q priority "$dir/set.out" &&
	[ $rc_order = 0 ] && [ "$got" = "min=6G max=8G" ]
check $? "policy set: a bad value among three keys changes none (exit $rc_bad: $(cat "$dir/set.out")); min=6G max=8G over max=4G taken together ($got)"

ctl --socket "$S" policy set test ept_window=300ms cold_age=90s source=ept >/dev/null
json=$(ctl --socket "$S" policy get test --json)
text=$(ctl --socket "$S" policy get test)
show=$(ctl --socket "$S" vm show test | sed -n 's/^  policy: //p' | tr ' ' '\n')
missing=$(echo "$json" | python3 -c '
import json, sys
p = json.load(sys.stdin)["policy"]
for k in p:
    for suffix in ("_bytes", "_ms"):
        if k.endswith(suffix):
            k = k[: -len(suffix)]
    print(k)' | while read -r k; do
	grep -q "^$k=" <<<"$text" || echo "get:$k"
	grep -q "^$k=" <<<"$show" || echo "show:$k"
done | xargs)
# shellcheck disable=SC2046
ctl --socket "$S" policy set test $(echo "$text") >/dev/null &&
	[ "$(ctl --socket "$S" policy get test --json)" = "$json" ]
rc=$?
[ -z "$missing" ] && [ $rc = 0 ] && grep -q '^ept_window=300ms$' <<<"$text" && grep -q '^cold_age=90s$' <<<"$text"
check $? "policy get and vm show print every key of --json ($(echo "$text" | wc -l) keys${missing:+; missing: $missing}), and set back they change nothing"
exit $failed
