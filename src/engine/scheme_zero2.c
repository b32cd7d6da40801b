/*
 * ZeRO-2 (P_os+g, ZeRO paper §5.2): grads and optimizer state sharded,
 * params full: Ψp + Ψ(g+k)/N. As docs/schedule.md says, backward materialises
 * the whole model's grads in a transient buffer, which is reduce-scattered
 * into the resident grad shard and freed; after the optimizer the params are
 * all-gathered. At N = 1 the shard is the full buffer: no transient.
 * Under gradient accumulation every micro-step reduce-scatters, the later
 * ones through a transient of the unit's slots added into the shard
 * (docs/schedule.md).
 */
#include "config.h"

#include "engine/scheme.h"

static int zero2_begin_backward(struct zs_run *r, void *ctx, char **cause)
{
	(void)ctx, (void)cause;
	run_alloc_full(r, ZS_BUF_FULL_GRADS, 0, r->layout.ntrain); /* --freeze: the trainable elements */
	return 0;
}

static void zero2_reduce(struct zs_run *r, void *ctx)
{
	(void)ctx;
	for (size_t u = 0; u < r->layout.nunits; u++)
		run_reduce_scatter_unit_acc(r, u, ZS_BUF_FULL_GRADS);
	run_free_all(r, ZS_BUF_FULL_GRADS);
}

const struct zs_scheme_ops scheme_zero2 = {
	.name = "zero2",
	.begin_backward = zero2_begin_backward,
	.reduce = zero2_reduce,
	.after_optimizer = run_gather_params_after_step,
};
