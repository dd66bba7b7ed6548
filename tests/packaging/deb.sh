#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# deb.sh: `make deb` builds the three Debian packages from this tree, lintian has nothing to
# say about them (the overrides kept are in debian/*.lintian-overrides, each with its
# reason), and each package holds what it should and nothing of the others':
#   memtide        memtided, memtidectl, QEMU's memtide-ept plugin and its tmpfiles.d entry, the
#                  libvirt hook, the unit,
#                  the config (a conffile),
#                  man pages, bash completion, docs, Prometheus rules, Grafana dashboard
#   memtide-agent  the static agent (no shared library needed) and its unit; nothing else
#   memtide-lab    memtide-sim and memtide-trace, which the other two leave out
# The packages are unpacked (dpkg-deb -x), not installed: installing would touch this host's
# /etc/libvirt and systemd, shared with every other test (tests/packaging/systemd_guest.sh
# installs, upgrades and purges them under a real systemd).  The unpacked programs run, their
# version is the package's, and the units name the packaged paths; every Documentation= of a
# unit is a file or man page the packages ship; the maintainer scripts enable and start
# memtided and leave the zram swap unit alone; the build ran the unit tests, and skips them
# under DEB_BUILD_OPTIONS=nocheck.
set -u
BUILD=${BUILD:-build}
echo "1..10"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
skip_rest() { while [ $n -lt 10 ]; do n=$((n + 1)); echo "ok $n # SKIP $*"; done; exit 0; }
command -v dpkg-buildpackage >/dev/null && command -v lintian >/dev/null &&
	[ -e /usr/share/perl5/Debian/Debhelper/Dh_Lib.pm ] ||
	skip_rest "debhelper, dpkg-dev or lintian missing (scripts/deps.sh installs them)"
# Under make sanitize (BUILD=build/san) the package is built the same way: it is not ours.
out=$PWD/$BUILD/deb-test
rm -rf "$out"
t0=$SECONDS
make --no-print-directory -s deb BUILD="$BUILD/deb-test-build" >"$BUILD/deb-test.log" 2>&1
rc=$?
mv "$BUILD/deb-test-build/deb" "$out" 2>/dev/null
rm -rf "$BUILD/deb-test-build"
[ $rc = 0 ] || tail -30 "$BUILD/deb-test.log" | sed 's/^/# /'
check $rc "make deb builds memtide, memtide-agent and memtide-lab in $((SECONDS - t0)) s"
[ $rc = 0 ] || skip_rest "no packages"

[ ! -s "$out/lintian.txt" ]
check $? "lintian: no tag at any level ($(cat debian/*.lintian-overrides | grep -cv '^#') overrides kept, each with its reason)"

version=$(dpkg-parsechangelog -S Version)
x=$(mktemp -d /tmp/memtide-it-deb.XXXXXX)
trap 'rm -rf "$x"' EXIT
for p in memtide memtide-agent memtide-lab; do
	mkdir -p "$x/$p"
	dpkg-deb -x "$out/${p}_${version}_amd64.deb" "$x/$p"
	(cd "$x/$p" && find . -type f -o -type l | sed 's|^\./||' | sort) >"$x/$p.files"
done

# contents FILE WANT...: each wanted path is in the list; the list has nothing unwanted.
contents() {
	local list=$1 rc=0
	shift
	for f in "$@"; do
		grep -qx "$f" "$list" || { echo "# $(basename "$list" .files): missing $f"; rc=1; }
	done
	return $rc
}
contents "$x/memtide.files" usr/sbin/memtided usr/bin/memtidectl \
	lib/systemd/system/memtided.service etc/libvirt/hooks/qemu.d/memtide \
	etc/memtide/memtided.conf usr/share/man/man8/memtided.8.gz \
	usr/share/man/man1/memtidectl.1.gz usr/share/man/man5/memtided.conf.5.gz \
	usr/share/bash-completion/completions/memtidectl usr/share/doc/memtide/copyright \
	usr/share/doc/memtide/operations.md usr/share/memtide/prometheus/memtide-alerts.yml \
	usr/share/memtide/grafana/memtide-dashboard.json usr/lib/memtide/memtide-ept.so \
	usr/lib/tmpfiles.d/memtide.conf &&
	! grep -E 'memtide-(agent|sim|trace)' "$x/memtide.files" &&
	[ "$(dpkg-deb -I "$out/memtide_${version}_amd64.deb" conffiles | sort)" = \
		"$(printf '/etc/libvirt/hooks/qemu.d/memtide\n/etc/memtide/memtided.conf')" ] &&
	[ "$(stat -c %a "$x/memtide/etc/libvirt/hooks/qemu.d/memtide")" = 755 ]
check $? "memtide: daemon, CLI, hook, unit, config (conffiles: the config and the hook), man pages, completion, docs; no agent or lab tool"

