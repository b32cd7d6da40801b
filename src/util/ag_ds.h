/*
 * ag_ds — DeepSpeed's engine (deepspeed.initialize over the user's model
 * and a client torch.optim.Adam) over the PyTorch step as data
 * (util/autograd.h): a pass that takes the plain loop's built step and
 * makes one list for every rank under DeepSpeedZeroOptimizer, ZeRO stage 1
 * or 2 in fp32 (--framework deepspeed --wrapper deepspeed; docs/schedule.md,
 * "DeepSpeed over the PyTorch step", has what it allocates, read at
 * DeepSpeed's commit 38327e0 with file and line), at the config's defaults
 * for those stages: contiguous_gradients on, overlap_comm and
 * round_robin_gradients off, reduce_scatter and
 * use_multi_rank_bucket_allreduce on, one param group, no offload, K = 1.
 *
 *   set-up   the trainable parameters (the client Adam's, in its order)
 *            flattened into one buffer padded to a multiple of 2N, each
 *            parameter a view of it; the rank's fp32 partition a clone of
 *            its S = len / N elements;
 *   backward the reduce bucket (reduce_bucket_size elements); loss * 1.0
 *            and its MulBackward; each gradient copied into the bucket and
 *            freed (stage 2 at its AccumulateGrad hook, stage 1 after
 *            backward, in group order); a full bucket (and backward's
 *            end) divided by N in place, its slices all-reduced through
 *            one flat copy and copied back on the ranks that own them,
 *            the rank's own parameters' gradients copied into
 *            grads_in_partition; the epilogue's views and the last rank's
 *            padding;
 *   step     the gradient norm, the flat fp32 gradient partition, the
 *            client Adam over the fp32 partition, the copy back into the
 *            flat buffer and its all-gather.
 *
 * The ranks differ (their partition, grads_in_partition's whole tensors,
 * the last rank's padding): those events are sections marked with their
 * rank (ag_event.only_rank), as ZeroRedundancyOptimizer's are, so one list
 * serves every rank; the engine runs each rank's own, the theory sums
 * them rank by rank.
 */
#ifndef ZS_UTIL_AG_DS_H
#define ZS_UTIL_AG_DS_H

#include "util/autograd.h"

/* Turn the plain loop's step s (built under o with zero_grad none: the
 * engine's own zero_grad sets every .grad to None) into the step under
 * DeepSpeed's ZeRO stage 1 (stage2 0) or 2 over `world` ranks with a
 * reduce bucket of `bucket` elements. 0; -1 with *cause where a
 * parameter is larger than the bucket (not built: s is unchanged); -2
 * with *cause where the step is not one the pass takes (an internal
 * error: s is then only to be freed). */
int ag_ds_apply(struct ag_step *s, const struct ag_options *o, unsigned world, int stage2, uint64_t bucket,
                char **cause);

/* What util/ag_ds3.c (ZeRO-3) shares with stages 1 and 2. */
struct ag_pass;
/* The client Adam's parameters (storages below nt0 that trained[]
 * marks) in its order, the optimizer's first write of each: w[k] is the
 * k-th, k_of[t] its place (-1 for the rest; arrays of nt0). How many. */
size_t ag_ds_order(const struct ag_step *s, size_t nt0, const unsigned char *trained, uint32_t *w, int32_t *k_of);
/* The model's parameters w[0..n) made views of storage `flat` at off[k]
 * (and every view of them a view of it), after stand-ins of their own
 * that the set-up list, copied into the pass, fills: the stand-ins by
 * storage (orig[t], AG_NONE for the rest: the caller frees the array). */
uint32_t *ag_ds_flat_views(struct ag_pass *p, size_t nt0, const uint32_t *w, const int32_t *k_of, size_t n,
                           const uint64_t *off, uint32_t flat);
/* loss_scaler.backward in fp32 (a static scale of 1) around the step's
 * backward: init finds the loss, begin writes loss * 1.0 where backward
 * starts, after follows each event the pass copied (MulBackward0 and
 * the product's release); done says whether all of it was found. */
struct ag_ds_scaler {
	uint32_t loss, one, wrapped, scaled, gl;
	int await_one;
};
void ag_ds_scaler_init(struct ag_ds_scaler *sc, const struct ag_step *s);
void ag_ds_scaler_begin(struct ag_pass *p, struct ag_ds_scaler *sc, enum zs_phase ph);
void ag_ds_scaler_after(struct ag_pass *p, struct ag_ds_scaler *sc, const struct ag_event *e);
int ag_ds_scaler_done(const struct ag_ds_scaler *sc);
/* A 1-D view of n elements of storage `flat` at element `at`. */
uint32_t ag_ds_view(struct ag_pass *p, uint32_t flat, uint64_t at, uint64_t n);
/* A storage made (allocated) and filled with v. */
uint32_t ag_ds_made(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat,
                    double v, enum zs_phase ph);

#endif
