/*
 * QLoRA's 4-bit base (util/nf4.h): the NF4 quantizer against values worked
 * by hand from the published code book, the double quantization's round
 * trip, and the bytes a quantized layer holds against the QLoRA paper's
 * bits per parameter (Dettmers et al. 2023, §2 "Double Quantization":
 * 32/64 = 0.5 bit of fp32 absmax a parameter, 8/64 + 32/(64·256) = 0.127
 * with the absmax in 8 bits and an fp32 constant per 256 blocks).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/nf4.h"

/* The code book's values as the paper prints them (appendix E), not read
 * from nf4.c's table. */
static const double paper_nf4[16] = {
	-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
	-0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
	0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
	0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
};

START_TEST(test_the_code_book_is_the_papers)
{
	for (int k = 0; k < 16; k++)
		ck_assert_float_eq(nf4_code[k], (float)paper_nf4[k]);
}
END_TEST

/* Block 0 (absmax 1): 0.5 lies 0.0593 from 0.4407 (index 12) and 0.0626
 * from 0.5626 (13): 12; -1 is 0; 0.25 is 0.0039 from 0.2461 (10); 0.1 is
 * 0.0204 from 0.0796 (8); 0 is 7; -0.3 is 0.0156 from -0.2844 (4); 0.9
 * is 0.1 from 1 (15), 0.177 from 0.7230; -0.05 is 0.041 from -0.0911 (6),
 * 0.05 from 0. Pairs, the first in the high nibble: 0xC0 0xA8 0x74 0xF6,
 * then zeros: 0x77. Block 1 (absmax 2, from -2): 1.2 scales to 0.6, 0.037
 * from 0.5626 (13); -2 is 0; 0.7 → 0.35, 0.0121 from 0.3379 (11); -0.6 →
 * -0.3 (4): 0xD0 0xB4. */
START_TEST(test_quantize_packs_the_nearest_codes_worked_by_hand)
{
	float w[128] = {0};
	const float b0[8] = {0.5f, -1.0f, 0.25f, 0.1f, 0.0f, -0.3f, 0.9f, -0.05f};
	const float b1[4] = {1.2f, -2.0f, 0.7f, -0.6f};
	memcpy(w, b0, sizeof b0);
	memcpy(w + 64, b1, sizeof b1);
	uint8_t packed[64];
	float absmax[2];
	nf4_quantize(packed, absmax, w, 128);
	ck_assert_float_eq(absmax[0], 1.0f);
	ck_assert_float_eq(absmax[1], 2.0f);
	const uint8_t want[8] = {0xC0, 0xA8, 0x74, 0xF6, 0x77, 0x77, 0x77, 0x77};
	for (int k = 0; k < 8; k++)
		ck_assert_uint_eq(packed[k], want[k]);
	for (int k = 4; k < 32; k++)
		ck_assert_uint_eq(packed[k], 0x77);
	ck_assert_uint_eq(packed[32], 0xD0);
	ck_assert_uint_eq(packed[33], 0xB4);
	ck_assert_uint_eq(packed[34], 0x77);
	/* back: the code times the block's absmax */
	float r[128];
	nf4_dequantize(r, packed, absmax, 128);
	ck_assert_float_eq(r[0], (float)0.44070982933044434);
	ck_assert_float_eq(r[1], -1.0f);
	ck_assert_float_eq(r[2], (float)0.24611230194568634);
	ck_assert_float_eq(r[6], 1.0f);
	ck_assert_float_eq(r[7], (float)-0.09105003625154495);
	ck_assert_float_eq(r[10], 0.0f);
	ck_assert_float_eq(r[64], (float)0.5626170039176941 * 2.0f);
	ck_assert_float_eq(r[65], -2.0f);
	ck_assert_float_eq(r[66], (float)0.33791524171829224 * 2.0f);
	ck_assert_float_eq(r[67], (float)-0.28444138169288635 * 2.0f);
}
END_TEST

