/*
 * moe_model — a whole mixtral, qwen2_moe or qwen3_moe for the tests (moe_model.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tfm_kernels.h"
#include "util/util.h"
#include "moe_model.h"

static float *fz(size_t n) { return zs_calloc(n, sizeof(float)); }

/* Block l's router and experts in the flat vector v: its tensors after
 * the attention half's (input_layernorm, the fused q/k/v and, qwen2_moe,
 * their bias, qwen3_moe's q/k norms, o_proj, post_attention_layernorm), checked by their Hugging
 * Face names; then qwen2_moe's shared expert's four. */
static int moe_view(struct tfm_moe_params *mp, float **ptrs, const struct step_params *p, size_t l,
                    const struct tfm_dims *d, float *v, char **cause)
{
	static const char *const tails[2][3] = {{"w1", "w2", "w3"}, {"gate_proj", "up_proj", "down_proj"}};
	static const char *const shared[4] = {"shared_expert.gate_proj", "shared_expert.up_proj",
	                                      "shared_expert.down_proj", "shared_expert_gate"};
	const char *mlp = d->qwen_moe ? "mlp" : "block_sparse_moe";
	char name[128], want[128];
	size_t E = d->experts, i = p->layer[l + 1].first + 4 + (d->qkv_bias ? 1 : 0) + (d->qk_norm ? 1 : 0), off = p->layer[l + 1].offset;
	for (size_t k = p->layer[l + 1].first; k < i; k++)
		off += p->tensor[k].numel;
	snprintf(want, sizeof want, "model.layers.%zu.%s.gate.weight", l, mlp);
	if (strcmp(step_tensor_name(p, i, name, sizeof name), want) != 0)
		return zs_fail(cause, "tensor %zu is %s, not %s", i, name, want);
	mp->gate = v + off;
	off += p->tensor[i++].numel;
	mp->w = ptrs;
	for (size_t e = 0; e < E; e++)
		for (size_t j = 0; j < 3; j++, off += p->tensor[i++].numel) {
			snprintf(want, sizeof want, "model.layers.%zu.%s.experts.%zu.%s.weight", l, mlp, e,
			         tails[d->qwen_moe != 0][j]);
			if (strcmp(step_tensor_name(p, i, name, sizeof name), want) != 0)
				return zs_fail(cause, "tensor %zu is %s, not %s", i, name, want);
			ptrs[3 * e + j] = v + off;
		}
	for (size_t j = 0; d->shared_ffn > 0 && j < 4; j++, off += p->tensor[i++].numel) {
		snprintf(want, sizeof want, "model.layers.%zu.mlp.%s.weight", l, shared[j]);
		if (strcmp(step_tensor_name(p, i, name, sizeof name), want) != 0)
			return zs_fail(cause, "tensor %zu is %s, not %s", i, name, want);
		mp->shared[j] = v + off;
	}
	if (i != p->layer[l + 1].first + p->layer[l + 1].n)
		return zs_fail(cause, "block %zu has tensors past its experts", l);
	return 0;
}

