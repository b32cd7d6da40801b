/*
 * test_framework — the frameworks' implementations of the schemes, engine
 * and theory each against a hand computation (not against each other).
 *
 * torch's zero1 on the default MLP 64,256,64 (Ψ = 33088). Its tensors in
 * model order: W0 16384, b0 256, W1 16384, b1 64. ZeroRedundancyOptimizer
 * sorts them largest first (W0, W1, b0, b1; equal sizes keep model order)
 * and gives each to the first least-loaded rank:
 *   N = 2:  W0 -> 0, W1 -> 1, b0 -> 0 (16384 = 16384, the first), b1 -> 1:
 *           loads 16640, 16448;
 *   N = 3:  W0 -> 0, W1 -> 1, b0 -> 2, b1 -> 2: loads 16384, 16384, 320;
 *   N >= 4: W0, W1, b0, b1 to ranks 0..3: 16384, 16384, 256, 64, then 0s.
 * Params and grads are full (2 + 2 bytes, mixed), the optimizer state
 * (12 bytes) is the rank's load: the worst rank holds 4Ψ + 12·16640 =
 * 332032 B = 10.035 B/param at N = 2 and 4Ψ + 12·16384 = 328960 B = 9.942
 * at N >= 3 (fp32: 8Ψ + 8·16384 = 395776 B = 11.961), the numbers real
 * PyTorch 1.13 gives. DDP's all-reduce sends 2(N-1)/N elements per
 * parameter and the broadcasts (N-1)/N more: 3(N-1)/N, exactly where N
 * divides every tensor (N = 2, 4, 8, 16, 32).
 *
 * Both run over DDP, whose gradient buckets (gradient_as_bucket_view=False)
 * are a second gradient-sized buffer on every rank, category buckets:
 * 2Ψ bytes more in mixed precision (4Ψ in fp32), shown apart from the model
 * states above, so the resident total is 12.035 and 11.942 B/param. The
 * buckets DDP 1.13 rebuilds after its first iteration, read from real
 * PyTorch (ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"], gloo, fp32,
 * bytes; rebuilt_per_bucket_param_indices "5 4 3 2, 1, 0"):
 *   64,256,64, bucket_cap_mb 25:            132352 (one bucket);
 *   256,512,512,256, bucket_cap_mb 0:       1575936, 2048, 524288;
 *   256,512,512,256, bucket_cap_mb 0.1, 25: 1575936, 526336.
 * And where a bucket reaches its limit exactly (a bucket closes at >=, and
 * the cap is int(bucket_cap_mb·2^20) bytes), from the same run of PyTorch
 * 1.13 (rebuilt_bucket_sizes; 0.015594482421875 MB is 16352 B exactly):
 *   8,511,512, bucket_cap_mb 25:            1048576, 18396 ("3 2, 1 0");
 *   8,511,512, bucket_cap_mb 0:             1048576, 2044, 16352;
 *   3,7,511,512, bucket_cap_mb 0.015594482421875: 1048576, 16352, 112;
 *   3,7,511,512, bucket_cap_mb 0.0156:      1048576, 16380, 84.
 * In fp16 (zerosim's mixed grads) the limits hold half as many elements:
 * torch.distributed._compute_bucket_assignment_by_size, the function the
 * rebuild calls, over the fp16 parameters in reverse order gives one
 * bucket of 1051136 B for 256,512,512,256 at bucket_cap_mb 0.
 *
 * torch's zero3 is FSDP FULL_SHARD, fp32 (4 + 4 + 8 bytes): with unit=layer
 * the FlatParameters of 16640 and 16448 elements are padded to 3·5547 and
 * 3·5483 at N = 3, so a rank holds 16·(5547 + 5483) = 176480 B = 5.334
 * B/param, PyTorch 1.13's number. With unit=model the root unit is not
 * freed after forward: one all-gather and one reduce-scatter, 2(N-1)/N
 * elements per parameter (1.5 at N = 4), not the paper's 3(N-1)/N.
 * A unit's gathered copy is FSDP's _full_param_padded, N·s_u elements:
 * 3·5547 and 3·5483 here. A unit's post-backward hook (FSDP 1.13's
 * _post_backward_hook) first reshards the unit (that copy freed), then,
 * while autograd's unsharded grad (n_u) is still held, makes F.pad's copy
 * of it, N·s_u elements, and the output shard, s_u, category buckets: with unit=layer
 * at N = 3 in fp32, the first layer's hook holds 16640·4 B of grads and
 * (3·5547 + 5547)·4 = 88752 B of buckets, 155312 B, above its own compute
 * (3·5547·4 gathered and 16640·4 of grads, 133124 B): the peak. Real
 * PyTorch 1.13 (gloo on the CPU, the CPU allocator's events under
 * torch.profiler, steady state: step 3) allocates exactly 66564 and 22188
 * B in that hook, and 65796 and 21932 B in the last layer's; the
 * unshards allocate the padded copies, 66564 and 65796 B.
 * torch's zero2 is FSDP SHARD_GRAD_OP: the same shards between steps, but
 * every unit stays gathered into its backward: with unit=layer, the last
 * layer's hook holds the first layer's params, 3·5547·4 B, its own grads,
 * 16448·4 B, and its buckets, (3·5483 + 5483)·4 = 87728 B (220084 B, the
 * peak, where its compute held both layers' params, 3·(5547 + 5483)·4,
 * and the same grads: 198152 B); one all-gather per unit.
 * With --prefetch backward-pre (BACKWARD_PRE), FULL_SHARD unit=layer's
 * backward of the last layer also holds the first, prefetched, so its hook
 * holds what zero2's does: 220084 B, where without it the peak is the
 * first layer's hook's 155312 B; the all-gathers are the same four.
 * FSDP's MixedPrecision (--precision mixed, fp16 param and reduce dtypes)
 * keeps the FlatParameter and its grad as fp32 shards and the optimizer
 * over them, no master: at N = 3, unit=layer, the same 176480 B =
 * 16·(5547 + 5483) as fp32, in param32 4·11030, grad32 4·11030 and Adam's
 * 8·11030; only the working copies are fp16. Each unshard first casts the
 * rank's shard into a 16-bit _mp_shard of s_u slots (5547·2 = 11094 B for
 * the first layer) that the all-gather sends from into the 16-bit padded
 * copy (3·5547·2 B), freed after it; the hook's padded copy and output
 * are 16-bit and the output is cast to an
 * fp32 shard beside it: the first layer's hook holds 16640·2 B of grads
 * and 3·5547·2 + 5547·2 + 5547·4 = 66564 B of buckets, the peak. Real
 * PyTorch's allocator events at N = 3 (bf16, as the CPU has no fp16
 * matmul; the same 2 bytes) are, in order: 11094 and 10966 (forward's
 * unshards), 10966 (the last layer's backward unshard), 32898, 10966,
 * 21932 (its hook), 11094, then 33282, 11094, 22188. Each rank computes from
 * the fp16 rounding of the fp32 weights and steps on the fp16 reduced
 * grads, as the paper's mixed zero3 does from its master: the weights are
 * the paper's mixed zero3's, bit for bit. At N = 1 (NO_SHARD) the whole
 * model (unit=model) is cast to fp16 around each pass: 2Ψ gathered and 2Ψ
 * of grads at the peak over the 16Ψ of fp32 state.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "theory/theory.h"
#include "util/config.h"
#include "util/util.h"

#define PSI 33088
static const size_t mlp[] = {64, 256, 64};

/* The hand-worked loads above, rank k of N. */
static size_t load(unsigned n, unsigned k)
{
	if (n == 2)
		return k == 0 ? 16640 : 16448;
	if (n == 3)
		return k < 2 ? 16384 : 320;
	static const size_t four[] = {16384, 16384, 256, 64};
	return k < 4 ? four[k] : 0;
}

