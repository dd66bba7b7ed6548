// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_memcg.c - the VM's memory cgroup as an access source (see source.h): what the host
 * kernel's reclaim learns of the guest's use, where memtided can read nothing finer.
 *
 * A KVM guest's accessed bits live in KVM's nested page tables; the host kernel reads them
 * only when it evicts (the reverse-map walk asks KVM through the MMU notifier), and on a stock
 * Debian 12 host nothing else does (no DAMON, no idle page tracking).  So the working set is
 * built from what can be trusted (act/memcg_hand.h reads it at the start of each tick):
 *   - MGLRU on: the anonymous memory the kernel put in its generation within the cold age.
 *     Where the kernel's aging is blind to the guest (decide/aging_sight.h: tested on the VM,
 *     never assumed), a page gets there only when eviction found it used (or when it was
 *     faulted in, or read back from swap), so this is what eviction keeps; where aging sees
 *     the guest it is the kernel's own histogram.
 *   - MGLRU off (the classic LRU): no ages at all; everything resident counts.
 * The amount is laid over low RAM each round, as the agent's (source_agent.c): libvmm's
 * working-set estimate, reclaim controller and decision then run unchanged, and the pages
 * themselves are never named - the kernel picks them.
 */
#include "access/source.h"

#include <errno.h>
#include <stdlib.h>

#include "act/memcg_hand.h"
#include "vmm.h"

struct memcg_src {
	struct mtd_memcg_hand *hand; /* owned by the VM; outlives the source */
	struct vmm_range ram;        /* [0, guest bytes) */
	uint64_t young_bytes;
	bool by_age;
};

static int memcg_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct memcg_src *s = ctx;
	int rc = vmm_age_begin(g, now_ms);
	bool by_age;
	uint64_t young;

	if (rc < 0)
		return rc;
	if (!mtd_memcg_hand_young(s->hand, &young, &by_age))
		return -EAGAIN;
	s->young_bytes = young;
	s->by_age = by_age;
	uint64_t span = s->ram.end - s->ram.start;
	uint64_t pages = (young < span ? young : span) >> VMM_PAGE_SHIFT;
	if (pages)
		rc = vmm_mark_young(g, s->ram.start, pages, false);
	return rc < 0 ? rc : 0;
}

static bool memcg_fresh(void *ctx, uint64_t now_ms)
{
	const struct memcg_src *s = ctx;
	uint64_t young;
	bool by_age;

	(void)now_ms;
	return mtd_memcg_hand_young(s->hand, &young, &by_age);
}

static int memcg_describe(void *ctx, char *buf, size_t len)
{
	const struct memcg_src *s = ctx;

	return mtd_memcg_hand_describe(s->hand, buf, len);
}

static const char *memcg_estimate(void *ctx, bool *by_age)
{
	const struct memcg_src *s = ctx;

	*by_age = s->by_age;
	return mtd_memcg_hand_estimate(s->hand);
}

static void memcg_destroy(void *ctx)
{
	free(ctx);
}

static const struct mtd_source_ops memcg_ops = {
    .name = "memcg",
    .per_page = false, /* amounts: the kernel names the pages, memtided never does */
    .age = memcg_age,
    .evicted = NULL,
    .fresh = memcg_fresh,
    .describe = memcg_describe,
    .estimate = memcg_estimate,
    .destroy = memcg_destroy,
};

int mtd_source_memcg_new(struct mtd_memcg_hand *hand, uint64_t guest_bytes, struct mtd_source *out)
{
	struct memcg_src *s;

	guest_bytes &= ~(VMM_PAGE_SIZE - 1);
	if (!hand || guest_bytes == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->hand = hand;
	s->ram = (struct vmm_range){0, guest_bytes};
	*out = (struct mtd_source){.ops = &memcg_ops, .ctx = s, .ram = &s->ram, .nr_ram = 1};
	return 0;
}
