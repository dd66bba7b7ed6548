#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# contrib/install.sh: installs (or uninstalls) one part of memtide.  Behind `make install`,
# `make install-agent`, `make install-lab`, `make uninstall` and debian/rules.
#
#   install.sh install host    memtided (sbin), memtidectl (bin), QEMU's memtide-ept plugin
#                              (lib/memtide), the systemd unit, the libvirt
#                              hook, /etc/memtide/memtided.conf, man pages, bash completion,
#                              the operator docs, the Prometheus rules and Grafana dashboard,
#                              the zram swap helper and its unit (lib/memtide, host-side
#                              eviction), the ept tmpfiles.d entry.  What a host needs and nothing more: the
#                              guest agent and the lab tools are not put on a host's PATH.
#   install.sh install agent   memtide-agent (sbin) and its unit, for a guest image.
#   install.sh install lab     memtide-sim and memtide-trace (bin), the policy lab.
#   install.sh uninstall       removes everything the three put there, except an edited
#                              /etc/memtide/memtided.conf (kept, and said so) and
#                              /var/lib/memtide (memtided's state).
#
# Environment: DESTDIR and PREFIX (honoured both), BIN (where the built programs are),
# STRIP (-s to install binaries stripped, the default of `make install`; empty in a package
# build, where dh_strip keeps the symbols in -dbgsym packages).  An existing
# /etc/memtide/memtided.conf is never overwritten (the example goes beside it).
set -eu
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
STRIP=${STRIP-}
SRC=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$SRC/.." && pwd)
BIN=${BIN:-$TOP/build/bin}
SBINDIR=$PREFIX/sbin
BINDIR=$PREFIX/bin
DOCDIR=$PREFIX/share/doc/memtide
DATADIR=$PREFIX/share/memtide # Prometheus rules, Grafana dashboard
LIBDIR=$PREFIX/lib/memtide    # QEMU's memtide-ept plugin
EPT_PLUGIN=${EPT_PLUGIN:-$TOP/build/lib/memtide/memtide-ept.so}
MANDIR=$PREFIX/share/man
COMPDIR=$PREFIX/share/bash-completion/completions
TMPFILESDIR=$PREFIX/lib/tmpfiles.d
# /usr/local units go to /etc/systemd/system; a distribution prefix to /lib/systemd/system.
if [ "$PREFIX" = /usr ]; then UNITDIR=/lib/systemd/system; else UNITDIR=/etc/systemd/system; fi
HOOK=/etc/libvirt/hooks/qemu.d/memtide
CONF=/etc/memtide/memtided.conf

