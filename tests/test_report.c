/*
 * test_report — the report stage on hand-made measured/theory pairs.
 *
 * The datasets are built here from docs/schedule.md's closed forms (the
 * engine and the theory are not linked), then edited to carry a known
 * departure: padding, gathered params, full grads, activations, an unknown
 * buffer, a measurement that differs from the schedule model (in a total or
 * in one category of a breakdown), an input the loader refuses. Expected
 * numbers are worked out by hand in the comments. Every finding is shown to
 * hold on a consistent dataset and to turn false on one that contradicts it.
 * No gnuplot or pdflatex is needed (the end-to-end test uses --no-render).
 */
/* nftw, mkdtemp */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report.h"
#include "report/report_classify.h"
#include "report/report_data.h"
#include "report/report_findings.h"
#include "report/report_host.h"
#include "report/report_text.h"
#include "report/report_tfm.h"
#include "report/report_torch.h"
#include "util/util.h"
#include "suite_run.h"

/* ------------------------------------------------------------------------ */
/* A dataset as the engine and the theory would write it (mixed, Adam). */

#define P 2.0
#define G 2.0
#define K 12.0

struct fixture {
	cJSON *m, *t;
};

static double ceil_div(double n, double w)
{
	return ceil(n / w);
}

/* Add one run and its theory row, following docs/schedule.md exactly. */
static void add_run(struct fixture *fx, const size_t *widths, size_t nw, double batch,
                    enum zs_scheme s, unsigned world, enum zs_unit unit)
{
	double units[ZS_MAX_WIDTHS], psi = 0, S = 0, largest = 0, act, scratch, maxw = 0;
	double params_n, grads_n, opt_n, R, peak, fg = 0, gp = 0, comm, fcomm, fres, f;
	size_t nu = 0, l;
	cJSON *run = cJSON_CreateObject(), *row = cJSON_CreateObject(), *o, *a, *rbd, *pbd;

	for (l = 0; l + 1 < nw; l++) {
		double n = (double)(widths[l] * widths[l + 1] + widths[l + 1]);
		psi += n;
		if (unit == ZS_UNIT_LAYER)
			units[nu++] = n;
		maxw = fmax(maxw, (double)widths[l + 1]);
	}
	if (unit == ZS_UNIT_MODEL)
		units[nu++] = psi;
	for (l = 0; l < nu; l++) {
		S += ceil_div(units[l], world);
		largest = fmax(largest, units[l]);
	}
	act = 4 * batch * (double)(widths[0] + widths[nw - 1]);
	for (l = 1; l < nw; l++)
		act += 4 * batch * (double)widths[l];
	scratch = 2 * 4 * batch * maxw;

	params_n = s == ZS_ZERO3 ? S : psi;
	grads_n = s >= ZS_ZERO2 ? S : psi;
	opt_n = s >= ZS_ZERO1 ? S : psi;
	R = params_n * P + grads_n * G + opt_n * K;
	if (world > 1 && s == ZS_ZERO2)
		fg = psi * G;
	if (world > 1 && s == ZS_ZERO3) {
		gp = largest * P;
		fg = largest * G;
	}
	peak = R + act + scratch + gp + fg;
	f = world - 1.0;     /* (N-1)/N of the padded N·S elements */
	comm = s == ZS_DP ? 2 * f * S * G : s == ZS_ZERO3 ? f * S * (2 * P + G) : f * S * (G + P);
	fcomm = comm * psi / (S * world);
	fres = s == ZS_DP ? psi * (P + G + K) : s == ZS_ZERO1 ? psi * (P + G) + psi * K / world :
	       s == ZS_ZERO2 ? psi * P + psi * (G + K) / world : psi * (P + G + K) / world;

	cJSON_AddStringToObject(run, "scheme", zs_scheme_name(s));
	cJSON_AddNumberToObject(run, "world", world);
	cJSON_AddStringToObject(run, "unit", zs_unit_name(unit));
	a = cJSON_AddArrayToObject(run, "units");
	for (l = 0; l < nu; l++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(units[l]));
	cJSON_AddNumberToObject(run, "shard_elements", S);
	cJSON_AddNumberToObject(run, "padded_elements", S * world);
	cJSON_AddNumberToObject(run, "resident_bytes", R);
	o = rbd = cJSON_AddObjectToObject(run, "resident_breakdown");
	cJSON_AddNumberToObject(o, "param16", params_n * P);
	cJSON_AddNumberToObject(o, "grad16", grads_n * G);
	cJSON_AddNumberToObject(o, "master32", opt_n * 4);
	cJSON_AddNumberToObject(o, "adam_m", opt_n * 4);
	cJSON_AddNumberToObject(o, "adam_v", opt_n * 4);
	cJSON_AddNumberToObject(run, "peak_bytes", peak);
	o = pbd = cJSON_AddObjectToObject(run, "peak_breakdown");
	cJSON_AddNumberToObject(o, "param16", params_n * P);
	cJSON_AddNumberToObject(o, "grad16", grads_n * G);
	cJSON_AddNumberToObject(o, "master32", opt_n * 4);
	cJSON_AddNumberToObject(o, "adam_m", opt_n * 4);
	cJSON_AddNumberToObject(o, "adam_v", opt_n * 4);
	cJSON_AddNumberToObject(o, "gathered_params", gp);
	cJSON_AddNumberToObject(o, "full_grads", fg);
	cJSON_AddNumberToObject(o, "activations", act);
	cJSON_AddNumberToObject(o, "scratch", scratch);
	cJSON_AddNumberToObject(run, "comm_bytes_per_rank_per_step", comm);
	/* The start event carries the phase the previous step ended in. */
	a = cJSON_AddArrayToObject(run, "timeline");
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "phase", "optimizer");
	cJSON_AddStringToObject(o, "op", "start");
	cJSON_AddNumberToObject(o, "current_bytes", R);
	cJSON_AddItemToArray(a, o);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "phase", "backward");
	cJSON_AddStringToObject(o, "op", "alloc");
	cJSON_AddNumberToObject(o, "current_bytes", peak);
	cJSON_AddItemToArray(a, o);
	cJSON_AddItemToArray(cJSON_GetObjectItem(fx->m, "runs"), run);

	cJSON_AddStringToObject(row, "scheme", zs_scheme_name(s));
	cJSON_AddNumberToObject(row, "world", world);
	cJSON_AddStringToObject(row, "unit", zs_unit_name(unit));
	o = cJSON_AddObjectToObject(row, "floor");
	cJSON_AddNumberToObject(o, "resident_bytes", fres);
	cJSON_AddNumberToObject(o, "comm_bytes_per_rank_per_step", fcomm);
	/* The schedule model carries the same breakdowns as the measurement. */
	o = cJSON_AddObjectToObject(row, "schedule");
	cJSON_AddNumberToObject(o, "resident_bytes", R);
	cJSON_AddItemToObject(o, "resident_breakdown", cJSON_Duplicate(rbd, 1));
	cJSON_AddNumberToObject(o, "padding_bytes", R - fres);
	cJSON_AddNumberToObject(o, "peak_bytes", peak);
	cJSON_AddItemToObject(o, "peak_breakdown", cJSON_Duplicate(pbd, 1));
	cJSON_AddNumberToObject(o, "comm_bytes_per_rank_per_step", comm);
	cJSON_AddItemToArray(cJSON_GetObjectItem(fx->t, "rows"), row);
}

static cJSON *config_obj(const size_t *widths, size_t nw, double batch)
{
	cJSON *c = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(c, "layers"), *b;
	size_t l;

	for (l = 0; l < nw; l++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)widths[l]));
	cJSON_AddNumberToObject(c, "batch", batch);
	cJSON_AddStringToObject(c, "precision", "mixed");
	cJSON_AddStringToObject(c, "optimizer", "adam");
	b = cJSON_AddObjectToObject(c, "bytes_per_param");
	cJSON_AddNumberToObject(b, "param", P);
	cJSON_AddNumberToObject(b, "grad", G);
	cJSON_AddNumberToObject(b, "optimizer", K);
	return c;
}

/* Every scheme at every world size for the given units (bit 0 model,
 * bit 1 layer). */
static void build(struct fixture *fx, const size_t *widths, size_t nw, const unsigned *worlds,
                  size_t nworlds, int units)
{
	double psi = 0, batch = 1;
	cJSON *cfg;
	size_t l, i;
	int u, s;

	for (l = 0; l + 1 < nw; l++)
		psi += (double)(widths[l] * widths[l + 1] + widths[l + 1]);
	fx->m = cJSON_CreateObject();
	cJSON_AddStringToObject(fx->m, "format", "zerosim-measured/1");
	cfg = config_obj(widths, nw, batch);
	cJSON_AddNumberToObject(cfg, "params", psi);
	cJSON_AddItemToObject(fx->m, "config", cfg);
	cJSON_AddArrayToObject(fx->m, "runs");
	fx->t = cJSON_CreateObject();
	cJSON_AddStringToObject(fx->t, "format", "zerosim-theory/1");
	cJSON_AddNumberToObject(fx->t, "params", psi);
	cJSON_AddItemToObject(fx->t, "config", config_obj(widths, nw, batch));
	cJSON_AddArrayToObject(fx->t, "rows");
	for (u = 0; u < ZS_NUNITS; u++)
		for (s = 0; s < ZS_NSCHEMES; s++)
			for (i = 0; i < nworlds; i++)
				if (units & (1 << u))
					add_run(fx, widths, nw, batch, (enum zs_scheme)s, worlds[i], (enum zs_unit)u);
}

static void fixture_free(struct fixture *fx)
{
	cJSON_Delete(fx->m);
	cJSON_Delete(fx->t);
}

static cJSON *find_in(cJSON *arr, enum zs_scheme s, unsigned world, enum zs_unit u)
{
	cJSON *r;

	cJSON_ArrayForEach(r, arr)
		if (strcmp(cJSON_GetObjectItem(r, "scheme")->valuestring, zs_scheme_name(s)) == 0 &&
		    cJSON_GetObjectItem(r, "world")->valuedouble == world &&
		    strcmp(cJSON_GetObjectItem(r, "unit")->valuestring, zs_unit_name(u)) == 0)
			return r;
	ck_abort_msg("no run %s %u %s", zs_scheme_name(s), world, zs_unit_name(u));
	return NULL;
}

static cJSON *mrun(struct fixture *fx, enum zs_scheme s, unsigned world, enum zs_unit u)
{
	return find_in(cJSON_GetObjectItem(fx->m, "runs"), s, world, u);
}

static cJSON *trow(struct fixture *fx, enum zs_scheme s, unsigned world, enum zs_unit u)
{
	return find_in(cJSON_GetObjectItem(fx->t, "rows"), s, world, u);
}

static double num(cJSON *o, const char *key)
{
	return cJSON_GetObjectItem(o, key)->valuedouble;
}

static void set(cJSON *o, const char *key, double v)
{
	cJSON_SetNumberValue(cJSON_GetObjectItem(o, key), v);
}

/* Move a breakdown's sum by delta, so that it still sums to a total moved
 * by as much: a gain goes to its first category, a loss comes off its
 * categories in order (none below 0). */
static void shift_breakdown(cJSON *bd, double delta)
{
	cJSON *c;

	cJSON_ArrayForEach(c, bd) {
		double take = delta >= 0 ? delta : fmax(delta, -c->valuedouble);
		cJSON_SetNumberValue(c, c->valuedouble + take);
		delta -= take;
		if (delta == 0)
			return;
	}
	ck_abort_msg("breakdown cannot shift by %g", delta);
}

/* Set a total of o and keep its breakdown summing to it (the loader
 * refuses one that does not). */
