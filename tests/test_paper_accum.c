/*
 * test_paper_accum — gradient accumulation under the paper's schedule
 * (--framework paper --grad-accum K; docs/schedule.md, "Gradient
 * accumulation under the paper's schedule").
 *
 * K micro-steps of batch B are one step on the K-fold batch: micro-step m
 * draws rows m·B..(m+1)·B-1 of the K·B rows a step at batch K·B draws
 * (engine_mlp_batch_rows), the loss's gradient is divided by K, dp and
 * zero1 add the K micro-steps' grads into the full grads and reduce once,
 * zero2 and zero3 reduce-scatter every micro-step and add into the shard.
 * So the final weights agree with --batch K·B --grad-accum 1 to the
 * rounding of the sums' order, and the step's loss, the mean over
 * micro-steps, with its loss. The tolerances are test_ds_accum's (the same
 * sums in other orders), checked to be far below what a wrong batch gives
 * (the control: half the rows).
 *
 * The collectives and the extra bytes are counted by hand below.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/config.h"
#include "util/util.h"
#include "accum_lib.h"
#include "suite_run.h"

static struct zs_config paper_config(enum zs_precision pr, enum zs_optimizer opt, unsigned K, unsigned B)
{
	return accum_config(ZS_FW_PAPER, pr, opt, K, B);
}

/* K·B in one step against K micro-steps of B, every scheme, K = 2, 3,
 * N = 1, 2, 3, both units: the largest weight difference at most tol, the
 * losses within ltol (relative). Returns the largest difference seen. */
static double same_weights(enum zs_precision pr, enum zs_optimizer opt, double tol, double ltol)
{
	const unsigned B = 4;
	double most = 0;
	for (int sc = ZS_DP; sc <= ZS_ZERO3; sc++)
		for (unsigned K = 2; K <= 3; K++)
			for (unsigned n = 1; n <= 3; n++)
				for (int u = 0; u < 2; u++) {
					enum zs_unit unit = u ? ZS_UNIT_LAYER : ZS_UNIT_MODEL;
					struct zs_config one = paper_config(pr, opt, 1, K * B), acc = paper_config(pr, opt, K, B);
					struct zs_result a = engine_ok(&one, (enum zs_scheme)sc, n, unit, 1);
					struct zs_result b = engine_ok(&acc, (enum zs_scheme)sc, n, unit, 1);
					double d = accum_max_diff(a.weights, b.weights, PSI);
					most = fmax(most, d);
					ck_assert_msg(d <= tol, "%s K=%u N=%u unit=%d %s: weights differ by %g (> %g)",
					              zs_scheme_name((enum zs_scheme)sc), K, n, u, zs_precision_name(pr), d, tol);
					for (unsigned t = 0; t < one.steps; t++)
						ck_assert_msg(fabs(a.losses[t] - b.losses[t]) <= ltol * fabs(a.losses[t]),
						              "%s K=%u N=%u step %u: loss %.9g against %.9g",
						              zs_scheme_name((enum zs_scheme)sc), K, n, t, b.losses[t], a.losses[t]);
					engine_result_free(&a);
					engine_result_free(&b);
				}
	return most;
}

START_TEST(test_k_micro_steps_are_one_step_on_the_k_fold_batch_fp32)
{
	double adam = same_weights(ZS_FP32, ZS_ADAM, 2e-6, 4e-6);
	double sgd = same_weights(ZS_FP32, ZS_SGD, 2e-8, 4e-6);
	printf("fp32: largest weight difference %g (Adam), %g (SGD)\n", adam, sgd);
}
END_TEST

/* In mixed precision the grads are fp16: each micro-step's are rounded
 * and summed in fp16 (dp, zero1: into the full grads; zero2, zero3: into
 * the shard, after the reduce-scatter's own rounding). */
START_TEST(test_k_micro_steps_are_one_step_on_the_k_fold_batch_mixed)
{
	double sgd = same_weights(ZS_MIXED, ZS_SGD, 2e-7, 4e-5);
	printf("mixed: largest weight difference %g (SGD)\n", sgd);
}
END_TEST

/* The control: the first micro-batch alone (--batch B, no accumulation)
 * is half the K-fold batch; its weights are as far from the K-fold
 * batch's as a wrong slicing would put them, far outside the tolerances
 * above, so those can fail. */
