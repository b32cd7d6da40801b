/*
 * ag_exec — runs a PyTorch step described as data (util/autograd.h) with
 * real fp32 kernels: every ALLOC a buffer of exactly the storage's bytes
 * from the rank's tracker (its category the storage's), every FREE back to
 * it, every OP a kernel that reads its inputs and writes its outputs
 * through their views (shape, strides, offset over the storage's buffer;
 * strides may be 0 or permuted). Matrix products are OpenBLAS's sgemm with
 * the transposition flags and leading dimensions the views give; what BLAS
 * cannot take (a stride that is neither a row's nor a column's, a 16-bit
 * operand) is a plain loop. Kernels work in place on their outputs: the
 * executor allocates nothing the list does not (tests/test_rss.c).
 *
 * What it proves: a kernel may only touch a storage that is allocated at
 * that moment (a live table, checked before every op), through a view
 * that stays inside the storage's bytes, and read only a storage that
 * something wrote before (parameters and inputs are written by the feed,
 * everything else by an op). A description whose lifetimes are too short
 * to compute the step fails the run with a one-line cause naming the
 * event, the op and the tensor.
 *
 * The optimizer's step-dependent scalars are the executor's, since one
 * steady-state list serves every step (t counts from 1): in the optimizer
 * phase, ADDCDIV_ on a parameter gets −lr / (1 − β1^t) (Adam's
 * −step_size); the op that divides Adam's sqrt(v) temporary by
 * sqrt(1 − β2^t) (DIV_SCALAR_ on it, or MUL_SCALAR(_) by its inverse, or
 * DIV by a 0-dim tensor, which is filled with it) gets that value; and
 * ADAM_FUSED_ gets t. Every other scalar is the list's.
 *
 * Parameters' values are the feed's: a set-up op that writes only
 * parameters stands for nn.Module's initialisation and is not run.
 *
 * Conventions the executor reads from the list: a parameter tensor's
 * `param` is its step_params tensor and, where zerosim fuses Hugging
 * Face's tensors (llama's q/k/v, gate/up), `part` the block of whole rows
 * (part_rows) it is. gpt2's Conv1D weights are (in, out) in the list, as
 * Hugging Face holds them, and (out, in) in zerosim's flat vector
 * (docs/formats.md): the executor transposes them in and out. Every
 * AG_ROLE_INPUT storage of B·T int64 is filled with the batch's token ids
 * (the reference's `labels = input_ids.clone()`; the loss's pad and shift
 * are the list's ops); the loss is the NLL op's first output.
 *
 * Ownership: ag_exec_begin fills *x; ag_exec_end frees every buffer still
 * live through the tracker and the executor's own tables.
 */
#ifndef ZS_ENGINE_AG_EXEC_H
#define ZS_ENGINE_AG_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "engine/coll.h"
#include "engine/tracker.h"
#include "util/autograd.h"
#include "util/config.h"
#include "util/model.h"
#include "util/schedule.h"

/* Where parameters' and inputs' values come from. */
struct ag_exec_feed {
	void *ctx;
	/* Write the initial value of parameter storage t into data (its
	 * bytes); 0, or -1 with *cause. */
	int (*param)(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause);
	/* Write the batch of step `step` (0-based) into input storage t; 0,
	 * or -1 with *cause. */
	int (*input)(void *ctx, const struct ag_step *s, uint32_t t, unsigned step, void *data, char **cause);
	/* Where not NULL: write the initial value of LoRA adapter storage t
	 * (its tensor's adapter > 0) into data when the set-up makes it, in
	 * place of the set-up's ops that draw it (a case's adapters); 0, or
	 * -1 with *cause. NULL: the set-up's ops draw them. */
	int (*adapter)(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause);
};

