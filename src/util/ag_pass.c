/*
 * ag_pass — the event-list writer of the wrappers' passes (util/ag_pass.h).
 */
#include "util/ag_pass.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define NO AG_NONE

uint32_t agp_newt(struct ag_pass *p)
{
	if (p->s->ntensors == p->cap_tensors) {
		p->cap_tensors = p->cap_tensors ? 2 * p->cap_tensors : 64;
		p->s->tensor = zs_realloc(p->s->tensor, p->cap_tensors * sizeof *p->s->tensor);
	}
	uint32_t t = (uint32_t)p->s->ntensors++;
	memset(&p->s->tensor[t], 0, sizeof p->s->tensor[t]);
	return t;
}

/* The elements of a storage (every one the pass counts is whole and
 * contiguous: parameters, buffers, grads; a 0-dim scalar is one). */
uint64_t agp_elements(const struct ag_tensor *x) { return x->bytes / ag_dtype_size(x->dtype); }

/* A storage of n elements of dtype dt (1-D; 0-dim where n is 0). */
uint32_t agp_storage(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat)
{
	uint32_t t = agp_newt(p);
	struct ag_tensor *x = &p->s->tensor[t];
	x->what = what;
	x->dtype = dt;
	x->ndim = scalar ? 0 : 1;
	x->shape[0] = n;
	x->stride[0] = 1;
	x->storage = t;
	x->bytes = (scalar ? 1 : n) * ag_dtype_size(dt);
	x->role = AG_ROLE_TEMP;
	x->cat = cat;
	x->param = -1;
	x->module = -1;
	x->part = -1;
	return t;
}

/* A contiguous view of `flat` shaped as tensor `like`, at element `off`. */
uint32_t agp_view_as(struct ag_pass *p, uint32_t flat, uint32_t like, uint64_t off)
{
	uint32_t t = agp_newt(p);
	struct ag_tensor *x = &p->s->tensor[t];
	const struct ag_tensor *l = &p->s->tensor[like], *f = &p->s->tensor[flat];
	x->what = f->what;
	x->dtype = f->dtype;
	x->ndim = l->ndim;
	memcpy(x->shape, l->shape, sizeof x->shape);
	memcpy(x->stride, l->stride, sizeof x->stride); /* `like` is a whole contiguous storage */
	x->storage = flat;
	x->offset = off;
	x->role = f->role;
	x->cat = f->cat;
	x->param = -1;
	x->module = -1;
	x->part = -1;
	return t;
}

struct ag_event *agp_emit(struct ag_pass *p, enum ag_event_kind k, enum zs_phase ph, int32_t module)
{
	if (p->nev == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 256;
		p->ev = zs_realloc(p->ev, p->cap * sizeof *p->ev);
	}
	struct ag_event *e = &p->ev[p->nev++];
	memset(e, 0, sizeof *e);
	e->kind = k;
	e->phase = ph;
	e->module = module;
	for (int i = 0; i < AG_MAXIN; i++)
		e->in[i] = NO;
	for (int i = 0; i < AG_MAXOUT; i++)
		e->out[i] = NO;
	return e;
}

void agp_alloc(struct ag_pass *p, uint32_t t, enum zs_phase ph) { agp_emit(p, AG_EV_ALLOC, ph, -1)->t = t; }
void agp_free(struct ag_pass *p, uint32_t t, enum zs_phase ph) { agp_emit(p, AG_EV_FREE, ph, -1)->t = t; }

struct ag_event *agp_op(struct ag_pass *p, enum zs_phase ph, enum ag_op k, uint32_t in0, uint32_t out0)
{
	struct ag_event *e = agp_emit(p, AG_EV_OP, ph, -1);
	e->op = k;
	e->in[0] = in0;
	e->out[0] = out0;
	return e;
}

void agp_copy(struct ag_pass *p, const struct ag_event *e)
{
	agp_emit(p, e->kind, e->phase, e->module);
	p->ev[p->nev - 1] = *e;
}

