#!/bin/sh
# report_transformer — `zerosim report --transformer` on the shipped tiny
# models (report/models/, the sweep of `make report`):
#  - the MLP's outputs are byte for byte what they are without it;
#  - transformer.tex names ZeRO-3's largest unit with the size theory.json
#    gives (gpt2-tiny: the embeddings, tied; llama-tiny: the untied head),
#    shows Korthikanti's terms with the engine marked "not measured", and
#    names the causes (16- vs 32-bit, dropout masks, SwiGLU for llama only,
#    the logits);
#  - with the engine's measurement (where this zerosim measures
#    transformers), every run equals the schedule and the activations depart
#    from Korthikanti's by the sum of the named causes, worked by hand below;
#  - a reused folder without --transformer loses the section;
#  - "zerosim against PyTorch" (torch.tex, fig11) from gpt2-tiny's plain
#    loop under 1.13 and 2.6 beside the paper's: the peaks from the files,
#    the loss's buffers, op-by-op GELU, the tied head's held gradient and
#    set_to_none's gradients worked by hand from the shapes; the other
#    outputs unchanged by it; refused without the paper's theory or with a
#    live group off its phase's total;
#  - bad input is refused in one line, exit 2, nothing written: a row given
#    twice, a model given twice, an MLP's theory.json as --transformer, a
#    transformer's as --theory, an activations breakdown off its total, a
#    measurement beside a theory of another run (flash attention, another
#    optimizer, another shape under the same name, another K or --freeze);
#    a measured run without a schedule is counted as not checked, and one
#    off the section's table that differs from the schedule (in the comm
#    bytes) is unexplained.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-tfm.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$src/tests/json_edit.sh"
report() { ZEROSIM_DATADIR=$src "$zerosim" report --no-render "$@" 2>"$tmp/err" >/dev/null; }
# 69760 -> 69\,760, as the LaTeX groups digits.
tex_num() { echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|\\\)/\1\\,\2\3/' -e 'ta'; }
# The first value of "key" in a JSON file.
json_num() { tr -d ' \t\n' <"$2" | sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p" | head -n 1; }

"$zerosim" measure --quiet --layers 16,32,8 --world 1,2 --unit model,layer --out "$tmp/m.json" &&
	"$zerosim" theory --layers 16,32,8 --world 1,2 --unit model,layer --out "$tmp/t.json" ||
	fail "measure or theory of the MLP"
for m in gpt2-tiny llama-tiny; do
	"$zerosim" theory --model "$src/report/models/$m.json" --precision fp32 --world 1,2,4,8 --unit model,layer \
		--seq 32 --batch 2 --out "$tmp/$m.json" || fail "theory --model $m"
done

report --measured "$tmp/m.json" --theory "$tmp/t.json" --out "$tmp/mlp" || fail "report: $(cat "$tmp/err")"
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" \
	--transformer "$tmp/llama-tiny.json" --out "$tmp/both" || fail "report --transformer: $(cat "$tmp/err")"
# diff.json: the same but for the transformers' points it gains (docs/formats.md)
python3 -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
sys.exit(not ("transformers" not in a and b.pop("transformers") and a == b))' "$tmp/mlp/diff.json" "$tmp/both/diff.json" ||
	fail "diff.json differs with --transformer beyond its transformers"
for f in flags.txt table.tex findings.tex flags.tex zerosim-report.tex \
	figures/fig1-resident.gp figures/fig1-resident.dat figures/fig2-peak.gp figures/fig2-peak.dat \
	figures/fig3-comm.gp figures/fig3-comm.dat figures/fig4-breakdown.gp figures/fig4-breakdown.dat \
	figures/fig5-timeline.gp figures/fig5-timeline.dat; do
	cmp -s "$tmp/mlp/$f" "$tmp/both/$f" || fail "$f differs with --transformer"
done
[ -e "$tmp/mlp/transformer.tex" ] && fail "transformer.tex written without --transformer"
sec=$tmp/both/transformer.tex
[ -s "$sec" ] && [ -s "$tmp/both/figures/fig7-transformer.gp" ] && [ -s "$tmp/both/figures/fig7-transformer.dat" ] ||
	fail "no transformer.tex or fig7"

# ZeRO-3's largest unit, named, with theory.json's size.
emb=$(json_num embeddings "$tmp/gpt2-tiny.json")
head=$(json_num head "$tmp/llama-tiny.json")
[ -n "$emb" ] && [ -n "$head" ] || fail "no units in theory.json"
grep -qF "ZeRO-3's largest unit is the embeddings (with the final norm; the tied head gathers them again): $(tex_num "$emb") elements" "$sec" ||
	fail "gpt2-tiny's largest unit (the embeddings, $emb) not named"
grep -qF "ZeRO-3's largest unit is the head (with the final norm): $(tex_num "$head") elements" "$sec" ||
	fail "llama-tiny's largest unit (the head, $head) not named"
# Korthikanti's logits term, from the file, beside "not measured".
logits=$(json_num logits "$tmp/gpt2-tiny.json")
grep -qF "\\texttt{logits} & $(tex_num "$logits") & not measured & " "$sec" || fail "the logits row ($logits B)"
for cause in '16- vs 32-bit tensors' 'No dropout masks' "The logits' gradient" 'Normalisation statistics'; do
	[ "$(grep -c "^\\\\item\[([a-z])\] $cause" "$sec")" -eq 2 ] || fail "the cause '$cause' not named for both models"
done
[ "$(grep -c 'SwiGLU' "$sec")" -eq 1 ] && [ "$(grep -c 'Grouped-query' "$sec")" -eq 1 ] ||
	fail "SwiGLU and grouped-query attention must be named for llama-tiny only"
[ "$(grep -c "zerosim's own step (the engine's DDP, FSDP and DeepSpeed steps) runs no dropout" "$sec")" -eq 2 ] ||
	fail "zerosim's own step is not said to run no dropout: $(grep 'No dropout masks' "$sec")"

