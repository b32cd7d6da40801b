/*
 * layout — where every element of a run's model state lives, as data
 * (docs/schedule.md, "Units, padding, shards" and "Resident model state").
 *
 * The flat parameter vector is cut into units; a unit of n elements gives
 * each rank s = ceil(n/N) slots, rank k's being [k·s, (k+1)·s). Every
 * per-parameter buffer of a rank is one of enum zs_rankbuf. A resident buffer
 * is full (the Ψ elements, each at its own index) or a shard (the rank's
 * slots of every unit, unit after unit: S = Σ s_u elements), as the
 * scheme's row of zs_shards says for its state; the transient ones are
 * full copies of a few units. layout_own answers the one question the
 * driver and the schemes ask of it: which elements of buffer X of unit u
 * rank k owns, and where they are.
 *
 * A framework's row may hold the optimizer state as whole tensors
 * (ZS_TENSORS, torch's ZeroRedundancyOptimizer): each parameter tensor of
 * the model is owned by one rank, which holds its optimizer state packed
 * with its other tensors' (at `at`); params and grads are then full. Its
 * pieces, what the optimizer walks and layout_own answers for, are the
 * tensors instead of the units.
 *
 * The N = 1 rule: with one rank a shard is the whole unit, so a run's row
 * is all full at N = 1 (layout_init). The paper's schemes then run no hook
 * (their registry rows give scheme_one_rank at N = 1, scheme.h), since
 * nothing is sharded, gathered or reduced; torch's DDP and FSDP (NO_SHARD)
 * and DeepSpeed's stages keep hooks at N = 1, as the libraries keep their
 * buffers and casts.
 */
#ifndef ZS_LAYOUT_H
#define ZS_LAYOUT_H

#include <stddef.h>

#include "engine/net.h"
#include "util/config.h"
#include "util/freeze.h"
#include "util/schedule.h"

/* A rank's per-parameter buffers. Not `enum zs_buf`: C's enum and struct
 * tags share one namespace, and struct zs_buf is util/buf.h's text buffer,
 * so a file could not include both. */
enum zs_rankbuf {
	/* resident model state: full or shard, as the run's row says */
	ZS_BUF_PARAMS,     /* working params: fp16 (mixed) or fp32 */
	ZS_BUF_GRADS,      /* same type as the params */
	ZS_BUF_MASTER,     /* fp32 master weights (mixed only) */
	ZS_BUF_M,          /* Adam's first moment, or SGD's momentum */
	ZS_BUF_V,          /* Adam's second moment */
	/* transient full copies of some units (zero2, zero3) */
	ZS_BUF_GATHERED,   /* params gathered for compute */
	ZS_BUF_FULL_GRADS, /* grads written by backward before the reduce-scatter */
	ZS_NBUFS
};

struct zs_layout_unit {
	size_t off, n;     /* its elements [off, off + n) of the flat vector */
	size_t s;          /* slots per rank: ceil(n / N) */
	size_t soff;       /* where a rank's slots of it start in a shard */
	size_t first, last; /* its layers */
	/* What the optimizer steps of it (--freeze: its trainable elements,
	 * one run; else all of them): [toff, toff + tn) of the flat vector,
	 * ts = ceil(tn / N) slots a rank, at tsoff in a shard and at tbase in
	 * a full buffer of the grads or the optimizer state, which hold the
	 * trainable elements only, unit after unit (docs/schedule.md, "Frozen
	 * parameters under the paper's schedule"). */
	size_t toff, tn, ts, tsoff, tbase;
};

/* A parameter tensor: its elements [off, off + n) of the flat vector, the
 * rank it is assigned to (ZS_TENSORS rows) and where it starts in that
 * rank's packed optimizer state. */
struct zs_layout_tensor {
	size_t off, n, at;
	unsigned owner;
	size_t s, soff;    /* per-tensor shards (layout_shard_tensors): ceil(n/N), where they start */
	size_t unit;       /* the unit it is in */
	/* Per-tensor shards of what the optimizer steps (--freeze under
	 * DeepSpeed's ZeRO-3: a frozen tensor has none): tn = n or 0, ts =
	 * ceil(tn/N) slots at tsoff in a shard, at tbase in a full buffer of
	 * the trainable elements (layout_freeze). */
	size_t tn, ts, tsoff, tbase;
	/* QLoRA's 4-bit base under DeepSpeed's ZeRO-3 (layout_pack): n is
	 * its codes' elements, and in a full params buffer they are at flat
	 * index nparams + pat */
	int packed;
	size_t pat;
};

struct zs_layout {
	size_t nparams;    /* Ψ */
	unsigned world;    /* N */
	enum zs_unit mode; /* what the units are: the whole model, or layers */
	size_t nunits;
	struct zs_layout_unit *unit;   /* nunits of them: at most one a layer (malloc'd) */
	size_t shard;      /* S = Σ s_u */
	size_t ntrain, tshard; /* Ψ_t = Σ tn_u, S_t = Σ ts_u: the grads' and optimizer state's full and shard */
	enum zs_span span[ZS_NSTATES]; /* the scheme's row; all full at N = 1 */
	size_t ntensors;
	struct zs_layout_tensor *tensor; /* ntensors of them (malloc'd) */
	int per_tensor;    /* shards cut per tensor (layout_shard_tensors) */
	/* --quant-base nf4 under zerosim's own step (layout_quantize): the
	 * elements of the flat vector the params buffer does not hold, the
	 * 4-bit base's weights, nholes runs in order (each a slice: its
	 * elements, and at the holes' elements before it), quant in all */
	size_t nholes, quant;
	struct zs_slice *hole;
	size_t packed;     /* the packed tensors' codes in all (layout_pack) */
};