struct ag_exec {
	const struct ag_step *s;
	struct ag_options o;
	struct zs_tracker *tr;
	unsigned rank;
	struct ag_exec_feed feed;
	void **buf;              /* per storage: its buffer while live, else NULL */
	unsigned char *written;  /* per storage: something wrote it since its ALLOC */
	unsigned char *sqrt_out; /* per storage: Adam's sqrt(v) temporary, not yet divided */
	unsigned steps;          /* steps run */
	int in_setup;            /* running s->setup */
	int record_marks;        /* log the tracker's bytes at each MARK (below) */
	char **mark_label;       /* the marks logged: label (owned), */
	size_t *mark_bytes;      /* the rank's live bytes there */
	size_t nmarks, capmarks;
	float loss;              /* the last NLL's value (plus a mixture's aux loss, added in place to it) */
	double loss_sum;         /* the step's NLL values summed (--grad-accum: one a micro-step) */
	int have_loss;
	uint32_t loss_t;         /* the last NLL's output tensor: an ADD_ into it changes the loss */
	struct zs_coll_stats comm; /* the steps' collectives (not set-up's), counted as coll.h's ring */
	/* A mixture's routing as the step's values make it: where moe_seen
	 * is set (the caller's, moe_seen_n elements), the j-th AG_OP_TOPK
	 * run since moe_topk was last zeroed counts each choice of its rows
	 * into moe_seen[j·C + choice], C its input's columns (the tokens per
	 * expert of block j, measured.json's "routing"). */
	uint64_t *moe_seen;
	size_t moe_seen_n;
	unsigned moe_topk;
};

/* Set up: run s->setup (its ALLOCs through tr on rank `rank`, parameters
 * fed as they are made). 0, or -1 with *cause (everything freed). */
int ag_exec_begin(struct ag_exec *x, const struct ag_step *s, const struct ag_options *o, struct zs_tracker *tr,
                  unsigned rank, const struct ag_exec_feed *feed, char **cause);
/* One step: first_step's events and the step's at the first, the step's
 * after. 0 with x->loss set, or -1 with *cause (the run is then only fit
 * for ag_exec_end). */
int ag_exec_step(struct ag_exec *x, char **cause);
/* The buffer of storage t while it is live, else NULL. */
void *ag_exec_data(const struct ag_exec *x, uint32_t t);
void ag_exec_end(struct ag_exec *x);

/* Run one event list on its own (tests): as a step's events. */
int ag_exec_events(struct ag_exec *x, const struct ag_event *ev, size_t n, char **cause);

/* N ranks of one step in lockstep (DDP, util/ag_ddp.h): x[k] is rank k
 * of tracker tr, fed by feed[k]; each rank runs its events up to a
 * collective (AG_OP_ALL_REDUCE_SUM_, AG_OP_BROADCAST_), then the
 * collective runs across the ranks (in place; a sum in fp32, ranks added
 * 0..N-1). As ag_exec_begin and ag_exec_step for every rank (ag_exec_end
 * each after). A collective met by ag_exec_events alone is an error. */
int ag_exec_begin_ranks(struct ag_exec *x, unsigned n, const struct ag_step *s, const struct ag_options *o,
                        struct zs_tracker *tr, const struct ag_exec_feed *feed, char **cause);
int ag_exec_step_ranks(struct ag_exec *x, unsigned n, char **cause);

#endif

/* ---- a transformer's plain training loop (--wrapper none) --------------- */

/* What one rank's run of the plain loop measured. */
struct ag_exec_result {
	size_t resident, peak;             /* after the last step; the run's peak */
	size_t resident_breakdown[ZS_NCATS];
	size_t peak_breakdown[ZS_NCATS];   /* when the peak was first reached (these: the binding rank's) */
	unsigned binding_rank;             /* the rank of the highest peak, the first of equals (zero1's
	                                    * ranks differ; dp's are equal: 0) */
	size_t first_step_peak;            /* the binding rank's most live in the first step, where it runs a
	                                    * list of its own (ag_step.step1); else 0 */
	float *losses;                     /* per step (malloc'd) */
	uint64_t digest;                   /* XXH3-64 of the final fp32 weights, zerosim's flat order */
	float *weights;                    /* the final weights in that order (want_weights), else NULL */
	char **mark_label;                 /* the last step's marks: each label (owned) and the binding */
	size_t *mark_bytes;                /* rank's live bytes there (the theory's "marks") */
	size_t nmarks;
	size_t *rank_mark_bytes;           /* zero1 (the ranks differ): every rank's at those marks,
	                                    * [rank][mark] (malloc'd); else NULL */
	unsigned world;                    /* the ranks run, and each one's */
	size_t *rank_resident, *rank_peak; /* resident and peak (malloc'd) */
	struct zs_coll_stats *rank_comm;   /* each rank's collectives over the steps (malloc'd) */
	size_t *routing;                   /* a mixture's tokens per expert, [step][block][expert], the
	                                    * values' own (malloc'd); else NULL */
	/* routing_blocks: a step's lists, under --grad-accum K the K
	 * micro-steps' blocks, micro-step major (routing_micro K, else 1) */
	size_t routing_blocks, routing_experts, routing_micro;
};

