/*
 * ag_ds — DeepSpeed's ZeRO-1 and ZeRO-2 over the PyTorch step
 * (util/ag_ds.h). Lines cited are runtime/zero/stage_1_and_2.py's at
 * DeepSpeed's 38327e0 unless said (engine.py, utils.py, zero/config.py
 * are runtime/'s).
 */
#include "util/ag_ds.h"

#include <stdlib.h>
#include <string.h>

#include "util/ag_pass.h"
#include "util/util.h"

#define NO AG_NONE

struct ds {
	struct ag_pass *p;
	unsigned N;
	uint64_t B, S;           /* the bucket's elements; a partition's */
	size_t n;                /* trainable parameters, the client Adam's order */
	uint64_t *numel, *off;   /* each one's elements and place in the flat buffer */
	uint32_t flat, bucket;
	enum ag_dtype dt;        /* self.dtype (284): the module's, fp32 or bf16 (module.bfloat16()) */
	/* the bucket: its parameters and their places, elements used */
	size_t *bk;
	uint64_t *bo;
	size_t nb;
	uint64_t used;
	/* per rank: grads_in_partition (its storage, AG_NONE until made, and
	 * elements used), and each own parameter's place in it */
	uint32_t *gip;
	uint64_t *gip_size, *gip_used, *gip_off; /* gip_off[r * n + k] */
	/* per rank: averaged_gradients once made (its views, how many, the
	 * padding's zeros or AG_NONE) and the grads_in_partition they view */
	uint32_t **avg, *pad, *gip0;
	size_t *navg;
	int have_avg;
};

static uint64_t lo(const struct ds *d, unsigned r) { return (uint64_t)r * d->S; }

/* Whether parameter k is in rank r's params_in_partition (get_partition_info,
 * 1607-1636: it starts in the partition, or the partition starts inside it). */
static int in_part(const struct ds *d, unsigned r, size_t k)
{
	uint64_t a = d->off[k], b = a + d->numel[k], s = lo(d, r), e = s + d->S;
	return (s <= a && a < e) || (a < s && s < b);
}

/* A storage made and filled (its value a stand-in where no later op reads
 * it: the norm's chain, docs/schedule.md). */
static uint32_t made(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat,
                     double v, enum zs_phase ph)
{
	uint32_t t = agp_storage(p, what, dt, n, scalar, cat);
	agp_alloc(p, t, ph);
	agp_op(p, ph, AG_OP_FILL, NO, t)->arg[0] = v;
	return t;
}

/* reduce_ipg_grads (1365-1421) over the bucket's used part: average_tensor
 * (1051-1150) divides it by N in place (1122), cuts it into slices by the
 * rank that owns them (neighbours of one rank merged), and with
 * use_multi_rank_bucket_allreduce (zero/config.py 115, its default)
 * allreduce_and_scatter (1023-1049) -> allreduce_and_copy_with_multiple_ranks
 * (1011-1021) -> allreduce_bucket (1490-1523): the slices flattened (a cat,
 * or the slice itself where there is one), all-reduced, each slice copied
 * back on its owner, the flat copy freed. Then each parameter of the
 * bucket whose partition is the rank's: its gradient copied into
 * grads_in_partition (copy_grads_in_partition, 1329-1363: made at the first
 * such copy, empty of the whole tensors of params_in_partition); stage 2
 * drops the others' .grad, a view of the bucket (no bytes). */
static void reduce_ipg(struct ds *d, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	if (d->used == 0)
		return;
	uint32_t uv = agp_view1(p, d->bucket, 0, d->used);
	agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, uv, (double)d->N, ph);
	/* the slices: (rank, bucket offset, elements) */
	size_t cap = d->nb * d->N, ns = 0;
	unsigned *sr = zs_malloc(cap * sizeof *sr);
	uint64_t *so = zs_malloc(cap * sizeof *so), *sn = zs_malloc(cap * sizeof *sn);
	for (size_t j = 0; j < d->nb; j++) {
		size_t k = d->bk[j];
		for (unsigned r = 0; r < d->N; r++) {
			uint64_t a = d->off[k], b = a + d->numel[k];
			uint64_t s = a > lo(d, r) ? a : lo(d, r), e = b < lo(d, r) + d->S ? b : lo(d, r) + d->S;
			if (s >= e)
				continue;
			if (ns > 0 && sr[ns - 1] == r) {
				sn[ns - 1] += e - s;
				continue;
			}
			sr[ns] = r;
			so[ns] = d->bo[j] + (s - a);
			sn[ns++] = e - s;
		}
	}
	uint32_t red = uv, cat = NO;
	if (ns > 1) {
		/* the slices tile the used part in order: their cat is one copy of it */
		cat = agp_storage(p, "cat (allreduce_bucket's flat slices)", d->dt, d->used, 0, ZS_CAT_BUCKETS);
		agp_alloc(p, cat, ph);
		agp_op(p, ph, AG_OP_COPY, uv, cat);
		red = cat;
	}
	agp_op(p, ph, AG_OP_ALL_REDUCE_SUM_, red, red);
	if (cat != NO) {
		for (size_t i = 0; i < ns; i++) {
			size_t from = p->nev;
			agp_op(p, ph, AG_OP_COPY, agp_view1(p, cat, so[i], sn[i]), agp_view1(p, d->bucket, so[i], sn[i]));
			agp_rank_only(p, from, sr[i]);
		}
		agp_free(p, cat, ph);
	}
	free(sr);
	free(so);
	free(sn);
	for (size_t j = 0; j < d->nb; j++) {
		size_t k = d->bk[j];
		for (unsigned r = 0; r < d->N; r++) {
			if (!in_part(d, r, k))
				continue;
			size_t from = p->nev;
			if (d->gip[r] == NO) {
				d->gip[r] = agp_storage(p, "empty (grads_in_partition)", d->dt, d->gip_size[r], 0, ZS_CAT_GRAD32);
				p->s->tensor[d->gip[r]].role = AG_ROLE_GRAD;
				agp_alloc(p, d->gip[r], ph);
				d->gip_used[r] = 0;
			}
			d->gip_off[r * d->n + k] = d->gip_used[r];
			agp_op(p, ph, AG_OP_COPY, agp_view1(p, d->bucket, d->bo[j], d->numel[k]),
			       agp_view1(p, d->gip[r], d->gip_used[r], d->numel[k]));
			d->gip_used[r] += d->numel[k];
			agp_rank_only(p, from, r);
		}
	}
	d->nb = 0;
	d->used = 0;
}

/* reduce_independent_p_g_buckets_and_remove_grads (939-970): a gradient
 * that would overflow the bucket reduces it first; then it is copied
 * into the bucket's next elements and .grad made a view of them, which
 * frees autograd's gradient (storage gs). */
static void ipg_add(struct ds *d, size_t k, uint32_t g, uint32_t gs, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	if (d->used + d->numel[k] > d->B)
		reduce_ipg(d, ph);
	ag_ds_bucket_put(p, d->bucket, g, gs, k, d->numel[k], d->bk, d->bo, &d->nb, &d->used, ph);
}

