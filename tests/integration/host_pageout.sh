#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# host_pageout.sh: host-side eviction against real QEMUs: the guest RAM map memtided builds at
# attach (host/act/ram_layout.c), what it refuses and why, and a full host swap.
#
# Part 1, the map: QEMU started paused (-S: no guest needs to boot for the map) with memtide's
# ept plugin (a live access source) and a balloon, memtided in plain-QEMU mode with its
# default policy (no agent + live source: return resolves to pageout).  `memtidectl vm show`
# and the log must say:
#   pc, 1 GiB                  1023 MiB evictable (the first MiB is kept: the chipset remaps it)
#   pc, 5 GiB                  RAM above the 4 GiB hole mapped at pc.ram @0xc0000000
#   a DIMM hotplugged          (object-add + device_add while memtided runs, requery 2 s) the
#                              map grows by the DIMM, and the log says the map changed
#   -overcommit mem-lock=on    refused: locked in memory
#   a hugetlbfs DIMM           kept out and said (needs 64 huge pages: set for the test, then
#                              restored)
#   a memfd DIMM (share=on)    kept out and said: pagemap cannot show a swapped shmem page
#   no plugin (source = ept)   no host-side eviction (return does not resolve to pageout with
#                              no live source), and vm show says why ept is not there
# VFIO (pinned guest memory) needs a device to assign: tests/unit/test_ram_layout.c covers it
# on recorded /proc/PID/fd links.
# Part 2, host swap full: a 768 MiB guest with 384 MiB of cold data and a zram swap of only
# 32 MiB: memtided fills it, pauses with a clear line ("host swap full"), keeps running,
# and every cold page still checks (pageload verify).
# Needs root, zram and QEMU; run under the shared lock.  About 90 s.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/../e2e/lib_zram.sh"
e2e_init host_pageout
E2E_JSON= # no figures of its own
echo "1..12"
PLUGIN=$PWD/$BUILD/lib/memtide/memtide-ept.so
CTL=$BUILD/bin/memtidectl
for f in "$BUILD/bin/memtided" "$CTL" "$PLUGIN"; do
	[ -e "$f" ] || { e2e_not_ok "$f is not built"; exit 1; }
done

# paused TAG MEM_OPTS PLUGIN_ARGS [QEMU ARGS...]: a paused QEMU (-m MEM_OPTS; no plugin when
# PLUGIN_ARGS is empty) and memtided on it ([defaults] gets $EXTRA_POLICY); waits
# until memtided has published host-side eviction's state, leaves it in $E2E_DIR/TAG.show
# (memtidectl vm show) and TAG.json, memtided's log in TAG.log.
paused() {
	local tag=$1 mem=$2 pargs=$3
	shift 3
	local sock=$E2E_DIR/$tag.qmp
	local plugin=()
	[ -n "$pargs" ] && plugin=(-plugin "$PLUGIN,table=$E2E_DIR/$tag.ept,$pargs")
	e2e_start qemu-system-x86_64 -accel tcg -S -nographic -nic none -m "$mem" \
		-device virtio-balloon-pci,id=balloon0,free-page-reporting=on \
		-qmp "unix:$sock,server,nowait" -qmp "unix:$sock.test,server,nowait" \
		"${plugin[@]}" "$@" </dev/null \
		>"$E2E_DIR/$tag.qemu" 2>&1
	TAG_QEMU=$E2E_LAST_PID
	printf '[daemon]\nept_dir = %s\n[pageout]\nrequery = 2s\n[defaults]\n%s\n' "$E2E_DIR" \
		"${EXTRA_POLICY:-}" >"$E2E_DIR/$tag.conf"
	local i
	for i in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
	e2e_start "$BUILD/bin/memtided" --qmp "$sock" --name "$tag" --interval 1s --foreground \
		--config "$E2E_DIR/$tag.conf" --no-metrics --socket "$E2E_DIR/$tag.sock" \
		--log-level info 2>"$E2E_DIR/$tag.log"
	TAG_MTD=$E2E_LAST_PID
	for i in $(seq 1 40); do
		"$CTL" --socket "$E2E_DIR/$tag.sock" --json vm show "$tag" >"$E2E_DIR/$tag.json" 2>/dev/null &&
			python3 -c 'import json,os,sys; v=json.load(open(sys.argv[1]))["vm"]; p=v["pageout"]
sys.exit(0 if p["state"] != "off" and (p["evictable_bytes"] or p["state"] == "refused") else
         0 if os.environ.get("OFF_OK") and v.get("source_not_taken") else 1)' \
				"$E2E_DIR/$tag.json" 2>/dev/null && break
		sleep 0.5
	done
	"$CTL" --socket "$E2E_DIR/$tag.sock" vm show "$tag" >"$E2E_DIR/$tag.show" 2>&1
}
stop_paused() {
	kill "$TAG_MTD" "$TAG_QEMU" 2>/dev/null
	wait "$TAG_MTD" "$TAG_QEMU" 2>/dev/null
}
# po TAG FIELD: a field of the pageout object
po() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vm"]["pageout"][sys.argv[2]])' "$E2E_DIR/$1.json" "$2" 2>/dev/null; }
MiB=$((1 << 20))

