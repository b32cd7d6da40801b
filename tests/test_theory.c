/*
 * test_theory — the closed-form model against values from outside it:
 *   - the ZeRO paper's Table 1 (Rajbhandari et al., SC'20), every cell for
 *     7.5B, 128B and 1T parameters, compared to the digits the paper prints;
 *   - schedules of a tiny model (layers 2,3,1) worked by hand from
 *     docs/schedule.md, where padding appears at N = 2, 3 and 8;
 *   - relations the docs state: floors = schedule resident when N divides
 *     every unit and differ by the padding otherwise; zero3 sends 1.5x dp's
 *     bytes when p = g; at N = 1 all four schemes are one;
 *   - for transformers, the published parameter counts of the eleven shipped
 *     configs, Korthikanti et al.'s sbh(34 + 5as/h) for gpt2 (89,653,248 B
 *     per layer at s = 1024, b = 1) and for llama-2-13b worked by hand, the
 *     largest micro-batch checked by the peak at b and b + 1, and configs
 *     refused by the key's name.
 * Links libzstheory.a and libzsutil.a only: no engine object.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/config.h"
#include "util/step.h"
#include "util/util.h"

#include "model_lookup.h"

static const enum zs_scheme schemes[] = { ZS_DP, ZS_ZERO1, ZS_ZERO2, ZS_ZERO3 };

/* ------------------------------------------------------------------------ */
/* The ZeRO paper's Table 1 */

static const unsigned table1_worlds[6] = { 1, 4, 16, 64, 256, 1024 };

/* As printed in the paper, GB per device; [scheme][N]. */
struct table1 {
	double params;
	const char *gb[4][6];
};

static const struct table1 table1[] = {
	{ 7.5e9, {
		{ "120", "120", "120", "120", "120", "120" },
		{ "120", "52.5", "35.6", "31.4", "30.4", "30.1" },
		{ "120", "41.3", "21.6", "16.6", "15.4", "15.1" },
		{ "120", "30", "7.5", "1.88", "0.47", "0.12" } } },
	{ 128e9, {
		{ "2048", "2048", "2048", "2048", "2048", "2048" },
		{ "2048", "896", "608", "536", "518", "513" },
		{ "2048", "704", "368", "284", "263", "257" },
		{ "2048", "512", "128", "32", "8", "2" } } },
	{ 1e12, {
		{ "16000", "16000", "16000", "16000", "16000", "16000" },
		{ "16000", "7000", "4750", "4187", "4046", "4011" },
		{ "16000", "5500", "2875", "2218", "2054", "2013" },
		{ "16000", "4000", "1000", "250", "62.5", "15.6" } } },
};

/* One unit in the last digit the paper prints: it rounds (1.875 -> 1.88)
 * and sometimes truncates (4011.7 -> 4011), never more than that. */
static double last_digit(const char *printed)
{
	const char *dot = strchr(printed, '.');

	return dot == NULL ? 1.0 : pow(10.0, -(double)strlen(dot + 1));
}

START_TEST(test_floors_reproduce_every_cell_of_the_papers_table_1)
{
	struct theory_bytes b;

	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	for (size_t m = 0; m < sizeof table1 / sizeof table1[0]; m++)
		for (int s = 0; s < 4; s++)
			for (int w = 0; w < 6; w++) {
				struct theory_floor f;
				const char *printed = table1[m].gb[s][w];

				theory_floor(table1[m].params, schemes[s], table1_worlds[w], &b, &f);
				ck_assert_msg(fabs(f.resident_bytes / 1e9 - strtod(printed, NULL))
				              < last_digit(printed),
				              "Psi=%g %s N=%u: %.6g GB, paper prints %s",
				              table1[m].params, zs_scheme_name(schemes[s]),
				              table1_worlds[w], f.resident_bytes / 1e9, printed);
			}
}
END_TEST

START_TEST(test_mixed_adam_is_two_two_twelve_bytes_per_param)
{
	struct theory_bytes b;

	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	ck_assert_uint_eq(b.p, 2);
	ck_assert_uint_eq(b.g, 2);
	ck_assert_uint_eq(b.k, 12);
	theory_bytes_per_param(ZS_MIXED, ZS_SGD, &b);
	ck_assert_uint_eq(b.k, 8);
	theory_bytes_per_param(ZS_FP32, ZS_ADAM, &b);
	ck_assert_uint_eq(b.p, 4);
	ck_assert_uint_eq(b.g, 4);
	ck_assert_uint_eq(b.k, 8);
	theory_bytes_per_param(ZS_FP32, ZS_SGD, &b);
	ck_assert_uint_eq(b.k, 4);
}
END_TEST

START_TEST(test_floor_comm_tends_to_two_psi_and_three_psi_elements)
{
	struct theory_bytes b;
	struct theory_floor f;
	double psi = 7.5e9;

	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	theory_floor(psi, ZS_DP, 64, &b, &f);
	ck_assert_double_eq_tol(f.comm_elements, 2 * psi * 63 / 64, 1);
	ck_assert_double_eq_tol(f.comm_bytes, 2 * 2 * psi * 63 / 64, 1);
	theory_floor(psi, ZS_ZERO2, 64, &b, &f);
	ck_assert_double_eq_tol(f.comm_elements, 2 * psi * 63 / 64, 1);
	theory_floor(psi, ZS_ZERO3, 64, &b, &f);
	ck_assert_double_eq_tol(f.comm_elements, 3 * psi * 63 / 64, 1);
	ck_assert_double_eq_tol(f.comm_bytes, 3 * 2 * psi * 63 / 64, 1);
	/* docs/formats.md's example: Ψ = 33088, zero3, N = 4 sends 148896 B. */
	theory_floor(33088, ZS_ZERO3, 4, &b, &f);
	ck_assert_double_eq(f.comm_bytes, 148896);
	ck_assert_double_eq(f.comm_elements / 33088, 2.25);
	ck_assert_double_eq(f.resident_bytes, 132352);
	theory_floor(psi, ZS_ZERO3, 1, &b, &f);
	ck_assert_double_eq(f.comm_bytes, 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Hand-worked schedules: layers 2,3,1. Units: layer 0 = 3·2+3 = 9,
 * layer 1 = 1·3+1 = 4; Ψ = 13. With b = 1 and a = 4:
 * A = 4·(d0 + dL + d1 + d2) = 4·(2+1+3+1) = 28; D = 2·4·max(3,1) = 24. */

static const size_t tiny_widths[] = { 2, 3, 1 };

static struct theory_shape tiny(enum zs_precision pr, enum zs_optimizer opt)
{
	struct theory_shape s = { tiny_widths, 3, 1, { 0 } };

	theory_bytes_per_param(pr, opt, &s.bytes);
	return s;
}

static struct theory_schedule sched(const struct theory_shape *s, enum zs_scheme scheme,
                                    enum zs_unit unit, unsigned n)
{
	struct theory_schedule out;

	theory_schedule(s, scheme, unit, n, &out);
	return out;
}

START_TEST(test_tiny_model_has_thirteen_params_in_units_of_nine_and_four)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_ADAM);
	struct theory_schedule r = sched(&s, ZS_ZERO3, ZS_UNIT_LAYER, 2);

	struct step_params p;
	size_t n;

	ck_assert_uint_eq(theory_params(&s), 13);
	ck_assert_uint_eq(r.nunits, 2);
	step_params_mlp(&p, s.widths, s.nwidths);
	uint64_t *u = theory_units_list(&p, ZS_UNIT_LAYER, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(u[0], 9);
	ck_assert_uint_eq(u[1], 4);
	free(u);
	r = sched(&s, ZS_ZERO3, ZS_UNIT_MODEL, 2);
	ck_assert_uint_eq(r.nunits, 1);
	u = theory_units_list(&p, ZS_UNIT_MODEL, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(u[0], 13);
	free(u);
	step_params_free(&p);
}
END_TEST

START_TEST(test_tiny_model_at_two_ranks_pads_thirteen_to_fourteen)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_ADAM);
	struct theory_schedule r;

	/* S = ceil(13/2) = 7 (model) = ceil(9/2) + ceil(4/2) = 5 + 2 (layer). */
	for (int u = 0; u < 2; u++) {
		r = sched(&s, ZS_DP, (enum zs_unit)u, 2);
		ck_assert_uint_eq(r.shard_elements, 7);
		ck_assert_uint_eq(r.padded_elements, 14);
		ck_assert_uint_eq(r.resident_bytes, 13 * 16);          /* 208 */
		ck_assert_uint_eq(r.peak_bytes, 208 + 28 + 24);
		ck_assert_uint_eq(r.comm_bytes, 2 * 7 * 2);            /* 2·f·P·g */
		ck_assert_uint_eq(r.comm_elements, 14);

		r = sched(&s, ZS_ZERO1, (enum zs_unit)u, 2);
		ck_assert_uint_eq(r.resident_bytes, 13 * 4 + 7 * 12);  /* 136 */
		ck_assert_uint_eq(r.peak_bytes, 136 + 28 + 24);
		ck_assert_uint_eq(r.comm_bytes, 7 * (2 + 2));
		ck_assert_double_eq(r.padding_bytes, 1.0 * 12 / 2);

		r = sched(&s, ZS_ZERO2, (enum zs_unit)u, 2);
		ck_assert_uint_eq(r.resident_bytes, 13 * 2 + 7 * 14);  /* 124 */
		ck_assert_uint_eq(r.peak_bytes, 124 + 28 + 24 + 13 * 2);
		ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_FULL_GRADS], 26);
		ck_assert_uint_eq(r.comm_bytes, 28);
	}

	r = sched(&s, ZS_ZERO3, ZS_UNIT_MODEL, 2);
	ck_assert_uint_eq(r.resident_bytes, 7 * 16);               /* 112 */
	ck_assert_uint_eq(r.peak_bytes, 112 + 28 + 24 + 13 * 4);   /* 216 */
	ck_assert_uint_eq(r.comm_bytes, 7 * (2 * 2 + 2));          /* 42 */
	ck_assert_uint_eq(r.comm_elements, 21);
	ck_assert_double_eq(r.padding_bytes, 1.0 * 16 / 2);

	/* unit=layer: the transient is the 9-element layer, not the model. */
	r = sched(&s, ZS_ZERO3, ZS_UNIT_LAYER, 2);
	ck_assert_uint_eq(r.resident_bytes, 112);
	ck_assert_uint_eq(r.peak_bytes, 112 + 28 + 24 + 9 * 4);    /* 200 */
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_PARAM16], 14);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_GRAD16], 14);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_MASTER32], 28);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_ADAM_M], 28);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_ADAM_V], 28);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_MOMENTUM], 0);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_PARAM32], 0);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_GRAD32], 0);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_GATHERED], 18);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_FULL_GRADS], 18);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_ACTIVATIONS], 28);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_SCRATCH], 24);
}
END_TEST

START_TEST(test_tiny_model_at_three_ranks_pads_to_fifteen)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_ADAM);
	struct theory_schedule r;
	struct theory_floor f;

	/* S = ceil(13/3) = 5 = ceil(9/3) + ceil(4/3) = 3 + 2; P = 15. */
	r = sched(&s, ZS_ZERO1, ZS_UNIT_MODEL, 3);
	ck_assert_uint_eq(r.shard_elements, 5);
	ck_assert_uint_eq(r.padded_elements, 15);
	ck_assert_uint_eq(r.resident_bytes, 52 + 5 * 12);          /* 112 */
	ck_assert_uint_eq(r.comm_bytes, 2 * 5 * 4);                /* f·P·(g+p) */
	theory_floor(13, ZS_ZERO1, 3, &s.bytes, &f);
	ck_assert_double_eq(f.resident_bytes, 104);                /* 52 + 156/3 */
	ck_assert_double_eq(r.padding_bytes, 8);                   /* 2·12/3 */

	r = sched(&s, ZS_DP, ZS_UNIT_LAYER, 3);
	ck_assert_uint_eq(r.comm_bytes, 2 * 2 * 5 * 2);            /* 40 */
	theory_floor(13, ZS_DP, 3, &s.bytes, &f);
	ck_assert_double_eq_tol(f.comm_bytes, 2.0 * 13 * 2 * 2 / 3, 1e-9);

	r = sched(&s, ZS_ZERO3, ZS_UNIT_LAYER, 3);
	ck_assert_uint_eq(r.resident_bytes, 5 * 16);               /* 80 */
	ck_assert_uint_eq(r.peak_bytes, 80 + 28 + 24 + 9 * 4);     /* 168 */
	ck_assert_uint_eq(r.comm_bytes, 2 * 5 * 6);                /* 60 */
	ck_assert_uint_eq(r.comm_elements, 30);
}
END_TEST

