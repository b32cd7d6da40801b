/*
 * torch — PyTorch 1.13's implementations of the schemes (docs/schedule.md,
 * "Frameworks"), as hooks; their rows are zs_row's.
 *
 * zero1 is ZeroRedundancyOptimizer over DistributedDataParallel
 * (torch/distributed/optim/zero_redundancy_optimizer.py): the optimizer
 * state is whole tensors, each on the rank _partition_parameters gave it
 * (layout.h); DDP all-reduces the grads, each rank steps its own tensors,
 * and _sync_params broadcasts every tensor from its owner
 * (_broadcast_params_from_rank, one dist.broadcast per parameter, as
 * parameters_as_bucket_view=False does). dp is DDP: the paper's dp hooks.
 */
#include "config.h"

#include "engine/scheme.h"

static void broadcast_from_owners(struct zs_run *r)
{
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t i = 0; i < r->layout.ntensors; i++) {
		const struct zs_layout_tensor *t = &r->layout.tensor[i];
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_PARAMS, t->off);
		coll_broadcast(&r->coll, r->ptr_a, t->owner, t->n, r->dt);
	}
}

static const struct zs_scheme_ops torch_zero1 = {
	.name = "torch zero1",
	.reduce = run_all_reduce_grads,
	.after_optimizer = broadcast_from_owners,
};

static const struct zs_scheme_ops *const paper[ZS_NSCHEMES] = {
	&scheme_dp, &scheme_zero1, &scheme_zero2, &scheme_zero3,
};

const struct zs_scheme_ops *scheme_ops(enum zs_framework fw, enum zs_scheme scheme)
{
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO1)
		return &torch_zero1;
	return paper[scheme];
}
