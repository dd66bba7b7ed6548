#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# run.sh: memtide's test runner, behind `make check`.
#
# Runs the test suites named on the command line (default: unit, integration, fuzz, e2e):
#   unit         every $BUILD/tests/unit/test_* program (cmocka, TAP output)
#   integration  every tests/integration/*.sh script
#   fuzz         every $BUILD/fuzz/fuzz_* target, FUZZ_SECONDS (default 5) each
#   e2e          every tests/e2e/scenarios/*.sh script (real QEMU guests)
#   soak         (not in the default list) the long versions of the scenarios that have one
#                (E2E_SOAK=1), as `make soak` runs them
#   packaging    every tests/packaging/*.sh script: what needs promtool (Debian's prometheus
#                package, too heavy for every make check), the packages built and checked
#                with lintian (deb.sh, ~100 s) and the package under a real
#                systemd (a guest boot, three dpkg runs and a shutdown, ~6 minutes under
#                TCG); `make check-packaging`, run by CI
#   stand        (not in the default list) the KVM host stand's self-test alone
#                (tests/kvm/selftest.sh: KVM and nested paging in the stand, a KVM guest's
#                speed against TCG's; ~1.5 minutes); `make check-kvm` runs it first
#   kvm          (not in the default list; `make check-kvm`) the self-test, then the e2e
#                scenarios listed in tests/kvm/scenarios.txt, each run in the stand with a KVM
#                guest (tests/kvm/stand.sh run), figures in $BUILD/e2e/kvm_SCENARIO.json
# Each program or script prints TAP lines ("ok N - name", "not ok N - name", "ok N # SKIP why");
# every such line counts as one test.  A program that prints none counts as one test, passed
# if it exits 0.  A program that exits non-zero without a "not ok" line counts one failure more
# (a crash must never pass).  Logs go to $BUILD/test-logs/; a failure prints its log's tail.
# The last line is the summary "N passed, N failed" (skips on the line before).
set -u
BUILD=${BUILD:-build}
LOGS=$BUILD/test-logs
mkdir -p "$LOGS"
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(unit integration fuzz e2e)
export CMOCKA_MESSAGE_OUTPUT=TAP
export BUILD
# Programs under test find their siblings here.
export MEMTIDE_BIN=$PWD/$BUILD/bin

passed=0 failed=0 skipped=0
failures=()

# run_cmd LOG TIMEOUT CMD...: runs it; sets rc, ok, nok and skip from its TAP lines.
run_cmd() {
	local log=$1 limit=$2
	shift 2
	timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
	rc=$?
	# cmocka's TAP prints a skipped test as "not ok N # SKIP": a skip either way.
	ok=$(grep -E '^ok [0-9]+' "$log" | grep -cvE '# *SKIP')
	skip=$(grep -cE '^(not )?ok [0-9]+.*# *SKIP' "$log")
	nok=$(grep -E '^not ok [0-9]+' "$log" | grep -cvE '# *SKIP')
	if [ $((ok + nok + skip)) -eq 0 ]; then
		if [ $rc -eq 0 ]; then ok=1; else nok=1; fi
	elif [ $rc -ne 0 ] && [ "$nok" -eq 0 ]; then
		nok=1
	fi
}

# speed_only LOG: every failure in it is a speed check (tests/e2e/lib.sh e2e_speed_check), and
# the script ended by itself (no time-out; a crash without a "not ok" line counts one failure
# more in nok, which no speed line matches).
speed_only() {
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ "$nok" -gt 0 ] &&
		[ "$(grep -cE '^not ok [0-9]+ - speed: ' "$1")" -eq "$nok" ]
}

# run_one SUITE NAME TIMEOUT CMD...
# An e2e scenario whose only failures are speed checks is measured again, on a fresh boot
# (E2E_ATTEMPT=2, 3), up to E2E_SPEED_TRIES times in all (default 3), and the last measurement
# counts; every one is printed, the earlier logs kept as NAME.1.log, NAME.2.log.  A speed ratio
# of one guest against its own neighbouring phase moves by 10-20% between runs of one build
# under TCG on a shared 2-core machine (docs/e2e.md, "Speed checks"); a slowdown that is real
# misses its goal every time.
run_one() {
	local suite=$1 name=$2 limit=$3
	shift 3
	local log=$LOGS/$suite-$name.log
	local t0=$SECONDS
	run_cmd "$log" "$limit" "$@"
	local attempt=1
	while { [ "$suite" = e2e ] || [ "$suite" = kvm ]; } && [ $attempt -lt "${E2E_SPEED_TRIES:-3}" ] && speed_only "$log"; do
		mv -f "$log" "$LOGS/$suite-$name.$attempt.log"
		echo "SPEED  $suite         $name: a speed check missed its goal on measurement $attempt:"
		grep -E '^not ok [0-9]+ - speed: ' "$LOGS/$suite-$name.$attempt.log" | sed 's/^/         /'
		attempt=$((attempt + 1))
		echo "       measuring it again on a fresh boot ($attempt of ${E2E_SPEED_TRIES:-3}; log $LOGS/$suite-$name.$((attempt - 1)).log kept)"
		E2E_ATTEMPT=$attempt run_cmd "$log" "$limit" "$@"
	done
	# The KVM stand's own kernel panicking (tests/kvm/stand.sh says so) is not the scenario's
	# result: it is run once more on a fresh stand, and says so; a second panic counts.
	if [ "$suite" = kvm ] && grep -q "^not ok - stand: L1's kernel panicked" "$log"; then
		mv -f "$log" "$LOGS/$suite-$name.panic.log"
		echo "STAND  $suite         $name: L1's kernel panicked (the stand's, not the scenario's):"
		grep -a "^not ok - stand: L1's kernel panicked" "$LOGS/$suite-$name.panic.log" | sed 's/^/         /'
		echo "       running it again on a fresh stand (log $LOGS/$suite-$name.panic.log kept)"
		run_cmd "$log" "$limit" "$@"
	fi
	passed=$((passed + ok)) failed=$((failed + nok)) skipped=$((skipped + skip))
	local status=PASS
	[ "$nok" -gt 0 ] && status=FAIL
	[ $rc -eq 124 ] && status="FAIL (timed out after ${limit}s)"
	printf '%-6s %-11s %-40s %3d ok %3d failed %3d skipped  %4ds\n' \
		"${status%% *}" "$suite" "$name" "$ok" "$nok" "$skip" $((SECONDS - t0))
	if [ "$nok" -gt 0 ]; then
		failures+=("$suite/$name")
		echo "------- $log (last 40 lines) -------"
		tail -n 40 "$log"
		echo "-------"
	fi
	grep -E '^# SKIP|# *SKIP' "$log" | sed 's/^/       /' | head -5
}