static void set_total(cJSON *o, const char *key, double v)
{
	double delta = v - num(o, key);

	set(o, key, v);
	if (strcmp(key, "resident_bytes") == 0)
		shift_breakdown(cJSON_GetObjectItem(o, "resident_breakdown"), delta);
	else if (strcmp(key, "peak_bytes") == 0)
		shift_breakdown(cJSON_GetObjectItem(o, "peak_breakdown"), delta);
}

/* A measured number changed on both sides: the schedule model agrees, so
 * only the findings see it. Byte counts are whole bytes, so v is rounded:
 * then the shifted breakdowns sum exactly to it. */
static void set_both(struct fixture *fx, enum zs_scheme s, unsigned world, enum zs_unit u,
                     const char *key, double v)
{
	set_total(mrun(fx, s, world, u), key, round(v));
	set_total(cJSON_GetObjectItem(trow(fx, s, world, u), "schedule"), key, round(v));
}

/* One category of the peak breakdown set on both sides, the peak moved by
 * as much. */
static void set_peak_category_both(struct fixture *fx, enum zs_scheme s, unsigned world,
                                   enum zs_unit u, const char *cat, double v)
{
	cJSON *sides[2] = {mrun(fx, s, world, u), cJSON_GetObjectItem(trow(fx, s, world, u), "schedule")};
	int i;

	for (i = 0; i < 2; i++) {
		cJSON *bd = cJSON_GetObjectItem(sides[i], "peak_breakdown");
		set(sides[i], "peak_bytes", num(sides[i], "peak_bytes") + v - num(bd, cat));
		set(bd, cat, v);
	}
}

static void load(struct fixture *fx, struct report_data *d)
{
	char *cause = NULL;
	int rc = report_data_from_json(fx->m, fx->t, "m.json", "t.json", d, &cause);

	ck_assert_msg(rc == 0, "load failed: %s", cause ? cause : "?");
}

static const size_t tiny[] = {2, 3, 1};      /* Ψ = 2·3+3 + 3·1+1 = 13; units 9 and 4 */
static const size_t dflt[] = {64, 256, 64};  /* Ψ = 33088; units 16640 and 16448 */

static struct report_point classify_one(struct report_data *d, enum zs_scheme s, unsigned w,
                                        enum zs_unit u, enum report_metric m)
{
	struct report_point pt;
	const struct report_run *r = report_data_find(d, s, w, u);

	ck_assert_ptr_nonnull(r);
	report_classify_point(d, r, m, &pt);
	return pt;
}

/* ------------------------------------------------------------------------ */
/* Classifier */

