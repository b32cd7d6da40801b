#!/bin/sh
# qwen2 — the Qwen2 family (Qwen2, Qwen2.5) trained end to end: a tiny
# qwen2 (llama's kernels with biases on q, k and v; untied, Qwen2Config's
# default) trained by measure for 100 steps on the seed's task (seq 16,
# batch 2, N = 1), the loss falling from about ln 256 = 5.55 to under a
# third of the first step's over the last ten (5.56 to 1.68 here); its
# units counted by hand; one weights digest per N across the four schemes
# in fp32, untied and tied (test_tfm holds mixed, tied). theory = measure
# for qwen2 is in theory_vs_measure.sh and make check-families-full, its
# shipped Qwen2.5 counts in test_theory, its agreement with PyTorch in
# tfm_torch.sh. About 2 s.
# Runs from the build directory; ZS_BUILDDIR overrides (tests/family_lib.sh).
set -u

name=qwen2
srcdir=${srcdir:-.}
# shellcheck source=tests/family_lib.sh
. "$srcdir/tests/family_lib.sh"
cat >"$tmp/qwen2-tiny.json" <<'EOF_'
{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
 "max_position_embeddings": 32}
EOF_

echo "qwen2: 1: a tiny qwen2 learns the task in 100 steps"
learns "$tmp/qwen2-tiny.json" 3e-3 3
# a block: two norms of 64, q/k/v (4 + 2·2) x 16 x 64 and their biases
# 128, o_proj 64 x 64, the MLP's three 172 x 64: 128 + 8,320 + 4,096 +
# 33,024 = 45,568; the embedding 256 x 64; the untied head with the final
# norm 16,384 + 64
tr -d ' \t\n' <"$tmp/train.json" | grep -q '"units":\[16384,45568,45568,16448\]' ||
	fail "the units are not embedding 16384, blocks 45568 (the q/k/v biases 128 among them), head 16448"

echo "qwen2: 2: one weights digest per N across dp, zero1, zero2 and zero3 (fp32)"
sed 's/}$/, "tie_word_embeddings": true}/' "$tmp/qwen2-tiny.json" >"$tmp/qwen2-tied.json"
for model in qwen2-tiny qwen2-tied; do
	one_digest "$tmp/$model.json" fp32
done

[ "$failed" -eq 0 ] && echo "qwen2: PASS"
exit "$failed"
