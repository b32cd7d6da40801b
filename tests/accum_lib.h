/*
 * accum_lib — what the gradient-accumulation tests share (tests/
 * test_ds_accum.c, test_paper_accum.c): the default MLP 64,256,64 under a
 * framework with K micro-steps of batch B (run it with engine_ok, its
 * final weights kept), and the largest difference of two weight vectors.
 * Header-only: each test includes it once.
 */
#ifndef ZS_TESTS_ACCUM_LIB_H
#define ZS_TESTS_ACCUM_LIB_H

#include <check.h>
#include <math.h>
#include <stddef.h>

#include "engine/engine.h"
#include "util/config.h"
#include "engine_ok.h"

#define PSI 33088 /* the default MLP 64,256,64 */

/* The defaults, 3 steps, under fw with K micro-steps of batch B. */
static inline struct zs_config accum_config(enum zs_framework fw, enum zs_precision pr, enum zs_optimizer opt,
                                            unsigned K, unsigned B)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.steps = 3;
	c.framework = fw;
	c.precision = pr;
	c.optimizer = opt;
	c.grad_accum = K;
	c.batch = B;
	return c;
}

static inline double accum_max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)a[i] - (double)b[i]));
	return m;
}

#endif
