#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# deps.sh: install the Debian 12 packages memtide's build, tests, benchmarks and demo need.
#
# Idempotent: it asks dpkg which packages are missing and installs only those, so a second
# run costs a fraction of a second.  Needs root to install; without root it names what is
# missing and how to get it, and fails.  `make check`, `make bench` and `make demo` call it.
#
# `deps.sh packaging` adds what only `make check-packaging` (CI) needs: Debian's prometheus
# package, for promtool (~100 MB installed with its web assets: too heavy for every machine
# that runs make check).
#
# On a machine without udev it also gives /dev/kvm to group kvm, as udev would (see
# kvm_node_as_udev_would below): without that, libvirtd starts each domain 40 s late.
set -eu

PKGS="build-essential pkg-config make git
libjson-c-dev liburcu-dev libinih-dev libmicrohttpd-dev libvirt-dev libcmocka-dev libzstd-dev zstd libxml2-dev
libfuse3-dev
clang-14 libfuzzer-14-dev libclang-rt-14-dev clang-format clang-tidy cppcheck
qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients
busybox-static socat kmod cpio xz-utils
gnuplot-nox python3 procps iproute2 util-linux valgrind curl
libsystemd-dev systemd debhelper lintian fakeroot dpkg-dev groff-base man-db bash-completion strace file"
if [ "${1:-}" = packaging ]; then
	PKGS="$PKGS prometheus python3-yaml"
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

# Debian's udev gives /dev/kvm to group kvm, mode 0660 (its default rules), and Debian puts
# libvirt's QEMU user in that group.  A machine without udev (a container, a microVM like the
# ones CI runs on) leaves the node root-only, 0600.  libvirtd probes QEMU as root and finds
# KVM, then checks its capability cache as its QEMU user, finds KVM "not available now", and
# probes QEMU again: 23 probes for one domain start, 44 s for a `virsh create` that takes
# 0.2 s once the node is as udev leaves it.  So, with no udev running, do what its rule does.
kvm_node_as_udev_would() {
	[ -c /dev/kvm ] && [ "$(id -u)" = 0 ] || return 0
	pgrep -x systemd-udevd >/dev/null && return 0
	getent group kvm >/dev/null || return 0
	[ "$(stat -c '%G %a' /dev/kvm)" = "root 600" ] || return 0
	chgrp kvm /dev/kvm && chmod 0660 /dev/kvm &&
		echo "deps.sh: /dev/kvm given to group kvm, mode 0660, as udev's rule would (no udev here)" >&2
}

if [ -z "$missing" ]; then
	kvm_node_as_udev_would
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing Debian packages:$missing" >&2
	echo "deps.sh: run as root, or: sudo apt-get install$missing" >&2
	exit 1
fi

echo "deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# An old or empty package list finds nothing: refresh it once before installing.
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
kvm_node_as_udev_would
