#!/bin/sh
# gemma2 — the Gemma 2 family end to end: a tiny gemma2 (llama's kernels
# with Gemma2RMSNorm's 1 + w, norms before and after attention and the MLP,
# GeGLU with tanh GELU, the embedding times sqrt(d), the scores scaled by
# query_pre_attn_scalar^-1/2 and soft-capped, the logits soft-capped, tied)
# trained by measure for 100 steps on the seed's task, the loss falling
# under 2/3 of the first step's; one weights digest per N across the four
# schemes in both precisions; the shipped gemma-2-2b by its Hub id; and
# what is refused of a gemma2 config, by name. theory = measure for gemma2
# is in theory_vs_measure.sh, its count worked by hand in test_theory, its
# agreement with PyTorch in tfm_torch.sh.
# Runs from the build directory; ZS_BUILDDIR overrides (tests/family_lib.sh).
set -u

name=gemma2
srcdir=${srcdir:-.}
# shellcheck source=tests/family_lib.sh
. "$srcdir/tests/family_lib.sh"
cat >"$tmp/gemma2-tiny.json" <<'EOF_'
{"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32, "query_pre_attn_scalar": 24, "sliding_window": 16}
EOF_

echo "gemma2: 1: a tiny gemma2 learns the task in 100 steps"
learns "$tmp/gemma2-tiny.json" 3e-3 1.5
# a block: four norms of 64, q/k/v (4 + 2·2) x 24 x 64, o_proj, the MLP's
# three 172 x 64; the head is the table, the final norm in its unit
tr -d ' \t\n' <"$tmp/train.json" | grep -q '"units":\[16448,51712,51712\]' ||
	fail "the units are not embedding and final norm 16448, blocks 51712"

# A config saying "pad_token_id": null has no padding row (Gemma2Config's
# default is row 0): its case replays the same run, not row 0's
sed 's/}$/, "pad_token_id": null}/' "$tmp/gemma2-tiny.json" >"$tmp/nopad.json"
sed 's/}$/, "pad_token_id": 0}/' "$tmp/gemma2-tiny.json" >"$tmp/pad0.json"
"$zerosim" measure --model "$tmp/nopad.json" --world 1 --seq 16 --batch 16 --steps 2 --write-case "$tmp/nopad-case.json" \
	--out "$tmp/nopad-a.json" 2>"$tmp/err" && "$zerosim" measure --case "$tmp/nopad-case.json" --out "$tmp/nopad-b.json" 2>>"$tmp/err" &&
	"$zerosim" measure --model "$tmp/pad0.json" --world 1 --seq 16 --batch 16 --steps 2 --out "$tmp/pad0.json.out" 2>>"$tmp/err" ||
	fail "the padding row's runs: $(cat "$tmp/err")"
da=$(grep -m1 weights_digest "$tmp/nopad-a.json") db=$(grep -m1 weights_digest "$tmp/nopad-b.json")
d0=$(grep -m1 weights_digest "$tmp/pad0.json.out")
[ -n "$da" ] && [ "$da" = "$db" ] && [ "$da" != "$d0" ] ||
	fail "pad_token_id null: the run $da, its case $db, row 0's $d0"

echo "gemma2: 2: one weights digest per N across dp, zero1, zero2 and zero3"
sed 's/}$/, "attn_logit_softcapping": null, "tie_word_embeddings": false}/' "$tmp/gemma2-tiny.json" \
	>"$tmp/gemma2-b.json"
for precision in fp32 mixed; do
	for model in gemma2-tiny gemma2-b; do
		one_digest "$tmp/$model.json" $precision
	done
done

echo "gemma2: 3: the shipped Gemma-2-2B by its Hub id"
"$zerosim" theory --model Google/Gemma-2-2B --world 8 --seq 4096 --out "$tmp/t.json" \
	2>"$tmp/err" || fail "theory: $(cat "$tmp/err")"
tr -d ' \t\n' <"$tmp/t.json" >"$tmp/t1"
grep -q '"name":"gemma-2-2b","model_type":"gemma2","family":"llama"' "$tmp/t1" ||
	fail "theory.json's model is not gemma-2-2b (gemma2, llama's kernels)"
grep -q '"params":2614341888[,}]' "$tmp/t1" || fail "Ψ is not 2,614,341,888"

echo "gemma2: 4: what is refused, by name"
# the window of every other layer (16): the engine's attention masks none
expect_refused "gemma2-tiny: --seq 32 is longer than its sliding_window 16" "$tmp/gemma2-tiny.json" --seq 32
sed 's/}$/, "hidden_activation": "gelu"}/' "$tmp/gemma2-tiny.json" >"$tmp/gelu.json"
expect_refused '"hidden_activation" is "gelu"; the engine.s transformer runs "gelu_pytorch_tanh"' "$tmp/gelu.json" --seq 8
sed 's/}$/, "use_bidirectional_attention": true}/' "$tmp/gemma2-tiny.json" >"$tmp/bidi.json"
expect_refused '"use_bidirectional_attention" is true' "$tmp/bidi.json" --seq 8
sed 's/}$/, "final_logit_softcapping": 0}/' "$tmp/gemma2-tiny.json" >"$tmp/cap0.json"
expect_refused '"final_logit_softcapping" must be a positive number' "$tmp/cap0.json" --seq 8
sed 's/}$/, "attention_bias": true}/' "$tmp/gemma2-tiny.json" >"$tmp/bias.json"
expect_refused '"attention_bias": biases in the attention projections are not modelled' "$tmp/bias.json" --seq 8
# the plain PyTorch loop (--wrapper none) describes gemma2's step (fp32,
# eager; tests/hf_torch.sh holds it to PyTorch): theory and measure agree
plain_loop_agrees "$tmp/gemma2-tiny.json"
# and theory reads what measure refuses for its numerics or its window alone
"$zerosim" theory --model "$tmp/gelu.json" --seq 32 --world 2 --out "$tmp/tgelu.json" 2>"$tmp/err" ||
	fail "theory --model gelu.json: $(cat "$tmp/err")"

[ "$failed" -eq 0 ] && echo "gemma2: PASS"
exit "$failed"
