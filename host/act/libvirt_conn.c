// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libvirt_conn.c - libvirt connection, events, domain XML, and the libvirt balloon
 * actuator (see libvirt_conn.h).
 *
 * Events and the news they become for the daemon (its listener queues work for its main
 * thread; libvirt_conn.h):
 *   lifecycle STARTED, RESUMED           -> MTD_LV_STARTED (attach; a no-op when attached)
 *   lifecycle STOPPED (shutdown, destroy, crash, migrated away, failed), CRASHED
 *                                        -> MTD_LV_GONE (detach, forget its state)
 *   device added / removed (balloon, agent channel)  -> MTD_LV_DEVICES (re-read its XML)
 *   balloon change                       -> logged at DEBUG; the loop reads actual each tick
 *   metadata change in memtide's namespace -> MTD_LV_POLICY (virsh metadata, migration)
 *   connection closed                    -> MTD_LV_LOST (reconnect, re-attach what runs)
 *
 * The per-domain policy's home is the domain's metadata: mtd_policy_load_domain and
 * mtd_policy_store_domain read and write it (the XML itself is base/policy.c's).
 *
 * The balloon actuator: virDomainSetMemoryFlags(VIR_DOMAIN_AFFECT_LIVE) sets the target;
 * virDomainMemoryStats gives actual and the driver's stats (period set once at open with
 * virDomainSetMemoryStatsPeriod); free page reporting is read from QEMU itself with QMP
 * qom-get through virDomainQemuMonitorCommand (libvirt marks the domain "tainted" for
 * custom monitor use, once), falling back to the XML attribute when that fails.  Each of
 * those calls is bounded per VM (bounded_call.h): a frozen QEMU stalls only its own VM's
 * loop, and only for the call timeout.
 */
#include "act/libvirt_conn.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>

#include "act/bounded_call.h"
#include "act/qmp.h"
#include "base/log.h"
#include "base/policy.h"

struct mtd_libvirt {
	struct mtd_libvirt_listener listener;
	virConnectPtr conn;
	pthread_t ev_thread;
	bool ev_started;
	atomic_bool ev_quit;
	atomic_bool broken;
	int cb_ids[8];
	int nr_cbs;
};

static void lv_err(char *err, size_t errlen, const char *what)
{
	const char *m = virGetLastErrorMessage();
	snprintf(err, errlen, "%s: %s", what, m ? m : "unknown libvirt error");
}

/* libvirt prints every error to stderr by default; memtided logs them itself. */
static void silent_error(void *opaque, virErrorPtr e)
{
	(void)opaque;
	(void)e;
}

/* ---- event loop thread ------------------------------------------------------------------ */

static pthread_once_t ev_once = PTHREAD_ONCE_INIT;
static int ev_register_rc;

static void ev_register(void)
{
	ev_register_rc = virEventRegisterDefaultImpl();
}

static void *ev_main(void *arg)
{
	struct mtd_libvirt *lv = arg;

	while (!atomic_load(&lv->ev_quit)) {
		if (virEventRunDefaultImpl() < 0)
			mtd_warn("libvirt event loop: %s", virGetLastErrorMessage());
	}
	return NULL;
}

static void ev_poke(int timer, void *opaque)
{
	(void)opaque;
	virEventRemoveTimeout(timer);
}

/* ---- callbacks (event thread: queue only) ---------------------------------------------- */

static int on_lifecycle(virConnectPtr c, virDomainPtr dom, int event, int detail, void *opaque)
{
	struct mtd_libvirt *lv = opaque;
	const char *name = virDomainGetName(dom);

	(void)c;
	(void)detail;
	if (!name)
		return 0;
	switch (event) {
	case VIR_DOMAIN_EVENT_STARTED:
	case VIR_DOMAIN_EVENT_RESUMED:
		lv->listener.news(lv->listener.ctx, MTD_LV_STARTED, name);
		break;
	case VIR_DOMAIN_EVENT_STOPPED:
	case VIR_DOMAIN_EVENT_CRASHED:
		/* Gone (shut down, destroyed, crashed, migrated away): its QEMU is no more, so its
		 * state file goes too; a new QEMU of that name starts afresh. */
		lv->listener.news(lv->listener.ctx, MTD_LV_GONE, name);
		break;
	default:
		break;
	}
	return 0;
}

