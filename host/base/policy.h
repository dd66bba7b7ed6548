/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy.h - per-domain policy: the keys a domain's libvirt metadata (or `memtidectl policy
 * set`, or the daemon's [defaults]) sets, each validated on its own.
 *
 * Untrusted text (XML any libvirt user can set, a file an operator edited at 3 a.m.): every
 * value goes through one validator per key, which either accepts it or says in one sentence
 * what is wrong; nothing is half-applied (a failed parse leaves the output untouched).
 *
 * Per-domain policy lives in the domain XML, so it travels with the domain (migration,
 * virsh dumpxml / define):
 *
 *   <metadata>
 *     <memtide:policy xmlns:memtide="https://memtide.org/xmlns/policy/1"
 *        enabled="yes" min="256M" max="0" priority="100"
 *        target_refault_per_min="0.002" headroom="128M" return="balloon"
 *        source="auto" ept_window="200ms"/>
 *   </metadata>
 *
 * Attributes left out take the daemon's [defaults].  Sizes take K, M, G, T (powers of 1024,
 * with or without "iB") or plain bytes; durations take ms, s, m or plain seconds (parse.h).
 * struct mtd_policy itself is in mtd.h, which front ends read.
 */
#ifndef MEMTIDE_HOST_POLICY_H
#define MEMTIDE_HOST_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/mtd.h"

#define MTD_POLICY_XMLNS        "https://memtide.org/xmlns/policy/1"
#define MTD_POLICY_XMLNS_PREFIX "memtide"

void mtd_policy_default(struct mtd_policy *p);

/* The policy keys, in a fixed order (an index names a key in runtime overrides). */
#define MTD_POLICY_NKEYS     11
#define MTD_POLICY_VALUE_MAX 40 /* longest value text kept for a key (with its NUL) */
extern const char *const mtd_policy_keys[MTD_POLICY_NKEYS];
/* The index of key in mtd_policy_keys, or -1. */
int mtd_policy_key_index(const char *key);
/* The value of key (an index) in p as text mtd_policy_set_kv reads back to the same value
 * (sizes in bytes).  0, -EINVAL or -ENOSPC. */
int mtd_policy_value_text(const struct mtd_policy *p, int key, char *buf, size_t len);
/* Set one policy key (enabled, min, max, priority, target_refault_per_min, headroom, return,
 * source, ept_window, observe, cold_age) from text.  0 or -EINVAL with a sentence in err; p
 * is unchanged on error.  _one checks the key's value only, not the policy it makes with the
 * other keys (mtd_policy_validate): for several keys set at once, which may pass through
 * min > max on the way. */
int mtd_policy_set_kv(struct mtd_policy *p, const char *key, const char *value, char *err,
		      size_t errlen);
int mtd_policy_set_kv_one(struct mtd_policy *p, const char *key, const char *value, char *err,
			  size_t errlen);
/* min <= max (when max is set), and the like.  0 or -EINVAL. */
int mtd_policy_validate(const struct mtd_policy *p, char *err, size_t errlen);

/* Parse the metadata element (as virDomainGetMetadata returns it) over *p.  An empty or
 * NULL xml leaves p as it is.  0 or -EINVAL; p unchanged on error. */
int mtd_policy_from_xml(struct mtd_policy *p, const char *xml, char *err, size_t errlen);
/* The element to store with virDomainSetMetadata (no namespace: libvirt adds it). */
int mtd_policy_to_xml(const struct mtd_policy *p, char *buf, size_t len);

#endif /* MEMTIDE_HOST_POLICY_H */
