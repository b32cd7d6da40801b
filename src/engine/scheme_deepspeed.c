/*
 * deepspeed — DeepSpeed's ZeRO-1 and ZeRO-2 (deepspeed/runtime/zero/
 * stage_1_and_2.py, DeepSpeedZeroOptimizer, at 38327e0; docs/schedule.md,
 * "DeepSpeed"), as hooks with a state of their own (struct ds below); their
 * layout rows are zs_row's (params full, the reduced grads and the
 * optimizer state partitioned), their registry rows scheme_registry.c's.
 * dp is the paper's dp.
 *
 * With contiguous_gradients (DeepSpeed's default, on), backward() allocates
 * the reduce bucket, ipg_buffer, at reduce_bucket_size elements of the grad
 * type whatever the model, and a second one with overlap_comm (lines
 * 2049-2060). Grads are copied into it (reduce_independent_p_g_buckets_and_
 * remove_grads, 939-970); when the next one would not fit, the bucket is
 * reduced to the ranks that own each part (reduce_ipg_grads, 1372-1417) and
 * filled again (the other buffer with overlap_comm); a grad larger than the
 * bucket is reduced from where it is. What a rank owns is copied into its
 * partition of the grads (copy_grads_in_partition, 1329-1357). The
 * epilogue reduces what is left and drops the buckets (764-807).
 * ZeRO-2 does this from backward hooks, as each grad is ready; ZeRO-1
 * (partition_gradients off, no hooks without overlap_comm) after backward,
 * from the model's full grads (reduce_gradients, 706-725).
 *
 * Here a grad is a unit's (the engine's backward writes a unit at a time):
 * unit=model is one optimizer param group, unit=layer one per layer. The
 * bucket is mapped at its full size and counted at it (tracker_alloc_mapped):
 * the pages a small model never writes are never faulted in.
 *
 * step() (1826-1960) flattens each rank's fp16 grad partition and converts
 * it to fp32 (.to(float32): in mixed precision a flat fp16 copy, then the
 * fp32 one; in fp32 the flat copy is already fp32), steps the optimizer on
 * that fp32 gradient partition, drops it, copies the fp32 master partition
 * into the fp16 params and all-gathers them (all_gather_dp_groups,
 * runtime/utils.py 965-1000; with all_gather_into_tensor, which every
 * torch with NCCL has, one call per group and allgather_bucket_size is not
 * used, 967-968). The master partition exists in fp32 too (a clone of the
 * partition, 396-403).
 *
 * Gradient accumulation (ZeRO-2, gradient_accumulation_steps K, the
 * driver's micro-steps): every micro-step reduces as above; one after the
 * first reduces into a new partition and its epilogue adds that into the
 * kept one (independent_gradient_partition_epilogue, 783-797). ZeRO-1 and
 * dp (no partition_gradients) reduce only at the boundary (engine.py's
 * allreduce_gradients, 2048-2062): autograd's grads stay in .grad across
 * the micro-steps, and a micro-step after the first adds its grads into
 * them (fresh_begin below); ZeRO-1's bucket is made again by every
 * micro-step's backward and released at the boundary only.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scheme.h"
#include "engine/tfm.h"
#include "util/ds_coord.h"
#include "util/util.h"

/* DeepSpeed's reduce bucket as the step fills it: elements used, the
 * buffer in use, and the grads copied into it and not yet reduced (units;
 * tensors under ZeRO-3), each with the element of the bucket it starts
 * at. */
struct ds_bucket {
	size_t used, count;
	size_t *entry, *at; /* room for every tensor and unit */
	unsigned index;
};

/* A rank's buffers of DeepSpeed's own, each NULL outside the part of the
 * run that holds it: its reduce buckets (ipg_buffer, two with
 * overlap_comm); the fp32 gradient partition the optimizer steps on (the
 * grads buffer itself when offloaded); ZeRO-Offload's device and host grad
 * buffers; and ZeRO-3's: each parameter tensor's gathered copy (param.data,
 * in category gathered_params, NULL while it is only partitioned),
 * autograd's grad of a tensor larger than the bucket kept past its module,
 * and reduce_scatter_coalesced's flat copy and paddings. */
struct ds_rank {
	void *bucket[2];
	void *acc; /* ZeRO-2, micro-steps after the first: their reduced grads (a new grads_in_partition) */
	void *fresh; /* ZeRO-1 and dp, micro-steps after the first: a unit's new grads, added into .grad */
	float *grad32;
	void *offload_tmp[2];
	void **whole;
	void *held_grad;
	void *flat, *pad;
	void *starved; /* ZeRO-1/2: the epilogue's zeros for the experts it starved (ds_coord_starved), to step() */
	double grad_norm;       /* ZeRO-3's step(): the grads' 2-norm (grad_norms) */
	unsigned char overflow; /* and whether they hold an inf or a nan (overflow_check) */
};

struct ds3;

/* The state: the ranks' buffers ([k - r0]), the bucket, and ZeRO-3's
 * coordinator (NULL for stages 1 and 2). */
struct ds {
	struct ds_rank *rank;
	struct ds_bucket bucket;
	struct ds3 *ds3;
	size_t fresh_off; /* the element of the params fresh's unit starts at */
	int partitions;   /* ZeRO-2: a later micro-step reduces into a new partition (acc) */
	/* A mixture under ZeRO-1/2 where its starved experts are followed
	 * (ds_coord_starved_built): its description, and the steps reduced. */
	struct step_params *moe;
	size_t reduced;
};

static struct ds_rank *ds_rank(const struct zs_run *r, const struct ds *d, unsigned k) { return &d->rank[k - r->r0]; }

/* The state both stages start from: no buffer yet. */
static struct ds *ds_new(const struct zs_run *r)
{
	struct ds *d = zs_calloc(1, sizeof *d);
	size_t n = r->layout.ntensors + r->layout.nunits;
	d->rank = zs_calloc(r->r1 - r->r0, sizeof *d->rank);
	d->bucket.entry = zs_calloc(n, sizeof *d->bucket.entry);
	d->bucket.at = zs_calloc(n, sizeof *d->bucket.at);
	return d;
}

static void ds_free(struct ds *d)
{
	if (d->moe != NULL)
		step_params_free(d->moe);
	free(d->moe);
	free(d->bucket.entry);
	free(d->bucket.at);
	free(d->rank);
	free(d);
}

static size_t bucket_elements(const struct zs_run *r) { return (size_t)r->config->ds_reduce_bucket; }

static int offloaded(const struct zs_run *r) { return r->config->offload == ZS_OFFLOAD_OPTIMIZER; }

/* ZeRO-Offload (cpu_offload): the fp32 partition, the optimizer state and
 * the fp32 gradient partition (kept between steps, initialize_optimizer_
 * states 682-693: the grads buffer here, fp32) in host memory; two
 * zeroed buffers of the largest tensor's grads, one on the host and one on
 * the device (temp_grad_buffer_for_cpu_offload and _for_gpu_offload,
 * 477-485; used only with gradient accumulation, which zerosim does not
 * run offloaded). Its size is largest_param_numel over bit16_groups
 * (452-461), the requires_grad parameters (304-315): --freeze, the
 * largest tensor inside its unit's trainable run. */
static size_t largest_tensor(const struct zs_layout *lo)
{
	size_t m = 0;
	for (size_t i = 0; i < lo->ntensors; i++) {
		const struct zs_layout_tensor *t = &lo->tensor[i];
		const struct zs_layout_unit *un = &lo->unit[t->unit];
		if (t->off >= un->toff && t->off + t->n <= un->toff + un->tn && t->n > m)
			m = t->n;
	}
	return m;
}

static void buffers(struct zs_run *r)
{
	if (!offloaded(r))
		return;
	r->host[ZS_BUF_MASTER] = r->host[ZS_BUF_M] = r->host[ZS_BUF_V] = r->host[ZS_BUF_GRADS] = 1;
	r->esize[ZS_BUF_GRADS] = sizeof(float);
	r->cat[ZS_BUF_GRADS] = ZS_CAT_GRAD32;
}

static int setup(struct zs_run *r, void **ctx, char **cause)
{
	(void)cause;
	struct ds *d = ds_new(r);
	*ctx = d;
	enum zs_scheme sc = r->ops == &scheme_ds_zero1 ? ZS_ZERO1 : r->ops == &scheme_ds_zero2 ? ZS_ZERO2 : ZS_ZERO3;
	if (r->routing != NULL && ds_coord_starved_built(r->config, sc, r->world)) {
		struct zs_model shape;
		tfm_dims_shape(&shape, &r->config->tfm->dims); /* the shape the net was built from */
		d->moe = zs_calloc(1, sizeof *d->moe);
		step_params_build(d->moe, &shape);
		step_params_freeze(d->moe, r->config->freeze);
	}
	if (r->config->offload != ZS_OFFLOAD_OPTIMIZER)
		return 0;
	size_t bytes = largest_tensor(&r->layout) * coll_dtype_size(r->dt);
	enum zs_cat cat = r->dt == ZS_F16 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, d, k);
		rk->offload_tmp[0] = tracker_alloc(&r->tracker, k, cat, bytes);
		rk->offload_tmp[1] = tracker_alloc_host(&r->tracker, k, cat, bytes);
		memset(rk->offload_tmp[0], 0, bytes);
		memset(rk->offload_tmp[1], 0, bytes);
	}
	return 0;
}

