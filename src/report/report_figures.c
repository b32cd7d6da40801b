/*
 * report_figures — gnuplot scripts and data for the five figures. The floor
 * curves are the ZeRO paper's formulas (SC'20, section 5) written as gnuplot
 * functions of p, g, k, so an edited script still draws the right floors.
 *
 * Every series has its own colour, point type and dash type, so the
 * figures read in black and white; legends sit outside the plot area.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buf.h"
#include "report/report_figures.h"
#include "report/report_moe.h"
#include "util/cuda_alloc.h"
#include "util/util.h"

const char *const report_figure_names[REPORT_NFIGURES] = {
	"fig1-resident", "fig2-peak", "fig3-comm", "fig4-breakdown", "fig5-timeline",
};

const char *const report_figure_optional[REPORT_NOPTIONAL] = {
	REPORT_FIGURE_RANKS, REPORT_FIGURE_TFM, REPORT_FIGURE_HOST, REPORT_FIGURE_TFM_HOST, REPORT_FIGURE_ALLOC,
	REPORT_FIGURE_TORCH, REPORT_FIGURE_MOE,
};

static const char *const scheme_title[ZS_NSCHEMES] = {"DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

/* ------------------------------------------------------------------------ */

static int put(const char *dir, const char *name, const char *ext, const struct zs_buf *b,
           char **cause)
{
	char *path = zs_asprintf("%s/%s.%s", dir, name, ext);
	int rc = zs_buf_write(b, path, cause);

	free(path);
	return rc;
}

/* The unit the figures show: the default whole-model unit when measured. */
static enum zs_unit main_unit(const struct report_data *d)
{
	return report_data_has_unit(d, ZS_UNIT_MODEL) ? ZS_UNIT_MODEL : ZS_UNIT_LAYER;
}

/* A value or gnuplot's missing marker. */
static void value(struct zs_buf *b, const struct report_run *r, double v)
{
	if (r == NULL)
		zs_buf_printf(b, " ?");
	else
		zs_buf_printf(b, " %.9g", v);
}

/* One style per series (colour, point type and dash type, for black and
 * white too), the key outside, a light grid. */
static void styles(struct zs_buf *b)
{
	zs_buf_printf(b,
		"set datafile missing '?'\n"
		"set encoding utf8\n"
		"# One style per series: colour, point type and dash type, for black and white too.\n"
		"set style line 1 lc rgb '#000000' lw 2 dt 1 pt 7   # DP\n"
		"set style line 2 lc rgb '#d95f02' lw 2 dt 2 pt 5   # ZeRO-1\n"
		"set style line 3 lc rgb '#1b9e77' lw 2 dt 4 pt 9   # ZeRO-2\n"
		"set style line 4 lc rgb '#7570b3' lw 2 dt 5 pt 13  # ZeRO-3\n"
		"set style line 5 lc rgb '#e7298a' lw 2 dt 3 pt 6   # ZeRO-3 unit=layer\n"
		"set style line 6 lc rgb '#777777' lw 1 dt 3        # reference lines\n"
		"set key outside right top vertical Left reverse samplen 3 spacing 1.2\n"
		"set grid back lc rgb '#dddddd'\n"
		"set border 3\nset tics nomirror\n");
}

static void header(struct zs_buf *b, const struct report_data *d, const char *name,
               const char *what)
{
	zs_buf_printf(b,
		"# %s.gp, written by zerosim report: %s.\n"
		"# Reads %s.dat; run `gnuplot %s.gp` in this folder to rewrite %s.pdf and %s.png.\n"
		"# Bytes per parameter are bytes per rank divided by Psi = %.0f.\n"
		"Psi = %.0f\np = %g; g = %g; k = %g   # bytes per param: working param, grad, optimizer\n",
		name, what, name, name, name, name, d->params, d->params, d->p, d->g, d->k);
	styles(b);
}

static void n_axis(struct zs_buf *b, const unsigned *w, size_t n)
{
	size_t i;

	zs_buf_printf(b, "set logscale x 2\nset xrange [%g:%g]\nset xtics (",
	              w[0] * 0.8, w[n - 1] * 1.25);
	for (i = 0; i < n; i++)
		zs_buf_printf(b, "%s%u", i ? ", " : "", w[i]);
	zs_buf_printf(b, ")\nset xlabel 'world size N (ranks, log scale)'\n");
}

/* Draw to PDF, then the same plot to PNG. */
static void render(struct zs_buf *b, const char *name, const char *plot)
{
	zs_buf_printf(b,
		"# Vector PDF for the paper, PNG for a quick look; sizes tuned to each.\n"
		"set terminal pdfcairo enhanced size 6in,3.3in font 'Helvetica,9' linewidth 1.5\n"
		"pts = 0.6; set pointsize pts\n"
		"set output '%s.pdf'\n%s\n"
		"set terminal pngcairo enhanced size 1100,600 font 'Helvetica,12'\n"
		"pts = 1.2; set pointsize pts\n"
		"set output '%s.png'\nreplot\nset output\n",
		name, plot, name);
}

/* ------------------------------------------------------------------------ */

/* Render the plot command into the script, write the .dat and the .gp,
 * and free the three buffers. */
static int finish(const char *dir, const char *name, struct zs_buf *dat, struct zs_buf *gp,
          struct zs_buf *plot, char **cause)
{
	render(gp, name, zs_buf_str(plot));
	int rc = put(dir, name, "dat", dat, cause);
	if (rc == 0)
		rc = put(dir, name, "gp", gp, cause);
	zs_buf_free(dat);
	zs_buf_free(gp);
	zs_buf_free(plot);
	return rc;
}

static int fig_resident(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	enum zs_unit u = main_unit(d);
	const unsigned *w;
	size_t n = report_data_worlds(d, u, &w), i;
	const char *name = report_figure_names[0];
	int s;

	zs_buf_printf(&dat, "# resident bytes per param per rank, unit=%s\n# N dp zero1 zero2 zero3\n",
	              zs_unit_name(u));
	for (i = 0; i < n; i++) {
		zs_buf_printf(&dat, "%u", w[i]);
		for (s = 0; s < ZS_NSCHEMES; s++) {
			const struct report_run *r = report_data_find(d, (enum zs_scheme)s, w[i], u);
			value(&dat, r, r ? r->measured[REPORT_RESIDENT] / d->params : 0);
		}
		zs_buf_printf(&dat, "\n");
	}
	header(&gp, d, name, "resident bytes per parameter against N");
	n_axis(&gp, w, n);
	zs_buf_printf(&gp,
		"set ylabel 'resident bytes per parameter per rank'\nset yrange [0:*]\nset samples 400\n"
		"# The paper's floors (ZeRO, SC'20): DP p+g+k, ZeRO-1 p+g+k/N, ZeRO-2 p+(g+k)/N, ZeRO-3 (p+g+k)/N.\n"
		"# Drawn from N = 1 on (NaN below), where a world size starts.\n"
		"f0(x) = x < 1 ? NaN : p+g+k\nf1(x) = x < 1 ? NaN : p+g+k/x\n"
		"f2(x) = x < 1 ? NaN : p+(g+k)/x\nf3(x) = x < 1 ? NaN : (p+g+k)/x\n"
		"set title 'Resident model state per rank (unit=%s): measured points over the paper floors'\n",
		zs_unit_name(u));
	zs_buf_printf(&plot, "plot \\\n");
	for (s = 0; s < ZS_NSCHEMES; s++)
		zs_buf_printf(&plot, "  f%d(x) with lines ls %d lw 1 title '%s floor', \\\n"
		              "  '%s.dat' using 1:%d with points ls %d title '%s measured', \\\n",
		              s, s + 1, scheme_title[s], name, s + 2, s + 1, scheme_title[s]);
	zs_buf_printf(&plot, "  p+g with lines ls 6 title 'asymptote p+g (ZeRO-1)', \\\n"
	              "  p with lines ls 6 dt 2 title 'asymptote p (ZeRO-2)'");
	return finish(dir, name, &dat, &gp, &plot, cause);
}

