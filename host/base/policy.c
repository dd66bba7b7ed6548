// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy.c - per-domain policy (policy.h): its keys, each with one parser that validates
 * before it writes, the defaults, and the metadata XML it travels in (libxml2).  Both the
 * key setter and the metadata parser work on a copy and commit it only when every key
 * passed (and the cross-key checks: min <= max), so a rejected value never reaches a VM.
 *
 * The metadata XML is read with XML_PARSE_NONET and without entity substitution, and only
 * up to MAX_POLICY_XML bytes: it is text any libvirt user can store in a domain.  Reading it
 * from and storing it in a domain is libvirt's part (act/libvirt_conn.c); the daemon's
 * [defaults] section fills the keys a domain leaves out (daemon/config.c).
 */
#include "base/policy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "base/parse.h"

#define MiB            ((uint64_t)1 << 20)
#define MAX_POLICY_XML 4096
#define MAX_PRIORITY   1000

void mtd_policy_default(struct mtd_policy *p)
{
	p->enabled = true;
	p->min_bytes = 256 * MiB;
	p->max_bytes = 0;
	p->priority = 100;
	p->target_refault_per_min = 0.002;
	p->headroom_bytes = 128 * MiB;
	/* reclaim where it can (it falls back to the balloon by itself): the guest's own free
	 * memory goes back in 2 MiB blocks and the host's huge pages over the rest stay whole,
	 * where the balloon's 4 KiB discards split them (docs/e2e.md, scenario 2). */
	p->return_via = MTD_RETURN_RECLAIM;
	p->source = MTD_ACCESS_AUTO;
	/* 200 ms of every interval: the plugin's 3-5x cost while it instruments then stays
	 * within the 1.3x goal on the guest's whole run (measured: docs/e2e.md, access_ept) */
	p->ept_window_ms = 200;
	/* Every field: a policy on the stack must not start with a stray byte in observe
	 * (found by tests/fuzz/fuzz_policy_xml.c: a bool read as 253). */
	p->observe = false;
	p->cold_age_ms = 0;
}

static const char *const access_names[] = {
    [MTD_ACCESS_AUTO] = "auto",   [MTD_ACCESS_EPT] = "ept",     [MTD_ACCESS_IDLE] = "idle",
    [MTD_ACCESS_DAMON] = "damon", [MTD_ACCESS_AGENT] = "agent", [MTD_ACCESS_MEMCG] = "memcg",
};

const char *mtd_access_pref_name(enum mtd_access_pref p)
{
	return (unsigned)p < sizeof(access_names) / sizeof(access_names[0]) ? access_names[p]
									    : "auto";
}

const char *const mtd_policy_keys[MTD_POLICY_NKEYS] = {
    "enabled", "min",        "max",     "priority", "target_refault_per_min", "headroom", "return",
    "source",  "ept_window", "observe", "cold_age",
};

int mtd_policy_key_index(const char *key)
{
	for (int i = 0; key && i < MTD_POLICY_NKEYS; i++)
		if (strcmp(key, mtd_policy_keys[i]) == 0)
			return i;
	return -1;
}

