/*
 * torch — PyTorch 1.13's implementations of the schemes (docs/schedule.md,
 * "Frameworks"), as hooks with a state of their own (DDP's buckets, FSDP's
 * kept units); their layout rows are zs_row's, their registry rows
 * scheme_registry.c's.
 *
 * zero1 is ZeroRedundancyOptimizer over DistributedDataParallel
 * (torch/distributed/optim/zero_redundancy_optimizer.py): the optimizer
 * state is whole tensors, each on the rank _partition_parameters gave it
 * (layout.h); DDP all-reduces the grads, each rank steps its own tensors,
 * and _sync_params broadcasts every tensor from its owner
 * (_broadcast_params_from_rank, one dist.broadcast per parameter, as
 * parameters_as_bucket_view=False does).
 *
 * dp is DistributedDataParallel (torch/nn/parallel/distributed.py): the
 * paper's dp, plus the reducer's gradient buckets. With its default
 * gradient_as_bucket_view=False every bucket is a flat buffer of its own
 * (reducer.cpp, initialize_buckets: bucket.gradients = at::empty(...)),
 * allocated when DDP is built and kept for the run, so a second
 * gradient-sized buffer is resident beside the grads. After backward each
 * grad is copied into its bucket (mark_variable_ready_dense), each bucket
 * is all-reduced, and the result copied back into the grads
 * (finalize_bucket_dense, copy_bucket_to_grad). The buckets are those
 * DDP rebuilds after the first iteration (rebuild_buckets): the tensors in
 * the order their gradients become ready, the reverse of model order,
 * through compute_bucket_assignment_by_size with the limits {1 MiB,
 * bucket_cap_mb}. zero1 runs over the same DDP. DDP builds its reducer at
 * any world size, so its buckets exist at N = 1 too, and it issues its
 * all-reduce on a group of one (counted as a call, coll.h).
 *
 * zero3 is FullyShardedDataParallel with FULL_SHARD
 * (torch/distributed/fsdp/fully_sharded_data_parallel.py): one FlatParameter
 * per unit, sharded as the paper's zero3 shards it (padded to N·ceil(n/N)),
 * gathered before the unit's forward and freed after it, gathered again for
 * its backward, its grads reduce-scattered (through the post-backward
 * hook's padded copy and output shard, post_backward below) and freed.
 * Except the root: FSDP does not free the root's parameters after forward
 * (forward(), "Do not free the root's parameters in the post-forward for
 * FULL_SHARD"), so the root's backward finds them gathered and sends no
 * second all-gather. With
 * unit=model the whole model is the root unit; with unit=layer each layer is
 * an FSDP unit and the root (the model around them) owns no parameter.
 * backward_prefetch is None by default in 1.13 (line 980): no unit is
 * gathered early. With --prefetch backward-pre (BACKWARD_PRE, torch 2.x's
 * default, with limit_all_gathers=True: at most two units gathered at once),
 * a unit's pre-backward hook gathers the next unit of backward before the
 * unit's gradients are computed, so two units are live in backward.
 *
 * zero2 is FSDP's SHARD_GRAD_OP: the same, but no unit is freed after its
 * forward (only FULL_SHARD frees there); each is kept until its backward is
 * done (_should_free_unsharded_flat_param), so backward sends no all-gather
 * and, at the first unit's backward, every unit is gathered at once.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/scheme.h"
#include "util/util.h"

/* dist._DEFAULT_FIRST_BUCKET_BYTES (reducer.hpp kDefaultFirstBucketBytes):
 * the first bucket's limit, before bucket_cap_mb applies. */
#define FIRST_BUCKET_BYTES 1048576

/* ------------------------------------------------------------------------- */
/* DDP (dp, and zero1 over it) */

/* A bucket: the layout's parameter tensors ntensors-1-first down to
 * ntensors-first-count (reverse model order, as gradients become ready),
 * n elements in all. */
