/*
 * report_findings — each claim of the ZeRO story checked on the data.
 * The claims come from the ZeRO paper (Rajbhandari et al., SC'20, Fig. 1 and
 * section 7: Ψ(2+2+K) per rank for DP, Ψ(4+K/N), Ψ(2+14/N), 16Ψ/N for the
 * three stages; 2Ψ vs 3Ψ elements of communication) and from docs/design.md.
 * Where a claim needs a threshold ("much more slowly") the threshold is
 * stated in the evidence, so the reader can judge it.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buf.h"
#include "report/report_classify.h"
#include "report/report_findings.h"
#include "util/util.h"

const char *report_verdict_name(enum report_verdict v)
{
	static const char *const names[] = {"not tested by this sweep", "holds", "does not hold"};
	return names[v];
}

/* Equal up to the rounding of doubles that hold integers or simple ratios. */
static int same(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* Bytes per parameter of a byte count. */
static double bpp(const struct report_data *d, double bytes)
{
	return bytes / d->params;
}

/* The runs of one (scheme, unit) in order of N: d->runs is sorted by unit,
 * scheme, world, so they are one slice of it, as long as the file gives;
 * points *out at its first and returns the count. */
static size_t column(const struct report_data *d, enum zs_scheme s, enum zs_unit u,
                     const struct report_run **out)
{
	size_t i, n = 0;

	*out = d->runs;
	for (i = 0; i < d->nruns; i++)
		if (d->runs[i].scheme == s && d->runs[i].unit == u) {
			if (n++ == 0)
				*out = &d->runs[i];
		}
	return n;
}

/* Combine the verdicts of the cases a claim was checked on. */
static void verdict(enum report_verdict *v, int holds)
{
	if (!holds)
		*v = REPORT_FAILS;
	else if (*v == REPORT_UNTESTED)
		*v = REPORT_HOLDS;
}

/* ------------------------------------------------------------------------ */

static void dp_flat(const struct report_data *d, struct report_finding *f, struct zs_buf *b)
{
	const struct report_run *c;
	size_t n, i;
	int u;

	for (u = 0; u < ZS_NUNITS; u++) {
		double rmin = INFINITY, rmax = -INFINITY, pmin = INFINITY, pmax = -INFINITY;
		if ((n = column(d, ZS_DP, (enum zs_unit)u, &c)) < 2)
			continue;
		for (i = 0; i < n; i++) {
			rmin = fmin(rmin, c[i].measured[REPORT_RESIDENT]);
			rmax = fmax(rmax, c[i].measured[REPORT_RESIDENT]);
			pmin = fmin(pmin, c[i].measured[REPORT_PEAK]);
			pmax = fmax(pmax, c[i].measured[REPORT_PEAK]);
		}
		verdict(&f->verdict, rmin == rmax && pmin == pmax);
		zs_buf_printf(b, "%sunit=%s, N = %u..%u: resident %.2f..%.2f B/param, peak %.2f..%.2f B/param",
		              b->len ? "; " : "", zs_unit_name((enum zs_unit)u), c[0].world,
		              c[n - 1].world, bpp(d, rmin), bpp(d, rmax), bpp(d, pmin), bpp(d, pmax));
	}
}

static void zero12_flatten(const struct report_data *d, struct report_finding *f,
                           struct zs_buf *b)
{
	const struct report_run *c;
	static const enum zs_scheme schemes[] = {ZS_ZERO1, ZS_ZERO2};
	size_t n, i;
	int u, j;

	for (j = 0; j < 2; j++) {
		double asym = schemes[j] == ZS_ZERO1 ? d->p + d->g : d->p;
		for (u = 0; u < ZS_NUNITS; u++) {
			double low = INFINITY, gap0, gap1;
			int rises = 0, below;
			if ((n = column(d, schemes[j], (enum zs_unit)u, &c)) < 2)
				continue;
			for (i = 0; i < n; i++) {
				low = fmin(low, c[i].measured[REPORT_RESIDENT]);
				if (i > 0 && c[i].measured[REPORT_RESIDENT] > c[i - 1].measured[REPORT_RESIDENT])
					rises = 1;
			}
			below = low < asym * d->params && !same(low, asym * d->params);
			gap0 = c[0].measured[REPORT_RESIDENT] - asym * d->params;
			gap1 = c[n - 1].measured[REPORT_RESIDENT] - asym * d->params;
			/* "Toward": the gap to the asymptote at the largest N is at
			 * most half the gap at the smallest. */
			verdict(&f->verdict, !below && !rises && gap1 <= gap0 / 2);
			zs_buf_printf(b, "%s%s unit=%s: %.2f B/param at N = %u, %.2f at N = %u "
			              "(asymptote %.0f, lowest %.2f%s%s)",
			              b->len ? "; " : "", zs_scheme_name(schemes[j]),
			              zs_unit_name((enum zs_unit)u),
			              bpp(d, c[0].measured[REPORT_RESIDENT]), c[0].world,
			              bpp(d, c[n - 1].measured[REPORT_RESIDENT]), c[n - 1].world,
			              asym, bpp(d, low), below ? ", BELOW the asymptote" : "",
			              rises ? ", rises with N somewhere" :
			              gap1 > gap0 / 2 ? ", gap not halved" : "");
		}
	}
}

static void zero3_halves(const struct report_data *d, struct report_finding *f,
                         struct zs_buf *b)
{
	const struct report_run *c;
	size_t n, i, j;
	int u;

	for (u = 0; u < ZS_NUNITS; u++) {
		int pairs = 0, bad = 0;
		n = column(d, ZS_ZERO3, (enum zs_unit)u, &c);
		for (i = 0; i < n; i++)
			for (j = i + 1; j < n; j++) {
				double r0 = c[i].measured[REPORT_RESIDENT], r1 = c[j].measured[REPORT_RESIDENT];
				/* Only where N divides every unit: padding is a separate cause. */
				if (c[j].world != 2 * c[i].world || c[i].padded_elements != d->params ||
				    c[j].padded_elements != d->params)
					continue;
				pairs++;
				if (!same(r0, 2 * r1)) {
					bad++;
					zs_buf_printf(b, "%sunit=%s N = %u to %u: %.3f to %.3f B/param (ratio %.3f)",
					              b->len ? "; " : "", zs_unit_name((enum zs_unit)u),
					              c[i].world, c[j].world, bpp(d, r0), bpp(d, r1), r0 / r1);
				}
			}
		if (pairs == 0)
			continue;
		verdict(&f->verdict, bad == 0);
		if (bad == 0) {
			zs_buf_printf(b, "%sunit=%s: exactly halves in all %d doublings (",
			              b->len ? "; " : "", zs_unit_name((enum zs_unit)u), pairs);
			for (i = 0; i < n; i++)
				if (c[i].padded_elements == d->params)
					zs_buf_printf(b, "%s%.3f at N = %u", i ? ", " : "",
					              bpp(d, c[i].measured[REPORT_RESIDENT]), c[i].world);
			zs_buf_printf(b, " B/param)");
		}
	}
}

static void n1_identical(const struct report_data *d, struct report_finding *f,
                         struct zs_buf *b)
{
	int u, s, m;

	for (u = 0; u < ZS_NUNITS; u++) {
		const struct report_run *r[ZS_NSCHEMES];
		int equal = 1;
		for (s = 0; s < ZS_NSCHEMES; s++)
			if ((r[s] = report_data_find(d, (enum zs_scheme)s, 1, (enum zs_unit)u)) == NULL)
				break;
		if (s < ZS_NSCHEMES)
			continue;
		for (s = 1; s < ZS_NSCHEMES; s++)
			for (m = 0; m < REPORT_NMETRICS; m++)
				if (r[s]->measured[m] != r[0]->measured[m])
					equal = 0;
		verdict(&f->verdict, equal);
		zs_buf_printf(b, "%sunit=%s, N = 1: resident", b->len ? "; " : "",
		              zs_unit_name((enum zs_unit)u));
		for (m = 0; m < REPORT_NMETRICS; m++) {
			if (m == REPORT_PEAK)
				zs_buf_printf(b, ", peak");
			if (m == REPORT_COMM)
				zs_buf_printf(b, ", comm");
			for (s = 0; s < ZS_NSCHEMES; s++) {
				if (m == REPORT_COMM)
					zs_buf_printf(b, " %.0f", r[s]->measured[m]);
				else
					zs_buf_printf(b, " %.2f", bpp(d, r[s]->measured[m]));
			}
			zs_buf_printf(b, m == REPORT_COMM ? " B" : " B/param");
		}
		zs_buf_printf(b, " (dp zero1 zero2 zero3)");
	}
}

static void zero3_peak_slow(const struct report_data *d, struct report_finding *f,
                            struct zs_buf *b)
{
	const struct report_run *c;
	size_t n;
	int u;

	for (u = 0; u < ZS_NUNITS; u++) {
		double rr, pr;
		if ((n = column(d, ZS_ZERO3, (enum zs_unit)u, &c)) < 2)
			continue;
		rr = c[0].measured[REPORT_RESIDENT] / c[n - 1].measured[REPORT_RESIDENT];
		pr = c[0].measured[REPORT_PEAK] / c[n - 1].measured[REPORT_PEAK];
		/* "Much more slowly": the peak shrinks by less than half the
		 * factor the resident state shrinks by. */
		verdict(&f->verdict, pr < rr / 2);
		zs_buf_printf(b, "%sunit=%s, N = %u to %u: resident falls %.1fx (%.2f to %.2f B/param), "
		              "peak %.1fx (%.2f to %.2f B/param); the test is peak factor < half the resident factor",
		              b->len ? "; " : "", zs_unit_name((enum zs_unit)u), c[0].world,
		              c[n - 1].world, rr, bpp(d, c[0].measured[REPORT_RESIDENT]),
		              bpp(d, c[n - 1].measured[REPORT_RESIDENT]), pr,
		              bpp(d, c[0].measured[REPORT_PEAK]), bpp(d, c[n - 1].measured[REPORT_PEAK]));
	}
}

static void zero3_peak_worse(const struct report_data *d, struct report_finding *f,
                             struct zs_buf *b)
{
	const unsigned *w;
	size_t n = report_data_worlds(d, ZS_UNIT_MODEL, &w);
	const struct report_run *z3 = NULL, *z2 = NULL;

	/* The largest N (above 1) at which both were measured. */
	while (n > 0 && w[n - 1] > 1) {
		z3 = report_data_find(d, ZS_ZERO3, w[n - 1], ZS_UNIT_MODEL);
		z2 = report_data_find(d, ZS_ZERO2, w[n - 1], ZS_UNIT_MODEL);
		if (z3 != NULL && z2 != NULL)
			break;
		n--;
	}
	if (z3 == NULL || z2 == NULL || n == 0 || w[n - 1] <= 1)
		return;
	verdict(&f->verdict, z3->measured[REPORT_PEAK] > z2->measured[REPORT_RESIDENT]);
	zs_buf_printf(b, "unit=model, N = %u: ZeRO-3 peak %.2f B/param, ZeRO-2 resident %.2f B/param",
	              z3->world, bpp(d, z3->measured[REPORT_PEAK]),
	              bpp(d, z2->measured[REPORT_RESIDENT]));
}

static void layer_gather(const struct report_data *d, struct report_finding *f,
                         struct zs_buf *b)
{
	const struct report_run *c;
	size_t n, i;
	int tested = 0, bad = 0;
	double largest = 0;

	n = column(d, ZS_ZERO3, ZS_UNIT_LAYER, &c);
	for (i = 0; i < n; i++) {
		double gp, fg;
		if (c[i].world == 1)
			continue;
		tested++;
		largest = c[i].largest_unit;
		gp = c[i].peak_bd[REPORT_CAT_GATHERED];
		fg = c[i].peak_bd[REPORT_CAT_FULL_GRADS];
		if (gp != largest * d->p || fg != largest * d->g) {
			bad++;
			zs_buf_printf(b, "%sN = %u: gathered params %.0f B and full grads %.0f B at the peak, "
			              "the largest unit (%.0f elements) needs %.0f B and %.0f B",
			              b->len ? "; " : "", c[i].world, gp, fg, largest,
			              largest * d->p, largest * d->g);
		}
	}
	if (tested == 0)
		return;
	verdict(&f->verdict, bad == 0);
	if (bad == 0)
		zs_buf_printf(b, "unit=layer, all %d runs with N > 1: the peak holds the largest unit "
		              "(%.0f of %.0f params): %.0f B gathered params and %.0f B full grads, "
		              "%.2f B/param instead of the whole model's %.2f",
		              tested, largest, d->params, largest * d->p, largest * d->g,
		              bpp(d, largest * (d->p + d->g)), d->p + d->g);
}

/* Over each unit's column of `scheme`: the range of ratio(d, run) (NAN
 * skips a run) and whether every one is 1.5; `what` names the runs tested
 * and `of` the ratio in the evidence. */
static void ratio_is_1_5(const struct report_data *d, struct report_finding *f, struct zs_buf *b,
                         enum zs_scheme scheme, double (*ratio)(const struct report_data *, const struct report_run *),
                         const char *what, const char *of)
{
	const struct report_run *c;

	for (int u = 0; u < ZS_NUNITS; u++) {
		size_t n = column(d, scheme, (enum zs_unit)u, &c);
		double lo = INFINITY, hi = -INFINITY;
		int tested = 0;
		for (size_t i = 0; i < n; i++) {
			double r = ratio(d, &c[i]);
			if (isnan(r))
				continue;
			lo = fmin(lo, r);
			hi = fmax(hi, r);
			tested++;
		}
		if (tested == 0)
			continue;
		verdict(&f->verdict, same(lo, 1.5) && same(hi, 1.5));
		zs_buf_printf(b, "%sunit=%s, %d %s: %s = %.4f..%.4f", b->len ? "; " : "",
		              zs_unit_name((enum zs_unit)u), tested, what, of, lo, hi);
	}
}

/* ZeRO-3 sends what DP sends and half again (the paper, Section 7). */
static double zero3_over_dp(const struct report_data *d, const struct report_run *r)
{
	const struct report_run *dp = report_data_find(d, ZS_DP, r->world, r->unit);
	if (r->world == 1 || dp == NULL || dp->measured[REPORT_COMM] <= 0)
		return NAN;
	return r->measured[REPORT_COMM] / dp->measured[REPORT_COMM];
}

static void comm_ratio(const struct report_data *d, struct report_finding *f, struct zs_buf *b)
{
	ratio_is_1_5(d, f, b, ZS_ZERO3, zero3_over_dp, "world sizes above 1", "ZeRO-3/DP");
}

/* torch's zero1 (ZeroRedundancyOptimizer) gives each tensor whole to one
 * rank, so the worst rank holds at least the largest tensor's optimizer
 * state: once every large tensor has a rank of its own, more ranks do not
 * help it. The claim holds where the worst rank's resident bytes are the
 * same at every N from 3 on and above the paper's floor at the largest. */
static void torch_zero1_flat(const struct report_data *d, struct report_finding *f, struct zs_buf *b)
{
	const struct report_run *c;
	for (int u = 0; u < ZS_NUNITS; u++) {
		size_t n = column(d, ZS_ZERO1, (enum zs_unit)u, &c), i = 0, tested = 0;
		while (i < n && c[i].world < 3)
			i++;
		if (n - i < 2)
			continue;
		const struct report_run *first = &c[i], *last = &c[n - 1];
		int flat = 1;
		for (; i < n; i++, tested++)
			flat &= same(c[i].measured[REPORT_RESIDENT], first->measured[REPORT_RESIDENT]);
		verdict(&f->verdict, flat && last->measured[REPORT_RESIDENT] > last->floor[REPORT_RESIDENT]);
		zs_buf_printf(b, "%sunit=%s, %zu world sizes from N = %u to %u: the worst rank holds %.4g..%.4g B/param "
		                  "while the floor falls from %.4g to %.4g",
		                  b->len ? "; " : "", zs_unit_name((enum zs_unit)u), tested, first->world, last->world,
		                  bpp(d, first->measured[REPORT_RESIDENT]), bpp(d, last->measured[REPORT_RESIDENT]),
		                  bpp(d, first->floor[REPORT_RESIDENT]), bpp(d, last->floor[REPORT_RESIDENT]));
	}
}

/* DDP's all-reduce is the paper's reduce-scatter and all-gather; the
 * broadcasts come on top: 3(N-1)/N elements per param, not 2(N-1)/N. Where
 * N pads nothing the ratio to the paper's floor is exactly 1.5. */
static double zero1_over_floor(const struct report_data *d, const struct report_run *r)
{
	if (r->world == 1 || r->padded_elements != d->params || r->broadcast_bytes <= 0)
		return NAN;
	return r->measured[REPORT_COMM] / r->floor[REPORT_COMM];
}

static void torch_zero1_comm(const struct report_data *d, struct report_finding *f, struct zs_buf *b)
{
	ratio_is_1_5(d, f, b, ZS_ZERO1, zero1_over_floor, "unpadded world sizes above 1",
	             "sent / the paper's zero1");
}

/* DeepSpeed's ZeRO-3 keeps a tensor of at most param_persistence_threshold
 * elements whole on every rank (partition_parameters.py, stage3.py): from
 * the files' shape and threshold (config.deepspeed.persist). */
static void ds_zero3_persist(const struct report_data *d, struct report_finding *f, struct zs_buf *b)
{
	double largest = 0;
	unsigned persist = 0, tensors = 0;
	if (d->ds_persist < 0)
		return;
	for (size_t l = 0; l + 1 < d->nwidths; l++) {
		double n[2] = {(double)d->widths[l] * (double)d->widths[l + 1], (double)d->widths[l + 1]};
		for (int i = 0; i < 2; i++, tensors++) {
			largest = fmax(largest, n[i]);
			persist += n[i] <= d->ds_persist;
		}
	}
	verdict(&f->verdict, persist == tensors);
	zs_buf_printf(b, "%u of the %u tensors are at most the threshold of %.17g elements (the largest has %.17g)",
	              persist, tensors, d->ds_persist, largest);
}

/* ------------------------------------------------------------------------ */

void report_findings(const struct report_data *d, struct report_finding *f)
{
	static const struct {
		const char *key, *claim;
		void (*check)(const struct report_data *, struct report_finding *, struct zs_buf *);
		const char *framework; /* NULL: every file's claim */
	} table[REPORT_NFINDINGS] = {
		{"dp_never_moves", "The DP column never moves: its resident and peak bytes are the same at every N.", dp_flat, NULL},
		{"zero1_zero2_flatten", "ZeRO-1 and ZeRO-2 flatten toward p+g and p bytes per param and never go below them.", zero12_flatten, NULL},
		{"zero3_halves", "ZeRO-3's resident bytes halve with each doubling of N (where N divides every unit).", zero3_halves, NULL},
		{"n1_identical", "At N = 1 all four schemes are identical (resident, peak, comm).", n1_identical, NULL},
		{"zero3_peak_slow", "ZeRO-3's peak falls much more slowly with N than its resident bytes.", zero3_peak_slow, NULL},
		{"zero3_peak_above_zero2", "With the whole model gathered (unit=model), ZeRO-3's peak at the largest N is worse than ZeRO-2's resident bytes.", zero3_peak_worse, NULL},
		{"layer_gather_largest_unit", "A per-layer gather (unit=layer) adds only the largest unit's params and grads to ZeRO-3's peak.", layer_gather, NULL},
		{"zero3_comm_1_5_dp", "ZeRO-3 sends 1.5 times DP's bytes per rank per step.", comm_ratio, NULL},
		{"torch_zero1_no_better_from_3", "torch's ZeRO-1 (ZeroRedundancyOptimizer, whole tensors) is no better from N = 3 on: its worst rank stops falling while the paper's floor goes on.", torch_zero1_flat, "torch"},
		{"torch_zero1_comm_1_5", "torch's ZeRO-1 sends 1.5 times the paper's ZeRO-1 (all-reduce, then a broadcast of every tensor).", torch_zero1_comm, "torch"},
		{"deepspeed_zero3_partitions_nothing", "DeepSpeed's ZeRO-3 partitions none of this model: every parameter tensor is within its persistence threshold (param_persistence_threshold), so every rank holds every parameter whole.", ds_zero3_persist, "deepspeed"},
	};
	int i;

	for (i = 0; i < REPORT_NFINDINGS; i++) {
		struct zs_buf b = {0};
		f[i].key = table[i].key;
		f[i].claim = table[i].claim;
		f[i].verdict = REPORT_UNTESTED;
		f[i].shown = table[i].framework == NULL || strcmp(table[i].framework, d->framework) == 0;
		if (f[i].shown)
			table[i].check(d, &f[i], &b);
		f[i].evidence = zs_strdup(f[i].verdict == REPORT_UNTESTED ?
		                          "the files hold no runs that test it" : zs_buf_str(&b));
		zs_buf_free(&b);
	}
}

void report_findings_free(struct report_finding *f)
{
	int i;

	for (i = 0; i < REPORT_NFINDINGS; i++) {
		free(f[i].evidence);
		f[i].evidence = NULL;
	}
}