/* The buckets above, in fp32 elements, and their model. */
static const size_t wide[] = {256, 512, 512, 256}, mib[] = {8, 511, 512}, capped[] = {3, 7, 511, 512};
static const struct {
	const size_t *widths;
	size_t nwidths;
	double cap;
	enum zs_precision pr; /* grads fp32, or fp16 in mixed */
	size_t nbuckets;
	uint64_t bytes[3];
} torch_buckets[] = {
	{mlp, 3, 25, ZS_FP32, 1, {132352}},
	{wide, 4, 0, ZS_FP32, 3, {1575936, 2048, 524288}},
	{wide, 4, 0.1, ZS_FP32, 2, {1575936, 526336}},
	{wide, 4, 25, ZS_FP32, 2, {1575936, 526336}},
	{mib, 3, 25, ZS_FP32, 2, {1048576, 18396}},
	{mib, 3, 0, ZS_FP32, 3, {1048576, 2044, 16352}},
	{capped, 4, 0.015594482421875, ZS_FP32, 3, {1048576, 16352, 112}},
	{capped, 4, 0.0156, ZS_FP32, 3, {1048576, 16380, 84}},
	{wide, 4, 0, ZS_MIXED, 1, {1051136}},
};
#define NBUCKETCASES (sizeof torch_buckets / sizeof torch_buckets[0])