/* Rank r's averaged_gradients (the epilogue's get_flat_partition,
 * 1723-1761, with return_tensor_list): a narrow of each own gradient,
 * and a zeros of the padding at the last rank's end (*pad, else AG_NONE);
 * returns how many, in v[]. */
static size_t averaged(struct ds *d, unsigned r, uint32_t *v, uint32_t *pad, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	size_t m = 0;
	uint64_t cur = 0;
	*pad = NO;
	for (size_t k = 0; k < d->n; k++) {
		if (!in_part(d, r, k))
			continue;
		uint64_t skip = d->off[k] < lo(d, r) ? lo(d, r) - d->off[k] : 0, len = d->numel[k] - skip;
		if (len > d->S - cur)
			len = d->S - cur;
		v[m++] = agp_view1(p, d->gip[r], d->gip_off[r * d->n + k] + skip, len);
		cur += len;
	}
	if (cur < d->S) {
		size_t from = p->nev;
		*pad = made(p, "zeros (the last partition's padding)", d->dt, d->S - cur, 0, ZS_CAT_GRAD32, 0, ph);
		agp_rank_only(p, from, r);
		v[m++] = *pad;
	}
	return m;
}

/* The epilogue's averaged_gradients (independent_gradient_partition_epilogue,
 * 764-807) once the rest is reduced: the first micro-step's views kept
 * (with the grads_in_partition they view); a later micro-step's
 * (accumulation, stage 2) added into them in place (799-800) and gone
 * when the function returns (the list's last item first: the padding,
 * then the views and their grads_in_partition). Every rank's
 * grads_in_partition is made anew by the next reduction
 * (_release_ipg_buffers, 676-680). */
static void epilogue(struct ds *d, enum zs_phase ph)
{
	struct ag_pass *p = d->p;
	reduce_ipg(d, ph);
	uint32_t *v = zs_malloc((d->n + 1) * sizeof *v), *npad = zs_malloc(d->N * sizeof *npad),
	         *ngip = zs_malloc(d->N * sizeof *ngip);
	for (unsigned r = 0; r < d->N; r++) {
		if (!d->have_avg) {
			d->avg[r] = zs_malloc((d->n + 1) * sizeof **d->avg);
			d->navg[r] = averaged(d, r, d->avg[r], &d->pad[r], ph);
			d->gip0[r] = d->gip[r];
		} else {
			size_t m = averaged(d, r, v, &npad[r], ph), from = p->nev;
			for (size_t j = 0; j < m; j++) {
				struct ag_event *e = agp_op(p, ph, AG_OP_ADD_, d->avg[r][j], d->avg[r][j]);
				e->in[1] = v[j];
				e->arg[0] = 1;
			}
			agp_rank_only(p, from, r);
			ngip[r] = d->gip[r];
		}
		d->gip[r] = NO;
	}
	agp_free(p, d->bucket, ph);
	for (unsigned r = 0; d->have_avg && r < d->N; r++) {
		size_t from = p->nev;
		if (npad[r] != NO)
			agp_free(p, npad[r], ph);
		if (ngip[r] != NO)
			agp_free(p, ngip[r], ph);
		agp_rank_only(p, from, r);
	}
	d->have_avg = 1;
	free(v);
	free(npad);
	free(ngip);
}

/* loss_scaler.backward's loss * 1.0 (loss_scaler.py 61-63; a static scale
 * of 1 in fp32, 208-215), MulBackward keeping the wrapped number */
