/*
 * test_engine — the measurement engine. Golden values come from outside
 * the code under test: the ZeRO paper's per-parameter floors (§5), IEEE 754
 * binary16 bit patterns, a finite-difference gradient computed here in
 * double precision, an Adam and an SGD step worked by hand, and the bitwise
 * equality of all four schemes' weights.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "engine/coll.h"
#include "engine/engine.h"
#include "engine/fp16.h"
#include "engine/heap.h"
#include "engine/layout.h"
#include "engine/mlp.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "engine/tracker.h"
#include "util/config.h"
#include "util/model.h"
#include "util/step.h"
#include "util/util.h"

#define PSI 33088.0 /* 64·256 + 256 + 256·64 + 64 */

static struct zs_result run(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u)
{
	struct zs_result res;
	struct zs_run_options opt = {0};
	char *cause = NULL;
	int r = engine_run(c, s, n, u, NULL, &opt, &res, &cause);
	ck_assert_msg(r == 0, "engine_run failed: %s", cause ? cause : "?");
	return res;
}

static size_t sum_breakdown(const size_t *b)
{
	size_t s = 0;
	for (int c = 0; c < ZS_NCATS; c++)
		s += b[c];
	return s;
}

/* ------------------------------------------------------------------------- */
/* layout (docs/schedule.md's definitions worked by hand) */

/* widths 2,2,2: two layers of 2·2 + 2 = 6 params, Ψ = 12. */
static const size_t tiny[] = {2, 2, 2};

START_TEST(test_layout_gives_each_rank_ceil_n_over_n_slots)
{
	struct zs_net m;
	net_mlp_init(&m, tiny, 3, 1);
	struct zs_layout lo;
	layout_init(&lo, &m, ZS_ZERO3, 5, ZS_UNIT_MODEL);
	/* one unit of 12 over 5 ranks: s = 3, ranks 0..3 own 3, rank 4 none */
	ck_assert_uint_eq(lo.nunits, 1);
	ck_assert_uint_eq(lo.unit[0].s, 3);
	ck_assert_uint_eq(lo.shard, 3);
	struct zs_slice a = layout_own(&lo, ZS_BUF_PARAMS, 0, 3), b = layout_own(&lo, ZS_BUF_PARAMS, 0, 4);
	ck_assert_uint_eq(a.first, 9);
	ck_assert_uint_eq(a.count, 3);
	ck_assert_uint_eq(a.at, 0); /* a shard holds only the rank's slots */
	ck_assert_uint_eq(b.count, 0);
	layout_free(&lo);

	layout_init(&lo, &m, ZS_ZERO3, 4, ZS_UNIT_LAYER);
	/* two units of 6 over 4 ranks: s = 2 each, S = 4; rank 3 holds padding */
	ck_assert_uint_eq(lo.nunits, 2);
	ck_assert_uint_eq(lo.shard, 4);
	struct zs_slice c = layout_own(&lo, ZS_BUF_GRADS, 1, 2), d = layout_own(&lo, ZS_BUF_M, 1, 3);
	ck_assert_uint_eq(c.first, 10);
	ck_assert_uint_eq(c.count, 2);
	ck_assert_uint_eq(c.at, 2); /* after its 2 slots of unit 0 */
	ck_assert_uint_eq(d.count, 0);
	layout_free(&lo);
	net_free(&m);
}
END_TEST

START_TEST(test_layout_full_buffers_hold_owned_slots_at_their_own_index)
{
	struct zs_net m;
	net_mlp_init(&m, tiny, 3, 1);
	struct zs_layout lo;
	layout_init(&lo, &m, ZS_ZERO1, 4, ZS_UNIT_LAYER);
	/* zero1: params and grads full (Ψ = 12 elements), optimizer state a shard */
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_PARAMS), 12);
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_GRADS), 12);
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_MASTER), 4);
	struct zs_slice p = layout_own(&lo, ZS_BUF_PARAMS, 1, 1), s = layout_own(&lo, ZS_BUF_MASTER, 1, 1);
	ck_assert_uint_eq(p.first, 8);
	ck_assert_uint_eq(p.at, 8);
	ck_assert_uint_eq(s.first, 8);
	ck_assert_uint_eq(s.at, 2);
	ck_assert_uint_eq(p.count, 2);
	layout_free(&lo);
	/* dp: every rank owns every element of every buffer */
	layout_init(&lo, &m, ZS_DP, 4, ZS_UNIT_LAYER);
	struct zs_slice q = layout_own(&lo, ZS_BUF_V, 1, 3);
	ck_assert_uint_eq(q.first, 6);
	ck_assert_uint_eq(q.count, 6);
	ck_assert_uint_eq(q.at, 6);
	layout_free(&lo);
	net_free(&m);
}
END_TEST

/* DeepSpeed's ZeRO-3 under --freeze: every tensor's params sharded on
 * its own, the trainable tensors' grads and optimizer state too, a
 * frozen tensor owning none of them (docs/schedule.md, "Frozen
 * parameters under DeepSpeed"). The MLP's tensors W0 (4), b0 (2), W1 (4),
 * b1 (2) at N = 3, layer 0 frozen. */
START_TEST(test_layout_frozen_tensors_shard_their_params_only)
{
	struct zs_net m;
	net_mlp_init(&m, tiny, 3, 1);
	struct zs_layout lo;
	layout_init(&lo, &m, ZS_ZERO3, 3, ZS_UNIT_LAYER);
	layout_shard_tensors(&lo);
	const struct zs_freeze_run run[] = {{0, 0, 6}, {6, 6, 6}};
	layout_freeze(&lo, run, 2);
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_PARAMS), 2 + 1 + 2 + 1);
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_GRADS), 2 + 1);
	ck_assert_uint_eq(layout_len(&lo, ZS_BUF_V), 2 + 1);
	for (unsigned k = 0; k < 3; k++) {
		ck_assert_uint_eq(layout_own(&lo, ZS_BUF_GRADS, 0, k).count, 0);
		ck_assert_uint_eq(layout_own(&lo, ZS_BUF_M, 1, k).count, 0);
	}
	/* (first, count, at) of: W0's params, W1's grads on rank 1; b1's params and Adam's v on rank 0 */
	const struct {
		enum zs_rankbuf b;
		size_t t, first, count, at;
	} want[] = {{ZS_BUF_PARAMS, 0, 2, 2, 0}, {ZS_BUF_GRADS, 2, 8, 2, 0}, {ZS_BUF_PARAMS, 3, 10, 1, 5},
	            {ZS_BUF_V, 3, 10, 1, 2}};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		struct zs_slice sl = layout_own(&lo, want[i].b, want[i].t, want[i].t == 3 ? 0 : 1);
		ck_assert_uint_eq(sl.first, want[i].first);
		ck_assert_uint_eq(sl.count, want[i].count);
		ck_assert_uint_eq(sl.at, want[i].at);
	}
	ck_assert_uint_eq(layout_own(&lo, ZS_BUF_MASTER, 3, 1).count, 1);
	ck_assert_uint_eq(layout_own(&lo, ZS_BUF_MASTER, 3, 2).count, 0); /* padding */
	layout_free(&lo);
	net_free(&m);
}
END_TEST