static void free_buckets(struct zs_run *r, struct ds *d)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		for (int i = 0; i < 2; i++) {
			tracker_free(&r->tracker, k, ds_rank(r, d, k)->bucket[i]);
			ds_rank(r, d, k)->bucket[i] = NULL;
		}
}

/* Whatever the step holds when the run ends (or a hook failed): every
 * buffer of the stages' own. */
static void teardown(struct zs_run *r, void *ctx)
{
	struct ds *d = ctx;
	free_buckets(r, d);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, d, k);
		for (int i = 0; i < 2; i++)
			tracker_free(&r->tracker, k, rk->offload_tmp[i]);
		tracker_free(&r->tracker, k, rk->acc);
		tracker_free(&r->tracker, k, rk->fresh);
		tracker_free(&r->tracker, k, rk->starved);
		if (!offloaded(r)) /* offloaded, grad32 is the grads buffer */
			tracker_free(&r->tracker, k, rk->grad32);
	}
	ds_free(d);
}

/* Every rank's buckets are mapped, untouched; the address space (or
 * ulimit -v, or the map count) can still run out: then the buckets
 * mapped so far are unmapped and the run fails with the cause. */
static int alloc_buckets(struct zs_run *r, struct ds *d, char **cause)
{
	size_t bytes = bucket_elements(r) * r->esize[ZS_BUF_FULL_GRADS];
	unsigned nb = d->ds3 != NULL ? 1 : 1 + (unsigned)r->config->ds_overlap_comm; /* stage 3 has one */
	for (unsigned k = r->r0; k < r->r1; k++)
		for (unsigned i = 0; i < nb; i++) {
			ds_rank(r, d, k)->bucket[i] = tracker_alloc_mapped(&r->tracker, k, ZS_CAT_BUCKETS, bytes);
			if (ds_rank(r, d, k)->bucket[i] != NULL)
				continue;
			int err = errno;
			free_buckets(r, d);
			return zs_fail(cause, "cannot map DeepSpeed's reduce bucket %u of rank %u of %u (%zu bytes, %u a "
			               "rank, %.4g bytes in all): %s (the address space, ulimit -v or vm.max_map_count); "
			               "give a smaller --ds-reduce-bucket or --world", i + 1, k, r->world, bytes, nb,
			               (double)bytes * nb * r->world, strerror(err));
		}
	d->bucket.used = d->bucket.count = 0;
	d->bucket.index = 0;
	return 0;
}

/* Reduce unit u's grads, rank k's at src[k - r0], into the partitions
 * that own them. One rank keeps its own: a copy, no collective (coll.h's
 * N = 1 rule). In a micro-step after the first (--grad-accum) they go to a
 * new partition, made at the micro-step's first reduction as
 * copy_grads_in_partition makes grads_in_partition (1343-1355). */
static void reduce_unit(struct zs_run *r, struct ds *d, size_t u, void *const *src)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	if (offloaded(r)) { /* in place, then each rank's slots to its host fp32 partition (--freeze: the trainable run's) */
		size_t esz = coll_dtype_size(r->dt);
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_b[k - r->r0] = (char *)src[k - r->r0] + (size_t)k * un->ts * esz;
		coll_reduce_scatter(&r->coll, (const void *const *)src, r->ptr_b, un->tn, r->dt);
		for (unsigned k = r->r0; k < r->r1; k++) {
			struct zs_slice own = layout_own(&r->layout, ZS_BUF_GRADS, u, k);
			float *to = run_at(r, k, ZS_BUF_GRADS, own.at);
			for (size_t i = 0; i < own.count; i++)
				to[i] = r->dt == ZS_F16 ? zs_half_to_float(((const zs_half *)r->ptr_b[k - r->r0])[i])
				                        : ((const float *)r->ptr_b[k - r->r0])[i];
		}
		return;
	}
	if (d->partitions && r->micro > 0 && ds_rank(r, d, r->r0)->acc == NULL) /* the micro-step's first reduction */
		for (unsigned k = r->r0; k < r->r1; k++)
			ds_rank(r, d, k)->acc = tracker_alloc(&r->tracker, k, r->cat[ZS_BUF_GRADS],
			                                      layout_len(&r->layout, ZS_BUF_GRADS) * r->esize[ZS_BUF_GRADS]);
	for (unsigned k = r->r0; k < r->r1; k++) {
		size_t at = layout_own(&r->layout, ZS_BUF_GRADS, u, k).at;
		void *acc = ds_rank(r, d, k)->acc;
		r->ptr_b[k - r->r0] = acc != NULL ? (char *)acc + at * r->esize[ZS_BUF_GRADS] : run_at(r, k, ZS_BUF_GRADS, at);
	}
	coll_reduce_scatter(&r->coll, (const void *const *)src, r->ptr_b, un->tn, r->dt); /* --freeze: the trainable run */
}

/* to[i] += from[i] for n grads of esz bytes, in the grads' own type (an
 * fp16 add_ computed in float and rounded, as CUDA's is). */
static void add_grads(void *to, const void *from, size_t n, size_t esz)
{
	for (size_t i = 0; i < n && esz == sizeof(float); i++)
		((float *)to)[i] += ((const float *)from)[i];
	for (size_t i = 0; i < n && esz != sizeof(float); i++)
		((zs_half *)to)[i] = zs_float_to_half(zs_half_to_float(((const zs_half *)to)[i]) +
		                                      zs_half_to_float(((const zs_half *)from)[i]));
}

/* ZeRO-2 with gradient_accumulation_steps K > 1, a micro-step after the
 * first: its reduced partition added into the partition kept since the
 * first (independent_gradient_partition_epilogue, stage_1_and_2.py
 * 783-799: averaged_gradients, views of the first micro-step's
 * grads_in_partition, .add_ the new one's, in the grads' own type), and
 * the new one freed (_release_ipg_buffers, 676-680). */
static void accumulate(struct zs_run *r, struct ds *d)
{
	const struct zs_layout *lo = &r->layout;
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, d, k);
		if (rk->acc == NULL)
			continue;
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			void *to = run_at(r, k, ZS_BUF_GRADS, g.at);
			const void *from = (const char *)rk->acc + g.at * r->esize[ZS_BUF_GRADS];
			add_grads(to, from, g.count, r->esize[ZS_BUF_GRADS]);
		}
		tracker_free(&r->tracker, k, rk->acc);
		rk->acc = NULL;
	}
}

static void *bucket_at(const struct zs_run *r, const struct ds *d, unsigned k, size_t at)
{
	return (char *)ds_rank(r, d, k)->bucket[d->bucket.index] + at * r->esize[ZS_BUF_FULL_GRADS];
}

/* reduce_ipg_grads: every unit waiting in the bucket. */
static void flush(struct zs_run *r, struct ds *d)
{
	struct ds_bucket *b = &d->bucket;
	for (size_t i = 0; i < b->count; i++) {
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_a[k - r->r0] = bucket_at(r, d, k, b->at[i]);
		reduce_unit(r, d, b->entry[i], r->ptr_a);
	}
	b->used = b->count = 0;
}

/* Unit u's grads, in the full grads buffer, into the bucket. */
static void add_unit(struct zs_run *r, struct ds *d, size_t u)
{
	struct ds_bucket *b = &d->bucket;
	const struct zs_layout_unit *un = &r->layout.unit[u];
	size_t esz = r->esize[ZS_BUF_FULL_GRADS], n = un->tn; /* --freeze: its trainable run (a frozen unit none) */
	if (n == 0) /* hooks on requires_grad params only (stage_1_and_2.py 904-908) */
		return;
	if (b->used + n > bucket_elements(r)) {
		flush(r, d);
		b->index ^= (unsigned)r->config->ds_overlap_comm; /* the other buffer */
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_FULL_GRADS, un->tbase - r->base[ZS_BUF_FULL_GRADS]);
	if (n > bucket_elements(r)) { /* extra_large_param_to_reduce */
		reduce_unit(r, d, u, r->ptr_a);
		return;
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		memcpy(bucket_at(r, d, k, b->used), r->ptr_a[k - r->r0], n * esz);
	b->entry[b->count] = u;
	b->at[b->count++] = b->used;
	b->used += n;
}

/* --grad-accum K under ZeRO-1 and dp: .grad (ZeRO-1's full grads, dp's
 * grads) holds the grads of every micro-step so far. A micro-step after
 * the first computes unit u's grads into a new block (AccumulateGrad's
 * new_grad: with a .grad and GradMode off it runs `variable_grad +=
 * new_grad` in place, torch/csrc/autograd/functions/accumulate_grad.h;
 * docs/schedule.md, "Gradient accumulation over the PyTorch step"), adds
 * it in the grads' type and frees it as the unit's backward ends. A unit's
 * grads at a time, as ZeRO-2's (autograd's are a tensor's). */
static enum zs_rankbuf kept_grads(const struct zs_run *r)
{
	return run_rank(r, r->r0)->buf[ZS_BUF_FULL_GRADS] != NULL ? ZS_BUF_FULL_GRADS : ZS_BUF_GRADS;
}

static void fresh_begin(struct zs_run *r, struct ds *d, size_t u, enum zs_pass pass)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (r->micro == 0 || pass != ZS_PASS_BACKWARD || un->tn == 0) /* --freeze: a frozen unit has none */
		return;
	d->fresh_off = un->toff;
	for (unsigned k = r->r0; k < r->r1; k++)
		ds_rank(r, d, k)->fresh = tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, un->tn * r->esize[kept_grads(r)]);
}