/* Train model hf (gpt2 or llama family) for c's steps, batch and lr
 * under the PyTorch options of c (ag_options_from_config) at sequence
 * `seq`: the step built by ag_step_build (and, under --wrapper ddp,
 * util/ag_ddp.h's pass for `world` ranks) and run by the executor on
 * `world` ranks in lockstep (ag_exec_step_ranks; --wrapper none: 1). The
 * initial weights are `init` (Ψ values in zerosim's flat order, a case's)
 * or, if NULL, the seed's (tfm_init_range, as the fused engine draws
 * them); the token ids are `tokens` ([step][world][batch][seq + 1], a
 * case's) or, if NULL, the seed's task (tfm_task_batch, each rank its
 * own). Rank k's blocks are rank k's of tr, the caller's (world ranks,
 * set up for ids, the allocator's replay, as any run's), which logs the
 * last step when want_timeline (rank 0's; 2: every rank's, --timeline-ranks
 * all); every block is freed again by the end.
 * A mixture (hf->experts > 0, --wrapper none) is built for the routing
 * its values make, which the list must know before it runs (every routed
 * tensor is sized by its expert's tokens): the run goes on a scratch
 * tracker from a balanced routing, and a step whose torch.where meets
 * another count than its list's is run again from its start (its state
 * given back) under a list built for the block its AG_OP_TOPK choices
 * (ag_exec.moe_seen) counted; then it runs once more on tr, each step by
 * its own list. The lists keep one shape, so a later step that leaves
 * other experts without a token than the first is refused, as is a first
 * step that leaves any (its .grad stays None, which the list does not
 * follow).
 * The losses are the ranks' mean; the digest and weights rank 0's, and
 * every rank's must equal them; the breakdowns and marks the binding
 * rank's (the highest peak: rank 0 where all are equal). 0, or -1 with
 * *cause. The caller frees out with ag_exec_result_free. */
int ag_exec_tfm_run(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                    const float *init, const int *tokens, int want_weights, struct zs_tracker *tr,
                    int want_timeline, struct ag_exec_result *out, char **cause);
/* The same, with LoRA's adapters starting from lora (nlora values in the
 * order ag_exec_tfm_adapters gives them: a case's "lora"), not drawn by
 * the set-up; NULL: drawn. */
int ag_exec_tfm_run_lora(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                         const float *init, const int *tokens, const float *lora, size_t nlora, int want_weights,
                         struct zs_tracker *tr, int want_timeline, struct ag_exec_result *out, char **cause);
void ag_exec_result_free(struct ag_exec_result *r);

/* LoRA's adapters (--lora-r) as the run of ag_exec_tfm_run (the same c,
 * hf, seq and world, the seed's weights) starts them: its set-up run on
 * every rank (the adapters drawn, DDP's broadcast) and rank 0's adapter
 * storages read in the step's order, which is model.parameters()'s (per
 * adapted layer lora_A [r, in], then lora_B [out, r]; under --wrapper
 * fsdp the plain loop's set-up, whose draws FSDP's repeats before it
 * flattens them). *vals (malloc'd,
 * the caller's; NULL with *n 0 where there are none). 0, or -1 with
 * *cause. For measure --write-case (the case's "lora"). */
int ag_exec_tfm_adapters(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                         float **vals, size_t *n, char **cause);

/* The run's bytes at its peak, from the list alone (for the sweep's
 * memory bound), or 0 where the step cannot be built. */
double ag_exec_tfm_peak_bytes(const struct zs_config *c, const struct zs_model *hf, uint64_t seq);
