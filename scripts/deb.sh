#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# deb.sh: build memtide's Debian packages from this tree (behind `make deb`).
#
# The tree as it stands (committed or not, but not what .gitignore names) is copied to
# $BUILD/deb/memtide-VERSION and built there with dpkg-buildpackage (binary packages only,
# unsigned), so the work tree's own build/ is never touched.  The .deb files, the .changes
# and lintian's report end in $BUILD/deb/.  Lintian must have nothing to say at warning
# level or above, nor at info level (debian/*.lintian-overrides hold the few tags kept, each
# with its reason; lintian --show-overrides counts an overridden tag as a failure, so the
# verdict run leaves it out).
# Needs: debhelper, lintian and the build dependencies (scripts/deps.sh installs them).
set -euo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
top=$PWD
version=$(dpkg-parsechangelog -S Version)
out=$top/$BUILD/deb
src=$out/memtide-$version
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$src"
cd "$src"
unset BUILD
echo "deb.sh: building memtide $version in $src" >&2
if ! dpkg-buildpackage -b -us -uc -j2 >"$out/build.log" 2>&1; then
	tail -40 "$out/build.log" >&2
	echo "deb.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
cd "$out"
rm -rf "$src"
ls -1 "$out"/*.deb >&2
changes=$(ls "$out"/*.changes)
# Lintian as root says so on stderr; the verdict is its exit status and its report.
rc=0
lintian --fail-on error,warning --display-info "$changes" >"$out/lintian.txt" 2>"$out/lintian.err" || rc=$?
if [ -s "$out/lintian.txt" ]; then
	sed 's/^/lintian: /' "$out/lintian.txt" >&2
fi
# Info-level tags do not fail lintian; they fail here, so that "clean" means no tag at all.
if [ $rc = 0 ] && [ -s "$out/lintian.txt" ]; then
	rc=1
fi
if [ $rc != 0 ]; then
	grep -v 'root privileges' "$out/lintian.err" >&2 || true
	echo "deb.sh: lintian failed (exit $rc)" >&2
	exit 1
fi
echo "deb.sh: packages in $out, lintian clean" >&2
