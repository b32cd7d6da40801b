/*
 * ag_ddp — torch.nn.parallel.DistributedDataParallel over the PyTorch step
 * as data (util/autograd.h): a pass that takes the plain loop's built step
 * and adds what DDP allocates and runs for one rank (--wrapper ddp;
 * docs/schedule.md, "DDP over the PyTorch step"), at the release's defaults
 * (bucket_cap_mb, dist._DEFAULT_FIRST_BUCKET_BYTES 1 MiB, broadcast_buffers
 * True, gradient_as_bucket_view False, find_unused_parameters False, or
 * True: below):
 *
 *   set-up   the construction's broadcast of the parameters and buffers
 *            (_sync_module_states -> dist._broadcast_coalesced: a flat copy
 *            of each dtype's bucket of 250 MiB made, broadcast, copied back
 *            and freed) and the reducer's buckets, one fp32 storage each
 *            (or the constructor's one bucket where the first step is a
 *            list of its own: below), laid out as the rebuild after the
 *            first iteration lays them
 *            (reducer.cpp rebuild_buckets: the parameters in the order
 *            their gradients became ready, a first bucket of 1 MiB (2.6
 *            with bucket_cap_mb given: of the cap; ag_ddp_first_bucket_bytes),
 *            then bucket_cap_mb each; compute_bucket_assignment_by_size closes a
 *            bucket once it reaches its limit);
 *   forward  1.13's record_function("DistributedDataParallel.forward")
 *            handles (CPU tensors: a zeros(1) and 288 bytes), and the
 *            buffers' broadcast (DDP._sync_buffers; bool buffers left out:
 *            gloo takes none);
 *   backward at each parameter's AccumulateGrad hook (after .grad += g,
 *            before g is freed): Reducer::mark_variable_ready's
 *            copy_grad_to_bucket, at::mul_out(bucket_view, grad, 1/N) with
 *            its 8-byte wrapped number and the 4-byte float copy; when a
 *            bucket's last gradient is in, the bucket's all-reduce (a sum:
 *            the division is the copy's);
 *   finalize at backward's end (Reducer::finalize_backward), each grad
 *            copied back from its bucket view (copy_bucket_to_grad).
 *
 * Under gradient accumulation (K micro-steps) with o->ddp_no_sync, the
 * first K - 1 run inside no_sync(): no hook copies, no all-reduce, no
 * finalize, and the forward after such a micro-step broadcasts no buffers
 * (docs/schedule.md, "Gradient accumulation over the PyTorch step");
 * without it every micro-step synchronizes.
 *
 * Two ops are appended to the step's ops for the collectives
 * (AG_OP_ALL_REDUCE_SUM_, AG_OP_BROADCAST_); the executor runs them across
 * its ranks; the theory adds no memory for them (gloo's own buffers are
 * not PyTorch's allocator's) and counts their traffic as the ring's.
 *
 * The first iteration's buckets: DDP (with find_unused_parameters False)
 * reduces one bucket of every parameter in its first iteration
 * (bucket_size_limits [sys.maxsize]: distributed.py 1.13 line 721, 2.6.0
 * line 1169), Psi * 4 bytes as the rebuilt buckets together are, laid out
 * in the module's parameter order; rebuild_buckets at the second forward
 * (after sync_bucket_indices' broadcast of the int32 indices and sizes)
 * clears it before it makes the new ones (initialize_buckets:
 * buckets_.clear() first). Where the step's first step is a list of its
 * own (ag_step.step1: dp and zero1), the set-up holds that bucket, step
 * 1 runs on it and step 2 (ag_step.step2) rebuilds it in its forward --
 * the forward after the first synchronized backward: under --grad-accum
 * K > 1 without no_sync() step 1's second micro-step's, so step 1 holds
 * the rebuild and step 2 is the steady step; else the set-up holds the rebuilt buckets and the steady step
 * is every step's (only the first step's all-reduce, one not one a
 * bucket, and its place differ, which hold no byte). The layout of several
 * buckets is held to PyTorch's own (the reducer's rebuilt_bucket_sizes) by
 * tests/hf_torch.sh's ddp2-gpt2-buckets, under 1.13 and 2.6; the first
 * step's peak to 1.13's step_peaks[0] by its ddp2-* cases.
 *
 * With find_unused_parameters True (--ddp-find-unused on; 1.13, K = 1,
 * as Hugging Face's Trainer passes it without gradient checkpointing)
 * three things differ, the rest as above (docs/schedule.md,
 * "find_unused_parameters"), and a fourth where a parameter is unused:
 *   set-up   the buckets are the constructor's and never rebuilt: cut in
 *            the module's parameter order with limits [1 MiB,
 *            bucket_cap_mb], the list reversed (the last parameters'
 *            bucket first), each laid out in parameter order; after them
 *            the reducer's two used-parameter maps (int32, one a
 *            parameter: 8 bytes a parameter tensor, resident);
 *   forward  _DDPSink clones the outputs (the loss, then the logits) and
 *            the model's own go as DDP's forward returns: the loop holds
 *            the clones;
 *   backward each bucket all-reduced in the reducer's order once it and
 *            those before it are complete; after the last, the used map
 *            copied into its device twin and all-reduced (its values,
 *            every parameter used, are not computed: no byte or later op
 *            depends on them);
 *   unused   a parameter whose grad the step never accumulates (a
 *            mixture's expert that got no token on this rank: the list
 *            runs the hit experts only) is found by the reducer after
 *            forward (search_unused_parameters) and marked ready at the
 *            step's first hook, before that hook's own parameter: its
 *            grad (the zeros zero_grad left) copied into its bucket view
 *            by the same mul_out, the buckets completing as their slots
 *            do. At finalize the reducer copies the all-reduced slot
 *            back only where another rank used it; the step here copies
 *            it always, the same bits (the sum of zeros over zeros).
 *            Bytes: only the marks' transients (docs/schedule.md, "An
 *            expert idle on a rank").
 *
 * The hooks are placed at the list's AG_EV_GRAD_READY events (zero_grad
 * zeros: after .grad += g; set_to_none: where AccumulateGrad takes g as
 * .grad or its copy). What is refused (one line in *cause): a step whose
 * parameters' gradients do not each arrive once in backward (at most
 * once, under find_unused_parameters).
 */
