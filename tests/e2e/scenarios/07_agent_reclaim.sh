#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 07_agent_reclaim.sh: memtide-agent's reclaim, inside a real guest, reported honestly.
#
# The guest (1 GiB, zram swap of 400 MiB inside it) holds 300 MiB of cold anonymous data.  A
# scripted host (tests/e2e/reclaim_host.py, standing in for memtided so that the request and
# the reply are exactly what this test chooses) talks to the real agent over the virtio-serial
# port (E2E_TRANSPORT=vsock: over vsock, through the harness's vsock_bridge) and asks it to:
#   1. reclaim 100 MiB of page cache only, when the guest has next to none and may not drop
#      caches: the agent must not claim success;
#   2. reclaim 200 MiB, anon allowed: the agent must free it (cgroup v2
#      memory.reclaim pushes cold anon into zram) and its freed_bytes must agree with the
#      MemFree the guest then reports in its stats;
# and free page reporting must then hand what was freed back to the host (guest-RAM Rss).
# The anon request asks for compaction afterwards, as memtided does (RECLAIM_HOST_ARGS=nocompact
# leaves it out; measured:
# 210 MiB back with it, 208 without; docs/protocol.md).
# The cold pages are same-filled, so zram stores them at no cost: this measures the agent,
# not zram's compression ratio (scenario 2 reports that).
# On the KVM host stand (E2E_ACCEL=kvm) check 3 holds only when the machine is quiet, and the
# scenario is not in make check-kvm: the nested guest's reclaim freed 59-201 MiB of the 200 in
# the 60 s (3 of 6 runs reached 150; docs/e2e.md, "The scenarios on KVM").
. "$(dirname "$0")/../lib.sh"
e2e_init 07_agent_reclaim
echo "1..6"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above; the kernel comes from apt-get download)"
	exit 1
fi
e2e_boot 1024 "memload hotcold 16 300 0 90" "memtide.zram_mib=400 transparent_hugepage=never"
if ! e2e_wait '^WL-FILLED' 120 >/dev/null; then
	e2e_not_ok "guest filled 300 MiB of cold data"
	tail -20 "$E2E_CONSOLE"
	exit 1
fi
e2e_ok "guest filled 300 MiB of cold data and runs its 16 MiB hot set"
rss_filled=$(e2e_guest_rss_mib)
e2e_fig rss_filled_mib "$rss_filled"

# The scripted host writes one JSON object of results; it gives up after 120 s.
timeout 150 python3 tests/e2e/reclaim_host.py "$E2E_AGENT_SOCK" ${RECLAIM_HOST_ARGS:-} >"$E2E_DIR/host.json" \
	2>"$E2E_DIR/host.err" &
E2E_PIDS+=($!)
host_pid=$!
# The host prints "RECLAIMED" on stderr when the anon reclaim's reply is in: that is when the
# free page reporting clock starts.
# The host may also finish first: it exits right after the next stats report.
t0=
while :; do
	if grep -q '^RECLAIMED' "$E2E_DIR/host.err"; then
		t0=$(e2e_now_ms)
		break
	fi
	kill -0 "$host_pid" 2>/dev/null || break
	sleep 0.2
done
rss_min=$rss_filled
if [ -n "$t0" ]; then
	# Until the guest's workload ends: a slow guest (KVM in the stand) answers the request
	# late, and QEMU may exit within the window.
	while [ $(($(e2e_now_ms) - t0)) -lt ${RSS_WINDOW_MS:-30000} ] && kill -0 "$E2E_QEMU_PID" 2>/dev/null; do
		r=$(e2e_guest_rss_mib)
		[ -n "${RSS_TRACE:-}" ] && echo "# rss $(($(e2e_now_ms) - t0)) ms: $r MiB"
		if [ -n "$r" ] && [ "$r" -lt "$rss_min" ]; then
			rss_min=$r
			e2e_fig return_ms $(($(e2e_now_ms) - t0))
		fi
		sleep 0.5
	done
fi
wait "$host_pid"
host_rc=$?
if [ $host_rc -ne 0 ] || ! python3 -c 'import json,sys; json.load(open(sys.argv[1]))' \
	"$E2E_DIR/host.json" 2>/dev/null; then
	e2e_not_ok "scripted host finished (rc $host_rc)"
	cat "$E2E_DIR/host.err"
	tail -20 "$E2E_CONSOLE"
	exit 1
fi
fig() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
	"$E2E_DIR/host.json" "$1"; }
e2e_fig agent_caps "$(fig caps)"
e2e_fig file_result "$(fig file_result)"
e2e_fig file_freed_mib "$(fig file_freed_mib)"
e2e_fig anon_result "$(fig anon_result)"
e2e_fig anon_methods "$(fig anon_methods)"
e2e_fig anon_freed_mib "$(fig anon_freed_mib)"
e2e_fig anon_elapsed_ms "$(fig anon_elapsed_ms)"
# Why a partial reply ended (the deadline, the kernel, the guest's growth), and each method's
# time: on a KVM guest in the stand the same request took 33-61 s, and once ended at 38 s.
e2e_fig anon_message "$(fig anon_message)"
e2e_fig anon_step_ms "$(fig anon_step_ms)"
e2e_fig memfree_gain_mib "$(fig memfree_gain_mib)"
e2e_fig pswpout_pages "$(fig pswpout_pages)"

file_result=$(fig file_result)
[ "$file_result" != done ]
e2e_check $? "page-cache-only reclaim with no droppable cache is not reported done ($file_result, $(fig file_freed_mib) MiB)"

anon_freed=$(fig anon_freed_mib)
[ "$anon_freed" -ge 150 ] && [ "$(fig pswpout_pages)" -gt 0 ]
e2e_check $? "anon reclaim of 200 MiB freed $anon_freed MiB via $(fig anon_methods) in $(fig anon_elapsed_ms) ms"

gain=$(fig memfree_gain_mib)
diff=$((anon_freed > gain ? anon_freed - gain : gain - anon_freed))
[ "$diff" -le $((anon_freed / 10 + 16)) ]
e2e_check $? "reported freed ($anon_freed MiB) agrees with the guest's MemFree gain ($gain MiB)"

returned=$((rss_filled - rss_min))
e2e_fig rss_after_mib "$rss_min"
e2e_fig returned_to_host_mib "$returned"
[ "$returned" -ge $((anon_freed / 2)) ]
e2e_check $? "free page reporting returned $returned MiB of the $anon_freed MiB freed to the host within 30 s of the reply"

e2e_wait '^E2E-EXIT 0' 120 >/dev/null
e2e_check $? "workload verified its cold data after reclaim and exited cleanly"
