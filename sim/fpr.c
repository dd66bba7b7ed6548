// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fpr.c - free page reporting as the guest kernel does it (mm/page_reporting.c).
 *
 * The guest reports free memory in blocks of order page_reporting_order (9 on x86: 2 MiB),
 * some time after they become free; the host then drops them.  Measured here
 * (/work/shared/README.md): a guest that freed 200 MiB gave ~178 MiB back ~2.5 s later, in
 * 2 MiB blocks.  So the model returns a 2 MiB block once every page in it has been free
 * (SIM_PG_LIVE clear) for delay_ms, and never returns a partly live block: that is why a
 * sparse pattern (one live page per 2 MiB) defeats free page reporting entirely.
 *
 * Data layout: one struct per 2 MiB block, indexed by page index / 512 (trace layouts are
 * 2 MiB aligned, so a block never straddles two RAM ranges).
 * Invariant: blk.live_pages = number of SIM_PG_LIVE pages in the block; reported is true
 * only while live_pages == 0.  Cost: sim_fpr_report scans the block array once per epoch
 * (RAM / 2 MiB entries) and touches the pages of each block it reports once.
 */
#include <errno.h>
#include <stdlib.h>

#include "sim.h"

struct fpr_block {
	uint32_t live_pages; /* live pages in the block */
	bool reported;       /* returned since it last became wholly free */
	uint64_t free_since_ms;
};

struct sim_fpr {
	uint64_t delay_ms;
	size_t nr_blocks;
	struct fpr_block *blk;
};

int sim_fpr_new(const struct sim_trace *t, uint64_t delay_ms, struct sim_fpr **out)
{
	struct sim_fpr *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->delay_ms = delay_ms;
	f->nr_blocks = (size_t)((t->ram_pages + SIM_BLOCK_PAGES - 1) / SIM_BLOCK_PAGES);
	f->blk = calloc(f->nr_blocks, sizeof(*f->blk));
	if (!f->blk) {
		free(f);
		return -ENOMEM;
	}
	/* Every page starts free (never accessed), since the start of the trace. */
	for (size_t b = 0; b < f->nr_blocks; b++)
		f->blk[b].free_since_ms = t->epochs[0].t_ms;
	*out = f;
	return 0;
}

void sim_fpr_free(struct sim_fpr *f)
{
	if (!f)
		return;
	free(f->blk);
	free(f);
}

void sim_fpr_live(struct sim_fpr *f, uint32_t idx, int delta, uint64_t now_ms)
{
	struct fpr_block *b = &f->blk[idx / SIM_BLOCK_PAGES];

	if (delta > 0) {
		b->live_pages++;
		b->reported = false;
	} else if (b->live_pages > 0 && --b->live_pages == 0) {
		b->free_since_ms = now_ms;
	}
}

void sim_fpr_report(struct sim_fpr *f, struct sim_ctx *ctx, uint64_t now_ms)
{
	for (size_t i = 0; i < f->nr_blocks; i++) {
		struct fpr_block *b = &f->blk[i];
		if (b->live_pages || b->reported || now_ms < b->free_since_ms + f->delay_ms)
			continue;
		uint64_t first = (uint64_t)i * SIM_BLOCK_PAGES;
		uint64_t last = first + SIM_BLOCK_PAGES;
		if (last > ctx->t->ram_pages)
			last = ctx->t->ram_pages;
		for (uint64_t pg = first; pg < last; pg++)
			sim_evict(ctx, (uint32_t)pg);
		b->reported = true;
	}
}