static int fig_peak(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	enum zs_unit u = main_unit(d);
	const unsigned *w;
	size_t n = report_data_worlds(d, u, &w), i;
	const char *name = report_figure_names[1];
	int s, layer = u == ZS_UNIT_MODEL && report_data_has_unit(d, ZS_UNIT_LAYER);

	zs_buf_printf(&dat, "# peak bytes per param per rank, unit=%s (zero3_layer: unit=layer);\n"
	              "# zero2_res is ZeRO-2's resident bytes per param\n"
	              "# N dp zero1 zero2 zero3 zero3_layer zero2_res\n", zs_unit_name(u));
	for (i = 0; i < n; i++) {
		const struct report_run *r;
		zs_buf_printf(&dat, "%u", w[i]);
		for (s = 0; s < ZS_NSCHEMES; s++) {
			r = report_data_find(d, (enum zs_scheme)s, w[i], u);
			value(&dat, r, r ? r->measured[REPORT_PEAK] / d->params : 0);
		}
		r = layer ? report_data_find(d, ZS_ZERO3, w[i], ZS_UNIT_LAYER) : NULL;
		value(&dat, r, r ? r->measured[REPORT_PEAK] / d->params : 0);
		r = report_data_find(d, ZS_ZERO2, w[i], u);
		value(&dat, r, r ? r->measured[REPORT_RESIDENT] / d->params : 0);
		zs_buf_printf(&dat, "\n");
	}
	header(&gp, d, name, "peak bytes per parameter against N");
	n_axis(&gp, w, n);
	zs_buf_printf(&gp, "set ylabel 'peak bytes per parameter per rank'\nset yrange [0:*]\n"
	              "set title 'Peak during a step per rank (unit=%s unless marked)'\n",
	              zs_unit_name(u));
	zs_buf_printf(&plot, "plot \\\n");
	for (s = 0; s < ZS_NSCHEMES; s++)
		zs_buf_printf(&plot, "  '%s.dat' using 1:%d with linespoints ls %d title '%s peak', \\\n",
		              name, s + 2, s + 1, scheme_title[s]);
	if (layer)
		zs_buf_printf(&plot, "  '%s.dat' using 1:6 with linespoints ls 5 "
		              "title 'ZeRO-3 peak, unit=layer', \\\n", name);
	zs_buf_printf(&plot, "  '%s.dat' using 1:7 with lines ls 3 lw 1 dt 1 "
	              "title 'ZeRO-2 resident'", name);
	return finish(dir, name, &dat, &gp, &plot, cause);
}

static int fig_comm(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	enum zs_unit u = main_unit(d);
	const unsigned *w;
	size_t n = report_data_worlds(d, u, &w), i;
	const char *name = report_figure_names[2];
	double top = 0, scale;
	const char *unit_name;
	int s;

	for (i = 0; i < d->nruns; i++)
		top = fmax(top, d->runs[i].measured[REPORT_COMM]);
	/* Decimal units (docs/design.md: GB is 1e9), chosen so numbers stay short. */
	scale = top < 1e6 ? 1e3 : top < 1e9 ? 1e6 : 1e9;
	unit_name = top < 1e6 ? "kB" : top < 1e9 ? "MB" : "GB";
	zs_buf_printf(&dat, "# bytes sent per rank per step, in %s (%.0f B), unit=%s\n"
	              "# N dp zero1 zero2 zero3\n", unit_name, scale, zs_unit_name(u));
	for (i = 0; i < n; i++) {
		zs_buf_printf(&dat, "%u", w[i]);
		for (s = 0; s < ZS_NSCHEMES; s++) {
			const struct report_run *r = report_data_find(d, (enum zs_scheme)s, w[i], u);
			value(&dat, r, r ? r->measured[REPORT_COMM] / scale : 0);
		}
		zs_buf_printf(&dat, "\n");
	}
	header(&gp, d, name, "communication per rank per step against N");
	n_axis(&gp, w, n);
	zs_buf_printf(&gp, "scale = %.0f   # bytes per %s\n"
	              "set ylabel '%s sent per rank per step (1 %s = %.0f B)'\nset yrange [0:*]\n"
	              "set title 'Communication per rank per step (ring collectives, unit=%s)'\n",
	              scale, unit_name, unit_name, unit_name, scale, zs_unit_name(u));
	zs_buf_printf(&plot, "plot \\\n");
	/* DP, ZeRO-1 and ZeRO-2 send the same bytes when p = g: open points of
	 * decreasing size keep all three visible where they coincide. */
	for (s = 0; s < ZS_NSCHEMES; s++) {
		static const char *const points[ZS_NSCHEMES] = {
			" pt 6 ps 2.6*pts", " pt 4 ps 1.7*pts", "", "",
		};
		zs_buf_printf(&plot, "  '%s.dat' using 1:%d with linespoints ls %d%s title '%s', \\\n",
		              name, s + 2, s + 1, points[s], scheme_title[s]);
	}
	/* The paper's limits as N grows: 2Ψ elements (DP all-reduce of g bytes,
	 * ZeRO-1/2 reduce-scatter + all-gather) and 3Ψ for ZeRO-3. */
	zs_buf_printf(&plot, "  2*g*Psi/scale with lines ls 6 title 'limit 2{/Symbol Y} elements (DP, ZeRO-1/2)', \\\n"
	              "  (2*p+g)*Psi/scale with lines ls 6 dt 2 title 'limit 3{/Symbol Y} elements (ZeRO-3)'");
	return finish(dir, name, &dat, &gp, &plot, cause);
}

/* Largest N (preferably above 1) of the main unit. */
static unsigned largest_world(const struct report_data *d)
{
	const unsigned *w;
	size_t n = report_data_worlds(d, main_unit(d), &w);

	return n ? w[n - 1] : 1;
}

/* Categories grouped as the paper groups model states, then the step's
 * transients one by one. */
static const struct { const char *title; int cats[4]; } groups[] = {
	{"params", {REPORT_CAT_PARAM16, REPORT_CAT_PARAM32, -1, -1}},
	{"grads", {REPORT_CAT_GRAD16, REPORT_CAT_GRAD32, -1, -1}},
	{"optimizer states", {REPORT_CAT_MASTER32, REPORT_CAT_ADAM_M, REPORT_CAT_ADAM_V,
	                      REPORT_CAT_MOMENTUM}},
	{"gathered params", {REPORT_CAT_GATHERED, -1, -1, -1}},
	{"full grads", {REPORT_CAT_FULL_GRADS, -1, -1, -1}},
	{"activations", {REPORT_CAT_ACTIVATIONS, -1, -1, -1}},
	{"scratch", {REPORT_CAT_SCRATCH, -1, -1, -1}},
	{"buckets and other", {REPORT_CAT_BUCKETS, REPORT_CAT_UNKNOWN, -1, -1}}, /* DDP's, DeepSpeed's */
};
static const size_t ngroups = sizeof groups / sizeof groups[0];
/* Each category is filled with its colour (Okabe and Ito's colour-blind-safe
 * palette), then drawn again with a pattern, so a stack reads in black and
 * white too. */
static const char *const colours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                      "#D55E00", "#56B4E9", "#F0E442", "#999999"};
/* gnuplot has eight fill patterns and its pattern 3 is a solid fill, which
 * would paint "other" black over its grey: "other" is left unpatterned, as
 * "params" is, and told apart from it by its grey. */
static const int patterns[] = {0, 1, 2, 4, 5, 6, 7, 0};

/* The stacked bars of NAME.dat (block `index`, "" for the only one): the
 * colours with the categories' titles when `key`, then the patterns over
 * them. */
static void stack_plot(struct zs_buf *plot, const char *name, const char *index, int key)
{
	size_t gi;

	zs_buf_printf(plot, "plot newhistogram at 0, \\\n");
	for (gi = 0; gi < ngroups; gi++) {
		zs_buf_printf(plot, "  '%s.dat'%s using %zu%s ", name, index, gi + 2, gi == 0 ? ":xtic(1)" : "");
		if (key)
			zs_buf_printf(plot, "title '%s'", groups[gi].title);
		else
			zs_buf_printf(plot, "notitle");
		zs_buf_printf(plot, " lc rgb '%s' fs solid 0.85 border lc rgb '#000000', \\\n", colours[gi]);
	}
	zs_buf_printf(plot, "  newhistogram at 0, \\\n");
	for (gi = 0; gi < ngroups; gi++)
		zs_buf_printf(plot, "  '%s.dat'%s using %zu notitle lc rgb '#000000' fs transparent pattern %d noborder%s",
		              name, index, gi + 2, patterns[gi], gi + 1 < ngroups ? ", \\\n" : "");
}

static int fig_breakdown(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	enum zs_unit u = main_unit(d);
	unsigned world = largest_world(d);
	const char *name = report_figure_names[3];
	size_t gi;
	int s, j, bars = 0;

	zs_buf_printf(&dat, "# peak bytes per param per rank by category at N = %u\n# scheme", world);
	for (gi = 0; gi < ngroups; gi++)
		zs_buf_printf(&dat, " \"%s\"", groups[gi].title);
	zs_buf_printf(&dat, "\n");
	for (s = 0; s <= ZS_NSCHEMES; s++) {
		/* The fifth bar is ZeRO-3 with unit=layer, when measured. */
		const struct report_run *r = s < ZS_NSCHEMES ?
			report_data_find(d, (enum zs_scheme)s, world, u) :
			u == ZS_UNIT_MODEL ? report_data_find(d, ZS_ZERO3, world, ZS_UNIT_LAYER) : NULL;
		if (r == NULL)
			continue;
		bars++;
		zs_buf_printf(&dat, "\"%s%s\"", scheme_title[r->scheme],
		              s == ZS_NSCHEMES ? "\\n(unit=layer)" : "");
		for (gi = 0; gi < ngroups; gi++) {
			double v = 0;
			for (j = 0; j < 4 && groups[gi].cats[j] >= 0; j++)
				v += r->peak_bd[groups[gi].cats[j]];
			zs_buf_printf(&dat, " %.9g", v / d->params);
		}
		zs_buf_printf(&dat, "\n");
	}
	header(&gp, d, name, "the peak broken down by category");
	zs_buf_printf(&gp,
		"set ylabel 'bytes per parameter per rank at the peak'\nset yrange [0:*]\n"
		"set xlabel 'scheme (unit=%s unless marked), N = %u'\n"
		"set title 'What is alive at the peak, N = %u'\n"
		"set style data histograms\nset style histogram rowstacked\n"
		"set boxwidth 0.6 relative\nset xrange [-0.6:%d]\nset xtics scale 0\n"
		"# Each category is filled with its colour (Okabe and Ito's colour-blind-safe\n"
		"# palette), then drawn again at the same place with a pattern, so the\n"
		"# stack also reads in black and white.\n",
		zs_unit_name(u), world, world, bars);
	stack_plot(&plot, name, "", 1);
	return finish(dir, name, &dat, &gp, &plot, cause);
}

