// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * parse.c - values as an operator writes them (parse.h): sizes, durations, yes/no, counts
 * and rates, each read whole or refused, never clamped.  The per-domain policy (policy.c),
 * the daemon's settings (daemon/config.c), host-side eviction's keys (pageout_hand.c) and
 * memtidectl read their values here.
 */
#include "base/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int mtd_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mult = 1;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K':
			mult = 1ULL << 10;
			break;
		case 'm':
		case 'M':
			mult = 1ULL << 20;
			break;
		case 'g':
		case 'G':
			mult = 1ULL << 30;
			break;
		case 't':
		case 'T':
			mult = 1ULL << 40;
			break;
		case 'b':
		case 'B':
			mult = 1;
			break;
		default:
			return -EINVAL;
		}
		end++;
		if (mult > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mult)
		return -EINVAL;
	*out = (uint64_t)v * mult;
	return 0;
}

int mtd_parse_ms(const char *s, uint64_t *out)
{
	char *end;
	double v;
	double mult = 1000.0;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	if (strcmp(end, "ms") == 0)
		mult = 1.0;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mult = 60000.0;
	else if (strcmp(end, "h") == 0)
		mult = 3600000.0;
	else if (*end && strcmp(end, "s") != 0)
		return -EINVAL;
	if (v * mult > 86400.0 * 1000.0 * 365)
		return -EINVAL;
	*out = (uint64_t)llround(v * mult);
	return 0;
}

int mtd_parse_bool(const char *s, bool *out)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcmp(s, "1") ||
	    !strcasecmp(s, "on")) {
		*out = true;
		return 0;
	}
	if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcmp(s, "0") ||
	    !strcasecmp(s, "off")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

int mtd_parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

int mtd_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || end == s || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}
