/*
 * ag_ds3 — DeepSpeed's ZeRO-3 over the PyTorch step (util/ag_ds3.h).
 * Lines cited are runtime/zero/stage3.py's at DeepSpeed's 38327e0 unless
 * said (pp.py: partition_parameters.py, cc.py: runtime/comm/
 * coalesced_collectives.py); docs/schedule.md, "ZeRO-3 over the PyTorch
 * step", has the reading in full.
 */
#include "util/ag_ds3.h"

#include <stdlib.h>
#include <string.h>

#include "util/ag_ds.h"
#include "util/ag_pass.h"
#include "util/util.h"

#define NO AG_NONE

/* po.py mark_persistent_parameters' threshold at its default
 * (stage3_param_persistence_threshold, runtime/zero/config.py 214) */
#define DS3_PERSIST 100000
/* sub_group_size: util/config.h's ZS_DS_SUB_GROUP, DeepSpeed's engine's
 * default (--ds-sub-group-size takes no other value under --wrapper
 * deepspeed): one sub group while the partition's elements are at most it
 * (_create_fp16_sub_groups, stage3.py 943-966) */

struct ds3 {
	struct ag_pass *p;
	uint64_t B;
	size_t n;                /* trainable parameters: the client Adam's order, and ds_id's */
	uint64_t *numel, *off;   /* each one's elements, and its place in the flat buffers */
	uint32_t flat, gpart, bucket;
	/* the bucket: its parameters (in arrival order) and their places */
	size_t *bk, nb;
	uint64_t *bo, used;
};

static int by_k(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

/* __reduce_and_partition_ipg_grads (1294-1328) at N = 1: the bucket's
 * parameters sorted by ds_id (1314), reduce_scatter_coalesced (cc.py
 * 158-218): one gradient (N divides it) divided in place, its view of the
 * bucket; several, their cat in that order, divided; the reduce-scatter
 * (moving nothing at N = 1); partition_grads (1466-1527) copies each
 * output, a narrow, into its gradient partition; .grad None (a bucket
 * view); the cat freed with the list. */
static void reduce(struct ds3 *d, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	if (d->nb == 0)
		return;
	size_t *k = zs_malloc(d->nb * sizeof *k);
	uint32_t *src = zs_malloc(d->nb * sizeof *src);
	uint64_t *bo_of = zs_malloc(d->n * sizeof *bo_of);
	for (size_t j = 0; j < d->nb; j++) {
		k[j] = d->bk[j];
		bo_of[d->bk[j]] = d->bo[j];
	}
	qsort(k, d->nb, sizeof *k, by_k);
	uint32_t cat = NO, red;
	if (d->nb == 1) {
		red = ag_ds_view(p, d->bucket, bo_of[k[0]], d->numel[k[0]]);
		src[0] = red;
	} else {
		cat = agp_storage(p, "cat (reduce_scatter_coalesced's flat buffer)", AG_F32, d->used, 0, ZS_CAT_BUCKETS);
		agp_alloc(p, cat, ph);
		uint64_t at = 0;
		for (size_t j = 0; j < d->nb; j++) {
			src[j] = ag_ds_view(p, cat, at, d->numel[k[j]]);
			agp_op(p, ph, AG_OP_COPY, ag_ds_view(p, d->bucket, bo_of[k[j]], d->numel[k[j]]), src[j]);
			at += d->numel[k[j]];
		}
		red = cat;
	}
	/* div_(world_sz): a Python int (8 bytes wrapped, and its fp32 copy) */
	agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, red, 1.0, ph);
	agp_op(p, ph, AG_OP_ALL_REDUCE_SUM_, red, red);
	for (size_t j = 0; j < d->nb; j++)
		agp_op(p, ph, AG_OP_COPY, src[j], ag_ds_view(p, d->gpart, d->off[k[j]], d->numel[k[j]]));
	if (cat != NO)
		agp_free(p, cat, ph);
	free(k);
	free(src);
	free(bo_of);
	d->nb = 0;
	d->used = 0;
}

