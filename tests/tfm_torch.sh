#!/bin/sh
# tfm_torch — zerosim's transformer agrees with PyTorch, fed the case file
# zerosim writes. For the tiny gpt2, llama, qwen2, phi3, qwen3, gemma2 and gemma3 models, `zerosim measure
# --write-case` writes the run (three fp32 Adam steps: the model config,
# the tokens, the optimizer; the initial weights in a raw float32 side
# file); `measure --case` trains it again (the same digest, or the test
# fails) and writes the losses and, with --dump-weights, the final
# weights; tests/tfm_dump adds the first step's gradient and weights.
# tests/tfm_torch.py builds the same models in PyTorch from the case and
# its side file (the norms' epsilon and the rotary base from the config the
# case was made from), trains them on the case's tokens and compares (the
# bounds are in its opening comment): every family in one python3, torch
# imported once (an import takes seconds on a busy machine).
#
# PyTorch is looked for by tests/torch_python.sh; without it the test is
# skipped with a message (exit 77). Exit 0 pass, 1 disagreement, 99 hard
# error (automake's conventions). Runs from the build directory.
set -u

top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
dump=$top/tests/tfm_dump
zerosim=$top/zerosim
for p in "$dump" "$zerosim"; do
	if [ ! -x "$p" ]; then
		echo "tfm_torch: $p is not built" >&2
		exit 99
	fi
done

name=tfm_torch
. "$src/tests/torch_python.sh"
torch_pin_blas
echo "tfm_torch: $py"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-torch.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# The tiny models: d 64, 2 blocks, 4 heads (2 key-value heads for llama),
# vocabulary 256, 32 positions; gpt2's head tied, llama's not; llama's
# rotary base llama-3's 500000 (the engine must read it, not use 10000).
# phi3: llama's shape, its fused qkv_proj and gate_up_proj Hugging Face's
# own tensors, built in tests/tfm_torch.py from modeling_phi3.py op for
# op; Phi3Config's epsilon default 1e-5; pad_token_id (nn.Embedding's
# padding_idx, whose row no lookup's gradient reaches) the first token of
# the run, so that it matters (Phi3Config's default 32000 is no row of a
# 256-token table, which nn.Embedding refuses).
# qwen2: llama's shape with q_proj, k_proj and v_proj biased (the fused
# qkv's bias, qkv.b: docs/formats.md), tied (Qwen2.5-0.5B's), Qwen2.5's
# rotary base 1000000; built in tests/tfm_torch.py as llama with the bias
# (modeling_qwen2.py's Qwen2Attention is Llama's but for bias=True).
# qwen3: llama's shape with q_norm and k_norm on each head, built in
# tests/tfm_torch.py from modeling_qwen3.py op for op; a head_dim (24)
# apart from hidden / heads (16); Qwen3-0.6B's rotary base 1000000.
# gemma2: Gemma 2's norms by 1 + w before and after attention and the MLP,
# GeGLU, the embedding by sqrt(d), the scores scaled by 24^-1/2 and
# soft-capped at gemma-2-2b's 50, the logits at its 30, tied, pad_token_id
# 0 (Gemma2Config's); a window (64) past the sequence (measure refuses a
# sequence past it). With caps of 5 and 3 the losses agree as closely
# (1.8e-7) and the first gradient (4.3e-7), but after 3 steps 99.57 % of the
# weights are within 1e-5 of float64's, where PyTorch's fp32 has 99.94 %:
# not understood yet, so not claimed (test_tfm checks the caps' backward by
# finite differences at caps where tanh bends).
# gemma3: gemma2's block with q_norm and k_norm by 1 + w on each head,
# block 0 sliding (rotated by rope_local_base_freq 10000), block 1 global
# (sliding_window_pattern 2; rope_theta Gemma3TextConfig's 1e6), no caps
# (gemma-3-1b's), built in tests/tfm_torch.py from modeling_gemma3.py.
# Torch 1.13: losses within 9.4e-8, first gradient 6.6e-7, weights after 3
# steps 99.973 % within 1e-5 of torch fp32 (torch fp32 itself is 99.866 %
# within 1e-5 of float64, zerosim 99.893 %). Run by hand in the 2.6 root:
# losses within 9.4e-8, first gradient 7.5e-7, but after 3 steps 99.766 %
# of torch fp32 and 99.885 % of float64 where 2.6's fp32 is 99.951 %: the
# bound's float64 arbitration would fail there. Not understood yet.
cat >"$tmp/gpt2.json" <<'EOF_'
{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256, "n_positions": 32}
EOF_
cat >"$tmp/llama.json" <<'EOF_'
{"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32,
 "rope_theta": 500000.0}
