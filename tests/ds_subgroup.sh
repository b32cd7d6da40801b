#!/bin/sh
# ds_subgroup — DeepSpeed ZeRO-3's optimizer sub groups on zerosim's own
# step (--ds-sub-group-size, zero_optimization.sub_group_size, default
# 1e9: runtime/zero/config.py 168, passed by engine.py 1778; docs/
# schedule.md, "deepspeed", ZeRO-3's step). stage3.py
# _create_fp16_sub_groups (943-966) cuts the trainable parameters by
# their partition_numel, ceil(n/N), closing a sub group after the one
# that brings its sum to the size or more; step() prepares, steps and
# releases one sub group after another (2111-2126), so the fp32 gradient
# (and in mixed precision its flat fp16 copy) is the largest sub group's,
# not the partition's.
#
# 1. theory = measure to the byte (tests/json_agree with --timeline: the
#    resident, the peak, every category, every rank, the host bytes, each
#    phase's peak) on the default MLP (64,256,64: 16,384, 256, 16,384 and
#    64 elements) with 2, 3 and 4 sub groups (a parameter larger than the
#    size among them), and on report/models' gpt2-tiny and llama-tiny,
#    N = 1, 2, 3, fp32 and mixed, both units, --offload optimizer and
#    params, --freeze, --grad-accum, --recompute full.
# 2. By hand, from the shapes and DeepSpeed's rule (not from zerosim):
#    the optimizer phase's peak on the MLP (N = 1 and 2, mixed and fp32,
#    a one-tensor sub group's flatten a view: no copy in fp32; the
#    overflow check and the norm's float64 copies before the loop), the
#    offloaded host peak, and theory's llama-2-70b at N = 8, its sub
#    groups counted in awk from the config's shape.
# 3. The weights and losses are the same bits whatever the sub groups
#    (the same elementwise arithmetic, in another order of sub groups).
# 4. What is not built is refused with one line, exit 2.
# A few seconds. Exit 0 pass, 1 fail, 99 hard error.
set -u
name=ds_subgroup tag=dssub
. "${srcdir:-.}/tests/agree_lib.sh"
src=${srcdir:-.}
gpt2=$src/report/models/gpt2-tiny.json llama=$src/report/models/llama-tiny.json
for f in "$gpt2" "$llama" "$src/data/models/llama-2-70b.json"; do
	[ -r "$f" ] || { echo "$name: $f is missing" >&2; exit 99; }
done
status=0
fail() {
	echo "$name: FAIL: $*" >&2
	status=1
}
ds="--framework deepspeed --schemes zero3"

# 1. theory = measure
configs=0 points=0
agree_on() {
	configs=$((configs + 1))
	# shellcheck disable=SC2086
	"$zerosim" measure $ds --steps 2 --timeline --quiet "$@" --out "$tmp/m.json" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	# shellcheck disable=SC2086
	"$zerosim" theory $ds --steps 2 "$@" --out "$tmp/t.json" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	if "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out"; then
		points=$((points + $(grep -o '[0-9]* points' "$tmp/out" | cut -d' ' -f1)))
	else
		fail "theory and measure differ: $*: $(cat "$tmp/out")"
	fi
}
# the MLP at N = 1: 16500 two sub groups of 16,640 and 16,448; 10000
# three (16,384 alone, larger than the size; 256 + 16,384; 64); 0 one a
# tensor
for size in 16500 10000 0; do
	for precision in mixed fp32; do
		agree_on --world 1,2,3 --unit model,layer --precision $precision --ds-sub-group-size $size --ds-persist 0
		agree_on --world 1,2,3 --precision $precision --ds-sub-group-size $size
		agree_on --world 1,2,3 --precision $precision --ds-sub-group-size $size --offload optimizer
		agree_on --world 1,2,3 --precision $precision --ds-sub-group-size $size --offload params --ds-persist 0
	done
done
tf="--seq 16 --batch 2 --world 1,2,3 --ds-persist 100"
for precision in mixed fp32; do
	agree_on --model "$gpt2" $tf --precision $precision --ds-sub-group-size 5000
	agree_on --model "$llama" $tf --precision $precision --ds-sub-group-size 20000 --unit layer
	agree_on --model "$llama" $tf --precision $precision --ds-sub-group-size 20000 --offload optimizer
	agree_on --model "$llama" $tf --precision $precision --ds-sub-group-size 20000 --freeze embeddings
	agree_on --model "$gpt2" $tf --precision $precision --ds-sub-group-size 3000 --grad-accum 2
	agree_on --model "$gpt2" $tf --precision $precision --ds-sub-group-size 3000 --recompute full
done
[ "$points" -ge 120 ] || fail "only $points points agree over $configs configurations"
echo "theory = measure: $configs configurations, $points points"

