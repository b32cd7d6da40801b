#!/bin/sh
# ag_exec_families — tests/ag_exec_losses.sh on a tiny qwen2 (tied; q/k/v
# biased: the plain loop's addmm and its backward), qwen3 (q_norm and
# k_norm over each head, head_dim 24 apart from hidden / heads) and phi3
# (the fused qkv_proj sliced, gate_up_proj chunked, the partial-rotary cat)
# and gemma2 (its (1 + w) norms, four a block, the scaled embeddings,
# GeGLU, the soft-capped scores and logits) and gemma3_text (q_norm and
# k_norm on the transposed heads, masking_utils' masks, each layer type's
# rotary base, the embedding's scale buffer; under 2.6 SDPA too) over three
# steps: the plain loop's step against the fused engine's (itself checked
# against PyTorch by tfm_torch.sh), under 1.13's and 2.6's rules.
ZS_AG_MODELS="qwen2 qwen3 phi3 gemma2 gemma3_text"
ZS_AG_STEPS=3
export ZS_AG_MODELS ZS_AG_STEPS
exec "${SHELL:-/bin/sh}" "${srcdir:-.}/tests/ag_exec_losses.sh"
