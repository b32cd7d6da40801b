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
	unsigned N;
	uint64_t B;
	size_t n;                /* trainable parameters: the client Adam's order, and ds_id's */
	uint64_t *numel;         /* each one's elements (ds_numel) */
	uint64_t *c, *po, S3;    /* its partition's, ceil(n/N) (_aligned_size, pp.py 1474-1479), its place in
	                          * the partitions' flat buffers, and their size: at N = 1 its elements and its
	                          * place in a flat buffer of them all */
	uint32_t *gath;          /* N > 1: each one's gathered copy, the model's parameter (_post_step's) */
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
static void reduce_n(struct ds3 *d, const size_t *k, const uint64_t *bo_of, enum zs_phase ph);

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
	if (d->N > 1) {
		reduce_n(d, k, bo_of, ph);
		free(k);
		free(src);
		free(bo_of);
		d->nb = 0;
		d->used = 0;
		return;
	}
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
		agp_op(p, ph, AG_OP_COPY, src[j], ag_ds_view(p, d->gpart, d->po[k[j]], d->numel[k[j]]));
	if (cat != NO)
		agp_free(p, cat, ph);
	free(k);
	free(src);
	free(bo_of);
	d->nb = 0;
	d->used = 0;
}

/* Rank r's chunk of parameter k's gradient (cc.py 170-175:
 * flat[r·c : r·c + c], c = ceil(n/N); empty past the end): its elements. */
static uint64_t chunk_len(const struct ds3 *d, size_t k, unsigned r)
{
	uint64_t a = (uint64_t)r * d->c[k];
	return a >= d->numel[k] ? 0 : d->numel[k] - a < d->c[k] ? d->numel[k] - a : d->c[k];
}

/* The events from `from` on are rank r's alone. */
/* reduce()'s at N > 1: reduce_scatter_coalesced (cc.py 158-218) over the
 * bucket's gradients sorted by ds_id (k[], their places bo_of[]). One gradient that N divides is
 * reduced where it is (its view of the bucket, 179-182); otherwise the
 * chunks rank after rank, each gradient's in that order, every short
 * chunk (an empty one too) followed by a torch.empty of its padding of
 * its own (183-197: made while the list is built, before the one cat of
 * N·Σ c elements, 199). div_(world_sz) in place (a Python int, 201); the
 * reduce-scatter (202-206, comm/comm.py 252-277) into the rank's chunk of
 * it, each output a narrow of that chunk of the rank's own elements
 * (210-217); the list and its paddings dropped as the function returns
 * (the last item first). partition_grads (1466-1527): each output copied
 * into its narrow of grad_partitions_flat_buffer (the first micro-step's
 * copy_, 1484-1489), nothing on a rank whose chunk is empty (1471-1475);
 * the cat freed with the outputs. The paddings' values are zeros here
 * (an empty's are whatever the allocator held; the reduce-scatter's sum
 * of them lands in the chunk's tail, which no rank copies). The
 * executor's reduce-scatter writes every rank's chunk at the start of
 * the rank's buffer (one view for all ranks; no bytes either way), where
 * DeepSpeed's lands at r·Σ c. */
