#!/bin/sh
# paper_lora — --lora-r under the paper's schedule (docs/finetune.md, "LoRA
# under the paper's schedule and DeepSpeed's own step"): the adapters,
# lora_A [r, in] and lora_B [out, r], are the only trained tensors; the
# base is frozen (no grads, no optimizer state).
#
# 1. The bytes: theory = measure to the byte (tests/json_agree: resident,
#    peak, every category at the peak, bytes sent) on report/models'
#    gpt2-tiny (tied) and llama-tiny: default targets (c_attn; q_proj,
#    v_proj) and all-linear, r 4 and 8, dp, zero1, zero2 at N = 1, 2, 3,
#    zero3 at N = 1, K = 1, 2, recompute none, selective, full; fp32 and
#    mixed (the paper's: fp16 params and grads, the fp32 master and Adam's
#    state of the adapters alone; the base fp16 params only); with
#    --lora-dropout (each adapter's dropped input and noise kept) and with
#    --freeze over the adapters (s47: both refused on 1659c3a).
# 2. Training: the losses of 3 steps equal the PyTorch step's with the
#    same --lora-r (the plain loop at N = 1, DDP at N = 2, K = 1 and 2:
#    each held to real PyTorch by tests/ft_lora.sh), within 1e-5
#    relative, fp32 Adam;
#    the control: the paper's step without --lora-r differs (from step 2:
#    lora_B starts at zeros, so step 1's loss is the base's).
#    Mixed: the losses equal the paper's fp32 ones with the same adapters
#    (held to PyTorch above) within 2e-4 relative, at lr 1e-2; the
#    control: the mixed step whose adapters barely move (lr 1e-9) differs.
#    With --lora-dropout the paper's step draws the PyTorch step's masks,
#    and with --freeze it freezes the adapters the PyTorch step does: the
#    losses equal its (controls: the paper's step without the option).
# 3. The base's bytes never change: llama-tiny's embedding and block 0's
#    base (--dump-weights) bitwise the same after one step and three, and
#    the seed's initial weights, while block 0's adapters moved; with
#    --freeze blocks:0-0 block 0's adapters do not (lora_B PEFT's zeros).
# 4. By hand: what the adapters add to the resident bytes, 16 bytes a
#    trained element under fp32 Adam (param, grad, m, v; mixed: fp16
#    param and grad, fp32 master, m, v) over PEFT's count (tests/test_lora:
#    llama-tiny q, v r 4 1,792; all-linear r 8 18,688), beside the base's
#    params alone (4 bytes an element; mixed 2).
#    QLoRA's 4-bit base (--quant-base nf4): part 1's rows under the
#    paper's step and DeepSpeed's dp, ZeRO-1, ZeRO-2 and (s52) ZeRO-3, the
#    codes as elements of the params' dtype partitioned by stage 3, the
#    QuantState whole on every rank (its losses ZeRO-2's bit for bit); by
#    hand the bytes bitsandbytes stores, and ZeRO-3's resident at N = 2.
# 5. What is not built is refused with one line, exit 2.
# About 80 s on a loaded shared core (20 s of CPU); s47's rows add about
# 7 s of CPU (19 s wall before them, 49 s after on a loaded machine).
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=paper_lora
. "${srcdir:-.}/tests/ft_lib.sh"
. "${srcdir:-.}/tests/freeze_lib.sh"
ft_configs 256 160 # $tmp/gpt2.json, llama.json: the PyTorch step's tiny models (dropout 0)

# 1. theory = measure (tests/freeze_lib.sh's fz_agree)
fz_agree --model "$llama" --lora-r 4 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$llama" --lora-r 8 --lora-targets all-linear --precision fp32 --grad-accum 2 --world 1,2,3 \
	--schemes dp,zero1,zero2 --unit layer
fz_agree --model "$llama" --lora-r 4 --lora-targets all-linear --precision fp32 --world 1 --schemes zero3 \
	--unit layer --recompute full
