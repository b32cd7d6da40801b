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
 *
 * Last, the same on zerosim's transformer (gpt2 and llama, tiny): micro-step
 * m of step t trains the task's batch t·K + m of B rows, the rows a step of
 * K·B draws (tfm_task_batch), its activations the micro-batch's.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/tfm.h"
#include "util/config.h"
#include "util/model.h"
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

/* ------------------------------------------------------------------------ */
/* The transformer */

/* The tiny shapes of the issue (tests/ft_lib.sh's ft_configs): 2 blocks,
 * d 64, 4 heads; llama with 2 key-value heads, intermediate 160. */
static const char *const tfm_configs[] = {
	"{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 4, \"n_layer\": 2, \"n_positions\": 32, "
	"\"vocab_size\": 256}",
	"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
	"\"num_key_value_heads\": 2, \"intermediate_size\": 160, \"max_position_embeddings\": 32, "
	"\"vocab_size\": 256}",
};

/* The transformer of tfm_configs[i] at --seq 16 into *tr. */
static void tfm_model(struct zs_tfm_run *tr, size_t i)
{
	cJSON *j = cJSON_Parse(tfm_configs[i]);
	char *cause = NULL;
	memset(tr, 0, sizeof *tr);
	ck_assert_int_eq(zs_model_from_json(j, "test", &tr->hf, &cause), 0);
	cJSON_Delete(j);
	snprintf(tr->name, sizeof tr->name, "%s-tiny", i ? "llama" : "gpt2");
	tfm_dims_from_config(&tr->dims, &tr->hf);
	tr->seq = 16;
	tr->recompute = ZS_RECOMPUTE_NONE;
}

/* The run's Ψ: its units' elements. */
static size_t result_psi(const struct zs_result *r)
{
	size_t psi = 0;
	for (size_t u = 0; u < r->nunits; u++)
		psi += r->unit_n[u];
	return psi;
}

/* The largest weight difference of K micro-steps of B against one step of
 * K·B on the transformer tr, scheme sc at N = n, unit u, 2 steps; the
 * losses within ltol (relative). */
static double tfm_diff(const struct zs_tfm_run *tr, enum zs_scheme sc, enum zs_precision pr, enum zs_optimizer opt,
                       unsigned K, unsigned B, unsigned n, enum zs_unit u, double ltol)
{
	scheme = sc;
	struct zs_config one = ds_config(pr, opt, 1, K * B), acc = ds_config(pr, opt, K, B);
	one.tfm = acc.tfm = tr;
	one.steps = acc.steps = 2;
	struct zs_result a = run(&one, n, u), b = run(&acc, n, u);
	ck_assert_uint_eq(result_psi(&a), result_psi(&b));
	double d = accum_max_diff(a.weights, b.weights, result_psi(&a));
	for (unsigned t = 0; t < one.steps; t++)
		ck_assert_msg(fabs(a.losses[t] - b.losses[t]) <= ltol * fabs(a.losses[t]),
		              "%s %s K=%u N=%u step %u: loss %.9g against %.9g", tr->name, zs_scheme_name(sc), K, n, t,
		              b.losses[t], a.losses[t]);
	engine_result_free(&a);
	engine_result_free(&b);
	return d;
}

/* The transformer's tolerances, set from what the sums' order gives
 * (gpt2 and llama below: at most 3.7e-9 with fp32 SGD, 3.5e-7 with mixed
 * SGD, 2.9e-5 with fp32 Adam, whose first steps move a weight with a grad
 * near 0 by up to lr = 1e-3 whatever its size; 5.4e-5 on an AVX-512 host,
 * gpt2 zero3 K = 3, whose OpenBLAS kernels sum in another order) and
 * checked to be far below what half the rows give (1.7e-4 with fp32 SGD,
 * 1.7e-4 mixed, 5.6e-3 with fp32 Adam: the control). */
static const double tfm_tol_sgd = 1e-8, tfm_tol_mixed = 5e-7, tfm_tol_adam = 8e-5;

/* A covering set: gpt2 and llama under each scheme, K = 2 and 3, N = 1,
 * 2 and 3, both units, fp32 with Adam and SGD and mixed with SGD. */
START_TEST(test_transformer_k_micro_steps_are_one_step_on_the_k_fold_batch)
{
	const enum zs_scheme schemes[] = {ZS_DP, ZS_ZERO1, ZS_ZERO2, ZS_ZERO3};
	struct zs_tfm_run tr;
	unsigned i = 0;
	for (size_t m = 0; m < 2; m++) {
		tfm_model(&tr, m);
		for (size_t s = 0; s < 4; s++, i++) {
			unsigned K = 2 + i % 2, n = 1 + i % 3;
			enum zs_unit u = (i / 2) % 2 ? ZS_UNIT_LAYER : ZS_UNIT_MODEL;
			double dadam = tfm_diff(&tr, schemes[s], ZS_FP32, ZS_ADAM, K, 2, n, u, 4e-6);
			double dsgd = tfm_diff(&tr, schemes[s], ZS_FP32, ZS_SGD, K, 2, n, u, 4e-6);
			double dmixed = tfm_diff(&tr, schemes[s], ZS_MIXED, ZS_SGD, K, 2, n, u, 4e-5);
			ck_assert_msg(dadam <= tfm_tol_adam && dsgd <= tfm_tol_sgd && dmixed <= tfm_tol_mixed,
			              "%s %s K=%u N=%u unit=%d: weights differ by %g (fp32 Adam), %g (fp32 SGD), %g (mixed SGD)",
			              tr.name, zs_scheme_name(schemes[s]), K, n, (int)u, dadam, dsgd, dmixed);
		}
	}
}
END_TEST