START_TEST(test_zero3_peak_departs_by_padding_gathered_params_full_grads_and_activations)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;

	build(&fx, tiny, 3, w, 2, 1);
	load(&fx, &d);
	/* N = 2: S = 7 (13 padded to 14). Floor 16·13/2 = 104. Resident 7·16 = 112,
	 * padding (7 − 6.5)·16 = 8. Gathered 13·2 = 26, full grads 26, activations
	 * 4·(2+1+3) = 24 + 4 = 28 plus scratch 2·4·3 = 24: 52. Peak 216. */
	pt = classify_one(&d, ZS_ZERO3, 2, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_double_eq(pt.floor, 104);
	ck_assert_double_eq(pt.measured, 216);
	ck_assert_double_eq(pt.departure, 112);
	ck_assert_double_eq_tol(pt.cause[REPORT_PADDING], 8, 1e-9);
	ck_assert_double_eq(pt.cause[REPORT_GATHERED], 26);
	ck_assert_double_eq(pt.cause[REPORT_FULL_GRADS], 26);
	ck_assert_double_eq(pt.cause[REPORT_ACTIVATIONS], 52);
	ck_assert_double_eq(pt.cause[REPORT_OTHER], 0);
	ck_assert_int_eq(pt.status, REPORT_FLAGGED);
	ck_assert_int_eq(pt.unexplained, 0);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_zero2_peak_departs_by_full_grads_and_padding)
{
	static const unsigned w[] = {4};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;

	build(&fx, tiny, 3, w, 1, 1);
	load(&fx, &d);
	/* N = 4: S = 4, padding (4 − 3.25)·14 = 10.5; full grads 13·2 = 26. */
	pt = classify_one(&d, ZS_ZERO2, 4, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_double_eq_tol(pt.cause[REPORT_PADDING], 10.5, 1e-9);
	ck_assert_double_eq(pt.cause[REPORT_FULL_GRADS], 26);
	ck_assert_double_eq(pt.cause[REPORT_GATHERED], 0);
	ck_assert_double_eq(pt.cause[REPORT_ACTIVATIONS], 52);
	ck_assert_double_eq_tol(pt.cause[REPORT_OTHER], 0, 1e-9);
	ck_assert_int_eq(pt.status, REPORT_FLAGGED);
	/* The resident point departs by padding alone. */
	pt = classify_one(&d, ZS_ZERO2, 4, ZS_UNIT_MODEL, REPORT_RESIDENT);
	ck_assert_double_eq_tol(pt.departure, 10.5, 1e-9);
	ck_assert_double_eq_tol(pt.cause[REPORT_PADDING], 10.5, 1e-9);
	ck_assert_int_eq(pt.status, REPORT_FLAGGED);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_activations_alone_are_the_baseline_and_not_a_flag)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;

	build(&fx, tiny, 3, w, 2, 1);
	load(&fx, &d);
	pt = classify_one(&d, ZS_DP, 2, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_double_eq(pt.departure, 52);
	ck_assert_double_eq(pt.cause[REPORT_ACTIVATIONS], 52);
	ck_assert_int_eq(pt.status, REPORT_BASELINE);
	pt = classify_one(&d, ZS_DP, 2, ZS_UNIT_MODEL, REPORT_RESIDENT);
	ck_assert_int_eq(pt.status, REPORT_NONE);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_comm_departs_by_padding_of_the_sent_buffer)
{
	static const unsigned w[] = {2};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;

	build(&fx, tiny, 3, w, 1, 1);
	load(&fx, &d);
	/* DP all-reduce: floor 2·(1/2)·13·2 = 26 B, sent 2·(1/2)·14·2 = 28 B. */
	pt = classify_one(&d, ZS_DP, 2, ZS_UNIT_MODEL, REPORT_COMM);
	ck_assert_double_eq_tol(pt.floor, 26, 1e-9);
	ck_assert_double_eq(pt.measured, 28);
	ck_assert_double_eq_tol(pt.cause[REPORT_PADDING], 2, 1e-9);
	ck_assert_int_eq(pt.status, REPORT_FLAGGED);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_measurement_that_differs_from_the_schedule_is_unexplained)
{
	static const unsigned w[] = {2};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;
	cJSON *r;

	build(&fx, tiny, 3, w, 1, 1);
	/* The engine keeps 40 bytes the schedule does not know of, in an
	 * unknown category, at rest. */
	r = mrun(&fx, ZS_DP, 2, ZS_UNIT_MODEL);
	set(r, "resident_bytes", num(r, "resident_bytes") + 40);
	cJSON_AddNumberToObject(cJSON_GetObjectItem(r, "resident_breakdown"), "bounce_buffer", 40);
	load(&fx, &d);
	pt = classify_one(&d, ZS_DP, 2, ZS_UNIT_MODEL, REPORT_RESIDENT);
	ck_assert_int_eq(pt.unexplained, 1);
	ck_assert_int_eq(pt.breakdown_cat, REPORT_CAT_UNKNOWN);
	ck_assert_double_eq(pt.breakdown_measured, 40);
	ck_assert_double_eq(pt.breakdown_schedule, 0);
	ck_assert_double_eq(pt.cause[REPORT_OTHER], 40);
	ck_assert_int_eq(pt.status, REPORT_FLAGGED);
	/* The peak of that run still matches the schedule. */
	pt = classify_one(&d, ZS_DP, 2, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_int_eq(pt.unexplained, 0);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_one_byte_off_the_schedule_is_unexplained_even_without_a_flag)
{
	static const unsigned w[] = {1};
	struct fixture fx;
	struct report_data d;
	struct report_point pt;
	cJSON *row;

	build(&fx, tiny, 3, w, 1, 1);
	row = cJSON_GetObjectItem(trow(&fx, ZS_ZERO1, 1, ZS_UNIT_MODEL), "schedule");
	set_total(row, "peak_bytes", num(row, "peak_bytes") + 1);
	load(&fx, &d);
	pt = classify_one(&d, ZS_ZERO1, 1, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_int_eq(pt.status, REPORT_BASELINE);
	ck_assert_int_eq(pt.unexplained, 1);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_bytes_moved_between_categories_are_unexplained_though_the_totals_agree)
{
	static const unsigned w[] = {4};
	struct fixture fx;
	struct report_data d;
	struct report_point pt, *pts;
	struct zs_buf b = {0};
	size_t npts, i, unexplained = 0;
	cJSON *bd;

	build(&fx, dflt, 3, w, 1, 1);
	/* The review's case with the total kept: 1000 B of zero3's peak counted
	 * as activations instead of param16. N = 4: S = 8272, param16 16544 B;
	 * peak 8272·16 + 4·(64+64) + 4·(256+64) + 2·4·256 + 33088·4 = 268544 B. */
	bd = cJSON_GetObjectItem(mrun(&fx, ZS_ZERO3, 4, ZS_UNIT_MODEL), "peak_breakdown");
	set(bd, "param16", num(bd, "param16") - 1000);
	set(bd, "activations", num(bd, "activations") + 1000);
	load(&fx, &d);
	pt = classify_one(&d, ZS_ZERO3, 4, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_double_eq(pt.measured, 268544);
	ck_assert_double_eq(pt.schedule, 268544);
	ck_assert_int_eq(pt.unexplained, 1);
	ck_assert_int_eq(pt.breakdown_cat, REPORT_CAT_PARAM16);
	ck_assert_double_eq(pt.breakdown_measured, 15544);
	ck_assert_double_eq(pt.breakdown_schedule, 16544);
	report_point_line(&d, &pt, &b);
	ck_assert_str_eq(zs_buf_str(&b), "UNEXPLAINED zero3 N=4 unit=model peak: measured 268544 B, "
	             "schedule model 268544 B (+0 B); first differing category param16: measured "
	             "15544 B, schedule model 16544 B: the engine or the theory departs from "
	             "docs/schedule.md");
	zs_buf_free(&b);
	/* That point alone: the run's resident breakdown is untouched. */
	pts = report_classify(&d, &npts);
	for (i = 0; i < npts; i++)
		unexplained += (size_t)pts[i].unexplained;
	ck_assert_uint_eq(unexplained, 1);
	report_flags_text(&d, pts, npts, &b);
	ck_assert_ptr_nonnull(strstr(zs_buf_str(&b), "1 unexplained"));
	ck_assert_ptr_nonnull(strstr(zs_buf_str(&b), "first differing category param16: measured "
	                         "15544 B, schedule model 16544 B"));
	zs_buf_free(&b);
	free(pts);
	report_data_free(&d);

	/* A theory row without the schedule's breakdown is compared by totals
	 * alone, as before. */
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(trow(&fx, ZS_ZERO3, 4, ZS_UNIT_MODEL), "schedule"),
	                           "peak_breakdown");
	load(&fx, &d);
	pt = classify_one(&d, ZS_ZERO3, 4, ZS_UNIT_MODEL, REPORT_PEAK);
	ck_assert_int_eq(pt.unexplained, 0);
	ck_assert_int_eq(pt.breakdown_cat, -1);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_sweep_flags_zero2_zero3_peaks_and_padding_and_nothing_at_n1)
{
	static const unsigned w[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
	struct fixture fx;
	struct report_data d;
	struct report_point *pts;
	size_t npts, i;

	build(&fx, dflt, 3, w, 10, 3);
	load(&fx, &d);
	pts = report_classify(&d, &npts);
	ck_assert_uint_eq(npts, (size_t)2 * 4 * 10 * 3);
	for (i = 0; i < npts; i++) {
		const struct report_run *r = pts[i].run;
		int padded = r->world % 3 == 0;   /* 33088, 16640, 16448: not multiples of 3 */
		int transient = r->world > 1 && pts[i].metric == REPORT_PEAK && r->scheme >= ZS_ZERO2;
		int sharded = r->scheme != ZS_DP || pts[i].metric == REPORT_COMM;
		int expect = transient || (padded && sharded && r->world > 1);
		ck_assert_int_eq(pts[i].unexplained, 0);
		ck_assert_int_eq(pts[i].breakdown_cat, -1);
		ck_assert_msg((pts[i].status == REPORT_FLAGGED) == expect, "%s N=%u %s %s: status %s",
		              zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit),
		              report_metric_name(pts[i].metric), report_status_name(pts[i].status));
		if (pts[i].metric == REPORT_PEAK)
			ck_assert_int_ne(pts[i].status, REPORT_NONE);
		ck_assert_double_eq(pts[i].cause[REPORT_OTHER], 0);
	}
	free(pts);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Loading */

static char *load_error(struct fixture *fx)
{
	struct report_data d;
	char *cause = NULL;

	ck_assert_int_eq(report_data_from_json(fx->m, fx->t, "m.json", "t.json", &d, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	return cause;
}

/* Host figures (an offload) on a run and its schedule: every rank's is
 * checked, against the schedule's own per_rank where it has one. */
static void add_host(cJSON *o, double res, double peak, const double *ranks, int n)
{
	cJSON *per = cJSON_GetObjectItem(o, "per_rank");
	if (per == NULL)
		per = cJSON_AddObjectToObject(o, "per_rank");
	cJSON_AddNumberToObject(o, "host_resident_bytes", res);
	cJSON_AddNumberToObject(o, "host_peak_bytes", peak);
	cJSON_AddNumberToObject(o, "host_resident_bytes_per_node", res);
	if (ranks != NULL) {
		cJSON_AddItemToObject(per, "host_resident_bytes", cJSON_CreateDoubleArray(ranks, n));
		cJSON_AddItemToObject(per, "host_peak_bytes", cJSON_CreateDoubleArray(ranks, n));
	}
}

static size_t host_line_of(struct fixture *fx, char *line, size_t len)
{
	struct report_data d;
	struct zs_buf b = {0};
	load(fx, &d);
	const struct report_run *r = report_data_find(&d, ZS_ZERO1, 2, ZS_UNIT_MODEL);
	ck_assert_int_eq(r->host.has, 1);
	report_host_line("zero1 N=2", &r->host, &b);
	snprintf(line, len, "%s", zs_buf_str(&b));
	zs_buf_free(&b);
	size_t n = report_host_departures(&r->host);
	report_data_free(&d);
	return n;
}

START_TEST(test_every_ranks_host_bytes_are_checked_against_the_schedule)
{
	static const unsigned w[] = {2};
	static const double even[] = {1000, 1000}, low[] = {1000, 999}, tall[] = {1000, 1001};
	struct fixture fx;
	char line[512], *cause;

	/* Every rank as the schedule's single figure. */
	build(&fx, tiny, 3, w, 1, 1);
	add_host(mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), 1000, 1000, even, 2);
	add_host(cJSON_GetObjectItem(trow(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), "schedule"), 1000, 1000, NULL, 0);
	ck_assert_uint_eq(host_line_of(&fx, line, sizeof line), 0);
	ck_assert_str_eq(line, "zero1 N=2: resident 1000 B (schedule 1000), peak 1000 B (schedule 1000), resident per "
	                       "node 1000 B (schedule 1000); all 2 ranks as the schedule");
	fixture_free(&fx);

	/* Rank 1 below the binding rank: the run's figures agree, the rank's
	 * do not, twice (resident and peak). */
	build(&fx, tiny, 3, w, 1, 1);
	add_host(mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), 1000, 1000, low, 2);
	add_host(cJSON_GetObjectItem(trow(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), "schedule"), 1000, 1000, NULL, 0);
	ck_assert_uint_eq(host_line_of(&fx, line, sizeof line), 2);
	ck_assert_msg(strstr(line, "; rank 1 resident 999 B (schedule 1000, UNEXPLAINED); rank 1 peak 999 B") != NULL,
	              "%s", line);
	fixture_free(&fx);

	/* A schedule of unequal ranks is the one each rank is held to. */
	build(&fx, tiny, 3, w, 1, 1);
	add_host(mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), 1001, 1001, tall, 2);
	add_host(cJSON_GetObjectItem(trow(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), "schedule"), 1001, 1001, tall, 2);
	ck_assert_uint_eq(host_line_of(&fx, line, sizeof line), 0);
	fixture_free(&fx);
	build(&fx, tiny, 3, w, 1, 1);
	add_host(mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), 1001, 1001, tall, 2);
	add_host(cJSON_GetObjectItem(trow(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), "schedule"), 1001, 1001, even, 2);
	ck_assert_uint_eq(host_line_of(&fx, line, sizeof line), 2);
	ck_assert_msg(strstr(line, "rank 1 resident 1001 B (schedule 1000, UNEXPLAINED)") != NULL, "%s", line);
	fixture_free(&fx);

	/* An array that is not one entry per rank is refused. */
	build(&fx, tiny, 3, w, 1, 1);
	add_host(mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_MODEL), 1000, 1000, even, 1);
	cause = load_error(&fx);
	ck_assert_msg(strstr(cause, "per_rank.host_resident_bytes needs one entry per rank (2)") != NULL, "%s", cause);
	free(cause);
	fixture_free(&fx);
}
END_TEST

/* Every setting of the step that changes its bytes is part of the run
 * (the review of main 2a9ee63: a K = 2 measurement beside a K = 1 theory
 * was joined and drawn as UNEXPLAINED): one file naming it and the other
 * not, or the two naming other values, is refused naming the key; the same
 * value in both, or K = 1 beside no K (a K = 1 run writes none), joins. */
START_TEST(test_a_step_setting_in_one_file_only_is_refused_naming_it)
{
	static const unsigned w[] = {2};
	/* the keys docs/formats.md gives the measured and theory files, with
	 * a value each run would write */
	static const struct {
		const char *key, *json, *other, *want;
	} set[] = {
		{"grad_accum", "2", "3", "differ in grad_accum: 2 and 1"},
		{"ddp_no_sync", "true", "false", "differ in ddp_no_sync: true and absent"},
		{"freeze", "\"embeddings\"", "\"blocks:0-1\"", "differ in freeze: 'embeddings' and absent"},
		{"lora_r", "8", "4", "differ in lora_r: 8 and absent"},
		{"lora_alpha", "16", "8", "differ in lora_alpha: 16 and absent"},
		{"lora_dropout", "0.05", "0", "differ in lora_dropout: 0.05 and absent"},
		{"lora_targets", "\"default\"", "\"all-linear\"", "differ in lora_targets: 'default' and absent"},
		{"quant_base", "\"nf4\"", "\"none\"", "differ in quant_base: 'nf4' and absent"},
		{"double_quant", "true", "false", "differ in double_quant: true and absent"},
	};
	struct fixture fx;
	struct report_data d;
	char *cause;

	for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
		build(&fx, tiny, 3, w, 1, 1);
		cJSON *mc = cJSON_GetObjectItem(fx.m, "config"), *tc = cJSON_GetObjectItem(fx.t, "config");
		/* PyTorch's, where every key is one of the run's (the paper's
		 * schedule refuses a frozen file alone: paper_freeze_tfm.sh) */
		cJSON_AddStringToObject(mc, "framework", "torch");
		cJSON_AddStringToObject(tc, "framework", "torch");
		cJSON_AddItemToObject(mc, set[i].key, cJSON_Parse(set[i].json));
		cause = load_error(&fx);
		ck_assert_msg(strstr(cause, set[i].want) != NULL, "%s: %s", set[i].key, cause);
		ck_assert_msg(strncmp(cause, "m.json and t.json ", 18) == 0, "%s", cause);
		free(cause);
		cJSON_AddItemToObject(tc, set[i].key, cJSON_Parse(set[i].other));
		cause = load_error(&fx);
		ck_assert_msg(strstr(cause, set[i].key) != NULL, "%s: %s", set[i].key, cause);
		free(cause);
		cJSON_ReplaceItemInObject(tc, set[i].key, cJSON_Parse(set[i].json));
		load(&fx, &d);
		ck_assert_double_eq(d.grad_accum, i == 0 ? 2 : 1);
		report_data_free(&d);
		fixture_free(&fx);
	}
	/* K = 1 written beside none: the same run */
	build(&fx, tiny, 3, w, 1, 1);
	cJSON_AddNumberToObject(cJSON_GetObjectItem(fx.m, "config"), "grad_accum", 1);
	load(&fx, &d);
	ck_assert_double_eq(d.grad_accum, 1);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_unknown_format_is_refused_naming_both_formats)
{
	char dir[] = "/tmp/test_report.XXXXXX", *mp, *tp, *cause = NULL;
	static const char m[] = "{\"format\": \"zerosim-measured/2\", \"config\": {}, \"runs\": []}";
	static const char t[] = "{\"format\": \"zerosim-theory/1\", \"params\": 1, \"rows\": []}";
	struct report_data d;
	char *want;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	mp = zs_asprintf("%s/m.json", dir);
	tp = zs_asprintf("%s/t.json", dir);
	ck_assert_int_eq(zs_write_atomic(mp, m, strlen(m), NULL), 0);
	ck_assert_int_eq(zs_write_atomic(tp, t, strlen(t), NULL), 0);
	ck_assert_int_eq(report_data_load(mp, tp, &d, &cause), -1);
	want = zs_asprintf("%s: this file is format zerosim-measured/2, this zerosim reads "
	                   "zerosim-measured/1", mp);
	ck_assert_str_eq(cause, want);
	free(cause);
	cause = NULL;
	free(want);
	/* The theory file given as the measurement is refused the same way. */
	ck_assert_int_eq(report_data_load(tp, tp, &d, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "this file is format zerosim-theory/1"));
	free(cause);
	unlink(mp);
	unlink(tp);
	rmdir(dir);
	free(mp);
	free(tp);
}
END_TEST

START_TEST(test_files_of_different_models_or_runs_are_refused)
{
	static const unsigned w[] = {1};
	static const int other[] = {2, 4, 1};
	struct fixture fx;
	char *cause;
	cJSON *cfg;

	build(&fx, tiny, 3, w, 1, 1);
	set(fx.t, "params", 14);
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "13 and 14 params"));
	free(cause);
	set(fx.t, "params", 13);

	cfg = cJSON_GetObjectItem(fx.t, "config");
	cJSON_ReplaceItemInObject(cfg, "layers", cJSON_CreateIntArray(other, 3));
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "layer widths differ"));
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 1, 1);
	cfg = cJSON_GetObjectItem(fx.t, "config");
	cJSON_ReplaceItemInObject(cfg, "precision", cJSON_CreateString("fp32"));
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "differ in precision: mixed and fp32"));
	free(cause);
	cJSON_ReplaceItemInObject(cfg, "precision", cJSON_CreateString("mixed"));
	cJSON_ReplaceItemInObject(cfg, "optimizer", cJSON_CreateString("sgd"));
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "differ in optimizer"));
	free(cause);
	cJSON_ReplaceItemInObject(cfg, "optimizer", cJSON_CreateString("adam"));
	set(cfg, "batch", 8);
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "differ in batch: 1 and 8"));
	free(cause);
	cJSON_ReplaceItemInObject(cfg, "layers", cJSON_CreateNull());
	cause = load_error(&fx);
	ck_assert_ptr_nonnull(strstr(cause, "only as --params"));
	free(cause);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_a_measured_run_without_a_theory_row_is_refused)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	char *cause;

	build(&fx, tiny, 3, w, 2, 1);
	cJSON_DeleteItemFromArray(cJSON_GetObjectItem(fx.t, "rows"), 7);   /* zero3 N=2 */
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "t.json has no row for the measured run zero3 N=2 unit=model");
	free(cause);
	fixture_free(&fx);
}
END_TEST