fz_agree --model "$llama" --lora-r 4 --lora-targets o_proj,down_proj --lora-alpha 16 --precision fp32 --world 1,2 \
	--schemes dp,zero2 --unit layer --recompute selective
fz_agree --model "$gpt2" --lora-r 4 --precision fp32 --world 1,2 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$gpt2" --lora-r 4 --lora-targets all-linear --precision fp32 --grad-accum 2 --world 1,2 \
	--schemes dp,zero1,zero2 --unit layer --recompute full
fz_agree --model "$gpt2" --lora-r 8 --lora-targets all-linear --precision fp32 --world 1 --schemes zero3 --unit layer
# mixed precision (refused on 4ac954d)
fz_agree --model "$llama" --lora-r 4 --precision mixed --grad-accum 2 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$gpt2" --lora-r 4 --lora-targets all-linear --precision mixed --world 1,2 --schemes dp,zero1,zero2 \
	--unit layer --recompute full
fz_agree --model "$llama" --lora-r 8 --lora-targets all-linear --precision mixed --world 1 --schemes zero3 --unit layer \
	--recompute selective
# --lora-dropout (refused on 1659c3a): each adapter's dropout output and
# noise kept (util/step.c step_buffers_lora), in mixed 16-bit, act32 longer
fz_agree --model "$llama" --lora-r 4 --lora-dropout 0.1 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$gpt2" --lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --precision fp32 --grad-accum 2 \
	--world 1,2 --schemes dp,zero2 --unit layer --recompute full
fz_agree --model "$llama" --lora-r 4 --lora-dropout 0.1 --precision mixed --grad-accum 2 --world 1,2 --schemes dp,zero2 \
	--unit layer --recompute full
fz_agree --model "$llama" --lora-r 8 --lora-targets all-linear --lora-dropout 0.05 --precision mixed --world 1 \
	--schemes zero3 --unit layer --recompute selective
# --freeze over the adapters (refused on 1659c3a): no grad, master or state
# for them; outside the graph (block 0's) nothing kept
fz_agree --model "$llama" --lora-r 4 --freeze blocks:0-0 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$llama" --lora-r 4 --freeze blocks:1-1 --lora-dropout 0.1 --precision mixed --grad-accum 2 --world 1,2 \
	--schemes dp,zero1,zero2 --unit layer
fz_agree --model "$llama" --lora-r 4 --lora-targets all-linear --freeze '*.q_proj.lora_A*' --lora-dropout 0.1 \
	--precision fp32 --world 1,2 --schemes dp,zero2 --unit layer --recompute full
fz_agree --model "$gpt2" --lora-r 4 --lora-targets all-linear --freeze blocks:0-0 --precision fp32 --world 1 --schemes zero3 \
	--unit layer
# QLoRA's 4-bit base (--quant-base nf4, s51; refused on 45b324dd): the
# base in bitsandbytes' bytes whole on every rank, in no buffer of the
# scheme's; each module's product reads its weight dequantized into one
# scratch (util/nf4.h's nf4_step_buffers)
fz_agree --model "$llama" --lora-r 4 --quant-base nf4 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$gpt2" --lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --precision mixed \
	--grad-accum 2 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer --recompute full
fz_agree --model "$llama" --lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --precision fp32 \
	--world 1 --schemes zero3 --unit layer --recompute selective
fz_agree --model "$llama" --lora-r 4 --quant-base nf4 --double-quant on --precision mixed --grad-accum 2 --world 1 \
	--schemes zero3 --unit layer

