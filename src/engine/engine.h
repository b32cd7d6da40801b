/*
 * engine — runs real training steps of a model (the MLP, or with --model a
 * transformer: net.h's layer list) across N ranks (in process, or under MPI those its process holds)
 * under one scheme, every buffer allocated through the tracker, and returns
 * what was measured. The step is docs/schedule.md's.
 *
 * Data: with no case file, the initial weights and every rank's batches come
 * from --seed through a counter-based generator (splitmix64), documented in
 * docs/formats.md; with a case file (zerosim-case/1 or /2) they come from it.
 *
 * Ownership: engine_run fills a zs_result the caller releases with
 * engine_result_free; engine_case_load and engine_case_from_seed return a
 * case the caller releases with engine_case_free.
 */
#ifndef ZS_ENGINE_H
#define ZS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/coll.h"
#include "engine/rng.h"
#include "engine/tracker.h"
#include "util/config.h"

struct zs_tfm_run;

/* A case (docs/formats.md, "Case"): an MLP's (tfm NULL: widths, x, y) or
 * a transformer's (tfm: the model, seq and recompute; tokens). */
struct zs_case {
	size_t widths[ZS_MAX_WIDTHS], nwidths;
	unsigned world, batch, steps;
	float *weights;   /* Ψ */
	char *weights_file; /* the side file they were read from, or NULL */
	float *x, *y;     /* [step][rank][batch][d0] and [step][rank][batch][dL] */
	struct zs_tfm_run *tfm;
	int *tokens;      /* [step][rank][batch][seq + 1]: inputs, then the
	                     next-token targets one place on; under
	                     grad_accum K, [step·K + micro-step][rank]... */
	unsigned grad_accum; /* a transformer's micro-steps a step (1: none) */
	uint64_t dropout_seed; /* a transformer's: the seed its dropout masks are drawn from, */
	int has_dropout_seed;  /* where the case gives one ("dropout_seed") */
	float *lora_init;   /* LoRA's adapters as the run started them (measure
	                       --write-case --lora-r: ag_exec_tfm_adapters), in
	                       model.parameters() order; NULL without (owned) */
	size_t nlora_init;
	char *lora_file;    /* the side file they were read from, or NULL */
	struct zs_config train; /* zerosim-case/2's training settings: those
	                           in train.given are the case's (case.c) */
};

struct zs_result {
	enum zs_scheme scheme;
	unsigned world;
	enum zs_unit unit;
	unsigned steps;
	size_t nunits, *unit_n;             /* each unit's elements (nunits of them) */
	size_t shard_elements, padded_elements;
	size_t *resident, *peak;            /* per rank, device bytes */
	size_t *host_resident, *host_peak;  /* per rank, host bytes (with --offload; else NULL) */
	unsigned binding_rank;              /* the rank with the highest peak */
	size_t first_step_peak;             /* the PyTorch step's first step, where it is a list of its own
	                                     * (util/autograd.h's step1): its most live, the binding rank's;
	                                     * else 0 (not written) */
	size_t resident_breakdown[ZS_NCATS];
	size_t peak_breakdown[ZS_NCATS];
	struct zs_coll_stats *comm;         /* per rank, whole run */
	size_t *os_peak;                    /* per rank: its process's peak RSS
	                                       (VmHWM) in this run; MPI only, else NULL */
	unsigned processes;                 /* the processes that held the ranks */
	int partial;                        /* under MPI, on processes other than 0:
	                                       other processes' ranks are missing */
	float *losses;                      /* per step */
	uint64_t digest;                    /* XXH3-64 of the final fp32 weights */
	struct zs_event *timeline;          /* rank 0, last step; NULL unless asked */
	size_t ntimeline;
	/* With a timeline: each logged rank's log (rank 0's live blocks at the
	 * step's start; with timeline_ranks, every rank's events and live
	 * blocks), ntimeline_logs of them; NULL unless asked. */
	struct zs_evlog *timeline_logs;
	unsigned ntimeline_logs;
	/* With an allocator replay: per rank, the caching allocator's figures
	 * over the whole run (tracker.h); NULL unless asked. */
	struct zs_alloc_rank *alloc;
	float *weights;                     /* final fp32 weights, Ψ; NULL unless asked */
	char **mark_label;                  /* the plain loop's (--wrapper none): the last step's */
	size_t *mark_bytes, nmarks;         /* marks, each label and the binding rank's live bytes there */
	size_t *rank_mark_bytes;            /* torch's zero1 over the PyTorch step (ranks differ): every
	                                       rank's at every mark, [rank][mark]; else NULL */
	/* A mixture of experts: the tokens each expert got in each block,
	 * [rank][step][block][expert] (world·steps·blocks·experts); else NULL.
	 * Under the PyTorch step's --grad-accum K, a step's routing_blocks
	 * lists are its K micro-steps' blocks, micro-step major (routing_micro
	 * K; 0 or 1: one list a block). */
	size_t *routing;
	size_t routing_blocks, routing_experts, routing_micro;
};

