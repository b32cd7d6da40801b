/*
 * test_deepspeed — DeepSpeed's ZeRO-1 and ZeRO-2 (--framework deepspeed),
 * engine and theory each against a hand computation, not each other.
 *
 * The default MLP 64,256,64: Ψ = 33088, layers of 16640 and 16448
 * elements; batch 4, so the activations are 4·4·(64 + 256 + 64 + 64) =
 * 7168 B and the two delta buffers 2·4·4·256 = 8192 B.
 *
 * What DeepSpeed holds (deepspeed/runtime/zero/stage_1_and_2.py): the fp16
 * params, full (2Ψ); per rank, the fp16 grad partition (2S), the fp32
 * partition of the weights (4S, a clone even in fp32 training) and Adam's
 * two states over it (8S). At N = 2 with unit=model, S = 16544:
 * 66176 + 14·16544 = 297792 B. backward() allocates the reduce bucket,
 * torch.empty(int(reduce_bucket_size)) of fp16: 5e8 elements, 1e9 bytes,
 * whatever the model (DeepSpeedExamples #336), two with overlap_comm.
 * ZeRO-1 keeps autograd's grads of the whole model until the reduction
 * (2Ψ = 66176 B); ZeRO-2 a unit's at a time (unit=layer: 2·16640 =
 * 33280 B). So the peak at N = 2 is 297792 + 7168 + 8192 + 1e9 + 66176 =
 * 1,000,379,328 B, and 1,000,346,432 B for ZeRO-2 with unit=layer.
 * In fp32 (4 + 4 bytes of params and grads, 4 + 8 of fp32 partition and
 * Adam): 4Ψ + 16S = 397056 B resident; the bucket is 2e9 bytes.
 * With a one-element bucket the peak moves to step(): the flat fp16 copy
 * of the grad partition (2S) and the fp32 gradient partition made from it
 * (4S) on top of the resident 297792: 397056 B.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "theory/theory.h"
#include "util/config.h"
#include "util/util.h"

#include "engine_ok.h"
#include "suite_run.h"

#define PSI 33088
#define RESIDENT_N2 297792u
#define TENSORS (7168u + 8192u)

static struct zs_config ds_config(enum zs_precision pr)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.steps = 1;
	c.framework = ZS_FW_DEEPSPEED;
	c.precision = pr;
	return c;
}

static struct zs_result run(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u)
{
	return engine_ok(c, s, n, u, 0);
}

static struct theory_schedule predict(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u)
{
	struct theory_shape sh = {c->widths, c->nwidths, c->batch, {0}};
	struct theory_schedule out;
	theory_bytes_per_param(c->precision, c->optimizer, &sh.bytes);
	theory_schedule(&sh, s, u, n, &out);
	theory_deepspeed_schedule(&sh, c, s, u, n, &out);
	return out;
}

START_TEST(test_the_bucket_is_1e9_bytes_whatever_the_model)
{
	struct zs_config c = ds_config(ZS_MIXED);
	const enum zs_scheme schemes[] = {ZS_ZERO1, ZS_ZERO2};
	for (int i = 0; i < 2; i++) {
		struct zs_result res = run(&c, schemes[i], 2, ZS_UNIT_MODEL);
		struct theory_schedule th = predict(&c, schemes[i], 2, ZS_UNIT_MODEL);
		ck_assert_uint_eq(res.resident[0], RESIDENT_N2);
		ck_assert_uint_eq(res.peak[0], RESIDENT_N2 + TENSORS + 1000000000u + 2 * PSI);
		ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_BUCKETS], 1000000000u); /* the bucket */
		ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * PSI); /* autograd's grads */
		ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_GRAD16], 2 * 16544);
		ck_assert_uint_eq(th.resident_bytes, RESIDENT_N2);
		ck_assert_uint_eq(th.peak_bytes, 1000379328u);
		engine_result_free(&res);
	}
	c.ds_overlap_comm = 1; /* two buckets */
	struct zs_result res = run(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(res.peak[1], 2000379328u);
	ck_assert_uint_eq(predict(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL).peak_bytes, 2000379328u);
	engine_result_free(&res);
}
END_TEST