/* The flags of the mapping that holds address a in /proc/self/smaps
 * ("rd wr mr mw me ac hg"), and whether it is the [heap]; 0 if none. */
static int vma_flags(uintptr_t a, char *flags, size_t size, int *is_heap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (f == NULL)
		return 0;
	char line[512];
	int in = 0, found = 0;
	while (!found && fgets(line, sizeof line, f) != NULL) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = a >= lo && a < hi;
			if (in)
				*is_heap = strstr(line, "[heap]") != NULL;
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(flags, size, "%s", line + 8);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

START_TEST(test_the_heap_is_advised_to_huge_pages_as_it_grows)
{
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
		printf("skipped: this kernel has no transparent huge pages\n");
		return;
	}
	heap_tune();
	struct zs_tracker t;
	tracker_init(&t, 1);
	void *p = tracker_alloc(&t, 0, ZS_CAT_SCRATCH, (size_t)96 << 20);
	char flags[512] = "";
	int is_heap = 0;
	int found = vma_flags((uintptr_t)p + ((size_t)48 << 20), flags, sizeof flags, &is_heap);
	tracker_free(&t, 0, p);
	tracker_destroy(&t);
	if (!found || !is_heap) {
		/* ASan and valgrind bring their own allocator, outside the heap */
		printf("skipped: malloc does not allocate from the heap here\n");
		return;
	}
	ck_assert_msg(strstr(flags, " hg") != NULL, "the block's mapping is not advised: VmFlags:%s", flags);
}
END_TEST

/* The sweep admits runs side by side by this bound: it must hold every
 * byte each run allocates, for every scheme, unit and world. */
START_TEST(test_the_memory_bound_holds_every_run)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.steps = 1;
	const unsigned worlds[] = {1, 3, 4, 7};
	for (int s = 0; s < ZS_NSCHEMES; s++)
		for (int u = 0; u < ZS_NUNITS; u++)
			for (size_t w = 0; w < 4; w++) {
				struct zs_result res = run(&c, (enum zs_scheme)s, worlds[w], (enum zs_unit)u);
				double all = 0;
				for (unsigned k = 0; k < worlds[w]; k++)
					all += (double)res.peak[k];
				double bound = engine_bytes_upper_bound(&c, (enum zs_scheme)s, worlds[w], (enum zs_unit)u);
				ck_assert_msg(all <= bound, "%s N=%u: peak %.0f above the bound %.0f",
				              zs_scheme_name((enum zs_scheme)s), worlds[w], all, bound);
				/* and is scheme-aware: zero3 at N = 7 is far below dp's */
				if (s == ZS_ZERO3 && worlds[w] == 7)
					ck_assert(bound < 0.5 * engine_bytes_upper_bound(&c, ZS_DP, 7, (enum zs_unit)u));
				engine_result_free(&res);
			}
}
END_TEST

/* ------------------------------------------------------------------------- */
/* fp16 */

START_TEST(test_fp16_known_bit_patterns)
{
	/* From the IEEE 754 binary16 tables. */
	ck_assert_uint_eq(zs_float_to_half_soft(1.0f), 0x3c00);
	ck_assert_uint_eq(zs_float_to_half_soft(-2.0f), 0xc000);
	ck_assert_uint_eq(zs_float_to_half_soft(65504.0f), 0x7bff);        /* largest finite */
	ck_assert_uint_eq(zs_float_to_half_soft(6.103515625e-05f), 0x0400); /* smallest normal */
	ck_assert_uint_eq(zs_float_to_half_soft(5.9604644775390625e-08f), 0x0001); /* smallest subnormal */
	ck_assert_uint_eq(zs_float_to_half_soft(0.0f), 0x0000);
	ck_assert_uint_eq(zs_float_to_half_soft(-0.0f), 0x8000);
	ck_assert_float_eq(zs_half_to_float_soft(0x3555), 0.333251953125f);
	ck_assert_float_eq(zs_half_to_float_soft(0x0001), 5.9604644775390625e-08f);
}
END_TEST