contents "$x/memtide-agent.files" usr/sbin/memtide-agent lib/systemd/system/memtide-agent.service \
	usr/share/man/man8/memtide-agent.8.gz &&
	[ "$(grep -cvE '^usr/share/(doc|lintian)/' "$x/memtide-agent.files")" = 3 ] &&
	file -b "$x/memtide-agent/usr/sbin/memtide-agent" | grep -q 'statically linked' &&
	dpkg-deb -f "$out/memtide-agent_${version}_amd64.deb" Built-Using | grep -q json-c &&
	! dpkg-deb -f "$out/memtide-agent_${version}_amd64.deb" Depends | grep -q lib
check $? "memtide-agent: the static agent (Built-Using names what it embeds; no library dependency), its unit and man page, nothing else"

contents "$x/memtide-lab.files" usr/bin/memtide-sim usr/bin/memtide-trace \
	usr/share/man/man1/memtide-sim.1.gz usr/share/man/man1/memtide-trace.1.gz
check $? "memtide-lab: memtide-sim and memtide-trace with their man pages"

v1=$("$x/memtide/usr/sbin/memtided" --version | head -1) && v2=$("$x/memtide/usr/bin/memtidectl" --version) &&
	"$x/memtide-agent/usr/sbin/memtide-agent" --version >/dev/null &&
	[ "$v1" = "memtided $version" ] && echo "$v2" | grep -q "$version" &&
	! file "$x/memtide/usr/sbin/memtided" | grep -q 'not stripped'
check $? "the packaged programs run, say the package's version ($version), and are stripped (symbols in -dbgsym)"

grep -qx 'ExecStart=/usr/sbin/memtided --foreground --syslog' "$x/memtide/lib/systemd/system/memtided.service" &&
	grep -qx 'ExecStart=/usr/sbin/memtide-agent --foreground' "$x/memtide-agent/lib/systemd/system/memtide-agent.service" &&
	grep -qx 'MEMTIDECTL=/usr/bin/memtidectl' "$x/memtide/etc/libvirt/hooks/qemu.d/memtide" &&
	! grep -rq '@[A-Z]*@' "$x/memtide/lib" "$x/memtide/etc" "$x/memtide-agent/lib" &&
	dpkg-deb -I "$out/memtide_${version}_amd64.deb" postinst | grep -q 'deb-systemd-helper'
check $? "the units and the hook name the packaged paths"

# Every Documentation= of every packaged unit: a man page or a file the packages ship.
bad=
for u in "$x"/memtide*/lib/systemd/system/*.service; do
	for d in $(sed -n 's/^Documentation=//p' "$u"); do
		case $d in
		man:*)
			page=${d#man:} sec=${page##*(} sec=${sec%)} page=${page%(*}
			ls "$x"/memtide*/usr/share/man/man$sec/$page.$sec.gz >/dev/null 2>&1 || bad="$bad $d" ;;
		file:*) ls "$x"/memtide*"${d#file:}" >/dev/null 2>&1 || bad="$bad $d" ;;
		*) bad="$bad $d" ;;
		esac
	done
done
[ -z "$bad" ]
check $? "every unit's Documentation= is a man page or file the packages ship${bad:+ (not shipped:$bad)}"

# memtided: enabled, started, restarted after an upgrade.  The zram swap: none of debhelper's
# deb-systemd-invoke lines (start, restart, stop) names it, and it is enabled only where an
# earlier install had it enabled (dh_installsystemd --no-enable --no-start --no-stop-on-upgrade); removal turns it off
# only through its own stop, which refuses while pages are in it.
pi=$(dpkg-deb -I "$out/memtide_${version}_amd64.deb" postinst)
pr=$(dpkg-deb -I "$out/memtide_${version}_amd64.deb" prerm)
echo "$pi" | grep -q "deb-systemd-helper enable 'memtided.service'" &&
	echo "$pi" | grep -q "deb-systemd-invoke \$_dh_action 'memtided.service'" &&
	! { echo "$pi"; echo "$pr"; } | grep -q "deb-systemd-invoke .*'memtide-zram-swap.service'" &&
	echo "$pi" | grep -q "deb-systemd-helper debian-installed 'memtide-zram-swap.service'" &&
	echo "$pr" | grep -q '/usr/lib/memtide/memtide-zram-swap stop; then'
check $? "postinst enables and starts memtided; the zram swap is neither enabled nor started, nor stopped on upgrade"

# The build ran the unit tests; nocheck skips them.
ran=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/build.log" | tail -1)
with=$(make -s -n -f debian/rules override_dh_auto_test 2>/dev/null)
without=$(DEB_BUILD_OPTIONS=nocheck make -s -n -f debian/rules override_dh_auto_test 2>/dev/null)
[ -n "$ran" ] && [ "${ran%% *}" -gt 0 ] && echo "$ran" | grep -q ' 0 failed$' &&
	echo "$with" | grep -q check-unit && ! echo "$without" | grep -q check-unit
check $? "dh_auto_test ran the unit tests in the package build (${ran:-none}); DEB_BUILD_OPTIONS=nocheck skips them"
exit $failed
