/*
 * engine — the step driver (engine.h). It implements docs/schedule.md:
 * forward, backward, reduce, optimizer, with the scheme's hooks where the
 * schemes differ. Compute is per rank; collectives meet all ranks at once,
 * so ranks advance in lockstep between collectives, as real ranks would.
 *
 * Generator: splitmix64 (Steele, Lea & Flood 2014), counter-based, so any
 * rank can produce any element of the initial weights without the others.
 * Initial weights and biases of layer l: uniform in ±1/sqrt(d_l) (PyTorch's
 * nn.Linear default). Batches: x uniform in [-1, 1); the target is a fixed
 * teacher, y_j = 0.5·x_(j mod d0), so the loss can fall.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/engine.h"
#include "engine/osmem.h"
#include "engine/scheme.h"
#ifdef HAVE_MPI
#include "engine/coll_mpi.h"
#include "engine/mpi_job.h"
#endif
#include "util/util.h"

/* ------------------------------------------------------------------------- */
/* generator and digest */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t stream_base(uint64_t seed, uint64_t stream) { return splitmix64(seed ^ splitmix64(stream)); }

/* Element `index` of a stream, uniform in [-1, 1): 24 random bits, so that
 * every value is exact in a float. */
static float uniform_at(uint64_t base, uint64_t index)
{
	return (float)((double)(splitmix64(base + index) >> 40) / 8388608.0 - 1.0);
}

float engine_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
	return uniform_at(stream_base(seed, stream), index);
}

/* libxxhash fails only when it cannot allocate its state. */
static void digest_failed(void)
{
	fprintf(stderr, "zerosim: out of memory in the weights digest\n");
	exit(ZS_EXIT_RUNTIME);
}

/* Streams of the generator. */
#define STREAM_WEIGHTS 1
#define STREAM_BATCH(t, k) (2 + (uint64_t)(t) * ZS_MAX_WORLD + (k))

float *engine_initial_weights(const struct zs_config *c)
{
	struct mlp_shape s;
	mlp_shape_init(&s, c->widths, c->nwidths);
	float *w = zs_malloc(s.nparams * sizeof *w);
	uint64_t base = stream_base(c->seed, STREAM_WEIGHTS);
	for (size_t l = 0; l < s.nlayers; l++) {
		float bound = (float)(1.0 / sqrt((double)s.width[l]));
		size_t end = l + 1 < s.nlayers ? s.w_off[l + 1] : s.nparams;
		for (size_t g = s.w_off[l]; g < end; g++)
			w[g] = bound * uniform_at(base, g);
	}
	return w;
}

/* The initial fp32 weights of global elements [first, first + n) into
 * w32 (if not NULL) and w16 (if not NULL). */
static void initial_weights(const struct zs_run *r, size_t first, size_t n, float *w32, zs_half *w16)
{
	const float *v = r->init + first;
	if (w32)
		memcpy(w32, v, n * sizeof *w32);
	if (w16) {
		size_t i = 0;
		for (; i + 8 <= n; i += 8)
			zs_float_to_half8(w16 + i, v + i);
		for (; i < n; i++)
			w16[i] = zs_float_to_half(v[i]);
	}
}

/* ------------------------------------------------------------------------- */
/* helpers for the schemes */

size_t run_owned(const struct zs_run *r, size_t u, unsigned k)
{
	size_t lo = (size_t)k * r->unit_s[u], n = r->unit_n[u];
	return lo >= n ? 0 : (n - lo < r->unit_s[u] ? n - lo : r->unit_s[u]);
}

static void **field(struct zs_run *r, unsigned k, size_t f)
{
	return (void **)((char *)&r->rank[k] + f);
}

void run_alloc_all(struct zs_run *r, size_t f, enum zs_cat cat, size_t bytes)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		*field(r, k, f) = tracker_alloc(&r->tracker, k, cat, bytes);
}

void run_free_all(struct zs_run *r, size_t f)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		tracker_free(&r->tracker, k, *field(r, k, f));
		*field(r, k, f) = NULL;
	}
}

