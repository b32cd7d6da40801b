/*
 * report_overhead — see report_overhead.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report/report_overhead.h"
#include "util/util.h"

static size_t count(const struct report_data *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nruns; i++)
		n += d->runs[i].os_ranks > 0;
	return n;
}

/* "zero3 N=16 unit=model: 12.3 MB per rank (process 1 of 2: peak RSS
 * 1081.2 MB, tracked 983.1 MB over its 8 ranks)". DeepSpeed's reduce
 * buckets are tracked at their full size, as DeepSpeed allocates them, but
 * the engine maps them and writes only what a step uses, so the process
 * holds only those pages: the line says so, or a negative figure would
 * read as a counting error. */
static void line(const struct report_data *d, const struct report_run *r, struct zs_buf *b)
{
	zs_buf_printf(b, "%s N=%u unit=%s: %.1f MB per rank (process %u of %u: peak RSS %.1f MB, tracked %.1f MB "
	                  "over its %u rank%s)",
	                  zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit), r->os_overhead / 1e6,
	                  r->os_process, r->world / r->os_ranks, r->os_peak / 1e6, r->os_tracked / 1e6, r->os_ranks,
	                  r->os_ranks > 1 ? "s" : "");
	if (strcmp(d->framework, "deepspeed") == 0 && r->peak_bd[REPORT_CAT_BUCKETS] > 0)
		zs_buf_printf(b, "; the tracked peaks include %.1f MB a rank of DeepSpeed's reduce buckets, mapped at "
		                  "that size but resident only where a step writes them", r->peak_bd[REPORT_CAT_BUCKETS] / 1e6);
}

void report_overhead_text(const struct report_data *d, struct zs_buf *b)
{
	if (count(d) == 0)
		return;
	zs_buf_printf(b, "# process overhead (OS - tracked), runs measured under MPI: the peak RSS of the process "
	                  "holding the ranks\n# minus their tracked peaks, per rank (MPI, allocator, code, staging); "
	                  "measured, not a flag.\n");
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].os_ranks > 0) {
			zs_buf_printf(b, "process overhead: ");
			line(d, &d->runs[i], b);
			zs_buf_printf(b, "\n");
		}
}

void report_overhead_tex(const struct report_data *d, struct zs_buf *b)
{
	if (count(d) == 0)
		return;
	zs_buf_printf(b, "\\paragraph{Process overhead (OS $-$ tracked).} %zu runs were measured under MPI. "
	                  "Beyond the tracked bytes of the ranks it carries, each process holds the MPI library, "
	                  "the allocator's slack, the code and the collectives' staging buffers: its peak RSS "
	                  "(\\texttt{VmHWM}) minus the tracked peaks of its ranks, per rank, for the process with "
	                  "the most:\n\\begin{itemize}\\footnotesize\n",
	                  count(d));
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].os_ranks > 0) {
			struct zs_buf one = {0};
			line(d, &d->runs[i], &one);
			zs_buf_printf(b, "\\item ");
			report_buf_tex(b, zs_buf_str(&one));
			zs_buf_printf(b, "\n");
			zs_buf_free(&one);
		}
	zs_buf_printf(b, "\\end{itemize}\n");
}

cJSON *report_overhead_json(const struct report_data *d)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < d->nruns; i++) {
		const struct report_run *r = &d->runs[i];
		if (r->os_ranks == 0)
			continue;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "scheme", zs_scheme_name(r->scheme));
		zs_json_add_number(o, "world", r->world);
		cJSON_AddStringToObject(o, "unit", zs_unit_name(r->unit));
		zs_json_add_number(o, "process", r->os_process);
		zs_json_add_number(o, "ranks", r->os_ranks);
		zs_json_add_number(o, "os_peak_bytes", r->os_peak);
		zs_json_add_number(o, "tracked_peak_bytes", r->os_tracked);
		zs_json_add_number(o, "overhead_bytes_per_rank", r->os_overhead);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* ------------------------------------------------------------------------ */
/* Host bytes of offloaded runs */

static size_t host_count(const struct report_data *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nruns; i++)
		n += d->runs[i].has_host != 0;
	return n;
}

