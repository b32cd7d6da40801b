#!/bin/sh
# paper_freeze_tfm — --freeze under the paper's schedule on zerosim's
# transformer (docs/schedule.md, "Frozen parameters under the paper's
# schedule"): a frozen tensor keeps its params and has no grads, no
# optimizer state and no master; the grads and the optimizer state are
# laid out over each unit's trainable run.
#
# 1. The bytes: theory = measure to the byte (tests/json_agree: resident,
#    peak, every category at the peak, bytes sent) on report/models'
#    gpt2-tiny (tied) and llama-tiny (untied): frozen embeddings, blocks:0-0
#    and the lower half (all-but-last:1), K = 1, 2, N = 1, 2, 3, dp, zero1,
#    zero2, zero3, both units, fp32 and mixed: a covering set.
# 2. Training: every scheme's losses equal the PyTorch step's with the same
#    --freeze over the same batches (the plain loop at N = 1, DDP at N = 2,
#    each held to real PyTorch by tests/ft_freeze.sh), within 1e-5
#    relative, fp32 Adam, three steps; the control: without --freeze the
#    paper's losses are other ones.
# 3. A frozen tensor's bytes never change: the final weights
#    (--dump-weights) of the frozen range are bitwise the same after one
#    step and after three, and the initial ones (a run's case file) in
#    fp32, rounded to fp16 in mixed precision, while the trainable range
#    moved.
# 4. What is not built is refused with one line, exit 2.
# 5. What the step saves (issue #23): the activations at the peak of
#    measure and theory, each the unfrozen run's less a count by hand
#    (nothing below the first trainable tensor, no frozen linear's input
#    that only its weight's gradient reads, a frozen head's too, tied or
#    not; recompute none, selective, full, whose rerun forward keeps no
#    frozen linear's input either), and the weights and losses alike
#    under the three recompute modes.
# 6. The case file keeps --freeze (zerosim-case/3): a frozen run through
#    --write-case and --case is the same run, and the report takes it.
# About 20 s on a shared core (6 s of CPU).
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=paper_freeze_tfm
. "${srcdir:-.}/tests/ft_lib.sh"
. "${srcdir:-.}/tests/freeze_lib.sh"
ft_configs 256 160 # $tmp/gpt2.json, llama.json: the PyTorch step's tiny models (dropout 0)

# 1. theory = measure (tests/freeze_lib.sh's fz_agree)
all="--schemes dp,zero1,zero2,zero3" full="--schemes dp,zero1,zero2"
fz_agree --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $all --unit layer
fz_agree --model "$llama" --freeze embeddings --precision fp32 --grad-accum 2 --world 1,2,3 $full --unit model
fz_agree --model "$llama" --freeze blocks:0-0 --precision fp32 --world 1,2,3 $all --unit layer
fz_agree --model "$llama" --freeze blocks:0-0 --precision mixed --grad-accum 2 --world 1,2,3 $all --unit layer
fz_agree --model "$llama" --freeze all-but-last:1 --precision mixed --grad-accum 2 --world 1,2,3 $full \
	--unit model,layer
# Recomputation under --freeze: selective, and full (transformers'
# enable_input_require_grads: every block runs backward)
fz_agree --model "$llama" --freeze blocks:1-1 --precision mixed --world 1,2,3 $all --unit layer --recompute selective
fz_agree --model "$llama" --freeze all-but-last:1 --precision fp32 --world 1,2,3 $full --unit model,layer \
	--recompute full
fz_agree --model "$gpt2" --freeze all-but-last:1 --precision fp32 --world 1,2,3 $full --unit layer \
	--recompute selective
fz_agree --model "$llama" --freeze re:down_proj --precision mixed --grad-accum 2 --world 1,2 $full --unit layer
fz_agree --model "$gpt2" --freeze re:mlp.c_proj --precision fp32 --world 1,2,3 $full --unit layer --recompute full
fz_agree --model "$gpt2" --freeze embeddings --precision fp32 --world 1,2,3 $full --unit model,layer
fz_agree --model "$llama" --freeze re:lm_head --precision mixed --world 1,2,3 $full --unit model,layer
fz_agree --model "$gpt2" --freeze embeddings --precision mixed --grad-accum 2 --world 1,2,3 $full --unit model
fz_agree --model "$gpt2" --freeze blocks:0-0 --precision mixed --world 1,2,3 $all --unit layer
fz_agree --model "$gpt2" --freeze blocks:0-0 --precision fp32 --grad-accum 2 --world 1,2,3 $all --unit layer
# The padding the frozen layout holds (docs/formats.md): llama-tiny's units
# 65,536 (frozen), 46,208, 46,208, 65,600 pad to N = 3 with 2, 1, 1, 1
# elements; the trainable ones' 3 are 1 element per rank at k = 12 (zero1)
# or g + k = 14, zero3's params all 5, 5/3 at p = 2, beside them.
fz_padding paper dp,zero1,zero2,zero3 "0.000 12.000 14.000 17.333"
fz_level paper
# The files say what was frozen (docs/formats.md: config.freeze).
for f in "$tmp/m.json" "$tmp/t.json"; do
	tr -d ' \n\t' <"$f" | grep -q '"freeze":"blocks:0-0"' ||
		{ echo "$name: FAIL: $f has no config.freeze" >&2; status=1; }