int mtd_policy_value_text(const struct mtd_policy *p, int key, char *buf, size_t len)
{
	int n;

	switch (key) {
	case 0:
		n = snprintf(buf, len, "%s", p->enabled ? "yes" : "no");
		break;
	case 1:
		n = snprintf(buf, len, "%" PRIu64, p->min_bytes);
		break;
	case 2:
		n = snprintf(buf, len, "%" PRIu64, p->max_bytes);
		break;
	case 3:
		n = snprintf(buf, len, "%u", p->priority);
		break;
	case 4:
		n = snprintf(buf, len, "%.17g", p->target_refault_per_min);
		break;
	case 5:
		n = snprintf(buf, len, "%" PRIu64, p->headroom_bytes);
		break;
	case 6:
		n = snprintf(buf, len, "%s", mtd_return_via_name(p->return_via));
		break;
	case 7:
		n = snprintf(buf, len, "%s", mtd_access_pref_name(p->source));
		break;
	case 8:
		n = snprintf(buf, len, "%" PRIu64 "ms", p->ept_window_ms);
		break;
	case 9:
		n = snprintf(buf, len, "%s", p->observe ? "yes" : "no");
		break;
	case 10:
		n = snprintf(buf, len, "%" PRIu64 "ms", p->cold_age_ms);
		break;
	default:
		return -EINVAL;
	}
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

const char *mtd_return_via_name(enum mtd_return_via r)
{
	switch (r) {
	case MTD_RETURN_RECLAIM:
		return "reclaim";
	case MTD_RETURN_PAGEOUT:
		return "pageout";
	case MTD_RETURN_AUTO:
		return "auto";
	case MTD_RETURN_BALLOON:
		break;
	}
	return "balloon";
}

int mtd_policy_set_kv(struct mtd_policy *p, const char *key, const char *value, char *err,
		      size_t errlen)
{
	struct mtd_policy n = *p;
	int rc = mtd_policy_set_kv_one(&n, key, value, err, errlen);

	if (rc == 0)
		rc = mtd_policy_validate(&n, err, errlen);
	if (rc == 0)
		*p = n;
	return rc;
}

int mtd_policy_set_kv_one(struct mtd_policy *p, const char *key, const char *value, char *err,
			  size_t errlen)
{
	struct mtd_policy n = *p;
	int rc = 0;

	if (!key || !value) {
		snprintf(err, errlen, "policy key and value are required");
		return -EINVAL;
	}
	if (strcmp(key, "enabled") == 0) {
		if (mtd_parse_bool(value, &n.enabled) < 0) {
			snprintf(err, errlen, "enabled must be yes or no, not '%.32s'", value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "min") == 0) {
		if (mtd_parse_bytes(value, &n.min_bytes) < 0 || n.min_bytes > (1ULL << 50)) {
			snprintf(err, errlen, "min must be a size such as 512M or 2G, not '%.32s'",
				 value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "max") == 0) {
		if (mtd_parse_bytes(value, &n.max_bytes) < 0 || n.max_bytes > (1ULL << 50)) {
			snprintf(
			    err, errlen,
			    "max must be a size such as 4G (0: the domain's memory), not '%.32s'",
			    value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "priority") == 0) {
		if (mtd_parse_uint(value, MAX_PRIORITY, &n.priority) < 0) {
			snprintf(err, errlen, "priority must be an integer 0..%d, not '%.32s'",
				 MAX_PRIORITY, value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "target_refault_per_min") == 0) {
		if (mtd_parse_double(value, 1e-6, 1.0, &n.target_refault_per_min) < 0) {
			snprintf(err, errlen,
				 "target_refault_per_min must be a fraction in [0.000001, 1] "
				 "(0.002 = 0.2%% of resident pages per minute), not '%.32s'",
				 value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "headroom") == 0) {
		if (mtd_parse_bytes(value, &n.headroom_bytes) < 0 ||
		    n.headroom_bytes > (1ULL << 44)) {
			snprintf(err, errlen, "headroom must be a size such as 128M, not '%.32s'",
				 value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "observe") == 0) {
		if (mtd_parse_bool(value, &n.observe) < 0) {
			snprintf(err, errlen, "observe must be yes or no, not '%.32s'", value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "return") == 0) {
		if (strcmp(value, "balloon") == 0) {
			n.return_via = MTD_RETURN_BALLOON;
		} else if (strcmp(value, "reclaim") == 0) {
			n.return_via = MTD_RETURN_RECLAIM;
		} else if (strcmp(value, "pageout") == 0) {
			n.return_via = MTD_RETURN_PAGEOUT;
		} else if (strcmp(value, "auto") == 0) {
			n.return_via = MTD_RETURN_AUTO;
		} else {
			snprintf(err, errlen,
				 "return must be balloon, reclaim, pageout or auto, not '%.32s'",
				 value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "source") == 0) {
		bool known = false;
		for (unsigned i = 0; i < sizeof(access_names) / sizeof(access_names[0]); i++)
			if (strcmp(value, access_names[i]) == 0) {
				n.source = (enum mtd_access_pref)i;
				known = true;
			}
		if (!known) {
			snprintf(
			    err, errlen,
			    "source must be auto, ept, idle, damon, agent or memcg, not '%.32s'",
			    value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "ept_window") == 0) {
		if (mtd_parse_ms(value, &n.ept_window_ms) < 0 || n.ept_window_ms < 10 ||
		    n.ept_window_ms > 3600000) {
			snprintf(err, errlen,
				 "ept_window must be a duration from 10ms to 1h such as 200ms, not "
				 "'%.32s'",
				 value);
			rc = -EINVAL;
		}
	} else if (strcmp(key, "cold_age") == 0) {
		/* 0 gives the choice back to the controller; a fixed age below 5 s would evict
		 * what the guest touched within two aging rounds. */
		if (mtd_parse_ms(value, &n.cold_age_ms) < 0 ||
		    (n.cold_age_ms && (n.cold_age_ms < 5000 || n.cold_age_ms > 3600000))) {
			snprintf(
			    err, errlen,
			    "cold_age must be 0 (the refault controller chooses) or a duration "
			    "from 5s to 1h such as 60s, not '%.32s'",
			    value);
			rc = -EINVAL;
		}
	} else {
		snprintf(err, errlen,
			 "unknown policy key '%.32s' (enabled, min, max, priority, "
			 "target_refault_per_min, headroom, return, source, ept_window, observe, "
			 "cold_age)",
			 key);
		rc = -EINVAL;
	}
	if (rc == 0)
		*p = n;
	return rc;
}

int mtd_policy_validate(const struct mtd_policy *p, char *err, size_t errlen)
{
	if (p->max_bytes && p->max_bytes < 64 * MiB) {
		snprintf(err, errlen, "max below 64 MiB would starve any guest");
		return -EINVAL;
	}
	if (p->max_bytes && p->min_bytes > p->max_bytes) {
		snprintf(err, errlen, "min (%" PRIu64 " MiB) is above max (%" PRIu64 " MiB)",
			 p->min_bytes / MiB, p->max_bytes / MiB);
		return -EINVAL;
	}
	return 0;
}

int mtd_policy_from_xml(struct mtd_policy *p, const char *xml, char *err, size_t errlen)
{
	struct mtd_policy n = *p;
	xmlDocPtr doc;
	xmlNodePtr root;
	size_t len;
	int rc = 0;

	if (!xml || !*xml)
		return 0;
	len = strnlen(xml, MAX_POLICY_XML + 1);
	if (len > MAX_POLICY_XML) {
		snprintf(err, errlen, "memtide metadata is longer than %d bytes", MAX_POLICY_XML);
		return -EINVAL;
	}
	doc = xmlReadMemory(xml, (int)len, "memtide-policy.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		snprintf(err, errlen, "memtide metadata is not well-formed XML");
		return -EINVAL;
	}
	root = xmlDocGetRootElement(doc);
	if (!root || xmlStrcmp(root->name, BAD_CAST "policy") != 0 ||
	    (root->ns && xmlStrcmp(root->ns->href, BAD_CAST MTD_POLICY_XMLNS) != 0)) {
		snprintf(err, errlen, "memtide metadata must be one <policy> element in %s",
			 MTD_POLICY_XMLNS);
		rc = -EINVAL;
		goto out;
	}
	for (xmlAttrPtr a = root->properties; a; a = a->next) {
		xmlChar *v = xmlNodeListGetString(doc, a->children, 1);
		char kerr[160];
		rc = mtd_policy_set_kv(&n, (const char *)a->name, v ? (const char *)v : "", kerr,
				       sizeof(kerr));
		xmlFree(v);
		if (rc < 0) {
			snprintf(err, errlen, "memtide metadata: %s", kerr);
			goto out;
		}
	}
	*p = n;
out:
	xmlFreeDoc(doc);
	return rc;
}

int mtd_policy_to_xml(const struct mtd_policy *p, char *buf, size_t len)
{
	char rate[32];

	/* The shortest text that reads back as the same double: "%.6g" lost digits, so a
	 * policy set to 0.00123456789 came back as 0.00123457 after a restart (found by
	 * tests/fuzz/fuzz_policy_xml.c).  15 digits keep 0.002 as "0.002"; 17 always
	 * round-trip. */
	snprintf(rate, sizeof(rate), "%.15g", p->target_refault_per_min);
	if (strtod(rate, NULL) != p->target_refault_per_min)
		snprintf(rate, sizeof(rate), "%.17g", p->target_refault_per_min);
	int n = snprintf(buf, len,
			 "<policy enabled=\"%s\" min=\"%" PRIu64 "\" max=\"%" PRIu64
			 "\" priority=\"%u\" target_refault_per_min=\"%s\" headroom=\"%" PRIu64
			 "\" return=\"%s\" source=\"%s\" ept_window=\"%" PRIu64
			 "ms\" observe=\"%s\" cold_age=\"%" PRIu64 "ms\"/>",
			 p->enabled ? "yes" : "no", p->min_bytes, p->max_bytes, p->priority, rate,
			 p->headroom_bytes, mtd_return_via_name(p->return_via),
			 mtd_access_pref_name(p->source), p->ept_window_ms,
			 p->observe ? "yes" : "no", p->cold_age_ms);
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}