/* A gradient from its AccumulateGrad hook
 * (reduce_independent_p_g_buckets_and_remove_grads, 1258-1271): the
 * bucket reduced first when it would overflow and is not empty; then
 * __add_grad_to_ipg_bucket (1275-1290) copies it into the bucket's next
 * elements and makes .grad a view of them, which frees autograd's
 * gradient (storage gs). */
static void ipg_add(struct ds3 *d, size_t k, uint32_t g, uint32_t gs, enum zs_phase ph)
{
	if (d->used + d->numel[k] > d->B && d->used > 0)
		reduce(d, ph);
	ag_ds_bucket_put(d->p, d->bucket, g, gs, k, d->numel[k], d->bk, d->bo, &d->nb, &d->used, ph);
}

/* get_grad_norm_direct (1765-1823) over the gradient partitions' narrows
 * and step()'s own norm (2099-2103); the values are stand-ins (no later
 * op reads them at gradient_clipping 0). Returns the storages that live
 * until step() returns (norm_groups' one and scaled_global_grad_norm). */
static void norm(struct ds3 *d, uint32_t gnorm, uint32_t keep[2], enum zs_phase po)
{
	struct ag_pass *p = d->p;
	uint32_t *nrm = zs_malloc(d->n * sizeof *nrm);
	for (size_t k = 0; k < d->n; k++) { /* g.double().norm(2): the copy freed */
		uint32_t dbl = agp_storage(p, "_to_copy (.double())", AG_F64, d->numel[k], 0, ZS_CAT_SCRATCH);
		agp_alloc(p, dbl, po);
		agp_op(p, po, AG_OP_COPY, ag_ds_view(p, d->gpart, d->off[k], d->numel[k]), dbl);
		nrm[k] = ag_ds_made(p, "linalg_vector_norm (norm(2))", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
		agp_free(p, dbl, po);
	}
	/* torch.sum(torch.pow(torch.stack(grad_norms), 2)), each argument
	 * freed once its call returns */
	uint32_t st = ag_ds_made(p, "stack (grad_norms)", AG_F64, d->n, 0, ZS_CAT_SCRATCH, 0, po);
	uint32_t pw = ag_ds_made(p, "pow (., 2)", AG_F64, d->n, 0, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, st, po);
	uint32_t tn = ag_ds_made(p, "sum (total_norm_cuda)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, pw, po);
	agp_op(p, po, AG_OP_ALL_REDUCE_SUM_, tn, tn);
	uint32_t rt = ag_ds_made(p, "pow (** 0.5)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	uint32_t inf, nan, ion, err;
	ag_ds_norm_flags(p, po, &inf, &nan, &ion, &err);
	/* inf_or_nan * err + inf_or_nan.logical_not() * total_norm */
	uint32_t m1 = ag_ds_made(p, "mul (inf_or_nan * err)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
	uint32_t ln = ag_ds_made(p, "logical_not", AG_BOOL, 0, 1, ZS_CAT_SCRATCH, 0, po);
	uint32_t m2 = ag_ds_made(p, "mul (not inf_or_nan * total_norm)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, ln, po);
	uint32_t bl = ag_ds_made(p, "add (the blend)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, m1, po);
	agp_free(p, m2, po);
	agp_free(p, rt, po); /* total_norm rebound */
	/* the return: the frame's locals in their order */
	agp_free(p, tn, po);
	for (size_t k = d->n; k-- > 0;) /* a list drops its items last first */
		agp_free(p, nrm[k], po);
	agp_free(p, inf, po);
	agp_free(p, nan, po);
	agp_free(p, ion, po);
	agp_free(p, err, po);
	free(nrm);
	/* vector_norm(stack(norm_groups)), then _global_grad_norm = it /
	 * loss_scale (a wrapped 1.0; float64 throughout: no copy), replacing
	 * the last step's */
	uint32_t st1 = ag_ds_made(p, "stack (norm_groups)", AG_F64, 1, 0, ZS_CAT_SCRATCH, 0, po);
	uint32_t vn = ag_ds_made(p, "linalg_vector_norm (scaled_global_grad_norm)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, st1, po);
	uint32_t wn = ag_ds_made(p, "scalar (wrapped number: loss_scale)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 1.0, po);
	uint32_t q = ag_ds_made(p, "div (scaled_global_grad_norm / loss_scale)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
	agp_free(p, wn, po);
	agp_op(p, po, AG_OP_COPY, q, gnorm); /* the new one kept, the old one gone */
	agp_free(p, q, po);
	keep[0] = bl;
	keep[1] = vn;
}

/* ------------------------------------------------------------------------ */

int ag_ds3_apply(struct ag_step *s, const struct ag_options *o, unsigned world, uint64_t bucket, char **cause)
{
	if (world != 1)
		return zs_fail(cause, "--wrapper deepspeed --schemes zero3: built at N = 1 so far (N = %u: the step's leaf "
		               "module marks and saved weight.t() views are built, ag_options.ds3_leaf_marks, but not the "
		               "pass that gathers and releases over them; docs/schedule.md, \"What is left for N > 1\")",
		               world);
	/* the client Adam's parameters, in its order: each one's ds_id
	 * too (Init converts module.parameters(), the order the client
	 * Adam was given) and its place in lp_param_buffer (N = 1) */
	struct ag_ds_params pp;
	ag_ds_params_get(s, &pp);
	struct ag_pass P = {.s = s, .cap_tensors = s->ntensors};
	struct ag_pass *p = &P;
	const uint64_t L = pp.L;
	struct ds3 D = {.p = p, .B = bucket, .n = pp.n, .numel = pp.numel, .off = pp.off};
	struct ds3 *d = &D;
	size_t npersist = 0;
	for (size_t k = 0; k < d->n; k++)
		npersist += d->numel[k] <= DS3_PERSIST;
	int rc = 0;
	for (size_t k = 0; k < d->n && rc == 0; k++)
		if (d->numel[k] > bucket) /* __add_grad_to_ipg_bucket leaves it in .grad (1279-1290) */
			rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: a parameter of %llu elements is larger than "
			             "the reduce bucket (%llu): DeepSpeed reduces it from its own .grad, which is not built yet "
			             "(give --ds-reduce-bucket %llu or more)", (unsigned long long)d->numel[k],
			             (unsigned long long)bucket, (unsigned long long)d->numel[k]);
	/* _post_step's all_gather of a list of one takes _allgather_params,
	 * which copies even at N = 1 (pp.py 1517-1518, 1895-1970) */
	if (rc == 0 && npersist == 1)
		rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: one parameter of the model persists (at most %d "
		             "elements): DeepSpeed gathers it apart after each step, which is not built yet", DS3_PERSIST);
	if (rc == 0 && L > ZS_DS_SUB_GROUP)
		rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: %llu parameters, more than DeepSpeed's sub_group_size "
		             "(%.0f): its step over several sub groups is not built yet", (unsigned long long)L,
		             ZS_DS_SUB_GROUP);
	if (rc == 0 && d->n == 0)
		rc = zs_fail(cause, "--wrapper deepspeed: internal error: the step trains no parameter");
	if (rc != 0) /* the input's: nothing written */
		goto out;
	d->bk = zs_malloc(d->n * sizeof *d->bk);
	d->bo = zs_malloc(d->n * sizeof *d->bo);

	/* the buffers: lp_param_buffer, the fp32 partition (what the client
	 * Adam updates: a parameter to it), the gradient partitions, the
	 * bucket, Adam's state, _global_grad_norm and inf_or_nan_tracker */
	d->flat = agp_storage(p, "empty (defragment's lp_param_buffer)", AG_F32, L, 0, ZS_CAT_PARAM32);
	s->tensor[d->flat].role = AG_ROLE_PARAM;
	uint32_t fp32p = agp_storage(p, "clone (fp32_partitioned_groups_flat)", AG_F32, L, 0, ZS_CAT_MASTER32);
	s->tensor[fp32p].role = AG_ROLE_PARAM;
	d->gpart = agp_storage(p, "zeros (grad_partitions_flat_buffer)", AG_F32, L, 0, ZS_CAT_GRAD32);
	s->tensor[d->gpart].role = AG_ROLE_GRAD;
	d->bucket = agp_storage(p, "empty (__ipg_bucket_flat_buffer)", AG_F32, bucket, 0, ZS_CAT_BUCKETS);
	uint32_t am, av, astep, gnorm;
	ag_ds_adam_state(p, L, AG_F64, &am, &av, &astep, &gnorm);

	/* deepspeed.initialize: the engine's _broadcast_model (the
	 * parameters carry no ds_id: engine.py 1221-1222, 1283-1284). The
	 * model's parameters become views of lp_param_buffer (at N = 1 a
	 * fetch makes param.data a view of its partition, pp.py 44-80,
	 * 810-820: the forward reads the buffer). */
	uint32_t *orig = ag_ds_flat_views(p, &pp, d->flat);
	const enum zs_phase ph0 = ZS_PH_SETUP;
	/* Init(module=model) (pp.py 1034-1036, 1052-1067): each parameter
	 * broadcast again, its partition made and filled, its data freed
	 * (free_param's empty(0) allocates nothing) */
	uint32_t *part = zs_malloc(d->n * sizeof *part);
	for (size_t k = 0; k < d->n; k++) {
		agp_op(p, ph0, AG_OP_BROADCAST_, orig[pp.w[k]], orig[pp.w[k]])->arg[0] = 0;
		part[k] = agp_storage(p, "empty (ds_tensor)", AG_F32, d->numel[k], 0, ZS_CAT_PARAM32);
		agp_alloc(p, part[k], ph0);
		agp_op(p, ph0, AG_OP_COPY, orig[pp.w[k]], agp_view_shaped(p, part[k], orig[pp.w[k]], 0));
		agp_free(p, orig[pp.w[k]], ph0);
	}
	/* the optimizer's constructor: inf_or_nan_tracker (263); defragment
	 * (574-600): the partitions copied into one buffer, each freed */
	ag_ds_made(p, "zeros (inf_or_nan_tracker)", AG_BOOL, 1, 0, ZS_CAT_SCRATCH, 0, ph0);
	agp_alloc(p, d->flat, ph0);
	for (size_t k = 0; k < d->n; k++) {
		agp_op(p, ph0, AG_OP_COPY, ag_ds_view(p, part[k], 0, d->numel[k]),
		       ag_ds_view(p, d->flat, d->off[k], d->numel[k]));
		agp_free(p, part[k], ph0);
	}
	/* _create_fp32_partitions' clone (906); initialize_optimizer_states'
	 * zeros of the whole parameters' elements (1030-1032), dropped
	 * (1088-1090); the bucket (537-540); grad_partitions_flat_buffer
	 * (547-549) */
	agp_alloc(p, fp32p, ph0);
	agp_op(p, ph0, AG_OP_COPY, d->flat, fp32p);
	uint32_t z = ag_ds_made(p, "zeros (initialize_optimizer_states' gradient_buffer)", AG_F32, L, 0, ZS_CAT_GRAD32,
	                        0, ph0);
	agp_free(p, z, ph0);
	agp_alloc(p, d->bucket, ph0);
	agp_alloc(p, d->gpart, ph0);
	agp_op(p, ph0, AG_OP_FILL, NO, d->gpart)->arg[0] = 0;
	/* create_reduce_and_remove_grad_hooks (1161-1245): each parameter's
	 * all_gather -> _allgather_params (pp.py 1895-1970): a flat empty,
	 * the partition copied in, the whole copy (the data until
	 * partition() frees it); the flat freed at its return */
	for (size_t k = 0; k < d->n; k++) {
		uint32_t f = agp_storage(p, "empty (_allgather_params' flat_tensor)", AG_F32, d->numel[k], 0, ZS_CAT_GATHERED);
		agp_alloc(p, f, ph0);
		agp_op(p, ph0, AG_OP_COPY, ag_ds_view(p, d->flat, d->off[k], d->numel[k]), f);
		uint32_t r = agp_storage(p, "empty (_allgather_params' replicated_tensor)", AG_F32, d->numel[k], 0,
		                         ZS_CAT_GATHERED);
		agp_alloc(p, r, ph0);
		agp_op(p, ph0, AG_OP_COPY, f, r);
		agp_free(p, f, ph0);
		agp_free(p, r, ph0);
	}
	free(part);
	agp_take(p, &s->setup, &s->nsetup);
	ag_ds_first_step(p, am, av, astep, gnorm);

	/* the step. Stage 3's backward (2267-2287): loss_scaler.backward of
	 * loss.float() (the loss itself in fp32); the bucket is the set-up's */
	struct ag_ds_walk wk;
	ag_ds_walk_begin(&wk, p, &pp, NO, 1, 1);
	const struct ag_event *e;
	size_t kg;
	while ((rc = ag_ds_next(&wk, &e, &kg, cause)) == 1) {
		if (e->kind == AG_EV_GRAD_READY) {
			ipg_add(d, kg, wk.put_t, wk.put_s, e->phase);
			continue;
		}
		/* the optimizer's mark: engine.py allreduce_gradients (2048-2053) -> the
		 * epilogue (1131-1156): the rest reduced;
		 * averaged_gradients the partitions' narrows */
		reduce(d, ZS_PH_BACKWARD);
		ag_ds_backward_returns(&wk, ZS_PH_BACKWARD);
		agp_copy(p, e);
		/* step (2086-2148): _partition_all_parameters (nothing at
		 * N = 1), the norms */
		const enum zs_phase po = ZS_PH_OPTIMIZER;
		uint32_t keep[2];
		norm(d, gnorm, keep, po);
		/* _prepare_fp32_grad_for_sub_group (1895-1915): flatten
		 * of the narrows (a cat; the narrow itself where there
		 * is one); unscale_and_clip_grads' mul_(1. / 1.0)
		 * (2178-2187); the client Adam (972-989); lp_param_buffer
		 * copied from the fp32 partition (2069-2077);
		 * _release_sub_group drops the cat (1943-1953) */
		uint32_t g = d->gpart, cat = NO;
		if (d->n > 1) {
			g = cat = agp_storage(p, "cat (single_grad_partition)", AG_F32, L, 0, ZS_CAT_GRAD32);
			p->s->tensor[cat].role = AG_ROLE_GRAD;
			agp_alloc(p, cat, po);
			for (size_t k = 0; k < d->n; k++)
				agp_op(p, po, AG_OP_COPY, ag_ds_view(p, d->gpart, d->off[k], d->numel[k]),
				       ag_ds_view(p, cat, d->off[k], d->numel[k]));
		}
		agp_scalar_inplace(p, AG_OP_MUL_SCALAR_, g, 1.0, po);
		ag_ds_adam_step(p, o, &(struct ag_param_state){fp32p, g, am, av, astep});
		agp_op(p, po, AG_OP_COPY, fp32p, d->flat);
		if (cat != NO)
			agp_free(p, cat, po);
		/* _post_step's gather of the persistent parameters: views
		 * at N = 1 (pp.py 1795-1798); step() returns */
		agp_free(p, keep[0], po);
		agp_free(p, keep[1], po);
	}
	rc = ag_ds_walk_end(&wk, rc, cause);
	free(orig);
out:
	ag_ds_params_free(&pp);
	free(d->bo);
	free(d->bk);
	return rc;
}
