/*
 * DP — plain data parallelism: every rank holds all params, grads and
 * optimizer state, Ψ(p+g+k) = 16Ψ bytes in mixed-precision Adam (ZeRO paper
 * §3.1), and all-reduces the grads after backward.
 */
#include "config.h"

#include "engine/scheme.h"

static void dp_reduce(struct zs_run *r)
{
	for (size_t u = 0; u < r->layout.nunits; u++)
		run_all_reduce_unit(r, u, ZS_BUF_GRADS);
}

const struct zs_scheme_ops scheme_dp = {
	.name = "dp",
	.reduce = dp_reduce,
};