START_TEST(test_fp16_ties_round_to_even)
{
	/* 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: even is 1. */
	ck_assert_uint_eq(zs_float_to_half_soft(1.0f + 0x1p-11f), 0x3c00);
	/* 1 + 3·2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: even is the upper. */
	ck_assert_uint_eq(zs_float_to_half_soft(1.0f + 3 * 0x1p-11f), 0x3c02);
	/* Just above a tie rounds up. */
	ck_assert_uint_eq(zs_float_to_half_soft(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
	/* Subnormal tie: 2^-25 is halfway between 0 and 2^-24: even is 0. */
	ck_assert_uint_eq(zs_float_to_half_soft(0x1p-25f), 0x0000);
	ck_assert_uint_eq(zs_float_to_half_soft(3 * 0x1p-25f), 0x0002);
}
END_TEST

START_TEST(test_fp16_overflow_and_nan)
{
	ck_assert_uint_eq(zs_float_to_half_soft(65520.0f), 0x7c00); /* rounds up past the largest */
	ck_assert_uint_eq(zs_float_to_half_soft(65519.0f), 0x7bff);
	ck_assert_uint_eq(zs_float_to_half_soft(1e10f), 0x7c00);
	ck_assert_uint_eq(zs_float_to_half_soft(-INFINITY), 0xfc00);
	zs_half n = zs_float_to_half_soft(NAN);
	ck_assert_uint_eq(n & 0x7c00, 0x7c00);
	ck_assert_uint_ne(n & 0x03ff, 0);
	ck_assert(isnan(zs_half_to_float_soft(n)));
	ck_assert(isinf(zs_half_to_float_soft(0x7c00)));
	/* A NaN whose payload sits only in the low bits must stay a NaN. */
	uint32_t bits = 0x7f800001u;
	float f;
	memcpy(&f, &bits, sizeof f);
	ck_assert_uint_ne(zs_float_to_half_soft(f) & 0x03ff, 0);
}
END_TEST

START_TEST(test_fp16_software_agrees_with_the_compiler)
{
	/* ck_abort_msg on a mismatch, not a ck_assert each: a ck_assert's mark
	 * point is a system call (a write to Check's pipe), most of this
	 * test's time across these 600,000 comparisons, far more under make
	 * valgrind. */
	/* Every half converts the same way both routes, and back. */
	for (uint32_t h = 0; h < 65536; h++) {
		float a = zs_half_to_float_soft((zs_half)h), b = zs_half_to_float((zs_half)h);
		if (isnan(a)) {
			if (!isnan(b))
				ck_abort_msg("half 0x%04x: NaN by software, not by the compiler", h);
			continue;
		}
		if (memcmp(&a, &b, sizeof a) != 0)
			ck_abort_msg("half 0x%04x", h);
		if (zs_float_to_half_soft(a) != h)
			ck_abort_msg("half 0x%04x: back to 0x%04x", h, (unsigned)zs_float_to_half_soft(a));
	}
	/* A sweep of floats, including every rounding case between halves. */
	for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x1fffu) {
		float f;
		memcpy(&f, &bits, sizeof f);
		if (zs_float_to_half_soft(f) != zs_float_to_half(f))
			ck_abort_msg("float bits 0x%08x", bits);
		if (zs_float_to_half_soft(-f) != zs_float_to_half(-f))
			ck_abort_msg("float bits 0x%08x, negated", bits);
	}
}
END_TEST

/* ------------------------------------------------------------------------- */
/* tracker and collectives */

START_TEST(test_tracker_keeps_the_breakdown_at_the_peak)
{
	struct zs_tracker t;
	tracker_init(&t, 2);
	void *a = tracker_alloc(&t, 0, ZS_CAT_PARAM16, 100);
	void *b = tracker_alloc(&t, 0, ZS_CAT_ACTIVATIONS, 50);
	void *c = tracker_alloc(&t, 1, ZS_CAT_GRAD16, 7);
	tracker_free(&t, 0, b);
	void *d = tracker_alloc(&t, 0, ZS_CAT_SCRATCH, 20);
	ck_assert_uint_eq(t.rank[0].total, 120);
	ck_assert_uint_eq(t.rank[0].peak, 150);
	ck_assert_uint_eq(t.rank[0].at_peak[ZS_CAT_PARAM16], 100);
	ck_assert_uint_eq(t.rank[0].at_peak[ZS_CAT_ACTIVATIONS], 50);
	ck_assert_uint_eq(t.rank[0].at_peak[ZS_CAT_SCRATCH], 0);
	ck_assert_uint_eq(t.rank[1].peak, 7);
	ck_assert_uint_eq(tracker_outstanding(&t), 3);
	tracker_free(&t, 0, a);
	tracker_free(&t, 0, d);
	tracker_free(&t, 1, c);
	ck_assert_uint_eq(tracker_outstanding(&t), 0);
	tracker_destroy(&t);
}
END_TEST

START_TEST(test_reduce_scatter_averages_and_skips_padding)
{
	/* n = 5 over N = 3: s = 2, rank 2 owns one real slot and one padding. */
	struct zs_coll c;
	coll_init_inprocess(&c, 3);
	float f[3][5] = {{1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}, {100, 200, 300, 400, 500}};
	float sh[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	void *full[3] = {f[0], f[1], f[2]}, *shard[3] = {sh[0], sh[1], sh[2]};
	coll_reduce_scatter(&c, (const void *const *)full, shard, 5, ZS_F32);
	ck_assert_float_eq(sh[0][0], 37.0f);
	ck_assert_float_eq(sh[0][1], 74.0f);
	ck_assert_float_eq(sh[1][0], 111.0f);
	ck_assert_float_eq(sh[1][1], 148.0f);
	ck_assert_float_eq(sh[2][0], 185.0f);
	ck_assert_float_eq(sh[2][1], -1.0f); /* padding untouched */
	/* ring cost: (N-1)·s elements of 4 bytes per rank */
	ck_assert_uint_eq(c.stats[1].bytes[ZS_REDUCE_SCATTER], 2 * 2 * 4);
	coll_all_gather(&c, (const void *const *)shard, full, 5, ZS_F32);
	for (int r = 0; r < 3; r++) {
		ck_assert_float_eq(f[r][0], 37.0f);
		ck_assert_float_eq(f[r][4], 185.0f);
	}
	coll_all_reduce(&c, full, 5, ZS_F32);
	ck_assert_float_eq(f[2][3], 148.0f);
	ck_assert_uint_eq(c.stats[0].bytes[ZS_ALL_REDUCE], 2 * 2 * 2 * 4);
	ck_assert_uint_eq(c.stats[0].calls[ZS_ALL_GATHER], 1);
	coll_destroy(&c);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* training is real */

/* An independent forward pass in double precision, for finite differences. */
static double ref_loss(const size_t *w, size_t L, const double *p, const double *x, const double *y, size_t B)
{
	double loss = 0, a[64], h[64];
	for (size_t b = 0; b < B; b++) {
		for (size_t i = 0; i < w[0]; i++)
			a[i] = x[b * w[0] + i];
		size_t off = 0;
		for (size_t l = 0; l < L; l++) {
			const double *W = p + off, *bias = p + off + w[l] * w[l + 1];
			for (size_t j = 0; j < w[l + 1]; j++) {
				double s = bias[j];
				for (size_t i = 0; i < w[l]; i++)
					s += W[j * w[l] + i] * a[i];
				h[j] = (l + 1 < L && s < 0) ? 0 : s;
			}
			memcpy(a, h, w[l + 1] * sizeof *a);
			off += w[l] * w[l + 1] + w[l + 1];
		}
		for (size_t j = 0; j < w[L]; j++)
			loss += (a[j] - y[b * w[L] + j]) * (a[j] - y[b * w[L] + j]);
	}
	return loss / (double)(B * w[L]);
}

/* The layer kernels against plain loops written from the order
 * mlp_kernels.h documents, bit for bit, in fp16 and fp32, on shapes that
 * fill no block exactly (widths not a multiple of 8 or of the input
 * gradient's chunk of columns, batches not a multiple of 4) and on ones
 * that do, and on ones whose weights are large enough to be prefetched
 * and read row by row and whose weight gradient is streamed past the
 * caches. Blocking, chunking, vector width and stores
 * may change; the bits may not. */
static float half_round(float v, int f16) { return f16 ? zs_half_to_float(zs_float_to_half(v)) : v; }

START_TEST(test_layer_kernels_keep_the_documented_order)
{
	/* Millions of elements compared: ck_abort_msg on a mismatch, not a
	 * ck_assert_msg each, whose mark point is a write to Check's pipe (a
	 * system call an element, most of this test's time, far more under
	 * make valgrind). */
	/* the last column: signed zeros (below) */
	static const size_t shapes[][4] = {{4, 16, 32, 0}, {4, 1030, 9, 0}, {5, 13, 1029, 0}, {3, 7, 5, 0}, {8, 600, 24, 0},
	                                     {1, 9, 3, 0}, {4, 7, 6, 0} /* rows shorter than a vector */,
	                                     {4, 1024, 2048, 0} /* weight grads streamed */,
	                                     {5, 2061, 260, 0} /* w read row by row, in chunks, a tail */,
	                                     {4, 64, 10, 1}, {4, 67, 10, 1}};
	for (int f16 = 0; f16 < 2; f16++)
		for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
			size_t B = shapes[sh][0], din = shapes[sh][1], dout = shapes[sh][2];
			int zeros = shapes[sh][3] != 0;
			float *in = malloc(B * din * sizeof *in), *dy = malloc(B * dout * sizeof *dy);
			float *w = malloc(dout * din * sizeof *w), *bias = malloc(dout * sizeof *bias);
			float *out = malloc(B * dout * sizeof *out), *dx = malloc(B * din * sizeof *dx);
			float *dw = malloc(dout * din * sizeof *dw), *db = malloc(dout * sizeof *db);
			zs_half *w16 = malloc(dout * din * sizeof *w16), *b16 = malloc(dout * sizeof *b16);
			zs_half *dw16 = malloc(dout * din * sizeof *dw16), *db16 = malloc(dout * sizeof *db16);
			for (size_t i = 0; i < B * din; i++) /* some inputs <= 0, so ReLU's mask matters */
				in[i] = engine_uniform(5, 1, i) - 0.25f;
			for (size_t i = 0; i < B * dout; i++)
				dy[i] = engine_uniform(5, 2, i);
			for (size_t i = 0; i < dout * din; i++) {
				w[i] = half_round(engine_uniform(5, 3, i), f16);
				w16[i] = zs_float_to_half(w[i]);
			}
			for (size_t j = 0; j < dout; j++) {
				bias[j] = half_round(engine_uniform(5, 4, j), f16);
				b16[j] = zs_float_to_half(bias[j]);
			}
			/* Signed zeros: every product of the even rows of w is -0 for
			 * the first batch row (its inputs > 0, those weights -0) and
			 * their bias is -0, so that each output is -0 + (the sum of
			 * the -0 products from +0), +0, and -0 if a sum started from
			 * its first product instead of 0; the odd rows' weights are
			 * +0, their products with the first row +0. */
			for (size_t i = 0; zeros && i < din; i++)
				in[i] = in[i] > 0.0f ? in[i] : 0.5f - in[i];
			for (size_t j = 0; zeros && j < dout; j++) {
				for (size_t i = 0; i < din; i++)
					w[j * din + i] = j % 2 ? 0.0f : -0.0f;
				bias[j] = -0.0f;
				b16[j] = zs_float_to_half(bias[j]);
				for (size_t i = 0; i < din; i++)
					w16[j * din + i] = zs_float_to_half(w[j * din + i]);
			}
			if (f16) {
				linear_forward_f16(out, in, w16, b16, 1, B, din, dout);
				linear_backward_f16(dw16, db16, dx, dy, in, w16, B, din, dout);
				for (size_t i = 0; i < dout * din; i++)
					dw[i] = zs_half_to_float(dw16[i]);
				for (size_t j = 0; j < dout; j++)
					db[j] = zs_half_to_float(db16[j]);
			} else {
				linear_forward_f32(out, in, w, bias, 1, B, din, dout);
				linear_backward_f32(dw, db, dx, dy, in, w, B, din, dout);
			}
			for (size_t b = 0; b < B; b++)
				for (size_t j = 0; j < dout; j++) {
					float lane[8] = {0}, s = 0.0f;
					size_t i = 0, n8 = din / 8 * 8;
					for (; i < n8; i++)
						lane[i % 8] += in[b * din + i] * w[j * din + i];
					for (; i < din; i++)
						s += in[b * din + i] * w[j * din + i];
					for (int k = 0; k < 8; k++)
						s += lane[k];
					float v = bias[j] + s;
					v = v < 0.0f ? 0.0f : v;
					if (memcmp(&v, &out[b * dout + j], sizeof v) != 0)
						ck_abort_msg("forward %s (%zu,%zu,%zu) [%zu][%zu]", f16 ? "f16" : "f32", B, din, dout, b, j);
				}
			for (size_t j = 0; j < dout; j++) {
				float sb = 0.0f;
				for (size_t b = 0; b < B; b++)
					sb += dy[b * dout + j];
				sb = half_round(sb, f16);
				if (memcmp(&sb, &db[j], sizeof sb) != 0)
					ck_abort_msg("dbias [%zu]", j);
				for (size_t i = 0; i < din; i++) {
					float sw = 0.0f;
					for (size_t b = 0; b < B; b++)
						sw += dy[b * dout + j] * in[b * din + i];
					sw = half_round(sw, f16);
					if (memcmp(&sw, &dw[j * din + i], sizeof sw) != 0)
						ck_abort_msg("dw %s (%zu,%zu,%zu) [%zu][%zu]", f16 ? "f16" : "f32", B, din, dout, j, i);
				}
			}
			for (size_t b = 0; b < B; b++)
				for (size_t i = 0; i < din; i++) {
					float sx = 0.0f;
					for (size_t j = 0; j < dout; j++)
						sx += dy[b * dout + j] * w[j * din + i];
					sx = in[b * din + i] > 0.0f ? sx : 0.0f;
					if (memcmp(&sx, &dx[b * din + i], sizeof sx) != 0)
						ck_abort_msg("dx %s (%zu,%zu,%zu) [%zu][%zu]", f16 ? "f16" : "f32", B, din, dout, b, i);
				}
			free(in), free(dy), free(w), free(bias), free(out), free(dx), free(dw), free(db);
			free(w16), free(b16), free(dw16), free(db16);
		}
}
END_TEST

START_TEST(test_backward_matches_finite_differences)
{
	const size_t widths[] = {5, 7, 6, 3}, B = 4;
	struct step_params s; /* where each layer's weight and bias live */
	step_params_mlp(&s, widths, 4);
	size_t n = s.numel, w_off[3], b_off[3];
	for (size_t l = 0; l < 3; l++) {
		w_off[l] = s.layer[l].offset;
		b_off[l] = w_off[l] + s.tensor[s.layer[l].first].numel;
	}
	step_params_free(&s);
	float *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g);
	double *pd = calloc(n, sizeof *pd);
	float x[4 * 5], y[4 * 3], act[3][4 * 7], dl[2][4 * 7];
	double xd[4 * 5], yd[4 * 3];
	for (size_t i = 0; i < n; i++)
		pd[i] = p[i] = 0.5f * engine_uniform(11, 1, i);
	for (size_t i = 0; i < B * 5; i++)
		xd[i] = x[i] = engine_uniform(11, 2, i);
	for (size_t i = 0; i < B * 3; i++)
		yd[i] = y[i] = engine_uniform(11, 3, i);

	const float *in = x;
	for (size_t l = 0; l < 3; l++) {
		linear_forward_f32(act[l], in, p + w_off[l], p + b_off[l], l < 2, B, widths[l], widths[l + 1]);
		in = act[l];
	}
	mse_forward_backward(dl[0], act[2], y, B, 3);
	int cur = 0;
	for (size_t l = 3; l-- > 0;) {
		linear_backward_f32(g + w_off[l], g + b_off[l], l ? dl[1 - cur] : NULL, dl[cur],
		                    l ? act[l - 1] : x, p + w_off[l], B, widths[l], widths[l + 1]);
		cur = 1 - cur;
	}
	for (size_t i = 0; i < n; i++) {
		double h = 1e-6, keep = pd[i];
		pd[i] = keep + h;
		double up = ref_loss(widths, 3, pd, xd, yd, B);
		pd[i] = keep - h;
		double down = ref_loss(widths, 3, pd, xd, yd, B);
		pd[i] = keep;
		double fd = (up - down) / (2 * h);
		ck_assert_msg(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd), "param %zu: finite difference %g, backward %g",
		              i, fd, (double)g[i]);
	}
	free(p);
	free(g);
	free(pd);
}
END_TEST