# With the engine's measurement (DP and ZeRO-3 at N = 8, unit=layer): the
# schedule explains every run, and the measured activations at DP's peak
# depart from Korthikanti's by what the named causes add up to, worked by
# hand from the shapes (fp32: the theory doubles the 2-byte terms, the
# 1-byte masks stay as they are; s 32, b 2, h 64, a 4, L 2, v 1024,
# sbh = 4096, as^2b = 8192, 64 rows):
#   gpt2-tiny: a layer 2 x (32sbh + 4as^2b) + 2sbh + as^2b = 344,064;
#     formula 2 x 344,064 (layers) + 4,096 + 16,384 + 16,384
#     + 262,144 + 262,144 = 1,249,280 B. The engine keeps, a block, x0 or the
#     last res3 (4sbh), ln1 4sbh, qkv 12sbh, att 4as^2b, atty, res2, ln2 4sbh
#     each, fch and fch_act 16sbh each, and 1,024 B of norm statistics. A
#     layer: no dropout masks -(2sbh + as^2b) = -16,384, no softmax dropout
#     output -4as^2b = -32,768, statistics +1,024; twice: -96,256. Then
#     the embedding's mask -4,096, the final norm's statistics +512, the
#     logits' gradient in place -262,144, the token ids +512: -361,472 B of
#     887,808 measured (-28.9 %).
#   llama-tiny (kv 2 of 4 heads, I 176): formula 1,245,184 B (no embedding
#     mask). A layer adds to gpt2's causes grouped-query attention -16,384
#     (qkv 8sbh, not 12sbh) and SwiGLU +4,096 (fch 2I and fch_act I rows of
#     4 B: 135,168 B against GELU's 32sbh = 131,072), with RMSNorm's 512 B of
#     statistics: -60,928 a layer, -121,856 for two; the final norm's +256,
#     the logits' gradient -262,144, the token ids +512: -383,232 B of
#     861,952 measured (-30.8 %).
if "$zerosim" measure --help | grep -q -- '--model'; then
	for m in gpt2 llama; do
		"$zerosim" measure --quiet --model "$src/report/models/$m-tiny.json" --precision fp32 --world 8 \
			--schemes dp,zero3 --unit layer --seq 32 --batch 2 --steps 1 --out "$tmp/m$m.json" 2>"$tmp/err" ||
			fail "measure --model $m-tiny: $(cat "$tmp/err")"
	done
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/mgpt2.json" --transformer "$tmp/gpt2-tiny.json" --transformer "$tmp/llama-tiny.json" \
		--transformer "$tmp/mllama.json" --out "$tmp/meas" >"$tmp/out" 2>"$tmp/err" || fail "report with measurements: $(cat "$tmp/err")"
	grep -q '^zerosim report: transformer gpt2-tiny (fp32): 32 rows, 2 measured, 0 unexplained$' "$tmp/out" &&
		grep -q '^zerosim report: transformer llama-tiny (fp32): 32 rows, 2 measured, 0 unexplained$' "$tmp/out" ||
		fail "not every measured run explained: $(cat "$tmp/out")"
	sec=$tmp/meas/transformer.tex
	grep -qF 'all activations & 1\,249\,280 & 887\,808 & $-$ 361\,472 B (-28.9\,\%)' "$sec" ||
		fail "gpt2-tiny's departure is not the one worked by hand: $(grep 'all activations' "$sec")"
	grep -qF 'all activations & 1\,245\,184 & 861\,952 & $-$ 383\,232 B (-30.8\,\%)' "$sec" ||
		fail "llama-tiny's departure is not the one worked by hand: $(grep 'all activations' "$sec")"
else
	echo "report_transformer: this zerosim does not measure transformers; the measured comparison is not tested"
fi

# A reused folder without --transformer: no stale section.
report --measured "$tmp/m.json" --theory "$tmp/t.json" --out "$tmp/both" || fail "rerun: $(cat "$tmp/err")"
[ -e "$tmp/both/transformer.tex" ] || [ -e "$tmp/both/figures/fig7-transformer.gp" ] && fail "a stale section stayed"

# Bad input: one line, exit 2, no folder.
refused() {
	what=$1 pattern=$2
	shift 2
	report "$@" --out "$tmp/bad"
	status=$?
	[ "$status" -eq 2 ] || fail "$what: exit $status, not 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$pattern" "$tmp/err" || fail "$what: $(cat "$tmp/err")"
	[ -e "$tmp/bad" ] && fail "$what: the report wrote $tmp/bad"
	return 0
}
# FILE with its first row again after itself, written to OUT.
dup_row() {
	awk '/"rows":/ { r = 1; print; next }
	     r == 1 && /^\t\t}, \{$/ { print; for (i = 0; i < n; i++) print b[i]; print; r = 2; next }
	     r == 1 { b[n++] = $0 }
	     { print }' "$1" >"$2"
	cmp -s "$1" "$2" && fail "dup_row: $2 is unchanged"
	return 0
}
dup_row "$tmp/gpt2-tiny.json" "$tmp/dup.json"
refused "a row twice" 'rows\[0\] and rows\[1\] are both dp N=1 unit=model; each must be given once' \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/dup.json"
dup_row "$tmp/t.json" "$tmp/tdup.json"
refused "an MLP theory row twice" 'rows\[0\] and rows\[1\] are both dp N=1 unit=model' \
	--measured "$tmp/m.json" --theory "$tmp/tdup.json"
cp "$tmp/gpt2-tiny.json" "$tmp/again.json"
refused "a model twice" 'are both gpt2-tiny in fp32 precision; give each model once' \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" --transformer "$tmp/again.json"
refused "an MLP's theory.json as --transformer" "is not a transformer's theory.json" \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/t.json"
refused "a transformer's theory.json as --theory" "a transformer's go to --transformer" \
	--measured "$tmp/m.json" --theory "$tmp/gpt2-tiny.json"
