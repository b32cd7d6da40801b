/*
 * report_overhead — what a real process holds beyond the tracked bytes of
 * the ranks it carries: for runs measured under MPI (per_rank.os_peak_bytes),
 * the process's peak RSS as the kernel counts it (VmHWM) minus the tracked
 * peaks of its ranks, per rank. The MPI library, the allocator's slack, the
 * code and the collectives' staging buffers are in it. It is a measured
 * category of its own, beside the tracked ones: neither a departure from the
 * floor nor a disagreement with the schedule model, which count tracked
 * bytes only. The binding process (the largest overhead) of each run is
 * shown.
 * (The host bytes of offloaded runs are report_host.h.)
 */
#ifndef ZS_REPORT_OVERHEAD_H
#define ZS_REPORT_OVERHEAD_H

#include <cjson/cJSON.h>

#include "report/report_buf.h"
#include "report/report_data.h"

/* Lines for flags.txt, a paragraph for flags.tex, an array for diff.json
 * (the caller owns it); nothing, or an empty array, without MPI runs. */
void report_overhead_text(const struct report_data *d, struct zs_buf *b);
void report_overhead_tex(const struct report_data *d, struct zs_buf *b);
cJSON *report_overhead_json(const struct report_data *d);

#endif