/* The elements [first, first + count) of the flat vector, held at element
 * `at` of a buffer. */
struct zs_slice {
	size_t first, count, at;
};

/* unit=model: one unit of every layer; unit=layer: one unit per layer
 * that owns params (a layer without params joins the unit before it).
 * The units and tensors are malloc'd: layout_free releases them. */
void layout_init(struct zs_layout *lo, const struct zs_net *m, enum zs_scheme scheme, unsigned world,
                 enum zs_unit unit);
void layout_free(struct zs_layout *lo);

/* --freeze (the paper's schedule): unit u steps only the elements
 * [run[u].off, run[u].off + run[u].n) (util/step.h's zs_freeze_units, nunits of
 * them, the layout's units in order). Shards cut per tensor
 * (layout_shard_tensors, before): a tensor inside its unit's run is
 * trainable, the others frozen, and the trainable ones' shards are cut
 * per tensor too (DeepSpeed's ZeRO-3: docs/schedule.md, "Frozen
 * parameters under DeepSpeed"). */
void layout_freeze(struct zs_layout *lo, const struct zs_freeze_run *run, size_t nunits);

/* QLoRA's 4-bit base (docs/finetune.md, "QLoRA under the paper's step
 * and DeepSpeed's own step"): the flat vector's runs hole[0..n) (their
 * first and count, in order, apart) are held in 4 bits outside the
 * run's buffers (engine.c's q4 storages), so the params buffer holds
 * the other elements in order, Ψ − Σ count of them. Full params, or
 * shards per tensor (DeepSpeed's ZeRO-3: layout_pack); a flat index of
 * a full one reads layout_params_at. */
void layout_quantize(struct zs_layout *lo, const struct zs_slice *hole, size_t n);
/* The 4-bit base under DeepSpeed's ZeRO-3 (docs/finetune.md, "QLoRA
 * under DeepSpeed's own ZeRO-3"; after layout_quantize, the tensor's
 * elements a hole): tensor t's params are its packed codes, n elements
 * of the params' dtype (util/nf4.h's nf4_tensor_storage), partitioned
 * as any tensor's once layout_shard_tensors cuts the shards again; in a
 * full params buffer (N = 1) they follow the held elements, tensor after
 * tensor, at flat index nparams + pat (which layout_params_at maps past
 * every hole). */
void layout_pack(struct zs_layout *lo, size_t t, size_t n);
/* Where flat element e (held: outside every hole) is in the params
 * buffer: e itself without holes. */
size_t layout_params_at(const struct zs_layout *lo, size_t e);
/* From flat element *e, moved past a hole it is in, up to `end`: how many
 * elements the params buffer holds one after another (0 at `end`). */
size_t layout_held(const struct zs_layout *lo, size_t *e, size_t end);

/* Whether buffer b holds what the optimizer steps (the grads and the
 * optimizer state: the trainable elements) rather than the params. */
int layout_trained(enum zs_rankbuf b);

/* Lay the run out by a framework's row (zs_row) instead of the paper's;
 * no change at N = 1. A ZS_TENSORS row assigns the tensors as
 * ZeroRedundancyOptimizer's _partition_parameters does: largest first
 * (ties in model order), each to the rank with the fewest elements so far
 * (the lowest such rank). */
void layout_use_row(struct zs_layout *lo, const enum zs_span *row);

/* Shard every parameter tensor on its own, as DeepSpeed's ZeRO-3 does
 * (partition_parameters.py _partition_param): tensor t gives each rank
 * s_t = ceil(n_t/N) slots, rank k's [k·s_t, (k+1)·s_t) of it, and a shard
 * is the rank's slots of every tensor, tensor after tensor (S = Σ s_t).
 * The pieces are then the tensors. */
void layout_shard_tensors(struct zs_layout *lo);

/* What the optimizer walks: the units, or the tensors (ZS_TENSORS, or
 * shards per tensor). */
size_t layout_npieces(const struct zs_layout *lo);

/* Elements rank k's resident buffer b holds (Ψ, S, or its tensors'). */
size_t layout_rank_len(const struct zs_layout *lo, enum zs_rankbuf b, unsigned k);

/* The state a resident buffer belongs to, and whether it is full or a
 * shard in this run. */
enum zs_state layout_state(enum zs_rankbuf b);
enum zs_span layout_span(const struct zs_layout *lo, enum zs_rankbuf b);

/* Elements a resident buffer holds: Ψ (full) or S (shard); Ψ, a bound,
 * for whole tensors (layout_rank_len is exact). */
size_t layout_len(const struct zs_layout *lo, enum zs_rankbuf b);

/* The elements of piece u (unit u, or tensor u with ZS_TENSORS: all of
 * it for its owner, none for the others) that rank k owns in resident
 * buffer b, and where they are in it. A rank owns what its optimizer updates: its slots when
 * the optimizer state is sharded (their real elements: none for a rank
 * holding only padding), else the whole unit. In a shard they start at
 * the unit's soff; in a full buffer at their own index. For a buffer of
 * the trainable elements (layout_trained) they are the unit's trainable
 * run cut the same way (toff, tn, ts, tsoff; at tbase in a full one). */
struct zs_slice layout_own(const struct zs_layout *lo, enum zs_rankbuf b, size_t u, unsigned k);

#endif
