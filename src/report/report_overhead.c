/*
 * report_overhead — see report_overhead.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report/report_overhead.h"
#include "util/util.h"

static int pick(const void *ctx, size_t i)
{
	return ((const struct report_data *)ctx)->runs[i].os_ranks > 0;
}

/* "zero3 N=16 unit=model: 12.3 MB per rank (process 1 of 2: peak RSS
 * 1081.2 MB, tracked 983.1 MB over its 8 ranks)". DeepSpeed's reduce
 * buckets are tracked at their full size, as DeepSpeed allocates them, but
 * the engine maps them and writes only what a step uses, so the process
 * holds only those pages: the line says so, or a negative figure would
 * read as a counting error. */
static void line(const void *ctx, size_t i, struct zs_buf *b)
{
	const struct report_data *d = ctx;
	const struct report_run *r = &d->runs[i];
	zs_buf_printf(b, "%s N=%u unit=%s: %.1f MB per rank (process %u of %u: peak RSS %.1f MB, tracked %.1f MB "
	                  "over its %u rank%s)",
	                  zs_scheme_name(r->scheme), r->world, zs_unit_name(r->unit), r->os_overhead / 1e6,
	                  r->os_process, r->world / r->os_ranks, r->os_peak / 1e6, r->os_tracked / 1e6, r->os_ranks,
	                  r->os_ranks > 1 ? "s" : "");
	if (strcmp(d->framework, "deepspeed") == 0 && r->peak_bd[REPORT_CAT_BUCKETS] > 0)
		zs_buf_printf(b, "; the tracked peaks include %.1f MB a rank of DeepSpeed's reduce buckets, mapped at "
		                  "that size but resident only where a step writes them", r->peak_bd[REPORT_CAT_BUCKETS] / 1e6);
}

static struct report_items items(const struct report_data *d)
{
	return (struct report_items){d, d->nruns, pick, line};
}

void report_overhead_text(const struct report_data *d, struct zs_buf *b)
{
	const struct report_items it = items(d);
	if (report_items_count(&it) == 0)
		return;
	zs_buf_printf(b, "# process overhead (OS - tracked), runs measured under MPI: the peak RSS of the process "
	                  "holding the ranks\n# minus their tracked peaks, per rank (MPI, allocator, code, staging); "
	                  "measured, not a flag.\n");
	report_items(b, 0, "process overhead", &it);
}

void report_overhead_tex(const struct report_data *d, struct zs_buf *b)
{
	const struct report_items it = items(d);
	if (report_items_count(&it) == 0)
		return;
	zs_buf_printf(b, "\\paragraph{Process overhead (OS $-$ tracked).} %zu runs were measured under MPI. "
	                  "Beyond the tracked bytes of the ranks it carries, each process holds the MPI library, "
	                  "the allocator's slack, the code and the collectives' staging buffers: its peak RSS "
	                  "(\\texttt{VmHWM}) minus the tracked peaks of its ranks, per rank, for the process with "
	                  "the most:\n",
	                  report_items_count(&it));
	report_items(b, 1, NULL, &it);
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
