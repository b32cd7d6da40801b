/*
 * test_ds_accum — DeepSpeed's gradient_accumulation_steps K (--framework
 * deepspeed --grad-accum K; docs/schedule.md, "deepspeed", "Gradient
 * accumulation"): ZeRO-2 below, then dp, ZeRO-1 and ZeRO-3.
 *
 * K micro-steps of batch B are one step on the K-fold batch: micro-step m
 * draws rows m·B..(m+1)·B-1 of the K·B rows a step at batch K·B draws
 * (engine_mlp_batch_rows), the loss is divided by K (engine.py 2100-2102,
 * _scale_loss_by_gas 1904-1923) and the K reduced grad partitions are
 * summed (stage_1_and_2.py 783-799). So the final weights agree with
 * --batch K·B --grad-accum 1 to the rounding of the sums' order, and the
 * step's loss, the mean over micro-steps, with its loss. The tolerances are
 * set from what the sums' order can change and checked to be far below
 * what a wrong batch gives (the control: the same K without slicing, each
 * micro-step on another step's rows).
 *
 * The bytes sent are counted by hand: per step K reduce-scatters of each
 * unit and one all-gather of the params.
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

/* The scheme every check runs (dp, zero1 or zero2; config.c refuses
 * accumulation under zero3): each check runs under each. */
static enum zs_scheme scheme = ZS_ZERO2;

static struct zs_config ds_config(enum zs_precision pr, enum zs_optimizer opt, unsigned K, unsigned B)
{
	struct zs_config c = accum_config(ZS_FW_DEEPSPEED, pr, opt, K, B);
	c.schemes[0] = scheme;
	c.nschemes = 1;
	return c;
}

static struct zs_result run(const struct zs_config *c, unsigned n, enum zs_unit u)
{
	return engine_ok(c, scheme, n, u, 1);
}

/* K·B in one step against K micro-steps of B, at N = 1, 2, 3 and both
 * units: the largest weight difference at most tol, the losses within
 * ltol (relative). */
static void same_weights(enum zs_precision pr, enum zs_optimizer opt, double tol, double ltol)
{
	const unsigned B = 4;
	for (unsigned K = 2; K <= 3; K++)
		for (unsigned n = 1; n <= 3; n++)
			for (int u = 0; u < 2; u++) {
				enum zs_unit unit = u ? ZS_UNIT_LAYER : ZS_UNIT_MODEL;
				struct zs_config one = ds_config(pr, opt, 1, K * B), acc = ds_config(pr, opt, K, B);
				struct zs_result a = run(&one, n, unit), b = run(&acc, n, unit);
				double d = accum_max_diff(a.weights, b.weights, PSI);
				ck_assert_msg(d <= tol, "K=%u N=%u unit=%d %s: weights differ by %g (> %g)", K, n, u,
				              zs_precision_name(pr), d, tol);
				for (unsigned t = 0; t < one.steps; t++)
					ck_assert_msg(fabs(a.losses[t] - b.losses[t]) <= ltol * fabs(a.losses[t]),
					              "K=%u N=%u step %u: loss %.9g against %.9g", K, n, t, b.losses[t], a.losses[t]);
				engine_result_free(&a);
				engine_result_free(&b);
			}
}

START_TEST(test_k_micro_steps_are_one_step_on_the_k_fold_batch_fp32)
{
	same_weights(ZS_FP32, ZS_ADAM, 2e-6, 4e-6);
	same_weights(ZS_FP32, ZS_SGD, 2e-8, 4e-6);
}
END_TEST

/* In mixed precision the grads are fp16, each micro-step's rounded and
 * summed in fp16 (gradient_accumulation_dtype, the model's by default):
 * Adam's first step moves each weight by about lr = 1e-3 whatever the
 * grad's size, so a rounding can change an update by up to that. */
START_TEST(test_k_micro_steps_are_one_step_on_the_k_fold_batch_mixed)
{
	same_weights(ZS_MIXED, ZS_SGD, 2e-7, 4e-5);
}
END_TEST

/* The control: the first micro-batch alone (--batch B, no accumulation)
 * is half the K-fold batch; its weights are as far from the K-fold
 * batch's as a wrong slicing would put them, far outside the tolerances
 * above, so those can fail. */
