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
	/* the frozen parameters (--freeze, LoRA's base): partitioned by Init
	 * too (parameter_offload.py 200-211, pp.py 1089-1100), each its own
	 * ds_tensor (defragment takes the trainable groups alone, stage3.py
	 * 357-360), no gradient, no optimizer state: their elements, partition
	 * ceil(n/N), ds_tensor and (N > 1) gathered copy */
	size_t nf;
	uint64_t *fnumel, *fc;
	uint32_t *fpart, *fgath;
	/* module.parameters()' order (Init's, ds_id's, the persistent list's
	 * and release_and_reset_all's): a trained parameter's k, or -1 - j for
	 * frozen j */
	size_t nall;
	int32_t *all;
	/* the bucket: its parameters (in arrival order) and their places */
	size_t *bk, nb;
	uint64_t *bo, used;
	/* micro_step_id (307): 0 from step() and zero_grad (1741, 1874) to
	 * the epilogue, each epilogue's + 1 (1156) */
	unsigned micro;
	/* N > 1, the first step (o->ds3_leaf_marks: ds3_s1_*) */
	struct ds3_s1 *s1;
};

/* DeepSpeed's first step at N > 1 (docs/schedule.md, "The first step at
 * N > 1"): the coordinator records its trace (ppc.py 252-254), so each
 * leaf module's pre-forward and pre-backward hook gathers its own
 * parameters that are not whole (fetch_sub_module, 285-341; no prefetch
 * while recording, 348-350) and its post-forward and post-backward hook
 * releases every one of them (release_sub_module, 418-442), persistent
 * ones too. Each gather a storage of its own, which the module's ops
 * read in place of _post_step's copy: an operand that is a view of the
 * parameter made before the step (the parameter itself) reads the copy
 * that is its data when the op runs; one made in the step reads the copy
 * that was its data when the view was made (the step's tensors are
 * numbered as made: the last gather before its number), so F.linear's
 * saved weight.t() reads the forward's copy in backward. A release frees
 * the copy at once, or, where such a view still reads it, after the node
 * that reads it last (ds3_s1_defer). */
struct ds3_fetch {
	size_t k;
	uint32_t wm, copy; /* the step's tensors referenced before it (their largest number), its copy */
};

struct ds3_s1 {
	const struct step_params *sp;
	char **name;        /* each parameter's module (Hugging Face's name) */
	size_t tied;        /* the tied head's table (its "lm_head" fetches it), or SIZE_MAX */
	uint32_t nt0, tfirst, wm;
	uint32_t *cur;      /* each one's gathered copy now, NO once released */
	uint32_t *kof, nkof;/* storage -> 1 + k for _post_step's copies gath[k] (0: none) */
	uint32_t *ren, *rgen, *bound; /* (below nt0) a static view's renamed one for copy rgen; a step view's */
	struct ds3_fetch *fx;
	size_t nfx, capfx;
	int err;
};