static struct zs_config torch_config(enum zs_precision pr)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.steps = 1;
	c.framework = ZS_FW_TORCH;
	c.precision = pr;
	return c;
}

static struct zs_result run_unit(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u)
{
	struct zs_result res;
	struct zs_run_options opt = {0};
	char *cause = NULL;
	int r = engine_run(c, s, n, u, NULL, &opt, &res, &cause);
	ck_assert_msg(r == 0, "engine_run failed: %s", cause ? cause : "?");
	return res;
}

static struct zs_result run(const struct zs_config *c, enum zs_scheme s, unsigned n)
{
	return run_unit(c, s, n, ZS_UNIT_MODEL);
}

static const unsigned worlds[] = {2, 3, 4, 8, 16, 32};
#define NWORLDS (sizeof worlds / sizeof worlds[0])

START_TEST(test_torch_zero1_ranks_hold_their_whole_tensors_optimizer_state)
{
	struct zs_config c = torch_config(ZS_MIXED);
	for (size_t w = 0; w < NWORLDS; w++) {
		unsigned n = worlds[w];
		struct zs_result res = run(&c, ZS_ZERO1, n);
		for (unsigned k = 0; k < n; k++) /* and DDP's buckets, 2Ψ */
			ck_assert_uint_eq(res.resident[k], 4 * PSI + 12 * load(n, k) + 2 * PSI);
		ck_assert_uint_eq(res.binding_rank, 0);
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_MASTER32], 4 * load(n, 0));
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_BUCKETS], 2 * PSI);
		engine_result_free(&res);
	}
}
END_TEST

START_TEST(test_torch_zero1_worst_rank_is_10_035_then_9_942_bytes_per_param)
{
	struct zs_config c = torch_config(ZS_MIXED);
	for (size_t w = 0; w < NWORLDS; w++) {
		struct zs_result res = run(&c, ZS_ZERO1, worlds[w]);
		size_t bucket = res.resident_breakdown[ZS_CAT_BUCKETS];
		double bpp = (double)(res.resident[res.binding_rank] - bucket) / PSI;
		ck_assert_double_eq_tol(bpp, worlds[w] == 2 ? 10.035 : 9.942, 5e-4);
		ck_assert_double_eq_tol((double)res.resident[res.binding_rank] / PSI, worlds[w] == 2 ? 12.035 : 11.942,
		                        5e-4); /* with the bucket, resident */
		engine_result_free(&res);
	}
	c = torch_config(ZS_FP32);
	struct zs_result res = run(&c, ZS_ZERO1, 3);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_BUCKETS], 4 * PSI);
	ck_assert_double_eq_tol((double)(res.resident[0] - 4 * PSI) / PSI, 11.961, 5e-4);
	engine_result_free(&res);
}
END_TEST

