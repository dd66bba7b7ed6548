#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# run_dirs.sh: what memtided makes under /run, and what it leaves alone.
#   1 the tmpfiles entry (contrib/tmpfiles.d/memtide.conf, run by systemd-tmpfiles into a
#     root of its own, with this host's groups) makes /run/memtide/ept root:kvm 1770: QEMU
#     (libvirt's qemu user, in group kvm) writes its table there, nobody else; never 1777
#   2 memtided as the host's (default paths) makes /run/memtide/ept the same way and
#     /run/memtide/vsock root:kvm 0770
#   3 a try-out with a control socket and a state directory of its own (--socket,
#     --state-dir) touches nothing under /run: ept_dir, vsock_dir and DAMON's claim follow
#     the state directory, and its log says so
# 2 and 3 run memtided (libvirt's in-process test driver) in a private mount namespace whose
# /run and /var/lib are empty tmpfs (unshare -m), so the host's are never touched either way.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
echo "1..3"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip_all() { for i in 1 2 3; do echo "ok $i # SKIP $*"; done; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root (a mount namespace, chown to group kvm)"
getent group kvm >/dev/null || skip_all "no group kvm on this host"
dir=$(mktemp -d /tmp/memtide-it-run.XXXXXX)
trap 'rm -rf "$dir"' EXIT
kvm=$(getent group kvm | cut -d: -f3)

mkdir -p "$dir/root/etc" "$dir/root/usr/lib/tmpfiles.d"
cp /etc/passwd /etc/group "$dir/root/etc/"
cp contrib/tmpfiles.d/memtide.conf "$dir/root/usr/lib/tmpfiles.d/"
systemd-tmpfiles --root="$dir/root" --create memtide.conf 2>"$dir/tmpfiles.err"
got=$(stat -c '%a %u %g' "$dir/root/run/memtide/ept" 2>/dev/null)
[ "$got" = "1770 0 $kvm" ]
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dir/tmpfiles.err"
check $rc "tmpfiles: /run/memtide/ept is '${got:-missing}' (mode uid gid), want 1770 0 $kvm"

# In a private /run: memtided with the given flags until its control socket answers, then
# stopped; prints what it left under /run (mode uid gid path) and its log.
in_private_run() {
	unshare -m bash -c '
		mount -n -t tmpfs tmpfs /run
		mount -n -t tmpfs tmpfs /var/lib # the default state dir, /var/lib/memtide, private too
		printf "[daemon]\nuri = test:///default\n" >"$D/memtided.conf"
		"$BIN/memtided" --foreground --config "$D/memtided.conf" --no-metrics "$@" >"$D/log" 2>&1 &
		p=$!
		for _ in $(seq 100); do "$BIN/memtidectl" --socket "$SOCK" status 2>/dev/null | grep -q "^test " && break; sleep 0.1; done
		kill $p; wait $p
		find /run -mindepth 1 -printf "%m %U %G %p\n" | sort' _ "$@"
}
out=$(D=$dir BIN=$BIN SOCK=/run/memtide/memtided.sock in_private_run)
echo "$out" | sed 's/^/# host memtided left: /'
grep -qx "1770 0 $kvm /run/memtide/ept" <<<"$out" && grep -qx "770 0 $kvm /run/memtide/vsock" <<<"$out" &&
	! grep -E '^[0-9]*[2367] ' <<<"$out" | grep -q .
check $? "memtided as the host's makes /run/memtide/ept root:kvm 1770 and /run/memtide/vsock root:kvm 0770, nothing world-writable"

out=$(D=$dir BIN=$BIN SOCK=$dir/ctl.sock in_private_run --socket "$dir/ctl.sock" --state-dir "$dir/state")
said=$(grep -o 'a state directory of its own.*' "$dir/log")
echo "# try-out left under /run: ${out:-nothing}; log: $said"
[ -z "$out" ] && [ -d "$dir/state/ept" ] && [ -d "$dir/state/vsock" ] &&
	grep -q "ept_dir $dir/state/ept, vsock_dir $dir/state/vsock follow it" <<<"$said"
check $? "a try-out with --socket and --state-dir of its own leaves /run untouched (ept_dir and vsock_dir under its state directory, said in its log)"
exit $failed