static int on_balloon(virConnectPtr c, virDomainPtr dom, unsigned long long actual_kib,
		      void *opaque)
{
	(void)c;
	(void)opaque;
	mtd_debug("%s: balloon now %llu MiB", virDomainGetName(dom), actual_kib / 1024);
	return 0;
}

static int on_device(virConnectPtr c, virDomainPtr dom, const char *alias, void *opaque)
{
	struct mtd_libvirt *lv = opaque;
	const char *name = virDomainGetName(dom);

	(void)c;
	/* Only the balloon and channels matter; re-read the XML for those. */
	if (!name || !alias ||
	    (strncmp(alias, "balloon", 7) != 0 && strncmp(alias, "channel", 7) != 0))
		return 0;
	lv->listener.news(lv->listener.ctx, MTD_LV_DEVICES, name);
	return 0;
}

static int on_metadata(virConnectPtr c, virDomainPtr dom, int type, const char *nsuri, void *opaque)
{
	struct mtd_libvirt *lv = opaque;
	const char *name = virDomainGetName(dom);

	(void)c;
	if (name && type == VIR_DOMAIN_METADATA_ELEMENT && nsuri &&
	    strcmp(nsuri, MTD_POLICY_XMLNS) == 0)
		lv->listener.news(lv->listener.ctx, MTD_LV_POLICY, name);
	return 0;
}

static void on_close(virConnectPtr c, int reason, void *opaque)
{
	struct mtd_libvirt *lv = opaque;

	(void)c;
	(void)reason;
	atomic_store(&lv->broken, true);
	lv->listener.news(lv->listener.ctx, MTD_LV_LOST, "");
}

/* ---- connection ------------------------------------------------------------------------ */

int mtd_libvirt_open(const struct mtd_libvirt_listener *listener, const char *uri,
		     struct mtd_libvirt **out, char *err, size_t errlen)
{
	struct mtd_libvirt *lv;

	virSetErrorFunc(NULL, silent_error);
	pthread_once(&ev_once, ev_register);
	if (ev_register_rc < 0) {
		lv_err(err, errlen, "registering libvirt's event loop");
		return -EIO;
	}
	lv = calloc(1, sizeof(*lv));
	if (!lv)
		return -ENOMEM;
	lv->listener = *listener;
	if (pthread_create(&lv->ev_thread, NULL, ev_main, lv) != 0) {
		free(lv);
		snprintf(err, errlen, "cannot start the libvirt event thread");
		return -EAGAIN;
	}
	lv->ev_started = true;
	lv->conn = virConnectOpen(uri);
	if (!lv->conn) {
		lv_err(err, errlen, "connecting to libvirt");
		mtd_libvirt_close(lv);
		return -EIO;
	}
	/* Keepalive: notice a dead libvirtd within ~20 s even when idle. */
	(void)virConnectSetKeepAlive(lv->conn, 5, 3);
	(void)virConnectRegisterCloseCallback(lv->conn, on_close, lv, NULL);
	struct {
		int id;
		virConnectDomainEventGenericCallback cb;
	} evs[] = {
	    {VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle)},
	    {VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(on_balloon)},
	    {VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_CALLBACK(on_device)},
	    {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(on_device)},
	    {VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(on_metadata)},
	};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		int id = virConnectDomainEventRegisterAny(lv->conn, NULL, evs[i].id, evs[i].cb, lv,
							  NULL);
		if (id < 0) {
			lv_err(err, errlen, "subscribing to domain events");
			mtd_libvirt_close(lv);
			return -EIO;
		}
		lv->cb_ids[lv->nr_cbs++] = id;
	}
	*out = lv;
	return 0;
}

void mtd_libvirt_close(struct mtd_libvirt *lv)
{
	if (!lv)
		return;
	if (lv->conn) {
		for (int i = 0; i < lv->nr_cbs; i++)
			(void)virConnectDomainEventDeregisterAny(lv->conn, lv->cb_ids[i]);
		(void)virConnectUnregisterCloseCallback(lv->conn, on_close);
		virConnectClose(lv->conn);
	}
	if (lv->ev_started) {
		atomic_store(&lv->ev_quit, true);
		/* A zero timer makes virEventRunDefaultImpl return so the thread sees ev_quit. */
		(void)virEventAddTimeout(0, ev_poke, NULL, NULL);
		pthread_join(lv->ev_thread, NULL);
	}
	free(lv);
}