# 2. by hand. The optimizer phase's peak: the resident (nothing whole at
# --ds-persist 0 once step() released it) and the largest of what step()
# makes one after another (stage3.py 2086-2126): in mixed precision the
# overflow check's fp16 abs and isinf bool over the S grad slots, 3 bytes a
# slot (has_overflow 2208-2213); the norm's float64 copy of each grad
# partition, 8 bytes a slot of the largest tensor (get_grad_norm_direct
# 1794-1797); each sub group's fp32 gradient, 4 bytes a slot, with in
# mixed precision its flat fp16 copy, 2 more, where the sub group is more
# than one tensor.
phase() { # FILE: theory's optimizer phase peak of its first row
	tr -d ' \n\t' <"$1" | sed 's/.*"phase_peak_bytes":{[^}]*"optimizer":\([0-9]*\).*/\1/'
}
by_hand() { # EXPECTED OPTIONS...: theory's optimizer phase peak, and measure's timeline agrees (part 1)
	want=$1
	shift
	# shellcheck disable=SC2086
	"$zerosim" theory $ds --world 1 "$@" --out "$tmp/t.json" >/dev/null || { echo "$name: theory $*" >&2; exit 99; }
	got=$(phase "$tmp/t.json")
	[ "$got" = "$want" ] || fail "$*: the optimizer phase's peak is $got, by hand $want"
}
# mixed, N = 1: R = 33,088·(2 + 2 + 4 + 8) + 5e8·2 = 1,000,529,408; the
# check 33,088·3 = 99,264, the norm 16,384·8 = 131,072
by_hand 1000727936 --ds-persist 0                             # one sub group: 33,088·6 = 198,528
by_hand 1000660480 --ds-persist 0 --ds-sub-group-size 16500   # the norm (the sub groups 16,640·6 = 99,840)
by_hand 1000660480 --ds-persist 0 --ds-sub-group-size 10000   # the norm (256 + 16,384: 99,840; 16,384 alone: ·4)
by_hand 1000660480 --ds-persist 0 --ds-sub-group-size 0       # the norm (the largest alone: 16,384·4)
# fp32: R = 33,088·(4 + 4 + 4 + 8) + 5e8·4 = 2,000,661,760; no overflow
# check; a lone tensor's flatten and .to(float32) are the tensor itself
by_hand 2000794112 --ds-persist 0 --precision fp32                           # 33,088·4 = 132,352
by_hand 2000792832 --ds-persist 0 --precision fp32 --ds-sub-group-size 10000 # the norm (16,640·4 = 66,560)
by_hand 2000792832 --ds-persist 0 --precision fp32 --ds-sub-group-size 0     # the norm (nothing made)
# N = 2, mixed: slots 8,192, 128, 8,192, 32 (S = 16,544); R = 16,544·16 +
# 1e9 = 1,000,264,704; 8192: 8,192 alone (·4), 128 + 8,192 (·6 = 49,920),
# 32 alone; the check 16,544·3 = 49,632; the norm 8,192·8 = 65,536
"$zerosim" theory $ds --world 2 --ds-persist 0 --ds-sub-group-size 8192 --out "$tmp/t.json" >/dev/null || exit 99
got=$(phase "$tmp/t.json")
[ "$got" = 1000330240 ] || fail "N = 2: the optimizer phase's peak is $got, by hand 1,000,330,240 (R + 8,192·8)"
# offloaded (mixed): the grad partitions on the host, so the overflow
# check there (33,088·3 = 99,264), then the host copy of the fp32
# partition into the device's fp16 one, a sub group at a time (16,640·2);
# no norm copy (complete_grad_norm_calculation_for_cpu_offload): host
# resident 33,088·18 = 595,584, the peak that and 99,264
"$zerosim" measure $ds --world 1 --steps 2 --offload optimizer --ds-sub-group-size 16500 --quiet \
	--out "$tmp/m.json" || exit 99
tr -d ' \n\t' <"$tmp/m.json" | grep -q '"host_resident_bytes":595584,"host_peak_bytes":694848' ||
	fail "--offload optimizer, 16500: host bytes are not 595,584 and 694,848 (33,088·18 and + 33,088·3)"

# llama-2-70b at N = 8 (mixed, Adam, --recompute full): DeepSpeed's rule in
# awk over zerosim's tensors (q, k, v and gate, up fused, as its layout
# holds them), each partition_numel n/8. R − Ψ_persist·p = 16·S₃ + 1e9,
# S₃ = 68,976,648,192/8; the step then holds the largest of the overflow
# check's 3·S₃, the largest tensor's float64 copy (8 bytes a slot) and the
# largest sub group's fp32 gradient and flat fp16 copy (6 bytes a slot).
cfg=$src/data/models/llama-2-70b.json
val() { tr -d ' \n\t' <"$cfg" | sed "s/.*\"$1\":\([0-9]*\).*/\1/"; }
largest=$(awk -v d="$(val hidden_size)" -v I="$(val intermediate_size)" -v L="$(val num_hidden_layers)" \
	-v V="$(val vocab_size)" -v h="$(val num_attention_heads)" -v kvh="$(val num_key_value_heads)" 'BEGIN {
	N = 8; size = 1e9; kv = d / h * kvh; n = 0
	p[n++] = V * d
	for (l = 0; l < L; l++) { p[n++] = d; p[n++] = (d + 2 * kv) * d; p[n++] = d * d; p[n++] = d
		p[n++] = 2 * I * d; p[n++] = d * I }
	p[n++] = d; p[n++] = V * d
	for (i = 0; i < n; i++) { s = int((p[i] + N - 1) / N); total += s; if (s > smax) smax = s }
	for (i = 0; i < n; i++) { s = int((p[i] + N - 1) / N); run += s
		if (run >= size || i == n - 1) { if (run > big) big = run; run = 0 } }
	printf "%.0f %.0f %.0f\n", total, big, smax }')
