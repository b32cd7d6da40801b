/*
 * tfm_driver — see tfm_driver.h. Moved out of src/engine/tfm.c: zerosim
 * never ran it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/tfm_kernels.h"
#include "tfm_driver.h"
#include "util/util.h"

/* Does block l keep its own tensor a, or share one buffer with every
 * block (the one block's worth that recompute reuses)? */
static int kept_per_block(enum zs_recompute rc, enum step_act a)
{
	switch (rc) {
	case ZS_RECOMPUTE_NONE:
		return 1;
	case ZS_RECOMPUTE_SELECTIVE:
		return a != STEP_ACT_ATT && a != STEP_ACT_ATT_TANH;
	case ZS_RECOMPUTE_FULL:
		return a == STEP_ACT_RES3;
	}
	return 1;
}

size_t tfm_driver_sizes(const struct tfm_dims *d, size_t B, size_t T, size_t act[STEP_NACTS],
                       size_t sc[STEP_NSCRATCH])
{
	struct zs_model shape;
	struct step_params p;
	struct step_buffers b;
	size_t total = 0;
	tfm_dims_shape(&shape, d);
	step_params_build(&p, &shape);
	step_buffers_build(&b, &shape, &p, B, T, 0, ZS_RECOMPUTE_NONE);
	memset(act, 0, STEP_NACTS * sizeof *act);
	memset(sc, 0, STEP_NSCRATCH * sizeof *sc);
	for (size_t k = 0; k < b.n; k++) {
		const struct step_buffer *x = &b.buf[k];
		if (x->role == STEP_SAVED && x->block <= 0)
			act[x->index] = x->elements;
		else if (x->role == STEP_SCRATCH)
			total += sc[x->index] = x->elements;
	}
	free(b.buf);
	step_params_free(&p);
	return total;
}

void tfm_driver_init(struct tfm_driver *m, const struct tfm_dims *d, size_t B, size_t T, enum zs_recompute rc)
{
	memset(m, 0, sizeof *m);
	m->dims = *d;
	m->B = B;
	m->T = T;
	m->recompute = rc;
	tfm_params(&m->layout, d);
	m->nparams = m->layout.numel;
	m->params = zs_malloc(m->nparams * sizeof *m->params);
	m->grads = zs_malloc(m->nparams * sizeof *m->grads);
	m->blocks = zs_calloc(d->layers, sizeof *m->blocks);
	size_t el[STEP_NACTS], sc[STEP_NSCRATCH], nscratch = tfm_driver_sizes(d, B, T, el, sc), total = 0;
	for (int a = 0; a < STEP_NACTS; a++) {
		size_t n = el[a];
		total += a < STEP_NBLOCK_ACTS && kept_per_block(rc, (enum step_act)a) ? n * d->layers : n;
	}
	m->act_elems = total;
	m->acts_memory = zs_malloc((total + nscratch) * sizeof *m->acts_memory);
	float *p = m->acts_memory;
#define TAKE(slot, n) do { size_t n_ = (n); *(slot) = n_ ? p : NULL; p += n_; } while (0)
	for (int a = 0; a < STEP_NBLOCK_ACTS; a++) {
		size_t n = el[a];
		for (size_t l = 0; l < d->layers; l++)
			if (l == 0 || kept_per_block(rc, (enum step_act)a))
				TAKE(tfm_block_act_slot(&m->blocks[l], (enum step_act)a), n);
			else /* shared with block 0 */
				*tfm_block_act_slot(&m->blocks[l], (enum step_act)a) =
					*tfm_block_act_slot(&m->blocks[0], (enum step_act)a);
	}
	TAKE(&m->x0, el[STEP_ACT_X0]);
	for (int a = STEP_ACT_LNF; a <= STEP_ACT_LOGITS; a++)
		TAKE(tfm_head_act_slot(&m->head, (enum step_act)a), el[a]);
	float **s[6] = {&m->scratch.dres, &m->scratch.dx, &m->scratch.dqkv, &m->scratch.dh, &m->scratch.dup,
	                &m->scratch.datt};
	for (int i = 0; i < 6; i++)
		TAKE(s[i], sc[i]);
#undef TAKE
	tfm_blas_init();
}

void tfm_driver_free(struct tfm_driver *m)
{
	free(m->params);
	free(m->grads);
	free(m->blocks);
	free(m->acts_memory);
	step_params_free(&m->layout);
	memset(m, 0, sizeof *m);
}

/* Layer l's views (0 the embedding, 1..L the blocks, L+1 the head) into
 * the flat vector flat. */
static float **slots(float *s[TFM_SLOTS], const struct tfm_driver *m, size_t l, float *flat)
{
	tfm_layer_slots(s, &m->layout, l, flat);
	return s;
}

static float model_forward(struct tfm_driver *m, const int *in, const int *target)
{
	const struct tfm_dims *d = &m->dims;
	struct tfm_embed_params ep;
	struct tfm_final_params fp;
	float *s[TFM_SLOTS];
	tfm_embed_view(&ep, slots(s, m, 0, m->params));
	tfm_embed_forward(m->x0, &ep, in, d, m->B, m->T);
	const float *x = m->x0;
	for (size_t l = 0; l < d->layers; l++) {
		struct tfm_block_params bp;
		tfm_block_view(&bp, slots(s, m, l + 1, m->params), d, l);
		tfm_block_forward(&m->blocks[l], &bp, x, d, m->B, m->T);
		x = m->blocks[l].res3;
	}
	tfm_final_view(&fp, slots(s, m, d->layers + 1, m->params));
	return tfm_head_forward(&m->head, &fp, x, target, d, m->B, m->T);
}

float tfm_driver_loss(struct tfm_driver *m, const int *in, const int *target) { return model_forward(m, in, target); }

float tfm_driver_step(struct tfm_driver *m, const int *in, const int *target)
{
	const struct tfm_dims *d = &m->dims;
	float loss = model_forward(m, in, target);
	memset(m->grads, 0, m->nparams * sizeof *m->grads);
	struct tfm_final_params fp, fg;
	float *s[TFM_SLOTS];
	tfm_final_view(&fp, slots(s, m, d->layers + 1, m->params));
	tfm_final_view(&fg, slots(s, m, d->layers + 1, m->grads));
	size_t L = d->layers;
	tfm_head_backward(&fg, &m->scratch, &m->head, &fp, m->blocks[L - 1].res3, d, m->B, m->T);
	for (size_t l = L; l-- > 0;) {
		struct tfm_block_params bp, bg;
		tfm_block_view(&bp, slots(s, m, l + 1, m->params), d, l);
		tfm_block_view(&bg, slots(s, m, l + 1, m->grads), d, l);
		struct tfm_block_acts *a = &m->blocks[l];
		const float *x = l == 0 ? m->x0 : m->blocks[l - 1].res3;
		/* Recompute what the forward did not keep: the same kernels on the
		 * same inputs, so the same bits (res3, rewritten, is unchanged). */
		if (m->recompute == ZS_RECOMPUTE_FULL)
			tfm_block_forward(a, &bp, x, d, m->B, m->T);
		else if (m->recompute == ZS_RECOMPUTE_SELECTIVE)
			tfm_attention_recompute(a, d, m->B, m->T);
		tfm_block_backward(&bg, &m->scratch, a, &bp, x, d, m->B, m->T);
	}
	struct tfm_embed_params eg;
	tfm_embed_view(&eg, slots(s, m, 0, m->grads));
	tfm_embed_backward(&eg, m->scratch.dres, in, d, m->B, m->T);
	return loss;
}
