/*
 * report_text — diff.json, flags.txt and the LaTeX pieces (table.tex,
 * findings.tex, flags.tex). Formats are in the header. Numbers in text are
 * bytes per parameter (bytes / Ψ) with two decimals, as in the ZeRO paper.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_figures.h"
#include "report/report_host.h"
#include "report/report_overhead.h"
#include "report/report_text.h"
#include "util/util.h"

static const char *const scheme_title[ZS_NSCHEMES] = {"DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

static const struct report_point *point_of(const struct report_data *d,
                                           const struct report_point *pts,
                                           const struct report_run *r, enum report_metric m)
{
	return r == NULL ? NULL : &pts[(size_t)(r - d->runs) * REPORT_NMETRICS + m];
}

/* ------------------------------------------------------------------------ */
/* diff.json */

static cJSON *config_json(const struct report_data *d)
{
	cJSON *c = cJSON_CreateObject(), *layers = cJSON_AddArrayToObject(c, "layers"), *bpp;
	size_t i;

	for (i = 0; i < d->nwidths; i++)
		cJSON_AddItemToArray(layers, cJSON_CreateNumber((double)d->widths[i]));
	zs_json_add_number(c, "batch", d->batch);
	cJSON_AddStringToObject(c, "precision", d->precision);
	cJSON_AddStringToObject(c, "optimizer", d->optimizer);
	bpp = cJSON_AddObjectToObject(c, "bytes_per_param");
	zs_json_add_number(bpp, "param", d->p);
	zs_json_add_number(bpp, "grad", d->g);
	zs_json_add_number(bpp, "optimizer", d->k);
	return c;
}

/* What the GPU reserves, beside a run's peak point where the run replayed
 * the allocator (measure --allocator cuda), its rank with the highest
 * reserved peak: a metric of its own, not a cause (the causes add up to
 * measured - floor, the tracked bytes, and reserved bytes are outside that
 * sum). fragmentation_bytes is the free space reserved when the allocated
 * peak is first reached: reserved_at_allocated_peak - allocated_peak
 * (flags.txt's allocator: line prints the same figure); null where the
 * file has no reserved_at_allocated_peak_bytes. */
static void reserved_json(cJSON *o, const struct report_data *d, const struct report_run *r)
{
	zs_json_add_number(o, "reserved_bytes", r->alloc_reserved_peak);
	zs_json_add_number(o, "reserved_bytes_per_param", r->alloc_reserved_peak / d->params);
	zs_json_add_number(o, "allocated_peak_bytes", r->alloc_allocated_peak);
	if (r->alloc_reserved_at_allocated >= 0) {
		zs_json_add_number(o, "reserved_at_allocated_peak_bytes", r->alloc_reserved_at_allocated);
		zs_json_add_number(o, "fragmentation_bytes", report_alloc_fragmentation(r));
	} else {
		cJSON_AddNullToObject(o, "reserved_at_allocated_peak_bytes");
		cJSON_AddNullToObject(o, "fragmentation_bytes");
	}
	if (r->alloc_segments >= 0)
		zs_json_add_number(o, "segments", r->alloc_segments);
	else
		cJSON_AddNullToObject(o, "segments");
	zs_json_add_number(o, "allocator_rank", r->alloc_rank);
}

double report_alloc_fragmentation(const struct report_run *r)
{
	return r->alloc_reserved_at_allocated - r->alloc_allocated_peak;
}

