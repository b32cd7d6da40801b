#!/bin/sh
# ds_torch — DeepSpeed's engine over the PyTorch step (`--framework
# deepspeed --wrapper deepspeed`, util/ag_ds.c; docs/schedule.md,
# "DeepSpeed over the PyTorch step"), ZeRO stages 1 and 2 in fp32 (ZeRO-3
# at N = 1 in its own block at the end, util/ag_ds3.c):
#  - theory = measure to the byte (json_agree: between steps, peak, every
#    category, every rank's, comm per step, each phase's peak; and the
#    bytes at every mark; the first step's peak, first_step_peak) over
#    N = 1, 2, 3, gpt2-tiny and llama-tiny, zero1 and zero2;
#  - --steps 1 (the first step's own list, util/ag_ds.c's step1): theory =
#    measure and at every mark, the 3-step run's first step, and its
#    forward and backward 8 L + 8 bytes below the steady step's at N = 1
#    (no Adam state nor _global_grad_norm yet), L by hand;
#  - the losses of 3 steps equal to --wrapper ddp's, and the final weights,
#    bit for bit at N = 1 and 2 (DeepSpeed divides by N before the sum,
#    DDP multiplies by 1/N: the same floats where N is a power of two); at
#    N = 3 the losses within 1e-6 of DDP's, relative (equal on these);
#  - the same under --freeze embeddings, --lora-r 4 (with and without
#    block 0's adapters frozen, --freeze blocks:0-0), --recompute full and
#    --grad-accum 2 and 3 (against DDP's under the same option; stage 2's
#    accumulation bit for bit at N = 1), and --ds-overlap-comm off the
#    default's run; the fp32 partition's bytes under --freeze and LoRA
#    counted by hand from the trainable elements; what K = 2 holds more
#    than K = 1 where the second forward starts, by hand;
#  - the engine's self.losses (each micro-step's loss.mean().detach(),
#    summed) held from the backward to the step, against the plain
#    loop's drop from zero_grad to the step's end, by hand;
#  - stage 2 frees each gradient at its hook: at the mark where h.0's
#    backward starts, stage 1 holds the gradients of ln_f and h.1 that
#    stage 2 moved into the bucket, 4 bytes an element, counted by hand
#    from the model's shape;
#  - what is not built refused with one line (exit 2), by measure and
#    theory alike, an existing --out left as it was.
# Runs from the build directory; about 20 s.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
agree=${ZS_BUILDDIR:-.}/tests/json_agree
models=${srcdir:-.}/report/models
tiny=$models/gpt2-tiny.json
for prog in "$zerosim" "$agree"; do
	[ -x "$prog" ] || { echo "ds_torch: $prog is not built" >&2; exit 99; }
