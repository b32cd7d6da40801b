#!/bin/sh
# ag_exec_llama — tests/ag_exec_losses.sh on the tiny llama, untied and
# tied, over three steps: the plain loop's RMSNorm, RoPE, repeat_kv and
# SwiGLU against the fused engine's; and with 4 k/v heads for 4 heads
# (llama-mha), its --attn sdpa under 2.6 (the CPU's flash kernel).
ZS_AG_MODELS="llama llama-tied llama-mha"
ZS_AG_STEPS=3
export ZS_AG_MODELS ZS_AG_STEPS
exec "${SHELL:-/bin/sh}" "${srcdir:-.}/tests/ag_exec_losses.sh"