/* A theory row given twice (the first would be joined and the second
 * ignored), a measured run given twice (the same message as a
 * transformer's: one join), and a key given twice in one object (cJSON
 * keeps both; a reader sees the first) are each refused. */
START_TEST(test_a_row_run_or_key_given_twice_is_refused)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	char *cause;
	cJSON *rows, *peak;

	build(&fx, tiny, 3, w, 2, 1);
	rows = cJSON_GetObjectItem(fx.t, "rows");
	cJSON_AddItemToArray(rows, cJSON_Duplicate(cJSON_GetArrayItem(rows, 3), 1));
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "t.json: rows[3] and rows[8] are both zero1 N=2 unit=model; each must be "
	                 "given once");
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 2, 1);
	rows = cJSON_GetObjectItem(fx.m, "runs");
	cJSON_AddItemToArray(rows, cJSON_Duplicate(cJSON_GetArrayItem(rows, 0), 1));
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[0] and runs[8] are both dp N=1 unit=model; each must be given once");
	free(cause);
	fixture_free(&fx);

	/* peak_bytes twice in a run: the later one never read. */
	build(&fx, tiny, 3, w, 2, 1);
	peak = cJSON_GetArrayItem(cJSON_GetObjectItem(fx.m, "runs"), 1);
	cJSON_AddItemToObject(peak, "peak_bytes", cJSON_CreateNumber(1));
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: the key \"peak_bytes\" appears twice in one object; each key must "
	                 "be given once");
	free(cause);
	fixture_free(&fx);
}
END_TEST

/* One join for both families (report_join_runs): a theory row without a
 * measured run stays a theory row, which the MLP's section leaves out (as
 * before) but reads and checks like the others (before, it was skipped). */
START_TEST(test_a_theory_row_without_a_run_is_left_out_but_checked)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	struct report_data d;
	cJSON *runs, *rows;
	int k = -1, i;

	build(&fx, tiny, 3, w, 2, 1);
	runs = cJSON_GetObjectItem(fx.m, "runs");
	for (i = cJSON_GetArraySize(runs) - 1; i >= 0; i--)
		if (num(cJSON_GetArrayItem(runs, i), "world") == 2)
			cJSON_DeleteItemFromArray(runs, i);
	load(&fx, &d);
	ck_assert_uint_eq(d.nruns, 4);
	ck_assert_ptr_nonnull(report_data_find(&d, ZS_ZERO3, 1, ZS_UNIT_MODEL));
	ck_assert_ptr_null(report_data_find(&d, ZS_ZERO3, 2, ZS_UNIT_MODEL));
	report_data_free(&d);

	rows = cJSON_GetObjectItem(fx.t, "rows");
	for (i = 0; i < cJSON_GetArraySize(rows) && k < 0; i++)
		if (num(cJSON_GetArrayItem(rows, i), "world") == 2)
			k = i;
	ck_assert_int_ge(k, 0);
	cJSON_DeleteItemFromObject(cJSON_GetArrayItem(rows, k), "schedule");
	char *cause = load_error(&fx), *want = zs_asprintf("t.json: rows[%d] has no schedule model; the report "
	                                                   "needs one", k);
	ck_assert_str_eq(cause, want);
	free(want);
	free(cause);
	fixture_free(&fx);
}
END_TEST

/* The report holds as many world sizes as the file gives (memory is the
 * bound, not --world's ZS_MAX_WORLDS): all of them drawn, none dropped. */