/* The runs the timeline figure shows: the largest N where the most
 * schemes of the main unit carry a timeline. Returns the count. */
static int timeline_runs(const struct report_data *d, const struct report_run **out)
{
	const unsigned *w;
	enum zs_unit u = main_unit(d);
	size_t n = report_data_worlds(d, u, &w), i;
	int best = 0, s, k;

	for (i = n; i-- > 0;) {
		const struct report_run *r[ZS_NSCHEMES + 1];
		k = 0;
		for (s = 0; s < ZS_NSCHEMES; s++) {
			r[k] = report_data_find(d, (enum zs_scheme)s, w[i], u);
			if (r[k] != NULL && r[k]->ntimeline > 0)
				k++;
		}
		r[k] = u == ZS_UNIT_MODEL ? report_data_find(d, ZS_ZERO3, w[i], ZS_UNIT_LAYER) : NULL;
		if (r[k] != NULL && r[k]->ntimeline > 0)
			k++;
		if (k > best) {
			best = k;
			for (s = 0; s < k; s++)
				out[s] = r[s];
		}
	}
	return best;
}

/* The timeline's phase marks. A span is a run of consecutive events of one
 * phase; event i holds its level over [i, i+1), so a span of events a..b-1
 * covers [a, b). Event 0 is the state the step starts from ("op": "start"):
 * its phase is whichever phase the previous step ended in, so it gets no
 * mark of its own. Each span is shaded by its phase, begins at a dotted
 * line and has its name above it: the full name when it fits (TL_CHAR of
 * the panel's width per character, measured on both terminals, and TL_GAP
 * between names; the last span may run on into the right margin), else the
 * short name, else none. */
#define TL_CHAR 0.0092
#define TL_GAP 0.006
static const char *const phase_short[REPORT_NPHASES] = {"set", "fwd", "bwd", "red", "opt", "gth"};
static const char *const phase_shade[REPORT_NPHASES] = {NULL, NULL, "#eeeeee", "#d6d6d6", NULL, NULL};
#define TL_SHADES "Shaded: backward light grey, reduce darker."   /* the note on phase_shade */

/* Print the marks of nev events' phases unless b is NULL; the phases
 * named short, as bits. */
static unsigned phase_marks(struct zs_buf *b, const enum report_phase *phase, size_t nev)
{
	const double n = (double)nev;
	unsigned shortened = 0;
	size_t a = 1, i;

	for (i = 2; i <= nev; i++) {
		const enum report_phase p = phase[a];
		const char *name = NULL;
		double w;

		if (i < nev && phase[i] == p)
			continue;
		w = (double)(i - a) / n + (i == nev ? 0.08 : 0) - TL_GAP;
		if (w >= TL_CHAR * (double)strlen(report_phase_name(p))) {
			name = report_phase_name(p);
		} else if (w >= TL_CHAR * (double)strlen(phase_short[p])) {
			name = phase_short[p];
			shortened |= 1u << p;
		}
		if (b != NULL) {
			if (phase_shade[p] != NULL)
				zs_buf_printf(b, "set object rect from %zu, graph 0 to %zu, graph 1 behind "
				              "fc rgb '%s' fs solid noborder\n", a, i, phase_shade[p]);
			zs_buf_printf(b, "set arrow from %zu, graph 0 to %zu, graph 1 nohead ls 7\n", a, a);
			if (name != NULL)
				zs_buf_printf(b, "set label '{/*0.85 %s}' at %g, graph 1 center offset 0,0.6\n",
				              name, (double)(a + i) / 2);
		}
		a = i;
	}
	return shortened;
}

/* A run's marks (rank 0's timeline), as phase_marks. */
static unsigned timeline_marks(struct zs_buf *b, const struct report_run *r)
{
	return phase_marks(b, r->phase, r->ntimeline);
}

/* The phases of a step (setup is not one) a run has no event in, event 0
 * aside, as bits. */
static unsigned timeline_silent(const struct report_run *r)
{
	unsigned seen = 0, silent = 0;
	int p;
	size_t i;

	for (i = 1; i < r->ntimeline; i++)
		seen |= 1u << r->phase[i];
	for (p = REPORT_PH_FORWARD; p < REPORT_NPHASES; p++)
		if (!(seen & 1u << p))
			silent |= 1u << p;
	return silent;
}

/* The phases in mask, as "a, b,\nc" (a gnuplot line break after every
 * second). */
static void phase_list(struct zs_buf *b, unsigned mask)
{
	int p, k = 0;

	for (p = 0; p < REPORT_NPHASES; p++)
		if (mask & 1u << p) {
			zs_buf_printf(b, "%s%s", k == 0 ? "" : k % 2 == 0 ? ",\\n" : ", ",
			              report_phase_name((enum report_phase)p));
			k++;
		}
}

/* "set ytics" with a step giving at most 4 intervals up to top: 1, 2 or 5
 * times a power of ten; gnuplot's own below a millionth of a byte. */
static void ytics(struct zs_buf *b, double top)
{
	double e, m;

	if (!(top >= 1e-6)) {
		zs_buf_printf(b, "set ytics autofreq\n");
		return;
	}
	e = pow(10, floor(log10(top / 4)));
	for (m = 1; m * e * 4 < top; m = m < 2 ? 2 : m < 5 ? 5 : 10)
		;
	zs_buf_printf(b, "set ytics %g\n", m * e);
}

/* n panels of a step's events, one above the other: the PDF then the PNG
 * (1.15in a panel, 0.9in for the title and the notes below), up to the
 * multiplot's title, which the caller writes. */
static void panels_open(struct zs_buf *gp, const char *name, int n)
{
	double inches = 0.9 + 1.15 * n;
	zs_buf_printf(gp,
		"do for [out = 1:2] {\n"
		"if (out == 1) {\n"
		"  set terminal pdfcairo enhanced size 6in,%.2fin font 'Helvetica,9' linewidth 1.5\n"
		"  set output '%s.pdf'\n"
		"  small = 'Helvetica,7.5'\n"
		"} else {\n"
		"  set terminal pngcairo enhanced size 1100,%.0f font 'Helvetica,12'\n"
		"  set output '%s.png'\n"
		"  small = 'Helvetica,10'\n"
		"}\n"
		"set multiplot layout %d,1 margins 0.08,0.83,%.3f,%.3f spacing 0,%.3f \\\n",
		inches, name, inches * 1100 / 6, name, n, 0.62 / inches, 1 - 0.3 / inches, 0.3 / inches);
}