# 2. The losses against the PyTorch step's (tests/freeze_lib.sh's fz_train).
for model in gpt2 llama; do
	for targets in default all-linear; do
		lora="--lora-r 4"
		[ $targets = all-linear ] && lora="$lora --lora-targets all-linear"
		for run in 1:none 2:ddp; do # N and the PyTorch step's wrapper
			world=${run%:*} wrapper=${run#*:} schemes=dp,zero1,zero2,zero3
			[ "$world" -gt 1 ] && schemes=dp,zero1,zero2 # zero3 at N > 1 is refused (part 5)
			# shellcheck disable=SC2086
			fz_train "$model $targets N=$world" $wrapper $schemes --model $tmp/$model.json --world $world \
				--precision fp32 --batch 2 --steps 3 $lora
		done
	done
done
# gradient accumulation: the adapters' grads summed over the micro-steps
fz_train "llama default N=2 K=2" ddp dp,zero2 --model "$tmp/llama.json" --world 2 --precision fp32 --batch 2 \
	--steps 3 --grad-accum 2 --lora-r 4
# --lora-dropout (refused on 1659c3a): the paper's step draws the PyTorch
# step's masks (engine/rng.h), so the losses are its
fz_train "llama default N=1 dropout 0.1" none dp,zero3 --model "$tmp/llama.json" --world 1 --precision fp32 --batch 2 \
	--steps 3 --lora-r 4 --lora-dropout 0.1
fz_train "gpt2 all-linear N=2 dropout 0.1" ddp dp,zero2 --model "$tmp/gpt2.json" --world 2 --precision fp32 --batch 2 \
	--steps 3 --lora-r 4 --lora-targets all-linear --lora-dropout 0.1
fz_train "llama all-linear N=2 K=2 full recompute dropout 0.5" ddp zero2 --model "$tmp/llama.json" --world 2 \
	--precision fp32 --batch 2 --steps 3 --lora-r 4 --lora-targets all-linear --grad-accum 2 --recompute full \
	--lora-dropout 0.5 --lr 1e-2
# --freeze over the adapters (refused on 1659c3a), as the PyTorch step
# freezes them by PEFT's names
fz_train "llama blocks:0-0 frozen N=1" none dp,zero3 --model "$tmp/llama.json" --world 1 --precision fp32 --batch 2 \
	--steps 3 --lora-r 4 --lr 1e-2 --freeze blocks:0-0
fz_train "llama blocks:1-1 frozen N=2 dropout 0.1" ddp dp,zero2 --model "$tmp/llama.json" --world 2 --precision fp32 \
	--batch 2 --steps 3 --lora-r 4 --lr 1e-2 --freeze blocks:1-1 --lora-dropout 0.1
fz_train "llama all-linear down_proj.lora_B frozen N=2 K=2" ddp zero2 --model "$tmp/llama.json" --world 2 \
	--precision fp32 --batch 2 --steps 3 --lora-r 4 --lr 1e-2 --lora-targets all-linear --grad-accum 2 \
	--freeze '*.down_proj.lora_B*'
[ "$checked" -eq 40 ] || { echo "$name: $checked comparisons, 40 expected" >&2; exit 1; }
# DeepSpeed's own step (--framework deepspeed, --wrapper auto; refused on
# 6da2932): the paper's adapters under its dp, ZeRO-1 and ZeRO-2 (their
# frozen layout, as its --freeze), theory = measure, and the losses those
# of DeepSpeed's engine over the PyTorch step (--wrapper deepspeed) at
# T + 1, as the paper's are the PyTorch step's (seen: 0, bit for bit)
fz_agree --model "$llama" --framework deepspeed --lora-r 4 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2 \
	--unit layer
fz_agree --model "$gpt2" --framework deepspeed --lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --precision mixed \
	--grad-accum 2 --world 1,2 --schemes dp,zero1,zero2 --unit layer --recompute full
for scheme in zero1 zero2; do
	ds="--model $tmp/llama.json --framework deepspeed --world 2 --precision fp32 --batch 2 --steps 3 --lora-r 4"
	ds="$ds --lora-dropout 0.1 --lr 1e-2 --schemes $scheme"
	# shellcheck disable=SC2086
	"$zerosim" measure $ds --wrapper deepspeed --torch-version 1.13 --torch-device cpu --attn eager --seq 32 \
		--out "$tmp/a.json" &&
		"$zerosim" measure $ds --unit layer --seq 31 --out "$tmp/b.json" || exit 99
	if fz_close "$tmp/a.json" "$tmp/b.json"; then
		echo "ok: llama q,v dropout 0.1 N=2 deepspeed $scheme against --wrapper deepspeed: relative$(cat "$tmp/cmp")"
	else
		echo "$name: FAIL: deepspeed $scheme against --wrapper deepspeed: relative$(cat "$tmp/cmp")" >&2
		status=1
	fi
done
fz_control --lora-r 4
# The controls of the rows above: the paper's step without the option
# against the PyTorch step with it (lr 1e-2, where an adapter's dropout or
# freeze moves the losses past 1e-5; seen: 3.2e-4 and 8.1e-4)
lora_control() { # OPTION...: the PyTorch step's alone
	common="--model $tmp/llama.json --world 1 --precision fp32 --batch 2 --steps 3 --schemes dp --lora-r 4 --lr 1e-2"
	# shellcheck disable=SC2086
	"$zerosim" measure $common $fz_torch --wrapper none --seq 32 "$@" --out "$tmp/a.json" || exit 99
	# shellcheck disable=SC2086
	"$zerosim" measure $common --unit layer --seq 31 --out "$tmp/b.json" || exit 99
	if fz_close "$tmp/a.json" "$tmp/b.json"; then
		echo "$name: FAIL: the control (the paper's step without $*) agrees with the PyTorch step with it" >&2
		status=1
	else
		echo "ok: the control (the paper's step without $*) differs:$(cat "$tmp/cmp")"
	fi
}
lora_control --lora-dropout 0.5
lora_control --freeze blocks:0-0
# QLoRA's 4-bit base (s51): the paper's step and DeepSpeed's own, theory =
# measure (DeepSpeed's dp, ZeRO-1 and ZeRO-2: the base in no flat group,
# as its requires_grad=False Params4bit; ZeRO-3 refused, part 5), and the
# losses the PyTorch step's QLoRA (PyTorch 2.6: bitsandbytes 0.47.0 needs
# torch >= 2.2; held to PyTorch 2.6 by tests/ft_lora.sh torch26's "QLoRA"
# rows): the same NF4 codes and absmax, dequantized the same (seen: 0,
# bit for bit; 8.6e-8 on a double-quantized all-linear llama's third step)
fz_agree --model "$llama" --framework deepspeed --lora-r 4 --quant-base nf4 --double-quant on --precision fp32 \
	--world 1,2,3 --schemes dp,zero1,zero2 --unit layer
fz_agree --model "$gpt2" --framework deepspeed --lora-r 4 --lora-targets all-linear --quant-base nf4 --precision mixed \
	--grad-accum 2 --world 1,2,3 --schemes dp,zero1,zero2 --unit layer
# and DeepSpeed's ZeRO-3 (s52; refused on 4283e74): each 4-bit layer's
# codes a frozen tensor of the model's dtype (quant_storage: n/8 fp32,
# n/4 fp16 elements), partitioned and gathered as any frozen tensor, the
# QuantState whole on every rank; the default persistence threshold
# (every tensor of the tiny models whole on every rank) and --ds-persist 0
# (each packed weight gathered around its module: bytes sent)
ds3q="--framework deepspeed --schemes zero3 --unit layer --lora-r 4 --quant-base nf4"
# shellcheck disable=SC2086
fz_agree $ds3q --model "$llama" --precision fp32 --world 1,2,3
# shellcheck disable=SC2086
fz_agree $ds3q --model "$llama" --precision fp32 --double-quant on --world 1,2,3 --ds-persist 0
# shellcheck disable=SC2086
fz_agree $ds3q --model "$llama" --precision mixed --lora-targets all-linear --double-quant on --grad-accum 2 \
	--recompute full --world 1,2,3 --ds-persist 0
# shellcheck disable=SC2086
fz_agree $ds3q --model "$gpt2" --precision fp32 --lora-targets all-linear --double-quant on --world 1,2,3 --ds-persist 0
# shellcheck disable=SC2086
fz_agree $ds3q --model "$gpt2" --precision mixed --world 1,2,3 --ds-persist 0 --lora-dropout 0.1
# its losses ZeRO-2's bit for bit (the same codes, absmax and adapters;
# ZeRO-2's are held to the PyTorch step's QLoRA below)
ds3q_losses() { # WHAT OPTIONS...
	what=$1
	shift
	for s in zero2 zero3; do
		# shellcheck disable=SC2086
		"$zerosim" measure --model "$llama" --framework deepspeed --schemes $s --unit layer --lora-r 4 --quant-base nf4 \
			--seq 16 --batch 2 --steps 3 --lr 1e-2 "$@" --out "$tmp/q$s.json" || exit 99
	done
	a=$(fz_losses "$tmp/qzero3.json" | tr '\n' ' ')
	if [ "$a" = "$(fz_losses "$tmp/qzero2.json" | tr '\n' ' ')" ] && [ "$(fz_losses "$tmp/qzero3.json" | grep -c .)" = 3 ]; then
		echo "ok: $what: zero3's losses zero2's bit for bit ($a)"
	else
		echo "$name: FAIL: $what: zero3 $a, zero2 $(fz_losses "$tmp/qzero2.json" | tr '\n' ' ')" >&2
		status=1
	fi
}
ds3q_losses "QLoRA llama q,v N=2 fp32 --ds-persist 0" --world 2 --precision fp32 --ds-persist 0
ds3q_losses "QLoRA llama all-linear double quant N=3 mixed full recompute" --world 3 --precision mixed \
	--lora-targets all-linear --double-quant on --recompute full
fz_torch13=$fz_torch
fz_torch="--framework torch --torch-version 2.6 --torch-device cpu --optimizer-impl single --zero-grad none --attn eager"
fz_train "llama default nf4 double quant N=1" none dp,zero3 --model "$tmp/llama.json" --world 1 --precision fp32 \
	--batch 2 --steps 3 --lora-r 4 --lr 1e-2 --quant-base nf4 --double-quant on
fz_train "gpt2 all-linear nf4 N=2" ddp dp,zero2 --model "$tmp/gpt2.json" --world 2 --precision fp32 --batch 2 \
	--steps 3 --lora-r 4 --lr 1e-2 --lora-targets all-linear --quant-base nf4
fz_train "llama default nf4 N=2 DeepSpeed" ddp zero1,zero2 --framework deepspeed --model "$tmp/llama.json" --world 2 \
	--precision fp32 --batch 2 --steps 3 --lora-r 4 --lr 1e-2 --quant-base nf4
# the control: the PyTorch step with the 4-bit base, the paper's without
lora_control --quant-base nf4
fz_torch=$fz_torch13
# Mixed precision: its losses against the paper's fp32 ones, within TOL
# relative (seen: 1.0e-6 on q,v; 3.8e-5 all-linear at N = 2, K = 2 under
# full recompute); the control, lr 1e-9 (an adapter that barely trains),
# must be off by more (seen: 1.3e-3 and 9.2e-3).
mixed_losses() { # TOL LABEL OPTIONS...
	tol=$1 label=$2
	shift 2
	for run in fp32:1e-2 mixed:1e-2 mixed:1e-9; do
		# shellcheck disable=SC2086
		"$zerosim" measure --model "$tmp/llama.json" --seq 32 --batch 2 --steps 3 --precision ${run%:*} --lr ${run#*:} \
			"$@" --out "$tmp/ml-$run.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
		tr -d ' \n\t' <"$tmp/ml-$run.json" | grep -o '"losses":\[[^]]*\]' | sed 's/.*\[//; s/\]//' >"$tmp/ml-$run"
	done
	[ "$(tr ',' '\n' <"$tmp/ml-fp32:1e-2" | wc -l)" -ge 3 ] || { echo "$name: $label: no losses" >&2; exit 99; }
	cmp_losses() { # A B: every loss of every run within $tol relative
		paste -d, "$1" "$2" | awk -F, -v tol="$tol" '{ n = NF / 2; for (i = 1; i <= n; i++) { d = $i - $(i + n)
			if (d < 0) d = -d; r = d / $i; if (r > m) m = r } } END { printf "%.2g", m; exit m > tol + 0 }'
	}
	if got=$(cmp_losses "$tmp/ml-fp32:1e-2" "$tmp/ml-mixed:1e-2") && ! ctl=$(cmp_losses "$tmp/ml-fp32:1e-2" "$tmp/ml-mixed:1e-9")
	then
		echo "ok: losses, mixed $label: within $got of fp32's; the control (lr 1e-9) off by $ctl"
		checked=$((checked + 1))
	else
		echo "$name: FAIL: losses, mixed $label: mixed against fp32 ${got:-?}, the control ${ctl:-?} ($tol)" >&2
		status=1
	fi
}
mixed_losses 1e-5 "q,v N=1" --lora-r 4 --world 1 --schemes dp,zero3 --unit layer
mixed_losses 1e-4 "all-linear N=2 K=2" --lora-r 4 --lora-targets all-linear --world 2 --schemes zero2 --unit layer \
	--grad-accum 2 --recompute full