/* The control: one step on half the rows (B alone) moves the weights more
 * than 50 times each tolerance above, so those can fail (fp32 Adam's
 * 5.6e-3 is 70 times its 8e-5). */
START_TEST(test_transformer_half_the_rows_give_other_weights)
{
	const enum zs_precision pr[] = {ZS_FP32, ZS_MIXED, ZS_FP32};
	const enum zs_optimizer opt[] = {ZS_SGD, ZS_SGD, ZS_ADAM};
	const double tol[] = {tfm_tol_sgd, tfm_tol_mixed, tfm_tol_adam};
	struct zs_tfm_run tr;
	tfm_model(&tr, 1);
	scheme = ZS_ZERO2;
	for (size_t i = 0; i < 3; i++) {
		struct zs_config one = ds_config(pr[i], opt[i], 1, 4), half = ds_config(pr[i], opt[i], 1, 2);
		one.tfm = half.tfm = &tr;
		struct zs_result a = run(&one, 2, ZS_UNIT_LAYER), b = run(&half, 2, ZS_UNIT_LAYER);
		double d = accum_max_diff(a.weights, b.weights, result_psi(&a));
		ck_assert_msg(d > 50 * tol[i], "half the rows moved the weights by %g only (%s)", d,
		              zs_precision_name(pr[i]));
		engine_result_free(&a);
		engine_result_free(&b);
	}
}
END_TEST

/* The bytes sent per step on gpt2 at N = 2, mixed, 1 step, K = 3 against
 * K = 1: dp and ZeRO-1 reduce once (the same bytes), ZeRO-2 reduce-scatters
 * every micro-step (3 times K = 1's) and gathers once (the same), ZeRO-3
 * reduce-scatters 3 times K = 1's and gathers more (each micro-step's
 * forward and backward). The state between steps is K = 1's. */
START_TEST(test_transformer_comm_per_optimizer_step)
{
	struct zs_tfm_run tr;
	tfm_model(&tr, 0);
	const enum zs_scheme schemes[] = {ZS_DP, ZS_ZERO1, ZS_ZERO2, ZS_ZERO3};
	const unsigned rs_times[] = {1, 1, 3, 3};
	for (size_t i = 0; i < 4; i++) {
		scheme = schemes[i];
		struct zs_config c1 = ds_config(ZS_MIXED, ZS_ADAM, 1, 2), c3 = ds_config(ZS_MIXED, ZS_ADAM, 3, 2);
		c1.tfm = c3.tfm = &tr;
		c1.steps = c3.steps = 1;
		c1.ds_persist = c3.ds_persist = 0;
		struct zs_result a = run(&c1, 2, ZS_UNIT_LAYER), b = run(&c3, 2, ZS_UNIT_LAYER);
		const struct zs_coll_stats *x = &a.comm[0], *y = &b.comm[0];
		ck_assert_uint_eq(y->bytes[ZS_ALL_REDUCE], x->bytes[ZS_ALL_REDUCE]);
		ck_assert_uint_eq(y->bytes[ZS_REDUCE_SCATTER], rs_times[i] * x->bytes[ZS_REDUCE_SCATTER]);
		ck_assert_uint_gt(x->bytes[ZS_ALL_REDUCE] + x->bytes[ZS_REDUCE_SCATTER], 0);
		if (schemes[i] == ZS_ZERO3)
			ck_assert_uint_gt(y->bytes[ZS_ALL_GATHER], x->bytes[ZS_ALL_GATHER]);
		else
			ck_assert_uint_eq(y->bytes[ZS_ALL_GATHER], x->bytes[ZS_ALL_GATHER]);
		ck_assert_uint_eq(b.resident[0], a.resident[0]);
		engine_result_free(&a);
		engine_result_free(&b);
	}
}
END_TEST

/* Still refused by name: the accumulation through the host
 * (--offload optimizer), on the transformer as on the MLP. */
START_TEST(test_transformer_offloaded_accumulation_is_refused)
{
	struct zs_tfm_run tr;
	tfm_model(&tr, 0);
	struct zs_config c = ds_config(ZS_MIXED, ZS_ADAM, 2, 2);
	char *cause = NULL;
	c.tfm = &tr;
	c.offload = ZS_OFFLOAD_OPTIMIZER;
	ck_assert_int_ne(zs_config_check_torch(&c, &cause), 0);
	ck_assert_ptr_nonnull(strstr(cause, "async_accumulate_grad_in_cpu_via_gpu"));
	free(cause);
	c.offload = ZS_OFFLOAD_NONE;
	ck_assert_int_eq(zs_config_check_torch(&c, &cause), 0);
	ck_assert_int_eq(zs_config_check_model(&c, 1, &cause), 0);
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
	tcase_add_test(t, test_transformer_k_micro_steps_are_one_step_on_the_k_fold_batch);
	tcase_add_test(t, test_transformer_half_the_rows_give_other_weights);
	tcase_add_test(t, test_transformer_comm_per_optimizer_step);
	tcase_add_test(t, test_transformer_offloaded_accumulation_is_refused);
	suite_add_tcase(s, t);
	return suite_run(s);
}