START_TEST(test_adam_step_matches_the_hand_worked_values)
{
	/* By hand, Kingma & Ba's Algorithm 1 with lr 1e-3, β 0.9/0.999, ε 1e-8:
	 * step 1, g = 0.5:  m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25,
	 *                   w = 1 - 1e-3·0.5/(0.5 + 1e-8) = 0.99900000002
	 * step 2, g = 0.25: m = 0.07, v = 0.00031225, m̂ = 0.07/0.19 = 0.368421...,
	 *                   v̂ = 0.00031225/0.001999 = 0.156203..., w = 0.998067820 */
	struct optim o;
	optim_init(&o, ZS_ADAM, 1e-3);
	float w = 1.0f, m = 0, v = 0, g = 0.5f;
	zs_half out;
	optim_update(&o, 1, &w, &m, &v, &g, ZS_F32, &out, 1);
	ck_assert_float_eq_tol(m, 0.05f, 1e-7f);
	ck_assert_float_eq_tol(v, 0.00025f, 1e-8f); /* fp32 holds 1 - 0.999 as 0.00099998713 */
	ck_assert_float_eq_tol(w, 0.99900000002f, 1e-7f);
	ck_assert_uint_eq(out, zs_float_to_half_soft(w));
	g = 0.25f;
	optim_update(&o, 2, &w, &m, &v, &g, ZS_F32, NULL, 1);
	ck_assert_float_eq_tol(m, 0.07f, 1e-7f);
	ck_assert_float_eq_tol(v, 0.00031225f, 1e-8f); /* fp32 holds 1 - 0.999 as 0.00099998713 */
	ck_assert_float_eq_tol(w, 0.998067820f, 2e-7f);
}
END_TEST