static void fresh_end(struct zs_run *r, struct ds *d, size_t u, enum zs_pass pass)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	enum zs_rankbuf g = kept_grads(r);
	if (ds_rank(r, d, r->r0)->fresh == NULL || pass != ZS_PASS_BACKWARD)
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, d, k);
		add_grads(run_at(r, k, g, un->tbase - r->base[g]), rk->fresh, un->tn, r->esize[g]);
		tracker_free(&r->tracker, k, rk->fresh);
		rk->fresh = NULL;
	}
}

/* Layer l's params where the run holds them and, while a unit's new grads
 * are being computed, its grads there (a tied layer computes none). */
static int fresh_place(const struct zs_run *r, const void *ctx, unsigned k, size_t l, enum zs_pass pass,
                       struct zs_layer_io *io)
{
	const struct ds *d = ctx;
	const struct ds_rank *rk = &d->rank[k - r->r0];
	const struct zs_layer *rd = net_reads(&r->model, l);
	const struct zs_layout_unit *un = &r->layout.unit[run_unit_of(r, l)];
	size_t e = rd->param_off, esz = r->esize[kept_grads(r)];
	if (rk->fresh == NULL || pass != ZS_PASS_BACKWARD)
		return 0;
	run_layer_params(r, k, l, io);
	/* the unit's trainable run from fresh_off; a frozen tensor none (--freeze) */
	for (size_t i = 0; i < rd->nptensors; e += rd->ptensor[i++])
		io->g[i] = r->model.layer[l].tied || e < un->toff || e >= un->toff + un->tn
		                   ? NULL
		                   : (char *)rk->fresh + (e - d->fresh_off) * esz;
	return 1;
}

/* The epilogue, after the last reduce_ipg_grads and before the buckets
 * are dropped: each rank's zeros for the experts it starved at this step
 * (util/ds_coord.h's ds_coord_starved), in the params' dtype, one block a
 * rank, held to step(). */
static void starved_zeros(struct zs_run *r, struct ds *d)
{
	size_t L = r->routing_blocks, E = r->routing_experts, t = d->reduced++;
	if (d->moe == NULL)
		return;
	uint64_t *counts = zs_calloc(L * E, sizeof *counts);
	for (unsigned k = r->r0; k < r->r1; k++) {
		const size_t *got = r->routing + ((size_t)k * r->config->steps + t) * L * E;
		for (size_t i = 0; i < L * E; i++)
			counts[i] = got[i];
		size_t bytes = ds_coord_starved(d->moe, counts, E) * coll_dtype_size(r->dt);
		if (bytes == 0)
			continue;
		ds_rank(r, d, k)->starved = tracker_alloc(&r->tracker, k, r->dt == ZS_F16 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32,
		                                          bytes);
		memset(ds_rank(r, d, k)->starved, 0, bytes);
	}
	free(counts);
}

/* Whether this micro-step is the boundary, the one that reduces. */
static int boundary(const struct zs_run *r) { return r->micro + 1 >= r->nmicro; }

/* ZeRO-1: autograd's grads of the whole model, then the buckets. Under
 * --grad-accum each micro-step's backward makes the buckets again
 * (`self.ipg_buffer = []` drops the last ones first, stage_1_and_2.py
 * 2047-2060); the grads are the first micro-step's, kept. */
static int zero1_begin_backward(struct zs_run *r, void *ctx, char **cause)
{
	if (r->micro > 0)
		free_buckets(r, ctx);
	if (alloc_buckets(r, ctx, cause) != 0)
		return -1;
	if (r->micro == 0) /* --freeze: the trainable elements' (requires_grad ones alone have a .grad) */
		run_alloc_full(r, ZS_BUF_FULL_GRADS, 0, r->layout.ntrain);
	return 0;
}

static void zero1_reduce(struct zs_run *r, void *ctx)
{
	if (!boundary(r)) /* reduce_gradients at the boundary only (engine.py 2056-2058) */
		return;
	for (size_t u = 0; u < r->layout.nunits; u++)
		add_unit(r, ctx, u);
	flush(r, ctx);
	starved_zeros(r, ctx);
	free_buckets(r, ctx);
	run_free_all(r, ZS_BUF_FULL_GRADS); /* the epilogue's zero_grad */
}

/* ZeRO-2: the buckets as backward starts, and each unit's grads into them
 * as its backward ends. */
static int zero2_begin_backward(struct zs_run *r, void *ctx, char **cause)
{
	((struct ds *)ctx)->partitions = 1;
	return alloc_buckets(r, ctx, cause);
}

static void zero2_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	(void)ctx;
	if (pass == ZS_PASS_BACKWARD && r->layout.unit[u].tn > 0) /* --freeze: the trainable run's, a frozen unit none */
		run_alloc_full(r, ZS_BUF_FULL_GRADS, r->layout.unit[u].tbase, r->layout.unit[u].tn);
}

static void zero2_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	if (pass != ZS_PASS_BACKWARD)
		return;
	add_unit(r, ctx, u);
	run_free_all(r, ZS_BUF_FULL_GRADS);
}

static void zero2_reduce(struct zs_run *r, void *ctx)
{
	flush(r, ctx);
	starved_zeros(r, ctx);
	free_buckets(r, ctx);
	accumulate(r, ctx);
}

/* step(): the rank's grad partition flattened and converted to fp32, the
 * owned elements of each unit (padding slots are never written). */
static void fp32_grads(struct zs_run *r, void *ctx)
{
	struct ds *d = ctx;
	const struct zs_layout *lo = &r->layout;
	if (offloaded(r)) { /* the host fp32 partition, made by the reduction */
		for (unsigned k = r->r0; k < r->r1; k++)
			ds_rank(r, d, k)->grad32 = run_rank(r, k)->buf[ZS_BUF_GRADS];
		return;
	}
	size_t S = layout_len(lo, ZS_BUF_GRADS), esz = r->esize[ZS_BUF_GRADS];
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, d, k);
		void *flat = r->dt == ZS_F16 ? tracker_alloc(&r->tracker, k, ZS_CAT_GRAD16, S * esz) : NULL;
		rk->grad32 = tracker_alloc(&r->tracker, k, ZS_CAT_GRAD32, S * sizeof(float));
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			const void *src = run_at(r, k, ZS_BUF_GRADS, g.at);
			if (flat == NULL) {
				memcpy(rk->grad32 + g.at, src, g.count * sizeof(float));
				continue;
			}
			zs_half *h = (zs_half *)flat + g.at;
			memcpy(h, src, g.count * esz);
			for (size_t i = 0; i < g.count; i++)
				rk->grad32[g.at + i] = zs_half_to_float(h[i]);
		}
		tracker_free(&r->tracker, k, flat);
		tracker_free(&r->tracker, k, rk->starved); /* averaged_gradients = None (1906) */
		rk->starved = NULL;
	}
}

/* Offloaded, step() copies the host fp32 partition into the device params
 * through a device copy of it (fp32_partition.to(device), 1880-1882): the
 * trainable partition (--freeze), into the full params at its elements. */
static void params_from_host(struct zs_run *r)
{
	const struct zs_layout *lo = &r->layout;
	size_t S = layout_len(lo, ZS_BUF_MASTER);
	for (unsigned k = r->r0; k < r->r1; k++) {
		float *dev = tracker_alloc(&r->tracker, k, ZS_CAT_MASTER32, S * sizeof *dev);
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice m = layout_own(lo, ZS_BUF_MASTER, u, k), p = {m.first, m.count, m.first};
			memcpy(dev + m.at, run_at(r, k, ZS_BUF_MASTER, m.at), m.count * sizeof *dev);
			if (r->dt == ZS_F32)
				memcpy(run_at(r, k, ZS_BUF_PARAMS, p.at), dev + m.at, m.count * sizeof *dev);
			for (size_t i = 0; i < m.count && r->dt == ZS_F16; i++)
				((zs_half *)run_at(r, k, ZS_BUF_PARAMS, p.at))[i] = zs_float_to_half(dev[m.at + i]);
		}
		tracker_free(&r->tracker, k, dev);
	}
}

/* The optimizer steps on the fp32 gradient partition: piece u's slots. */
static const float *optimizer_grads(const struct zs_run *r, const void *ctx, unsigned k, size_t u)
{
	return ds_rank(r, ctx, k)->grad32 + layout_own(&r->layout, ZS_BUF_GRADS, u, k).at;
}

static void after_step(struct zs_run *r, void *ctx)
{
	struct ds *d = ctx;
	for (unsigned k = r->r0; k < r->r1; k++) {
		if (!offloaded(r))
			tracker_free(&r->tracker, k, ds_rank(r, d, k)->grad32);
		ds_rank(r, d, k)->grad32 = NULL;
	}
	if (offloaded(r))
		params_from_host(r);
	/* all_gather_dp_groups gathers the partitions stepped; it skips a group
	 * of one rank, where the layout has no partition (layout.h's N = 1 rule) */
	if (layout_span(&r->layout, ZS_BUF_MASTER) != ZS_FULL)
		run_gather_params_in_place(r);
}