cJSON *report_point_json(const struct report_data *d, const struct report_point *pt)
{
	cJSON *o = cJSON_CreateObject(), *causes;
	int c;

	cJSON_AddStringToObject(o, "scheme", zs_scheme_name(pt->run->scheme));
	zs_json_add_number(o, "world", pt->run->world);
	cJSON_AddStringToObject(o, "unit", zs_unit_name(pt->run->unit));
	cJSON_AddStringToObject(o, "metric", report_metric_name(pt->metric));
	zs_json_add_number(o, "floor_bytes", pt->floor);
	zs_json_add_number(o, "schedule_bytes", pt->schedule);
	zs_json_add_number(o, "measured_bytes", pt->measured);
	zs_json_add_number(o, "departure_bytes", pt->departure);
	zs_json_add_number(o, "departure_per_param", pt->departure / d->params);
	if (pt->floor != 0)
		zs_json_add_number(o, "departure_relative", pt->departure / pt->floor);
	else if (pt->status == REPORT_NONE)
		zs_json_add_number(o, "departure_relative", 0);
	else
		cJSON_AddNullToObject(o, "departure_relative");
	causes = cJSON_AddObjectToObject(o, "causes");
	for (c = 0; c < REPORT_NCAUSES; c++) {
		const struct report_cause_info *ci = report_cause_info((enum report_cause)c);
		if (strcmp(d->framework, "paper") != 0 || !ci->framework) /* the paper's five as before */
			zs_json_add_number(causes, ci->key, pt->cause[c]);
	}
	cJSON_AddStringToObject(o, "status", report_status_name(pt->status));
	cJSON_AddBoolToObject(o, "unexplained", pt->unexplained);
	if (pt->metric == REPORT_PEAK && pt->run->has_alloc_summary)
		reserved_json(o, d, pt->run);
	return o;
}

cJSON *report_diff_json(const struct report_data *d, const struct report_point *pts, size_t npts,
                        const struct report_finding *f)
{
	cJSON *root = cJSON_CreateObject(), *arr, *sum, *o;
	double flagged = 0, baseline = 0, unexplained = 0;
	size_t i;

	cJSON_AddStringToObject(root, "format", REPORT_DIFF_FORMAT);
	cJSON_AddStringToObject(root, "generator", PACKAGE_STRING);
	zs_json_add_number(root, "params", d->params);
	cJSON_AddItemToObject(root, "config", config_json(d));
	arr = cJSON_AddArrayToObject(root, "baseline_causes");
	cJSON_AddItemToArray(arr, cJSON_CreateString(report_cause_name(REPORT_ACTIVATIONS)));
	arr = cJSON_AddArrayToObject(root, "points");
	for (i = 0; i < npts; i++) {
		cJSON_AddItemToArray(arr, report_point_json(d, &pts[i]));
		flagged += pts[i].status == REPORT_FLAGGED;
		baseline += pts[i].status == REPORT_BASELINE;
		unexplained += pts[i].unexplained;
	}
	sum = cJSON_AddObjectToObject(root, "summary");
	zs_json_add_number(sum, "points", (double)npts);
	zs_json_add_number(sum, "flagged", flagged);
	zs_json_add_number(sum, "baseline", baseline);
	zs_json_add_number(sum, "unexplained", unexplained);
	cJSON_AddItemToObject(root, "process_overhead", report_overhead_json(d));
	cJSON_AddItemToObject(root, "host", report_host_json(d));
	arr = cJSON_AddArrayToObject(root, "findings");
	for (i = 0; i < REPORT_NFINDINGS; i++) {
		if (!f[i].shown)
			continue;
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "key", f[i].key);
		cJSON_AddStringToObject(o, "claim", f[i].claim);
		cJSON_AddStringToObject(o, "verdict", report_verdict_name(f[i].verdict));
		cJSON_AddStringToObject(o, "evidence", f[i].evidence);
		cJSON_AddItemToArray(arr, o);
	}
	return root;
}

/* ------------------------------------------------------------------------ */
/* flags.txt */

/* A byte count: whole bytes as integers, fractional floors' shares with
 * two decimals. */
static void bytes(struct zs_buf *b, double v, int sign)
{
	if (fabs(v - round(v)) < 1e-6)
		zs_buf_printf(b, sign ? "%+.0f B" : "%.0f B", round(v));
	else
		zs_buf_printf(b, sign ? "%+.2f B" : "%.2f B", v);
}