struct ddp_bucket {
	size_t first, count, n;
};

/* DDP's state: its buckets, and each rank's flat grads of each, in
 * category buckets, for the whole run (block[(k - r0)·n + i]). */
struct ddp {
	size_t n;
	struct ddp_bucket *bucket; /* at most one a tensor */
	void **block;
};

static void **ddp_block(const struct zs_run *r, const struct ddp *d, unsigned k, size_t i)
{
	return &d->block[(size_t)(k - r->r0) * d->n + i];
}

/* compute_bucket_assignment_by_size over the tensors in gradient-ready
 * order (tensor_indices given: no sort): a tensor joins the open bucket,
 * which closes once it holds at least the current limit; the limit then
 * moves to the next of {first, cap} and stays at the last. */
static void ddp_buckets(const struct zs_run *r, struct ddp *d)
{
	const struct zs_layout *lo = &r->layout;
	size_t esize = r->esize[ZS_BUF_GRADS], limit = FIRST_BUCKET_BYTES, bytes = 0;
	size_t cap = (size_t)(r->config->bucket_cap_mb * 1024 * 1024); /* int(bucket_cap_mb * 1024 * 1024) */
	struct ddp_bucket *b = NULL;
	d->n = 0;
	for (size_t j = 0; j < lo->ntensors; j++) {
		if (b == NULL) {
			b = &d->bucket[d->n++];
			*b = (struct ddp_bucket){.first = j};
			bytes = 0;
		}
		size_t n = lo->tensor[lo->ntensors - 1 - j].n;
		b->count++;
		b->n += n;
		bytes += n * esize;
		if (bytes >= limit) {
			b = NULL;
			limit = cap;
		}
	}
}

static int ddp_setup(struct zs_run *r, void **ctx, char **cause)
{
	(void)cause;
	struct ddp *d = zs_calloc(1, sizeof *d);
	r->coll.one_rank_calls = 1;
	d->bucket = zs_calloc(r->layout.ntensors, sizeof *d->bucket);
	ddp_buckets(r, d);
	d->block = zs_calloc((size_t)(r->r1 - r->r0) * d->n, sizeof *d->block);
	for (size_t i = 0; i < d->n; i++)
		for (unsigned k = r->r0; k < r->r1; k++)
			*ddp_block(r, d, k, i) =
			        tracker_alloc(&r->tracker, k, ZS_CAT_BUCKETS, d->bucket[i].n * r->esize[ZS_BUF_GRADS]);
	*ctx = d;
	return 0;
}

static void ddp_teardown(struct zs_run *r, void *ctx)
{
	struct ddp *d = ctx;
	for (size_t i = 0; i < d->n; i++)
		for (unsigned k = r->r0; k < r->r1; k++)
			tracker_free(&r->tracker, k, *ddp_block(r, d, k, i));
	free(d->block);
	free(d->bucket);
	free(d);
}

/* Copy bucket b's grads of rank k in (to_bucket) or out, tensor by tensor
 * in the bucket's order. */
static void bucket_copy(struct zs_run *r, const struct ddp *d, unsigned k, size_t b, int to_bucket)
{
	const struct zs_layout *lo = &r->layout;
	size_t esize = r->esize[ZS_BUF_GRADS];
	char *at = *ddp_block(r, d, k, b);
	for (size_t j = d->bucket[b].first; j < d->bucket[b].first + d->bucket[b].count; j++) {
		const struct zs_layout_tensor *t = &lo->tensor[lo->ntensors - 1 - j];
		void *g = run_at(r, k, ZS_BUF_GRADS, t->off);
		if (to_bucket)
			memcpy(at, g, t->n * esize);
		else
			memcpy(g, at, t->n * esize);
		at += t->n * esize;
	}
}

/* The reducer's step: every grad into its bucket, each bucket all-reduced
 * in order, and back into the grads. */
