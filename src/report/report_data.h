/*
 * report_data — the report's view of one measurement and one theory: both
 * JSON files (docs/formats.md, zerosim-measured/1 and zerosim-theory/1)
 * loaded, checked against each other and joined on (scheme, N, unit).
 *
 * The report reads only these files; it never includes an engine or theory
 * header (docs/design.md), so a measured.json made elsewhere can be diffed.
 */
#ifndef ZS_REPORT_DATA_H
#define ZS_REPORT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "report/report_host.h"
#include "util/config.h"

#define REPORT_MEASURED_FORMAT "zerosim-measured/1"
#define REPORT_THEORY_FORMAT "zerosim-theory/1"

/* The three metrics of a point (bytes per rank). */
enum report_metric { REPORT_RESIDENT, REPORT_PEAK, REPORT_COMM, REPORT_NMETRICS };

/* Tracker categories of docs/schedule.md. Any category this report does not
 * know is summed into REPORT_CAT_UNKNOWN, so its bytes still show up. */
enum report_cat {
	REPORT_CAT_PARAM16, REPORT_CAT_PARAM32, REPORT_CAT_GRAD16, REPORT_CAT_GRAD32,
	REPORT_CAT_MASTER32, REPORT_CAT_ADAM_M, REPORT_CAT_ADAM_V, REPORT_CAT_MOMENTUM,
	REPORT_CAT_GATHERED, REPORT_CAT_FULL_GRADS, REPORT_CAT_ACTIVATIONS, REPORT_CAT_SCRATCH,
	REPORT_CAT_BUCKETS, REPORT_CAT_UNKNOWN, REPORT_NCATS
};

/* The phase a timeline event is tagged with (docs/formats.md): setup, then
 * a step's phases in their usual order (ZeRO-3 interleaves reduce with
 * backward, one unit at a time). */
enum report_phase {
	REPORT_PH_SETUP, REPORT_PH_FORWARD, REPORT_PH_BACKWARD, REPORT_PH_REDUCE,
	REPORT_PH_OPTIMIZER, REPORT_PH_GATHER, REPORT_NPHASES
};

/* One run of either family: a measurement joined with the schedule
 * model's row. The MLP's runs and a transformer's rows (report_tfm.h) are
 * both this struct, read by the same two readers below and judged by the
 * same rule (report_run_departs). Bytes are per rank. */
/* One rank's blocks over the last step: each event's op (1 alloc, -1
 * free, 0 none), block id, bytes and phase (ntl events), and the blocks
 * live as the step began (nlive). Arrays owned. */
struct report_trace {
	unsigned rank;
	size_t ntl;
	int *op;
	uint64_t *id, *bytes;
	enum report_phase *phase;
	uint64_t *live_id, *live_bytes;
	size_t nlive;
};