static void reduce_n(struct ds3 *d, const size_t *k, const uint64_t *bo_of, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	const unsigned N = d->N;
	uint64_t sc = 0;
	for (size_t j = 0; j < d->nb; j++)
		sc += d->c[k[j]];
	uint32_t cat = NO, red, *pad = zs_malloc((size_t)N * d->nb * sizeof *pad);
	size_t npad = 0;
	if (d->nb == 1 && d->numel[k[0]] % N == 0) {
		red = ag_ds_view(p, d->bucket, bo_of[k[0]], d->numel[k[0]]);
	} else {
		for (unsigned r = 0; r < N; r++)
			for (size_t j = 0; j < d->nb; j++)
				if (chunk_len(d, k[j], r) < d->c[k[j]]) {
					pad[npad] = agp_storage(p, "empty (reduce_scatter_coalesced's padding)", AG_F32,
					                        d->c[k[j]] - chunk_len(d, k[j], r), 0, ZS_CAT_BUCKETS);
					agp_alloc(p, pad[npad], ph);
					agp_op(p, ph, AG_OP_FILL, NO, pad[npad++])->arg[0] = 0;
				}
		cat = agp_storage(p, "cat (reduce_scatter_coalesced's flat buffer)", AG_F32, (uint64_t)N * sc, 0,
		                  ZS_CAT_BUCKETS);
		agp_alloc(p, cat, ph);
		uint64_t at = 0;
		size_t ip = 0;
		for (unsigned r = 0; r < N; r++)
			for (size_t j = 0; j < d->nb; j++) {
				uint64_t len = chunk_len(d, k[j], r);
				if (len > 0) {
					uint32_t dst = ag_ds_view(p, cat, at, len);
					agp_op(p, ph, AG_OP_COPY,
					       ag_ds_view(p, d->bucket, bo_of[k[j]] + (uint64_t)r * d->c[k[j]], len), dst);
				}
				if (len < d->c[k[j]])
					agp_op(p, ph, AG_OP_COPY, pad[ip++], ag_ds_view(p, cat, at + len, d->c[k[j]] - len));
				at += d->c[k[j]];
			}
		red = cat;
	}
	/* div_(world_sz): a Python int (8 bytes wrapped, and its fp32 copy) */
	agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, red, (double)N, ph);
	uint32_t out = ag_ds_view(p, p->s->tensor[red].storage, p->s->tensor[red].offset, sc);
	agp_op(p, ph, AG_OP_REDUCE_SCATTER_SUM, red, out);
	while (npad > 0)
		agp_free(p, pad[--npad], ph);
	uint64_t at = 0;
	for (size_t j = 0; j < d->nb; j++) {
		size_t kj = k[j];
		if (chunk_len(d, kj, N - 1) == d->c[kj]) { /* every rank's chunk whole: one copy for all */
			uint32_t src = ag_ds_view(p, p->s->tensor[out].storage, p->s->tensor[out].offset + at, d->c[kj]);
			agp_op(p, ph, AG_OP_COPY, src, ag_ds_view(p, d->gpart, d->po[kj], d->c[kj]));
		} else
			for (unsigned r = 0; r < N; r++) {
				uint64_t len = chunk_len(d, kj, r);
				if (len == 0)
					continue;
				size_t from = p->nev;
				uint32_t src = ag_ds_view(p, p->s->tensor[out].storage, p->s->tensor[out].offset + at, len);
				agp_op(p, ph, AG_OP_COPY, src, ag_ds_view(p, d->gpart, d->po[kj], len));
				ag_ds_rank_only(p, from, r);
			}
		at += d->c[kj];
	}
	if (cat != NO)
		agp_free(p, cat, ph);
	free(pad);
}

/* A gradient from its AccumulateGrad hook (register_grad_hook,
 * utils/torch.py 25-31: under 2.1 and later the parameter's
 * post-accumulate-grad hook, which fires at the same point)
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
static void norm(struct ds3 *d, uint32_t gnorm, uint32_t keep[2], int first, enum zs_phase po)
{
	struct ag_pass *p = d->p;
	uint32_t *nrm = zs_malloc(d->n * sizeof *nrm);
	for (size_t k = 0; k < d->n; k++) { /* g.double().norm(2): the copy freed */
		uint32_t dbl = agp_storage(p, "_to_copy (.double())", AG_F64, d->c[k], 0, ZS_CAT_SCRATCH);
		agp_alloc(p, dbl, po);
		agp_op(p, po, AG_OP_COPY, ag_ds_view(p, d->gpart, d->po[k], d->c[k]), dbl);
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
	if (first) { /* the first: no tensor before it (the Python 0. of 191) */
		agp_alloc(p, gnorm, po);
		agp_op(p, po, AG_OP_FILL, NO, gnorm)->arg[0] = 0;
		agp_free(p, wn, po);
	} else {
		uint32_t q = ag_ds_made(p, "div (scaled_global_grad_norm / loss_scale)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0,
		                        po);
		agp_free(p, wn, po);
		agp_op(p, po, AG_OP_COPY, q, gnorm); /* the new one kept, the old one gone */
		agp_free(p, q, po);
	}
	keep[0] = bl;
	keep[1] = vn;
}