void report_point_line(const struct report_data *d, const struct report_point *pt,
                       struct zs_buf *b)
{
	const struct report_run *r = pt->run;
	const char *sep = " = ";
	int c;

	if (pt->unexplained) {
		zs_buf_printf(b, "UNEXPLAINED %s N=%u unit=%s %s: measured %.0f B, schedule model %.0f B "
		              "(%+.0f B)", zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit),
		              report_metric_name(pt->metric), pt->measured, pt->schedule,
		              pt->measured - pt->schedule);
		if (pt->breakdown_cat >= 0)
			zs_buf_printf(b, "; first differing category %s%s: measured %.0f B, schedule "
			              "model %.0f B", report_cat_name((enum report_cat)pt->breakdown_cat),
			              pt->breakdown_cat == REPORT_CAT_UNKNOWN ?
			              " (categories docs/schedule.md does not name)" : "",
			              pt->breakdown_measured, pt->breakdown_schedule);
		zs_buf_printf(b, ": the engine or the theory departs from docs/schedule.md");
		return;
	}
	zs_buf_printf(b, "%s %s N=%u unit=%s %s: %+.4g B/param from the floor (",
	              pt->status == REPORT_FLAGGED ? "FLAG" : "baseline", zs_scheme_name(r->scheme),
	              r->world, zs_unit_name(r->unit), report_metric_name(pt->metric),
	              pt->departure / d->params);
	bytes(b, pt->departure, 1);
	if (pt->floor != 0)
		zs_buf_printf(b, ", %+.3g%%", 100 * pt->departure / pt->floor);
	zs_buf_printf(b, ")");
	for (c = 0; c < REPORT_NCAUSES; c++)
		if (pt->cause[c] != 0) {
			zs_buf_printf(b, "%s%s ", sep, report_cause_name((enum report_cause)c));
			bytes(b, pt->cause[c], 0);
			sep = " + ";
		}
}

void report_allocator_text(const struct report_data *d, struct zs_buf *b)
{
	int header = 0;
	for (size_t i = 0; i < d->nruns; i++) {
		const struct report_run *r = &d->runs[i];
		if (!r->has_alloc_summary)
			continue;
		if (!header)
			zs_buf_printf(b, "# What the GPU would reserve (measure --allocator cuda: each rank's blocks "
			              "through PyTorch 2.6.0's caching allocator), the rank that reserves the most:\n");
		header = 1;
		zs_buf_printf(b, "allocator: %s N=%u unit=%s rank %u: reserved peak ", zs_scheme_name(r->scheme),
		              r->world, zs_unit_name(r->unit), r->alloc_rank);
		bytes(b, r->alloc_reserved_peak, 0);
		zs_buf_printf(b, " (");
		bytes(b, r->alloc_reserved_peak - r->measured[REPORT_PEAK], 1);
		zs_buf_printf(b, " from the tracked peak) = allocated ");
		bytes(b, r->alloc_at_reserved, 0);
		zs_buf_printf(b, " + cached free ");
		bytes(b, r->alloc_frag, 0);
		zs_buf_printf(b, " (%.3g%% of reserved", 100 * r->alloc_frag_ratio);
		if (r->alloc_segments >= 0)
			zs_buf_printf(b, ": free space cached in the %.0f segment%s cudaMalloc reserved, where the reserved "
			              "peak is first reached", r->alloc_segments, r->alloc_segments == 1 ? "" : "s");
		zs_buf_printf(b, "); allocated peak ");
		bytes(b, r->alloc_allocated_peak, 0);
		zs_buf_printf(b, " (the tracked blocks as the allocator rounds them)");
		if (r->alloc_reserved_at_allocated >= 0) {
			zs_buf_printf(b, ", with ");
			bytes(b, r->alloc_reserved_at_allocated, 0);
			zs_buf_printf(b, " reserved then: fragmentation ");
			bytes(b, report_alloc_fragmentation(r), 0);
			zs_buf_printf(b, " at the allocated peak (diff.json's fragmentation_bytes)");
		}
		/* CUDACachingAllocator.cpp (2.6.0): a segment is at least kSmallBuffer,
		 * 2 MiB, or kLargeBuffer, 20 MiB: blocks that fit in one large
		 * segment leave most of what is reserved free however they lie */
		if (r->alloc_allocated_peak < 20.0 * 1024 * 1024)
			zs_buf_printf(b, "; the blocks' peak is under one 20 MiB segment, so what is reserved above them is "
			              "the segments' minimum size (2 MiB small, 20 MiB large), not fragmentation of a "
			              "long-running cache");
		zs_buf_printf(b, "\n");
	}
}