struct report_run {
	enum zs_scheme scheme;
	unsigned world;
	enum zs_unit unit;
	/* Which sides the files gave: the MLP's report needs both for every
	 * run; a transformer's theory row may have no measurement (not
	 * measured) and a measured row no schedule (not checked). */
	int has_measured, has_schedule;
	/* DeepSpeed's zero3: its steps send different bytes (step 1 records the
	 * trace), so its comm per step is a mean, not a whole number. */
	int comm_mean;
	double largest_unit;                 /* elements of the largest unit */
	double units_total;                  /* the units' elements summed: Ψ */
	double broadcast_bytes;              /* collectives.broadcast per step (torch's zero1), else 0 */
	double allgather_bytes;              /* collectives.all_gather per step (a mean for DeepSpeed), else 0 */
	double shard_elements;               /* S */
	double padded_elements;              /* P = N·S */
	/* measured[] and schedule[]: REPORT_COMM is -1 where a transformer's
	 * file does not give it (the MLP's always do). */
	double measured[REPORT_NMETRICS];
	double floor[REPORT_NMETRICS];       /* the paper; peak's floor is the resident floor */
	double schedule[REPORT_NMETRICS];    /* the schedule model of docs/schedule.md */
	double resident_bd[REPORT_NCATS];    /* measured resident_breakdown */
	double peak_bd[REPORT_NCATS];        /* measured peak_breakdown */
	/* The schedule model's breakdowns (theory.json schedule.resident_breakdown
	 * and schedule.peak_breakdown), where the row has them. */
	double sched_resident_bd[REPORT_NCATS];
	double sched_peak_bd[REPORT_NCATS];
	int has_sched_resident_bd, has_sched_peak_bd;
	/* Under MPI (per_rank.os_peak_bytes): the process whose peak RSS most
	 * exceeds the tracked peaks of the ranks it carries, its ranks, those
	 * two figures, and the process overhead per rank (their difference
	 * divided by its ranks). os_ranks is 0 for a run measured in process. */
	unsigned os_ranks, os_process;
	double os_peak, os_tracked, os_overhead;
	/* Offloaded runs: the host bytes, measured and the schedule model's
	 * (host.has 0 without them). */
	struct report_host host;
	double *timeline;                    /* rank 0's current_bytes per event, or NULL */
	enum report_phase *phase;            /* each event's phase (NULL with timeline) */
	size_t ntimeline;
	/* With the run's allocator (measure --allocator cuda --timeline):
	 * each rank's blocks the file has, to replay through the caching
	 * allocator over the step (fig10-allocator), in rank order: rank 0's
	 * (the run's timeline) and, with --timeline-ranks all, every other's
	 * (timeline_ranks). The binding rank, tl_rank, is alloc_rank, the
	 * rank whose reserved peak binds, where the file has its events; else
	 * 0, and tl_missing is 1 (that rank's events are not in the file). */
	int has_allocator;
	unsigned tl_rank;
	int tl_missing;
	struct report_trace *trace;          /* ntrace, owned */
	size_t ntrace;
	/* The run's allocator replay (measure --allocator cuda), for the rank
	 * whose reserved peak is the highest: has_alloc_summary 0 without. */
	int has_alloc_summary;
	unsigned alloc_rank;
	double alloc_allocated_peak, alloc_reserved_peak, alloc_at_reserved, alloc_frag, alloc_frag_ratio;
	/* segments_peak and reserved_at_allocated_peak_bytes, -1 where the
	 * file has none (older files) */
	double alloc_segments, alloc_reserved_at_allocated;
	/* The theory row's allocator.device_overhead (theory --allocator
	 * cuda): what the device holds outside the allocator, per GPU. The
	 * parts are -1 where the file gives null (--device-overhead SIZE);
	 * has_fixed 0 where the row has none. */
	int has_fixed;
	double fixed_total, fixed_context, fixed_nccl;
	/* measured per_rank.resident_bytes, when the ranks differ (a
	 * framework's uneven partition), else NULL */
	double *rank_resident;
	size_t nranks;
};

struct report_data {
	double params;                       /* Ψ */
	double trained;                      /* Ψ_t: a frozen transformer's trainable_params; Ψ (or 0) else */
	size_t *widths;                      /* d0..dL, as many as the files give */
	size_t nwidths;
	double batch;
	char precision[16];
	char optimizer[16];
	char framework[16];                  /* config.framework; "paper" when absent */
	double ds_persist;                   /* config.deepspeed.persist; -1 when absent */
	int offload;                         /* the measured config.deepspeed.offload is not "none" */
	int offload_params;                  /* it is "params" (the params' partitions on the host too) */
	double grad_accum;                   /* config.grad_accum, K micro-steps a step; 1 when absent */
	double p, g, k;                      /* bytes per param: working param, grad, optimizer */
	/* measured config.allocator.conf (--alloc-conf), with has_alloc */
	int has_alloc;
	char alloc_conf[256];
	struct report_run *runs;             /* sorted by unit, scheme, world */
	size_t nruns;
	unsigned *worlds[ZS_NUNITS];         /* each unit's distinct world sizes, sorted */
	size_t nworlds[ZS_NUNITS];
};

/* Load both files, check their formats and that they describe the same
 * model, and join them. Every measured run needs a theory row; extra theory
 * rows are ignored. Every byte count read (totals, breakdown entries, the
 * timeline's current_bytes, bytes per param) must be a finite number, 0 or
 * more, and every breakdown must sum exactly to its total: a measured run's
 * peak_breakdown to its peak_bytes and resident_breakdown to its
 * resident_bytes, and the same for the schedule model's breakdowns where the
 * theory row has them. Returns 0, or -1 with *cause set (bad input: exit 2).
 * The caller frees *d with report_data_free(). */
int report_data_load(const char *measured_path, const char *theory_path,
                     struct report_data *d, char **cause);

/* The same from parsed trees (formats not checked); `mname` and `tname`
 * name the files in messages. */
int report_data_from_json(const cJSON *measured, const cJSON *theory, const char *mname,
                          const char *tname, struct report_data *d, char **cause);

void report_data_free(struct report_data *d);

/* Shared with the transformer section (report_tfm.h). */

/* Refuse a tree where one object gives a key twice (a JSON parser keeps
 * both; a reader would see only one): -1 with *cause naming `name`. */