void agp_take(struct ag_pass *p, struct ag_event **list, size_t *n)
{
	free(*list);
	*list = p->ev;
	*n = p->nev;
	p->ev = NULL;
	p->nev = p->cap = 0;
}

void agp_copy_renamed(struct ag_pass *p, const struct ag_event *e0, const uint32_t *orig, size_t nt)
{
	struct ag_event e = *e0;
	if (e.t != NO && e.t < nt && orig[e.t] != NO)
		e.t = orig[e.t];
	for (int k = 0; k < AG_MAXIN; k++)
		if (e.in[k] != NO && e.in[k] < nt && orig[e.in[k]] != NO)
			e.in[k] = orig[e.in[k]];
	for (int k = 0; k < AG_MAXOUT; k++)
		if (e.out[k] != NO && e.out[k] < nt && orig[e.out[k]] != NO)
			e.out[k] = orig[e.out[k]];
	agp_copy(p, &e);
}

/* torch.autograd.profiler.record_function in 1.13 on the CPU: a zeros(1)
 * handle and the 288-byte one _record_function_enter returns, gone before
 * the body runs (util/autograd.c's record_function, as the optimizer's). */
void agp_record_function(struct ag_pass *p, const struct ag_options *o, enum zs_phase ph)
{
	if (o->version != ZS_TORCH_1_13 || o->device != ZS_DEVICE_CPU)
		return;
	uint32_t h = agp_storage(p, AG_RF_HANDLE, AG_F32, 1, 0, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, h, ph);
	agp_op(p, ph, AG_OP_FILL, NO, h);
	uint32_t r = agp_storage(p, AG_RF_ENTER, AG_BOOL, 288, 0, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, r, ph);
	agp_op(p, ph, AG_OP_FILL, NO, r);
	agp_free(p, r, ph);
	agp_free(p, h, ph);
}


/* A contiguous view of storage `flat` with x's shape, at element `off`. */
uint32_t agp_view_shaped(struct ag_pass *p, uint32_t flat, uint32_t x, uint64_t off)
{
	uint32_t t = agp_newt(p);
	struct ag_tensor *v = &p->s->tensor[t];
	*v = p->s->tensor[x];
	int64_t st = 1;
	for (int i = (int)v->ndim - 1; i >= 0; i--) {
		v->stride[i] = st;
		st *= (int64_t)v->shape[i];
	}
	v->dtype = p->s->tensor[flat].dtype;
	v->storage = flat;
	v->offset = off;
	v->bytes = 0;
	v->role = AG_ROLE_TEMP;
	v->cat = p->s->tensor[flat].cat;
	return t;
}

/* A Python float given to an in-place tensor op: its 8-byte wrapped
 * number and TensorIterator's fp32 copy (util/autograd.c's scalar_op_). */
void agp_scalar_inplace(struct ag_pass *p, enum ag_op k, uint32_t x, double v, enum zs_phase ph)
{
	uint32_t w = agp_storage(p, "scalar (wrapped number)", AG_F64, 0, 1, ZS_CAT_BUCKETS);
	agp_alloc(p, w, ph);
	agp_op(p, ph, AG_OP_FILL, NO, w)->arg[0] = v;
	/* TensorIterator's copy of the number in x's dtype (bf16's 2 bytes) */
	enum ag_dtype dt = p->s->tensor[x].dtype;
	uint32_t c = agp_storage(p, dt == AG_F32 ? "scalar (fp32 copy)" : "scalar (16-bit copy)", dt, 0, 1, ZS_CAT_BUCKETS);
	agp_alloc(p, c, ph);
	agp_op(p, ph, AG_OP_COPY, w, c);
	agp_op(p, ph, k, x, x)->arg[0] = v;
	agp_free(p, c, ph);
	agp_free(p, w, ph);
}

/* One list's optimizer section (agp_trained_params) into trained[] and
 * grad_of[]: its .grads and parameters, each in the order first read or
 * written, paired. */