START_TEST(test_tiny_model_at_eight_ranks_pads_layers_more_than_the_model)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_ADAM);
	struct theory_schedule r;

	/* model: ceil(13/8) = 2; layer: ceil(9/8) + ceil(4/8) = 2 + 1 = 3. */
	r = sched(&s, ZS_ZERO3, ZS_UNIT_MODEL, 8);
	ck_assert_uint_eq(r.padded_elements, 16);
	ck_assert_uint_eq(r.resident_bytes, 2 * 16);
	ck_assert_uint_eq(r.peak_bytes, 32 + 28 + 24 + 13 * 4);
	ck_assert_uint_eq(r.comm_bytes, 7 * 2 * 6);
	r = sched(&s, ZS_ZERO3, ZS_UNIT_LAYER, 8);
	ck_assert_uint_eq(r.padded_elements, 24);
	ck_assert_uint_eq(r.resident_bytes, 3 * 16);
	ck_assert_uint_eq(r.peak_bytes, 48 + 28 + 24 + 9 * 4);
	ck_assert_uint_eq(r.comm_bytes, 7 * 3 * 6);
	ck_assert_double_eq(r.padding_bytes, 11.0 * 16 / 8);
}
END_TEST

START_TEST(test_fp32_sgd_keeps_only_momentum_and_no_master_copy)
{
	struct theory_shape s = tiny(ZS_FP32, ZS_SGD);
	struct theory_schedule r = sched(&s, ZS_DP, ZS_UNIT_MODEL, 1);

	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_PARAM32], 52);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_GRAD32], 52);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_MOMENTUM], 52);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_MASTER32], 0);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_PARAM16], 0);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_ADAM_M], 0);
	ck_assert_uint_eq(r.resident_bytes, 13 * 12);
	ck_assert_uint_eq(r.peak_bytes, 156 + 28 + 24);

	/* zero2 at N = 2: params full 13·4, grads and momentum 7·4 each;
	 * full fp32 grads 13·4 during backward. */
	r = sched(&s, ZS_ZERO2, ZS_UNIT_MODEL, 2);
	ck_assert_uint_eq(r.resident_bytes, 52 + 28 + 28);
	ck_assert_uint_eq(r.peak_bytes, 108 + 28 + 24 + 52);
	ck_assert_uint_eq(r.comm_bytes, 7 * 8);
}
END_TEST

START_TEST(test_mixed_sgd_keeps_master_and_momentum)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_SGD);
	struct theory_schedule r = sched(&s, ZS_ZERO1, ZS_UNIT_MODEL, 2);

	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_MASTER32], 28);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_MOMENTUM], 28);
	ck_assert_uint_eq(r.resident_breakdown[ZS_CAT_ADAM_V], 0);
	ck_assert_uint_eq(r.resident_bytes, 52 + 56);
}
END_TEST

START_TEST(test_activations_and_scratch_grow_with_the_batch)
{
	struct theory_shape s = tiny(ZS_MIXED, ZS_ADAM);
	struct theory_schedule r;

	s.batch = 4;
	r = sched(&s, ZS_ZERO1, ZS_UNIT_MODEL, 2);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_ACTIVATIONS], 4 * 28);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_SCRATCH], 4 * 24);
	ck_assert_uint_eq(r.peak_bytes, 136 + 4 * 52);
}
END_TEST

START_TEST(test_default_model_has_33088_params_and_the_documented_zero3_row)
{
	static const size_t widths[] = { 64, 256, 64 };
	struct theory_shape s = { widths, 3, 4, { 0 } };
	struct theory_schedule r;

	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &s.bytes);
	ck_assert_uint_eq(theory_params(&s), 33088);
	r = sched(&s, ZS_ZERO3, ZS_UNIT_MODEL, 4);
	/* docs/formats.md's example row: 8272 elements per shard, no padding. */
	ck_assert_uint_eq(r.shard_elements, 8272);
	ck_assert_uint_eq(r.resident_bytes, 132352);
	ck_assert_uint_eq(r.comm_bytes, 148896);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_GATHERED], 66176);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_FULL_GRADS], 66176);
	/* A = 4·4·(64 + 64 + 256 + 64), D = 2·4·4·256. */
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_ACTIVATIONS], 7168);
	ck_assert_uint_eq(r.peak_breakdown[ZS_CAT_SCRATCH], 8192);
	ck_assert_uint_eq(r.peak_bytes, 132352 + 2 * 66176 + 7168 + 8192);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Relations between floors and schedule */

static const size_t shape_a[] = { 2, 3, 1 };
static const size_t shape_b[] = { 4, 8, 4 };            /* units 40, 36 */
static const size_t shape_c[] = { 64, 256, 256, 256, 64 };
static const size_t shape_d[] = { 64, 256, 64 };

static const struct { const size_t *w; size_t n; } shapes[] = {
	{ shape_a, 3 }, { shape_b, 3 }, { shape_c, 5 }, { shape_d, 3 },
};

/* Bytes per param that a scheme shards, from the ZeRO paper's table (§5). */
static unsigned sharded(enum zs_scheme scheme, const struct theory_bytes *b)
{
	switch (scheme) {
	case ZS_ZERO1: return b->k;
	case ZS_ZERO2: return b->g + b->k;
	case ZS_ZERO3: return b->p + b->g + b->k;
	case ZS_DP:
	default: return 0;
	}
}

START_TEST(test_floors_equal_schedule_when_n_divides_every_unit_and_differ_by_the_padding_otherwise)
{
	int exact = 0, padded = 0;

	for (size_t m = 0; m < sizeof shapes / sizeof shapes[0]; m++)
		for (int pr = 0; pr < 2; pr++)
			for (int opt = 0; opt < 2; opt++)
				for (int u = 0; u < 2; u++)
					for (unsigned n = 1; n <= 32; n++)
						for (int sc = 0; sc < 4; sc++) {
		struct theory_shape s = { shapes[m].w, shapes[m].n, 2, { 0 } };
		struct theory_schedule r;
		struct theory_floor f;
		uint64_t psi = 0, padded_len = 0;
		int divides = 1;

		theory_bytes_per_param((enum zs_precision)pr, (enum zs_optimizer)opt, &s.bytes);
		/* Units and their padding, counted here and not by the theory. */
		for (size_t l = 0; l + 1 < s.nwidths; l++) {
			uint64_t nu = s.widths[l] * s.widths[l + 1] + s.widths[l + 1];

			psi += nu;
			if (u == ZS_UNIT_LAYER) {
				padded_len += (nu + n - 1) / n * n;
				divides &= nu % n == 0;
			}
		}
		if (u == ZS_UNIT_MODEL) {
			padded_len = (psi + n - 1) / n * n;
			divides = psi % n == 0;
		}
		r = sched(&s, schemes[sc], (enum zs_unit)u, n);
		theory_floor((double)psi, schemes[sc], n, &s.bytes, &f);
		if (divides) {
			ck_assert_double_eq((double)r.resident_bytes, f.resident_bytes);
			ck_assert_double_eq(r.padding_bytes, 0);
			exact++;
		} else {
			double pad = (double)((padded_len - psi) * sharded(schemes[sc], &s.bytes)) / n;

			ck_assert_double_eq_tol((double)r.resident_bytes - f.resident_bytes, pad, 1e-6);
			ck_assert_double_eq_tol(r.padding_bytes, pad, 1e-9);
			padded += schemes[sc] != ZS_DP;
		}
		/* The peak is the resident state plus transients. */
		uint64_t sum = 0;
		for (int c = 0; c < ZS_NCATS; c++)
			sum += r.peak_breakdown[c];
		ck_assert_uint_eq(sum, r.peak_bytes);
		ck_assert_uint_ge(r.peak_bytes, r.resident_bytes);
	}
	/* Both branches ran. */
	ck_assert_int_gt(exact, 100);
	ck_assert_int_gt(padded, 100);
}
END_TEST

START_TEST(test_zero3_sends_one_and_a_half_times_dp_when_p_equals_g)
{
	for (size_t m = 0; m < sizeof shapes / sizeof shapes[0]; m++)
		for (int pr = 0; pr < 2; pr++)
			for (unsigned n = 1; n <= 32; n++) {
				struct theory_shape s = { shapes[m].w, shapes[m].n, 1, { 0 } };
				struct theory_schedule dp, z3;
				struct theory_floor fdp, fz3;

				theory_bytes_per_param((enum zs_precision)pr, ZS_ADAM, &s.bytes);
				ck_assert_uint_eq(s.bytes.p, s.bytes.g);
				dp = sched(&s, ZS_DP, ZS_UNIT_LAYER, n);
				z3 = sched(&s, ZS_ZERO3, ZS_UNIT_LAYER, n);
				ck_assert_uint_eq(2 * z3.comm_bytes, 3 * dp.comm_bytes);
				theory_floor((double)theory_params(&s), ZS_DP, n, &s.bytes, &fdp);
				theory_floor((double)theory_params(&s), ZS_ZERO3, n, &s.bytes, &fz3);
				ck_assert_double_eq_tol(fz3.comm_bytes, 1.5 * fdp.comm_bytes, 1e-6);
			}
}
END_TEST

START_TEST(test_at_one_rank_all_four_schemes_are_the_same)
{
	for (size_t m = 0; m < sizeof shapes / sizeof shapes[0]; m++)
		for (int pr = 0; pr < 2; pr++)
			for (int opt = 0; opt < 2; opt++)
				for (int u = 0; u < 2; u++) {
		struct theory_shape s = { shapes[m].w, shapes[m].n, 3, { 0 } };
		struct theory_schedule dp = { 0 }, r;
		struct theory_floor fdp, f;

		theory_bytes_per_param((enum zs_precision)pr, (enum zs_optimizer)opt, &s.bytes);
		dp = sched(&s, ZS_DP, (enum zs_unit)u, 1);
		theory_floor((double)dp.params, ZS_DP, 1, &s.bytes, &fdp);
		ck_assert_uint_eq(dp.comm_bytes, 0);
		ck_assert_double_eq((double)dp.resident_bytes, fdp.resident_bytes);
		for (int sc = 1; sc < 4; sc++) {
			r = sched(&s, schemes[sc], (enum zs_unit)u, 1);
			theory_floor((double)dp.params, schemes[sc], 1, &s.bytes, &f);
			ck_assert_uint_eq(r.resident_bytes, dp.resident_bytes);
			ck_assert_uint_eq(r.peak_bytes, dp.peak_bytes);
			ck_assert_uint_eq(r.comm_bytes, 0);
			ck_assert_mem_eq(r.peak_breakdown, dp.peak_breakdown, sizeof r.peak_breakdown);
			ck_assert_double_eq(f.resident_bytes, fdp.resident_bytes);
			ck_assert_double_eq(f.comm_bytes, 0);
		}
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* theory.json and the text table */

static struct zs_config paper_config(void)
{
	struct zs_config c;
	static const unsigned worlds[] = { 1, 4, 16, 64, 256, 1024 };

	zs_config_defaults(&c);
	c.nworld = 6;
	memcpy(c.world, worlds, sizeof worlds);
	return c;
}

START_TEST(test_json_has_one_row_per_scheme_unit_and_world_in_that_order)
{
	struct zs_config c;
	struct theory_request req = { .config = &c, .shape_known = 1 };
	cJSON *root, *rows, *row, *sched, *bd;
	static const char *const cats[] = {
		"param16", "param32", "grad16", "grad32", "master32", "adam_m", "adam_v",
		"momentum", "gathered_params", "full_grads", "activations", "scratch",
	};

	zs_config_defaults(&c);
	c.nunits = 2;
	c.units[0] = ZS_UNIT_MODEL;
	c.units[1] = ZS_UNIT_LAYER;
	root = theory_json(&req);
	ck_assert_str_eq(cJSON_GetObjectItem(root, "format")->valuestring, "zerosim-theory/1");
	ck_assert_double_eq(cJSON_GetObjectItem(root, "params")->valuedouble, 33088);
	rows = cJSON_GetObjectItem(root, "rows");
	ck_assert_int_eq(cJSON_GetArraySize(rows), (int)(c.nschemes * 2 * c.nworld));

	/* schemes x units x worlds: row 1 is dp/model/N=2, row nworld is dp/layer. */
	row = cJSON_GetArrayItem(rows, 1);
	ck_assert_str_eq(cJSON_GetObjectItem(row, "scheme")->valuestring, "dp");
	ck_assert_str_eq(cJSON_GetObjectItem(row, "unit")->valuestring, "model");
	ck_assert_double_eq(cJSON_GetObjectItem(row, "world")->valuedouble, 2);
	row = cJSON_GetArrayItem(rows, (int)c.nworld);
	ck_assert_str_eq(cJSON_GetObjectItem(row, "unit")->valuestring, "layer");
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(row, "fits")));

	/* The last row is zero3/layer/N=32; every category is present. */
	row = cJSON_GetArrayItem(rows, cJSON_GetArraySize(rows) - 1);
	ck_assert_str_eq(cJSON_GetObjectItem(row, "scheme")->valuestring, "zero3");
	sched = cJSON_GetObjectItem(row, "schedule");
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(sched, "peak_bytes"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(sched, "comm_bytes_per_rank_per_step"));
	ck_assert_ptr_nonnull(cJSON_GetObjectItem(cJSON_GetObjectItem(row, "floor"), "resident_bytes"));
	bd = cJSON_GetObjectItem(sched, "peak_breakdown");
	ck_assert_int_eq(cJSON_GetArraySize(bd), 12);
	for (size_t i = 0; i < 12; i++)
		ck_assert_msg(cJSON_IsNumber(cJSON_GetObjectItem(bd, cats[i])), "no %s", cats[i]);
	/* Layer 0 is the largest unit: 256·64 + 256 = 16640 elements, against
	 * layer 1's 64·256 + 64 = 16448; gathered at 2 bytes each. */
	ck_assert_double_eq(cJSON_GetObjectItem(bd, "gathered_params")->valuedouble, 16640 * 2);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_json_for_a_count_has_no_schedule_but_the_zero3_transient)
{
	struct zs_config c = paper_config();
	struct theory_request req = { .config = &c, .params = 7.5e9,
	                              .largest_unit = 1e9, .device_mem = 80e9 };
	cJSON *root = theory_json(&req), *rows, *row;

	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "config"), "layers")));
	rows = cJSON_GetObjectItem(root, "rows");
	ck_assert_int_eq(cJSON_GetArraySize(rows), 24);
	row = cJSON_GetArrayItem(rows, 0);              /* dp, N = 1: 120 GB */
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(row, "schedule")));
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(row, "fits")));
	row = cJSON_GetArrayItem(rows, 6 + 3);          /* zero1, N = 64: 31.4 GB */
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(row, "fits")));
	row = cJSON_GetArrayItem(rows, 18 + 3);         /* zero3, N = 64 */
	ck_assert_double_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(row, "schedule"),
	                                        "transient_bytes")->valuedouble, 4e9);
	ck_assert_double_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(row, "floor"),
	                                        "resident_bytes")->valuedouble, 1.875e9);
	cJSON_Delete(root);
}
END_TEST