START_TEST(test_half_the_rows_give_other_weights)
{
	struct zs_config one = ds_config(ZS_FP32, ZS_SGD, 1, 8), half = ds_config(ZS_FP32, ZS_SGD, 1, 4);
	struct zs_result a = run(&one, 2, ZS_UNIT_MODEL), b = run(&half, 2, ZS_UNIT_MODEL);
	double d = accum_max_diff(a.weights, b.weights, PSI);
	ck_assert_msg(d > 100 * 2e-8, "half the rows moved the weights by %g only", d);
	engine_result_free(&a);
	engine_result_free(&b);
	one.optimizer = half.optimizer = ZS_ADAM;
	a = run(&one, 2, ZS_UNIT_MODEL), b = run(&half, 2, ZS_UNIT_MODEL);
	d = accum_max_diff(a.weights, b.weights, PSI);
	ck_assert_msg(d > 100 * 2e-6, "half the rows moved the weights by %g only", d);
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

/* At N = 2, unit=model, mixed: S = 16544, each micro-step reduce-scatters
 * the unit (16544 elements sent a rank, 2 bytes each), the step gathers it
 * once; K = 3, 3 steps: 9 reduce-scatters and 3 all-gathers. The state
 * between steps is K = 1's. */
START_TEST(test_every_micro_step_reduce_scatters)
{
	struct zs_config c1 = ds_config(ZS_MIXED, ZS_ADAM, 1, 4), c3 = ds_config(ZS_MIXED, ZS_ADAM, 3, 4);
	struct zs_result a = run(&c1, 2, ZS_UNIT_MODEL), b = run(&c3, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(b.comm[0].calls[ZS_REDUCE_SCATTER], 9);
	ck_assert_uint_eq(b.comm[0].calls[ZS_ALL_GATHER], 3);
	ck_assert_uint_eq(b.comm[0].elements[ZS_REDUCE_SCATTER], 9 * 16544);
	ck_assert_uint_eq(b.comm[0].bytes[ZS_REDUCE_SCATTER], 9 * 16544 * 2);
	ck_assert_uint_eq(b.comm[0].bytes[ZS_ALL_GATHER], 3 * 16544 * 2);
	ck_assert_uint_eq(a.comm[0].calls[ZS_REDUCE_SCATTER], 3);
	ck_assert_uint_eq(b.resident[0], a.resident[0]);
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

/* A micro-step after the first holds a new grad partition (2S bytes in
 * mixed) from its first reduction: with a bucket of one unit=layer layer
 * (16448 elements), the second layer's grads (16640 elements) do not fit,
 * so the first layer's are reduced while the second's are held, and the
 * new partition adds its 2·16544 = 33088 bytes there. At K = 1 that
 * moment holds the same less those bytes; the peak of K = 2 is K = 1's
 * backward peak or that moment, whichever is higher, and never more than
 * S·g above K = 1's. */
START_TEST(test_the_new_partition_is_held_from_the_first_reduction)
{
	struct zs_config c1 = ds_config(ZS_MIXED, ZS_ADAM, 1, 4), c2 = ds_config(ZS_MIXED, ZS_ADAM, 2, 4);
	c1.ds_reduce_bucket = c2.ds_reduce_bucket = 16448;
	c1.steps = c2.steps = 1;
	struct zs_result a = run(&c1, 2, ZS_UNIT_LAYER), b = run(&c2, 2, ZS_UNIT_LAYER);
	ck_assert_uint_gt(b.peak[0], a.peak[0]);
	ck_assert_uint_le(b.peak[0], a.peak[0] + 2 * 16544);
	ck_assert_uint_eq(b.peak_breakdown[ZS_CAT_GRAD16], 2 * 2 * 16544); /* kept and new partitions */
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

/* dp, ZeRO-1 and ZeRO-3: the same K·B against K micro-steps of B,
 * autograd's grads (dp, ZeRO-1) or the grad partitions (ZeRO-3) added
 * into across the micro-steps (fp16 adds in mixed, as ZeRO-2's). */
START_TEST(test_dp_zero1_zero3_k_micro_steps_are_one_step_on_the_k_fold_batch)
{
	const enum zs_scheme schemes[] = {ZS_DP, ZS_ZERO1, ZS_ZERO3};
	for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
		scheme = schemes[i];
		same_weights(ZS_FP32, ZS_ADAM, 2e-6, 4e-6);
		same_weights(ZS_FP32, ZS_SGD, 2e-8, 4e-6);
		same_weights(ZS_MIXED, ZS_SGD, 2e-7, 4e-5);
	}
}
END_TEST

/* ZeRO-3 gathers and reduce-scatters in every micro-step: at N = 2,
 * unit=model, nothing persistent, K = 3 over 1 step reduce-scatters 3
 * times what K = 1 does (the partition added into in place), and the
 * state between steps is K = 1's. */
START_TEST(test_zero3_reduces_every_micro_step)
{
	scheme = ZS_ZERO3;
	struct zs_config c1 = ds_config(ZS_MIXED, ZS_ADAM, 1, 4), c3 = ds_config(ZS_MIXED, ZS_ADAM, 3, 4);
	c1.ds_persist = c3.ds_persist = 0;
	c1.steps = c3.steps = 1;
	struct zs_result a = run(&c1, 2, ZS_UNIT_MODEL), b = run(&c3, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(b.comm[0].calls[ZS_REDUCE_SCATTER], 3 * a.comm[0].calls[ZS_REDUCE_SCATTER]);
	ck_assert_uint_eq(b.comm[0].bytes[ZS_REDUCE_SCATTER], 3 * a.comm[0].bytes[ZS_REDUCE_SCATTER]);
	ck_assert_uint_gt(b.comm[0].bytes[ZS_ALL_GATHER], a.comm[0].bytes[ZS_ALL_GATHER]);
	ck_assert_uint_eq(b.resident[0], a.resident[0]);
	engine_result_free(&a);
	engine_result_free(&b);
}
END_TEST

/* ZeRO-1 and dp reduce at the boundary only (engine.py's
 * allreduce_gradients, 2056-2062): K = 3 over 3 steps at N = 2 sends
 * what K = 1 sends, 3 reductions; the state between steps is K = 1's. */
START_TEST(test_zero1_and_dp_reduce_once_a_step)
{
	const enum zs_scheme schemes[] = {ZS_DP, ZS_ZERO1};
	const enum zs_coll_kind op[] = {ZS_ALL_REDUCE, ZS_REDUCE_SCATTER};
	for (size_t i = 0; i < 2; i++) {
		scheme = schemes[i];
		struct zs_config c1 = ds_config(ZS_MIXED, ZS_ADAM, 1, 4), c3 = ds_config(ZS_MIXED, ZS_ADAM, 3, 4);
		struct zs_result a = run(&c1, 2, ZS_UNIT_MODEL), b = run(&c3, 2, ZS_UNIT_MODEL);
		ck_assert_uint_eq(b.comm[0].calls[op[i]], 3);
		ck_assert_uint_eq(a.comm[0].calls[op[i]], 3);
		ck_assert_uint_eq(b.comm[0].bytes[op[i]], a.comm[0].bytes[op[i]]);
		ck_assert_uint_gt(b.comm[0].bytes[op[i]], 0);
		ck_assert_uint_eq(b.resident[0], a.resident[0]);
		engine_result_free(&a);
		engine_result_free(&b);
	}
}
END_TEST

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	Suite *s = suite_create("ds_accum");
	TCase *t = tcase_create("accum");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_k_micro_steps_are_one_step_on_the_k_fold_batch_fp32);
	tcase_add_test(t, test_k_micro_steps_are_one_step_on_the_k_fold_batch_mixed);
	tcase_add_test(t, test_half_the_rows_give_other_weights);
	tcase_add_test(t, test_every_micro_step_reduce_scatters);
	tcase_add_test(t, test_the_new_partition_is_held_from_the_first_reduction);
	tcase_add_test(t, test_dp_zero1_zero3_k_micro_steps_are_one_step_on_the_k_fold_batch);
	tcase_add_test(t, test_zero1_and_dp_reduce_once_a_step);
	tcase_add_test(t, test_zero3_reduces_every_micro_step);
	suite_add_tcase(s, t);
	return suite_run(s);
}
