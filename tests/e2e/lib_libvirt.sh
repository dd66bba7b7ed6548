#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# lib_libvirt.sh: the libvirt half of the end-to-end harness (sourced after lib.sh).
#
# The second way an operator runs guests: libvirtd starts QEMU, memtided finds the domain by
# itself (libvirt's lifecycle events, and memtide's hook in /etc/libvirt/hooks/qemu.d/ telling
# it through the control socket).  What this adds to lib.sh:
#   e2e_lv_up HOOK           installs HOOK as /etc/libvirt/hooks/qemu.d/memtide and makes sure
#                            virtlogd and libvirtd run and have read it: libvirtd reads hooks
#                            only when it starts, so a libvirtd that was running without this
#                            hook is restarted (running domains survive a libvirtd restart).
#   e2e_lv_boot NAME MIB RUN [APPEND]
#                            defines and starts a transient <domain type='qemu'> booting the
#                            e2e guest, with <memballoon model='virtio' freePageReporting='on'
#                            autodeflate='on'>
#                            and the agent's unix <channel>; sets E2E_QEMU_PID (from libvirt's
#                            pid file) and E2E_CONSOLE, so e2e_wait and e2e_guest_rss_mib work
#                            as with plain QEMU.  With E2E_TRANSPORT=vsock the channel is
#                            memtided's vhost-user-vsock instead, as `memtidectl domxml-patch
#                            --vsock` writes it (shared memfd RAM, <qemu:commandline>, the
#                            socket in the host's vsock_dir, /run/memtide/vsock, which the
#                            scenario's memtided is given in its config): memtided must be running
#                            (libvirt mode) before the domain starts, as QEMU waits for it.
#                            With E2E_TRANSPORT=kvsock it is the kernel's <vsock> with a CID
#                            libvirt picks (auto='yes'), as domxml-patch --vsock writes it on a
#                            host with /dev/vhost-vsock.  With E2E_ACCEL=kvm the domain is
#                            <domain type='kvm'> with the host's CPU (host-passthrough), as on
#                            an operator's KVM host (the KVM host stand).
# Cleanup destroys the domain by name through libvirt (libvirtd owns the QEMU process), then
# kills the PID if it is still there, and removes the hook it installed.
E2E_LV_DOMS=()
E2E_LV_HOOK=
E2E_V="virsh -q -c qemu:///system"

e2e_lv_cleanup() {
	local d pid
	for d in "${E2E_LV_DOMS[@]}"; do
		pid=$(cat "/run/libvirt/qemu/$d.pid" 2>/dev/null)
		$E2E_V destroy "$d" >/dev/null 2>&1
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	done
	E2E_LV_DOMS=()
	if [ -n "$E2E_LV_HOOK" ]; then
		rm -f "$E2E_LV_HOOK"
		E2E_LV_HOOK=
	fi
	e2e_cleanup
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

e2e_lv_up() {
	local hook=$1 dst=/etc/libvirt/hooks/qemu.d/memtide restart=0 i
	trap e2e_lv_cleanup EXIT
	mkdir -p /etc/libvirt/hooks/qemu.d
	if ! cmp -s "$hook" "$dst" 2>/dev/null; then
		restart=1
	fi
	install -m 0755 "$hook" "$dst" || return 1
	E2E_LV_HOOK=$dst
	if pgrep -x libvirtd >/dev/null && [ $restart = 1 ]; then
		# SIGTERM and wait for it to go: a second libvirtd would refuse to start.
		pkill -x libvirtd
		for i in $(seq 100); do pgrep -x libvirtd >/dev/null || break; sleep 0.1; done
	fi
	tests/libvirtd_up.sh || return 1
	for i in $(seq 100); do
		$E2E_V version >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "# libvirtd does not answer on qemu:///system" >&2
	return 1
}

e2e_lv_boot() {
	local name=$1 mib=$2 run=$3 append=${4:-} i
	local dir=$E2E_DIR/lv
	mkdir -p "$dir"
	# QEMU runs as libvirt-qemu: it must be able to read the image and reach the sockets.
	chmod 755 "$E2E_DIR" "$dir"
	cp "$E2E_KERNEL" "$dir/vmlinux"
	cp "$E2E_INITRD" "$dir/initrd.cpio"
	chmod 644 "$dir/vmlinux" "$dir/initrd.cpio"
	E2E_MEM_MIB=$mib
	E2E_CONSOLE=$dir/console.log
	E2E_AGENT=$dir/agent.sock
	local channel="    <channel type='unix'>
      <source mode='bind' path='$E2E_AGENT'/>
      <target type='virtio' name='org.memtide.agent.0'/>
    </channel>" extra= ns=
	if [ "$E2E_TRANSPORT" = kvsock ]; then
		channel="    <vsock model='virtio'>
      <cid auto='yes'/>
    </vsock>"
	elif [ "$E2E_TRANSPORT" = vsock ]; then
		channel=
		ns=" xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'"
		extra="  <memoryBacking>
    <source type='memfd'/>
    <access mode='shared'/>
  </memoryBacking>
  <qemu:commandline>
    <qemu:arg value='-chardev'/>
    <qemu:arg value='socket,id=memtide-vsock,path=/run/memtide/vsock/$name.sock,server=on'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='vhost-user-vsock-pci,chardev=memtide-vsock'/>
  </qemu:commandline>"
	fi
	local type=qemu cpu=
	if [ "$E2E_ACCEL" = kvm ]; then
		type=kvm
		cpu="  <cpu mode='host-passthrough'/>"
	fi
	cat >"$dir/$name.xml" <<XML
<domain type='$type'$ns>
  <name>$name</name>
  <memory unit='MiB'>$mib</memory>
  <currentMemory unit='MiB'>$mib</currentMemory>
  <vcpu>2</vcpu>
$cpu
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/vmlinux</kernel>
    <initrd>$dir/initrd.cpio</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 memtide.run=${run// /,} $append</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='unix'>
      <source mode='bind' path='$dir/serial.sock'/>
      <log file='$E2E_CONSOLE' append='off'/>
      <target port='0'/>
    </serial>
$channel
    <memballoon model='virtio' freePageReporting='on' autodeflate='on'>
      <stats period='2'/>
    </memballoon>
  </devices>
$extra
</domain>
XML
	E2E_LV_DOMS+=("$name")
	$E2E_V create "$dir/$name.xml" >/dev/null || return 1
	for i in $(seq 100); do
		E2E_QEMU_PID=$(cat "/run/libvirt/qemu/$name.pid" 2>/dev/null)
		[ -n "$E2E_QEMU_PID" ] && [ -f "$E2E_CONSOLE" ] && return 0
		sleep 0.1
	done
	return 1
}
