/*
 * ag_fsdp — torch.distributed.fsdp.FullyShardedDataParallel over the
 * PyTorch step as data (util/autograd.h): a pass that takes the plain
 * loop's built step and makes one rank's step under FSDP (--wrapper fsdp;
 * docs/schedule.md, "FSDP over the PyTorch step"), as PyTorch 1.13 runs it
 * (2.6's FSDP1, o->version: the same but where the post-backward hook
 * says, and backward_prefetch None given, not its default BACKWARD_PRE):
 * ShardingStrategy.FULL_SHARD, transformer_auto_wrap_policy on the block
 * class (one unit per GPT2Block / LlamaDecoderLayer, the root unit holding
 * the rest), use_orig_params False, every other argument its default
 * (backward_prefetch None, forward_prefetch False, no mixed precision, no
 * CPU offload).
 *
 *   set-up   each unit's parameters flattened into one flat parameter of
 *            their elements (flatten_params' cat; the tied head's table
 *            once), padded to a multiple of N and cut into N shards; the
 *            rank keeps its own (_get_shard: chunk().clone(), F.pad), the
 *            originals and the flat copy are freed. The model's
 *            parameters become views of the unit's padded unsharded flat
 *            parameter (_full_param_padded), which exists only while
 *            gathered.
 *   forward  a unit's forward (the root's at the step's start): 1.13's
 *            record_function("FullyShardedDataParallel.forward"), the
 *            padded unsharded flat parameter allocated and all-gathered;
 *            a block's is freed after its forward (reshard after
 *            forward), the root's is kept for backward.
 *   backward a block's pre-backward hook (on its output's gradient): a
 *            record_function and the all-gather again; the root's (on the
 *            loss's) a record_function only. The parameters' gradients
 *            are the split's (SplitWithSizesBackward of the flat
 *            parameter's views): each held until the unit's last one is
 *            in, then cat into the unsharded flat gradient, the parts
 *            freed; AccumulateGrad's post hook (_post_backward_hook):
 *            a record_function, the gathered parameter freed (reshard),
 *            the gradient padded (F.pad, a copy even when nothing is
 *            padded; 2.6: only where something is), a zeros_like output
 *            shard (2.6: empty_like), the division by the
 *            pre-divide factor (a Python float: its wrapped number), the
 *            reduce-scatter, the post-divide where it is not 1, and the
 *            output kept as the shard's gradient (set_to_none) or added
 *            to it (zero_grad zeros) and freed, with the padded and the
 *            unsharded gradients.
 *   optimizer Adam over the sharded flat parameters (util/autograd.c's,
 *            ag_optimizer_events): its temporaries the size of a shard;
 *            zero_grad zeroes or frees each shard's gradient.
 *   frozen   (--freeze, LoRA's base) a unit whose parameters all require
 *            no grad: its flat parameter neither (1.13's FlatParameter
 *            takes no mix: ag_fsdp_check); gathered for its forward and
 *            its pre-backward hook as any, but no post-backward hook
 *            (_register_post_backward_hooks skips it), no gradient, no
 *            reduce-scatter, no Adam state: its gathered copy stays until
 *            backward's end (the root's _wait_for_post_backward:
 *            _catch_all_reshard over every unit, the root first), where
 *            a unit whose flat parameter is on its shard is skipped: under
 *            SHARD_GRAD_OP a frozen block with no pre-backward hook (its
 *            output requires no grad) keeps its gathered copy for good,
 *            gathered in the first step's own list. 2.x frees it (FULL_SHARD;
 *            SHARD_GRAD_OP when it syncs) when its inputs' gradients are
 *            in (the reshard-only hook), at its backward end mark.
 *   LoRA     PEFT's fsdp_auto_wrap_policy (peft/utils/other.py v0.20.0
 *            1259-1296): every leaf whose weight requires grad, lora_A and
 *            lora_B, a unit of its own nested in its block's (frozen)
 *            unit; the step marks each adapter's forward and backward
 *            (o->fsdp_unit_marks: "unit:lora.K.A:fwd" ...; consumed here):
 *            the forward unshards and reshards around the adapter's linear,
 *            the output's gradient hook unshards, the post-backward hook
 *            runs at the backward's end mark. The optimizer's order is
 *            model.parameters()': the root, each block then its adapters.
 *   use_orig_params (o->fsdp_orig_params, --fsdp-orig-params on; 2.6's
 *            FULL_SHARD or SHARD_GRAD_OP in fp32, any K): a unit may mix
 *            frozen and trainable parameters. The flat parameter requires
 *            grad where one of them does and the forward computes with
 *            Tensor views of it, so the step computes a frozen
 *            parameter's gradient too (util/autograd.c: its tensor's
 *            orig_frozen) into the split's cat and the reduce-scatter, as
 *            any; Adam steps the original trained parameters, each
 *            rank its pieces of its shard (a view of the shard, its
 *            .grad a view of the sharded gradient, exp_avg and
 *            exp_avg_sq the piece's size, a step counter each: only_rank
 *            events, each rank's bytes its own); optimizer.zero_grad
 *            (set_to_none) lets the original .grads go, and the sharded
 *            flat gradient goes at the root's next pre-forward
 *            (_reset_flat_param_grad_info_if_needed), the next
 *            reduce-scatter's output made as the same storage; a bare
 *            rank (its shard holds no trained piece: every original
 *            .grad None after a reduce-scatter) lets it go there after
 *            every reduce-scatter, under zeros and between micro-steps
 *            too (bare_free). With LoRA no PEFT policy: each block's
 *            unit holds its frozen base and its adapters, each adapter
 *            after its base layer (module.parameters()' order).
 *            Refused (ag_fsdp_check): padding inside a flat parameter
 *            (16-byte alignment, N-divisibility), checkpointing
 *            (docs/finetune.md, "FSDP with use_orig_params=True").
 *   step 1   (where the step has a first step of its own, ag_step.step1:
 *            1.13 without accumulation, frozen parameters or LoRA) the same
 *            pass over the plain loop's step 1: _lazy_init's zeros of each
 *            unit's padded size, made and freed, at the root's first
 *            forward; the first iteration's _check_order before each
 *            unit's forward unshard; no sharded gradient before it (the
 *            reduce-scatter's output kept as the shard's .grad) and
 *            Adam's state made inside the first step().
 *   --grad-accum K: forward and backward as above in each micro-step; with
 *            o->ddp_no_sync (FSDP's no_sync(), --fsdp-no-sync) the first
 *            K - 1 hooks reshard and return: the unsharded flat gradient
 *            stays the flat parameter's .grad, the next micro-step's
 *            AccumulateGrad adds into it, the last reduce-scatters it;
 *            without, each micro-step's output is added to the shard's.
 *
 * Three ops are appended for it (AG_OP_ALL_GATHER, AG_OP_REDUCE_SCATTER_SUM,
 * and AG_OP_SHARD for the set-up's own shard); the executor runs them
 * across its ranks, the theory counts the first two's traffic as the
 * ring's (gloo's and NCCL's own buffers are not PyTorch's allocator's).
 *
 * Refused (one line in *cause): a step whose parameters' gradients do not
 * each arrive once in backward, whose block marks are missing, or one of
 * whose units mixes frozen and trainable parameters (but under
 * use_orig_params).
 */
