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
 *
 * zero3 is FullyShardedDataParallel with FULL_SHARD
 * (torch/distributed/fsdp/fully_sharded_data_parallel.py): one FlatParameter
 * per unit, sharded as the paper's zero3 shards it (padded to N·ceil(n/N)),
 * gathered before the unit's forward and freed after it, gathered again for
 * its backward, its grads reduce-scattered and freed. Except the root: FSDP
 * does not free the root's parameters after forward (forward(), "Do not free
 * the root's parameters in the post-forward for FULL_SHARD"), so the root's
 * backward finds them gathered and sends no second all-gather. With
 * unit=model the whole model is the root unit; with unit=layer each layer is
 * an FSDP unit and the root (the model around them) owns no parameter.
 * backward_prefetch is None by default in 1.13: no unit is gathered early.
 *
 * zero2 is FSDP's SHARD_GRAD_OP: the same, but no unit is freed after its
 * forward (only FULL_SHARD frees there); each is kept until its backward is
 * done (_should_free_unsharded_flat_param), so backward sends no all-gather
 * and, at the first unit's backward, every unit is gathered at once.
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

static const struct zs_scheme_ops torch_zero2;

/* Whether unit u's params stay gathered from its forward into its
 * backward: every unit under SHARD_GRAD_OP, the root (the whole model as
 * one unit) under FULL_SHARD. */
static int kept(const struct zs_run *r, size_t u)
{
	return r->ops == &torch_zero2 || (u == 0 && r->layout.nunits == 1);
}

static void fsdp_begin_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (pass == ZS_PASS_FORWARD || !kept(r, u)) {
		run_alloc_full(r, ZS_BUF_GATHERED, un->off, un->n);
		run_gather_params_unit(r, u, ZS_BUF_GATHERED);
	}
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, un->off, un->n);
}

static void fsdp_end_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	if (pass == ZS_PASS_FORWARD && kept(r, u)) {
		for (unsigned k = r->r0; k < r->r1; k++) { /* the rank keeps it as unit u's */
			run_rank(r, k)->held[u] = run_rank(r, k)->buf[ZS_BUF_GATHERED];
			run_rank(r, k)->buf[ZS_BUF_GATHERED] = NULL;
		}
		return;
	}
	if (pass == ZS_PASS_BACKWARD) {
		tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
		run_reduce_scatter_unit(r, u, ZS_BUF_FULL_GRADS);
		run_free_all(r, ZS_BUF_FULL_GRADS);
	}
	run_free_all(r, ZS_BUF_GATHERED);
	for (unsigned k = r->r0; k < r->r1 && pass == ZS_PASS_BACKWARD; k++) {
		tracker_free(&r->tracker, k, run_rank(r, k)->held[u]);
		run_rank(r, k)->held[u] = NULL;
	}
}

static const struct zs_scheme_ops torch_zero3 = {
	.name = "torch zero3",
	.begin_unit = fsdp_begin_unit,
	.end_unit = fsdp_end_unit,
};

static const struct zs_scheme_ops torch_zero2 = {
	.name = "torch zero2",
	.begin_unit = fsdp_begin_unit,
	.end_unit = fsdp_end_unit,
};

static const struct zs_scheme_ops *const paper[ZS_NSCHEMES] = {
	&scheme_dp, &scheme_zero1, &scheme_zero2, &scheme_zero3,
};

const struct zs_scheme_ops *scheme_ops(enum zs_framework fw, enum zs_scheme scheme)
{
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO1)
		return &torch_zero1;
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO3)
		return &torch_zero3;
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO2)
		return &torch_zero2;
	if (fw == ZS_FW_DEEPSPEED && scheme_deepspeed_ops(scheme) != NULL)
		return scheme_deepspeed_ops(scheme);
	return paper[scheme];
}
