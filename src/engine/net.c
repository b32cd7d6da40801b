/*
 * net — the MLP as a list of linear layers (net.h); the kernels are
 * mlp.h's. The transformer's list is tfm_net.c's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/mlp.h"
#include "engine/net.h"
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

static const struct zs_layer_kind linear = {"linear", linear_forward, linear_backward, NULL, NULL, NULL, NULL, NULL};

static float mlp_loss(const struct zs_net *m, float *const *t)
{
	const struct zs_layer *last = &m->layer[m->nlayers - 1];
	return mse_forward_backward(t[last->dy], t[last->out], t[m->target], m->batch, last->dout);
}

unsigned net_add_tensor(struct zs_net *m, struct zs_tensor t)
{
	if (m->ntensors == m->tensor_cap) {
		m->tensor_cap = m->tensor_cap ? 2 * m->tensor_cap : 16;
		m->tensor = zs_realloc(m->tensor, m->tensor_cap * sizeof *m->tensor);
	}
	m->tensor[m->ntensors] = t;
	return (unsigned)m->ntensors++;
}

size_t net_tensor_rows(const struct zs_net *m, float *const *t, unsigned i)
{
	const struct zs_tensor *ts = &m->tensor[i];
	if (ts->row == 0)
		return 0;
	if (ts->expert >= 0) {
		const size_t *counts = (const void *)t[ts->counts];
		return counts[ts->expert];
	}
	size_t most = 0;
	for (size_t l = 0; l < m->nlayers; l++) {
		const struct zs_layer *ly = &m->layer[l];
		if (ly->moe == NULL)
			continue;
		const size_t *counts = (const void *)t[ly->moe[STEP_MOE_COUNTS]];
		for (size_t e = 0, E = (ly->nmoe - STEP_MOE_EXPERT) / 4; e < E; e++)
			most = counts[e] > most ? counts[e] : most;
	}
	return most;
}

unsigned net_add_buffer(struct zs_net *m, const struct step_buffer *b)
{
	static const enum zs_when when[] = {[STEP_AT_FORWARD] = ZS_AT_FORWARD, [STEP_AT_LAYER] = ZS_AT_LAYER,
	                                    [STEP_AT_BACKWARD] = ZS_AT_BACKWARD};
	return net_add_tensor(m, (struct zs_tensor){.name = b->name, .block = b->block, .elements = b->elements,
	                                              .esize = b->esize, .cat = b->cat, .alloc = when[b->when],
	                                              .layer = b->layer, .recomputed = b->recomputed,
	                                              .freed_after = b->freed_after, .freed_fwd = b->freed_fwd});
}

void net_mlp_init(struct zs_net *m, const size_t *widths, size_t nwidths, size_t batch)
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
	size_t L = s.nlayers;

	/* The batch, the backward's two deltas and each layer's output, as
	 * the step description lists them (its sizes and lifetimes). */
	struct step_buffers sb;
	unsigned delta[2] = {ZS_NO_TENSOR, ZS_NO_TENSOR};
	step_buffers_mlp(&sb, s.width, L + 1, batch);
	for (size_t k = 0; k < sb.n; k++) {
		const struct step_buffer *x = &sb.buf[k];
		unsigned i = net_add_buffer(m, x);
		switch (x->role) {
		case STEP_TOKENS: m->input = i; break;
		case STEP_TARGETS: m->target = i; break;
		case STEP_SCRATCH: delta[x->index] = i; break;
		case STEP_SAVED: m->layer[x->layer].out = i; break;
		default: break; /* the transformer's alone */
		}
	}
	free(sb.buf);

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
		ly->matmul_module = pl->matmul_module;
		ly->ptensor = zs_calloc(pl->n, sizeof *ly->ptensor);
		for (size_t i = 0; i < pl->n; i++)
			ly->ptensor[ly->nptensors++] = sp.tensor[pl->first + i].numel;
		ly->relu = l + 1 < L;
		ly->in = l == 0 ? m->input : m->layer[l - 1].out;
		ly->block = -1;
		ly->dy = delta[(L - 1 - l) & 1];
		ly->dx = l == 0 ? ZS_NO_TENSOR : delta[(L - l) & 1];
	}
	step_params_free(&sp);
}

void net_init(struct zs_net *m, const struct zs_config *c)
{
	if (c->tfm != NULL)
		net_tfm_init(m, c);
	else
		net_mlp_init(m, c->widths, c->nwidths, c->batch);
}

void net_free(struct zs_net *m)
{
	free(m->tfm.perm);
	free(m->tfm.q4);
	m->tfm.q4 = NULL;
	for (size_t l = 0; m->layer != NULL && l < m->nlayers; l++) {
		free(m->layer[l].ptensor);
		free(m->layer[l].module);
		free(m->layer[l].moe);
	}
	free(m->layer);
	free(m->tensor);
	m->tfm.perm = NULL;
	m->layer = NULL;
	m->tensor = NULL;
	m->nlayers = m->ntensors = m->tensor_cap = 0;
}

const struct zs_layer *net_reads(const struct zs_net *m, size_t l)
{
	return m->layer[l].tied ? &m->layer[0] : &m->layer[l];
}

size_t net_first_ptensor(const struct zs_net *m, size_t l)
{
	size_t t = 0;
	for (size_t i = 0; !m->layer[l].tied && i < l; i++)
		t += m->layer[i].nptensors;
	return t;
}

size_t net_hooked(const struct zs_layer *l) { return l->leaf < l->nmodules ? l->leaf + 1 : l->nmodules; }

size_t net_max_ptensors(const struct zs_net *m)
{
	size_t n = 1;
	for (size_t l = 0; l < m->nlayers; l++)
		n = m->layer[l].nptensors > n ? m->layer[l].nptensors : n;
	return n;
}

size_t net_tensor_bytes(const struct zs_net *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		n += m->tensor[i].elements * m->tensor[i].esize;
	return n;
}
