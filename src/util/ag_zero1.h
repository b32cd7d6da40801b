/*
 * ag_zero1 — torch.distributed.optim.ZeroRedundancyOptimizer over DDP on
 * the PyTorch step as data (util/autograd.h): torch's zero1, `--framework
 * torch --wrapper ddp --schemes zero1` (docs/schedule.md,
 * "ZeroRedundancyOptimizer over the PyTorch step"), made as a training
 * script makes it, ZeroRedundancyOptimizer(model.parameters(),
 * optimizer_class=torch.optim.Adam, lr=...) (with frozen parameters,
 * --freeze or LoRA's base, the requires_grad ones alone, as
 * Trainer.create_optimizer filters them) at the release's defaults
 * (parameters_as_bucket_view False, overlap_with_ddp False). Written from
 * PyTorch 1.13's torch/distributed/optim/zero_redundancy_optimizer.py
 * (Debian 12's python3-torch) and 2.6's (Debian 13's), which agree here:
 *
 *   partition  _partition_parameters (1.13 616-681, 2.6 641-700): the
 *              parameters sorted by numel, largest first (Python's sort
 *              is stable: ties keep model.parameters() order), each given
 *              to the least-loaded rank so far (_get_min_index, 1.13
 *              808-831: the first such rank); a rank's local optimizer
 *              takes its parameters in that sorted order
 *              (_init_local_optimizer, 1.13 1390-1448);
 *   set-up     nothing: the local Adam makes its state lazily, and
 *              _build_param_buckets returns at once without
 *              parameters_as_bucket_view (1.13 1208-1264);
 *   step       Optimizer's record_function around ZeroRedundancyOptimizer.
 *              step (1.13 optimizer.py 130-148: a class's step is wrapped
 *              once), then _local_step -> self.optim.step (the local
 *              Adam's own record_function; its state and temporaries over
 *              the rank's parameters only), then _sync_params (1.13
 *              720-770, 2.6 747-808): for each rank in turn, each of its
 *              parameters in partition order broadcast from it
 *              (dist.broadcast(param.data, src, async_op=True): in place,
 *              no flat copy, no tensor; the handles are waited at the
 *              end);
 *   zero_grad  Optimizer.zero_grad over every parameter (the wrapper's
 *              param_groups hold all of them): the plain loop's.
 *
 * The ranks differ only in the optimizer's state and its local step: the
 * builder (util/autograd.c, ag_options.zero1_world) writes one section of
 * those events a rank, each marked with its rank (ag_event.only_rank),
 * so that one list with one tensor table serves every rank; the engine
 * runs a rank's own sections and the shared events, the theory sums them
 * rank by rank and names the binding rank.
 */
#ifndef ZS_UTIL_AG_ZERO1_H
#define ZS_UTIL_AG_ZERO1_H

#include <stddef.h>
#include <stdint.h>

/* ZeroRedundancyOptimizer's partition of n parameters of numel[0..n) (in
 * model.parameters() order) over `world` ranks: rank_of[i] is parameter
 * i's rank, and order[0..n) the parameters sorted as
 * _partition_parameters sorts them (largest first, ties in model order),
 * which is each rank's local order too. */
void ag_zero1_partition(const uint64_t *numel, size_t n, unsigned world, unsigned *rank_of, size_t *order);

#endif