void report_flags_text(const struct report_data *d, const struct report_point *pts, size_t npts,
                       struct zs_buf *b)
{
	size_t i, flagged = 0, baseline = 0, unexplained = 0;

	for (i = 0; i < npts; i++) {
		flagged += pts[i].status == REPORT_FLAGGED;
		baseline += pts[i].status == REPORT_BASELINE;
		unexplained += (size_t)pts[i].unexplained;
	}
	zs_buf_printf(b, "# zerosim report: %zu points (%zu runs x resident, peak, comm); "
	              "%zu flagged, %zu unexplained.\n"
	              "# A flag is a departure from the paper floor with a cause other than "
	              "activations and scratch;\n"
	              "# %zu points depart by activations and scratch alone (every scheme "
	              "holds them; listed in diff.json, not flagged).\n",
	              npts, d->nruns, flagged, unexplained, baseline);
	for (i = 0; i < npts; i++)
		if (pts[i].unexplained) {
			report_point_line(d, &pts[i], b);
			zs_buf_printf(b, "\n");
		}
	for (i = 0; i < npts; i++)
		if (!pts[i].unexplained && pts[i].status == REPORT_FLAGGED) {
			report_point_line(d, &pts[i], b);
			zs_buf_printf(b, "\n");
		}
	if (flagged == 0 && unexplained == 0)
		zs_buf_printf(b, "nothing flagged\n");
}

/* ------------------------------------------------------------------------ */
/* LaTeX */

/* The marks of a point's cell, recorded in `used` for the legend. */
static void cell(const struct report_data *d, const struct report_point *pt, int *used,
                 struct zs_buf *b)
{
	const char *sep = "";
	int c;

	if (pt == NULL) {
		zs_buf_printf(b, " & --");
		return;
	}
	zs_buf_printf(b, " & %.2f", pt->measured / d->params);
	if (pt->status == REPORT_NONE && !pt->unexplained)
		return;
	zs_buf_printf(b, "\\textsuperscript{");
	for (c = 0; c < REPORT_NCAUSES; c++)
		if (pt->cause[c] != 0) {
			zs_buf_printf(b, "%s%c", sep, report_cause_mark((enum report_cause)c));
			used[c] = 1;
			sep = ",";
		}
	if (pt->unexplained) {
		zs_buf_printf(b, "%su", sep);
		used[REPORT_NCAUSES] = 1;
	}
	zs_buf_printf(b, "}");
}

void report_causes_tex(const struct report_data *d, struct zs_buf *b)
{
	int paper = strcmp(d->framework, "paper") == 0;

	zs_buf_printf(b, "\\begin{itemize}\\setlength{\\itemsep}{0pt}\\setlength{\\parskip}{0pt}\n");
	for (int c = 0; c < REPORT_NCAUSES; c++) {
		const struct report_cause_info *ci = report_cause_info((enum report_cause)c);
		if (!paper || !ci->framework)
			zs_buf_printf(b, "\\item[\\textsuperscript{%c}] %s.\n", ci->mark, ci->rule);
	}
	zs_buf_printf(b, "\\end{itemize}\n");
}