/* DeepSpeed's hooks run at N = 1 too: it allocates its buffers on one
 * rank as on many (the registry's rows). */
static void zero1_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass) { fresh_begin(r, ctx, u, pass); }

static void zero1_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass) { fresh_end(r, ctx, u, pass); }

const struct zs_scheme_ops scheme_ds_zero1 = {
	.name = "deepspeed zero1",
	.flags = ZS_OPS_MASTER32 | ZS_OPS_OWN_ACCUM,
	.begin_backward = zero1_begin_backward,
	.begin_unit = zero1_begin_unit,
	.end_unit = zero1_end_unit,
	.place = fresh_place,
	.reduce = zero1_reduce,
	.before_optimizer = fp32_grads,
	.optimizer_grads = optimizer_grads,
	.after_optimizer = after_step,
	.buffers = buffers,
	.setup = setup,
	.teardown = teardown,
};

const struct zs_scheme_ops scheme_ds_zero2 = {
	.name = "deepspeed zero2",
	.flags = ZS_OPS_MASTER32 | ZS_OPS_OWN_ACCUM,
	.begin_backward = zero2_begin_backward,
	.begin_unit = zero2_begin_unit,
	.end_unit = zero2_end_unit,
	.reduce = zero2_reduce,
	.before_optimizer = fp32_grads,
	.optimizer_grads = optimizer_grads,
	.after_optimizer = after_step,
	.buffers = buffers,
	.setup = setup,
	.teardown = teardown,
};

/* DeepSpeed's dp (no ZeRO): the paper's dp at K = 1 (the engine's
 * buffered_allreduce_fallback all-reduces the grads, run_all_reduce_grads
 * here); under --grad-accum only at the boundary (allreduce_gradients,
 * engine.py 2059-2062), autograd's grads added into across the
 * micro-steps (fresh_begin). At N = 1 nothing is reduced (the N = 1
 * rule). */
static int dp_setup(struct zs_run *r, void **ctx, char **cause)
{
	(void)cause;
	*ctx = ds_new(r);
	return 0;
}

static void dp_teardown(struct zs_run *r, void *ctx)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		tracker_free(&r->tracker, k, ds_rank(r, ctx, k)->fresh);
	ds_free(ctx);
}

static void dp_reduce(struct zs_run *r, void *ctx)
{
	(void)ctx;
	if (boundary(r))
		run_all_reduce_grads(r);
}

const struct zs_scheme_ops scheme_ds_dp = {
	.name = "deepspeed dp",
	.flags = ZS_OPS_OWN_ACCUM,
	.setup = dp_setup,
	.teardown = dp_teardown,
	.begin_unit = zero1_begin_unit,
	.end_unit = zero1_end_unit,
	.place = fresh_place,
	.reduce = dp_reduce,
};

const struct zs_scheme_ops scheme_ds_dp_one = {
	.name = "deepspeed dp, one rank",
	.flags = ZS_OPS_OWN_ACCUM,
	.setup = dp_setup,
	.teardown = dp_teardown,
	.begin_unit = zero1_begin_unit,
	.end_unit = zero1_end_unit,
	.place = fresh_place,
};

/* ------------------------------------------------------------------------- */
/* ZeRO-3 (stage3.py, partition_parameters.py, partitioned_param_coordinator.py
 * at 38327e0; docs/schedule.md, "deepspeed", ZeRO-3). The layout shards each
 * tensor on its own (layout_shard_tensors): the fp16 partitions (ds_tensor),
 * the grad partitions (grad_partitions_flat_buffer), the fp32 partition and
 * the optimizer state. A module is a unit; its params are gathered, each
 * tensor into its own block, by the parameter coordinator below, which is
 * DeepSpeed's (the trace recorded in step 1, prefetch and release by it from
 * step 2 on). The reduce bucket is allocated once at set-up (stage3.py
 * 537-540): one, whatever overlap_comm. */

/* The coordinator, the same on every rank: its rules and state are
 * util/ds_coord.h's (which tensors each fetch gathers and each release
 * drops); the engine runs its answers. Here: the trace entry next, whether
 * the trace is complete (from step 2), and step()'s lists between the
 * optimizer's two hooks. */
struct ds3 {
	struct ds_coord *coord;
	size_t entry;
	int complete;
	unsigned step;                 /* the optimizer step running, from 1 (ds3_module's message) */
	size_t *released, *post, npost; /* per tensor at most: malloc'd by ds3_setup */
	/* The modules (the MLP's: the units; a transformer's: every nn.Module
	 * with parameters of its own, net.h's zs_module, a mixture's z3 leaf
	 * one, net_hooked; a tied head's reading the token table again):
	 * tensors [first, first + n), whether
	 * it makes their grads (not the tied head's: the table's module does),
	 * whether no input of it needs grad (the step description's), and
	 * each layer's first module. */
	size_t nmodules, *mod_first, *mod_n;
	int *mod_grads, *mod_no_grad_in;
	size_t *mod_of;                /* per layer */
	/* step()'s sub groups (ds_sub_groups over the trainable tensors'
	 * partition_numel): sub group i is the tensors [sub_end[i - 1],
	 * sub_end[i]); the one prepared (SIZE_MAX: none), and where its
	 * slots start in a rank's grads (the same on every rank). */
	size_t nsub, *sub_end, sub, sub_at;
};

static size_t psize(const struct zs_run *r) { return coll_dtype_size(r->dt); }

/* ZeRO-Infinity's CPU tier (--offload params): the partitions live on
 * the host, and a gather copies each rank's to the device first
 * (param.ds_tensor.to(device), partition_parameters.py 1262 for one param,
 * 1186 for several), the copy dropped once gathered. */
static int params_offloaded(const struct zs_run *r) { return r->config->offload == ZS_OFFLOAD_PARAMS; }

/* Rank k's partition of tensor t (at N = 1 the whole tensor). */
static void *partition_of(struct zs_run *r, size_t t, unsigned k)
{
	return run_at(r, k, ZS_BUF_PARAMS, layout_own(&r->layout, ZS_BUF_PARAMS, t, k).at);
}

/* Tensor t gathered on every rank into a block of its own, of the
 * coordinator's held[t] elements (util/ds_coord.h, ds_coord_step:
 * ceil(n/N)·N where DeepSpeed's buffer is padded, else n; at N = 1 none,
 * a view of the partition, or its device copy with the params
 * offloaded); an all-gather of its partitions. With flat > 0 (the one
 * persistent param of _post_step, _allgather_params) into a flat of flat
 * elements first, copied into the block and freed. */
static void gather_tensor(struct zs_run *r, struct ds *ds, size_t t, uint64_t flat)
{
	const struct zs_layout_tensor *ts = &r->layout.tensor[t];
	size_t s = ts->s * psize(r), n = ts->n * psize(r), held = ds->ds3->coord->held[t] * psize(r);
	/* offloaded, the partition's device copy, dropped once gathered (at
	 * N = 1 the copy is the block; _allgather_params copies from the host) */
	int dev = params_offloaded(r) && r->world > 1 && flat == 0;
	void **into = zs_calloc(r->r1 - r->r0 + 1, sizeof *into);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, ds, k);
		size_t i = k - r->r0;
		r->ptr_a[i] = partition_of(r, t, k);
		if (held == 0) { /* a view */
			rk->whole[t] = r->ptr_a[i];
			continue;
		}
		if (flat > 0)
			into[i] = tracker_alloc(&r->tracker, k, ZS_CAT_GATHERED, flat * psize(r));
		rk->whole[t] = tracker_alloc(&r->tracker, k, ZS_CAT_GATHERED, held);
		r->ptr_b[i] = flat > 0 ? into[i] : rk->whole[t];
		if (dev) {
			void *copy = tracker_alloc(&r->tracker, k, ZS_CAT_GATHERED, s);
			memcpy(copy, r->ptr_a[i], s);
			r->ptr_a[i] = copy;
		}
	}
	if (held > 0)
		coll_all_gather(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, ts->n, r->dt);
	for (unsigned k = r->r0; k < r->r1 && held > 0; k++) {
		size_t i = k - r->r0;
		if (dev)
			tracker_free(&r->tracker, k, r->ptr_a[i]);
		if (flat > 0) {
			memcpy(ds_rank(r, ds, k)->whole[t], into[i], n);
			tracker_free(&r->tracker, k, into[i]);
		}
	}
	free(into);
}

static void release_tensor(struct zs_run *r, struct ds *ds, size_t t)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, ds, k);
		if (rk->whole[t] != partition_of(r, t, k)) /* a view holds nothing */
			tracker_free(&r->tracker, k, rk->whole[t]);
		rk->whole[t] = NULL;
	}
}

static int in_module(const struct ds *ds, size_t t, size_t m)
{
	return t >= ds->ds3->mod_first[m] && t < ds->ds3->mod_first[m] + ds->ds3->mod_n[m];
}

