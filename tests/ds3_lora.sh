#!/bin/sh
# ds3_lora — LoRA (--lora-r) under DeepSpeed's own step at ZeRO-3
# (--framework deepspeed --schemes zero3, --wrapper auto; docs/finetune.md,
# "LoRA under DeepSpeed's ZeRO-3"; refused on 823a535, where the first
# forward read lora_A's weight through a NULL pointer: the adapters ran
# inside their base module's hooks, before the coordinator had gathered
# them).
# 1. theory = measure to the byte (tests/json_agree: resident, peak, every
#    category, every phase's peak, comm) on report/models' llama-tiny and
#    gpt2-tiny: default targets and all-linear, r 4 and 8, N = 1, 2, 3,
#    fp32 and mixed, K = 1, 2, 3, recompute none, selective and full,
#    --lora-dropout, the default persistence threshold (every tensor of
#    the tiny models persists) and --ds-persist 0 (none does: each adapter
#    gathered and released around its own module), buckets of 5e8 and
#    3000 elements.
# 2. Training: the losses of 3 steps equal ZeRO-2's of the same step bit
#    for bit (the weights are stage 2's; N = 2 and 3, dropout, K = 2,
#    mixed with full recompute), and those of DeepSpeed's engine over the
#    PyTorch step (--wrapper deepspeed --schemes zero2 at --seq T + 1, the
#    step tests/paper_lora.sh holds the own step's ZeRO-2 to) within 1e-5;
#    the control: the same without --lora-r differs.
# 3. By hand: the bytes between steps of llama-tiny q,v r 4, fp32, N = 2
#    (every tensor's elements even: S3 = Ψ/2 with Ψ = 223,552 + 1,792
#    adapter elements, S3_t = 1,792/2): 4 S3 for the fp32 partitions of
#    every tensor, frozen ones too (partition_parameters.py partitions
#    them all), 4·2·S3 for the persistent tensors gathered whole, 16 S3_t
#    for the adapters' grad, fp32 and Adam partitions (stage3.py's fp16
#    groups hold requires_grad tensors only, 491-495 at 38327e0), 4·5e8
#    for the reduce bucket.
# 4. What is not built is refused with one line, exit 2, nothing written.
# 5. LoRA under DeepSpeed's engine over the PyTorch step (--wrapper
#    deepspeed --schemes zero3, util/ag_ds3.c; docs/finetune.md, "LoRA
#    under --wrapper deepspeed --schemes zero3"): theory = measure to the
#    byte (gpt2 c_attn N = 1, 2; llama all-linear with --lora-dropout 0.1,
#    N = 1, 2, 3; llama q,v with block 0's adapters frozen, --freeze
#    blocks:0-0, N = 1, 2); tests/ds3_torch.sh holds it to PyTorch 1.13.
# About 10 s.
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=ds3_lora
. "${srcdir:-.}/tests/ft_lib.sh"
. "${srcdir:-.}/tests/freeze_lib.sh"
ft_configs 256 160 # $tmp/llama.json: the PyTorch step's tiny llama (dropout 0)
ds="--framework deepspeed --schemes zero3 --unit layer"

# 1. theory = measure
fz_agree $ds --model "$llama" --lora-r 4 --precision fp32 --world 1,2,3
fz_agree $ds --model "$llama" --lora-r 4 --precision fp32 --world 1,2,3 --ds-persist 0
fz_agree $ds --model "$llama" --lora-r 8 --lora-targets all-linear --precision mixed --world 1,2,3 --ds-persist 0 \
	--grad-accum 2
fz_agree $ds --model "$llama" --lora-r 4 --lora-targets o_proj,down_proj --precision fp32 --world 1,2,3 \
	--ds-persist 0 --recompute full
fz_agree $ds --model "$llama" --lora-r 4 --precision fp32 --world 2,3 --ds-persist 0 --recompute selective \
	--lora-dropout 0.1
fz_agree $ds --model "$gpt2" --lora-r 4 --precision fp32 --world 1,2,3 --ds-persist 0
fz_agree $ds --model "$gpt2" --lora-r 8 --lora-targets all-linear --precision mixed --world 1,2,3 --ds-persist 0 \
	--lora-dropout 0.1 --recompute full
fz_agree $ds --model "$gpt2" --lora-r 4 --lora-targets all-linear --precision fp32 --world 3 --ds-reduce-bucket 3000 \
	--grad-accum 3

# 5. theory = measure under --wrapper deepspeed --schemes zero3
wds3="--framework deepspeed --wrapper deepspeed --schemes zero3 --torch-version 1.13 --torch-device cpu --precision fp32"
fz_agree $wds3 --model "$gpt2" --lora-r 4 --world 1,2
fz_agree $wds3 --model "$llama" --lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --world 1,2,3
fz_agree $wds3 --model "$llama" --lora-r 4 --freeze blocks:0-0 --world 1,2