static int by_k(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

/* partition_grads' move of one output into its gradient partition's
 * narrow (1479-1497): at micro_step_id 0 copy_ (1481-1485); past it, under
 * --grad-accum K, grad_buffer.add_(grad_partition.to(fp32).view(shape))
 * (1486-1487: .to() of an fp32 tensor and .view() are the output itself,
 * no bytes), the sum in fp32 in the partition (stage 2's own, K
 * micro-steps' reduced gradients added in turn). */
static void partition_grad(struct ds3 *d, uint32_t out, uint32_t dst, enum zs_phase ph)
{
	if (d->micro == 0) {
		agp_op(d->p, ph, AG_OP_COPY, out, dst);
		return;
	}
	struct ag_event *e = agp_op(d->p, ph, AG_OP_ADD_, dst, dst);
	e->in[1] = out;
	e->arg[0] = 1;
}

/* __reduce_and_partition_ipg_grads (1294-1328) at N = 1: the bucket's
 * parameters sorted by ds_id (1314), reduce_scatter_coalesced (cc.py
 * 158-218): one gradient (N divides it) divided in place, its view of the
 * bucket; several, their cat in that order, divided; the reduce-scatter
 * (moving nothing at N = 1); partition_grads (1466-1527) moves each
 * output, a narrow, into its gradient partition (partition_grad); .grad
 * None (a bucket view); the cat freed with the list. */
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
		red = agp_view1(p, d->bucket, bo_of[k[0]], d->numel[k[0]]);
		src[0] = red;
	} else {
		cat = agp_storage(p, "cat (reduce_scatter_coalesced's flat buffer)", AG_F32, d->used, 0, ZS_CAT_BUCKETS);
		agp_alloc(p, cat, ph);
		uint64_t at = 0;
		for (size_t j = 0; j < d->nb; j++) {
			src[j] = agp_view1(p, cat, at, d->numel[k[j]]);
			agp_op(p, ph, AG_OP_COPY, agp_view1(p, d->bucket, bo_of[k[j]], d->numel[k[j]]), src[j]);
			at += d->numel[k[j]];
		}
		red = cat;
	}
	/* div_(world_sz): a Python int (8 bytes wrapped, and its fp32 copy) */
	agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, red, 1.0, ph);
	agp_op(p, ph, AG_OP_ALL_REDUCE_SUM_, red, red);
	for (size_t j = 0; j < d->nb; j++)
		partition_grad(d, src[j], agp_view1(p, d->gpart, d->po[k[j]], d->numel[k[j]]), ph);
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
 * into its narrow of grad_partitions_flat_buffer (partition_grad: the
 * first micro-step's copy_, a later one's add_), nothing on a rank whose chunk is empty (1471-1475);
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
		red = agp_view1(p, d->bucket, bo_of[k[0]], d->numel[k[0]]);
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
					uint32_t dst = agp_view1(p, cat, at, len);
					agp_op(p, ph, AG_OP_COPY,
					       agp_view1(p, d->bucket, bo_of[k[j]] + (uint64_t)r * d->c[k[j]], len), dst);
				}
				if (len < d->c[k[j]])
					agp_op(p, ph, AG_OP_COPY, pad[ip++], agp_view1(p, cat, at + len, d->c[k[j]] - len));
				at += d->c[k[j]];
			}
		red = cat;
	}
	/* div_(world_sz): a Python int (8 bytes wrapped, and its fp32 copy) */
	agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, red, (double)N, ph);
	uint32_t out = agp_view1(p, p->s->tensor[red].storage, p->s->tensor[red].offset, sc);
	agp_op(p, ph, AG_OP_REDUCE_SCATTER_SUM, red, out);
	while (npad > 0)
		agp_free(p, pad[--npad], ph);
	uint64_t at = 0;
	for (size_t j = 0; j < d->nb; j++) {
		size_t kj = k[j];
		if (chunk_len(d, kj, N - 1) == d->c[kj]) { /* every rank's chunk whole: one copy for all */
			uint32_t src = agp_view1(p, p->s->tensor[out].storage, p->s->tensor[out].offset + at, d->c[kj]);
			partition_grad(d, src, agp_view1(p, d->gpart, d->po[kj], d->c[kj]), ph);
		} else
			for (unsigned r = 0; r < N; r++) {
				uint64_t len = chunk_len(d, kj, r);
				if (len == 0)
					continue;
				size_t from = p->nev;
				uint32_t src = agp_view1(p, p->s->tensor[out].storage, p->s->tensor[out].offset + at, len);
				partition_grad(d, src, agp_view1(p, d->gpart, d->po[kj], len), ph);
				agp_rank_only(p, from, r);
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
		agp_op(p, po, AG_OP_COPY, agp_view1(p, d->gpart, d->po[k], d->c[k]), dbl);
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
static uint32_t gathered(const struct ds3 *d, size_t i)
{
	return d->all[i] >= 0 ? d->gath[d->all[i]] : d->fgath[-1 - d->all[i]];
}

static void post_step_gather(struct ds3 *d, enum zs_phase ph)
{
	for (size_t i = 0; i < d->nall; i++)
		agp_alloc(d->p, gathered(d, i), ph);
	for (size_t i = 0; i < d->nall; i++) {
		int32_t k = d->all[i];
		uint32_t part = k >= 0 ? agp_view1(d->p, d->flat, d->po[k], d->c[k]) : d->fpart[-1 - k];
		agp_op(d->p, ph, AG_OP_ALL_GATHER, part, gathered(d, i));
	}
}

/* A view of copy `copy` as tensor t views _post_step's (the same
 * shape, strides and offset: a single parameter's copy is the
 * empty(ceil(n/N)·N) its data narrows from 0, several parameters' each a
 * cat of n elements). */
static uint32_t s1_view(struct ds3 *d, uint32_t t, uint32_t copy)
{
	struct ag_tensor x = d->p->s->tensor[t];
	uint32_t v = agp_newt(d->p);
	x.storage = copy;
	x.bytes = 0;
	d->p->s->tensor[v] = x;
	return v;
}

/* Operand t of the step's op as the first step reads it. */
static uint32_t s1_ren(struct ds3 *d, uint32_t t)
{
	struct ds3_s1 *q = d->s1;
	if (t == NO || t >= q->nt0)
		return t;
	uint32_t st = d->p->s->tensor[t].storage;
	if (st >= q->nkof || q->kof[st] == 0)
		return t;
	size_t k = q->kof[st] - 1;
	if (t < q->tfirst) { /* the parameter (or a view of it made before the step): its data now */
		uint32_t c = q->cur[k];
		if (c == NO) {
			q->err = 1;
			return t;
		}
		if (q->ren[t] == NO || q->rgen[t] != c) {
			q->ren[t] = s1_view(d, t, c);
			q->rgen[t] = c;
		}
		return q->ren[t];
	}
	if (q->bound[t] == NO) { /* made in the step: the data when it was made */
		uint32_t c = NO;
		for (size_t i = q->nfx; i-- > 0;)
			if (q->fx[i].k == k && q->fx[i].wm < t) {
				c = q->fx[i].copy;
				break;
			}
		if (c == NO) {
			q->err = 1;
			return t;
		}
		q->bound[t] = s1_view(d, t, c);
	}
	return q->bound[t];
}

static void s1_seen(struct ds3_s1 *q, uint32_t t)
{
	if (t != NO && t < q->nt0 && (q->wm == NO || t > q->wm))
		q->wm = t;
}

/* ag_ds_walk's copy at step 1: the operands renamed (s1_ren). */
static void s1_copy(void *ctx, const struct ag_event *e0)
{
	struct ds3 *d = ctx;
	struct ag_event e = *e0;
	s1_seen(d->s1, e.t);
	for (int j = 0; j < AG_MAXIN; j++)
		s1_seen(d->s1, e.in[j]);
	for (int j = 0; j < AG_MAXOUT; j++)
		s1_seen(d->s1, e.out[j]);
	if (e.kind == AG_EV_OP) {
		for (int j = 0; j < AG_MAXIN; j++)
			e.in[j] = s1_ren(d, e.in[j]);
		for (int j = 0; j < AG_MAXOUT; j++)
			e.out[j] = s1_ren(d, e.out[j]);
	}
	agp_copy(d->p, &e);
}

/* A module's fetch of its parameters ks[0..nk) that are not whole, in
 * ds_id order (all_gather_coalesced, pp.py 1200-1345 at 38327e0): one
 * into a torch.empty(ceil(n/N)·N) its data narrows (1246-1266); several
 * into one flat torch.empty(N·Σ ceil(n/N)) (_all_gather_dtype,
 * 1164-1197: the rank's partitions its slice), then each one's data a
 * torch.cat of its parts, rank by rank (AllGatherCoalescedHandle.wait,
 * 676-714: n elements, a rank past n adding none), the flat freed with
 * the handle (ppc.py 322-336). 0, or -1 where the parameters' partitions
 * do not lie side by side in lp_param_buffer (not built). */
static int s1_fetch(struct ds3 *d, const size_t *ks, size_t nk, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	struct ds3_s1 *q = d->s1;
	const unsigned N = d->N;
	if (nk == 0)
		return 0;
	if (nk == 1) {
		size_t k = ks[0];
		uint32_t buf = agp_storage(p, "empty (all_gather_coalesced's buffer)", AG_F32, d->c[k] * N, 0,
		                           ZS_CAT_GATHERED);
		agp_alloc(p, buf, ph);
		agp_op(p, ph, AG_OP_ALL_GATHER, agp_view1(p, d->flat, d->po[k], d->c[k]), buf);
		q->cur[k] = buf;
	} else {
		uint64_t sz = 0;
		for (size_t j = 0; j < nk; j++) {
			if (j > 0 && d->po[ks[j]] != d->po[ks[j - 1]] + d->c[ks[j - 1]])
				return -1;
			sz += d->c[ks[j]];
		}
		uint32_t fl = agp_storage(p, "empty (_all_gather_dtype's flat)", AG_F32, sz * N, 0, ZS_CAT_GATHERED);
		agp_alloc(p, fl, ph);
		agp_op(p, ph, AG_OP_ALL_GATHER, agp_view1(p, d->flat, d->po[ks[0]], sz), fl);
		uint64_t off = 0;
		for (size_t j = 0; j < nk; j++) {
			size_t k = ks[j];
			uint32_t cat = agp_storage(p, "cat (AllGatherCoalescedHandle.wait)", AG_F32, d->numel[k], 0,
			                           ZS_CAT_GATHERED);
			agp_alloc(p, cat, ph);
			for (unsigned r = 0; r < N; r++) {
				uint64_t len = chunk_len(d, k, r);
				if (len > 0)
					agp_op(p, ph, AG_OP_COPY, agp_view1(p, fl, (uint64_t)r * sz + off, len),
					       agp_view1(p, cat, (uint64_t)r * d->c[k], len));
			}
			q->cur[k] = cat;
			off += d->c[k];
		}
		agp_free(p, fl, ph);
	}
	for (size_t j = 0; j < nk; j++) {
		if (q->nfx == q->capfx) {
			q->capfx = q->capfx ? 2 * q->capfx : 64;
			q->fx = zs_realloc(q->fx, q->capfx * sizeof *q->fx);
		}
		q->fx[q->nfx++] = (struct ds3_fetch){.k = ks[j], .wm = q->wm, .copy = q->cur[ks[j]]};
	}
	return 0;
}

/* A leaf module's hook at step 1 (its "ds3:NAME:WHERE" mark): fwd and bwd
 * fetch its own parameters that are not whole, fwd_end and bwd_end
 * release every one of them (free_param, pp.py 282-291: the copy freed
 * here; ds3_s1_defer moves the free after a saved view's last read). 0,
 * or -1 with *cause. */
static int s1_hook(struct ds3 *d, const struct ag_event *e, char **cause)
{
	struct ds3_s1 *q = d->s1;
	const char *name = e->label + 4, *at = strrchr(name, ':');
	if (at == NULL)
		return zs_fail(cause, "--wrapper deepspeed: internal error: the mark %s", e->label);
	size_t len = (size_t)(at - name), nk = 0;
	size_t *ks = zs_malloc((d->n ? d->n : 1) * sizeof *ks);
	for (size_t k = 0; k < d->n; k++) {
		int own = strlen(q->name[k]) == len && strncmp(q->name[k], name, len) == 0;
		own |= k == q->tied && len == 7 && strncmp(name, "lm_head", 7) == 0;
		if (own)
			ks[nk++] = k;
	}
	int rc = 0;
	if (strcmp(at + 1, "fwd") == 0 || strcmp(at + 1, "bwd") == 0) {
		size_t m = 0;
		for (size_t j = 0; j < nk; j++)
			if (q->cur[ks[j]] == NO)
				ks[m++] = ks[j];
		if (s1_fetch(d, ks, m, e->phase) != 0)
			rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: module %.*s's parameters do not lie side by "
			             "side in DeepSpeed's partitions: its gather of them is not built yet", (int)len, name);
	} else {
		for (size_t j = 0; j < nk; j++)
			if (q->cur[ks[j]] != NO) {
				agp_free(d->p, q->cur[ks[j]], e->phase);
				q->cur[ks[j]] = NO;
			}
	}
	free(ks);
	return rc;
}

/* A released copy that a view made while it was the data still reads
 * (F.linear's saved weight.t()): its free moved after the last op that
 * reads it and the frees that follow that op (the node releasing its
 * saved variables and its incoming gradient: tests/ds3_saved.py
 * --release-order, docs/schedule.md). */
static void s1_defer(struct ds3 *d, struct ag_event *ev, size_t n)
{
	const struct ag_step *s = d->p->s;
	struct ds3_s1 *q = d->s1;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind != AG_EV_FREE)
			continue;
		int copy = 0;
		for (size_t f = 0; f < q->nfx && !copy; f++)
			copy = q->fx[f].copy == ev[i].t;
		if (!copy)
			continue;
		size_t last = i;
		for (size_t j = i + 1; j < n; j++)
			if (agp_touches(s, &ev[j], ev[i].t))
				last = j;
		if (last == i)
			continue;
		size_t to = last + 1;
		while (to < n && ev[to].kind == AG_EV_FREE)
			to++;
		struct ag_event fr = ev[i];
		memmove(&ev[i], &ev[i + 1], (to - i - 1) * sizeof *ev);
		ev[to - 1] = fr;
		i--; /* the event now at i */
	}
}