static int fig_timeline(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0};
	const struct report_run *r[ZS_NSCHEMES + 1];
	const char *name = report_figure_names[4];
	int n = timeline_runs(d, r), j, rc, p;
	unsigned shortened = 0;
	size_t i;

	header(&gp, d, name, "rank 0's memory through the last step, phase by phase");
	if (n == 0) {
		/* Still a valid figure, so the report's PDF builds. */
		zs_buf_printf(&dat, "# no run in measured.json carries a timeline "
		              "(zerosim measure --timeline records one)\n");
		zs_buf_printf(&gp, "unset border\nunset tics\nunset key\nset xrange [0:1]\nset yrange [0:1]\n"
		              "set label 1 'No timeline in measured.json: measure with --timeline.' "
		              "at 0.5,0.5 center\n");
		render(&gp, name, "plot 2 notitle");
		goto write;
	}
	for (j = 0; j < n; j++)
		shortened |= timeline_marks(NULL, r[j]);
	zs_buf_printf(&dat, "# rank 0's tracked bytes per param after each event of the last step, "
	              "N = %u; one block per run.\n"
	              "# event bytes_per_param phase: event 0 is the state the step starts from\n"
	              "# (its phase is the one the previous step ended in); the last row repeats\n"
	              "# the last level at x = the event count, so every event has width 1.\n",
	              r[0]->world);
	for (j = 0; j < n; j++) {
		zs_buf_printf(&dat, "%s# %s unit=%s\n", j ? "\n\n" : "",
		              zs_scheme_name(r[j]->scheme), zs_unit_name(r[j]->unit));
		for (i = 0; i < r[j]->ntimeline; i++)
			zs_buf_printf(&dat, "%zu %.9g %s\n", i, r[j]->timeline[i] / d->params,
			              i ? report_phase_name(r[j]->phase[i]) : "start");
		zs_buf_printf(&dat, "%zu %.9g end\n", i, r[j]->timeline[i - 1] / d->params);
	}
	zs_buf_printf(&gp,
		"# One panel per run, each over its own events and with its own y scale.\n"
		"# A phase begins at a dotted line, its name above; backward is shaded light\n"
		"# grey, reduce darker. At the right: the phases with no event.\n"
		"set style line 7 lc rgb '#999999' lw 1 dt 3       # phase separators\n"
		"set key at graph 1.03, graph 0.75 left center Left reverse samplen 2.5\n"
		"unset grid\nset grid ytics front lc rgb '#d0d0d0'\nset yrange [0:*]\n"
		"# Vector PDF for the paper, PNG for a quick look; sizes tuned to each.\n");
	panels_open(&gp, name, n);
	zs_buf_printf(&gp, "  title 'Memory of rank 0 through one step, phase by phase, N = %u'\n", r[0]->world);
	for (j = 0; j < n; j++) {
		const int layer = r[j]->unit == ZS_UNIT_LAYER && main_unit(d) == ZS_UNIT_MODEL;
		const unsigned silent = timeline_silent(r[j]);
		double top = 0;

		for (i = 0; i < r[j]->ntimeline; i++)
			top = fmax(top, r[j]->timeline[i] / d->params);
		zs_buf_printf(&gp, "# %s%s\nunset arrow\nunset label\nunset object\nset xrange [0:%zu]\n",
		              scheme_title[r[j]->scheme], layer ? ", unit=layer" : "", r[j]->ntimeline);
		ytics(&gp, top);
		if (j == 0)
			zs_buf_printf(&gp, "set label 'bytes per parameter held by rank 0' "
			              "at screen 0.02, screen 0.5 center rotate by 90\n");
		if (j + 1 < n) {
			zs_buf_printf(&gp, "unset xlabel\n");
		} else {
			zs_buf_printf(&gp, "set xlabel 'allocation events since the step began (rank 0)'\n"
			              "set label \"Event 0 is the state the step starts from. " TL_SHADES
			              " Each panel has its own y scale.\\nA phase with no event "
			              "allocates nothing: memory is flat through it.");
			if (shortened) {
				zs_buf_printf(&gp, " Short names: ");
				for (p = 0; p < REPORT_NPHASES; p++)
					if (shortened & 1u << p)
						zs_buf_printf(&gp, "%s %s%s", phase_short[p],
						              report_phase_name((enum report_phase)p),
						              shortened >> (p + 1) ? ", " : ".");
			}
			zs_buf_printf(&gp, "\" at screen 0.08, screen 0.035 left font small\n");
		}
		if (silent) {
			zs_buf_printf(&gp, "set label \"no events in\\n");
			phase_list(&gp, silent);
			zs_buf_printf(&gp, "\" at graph 1.03, graph 0.35 left font small tc rgb '#555555'\n");
		}
		timeline_marks(&gp, r[j]);
		zs_buf_printf(&gp, "plot '%s.dat' index %d using 1:2 with steps ls %d title \"%s%s\"\n",
		              name, j, layer ? 5 : (int)r[j]->scheme + 1,
		              scheme_title[r[j]->scheme], layer ? "\\nunit=layer" : "");
	}
	zs_buf_printf(&gp, "unset multiplot\n}\nset output\n");
write:
	rc = put(dir, name, "dat", &dat, cause);
	if (rc == 0)
		rc = put(dir, name, "gp", &gp, cause);
	zs_buf_free(&dat);
	zs_buf_free(&gp);
	return rc;
}

/* The runs whose ranks differ, of the figures' unit, fewest ranks first
 * (d->runs is sorted by unit, scheme, world): at most four, of 32 ranks
 * or fewer, so that every bar can be read. */
#define RANK_RUNS 4
static size_t uneven_runs(const struct report_data *d, const struct report_run **out)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nruns && n < RANK_RUNS; i++)
		if (d->runs[i].rank_resident != NULL && d->runs[i].unit == main_unit(d) && d->runs[i].world <= 32)
			out[n++] = &d->runs[i];
	return n;
}

static void remove_figure(const char *dir, const char *name)
{
	static const char *const ext[] = {"gp", "dat", "pdf", "png"};
	for (size_t i = 0; i < 4; i++) {
		char *path = zs_asprintf("%s/%s.%s", dir, name, ext[i]);
		remove(path);
		free(path);
	}
}

/* Each uneven run's ranks as bars side by side, with its floor (the paper's
 * even split) as a mark: what stands above it on the worst rank is the
 * partition imbalance. DDP's buckets (the same on every rank, and no model
 * state: the floor has none) are left out of the bars, and the title says
 * how much they were. */
static int fig_ranks(const struct report_data *d, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	const struct report_run *r[RANK_RUNS];
	size_t n = uneven_runs(d, r), most = 0;
	const char *name = REPORT_FIGURE_RANKS;

	if (n == 0) {
		remove_figure(dir, REPORT_FIGURE_RANKS);
		return 0;
	}
	zs_buf_printf(&dat, "# resident bytes per param of every rank, DDP's buckets left out; one block per run\n"
	                    "# rank bytes/param floor\n");
	double buckets = 0;
	for (size_t j = 0; j < n; j++) {
		double bk = r[j]->resident_bd[REPORT_CAT_BUCKETS];
		buckets = bk > buckets ? bk : buckets;
		zs_buf_printf(&dat, "# %s N=%u unit=%s\n", zs_scheme_name(r[j]->scheme), r[j]->world,
		                  zs_unit_name(r[j]->unit));
		for (size_t k = 0; k < r[j]->nranks; k++)
			zs_buf_printf(&dat, "%zu %.9g %.9g\n", k, (r[j]->rank_resident[k] - bk) / d->params,
			                  r[j]->floor[REPORT_RESIDENT] / d->params);
		zs_buf_printf(&dat, "\n\n");
		most = r[j]->nranks > most ? r[j]->nranks : most;
	}
	char note[96] = "";
	if (buckets > 0)
		snprintf(note, sizeof note, "\\n(DDP's buckets, %.4g B/param on every rank, left out)",
		         buckets / d->params);
	header(&gp, d, name, "every rank's resident bytes per parameter, where ranks differ");
	zs_buf_printf(&gp,
		"set title \"Resident model state of every rank (%s, unit=%s): whole tensors on unequal ranks%s\"\n"
		"set xlabel 'rank'\nset ylabel 'resident bytes per parameter'\nset yrange [0:*]\n"
		"set xrange [-0.6:%zu.6]\nset xtics 1\nset style fill solid 0.5 border -1\n"
		"nruns = %zu; bw = 0.8 / nruns; set boxwidth bw\n",
		zs_scheme_name(r[0]->scheme), zs_unit_name(r[0]->unit),
		note, most - 1, n);
	zs_buf_printf(&plot, "plot \\\n");
	for (size_t j = 0; j < n; j++)
		zs_buf_printf(&plot,
			"  '%s.dat' index %zu using ($1 - 0.4 + bw*(%zu + 0.5)):2 with boxes ls %zu title 'N = %u measured', \\\n"
			"  '%s.dat' index %zu using ($1 - 0.4 + bw*(%zu + 0.5)):3 with points ls %zu pt 2 ps 2*pts title 'N = %u floor'%s\n",
			name, j, j, j + 2, r[j]->world, name, j, j, j + 2, r[j]->world, j + 1 < n ? ", \\" : "");
	return finish(dir, name, &dat, &gp, &plot, cause);
}

/* fig8-host: the offloaded runs of the figures' unit, one panel. */
static int fig_host(const struct report_data *d, const char *dir, char **cause)
{
	struct report_host_panel p = {.pt = zs_calloc(d->nruns + 1, sizeof *p.pt)};
	char shape[96] = "";
	for (size_t i = 0; i < d->nwidths; i++)
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%zu", i ? "-" : "", d->widths[i]);
	snprintf(p.title, sizeof p.title, "MLP %s, %s, %s --offload %s, unit=%s", shape, d->precision, d->framework,
	         d->offload_params ? "params" : "optimizer", zs_unit_name(main_unit(d)));
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].host.has && d->runs[i].unit == main_unit(d))
			p.pt[p.n++] = (struct report_host_point){d->runs[i].scheme, d->runs[i].world, &d->runs[i].host};
	int rc = report_figures_host(REPORT_FIGURE_HOST, &p, p.n > 0, dir, cause);
	free(p.pt);
	return rc;
}