START_TEST(test_zero2_holds_a_units_grads_zero1_the_models)
{
	struct zs_config c = ds_config(ZS_MIXED);
	struct zs_result z2 = run(&c, ZS_ZERO2, 2, ZS_UNIT_LAYER), z1 = run(&c, ZS_ZERO1, 2, ZS_UNIT_LAYER);
	ck_assert_uint_eq(z2.peak[0], 1000346432u);
	ck_assert_uint_eq(z1.peak[0], 1000379328u);
	ck_assert_uint_eq(predict(&c, ZS_ZERO2, 2, ZS_UNIT_LAYER).peak_bytes, 1000346432u);
	ck_assert_uint_eq(predict(&c, ZS_ZERO1, 2, ZS_UNIT_LAYER).peak_bytes, 1000379328u);
	/* one reduce-scatter and one all-gather per param group */
	ck_assert_uint_eq(z2.comm[0].calls[ZS_REDUCE_SCATTER], 2);
	ck_assert_uint_eq(z2.comm[0].calls[ZS_ALL_GATHER], 2);
	engine_result_free(&z2);
	engine_result_free(&z1);
}
END_TEST

START_TEST(test_fp32_keeps_an_fp32_partition_too)
{
	struct zs_config c = ds_config(ZS_FP32);
	struct zs_result res = run(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(res.resident[0], 397056u);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_MASTER32], 4 * 16544);
	ck_assert_uint_eq(res.peak[0], 397056u + TENSORS + 2000000000u + 4 * PSI);
	ck_assert_uint_eq(predict(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL).peak_bytes, 2000544768u);
	engine_result_free(&res);
}
END_TEST

START_TEST(test_a_small_bucket_moves_the_peak_to_the_step)
{
	struct zs_config c = ds_config(ZS_MIXED);
	c.ds_reduce_bucket = 1;
	struct zs_result res = run(&c, ZS_ZERO2, 2, ZS_UNIT_LAYER);
	ck_assert_uint_eq(res.peak[0], 397056u);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_GRAD32], 4 * 16544);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_GRAD16], 2 * 2 * 16544);
	ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_ACTIVATIONS], 0);
	struct theory_schedule th = predict(&c, ZS_ZERO2, 2, ZS_UNIT_LAYER);
	ck_assert_uint_eq(th.peak_bytes, 397056u);
	ck_assert_uint_eq(th.peak_breakdown[ZS_CAT_GRAD32], 4 * 16544);
	engine_result_free(&res);
}
END_TEST

/* The bucket's edges (reduce_independent_p_g_buckets_and_remove_grads,
 * stage_1_and_2.py 939-970): a grad is copied in if elements_in_ipg_bucket
 * + its numel fits reduce_bucket_size, else the bucket is reduced first;
 * a grad larger than the whole bucket is reduced from where it is. ZeRO-2
 * with unit=layer at N = 2 sees 16448 elements (the last layer) then 16640.
 * A bucket of 33088 holds both: no reduction until backward ends; 33087
 * holds one: a reduction mid-backward; 16639 is smaller than the first
 * layer's grads: reduced from where they are, after the bucket's. The
 * reductions are counted as rank 0's timeline shows them (a phase reduce
 * mid-backward, then the engine's own); the bucket ends at a guard page,
 * so a copy one element past it would fault, and the process has as many
 * mappings after the runs as before. */
static unsigned reductions(const struct zs_result *res)
{
	unsigned n = 0;
	for (size_t i = 0; i < res->ntimeline; i++)
		n += res->timeline[i].op == ZS_OP_PHASE && res->timeline[i].phase == ZS_PH_REDUCE;
	return n;
}

/* ASan's allocator maps regions of its own as a test goes on, so the count
 * is only compared without it. */
#if defined(__SANITIZE_ADDRESS__)
#define MAPS_STABLE 0
#else
#define MAPS_STABLE 1
#endif

/* The process's mappings (/proc/self/maps lines), or 0 where there is none. */
static unsigned mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned n = 0;
	for (int ch; f != NULL && (ch = getc(f)) != EOF;)
		n += ch == '\n';
	if (f != NULL)
		fclose(f);
	return n;
}