set_first "$tmp/gpt2-tiny.json" block 1 "$tmp/cut.json"
refused "units that do not add up to params" 'the embeddings, 2 blocks and the head add up to' \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/cut.json"
set_first "$tmp/gpt2-tiny.json" logits 1 "$tmp/off.json"
refused "an activations breakdown off its total" 'activations_breakdown sums to' \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/off.json"
# A measurement beside a theory of another run: refused in one line, not
# drawn as a departure of the code (which it was: "4 unexplained"), nor,
# with flash attention, which the engine does not run, passed unchecked
# against a formula without the scores. A measured run the theory gives
# no schedule for is counted as not checked, not as explained.
if [ -s "$tmp/mgpt2.json" ]; then
	tfm_theory() { # OUT ARGS...: gpt2-tiny's theory at N = 8, unit=layer
		out=$1
		shift
		"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --precision fp32 --world 8 --unit layer \
			--seq 32 --batch 2 "$@" --out "$out" || fail "theory $*"
	}
	tfm_theory "$tmp/flash.json" --flash-attn
	refused "a flash-attention theory" 'flash.json models flash attention, which the engine does not run' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/flash.json" --transformer "$tmp/mgpt2.json"
	tfm_theory "$tmp/sgd.json" --optimizer sgd
	refused "another optimizer" 'sgd.json and .*mgpt2.json describe different runs of gpt2-tiny: the optimizer differs' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/sgd.json" --transformer "$tmp/mgpt2.json"
	# The framework is part of the run: a torch measurement finds no paper theory.
	sed 's/"precision":/"framework": "torch", "precision":/' "$tmp/mgpt2.json" >"$tmp/mtorch.json"
	cmp -s "$tmp/mgpt2.json" "$tmp/mtorch.json" && fail "mtorch.json is unchanged"
	refused "another framework" 'mtorch.json measures gpt2-tiny in fp32 precision under framework torch, but no --transformer theory.json is of that model and framework' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" --transformer "$tmp/mtorch.json"
	mkdir "$tmp/heads" || fail "mkdir"
	sed 's/"n_head": 4/"n_head": 8/' "$src/report/models/gpt2-tiny.json" >"$tmp/heads/gpt2-tiny.json"
	"$zerosim" theory --model "$tmp/heads/gpt2-tiny.json" --precision fp32 --world 8 --unit layer --seq 32 \
		--batch 2 --out "$tmp/heads.json" || fail "theory of 8 heads"
	refused "another shape under the same name and size" \
		'heads.json and .*mgpt2.json describe different models named gpt2-tiny: config.model.attention_heads differs' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/heads.json" --transformer "$tmp/mgpt2.json"
	# Every setting that changes the bytes is part of the run (it was
	# joined and drawn as UNEXPLAINED): K under the paper's schedule; K and
	# --freeze under DDP over the PyTorch step.
	tfm_theory "$tmp/k2.json" --grad-accum 2
	refused "a K = 2 theory beside a K = 1 measurement" 'k2.json and .*mgpt2.json differ in grad_accum: 2 and 1' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/k2.json" --transformer "$tmp/mgpt2.json"
	ddp="--model $src/report/models/gpt2-tiny.json --framework torch --wrapper ddp --schemes dp --torch-device cpu
		--torch-version 1.13 --precision fp32 --world 2 --seq 32 --batch 2"
	# (the theory of the measured run: its one step, step 1's own list,
	# which under DDP holds the constructor's bucket and no Adam state yet)
	# shellcheck disable=SC2086
	"$zerosim" measure --quiet $ddp --steps 1 --grad-accum 2 --out "$tmp/mddp.json" 2>"$tmp/err" &&
		"$zerosim" theory $ddp --out "$tmp/tddp1.json" &&
		"$zerosim" theory $ddp --grad-accum 2 --steps 1 --out "$tmp/tddp.json" &&
		"$zerosim" theory $ddp --grad-accum 2 --freeze embeddings --out "$tmp/tfrozen.json" ||
		fail "DDP's files: $(cat "$tmp/err")"
	refused "a DDP K = 1 theory beside a K = 2 measurement" 'tddp1.json and .*mddp.json differ in grad_accum: 1 and 2' \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/tddp1.json" --transformer "$tmp/mddp.json"
	refused "a frozen theory beside a full measurement" "tfrozen.json and .*mddp.json differ in freeze: 'embeddings' and absent" \
		--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/tfrozen.json" --transformer "$tmp/mddp.json"
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/tddp.json" --transformer "$tmp/mddp.json" --out "$tmp/ddp" >"$tmp/out" 2>"$tmp/err" &&
		grep -q '^zerosim report: transformer gpt2-tiny (fp32, framework torch): 1 rows, 1 measured, 0 unexplained$' "$tmp/out" ||
		fail "DDP K = 2 beside its theory: $(cat "$tmp/out" "$tmp/err")"
	sed 's/"schedule":\([[:space:]]*\){/"schedule_was":\1{/' "$tmp/gpt2-tiny.json" >"$tmp/nosched.json"
	cmp -s "$tmp/gpt2-tiny.json" "$tmp/nosched.json" && fail "nosched.json is unchanged"
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/nosched.json" --transformer "$tmp/mgpt2.json" --out "$tmp/nosched" >"$tmp/out" 2>"$tmp/err" ||
		fail "report without a schedule: $(cat "$tmp/err")"
	grep -q '^zerosim report: transformer gpt2-tiny (fp32): 32 rows, 2 measured, 0 unexplained, 2 not checked (theory.json has no schedule for them)$' "$tmp/out" ||
		fail "runs without a schedule not counted as not checked: $(cat "$tmp/out")"
	grep -q 'textbf{Not checked}' "$tmp/nosched/transformer.tex" || fail "the section does not say the runs were not checked"
	grep -q 'Every measured run of the model equals the schedule' "$tmp/nosched/transformer.tex" &&
		fail "the section claims runs it did not check equal the schedule"
	# A run off the table (N = 1, unit=model) whose comm bytes differ from
	# the schedule's: unexplained, and the section does not say that every
	# run equals the schedule.
	"$zerosim" measure --quiet --model "$src/report/models/gpt2-tiny.json" --precision fp32 --world 1,8 \
		--schemes dp --unit model,layer --seq 32 --batch 2 --steps 1 --out "$tmp/m18.json" 2>"$tmp/err" ||
		fail "measure at N = 1, 8: $(cat "$tmp/err")"
	set_first "$tmp/m18.json" comm_bytes_per_rank_per_step 5 "$tmp/comm.json"
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/gpt2-tiny.json" --transformer "$tmp/comm.json" --out "$tmp/comm" >"$tmp/out" 2>"$tmp/err" ||
		fail "report with another comm: $(cat "$tmp/err")"
	grep -q '^zerosim report: transformer gpt2-tiny (fp32): 32 rows, 4 measured, 1 unexplained$' "$tmp/out" &&
		grep -q '^zerosim report: UNEXPLAINED gpt2-tiny dp N=1 unit=model' "$tmp/err" ||
		fail "a comm off the schedule is not unexplained: $(cat "$tmp/out" "$tmp/err")"
	grep -q 'Every measured run of the model equals the schedule' "$tmp/comm/transformer.tex" &&
		fail "the section says every run equals the schedule beside an unexplained one off its table"
	grep -q 'textbf{Unexplained}: 1 measured run of the model differs' "$tmp/comm/transformer.tex" ||
		fail "the section does not name the unexplained run"
	# N = 5 divides no unit: the padding is a fraction of a byte per rank
	# (docs/formats.md), which the report takes.
	"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --precision fp32 --world 5 --unit layer \
		--seq 32 --batch 2 --out "$tmp/t3.json" &&
		"$zerosim" measure --quiet --model "$src/report/models/gpt2-tiny.json" --precision fp32 --world 5 \
			--unit layer --seq 32 --batch 2 --steps 1 --out "$tmp/m3.json" 2>"$tmp/err" || fail "N = 5: $(cat "$tmp/err")"
	grep -q '"padding_bytes":[[:space:]]*[0-9]*\.[0-9]' "$tmp/t3.json" || fail "N = 5: no fractional padding to read"
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/t3.json" --transformer "$tmp/m3.json" --out "$tmp/three" >"$tmp/out" 2>"$tmp/err" ||
		fail "report at N = 5: $(cat "$tmp/err")"
	grep -q '^zerosim report: transformer gpt2-tiny (fp32): 4 rows, 4 measured, 0 unexplained$' "$tmp/out" ||
		fail "report at N = 5: $(cat "$tmp/out")"
	# A framework on the transformer: named in the summary and the section,
	# with its departures from the paper's level at the peak (torch zero1:
	# DDP's buckets, the partition's imbalance).
	for k in theory measure; do
		q=$([ $k = measure ] && echo "--quiet --steps 1")
		# shellcheck disable=SC2086
		"$zerosim" $k $q --model "$src/report/models/gpt2-tiny.json" --framework torch --precision fp32 \
			--world 4 --schemes dp,zero1 --unit layer --seq 32 --batch 2 --out "$tmp/torch-$k.json" 2>"$tmp/err" ||
			fail "torch $k: $(cat "$tmp/err")"
	done
	ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" \
		--transformer "$tmp/torch-theory.json" --transformer "$tmp/torch-measure.json" --out "$tmp/torch" \
		>"$tmp/out" 2>"$tmp/err" || fail "report of torch on the transformer: $(cat "$tmp/err")"
	grep -q '^zerosim report: transformer gpt2-tiny (fp32, framework torch): 2 rows, 2 measured, 0 unexplained$' \
		"$tmp/out" || fail "torch on the transformer: $(cat "$tmp/out")"
	grep -q 'Under framework torch' "$tmp/torch/transformer.tex" &&
		grep -q 'ZeRO-1: optimizer state \$+\$[0-9\,]* B, buckets \$+\$' "$tmp/torch/transformer.tex" &&
		grep -q 'above the average' "$tmp/torch/transformer.tex" ||
		fail "the section does not give torch's departures: $(grep -A3 'Under framework' "$tmp/torch/transformer.tex")"