/* _post_step's gather of the persistent parameters (stage3.py 2050-2056
 * -> pp.py _allgather_params_coalesced, 1789-1893, at N > 1): each one's
 * flat torch.empty(ceil(n/N)·N) in the list's order (1817-1822), then
 * each all_gather_into_tensor of its partition (ds_tensor.to(device) the
 * partition itself on the CPU, 1808; 1838-1842), the data its narrow
 * (1886): the model's parameter (a view of it from the set-up on). */
static void post_step_gather(struct ds3 *d, enum zs_phase ph)
{
	for (size_t k = 0; k < d->n; k++)
		agp_alloc(d->p, d->gath[k], ph);
	for (size_t k = 0; k < d->n; k++)
		agp_op(d->p, ph, AG_OP_ALL_GATHER, ag_ds_view(d->p, d->flat, d->po[k], d->c[k]), d->gath[k]);
}

/* The state a step's list is written with (ds3_step). */
struct ds3_state {
	uint32_t fp32p, am, av, astep, gnorm;
};

/* One step's list into s->event, from the plain loop's steady list there.
 * first: the run's first step (ag_step.step1, at N = 1 so far), which
 * differs from the steady step in what the client Adam and the optimizer
 * make once: Adam's state, made by its first step() (torch/optim/adam.py,
 * 1.13's 202-222, inside _optimizer_step, 972-989), and _global_grad_norm,
 * a Python float 0. (191) until the first step() makes the tensor
 * (step()'s norm, 2099-2103) that later steps replace. 0, or -2 (an internal error). */
static int ds3_step(struct ds3 *d, const struct ag_ds_params *pp, const struct ag_options *o,
                    const struct ds3_state *sv, int first, char **cause)
{
	struct ag_pass *p = d->p;
	const unsigned world = d->N;
	const uint32_t fp32p = sv->fp32p, am = sv->am, av = sv->av, astep = sv->astep, gnorm = sv->gnorm;
	const uint64_t S3 = d->S3;
	int rc;
	/* the step. Stage 3's backward (2267-2287): loss_scaler.backward of
	 * loss.float() (the loss itself in fp32); the bucket is the set-up's */
	struct ag_ds_walk wk;
	ag_ds_walk_begin(&wk, p, pp, NO, 1, 1);
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
		/* step (2086-2148): _partition_all_parameters (2457-2458 ->
		 * po.py 185-192 -> ppc.py release_and_reset_all, 444-457:
		 * every parameter released, in the model's order, persistent
		 * ones too; nothing at N = 1), the norms */
		const enum zs_phase po = ZS_PH_OPTIMIZER;
		for (size_t k = 0; world > 1 && k < d->n; k++)
			agp_free(p, d->gath[k], po);
		uint32_t keep[2];
		norm(d, gnorm, keep, first, po);
		/* _prepare_fp32_grad_for_sub_group (1895-1915): flatten
		 * of the narrows (a cat; the narrow itself where there
		 * is one); unscale_and_clip_grads' mul_(1. / 1.0)
		 * (2178-2187); the client Adam (972-989); lp_param_buffer
		 * copied from the fp32 partition (2069-2077);
		 * _release_sub_group drops the cat (1943-1953) */
		uint32_t g = d->gpart, cat = NO;
		if (d->n > 1) {
			g = cat = agp_storage(p, "cat (single_grad_partition)", AG_F32, S3, 0, ZS_CAT_GRAD32);
			p->s->tensor[cat].role = AG_ROLE_GRAD;
			agp_alloc(p, cat, po);
			for (size_t k = 0; k < d->n; k++)
				agp_op(p, po, AG_OP_COPY, ag_ds_view(p, d->gpart, d->po[k], d->c[k]),
				       ag_ds_view(p, cat, d->po[k], d->c[k]));
		}
		agp_scalar_inplace(p, AG_OP_MUL_SCALAR_, g, 1.0, po);
		ag_ds_adam_step(p, o, &(struct ag_param_state){fp32p, g, am, av, astep}, first);
		agp_op(p, po, AG_OP_COPY, fp32p, d->flat);
		if (cat != NO)
			agp_free(p, cat, po);
		/* _post_step's gather of the persistent parameters: views
		 * at N = 1 (pp.py 1795-1798); step() returns */
		if (world > 1)
			post_step_gather(d, po);
		agp_free(p, keep[0], po);
		agp_free(p, keep[1], po);
	}
	rc = ag_ds_walk_end(&wk, rc, cause);
	return rc;
}