/* fig10-allocator: where the measured runs carry the allocator's replay
 * (measure --allocator cuda --timeline), each run's ranks whose events
 * the file has (rank 0's; every rank's with --timeline-ranks all): each
 * one's step replayed through PyTorch's caching allocator
 * (util/cuda_alloc.h) from its live blocks on an empty cache, as
 * docs/formats.md says a timeline replays: allocated (each block as the
 * allocator rounds it) and reserved after each event, with fig5's phase
 * marks (the binding rank's); the cache between them is what the GPU
 * holds and no tensor uses. Ranks whose replays are equal are drawn
 * once, named together ("ranks 0-3"); the binding rank (the one whose
 * reserved peak is the highest, measured.json's allocator.rank and
 * diff.json's allocator_rank; rank 0 standing in where the file lacks its
 * events) first, in the scheme's style. The runs are fig5's that carry
 * the blocks. */
/* ", name N" or ", name given as one total" for a part of the fixed costs */
static void fixed_part(struct zs_buf *b, const char *name, double v)
{
	if (v < 0)
		zs_buf_printf(b, ", %s in the total given", name);
	else
		zs_buf_printf(b, ", %s %.0f", name, v);
}

/* fig10's bar at the right of a panel, beyond its ntl events: the
 * replay's reserved peak (top, bytes per parameter), then the device's
 * fixed costs on it, to scale, labelled with their bytes. */
static void fixed_bar(struct zs_buf *gp, const struct report_run *r, size_t ntl, double params, double top)
{
	double x0 = (double)ntl * 1.04, x1 = (double)ntl * 1.14, f = r->fixed_total / params;
	zs_buf_printf(gp,
		"set object 1 rect from %.9g, 0 to %.9g, %.9g fc rgb '#d9d9d9' fs solid 0.6 border lc rgb '#000000' front\n"
		"set object 2 rect from %.9g, %.9g to %.9g, %.9g fc rgb '#661100' fs solid 0.85 border lc rgb '#000000' "
		"front\n"
		"set label 3 \"fixed\\ncosts\\n%.1f MB\" at %.9g, %.9g center font small front\n",
		x0, x1, top, x0, top, x1, top + f, r->fixed_total / 1e6, (x0 + x1) / 2, top + f / 2);
}

/* One rank's replay: allocated and reserved, bytes per parameter, after
 * each of its first n events (n < ntl where a free named no live block:
 * what was replayed is drawn), its highest reserved, and the ranks whose
 * replays equal it (ranks, "0-3" or "0,2"; leader -1 for the first of
 * them, else the index of that first). */
struct alloc_curve {
	const struct report_trace *t;
	double *al, *re, top;
	size_t n;
	int leader;
	char ranks[96];
};

static void alloc_curve_replay(const struct report_trace *t, const struct cuda_alloc_opts *opts, double params,
                               struct alloc_curve *c)
{
	char *why = NULL;
	struct cuda_alloc *a = cuda_alloc_create(opts, 0, &why);
	struct cuda_alloc_stats st = {0};

	*c = (struct alloc_curve){.t = t, .al = zs_calloc(t->ntl + 1, sizeof *c->al),
	                          .re = zs_calloc(t->ntl + 1, sizeof *c->re), .leader = -1};
	for (size_t k = 0; a != NULL && k < t->nlive; k++)
		if (cuda_alloc_alloc(a, t->live_id[k], t->live_bytes[k], &why) != 0)
			break;
	for (size_t i = 0; a != NULL && i < t->ntl; i++) {
		int rc = t->op[i] > 0 ? cuda_alloc_alloc(a, t->id[i], t->bytes[i], &why)
		         : t->op[i] < 0 ? cuda_alloc_free(a, t->id[i], &why) : 0;
		if (rc != 0) /* a file whose frees name no live block: draw what was replayed */
			break;
		cuda_alloc_stats(a, &st);
		c->al[i] = (double)st.allocated / params;
		c->re[i] = (double)st.reserved / params;
		c->top = fmax(c->top, c->re[i]);
		c->n = i + 1;
	}
	if (a != NULL)
		cuda_alloc_destroy(a);
	free(why);
}

/* Whether two replays are the same curve: as many events, the same
 * phases, allocated and reserved equal after each. */
static int alloc_curve_equal(const struct alloc_curve *x, const struct alloc_curve *y)
{
	if (x->n != y->n || x->t->ntl != y->t->ntl)
		return 0;
	for (size_t i = 0; i < x->n; i++)
		if (x->al[i] != y->al[i] || x->re[i] != y->re[i] || x->t->phase[i] != y->t->phase[i])
			return 0;
	return 1;
}

/* The ranks of the replays led by c[lead] (c in rank order), as runs:
 * "0-3", "0,2,5-7"; cut with "..." where too many to name. */
static void alloc_curve_ranks(struct alloc_curve *c, size_t n, size_t lead)
{
	struct zs_buf b = {0};
	int have = 0;
	unsigned first = 0, last = 0;

	for (size_t k = lead; k <= n; k++) {
		int in = k < n && (k == lead || c[k].leader == (int)lead);
		if (in && have && c[k].t->rank == last + 1) {
			last = c[k].t->rank;
			continue;
		}
		if (have && (in || k == n)) { /* close the run first..last */
			zs_buf_printf(&b, "%s%u", b.len ? "," : "", first);
			if (last > first)
				zs_buf_printf(&b, "%s%u", last == first + 1 ? "," : "-", last);
		}
		if (in) {
			first = last = c[k].t->rank;
			have = 1;
		}
	}
	snprintf(c[lead].ranks, sizeof c[lead].ranks, "%s", b.s != NULL ? b.s : "");
	if (b.len >= sizeof c[lead].ranks)
		snprintf(c[lead].ranks + sizeof c[lead].ranks - 4, 4, "...");
	zs_buf_free(&b);
}

/* Other ranks' styles in fig10 (the binding rank's is the scheme's). */
#define ALLOC_NOTHER 4
static const char *const alloc_other_colour[ALLOC_NOTHER] = {"#56b4e9", "#e69f00", "#999999", "#cc79a7"};