START_TEST(test_sgd_momentum_step_matches_the_hand_worked_values)
{
	/* lr 0.1, μ 0.9, g = 0.5 twice: buf 0.5 then 0.95; w 0.95 then 0.855. */
	struct optim o;
	optim_init(&o, ZS_SGD, 0.1);
	float w = 1.0f, m = 0, g = 0.5f;
	optim_update(&o, 1, &w, &m, NULL, &g, ZS_F32, NULL, 1);
	ck_assert_float_eq_tol(w, 0.95f, 1e-7f);
	optim_update(&o, 2, &w, &m, NULL, &g, ZS_F32, NULL, 1);
	ck_assert_float_eq_tol(m, 0.95f, 1e-7f);
	ck_assert_float_eq_tol(w, 0.855f, 1e-7f);
}
END_TEST

/* The update as optim.h documents it, one element at a time, reading the
 * state (zeros at the first step): what optim_update must equal bit for
 * bit, although it reads neither m nor v at t = 1 and runs eight lanes at
 * a time. */
static void optim_reference(const struct optim *o, unsigned t, float *w, float *m, float *v, const float *g,
                            zs_half *out16, size_t n)
{
	const float c1 = 1.0f - o->beta1, c2 = 1.0f - o->beta2;
	const double bc1 = 1.0 - pow((double)o->beta1, (double)t), bc2 = 1.0 - pow((double)o->beta2, (double)t);
	const float step = (float)((double)o->lr / bc1), bc2s = (float)sqrt(bc2);
	for (size_t i = 0; i < n; i++) {
		if (o->kind == ZS_ADAM) {
			m[i] = o->beta1 * m[i] + c1 * g[i];
			v[i] = o->beta2 * v[i] + c2 * g[i] * g[i];
			w[i] -= step * (m[i] / (sqrtf(v[i]) / bc2s + o->eps));
		} else {
			m[i] = o->momentum * m[i] + g[i];
			w[i] -= o->lr * m[i];
		}
		if (out16 != NULL)
			out16[i] = zs_float_to_half_soft(w[i]);
	}
}

START_TEST(test_optimizer_first_step_needs_no_zeroed_state)
{
	/* 37 elements: four blocks of eight and a tail; grads with signed
	 * zeros (c1·g = -0 must still give m = +0, as +0 + -0 does), products
	 * that underflow to -0, subnormals, infinities and a quiet NaN; fp16
	 * grads (the mixed-precision path) and fp32 ones; three steps. The
	 * state handed to step 1 is garbage (all ones bits, a NaN). */
	enum { N = 37 };
	const float special[] = {-0.0f, 0.0f, -1e-45f, 1e-45f, -1e-40f, -3e-39f, INFINITY, -INFINITY, NAN, -65504.0f};
	for (int kind = 0; kind < 2; kind++)
		for (int f16 = 0; f16 < 2; f16++) {
			struct optim o;
			optim_init(&o, kind ? ZS_SGD : ZS_ADAM, 1e-3);
			float w[N], m[N], v[N], rw[N], rm[N] = {0}, rv[N] = {0}, g[N];
			zs_half gh[N], out[N], rout[N];
			memset(m, 0xff, sizeof m);
			memset(v, 0xff, sizeof v);
			for (unsigned t = 1; t <= 3; t++) {
				for (size_t i = 0; i < N; i++) {
					if (t == 1)
						w[i] = rw[i] = (float)(i % 7) * 0.25f - 0.8f;
					float x = i < sizeof special / sizeof *special && t == 1
					                  ? special[i]
					                  : (float)((i * 37 + t * 11) % 19) * 0.125f - 1.1f;
					gh[i] = zs_float_to_half_soft(x);
					g[i] = f16 ? zs_half_to_float_soft(gh[i]) : x;
				}
				optim_update(&o, t, w, m, kind ? NULL : v, f16 ? (const void *)gh : (const void *)g,
				             f16 ? ZS_F16 : ZS_F32, out, N);
				optim_reference(&o, t, rw, rm, rv, g, rout, N);
				ck_assert_msg(memcmp(w, rw, sizeof w) == 0, "w differs (%s, %s grads, t %u)",
				              kind ? "SGD" : "Adam", f16 ? "fp16" : "fp32", t);
				ck_assert_msg(memcmp(m, rm, sizeof m) == 0, "m differs at t %u", t);
				ck_assert(kind || memcmp(v, rv, sizeof v) == 0);
				ck_assert(memcmp(out, rout, sizeof out) == 0);
				ck_assert(t > 1 || (!signbit(m[0]) && m[0] == 0.0f)); /* g = -0: m is +0 */
			}
		}
}
END_TEST