START_TEST(test_text_prints_table_1_and_where_each_scheme_fits)
{
	struct zs_config c = paper_config();
	struct theory_request req = { .config = &c, .params = 7.5e9, .device_mem = 32e9 };
	char *text = theory_text(&req);

	ck_assert_msg(strstr(text, "      64        120       31.4       16.6       1.88\n") != NULL,
	              "%s", text);
	ck_assert_msg(strstr(text, "    1024        120       30.1       15.1      0.117\n") != NULL,
	              "%s", text);
	/* 32 GB: dp never; zero1 from 31.4 (N = 64); zero2 from 21.6 (N = 16);
	 * zero3 from 30 (N = 4). */
	ck_assert_msg(strstr(text, "dp     none\n") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "zero1  N = 64\n") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "zero2  N = 16\n") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "zero3  N = 4\n") != NULL, "%s", text);
	free(text);
}
END_TEST

START_TEST(test_mlp_largest_batch_on_200kb_worked_by_hand)
{
	static const size_t widths[] = { 64, 256, 64 };
	struct zs_config c;
	struct theory_request req = { .config = &c, .shape_known = 1, .device_mem = 200e3 };
	struct theory_row r;

	zs_config_defaults(&c);
	memcpy(c.widths, widths, sizeof widths);
	c.nwidths = 3;
	/* zero1, N = 8, unit=model: R = 33088·4 + 4136·12 = 181,984 B; per
	 * batch row 4·(64+64+256+64) + 2·4·256 = 3,840 B; (200,000 - 181,984)
	 * / 3,840 = 4.69, so 4, and batch 4 peaks at 197,344 B. */
	theory_row(&req, ZS_ZERO1, ZS_UNIT_MODEL, 8, &r);
	ck_assert_uint_eq(r.peak_fixed, 181984);
	ck_assert_uint_eq(r.peak_per_batch, 3840);
	ck_assert_uint_eq(r.max_batch, 4);
	ck_assert_int_eq(r.fits_peak, 1);
	/* zero2, N = 16: 2Ψ + 2068·14 + the full grads 2Ψ = 161,304 B;
	 * (200,000 - 161,304) / 3,840 = 10.08, so 10. */
	theory_row(&req, ZS_ZERO2, ZS_UNIT_MODEL, 16, &r);
	ck_assert_uint_eq(r.peak_fixed, 161304);
	ck_assert_uint_eq(r.max_batch, 10);
	/* --reserve holds back 20 KB: (180,000 - 161,304) / 3,840 = 4.87. */
	req.reserve = 20e3;
	theory_row(&req, ZS_ZERO2, ZS_UNIT_MODEL, 16, &r);
	ck_assert_uint_eq(r.max_batch, 4);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Transformers: published parameter counts, Korthikanti's formula by hand */

START_TEST(test_shipped_models_have_their_published_parameter_counts)
{
	/* From the models' cards and papers (Radford et al. 2019 as counted by
	 * transformers; Touvron et al. 2023; Meta's Llama 3; Mistral 7B).
	 * qwen2.5-7b, qwen3-8b and gemma-2-9b: the count of the config.json
	 * shipped (test_new_shipped_models_round_to_their_cards_digits holds
	 * it to each card's printed figure, 7.61B, 8.2B, 9.24B). Those files'
	 * text as vendored from the Hub: Qwen2.5-7B's and Qwen3-8B's in
	 * citsjtu2020/LLM-Prof sglang/Model_Config.md, Qwen3-8B's again
	 * (ModelScope's copy, and in a FLUX.2 text encoder's
	 * QWEN3_8B_CONFIG_JSON) byte for byte; gemma-2-9b's as a Python dict
	 * beside torchKQI's benchmarks (True/False as JSON's true/false), its
	 * keys and numbers those transformers prints for google/gemma-2-9b. */
	static const struct { const char *name; uint64_t params; } published[] = {
		{ "gpt2", 124439808ull }, { "gpt2-medium", 354823168ull },
		{ "gpt2-large", 774030080ull }, { "gpt2-xl", 1557611200ull },
		{ "llama-2-7b", 6738415616ull }, { "llama-2-13b", 13015864320ull },
		{ "llama-2-70b", 68976648192ull }, { "llama-3-8b", 8030261248ull },
		{ "llama-3-70b", 70553706496ull }, { "mistral-7b", 7241732096ull },
		{ "qwen2.5-0.5b", 494032768ull }, { "phi-3-mini-4k", 3821079552ull },
		{ "qwen3-0.6b", 596049920ull }, { "gemma-2-2b", 2614341888ull },
		{ "gemma-3-1b", 999885952ull }, { "qwen2.5-7b", 7615616512ull },
		{ "qwen3-8b", 8190735360ull }, { "gemma-2-9b", 9241705984ull },
	};

	for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
		struct zs_model m = shipped(published[i].name);
		ck_assert_msg(theory_tfm_params(&m) == published[i].params, "%s: %llu, published %llu",
		              published[i].name, (unsigned long long)theory_tfm_params(&m),
		              (unsigned long long)published[i].params);
	}
}
END_TEST

/* The step description's tensors are Hugging Face's: the names and shapes
 * of GPT2LMHeadModel's named_parameters() for openai-community/gpt2 (148,
 * the tied lm_head not repeated; Conv1D weights (in, out)), and
 * Llama-3-8B's, whose k_proj and v_proj have 1024 rows (8 key-value heads
 * of 128) in its published model.safetensors index (named(): model_lookup.h). */

START_TEST(test_gpt2_description_has_hugging_faces_148_tensors_and_shapes)
{
	struct zs_model m = shipped("gpt2");
	struct step_params p;

	step_params_build(&p, &m);
	ck_assert_uint_eq(p.ntensors, 148);
	ck_assert_uint_eq(p.numel, 124439808ull);
	const struct step_tensor *t = named(&p, "transformer.h.0.attn.c_attn.weight");
	ck_assert_uint_eq(t->shape[0], 768);
	ck_assert_uint_eq(t->shape[1], 2304);
	t = named(&p, "transformer.h.11.mlp.c_proj.weight");
	ck_assert_uint_eq(t->shape[0], 3072);
	ck_assert_uint_eq(t->shape[1], 768);
	ck_assert_uint_eq(named(&p, "transformer.wpe.weight")->numel, 1024 * 768);
	ck_assert_uint_eq(named(&p, "transformer.ln_f.bias")->ndim, 1);
	/* 2 tables, 6 modules a block, ln_f and the tied lm_head (the token table) */
	ck_assert_uint_eq(p.nmodules, 2 + 6 * 12 + 2);
	char buf[128];
	ck_assert_str_eq(step_module_name(&p, p.nmodules - 1, buf, sizeof buf), "lm_head");
	ck_assert_uint_eq(p.module[p.nmodules - 1].first, 0);
	ck_assert_str_eq(step_module_name(&p, p.nmodules - 2, buf, sizeof buf), "transformer.ln_f");
	/* DeepSpeed's L: wte's 50257 x 768 (docs/schedule.md) */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 38597376ull);
	step_params_free(&p);
}
END_TEST

START_TEST(test_llama_3_8b_description_fuses_q_k_v_and_gate_up_as_named)
{
	struct zs_model m = shipped("llama-3-8b");
	struct step_params p;

	step_params_build(&p, &m);
	const struct step_tensor *t = named(&p, "model.layers.31.self_attn.{q,k,v}_proj.weight");
	ck_assert_uint_eq(t->nparts, 3);
	ck_assert_uint_eq(t->part_rows[0], 4096);
	ck_assert_uint_eq(t->part_rows[1], 1024);
	ck_assert_uint_eq(t->part_rows[2], 1024);
	ck_assert_uint_eq(t->shape[1], 4096);
	t = named(&p, "model.layers.0.mlp.{gate,up}_proj.weight");
	ck_assert_uint_eq(t->part_rows[0], 14336);
	ck_assert_uint_eq(t->shape[0], 2 * 14336);
	ck_assert_uint_eq(named(&p, "lm_head.weight")->shape[0], 128256);
	ck_assert_uint_eq(p.layer[0].numel + 32 * p.layer[1].numel + p.layer[33].numel, 8030261248ull);
	/* the largest nn.Module: the untied head or the table, 128256 x 4096 */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 525336576ull);
	step_params_free(&p);
}
END_TEST

START_TEST(test_llama_3_8b_head_unit_is_larger_than_its_embedding_and_twice_a_block)
{
	struct zs_model m = shipped("llama-3-8b");
	struct theory_units u;

	theory_tfm_units(&m, &u);
	ck_assert_uint_eq(u.embeddings, 525336576ull);        /* 128256 x 4096 */
	ck_assert_uint_eq(u.head, 525340672ull);              /* + the final RMSNorm's 4096 */
	ck_assert_uint_eq(u.block, 218112000ull);
	ck_assert_uint_eq(u.layers, 32);
}
END_TEST

START_TEST(test_gpt2_tied_head_puts_the_final_norm_in_the_embeddings_unit)
{
	struct zs_model m = shipped("gpt2");
	struct theory_units u;

	theory_tfm_units(&m, &u);
	/* 50257 x 768 + 1024 x 768 + the final LayerNorm's 2 x 768. */
	ck_assert_uint_eq(u.embeddings, 38597376ull + 786432ull + 1536ull);
	ck_assert_uint_eq(u.head, 0);
	ck_assert_uint_eq(u.block, 12ull * 768 * 768 + 13 * 768);
}
END_TEST

START_TEST(test_gpt2_activations_are_korthikantis_89653248_bytes_per_layer)
{
	struct zs_model m = shipped("gpt2");
	struct theory_act_opts o = { .seq = 1024, .recompute = ZS_RECOMPUTE_NONE, .elem = 2 };
	uint64_t t[THEORY_NACTS];

	/* sbh(34 + 5as/h) = 1024·768·(34 + 5·12·1024/768) = 786432·114. */
	ck_assert_uint_eq(theory_layer_activations(&m, &o, 1), 89653248ull);
	theory_activations(&m, &o, 1, t);
	ck_assert_uint_eq(t[THEORY_ACT_LAYERS], 1075838976ull);
}
END_TEST