static void legend(const int *used, struct zs_buf *b)
{
	const char *sep = ": ";
	int c, any = 0;

	for (c = 0; c <= REPORT_NCAUSES; c++)
		any |= used[c];
	if (!any) {
		zs_buf_printf(b, "\n\\smallskip\n\\footnotesize No cell departs from the paper floor");
	} else {
		zs_buf_printf(b, "\n\\smallskip\n\\footnotesize Marked cells depart from the paper "
		              "floor; the marks give the cause");
	}
	for (c = 0; c <= REPORT_NCAUSES; c++)
		if (used[c]) {
			zs_buf_printf(b, "%s\\textsuperscript{%c}~%s", sep, c == REPORT_NCAUSES ? 'u' :
			              report_cause_mark((enum report_cause)c), c == REPORT_NCAUSES ?
			              "UNEXPLAINED: the measurement differs from the schedule model" :
			              report_cause_info((enum report_cause)c)->legend);
			sep = "; ";
		}
	zs_buf_printf(b, ".\n");
}

static void memory_table(const struct report_data *d, const struct report_point *pts,
                         enum zs_unit u, struct zs_buf *b)
{
	const unsigned *w;
	size_t n = report_data_worlds(d, u, &w), i;
	int used[REPORT_NCAUSES + 1] = {0}, s;

	zs_buf_printf(b, "\\begin{table}[htbp]\n\\centering\n\\small\n"
	              "\\caption{Measured bytes per parameter per rank, unit=%s: resident "
	              "between steps and peak during a step.}\n\\label{tab:memory-%s}\n"
	              "\\begin{tabular}{r rr rr rr rr}\n\\toprule\n",
	              zs_unit_name(u), zs_unit_name(u));
	for (s = 0; s < ZS_NSCHEMES; s++)
		zs_buf_printf(b, " & \\multicolumn{2}{c}{%s}", scheme_title[s]);
	zs_buf_printf(b, " \\\\\n\\cmidrule(lr){2-3} \\cmidrule(lr){4-5} \\cmidrule(lr){6-7} "
	              "\\cmidrule(lr){8-9}\n$N$");
	for (s = 0; s < ZS_NSCHEMES; s++)
		zs_buf_printf(b, " & resident & peak");
	zs_buf_printf(b, " \\\\\n\\midrule\n");
	for (i = 0; i < n; i++) {
		zs_buf_printf(b, "%u", w[i]);
		for (s = 0; s < ZS_NSCHEMES; s++) {
			const struct report_run *r = report_data_find(d, (enum zs_scheme)s, w[i], u);
			cell(d, point_of(d, pts, r, REPORT_RESIDENT), used, b);
			cell(d, point_of(d, pts, r, REPORT_PEAK), used, b);
		}
		zs_buf_printf(b, " \\\\\n");
	}
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n");
	legend(used, b);
	zs_buf_printf(b, "\\end{table}\n\n");
}

static void comm_table(const struct report_data *d, const struct report_point *pts,
                       struct zs_buf *b)
{
	unsigned *w = zs_calloc(d->nruns + 1, sizeof *w);
	const unsigned *wu;
	size_t n = 0, nu, i, j;
	int used[REPORT_NCAUSES + 1] = {0}, s, u, nunits = 0;
	enum zs_unit units[ZS_NUNITS];

