#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# manpages.sh: the man pages (docs/man/) cannot drift from the programs.  Each page is
# compared with what its program says of itself, in both directions (a flag the program has
# and the page lacks fails, and so does one the page documents and the program lost):
#   memtided(8)        every --option of `memtided --help`
#   memtided.conf(5)   every [section] and key `memtided --help` lists, and those of the
#                      commented example contrib/memtided.conf
#   memtidectl(1)      every command and --option of `memtidectl --help`
#   memtide-agent(8)   every option of `memtide-agent --help`, and every setting with its
#                      default as `memtide-agent --dump-config` prints it
#   memtide-sim(1), memtide-trace(1)   their commands, policies, trace kinds and options
# and the bash completion offers exactly memtidectl's commands and policy keys, and
# completes them (run with bash-completion's own _init_completion): domain names from a real
# memtided's status (on libvirt's test driver), every option of each command's synopsis,
# the values memtided accepts for return= and source=, and --timeout.
# Every page also renders with groff's warnings on and none printed, and each memtidectl
# command's synopsis, as `memtidectl --help` gives it, renders as one tag line (a .TP tag is
# one input line: a synopsis spread over several font macros renders as a tag and a body).
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
MAN=docs/man
echo "1..13"
n=0 failed=0
check() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }

# same NAME A B: two word lists are equal as sets; says what differs.
same() {
	local d
	d=$(diff <(tr ' ' '\n' <<<"$2" | grep . | sort -u) <(tr ' ' '\n' <<<"$3" | grep . | sort -u))
	[ -z "$d" ] && return 0
	echo "$d" | sed -n "s|^< |# $1: only in the program: |p; s|^> |# $1: only in the page: |p"
	return 1
}
# Long options in a text ("--foo-bar"), and in a man page's source ("\-\-foo\-bar").
opts() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
man_opts() { awk '/^\.TP/ { print; getline; print; next } /^\.(B|BI|BR|RB)( |$)/' "$1" | sed 's/\\-/-/g' | opts; }
# Bold terms of .TP entries: ".TP" then ".B word" (the word only).
tp_terms() { awk '/^\.TP/ {getline; if ($1 == ".B" || $1 == ".BI" || $1 == ".BR") print $2}' "$1" | sed 's/\\-/-/g'; }

# 1: groff has nothing to say about any page.
out=""
for p in "$MAN"/*.[158]; do
	w=$(LC_ALL=C.UTF-8 groff -man -ww -z -b "$p" 2>&1)
	[ -n "$w" ] && out="$out $p: $w"
done
[ -z "$out" ] || echo "# $out"
check "$([ -z "$out" ] && echo 0 || echo 1)" "every page renders without a groff warning ($(ls "$MAN"/*.[158] | wc -l) pages)"

# 2: memtided(8) options.
help=$("$BIN/memtided" --help)
same memtided "$(echo "$help" | opts)" "$(man_opts "$MAN/memtided.8")"
check $? "memtided(8) documents exactly the options of memtided --help"

# 3: memtided.conf(5): sections and keys, three ways.
prog_keys=$(echo "$help" | awk '/sections and keys:/ {on = 1; next} on' |
	sed -E 's/\((per-domain|balloon)[^)]*\)//g; s/\(balloon or reclaim\)//' |
	awk '/^  \[/ {sec = $1; $1 = ""} {for (i = 1; i <= NF; i++) if ($i ~ /^[a-z_0-9]+$/) print sec "." $i}' |
	grep -vE '\.(or|unless|the|domain|metadata|says|balloon|reclaim)$' | sort -u)
page_keys=$(awk '/^\.SH \[/ {sec = $2} /^\.TP/ {getline; if (sec != "" && $1 == ".B") print sec "." $2}' "$MAN/memtided.conf.5" | sort -u)
example_keys=$(awk '/^\[/ {sec = $1} /^#?[a-z_0-9]+ =( |$)/ {k = $1; sub(/^#/, "", k); print sec "." k}' contrib/memtided.conf | sort -u)
same "memtided --help vs memtided.conf(5)" "$prog_keys" "$page_keys" &&
	same "contrib/memtided.conf vs memtided.conf(5)" "$example_keys" "$page_keys" &&
	[ "$(echo "$page_keys" | wc -l)" -ge 25 ]
check $? "memtided.conf(5), memtided --help and contrib/memtided.conf list the same $(echo "$page_keys" | wc -l) keys in the same sections"

# 4: memtidectl(1): commands and options.
chelp=$("$BIN/memtidectl" --help)
prog_cmds=$(echo "$chelp" | awk '/^Commands:/ {on = 1; next} /^Options:/ {on = 0} on && /^  [a-z]/ {print $1; if ($3 == "|") print $4}')
page_cmds=$(awk '/^\.SH COMMANDS/ {on = 1; next} /^\.SH/ {on = 0} on && /^\.TP/ {getline; print}' "$MAN/memtidectl.1" |
	sed -E 's/\\f[BIRP]//g; s/^\.[A-Z]+ "?//; s/\\-/-/g; s/[ "].*//')
