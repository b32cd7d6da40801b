/*
 * DP — plain data parallelism: every rank holds all params, grads and
 * optimizer state, Ψ(p+g+k) = 16Ψ bytes in mixed-precision Adam (ZeRO paper
 * §3.1), and all-reduces the grads after backward. Under gradient
 * accumulation the full grads add up across the K micro-steps (the
 * driver's transient, engine.c) and are all-reduced once, after the last
 * (as DDP's no_sync(); docs/schedule.md).
 */
#include "config.h"

#include "engine/scheme.h"

static void dp_reduce(struct zs_run *r, void *ctx)
{
	(void)ctx;
	if (r->micro + 1 < r->nmicro)
		return; /* not the optimizer step's last micro-step */
	run_all_reduce_grads(r);
}

const struct zs_scheme_ops scheme_dp = {
	.name = "dp",
	.reduce = dp_reduce,
};