/* Where rank k's reduced slots of unit u go: its grad shard, or its own
 * slots of the full grad buffer (zero1). */
static void *grad_slots(struct zs_run *r, unsigned k, size_t u)
{
	struct zs_rank *rk = &r->rank[k];
	if (r->ops->grads_sharded)
		return run_elem(r, rk->grads, r->unit_soff[u]);
	return run_elem(r, rk->grads, r->unit_off[u] + k * r->unit_s[u]);
}

/* Rank k's own slots of unit u in its working params. */
static void *param_slots(struct zs_run *r, unsigned k, size_t u)
{
	struct zs_rank *rk = &r->rank[k];
	if (r->ops->params_sharded)
		return run_elem(r, rk->params, r->unit_soff[u]);
	return run_elem(r, rk->params, r->unit_off[u] + (r->ops->state_sharded ? k * r->unit_s[u] : 0));
}

void run_reduce_scatter_unit(struct zs_run *r, size_t u, size_t f, size_t full_off)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = run_elem(r, *field(r, k, f), full_off);
		r->ptr_b[k - r->r0] = grad_slots(r, k, u);
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, r->unit_n[u], r->dt);
}

void run_gather_params_unit(struct zs_run *r, size_t u, size_t f, size_t full_off)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = param_slots(r, k, u);
		r->ptr_b[k - r->r0] = run_elem(r, *field(r, k, f), full_off);
	}
	coll_all_gather(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, r->unit_n[u], r->dt);
}

void run_gather_params_in_place(struct zs_run *r)
{
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t u = 0; u < r->nunits; u++)
		run_gather_params_unit(r, u, RUN_FIELD(params), r->unit_off[u]);
}

/* ------------------------------------------------------------------------- */
/* setup */

static const struct zs_scheme_ops *const schemes[ZS_NSCHEMES] = {
	&scheme_dp, &scheme_zero1, &scheme_zero2, &scheme_zero3,
};

static void setup_units(struct zs_run *r, enum zs_unit unit)
{
	const struct mlp_shape *s = &r->shape;
	r->nunits = unit == ZS_UNIT_MODEL ? 1 : s->nlayers;
	size_t soff = 0;
	for (size_t u = 0; u < r->nunits; u++) {
		if (unit == ZS_UNIT_MODEL) {
			r->unit_off[u] = 0;
			r->unit_n[u] = s->nparams;
			r->unit_first[u] = 0;
			r->unit_last[u] = s->nlayers - 1;
		} else {
			r->unit_off[u] = s->w_off[u];
			r->unit_n[u] = s->width[u] * s->width[u + 1] + s->width[u + 1];
			r->unit_first[u] = r->unit_last[u] = u;
		}
		r->unit_s[u] = (r->unit_n[u] + r->world - 1) / r->world;
		r->unit_soff[u] = soff;
		soff += r->unit_s[u];
	}
	r->shard = soff;
}

static void init_rank(struct zs_run *r, unsigned k);

/* Allocate the resident model state and fill it with the initial weights. */
static void setup_state(struct zs_run *r)
{
	const struct zs_scheme_ops *ops = r->ops;
	size_t psi = r->shape.nparams, S = r->shard;
	int mixed = r->precision == ZS_MIXED;
	enum zs_cat pcat = mixed ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
	enum zs_cat gcat = mixed ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	size_t np = ops->params_sharded ? S : psi;
	size_t ng = ops->grads_sharded ? S : psi;
	size_t ns = ops->state_sharded ? S : psi;

	tracker_set_phase(&r->tracker, ZS_PH_SETUP);
	run_alloc_all(r, RUN_FIELD(params), pcat, np * r->esize);
	run_alloc_all(r, RUN_FIELD(grads), gcat, ng * r->esize);
	if (mixed)
		run_alloc_all(r, RUN_FIELD(master), ZS_CAT_MASTER32, ns * sizeof(float));
	if (r->opt.kind == ZS_ADAM) {
		run_alloc_all(r, RUN_FIELD(m), ZS_CAT_ADAM_M, ns * sizeof(float));
		run_alloc_all(r, RUN_FIELD(v), ZS_CAT_ADAM_V, ns * sizeof(float));
	} else {
		run_alloc_all(r, RUN_FIELD(m), ZS_CAT_MOMENTUM, ns * sizeof(float));
	}
	/* The optimizer state starts at zero; every other buffer is written
	 * before it is read. */
	for (unsigned k = r->r0; k < r->r1; k++) {
		memset(r->rank[k].m, 0, ns * sizeof(float));
		if (r->rank[k].v != NULL)
			memset(r->rank[k].v, 0, ns * sizeof(float));
	}

	for (unsigned k = r->r0; k < r->r1; k++)
		init_rank(r, k); /* the first rank first: the others copy from it */
}