set -- $largest
S3=$1 big=$2 smax=$3
[ "$S3" = 8622081024 ] || fail "llama-2-70b at N = 8: S₃ is $S3 by awk, 8,622,081,024 by hand"
step=$((3 * S3))
[ $((8 * smax)) -gt "$step" ] && step=$((8 * smax))
[ $((6 * big)) -gt "$step" ] && step=$((6 * big))
want=$((16 * S3 + 1000000000 + step))
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-$src} "$zerosim" theory $ds --model llama-2-70b --world 8 --seq 4096 --batch 1 \
	--recompute full --out "$tmp/t.json" >/dev/null || { echo "$name: theory llama-2-70b" >&2; exit 99; }
got=$(phase "$tmp/t.json")
[ "$big" = 1029721088 ] && [ "$smax" = 58720256 ] && [ "$got" = "$want" ] && [ "$got" = 164819539456 ] ||
	fail "llama-2-70b N = 8: the optimizer phase's peak is $got, by hand $want (138,953,296,384 + 3·S₃; largest sub group $big, largest tensor slots $smax: gate and up fused, 2·28,672·8,192/8)"
echo "by hand: the MLP's, the offloaded host's and llama-2-70b's (largest sub group $big) agree"

# 3. the same bits
bits() { tr -d ' \n\t' <"$1" | grep -o '"losses":\[[^]]*\]\|"weights_digest":"[^"]*"'; }
for run in "--world 1,2,3 --precision mixed" "--world 1,2,3 --precision fp32 --unit layer --ds-persist 0" \
	"--world 2 --offload optimizer" "--model $gpt2 --seq 16 --batch 2 --world 1,2 --ds-persist 100" \
	"--model $llama --seq 16 --batch 2 --world 1,3 --precision mixed --ds-persist 100"; do
	# shellcheck disable=SC2086
	"$zerosim" measure $ds $run --steps 3 --quiet --out "$tmp/a.json" || exit 99
	bits "$tmp/a.json" >"$tmp/a"
	[ -s "$tmp/a" ] || { echo "$name: no losses or digest in $tmp/a.json" >&2; exit 99; }
	for size in 20000 3000 0; do
		# shellcheck disable=SC2086
		"$zerosim" measure $ds $run --steps 3 --ds-sub-group-size $size --quiet --out "$tmp/b.json" || exit 99
		bits "$tmp/b.json" >"$tmp/b"
		cmp -s "$tmp/a" "$tmp/b" || fail "$run --ds-sub-group-size $size: other losses or weights than one sub group's"
	done
done
echo "the same losses and weights whatever the sub groups"

# 4. refused, one line, exit 2
refused() { # MESSAGE OPTIONS...
	msg=$1
	shift
	for cmd in measure theory; do
		"$zerosim" $cmd "$@" --out "$tmp/r.json" >/dev/null 2>"$tmp/err"
		rc=$?
		[ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF -- "$msg" "$tmp/err" ||
			fail "$cmd $*: exit $rc, '$(cat "$tmp/err")', not one line with '$msg'"
	done
}
refused "--ds-sub-group-size is a DeepSpeed setting: give --framework deepspeed" --ds-sub-group-size 5
refused "--ds-sub-group-size is ZeRO-3's sub_group_size: give --schemes zero3" --framework deepspeed \
	--schemes zero1,zero2 --ds-sub-group-size 5
refused "--ds-sub-group-size: '1.5' is not a number of elements (a whole number, 0 to 1e14)" $ds --ds-sub-group-size 1.5
refused "--ds-sub-group-size: '-1' is not a number of elements" $ds --ds-sub-group-size -1
refused "--ds-sub-group-size 5 with --wrapper deepspeed: its ZeRO-3 step builds DeepSpeed's default 1e9 alone so far" \
	$ds --wrapper deepspeed --world 1 --model "$gpt2" --precision fp32 --torch-version 1.13 --torch-device cpu \
	--ds-sub-group-size 5
"$zerosim" theory $ds --wrapper deepspeed --world 1 --model "$gpt2" --precision fp32 --torch-version 1.13 \
	--torch-device cpu --ds-sub-group-size 1e9 --seq 16 --batch 2 --out "$tmp/r.json" >/dev/null 2>"$tmp/err" ||
	fail "--wrapper deepspeed with --ds-sub-group-size 1e9 (the default it builds) refused: $(cat "$tmp/err")"
exit $status
