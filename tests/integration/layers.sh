#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# layers.sh - the layering of host/ and the guest agent (scripts/layers.py, host/README.md):
# no arrow runs up a folder, no circle between files, every host include names its folder.
# `make lint` runs the script too; here it runs on the objects of $BUILD, and first on a
# scratch tree with one fault of each kind planted, so a checker that stopped seeing them
# fails here rather than passing everything.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
echo "1..5"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# scratch TREE: a git tree with host/decide, host/daemon, host/act and host/base files.
scratch() {
	rm -rf "$tmp/t" && mkdir -p "$tmp/t/host/decide" "$tmp/t/host/daemon" "$tmp/t/host/act" \
		"$tmp/t/host/base" && git -C "$tmp/t" init -q
	printf '/* x */\nint base_x(void);\n' >"$tmp/t/host/base/x.h"
	printf '#include "base/x.h"\nint base_x(void) { return 1; }\n' >"$tmp/t/host/base/x.c"
	printf '#include "base/x.h"\nint rule(void);\n' >"$tmp/t/host/decide/rule.h"
	printf '#include "decide/rule.h"\nint rule(void) { return base_x(); }\n' >"$tmp/t/host/decide/rule.c"
	printf 'int loop(void);\n' >"$tmp/t/host/daemon/loop.h"
	printf '#include "daemon/loop.h"\n#include "decide/rule.h"\nint loop(void) { return rule(); }\n' \
		>"$tmp/t/host/daemon/loop.c"
	printf 'int a(void);\n' >"$tmp/t/host/act/a.h"
	printf 'int b(void);\n' >"$tmp/t/host/act/b.h"
	printf '#include "act/a.h"\nint a(void) { return 0; }\n' >"$tmp/t/host/act/a.c"
	printf '#include "act/b.h"\nint b(void) { return 0; }\n' >"$tmp/t/host/act/b.c"
}
check() { # check NAME: layers.py over the scratch tree, its objects built
	git -C "$tmp/t" add -A
	for c in $(cd "$tmp/t" && git ls-files '*.c'); do
		mkdir -p "$tmp/t/b/obj/$(dirname "$c")"
		gcc -c -I"$tmp/t/host" -o "$tmp/t/b/obj/${c%.c}.o" "$tmp/t/$c" || return 2
	done
	scripts/layers.py --root "$tmp/t" --build b >"$tmp/$1.out" 2>&1
}
expect() { # expect N WHAT NAME PATTERN...: the planted faults fail the check, each named
	local n=$1 what=$2 out=$tmp/$3.out p found=1
	shift 3
	for p in "$@"; do grep -qF -- "$p" "$out" || found=0; done
	if [ "$rc" -eq 1 ] && [ $found -eq 1 ]; then
		echo "ok $n - $what"
	else
		sed 's/^/# /' "$out"
		echo "not ok $n - $what (exit $rc)"
	fi
}

scratch
check clean
rc=$?
if [ $rc -eq 0 ] && grep -q '0 arrows up, 0 circles, 0 bad includes' "$tmp/clean.out"; then
	echo "ok 1 - a scratch tree whose arrows all run down passes"
else
	sed 's/^/# /' "$tmp/clean.out"
	echo "not ok 1 - a scratch tree whose arrows all run down passes (exit $rc)"
fi

scratch # an up arrow by include (decide -> daemon) and one by call alone (base -> daemon)
printf '#include "daemon/loop.h"\n' >>"$tmp/t/host/decide/rule.c"
printf 'int loop(void);\nint base_y(void) { return loop(); }\n' >>"$tmp/t/host/base/x.c"
check up
rc=$?
expect 2 "an include and a call that run up are each named" up \
	'up: decide -> daemon: host/decide/rule.c:3 includes "daemon/loop.h"' \
	'up: base -> daemon: host/base/x.c calls loop'

scratch # a circle between two files of one folder, one arrow an include, one a call
printf '#include "act/b.h"\nint a2(void) { return b(); }\n' >>"$tmp/t/host/act/a.c"
printf 'int a(void);\nint b2(void) { return a(); }\n' >>"$tmp/t/host/act/b.c"
check circle
rc=$?
expect 3 "a circle between two files is named" circle 'circle: host/act/a <-> host/act/b' \
	'host/act/b -> host/act/a: host/act/b.c calls a'

scratch # an include that does not name its folder
printf '#include "rule.h"\n' >>"$tmp/t/host/daemon/loop.c"
cp "$tmp/t/host/decide/rule.h" "$tmp/t/host/daemon/rule.h"
check bare
rc=$?
expect 4 "an include without its folder is named" bare 'should name its folder'

# The tree itself, with the calls read from $BUILD's objects.
scripts/layers.py --build "$BUILD" >"$tmp/tree.out" 2>&1
rc=$?
sed 's/^/# /' "$tmp/tree.out"
if [ $rc -eq 0 ] && ! grep -q 'calls not checked' "$tmp/tree.out"; then
	echo "ok 5 - host/ and guest-agent/: $(tail -1 "$tmp/tree.out" | sed 's/^layers: //')"
else
	echo "not ok 5 - host/ and guest-agent/ layering (exit $rc)"
fi
