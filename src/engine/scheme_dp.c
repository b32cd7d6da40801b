/*
 * DP — plain data parallelism: every rank holds all params, grads and
 * optimizer state, Ψ(p+g+k) = 16Ψ bytes in mixed-precision Adam (ZeRO paper
 * §3.1), and all-reduces the grads after backward.
 */
#include "config.h"

#include "engine/scheme.h"

static void dp_reduce(struct zs_run *r)
{
	for (size_t u = 0; u < r->nunits; u++) {
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_a[k - r->r0] = run_elem(r, r->rank[k].grads, r->unit_off[u]);
		coll_all_reduce(&r->coll, r->ptr_a, r->unit_n[u], r->dt);
	}
}

const struct zs_scheme_ops scheme_dp = {
	.name = "dp",
	.reduce = dp_reduce,
};