START_TEST(test_the_loss_falls_over_fifty_steps)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.steps = 50;
	struct zs_result r = run(&c, ZS_ZERO2, 2, ZS_UNIT_MODEL);
	double first = 0, last = 0;
	for (int t = 0; t < 5; t++) {
		first += r.losses[t];
		last += r.losses[45 + t];
	}
	ck_assert_msg(last < 0.7 * first, "loss over the first five steps %g, over the last five %g", first / 5,
	              last / 5);
	engine_result_free(&r);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* what each scheme holds (the ZeRO paper's floors, §5) */

START_TEST(test_default_sweep_resident_is_the_paper_floor)
{
	struct zs_config c;
	zs_config_defaults(&c);
	for (size_t w = 0; w < c.nworld; w++) {
		unsigned N = c.world[w];
		double floor[ZS_NSCHEMES] = {16.0, 4.0 + 12.0 / N, 2.0 + 14.0 / N, 16.0 / N};
		for (int s = 0; s < ZS_NSCHEMES; s++) {
			struct zs_result r = run(&c, (enum zs_scheme)s, N, ZS_UNIT_MODEL);
			for (unsigned k = 0; k < N; k++)
				ck_assert_double_eq((double)r.resident[k] / PSI, floor[s]);
			ck_assert_uint_ge(r.peak[r.binding_rank], r.resident[r.binding_rank]);
			ck_assert_uint_eq(sum_breakdown(r.peak_breakdown), r.peak[r.binding_rank]);
			ck_assert_uint_eq(sum_breakdown(r.resident_breakdown), r.resident[r.binding_rank]);
			engine_result_free(&r);
		}
	}
}
END_TEST

START_TEST(test_at_world_one_all_four_schemes_are_the_same)
{
	struct zs_config c;
	zs_config_defaults(&c);
	for (int u = 0; u < ZS_NUNITS; u++) {
		struct zs_result dp = run(&c, ZS_DP, 1, (enum zs_unit)u);
		for (int s = 1; s < ZS_NSCHEMES; s++) {
			struct zs_result r = run(&c, (enum zs_scheme)s, 1, (enum zs_unit)u);
			ck_assert_uint_eq(r.resident[0], dp.resident[0]);
			ck_assert_uint_eq(r.peak[0], dp.peak[0]);
			ck_assert_mem_eq(r.peak_breakdown, dp.peak_breakdown, sizeof dp.peak_breakdown);
			for (int k = 0; k < ZS_NCOLL; k++)
				ck_assert_uint_eq(r.comm[0].bytes[k] + r.comm[0].calls[k], 0);
			ck_assert_uint_eq(r.digest, dp.digest);
			engine_result_free(&r);
		}
		engine_result_free(&dp);
	}
}
END_TEST

START_TEST(test_weights_are_bitwise_identical_across_schemes)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.widths[0] = 13; /* odd sizes, so units pad unevenly */
	c.widths[1] = 29;
	c.widths[2] = 7;
	c.widths[3] = 5;
	c.nwidths = 4;
	c.batch = 3;
	static const unsigned worlds[] = {1, 2, 3, 5, 8};
	for (int prec = 0; prec < 2; prec++)
		for (int opt = 0; opt < 2; opt++)
			for (int u = 0; u < ZS_NUNITS; u++)
				for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++) {
					c.precision = prec ? ZS_FP32 : ZS_MIXED;
					c.optimizer = opt ? ZS_SGD : ZS_ADAM;
					struct zs_result dp = run(&c, ZS_DP, worlds[w], (enum zs_unit)u);
					for (int s = 1; s < ZS_NSCHEMES; s++) {
						struct zs_result r = run(&c, (enum zs_scheme)s, worlds[w], (enum zs_unit)u);
						ck_assert_msg(r.digest == dp.digest, "%s differs from dp: N=%u unit=%d prec=%d opt=%d",
						              zs_scheme_name((enum zs_scheme)s), worlds[w], u, prec, opt);
						ck_assert_float_eq(r.losses[2], dp.losses[2]);
						engine_result_free(&r);
					}
					engine_result_free(&dp);
				}
}
END_TEST

START_TEST(test_default_weights_match_across_schemes_and_units)
{
	struct zs_config c;
	zs_config_defaults(&c);
	struct zs_result ref = run(&c, ZS_DP, 32, ZS_UNIT_MODEL);
	for (int s = 0; s < ZS_NSCHEMES; s++)
		for (int u = 0; u < ZS_NUNITS; u++) {
			struct zs_result r = run(&c, (enum zs_scheme)s, 32, (enum zs_unit)u);
			ck_assert_uint_eq(r.digest, ref.digest);
			engine_result_free(&r);
		}
	engine_result_free(&ref);
}
END_TEST

START_TEST(test_world_three_exceeds_the_floors_by_the_padding)
{
	struct zs_config c;
	zs_config_defaults(&c);
	double s = ceil(PSI / 3); /* 11030 slots per rank, 2 of them padding */
	double pad = s - PSI / 3;
	struct zs_result r3 = run(&c, ZS_ZERO3, 3, ZS_UNIT_MODEL);
	ck_assert_double_eq((double)r3.resident[0] / PSI, 16.0 * 11030.0 / PSI);
	ck_assert_double_eq_tol((double)r3.resident[0] - 16.0 * PSI / 3, 16.0 * pad, 1e-6);
	struct zs_result r2 = run(&c, ZS_ZERO2, 3, ZS_UNIT_MODEL);
	ck_assert_double_eq_tol((double)r2.resident[0] - (2.0 * PSI + 14.0 * PSI / 3), 14.0 * pad, 1e-6);
	struct zs_result r1 = run(&c, ZS_ZERO1, 3, ZS_UNIT_MODEL);
	ck_assert_double_eq_tol((double)r1.resident[0] - (4.0 * PSI + 12.0 * PSI / 3), 12.0 * pad, 1e-6);
	engine_result_free(&r1);
	engine_result_free(&r2);
	engine_result_free(&r3);
}
END_TEST