static void ddp_reduce(struct zs_run *r, void *ctx)
{
	const struct ddp *d = ctx;
	for (size_t b = 0; b < d->n; b++) {
		for (unsigned k = r->r0; k < r->r1; k++) {
			bucket_copy(r, d, k, b, 1);
			r->ptr_a[k - r->r0] = *ddp_block(r, d, k, b);
		}
		coll_all_reduce(&r->coll, r->ptr_a, d->bucket[b].n, r->dt);
		for (unsigned k = r->r0; k < r->r1; k++)
			bucket_copy(r, d, k, b, 0);
	}
}

const struct zs_scheme_ops scheme_torch_dp = {
	.name = "torch dp",
	.setup = ddp_setup,
	.teardown = ddp_teardown,
	.reduce = ddp_reduce,
};

static void broadcast_from_owners(struct zs_run *r, void *ctx)
{
	(void)ctx;
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t i = 0; i < r->layout.ntensors; i++) {
		const struct zs_layout_tensor *t = &r->layout.tensor[i];
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_PARAMS, t->off);
		coll_broadcast(&r->coll, r->ptr_a, t->owner, t->n, r->dt);
	}
}

const struct zs_scheme_ops scheme_torch_zero1 = {
	.name = "torch zero1",
	.setup = ddp_setup,
	.teardown = ddp_teardown,
	.reduce = ddp_reduce,
	.after_optimizer = broadcast_from_owners,
};

/* ------------------------------------------------------------------------- */
/* FSDP (zero2: SHARD_GRAD_OP, zero3: FULL_SHARD; NO_SHARD at N = 1) */

/* FSDP's state: its backward prefetch, and each rank's copy of each unit
 * gathered and kept from its forward (or an early gather) until its
 * backward is done, in category gathered_params, NULL otherwise
 * (held[(k - r0)·nunits + u]). */
struct fsdp {
	enum zs_prefetch prefetch;
	size_t nunits;
	void **held;
};

static void **held_of(const struct zs_run *r, const struct fsdp *f, unsigned k, size_t u)
{
	return &f->held[(size_t)(k - r->r0) * f->nunits + u];
}

static int held(const struct zs_run *r, const struct fsdp *f, size_t u) { return *held_of(r, f, r->r0, u) != NULL; }

/* Whether unit u's params stay gathered from its forward into its
 * backward: every unit under SHARD_GRAD_OP, the root (the whole model as
 * one unit, unit=model) under FULL_SHARD. With unit=layer the root owns no
 * parameter, even when the model is one layer. */
static int kept(const struct zs_run *r, size_t u)
{
	return (r->ops->flags & ZS_OPS_KEEP_FORWARD) || (u == 0 && r->layout.mode == ZS_UNIT_MODEL);
}

/* Rank by rank, the unit just gathered into the gathered buffer becomes
 * unit u's kept copy. */
static void keep(struct zs_run *r, const struct fsdp *f, size_t u)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		*held_of(r, f, k, u) = run_rank(r, k)->buf[ZS_BUF_GATHERED];
		run_rank(r, k)->buf[ZS_BUF_GATHERED] = NULL;
	}
}

/* FSDP's MixedPrecision (param_dtype and reduce_dtype fp16) under
 * --precision mixed: the FlatParameter stays an fp32 shard and its grad an
 * fp32 shard (_cast_grad_to_param_dtype), which the optimizer steps (no
 * master copy: ZS_OPS_FP32_STATE); the working copy gathered for compute,
 * the grads computed and both collectives are fp16. */
static int low_precision(const struct zs_run *r) { return r->esize[ZS_BUF_PARAMS] != r->esize[ZS_BUF_GATHERED]; }

/* Unit u's gathered copy, FSDP's _full_param_padded: N·s_u elements
 * (flat_param.py line 698, _padded_unsharded_size), the unit's n_u first,
 * the padding zeroed as the all-gather from padded shards leaves it. */