# with dropout (refused on 1659c3a; seen: 3.8e-6, the control 9.7e-4)
mixed_losses 1e-5 "q,v N=1 dropout 0.1" --lora-r 4 --lora-dropout 0.1 --world 1 --schemes dp,zero3 --unit layer

# 3. The base's bytes (tests/freeze_lib.sh): llama-tiny's embedding and
# block 0's base are elements 1..n of both vectors (no adapter before
# them); block 0's adapters (q, v at r 4: 4·(64 + 64) + 4·(64 + 32) = 896
# elements) follow.
fz_units
frozen_check "q,v r 4, fp32 zero2 N=2" 1 "$n" $((n + 1)) $((n + 896)) --lora-r 4 --precision fp32 \
	--schemes zero2 --world 2 --unit layer
frozen_check "q,v r 4, mixed zero2 N=2" 1 "$n" $((n + 1)) $((n + 896)) --lora-r 4 --precision mixed \
	--schemes zero2 --world 2 --unit layer
frozen_check "all-linear r 4, fp32 zero3 N=1 K=2" 1 "$n" $((n + 1)) $((n + 896)) --lora-r 4 \
	--lora-targets all-linear --precision fp32 --schemes zero3 --world 1 --unit layer --grad-accum 2
# --freeze blocks:0-0 (refused on 1659c3a): block 0's adapters (elements
# n + 1 .. n + 896: q's lora_A, lora_B, v's) frozen too, the same after 1
# and 3 steps, their lora_B (n + 257 .. n + 512, n + 769 .. n + 896) still
# PEFT's zeros; block 1's (after its base, b0 more) moved
frozen_check "q,v r 4, blocks:0-0 frozen, fp32 zero2 N=2" 1 "$n" $((n + 896 + b0 + 1)) $((n + 896 + b0 + 896)) \
	--lora-r 4 --freeze blocks:0-0 --precision fp32 --schemes zero2 --world 2 --unit layer
