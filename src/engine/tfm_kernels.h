/*
 * tfm_kernels — the layers of a decoder-only transformer, forward and
 * backward, in fp32, written as llm.c's train_gpt2.c writes them: outputs
 * first, sizes last, the shape of every array in a comment. BT = B·T rows
 * (batch × sequence), C channels, V vocabulary.
 *
 * Formulas: layer normalisation (Ba et al. 2016, eps inside the root as
 * torch.nn.LayerNorm); RMS normalisation (Zhang & Sennrich 2019, as
 * Hugging Face's LlamaRMSNorm); causal scaled dot-product attention
 * (Vaswani et al. 2017) with grouped-query attention (Ainslie et al. 2023:
 * query head h reads key-value head h / (H / KV)); rotary position
 * embeddings (Su et al. 2021, in the rotate-half layout of Hugging Face's
 * Llama: dimension i pairs with i + hd/2, frequency theta^(-2i/hd)); GELU
 * in GPT-2's tanh form (Hendrycks & Gimpel 2016); SwiGLU (Shazeer 2020:
 * silu(gate) · up); cross-entropy of the softmax, the mean over the BT
 * tokens. Qwen3's q/k norms are RMS normalisation over each head
 * (modeling_qwen3.py, Qwen3Attention).
 *
 * Matrix products go through the system's BLAS (OpenBLAS, one thread; see
 * the opening comment of tfm_kernels.c for why). Backward kernels ADD
 * into parameter gradients (the caller zeroes them once per step, so that
 * a tied embedding collects both of its uses) and WRITE input gradients,
 * except where noted.
 */
#ifndef ZS_TFM_KERNELS_H
#define ZS_TFM_KERNELS_H

#include <stddef.h>

/* The BLAS runs on one thread: no result depends on the thread count.
 * Called once per process before the first product (idempotent). */
void tfm_blas_init(void);

/* out (BT, C) = wte[tok] (+ wpe[t] if wpe != NULL, t = row mod T). */
void embed_forward(float *out, const int *tok, const float *wte, const float *wpe, size_t BT, size_t T, size_t C);
/* dwte (V, C) += dout at each row's token but token pad_row - 1 (none
 * when pad_row is 0); dwpe (maxT, C) += dout at its position (if dwpe !=
 * NULL). */
void embed_backward(float *dwte, float *dwpe, const float *dout, const int *tok, size_t BT, size_t T, size_t C,
                    size_t pad_row);

/* out (BT, C) = (x - mean) · rstd · w + b; mean, rstd (BT) saved. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                       float eps, size_t BT, size_t C);
/* dx (BT, C) += (accumulates: x is on the residual stream); dw, db (C) +=. */
void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                        const float *mean, const float *rstd, size_t BT, size_t C);

/* out (BT, C) = x · rstd · w, rstd = 1/sqrt(mean(x²) + eps) (BT) saved. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, float eps, size_t BT, size_t C);
/* dx (BT, C) += ; dw (C) +=. */
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                      size_t BT, size_t C);

/* Gemma's RMSNorm: out = x · rstd · (1 + w) (Gemma2RMSNorm); backward as
 * rmsnorm_backward's with 1 + w for w. */
void rmsnorm_rstd(float *rstd, const float *x, float eps, size_t BT, size_t C); /* rmsnorm's rstd alone */
void rmsnorm1p_forward(float *out, float *rstd, const float *x, const float *w, float eps, size_t BT, size_t C);
void rmsnorm1p_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                        size_t BT, size_t C);

/* The RMSNorm of each query and key head, in place on qkv
 * (BT, (H + 2·KV)·hd), as Qwen3's q_norm and k_norm: the H query heads
 * with w[0, hd), the KV key heads with w[hd, 2·hd); pre (BT, (H + KV)·hd)
 * gets the heads before, rstd (BT, H + KV) each head's 1/rms. Backward in
 * place on the same heads of dqkv (the values' untouched); dw (2·hd) +=.
 * one_plus: each scaled by (1 + w), Gemma3RMSNorm's (gemma3_text). */