subst() {
	sed -e "s|@SBINDIR@|$SBINDIR|g" -e "s|@BINDIR@|$BINDIR|g" -e "s|@DOCDIR@|$DOCDIR|g" \
		-e "s|@LIBDIR@|$LIBDIR|g" "$1"
}
# put SRC DEST MODE: a file with the placeholders filled in.
put() {
	install -d "$(dirname "$DESTDIR$2")"
	subst "$1" >"$DESTDIR$2"
	chmod "$3" "$DESTDIR$2"
}
prog() { # prog NAME DIR
	[ -x "$BIN/$1" ] || { echo "install.sh: $BIN/$1 is not built (make all)" >&2; exit 1; }
	install -d "$DESTDIR$2"
	# shellcheck disable=SC2086
	install -m 0755 $STRIP "$BIN/$1" "$DESTDIR$2/$1"
}
man() { # man PAGE
	sec=${1##*.}
	install -d "$DESTDIR$MANDIR/man$sec"
	install -m 0644 "$TOP/docs/man/$1" "$DESTDIR$MANDIR/man$sec/$1"
}

install_host() {
	prog memtided "$SBINDIR"
	prog memtidectl "$BINDIR"
	# QEMU's memtide-ept TCG plugin (the ept access source): BIN/../lib/memtide, where
	# memtidectl ept-plugin looks for it beside its own install.
	[ -f "$EPT_PLUGIN" ] || { echo "install.sh: $EPT_PLUGIN is not built (make all)" >&2; exit 1; }
	install -d "$DESTDIR$LIBDIR"
	# shellcheck disable=SC2086
	install -m 0644 $STRIP "$EPT_PLUGIN" "$DESTDIR$LIBDIR/memtide-ept.so"
	put "$SRC/systemd/memtided.service" "$UNITDIR/memtided.service" 0644
	# /run/memtide/ept (root:kvm 1770) at boot: where the plugin in QEMU makes its table
	# (docs/operations.md).
	install -d "$DESTDIR$TMPFILESDIR"
	install -m 0644 "$SRC/tmpfiles.d/memtide.conf" "$DESTDIR$TMPFILESDIR/memtide.conf"
	put "$SRC/libvirt/hooks/qemu.d/memtide" "$HOOK" 0755
	# Host swap for host-side eviction (return=pageout/auto): a helper beside the plugin,
	# and its unit (`systemctl enable --now memtide-zram-swap`; docs/operations.md).
	install -m 0755 "$SRC/memtide-zram-swap" "$DESTDIR$LIBDIR/memtide-zram-swap"
	put "$SRC/systemd/memtide-zram-swap.service" "$UNITDIR/memtide-zram-swap.service" 0644
	install -d "$DESTDIR/etc/memtide"
	if [ -e "$DESTDIR$CONF" ]; then
		install -m 0644 "$SRC/memtided.conf" "$DESTDIR$CONF.example"
		echo "install.sh: kept the existing $CONF (example: memtided.conf.example)"
	else
		install -m 0644 "$SRC/memtided.conf" "$DESTDIR$CONF"
	fi
	man memtided.8
	man memtidectl.1
	man memtided.conf.5
	install -d "$DESTDIR$COMPDIR" "$DESTDIR$DOCDIR" "$DESTDIR$DATADIR/prometheus" \
		"$DESTDIR$DATADIR/grafana"
	install -m 0644 "$SRC/bash-completion/memtidectl" "$DESTDIR$COMPDIR/memtidectl"
	for d in "$TOP"/docs/operations.md "$TOP"/docs/control-socket.md "$TOP"/docs/design.md \
		"$TOP"/docs/protocol.md "$TOP"/README.md; do
		install -m 0644 "$d" "$DESTDIR$DOCDIR/"
	done
	install -m 0644 "$SRC/prometheus/memtide-alerts.yml" "$DESTDIR$DATADIR/prometheus/"
	install -m 0644 "$SRC/grafana/memtide-dashboard.json" "$DESTDIR$DATADIR/grafana/"
	if [ -z "$DESTDIR" ]; then
		echo "install.sh: installed. Next: systemctl daemon-reload && systemctl enable --now memtided"
		echo "install.sh: libvirtd reads hooks when it starts: systemctl restart libvirtd"
	fi
}

install_agent() {
	prog memtide-agent "$SBINDIR"
	put "$SRC/systemd/memtide-agent.service" "$UNITDIR/memtide-agent.service" 0644
	man memtide-agent.8
}

install_lab() {
	prog memtide-sim "$BINDIR"
	prog memtide-trace "$BINDIR"
	man memtide-sim.1
	man memtide-trace.1
}

uninstall() {
	for f in "$SBINDIR/memtided" "$BINDIR/memtidectl" "$SBINDIR/memtide-agent" \
		"$BINDIR/memtide-sim" "$BINDIR/memtide-trace" "$UNITDIR/memtided.service" \
		"$UNITDIR/memtide-agent.service" "$HOOK" "$MANDIR/man8/memtided.8" \
		"$MANDIR/man1/memtidectl.1" "$MANDIR/man5/memtided.conf.5" \
		"$MANDIR/man8/memtide-agent.8" "$MANDIR/man1/memtide-sim.1" \
		"$MANDIR/man1/memtide-trace.1" "$COMPDIR/memtidectl" "$CONF.example" \
		"$UNITDIR/memtide-zram-swap.service" "$TMPFILESDIR/memtide.conf"; do
		rm -f "$DESTDIR$f"
	done
	rm -rf "$DESTDIR$DOCDIR" "$DESTDIR$DATADIR" "$DESTDIR$LIBDIR"
	if [ -e "$DESTDIR$CONF" ]; then
		if cmp -s "$SRC/memtided.conf" "$DESTDIR$CONF"; then
			rm -f "$DESTDIR$CONF"
			rmdir "$DESTDIR/etc/memtide" 2>/dev/null || true
		else
			echo "install.sh: kept $CONF (edited); remove it by hand if it is no longer wanted"
		fi
	fi
	if [ -z "$DESTDIR" ]; then
		echo "install.sh: uninstalled; /var/lib/memtide (memtided's state) is kept."
		echo "install.sh: systemctl daemon-reload; libvirtd forgets the hook when it restarts"
	fi
}

case "${1:-} ${2:-}" in
"install host" | "install ") install_host ;;
"install agent") install_agent ;;
"install lab") install_lab ;;
"uninstall "*) uninstall ;;
*)
	echo "usage: install.sh install host|agent|lab, or install.sh uninstall" >&2
	exit 2
	;;
esac