static void s1_begin(struct ds3 *d, struct ds3_s1 *q, const struct step_params *sp, const struct ag_ds_params *pp)
{
	const struct ag_step *s = d->p->s;
	*q = (struct ds3_s1){.sp = sp, .tied = SIZE_MAX, .nt0 = (uint32_t)pp->nt0, .tfirst = (uint32_t)pp->nt0,
	                     .wm = NO};
	q->name = zs_malloc((d->n ? d->n : 1) * sizeof *q->name);
	q->cur = zs_malloc((d->n ? d->n : 1) * sizeof *q->cur);
	for (size_t k = 0; k < d->n; k++) {
		const struct ag_tensor *w = &s->tensor[pp->w[k]];
		char buf[256];
		step_part_name(sp, (size_t)w->param, w->part, buf, sizeof buf);
		char *dot = strrchr(buf, '.');
		if (dot != NULL)
			*dot = '\0';
		q->name[k] = zs_strdup(buf);
		q->cur[k] = NO;
		if (sp->tied && w->param == 0)
			q->tied = k;
	}
	/* the step's first storage: what is numbered below it was made
	 * before the step (the parameters and their views) */
	for (size_t i = 0; i < s->nevents; i++)
		if (s->event[i].kind == AG_EV_ALLOC && s->event[i].t < q->tfirst)
			q->tfirst = s->event[i].t;
	size_t nt = s->ntensors;
	q->ren = zs_malloc(q->nt0 * sizeof *q->ren + 1);
	q->rgen = zs_malloc(q->nt0 * sizeof *q->rgen + 1);
	q->bound = zs_malloc(q->nt0 * sizeof *q->bound + 1);
	for (size_t t = 0; t < q->nt0; t++)
		q->ren[t] = q->rgen[t] = q->bound[t] = NO;
	q->nkof = (uint32_t)nt;
	q->kof = zs_calloc(nt ? nt : 1, sizeof *q->kof);
	for (size_t k = 0; k < d->n; k++)
		q->kof[d->gath[k]] = (uint32_t)k + 1;
	d->s1 = q;
}

