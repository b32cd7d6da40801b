/*
 * moe_kernels — a mixture of experts' layer, forward and backward, in
 * fp32: Mixtral's MixtralSparseMoeBlock as transformers 4.x computes it
 * (modeling_mixtral.py at 00d4b3d2, MixtralSparseMoeBlock 78-142, its
 * forward 105-142): the router's logits
 * x · gateᵀ, their softmax in fp32, each token's k largest probabilities
 * (torch.topk) renormalised to sum 1, each expert a SwiGLU MLP
 * (MixtralBlockSparseTop2MLP, 60-75: w2(silu(w1 x) · w3 x)) run on exactly
 * the tokens routed to it (dropless), and each token's output the sum of
 * its experts' outputs weighted by its routing weights (index_add_). The
 * gradient reaches the router through the routing weights, not the
 * choice. BT rows, d the width, E experts, k per token, F the experts'
 * inner width. Outputs first, sizes last, as tfm_kernels.h.
 *
 * Qwen2-MoE's block (Qwen2MoeSparseMoeBlock.forward, modeling_qwen2_moe.py
 * at 00a3f938, a 4.x-layout file) is the same router, top-k and experts
 * (Qwen2MoeMLP: down_proj(silu(gate_proj x) · up_proj x), gate_proj and
 * up_proj the w1 and w3 here, down_proj w2), the top-k probabilities
 * renormalised only where norm_topk_prob says (renorm), plus a shared
 * expert, the same SwiGLU MLP on every token, its output times
 * sigmoid(x · shared_expert_gateᵀ) added to the routed sum
 * (moe_shared_forward).
 *
 * The block's layer (engine/tfm_moe.h) and the engine's step (tfm_net.c's
 * moe block; docs/design.md, "Mixtures of experts") run them. Checked by
 * finite differences (tests/test_moe.c). Backward kernels ADD into
 * parameter gradients and into dx (several experts add to one token's
 * row).
 */
#ifndef ZS_MOE_KERNELS_H
#define ZS_MOE_KERNELS_H

#include <stddef.h>

/* probs (BT, E) = softmax over each row of x (BT, d) · gate (E, d)ᵀ. */
void moe_router_forward(float *probs, const float *x, const float *gate, size_t BT, size_t d, size_t E);

/* idx (BT, k), w (BT, k): each row's k largest probabilities, largest
 * first (of equal ones the lower expert), renormalised to sum 1 if renorm
 * (else as they are); counts (E) += the tokens each expert receives. */
void moe_topk(int *idx, float *w, size_t *counts, const float *probs, size_t BT, size_t E, size_t k, int renorm);

/* The assignments grouped by expert: expert e's are
 * [start[e], start[e + 1]) of tok (their tokens, in token order) and
 * slot (which of the token's k choices it is); start (E + 1), tok and
 * slot (BT·k). */
void moe_dispatch(size_t *start, size_t *tok, size_t *slot, const int *idx, size_t BT, size_t E, size_t k);

/* One expert on its n assignments (tok, slot), its tensors as Hugging
 * Face registers them (w1 and w3 (F, d), w2 (d, F), apart): xe (n, d) its
 * tokens' rows of x, gu (n, 2F) = xe · w1ᵀ (its first n·F), then xe · w3ᵀ
 * (the next n·F), act (n, F) = silu(w1 x) · w3 x, ye (n, d) = act · w2ᵀ
 * (the backward reads all four); out (BT, d) += w[tok, slot] · ye at each
 * token. */
void moe_expert_forward(float *out, float *xe, float *gu, float *act, float *ye, const float *x, const float *w1,
                        const float *w2, const float *w3, const float *w, const size_t *tok, const size_t *slot,
                        size_t n, size_t k, size_t d, size_t F);
/* Its backward from dout (BT, d): dw1, dw3 (F, d), dw2 (d, F) +=; dx
 * (BT, d) += at its tokens; dw (BT, k) written at its assignments, d loss
 * / d the routing weight (dout · ye). Scratch: dye and dxe (n, d), dact
 * (n, F), dgu (n, 2F, laid out as gu). */
void moe_expert_backward(float *dx, float *dw1, float *dw2, float *dw3, float *dw, float *dye, float *dact,
                         float *dgu, float *dxe, const float *dout, const float *xe, const float *gu, const float *act,
                         const float *ye, const float *w1, const float *w2, const float *w3, const float *w,
                         const size_t *tok, const size_t *slot, size_t n, size_t k, size_t d, size_t F);

/* The router's backward from dw (BT, k): through the renormalisation
 * if renorm (w_j = p_j / Σ p of the chosen; else w_j = p_j) and the
 * softmax; dgate (E, d) +=, dx (BT, d) +=. Scratch: dlogits (BT, E), dxr
 * (BT, d). */
void moe_router_backward(float *dx, float *dgate, float *dlogits, float *dxr, const float *dw, const int *idx,
                         const float *w, const float *probs, const float *x, const float *gate, size_t BT, size_t d,
                         size_t E, size_t k, int renorm);

/* The shared expert on every row of x (BT, d): gu (BT, 2S) = x · w1ᵀ,
 * then x · w3ᵀ (w1, w3 (S, d): gate_proj, up_proj), act (BT, S), ye
 * (BT, d) = act · w2ᵀ (w2 (d, S): down_proj), sg (BT) = sigmoid(x ·
 * gateᵀ) (gate (1, d): shared_expert_gate); out (BT, d) += sg · ye. */
void moe_shared_forward(float *out, float *gu, float *act, float *ye, float *sg, const float *x, const float *w1,
                        const float *w2, const float *w3, const float *gate, size_t BT, size_t d, size_t S);
/* Its backward from dout (BT, d): dw1, dw2, dw3, dgate +=; dx (BT, d) +=.
 * Scratch: dye and dxe (BT, d), dact (BT, S), dgu (BT, 2S), dsl (BT), dxr
 * (BT, d). */
void moe_shared_backward(float *dx, float *dw1, float *dw2, float *dw3, float *dgate, float *dye, float *dact,
                         float *dgu, float *dxe, float *dsl, float *dxr, const float *dout, const float *x,
                         const float *gu, const float *act, const float *ye, const float *sg, const float *w1,
                         const float *w2, const float *w3, const float *gate, size_t BT, size_t d, size_t S);

#endif