done
[ -f "$tiny" ] || { echo "ds_torch: no model config at $tiny" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-dst.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds_torch: FAIL: $*" >&2; exit 1; }
# load FILE...: one python3 for the files (a measure's or a theory's)
# writes every run's value (JSON, keys sorted) to FILE.d/WORLD/KEY, a
# row's schedule's in a theory's, and each member of an object to
# FILE.d/WORLD/KEY.d/MEMBER; field FILE WORLD KEY [MEMBER] reads one back,
# loading FILE the first time (each file is written once: no name is
# reused), and prints a line no file holds where the value is not there,
# so that no comparison passes on two missing values
load() {
	python3 -c 'import json, os, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    for x in d.get("runs", d.get("rows")):
        w = os.path.join(f + ".d", str(x["world"]))
        if os.path.isdir(w):
            continue
        os.makedirs(w)
        for k, v in (x if "runs" in d else x["schedule"]).items():
            assert "/" not in k
            open(os.path.join(w, k), "w").write(json.dumps(v, sort_keys=True) + "\n")
            if isinstance(v, dict):
                os.mkdir(os.path.join(w, k + ".d"))
                for m, u in v.items():
                    assert "/" not in m
                    open(os.path.join(w, k + ".d", m), "w").write(json.dumps(u, sort_keys=True) + "\n")' "$@"
}
field() {
	[ -d "$1.d" ] || load "$1" || echo "ds_torch: cannot read $1" >&2
	v=$1.d/$2/$3
	[ $# -gt 3 ] && v=$1.d/$2/$3.d/$4
	cat "$v" 2>/dev/null || echo "(no $* in $1)"
}
command -v python3 >/dev/null || { echo "ds_torch: SKIP: no python3 to read the files"; exit 77; }

step="--precision fp32 --seq 32 --batch 2 --steps 3 --torch-device cpu --attn eager --torch-version 1.13
 --optimizer-impl single"
ds="--framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000"

# rows TAG OPTION...: theory = measure over N = 1, 2, 3 on both models and
# both stages under the options (TAG names the files), and the losses and
# weights against --wrapper ddp's under the same options: bit for bit at
# N <= $exact (2 unless set; stage 2 under accumulation sums the
# micro-steps' reduced gradients where DDP reduces their sum: N = 1),
# above it the losses within 1e-6, relative; DDP's at N = $ddpw (1 2 3
# unless set: the options' rows take 1 and 2, to keep the test short)
rows() {
	tag=$1
	shift
	for model in gpt2-tiny llama-tiny; do
		for scheme in zero1 zero2; do
			m=$tmp/m-$model-$scheme$tag.json t=$tmp/t-$model-$scheme$tag.json
			# shellcheck disable=SC2086
			"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes $scheme --world 1,2,3 --timeline \
				"$@" --out "$m" || fail "measure $model $scheme $*"
			# shellcheck disable=SC2086
			"$zerosim" theory $ds $step --model "$models/$model.json" --schemes $scheme --world 1,2,3 "$@" \
				--out "$t" || fail "theory $model $scheme $*"
			load "$m" "$t" || fail "cannot read $m or $t"
			out=$("$agree" "$m" "$t") || fail "theory and measure differ, $model $scheme $*: $out"
			[ "$out" = "json_agree: 3 points agree exactly" ] || fail "$model $scheme $*: $out"
			for w in 1 2 3; do
				field "$m" $w marks >"$tmp/marks-m"
				field "$t" $w marks >"$tmp/marks-t"
				[ -s "$tmp/marks-m" ] && cmp -s "$tmp/marks-m" "$tmp/marks-t" ||
					fail "the marks differ (or are missing), $model $scheme N=$w $*"
				# the first step, a list of its own (util/ag_ds.c's step1)
				f1=$(field "$m" $w first_step_peak)
				[ "$f1" = "$(field "$t" $w first_step_peak)" ] && [ "$f1" -gt 0 ] 2>/dev/null ||
					fail "$model $scheme N=$w $*: first step's peak $f1, theory's $(field "$t" $w first_step_peak)"
			done
		done
		ddp=$tmp/ddp-$model$tag.json
		# shellcheck disable=SC2086
		"$zerosim" measure -q --framework torch --wrapper ddp $step --model "$models/$model.json" --schemes dp \
			--world "$(echo ${ddpw:-1 2 3} | tr ' ' ,)" "$@" --out "$ddp" || fail "measure ddp $model $*"
		# shellcheck disable=SC2086
		for w in ${ddpw:-1 2 3}; do
			for scheme in zero1 zero2; do
				m=$tmp/m-$model-$scheme$tag.json lim=2
				[ $scheme = zero2 ] && lim=${exact:-2}
				if [ $w -le "$lim" ]; then
					for key in losses weights_digest; do
						[ "$(field "$ddp" $w $key)" = "$(field "$m" $w $key)" ] ||
							fail "$model $scheme N=$w $*: $key $(field "$m" $w $key), DDP's $(field "$ddp" $w $key)"
					done
				else
					python3 -c 'import sys, json
a, b = (json.loads(x) for x in sys.argv[1:])
sys.exit(not (len(a) == len(b) == 3 and all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(a, b))))' \
						"$(field "$m" $w losses)" "$(field "$ddp" $w losses)" ||
						fail "$model $scheme N=3 $*: losses $(field "$m" $w losses), DDP's $(field "$ddp" $w losses)"
				fi
			done
		done
		echo "ok: $model zero1, zero2 N=1,2,3 ${*:-(defaults)}: theory = measure to the byte and at every mark;" \
		     "the losses DDP's at N = ${ddpw:-1 2 3} (and the weights to N = 2, zero2's to N = ${exact:-2})"
	done
}
rows ""
# frozen parameters stay the model's tensors, out of the flat buffer
# (stage_1_and_2.py 309-313 keeps requires_grad's alone); LoRA's are its
# base's; Hugging Face's checkpointing reruns the layers, the hooks firing
# in the rerun's backward
ddpw="1 2"
rows -frz --freeze embeddings
rows -lora --lora-r 4
# frozen adapters (block 0's: --freeze with --lora-r): out of the flat
# buffer as the frozen base is (they require no grad when
# DeepSpeedZeroOptimizer.__init__ sorts them, stage_1_and_2.py 309-313)
rows -lorafrz --lora-r 4 --freeze blocks:0-0
rows -ckpt --recompute full
# gradient_accumulation_steps: stage 1 reduces at the boundary alone (the
# plain loop's accumulation in .grad), stage 2 every micro-step
exact=1
rows -acc2 --grad-accum 2
rows -acc3 --grad-accum 3
# overlap_comm off is stages 1 and 2's default (zero/config.py 351-353)
for scheme in zero1 zero2; do
	for cmd in measure theory; do
		f=$(echo $cmd | cut -c1)
		# shellcheck disable=SC2086,SC2046
		"$zerosim" $cmd $([ $cmd = measure ] && echo -q --timeline) $ds $step --model "$models/gpt2-tiny.json" \
			--schemes $scheme --world 1,2,3 --ds-overlap-comm off --out "$tmp/ovl.json" ||
			fail "$cmd --ds-overlap-comm off"
		python3 -c 'import json, sys
a, b = (json.load(open(x)) for x in sys.argv[1:])
k = "runs" if "runs" in a else "rows"
sys.exit(not a[k] or json.dumps(a[k], sort_keys=True) != json.dumps(b[k], sort_keys=True))' \
			"$tmp/$f-gpt2-tiny-$scheme.json" "$tmp/ovl.json" ||
			fail "gpt2-tiny $scheme: --ds-overlap-comm off is not the default's $cmd"
	done
done
echo "ok: --ds-overlap-comm off is the default's run"

# The fp32 partition (single_partition_of_fp32_groups) is S = L' / N of
# the trainable elements L padded to L' (a multiple of 2N), counted by
# hand from gpt2-tiny's shape (d = 64, inner 256, 2 layers): with the
# embeddings frozen (wte, and the head tied to it, and wpe), L = ln_f 2d
# and 2 blocks; under LoRA r = 4 on c_attn (PEFT's default for gpt2),
# L = 2 (r*d + 3d*r); with block 0's adapters frozen, block 1's alone
d=64 inner=256 r=4
block=$((4 * d + d * 3 * d + 3 * d + d * d + d + d * inner + inner + inner * d + d))
for case in "frz $((2 * d + 2 * block))" "lora $((2 * (r * d + 3 * d * r)))" "lorafrz $((r * d + 3 * d * r))"; do
	# shellcheck disable=SC2086
	set -- $case
	for scheme in zero1 zero2; do
		for w in 1 2 3; do
			want=$((4 * (($2 + 2 * w - 1) / (2 * w) * 2)))
			got=$(field "$tmp/m-gpt2-tiny-$scheme-$1.json" $w resident_breakdown master32)
			[ "$got" -eq "$want" ] || fail "$1 $scheme N=$w: the fp32 partition is $got bytes, not $want"
		done
	done
	echo "ok: $1: the fp32 partition is 4 x ceil(L / 2N) x 2 bytes, L = $2 trainable elements"
done

# What K = 2 holds more than K = 1 where the (second) forward starts, by
# hand: the second micro-batch's input_ids and labels (2 x 2 x 32 int64,
# 1024 B), the engine's self.losses (the first micro-step's
# loss.mean().detach(), 0-dim fp32, 4 B: engine.py 2105-2106, kept until
# the step's 2278), and, stage 1, every trainable gradient accumulated in .grad
# (gpt2-tiny's L = 169,728 elements: wte 1024 d, wpe 64 d, ln_f and the
# two blocks) and the bucket of 100,000 elements its first backward made
# and no epilogue released (stage_1_and_2.py 2048-2053; engine.py
# 2057-2062); stage 2 at N = 1 the first micro-step's grads_in_partition,
# L elements, kept by averaged_gradients (783-791)
L=$((1024 * d + 64 * d + 2 * d + 2 * block))
for scheme in zero1 zero2; do
	for w in 1 2 3; do
		[ $scheme = zero2 ] && [ $w -gt 1 ] && continue
		want=$((1024 + 4 + 4 * L))
		[ $scheme = zero1 ] && want=$((want + 4 * 100000))
		at() { field "$1" $w marks "$2"; }
		got=$(($(at "$tmp/m-gpt2-tiny-$scheme-acc2.json" phase:forward@1) - $(at "$tmp/m-gpt2-tiny-$scheme.json" phase:forward)))
		[ "$got" -eq "$want" ] || fail "$scheme N=$w: K = 2 holds $got bytes more than K = 1 where the forward starts," \
			"not $want"
	done
done
echo "ok: where the second forward starts K = 2 holds 1024 + 4 + 4 L (+ the bucket, stage 1) bytes more than K = 1"

# --steps 1: the first step alone (util/ag_ds.c's step1: Adam's state
# made by the client Adam's first step(), _global_grad_norm by step()'s
# division, stage_1_and_2.py 1858): theory = measure to the byte and at
# every mark (step 1's own); its peak the 3-step run's first_step_peak,
# its bytes after it the 3-step run's between steps; and through its
# forward and backward (the theory's phase peaks) 8 S + 8 bytes below the
# steady step's, by hand at
# N = 1 (S = L, even): no exp_avg, exp_avg_sq (4 S each), Adam's step and
# _global_grad_norm (4 B each) yet (tests/ds_bf16_torch.sh holds both
# steps to PyTorch's)
for scheme in zero1 zero2; do
	m=$tmp/m1-$scheme.json t=$tmp/t1-$scheme.json m3=$tmp/m-gpt2-tiny-$scheme.json
	# (no --timeline: with --steps 1 the theory's phase_peak_bytes.setup is
	# the state after step 1, the timeline's the set-up's, as for every
	# framework's --steps 1 on da7b016 too)
	# shellcheck disable=SC2086
	"$zerosim" measure -q $ds $step --steps 1 --model "$tiny" --schemes $scheme --world 1,2,3 --out "$m" ||
		fail "measure --steps 1 $scheme"
	# shellcheck disable=SC2086
	"$zerosim" theory $ds $step --steps 1 --model "$tiny" --schemes $scheme --world 1,2,3 --out "$t" ||
		fail "theory --steps 1 $scheme"
	out=$("$agree" "$m" "$t") || fail "theory and measure differ, --steps 1 $scheme: $out"
	[ "$out" = "json_agree: 3 points agree exactly" ] || fail "--steps 1 $scheme: $out"
	for w in 1 2 3; do
		field "$m" $w marks >"$tmp/marks-m"
		field "$t" $w marks >"$tmp/marks-t"
		[ -s "$tmp/marks-m" ] && cmp -s "$tmp/marks-m" "$tmp/marks-t" || fail "the marks differ, --steps 1 $scheme N=$w"
		for k in peak_bytes:first_step_peak resident_bytes:resident_bytes; do
			[ "$(field "$m" $w "${k%%:*}")" = "$(field "$m3" $w "${k#*:}")" ] ||
				fail "--steps 1 $scheme N=$w: ${k%%:*} $(field "$m" $w "${k%%:*}"), the 3-step run's ${k#*:}" \
					"$(field "$m3" $w "${k#*:}")"
		done
	done
	for ph in forward backward; do
		got=$(($(field "$tmp/t-gpt2-tiny-$scheme.json" 1 phase_peak_bytes "$ph") - $(field "$t" 1 phase_peak_bytes "$ph")))
		[ "$got" -eq $((8 * L + 8)) ] || fail "--steps 1 $scheme N=1: step 1's $ph peaks $got bytes below the" \
			"steady step's, not 8 x $L + 8 (Adam's moments and step, _global_grad_norm)"
	done
done
echo "ok: --steps 1 (the first step's own list): theory = measure and at every mark, the 3-step run's first step;" \
	"its forward and backward 8 L + 8 bytes below the steady step's at N = 1"

# The engine's self.losses from the backward to the step, by hand against
# the plain loop (--wrapper none, .grads set to None at zero_grad): from
# the step's zero_grad to its end the plain loop frees its gradients
# (4 L), at K = 2 the scaled loss (4 B: the engine's is freed as its
# backward returns), and the rest both free alike; the engine's step,
# whose gradients are gone before zero_grad, frees there self.losses
# instead (4 B: _take_model_step, engine.py 2278, after zero_grad at
# 2245-2252). So the plain loop's drop is the engine's + 4 L - 4 at K = 1
# and + 4 L at K = 2 (the sum of the two means, 4 B, for the scaled loss).
for K in 1 2; do
	# shellcheck disable=SC2086
	"$zerosim" measure -q --framework torch --wrapper none $step --zero-grad none --model "$tiny" --schemes dp \
		--world 1 --grad-accum $K --out "$tmp/plain-$K.json" || fail "measure --wrapper none K=$K"
	drop() { echo $(($(field "$1" "$2" marks phase:zero_grad) - $(field "$1" "$2" marks phase:between))); }
	want=$((4 * L - 4))
	[ $K = 2 ] && want=$((4 * L))
	[ $K = 1 ] && plain1=$(drop "$tmp/plain-$K.json" 1)
	for scheme in zero1 zero2; do
		f=$tmp/m-gpt2-tiny-$scheme.json
		[ $K = 2 ] && f=$tmp/m-gpt2-tiny-$scheme-acc2.json
		for w in 1 2 3; do
			got=$(($(drop "$tmp/plain-$K.json" 1) - $(drop "$f" $w)))
			[ "$got" -eq "$want" ] || fail "$scheme K=$K N=$w: from zero_grad to the step's end the plain loop frees" \
				"$got bytes more than the engine, not $want (4 L - 4 + 4 (K - 1): self.losses held to the step)"
		done
	done
done
echo "ok: the engine's self.losses (4 B) held from the backward to the step's end, K = 1 and 2"

# Stage 2's hook frees each gradient once it is in the bucket; stage 1
# keeps them to backward's end. Before h.0's backward the gradients in
# are ln_f's and h.1's (the tied head's waits for the embedding's): with
# gpt2-tiny's d = 64 and inner 256, ln_f 2d, and a block ln_1 and ln_2
# 2d each, c_attn d*3d + 3d, attn.c_proj d*d + d, c_fc d*inner + inner,
# mlp.c_proj inner*d + d; none of them reaches the 100000-element bucket
# yet, so stage 2 has made nothing else by then.
want=$((4 * (2 * d + block)))
for w in 1 2 3; do
	at() { field "$1" $w marks bwd:h.0:start; }
	got=$(($(at "$tmp/m-gpt2-tiny-zero1.json") - $(at "$tmp/m-gpt2-tiny-zero2.json")))
	[ "$got" -eq "$want" ] || fail "N=$w: stage 1 holds $got bytes more than stage 2 where h.0's backward starts," \
		"not $want (the gradients of ln_f and h.1)"
done
echo "ok: where h.0's backward starts stage 2 holds $want bytes less than stage 1 (ln_f's and h.1's gradients)"

# What is not built, refused: exit 2, exactly "zerosim CMD: MESSAGE" on
# stderr, nothing on stdout, an existing --out untouched.
keep=$tmp/keep.json
echo 'kept' >"$keep"
n=0
try() {
	want=$1 msg=$2
	shift 2
	"$zerosim" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ] || fail "exit $rc, not $want: $*"
	[ "$(cat "$tmp/err")" = "zerosim $1: $msg" ] || fail "stderr of $*: $(cat "$tmp/err")"
	[ -s "$tmp/out" ] && fail "stdout of $*: $(cat "$tmp/out")"
	[ "$(cat "$keep")" = kept ] || fail "$* changed $keep"
	n=$((n + 1))
}
. "${srcdir:-.}/tests/moe_configs.sh"
moe_configs "$tmp" && cp "$tmp/mixtral.json" "$tmp/mix.json"
cat >"$tmp/qw.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 32}
JSON
only="give --schemes zero1, zero2 or zero3"
stages="--wrapper deepspeed builds ZeRO stages 1, 2 and 3 so far: $only"
# ZeRO-3's first step at N > 1 is built over gpt2 and llama
# (tests/ds3_torch.sh): over a model whose leaf marks are not described
# (qwen2's biased q, k and v) its --steps 1 is refused (ZeRO-1's and 2's
# first step is built: below)
z3n="--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over q_proj, k_proj and v_proj with biases has no first step of its own yet (its one step would be the steady step's over the set-up's state, which PyTorch never runs); give --steps 2"
keys="--wrapper deepspeed (ZeRO-1, 2 and 3 in fp32, no offload) takes --ds-reduce-bucket (and, with zero1 or zero2, --ds-overlap-comm off) alone so far"
printf '{"format": "zerosim-sweep/2", "framework": "deepspeed", "wrapper": "deepspeed", "schemes": ["zero3"], "world": [2], "steps": 1, "torch-version": "1.13", "torch-device": "cpu", "precision": "fp32"}\n' \
	>"$tmp/sp.json"
for cmd in measure theory; do
	base="$cmd --framework deepspeed --wrapper deepspeed --model $tiny --torch-device cpu --world 2 --precision fp32"
	# shellcheck disable=SC2086
	{
		try 2 "$stages (it lists dp; DeepSpeed's stage 0 is DDP's arithmetic with its own all-reduce, not built: give --wrapper auto or --framework torch --wrapper ddp)" \
			$base --torch-version 1.13 --schemes dp --out "$keep"
		try 2 "$z3n" $base --torch-version 1.13 --schemes zero3 --steps 1 --model "$tmp/qw.json" --out "$keep"
		# the spec gave --steps: the error names its key (cli/options.c zs_opts_name_source)
		try 2 "$tmp/sp.json's \"steps\" ${z3n#--steps }" $cmd --spec "$tmp/sp.json" --model "$tmp/qw.json" \
			--out "$keep"
		try 2 "--wrapper deepspeed runs one scheme a run, zero1, zero2 or zero3 (it lists zero1 and zero2): run them apart" \
			$base --torch-version 1.13 --schemes zero1,zero2 --out "$keep"
		# DeepSpeed's bf16 (--precision mixed: module.bfloat16(), engine.py
		# 1224-1231; tests/ds_bf16_torch.sh holds it to PyTorch): stages 1
		# and 2 over gpt2's and llama's step (--freeze, LoRA, --grad-accum and
		# --recompute full too); the rest by name
		try 2 "--precision mixed with --wrapper deepspeed --schemes zero3: DeepSpeed's bf16 is built for stages 1 and 2 so far (give --schemes zero1 or zero2, or --precision fp32)" \
			$base --torch-version 1.13 --schemes zero3 --world 1 --precision mixed --out "$keep"
		try 2 "--model qw: DeepSpeed's bf16 (--precision mixed) over the PyTorch step of a qwen2 is not described yet (gpt2 and llama are)" \
			$cmd --framework deepspeed --wrapper deepspeed --model "$tmp/qw.json" --torch-device cpu --world 2 \
			--torch-version 1.13 --schemes zero2 --precision mixed --out "$keep"
		try 2 "--precision amp-bf16 with --wrapper deepspeed: DeepSpeed 0.16.5 has no autocast (its bf16 casts the module: give --precision mixed, or fp32)" \
			$base --torch-version 1.13 --schemes zero2 --precision amp-bf16 --out "$keep"
		# under 2.6 (the default; tests/ds_torch26.sh holds it to 2.6's
		# allocator) a bf16 module's SDPA math path is not described
		try 2 "--attn sdpa with a bf16 module (DeepSpeed's bf16) and attention dropout: SDPA's math path, whose fp32 copies of q, k and v are not described yet (give --attn eager, or --precision fp32)" \
			$base --schemes zero2 --precision mixed --attn sdpa --out "$keep"
		try 2 "--zero-grad: --wrapper deepspeed's engine sets every .grad to None itself (leave --zero-grad out)" \
			$base --torch-version 1.13 --schemes zero2 --zero-grad none --out "$keep"
		try 2 "--offload: $keys" $base --torch-version 1.13 --schemes zero2 --offload optimizer --out "$keep"
		try 2 "--ds-allgather-bucket: $keys" \
			$base --torch-version 1.13 --schemes zero2 --ds-allgather-bucket 1000 --out "$keep"
		try 2 "--ds-overlap-comm on with --wrapper deepspeed: DeepSpeed's overlap_comm (a second reduce bucket, the reductions on their own stream) is not built yet (give --ds-overlap-comm off, stages 1 and 2's default)" \
			$base --torch-version 1.13 --schemes zero1 --ds-overlap-comm on --out "$keep"
		try 2 "--bucket-cap is DDP's bucket size: DeepSpeed's engine reduces through its own bucket (give --ds-reduce-bucket, reduce_bucket_size in elements)" \
			$base --torch-version 1.13 --schemes zero2 --bucket-cap 10 --out "$keep"
		try 2 "--wrapper deepspeed: a parameter of 65536 elements is larger than the reduce bucket (1000): DeepSpeed reduces it apart, which is not built yet (give --ds-reduce-bucket 65536 or more)" \
			$base --torch-version 1.13 --schemes zero2 --ds-reduce-bucket 1000 --out "$keep"
		try 2 "--lora-r under --framework deepspeed with --offload optimizer: not described yet (give --offload none)" \
			$cmd --framework deepspeed --model "$tiny" --world 2 --schemes zero3 --lora-r 4 --offload optimizer \
			--out "$keep"
		try 2 "--wrapper deepspeed is DeepSpeed's engine: give --framework deepspeed" \
			$cmd --framework torch --wrapper deepspeed --model "$tiny" --world 2 --out "$keep"
		try 2 "--wrapper: only under --framework torch or deepspeed" \
			$cmd --framework paper --wrapper deepspeed --model "$tiny" --world 2 --out "$keep"
		try 2 "--wrapper: 'deepspeeed' is not one of auto, none, ddp, fsdp, deepspeed" \
			$cmd --framework deepspeed --wrapper deepspeeed --out "$keep"
	}
	"$zerosim" $cmd --framework deepspeed --wrapper deepspeed --model "$tmp/mix.json" --torch-device cpu \
		--torch-version 1.13 --precision fp32 --world 2 --schemes zero3 --out "$keep" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] && grep -q 'not with --wrapper deepspeed --schemes zero3 (give zero1 or zero2' "$tmp/err" &&
		[ "$(wc -l <"$tmp/err")" -eq 1 ] && [ "$(cat "$keep")" = kept ] ||
		fail "$cmd of a mixture under --wrapper deepspeed --schemes zero3: $(cat "$tmp/err")"
	n=$((n + 1))
done
[ "$n" -eq 38 ] || fail "ran $n refusals, not 38"
echo "ok: $n refusals"

# the control: DeepSpeed's buffers over zerosim's own step still run
"$zerosim" measure -q --framework deepspeed --wrapper auto --model "$tiny" --schemes zero2 --world 2 --steps 1 \
	--ds-reduce-bucket 1000 --out "$tmp/auto.json" || fail "--wrapper auto under deepspeed"
grep -q '"framework":	"deepspeed"' "$tmp/auto.json" || fail "--wrapper auto's file names no deepspeed"

# --- ZeRO-3 (util/ag_ds3.c; docs/schedule.md, "ZeRO-3 over the PyTorch
# step"), built at N = 1: theory = measure to the byte and at every mark;
# the losses and the final weights DDP's bit for bit; and between steps,
# counted by hand against stage 2 at N = 1 (the same flat buffer, fp32
# partition and moments, unpadded where the parameters are even): the
# gradient partitions (4 bytes a parameter), the reduce bucket kept from
# set-up (4 an element), inf_or_nan_tracker (1) and _global_grad_norm in
# float64 (4 more). Parameters from the shapes: gpt2-tiny's tables
# (1024 + 64) x d, two blocks as above and ln_f; llama-tiny's two tables
# 1024 x d (untied), per layer two norms, q and o d x d, k and v d x 32
# (2 of 4 heads of 16), gate, up and down d x 176, and the final norm.
z3_psi_gpt2=$(((1024 + 64) * d + 2 * block + 2 * d))
z3_psi_llama=$((2 * 1024 * d + 2 * (2 * d + 2 * d * d + 2 * d * 32 + 3 * d * 176) + d))
for model in gpt2-tiny llama-tiny; do
	m3=$tmp/m3-$model.json t3=$tmp/t3-$model.json ddp=$tmp/ddp3-$model.json
	# shellcheck disable=SC2086
	"$zerosim" measure -q $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --timeline \
		--out "$m3" || fail "measure $model zero3"
	# shellcheck disable=SC2086
	"$zerosim" theory $ds $step --model "$models/$model.json" --schemes zero3 --world 1 --out "$t3" ||
		fail "theory $model zero3"
	out=$("$agree" "$m3" "$t3") || fail "theory and measure differ, $model zero3: $out"
	[ "$out" = "json_agree: 1 points agree exactly" ] || fail "$model zero3: $out"
	field "$m3" 1 marks >"$tmp/marks-m"
	field "$t3" 1 marks >"$tmp/marks-t"
	[ -s "$tmp/marks-m" ] && cmp -s "$tmp/marks-m" "$tmp/marks-t" || fail "the marks differ, $model zero3"
	# shellcheck disable=SC2086
	"$zerosim" measure -q --framework torch --wrapper ddp $step --model "$models/$model.json" --schemes dp \
		--world 1 --out "$ddp" || fail "measure ddp $model N=1"
	for key in losses weights_digest; do
		[ "$(field "$ddp" 1 $key)" = "$(field "$m3" 1 $key)" ] ||
			fail "$model zero3: $key $(field "$m3" 1 $key), DDP's $(field "$ddp" 1 $key)"
	done
	if [ $model = gpt2-tiny ]; then
		psi=$z3_psi_gpt2
		# self.losses to the step, as stages 1 and 2 (above)
		[ $((plain1 - $(drop "$m3" 1))) -eq $((4 * L - 4)) ] ||
			fail "zero3: from zero_grad to the step's end the plain loop frees" \
				"$((plain1 - $(drop "$m3" 1))) bytes more than the engine, not 4 L - 4"
	else psi=$z3_psi_llama; fi
	[ $((psi % 2)) -eq 0 ] || fail "$model: $psi parameters, odd: stage 2 pads"
	want=$((4 * psi + 4 * 100000 + 1 + 4))
	got=$(($(field "$m3" 1 resident_bytes) - $(field "$tmp/m-$model-zero2.json" 1 resident_bytes)))
	[ "$got" -eq "$want" ] || fail "$model: zero3 holds $got bytes more than zero2 between steps, not $want" \
		"(4 x $psi + 4 x 100000 + 1 + 4)"
	echo "ok: $model zero3 N=1: theory = measure to the byte and at every mark, DDP's losses and weights," \
		"and 4 x $psi + 400005 bytes more than zero2 between steps"
done
n=0
for cmd in measure theory; do
	base="$cmd $ds --model $tiny --torch-device cpu --torch-version 1.13 --precision fp32 --schemes zero3"
	# shellcheck disable=SC2086
	{
		try 2 "$z3n" $cmd $ds --model "$tmp/qw.json" --torch-device cpu --torch-version 1.13 --precision fp32 \
			--schemes zero3 --world 1,3 --steps 1 --out "$keep"
		try 2 "--wrapper deepspeed --schemes zero3: a parameter of 65536 elements is larger than the reduce bucket (1000): DeepSpeed reduces it from its own .grad, which is not built yet (give --ds-reduce-bucket 65536 or more)" \
			$base --world 1 --ds-reduce-bucket 1000 --out "$keep"
		try 2 "--ds-persist: $keys" $base --world 1 --ds-persist 0 --out "$keep"
		# sub_group_size's 1e9 (zero/config.py 168): llama-2-7b's step runs over several sub groups
		try 2 "--wrapper deepspeed --schemes zero3: 6738415616 parameters, more than DeepSpeed's sub_group_size (1000000000): its step over several sub groups is not built yet" \
			$cmd --framework deepspeed --wrapper deepspeed --model "${srcdir:-.}/data/models/llama-2-7b.json" \
			--torch-device cpu --torch-version 1.13 --precision fp32 --schemes zero3 --world 1 --out "$keep"
		# stage 3 over the plain step, --freeze's, LoRA's and
		# --grad-accum's (tests/ds3_torch.sh): overlap_comm is not built
		# for stage 3
		for opt in "--ds-overlap-comm off" "--ds-overlap-comm on"; do
			try 2 "--ds-overlap-comm with --wrapper deepspeed --schemes zero3: not built yet (stage 3 takes the plain step, --freeze, --lora-r and --grad-accum so far; leave --ds-overlap-comm out, or give --schemes zero1 or zero2)" \
				$base --world 1 $opt --out "$keep"
		done
		try 2 "--recompute full with --wrapper deepspeed --schemes zero3: not built yet (give --recompute none, or --schemes zero1 or zero2)" \
			$base --world 1 --recompute full --out "$keep"
	}
done
[ "$n" -eq 14 ] || fail "ran $n zero3 refusals, not 14"
echo "ok: $n zero3 refusals"
exit 0
