/*
 * deepspeed — DeepSpeed's ZeRO-1 and ZeRO-2 (deepspeed/runtime/zero/
 * stage_1_and_2.py, DeepSpeedZeroOptimizer, at 38327e0; docs/schedule.md,
 * "DeepSpeed"), as hooks; their rows are zs_row's (params full, the reduced
 * grads and the optimizer state partitioned). dp is the paper's dp.
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
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scheme.h"
#include "util/ds_coord.h"
#include "util/util.h"

static size_t bucket_elements(const struct zs_run *r) { return (size_t)r->config->ds_reduce_bucket; }

static int offloaded(const struct zs_run *r) { return r->config->offload == ZS_OFFLOAD_OPTIMIZER; }

/* ZeRO-Offload (cpu_offload): the fp32 partition, the optimizer state and
 * the fp32 gradient partition (kept between steps, initialize_optimizer_
 * states 682-693: the grads buffer here, fp32) in host memory; two
 * zeroed buffers of the largest tensor's grads, one on the host and one on
 * the device (temp_grad_buffer_for_cpu_offload and _for_gpu_offload,
 * 477-485; used only with gradient accumulation, which zerosim does not
 * run). */
static size_t largest_tensor(const struct zs_layout *lo)
{
	size_t m = 0;
	for (size_t i = 0; i < lo->ntensors; i++)
		m = lo->tensor[i].n > m ? lo->tensor[i].n : m;
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

static void setup(struct zs_run *r, const struct zs_config *c)
{
	if (c->offload != ZS_OFFLOAD_OPTIMIZER)
		return;
	size_t bytes = largest_tensor(&r->layout) * coll_dtype_size(r->dt);
	enum zs_cat cat = r->dt == ZS_F16 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
		rk->offload_tmp[0] = tracker_alloc(&r->tracker, k, cat, bytes);
		rk->offload_tmp[1] = tracker_alloc_host(&r->tracker, k, cat, bytes);
		memset(rk->offload_tmp[0], 0, bytes);
		memset(rk->offload_tmp[1], 0, bytes);
	}
}

static void teardown(struct zs_run *r)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		for (int i = 0; i < 2; i++) {
			tracker_free(&r->tracker, k, run_rank(r, k)->offload_tmp[i]);
			run_rank(r, k)->offload_tmp[i] = NULL;
		}
}

static void free_buckets(struct zs_run *r)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		for (int i = 0; i < 2; i++) {
			tracker_free(&r->tracker, k, run_rank(r, k)->bucket[i]);
			run_rank(r, k)->bucket[i] = NULL;
		}
}

/* Every rank's buckets are mapped, untouched; the address space (or
 * ulimit -v, or the map count) can still run out: then the buckets
 * mapped so far are unmapped and the run ends in one line (exit 1). */
static void alloc_buckets(struct zs_run *r)
{
	size_t bytes = bucket_elements(r) * r->esize[ZS_BUF_FULL_GRADS];
	unsigned nb = r->ds3 != NULL ? 1 : 1 + (unsigned)r->config->ds_overlap_comm; /* stage 3 has one */
	for (unsigned k = r->r0; k < r->r1; k++)
		for (unsigned i = 0; i < nb; i++) {
			run_rank(r, k)->bucket[i] = tracker_alloc_mapped(&r->tracker, k, ZS_CAT_BUCKETS, bytes);
			if (run_rank(r, k)->bucket[i] != NULL)
				continue;
			int err = errno;
			free_buckets(r);
			fprintf(stderr, "zerosim: cannot map DeepSpeed's reduce bucket %u of rank %u of %u (%zu bytes, %u a "
			        "rank, %.4g bytes in all): %s (the address space, ulimit -v or vm.max_map_count); give a "
			        "smaller --ds-reduce-bucket or --world\n", i + 1, k, r->world, bytes, nb,
			        (double)bytes * nb * r->world, strerror(err));
			exit(ZS_EXIT_RUNTIME);
		}
	r->bucket.used = r->bucket.count = 0;
	r->bucket.index = 0;
}

/* Reduce unit u's grads, rank k's at src[k - r0], into the partitions
 * that own them. One rank keeps its own: a copy, no collective (coll.h's
 * N = 1 rule). */