/* An odd numel leaves the last low nibble 0 (CUDA's (n + 1) // 2 bytes);
 * an all-zero block is the code's 0, not NaN. */
START_TEST(test_odd_length_and_a_zero_block)
{
	const float w[3] = {1.0f, -1.0f, 0.5f};
	uint8_t p[2];
	float a[1];
	nf4_quantize(p, a, w, 3);
	ck_assert_uint_eq(p[0], 0xF0);
	ck_assert_uint_eq(p[1], 0xC0);
	float z[64] = {0}, r[64];
	uint8_t pz[32];
	nf4_quantize(pz, a, z, 64);
	ck_assert_float_eq(a[0], 0.0f);
	ck_assert_uint_eq(pz[0], 0x77);
	nf4_dequantize(r, pz, a, 64);
	for (int k = 0; k < 64; k++)
		ck_assert_float_eq(r[k], 0.0f);
}
END_TEST

/* create_dynamic_map(signed=True, 7, 8): 127 negatives, 0, 127 positives
 * below 1, and 1. The smallest magnitude is exponent 0's one midpoint,
 * (0.1 + 1)/2 · 10^-6 = 5.5e-7; the largest below 1 is exponent 6's last
 * of 64: 1 − 0.9/64/2 = 0.99296875. */
START_TEST(test_the_dynamic_map_by_its_construction)
{
	float c[256];
	nf4_dynamic_map(c);
	for (int k = 1; k < 256; k++)
		ck_assert(c[k - 1] < c[k]);
	ck_assert_float_eq(c[127], 0.0f);
	ck_assert_float_eq(c[255], 1.0f);
	ck_assert_float_eq_tol(c[128], 5.5e-7f, 1e-12f);
	ck_assert_float_eq_tol(c[126], -5.5e-7f, 1e-12f);
	ck_assert_float_eq_tol(c[254], 0.99296875f, 1e-6f);
	ck_assert_float_eq_tol(c[0], -0.99296875f, 1e-6f);
}
END_TEST

/* Blocks of one absmax: the mean is it, every absmax − offset is 0 (the
 * map's index 127, absmax2 0), and dequantizing gives the offset back
 * exactly — so the weight comes back as without double quantization. */
START_TEST(test_double_quantization_round_trip_of_equal_absmax)
{
	enum { N = 64 * 300 };
	float *w = malloc(N * sizeof *w), *r1 = malloc(N * sizeof *r1), *r2 = malloc(N * sizeof *r2);
	for (int e = 0; e < N; e++)
		w[e] = (e % 64 == 0 ? 0.75f : 0.01f * (float)((e * 7) % 61 - 30) / 30.0f);
	struct nf4_layer a, b;
	nf4_layer_quantize(&a, w, N, 0);
	nf4_layer_quantize(&b, w, N, 1);
	ck_assert_float_eq(b.offset, 0.75f);
	ck_assert_uint_eq(b.qabsmax[0], 127);
	ck_assert_uint_eq(b.qabsmax[299], 127);
	nf4_layer_dequantize(r1, &a);
	nf4_layer_dequantize(r2, &b);
	ck_assert_mem_eq(r1, r2, N * sizeof *r1);
	ck_assert_float_eq(r1[0], 0.75f);
	nf4_layer_free(&a);
	nf4_layer_free(&b);
	free(w), free(r1), free(r2);
}
END_TEST

/* Unequal absmax: the 8-bit absmax is within the map's resolution, so each
 * element's error grows by at most that gap times its code. */