bool mtd_libvirt_broken(const struct mtd_libvirt *lv)
{
	return atomic_load(&lv->broken);
}

int mtd_libvirt_running(struct mtd_libvirt *lv, char ***names)
{
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(lv->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);

	if (n < 0)
		return -EIO;
	char **out = calloc((size_t)n + 1, sizeof(*out));
	for (int i = 0; i < n; i++) {
		if (out)
			out[i] = strdup(virDomainGetName(doms[i]));
		virDomainFree(doms[i]);
	}
	free(doms);
	if (!out)
		return -ENOMEM;
	*names = out;
	return n;
}

/* ---- domain XML ------------------------------------------------------------------------ */

static int xpath_str(xmlXPathContextPtr ctx, const char *expr, char *buf, size_t len)
{
	xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, ctx);
	int rc = -ENOENT;

	if (o && o->type == XPATH_STRING && o->stringval && o->stringval[0]) {
		size_t n = strlen((const char *)o->stringval);
		if (n < len) {
			memcpy(buf, o->stringval, n + 1);
			rc = 0;
		} else {
			rc = -ENAMETOOLONG;
		}
	}
	xmlXPathFreeObject(o);
	return rc;
}

int mtd_libvirt_parse_domain_xml(const char *xml, struct mtd_domain_info *info)
{
	xmlDocPtr doc;
	xmlXPathContextPtr ctx;
	char model[64] = "", fpr[8] = "";

	memset(info, 0, sizeof(*info));
	doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc)
		return -EPROTO;
	ctx = xmlXPathNewContext(doc);
	if (!ctx) {
		xmlFreeDoc(doc);
		return -ENOMEM;
	}
	(void)xpath_str(ctx, "string(/domain/uuid)", info->uuid, sizeof(info->uuid));
	(void)xpath_str(ctx, "string(/domain/devices/memballoon/@model)", model, sizeof(model));
	info->has_balloon = strncmp(model, "virtio", 6) == 0;
	(void)xpath_str(ctx, "string(/domain/devices/memballoon/@freePageReporting)", fpr,
			sizeof(fpr));
	info->fpr_attr = strcmp(fpr, "on") == 0;
	(void)xpath_str(ctx,
			"string(/domain/devices/channel[@type='unix']"
			"[target/@type='virtio'][target/@name='" MTD_AGENT_CHANNEL_NAME "']"
			"/source/@path)",
			info->agent_path, sizeof(info->agent_path));
	/* libvirt has no element for vhost-user-vsock: memtidectl domxml-patch adds it as
	 * <qemu:commandline> arguments (any namespace prefix: matched by local name). */
	char vs[128] = "";
	(void)xpath_str(ctx,
			"string(/domain/*[local-name()='commandline']/*[local-name()='arg']"
			"[starts-with(@value,'vhost-user-vsock-pci')]/@value)",
			vs, sizeof(vs));
	info->has_vsock = vs[0] != '\0';
	/* The kernel's vsock (vhost_vsock): its CID tells its agent's connections from the other
	 * guests' on memtided's AF_VSOCK listener.  A domain not running has no address under
	 * auto='yes' (libvirt picks one at start): 0, as for none. */
	char cid[16] = "";
	(void)xpath_str(
	    ctx, "string(/domain/devices/vsock[not(@model) or @model='virtio']/cid/@address)", cid,
	    sizeof(cid));
	char *end = NULL;
	unsigned long long c = cid[0] >= '0' && cid[0] <= '9' ? strtoull(cid, &end, 0) : 0;
	info->vsock_cid = end && !*end && c >= 3 && c < 0xffffffffull ? (uint32_t)c : 0;
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return 0;
}

int mtd_libvirt_domain(struct mtd_libvirt *lv, const char *name, struct _virDomain **dom,
		       struct mtd_domain_info *info, char *err, size_t errlen)
{
	virDomainPtr dp = virDomainLookupByName(lv->conn, name);
	char *xml;
	int rc;

