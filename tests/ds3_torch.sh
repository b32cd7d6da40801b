#!/bin/sh
# ds3_torch — DeepSpeed's ZeRO-3 over the PyTorch step at N > 1
# (`--framework deepspeed --wrapper deepspeed --schemes zero3`,
# util/ag_ds3.c; docs/schedule.md, "ZeRO-3 over the PyTorch step", N > 1):
#  - built, the steady step at N = 2 and 3 (every parameter of the tiny
#    models persists): theory = measure to the byte on every rank (between
#    steps, peak, every category, comm, each phase's peak, every mark) on
#    gpt2-tiny and llama-tiny; the bytes between steps equal to the count
#    made by hand from the models' shapes (each parameter's partition
#    ceil(n/N), S3 their sum: 20 S3 for the flat buffer, the fp32
#    partition, the gradient partitions and Adam's two moments, 4 B for
#    the bucket, 13 for Adam's step, _global_grad_norm and
#    inf_or_nan_tracker, 4 ceil(n/N) N for each parameter's gathered copy
#    that _post_step leaves, and the model's buffers and the batch); the
#    losses of 3 steps --wrapper ddp's bit for bit on gpt2-tiny (N = 2:
#    the final weights too; N = 3: the weights are stage 2's, the division
#    by N before the sum), on llama-tiny the first and the rest within
#    1e-6 (its first step's hooked graph sums some input gradients in
#    another order);
#  - built, the first step (a list of its own) at N = 1 (a fetch there is
#    a view) and at N = 2 and 3 (its gathers and releases leaf module by
#    leaf module): --steps 1 runs, theory = measure to the byte, the bytes
#    before it the set-up's (12 S3 + 4 B + 1 and the buffers) and after it
#    the steady state, Adam's state made by it, its loss a 3-step run's
#    first;
#  - built, --grad-accum K (gpt2-tiny K = 2 and 3, llama-tiny K = 2; K =
#    2 with LoRA, --freeze and both; N = 1 and 2): theory = measure to
#    the byte and at every mark, the losses and final weights stage 2's
#    under the same K bit for bit, the bytes between steps K = 1's and
#    the further micro-batches' 1024 (K - 1), K times K = 1's
#    reduce-scatters a step, --steps 1 at N = 1 the run's first step;
#  - not built, refused with one line (exit 2), by measure and theory
#    alike, an existing --out left as it was: --steps 1 at N > 1 over a
#    model whose leaf marks are not described (gemma2: its run's step 1
#    is the steady step) or under --grad-accum (micro-step 2 of
#    DeepSpeed's first step runs on the trace micro-step 1 recorded) and
#    a parameter that does not persist at N > 1;
#  - the reading's PyTorch part, on real PyTorch 1.13: which gathered
#    parameters a ZeRO-3 release cannot free because a node saved a view
#    of them (tests/ds3_saved.py over the reference models, every
#    parameter released after the forward as free_param does), against
#    the list counted from each model's config: on llama-tiny every
#    projection and the head (F.linear saves weight.t(), shape (in, out),
#    strides (1, in)), on gpt2-tiny the tied table alone (its head's
#    F.linear; Conv1D's addmm saves the leaf);
#  - the leaf-module marks a build of step 1 needs (util/autograd.c
#    ds3_mark; docs/schedule.md, "The leaf modules' marks"), in the same
#    python process: tests/ag_events ds3=1's marks, each with the live
#    bytes since the one before it, against PyTorch 1.13 running one
#    step with DeepSpeed 38327e0's four hooks on every module
#    (tests/ds3_saved.py --hooks): the same hooks in the same order, each
#    at the same bytes (62 on gpt2-tiny, 83 on llama-tiny, q/k/v_proj and
#    gate/up_proj each its own);
#  - DeepSpeed's ZeRO-3 replayed on PyTorch 1.13 in the same python
#    process (tests/ds3_saved.py --z3 1,2,3: its allocations transcribed
#    over the reference model with the four hooks on every module and a
#    transcription of the coordinator's fetches and releases, rank 0 of N
#    in one process, profiled from the model's construction on): the
#    bytes between steps and the steady step's peak equal zerosim's
#    measure's at N = 1, 2, 3, and the first step's peak and where it
#    starts, and every mark of PyTorch's step 1 equal to zerosim's
#    --steps 1 run's;
#  - the saved weight.t() views zerosim's step keeps under those marks
#    (tests/ag_events ds3=saved: each parameter whose storage a view made
#    in forward holds into a backward op) against ds3_saved.py's list;
#  - with PyTorch (make check-torch), LoRA and --freeze (--lora-r 4,
#    default targets and all-linear; --freeze embeddings or blocks:0-0
#    without LoRA, blocks:0-0 or 1-1 over the adapters; N = 1 and 2;
#    docs/finetune.md, "LoRA and --freeze under --wrapper deepspeed
#    --schemes zero3"; tests/ds3_lora.sh has make check's rows):
#    theory = measure to the byte and at every mark; the bytes between
#    steps by hand (4 S3_f for the frozen parameters' ds_tensors, each
#    its own, 20 S3_t for the trained ones' flat buffer, fp32, gradient
#    and Adam partitions, 4 B + 13, at N = 2 4 ceil(n/N) N for every
#    parameter's gathered copy, frozen ones too, and the buffers); the
#    losses of 3 steps and the final weights the unwrapped step's bit for
#    bit (--wrapper none at N = 1, ddp at N = 2); and on PyTorch 1.13,
#    DeepSpeed's ZeRO-3 replayed over PEFT's lora.Linear and the frozen
#    parameters (tests/ds3_saved.py --z3-case): the
#    bytes between steps, the steady step's peak, each phase mark's bytes
#    and each phase's peak, and at N = 1 step 1's peak and where it
#    starts, equal to zerosim's; the same under --grad-accum K
#    (tests/ds3_saved.py --z3-accum: K micro-steps a step, each the
#    engine's backward and epilogue, the gradient partitions copied into
#    at micro_step_id 0 and added into after; --z3-accum-case: K = 2 with
#    LoRA and --freeze), each micro-step's phase marks too.
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it the PyTorch
# part is skipped (exit 77 after the first passed). About 25 s of CPU.
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
models=$src/report/models
[ -x "$zerosim" ] || { echo "ds3_torch: $zerosim is not built" >&2; exit 99; }
[ -x "$top/tests/ag_events" ] || { echo "ds3_torch: $top/tests/ag_events is not built" >&2; exit 99; }
for model in gpt2-tiny llama-tiny gemma2-tiny; do
	[ -f "$models/$model.json" ] || { echo "ds3_torch: no model config at $models/$model.json" >&2; exit 99; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-ds3.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds3_torch: FAIL: $*" >&2; exit 1; }

[ -x "$top/tests/json_agree" ] || { echo "ds3_torch: $top/tests/json_agree is not built" >&2; exit 99; }
command -v python3 >/dev/null || { echo "ds3_torch: SKIP: no python3 to read the files"; exit 77; }
# check M T DDP REF N WANT EXACT: one python3 for a case's files
# (measure's, theory's, DDP's, the weights' reference): the marks the
# same and not empty, every rank's bytes between steps WANT in both, the
# losses DDP's and the final weights REF's (EXACT 0: the first loss bit
# for bit, the later ones within 1e-6 of DDP's, the weights not
# compared); prints what differs
check() {
	python3 -c 'import json, sys
def run(f):
    d = json.load(open(f))
    return d["runs"][0] if "runs" in d else d["rows"][0]["schedule"]
m, t, ddp, ref = (run(f) for f in sys.argv[1:5])
N, want, exact = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == "1"
bad = []
if not m["marks"] or m["marks"] != t["marks"]:
    bad.append("the marks differ")
for who, x in (("measure", m), ("theory", t)):
    got = x["per_rank"]["resident_bytes"]
    if got != [want] * N:
        bad.append("%s: %s bytes between steps, rank by rank" % (who, got))
if exact and m["losses"] != ddp["losses"]:
    bad.append("losses %s, DDP %s" % (m["losses"], ddp["losses"]))
if not exact and (len(m["losses"]) != len(ddp["losses"]) or m["losses"][:1] != ddp["losses"][:1] or
                  any(abs(a - b) > 1e-6 * abs(b) for a, b in zip(m["losses"], ddp["losses"]))):
    bad.append("losses %s, DDP %s (the first bit for bit, the rest within 1e-6)" % (m["losses"], ddp["losses"]))
if exact and m["weights_digest"] != ref["weights_digest"]:
    bad.append("final weights %s, not %s" % (m["weights_digest"], ref["weights_digest"]))
print("; ".join(bad))' "$@" 2>&1 || echo "cannot read $*"
}
step="--precision fp32 --seq 32 --batch 2 --steps 3 --torch-device cpu --attn eager --torch-version 1.13
 --optimizer-impl single"
ds="--framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000"
B=100000
# the trained tensors' elements from the shapes (Hugging Face's
# parameters, llama's q, k, v, gate and up each its own; gpt2's head
# tied), and the model's buffers and the batch in bytes: input_ids and
# labels (2 x 2 x 32 int64, 1024), gpt2's two blocks' causal `bias`
# (bool 64 x 64) and `masked_bias` (fp32, 0-dim), llama's rotary
# inv_freq (8 fp32)
d=64 V=1024 P=64 f=176 kv=32
gpt2_n="$((V * d)) $((P * d))"
for l in 1 2; do
	gpt2_n="$gpt2_n $d $d $((d * 3 * d)) $((3 * d)) $((d * d)) $d $d $d $((d * 4 * d)) $((4 * d)) $((4 * d * d)) $d"
done
gpt2_n="$gpt2_n $d $d"
gpt2_buf=$((1024 + 2 * (P * P + 4)))
llama_n="$((V * d))"
for l in 1 2; do
	llama_n="$llama_n $d $((d * d)) $((d * kv)) $((d * kv)) $((d * d)) $d $((d * f)) $((d * f)) $((f * d))"
done
llama_n="$llama_n $d $((V * d))"
llama_buf=$((1024 + 8 * 4))
set -- $gpt2_n
[ $# -eq 28 ] || fail "gpt2-tiny: $# tensors counted, not 28"
set -- $llama_n
[ $# -eq 21 ] || fail "llama-tiny: $# tensors counted, not 21"
for model in gpt2-tiny llama-tiny; do
	if [ $model = gpt2-tiny ]; then sizes=$gpt2_n buf=$gpt2_buf; else sizes=$llama_n buf=$llama_buf; fi
	for N in 2 3; do
		m=$tmp/m-$model-$N.json t=$tmp/t-$model-$N.json
		# shellcheck disable=SC2086
		"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world $N --out "$m" ||
			fail "measure $model zero3 N=$N"
		# shellcheck disable=SC2086
		"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world $N --out "$t" \
			>/dev/null || fail "theory $model zero3 N=$N"
		out=$("$top/tests/json_agree" "$m" "$t") || fail "theory and measure differ, $model zero3 N=$N: $out"
		[ "$out" = "json_agree: 1 points agree exactly" ] || fail "$model zero3 N=$N: $out"
		S3=0 gathered=0
		for n in $sizes; do
			c=$(((n + N - 1) / N))
			S3=$((S3 + c)) gathered=$((gathered + c * N))
		done
		want=$((20 * S3 + 4 * B + 13 + 4 * gathered + buf))
		ddp=$tmp/ddp-$model-$N.json
		# shellcheck disable=SC2086
		"$zerosim" measure -q --framework torch --wrapper ddp --zero-grad none $step --model "$models/$model.json" \
			--schemes dp --world $N --out "$ddp" || fail "measure ddp $model N=$N"
		if [ $N = 2 ]; then ref=$ddp; else
			ref=$tmp/z2-$model-$N.json
			# shellcheck disable=SC2086
			"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero2 --world $N --out "$ref" ||
				fail "measure $model zero2 N=$N"
		fi
		# llama's losses after the first and its weights DDP's to rounding
		# alone: its first step runs DeepSpeed's hooked graph, whose
		# Functions sum q's, k's and v's input gradients one by one after
		# their releases and RMSNorm's two before handing them on
		# (docs/schedule.md, "The leaf modules' marks")
		exact=1
		[ $model = llama-tiny ] && exact=0
		out=$(check "$m" "$t" "$ddp" "$ref" $N $want $exact)
		[ -z "$out" ] || fail "$model zero3 N=$N: $out (between steps by hand: 20 x $S3 + 4 x $B + 13 +" \
			"4 x $gathered + $buf = $want)"
		echo "ok: $model zero3 N=$N: theory = measure to the byte, $want bytes between steps on every rank" \
			"(20 x $S3 + 4 x $B + 13 + 4 x $gathered + $buf), DDP's losses$([ $exact = 1 ] || echo ' to 1e-6')"
	done
done

# the first step, a list of its own (at N = 1 a fetch is a view of the
# partition, so step 1 differs from the steady step in what the client
# Adam makes in its first step() and in _global_grad_norm, made by it; at
# N = 2 and 3 it also gathers and releases leaf module by leaf module,
# nothing gathered where it starts): --steps 1 runs, theory = measure to
# the byte (every mark, the step's peak); the bytes where its forward
# starts are the set-up's alone, counted from the shapes (the flat
# buffer, the fp32 partition and the gradient partitions, 12 S3 with
# S3 = sum of ceil(n/N); the bucket 4 B; inf_or_nan_tracker 1; the
# model's buffers and the batch), and after it the steady state (20 S3 +
# 4 B + 13 + the same, and at N > 1 each parameter's gathered copy that
# _post_step leaves, 4 ceil(n/N) N: Adam's two moments, its step and
# _global_grad_norm made by the step); its loss the first of a 3-step
# run's, bit for bit
for model in gpt2-tiny llama-tiny; do
	if [ $model = gpt2-tiny ]; then sizes=$gpt2_n buf=$gpt2_buf; else sizes=$llama_n buf=$llama_buf; fi
	for N in 1 2 3; do
		S3=0 gathered=0
		for n in $sizes; do
			c=$(((n + N - 1) / N))
			S3=$((S3 + c)) gathered=$((gathered + c * N))
		done
		[ $N = 1 ] && gathered=0
		m=$tmp/m1-$model-$N.json t=$tmp/t1-$model-$N.json m3=$tmp/m3-$model-$N.json
		# shellcheck disable=SC2086
		"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world $N --steps 1 \
			--out "$m" || fail "measure $model zero3 N=$N --steps 1"
		# shellcheck disable=SC2086
		"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world $N --steps 1 --out "$t" \
			>/dev/null || fail "theory $model zero3 N=$N --steps 1"
		out=$("$top/tests/json_agree" "$m" "$t") ||
			fail "theory and measure differ, $model zero3 N=$N --steps 1: $out"
		[ "$out" = "json_agree: 1 points agree exactly" ] || fail "$model zero3 N=$N --steps 1: $out"
		if [ $N = 1 ]; then
			# shellcheck disable=SC2086
			"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --out "$m3" ||
				fail "measure $model zero3 N=1"
		else
			m3=$tmp/m-$model-$N.json
		fi
		before=$((12 * S3 + 4 * B + 1 + buf)) after=$((20 * S3 + 4 * B + 13 + 4 * gathered + buf))
		out=$(python3 -c 'import json, sys
def run(f):
    d = json.load(open(f))
    return d["runs"][0] if "runs" in d else d["rows"][0]["schedule"]
m, t, m3 = (run(f) for f in sys.argv[1:4])
before, after, N = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
bad = []
for who, x in (("measure", m), ("theory", t)):
    if x["marks"].get("phase:forward") != before:
        bad.append("%s: %s bytes where step 1 starts" % (who, x["marks"].get("phase:forward")))
    if x["per_rank"]["resident_bytes"] != [after] * N:
        bad.append("%s: %s bytes after step 1" % (who, x["per_rank"]["resident_bytes"]))
if "first_step_peak" not in m or m.get("first_step_peak") != t.get("first_step_peak"):
    bad.append("first_step_peak %s and %s" % (m.get("first_step_peak"), t.get("first_step_peak")))
if m["losses"] != m3["losses"][:1]:
    bad.append("loss %s, a 3-step run'"'"'s first %s" % (m["losses"], m3["losses"][:1]))
print("; ".join(bad))' "$m" "$t" "$m3" $before $after $N 2>&1 || echo "cannot read $m")
		[ -z "$out" ] || fail "$model zero3 N=$N --steps 1: $out (by hand: 12 x $S3 + 4 x $B + 1 + $buf = $before" \
			"before, 20 x $S3 + 4 x $B + 13 + 4 x $gathered + $buf = $after after)"
		echo "ok: $model zero3 N=$N --steps 1: theory = measure to the byte, $before bytes before the step and" \
			"$after after (Adam's state made by it), the 3-step run's first loss"
	done
done

# gradient_accumulation_steps K (--grad-accum; util/ag_ds3.c): each
# micro-step the engine's backward over its loss / K, its gradients
# reduce-scattered into the gradient partitions at every micro-step
# (stage3.py partition_grads: copy_ at micro_step_id 0, add_ after,
# 1481-1487 at 38327e0): theory = measure to the byte and at every mark
# at N = 1 and 2 (gpt2-tiny K = 2 and 3, llama-tiny K = 2; K = 2 with LoRA
# r 4 on gpt2's c_attn, gpt2's block 0 frozen, llama's q,v adapters with
# block 0's frozen); the losses and final weights stage 2's under the
# same K bit for bit (each micro-step's reduced gradient added into the
# partition, as stage 2's averaged_gradients); the bytes between steps
# K = 1's and the K - 1 further micro-batches' input_ids and labels
# (2 x 2 x 32 int64 each, 1024 B); per step K times K = 1's
# reduce-scatters and their bytes; at N = 1 --steps 1 (its own list)
# theory = measure, the K run's first step (tests/ds3_saved.py
# --z3-accum and --z3-accum-case hold them to PyTorch 1.13 below)
for row in "gpt2-tiny 2 -" "gpt2-tiny 3 -" "llama-tiny 2 -" "gpt2-tiny 2 default" "gpt2-tiny 2 none/blocks:0-0" \
	"llama-tiny 2 default/blocks:0-0"; do
	# shellcheck disable=SC2086
	set -- $row
	model=$1 K=$2 case=$3 targets=${3%%/*} freeze= opt= tag=
	[ "$targets" = "$case" ] || freeze=${case#*/}
	if [ "$case" != - ]; then
		[ "$targets" = none ] || opt="--lora-r 4"
		[ -z "$freeze" ] || opt="${opt:+$opt }--freeze $freeze"
		tag=-$(printf %s "$case" | tr '/:' '__')
	fi
	m=$tmp/ma-$model-$K$tag.json t=$tmp/ta-$model-$K$tag.json z2=$tmp/za-$model-$K$tag.json
	k1=$tmp/m3-$model-1.json k2=$tmp/m-$model-2.json
	# shellcheck disable=SC2086
	"$zerosim" measure -q --timeline $ds $step --model "$models/$model.json" --schemes zero3 --world 1,2 \
		--grad-accum $K $opt --out "$m" || fail "measure $model zero3 K=$K $opt"
	# shellcheck disable=SC2086
	"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world 1,2 --grad-accum $K $opt \
		--out "$t" >/dev/null || fail "theory $model zero3 K=$K $opt"
	out=$("$top/tests/json_agree" "$m" "$t") || fail "theory and measure differ, $model zero3 K=$K $opt: $out"
	[ "$out" = "json_agree: 2 points agree exactly" ] || fail "$model zero3 K=$K $opt: $out"
	# shellcheck disable=SC2086
	"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero2 --world 1,2 --grad-accum $K $opt \
		--out "$z2" || fail "measure $model zero2 K=$K $opt"
	if [ -n "$tag" ]; then
		k1=$tmp/ma-$model-1$tag.json k2=$k1
		# shellcheck disable=SC2086
		"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world 1,2 $opt \
			--out "$k1" || fail "measure $model zero3 $opt"
	fi
	one=
	if [ $K = 2 ] && [ -z "$tag" ]; then
		one=$tmp/ma1-$model.json
		# shellcheck disable=SC2086
		"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --grad-accum $K \
			--steps 1 --out "$one" || fail "measure $model zero3 K=$K --steps 1"
		# shellcheck disable=SC2086
		"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --grad-accum $K \
			--steps 1 --out "$tmp/ta1-$model.json" >/dev/null || fail "theory $model zero3 K=$K --steps 1"
		out=$("$top/tests/json_agree" "$one" "$tmp/ta1-$model.json") ||
			fail "theory and measure differ, $model zero3 K=$K --steps 1: $out"
		[ "$out" = "json_agree: 1 points agree exactly" ] || fail "$model zero3 K=$K --steps 1: $out"
	fi
	out=$(python3 -c 'import json, sys
m, t, z2 = (json.load(open(f)) for f in sys.argv[1:4])
ref = {N: next(r for r in json.load(open(f))["runs"] if r["world"] == N) for N, f in ((1, sys.argv[4]), (2, sys.argv[5]))}
K, one = int(sys.argv[6]), sys.argv[7]
bad = []
for i, N in enumerate((1, 2)):
    a, b, c, r = m["runs"][i], t["rows"][i]["schedule"], z2["runs"][i], ref[N]
    if not a["marks"] or a["marks"] != b["marks"]:
        bad.append("N = %d: the marks differ" % N)
    if (a["losses"], a["weights_digest"]) != (c["losses"], c["weights_digest"]):
        bad.append("N = %d: losses %s, weights %s; stage 2 %s, %s" % (N, a["losses"], a["weights_digest"],
                                                                    c["losses"], c["weights_digest"]))
    want = [x + 1024 * (K - 1) for x in r["per_rank"]["resident_bytes"]]
    if a["per_rank"]["resident_bytes"] != want:
        bad.append("N = %d: %s bytes between steps, not %s" % (N, a["per_rank"]["resident_bytes"], want))
    rs, rs1 = a["collectives"]["reduce_scatter"], r["collectives"]["reduce_scatter"]
    if (rs["calls_per_step"], rs["bytes_per_step"]) != (K * rs1["calls_per_step"], K * rs1["bytes_per_step"]):
        bad.append("N = %d: %s reduce-scatters a step, K = 1 %s" % (N, rs, rs1))
if one:
    s1 = json.load(open(one))["runs"][0]
    if (s1["first_step_peak"], s1["losses"]) != (m["runs"][0]["first_step_peak"], m["runs"][0]["losses"][:1]):
        bad.append("--steps 1: peak %s, loss %s; the 3-step run'"'"'s first %s, %s" % (
            s1["first_step_peak"], s1["losses"], m["runs"][0]["first_step_peak"], m["runs"][0]["losses"][:1]))
print("; ".join(bad))' "$m" "$t" "$z2" "$k1" "$k2" $K "$one" 2>&1 || echo "cannot read $m")
	[ -z "$out" ] || fail "$model zero3 K=$K $opt: $out"
	echo "ok: $model zero3 K=$K${opt:+ $opt} N=1,2: theory = measure to the byte and at every mark, stage 2's" \
		"losses and weights, K = 1's bytes between steps + $((1024 * (K - 1))), $K times its reduce-scatters a" \
		"step${one:+; --steps 1 at N = 1 the run's first step}"
done

keep=$tmp/keep.json
echo kept >"$keep"
n=0
big=$tmp/big.json
# a table of 2048 x 64 = 131072 elements: more than the persistence
# threshold (1e5), so its gathers in forward and backward would be needed
sed 's/"vocab_size": 1024/"vocab_size": 2048/' "$models/gpt2-tiny.json" >"$big"
for cmd in measure theory; do
	for row in 1 2 3; do
		if [ $row = 3 ]; then
			# K > 1: micro-step 2 of DeepSpeed's first step runs on the
			# trace micro-step 1 recorded (ppc.py reset_step, 228-262)
			set -- --model "$models/gpt2-tiny.json" --steps 1 --world 2 --grad-accum 2
			want="zerosim $cmd: --steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over --grad-accum has no first step of its own yet (its one step would be the steady step's over the set-up's state, which PyTorch never runs); give --steps 2"
		elif [ $row = 1 ]; then
			# a model whose leaf marks are not described (the first step
			# gathers at them): its run's step 1 is the steady step
			set -- --model "$models/gemma2-tiny.json" --steps 1 --world 2
			want="zerosim $cmd: --steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over the gemmas' extra norms has no first step of its own yet (its one step would be the steady step's over the set-up's state, which PyTorch never runs); give --steps 2"
		else
			set -- --model "$big" --steps 2 --world 2 --ds-reduce-bucket 200000
			want="zerosim $cmd: --wrapper deepspeed --schemes zero3 at N = 2: a parameter of 131072 elements does not persist (more than 100000): its gathers and releases in forward and backward are not built yet (give --world 1)"
		fi
		# shellcheck disable=SC2086
		"$zerosim" $cmd $ds --schemes zero3 --torch-device cpu --torch-version 1.13 --precision fp32 --seq 32 \
			--batch 2 "$@" --out "$keep" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		[ "$rc" -eq 2 ] || fail "$cmd $*: exit $rc, not 2 ($(cat "$tmp/err"))"
		[ "$(cat "$tmp/err")" = "$want" ] || fail "$cmd $*: stderr $(cat "$tmp/err")"
		[ -s "$tmp/out" ] && fail "$cmd $*: stdout $(cat "$tmp/out")"
		[ "$(cat "$keep")" = kept ] || fail "$cmd $* changed $keep"
		n=$((n + 1))
	done
done
[ "$n" -eq 6 ] || fail "ran $n refusals, not 6"
echo "ok: --steps 1 over gemma2 and under --grad-accum 2 at N = 2, and a parameter that does not persist at N = 2" \
	"refused $n times (measure and theory)"

name=ds3_torch
. "$src/tests/torch_python.sh"

# LoRA r 4 and --freeze (every frozen parameter partitioned as the
# trained ones, each its own ds_tensor): the adapters' (in, out) from the
# shapes (gpt2's Conv1D c_attn d -> 3d, attn.c_proj d -> d, c_fc d -> 4d,
# mlp.c_proj 4d -> d; llama's q d -> d, k and v d -> kv, o d -> d, gate
# and up d -> f, down f -> d), lora_A r x in and lora_B out x r each
r=4
lora_blk() { # MODEL TARGETS: one block's adapters' elements
	case $1-$2 in
	gpt2-tiny-default) io="$d,$((3 * d))" ;;
	gpt2-tiny-all-linear) io="$d,$((3 * d)) $d,$d $d,$((4 * d)) $((4 * d)),$d" ;;
	llama-tiny-default) io="$d,$d $d,$kv" ;;
	llama-tiny-all-linear) io="$d,$d $d,$kv $d,$kv $d,$d $d,$f $d,$f $f,$d" ;;
	esac
	for x in $io; do printf '%s %s ' $((r * ${x%,*})) $((${x#*,} * r)); done
}
# the base's elements by place (emb, b0, b1, tail: the embeddings, each
# block's, the rest), from the lists above
place() {
	if [ $1 = gpt2-tiny ]; then set -- 2 12 $gpt2_n; else set -- 1 9 $llama_n; fi
	ne=$1 nb=$2 i=0 emb= b0= b1= tail=
	shift 2
	for n in "$@"; do
		if [ $i -lt $ne ]; then emb="$emb $n"
		elif [ $i -lt $((ne + nb)) ]; then b0="$b0 $n"
		elif [ $i -lt $((ne + 2 * nb)) ]; then b1="$b1 $n"
		else tail="$tail $n"; fi
		i=$((i + 1))
	done
}
cases_gpt2="default all-linear none/embeddings default/blocks:0-0"
cases_llama="default all-linear none/blocks:0-0 all-linear/blocks:1-1"
for model in gpt2-tiny llama-tiny; do
	if [ $model = gpt2-tiny ]; then cases=$cases_gpt2 buf=$gpt2_buf; else cases=$cases_llama buf=$llama_buf; fi
	place $model
	for case in $cases; do
		targets=${case%%/*} freeze=
		[ "$targets" = "$case" ] || freeze=${case#*/}
		cid=$(printf %s "$case" | tr '/:' '__')
		# the options; the frozen and the trained elements
		opt=
		[ $targets = none ] || opt="--lora-r $r"
		[ $targets = none ] || [ $targets = default ] || opt="$opt --lora-targets $targets"
		[ -z "$freeze" ] || opt="$opt --freeze $freeze"
		opt=${opt# }
		if [ $targets = none ]; then
			case $freeze in
			embeddings) fz=$emb tr="$b0 $b1 $tail" ;;
			blocks:0-0) fz=$b0 tr="$emb $b1 $tail" ;;
			esac
		else
			ad=$(lora_blk $model $targets)
			case $freeze in
			"") fz="$emb $b0 $b1 $tail" tr="$ad $ad" ;;
			*) fz="$emb $b0 $b1 $tail $ad" tr=$ad ;; # one block's adapters frozen
			esac
		fi
		for N in 1 2; do
			m=$tmp/ml-$model-$cid-$N.json t=$tmp/tl-$model-$cid-$N.json ref=$tmp/rl-$model-$cid-$N.json
			# shellcheck disable=SC2086
			"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world $N $opt \
				--timeline --out "$m" || fail "measure $model zero3 $case N=$N"
			# shellcheck disable=SC2086
			"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world $N $opt \
				--out "$t" >/dev/null || fail "theory $model zero3 $case N=$N"
			out=$("$top/tests/json_agree" "$m" "$t") || fail "theory and measure differ, $model zero3 $case N=$N: $out"
			[ "$out" = "json_agree: 1 points agree exactly" ] || fail "$model zero3 $case N=$N: $out"
			if [ $N = 1 ]; then w=none; else w=ddp; fi
			# shellcheck disable=SC2086
			"$zerosim" measure -q --framework torch --wrapper $w --zero-grad none $step --model "$models/$model.json" \
				--schemes dp --world $N $opt --out "$ref" || fail "measure $w $model $case N=$N"
			if [ $N = 1 ]; then
				# shellcheck disable=SC2086
				"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --steps 1 \
					$opt --out "$tmp/ml1-$model-$cid.json" || fail "measure $model zero3 $case N=1 --steps 1"
			fi
			S3f=0 S3t=0 gathered=0
			for n in $fz; do
				c=$(((n + N - 1) / N))
				S3f=$((S3f + c)) gathered=$((gathered + c * N))
			done
			for n in $tr; do
				c=$(((n + N - 1) / N))
				S3t=$((S3t + c)) gathered=$((gathered + c * N))
			done
			[ $N -gt 1 ] || gathered=0
			want=$((4 * S3f + 20 * S3t + 4 * B + 13 + 4 * gathered + buf))
			# the unwrapped step's losses and final weights, bit for bit (no
			# hooked step 1 here: at N > 1 LoRA's and --freeze's run the
			# steady step from step 1 on, util/ag_ds3.c)
			out=$(check "$m" "$t" "$ref" "$ref" $N $want 1)
			[ -z "$out" ] || fail "$model zero3 $case N=$N: $out (between steps by hand: 4 x $S3f + 20 x $S3t +" \
				"4 x $B + 13 + 4 x $gathered + $buf = $want)"
			echo "ok: $model zero3 $opt N=$N: theory = measure to the byte and at every mark, $want bytes between" \
				"steps (4 x $S3f + 20 x $S3t + 4 x $B + 13 + 4 x $gathered + $buf), the --wrapper $w step's" \
				"losses and final weights"
		done
	done
done

for model in gpt2-tiny llama-tiny; do
	if [ $model = gpt2-tiny ]; then
		cases=$cases_gpt2 accum=2,3 acases="default none/blocks:0-0"
	else cases=$cases_llama accum=2 acases=default/blocks:0-0; fi
	# shellcheck disable=SC2046
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" "$py" "$src/tests/ds3_saved.py" "$models/$model.json" \
		--hooks "$tmp/hooks-torch" --z3 1,2,3 $(for c in $cases; do printf -- '--z3-case %s ' "$c"; done) \
		$(for c in $acases; do printf -- '--z3-accum-case %s ' "$c"; done) \
		--z3-case-worlds 1,2 --z3-accum $accum --lora-r $r --z3-out "$tmp/z3-$model" >"$tmp/got" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; fail "tests/ds3_saved.py $model"; }
	# DeepSpeed's ZeRO-3 replayed on PyTorch 1.13 (tests/ds3_saved.py
	# --z3: its allocations transcribed over the reference model with the
	# four hooks on every module, 2 steps profiled from the model's
	# construction on) against zerosim's measure: the bytes between steps
	# and the steady step's peak on rank 0 at N = 1, 2, 3, and at N = 1
	# the first step's (first_step_peak, the step's peak in the 3-step
	# run and in a --steps 1 run; the bytes where it starts, the set-up's;
	# every mark PyTorch's step 1 makes, in the --steps 1 run, whose marks
	# are its one step's); at N > 1 its gathers and releases leaf module by
	# leaf module, nothing gathered where it starts.
	out=$(python3 -c 'import json, sys
def run(f):
    d = json.load(open(f))
    return d["runs"][0]
z3 = {r["world"]: r for r in map(json.loads, open(sys.argv[1])) if r["case"] is None and r["accum"] == 1}
zs = {1: run(sys.argv[2]), 2: run(sys.argv[3]), 3: run(sys.argv[4])}
ones = {1: run(sys.argv[5]), 2: run(sys.argv[6]), 3: run(sys.argv[7])}
bad, say = [], []
for N in (1, 2, 3):
    t, m, one = z3.get(N), zs[N], ones[N]
    if t is None:
        bad.append("no PyTorch run at N = %d" % N)
        continue
    got = (m["per_rank"]["resident_bytes"][0], m["per_rank"]["peak_bytes"][0])
    want = (t["between"], t["peaks"][1])
    if got != want:
        bad.append("N = %d: zerosim %d between, %d peak; PyTorch %d, %d" % ((N,) + got + want))
    say.append("N = %d: %d between, %d peak (%s)" % (N, want[0], want[1], t["phases"][1]))
    got1 = (one["marks"].get("phase:forward"), m.get("first_step_peak"), one.get("first_step_peak"))
    want1 = (t["starts"][0], t["peaks"][0], t["peaks"][0])
    if got1 != want1:
        bad.append("N = %d, step 1: zerosim starts at %s, peaks at %s (%s with --steps 1); PyTorch %d, %d" %
                   ((N,) + got1 + want1[:2]))
    if not t["marks1"]:
        bad.append("N = %d, step 1: PyTorch made no mark" % N)
    for label, live in t["marks1"].items():
        if one["marks"].get(label) != live:
            bad.append("N = %d, step 1: %s at %s bytes, PyTorch %d" % (N, label, one["marks"].get(label), live))
    say.append("step 1 from %d, peak %d (%s), %d marks" % (want1[0], want1[1], t["phases"][0], len(t["marks1"])))
print("; ".join(bad) if bad else "ok " + "; ".join(say))' "$tmp/z3-$model" "$tmp/m3-$model-1.json" \
		"$tmp/m-$model-2.json" "$tmp/m-$model-3.json" "$tmp/m1-$model-1.json" "$tmp/m1-$model-2.json" \
		"$tmp/m1-$model-3.json" 2>&1)
	case $out in
	"ok "*) echo "ok: $model zero3 on PyTorch 1.13 (DeepSpeed replayed) = zerosim: ${out#ok }" ;;
	*) fail "$model: zerosim's ZeRO-3 and PyTorch 1.13 replaying DeepSpeed's differ: $out" ;;
	esac
	# the same with LoRA and --freeze (the cases above): between steps,
	# the steady step's peak, each phase mark's bytes and each phase's
	# peak at N = 1 and 2, and at N = 1 step 1's peak and the bytes where
	# it starts
	out=$(python3 -c 'import json, os, sys
def run(f):
    return json.load(open(f))["runs"][0]
tmp, model = sys.argv[1], sys.argv[2]
bad, say, seen = [], [], 0
for t in map(json.loads, open(os.path.join(tmp, "z3-" + model))):
    if t["case"] is None or t["accum"] > 1:
        continue
    seen += 1
    N, tg = t["world"], t["case"]
    cid = tg.replace("/", "_").replace(":", "_")
    m = run(os.path.join(tmp, "ml-%s-%s-%d.json" % (model, cid, N)))
    got = (m["per_rank"]["resident_bytes"][0], m["per_rank"]["peak_bytes"][0])
    want = (t["between"], t["peaks"][1])
    if got != want:
        bad.append("%s N = %d: zerosim %d between, %d peak; PyTorch %d, %d" % ((tg, N) + got + want))
    if not t["marks"] or any(m["marks"].get(k) != v for k, v in t["marks"].items()):
        bad.append("%s N = %d: marks %s, PyTorch %s" % (tg, N, {k: m["marks"].get(k) for k in t["marks"]},
                                                      t["marks"]))
    pk = {}  # zerosim'"'"'s last step (its timeline, rank 0'"'"'s): each phase'"'"'s peak
    for e in m["timeline"]:
        pk[e["phase"]] = max(pk.get(e["phase"], 0), e["current_bytes"])
    for ph in ("forward", "backward", "optimizer"):
        if pk.get(ph) != t["phase_peaks"].get(ph):
            bad.append("%s N = %d: the %s phase peaks at %s, PyTorch %s" % (tg, N, ph, pk.get(ph),
                                                                          t["phase_peaks"].get(ph)))
    if N == 1:
        one = run(os.path.join(tmp, "ml1-%s-%s.json" % (model, cid)))
        got1 = (one["marks"].get("phase:forward"), m.get("first_step_peak"))
        if got1 != (t["starts"][0], t["peaks"][0]):
            bad.append("%s N = 1, step 1: zerosim starts at %s, peaks at %s; PyTorch %d, %d" %
                       ((tg,) + got1 + (t["starts"][0], t["peaks"][0])))
    say.append("%s N = %d: %d between, %d peak, %d marks, optimizer peak %d" %
               (tg, N, want[0], want[1], len(t["marks"]), t["phase_peaks"]["optimizer"]))
if seen != 8:
    bad.append("%d runs of PyTorch with LoRA or --freeze, not 8" % seen)
print("; ".join(bad) if bad else "ok " + "; ".join(say))' "$tmp" $model 2>&1)
	case $out in
	"ok "*) echo "ok: $model zero3 with LoRA r $r or --freeze on PyTorch 1.13 (DeepSpeed replayed over PEFT's" \
		"lora.Linear) = zerosim: ${out#ok }" ;;
	*) fail "$model: zerosim's ZeRO-3 with LoRA or --freeze and PyTorch 1.13 replaying DeepSpeed's differ: $out" ;;
	esac
	# the same under --grad-accum K (the K rows above; ds3_saved.py
	# --z3-accum and, with LoRA and --freeze, --z3-accum-case): between steps, the steady step's peak, every phase
	# mark of it (each micro-step's LABEL@k) and each phase's peak (over
	# its micro-steps) at N = 1 and 2; at N = 1 step 1's peak and the
	# bytes where it starts (--steps 1's phase:forward@0)
	out=$(python3 -c 'import json, os, sys
def run(f):
    return json.load(open(f))["runs"]
tmp, model, ks, cs = sys.argv[1], sys.argv[2], [int(k) for k in sys.argv[3].split(",")], sys.argv[4].split()
bad, say, seen = [], [], set()
for t in map(json.loads, open(os.path.join(tmp, "z3-" + model))):
    if t["accum"] == 1:
        continue
    N, K, case = t["world"], t["accum"], t["case"]
    seen.add((N, K, case))
    tag = "" if case is None else "-" + case.replace("/", "_").replace(":", "_")
    m = run(os.path.join(tmp, "ma-%s-%d%s.json" % (model, K, tag)))[N - 1]
    K = "%d%s" % (K, "" if case is None else " " + case)
    got = (m["per_rank"]["resident_bytes"][0], m["per_rank"]["peak_bytes"][0])
    want = (t["between"], t["peaks"][1])
    if got != want:
        bad.append("K = %s N = %d: zerosim %d between, %d peak; PyTorch %d, %d" % ((K, N) + got + want))
    if len(t["marks"]) != 2 * t["accum"] + 2 or any(m["marks"].get(k) != v for k, v in t["marks"].items()):
        bad.append("K = %s N = %d: marks %s, PyTorch %s" % (K, N, {k: m["marks"].get(k) for k in t["marks"]},
                                                          t["marks"]))
    pk, tp = {}, {}  # each phase'"'"'s peak in the last step, over its micro-steps
    for e in m["timeline"]:
        pk[e["phase"]] = max(pk.get(e["phase"], 0), e["current_bytes"])
    for ph, v in t["phase_peaks"].items():
        tp[ph.split("@")[0]] = max(tp.get(ph.split("@")[0], 0), v)
    for ph in ("forward", "backward", "optimizer"):
        if pk.get(ph) != tp.get(ph):
            bad.append("K = %s N = %d: the %s phase peaks at %s, PyTorch %s" % (K, N, ph, pk.get(ph), tp.get(ph)))
    if N == 1:
        got1 = (m.get("first_step_peak"), t["peaks"][0])
        if K == "2":
            one = run(os.path.join(tmp, "ma1-%s.json" % model))[0]
            got1 += (one["marks"].get("phase:forward@0"), t["starts"][0])
        if got1[0::2] != got1[1::2]:
            bad.append("K = %s N = 1, step 1: zerosim (peak, start) %s, PyTorch %s" % (K, got1[0::2], got1[1::2]))
    say.append("K = %s N = %d: %d between, %d peak, %d marks" % (K, N, want[0], want[1], len(t["marks"])))
want = {(N, K, None) for N in (1, 2) for K in ks} | {(N, 2, c) for N in (1, 2) for c in cs}
if seen != want:
    bad.append("PyTorch ran (N, K, case) %s, not %s" % (sorted(seen, key=str), sorted(want, key=str)))
print("; ".join(bad) if bad else "ok " + "; ".join(say))' "$tmp" $model $accum "$acases" 2>&1)
	case $out in
	"ok "*) echo "ok: $model zero3 --grad-accum on PyTorch 1.13 (DeepSpeed replayed) = zerosim: ${out#ok }" ;;
	*) fail "$model: zerosim's ZeRO-3 under --grad-accum and PyTorch 1.13 replaying DeepSpeed's differ: $out" ;;
	esac
	# the expected list from the config alone: each weight F.linear reads
	# (the head's, the tied table's on gpt2), saved as its transpose
	python3 - "$models/$model.json" >"$tmp/want" <<'EOF' || fail "the expected list of $model"