int report_json_unique(const cJSON *node, const char *name, char **cause);

/* Refuse an array of rows (or runs; `what` names it) that gives one
 * (scheme, world, unit) twice, or a row without a valid key. */
int report_rows_unique(const cJSON *rows, const char *name, const char *what, char **cause);

/* o's scheme, world and unit, checked. */
int report_read_key(const cJSON *o, const char *where, enum zs_scheme *s, unsigned *world,
                    enum zs_unit *u, char **cause);

/* o[key]: bytes as a share, which may be a fraction: the paper's floor
 * (a rank's average, 2 + 14/N per parameter), padding spread over the
 * ranks, a mean over steps. Finite, 0 or more, below 2^53. */
int report_read_share(const cJSON *o, const char *key, const char *where, double *out, char **cause);

/* A frozen or LoRA run's Ψ_t, the one count every floor and ratio of
 * such a run is judged by (theory.json's trainable_params: docs/formats.md;
 * docs/schedule.md, "The floors under --freeze"), checked against its
 * params Ψ: what = "freeze" or "lora_r", the key that made the run one. A
 * file without it is an older zerosim's, whose floors counted every
 * parameter as trained: refused. */
int report_read_trained(const cJSON *theory, const char *path, const char *what, double params, double *trained,
                        char **cause);

/* o[key]: a byte count (a whole number from 0 to below 2^53). */
int report_read_bytes(const cJSON *o, const char *key, const char *where, double *out,
                      char **cause);

/* A run's training setup from its config object: the precision and the
 * optimizer (known names only: they reach the LaTeX and the figures) and
 * config.bytes_per_param's three byte counts. The same reader for the
 * MLP's files and the transformer's. */
struct report_train {
	const char *precision, *optimizer; /* point into cfg */
	double p, g, k;
};
int report_read_train(const cJSON *cfg, const char *where, struct report_train *t, char **cause);

/* A run's framework (config.framework; absent: the paper's) and the
 * settings its files may name: torch's bucket_cap_mb and prefetch,
 * DeepSpeed's deepspeed object, the PyTorch followed. Known names only. */
struct report_framework {
	const char *framework;
	double ds_persist;       /* deepspeed.persist, -1 when absent */
	double bucket_cap;       /* bucket_cap_mb, -1 when absent */
	const char *prefetch;    /* NULL when absent */
	double ds_reduce_bucket; /* deepspeed.reduce_bucket, -1 when absent */
	int ds_overlap;          /* deepspeed.overlap_comm, -1 when absent */
	const char *offload;     /* deepspeed.offload, NULL when absent */
	double ranks_per_node;   /* deepspeed.ranks_per_node, -1 when absent */
	double ds_sub_group;     /* deepspeed.sub_group_size (absent: 1e9, ZS_DS_SUB_GROUP), -1 without deepspeed */
	double steps;            /* config.steps under DeepSpeed (zero3's comm is a mean over them), -1 when absent */
	/* The PyTorch followed (config.torch_version ... wrapper, in
	 * zs_torch_json_keys' order), each NULL when absent. */
	const char *torch[ZS_NTORCH_JSON_KEYS];
	/* The step's settings that change its bytes (config.grad_accum ...
	 * double_quant, in zs_step_json_keys' order), each NULL when absent,
	 * and K (config.grad_accum, 1 when absent). */
	const cJSON *step[ZS_NSTEP_JSON_KEYS];
	double grad_accum;
};
int report_read_framework(const cJSON *cfg, const char *where, struct report_framework *f, char **cause);

/* Two files of one experiment: the same framework, the same setting
 * wherever both name one (a departure would blame the code), and the same
 * step settings (absent where absent: a K = 2 run beside a K = 1 theory,
 * a frozen one beside a full one are two runs); the ranks per node where
 * both are offloaded. Steps are checked by the caller
 * where they matter (DeepSpeed's zero3 rows). */
int report_same_framework(const struct report_framework *a, const struct report_framework *b, const char *an,
                          const char *bn, char **cause);

/* o[key], a breakdown by tracker category, added into bd (unknown
 * categories into REPORT_CAT_UNKNOWN), each entry a byte count, summing
 * exactly to `total` (o's `total_key`); `lab` names the run. */
int report_read_breakdown(const cJSON *o, const char *key, const char *where, const char *lab,
                          const char *total_key, double total, double *bd, char **cause);

/* The two sides of a run, one reader each for both families. Flags say
 * what a family's files may leave out, or give as a mean. */