	if (!dp) {
		virErrorPtr e = virGetLastError();
		if (e && e->code == VIR_ERR_NO_DOMAIN) {
			snprintf(err, errlen, "no domain named '%.64s'", name);
			return -ENOENT;
		}
		lv_err(err, errlen, "looking up the domain");
		return -EIO;
	}
	if (virDomainIsActive(dp) != 1) {
		snprintf(err, errlen, "domain '%.64s' is not running", name);
		virDomainFree(dp);
		return -ENOENT;
	}
	xml = virDomainGetXMLDesc(dp, 0);
	if (!xml) {
		lv_err(err, errlen, "reading the domain XML");
		virDomainFree(dp);
		return -EIO;
	}
	rc = mtd_libvirt_parse_domain_xml(xml, info);
	free(xml);
	if (rc < 0) {
		snprintf(err, errlen, "the domain XML does not parse");
		virDomainFree(dp);
		return rc;
	}
	*dom = dp;
	return 0;
}

void mtd_libvirt_domain_put(struct _virDomain *dom)
{
	if (dom)
		virDomainFree(dom);
}

/* ---- balloon actuator ------------------------------------------------------------------- */

/*
 * Every libvirt call of the actuator runs as a bounded call (bounded_call.h): a frozen QEMU
 * makes libvirtd wait on its monitor without a limit, and the VM's loop must not wait with
 * it.  A job carries its own reference to the domain (virDomainRef), so a timed-out call can
 * outlive the actuator, and copies libvirt's error text on the worker (libvirt keeps the
 * last error per thread).
 */
enum lv_call {
	LV_OPEN = 0,
	LV_SET_TARGET,
	LV_READ,
	LV_FPR,
	LV_JOB,
};

static const char *const lv_call_names[] = {
    [LV_OPEN] = "virDomainGetMaxMemory", [LV_SET_TARGET] = "virDomainSetMemoryFlags",
    [LV_READ] = "virDomainMemoryStats",  [LV_FPR] = "virDomainQemuMonitorCommand",
    [LV_JOB] = "virDomainGetJobStats",
};

struct lv_job {
	struct mtd_bjob base; /* first: the bounded call's view */
	enum lv_call call;
	virDomainPtr dom; /* the job's own reference */
	unsigned stats_period_s;
	uint64_t target_bytes;                                      /* LV_SET_TARGET */
	uint64_t domain_bytes;                                      /* LV_OPEN */
	virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR]; /* LV_READ */
	int nr_stats;
	bool fpr_on;          /* LV_FPR */
	int job_type, job_op; /* LV_JOB */
	char err[200];
};

struct lv_balloon {
	virDomainPtr dom;
	unsigned stats_period_s;
	int timeout_ms;
	const atomic_bool *hurry;
	struct mtd_bcall *bcall;
};

void *mtd_libvirt_balloon_new(struct _virDomain *dom, unsigned stats_period_s, int timeout_ms,
			      const atomic_bool *hurry)
{
	struct lv_balloon *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->bcall = mtd_bcall_new();
	if (!b->bcall) {
		free(b);
		return NULL;
	}
	b->dom = dom;
	b->stats_period_s = stats_period_s;
	b->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	b->hurry = hurry;
	return b;
}

/* Free page reporting, from QEMU itself, else from the XML.  On the worker. */
static int lv_fpr_now(virDomainPtr dom, bool *on)
{
	struct json_object *ret = NULL;
	char *reply = NULL, err[160];
	int rc;

	rc = virDomainQemuMonitorCommand(dom,
					 "{\"execute\":\"qom-get\",\"arguments\":{\"path\":"
					 "\"/machine/peripheral/balloon0\",\"property\":"
					 "\"free-page-reporting\"}}",
					 &reply, 0);
	if (rc == 0) {
		rc = mtd_qmp_parse_reply(reply, &ret, err, sizeof(err));
		if (rc == 0 && json_object_is_type(ret, json_type_boolean))
			*on = json_object_get_boolean(ret);
		else if (rc == 0)
			rc = -EPROTO;
		json_object_put(ret);
		free(reply);
		if (rc == 0)
			return 0;
	}
	/* Fall back to what the XML says. */
	char *xml = virDomainGetXMLDesc(dom, 0);
	struct mtd_domain_info info;
	if (!xml)
		return -ENOTSUP;
	rc = mtd_libvirt_parse_domain_xml(xml, &info);
	free(xml);
	if (rc < 0)
		return -ENOTSUP;
	*on = info.fpr_attr;
	return 0;
}