static int fig_allocator(const struct report_data *d, const char *dir, char **cause)
{
	const struct report_run *all[ZS_NSCHEMES + 1], *r[ZS_NSCHEMES + 1];
	int n = 0, m = timeline_runs(d, all), block = 0;
	const char *name = REPORT_FIGURE_ALLOC;
	struct cuda_alloc_opts opts;
	char *why = NULL;

	cuda_alloc_opts_default(&opts);
	for (int j = 0; j < m; j++)
		if (all[j]->has_allocator && all[j]->ntrace > 0)
			r[n++] = all[j];
	if (n == 0 || !d->has_alloc || cuda_alloc_parse_conf(d->alloc_conf, &opts, &why) != 0) {
		free(why);
		remove_figure(dir, name);
		return 0;
	}
	struct zs_buf dat = {0}, gp = {0};
	zs_buf_printf(&dat, "# each run's ranks whose events the file has (rank 0's; every rank's with "
	              "--timeline-ranks all), each last step replayed through PyTorch %s's caching allocator "
	              "(--alloc-conf '%s') from its live blocks on an empty cache, N = %u; one block per run and "
	              "distinct replay, its ranks named (ranks with equal replays share a block), the binding rank's "
	              "first (the rank whose reserved peak is the highest, measured.json's allocator.rank).\n"
	              "# event allocated_bytes_per_param reserved_bytes_per_param phase (the last row repeats "
	              "the last level at x = the event count)\n",
	              CUDA_ALLOC_TORCH_RELEASE, d->alloc_conf, r[0]->world);
	header(&gp, d, name, "each rank's allocated and reserved bytes through the last step, phase by phase");
	zs_buf_printf(&gp,
		"# One panel per run, each over its own events and with its own y scale; the\n"
		"# binding rank's phase marks. Solid: allocated; dashed: reserved (the allocator's\n"
		"# segments). The binding rank in the scheme's style, other ranks' distinct replays after it.\n"
		"set style line 7 lc rgb '#999999' lw 1 dt 3       # phase separators\n");
	for (int k = 0; k < ALLOC_NOTHER; k++)
		zs_buf_printf(&gp, "set style line %d lc rgb '%s' lw 1.5   # other ranks' replays\n", 11 + k,
		              alloc_other_colour[k]);
	zs_buf_printf(&gp,
		"set key at graph 1.01, graph 1.0 left top Left reverse samplen 2 spacing 1.1 font ',8'\n"
		"unset grid\nset grid ytics front lc rgb '#d0d0d0'\nset yrange [0:*]\n");
	panels_open(&gp, name, n);
	zs_buf_printf(&gp, "  title \"Allocated and reserved of each run's ranks through one step, N = %u "
	              "(PyTorch %s's caching allocator replayed)\"\n", r[0]->world, CUDA_ALLOC_TORCH_RELEASE);
	int fixed = 0; /* a panel before set the y range for its bar */
	for (int j = 0; j < n; j++) {
		const int layer = r[j]->unit == ZS_UNIT_LAYER && main_unit(d) == ZS_UNIT_MODEL;
		const size_t nt = r[j]->ntrace;
		struct alloc_curve *c = zs_calloc(nt, sizeof *c);
		size_t bind = 0, ntl = 0, *order = zs_calloc(nt, sizeof *order), ng = 0;
		double top = 0;
		for (size_t k = 0; k < nt; k++) {
			alloc_curve_replay(&r[j]->trace[k], &opts, d->params, &c[k]);
			if (r[j]->trace[k].rank == r[j]->tl_rank)
				bind = k;
			for (size_t g = 0; g < k && c[k].leader < 0; g++)
				if (c[g].leader < 0 && alloc_curve_equal(&c[g], &c[k]))
					c[k].leader = (int)g;
		}
		if (c[bind].leader >= 0) /* the binding rank's group, led by its first rank */
			bind = (size_t)c[bind].leader;
		order[ng++] = bind;
		for (size_t k = 0; k < nt; k++)
			if (c[k].leader < 0 && k != bind)
				order[ng++] = k;
		for (size_t g = 0; g < ng; g++) {
			struct alloc_curve *e = &c[order[g]];
			alloc_curve_ranks(c, nt, order[g]);
			top = fmax(top, e->top);
			if (e->t->ntl > ntl)
				ntl = e->t->ntl;
			zs_buf_printf(&dat, "%s# %s unit=%s ranks=%s", block ? "\n\n" : "", zs_scheme_name(r[j]->scheme),
			              zs_unit_name(r[j]->unit), e->ranks);
			if (g == 0 && r[j]->tl_missing)
				zs_buf_printf(&dat, " (rank %u binds; its events are not in the file: measure --timeline-ranks "
				              "all)", r[j]->alloc_rank);
			else if (g == 0)
				zs_buf_printf(&dat, " binds");
			zs_buf_printf(&dat, "\n");
			for (size_t i = 0; i < e->n; i++)
				zs_buf_printf(&dat, "%zu %.9g %.9g %s\n", i, e->al[i], e->re[i],
				              i ? report_phase_name(e->t->phase[i]) : "start");
			zs_buf_printf(&dat, "%zu %.9g %.9g end\n", e->t->ntl, e->n ? e->al[e->n - 1] : 0.0,
			              e->n ? e->re[e->n - 1] : 0.0);
			if (r[j]->has_fixed) {
				zs_buf_printf(&dat, "# fixed costs outside the allocator (theory.json's allocator.device_overhead), "
				              "bytes: total %.0f", r[j]->fixed_total);
				fixed_part(&dat, "cuda_context", r[j]->fixed_context);
				fixed_part(&dat, "nccl", r[j]->fixed_nccl);
				zs_buf_printf(&dat, "\n");
			}
			block++;
		}
		if (r[j]->has_fixed) {
			zs_buf_printf(&gp, "# %s%s\nunset arrow\nunset label\nunset object\nset xrange [0:%.9g]\n",
			              scheme_title[r[j]->scheme], layer ? ", unit=layer" : "", (double)ntl * 1.18);
			fixed_bar(&gp, r[j], ntl, d->params, top);
			zs_buf_printf(&gp, "set yrange [0:%.9g]\n", (top + r[j]->fixed_total / d->params) * 1.05);
			ytics(&gp, top + r[j]->fixed_total / d->params);
			fixed = 1;
		} else {
			zs_buf_printf(&gp, "# %s%s\nunset arrow\nunset label\nunset object\nset xrange [0:%zu]\n%s",
			              scheme_title[r[j]->scheme], layer ? ", unit=layer" : "", ntl,
			              fixed ? "set yrange [0:*]\n" : "");
			ytics(&gp, top);
		}
		if (j == 0)
			zs_buf_printf(&gp, "set label 'bytes per parameter' "
			              "at screen 0.02, screen 0.5 center rotate by 90\n");
		if (j + 1 < n)
			zs_buf_printf(&gp, "unset xlabel\n");
		else
			zs_buf_printf(&gp, "set xlabel 'allocation events since the step began (each rank its own)'\n"
			              "set label \"Replayed from the blocks live as the step began, on an empty cache "
			              "(the run's own replay, in measured.json, carries the cache of earlier steps).\\n"
			              "Solid: allocated; dashed: reserved; above allocated, the allocator's cache. " TL_SHADES
			              " Equal replays drawn once.%s\" at screen 0.08, screen %s left font small\n",
			              r[j]->has_fixed ? "\\nBar at the right, to scale: the highest reserved (grey), then the "
			              "fixed costs outside the allocator (theory.json's device\\\\_overhead)." : "",
			              r[j]->has_fixed ? "0.05" : "0.035");
		phase_marks(&gp, c[bind].t->phase, c[bind].t->ntl);
		if (r[j]->tl_missing) /* rank 0 stands in, under the key */
			zs_buf_printf(&gp, "set label \"rank 0 (rank %u\\nbinds; measure\\n--timeline-ranks all\\nrecords its "
			              "events)\" at graph 1.01, graph 0.45 left font small\n", r[j]->alloc_rank);
		else if (ng > 1 + ALLOC_NOTHER)
			zs_buf_printf(&gp, "set label \"%zu more replays\\nnot named (in\\nthe .dat)\" at graph 1.01, "
			              "graph 0.1 left font small\n", ng - 1 - ALLOC_NOTHER);
		const int ls = layer ? 5 : (int)r[j]->scheme + 1;
		zs_buf_printf(&gp, "set key title \"%s%s\"\n"
		              "plot '%s.dat' index %d using 1:2 with steps ls %d dt 1 title \"%s %s%s\", \\\n"
		              "  '' index %d using 1:3 with steps ls %d dt 2 title 'reserved'",
		              scheme_title[r[j]->scheme], layer ? ", unit=layer" : "", name, block - (int)ng, ls,
		              strpbrk(c[bind].ranks, ",-") ? "ranks" : "rank", c[bind].ranks,
		              r[j]->tl_missing ? "" : ", binds", block - (int)ng, ls);
		for (size_t g = 1; g < ng; g++) {
			const struct alloc_curve *e = &c[order[g]];
			const int o = 11 + (int)((g - 1) % ALLOC_NOTHER), named = g <= ALLOC_NOTHER;
			zs_buf_printf(&gp, ", \\\n  '' index %d using 1:2 with steps ls %d dt 1 ", block - (int)ng + (int)g, o);
			if (named)
				zs_buf_printf(&gp, "title \"%s %s\"", strpbrk(e->ranks, ",-") ? "ranks" : "rank",
				              e->ranks);
			else
				zs_buf_printf(&gp, "notitle");
			zs_buf_printf(&gp, ", \\\n  '' index %d using 1:3 with steps ls %d dt 2 %s", block - (int)ng + (int)g,
			              o, named ? "title 'reserved'" : "notitle");
		}
		zs_buf_printf(&gp, "\n");
		for (size_t k = 0; k < nt; k++) {
			free(c[k].al);
			free(c[k].re);
		}
		free(c);
		free(order);
	}
	zs_buf_printf(&gp, "unset multiplot\n}\nset output\n");
	int rc = put(dir, name, "dat", &dat, cause);
	if (rc == 0)
		rc = put(dir, name, "gp", &gp, cause);
	zs_buf_free(&dat);
	zs_buf_free(&gp);
	return rc;
}

