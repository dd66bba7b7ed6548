#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# domxml_vsock.sh: `memtidectl domxml-patch --vsock` on a KVM host with the kernel's vhost_vsock,
# against a real libvirtd, and what follows from it (the KVM host stand: tests/kvm/stand.sh run
# tests/kvm/domxml_vsock.sh; make check-kvm).
#
# Where the host has /dev/vhost-vsock, --vsock offers libvirt's own device, <vsock
# model='virtio'><cid auto='yes'/></vsock>, instead of memtided's vhost-user one (which needs
# shared memfd RAM and a <qemu:commandline>).  A persistent <domain type='kvm'> with neither
# balloon nor agent channel is defined, booting the e2e guest; memtided runs in its default
# libvirt mode.  Checked, all through the real libvirtd:
#   1 domxml-patch --vsock --yes redefines the domain with the kernel's <vsock> and neither
#     vhost-user-vsock-pci nor memoryBacking, and says why (/dev/vhost-vsock);
#   2 a second run, on libvirt's own re-serialisation, changes nothing;
#   3 the domain starts, on KVM, and libvirt picked a guest CID (the live XML's address);
#   4 memtided takes that CID as the domain's (its log, and `vm show --json`'s vsock_cid);
#   5 the agent (its default transport, auto) connects over the kernel's vsock from that CID.
# Figures: build/e2e/kvm_domxml_vsock.json (guest_cid, connect_s).
# Cleanup destroys and undefines the domain (lib_libvirt.sh's cleanup runs for the hook).
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/../e2e/lib_libvirt.sh"
e2e_init domxml_vsock
echo "1..5"
[ "$(id -u)" = 0 ] || {
	e2e_not_ok "needs root to run libvirtd"
	exit 1
}
if [ ! -c /dev/vhost-vsock ]; then
	# Said, never skipped silently: this host cannot give a guest the kernel's vsock.
	e2e_not_ok "the kernel's vsock needs /dev/vhost-vsock (a KVM host: tests/kvm/stand.sh run $0)"
	exit 1
fi
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it"
	exit 1
fi
HOOK_SRC=contrib/libvirt/hooks/qemu.d/memtide
DOM=memtide-kvsock-$$
SOCK=$E2E_DIR/ctl.sock
BIN=$PWD/$BUILD/bin
sed -e "s|^MEMTIDECTL=.*|MEMTIDECTL=$BIN/memtidectl|" \
	-e "s|^MEMTIDE_SOCKET=.*|MEMTIDE_SOCKET=$SOCK|" "$HOOK_SRC" >"$E2E_DIR/hook"
if ! e2e_lv_up "$E2E_DIR/hook"; then
	e2e_not_ok "libvirtd did not start"
	exit 1
fi
undefine() {
	$E2E_V destroy "$DOM" >/dev/null 2>&1
	$E2E_V undefine "$DOM" >/dev/null 2>&1
	e2e_lv_cleanup
}
trap undefine EXIT

dir=$E2E_DIR/lv
mkdir -p "$dir"
chmod 755 "$E2E_DIR" "$dir"
cp "$E2E_KERNEL" "$dir/vmlinux"
cp "$E2E_INITRD" "$dir/initrd.cpio"
chmod 644 "$dir/vmlinux" "$dir/initrd.cpio"
E2E_CONSOLE=$dir/console.log
cat >"$dir/$DOM.xml" <<XML
<domain type='kvm'>
  <name>$DOM</name>
  <memory unit='MiB'>512</memory>
  <currentMemory unit='MiB'>512</currentMemory>
  <vcpu>2</vcpu>
  <cpu mode='host-passthrough'/>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/vmlinux</kernel>
    <initrd>$dir/initrd.cpio</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 memtide.run=sleep,600</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'>
      <source path='$E2E_CONSOLE'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
if ! $E2E_V define "$dir/$DOM.xml" >"$dir/define.txt" 2>&1; then
	sed 's/^/# /' "$dir/define.txt"
	e2e_not_ok "libvirt refused the test domain"
	exit 1
fi

# 1: the kernel's device, not memtided's vhost-user one.
"$BIN/memtidectl" domxml-patch "$DOM" --vsock --yes </dev/null >"$dir/patch1.txt" 2>&1
rc=$?
$E2E_V dumpxml --inactive "$DOM" >"$dir/def1.xml"
sed 's/^/# /' "$dir/patch1.txt" | grep -iE 'vsock|warning' | head -4
[ $rc = 0 ] && grep -q "<vsock model='virtio'>" "$dir/def1.xml" &&
	grep -q "<cid auto='yes'/>" "$dir/def1.xml" && ! grep -q 'vhost-user-vsock' "$dir/def1.xml" &&
	! grep -q '<memoryBacking' "$dir/def1.xml" && grep -q '/dev/vhost-vsock' "$dir/patch1.txt"
