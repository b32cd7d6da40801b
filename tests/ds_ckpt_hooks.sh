#!/bin/sh
# ds_ckpt_hooks — DeepSpeed ZeRO-3's module hooks under Hugging Face's
# gradient checkpointing (torch.utils.checkpoint, reentrant), in real
# PyTorch (tests/ds_ckpt_hooks.py, which transcribes the hooks and cites
# their lines), against zerosim's own trace of the same GPT-2 as
# tests/ds_trace writes it (util/ds_coord.c, build_trace and the
# no_grad_in rule): forward, then in backward each block's modules forward
# again (the rerun) before its backward, every module's release firing
# after each fetch but the embeddings' after backward; fetch and release
# compared entry by entry, both steps, untied and tied head. Then LoRA
# (s50): the same GPT-2 without checkpointing, its c_attn (and then every
# linear but the head) PEFT's lora.Linear, the base frozen: both steps'
# hooks in zerosim's trace's order (tests/ds_trace TIED 2 TARGETS: the
# adapters modules of their own after their base, backward lora_B, lora_A,
# then the base, the order the engine's module calls follow); and a llama with PEFT's lora.Linear written op for op (lora_A and
# lora_B modules of their own, the base frozen), no checkpointing: each
# module's backward hooks (no backward fetch; fetched but never released
# after backward, no input needing grad; both) against zerosim's rule
# (tests/ds_trace lora: util/ds_coord.c's ds_coord_grad_flow_lora, the
# rule the engine and the theory of --framework deepspeed --schemes zero3
# ask): q,v, all-linear and o_proj,down_proj; block 0's lora_A modules
# over the frozen norm are fetched and never released (the chain rule
# before s50 said v_proj's lora_A was released: it fails here).
#
# PyTorch is looked for by tests/torch_python.sh; without it the test is
# skipped (exit 77). Exit 0 pass, 1 disagreement, 99 hard error.
set -u
name=ds_ckpt_hooks
src=${srcdir:-.}
top=${ZS_BUILDDIR:-.}
. "${srcdir:-.}/tests/torch_python.sh"
[ -x "$top/tests/ds_trace" ] || { echo "$name: $top/tests/ds_trace not built (make check builds it)" >&2; exit 99; }
"$py" "$src/tests/ds_ckpt_hooks.py" "$top/tests/ds_trace" || exit 1