/* The modules: the MLP's units (each layer's weight and bias, or the whole
 * model), or a transformer's nn.Modules in forward order, a mixture's
 * sparse-MoE block one z3 leaf (its router and every expert). */
static void ds3_modules(const struct zs_run *r, struct ds *ds)
{
	const struct zs_layout *lo = &r->layout;
	const struct zs_net *m = &r->model;
	struct ds3 *d = ds->ds3;
	if (m->kind != ZS_NET_TFM) {
		for (size_t t = 0; t < lo->ntensors; t++) {
			if (t == 0 || lo->tensor[t].unit != lo->tensor[t - 1].unit)
				d->mod_first[d->nmodules++] = t;
			d->mod_n[d->nmodules - 1]++;
		}
		for (size_t u = 0; u < d->nmodules; u++)
			d->mod_grads[u] = 1;
		return;
	}
	size_t nmod = 0;
	for (size_t l = 0; l < m->nlayers; l++)
		nmod += net_hooked(&m->layer[l]);
	uint64_t *trained = zs_calloc(nmod + 1, sizeof *trained); /* per module */
	int *adapter = zs_calloc(nmod + 1, sizeof *adapter);       /* LoRA's: lora_A 1, lora_B 2, and their base */
	size_t *base = zs_calloc(nmod + 1, sizeof *base);
	for (size_t l = 0; l < m->nlayers; l++) {
		const struct zs_layer *ly = &m->layer[l];
		size_t t0 = net_first_ptensor(m, l);
		d->mod_of[l] = d->nmodules;
		for (size_t s = 0; s < net_hooked(ly); s++, d->nmodules++) {
			d->mod_first[d->nmodules] = t0 + ly->module[s].first;
			d->mod_n[d->nmodules] = ly->module[s].n;
			for (size_t x = s + 1; s == ly->leaf && x < ly->nmodules; x++) /* the z3 leaf: the rest of them */
				d->mod_n[d->nmodules] += ly->module[x].n;
			/* --freeze: a module makes the grads of its trainable tensors
			 * (none: no grads); one before the first that trains runs no
			 * backward (ds_coord_grad_flow) */
			for (size_t t = d->mod_first[d->nmodules]; t < d->mod_first[d->nmodules] + d->mod_n[d->nmodules]; t++)
				trained[d->nmodules] += r->layout.tensor[t].tn;
			d->mod_no_grad_in[d->nmodules] = ly->module[s].no_grad_in;
			adapter[d->nmodules] = ly->module[s].adapter;
			base[d->nmodules] = d->mod_of[l] + ly->module[s].base;
			d->mod_grads[d->nmodules] = trained[d->nmodules] > 0;
			for (size_t e = 0; e < d->nmodules; e++) /* a tied head's table is the embedding's */
				d->mod_grads[d->nmodules] &= !in_module(ds, t0 + ly->module[s].first, e);
		}
	}
	ds_coord_grad_flow_lora(d->nmodules, trained, m->tfm.recompute == ZS_RECOMPUTE_FULL, d->mod_no_grad_in, adapter,
	                        base);
	free(trained);
	free(adapter);
	free(base);
}

/* fetch_sub_module of trace entry j (util/ds_coord.h): the module's params
 * not whole, then, once the trace is complete, the prefetch's, gathered. */
static void ds3_fetch(struct zs_run *r, struct ds *ds, size_t j)
{
	const size_t *got;
	size_t n = ds_coord_fetch(ds->ds3->coord, r->config, j, ds->ds3->complete, &got);
	for (size_t i = 0; i < n; i++)
		gather_tensor(r, ds, got[i], 0);
}

/* release_sub_module after trace entry j (util/ds_coord.h). */
static void ds3_release(struct zs_run *r, struct ds *ds, size_t j)
{
	struct ds3 *d = ds->ds3;
	size_t n = ds_coord_release(d->coord, j, d->complete, d->released);
	for (size_t i = 0; i < n; i++)
		release_tensor(r, ds, d->released[i]);
}

/* The trace complete (reset_step, 228-262, at step 2's start): its queue
 * from the start, nothing marked. */
static void ds3_reset_step(struct ds *ds)
{
	ds->ds3->entry = 0;
	ds_coord_begin_step(ds->ds3->coord, ds->ds3->complete ? 2 : 1);
}

/* Under full recompute, each module's checkpointed block (its layer;
 * -1 outside the blocks): the engine reruns a block's forward in its
 * backward (engine.c, modules_layer), so the trace holds it
 * (util/ds_coord.h). NULL without; malloc'd, the caller frees it. */
static long *ds3_checkpointed(const struct zs_run *r, size_t maxmod)
{
	const struct zs_net *m = &r->model;
	if (m->kind != ZS_NET_TFM || m->tfm.recompute != ZS_RECOMPUTE_FULL)
		return NULL;
	long *group = zs_calloc(maxmod + 1, sizeof *group);
	for (size_t l = 0, i = 0; l < m->nlayers; l++)
		for (size_t s = 0; s < net_hooked(&m->layer[l]); s++)
			group[i++] = m->layer[l].kind->recompute_module != NULL ? (long)l : -1;
	return group;
}

static void ds3_teardown(struct zs_run *r, void *ctx);

static int ds3_setup(struct zs_run *r, void **ctx, char **cause)
{
	const struct zs_config *c = r->config;
	const struct zs_layout *lo = &r->layout;
	struct ds *ds = ds_new(r);
	struct ds3 *d = ds->ds3 = zs_calloc(1, sizeof *ds->ds3);
	size_t nt = lo->ntensors, maxmod = nt; /* the MLP's: at most one a tensor */
	if (r->model.kind == ZS_NET_TFM) {
		maxmod = 0;
		for (size_t l = 0; l < r->model.nlayers; l++)
			maxmod += r->model.layer[l].nmodules;
	}
	d->released = zs_calloc(nt, sizeof *d->released);
	d->post = zs_calloc(nt, sizeof *d->post);
	d->mod_first = zs_calloc(maxmod, sizeof *d->mod_first);
	d->mod_n = zs_calloc(maxmod, sizeof *d->mod_n);
	d->mod_grads = zs_calloc(maxmod, sizeof *d->mod_grads);
	d->mod_no_grad_in = zs_calloc(maxmod, sizeof *d->mod_no_grad_in);
	d->mod_of = zs_calloc(r->model.nlayers, sizeof *d->mod_of);
	d->step = 1;
	ds3_modules(r, ds);
	uint64_t *n = zs_calloc(nt + 1, sizeof *n);
	for (size_t t = 0; t < nt; t++)
		n[t] = lo->tensor[t].n;
	long *group = ds3_checkpointed(r, maxmod);
	d->coord = ds_coord_new_recompute(n, nt, d->mod_first, d->mod_n, d->nmodules, group, d->mod_no_grad_in, c,
	                                  r->world);
	free(group);
	for (size_t t = 0; t < nt; t++)
		n[t] = lo->tensor[t].ts; /* partition_numel, 0 frozen */
	d->sub_end = zs_calloc(nt + 1, sizeof *d->sub_end);
	d->nsub = ds_sub_groups(n, nt, c->ds_sub_group, d->sub_end);
	d->sub = SIZE_MAX;
	free(n);
	ds3_reset_step(ds);
	for (unsigned k = r->r0; k < r->r1; k++)
		ds_rank(r, ds, k)->whole = zs_calloc(lo->ntensors, sizeof(void *));
	tracker_set_phase(&r->tracker, ZS_PH_SETUP);
	/* Offloaded, the fp32 partition's .grad is a host buffer of its own,
	 * kept for the run (initialize_optimizer_states, stage3.py 1059-1064;
	 * _release_sub_group drops it only without offload, 1946-1947): the
	 * trainable tensors' partitions (fp16_groups, --freeze). */
	for (unsigned k = r->r0; k < r->r1 && c->offload != ZS_OFFLOAD_NONE; k++) {
		size_t bytes = lo->tshard * sizeof(float);
		ds_rank(r, ds, k)->grad32 = tracker_alloc_host(&r->tracker, k, ZS_CAT_GRAD32, bytes);
		memset(ds_rank(r, ds, k)->grad32, 0, bytes);
	}
	if (alloc_buckets(r, ds, cause) != 0) { /* __ipg_bucket_flat_buffer, for the whole run */
		ds3_teardown(r, ds);
		return -1;
	}
	*ctx = ds;
	return 0;
}

/* Whatever the run holds when it ends (or a hook failed): the params
 * still gathered (the persistent ones), the bucket, the fp32 grad
 * partition (offloaded: the host one, kept for the run), a grad kept past
 * its module. */
static void ds3_teardown(struct zs_run *r, void *ctx)
{
	struct ds *ds = ctx;
	for (size_t t = 0; t < r->layout.ntensors; t++)
		if (ds_rank(r, ds, r->r0)->whole[t] != NULL)
			release_tensor(r, ds, t);
	free_buckets(r, ds);
	for (unsigned k = r->r0; k < r->r1; k++) {
		free(ds_rank(r, ds, k)->whole);
		tracker_free(&r->tracker, k, ds_rank(r, ds, k)->grad32);
		tracker_free(&r->tracker, k, ds_rank(r, ds, k)->held_grad);
	}
	struct ds3 *d = ds->ds3;
	ds_coord_free(d->coord);
	free(d->released);
	free(d->post);
	free(d->mod_first);
	free(d->mod_n);
	free(d->mod_grads);
	free(d->mod_no_grad_in);
	free(d->mod_of);
	free(d->sub_end);
	free(d);
	ds_free(ds);
}

