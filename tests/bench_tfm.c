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
 * cancels). Its user time is printed apart: the system time of a run is
 * mostly the kernel clearing the ~2 GB the run faults in, which swings by
 * seconds from run to run with the huge pages, so the difference of the
 * CPU times can be mostly that swing; the difference of the user times is
 * the step's own work, held against the replay's user time below (one
 * clock on both sides of the ratio: CPU against CPU, user against user).
 *
 * And the ceiling the step is held against: OpenBLAS's own single-thread
 * sgemm rate on the step's own products. This program defines
 * cblas_sgemm itself, so the engine's calls (tfm_kernels.c, through
 * blas.c's lock) come here: it records each call's shape, transposes,
 * leading dimensions, alpha and beta during one step and adds up the time
 * spent in OpenBLAS's sgemm (its Fortran entry, sgemm_) during the timed
 * steps; then it replays the recorded calls alone, on buffers of the same
 * sizes, and prints their FLOP, OpenBLAS's rate on them, and the whole
 * step's rate (the same FLOP over the whole step's time) as a fraction
 * of it. The step's other work (attention's softmax, the norms, GELU, the
 * cross-entropy, Adam) is a few GFLOP beside the products' ~195, so the
 * fraction is the products' share of the step's time had they run at the
 * replay's rate. Of the time outside the products, Adam's is printed apart.
 *
 *   tests/bench_tfm [STEPS]
 */
#include "config.h"

#include <cblas.h>
#include <string.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "util/util.h"
#include "bench_time.h"
#include "tfm_driver.h"

/* The process's CPU seconds: on a shared machine a one-thread run's CPU
 * time moves less than its wall time. */
static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's user-mode CPU seconds: the engine's own work, without the
 * kernel's page clearing (a fresh run faults in its ~2 GB, and the system
 * time of that swings by seconds with the kernel's huge pages). */
static double user_now(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6;
}

/* One recorded sgemm call: everything but the pointers. */
struct gemm_call {
	enum CBLAS_ORDER order;
	enum CBLAS_TRANSPOSE ta, tb;
	blasint M, N, K, lda, ldb, ldc;
	float alpha, beta;
};

typedef void sgemm_fn(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                      float, const float *, blasint, const float *, blasint, float, float *, blasint);

static struct gemm_call *calls;
static size_t ncalls, calls_cap;
static int recording;       /* record the calls of this step */
static double gemm_seconds, gemm_cpu; /* wall and CPU seconds inside OpenBLAS's sgemm so far */

/* OpenBLAS's own product behind this program's cblas_sgemm. zerosim links
 * OpenBLAS's serial archive statically (configure.ac), so there is no
 * next cblas_sgemm to find with dlsym: the Fortran interface, sgemm_, is
 * the same gemm driver, and a row-major product is its column-major one
 * with the operands swapped (what OpenBLAS's cblas_sgemm does itself,
 * interface/gemm.c). The engine's products are all row-major. */
void sgemm_(const char *ta, const char *tb, const blasint *m, const blasint *n, const blasint *k, const float *alpha,
            const float *a, const blasint *lda, const float *b, const blasint *ldb, const float *beta, float *c,
            const blasint *ldc);