static void alloc_gathered(struct zs_run *r, size_t u)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	size_t es = r->esize[ZS_BUF_GATHERED], padded = r->world * un->s;
	r->base[ZS_BUF_GATHERED] = un->off;
	for (unsigned k = r->r0; k < r->r1; k++) {
		char *g = tracker_alloc(&r->tracker, k, r->cat[ZS_BUF_GATHERED], padded * es);
		memset(g + un->n * es, 0, (padded - un->n) * es);
		run_rank(r, k)->buf[ZS_BUF_GATHERED] = g;
	}
}

/* Gather unit u into a transient full copy. In mixed precision each rank
 * first casts its fp32 shard into _mp_shard (flat_param.py,
 * _use_low_precision_shard: a 16-bit copy of its s_u slots, padding
 * included, category buckets: the all-gather's input), all-gathers from it
 * into the 16-bit copy and frees it (post_unshard,
 * _free_low_precision_sharded_param). At N = 1 (NO_SHARD) the 16-bit copy
 * is _mp_shard itself: the cast is all (coll.h's identity). */
static void gather_unit(struct zs_run *r, size_t u)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (!low_precision(r)) {
		alloc_gathered(r, u);
		run_gather_params_unit(r, u, ZS_BUF_GATHERED);
		return;
	}
	int shard = r->world > 1;
	for (unsigned k = r->r0; k < r->r1 && shard; k++) {
		struct zs_slice sl = layout_own(&r->layout, ZS_BUF_PARAMS, u, k);
		zs_half *mp = tracker_alloc(&r->tracker, k, ZS_CAT_BUCKETS, un->s * sizeof(zs_half));
		const float *src = run_at(r, k, ZS_BUF_PARAMS, sl.at);
		for (size_t i = 0; i < sl.count; i++)
			mp[i] = zs_float_to_half(src[i]);
		memset(mp + sl.count, 0, (un->s - sl.count) * sizeof(zs_half));
		r->ptr_a[k - r->r0] = mp;
	}
	alloc_gathered(r, u);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_slice sl = layout_own(&r->layout, ZS_BUF_PARAMS, u, k);
		zs_half *dst = (zs_half *)run_rank(r, k)->buf[ZS_BUF_GATHERED] + (sl.first - un->off);
		if (!shard) {
			const float *src = run_at(r, k, ZS_BUF_PARAMS, sl.at);
			for (size_t i = 0; i < sl.count; i++)
				dst[i] = zs_float_to_half(src[i]);
			r->ptr_a[k - r->r0] = dst;
		}
		r->ptr_b[k - r->r0] = run_rank(r, k)->buf[ZS_BUF_GATHERED];
	}
	coll_all_gather(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, un->n, r->dt);
	for (unsigned k = r->r0; k < r->r1 && shard; k++)
		tracker_free(&r->tracker, k, r->ptr_a[k - r->r0]);
}

/* NO_SHARD's reduction of unit u (N = 1, mixed precision only): its
 * all-reduce over one rank is the identity, so the fp16 grads are only
 * cast into the fp32 grads. */
static void reduce_no_shard(struct zs_run *r, size_t u)
{
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_slice sl = layout_own(&r->layout, ZS_BUF_GRADS, u, k);
		const zs_half *src = run_rank(r, k)->buf[ZS_BUF_FULL_GRADS];
		float *dst = run_at(r, k, ZS_BUF_GRADS, sl.at);
		for (size_t i = 0; i < sl.count; i++)
			dst[i] = zs_half_to_float(src[i]);
	}
}