void headnorm_forward(float *qkv, float *pre, float *rstd, const float *w, float eps, size_t BT, size_t H, size_t KV,
                      size_t hd, int one_plus);
void headnorm_backward(float *dqkv, float *dw, const float *pre, const float *w, const float *rstd, size_t BT,
                       size_t H, size_t KV, size_t hd, int one_plus);

/* out (BT, OC) = in (BT, C) · w (OC, C)ᵀ + bias (OC, or NULL). */
void matmul_forward(float *out, const float *in, const float *w, const float *bias, size_t BT, size_t C, size_t OC);
/* din (BT, C) = dout · w (written; skipped if NULL); dw (OC, C) += doutᵀ · in
 * (skipped if NULL);
 * dbias (OC) += Σ rows of dout (if not NULL). */
void matmul_backward(float *din, float *dw, float *dbias, const float *dout, const float *in, const float *w,
                     size_t BT, size_t C, size_t OC);
/* din (BT, C) += dout · w: a frozen linear's input gradient added to what
 * its LoRA adapters' backward put there first (DeepSpeed's ZeRO-3 runs
 * each adapter's backward, a module of its own, before its base's:
 * tfm_net.c). */
void matmul_backward_din_add(float *din, const float *dout, const float *w, size_t BT, size_t C, size_t OC);

/* LoRA's branch (--lora-r; PEFT v0.20.0's lora.Linear.forward, layer.py
 * lines 1030-1069: result + lora_B(lora_A(x)) * scaling, util/lora.h)
 * over the rows [row0, row0 + out) of a base layer's output y (BT, OC),
 * after the base's own product: xa (BT, r) = x (BT, in) · Aᵀ, A (r, in),
 * written and kept for B's gradient; y's rows += scaling · xa · Bᵀ, B
 * (out, r). x is the adapter's input (the dropout's output, or the base
 * layer's input). f16 (mixed precision): xa is rounded to fp16 values as
 * it is written (lora_A's output is 16-bit), and y's rows after the sum
 * (the base's 16-bit output). */
void lora_forward(float *y, float *xa, const float *x, const float *A, const float *B, float scaling, size_t BT,
                  size_t in, size_t r, size_t out, size_t OC, size_t row0, int f16);
/* Its backward from dy (BT, OC), the base output's gradient: dt (BT, r)
 * = scaling · dy's rows · B (written: the backward's scratch, the
 * gradient of A's output as `g * scaling` then lora_B's MmBackward make
 * it); dB (out, r) += scaling · dy's rowsᵀ · xa; dA (r, in) += dtᵀ · x;
 * dx (BT, in) += dt · A, the gradient at x, the dropout's output
 * (skipped if NULL): without dropout x is the base layer's input and dx
 * may be what the base layer's backward wrote; with it the caller takes
 * dx through the dropout's backward before it joins the base's. dA and
 * dB accumulate as matmul_backward's dw; a frozen one (--freeze over the
 * adapters) is NULL and skipped, and so is what only it reads (x for dA,
 * xa for dB: may be NULL then). */
void lora_backward(float *dx, float *dA, float *dB, float *dt, const float *dy, const float *x, const float *xa,
                   const float *A, const float *B, float scaling, size_t BT, size_t in, size_t r, size_t out,
                   size_t OC, size_t row0);
/* The same in its modules' halves, as lora_forward and lora_backward run
 * them (the same operations in the same order): lora_A's forward (xa,
 * rounded with f16) and lora_B's (y's rows += scaling · xa · Bᵀ, rounded
 * with f16); backward lora_B's (dB, then dt) and lora_A's (dA, then dx).
 * DeepSpeed's ZeRO-3 gathers each module around its own forward and
 * backward (tfm_net.c's module-by-module block). */
void lora_forward_a(float *xa, const float *x, const float *A, size_t BT, size_t in, size_t r, int f16);
void lora_forward_b(float *y, const float *xa, const float *B, float scaling, size_t BT, size_t r, size_t out,
                    size_t OC, size_t row0, int f16);