/* The blocking part of each call, on the bounded call's worker. */
static int lv_job_run(struct mtd_bjob *base)
{
	struct lv_job *j = (struct lv_job *)base;
	unsigned long max_kib;

	switch (j->call) {
	case LV_OPEN:
		max_kib = virDomainGetMaxMemory(j->dom);
		if (max_kib == 0) {
			lv_err(j->err, sizeof(j->err), "reading the domain's memory size");
			return -EIO;
		}
		j->domain_bytes = (uint64_t)max_kib * 1024;
		if (virDomainSetMemoryStatsPeriod(j->dom, (int)j->stats_period_s,
						  VIR_DOMAIN_AFFECT_LIVE) < 0)
			mtd_info("%s: cannot set the balloon stats period: %s",
				 virDomainGetName(j->dom), virGetLastErrorMessage());
		return 0;
	case LV_SET_TARGET:
		if (virDomainSetMemoryFlags(j->dom, (unsigned long)(j->target_bytes / 1024),
					    VIR_DOMAIN_AFFECT_LIVE) < 0) {
			lv_err(j->err, sizeof(j->err), "setting the balloon");
			return -EIO;
		}
		return 0;
	case LV_READ:
		j->nr_stats = virDomainMemoryStats(j->dom, j->stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);
		if (j->nr_stats < 0) {
			lv_err(j->err, sizeof(j->err), "reading the balloon");
			return -EIO;
		}
		return 0;
	case LV_FPR:
		return lv_fpr_now(j->dom, &j->fpr_on);
	case LV_JOB: {
		virTypedParameterPtr params = NULL;
		int nparams = 0;
		if (virDomainGetJobStats(j->dom, &j->job_type, &params, &nparams, 0) < 0) {
			lv_err(j->err, sizeof(j->err), "reading the domain's job");
			return -EIO;
		}
		if (virTypedParamsGetInt(params, nparams, VIR_DOMAIN_JOB_OPERATION, &j->job_op) !=
		    1)
			j->job_op = -1;
		virTypedParamsFree(params, nparams);
		return 0;
	}
	}
	return -EINVAL;
}

static void lv_job_destroy(struct mtd_bjob *base)
{
	struct lv_job *j = (struct lv_job *)base;

	virDomainFree(j->dom);
	free(j);
}

/* Run one call bounded.  *out is the finished job (put it with mtd_bjob_put) when the
 * return is the call's own result; NULL after a timeout or when it could not run. */
