/*
 * bench_tfm — one training step of GPT-2 small (124M, tied head, vocabulary
 * 50257) at seq 256, micro-batch 1, fp32, on one thread: forward,
 * backward and Adam, as `make bench` runs it beside PyTorch's own step of
 * the same model (tests/bench_tfm_torch.py). A benchmark, never a test:
 * it prints the median of STEPS steps after one warm-up step.
 *
 * Then one rank-step of the engine (`measure --model gpt2 --seq 256
 * --batch 1 --world 1`, dp: every tensor tracked, the layer list's
 * conversions) in fp32 and in mixed precision, side by side: a run of one
 * step and a run of two, STEPS times each, alternated; the rank-step is
 * the difference of their medians (the set-up, the same in both runs,
 * cancels).
 *
 *   tests/bench_tfm [STEPS]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "util/util.h"
#include "bench_time.h"
#include "tfm_model.h"

/* The process's CPU seconds: on a shared machine a one-thread run's CPU
 * time moves less than its wall time. */
static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wall seconds of one engine run of `steps` steps of gpt2 (dims d) at
 * precision p; its CPU seconds in *cpu. */
static double engine_seconds(const struct tfm_dims *d, enum zs_precision p, unsigned steps, double *cpu)
{
	struct zs_tfm_run tr = {.dims = *d, .seq = 256, .recompute = ZS_RECOMPUTE_NONE};
	struct zs_config c;
	zs_config_defaults(&c);
	c.tfm = &tr;
	c.precision = p;
	c.batch = 1;
	c.steps = steps;
	c.seed = 1;
	struct zs_run_options opt = {0};
	struct zs_result res;
	char *cause = NULL;
	double t0 = bench_now(), c0 = cpu_now();
	if (engine_run(&c, ZS_DP, 1, ZS_UNIT_LAYER, NULL, &opt, &res, &cause) != 0) {
		fprintf(stderr, "bench_tfm: %s\n", cause ? cause : "the engine failed");
		exit(1);
	}
	double t = bench_now() - t0;
	*cpu = cpu_now() - c0;
	engine_result_free(&res);
	return t;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 3;
	if (steps < 1 || steps > 100) {
		fprintf(stderr, "usage: bench_tfm [STEPS (1..100)]\n");
		return 2;
	}
	const size_t B = 1, T = 256;
	struct tfm_dims d = {TFM_GPT2, 768, 12, 12, 12, 64, 3072, 50257, 1024, 1, 1e-5f, 0.0f, 0};
	struct tfm_model m;
	tfm_model_init(&m, &d, B, T, ZS_RECOMPUTE_NONE);
	tfm_init_weights(m.params, &d, 1);
	float *mo = zs_calloc(m.nparams, sizeof *mo), *v = zs_calloc(m.nparams, sizeof *v);
	struct optim o;
	optim_init(&o, ZS_ADAM, 1e-3);
	struct tfm_task task;
	tfm_task_init(&task, d.vocab, 1);
	int *in = zs_malloc(B * T * sizeof *in), *target = zs_malloc(B * T * sizeof *target);
	double *t = zs_malloc((size_t)steps * sizeof *t);
	float loss = 0.0f;
	for (int s = 0; s <= steps; s++) {
		tfm_task_batch(in, target, &task, 1, (uint64_t)s, 0, B, T);
		double t0 = bench_now();
		loss = tfm_model_step(&m, in, target);
		optim_update(&o, (unsigned)s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
		if (s > 0)
			t[s - 1] = bench_now() - t0;
	}
	printf("zerosim gpt2 (%zu params) fp32 seq %zu batch %zu: median %.3f s per step over %d (loss %.3f)\n",
	       m.nparams, T, B, bench_median(t, (size_t)steps), steps, (double)loss);
	free(in), free(target), free(mo), free(v);
	tfm_task_free(&task);
	tfm_model_free(&m);

	/* wall and CPU seconds of the 1-step and the 2-step runs */
	double *w1 = zs_malloc((size_t)steps * sizeof *w1), *w2 = zs_malloc((size_t)steps * sizeof *w2);
	double *c1 = zs_malloc((size_t)steps * sizeof *c1), *c2 = zs_malloc((size_t)steps * sizeof *c2);
	double wall[2], cpu[2], unused;
	static const enum zs_precision prec[2] = {ZS_FP32, ZS_MIXED};
	(void)engine_seconds(&d, ZS_MIXED, 1, &unused); /* once, not counted: the first touch of the pages */
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < steps; i++) {
			w1[i] = engine_seconds(&d, prec[k], 1, &c1[i]);
			w2[i] = engine_seconds(&d, prec[k], 2, &c2[i]);
		}
		wall[k] = bench_median(w2, (size_t)steps) - bench_median(w1, (size_t)steps);
		cpu[k] = bench_median(c2, (size_t)steps) - bench_median(c1, (size_t)steps);
		printf("zerosim engine gpt2 rank-step %s seq %zu batch %zu (dp, N=1): %.3f s wall, %.3f s CPU (median "
		       "2-step run - median 1-step run, %d each)\n",
		       zs_precision_name(prec[k]), T, B, wall[k], cpu[k], steps);
	}
	printf("zerosim engine gpt2 rank-step mixed / fp32: %.2f wall, %.2f CPU\n", wall[1] / wall[0], cpu[1] / cpu[0]);
	free(w1), free(w2), free(c1), free(c2), free(t);
	return 0;
}
