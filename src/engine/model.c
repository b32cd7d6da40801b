/*
 * model — the MLP as a list of linear layers (model.h); the kernels are
 * mlp.h's. The transformer's list is tfm_net.c's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/mlp.h"
#include "engine/model.h"
#include "util/step.h"
#include "util/util.h"

static void linear_forward(const struct zs_layer *l, const struct zs_layer_io *io)
{
	float *out = io->t[l->out];
	const float *in = io->t[l->in];
	if (io->dt == ZS_F16)
		linear_forward_f16(out, in, io->w[0], io->w[1], l->relu, io->batch, l->din, l->dout);
	else
		linear_forward_f32(out, in, io->w[0], io->w[1], l->relu, io->batch, l->din, l->dout);
}

static void linear_backward(const struct zs_layer *l, const struct zs_layer_io *io)
{
	float *dx = l->dx == ZS_NO_TENSOR ? NULL : io->t[l->dx];
	const float *dy = io->t[l->dy], *in = io->t[l->in];
	if (io->dt == ZS_F16)
		linear_backward_f16(io->g[0], io->g[1], dx, dy, in, io->w[0], io->batch, l->din, l->dout);
	else
		linear_backward_f32(io->g[0], io->g[1], dx, dy, in, io->w[0], io->batch, l->din, l->dout);
}

static const struct zs_layer_kind linear = {"linear", linear_forward, linear_backward, NULL, NULL};

static float mlp_loss(const struct zs_net *m, float *const *t)
{
	const struct zs_layer *last = &m->layer[m->nlayers - 1];
	return mse_forward_backward(t[last->dy], t[last->out], t[m->target], m->batch, last->dout);
}

static unsigned add_tensor(struct zs_net *m, const char *name, size_t elements, enum zs_cat cat, enum zs_when alloc,
                           size_t layer)
{
	return model_add_tensor(m, (struct zs_tensor){.name = name, .block = -1, .elements = elements, .esize = 4,
	                                              .cat = cat, .alloc = alloc, .layer = layer,
	                                              .freed_after = ZS_END_OF_BACKWARD});
}

unsigned model_add_tensor(struct zs_net *m, struct zs_tensor t)
{
	if (m->ntensors == m->tensor_cap) {
		m->tensor_cap = m->tensor_cap ? 2 * m->tensor_cap : 16;
		m->tensor = zs_realloc(m->tensor, m->tensor_cap * sizeof *m->tensor);
	}
	m->tensor[m->ntensors] = t;
	return (unsigned)m->ntensors++;
}

void model_mlp_init(struct zs_net *m, const size_t *widths, size_t nwidths, size_t batch)
{
	struct mlp_shape s;
	mlp_shape_init(&s, widths, nwidths);
	memset(m, 0, sizeof *m);
	m->kind = ZS_NET_MLP;
	m->nparams = s.nparams;
	m->batch = batch;
	m->nlayers = s.nlayers;
	m->layer = zs_calloc(s.nlayers, sizeof *m->layer);
	m->loss = mlp_loss;
	size_t L = s.nlayers, dmax = batch * mlp_max_width(&s);
	unsigned delta[2];
	delta[0] = add_tensor(m, "delta0", dmax, ZS_CAT_SCRATCH, ZS_AT_BACKWARD, 0);
	delta[1] = add_tensor(m, "delta1", dmax, ZS_CAT_SCRATCH, ZS_AT_BACKWARD, 0);
	m->input = add_tensor(m, "x", batch * s.width[0], ZS_CAT_ACTIVATIONS, ZS_AT_FORWARD, 0);
	m->target = add_tensor(m, "y", batch * s.width[L], ZS_CAT_ACTIVATIONS, ZS_AT_FORWARD, 0);
	struct step_params sp;
	step_params_mlp(&sp, s.width, L + 1);
	for (size_t l = 0; l < L; l++) {
		struct zs_layer *ly = &m->layer[l];
		const struct step_layer *pl = &sp.layer[l];
		ly->kind = &linear;
		ly->param_off = pl->offset;
		ly->din = s.width[l];
		ly->dout = s.width[l + 1];
		ly->nparams = pl->numel;
		ly->ptensor = zs_calloc(pl->n, sizeof *ly->ptensor);
		for (size_t i = 0; i < pl->n; i++)
			ly->ptensor[ly->nptensors++] = sp.tensor[pl->first + i].numel;
		ly->relu = l + 1 < L;
		ly->in = l == 0 ? m->input : m->layer[l - 1].out;
		ly->out = add_tensor(m, "out", batch * ly->dout, ZS_CAT_ACTIVATIONS, ZS_AT_LAYER, l);
		ly->block = -1;
		ly->dy = delta[(L - 1 - l) & 1];
		ly->dx = l == 0 ? ZS_NO_TENSOR : delta[(L - l) & 1];
	}
	step_params_free(&sp);
}

void model_init(struct zs_net *m, const struct zs_config *c)
{
	if (c->tfm != NULL)
		model_tfm_init(m, c->tfm, c->batch, c->seed, c->precision);
	else
		model_mlp_init(m, c->widths, c->nwidths, c->batch);
}

void model_free(struct zs_net *m)
{
	free(m->tfm.perm);
	for (size_t l = 0; m->layer != NULL && l < m->nlayers; l++) {
		free(m->layer[l].ptensor);
		free(m->layer[l].module);
	}
	free(m->layer);
	free(m->tensor);
	m->tfm.perm = NULL;
	m->layer = NULL;
	m->tensor = NULL;
	m->nlayers = m->ntensors = m->tensor_cap = 0;
}

const struct zs_layer *model_reads(const struct zs_net *m, size_t l)
{
	return m->layer[l].tied ? &m->layer[0] : &m->layer[l];
}

size_t model_first_ptensor(const struct zs_net *m, size_t l)
{
	size_t t = 0;
	for (size_t i = 0; !m->layer[l].tied && i < l; i++)
		t += m->layer[i].nptensors;
	return t;
}

size_t model_max_ptensors(const struct zs_net *m)
{
	size_t n = 1;
	for (size_t l = 0; l < m->nlayers; l++)
		n = m->layer[l].nptensors > n ? m->layer[l].nptensors : n;
	return n;
}

size_t model_tensor_bytes(const struct zs_net *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		n += m->tensor[i].elements * m->tensor[i].esize;
	return n;
}