fi

# DDP over the PyTorch step runs the config's dropout (gpt2-tiny: 0.1 each):
# the cause names the noise it keeps, not "no dropout"; with every
# probability 0 it keeps none.
sed 's/"tie_word_embeddings": true/&, "embd_pdrop": 0, "attn_pdrop": 0, "resid_pdrop": 0/' \
	"$src/report/models/gpt2-tiny.json" >"$tmp/gpt2-p0.json"
for p in gpt2-tiny p0; do
	mf=$src/report/models/gpt2-tiny.json
	[ $p = p0 ] && mf=$tmp/gpt2-p0.json
	"$zerosim" theory --model "$mf" --framework torch --wrapper ddp --schemes dp --world 2 --precision fp32 \
		--torch-device cpu --attn eager --seq 32 --batch 2 --out "$tmp/ddp-$p.json" 2>"$tmp/err" ||
		fail "theory of ddp over the PyTorch step: $(cat "$tmp/err")"
	report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/ddp-$p.json" --out "$tmp/ddp-$p" ||
		fail "report of ddp over the PyTorch step: $(cat "$tmp/err")"
done
grep -q "^\\\\item\[(.)\] Dropout's noise, not a mask: .*the PyTorch step runs the config's dropout as the CPU's" \
	"$tmp/ddp-gpt2-tiny/transformer.tex" && ! grep -q 'runs no dropout' "$tmp/ddp-gpt2-tiny/transformer.tex" ||
	fail "ddp's dropout cause: $(grep -i 'dropout' "$tmp/ddp-gpt2-tiny/transformer.tex")"
