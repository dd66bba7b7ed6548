#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# build.sh: the end-to-end guest image (kernel + initramfs), built once and cached.
#
# Output, under $BUILD/e2e/guest/ (never committed):
#   vmlinux      Debian's kernel as an ELF image, extracted from the xz vmlinuz: QEMU boots it
#                through PVH, ~3 s to /init under TCG against ~6 s for the vmlinuz (measured,
#                shared/README.md).
#   initrd.cpio  busybox-static, the virtio/vsock/zram modules, memtide-agent (if built), our
#                workload programs (build/guest/bin/*), and /init (below).
#   cache/       the kernel .deb and its unpacked tree (dpkg -x, depmod -b).
# /init mounts proc, sysfs, devtmpfs, debugfs and cgroup2, loads the modules in dependency
# order, starts memtide-agent when the image has one and the command line does not say
# memtide.agent=0 (memtide.kill_agent_after=S kills it S seconds in; memtide.agent_args= adds
# its options, commas for spaces), runs the command in memtide.run= (commas stand for spaces), prints
# "E2E-EXIT <status>" and powers off.  memtide.control_port=NAME lets the host drive the guest
# over the virtio-serial port NAME, one word a line: "kill-agent" SIGKILLs the agent (the host
# picks the moment: scenario 5 on the KVM stand), "end-run" ends the workload (SIGTERM).
#
# Idempotent: the initramfs is rebuilt only when one of its inputs is newer than it; a second
# run does no work (< 1 s).  Exits non-zero with a clear message when the kernel package
# cannot be had (apt-get download needs the package lists: run apt-get update).
set -eu
BUILD=${BUILD:-build}
out=$PWD/$BUILD/e2e/guest
cache=$out/cache
mkdir -p "$cache"
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_balloon
virtio_console vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport zsmalloc zram"

