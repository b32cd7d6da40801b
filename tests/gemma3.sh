#!/bin/sh
# gemma3 — the Gemma 3 text family (model_type gemma3_text) end to end: a
# tiny gemma3_text (gemma2's block — Gemma3RMSNorm's 1 + w, norms before
# and after attention and the MLP, GeGLU with tanh GELU, the embedding
# times sqrt(d), the scores scaled by query_pre_attn_scalar^-1/2 — with
# q_norm and k_norm on each head, sliding layers rotated by
# rope_local_base_freq and every sliding_window_pattern-th layer global,
# rotated by rope_theta; no soft-caps unless set; tied) trained by measure
# for 100 steps on the seed's task, the loss falling under 2/3 of the
# first step's; one weights digest per N across the four schemes in both
# precisions; the rotary bases reach the numbers; the shipped gemma-3-1b and
# gemma-3-4b (model_type gemma3, read by its text_config) by their Hub
# ids; and what is refused of a gemma3_text config, by name.
# theory = measure for gemma3_text is in theory_vs_measure.sh, its count
# worked by hand in test_theory.
# Runs from the build directory; ZS_BUILDDIR overrides (tests/family_lib.sh).
set -u

name=gemma3
srcdir=${srcdir:-.}
# shellcheck source=tests/family_lib.sh
. "$srcdir/tests/family_lib.sh"
cat >"$tmp/gemma3-nopattern.json" <<'EOF_'
{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 3,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24, "vocab_size": 256,
 "max_position_embeddings": 32, "query_pre_attn_scalar": 24, "sliding_window": 16}
EOF_
# layers 0 and 2 slide, layer 1 is global
sed 's/}$/, "sliding_window_pattern": 2}/' "$tmp/gemma3-nopattern.json" >"$tmp/gemma3-tiny.json"

echo "gemma3: 1: a tiny gemma3_text learns the task in 100 steps"
learns "$tmp/gemma3-tiny.json" 5e-3 1.5
# a block: four norms of 64, q/k/v (4 + 2·2) x 24 x 64, the q/k norms
# 2 x 24, o_proj, the MLP's three 172 x 64; the head is the table, the
# final norm in its unit
tr -d ' \t\n' <"$tmp/train.json" | grep -q '"units":\[16448,51760,51760,51760\]' ||
	fail "the units are not embedding and final norm 16448, blocks 51760"

echo "gemma3: 2: one weights digest per N across dp, zero1, zero2 and zero3"
sed 's/}$/, "attn_logit_softcapping": 5.0, "final_logit_softcapping": 3.0, "tie_word_embeddings": false}/' \
	"$tmp/gemma3-tiny.json" >"$tmp/gemma3-b.json"
for precision in fp32 mixed; do
	for model in gemma3-tiny gemma3-b; do
		one_digest "$tmp/$model.json" $precision
	done
done

echo "gemma3: 3: the local and global rotary bases each reach the numbers"
# the same run with the local base set to the global one, and with the
# pattern making every layer global, must both move the first loss
first_loss() { # MODEL
	"$zerosim" measure --quiet --model "$1" --seq 16 --batch 2 --world 1 --steps 1 --out "$tmp/one.json" \
		2>"$tmp/err" || fail "measure: $(cat "$tmp/err")"
	tr -d ' \t\n' <"$tmp/one.json" | sed 's/.*"losses":\[\([^],]*\).*/\1/'
}
base=$(first_loss "$tmp/gemma3-tiny.json")
sed 's/}$/, "rope_local_base_freq": 1000000}/' "$tmp/gemma3-tiny.json" >"$tmp/local.json"
sed 's/}$/, "rope_theta": 10000}/' "$tmp/gemma3-tiny.json" >"$tmp/global.json"
[ "$(first_loss "$tmp/local.json")" != "$base" ] || fail "rope_local_base_freq changes no loss"
[ "$(first_loss "$tmp/global.json")" != "$base" ] || fail "rope_theta changes no loss"
# layer_types spelling the same pattern is the same run
sed 's/}$/, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}/' \
	"$tmp/gemma3-nopattern.json" >"$tmp/types.json"