START_TEST(test_zero3_peak_gathering_the_model_is_above_zero2_resident)
{
	struct zs_config c;
	zs_config_defaults(&c);
	struct zs_result model = run(&c, ZS_ZERO3, 32, ZS_UNIT_MODEL);
	struct zs_result layer = run(&c, ZS_ZERO3, 32, ZS_UNIT_LAYER);
	struct zs_result z2 = run(&c, ZS_ZERO2, 32, ZS_UNIT_MODEL);
	ck_assert_double_eq((double)z2.resident[0] / PSI, 2.4375);
	ck_assert_double_gt((double)model.peak[0] / PSI, 2.4375);
	/* unit=layer gathers the largest layer (64·256 + 256 = 16640), not Ψ:
	 * params (2 B) and grads (2 B) of the difference. Same resident. */
	ck_assert_uint_eq(model.peak[0] - layer.peak[0], (size_t)(PSI - 16640) * 4);
	ck_assert_uint_eq(model.peak_breakdown[ZS_CAT_GATHERED], (size_t)PSI * 2);
	ck_assert_uint_eq(layer.peak_breakdown[ZS_CAT_GATHERED], 16640 * 2);
	engine_result_free(&model);
	engine_result_free(&layer);
	engine_result_free(&z2);
}
END_TEST

START_TEST(test_comm_is_equal_for_dp_zero1_zero2_and_half_again_for_zero3)
{
	struct zs_config c;
	zs_config_defaults(&c);
	static const unsigned worlds[] = {1, 2, 3, 8, 32};
	for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++) {
		unsigned long long sent[ZS_NSCHEMES];
		for (int s = 0; s < ZS_NSCHEMES; s++) {
			struct zs_result r = run(&c, (enum zs_scheme)s, worlds[w], ZS_UNIT_MODEL);
			sent[s] = 0;
			for (int k = 0; k < ZS_NCOLL; k++)
				sent[s] += r.comm[0].bytes[k];
			engine_result_free(&r);
		}
		if (worlds[w] == 1) {
			ck_assert_uint_eq(sent[0] + sent[1] + sent[2] + sent[3], 0);
			continue;
		}
		/* the paper: 2Ψ elements per step, as N grows (ring: 2Ψ(N-1)/N) */
		double N = worlds[w], P = N * ceil(PSI / N);
		ck_assert_double_eq((double)sent[ZS_DP], 3 * 2.0 * 2 * (N - 1) / N * P);
		ck_assert_uint_eq(sent[ZS_ZERO1], sent[ZS_DP]);
		ck_assert_uint_eq(sent[ZS_ZERO2], sent[ZS_DP]);
		ck_assert_uint_eq(2 * sent[ZS_ZERO3], 3 * sent[ZS_DP]);
	}
}
END_TEST

/* ------------------------------------------------------------------------- */
/* case files */

static const char *write_tmp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/zerosim-test-%d.json", (int)getpid());
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(test_a_case_file_fixes_weights_and_batches)
{
	/* layers 2,1,1: W0 = [1, -1], b0 = 0.5, W1 = [2], b1 = -1.
	 * x = (3, 1): h = relu(3 - 1 + 0.5) = 2.5, out = 2·2.5 - 1 = 4, y = 1:
	 * loss (4 - 1)^2 = 9 on rank 0. Rank 1: x = (0, 2): h = relu(-1.5) = 0,
	 * out = -1, y = 0: loss 1. Mean over ranks: 5. */
	const char *path = write_tmp(
	    "{\"format\": \"zerosim-case/1\", \"layers\": [2, 1, 1], \"world\": 2, \"batch\": 1, \"steps\": 1,"
	    " \"weights\": [1, -1, 0.5, 2, -1],"
	    " \"batches\": [[{\"x\": [[3, 1]], \"y\": [[1]]}, {\"x\": [[0, 2]], \"y\": [[0]]}]]}");
	struct zs_case *cs;
	char *cause = NULL;
	ck_assert_int_eq(engine_case_load(path, &cs, &cause), 0);
	struct zs_config c;
	zs_config_defaults(&c);
	c.widths[0] = 2;
	c.widths[1] = 1;
	c.widths[2] = 1;
	c.steps = 1;
	c.batch = 1;
	struct zs_run_options opt = {.weights = 1};
	struct zs_result a, b;
	ck_assert_int_eq(engine_run(&c, ZS_DP, 2, ZS_UNIT_MODEL, cs, &opt, &a, &cause), 0);
	ck_assert_int_eq(engine_run(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER, cs, &opt, &b, &cause), 0);
	ck_assert_float_eq(a.losses[0], 5.0f);
	ck_assert_uint_eq(a.digest, b.digest);
	/* The digest is XXH3 of the assembled weights, whoever held them. */
	ck_assert_uint_eq(b.digest, XXH3_64bits(b.weights, 5 * sizeof(float)));
	ck_assert_uint_eq(a.digest, XXH3_64bits(a.weights, 5 * sizeof(float)));
	/* Adam's first step moves every weight with a nonzero mean grad by lr. */
	ck_assert_float_eq_tol(a.weights[3], 2.0f - 1e-3f, 1e-6f);
	engine_result_free(&a);
	engine_result_free(&b);
	engine_case_free(cs);
	unlink(path);
}
END_TEST

START_TEST(test_a_broken_case_file_is_refused_with_a_reason)
{
	static const char *const bad[] = {
		"{\"format\": \"zerosim-case/2\"}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2], \"world\": 1, \"batch\": 1, \"steps\": 1}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2, 1], \"world\": 1, \"batch\": 1, \"steps\": 1,"
		" \"weights\": [1, 2], \"batches\": [[{\"x\": [[1, 1]], \"y\": [[1]]}]]}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2, 1], \"world\": 1, \"batch\": 1, \"steps\": 1,"
		" \"weights\": [1, 2, 3], \"batches\": [[{\"x\": [[1, \"a\"]], \"y\": [[1]]}]]}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2, 1], \"world\": 2, \"batch\": 1, \"steps\": 1,"
		" \"weights\": [1, 2, 3], \"batches\": [[{\"x\": [[1, 1]], \"y\": [[1]]}]]}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2, 1], \"world\": 1, \"batch\": 1, \"steps\": 1,"
		" \"weights\": [1, 2, 1e39], \"batches\": [[{\"x\": [[1, 1]], \"y\": [[1]]}]]}",
		"{\"format\": \"zerosim-case/1\", \"layers\": [2, 1], \"world\": 1, \"batch\": 1,",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		const char *path = write_tmp(bad[i]);
		struct zs_case *cs = NULL;
		char *cause = NULL;
		ck_assert_int_eq(engine_case_load(path, &cs, &cause), -1);
		ck_assert_ptr_nonnull(cause);
		ck_assert_ptr_null(strchr(cause, '\n'));
		free(cause);
		unlink(path);
	}
}
END_TEST

/* Write the case a seed gives, read it back, and train on it: the same
 * values, and the same weights bits as the run from the seed, for an MLP
 * and both transformer families (each with a weights side file). */
