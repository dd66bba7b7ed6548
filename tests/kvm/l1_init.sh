#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0-or-later
# l1_init.sh: /init of the KVM host stand's outer guest ("L1"; tests/kvm/stand.sh starts it,
# tests/kvm/l1_image.sh packs this file as the initramfs's /init).
#
# It turns a busybox initramfs into a stock Debian 12 KVM host running the machine's own
# userland: loads the modules (kvm-amd last of its chain: "Nested Paging enabled" then), mounts
# the machine's root (9p tag hostroot, read-only, page cache kept: cache=loose) as the lower
# layer of an overlay whose upper layer is L1's RAM, so everything there can write and nothing
# reaches the machine's disk; mounts the results export (9p tag out, read-write) at its own
# host path inside that view, so paths read the same inside and out; gives the chroot proc, sys
# (with cgroup2 and debugfs mounted first: an rbind carries them), dev (with /dev/fd, which
# devtmpfs lacks and bash's process substitution needs), tmpfs on /tmp and /run; then, per
# memtide.stand_mode on the command line:
#   run    runs bash $STAND_DIR/cmd.sh in the chroot, writes its status to $STAND_DIR/status
#   shell  an interactive login shell on the serial console (the operator's own hands)
# and powers off.  Console lines "STAND-..." mark the steps for the host side.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
. /etc/modules.sh
for m in $MODULES; do insmod "/lib/modules/$m" || echo "STAND-MODULE-FAILED $m"; done
mode=run dir=
for a in $(cat /proc/cmdline); do
	case $a in
	memtide.stand_mode=*) mode=${a#memtide.stand_mode=} ;;
	memtide.stand_dir=*) dir=${a#memtide.stand_dir=} ;;
	esac
done
fail() {
	echo "STAND-FAILED $*"
	poweroff -f
}
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
	fail "9p mount of the machine's root"
mount -t tmpfs -o mode=755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /host ||
	fail "overlay over the machine's root"
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t debugfs debugfs /sys/kernel/debug
mkdir -p /dev/pts /dev/shm
mount -t devpts -o ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
# What udev does on a Debian KVM host (systemd's 50-udev-default.rules): KVM's devices are
# root:kvm 0660, so that QEMU run by libvirt as libvirt-qemu (in group kvm) can open them.
# devtmpfs makes them root's alone, and libvirt's guests then failed ("Could not access KVM
# kernel module: Permission denied"; inside libvirt's own /dev namespace: "No such file").
kvm_gid=$(awk -F: '$1 == "kvm" { print $3 }' /host/etc/group)
for d in kvm vhost-net vhost-vsock; do
	[ -n "$kvm_gid" ] && [ -c "/dev/$d" ] && chgrp "$kvm_gid" "/dev/$d" && chmod 0660 "/dev/$d"
done
# libvirt's per-domain /dev (qemu.conf namespaces = ["mount"], its default) came without
# /dev/kvm inside this chroot (QEMU: "Could not access KVM kernel module: No such file or
# directory"; a Debian host's libvirt builds it from the host's /dev).  Off in L1's copy of
# qemu.conf (the overlay's upper layer: the machine's file is untouched).
[ -f /host/etc/libvirt/qemu.conf ] && echo 'namespaces = [ ]' >>/host/etc/libvirt/qemu.conf
mount -t proc proc /host/proc
mount --rbind /sys /host/sys
mount --rbind /dev /host/dev
mount -t tmpfs -o mode=1777 tmp /host/tmp
mount -t tmpfs -o mode=755 run /host/run
if [ -n "$dir" ]; then
	mkdir -p "/host$dir"
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "/host$dir" ||
		fail "9p mount of the results export at $dir"
fi
ip link set lo up 2>/dev/null
hostname memtide-stand
echo "STAND-UP $(cut -d' ' -f1 /proc/uptime)"
env='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8'
case $mode in
shell)
	# setsid -c: the console becomes the shell's controlling terminal (job control, ^C).
	setsid -c env -i $env TERM=${TERM:-vt100} STAND_DIR="$dir" chroot /host \
		/bin/bash --rcfile "$dir/shellrc" -i </dev/ttyS0 >/dev/ttyS0 2>&1
	;;
*)
	env -i $env TERM=dumb STAND_DIR="$dir" chroot /host /bin/bash "$dir/cmd.sh" </dev/null
	echo $? >"/host$dir/status"
	;;
esac
sync
echo "STAND-DOWN $(cut -d' ' -f1 /proc/uptime)"
poweroff -f