#ifndef ZS_UTIL_AG_FSDP_H
#define ZS_UTIL_AG_FSDP_H

#include "util/autograd.h"
#include "util/step.h"

/* Turn the plain loop's step s (ag_step_build of p under o) into one
 * rank's step under FSDP over `world` ranks: FULL_SHARD (torch's zero3),
 * or SHARD_GRAD_OP (shard_grad_op non-zero, torch's zero2). 0, or -1
 * with *cause (s is then unusable: the caller frees it). */
int ag_fsdp_apply(struct ag_step *s, const struct step_params *p, const struct ag_options *o, unsigned world,
                  int shard_grad_op, char **cause);

/* 0, or -1 with *cause when a unit of s (the plain loop's step of p
 * under o, as ag_fsdp_apply would wrap it over `world` ranks) holds
 * frozen and trainable parameters together without use_orig_params:
 * PyTorch's FlatParameter takes neither (the user's --freeze, refused);
 * or when 2.x's FSDP would reshard a frozen unit checkpointed
 * (o->recompute): not compared yet; or, under use_orig_params, what it
 * does not build (above). */
int ag_fsdp_check(const struct ag_step *s, const struct step_params *p, const struct ag_options *o, unsigned world,
                  char **cause);

/* FSDP's gradient division factors for N ranks (torch/distributed/
 * algorithms/_comm_hooks/default_hooks.py, DefaultState: the pre-divide
 * factor the largest power of two f with N % f == 0 and N / f > f ...
 * doubled from 1 while both hold; the post-divide N / pre). */
double ag_fsdp_predivide(unsigned world);

#endif
