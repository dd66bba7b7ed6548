/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libvirt_conn.h - memtided's libvirt side: the connection, its event loop thread, domain
 * discovery, and the balloon actuator for libvirt-managed domains.
 *
 * Threads: libvirt's default event loop runs on a thread of its own; its callbacks only
 * hand news to the listener the daemon gives (which queues work for its main thread), never
 * call back into libvirt, so a slow libvirtd never blocks event delivery.  The connection is shared by every VM
 * loop (libvirt's API is thread-safe); each VM holds its own virDomainPtr.
 */
#ifndef MEMTIDE_HOST_LIBVIRT_CONN_H
#define MEMTIDE_HOST_LIBVIRT_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act/balloon.h"
#include "base/mtd.h"

struct mtd_libvirt;
struct _virDomain;

/* What libvirt's events about a domain become. */
enum mtd_libvirt_news {
	MTD_LV_STARTED = 1, /* started or resumed: manage it (a no-op when managed) */
	MTD_LV_GONE,        /* stopped, crashed or migrated away: its QEMU is no more */
	MTD_LV_DEVICES,     /* its balloon or a channel came or went: read its XML again */
	MTD_LV_POLICY,      /* memtide's metadata of it changed: read its policy again */
	MTD_LV_LOST,        /* the connection closed (name ""): reconnect, look at what runs */
};
/* Who hears the news: news() runs on libvirt's event thread, so it only queues (the daemon's
 * work queue), never calls libvirt. */
struct mtd_libvirt_listener {
	void (*news)(void *ctx, enum mtd_libvirt_news what, const char *name);
	void *ctx;
};

/* Register libvirt's event loop (once per process), start its thread, connect to uri and
 * subscribe to lifecycle, balloon-change and device events, whose news goes to listener
 * (copied).  0 or -EIO with err set. */
int mtd_libvirt_open(const struct mtd_libvirt_listener *listener, const char *uri,
		     struct mtd_libvirt **out, char *err, size_t errlen);
/* Unsubscribe, disconnect, stop the event thread. */
void mtd_libvirt_close(struct mtd_libvirt *lv);
/* The connection was lost (libvirtd restarted); set from the close callback. */
bool mtd_libvirt_broken(const struct mtd_libvirt *lv);

/* Names of running domains (caller frees each and the array).  Count or -EIO. */
int mtd_libvirt_running(struct mtd_libvirt *lv, char ***names);

/* What memtided needs to know about a domain, from its live XML. */
struct mtd_domain_info {
	char uuid[37];
	bool has_balloon;     /* <memballoon model='virtio*'> */
	bool fpr_attr;        /* freePageReporting='on' in the XML */
	char agent_path[256]; /* host side of the memtide agent channel, "" : none */
	bool has_vsock;       /* a vhost-user-vsock-pci device in <qemu:commandline> */
	uint32_t vsock_cid;   /* the kernel's <vsock model='virtio'>: its guest CID (the live
			       * XML's address, libvirt's pick under auto='yes'); 0: none, or
			       * not a guest's CID */
};

/*
 * Look a domain up by name and read its XML.  *dom gets a reference the caller releases
 * with mtd_libvirt_domain_put (or hands to mtd_libvirt_balloon_new).  0, -ENOENT (no such
 * domain or not running), -EIO / -EPROTO with err set.
 */
int mtd_libvirt_domain(struct mtd_libvirt *lv, const char *name, struct _virDomain **dom,
		       struct mtd_domain_info *info, char *err, size_t errlen);
void mtd_libvirt_domain_put(struct _virDomain *dom);

/* Parse a domain's XML (pure; for tests too).  0 or -EPROTO. */
int mtd_libvirt_parse_domain_xml(const char *xml, struct mtd_domain_info *info);

/* The libvirt balloon actuator for dom (takes over the reference). */
extern const struct mtd_balloon_ops mtd_libvirt_balloon_ops;
/* The actuator takes dom's reference.  Each libvirt call is bounded by timeout_ms on a
 * worker thread of the VM's own (bounded_call.h); once *hurry (the VM is stopping; may be
 * NULL) reads true, by 1 s.  A call that outlives its bound is -ETIMEDOUT, and the next
 * one -EBUSY until it returns. */
/* A libvirt job (virDomainGetJobStats: its type, and its VIR_DOMAIN_JOB_OPERATION, -1 when
 * not given) as QEMU's whole-memory operations (balloon.h): save, restore, migration,
 * snapshot and its revert, dump.  Pure. */
void mtd_libvirt_memjob(int type, int operation, struct mtd_memjob *out);
void *mtd_libvirt_balloon_new(struct _virDomain *dom, unsigned stats_period_s, int timeout_ms,
			      const atomic_bool *hurry);

/* Read the domain's policy (defaults + metadata) / store one key and return the result.
 * Libvirt errors give -EIO with libvirt's message in err. */
int mtd_policy_load_domain(struct _virDomain *dom, const struct mtd_policy *defaults,
			   struct mtd_policy *out, char *err, size_t errlen);
int mtd_policy_store_domain(struct _virDomain *dom, const struct mtd_policy *p, char *err,
			    size_t errlen);

/* The agent channel's target name memtide looks for (virtio-serial port name). */
#define MTD_AGENT_CHANNEL_NAME "org.memtide.agent.0"

#endif /* MEMTIDE_HOST_LIBVIRT_CONN_H */