	/* Rows: the union of the units' world sizes. */
	for (u = 0; u < ZS_NUNITS; u++) {
		if (!report_data_has_unit(d, (enum zs_unit)u))
			continue;
		units[nunits++] = (enum zs_unit)u;
		nu = report_data_worlds(d, (enum zs_unit)u, &wu);
		for (i = 0; i < nu; i++) {
			for (j = 0; j < n && w[j] < wu[i]; j++)
				;
			if (j < n && w[j] == wu[i])
				continue;
			memmove(&w[j + 1], &w[j], (n - j) * sizeof *w);
			w[j] = wu[i];
			n++;
		}
	}
	zs_buf_printf(b, "\\begin{table}[htbp]\n\\centering\n\\small\n"
	              "\\caption{Measured bytes sent per rank per step, per parameter.}\n"
	              "\\label{tab:comm}\n\\begin{tabular}{r");
	for (u = 0; u < nunits; u++)
		zs_buf_printf(b, " rrrr");
	zs_buf_printf(b, "}\n\\toprule\n");
	for (u = 0; u < nunits; u++)
		zs_buf_printf(b, " & \\multicolumn{4}{c}{unit=%s}", zs_unit_name(units[u]));
	zs_buf_printf(b, " \\\\\n");
	for (u = 0; u < nunits; u++)
		zs_buf_printf(b, "%s\\cmidrule(lr){%d-%d}", u ? " " : "", 2 + 4 * u, 5 + 4 * u);
	zs_buf_printf(b, "\n$N$");
	for (u = 0; u < nunits; u++)
		for (s = 0; s < ZS_NSCHEMES; s++)
			zs_buf_printf(b, " & %s", scheme_title[s]);
	zs_buf_printf(b, " \\\\\n\\midrule\n");
	for (i = 0; i < n; i++) {
		zs_buf_printf(b, "%u", w[i]);
		for (u = 0; u < nunits; u++)
			for (s = 0; s < ZS_NSCHEMES; s++) {
				const struct report_run *r = report_data_find(d, (enum zs_scheme)s, w[i], units[u]);
				cell(d, point_of(d, pts, r, REPORT_COMM), used, b);
			}
		zs_buf_printf(b, " \\\\\n");
	}
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n");
	legend(used, b);
	zs_buf_printf(b, "\\end{table}\n");
	free(w);
}

void report_table_tex(const struct report_data *d, const struct report_point *pts, size_t npts,
                      struct zs_buf *b)
{
	int u;

	(void)npts;
	zs_buf_printf(b, "%% table.tex, written by zerosim report: measured bytes per parameter\n"
	              "%% per rank (bytes / %.0f params). Needs in the preamble:\n"
	              "%%   \\usepackage{booktabs}\n\n", d->params);
	for (u = 0; u < ZS_NUNITS; u++)
		if (report_data_has_unit(d, (enum zs_unit)u))
			memory_table(d, pts, (enum zs_unit)u, b);
	comm_table(d, pts, b);
}

void report_findings_tex(const struct report_data *d, const struct report_finding *f,
                         struct zs_buf *b)
{
	const unsigned *w;
	size_t i, n;
	int u;

	zs_buf_printf(b, "%% findings.tex, written by zerosim report from the data.\n"
	              "Model: layers ");
	for (i = 0; i < d->nwidths; i++)
		zs_buf_printf(b, "%s%zu", i ? "," : "", d->widths[i]);
	zs_buf_printf(b, ", $\\Psi = %.0f$ parameters; precision %s, optimizer %s "
	              "($p = %g$, $g = %g$, $k = %g$ bytes per parameter); batch %.0f per rank.",
	              d->params, d->precision, d->optimizer, d->p, d->g, d->k, d->batch);
	for (u = 0; u < ZS_NUNITS; u++) {
		if ((n = report_data_worlds(d, (enum zs_unit)u, &w)) == 0)
			continue;
		zs_buf_printf(b, " Unit=%s measured at $N =", zs_unit_name((enum zs_unit)u));
		for (i = 0; i < n; i++)
			zs_buf_printf(b, "%s%u", i ? ", " : " ", w[i]);
		zs_buf_printf(b, "$.");
	}
	zs_buf_printf(b, "\n\n\\begin{itemize}\n");
	for (i = 0; i < REPORT_NFINDINGS; i++) {
		if (!f[i].shown)
			continue;
		zs_buf_printf(b, "\\item \\textbf{%s.} ",
		              f[i].verdict == REPORT_HOLDS ? "Holds" :
		              f[i].verdict == REPORT_FAILS ? "Does not hold" : "Not tested by this sweep");
		report_buf_tex(b, f[i].claim);
		zs_buf_printf(b, " \\emph{");
		report_buf_tex(b, f[i].evidence);
		zs_buf_printf(b, ".}\n");
	}
	zs_buf_printf(b, "\\end{itemize}\n");
}