void lora_backward_b(float *dB, float *dt, const float *dy, const float *xa, const float *B, float scaling, size_t BT,
                     size_t r, size_t out, size_t OC, size_t row0);
void lora_backward_a(float *dx, float *dA, const float *dt, const float *x, const float *A, size_t BT, size_t in,
                     size_t r);

/* Rotary embeddings in place on the query and key heads of qkv
 * (B, T, (H + 2·KV)·hd): the first (H + KV) heads of each row, at
 * position t. Backward is the inverse rotation, in place on dqkv. */
void rope_forward(float *qkv, float theta, float factor, size_t B, size_t T, size_t H, size_t KV, size_t hd);
void rope_backward(float *dqkv, float theta, float factor, size_t B, size_t T, size_t H, size_t KV, size_t hd);

/* Causal attention. qkv (B, T, (H + 2·KV)·hd): queries, keys, values.
 * out (B, T, H·hd); att (B, H, T, T) the softmax (zero above the
 * diagonal), saved for backward. */
void attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T, size_t H, size_t KV,
                       size_t hd);
/* dqkv (B, T, (H + 2·KV)·hd) written; scratch (T, T). */
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att,
                        size_t B, size_t T, size_t H, size_t KV, size_t hd);
/* The same with the scores scaled by `scale` and, when cap > 0,
 * soft-capped before the mask, s -> cap·tanh(s / cap) (Gemma 2's eager
 * attention): th (B, H, T, T) keeps tanh(s / cap), which the backward
 * reads (NULL when cap is 0). attention_forward is scale 1/√hd, cap 0. */
void attention_forward_capped(float *out, float *att, float *th, const float *qkv, size_t B, size_t T, size_t H,
                              size_t KV, size_t hd, float scale, float cap);
void attention_backward_capped(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att,
                               const float *th, size_t B, size_t T, size_t H, size_t KV, size_t hd, float scale);

/* GELU, tanh form, elementwise over n. Backward writes din (n). */
void gelu_forward(float *out, const float *in, size_t n);
void gelu_backward(float *din, const float *dout, const float *in, size_t n);

/* SwiGLU. gu (BT, 2·F): gate in columns [0, F), up in [F, 2F).
 * out (BT, F) = silu(gate) · up. Backward writes dgu (BT, 2F). */
void swiglu_forward(float *out, const float *gu, size_t BT, size_t F);
void swiglu_backward(float *dgu, const float *dout, const float *gu, size_t BT, size_t F);

/* GeGLU with GELU's tanh form (Gemma's gelu_pytorch_tanh): gu as
 * swiglu's, out = gelu(gate) · up. Backward writes dgu (BT, 2F). */
void geglu_forward(float *out, const float *gu, size_t BT, size_t F);
void geglu_backward(float *dgu, const float *dout, const float *gu, size_t BT, size_t F);

/* x (n) = cap·tanh(x / cap) in place: a soft cap (Gemma 2's logits). */
void softcap_forward(float *x, float cap, size_t n);

/* x (n) += y (n): a residual connection. */
void residual_add(float *x, const float *y, size_t n);

/* Softmax and cross-entropy of logits (BT, V) in place: on return the
 * buffer holds d loss / d logits for loss = mean over the BT rows of
 * -log softmax(row)[target]. Returns the loss. */
float crossentropy_forward_backward(float *logits, const int *target, size_t BT, size_t V);
/* The same for logits that are cap·tanh(z / cap) of the head's z: on
 * return the buffer holds d loss / d z (the cap's derivative 1 - (x/cap)²
 * applied to each element). */
float crossentropy_capped_forward_backward(float *logits, const int *target, size_t BT, size_t V, float cap);

/* dwte (V, C) += dout · scale at each row's token but token pad_row - 1
 * (Gemma's embedding, scaled by √d). */
void embed_backward_scaled(float *dwte, const float *dout, const int *tok, size_t BT, size_t C, size_t pad_row,
                           float scale);

#endif
