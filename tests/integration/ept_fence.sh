#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ept_fence.sh: the ept plugin's marking keeps a full fence between setting a leaf's
# accessed bit and reading its upper entries, on a weakly ordered host too.
#
# The walker clears an upper A and then reads the leaves below; the plugin sets a leaf's A
# and then reads the upper entry (host/access/ept_table.h, mtd_ept_mark_leaf, says why that
# store-buffering pattern needs a full fence on each side).  x86 cannot show the reordering
# (its locked RMW is a full fence), so this test compiles the plugin's marking for arm64 with
# clang and reads the code: a `dmb ish` must sit between the leaf's atomic OR and the first
# load of an upper entry.  No arm64 machine is needed, only clang's arm64 back end.
set -u
cd "$(dirname "$0")/../.."
echo "1..2"
CLANG=$(command -v clang-14 || command -v clang)
if [ -z "$CLANG" ]; then
	echo "ok 1 # SKIP no clang"
	echo "ok 2 # SKIP no clang"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mark.c" <<'C'
#include "access/ept_table.h"
bool mark(uint64_t *leaf, uint64_t want, uint64_t *const up[3], const uint64_t up_want[3]);
bool mark(uint64_t *leaf, uint64_t want, uint64_t *const up[3], const uint64_t up_want[3])
{
	return mtd_ept_mark_leaf(leaf, want, up, up_want);
}
C
fail=0
n=0
for march in armv8-a armv8.1-a; do
	n=$((n + 1))
	if ! "$CLANG" --target=aarch64-linux-gnu -march=$march -ffreestanding -O2 -Ihost -S \
		-o "$tmp/mark-$march.s" "$tmp/mark.c" 2>"$tmp/err"; then
		echo "not ok $n - $march: does not compile: $(head -3 "$tmp/err")"
		fail=1
		continue
	fi
	# the leaf's atomic (ldset with LSE, an ldxr/stxr loop without), then dmb, then loads
	awk '/ldset|stxr/ && !seen_or {seen_or=NR} /dmb[ \t]+ish/ && seen_or && !fence {fence=NR}
	     /ldr[ \t]+x/ && fence && NR > fence {ok=1}
	     END {exit !(seen_or && fence && ok)}' "$tmp/mark-$march.s"
	if [ $? = 0 ]; then
		echo "ok $n - $march: dmb ish between the leaf's OR and the upper entries' loads"
	else
		echo "not ok $n - $march: no full fence after the leaf's OR:"
		sed 's/^/#   /' "$tmp/mark-$march.s" | grep -vE '^\#   \s*\.' | head -40
		fail=1
	fi
done
exit $fail