grep -q "No dropout masks: .*the PyTorch step runs the config's dropout, whose probabilities are 0 here" \
	"$tmp/ddp-p0/transformer.tex" || fail "ddp's dropout cause at p 0: $(grep -i 'dropout' "$tmp/ddp-p0/transformer.tex")"

# The section "zerosim against PyTorch": gpt2-tiny's plain PyTorch loop
# under 1.13 (zero_grad zeros) and 2.6 (set_to_none) beside the paper's dp
# row of $tmp/gpt2-tiny.json (seq 32, batch 2, fp32, N = 1, unit layer).
for v in 1.13 2.6; do
	"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --framework torch --wrapper none --world 1 \
		--schemes dp --precision fp32 --torch-device cpu --attn eager --torch-version $v --seq 32 --batch 2 \
		--out "$tmp/plain-$v.json" 2>"$tmp/err" || fail "theory of the plain loop $v: $(cat "$tmp/err")"
done
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" \
	--transformer "$tmp/plain-1.13.json" --transformer "$tmp/plain-2.6.json" --out "$tmp/pt" ||
	fail "report with the plain loop: $(cat "$tmp/err")"
sec=$tmp/pt/torch.tex
[ -s "$sec" ] && [ -s "$tmp/pt/figures/fig11-torch.gp" ] && [ -s "$tmp/pt/figures/fig11-torch.dat" ] ||
	fail "no torch.tex or fig11"
# a measured plain loop is refused by name (exit 2, no folder made): the
# section compares the plain loop's theory with the paper's, and read as
# a theory the measurement was taken for "an older zerosim theory"
"$zerosim" measure --quiet --model "$src/report/models/gpt2-tiny.json" --framework torch --wrapper none \
	--world 1 --schemes dp --precision fp32 --torch-device cpu --attn eager --torch-version 1.13 --seq 32 \
	--batch 2 --steps 1 --out "$tmp/plain-m.json" 2>"$tmp/err" || fail "measure of the plain loop: $(cat "$tmp/err")"
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/plain-m.json" --out "$tmp/pm"
rc=$?
[ $rc -eq 2 ] && grep -q 'plain-m.json: a measured plain loop (--framework torch --wrapper none) is not reported' \
	"$tmp/err" && [ ! -e "$tmp/pm" ] || fail "a measured plain loop: exit $rc, $(cat "$tmp/err")"
# the transformer section is what it is without the plain loop
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" --out "$tmp/nopt" ||
	fail "report of gpt2-tiny: $(cat "$tmp/err")"
for f in transformer.tex figures/fig7-transformer.dat diff.json flags.txt; do
	cmp -s "$tmp/nopt/$f" "$tmp/pt/$f" || fail "$f changed with the plain loop"
done
# Each release's peak from its file (the backward phase's most, where the
# peak falls), in the table's peak row.
bwd_peak() { tr -d ' \t\n' <"$1" | sed -n 's/.*"phase_peak_bytes":{[^}]*"backward":\([0-9]*\).*/\1/p'; }
p13=$(bwd_peak "$tmp/plain-1.13.json")
p26=$(bwd_peak "$tmp/plain-2.6.json")
[ -n "$p13" ] && [ -n "$p26" ] || fail "no peak_bytes in the plain loop's theory"
grep -F 'textbf{peak}' "$sec" | grep -qF " & $(tex_num "$p13") & $(tex_num "$p26") " ||
	fail "the peaks ($p13, $p26) not in the table: $(grep 'textbf{peak}' "$sec")"
grep -q '^its phase & backward & backward & backward ' "$sec" || fail "the phase of the peak: $(grep 'its phase' "$sec")"
# Worked by hand from the shapes (B 2, T 32, V 1024, d 64, 4d 256, 2
# blocks, fp32; Psi 169,728): the loss keeps the log-softmax [BT, V] and at
# the peak its gradient and nll_loss's [BT, V] zeros, 3 x 262,144 B, with
# nll_loss's 4-byte loss and backward's 4-byte ones_like: 786,440 B;
# gelu_new op by op keeps 0.5x, tanh and 1 + tanh [B, T, 4d] a block
# (3 x 65,536 x 2) and its three Python floats as 8-byte wrapped numbers a
# block (6 x 8): 393,264 B; set_to_none frees the 4-byte grads, 678,912 B.
grep -q "^the loss's buffers & 0 & 786\\\\,440 & 786\\\\,440 " "$sec" || fail "the loss's buffers: $(grep "loss's buffers &" "$sec")"
grep -q "^op-by-op GELU / RMSNorm & 0 & 393\\\\,264 & 393\\\\,264 " "$sec" || fail "GELU op by op: $(grep 'op-by-op GELU' "$sec")"
grep -q "(the gradients' 678\\\\,912~B)" "$sec" || fail "set_to_none's gradients"
# Dropout (GPT2Config's 0.1 each; the config has no pdrop keys): on the
# CPU each dropout keeps a noise tensor of its input's dtype and size, alive
# at backward's peak: after the embeddings [B, T, d] 2 x 32 x 64 x 4 =
# 16,384; each block's attention weights [B, h, T, T] 2 x 4 x 32 x 32 x 4 =
# 32,768, and after attn.c_proj and mlp.c_proj [B, T, d] 16,384 each:
# 16,384 + 2 x (32,768 + 2 x 16,384) = 147,456 B; the paper keeps none.
grep -q "^dropout's kept noise & 0 & 147\\\\,456 & 147\\\\,456 " "$sec" ||
	fail "dropout's noise: $(grep "dropout's kept noise &" "$sec")"
grep -q "keeps a noise tensor of the input.s dtype and size for each dropout.*: 147\\\\,456~B in each release" "$sec" ||
	fail "the departures do not name dropout's noise: $(grep -i 'dropout' "$sec")"