START_TEST(test_the_bucket_is_reduced_when_the_next_grad_would_not_fit)
{
	const double bucket[] = {33088, 33087, 16639, 16448};
	const unsigned expect[] = {1, 2, 2, 2};
	struct zs_config paper = ds_config(ZS_MIXED);
	paper.framework = ZS_FW_PAPER;
	struct zs_result p = run(&paper, ZS_ZERO2, 2, ZS_UNIT_LAYER);
	unsigned maps = mappings();
	for (int i = 0; i < 4; i++) {
		struct zs_config c = ds_config(ZS_MIXED);
		c.ds_reduce_bucket = bucket[i];
		struct zs_result res;
		struct zs_run_options opt = {.timeline = 1};
		char *cause = NULL;
		ck_assert_int_eq(engine_run(&c, ZS_ZERO2, 2, ZS_UNIT_LAYER, NULL, &opt, &res, &cause), 0);
		ck_assert_msg(reductions(&res) == expect[i], "bucket %.0f: %u reductions, not %u", bucket[i],
		              reductions(&res), expect[i]);
		ck_assert_uint_eq(res.digest, p.digest);
		engine_result_free(&res);
	}
	if (MAPS_STABLE)
		ck_assert_uint_eq(mappings(), maps); /* every bucket and its guard page unmapped */
	engine_result_free(&p);
}
END_TEST

/* The fp32 gradient partition is the reduced fp16 grads, exactly: the
 * weights are the paper's zero2's, bit for bit. */
START_TEST(test_weights_are_the_papers_bit_for_bit)
{
	for (int pr = 0; pr < 2; pr++) {
		struct zs_config c = ds_config(pr ? ZS_FP32 : ZS_MIXED), paper = c;
		paper.framework = ZS_FW_PAPER;
		c.ds_reduce_bucket = 20000; /* one unit of the two fits: a flush mid-backward */
		for (unsigned n = 1; n <= 3; n++) {
			struct zs_result a = run(&paper, ZS_ZERO2, n, ZS_UNIT_LAYER);
			struct zs_result b = run(&c, ZS_ZERO1, n, ZS_UNIT_LAYER), d = run(&c, ZS_ZERO2, n, ZS_UNIT_LAYER);
			ck_assert_uint_eq(a.digest, b.digest);
			ck_assert_uint_eq(a.digest, d.digest);
			engine_result_free(&a);
			engine_result_free(&b);
			engine_result_free(&d);
		}
	}
}
END_TEST

/* ZeRO-3 partitions every tensor on its own, ceil(n/N) elements a rank,
 * and keeps a tensor of at most param_persistence_threshold (1e5) elements
 * whole on every rank too: all four of the MLP's (the largest has 16384).
 * At N = 2: 2Ψ whole, 16544 shard elements of 2 + 2 + 4 + 8 bytes, and the
 * 1e9-byte bucket stage 3 allocates at set-up: 66176 + 264704 + 1e9. With
 * a threshold of 1000 only the biases (256 + 64) persist. */
START_TEST(test_zero3_persists_every_tensor_of_the_mlp)
{
	struct zs_config c = ds_config(ZS_MIXED);
	struct theory_shape sh = {c.widths, c.nwidths, c.batch, {0}};
	struct theory_deepspeed_z3 z;
	theory_bytes_per_param(c.precision, c.optimizer, &sh.bytes);
	theory_deepspeed_zero3(&sh, &c, 2, &z);
	ck_assert_uint_eq(z.persistent_tensors, 4);
	ck_assert_uint_eq(z.partitioned_params, 0);
	ck_assert_uint_eq(z.resident_bytes, 1000330880u);
	c.ds_persist = 1000;
	theory_deepspeed_zero3(&sh, &c, 2, &z);
	ck_assert_uint_eq(z.persistent_params, 320);
	ck_assert_uint_eq(z.shard_elements, 8192 + 128 + 8192 + 32);
	ck_assert_uint_eq(z.resident_bytes, 640u + 16u * 16544 + 1000000000u);
	c.ds_persist = 0; /* nothing persists */
	theory_deepspeed_zero3(&sh, &c, 3, &z);
	ck_assert_uint_eq(z.persistent_tensors, 0);
	ck_assert_uint_eq(z.shard_elements, 5462 + 86 + 5462 + 22);
}
END_TEST