[ "$(first_loss "$tmp/types.json")" = "$base" ] || fail "layer_types is not read as sliding_window_pattern 2"
# and the default pattern (6: all three layers slide) is another
[ "$(first_loss "$tmp/gemma3-nopattern.json")" != "$base" ] || fail "sliding_window_pattern changes no loss"

echo "gemma3: 3b: gemma-3-4b's rope_scaling (linear, factor 8) reaches the numbers, not the bytes"
# rotary_emb's inv_freq divided by the factor, the global layer's alone
# (Gemma3TextModel's rotary_emb_local is made from a config copy whose
# rope_scaling is the default: modeling_gemma3.py; tests/tfm_torch.sh holds
# the numbers to PyTorch's): the first loss moves, a factor of 1 is none,
# and the bytes are the unscaled run's, theory and measure alike
sed 's/}$/, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}/' "$tmp/gemma3-tiny.json" >"$tmp/scaled.json"
sed 's/}$/, "rope_scaling": {"type": "linear", "factor": 1}}/' "$tmp/gemma3-tiny.json" >"$tmp/scaled1.json"
[ "$(first_loss "$tmp/scaled.json")" != "$base" ] || fail "rope_scaling changes no loss"
[ "$(first_loss "$tmp/scaled1.json")" = "$base" ] || fail "rope_scaling's factor 1 changes the loss"
for cmd in measure theory; do
	for model in gemma3-tiny scaled; do
		# shellcheck disable=SC2046
		"$zerosim" $cmd $([ $cmd = measure ] && echo --quiet) --model "$tmp/$model.json" --seq 16 --batch 2 --world 2 --steps 1 \
			--out "$tmp/b-$model.json" 2>"$tmp/err" || fail "$cmd $model: $(cat "$tmp/err")"
		tr -d ' \t\n' <"$tmp/b-$model.json" | grep -o '"\(resident\|peak\)_bytes":[^a-z]*' >"$tmp/b-$model"
	done
	[ -s "$tmp/b-scaled" ] && cmp -s "$tmp/b-gemma3-tiny" "$tmp/b-scaled" ||
		fail "$cmd: the scaled model's bytes are not the unscaled one's"
done
plain_loop_agrees "$tmp/scaled.json"

echo "gemma3: 4: the shipped Gemma-3-1B and Gemma-3-4B by their Hub ids"
shipped_theory() { # HUB-ID NAME PARAMS: theory.json's model and its Ψ
	"$zerosim" theory --model "$1" --world 8 --seq 512 --out "$tmp/t.json" \
		2>"$tmp/err" || fail "theory $1: $(cat "$tmp/err")"
	tr -d ' \t\n' <"$tmp/t.json" >"$tmp/t1"
	grep -q "\"name\":\"$2\",\"model_type\":\"gemma3_text\",\"family\":\"llama\"" "$tmp/t1" ||
		fail "theory.json's model is not $2 (gemma3_text, llama's kernels)"
	grep -q "\"params\":$3[,}]" "$tmp/t1" || fail "$2: Ψ is not $3"
}
shipped_theory Google/Gemma-3-1B-PT gemma-3-1b 999885952
# the multimodal gemma-3-4b (model_type gemma3) by its text_config: the
# text model's count (test_theory works it by hand); its global layers'
# linear rope_scaling (factor 8) is read (3b below)
shipped_theory google/gemma-3-4b-pt gemma-3-4b 3880263168
# a model_type gemma3 holding the tiny config as its text_config (and a
# vision_config, not read) measures as the tiny config itself
{ printf '{"model_type": "gemma3", "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27}, "text_config": '
  cat "$tmp/gemma3-tiny.json"; printf '}\n'; } >"$tmp/gemma3-mm.json"