/* Rank k's initial weights. Sharded buffers: each rank computes its own
 * slots. Full buffers: the process's first rank computes them and the
 * others copy (DDP's initial broadcast; set-up, not counted as step
 * communication). */
static void init_rank(struct zs_run *r, unsigned k)
{
	const struct zs_scheme_ops *ops = r->ops;
	size_t psi = r->shape.nparams;
	int mixed = r->precision == ZS_MIXED;
	struct zs_rank *rk = &r->rank[k];
	unsigned first = r->r0;
	if (k > first && !ops->params_sharded)
		memcpy(rk->params, r->rank[first].params, psi * r->esize);
	if (k > first && !ops->state_sharded && mixed)
		memcpy(rk->master, r->rank[first].master, psi * sizeof(float));
	for (size_t u = 0; u < r->nunits; u++) {
		if (k == first || ops->params_sharded) {
			size_t lo = ops->params_sharded ? k * r->unit_s[u] : 0;
			size_t cnt = ops->params_sharded ? run_owned(r, u, k) : r->unit_n[u];
			void *p = run_elem(r, rk->params, ops->params_sharded ? r->unit_soff[u] : r->unit_off[u]);
			initial_weights(r, r->unit_off[u] + lo, cnt, mixed ? NULL : p, mixed ? p : NULL);
		}
		if (mixed && (k == first || ops->state_sharded)) {
			size_t lo = ops->state_sharded ? k * r->unit_s[u] : 0;
			size_t cnt = ops->state_sharded ? run_owned(r, u, k) : r->unit_n[u];
			size_t at = ops->state_sharded ? r->unit_soff[u] : r->unit_off[u];
			initial_weights(r, r->unit_off[u] + lo, cnt, rk->master + at, NULL);
		}
	}
}

/* ------------------------------------------------------------------------- */
/* the step */

static void fill_batch(struct zs_run *r, unsigned k, unsigned t)
{
	struct zs_rank *rk = &r->rank[k];
	size_t d0 = r->shape.width[0], dL = r->shape.width[r->shape.nlayers], B = r->batch;
	if (r->cs != NULL) {
		size_t at = (size_t)t * r->world + k;
		memcpy(rk->x, r->cs->x + at * B * d0, B * d0 * sizeof(float));
		memcpy(rk->y, r->cs->y + at * B * dL, B * dL * sizeof(float));
		return;
	}
	uint64_t base = stream_base(r->seed, STREAM_BATCH(t, k));
	for (size_t e = 0; e < B * d0; e++)
		rk->x[e] = uniform_at(base, e);
	for (size_t b = 0; b < B; b++)
		for (size_t j = 0, i = 0; j < dL; j++, i = i + 1 == d0 ? 0 : i + 1) /* i = j mod d0 */
			rk->y[b * dL + j] = 0.5f * rk->x[b * d0 + i];
}

/* Unit u's working params as this rank sees them now. */
static const void *unit_params(struct zs_run *r, unsigned k, size_t u)
{
	struct zs_rank *rk = &r->rank[k];
	if (rk->gathered != NULL)
		return rk->gathered;
	/* Sharded params are only used directly at N = 1, where S = Ψ. */
	return run_elem(r, rk->params, r->ops->params_sharded ? r->unit_soff[u] : r->unit_off[u]);
}

