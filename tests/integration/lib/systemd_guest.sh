#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# systemd_guest.sh: boot a real systemd (this host's own Debian 12 userland) in a TCG QEMU
# guest and run one script in it as a service; systemd_unit.sh test 8 uses it to run memtided
# under its real unit, installed from the .deb, where systemd is not PID 1 on the host.
#
#   systemd_guest.sh SHARE_DIR [TIMEOUT_S]
#
# SHARE_DIR is shared read-write with the guest (9p, mounted at /mnt/memtide-test) and must
# hold run.sh: the guest's memtide-test.service runs it once basic.target is up, then powers
# the guest off.  Whatever run.sh writes there is the result; the serial console goes to
# SHARE_DIR/console.log.  Exit status: 0 when the guest powered off by itself, 1 otherwise.
#
# The guest: Debian's kernel (tests/e2e/guest/build.sh fetches it: this host boots no kernel
# of its own), an initramfs of busybox and the virtio, 9p and overlay modules, and /init,
# which mounts the host's root read-only over virtio-9p as the lower layer of an overlay
# whose upper layer is a tmpfs, so nothing the guest does reaches the host.  /init empties
# fstab (the host's disks are not the guest's), masks the few units that would wait for
# hardware or the network, writes memtide-test.target and its service, and hands over to
# /lib/systemd/systemd with switch_root.  Kernel command line: systemd.unit=memtide-test.target,
# so systemd brings up sysinit and basic and this test, nothing of multi-user.
set -eu
share=$(realpath "$1")
timeout_s=${2:-170}
BUILD=${BUILD:-build}
[ -f "$share/run.sh" ] || { echo "systemd_guest.sh: no run.sh in $share" >&2; exit 2; }
BUILD=$BUILD tests/e2e/guest/build.sh >&2
g=$PWD/$BUILD/e2e/guest
ver=$(cat "$g/cache/kernel.ok")
mods=$g/cache/k/lib/modules/$ver
out=$PWD/$BUILD/e2e/systemd
mkdir -p "$out"
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache
9pnet 9pnet_virtio 9p overlay"

if [ ! -s "$out/initrd.cpio" ] || [ "$0" -nt "$out/initrd.cpio" ] || [ "$g/vmlinux" -nt "$out/initrd.cpio" ]; then
	r=$(mktemp -d /tmp/memtide-sd-root.XXXXXX)
	trap 'rm -rf "$r"' EXIT
	mkdir -p "$r"/{bin,lib/modules,proc,sys,dev,lower,rw,newroot}
	cp /bin/busybox "$r/bin/busybox"
	for m in $MODULES; do
		f=$(find "$mods" -name "$m.ko" | head -1)
		[ -n "$f" ] || { echo "systemd_guest.sh: module $m not in $ver" >&2; exit 1; }
		cp "$f" "$r/lib/modules/"
	done
	echo "MODULES=\"$(echo $MODULES)\"" >"$r/modules.sh"
	cat >"$r/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
. /modules.sh
for m in $MODULES; do insmod /lib/modules/$m.ko || echo "SD-GUEST module $m failed"; done
fail() { echo "SD-GUEST init failed: $*"; poweroff -f; }
mount -t 9p -o ro,trans=virtio,version=9p2000.L,cache=loose,msize=262144 hostroot /lower ||
	fail "9p host root"
mount -t tmpfs -o mode=0755,size=512m rw /rw && mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail overlay
n=/newroot
mkdir -p $n/mnt/memtide-test
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 memtidetest $n/mnt/memtide-test ||
	fail "9p share"
: >$n/etc/fstab
# The host runs in a container; this guest does not, and systemd must not think so (in a
# container it would take its target from its arguments only, and skip what needs a kernel).
rm -f $n/.dockerenv $n/run/.containerenv
# Not this guest's: the network, hardware it lacks, and libvirtd (memtided runs on libvirt's
# in-process test driver here, so the Wants=libvirtd.service of its unit is left out).
for u in libvirtd.service libvirtd.socket libvirtd-ro.socket libvirtd-admin.socket \
	virtlogd.service virtlogd.socket virtlockd.service virtlockd.socket \
	systemd-networkd.service networking.service systemd-timesyncd.service \
	systemd-udev-settle.service; do
	ln -sf /dev/null $n/etc/systemd/system/$u
done
cat >$n/etc/systemd/system/memtide-test.target <<'EOF'
[Unit]
Description=memtide test: basic.target and the test service only
Requires=basic.target memtide-test.service
After=basic.target
AllowIsolate=yes
EOF
cat >$n/etc/systemd/system/memtide-test.service <<'EOF'
[Unit]
Description=memtide test script (/mnt/memtide-test/run.sh)
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/memtide-test/run.sh
ExecStopPost=/bin/systemctl poweroff --force --force
StandardOutput=journal+console
StandardError=journal+console
EOF
umount /proc /sys
echo "SD-GUEST switching to systemd"
exec switch_root /newroot /lib/systemd/systemd --unit=memtide-test.target
INIT
	chmod +x "$r/init"
	(cd "$r" && find . | cpio -o -H newc 2>/dev/null) >"$out/initrd.cpio.tmp"
	mv "$out/initrd.cpio.tmp" "$out/initrd.cpio"
fi

rm -f "$share/console.log"
rc=0
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nographic -no-reboot -nic none \
	-kernel "$g/vmlinux" -initrd "$out/initrd.cpio" \
	-append "console=ttyS0 panic=-1 systemd.unit=memtide-test.target systemd.show_status=1" \
	-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-fsdev "local,id=share,path=$share,security_model=none" \
	-device virtio-9p-pci,fsdev=share,mount_tag=memtidetest \
	</dev/null >"$share/console.log" 2>&1 || rc=$?
[ $rc = 0 ]