static void case_round_trip(struct zs_config *c, unsigned world)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/zerosim-case-%d.json", (int)getpid());
	struct zs_case *made = engine_case_from_seed(c, world), *back = NULL;
	char *cause = NULL;
	ck_assert_msg(engine_case_write(path, made, c, &cause) == 0, "%s", cause ? cause : "?");
	ck_assert_msg(engine_case_load(path, &back, &cause) == 0, "%s", cause ? cause : "?");
	size_t psi = c->tfm != NULL ? tfm_nparams(&c->tfm->dims) : (size_t)zs_config_params(c);
	ck_assert_mem_eq(back->weights, made->weights, psi * sizeof(float));
	ck_assert_uint_eq(back->world, world);
	ck_assert_uint_eq(back->steps, c->steps);
	ck_assert_uint_eq(back->batch, c->batch);
	ck_assert_uint_eq(back->train.given & ZS_KEY_BIT(ZS_KEY_PRECISION), ZS_KEY_BIT(ZS_KEY_PRECISION));
	ck_assert_int_eq(back->train.precision, c->precision);
	ck_assert_double_eq(back->train.lr, c->lr);
	if (c->tfm != NULL) {
		size_t n = (size_t)c->steps * world * c->batch * (c->tfm->seq + 1);
		ck_assert_ptr_nonnull(back->tfm);
		ck_assert_ptr_nonnull(back->weights_file);
		ck_assert_mem_eq(back->tokens, made->tokens, n * sizeof(int));
		ck_assert_mem_eq(&back->tfm->dims, &c->tfm->dims, sizeof c->tfm->dims);
		ck_assert_uint_eq(back->tfm->seq, c->tfm->seq);
		ck_assert_int_eq(back->tfm->recompute, c->tfm->recompute);
	} else {
		size_t n = (size_t)c->steps * world * c->batch;
		ck_assert_ptr_null(back->tfm);
		ck_assert_mem_eq(back->x, made->x, n * c->widths[0] * sizeof(float));
		ck_assert_mem_eq(back->y, made->y, n * c->widths[c->nwidths - 1] * sizeof(float));
	}
	struct zs_run_options opt = {0};
	struct zs_result seeded, cased;
	ck_assert_msg(engine_run(c, ZS_ZERO3, world, ZS_UNIT_LAYER, NULL, &opt, &seeded, &cause) == 0, "%s", cause);
	ck_assert_msg(engine_run(c, ZS_ZERO3, world, ZS_UNIT_LAYER, back, &opt, &cased, &cause) == 0, "%s", cause);
	ck_assert_uint_eq(seeded.digest, cased.digest);
	for (unsigned t = 0; t < c->steps; t++)
		ck_assert_float_eq(seeded.losses[t], cased.losses[t]);
	engine_result_free(&seeded);
	engine_result_free(&cased);
	if (back->weights_file != NULL)
		unlink(back->weights_file);
	engine_case_free(made);
	engine_case_free(back);
	unlink(path);
}

START_TEST(test_a_written_case_reads_back_and_trains_the_same)
{
	struct zs_config c;
	zs_config_defaults(&c);
	c.widths[0] = 3;
	c.widths[1] = 5;
	c.widths[2] = 2;
	c.nwidths = 3;
	c.steps = 2;
	c.batch = 3;
	c.seed = 7;
	case_round_trip(&c, 3);
	static const char *const configs[] = {
		"{\"model_type\": \"gpt2\", \"n_embd\": 16, \"n_layer\": 2, \"n_head\": 4, \"vocab_size\": 32, "
		"\"n_positions\": 8}",
		"{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 24, \"num_hidden_layers\": 2, "
		"\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 32, \"max_position_embeddings\": 8}",
	};
	for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
		cJSON *j = cJSON_Parse(configs[i]);
		struct zs_tfm_run tr;
		char *cause = NULL;
		memset(&tr, 0, sizeof tr);
		ck_assert_int_eq(zs_model_from_json(j, "test", &tr.hf, &cause), 0);
		cJSON_Delete(j);
		snprintf(tr.name, sizeof tr.name, "tiny");
		tfm_dims_from_config(&tr.dims, &tr.hf);
		tr.seq = 6;
		tr.recompute = ZS_RECOMPUTE_SELECTIVE;
		zs_config_defaults(&c);
		c.tfm = &tr;
		c.precision = ZS_FP32;
		c.batch = 2;
		c.steps = 2;
		c.seed = 5;
		case_round_trip(&c, 2);
	}
}
END_TEST

/* ------------------------------------------------------------------------- */

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *t = tcase_create("fp16");
	tcase_add_test(t, test_fp16_known_bit_patterns);
	tcase_add_test(t, test_fp16_ties_round_to_even);
	tcase_add_test(t, test_fp16_overflow_and_nan);
	tcase_add_test(t, test_fp16_software_agrees_with_the_compiler);
	suite_add_tcase(s, t);
	t = tcase_create("parts");
	tcase_add_test(t, test_tracker_keeps_the_breakdown_at_the_peak);
	tcase_add_test(t, test_layout_gives_each_rank_ceil_n_over_n_slots);
	tcase_add_test(t, test_layout_full_buffers_hold_owned_slots_at_their_own_index);
	tcase_add_test(t, test_layout_frozen_tensors_shard_their_params_only);
	tcase_add_test(t, test_the_memory_bound_holds_every_run);
	tcase_add_test(t, test_the_heap_is_advised_to_huge_pages_as_it_grows);
	tcase_add_test(t, test_reduce_scatter_averages_and_skips_padding);
	suite_add_tcase(s, t);
	t = tcase_create("training");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_layer_kernels_keep_the_documented_order);
	tcase_add_test(t, test_backward_matches_finite_differences);
	tcase_add_test(t, test_adam_step_matches_the_hand_worked_values);
	tcase_add_test(t, test_sgd_momentum_step_matches_the_hand_worked_values);
	tcase_add_test(t, test_optimizer_first_step_needs_no_zeroed_state);
	tcase_add_test(t, test_the_loss_falls_over_fifty_steps);
	suite_add_tcase(s, t);
	t = tcase_create("schemes");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_default_sweep_resident_is_the_paper_floor);
	tcase_add_test(t, test_at_world_one_all_four_schemes_are_the_same);
	tcase_add_test(t, test_weights_are_bitwise_identical_across_schemes);
	tcase_add_test(t, test_default_weights_match_across_schemes_and_units);
	tcase_add_test(t, test_world_three_exceeds_the_floors_by_the_padding);
	tcase_add_test(t, test_zero3_peak_gathering_the_model_is_above_zero2_resident);
	tcase_add_test(t, test_comm_is_equal_for_dp_zero1_zero2_and_half_again_for_zero3);
	suite_add_tcase(s, t);
	t = tcase_create("case");
	tcase_add_test(t, test_a_case_file_fixes_weights_and_batches);
	tcase_add_test(t, test_a_broken_case_file_is_refused_with_a_reason);
	tcase_add_test(t, test_a_written_case_reads_back_and_trains_the_same);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	SRunner *sr = srunner_create(engine_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
