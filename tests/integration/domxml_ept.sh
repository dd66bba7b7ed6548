#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# domxml_ept.sh: `memtidectl domxml-patch --ept` against a real libvirtd, and what follows
# from it: the patched domain starts with memtide's ept plugin, and memtided reads its page
# accesses through the ept source.
#
# A persistent <domain type='qemu'> (TCG) named memtide-ept-test-<pid> is defined with neither
# balloon nor plugin, booting the e2e guest (tests/e2e/guest/build.sh) whose memload
# reports where its hot pages sit in guest-physical memory.  Everything is real: libvirtd
# (started as root when not running, never with -l), QEMU as libvirt's own user, the
# plugin, memtided in libvirt mode (policy enabled=no: it watches and never resizes).
# Checked:
#   1 domxml-patch --ept --yes redefines the domain with the -plugin pair (table in our
#     directory, ram= from <memory>) in libvirt's qemu namespace;
#   2 a second run, on libvirt's own re-serialisation of the definition, changes nothing;
#   3 the domain starts and its QEMU runs with the plugin: the table file belongs to that
#     QEMU process (memtidectl ept-status);
#   4 memtided attaches it and `vm show --json` names the ept source;
#   5 the layout the argument gave the plugin is the guest's: the pages memtided holds
#     young (young_dump_dir) cover the hot pages the guest reports (recall >= 0.9);
#   6 source_detail is current: its window count grows from one status to the next;
#   7 after a resize (virsh setmaxmem --config), domxml-patch corrects ram= and says so.
# Cleanup destroys and undefines the domain and removes its files; libvirtd is left running.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
TOTAL=7