a=$(cmp_range "$tmp/w1" "$tmp/w3" $((n + 1)) $((n + 896)))
zeros=$(awk -v n="$n" '(NR > n + 256 && NR <= n + 512) || (NR > n + 768 && NR <= n + 896) { k++; z += $1 == 0 }
	END { print k == z && k == 384 ? "zeros" : "not zeros" }' "$tmp/w3")
if [ "$a" = same ] && [ "$zeros" = zeros ]; then
	echo "ok: blocks:0-0 frozen: block 0's adapters the same after 1 and 3 steps, their lora_B zeros"
else
	echo "$name: FAIL: blocks:0-0 frozen: block 0's adapters after 1 and 3 steps: $a; lora_B: $zeros" >&2
	status=1
fi

# 4. The resident bytes by hand: dp N = 1, fp32 Adam: the base's params
# (4 bytes an element, the run without --lora-r's param32) and 16 bytes a
# trained element, PEFT's count.
resident() {
	"$zerosim" measure --model "$llama" --seq 16 --batch 2 --steps 1 --world 1 --schemes dp --precision fp32 "$@" \
		--out "$tmp/r.json" || exit 99
	tr -d ' \n\t' <"$tmp/r.json" | grep -o "\"resident_breakdown\":{[^}]*}" | head -1 |
		grep -o '"[a-z0-9_]*":[0-9]*' | awk -F: '{ s += $2 } END { print s }'
}
base=$(resident) # every parameter trained: 16 bytes each, Ψ 223,552
base=$((base / 16 * 4))
for row in "1792 --lora-r 4" "18688 --lora-r 8 --lora-targets all-linear"; do
	t=${row%% *} opts=${row#* }
	# shellcheck disable=SC2086
	got=$(resident $opts) want=$((base + 16 * t))
	if [ "$got" = "$want" ]; then
		echo "ok: resident with $opts: $got = 4 · 223,552 + 16 · $t"
	else
		echo "$name: FAIL: resident with $opts: $got, by hand $want (4 · 223,552 + 16 · $t)" >&2
		status=1
	fi
done
# --freeze blocks:0-0 (refused on 1659c3a): block 0's 896 adapter
# elements frozen, their params alone (4 bytes each), no grad or state
got=$(resident --lora-r 4 --freeze blocks:0-0) want=$((base + 4 * 896 + 16 * 896))
if [ "$got" = "$want" ]; then
	echo "ok: resident with --lora-r 4 --freeze blocks:0-0: $got = 4 · 223,552 + 4 · 896 + 16 · 896"
else
	echo "$name: FAIL: resident with --lora-r 4 --freeze blocks:0-0: $got, by hand $want" \
		"(4 · 223,552 + 4 · 896 + 16 · 896)" >&2
	status=1
fi
# mixed (refused on 4ac954d): the base's fp16 params, 2 bytes each
got=$(resident --lora-r 4 --precision mixed) want=$((base / 2 + 16 * 1792))
if [ "$got" = "$want" ]; then
	echo "ok: resident with --lora-r 4 --precision mixed: $got = 2 · 223,552 + 16 · 1792"
else
	echo "$name: FAIL: resident with --lora-r 4 --precision mixed: $got, by hand $want (2 · 223,552 + 16 · 1792)" >&2
	status=1
fi

# QLoRA's 4-bit base (s51): llama-tiny's 14 base linear layers (q and o
# 64 x 64, k and v 32 x 64, gate, up and down 176 x 64, a block; from
# transformers' modeling_llama.py, not read from zerosim) lose their 4
# (mixed 2) bytes an element and hold what bitsandbytes stores for a
# layer of n in b = n / 64 blocks: n/2 + 4b + 64; with double
# quantization n/2 + b + 4 ceil(b/256) + 4 + 1024 + 64, and the one
# 1024-byte dynamic map
nf4_held() { # DQ: bitsandbytes' bytes of llama-tiny's 4-bit base
	echo "$1" | awk '{ s = 0
		for (l = 0; l < 2; l++) for (i = 1; i <= 7; i++) {
			n = (i == 1 || i == 4) ? 4096 : (i <= 3 ? 2048 : 11264); b = int((n + 63) / 64)
			s += $1 == "on" ? n / 2 + b + 4 * int((b + 255) / 256) + 4 + 1024 + 64 : n / 2 + 4 * b + 64 }
		print s + ($1 == "on" ? 1024 : 0) }'
}
for row in "fp32 4 off" "fp32 4 on" "mixed 2 off"; do
	set -- $row
	got=$(resident --lora-r 4 --quant-base nf4 --double-quant "$3" --precision "$1")
	want=$((base / 4 * $2 + 16 * 1792 - $2 * 92160 + $(nf4_held "$3")))
	if [ "$got" = "$want" ]; then
		echo "ok: resident with --lora-r 4 --quant-base nf4 --double-quant $3, $1: $got = $2 · (223,552 - 92,160)" \
			"+ 16 · 1792 + $(nf4_held "$3")"
	else
		echo "$name: FAIL: resident with --lora-r 4 --quant-base nf4 --double-quant $3, $1: $got, by hand $want" >&2
		status=1
	fi
done
# and the peak (dp N = 1, fp32: the loss's backward, the dequantized
# scratch held from the forward's start to the backward's end): the
# LoRA run's less the same weights' difference plus that scratch, the
# largest 4-bit tensor, gate and up fused (the step's one product reads
# both), 2 · 176 · 64 fp32 elements
peak() { tr -d ' \n\t' <"$tmp/r.json" | grep -o '"peak_bytes":[0-9]*' | head -1 | cut -d: -f2; }
resident --lora-r 4 >/dev/null
p0=$(peak)
resident --lora-r 4 --quant-base nf4 >/dev/null
fz_hand "peak with --lora-r 4 --quant-base nf4" "$(peak)" $((p0 - 4 * 92160 + $(nf4_held off) + 4 * 2 * 176 * 64)) \
	"$p0 - 4 · 92,160 + $(nf4_held off) + 4 · 22,528"
# and under DeepSpeed's ZeRO-3 at N = 2, fp32, --ds-persist 0 (ds3_lora.sh's
# sum with each 4-bit layer's n elements replaced by its codes, n/8 fp32
# elements, as bitsandbytes' quant_storage float32 holds them): 4 S3 for
# every tensor's partition, S3 = (223,552 - 92,160 + 92,160/8 + 1,792)/2;
# 16 S3_t for the adapters' (896); the QuantState whole on every rank,
# bitsandbytes' bytes less the codes' n/2; 4 · 5e8 the reduce bucket
"$zerosim" measure --model "$llama" --framework deepspeed --schemes zero3 --unit layer --lora-r 4 --quant-base nf4 \
	--precision fp32 --world 2 --ds-persist 0 --seq 16 --batch 2 --steps 2 --out "$tmp/r.json" || exit 99
S3=$(((223552 - 92160 + 92160 / 8 + 1792) / 2)) qs=$(($(nf4_held off) - 92160 / 2))
fz_hand "resident under deepspeed zero3 N=2 with --quant-base nf4" \
	"$(tr -d ' \n\t' <"$tmp/r.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)" \
	$((4 * S3 + 16 * 896 + qs + 4 * 500000000)) "4 · $S3 + 16 · 896 + $qs + 4 · 5e8"