START_TEST(test_llama_2_13b_activations_worked_by_hand)
{
	struct zs_model m = shipped("llama-2-13b");
	struct theory_act_opts o = { .seq = 4096, .recompute = ZS_RECOMPUTE_NONE, .elem = 2 };
	uint64_t t[THEORY_NACTS], sum;

	/* s = 4096, b = 2, h = 5120, a = 40: sbh = 41,943,040 and
	 * 5as/h = 5·40·4096/5120 = 160, so a layer holds 41,943,040·194 =
	 * 8,136,949,760 B; 40 layers 325,477,990,400 B. */
	ck_assert_uint_eq(theory_layer_activations(&m, &o, 2), 8136949760ull);
	/* Selective: 34sbh = 1,426,063,360; full: 2sbh = 83,886,080. */
	o.recompute = ZS_RECOMPUTE_SELECTIVE;
	ck_assert_uint_eq(theory_layer_activations(&m, &o, 2), 1426063360ull);
	o.recompute = ZS_RECOMPUTE_FULL;
	ck_assert_uint_eq(theory_layer_activations(&m, &o, 2), 83886080ull);
	/* Flash attention drops the scores: 34sbh without recomputation. */
	o.recompute = ZS_RECOMPUTE_NONE;
	o.flash = 1;
	ck_assert_uint_eq(theory_layer_activations(&m, &o, 2), 1426063360ull);
	o.flash = 0;
	/* Outside the layers: no dropout in llama; 2sbh twice; the fp32 logits
	 * and their gradient, 4sbv = 4·4096·2·32000 = 1,048,576,000 each. */
	sum = theory_activations(&m, &o, 2, t);
	ck_assert_uint_eq(t[THEORY_ACT_LAYERS], 325477990400ull);
	ck_assert_uint_eq(t[THEORY_ACT_EMBEDDING_DROPOUT], 0);
	ck_assert_uint_eq(t[THEORY_ACT_FINAL_NORM_INPUT], 83886080ull);
	ck_assert_uint_eq(t[THEORY_ACT_HEAD_INPUT], 83886080ull);
	ck_assert_uint_eq(t[THEORY_ACT_LOGITS], 1048576000ull);
	ck_assert_uint_eq(t[THEORY_ACT_LOGITS_GRAD], 1048576000ull);
	ck_assert_uint_eq(sum, 325477990400ull + 2 * 83886080ull + 2 * 1048576000ull);
}
END_TEST

/* gpt2 at s = 1024, b = 1: sbh = 786,432, as²b = 12,582,912. Of a layer's
 * 34sbh + 5as²b the dropout masks (2sbh, as²b) are 1 byte whatever the
 * precision; the rest, 32sbh + 4as²b = 75,497,472, doubles in fp32:
 * 2 × 75,497,472 + 1,572,864 + 12,582,912 = 165,150,720. */
START_TEST(test_fp32_doubles_every_two_byte_activation)
{
	struct zs_model m = shipped("gpt2");
	struct theory_act_opts o = { .seq = 1024, .recompute = ZS_RECOMPUTE_NONE, .elem = 4 };

	ck_assert_uint_eq(theory_layer_activations(&m, &o, 1), 165150720ull);
}
END_TEST

/* The largest micro-batch is exact: its peak fits, one more does not
 * (checked by computing the peak at both batches, not by the solver). */
START_TEST(test_largest_micro_batch_fits_and_one_more_does_not)
{
	static const char *const names[] = { "gpt2", "llama-2-7b", "llama-3-8b" };
	static const enum zs_recompute rcs[] = { ZS_RECOMPUTE_SELECTIVE, ZS_RECOMPUTE_FULL };
	struct zs_config c;
	struct theory_bytes b;

	zs_config_defaults(&c);
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	for (size_t i = 0; i < 3; i++) {
		struct zs_model m = shipped(names[i]);
		for (size_t k = 0; k < 2; k++) {
			struct theory_act_opts o = { .seq = 1024, .recompute = rcs[k], .elem = 2 };
			struct theory_request req = { .config = &c, .model = &m, .act = o,
			                              .device_mem = 80e9, .reserve = 3e9 };
			for (unsigned w = 1; w <= 64; w *= 4)
				for (int s = 0; s < 4; s++) {
					struct theory_row r;
					struct theory_peak at, above;

					theory_row(&req, schemes[s], ZS_UNIT_LAYER, w, &r);
					theory_tfm_peak(&m, &o, &b, r.max_batch + 1, schemes[s], ZS_UNIT_LAYER, w, &above);
					ck_assert_msg((double)above.peak_bytes > 77e9, "%s %s N=%u: b = %llu + 1 fits too",
					              names[i], zs_scheme_name(schemes[s]), w,
					              (unsigned long long)r.max_batch);
					if (r.max_batch == 0)
						continue;
					theory_tfm_peak(&m, &o, &b, r.max_batch, schemes[s], ZS_UNIT_LAYER, w, &at);
					ck_assert_msg((double)at.peak_bytes <= 77e9, "%s: b = %llu does not fit",
					              names[i], (unsigned long long)r.max_batch);
				}
		}
	}
}
END_TEST

START_TEST(test_llama_3_8b_on_8_ranks_of_80gb_fits_only_on_the_floor_without_recompute)
{
	struct zs_model m = shipped("llama-3-8b");
	struct zs_config c;
	struct theory_request req = { .config = &c, .model = &m, .device_mem = 80e9,
	                              .act = { .seq = 4096, .recompute = ZS_RECOMPUTE_NONE, .elem = 2 } };
	struct theory_row r;

	zs_config_defaults(&c);
	c.batch = 1;
	/* The layers alone: 32 · 4096·4096·(34 + 160) = 104,152,956,928 B. */
	theory_row(&req, ZS_ZERO3, ZS_UNIT_LAYER, 8, &r);
	ck_assert_uint_eq(r.peak.act[THEORY_ACT_LAYERS], 104152956928ull);
	ck_assert_int_eq(r.fits, 1);
	ck_assert_int_eq(r.fits_peak, 0);
	ck_assert_uint_eq(r.max_batch, 0);
	/* ZeRO-3 gathers the head unit, the largest: 525,340,672 x (2 + 2). */
	ck_assert_uint_eq(r.peak.states.gathered_params + r.peak.states.full_grads, 4ull * 525340672);
	ck_assert_uint_eq(r.peak_bytes, r.peak.states.resident_bytes + 4ull * 525340672 + r.peak.activations);
	/* Selective recomputation: ZeRO-3 then fits micro-batch 1. */
	req.act.recompute = ZS_RECOMPUTE_SELECTIVE;
	theory_row(&req, ZS_ZERO3, ZS_UNIT_LAYER, 8, &r);
	ck_assert_int_eq(r.fits_peak, 1);
	ck_assert_uint_ge(r.max_batch, 1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Config files refused by name */

static char *refusal(const char *json)
{
	cJSON *root = cJSON_Parse(json);
	struct zs_model m;
	char *cause = NULL;

	ck_assert_ptr_nonnull(root);
	memset(&m, 0x5a, sizeof m);
	struct zs_model before = m;
	int rc = zs_model_from_json(root, "cfg.json", &m, &cause);
	cJSON_Delete(root);
	ck_assert_msg(rc < 0, "accepted: %s", json);
	ck_assert_msg(memcmp(&m, &before, sizeof m) == 0, "a refused config changed the model");
	ck_assert_ptr_nonnull(cause);
	ck_assert_ptr_null(strchr(cause, '\n'));
	return cause;
}

static void assert_refused(const char *json, const char *names)
{
	char *cause = refusal(json);

	ck_assert_msg(strstr(cause, names) != NULL, "'%s' does not name %s", cause, names);
	free(cause);
}

#define LLAMA_OK "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, " \
	"\"vocab_size\": 100, \"max_position_embeddings\": 32"

START_TEST(test_bad_configs_are_refused_naming_the_key)
{
	assert_refused("{\"n_embd\": 8}", "\"model_type\"");
	assert_refused("{\"model_type\": \"t5\"}", "'t5'");
	assert_refused("{\"model_type\": 7}", "\"model_type\"");
	assert_refused("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"vocab_size\": 10, "
	               "\"n_positions\": 8}", "\"n_embd\" is missing");
	assert_refused("{\"model_type\": \"gpt2\", \"n_embd\": 8.5, \"n_layer\": 2, \"n_head\": 2, "
	               "\"vocab_size\": 10, \"n_positions\": 8}", "\"n_embd\"");
	assert_refused("{\"model_type\": \"gpt2\", \"n_embd\": \"8\", \"n_layer\": 2, \"n_head\": 2, "
	               "\"vocab_size\": 10, \"n_positions\": 8}", "\"n_embd\"");
	assert_refused("{\"model_type\": \"gpt2\", \"n_embd\": 10, \"n_layer\": 2, \"n_head\": 4, "
	               "\"vocab_size\": 10, \"n_positions\": 8}", "\"n_head\" (4) does not divide \"n_embd\"");
	assert_refused("{\"model_type\": \"llama\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"num_key_value_heads\": 3}", "\"num_key_value_heads\" (3) does not divide");
	assert_refused("{\"model_type\": \"llama\", " LLAMA_OK ", \"num_attention_heads\": 0}",
	               "\"num_attention_heads\"");
	assert_refused("{\"model_type\": \"mistral\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"num_local_experts\": 8}", "\"num_local_experts\": a mixture of experts");
	assert_refused("{\"model_type\": \"llama\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"attention_bias\": true}", "\"attention_bias\"");
	assert_refused("{\"model_type\": \"llama\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"tie_word_embeddings\": 1}", "\"tie_word_embeddings\"");
	assert_refused("[1, 2]", "not a model config");
}
END_TEST

START_TEST(test_keys_that_change_no_byte_are_accepted_and_defaults_apply)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"mistral\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                          "\"sliding_window\": 16, \"rope_theta\": 1e6, \"rms_norm_eps\": 1e-5, "
	                          "\"attention_bias\": false, \"num_local_experts\": null}");
	struct zs_model m;
	char *cause = NULL;

	ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
	cJSON_Delete(root);
	ck_assert_int_eq(m.family, ZS_FAMILY_LLAMA);
	ck_assert_uint_eq(m.kv_heads, 8);       /* default: the heads */
	ck_assert_uint_eq(m.head_dim, 8);       /* default: 64 / 8 */
	ck_assert_int_eq(m.tied, 0);            /* default for llama */
	/* By hand: embeddings 100·64; block 64 + 64·(64+128) + 64·64 + 64 +
	 * 3·64·96 = 34,944; final norm 64; head 100·64. */
	ck_assert_uint_eq(theory_tfm_params(&m), 6400 + 2 * 34944 + 64 + 6400);
}
END_TEST

/* Qwen2.5-0.5B (its config.json, shipped): 494,032,768 parameters, by hand
 * from hidden 896, intermediate 4864, 24 layers, 14 heads of 64, 2
 * key-value heads, vocabulary 151,936, tied:
 *   embed_tokens 151936·896 = 136,134,656
 *   a block: input_layernorm 896; q_proj 896·896 + 896 = 803,712; k_proj
 *     and v_proj 896·128 + 128 = 114,816 each; o_proj 896·896 = 802,816
 *     (no bias); post_attention_layernorm 896; gate, up and down
 *     3·896·4864 = 13,074,432: 14,912,384, times 24 = 357,897,216
 *   the final norm 896; lm_head the table:
 *   136,134,656 + 357,897,216 + 896 = 494,032,768. */
START_TEST(test_qwen2_5_0_5b_has_494032768_parameters_by_hand)
{
	struct zs_model m = shipped("qwen2.5-0.5b");
	struct step_params p;

	ck_assert_str_eq(m.model_type, "qwen2");
	ck_assert_int_eq(m.qkv_bias, 1);
	ck_assert_uint_eq(m.sliding_window, 0); /* use_sliding_window: false */
	ck_assert_uint_eq(theory_tfm_params(&m), 136134656ull + 24ull * 14912384ull + 896ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 494032768ull);
	step_params_build(&p, &m);
	const struct step_tensor *b = named(&p, "model.layers.0.self_attn.{q,k,v}_proj.bias");
	ck_assert_uint_eq(b->numel, 896 + 2 * 128);
	ck_assert_uint_eq(b->part_rows[1], 128);
	/* the largest nn.Module: the tied table; q_proj (803,712) is below it */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 136134656ull);
	step_params_free(&p);
}
END_TEST

/* Qwen2Config drops sliding_window unless use_sliding_window is true
 * (configuration_qwen2.py 84), and then only layers from max_window_layers
 * (default 28) on slide (88-94); mistral's counts always. */
