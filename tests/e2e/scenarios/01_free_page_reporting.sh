#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# 01_free_page_reporting.sh: scenario 1, no memtide part involved.
# The guest touches 400 MiB and frees it; free page reporting (virtio-balloon,
# free-page-reporting=on, 2 MiB blocks) must hand at least 80% of it back to the host within
# 10 s of the free.  Measured on the guest-RAM mapping's Rss, polled every 200 ms.
. "$(dirname "$0")/../lib.sh"
e2e_init 01_free_page_reporting
echo "1..3"
if ! e2e_build; then
	e2e_not_ok "guest image: cannot build it (see above; the kernel comes from apt-get download)"
	exit 1
fi
e2e_boot 1024 "memload touchfree 400 3" "memtide.agent=0"
if ! e2e_wait '^WL-TOUCHED' 60 >/dev/null; then
	e2e_not_ok "guest touched 400 MiB"
	tail -20 "$E2E_CONSOLE"
	exit 1
fi
touched=$(e2e_guest_rss_mib)
e2e_fig rss_touched_mib "$touched"
e2e_ok "guest touched 400 MiB (guest RAM Rss $touched MiB)"
e2e_wait '^WL-FREED' 30 >/dev/null
t0=$(e2e_now_ms)
want=$((400 * 80 / 100))
rss=$touched
while [ $(($(e2e_now_ms) - t0)) -lt 10000 ]; do
	rss=$(e2e_guest_rss_mib)
	[ $((touched - rss)) -ge $want ] && break
	sleep 0.2
done
dt=$(($(e2e_now_ms) - t0))
e2e_fig returned_mib $((touched - rss))
e2e_fig return_ms "$dt"
# Keep watching to the end of the 10 s window: the full figure, not only the threshold.
while [ $(($(e2e_now_ms) - t0)) -lt 10000 ]; do sleep 0.5; done
final=$(e2e_guest_rss_mib)
e2e_fig returned_10s_mib $((touched - final))
e2e_fig rss_after_mib "$final"
[ $((touched - rss)) -ge $want ]
e2e_check $? "host got >= $want MiB back within 10 s (got $((touched - rss)) MiB in $dt ms)"
e2e_wait '^E2E-EXIT 0' 60 >/dev/null
e2e_check $? "workload exited cleanly"
