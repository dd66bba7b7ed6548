#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_guest.sh: the tiny guest memtided's integration tests boot, and a check that it boots.
#
# The end-to-end guest (tests/e2e/guest/build.sh -> build/e2e/guest/) is used when it has
# been built; otherwise this builds its own minimal one into $BUILD/it-guest/, once: Debian's
# kernel (vmlinux extracted from the vmlinuz: PVH boot, ~3 s to /init under TCG), busybox, and
# the virtio modules the balloon and console need.  /init loads them and runs a shell on the
# serial port, so a test can make the guest allocate memory (tmpfs) through the serial
# socket.  The balloon driver is what makes memtided's balloon targets real: without it QEMU
# accepts a target and nothing moves.
#
# As a test (run by tests/run.sh) it boots the guest under plain QEMU once and checks that
# the balloon driver answers: QMP `balloon` to 192 MiB moves `query-balloon` there.
# Sourced by host_libvirt.sh and host_qmp.sh with IT_GUEST_LIB=1: defines it_guest_build.
set -u
BUILD=${BUILD:-build}

it_guest_build() {
	local out=$PWD/$BUILD/it-guest
	IT_KERNEL=$out/vmlinux IT_INITRD=$out/initrd.cpio
	[ -s "$IT_KERNEL" ] && [ -s "$IT_INITRD" ] && return 0
	local work
	work=$(mktemp -d /tmp/memtide-it-guest.XXXXXX) || return 1
	mkdir -p "$out"
	(
		set -e
		cd "$work"
		kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
		apt-get download "$kpkg" >/dev/null 2>&1
		dpkg -x ./*.deb k
		ver=$(ls k/lib/modules)
		z=k/boot/vmlinuz-$ver
		off=$(grep -abo $'\xfd7zXZ\x00' "$z" | head -1 | cut -d: -f1)
		tail -c +$((off + 1)) "$z" | xz -dc >vmlinux 2>/dev/null || true
		file vmlinux | grep -q ELF
		mkdir -p r/bin r/lib/modules r/proc r/sys r/dev r/tmp
		cp /bin/busybox r/bin/busybox
		for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
			virtio_balloon virtio_console; do
			cp "$(find k/lib/modules -name "$m.ko")" r/lib/modules/
		done
		cat >r/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs -o size=90% tmp /tmp
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
	virtio_balloon virtio_console; do
	insmod /lib/modules/$m.ko
done
echo "memtide-it-guest ready"
exec setsid sh -c 'exec sh </dev/ttyS0 >/dev/ttyS0 2>&1'
INIT
		chmod +x r/init
		(cd r && find . | cpio -o -H newc 2>/dev/null) >initrd.cpio
		cp vmlinux initrd.cpio "$out/"
	)
	local rc=$?
	rm -rf "$work"
	return $rc
}

# qmp_cmd SOCKET JSON...: run QMP commands on a fresh connection; print each "return" as
# JSON, one line per command (an error prints {"error": ...}).  Waits for every reply.
qmp_cmd() {
	python3 - "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
json.loads(f.readline())  # greeting
f.write('{"execute":"qmp_capabilities"}\n'); f.flush(); reply()
for c in sys.argv[2:]:
    f.write(c + "\n"); f.flush()
    m = reply()
    print(json.dumps(m.get("return", m)))
PY
}

# no_fds CMD...: run CMD (a daemon: virtlogd, libvirtd) without the fds this script holds
# open.  Tests run under `flock /tmp/memtide-heavy.lock`; a daemon that inherits the lock's fd
# holds the lock for as long as it lives, and every other test waits for ever (seen: a
# libvirtd -d started by a test kept the shared lock for 40 minutes).
no_fds() {
	(
		for fd in /proc/$BASHPID/fd/*; do
			n=${fd##*/}
			[ "$n" -gt 2 ] 2>/dev/null && eval "exec $n>&-" 2>/dev/null
		done
		exec "$@"
	)
}

# balloon_mib SOCKET: the balloon's actual in MiB.
balloon_mib() {
	qmp_cmd "$1" '{"execute":"query-balloon"}' |
		python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["actual"] >> 20)'
}

[ "${IT_GUEST_LIB:-0}" = 1 ] && return 0

# ---- as a test ------------------------------------------------------------------------------
echo "1..2"
if ! it_guest_build; then
	# No Debian kernel package to be had (no mirror): nothing here can run.
	echo "ok 1 # SKIP cannot build the integration guest (apt-get download of the kernel failed?)"
	echo "ok 2 # SKIP no guest"
	exit 0
fi
echo "ok 1 - integration guest built: $IT_KERNEL"

dir=$(mktemp -d /tmp/memtide-it-boot.XXXXXX)
qemu-system-x86_64 -accel tcg -m 512 -nodefaults -display none -no-reboot \
	-kernel "$IT_KERNEL" -initrd "$IT_INITRD" -append "console=ttyS0 quiet" \
	-serial "file:$dir/serial.log" -qmp "unix:$dir/qmp.sock,server=on,wait=off" \
	-device virtio-balloon-pci,id=balloon0,free-page-reporting=on 2>"$dir/qemu.err" &
qpid=$!
for _ in $(seq 100); do grep -q "memtide-it-guest ready" "$dir/serial.log" 2>/dev/null && break; sleep 0.2; done
qmp_cmd "$dir/qmp.sock" '{"execute":"balloon","arguments":{"value":201326592}}' >/dev/null
actual=0
for _ in $(seq 50); do
	actual=$(balloon_mib "$dir/qmp.sock")
	[ "${actual:-0}" = 192 ] && break
	sleep 0.2
done
kill "$qpid" 2>/dev/null
wait "$qpid" 2>/dev/null
if [ "${actual:-0}" = 192 ]; then
	echo "ok 2 - the guest's balloon driver follows a QMP target (512 -> 192 MiB)"
else
	echo "not ok 2 - balloon actual is ${actual:-unknown} MiB, wanted 192"
	tail -20 "$dir/serial.log"
fi
rm -rf "$dir"