/* ZeRO-3's parameter coordinator on the default MLP (tensors W0 16384,
 * b0 256, W1 16384, b1 64; modules 16640 and 16448 with unit=layer),
 * worked by hand from partitioned_param_coordinator.py. Step 1 records the
 * trace and releases each module after it runs: at most the larger module
 * is whole. From step 2, with nothing persistent: the first fetch gathers
 * module 0 (16640) and prefetches from the queue while fewer than
 * min(max_live - 16640, bucket) elements are prefetched: all of module 1
 * with the defaults (33088); only W1 with a 100-element bucket or with
 * max_live 20000 (room 3360: W1 overshoots it), 33024; nothing with
 * max_live 0, 16640. Whatever max_live, the reuse distance keeps module 0
 * from its forward into its backward, so all 33088 are whole when backward
 * starts (DeepSpeed #2864). With a threshold of 1000 the biases (320) are
 * whole from step 2 on: 16384 + 320 after the first fetch with max_live 0. */
START_TEST(test_max_live_bounds_only_the_prefetch)
{
	struct zs_config c = ds_config(ZS_MIXED);
	struct theory_shape sh = {c.widths, c.nwidths, c.batch, {0}};
	struct theory_deepspeed_live lv;
	theory_bytes_per_param(c.precision, c.optimizer, &sh.bytes);
	c.ds_persist = 0;
	theory_deepspeed_live(&sh, &c, ZS_UNIT_LAYER, &lv);
	ck_assert_uint_eq(lv.first_step, 16640);
	ck_assert_uint_eq(lv.first_fetch, PSI);
	ck_assert_uint_eq(lv.at_backward, PSI);
	ck_assert_uint_eq(lv.peak, PSI);
	const struct { double bucket, max_live, first_fetch; } cases[] = {
		{100, 1e9, 16640 + 16384}, {5e7, 20000, 16640 + 16384}, {5e7, 0, 16640}, {0, 1e9, 16640},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		c.ds_prefetch_bucket = cases[i].bucket;
		c.ds_max_live = cases[i].max_live;
		theory_deepspeed_live(&sh, &c, ZS_UNIT_LAYER, &lv);
		ck_assert_msg(lv.first_fetch == (uint64_t)cases[i].first_fetch && lv.at_backward == PSI && lv.peak == PSI,
		              "bucket %g max_live %g: %llu after the first fetch, %llu at backward", cases[i].bucket,
		              cases[i].max_live, (unsigned long long)lv.first_fetch, (unsigned long long)lv.at_backward);
		ck_assert_uint_eq(lv.first_step, 16640);
	}
	c.ds_persist = 1000;
	c.ds_max_live = 0;
	theory_deepspeed_live(&sh, &c, ZS_UNIT_LAYER, &lv);
	ck_assert_uint_eq(lv.first_fetch, 16384 + 320);
	ck_assert_uint_eq(lv.at_backward, PSI);
	/* unit=model: one module, gathered whole in step 1 too. */
	theory_deepspeed_live(&sh, &c, ZS_UNIT_MODEL, &lv);
	ck_assert_uint_eq(lv.first_step, PSI);
	ck_assert_uint_eq(lv.first_fetch, PSI);
}
END_TEST

/* The engine's DeepSpeed ZeRO-3 on the default MLP, N = 2, mixed, steps
 * 2, worked by hand. Between steps: every tensor persists (1e5), so 2Ψ
 * whole (66176), 16 bytes for each of the 16544 shard elements (264704)
 * and the 1e9-byte bucket: 1,000,330,880. With unit=layer the peak is the
 * epilogue's reduction: R without the persistent params (1,000,264,704),
 * the persistent params whole (66176) and reduce_scatter_coalesced's flat
 * copy of the bucket's four grads padded (2·16544 elements, 66176 B):
 * 1,000,397,056; with unit=model the one module's backward, 66176 whole,
 * the activations and deltas (7168 + 8192) and the model's grads (66176):
 * 1,000,412,416. With nothing persistent (--ds-persist 0) and unit=layer,
 * the first backward module holds the whole model gathered (the reuse
 * distance kept it from forward), the deltas and its grads (32896):
 * 1,000,264,704 + 66176 + 15360 + 32896 = 1,000,379,136, whatever
 * --ds-max-live (DeepSpeed #2864). */
