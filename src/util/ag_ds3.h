/*
 * ag_ds3 — DeepSpeed's ZeRO-3 (DeepSpeedZeroOptimizer_Stage3, its
 * DeepSpeedZeRoOffload hooks) over the PyTorch step as data
 * (util/autograd.h): a pass over the plain loop's built step, as
 * util/ag_ds.h's for stages 1 and 2 (--framework deepspeed --wrapper
 * deepspeed --schemes zero3; docs/schedule.md, "ZeRO-3 over the PyTorch
 * step", has what it allocates, read at DeepSpeed's commit 38327e0 with
 * file and line), fp32, DeepSpeed's defaults, no offload; --grad-accum
 * K (each micro-step reduce-scattered into the gradient partitions,
 * copied at the first and added after: docs/schedule.md, "Gradient
 * accumulation under ZeRO-3"; its first step at N > 1 the steady step's,
 * --steps 1 refused there); frozen
 * parameters (LoRA's base, --freeze) partitioned as the trained ones, each
 * its own ds_tensor (docs/finetune.md, "LoRA and --freeze under --wrapper
 * deepspeed --schemes zero3").
 * Built at N = 1, where a module's fetch and release allocate nothing,
 * and at N > 1 the steady step where every parameter persists (at most
 * 1e5 elements: the forward and backward gather nothing and read
 * _post_step's copies), and step 1 as a list of its own that starts
 * with nothing gathered and gathers and releases leaf module by leaf
 * module at the step's ds3 marks (o->ds3_leaf_marks; where they are not
 * described step 1 is the steady step, --steps 1 refused);
 * docs/schedule.md, "ZeRO-3 over the PyTorch step":
 *
 *   set-up   each parameter broadcast, partitioned (its ds_tensor) and
 *            its data freed (Init(module=...)); the partitions moved into
 *            one buffer (defragment), each parameter a view of it (N > 1:
 *            of its gathered copy, ceil(n/N)·N elements); the
 *            fp32 partition, a zeros of the whole parameters' elements
 *            made and dropped, the reduce bucket and the gradient
 *            partitions (kept); each parameter gathered and freed again
 *            where its gradient hook is made; N > 1 without the marks:
 *            the persistent parameters gathered as _post_step leaves them;
 *   backward loss * 1.0 and its MulBackward; each gradient copied into
 *            the bucket at its AccumulateGrad hook and freed, a full
 *            bucket (and backward's end) reduce-scattered (one gradient
 *            in place, several through their cat in ds_id order) into
 *            the gradient partitions;
 *   step     the gradient norm in float64, the fp32 gradient (a cat of
 *            the partitions), the client Adam over the fp32 partition,
 *            the copy back into the parameters' buffer; N > 1: every
 *            gathered copy released first, the persistent ones gathered
 *            again at the end (_post_step).
 */
#ifndef ZS_UTIL_AG_DS3_H
#define ZS_UTIL_AG_DS3_H

#include "util/autograd.h"

/* Turn the plain loop's step s of parameters sp (built under o with
 * zero_grad none) into the step under DeepSpeed's ZeRO-3 over `world`
 * ranks with a reduce bucket of `bucket` elements (wmax: the largest N the run lists, whose
 * refusals are the input's at any N); order: the model's parameter
 * storages in module.parameters()' order (norder of them), trained and
 * frozen. 0; -1 with *cause where the input is not
 * built (a parameter larger than the bucket, exactly one
 * persistent parameter, at N > 1 one that does not persist, more than sub_group_size's 1e9 parameters: s is
 * unchanged); -2 with *cause where the step is
 * not one the pass takes (an internal error: s is then only to be freed). */
int ag_ds3_apply(struct ag_step *s, const struct step_params *sp, const struct ag_options *o, unsigned world,
                 unsigned wmax, uint64_t bucket, const uint32_t *order, size_t norder, char **cause);

#endif
