/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * parse.h - values as an operator writes them in memtided.conf, a flag, a domain's policy
 * or a memtidectl command (parse.c).  Each returns 0, or -EINVAL and leaves *out as it was.
 */
#ifndef MEMTIDE_HOST_PARSE_H
#define MEMTIDE_HOST_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* "128M", "1GiB", "4096" into bytes (K, M, G, T: powers of 1024, with or without "iB"). */
int mtd_parse_bytes(const char *s, uint64_t *out);
/* "5s", "500ms", "2min", "1h", "30" (seconds) into ms; at most a year. */
int mtd_parse_ms(const char *s, uint64_t *out);
/* yes/no, true/false, on/off, 1/0 (case aside). */
int mtd_parse_bool(const char *s, bool *out);
/* A decimal count in [0, max], no sign. */
int mtd_parse_uint(const char *s, unsigned max, unsigned *out);
/* A finite number in [lo, hi]. */
int mtd_parse_double(const char *s, double lo, double hi, double *out);

#endif /* MEMTIDE_HOST_PARSE_H */