/* Where backward writes unit u's grads on this rank. */
static void *unit_grads(struct zs_run *r, unsigned k, size_t u)
{
	struct zs_rank *rk = &r->rank[k];
	if (rk->full_grads != NULL)
		return r->ops->params_sharded ? rk->full_grads : run_elem(r, rk->full_grads, r->unit_off[u]);
	return run_elem(r, rk->grads, r->ops->grads_sharded ? r->unit_soff[u] : r->unit_off[u]);
}

static void forward_layer(struct zs_run *r, unsigned k, size_t l, const void *up, size_t uoff)
{
	struct zs_rank *rk = &r->rank[k];
	const struct mlp_shape *s = &r->shape;
	size_t din = s->width[l], dout = s->width[l + 1];
	const float *in = l == 0 ? rk->x : rk->act[l - 1];
	int relu = l + 1 < s->nlayers;
	rk->act[l] = tracker_alloc(&r->tracker, k, ZS_CAT_ACTIVATIONS, r->batch * dout * sizeof(float));
	const void *w = (const char *)up + (s->w_off[l] - uoff) * r->esize;
	const void *b = (const char *)up + (s->b_off[l] - uoff) * r->esize;
	if (r->dt == ZS_F16)
		linear_forward_f16(rk->act[l], in, (const zs_half *)w, (const zs_half *)b, relu, r->batch, din, dout);
	else
		linear_forward_f32(rk->act[l], in, (const float *)w, (const float *)b, relu, r->batch, din, dout);
}

/* Backward of layer l: dy is in delta[*cur]; dx goes to the other one. */
static void backward_layer(struct zs_run *r, unsigned k, size_t l, const void *up, void *ug, size_t uoff,
                           int *cur)
{
	struct zs_rank *rk = &r->rank[k];
	const struct mlp_shape *s = &r->shape;
	size_t din = s->width[l], dout = s->width[l + 1];
	const float *in = l == 0 ? rk->x : rk->act[l - 1];
	float *dy = rk->delta[*cur], *dx = l == 0 ? NULL : rk->delta[1 - *cur];
	size_t wo = (s->w_off[l] - uoff) * r->esize, bo = (s->b_off[l] - uoff) * r->esize;
	const void *w = (const char *)up + wo;
	void *gw = (char *)ug + wo, *gb = (char *)ug + bo;
	if (r->dt == ZS_F16)
		linear_backward_f16((zs_half *)gw, (zs_half *)gb, dx, dy, in, (const zs_half *)w, r->batch, din, dout);
	else
		linear_backward_f32((float *)gw, (float *)gb, dx, dy, in, (const float *)w, r->batch, din, dout);
	*cur = 1 - *cur;
}

static void forward(struct zs_run *r, unsigned t)
{
	const struct mlp_shape *s = &r->shape;
	size_t B = r->batch;
	tracker_set_phase(&r->tracker, ZS_PH_FORWARD);
	run_alloc_all(r, RUN_FIELD(x), ZS_CAT_ACTIVATIONS, B * s->width[0] * sizeof(float));
	run_alloc_all(r, RUN_FIELD(y), ZS_CAT_ACTIVATIONS, B * s->width[s->nlayers] * sizeof(float));
	for (unsigned k = r->r0; k < r->r1; k++)
		fill_batch(r, k, t);
	for (size_t u = 0; u < r->nunits; u++) {
		if (r->ops->begin_unit)
			r->ops->begin_unit(r, u, ZS_PASS_FORWARD);
		for (unsigned k = r->r0; k < r->r1; k++)
			for (size_t l = r->unit_first[u]; l <= r->unit_last[u]; l++)
				forward_layer(r, k, l, unit_params(r, k, u), r->unit_off[u]);
		if (r->ops->end_unit)
			r->ops->end_unit(r, u, ZS_PASS_FORWARD);
	}
}