same "memtidectl commands" "$prog_cmds" "$page_cmds" &&
	same "memtidectl options" "$(echo "$chelp" | opts)" "$(man_opts "$MAN/memtidectl.1")"
check $? "memtidectl(1) documents exactly the commands and options of memtidectl --help"

# 5: memtide-agent(8): options, and settings with their defaults.
ahelp=$("$BIN/memtide-agent" --help 2>&1 | sed '/^Settings and defaults/q')
dump=$("$BIN/memtide-agent" --dump-config | sed -E 's/\t.*//; s/=$/=""/')
page_settings=$(awk '/^\.SH SETTINGS/ {on = 1; next} /^\.SH/ {on = 0} on && /^\.TP/ {getline; print $2 "=" $4}' "$MAN/memtide-agent.8" |
	sed 's/\\(dq\\(dq/""/')
same "memtide-agent options" "$(echo "$ahelp" | opts | grep -vE -- '--(KEY|transport|unix-path|port|report-interval-ms|vsock-port)$')" \
	"$(man_opts "$MAN/memtide-agent.8" | grep -vE -- '--(KEY|transport|report-interval-ms)')" &&
	same "memtide-agent settings=defaults" "$dump" "$page_settings"
check $? "memtide-agent(8) documents its options and all $(echo "$dump" | wc -l) settings with their defaults"