START_TEST(test_qwen2_sliding_window_counts_only_when_switched_on)
{
	static const char *const cases[] = {
		"{\"model_type\": \"qwen2\", " LLAMA_OK ", \"num_attention_heads\": 8, \"sliding_window\": 16}",
		"{\"model_type\": \"qwen2\", " LLAMA_OK ", \"num_attention_heads\": 8, \"sliding_window\": 16, "
		"\"use_sliding_window\": true, \"max_window_layers\": 1}",
		"{\"model_type\": \"qwen2\", " LLAMA_OK ", \"num_attention_heads\": 8, \"use_sliding_window\": true, "
		"\"max_window_layers\": 0}",
		/* 2 layers, none at or past the default 28th */
		"{\"model_type\": \"qwen2\", " LLAMA_OK ", \"num_attention_heads\": 8, \"sliding_window\": 16, "
		"\"use_sliding_window\": true}",
	};
	static const uint64_t window[] = {0, 16, 4096, 0};
	for (size_t i = 0; i < 4; i++) {
		cJSON *root = cJSON_Parse(cases[i]);
		struct zs_model m;
		char *cause = NULL;
		ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
		cJSON_Delete(root);
		ck_assert_uint_eq(m.sliding_window, window[i]);
		ck_assert_int_eq(m.qkv_bias, 1);
	}
	assert_refused("{\"model_type\": \"qwen2\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"use_sliding_window\": 1}", "\"use_sliding_window\" is neither true nor false");
}
END_TEST

/* Phi-3-mini-4k-instruct (its config.json, shipped): 3,821,079,552
 * parameters, by hand from hidden 3072, intermediate 8192, 32 layers, 32
 * heads of 96, 32 key-value heads, vocabulary 32,064, untied, no biases:
 *   embed_tokens 32064·3072 = 98,500,608
 *   a block: input_layernorm 3072; qkv_proj (3072 + 2·3072)·3072 =
 *     28,311,552; o_proj 3072·3072 = 9,437,184; post_attention_layernorm
 *     3072; gate_up_proj 2·8192·3072 = 50,331,648; down_proj 3072·8192 =
 *     25,165,824: 113,252,352, times 32 = 3,624,075,264
 *   the final norm 3072; lm_head 32064·3072 = 98,500,608:
 *   98,500,608 + 3,624,075,264 + 3072 + 98,500,608 = 3,821,079,552.
 * The model card says 3.8B; keras-hub's preset for this checkpoint
 * (keras_hub/src/models/phi3/phi3_presets.py, "params") gives 3821079552. */
START_TEST(test_phi_3_mini_4k_has_3821079552_parameters_by_hand)
{
	struct zs_model m = shipped("phi-3-mini-4k");
	struct step_params p;

	ck_assert_str_eq(m.model_type, "phi3");
	ck_assert_str_eq(zs_family_name(m.family), "llama");
	ck_assert_int_eq(m.hf_fused, 1);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_uint_eq(m.sliding_window, 2047);
	ck_assert_uint_eq(theory_tfm_params(&m), 98500608ull + 32ull * 113252352ull + 3072ull + 98500608ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 3821079552ull);
	step_params_build(&p, &m);
	/* Hugging Face's own fused tensors: one module each, no parts */
	const struct step_tensor *t = named(&p, "model.layers.31.self_attn.qkv_proj.weight");
	ck_assert_uint_eq(t->nparts, 0);
	ck_assert_uint_eq(t->shape[0], 3 * 3072);
	ck_assert_uint_eq(t->shape[1], 3072);
	t = named(&p, "model.layers.0.mlp.gate_up_proj.weight");
	ck_assert_uint_eq(t->nparts, 0);
	ck_assert_uint_eq(t->shape[0], 2 * 8192);
	/* the largest nn.Module: the table or the head, 32064 x 3072 */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 98500608ull);
	/* a block's largest module, as FSDP and DeepSpeed gather it: gate_up_proj
	 * whole, where llama's fused tensor is two modules of Hugging Face's */
	uint64_t block_max = 0;
	for (size_t i = 0; i < p.nmodules; i++)
		if (p.module[i].layer == 1) {
			uint64_t own = 0;
			for (size_t k = p.module[i].first; k < p.module[i].first + p.module[i].n; k++)
				own += p.tensor[k].numel;
			block_max = own > block_max ? own : block_max;
		}
	ck_assert_uint_eq(block_max, 50331648ull);
	step_params_free(&p);
}
END_TEST

/* Phi3Config's defaults (configuration_phi3.py): rms_norm_eps 1e-5, no
 * sliding window unless the config sets one, pad_token_id 32000 (which a
 * smaller table lacks); a partial rotary factor or a rope_scaling the
 * kernels do not run is named (measure refuses it). */
START_TEST(test_phi3_defaults_and_unrun_keys)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8}");
	struct zs_model m;
	char *cause = NULL;
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_double_eq(m.norm_eps, 1e-5);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_int_eq(m.hf_fused, 1);
	/* pad_token_id 32000 by default: no row of a 100-token table */
	ck_assert_msg(strstr(m.unrun, "\"pad_token_id\" is 32000 (Phi3Config's default), no row of the 100-token") != NULL,
	              "%s", m.unrun);
	ck_assert_uint_eq(m.pad_row, 0);
	static const struct { const char *pad; uint64_t row; } pads[] = {
		{ "null", 0 }, { "0", 1 }, { "99", 100 }, { "-1", 100 },
	};
	for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
		char text[256];
		snprintf(text, sizeof text, "{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8, "
		         "\"pad_token_id\": %s}", pads[i].pad);
		root = cJSON_Parse(text);
		ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
		cJSON_Delete(root);
		ck_assert_str_eq(m.unrun, "");
		ck_assert_uint_eq(m.pad_row, pads[i].row);
	}
	assert_refused("{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8, \"pad_token_id\": 1.5}",
	               "\"pad_token_id\" must be null or a whole number");
	root = cJSON_Parse("{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                   "\"pad_token_id\": null, \"partial_rotary_factor\": 0.75}");
	ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
	cJSON_Delete(root);
	ck_assert_msg(strstr(m.unrun, "\"partial_rotary_factor\" is 0.75") != NULL, "%s", m.unrun);
	root = cJSON_Parse("{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8, \"pad_token_id\": 0, "
	                   "\"partial_rotary_factor\": 1.0, \"rope_scaling\": {\"type\": \"longrope\"}}");
	ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
	cJSON_Delete(root);
	ck_assert_msg(strstr(m.unrun, "\"rope_scaling\" is {") != NULL, "%s", m.unrun);
	assert_refused("{\"model_type\": \"phi3\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"attention_bias\": true}", "\"attention_bias\": biases in the attention projections");
}
END_TEST

/* Qwen/Qwen3-0.6B's count, by hand from its config (hidden 1024, 28
 * layers, 16 heads and 8 key-value heads of head_dim 128, intermediate
 * 3072, vocabulary 151,936, tied):
 *   embed_tokens 151936·1024 = 155,582,464 (the head is it)
 *   a block: input_layernorm 1024; q_proj 2048·1024 = 2,097,152; k_proj
 *     and v_proj 1024·1024 = 1,048,576 each; q_norm and k_norm 128 each;
 *     o_proj 1024·2048 = 2,097,152; post_attention_layernorm 1024;
 *     gate_proj, up_proj and down_proj 3072·1024 = 3,145,728 each:
 *     15,730,944, times 28 = 440,466,432
 *   the final norm 1024:
 *   155,582,464 + 440,466,432 + 1024 = 596,049,920.
 * The model card prints 0.6B, and 0.44B without the embedding (440,467,456);
 * the checkpoint loaded by transformers has num_parameters() 596049920
 * (compressed-tensors' tests/test_offload, test_accelerate_load_disk,
 * asserts it of Qwen/Qwen3-0.6B). */
START_TEST(test_qwen3_0_6b_has_596049920_parameters_by_hand)
{
	struct zs_model m = shipped("Qwen/Qwen3-0.6B");
	struct step_params p;

	ck_assert_str_eq(m.name, "qwen3-0.6b");
	ck_assert_str_eq(m.model_type, "qwen3");
	ck_assert_str_eq(zs_family_name(m.family), "llama");
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_uint_eq(m.head_dim, 128);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_uint_eq(theory_tfm_params(&m), 155582464ull + 28ull * 15730944ull + 1024ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 596049920ull);
	step_params_build(&p, &m);
	/* q_norm and k_norm: one module after the fused q/k/v, two parts */
	const struct step_tensor *t = named(&p, "model.layers.27.self_attn.{q,k}_norm.weight");
	ck_assert_uint_eq(t->ndim, 1);
	ck_assert_uint_eq(t->numel, 256);
	ck_assert_uint_eq(t->nparts, 2);
	ck_assert_uint_eq(t->part_rows[0], 128);
	ck_assert_uint_eq(t->part_rows[1], 128);
	ck_assert_uint_eq(p.tensor[t->module > 0 ? p.module[t->module - 1].first : 0].shape[0], (16 + 2 * 8) * 128);
	step_params_free(&p);
}
END_TEST

/* google/gemma-2-2b's count, by hand from its config (hidden 2304, 26
 * layers, 8 heads and 4 key-value heads of head_dim 256, intermediate
 * 9216, vocabulary 256,000, tied):
 *   embed_tokens 256000·2304 = 589,824,000 (the head is it)
 *   a block: input_layernorm, post_attention_layernorm,
 *     pre_feedforward_layernorm and post_feedforward_layernorm 2304 each
 *     (9216); q_proj 2048·2304 = 4,718,592; k_proj and v_proj 1024·2304 =
 *     2,359,296 each; o_proj 2304·2048 = 4,718,592; gate_proj, up_proj and
 *     down_proj 9216·2304 = 21,233,664 each: 77,865,984, times 26 =
 *     2,024,515,584
 *   the final norm 2304:
 *   589,824,000 + 2,024,515,584 + 2304 = 2,614,341,888.
 * The model card says 2.6B (Gemma 2 report: 2.6B, 590M of them the
 * embedding). */
START_TEST(test_gemma_2_2b_has_2614341888_parameters_by_hand)
{
	struct zs_model m = shipped("google/gemma-2-2b");

	ck_assert_str_eq(m.name, "gemma-2-2b");
	ck_assert_str_eq(m.model_type, "gemma2");
	ck_assert_int_eq(m.gemma, 1);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_uint_eq(m.sliding_window, 4096);
	ck_assert_uint_eq(m.pad_row, 1);
	ck_assert_double_eq(m.attn_scalar, 256.0);
	ck_assert_double_eq(m.attn_softcap, 50.0);
	ck_assert_double_eq(m.final_softcap, 30.0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 589824000ull + 26ull * 77865984ull + 2304ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 2614341888ull);
}
END_TEST

/* google/gemma-3-1b-pt's text config (data/models/gemma-3-1b.json), by
 * hand from its numbers (hidden 1152, intermediate 6912, 26 layers, 4
 * heads, 1 key-value head, head_dim 256, vocabulary 262,144, tied):
 *   embed_tokens 262,144·1152 = 301,989,888
 *   a block: q_proj 1024·1152 = 1,179,648, k_proj and v_proj 256·1152 =
 *     294,912 each, o_proj 1152·1024 = 1,179,648, q_norm and k_norm 256
 *     each, four norms of 1152 = 4608, gate_proj, up_proj and down_proj
 *     6912·1152 = 7,962,624 each: 26,842,112, times 26 = 697,894,912
 *   the final norm 1152:
 *   301,989,888 + 697,894,912 + 1152 = 999,885,952.
 * The model card says 1B (Gemma 3 report, table 1: 302M embedding, 698M
 * non-embedding parameters: the same split). */
START_TEST(test_gemma_3_1b_has_999885952_parameters_by_hand)
{
	struct zs_model m = shipped("google/gemma-3-1b-pt");

	ck_assert_str_eq(m.name, "gemma-3-1b");
	ck_assert_str_eq(m.model_type, "gemma3_text");
	ck_assert_int_eq(m.gemma, 1);
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_uint_eq(m.sliding_window, 512);
	ck_assert_uint_eq(m.window_pattern, 6);
	ck_assert_double_eq(m.rope_theta, 1e6);
	ck_assert_double_eq(m.rope_local_theta, 1e4);
	ck_assert_double_eq(m.attn_scalar, 256.0);
	ck_assert_double_eq(m.attn_softcap, 0.0);
	ck_assert_double_eq(m.final_softcap, 0.0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 301989888ull + 26ull * 26842112ull + 1152ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 999885952ull);
}
END_TEST

/* The model cards print a count in billions to a few digits; the count
 * from the shipped config.json, cut or rounded to those digits, must be
 * that figure. Qwen/Qwen2.5-7B's card: "Number of Parameters: 7.61B",
 * "(Non-Embedding): 6.53B" (7,615,616,512 is 7.61 cut, 7.62 rounded; its
 * 6,525,621,760 without the tables 6.53 rounded: the card does not say
 * how it rounds); Qwen/Qwen3-8B's: "Number of Parameters: 8.2B",
 * "(Non-Embedding): 6.95B" (8.19 and 6.946, both rounded);
 * google/gemma-2-9b's page: 9.24B params (the Hub's count from its
 * safetensors metadata). Non-embedding: without embed_tokens and an
 * untied lm_head. */
