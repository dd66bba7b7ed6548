// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source_sim.c - the simulated access-bit source: libvmm's simulated hardware (real EPT
 * tables in memory) driven by a synthetic workload, aged by vmm_age_walk.
 *
 * Workload: a fixed hot set, hot_percent of the guest's 4 KiB pages, chosen by a hash of
 * (seed, page) so each VM's hot set is spread over its RAM differently; every round every
 * hot page is read once (one vmm_simhw_access each), then libvmm walks the tables.  Pages the
 * balloon took are unmapped in the simulated tables (vmm_simhw_unmap), so a hot page taken
 * by mistake shows up as a refault on the next round, as it would on a real host.
 *
 * Cost per round: hot pages x ~20 ns of simulated access + one walk (~1 load per entry); a
 * 1 GiB guest at 25% hot is 65536 accesses and 262144 entries, well under a millisecond.
 */
#include "access/source.h"

#include <errno.h>
#include <stdlib.h>

#include "vmm.h"

struct sim {
	struct vmm_simhw *hw;
	uint64_t pages; /* guest pages */
	unsigned hot_percent;
	uint64_t seed;
	const struct vmm_range *ram;
	size_t nr_ram;
};

static uint64_t mix(uint64_t x)
{
	/* splitmix64 finaliser: a cheap, well-spread hash for choosing hot pages */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static int sim_age(void *ctx, struct vmm_guest *g, uint64_t now_ms)
{
	struct sim *s = ctx;

	for (size_t r = 0; r < s->nr_ram; r++) {
		for (uint64_t gpa = s->ram[r].start; gpa < s->ram[r].end; gpa += VMM_PAGE_SIZE) {
			if (mix(s->seed ^ (gpa >> VMM_PAGE_SHIFT)) % 100 < s->hot_percent)
				(void)vmm_simhw_access(s->hw, gpa, false);
		}
	}
	return vmm_age_walk(g, vmm_simhw_pt(s->hw), now_ms, NULL);
}

static void sim_evicted(void *ctx, const struct vmm_run *runs, size_t n)
{
	struct sim *s = ctx;

	for (size_t i = 0; i < n; i++)
		(void)vmm_simhw_unmap(s->hw, runs[i].gpa, runs[i].npages);
}

static bool sim_fresh(void *ctx, uint64_t now_ms)
{
	(void)ctx;
	(void)now_ms;
	return true;
}

static void sim_destroy(void *ctx)
{
	struct sim *s = ctx;

	if (!s)
		return;
	vmm_simhw_free(s->hw);
	free(s);
}

static const struct mtd_source_ops sim_ops = {
    .name = "sim",
    .per_page = true,
    .age = sim_age,
    .evicted = sim_evicted,
    .fresh = sim_fresh,
    .destroy = sim_destroy,
};

int mtd_source_sim_new(uint64_t guest_bytes, unsigned hot_percent, uint64_t seed,
		       struct mtd_source *out)
{
	struct vmm_simhw_config cfg = {
	    .fmt = VMM_PT_EPT,
	    .guest_bytes = guest_bytes & ~(VMM_SIZE_2M - 1),
	    .huge_2m_share = 0.0, /* 4 KiB leaves: the balloon takes 4 KiB pages */
	    .seed = seed,
	};
	struct sim *s;
	int rc;

	if (cfg.guest_bytes == 0 || hot_percent > 100)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = vmm_simhw_new(&cfg, &s->hw);
	if (rc < 0) {
		free(s);
		return rc;
	}
	s->pages = cfg.guest_bytes >> VMM_PAGE_SHIFT;
	s->hot_percent = hot_percent;
	s->seed = seed;
	s->nr_ram = vmm_simhw_ram(s->hw, &s->ram);
	*out = (struct mtd_source){.ops = &sim_ops, .ctx = s, .ram = s->ram, .nr_ram = s->nr_ram};
	return 0;
}
