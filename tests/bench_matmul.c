/*
 * bench_matmul — the benchmark behind the transformer's choice of matrix
 * product (`make bench`; a benchmark, never a test). For the forward
 * product out (M, N) = in (M, K) · W (N, K)ᵀ on the shapes of GPT-2 small
 * at 256 tokens and of the tiny test models, it times the project's own
 * register-blocked fp32 kernel (mlp_kernels.h's linear_forward_f32, the
 * MLP's) against OpenBLAS's sgemm on one thread, side by side, and prints
 * the median GFLOP/s of each and their ratio.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/mlp.h"
#include "engine/tfm_kernels.h"
#include "bench_time.h"

enum { RUNS = 7 };

int main(void)
{
	static const struct { const char *what; size_t M, K, N; } shapes[] = {
		{"gpt2 qkv", 256, 768, 2304},   {"gpt2 attn proj", 256, 768, 768}, {"gpt2 fc", 256, 768, 3072},
		{"gpt2 fc proj", 256, 3072, 768}, {"gpt2 head", 256, 768, 50257},   {"tiny qkv", 64, 64, 192},
		{"tiny fc", 64, 64, 256},         {"tiny fc proj", 64, 256, 64},    {"tiny head", 64, 64, 256},
	};
	tfm_blas_init();
	printf("%-16s %6s %6s %6s  %10s %10s  %s\n", "shape", "M", "K", "N", "own GF/s", "BLAS GF/s", "BLAS/own");
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		size_t M = shapes[s].M, K = shapes[s].K, N = shapes[s].N;
		float *in = malloc(M * K * sizeof *in), *w = malloc(N * K * sizeof *w);
		float *out = malloc(M * N * sizeof *out), *bias = calloc(N, sizeof *bias);
		if (in == NULL || w == NULL || out == NULL || bias == NULL)
			return 1;
		for (size_t i = 0; i < M * K; i++)
			in[i] = (float)(i % 97) / 97.0f - 0.5f;
		for (size_t i = 0; i < N * K; i++)
			w[i] = (float)(i % 89) / 89.0f - 0.5f;
		double flop = 2.0 * (double)M * (double)N * (double)K, own[RUNS], blas[RUNS];
		int reps = flop > 1e9 ? 1 : (int)(1e9 / flop);
		for (int r = 0; r < RUNS; r++) { /* alternate, so both see the same machine */
			double t0 = bench_now();
			for (int k = 0; k < reps; k++)
				linear_forward_f32(out, in, w, bias, 0, M, K, N);
			double t1 = bench_now();
			for (int k = 0; k < reps; k++)
				matmul_forward(out, in, w, bias, M, K, N);
			double t2 = bench_now();
			own[r] = flop * reps / (t1 - t0) / 1e9;
			blas[r] = flop * reps / (t2 - t1) / 1e9;
		}
		double o = bench_median(own, RUNS), b = bench_median(blas, RUNS);
		printf("%-16s %6zu %6zu %6zu  %10.1f %10.1f  %.2fx\n", shapes[s].what, M, K, N, o, b, b / o);
		free(in), free(w), free(out), free(bias);
	}
	return 0;
}