/* Unit u's _post_backward_hook (fully_sharded_data_parallel.py lines
 * 3191-3353), rank by rank: the unit is resharded first (_reshard, line
 * 3232: its gathered copy freed); autograd's unsharded grad (the full
 * grads, n_u) is held by the hook's locals until it returns; F.pad makes
 * a padded copy of it, N·s_u elements, even when nothing is padded (line
 * 3296; constant_pad_nd allocates), and zeros_like(chunks[0]) the output
 * shard, s_u (line 3297); the reduce-scatter runs from the one into the
 * other (line 3298). In mixed precision _cast_grad_to_param_dtype (line
 * 3300) then casts the output to an fp32 s_u while the 16-bit one is still
 * live, and frees the 16-bit one; the fp32 shard is added into the grad
 * shard (_saved_grad_shard += output, line 3321: the grad shard was zeroed
 * by zero_grad, so the sum is a copy). All three are category buckets,
 * the reduce-scatter's own buffers, freed as the hook returns; the grad
 * reduced to 16 bits first (line 3263) is a no-op, reduce_dtype being
 * the grads' dtype. */
static void post_backward(struct zs_run *r, const struct fsdp *f, size_t u)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	size_t es = r->esize[ZS_BUF_FULL_GRADS], padded = r->world * un->s;
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
		tracker_free(&r->tracker, k, *held_of(r, f, k, u));
		*held_of(r, f, k, u) = NULL;
		char *pad = tracker_alloc(&r->tracker, k, ZS_CAT_BUCKETS, padded * es);
		memcpy(pad, rk->buf[ZS_BUF_FULL_GRADS], un->n * es);
		memset(pad + un->n * es, 0, (padded - un->n) * es);
		r->ptr_a[k - r->r0] = pad;
		r->ptr_b[k - r->r0] = tracker_alloc(&r->tracker, k, ZS_CAT_BUCKETS, un->s * es);
		memset(r->ptr_b[k - r->r0], 0, un->s * es);
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, un->n, r->dt);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_slice sl = layout_own(&r->layout, ZS_BUF_GRADS, u, k);
		void *out = r->ptr_b[k - r->r0];
		if (low_precision(r)) {
			float *out32 = tracker_alloc(&r->tracker, k, ZS_CAT_BUCKETS, un->s * sizeof(float));
			for (size_t i = 0; i < un->s; i++)
				out32[i] = zs_half_to_float(((const zs_half *)out)[i]);
			tracker_free(&r->tracker, k, out);
			out = out32;
		}
		memcpy(run_at(r, k, ZS_BUF_GRADS, sl.at), out, sl.count * r->esize[ZS_BUF_GRADS]);
		tracker_free(&r->tracker, k, out);
		tracker_free(&r->tracker, k, r->ptr_a[k - r->r0]);
	}
	run_free_all(r, ZS_BUF_FULL_GRADS);
}

static int fsdp_setup(struct zs_run *r, void **ctx, char **cause)
{
	(void)cause;
	struct fsdp *f = zs_calloc(1, sizeof *f);
	f->prefetch = r->config->prefetch;
	f->nunits = r->layout.nunits;
	f->held = zs_calloc((size_t)(r->r1 - r->r0) * f->nunits, sizeof *f->held);
	*ctx = f;
	return 0;
}

static void fsdp_teardown(struct zs_run *r, void *ctx)
{
	struct fsdp *f = ctx;
	for (unsigned k = r->r0; k < r->r1; k++)
		for (size_t u = 0; u < f->nunits; u++)
			tracker_free(&r->tracker, k, *held_of(r, f, k, u));
	free(f->held);
	free(f);
}

/* Forward gathers the unit. Backward finds it kept (SHARD_GRAD_OP, the
 * root) or prefetched, or gathers it; with BACKWARD_PRE it then gathers
 * the next unit of backward, u - 1, unless that one is kept, before u's
 * gradients are computed: two units live. The copies of backward are kept
 * until the unit's post-backward. A tied layer's visit of a unit (the
 * forward pass's hooks, in forward or backward) finds it kept, or gathers
 * it for the visit alone. */
