/*
 * report_host — see report_host.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_host.h"
#include "util/util.h"

const char *const report_host_keys[REPORT_NHOST] = {"host_resident_bytes", "host_peak_bytes",
                                                   "host_resident_bytes_per_node"};
static const char *const host_name[REPORT_NHOST] = {"resident", "peak", "resident per node"};

void report_host_free(struct report_host *h)
{
	for (int k = 0; k < REPORT_HOST_NRANK; k++) {
		free(h->rank[k]);
		free(h->sched_rank[k]);
		h->rank[k] = h->sched_rank[k] = NULL;
	}
}

/* Whether figure f differs from the schedule's, and rank k's figure f (k <
 * world) from the schedule's for that rank, where both are given. */
static int differs(const struct report_host *h, int f)
{
	return h->v[f] >= 0 && h->sched[f] >= 0 && h->v[f] != h->sched[f];
}

static double rank_sched(const struct report_host *h, int f, unsigned k)
{
	return h->sched_rank[f] != NULL ? h->sched_rank[f][k] : h->sched[f];
}

static int rank_differs(const struct report_host *h, int f, unsigned k)
{
	return h->rank[f] != NULL && rank_sched(h, f, k) >= 0 && h->rank[f][k] != rank_sched(h, f, k);
}

size_t report_host_departures(const struct report_host *h)
{
	size_t n = 0;
	for (int f = 0; f < REPORT_NHOST && h->has; f++)
		n += (size_t)differs(h, f);
	for (int f = 0; f < REPORT_HOST_NRANK && h->has; f++)
		for (unsigned k = 0; k < h->world; k++)
			n += (size_t)rank_differs(h, f, k);
	return n;
}

void report_host_line(const char *label, const struct report_host *h, struct zs_buf *b)
{
	int n = 0, ranked = 0;
	zs_buf_printf(b, "%s:", label);
	for (int f = 0; f < REPORT_NHOST; f++) {
		if (h->v[f] < 0)
			continue;
		zs_buf_printf(b, "%s %s %.0f B", n++ ? "," : "", host_name[f], h->v[f]);
		if (h->sched[f] >= 0)
			zs_buf_printf(b, " (schedule %.0f%s)", h->sched[f], differs(h, f) ? ", UNEXPLAINED" : "");
		else
			zs_buf_printf(b, " (no schedule)");
	}
	size_t bad = 0;
	for (int f = 0; f < REPORT_HOST_NRANK; f++) {
		ranked |= h->rank[f] != NULL;
		for (unsigned k = 0; k < h->world; k++)
			if (rank_differs(h, f, k))
				zs_buf_printf(b, "; rank %u %s %.0f B (schedule %.0f, UNEXPLAINED)", k, host_name[f],
				              h->rank[f][k], rank_sched(h, f, k)), bad++;
	}
	if (ranked && bad == 0)
		zs_buf_printf(b, h->world > 1 ? "; all %u ranks as the schedule" : "; its one rank as the schedule",
		              h->world);
}

/* Whether two runs' figures, and the schedule's, are the same, so that
 * one row of the table gives both. */
static int same_figures(const struct report_host_run *a, const struct report_host_run *b)
{
	if (strcmp(a->name, b->name) != 0 || a->world != b->world ||
	    (report_host_departures(a->h) > 0) != (report_host_departures(b->h) > 0))
		return 0;
	for (int f = 0; f < REPORT_NHOST; f++)
		if (a->h->v[f] != b->h->v[f] || a->h->sched[f] != b->h->sched[f])
			return 0;
	return 1;
}