grep -q "\"dropout's kept noise\"" "$tmp/pt/figures/fig11-torch.dat" || fail "fig11 has no dropout bar"
# the tied head's gradient (V x d x 4 = 262,144 B) is held across the blocks' backward
grep -q "it is 262\\\\,144~B, held from the start of \\\\texttt{ln\\\\_f}'s backward to the start of \\\\texttt{wte}'s" "$sec" ||
	fail "the tied head's held gradient: $(grep 'tied head' "$sec")"
# --freeze (the paper's schedule trains every parameter): a frozen run
# beside the full one is its own column, its pattern in the text. By hand,
# all-but-last:1 trains the last block and ln_f: 2 x 64 (ln_1) + 64 x 192 +
# 192 (c_attn) + 64 x 64 + 64 (attn.c_proj) + 2 x 64 (ln_2) + 64 x 256 +
# 256 (c_fc) + 256 x 64 + 64 (mlp.c_proj) + 2 x 64 (ln_f) = 50,112
# parameters: 200,448 B of gradients at the peak (zeros keeps them all)
# and twice that of Adam's m and v, against the paper's 678,912 B and
# 1,357,824 B; and the settings head the columns a line each.
"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --framework torch --wrapper none --world 1 \
	--schemes dp --precision fp32 --torch-device cpu --attn eager --torch-version 1.13 --seq 32 --batch 2 \
	--freeze all-but-last:1 --out "$tmp/plain-fz.json" 2>"$tmp/err" || fail "theory --freeze: $(cat "$tmp/err")"
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" \
	--transformer "$tmp/plain-1.13.json" --transformer "$tmp/plain-fz.json" --out "$tmp/fz" ||
	fail "report with a frozen plain loop: $(cat "$tmp/err")"
grep -qF 'PyTorch 1.13\\all trained\end{tabular} & \begin{tabular}[b]{@{}r@{}}PyTorch 1.13\\frozen A\end{tabular}' \
	"$tmp/fz/torch.tex" || fail "the frozen run's column: $(grep 'bytes at the peak' "$tmp/fz/torch.tex")"
grep -qF "PyTorch 1.13, frozen A's (zero\_grad zeros, single-tensor Adam, eager attention, \texttt{--freeze 'all-but-last:1'})" \
	"$tmp/fz/torch.tex" || fail "the frozen run's pattern: $(grep 'paragraph' "$tmp/fz/torch.tex")"
grep -qF "gradients at the peak 1.13, all trained 678\,912~B; 1.13, frozen A 200\,448~B against the paper's 678\,912~B, Adam's m and v 1.13, all trained 1\,357\,824~B; 1.13, frozen A 400\,896~B against the paper's 1\,357\,824~B" \
	"$tmp/fz/torch.tex" || fail "the frozen parameters' departure: $(grep 'frozen parameters' "$tmp/fz/torch.tex")"
grep -q 'frozen parameters' "$sec" && fail "the frozen parameters' departure without --freeze"
# LoRA (its base frozen, its adapters trained): named in its column and
# its paragraph, and not taken for the full run's duplicate.
"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --framework torch --wrapper none --world 1 \
	--schemes dp --precision fp32 --torch-device cpu --attn eager --torch-version 1.13 --seq 32 --batch 2 \
	--lora-r 4 --out "$tmp/plain-lora.json" 2>"$tmp/err" || fail "theory --lora-r: $(cat "$tmp/err")"
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" \
	--transformer "$tmp/plain-1.13.json" --transformer "$tmp/plain-lora.json" --out "$tmp/lora" ||
	fail "report with a LoRA plain loop: $(cat "$tmp/err")"
grep -qF 'PyTorch 1.13\\LoRA r = 4\end{tabular}' "$tmp/lora/torch.tex" &&
	grep -qF "LoRA r = 4 over \texttt{default} (its base frozen)" "$tmp/lora/torch.tex" &&
	grep -qF "or LoRA's frozen base" "$tmp/lora/torch.tex" ||
	fail "the LoRA run not named: $(grep -i 'lora' "$tmp/lora/torch.tex")"
# LoRA runs that differ only in --lora-dropout or --lora-alpha, and plain
# loops only in --precision, are runs of their own (not "given twice"),
# each column named by what tells it apart.
for v in "do --lora-dropout 0.1" "al --lora-alpha 16"; do
	# shellcheck disable=SC2086
	set -- $v
	n=$1
	shift
	"$zerosim" theory --model "$src/report/models/gpt2-tiny.json" --framework torch --wrapper none --world 1 \
		--schemes dp --precision fp32 --torch-device cpu --attn eager --torch-version 1.13 --seq 32 --batch 2 \
		--lora-r 4 "$@" --out "$tmp/plain-lora-$n.json" 2>"$tmp/err" || fail "theory --lora-r 4 $*: $(cat "$tmp/err")"
done
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" \
	--transformer "$tmp/plain-lora.json" --transformer "$tmp/plain-lora-do.json" \
	--transformer "$tmp/plain-lora-al.json" --out "$tmp/lora3" ||
	fail "report with LoRA runs apart in dropout and alpha: $(cat "$tmp/err")"
grep -qF 'PyTorch 1.13\\alpha 8\\dropout 0\end{tabular} & \begin{tabular}[b]{@{}r@{}}PyTorch 1.13\\alpha 8\\dropout 0.1\end{tabular} & \begin{tabular}[b]{@{}r@{}}PyTorch 1.13\\alpha 16\\dropout 0\end{tabular}' \
	"$tmp/lora3/torch.tex" || fail "the LoRA runs' columns: $(grep 'bytes at the peak' "$tmp/lora3/torch.tex")"
for p in fp32 amp-bf16; do
	"$zerosim" theory --model "$src/report/models/llama-tiny.json" --framework torch --wrapper none --world 1 \
		--schemes dp --precision $p --torch-device cpu --attn eager --torch-version 2.6 --seq 32 --batch 2 \
		--out "$tmp/plain-ll-$p.json" 2>"$tmp/err" || fail "theory --precision $p: $(cat "$tmp/err")"