EOF_
cat >"$tmp/qwen2.json" <<'EOF_'
{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32,
 "rope_theta": 1000000.0, "tie_word_embeddings": true}
EOF_
cat >"$tmp/phi3.json" <<'EOF_'
{"model_type": "phi3", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32,
 "pad_token_id": null}
EOF_
cat >"$tmp/qwen3.json" <<'EOF_'
{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32, "rope_theta": 1000000.0}
EOF_
cat >"$tmp/gemma3.json" <<'EOF_'
{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32, "query_pre_attn_scalar": 24, "sliding_window": 64,
 "sliding_window_pattern": 2}
EOF_
# gemma3s: gemma3 with gemma-3-4b's rope_scaling (linear, factor 8): its
# global block 1 rotates by rope_theta's frequencies divided by 8
# (rotary_emb), its sliding block 0 by rope_local_base_freq's unscaled
# (rotary_emb_local, whose config copy says {"rope_type": "default"}:
# Gemma3TextModel.__init__); the bytes are gemma3's, the numerics not.
sed 's/}$/, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}/' "$tmp/gemma3.json" >"$tmp/gemma3s.json" ||
	exit 99
cat >"$tmp/gemma2.json" <<'EOF_'
{"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32, "query_pre_attn_scalar": 24, "attn_logit_softcapping": 50.0,
 "final_logit_softcapping": 30.0, "sliding_window": 64, "hidden_activation": "gelu_pytorch_tanh"}
EOF_
# the run's first token (the tokens come from the seed, not the config)
"$zerosim" measure -q --model "$tmp/phi3.json" --seq 32 --batch 2 --world 1 --steps 3 --seed 11 \
	--precision fp32 --schemes dp --write-case "$tmp/pad-case.json" --out "$tmp/pad-seed.json" || exit 99
pad=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["tokens"][0][0][0][0])' "$tmp/pad-case.json") ||
	exit 99
sed "s/\"pad_token_id\": null/\"pad_token_id\": $pad/" "$tmp/phi3.json" >"$tmp/phi3-pad.json" &&
	mv "$tmp/phi3-pad.json" "$tmp/phi3.json" || exit 99
echo "tfm_torch: phi3's pad_token_id: $pad"
status=0
set -- # each family's run folder and config, for tfm_torch.py
for family in ${ZS_TORCH_FAMILIES:-gpt2 llama qwen2 phi3 qwen3 gemma2 gemma3 gemma3s}; do
	d=$tmp/$family
	mkdir "$d" || exit 99
	"$zerosim" measure -q --model "$tmp/$family.json" --seq 32 --batch 2 --world 1 --steps 3 --seed 11 \
		--precision fp32 --optimizer adam --lr 1e-3 --schemes dp --write-case "$d/case.json" --out "$d/seed.json" &&
		"$zerosim" measure -q --case "$d/case.json" --schemes dp --out "$d/measured.json" --dump-weights "$d/final.json" &&
		"$dump" "$d/case.json" "$d" || exit 99
	a=$(grep weights_digest "$d/seed.json")
	b=$(grep weights_digest "$d/measured.json")
	if [ "$a" != "$b" ]; then
		echo "$family: measure --case trained other weights than the run that wrote the case: $a, $b FAIL"
		status=1
	fi
	set -- "$@" "$d" "$tmp/$family.json"
done
[ $# -gt 0 ] || { echo "tfm_torch: no family to run" >&2; exit 99; }
"$py" "$src/tests/tfm_torch.py" "$@"
rc=$?
[ "$rc" -eq 0 ] || status=1
[ "$rc" -le 1 ] || { echo "tfm_torch: tfm_torch.py failed (status $rc)" >&2; exit 99; }
exit $status