echo "1..$TOTAL"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
check() { if [ "$1" -eq 0 ]; then ok "$2"; else nok "$2"; fi; }
skip_rest() { while [ $n -lt $TOTAL ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }

[ "$(id -u)" = 0 ] || skip_rest "needs root to run libvirtd"
[ -x "$BIN/memtided" ] && [ -x "$BIN/memtidectl" ] || skip_rest "memtided not built"
[ -f "$PLUGIN" ] || skip_rest "the ept plugin is not built ($PLUGIN)"
command -v libvirtd >/dev/null || skip_rest "libvirtd not installed"
make --no-print-directory -s "$BUILD/guest/bin/memload" >/dev/null 2>&1 &&
	BUILD=$BUILD tests/e2e/guest/build.sh >/dev/null 2>&1 || skip_rest "cannot build the e2e guest"

tests/libvirtd_up.sh
V="virsh -q -c qemu:///system"
for _ in $(seq 50); do $V version >/dev/null 2>&1 && break; sleep 0.2; done
$V version >/dev/null 2>&1 || skip_rest "libvirtd does not answer"

# QEMU runs as libvirt's user (libvirt-qemu, in group kvm): the image, the console log and
# the table directory must be reachable by it.  The table directory is root:kvm 1770, as
# memtided and the tmpfiles entry make /run/memtide/ept (base/qemu_dir.h): QEMU writes its
# table there through its group, and nobody else can.
dir=$(mktemp -d /tmp/memtide-it-ept.XXXXXX)
chmod 755 "$dir"
mkdir -m 1777 "$dir/young"
mkdir -m 1770 "$dir/ept" && chgrp kvm "$dir/ept" && chmod 1770 "$dir/ept"
cp "$BUILD/e2e/guest/vmlinux" "$BUILD/e2e/guest/initrd.cpio" "$dir/"
chmod 644 "$dir/vmlinux" "$dir/initrd.cpio"
# The plugin must be readable by QEMU's user: a copy, not the build tree's path.
cp "$PLUGIN" "$dir/memtide-ept.so" && chmod 644 "$dir/memtide-ept.so"
DOM=memtide-ept-test-$$
mpid=
cleanup() {
	[ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null
	$V destroy "$DOM" >/dev/null 2>&1
	$V undefine "$DOM" >/dev/null 2>&1
	[ "$failed" = 0 ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/$DOM.xml" <<XML
<domain type='qemu'>
  <name>$DOM</name>
  <memory unit='MiB'>512</memory>
  <currentMemory unit='MiB'>512</currentMemory>
  <vcpu>2</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$dir/vmlinux</kernel>
    <initrd>$dir/initrd.cpio</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 memtide.agent=0 memtide.run=memload,hotpages,32,64,300</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'>
      <source path='$dir/console.log'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
$V define "$dir/$DOM.xml" >/dev/null || skip_rest "libvirt refused the test domain"

patch_ept() {
	"$BIN/memtidectl" domxml-patch "$DOM" --yes --ept --ept-dir "$dir/ept" \
		--plugin "$dir/memtide-ept.so" </dev/null
}

# 1
patch_ept >"$dir/patch1.txt" 2>&1
rc=$?
$V dumpxml --inactive "$DOM" >"$dir/def1.xml"
want="$dir/memtide-ept.so,table=$dir/ept/$DOM.ept,ram=512M"
[ $rc = 0 ] && grep -q "<qemu:arg value='-plugin'/>" "$dir/def1.xml" &&
	grep -qF "<qemu:arg value='$want'/>" "$dir/def1.xml" &&
	grep -q "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'" "$dir/def1.xml"
check $? "domxml-patch --ept redefined the domain with -plugin $want"
sed 's/^/# /' "$dir/patch1.txt" | grep -E "plugin|balloon|warning" | head -4

# 2
patch_ept >"$dir/patch2.txt" 2>&1
[ $? = 0 ] && grep -q "nothing to change" "$dir/patch2.txt" &&
	$V dumpxml --inactive "$DOM" | cmp -s - "$dir/def1.xml"
check $? "a second domxml-patch --ept changes nothing (idempotent through libvirt)"

# 3
$V start "$DOM" >"$dir/start.txt" 2>&1 || sed 's/^/# /' "$dir/start.txt"
qpid=
for _ in $(seq 100); do
	qpid=$(cat "/run/libvirt/qemu/$DOM.pid" 2>/dev/null)
	[ -n "$qpid" ] && [ -f "$dir/ept/$DOM.ept" ] && break
	sleep 0.1
done
[ -n "$qpid" ] && tr '\0' ' ' <"/proc/$qpid/cmdline" | grep -qF -- "-plugin $want" &&
	"$BIN/memtidectl" --json ept-status "$dir/ept/$DOM.ept" 2>/dev/null |
	grep -q "\"qemu_pid\":$qpid,"
check $? "the patched domain starts with the plugin: its table belongs to QEMU pid ${qpid:-?}"

# 4: memtided in libvirt mode, watching only
cat >"$dir/memtided.conf" <<CONF
[daemon]
interval = 1s
metrics_port = 0
socket = $dir/ctl.sock
ept_dir = $dir/ept
young_dump_dir = $dir/young
[defaults]
enabled = no
CONF
"$BIN/memtided" --foreground --config "$dir/memtided.conf" --log-level info \
	>"$dir/memtided.log" 2>&1 &
mpid=$!
show() { "$BIN/memtidectl" --socket "$dir/ctl.sock" --json vm show "$DOM" 2>/dev/null; }
ept_shown() { show | grep -q '"source":"ept"'; }
for _ in $(seq 150); do ept_shown && break; sleep 0.2; done
ept_shown
check $? "memtided attached the domain and vm show --json says source ept"
show | python3 -c 'import json,sys; d=json.load(sys.stdin)["vm"]; print("# source_detail:", d.get("source_detail"))' 2>/dev/null

# 5: the RAM layout: the guest's hot pages are among the young ones (memload writes them
# all every round; they are reported from the guest's own pagemap)
grep -q "WL-PAGES-END" "$dir/console.log" 2>/dev/null ||
	timeout 60 tail -n +1 -F "$dir/console.log" 2>/dev/null | grep -q -m1 "WL-PAGES-END"
young=$dir/young/$DOM.young
# The plugin instruments short windows; under TCG on a loaded host one window sees only part of
# memload's round, so one dump can hold a fraction of the hot pages even with a right layout.
# A wrong layout never reaches them at all: the union of the dumps over up to 90 s is compared
# (the first dump that reaches 0.9 ends the wait), as long as the union stays under half of RAM.
recall=$(python3 - "$dir/console.log" "$young" <<'PY'
import sys, time
hot, yg = set(), set()
for l in open(sys.argv[1], errors="replace"):
    p = l.split()
    if len(p) == 4 and p[0] == "WL-PAGES" and p[1] == "hot":
        s = int(p[2], 16) >> 12
        hot.update(range(s, s + int(p[3])))
seen, r, deadline = None, 0, time.monotonic() + 90
while hot and time.monotonic() < deadline:
    try:
        lines = open(sys.argv[2]).read().splitlines()
    except OSError:
        lines = []
    if lines and lines[0] != seen:
        seen = lines[0]
        for l in lines[1:]:
            p = l.split()
            s = int(p[0], 16) >> 12
            yg.update(range(s, s + int(p[1])))
        r = len(hot & yg) / len(hot)
        if r >= 0.9:
            break
    time.sleep(0.2)
# a union that spans most of RAM would reach any page: it proves nothing about the layout
print("# recall after", seen, "of", len(hot), "hot pages; union of young", len(yg), "pages", file=sys.stderr)
print(round(r, 4) if len(yg) < 65536 else 0)
PY
)
python3 -c "import sys; sys.exit(0 if float('${recall:-0}') >= 0.9 else 1)"
check $? "the plugin's layout is the guest's: recall of its hot pages among memtided's young ones ${recall:-?} >= 0.9"

# 6: the status line moves with the windows
windows() { show | python3 -c 'import json,re,sys; d=json.load(sys.stdin)["vm"]; m=re.search(r"(\d+) windows", d.get("source_detail","")); print(m.group(1) if m else -1)' 2>/dev/null; }
w1=$(windows)
timeout 20 tail -n +1 -F "$young" 2>/dev/null | grep -q -m1 "^round $(($(head -1 "$young" | cut -d' ' -f2) + 2))$"
w2=$(windows)
[ "${w1:--1}" -ge 0 ] && [ "${w2:--1}" -gt "${w1:--1}" ]
check $? "source_detail stays current: windows ${w1:-?} then ${w2:-?}"

# 7: a resize, then the argument follows the new RAM
$V setmaxmem "$DOM" 768M --config >/dev/null 2>&1
patch_ept >"$dir/patch3.txt" 2>&1
[ $? = 0 ] && grep -q "corrected the ept plugin's argument" "$dir/patch3.txt" &&
	$V dumpxml --inactive "$DOM" | grep -qF "table=$dir/ept/$DOM.ept,ram=768M'"
check $? "after a resize to 768 MiB, domxml-patch --ept corrects ram="

if [ $failed != 0 ]; then
	# What the plugin and the guest did, to tell a guest that never ran from a layout that is
	# wrong: the table's counters (a heartbeat that stopped: the vCPUs are stuck) and how
	# much the guest printed.
	echo "# the plugin's table:"
	"$BIN/memtidectl" ept-status "$dir/ept/$DOM.ept" 2>&1 | sed 's/^/# /'
	echo "# guest console: $(wc -c <"$dir/console.log" 2>/dev/null || echo '?') bytes; last lines:"
	tail -5 "$dir/console.log" 2>/dev/null | sed 's/^/# /'
	echo "# memtided log:"
	tail -15 "$dir/memtided.log" | sed 's/^/# /'
fi
exit $failed