START_TEST(test_the_engine_runs_zero3)
{
	struct zs_config c = ds_config(ZS_MIXED);
	c.steps = 2;
	struct zs_result l = run(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER), m = run(&c, ZS_ZERO3, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(l.resident[1], 1000330880u);
	ck_assert_uint_eq(m.resident[0], 1000330880u);
	ck_assert_uint_eq(l.peak[0], 1000397056u);
	ck_assert_uint_eq(m.peak[1], 1000412416u);
	ck_assert_uint_eq(l.peak_breakdown[ZS_CAT_GATHERED], 66176);
	engine_result_free(&l);
	engine_result_free(&m);
	c.ds_persist = 0;
	const double max_live[] = {1e9, 0, 20000};
	for (size_t i = 0; i < 3; i++) {
		c.ds_max_live = max_live[i];
		struct zs_result r = run(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
		ck_assert_msg(r.peak[0] == 1000379136u, "max_live %g: peak %zu", max_live[i], r.peak[0]);
		ck_assert_uint_eq(r.resident[0], 1000264704u);
		engine_result_free(&r);
	}
}
END_TEST

/* Every tensor partitioned on its own, gathered module by module, its
 * grads reduced through the bucket (a flush mid-backward with a bucket of
 * 16448): the weights are the paper's, bit for bit, one digest per N. */
START_TEST(test_zero3_weights_are_the_papers)
{
	for (int pr = 0; pr < 2; pr++)
		for (unsigned n = 1; n <= 8; n++) {
			struct zs_config c = ds_config(pr ? ZS_FP32 : ZS_MIXED), paper = c;
			paper.framework = ZS_FW_PAPER;
			c.steps = paper.steps = 2;
			struct zs_result a = run(&paper, ZS_DP, n, ZS_UNIT_MODEL), z = run(&paper, ZS_ZERO3, n, ZS_UNIT_LAYER);
			ck_assert_uint_eq(a.digest, z.digest);
			for (int i = 0; i < 4; i++) {
				c.ds_persist = i & 1 ? 1000 : 0;
				c.ds_reduce_bucket = i & 2 ? 16448 : 5e8;
				struct zs_result d = run(&c, ZS_ZERO3, n, i < 2 ? ZS_UNIT_LAYER : ZS_UNIT_MODEL);
				ck_assert_msg(d.digest == a.digest, "%s N=%u case %d: not the paper's weights",
				              pr ? "fp32" : "mixed", n, i);
				engine_result_free(&d);
			}
			engine_result_free(&a);
			engine_result_free(&z);
		}
}
END_TEST

/* DeepSpeed's estimators with offload, for the ZeRO paper's 7.5B model on
 * 64 GPUs, 8 a node (8 nodes), L = 1e8, worked from stage_1_and_2.py
 * 2438-2440 and stage3.py 3021-3036 with additional_buffer_factor 1.5:
 * zero2 offloaded: 2Ψ = 15e9 a GPU, Ψ·max(4·64, 16)·1.5 = 2.88e12 a node;
 * zero3 params offloaded: 4L = 4e8, Ψ·18/8·1.5 = 25,312,500,000;
 * zero3 optimizer offloaded: 4L + int(2Ψ/64) = 634,375,000,
 * Ψ·16/8·1.5 = 22,500,000,000; zero2 without: Ψ·4·8·1.5 = 3.6e11. */
START_TEST(test_the_estimators_offload_rows)
{
	double host;
	ck_assert_double_eq(theory_deepspeed_estimator(7.5e9, 1e8, ZS_ZERO2, 64, 8, ZS_OFFLOAD_OPTIMIZER, &host), 15e9);
	ck_assert_double_eq(host, 2.88e12);
	ck_assert_double_eq(theory_deepspeed_estimator(7.5e9, 1e8, ZS_ZERO3, 64, 8, ZS_OFFLOAD_PARAMS, &host), 4e8);
	ck_assert_double_eq(host, 25312500000.0);
	ck_assert_double_eq(theory_deepspeed_estimator(7.5e9, 1e8, ZS_ZERO3, 64, 8, ZS_OFFLOAD_OPTIMIZER, &host),
	                    634375000.0);
	ck_assert_double_eq(host, 22500000000.0);
	ck_assert_double_eq(theory_deepspeed_estimator(7.5e9, 1e8, ZS_ZERO2, 64, 8, ZS_OFFLOAD_NONE, &host),
	                    17109375000.0);
	ck_assert_double_eq(host, 3.6e11);
}
END_TEST

/* Offloading the optimizer (ZeRO-Offload, stage_1_and_2.py): the fp32
 * partition, its fp32 grad partition and Adam's states move to the host
 * (16 bytes a shard element), beside a host and a device buffer of the
 * largest tensor's grads (temp_grad_buffer_for_cpu/gpu_offload, 16384·2).
 * Default MLP, N = 2, mixed: device 2Ψ + 32768 = 98944, host
 * 16·16544 + 32768 = 297472; two ranks a node: 594944 host bytes, and at
 * start-up each loads the fp32 model: 2·4Ψ = 264704. */
START_TEST(test_offloading_the_optimizer_moves_16_bytes_a_shard_element)
{
	struct zs_config c = ds_config(ZS_MIXED);
	c.offload = ZS_OFFLOAD_OPTIMIZER;
	c.ranks_per_node = 2;
	struct theory_shape sh = {c.widths, c.nwidths, c.batch, {0}};
	struct theory_deepspeed_mem m;
	theory_bytes_per_param(c.precision, c.optimizer, &sh.bytes);
	theory_deepspeed_memory(&sh, &c, ZS_ZERO2, ZS_UNIT_MODEL, 2, &m);
	ck_assert_uint_eq(m.device_bytes, 98944);
	ck_assert_uint_eq(m.host_bytes, 297472);
	ck_assert_uint_eq(m.host_bytes_per_node, 594944);
	ck_assert_uint_eq(m.startup_host_bytes_per_node, 264704);
	c.offload = ZS_OFFLOAD_NONE; /* all on the device: the measured resident */
	theory_deepspeed_memory(&sh, &c, ZS_ZERO2, ZS_UNIT_MODEL, 2, &m);
	ck_assert_uint_eq(m.device_bytes, RESIDENT_N2);
	ck_assert_uint_eq(m.host_bytes, 0);
	/* ZeRO-3 with the params offloaded: every tensor persists, whole on
	 * the device, beside the bucket; every partition moves to the host
	 * flat buffer, persistent ones too (stage3.py 741-769), with the grad
	 * partitions, the fp32 partition, its fp32 grad and Adam's states:
	 * 2 + 2 + 4 + 4 + 8 = 20 bytes a shard element. */
	c.offload = ZS_OFFLOAD_PARAMS;
	theory_deepspeed_memory(&sh, &c, ZS_ZERO3, ZS_UNIT_LAYER, 2, &m);
	ck_assert_uint_eq(m.device_bytes, 2 * PSI + 1000000000u);
	ck_assert_uint_eq(m.host_bytes, 20 * 16544);
	c.offload = ZS_OFFLOAD_OPTIMIZER; /* the fp16 partitions stay: 2 bytes a shard element back */
	theory_deepspeed_memory(&sh, &c, ZS_ZERO3, ZS_UNIT_LAYER, 2, &m);
	ck_assert_uint_eq(m.device_bytes, 2 * PSI + 2 * 16544 + 1000000000u);
	ck_assert_uint_eq(m.host_bytes, 18 * 16544);
}
END_TEST

/* The engine with the optimizer offloaded, the same figures measured: on
 * the device 2Ψ + 32768 between steps, and at the peak the activations,
 * the bucket and the model's grads on top (1,000,180,480 B); on the host
 * 297472 B; the weights are still the paper's. */
START_TEST(test_the_engine_keeps_host_bytes_apart)
{
	struct zs_config c = ds_config(ZS_MIXED), paper = ds_config(ZS_MIXED);
	c.offload = ZS_OFFLOAD_OPTIMIZER;
	paper.framework = ZS_FW_PAPER;
	struct zs_result res = run(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL), p = run(&paper, ZS_ZERO2, 2, ZS_UNIT_MODEL);
	ck_assert_uint_eq(res.resident[1], 98944);
	ck_assert_uint_eq(res.peak[1], 98944u + TENSORS + 1000000000u + 2 * PSI);
	ck_assert_ptr_nonnull(res.host_resident);
	ck_assert_uint_eq(res.host_resident[1], 297472);
	ck_assert_uint_eq(res.host_peak[0], 297472);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_MASTER32], 0);
	ck_assert_uint_eq(res.digest, p.digest);
	engine_result_free(&res);
	engine_result_free(&p);
}
END_TEST