START_TEST(test_torch_zero1_sends_three_times_n_minus_one_over_n)
{
	struct zs_config c = torch_config(ZS_MIXED);
	const unsigned even[] = {2, 4, 8, 16, 32};
	for (size_t w = 0; w < 5; w++) {
		unsigned n = even[w];
		struct zs_result res = run(&c, ZS_ZERO1, n);
		unsigned long long e = 0;
		for (int kind = 0; kind < ZS_NCOLL; kind++)
			e += res.comm[0].elements[kind];
		ck_assert_uint_eq(e * n, 3ull * (n - 1) * PSI);
		ck_assert_uint_eq(res.comm[0].calls[ZS_BROADCAST], 4); /* one per tensor */
		engine_result_free(&res);
	}
}
END_TEST

/* Each tensor is stepped by its owner alone and broadcast: the weights are
 * dp's, bit for bit. */
START_TEST(test_torch_zero1_weights_are_dps_bit_for_bit)
{
	struct zs_config c = torch_config(ZS_MIXED);
	for (unsigned n = 2; n <= 5; n++) {
		struct zs_result a = run(&c, ZS_DP, n), b = run(&c, ZS_ZERO1, n);
		ck_assert_uint_eq(a.digest, b.digest);
		engine_result_free(&a);
		engine_result_free(&b);
	}
}
END_TEST

START_TEST(test_the_memory_bound_holds_torch_zero1)
{
	struct zs_config c = torch_config(ZS_MIXED);
	for (unsigned n = 1; n <= 5; n++) {
		struct zs_result res = run(&c, ZS_ZERO1, n);
		double all = 0;
		for (unsigned k = 0; k < n; k++)
			all += (double)res.peak[k];
		ck_assert(all <= engine_bytes_upper_bound(&c, ZS_ZERO1, n, ZS_UNIT_MODEL));
		engine_result_free(&res);
	}
}
END_TEST

START_TEST(test_theory_works_the_same_partition_from_the_shape)
{
	struct zs_config c = torch_config(ZS_MIXED);
	struct theory_shape s = {mlp, 3, 4, {0}};
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &s.bytes);
	for (size_t w = 0; w < NWORLDS; w++) {
		unsigned n = worlds[w];
		uint64_t *l = calloc(n, sizeof *l);
		theory_torch_partition(&s, n, l);
		for (unsigned k = 0; k < n; k++)
			ck_assert_uint_eq(l[k], load(n, k));
		free(l);
		struct theory_schedule sc;
		theory_schedule(&s, ZS_ZERO1, ZS_UNIT_MODEL, n, &sc);
		theory_framework_schedule(&s, &c, ZS_ZERO1, ZS_UNIT_MODEL, n, &sc);
		ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_BUCKETS], 2 * PSI);
		ck_assert_uint_eq(sc.resident_bytes - 2 * PSI, 4 * PSI + 12 * load(n, 0));
		ck_assert_double_eq_tol((double)(sc.resident_bytes - 2 * PSI) / PSI, n == 2 ? 10.035 : 9.942, 5e-4);
		ck_assert_double_eq(sc.padding_bytes, 0);
		/* floor 4Ψ + 12Ψ/N, the rest is the imbalance */
		ck_assert_double_eq_tol(sc.imbalance_bytes, 12.0 * (double)load(n, 0) - 12.0 * PSI / n, 1e-6);
		if (n != 3)
			ck_assert_uint_eq(sc.comm_elements * n, 3ull * (n - 1) * PSI);
	}
}
END_TEST

/* DDP's buckets as PyTorch 1.13 rebuilds them (above): the theory's, from
 * the shape; the engine's, through what it sends (one all-reduce per
 * bucket, 2(N-1)·ceil(n_b/N) elements) and holds (Ψ·g, at N = 1 too). */