static int lv_call(struct lv_balloon *b, struct lv_job *j, struct lv_job **out, char *err,
		   size_t errlen)
{
	int rc;

	*out = NULL;
	j->base.run = lv_job_run;
	j->base.destroy = lv_job_destroy;
	j->stats_period_s = b->stats_period_s;
	if (virDomainRef(b->dom) < 0) {
		free(j);
		snprintf(err, errlen, "libvirt: cannot reference the domain");
		return -EIO;
	}
	j->dom = b->dom;
	enum lv_call call = j->call;
	rc = mtd_bcall_run(b->bcall, &j->base, b->timeout_ms, b->hurry);
	if (rc == -ETIMEDOUT) {
		snprintf(err, errlen, "libvirt %s did not return within %d ms", lv_call_names[call],
			 b->timeout_ms);
		return rc;
	}
	if (rc == -EBUSY) {
		snprintf(err, errlen, "an earlier libvirt call has not returned yet");
		mtd_bjob_put(b->bcall, &j->base);
		return rc;
	}
	if (rc == -EAGAIN) {
		snprintf(err, errlen, "cannot start the libvirt call thread");
		mtd_bjob_put(b->bcall, &j->base);
		return rc;
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", j->err);
	*out = j;
	return rc;
}

static int lvb_open(void *ctx, uint64_t *domain_bytes, char *err, size_t errlen)
{
	struct lv_balloon *b = ctx;
	struct lv_job *j = calloc(1, sizeof(*j)), *done;
	int rc;

	if (!j)
		return -ENOMEM;
	j->call = LV_OPEN;
	rc = lv_call(b, j, &done, err, errlen);
	if (rc == 0)
		*domain_bytes = done->domain_bytes;
	if (done)
		mtd_bjob_put(b->bcall, &done->base);
	return rc;
}

static int lvb_set_target(void *ctx, uint64_t target_bytes, char *err, size_t errlen)
{
	struct lv_balloon *b = ctx;
	struct lv_job *j = calloc(1, sizeof(*j)), *done;
	int rc;

	if (!j)
		return -ENOMEM;
	j->call = LV_SET_TARGET;
	j->target_bytes = target_bytes;
	rc = lv_call(b, j, &done, err, errlen);
	if (done)
		mtd_bjob_put(b->bcall, &done->base);
	return rc;
}

static int lvb_read(void *ctx, uint64_t *actual_bytes, struct mtd_balloon_stats *st)
{
	struct lv_balloon *b = ctx;
	struct lv_job *j = calloc(1, sizeof(*j)), *done;
	bool have_actual = false;
	char err[200];
	int rc;

	memset(st, 0, sizeof(*st));
	if (!j)
		return -ENOMEM;
	j->call = LV_READ;
	rc = lv_call(b, j, &done, err, sizeof(err));
	if (rc < 0) {
		if (done)
			mtd_bjob_put(b->bcall, &done->base);
		return rc;
	}
	for (int i = 0; i < done->nr_stats; i++) {
		uint64_t v = done->stats[i].val;
		switch (done->stats[i].tag) {
		case VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON:
			*actual_bytes = v * 1024;
			have_actual = true;
			break;
		case VIR_DOMAIN_MEMORY_STAT_USABLE:
			st->available_bytes = v * 1024;
			st->has_available = true;
			break;
		case VIR_DOMAIN_MEMORY_STAT_UNUSED:
			st->free_bytes = v * 1024;
			break;
		case VIR_DOMAIN_MEMORY_STAT_AVAILABLE:
			st->total_bytes = v * 1024;
			break;
		case VIR_DOMAIN_MEMORY_STAT_MAJOR_FAULT:
			st->major_faults = v;
			break;
		case VIR_DOMAIN_MEMORY_STAT_MINOR_FAULT:
			st->minor_faults = v;
			break;
		case VIR_DOMAIN_MEMORY_STAT_SWAP_IN:
			st->swap_in_bytes = v * 1024;
			break;
		case VIR_DOMAIN_MEMORY_STAT_LAST_UPDATE:
			st->last_update_s = v;
			break;
		default:
			break;
		}
	}
	mtd_bjob_put(b->bcall, &done->base);
	st->valid = st->last_update_s != 0;
	return have_actual ? 0 : -ENODATA;
}

static int lvb_fpr(void *ctx, bool *on)
{
	struct lv_balloon *b = ctx;
	struct lv_job *j = calloc(1, sizeof(*j)), *done;
	char err[200];
	int rc;

	if (!j)
		return -ENOMEM;
	j->call = LV_FPR;
	rc = lv_call(b, j, &done, err, sizeof(err));
	if (rc == 0)
		*on = done->fpr_on;
	if (done)
		mtd_bjob_put(b->bcall, &done->base);
	return rc == -ETIMEDOUT || rc == -EBUSY ? rc : rc < 0 ? -ENOTSUP : 0;
}

void mtd_libvirt_memjob(int type, int operation, struct mtd_memjob *out)
{
	const char *what = NULL;

	memset(out, 0, sizeof(*out));
	if (type == VIR_DOMAIN_JOB_NONE || type == VIR_DOMAIN_JOB_COMPLETED ||
	    type == VIR_DOMAIN_JOB_FAILED || type == VIR_DOMAIN_JOB_CANCELLED)
		return;
	switch (operation) {
	case VIR_DOMAIN_JOB_OPERATION_SAVE:
	case VIR_DOMAIN_JOB_OPERATION_RESTORE:
	case VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN:
	case VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT:
		what = "migration";
		break;
	case VIR_DOMAIN_JOB_OPERATION_SNAPSHOT:
	case VIR_DOMAIN_JOB_OPERATION_SNAPSHOT_REVERT:
		what = "snapshot";
		break;
	case VIR_DOMAIN_JOB_OPERATION_DUMP:
		what = "memory dump";
		break;
	case -1: /* a libvirt that does not say: any job may be one */
		what = "libvirt job";
		break;
	default: /* backup, a snapshot's deletion: disks only */
		return;
	}
	out->active = true;
	snprintf(out->what, sizeof(out->what), "%s", what);
}

static int lvb_memjob(void *ctx, struct mtd_memjob *out)
{
	struct lv_balloon *b = ctx;
	struct lv_job *j = calloc(1, sizeof(*j)), *done;
	char err[200];
	int rc;

	if (!j)
		return -ENOMEM;
	j->call = LV_JOB;
	rc = lv_call(b, j, &done, err, sizeof(err));
	if (rc == 0)
		mtd_libvirt_memjob(done->job_type, done->job_op, out);
	if (done)
		mtd_bjob_put(b->bcall, &done->base);
	return rc;
}

/* libvirt's QEMU driver keeps the pid in /run/libvirt/qemu/NAME.pid (system instance). */
static int lvb_qemu_pid(void *ctx, int *pid)
{
	struct lv_balloon *b = ctx;
	char path[256], line[32] = "";
	const char *name = virDomainGetName(b->dom);
	FILE *f;
	long v = 0;

	if (!name ||
	    snprintf(path, sizeof(path), "/run/libvirt/qemu/%s.pid", name) >= (int)sizeof(path))
		return -ENOTSUP;
	f = fopen(path, "re");
	if (!f)
		return -ENOTSUP;
	if (fgets(line, sizeof(line), f))
		v = strtol(line, NULL, 10);
	fclose(f);
	if (v <= 0 || v > INT32_MAX)
		return -ENOTSUP;
	*pid = (int)v;
	return 0;
}

/* QMP passed through libvirt (libvirt marks the domain "custom-monitor" tainted, as for the
 * free page reporting query above). */
static int lvb_qmp(void *ctx, const char *cmd, struct json_object *args, struct json_object **ret,
		   char *err, size_t errlen)
{
	struct lv_balloon *b = ctx;
	struct json_object *req = json_object_new_object();
	char *reply = NULL;
	int rc;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "execute", json_object_new_string(cmd));
	if (args)
		json_object_object_add(req, "arguments", json_object_get(args));
	rc = virDomainQemuMonitorCommand(b->dom, json_object_to_json_string(req), &reply, 0);
	json_object_put(req);
	if (rc < 0) {
		const char *m = virGetLastErrorMessage();
		snprintf(err, errlen, "libvirt QMP %s: %s", cmd, m ? m : "failed");
		return -EIO;
	}
	rc = mtd_qmp_parse_reply(reply, ret, err, errlen);
	free(reply);
	return rc;
}

