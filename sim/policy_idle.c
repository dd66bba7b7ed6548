/*
 * policy_idle.c - the single idle-age threshold, exact to the page: the policy memtide must
 * beat (issue 13, "Beat a single idle threshold").
 *
 * A page is evicted as soon as it has been idle for idle-age-ms: at the end of every epoch,
 * every resident live page whose last access ended at least that long ago goes to the host.
 * It has no controller and no page history beyond the last access; tuned in hindsight (the
 * best threshold per trace and budget, found by sweeping it) it is what a global cold age
 * can do at best, which is why sim_defaults compares memtide at its defaults against it.
 * Free memory is handled as memtide's policy does (mt-take-free, sim/policy_memtide.c):
 * pages the guest frees, and pages never used after the first epoch, go at once, so the
 * comparison measures only the choice among live pages.
 *
 * Cost: O(ram_pages) per epoch (one pass over the last-access stamps).
 */
#include <errno.h>
#include <stdlib.h>

#include "sim.h"

struct idle {
	uint64_t *last_ms; /* end of the epoch that last accessed the page */
};

static void idle_fini(void *state)
{
	struct idle *s = state;

	free(s->last_ms);
	free(s);
}

static int idle_init(struct sim_ctx *ctx, void **state)
{
	struct idle *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->last_ms = calloc(ctx->t->ram_pages, sizeof(*s->last_ms));
	if (!s->last_ms) {
		free(s);
		return -ENOMEM;
	}
	for (uint64_t p = 0; p < ctx->t->ram_pages; p++)
		s->last_ms[p] = ctx->t->epochs[0].t_ms;
	*state = s;
	return 0;
}

static int idle_epoch(struct sim_ctx *ctx, void *state, size_t e)
{
	struct idle *s = state;
	const struct sim_epoch *ep = &ctx->t->epochs[e];
	uint64_t now = sim_epoch_end_ms(ctx->t, e), age = ctx->p->idle_age_ms;

	for (uint32_t i = 0; i < ep->nr_acc; i++)
		s->last_ms[SIM_ACC_PAGE(ep->acc[i])] = now;
	if (ctx->p->mt_take_free) {
		for (uint32_t i = 0; i < ep->nr_free; i++)
			sim_evict(ctx, ep->freed[i]);
		if (e == 0)
			for (uint32_t p = 0; p < ctx->t->ram_pages; p++)
				if (!(ctx->pg[p] & SIM_PG_LIVE))
					sim_evict(ctx, p);
	}
	for (uint32_t p = 0; p < ctx->t->ram_pages; p++)
		if ((ctx->pg[p] & SIM_PG_RESIDENT) && now - s->last_ms[p] >= age)
			sim_evict(ctx, p);
	return 0;
}

const struct sim_policy sim_policy_idle = {
    .name = "idle",
    .fpr = SIM_FPR_PARAM,
    .knob = "idle-age-ms",
    .init = idle_init,
    .epoch = idle_epoch,
    .fini = idle_fini,
};