static void backward(struct zs_run *r)
{
	const struct mlp_shape *s = &r->shape;
	size_t B = r->batch, L = s->nlayers, dL = s->width[L];
	tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	size_t dbytes = B * mlp_max_width(s) * sizeof(float);
	run_alloc_all(r, RUN_FIELD(delta[0]), ZS_CAT_SCRATCH, dbytes);
	run_alloc_all(r, RUN_FIELD(delta[1]), ZS_CAT_SCRATCH, dbytes);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = &r->rank[k];
		rk->loss = mse_forward_backward(rk->delta[0], rk->act[L - 1], rk->y, B, dL);
	}
	if (r->ops->begin_backward)
		r->ops->begin_backward(r);
	/* Every rank's delta ping-pong starts in buffer 0 and flips per layer. */
	for (size_t u = r->nunits; u-- > 0;) {
		if (r->ops->begin_unit)
			r->ops->begin_unit(r, u, ZS_PASS_BACKWARD);
		for (unsigned k = r->r0; k < r->r1; k++) {
			int c = (int)((L - 1 - r->unit_last[u]) & 1);
			for (size_t l = r->unit_last[u] + 1; l-- > r->unit_first[u];)
				backward_layer(r, k, l, unit_params(r, k, u), unit_grads(r, k, u), r->unit_off[u], &c);
		}
		if (r->ops->end_unit)
			r->ops->end_unit(r, u, ZS_PASS_BACKWARD);
		tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	}
	run_free_all(r, RUN_FIELD(delta[0]));
	run_free_all(r, RUN_FIELD(delta[1]));
	run_free_all(r, RUN_FIELD(x));
	run_free_all(r, RUN_FIELD(y));
	for (size_t l = 0; l < L; l++)
		run_free_all(r, RUN_FIELD(act[l]));
}

static void optimizer(struct zs_run *r, unsigned t)
{
	const struct zs_scheme_ops *ops = r->ops;
	int mixed = r->precision == ZS_MIXED;
	tracker_set_phase(&r->tracker, ZS_PH_OPTIMIZER);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = &r->rank[k];
		for (size_t u = 0; u < r->nunits; u++) {
			size_t cnt = ops->state_sharded ? run_owned(r, u, k) : r->unit_n[u];
			size_t so = ops->state_sharded ? r->unit_soff[u] : r->unit_off[u];
			void *g = ops->grads_sharded ? run_elem(r, rk->grads, r->unit_soff[u])
			                             : (ops->state_sharded ? grad_slots(r, k, u)
			                                                   : run_elem(r, rk->grads, r->unit_off[u]));
			void *p = param_slots(r, k, u);
			float *w = mixed ? rk->master + so : (float *)p;
			optim_update(&r->opt, t + 1, w, rk->m + so, rk->v ? rk->v + so : NULL, g, r->dt,
			             mixed ? (zs_half *)p : NULL, cnt);
		}
	}
}

static void step(struct zs_run *r, unsigned t)
{
	forward(r, t);
	backward(r);
	if (r->ops->reduce && r->world > 1) {
		tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
		r->ops->reduce(r);
	}
	optimizer(r, t);
	if (r->ops->after_optimizer && r->world > 1)
		r->ops->after_optimizer(r);
}

/* ------------------------------------------------------------------------- */
/* results */

/* Under MPI: gather to process 0 the rank entries of buf (world entries
 * of `bytes`, each process having filled its own ranks'). In process,
 * every entry is already here. */
static void gather(const struct zs_run *r, void *buf, size_t bytes)
{
#ifdef HAVE_MPI
	if (r->mpi)
		mpi_job_gather(buf, bytes, r->world);
#else
	(void)r;
	(void)buf;
	(void)bytes;
#endif
}

/* The final fp32 weights are sharded (each rank holds its slots) or held
 * whole by every rank. */
static int weights_sharded(const struct zs_run *r)
{
	return r->precision == ZS_MIXED ? r->ops->state_sharded : r->ops->params_sharded;
}

