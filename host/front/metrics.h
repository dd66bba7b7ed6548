/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * metrics.h - memtided's Prometheus endpoint: GET /metrics on ADDRESS:PORT, served by
 * libmicrohttpd's own thread, rendered from the same RCU snapshots the control socket reads.
 *
 * docs/operations.md lists every series with its meaning and unit.  Loopback by default: the
 * figures describe guests, so exposing them further is the operator's decision ([metrics]
 * listen = 0.0.0.0:9848, or a reverse proxy), not a default.
 */
#ifndef MEMTIDE_HOST_METRICS_H
#define MEMTIDE_HOST_METRICS_H

#include <stddef.h>

#include "base/mtd.h"

struct mtd_metrics;

/* Serve on addr:port (addr a numeric IPv4 or IPv6 address; [metrics] listen, loopback by
 * default).  0, or -errno with a sentence in err (e.g. the port is taken). */
int mtd_metrics_start(struct mtd_daemon *d, const char *addr, int port, struct mtd_metrics **out,
		      char *err, size_t errlen);
void mtd_metrics_stop(struct mtd_metrics *m);

/* The exposition text (format 0.0.4) for the host and every VM; the caller frees it.
 * The calling thread must be registered with RCU.  NULL when out of memory. */
char *mtd_metrics_render(struct mtd_daemon *d);

#endif /* MEMTIDE_HOST_METRICS_H */
