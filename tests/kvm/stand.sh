#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stand.sh: the KVM host stand.  A stock Debian 12 KVM host, booted under this machine's TCG, with
# the machine's own userland (QEMU, libvirtd, memtide's build) inside it; guests there run with
# -accel kvm: hardware-style virtualization with nested page tables (AMD NPT, emulated by TCG).
#
#   tests/kvm/stand.sh run SCRIPT [ARGS...]   boot the stand, run SCRIPT in it (cwd: this tree,
#                                             E2E_ACCEL=kvm, so tests/e2e scenarios run unchanged
#                                             with KVM guests), bring back the JSON figures it
#                                             wrote ($BUILD/e2e/kvm_*.json), stop the stand
#   tests/kvm/stand.sh shell                  the same stand with a shell on its console (exit
#                                             the shell, or ^A x, to stop it)
#   tests/kvm/stand.sh selftest               tests/kvm/selftest.sh: KVM works, nested paging is
#                                             on, a KVM guest's speed against plain TCG's
#
# How (docs/e2e.md, "The KVM host stand"): the outer guest ("L1") boots the e2e guest's own
# vmlinux under -accel tcg -cpu max with tests/kvm/l1_image.sh's initramfs, whose /init
# (tests/kvm/l1_init.sh) loads kvm-amd, mounts the machine's root read-only over 9p under an
# overlay in L1's RAM, and chroots into it.  A second 9p export, a fresh directory under /tmp,
# is mounted read-write at its own path inside: the script's output, its JSON and the kept
# e2e work directories come back through it.  Nothing inside can write the machine's disk.
# Everything a run leaves is copied to $BUILD/kvm/runs/NAME/ (out.log: the script's output, also
# streamed here; console.log: L1's console; keep/: the e2e work directories; timing.json).
#
# It stops everything it started, also on failure, ^C and time-out: L1 is one QEMU process,
# killed by PID (SIGTERM, 5 s, SIGKILL), and everything inside dies with it.
# Settings: STAND_MEM_MIB (8192), STAND_SMP (2), STAND_TIMEOUT (run: 1200 s), BUILD.
set -u
BUILD=${BUILD:-build}
STAND_MEM_MIB=${STAND_MEM_MIB:-8192}
STAND_SMP=${STAND_SMP:-2}
STAND_TIMEOUT=${STAND_TIMEOUT:-1200}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1

usage() {
	sed -n '7,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
run) [ $# -ge 1 ] || usage ;;
shell) ;;
selftest) exec bash "$here/selftest.sh" "$@" ;;
*) usage ;;
esac

# A stand can only help where QEMU emulates SVM; say so plainly rather than fail inside.
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "not ok - stand: qemu-system-x86_64 is not installed (scripts/deps.sh)"
	exit 1
fi
# What the inside needs is built here, on the machine (the inside cannot write this tree).
if ! make --no-print-directory -s all >"/tmp/memtide-stand-make.$$" 2>&1 ||
	! BUILD=$BUILD "$here/l1_image.sh" >>"/tmp/memtide-stand-make.$$" 2>&1; then
	cat "/tmp/memtide-stand-make.$$"
	rm -f "/tmp/memtide-stand-make.$$"
	echo "not ok - stand: cannot build the tree, the e2e guest or L1's image (above)"
	exit 1
fi
rm -f "/tmp/memtide-stand-make.$$"
# A script that boots the integration guest (tests/integration/host_guest.sh) needs its image
# too: the inside cannot download the kernel package it is made from.
if [ "$mode" = run ] && grep -q 'host_guest.sh' "$1" 2>/dev/null &&
	! (IT_GUEST_LIB=1 && . "$here/../integration/host_guest.sh" && it_guest_build); then
	echo "not ok - stand: cannot build the integration guest (tests/integration/host_guest.sh)"
	exit 1
fi

name=shell
if [ "$mode" = run ]; then
	name=$(basename "$1" .sh)
fi
run_dir=$(mktemp -d /tmp/memtide-stand.XXXXXX)
logs=$PWD/$BUILD/kvm/runs/$name
l1_pid= tail_pid= watch_pid=

stop_l1() {
	[ -n "$l1_pid" ] || return 0
	kill "$l1_pid" 2>/dev/null
	local n=0
	while kill -0 "$l1_pid" 2>/dev/null && [ $n -lt 50 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 "$l1_pid" 2>/dev/null
	wait "$l1_pid" 2>/dev/null
	l1_pid=
}

cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null
	stop_l1
	[ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null && wait "$tail_pid" 2>/dev/null
	if [ -d "$run_dir" ]; then
		rm -rf "$logs"
		mkdir -p "$logs"
		cp -a "$run_dir/." "$logs/" 2>/dev/null
		rm -rf "$logs/json" "$logs/cmd.sh" "$logs/shellrc"
		rm -rf "$run_dir"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# What runs inside, in the chroot (l1_init.sh calls it with STAND_DIR set).  The script's own
# output goes to out.log in the export, streamed out below; L1's kernel talks on the console.
q() { printf '%q ' "$@"; }
env_lines="cd $(q "$root")
export BUILD=$(q "$BUILD") E2E_ACCEL=kvm E2E_KEEP=1 MEMTIDE_BIN=$(q "$root/$BUILD/bin") STAND=1"
# The harness's own settings go in as they are set here (E2E_GUEST_APPEND, E2E_RETURN, ...).
for k in $(compgen -e); do
	case $k in
	E2E_ACCEL | E2E_KEEP) ;;
	E2E_* | SPEED_* | RECLAIM_HOST_ARGS | RSS_*) env_lines+=$'\n'"export $k=$(q "${!k}")" ;;
	esac