void report_host_table(struct zs_buf *b, const struct report_host_run *runs, size_t n)
{
	size_t bad = 0, unscheduled = 0;
	int figure[REPORT_NHOST] = {0};

	for (size_t i = 0; i < n; i++) {
		bad += report_host_departures(runs[i].h) > 0;
		for (int f = 0; f < REPORT_NHOST; f++) {
			figure[f] |= runs[i].h->v[f] >= 0;
			unscheduled += runs[i].h->v[f] >= 0 && runs[i].h->sched[f] < 0;
		}
	}
	if (bad == 0 && unscheduled == 0)
		zs_buf_printf(b, n == 1 ? "The run equals" : n == 2 ? "Both runs equal" : "All %zu runs equal", n);
	if (bad == 0 && unscheduled == 0)
		zs_buf_printf(b, " the schedule model to the byte, on every rank;");
	else if (bad > 0)
		zs_buf_printf(b, "\\textbf{%zu of the %zu offloaded runs depart%s from the schedule model} (marked "
		              "\\textsuperscript{u}, the schedule's figure beside the measured one) --- a bug in the "
		              "engine or the theory; \\texttt{zerosim report} names each on stderr;", bad, n, bad == 1 ? "s" : "");
	else
		zs_buf_printf(b, "The offloaded runs' host bytes, measured; theory.json gives no schedule for %zu of "
		              "their figures (marked (---));", unscheduled);
	zs_buf_printf(b, " each run's line, with every rank's figures, is in \\texttt{flags.txt}.\n"
	                 "\\begin{center}\\footnotesize\n\\begin{tabular}{lrl");
	for (int f = 0; f < REPORT_NHOST; f++)
		if (figure[f])
			zs_buf_printf(b, "r");
	zs_buf_printf(b, "}\n\\toprule\nrun & $N$ & unit");
	for (int f = 0; f < REPORT_NHOST; f++)
		if (figure[f])
			zs_buf_printf(b, " & %s (B)", host_name[f]);
	zs_buf_printf(b, "\\\\\n\\midrule\n");
	for (size_t i = 0; i < n; i++) {
		size_t k;
		for (k = 0; k < i && !same_figures(&runs[k], &runs[i]); k++)
			;
		if (k < i) /* given in an earlier run's row */
			continue;
		const struct report_host *h = runs[i].h;
		report_buf_tex(b, runs[i].name);
		zs_buf_printf(b, "%s & %u & %s", report_host_departures(h) > 0 ? "\\textsuperscript{u}" : "",
		              runs[i].world, zs_unit_name(runs[i].unit));
		for (k = i + 1; k < n; k++)
			if (same_figures(&runs[i], &runs[k]) && runs[k].unit != runs[i].unit)
				zs_buf_printf(b, ", %s", zs_unit_name(runs[k].unit));
		for (int f = 0; f < REPORT_NHOST; f++) {
			if (!figure[f])
				continue;
			zs_buf_printf(b, " & ");
			if (h->v[f] < 0) {
				zs_buf_printf(b, "---");
				continue;
			}
			report_buf_grouped(b, h->v[f]);
			if (h->sched[f] < 0) {
				zs_buf_printf(b, " (---)");
			} else if (differs(h, f)) {
				zs_buf_printf(b, "\\textsuperscript{u} (");
				report_buf_grouped(b, h->sched[f]);
				zs_buf_printf(b, ")");
			}
		}
		zs_buf_printf(b, "\\\\\n");
	}
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n\\end{center}\n");
}

int report_host_check(const char *label, const struct report_host *h)
{
	if (report_host_departures(h) == 0)
		return 0;
	struct zs_buf one = {0};
	report_host_line(label, h, &one);
	fprintf(stderr, "zerosim report: UNEXPLAINED host bytes %s: the engine or the theory departs from "
	        "docs/schedule.md\n", zs_buf_str(&one));
	zs_buf_free(&one);
	return 1;
}

static cJSON *numbers(const double *v, unsigned n)
{
	cJSON *a = cJSON_CreateArray();
	for (unsigned k = 0; k < n; k++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[k]));
	return a;
}

void report_host_json_add(cJSON *o, const struct report_host *h)
{
	cJSON *sc = cJSON_CreateObject(), *per = NULL, *sper = NULL;
	for (int f = 0; f < REPORT_NHOST; f++) {
		if (h->v[f] >= 0)
			zs_json_add_number(o, report_host_keys[f], h->v[f]);
		if (h->sched[f] >= 0)
			zs_json_add_number(sc, report_host_keys[f], h->sched[f]);
	}
	for (int f = 0; f < REPORT_HOST_NRANK; f++) {
		if (h->rank[f] != NULL)
			cJSON_AddItemToObject(per != NULL ? per : (per = cJSON_AddObjectToObject(o, "per_rank")),
			                      report_host_keys[f], numbers(h->rank[f], h->world));
		if (h->sched_rank[f] != NULL)
			cJSON_AddItemToObject(sper != NULL ? sper : (sper = cJSON_AddObjectToObject(sc, "per_rank")),
			                      report_host_keys[f], numbers(h->sched_rank[f], h->world));
	}
	cJSON_AddItemToObject(o, "schedule", sc);
	cJSON_AddBoolToObject(o, "unexplained", report_host_departures(h) > 0);
}
