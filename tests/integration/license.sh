#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# license.sh - memtide is GPL-2.0-or-later, and says so where a reader or a tool looks: COPYING
# holds the GPL version 2 text, every tracked source file (C, headers, scripts, units, man
# pages, configuration) names its license by an SPDX identifier in its first lines,
# debian/copyright is machine-readable (DEP-5) with that license, and each program's --version
# states it.  Files that cannot carry a comment (JSON, images, traces, fuzz seeds, test data)
# and Debian's own control files are left out by name below.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${MEMTIDE_BIN:-build/bin}
ID='SPDX-License-Identifier: GPL-2.0-or-later'
echo "1..5"
n=0
check() {
	n=$((n + 1))
	if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi
}

# Files that cannot hold a comment, or whose format Debian fixes.
exempt='^(tests/fuzz/corpus/|tests/unit/data/)|\.(md|json|svg|png|mtt|dict|install)$|lintian-overrides$|^debian/(changelog|control|copyright|source/format)$|^\.gitignore$|^COPYING$'
missing=$(git ls-files | grep -Ev "$exempt" | while read -r f; do
	head -n 3 "$f" | grep -qF "$ID" || echo "$f"
done)
total=$(git ls-files | grep -Evc "$exempt")
[ -n "$missing" ] && echo "$missing" | sed 's/^/# no SPDX line: /'
check "every one of the $total tracked source files names GPL-2.0-or-later in an SPDX line" '[ -z "$missing" ] && [ "$total" -gt 100 ]'

check "COPYING is the GNU GPL version 2" \
	'grep -q "GNU GENERAL PUBLIC LICENSE" COPYING && grep -q "Version 2, June 1991" COPYING'

# DEP-5: the Format line, every Files stanza with a License that has its own text stanza.
check "debian/copyright is DEP-5 with GPL-2.0+ for every file" '
	head -n 1 debian/copyright | grep -q "^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" &&
	! grep -q "all rights are reserved" debian/copyright &&
	[ "$(grep -c "^License: GPL-2.0+$" debian/copyright)" -ge 2 ] &&
	grep -q "^ On Debian systems, the complete text of the GNU General Public" debian/copyright'

check "memtided and memtidectl --version state the license" \
	'"$BIN/memtided" --version | grep -q "GPL-2.0-or-later" && "$BIN/memtidectl" --version | grep -q "GPL-2.0-or-later"'
check "memtide-agent --version states it, and the static binary carries it" \
	'"$BIN/memtide-agent" --version | grep -q "GPL-2.0-or-later" && grep -qa "GPL-2.0-or-later" "$BIN/memtide-agent"'
