/*
 * scheme_registry — the table of every framework's schemes (scheme.h's
 * struct zs_scheme_entry), one row a pair, as tmux's cmd_table[] lists its
 * commands: which hooks run at N > 1 and at N = 1, how the layout cuts the
 * state, and what the framework's own buffers add to the memory bound. A
 * new framework or scheme is rows here and its hooks in a file of its own;
 * the driver (engine.c) reads only this table.
 *
 * At N = 1 the paper's schemes run scheme_one_rank (layout.h's N = 1 rule:
 * nothing is sharded, gathered or reduced). torch keeps DDP's reducer there
 * (dp and zero1: zero1's broadcast from the owners sends nothing) and
 * clamps FSDP to NO_SHARD (zero2, zero3), as PyTorch 1.13 does; DeepSpeed's
 * stages keep their hooks, allocating their buffers on one rank as on many.
 * DeepSpeed's dp is the paper's (its engine all-reduces the grads), its
 * own hooks for gradient accumulation (scheme_deepspeed.c).
 */
#include "config.h"

#include <stdlib.h>

#include "engine/scheme.h"

/* The N = 1 rule's hooks: none. */
const struct zs_scheme_ops scheme_one_rank = {.name = "one rank"};

static const struct zs_scheme_entry scheme_table[] = {
	{ZS_FW_PAPER, ZS_DP, &scheme_dp, &scheme_one_rank, 0, NULL},
	{ZS_FW_PAPER, ZS_ZERO1, &scheme_zero1, &scheme_one_rank, 0, NULL},
	{ZS_FW_PAPER, ZS_ZERO2, &scheme_zero2, &scheme_one_rank, 0, NULL},
	{ZS_FW_PAPER, ZS_ZERO3, &scheme_zero3, &scheme_one_rank, 0, NULL},
	{ZS_FW_TORCH, ZS_DP, &scheme_torch_dp, &scheme_torch_dp, 0, scheme_ddp_bound},
	{ZS_FW_TORCH, ZS_ZERO1, &scheme_torch_zero1, &scheme_torch_dp, 0, scheme_ddp_bound},
	{ZS_FW_TORCH, ZS_ZERO2, &scheme_torch_zero2, &scheme_torch_no_shard, 0, scheme_fsdp_bound},
	{ZS_FW_TORCH, ZS_ZERO3, &scheme_torch_zero3, &scheme_torch_no_shard, 0, scheme_fsdp_bound},
	{ZS_FW_DEEPSPEED, ZS_DP, &scheme_ds_dp, &scheme_ds_dp_one, 0, scheme_deepspeed_bound},
	{ZS_FW_DEEPSPEED, ZS_ZERO1, &scheme_ds_zero1, &scheme_ds_zero1, 0, scheme_deepspeed_bound},
	{ZS_FW_DEEPSPEED, ZS_ZERO2, &scheme_ds_zero2, &scheme_ds_zero2, 0, scheme_deepspeed_bound},
	{ZS_FW_DEEPSPEED, ZS_ZERO3, &scheme_ds_zero3, &scheme_ds_zero3, 1, scheme_deepspeed_bound},
};

_Static_assert(sizeof scheme_table / sizeof scheme_table[0] == (size_t)ZS_NFRAMEWORKS * ZS_NSCHEMES,
               "one row for every framework and scheme");

const struct zs_scheme_entry *scheme_entry(enum zs_framework fw, enum zs_scheme scheme)
{
	for (size_t i = 0; i < sizeof scheme_table / sizeof scheme_table[0]; i++)
		if (scheme_table[i].framework == fw && scheme_table[i].scheme == scheme)
			return &scheme_table[i];
	abort(); /* the assertion above: every pair has its row */
}

const struct zs_scheme_ops *scheme_ops(const struct zs_scheme_entry *e, unsigned world)
{
	return world == 1 ? e->one : e->ops;
}