START_TEST(test_ddp_buckets_are_pytorchs)
{
	for (size_t i = 0; i < NBUCKETCASES; i++) {
		enum zs_precision pr = torch_buckets[i].pr;
		unsigned g = pr == ZS_MIXED ? 2 : 4; /* bytes of a grad */
		struct theory_shape s = {torch_buckets[i].widths, torch_buckets[i].nwidths, 4, {0}};
		uint64_t n[2 * ZS_MAX_WIDTHS];
		theory_bytes_per_param(pr, ZS_ADAM, &s.bytes);
		size_t nb = theory_ddp_buckets(&s, torch_buckets[i].cap, n);
		ck_assert_uint_eq(nb, torch_buckets[i].nbuckets);
		for (size_t b = 0; b < nb; b++)
			ck_assert_uint_eq(g * n[b], torch_buckets[i].bytes[b]);

		struct zs_config c = torch_config(pr);
		c.nwidths = torch_buckets[i].nwidths;
		for (size_t l = 0; l < c.nwidths; l++)
			c.widths[l] = torch_buckets[i].widths[l];
		c.bucket_cap_mb = torch_buckets[i].cap;
		size_t psi = (size_t)zs_config_params(&c);
		for (unsigned w = 1; w <= 7; w += w < 3 ? 2 : 4) { /* 1, 3, 7 */
			struct zs_result res = run(&c, ZS_DP, w);
			unsigned long long e = 0;
			for (size_t b = 0; b < nb; b++)
				e += 2ull * (w - 1) * ((torch_buckets[i].bytes[b] / g + w - 1) / w);
			ck_assert_uint_eq(res.comm[0].calls[ZS_ALL_REDUCE], nb);
			ck_assert_uint_eq(res.comm[0].elements[ZS_ALL_REDUCE], e);
			ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_BUCKETS], g * psi);
			ck_assert_uint_eq(res.resident[0], 16 * psi + g * psi);
			engine_result_free(&res);
		}
	}
}
END_TEST

START_TEST(test_the_paper_holds_no_bucket)
{
	struct zs_config c = torch_config(ZS_MIXED);
	c.framework = ZS_FW_PAPER;
	struct zs_result res = run(&c, ZS_DP, 2);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_BUCKETS], 0);
	ck_assert_uint_eq(res.resident[0], 16 * PSI);
	engine_result_free(&res);
}
END_TEST

/* DeepSpeed's estimators worked by hand for 7.5e9 params on 64 GPUs
 * (the ZeRO paper's 7.5B model): zero2 2·7.5e9 + 18·7.5e9/64 = 15e9 +
 * 2,109,375,000; zero3 with a largest layer of 1e8: 4e8 + 2,109,375,000. */
START_TEST(test_deepspeed_estimates_the_7_5b_model_on_64_gpus)
{
	ck_assert_double_eq(theory_deepspeed_estimate(7.5e9, 0, ZS_ZERO2, 64), 17109375000.0);
	ck_assert_double_eq(theory_deepspeed_estimate(7.5e9, 1e8, ZS_ZERO3, 64), 2509375000.0);
	ck_assert_double_eq(theory_deepspeed_estimate(7.5e9, 0, ZS_ZERO3, 64), -1); /* needs L */
	ck_assert_double_eq(theory_deepspeed_estimate(7.5e9, 1e8, ZS_ZERO1, 64), -1);
	/* int() truncates: 18·33088/3 = 198528 exactly, 18·33088/5 = 119116.8 */
	ck_assert_double_eq(theory_deepspeed_estimate(PSI, 0, ZS_ZERO2, 5), 2.0 * PSI + 119116);
}
END_TEST