paused pc1g 1G "ram=1G"
[ "$(po pc1g evictable_bytes)" = $((1023 * MiB)) ] && grep -q 'guest RAM map checked: 1023 MiB' "$E2E_DIR/pc1g.log"
e2e_check $? "pc, 1 GiB: 1023 MiB evictable ($(po pc1g state): $(po pc1g why | head -c 80))"
grep -q 'host pageout' "$E2E_DIR/pc1g.show" && grep -q 'returned by pageout' "$E2E_DIR/pc1g.show"
e2e_check $? "vm show says pageout is in force and shows host pageout's state"
# The free page scan (each interval, once the map is open): a QEMU started paused has
# touched almost none of its guest's RAM, so nearly all of it holds nothing on the host.
free=0
for i in $(seq 1 40); do
	"$CTL" --socket "$E2E_DIR/pc1g.sock" --json vm show pc1g >"$E2E_DIR/pc1g.json" 2>/dev/null
	free=$(po pc1g free_bytes)
	[ "${free:-0}" -ge $((1000 * MiB)) ] && break
	sleep 0.25
done
[ "${free:-0}" -ge $((1000 * MiB)) ] && [ "$free" -le $((1023 * MiB)) ] &&
	"$CTL" --socket "$E2E_DIR/pc1g.sock" vm show pc1g | grep -q 'free in the guest'
e2e_check $? "the guest's free memory as the host sees it: $((${free:-0} / MiB)) of 1023 MiB hold nothing on the host"
stop_paused

paused pc5g 5G "ram=5G,lowmem=3G"
[ "$(po pc5g evictable_bytes)" = $((5 * 1024 * MiB - MiB)) ] &&
	grep -q '0x100000000+2097152K pc.ram@0xc0000000' "$E2E_DIR/pc5g.log"
e2e_check $? "pc, 5 GiB: RAM above the 4 GiB hole mapped at pc.ram @3 GiB ($(po pc5g evictable_bytes) bytes evictable)"
stop_paused