#ifndef ZS_UTIL_AG_DDP_H
#define ZS_UTIL_AG_DDP_H

#include "util/autograd.h"

/* torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES (distributed_c10d.py:
 * 1024 * 1024) and DDP's broadcast_bucket_size (distributed.py:
 * int(250 * 1024 * 1024)). */
#define AG_DDP_FIRST_BUCKET_BYTES (1024.0 * 1024.0)
#define AG_DDP_BROADCAST_BUCKET_BYTES (250.0 * 1024.0 * 1024.0)

/* The first bucket's limit in bytes (the reducer's first_bucket_bytes_cap,
 * which rebuild_buckets puts before bucket_cap_mb's): 1.13 passes
 * _DEFAULT_FIRST_BUCKET_BYTES always (distributed.py 1.13, _ddp_init_helper);
 * 2.x only while bucket_cap_mb is left at None, and the cap itself once a
 * bucket_cap_mb is given (distributed.py 2.6.0, lines 796-802 and 1211-1217:
 * bucket_bytes_cap_default) -- so c's cap where --bucket-cap is given under
 * 2.6. Seen in PyTorch's own rebuilt_bucket_sizes (tests/hf_torch.sh,
 * ddp2-gpt2-buckets): bucket_cap_mb=0.25 gives 1.13 a first bucket of
 * 1,056,768 B and 2.6 one of 263,680 B. */
double ag_ddp_first_bucket_bytes(const struct zs_config *c);

/* Turn the plain loop's step s (ag_step_build under o) into one rank's
 * step under DDP over `world` ranks with buckets of bucket_cap_mb MiB, the
 * first of first_bucket_bytes, find_unused_parameters as find_unused says
 * (above); sp, the parameters s was built from, gives
 * the module order of the states DDP broadcasts. 0, or -1 with *cause (s
 * is then unchanged). */
int ag_ddp_apply(struct ag_step *s, const struct step_params *sp, const struct ag_options *o, unsigned world,
                 double bucket_cap_mb, double first_bucket_bytes, int find_unused, char **cause);

/* Whether the run's scheme is torch's zero1 (--wrapper ddp takes one
 * scheme a run, dp or zero1: util/config.c). */
int ag_zero1_scheme(const struct zs_config *c);

/* The run's step: ag_step_build, and under --wrapper ddp (c->wrapper) the
 * pass above for `world` ranks (dp: the bytes do not depend on it, only
 * the hooks' 1/N does; zero1: Adam inside ZeroRedundancyOptimizer over
 * `world` ranks, util/ag_zero1.h, each rank's bytes its own), under
 * --wrapper fsdp util/ag_fsdp.h's (each unit's shard is 1/N of it), under
 * --wrapper deepspeed util/ag_ds.h's. 0; -1
 * with *cause where ag_step_build refuses the model or options, or
 * DeepSpeed's pass a parameter larger than its bucket (bad input); -2 with *cause where a pass fails on the built step (an
 * internal error: a run-time failure, not the user's input). Nothing is
 * left to free either way. */
int ag_step_build_run(struct ag_step *s, const struct zs_model *m, const struct step_params *p,
                      const struct ag_options *o, const struct zs_config *c, unsigned world, char **cause);

#endif