START_TEST(test_torch_zero3_is_5_334_bytes_per_param_at_three_ranks)
{
	struct zs_config c = torch_config(ZS_FP32);
	struct zs_result res = run_unit(&c, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	for (unsigned k = 0; k < 3; k++)
		ck_assert_uint_eq(res.resident[k], 16 * (5547 + 5483));
	ck_assert_double_eq_tol((double)res.resident[0] / PSI, 5.334, 5e-4);
	struct zs_result dp = run(&c, ZS_DP, 3);
	ck_assert_uint_eq(res.digest, dp.digest); /* the same arithmetic */
	engine_result_free(&dp);
	engine_result_free(&res);

	struct theory_shape s = {mlp, 3, 4, {0}};
	struct theory_schedule sc;
	theory_bytes_per_param(ZS_FP32, ZS_ADAM, &s.bytes);
	theory_schedule(&s, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	theory_framework_schedule(&s, &c, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.resident_bytes, 16 * (5547 + 5483));
}
END_TEST

START_TEST(test_torch_zero3_keeps_the_root_gathered_one_all_gather)
{
	struct zs_config c = torch_config(ZS_FP32);
	struct zs_result res = run(&c, ZS_ZERO3, 4);
	ck_assert_uint_eq(res.comm[0].calls[ZS_ALL_GATHER], 1);
	ck_assert_uint_eq(res.comm[0].calls[ZS_REDUCE_SCATTER], 1);
	unsigned long long e = 0;
	for (int kind = 0; kind < ZS_NCOLL; kind++)
		e += res.comm[0].elements[kind];
	ck_assert_uint_eq(e * 4, 2ull * 3 * PSI);
	engine_result_free(&res);
}
END_TEST

START_TEST(test_torch_zero2_holds_every_unit_gathered_into_backward)
{
	struct zs_config c = torch_config(ZS_FP32);
	struct zs_result res = run_unit(&c, ZS_ZERO2, 3, ZS_UNIT_LAYER);
	ck_assert_uint_eq(res.resident[0], 16 * (5547 + 5483));
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_GATHERED], 4 * 3 * 5547);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_FULL_GRADS], 4 * 16448);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_BUCKETS], 87728);
	ck_assert_uint_eq(res.comm[0].calls[ZS_ALL_GATHER], 2);
	ck_assert_uint_eq(res.comm[0].calls[ZS_REDUCE_SCATTER], 2);
	engine_result_free(&res);
}
END_TEST

START_TEST(test_torch_zero3_backward_pre_holds_two_units)
{
	struct zs_config c = torch_config(ZS_FP32);
	struct zs_result none = run_unit(&c, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	c.prefetch = ZS_PREFETCH_BACKWARD_PRE;
	struct zs_result pre = run_unit(&c, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	ck_assert_uint_eq(none.peak_breakdown[ZS_CAT_GATHERED], 0);
	ck_assert_uint_eq(none.peak_breakdown[ZS_CAT_FULL_GRADS], 4 * 16640);
	ck_assert_uint_eq(none.peak_breakdown[ZS_CAT_BUCKETS], 88752);
	ck_assert_uint_eq(pre.peak_breakdown[ZS_CAT_GATHERED], 4 * 3 * 5547);
	ck_assert_uint_eq(pre.peak_breakdown[ZS_CAT_FULL_GRADS], 4 * 16448);
	ck_assert_uint_eq(pre.peak_breakdown[ZS_CAT_BUCKETS], 87728);
	ck_assert_uint_eq(pre.peak[0] - none.peak[0], 220084 - 155312);
	ck_assert_uint_eq(pre.comm[0].calls[ZS_ALL_GATHER], 4);
	ck_assert_uint_eq(pre.comm[0].bytes[ZS_ALL_GATHER], none.comm[0].bytes[ZS_ALL_GATHER]);
	ck_assert_uint_eq(pre.digest, none.digest);
	engine_result_free(&none);
	engine_result_free(&pre);

	struct theory_shape s = {mlp, 3, 4, {0}};
	struct theory_schedule sc;
	theory_bytes_per_param(ZS_FP32, ZS_ADAM, &s.bytes);
	theory_schedule(&s, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	theory_framework_schedule(&s, &c, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_GATHERED], 4 * 3 * 5547);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_FULL_GRADS], 4 * 16448);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_BUCKETS], 87728);
}
END_TEST