enum {
	REPORT_READ_COMM_SHARE = 1,    /* the comm is a mean over steps (DeepSpeed's zero3): a share */
	REPORT_READ_COMM_OPTIONAL = 2, /* the comm may be absent: -1 (a transformer's files) */
	REPORT_READ_BD_OPTIONAL = 4,   /* the schedule's breakdowns may be absent (the MLP's older rows) */
};
/* A measured run's resident, peak and comm bytes, its two breakdowns and
 * its host bytes, into r (whose key is set); `lab` names the run. */
int report_read_measured(const cJSON *run, const char *where, const char *lab, unsigned flags,
                         struct report_run *r, char **cause);
/* A theory row's "schedule" object: the same figures, into r's schedule
 * side. */
int report_read_schedule(const cJSON *sc, const char *where, const char *lab, unsigned flags,
                         struct report_run *r, char **cause);
/* "zero1 N=2 unit=model" */
const char *report_run_label(enum zs_scheme s, unsigned world, enum zs_unit u, char *buf, size_t len);
void report_run_free(struct report_run *r);

/* The one rule for "unexplained": where the files give both sides, metric
 * m of run r is unexplained when the measurement and the schedule differ
 * by a byte, or (resident and peak) when any category of its breakdown
 * differs, the schedule's breakdown given; *cat gets the first category
 * that differs, or -1. A run is unexplained when any metric is. The host
 * bytes of an offloaded run are judged apart (report_host.h). */
int report_run_departs(const struct report_run *r, enum report_metric m, int *cat);
int report_run_unexplained(const struct report_run *r);

/* The one loader of both families: measured runs joined with theory rows.
 *
 * A section's files (the MLP's --measured and --theory; the transformers'
 * --transformer files) are loaded and each theory.json handed to the
 * family's `theory`, then each measured.json to its `measured` (theories
 * first, so that a measurement finds its model wherever it was given).
 * `theory` reads the file's model and calls report_join_rows; `measured`
 * finds its theory by the family's identity (the MLP's one file; a
 * transformer's name, precision and framework), checks the two describe
 * one experiment, and calls report_join_runs. The policy for a missing
 * partner is the join's, the same for both: a measured run needs a theory
 * row of its (scheme, world, unit) or the file is refused; a theory row
 * without a measurement stays a theory row (has_measured 0), which the
 * MLP's section leaves out and a transformer's shows as not measured. */
struct report_join {
	size_t row_size; /* a family's row: a struct report_run first, then its own fields */
	/* Read a theory row (key already set in r) or a measured run into the
	 * row of its key. */
	int (*theory_row)(const cJSON *row, const char *where, void *r, void *ctx, char **cause);
	int (*measured_run)(const cJSON *run, const char *where, void *r, void *ctx, char **cause);
	void *ctx;
	const char *model; /* names the model in messages, or NULL */
};

/* The theory's rows (none given twice), in the file's order, into a new
 * array *rows of *n rows; on failure *rows and *n hold what was read, for
 * the caller's free. */
int report_join_rows(const struct report_join *j, const cJSON *rows, const char *tname, void **out,
                     size_t *n, char **cause);

/* The measured runs (none given twice) into the rows of their keys. */
int report_join_runs(const struct report_join *j, const cJSON *runs, const char *mname, const char *tname,
                     void *rows, size_t n, char **cause);

/* The section's files: paths[i] must be of formats[i] (NULL: a theory or
 * a measurement); theories go to `theory`, then measurements to `measured`. */
struct report_family {
	int (*theory)(void *section, const cJSON *theory, const char *path, char **cause);
	int (*measured)(void *section, const cJSON *measured, const char *path, char **cause);
};
int report_load(const struct report_family *f, const char *const *paths, const char *const *formats, size_t n,
                void *section, char **cause);

/* The run for (scheme, world, unit), or NULL. */
const struct report_run *report_data_find(const struct report_data *d, enum zs_scheme s,
                                          unsigned world, enum zs_unit u);

/* Sorted distinct world sizes measured for a unit (any scheme), as many as
 * the file gives; returns the count and points *w at them (d's). */
size_t report_data_worlds(const struct report_data *d, enum zs_unit u, const unsigned **w);

/* Whether any run has unit u. */
int report_data_has_unit(const struct report_data *d, enum zs_unit u);

/* Names for text: "resident", "peak", "comm"; the category's JSON key. */
const char *report_metric_name(enum report_metric m);
const char *report_cat_name(enum report_cat c);

/* A phase's JSON name ("forward", ...). */
const char *report_phase_name(enum report_phase p);

/* Whether a category is model state (held between steps) rather than a
 * transient of the step. */
int report_cat_is_state(enum report_cat c);

#endif