static void reduce_unit(struct zs_run *r, size_t u, void *const *src)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	if (offloaded(r)) { /* in place, then each rank's slots to its host fp32 partition */
		size_t esz = coll_dtype_size(r->dt);
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_b[k - r->r0] = (char *)src[k - r->r0] + (size_t)k * un->s * esz;
		coll_reduce_scatter(&r->coll, (const void *const *)src, r->ptr_b, un->n, r->dt);
		for (unsigned k = r->r0; k < r->r1; k++) {
			struct zs_slice own = layout_own(&r->layout, ZS_BUF_GRADS, u, k);
			float *to = run_at(r, k, ZS_BUF_GRADS, own.at);
			for (size_t i = 0; i < own.count; i++)
				to[i] = r->dt == ZS_F16 ? zs_half_to_float(((const zs_half *)r->ptr_b[k - r->r0])[i])
				                        : ((const float *)r->ptr_b[k - r->r0])[i];
		}
		return;
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		r->ptr_b[k - r->r0] = run_at(r, k, ZS_BUF_GRADS, layout_own(&r->layout, ZS_BUF_GRADS, u, k).at);
	coll_reduce_scatter(&r->coll, (const void *const *)src, r->ptr_b, un->n, r->dt);
}

static void *bucket_at(const struct zs_run *r, unsigned k, size_t at)
{
	return (char *)run_rank(r, k)->bucket[r->bucket.index] + at * r->esize[ZS_BUF_FULL_GRADS];
}

/* reduce_ipg_grads: every unit waiting in the bucket. */
static void flush(struct zs_run *r)
{
	struct zs_bucket *b = &r->bucket;
	for (size_t i = 0; i < b->count; i++) {
		for (unsigned k = r->r0; k < r->r1; k++)
			r->ptr_a[k - r->r0] = bucket_at(r, k, b->at[i]);
		reduce_unit(r, b->unit[i], r->ptr_a);
	}
	b->used = b->count = 0;
}

/* Unit u's grads, in the full grads buffer, into the bucket. */
static void add_unit(struct zs_run *r, size_t u)
{
	struct zs_bucket *b = &r->bucket;
	const struct zs_layout_unit *un = &r->layout.unit[u];
	size_t esz = r->esize[ZS_BUF_FULL_GRADS];
	if (b->used + un->n > bucket_elements(r)) {
		flush(r);
		b->index ^= (unsigned)r->config->ds_overlap_comm; /* the other buffer */
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_FULL_GRADS, un->off - r->base[ZS_BUF_FULL_GRADS]);
	if (un->n > bucket_elements(r)) { /* extra_large_param_to_reduce */
		reduce_unit(r, u, r->ptr_a);
		return;
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		memcpy(bucket_at(r, k, b->used), r->ptr_a[k - r->r0], un->n * esz);
	b->unit[b->count] = u;
	b->at[b->count++] = b->used;
	b->used += un->n;
}

/* ZeRO-1: autograd's grads of the whole model, then the buckets. */
static void zero1_begin_backward(struct zs_run *r)
{
	alloc_buckets(r);
	run_alloc_full(r, ZS_BUF_FULL_GRADS, 0, r->layout.nparams);
}

static void zero1_reduce(struct zs_run *r)
{
	for (size_t u = 0; u < r->layout.nunits; u++)
		add_unit(r, u);
	flush(r);
	free_buckets(r);
	run_free_all(r, ZS_BUF_FULL_GRADS); /* the epilogue's zero_grad */
}

/* ZeRO-2: each unit's grads into the bucket as its backward ends. */
static void zero2_begin_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, r->layout.unit[u].off, r->layout.unit[u].n);
}

static void zero2_end_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	if (pass != ZS_PASS_BACKWARD)
		return;
	add_unit(r, u);
	run_free_all(r, ZS_BUF_FULL_GRADS);
}

static void zero2_reduce(struct zs_run *r)
{
	flush(r);
	free_buckets(r);
}

/* step(): the rank's grad partition flattened and converted to fp32, the
 * owned elements of each unit (padding slots are never written). */
static void fp32_grads(struct zs_run *r)
{
	const struct zs_layout *lo = &r->layout;
	if (offloaded(r)) { /* the host fp32 partition, made by the reduction */
		for (unsigned k = r->r0; k < r->r1; k++)
			run_rank(r, k)->grad32 = run_rank(r, k)->buf[ZS_BUF_GRADS];
		return;
	}
	size_t S = layout_len(lo, ZS_BUF_GRADS), esz = r->esize[ZS_BUF_GRADS];
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
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
	}
}