done
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/llama-tiny.json" \
	--transformer "$tmp/plain-ll-fp32.json" --transformer "$tmp/plain-ll-amp-bf16.json" --out "$tmp/prec" ||
	fail "report with plain loops apart in precision: $(cat "$tmp/err")"
grep -qF 'PyTorch 2.6\\fp32\end{tabular} & \begin{tabular}[b]{@{}r@{}}PyTorch 2.6\\amp-bf16\end{tabular}' \
	"$tmp/prec/torch.tex" || fail "the precisions' columns: $(grep 'bytes at the peak' "$tmp/prec/torch.tex")"
# A reused folder without the plain loop loses the section.
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" --out "$tmp/pt" ||
	fail "report again: $(cat "$tmp/err")"
[ -e "$sec" ] || [ -e "$tmp/pt/figures/fig11-torch.gp" ] && fail "torch.tex or fig11 left from the run before"
# Bad input: the plain loop without the paper's theory; a group off its phase's total.
refused "the plain loop without the paper" "the plain loop of gpt2-tiny needs the paper's schedule beside it" \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/plain-1.13.json"
awk '/"peak_live":/ { l = 1 } l && /"backward":/ { k = 1 } k && !d && /"what":[ \t]*"_log_softmax",/ { n = 1 }
     n && /"bytes":/ { sub(/[0-9]+/, "262145"); d = 1; n = 0 } { print }' \
	"$tmp/plain-1.13.json" >"$tmp/plain-bad.json"
cmp -s "$tmp/plain-1.13.json" "$tmp/plain-bad.json" && fail "plain-bad.json is unchanged"
refused "a live group off its total" "peak_live.backward sums to $((p13 + 1)) bytes, not the peak" \
	--measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/gpt2-tiny.json" --transformer "$tmp/plain-bad.json"

# fig10-allocator's fixed-costs bar: with theory --allocator cuda the
# rows carry allocator.device_overhead (the CUDA context and NCCL buffers
# outside the caching allocator; cuBLAS's workspace is a request of the
# replay, not one of them); each panel's bar stacks them, to scale, on the
# replay's highest reserved, and the .dat names them. At N = 2:
# 500,000,000 + 544,000,000 = 1,044,000,000 B (docs/schedule.md, "The
# device's fixed costs"); without them, no bar.
"$zerosim" measure --quiet --layers 16,32,8 --world 2 --steps 1 --timeline --allocator cuda --out "$tmp/am.json" &&
	"$zerosim" theory --layers 16,32,8 --world 2 --steps 1 --allocator cuda --out "$tmp/at.json" ||
	fail "the allocator's runs"
report --measured "$tmp/am.json" --theory "$tmp/at.json" --out "$tmp/al" || fail "report with fixed costs: $(cat "$tmp/err")"
n=$(grep -c "^# fixed costs outside the allocator (theory.json's allocator.device_overhead), bytes: total 1044000000, cuda_context 500000000, nccl 544000000$" \
	"$tmp/al/figures/fig10-allocator.dat")
[ "$n" = 4 ] || fail "fig10's fixed costs: $n blocks of 4 name them"
grep -q "^set object 2 rect from .* fc rgb '#661100'" "$tmp/al/figures/fig10-allocator.gp" &&
	grep -q 'fixed\\ncosts\\n1044.0 MB' "$tmp/al/figures/fig10-allocator.gp" || fail "fig10 has no fixed-costs bar"
"$zerosim" theory --layers 16,32,8 --world 2 --steps 1 --out "$tmp/at0.json" || fail "theory without the allocator"
report --measured "$tmp/am.json" --theory "$tmp/at0.json" --out "$tmp/al0" || fail "report: $(cat "$tmp/err")"
grep -q 'fixed' "$tmp/al0/figures/fig10-allocator.dat" "$tmp/al0/figures/fig10-allocator.gp" &&
	fail "fig10 draws fixed costs the theory has none of"

# fig10-allocator draws every rank whose replay differs, the binding
# rank (allocator.rank, the rank whose reserved peak is the highest;
# diff.json's allocator_rank) first and marked, not rank 0 always. Under
# torch's zero1 (ZeroRedundancyOptimizer: whole tensors, each to the rank
# holding the fewest elements so far, largest first) the
# 2048,2048,1400,2048 MLP's weights 4,194,304, 2,867,200 and 2,867,200
# fall 4,194,304 to rank 0 and 5,734,400 to rank 1, so rank 1 holds more
# Adam state and may reserve more. The check reads the binding rank from
# measured.json (the case is used only where it is not 0) and holds each
# rank's block of the figure to that rank's own events (timeline_ranks,
# or the run's timeline for rank 0): as many rows, the same phases,
# allocated (each block rounded up to 512 B) never below the rank's
# current_bytes, and, with one step (the replay is then the run's whole),
# the highest allocated and reserved equal to the run's own replay of
# that rank (allocator.per_rank's allocated_peak_bytes and
# reserved_peak_bytes).
"$zerosim" measure --quiet --layers 2048,2048,1400,2048 --framework torch --schemes zero1 --world 2 --steps 1 \
	--timeline --timeline-ranks all --allocator cuda --out "$tmp/bm.json" &&
	"$zerosim" measure --quiet --layers 2048,2048,1400,2048 --framework torch --schemes zero1 --world 2 --steps 1 \
	--timeline --allocator cuda --out "$tmp/bm0.json" &&
	"$zerosim" theory --layers 2048,2048,1400,2048 --framework torch --schemes zero1 --world 2 --out "$tmp/bt.json" ||
	fail "the binding-rank runs"
