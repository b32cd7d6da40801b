/*
 * mlp — the model: a multilayer perceptron given by its widths d0..dL,
 * ReLU between layers, none after the last, mean squared error loss.
 *
 * Parameters live in one flat vector; every per-parameter buffer (params,
 * grads, master, Adam m and v) uses the same layout, so a shard is an
 * (offset, count) into it (llm.c's ParameterTensors). Layer l contributes its
 * weight (d_{l+1}, d_l) row-major, then its bias (d_{l+1}).
 *
 * Kernels take outputs first and sizes last. They exist for fp16 working
 * params (mixed precision: read as fp16, computed in fp32, grads rounded
 * once to fp16) and for fp32. Activations are fp32 in both.
 */
#ifndef ZS_MLP_H
#define ZS_MLP_H

#include <stddef.h>

#include "engine/fp16.h"

/* The widths and Ψ; where each tensor lives is the step description's
 * (util/step.h, step_params_mlp). No limit on L but memory. */
struct mlp_shape {
	size_t nlayers;       /* L */
	const size_t *width;  /* d0..dL: the caller's widths, which outlive the shape */
	size_t nparams;       /* Ψ, the step description's */
};

void mlp_shape_init(struct mlp_shape *s, const size_t *widths, size_t nwidths);

/* out (B, dout) = in (B, din) · W^T + bias, then ReLU if relu. */
void linear_forward_f16(float *out, const float *in, const zs_half *w, const zs_half *bias, int relu,
                        size_t B, size_t din, size_t dout);
void linear_forward_f32(float *out, const float *in, const float *w, const float *bias, int relu,
                        size_t B, size_t din, size_t dout);

/* dw (dout, din) = dy^T · in; dbias (dout) = Σ_b dy; and, if dx is not
 * NULL, dx (B, din) = dy · W masked by (in > 0) — in is the previous layer's
 * post-ReLU output, so the mask is ReLU's derivative. */
void linear_backward_f16(zs_half *dw, zs_half *dbias, float *dx, const float *dy, const float *in,
                         const zs_half *w, size_t B, size_t din, size_t dout);
void linear_backward_f32(float *dw, float *dbias, float *dx, const float *dy, const float *in,
                         const float *w, size_t B, size_t din, size_t dout);

/* Mean squared error over B·d outputs; writes dy = d loss / d out. */
float mse_forward_backward(float *dy, const float *out, const float *y, size_t B, size_t d);

#endif