static void ag_ds_scaler_begin(struct ag_pass *p, struct ag_ds_scaler *sc, uint32_t loss, enum zs_phase ph)
{
	sc->wrapped = made(p, "scalar (wrapped number: loss_scale)", AG_F64, 0, 1, ZS_CAT_ACTIVATIONS, 1.0, ph);
	uint32_t c = agp_storage(p, "scalar (fp32 copy)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, c, ph);
	agp_op(p, ph, AG_OP_COPY, sc->wrapped, c);
	sc->scaled = agp_storage(p, "mul (loss * loss_scale)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, sc->scaled, ph);
	agp_op(p, ph, AG_OP_MUL_SCALAR, loss, sc->scaled)->arg[0] = 1.0;
	agp_free(p, c, ph);
	sc->await_one = 1;
}

static void ag_ds_scaler_after(struct ag_pass *p, struct ag_ds_scaler *sc, const struct ag_event *e)
{
	if (e->kind == AG_EV_FREE) {
		if (e->t == sc->one && sc->scaled != NO) { /* loss_scaler.backward returns */
			agp_free(p, sc->scaled, e->phase);
			sc->scaled = NO;
		}
		return;
	}
	if (e->kind != AG_EV_OP)
		return;
	if (sc->await_one && e->op == AG_OP_FILL) {
		/* backward's ones, then MulBackward0: grad * the kept
		 * number (its fp32 copy), which it then releases */
		sc->one = e->out[0];
		sc->await_one = 0;
		uint32_t c = agp_storage(p, "scalar (fp32 copy)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
		agp_alloc(p, c, e->phase);
		agp_op(p, e->phase, AG_OP_COPY, sc->wrapped, c);
		sc->gl = agp_storage(p, "mul (MulBackward0: grad * loss_scale)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
		agp_alloc(p, sc->gl, e->phase);
		agp_op(p, e->phase, AG_OP_MUL_SCALAR, sc->one, sc->gl)->arg[0] = 1.0;
		agp_free(p, c, e->phase);
		agp_free(p, sc->wrapped, e->phase);
	} else if (sc->gl != NO && e->phase == ZS_PH_BACKWARD) {
		int reads = 0;
		for (int j = 0; j < AG_MAXIN; j++)
			reads |= e->in[j] == sc->one;
		if (reads) { /* the loss's node took it */
			agp_free(p, sc->gl, e->phase);
			sc->gl = NO;
		}
	}
}

static int ag_ds_scaler_done(const struct ag_ds_scaler *sc)
{
	return sc->scaled == NO && sc->gl == NO && sc->one != NO;
}

uint32_t ag_ds_made(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat,
                    double v, enum zs_phase ph)
{
	return made(p, what, dt, n, scalar, cat, v, ph);
}

void ag_ds_adam_state(struct ag_pass *p, uint64_t n, enum ag_dtype norm, uint32_t *am, uint32_t *av, uint32_t *astep,
                      uint32_t *gnorm)
{
	struct ag_step *s = p->s;
	*am = agp_storage(p, "Adam exp_avg (partition)", AG_F32, n, 0, ZS_CAT_ADAM_M);
	s->tensor[*am].role = AG_ROLE_ADAM_M;
	*av = agp_storage(p, "Adam exp_avg_sq (partition)", AG_F32, n, 0, ZS_CAT_ADAM_V);
	s->tensor[*av].role = AG_ROLE_ADAM_V;
	*astep = agp_storage(p, "Adam step", AG_F32, 0, 1, ZS_CAT_ADAM_M);
	s->tensor[*astep].role = AG_ROLE_ADAM_STEP;
	*gnorm = agp_storage(p, "div (_global_grad_norm)", norm, 0, 1, ZS_CAT_SCRATCH);
}

void ag_ds_first_step(struct ag_pass *p, uint32_t am, uint32_t av, uint32_t astep, uint32_t gnorm)
{
	const uint32_t t[] = {astep, am, av, gnorm};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		agp_alloc(p, t[i], ZS_PH_SETUP);
		agp_op(p, ZS_PH_SETUP, AG_OP_FILL, NO, t[i])->arg[0] = 0;
	}
	agp_take(p, &p->s->first_step, &p->s->nfirst);
}

struct ag_event *ag_ds_plain_keep(struct ag_step *s, size_t *n)
{
	free(s->first_step);
	s->first_step = NULL;
	s->nfirst = 0;
	*n = s->nevents;
	struct ag_event *plain = zs_malloc((*n ? *n : 1) * sizeof *plain);
	memcpy(plain, s->event, *n * sizeof *plain);
	return plain;
}

void ag_ds_plain_step1(struct ag_step *s, struct ag_event **plain, size_t n)
{
	s->step1 = s->event;
	s->nstep1 = s->nevents;
	s->event = *plain;
	s->nevents = n;
	*plain = NULL;
}

/* The client Adam over one partition (ag_ds_adam_step); first: its first
 * step() (torch.optim.Adam's lazy state, step, exp_avg and exp_avg_sq
 * made and zeroed before the update: ag_optimizer_first_events). */
static size_t adam_step(struct ag_pass *p, const struct ag_options *o, const struct ag_param_state *ps, int first)
{
	size_t at = p->nev;
	if (first)
		ag_optimizer_first_events(p->s, o, ps, 1, &p->ev, &p->nev, &p->cap);
	else
		ag_optimizer_events(p->s, o, ps, 1, &p->ev, &p->nev, &p->cap);
	p->cap_tensors = p->s->ntensors; /* it grew the tensors by its own */
	for (size_t j = at; j < p->nev; j++) /* (its mark is the step's, the caller's) */
		if (p->ev[j].kind == AG_EV_MARK) {
			memmove(&p->ev[j], &p->ev[j + 1], (p->nev - j - 1) * sizeof *p->ev);
			p->nev--;
			break;
		}
	return at;
}

size_t ag_ds_adam_step(struct ag_pass *p, const struct ag_options *o, const struct ag_param_state *ps, int first)
{
	return adam_step(p, o, ps, first);
}

void ag_ds_walk_begin(struct ag_ds_walk *wk, struct ag_pass *p, const struct ag_ds_params *pp, uint32_t at_backward,
                      unsigned K, int moves)
{
	const size_t nt0 = pp->nt0, n = pp->n;
	*wk = (struct ag_ds_walk){.p = p, .nt0 = nt0, .n = n, .grad_of = pp->grad_of, .k_of = pp->k_of,
	                          .numel = pp->numel, .at_backward = at_backward, .lossk = NO, .mean = NO,
	                          .losses = NO, .K = K > 1 ? K : 1,
	                          .moves = moves, .put_t = NO, .put_s = NO};
	wk->sc = (struct ag_ds_scaler){.loss = NO, .one = NO, .wrapped = NO, .scaled = NO, .gl = NO};
	wk->gone = zs_calloc(nt0 ? nt0 : 1, 1);
	wk->cloned = zs_calloc(n ? n : 1, 1);
	wk->gs = zs_malloc((n ? n : 1) * sizeof *wk->gs);
	wk->gt = zs_malloc((n ? n : 1) * sizeof *wk->gt);
	wk->pend = zs_malloc((n ? n : 1) * sizeof *wk->pend);
	for (size_t k = 0; k < n; k++)
		wk->gs[k] = wk->gt[k] = wk->pend[k] = NO;
}

/* An AG_EV_GRAD_READY e copied and recorded, its parameter in *k: 1 where
 * the pass's hook takes it (put_t, put_s), 0 where not (a later
 * micro-step's under stage 1: the plain loop's accumulation), -1. */
static int grad_ready(struct ag_ds_walk *wk, const struct ag_event *e, size_t *k, char **cause)
{
	struct ag_pass *p = wk->p;
	uint32_t g = p->s->tensor[e->t].storage;
	agp_copy(p, e);
	if (g >= wk->nt0 || wk->grad_of[g] == NO || wk->k_of[wk->grad_of[g]] < 0)
		return zs_fail(cause, "--wrapper deepspeed: internal error: a gradient of no trained parameter");
	*k = (size_t)wk->k_of[wk->grad_of[g]];
	if (wk->gs[*k] == NO) { /* the step's first gradient of it */
		wk->gs[*k] = g;
		wk->gt[*k] = e->t;
		wk->gone[g] = 1;
		wk->cloned[*k] = p->s->tensor[g].what != NULL && strncmp(p->s->tensor[g].what, "grad (clone", 11) == 0;
		wk->nready++;
		wk->put_t = e->t;
		wk->put_s = g;
		return 1;
	}
	/* a later micro-step's: stage 1 added it into .grad in place (the
	 * plain loop's AccumulateGrad: the list's own); where the hook moved
	 * .grad out (and the epilogue set it to None), AccumulateGrad makes
	 * the new gradient .grad again (a copy where it copied the first) */
	if (!wk->moves)
		return 0;
	if (wk->pend[*k] == NO || g != wk->gs[*k])
		return zs_fail(cause, "--wrapper deepspeed: internal error: a gradient arrives twice in a micro-step");
	uint32_t nt = wk->pend[*k], ns = p->s->tensor[nt].storage;
	wk->pend[*k] = NO;
	if (wk->cloned[*k]) {
		/* (the gradient's dtype: bf16 under DeepSpeed's bf16) */
		uint32_t c = agp_storage(p, "grad (clone_obey_contract)", p->s->tensor[nt].dtype, wk->numel[*k], 0,
		                         ZS_CAT_GRAD32);
		p->s->tensor[c].role = AG_ROLE_GRAD;
		agp_alloc(p, c, e->phase);
		agp_op(p, e->phase, AG_OP_COPY, nt, agp_view_shaped(p, c, nt, 0));
		wk->put_t = agp_view_shaped(p, c, nt, 0);
		wk->put_s = c;
	} else {
		if (ns < wk->nt0)
			wk->gone[ns] = 1; /* the list's release of it: the hook's */
		wk->put_t = nt;
		wk->put_s = ns;
	}
	return 1;
}

/* The engine's backward logs its loss (engine.py 2105-2106, before the
 * optimizer's backward): mean_loss = loss.mean().detach(), 1.13's mean of
 * a 0-dim fp32 tensor (its result, then div_ by the element count: a
 * wrapped number in float64 and its fp32 copy, freed; .detach() a view);
 * self.losses that mean at the first micro-step, then
 * `self.losses + mean_loss` (not in place: a new 0-dim tensor, the last
 * one released as it is replaced). */
static void log_loss(struct ag_ds_walk *wk, uint32_t loss)
{
	struct ag_pass *p = wk->p;
	const enum zs_phase ph = ZS_PH_BACKWARD;
	wk->mean = agp_storage(p, "mean (the engine's mean_loss)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, wk->mean, ph);
	agp_op(p, ph, AG_OP_COPY, loss, wk->mean); /* the sum of its one element */
	uint32_t wn = made(p, "scalar (wrapped number: numel)", AG_F64, 0, 1, ZS_CAT_ACTIVATIONS, 1.0, ph);
	uint32_t c = agp_storage(p, "scalar (fp32 copy)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, c, ph);
	agp_op(p, ph, AG_OP_COPY, wn, c);
	agp_free(p, c, ph);
	agp_free(p, wn, ph);
	if (wk->losses == NO) {
		wk->losses = wk->mean;
		return;
	}
	uint32_t sum = agp_storage(p, "add (the engine's self.losses)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, sum, ph);
	struct ag_event *e = agp_op(p, ph, AG_OP_ADD, wk->losses, sum);
	e->in[1] = wk->mean;
	e->arg[0] = 1;
	agp_free(p, wk->losses, ph);
	wk->losses = sum;
}

void ag_ds_backward_returns(struct ag_ds_walk *wk, enum zs_phase ph)
{
	if (wk->lossk != NO) {
		agp_free(wk->p, wk->lossk, ph);
		wk->gone[wk->lossk] = 1;
		wk->lossk = NO;
	}
	if (wk->mean != NO && wk->mean != wk->losses)
		agp_free(wk->p, wk->mean, ph);
	wk->mean = NO;
}

/* Whether e makes, fills or frees one of 1.13's record_function handles
 * (util/autograd.c, record_function: what a torch.optim call makes). */
static int record_function_event(const struct ag_step *s, const struct ag_event *e)
{
	uint32_t t = e->kind == AG_EV_ALLOC || e->kind == AG_EV_FREE ? e->t
	             : e->kind == AG_EV_OP && e->out[0] != NO ? s->tensor[e->out[0]].storage : NO;
	const char *w = t == NO ? NULL : s->tensor[t].what;
	return w != NULL && (strcmp(w, AG_RF_HANDLE) == 0 || strcmp(w, AG_RF_ENTER) == 0);
}

int ag_ds_next(struct ag_ds_walk *wk, const struct ag_event **ep, size_t *k, char **cause)
{
	struct ag_pass *p = wk->p;
	const struct ag_step *s = p->s;
	struct ag_ds_scaler *sc = &wk->sc;
	while (wk->i < s->nevents) {
		const struct ag_event *e = &s->event[wk->i++];
		const char *l = e->kind == AG_EV_MARK ? e->label : NULL;
		if (wk->skip) { /* the plain loop's optimizer */
			if (l == NULL || strcmp(l, "phase:zero_grad") != 0)
				continue;
			wk->skip = 0;
			/* the engine's zero_grad (engine.py 2243-2250): the
			 * ZeRO optimizer's own (stage_1_and_2.py 1638-1651,
			 * stage3.py 1737-1754: a plain method of an object,
			 * base_optimizer.py 14-18, so none of torch.optim's
			 * record_function, whose events that follow are
			 * dropped) finds every .grad None already (the pass
			 * freed them: the list's frees that follow are
			 * dropped), then _take_model_step sets self.losses to
			 * None (2278) */
			agp_copy(p, e);
			if (wk->losses != NO)
				agp_free(p, wk->losses, e->phase);
			wk->losses = NO;
			wk->in_zero_grad = 1;
			continue;
		}
		if (wk->in_zero_grad && record_function_event(s, e))
			continue;
		if (l != NULL && strncmp(l, "phase:backward", 14) == 0 && (l[14] == '\0' || l[14] == '@')) {
			/* the engine's backward (engine.py 2085-2152; the loss
			 * divided by K, _scale_loss_by_gas, 1904-1910: the loop's
			 * own division in the plain step, made by the engine
			 * instead): at_backward (stage 1 at a micro-step past the
			 * first: the last one's bucket, which no epilogue
			 * released, goes as the list holding it is replaced,
			 * stage_1_and_2.py 2048-2049), loss_scaler.backward's */
			if (sc->loss == NO || (wk->K > 1 && wk->lossk == NO))
				return zs_fail(cause, "--wrapper deepspeed: internal error: no loss in the step's forward");
			log_loss(wk, wk->K > 1 ? wk->lossk : sc->loss);
			if (wk->micro > 0 && !wk->moves && wk->at_backward != NO)
				agp_free(p, wk->at_backward, ZS_PH_BACKWARD);
			wk->micro++;
			if (wk->at_backward != NO)
				agp_alloc(p, wk->at_backward, ZS_PH_BACKWARD);
			ag_ds_scaler_begin(p, sc, wk->K > 1 ? wk->lossk : sc->loss, ZS_PH_BACKWARD);
			agp_copy(p, e);
			continue;
		}
		if (l != NULL && strcmp(l, "phase:optimizer") == 0) {
			if (wk->nready != wk->n)
				return zs_fail(cause, "--wrapper deepspeed: internal error: %zu of the %zu gradients arrived in "
				               "backward", wk->nready, wk->n);
			wk->skip = 1;
			*ep = e;
			return 1;
		}
		if (e->kind == AG_EV_GRAD_READY) {
			int r = grad_ready(wk, e, k, cause);
			if (r < 0)
				return -1;
			if (r == 0)
				continue;
			*ep = e;
			return 1;
		}
		/* any other event copied, but the pass's freed .grads' own
		 * free or zero */
		if (e->kind == AG_EV_FREE && e->t < wk->nt0 && wk->gone[e->t])
			continue;
		if (e->kind == AG_EV_FREE && wk->lossk != NO && e->t == wk->lossk && wk->micro < wk->K) {
			/* a micro-step's `del loss`: its backward has returned */
			wk->lossk = NO;
			*ep = e;
			return 1;
		}
		if (e->kind == AG_EV_OP && e->op == AG_OP_ZERO_ && e->out[0] != NO &&
		    s->tensor[e->out[0]].storage < wk->nt0 && wk->gone[s->tensor[e->out[0]].storage])
			continue;
		if (wk->moves && e->kind == AG_EV_OP && e->op == AG_OP_ADD_ && e->out[0] != NO &&
		    s->tensor[e->out[0]].storage < wk->nt0 && wk->gone[s->tensor[e->out[0]].storage]) {
			/* AccumulateGrad into a .grad the hook moved out: the new
			 * gradient waits for its AG_EV_GRAD_READY */
			uint32_t g = s->tensor[e->out[0]].storage;
			if (wk->grad_of[g] == NO || wk->k_of[wk->grad_of[g]] < 0)
				return zs_fail(cause, "--wrapper deepspeed: internal error: an accumulation into no gradient");
			wk->pend[wk->k_of[wk->grad_of[g]]] = e->in[1];
			continue;
		}
		if (wk->marks && l != NULL && strncmp(l, "ds3:", 4) == 0) {
			*ep = e;
			return 1;
		}
		if (e->kind == AG_EV_OP && e->op == AG_OP_NLL && e->phase == ZS_PH_FORWARD)
			sc->loss = e->out[0];
		else if (wk->K > 1 && e->kind == AG_EV_OP && e->op == AG_OP_DIV && sc->loss != NO && e->in[0] == sc->loss)
			wk->lossk = s->tensor[e->out[0]].storage;
		if (wk->copy != NULL)
			wk->copy(wk->ctx, e);
		else
			agp_copy(p, e);
		ag_ds_scaler_after(p, sc, e);
	}
	return 0;
}

int ag_ds_walk_end(struct ag_ds_walk *wk, int rc, char **cause)
{
	struct ag_pass *p = wk->p;
	if (rc == 0 && !ag_ds_scaler_done(&wk->sc))
		rc = zs_fail(cause, "--wrapper deepspeed: internal error: the backward's start or end not found");
	if (rc != 0)
		rc = -2; /* the step's, not the input's */
	if (rc == 0)
		agp_take(p, &p->s->event, &p->s->nevents);
	free(p->ev);
	free(wk->gone);
	free(wk->cloned);
	free(wk->gs);
	free(wk->gt);
	free(wk->pend);
	return rc;
}

void ag_ds_norm_flags(struct ag_pass *p, enum zs_phase po, uint32_t *inf, uint32_t *nan, uint32_t *ion, uint32_t *err)
{
	*inf = made(p, "isinf", AG_BOOL, 0, 1, ZS_CAT_SCRATCH, 0, po);
	*nan = made(p, "isnan", AG_BOOL, 0, 1, ZS_CAT_SCRATCH, 0, po);
	*ion = made(p, "logical_or", AG_BOOL, 0, 1, ZS_CAT_SCRATCH, 0, po);
	*err = made(p, "tensor (-1.0)", AG_F32, 0, 1, ZS_CAT_SCRATCH, -1, po);
}

void ag_ds_bucket_put(struct ag_pass *p, uint32_t bucket, uint32_t g, uint32_t gs, size_t k, uint64_t n,
                      size_t *bk, uint64_t *bo, size_t *nb, uint64_t *used, enum zs_phase ph)
{
	agp_op(p, ph, AG_OP_COPY, g, agp_view_shaped(p, bucket, g, *used));
	agp_free(p, gs, ph);
	bk[*nb] = k;
	bo[(*nb)++] = *used;
	*used += n;
}

void ag_ds_params_get(const struct ag_step *s, struct ag_ds_params *pp)
{
	const size_t nt0 = s->ntensors;
	*pp = (struct ag_ds_params){.nt0 = nt0};
	pp->trained = zs_calloc(nt0 ? nt0 : 1, 1);
	pp->grad_of = zs_malloc((nt0 ? nt0 : 1) * sizeof *pp->grad_of);
	agp_trained_params(s, nt0, pp->trained, pp->grad_of);
	pp->w = zs_malloc((nt0 ? nt0 : 1) * sizeof *pp->w);
	pp->k_of = zs_malloc((nt0 ? nt0 : 1) * sizeof *pp->k_of);
	for (size_t t = 0; t < nt0; t++)
		pp->k_of[t] = -1;
	/* the optimizer's writes, first in its order */
	unsigned char *seen = zs_calloc(nt0 ? nt0 : 1, 1);
	int in_opt = 0;
	for (size_t i = 0; i < s->nevents; i++) {
		const struct ag_event *e = &s->event[i];
		if (e->kind == AG_EV_MARK && e->label != NULL)
			in_opt = strcmp(e->label, "phase:optimizer") == 0 ? 1
			         : strcmp(e->label, "phase:zero_grad") == 0 ? 0 : in_opt;
		for (int j = 0; in_opt && e->kind == AG_EV_OP && j < AG_MAXOUT; j++) {
			uint32_t x = e->out[j] == NO ? NO : s->tensor[e->out[j]].storage;
			if (x != NO && x < nt0 && pp->trained[x] && !seen[x]) {
				seen[x] = 1;
				pp->k_of[x] = (int32_t)pp->n;
				pp->w[pp->n++] = x;
			}
		}
	}
	free(seen);
	pp->numel = zs_malloc((pp->n ? pp->n : 1) * sizeof *pp->numel);
	pp->off = zs_malloc((pp->n ? pp->n : 1) * sizeof *pp->off);
	for (size_t k = 0; k < pp->n; k++) {
		pp->numel[k] = agp_elements(&s->tensor[pp->w[k]]);
		pp->off[k] = pp->L;
		pp->L += pp->numel[k];
	}
}

void ag_ds_params_free(struct ag_ds_params *pp)
{
	free(pp->trained);
	free(pp->grad_of);
	free(pp->w);
	free(pp->k_of);
	free(pp->numel);
	free(pp->off);
}

uint32_t *ag_ds_flat_views(struct ag_pass *p, const struct ag_ds_params *pp, uint32_t flat)
{
	return ag_ds_param_views(p, pp, flat, NULL);
}

uint32_t *ag_ds_param_views(struct ag_pass *p, const struct ag_ds_params *pp, uint32_t flat, const uint32_t *each)
{
	struct ag_step *s = p->s;
	const size_t nt0 = pp->nt0, n = pp->n;
	const uint32_t *w = pp->w;
	uint32_t *orig = zs_malloc((nt0 ? nt0 : 1) * sizeof *orig);
	for (size_t t = 0; t < nt0; t++)
		orig[t] = NO;
	for (size_t k = 0; k < n; k++) {
		uint32_t w0 = agp_newt(p);
		s->tensor[w0] = s->tensor[w[k]];
		s->tensor[w0].storage = w0;
		orig[w[k]] = w0;
	}
	for (size_t t = 0; t < nt0; t++) {
		struct ag_tensor *x = &s->tensor[t];
		uint32_t ws = x->storage;
		if (ws >= nt0 || orig[ws] == NO)
			continue;
		int32_t k = pp->k_of[ws];
		int own = each != NULL && each[k] != NO;
		x->offset += own ? 0 : pp->off[k];
		if (t == ws)
			x->bytes = 0;
		x->storage = own ? each[k] : flat;
	}
	for (size_t i = 0; i < s->nsetup; i++)
		agp_copy_renamed(p, &s->setup[i], orig, nt0);
	/* deepspeed.initialize: the engine's _broadcast_model (engine.py
	 * 1183-1200, from 1284: each parameter's data from rank 0, in place) */
	for (size_t k = 0; k < n; k++)
		agp_op(p, ZS_PH_SETUP, AG_OP_BROADCAST_, orig[w[k]], orig[w[k]])->arg[0] = 0;
	return orig;
}

/* ------------------------------------------------------------------------ */

/* The state a step's list is written with (ds_step). */
struct ds_state {
	uint32_t fp32p, am, av, astep, gnorm;
};

/* One step's list into s->event, from the plain loop's steady list there
 * (the engine sets every .grad to None, so its first forward and
 * backward are its steady ones: the list is built with zero_grad none).
 * first: the run's first step (ag_step.step1; docs/schedule.md, "The
 * first step"), which differs from the steady step in what DeepSpeed and
 * the client Adam make once: Adam's state, made by its first step()
 * (torch/optim/adam.py, 1.13's 202-222, inside _optimizer_step,
 * 1811-1824), and _global_grad_norm, a Python float 0. (211) until the
 * first step() makes the tensor (1858) that later steps replace. The
 * rest is every step's: the ipg bucket made by each backward (2046-2053)
 * and dropped by the epilogue (_release_ipg_buffers, 676-680);
 * averaged_gradients made by each epilogue (786-793) and set to None by
 * step() (1904); the fp32 partition's .grad set by step() (1902) and to
 * None after the update (1914). 0, or -2 (an internal error). */
static int ds_step(struct ds *d, const struct ag_ds_params *ppc, const struct ag_options *o, int stage2,
                   const struct ds_state *sv, int first, char **cause)
{
	struct ag_pass *p = d->p;
	const unsigned world = d->N;
	const uint32_t fp32p = sv->fp32p, am = sv->am, av = sv->av, astep = sv->astep, gnorm = sv->gnorm;
	struct ag_ds_params pp_ = *ppc, *pp = &pp_;
	int rc = 0;
	d->nb = 0;
	d->used = 0;
	d->have_avg = 0;
	for (unsigned r = 0; r < world; r++)
		d->gip[r] = NO;
	/* the step: under --grad-accum K its K micro-steps, each the engine's
	 * backward (engine.py 2085-2152) over its loss divided by K
	 * (_scale_loss_by_gas, 1904-1910: the loop's own division in the plain
	 * step, the same op, made by the engine instead and gone when its
	 * backward returns, 2152); the optimizer's backward (2038-2060): the
	 * bucket, then loss_scaler.backward's */
	struct ag_ds_walk wk;
	ag_ds_walk_begin(&wk, p, pp, d->bucket, o->grad_accum, stage2);
	const struct ag_event *e;
	size_t kg;
	while ((rc = ag_ds_next(&wk, &e, &kg, cause)) == 1) {
		if (e->kind == AG_EV_GRAD_READY) {
			/* stage 2: the hook on its AccumulateGrad (904-920) */
			if (stage2)
				ipg_add(d, kg, wk.put_t, wk.put_s, e->phase);
			continue;
		}
		if (e->kind == AG_EV_FREE) {
			/* a micro-step's `del loss`: its backward has returned,
			 * after stage 2's epilogue (engine.py allreduce_gradients,
			 * 2048-2053: every micro-step) and with its scaled loss */
			if (stage2)
				epilogue(d, e->phase);
			agp_copy(p, e);
			ag_ds_backward_returns(&wk, e->phase);
			continue;
		}
		/* the optimizer's mark */
		/* engine.py allreduce_gradients (2048-2062): stage 1's
		 * reduce_gradients (706-725: every gradient in group
		 * order), then the epilogue (764-807): the rest reduced,
		 * averaged_gradients, the bucket released and every .grad
		 * set to None (grads_in_partition kept by the views) */
		const enum zs_phase ph = ZS_PH_BACKWARD;
		if (!stage2)
			for (size_t k = 0; k < d->n; k++)
				ipg_add(d, k, wk.gt[k], wk.gs[k], ph);
		epilogue(d, ph);
		uint32_t **avg = d->avg, *padr = d->pad;
		size_t *navg = d->navg;
		ag_ds_backward_returns(&wk, ph);
		agp_copy(p, e);
		/* step (1826-1944) */
		const enum zs_phase po = ZS_PH_OPTIMIZER;
		/* scaled_global_norm (1787-1803) -> get_grad_norm_direct
		 * (1663-1721): each own gradient's .double() copy and its
		 * vector_norm, their stack, square, sum, float (each
		 * freed as the next is made), the all-reduce; then pow,
		 * isinf, isnan, logical_or, tensor(-1.0) and the blend;
		 * the values are stand-ins (no later op reads them:
		 * gradient_clipping 0) */
		uint32_t tn = agp_storage(p, "float (the norm)", AG_F32, 0, 1, ZS_CAT_SCRATCH);
		uint32_t **nrm = zs_malloc(world * sizeof *nrm);
		for (unsigned r = 0; r < world; r++) {
			size_t from = p->nev, m = navg[r] - (padr[r] != NO);
			nrm[r] = zs_malloc((m + 1) * sizeof **nrm);
			for (size_t j = 0; j < m; j++) {
				uint32_t g = avg[r][j];
				uint32_t dbl = agp_storage(p, "_to_copy (.double())", AG_F64, p->s->tensor[g].shape[0], 0,
				                           ZS_CAT_SCRATCH);
				agp_alloc(p, dbl, po);
				agp_op(p, po, AG_OP_COPY, g, dbl);
				nrm[r][j] = made(p, "linalg_vector_norm", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
				agp_free(p, dbl, po);
			}
			uint32_t st = made(p, "stack", AG_F64, m, 0, ZS_CAT_SCRATCH, 0, po);
			uint32_t sq = made(p, "square", AG_F64, m, 0, ZS_CAT_SCRATCH, 0, po);
			agp_free(p, st, po);
			uint32_t sm = made(p, "sum", AG_F64, 0, 1, ZS_CAT_SCRATCH, 0, po);
			agp_free(p, sq, po);
			agp_alloc(p, tn, po);
			agp_op(p, po, AG_OP_FILL, NO, tn)->arg[0] = 0;
			agp_free(p, sm, po);
			agp_rank_only(p, from, r);
		}
		agp_op(p, po, AG_OP_ALL_REDUCE_SUM_, tn, tn);
		uint32_t pw = made(p, "pow", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
		agp_free(p, tn, po);
		uint32_t inf, nan, ion, err;
		ag_ds_norm_flags(p, po, &inf, &nan, &ion, &err);
		uint32_t m1 = made(p, "mul (inf_or_nan * err)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
		uint32_t ln = made(p, "logical_not", AG_BOOL, 0, 1, ZS_CAT_SCRATCH, 0, po);
		uint32_t m2 = made(p, "mul (not inf_or_nan * total_norm)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
		uint32_t bl = made(p, "add (the blend)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
		agp_free(p, m2, po);
		agp_free(p, ln, po);
		agp_free(p, m1, po);
		agp_free(p, pw, po);
		for (unsigned r = 0; r < world; r++) { /* the function returns: its list of norms */
			size_t from = p->nev;
			for (size_t j = 0; j < navg[r] - (padr[r] != NO); j++)
				agp_free(p, nrm[r][j], po);
			agp_rank_only(p, from, r);
			free(nrm[r]);
		}
		free(nrm);
		agp_free(p, err, po);
		agp_free(p, ion, po);
		agp_free(p, nan, po);
		agp_free(p, inf, po);
		/* vector_norm(stack(norm_groups)) (1803), then
		 * _global_grad_norm = it / prev_scale (a Python float):
		 * made while the last step's is kept, then replacing it */
		uint32_t st1 = made(p, "stack (norm_groups)", AG_F32, 1, 0, ZS_CAT_SCRATCH, 0, po);
		uint32_t vn = made(p, "linalg_vector_norm (scaled_global_norm)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0, po);
		agp_free(p, st1, po);
		agp_free(p, bl, po);
		{
			uint32_t wn = made(p, "scalar (wrapped number: prev_scale)", AG_F64, 0, 1, ZS_CAT_SCRATCH, 1.0, po);
			uint32_t c = agp_storage(p, "scalar (fp32 copy)", AG_F32, 0, 1, ZS_CAT_SCRATCH);
			agp_alloc(p, c, po);
			agp_op(p, po, AG_OP_COPY, wn, c);
			if (first) { /* the first: no tensor before it (a Python 0., 211) */
				agp_alloc(p, gnorm, po);
				agp_op(p, po, AG_OP_FILL, NO, gnorm)->arg[0] = 0;
				agp_free(p, c, po);
				agp_free(p, wn, po);
			} else {
				uint32_t q = made(p, "div (scaled_global_norm / prev_scale)", AG_F32, 0, 1, ZS_CAT_SCRATCH, 0,
				                  po);
				agp_free(p, c, po);
				agp_free(p, wn, po);
				agp_op(p, po, AG_OP_COPY, q, gnorm); /* the new one kept, the old one gone */
				agp_free(p, q, po);
			}
		}
		/* each rank: the flat fp32 gradient partition (1888-1897:
		 * a cat of the views, the last rank's padding among them;
		 * the view itself where there is one), the views and
		 * grads_in_partition dropped (free_grad_in_param_list,
		 * averaged_gradients None), unscale_and_clip_grads'
		 * mul_(1 / 1.0) (1970-1985), the client Adam
		 * (_optimizer_step, 1811-1824), the partition's gradient
		 * dropped, the fp32 partition copied into the rank's view
		 * of the flat buffer */
		for (unsigned r = 0; r < world; r++) {
			size_t from = p->nev;
			uint32_t g, gsto;
			if (navg[r] == 1) {
				g = avg[r][0];
				gsto = p->s->tensor[g].storage;
			} else {
				g = gsto = agp_storage(p, "cat (single_grad_partition)", d->dt, d->S, 0, ZS_CAT_GRAD32);
				p->s->tensor[g].role = AG_ROLE_GRAD;
				agp_alloc(p, g, po);
				uint64_t at = 0;
				for (size_t j = 0; j < navg[r]; j++) {
					uint64_t len = p->s->tensor[avg[r][j]].shape[0];
					agp_op(p, po, AG_OP_COPY, avg[r][j], agp_view1(p, g, at, len));
					at += len;
				}
			}
			/* .to(fp32) (1897): in fp32 the partition itself; from bf16
			 * a copy, the cat let go as it returns; then
			 * averaged_gradients = None (free_grad_in_param_list): the
			 * padding, then grads_in_partition (the list's last first) */
			if (d->dt != AG_F32) {
				uint32_t g32 = agp_storage(p, "_to_copy (the gradient partition's .to(fp32))", AG_F32, d->S, 0,
				                           ZS_CAT_GRAD32);
				p->s->tensor[g32].role = AG_ROLE_GRAD;
				agp_alloc(p, g32, po);
				agp_op(p, po, AG_OP_COPY, g, g32);
				if (navg[r] > 1)
					agp_free(p, gsto, po);
				if (padr[r] != NO)
					agp_free(p, padr[r], po);
				if (d->gip0[r] != NO && d->gip0[r] != padr[r])
					agp_free(p, d->gip0[r], po);
				else if (navg[r] == 1 && gsto != padr[r] && gsto != d->gip0[r])
					agp_free(p, gsto, po);
				g = gsto = g32;
			} else if (navg[r] > 1) {
				if (padr[r] != NO)
					agp_free(p, padr[r], po);
				if (d->gip0[r] != NO)
					agp_free(p, d->gip0[r], po);
			}
			agp_scalar_inplace(p, AG_OP_MUL_SCALAR_, g, 1.0, po);
			agp_rank_only(p, from, r);
			size_t at = adam_step(p, o, &(struct ag_param_state){fp32p, g, am, av, astep}, first);
			agp_free(p, gsto, po);
			if (navg[r] == 1 && padr[r] != NO && gsto != padr[r] && d->dt == AG_F32)
				agp_free(p, padr[r], po);
			agp_op(p, po, AG_OP_COPY, fp32p, agp_view1(p, d->flat, lo(d, r), d->S));
			agp_rank_only(p, at, r);
			free(avg[r]);
			avg[r] = NULL;
		}
		/* all_gather_dp_groups (utils.py 965-968 -> 954-962: none at
		 * N = 1): every rank's partition into the flat buffer (read
		 * from the fp32 partition the copy above made it equal to:
		 * one operand on every rank) */
		if (world > 1)
			agp_op(p, po, AG_OP_ALL_GATHER, fp32p, d->flat);
		agp_free(p, vn, po);
	}
	rc = ag_ds_walk_end(&wk, rc, cause);
	return rc;
}

int ag_ds_apply(struct ag_step *s, const struct ag_options *o, unsigned world, int stage2, uint64_t bucket,
                char **cause)
{
	if (world < 1)
		return zs_fail(cause, "--wrapper deepspeed: N must be at least 1");
	if (s->step1 != NULL) /* the pass writes its own from the steady list */
		return zs_fail(cause, "--wrapper deepspeed: internal error: the plain loop's first step given to the pass");
	/* the client Adam's parameters in its order (param_group, 305-315) */
	struct ag_ds_params pp;
	ag_ds_params_get(s, &pp);
	const uint32_t *w = pp.w;
	const uint64_t L = pp.L;
	struct ag_pass P = {.s = s, .cap_tensors = s->ntensors};
	struct ag_pass *p = &P;
	struct ds D = {.p = p, .N = world, .B = bucket, .n = pp.n, .numel = pp.numel, .off = pp.off, .dt = o->mdt};
	struct ds *d = &D;
	/* align_dense_tensors (utils.py 940-951) to nccl_start_alignment_factor
	 * (2, 277) times N (353-357); the partitions then all S (1587-1605) */
	uint64_t align = 2 * (uint64_t)world, Lp = (L + align - 1) / align * align;
	d->S = Lp / world;
	int rc = 0;
	for (size_t k = 0; k < d->n && rc == 0; k++)
		if (d->numel[k] > bucket) /* extra_large_param_to_reduce (958-959): reduced where it is */
			rc = zs_fail(cause, "--wrapper deepspeed: a parameter of %llu elements is larger than the reduce bucket "
			             "(%llu): DeepSpeed reduces it apart, which is not built yet (give --ds-reduce-bucket %llu "
			             "or more)", (unsigned long long)d->numel[k], (unsigned long long)bucket,
			             (unsigned long long)d->numel[k]);
	if (rc == 0 && d->n == 0)
		rc = zs_fail(cause, "--wrapper deepspeed: internal error: the step trains no parameter");
	if (rc != 0) {
		ag_ds_params_free(&pp);
		return rc;
	}
	d->bk = zs_malloc(d->n * sizeof *d->bk);
	d->bo = zs_malloc(d->n * sizeof *d->bo);
	d->gip = zs_malloc(world * sizeof *d->gip);
	d->gip_size = zs_calloc(world, sizeof *d->gip_size);
	d->gip_used = zs_calloc(world, sizeof *d->gip_used);
	d->gip_off = zs_calloc((size_t)world * d->n, sizeof *d->gip_off);
	d->avg = zs_calloc(world, sizeof *d->avg);
	d->pad = zs_malloc(world * sizeof *d->pad);
	d->gip0 = zs_malloc(world * sizeof *d->gip0);
	d->navg = zs_calloc(world, sizeof *d->navg);
	for (unsigned r = 0; r < world; r++)
		d->gip[r] = NO;
	for (unsigned r = 0; r < world; r++)
		for (size_t k = 0; k < d->n; k++)
			d->gip_size[r] += in_part(d, r, k) ? d->numel[k] : 0;

	/* the buffers of the engine and the optimizer */
	d->flat = agp_storage(p, "cat (bit16_groups_flat)", d->dt, Lp, 0, ZS_CAT_PARAM32);
	s->tensor[d->flat].role = AG_ROLE_PARAM;
	d->bucket = agp_storage(p, "empty (ipg_buffer)", d->dt, bucket, 0, ZS_CAT_BUCKETS);
	/* (what the client Adam updates: a parameter to it) */
	uint32_t fp32p = agp_storage(p, "clone (single_partition_of_fp32_groups)", AG_F32, d->S, 0, ZS_CAT_MASTER32);
	s->tensor[fp32p].role = AG_ROLE_PARAM;
	/* Adam's, and the optimizer's _global_grad_norm (float32) */
	uint32_t am, av, astep, gnorm;
	ag_ds_adam_state(p, d->S, AG_F32, &am, &av, &astep, &gnorm);

	/* The parameters before the engine: stand-ins of the set-up's own; the
	 * model's become views of the flat buffer (_update_model_bit16_weights,
	 * 643-651), and every view of them a view of it. */
	uint32_t *orig = ag_ds_flat_views(p, &pp, d->flat);
	/* deepspeed.initialize after the engine's broadcast: the optimizer's
	 * construction (305-403): each parameter's data kept aside and replaced
	 * by an empty(1); the flat buffer, a cat of them and a zeros of the
	 * padding; the originals dropped; the parameters made views of it (the
	 * empties go); the rank's fp32 partition cloned; initialize_optimizer_states
	 * (682-701) a zeros(S) gradient made and dropped */
	const enum zs_phase ph0 = ZS_PH_SETUP;
	uint32_t *empty1 = zs_malloc(d->n * sizeof *empty1);
	for (size_t k = 0; k < d->n; k++)
		empty1[k] = made(p, "empty (param.data's stand-in)", d->dt, 1, 0, ZS_CAT_PARAM32, 0, ph0);
	uint32_t pad = NO;
	if (Lp > L)
		pad = made(p, "zeros (align_dense_tensors' padding)", d->dt, Lp - L, 0, ZS_CAT_PARAM32, 0, ph0);
	agp_alloc(p, d->flat, ph0);
	for (size_t k = 0; k < d->n; k++)
		agp_op(p, ph0, AG_OP_COPY, orig[w[k]], agp_view_shaped(p, d->flat, orig[w[k]], d->off[k]));
	if (pad != NO) {
		agp_op(p, ph0, AG_OP_COPY, pad, agp_view1(p, d->flat, L, Lp - L));
		agp_free(p, pad, ph0);
	}
	for (size_t k = 0; k < d->n; k++)
		agp_free(p, orig[w[k]], ph0);
	for (size_t k = 0; k < d->n; k++)
		agp_free(p, empty1[k], ph0);
	free(empty1);
	/* .clone().float() (396-403): in fp32 the clone itself; from bf16 the
	 * clone (2S bytes), its fp32 copy, the clone freed */
	uint32_t c16 = NO;
	if (d->dt != AG_F32) {
		c16 = agp_storage(p, "clone (the bf16 partition)", d->dt, d->S, 0, ZS_CAT_MASTER32);
		agp_alloc(p, c16, ph0);
		for (unsigned r = 0; r < world; r++) {
			size_t from = p->nev;
			agp_op(p, ph0, AG_OP_COPY, agp_view1(p, d->flat, lo(d, r), d->S), c16);
			agp_rank_only(p, from, r);
		}
	}
	agp_alloc(p, fp32p, ph0);
	if (c16 != NO) {
		agp_op(p, ph0, AG_OP_COPY, c16, fp32p);
		agp_free(p, c16, ph0);
	}
	for (unsigned r = 0; r < world && c16 == NO; r++) {
		size_t from = p->nev;
		agp_op(p, ph0, AG_OP_COPY, agp_view1(p, d->flat, lo(d, r), d->S), fp32p);
		agp_rank_only(p, from, r);
	}
	uint32_t z = made(p, "zeros (initialize_optimizer_states' gradient)", AG_F32, d->S, 0, ZS_CAT_GRAD32, 0, ph0);
	agp_free(p, z, ph0);
	agp_take(p, &s->setup, &s->nsetup);

	/* The run's first step, a list of its own (ag_step.step1: Adam's
	 * state and _global_grad_norm made in it, ds_step), then the steady
	 * step; both written from the plain loop's steady list (kept for the
	 * second), no first_step prefix (the plain loop's Adam state is not
	 * the engine's) */
	const struct ds_state st = {.fp32p = fp32p, .am = am, .av = av, .astep = astep, .gnorm = gnorm};
	size_t nplain;
	struct ag_event *plain = ag_ds_plain_keep(s, &nplain);
	rc = ds_step(d, &pp, o, stage2, &st, 1, cause);
	if (rc == 0) {
		ag_ds_plain_step1(s, &plain, nplain);
		rc = ds_step(d, &pp, o, stage2, &st, 0, cause);
	}
	free(plain);
	ag_ds_params_free(&pp);
	free(orig);
	for (unsigned r = 0; r < world; r++)
		free(d->avg[r]);
	free(d->avg);
	free(d->pad);
	free(d->gip0);
	free(d->navg);
	free(d->bk);
	free(d->bo);
	free(d->gip);
	free(d->gip_size);
	free(d->gip_used);
	free(d->gip_off);
	return rc;
}