for suite in "${suites[@]}"; do
	case $suite in
	unit)
		for t in "$BUILD"/tests/unit/test_*; do
			[ -x "$t" ] || continue
			run_one unit "$(basename "$t")" 600 "$t"
		done ;;
	integration)
		for t in tests/integration/*.sh; do
			[ -f "$t" ] || continue
			run_one integration "$(basename "$t" .sh)" 900 bash "$t"
		done ;;
	fuzz)
		# Each target runs FUZZ_SECONDS (default 3: 13 targets, ~4-5 s each with start-up,
		# keep make check's fuzzing near a minute; the long campaigns are docs/fuzzing.md's)
		# from its committed seeds plus the corpus it grew on earlier runs (kept under
		# $BUILD/fuzz-corpus, out of git), with its dictionary when there is one.  A
		# crash, leak, sanitizer report or a single input slower than 10 s fails it; the
		# input is saved as $BUILD/fuzz-corpus/NAME/crash-* (or leak-*, timeout-*).
		secs=${FUZZ_SECONDS:-3}
		for t in "$BUILD"/fuzz/fuzz_*; do
			[ -x "$t" ] || continue
			n=$(basename "$t")
			corpus=tests/fuzz/corpus/${n#fuzz_}
			dict=tests/fuzz/${n#fuzz_}.dict
			work=$BUILD/fuzz-corpus/$n
			mkdir -p "$work"
			args=("-max_total_time=$secs" -timeout=10 -rss_limit_mb=2048
				-print_final_stats=1 "-artifact_prefix=$work/")
			[ -f "$dict" ] && args+=("-dict=$dict")
			run_one fuzz "$n" $((secs + 120)) "$t" "${args[@]}" "$work" \
				$([ -d "$corpus" ] && echo "$corpus")
			grep -aE '^#[0-9]+[[:space:]]+DONE' "$LOGS/fuzz-$n.log" | tail -1 |
				sed 's/^/       /'
		done ;;
	e2e)
		for t in tests/e2e/scenarios/*.sh; do
			[ -f "$t" ] || continue
			run_one e2e "$(basename "$t" .sh)" 900 bash "$t"
		done ;;
	soak)
		# Long runs (10 minutes or more), not part of `make check`: each scenario that
		# has a long version runs it with E2E_SOAK=1 and writes the same JSON file.
		for t in tests/e2e/scenarios/*.sh; do
			[ -f "$t" ] && grep -q 'E2E_SOAK' "$t" || continue
			run_one soak "$(basename "$t" .sh)" 3600 env E2E_SOAK=1 bash "$t"
		done ;;
	stand)
		run_one stand selftest 600 bash tests/kvm/selftest.sh ;;
	kvm)
		run_one kvm selftest 600 bash tests/kvm/selftest.sh
		# A line's first word: an e2e scenario's name, or a script's path in this tree.
		for s in $(awk '$1 !~ /^#/ { print $1 }' tests/kvm/scenarios.txt); do
			script=tests/e2e/scenarios/$s.sh
			[[ $s == */* ]] && script=$s
			run_one kvm "$(basename "$s" .sh)" 1500 tests/kvm/stand.sh run "$script"
		done ;;
	packaging)
		for t in tests/packaging/*.sh; do
			[ -f "$t" ] || continue
			run_one packaging "$(basename "$t" .sh)" 900 bash "$t"
		done ;;
	*) echo "run.sh: unknown suite '$suite' (unit, integration, fuzz, e2e, stand, kvm, packaging, soak)" >&2; exit 2 ;;
	esac
done

if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]}"
fi
# Skips are reported on their own line so that the last line keeps the plain
# "N passed, N failed" form that tools parse.
echo "$skipped skipped (counted in neither figure below)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