/* ------------------------------------------------------------------------ */

int ag_ds3_apply(struct ag_step *s, const struct ag_options *o, unsigned world, unsigned wmax, uint64_t bucket,
                 char **cause)
{
	if (world < 1)
		return zs_fail(cause, "--wrapper deepspeed: N must be at least 1");
	/* the client Adam's parameters, in its order: each one's ds_id
	 * too (Init converts module.parameters(), the order the client
	 * Adam was given) and its place in lp_param_buffer (N = 1) */
	struct ag_ds_params pp;
	ag_ds_params_get(s, &pp);
	struct ag_pass P = {.s = s, .cap_tensors = s->ntensors};
	struct ag_pass *p = &P;
	struct ds3 D = {.p = p, .N = world, .B = bucket, .n = pp.n, .numel = pp.numel};
	struct ds3 *d = &D;
	/* each ds_tensor ceil(n/N) elements (_partition_param, pp.py 1609;
	 * _aligned_size 1474-1479), their flat buffers S₃ = Σ ceil(n/N) */
	d->c = zs_malloc((d->n ? d->n : 1) * sizeof *d->c);
	d->po = zs_malloc((d->n ? d->n : 1) * sizeof *d->po);
	for (size_t k = 0; k < d->n; k++) {
		d->c[k] = (d->numel[k] + world - 1) / world;
		d->po[k] = d->S3;
		d->S3 += d->c[k];
	}
	const uint64_t S3 = d->S3;
	size_t npersist = 0;
	uint64_t big = 0;
	for (size_t k = 0; k < d->n; k++) {
		npersist += d->numel[k] <= DS3_PERSIST;
		if (d->numel[k] > DS3_PERSIST && d->numel[k] > big)
			big = d->numel[k];
	}
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
	/* at N > 1 a parameter that does not persist is fetched and released
	 * module by module in the steady step too (docs/schedule.md, "What is
	 * left for N > 1", (2)) */
	if (rc == 0 && wmax > 1 && big > 0)
		rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3 at N = %u: a parameter of %llu elements does not "
		             "persist (more than %d): its gathers and releases in forward and backward are not built yet "
		             "(give --world 1)", wmax, (unsigned long long)big, DS3_PERSIST);
	if (rc == 0 && S3 > ZS_DS_SUB_GROUP)
		rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: %llu parameters, more than DeepSpeed's sub_group_size "
		             "(%.0f): its step over several sub groups is not built yet", (unsigned long long)S3,
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
	d->flat = agp_storage(p, "empty (defragment's lp_param_buffer)", AG_F32, S3, 0, ZS_CAT_PARAM32);
	s->tensor[d->flat].role = AG_ROLE_PARAM;
	uint32_t fp32p = agp_storage(p, "clone (fp32_partitioned_groups_flat)", AG_F32, S3, 0, ZS_CAT_MASTER32);
	s->tensor[fp32p].role = AG_ROLE_PARAM;
	d->gpart = agp_storage(p, "zeros (grad_partitions_flat_buffer)", AG_F32, S3, 0, ZS_CAT_GRAD32);
	s->tensor[d->gpart].role = AG_ROLE_GRAD;
	d->bucket = agp_storage(p, "empty (__ipg_bucket_flat_buffer)", AG_F32, bucket, 0, ZS_CAT_BUCKETS);
	uint32_t am, av, astep, gnorm;
	ag_ds_adam_state(p, S3, AG_F64, &am, &av, &astep, &gnorm);

	/* deepspeed.initialize: the engine's _broadcast_model (the
	 * parameters carry no ds_id: engine.py 1221-1222, 1283-1284). The
	 * model's parameters become views of lp_param_buffer (at N = 1 a
	 * fetch makes param.data a view of its partition, pp.py 44-80,
	 * 810-820: the forward reads the buffer); at N > 1 each a view of its
	 * gathered copy (_post_step's, ceil(n/N)·N elements: the tiny models'
	 * parameters all persist, so the steady step's forward and backward
	 * gather nothing and read these) */
	if (world > 1) {
		d->gath = zs_malloc(d->n * sizeof *d->gath);
		for (size_t k = 0; k < d->n; k++)
			d->gath[k] = agp_storage(p, "empty (_allgather_params_coalesced's flat_tensor)", AG_F32,
			                         d->c[k] * world, 0, ZS_CAT_GATHERED);
	}
	uint32_t *orig = ag_ds_param_views(p, &pp, d->flat, d->gath);
	const enum zs_phase ph0 = ZS_PH_SETUP;
	/* Init(module=model) (pp.py 1034-1036, 1052-1067): each parameter
	 * broadcast again, its partition made and filled (at N > 1 the rank's
	 * chunk, 1609-1616; the tail past n is the padding, unset in
	 * DeepSpeed, zeros here), its data freed (free_param's empty(0)
	 * allocates nothing) */
	uint32_t *part = zs_malloc(d->n * sizeof *part);
	for (size_t k = 0; k < d->n; k++) {
		agp_op(p, ph0, AG_OP_BROADCAST_, orig[pp.w[k]], orig[pp.w[k]])->arg[0] = 0;
		part[k] = agp_storage(p, "empty (ds_tensor)", AG_F32, d->c[k], 0, ZS_CAT_PARAM32);
		agp_alloc(p, part[k], ph0);
		if (world == 1)
			agp_op(p, ph0, AG_OP_COPY, orig[pp.w[k]], agp_view_shaped(p, part[k], orig[pp.w[k]], 0));
		else
			agp_op(p, ph0, AG_OP_SHARD, orig[pp.w[k]], part[k]);
		agp_free(p, orig[pp.w[k]], ph0);
	}
	/* the optimizer's constructor: inf_or_nan_tracker (263); defragment
	 * (574-600): the partitions copied into one buffer, each freed */
	ag_ds_made(p, "zeros (inf_or_nan_tracker)", AG_BOOL, 1, 0, ZS_CAT_SCRATCH, 0, ph0);
	agp_alloc(p, d->flat, ph0);
	for (size_t k = 0; k < d->n; k++) {
		agp_op(p, ph0, AG_OP_COPY, ag_ds_view(p, part[k], 0, d->c[k]), ag_ds_view(p, d->flat, d->po[k], d->c[k]));
		agp_free(p, part[k], ph0);
	}
	/* _create_fp32_partitions' clone (906); initialize_optimizer_states'
	 * zeros of the partitions' elements (1030-1032: Σ p.ds_numel over
	 * fp16_partitioned_groups, the ds_tensors, whose ds_numel is the
	 * partition's, pp.py 1620; Ψ at N = 1), dropped
	 * (1088-1090); the bucket (537-540); grad_partitions_flat_buffer
	 * (547-549) */
	agp_alloc(p, fp32p, ph0);
	agp_op(p, ph0, AG_OP_COPY, d->flat, fp32p);
	uint32_t z = ag_ds_made(p, "zeros (initialize_optimizer_states' gradient_buffer)", AG_F32, S3, 0, ZS_CAT_GRAD32,
	                        0, ph0);
	agp_free(p, z, ph0);
	agp_alloc(p, d->bucket, ph0);
	agp_alloc(p, d->gpart, ph0);
	agp_op(p, ph0, AG_OP_FILL, NO, d->gpart)->arg[0] = 0;
	/* create_reduce_and_remove_grad_hooks (1161-1245): each parameter's
	 * all_gather -> _allgather_params (pp.py 1895-1970): a flat empty of
	 * ceil(n/N)·N (1902-1904), the partition copied into the rank's slice
	 * and all_gather_into_tensor (1924-1927), the whole copy (1943-1957:
	 * the data until partition() frees it); the flat freed at its return */
	for (size_t k = 0; k < d->n; k++) {
		uint32_t f = agp_storage(p, "empty (_allgather_params' flat_tensor)", AG_F32, d->c[k] * world, 0,
		                         ZS_CAT_GATHERED);
		agp_alloc(p, f, ph0);
		agp_op(p, ph0, world == 1 ? AG_OP_COPY : AG_OP_ALL_GATHER, ag_ds_view(p, d->flat, d->po[k], d->c[k]), f);
		uint32_t r = agp_storage(p, "empty (_allgather_params' replicated_tensor)", AG_F32, d->numel[k], 0,
		                         ZS_CAT_GATHERED);
		agp_alloc(p, r, ph0);
		agp_op(p, ph0, AG_OP_COPY, world == 1 ? f : ag_ds_view(p, f, 0, d->numel[k]), r);
		agp_free(p, f, ph0);
		agp_free(p, r, ph0);
	}
	free(part);
	/* at N > 1 what _post_step leaves, made here: step 1 is run as the
	 * steady step (its forward and backward read these; DeepSpeed's own
	 * step 1 fetches and releases module by module instead, not built:
	 * --steps 1 is refused, autograd.c ag_step1_check) */
	if (world > 1)
		post_step_gather(d, ph0);
	agp_take(p, &s->setup, &s->nsetup);
	const struct ds3_state st = {.fp32p = fp32p, .am = am, .av = av, .astep = astep, .gnorm = gnorm};
	if (world > 1) {
		/* N > 1: the run's step 1 is the steady step over the set-up's
		 * gathered copies, Adam's state made before it (first_step) */
		ag_ds_first_step(p, am, av, astep, gnorm);
		rc = ds3_step(d, &pp, o, &st, 0, cause);
	} else {
		/* N = 1: the run's first step, a list of its own (ag_step.step1:
		 * Adam's state and _global_grad_norm made in it), then the steady
		 * step, both written from the plain loop's steady list; no
		 * first_step prefix. A fetch at N = 1 allocates nothing
		 * (_no_gather_coalesced, pp.py 1205-1206, 810-820: param.data a
		 * view of its partition) and a release frees nothing (free_param
		 * swaps a view for an empty(0)), so step 1's forward and backward
		 * are the steady step's: the coordinator's RECORD (ppc.py
		 * 254) and its trace change no byte here. */
		size_t nplain;
		struct ag_event *plain = ag_ds_plain_keep(s, &nplain);
		rc = ds3_step(d, &pp, o, &st, 1, cause);
		if (rc == 0) {
			ag_ds_plain_step1(s, &plain, nplain);
			rc = ds3_step(d, &pp, o, &st, 0, cause);
		}
		free(plain);
	}
	free(orig);
out:
	ag_ds_params_free(&pp);
	free(d->bo);
	free(d->bk);
	free(d->c);
	free(d->po);
	free(d->gath);
	return rc;
}
