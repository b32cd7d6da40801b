/*
 * ZeRO-3 (P_os+g+p, ZeRO paper §5.3): everything sharded, Ψ(p+g+k)/N.
 * Each unit's params are all-gathered before it runs, in forward and again
 * in backward, and freed after; in backward the unit's grads go to a
 * transient full buffer that is reduce-scattered into the shard and freed.
 * With unit=model the whole model is gathered at once (the default); with
 * unit=layer one layer at a time, as ZeRO-3 and FSDP do. At N = 1 the shard
 * is the unit itself: no hook runs, nothing is gathered (FSDP's NO_SHARD
 * fallback). Under gradient accumulation every micro-step gathers and
 * reduce-scatters, the later ones through a transient of the unit's
 * slots added into the shard (docs/schedule.md).
 */
#include "config.h"

#include "engine/scheme.h"

static void zero3_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	(void)ctx;
	const struct zs_layout_unit *un = &r->layout.unit[u];
	run_alloc_full(r, ZS_BUF_GATHERED, un->off, un->n);
	run_gather_params_unit(r, u, ZS_BUF_GATHERED);
	if (pass == ZS_PASS_BACKWARD && un->tn > 0) /* none for a frozen unit (--freeze) */
		run_alloc_full(r, ZS_BUF_FULL_GRADS, un->tbase, un->tn);
}

static void zero3_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	(void)ctx;
	if (pass == ZS_PASS_BACKWARD) {
		tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
		run_reduce_scatter_unit_acc(r, u, ZS_BUF_FULL_GRADS);
		run_free_all(r, ZS_BUF_FULL_GRADS);
	}
	run_free_all(r, ZS_BUF_GATHERED);
}

const struct zs_scheme_ops scheme_zero3 = {
	.name = "zero3",
	.begin_unit = zero3_begin_unit,
	.end_unit = zero3_end_unit,
};
