/*
 * ag_pass — the event-list writer of the wrappers' passes (util/ag_pass.h).
 */
#include "util/ag_pass.h"

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

/* torch.autograd.profiler.record_function in 1.13 on the CPU: a zeros(1)
 * handle and the 288-byte one _record_function_enter returns, gone before
 * the body runs (util/autograd.c's record_function, as the optimizer's). */
void agp_record_function(struct ag_pass *p, const struct ag_options *o, enum zs_phase ph)
{
	if (o->version != ZS_TORCH_1_13 || o->device != ZS_DEVICE_CPU)
		return;
	uint32_t h = agp_storage(p, "zeros (record_function handle)", AG_F32, 1, 0, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, h, ph);
	agp_op(p, ph, AG_OP_FILL, NO, h);
	uint32_t r = agp_storage(p, "_record_function_enter (handle)", AG_BOOL, 288, 0, ZS_CAT_ACTIVATIONS);
	agp_alloc(p, r, ph);
	agp_op(p, ph, AG_OP_FILL, NO, r);
	agp_free(p, r, ph);
	agp_free(p, h, ph);
}