/* Whether pt is a flagged, explained point of (u, s, m) whose cause c (or,
 * with c < 0, any cause) is present. */
static int in_group(const struct report_point *pt, enum zs_unit u, enum zs_scheme s,
                    enum report_metric m, int c)
{
	return pt->run->unit == u && pt->run->scheme == s && pt->metric == m &&
	       pt->status == REPORT_FLAGGED && !pt->unexplained && (c < 0 || pt->cause[c] != 0);
}

/* The flagged points of one (unit, scheme, metric) as one item: each cause
 * with the N where it appears and its largest size, so the PDF stays
 * short; flags.txt lists every point. */
static void flags_group(const struct report_data *d, const struct report_point *pts, size_t npts,
                        enum zs_unit u, enum zs_scheme s, enum report_metric m,
                        struct zs_buf *b)
{
	const char *sep = "";
	size_t i, k;
	int c;

	for (i = 0; i < npts && !in_group(&pts[i], u, s, m, -1); i++)
		;
	if (i == npts)
		return;
	zs_buf_printf(b, "\\item %s %s, unit=%s:", scheme_title[s], report_metric_name(m),
	              zs_unit_name(u));
	for (c = 0; c < REPORT_NCAUSES; c++) {
		double most = 0;
		for (i = 0, k = 0; i < npts; i++) {
			if (!in_group(&pts[i], u, s, m, c))
				continue;
			if (k++ == 0)
				zs_buf_printf(b, "%s %s at $N =", sep, report_cause_name((enum report_cause)c));
			zs_buf_printf(b, "%s %u", k > 1 ? "," : "", pts[i].run->world);
			most = fmax(most, fabs(pts[i].cause[c]));
		}
		if (k > 0) {
			zs_buf_printf(b, "$ (up to %.3g B/param)", most / d->params);
			sep = ";";
		}
	}
	zs_buf_printf(b, ".\n");
}

void report_flags_tex(const struct report_data *d, const struct report_point *pts, size_t npts,
                      struct zs_buf *b)
{
	size_t i, flagged = 0, unexplained = 0;
	int u, s, m;

	zs_buf_printf(b, "%% flags.tex, written by zerosim report (flags.txt lists every point).\n");
	for (i = 0; i < npts; i++) {
		flagged += pts[i].status == REPORT_FLAGGED && !pts[i].unexplained;
		unexplained += (size_t)pts[i].unexplained;
	}
	if (unexplained > 0) {
		zs_buf_printf(b, "\\paragraph{%zu points are UNEXPLAINED} (the measurement differs "
		              "from the schedule model: a bug in the engine or the theory).\n"
		              "\\begin{itemize}\\footnotesize\n", unexplained);
		for (i = 0; i < npts; i++) {
			struct zs_buf line = {0};
			if (!pts[i].unexplained)
				continue;
			report_point_line(d, &pts[i], &line);
			zs_buf_printf(b, "\\item ");
			report_buf_tex(b, zs_buf_str(&line));
			zs_buf_printf(b, "\n");
			zs_buf_free(&line);
		}
		zs_buf_printf(b, "\\end{itemize}\n");
	}
	if (flagged == 0) {
		zs_buf_printf(b, "No %spoint departs from its floor by more than activations and "
		              "scratch.\n", unexplained ? "other " : "");
		return;
	}
	zs_buf_printf(b, "%zu points are flagged, grouped here by scheme and metric.\n"
	              "\\begin{itemize}\\small\n", flagged);
	for (u = 0; u < ZS_NUNITS; u++)
		for (s = 0; s < ZS_NSCHEMES; s++)
			for (m = 0; m < REPORT_NMETRICS; m++)
				flags_group(d, pts, npts, (enum zs_unit)u, (enum zs_scheme)s,
				            (enum report_metric)m, b);
	zs_buf_printf(b, "\\end{itemize}\n");
}