/* Rank k's final fp32 weights of unit u: pointer and count (its slots).
 * Sharded ones of a rank in another process come from `remote`, every
 * rank's S slots gathered to process 0. */
static const float *final_weights(const struct zs_run *r, unsigned k, size_t u, const float *remote, size_t *cnt)
{
	const struct zs_rank *rk = &r->rank[k];
	const float *w = r->precision == ZS_MIXED ? rk->master : (const float *)rk->params;
	if (!weights_sharded(r)) {
		*cnt = k == 0 ? r->unit_n[u] : 0;
		return w + r->unit_off[u];
	}
	*cnt = run_owned(r, u, k);
	if (k < r->r0 || k >= r->r1)
		return remote + (size_t)k * r->shard + r->unit_soff[u];
	return w + r->unit_soff[u];
}

/* Under MPI, every rank's sharded final weights, gathered to process 0
 * (N·S floats, outside the tracker: it is after the run). NULL otherwise. */
static float *gather_weights(const struct zs_run *r)
{
	if (!r->mpi || !weights_sharded(r) || (r->r0 == 0 && r->r1 == r->world))
		return NULL;
	float *all = zs_calloc((size_t)r->world * r->shard, sizeof *all);
	for (unsigned k = r->r0; k < r->r1; k++)
		for (size_t u = 0; u < r->nunits; u++) {
			size_t cnt;
			const float *w = final_weights(r, k, u, NULL, &cnt);
			memcpy(all + (size_t)k * r->shard + r->unit_soff[u], w, cnt * sizeof *w);
		}
	gather(r, all, r->shard * sizeof *all);
	return all;
}

/* Fill res from every rank's figures (on process 0 under MPI; the other
 * processes only send theirs, and their res stays partial). */
static void collect(struct zs_run *r, const struct zs_run_options *opt, size_t os_peak, struct zs_result *res)
{
	unsigned N = r->world, steps = res->steps;
	struct zs_rank_mem *mem = zs_calloc(N, sizeof *mem);
	memcpy(mem + r->r0, r->tracker.rank + r->r0, (r->r1 - r->r0) * sizeof *mem);
	gather(r, mem, sizeof *mem);
	res->comm = zs_calloc(N, sizeof *res->comm);
	memcpy(res->comm + r->r0, r->coll.stats + r->r0, (r->r1 - r->r0) * sizeof *res->comm);
	gather(r, res->comm, sizeof *res->comm);
	gather(r, r->rank_loss, steps * sizeof *r->rank_loss);
	if (r->mpi) {
		res->os_peak = zs_calloc(N, sizeof *res->os_peak);
		for (unsigned k = r->r0; k < r->r1; k++)
			res->os_peak[k] = os_peak;
		gather(r, res->os_peak, sizeof *res->os_peak);
	}
	float *remote = gather_weights(r);
	res->partial = r->r0 != 0;

	res->resident = zs_calloc(N, sizeof *res->resident);
	res->peak = zs_calloc(N, sizeof *res->peak);
	res->binding_rank = 0;
	for (unsigned k = 0; k < N; k++) {
		res->resident[k] = mem[k].total;
		res->peak[k] = mem[k].peak;
		if (res->peak[k] > res->peak[res->binding_rank])
			res->binding_rank = k;
	}
	const struct zs_rank_mem *bm = &mem[res->binding_rank];
	memcpy(res->resident_breakdown, bm->cur, sizeof bm->cur);
	memcpy(res->peak_breakdown, bm->at_peak, sizeof bm->at_peak);
	free(mem);
	/* The mean loss of each step: ranks summed 0..N-1 in double. */
	for (unsigned t = 0; t < steps; t++) {
		double sum = 0;
		for (unsigned k = 0; k < N; k++)
			sum += r->rank_loss[(size_t)k * steps + t];
		res->losses[t] = (float)(sum / N);
	}
	res->nunits = r->nunits;
	for (size_t u = 0; u < r->nunits; u++)
		res->unit_n[u] = r->unit_n[u];
	res->shard_elements = r->shard;
	res->padded_elements = r->shard * N;
	if (res->partial) {
		free(remote);
		return;
	}

	XXH3_state_t *h = XXH3_createState();
	if (h == NULL || XXH3_64bits_reset(h) != XXH_OK)
		digest_failed();
	if (opt->weights)
		res->weights = zs_malloc(r->shape.nparams * sizeof(float));
	for (size_t u = 0; u < r->nunits; u++) {
		size_t at = r->unit_off[u];
		for (unsigned k = 0; k < N; k++) {
			size_t cnt;
			const float *w = final_weights(r, k, u, remote, &cnt);
			if (XXH3_64bits_update(h, w, cnt * sizeof *w) != XXH_OK)
				digest_failed();
			if (res->weights)
				memcpy(res->weights + at, w, cnt * sizeof(float));
			at += cnt;
		}
	}
	res->digest = XXH3_64bits_digest(h);
	XXH3_freeState(h);
	free(remote);
	if (opt->timeline) {
		res->ntimeline = r->tracker.nevents;
		res->timeline = zs_malloc((res->ntimeline ? res->ntimeline : 1) * sizeof *res->timeline);
		memcpy(res->timeline, r->tracker.events, res->ntimeline * sizeof *res->timeline);
	}
}