report --measured "$tmp/bm.json" --theory "$tmp/bt.json" --out "$tmp/br" || fail "report, binding rank: $(cat "$tmp/err")"
report --measured "$tmp/bm0.json" --theory "$tmp/bt.json" --out "$tmp/br0" || fail "report, rank 0's events: $(cat "$tmp/err")"
python3 - "$tmp/bm.json" "$tmp/br/figures/fig10-allocator.dat" "$tmp/br/diff.json" "$tmp/br/figures/fig10-allocator.gp" \
	"$tmp/br0/figures/fig10-allocator.dat" "$tmp/br0/figures/fig10-allocator.gp" "$tmp/bt.json" \
	<<'PY' || fail "fig10's ranks"
import json, sys
m = json.load(open(sys.argv[1]))
run, psi = m['runs'][0], json.load(open(sys.argv[7]))['params']
al = run['allocator']
k, res, alp = al['rank'], al['per_rank']['reserved_peak_bytes'], al['per_rank']['allocated_peak_bytes']
bad = []
if k == 0 or res[k] != max(res) or res[k] <= res[0]:
    sys.exit('the case no longer binds at a rank other than 0: rank %d, reserved %s' % (k, res))
events = {0: run['timeline']}
events.update({t['rank']: t['timeline'] for t in run['timeline_ranks']})
blocks, cur = [], None
for l in open(sys.argv[2]).read().split('\n'):
    if l.startswith('# zero1 '):
        cur = []
        blocks.append((l, cur))
    elif l and not l.startswith('#') and cur is not None:
        cur.append(l.split())
heads = [h for h, _ in blocks]
if heads != ['# zero1 unit=model ranks=%d binds' % k, '# zero1 unit=model ranks=0']:
    bad.append('block headers %s' % heads)
for (h, rows), rank in zip(blocks, [k, 0]):
    ev = events[rank]
    if len(rows) != len(ev) + 1:
        bad.append('%d rows for rank %d\'s %d events' % (len(rows), rank, len(ev)))
    for i, (r, e) in enumerate(zip(rows, ev)):
        if i and r[3] != e['phase']:
            bad.append('event %d: phase %s, rank %d\'s %s' % (i, r[3], rank, e['phase'])); break
        if round(float(r[1]) * psi) < e['current_bytes']:
            bad.append('event %d: allocated %s below rank %d\'s current_bytes %d' % (i, r[1], rank, e['current_bytes']))
            break
    top = max(round(float(r[2]) * psi) for r in rows)
    if top != res[rank]:
        bad.append('rank %d: highest reserved %d, the run\'s replay %d' % (rank, top, res[rank]))
    top = max(round(float(r[1]) * psi) for r in rows)
    if top != alp[rank]:
        bad.append('rank %d: highest allocated %d, the run\'s replay %d' % (rank, top, alp[rank]))
pt = [p for p in json.load(open(sys.argv[3]))['points'] if 'allocator_rank' in p]
if [p['allocator_rank'] for p in pt] != [k]:
    bad.append('diff.json allocator_rank %s' % [p['allocator_rank'] for p in pt])
gp = open(sys.argv[4]).read()
if 'title "rank %d, binds"' % k not in gp or 'title "rank 0"' not in gp:
    bad.append('the panel does not name rank %d as binding and rank 0 beside it' % k)
# Without --timeline-ranks all rank 0 stands in, alone, named so.
dat0 = open(sys.argv[5]).read()
if '# zero1 unit=model ranks=0 (rank %d binds; its events are not in the file' % k not in dat0 or \
   dat0.count('# zero1 ') != 1 or 'set label "rank 0 (rank %d\\nbinds' % k not in open(sys.argv[6]).read():
    bad.append('rank 0 standing in is not named')
if bad:
    sys.exit('; '.join(bad))
PY

# Ranks whose replays are equal share one block, named as a run: the
# paper's ZeRO-3 at N = 4 on an MLP whose shard splits evenly holds the
# same on every rank, so "ranks=0-3", one block, one curve; each rank's
# own replay in measured.json (per_rank) says they are equal.
"$zerosim" measure --quiet --layers 16,32,8 --world 4 --schemes zero3 --steps 1 --timeline --timeline-ranks all \
	--allocator cuda --out "$tmp/em.json" &&
	"$zerosim" theory --layers 16,32,8 --world 4 --schemes zero3 --out "$tmp/et.json" || fail "the equal-rank runs"
report --measured "$tmp/em.json" --theory "$tmp/et.json" --out "$tmp/er" || fail "report, equal ranks: $(cat "$tmp/err")"
python3 - "$tmp/em.json" "$tmp/er/figures/fig10-allocator.dat" <<'PY' || fail "fig10's equal ranks"
import json, sys
runs = [r for r in json.load(open(sys.argv[1]))['runs'] if r['unit'] == 'model']
pr = runs[0]['allocator']['per_rank']
if len(set(pr['reserved_peak_bytes'])) != 1 or len(set(pr['allocated_peak_bytes'])) != 1:
    sys.exit('the ranks no longer replay alike: %s' % pr)
heads = [l.strip() for l in open(sys.argv[2]) if l.startswith('# zero3 unit=model')]
if heads != ['# zero3 unit=model ranks=0-3 binds']:
    sys.exit('blocks %s' % heads)
PY

# An output of the report given as its input.
cp "$tmp/gpt2-tiny.json" "$tmp/mlp/transformer.tex"
report --measured "$tmp/m.json" --theory "$tmp/t.json" --transformer "$tmp/mlp/transformer.tex" --out "$tmp/mlp"
status=$?
[ "$status" -eq 2 ] && grep -q "^zerosim report: --transformer .*: is a file the report writes in" "$tmp/err" ||
	fail "an output as --transformer: exit $status, $(cat "$tmp/err")"
cmp -s "$tmp/gpt2-tiny.json" "$tmp/mlp/transformer.tex" || fail "an output given as --transformer was overwritten"
echo "transformer section: MLP outputs unchanged; largest units and Korthikanti's terms from theory.json; zerosim against PyTorch worked by hand; bad input refused"