/* Where the grads of bucket entry i are on rank k: in the bucket, or, for
 * a tensor larger than it, in autograd's own grad (the module's, or the
 * block it was moved to when the module's grads were dropped). */
static int oversized(const struct zs_run *r, size_t t) { return r->layout.tensor[t].n > bucket_elements(r); }

static char *entry_grads(const struct zs_run *r, const struct ds *ds, unsigned k, size_t i)
{
	const struct zs_layout_tensor *ts = &r->layout.tensor[ds->bucket.entry[i]];
	if (!oversized(r, ds->bucket.entry[i]))
		return bucket_at(r, ds, k, ds->bucket.at[i]);
	if (ds_rank(r, ds, k)->held_grad != NULL)
		return ds_rank(r, ds, k)->held_grad;
	return run_at(r, k, ZS_BUF_FULL_GRADS, ts->off - r->base[ZS_BUF_FULL_GRADS]);
}

/* __reduce_and_partition_ipg_grads (stage3.py 1294-1328) with
 * reduce_scatter on (its default): reduce_scatter_coalesced
 * (runtime/comm/coalesced_collectives.py 158-218) of the bucket's grads.
 * It lays every tensor's chunks out rank after rank, each padded to
 * ceil(n/N) (torch.empty paddings, then torch.cat: a flat copy of
 * N·Σ ceil(n/N) elements, unless one tensor divides evenly: then the bucket
 * itself), reduce-scatters it, and each rank's part of each tensor is
 * copied into its grad partition (partition_grads, 1466-1527). Here the
 * paddings are one block (the same bytes) and zeroed. */
static void ds3_flush(struct zs_run *r, struct ds *ds)
{
	struct ds_bucket *b = &ds->bucket;
	const struct zs_layout *lo = &r->layout;
	size_t N = r->world, esz = psize(r), part = 0, pad = 0;
	if (b->count == 0)
		return;
	for (size_t i = 0; i < b->count; i++) {
		part += lo->tensor[b->entry[i]].s;
		pad += N * lo->tensor[b->entry[i]].s - lo->tensor[b->entry[i]].n;
	}
	int in_place = b->count == 1 && pad == 0;
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, ds, k);
		rk->pad = pad > 0 ? tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, pad * esz) : NULL;
		rk->flat = in_place ? entry_grads(r, ds, k, 0) : tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, N * part * esz);
		if (in_place)
			continue;
		char *flat = rk->flat;
		for (size_t q = 0, at = 0; q < N; q++)
			for (size_t i = 0; i < b->count; i++) {
				const struct zs_layout_tensor *ts = &lo->tensor[b->entry[i]];
				size_t lo_q = q * ts->s, n = lo_q >= ts->n ? 0 : ts->n - lo_q < ts->s ? ts->n - lo_q : ts->s;
				memcpy(flat + at * esz, entry_grads(r, ds, k, i) + lo_q * esz, n * esz);
				memset(flat + (at + n) * esz, 0, (ts->s - n) * esz);
				at += ts->s;
			}
		if (rk->pad != NULL)
			memset(rk->pad, 0, pad * esz);
	}
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = ds_rank(r, ds, k)->flat;
		r->ptr_b[k - r->r0] = (char *)ds_rank(r, ds, k)->flat + (size_t)k * part * esz;
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, N * part, r->dt); /* in place */
	for (unsigned k = r->r0; k < r->r1; k++) {
		const char *mine = r->ptr_b[k - r->r0];
		struct ds_rank *rk = ds_rank(r, ds, k);
		for (size_t i = 0, at = 0; i < b->count; at += lo->tensor[b->entry[i++]].s) {
			struct zs_slice own = layout_own(lo, ZS_BUF_GRADS, b->entry[i], k);
			if (r->micro > 0) /* --grad-accum: add_ into the partition (1481-1489), in place */
				add_grads(run_at(r, k, ZS_BUF_GRADS, own.at), mine + at * esz, own.count, esz);
			else
				memcpy(run_at(r, k, ZS_BUF_GRADS, own.at), mine + at * esz, own.count * esz);
			/* offloaded (partition_grads, 1499-1515): into the host fp32 grad too */
			for (size_t e = 0; e < own.count && r->config->offload != ZS_OFFLOAD_NONE; e++)
				rk->grad32[own.at + e] = r->dt == ZS_F16 ? zs_half_to_float(((const zs_half *)(mine + at * esz))[e])
				                                         : ((const float *)(mine + at * esz))[e];
		}
		if (!in_place)
			tracker_free(&r->tracker, k, rk->flat);
		tracker_free(&r->tracker, k, rk->pad);
		tracker_free(&r->tracker, k, rk->held_grad); /* param.grad = None */
		rk->flat = rk->pad = rk->held_grad = NULL;
	}
	b->used = b->count = 0;
}

static void ds3_begin_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	struct ds *ds = ctx;
	ds3_fetch(r, ds, ds->ds3->entry);
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, r->layout.unit[u].off, r->layout.unit[u].n);
}

/* The module's autograd grads dropped; a tensor larger than the bucket
 * still waiting in it keeps its grad (__add_grad_to_ipg_bucket copies only
 * a grad that fits, 1279-1288): the engine holds a module's grads as one
 * block, so that grad moves to a block of its own, through an uncounted
 * copy (bookkeeping: DeepSpeed just keeps the tensor). */
static void drop_module_grads(struct zs_run *r, struct ds *ds)
{
	const struct ds_bucket *b = &ds->bucket;
	size_t t = b->count == 1 ? b->entry[0] : 0, bytes = r->layout.tensor[t].n * psize(r);
	if (b->count != 1 || !oversized(r, t) || ds_rank(r, ds, r->r0)->held_grad != NULL) {
		run_free_all(r, ZS_BUF_FULL_GRADS);
		return;
	}
	char *keep = zs_malloc((size_t)(r->r1 - r->r0) * bytes);
	for (unsigned k = r->r0; k < r->r1; k++)
		memcpy(keep + (size_t)(k - r->r0) * bytes, entry_grads(r, ds, k, 0), bytes);
	run_free_all(r, ZS_BUF_FULL_GRADS);
	for (unsigned k = r->r0; k < r->r1; k++) {
		ds_rank(r, ds, k)->held_grad = tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, bytes);
		memcpy(ds_rank(r, ds, k)->held_grad, keep + (size_t)(k - r->r0) * bytes, bytes);
	}
	free(keep);
}

/* Backward: each tensor's grads into the bucket as it is ready
 * (reduce_independent_p_g_buckets_and_remove_grads, 1258-1271;
 * __add_grad_to_ipg_bucket, 1275-1290), the bucket reduced first when the
 * next would not fit and it is not empty (so a tensor larger than the
 * bucket is always reduced alone, from its own grad, when the next one
 * comes or at the epilogue). Here a module's tensors in model order. Then
 * autograd's grads are dropped and the module released. */
static void ds3_module_done(struct zs_run *r, struct ds *ds, size_t m, enum zs_pass pass)
{
	struct ds_bucket *b = &ds->bucket;
	struct ds3 *d = ds->ds3;
	const struct zs_layout *lo = &r->layout;
	int grads = pass == ZS_PASS_BACKWARD && d->mod_grads[m];
	for (size_t t = d->mod_first[m]; grads && t < d->mod_first[m] + d->mod_n[m]; t++) {
		const struct zs_layout_tensor *ts = &lo->tensor[t];
		if (ts->tn == 0) /* frozen (--freeze): no grad, no reduction hook (stage3.py 1161-1166) */
			continue;
		if (b->used + ts->n > bucket_elements(r) && b->count > 0)
			ds3_flush(r, ds);
		for (unsigned k = r->r0; k < r->r1 && !oversized(r, t); k++)
			memcpy(bucket_at(r, ds, k, b->used), run_at(r, k, ZS_BUF_FULL_GRADS, ts->off - r->base[ZS_BUF_FULL_GRADS]),
			       ts->n * psize(r));
		b->entry[b->count] = t;
		b->at[b->count++] = b->used;
		b->used += ts->n;
		tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	}
	if (grads)
		drop_module_grads(r, ds);
	ds3_release(r, ds, d->entry++);
}

static void ds3_end_unit(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass)
{
	ds3_module_done(r, ctx, u, pass);
}

/* A transformer's module s of layer l: gathered (and its grads made, in
 * backward) before its step, reduced and released after. */