double engine_bytes_upper_bound(const struct zs_config *c, unsigned world)
{
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	double psi = zs_config_params(c), widths = 0, widest = 0;
	for (size_t l = 0; l < c->nwidths; l++) {
		widths += (double)c->widths[l];
		if (l > 0 && (double)c->widths[l] > widest)
			widest = (double)c->widths[l];
	}
	/* padded state, transient params and grads, activations and scratch */
	double per_rank = (psi + world) * (2.0 * p + 2.0 * g + k) +
	                  4.0 * c->batch * (widths + (double)c->widths[c->nwidths - 1] + 2 * widest);
	return per_rank * world;
}

/* Full buffers must hold the same bytes on every rank after a step (DP's
 * replicas, ZeRO-1/2's gathered params); the digest reads rank 0's. Each
 * process compares its ranks with its first; under MPI, process 0 also
 * compares every process's first rank with rank 0, by digest. */
static int check_replicas(const struct zs_run *r, char **cause)
{
	const struct zs_scheme_ops *ops = r->ops;
	size_t psi = r->shape.nparams;
	const struct zs_rank *a = &r->rank[r->r0];
	for (unsigned k = r->r0 + 1; k < r->r1; k++) {
		const struct zs_rank *b = &r->rank[k];
		if (!ops->params_sharded && memcmp(a->params, b->params, psi * r->esize) != 0)
			return zs_fail(cause, "internal error: rank %u's params differ from rank %u's (%s, N=%u)", k, r->r0,
			               ops->name, r->world);
		if (!ops->state_sharded && a->master && memcmp(a->master, b->master, psi * sizeof(float)) != 0)
			return zs_fail(cause, "internal error: rank %u's master weights differ from rank %u's (%s, N=%u)",
			               k, r->r0, ops->name, r->world);
	}
	if (!r->mpi)
		return 0;
	uint64_t(*h)[2] = zs_calloc(r->world, sizeof *h);
	for (unsigned k = r->r0; k < r->r1; k++) {
		h[k][0] = ops->params_sharded ? 0 : XXH3_64bits(a->params, psi * r->esize);
		h[k][1] = ops->state_sharded || a->master == NULL ? 0 : XXH3_64bits(a->master, psi * sizeof(float));
	}
	gather(r, h, sizeof *h);
	int bad = 0;
	for (unsigned k = 0; k < r->world && r->r0 == 0 && !bad; k++)
		if (h[k][0] != h[0][0] || h[k][1] != h[0][1])
			bad = zs_fail(cause, "internal error: rank %u's params or master weights differ from rank 0's (%s, N=%u)",
			              k, ops->name, r->world);
	free(h);
	return bad;
}