e2e_check $? "domxml-patch --vsock on a host with /dev/vhost-vsock defined the kernel's <vsock model='virtio'><cid auto='yes'/> (no vhost-user device, no shared RAM)"

# 2: idempotent through libvirt.
"$BIN/memtidectl" domxml-patch "$DOM" --vsock --yes </dev/null >"$dir/patch2.txt" 2>&1
[ $? = 0 ] && grep -q "nothing to change" "$dir/patch2.txt" &&
	$E2E_V dumpxml --inactive "$DOM" | cmp -s - "$dir/def1.xml"
e2e_check $? "a second domxml-patch --vsock changes nothing (idempotent through libvirt)"

# memtided in libvirt mode, as an operator runs it: it listens on AF_VSOCK by itself
# ([daemon] kernel_vsock = auto) and finds the domain through the hook and libvirt's events.
e2e_start "$BIN/memtided" --interval 2 --foreground --no-metrics --socket "$SOCK" \
	--state-dir "$E2E_DIR/state" --log-level info 2>"$E2E_DIR/memtided.log"
MPID=$E2E_LAST_PID
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

# 3: started on KVM, with a CID libvirt picked.
t0=$(e2e_now_ms)
$E2E_V start "$DOM" >"$dir/start.txt" 2>&1 || sed 's/^/# /' "$dir/start.txt"
E2E_QEMU_PID=$(cat "/run/libvirt/qemu/$DOM.pid" 2>/dev/null)
cid=$($E2E_V dumpxml "$DOM" 2>/dev/null | sed -n "s/.*<cid auto='yes' address='\([0-9]*\)'.*/\1/p")
kvm=$($E2E_V qemu-monitor-command "$DOM" '{"execute":"query-kvm"}' 2>&1)
e2e_fig guest_cid "${cid:-0}"
[ -n "$E2E_QEMU_PID" ] && [ "${cid:-0}" -ge 3 ] && [[ $kvm == *'"enabled":true'* ]]
e2e_check $? "the patched domain started on KVM and libvirt gave it guest CID ${cid:-none} (query-kvm: $kvm)"

# 4: memtided knows the VM by that CID.
claim=$(e2e_wait_file "$E2E_DIR/memtided.log" "vsock: the agent's connections from CID ${cid:-x} are this VM's" 60)
field() { # PYTHON-EXPR over the VM object v
	"$BIN/memtidectl" --socket "$SOCK" --json vm show "$DOM" 2>/dev/null | python3 -c "
import json, sys
try:
    v = json.load(sys.stdin)['vm']
    print($1)
except Exception:
    print('')"
}
[ -n "$claim" ] && [ "$(field "v.get('vsock_cid', 0)")" = "${cid:-x}" ]
e2e_check $? "memtided took CID ${cid:-none} from the live domain XML as the domain's: ${claim#*: }"

# 5: the agent connects over the kernel's vsock (its default transport, auto, prefers vsock).
# domxml-patch adds the agent's virtio-serial channel too, so memtided's link for the domain is
# named by that channel's socket and takes the vsock stream over ("the agent moved to vsock"):
# the transport in memtided's status is what tells.
line= transport=
end=$(($(e2e_now_ms) + 180000))
while [ "$(e2e_now_ms)" -lt $end ]; do
	transport=$(field "v['agent_transport']")
	if [ "$transport" = vsock ]; then
		line=$(grep -m1 "agent .*: connected: " "$E2E_DIR/memtided.log")
		[ -n "$line" ] && break
	fi
	sleep 1
done
dt=$(($(e2e_now_ms) - t0))
e2e_fig agent_transport "$transport"
e2e_fig connect_s "$(awk -v w=$dt 'BEGIN { printf "%.2f", w / 1000 }')"
[ -n "$line" ] && [ "$transport" = vsock ] && grep -q 'a vsock stream from the agent' "$E2E_DIR/memtided.log"
e2e_check $? "the agent connected over the kernel's vsock from CID ${cid:-none} (within $dt ms of virsh start; transport ${transport:-none})"
if [ -z "$line" ]; then
	tail -20 "$E2E_DIR/memtided.log" | sed 's/^/# memtided: /'
	tail -5 "$E2E_CONSOLE" 2>/dev/null | sed 's/^/# console: /'
fi
kill -TERM "$MPID"
wait "$MPID" 2>/dev/null