/* Offloaded, step() copies the host fp32 partition into the device params
 * through a device copy of it (fp32_partition.to(device), 1880-1882). */
static void params_from_host(struct zs_run *r)
{
	const struct zs_layout *lo = &r->layout;
	size_t S = layout_len(lo, ZS_BUF_MASTER);
	for (unsigned k = r->r0; k < r->r1; k++) {
		float *dev = tracker_alloc(&r->tracker, k, ZS_CAT_MASTER32, S * sizeof *dev);
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice m = layout_own(lo, ZS_BUF_MASTER, u, k), p = layout_own(lo, ZS_BUF_PARAMS, u, k);
			memcpy(dev + m.at, run_at(r, k, ZS_BUF_MASTER, m.at), m.count * sizeof *dev);
			if (r->dt == ZS_F32)
				memcpy(run_at(r, k, ZS_BUF_PARAMS, p.at), dev + m.at, m.count * sizeof *dev);
			for (size_t i = 0; i < m.count && r->dt == ZS_F16; i++)
				((zs_half *)run_at(r, k, ZS_BUF_PARAMS, p.at))[i] = zs_float_to_half(dev[m.at + i]);
		}
		tracker_free(&r->tracker, k, dev);
	}
}

static void after_step(struct zs_run *r)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		if (!offloaded(r))
			tracker_free(&r->tracker, k, run_rank(r, k)->grad32);
		run_rank(r, k)->grad32 = NULL;
	}
	if (offloaded(r))
		params_from_host(r);
	/* all_gather_dp_groups gathers the partitions stepped; it skips a group
	 * of one rank, where the layout has no partition (layout.h's N = 1 rule) */
	if (layout_span(&r->layout, ZS_BUF_MASTER) != ZS_FULL)
		run_gather_params_in_place(r);
}

static const struct zs_scheme_ops ds_zero1 = {
	.name = "deepspeed zero1",
	.begin_backward = zero1_begin_backward,
	.reduce = zero1_reduce,
	.before_optimizer = fp32_grads,
	.after_optimizer = after_step,
	.buffers = buffers,
	.setup = setup,
	.teardown = teardown,
	.master32 = 1,
};

static const struct zs_scheme_ops ds_zero2 = {
	.name = "deepspeed zero2",
	.begin_backward = alloc_buckets,
	.begin_unit = zero2_begin_unit,
	.end_unit = zero2_end_unit,
	.reduce = zero2_reduce,
	.before_optimizer = fp32_grads,
	.after_optimizer = after_step,
	.buffers = buffers,
	.setup = setup,
	.teardown = teardown,
	.master32 = 1,
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
struct zs_ds3 {
	struct ds_coord *coord;
	size_t entry;
	int complete;
	size_t *released, *post, npost; /* per tensor at most: malloc'd by ds3_setup */
	/* The modules (the MLP's: the units; a transformer's: every nn.Module
	 * with parameters of its own, model.h's zs_module, a tied head's
	 * reading the token table again): tensors [first, first + n), whether
	 * it makes their grads (not the tied head's: the table's module does),
	 * and each layer's first module. */
	size_t nmodules, *mod_first, *mod_n;
	int *mod_grads;
	size_t *mod_of;                /* per layer */
};

static size_t psize(const struct zs_run *r) { return coll_dtype_size(r->dt); }

/* ZeRO-Infinity's CPU tier (--offload params): the partitions live on
 * the host, and a gather copies each rank's to the device first
 * (param.ds_tensor.to(device), partition_parameters.py 1262 for one param,
 * 1186 for several), the copy dropped once gathered. */
static int params_offloaded(const struct zs_run *r) { return r->config->offload == ZS_OFFLOAD_PARAMS; }

/* Tensor t gathered on every rank into a block of its own (all-gather of
 * its partitions; a copy at N = 1, coll.h's N = 1 rule). */
static void gather_tensor(struct zs_run *r, size_t t)
{
	const struct zs_layout_tensor *ts = &r->layout.tensor[t];
	size_t s = ts->s * psize(r);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
		rk->whole[t] = tracker_alloc(&r->tracker, k, ZS_CAT_GATHERED, ts->n * psize(r));
		r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_PARAMS, layout_own(&r->layout, ZS_BUF_PARAMS, t, k).at);
		r->ptr_b[k - r->r0] = rk->whole[t];
		if (params_offloaded(r)) {
			void *dev = tracker_alloc(&r->tracker, k, ZS_CAT_GATHERED, s);
			memcpy(dev, r->ptr_a[k - r->r0], s);
			r->ptr_a[k - r->r0] = dev;
		}
	}
	coll_all_gather(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, ts->n, r->dt);
	for (unsigned k = r->r0; k < r->r1 && params_offloaded(r); k++)
		tracker_free(&r->tracker, k, r->ptr_a[k - r->r0]);
}