int moe_model_init(struct moe_model *t, const struct tfm_dims *d, size_t B, size_t T, unsigned long long seed,
                   char **cause)
{
	float *slot[TFM_SLOTS];
	memset(t, 0, sizeof *t);
	if (d->experts == 0 || d->tied)
		return zs_fail(cause, "not an untied mixture of experts");
	t->d = *d, t->B = B, t->T = T, t->L = d->layers;
	tfm_params(&t->p, d);
	size_t N = t->p.numel, R = B * T, C = d->d, F = d->ffn, E = d->experts, K = d->top_k, V = d->vocab, L = t->L;
	size_t S = d->shared_ffn;
	size_t Q = tfm_qkv_rows(d), H = d->heads, hd = d->head_dim;
	t->w = fz(N), t->g = fz(N), t->mom = fz(N), t->var = fz(N), t->x0 = fz(R * C);
	t->bw = zs_calloc(L, sizeof *t->bw), t->bg = zs_calloc(L, sizeof *t->bg);
	t->mw = zs_calloc(L, sizeof *t->mw), t->mg = zs_calloc(L, sizeof *t->mg);
	t->mwp = zs_calloc(L * 3 * E, sizeof *t->mwp), t->mgp = zs_calloc(L * 3 * E, sizeof *t->mgp);
	t->ba = zs_calloc(L, sizeof *t->ba), t->ma = zs_calloc(L, sizeof *t->ma);
	tfm_init_weights(t->w, d, seed);
	for (int gr = 0; gr < 2; gr++) {
		float *v = gr ? t->g : t->w;
		tfm_layer_slots(slot, &t->p, 0, v);
		tfm_embed_view(gr ? &t->eg : &t->ew, slot);
		tfm_layer_slots(slot, &t->p, L + 1, v);
		tfm_final_view(gr ? &t->fg : &t->fw, slot);
		for (size_t l = 0; l < L; l++) {
			struct tfm_block_params *b = gr ? &t->bg[l] : &t->bw[l];
			tfm_layer_slots(slot, &t->p, l + 1, v);
			tfm_block_view(b, slot, d, l);
			b->fc_w = b->fcproj_w = NULL; /* no MLP: the router and experts are mw's */
			if (moe_view(gr ? &t->mg[l] : &t->mw[l], (gr ? t->mgp : t->mwp) + l * 3 * E, &t->p, l, d, v, cause) < 0)
				return -1;
		}
	}
	for (size_t l = 0; l < L; l++) {
		struct tfm_block_acts *a = &t->ba[l];
		a->ln1 = fz(R * C), a->ln1_rstd = fz(R), a->qkv = fz(R * Q), a->att = fz(B * H * T * T);
		a->atty = fz(R * H * hd), a->res2 = fz(R * C), a->ln2 = fz(R * C), a->ln2_rstd = fz(R);
		a->res3 = fz(R * C);
		if (d->qk_norm) /* qwen3_moe's head norms: their input and each head's 1/rms */
			a->qk_pre = fz(R * (H + d->kv_heads) * hd), a->qk_rstd = fz(R * (H + d->kv_heads));
		struct tfm_moe_acts *m = &t->ma[l];
		m->probs = fz(R * E), m->idx = zs_calloc(R * K, sizeof *m->idx), m->w = fz(R * K);
		m->counts = zs_calloc(E, sizeof(size_t)), m->start = zs_calloc(E + 1, sizeof(size_t));
		m->tok = zs_calloc(R * K, sizeof(size_t)), m->slot = zs_calloc(R * K, sizeof(size_t));
		m->xe = fz(R * K * C), m->gu = fz(R * K * 2 * F), m->act = fz(R * K * F), m->ye = fz(R * K * C);
		m->sgu = fz(R * 2 * S + 1), m->sact = fz(R * S + 1), m->sye = fz(R * C), m->sg = fz(R);
	}
	t->ha.lnf = fz(R * C), t->ha.lnf_rstd = fz(R), t->ha.logits = fz(R * V);
	t->sc.dres = fz(R * C), t->sc.dx = fz(R * (C > H * hd ? C : H * hd)), t->sc.dqkv = fz(R * Q);
	t->sc.datt = fz(T * T);
	t->ms.dw = fz(R * K), t->ms.dlogits = fz(R * E), t->ms.dxr = fz(R * C), t->ms.dye = fz(R * C);
	t->ms.dxe = fz(R * C), t->ms.dact = fz(R * F), t->ms.dgu = fz(R * 2 * F);
	t->ms.dsye = fz(R * C), t->ms.dsxe = fz(R * C), t->ms.dsact = fz(R * S + 1), t->ms.dsgu = fz(R * 2 * S + 1);
	return 0;
}

float moe_model_step(struct moe_model *t, const struct optim *o, unsigned step, const int *in, const int *tgt)
{
	size_t B = t->B, T = t->T, L = t->L;
	tfm_embed_forward(t->x0, &t->ew, in, &t->d, B, T);
	for (size_t l = 0; l < L; l++)
		tfm_moe_block_forward(&t->ba[l], &t->ma[l], &t->bw[l], &t->mw[l], l ? t->ba[l - 1].res3 : t->x0, &t->d, B,
		                      T);
	float loss = tfm_head_forward(&t->ha, &t->fw, t->ba[L - 1].res3, tgt, &t->d, B, T);
	memset(t->g, 0, t->p.numel * sizeof *t->g);
	tfm_head_backward(&t->fg, &t->sc, &t->ha, &t->fw, t->ba[L - 1].res3, &t->d, B, T);
	for (size_t l = L; l-- > 0;)
		tfm_moe_block_backward(&t->bg[l], &t->mg[l], &t->sc, &t->ms, &t->ba[l], &t->ma[l], &t->bw[l], &t->mw[l],
		                       l ? t->ba[l - 1].res3 : t->x0, &t->d, B, T);
	tfm_embed_backward(&t->eg, t->sc.dres, in, &t->d, B, T);
	optim_update(o, step, t->w, t->mom, t->var, t->g, ZS_F32, NULL, t->p.numel);
	return loss;
}

void moe_model_free(struct moe_model *t)
{
	for (size_t l = 0; t->ba != NULL && l < t->L; l++) {
		struct tfm_block_acts *a = &t->ba[l];
		struct tfm_moe_acts *m = &t->ma[l];
		void *b[] = {a->ln1, a->ln1_rstd, a->qkv, a->qk_pre, a->qk_rstd, a->att, a->atty, a->res2, a->ln2, a->ln2_rstd, a->res3,
		             m->probs, m->idx, m->w, m->counts, m->start, m->tok, m->slot, m->xe, m->gu, m->act, m->ye,
		             m->sgu, m->sact, m->sye, m->sg};
		for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
			free(b[i]);
	}
	void *b[] = {t->w, t->g, t->mom, t->var, t->x0, t->bw, t->bg, t->mw, t->mg, t->mwp, t->mgp, t->ba, t->ma,
	             t->ha.lnf, t->ha.lnf_rstd, t->ha.logits, t->sc.dres, t->sc.dx, t->sc.dqkv, t->sc.datt, t->ms.dw,
	             t->ms.dlogits, t->ms.dxr, t->ms.dye, t->ms.dxe, t->ms.dact, t->ms.dgu, t->ms.dsye, t->ms.dsxe,
	             t->ms.dsact, t->ms.dsgu};
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		free(b[i]);
	step_params_free(&t->p);
	memset(t, 0, sizeof *t);
}
