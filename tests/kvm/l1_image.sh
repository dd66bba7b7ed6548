#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# l1_image.sh: the initramfs of the KVM host stand's outer guest ("L1"), built once and cached.
#
# L1 boots Debian 12's stock kernel, the very vmlinux the e2e guest boots
# (tests/e2e/guest/build.sh downloads and extracts it), under TCG with -cpu max: QEMU's TCG
# emulates AMD SVM with nested paging, so that kernel with kvm-amd loaded is a real KVM host.
# This image holds only what L1 needs before it can chroot into the machine's own root
# (shared over 9p): busybox-static, the modules below in dependency order (from the kernel
# package's modules.dep), and /init (tests/kvm/l1_init.sh).
# Output: $BUILD/kvm/l1.cpio; rebuilt only when an input is newer (a second run does nothing).
set -eu
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$BUILD tests/e2e/guest/build.sh
cache=$PWD/$BUILD/e2e/guest/cache
ver=$(cat "$cache/kernel.ok")
mods=$cache/k/lib/modules/$ver
out=$PWD/$BUILD/kvm
mkdir -p "$out"
# What L1 loads: virtio PCI and 9p (the machine's root and the results export), overlayfs
# (a writable view of that root), KVM for AMD, and what scenarios use on a KVM host: the
# kernel's vhost-vsock and zram for host swap.
WANT="virtio_pci 9pnet_virtio 9p overlay kvm-amd vhost_vsock zram"

inputs=("$0" "$here/l1_init.sh" /bin/busybox "$mods/modules.dep")
stale=0
[ -s "$out/l1.cpio" ] || stale=1
for f in "${inputs[@]}"; do [ "$f" -nt "$out/l1.cpio" ] && stale=1; done
[ "$stale" = 0 ] && exit 0

# Dependency order: each module after everything it needs (modules.dep lists a module's
# needs, nearest first; a depth-first walk emits the needs before the module).
order=$(awk -v want="$WANT" '
	{ m = $1; sub(/:$/, "", m); deps[m] = ""; for (i = 2; i <= NF; i++) deps[m] = deps[m] " " $i
	  n = m; sub(/.*\//, "", n); sub(/\.ko$/, "", n); path[n] = m }
	function visit(p,   d, k, i) {
		if (p in seen) return
		seen[p] = 1
		k = split(deps[p], d, " ")
		for (i = k; i >= 1; i--) visit(d[i])
		print p
	}
	END { k = split(want, w, " ")
	      for (i = 1; i <= k; i++) {
		if (!(w[i] in path)) { print "MISSING " w[i]; exit 1 }
		visit(path[w[i]]) } }' "$mods/modules.dep")
if echo "$order" | grep -q '^MISSING'; then
	echo "l1_image.sh: module $(echo "$order" | sed -n 's/^MISSING //p') not in $ver" >&2
	exit 1
fi

r=$(mktemp -d /tmp/memtide-kvm-l1.XXXXXX)
trap 'rm -rf "$r"' EXIT
mkdir -p "$r"/{bin,sbin,lib/modules,proc,sys,dev,tmp,etc,lower,rw,host}
cp /bin/busybox "$r/bin/busybox"
list=
for p in $order; do
	cp "$mods/$p" "$r/lib/modules/"
	list="$list $(basename "$p")"
done
echo "MODULES=\"${list# }\"" >"$r/etc/modules.sh"
cp "$here/l1_init.sh" "$r/init"
chmod +x "$r/init"
(cd "$r" && find . | cpio -o -H newc 2>/dev/null) >"$out/l1.cpio.tmp"
mv "$out/l1.cpio.tmp" "$out/l1.cpio"