static void release_tensor(struct zs_run *r, size_t t)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		tracker_free(&r->tracker, k, run_rank(r, k)->whole[t]);
		run_rank(r, k)->whole[t] = NULL;
	}
}

static int in_module(const struct zs_run *r, size_t t, size_t m)
{
	return t >= r->ds3->mod_first[m] && t < r->ds3->mod_first[m] + r->ds3->mod_n[m];
}

/* The modules: the MLP's units (each layer's weight and bias, or the whole
 * model), or a transformer's nn.Modules in forward order. */
static void ds3_modules(struct zs_run *r)
{
	const struct zs_layout *lo = &r->layout;
	const struct zs_net *m = &r->model;
	struct zs_ds3 *d = r->ds3;
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
	for (size_t l = 0; l < m->nlayers; l++) {
		const struct zs_layer *ly = &m->layer[l];
		size_t t0 = model_first_ptensor(m, l);
		d->mod_of[l] = d->nmodules;
		for (size_t s = 0; s < ly->nmodules; s++, d->nmodules++) {
			d->mod_first[d->nmodules] = t0 + ly->module[s].first;
			d->mod_n[d->nmodules] = ly->module[s].n;
			d->mod_grads[d->nmodules] = 1;
			for (size_t e = 0; e < d->nmodules; e++) /* a tied head's table is the embedding's */
				d->mod_grads[d->nmodules] &= !in_module(r, t0 + ly->module[s].first, e);
		}
	}
}

/* fetch_sub_module of trace entry j (util/ds_coord.h): the module's params
 * not whole, then, once the trace is complete, the prefetch's, gathered. */
static void ds3_fetch(struct zs_run *r, size_t j)
{
	const size_t *got;
	size_t n = ds_coord_fetch(r->ds3->coord, r->config, j, r->ds3->complete, &got);
	for (size_t i = 0; i < n; i++)
		gather_tensor(r, got[i]);
}

/* release_sub_module after trace entry j (util/ds_coord.h). */
static void ds3_release(struct zs_run *r, size_t j)
{
	struct zs_ds3 *d = r->ds3;
	size_t n = ds_coord_release(d->coord, j, d->complete, d->released);
	for (size_t i = 0; i < n; i++)
		release_tensor(r, d->released[i]);
}

/* The trace complete (reset_step, 228-262, at step 2's start): its queue
 * from the start, nothing marked. */
static void ds3_reset_step(struct zs_run *r)
{
	r->ds3->entry = 0;
	ds_coord_begin_step(r->ds3->coord, r->ds3->complete ? 2 : 1);
}

static void ds3_setup(struct zs_run *r, const struct zs_config *c)
{
	const struct zs_layout *lo = &r->layout;
	struct zs_ds3 *d = r->ds3 = zs_calloc(1, sizeof *r->ds3);
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
	d->mod_of = zs_calloc(r->model.nlayers, sizeof *d->mod_of);
	ds3_modules(r);
	uint64_t *n = zs_calloc(nt + 1, sizeof *n);
	for (size_t t = 0; t < nt; t++)
		n[t] = lo->tensor[t].n;
	d->coord = ds_coord_new(n, nt, d->mod_first, d->mod_n, d->nmodules, c, r->world);
	free(n);
	ds3_reset_step(r);
	for (unsigned k = r->r0; k < r->r1; k++)
		run_rank(r, k)->whole = zs_calloc(lo->ntensors, sizeof(void *));
	tracker_set_phase(&r->tracker, ZS_PH_SETUP);
	/* Offloaded, the fp32 partition's .grad is a host buffer of its own,
	 * kept for the run (initialize_optimizer_states, stage3.py 1059-1064;
	 * _release_sub_group drops it only without offload, 1946-1947). */
	for (unsigned k = r->r0; k < r->r1 && c->offload != ZS_OFFLOAD_NONE; k++) {
		size_t bytes = lo->shard * sizeof(float);
		run_rank(r, k)->grad32 = tracker_alloc_host(&r->tracker, k, ZS_CAT_GRAD32, bytes);
		memset(run_rank(r, k)->grad32, 0, bytes);
	}
	alloc_buckets(r); /* __ipg_bucket_flat_buffer, for the whole run */
}