done
if [ "$mode" = run ]; then
	cat >"$run_dir/cmd.sh" <<EOF
$env_lines
exec >"\$STAND_DIR/out.log" 2>&1
touch /tmp/stand-start
bash $(q "$@")
rc=\$?
# The figures this run wrote and the work directories the harness kept (E2E_KEEP=1).
mkdir -p "\$STAND_DIR/json" "\$STAND_DIR/keep"
find "\$BUILD/e2e" -maxdepth 1 -name 'kvm_*.json' -newer /tmp/stand-start \\
	-exec cp {} "\$STAND_DIR/json/" \\;
for d in /tmp/memtide-e2e-*; do [ -d "\$d" ] && cp -a "\$d" "\$STAND_DIR/keep/"; done
exit \$rc
EOF
else
	printf '%s\n%s\n' "$env_lines" \
		'PS1="(stand) \w# "; echo "KVM host stand: this tree is writable (in RAM), results: $STAND_DIR"' \
		>"$run_dir/shellrc"
fi
: >"$run_dir/out.log"

t0=$(date +%s.%N)
qemu=(qemu-system-x86_64 -accel tcg -cpu max -smp "$STAND_SMP" -m "$STAND_MEM_MIB"
	-nographic -no-reboot -nic none
	-kernel "$PWD/$BUILD/e2e/guest/vmlinux" -initrd "$PWD/$BUILD/kvm/l1.cpio"
	-append "console=ttyS0 quiet panic=-1 memtide.stand_mode=$mode memtide.stand_dir=$run_dir"
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$run_dir,mount_tag=out,security_model=none,multidevs=remap")
if [ "$mode" = shell ]; then
	# <&0: an asynchronous command of a script reads /dev/null unless told otherwise.
	"${qemu[@]}" <&0 &
	l1_pid=$!
	wait "$l1_pid"
	l1_pid=
	exit 0
fi
"${qemu[@]}" </dev/null >"$run_dir/console.log" 2>&1 &
l1_pid=$!
tail -n +1 -F --pid="$l1_pid" "$run_dir/out.log" 2>/dev/null &
tail_pid=$!
# L1's own steps, from its console: up (chroot entered) and down (script over).
up=$(timeout 300 tail -n +1 -F --pid="$l1_pid" "$run_dir/console.log" 2>/dev/null |
	grep -a -m1 -E 'STAND-(UP|FAILED)' | tr -d '\r')
t_up=$(date +%s.%N)
if [[ $up != *STAND-UP* ]]; then
	echo "not ok - stand: L1 did not come up (${up:-no STAND-UP line in 300 s}); console:"
	tail -20 "$run_dir/console.log" | sed 's/^/# /'
	exit 1
fi
# In the background, waited for: bash runs a trap only once the foreground command is done, so
# a SIGTERM (tests/run.sh's own time-out, an operator's kill) would otherwise wait out
# STAND_TIMEOUT, and a SIGKILL after it would leave L1 running.
timeout "$STAND_TIMEOUT" tail --pid="$l1_pid" -f /dev/null &
watch_pid=$!
wait "$watch_pid"
timed_out=$?
watch_pid=
t_end=$(date +%s.%N)
if [ $timed_out -ne 0 ]; then
	echo "not ok - stand: $name did not finish within $STAND_TIMEOUT s; L1 stopped"
	exit 1
fi
wait "$l1_pid"
l1_pid=
wait "$tail_pid" 2>/dev/null
tail_pid=
mkdir -p "$BUILD/e2e"
# A speed check measured again (tests/run.sh, E2E_ATTEMPT): the earlier figures stay beside
# the new ones as NAME.1.json, NAME.2.json, as lib.sh keeps them outside the stand.
for f in "$run_dir"/json/*.json; do
	[ -f "$f" ] || continue
	dst=$BUILD/e2e/$(basename "$f")
	[ "${E2E_ATTEMPT:-1}" -gt 1 ] && [ -f "$dst" ] &&
		mv -f "$dst" "${dst%.json}.$((E2E_ATTEMPT - 1)).json"
	cp "$f" "$dst"
done
l1_up_s=$(awk -v a="$t0" -v b="$t_up" 'BEGIN { printf "%.1f", b - a }')
total_s=$(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')
uptime_up=$(echo "$up" | sed -n 's/.*STAND-UP \([0-9.]*\).*/\1/p')
printf '{"name":"%s","l1_up_wall_s":%s,"l1_uptime_at_chroot_s":%s,"total_wall_s":%s}\n' \
	"$name" "$l1_up_s" "${uptime_up:-0}" "$total_s" >"$run_dir/timing.json"
echo "# stand: L1 up in $l1_up_s s, $name and shutdown done at $total_s s (wall)"
if [ ! -f "$run_dir/status" ]; then
	# L1's kernel panicking is the stand's failure, not the scenario's result: tests/run.sh
	# runs the scenario once more on a fresh stand when it reads this line.  Seen on 7 Dec
	# 2026 in 3 of ~30 stand runs ("stack guard page was hit", "corrupted stack end detected
	# inside scheduler": Debian's 6.1 running KVM under TCG's emulated SVM), with memtided
	# doing nothing but vsock in one of them.
	panic=$(grep -a -m1 'Kernel panic' "$run_dir/console.log" | tr -d '\r')
	[ -n "$panic" ] && echo "not ok - stand: L1's kernel panicked before $name ended (the stand's kernel, not the scenario's result): $panic"
	echo "not ok - stand: $name ended without a status (L1 stopped early); console:"
	tail -20 "$run_dir/console.log" | sed 's/^/# /'
	exit 1
fi
exit "$(cat "$run_dir/status")"
