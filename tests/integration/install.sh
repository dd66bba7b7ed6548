#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# install.sh: `make install DESTDIR=... PREFIX=/usr` puts every file where an operator and
# libvirt expect it, with the right modes and paths, stripped, and nothing a host does not
# need (the guest agent and the lab tools come with install-agent and install-lab); the
# libvirt hook behaves as a hook must: it drains the domain XML from stdin, returns at once
# with status 0 when memtided is not running, and never runs virsh; `make uninstall` takes
# everything away again but an edited config.
set -u
BUILD=${BUILD:-build}
echo "1..9"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
dest=$(mktemp -d /tmp/memtide-it-install.XXXXXX)
# Under `make sanitize` (BUILD=build/san) the objects are instrumented: link them so too.
SANFLAG=
[ "${BUILD##*/}" = san ] && SANFLAG=SAN=1
trap 'rm -rf "$dest"' EXIT

make --no-print-directory -s install $SANFLAG DESTDIR="$dest" PREFIX=/usr >"$dest.log" 2>&1
rc=$?
[ $rc = 0 ] || sed 's/^/# /' "$dest.log"
rm -f "$dest.log"
check $rc "make install DESTDIR=... PREFIX=/usr succeeds"

ok=0
for f in usr/sbin/memtided:755 usr/bin/memtidectl:755 lib/systemd/system/memtided.service:644 \
	etc/libvirt/hooks/qemu.d/memtide:755 etc/memtide/memtided.conf:644 \
	usr/share/doc/memtide/operations.md:644 usr/lib/tmpfiles.d/memtide.conf:644 \
	usr/share/man/man8/memtided.8:644 \
	usr/share/man/man5/memtided.conf.5:644 usr/share/man/man1/memtidectl.1:644 \
	usr/share/bash-completion/completions/memtidectl:644 \
	usr/share/memtide/prometheus/memtide-alerts.yml:644 usr/lib/memtide/memtide-ept.so:644 \
	usr/lib/memtide/memtide-zram-swap:755 lib/systemd/system/memtide-zram-swap.service:644; do
	m=$(stat -c %a "$dest/${f%:*}" 2>/dev/null)
	[ "$m" = "${f#*:}" ] || { echo "# ${f%:*}: mode '${m:-missing}', want ${f#*:}"; ok=1; }
done
check $ok "binaries, unit, hook, config, man pages, completion and docs installed with their modes"

! ls "$dest"/usr/bin/memtide-* "$dest"/usr/sbin/memtide-* 2>/dev/null | grep . &&
	! file "$dest/usr/sbin/memtided" "$dest/usr/bin/memtidectl" | grep -q 'not stripped'
check $? "the host install leaves out the guest agent and the lab tools, and its binaries are stripped"

grep -qx 'ExecStart=/usr/sbin/memtided --foreground --syslog' "$dest/lib/systemd/system/memtided.service" &&
	grep -qx 'StateDirectory=memtide' "$dest/lib/systemd/system/memtided.service" &&
	! grep -q '@[A-Z]*@' "$dest/lib/systemd/system/memtided.service" "$dest/etc/libvirt/hooks/qemu.d/memtide" \
		"$dest/lib/systemd/system/memtide-zram-swap.service" &&
	grep -qx 'ExecStart=/usr/lib/memtide/memtide-zram-swap start' "$dest/lib/systemd/system/memtide-zram-swap.service" &&
	grep -qx 'MEMTIDECTL=/usr/bin/memtidectl' "$dest/etc/libvirt/hooks/qemu.d/memtide"
check $? "the unit and the hook point at the installed programs (no placeholder left)"

# A second install keeps an operator's edited config.
echo "# edited by the operator" >>"$dest/etc/memtide/memtided.conf"
make --no-print-directory -s install $SANFLAG DESTDIR="$dest" PREFIX=/usr >/dev/null 2>&1 &&
	grep -q "edited by the operator" "$dest/etc/memtide/memtided.conf" &&
	[ -f "$dest/etc/memtide/memtided.conf.example" ]
check $? "a second install keeps the edited memtided.conf and puts the example beside it"

# The hook, as libvirt calls it, with no memtided listening on the socket it is pointed at.
hook=$dest/hook
sed -e "s|^MEMTIDECTL=.*|MEMTIDECTL=$PWD/$BUILD/bin/memtidectl|" \
	-e "s|^MEMTIDE_SOCKET=.*|MEMTIDE_SOCKET=$dest/none.sock|" \
	"$dest/etc/libvirt/hooks/qemu.d/memtide" >"$hook"
chmod 755 "$hook"
t0=$(date +%s%N)
head -c 1048576 /dev/zero | tr '\0' 'x' | "$hook" vm1 started begin -
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 0 ] && [ $ms -lt 2000 ]
check $? "the hook drains 1 MiB of XML and exits 0 in $ms ms with memtided down"

! grep -Eq '^[^#]*\bvirsh\b' "$dest/etc/libvirt/hooks/qemu.d/memtide" &&
	sh -n "$dest/etc/libvirt/hooks/qemu.d/memtide"
check $? "the hook is valid POSIX sh and never calls virsh"

make --no-print-directory -s install-agent install-lab $SANFLAG DESTDIR="$dest" PREFIX=/usr >/dev/null 2>&1 &&
	[ -x "$dest/usr/sbin/memtide-agent" ] && [ -x "$dest/usr/bin/memtide-sim" ] &&
	[ -x "$dest/usr/bin/memtide-trace" ] &&
	grep -qx 'ExecStart=/usr/sbin/memtide-agent --foreground' "$dest/lib/systemd/system/memtide-agent.service"
check $? "install-agent puts the agent and its unit, install-lab the lab tools"

# Uninstall: everything goes but the edited config (and the example is gone too).
make --no-print-directory -s uninstall DESTDIR="$dest" PREFIX=/usr >"$dest/un.log" 2>&1
left=$(cd "$dest" && find . -type f ! -name un.log ! -name hook | sort)
[ "$left" = "./etc/memtide/memtided.conf" ] && grep -q "kept /etc/memtide/memtided.conf (edited)" "$dest/un.log"
check $? "make uninstall removes every installed file and keeps the edited config${left:+ (left: $(echo $left))}"
exit $failed
