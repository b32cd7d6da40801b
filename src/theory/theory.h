/*
 * theory — the closed-form memory and communication model of data-parallel
 * training under DP and ZeRO-1/2/3, from the model's shape and options alone.
 *
 * Two levels (DESIGN.md, "Theory"):
 *   - floors: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
 *     Trillion Parameter Models", SC'20, §5 and Table 1 — no padding, no
 *     transients;
 *   - schedule: the exact bytes of docs/schedule.md — padding per unit,
 *     transient gathered params and full grads, activations, scratch.
 *
 * Everything here is a pure function of its arguments. Nothing in
 * src/theory/ includes an engine header: if the theory ever agreed with the
 * engine because it asked the engine, it would prove nothing.
 */
#ifndef ZS_THEORY_H
#define ZS_THEORY_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "util/config.h"

/* Bytes per parameter (docs/schedule.md, "Symbols"), and how the optimizer
 * bytes k split into the categories the tracker uses. */
struct theory_bytes {
	unsigned p, g, k;       /* working param, grad, optimizer state */
	unsigned master;        /* fp32 master copy: 4 mixed, 0 fp32 */
	unsigned adam;          /* each of adam_m, adam_v: 4 with Adam, else 0 */
	unsigned momentum;      /* 4 with SGD, else 0 */
};

void theory_bytes_per_param(enum zs_precision pr, enum zs_optimizer opt,
                            struct theory_bytes *out);

/* The categories of docs/schedule.md, in the order they are printed. */
enum theory_category {
	THEORY_PARAM16, THEORY_PARAM32, THEORY_GRAD16, THEORY_GRAD32,
	THEORY_MASTER32, THEORY_ADAM_M, THEORY_ADAM_V, THEORY_MOMENTUM,
	THEORY_GATHERED_PARAMS, THEORY_FULL_GRADS, THEORY_ACTIVATIONS,
	THEORY_SCRATCH, THEORY_NCATEGORIES
};

const char *theory_category_name(enum theory_category c);

/* ------------------------------------------------------------------------ */
/* Floors: the paper's formulas, for a model that is only a count Ψ. */

struct theory_floor {
	double resident_bytes;  /* model states per rank */
	double comm_bytes;      /* bytes sent per rank per step */
	double comm_elements;   /* elements sent per rank per step */
};

void theory_floor(double params, enum zs_scheme scheme, unsigned world,
                  const struct theory_bytes *b, struct theory_floor *out);

/* ------------------------------------------------------------------------ */
/* Schedule: the exact bytes of docs/schedule.md for a model with a shape.
 * Byte counts are exact integers (the caller validated the shape against
 * ZS_MAX_PARAMS, so they stay below 2^53). */

struct theory_shape {
	const size_t *widths;   /* d0..dL */
	size_t nwidths;         /* L + 1, at least 2 */
	unsigned batch;         /* b */
	struct theory_bytes bytes;
	enum zs_framework framework; /* whose implementation (0: the paper's) */
};

struct theory_schedule {
	uint64_t params;                /* Ψ */
	size_t nunits;                  /* U */
	uint64_t units[ZS_MAX_WIDTHS];  /* n_u */
	uint64_t shard_elements;        /* S = Σ ceil(n_u / N) */
	uint64_t padded_elements;       /* P = N·S */
	uint64_t resident_bytes;
	uint64_t peak_bytes;
	uint64_t resident_breakdown[THEORY_NCATEGORIES];
	uint64_t peak_breakdown[THEORY_NCATEGORIES];
	uint64_t comm_bytes;            /* bytes sent per rank per step */
	uint64_t comm_elements;         /* elements sent per rank per step */
	/* The rank's share of the padding in its resident state: (P - Ψ)/N
	 * elements at the bytes per param the scheme shards, so that schedule
	 * resident = floor resident + padding_bytes. Can be a fraction. */
	double padding_bytes;
	/* A framework's uneven partition (torch's zero1): the binding rank's
	 * bytes above an even split, so that schedule resident = floor
	 * resident + padding_bytes + imbalance_bytes. 0 for the paper's. */
	double imbalance_bytes;
};

/* Ψ of a shape: Σ d_l·d_{l+1} + d_{l+1}. */
uint64_t theory_params(const struct theory_shape *s);

void theory_schedule(const struct theory_shape *s, enum zs_scheme scheme,
                     enum zs_unit unit, unsigned world,
                     struct theory_schedule *out);

/* ------------------------------------------------------------------------ */
/* Frameworks (theory_framework.c; docs/schedule.md, "Frameworks"). */

/* torch's ZeroRedundancyOptimizer partition, worked from the shape: the
 * elements of whole tensors each of the N ranks is assigned (load[N]). */
void theory_torch_partition(const struct theory_shape *s, unsigned world, uint64_t *load);

/* Redo a paper schedule as the shape's framework implements the scheme
 * (theory_schedule calls it; nothing for the paper's). */
void theory_framework_schedule(const struct theory_shape *s, enum zs_scheme scheme, unsigned world,
                               struct theory_schedule *out);

/* A framework's schedule keys (docs/formats.md): "imbalance_bytes" and
 * "per_rank" (every rank's resident and peak bytes and bytes sent), added
 * to a row's "schedule" object for any framework but the paper's. */
void theory_framework_json(cJSON *schedule, const struct theory_shape *s, enum zs_scheme scheme,
                           unsigned world, const struct theory_schedule *sc);

/* DeepSpeed's own estimate of a rank's model states on the device, without
 * offload, as DeepSpeed's main branch computes it since June 2024: zero2
 * 2Ψ + int(18Ψ/N), zero3 4L + int(18Ψ/N) with L the largest layer's
 * params. -1 for a scheme it has no estimator for, or zero3 without L. */
double theory_deepspeed_estimate(double params, double largest_layer, enum zs_scheme scheme, unsigned world);

/* ------------------------------------------------------------------------ */
/* Output (theory_json.c). */

/* What `zerosim theory` computes over: either a shape (config->widths) or,
 * when shape_known is 0, only a count Ψ. */
struct theory_request {
	const struct zs_config *config;  /* worlds, schemes, units, options */
	int shape_known;                 /* 0: --params mode, floors only */
	double params;                   /* Ψ (used when !shape_known) */
	double largest_unit;             /* --largest-unit, or 0 for none */
	double device_mem;               /* --device-mem bytes, or 0 for none */
};

/* A row's keys that only a framework adds (theory_framework.c): for
 * DeepSpeed, "deepspeed_estimate" beside zerosim's floor and schedule. */
void theory_framework_row_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme,
                               unsigned world);

/* The framework's lines for the text output, or NULL for the paper's
 * (the caller frees it). */
char *theory_framework_text(const struct theory_request *req);

/* Build the zerosim-theory/1 tree (docs/formats.md). Rows are in the order
 * schemes x units x worlds, each list in the order given. The caller frees
 * the result with cJSON_Delete(). Never NULL (out of memory is fatal). */
cJSON *theory_json(const struct theory_request *req);

/* The same content as text tables per rank, laid out like the ZeRO paper's
 * Table 1: one line per N, one column per scheme, in GB (1e9 bytes), or in
 * MB/KB/bytes for a table whose largest cell is below 1 GB: the floors, and
 * for a shape the schedule's resident and peak bytes per unit; then, with
 * --device-mem, the smallest N in the list at which each scheme's floor fits.
 * The caller frees the result with free(). */
char *theory_text(const struct theory_request *req);

#endif