/* ZeRO-3 with the optimizer offloaded (stage3.py, self.device cpu): on the
 * host per shard element (S = 8192 + 128 + 8192 + 32 = 16544 at N = 2) the
 * fp16 grad partition (2), the fp32 partition (4), its fp32 grad, kept
 * (4), Adam's states (8): 18·16544 = 297792 B, and at the step the
 * overflow check over the host fp16 grad partition (stage3.py 2208-2213:
 * an fp16 abs and a bool, 3·16544, above the fp16 copy torch makes on the
 * host on the way to the device, 2·16544): 347424 B; two ranks a node
 * 595584. On the device the persistent params
 * whole (every tensor persists by default: 2Ψ = 66176), the fp16
 * partitions (2·16544) and the bucket (1e9): 1,000,099,264 B. The peak is
 * the epilogue's reduction of the whole bucket, the model whole:
 * reduce_scatter_coalesced's flat copy of 2·16544 fp16 elements (no tensor
 * needs padding at N = 2), 66176 B more: 1,000,165,440 B. The weights are
 * the paper's, N = 1..8, both precisions. */
START_TEST(test_zero3_offloads_the_optimizer)
{
	struct zs_config c = ds_config(ZS_MIXED);
	c.steps = 2;
	c.offload = ZS_OFFLOAD_OPTIMIZER;
	c.ranks_per_node = 2;
	struct zs_result res = run(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
	struct theory_schedule th = predict(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
	ck_assert_uint_eq(res.resident[1], 1000099264u);
	ck_assert_uint_eq(res.peak[0], 1000165440u);
	ck_assert_uint_eq(res.host_resident[1], 297792);
	ck_assert_uint_eq(res.host_peak[0], 347424);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_MASTER32], 0);
	ck_assert_uint_eq(th.host_resident_bytes_per_node, 2 * 297792);
	ck_assert_uint_eq(th.host_peak_bytes, 347424);
	ck_assert_uint_eq(th.peak_bytes, 1000165440u);
	engine_result_free(&res);
	for (int pr = 0; pr < 2; pr++)
		for (unsigned n = 1; n <= 8; n++) {
			struct zs_config o = ds_config(pr ? ZS_FP32 : ZS_MIXED), paper = o;
			paper.framework = ZS_FW_PAPER;
			o.steps = paper.steps = 2;
			o.ds_persist = 0;
			struct zs_result a = run(&paper, ZS_DP, n, ZS_UNIT_MODEL);
			for (int off = ZS_OFFLOAD_OPTIMIZER; off <= ZS_OFFLOAD_PARAMS; off++) {
				o.offload = (enum zs_offload)off;
				struct zs_result d = run(&o, ZS_ZERO3, n, off == ZS_OFFLOAD_PARAMS ? ZS_UNIT_MODEL : ZS_UNIT_LAYER);
				ck_assert_msg(d.digest == a.digest, "%s N=%u offload %d: not the paper's weights",
				              pr ? "fp32" : "mixed", n, off);
				engine_result_free(&d);
			}
			engine_result_free(&a);
		}
}
END_TEST

