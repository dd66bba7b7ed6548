#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# one_decision_path.sh - memtided and memtide-sim's memtide decide through one call.
#
# The policy lab's figures say something about the daemon only while both run the same
# decision: vmm_decide (vmm/decide.c) feeds the reclaim controller and gates eviction, and
# both fit the controller's limits with vmm_reclaim_config_fit.  This fails the moment either
# side feeds the controller itself, or evicts by the controller's hold flag instead of the
# decision's gate: a second path the lab would not measure.  The decision itself is tested
# in tests/unit/test_decide.c; the two callers in test_pageout_hand.c and test_sim_policy.c.
# The balloon and the agent's reclaim too: memtided's balloon policy (host/decide/controller.c
# mtd_ctl_step) and its corrections of the estimate (host/decide/steady.c) are called by the
# decide stage of memtided's tick (host/decide/tick_decide.c) and by the lab's actuators
# (sim/actuators.c) alike, with the controller's hold for
# every taker read from the decision (holds_all_takers), and no other file in sim/ sets a
# balloon target of its own.
# A source check, not a run: the daemon's side needs a QEMU guest (scenarios 12 and 18 run
# it).  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# Calls in code, not in comments: the preprocessor drops the comments (and expands nothing).
code() { for f in "$@"; do gcc -fpreprocessed -dD -E -P "$f"; done; }

callers=$(for f in host/*.c host/*/*.c sim/*.c guest-agent/*.c; do
	code "$f" | grep -qE '\bvmm_reclaim_(update|observe_reuse|skip_reuse)[[:space:]]*\(' && printf "%s " "$f"
done)
if [ -z "$callers" ]; then
	ok "only vmm_decide feeds the reclaim controller (no caller in host/, sim/, guest-agent/)"
else
	nok "the reclaim controller is fed outside vmm_decide: $callers"
fi

# expect_call FILE FUNCTION WHAT: FILE calls FUNCTION (in code), which means WHAT.
expect_call() {
	if code "$1" | grep -qE "\\b$2[[:space:]]*\\("; then
		ok "$1 $3"
	else
		nok "$1 does not call $2: it no longer $3"
	fi
}
expect_call host/decide/tick_decide.c vmm_decide "decides through vmm_decide"
expect_call sim/policy_memtide.c vmm_decide "decides through vmm_decide"

holds=$(code host/act/pageout_hand.c sim/policy_memtide.c | grep -nE '(ctl|reclaim)(\.|->)hold\b')
if [ -z "$holds" ]; then
	ok "host pageout and the lab evict by the decision's gate, not the controller's hold flag"
else
	nok "an evictor reads the controller's hold itself: $holds"
fi

expect_call host/daemon/vm_attach.c vmm_reclaim_config_fit "fits the controller's limits with vmm_reclaim_config_fit"
expect_call sim/params.c vmm_reclaim_config_fit "fits the controller's limits with vmm_reclaim_config_fit"

# The balloon and the agent's reclaim: one policy, one set of corrections, one hold.
for f in mtd_ctl_step mtd_steady_peak mtd_steady_bound mtd_steady_growing mtd_steady_futile; do
	if code host/decide/tick_decide.c | grep -qE "\\b$f[[:space:]]*\\(" && code sim/actuators.c | grep -qE "\\b$f[[:space:]]*\\("; then
		ok "memtided's decide stage and the lab's actuators both call $f"
	else
		nok "$f is no longer called by both host/decide/tick_decide.c and sim/actuators.c: the lab's balloon and reclaim figures would not be memtided's"
	fi
done
others=$(for f in sim/*.c; do
	[ "$f" = sim/actuators.c ] && continue
	code "$f" | grep -qE '\bmtd_ctl_step[[:space:]]*\(|\bstruct mtd_ctl_(input|state)\b' && printf "%s " "$f"
done)
if [ -z "$others" ]; then
	ok "only sim/actuators.c runs memtided's balloon policy in the lab"
else
	nok "the lab runs the balloon policy outside sim/actuators.c: $others"
fi
if code host/decide/tick_decide.c | grep -qE 'decision\.holds_all_takers' && code sim/policy_memtide.c | grep -qE 'dec\.holds_all_takers'; then
	ok "the hold that stops the balloon and the agent comes from the decision, in both"
else
	nok "the balloon's refault hold is no longer read from vmm_decide's answer on both sides"
fi
if code host/act/tick_act.c | grep -qE 'waits[[:space:]]*=[[:space:]]*!out->soft && out->balloon_bytes > out->target_bytes' &&
	code host/act/tick_act.c | grep -qE 'out->reclaim_bytes && e->agent && \(out->changed \|\| t->first \|\| out->soft \|\| waits\)' &&
	code sim/actuators.c | grep -qE 'waits[[:space:]]*=[[:space:]]*!out\.soft && out\.balloon_bytes > out\.target_bytes' &&
	code sim/actuators.c | grep -qE 'out\.reclaim_bytes && agent && \(out\.changed \|\| first \|\| out\.soft \|\| waits\)'; then
	ok "both send the agent's reclaim on the same condition, a waiting balloon step included"
else
	nok "memtided and the lab no longer send the agent's reclaim on the same condition (a balloon step waiting for the guest to free)"
fi
