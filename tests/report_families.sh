#!/bin/sh
# report_families — the families' departures from Korthikanti's layer, as
# the report's transformer section and the theory's text name them (read
# from the step's description of the model, util/step.h), each with its
# bytes a block, worked here by hand from the shape:
#  - gemma2-tiny (report/models/): GeGLU (not SwiGLU), attention
#    soft-capping's tanh of the scores, the full scores under the sliding
#    window, the four norms; a tiny qwen3: its q/k norms;
#  - mixtral-tiny: the router, the experts (k·B·T assignments) and the
#    routing imbalance, with fig12-moe in the section;
#  - the theory's text for gemma-2-9b and mixtral-8x7b at --seq 4096 names
#    the same departures with their bytes.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-fam.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { printf 'FAIL: %s\n' "$*" >&2; status=1; }
# has FILE WHAT TEXT: FILE holds TEXT (fixed), or fail naming WHAT
has() {
	if grep -F -q -- "$3" "$1"; then echo "ok: $2"; else fail "$2: '$3' not in $(basename "$1")"; fi
}
hasnt() {
	if grep -F -q -- "$3" "$1"; then fail "$2: '$3' in $(basename "$1")"; else echo "ok: $2"; fi
}
# 69760 -> 69\,760, as the LaTeX groups digits.
tex_num() { echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|\\\)/\1\\,\2\3/' -e 'ta'; }
run() { OPENBLAS_NUM_THREADS=1 ZEROSIM_DATADIR=$src "$zerosim" "$@" || { echo "zerosim $* failed" >&2; exit 99; }; }
S="--precision fp32 --world 1 --schemes dp --unit layer --seq 32 --batch 2"
cat >"$tmp/qwen3-tiny.json" <<'JSON'
{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, "max_position_embeddings": 64}
JSON
for m in "$src/report/models/gemma2-tiny.json" "$src/report/models/mixtral-tiny.json" "$tmp/qwen3-tiny.json"; do
	n=$(basename "$m" .json)
	run theory --model "$m" $S --out "$tmp/t-$n.json"
	run measure -q --model "$m" $S --steps 1 --out "$tmp/m-$n.json"