# Step 1: the kernel package, downloaded and unpacked once.
if [ ! -s "$out/vmlinux" ] || [ ! -f "$cache/kernel.ok" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-/{print $2; exit}')
	if [ -z "$kpkg" ]; then
		echo "build.sh: apt-cache knows no linux-image-amd64 dependency (run apt-get update)" >&2
		exit 1
	fi
	rm -rf "$cache/k" "$cache"/*.deb
	if ! (cd "$cache" && apt-get download "$kpkg" >/dev/null 2>"$cache/apt.err"); then
		echo "build.sh: apt-get download $kpkg failed: $(tail -1 "$cache/apt.err")" >&2
		echo "build.sh: the e2e guest needs Debian's kernel package (apt-get update?)" >&2
		exit 1
	fi
	dpkg -x "$cache"/*.deb "$cache/k"
	ver=$(ls "$cache/k/lib/modules")
	depmod -b "$cache/k" "$ver"
	# Step 2: the ELF vmlinux, decompressed from the xz stream inside the bzImage.
	z=$cache/k/boot/vmlinuz-$ver
	off=$(grep -abo $'\xfd7zXZ\x00' "$z" | head -1 | cut -d: -f1)
	# xz complains about the bzImage trailer after the stream: the ELF check below decides.
	tail -c +$((off + 1)) "$z" | xz -dc >"$out/vmlinux.tmp" 2>/dev/null || true
	if ! head -c 4 "$out/vmlinux.tmp" | grep -q $'\x7fELF'; then
		echo "build.sh: no ELF kernel inside $z" >&2
		exit 1
	fi
	mv "$out/vmlinux.tmp" "$out/vmlinux"
	echo "$ver" >"$cache/kernel.ok"
fi
ver=$(cat "$cache/kernel.ok")

# Step 3: the initramfs, rebuilt only when an input changed.
inputs=("$0" /bin/busybox "$out/vmlinux")
[ -x "$BUILD/bin/memtide-agent" ] && inputs+=("$BUILD/bin/memtide-agent")
for w in "$BUILD"/guest/bin/*; do [ -x "$w" ] && inputs+=("$w"); done
stale=0
[ -s "$out/initrd.cpio" ] || stale=1
for f in "${inputs[@]}"; do [ "$f" -nt "$out/initrd.cpio" ] && stale=1; done
# An agent removed since the last build also makes the image stale.
[ -f "$out/has-agent" ] && [ ! -x "$BUILD/bin/memtide-agent" ] && stale=1
[ "$stale" = 0 ] && exit 0

r=$(mktemp -d /tmp/memtide-e2e-root.XXXXXX)
trap 'rm -rf "$r"' EXIT
mkdir -p "$r"/{bin,sbin,lib/modules,proc,sys,dev,tmp,run,mnt,etc}
cp /bin/busybox "$r/bin/busybox"
for m in $MODULES; do
	f=$(find "$cache/k/lib/modules/$ver" -name "$m.ko" | head -1)
	if [ -z "$f" ]; then echo "build.sh: module $m not in $ver" >&2; exit 1; fi
	cp "$f" "$r/lib/modules/"
done
rm -f "$out/has-agent"
if [ -x "$BUILD/bin/memtide-agent" ]; then
	cp "$BUILD/bin/memtide-agent" "$r/bin/"
	touch "$out/has-agent"
fi
for w in "$BUILD"/guest/bin/*; do [ -x "$w" ] && cp "$w" "$r/bin/"; done
echo "MODULES=\"$(echo $MODULES)\"" >"$r/etc/modules.sh"
cat >"$r/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs -o size=95% tmp /tmp
. /etc/modules.sh
for m in $MODULES; do insmod /lib/modules/$m.ko || echo "E2E-MODULE-FAILED $m"; done
run= agent=1 agent_args= swap=0 kill_after=0 control_port=
for a in $(cat /proc/cmdline); do
	case $a in
	memtide.run=*) run=$(echo "${a#memtide.run=}" | tr ',' ' ') ;;
	memtide.agent=*) agent=${a#memtide.agent=} ;;
	memtide.agent_args=*) agent_args=$(echo "${a#memtide.agent_args=}" | tr ',' ' ') ;;
	memtide.zram_mib=*) swap=${a#memtide.zram_mib=} ;;
	memtide.kill_agent_after=*) kill_after=${a#memtide.kill_agent_after=} ;;
	memtide.control_port=*) control_port=${a#memtide.control_port=} ;;
	esac
done
# control_port NAME AGENT_PID: the host's commands on the virtio-serial port NAME.  A read
# while no host end is connected returns at once (EOF): the host connects when it has
# something to say, so the loop tries again a second later.
control_port() {
	p=
	for d in /sys/class/virtio-ports/*; do
		[ "$(cat "$d/name" 2>/dev/null)" = "$1" ] && p=/dev/${d##*/}
	done
	[ -n "$p" ] || { echo "E2E-CONTROL-PORT-MISSING $1"; return; }
	while :; do
		read -r c <"$p" || { sleep 1; continue; }
		case $c in
		kill-agent) [ -n "$2" ] && kill -9 "$2" && echo "E2E-AGENT-KILLED" ;;
		end-run) killall -TERM "${run%% *}" && echo "E2E-RUN-ENDED" ;;
		esac
	done
}
if [ "$swap" -gt 0 ]; then
	echo $((swap << 20)) >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null &&
		swapon /dev/zram0 && echo "E2E-SWAP zram ${swap} MiB"
fi
if [ "$agent" = 1 ] && [ -x /bin/memtide-agent ]; then
	memtide-agent --log_level=1 $agent_args >/dev/ttyS0 2>&1 &
	apid=$!
	echo "E2E-AGENT $apid"
	# Scenario 5: the agent dies (SIGKILL, no goodbye) while the guest keeps running.
	[ "$kill_after" -gt 0 ] && (sleep "$kill_after"; kill -9 $apid; echo "E2E-AGENT-KILLED") &
fi
[ -n "$control_port" ] && control_port "$control_port" "${apid:-}" &
echo "E2E-READY"
status=0
[ -n "$run" ] && { $run; status=$?; }
echo "E2E-EXIT $status"
grep -E '^(oom_kill|pswpout|pswpin|pgmigrate_success|compact_stall|compact_daemon_wake) ' /proc/vmstat | tr '\n' ' ' | sed 's/^/E2E-VMSTAT /'; echo
sync
poweroff -f
INIT
chmod +x "$r/init"
(cd "$r" && find . | cpio -o -H newc 2>/dev/null) >"$out/initrd.cpio.tmp"
mv "$out/initrd.cpio.tmp" "$out/initrd.cpio"