START_TEST(test_new_shipped_models_round_to_their_cards_digits)
{
	static const struct {
		const char *name;
		uint64_t card;          /* the card's figure times 10^digits */
		int digits;             /* decimals the card prints, in billions */
		uint64_t card_nonemb;   /* likewise, without the tables (0: the card prints none) */
	} cards[] = {
		{ "qwen2.5-7b", 761, 2, 653 },
		{ "qwen3-8b", 82, 1, 695 },
		{ "gemma-2-9b", 924, 2, 0 },
	};
	for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++) {
		struct zs_model m = shipped(cards[i].name);
		uint64_t unit = 1000000000ull, total = theory_tfm_params(&m);
		for (int d = 0; d < cards[i].digits; d++)
			unit /= 10;
		ck_assert_msg(total / unit == cards[i].card || (total + unit / 2) / unit == cards[i].card, "%s: %llu",
		              cards[i].name, (unsigned long long)total);
		if (cards[i].card_nonemb != 0) {
			uint64_t rest = total - m.vocab * m.hidden * (m.tied ? 1 : 2);
			ck_assert_msg((rest + 5000000ull) / 10000000ull == cards[i].card_nonemb, "%s: %llu", cards[i].name,
			              (unsigned long long)rest);
		}
	}
}
END_TEST

/* Qwen/Qwen2.5-7B's count, by hand from its config.json
 * (data/models/qwen2.5-7b.json: hidden 3584, intermediate 18944, 28
 * layers, 28 heads of 128, 4 key-value heads, vocabulary 152,064, untied):
 *   embed_tokens 152064·3584 = 544,997,376, lm_head the same
 *   a block: input_layernorm 3584; q_proj 3584·3584 + 3584 = 12,848,640;
 *     k_proj and v_proj 512·3584 + 512 = 1,835,520 each; o_proj 3584·3584
 *     = 12,845,056 (no bias); post_attention_layernorm 3584; gate, up and
 *     down 3·18944·3584 = 203,685,888: 233,057,792, times 28 =
 *     6,525,618,176
 *   the final norm 3584:
 *   2·544,997,376 + 6,525,618,176 + 3584 = 7,615,616,512
 * (7.61B; 6.53B without the two tables, as the card prints). */
START_TEST(test_qwen2_5_7b_has_7615616512_parameters_by_hand)
{
	struct zs_model m = shipped("Qwen/Qwen2.5-7B");

	ck_assert_str_eq(m.name, "qwen2.5-7b");
	ck_assert_str_eq(m.model_type, "qwen2");
	ck_assert_int_eq(m.qkv_bias, 1);
	ck_assert_int_eq(m.tied, 0);
	ck_assert_uint_eq(m.head_dim, 128);
	ck_assert_uint_eq(m.kv_heads, 4);
	ck_assert_uint_eq(m.sliding_window, 0); /* use_sliding_window: false */
	ck_assert_uint_eq(m.positions, 131072);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 2ull * 544997376ull + 28ull * 233057792ull + 3584ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 7615616512ull);
}
END_TEST

/* Qwen/Qwen3-8B's count, by hand from its config.json
 * (data/models/qwen3-8b.json: hidden 4096, intermediate 12288, 36 layers,
 * 32 heads and 8 key-value heads of head_dim 128, vocabulary 151,936,
 * untied, no biases):
 *   embed_tokens 151936·4096 = 622,329,856, lm_head the same
 *   a block: input_layernorm 4096; q_proj 4096·4096 = 16,777,216; k_proj
 *     and v_proj 1024·4096 = 4,194,304 each; q_norm and k_norm 128 each;
 *     o_proj 4096·4096 = 16,777,216; post_attention_layernorm 4096; gate,
 *     up and down 3·12288·4096 = 150,994,944: 192,946,432, times 36 =
 *     6,946,071,552
 *   the final norm 4096:
 *   2·622,329,856 + 6,946,071,552 + 4096 = 8,190,735,360
 * (8.2B; 6.95B without the two tables, as the card prints). */
START_TEST(test_qwen3_8b_has_8190735360_parameters_by_hand)
{
	struct zs_model m = shipped("qwen/qwen3-8b");

	ck_assert_str_eq(m.name, "qwen3-8b");
	ck_assert_str_eq(m.model_type, "qwen3");
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_int_eq(m.tied, 0);
	ck_assert_uint_eq(m.head_dim, 128);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 2ull * 622329856ull + 36ull * 192946432ull + 4096ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 8190735360ull);
}
END_TEST

/* google/gemma-2-9b's count, by hand from its config.json
 * (data/models/gemma-2-9b.json: hidden 3584, intermediate 14336, 42
 * layers, 16 heads and 8 key-value heads of head_dim 256, vocabulary
 * 256,000, tied):
 *   embed_tokens 256000·3584 = 917,504,000 (the head is it)
 *   a block: four norms of 3584 (14,336); q_proj 4096·3584 = 14,680,064;
 *     k_proj and v_proj 2048·3584 = 7,340,032 each; o_proj 3584·4096 =
 *     14,680,064; gate_proj, up_proj and down_proj 14336·3584 =
 *     51,380,224 each: 198,195,200, times 42 = 8,324,198,400
 *   the final norm 3584:
 *   917,504,000 + 8,324,198,400 + 3584 = 9,241,705,984 (9.24B). */
START_TEST(test_gemma_2_9b_has_9241705984_parameters_by_hand)
{
	struct zs_model m = shipped("google/gemma-2-9b");

	ck_assert_str_eq(m.name, "gemma-2-9b");
	ck_assert_str_eq(m.model_type, "gemma2");
	ck_assert_int_eq(m.gemma, 1);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_uint_eq(m.sliding_window, 4096);
	ck_assert_double_eq(m.attn_scalar, 256.0);
	ck_assert_double_eq(m.attn_softcap, 50.0);
	ck_assert_double_eq(m.final_softcap, 30.0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 917504000ull + 42ull * 198195200ull + 3584ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 9241705984ull);
}
END_TEST

/* google/gemma-3-4b-pt's config.json (data/models/gemma-3-4b.json) is a
 * multimodal Gemma3Config: its text_config gives hidden 2560,
 * intermediate 10240 and 34 layers; the rest is Gemma3TextConfig's
 * defaults (configuration_gemma3.py at 008f5c8c, __init__): 8 heads, 4
 * key-value heads, head_dim 256, vocabulary 262,208, tied. By hand:
 *   embed_tokens 262,208·2560 = 671,252,480 (the head is it)
 *   a block: q_proj 2048·2560 = 5,242,880; k_proj and v_proj 1024·2560 =
 *     2,621,440 each; o_proj 2560·2048 = 5,242,880; q_norm and k_norm 256
 *     each; four norms of 2560 (10,240); gate_proj, up_proj and down_proj
 *     10240·2560 = 26,214,400 each: 94,382,592, times 34 = 3,209,008,128
 *   the final norm 2560:
 *   671,252,480 + 3,209,008,128 + 2560 = 3,880,263,168.
 * The card's "4B" (the Hub's 4.3B) is Gemma3ForConditionalGeneration's
 * whole count, which adds what zerosim does not predict: the SigLIP
 * vision tower of vision_config (patch 3·14·14·1152 + 1152, positions
 * (896/14)^2·1152, 27 layers of 4·(1152² + 1152) + (4304·1152 + 4304) +
 * (1152·4304 + 1152) + 2·2·1152, a post-norm of 2·1152: 416,866,032) and
 * the projector (1152·2560 + 1152 = 2,950,272): 4,300,079,472 in all.
 * Its global layers' rope_scaling (linear, factor 8) changes the numbers,
 * not the bytes: the engine's rope divides their frequencies (tests/gemma3.sh).
 * No stored copy of the Hub's file was found: the text shipped is the one
 * public test fixtures quote for google/gemma-3-4b-it/-pt (text_config's
 * six keys, vision_config's eight, the top level's ids), the 27B's in the
 * same layout in NVIDIA/TensorRT-LLM's
 * tests/unittest/_torch/modeling/test_modeling_gemma3.py; every key it
 * leaves out is Gemma3TextConfig's default (8 heads, 4 key-value heads,
 * head_dim 256, 262,208 tokens: the (262208, 2560) embed_tokens that
 * transformers builds from it). */
START_TEST(test_gemma_3_4b_has_3880263168_parameters_by_hand)
{
	struct zs_model m = shipped("google/gemma-3-4b-pt");

	ck_assert_str_eq(m.name, "gemma-3-4b");
	ck_assert_str_eq(m.model_type, "gemma3_text");
	ck_assert_int_eq(m.gemma, 1);
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_uint_eq(m.heads, 8);
	ck_assert_uint_eq(m.kv_heads, 4);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_uint_eq(m.vocab, 262208);
	ck_assert_uint_eq(m.positions, 131072);
	ck_assert_uint_eq(m.sliding_window, 1024);
	ck_assert_uint_eq(m.window_pattern, 6);
	ck_assert_double_eq(m.rope_theta, 1e6);
	ck_assert_double_eq(m.rope_local_theta, 1e4);
	ck_assert_double_eq(m.attn_softcap, 0.0);
	ck_assert_double_eq(m.final_softcap, 0.0);
	/* its global layers' linear rope_scaling, read (util/model.c read_rope_scaling), not refused */
	ck_assert_double_eq(m.rope_factor, 8.0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_uint_eq(theory_tfm_params(&m), 671252480ull + 34ull * 94382592ull + 2560ull);
	ck_assert_uint_eq(theory_tfm_params(&m), 3880263168ull);
	/* and the text model with the vision tower and projector is the Hub's 4.3B */
	ck_assert_uint_eq(theory_tfm_params(&m) + 416866032ull + 2950272ull, 4300079472ull);
}
END_TEST

/* model_type gemma3 (Gemma3Config, at 008f5c8c): the text model is
 * text_config's, Gemma3TextConfig(**text_config), its defaults where it
 * is silent and where it is absent (Gemma3TextConfig()); vision_config is
 * not read; what is refused of it is refused naming text_config, and the
 * top level's quantization_config is refused as anywhere. */
START_TEST(test_gemma3_multimodal_reads_its_text_config)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"gemma3\", \"vision_config\": {\"hidden_size\": 1152}, "
	                          "\"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 96, "
	                          "\"num_hidden_layers\": 2, \"sliding_window\": 16}}");
	struct zs_model m;
	char *cause = NULL;
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_str_eq(m.model_type, "gemma3_text");
	ck_assert_uint_eq(m.hidden, 64);
	ck_assert_uint_eq(m.heads, 8);
	ck_assert_uint_eq(m.kv_heads, 4);
	ck_assert_uint_eq(m.vocab, 262208);
	ck_assert_uint_eq(m.sliding_window, 16);
	ck_assert_str_eq(m.unrun, "");
	/* no text_config: Gemma3TextConfig() (hidden 2304, 26 layers, 9216) */
	root = cJSON_Parse("{\"model_type\": \"gemma3\"}");
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_uint_eq(m.hidden, 2304);
	ck_assert_uint_eq(m.layers, 26);
	ck_assert_uint_eq(m.intermediate, 9216);
	ck_assert_uint_eq(m.positions, 131072);
	ck_assert_uint_eq(m.sliding_window, 4096);
	assert_refused("{\"model_type\": \"gemma3\", \"text_config\": [1]}", "\"text_config\" is not a JSON object");
	assert_refused("{\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": \"gemma2\"}}",
	               "\"text_config\"'s \"model_type\" is not \"gemma3_text\"");
	assert_refused("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 0}}",
	               "cfg.json: text_config: \"hidden_size\" must be a whole number");
	assert_refused("{\"model_type\": \"gemma3\", \"text_config\": {\"attention_bias\": true}}",
	               "cfg.json: text_config: \"attention_bias\": biases");
	assert_refused("{\"model_type\": \"gemma3\", \"quantization_config\": {\"bits\": 4}}",
	               "\"quantization_config\": quantised weights are not modelled");
	assert_refused("{\"model_type\": \"gemma3\", \"text_config\": {\"num_attention_heads\": 6}}",
	               "\"num_key_value_heads\" (4) does not divide \"num_attention_heads\" (6)");
}
END_TEST

/* Gemma3TextConfig's defaults (configuration_gemma3.py at 008f5c8c):
 * rope_theta 1e6, rope_local_base_freq 1e4, sliding_window_pattern 6,
 * no caps, head_dim 256, pad 0; layer_types read where it spells one
 * pattern, refused by name where not. */