done

# 2. The losses against the PyTorch step's (tests/freeze_lib.sh's fz_train).
for model in gpt2 llama; do
	for freeze in embeddings blocks:0-0 re:lm_head; do
		[ "$model$freeze" = gpt2re:lm_head ] && continue # tied: no lm_head of its own
		for run in 1:none 2:ddp; do # N and the PyTorch step's wrapper
			world=${run%:*} wrapper=${run#*:} schemes=dp,zero1,zero2,zero3
			# a tied gpt2's layer 0 is the frozen table and the trainable
			# final norm: zero3 at N > 1 refuses it (part 4)
			[ "$model$freeze$world" = gpt2embeddings2 ] && schemes=dp,zero1,zero2
			# llama's head unit holds its trainable norm and frozen lm_head
			[ "$freeze" = re:lm_head ] && schemes=dp,zero1,zero2
			# shellcheck disable=SC2086
			fz_train "$model --freeze $freeze N=$world" $wrapper $schemes --model $tmp/$model.json --world $world \
				--precision fp32 --batch 2 --steps 3 --freeze $freeze
		done
	done
done
[ "$checked" -eq 37 ] || { echo "$name: $checked comparisons, 37 expected" >&2; exit 1; }
fz_control --freeze embeddings

# 3. The frozen bytes (tests/freeze_lib.sh).
fz_units
frozen_check "embeddings, fp32 zero2 N=2" 1 "$e" $((e + 1)) "$n" --freeze embeddings --precision fp32 \
	--schemes zero2 --world 2
frozen_check "blocks:0-0, fp32 zero3 N=3 unit=layer K=2" $((e + 1)) "$n" 1 "$e" --freeze blocks:0-0 \
	--precision fp32 --schemes zero3 --world 3 --unit layer --grad-accum 2
frozen_check "blocks:0-0, mixed zero3 N=3 unit=layer" $((e + 1)) "$n" 1 "$e" --freeze blocks:0-0 \
	--precision mixed --schemes zero3 --world 3 --unit layer
frozen_check "embeddings, mixed dp N=2 K=2" 1 "$e" $((e + 1)) "$n" --freeze embeddings --precision mixed \
	--schemes dp --world 2 --grad-accum 2

# 5. What the step saves (tests/freeze_lib.sh's fz_saved), counted by hand
# per row of B·T = 32 (4-byte elements): llama-tiny's block saves ln1 64,
# its 1/rms 1, qkv 128, att 64 (4 heads · 16 keys), atty 64, res2 64, ln2
# 64, its 1/rms 1, fch 352 (gate, up), fch_act 176, res3 64; gpt2-tiny's
# the same with a mean beside each 1/rms, qkv 192, fch and fch_act 256.
# Below the first trainable tensor nothing is saved: x0 (64) and block 0's
# tensors go but its output res3, which block 1 reads in its backward
# (the same size as x0): one block's. A frozen linear's input goes where
# only its weight's gradient reads it: ln1, atty, ln2, fch_act. Selective
# holds no att at the peak, and keeps atty (it rebuilds it); full saves
# each block's input alone and puts every block in the graph, and its
# rerun forward keeps no frozen linear's input either (1.13: a
# checkpointed block's rerun packs none, docs/finetune.md, "Gradient
# checkpointing with frozen weights"), where the peak is a block's
# recompute (below, ft_configs' llama).
row=$((32 * 4))
blk=$((64 + 1 + 128 + 64 + 64 + 64 + 64 + 1 + 352 + 176 + 64)) # llama-tiny's block
gblk=$((64 + 2 + 192 + 64 + 64 + 64 + 64 + 2 + 256 + 256 + 64)) # gpt2-tiny's
dp="--schemes dp"
fz_saved $((row * blk)) all-but-last:1 --model "$llama" $dp
fz_saved $((row * blk)) embeddings,blocks:0-0 --model "$llama" $dp
fz_saved $((row * (blk - 64))) all-but-last:1 --model "$llama" $dp --recompute selective
fz_saved 0 all-but-last:1 --model "$llama" $dp --recompute full
fz_saved 0 embeddings --model "$llama" $dp # x0: block 0's input, block 0 trains
fz_saved $((row * (64 + 64 + 64 + 176))) blocks:1-1 --model "$llama" $dp
fz_saved $((row * (64 + 64 + 64 + 176))) blocks:0-0 --model "$llama" $dp # above a trainable table
fz_saved $((row * (64 + 64 + 176))) blocks:1-1 --model "$llama" $dp --recompute selective
fz_saved $((2 * row * 176)) re:down_proj --model "$llama" $dp
fz_saved $((row * (gblk + 64))) all-but-last:1 --model "$gpt2" $dp # and lnf: wte, the tied head, is frozen
fz_saved $((row * (64 + 64 + 64 + 256))) blocks:1-1 --model "$gpt2" $dp
fz_saved $((2 * row * 256)) re:mlp.c_proj --model "$gpt2" $dp
# full: the peak is block 1's recompute, less its fch_act (main: 0)
fz_saved $((row * 256)) re:mlp.c_proj --model "$gpt2" $dp --recompute full
# ft_configs' llama (vocab 256, intermediate 160: no head's logits above
# a block's recompute), under full recompute (main: no drop). Its block
# rebuilds ln1 64, 1/rms 1, qkv 128, att 64, atty 64, res2 64, ln2 64,
# 1/rms 1, fch 320, fch_act 160 = 930 rows; block 1's recompute, the
# peak, holds them with tokens 1, x0 64 and block 0's output 64 (1,059).
# re:down_proj: its fch_act goes (160; 16-bit in mixed: 80 rows of 4 B).
# blocks:1-1: ln1, atty, ln2, fch_act go (352), and the peak moves to
# block 0's recompute: tokens, x0 and its 930 (995).
fz_saved $((row * 160)) re:down_proj --model "$tmp/llama.json" $dp --recompute full
fz_saved $((row * 80)) re:down_proj --model "$tmp/llama.json" $dp --recompute full --precision mixed
fz_saved =$((row * (1 + 64 + 930))) blocks:1-1 --model "$tmp/llama.json" $dp --recompute full
# A frozen head (issue #23) keeps no input: lnf (64), which only its
# weight's gradient reads, goes under every recompute (no checkpoint holds
# the head); gpt2-tiny's tied head is wte, frozen with the embeddings.
# Tied, the logits (1024) then wait for no embedding's backward either:
# under full recompute the peak moves from block 1's backward to the
# head's, where tokens, targets (1 each), x0, both blocks' outputs, lnf's
# mean and 1/rms (1 each) and the logits are held.
fz_saved $((row * 64)) re:lm_head --model "$llama" $dp
fz_saved $((row * 64)) re:lm_head --model "$llama" $dp --recompute selective
fz_saved $((row * 64)) re:lm_head --model "$llama" $dp --recompute full
fz_saved $((row * 64)) embeddings --model "$gpt2" $dp
fz_saved $((row * 64)) embeddings --model "$gpt2" $dp --recompute selective
fz_saved =$((row * (1 + 1 + 64 + 2 * 64 + 2 + 1024))) embeddings --model "$gpt2" $dp --recompute full
# ... and changes no bit: the weights and losses as with every block's
# backward run (full recompute)
fz_bits all-but-last:1 --model "$llama" --precision mixed --schemes dp,zero1,zero2 --world 2
fz_bits blocks:1-1 --model "$gpt2" --precision fp32 --schemes dp,zero3 --world 2 --unit layer
fz_bits re:lm_head --model "$llama" --precision mixed --schemes dp,zero1,zero2 --world 2 --unit layer

# 4. Refused by name: one line on stderr, exit 2.
refused() { # PATTERN OPTIONS...
	pattern=$1
	shift
	"$zerosim" measure "$@" --out "$tmp/r.json" 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/err"; then
		echo "ok: refused: $(cat "$tmp/err")"
	else
		echo "$name: FAIL: measure $* exited $rc, expected 2 and one line with '$pattern':" >&2
		cat "$tmp/err" >&2
		status=1
	fi
}
refused "only with --model" --freeze embeddings --world 2
refused "not one run of the flat vector.*: give --unit layer$" --model "$gpt2" --freeze blocks:0-0 --unit model --world 2
# each names what is taken: --unit layer only where it takes the pattern
# (a norm between two trainable tensors: in every unit)
refused "not one run of the flat vector.*: freeze only tensors at the model's start or end (embeddings, all-but-last:N), or give --framework torch --wrapper none or ddp$" \
	--model "$gpt2" --freeze '*.ln_*' --unit model --world 2
refused "not one run of the flat vector.*: freeze only tensors at a layer's start or end (whole blocks, embeddings), or give --framework torch --wrapper none or ddp$" \
	--model "$gpt2" --freeze '*.ln_*' --unit layer --world 2
refused "part frozen, part trainable" --model "$gpt2" --freeze embeddings --unit layer --schemes zero3 --world 2
refused "some parts of the fused tensor" --model "$llama" --freeze re:q_proj --world 2
refused "freezes none of" --model "$llama" --freeze re:nothing --world 2
refused "freezes every one of" --model "$llama" --freeze 're:.' --world 2
refused "torch --wrapper auto trains every parameter), and under --framework paper or deepspeed with --model" --model "$llama" --framework torch --freeze embeddings --world 2
# The report takes a frozen paper run (part 1's last theory file).
fz_report_taken paper

# 6. The case keeps --freeze (zerosim-case/3's "freeze"): a frozen run
#    written as a case and trained again from it, with no --freeze given,
#    is the same run (its losses and final weights bit for bit, its
#    config.freeze), and the report takes it beside the frozen theory; the
#    control: the same case less its freeze trains other weights. A
#    --freeze that disagrees with the case's, and "freeze" in a /2 file,
#    are refused by name.
fc="--seq 16 --batch 2 --steps 3 --world 2 --schemes zero1 --precision fp32"
# shellcheck disable=SC2086
"$zerosim" measure -q --model "$llama" $fc --freeze embeddings --write-case "$tmp/fc.json" --out "$tmp/fa.json" &&
	"$zerosim" measure -q --case "$tmp/fc.json" --schemes zero1 --out "$tmp/fb.json" &&
	sed 's|"zerosim-case/3"|"zerosim-case/2"|; /"freeze":/d' "$tmp/fc.json" >"$tmp/fu.json" &&
	"$zerosim" measure -q --case "$tmp/fu.json" --schemes zero1 --out "$tmp/fu.out.json" &&
	"$zerosim" theory --model "$llama" $fc --freeze embeddings --out "$tmp/ft.json" || exit 99
if python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
case = json.load(open(d + "/fc.json"))
a, b, u = (json.load(open(f"{d}/{x}.json")) for x in ("fa", "fb", "fu.out"))
ra, rb, ru = a["runs"][0], b["runs"][0], u["runs"][0]
bad = []
if (case["format"], case.get("freeze")) != ("zerosim-case/3", "embeddings"):
    bad.append(f"the case is {case['format']} with freeze {case.get('freeze')!r}")
if b["config"].get("freeze") != "embeddings":
    bad.append(f"--case's config.freeze {b['config'].get('freeze')!r}")
if (ra["losses"], ra["weights_digest"]) != (rb["losses"], rb["weights_digest"]):
    bad.append(f"--case trained {rb['losses']} {rb['weights_digest']}, the run {ra['losses']} {ra['weights_digest']}")
if ru["weights_digest"] == ra["weights_digest"]:
    bad.append("the case less its freeze trained the same weights (the control)")
if bad:
    sys.exit("; ".join(bad))
PY
then
	echo "ok: --freeze embeddings through --write-case (zerosim-case/3) and --case: the same losses and weights"
else
	echo "$name: FAIL: the frozen run's case" >&2
	status=1
fi
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mm.json" \
	--theory "$tmp/mt.json" --transformer "$tmp/ft.json" --transformer "$tmp/fb.json" --out "$tmp/frep" \
	>/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q 'paragraph{A frozen run.}' "$tmp/frep/transformer.tex"; then
	echo "ok: report took the frozen run trained from its case"
else
	echo "$name: FAIL: report on the frozen run trained from its case (exit $rc): $(cat "$tmp/err")" >&2
	status=1
fi
refused "--freeze blocks:0-0 disagrees with the case file's freeze embeddings" --case "$tmp/fc.json" \
	--freeze blocks:0-0 --schemes zero1
# the case's freeze refused by a check is named as the case's key (the
# message once said "--freeze", an option not given)
refused "$tmp/fc.json's \"freeze\" embeddings under --framework paper --schemes zero3 --unit model: unit 0 is part frozen" \
	--case "$tmp/fc.json" --schemes zero3 --unit model
sed 's|"zerosim-case/3"|"zerosim-case/2"|' "$tmp/fc.json" >"$tmp/f2.json"
refused 'unknown key "freeze" in a zerosim-case/2 file' --case "$tmp/f2.json" --schemes zero1
exit $status