import json, sys
c = json.load(open(sys.argv[1]))
V = c["vocab_size"]
rows = []
if c["model_type"] == "gpt2":
    d = c["n_embd"]
    rows.append(("wte.weight", d, V))
else:
    d, f, H = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"]
    hd = d // H
    kv = c.get("num_key_value_heads", H) * hd
    for l in range(c["num_hidden_layers"]):
        for name, i, o in (("mlp.down_proj", f, d), ("mlp.gate_proj", d, f), ("mlp.up_proj", d, f),
                           ("self_attn.k_proj", d, kv), ("self_attn.o_proj", H * hd, d),
                           ("self_attn.q_proj", d, H * hd), ("self_attn.v_proj", d, kv)):
            rows.append((f"layers.{l}.{name}.weight", i, o))
    rows.append(("embed_tokens.weight" if c.get("tie_word_embeddings") else "lm_head.weight", d, V))
for name, i, o in sorted(rows):
    print(name, "MmBackward0._saved_mat2", f"{i}x{o}", f"1,{i}")
EOF
	[ -s "$tmp/want" ] || fail "no expected row for $model"
	diff "$tmp/want" "$tmp/got" >"$tmp/diff" || fail "$model: the releases PyTorch 1.13 cannot free differ:
$(cat "$tmp/diff")"
	echo "ok: $model: $(wc -l <"$tmp/got") gathered parameters held by a saved view after their release, as counted"
	# zerosim's step keeps the same views (ag_options.ds3_leaf_marks: the
	# saved weight.t() that x's gradient reads, made in forward; util/
	# autograd.c ds3_saved_wt): the parameters whose storage a view made in
	# forward holds into a backward op, with its shape and strides
	"$top/tests/ag_events" "$models/$model.json" 2 32 ds3=saved torch-version=1.13 torch-device=cpu precision=fp32 \
		>"$tmp/ev" || fail "tests/ag_events $model ds3=saved"
	sed 's/^\(transformer\|model\)\.//' "$tmp/ev" | LC_ALL=C sort -u >"$tmp/saved-zs"
	awk '{ print $1, $3, $4 }' "$tmp/got" | LC_ALL=C sort >"$tmp/saved-torch"
	diff "$tmp/saved-zs" "$tmp/saved-torch" >"$tmp/diff" ||
		fail "$model: the views zerosim's step keeps (<) and those PyTorch 1.13 saves (>) differ:
$(cat "$tmp/diff")"
	echo "ok: $model: zerosim keeps the $(wc -l <"$tmp/saved-zs") saved weight.t() views PyTorch 1.13 keeps"
	# the marks: ag_events' stream (+bytes, -bytes, labels) to the same
	# lines (Hugging Face's names less the base model's prefix)
	"$top/tests/ag_events" "$models/$model.json" 2 32 ds3=1 torch-version=1.13 torch-device=cpu precision=fp32 \
		>"$tmp/ev" || fail "tests/ag_events $model ds3=1"
	awk '/^ds3:/ { sub(/^ds3:(transformer|model)\./, "ds3:")
		if (n++) printf "%s %+d\n", $0, live - last; else print $0 " "
		last = live; next }
		{ live += $1 }' "$tmp/ev" >"$tmp/hooks-zs"
	[ "$(wc -l <"$tmp/hooks-torch")" -gt 0 ] || fail "$model: PyTorch ran no hook"
	diff "$tmp/hooks-zs" "$tmp/hooks-torch" >"$tmp/diff" ||
		fail "$model: zerosim's ds3 marks (<) and DeepSpeed's hooks in PyTorch 1.13 (>) differ:
$(cat "$tmp/diff")"
	echo "ok: $model: $(wc -l <"$tmp/hooks-zs") ds3 marks, DeepSpeed's hooks' order and bytes on PyTorch 1.13"
done
exit 0
