#!/bin/sh
# phi3 — the Phi-3 family end to end: a tiny phi3 (llama's kernels, its
# q/k/v and gate/up Hugging Face's own single tensors) trained by measure
# for 100 steps on the seed's task, the loss falling under a third of the
# first step's (ln 256 = 5.55 at the start; pad_token_id 0, nn.Embedding's
# padding_idx, takes no gradient from the lookups); one weights digest per N
# across the four schemes; the shipped phi-3-mini-4k by its Hub id; and
# what measure refuses of a phi3 config, by name; the plain PyTorch loop's
# step (theory = measure, the losses the fused engine's). theory = measure for
# phi3 is in theory_vs_measure.sh, its parameter count in test_theory.
# Runs from the build directory; ZS_BUILDDIR overrides (tests/family_lib.sh).
set -u

name=phi3
srcdir=${srcdir:-.}
# shellcheck source=tests/family_lib.sh
. "$srcdir/tests/family_lib.sh"
cat >"$tmp/phi3-tiny.json" <<'EOF_'
{"model_type": "phi3", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32,
 "pad_token_id": 0}
EOF_

echo "phi3: 1: a tiny phi3 learns the task in 100 steps"
learns "$tmp/phi3-tiny.json" 3e-3 3

echo "phi3: 2: one weights digest per N across dp, zero1, zero2 and zero3"
for precision in fp32 mixed; do
	one_digest "$tmp/phi3-tiny.json" $precision
done

echo "phi3: 3: the shipped Phi-3-mini-4k by its Hub id"
"$zerosim" theory --model microsoft/Phi-3-mini-4k-instruct --world 8 --seq 2048 --out "$tmp/t.json" \
	2>"$tmp/err" || fail "theory: $(cat "$tmp/err")"
tr -d ' \t\n' <"$tmp/t.json" >"$tmp/t1"
grep -q '"name":"phi-3-mini-4k","model_type":"phi3","family":"llama"' "$tmp/t1" ||
	fail "theory.json's model is not phi-3-mini-4k (phi3, llama's kernels)"
grep -q '"params":3821079552[,}]' "$tmp/t1" || fail "Ψ is not 3,821,079,552"

echo "phi3: 4: what measure refuses, by name"
# its sliding window (2047): the engine's attention sees every earlier token
expect_refused "phi-3-mini-4k: --seq 4096 is longer than its sliding_window 2047" phi-3-mini-4k --seq 4096
sed 's/}$/, "partial_rotary_factor": 0.75}/' "$tmp/phi3-tiny.json" >"$tmp/partial.json"
expect_refused '"partial_rotary_factor" is 0.75' "$tmp/partial.json" --seq 8
sed 's/}$/, "rope_scaling": {"type": "longrope", "short_factor": [1], "long_factor": [1]}}/' \
	"$tmp/phi3-tiny.json" >"$tmp/longrope.json"
expect_refused '"rope_scaling" is {' "$tmp/longrope.json" --seq 8
# Phi3Config's pad_token_id 32000 where a config gives none: no row of a
# 256-token table, which transformers' nn.Embedding refuses
tr -d '\n' <"$tmp/phi3-tiny.json" | sed 's/, *"pad_token_id": 0//' >"$tmp/nopad.json"
expect_refused "\"pad_token_id\" is 32000 (Phi3Config's default), no row of the 256-token table" "$tmp/nopad.json" --seq 8
sed 's/"pad_token_id": 0/"pad_token_id": 256/' "$tmp/phi3-tiny.json" >"$tmp/pad256.json"
expect_refused '"pad_token_id" is 256, no row' "$tmp/pad256.json" --seq 8
# the plain PyTorch loop (--wrapper none: modeling_phi3.py's step, the
# fused qkv_proj sliced, gate_up_proj chunked) runs it, theory = measure
# (tests/hf_torch.sh holds it to PyTorch's bytes); the partial rotary
# factor, which slices and cats the rope's input, it refuses, theory too
plain_loop_agrees "$tmp/phi3-tiny.json"
rm -f "$tmp/r.json"
"$zerosim" theory --model "$tmp/partial.json" --seq 8 --framework torch --wrapper none --torch-device cpu \
	--precision fp32 --attn eager --world 1 --out "$tmp/r.json" 2>"$tmp/err"
rc=$?
{ [ "$rc" -eq 2 ] && [ ! -e "$tmp/r.json" ] &&
	grep -q '"partial_rotary_factor" is 0.75; .*the PyTorch step is described for those numerics only' "$tmp/err"; } ||
	fail "theory --wrapper none on partial_rotary_factor 0.75: exit $rc, $(cat "$tmp/err")"
# and theory reads them all (no byte depends on the numerics)
for f in partial longrope nopad pad256; do
	"$zerosim" theory --model "$tmp/$f.json" --seq 8 --world 2 --out "$tmp/t$f.json" 2>"$tmp/err" ||
		fail "theory --model $f.json: $(cat "$tmp/err")"
done

[ "$failed" -eq 0 ] && echo "phi3: PASS"
exit "$failed"