struct zs_run_options {
	int timeline;     /* record rank 0's events in the last step */
	int weights;      /* return the final weights */
	const float *init; /* engine_initial_weights(c), or NULL to compute
	                      them here; unused with a case file */
	int mpi;          /* the MPI backend (built with HAVE_MPI; mpi_job.h):
	                     this process runs its N/P ranks, process 0 gets
	                     the whole result */
	int timeline_ranks; /* with timeline: every rank's events, not rank 0's alone
	                       (in process only) */
	const struct cuda_alloc_opts *alloc; /* replay every rank's allocations through
	                                        PyTorch's caching allocator; NULL: none */
};

/* Run config's steps for one (scheme, world, unit). */
int engine_run(const struct zs_config *c, enum zs_scheme scheme, unsigned world, enum zs_unit unit,
               const struct zs_case *cs, const struct zs_run_options *opt, struct zs_result *out,
               char **cause);
void engine_result_free(struct zs_result *res);

/* An upper bound on the bytes all `world` ranks of one run allocate at
 * once, from its layout: the resident state as the scheme shards it, the
 * whole model's params and grads in transient copies if it shards any,
 * and every tensor. The sweep admits runs side by side by it and refuses
 * one the machine cannot hold before allocating anything. */
double engine_bytes_upper_bound(const struct zs_config *c, enum zs_scheme scheme, unsigned world,
                                enum zs_unit unit);

/* Load and check a case file. */
int engine_case_load(const char *path, struct zs_case **out, char **cause);
void engine_case_free(struct zs_case *cs);
/* The case a run of c at world size `world` without a case file trains:
 * the initial weights and every rank's batches from c's seed. */
struct zs_case *engine_case_from_seed(const struct zs_config *c, unsigned world);
/* Write cs as zerosim-case/2 with c's training settings (/3 with its
 * --freeze, the key "freeze"); a transformer's
 * weights go to the side file engine_case_side_path(path) names, and with
 * c->lora_r and cs->lora_init its adapters to engine_case_lora_path(path)'s
 * (the case's "lora" key). */
int engine_case_write(const char *path, const struct zs_case *cs, const struct zs_config *c, char **cause);
/* PATH without a trailing ".json", and ".f32" (the caller frees it). */
char *engine_case_side_path(const char *path);
/* PATH without a trailing ".json", and ".lora.f32" (the caller frees it). */
char *engine_case_lora_path(const char *path);

/* The generator behind --seed (rng.h's engine_uniform, a uniform float in
 * [-1, 1) for (seed, stream, index)) is here for tests too. */

/* The MLP's batch of rank k at step t from the seed (docs/formats.md):
 * x (B, d0), y (B, dL). */
void engine_mlp_batch(float *x, float *y, uint64_t seed, unsigned t, unsigned k, size_t B, size_t d0, size_t dL);
/* The same stream's rows [row, row + B) of a batch: micro-step m of K at
 * batch B draws rows m·B.., the slice m of the K·B rows engine_mlp_batch
 * draws at batch K·B. */
void engine_mlp_batch_rows(float *x, float *y, uint64_t seed, unsigned t, unsigned k, size_t row, size_t B,
                           size_t d0, size_t dL);

/* The initial fp32 weights --seed gives for c's layers: Ψ values in the
 * flat layout (malloc'd; the caller frees). A sweep computes them once and
 * hands them to every run, as a case file's weights are. NULL for a
 * transformer (c->tfm): each rank draws its own slots from the seed
 * (tfm_init_range), and no Ψ-sized copy is held outside the ranks. */
float *engine_initial_weights(const struct zs_config *c);

#endif