int report_figures_write(const struct report_data *d, const char *dir, char **cause)
{
	if (fig_resident(d, dir, cause) < 0 || fig_peak(d, dir, cause) < 0 ||
	    fig_comm(d, dir, cause) < 0 || fig_breakdown(d, dir, cause) < 0 ||
	    fig_timeline(d, dir, cause) < 0 || fig_ranks(d, dir, cause) < 0 || fig_host(d, dir, cause) < 0 ||
	    fig_allocator(d, dir, cause) < 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Figures of panels (fig7, fig8, fig9): drawn twice, to PDF then PNG, in
 * a gnuplot loop, since replot does not redraw a multiplot. */

static void multiplot_open(struct zs_buf *gp, const char *name, size_t rows)
{
	zs_buf_printf(gp,
		"do for [out = 1:2] {\n"
		"if (out == 1) {\n"
		"  set terminal pdfcairo enhanced size 6in,%s font 'Helvetica,9' linewidth 1.5\n"
		"  set output '%s.pdf'\n  pts = 0.6\n"
		"} else {\n"
		"  set terminal pngcairo enhanced size 1100,%s font 'Helvetica,12'\n"
		"  set output '%s.png'\n  pts = 1.2\n"
		"}\n", rows == 1 ? "3.3in" : "6in", name, rows == 1 ? "600" : "1100", name);
}

/* End the loop, write the .dat and the .gp, and free both buffers. */
static int multiplot_close(const char *dir, const char *name, struct zs_buf *dat, struct zs_buf *gp, char **cause)
{
	zs_buf_printf(gp, "unset multiplot\n}\nset output\n");
	int rc = put(dir, name, "dat", dat, cause);
	if (rc == 0)
		rc = put(dir, name, "gp", gp, cause);
	zs_buf_free(dat);
	zs_buf_free(gp);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* fig7-transformer: the peak by category at the largest N, one panel per
 * model (report_tfm.h): bars DP to ZeRO-3 of the shown unit, and ZeRO-3
 * with unit=model beside them when the file has it. */

static int tfm_bars(const struct report_tfm_model *m, const struct report_tfm_row **r)
{
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	int n = 0;

	for (int s = 0; s < ZS_NSCHEMES; s++)
		if ((r[n] = report_tfm_find(m, (enum zs_scheme)s, w, u)) != NULL)
			n++;
	if (u == ZS_UNIT_LAYER && (r[n] = report_tfm_find(m, ZS_ZERO3, w, ZS_UNIT_MODEL)) != NULL)
		n++;
	return n;
}

int report_figures_tfm(const struct report_tfm *t, const char *dir, char **cause)
{
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	const char *name = REPORT_FIGURE_TFM, *unit_name;
	double top = 0, scale;
	size_t j, gi;
	/* Up to two panels side by side; three or four in two rows, so that
	 * no panel is narrower than two of one row (titles and bar labels
	 * overlapped at four in a row). */
	const size_t rows = t->n > 2 ? 2 : 1, cols = (t->n + rows - 1) / rows;

	for (j = 0; j < t->n; j++)
		for (size_t i = 0; i < t->models[j].nrows; i++)
			top = fmax(top, t->models[j].rows[i].peak);
	scale = top < 1e6 ? 1e3 : top < 1e9 ? 1e6 : 1e9;
	unit_name = top < 1e6 ? "kB" : top < 1e9 ? "MB" : "GB";
	zs_buf_printf(&dat, "# peak bytes per rank by category, in %s (%.0f B), at the largest N: the\n"
	              "# measurement where the model has one, else theory.json's peak (Korthikanti's\n"
	              "# activations); the last column is theory.json's peak. One block per model.\n# bar",
	              unit_name, scale);
	for (gi = 0; gi < ngroups; gi++)
		zs_buf_printf(&dat, " \"%s\"", groups[gi].title);
	zs_buf_printf(&dat, " \"theory peak\"\n");
	for (j = 0; j < t->n; j++) {
		const struct report_tfm_model *m = &t->models[j];
		const struct report_tfm_row *r[ZS_NSCHEMES + 1];
		int n = tfm_bars(m, r);
		zs_buf_printf(&dat, "%s# %s, %s precision, N = %u, %s\n", j ? "\n\n" : "", m->name, m->precision,
		              report_tfm_world(m), m->measured_path != NULL ? "measured" : "theory");
		for (int k = 0; k < n; k++) {
			const double *bd = r[k]->run.has_measured ? r[k]->run.peak_bd : r[k]->peak_bd;
			zs_buf_printf(&dat, "\"%s%s\"", scheme_title[r[k]->run.scheme],
			              r[k]->run.unit != report_tfm_unit(m) ? "\\nunit=model" : "");
			for (gi = 0; gi < ngroups; gi++) {
				double v = 0;
				for (int c = 0; c < 4 && groups[gi].cats[c] >= 0; c++)
					v += bd[groups[gi].cats[c]];
				if (m->measured_path != NULL && !r[k]->run.has_measured)
					zs_buf_printf(&dat, " ?");
				else
					zs_buf_printf(&dat, " %.9g", v / scale);
			}
			zs_buf_printf(&dat, " %.9g\n", r[k]->peak / scale);
		}
	}
	zs_buf_printf(&gp,
		"# %s.gp, written by zerosim report: the transformers' peak per rank by category.\n"
		"# Reads %s.dat; run `gnuplot %s.gp` in this folder to rewrite %s.pdf and %s.png.\n"
		"set datafile missing '?'\nset encoding utf8\n"
		"set grid back lc rgb '#dddddd'\nset border 3\nset tics nomirror\n"
		"set style data histograms\nset style histogram rowstacked\n"
		"set boxwidth 0.6 relative\nset xtics scale 0\nset yrange [0:*]\n"
		"# Each category is filled with its colour (Okabe and Ito's colour-blind-safe\n"
		"# palette, as fig4), then drawn again at the same place with a pattern.\n",
		name, name, name, name, name);
	multiplot_open(&gp, name, rows);
	zs_buf_printf(&gp,
		"set multiplot layout %zu,%zu margins 0.09,0.80,%s spacing 0.06,%s \\\n"
		"  title 'The peak per rank by category'\n"
		"set ylabel '%s per rank at the peak (1 %s = %.0f B)'\n",
		rows, cols, rows == 1 ? "0.12,0.82" : "0.07,0.88", rows == 1 ? "0" : "0.13", unit_name, unit_name, scale);
	/* Five models or more: three or more panels a row, too narrow for the
	 * schemes' names side by side. */
	if (cols > 2)
		zs_buf_printf(&gp, "set xtics font ',7'\n");
	for (j = 0; j < t->n; j++) {
		const struct report_tfm_model *m = &t->models[j];
		const struct report_tfm_row *r[ZS_NSCHEMES + 1];
		int n = tfm_bars(m, r);
		char index[32];
		snprintf(index, sizeof index, " index %zu", j);
		char fw[64] = ""; /* a framework's panel is told from the paper's of the same model */
		if (strcmp(m->framework, "paper") != 0)
			snprintf(fw, sizeof fw, ", %s%s%s", m->framework, strcmp(m->offload, "none") != 0 ? " --offload " : "",
			         strcmp(m->offload, "none") != 0 ? m->offload : "");
		/* and a frozen or LoRA run's from the same model trained whole (the
		 * pattern and the targets stay out of gnuplot's quotes) */
		if (m->lora_r > 0)
			snprintf(fw + strlen(fw), sizeof fw - strlen(fw), ", LoRA r = %.0f", m->lora_r);
		else if (m->freeze[0])
			snprintf(fw + strlen(fw), sizeof fw - strlen(fw), ", frozen");
		zs_buf_printf(&gp, "set title \"%s (%s%s), N = %u%s%s\\nunit=%s unless marked\"\nset xrange [-0.6:%d]\n%s",
		              m->name, m->precision, fw, report_tfm_world(m), rows == 1 ? ", " : "\\n",
		              m->measured_path != NULL ? "measured" : "theory (Korthikanti), not measured",
		              zs_unit_name(report_tfm_unit(m)), n,
		              j + 1 == t->n ? "set key at screen 0.99, graph 1 right top Left reverse\n"
		                            : "unset key\n");
		stack_plot(&plot, name, index, j + 1 == t->n);
		if (report_tfm_measured(t)) /* the theory's peak as a mark over each bar */
			zs_buf_printf(&plot, ", \\\n  '%s.dat'%s using 0:%zu with points lc rgb '#000000' pt 3 ps 2.5*pts "
			              "lw 2 %s", name, index, ngroups + 2,
			              j + 1 == t->n ? "title \"theory's peak\\n(Korthikanti)\"" : "notitle");
		zs_buf_printf(&gp, "%s\n", zs_buf_str(&plot));
		if (rows == 1 ? j == 0 : j + 1 < t->n) /* the label on the first panel of each row */
			zs_buf_printf(&gp, rows > 1 && (j + 1) % cols == 0 ? "set ylabel '%s per rank at the peak (1 %s = %.0f B)'\n"
			                                                   : "unset ylabel\n", unit_name, unit_name, scale);
		zs_buf_free(&plot);
	}
	return multiplot_close(dir, name, &dat, &gp, cause);
}

/* ------------------------------------------------------------------------ */
/* Host bytes of offloaded runs (fig8-host, fig9-host-transformer): each
 * panel's schemes as the schedule's line of host bytes per rank at the
 * peak against N, every rank's measurement a point on it. */

/* The measured figure of rank k (the run's own where per_rank has none). */
static double host_rank(const struct report_host *h, unsigned k)
{
	return h->rank[REPORT_HOST_PEAK] != NULL ? h->rank[REPORT_HOST_PEAK][k] : h->v[REPORT_HOST_PEAK];
}

/* Panel j's world sizes, sorted and distinct, into w (p->n slots). */
static size_t host_worlds(const struct report_host_panel *p, unsigned *w)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n; i++) {
		size_t k = 0;
		while (k < n && w[k] < p->pt[i].world)
			k++;
		if (k < n && w[k] == p->pt[i].world)
			continue;
		memmove(w + k + 1, w + k, (n - k) * sizeof *w);
		w[k] = p->pt[i].world;
		n++;
	}
	return n;
}

int report_figures_host(const char *name, const struct report_host_panel *p, size_t np, const char *dir,
                        char **cause)
{
	struct zs_buf dat = {0}, gp = {0};
	double top = 0;
	size_t block = 0;

	if (np == 0) {
		remove_figure(dir, name);
		return 0;
	}
	for (size_t j = 0; j < np; j++)
		for (size_t i = 0; i < p[j].n; i++)
			top = fmax(top, fmax(p[j].pt[i].host->v[REPORT_HOST_PEAK], p[j].pt[i].host->sched[REPORT_HOST_PEAK]));
	const double scale = top < 1e6 ? 1e3 : top < 1e9 ? 1e6 : 1e9;
	const char *unit_name = top < 1e6 ? "kB" : top < 1e9 ? "MB" : "GB";
	const size_t rows = np > 2 ? 2 : 1, cols = (np + rows - 1) / rows;
	zs_buf_printf(&dat, "# host bytes per rank at the peak, in %s (%.0f B): one block per panel and scheme,\n"
	              "# one row per rank: N, the schedule's figure for that rank, the measured one\n",
	              unit_name, scale);
	zs_buf_printf(&gp,
		"# %s.gp, written by zerosim report: host bytes per rank of offloaded runs against N.\n"
		"# Reads %s.dat; run `gnuplot %s.gp` in this folder to rewrite %s.pdf and %s.png.\n",
		name, name, name, name, name);
	styles(&gp);
	zs_buf_printf(&gp,
		"set logscale x 2\nset xlabel 'world size N (ranks, log scale)'\nset yrange [0:*]\n");
	multiplot_open(&gp, name, rows);
	zs_buf_printf(&gp, "set pointsize pts\n"
		"set multiplot layout %zu,%zu title 'Host bytes per rank at the peak (--offload)'\n"
		"set ylabel '%s per rank (1 %s = %.0f B)'\n", rows, cols, unit_name, unit_name, scale);
	for (size_t j = 0; j < np; j++) {
		unsigned *w = zs_calloc(p[j].n + 1, sizeof *w);
		w[0] = 1;
		size_t nw = host_worlds(&p[j], w);
		nw += nw == 0; /* a panel has runs */
		struct zs_buf plot = {0};
		zs_buf_printf(&gp, "set title \"%s\" noenhanced\nset xrange [%g:%g]\nset xtics (", p[j].title, w[0] * 0.8,
		              w[nw - 1] * 1.25);
		for (size_t k = 0; k < nw; k++)
			zs_buf_printf(&gp, "%s%u", k ? ", " : "", w[k]);
		zs_buf_printf(&gp, ")\n");
		for (int s = 0; s < ZS_NSCHEMES; s++) {
			int any = 0;
			for (size_t i = 0; i < p[j].n; i++) {
				const struct report_host_point *q = &p[j].pt[i];
				if (q->scheme != (enum zs_scheme)s)
					continue;
				if (!any)
					zs_buf_printf(&dat, "%s# %s, %s\n", block ? "\n\n" : "", p[j].title, scheme_title[s]);
				any = 1;
				for (unsigned k = 0; k < q->world; k++) {
					double sc = q->host->sched_rank[REPORT_HOST_PEAK] != NULL
					                ? q->host->sched_rank[REPORT_HOST_PEAK][k] : q->host->sched[REPORT_HOST_PEAK];
					zs_buf_printf(&dat, "%u ", q->world);
					if (sc >= 0)
						zs_buf_printf(&dat, "%.9g", sc / scale);
					else
						zs_buf_printf(&dat, "?");
					zs_buf_printf(&dat, " %.9g\n", host_rank(q->host, k) / scale);
				}
			}
			if (!any)
				continue;
			zs_buf_printf(&plot, "%s  '%s.dat' index %zu using 1:2 with lines ls %d title '%s schedule', \\\n"
			              "  '%s.dat' index %zu using 1:3 with points ls %d title '%s measured (every rank)'",
			              plot.len ? ", \\\n" : "plot \\\n", name, block, s + 1, scheme_title[s], name, block,
			              s + 1, scheme_title[s]);
			block++;
		}
		zs_buf_printf(&gp, "%s\n", zs_buf_str(&plot));
		zs_buf_free(&plot);
		free(w);
	}
	return multiplot_close(dir, name, &dat, &gp, cause);
}

/* ------------------------------------------------------------------------ */
/* fig11-torch: each model's peak by what is alive there (report_torch.h),
 * the paper's bar and each plain PyTorch loop's, stacked by class; a
 * class no bar has is left out of the stack and the key. */

static const char *const torch_colours[RT_NCLASSES] = {
	[RT_PARAM] = "#0072B2", [RT_GRAD] = "#E69F00", [RT_ADAM] = "#009E73", [RT_ACT] = "#56B4E9",
	[RT_SCRATCH] = "#999999", [RT_BWD] = "#F0E442", [RT_LOSS] = "#D55E00", [RT_TIED] = "#000000",
	[RT_OPBYOP] = "#CC79A7", [RT_OPTIM] = "#882255", [RT_STEP] = "#44AA99", [RT_BUFFER] = "#DDCC77",
	[RT_INPUT] = "#332288", [RT_DROPOUT] = "#661100", [RT_DEQUANT] = "#117733", [RT_QCLONE] = "#AA4499",
};

int report_figures_torch(const struct report_torch *t, const char *dir, char **cause)
{
	const char *name = REPORT_FIGURE_TORCH;
	if (t->n == 0) {
		remove_figure(dir, name);
		return 0;
	}
	struct zs_buf dat = {0}, gp = {0}, plot = {0};
	int used[RT_NCLASSES] = { 0 };
	int tall = 1; /* the most lines of a label */
	size_t bars = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct report_torch_model *m = &t->models[i];
		for (int c = 0; c < RT_NCLASSES; c++) {
			used[c] |= m->paper_cls[c] > 0;
			for (size_t k = 0; k < m->nruns; k++)
				used[c] |= m->runs[k].cls[c] > 0;
		}
		bars += m->nruns + 1;
	}
	zs_buf_printf(&dat, "# the peak of one rank by what is alive there, kB (1000 B); a block per model\n# bar");
	for (int c = 0; c < RT_NCLASSES; c++)
		if (used[c])
			zs_buf_printf(&dat, " \"%s\"", report_torch_class_title[c]);
	zs_buf_printf(&dat, "\n");
	for (size_t i = 0; i < t->n; i++) {
		const struct report_torch_model *m = &t->models[i];
		zs_buf_printf(&dat, "%s# %s\n\"paper\"", i ? "\n\n" : "", m->name);
		for (int c = 0; c < RT_NCLASSES; c++)
			if (used[c])
				zs_buf_printf(&dat, " %.9g", m->paper_cls[c] / 1e3);
		zs_buf_printf(&dat, "\n");
		for (size_t k = 0; k < m->nruns; k++) {
			char l[96];
			/* a setting a line ("2.6\nLoRA r = 4\nnf4 dq"): the labels of
			 * many runs of one model stay apart */
			zs_buf_printf(&dat, "\"");
			int lines = 1;
			for (const char *q = report_torch_label(m, k, l, sizeof l); *q; q++)
				if (q[0] == ',' && q[1] == ' ') {
					zs_buf_printf(&dat, "\\n");
					q++;
					lines++;
				} else
					zs_buf_printf(&dat, "%c", *q);
			zs_buf_printf(&dat, "\"");
			tall = lines > tall ? lines : tall;
			for (int c = 0; c < RT_NCLASSES; c++)
				if (used[c])
					zs_buf_printf(&dat, " %.9g", m->runs[k].cls[c] / 1e3);
			zs_buf_printf(&dat, "\n");
		}
	}
	zs_buf_printf(&gp,
		"# %s.gp, written by zerosim report: the peak of one rank, the paper's schedule against\n"
		"# the plain PyTorch loop. Reads %s.dat; run `gnuplot %s.gp` in this folder to rewrite\n"
		"# %s.pdf and %s.png.\n", name, name, name, name, name);
	styles(&gp);
	zs_buf_printf(&gp,
		"set ylabel 'kB (1000 bytes) alive at the peak'\nset yrange [0:*]\n"
		"set title 'The peak by what is alive there: the paper, then PyTorch by release (fp32, one rank)'\n"
		"set style data histograms\nset style histogram rowstacked title offset 0,%g\n"
		"set boxwidth 0.7 relative\nset xtics scale 0%s\nset xrange [-0.6:%zu]\nset bmargin %d\n"
		"set key outside right top vertical Left reverse samplen 2 spacing 1.1\n",
		0.5 - tall, tall > 1 ? " font ',8'" : "", bars + t->n - 1, 3 + tall);
	for (size_t i = 0; i < t->n; i++) {
		zs_buf_printf(&plot, "%s newhistogram '%s' lt 1, \\\n", i ? ", \\\n" : "plot", t->models[i].name);
		int col = 2, first = 1;
		for (int c = 0; c < RT_NCLASSES; c++) {
			if (!used[c])
				continue;
			zs_buf_printf(&plot, "%s  '%s.dat' index %zu using %d%s ", first ? "" : ", \\\n", name, i, col,
			              first ? ":xtic(1)" : "");
			if (i == 0) {
				zs_buf_printf(&plot, "title '");
				for (const char *q = report_torch_class_title[c]; *q; q++) /* a quote is doubled */
					zs_buf_printf(&plot, *q == '\'' ? "''" : "%c", *q);
				zs_buf_printf(&plot, "'");
			} else
				zs_buf_printf(&plot, "notitle");
			zs_buf_printf(&plot, " lc rgb '%s' fs solid 0.85 border lc rgb '#000000'", torch_colours[c]);
			col++;
			first = 0;
		}
	}
	return finish(dir, name, &dat, &gp, &plot, cause);
}