START_TEST(test_torch_fsdp_mixed_precision_keeps_fp32_shards)
{
	struct zs_config c = torch_config(ZS_MIXED), paper = c;
	paper.framework = ZS_FW_PAPER;
	for (int s = ZS_ZERO2; s <= ZS_ZERO3; s++) {
		struct zs_result res = run_unit(&c, (enum zs_scheme)s, 3, ZS_UNIT_LAYER);
		struct zs_result ref = run_unit(&paper, ZS_ZERO3, 3, ZS_UNIT_LAYER);
		ck_assert_uint_eq(res.resident[0], 16 * (5547 + 5483));
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_PARAM32], 4 * (5547 + 5483));
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_GRAD32], 4 * (5547 + 5483));
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_ADAM_M], 4 * (5547 + 5483));
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_MASTER32], 0);
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_PARAM16], 0);
		if (s == ZS_ZERO3) {
			ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_GATHERED], 0);
			ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * 16640);
			ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_BUCKETS], 66564);
		}
		ck_assert_uint_eq(res.digest, ref.digest);
		engine_result_free(&res);
		engine_result_free(&ref);
	}
	struct zs_result one = run(&c, ZS_ZERO3, 1);
	ck_assert_uint_eq(one.resident[0], 16 * PSI);
	ck_assert_uint_eq(one.resident_breakdown[ZS_CAT_PARAM32], 4 * PSI);
	ck_assert_uint_eq(one.peak_breakdown[ZS_CAT_GATHERED], 2 * PSI);
	ck_assert_uint_eq(one.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * PSI);
	engine_result_free(&one);

	struct theory_shape sh = {mlp, 3, 4, {0}};
	struct theory_schedule sc;
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &sh.bytes);
	theory_schedule(&sh, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	theory_framework_schedule(&sh, &c, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.resident_bytes, 16 * (5547 + 5483));
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_PARAM32], 4 * (5547 + 5483));
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_MASTER32], 0);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_GATHERED], 0);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * 16640);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_BUCKETS], 66564);
}
END_TEST

/* The post-backward hook's peak above, from the tensor sizes: unit=layer
 * at N = 3, fp32. The peak is the first layer's hook: everything the
 * paper's zero3 holds at that layer's compute, but its 16640·4 B of
 * gathered params, plus 88752 B of buckets; resident bytes unchanged. */
START_TEST(test_torch_fsdp_post_backward_holds_the_padded_grads_and_the_output_shard)
{
	struct zs_config c = torch_config(ZS_FP32), paper = c;
	paper.framework = ZS_FW_PAPER;
	struct zs_result res = run_unit(&c, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	struct zs_result ref = run_unit(&paper, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	ck_assert_uint_eq(res.resident[0], ref.resident[0]);
	ck_assert_uint_eq(ref.peak_breakdown[ZS_CAT_GATHERED], 4 * 16640); /* the paper's peak: that compute */
	ck_assert_uint_eq(res.peak[0], ref.peak[0] - 4 * 16640 + (3 * 5547 + 5547) * 4);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_BUCKETS], 88752);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_BUCKETS], 0);
	ck_assert_uint_eq(res.digest, ref.digest);
	engine_result_free(&res);
	engine_result_free(&ref);

	struct theory_shape s = {mlp, 3, 4, {0}};
	struct theory_schedule sc, sp;
	theory_bytes_per_param(ZS_FP32, ZS_ADAM, &s.bytes);
	theory_schedule(&s, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sp);
	sc = sp;
	theory_framework_schedule(&s, &c, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.peak_bytes, sp.peak_bytes - 4 * 16640 + 88752);
	ck_assert_uint_eq(sc.peak_breakdown[ZS_CAT_BUCKETS], 88752);
	ck_assert_uint_eq(sc.resident_bytes, sp.resident_bytes);
}
END_TEST

/* Rank 0's buckets in the last step, in order, in mixed precision at
 * N = 3, unit=layer: what real PyTorch's allocator gave (above). */