static void openblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M,
                           blasint N, blasint K, float alpha, const float *A, blasint lda, const float *B,
                           blasint ldb, float beta, float *C, blasint ldc)
{
	if (order != CblasRowMajor) {
		fprintf(stderr, "bench_tfm: a column-major product; the engine makes none\n");
		exit(1);
	}
	const char tA = ta == CblasNoTrans ? 'N' : 'T', tB = tb == CblasNoTrans ? 'N' : 'T';
	sgemm_(&tB, &tA, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

/* The engine's products land here: recorded, timed, passed on. */
void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER Order, OPENBLAS_CONST enum CBLAS_TRANSPOSE TransA,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE TransB, OPENBLAS_CONST blasint M, OPENBLAS_CONST blasint N,
                 OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *A,
                 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *B, OPENBLAS_CONST blasint ldb,
                 OPENBLAS_CONST float beta, float *C, OPENBLAS_CONST blasint ldc)
{
	sgemm_fn *real = openblas_sgemm;
	if (recording) {
		if (ncalls == calls_cap) {
			calls_cap = calls_cap ? 2 * calls_cap : 256;
			calls = zs_realloc(calls, calls_cap * sizeof *calls);
		}
		calls[ncalls++] = (struct gemm_call){Order, TransA, TransB, M, N, K, lda, ldb, ldc, alpha, beta};
	}
	double t0 = bench_now(), c0 = cpu_now();
	real(Order, TransA, TransB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	gemm_seconds += bench_now() - t0;
	gemm_cpu += cpu_now() - c0;
}

/* Elements an operand of rows × cols (as stored, row-major) with leading
 * dimension ld spans. */
static size_t span(blasint rows, blasint cols, blasint ld)
{
	return rows == 0 || cols == 0 ? 0 : (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

/* Replay the recorded calls on OpenBLAS alone, `runs` times; the median
 * wall seconds of the whole list (its median CPU seconds in *cpu, its
 * median user seconds in *user). Each operand gets its own buffer as large
 * as the largest that slot needs, filled with small values (no
 * subnormals). */
static double replay(int runs, double *flop, double *cpu, double *user)
{
	size_t na = 0, nb = 0, nc = 0;
	*flop = 0;
	for (size_t i = 0; i < ncalls; i++) {
		const struct gemm_call *g = &calls[i];
		int ta = g->ta == CblasTrans, tb = g->tb == CblasTrans;
		size_t a = span(ta ? g->K : g->M, ta ? g->M : g->K, g->lda);
		size_t b = span(tb ? g->N : g->K, tb ? g->K : g->N, g->ldb), c = span(g->M, g->N, g->ldc);
		na = a > na ? a : na, nb = b > nb ? b : nb, nc = c > nc ? c : nc;
		*flop += 2.0 * (double)g->M * (double)g->N * (double)g->K;
	}
	float *A = zs_malloc((na + 1) * sizeof *A), *B = zs_malloc((nb + 1) * sizeof *B);
	float *C = zs_malloc((nc + 1) * sizeof *C);
	for (size_t i = 0; i < na; i++)
		A[i] = (float)(i % 97) / 97.0f - 0.5f;
	for (size_t i = 0; i < nb; i++)
		B[i] = (float)(i % 89) / 89.0f - 0.5f;
	for (size_t i = 0; i < nc; i++)
		C[i] = (float)(i % 83) / 83.0f - 0.5f;
	sgemm_fn *real = openblas_sgemm;
	double *t = zs_malloc((size_t)runs * sizeof *t), *c = zs_malloc((size_t)runs * sizeof *c);
	double *u = zs_malloc((size_t)runs * sizeof *u);
	for (int r = 0; r < runs; r++) {
		double t0 = bench_now(), c0 = cpu_now(), u0 = user_now();
		for (size_t i = 0; i < ncalls; i++) {
			const struct gemm_call *g = &calls[i];
			/* C is rewritten with beta 0 where the step accumulates, so
			 * that repeated runs stay bounded; the work is the same. */
			real(g->order, g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, g->lda, B, g->ldb, 0.0f, C, g->ldc);
		}
		t[r] = bench_now() - t0;
		c[r] = cpu_now() - c0;
		u[r] = user_now() - u0;
	}
	double med = bench_median(t, (size_t)runs);
	*cpu = bench_median(c, (size_t)runs);
	*user = bench_median(u, (size_t)runs);
	free(A), free(B), free(C), free(t), free(c), free(u);
	return med;
}

/* Wall seconds of one engine run of `steps` steps of gpt2 (dims d) at
 * precision p; its CPU seconds in *cpu, its user seconds in *user. */
static double engine_seconds(const struct tfm_dims *d, enum zs_precision p, unsigned steps, double *cpu,
                             double *user)
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
	double t0 = bench_now(), c0 = cpu_now(), u0 = user_now();
	if (engine_run(&c, ZS_DP, 1, ZS_UNIT_LAYER, NULL, &opt, &res, &cause) != 0) {
		fprintf(stderr, "bench_tfm: %s\n", cause ? cause : "the engine failed");
		exit(1);
	}
	double t = bench_now() - t0;
	*cpu = cpu_now() - c0;
	*user = user_now() - u0;
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
	/* GPT-2 small; designated, so that a field tfm_dims gains later
	 * (another family's) is 0, GPT-2's, without an edit here */
	struct tfm_dims d = {.family = TFM_GPT2, .d = 768, .layers = 12, .heads = 12, .kv_heads = 12, .head_dim = 64,
	                     .ffn = 3072, .vocab = 50257, .seq = 1024, .tied = 1, .eps = 1e-5f};
	struct tfm_driver m;
	tfm_driver_init(&m, &d, B, T, ZS_RECOMPUTE_NONE);
	tfm_init_weights(m.params, &d, 1);
	float *mo = zs_calloc(m.nparams, sizeof *mo), *v = zs_calloc(m.nparams, sizeof *v);
	struct optim o;
	optim_init(&o, ZS_ADAM, 1e-3);
	struct tfm_task task;
	tfm_task_init(&task, d.vocab, 1);
	int *in = zs_malloc(B * T * sizeof *in), *target = zs_malloc(B * T * sizeof *target);
	/* per step: wall, wall in sgemm, CPU, CPU in sgemm */
	double *t = zs_malloc((size_t)steps * sizeof *t), *tg = zs_malloc((size_t)steps * sizeof *tg);
	double *tc = zs_malloc((size_t)steps * sizeof *tc), *tcg = zs_malloc((size_t)steps * sizeof *tcg);
	double *ta = zs_malloc((size_t)steps * sizeof *ta); /* wall seconds in Adam */
	float loss = 0.0f;
	for (int s = 0; s <= steps; s++) {
		tfm_task_batch(in, target, &task, 1, (uint64_t)s, 0, B, T);
		recording = s == 0;
		double t0 = bench_now(), g0 = gemm_seconds, c0 = cpu_now(), gc0 = gemm_cpu;
		loss = tfm_driver_step(&m, in, target);
		double a0 = bench_now();
		optim_update(&o, (unsigned)s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
		if (s > 0) {
			ta[s - 1] = bench_now() - a0;
			t[s - 1] = bench_now() - t0;
			tg[s - 1] = gemm_seconds - g0;
			tc[s - 1] = cpu_now() - c0;
			tcg[s - 1] = gemm_cpu - gc0;
		}
	}
	recording = 0;
	double step_s = bench_median(t, (size_t)steps), in_gemm_s = bench_median(tg, (size_t)steps);
	double step_c = bench_median(tc, (size_t)steps), in_gemm_c = bench_median(tcg, (size_t)steps);
	printf("zerosim gpt2 (%zu params) fp32 seq %zu batch %zu: median %.3f s per step over %d (loss %.3f), "
	       "%.3f s of it in sgemm; CPU %.3f s, %.3f s in sgemm\n",
	       m.nparams, T, B, step_s, steps, (double)loss, in_gemm_s, step_c, in_gemm_c);
	double flop, blas_c, blas_u, blas_s = replay(steps, &flop, &blas_c, &blas_u);
	printf("OpenBLAS sgemm alone on the step's %zu products (%.1f GFLOP): median %.3f s, %.1f GFLOP/s "
	       "(one thread; CPU %.3f s, %.1f GFLOP/s; user %.3f s)\n",
	       ncalls, flop / 1e9, blas_s, flop / blas_s / 1e9, blas_c, flop / blas_c / 1e9, blas_u);
	printf("zerosim step / OpenBLAS on its products: %.0f%% by wall time (%.1f GFLOP/s), %.0f%% by CPU time "
	       "(%.1f GFLOP/s); target >= 80%%\n",
	       100.0 * blas_s / step_s, flop / step_s / 1e9, 100.0 * blas_c / step_c, flop / step_c / 1e9);
	printf("zerosim step outside sgemm: %.3f s wall (%.0f%%), %.3f s CPU (%.0f%%); Adam %.3f s wall (%.0f%%)\n",
	       step_s - in_gemm_s, 100.0 * (step_s - in_gemm_s) / step_s, step_c - in_gemm_c,
	       100.0 * (step_c - in_gemm_c) / step_c, bench_median(ta, (size_t)steps),
	       100.0 * bench_median(ta, (size_t)steps) / step_s);
	free(tc), free(tcg), free(ta);
	free(tg);
	free(in), free(target), free(mo), free(v);
	tfm_task_free(&task);
	tfm_driver_free(&m);

	/* wall and CPU seconds of the 1-step and the 2-step runs */
	double *w1 = zs_malloc((size_t)steps * sizeof *w1), *w2 = zs_malloc((size_t)steps * sizeof *w2);
	double *c1 = zs_malloc((size_t)steps * sizeof *c1), *c2 = zs_malloc((size_t)steps * sizeof *c2);
	double *u1 = zs_malloc((size_t)steps * sizeof *u1), *u2 = zs_malloc((size_t)steps * sizeof *u2);
	double wall[2], cpu[2], user[2], unused, unused_user;
	static const enum zs_precision prec[2] = {ZS_FP32, ZS_MIXED};
	(void)engine_seconds(&d, ZS_MIXED, 1, &unused, &unused_user); /* once, not counted: the first touch of the pages */
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < steps; i++) {
			w1[i] = engine_seconds(&d, prec[k], 1, &c1[i], &u1[i]);
			w2[i] = engine_seconds(&d, prec[k], 2, &c2[i], &u2[i]);
		}
		wall[k] = bench_median(w2, (size_t)steps) - bench_median(w1, (size_t)steps);
		cpu[k] = bench_median(c2, (size_t)steps) - bench_median(c1, (size_t)steps);
		user[k] = bench_median(u2, (size_t)steps) - bench_median(u1, (size_t)steps);
		printf("zerosim engine gpt2 rank-step %s seq %zu batch %zu (dp, N=1): %.3f s wall, %.3f s CPU, %.3f s "
		       "user (median 2-step run - median 1-step run, %d each)\n",
		       zs_precision_name(prec[k]), T, B, wall[k], cpu[k], user[k], steps);
		if (prec[k] == ZS_FP32)
			printf("zerosim engine rank-step fp32 / OpenBLAS on its products: %.0f%% by wall time (%.1f "
			       "GFLOP/s), %.0f%% by CPU time, %.0f%% by user time (both sides' user time; %.1f GFLOP/s)\n",
			       100.0 * blas_s / wall[k], flop / wall[k] / 1e9, 100.0 * blas_c / cpu[k],
			       100.0 * blas_u / user[k], flop / user[k] / 1e9);
	}
	printf("zerosim engine gpt2 rank-step mixed / fp32: %.2f wall, %.2f CPU\n", wall[1] / wall[0], cpu[1] / cpu[0]);
	free(w1), free(w2), free(c1), free(c2), free(u1), free(u2), free(t);
	return 0;
}