static void ds3_teardown(struct zs_run *r)
{
	for (size_t t = 0; t < r->layout.ntensors; t++)
		if (run_rank(r, r->r0)->whole[t] != NULL)
			release_tensor(r, t);
	free_buckets(r);
	for (unsigned k = r->r0; k < r->r1; k++) {
		free(run_rank(r, k)->whole);
		run_rank(r, k)->whole = NULL;
		tracker_free(&r->tracker, k, run_rank(r, k)->grad32); /* offloaded: the host fp32 grad */
		run_rank(r, k)->grad32 = NULL;
	}
	struct zs_ds3 *d = r->ds3;
	ds_coord_free(d->coord);
	free(d->released);
	free(d->post);
	free(d->mod_first);
	free(d->mod_n);
	free(d->mod_grads);
	free(d->mod_of);
	free(d);
	r->ds3 = NULL;
}

/* Where the grads of bucket entry i are on rank k: in the bucket, or, for
 * a tensor larger than it, in autograd's own grad (the module's, or the
 * block it was moved to when the module's grads were dropped). */
static int oversized(const struct zs_run *r, size_t t) { return r->layout.tensor[t].n > bucket_elements(r); }

static char *entry_grads(const struct zs_run *r, unsigned k, size_t i)
{
	const struct zs_layout_tensor *ts = &r->layout.tensor[r->bucket.unit[i]];
	if (!oversized(r, r->bucket.unit[i]))
		return bucket_at(r, k, r->bucket.at[i]);
	if (run_rank(r, k)->held_grad != NULL)
		return run_rank(r, k)->held_grad;
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
static void ds3_flush(struct zs_run *r)
{
	struct zs_bucket *b = &r->bucket;
	const struct zs_layout *lo = &r->layout;
	size_t N = r->world, esz = psize(r), part = 0, pad = 0;
	if (b->count == 0)
		return;
	for (size_t i = 0; i < b->count; i++) {
		part += lo->tensor[b->unit[i]].s;
		pad += N * lo->tensor[b->unit[i]].s - lo->tensor[b->unit[i]].n;
	}
	int in_place = b->count == 1 && pad == 0;
	tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
		rk->offload_tmp[1] = pad > 0 ? tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, pad * esz) : NULL;
		rk->offload_tmp[0] = in_place ? entry_grads(r, k, 0)
		                              : tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, N * part * esz);
		if (in_place)
			continue;
		char *flat = rk->offload_tmp[0];
		for (size_t q = 0, at = 0; q < N; q++)
			for (size_t i = 0; i < b->count; i++) {
				const struct zs_layout_tensor *ts = &lo->tensor[b->unit[i]];
				size_t lo_q = q * ts->s, n = lo_q >= ts->n ? 0 : ts->n - lo_q < ts->s ? ts->n - lo_q : ts->s;
				memcpy(flat + at * esz, entry_grads(r, k, i) + lo_q * esz, n * esz);
				memset(flat + (at + n) * esz, 0, (ts->s - n) * esz);
				at += ts->s;
			}
		if (rk->offload_tmp[1] != NULL)
			memset(rk->offload_tmp[1], 0, pad * esz);
	}
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = run_rank(r, k)->offload_tmp[0];
		r->ptr_b[k - r->r0] = (char *)run_rank(r, k)->offload_tmp[0] + (size_t)k * part * esz;
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, N * part, r->dt); /* in place */
	for (unsigned k = r->r0; k < r->r1; k++) {
		const char *mine = r->ptr_b[k - r->r0];
		struct zs_rank *rk = run_rank(r, k);
		for (size_t i = 0, at = 0; i < b->count; at += lo->tensor[b->unit[i++]].s) {
			struct zs_slice own = layout_own(lo, ZS_BUF_GRADS, b->unit[i], k);
			memcpy(run_at(r, k, ZS_BUF_GRADS, own.at), mine + at * esz, own.count * esz);
			/* offloaded (partition_grads, 1499-1515): into the host fp32 grad too */
			for (size_t e = 0; e < own.count && r->config->offload != ZS_OFFLOAD_NONE; e++)
				rk->grad32[own.at + e] = r->dt == ZS_F16 ? zs_half_to_float(((const zs_half *)(mine + at * esz))[e])
				                                         : ((const float *)(mine + at * esz))[e];
		}
		if (!in_place)
			tracker_free(&r->tracker, k, rk->offload_tmp[0]);
		tracker_free(&r->tracker, k, rk->offload_tmp[1]);
		tracker_free(&r->tracker, k, rk->held_grad); /* param.grad = None */
		rk->offload_tmp[0] = rk->offload_tmp[1] = rk->held_grad = NULL;
	}
	b->used = b->count = 0;
}

