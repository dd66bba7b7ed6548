#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# zram_swap.sh: contrib/memtide-zram-swap, the host swap behind memtide-zram-swap.service, on
# this host's real zram, with a device of the test's own (ZRAM_STATE in the test's folder, a
# priority above any other swap; removed at the end, and recorded like tests/e2e/lib_zram.sh's
# devices so that a killed run's device is swept by the next).  Its pages are a process's
# own, paged out with MADV_PAGEOUT (lib/swap_hog.py): the helper guards swap in use, whoever
# owns it.
#   1 start adds a zram device and swaps on it
#   2 stop with pages in it refuses: exit 1, the swap stays on, and the message says how much
#     would come back and whether the host has the room, and how to force it
#   3 start after a refused stop keeps the device (the unit can be started again)
#   4 stop --force turns it off and removes it; the pages came back intact
#   5 stop of an empty device turns it off without a word of refusal
# The unit (ordering, sandbox, opt-in) is systemd_unit.sh's; the package's maintainer scripts
# and a host without zram are tests/packaging/systemd_guest.sh's.
set -u
BUILD=${BUILD:-build}
echo "1..5"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip_all() { for i in 1 2 3 4 5; do echo "ok $i # SKIP $*"; done; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root (a zram swap device)"
command -v swapon >/dev/null && command -v mkswap >/dev/null || skip_all "no swapon/mkswap (util-linux)"
[ -e /sys/class/zram-control/hot_add ] || modprobe zram num_devices=0 2>/dev/null
[ -e /sys/class/zram-control/hot_add ] || skip_all "no zram on this host"
dir=$(mktemp -d /tmp/memtide-it-zram.XXXXXX)
hog=
export ZRAM_STATE=$dir/zram-swap.dev ZRAM_CONF=$dir/zram-swap.conf ZRAM_SIZE=128M ZRAM_PRIORITY=32767
Z=contrib/memtide-zram-swap
dev() { cat "$ZRAM_STATE" 2>/dev/null; }
cleanup() {
	[ -n "$hog" ] && kill "$hog" 2>/dev/null && wait "$hog" 2>/dev/null
	d=$(dev)
	if [ -n "$d" ]; then
		swapoff "/dev/zram$d" 2>/dev/null
		echo "$d" >/sys/class/zram-control/hot_remove 2>/dev/null
		rm -f "/tmp/memtide-e2e-zram.$d"
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
: >"$ZRAM_CONF" # the host's /etc/memtide/zram-swap.conf is not this test's
is_swap() { grep -q "^/dev/zram$1 " /proc/swaps; }

sh "$Z" start >"$dir/start.log" 2>&1
rc=$?
d=$(dev)
[ -n "$d" ] && echo $$ >"/tmp/memtide-e2e-zram.$d" # lib_zram.sh sweeps it if this test is killed
[ $rc = 0 ] && [ -n "$d" ] && is_swap "$d"
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/start.log"
check $rc "start: zram${d:-?} is swap at priority $ZRAM_PRIORITY ($(cat "$dir/start.log"))"
[ $rc = 0 ] || exit 1

python3 tests/integration/lib/swap_hog.py 32 "$dir/hog" &
hog=$!
for _ in $(seq 300); do { [ -s "$dir/hog" ] || ! kill -0 $hog 2>/dev/null; } && break; sleep 0.1; done
used=$(awk -v d="/dev/zram$d" '$1 == d { print $4 }' /proc/swaps)
echo "# a process's 32 MiB paged out: $(cat "$dir/hog" 2>/dev/null); zram$d uses ${used:-?} KiB"
sh "$Z" stop >"$dir/stop.log" 2>&1
rc=$?
sed 's/^/# stop: /' "$dir/stop.log"
[ "${used:-0}" -gt 0 ] && [ $rc = 1 ] && is_swap "$d" && grep -q 'refusing' "$dir/stop.log" &&
	grep -qE "read all [0-9]+ MiB back into RAM" "$dir/stop.log" &&
	grep -qE 'the host (has|does NOT have) the room \([0-9]+ MiB available' "$dir/stop.log" &&
	grep -q 'stop --force' "$dir/stop.log"
check $? "stop with ${used:-0} KiB in it refuses (exit $rc), leaves the swap on, says how much would come back, whether the host has the room, and how to force it"

sh "$Z" start >"$dir/start2.log" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(dev)" = "$d" ] && is_swap "$d" && grep -q 'keeping it' "$dir/start2.log"
check $? "start after the refused stop keeps zram$d (exit $rc: $(cat "$dir/start2.log"))"

sh "$Z" stop --force >"$dir/force.log" 2>&1
rc=$?
kill -USR1 $hog
for _ in $(seq 300); do [ -s "$dir/hog.check" ] && break; sleep 0.1; done
[ $rc = 0 ] && ! is_swap "$d" && [ ! -e "/sys/block/zram$d" ] && [ -z "$(dev)" ] &&
	[ "$(cat "$dir/hog.check" 2>/dev/null)" = intact ]
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/force.log"
check $rc "stop --force swaps zram$d off and removes it; the process's pages came back $(cat "$dir/hog.check" 2>/dev/null)"
rm -f "/tmp/memtide-e2e-zram.$d"
kill $hog 2>/dev/null
wait $hog 2>/dev/null
hog=

sh "$Z" start >/dev/null 2>&1 && d=$(dev) && echo $$ >"/tmp/memtide-e2e-zram.$d" &&
	sh "$Z" stop >"$dir/stop2.log" 2>&1 && ! is_swap "$d" && [ ! -e "/sys/block/zram$d" ] &&
	! grep -q refusing "$dir/stop2.log"
check $? "stop of an empty device turns it off and removes it ($(cat "$dir/stop2.log" 2>/dev/null))"
rm -f "/tmp/memtide-e2e-zram.$d"
exit $failed
