/*
 * report_text — the machine- and human-readable outputs: diff.json
 * (format zerosim-diff/1, below), flags.txt, and the LaTeX pieces the
 * template inputs: table.tex, findings.tex, flags.tex.
 *
 * diff.json, `"format": "zerosim-diff/1"`:
 *   "params", "config" {layers, batch, precision, optimizer, bytes_per_param},
 *   "baseline_causes": ["activations and scratch"],
 *   "points": [{scheme, world, unit, metric ("resident"|"peak"|"comm"),
 *               floor_bytes, schedule_bytes, measured_bytes,
 *               departure_bytes, departure_per_param, departure_relative
 *               (null when the floor is 0 and the departure is not),
 *               causes {padding, gathered_params, full_grads,
 *                       activations_and_scratch, other} (bytes),
 *               status ("none"|"baseline"|"flagged"), unexplained (bool)}],
 *   "summary" {points, flagged, baseline, unexplained},
 *   "findings": [{key, claim, verdict ("holds"|"does not hold"|
 *                 "not tested by this sweep"), evidence}].
 */
#ifndef ZS_REPORT_TEXT_H
#define ZS_REPORT_TEXT_H

#include <cjson/cJSON.h>

#include "report/report_buf.h"
#include "report/report_classify.h"
#include "report/report_findings.h"

#define REPORT_DIFF_FORMAT "zerosim-diff/1"

/* The diff as a tree; the caller frees it with cJSON_Delete(). */
cJSON *report_diff_json(const struct report_data *d, const struct report_point *pts, size_t npts,
                        const struct report_finding *f);

/* flags.txt: a summary line, every unexplained point, every flagged point. */
void report_flags_text(const struct report_data *d, const struct report_point *pts, size_t npts,
                       struct zs_buf *b);

/* One point of diff.json's "points" (docs/formats.md), d's Ψ its per-param
 * figures'; the caller owns the object (cJSON_Delete, or an array's). */
cJSON *report_point_json(const struct report_data *d, const struct report_point *pt);

/* One line for a point, as flags.txt prints it (no newline). */
void report_point_line(const struct report_data *d, const struct report_point *pt,
                       struct zs_buf *b);

/* table.tex: memory tables per unit and one comm table (booktabs). */
void report_table_tex(const struct report_data *d, const struct report_point *pts, size_t npts,
                      struct zs_buf *b);

/* causes.tex: how a departure is split into causes, one rule per cause
 * this report's framework can name (the paper's five for the paper's). */
void report_causes_tex(const struct report_data *d, struct zs_buf *b);

/* findings.tex: the configuration and an itemize of the findings. */
void report_findings_tex(const struct report_data *d, const struct report_finding *f,
                         struct zs_buf *b);

/* flags.tex: the flagged and unexplained points as a list. */
void report_flags_tex(const struct report_data *d, const struct report_point *pts, size_t npts,
                      struct zs_buf *b);

/* The MLP's offloaded runs (report_host.h): lines for flags.txt, a
 * paragraph for flags.tex (with fig8-host where the figure was written),
 * diff.json's host array (the caller owns it; empty without offloaded
 * runs), and the runs whose host figures depart (each named on stderr; a
 * summary line on stdout). */
void report_host_text(const struct report_data *d, struct zs_buf *b);
/* flags.txt's "allocator:" lines, one per run measured with --allocator
 * cuda (none otherwise): what the GPU would reserve above the tensors (at
 * the reserved peak, the free space cached), and the fragmentation at the
 * allocated peak that diff.json's peak point gives (fragmentation_bytes:
 * report_alloc_fragmentation, reserved then less the allocated peak; the
 * run's reserved_at_allocated_peak_bytes must be known). */
void report_allocator_text(const struct report_data *d, struct zs_buf *b);
double report_alloc_fragmentation(const struct report_run *r);
void report_host_tex(const struct report_data *d, struct zs_buf *b);
cJSON *report_host_json(const struct report_data *d);
size_t report_host_unexplained(const struct report_data *d);

#endif