# 6: the lab tools.
shelp=$("$BIN/memtide-sim" --help 2>&1)
sim_prog="$(echo "$shelp" | grep -oE '^(usage:)? +memtide-sim [a-z]+' | awk '{print $NF}') $(echo "$shelp" | sed -n 's/^policies: //p') $(echo "$shelp" | sed -n 's/.*KIND: \(.*\)\./\1/p')"
sim_page="$(tp_terms "$MAN/memtide-sim.1" | grep -E '^[a-z]') $(sed -n '/^\.SH POLICIES/,/^\.SH/p; /^\.SH TRACE KINDS/,/^\.SH/p' "$MAN/memtide-sim.1" | grep '^\.BR' | sed 's/\\-/-/g; s/^\.BR //; s/"[^"]*"//g; s/ \.$//')"
thelp=$("$BIN/memtide-trace" --help 2>&1)
same "memtide-sim" "$sim_prog" "$sim_page" &&
	same "memtide-trace" "$(echo "$thelp" | opts) $(echo "$thelp" | grep -oE '^(usage:)? +memtide-trace [a-z]+' | awk '{print $NF}')" \
		"$(man_opts "$MAN/memtide-trace.1") $(tp_terms "$MAN/memtide-trace.1" | grep -E '^[a-z]')"
check $? "memtide-sim(1) and memtide-trace(1) document their commands, policies, trace kinds and options"

# 7-9: bash completion.
COMP=contrib/bash-completion/memtidectl
comp_cmds=$(sed -n 's/^\tlocal commands="\(.*\)"/\1/p' "$COMP")
comp_keys=$(sed -n 's/^\tlocal policy_keys="\(.*\)"/\1/p' "$COMP" | tr -d '=')
prog_keys=$(echo "$chelp" | awk '/keys:/ {on = 1} /^  attach/ {on = 0} on' | sed 's/.*keys: //' | tr -d ',' | xargs)
same "completion commands" "$prog_cmds" "$comp_cmds" &&
	same "completion policy keys" "$prog_keys" "$comp_keys"
check $? "the completion offers memtidectl's commands and policy keys, no more, no fewer"

if [ -f /usr/share/bash-completion/bash_completion ]; then
	# complete WORDS...: what bash would offer for the last word.
	complete_words() {
		bash -c '
			. /usr/share/bash-completion/bash_completion
			. '"$COMP"'
			memtidectl() { printf "host: 1.0G available of 2.0G\nDOMAIN  STATE\nvm-a    active\n  ! a note\nvm-b    attaching\n"; }
			COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
			_memtidectl memtidectl "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
			printf "%s\n" "${COMPREPLY[@]}"' _ "$@" 2>&1 | sort | xargs
	}
	a=$(complete_words memtidectl po) b=$(complete_words memtidectl policy set vm-a ret) \
		d=$(complete_words memtidectl vm show vm-)
	[ "$a" = policy ] && [ "$b" = return= ] && [ "$d" = "vm-a vm-b" ]
	check $? "completion: 'po' -> '$a', 'policy set vm-a ret' -> '$b', 'vm show vm-' -> '$d'"
else
	n=$((n + 1))
	echo "ok $n # SKIP no bash-completion (scripts/deps.sh installs it)"
fi

bash -n "$COMP"
check $? "the completion script parses"

# 10: each command's synopsis renders as one line (the tag of its .TP), wide enough that
# groff does not wrap it.
# A synopsis ends at two spaces, or at the description's column (32) when one space is all
# that parts them; a line of its own continues it when it opens a bracket.
syn=$(echo "$chelp" | awk '/^Commands:/ {on = 1; next} /^Options:/ {on = 0} on' | python3 -c '
import re, sys
lines = sys.stdin.read().split("\n")
for i, l in enumerate(lines):
    if not re.match(r"  [a-z]", l):
        continue
    body = l[2:]
    if "  " in body:
        s = body.split("  ")[0]
    elif len(l) > 32 and l[31] == " " and re.match(r"[a-z]+ ", l[32:]):
        s = l[2:31]
    else:
        s = body
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if re.match(r" {3,}\[", nxt):
        s += " " + nxt.strip().split("  ")[0]
    if " | " not in s:
        print(s.strip())')
rendered=$(MANWIDTH=250 man -l "$MAN/memtidectl.1" 2>/dev/null | col -b | sed 's/^ *//; s/ *$//')
bad=
while IFS= read -r l; do
	# The tag alone on its line, or a short tag with the body after it on the same line.
	awk -v s="$l" 'index($0, s) == 1 && (length($0) == length(s) || substr($0, length(s) + 1, 1) == " ") { f = 1 } END { exit !f }' <<<"$rendered" || bad="$bad|$l"
done <<<"$syn"
[ -z "$bad" ] && [ "$(echo "$syn" | wc -l)" -ge 12 ]
check $? "memtidectl(1): each of the $(echo "$syn" | wc -l) command synopses of --help renders as one tag line${bad:+ (not: ${bad#|})}"

if [ -f /usr/share/bash-completion/bash_completion ]; then
	# 11: domain names come from a real memtided's status (libvirt's test driver has one
	# domain, "test"): its rows, not its header or host lines.
	d=$(mktemp -d /tmp/memtide-it-man.XXXXXX)
	printf '[daemon]\nvsock_dir = none\n' >"$d/memtided.conf"
	"$BIN/memtided" --uri test:///default --foreground --socket "$d/ctl.sock" --no-metrics \
		--config "$d/memtided.conf" --state-dir "$d/state" >"$d/memtided.log" 2>&1 &
	mpid=$!
	for _ in $(seq 100); do "$BIN/memtidectl" --socket "$d/ctl.sock" status >/dev/null 2>&1 && break; sleep 0.1; done
	real_complete() {
		PATH=$BIN:$PATH bash -c '
			. /usr/share/bash-completion/bash_completion
			. '"$COMP"'
			virsh() { :; }
			COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
			COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
			_memtidectl memtidectl "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
			printf "%s\n" "${COMPREPLY[@]}"' _ "$@" 2>&1 | sort | xargs
	}
	a=$(real_complete memtidectl --socket "$d/ctl.sock" vm show '')
	b=$(real_complete memtidectl --socket "$d/ctl.sock" policy set test return=)
	c=$(real_complete memtidectl --socket "$d/ctl.sock" policy set test source=)
	want_ret=$("$BIN/memtidectl" --socket "$d/ctl.sock" policy set test return=bogus 2>&1 |
		sed -n 's/.*must be \(.*\), not .*/\1/p' | sed 's/,\| or / /g' | xargs -n1 | sort | xargs)
	want_src=$("$BIN/memtidectl" --socket "$d/ctl.sock" policy set test source=bogus 2>&1 |
		sed -n 's/.*must be \(.*\), not .*/\1/p' | sed 's/,\| or / /g' | xargs -n1 | sort | xargs)
	kill "$mpid"
	wait "$mpid"
	rm -rf "$d"
	[ "$a" = test ]
	check $? "completion: 'vm show ' offers the domains of memtidectl status ('$a'), not its header"

	# 12: every option of each command's synopsis is offered after the command and its
	# arguments.
	bad=
	while IFS= read -r l; do
		read -r -a w <<<"$(echo "$l" | awk '{ for (i = 1; i <= NF && $i !~ /^(\[|--)/; i++) printf "%s ", ($i ~ /^[A-Z]/ ? "vm-a" : $i) }')"
		want=$(echo "$l" | sed -E 's/[A-Z]+\|--[a-z-]+//g' | grep -oE -- '--[a-z][a-z-]*' | sort -u | xargs)
		[ -n "$want" ] || continue
		got=$(complete_words memtidectl "${w[@]}" --)
		for o in $want; do
			grep -qw -- "$o" <<<"$got" || bad="$bad ${w[0]}:$o"
		done
	done <<<"$syn"
	[ -z "$bad" ]
	check $? "completion: every option of every command's synopsis is offered${bad:+ (missing:$bad)}"

	# 13: the values memtided accepts (its own error message lists them), and --timeout.
	t1=$(complete_words memtidectl --ti) t2=$(complete_words memtidectl --timeout 5s sta)
	[ -n "$want_ret" ] && [ "$b" = "$want_ret" ] && [ -n "$want_src" ] && [ "$c" = "$want_src" ] &&
		[ "$t1" = --timeout ] && [ "$t2" = status ]
	check $? "completion: return= '$b' and source= '$c' (memtided accepts '$want_ret' and '$want_src'); '--ti' -> '$t1', '--timeout 5s sta' -> '$t2'"
else
	for i in 11 12 13; do echo "ok $i # SKIP no bash-completion (scripts/deps.sh installs it)"; done
	n=13
fi
exit $failed