static void s1_end(struct ds3 *d)
{
	struct ds3_s1 *q = d->s1;
	if (q == NULL)
		return;
	for (size_t k = 0; k < d->n; k++)
		free(q->name[k]);
	free(q->name);
	free(q->cur);
	free(q->ren);
	free(q->rgen);
	free(q->bound);
	free(q->kof);
	free(q->fx);
	d->s1 = NULL;
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
                    const struct ds3_state *sv, int first, int fetch, char **cause)
{
	struct ag_pass *p = d->p;
	const unsigned world = d->N;
	const uint32_t fp32p = sv->fp32p, am = sv->am, av = sv->av, astep = sv->astep, gnorm = sv->gnorm;
	const uint64_t S3 = d->S3;
	int rc;
	/* the step. Stage 3's backward (2267-2287): loss_scaler.backward of
	 * loss.float() (the loss itself in fp32); the bucket is the set-up's.
	 * Under --grad-accum K its K micro-steps, each the engine's backward
	 * over its loss divided by K (engine.py _scale_loss_by_gas,
	 * 1904-1910), each gradient moved into the bucket at its hook and the
	 * rest reduced by the epilogue at every micro-step's end
	 * (allreduce_gradients, engine.py 2050-2053: stage 3 partitions
	 * gradients), the partitions summing them (partition_grad) */
	struct ag_ds_walk wk;
	ag_ds_walk_begin(&wk, p, pp, NO, o->grad_accum, 1);
	d->micro = 0;
	/* the leaf modules' marks: step 1's fetches and releases at N > 1
	 * (s1_hook), dropped from the steady step */
	wk.marks = o->ds3_leaf_marks;
	if (fetch) {
		wk.copy = s1_copy;
		wk.ctx = d;
	}
	const struct ag_event *e;
	size_t kg;
	while ((rc = ag_ds_next(&wk, &e, &kg, cause)) == 1) {
		if (e->kind == AG_EV_MARK && strncmp(e->label, "ds3:", 4) == 0) {
			if (fetch && (rc = s1_hook(d, e, cause)) != 0)
				break;
			continue;
		}
		if (e->kind == AG_EV_GRAD_READY) {
			ipg_add(d, kg, wk.put_t, wk.put_s, e->phase);
			continue;
		}
		if (e->kind == AG_EV_FREE) {
			/* a micro-step's `del loss` past the engine's backward:
			 * its epilogue (independent_gradient_partition_epilogue,
			 * 1131-1156: the rest reduced, micro_step_id + 1), then
			 * its scaled loss and mean_loss gone */
			reduce(d, e->phase);
			d->micro++;
			agp_copy(p, e);
			ag_ds_backward_returns(&wk, e->phase);
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
		for (size_t i = 0; world > 1 && i < d->nall; i++) {
			int32_t k = d->all[i];
			if (!fetch)
				agp_free(p, gathered(d, i), po);
			else if (k >= 0 && d->s1->cur[k] != NO) { /* step 1: what is whole now (no frozen one) */
				agp_free(p, d->s1->cur[k], po);
				d->s1->cur[k] = NO;
			}
		}
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
				agp_op(p, po, AG_OP_COPY, agp_view1(p, d->gpart, d->po[k], d->c[k]),
				       agp_view1(p, cat, d->po[k], d->c[k]));
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
	if (rc == 0 && fetch) {
		s1_defer(d, p->s->event, p->s->nevents);
		if (d->s1->err)
			rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: internal error: step 1 reads a parameter no "
			             "gather made whole");
	}
	return rc;
}

/* ------------------------------------------------------------------------ */

int ag_ds3_apply(struct ag_step *s, const struct step_params *sp, const struct ag_options *o, unsigned world,
                 unsigned wmax, uint64_t bucket, const uint32_t *order, size_t norder, char **cause)
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
	/* the model's order; the frozen parameters in it */
	d->all = zs_malloc((norder ? norder : 1) * sizeof *d->all);
	d->fnumel = zs_malloc((norder ? norder : 1) * sizeof *d->fnumel);
	d->fc = zs_malloc((norder ? norder : 1) * sizeof *d->fc);
	uint32_t *fw = zs_malloc((norder ? norder : 1) * sizeof *fw);
	size_t ntrained = 0;
	for (size_t i = 0; i < norder; i++) {
		uint32_t t = order[i];
		if (pp.k_of[t] >= 0) {
			d->all[d->nall++] = pp.k_of[t];
			ntrained++;
			continue;
		}
		fw[d->nf] = t;
		d->fnumel[d->nf] = agp_elements(&s->tensor[t]);
		d->fc[d->nf] = (d->fnumel[d->nf] + world - 1) / world;
		d->all[d->nall++] = -1 - (int32_t)d->nf++;
	}
	size_t npersist = 0;
	uint64_t big = 0;
	for (size_t i = 0; i < d->nall; i++) {
		uint64_t n = d->all[i] >= 0 ? d->numel[d->all[i]] : d->fnumel[-1 - d->all[i]];
		npersist += n <= DS3_PERSIST;
		if (n > DS3_PERSIST && n > big)
			big = n;
	}
	int rc = 0;
	if (ntrained != d->n) /* every trained parameter is the model's */
		rc = zs_fail(cause, "--wrapper deepspeed: internal error: %zu of the %zu trained parameters in the model's "
		             "order", ntrained, d->n);
	for (size_t k = 0; k < d->n && rc == 0; k++)
		if (d->numel[k] > bucket) /* __add_grad_to_ipg_bucket leaves it in .grad (1279-1290) */
			rc = zs_fail(cause, "--wrapper deepspeed --schemes zero3: a parameter of %llu elements is larger than "
			             "the reduce bucket (%llu): DeepSpeed reduces it from its own .grad, which is not built yet "
			             "(give --ds-reduce-bucket %llu or more)", (unsigned long long)d->numel[k],
			             (unsigned long long)bucket, (unsigned long long)d->numel[k]);
	/* _post_step's all_gather of a list of one takes _allgather_params,
	 * which copies even at N = 1 (pp.py 1517-1518, 1895-1970); the list
	 * is every persistent parameter, frozen ones too (po.py 256-268) */
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
	/* step 1's gathers at the leaf marks take the trained parameters alone
	 * (ag_ds3_marks_lacking keeps the marks off under --freeze and LoRA) */
	if (rc == 0 && world > 1 && o->ds3_leaf_marks && d->nf > 0)
		rc = zs_fail(cause, "--wrapper deepspeed: internal error: step 1's leaf-module gathers over %zu frozen "
		             "parameters", d->nf);
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
	/* a frozen parameter: its ds_tensor (N = 1: a fetch makes the data a
	 * view of it), or its gathered copy as a trained one's */
	d->fpart = zs_malloc((d->nf ? d->nf : 1) * sizeof *d->fpart);
	d->fgath = zs_malloc((d->nf ? d->nf : 1) * sizeof *d->fgath);
	for (size_t j = 0; j < d->nf; j++) {
		d->fpart[j] = agp_storage(p, "empty (ds_tensor)", AG_F32, d->fc[j], 0, ZS_CAT_PARAM32);
		s->tensor[d->fpart[j]].role = AG_ROLE_PARAM;
		d->fgath[j] = world == 1 ? NO
		              : agp_storage(p, "empty (_allgather_params_coalesced's flat_tensor)", AG_F32,
		                            d->fc[j] * world, 0, ZS_CAT_GATHERED);
	}
	if (world > 1) {
		d->gath = zs_malloc(d->n * sizeof *d->gath);
		for (size_t k = 0; k < d->n; k++)
			d->gath[k] = agp_storage(p, "empty (_allgather_params_coalesced's flat_tensor)", AG_F32,
			                         d->c[k] * world, 0, ZS_CAT_GATHERED);
	}
	/* the views over pp lengthened with the frozen parameters (k = n + j) */
	struct ag_ds_params pe = pp;
	pe.n = d->n + d->nf;
	pe.w = zs_malloc((pe.n ? pe.n : 1) * sizeof *pe.w);
	pe.k_of = zs_malloc((pp.nt0 ? pp.nt0 : 1) * sizeof *pe.k_of);
	uint32_t *each = zs_malloc((pe.n ? pe.n : 1) * sizeof *each);
	memcpy(pe.w, pp.w, d->n * sizeof *pe.w);
	memcpy(pe.k_of, pp.k_of, pp.nt0 * sizeof *pe.k_of);
	for (size_t k = 0; k < d->n; k++)
		each[k] = world > 1 ? d->gath[k] : NO;
	for (size_t j = 0; j < d->nf; j++) {
		pe.w[d->n + j] = fw[j];
		pe.k_of[fw[j]] = (int32_t)(d->n + j);
		each[d->n + j] = world > 1 ? d->fgath[j] : d->fpart[j];
	}
	uint32_t *orig = ag_ds_param_views(p, &pe, d->flat, each);
	free(each);
	free(pe.w);
	free(pe.k_of);
	const enum zs_phase ph0 = ZS_PH_SETUP;
	/* Init(module=model) (pp.py 1034-1036, 1052-1067): each parameter
	 * broadcast again, its partition made and filled (at N > 1 the rank's
	 * chunk, 1609-1616; the tail past n is the padding, unset in
	 * DeepSpeed, zeros here), its data freed (free_param's empty(0)
	 * allocates nothing) */
	uint32_t *part = zs_malloc(d->n * sizeof *part);
	for (size_t i = 0; i < d->nall; i++) { /* module.parameters()' order, frozen ones too */
		int32_t k = d->all[i];
		uint32_t w = k >= 0 ? pp.w[k] : fw[-1 - k], x;
		agp_op(p, ph0, AG_OP_BROADCAST_, orig[w], orig[w])->arg[0] = 0;
		if (k >= 0) {
			x = part[k] = agp_storage(p, "empty (ds_tensor)", AG_F32, d->c[k], 0, ZS_CAT_PARAM32);
		} else
			x = d->fpart[-1 - k];
		agp_alloc(p, x, ph0);
		if (world == 1)
			agp_op(p, ph0, AG_OP_COPY, orig[w], agp_view_shaped(p, x, orig[w], 0));
		else
			agp_op(p, ph0, AG_OP_SHARD, orig[w], x);
		agp_free(p, orig[w], ph0);
	}
	/* the optimizer's constructor: inf_or_nan_tracker (263); defragment
	 * (574-600): the partitions copied into one buffer, each freed */
	ag_ds_made(p, "zeros (inf_or_nan_tracker)", AG_BOOL, 1, 0, ZS_CAT_SCRATCH, 0, ph0);
	agp_alloc(p, d->flat, ph0);
	for (size_t k = 0; k < d->n; k++) {
		agp_op(p, ph0, AG_OP_COPY, agp_view1(p, part[k], 0, d->c[k]), agp_view1(p, d->flat, d->po[k], d->c[k]));
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
		agp_op(p, ph0, world == 1 ? AG_OP_COPY : AG_OP_ALL_GATHER, agp_view1(p, d->flat, d->po[k], d->c[k]), f);
		uint32_t r = agp_storage(p, "empty (_allgather_params' replicated_tensor)", AG_F32, d->numel[k], 0,
		                         ZS_CAT_GATHERED);
		agp_alloc(p, r, ph0);
		agp_op(p, ph0, AG_OP_COPY, world == 1 ? f : agp_view1(p, f, 0, d->numel[k]), r);
		agp_free(p, f, ph0);
		agp_free(p, r, ph0);
	}
	free(part);
	/* at N > 1 over a model whose leaf marks are not described
	 * (ag_ds3_marks_lacking), what _post_step leaves, made here: step 1
	 * is run as the steady step (its forward and backward read these;
	 * DeepSpeed's own step 1 fetches and releases module by module:
	 * --steps 1 is refused, autograd.c ag_step1_check) */
	const int fetch = world > 1 && o->ds3_leaf_marks;
	if (world > 1 && !fetch)
		post_step_gather(d, ph0);
	agp_take(p, &s->setup, &s->nsetup);
	const struct ds3_state st = {.fp32p = fp32p, .am = am, .av = av, .astep = astep, .gnorm = gnorm};
	struct ds3_s1 q1;
	if (fetch)
		s1_begin(d, &q1, sp, &pp);
	if (world > 1 && !fetch) {
		/* N > 1: the run's step 1 is the steady step over the set-up's
		 * gathered copies, Adam's state made before it (first_step) */
		ag_ds_first_step(p, am, av, astep, gnorm);
		rc = ds3_step(d, &pp, o, &st, 0, 0, cause);
	} else {
		/* N = 1, and N > 1 with the leaf marks: the run's first step, a
		 * list of its own (ag_step.step1: Adam's state and
		 * _global_grad_norm made in it), then the steady
		 * step, both written from the plain loop's steady list; no
		 * first_step prefix. A fetch at N = 1 allocates nothing
		 * (_no_gather_coalesced, pp.py 1205-1206, 810-820: param.data a
		 * view of its partition) and a release frees nothing (free_param
		 * swaps a view for an empty(0)), so step 1's forward and backward
		 * are the steady step's: the coordinator's RECORD (ppc.py
		 * 254) and its trace change no byte here. N > 1 (fetch): the
		 * same, where nothing is gathered when it starts, its forward
		 * and backward gathering and releasing leaf module by leaf
		 * module (struct ds3_s1) and its step() ending with
		 * _post_step's gathers, which the steady step reads. */
		size_t nplain;
		struct ag_event *plain = ag_ds_plain_keep(s, &nplain);
		rc = ds3_step(d, &pp, o, &st, 1, fetch, cause);
		if (rc == 0) {
			ag_ds_plain_step1(s, &plain, nplain);
			rc = ds3_step(d, &pp, o, &st, 0, 0, cause);
		}
		free(plain);
	}
	s1_end(d);
	free(orig);
out:
	free(fw);
	free(d->all);
	free(d->fnumel);
	free(d->fc);
	free(d->fpart);
	free(d->fgath);
	ag_ds_params_free(&pp);
	free(d->bo);
	free(d->bk);
	free(d->c);
	free(d->po);
	free(d->gath);
	return rc;
}