static void fsdp_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	const struct fsdp *f = ctx;
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (pass == ZS_PASS_FORWARD) {
		if (!held(r, f, u))
			gather_unit(r, u);
		return;
	}
	if (!held(r, f, u)) {
		gather_unit(r, u);
		keep(r, f, u);
	}
	if (f->prefetch == ZS_PREFETCH_BACKWARD_PRE && u > 0 && !held(r, f, u - 1)) {
		gather_unit(r, u - 1);
		keep(r, f, u - 1);
	}
	run_alloc_full(r, ZS_BUF_FULL_GRADS, un->off, un->n);
}

static void fsdp_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	const struct fsdp *f = ctx;
	if (pass == ZS_PASS_BACKWARD)
		post_backward(r, f, u);
	else if (held(r, f, u)) /* a visit found it kept: nothing was gathered */
		return;
	else if (kept(r, u))
		keep(r, f, u);
	else
		run_free_all(r, ZS_BUF_GATHERED);
}

/* A layer of a unit kept gathered reads its params from the kept copy;
 * its grads are where the driver puts them. */
static int fsdp_place(const struct zs_run *r, const void *ctx, unsigned k, size_t l, enum zs_pass pass,
                      struct zs_layer_io *io)
{
	size_t u = run_unit_of(r, l);
	const char *h = *held_of(r, ctx, k, u);
	if (h == NULL)
		return 0;
	const struct zs_layer *rd = net_reads(&r->model, l);
	size_t e = rd->param_off;
	for (size_t i = 0; i < rd->nptensors; e += rd->ptensor[i++])
		io->w[i] = h + (e - r->layout.unit[u].off) * r->esize[ZS_BUF_GATHERED];
	run_layer_grads(r, k, l, pass, io);
	return 1;
}

/* NO_SHARD, FSDP at N = 1: in fp32 nothing to do (the N = 1 rule); in
 * mixed precision the fp16 working copy of each unit and its fp16 grads,
 * cast from and into the full fp32 FlatParameter and grad. */
static void no_shard_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	(void)ctx;
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (!low_precision(r))
		return;
	gather_unit(r, u);
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, un->off, un->n);
}

static void no_shard_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	(void)ctx;
	if (!low_precision(r))
		return;
	if (pass == ZS_PASS_BACKWARD) {
		reduce_no_shard(r, u);
		run_free_all(r, ZS_BUF_FULL_GRADS);
	}
	run_free_all(r, ZS_BUF_GATHERED);
}

const struct zs_scheme_ops scheme_torch_no_shard = {
	.name = "torch NO_SHARD",
	.flags = ZS_OPS_FP32_STATE,
	.begin_unit = no_shard_begin_unit,
	.end_unit = no_shard_end_unit,
};

const struct zs_scheme_ops scheme_torch_zero3 = {
	.name = "torch zero3",
	.flags = ZS_OPS_FP32_STATE,
	.setup = fsdp_setup,
	.teardown = fsdp_teardown,
	.begin_unit = fsdp_begin_unit,
	.end_unit = fsdp_end_unit,
	.place = fsdp_place,
};

const struct zs_scheme_ops scheme_torch_zero2 = {
	.name = "torch zero2",
	.flags = ZS_OPS_FP32_STATE | ZS_OPS_KEEP_FORWARD,
	.setup = fsdp_setup,
	.teardown = fsdp_teardown,
	.begin_unit = fsdp_begin_unit,
	.end_unit = fsdp_end_unit,
	.place = fsdp_place,
};

/* DDP's buckets, Ψ·g. */
double scheme_ddp_bound(const struct zs_config *c, const struct zs_layout *lo)
{
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	return (double)(lo->nparams * g);
}

/* FSDP's reduce-scatter and all-gather buffers, one unit's at a time: its
 * padded grads, N·s_u <= n_u + N - 1 <= 2Ψ elements (N <= Ψ + 1), and at
 * most three shards of it, 2 + g + 4 bytes a slot. */
double scheme_fsdp_bound(const struct zs_config *c, const struct zs_layout *lo)
{
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	return (double)(lo->nparams * (3 * g + 6));
}