for model in gemma3-tiny gemma3-mm; do
	"$zerosim" measure --quiet --model "$tmp/$model.json" --seq 16 --batch 2 --world 2 --steps 2 \
		--out "$tmp/$model-m.json" 2>"$tmp/err" || fail "measure $model: $(cat "$tmp/err")"
	tr -d ' \t\n' <"$tmp/$model-m.json" | sed "s/\"name\":\"$model\"/\"name\":\"tiny\"/g" >"$tmp/$model-m1"
done
cmp -s "$tmp/gemma3-tiny-m1" "$tmp/gemma3-mm-m1" || fail "the gemma3 wrapping gemma3-tiny does not measure as gemma3-tiny"

echo "gemma3: 5: what is refused, by name"
expect_refused "gemma3-tiny: --seq 32 is longer than its sliding_window 16" "$tmp/gemma3-tiny.json" --seq 32
sed 's/}$/, "hidden_activation": "gelu"}/' "$tmp/gemma3-tiny.json" >"$tmp/gelu.json"
expect_refused '"hidden_activation" is "gelu"; the engine.s transformer runs "gelu_pytorch_tanh"' "$tmp/gelu.json" --seq 8
sed 's/}$/, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}/' "$tmp/gemma3-tiny.json" >"$tmp/scaled.json"
sed 's/}$/, "rope_scaling": {"rope_type": "dynamic", "factor": 8.0}}/' "$tmp/gemma3-tiny.json" >"$tmp/dyn.json"
expect_refused '"rope_scaling" is {"rope_type":"dynamic","factor":8}; the engine.s transformer runs null or gemma3_text.s linear scaling' "$tmp/dyn.json" --seq 8
sed 's/}$/, "rope_scaling": {"rope_type": "linear"}}/' "$tmp/gemma3-tiny.json" >"$tmp/nofactor.json"
expect_refused '"rope_scaling" is {"rope_type":"linear"}' "$tmp/nofactor.json" --seq 8
# a factor that is 0 in the engine's float (its rope divides in float)
sed 's/}$/, "rope_scaling": {"rope_type": "linear", "factor": 1e-50}}/' "$tmp/gemma3-tiny.json" >"$tmp/tiny.json"
expect_refused '"rope_scaling" is {"rope_type":"linear","factor":1e-50}' "$tmp/tiny.json" --seq 8
sed 's/}$/, "layer_types": ["full_attention", "sliding_attention", "full_attention"]}/' \
	"$tmp/gemma3-nopattern.json" >"$tmp/types2.json"
expect_refused '"layer_types" is not one global layer in every' "$tmp/types2.json" --seq 8
sed 's/}$/, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}/' \
	"$tmp/gemma3-tiny.json" >"$tmp/ropep.json"
expect_refused '"rope_parameters" is {"full_attention"' "$tmp/ropep.json" --seq 8
sed 's/}$/, "attention_bias": true}/' "$tmp/gemma3-tiny.json" >"$tmp/bias.json"
expect_refused '"attention_bias": biases in the attention projections are not modelled' "$tmp/bias.json" --seq 8
# the plain PyTorch loop (--wrapper none) describes gemma3_text's step (fp32,
# eager, 1.13; tests/hf_torch.sh holds it to PyTorch): theory and measure
# agree, and its losses are the fused engine's (seq 16: the window hides no key)
plain_loop_agrees "$tmp/gemma3-tiny.json"
# and theory reads what measure refuses for its numerics or its window alone
"$zerosim" theory --model "$tmp/gelu.json" --seq 32 --world 2 --out "$tmp/tgelu.json" 2>"$tmp/err" ||
	fail "theory --model gelu.json: $(cat "$tmp/err")"

[ "$failed" -eq 0 ] && echo "gemma3: PASS"
exit "$failed"