static int ds3_module(struct zs_run *r, void *ctx, size_t l, size_t s, enum zs_pass pass, int begin)
{
	struct ds *ds = ctx;
	struct ds3 *d = ds->ds3;
	size_t m = d->mod_of[l] + s;
	if (pass == ZS_PASS_BACKWARD && d->mod_no_grad_in[m] == 2)
		return 0; /* its output needs no grad: no backward, no hook (its dX is read by no module that trains) */
	if (d->entry >= d->coord->ntrace || d->coord->trace[d->entry] != m ||
	    d->coord->bwd[d->entry] != (pass == ZS_PASS_BACKWARD)) {
		/* the engine runs the coordinator's trace (util/ds_coord.h) */
		char want[96] = "nothing: its entries ended";
		if (d->entry < d->coord->ntrace)
			snprintf(want, sizeof want, "the %s of module %zu", d->coord->bwd[d->entry] ? "backward" : "forward",
			         d->coord->trace[d->entry]);
		fprintf(stderr, "zerosim: deepspeed ZeRO-3: step %u, micro-step %u: the %s of layer %zu's module %zu "
		        "(module %zu) runs where the coordinator's trace (entry %zu of %zu) has %s (internal error)\n",
		        d->step, r->micro + 1, pass == ZS_PASS_BACKWARD ? "backward" : "forward", l, s, m, d->entry,
		        d->coord->ntrace, want);
		abort();
	}
	if (!begin) {
		ds3_module_done(r, ds, m, pass);
		return 1;
	}
	ds3_fetch(r, ds, d->entry);
	if (pass == ZS_PASS_BACKWARD && d->mod_grads[m]) { /* --freeze: its trainable tensors' (one run, zs_freeze_units) */
		size_t off = SIZE_MAX, n = 0;
		for (size_t t = d->mod_first[m]; t < d->mod_first[m] + d->mod_n[m]; t++) {
			const struct zs_layout_tensor *ts = &r->layout.tensor[t];
			off = ts->tn > 0 && off == SIZE_MAX ? ts->off : off;
			n += ts->tn;
		}
		/* (a z3 leaf's: an expert that got no token has no grad, and
		 * reduce_leaf_module_grads gives it torch.zeros_like before the
		 * leaf's one reduce, stage3.py 1197-1205; the leaf's kernels
		 * zero every grad of the block first, tfm_net.c moe_bwd_leaf,
		 * so its grads here are those zeros, in the block's bytes) */
		run_alloc_full(r, ZS_BUF_FULL_GRADS, off, n);
	}
	return 1;
}

/* independent_gradient_partition_epilogue (1131-1155): what is left.
 * Under --grad-accum a micro-step before the boundary runs no step(): the
 * next forward's reset_step (the top module's forward pre-hook,
 * parameter_offload.py 243-247; partitioned_param_coordinator.py 228-264)
 * completes the trace recorded so far and starts its queue again; what
 * is whole stays (no step() released it: the persistent params once the
 * trace is complete, and the params of a module whose backward released
 * nothing, util/ds_coord.h). */
static void ds3_reduce(struct zs_run *r, void *ctx)
{
	struct ds *ds = ctx;
	ds3_flush(r, ds);
	if (boundary(r))
		return;
	for (size_t t = 0; t < r->layout.ntensors; t++)
		if ((ds_rank(r, ds, r->r0)->whole[t] != NULL) != (ds->ds3->coord->avail[t] != 0))
			abort(); /* the engine holds what the coordinator says is whole (util/ds_coord.h) */
	ds->ds3->complete = 1;
	ds->ds3->entry = 0;
	ds_coord_begin_micro(ds->ds3->coord);
}

/* Every parameter tensor in its own block (NULL while it is not
 * gathered), and in backward the grads of the module being computed: the
 * tensors the full grads hold now (a tied head's final norm included: its
 * module is its own, and the head reduces it). */
static int ds3_place(const struct zs_run *r, const void *ctx, unsigned k, size_t l, enum zs_pass pass,
                     struct zs_layer_io *io)
{
	const struct ds_rank *rk = ds_rank(r, ctx, k);
	const struct zs_layer *rd = net_reads(&r->model, l);
	const struct zs_rank *rb = run_rank(r, k);
	size_t t0 = net_first_ptensor(&r->model, l), e = rd->param_off, from = r->base[ZS_BUF_FULL_GRADS];
	int grads = pass == ZS_PASS_BACKWARD && rb->buf[ZS_BUF_FULL_GRADS] != NULL;
	for (size_t i = 0; i < rd->nptensors; e += rd->ptensor[i++]) {
		io->w[i] = rk->whole[t0 + i];
		io->g[i] = grads && e >= from && e < from + r->len[ZS_BUF_FULL_GRADS]
		                   ? run_at(r, k, ZS_BUF_FULL_GRADS, e - from)
		                   : NULL;
	}
	return 1;
}

/* A block of rank k's, on the host where the grad partitions are
 * (offloaded, stage3.py 261 and 547-551). */
static void *grads_side_alloc(struct zs_run *r, unsigned k, size_t bytes)
{
	return r->host[ZS_BUF_GRADS] ? tracker_alloc_host(&r->tracker, k, ZS_CAT_SCRATCH, bytes)
	                             : tracker_alloc(&r->tracker, k, ZS_CAT_SCRATCH, bytes);
}

/* step()'s _overflow_check_and_loss_scale_update (stage3.py 2031-2035):
 * in mixed precision (fp16) has_overflow (2208-2213) runs
 * torch.isinf(grad_partitions_flat_buffer).any(), then isnan's, over the
 * S_t grad slots where they are. isinf is `self.abs() == inf` (ATen
 * TensorCompare.cpp): an fp16 abs and a bool alive together, both freed
 * with the statement; isnan is `self != self`, one bool. The 0-dim .any()
 * results (1 byte) are not counted. */
static void overflow_check(struct zs_run *r, struct ds *ds)
{
	const struct zs_layout *lo = &r->layout;
	size_t n = lo->tshard;
	if (r->dt != ZS_F16 || n == 0)
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		uint16_t *mag = grads_side_alloc(r, k, n * sizeof *mag);
		unsigned char *is_inf = grads_side_alloc(r, k, n), any = 0;
		memset(mag, 0, n * sizeof *mag); /* a rank's padding: the buffer's zeros */
		memset(is_inf, 0, n);
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			const uint16_t *h = run_at(r, k, ZS_BUF_GRADS, g.at);
			for (size_t e = 0, at = g.at; e < g.count && at < n; e++, at++) {
				mag[at] = h[e] & 0x7fffu;
				is_inf[at] = mag[at] == 0x7c00u;
			}
		}
		for (size_t e = 0; e < n; e++)
			any |= is_inf[e];
		tracker_free(&r->tracker, k, is_inf);
		tracker_free(&r->tracker, k, mag);
		unsigned char *is_nan = grads_side_alloc(r, k, n);
		memset(is_nan, 0, n);
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			const uint16_t *h = run_at(r, k, ZS_BUF_GRADS, g.at);
			for (size_t e = 0, at = g.at; e < g.count && at < n; e++, at++)
				is_nan[at] = (h[e] & 0x7fffu) > 0x7c00u;
		}
		for (size_t e = 0; e < n; e++)
			any |= is_nan[e];
		tracker_free(&r->tracker, k, is_nan);
		ds_rank(r, ds, k)->overflow = any;
	}
}

/* _get_norm_groups (stage3.py 1885-1891): not offloaded,
 * get_grad_norm_direct (1794-1797) takes g.double().norm(2) of each grad
 * partition, a float64 copy of its partition_numel slots freed with the
 * statement (the 0-dim norms, 8 bytes each, are not counted); offloaded,
 * complete_grad_norm_calculation_for_cpu_offload (1437-1460) sums norms
 * the reduction kept. */
static void grad_norms(struct zs_run *r, struct ds *ds)
{
	const struct zs_layout *lo = &r->layout;
	if (r->config->offload != ZS_OFFLOAD_NONE)
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		double sq = 0;
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			if (lo->tensor[u].ts == 0)
				continue;
			double *x = tracker_alloc(&r->tracker, k, ZS_CAT_SCRATCH, lo->tensor[u].ts * sizeof *x);
			const void *src = run_at(r, k, ZS_BUF_GRADS, g.at);
			double norm = 0;
			for (size_t e = 0; e < g.count; e++) {
				x[e] = r->dt == ZS_F16 ? zs_half_to_float(((const zs_half *)src)[e]) : ((const float *)src)[e];
				norm += x[e] * x[e];
			}
			sq += norm;
			tracker_free(&r->tracker, k, x);
		}
		ds_rank(r, ds, k)->grad_norm = sqrt(sq);
	}
}

/* step(): _partition_all_parameters (2091; release_and_reset_all,
 * partitioned_param_coordinator.py 444-457) releases every param, the
 * persistent ones too; then the sub groups, one after another
 * (ds3_step_group). */
static void ds3_before_optimizer(struct zs_run *r, void *ctx)
{
	struct ds *ds = ctx;
	struct ds3 *d = ds->ds3;
	size_t nrel;
	d->npost = ds_coord_step(d->coord, d->released, &nrel, d->post);
	for (size_t i = 0; i < nrel; i++)
		release_tensor(r, ds, d->released[i]);
	overflow_check(r, ds);
	grad_norms(r, ds);
	d->sub = SIZE_MAX;
}

static size_t sub_first(const struct ds3 *d, size_t i) { return i == 0 ? 0 : d->sub_end[i - 1]; }