/* ZeRO-3 with the params offloaded too (ZeRO-Infinity's CPU tier), nothing
 * persistent: every partition on the host, 2 + 18 bytes a shard element,
 * 20·16544 = 330880 B (no step copy: host to host converts in place; at
 * the step the overflow check's 3·16544 on the host: 380512 B); the
 * device holds the bucket alone between steps, 1e9 B. The peak is the
 * last module's backward in step 2 with the whole model whole (the reuse
 * distance keeps it from forward): 1e9 + 2Ψ + its grads 2·16448 + the
 * activations and deltas 7168 + 8192 = 1,000,114,432 B. */
START_TEST(test_zero3_offloads_the_params)
{
	struct zs_config c = ds_config(ZS_MIXED);
	c.steps = 2;
	c.offload = ZS_OFFLOAD_PARAMS;
	c.ds_persist = 0;
	struct zs_result res = run(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
	ck_assert_uint_eq(res.resident[0], 1000000000u);
	ck_assert_uint_eq(res.peak[1], 1000000000u + 2 * PSI + 2 * 16448 + TENSORS);
	ck_assert_uint_eq(res.host_resident[0], 330880);
	ck_assert_uint_eq(res.host_peak[1], 380512);
	ck_assert_uint_eq(res.resident_breakdown[ZS_CAT_PARAM16], 0);
	engine_result_free(&res);
}
END_TEST

/* A grad larger than the bucket (stage3.py 1266-1290: the bucket is
 * reduced first when it is not empty, a grad that does not fit is not
 * copied, and the next grad reduces it): MLP 64,1,20 (tensors 64, 1, 20,
 * 20; Ψ = 105), a bucket of 10, N = 1, unit=layer, nothing persistent.
 * Resident 16·105 + 2·10 = 1700 B. In step 2 the last layer's weight and
 * bias are each reduced alone; its bias is still in its own grad when the
 * first layer's backward runs: 1700 + its grads 2·65 + the bias's grad
 * 2·20 + the activations 4·4·(64 + 1 + 20 + 20) = 1680 + the deltas
 * 2·4·4·20 = 640: 4190 B, not 4180 (the last layer's point); at N = 1
 * its params are views of their partitions, no bytes (docs/schedule.md,
 * ZeRO-3's gathered blocks).
 * At N = 2 (S = 32 + 1 + 10 + 10 = 53): 868 and 3488 B. The weights are
 * the paper's. */
START_TEST(test_an_oversized_grad_stays_in_autograds_grad)
{
	static const size_t widths[] = {64, 1, 20};
	for (unsigned n = 1; n <= 5; n++) {
		struct zs_config c = ds_config(ZS_MIXED), paper;
		memcpy(c.widths, widths, sizeof widths);
		c.nwidths = 3;
		c.steps = 2;
		c.ds_persist = 0;
		c.ds_reduce_bucket = 10;
		paper = c;
		paper.framework = ZS_FW_PAPER;
		struct zs_result res = run(&c, ZS_ZERO3, n, ZS_UNIT_LAYER), a = run(&paper, ZS_DP, n, ZS_UNIT_MODEL);
		if (n == 1) {
			ck_assert_uint_eq(res.resident[0], 1700);
			ck_assert_uint_eq(res.peak[0], 4190);
			ck_assert_uint_eq(res.peak_breakdown[ZS_CAT_FULL_GRADS], 2 * 65 + 2 * 20);
		}
		if (n == 2) {
			ck_assert_uint_eq(res.resident[1], 868);
			ck_assert_uint_eq(res.peak[1], 3488);
		}
		ck_assert_msg(res.digest == a.digest, "N=%u: not the paper's weights", n);
		engine_result_free(&res);
		engine_result_free(&a);
	}
}
END_TEST

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	Suite *s = suite_create("deepspeed");
	TCase *t = tcase_create("zero12");
	tcase_add_test(t, test_the_bucket_is_1e9_bytes_whatever_the_model);
	tcase_add_test(t, test_zero2_holds_a_units_grads_zero1_the_models);
	tcase_add_test(t, test_fp32_keeps_an_fp32_partition_too);
	tcase_add_test(t, test_a_small_bucket_moves_the_peak_to_the_step);
	tcase_add_test(t, test_the_bucket_is_reduced_when_the_next_grad_would_not_fit);
	tcase_add_test(t, test_weights_are_the_papers_bit_for_bit);
	tcase_add_test(t, test_zero3_persists_every_tensor_of_the_mlp);
	tcase_add_test(t, test_max_live_bounds_only_the_prefetch);
	tcase_add_test(t, test_the_engine_runs_zero3);
	tcase_add_test(t, test_zero3_weights_are_the_papers);
	tcase_add_test(t, test_the_estimators_offload_rows);
	tcase_add_test(t, test_offloading_the_optimizer_moves_16_bytes_a_shard_element);
	tcase_add_test(t, test_the_engine_keeps_host_bytes_apart);
	tcase_add_test(t, test_zero3_offloads_the_optimizer);
	tcase_add_test(t, test_zero3_offloads_the_params);
	tcase_add_test(t, test_an_oversized_grad_stays_in_autograds_grad);
	suite_add_tcase(s, t);
	return suite_run(s);
}