# 5. Refused: one line, exit 2, no file.
fz_refuse_with="--lora-r 4"
fz_refuse "give --unit layer" --precision fp32 --unit model
fz_refuse "zero3 at N = 2" --precision fp32 --schemes zero3 --world 2 --unit layer
fz_refuse "precision amp-bf16 is PyTorch's autocast, the PyTorch step's (give --framework torch" --precision amp-bf16 --unit layer
fz_refuse "under --framework paper: its term 'embeddings' matches no adapter" --precision fp32 --freeze embeddings --unit layer
fz_refuse "freezes every one of llama-tiny's 8 adapter tensors" --precision fp32 --freeze blocks:0-1 --unit layer
fz_refuse "trainable adapters are not one run" --precision fp32 --lora-targets all-linear --freeze '*.v_proj.lora_*' \
	--unit layer
fz_refuse "deepspeed with --offload optimizer: not described" --precision fp32 --framework deepspeed --schemes zero2 \
	--offload optimizer --world 2
fz_refuse "no linear layer of llama-tiny matches" --precision fp32 --lora-targets lm_head --unit layer
fz_refuse "--lora-r under --framework deepspeed with --offload optimizer: not described" --precision fp32 \
	--quant-base nf4 --framework deepspeed --schemes zero3 --offload optimizer --world 2 --unit layer
# 6. The report of a paper LoRA run (its transformer section's LoRA
# paragraph, Ψ_t the adapters'): tests/report_lora.sh.
echo "$name: $configs configurations, $points points of theory = measure; $checked loss comparisons"
exit $status
