/*
 * ZeRO-2 (P_os+g, ZeRO paper §5.2): grads and optimizer state sharded,
 * params full: Ψp + Ψ(g+k)/N. As the prototype does, backward materialises
 * the whole model's grads in a transient buffer, which is reduce-scattered
 * into the resident grad shard and freed; after the optimizer the params are
 * all-gathered. At N = 1 the shard is the full buffer: no transient.
 */
#include "config.h"

#include "engine/scheme.h"

static void zero2_begin_backward(struct zs_run *r)
{
	if (r->world > 1)
		run_alloc_all(r, RUN_FIELD(full_grads), ZS_CAT_FULL_GRADS, r->shape.nparams * r->esize);
}

static void zero2_reduce(struct zs_run *r)
{
	for (size_t u = 0; u < r->nunits; u++)
		run_reduce_scatter_unit(r, u, RUN_FIELD(full_grads), r->unit_off[u]);
	run_free_all(r, RUN_FIELD(full_grads));
}

const struct zs_scheme_ops scheme_zero2 = {
	.name = "zero2",
	.grads_sharded = 1,
	.state_sharded = 1,
	.begin_backward = zero2_begin_backward,
	.reduce = zero2_reduce,
	.after_optimizer = run_gather_params_in_place,
};