START_TEST(test_gemma3_defaults_and_refusals)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"gemma3_text\", " LLAMA_OK ", \"num_attention_heads\": 8}");
	struct zs_model m;
	char *cause = NULL;
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_double_eq(m.rope_theta, 1e6);
	ck_assert_double_eq(m.rope_local_theta, 1e4);
	ck_assert_uint_eq(m.window_pattern, 6);
	ck_assert_uint_eq(m.sliding_window, 4096);
	ck_assert_double_eq(m.attn_softcap, 0.0);
	ck_assert_double_eq(m.final_softcap, 0.0);
	ck_assert_uint_eq(m.pad_row, 1);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_str_eq(m.unrun, "");
	root = cJSON_Parse("{\"model_type\": \"gemma3_text\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                   "\"attn_logit_softcapping\": 50, \"layer_types\": "
	                   "[\"sliding_attention\", \"full_attention\"]}");
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_uint_eq(m.window_pattern, 2);
	ck_assert_double_eq(m.attn_softcap, 50.0);
	assert_refused("{\"model_type\": \"gemma3_text\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
	               "\"layer_types\" is not one global layer in every 1");
	assert_refused("{\"model_type\": \"gemma3_text\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"sliding_window_pattern\": 0}", "\"sliding_window_pattern\" must be a whole number");
	assert_refused("{\"model_type\": \"gemma3_text\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"rope_local_base_freq\": -1}", "\"rope_local_base_freq\" must be a positive number");
}
END_TEST

/* Gemma2Config's defaults: head_dim 256, query_pre_attn_scalar 256, the
 * caps 50 and 30 (null: none), pad_token_id 0; hidden_activation, not
 * hidden_act, is the MLP's; another is unrun. */
START_TEST(test_gemma2_defaults_and_unrun_keys)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"gemma2\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                          "\"hidden_act\": \"gelu_pytorch_tanh\"}");
	struct zs_model m;
	char *cause = NULL;
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_uint_eq(m.head_dim, 256);
	ck_assert_double_eq(m.attn_scalar, 256.0);
	ck_assert_double_eq(m.attn_softcap, 50.0);
	ck_assert_double_eq(m.final_softcap, 30.0);
	ck_assert_uint_eq(m.pad_row, 1);
	ck_assert_uint_eq(m.sliding_window, 4096);
	ck_assert_int_eq(m.tied, 1);
	ck_assert_str_eq(m.unrun, "");
	root = cJSON_Parse("{\"model_type\": \"gemma2\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                   "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, "
	                   "\"hidden_activation\": \"gelu\"}");
	ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
	cJSON_Delete(root);
	ck_assert_double_eq(m.attn_softcap, 0.0);
	ck_assert_double_eq(m.final_softcap, 0.0);
	ck_assert_msg(strstr(m.unrun, "\"hidden_activation\" is \"gelu\"") != NULL, "%s", m.unrun);
	assert_refused("{\"model_type\": \"gemma2\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"attn_logit_softcapping\": -1}", "\"attn_logit_softcapping\" must be a positive number");
}
END_TEST

/* Qwen3Config's defaults (configuration_qwen3.py): head_dim 128 where
 * absent (not hidden / heads), eps 1e-6, sliding_window only under
 * use_sliding_window; attention_bias true is refused by name. */
START_TEST(test_qwen3_defaults_and_refusals)
{
	cJSON *root = cJSON_Parse("{\"model_type\": \"qwen3\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	                          "\"sliding_window\": 16}");
	struct zs_model m;
	char *cause = NULL;
	ck_assert_msg(zs_model_from_json(root, "cfg.json", &m, &cause) == 0, "%s", cause ? cause : "?");
	cJSON_Delete(root);
	ck_assert_uint_eq(m.head_dim, 128);
	ck_assert_double_eq(m.norm_eps, 1e-6);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_uint_eq(m.pad_row, 0);
	ck_assert_str_eq(m.unrun, "");
	root = cJSON_Parse("{\"model_type\": \"qwen3\", " LLAMA_OK ", \"num_attention_heads\": 8, \"head_dim\": 8, "
	                   "\"use_sliding_window\": true, \"max_window_layers\": 1, \"sliding_window\": 16}");
	ck_assert_int_eq(zs_model_from_json(root, "cfg.json", &m, &cause), 0);
	cJSON_Delete(root);
	ck_assert_uint_eq(m.head_dim, 8);
	ck_assert_uint_eq(m.sliding_window, 16);
	assert_refused("{\"model_type\": \"qwen3\", " LLAMA_OK ", \"num_attention_heads\": 8, "
	               "\"attention_bias\": true}", "\"attention_bias\": biases in the attention projections");
	assert_refused("{\"model_type\": \"olmoe\", " LLAMA_OK ", \"num_attention_heads\": 8}",
	               "\"model_type\" 'olmoe' is not modelled (gpt2, llama, mistral, qwen2, phi3, qwen3, gemma2, gemma3_text, gemma3, mixtral, qwen2_moe, qwen3_moe)");
}
END_TEST

START_TEST(test_an_unknown_name_lists_the_shipped_models)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_int_lt(zs_model_load("llama-9", &m, &cause), 0);
	ck_assert_msg(strstr(cause, "'llama-9'") != NULL && strstr(cause, "gpt2-xl") != NULL &&
	              strstr(cause, "mistral-7b") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	/* A path is a file, never a name. */
	ck_assert_int_lt(zs_model_load("./no-such.json", &m, &cause), 0);
	ck_assert_msg(strstr(cause, "no-such.json") != NULL, "%s", cause);
	free(cause);
}
END_TEST

START_TEST(test_json_for_a_model_names_every_part_of_the_peak)
{
	struct zs_model m = shipped("gpt2");
	struct zs_config c;
	struct theory_request req = { .config = &c, .model = &m, .device_mem = 16e9,
	                              .act = { .seq = 1024, .elem = 2 } };
	cJSON *root, *row, *peak, *acts;

	zs_config_defaults(&c);
	c.batch = 1;
	c.nunits = 1;
	c.units[0] = ZS_UNIT_LAYER;
	root = theory_json(&req);
	ck_assert_ptr_nonnull(root);
	row = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "rows"), 0);
	peak = cJSON_GetObjectItem(row, "peak");
	acts = cJSON_GetObjectItem(peak, "activations_breakdown");
	ck_assert_double_eq(cJSON_GetObjectItem(acts, "layers")->valuedouble, 1075838976.0);
	/* units: the embeddings with the final norm, then 12 blocks. */
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(peak, "units")), 13);
	/* mixed, which measure --model runs: the exact level too */
	ck_assert(cJSON_IsObject(cJSON_GetObjectItem(row, "schedule")));
	ck_assert(cJSON_IsBool(cJSON_GetObjectItem(row, "fits")));
	ck_assert(cJSON_IsBool(cJSON_GetObjectItem(row, "fits_peak")));
	ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(row, "max_batch")));
	ck_assert_double_eq(cJSON_GetObjectItem(root, "params")->valuedouble, 124439808.0);
	cJSON_Delete(root);
	req.bf16 = 1; /* mixed's bytes, renamed: measure runs no bf16, so no exact level */
	root = theory_json(&req);
	row = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "rows"), 0);
	ck_assert(cJSON_IsNull(cJSON_GetObjectItem(row, "schedule")));
	cJSON_Delete(root);
}
END_TEST

/* torch's zero1 on zerosim's tiny gpt2 (n_embd 64, 2 blocks, 4 heads,
 * vocabulary 256, 32 positions, tied), worked by hand. Its 28 parameter
 * tensors in model order: wte 256·64 = 16384, wpe 32·64 = 2048, the tied
 * final LayerNorm 64, 64; per block ln1 64, 64, c_attn 64·192 = 12288,
 * 192, c_proj 4096, 64, ln2 64, 64, c_fc 64·256 = 16384, 256, mlp c_proj
 * 16384, 64 (49,984 a block; Ψ = 18,560 + 2·49,984 = 118,528).
 * ZeroRedundancyOptimizer at N = 3, largest first, ties in model order,
 * each to the first least-loaded rank: the five 16384s go 0, 1, 2, 0, 1
 * (32768, 32768, 16384); the 12288s both to rank 2 (40960); the 4096s to
 * 0 and 1 (36864, 36864); 2048 to 0 (38912); then the 256s, 192s and the
 * fourteen 64s all to rank 1, which stays least loaded (37120 + 256 + 384
 * + 896 = 38656). Loads 38912, 38656, 40960. The worst rank, in mixed
 * precision with Adam: 4Ψ of params and grads, 12·40960 of optimizer
 * state and DDP's buckets 2Ψ: 474,112 + 491,520 + 237,056 = 1,202,688 B,
 * 8.147 B/param without the buckets where the paper's zero1 has 4 + 12/3
 * = 8; rank 1 holds 12·(40960 - 38656) = 27,648 B less. */
/* ag_step_build_run tells the input's faults (-1: the CLI's exit 2) from
 * DDP's pass failing on a step that was built (-2: zerosim's internal
 * error, exit 1): a run of 0 ranks is no input a user can give. */
START_TEST(test_ddp_pass_failure_is_internal_and_a_refusal_is_bad_input)
{
	struct zs_model m = { .family = ZS_FAMILY_GPT2, .hidden = 64, .intermediate = 256, .layers = 2,
	                      .heads = 4, .kv_heads = 4, .head_dim = 16, .vocab = 256, .positions = 32, .tied = 1 };
	strcpy(m.name, "tiny");
	strcpy(m.model_type, "gpt2");
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_TORCH;
	c.wrapper = ZS_WRAPPER_DDP;
	c.precision = ZS_FP32;
	c.torch_device = ZS_DEVICE_CPU;
	c.attn = ZS_ATTN_EAGER;
	struct ag_options o;
	struct step_params p;
	struct ag_step s;
	char *cause = NULL;
	ag_options_from_config(&o, &c, 1, 16);
	step_params_build(&p, &m);
	ck_assert_msg(ag_step_build_run(&s, &m, &p, &o, &c, 2, &cause) == 0, "%s", cause);
	ag_step_free(&s);
	ck_assert_int_eq(ag_step_build_run(&s, &m, &p, &o, &c, 0, &cause), -2);
	ck_assert_msg(cause != NULL && strstr(cause, "--wrapper ddp: internal error") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	c.optimizer = ZS_SGD;
	ag_options_from_config(&o, &c, 1, 16);
	ck_assert_int_eq(ag_step_build_run(&s, &m, &p, &o, &c, 2, &cause), -1);
	ck_assert_msg(cause != NULL && strstr(cause, "Adam only") != NULL, "%s", cause);
	free(cause);
	step_params_free(&p);
}
END_TEST

START_TEST(test_torch_zero1_on_the_tiny_gpt2_worked_by_hand)
{
	struct zs_model m = { .family = ZS_FAMILY_GPT2, .hidden = 64, .intermediate = 256, .layers = 2,
	                      .heads = 4, .kv_heads = 4, .head_dim = 16, .vocab = 256, .positions = 32, .tied = 1 };
	uint64_t n[28], load[3], sum = 0;
	struct step_params p;
	step_params_build(&p, &m);
	size_t nt = p.ntensors;
	ck_assert_uint_eq(nt, 28);
	for (size_t i = 0; i < nt; i++)
		n[i] = p.tensor[i].numel;
	step_params_free(&p);

	ck_assert_uint_eq(nt, 28);
	for (size_t i = 0; i < nt; i++)
		sum += n[i];
	ck_assert_uint_eq(sum, 118528);
	ck_assert_uint_eq(theory_tfm_params(&m), 118528);
	theory_greedy_partition(n, nt, 3, load);
	ck_assert_uint_eq(load[0], 38912);
	ck_assert_uint_eq(load[1], 38656);
	ck_assert_uint_eq(load[2], 40960);

	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_TORCH;
	c.precision = ZS_MIXED;
	struct theory_bytes b;
	struct theory_act_opts o = { .seq = 32, .recompute = ZS_RECOMPUTE_NONE, .elem = 2 };
	struct theory_schedule sc;
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO1, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.resident_bytes, 1202688);
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_BUCKETS], 237056);
	ck_assert_double_eq_tol((double)(sc.resident_bytes - 237056) / 118528, 8.147, 5e-4);
	ck_assert_double_eq_tol(sc.imbalance_bytes, 12.0 * 40960 - 12.0 * 118528 / 3, 1e-6);

	struct theory_request req = { .config = &c, .model = &m, .act = o };
	c.nworld = 1;
	c.world[0] = 3;
	c.nschemes = 1;
	c.schemes[0] = ZS_ZERO1;
	c.nunits = 1;
	c.units[0] = ZS_UNIT_LAYER;
	c.batch = 2;
	cJSON *root = theory_json(&req);
	ck_assert_ptr_nonnull(root);
	cJSON *sched = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "rows"), 0), "schedule");
	cJSON *per = cJSON_GetObjectItem(cJSON_GetObjectItem(sched, "per_rank"), "resident_bytes");
	ck_assert_int_eq(cJSON_GetArraySize(per), 3);
	ck_assert_double_eq(cJSON_GetArrayItem(per, 1)->valuedouble, 1202688.0 - 27648.0);
	ck_assert_double_eq(cJSON_GetArrayItem(per, 2)->valuedouble, 1202688.0);
	cJSON_Delete(root);
}
END_TEST