int engine_run(const struct zs_config *c, enum zs_scheme scheme, unsigned world, enum zs_unit unit,
               const struct zs_case *cs, const struct zs_run_options *opt, struct zs_result *res,
               char **cause)
{
	if (zs_config_validate(c, cause) != 0)
		return -1;
	memset(res, 0, sizeof *res);
	struct zs_run r;
	memset(&r, 0, sizeof r);
	r.ops = schemes[scheme];
	mlp_shape_init(&r.shape, c->widths, c->nwidths);
	r.world = world;
	r.batch = c->batch;
	r.precision = c->precision;
	r.dt = c->precision == ZS_MIXED ? ZS_F16 : ZS_F32;
	r.esize = coll_dtype_size(r.dt);
	r.seed = c->seed;
	r.cs = cs;
	float *own_init = NULL;
	if (cs != NULL)
		r.init = cs->weights;
	else if (opt->init != NULL)
		r.init = opt->init;
	else
		r.init = own_init = engine_initial_weights(c);
	optim_init(&r.opt, c->optimizer, c->lr);
	r.opt.beta1 = (float)c->beta1; /* --beta1, --beta2, --eps, or a case's */
	r.opt.beta2 = (float)c->beta2;
	r.opt.eps = (float)c->eps;
	setup_units(&r, unit);
#ifdef HAVE_MPI
	/* This run's peak resident set starts from what the process holds
	 * without it. */
	if (opt->mpi && (osmem_reset_peak(cause) != 0 || coll_init_mpi(&r.coll, world, cause) != 0)) {
		free(own_init);
		return -1;
	}
	r.mpi = opt->mpi;
#endif
	if (!r.mpi)
		coll_init_inprocess(&r.coll, world);
	r.r0 = r.coll.r0;
	r.r1 = r.coll.r1;
	tracker_init(&r.tracker, world);
	r.rank = zs_calloc(world, sizeof *r.rank);
	r.rank_loss = zs_calloc((size_t)world * c->steps, sizeof *r.rank_loss);
	r.ptr_a = zs_calloc(world, sizeof *r.ptr_a);
	r.ptr_b = zs_calloc(world, sizeof *r.ptr_b);

	setup_state(&r);
	res->losses = zs_calloc(c->steps, sizeof *res->losses);
	for (unsigned t = 0; t < c->steps; t++) {
		if (opt->timeline && t + 1 == c->steps)
			tracker_record(&r.tracker);
		step(&r, t);
		tracker_stop_recording(&r.tracker);
		for (unsigned k = r.r0; k < r.r1; k++)
			r.rank_loss[(size_t)k * c->steps + t] = r.rank[k].loss;
	}
	size_t os_peak = r.mpi ? osmem_peak_bytes() : 0;
	res->scheme = scheme;
	res->world = world;
	res->unit = unit;
	res->steps = c->steps;
	res->processes = r.mpi ? world / (r.r1 - r.r0) : 1;
	collect(&r, opt, os_peak, res);
	int replicas = check_replicas(&r, cause);
	free(own_init);

	run_free_all(&r, RUN_FIELD(params));
	run_free_all(&r, RUN_FIELD(grads));
	run_free_all(&r, RUN_FIELD(master));
	run_free_all(&r, RUN_FIELD(m));
	run_free_all(&r, RUN_FIELD(v));
	size_t left = tracker_outstanding(&r.tracker);
	tracker_destroy(&r.tracker);
	coll_destroy(&r.coll);
	free(r.rank);
	free(r.rank_loss);
	free(r.ptr_a);
	free(r.ptr_b);
	if (left != 0) {
		engine_result_free(res);
		return zs_fail(cause, "internal error: %zu tracked blocks were not freed", left);
	}
	if (replicas != 0)
		engine_result_free(res);
	return replicas;
}

void engine_result_free(struct zs_result *res)
{
	free(res->resident);
	free(res->peak);
	free(res->comm);
	free(res->os_peak);
	free(res->losses);
	free(res->timeline);
	free(res->weights);
	memset(res, 0, sizeof *res);
}
