#!/bin/sh
# qwen3 — the Qwen3 family end to end: a tiny qwen3 (llama's kernels with
# q_norm and k_norm, an RMSNorm over head_dim on each query and key head
# before rope, and a head_dim, 24, apart from hidden / heads, 16) trained
# by measure for 100 steps on the seed's task, the loss falling under half
# the first step's (ln 256 = 5.55 at the start); one weights digest per N
# across the four schemes in both precisions; the shipped qwen3-0.6b by its
# Hub id, its count and its q/k norms' module; and what is refused of a
# qwen3 config, by name; the plain PyTorch loop's step (theory = measure,
# the losses the fused engine's). theory = measure for qwen3 is in
# theory_vs_measure.sh, its parameter count worked by hand in test_theory,
# its agreement with PyTorch in tfm_torch.sh.
# Runs from the build directory; ZS_BUILDDIR overrides (tests/family_lib.sh).
set -u

name=qwen3
srcdir=${srcdir:-.}
# shellcheck source=tests/family_lib.sh
. "$srcdir/tests/family_lib.sh"
cat >"$tmp/qwen3-tiny.json" <<'EOF_'
{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32}
EOF_

echo "qwen3: 1: a tiny qwen3 learns the task in 100 steps"
learns "$tmp/qwen3-tiny.json" 3e-3 2
# the q/k norms' module: 2 x 24 elements after the q/k/v product's
# (4 + 2·2) x 24 x 64 in each block's unit
tr -d ' \t\n' <"$tmp/train.json" | grep -q '"units":\[16384,51632,51632,16448\]' ||
	fail "the units are not embedding 16384, blocks 51632 (q/k norms 48 among them), head 16448"

echo "qwen3: 2: one weights digest per N across dp, zero1, zero2 and zero3"
sed 's/}$/, "tie_word_embeddings": true}/' "$tmp/qwen3-tiny.json" >"$tmp/qwen3-tied.json"
for precision in fp32 mixed; do
	for model in qwen3-tiny qwen3-tied; do
		one_digest "$tmp/$model.json" $precision
	done
done

echo "qwen3: 3: the shipped Qwen3-0.6B by its Hub id"
"$zerosim" theory --model qwen/qwen3-0.6b --world 8 --seq 2048 --out "$tmp/t.json" \
	2>"$tmp/err" || fail "theory: $(cat "$tmp/err")"
tr -d ' \t\n' <"$tmp/t.json" >"$tmp/t1"
grep -q '"name":"qwen3-0.6b","model_type":"qwen3","family":"llama"' "$tmp/t1" ||
	fail "theory.json's model is not qwen3-0.6b (qwen3, llama's kernels)"
grep -q '"head_dim":128,' "$tmp/t1" || fail "head_dim is not 128"
grep -q '"params":596049920[,}]' "$tmp/t1" || fail "Ψ is not 596,049,920"

echo "qwen3: 4: what is refused, by name"
sed 's/}$/, "attention_bias": true}/' "$tmp/qwen3-tiny.json" >"$tmp/bias.json"
expect_refused '"attention_bias": biases in the attention projections are not modelled' "$tmp/bias.json" --seq 8
sed 's/}$/, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}/' "$tmp/qwen3-tiny.json" >"$tmp/yarn.json"
expect_refused '"rope_scaling" is {' "$tmp/yarn.json" --seq 8
sed 's/}$/, "use_sliding_window": true, "max_window_layers": 1, "sliding_window": 4}/' "$tmp/qwen3-tiny.json" \
	>"$tmp/window.json"
expect_refused "window: --seq 8 is longer than its sliding_window 4" "$tmp/window.json" --seq 8
sed 's/"qwen3"/"olmoe"/' "$tmp/qwen3-tiny.json" >"$tmp/moe.json"
expect_refused "\"model_type\" 'olmoe' is not modelled (gpt2, llama, mistral, qwen2, phi3, qwen3, gemma2, gemma3_text, gemma3, mixtral, qwen2_moe, qwen3_moe)" \
	"$tmp/moe.json" --seq 8
# the plain PyTorch loop (--wrapper none: modeling_qwen3.py's step) runs
# it, theory = measure; tests/hf_torch.sh holds it to PyTorch's bytes
plain_loop_agrees "$tmp/qwen3-tiny.json"
# and theory reads those whose numerics alone the engine does not run
for f in yarn window; do
	"$zerosim" theory --model "$tmp/$f.json" --seq 8 --world 2 --out "$tmp/t$f.json" 2>"$tmp/err" ||
		fail "theory --model $f.json: $(cat "$tmp/err")"
done

[ "$failed" -eq 0 ] && echo "qwen3: PASS"
exit "$failed"
