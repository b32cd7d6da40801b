/*
 * bench_tfm — one training step of GPT-2 small (124M, tied head, vocabulary
 * 50257) at seq 256, micro-batch 1, fp32, on one thread: forward,
 * backward and Adam, as `make bench` runs it beside PyTorch's own step of
 * the same model (tests/bench_tfm_torch.py). A benchmark, never a test:
 * it prints the median of STEPS steps after one warm-up step.
 *
 *   tests/bench_tfm [STEPS]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/optim.h"
#include "engine/tfm.h"
#include "util/util.h"
#include "bench_time.h"

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 3;
	if (steps < 1 || steps > 100) {
		fprintf(stderr, "usage: bench_tfm [STEPS (1..100)]\n");
		return 2;
	}
	const size_t B = 1, T = 256;
	struct tfm_dims d = {TFM_GPT2, 768, 12, 12, 12, 64, 3072, 50257, 1024, 1, 1e-5f, 0.0f};
	struct tfm_model m;
	tfm_model_init(&m, &d, B, T, TFM_RECOMPUTE_NONE);
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
	free(t), free(in), free(target), free(mo), free(v);
	tfm_task_free(&task);
	tfm_model_free(&m);
	return 0;
}