done
# mixtures of the qwen families, their theory alone: qwen2_moe's shared
# expert, qwen3_moe's q/k norms
cat >"$tmp/qwen2moe-tiny.json" <<'JSON'
{"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 80}
JSON
cat >"$tmp/qwen3moe-tiny.json" <<'JSON'
{"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, "max_position_embeddings": 64,
 "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48}
JSON
for n in qwen2moe-tiny qwen3moe-tiny; do
	run theory --model "$tmp/$n.json" $S --out "$tmp/t-$n.json"
done
run measure -q --world 1 --steps 1 --out "$tmp/mlp-m.json"
run theory --world 1 --out "$tmp/mlp-t.json"
run report --no-render --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" \
	--transformer "$tmp/t-gemma2-tiny.json" --transformer "$tmp/m-gemma2-tiny.json" \
	--transformer "$tmp/t-mixtral-tiny.json" --transformer "$tmp/m-mixtral-tiny.json" \
	--transformer "$tmp/t-qwen3-tiny.json" --transformer "$tmp/m-qwen3-tiny.json" \
	--transformer "$tmp/t-qwen2moe-tiny.json" --transformer "$tmp/t-qwen3moe-tiny.json" --out "$tmp/rep" >/dev/null 2>&1
f=$tmp/rep/transformer.tex
[ -f "$f" ] || { echo "no transformer.tex" >&2; exit 99; }
# each model's part of the section, from its heading to the next
part() { awk -v h="subsection*{$1 (" 'index($0, h) {p = 1; next} /subsection\*/ {p = 0} p' "$f" >"$tmp/$1.tex"; }
for n in gemma2-tiny mixtral-tiny qwen3-tiny qwen2moe-tiny qwen3moe-tiny; do part $n; done
# gemma2-tiny: B 2, T 32 (BT 64), h 64, I 128, a 4, fp32 (4 bytes)
g=$tmp/gemma2-tiny.tex
has "$f" "gemma2's heading names its type" "gemma2-tiny (gemma2, llama family)"
has "$g" "gemma2: GeGLU, 3·BT·I·4 = $((3 * 64 * 128 * 4)) B a block" "GeGLU: the engine keeps"
has "$g" "gemma2: GeGLU's bytes" "$(tex_num $((3 * 64 * 128 * 4)))~B a block."
hasnt "$g" "gemma2: no SwiGLU" "SwiGLU"
has "$g" "gemma2: soft-capping's tanh, B·a·T²·4 = $((2 * 4 * 32 * 32 * 4)) B a block" \
	"one more fp32 tensor the formula does not count: $(tex_num $((2 * 4 * 32 * 32 * 4)))~B a block."
has "$g" "gemma2: sliding windows keep the full scores under eager" \
	"as many as without a window: $(tex_num $((2 * 4 * 32 * 32 * 4)))~B a block. It saves memory only under SDPA"
has "$g" "gemma2: four norms, 2·(BT·h·4 + BT·4) = $((2 * (64 * 64 * 4 + 64 * 4))) B a block" \
	"which the formula does not count: $(tex_num $((2 * (64 * 64 * 4 + 64 * 4))))~B a block."
# qwen3-tiny: q/k norms over (4 + 2) heads of 16: BT·6·16·4 + BT·6·4
q=$tmp/qwen3-tiny.tex
has "$q" "qwen3: q/k norms, $((64 * 6 * 16 * 4 + 64 * 6 * 4)) B a block" \
	"their input and \$1/\\mathrm{rms}\$: $(tex_num $((64 * 6 * 16 * 4 + 64 * 6 * 4)))~B a block."
has "$q" "qwen3: SwiGLU" "SwiGLU: the engine keeps"
hasnt "$q" "qwen3: no soft-capping" "soft-capping"
# mixtral-tiny: E 4, k 2, d 64, F 96; the router's probs BT·E·4, choice
# and slot, tokens BT·k·8 each, weights BT·k·4, counts E·8, starts (E+1)·8
x=$tmp/mixtral-tiny.tex
r=$((64 * 4 * 4 + 3 * 64 * 2 * 8 + 64 * 2 * 4 + 4 * 8 + 5 * 8))
has "$x" "mixtral: the router, $r B a block" "which the formula's dense layer has not: $(tex_num $r)~B a block."
row=$(((64 + 2 * 96 + 96 + 64) * 4))
has "$x" "mixtral: the experts, k·BT = 128 assignments of $row B" \
	"\$k \\cdot sb = 128\$ assignments a block (dropless), $(tex_num $row)~B each: $(tex_num $((128 * row)))~B a block."
has "$x" "mixtral: routing imbalance named" "Routing imbalance:"
hasnt "$x" "mixtral: no dense SwiGLU MLP" "SwiGLU: the engine keeps"
has "$f" "mixtral: fig12-moe in the section" "fig12-moe"
# qwen2moe-tiny: the shared expert (S 80) on every token: sgu BT·2S, sact
# BT·S, sye BT·d, its gate's sigmoid BT, fp32; experts' rows (64 + 3·48 + 64)·4
x=$tmp/qwen2moe-tiny.tex
has "$x" "qwen2_moe: the shared expert, $((64 * 4 * (160 + 80 + 64 + 1))) B a block" \
	"The shared expert and its gate (every token, \$I = 80\$) keep $(tex_num $((64 * 4 * (160 + 80 + 64 + 1))))~B a block."
has "$x" "qwen2_moe: its experts' rows of $(((64 + 3 * 48 + 64) * 4)) B" "(dropless), $(tex_num $(((64 + 3 * 48 + 64) * 4)))~B each"
x=$tmp/qwen3moe-tiny.tex
has "$x" "qwen3_moe: q/k norms, $((64 * 6 * 16 * 4 + 64 * 6 * 4)) B a block" \
	"their input and \$1/\\mathrm{rms}\$: $(tex_num $((64 * 6 * 16 * 4 + 64 * 6 * 4)))~B a block."
has "$x" "qwen3_moe: the router" "The router:"
hasnt "$x" "qwen3_moe: no shared expert" "shared expert"
# the theory's text at --seq 4096, micro-batch 1, mixed (2-byte products)
run theory --model gemma-2-9b --seq 4096 --world 8 >"$tmp/g9.txt"
has "$tmp/g9.txt" "gemma-2-9b text: GeGLU, 3·4096·14336·2 B" "GeGLU (tanh GELU) MLP: the gate and up products and the activation, 3sbI (I = 14336), 352.32 MB a block"
has "$tmp/g9.txt" "gemma-2-9b text: soft-capping, 16·4096²·4 B" "attention soft-capping (c = 50): the tanh of the a·s² scores, one more fp32 tensor, 1.07 GB a block"
has "$tmp/g9.txt" "gemma-2-9b text: four norms" "four norms (before and after attention and the MLP)"
has "$tmp/g9.txt" "gemma-2-9b text: sliding window under eager" "sliding window of 4096 tokens: eager attention computes and keeps the full s² scores"
run theory --model mixtral-8x7b --seq 4096 --world 8 >"$tmp/m8.txt"
has "$tmp/m8.txt" "mixtral-8x7b text: the router" "router: its logits' softmax"
has "$tmp/m8.txt" "mixtral-8x7b text: experts, 2·4096 assignments of (2·4096 + 3·14336)·2 B" \
	"k·s·b = 8,192 assignments a block at 102,400 B each, 838.86 MB a block"
has "$tmp/m8.txt" "mixtral-8x7b text: routing imbalance" "routing imbalance:"
exit $status
