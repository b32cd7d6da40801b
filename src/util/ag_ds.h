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
 * use_multi_rank_bucket_allreduce on, one param group, no offload; the
 * step's own --freeze, LoRA, --recompute full and --grad-accum K (each
 * micro-step the engine's backward: stage 2 reduces every one, adding
 * into averaged_gradients, stage 1 the last).
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

#endif