paused dimm 1G,slots=2,maxmem=4G "ram=1G"
before=$(po dimm evictable_bytes)
# A monitor of the test's own: QEMU serves one client per monitor, and memtided holds the first.
python3 - "$E2E_DIR/dimm.qmp.test" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1]); f = s.makefile("rw")
def cmd(c):
    f.write(json.dumps(c) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "event" not in m: return m
json.loads(f.readline()); cmd({"execute": "qmp_capabilities"})
print(cmd({"execute": "object-add", "arguments": {"qom-type": "memory-backend-ram", "id": "hp1", "size": 512 << 20}}))
print(cmd({"execute": "device_add", "arguments": {"driver": "pc-dimm", "id": "dimmhp1", "memdev": "hp1"}}))
PY
ok=1
for i in $(seq 1 20); do
	"$CTL" --socket "$E2E_DIR/dimm.sock" --json vm show dimm >"$E2E_DIR/dimm.json" 2>/dev/null
	[ "$(po dimm evictable_bytes)" = $((before + 512 * MiB)) ] && { ok=0; break; }
	sleep 0.5
done
[ $ok = 0 ] && grep -q 'guest RAM map changed' "$E2E_DIR/dimm.log"
e2e_check $? "a DIMM hotplugged at run time joins the map ($before -> $(po dimm evictable_bytes) bytes)"
stop_paused

paused memfd 1G,slots=2,maxmem=4G "ram=1G" \
	-object memory-backend-memfd,id=mem1,size=256M,share=on -device pc-dimm,id=dimm1,memdev=mem1
# "said": in the attach's map line of the log (vm show's why holds it only while no pause
# reason, such as the first cold age's wait, takes its place)
[ "$(po memfd evictable_bytes)" = $((1023 * MiB)) ] &&
	grep -q 'guest RAM map checked.*RAM block mem1 is shared memory' "$E2E_DIR/memfd.log"
e2e_check $? "a shared-memory (memfd) DIMM is kept out and said ($(grep -o 'RAM block mem1 is shared memory[^;]*' "$E2E_DIR/memfd.log" | head -1 | head -c 90))"
stop_paused

paused mlock 256M "ram=256M" -overcommit mem-lock=on
[ "$(po mlock state)" = refused ] && po mlock why | grep -q 'locked in memory'
e2e_check $? "mlocked guest RAM: refused and said ($(po mlock why | head -c 100))"
stop_paused

old_hp=$(cat /proc/sys/vm/nr_hugepages)
mnt=$E2E_DIR/hugetlbfs
mkdir -p "$mnt"
if echo $((old_hp + 64)) >/proc/sys/vm/nr_hugepages && mount -t hugetlbfs none "$mnt"; then
	paused huge 512M,slots=2,maxmem=2G "ram=512M" \
		-object "memory-backend-file,id=hmem,size=64M,mem-path=$mnt,share=on,prealloc=on" \
		-device pc-dimm,id=hdimm,memdev=hmem
	[ "$(po huge evictable_bytes)" = $((511 * MiB)) ] &&
		grep -q 'guest RAM map checked.*RAM block hmem is on hugetlbfs' "$E2E_DIR/huge.log"
	e2e_check $? "a hugetlbfs DIMM is kept out and said ($(grep -o 'RAM block hmem is on hugetlbfs[^;]*' "$E2E_DIR/huge.log" | head -1 | head -c 100))"
	stop_paused
	umount "$mnt"
else
	e2e_not_ok "hugetlbfs: cannot reserve 64 huge pages or mount hugetlbfs"
fi
echo "$old_hp" >/proc/sys/vm/nr_hugepages

# (OFF_OK: "off" is the answer here, known once the VM's sources have been tried)
OFF_OK=1 EXTRA_POLICY="source = ept" paused noplugin 512M ""
# No live source: return does not resolve to pageout, host-side eviction stays off, and vm
# show says why the ept source asked for is not there.
[ "$(po noplugin state)" = off ] && grep -q 'not ept: .*without the memtide-ept plugin' "$E2E_DIR/noplugin.show"
e2e_check $? "without the plugin (no live source): no host-side eviction, and said ($(grep -o 'not ept: .*' "$E2E_DIR/noplugin.show" | head -c 90))"
stop_paused

# Part 2: host swap full.
if ! e2e_build || [ ! -x "$BUILD/guest/bin/pageload" ]; then
	e2e_not_ok "guest image or pageload missing"
	exit 1
fi
if ! e2e_zram_add 32M; then
	# A host without swap or zram: part 2's three checks cannot run; say why.
	for _ in 1 2 3; do E2E_N=$((E2E_N + 1)); echo "ok $E2E_N # SKIP host swap full: $E2E_ZRAM_WHY"; done
	exit 0
fi
e2e_boot 768 "pageload 32 384" "memtide.agent=0" -plugin "$PLUGIN,table=$E2E_DIR/full.ept,ram=768M" \
	-chardev "socket,id=tc,path=$E2E_DIR/full.port,server=on,wait=off" \
	-device virtserialport,chardev=tc,name=org.memtide.test.0
e2e_wait '^WL-READY' 120 >/dev/null || { e2e_not_ok "the guest did not start pageload"; exit 1; }
# A short hold after the guest takes memory back (as scenario 12's cycles): the test is
# about a full swap, not the controller's back-off between batches.
printf '[daemon]\nept_dir = %s\n[pageout]\nswap_reserve = 16M\n[controller]\nhold_after_deflate = 10s\nhold_max = 15s\n' \
	"$E2E_DIR" >"$E2E_DIR/full.conf"
e2e_start "$BUILD/bin/memtided" --qmp "$E2E_QMP" --name full --interval 1s --foreground \
	--config "$E2E_DIR/full.conf" --no-metrics --socket "$E2E_DIR/full.sock" --log-level info \
	2>"$E2E_DIR/full.log"
# The swap (16 MiB past its reserve) is smaller than memtided's first batch (38-136 MiB to
# swap, here), so it fills on the first tick that evicts.  With 160
# MiB it took several ticks, and the controller paused pageout between them for reasons of
# its own (its target grew back on the guest's signals, then a cooldown; the refault
# controller learning): the swap stopped at 141-143 MiB, short of its 16 MiB reserve, with
# no line in 180 s (two clean-clone CI runs; here with 96 MiB twice, with 64 MiB once).
line=$(e2e_wait_file "$E2E_DIR/full.log" 'host swap full' 180)
rc=$?
"$CTL" --socket "$E2E_DIR/full.sock" --json vm show full >"$E2E_DIR/full.json"
e2e_check $rc "swap full: a clear log line (${line#*: })"
if [ $rc != 0 ]; then # twice in clean-clone CI runs, never here: say what memtided was doing
	echo "# pageout $(po full state): $(po full why)"
	grep -E 'pageout|eviction|hold|decision| target ' "$E2E_DIR/full.log" | tail -15 | sed 's/^/# /'
	tail -5 "$E2E_DIR/full.log" | sed 's/^/# /'
	sed 's/^/# swaps: /' /proc/swaps
fi
# The VM's share of the swap is checked, not the swap's use: this zram has the host's
# highest swap priority, so other processes' pages can land in it too (one CI run: 14 MiB
# used, 6 of them counted as this VM's, when its 2 MiB runs stopped fitting 1 MiB short of
# the reserve).
sw=$(po full swapped_bytes)
[ "$(po full state)" = paused ] && [ "$sw" -ge $((4 * MiB)) ] && [ "$sw" -le $((32 * MiB)) ]
e2e_check $? "pageout paused with swap full, $((sw / MiB)) MiB in the 32 MiB swap"
verdict=$(python3 - "$E2E_DIR/full.port" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(120)
f = s.makefile("rw"); f.write("verify\n"); f.flush(); print(f.readline().strip())
f.write("quit\n"); f.flush()
PY
)
[[ $verdict =~ ^verified\ 1\ bad=0\ pages=98304$ ]] && kill -0 "$E2E_LAST_PID" 2>/dev/null &&
	! grep -q ' error: ' "$E2E_DIR/full.log"
e2e_check $? "every cold page checks after a full swap, memtided running without errors ($verdict)"
exit 0
