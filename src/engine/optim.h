/*
 * optim — the optimizers, elementwise over one rank's owned slice.
 *
 * Adam (Kingma & Ba 2015, Algorithm 1, with bias correction): lr 1e-3,
 * betas 0.9 / 0.999, eps 1e-8. The update is written as PyTorch's
 * torch.optim.Adam writes it: w -= (lr/bc1) · m / (sqrt(v)/sqrt(bc2) + eps),
 * with lr/bc1 and sqrt(bc2) worked in double and rounded once per step
 * (two divisions per element, not three). SGD with momentum (PyTorch's form:
 * buf = μ·buf + g; w -= lr·buf) with μ = 0.9. All arithmetic is fp32, so
 * the same inputs give the same bits in every scheme.
 */
#ifndef ZS_OPTIM_H
#define ZS_OPTIM_H

#include <stddef.h>

#include "engine/fp16.h"
#include "util/config.h"

struct optim {
	enum zs_optimizer kind;
	float lr, beta1, beta2, eps, momentum;
};

void optim_init(struct optim *o, enum zs_optimizer kind, double lr);

/* Step t (1-based) on n elements. w: the fp32 weights (master in mixed
 * precision, the params themselves in fp32); m: Adam's first moment or SGD's
 * momentum; v: Adam's second moment (NULL for SGD); grad: n gradients of
 * type gdt; out16: if not NULL, receives w rounded to fp16. The state starts
 * at zero: at t = 1, m and v are written without being read (what zeros
 * would give, bit for bit), so the caller need not clear them. */
void optim_update(const struct optim *o, unsigned t, float *w, float *m, float *v, const void *grad,
                  enum zs_dtype gdt, zs_half *out16, size_t n);

#endif