START_TEST(test_more_world_sizes_than_world_takes_are_all_drawn)
{
	enum { NW = ZS_MAX_WORLDS + 36 };
	unsigned w[NW];
	const unsigned *got;
	struct fixture fx;
	struct report_data d;

	for (unsigned i = 0; i < NW; i++)
		w[i] = NW - i; /* given in reverse: drawn sorted */
	build(&fx, tiny, 3, w, NW, 1);
	load(&fx, &d);
	ck_assert_uint_eq(report_data_worlds(&d, ZS_UNIT_MODEL, &got), NW);
	for (unsigned i = 0; i < NW; i++)
		ck_assert_uint_eq(got[i], i + 1);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_a_breakdown_that_does_not_sum_to_its_total_is_refused_naming_the_run_and_both_sums)
{
	static const unsigned w[] = {1};
	struct fixture fx;
	cJSON *run, *bd;
	char *cause;

	build(&fx, tiny, 3, w, 1, 1);
	/* The review's case: 1000 B added to every run's activations, the totals
	 * left alone. dp N=1 peaks at 16·13 + 28 + 24 = 260 B. */
	cJSON_ArrayForEach(run, cJSON_GetObjectItem(fx.m, "runs")) {
		bd = cJSON_GetObjectItem(run, "peak_breakdown");
		set(bd, "activations", num(bd, "activations") + 1000);
	}
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[0] (dp N=1 unit=model): peak_breakdown sums to 1260 B, "
	                 "but peak_bytes is 260 B; a breakdown must sum to its total");
	free(cause);
	fixture_free(&fx);

	/* One byte short at rest (runs[1] is zero1 N=1: 208 B resident). */
	build(&fx, tiny, 3, w, 1, 1);
	bd = cJSON_GetObjectItem(mrun(&fx, ZS_ZERO1, 1, ZS_UNIT_MODEL), "resident_breakdown");
	set(bd, "master32", num(bd, "master32") - 1);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[1] (zero1 N=1 unit=model): resident_breakdown sums to "
	                 "207 B, but resident_bytes is 208 B; a breakdown must sum to its total");
	free(cause);
	fixture_free(&fx);

	/* The schedule model's breakdowns are held to the same rule. */
	build(&fx, tiny, 3, w, 1, 1);
	bd = cJSON_GetObjectItem(cJSON_GetObjectItem(trow(&fx, ZS_ZERO3, 1, ZS_UNIT_MODEL), "schedule"),
	                         "peak_breakdown");
	set(bd, "scratch", num(bd, "scratch") + 1);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "t.json: rows[3].schedule (zero3 N=1 unit=model): peak_breakdown sums "
	                 "to 261 B, but peak_bytes is 260 B; a breakdown must sum to its total");
	free(cause);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_a_negative_byte_count_is_refused)
{
	static const unsigned w[] = {1};
	struct fixture fx;
	cJSON *ev;
	char *cause;

	/* runs[2] is zero2 N=1; its breakdown would still sum to the old total,
	 * but the sign is refused first. */
	build(&fx, tiny, 3, w, 1, 1);
	set(mrun(&fx, ZS_ZERO2, 1, ZS_UNIT_MODEL), "peak_bytes", -1);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[2].peak_bytes is -1, not a byte count (a finite number, "
	                 "0 or more)");
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 1, 1);
	set(cJSON_GetObjectItem(mrun(&fx, ZS_DP, 1, ZS_UNIT_MODEL), "peak_breakdown"), "scratch", -24);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[0]: peak_breakdown.scratch is not a byte count (a finite "
	                 "number, 0 or more)");
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 1, 1);
	set(mrun(&fx, ZS_DP, 1, ZS_UNIT_MODEL), "comm_bytes_per_rank_per_step", -0.5);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[0].comm_bytes_per_rank_per_step is -0.5, not a byte "
	                 "count (a finite number, 0 or more)");
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 1, 1);
	ev = cJSON_GetArrayItem(cJSON_GetObjectItem(mrun(&fx, ZS_DP, 1, ZS_UNIT_MODEL), "timeline"), 1);
	set(ev, "current_bytes", -260);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[0].timeline[1].current_bytes is -260, not a byte count "
	                 "(a finite number, 0 or more)");
	free(cause);
	fixture_free(&fx);

	/* The theory's floor and schedule model alike. */
	build(&fx, tiny, 3, w, 1, 1);
	set(cJSON_GetObjectItem(trow(&fx, ZS_DP, 1, ZS_UNIT_MODEL), "floor"), "resident_bytes", -208);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "t.json: rows[0].floor.resident_bytes is -208, not a byte count (a "
	                 "finite number, 0 or more)");
	free(cause);
	fixture_free(&fx);

	build(&fx, tiny, 3, w, 1, 1);
	set(cJSON_GetObjectItem(trow(&fx, ZS_DP, 1, ZS_UNIT_MODEL), "schedule"),
	    "comm_bytes_per_rank_per_step", -1);
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "t.json: rows[0].schedule.comm_bytes_per_rank_per_step is -1, not a "
	                 "byte count (a finite number, 0 or more)");
	free(cause);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_timeline_phases_are_loaded_and_an_unknown_one_is_refused)
{
	static const unsigned w[] = {2};
	struct fixture fx;
	struct report_data d;
	const struct report_run *r;
	cJSON *ev;
	char *cause;

	build(&fx, tiny, 3, w, 1, 1);
	load(&fx, &d);
	r = report_data_find(&d, ZS_ZERO3, 2, ZS_UNIT_MODEL);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->ntimeline, 2);
	ck_assert_int_eq(r->phase[0], REPORT_PH_OPTIMIZER);
	ck_assert_int_eq(r->phase[1], REPORT_PH_BACKWARD);
	ck_assert_str_eq(report_phase_name(r->phase[1]), "backward");
	report_data_free(&d);

	/* runs[3] is zero3 N=2: the build order is unit, scheme, world. */
	ev = cJSON_GetArrayItem(cJSON_GetObjectItem(mrun(&fx, ZS_ZERO3, 2, ZS_UNIT_MODEL), "timeline"), 1);
	cJSON_ReplaceItemInObject(ev, "phase", cJSON_CreateString("warmup"));
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[3].timeline[1]: unknown phase 'warmup' (setup, forward, "
	                 "backward, reduce, optimizer, gather)");
	free(cause);
	cJSON_ReplaceItemInObject(ev, "phase", cJSON_CreateNumber(1));
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[3].timeline[1].phase is not a string");
	free(cause);
	cJSON_DeleteItemFromObject(ev, "phase");
	cause = load_error(&fx);
	ck_assert_str_eq(cause, "m.json: runs[3].timeline[1] has no \"phase\"");
	free(cause);
	fixture_free(&fx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* LaTeX table */

static const char table_expected[] =
	"% table.tex, written by zerosim report: measured bytes per parameter\n"
	"% per rank (bytes / 13 params). Needs in the preamble:\n"
	"%   \\usepackage{booktabs}\n"
	"\n"
	"\\begin{table}[htbp]\n"
	"\\centering\n"
	"\\small\n"
	"\\caption{Measured bytes per parameter per rank, unit=model: resident between steps and peak during a step.}\n"
	"\\label{tab:memory-model}\n"
	"\\begin{tabular}{r rr rr rr rr}\n"
	"\\toprule\n"
	" & \\multicolumn{2}{c}{DP} & \\multicolumn{2}{c}{ZeRO-1} & \\multicolumn{2}{c}{ZeRO-2} & \\multicolumn{2}{c}{ZeRO-3} \\\\\n"
	"\\cmidrule(lr){2-3} \\cmidrule(lr){4-5} \\cmidrule(lr){6-7} \\cmidrule(lr){8-9}\n"
	"$N$ & resident & peak & resident & peak & resident & peak & resident & peak \\\\\n"
	"\\midrule\n"
	/* N = 1: 16·13 = 208 B at rest, + 52 B activations and scratch = 20.00. */
	"1 & 16.00 & 20.00\\textsuperscript{a} & 16.00 & 20.00\\textsuperscript{a} & 16.00 & 20.00\\textsuperscript{a} & 16.00 & 20.00\\textsuperscript{a} \\\\\n"
	/* N = 2, S = 7: zero1 52+84 = 136 (10.46), peak 188 (14.46); zero2 26+98 =
	 * 124 (9.54), peak +26 full grads = 202 (15.54); zero3 112 (8.62), 216 (16.62). */
	"2 & 16.00 & 20.00\\textsuperscript{a} & 10.46\\textsuperscript{p} & 14.46\\textsuperscript{p,a} & 9.54\\textsuperscript{p} & 15.54\\textsuperscript{p,f,a} & 8.62\\textsuperscript{p} & 16.62\\textsuperscript{p,g,f,a} \\\\\n"
	"\\bottomrule\n"
	"\\end{tabular}\n"
	"\n"
	"\\smallskip\n"
	"\\footnotesize Marked cells depart from the paper floor; the marks give the cause: \\textsuperscript{p}~padding of the shards; \\textsuperscript{g}~gathered params; \\textsuperscript{f}~full grads; \\textsuperscript{a}~activations and scratch (held by every scheme: not flagged).\n"
	"\\end{table}\n"
	"\n"
	"\\begin{table}[htbp]\n"
	"\\centering\n"
	"\\small\n"
	"\\caption{Measured bytes sent per rank per step, per parameter.}\n"
	"\\label{tab:comm}\n"
	"\\begin{tabular}{r rrrr}\n"
	"\\toprule\n"
	" & \\multicolumn{4}{c}{unit=model} \\\\\n"
	"\\cmidrule(lr){2-5}\n"
	"$N$ & DP & ZeRO-1 & ZeRO-2 & ZeRO-3 \\\\\n"
	"\\midrule\n"
	"1 & 0.00 & 0.00 & 0.00 & 0.00 \\\\\n"
	/* DP 2·(1/2)·14·2 = 28 B (2.15), ZeRO-1/2 (1/2)·14·4 = 28, ZeRO-3 (1/2)·14·6 = 42 (3.23). */
	"2 & 2.15\\textsuperscript{p} & 2.15\\textsuperscript{p} & 2.15\\textsuperscript{p} & 3.23\\textsuperscript{p} \\\\\n"
	"\\bottomrule\n"
	"\\end{tabular}\n"
	"\n"
	"\\smallskip\n"
	"\\footnotesize Marked cells depart from the paper floor; the marks give the cause: \\textsuperscript{p}~padding of the shards.\n"
	"\\end{table}\n";

START_TEST(test_latex_table_of_a_small_sweep_reads_exactly)
{
	static const unsigned w[] = {1, 2};
	struct fixture fx;
	struct report_data d;
	struct report_point *pts;
	struct zs_buf b = {0};
	size_t npts;

	build(&fx, tiny, 3, w, 2, 1);
	load(&fx, &d);
	pts = report_classify(&d, &npts);
	report_table_tex(&d, pts, npts, &b);
	ck_assert_str_eq(zs_buf_str(&b), table_expected);
	zs_buf_free(&b);
	free(pts);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_latex_table_marks_an_unexplained_cell)
{
	static const unsigned w[] = {1};
	struct fixture fx;
	struct report_data d;
	struct report_point *pts;
	struct zs_buf b = {0};
	size_t npts;
	cJSON *r;

	build(&fx, tiny, 3, w, 1, 1);
	r = mrun(&fx, ZS_ZERO3, 1, ZS_UNIT_MODEL);
	set(r, "peak_bytes", num(r, "peak_bytes") + 13);
	set(cJSON_GetObjectItem(r, "peak_breakdown"), "scratch", 24 + 13);
	load(&fx, &d);
	pts = report_classify(&d, &npts);
	report_table_tex(&d, pts, npts, &b);
	ck_assert_ptr_nonnull(strstr(zs_buf_str(&b), "& 21.00\\textsuperscript{a,u} \\\\"));
	ck_assert_ptr_nonnull(strstr(zs_buf_str(&b), "\\textsuperscript{u}~UNEXPLAINED"));
	zs_buf_free(&b);
	free(pts);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Findings: each holds on the consistent sweep, each turns false on a
 * dataset that contradicts it. */

static const unsigned sweep[] = {1, 2, 3, 4, 8, 16, 32};

static enum report_verdict verdict_of(struct fixture *fx, enum report_finding_id id)
{
	struct report_data d;
	struct report_finding f[REPORT_NFINDINGS];
	enum report_verdict v;

	load(fx, &d);
	report_findings(&d, f);
	v = f[id].verdict;
	ck_assert_ptr_nonnull(f[id].evidence);
	report_findings_free(f);
	report_data_free(&d);
	return v;
}

START_TEST(test_every_finding_holds_on_the_consistent_sweep)
{
	struct fixture fx;
	struct report_data d;
	struct report_finding f[REPORT_NFINDINGS];
	int i;

	build(&fx, dflt, 3, sweep, 7, 3);
	load(&fx, &d);
	report_findings(&d, f);
	for (i = 0; i < REPORT_NFINDINGS; i++) /* a framework's claims are not the paper's */
		ck_assert_msg(!f[i].shown || f[i].verdict == REPORT_HOLDS, "%s: %s (%s)", f[i].key,
		              report_verdict_name(f[i].verdict), f[i].evidence);
	/* The numbers are stated: with batch 1, ZeRO-3's peak at N = 32 is
	 * (1034·16 + 4·448 + 2·4·256 + 33088·4) / 33088 = 4.62, ZeRO-2's resident
	 * (33088·2 + 1034·14) / 33088 = 2.44. */
	ck_assert_str_eq(f[REPORT_F_ZERO3_PEAK_WORSE].evidence,
	                 "unit=model, N = 32: ZeRO-3 peak 4.62 B/param, ZeRO-2 resident 2.44 B/param");
	report_findings_free(f);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

/* Each finding against a dataset that contradicts it: one value of one
 * (scheme, N, unit) changed in both files, so the point stays explained
 * and only the finding sees the difference. The value is `add`, plus `mul`
 * times metric `rkey` of run (rs, rn, ru) when rkey is set. */
static const struct contradiction {
	const char *name;
	enum report_finding_id id;
	int units;                     /* build()'s units: 1 model, 3 both */
	enum zs_scheme s;
	unsigned n;
	enum zs_unit u;
	const char *key;               /* the metric set */
	int category;                  /* key is a peak_breakdown category */
	enum zs_scheme rs;
	unsigned rn;
	enum zs_unit ru;
	const char *rkey;
	double mul, add;
} contradictions[] = {
	{"DP's resident moves with N", REPORT_F_DP_FLAT, 3,
	 ZS_DP, 4, ZS_UNIT_MODEL, "resident_bytes", 0, 0, 0, 0, NULL, 0, 33088 * 15.0},
	{"ZeRO-1 goes below p + g", REPORT_F_ZERO12_FLATTEN, 3,
	 ZS_ZERO1, 32, ZS_UNIT_LAYER, "resident_bytes", 0, 0, 0, 0, NULL, 0, 33088 * 3.9},
	/* ZeRO-2 stuck at its N = 2 value: never below 2, but not flattening
	 * toward it either. */
	{"ZeRO-2 stops falling", REPORT_F_ZERO12_FLATTEN, 1,
	 ZS_ZERO2, 32, ZS_UNIT_MODEL, "resident_bytes", 0, 0, 0, 0, NULL, 0, 33088 * 9.0},
	{"ZeRO-3 does not halve", REPORT_F_ZERO3_HALVES, 3,
	 ZS_ZERO3, 16, ZS_UNIT_MODEL, "resident_bytes", 0, 0, 0, 0, NULL, 0, 33088 * 1.1},
	{"one scheme differs at N = 1", REPORT_F_N1_IDENTICAL, 3,
	 ZS_ZERO2, 1, ZS_UNIT_LAYER, "peak_bytes", 0, ZS_ZERO2, 1, ZS_UNIT_LAYER, "peak_bytes", 1, 8},
	/* A peak that falls 30x from N = 1 to 32, as fast as the resident 32x. */
	{"ZeRO-3's peak falls like its resident", REPORT_F_ZERO3_PEAK_SLOW, 1,
	 ZS_ZERO3, 32, ZS_UNIT_MODEL, "peak_bytes", 0, ZS_ZERO3, 1, ZS_UNIT_MODEL, "peak_bytes", 1 / 30.0, 0},
	{"ZeRO-3's peak is below ZeRO-2's resident", REPORT_F_ZERO3_PEAK_WORSE, 3,
	 ZS_ZERO3, 32, ZS_UNIT_MODEL, "peak_bytes", 0, ZS_ZERO2, 32, ZS_UNIT_MODEL, "resident_bytes", 1, -1},
	{"unit=layer gathers the whole model", REPORT_F_LAYER_GATHER, 3,
	 ZS_ZERO3, 8, ZS_UNIT_LAYER, "gathered_params", 1, 0, 0, 0, NULL, 0, 33088 * P},
	{"ZeRO-3 sends as much as DP", REPORT_F_COMM_RATIO, 3,
	 ZS_ZERO3, 4, ZS_UNIT_MODEL, "comm_bytes_per_rank_per_step", 0,
	 ZS_DP, 4, ZS_UNIT_MODEL, "comm_bytes_per_rank_per_step", 1, 0},
};
#define NCONTRADICTIONS (sizeof contradictions / sizeof contradictions[0])

START_TEST(test_each_finding_fails_on_a_sweep_that_contradicts_it)
{
	const struct contradiction *k = &contradictions[_i];
	struct fixture fx;
	double v = k->add;

	build(&fx, dflt, 3, sweep, 7, k->units);
	if (k->rkey != NULL)
		v += k->mul * num(mrun(&fx, k->rs, k->rn, k->ru), k->rkey);
	if (k->category)
		set_peak_category_both(&fx, k->s, k->n, k->u, k->key, v);
	else
		set_both(&fx, k->s, k->n, k->u, k->key, v);
	ck_assert_msg(verdict_of(&fx, k->id) == REPORT_FAILS, "%s: the finding does not fail", k->name);
	fixture_free(&fx);
}
END_TEST

START_TEST(test_findings_without_their_runs_are_not_tested)
{
	static const unsigned one[] = {1};
	struct fixture fx;
	struct report_data d;
	struct report_finding f[REPORT_NFINDINGS];
	int i;

	build(&fx, dflt, 3, one, 1, 1);
	load(&fx, &d);
	report_findings(&d, f);
	/* N = 1 alone tests only the N = 1 claim. */
	for (i = 0; i < REPORT_NFINDINGS; i++)
		ck_assert_int_eq(f[i].verdict, i == REPORT_F_N1_IDENTICAL ? REPORT_HOLDS : REPORT_UNTESTED);
	ck_assert_str_eq(report_verdict_name(f[REPORT_F_LAYER_GATHER].verdict),
	                 "not tested by this sweep");
	report_findings_free(f);
	report_data_free(&d);
	fixture_free(&fx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* End to end, without rendering */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static char *slurp(const char *dir, const char *name)
{
	char *path = zs_asprintf("%s/%s", dir, name), *text = NULL, *cause = NULL;
	size_t len;

	ck_assert_msg(zs_read_file(path, &text, &len, &cause) == 0, "%s", cause ? cause : "");
	free(path);
	return text;
}

/* ------------------------------------------------------------------------ */
/* The transformer section: a toy theory row and its measurement, by hand.
 * Model states 8000 B; the theory's peak adds 1200 + 1200 B of ZeRO-3's
 * transients and 300 B of Korthikanti's activations = 10700 B; the
 * measurement holds 60 B of activations and 40 B of scratch instead:
 * 10500 B. */

static const char tfm_theory[] =
	"{\"format\": \"zerosim-theory/1\", \"params\": 1000, \"config\": {\"layers\": null, \"batch\": 2,"
	" \"precision\": \"mixed\", \"optimizer\": \"adam\", \"bytes_per_param\": {\"param\": 2, \"grad\": 2,"
	" \"optimizer\": 12}, \"seq\": 32, \"recompute\": \"none\", \"flash_attn\": false, \"model\": {"
	"\"name\": \"toy\", \"family\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16, \"layers\": 1,"
	" \"attention_heads\": 2, \"key_value_heads\": 1, \"vocab_size\": 10, \"tie_word_embeddings\": false,"
	" \"units\": {\"embeddings\": 80, \"block\": 600, \"blocks\": 1, \"head\": 320}}},"
	" \"rows\": [{\"scheme\": \"zero3\", \"world\": 2, \"unit\": \"layer\", \"floor\": {\"resident_bytes\": 8000},"
	" \"schedule\": {\"resident_bytes\": 8000, \"peak_bytes\": 10500, \"resident_breakdown\": {\"param16\": 1000,"
	" \"grad16\": 1000, \"master32\": 2000, \"adam_m\": 2000, \"adam_v\": 2000}, \"peak_breakdown\": {\"param16\": 1000,"
	" \"grad16\": 1000, \"master32\": 2000, \"adam_m\": 2000, \"adam_v\": 2000, \"gathered_params\": 1200,"
	" \"full_grads\": 1200, \"activations\": 60, \"scratch\": 40}},"
	" \"peak\": {\"largest_unit\": 600, \"resident_bytes\": 8000, \"padding_bytes\": 0,"
	" \"gathered_params_bytes\": 1200, \"full_grads_bytes\": 1200, \"activations_bytes\": 300, \"peak_bytes\": 10700,"
	" \"resident_breakdown\": {\"param16\": 1000, \"grad16\": 1000, \"master32\": 2000, \"adam_m\": 2000, \"adam_v\": 2000},"
	" \"peak_breakdown\": {\"param16\": 1000, \"grad16\": 1000, \"master32\": 2000, \"adam_m\": 2000, \"adam_v\": 2000,"
	" \"gathered_params\": 1200, \"full_grads\": 1200, \"activations\": 300},"
	" \"activations_breakdown\": {\"layers\": 100, \"logits\": 100, \"logits_grad\": 100}}}]}";

static const char tfm_measured[] =
	"{\"format\": \"zerosim-measured/1\", \"config\": {\"layers\": null, \"model\": {\"name\": \"toy\"},"
	" \"params\": 1000, \"batch\": 2, \"seq\": 32, \"recompute\": \"none\", \"precision\": \"mixed\"},"
	" \"runs\": [{\"scheme\": \"zero3\", \"world\": 2, \"unit\": \"layer\", \"resident_bytes\": 8000,"
	" \"resident_breakdown\": {\"param16\": 1000, \"grad16\": 1000, \"master32\": 2000, \"adam_m\": 2000, \"adam_v\": 2000},"
	" \"peak_bytes\": 10500, \"peak_breakdown\": {\"param16\": 1000, \"grad16\": 1000, \"master32\": 2000,"
	" \"adam_m\": 2000, \"adam_v\": 2000, \"gathered_params\": 1200, \"full_grads\": 1200, \"activations\": 60,"
	" \"scratch\": 40}}]}";

/* The toy theory added to t, then the measurement `mtext`; returns
 * add_measured's result, with *cause set on -1. */
static int tfm_try(struct report_tfm *t, const char *mtext, char **cause)
{
	cJSON *th = cJSON_Parse(tfm_theory), *me = cJSON_Parse(mtext);

	ck_assert_ptr_nonnull(th);
	ck_assert_ptr_nonnull(me);
	memset(t, 0, sizeof *t);
	ck_assert_int_eq(report_tfm_add(th, "t.json", t, cause), 0);
	int rc = report_tfm_add_measured(me, "m.json", t, cause);
	cJSON_Delete(th);
	cJSON_Delete(me);
	return rc;
}

/* The toy measurement with `from` replaced by `to` (once). */
static char *tfm_edit(const char *from, const char *to)
{
	const char *at = strstr(tfm_measured, from);
	ck_assert_ptr_nonnull(at);
	return zs_asprintf("%.*s%s%s", (int)(at - tfm_measured), tfm_measured, to, at + strlen(from));
}

START_TEST(test_transformer_theory_and_measurement_join_and_bad_ones_are_refused)
{
	struct report_tfm t;
	char *cause = NULL, *text;
	const struct report_tfm_row *r;

	ck_assert_int_eq(tfm_try(&t, tfm_measured, &cause), 0);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_uint_eq(t.models[0].nterms, 3);
	ck_assert_str_eq(t.models[0].term[2], "logits_grad");
	r = report_tfm_find(&t.models[0], ZS_ZERO3, 2, ZS_UNIT_LAYER);
	ck_assert_ptr_nonnull(r);
	ck_assert(r->peak == 10700 && r->gathered == 1200 && r->act[0] == 100 && r->run.largest_unit == 600);
	ck_assert(r->run.has_measured && r->run.measured[REPORT_PEAK] == 10500 &&
	          r->run.peak_bd[REPORT_CAT_ACTIVATIONS] == 60 && r->run.peak_bd[REPORT_CAT_SCRATCH] == 40);
	/* The schedule (10500 B, the same categories) explains it. */
	ck_assert(r->run.has_schedule && r->run.schedule[REPORT_PEAK] == 10500 && !r->unexplained);
	ck_assert_uint_eq(report_tfm_unexplained(&t), 0);
	/* The same model's measurement again. */
	cJSON *again = cJSON_Parse(tfm_measured);
	ck_assert_int_eq(report_tfm_add_measured(again, "m2.json", &t, &cause), -1);
	ck_assert_str_eq(cause, "m.json and m2.json both measure toy in mixed precision; give each model once");
	free(cause);
	cause = NULL;
	cJSON_Delete(again);
	report_tfm_free(&t);

	static const struct { const char *from, *to, *want; } bad[] = {
		{"\"name\": \"toy\"", "\"name\": \"other\"",
		 "m.json measures other in mixed precision, but no --transformer theory.json is of that model"},
		{"\"seq\": 32", "\"seq\": 64", "t.json and m.json describe different runs of toy: params, batch, seq or recompute differ"},
		{"\"world\": 2", "\"world\": 4", "t.json has no row for the measured run zero3 N=4 unit=layer of toy"},
		{"\"peak_bytes\": 10500", "\"peak_bytes\": 10501",
		 "m.json: runs[0] (zero3 N=2 unit=layer): peak_breakdown sums to 10500 B, but peak_bytes is 10501 B; "
		 "a breakdown must sum to its total"},
		{"\"scratch\": 40}", "\"scratch\": 40, \"scratch\": 40}",
		 "m.json: the key \"scratch\" appears twice in one object; each key must be given once"},
		{"\"model\": {\"name\": \"toy\"}", "\"model\": null",
		 "m.json is not a transformer's measurement (config.model is not an object): --transformer takes the "
		 "output of zerosim measure --model"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		text = tfm_edit(bad[i].from, bad[i].to);
		ck_assert_int_eq(tfm_try(&t, text, &cause), -1);
		ck_assert_str_eq(cause, bad[i].want);
		free(cause);
		cause = NULL;
		free(text);
		report_tfm_free(&t);
	}

	/* One byte moved from scratch to activations: the totals agree with
	 * the schedule, a category does not. */
	text = tfm_edit("\"activations\": 60, \"scratch\": 40", "\"activations\": 61, \"scratch\": 39");
	ck_assert_int_eq(tfm_try(&t, text, &cause), 0);
	ck_assert_uint_eq(report_tfm_unexplained(&t), 1);
	free(text);
	report_tfm_free(&t);

	/* A run given twice. */
	const char *run = strstr(tfm_measured, "{\"scheme\"");
	text = zs_asprintf("%.*s%.*s, %s", (int)(run - tfm_measured), tfm_measured,
	                   (int)(strlen(run) - 2), run, run);
	ck_assert_int_eq(tfm_try(&t, text, &cause), -1);
	ck_assert_str_eq(cause, "m.json: runs[0] and runs[1] are both zero3 N=2 unit=layer; each must be given once");
	free(cause);
	cause = NULL;
	free(text);
	report_tfm_free(&t);
}
END_TEST

/* No fixed count of models or activation terms (REPORT_TFM_MAX was 4,
 * REPORT_TFM_TERMS 16 of up to 39 characters): six toys, each with its
 * measurement joined, and 20 terms, one with a 60-character name. */
START_TEST(test_transformers_and_terms_are_as_many_as_given)
{
	struct report_tfm t;
	struct zs_buf terms = {0};
	char *cause = NULL;
	const char *from = "\"activations_breakdown\": {\"layers\": 100, \"logits\": 100, \"logits_grad\": 100}";
	const char *at = strstr(tfm_theory, from);

	ck_assert_ptr_nonnull(at);
	zs_buf_printf(&terms, "\"activations_breakdown\": {");
	for (int i = 0; i < 20; i++) /* 20 terms of 15 B: the row's 300 B */
		zs_buf_printf(&terms, "%s\"%s%d\": 15", i ? ", " : "",
		              i == 19 ? "a_term_whose_name_is_longer_than_the_forty_characters_of_old" : "term", i);
	zs_buf_printf(&terms, "}");
	memset(&t, 0, sizeof t);
	for (int k = 0; k < 6; k++) {
		char name[16];
		snprintf(name, sizeof name, "\"toy%d\"", k);
		char *th_text = zs_asprintf("%.*s%s%s", (int)(at - tfm_theory), tfm_theory, zs_buf_str(&terms),
		                            at + strlen(from));
		char *a = strstr(th_text, "\"toy\""), *b = strstr(tfm_measured, "\"toy\"");
		char *th2 = zs_asprintf("%.*s%s%s", (int)(a - th_text), th_text, name, a + 5);
		char *me2 = zs_asprintf("%.*s%s%s", (int)(b - tfm_measured), tfm_measured, name, b + 5);
		cJSON *th = cJSON_Parse(th2), *me = cJSON_Parse(me2);
		ck_assert_ptr_nonnull(th);
		ck_assert_ptr_nonnull(me);
		ck_assert_msg(report_tfm_add(th, "t.json", &t, &cause) == 0, "%s", cause);
		ck_assert_msg(report_tfm_add_measured(me, "m.json", &t, &cause) == 0, "%s", cause);
		cJSON_Delete(th);
		cJSON_Delete(me);
		free(th_text);
		free(th2);
		free(me2);
	}
	ck_assert_uint_eq(t.n, 6);
	ck_assert_str_eq(t.models[5].name, "toy5");
	ck_assert_uint_eq(t.models[5].nterms, 20);
	ck_assert_str_eq(t.models[5].term[19], "a_term_whose_name_is_longer_than_the_forty_characters_of_old19");
	ck_assert(t.models[5].rows[0].run.has_measured);
	ck_assert(t.models[5].rows[0].act[19] == 15);
	report_tfm_free(&t);
	zs_buf_free(&terms);
}
END_TEST

START_TEST(test_transformer_section_names_the_largest_unit_and_the_measured_departure)
{
	char dir[] = "/tmp/test_report.XXXXXX", *fig, *text, *cause = NULL;
	struct report_tfm t;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	fig = zs_asprintf("%s/figures", dir);
	ck_assert_int_eq(mkdir(fig, 0777), 0);
	ck_assert_int_eq(tfm_try(&t, tfm_measured, &cause), 0);
	ck_assert_int_eq(report_tfm_write(&t, dir, fig, &cause), 0);
	text = slurp(dir, REPORT_TFM_TEX);
	/* The block (600 elements) is larger than the head (88): 600 / 600. */
	ck_assert_ptr_nonnull(strstr(text, "ZeRO-3's largest unit is a block: 600 elements, 1.00 times a block."));
	/* kB per rank: floor 8.0, gathered 1.2, activations 0.3, peak 10.7, measured 10.5. */
	ck_assert_ptr_nonnull(strstr(text, "ZeRO-3 & 8.0 & 0.0 & 1.2 & 1.2 & 0.3 & 10.7 & 1.34 & 10.5 & 10.5\\\\"));
	ck_assert_ptr_nonnull(strstr(text, "Every measured run of the model equals the schedule to the byte"));
	/* Activations: 300 B by the formula, 60 measured: 240 B (80 %) fewer. */
	ck_assert_ptr_nonnull(strstr(text, "all activations & 300 & 60 & $-$ 240 B (-80.0\\,\\%)"));
	ck_assert_ptr_nonnull(strstr(text, "scratch (not in the formula) & --- & 40"));
	ck_assert_ptr_nonnull(strstr(text, "SwiGLU"));
	ck_assert_ptr_nonnull(strstr(text, "Grouped-query attention: K and V for 1 of the 2 heads"));
	free(text);
	text = slurp(fig, REPORT_FIGURE_TFM ".dat");
	/* The measured stack (params 1.0 ... activations 0.06, scratch 0.04 kB), then the theory's peak. */
	ck_assert_ptr_nonnull(strstr(text, "\"ZeRO-3\" 1 1 6 1.2 1.2 0.06 0.04 0 10.7\n"));
	free(text);
	/* With no model, the section's files go. */
	report_tfm_free(&t);
	ck_assert_int_eq(report_tfm_write(&t, dir, fig, &cause), 0);
	text = zs_asprintf("%s/%s", dir, REPORT_TFM_TEX);
	ck_assert_int_ne(access(text, F_OK), 0);
	free(text);
	text = zs_asprintf("%s/" REPORT_FIGURE_TFM ".gp", fig);
	ck_assert_int_ne(access(text, F_OK), 0);
	free(text);
	ck_assert_int_eq(nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS), 0);
	free(fig);
}
END_TEST

START_TEST(test_report_writes_every_output_and_strict_fails_on_unexplained)
{
	static const char *const files[] = {
		"diff.json", "flags.txt", "table.tex", "findings.tex", "flags.tex", "zerosim-report.tex",
		"figures/fig1-resident.gp", "figures/fig1-resident.dat", "figures/fig2-peak.gp",
		"figures/fig3-comm.gp", "figures/fig4-breakdown.gp", "figures/fig5-timeline.dat",
	};
	static const char tex[] = "\\documentclass{article}\\begin{document}x\\end{document}\n";
	char dir[] = "/tmp/test_report.XXXXXX", *mp, *tp, *texp, *out, *text, *cause = NULL;
	struct fixture fx;
	struct report_options o;
	size_t i;
	cJSON *r;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	build(&fx, tiny, 3, sweep, 3, 3);
	mp = zs_asprintf("%s/m.json", dir);
	tp = zs_asprintf("%s/t.json", dir);
	texp = zs_asprintf("%s/report.tex", dir);
	out = zs_asprintf("%s/out/deeper", dir);
	ck_assert_int_eq(zs_json_write(mp, fx.m, NULL), 0);
	ck_assert_int_eq(zs_json_write(tp, fx.t, NULL), 0);
	ck_assert_int_eq(zs_write_atomic(texp, tex, strlen(tex), NULL), 0);
	o = (struct report_options){mp, tp, out, texp, 1, 0, NULL, 0};
	ck_assert_int_eq(report_main(&o, &cause), 0);
	for (i = 0; i < sizeof files / sizeof files[0]; i++)
		free(slurp(out, files[i]));
	/* Figure 5 marks where each phase begins and names it; event 0 (the
	 * start) gets no mark. */
	text = slurp(out, "figures/fig5-timeline.gp");
	ck_assert_ptr_nonnull(strstr(text, "set arrow from 1, graph 0 to 1, graph 1 nohead ls 7\n"));
	ck_assert_ptr_nonnull(strstr(text, "set label '{/*0.85 backward}' at 1.5, graph 1"));
	ck_assert_ptr_null(strstr(text, "{/*0.85 optimizer}"));
	ck_assert_ptr_nonnull(strstr(text, "no events in\\nforward, reduce,\\noptimizer, gather"));
	free(text);
	text = slurp(out, "figures/fig5-timeline.dat");
	ck_assert_ptr_nonnull(strstr(text, "\n0 "));
	ck_assert_ptr_nonnull(strstr(text, " start\n1 "));
	ck_assert_ptr_nonnull(strstr(text, " backward\n2 "));
	ck_assert_ptr_nonnull(strstr(text, " end\n"));
	free(text);
	text = slurp(out, "flags.txt");
	ck_assert_ptr_nonnull(strstr(text, "FLAG zero3 N=2 unit=model peak"));
	ck_assert_ptr_null(strstr(text, "N=1 "));
	ck_assert_ptr_null(strstr(text, "UNEXPLAINED"));
	free(text);

	/* One unexplained byte: reported, and --strict turns it into exit 1. */
	r = mrun(&fx, ZS_ZERO1, 2, ZS_UNIT_LAYER);
	set(r, "comm_bytes_per_rank_per_step", num(r, "comm_bytes_per_rank_per_step") + 1);
	ck_assert_int_eq(zs_json_write(mp, fx.m, NULL), 0);
	ck_assert_int_eq(report_main(&o, &cause), ZS_EXIT_RUNTIME);
	ck_assert_ptr_nonnull(strstr(cause, "1 points unexplained"));
	free(cause);
	cause = NULL;
	text = slurp(out, "flags.txt");
	ck_assert_ptr_nonnull(strstr(text, "UNEXPLAINED zero1 N=2 unit=layer comm"));
	free(text);
	o.strict = 0;
	ck_assert_int_eq(report_main(&o, &cause), 0);

	/* A bad input is exit 2. */
	o.theory = mp;
	ck_assert_int_eq(report_main(&o, &cause), ZS_EXIT_USAGE);
	free(cause);

	fixture_free(&fx);
	free(mp);
	free(tp);
	free(texp);
	free(out);
	/* Left for inspection under /tmp only when a check above failed. */
	ck_assert_int_eq(nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */

/* The one rule for "unexplained" that the MLP's points and a transformer's
 * rows share (report_run_departs): hand-made runs, each departing in one
 * way, or not at all. */
START_TEST(test_one_rule_judges_every_run)
{
	struct report_run r;
	int cat;

	memset(&r, 0, sizeof r);
	r.has_measured = r.has_schedule = r.has_sched_resident_bd = r.has_sched_peak_bd = 1;
	r.measured[REPORT_RESIDENT] = r.schedule[REPORT_RESIDENT] = 100;
	r.measured[REPORT_PEAK] = r.schedule[REPORT_PEAK] = 150;
	r.measured[REPORT_COMM] = r.schedule[REPORT_COMM] = 64;
	r.resident_bd[REPORT_CAT_PARAM16] = r.sched_resident_bd[REPORT_CAT_PARAM16] = 100;
	r.peak_bd[REPORT_CAT_PARAM16] = r.sched_peak_bd[REPORT_CAT_PARAM16] = 100;
	r.peak_bd[REPORT_CAT_ACTIVATIONS] = r.sched_peak_bd[REPORT_CAT_ACTIVATIONS] = 50;
	ck_assert(!report_run_unexplained(&r));
	/* One byte of comm. */
	r.measured[REPORT_COMM] = 65;
	ck_assert(report_run_departs(&r, REPORT_COMM, &cat) && cat == -1 && report_run_unexplained(&r));
	/* A file without the comm (a transformer's): not compared. */
	r.schedule[REPORT_COMM] = -1;
	ck_assert(!report_run_departs(&r, REPORT_COMM, &cat) && !report_run_unexplained(&r));
	/* Ten bytes moved from activations to scratch at the peak: the totals
	 * agree, the first category that differs is named. */
	r.peak_bd[REPORT_CAT_ACTIVATIONS] = 40;
	r.peak_bd[REPORT_CAT_SCRATCH] = 10;
	ck_assert(report_run_departs(&r, REPORT_PEAK, &cat) && cat == REPORT_CAT_ACTIVATIONS);
	ck_assert(!report_run_departs(&r, REPORT_RESIDENT, &cat) && cat == -1);
	/* Without the schedule's breakdown (an older theory.json) only the
	 * totals are compared. */
	r.has_sched_peak_bd = 0;
	ck_assert(!report_run_departs(&r, REPORT_PEAK, &cat) && cat == -1);
	/* A resident byte off. */
	r.measured[REPORT_RESIDENT] = 101;
	ck_assert(report_run_departs(&r, REPORT_RESIDENT, &cat) && report_run_unexplained(&r));
	/* Nothing to judge: a transformer's row not measured, or measured
	 * without a schedule (counted as not checked, not unexplained). */
	r.has_measured = 0;
	ck_assert(!report_run_unexplained(&r));
	r.has_measured = 1;
	r.has_schedule = 0;
	ck_assert(!report_run_unexplained(&r));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* "zerosim against PyTorch" (report_torch.h) */

/* Each class from the names util/autograd.c gives what it makes: the
 * states by role, the loss's ops, the tied head's weight gradient (only
 * when tied), gelu_new's and RMSNorm's intermediates but not their outputs
 * or the linear's own tensors, the optimizer's scratch, and the rest by
 * the phase that made it. */
START_TEST(test_torch_classes_follow_the_ops_names)
{
	ck_assert_int_eq(report_torch_class("param", "param", NULL, "setup", 1), RT_PARAM);
	ck_assert_int_eq(report_torch_class("grad", "grad", NULL, "backward", 1), RT_GRAD);
	ck_assert_int_eq(report_torch_class("adam_v", "adam_v", NULL, "setup", 1), RT_ADAM);
	ck_assert_int_eq(report_torch_class("adam_step", "adam_step", NULL, "setup", 1), RT_STEP);
	ck_assert_int_eq(report_torch_class("buffer", "buffer", NULL, "setup", 1), RT_BUFFER);
	ck_assert_int_eq(report_torch_class("input", "input", NULL, "setup", 1), RT_INPUT);
	ck_assert_int_eq(report_torch_class("temp", "_log_softmax", NULL, "forward", 1), RT_LOSS);
	ck_assert_int_eq(report_torch_class("temp", "nll_loss_backward", NULL, "backward", 0), RT_LOSS);
	ck_assert_int_eq(report_torch_class("temp", "mm (lm_head weight grad)", "lm_head", "backward", 1), RT_TIED);
	ck_assert_int_eq(report_torch_class("temp", "mm (lm_head weight grad)", "lm_head", "backward", 0), RT_BWD);
	ck_assert_int_eq(report_torch_class("temp", "tanh", "mlp.c_fc", "forward", 1), RT_OPBYOP);
	ck_assert_int_eq(report_torch_class("temp", "mul (gelu_new)", "mlp.c_fc", "forward", 1), RT_ACT);
	ck_assert_int_eq(report_torch_class("temp", "addmm", "mlp.c_fc", "forward", 1), RT_ACT);
	ck_assert_int_eq(report_torch_class("temp", "mm (addmm backward, mat1)", "mlp.c_fc", "backward", 1), RT_BWD);
	ck_assert_int_eq(report_torch_class("temp", "pow (x^2, RMSNorm)", "input_layernorm", "forward", 0), RT_OPBYOP);
	ck_assert_int_eq(report_torch_class("temp", "mul (weight x)", "model.norm", "forward", 0), RT_ACT);
	ck_assert_int_eq(report_torch_class("temp", "native_layer_norm", "ln_1", "forward", 1), RT_ACT);
	ck_assert_int_eq(report_torch_class("temp", "sqrt (Adam)", "transformer.wte", "optimizer", 1), RT_OPTIM);
	ck_assert_int_eq(report_torch_class("temp", "empty_like (dropout noise)", "attn.c_attn", "forward", 1), RT_DROPOUT);
	ck_assert_int_eq(report_torch_class("temp", "empty_like (dropout noise)", NULL, "forward", 1), RT_DROPOUT);
	ck_assert_int_eq(report_torch_class("temp", "mul (dropout)", "attn.c_proj", "forward", 1), RT_ACT);
	ck_assert_int_eq(report_torch_class("temp", "mul (dropout backward)", "mlp.c_proj", "backward", 1), RT_BWD);
}
END_TEST

/* A plain loop's file as the theory writes it, cut to what the section
 * reads: the peak's groups sum to it, by class; a group off by a byte,
 * or a file without peak_live, is refused. */
static const char plain_json[] =
	"{\"format\":\"zerosim-theory/1\",\"config\":{\"seq\":4,\"batch\":1,\"torch_version\":\"1.13\","
	"\"torch_device\":\"cpu\",\"optimizer_impl\":\"single\",\"zero_grad\":\"zeros\",\"attn\":\"eager\","
	"\"wrapper\":\"none\",\"precision\":\"fp32\",\"model\":{\"name\":\"m\",\"model_type\":\"gpt2\","
	"\"tie_word_embeddings\":true}},"
	"\"rows\":[{\"schedule\":{\"resident_bytes\":100,\"resident_breakdown\":{\"param32\":40,\"grad32\":20,"
	"\"adam_m\":20,\"adam_v\":20},\"peak_bytes\":%d,\"phase_peak_bytes\":{\"setup\":100,\"forward\":150,"
	"\"backward\":170,\"optimizer\":130},\"binding_phase\":\"backward\",\"peak_live\":{"
	"\"backward\":[{\"what\":\"param\",\"module\":null,\"role\":\"param\",\"made\":\"setup\",\"bytes\":40},"
	"{\"what\":\"grad\",\"module\":null,\"role\":\"grad\",\"made\":\"setup\",\"bytes\":20},"
	"{\"what\":\"adam_m\",\"module\":null,\"role\":\"adam_m\",\"made\":\"setup\",\"bytes\":20},"
	"{\"what\":\"adam_v\",\"module\":null,\"role\":\"adam_v\",\"made\":\"setup\",\"bytes\":20},"
	"{\"what\":\"_log_softmax\",\"module\":null,\"role\":\"temp\",\"made\":\"forward\",\"bytes\":32},"
	"{\"what\":\"tanh\",\"module\":\"mlp.c_fc\",\"role\":\"temp\",\"made\":\"forward\",\"bytes\":16},"
	"{\"what\":\"addmm\",\"module\":\"mlp.c_fc\",\"role\":\"temp\",\"made\":\"forward\",\"bytes\":22}],"
	"\"optimizer\":[{\"what\":\"param\",\"module\":null,\"role\":\"param\",\"made\":\"setup\",\"bytes\":100},"
	"{\"what\":\"sqrt (Adam)\",\"module\":\"transformer.wte\",\"role\":\"temp\",\"made\":\"optimizer\",\"bytes\":30}]},"
	"\"mark_live\":{\"bwd:ln_f:start\":[{\"what\":\"mm (lm_head weight grad)\",\"module\":\"lm_head\","
	"\"role\":\"temp\",\"made\":\"backward\",\"bytes\":8}],\"bwd:wte:start\":[{\"what\":\"mm (lm_head weight grad)\","
	"\"module\":\"lm_head\",\"role\":\"temp\",\"made\":\"backward\",\"bytes\":8}]}}}]}";

START_TEST(test_torch_plain_loop_is_read_by_class_and_checked)
{
	char buf[sizeof plain_json + 16], *cause = NULL;
	struct report_torch t = {0};
	snprintf(buf, sizeof buf, plain_json, 170);
	cJSON *j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(report_torch_is_plain(j), 1);
	ck_assert_int_eq(report_torch_add(&t, j, "p.json", &cause), 0);
	ck_assert_uint_eq(t.n, 1);
	const struct report_torch_run *r = &t.models[0].runs[0];
	ck_assert_double_eq(r->peak, 170);
	ck_assert_int_eq(r->binding, RT_BACKWARD);
	ck_assert_double_eq(r->cls[RT_PARAM], 40);
	ck_assert_double_eq(r->cls[RT_LOSS], 32);
	ck_assert_double_eq(r->cls[RT_OPBYOP], 16);
	ck_assert_double_eq(r->cls[RT_ACT], 22);
	ck_assert_double_eq(r->opt_cls[RT_OPTIM], 30);
	ck_assert_double_eq(r->resident_grads, 20);
	ck_assert_double_eq(r->held, 8);
	ck_assert_str_eq(r->held_from, "bwd:ln_f:start");
	ck_assert_str_eq(r->held_to, "bwd:wte:start");
	/* the same run again */
	ck_assert_int_eq(report_torch_add(&t, j, "q.json", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "given twice"));
	free(cause);
	cause = NULL;
	cJSON_Delete(j);
	/* without the paper's theory of the model */
	struct report_tfm none = {0};
	ck_assert_int_eq(report_torch_join(&t, &none, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "needs the paper's schedule"));
	free(cause);
	cause = NULL;
	report_torch_free(&t);
	/* the groups a byte off the peak */
	snprintf(buf, sizeof buf, plain_json, 171);
	j = cJSON_Parse(buf);
	ck_assert_int_eq(report_torch_add(&t, j, "p.json", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "peak_live.backward sums to 170 bytes, not the peak's 171"));
	free(cause);
	cause = NULL;
	cJSON_Delete(j);
	report_torch_free(&t);
	/* a schedule without the optimizer step's peak (it printed -1 B) */
	snprintf(buf, sizeof buf, plain_json, 170);
	char *o = strstr(buf, ",\"optimizer\":130");
	ck_assert_ptr_nonnull(o);
	memmove(o, o + strlen(",\"optimizer\":130"), strlen(o + strlen(",\"optimizer\":130")) + 1);
	j = cJSON_Parse(buf);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(report_torch_add(&t, j, "p.json", &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "no phase_peak_bytes.optimizer"));
	free(cause);
	cJSON_Delete(j);
	report_torch_free(&t);
}
END_TEST

/* flags.txt's allocator line says what its "fragmentation" is: the free
 * space of the segments cudaMalloc reserved where the reserved peak is
 * first reached, and, where the blocks' peak is under one 20 MiB segment,
 * the segments' minimum size; a file without segments_peak and
 * reserved_at_allocated_peak_bytes gives the line without them. */
START_TEST(test_allocator_line_says_what_its_fragmentation_is)
{
	struct report_run run = {.scheme = ZS_DP, .world = 1, .unit = ZS_UNIT_MODEL, .has_alloc_summary = 1,
	                         .alloc_reserved_peak = 2097152, .alloc_at_reserved = 8704, .alloc_frag = 2088448,
	                         .alloc_frag_ratio = 2088448.0 / 2097152, .alloc_allocated_peak = 72704,
	                         .alloc_segments = 1, .alloc_reserved_at_allocated = 2097152};
	run.measured[REPORT_PEAK] = 71680;
	struct report_data d = {.runs = &run, .nruns = 1};
	struct zs_buf b = {0};
	report_allocator_text(&d, &b);
	const char *t = zs_buf_str(&b);
	ck_assert_ptr_nonnull(strstr(t, "allocator: dp N=1 unit=model rank 0: reserved peak 2097152 B (+2025472 B from "
	                                "the tracked peak) = allocated 8704 B + cached free 2088448 B (99.6% of "
	                                "reserved: free space cached in the 1 segment cudaMalloc reserved"));
	/* the fragmentation at the allocated peak, diff.json's: 2,097,152 -
	 * 72,704 = 2,024,448 B */
	ck_assert_ptr_nonnull(strstr(t, "allocated peak 72704 B (the tracked blocks as the allocator rounds them), "
	                                "with 2097152 B reserved then: fragmentation 2024448 B at the allocated peak "
	                                "(diff.json's fragmentation_bytes); the blocks' peak is under one 20 MiB segment"));
	zs_buf_free(&b);
	run.alloc_segments = run.alloc_reserved_at_allocated = -1;
	run.alloc_allocated_peak = run.alloc_reserved_peak = 21.0 * 1024 * 1024;
	report_allocator_text(&d, &b);
	t = zs_buf_str(&b);
	ck_assert_ptr_null(strstr(t, "segment cudaMalloc"));
	ck_assert_ptr_null(strstr(t, "reserved then"));
	ck_assert_ptr_null(strstr(t, "fragmentation"));
	ck_assert_ptr_null(strstr(t, "minimum size"));
	zs_buf_free(&b);
}
END_TEST

static Suite *report_suite(void)
{
	Suite *s = suite_create("report");
	TCase *c;

	c = tcase_create("classify");
	tcase_add_test(c, test_zero3_peak_departs_by_padding_gathered_params_full_grads_and_activations);
	tcase_add_test(c, test_zero2_peak_departs_by_full_grads_and_padding);
	tcase_add_test(c, test_activations_alone_are_the_baseline_and_not_a_flag);
	tcase_add_test(c, test_comm_departs_by_padding_of_the_sent_buffer);
	tcase_add_test(c, test_measurement_that_differs_from_the_schedule_is_unexplained);
	tcase_add_test(c, test_one_byte_off_the_schedule_is_unexplained_even_without_a_flag);
	tcase_add_test(c, test_bytes_moved_between_categories_are_unexplained_though_the_totals_agree);
	tcase_add_test(c, test_sweep_flags_zero2_zero3_peaks_and_padding_and_nothing_at_n1);
	suite_add_tcase(s, c);

	c = tcase_create("load");
	tcase_add_test(c, test_unknown_format_is_refused_naming_both_formats);
	tcase_add_test(c, test_a_step_setting_in_one_file_only_is_refused_naming_it);
	tcase_add_test(c, test_files_of_different_models_or_runs_are_refused);
	tcase_add_test(c, test_a_measured_run_without_a_theory_row_is_refused);
	tcase_add_test(c, test_a_row_run_or_key_given_twice_is_refused);
	tcase_add_test(c, test_a_theory_row_without_a_run_is_left_out_but_checked);
	tcase_add_test(c, test_more_world_sizes_than_world_takes_are_all_drawn);
	tcase_add_test(c, test_a_breakdown_that_does_not_sum_to_its_total_is_refused_naming_the_run_and_both_sums);
	tcase_add_test(c, test_a_negative_byte_count_is_refused);
	tcase_add_test(c, test_timeline_phases_are_loaded_and_an_unknown_one_is_refused);
	tcase_add_test(c, test_every_ranks_host_bytes_are_checked_against_the_schedule);
	suite_add_tcase(s, c);

	c = tcase_create("latex");
	tcase_add_test(c, test_latex_table_of_a_small_sweep_reads_exactly);
	tcase_add_test(c, test_latex_table_marks_an_unexplained_cell);
	suite_add_tcase(s, c);

	c = tcase_create("findings");
	tcase_add_test(c, test_every_finding_holds_on_the_consistent_sweep);
	tcase_add_loop_test(c, test_each_finding_fails_on_a_sweep_that_contradicts_it, 0,
	                    (int)NCONTRADICTIONS);
	tcase_add_test(c, test_findings_without_their_runs_are_not_tested);
	suite_add_tcase(s, c);

	c = tcase_create("end_to_end");
	tcase_add_test(c, test_report_writes_every_output_and_strict_fails_on_unexplained);
	tcase_add_test(c, test_one_rule_judges_every_run);
	tcase_add_test(c, test_transformer_theory_and_measurement_join_and_bad_ones_are_refused);
	tcase_add_test(c, test_transformers_and_terms_are_as_many_as_given);
	tcase_add_test(c, test_transformer_section_names_the_largest_unit_and_the_measured_departure);
	tcase_add_test(c, test_torch_classes_follow_the_ops_names);
	tcase_add_test(c, test_torch_plain_loop_is_read_by_class_and_checked);
	tcase_add_test(c, test_allocator_line_says_what_its_fragmentation_is);
	tcase_set_timeout(c, 30);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	return suite_run(report_suite());
}