/* DeepSpeed's ZeRO-3 on the same tiny gpt2 (28 tensors, above) at N = 3,
 * mixed precision, Adam, --ds-persist 100, worked by hand.
 * partition_parameters.py's _partition_param pads each tensor on its own
 * to a multiple of N (_aligned_size: numel + (N - numel mod N) mod N) and
 * gives each rank ceil(n/N): c_attn.weight, 64·192 = 12288, divides, 4096
 * a rank; wte, 16384, gives 5462 a rank (16386, 2 of padding); wpe 2048
 * gives 683; the 64s 22, c_attn's bias 64, c_proj.weight 4096 gives 1366,
 * c_fc's bias 256 gives 86, c_fc and mlp.c_proj 5462. A block: six 22s +
 * 4096 + 64 + 1366 + 5462 + 86 + 5462 = 16668; S = 5462 + 683 + 22 + 22 +
 * 2·16668 = 39525. Persistent (n <= 100): the fourteen 64-element norms
 * and biases, 896 elements, whole on every rank between steps, each in
 * _post_step's flat of ceil(64/3)·3 = 66 (_allgather_params_coalesced,
 * docs/schedule.md): 924. Resident: 16 B a shard element (fp16 partition
 * 2, grad partition 2, fp32 partition 4, Adam 8) = 632,400, the reduce
 * bucket 5e8·2 = 1e9 and the persistent params 924·2 = 1848:
 * 1,000,634,248 B. Sent per rank, N - 1 =
 * 2 times each gathered shard and every grad shard (S): step 1 records the
 * trace, every module released after it runs, so each tensor is gathered
 * in forward and in backward, wte twice more (the tied lm_head's), and
 * the persistent ones once more after step(): 2·39525 + 2·5462 + 308 =
 * 90282, so 2·(90282 + 39525) = 259,614 elements; from step 2 the first
 * fetch prefetches everything, kept through forward (reuse distance 1e9),
 * so each tensor once: 2·(39525 + 39525) = 158,100. With DeepSpeed's
 * default threshold, 1e5, every tensor (at most 16384) is persistent:
 * whole, each in a flat of ceil(n/3)·3: 2·3·S = 237,150 B (2Ψ = 237,056
 * where N divides every tensor). */
START_TEST(test_deepspeed_zero3_on_the_tiny_gpt2_worked_by_hand)
{
	struct zs_model m = { .family = ZS_FAMILY_GPT2, .hidden = 64, .intermediate = 256, .layers = 2,
	                      .heads = 4, .kv_heads = 4, .head_dim = 16, .vocab = 256, .positions = 32, .tied = 1 };
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_DEEPSPEED;
	c.precision = ZS_MIXED;
	c.ds_persist = 100;
	c.steps = 1;
	struct theory_bytes b;
	struct theory_act_opts o = { .seq = 32, .recompute = ZS_RECOMPUTE_NONE, .elem = 2 };
	struct theory_schedule sc;
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	ck_assert(theory_tfm_has_schedule(&m, &o, &b));
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.shard_elements, 39525);
	ck_assert_uint_eq(sc.padded_elements, 3 * 39525);
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_PARAM16], 2 * 39525);
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_GATHERED], 1848);
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_BUCKETS], 1000000000);
	ck_assert_uint_eq(sc.resident_bytes, 1000634248);
	ck_assert_uint_eq(sc.comm_elements, 259614);
	c.steps = 2;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.comm_elements, 158100);
	ck_assert_double_eq(sc.comm_elements_mean, (259614.0 + 158100.0) / 2);
	c.ds_persist = 1e5;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.resident_breakdown[ZS_CAT_GATHERED], 2 * 3 * 39525);
	/* A full recompute: step 1's rerun of each block's forward gathers
	 * its 12 tensors again, Σ ceil(n/3) = 2·22 (ln_1) + 4096 + 64
	 * (c_attn) + 1366 + 22 (c_proj) + 2·22 (ln_2) + 5462 + 86 (c_fc)
	 * + 5462 + 22 (the MLP's c_proj) = 16,668 a block, times L = 2 and
	 * N - 1 = 2: 66,672 more; step 2 keeps each module whole from its
	 * forward through the rerun into its backward (reuse distance 1e9):
	 * 158,100 as without. */
	o.recompute = ZS_RECOMPUTE_FULL;
	c.ds_persist = 100;
	ck_assert(theory_tfm_has_schedule(&m, &o, &b));
	c.steps = 1;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.comm_elements, 259614 + 66672);
	c.steps = 2;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.comm_elements, 158100);
	ck_assert_double_eq(sc.comm_elements_mean, (259614.0 + 66672.0 + 158100.0) / 2);
	/* The tables' release after their backward never fires (no input of
	 * theirs needs grad; util/ds_coord.h): wte (16384) and wpe (2048) stay
	 * whole, 2 B each, until step() releases everything. With the
	 * optimizer offloaded step() adds nothing on the device, so the
	 * optimizer phase's most is its start. Step 2's first fetch gathers
	 * wte alone, a padded buffer of 16386 (docs/schedule.md, ZeRO-3's
	 * gathered blocks), its prefetch the rest, wpe's 2048 among them:
	 * resident + (16386 + 2048)·2 = 36,868 B more. Step 1 fetches wpe
	 * alone too (2049) and holds none of the persistent 1,848 B (the
	 * recording step released them after each module; _post_step gathers
	 * them): resident + (16386 + 2049)·2 − 1848. */
	o.recompute = ZS_RECOMPUTE_NONE;
	c.offload = ZS_OFFLOAD_OPTIMIZER;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.phase_peak[ZS_PH_OPTIMIZER], sc.resident_bytes + 36868);
	c.steps = 1;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.phase_peak[ZS_PH_OPTIMIZER], sc.resident_bytes + 36870 - 1848);
	/* --grad-accum 2: the second micro-step starts with them whole, so
	 * its prefetch gathers all but their 5462 + 683 shard elements:
	 * micro-step 1 sends 2·(2·39525 + 2·5462) + 2·39525 = 258,998 (no
	 * step(), no persistent gather), micro-step 2 2·(39525 − 6145 + 308) +
	 * 2·39525 = 146,426: 405,424 (417,714 if they were released). */
	c.offload = ZS_OFFLOAD_NONE;
	c.grad_accum = 2;
	theory_tfm_framework_schedule(&m, NULL, &o, &b, &c, 2, ZS_ZERO3, ZS_UNIT_LAYER, 3, &sc);
	ck_assert_uint_eq(sc.comm_elements, 405424);
}
END_TEST

static Suite *theory_suite(void)
{
	Suite *s = suite_create("theory");
	TCase *paper = tcase_create("paper"), *hand = tcase_create("schedule");
	TCase *rel = tcase_create("relations"), *out = tcase_create("output");
	TCase *model = tcase_create("models");

	tcase_add_test(paper, test_floors_reproduce_every_cell_of_the_papers_table_1);
	tcase_add_test(model, test_torch_zero1_on_the_tiny_gpt2_worked_by_hand);
	tcase_add_test(paper, test_mixed_adam_is_two_two_twelve_bytes_per_param);
	tcase_add_test(paper, test_floor_comm_tends_to_two_psi_and_three_psi_elements);
	tcase_add_test(hand, test_tiny_model_has_thirteen_params_in_units_of_nine_and_four);
	tcase_add_test(hand, test_tiny_model_at_two_ranks_pads_thirteen_to_fourteen);
	tcase_add_test(hand, test_tiny_model_at_three_ranks_pads_to_fifteen);
	tcase_add_test(hand, test_tiny_model_at_eight_ranks_pads_layers_more_than_the_model);
	tcase_add_test(hand, test_fp32_sgd_keeps_only_momentum_and_no_master_copy);
	tcase_add_test(hand, test_mixed_sgd_keeps_master_and_momentum);
	tcase_add_test(hand, test_activations_and_scratch_grow_with_the_batch);
	tcase_add_test(hand, test_default_model_has_33088_params_and_the_documented_zero3_row);
	tcase_add_test(rel, test_floors_equal_schedule_when_n_divides_every_unit_and_differ_by_the_padding_otherwise);
	tcase_add_test(rel, test_zero3_sends_one_and_a_half_times_dp_when_p_equals_g);
	tcase_add_test(rel, test_at_one_rank_all_four_schemes_are_the_same);
	tcase_add_test(out, test_json_has_one_row_per_scheme_unit_and_world_in_that_order);
	tcase_add_test(out, test_json_for_a_count_has_no_schedule_but_the_zero3_transient);
	tcase_add_test(out, test_text_prints_table_1_and_where_each_scheme_fits);
	suite_add_tcase(s, paper);
	suite_add_tcase(s, hand);
	suite_add_tcase(s, rel);
	tcase_add_test(hand, test_mlp_largest_batch_on_200kb_worked_by_hand);
	tcase_add_test(model, test_shipped_models_have_their_published_parameter_counts);
	tcase_add_test(model, test_gpt2_description_has_hugging_faces_148_tensors_and_shapes);
	tcase_add_test(model, test_llama_3_8b_description_fuses_q_k_v_and_gate_up_as_named);
	tcase_add_test(model, test_qwen2_5_0_5b_has_494032768_parameters_by_hand);
	tcase_add_test(model, test_qwen3_0_6b_has_596049920_parameters_by_hand);
	tcase_add_test(model, test_qwen3_defaults_and_refusals);
	tcase_add_test(model, test_gemma_2_2b_has_2614341888_parameters_by_hand);
	tcase_add_test(model, test_gemma2_defaults_and_unrun_keys);
	tcase_add_test(model, test_gemma_3_1b_has_999885952_parameters_by_hand);
	tcase_add_test(model, test_gemma3_defaults_and_refusals);
	tcase_add_test(model, test_new_shipped_models_round_to_their_cards_digits);
	tcase_add_test(model, test_qwen2_5_7b_has_7615616512_parameters_by_hand);
	tcase_add_test(model, test_qwen3_8b_has_8190735360_parameters_by_hand);
	tcase_add_test(model, test_gemma_2_9b_has_9241705984_parameters_by_hand);
	tcase_add_test(model, test_gemma_3_4b_has_3880263168_parameters_by_hand);
	tcase_add_test(model, test_gemma3_multimodal_reads_its_text_config);
	tcase_add_test(model, test_qwen2_sliding_window_counts_only_when_switched_on);
	tcase_add_test(model, test_phi_3_mini_4k_has_3821079552_parameters_by_hand);
	tcase_add_test(model, test_phi3_defaults_and_unrun_keys);
	tcase_add_test(model, test_llama_3_8b_head_unit_is_larger_than_its_embedding_and_twice_a_block);
	tcase_add_test(model, test_gpt2_tied_head_puts_the_final_norm_in_the_embeddings_unit);
	tcase_add_test(model, test_gpt2_activations_are_korthikantis_89653248_bytes_per_layer);
	tcase_add_test(model, test_llama_2_13b_activations_worked_by_hand);
	tcase_add_test(model, test_fp32_doubles_every_two_byte_activation);
	tcase_add_test(model, test_largest_micro_batch_fits_and_one_more_does_not);
	tcase_add_test(model, test_llama_3_8b_on_8_ranks_of_80gb_fits_only_on_the_floor_without_recompute);
	tcase_add_test(model, test_bad_configs_are_refused_naming_the_key);
	tcase_add_test(model, test_keys_that_change_no_byte_are_accepted_and_defaults_apply);
	tcase_add_test(model, test_an_unknown_name_lists_the_shipped_models);
	tcase_add_test(model, test_json_for_a_model_names_every_part_of_the_peak);
	tcase_add_test(model, test_deepspeed_zero3_on_the_tiny_gpt2_worked_by_hand);
	tcase_add_test(model, test_ddp_pass_failure_is_internal_and_a_refusal_is_bad_input);
	suite_add_tcase(s, out);
	suite_add_tcase(s, model);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	return run_with_shipped(theory_suite());
}
