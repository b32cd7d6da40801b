/*
 * ag_ddp — torch.nn.parallel.DistributedDataParallel over the PyTorch step
 * as data (util/autograd.h): a pass that takes the plain loop's built step
 * and adds what DDP allocates and runs for one rank (--wrapper ddp;
 * docs/schedule.md, "DDP over the PyTorch step"), at the release's defaults
 * (bucket_cap_mb, dist._DEFAULT_FIRST_BUCKET_BYTES 1 MiB, broadcast_buffers
 * True, gradient_as_bucket_view False, find_unused_parameters False):
 *
 *   set-up   the construction's broadcast of the parameters and buffers
 *            (_sync_module_states -> dist._broadcast_coalesced: a flat copy
 *            of each dtype's bucket of 250 MiB made, broadcast, copied back
 *            and freed) and the reducer's buckets, one fp32 storage each,
 *            laid out as the rebuild after the first iteration lays them
 *            (reducer.cpp rebuild_buckets: the parameters in the order
 *            their gradients became ready, a first bucket of 1 MiB, then
 *            bucket_cap_mb each; compute_bucket_assignment_by_size closes a
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
 * Two ops are appended to the step's ops for the collectives
 * (AG_OP_ALL_REDUCE_SUM_, AG_OP_BROADCAST_); the executor runs them across
 * its ranks; the theory adds no memory for them (gloo's own buffers are
 * not PyTorch's allocator's) and counts their traffic as the ring's.
 *
 * Not modelled: the first iteration's buckets (DDP reduces one bucket of
 * every parameter, bucket_size_limits [sys.maxsize], until the rebuild
 * at the second forward, when old and new buckets live together for a
 * moment): the step here is the steady one, the buckets rebuilt from
 * set-up. A model whose gradients fit the first bucket (the tests' tiny
 * ones) has the same one bucket either way; beyond that, the layout of
 * several buckets is PyTorch's rule read from source, not yet held to a
 * PyTorch run.
 *
 * The hooks are placed at the list's AG_EV_GRAD_READY events (zero_grad
 * zeros: after .grad += g; set_to_none: where AccumulateGrad takes g as
 * .grad or its copy). What is refused (one line in *cause): a step whose
 * parameters' gradients do not each arrive once in backward.
 */
#ifndef ZS_UTIL_AG_DDP_H
#define ZS_UTIL_AG_DDP_H

#include "util/autograd.h"

/* torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES (distributed_c10d.py:
 * 1024 * 1024) and DDP's broadcast_bucket_size (distributed.py:
 * int(250 * 1024 * 1024)). */
#define AG_DDP_FIRST_BUCKET_BYTES (1024.0 * 1024.0)
#define AG_DDP_BROADCAST_BUCKET_BYTES (250.0 * 1024.0 * 1024.0)

/* Turn the plain loop's step s (ag_step_build under o) into one rank's
 * step under DDP over `world` ranks with buckets of bucket_cap_mb MiB.
 * 0, or -1 with *cause (s is then unchanged). */
int ag_ddp_apply(struct ag_step *s, const struct ag_options *o, unsigned world, double bucket_cap_mb, char **cause);

/* The run's step: ag_step_build, and under --wrapper ddp (c->wrapper) the
 * pass above for `world` ranks (the bytes do not depend on it: only the
 * hooks' 1/N does), under --wrapper fsdp util/ag_fsdp.h's (each unit's
 * shard is 1/N of it). 0, or -1 with *cause (nothing left to free). */
int ag_step_build_run(struct ag_step *s, const struct zs_model *m, const struct step_params *p,
                      const struct ag_options *o, const struct zs_config *c, unsigned world, char **cause);

#endif
