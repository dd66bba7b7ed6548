#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# lint_valist.sh - every va_start (and va_copy) in the tree's C files is matched by a va_end in
# the same function.  clang-tidy's valist.Unterminated does this for `make lint`, but it is off
# (.clang-tidy says why: it once took a json-c call for a va_start).  A count per function,
# read through the preprocessor's comment stripping: a function with more va_start and
# va_copy than va_end fails, named.  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
echo "1..1"
bad=$(for f in $(git ls-files '*.c'); do
	gcc -fpreprocessed -dD -E -P "$f" 2>/dev/null | awk -v f="$f" '
		{
			line = $0
			if (depth == 0 && line ~ /\(/) name = line
			opens = gsub(/\{/, "{", line); closes = gsub(/\}/, "}", line)
			s += gsub(/(^|[^A-Za-z0-9_])va_(start|copy)[ \t]*\(/, "&", line)
			e += gsub(/(^|[^A-Za-z0-9_])va_end[ \t]*\(/, "&", line)
			depth += opens - closes
			if (depth == 0 && (s || e)) {
				if (s > e) { sub(/\(.*/, "", name); printf "%s: %s (%d va_start/va_copy, %d va_end)\n", f, name, s, e }
				s = 0; e = 0
			}
		}'
done)
n=$(for f in $(git ls-files '*.c'); do gcc -fpreprocessed -dD -E -P "$f" 2>/dev/null; done | grep -cE '\bva_start[[:space:]]*\(')
if [ -z "$bad" ] && [ "$n" -gt 0 ]; then
	echo "ok 1 - every one of the $n va_start calls is closed by a va_end in its function"
else
	echo "$bad" | sed 's/^/# /'
	echo "not ok 1 - va_start or va_copy without a va_end in the same function"
fi
