/*
 * ZeRO-1 (P_os, ZeRO paper §5.1): the optimizer state is sharded, params
 * and grads are full: Ψ(p+g) + Ψk/N. Grads are reduce-scattered in place
 * (each rank's own slots receive the mean), each rank updates its slots,
 * and the fp16 params are all-gathered. Under gradient accumulation the
 * full grads add up across the K micro-steps and are reduce-scattered
 * once, after the last, as dp's (docs/schedule.md).
 */
#include "config.h"

#include "engine/scheme.h"

static void zero1_reduce(struct zs_run *r, void *ctx)
{
	(void)ctx;
	if (r->micro + 1 < r->nmicro)
		return; /* not the optimizer step's last micro-step */
	for (size_t u = 0; u < r->layout.nunits; u++)
		run_reduce_scatter_unit(r, u, ZS_BUF_GRADS);
}

const struct zs_scheme_ops scheme_zero1 = {
	.name = "zero1",
	.reduce = zero1_reduce,
	.after_optimizer = run_gather_params_after_step,
};