static void trained_in(const struct ag_step *s, const struct ag_event *ev, size_t n, size_t nt,
                       unsigned char *trained, uint32_t *grad_of)
{
	uint32_t *w = zs_malloc((nt ? nt : 1) * sizeof *w), *g = zs_malloc((nt ? nt : 1) * sizeof *g);
	unsigned char *seen = zs_calloc(nt ? nt : 1, 1), *wseen = zs_calloc(nt ? nt : 1, 1);
	size_t nw = 0, ng = 0;
	int in_opt = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		if (e->kind == AG_EV_MARK && e->label != NULL) {
			if (strcmp(e->label, "phase:optimizer") == 0)
				in_opt = 1;
			else if (strcmp(e->label, "phase:zero_grad") == 0)
				in_opt = 0;
			continue;
		}
		if (!in_opt || e->kind != AG_EV_OP)
			continue;
		for (int k = 0; k < AG_MAXIN; k++) {
			uint32_t x = e->in[k] == NO ? NO : s->tensor[e->in[k]].storage;
			if (x != NO && x < nt && s->tensor[x].role == AG_ROLE_GRAD && !seen[x]) {
				seen[x] = 1;
				g[ng++] = x;
			}
		}
		for (int k = 0; k < AG_MAXOUT; k++) {
			uint32_t x = e->out[k] == NO ? NO : s->tensor[e->out[k]].storage;
			if (x != NO && x < nt && s->tensor[x].role == AG_ROLE_PARAM && !wseen[x]) {
				wseen[x] = trained[x] = 1;
				w[nw++] = x;
			}
		}
	}
	for (size_t k = 0; k < ng && k < nw; k++)
		grad_of[g[k]] = w[k];
	free(w);
	free(g);
	free(seen);
	free(wseen);
}

/* Which parameter storages of s (below nt) the optimizer updates, and
 * the plain .grad each of them reads, paired in the optimizer's order:
 * the section between "phase:optimizer" and "phase:zero_grad" writes
 * each trainable parameter and reads its .grad, first in ps[] order
 * (ag_optimizer_events), whichever Adam. trained[t] is set for those;
 * grad_of[g] is the parameter of .grad g, AG_NONE for the rest: the
 * steady step's .grads, and the first step's where it is a list of its
 * own (step1; its grads are others where zero_grad sets them to None). */
void agp_trained_params(const struct ag_step *s, size_t nt, unsigned char *trained, uint32_t *grad_of)
{
	for (size_t t = 0; t < nt; t++)
		grad_of[t] = NO;
	trained_in(s, s->event, s->nevents, nt, trained, grad_of);
	if (s->step1 != NULL)
		trained_in(s, s->step1, s->nstep1, nt, trained, grad_of);
}

int agp_touches(const struct ag_step *s, const struct ag_event *e, uint32_t st)
{
	if (e->kind != AG_EV_OP)
		return 0;
	for (int k = 0; k < AG_MAXIN; k++)
		if (e->in[k] != AG_NONE && s->tensor[e->in[k]].storage == st)
			return 1;
	for (int k = 0; k < AG_MAXOUT; k++)
		if (e->out[k] != AG_NONE && s->tensor[e->out[k]].storage == st)
			return 1;
	return 0;
}

/* A 1-D view of n elements of storage `flat` at element `at`. */
uint32_t agp_view1(struct ag_pass *p, uint32_t flat, uint64_t at, uint64_t n)
{
	uint32_t t = agp_newt(p);
	struct ag_tensor *x = &p->s->tensor[t];
	const struct ag_tensor *f = &p->s->tensor[flat];
	x->what = f->what;
	x->dtype = f->dtype;
	x->ndim = 1;
	x->shape[0] = n;
	x->stride[0] = 1;
	x->storage = flat;
	x->offset = at;
	x->role = AG_ROLE_TEMP;
	x->cat = f->cat;
	x->param = x->module = x->part = -1;
	return t;
}

/* The events from `from` on are rank r's alone. */
void agp_rank_only(struct ag_pass *p, size_t from, unsigned r)
{
	for (size_t i = from; i < p->nev; i++)
		p->ev[i].only_rank = r + 1;
}
