#!/bin/sh
# contrib/install.sh: installs what `make install` puts beside the binaries: the systemd
# unit, the libvirt hook, the example configuration and the operator docs.  Called by the
# Makefile with DESTDIR and PREFIX in the environment; honours both.  An existing
# /etc/memtide/memtided.conf is never overwritten (the example goes beside it).
set -eu
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
SRC=$(cd "$(dirname "$0")" && pwd)
SBINDIR=$PREFIX/sbin
DOCDIR=$PREFIX/share/doc/memtide
# /usr/local units go to /etc/systemd/system; a distribution prefix to /lib/systemd/system.
if [ "$PREFIX" = /usr ]; then UNITDIR=/lib/systemd/system; else UNITDIR=/etc/systemd/system; fi

subst() { sed -e "s|@SBINDIR@|$SBINDIR|g" -e "s|@BINDIR@|$PREFIX/bin|g" -e "s|@DOCDIR@|$DOCDIR|g" "$1"; }

install -d "$DESTDIR$UNITDIR" "$DESTDIR/etc/libvirt/hooks/qemu.d" "$DESTDIR/etc/memtide" \
	"$DESTDIR$DOCDIR"
subst "$SRC/systemd/memtided.service" >"$DESTDIR$UNITDIR/memtided.service"
chmod 0644 "$DESTDIR$UNITDIR/memtided.service"
# Host swap for host-side eviction (return=pageout/auto): enable it with
# `systemctl enable --now memtide-zram-swap` (docs/operations.md, "Host swap").
install -d "$DESTDIR$SBINDIR"
install -m 0755 "$SRC/memtide-zram-swap" "$DESTDIR$SBINDIR/memtide-zram-swap"
subst "$SRC/systemd/memtide-zram-swap.service" >"$DESTDIR$UNITDIR/memtide-zram-swap.service"
chmod 0644 "$DESTDIR$UNITDIR/memtide-zram-swap.service"
subst "$SRC/libvirt/hooks/qemu.d/memtide" >"$DESTDIR/etc/libvirt/hooks/qemu.d/memtide"
chmod 0755 "$DESTDIR/etc/libvirt/hooks/qemu.d/memtide"
if [ -e "$DESTDIR/etc/memtide/memtided.conf" ]; then
	install -m 0644 "$SRC/memtided.conf" "$DESTDIR/etc/memtide/memtided.conf.example"
	echo "install.sh: kept the existing /etc/memtide/memtided.conf (example: memtided.conf.example)"
else
	install -m 0644 "$SRC/memtided.conf" "$DESTDIR/etc/memtide/memtided.conf"
fi
for d in "$SRC"/../docs/*.md "$SRC"/../README.md; do
	[ -f "$d" ] && install -m 0644 "$d" "$DESTDIR$DOCDIR/"
done
if [ -z "$DESTDIR" ]; then
	echo "install.sh: installed. Next: systemctl daemon-reload && systemctl enable --now memtided"
	echo "install.sh: libvirtd reads hooks when it starts: systemctl restart libvirtd"
fi