/* ------------------------------------------------------------------------ */
/* The MLP's offloaded runs */

static int pick(const void *ctx, size_t i)
{
	return ((const struct report_data *)ctx)->runs[i].host.has;
}

static void run_label(const struct report_run *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s N=%u unit=%s", zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit));
}

/* "zero1 N=2 unit=model: resident 297472 B (schedule 297472), ..." */
static void line(const void *ctx, size_t i, struct zs_buf *b)
{
	const struct report_run *r = &((const struct report_data *)ctx)->runs[i];
	char lab[96];
	run_label(r, lab, sizeof lab);
	report_host_line(lab, &r->host, b);
}

static struct report_items items(const struct report_data *d)
{
	return (struct report_items){d, d->nruns, pick, line};
}

size_t report_host_unexplained(const struct report_data *d)
{
	const struct report_items it = items(d);
	size_t n = 0;
	for (size_t i = 0; i < d->nruns; i++) {
		char lab[96];
		run_label(&d->runs[i], lab, sizeof lab);
		n += (size_t)report_host_check(lab, &d->runs[i].host);
	}
	if (report_items_count(&it) > 0)
		printf("zerosim report: host bytes of %zu offloaded runs, %zu unexplained\n", report_items_count(&it), n);
	return n;
}

void report_host_text(const struct report_data *d, struct zs_buf *b)
{
	const struct report_items it = items(d);
	if (report_items_count(&it) == 0)
		return;
	zs_buf_printf(b, "# host bytes (--offload), per rank (per node: its ranks'), measured beside the schedule "
	                  "model's, every rank's too; the other figures are the device's\n");
	report_items(b, 0, "host", &it);
}

void report_host_tex(const struct report_data *d, struct zs_buf *b)
{
	const struct report_items it = items(d);
	if (report_items_count(&it) == 0)
		return;
	zs_buf_printf(b, "\\paragraph{Host memory (\\texttt{--offload}).} The tables and figures above are the "
	                  "device's. What %zu offloaded runs hold on the host, per rank between steps and at its "
	                  "peak, and a node's ranks between steps, measured beside the schedule model's; every "
	                  "rank's figures are checked against the schedule's too. ", report_items_count(&it));
	struct report_host_run *runs = zs_calloc(d->nruns + 1, sizeof *runs);
	size_t n = 0;
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].host.has)
			runs[n++] = (struct report_host_run){zs_scheme_name(d->runs[i].scheme), d->runs[i].world,
			                                     d->runs[i].unit, &d->runs[i].host};
	report_host_table(b, runs, n);
	free(runs);
	zs_buf_printf(b, "\\IfFileExists{figures/" REPORT_FIGURE_HOST ".pdf}{%%\n"
	                 "\\begin{figure}[!htbp]\n\\centering\n"
	                 "\\includegraphics[width=\\textwidth]{figures/" REPORT_FIGURE_HOST ".pdf}\n"
	                 "\\caption{Host bytes per rank at the peak against $N$, offloaded runs: the schedule "
	                 "model's line, and every rank's measurement as a point on it (a line hidden under another "
	                 "holds the same bytes).}\n"
	                 "\\end{figure}}{}\n");
}

cJSON *report_host_json(const struct report_data *d)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < d->nruns; i++) {
		const struct report_run *r = &d->runs[i];
		if (!r->host.has)
			continue;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "scheme", zs_scheme_name(r->scheme));
		zs_json_add_number(o, "world", r->world);
		cJSON_AddStringToObject(o, "unit", zs_unit_name(r->unit));
		report_host_json_add(o, &r->host);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}