/* _prepare_fp32_grad_for_sub_group (stage3.py 1895-1915): sub group i's
 * grad partitions flattened (_flatten_dense_tensors: a cat of their
 * partition_numel slots, the narrow itself where the sub group is one
 * tensor: torch/csrc/utils/tensor_flatten.h) and .to(float32) (a copy
 * in mixed precision, the same tensor in fp32), the fp16 flat freed with
 * the statement; offloaded, the host fp32 grad is ready (_prepare_sub_group,
 * 1920-1922). The slots of a rank's padding are never written. */
static void prepare_sub_group(struct zs_run *r, struct ds *ds, size_t i)
{
	const struct zs_layout *lo = &r->layout;
	struct ds3 *d = ds->ds3;
	size_t u0 = sub_first(d, i), u1 = d->sub_end[i], n = 0, nt = 0, esz = r->esize[ZS_BUF_GRADS];
	for (size_t u = u0; u < u1; u++) {
		n += lo->tensor[u].ts;
		nt += lo->tensor[u].ts > 0;
	}
	d->sub = i;
	d->sub_at = layout_own(lo, ZS_BUF_GRADS, u0, r->r0).at;
	if (r->config->offload != ZS_OFFLOAD_NONE || (nt == 1 && r->dt == ZS_F32))
		return; /* the optimizer steps the grads where they are */
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct ds_rank *rk = ds_rank(r, ds, k);
		char *flat = r->dt == ZS_F16 && nt > 1 ? tracker_alloc(&r->tracker, k, ZS_CAT_GRAD16, n * esz) : NULL;
		rk->grad32 = tracker_alloc(&r->tracker, k, ZS_CAT_GRAD32, n * sizeof(float));
		for (size_t u = u0; u < u1; u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k);
			const char *src = run_at(r, k, ZS_BUF_GRADS, g.at);
			size_t at = g.at - d->sub_at;
			if (flat != NULL)
				src = memcpy(flat + at * esz, src, g.count * esz);
			if (r->dt == ZS_F32)
				memcpy(rk->grad32 + at, src, g.count * sizeof(float));
			for (size_t e = 0; e < g.count && r->dt == ZS_F16; e++)
				rk->grad32[at + e] = zs_half_to_float(((const zs_half *)src)[e]);
		}
		tracker_free(&r->tracker, k, flat);
	}
}

/* Offloaded, the optimizer steps the host fp32 partition and
 * _reassign_or_swap_out_partitioned_parameters (2069-2075) copy_'s it into
 * the fp16 partitions, a sub group at a time (tensors [u0, u1), whose
 * slots start at `at`). On the device (--offload optimizer) torch converts
 * on the host first, a host fp16 copy (copy_kernel_cuda, aten/src/ATen/
 * native/cuda/Copy.cu: src.to(dst's dtype) on the CPU for a blocking
 * CPU-to-GPU copy); host to host (--offload params) converts in place, and
 * fp32 to fp32 needs no copy. The engine's optimizer already wrote the
 * params; this is the host copy the transfer makes, rewriting the same
 * values: the trainable tensors' (fp16_partitioned_groups, --freeze). */
static void reassign_partitions(struct zs_run *r, size_t u0, size_t u1, size_t at)
{
	const struct zs_layout *lo = &r->layout;
	size_t n = 0;
	if (r->dt != ZS_F16 || params_offloaded(r))
		return;
	for (size_t u = u0; u < u1; u++)
		n += lo->tensor[u].ts;
	for (unsigned k = r->r0; k < r->r1; k++) {
		zs_half *tmp = tracker_alloc_host(&r->tracker, k, ZS_CAT_PARAM16, n * sizeof *tmp);
		for (size_t u = u0; u < u1; u++) {
			struct zs_slice m = layout_own(lo, ZS_BUF_MASTER, u, k), p = layout_own(lo, ZS_BUF_PARAMS, u, k);
			zs_float_to_half_n(tmp + (m.at - at), run_at(r, k, ZS_BUF_MASTER, m.at), m.count);
			memcpy(run_at(r, k, ZS_BUF_PARAMS, p.at), tmp + (m.at - at), m.count * sizeof *tmp);
		}
		tracker_free(&r->tracker, k, tmp);
	}
}

/* After the optimizer stepped the sub group prepared:
 * _reassign_or_swap_out_partitioned_parameters (2069-2077), then
 * _release_sub_group (1943-1953) drops its fp32 gradient (offloaded it
 * stays, 1946-1947). */
static void finish_sub_group(struct zs_run *r, struct ds *ds)
{
	struct ds3 *d = ds->ds3;
	if (d->sub == SIZE_MAX)
		return;
	if (r->config->offload == ZS_OFFLOAD_OPTIMIZER)
		reassign_partitions(r, sub_first(d, d->sub), d->sub_end[d->sub], d->sub_at);
	for (unsigned k = r->r0; k < r->r1 && r->config->offload == ZS_OFFLOAD_NONE; k++) {
		tracker_free(&r->tracker, k, ds_rank(r, ds, k)->grad32);
		ds_rank(r, ds, k)->grad32 = NULL;
	}
	d->sub = SIZE_MAX;
}

/* step()'s loop (2111-2126): sub group i - 1 finished, sub group i
 * prepared for the optimizer. */
static size_t ds3_step_group(struct zs_run *r, void *ctx, size_t i)
{
	struct ds *ds = ctx;
	finish_sub_group(r, ds);
	if (i >= ds->ds3->nsub) /* nothing trains */
		return layout_npieces(&r->layout);
	prepare_sub_group(r, ds, i);
	return ds->ds3->sub_end[i];
}

/* The sub group's fp32 gradient (offloaded: the host one, whole), or
 * NULL where it is the grads themselves. */
static const float *ds3_optimizer_grads(const struct zs_run *r, const void *ctx, unsigned k, size_t u)
{
	const struct ds *ds = ctx;
	const float *g = ds_rank(r, ds, k)->grad32;
	size_t at = layout_own(&r->layout, ZS_BUF_GRADS, u, k).at;
	if (g == NULL)
		return NULL;
	return r->config->offload != ZS_OFFLOAD_NONE ? g + at : g + (at - ds->ds3->sub_at);
}

/* The last sub group finished, then _post_step gathers the persistent
 * params (2054-2056), outside the coordinator's count; the next step
 * runs the complete trace. */
static void ds3_after_optimizer(struct zs_run *r, void *ctx)
{
	struct ds *ds = ctx;
	finish_sub_group(r, ds);
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t i = 0; i < ds->ds3->npost; i++)
		gather_tensor(r, ds, ds->ds3->post[i], ds->ds3->coord->flat);
	ds->ds3->complete = 1;
	ds->ds3->step++;
	ds3_reset_step(ds);
}

/* Offloaded (stage3.py's self.device cpu, 261): the grad partitions
 * (grad_partitions_flat_buffer, 547-549, fp16 in mixed precision: the
 * default grad_accum_dtype is the model's), the fp32 partition (902-903)
 * and the optimizer state on the host; with the params offloaded the fp16
 * partitions too, persistent ones included (_create_fp16_partitions_with_
 * defragmentation moves every partition into a host flat buffer, 741-769,
 * _move_to_flat_buffer 646-676). */
static void ds3_buffers(struct zs_run *r)
{
	if (r->config->offload == ZS_OFFLOAD_NONE)
		return;
	r->host[ZS_BUF_GRADS] = r->host[ZS_BUF_MASTER] = r->host[ZS_BUF_M] = r->host[ZS_BUF_V] = 1;
	r->host[ZS_BUF_PARAMS] = params_offloaded(r);
}

const struct zs_scheme_ops scheme_ds_zero3 = {
	.name = "deepspeed zero3",
	.flags = ZS_OPS_MASTER32 | ZS_OPS_OWN_ACCUM,
	.buffers = ds3_buffers,
	.setup = ds3_setup,
	.teardown = ds3_teardown,
	.begin_unit = ds3_begin_unit,
	.end_unit = ds3_end_unit,
	.module = ds3_module,
	.place = ds3_place,
	.reduce = ds3_reduce,
	.before_optimizer = ds3_before_optimizer,
	.step_group = ds3_step_group,
	.optimizer_grads = ds3_optimizer_grads,
	.after_optimizer = ds3_after_optimizer,
};

double scheme_deepspeed_bound(const struct zs_config *c, const struct zs_layout *lo)
{
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	double S = (double)lo->shard, psi = (double)lo->nparams;
	double written = c->ds_reduce_bucket < psi ? c->ds_reduce_bucket : psi;
	/* ZeRO-3: reduce_scatter_coalesced's flat copy and paddings, at most
	 * the grads reduced at once (the bucket's, or a larger tensor's) padded
	 * per tensor, twice; a grad larger than the bucket kept past its
	 * module; the device copies of offloaded partitions */
	double coalesced = lo->per_tensor ? 2 * (psi + (double)lo->world * (double)lo->ntensors) * g + psi * g + S * p : 0;
	/* under --grad-accum K: ZeRO-2's later micro-step's new grad
	 * partition; ZeRO-1's and dp's new grads of a unit */
	double accum = c->grad_accum > 1 ? S * g + psi * g : 0;
	return (1 + c->ds_overlap_comm) * written * g + S * (g + 4) + (c->precision == ZS_FP32 ? 4 * S : 0) + coalesced +
	       (c->offload != ZS_OFFLOAD_NONE ? 4 * S + 2 * psi * g : 0) + accum;
}
