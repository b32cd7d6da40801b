/*
 * tfm_moe — Mixtral's block (transformers 4.x's MixtralDecoderLayer with
 * MixtralSparseMoeBlock, modeling_mixtral.py at 00d4b3d2: the block 78-142,
 * its forward 105-142; the expert MixtralBlockSparseTop2MLP 60-75) and
 * Qwen2-MoE's (Qwen2MoeDecoderLayer with Qwen2MoeSparseMoeBlock,
 * modeling_qwen2_moe.py at 00a3f938: the same routed experts, the top-k
 * renormalised only under norm_topk_prob, plus the shared expert times
 * sigmoid(shared_expert_gate x)) and Qwen3-MoE's (Qwen3MoeDecoderLayer with
 * Qwen3MoeSparseMoeBlock, modeling_qwen3_moe.py at 00d4b3d2: Qwen2-MoE's
 * routed experts without the shared one, after qwen3's attention with its
 * q/k norms) as a layer of zerosim's transformer, fp32: llama's attention half (tfm.h's
 * modules ln1, qkv, (the q/k norms,) proj, ln2), then instead of the MLP the router and
 * the experts of moe_kernels.h on ln2's output, res3 = res2 + their sum.
 *
 * The routed tensors are grouped by expert: expert e's rows of xe, gu,
 * act and ye are [start[e], start[e + 1]), n_e = counts[e] of them, Σ n_e
 * = BT·k (dropless); an expert gets at most BT (each token chooses k
 * distinct experts), which bounds the backward's per-expert scratch.
 *
 * The engine's step runs the same kernels with each expert's tensors
 * apart, sized by the routing (tfm_net.c's moe block); the whole model
 * of these is trained by tests/test_moe.c, which records the tokens each
 * expert got in each layer. Ownership: the views point into memory the
 * caller owns.
 */
#ifndef ZS_TFM_MOE_H
#define ZS_TFM_MOE_H

#include <stddef.h>

#include "engine/tfm.h"

/* A block's router and experts: gate (E, d), then expert e's w1 (F, d),
 * w2 (d, F), w3 (F, d) at w[3e], w[3e + 1], w[3e + 2] (the step
 * description's order, Hugging Face's). Of gradients, the same. */
struct tfm_moe_params {
	float *gate;
	float **w; /* 3E pointers, the caller's */
	/* qwen2_moe's shared expert, in Hugging Face's order: gate_proj,
	 * up_proj (S, d), down_proj (d, S), shared_expert_gate (1, d); NULL
	 * for mixtral */
	float *shared[4];
};

/* Where an expert's tensor j of the kernels (0 w1 gate, 1 w2 down, 2 w3
 * up) sits among its three in the step's order: mixtral's w1, w2, w3;
 * qwen2_moe's and qwen3_moe's gate_proj, up_proj, down_proj. */
size_t tfm_moe_slot(const struct tfm_dims *d, unsigned j);

/* The block's attention half, its first modules before the router: a
 * plain llama block's four (ln1, qkv with rope and the attention, proj
 * with the residual, ln2), qwen3_moe's five (the q/k norms after qkv,
 * Qwen3MoeAttention's q_norm and k_norm). */
size_t tfm_moe_attn_modules(const struct tfm_dims *d);

/* What the routed half saves for backward (BT rows, k = top_k). */
struct tfm_moe_acts {
	float *probs;    /* (BT, E) the router's softmax */
	int *idx;        /* (BT, k) each token's experts, largest first */
	float *w;        /* (BT, k) their renormalised weights */
	size_t *counts;  /* (E) the tokens each expert got this step */
	size_t *start;   /* (E + 1) */
	size_t *tok;     /* (BT·k) the assignments grouped by expert */
	size_t *slot;    /* (BT·k) */
	float *xe;       /* (BT·k, d) each assignment's token row */
	float *gu;       /* (BT·k, 2F) w1·x, w3·x: expert e's 2·n_e·F from 2·F·start[e] */
	float *act;      /* (BT·k, F) silu(w1·x)·w3·x */
	float *ye;       /* (BT·k, d) the expert's output, before its weight */
	/* qwen2_moe's shared expert (S wide): sgu (BT, 2S), sact (BT, S), sye
	 * (BT, d), sg (BT) its gate's sigmoid */
	float *sgu, *sact, *sye, *sg;
};

/* The backward's scratch: dw (BT, k), dlogits (BT, E), dxr (BT, d), and
 * one expert's at most BT rows: dye and dxe (BT, d), dact (BT, F), dgu
 * (BT, 2F). */
struct tfm_moe_scratch {
	float *dw, *dlogits, *dxr, *dye, *dxe, *dact, *dgu;
	float *dsye, *dsxe, *dsact, *dsgu; /* the shared expert's: (BT, d), (BT, d), (BT, S), (BT, 2S) */
};

/* out (BT, d) = the routed experts' weighted sum on x (BT, d), written;
 * a's counts are this call's. */
void tfm_moe_forward(float *out, struct tfm_moe_acts *a, const struct tfm_moe_params *p, const float *x,
                     const struct tfm_dims *d, size_t BT);
/* dx (BT, d) = d loss / d x from dout (BT, d), written; g's gate and
 * experts += their gradients. */
void tfm_moe_backward(float *dx, struct tfm_moe_params *g, struct tfm_moe_scratch *s, const struct tfm_moe_acts *a,
                      const struct tfm_moe_params *p, const float *dout, const float *x, const struct tfm_dims *d,
                      size_t BT);

/* The whole block: a->res3 = block(x), x (BT, d) its input; p holds the
 * attention half's tensors (ln1_w, qkv_w, proj_w, ln2_w: tfm_block_view
 * of the first four modules), mp the router's and the experts'. */
void tfm_moe_block_forward(struct tfm_block_acts *a, struct tfm_moe_acts *m, const struct tfm_block_params *p,
                           const struct tfm_moe_params *mp, const float *x, const struct tfm_dims *d, size_t B,
                           size_t T);
/* On entry sc->dres is d loss / d res3, on return d loss / d x; g and gm
 * += the block's gradients. */
void tfm_moe_block_backward(struct tfm_block_params *g, struct tfm_moe_params *gm, struct tfm_scratch *sc,
                            struct tfm_moe_scratch *ms, const struct tfm_block_acts *a, const struct tfm_moe_acts *m,
                            const struct tfm_block_params *p, const struct tfm_moe_params *mp, const float *x,
                            const struct tfm_dims *d, size_t B, size_t T);

#endif
