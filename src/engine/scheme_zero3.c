/*
 * ZeRO-3 (P_os+g+p, ZeRO paper §5.3): everything sharded, Ψ(p+g+k)/N.
 * Each unit's params are all-gathered before it runs, in forward and again
 * in backward, and freed after; in backward the unit's grads go to a
 * transient full buffer that is reduce-scattered into the shard and freed.
 * With unit=model the whole model is gathered at once (the prototype); with
 * unit=layer one layer at a time, as ZeRO-3 and FSDP do. At N = 1 the shard
 * is the unit itself: nothing is gathered (FSDP's NO_SHARD fallback).
 */
#include "config.h"

#include "engine/scheme.h"

static void zero3_begin_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	if (r->world == 1)
		return;
	run_alloc_all(r, RUN_FIELD(gathered), ZS_CAT_GATHERED, r->unit_n[u] * r->esize);
	run_gather_params_unit(r, u, RUN_FIELD(gathered), 0);
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_all(r, RUN_FIELD(full_grads), ZS_CAT_FULL_GRADS, r->unit_n[u] * r->esize);
}

static void zero3_end_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	if (r->world == 1)
		return;
	if (pass == ZS_PASS_BACKWARD) {
		tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
		run_reduce_scatter_unit(r, u, RUN_FIELD(full_grads), 0);
		run_free_all(r, RUN_FIELD(full_grads));
	}
	run_free_all(r, RUN_FIELD(gathered));
}

const struct zs_scheme_ops scheme_zero3 = {
	.name = "zero3",
	.params_sharded = 1,
	.grads_sharded = 1,
	.state_sharded = 1,
	.begin_unit = zero3_begin_unit,
	.end_unit = zero3_end_unit,
};