static const char *const host_name[REPORT_NHOST] = {"resident", "peak", "resident per node"};

/* Whether run r's host figure h differs from the schedule's. */
static int host_differs(const struct report_run *r, int h)
{
	return r->host[h] >= 0 && r->sched_host[h] >= 0 && r->host[h] != r->sched_host[h];
}

/* "zero1 N=2 unit=model: resident 297472 B (schedule 297472), ..." */
static void host_line(const struct report_run *r, struct zs_buf *b)
{
	zs_buf_printf(b, "%s N=%u unit=%s:", zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit));
	int n = 0;
	for (int h = 0; h < REPORT_NHOST; h++) {
		if (r->host[h] < 0)
			continue;
		zs_buf_printf(b, "%s %s %.0f B", n++ ? "," : "", host_name[h], r->host[h]);
		if (r->sched_host[h] >= 0)
			zs_buf_printf(b, " (schedule %.0f%s)", r->sched_host[h], host_differs(r, h) ? ", UNEXPLAINED" : "");
		else
			zs_buf_printf(b, " (no schedule)");
	}
}

size_t report_host_unexplained(const struct report_data *d)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nruns; i++) {
		const struct report_run *r = &d->runs[i];
		int bad = 0;
		for (int h = 0; h < REPORT_NHOST && r->has_host; h++)
			bad |= host_differs(r, h);
		if (bad) {
			struct zs_buf one = {0};
			host_line(r, &one);
			fprintf(stderr, "zerosim report: UNEXPLAINED host bytes %s: the engine or the theory departs from "
			        "docs/schedule.md\n", zs_buf_str(&one));
			zs_buf_free(&one);
		}
		n += (size_t)bad;
	}
	if (host_count(d) > 0)
		printf("zerosim report: host bytes of %zu offloaded runs, %zu unexplained\n", host_count(d), n);
	return n;
}

void report_host_text(const struct report_data *d, struct zs_buf *b)
{
	if (host_count(d) == 0)
		return;
	zs_buf_printf(b, "# host bytes (--offload), per rank (per node: its ranks'), measured beside the schedule "
	                  "model's; the other figures are the device's\n");
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].has_host) {
			zs_buf_printf(b, "host: ");
			host_line(&d->runs[i], b);
			zs_buf_printf(b, "\n");
		}
}

void report_host_tex(const struct report_data *d, struct zs_buf *b)
{
	if (host_count(d) == 0)
		return;
	zs_buf_printf(b, "\\paragraph{Host memory (\\texttt{--offload}).} The tables and figures are the device's. "
	                  "What %zu offloaded runs hold on the host, per rank between steps and at its peak, and a "
	                  "node's ranks between steps, measured beside the schedule model's:\n"
	                  "\\begin{itemize}\\footnotesize\n", host_count(d));
	for (size_t i = 0; i < d->nruns; i++)
		if (d->runs[i].has_host) {
			struct zs_buf one = {0};
			host_line(&d->runs[i], &one);
			zs_buf_printf(b, "\\item ");
			report_buf_tex(b, zs_buf_str(&one));
			zs_buf_printf(b, "\n");
			zs_buf_free(&one);
		}
	zs_buf_printf(b, "\\end{itemize}\n");
}

cJSON *report_host_json(const struct report_data *d)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < d->nruns; i++) {
		const struct report_run *r = &d->runs[i];
		if (!r->has_host)
			continue;
		cJSON *o = cJSON_CreateObject(), *sc = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "scheme", zs_scheme_name(r->scheme));
		zs_json_add_number(o, "world", r->world);
		cJSON_AddStringToObject(o, "unit", zs_unit_name(r->unit));
		for (int h = 0; h < REPORT_NHOST; h++) {
			if (r->host[h] >= 0)
				zs_json_add_number(o, report_host_keys[h], r->host[h]);
			if (r->sched_host[h] >= 0)
				zs_json_add_number(sc, report_host_keys[h], r->sched_host[h]);
		}
		cJSON_AddItemToObject(o, "schedule", sc);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}