# 2. Training
losses() { fz_losses "$1" | tr '\n' ' '; }
train() { # WHAT OPTIONS...: zero3 against zero2, bit for bit
	what=$1
	shift
	# shellcheck disable=SC2086
	"$zerosim" measure --model "$llama" $ds --lora-r 4 --steps 3 --batch 2 --seq 16 --lr 1e-2 "$@" \
		--out "$tmp/z3.json" &&
		"$zerosim" measure --model "$llama" --framework deepspeed --schemes zero2 --unit layer --lora-r 4 --steps 3 \
			--batch 2 --seq 16 --lr 1e-2 "$@" --out "$tmp/z2.json" || exit 99
	if [ "$(losses "$tmp/z3.json")" = "$(losses "$tmp/z2.json")" ] && [ -n "$(losses "$tmp/z3.json")" ]; then
		echo "ok: $what: zero3's losses zero2's bit for bit ($(losses "$tmp/z3.json"))"
	else
		echo "$name: FAIL: $what: zero3 $(losses "$tmp/z3.json"), zero2 $(losses "$tmp/z2.json")" >&2
		status=1
	fi
}
train "llama q,v N=2 fp32" --world 2 --precision fp32
train "llama all-linear N=3 K=2 dropout 0.1" --world 3 --precision fp32 --lora-targets all-linear --grad-accum 2 \
	--lora-dropout 0.1 --ds-persist 0
train "llama q,v N=1 mixed full recompute" --world 1 --precision mixed --recompute full
# against DeepSpeed's engine over the PyTorch step (at T + 1: the own
# step scores T tokens of a row), and the control without --lora-r
common="--model $tmp/llama.json --framework deepspeed --world 2 --precision fp32 --batch 2 --steps 3 --lr 1e-2"
common="$common --lora-r 4 --lora-dropout 0.1"
# shellcheck disable=SC2086
"$zerosim" measure $common --schemes zero2 --wrapper deepspeed --torch-version 1.13 --torch-device cpu --attn eager \
	--seq 32 --out "$tmp/a.json" &&
	"$zerosim" measure $common --schemes zero3 --unit layer --seq 31 --out "$tmp/b.json" || exit 99
if fz_close "$tmp/a.json" "$tmp/b.json"; then
	echo "ok: llama q,v dropout 0.1 N=2 zero3 against --wrapper deepspeed zero2: relative$(cat "$tmp/cmp")"
else
	echo "$name: FAIL: zero3 against --wrapper deepspeed zero2: relative$(cat "$tmp/cmp")" >&2
	status=1
fi
# shellcheck disable=SC2086
"$zerosim" measure $(printf %s "$common" | sed 's/--lora-r 4 --lora-dropout 0.1//') --schemes zero3 --unit layer \
	--seq 31 --out "$tmp/c.json" || exit 99
if fz_close "$tmp/a.json" "$tmp/c.json"; then
	echo "$name: FAIL: the control (zero3 without --lora-r) agrees with the LoRA run: relative$(cat "$tmp/cmp")" >&2
	status=1
else
	echo "ok: the control without --lora-r differs: relative$(cat "$tmp/cmp")"
fi

# 3. By hand: llama-tiny q,v r 4, fp32, N = 2
"$zerosim" measure --model "$llama" $ds --lora-r 4 --precision fp32 --world 2 --seq 16 --batch 2 --steps 2 \
	--out "$tmp/h.json" || exit 99
S3=$(((223552 + 1792) / 2)) S3t=$((1792 / 2))
fz_hand "llama q,v r 4 N=2 resident" "$(tr -d ' \n\t' <"$tmp/h.json" | grep -o '"resident_bytes":[0-9]*' | head -1 |
	cut -d: -f2)" $((4 * S3 + 4 * 2 * S3 + 16 * S3t + 4 * 500000000)) "4 S3 + 8 S3 + 16 S3_t + 4 B (S3 $S3, S3_t $S3t)"

# 4. Refused
fz_refuse_with="--lora-r 4 --framework deepspeed --schemes zero3 --world 2"
fz_refuse "with --offload params: not described" --unit layer --offload params
fz_refuse "--ds-overlap-comm with --wrapper deepspeed --schemes zero3: not built yet" --wrapper deepspeed \
	--torch-version 1.13 --torch-device cpu --precision fp32 --ds-overlap-comm off
fz_refuse "give --unit layer" --unit model
fz_refuse "frozen adapters" --unit layer --freeze blocks:0-0
# DeepSpeed's own first step at N > 1 (util/ag_ds3.c's leaf-module
# gathers) takes the trained parameters alone: with LoRA or --freeze
# its --steps 1 is refused (the steady step from step 1 on, above)
wds3s1="--wrapper deepspeed --torch-version 1.13 --torch-device cpu --precision fp32 --steps 1"
# shellcheck disable=SC2086
fz_refuse "--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over --lora-r has no first step" $wds3s1
fz_refuse_with="--framework deepspeed --schemes zero3 --world 1,2"
# shellcheck disable=SC2086
fz_refuse "--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over --freeze has no first step" $wds3s1 \
	--freeze blocks:0-0
echo "$name: $configs configurations, $points points of theory = measure"
exit $status