START_TEST(test_torch_fsdp_allocates_pytorchs_buffers_in_its_order)
{
	static const size_t torch_bytes[] = {11094, 10966, 10966, 32898, 10966, 21932, 11094, 33282, 11094, 22188};
	struct zs_config c = torch_config(ZS_MIXED);
	struct zs_result res;
	struct zs_run_options opt = {.timeline = 1};
	char *cause = NULL;
	ck_assert_int_eq(engine_run(&c, ZS_ZERO3, 3, ZS_UNIT_LAYER, NULL, &opt, &res, &cause), 0);
	size_t n = 0;
	for (size_t i = 0; i < res.ntimeline; i++)
		if (res.timeline[i].cat == ZS_CAT_BUCKETS && res.timeline[i].op == ZS_OP_ALLOC) {
			ck_assert_uint_lt(n, sizeof torch_bytes / sizeof torch_bytes[0]);
			ck_assert_uint_eq(res.timeline[i].bytes, torch_bytes[n]);
			n++;
		}
	ck_assert_uint_eq(n, sizeof torch_bytes / sizeof torch_bytes[0]);
	engine_result_free(&res);
}
END_TEST

/* A one-layer model with unit=layer: the layer is an FSDP unit of its own
 * and the root owns no parameter, so FULL_SHARD gathers it again for
 * backward (two all-gathers), where unit=model keeps it (one). */
START_TEST(test_torch_zero3_one_layer_is_not_the_root_with_unit_layer)
{
	struct zs_config c = torch_config(ZS_FP32);
	c.nwidths = 2;
	c.widths[0] = 3;
	c.widths[1] = 1;
	struct zs_result layer = run_unit(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER), model = run(&c, ZS_ZERO3, 2);
	ck_assert_uint_eq(layer.comm[0].calls[ZS_ALL_GATHER], 2);
	ck_assert_uint_eq(model.comm[0].calls[ZS_ALL_GATHER], 1);
	engine_result_free(&layer);
	engine_result_free(&model);
}
END_TEST

static Suite *framework_suite(void)
{
	Suite *s = suite_create("framework");
	TCase *t = tcase_create("torch");
	tcase_add_test(t, test_torch_zero1_ranks_hold_their_whole_tensors_optimizer_state);
	tcase_add_test(t, test_torch_zero1_worst_rank_is_10_035_then_9_942_bytes_per_param);
	tcase_add_test(t, test_torch_zero1_sends_three_times_n_minus_one_over_n);
	tcase_add_test(t, test_torch_zero1_weights_are_dps_bit_for_bit);
	tcase_add_test(t, test_the_memory_bound_holds_torch_zero1);
	tcase_add_test(t, test_theory_works_the_same_partition_from_the_shape);
	tcase_add_test(t, test_torch_zero3_is_5_334_bytes_per_param_at_three_ranks);
	tcase_add_test(t, test_torch_zero3_keeps_the_root_gathered_one_all_gather);
	tcase_add_test(t, test_torch_zero2_holds_every_unit_gathered_into_backward);
	tcase_add_test(t, test_torch_zero3_backward_pre_holds_two_units);
	tcase_add_test(t, test_torch_fsdp_mixed_precision_keeps_fp32_shards);
	tcase_add_test(t, test_torch_zero3_one_layer_is_not_the_root_with_unit_layer);
	tcase_add_test(t, test_torch_fsdp_post_backward_holds_the_padded_grads_and_the_output_shard);
	tcase_add_test(t, test_torch_fsdp_allocates_pytorchs_buffers_in_its_order);
	tcase_add_test(t, test_ddp_buckets_are_pytorchs);
	tcase_add_test(t, test_the_paper_holds_no_bucket);
	suite_add_tcase(s, t);
	t = tcase_create("deepspeed");
	tcase_add_test(t, test_deepspeed_estimates_the_7_5b_model_on_64_gpus);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	SRunner *sr = srunner_create(framework_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