static void ds3_begin_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	ds3_fetch(r, r->ds3->entry);
	if (pass == ZS_PASS_BACKWARD)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, r->layout.unit[u].off, r->layout.unit[u].n);
}

/* The module's autograd grads dropped; a tensor larger than the bucket
 * still waiting in it keeps its grad (__add_grad_to_ipg_bucket copies only
 * a grad that fits, 1279-1288): the engine holds a module's grads as one
 * block, so that grad moves to a block of its own, through an uncounted
 * copy (bookkeeping: DeepSpeed just keeps the tensor). */
static void drop_module_grads(struct zs_run *r)
{
	const struct zs_bucket *b = &r->bucket;
	size_t t = b->count == 1 ? b->unit[0] : 0, bytes = r->layout.tensor[t].n * psize(r);
	if (b->count != 1 || !oversized(r, t) || run_rank(r, r->r0)->held_grad != NULL) {
		run_free_all(r, ZS_BUF_FULL_GRADS);
		return;
	}
	char *keep = zs_malloc((size_t)(r->r1 - r->r0) * bytes);
	for (unsigned k = r->r0; k < r->r1; k++)
		memcpy(keep + (size_t)(k - r->r0) * bytes, entry_grads(r, k, 0), bytes);
	run_free_all(r, ZS_BUF_FULL_GRADS);
	for (unsigned k = r->r0; k < r->r1; k++) {
		run_rank(r, k)->held_grad = tracker_alloc(&r->tracker, k, ZS_CAT_FULL_GRADS, bytes);
		memcpy(run_rank(r, k)->held_grad, keep + (size_t)(k - r->r0) * bytes, bytes);
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
static void ds3_module_done(struct zs_run *r, size_t m, enum zs_pass pass)
{
	struct zs_bucket *b = &r->bucket;
	struct zs_ds3 *d = r->ds3;
	const struct zs_layout *lo = &r->layout;
	int grads = pass == ZS_PASS_BACKWARD && d->mod_grads[m];
	for (size_t t = d->mod_first[m]; grads && t < d->mod_first[m] + d->mod_n[m]; t++) {
		const struct zs_layout_tensor *ts = &lo->tensor[t];
		if (b->used + ts->n > bucket_elements(r) && b->count > 0)
			ds3_flush(r);
		for (unsigned k = r->r0; k < r->r1 && !oversized(r, t); k++)
			memcpy(bucket_at(r, k, b->used), run_at(r, k, ZS_BUF_FULL_GRADS, ts->off - r->base[ZS_BUF_FULL_GRADS]),
			       ts->n * psize(r));
		b->unit[b->count] = t;
		b->at[b->count++] = b->used;
		b->used += ts->n;
		tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	}
	if (grads)
		drop_module_grads(r);
	ds3_release(r, d->entry++);
}

static void ds3_end_unit(struct zs_run *r, size_t u, enum zs_pass pass) { ds3_module_done(r, u, pass); }

/* A transformer's module s of layer l: gathered (and its grads made, in
 * backward) before its step, reduced and released after. */
static void ds3_module(struct zs_run *r, size_t l, size_t s, enum zs_pass pass, int begin)
{
	struct zs_ds3 *d = r->ds3;
	size_t m = d->mod_of[l] + s;
	if (!begin) {
		ds3_module_done(r, m, pass);
		return;
	}
	ds3_fetch(r, d->entry);
	if (pass == ZS_PASS_BACKWARD && d->mod_grads[m]) {
		size_t off = r->layout.tensor[d->mod_first[m]].off, n = 0;
		for (size_t t = d->mod_first[m]; t < d->mod_first[m] + d->mod_n[m]; t++)
			n += r->layout.tensor[t].n;
		run_alloc_full(r, ZS_BUF_FULL_GRADS, off, n);
	}
}

/* independent_gradient_partition_epilogue (1131-1155): what is left. */
static void ds3_reduce(struct zs_run *r) { ds3_flush(r); }

/* step(): _partition_all_parameters (2091; release_and_reset_all,
 * partitioned_param_coordinator.py 444-457) releases every param, the
 * persistent ones too; then the fp32 gradient partition, as ZeRO-1/2's
 * (_prepare_fp32_grad_for_sub_group, stage3.py 1895-1905: one sub-group,
 * sub_group_size 1e12). */
static void ds3_before_optimizer(struct zs_run *r)
{
	struct zs_ds3 *d = r->ds3;
	size_t nrel;
	d->npost = ds_coord_step(d->coord, d->released, &nrel, d->post);
	for (size_t i = 0; i < nrel; i++)
		release_tensor(r, d->released[i]);
	if (r->config->offload == ZS_OFFLOAD_NONE) /* offloaded, the host fp32 grad is ready (_prepare_sub_group, 1920-1922) */
		fp32_grads(r);
}

/* Offloaded, the optimizer steps the host fp32 partition and
 * _reassign_or_swap_out_partitioned_parameters (2069-2075) copy_'s it into
 * the fp16 partitions. On the device (--offload optimizer) torch converts
 * on the host first, a host fp16 copy (copy_kernel_cuda, aten/src/ATen/
 * native/cuda/Copy.cu: src.to(dst's dtype) on the CPU for a blocking
 * CPU-to-GPU copy); host to host (--offload params) converts in place, and
 * fp32 to fp32 needs no copy. The engine's optimizer already wrote the
 * params; this is the host copy the transfer makes, rewriting the same
 * values. */
static void reassign_partitions(struct zs_run *r)
{
	const struct zs_layout *lo = &r->layout;
	if (r->dt != ZS_F16 || params_offloaded(r))
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		zs_half *tmp = tracker_alloc_host(&r->tracker, k, ZS_CAT_PARAM16, lo->shard * sizeof *tmp);
		for (size_t u = 0; u < layout_npieces(lo); u++) {
			struct zs_slice m = layout_own(lo, ZS_BUF_MASTER, u, k), p = layout_own(lo, ZS_BUF_PARAMS, u, k);
			zs_float_to_half_n(tmp + m.at, run_at(r, k, ZS_BUF_MASTER, m.at), m.count);
			memcpy(run_at(r, k, ZS_BUF_PARAMS, p.at), tmp + m.at, m.count * sizeof *tmp);
		}
		tracker_free(&r->tracker, k, tmp);
	}
}

/* The fp32 gradient partition dropped (_release_sub_group, 1943-1950),
 * then _post_step gathers the persistent params (2054-2056), outside the
 * coordinator's count; the next step runs the complete trace. */
static void ds3_after_optimizer(struct zs_run *r)
{
	for (unsigned k = r->r0; k < r->r1 && r->config->offload == ZS_OFFLOAD_NONE; k++) {
		tracker_free(&r->tracker, k, run_rank(r, k)->grad32);
		run_rank(r, k)->grad32 = NULL;
	}
	if (r->config->offload == ZS_OFFLOAD_OPTIMIZER)
		reassign_partitions(r);
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t i = 0; i < r->ds3->npost; i++)
		gather_tensor(r, r->ds3->post[i]);
	r->ds3->complete = 1;
	ds3_reset_step(r);
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

static const struct zs_scheme_ops ds_zero3 = {
	.name = "deepspeed zero3",
	.buffers = ds3_buffers,
	.setup = ds3_setup,
	.teardown = ds3_teardown,
	.begin_unit = ds3_begin_unit,
	.end_unit = ds3_end_unit,
	.module = ds3_module,
	.reduce = ds3_reduce,
	.before_optimizer = ds3_before_optimizer,
	.after_optimizer = ds3_after_optimizer,
	.master32 = 1,
};

const struct zs_scheme_ops *scheme_deepspeed_ops(enum zs_scheme scheme)
{
	return scheme == ZS_ZERO1 ? &ds_zero1 : scheme == ZS_ZERO2 ? &ds_zero2 : scheme == ZS_ZERO3 ? &ds_zero3 : NULL;
}

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
	return (1 + c->ds_overlap_comm) * written * g + S * (g + 4) + (c->precision == ZS_FP32 ? 4 * S : 0) + coalesced +
	       (c->offload != ZS_OFFLOAD_NONE ? 4 * S + 2 * psi * g : 0);
}