START_TEST(test_double_quantization_keeps_the_absmax_close)
{
	enum { N = 64 * 512 };
	float *w = malloc(N * sizeof *w), *r = malloc(N * sizeof *r);
	uint32_t s = 12345;
	for (int e = 0; e < N; e++) {
		s = s * 1664525u + 1013904223u;
		w[e] = ((float)(s >> 8) / 16777216.0f - 0.5f) * (1.0f + (float)(e / 64 % 5));
	}
	/* the blocks' absmax and their mean, from w */
	float am[N / 64];
	double mean = 0.0, dev = 0.0;
	for (int b = 0; b < N / 64; b++) {
		am[b] = 0.0f;
		for (int k = b * 64; k < b * 64 + 64; k++)
			am[b] = fmaxf(am[b], fabsf(w[k]));
		mean += am[b] / (N / 64);
	}
	for (int b = 0; b < N / 64; b++)
		dev = fmax(dev, fabs(am[b] - mean));
	struct nf4_layer l;
	nf4_layer_quantize(&l, w, N, 1);
	nf4_layer_dequantize(r, &l);
	for (int e = 0; e < N; e++) {
		/* NF4's largest half gap is (1 − 0.6962)/2 = 0.152 of the absmax;
		 * the 8-bit absmax is off by at most the dynamic map's largest
		 * half gap, 0.9/64/2 = 0.00703 of the largest |absmax − mean| */
		float m = am[e / 64];
		ck_assert(fabsf(r[e] - w[e]) <= 0.152f * m + 0.00704f * (float)dev * 1.01f);
	}
	nf4_layer_free(&l);
	free(w), free(r);
}
END_TEST

/* The bytes a 1024 × 4096 layer allocates, per parameter: the paper's
 * 4 + 32/64 = 4.5 bits, and 4 + 8/64 + 32/(64·256) = 4.12695 with double
 * quantization (65,536 blocks: 256 second-level blocks, exactly); the
 * per-layer constants (the 16-entry code, the offset, the map's copy) on
 * top, 64 + 4 + 1,024 B. And what nf4_layer_bytes predicts from the numel
 * alone equals what was allocated. */
START_TEST(test_bits_per_parameter_are_the_papers)
{
	enum { R = 1024, C = 4096 };
	const uint64_t n = (uint64_t)R * C;
	float *w = malloc(n * sizeof *w);
	for (uint64_t e = 0; e < n; e++)
		w[e] = (float)((e * 2654435761u) % 1000) / 1000.0f - 0.5f;
	struct nf4_layer l;
	struct nf4_bytes p;
	nf4_layer_quantize(&l, w, n, 0);
	double bits = (double)(l.b.packed + l.b.absmax) * 8.0 / (double)n;
	ck_assert_double_eq(bits, 4.0 + 32.0 / 64.0);
	ck_assert_uint_eq(l.b.total - l.b.packed - l.b.absmax, 64);
	nf4_layer_bytes(&p, n, 0);
	ck_assert_mem_eq(&p, &l.b, sizeof p);
	nf4_layer_free(&l);

	nf4_layer_quantize(&l, w, n, 1);
	bits = (double)(l.b.packed + l.b.qabsmax + l.b.absmax2) * 8.0 / (double)n;
	ck_assert_double_eq(bits, 4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0));
	ck_assert_double_eq_tol(bits, 4.127, 0.0005);
	ck_assert_uint_eq(l.b.absmax, 0);
	ck_assert_uint_eq(l.b.total - l.b.packed - l.b.qabsmax - l.b.absmax2, 64 + 4 + 1024);
	nf4_layer_bytes(&p, n, 1);
	ck_assert_mem_eq(&p, &l.b, sizeof p);
	nf4_layer_free(&l);
	free(w);
}
END_TEST

static Suite *nf4_suite(void)
{
	Suite *s = suite_create("nf4");
	TCase *t = tcase_create("nf4");
	tcase_add_test(t, test_the_code_book_is_the_papers);
	tcase_add_test(t, test_quantize_packs_the_nearest_codes_worked_by_hand);
	tcase_add_test(t, test_odd_length_and_a_zero_block);
	tcase_add_test(t, test_the_dynamic_map_by_its_construction);
	tcase_add_test(t, test_double_quantization_round_trip_of_equal_absmax);
	tcase_add_test(t, test_double_quantization_keeps_the_absmax_close);
	tcase_add_test(t, test_bits_per_parameter_are_the_papers);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nf4_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