static void lvb_destroy(void *ctx)
{
	struct lv_balloon *b = ctx;

	if (!b)
		return;
	mtd_bcall_free(b->bcall); /* a call still running keeps its own domain reference */
	virDomainFree(b->dom);
	free(b);
}

const struct mtd_balloon_ops mtd_libvirt_balloon_ops = {
    .name = "libvirt",
    .open = lvb_open,
    .set_target = lvb_set_target,
    .read = lvb_read,
    .fpr = lvb_fpr,
    .qemu_pid = lvb_qemu_pid,
    .qmp = lvb_qmp,
    .memjob = lvb_memjob,
    .destroy = lvb_destroy,
};

/* ---- the policy in the domain's metadata ------------------------------------------------ */

int mtd_policy_load_domain(struct _virDomain *dom, const struct mtd_policy *defaults,
			   struct mtd_policy *out, char *err, size_t errlen)
{
	struct mtd_policy p = *defaults;
	char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, MTD_POLICY_XMLNS,
					 VIR_DOMAIN_AFFECT_CURRENT);
	int rc;

	if (!xml) {
		virErrorPtr e = virGetLastError();
		if (e && e->code == VIR_ERR_NO_DOMAIN_METADATA) {
			virResetLastError();
			*out = p;
			return 0;
		}
		lv_err(err, errlen, "reading memtide metadata");
		return -EIO;
	}
	rc = mtd_policy_from_xml(&p, xml, err, errlen);
	free(xml);
	if (rc == 0)
		*out = p;
	return rc;
}

int mtd_policy_store_domain(struct _virDomain *dom, const struct mtd_policy *p, char *err,
			    size_t errlen)
{
	char xml[512];
	unsigned flags = 0;

	if (mtd_policy_to_xml(p, xml, sizeof(xml)) < 0) {
		snprintf(err, errlen, "policy does not fit the metadata buffer");
		return -ENOSPC;
	}
	if (virDomainIsActive(dom) == 1)
		flags |= VIR_DOMAIN_AFFECT_LIVE;
	if (virDomainIsPersistent(dom) == 1)
		flags |= VIR_DOMAIN_AFFECT_CONFIG;
	if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, MTD_POLICY_XMLNS_PREFIX,
				 MTD_POLICY_XMLNS, flags) < 0) {
		lv_err(err, errlen, "storing memtide metadata");
		return -EIO;
	}
	return 0;
}
