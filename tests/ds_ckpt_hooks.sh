#!/bin/sh
# ds_ckpt_hooks — DeepSpeed ZeRO-3's module hooks under Hugging Face's
# gradient checkpointing (torch.utils.checkpoint, reentrant), in real
# PyTorch (tests/ds_ckpt_hooks.py, which transcribes the hooks and cites
# their lines): the order of the fetches and releases is the trace
# zerosim's coordinator walks (util/ds_coord.c, build_trace): forward,
# then in backward each block's modules forward again (the rerun) before
# its backward, every module's release firing after each fetch but the
# embeddings' after backward.
#
# PyTorch is looked for by tests/torch_python.sh; without it the test is
# skipped (exit 77). Exit 0 pass, 1 disagreement, 99 hard error.
set -u
name=ds_ckpt_hooks
src=${srcdir:-.}
. "${srcdir:-.}/tests/torch_python.sh"
"$py" "$src/tests/ds_ckpt_hooks.py" || exit 1