START_TEST(test_half_the_rows_give_other_weights)
{
	struct zs_config one = paper_config(ZS_FP32, ZS_SGD, 1, 8), half = paper_config(ZS_FP32, ZS_SGD, 1, 4);
	struct zs_result a = engine_ok(&one, ZS_DP, 2, ZS_UNIT_MODEL, 1), b = engine_ok(&half, ZS_DP, 2, ZS_UNIT_MODEL, 1);
	double d = accum_max_diff(a.weights, b.weights, PSI);
	ck_assert_msg(d > 100 * 2e-8, "half the rows moved the weights by %g only", d);
	printf("half the rows: the weights differ by %g (SGD, dp)", d);
	engine_result_free(&a);
	engine_result_free(&b);
	one.optimizer = half.optimizer = ZS_ADAM;
	a = engine_ok(&one, ZS_ZERO3, 2, ZS_UNIT_MODEL, 1), b = engine_ok(&half, ZS_ZERO3, 2, ZS_UNIT_MODEL, 1);
	d = accum_max_diff(a.weights, b.weights, PSI);
	ck_assert_msg(d > 100 * 2e-6, "half the rows moved the weights by %g only", d);
	printf(", %g (Adam, zero3)\n", d);
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

/* At N = 2, unit=model, mixed, K = 3, 3 steps: S = 16544 (Ψ = 33088 is
 * even), g = p = 2. dp all-reduces once a step (3 calls, 2·16544·2 bytes
 * each); zero1 reduce-scatters and gathers once a step; zero2
 * reduce-scatters every micro-step (9) and gathers once a step (3);
 * zero3 gathers twice and reduce-scatters once every micro-step (18, 9).
 * The state between steps is K = 1's. */
START_TEST(test_collectives_per_optimizer_step)
{
	static const unsigned long long calls[4][3] = {
	        /* all-reduce, reduce-scatter, all-gather */
	        {3, 0, 0}, {0, 3, 3}, {0, 9, 3}, {0, 9, 18}};
	for (int sc = ZS_DP; sc <= ZS_ZERO3; sc++) {
		struct zs_config c1 = paper_config(ZS_MIXED, ZS_ADAM, 1, 4), c3 = paper_config(ZS_MIXED, ZS_ADAM, 3, 4);
		struct zs_result a = engine_ok(&c1, (enum zs_scheme)sc, 2, ZS_UNIT_MODEL, 1);
		struct zs_result b = engine_ok(&c3, (enum zs_scheme)sc, 2, ZS_UNIT_MODEL, 1);
		ck_assert_uint_eq(b.comm[0].calls[ZS_ALL_REDUCE], calls[sc][0]);
		ck_assert_uint_eq(b.comm[0].calls[ZS_REDUCE_SCATTER], calls[sc][1]);
		ck_assert_uint_eq(b.comm[0].calls[ZS_ALL_GATHER], calls[sc][2]);
		ck_assert_uint_eq(b.comm[0].bytes[ZS_ALL_REDUCE], calls[sc][0] * 2 * 16544 * 2);
		ck_assert_uint_eq(b.comm[0].bytes[ZS_REDUCE_SCATTER], calls[sc][1] * 16544 * 2);
		ck_assert_uint_eq(b.comm[0].bytes[ZS_ALL_GATHER], calls[sc][2] * 16544 * 2);
		ck_assert_uint_eq(b.resident[0], a.resident[0]);
		engine_result_free(&a);
		engine_result_free(&b);
	}
}
END_TEST

/* What a later micro-step adds to the peak, by hand (N = 2, mixed,
 * batch 4, unit=model): dp's backward writes the whole model's grads
 * apart, Ψ·g = 66176 bytes of full_grads beside the resident grads, at the
 * backward's peak: exactly that above K = 1's. zero2's reduce-scatter of a
 * later micro-step writes into a transient of S·g = 33088 bytes after
 * backward, beside the full grads (Ψ·g) alone: resident R + 66176 + 33088
 * against K = 1's backward R + A + D + 66176 (A = 4·4·(64+64+256+64) =
 * 7168, x, y and both layers' outputs; D = 2·4·4·256 = 8192): 33088 -
 * 15360 = 17728 above it. */
START_TEST(test_the_transients_of_a_later_micro_step)
{
	struct zs_config c1 = paper_config(ZS_MIXED, ZS_ADAM, 1, 4), c2 = paper_config(ZS_MIXED, ZS_ADAM, 2, 4);
	c1.steps = c2.steps = 1;
	struct zs_result a = engine_ok(&c1, ZS_DP, 2, ZS_UNIT_MODEL, 1), b = engine_ok(&c2, ZS_DP, 2, ZS_UNIT_MODEL, 1);
	ck_assert_uint_eq(b.peak[0], a.peak[0] + 2 * PSI);
	ck_assert_uint_eq(b.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * PSI);
	ck_assert_uint_eq(b.peak_breakdown[ZS_CAT_GRAD16], 2 * PSI);
	engine_result_free(&a);
	engine_result_free(&b);
	a = engine_ok(&c1, ZS_ZERO2, 2, ZS_UNIT_MODEL, 1), b = engine_ok(&c2, ZS_ZERO2, 2, ZS_UNIT_MODEL, 1);
	ck_assert_uint_eq(b.peak[0], a.peak[0] + 2 * 16544 - 7168 - 8192);
	ck_assert_uint_eq(b.peak_breakdown[ZS_CAT_GRAD16], 2 * 2 * 16544); /* the shard and the transient */
	ck_assert_uint_eq(b.peak_breakdown[ZS_CAT_ACTIVATIONS], 0);
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	Suite *s = suite_create("paper_accum");
	TCase *t = tcase_create("paper");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_k_micro_steps_are_one_step_on_the_k_fold_batch_fp32);
	tcase_add_test(t, test_k_micro_steps_are_one_step_on_the_k_fold_batch_mixed);
	tcase_add_test(t, test_half_the_rows_give_other_weights);
	tcase_add_test(t, test_collectives_per_optimizer_step);
	tcase_add_test(t, test_the_transients_of_a_later_micro_step);
	suite_add_tcase(s, t);
	return suite_run(s);
}
